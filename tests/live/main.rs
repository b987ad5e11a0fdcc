//! Live capture for real: a private network of two namespaces joined by a
//! veth pair, corpus captures sent over it with `sluice replay`, captured
//! on the other side by sluice and, beside it, by Debian's tcpdump. What
//! sluice keeps must be exactly the frames of tcpdump's capture that
//! libpcap accepts, byte for byte.

mod abi;
#[path = "../common/mod.rs"]
mod common;
mod daemon;
mod daemon_abi;
mod daemon_filters;
mod daemon_http;
mod daemon_memory;
mod daemon_ops;
mod ebpf_tree;
mod net;
mod xdp;

use std::collections::BTreeSet;

use net::{frames, libpcap_filter, stamps, Bg, Net};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// A capture of the shared corpus.
fn corpus(name: &str) -> PathBuf {
    common::manifest("../shared/conformance/pcaps").join(name)
}

/// Ethernet captures with VLAN-tagged frames (single and double tags),
/// TCP, UDP, ARP and routing protocols among them.
const CAPTURES: &[&str] = &[
    "various_gre.pcap",
    "rpvstp-trunk-native-vid5.pcap",
    "802.1ad_QinQ.pcap",
    "ipv4_tcp_http_xml.pcap",
    "ldp-common-session.pcap",
    "MSTP_Intra-Region_BPDUs.pcap",
    "NHRP_registration.pcap",
    "HSRP_election.pcap",
    "kday4.pcap",
    "dcb_ets.pcap",
    "icmp6-rfc8335.pcap",
    "bfd-sbfd.pcap",
    "mptcp-v0.pcap",
];

/// Send every capture of [`CAPTURES`]; returns the frames sent.
fn replay_all(net: &Net) -> u64 {
    CAPTURES.iter().map(|c| net.replay(&corpus(c))).sum()
}

/// Let the rings hand over their last blocks (tcpdump's ring waits up
/// to 1 s before it hands a block over, and loses a block not handed over
/// when it is interrupted).
fn settle() {
    std::thread::sleep(Duration::from_millis(1300));
}

/// tcpdump capturing everything on `vb` into `out`, with `extra` options.
fn tcpdump(net: &Net, out: &Path, extra: &[&str]) -> Bg {
    // -Z root: tcpdump would otherwise write its file as user tcpdump.
    let mut args = vec!["-Z", "root", "-i", "vb", "-w", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut bg = Bg::start(net.cmd(&net.b, "tcpdump", &args));
    bg.listening();
    bg
}

/// `sluice filter -i DEV --workers 1 -w OUT EXTRA...`, listening, saying
/// what it gave the kernel.
fn capture(net: &Net, dev: &str, out: &Path, extra: &[&str]) -> Bg {
    let mut args = vec![
        "filter",
        "-i",
        dev,
        "--workers",
        "1",
        "-w",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let mut cmd = net.sluice(&args);
    // Say what goes to the kernel.
    cmd.env("SLUICE_DEBUG", "1");
    let mut bg = Bg::start(cmd);
    bg.listening();
    bg
}

/// Send two corpus captures without VLAN tags (a tagged frame passes an
/// eBPF socket filter and is judged in user space, so the kernel's count
/// of such traffic is exact): the frames sent.
fn replay_untagged(net: &Net) -> u64 {
    net.replay(&corpus("kday4.pcap")) + net.replay(&corpus("HSRP_election.pcap"))
}

/// A `-F` file in `net`'s directory holding `expr`: its path.
fn filter_file(net: &Net, expr: &str) -> String {
    let f = net.file("filter.txt");
    std::fs::write(&f, format!("{expr}\n")).unwrap();
    f.to_str().unwrap().to_string()
}

/// Write `expr` into the `-F` file `f`, send each run SIGHUP, and wait
/// until each says `says`.
fn reload<'a>(f: &str, expr: &str, runs: impl IntoIterator<Item = &'a Bg>, says: &str) {
    std::fs::write(f, format!("{expr}\n")).unwrap();
    for run in runs {
        run.signal("HUP");
        assert!(run.said(says), "{}", run.stderr_now());
    }
}

/// The number in one of tcpdump's closing lines (`5 packets captured`).
fn stat(stderr: &str, what: &str) -> u64 {
    stderr
        .lines()
        .find(|l| l.ends_with(what))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no '{what}' line in: {stderr}"))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn single_filters_keep_exactly_what_libpcap_keeps() {
    let Some(net) = Net::new("single") else {
        return;
    };
    let exprs = [
        "tcp",
        "vlan",
        "vlan and ip",
        "not arp and not stp",
        "udp or icmp",
        "ether[12:2] = 0x8100 or ip[8] < 64",
    ];
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let mut runs: Vec<(Bg, PathBuf)> = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let out = net.file(&format!("s{i}.pcap"));
            let bg = capture(&net, "vb", &out, &[e]);
            (bg, out)
        })
        .collect();
    let sent = replay_all(&net);
    settle();
    let t = dump.interrupt();
    assert_eq!(
        frames(&all).len() as u64,
        sent,
        "tcpdump saw every frame sent"
    );
    for (i, (bg, out)) in runs.drain(..).enumerate() {
        let o = bg.interrupt();
        let err = text(&o.stderr);
        assert!(o.status.success(), "{}: {err}", exprs[i]);
        let got = frames(&out);
        let want = libpcap_filter(&all, exprs[i], &net.file(&format!("w{i}.pcap")));
        assert!(!want.is_empty(), "{}: the captures exercise it", exprs[i]);
        assert_eq!(got, want, "{}", exprs[i]);
        assert_eq!(stat(&err, "captured"), got.len() as u64, "{err}");
    }
    assert!(t.status.success());
}

