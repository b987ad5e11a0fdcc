//! `sluice filter -i IFACE --xdp`: the filter as an XDP program before the
//! kernel's stack, on the veth pair of [`Net`]. What it rejects must never
//! reach the host: Debian's tcpdump beside it, capturing everything that
//! arrives, must see exactly the frames libpcap accepts; and the program
//! must be gone from the interface when sluice ends, by Ctrl-C or SIGKILL.
#![forbid(unsafe_code)]

use super::net::{frames, libpcap_filter, Bg, Net};
use super::{corpus, filter_file, settle, tcpdump, text};
use std::time::Duration;

/// Whether an XDP program is attached to `vb` (as `ip link` shows it).
fn xdp_attached(net: &Net) -> bool {
    let o = net
        .cmd(&net.b, "ip", &["link", "show", "vb"])
        .output()
        .unwrap();
    let s = text(&o.stdout);
    s.contains("xdp") || s.contains("prog/")
}

#[test]
fn xdp_drops_before_the_stack_what_the_filter_rejects() {
    let Some(net) = Net::new("xdp") else {
        return;
    };
    let expr = "tcp port 80 or udp";
    let mut run = Bg::start(net.sluice(&["filter", "-i", "vb", "--xdp", "--count", expr]));
    run.listening();
    assert!(run.said("XDP pre-filter on vb"), "{}", run.stderr_now());
    assert!(xdp_attached(&net));
    // tcpdump with no filter, inbound only: what passed XDP.
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &["-Q", "in"]);
    // No VLAN tags (see the eBPF pre-filter test).
    let traffic = [corpus("kday4.pcap"), corpus("HSRP_election.pcap")];
    let sent: u64 = traffic.iter().map(|t| net.replay(t)).sum();
    settle();
    let t = dump.interrupt();
    let a = run.interrupt();
    let err = text(&a.stderr);
    assert!(a.status.success(), "{err}");
    let mut want = Vec::new();
    for (i, t) in traffic.iter().enumerate() {
        want.extend(libpcap_filter(t, expr, &net.file(&format!("w{i}.pcap"))));
    }
    assert!(
        !want.is_empty() && (want.len() as u64) < sent,
        "{} of {sent}",
        want.len()
    );
    // The host saw only the accepted frames, in order, byte for byte.
    assert_eq!(frames(&all), want, "{}", text(&t.stderr));
    assert_eq!(text(&a.stdout).trim(), want.len().to_string(), "{err}");
    // Detached when the run ended: now everything arrives.
    assert!(!xdp_attached(&net));
    let again = net.file("again.pcap");
    let dump = tcpdump(&net, &again, &["-Q", "in"]);
    let sent = net.replay(&traffic[0]);
    settle();
    dump.interrupt();
    assert_eq!(frames(&again).len() as u64, sent);
}

#[test]
fn a_killed_run_leaves_no_xdp_program_and_a_reload_swaps_it() {
    let Some(net) = Net::new("xdpkill") else {
        return;
    };
    let f = filter_file(&net, "udp");
    let mut run = Bg::start(net.sluice(&["filter", "-i", "vb", "--xdp", "-F", &f, "--count"]));
    run.listening();
    assert!(xdp_attached(&net));
    // SIGHUP: the new filter's XDP program replaces the old one.
    std::fs::write(&f, "tcp\n").unwrap();
    run.signal("HUP");
    assert!(run.said("filter changed"), "{}", run.stderr_now());
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &["-Q", "in"]);
    let traffic = corpus("kday4.pcap");
    net.replay(&traffic);
    settle();
    dump.interrupt();
    let want = libpcap_filter(&traffic, "tcp", &net.file("want.pcap"));
    assert!(!want.is_empty());
    assert_eq!(frames(&all), want);
    // SIGKILL: the kernel closes the link and detaches the program.
    run.signal("KILL");
    let out = run.wait();
    assert!(!out.status.success());
    let start = std::time::Instant::now();
    while xdp_attached(&net) && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!xdp_attached(&net), "still attached after SIGKILL");
}

