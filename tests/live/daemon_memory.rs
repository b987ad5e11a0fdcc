//! Filters with persistent memory in the daemon (FFPF's MBuf): a flow's
//! `hashcount` and `packetcount` run in the daemon on what its filter
//! accepts, and the client reads their tables from memory the daemon
//! shares read-only. The counts must equal what Debian's tcpdump keeps
//! with the same filter beside it, counted here by a parser of this
//! test's own; the daemon's report must equal the shared memory.

use super::daemon::{daemon, daemon_with_policy, status};
use super::net::{frames, libpcap_filter, Net};
use super::{replay_all, settle, tcpdump, text};
use std::collections::BTreeMap;

/// Unfragmented (or first-fragment) IPv4 TCP: every packet has ports.
const EXPR: &str = "ip and tcp and ip[6:2] & 0x1fff = 0";

/// Packets and wire bytes per one-way TCP flow of Ethernet frames, keyed
/// as hashcount prints a flow (`A:P > B:Q tcp`).
fn count(frames: &[(Vec<u8>, u32)]) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for (f, wirelen) in frames {
        assert_eq!(&f[12..14], &[8, 0], "an untagged IPv4 frame");
        let ip = &f[14..];
        let ihl = usize::from(ip[0] & 15) * 4;
        assert_eq!(ip[9], 6, "TCP");
        let addr = |b: &[u8]| format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]);
        let port = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
        let key = format!(
            "{}:{} > {}:{} tcp",
            addr(&ip[12..16]),
            port(&ip[ihl..]),
            addr(&ip[16..20]),
            port(&ip[ihl + 2..])
        );
        let e = m.entry(key).or_insert((0, 0));
        e.0 += 1;
        e.1 += u64::from(*wirelen);
    }
    m
}

/// A report's `top` list as the same map.
fn listed(top: &serde_json::Value) -> BTreeMap<String, (u64, u64)> {
    top.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["flow"].as_str().unwrap().to_string(),
                (t["packets"].as_u64().unwrap(), t["bytes"].as_u64().unwrap()),
            )
        })
        .collect()
}