/// Corpus expressions both Debian's libpcap and sluice compile for
/// Ethernet, one in three, without those where libpcap versions differ.
fn corpus_filters(dir: &Path) -> (PathBuf, Vec<(String, String)>) {
    let shared = common::manifest("../shared/conformance");
    let differ = std::fs::read_to_string(shared.join("expressions-version-diff.tsv")).unwrap();
    let differ: Vec<&str> = differ
        .lines()
        .filter_map(|l| l.split('\t').next())
        .collect();
    let all = std::fs::read_to_string(shared.join("expressions.txt")).unwrap();
    let sample = common::sample();
    let mut chosen = Vec::new();
    for (n, e) in all.lines().enumerate() {
        if n % 3 != 1 || differ.contains(&e) || e.trim().is_empty() {
            continue;
        }
        let ok = |o: std::process::Output| o.status.success();
        let libpcap = ok(Command::new("tcpdump")
            .args(["-r", &sample, "-d", e])
            .output()
            .unwrap());
        let ours = ok(common::sluice(&["filter", "-r", &sample, "-d", e]));
        if libpcap && ours {
            chosen.push((format!("c{n}"), e.to_string()));
        }
    }
    assert!(chosen.len() >= 150, "{} corpus filters", chosen.len());
    let file = dir.join("filters.txt");
    let lines: Vec<String> = chosen.iter().map(|(n, e)| format!("{n}\t{e}")).collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    (file, chosen)
}

