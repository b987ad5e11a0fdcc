//! The generated filter sets against libpcap (Debian's) and sluice: every
//! expression compiles in both, the traffic matches a few filters per
//! packet, the sets are diverse, deterministic and cover every kind of
//! rule, and the traffic every kind of packet.

use pcap::{BpfProgram, Capture, Linktype};
use sluice::{LinkType, Program};
use sluice_workload::{features, filter_set, traffic, Feature, Workload};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

const SEEDS: [u64; 3] = [1, 2, 0xdead_beef];

fn libpcap(expressions: &[String]) -> Vec<Result<BpfProgram, String>> {
    let cap = Capture::dead(Linktype::ETHERNET).expect("libpcap dead handle");
    expressions
        .iter()
        .map(|e| cap.compile(e, true).map_err(|x| x.to_string()))
        .collect()
}

fn sluice_program(e: &str) -> Result<Program, String> {
    Program::builder(LinkType::EN10MB)
        .snaplen(262_144)
        .expression(e)
        .map_err(|x| x.to_string())
}

#[test]
fn every_expression_compiles_in_libpcap_and_sluice() {
    let mut failures = Vec::new();
    for seed in SEEDS {
        let set = filter_set(1000, seed);
        for (e, lp) in set.iter().zip(libpcap(&set)) {
            let ours = sluice_program(e);
            if lp.is_err() || ours.is_err() {
                failures.push(format!(
                    "seed {seed}: {e}: libpcap {:?}, sluice {:?}",
                    lp.err(),
                    ours.err()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Matches per packet of `filter_set(n, seed)` over the first `packets`
/// packets of its traffic, counted with sluice's interpreter (which sees
/// the wire length of truncated packets); checks that libpcap agrees on
/// every packet captured whole.
fn matches_per_packet(n: usize, seed: u64, packets: usize) -> f64 {
    let w = Workload::new(n, seed);
    let set = w.expressions();
    let ours: Vec<Program> = set.iter().map(|e| sluice_program(e).unwrap()).collect();
    let theirs: Vec<BpfProgram> = libpcap(&set).into_iter().map(Result::unwrap).collect();
    let mut total = 0usize;
    for (data, wire) in w.traffic(packets) {
        for (k, p) in ours.iter().enumerate() {
            let m = p.run(&data, wire) != 0;
            total += usize::from(m);
            if data.len() == wire as usize {
                assert_eq!(m, theirs[k].filter(&data), "{}: {data:02x?}", set[k]);
            }
        }
    }
    total as f64 / packets as f64
}

#[test]
fn each_packet_matches_a_few_filters() {
    for seed in SEEDS {
        let mean = matches_per_packet(1000, seed, 2000);
        println!("n = 1000, seed {seed}: {mean:.2} matches per packet");
        assert!((1.0..=10.0).contains(&mean), "seed {seed}: {mean}");
    }
    for n in [10, 100] {
        let mean = matches_per_packet(n, 1, 2000);
        println!("n = {n}: {mean:.2} matches per packet");
        assert!((1.0..=10.0).contains(&mean), "n = {n}: {mean}");
    }
}

/// The table of the crate's README: mean matches per packet for n = 10 to
/// 100,000 (run on demand: `cargo test -p sluice-workload --release --
/// --ignored --nocapture`).
#[test]
#[ignore]
fn matches_per_packet_table() {
    for (n, packets) in [
        (10, 5000),
        (100, 5000),
        (1000, 5000),
        (10_000, 2000),
        (100_000, 1000),
    ] {
        let t = std::time::Instant::now();
        let set = filter_set(n, 1);
        let gen = t.elapsed();
        let progs: Vec<BpfProgram> = libpcap(&set).into_iter().map(Result::unwrap).collect();
        let mut total = 0usize;
        for (data, _) in traffic(n, 1, packets) {
            total += progs.iter().filter(|p| p.filter(&data)).count();
        }
        println!(
            "n = {n}: {:.2} matches per packet ({packets} packets), generated in {gen:?}",
            total as f64 / packets as f64
        );
    }
}

#[test]
fn sets_are_diverse_and_mostly_selective() {
    for seed in SEEDS {
        let w = Workload::new(1000, seed);
        let filters = w.filters();
        let distinct: HashSet<&str> = filters.iter().map(|f| f.expression.as_str()).collect();
        assert!(
            distinct.len() * 10 >= filters.len() * 9,
            "{}",
            distinct.len()
        );
        let broad = filters.iter().filter(|f| !f.selective).count();
        assert!((1..=30).contains(&broad), "{broad} unselective");
        let names: HashSet<&str> = filters.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names.len(), filters.len());
    }
}

#[test]
fn deterministic_and_seeded() {
    assert_eq!(filter_set(1000, 5), filter_set(1000, 5));
    assert_ne!(filter_set(1000, 5), filter_set(1000, 6));
    assert_eq!(filter_set(300, 5)[..], filter_set(1000, 5)[..300]);
    assert_eq!(traffic(1000, 5, 200), traffic(1000, 5, 200));
    assert_ne!(traffic(1000, 5, 200), traffic(1000, 6, 200));
    assert_eq!(traffic(1000, 5, 100)[..], traffic(1000, 5, 200)[..100]);
}

#[test]
fn every_kind_of_rule_is_generated() {
    for seed in SEEDS {
        let mut seen = BTreeSet::new();
        let mut forms = BTreeSet::new();
        for f in Workload::new(1000, seed).filters() {
            seen.extend(features(&f.expression));
            forms.insert(f.form);
        }
        let missing: Vec<String> = Feature::ALL
            .iter()
            .filter(|f| !seen.contains(f))
            .map(|f| f.to_string())
            .collect();
        assert!(missing.is_empty(), "seed {seed}: missing {missing:?}");
        assert!(forms.len() >= 35, "seed {seed}: only {forms:?}");
    }
}

#[test]
fn every_kind_of_packet_is_generated() {
    let kinds = [
        ("ip", 0.55, 0.85),
        ("ip6", 0.15, 0.35),
        ("arp", 0.01, 0.06),
        ("vlan and not vlan", 0.06, 0.15),
        ("vlan", 0.08, 0.2),
        ("vlan and vlan", 0.02, 0.07),
        ("mpls", 0.02, 0.09),
        ("mpls and mpls", 0.005, 0.05),
        ("tcp", 0.35, 0.7),
        ("udp", 0.1, 0.35),
        ("icmp", 0.01, 0.1),
        ("icmp6", 0.005, 0.06),
        ("sctp", 0.003, 0.05),
        ("ip proto 47", 0.003, 0.05),
        ("ip[6:2] & 0x3fff != 0", 0.005, 0.06),
        ("tcp[tcpflags] & tcp-syn != 0", 0.02, 0.15),
        ("tcp[tcpflags] & tcp-rst != 0", 0.01, 0.1),
        ("len > 1000", 0.2, 0.6),
        ("less 100", 0.2, 0.6),
        ("tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420", 0.001, 0.05),
        ("ip[1] & 0xfc == 0xb8", 0.01, 0.1),
    ];
    let packets = traffic(1000, 1, 4000);
    let truncated = packets
        .iter()
        .filter(|(d, w)| d.len() < *w as usize)
        .count();
    assert!(truncated > 20 && truncated < 200, "{truncated} truncated");
    for (e, lo, hi) in kinds {
        let p = sluice_program(e).unwrap();
        let share =
            packets.iter().filter(|(d, w)| p.run(d, *w) != 0).count() as f64 / packets.len() as f64;
        assert!((lo..=hi).contains(&share), "{e}: {share}");
    }
}

#[test]
fn corpus() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if !shared.join("conformance").is_dir() {
        println!("skipping: {} is absent", shared.display());
        return;
    }
    let filters = sluice_workload::corpus_filters(&shared, 600).unwrap();
    assert_eq!(filters.len(), 600);
    assert_eq!(filters[0], "tcp");
    let packets = sluice_workload::corpus_packets(&shared).unwrap();
    assert!(packets.len() > 6000, "{}", packets.len());
    let bytes = sluice_workload::pcap_bytes(&packets);
    let mut r = sluice::capture::CaptureReader::from_reader(&bytes[..], "corpus").unwrap();
    let mut k = 0;
    while let Some(p) = r.next_packet().unwrap() {
        assert_eq!((p.data, p.wirelen), (&packets[k].0[..], packets[k].1));
        k += 1;
    }
    assert_eq!(k, packets.len());
}
