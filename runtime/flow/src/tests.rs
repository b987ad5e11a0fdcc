//! Flows end to end: life cycle, prefix sharing, counts against
//! independent computations on real captures, buffers under both
//! preferences through the group, authorisation at instantiate.

use crate::buffer::Preference;
use crate::policy::{Credentials, Policy};
use crate::value::Value;
use crate::{Error, Flow, FlowState, Group, GroupConfig};
use sluice_testsupport::corpus;
use std::sync::{Arc, Mutex};

fn sample() -> String {
    format!("{}/../../examples/sample.pcap", env!("CARGO_MANIFEST_DIR"))
}

/// A capture of the shared corpus, if it is there.
fn corpus(name: &str) -> Option<String> {
    let p = corpus::path(&format!("pcaps/{name}"))?;
    p.exists().then(|| p.to_string_lossy().into_owned())
}

/// Every packet of a capture: (link type, bytes, wire length).
fn packets(path: &str) -> Vec<(u16, Vec<u8>, u32)> {
    corpus::packets(path)
        .into_iter()
        .map(|p| (p.linktype, p.data, p.wirelen))
        .collect()
}

/// The reference meaning of an expression (the IR interpreter), on its own.
fn reference(expr: &str, pkts: &[(u16, Vec<u8>, u32)]) -> Vec<bool> {
    pkts.iter()
        .map(|(lt, d, w)| {
            let link = sluice_filter::LinkType::from_number(*lt as u32).unwrap();
            let p = sluice_filter::Program::builder(link)
                .optimize(false)
                .capture_big_endian(false)
                .expression(expr)
                .unwrap();
            p.run_reference(d, *w) != 0
        })
        .collect()
}

fn start(group: &Group, spec: &str) -> Flow {
    let mut f = Flow::create(group);
    f.populate(spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
    f.instantiate_unchecked()
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    f.activate().unwrap();
    f
}

fn result(f: &Flow, class: &str) -> Value {
    f.report()
        .unwrap()
        .filters
        .into_iter()
        .find(|x| x.class == class)
        .unwrap_or_else(|| panic!("no {class}"))
        .result
}

#[test]
fn life_cycle_order_is_enforced() {
    let g = Group::new(GroupConfig::default()).unwrap();
    let mut f = Flow::create(&g);
    assert_eq!(f.state(), FlowState::Created);
    assert!(matches!(
        f.instantiate_unchecked(),
        Err(Error::State {
            op: "instantiate",
            ..
        })
    ));
    assert!(matches!(f.activate(), Err(Error::State { .. })));
    f.populate(&format!("(file,{}) -> (packetcount,pass)", sample()))
        .unwrap();
    assert!(f.pause().is_err());
    f.instantiate_unchecked().unwrap();
    assert_eq!(f.state(), FlowState::Instantiated);
    assert!(f.populate("(file,x)").is_err());
    assert!(f.instantiate_unchecked().is_err());
    assert_eq!(g.instance_count(), 2);
    // Instantiated but not active: nothing is read.
    assert_eq!(g.run().unwrap().packets, 0);
    f.activate().unwrap();
    assert!(f.activate().is_err());
    f.pause().unwrap();
    f.activate().unwrap();
    let n = g.run().unwrap().packets;
    assert_eq!(n, packets(&sample()).len() as u64);
    assert_eq!(result(&f, "packetcount"), Value::U64(n));
    f.close();
    assert_eq!(g.instance_count(), 0);
    assert_eq!(g.flow_count(), 0);
}

#[test]
fn dropping_a_flow_frees_what_it_alone_used() {
    let g = Group::new(GroupConfig::default()).unwrap();
    let s = sample();
    let a = start(&g, &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"tcp\")"));
    {
        let _b = start(
            &g,
            &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"udp\") -> (bytecount)"),
        );
        assert_eq!(g.instance_count(), 5);
    }
    assert_eq!(g.instance_count(), 3);
    assert_eq!(g.flow_count(), 1);
    drop(a);
    assert_eq!(g.instance_count(), 0);
}

