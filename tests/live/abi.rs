//! sluice's libpcap.so (frontends/libpcap-abi) capturing live: Debian's
//! tcpdump and dumpcap run on the candidate library beside the same
//! programs on the system libpcap, on the veth pair of [`Net`], while
//! corpus captures are replayed. The frames each pair keeps must be the
//! same bytes (timestamps aside), their closing statistics the same, and
//! what they print about interfaces and compiled filters the same.
//!
//! Other Debian programs run once on each library in the same network,
//! their output compared with times, random ports and ids masked: iftop
//! (`-t`, which cancels its capture thread at exit), tcpreplay `-v`
//! (which pipes what it sends into `tcpdump -r -`), nmap, nping, hping3
//! and arping (probing the other end of the pair, a bounded number of
//! times).
//!
//! The candidate is found as the ABI crate's tests find it
//! (`SLUICE_ABI_LIB`, else `target/<profile>/libpcap.so`; see
//! `frontends/libpcap-abi/tests/common/mod.rs`). Root only, like every
//! live test.
#![forbid(unsafe_code)]

#[path = "../../frontends/libpcap-abi/tests/common/mod.rs"]
pub(super) mod harness;

use super::net::{frames, Bg, Net};
use super::{replay_all, settle, stat, text};
use harness::Lib;
use std::path::Path;
use std::time::Duration;

/// `tcpdump -Z root -i vb -w OUT EXTRA...` on `lib`, listening.
fn tcpdump_on(net: &Net, lib: Lib, out: &Path, extra: &[&str]) -> Bg {
    let mut args = vec!["-Z", "root", "-i", "vb", "-w", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut cmd = net.cmd(&net.b, "tcpdump", &args);
    lib.apply(&mut cmd);
    let mut bg = Bg::start(cmd);
    bg.listening();
    bg
}

/// `dumpcap -i vb -w OUT EXTRA...` on `lib`, capturing.
fn dumpcap_on(net: &Net, lib: Lib, out: &Path, extra: &[&str]) -> Bg {
    let mut args = vec!["-i", "vb", "-w", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let mut cmd = net.cmd(&net.b, "dumpcap", &args);
    lib.apply(&mut cmd);
    let bg = Bg::start(cmd);
    assert!(
        bg.said("Capturing on"),
        "dumpcap on the {} library: {}",
        lib.tag(),
        bg.stderr_now()
    );
    bg
}

/// tcpdump's three closing lines: captured, received by filter, dropped
/// by kernel.
fn tcpdump_stats(stderr: &str) -> [u64; 3] {
    [
        stat(stderr, "packets captured"),
        stat(stderr, "packets received by filter"),
        stat(stderr, "packets dropped by kernel"),
    ]
}

/// A program's output in namespace `b` on `lib`, waited for.
fn output(net: &Net, lib: Lib, program: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = net.cmd(&net.b, program, args);
    lib.apply(&mut cmd);
    cmd.output().unwrap()
}

/// The lines of a `-D` listing about the namespace's network devices and
/// `any`, without their numbers. libpcap also lists capture sources that
/// are not network interfaces (bluetooth-monitor, nflog, nfqueue,
/// dbus-*), which a library need not offer; they are left out, and so the
/// numbering, which they shift.
fn devices(listing: &[u8]) -> Vec<String> {
    text(listing)
        .lines()
        .filter_map(|l| {
            let rest = l.split_once('.')?.1.trim_start();
            let name = rest.split_whitespace().next()?;
            ["vb", "lo", "any"]
                .contains(&name)
                .then(|| rest.to_string())
        })
        .collect()
}

#[test]
fn abi_tcpdump_captures_what_it_captures_on_libpcap() {
    let Some(net) = Net::new("abi-tcpdump") else {
        return;
    };
    let filters = [
        "",
        "tcp",
        "vlan and ip",
        "udp or arp",
        "ether[0] & 1 = 0 and not stp",
    ];
    let runs: Vec<(Bg, Bg)> = filters
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let extra: Vec<&str> = if f.is_empty() { vec![] } else { vec![f] };
            (
                tcpdump_on(
                    &net,
                    Lib::Candidate,
                    &net.file(&format!("c{i}.pcap")),
                    &extra,
                ),
                tcpdump_on(&net, Lib::System, &net.file(&format!("s{i}.pcap")), &extra),
            )
        })
        .collect();
    let sent = replay_all(&net);
    settle();
    for (i, (c, s)) in runs.into_iter().enumerate() {
        let (c, s) = (c.interrupt(), s.interrupt());
        let (ce, se) = (text(&c.stderr), text(&s.stderr));
        assert!(s.status.success(), "system tcpdump '{}': {se}", filters[i]);
        assert_eq!(c.status, s.status, "'{}': {ce}", filters[i]);
        let want = frames(&net.file(&format!("s{i}.pcap")));
        let got = frames(&net.file(&format!("c{i}.pcap")));
        assert!(!want.is_empty(), "'{}' kept nothing", filters[i]);
        if filters[i].is_empty() {
            assert_eq!(want.len() as u64, sent, "tcpdump saw every frame sent");
        }
        assert_eq!(got.len(), want.len(), "'{}': frames kept", filters[i]);
        assert!(got == want, "'{}': the frames kept differ", filters[i]);
        // "N packets captured", "N packets received by filter",
        // "N packets dropped by kernel".
        let (cs, ss) = (tcpdump_stats(&ce), tcpdump_stats(&se));
        assert_eq!(ss[0], want.len() as u64, "{se}");
        assert_eq!(ss[2], 0, "{se}");
        assert_eq!(
            cs, ss,
            "'{}': candidate said {ce}\nsystem said {se}",
            filters[i]
        );
        // The first line names the interface, link type and snapshot.
        assert_eq!(
            ce.lines().next(),
            se.lines().next(),
            "'{}': the listening line",
            filters[i]
        );
    }
}