#[test]
fn hash_counters_run_in_the_daemon_and_the_client_reads_their_memory() {
    let Some(net) = Net::new("daemon-mbuf") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let mut client = sluice::daemon::Client::connect(&sock, "mbuf test").unwrap();
    // Counts every flow (a table far larger than the traffic's flows),
    // passing the packets on; and a counter that passes nothing.
    let mut counted = client
        .open(
            &format!("(iface,vb) -> (BPF,\"{EXPR}\") -> (hashcount,100000,65536,pass)"),
            0,
        )
        .unwrap();
    let counter = client
        .open("(iface,vb) -> (BPF,\"ip\") -> (packetcount)", 0)
        .unwrap();
    assert_eq!(counted.memories().len(), 1);
    assert_eq!(counted.memories()[0].0, "hashcount");
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let sent = replay_all(&net);
    settle();
    assert!(dump.interrupt().status.success());
    assert_eq!(frames(&all).len() as u64, sent);
    let want = libpcap_filter(&all, EXPR, &net.file("tcp.pcap"));
    let ip = libpcap_filter(&all, "ip", &net.file("ip.pcap"));
    assert!(want.len() > 100, "the captures exercise it");

    // The packets themselves still come (`pass`), one per accepted.
    let mut got = Vec::new();
    while let Some(p) = counted.next(Some(std::time::Duration::ZERO)).unwrap() {
        got.push((p.data.to_vec(), p.meta.wirelen));
    }
    assert_eq!(got, want);

    // The table, read from the shared memory in this process.
    let mem = &counted.memories()[0].1;
    let table = sluice::flow::stats::top_n(&mem.snapshot(), usize::MAX);
    let from_memory: BTreeMap<String, (u64, u64)> = table
        .iter()
        .map(|f| (f.key.to_string(), (f.packets, f.bytes)))
        .collect();
    assert_eq!(from_memory, count(&want));
    // The daemon's report says the same; the memory cannot be written.
    let report = counted.report().unwrap();
    assert_eq!(report[0]["class"], "hashcount");
    assert_eq!(listed(&report[0]["report"]["top"]), from_memory);
    assert_eq!(report[0]["report"]["overflow"], 0);
    assert!(mem.store(0, 1).is_err());

    // The packet counter: every IP packet counted, none handed over.
    assert_eq!(counter.memories()[0].0, "packetcount");
    assert_eq!(counter.memories()[0].1.load_u64(0), ip.len() as u64);
    let s = counter.stats();
    assert_eq!((s.accepted, s.delivered), (0, 0));

    // The status shows both flows' elements.
    let st = status(&sock);
    let flows: Vec<&serde_json::Value> = st["clients"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["flows"].as_array().unwrap())
        .collect();
    let hc = flows
        .iter()
        .find(|f| f["elements"][0]["class"] == "hashcount")
        .unwrap_or_else(|| panic!("no hashcount flow in {st}"));
    assert_eq!(listed(&hc["elements"][0]["report"]["top"]), from_memory);
    drop(counted);
    drop(counter);
    drop(client);
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn elements_that_would_read_files_or_are_not_allowed_are_refused() {
    let Some(net) = Net::new("daemon-mbuf-refuse") else {
        return;
    };
    let (d, sock, _) = daemon_with_policy(
        &net,
        "allow uid=0 source=iface:vb class=bpf,packetcount\n",
        &[],
    );
    let mut client = sluice::daemon::Client::connect(&sock, "refusals").unwrap();
    // hashcount is not allowed: refused by the policy, naming its line.
    let e = client
        .open("(iface,vb) -> (BPF,\"tcp\") -> (hashcount,10)", 0)
        .err()
        .expect("refused");
    let msg = e.to_string();
    assert!(msg.contains("hashcount"), "{msg}");
    // The daemon never reads a file: an FPL program named by a path that
    // the client cannot inline (it does not exist) is an error here, and
    // one sent as @FILE text never reaches the daemon as a path.
    assert!(client
        .open("(iface,vb) -> (FPL-2,@/nonexistent/prog.fpl)", 0)
        .is_err());
    // Allowed: a counter.
    let ok = client.open("(iface,vb) -> (BPF,\"tcp\") -> (packetcount)", 0);
    assert!(ok.is_ok(), "{:?}", ok.err().map(|e| e.to_string()));
    drop(ok);
    drop(client);
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Packets (data and wire length), a counter, and element classes.
type Seen = (Vec<(Vec<u8>, u32)>, u64, Vec<String>);

/// Packets, the counter's memory and the elements' classes of a flow,
/// read through `FlowAccess` only: the same code for a flow in this
/// process and one in the daemon.
fn through_access(
    flow: &dyn sluice::flow::FlowAccess,
    mut reader: sluice::flow::buffer::Reader,
) -> Seen {
    let mut got = Vec::new();
    while let Some(p) = reader.next() {
        got.push((p.data.to_vec(), p.meta.wirelen));
    }
    let counted = flow.mbuf(2, 0).unwrap().load_u64(0);
    assert!(
        flow.mbuf(0, 0).unwrap().is_empty(),
        "a source has no memory"
    );
    assert!(flow.mbuf(3, 0).is_err(), "there is no stage 3");
    let report = flow.report().unwrap();
    assert_eq!(report.packets, got.len() as u64);
    assert_eq!(report.delivered, got.len() as u64);
    assert_eq!(report.drops, 0);
    // The elements after the source (a file here, an interface there).
    let classes = report
        .filters
        .iter()
        .skip(1)
        .map(|f| f.class.to_ascii_lowercase())
        .collect();
    (got, counted, classes)
}

#[test]
fn a_daemon_flow_and_a_flow_in_this_process_read_alike() {
    let Some(net) = Net::new("daemon-access") else {
        return;
    };
    let sock = net.file("d.sock");
    let d = daemon(&net, &sock, &[]);
    let mut client = sluice::daemon::Client::connect(&sock, "access test").unwrap();
    let remote = client
        .open(
            &format!("(iface,vb) -> (BPF,\"{EXPR}\") -> (packetcount,pass)"),
            0,
        )
        .unwrap();
    // A reader of its own, beside the flow's.
    let reader = sluice::flow::FlowAccess::reader(&remote, 16).unwrap();
    let all = net.file("all.pcap");
    let dump = tcpdump(&net, &all, &[]);
    let sent = replay_all(&net);
    settle();
    assert!(dump.interrupt().status.success());
    assert_eq!(frames(&all).len() as u64, sent);
    let want = libpcap_filter(&all, EXPR, &net.file("tcp.pcap"));
    assert!(want.len() > 100, "the captures exercise it");
    let from_daemon = through_access(&remote, reader);

    // The same flow in this process, on tcpdump's file of the same frames.
    // Buffers that hold the whole run (it is read after it ends), with
    // the daemon's slot size.
    let g = sluice::flow::Group::new(sluice::flow::GroupConfig {
        slots: 8192,
        slot_bytes: 9216,
        ibuf_entries: 8192,
        ..Default::default()
    })
    .unwrap();
    let mut local = sluice::flow::Flow::create(&g);
    local
        .populate(&format!(
            "(file,{}) -> (BPF,\"{EXPR}\") -> (packetcount,pass)",
            all.display()
        ))
        .unwrap();
    local.instantiate_unchecked().unwrap();
    local.activate().unwrap();
    let reader = sluice::flow::FlowAccess::reader(&local, 16).unwrap();
    g.run().unwrap();
    let here = through_access(&local, reader);

    assert_eq!(from_daemon.0, want);
    assert_eq!(from_daemon.1, want.len() as u64);
    assert_eq!(from_daemon, here);
    drop(remote);
    drop(client);
    let o = d.interrupt();
    assert!(o.status.success(), "{}", text(&o.stderr));
}
