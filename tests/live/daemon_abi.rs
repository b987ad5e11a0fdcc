//! Debian's tcpdump through the daemon: with `SLUICE_DAEMON` set, tcpdump
//! on sluice's libpcap reads the daemon's shared buffers instead of a ring
//! of its own. Four of them, each with its own filter, keep exactly the
//! frames a tcpdump on Debian's libpcap keeps beside them; a fifth killed
//! with SIGKILL halfway changes nothing for the others, and its flow and
//! buffers are released.
//!
//! The traffic has no VLAN-tagged frames: a live tcpdump on libpcap
//! judges those as the kernel saw them (tag taken off), the daemon as
//! `sluice filter -i` does (tag put back), which docs/daemon.md says.

use super::abi::harness::Lib;
use super::daemon::{daemon, status, status_when};
use super::net::{frames, Bg, Net};
use super::{corpus, settle, text};
use std::path::Path;

/// Captures without VLAN tags: TCP, UDP, ARP, ICMPv6, routing.
const PLAIN: &[&str] = &[
    "kday4.pcap",
    "HSRP_election.pcap",
    "mptcp-v0.pcap",
    "bfd-sbfd.pcap",
    "icmp6-rfc8335.pcap",
    "dcb_ets.pcap",
    "isakmp4500.pcap",
    "dhcp-rfc4388.pcap",
];

/// `tcpdump -Z root -i vb -w OUT [FILTER]` on `lib`, through the daemon
/// at `sock` when given.
fn tcpdump(net: &Net, lib: Lib, sock: Option<&Path>, out: &Path, filter: &str) -> Bg {
    let mut args = vec!["-Z", "root", "-i", "vb", "-w", out.to_str().unwrap()];
    if !filter.is_empty() {
        args.push(filter);
    }
    let mut cmd = net.cmd(&net.b, "tcpdump", &args);
    lib.apply(&mut cmd);
    if let Some(s) = sock {
        cmd.env("SLUICE_DAEMON", s);
    }
    let mut bg = Bg::start(cmd);
    bg.listening();
    bg
}

#[test]
fn tcpdumps_through_the_daemon_keep_what_tcpdump_on_libpcap_keeps() {
    let Some(net) = Net::new("daemon-abi") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let filters = ["", "tcp", "udp or arp", "ip6 or (ip and not tcp port 80)"];
    let runs: Vec<(Bg, Bg)> = filters
        .iter()
        .enumerate()
        .map(|(i, f)| {
            (
                tcpdump(
                    &net,
                    Lib::Candidate,
                    Some(&sock),
                    &net.file(&format!("c{i}.pcap")),
                    f,
                ),
                tcpdump(&net, Lib::System, None, &net.file(&format!("s{i}.pcap")), f),
            )
        })
        .collect();
    let doomed = tcpdump(
        &net,
        Lib::Candidate,
        Some(&sock),
        &net.file("doomed.pcap"),
        "ip",
    );
    assert_eq!(status(&sock)["clients"].as_array().unwrap().len(), 6);
    let mut sent = 0;
    for (k, c) in PLAIN.iter().enumerate() {
        sent += net.replay(&corpus(c));
        if k == PLAIN.len() / 2 {
            doomed.signal("KILL");
        }
    }
    let _ = doomed.wait();
    settle();
    for (i, (c, s)) in runs.into_iter().enumerate() {
        let (c, s) = (c.interrupt(), s.interrupt());
        assert!(s.status.success(), "system tcpdump: {}", text(&s.stderr));
        assert!(c.status.success(), "'{}': {}", filters[i], text(&c.stderr));
        let want = frames(&net.file(&format!("s{i}.pcap")));
        let got = frames(&net.file(&format!("c{i}.pcap")));
        assert!(!want.is_empty(), "'{}' kept nothing", filters[i]);
        if filters[i].is_empty() {
            assert_eq!(want.len() as u64, sent, "tcpdump saw every frame sent");
        }
        assert_eq!(got.len(), want.len(), "'{}': frames kept", filters[i]);
        assert!(got == want, "'{}': the frames kept differ", filters[i]);
        let captured = |e: &str| {
            e.lines()
                .find(|l| l.ends_with("captured"))
                .and_then(|l| l.split_whitespace().next())
                .map(str::to_string)
        };
        assert_eq!(
            captured(&text(&c.stderr)),
            captured(&text(&s.stderr)),
            "'{}': captured",
            filters[i]
        );
    }
    // Everyone has gone: every flow closed, the killed one's included.
    let s = status_when(&sock, |s| {
        s["interfaces"][0]["filters"] == 0 && s["interfaces"][0]["groups"] == 0
    });
    assert_eq!(s["interfaces"][0]["filters"], 0, "{s}");
    assert_eq!(s["interfaces"][0]["groups"], 0, "{s}");
    assert!(d.interrupt().status.success());
}