/// `split -i` over corpus expressions with `workers` rings: each filter's
/// file holds what libpcap accepts of tcpdump's capture (in the same order
/// with one worker; the same frames in timestamp order with several).
/// Returns the run's standard error, tcpdump's capture and the frames
/// some filter wants (libpcap's).
/// `keep`: which of the corpus filters.
fn split_live(
    workers: &str,
    extra: &[&str],
    keep: fn(&str) -> bool,
) -> (String, Vec<Frame>, BTreeSet<Frame>) {
    let Some(net) = Net::new(&format!("split{workers}{}", extra.len())) else {
        return (String::new(), Vec::new(), BTreeSet::new());
    };
    let (filters, mut chosen) = corpus_filters(&net.dir);
    if !chosen.iter().all(|(_, e)| keep(e)) {
        chosen.retain(|(_, e)| keep(e));
        let lines: Vec<String> = chosen.iter().map(|(n, e)| format!("{n}\t{e}\n")).collect();
        std::fs::write(&filters, lines.concat()).unwrap();
    }
    let all = net.file("all.pcap");
    let out = net.file("out");
    let dump = tcpdump(&net, &all, &[]);
    let mut args = vec![
        "split",
        "-i",
        "vb",
        "--workers",
        workers,
        "--filters",
        filters.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--count",
    ];
    args.extend_from_slice(extra);
    let mut split = Bg::start({
        let mut c = net.sluice(&args);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    split.listening();
    let sent = replay_all(&net);
    settle();
    let o = split.interrupt();
    dump.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(frames(&all).len() as u64, sent);
    let counts = text(&o.stdout);
    let (mut nonempty, mut wanted) = (0, BTreeSet::new());
    for (name, expr) in &chosen {
        let path = out.join(format!("{name}.pcap"));
        let mut got = frames(&path);
        let mut want = libpcap_filter(&all, expr, &net.file(&format!("{name}.want.pcap")));
        assert!(
            counts.contains(&format!("{name}\t{}\n", want.len())),
            "{name} '{expr}': {counts}"
        );
        let ts = stamps(&path);
        assert!(
            ts.windows(2).all(|w| w[0] <= w[1]),
            "{name}: timestamp order"
        );
        if workers != "1" {
            got.sort();
            want.sort();
        }
        assert_eq!(got, want, "{name} '{expr}'");
        nonempty += usize::from(!want.is_empty());
        wanted.extend(want);
    }
    assert!(
        nonempty >= 40.min(chosen.len() / 8),
        "only {nonempty} filters matched anything"
    );
    (text(&o.stderr), frames(&all), wanted)
}

/// A frame as [`frames`] reads it: its bytes and its length on the wire.
type Frame = (Vec<u8>, u32);

#[test]
fn split_keeps_per_filter_what_libpcap_keeps() {
    split_live("1", &[], |_| true);
}

#[test]
fn split_with_two_fanout_workers_loses_and_duplicates_nothing() {
    split_live("2", &[], |_| true);
}

/// `split -i --engine ebpf --out-dir`: the whole set as the rings' eBPF
/// pre-filter; the files are libpcap's, and the kernel passed up only the
/// frames some filter wants and the tagged ones.
#[test]
fn split_behind_the_ebpf_chain_keeps_what_libpcap_keeps() {
    // Narrow filters, so that some frames are nobody's.
    let narrow = |e: &str| e.contains("port") || e.contains("host");
    let (err, all, wanted) = split_live("1", &["--engine", "ebpf"], narrow);
    if all.is_empty() {
        return;
    }
    assert!(err.contains("kernel pre-filter: eBPF, "), "{err}");
    // The kernel passed up what some filter wants, and frames whose VLAN
    // tag it took off (whole: user space judges them), nothing else.
    let passed = all.iter().filter(|f| wanted.contains(*f)).count() as u64;
    assert!(
        passed < all.len() as u64,
        "every frame is wanted: nothing to drop"
    );
    let received = stat(&err, "received by filter");
    let tagged = all
        .iter()
        .filter(|(f, _)| f.len() > 14 && [0x81, 0x88].contains(&f[12]))
        .count() as u64;
    assert!(
        received >= passed && received <= passed + tagged && received < all.len() as u64,
        "{received} received, {passed} wanted, {tagged} tagged\n{err}"
    );
}

#[test]
fn count_stops_after_n_accepted_packets() {
    let Some(net) = Net::new("count") else {
        return;
    };
    let all = net.file("all.pcap");
    let out = net.file("s.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let run = capture(&net, "vb", &out, &["-c", "7", "vlan"]);
    replay_all(&net);
    let o = run.wait();
    settle();
    dump.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = libpcap_filter(&all, "vlan", &net.file("w.pcap"));
    assert!(want.len() > 7);
    assert_eq!(frames(&out), want[..7].to_vec());
    assert_eq!(stat(&text(&o.stderr), "captured"), 7);
}

#[test]
fn duration_stops_the_capture_and_reports_counts_as_json() {
    let Some(net) = Net::new("duration") else {
        return;
    };
    let out = net.file("s.pcap");
    let start = Instant::now();
    let mut run = Bg::start(net.sluice(&[
        "filter",
        "-i",
        "vb",
        "--duration",
        "1.5",
        "--json",
        "-w",
        out.to_str().unwrap(),
    ]));
    run.listening();
    let sent = net.replay(&corpus("various_gre.pcap"));
    let o = run.wait();
    let took = start.elapsed();
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(10),
        "{took:?}"
    );
    let err = text(&o.stderr);
    let json = err
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["captured"].as_u64(), Some(sent));
    assert_eq!(v["received"].as_u64(), Some(sent));
    assert_eq!(v["dropped"].as_u64(), Some(0));
    assert_eq!(
        v["workers"].as_array().map(|w| w.len()),
        Some(sluice::live::cores())
    );
    assert_eq!(frames(&out).len() as u64, sent);
}

#[test]
fn sigint_mid_stream_loses_nothing_captured_before_it() {
    let Some(net) = Net::new("sigint") else {
        return;
    };
    let all = net.file("all.pcap");
    let out = net.file("s.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let run = capture(&net, "vb", &out, &[]);
    // About 2 s of traffic at 1,000 frames a second.
    let sender = send_slowly(&net, "various_gre.pcap", "1000", "20");
    std::thread::sleep(Duration::from_millis(800));
    // SIGUSR1: the counts so far on one line, and the capture goes on.
    run.signal("USR1");
    assert!(
        run.said(" packets received by filter, "),
        "{}",
        run.stderr_now()
    );
    let o = run.interrupt();
    let s = sender.wait();
    assert!(s.status.success(), "{}", text(&s.stderr));
    settle();
    dump.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let got = frames(&out);
    let seen = frames(&all);
    assert!(
        got.len() > 100 && got.len() < seen.len(),
        "{} of {}",
        got.len(),
        seen.len()
    );
    assert_eq!(
        got[..],
        seen[..got.len()],
        "a prefix of the traffic, none missing"
    );
    assert_eq!(stat(&text(&o.stderr), "captured"), got.len() as u64);
}

#[test]
fn any_device_gives_linux_cooked_v2_frames_as_libpcap() {
    let Some(net) = Net::new("any") else {
        return;
    };
    let all = net.file("all.pcap");
    let out = net.file("s.pcap");
    let args = ["-Z", "root", "-i", "any", "-w", all.to_str().unwrap()];
    let mut dump = Bg::start(net.cmd(&net.b, "tcpdump", &args));
    dump.listening();
    let run = capture(&net, "any", &out, &["ip or arp"]);
    let err = run.stderr_now();
    assert!(err.contains("LINUX_SLL2"), "{err}");
    // The filter runs in the kernel on the frames without their header.
    assert!(err.contains("kernel pre-filter: 8 instructions"), "{err}");
    replay_all(&net);
    settle();
    let o = run.interrupt();
    dump.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = libpcap_filter(&all, "ip or arp", &net.file("w.pcap"));
    assert!(!want.is_empty());
    assert_eq!(frames(&out), want);
}

#[test]
fn direction_in_and_out_as_tcpdump() {
    let Some(net) = Net::new("direction") else {
        return;
    };
    let mut runs = Vec::new();
    for dir in ["in", "out"] {
        let t = net.file(&format!("t-{dir}.pcap"));
        let s = net.file(&format!("s-{dir}.pcap"));
        let dump = tcpdump(&net, &t, &["-Q", dir]);
        let mut run =
            Bg::start(net.sluice(&["filter", "-i", "vb", "-Q", dir, "-w", s.to_str().unwrap()]));
        run.listening();
        runs.push((dump, run, t, s));
    }
    // Into vb from the other side, and out of vb from its own side.
    net.replay(&corpus("various_gre.pcap"));
    let out_of_b = net
        .cmd(
            &net.b,
            env!("CARGO_BIN_EXE_sluice"),
            &[
                "replay",
                "-i",
                "vb",
                "-r",
                corpus("HSRP_election.pcap").to_str().unwrap(),
                "--topspeed",
            ],
        )
        .output()
        .unwrap();
    assert!(out_of_b.status.success(), "{}", text(&out_of_b.stderr));
    settle();
    let mut seen = Vec::new();
    for (dump, run, t, s) in runs {
        let o = run.interrupt();
        dump.interrupt();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let got = frames(&s);
        assert!(!got.is_empty());
        assert_eq!(got, frames(&t));
        seen.push(got);
    }
    assert_ne!(seen[0], seen[1]);
}

#[test]
fn kernel_prefilter_passes_what_tcpdumps_passes() {
    let Some(net) = Net::new("prefilter") else {
        return;
    };
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &["tcp"]);
    let mut with = Bg::start({
        let mut c = net.sluice(&["filter", "-i", "vb", "--count", "tcp"]);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    with.listening();
    let mut without =
        Bg::start(net.sluice(&["filter", "-i", "vb", "--count", "--no-kernel-filter", "tcp"]));
    without.listening();
    // No VLAN tags: on a tagged frame, libpcap's live kernel program
    // looks past the tag the kernel took off (see the README).
    let sent = replay_untagged(&net);
    settle();
    let a = with.interrupt();
    let b = without.interrupt();
    let t = dump.interrupt();
    let (a_err, b_err, t_err) = (text(&a.stderr), text(&b.stderr), text(&t.stderr));
    assert!(a_err.contains("kernel pre-filter: "), "{a_err}");
    assert!(!a_err.contains("kernel pre-filter: none"), "{a_err}");
    let tcp = frames(&all).len() as u64;
    assert!(tcp > 0 && tcp < sent);
    assert_eq!(
        stat(&a_err, "received by filter"),
        stat(&t_err, "received by filter")
    );
    assert_eq!(stat(&a_err, "received by filter"), tcp);
    assert_eq!(stat(&b_err, "received by filter"), sent);
    assert_eq!(text(&a.stdout).trim(), tcp.to_string());
    assert_eq!(text(&b.stdout).trim(), tcp.to_string());
}

#[test]
fn ebpf_prefilter_passes_what_tcpdumps_passes() {
    let Some(net) = Net::new("ebpf") else {
        return;
    };
    let all = net.file("all.pcap");
    let expr = "tcp port 80 or udp";
    let dump = tcpdump(&net, &all, &[expr]);
    let mut run = Bg::start({
        let mut c = net.sluice(&["filter", "-i", "vb", "--engine", "ebpf", "--count", expr]);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    run.listening();
    // No VLAN tags (a tagged frame passes the eBPF program and is judged
    // in user space: counted by the kernel, so not compared here).
    let sent = replay_untagged(&net);
    settle();
    let a = run.interrupt();
    let t = dump.interrupt();
    let (a_err, t_err) = (text(&a.stderr), text(&t.stderr));
    assert!(a.status.success(), "{a_err}");
    assert!(a_err.contains("kernel pre-filter: eBPF, "), "{a_err}");
    let wanted = frames(&all).len() as u64;
    assert!(wanted > 0 && wanted < sent, "{wanted} of {sent}");
    // The kernel's count is of what the eBPF program passed: exactly what
    // tcpdump's classic program passed, and what user space accepted.
    assert_eq!(
        stat(&a_err, "received by filter"),
        stat(&t_err, "received by filter")
    );
    assert_eq!(stat(&a_err, "received by filter"), wanted);
    assert_eq!(text(&a.stdout).trim(), wanted.to_string());
}

/// `split -i --engine ebpf --count`: the filter set as one eBPF chain,
/// the rings' socket filter, counts every frame in the kernel and passes
/// none to user space (no VLAN tags in these captures); its counts equal
/// the default engine's and tcpdump's (libpcap) on what tcpdump captured.
#[test]
fn ebpf_split_counts_in_the_kernel_as_libpcap_does() {
    let Some(net) = Net::new("ebpfsplit") else {
        return;
    };
    let (filters, chosen) = corpus_filters(&net.dir);
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let mut run = Bg::start({
        let mut c = net.sluice(&[
            "split",
            "-i",
            "vb",
            "--engine",
            "ebpf",
            "--count",
            "--filters",
            filters.to_str().unwrap(),
        ]);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    run.listening();
    let sent = net.replay(&corpus("kday4.pcap")) + net.replay(&corpus("HSRP_election.pcap"));
    settle();
    let a = run.interrupt();
    let t = dump.interrupt();
    let err = text(&a.stderr);
    assert!(a.status.success(), "{err}");
    assert!(t.status.success());
    assert!(err.contains("kernel pre-filter: eBPF, "), "{err}");
    // Nothing reached user space.
    assert_eq!(stat(&err, "received by filter"), 0, "{err}");
    assert_eq!(frames(&all).len() as u64, sent);
    let kernel = text(&a.stdout);
    let default = text(
        &common::sluice(&[
            "split",
            "--count",
            "--filters",
            filters.to_str().unwrap(),
            "-r",
            all.to_str().unwrap(),
        ])
        .stdout,
    );
    assert_eq!(kernel, default);
    let mut matched = 0;
    for (line, (name, expr)) in kernel.lines().zip(&chosen) {
        let want = libpcap_filter(&all, expr, &net.file("w.pcap")).len();
        assert_eq!(line, format!("{name}\t{want}"), "{expr}");
        matched += want;
    }
    assert!(matched > 0);
}

#[test]
fn ebpf_prefilter_on_the_any_device_passes_what_tcpdumps_passes() {
    let Some(net) = Net::new("ebpfany") else {
        return;
    };
    // The protocol and the packet type come from the socket buffer, the
    // ports from the frame past the cooked header.
    let expr = "(tcp port 80 or udp) and inbound";
    let all = net.file("all.pcap");
    let args = ["-Z", "root", "-i", "any", "-w", all.to_str().unwrap(), expr];
    let mut dump = Bg::start(net.cmd(&net.b, "tcpdump", &args));
    dump.listening();
    let out = net.file("s.pcap");
    let mut run = Bg::start({
        let mut c = net.sluice(&[
            "filter",
            "-i",
            "any",
            "--engine",
            "ebpf",
            "--workers",
            "1",
            "-w",
            out.to_str().unwrap(),
            expr,
        ]);
        c.env("SLUICE_DEBUG", "1");
        c
    });
    run.listening();
    assert!(
        run.said("kernel pre-filter: eBPF, "),
        "{}",
        run.stderr_now()
    );
    let sent = replay_untagged(&net);
    settle();
    let a = run.interrupt();
    let t = dump.interrupt();
    let (a_err, t_err) = (text(&a.stderr), text(&t.stderr));
    assert!(a.status.success(), "{a_err}");
    let want = frames(&all);
    assert!(
        !want.is_empty() && (want.len() as u64) < sent,
        "{} of {sent}",
        want.len()
    );
    assert_eq!(frames(&out), want);
    // The kernel passed exactly what tcpdump's classic program passed.
    assert_eq!(
        stat(&a_err, "received by filter"),
        stat(&t_err, "received by filter"),
        "{a_err}\n{t_err}"
    );
}

#[test]
fn the_interface_going_down_is_an_error_after_writing_what_came_before() {
    let Some(net) = Net::new("down") else {
        return;
    };
    let out = net.file("s.pcap");
    let run = capture(&net, "vb", &out, &[]);
    let sent = net.replay(&corpus("various_gre.pcap"));
    settle();
    let down = Command::new("ip")
        .args(["-n", &net.b, "link", "set", "vb", "down"])
        .status()
        .unwrap();
    assert!(down.success());
    let o = run.wait();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("sluice: vb: the interface went down"), "{err}");
    assert_eq!(frames(&out).len() as u64, sent);
}

#[test]
fn bad_interfaces_outputs_and_privileges_are_clear_errors() {
    let Some(net) = Net::new("errors") else {
        return;
    };
    let run = |args: &[&str]| {
        let o = net.sluice(args).output().unwrap();
        (o.status.code(), text(&o.stderr), o.stdout.is_empty())
    };
    // No such interface.
    let (code, err, quiet) = run(&["filter", "-i", "nosuch0", "tcp"]);
    assert_eq!((code, quiet), (Some(1), true), "{err}");
    assert_eq!(
        err,
        "sluice: nosuch0: no such interface (sluice list-interfaces shows them)\n"
    );
    // An output that cannot be created, before anything is captured.
    let (code, err, _) = run(&["filter", "-i", "vb", "-w", "/nonexistent/dir/x.pcap"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("/nonexistent/dir/x.pcap: No such file or directory"),
        "{err}"
    );
    // A bad expression leaves an existing output file alone.
    let keep = net.file("keep.pcap");
    std::fs::write(&keep, b"precious").unwrap();
    let (code, err, _) = run(&[
        "filter",
        "-i",
        "vb",
        "-w",
        keep.to_str().unwrap(),
        "tcp port",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(std::fs::read(&keep).unwrap(), b"precious");
    // A device that takes nothing: refused before capturing.
    let (code, err, _) = run(&["filter", "-i", "vb", "-w", "/dev/full"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cannot write output /dev/full: No space left on device"),
        "{err}"
    );
    // A disk that fills up while writing (a 32 KiB tmpfs in a mount
    // namespace of its own): an error naming the output, exit 1.
    let dir = net.file("small");
    std::fs::create_dir_all(&dir).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=32k sluice-test {d} && exec ip netns exec {ns} {bin} filter -i vb --workers 1 -w {d}/x.pcap",
        d = dir.display(),
        ns = net.b,
        bin = env!("CARGO_BIN_EXE_sluice")
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c", &script]);
    let mut full = Bg::start(cmd);
    full.listening();
    let sent = net.sender(&corpus("various_gre.pcap"), &["--topspeed", "--loop", "20"]);
    assert!({ sent }.output().unwrap().status.success());
    let o = full.wait();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("x.pcap: No space left on device (after "),
        "{err}"
    );
    // No permission: one line naming the capability.
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &net.b,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["filter", "-i", "vb", "tcp"])
        .output()
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("vb: you don't have permission") && err.contains("CAP_NET_RAW"),
        "{err}"
    );
}

#[test]
fn interfaces_are_listed_as_tcpdump_lists_them() {
    let Some(net) = Net::new("list") else {
        return;
    };
    let ours = text(&net.sluice(&["list-interfaces"]).output().unwrap().stdout);
    let theirs = text(&net.cmd(&net.b, "tcpdump", &["-D"]).output().unwrap().stdout);
    // tcpdump also lists capture sources that are not network interfaces
    // (netfilter, D-Bus, Bluetooth); sluice lists the interfaces.
    let strip = |l: &str| {
        l.split_once('.')
            .map(|x| x.1.to_string())
            .unwrap_or_default()
    };
    let names = ["vb ", "any ", "lo "];
    let pick = |all: &str| -> Vec<String> {
        all.lines()
            .map(strip)
            .filter(|l| names.iter().any(|n| l.starts_with(n)))
            .collect()
    };
    assert_eq!(pick(&ours), pick(&theirs));
    assert_eq!(pick(&ours).len(), 3, "{ours}");
    assert_eq!(
        ours,
        text(&net.sluice(&["filter", "-D"]).output().unwrap().stdout)
    );
}

/// Frames sent at `rate` per second, `loops` times the capture, in the
/// background.
fn send_slowly(net: &Net, capture: &str, rate: &str, loops: &str) -> Bg {
    Bg::start(net.sender(&corpus(capture), &["--rate", rate, "--loop", loops]))
}

#[test]
fn rotation_by_size_splits_a_live_capture_without_losing_a_frame() {
    let Some(net) = Net::new("rotate") else {
        return;
    };
    let whole = net.file("whole.pcap");
    let rot = net.file("rot.pcap");
    let plain = capture(&net, "vb", &whole, &[]);
    let rotating = capture(&net, "vb", &rot, &["-C", "1"]);
    // About 2.5 MB.
    let s = send_slowly(&net, "various_gre.pcap", "20000", "250").wait();
    assert!(s.status.success());
    settle();
    assert!(plain.interrupt().status.success());
    let o = rotating.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let mut files = vec![rot.clone()];
    for n in 1.. {
        let next = net.file(&format!("rot.pcap{n}"));
        if !next.exists() {
            break;
        }
        files.push(next);
    }
    assert!(files.len() >= 3, "{} files", files.len());
    let mut joined = Vec::new();
    for f in &files {
        let size = std::fs::metadata(f).unwrap().len();
        assert!(size <= 1_000_000 + 9_100, "{}: {size} bytes", f.display());
        joined.extend(frames(f));
    }
    let all = frames(&whole);
    assert!(all.len() > 20_000, "{}", all.len());
    assert_eq!(joined, all);
}

#[test]
fn rotation_by_time_stops_after_w_files() {
    let Some(net) = Net::new("rotate-time") else {
        return;
    };
    let pattern = net.file("t-%s.pcap");
    let run = capture(&net, "vb", &pattern, &["-G", "1", "-W", "2"]);
    let sender = send_slowly(&net, "various_gre.pcap", "200", "6");
    let o = run.wait();
    sender.wait();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("maximum file limit reached: 2"), "{err}");
    let files: Vec<_> = std::fs::read_dir(&net.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("t-"))
        .collect();
    assert_eq!(files.len(), 2);
    // The first period starts when the output opens: if the first packet
    // comes a second later, that file holds only its header (tcpdump's
    // rule too). The files hold packets, each a whole capture.
    let counts: Vec<usize> = files.iter().map(|f| frames(&f.path()).len()).collect();
    assert!(counts.iter().sum::<usize>() > 0, "{counts:?}");
}

#[test]
fn flows_read_a_live_interface() {
    let Some(net) = Net::new("flow") else {
        return;
    };
    let all = net.file("all.pcap");
    let out = net.file("flows");
    let dump = tcpdump(&net, &all, &[]);
    let run = Bg::start(net.sluice(&[
        "flow",
        "--json",
        "-w",
        out.to_str().unwrap(),
        "(iface,vb,4) -> (BPF,\"vlan\")",
    ]));
    // The flow's ring opens as the flow is instantiated; give it time.
    std::thread::sleep(Duration::from_millis(1500));
    replay_all(&net);
    let o = run.wait();
    settle();
    dump.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let want = libpcap_filter(&all, "vlan", &net.file("w.pcap"));
    assert!(!want.is_empty());
    assert_eq!(frames(&out.join("flow1.pcap")), want);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["flows"][0]["packets"].as_u64(),
        Some(want.len() as u64),
        "{v}"
    );
}

#[test]
fn sighup_swaps_in_the_filter_of_the_f_file() {
    let Some(net) = Net::new("sighup") else {
        return;
    };
    let f = filter_file(&net, "vlan");
    let (one, two) = (net.file("one.pcap"), net.file("two.pcap"));
    let run1 = capture(&net, "vb", &one, &["-F", &f]);
    let mut run2 = Bg::start(net.sluice(&[
        "filter",
        "-i",
        "vb",
        "--workers",
        "2",
        "-F",
        &f,
        "-w",
        two.to_str().unwrap(),
    ]));
    run2.listening();
    let traffic = corpus("various_gre.pcap");
    net.replay(&traffic);
    settle();
    // A filter that does not compile keeps the one in force.
    reload(
        &f,
        "tcp port",
        [&run1, &run2],
        "the filter in force is kept",
    );
    reload(
        &f,
        "not vlan",
        [&run1, &run2],
        "filter changed (kernel pre-filter: ",
    );
    // The workers pick the new filter up before their next wait.
    std::thread::sleep(Duration::from_millis(300));
    net.replay(&traffic);
    settle();
    let (o1, o2) = (run1.interrupt(), run2.interrupt());
    assert!(
        o1.status.success() && o2.status.success(),
        "{}",
        text(&o2.stderr)
    );
    let mut want = libpcap_filter(&traffic, "vlan", &net.file("a.pcap"));
    want.extend(libpcap_filter(&traffic, "not vlan", &net.file("b.pcap")));
    assert!(want.len() > 50, "{}", want.len());
    assert_eq!(frames(&one), want);
    let (mut got, mut want) = (frames(&two), want);
    got.sort();
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn sighup_swaps_in_the_ebpf_program_of_the_new_filter() {
    let Some(net) = Net::new("sighupebpf") else {
        return;
    };
    let f = filter_file(&net, "udp");
    // One ring, and two fanout workers that each pick the program up.
    let runs: Vec<Bg> = ["1", "2"]
        .iter()
        .map(|w| {
            let mut c = net.sluice(&[
                "filter",
                "-i",
                "vb",
                "--engine",
                "ebpf",
                "--workers",
                w,
                "-F",
                &f,
                "--count",
            ]);
            c.env("SLUICE_DEBUG", "1");
            let mut run = Bg::start(c);
            run.listening();
            run
        })
        .collect();
    // No VLAN tags: the kernel's count is then exact (see above).
    let traffic = [corpus("kday4.pcap"), corpus("HSRP_election.pcap")];
    let replay = || traffic.iter().map(|t| net.replay(t)).sum::<u64>();
    replay();
    settle();
    // A filter the verifier would take but that does not compile keeps
    // the program in force; then the new filter's own program goes in.
    reload(&f, "tcp port", &runs, "the filter in force is kept");
    reload(
        &f,
        "tcp port 80",
        &runs,
        "filter changed (kernel pre-filter: eBPF, ",
    );
    std::thread::sleep(Duration::from_millis(300));
    replay();
    settle();
    let mut want = 0;
    for (i, t) in traffic.iter().enumerate() {
        want += libpcap_filter(t, "udp", &net.file(&format!("u{i}.pcap"))).len() as u64;
        want += libpcap_filter(t, "tcp port 80", &net.file(&format!("t{i}.pcap"))).len() as u64;
    }
    assert!(want > 20, "{want}");
    for run in runs {
        let o = run.interrupt();
        let err = text(&o.stderr);
        assert!(o.status.success(), "{err}");
        // What the kernel passed is what each filter wanted in its turn:
        // the eBPF programs judged the packets, and user space agreed.
        assert_eq!(stat(&err, "received by filter"), want, "{err}");
        assert_eq!(text(&o.stdout).trim(), want.to_string(), "{err}");
    }
}