#[test]
fn xdp_is_refused_where_it_cannot_run() {
    let Some(net) = Net::new("xdpno") else {
        return;
    };
    let o = net
        .sluice(&["filter", "-i", "any", "--xdp", "udp"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("--xdp: any: XDP runs on one Ethernet interface"));
    // Without -i it is a usage error, as other live options are.
    let o = net
        .sluice(&["filter", "-r", "x.pcap", "--xdp", "udp"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    // split: with -i, --engine ebpf and --count only; one interface.
    let f = filter_file(&net, "web\ttcp port 80");
    for (args, code, says) in [
        (
            vec!["-r", "x.pcap", "--engine", "ebpf", "--count"],
            2,
            "--xdp counts in the kernel",
        ),
        (vec!["-i", "vb", "--count"], 2, "--xdp counts in the kernel"),
        (
            vec!["-i", "any", "--engine", "ebpf", "--count"],
            1,
            "any: live capture runs eBPF on Ethernet",
        ),
    ] {
        let mut all = vec!["split", "--xdp", "--filters", &f];
        all.extend(args);
        let o = net.sluice(&all).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{all:?}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains(says),
            "{all:?}: {}",
            text(&o.stderr)
        );
    }
    assert!(!xdp_attached(&net));
}

/// `split -i --engine ebpf --count --xdp`: the filter set as an XDP chain
/// counts what vb receives and drops what no filter wants before the
/// stack; the socket's chain counts what vb sends. Each filter's count is
/// libpcap's over both directions' frames, and the host saw only frames
/// some filter wants.
#[test]
fn xdp_split_counts_both_directions_as_libpcap_does() {
    let Some(net) = Net::new("xdpsplit") else {
        return;
    };
    let (filters, chosen) = super::corpus_filters(&net.dir);
    let mut run = Bg::start(net.sluice(&[
        "split",
        "-i",
        "vb",
        "--engine",
        "ebpf",
        "--count",
        "--xdp",
        "--filters",
        filters.to_str().unwrap(),
    ]));
    run.listening();
    assert!(run.said("XDP filter set on vb"), "{}", run.stderr_now());
    assert!(xdp_attached(&net));
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &["-Q", "in"]);
    let inbound = [corpus("kday4.pcap"), corpus("HSRP_election.pcap")];
    let sent: u64 = inbound.iter().map(|t| net.replay(t)).sum();
    // Frames the host sends out of vb: the socket's chain counts them.
    let outbound = corpus("dns_udp.pcap");
    let o = net
        .cmd(
            &net.b,
            env!("CARGO_BIN_EXE_sluice"),
            &["replay", "-i", "vb", "-r", outbound.to_str().unwrap()],
        )
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    settle();
    let t = dump.interrupt();
    let a = run.interrupt();
    let err = text(&a.stderr);
    assert!(a.status.success(), "{err}");
    assert!(!xdp_attached(&net), "detached at the end");
    let counts = text(&a.stdout);
    let (mut matched, mut union) = (0, std::collections::BTreeSet::new());
    for (line, (name, expr)) in counts.lines().zip(&chosen) {
        let mut want = 0;
        for (i, t) in inbound.iter().chain([&outbound]).enumerate() {
            let hits = libpcap_filter(t, expr, &net.file(&format!("w{i}.pcap")));
            if i < inbound.len() {
                union.extend(hits.iter().cloned());
            }
            want += hits.len();
        }
        assert_eq!(line, format!("{name}\t{want}"), "{expr}\n{err}");
        matched += want;
    }
    assert_eq!(counts.lines().count(), chosen.len());
    assert!(matched > 0);
    // The host received exactly the frames some filter wants, in order.
    let wanted: Vec<_> = inbound
        .iter()
        .flat_map(|t| frames(t))
        .filter(|f| union.contains(f))
        .collect();
    assert!(wanted.len() as u64 <= sent);
    assert_eq!(frames(&all), wanted, "{}", text(&t.stderr));
}
