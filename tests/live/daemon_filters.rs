//! Flows of many filters in the daemon: each packet reaches a flow once,
//! its entry saying which of the flow's filters took it; and filters come
//! and go in hundreds of thousands while the capture goes on, without a
//! frame lost to a flow that stays open.

use super::daemon::{daemon, status};
use super::net::{Bg, Net};
use super::{corpus, settle, tcpdump};
use sluice::daemon::Client;
use std::time::{Duration, Instant};

/// Read a flow until nothing has come for `quiet`: (result, frame) each.
fn drain(flow: &mut sluice::daemon::DaemonFlow, quiet: Duration) -> Vec<(u32, Vec<u8>)> {
    let mut got = Vec::new();
    let mut last = Instant::now();
    while last.elapsed() < quiet {
        if let Some(p) = flow.next(Some(Duration::from_millis(50))).unwrap() {
            got.push((p.result, p.data.to_vec()));
            last = Instant::now();
        }
    }
    got
}

#[test]
fn a_flow_of_several_filters_gets_each_packet_once_with_its_first_filter() {
    let Some(net) = Net::new("daemon-sets") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let mut client = Client::connect(&sock, "test").unwrap();
    let mut flow = client
        .open(
            r#"(iface,vb) -> (BPF,"tcp") | (BPF,"ip") | (DPF,"(12:16 == 0x806)")"#,
            0,
        )
        .unwrap();
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let sent = net.replay(&corpus("mptcp-fclose.pcap")) + net.replay(&corpus("isakmp4500.pcap"));
    settle();
    assert!(dump.interrupt().status.success());
    let got = drain(&mut flow, Duration::from_millis(500));
    let want = |e: &str, n: &str| super::net::libpcap_filter(&all, e, &net.file(n));
    let tcp = want("tcp", "t.pcap");
    let ip_not_tcp = want("ip and not tcp", "i.pcap");
    let arp = want("arp", "a.pcap");
    let by = |r: u32| -> Vec<(Vec<u8>, u32)> {
        got.iter()
            .filter(|(x, _)| *x == r)
            .map(|(_, d)| (d.clone(), d.len() as u32))
            .collect()
    };
    let data = |v: Vec<(Vec<u8>, u32)>| v.into_iter().map(|(d, _)| d).collect::<Vec<_>>();
    assert!(!tcp.is_empty() && !ip_not_tcp.is_empty() && !arp.is_empty());
    assert_eq!(data(by(1)), data(tcp), "result 1: tcp");
    assert_eq!(data(by(2)), data(ip_not_tcp), "result 2: ip, not tcp");
    assert_eq!(data(by(3)), data(arp), "result 3: arp");
    let s = flow.stats();
    assert_eq!((s.delivered, s.lost), (got.len() as u64, 0));
    assert!(got.len() as u64 <= sent);
    // Adding filters numbers them after the flow's.
    assert_eq!(flow.add_filters(&["udp port 53", "icmp"]).unwrap(), 4);
    assert_eq!(status(&sock)["clients"][0]["flows"][0]["filters"], 5);
    flow.close().unwrap();
    assert!(d.interrupt().status.success());
}

/// A flow spec of `filters`, each `BPF("…")`.
fn spec_of(filters: &[String]) -> String {
    std::iter::once("(iface,vb) -> ".to_string())
        .chain(
            filters
                .iter()
                .enumerate()
                .map(|(n, f)| format!("{}(BPF,\"{f}\")", if n > 0 { " | " } else { "" })),
        )
        .collect()
}

/// Replay two corpus captures beside tcpdump: the frames the flow got
/// equal libpcap's `udp` on tcpdump's capture; returns how many.
fn replay_and_compare(net: &Net, flow: &mut sluice::daemon::DaemonFlow, tag: &str) -> u64 {
    let all = net.file(&format!("all-{tag}.pcap"));
    let dump = tcpdump(net, &all, &[]);
    let sent = net.replay(&corpus("kday4.pcap")) + net.replay(&corpus("HSRP_election.pcap"));
    settle();
    assert!(dump.interrupt().status.success());
    let got = drain(flow, Duration::from_millis(500));
    let want = super::net::libpcap_filter(&all, "udp", &net.file(&format!("u-{tag}.pcap")));
    assert!(!want.is_empty() && (want.len() as u64) < sent);
    let data: Vec<Vec<u8>> = want.into_iter().map(|(d, _)| d).collect();
    assert_eq!(
        got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
        data,
        "{tag}"
    );
    data.len() as u64
}

/// The interface's `received` count once it reaches `want` (the kernel's
/// counts come about every second), or after 5 s.
fn received_reaches(sock: &std::path::Path, want: u64) -> u64 {
    let received = || status(sock)["interfaces"][0]["received"].as_u64().unwrap();
    let start = Instant::now();
    let mut r = received();
    while r != want && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(200));
        r = received();
    }
    r
}