#[test]
fn pause_stops_a_flows_own_instances_only() {
    let g = Group::new(GroupConfig {
        batch: 4,
        ..GroupConfig::default()
    })
    .unwrap();
    let s = sample();
    let a = start(&g, &format!("(file,{s}) -> (packetcount,pass)"));
    let mut b = start(&g, &format!("(file,{s}) -> (bytecount,pass)"));
    g.run_for(4).unwrap();
    b.pause().unwrap();
    let st = g.run().unwrap();
    assert!(st.finished);
    assert_eq!(result(&a, "packetcount"), Value::U64(st.packets));
    let pkts = packets(&s);
    let first4: u64 = pkts[..4].iter().map(|p| p.2 as u64).sum();
    assert_eq!(result(&b, "bytecount"), Value::U64(first4));
}

#[test]
fn shared_prefix_has_one_sampler_instance_in_dot_and_counters() {
    let g = Group::new(GroupConfig::default()).unwrap();
    let s = sample();
    let a = start(
        &g,
        &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"tcp\") -> (packetcount,,8)"),
    );
    let b = start(
        &g,
        &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"ip\") -> (bytecount,,8)"),
    );
    let ia = a.instances().unwrap();
    let ib = b.instances().unwrap();
    assert_eq!(ia[..2], ib[..2], "file and sampler shared");
    assert_ne!(
        ia[2], ib[2],
        "different BPF expressions are different instances"
    );
    g.run().unwrap();
    let dot = g.dot();
    assert_eq!(dot.matches("label=\"sampler#").count(), 1, "{dot}");
    assert_eq!(dot.matches("label=\"BPF#").count(), 2, "{dot}");
    assert_eq!(dot.matches("shape=box, label=\"BPF\"").count(), 1, "{dot}");
    // The one sampler saw every packet once (not twice).
    let pkts = packets(&s);
    let sa = result(&a, "sampler");
    assert_eq!(sa.get("seen"), Some(&Value::U64(pkts.len() as u64)));
    assert_eq!(sa, result(&b, "sampler"));
    // And the counters agree with an independent computation.
    let tcp = reference("tcp", &pkts);
    let ip = reference("ip", &pkts);
    let want_tcp = (0..pkts.len()).filter(|i| i % 2 == 0 && tcp[*i]).count() as u64;
    let want_ip: u64 = (0..pkts.len())
        .filter(|i| i % 2 == 0 && ip[*i])
        .map(|i| pkts[i].2 as u64)
        .sum();
    assert_eq!(result(&a, "packetcount"), Value::U64(want_tcp));
    assert_eq!(result(&b, "bytecount"), Value::U64(want_ip));
}

#[test]
fn bpf_counts_match_the_reference_on_real_captures_merged_or_not() {
    let exprs = [
        "tcp",
        "udp",
        "ip6",
        "arp",
        "tcp port 80",
        "icmp or icmp6",
        "vlan",
        "greater 200",
    ];
    let files: Vec<String> = [
        "mptcp-v0.pcap",
        "pim-packet-assortment.pcap",
        "ptp_ethernet.pcap",
    ]
    .iter()
    .filter_map(|n| corpus(n))
    .chain([sample()])
    .collect();
    for file in &files {
        let pkts = packets(file);
        for merge in [true, false] {
            let g = Group::new(GroupConfig {
                merge,
                ..GroupConfig::default()
            })
            .unwrap();
            let flows: Vec<Flow> = exprs
                .iter()
                .map(|e| {
                    start(
                        &g,
                        &format!("(file,{file}) -> (BPF,\"{e}\") -> (packetcount)"),
                    )
                })
                .collect();
            g.run().unwrap();
            for (e, f) in exprs.iter().zip(&flows) {
                let want = reference(e, &pkts).iter().filter(|&&b| b).count() as u64;
                assert_eq!(
                    result(f, "packetcount"),
                    Value::U64(want),
                    "{file} {e} merge={merge}"
                );
                assert_eq!(
                    result(f, "BPF"),
                    Value::U64(want),
                    "{file} {e} merge={merge}"
                );
            }
        }
    }
}

