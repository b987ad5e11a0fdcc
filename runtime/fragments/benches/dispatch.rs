//! What fragment dispatch costs on traffic that is not fragmented (MPF §3:
//! "essentially no overhead on filtering of non-fragmented packets"), and on
//! a mix with fragments.
//!
//! `cargo bench -p sluice-fragments --bench dispatch`. 4,096 Ethernet
//! packets held in memory (IPv4/TCP, IPv4/UDP, IPv6/TCP, some behind an
//! 802.1Q tag) against 10 session filters `tcp and src host A and dst port P`
//! merged in one classifier. Each group times one pass over the packets;
//! criterion reports time per pass and packets per second (divide: time per
//! packet).
//!
//! * `classify`: `Reader::classify_into` alone (the baseline).
//! * `classify+dispatch`: `Dispatcher::dispatch_with` (classify, find the
//!   network header, check the fragment fields, deliver).
//! * `dispatch only`: `Dispatcher::dispatch` with the filter ids already known.
//! * `mixed`: the same with every 20th packet replaced by a datagram in 3
//!   fragments (first fragment first), so 10% of the packets are fragments.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_capture::Packet;
use sluice_classifier::Classifier;
use sluice_fragments::fragmenter::{Datagram, Link};
use sluice_fragments::{Config, Dispatcher, Output};
use sluice_wire::link::LinkType;

const N: usize = 4096;

fn packets(mixed: bool) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(N);
    let mut x = 0x9e37_79b9u32;
    let mut id = 0u16;
    while out.len() < N {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let session = (x % 12) as u8;
        let src = [10, 0, 0, session];
        let dst = [10, 0, 1, 1];
        let port = 8000 + u16::from(session);
        id = id.wrapping_add(1);
        if mixed && out.len() % 20 == 0 && out.len() + 3 <= N {
            let d = Datagram::tcp_v4(src, dst, 40000, port, id, &[0; 2400]);
            out.extend(d.fragments(3).iter().map(|f| Link::Ethernet.wrap(f)));
            continue;
        }
        let d = match x % 10 {
            0..=6 => Datagram::tcp_v4(src, dst, 40000, port, id, &[0; 40]),
            7 => Datagram::udp_v4(src, dst, 40000, port, id, &[0; 40]),
            _ => Datagram::tcp_v6([1; 16], [2; 16], 40000, port, u32::from(id), &[0; 40]),
        };
        let link = if x % 7 == 0 {
            Link::Vlan(5)
        } else {
            Link::Ethernet
        };
        out.push(link.wrap(&d.whole()));
    }
    out
}

fn classifier() -> Classifier {
    let mut c = Classifier::new();
    for s in 0..10 {
        let expr = format!("tcp and src host 10.0.0.{s} and dst port {}", 8000 + s);
        let f = sluice_pcap::compile(&expr, LinkType::EN10MB, 262_144).expect("compiles");
        c.insert(&f, 0);
    }
    c.publish();
    c
}

fn bench(cr: &mut Criterion) {
    let c = classifier();
    let reader = c.reader();
    for mixed in [false, true] {
        let pkts = packets(mixed);
        let pkts: Vec<Packet<'_>> = pkts
            .iter()
            .enumerate()
            .map(|(i, p)| Packet::new(1_700_000_000, (i * 1000) as u32, 1, p))
            .collect();
        let name = if mixed { "mixed" } else { "unfragmented" };
        let mut g = cr.benchmark_group(name);
        g.throughput(Throughput::Elements(pkts.len() as u64));
        let mut ids = Vec::new();
        g.bench_function("classify", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &pkts {
                    reader.classify_into(p.data, p.wirelen, &mut ids);
                    n += ids.len();
                }
                black_box(n)
            })
        });
        let mut d = Dispatcher::new(Config::default());
        let mut out = Output::default();
        g.bench_function("classify+dispatch", |b| {
            b.iter(|| {
                let mut n = 0;
                for p in &pkts {
                    d.dispatch_with(&reader, p, &mut out);
                    n += out.len();
                }
                black_box(n)
            })
        });
        let verdicts: Vec<Vec<u32>> = pkts
            .iter()
            .map(|p| {
                c.reader()
                    .classify(p.data, p.wirelen)
                    .iter()
                    .map(|f| f.0)
                    .collect()
            })
            .collect();
        let mut d = Dispatcher::new(Config::default());
        g.bench_function("dispatch only", |b| {
            b.iter(|| {
                let mut n = 0;
                for (p, v) in pkts.iter().zip(&verdicts) {
                    d.dispatch(p, v, &mut out);
                    n += out.len();
                }
                black_box(n)
            })
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