/// Wait until the interface's pre-filter is the eBPF tree (at most 60 s:
/// a debug build verifies slowly); how long it took.
fn tree_in_force(sock: &std::path::Path) -> Duration {
    let start = Instant::now();
    while status(sock)["interfaces"][0]["kernel_filter_form"] != "tree" {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no tree after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    start.elapsed()
}

#[test]
fn a_flow_too_big_for_classic_bpf_is_filtered_by_an_ebpf_chain_in_the_kernel() {
    let Some(net) = Net::new("daemon-ebpf") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let mut client = Client::connect(&sock, "test").unwrap();
    // udp, and 299 sessions of hosts that never send: more than the
    // classic union takes (256 filters).
    let mut filters = vec!["udp".to_string()];
    filters.extend(sessions(299, 0));
    let mut flow = client.open(&spec_of(&filters), 0).unwrap();
    let iface = |s: &serde_json::Value| s["interfaces"][0].clone();
    tree_in_force(&sock);
    assert_eq!(iface(&status(&sock))["kernel_filter"], "ebpf");
    assert_eq!(iface(&status(&sock))["filters"], 300);
    let wanted = replay_and_compare(&net, &mut flow, "a");
    // The kernel passed only those.
    assert_eq!(received_reaches(&sock, wanted), wanted);
    flow.close().unwrap();
    assert_eq!(iface(&status(&sock))["kernel_filter"], "classic");
    assert!(d.interrupt().status.success());
}

#[test]
fn a_pre_filter_that_takes_long_to_build_lets_everything_pass_meanwhile() {
    let Some(net) = Net::new("daemon-ebpf-slow") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let mut client = Client::connect(&sock, "test").unwrap();
    // 900 filters of many shapes that match nothing sent (a tree the
    // kernel takes a while to verify), then udp: while the last set is
    // built, the tree of the sets before it would drop what udp wants.
    let mut filters: Vec<String> = (0..900)
        .map(|k| {
            format!(
                "ip[{}:{}] = {} and ip src host 10.201.{}.{} and tcp[{}] > {}",
                2 + k % 17,
                1 + k % 2,
                k % 251,
                k / 256,
                k % 256,
                k % 19,
                k % 200
            )
        })
        .collect();
    filters.push("udp".into());
    let mut flow = client.open(&spec_of(&filters[..1]), 0).unwrap();
    let opened = Instant::now();
    for part in filters[1..].chunks(25) {
        let part: Vec<&str> = part.iter().map(String::as_str).collect();
        flow.add_filters(&part).unwrap();
    }
    let answered = opened.elapsed();
    // Whatever is in force while the tree is built, nothing wanted is lost.
    let during = status(&sock)["interfaces"][0]["kernel_filter"].clone();
    replay_and_compare(&net, &mut flow, "during");
    let waited = tree_in_force(&sock);
    eprintln!("filters added in {answered:?}; {during} at first; the tree after {waited:?}");
    let before = received_reaches(&sock, u64::MAX);
    let wanted = replay_and_compare(&net, &mut flow, "after");
    // The tree in force passes only those.
    assert_eq!(received_reaches(&sock, before + wanted), before + wanted);
    flow.close().unwrap();
    assert!(d.interrupt().status.success());
}

/// 100,000 filters of one shape (TCP sessions of hosts that never send).
fn sessions(n: usize, base: usize) -> Vec<String> {
    (base..base + n)
        .map(|i| {
            format!(
                "host 10.{}.{}.{} and tcp port {}",
                100 + i / 65536 % 100,
                i / 256 % 256,
                i % 256,
                1024 + i % 60000
            )
        })
        .collect()
}

#[test]
fn filters_come_and_go_by_the_hundred_thousand_while_the_capture_goes_on() {
    let Some(net) = Net::new("daemon-churn") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    // A flow that takes everything stays open throughout.
    let mut keep = Client::connect(&sock, "keep").unwrap();
    let mut all_flow = keep.open("(iface,vb)", 0).unwrap();
    // Traffic for the whole run: a capture replayed at a steady rate,
    // until it is stopped at the end.
    let sender = Bg::start(net.sender(
        &corpus("kday4.pcap"),
        &["--rate", "400", "--loop", "1000000", "--json"],
    ));
    // The flow that stays open is read all along, in a thread of its own
    // (a client busy adding filters must not stop another from reading).
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut got = 0u64;
            let mut idle_since = None;
            loop {
                if all_flow
                    .next(Some(Duration::from_millis(20)))
                    .unwrap()
                    .is_some()
                {
                    got += 1;
                    idle_since = None;
                } else if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // Stopped: read on until nothing came for 1.5 s.
                    let t = *idle_since.get_or_insert_with(Instant::now);
                    if t.elapsed() > Duration::from_millis(1500) {
                        return (got, all_flow.stats());
                    }
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    // 100,000 filters installed, then clients come and go beside them.
    let mut big = Client::connect(&sock, "big").unwrap();
    let mut many = big.open(r#"(iface,vb) -> (BPF,"tcp port 1")"#, 0).unwrap();
    let start = Instant::now();
    assert_eq!(
        many.add_filters(
            &sessions(100_000, 0)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        )
        .unwrap(),
        2
    );
    let installed = start.elapsed();
    std::thread::sleep(Duration::from_millis(100));
    let s = status(&sock);
    assert_eq!(
        s["interfaces"][0]["filters"], 100_002,
        "{}",
        s["interfaces"]
    );
    for round in 0..20 {
        let mut c = Client::connect(&sock, "passing").unwrap();
        let mut f = c
            .open(
                &format!(r#"(iface,vb) -> (BPF,"tcp port {}")"#, 2000 + round),
                0,
            )
            .unwrap();
        f.add_filters(
            &sessions(1000, 200_000 + round * 1000)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        f.close().unwrap();
    }
    many.close().unwrap();
    let o = sender.interrupt();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sent = v["sent"].as_u64().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (got, st) = reader.join().unwrap();
    eprintln!(
        "100,000 filters added in {installed:?}; {sent} frames sent, {got} read by the flow that stayed open"
    );
    // Every frame sent reached the flow that stayed open, nothing lost,
    // and the traffic went on for the whole churn.
    assert!(
        sent > 2000,
        "{sent} frames: the traffic must outlast the churn"
    );
    assert_eq!((got, st.lost, st.accepted), (sent, 0, sent));
    let k = status(&sock)["interfaces"][0].clone();
    assert_eq!(k["dropped_by_kernel"], 0, "{k}");
    assert!(d.interrupt().status.success());
}