#[test]
fn abi_tcpdump_count_stops_as_on_libpcap() {
    let Some(net) = Net::new("abi-count") else {
        return;
    };
    let (cf, sf) = (net.file("c.pcap"), net.file("s.pcap"));
    let c = tcpdump_on(&net, Lib::Candidate, &cf, &["-c", "7", "vlan"]);
    let s = tcpdump_on(&net, Lib::System, &sf, &["-c", "7", "vlan"]);
    replay_all(&net);
    let (c, s) = (c.wait(), s.wait());
    assert!(s.status.success(), "{}", text(&s.stderr));
    assert!(c.status.success(), "{}", text(&c.stderr));
    let want = frames(&sf);
    assert_eq!(want.len(), 7);
    assert!(frames(&cf) == want, "the first 7 VLAN frames differ");
    assert_eq!(stat(&text(&c.stderr), "packets captured"), 7);
}

#[test]
fn abi_dumpcap_captures_what_it_captures_on_libpcap() {
    if !harness::have("dumpcap") {
        harness::skip("abi dumpcap", "dumpcap missing (apt-get install tshark)");
        return;
    }
    let Some(net) = Net::new("abi-dumpcap") else {
        return;
    };
    // One stops after a count, one is interrupted and says its counts.
    let mut pairs = Vec::new();
    for (i, extra) in [&["-f", "ip", "-c", "20"][..], &["-f", "vlan"]]
        .iter()
        .enumerate()
    {
        let c = dumpcap_on(
            &net,
            Lib::Candidate,
            &net.file(&format!("c{i}.pcapng")),
            extra,
        );
        let s = dumpcap_on(&net, Lib::System, &net.file(&format!("s{i}.pcapng")), extra);
        pairs.push((c, s));
    }
    // dumpcap reports "Capturing on" before its ring is ready.
    std::thread::sleep(Duration::from_millis(500));
    replay_all(&net);
    settle();
    for (i, (c, s)) in pairs.into_iter().enumerate() {
        let (c, s) = if i == 0 {
            (c.wait(), s.wait())
        } else {
            (c.interrupt(), s.interrupt())
        };
        let (ce, se) = (text(&c.stderr), text(&s.stderr));
        assert_eq!(c.status, s.status, "candidate: {ce}\nsystem: {se}");
        let want = frames(&net.file(&format!("s{i}.pcapng")));
        assert!(!want.is_empty(), "{se}");
        if i == 0 {
            assert_eq!(want.len(), 20, "{se}");
        }
        assert!(
            frames(&net.file(&format!("c{i}.pcapng"))) == want,
            "dumpcap {i}: the frames kept differ"
        );
        // "Packets captured: N", "Packets received/dropped on interface".
        let counts = |e: &str| -> Vec<String> {
            e.lines()
                .filter(|l| l.starts_with("Packets "))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(counts(&ce), counts(&se), "dumpcap {i}");
    }
}

/// tshark captures through dumpcap, which it starts with its own
/// environment: both load the library under test.
#[test]
fn abi_tshark_captures_what_it_captures_on_libpcap() {
    if !harness::have("tshark") {
        harness::skip("abi tshark", "tshark missing (apt-get install tshark)");
        return;
    }
    let Some(net) = Net::new("abi-tshark") else {
        return;
    };
    let mut runs = Vec::new();
    for lib in Lib::BOTH {
        let out = net.file(&format!("{}.pcapng", lib.tag()));
        let args = ["-i", "vb", "-f", "tcp or vlan", "-c", "25", "-w"];
        let mut cmd = net.cmd(&net.b, "tshark", &args);
        cmd.arg(&out);
        lib.apply(&mut cmd);
        let bg = Bg::start(cmd);
        assert!(
            bg.said("Capturing on"),
            "tshark on the {} library: {}",
            lib.tag(),
            bg.stderr_now()
        );
        runs.push((bg, out));
    }
    std::thread::sleep(Duration::from_millis(500));
    replay_all(&net);
    settle();
    let mut kept = Vec::new();
    for (bg, out) in runs {
        let o = bg.wait();
        assert!(o.status.success(), "tshark: {}", text(&o.stderr));
        kept.push(frames(&out));
    }
    assert_eq!(
        kept[1].len(),
        25,
        "tshark on libpcap kept {}",
        kept[1].len()
    );
    assert!(kept[0] == kept[1], "tshark -f: the frames kept differ");
}

#[test]
fn abi_interfaces_and_programs_are_printed_as_on_libpcap() {
    let Some(net) = Net::new("abi-lists") else {
        return;
    };
    let mut runs: Vec<(&str, Vec<&str>)> = vec![
        ("tcpdump", vec!["-D"]),
        ("tcpdump", vec!["-L", "-i", "vb"]),
        ("tcpdump", vec!["-J", "-i", "vb"]),
    ];
    let dumpcap = harness::have("dumpcap");
    if dumpcap {
        runs.push(("dumpcap", vec!["-D"]));
        runs.push(("dumpcap", vec!["-L", "-i", "vb"]));
        runs.push(("dumpcap", vec!["--list-time-stamp-types", "-i", "vb"]));
    }
    let exprs = [
        "tcp",
        "vlan and udp",
        "ip broadcast",
        "tcp port",
        "ip host 1.2.3",
    ];
    for e in exprs {
        runs.push(("tcpdump", vec!["-d", "-i", "vb", e]));
        if dumpcap {
            runs.push(("dumpcap", vec!["-d", "-i", "vb", "-f", e]));
        }
    }
    for (program, args) in &runs {
        let c = output(&net, Lib::Candidate, program, args);
        let s = output(&net, Lib::System, program, args);
        let what = format!("{program} {}", args.join(" "));
        assert_eq!(c.status, s.status, "{what}: {}", text(&c.stderr));
        assert_eq!(text(&c.stderr), text(&s.stderr), "{what}: standard error");
        if args == &["-D"] {
            assert_eq!(devices(&c.stdout), devices(&s.stdout), "{what}");
            assert_eq!(devices(&s.stdout).len(), 3, "{what}: {}", text(&s.stdout));
        } else if !args.contains(&"-d") {
            assert_eq!(text(&c.stdout), text(&s.stdout), "{what}");
        }
    }
    // The compiled programs may differ from libpcap's, but dumpcap prints
    // the candidate's as tcpdump -d does (both with the library's
    // bpf_image). Not "ip broadcast": the two pass different netmasks.
    if dumpcap {
        for e in exprs.iter().filter(|e| **e != "ip broadcast") {
            for lib in Lib::BOTH {
                let t = output(&net, lib, "tcpdump", &["-d", "-i", "vb", e]);
                let d = output(&net, lib, "dumpcap", &["-d", "-i", "vb", "-f", e]);
                assert_eq!(
                    text(&d.stdout),
                    text(&t.stdout),
                    "'{e}' on the {} library: dumpcap -d and tcpdump -d",
                    lib.tag()
                );
            }
        }
    }
}

/// Lines that say how long something took, with random ports, ids and
/// sequence numbers: every number and time unit in them is masked.
const TIMED: &[&str] = &[
    "Starting Nmap",
    "Starting Nping",
    "latency",
    "scanned in",
    "SENT (",
    "RCVD (",
    "rtt",
    "round-trip",
    "pinged in",
    "time=",
    "Actual:",
    "Rated:",
    "Flows:",
];

/// `out` with the numbers of [`TIMED`] lines masked.
fn untimed(out: &[u8]) -> String {
    text(out)
        .lines()
        .map(|l| {
            if !TIMED.iter().any(|t| l.contains(t)) {
                return l.to_string();
            }
            let mut m = String::new();
            let mut in_num = false;
            for c in l.chars() {
                if c.is_ascii_digit() || (in_num && c == '.') {
                    if !in_num {
                        m.push('#');
                    }
                    in_num = true;
                } else {
                    in_num = false;
                    m.push(c);
                }
            }
            ["usec", "msec", "ms", "sec", "s)"].iter().fold(m, |m, u| {
                m.replace(&format!("# {u}"), "# U")
                    .replace(&format!("#{u}"), "#U")
            })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn live_untimed_masks_only_numbers_of_timed_lines() {
    assert_eq!(untimed(b"rtt=0.9 ms\nlen=40 id=3"), "rtt=# U\nlen=40 id=3");
    assert_eq!(
        untimed(b"index=0 time=10.696 usec\nx"),
        untimed(b"index=0 time=16.611 msec\nx")
    );
}

/// Programs that probe the other end of the pair: the same output on
/// both libraries, timings masked.
#[test]
fn abi_probing_programs_answer_as_on_libpcap() {
    let Some(net) = Net::new("abi-probes") else {
        return;
    };
    let runs: &[(&str, &str, &[&str])] = &[
        ("nmap", "nmap", &["-n", "-sS", "-p", "22,80", "10.231.0.2"]),
        (
            "nping",
            "nmap",
            &[
                "-c",
                "2",
                "--delay",
                "200ms",
                "--tcp",
                "-p",
                "80",
                "10.231.0.2",
            ],
        ),
        (
            "hping3",
            "hping3",
            &["-c", "2", "-i", "u200000", "-S", "-p", "80", "10.231.0.2"],
        ),
        (
            "arping",
            "arping",
            &["-c", "2", "-w", "200000", "-I", "va", "10.231.0.2"],
        ),
    ];
    for (program, package, args) in runs {
        if !harness::have(program) {
            harness::skip(
                program,
                &format!("{program} missing (apt-get install {package})"),
            );
            continue;
        }
        let mut outs = Vec::new();
        for lib in Lib::BOTH {
            let mut cmd = net.cmd(&net.a, program, args);
            lib.apply(&mut cmd);
            outs.push(cmd.output().unwrap());
        }
        let (c, s) = (&outs[0], &outs[1]);
        let what = format!("{program} {}", args.join(" "));
        assert!(
            s.status.success() && !s.stdout.is_empty(),
            "{what}: {}",
            text(&s.stderr)
        );
        assert_eq!(c.status, s.status, "{what}: {}", text(&c.stderr));
        assert_eq!(
            untimed(&c.stdout),
            untimed(&s.stdout),
            "{what}: standard output"
        );
        assert_eq!(
            untimed(&c.stderr),
            untimed(&s.stderr),
            "{what}: standard error"
        );
    }
}

/// tcpreplay -v sends a capture and pipes it into `tcpdump -r -`, which
/// prints each packet as it comes: on a library that does not hand a
/// pipe's records over at once, tcpreplay gives up ("poll() timeout").
#[test]
fn abi_tcpreplay_verbose_prints_what_it_sends_as_on_libpcap() {
    if !harness::have("tcpreplay") {
        harness::skip("tcpreplay", "tcpreplay missing (apt-get install tcpreplay)");
        return;
    }
    let Some(net) = Net::new("abi-tcpreplay") else {
        return;
    };
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.pcap");
    let mut outs = Vec::new();
    for lib in Lib::BOTH {
        let mut cmd = net.cmd(&net.a, "tcpreplay", &["-v", "-x", "4", "-i", "va"]);
        cmd.arg(&sample);
        lib.apply(&mut cmd);
        outs.push(cmd.output().unwrap());
    }
    let (c, s) = (&outs[0], &outs[1]);
    assert!(s.status.success(), "{}", text(&s.stderr));
    assert!(
        text(&s.stdout).contains("HTTP: GET / HTTP/1.1"),
        "{}",
        text(&s.stdout)
    );
    assert_eq!(c.status, s.status, "{}", text(&c.stderr));
    assert_eq!(untimed(&c.stdout), untimed(&s.stdout));
    assert_eq!(untimed(&c.stderr), untimed(&s.stderr));
}

/// iftop's text mode on both libraries at once while a capture is
/// replayed: the same hosts, traffic counted, and an exit after `-s`
/// seconds that cancels its capture thread. (The totals depend on when
/// each started, so they are not compared.)
#[test]
fn abi_iftop_counts_what_it_counts_on_libpcap() {
    if !harness::have("iftop") {
        harness::skip("iftop", "iftop missing (apt-get install iftop)");
        return;
    }
    let Some(net) = Net::new("abi-iftop") else {
        return;
    };
    let args = ["-t", "-s", "4", "-n", "-N", "-P", "-i", "vb"];
    let runs: Vec<Bg> = Lib::BOTH
        .iter()
        .map(|lib| {
            let mut cmd = net.cmd(&net.b, "iftop", &args);
            lib.apply(&mut cmd);
            let bg = Bg::start(cmd);
            // "Listening on" goes to a buffered standard output: wait for
            // its last line on standard error, then for the capture.
            assert!(
                bg.said("MAC address is"),
                "iftop on the {} library: {}",
                lib.tag(),
                bg.stderr_now()
            );
            bg
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // iftop looks at its clock when packets come: traffic goes on until
    // both have ended (at most 20 rounds of a 14-frame capture).
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.pcap");
    let done = std::sync::atomic::AtomicBool::new(false);
    let outs: Vec<std::process::Output> = std::thread::scope(|sc| {
        sc.spawn(|| {
            for _ in 0..20 {
                if done.load(std::sync::atomic::Ordering::Acquire) {
                    break;
                }
                net.replay(&sample);
                std::thread::sleep(Duration::from_millis(400));
            }
        });
        let outs = runs.into_iter().map(Bg::wait).collect();
        done.store(true, std::sync::atomic::Ordering::Release);
        outs
    });
    let (c, s) = (&outs[0], &outs[1]);
    assert!(s.status.success(), "{}", text(&s.stderr));
    assert_eq!(c.status, s.status, "{}", text(&c.stderr));
    // The host lines (name and direction) as a set, and the totals.
    let summary = |o: &[u8]| {
        let t = text(o);
        let mut hosts: Vec<String> = t
            .lines()
            .filter(|l| l.contains("=>") || l.contains("<="))
            .map(|l| {
                let l = l
                    .trim_start()
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .trim();
                l.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
            })
            .collect();
        hosts.sort();
        hosts.dedup();
        let totals: Vec<String> = t
            .lines()
            .filter(|l| l.starts_with("Cumulative"))
            .map(str::to_string)
            .collect();
        (hosts, totals)
    };
    let (want, got) = (summary(&s.stdout), summary(&c.stdout));
    assert!(
        !want.0.is_empty() && !want.1.is_empty(),
        "{}",
        text(&s.stdout)
    );
    assert_eq!(got.0, want.0, "candidate printed:\n{}", text(&c.stdout));
    assert_eq!(
        got.1.len(),
        want.1.len(),
        "candidate printed:\n{}",
        text(&c.stdout)
    );
    assert!(!got.1[0].trim_end().ends_with(" 0B"), "{}", got.1[0]);
}
