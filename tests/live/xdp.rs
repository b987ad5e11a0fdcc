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
    assert!(!xdp_attached(&net));
}