#[test]
fn parallel_filters_join_once_and_deliver_results() {
    let s = sample();
    let pkts = packets(&s);
    let g = Group::new(GroupConfig::default()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let mut f = Flow::create(&g);
    f.populate(&format!("(file,{s}) -> (BPF,\"tcp\") | (BPF,\"ip\")"))
        .unwrap();
    f.on_packets(3, move |b| {
        while let Some(p) = b.next() {
            sink.lock().unwrap().push((p.data.to_vec(), p.result));
        }
    })
    .unwrap();
    f.instantiate_unchecked().unwrap();
    f.activate().unwrap();
    g.run().unwrap();
    let tcp = reference("tcp", &pkts);
    let ip = reference("ip", &pkts);
    let want: Vec<Vec<u8>> = pkts
        .iter()
        .enumerate()
        .filter(|(i, _)| tcp[*i] || ip[*i])
        .map(|(_, p)| p.1.clone())
        .collect();
    let got = got.lock().unwrap();
    assert_eq!(got.iter().map(|g| g.0.clone()).collect::<Vec<_>>(), want);
    assert!(got.iter().all(|g| g.1 == 262144));
    let r = f.report().unwrap();
    assert_eq!((r.packets, r.drops), (want.len() as u64, 0));
}

#[test]
fn overlapping_flows_store_each_packet_once() {
    let s = sample();
    let pkts = packets(&s);
    let g = Group::new(GroupConfig::default()).unwrap();
    let mut flows = Vec::new();
    for e in ["ip", "tcp", "ip"] {
        let mut f = Flow::create(&g);
        f.populate(&format!("(file,{s}) -> (BPF,\"{e}\")")).unwrap();
        f.on_packets(4, |b| while b.next().is_some() {}).unwrap();
        f.instantiate_unchecked().unwrap();
        f.activate().unwrap();
        flows.push(f);
    }
    let st = g.run().unwrap();
    let ip = reference("ip", &pkts).iter().filter(|&&b| b).count() as u64;
    let tcp = reference("tcp", &pkts).iter().filter(|&&b| b).count() as u64;
    // tcp is a subset of ip here: the union is the ip packets, stored once.
    assert_eq!(st.stored, ip);
    assert_eq!(g.pbuf().written(), ip);
    let got: Vec<u64> = flows.iter().map(|f| f.report().unwrap().packets).collect();
    assert_eq!(got, [ip, tcp, ip]);
}

#[test]
fn srp_and_frp_through_a_group_with_a_reader_thread() {
    // A replayed file long enough to wrap a small buffer many times; the
    // application reads from another thread while the group writes.
    let s = sample();
    let n_file = packets(&s).len() as u64;
    for pref in [Preference::Slow, Preference::Fast] {
        let g = Group::new(GroupConfig {
            slots: 16,
            ibuf_entries: 16,
            preference: pref,
            batch: 8,
            ..GroupConfig::default()
        })
        .unwrap();
        let f = start(&g, &format!("(replay,{s},1000000,pps,packet,300)"));
        let mut r = f.reader(4).unwrap();
        let reader = std::thread::spawn(move || {
            let mut k = 0u64;
            loop {
                while r.next().is_some() {
                    k += 1;
                    if k % 64 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                }
                if r.at_end() {
                    break;
                }
                r.wait_for(1, std::time::Duration::from_millis(5));
            }
            (r.delivered(), r.lost())
        });
        let st = g.run().unwrap();
        let (delivered, lost) = reader.join().unwrap();
        let written = g.pbuf().written();
        assert_eq!(st.packets, 300 * n_file);
        let ib_drops = f.report().unwrap().drops;
        match pref {
            Preference::Slow => {
                assert_eq!(lost, 0);
                assert_eq!(delivered, written);
                assert_eq!(written + ib_drops, st.packets, "{pref}");
            }
            Preference::Fast => {
                assert_eq!(written, st.packets);
                assert_eq!(delivered + lost, written, "{pref}");
            }
        }
    }
}

#[test]
fn mbuf_is_readable_and_writable_by_the_application() {
    let s = sample();
    let g = Group::new(GroupConfig::default()).unwrap();
    let f = start(
        &g,
        &format!("(file,{s}) -> (sampler,4,4) -> (packetcount,,8)"),
    );
    let sampler = f.mbuf(1, 0).unwrap();
    let counter = f.mbuf(2, 0).unwrap();
    // Shift the sampler's cycle before the run: it passes packets 1, 5, 9, …
    sampler.store(0, 3).unwrap();
    g.run().unwrap();
    let n = packets(&s).len() as u64;
    assert_eq!(counter.load_u64(0), (n + 2) / 4);
    assert!(f.mbuf(3, 0).is_err());
}

#[test]
fn hashcount_top_flows_match_a_direct_count() {
    let Some(file) = corpus("mptcp-v0.pcap") else {
        return;
    };
    let pkts = packets(&file);
    let g = Group::new(GroupConfig::default()).unwrap();
    let f = start(
        &g,
        &format!("(file,{file}) -> (BPF,\"tcp\") -> (hashcount,3,1024)"),
    );
    g.run().unwrap();
    let mut counts = std::collections::HashMap::<String, u64>::new();
    for (lt, d, _) in &pkts {
        if let Some((k, _)) = crate::net::five_tuple(*lt, d) {
            if k.proto == 6 {
                *counts.entry(k.to_string()).or_default() += 1;
            }
        }
    }
    let mut want: Vec<(u64, String)> = counts.into_iter().map(|(k, v)| (v, k)).collect();
    want.sort_by_key(|w| std::cmp::Reverse(w.0));
    let r = result(&f, "hashcount");
    let Some(Value::List(top)) = r.get("top") else {
        panic!("{r:?}")
    };
    assert_eq!(top.len(), 3.min(want.len()));
    for (t, w) in top.iter().zip(&want) {
        assert_eq!(t.get("packets"), Some(&Value::U64(w.0)), "{r}");
    }
}

#[test]
fn strsearch_after_sampler_counts_like_memmem() {
    let s = sample();
    let pkts = packets(&s);
    let g = Group::new(GroupConfig::default()).unwrap();
    let f = start(
        &g,
        &format!("(file,{s}) -> (sampler,1) -> (strsearch,\"\\x00\\x00\",HTTP) -> (packetcount)"),
    );
    g.run().unwrap();
    let want = pkts
        .iter()
        .filter(|p| p.1.windows(2).any(|w| w == [0, 0]) || p.1.windows(4).any(|w| w == b"HTTP"))
        .count() as u64;
    assert_eq!(result(&f, "packetcount"), Value::U64(want));
}

#[test]
fn authorisation_refuses_with_the_rule_and_frees_nothing_twice() {
    let s = sample();
    let g = Group::new(GroupConfig::default()).unwrap();
    let policy = Policy::parse(
        "allow source=file class=sampler,strsearch,packetcount\nrequire sampler before strsearch\ncallback every>=1000 unless sampler\n",
        "test.policy",
    )
    .unwrap();
    let me = Credentials::current();
    let try_ = |spec: &str, every: Option<u64>| {
        let mut f = Flow::create(&g);
        f.populate(spec).unwrap();
        if let Some(n) = every {
            f.on_packets(n, |_| {}).unwrap();
        }
        f.instantiate(&policy, &me).map(|_| f)
    };
    let e = try_(&format!("(file,{s}) -> (strsearch,GET)"), None)
        .err()
        .unwrap();
    assert!(
        e.to_string().starts_with("refused by test.policy:2:"),
        "{e}"
    );
    let e = try_(&format!("(file,{s}) -> (BPF,tcp)"), None)
        .err()
        .unwrap();
    assert!(e.to_string().contains("no rule allows class bpf"), "{e}");
    let e = try_(&format!("(replay,{s},10)"), None).err().unwrap();
    assert!(e.to_string().contains("source replay"), "{e}");
    let e = try_(&format!("(file,{s}) -> (packetcount,pass)"), Some(10))
        .err()
        .unwrap();
    assert!(
        e.to_string().starts_with("refused by test.policy:3:"),
        "{e}"
    );
    assert!(try_(
        &format!("(file,{s}) -> (sampler,2) -> (strsearch,GET)"),
        Some(10)
    )
    .is_ok());
    assert_eq!(g.instance_count(), 0, "refusals leave no instances behind");
}

#[test]
fn at_files_are_read_after_the_policy_and_their_externs_checked() {
    let s = sample();
    let examples = format!("{}/../../examples", env!("CARGO_MANIFEST_DIR"));
    let fig7 = format!("{examples}/fpl-figure7.fpl");
    let g = Group::new(GroupConfig::default()).unwrap();
    let me = Credentials::current();
    let run = |policy: &str, spec: &str| {
        let p = Policy::parse(policy, "p").unwrap();
        let mut f = Flow::create(&g);
        f.populate(spec)?;
        f.instantiate(&p, &me).map(|_| f)
    };
    // The program calls GetDynTCPDPortFromRTSP: known only once the file
    // is read, and still checked before anything runs.
    let spec = format!("(file,{s}) -> (FPL-2,@{fig7})");
    let read = format!("allow source=* class=* read={examples}\n");
    let e = run(&read, &spec).err().unwrap();
    assert!(
        e.to_string()
            .contains("external function GetDynTCPDPortFromRTSP"),
        "{e}"
    );
    assert!(run(
        &format!("{read}allow extern=GetDynTCPDPortFromRTSP\n"),
        &spec
    )
    .is_ok());
    // No read= rule: refused before the file is opened.
    let e = run("allow source=* class=*\n", &spec).err().unwrap();
    assert!(e.to_string().contains("no rule allows reading"), "{e}");
    // Populate never reads a file; a missing one is an error with the
    // column of its argument when the flow is checked.
    let mut f = Flow::create(&g);
    f.populate(&format!("(file,{s}) -> (BPF,@/nonexistent/prog)"))
        .unwrap();
    let e = f.instantiate_unchecked().err().unwrap();
    assert!(
        matches!(&e, Error::Spec(x) if x.column > 1 && x.message.contains("/nonexistent/prog")),
        "{e}"
    );
    assert_eq!(g.instance_count(), 0);
}

#[test]
fn spec_errors_carry_columns_through_populate() {
    let g = Group::new(GroupConfig::default()).unwrap();
    let mut f = Flow::create(&g);
    let cases = [
        ("(file,a) -> (nosuch,1)", 13, "unknown filter class"),
        ("(sampler,2)", 1, "is a filter"),
        ("(file,a) -> (file,b)", 13, "is a packet source"),
        ("(file,a) -> (BPF,\"tcp and\")", 26, "after 'and'"),
        ("(file,a) -> (bytecount,,4)", 25, "too small"),
        ("(iface)", 1, "iface needs an interface"),
        ("(iface,eth0,soon)", 13, "SECONDS must be a number"),
        ("(file,a) -> (replay,b,1)", 13, "packet source"),
        ("(replay,a,fast)", 11, "rate"),
    ];
    for (spec, col, msg) in cases {
        match f.populate(spec) {
            Err(Error::Spec(e)) => {
                assert_eq!(e.column, col, "{spec}: {e}");
                assert!(e.message.contains(msg), "{spec}: {e}");
            }
            other => panic!("{spec}: {other:?}"),
        }
    }
}

#[test]
fn rtsp_tracker_passes_the_negotiated_streams_from_a_capture() {
    use sluice_capture::{CaptureFormat, CaptureWriter, Packet};
    let pkt = |proto: u8, src: [u8; 4], sp: u16, dst: [u8; 4], dp: u16, body: &[u8]| {
        crate::stats::tests::ipv4(proto, src, sp, dst, dp, body)
    };
    let (c, sv) = ([10, 1, 1, 2], [10, 1, 1, 1]);
    let frames = [
        pkt(17, sv, 5000, c, 9000, b"early"),
        pkt(6, c, 40000, sv, 554, b"SETUP rtsp://s/v RTSP/1.0\r\nTransport: RTP/AVP;unicast;client_port=9000-9001\r\n\r\n"),
        pkt(6, sv, 554, c, 40000, b"RTSP/1.0 200 OK\r\nTransport: RTP/AVP;unicast;client_port=9000-9001;server_port=5000-5001\r\n\r\n"),
        pkt(17, sv, 5000, c, 9000, b"rtp1"),
        pkt(17, sv, 5001, c, 9001, b"rtcp"),
        pkt(17, sv, 5000, c, 9002, b"other"),
        pkt(17, sv, 5000, c, 9000, b"rtp2"),
    ];
    let dir = std::env::temp_dir().join(format!("sluice-flow-rtsp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("rtsp.pcap");
    let mut w = CaptureWriter::create(&path, &CaptureFormat::pcap(1, 65535)).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&Packet::new(i as i64, 0, 1, f)).unwrap();
    }
    w.finish().unwrap();
    let g = Group::new(GroupConfig::default()).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let sink = got.clone();
    let mut f = Flow::create(&g);
    f.populate(&format!("(file,{}) -> (rtsp)", path.display()))
        .unwrap();
    f.on_packets(1, move |b| {
        while let Some(p) = b.next() {
            sink.lock().unwrap().push(p.data.to_vec());
        }
    })
    .unwrap();
    f.instantiate_unchecked().unwrap();
    f.activate().unwrap();
    g.run().unwrap();
    assert_eq!(
        *got.lock().unwrap(),
        vec![frames[3].clone(), frames[4].clone(), frames[6].clone()]
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn group_memory_per_flow_is_small() {
    // Not a speed claim: a bound that fails if per-flow state balloons.
    let s = sample();
    let g = Group::new(GroupConfig {
        ibuf_entries: 256,
        ..GroupConfig::default()
    })
    .unwrap();
    let flows: Vec<Flow> = (0..50)
        .map(|i| {
            start(
                &g,
                &format!("(file,{s}) -> (BPF,\"tcp port {i}\") -> (packetcount,pass)"),
            )
        })
        .collect();
    let per_flow = g.instance_buffer_bytes() / flows.len();
    assert!(per_flow < 8 * 1024, "{per_flow} bytes per flow");
}

#[test]
fn fpl_figure6_through_a_flow_counts_every_tcp_packet() {
    let s = sample();
    let pkts = packets(&s);
    let fig6 = format!(
        "{}/../../examples/fpl-figure6.fpl",
        env!("CARGO_MANIFEST_DIR")
    );
    let g = Group::new(GroupConfig::default()).unwrap();
    let f = start(&g, &format!("(file,{s}) -> (FPL-2,@{fig6})"));
    g.run().unwrap();
    let mem = f.mbuf(1, 0).unwrap().snapshot();
    // Independently: Ethernet frames whose IP protocol byte says TCP and
    // that are long enough for the hashed bytes (26..38).
    let want = pkts
        .iter()
        .filter(|p| p.1.len() >= 38 && p.1[23] == 6)
        .count() as u32;
    assert_eq!(mem[..256].iter().sum::<u32>(), want);
    let r = result(&f, "FPL-2");
    assert_eq!(r.get("runs"), Some(&Value::U64(pkts.len() as u64)));
}

#[test]
fn fpl_and_bpf_in_parallel_share_the_sampler() {
    let s = sample();
    let g = Group::new(GroupConfig::default()).unwrap();
    let a = start(
        &g,
        &format!("(file,{s}) -> (sampler,2,4) -> (FPL-2,\"IF (PKT.IP_PROTO == PROTO_TCP) THEN RETURN 1; FI\") | (BPF,\"udp\") -> (bytecount,,8)"),
    );
    let b = start(
        &g,
        &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"tcp\") -> (packetcount,,8)"),
    );
    g.run().unwrap();
    let pkts = packets(&s);
    let tcp = reference("tcp", &pkts);
    let udp = reference("udp", &pkts);
    let want_bytes: u64 = (0..pkts.len())
        .filter(|&i| i % 2 == 0 && (tcp[i] || udp[i]))
        .map(|i| pkts[i].2 as u64)
        .sum();
    let want_tcp = (0..pkts.len()).filter(|&i| i % 2 == 0 && tcp[i]).count() as u64;
    assert_eq!(result(&a, "bytecount"), Value::U64(want_bytes));
    assert_eq!(result(&b, "packetcount"), Value::U64(want_tcp));
    assert_eq!(a.instances().unwrap()[..2], b.instances().unwrap()[..2]);
}
