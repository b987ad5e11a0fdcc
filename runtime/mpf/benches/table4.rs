//! MPF's Table 4: time to filter one TCP/IP packet against N installed
//! session filters (N = 1, 10, 100, 1000, 10000), each packet belonging to
//! one of the sessions (uniformly chosen; sources and ports from
//! consecutive ranges, as in the paper).
//!
//! * `mpf_set`: the N Figure 3 programs (examples/mpf-figure3.bpf with
//!   each session's keys) collapsed in one `MpfSet`: the common part once,
//!   one hash probe;
//! * `mpf_one_by_one`: the same N programs run one after another, each
//!   with the MPF interpreter (`Separate`);
//! * `bpf_one_by_one`: the N Appendix A programs (classic BPF,
//!   examples/mpf-appendix-a.bpf) run one after another with sluice's BPF
//!   interpreter — the paper's BPF row. Every program runs on every packet
//!   (a BPF listener sees all packets).
//!
//! Criterion reports the time per packet. `SLUICE_MPF_SIZES="1 10"`
//! chooses the sizes; `SLUICE_BENCH_QUICK=1` shortens the measurement.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use sluice_bpf::mpf::MpfProgram;
use sluice_bpf::Validated;
use sluice_mpf::{MpfSet, Separate};
use std::hint::black_box;
use std::time::Duration;

const FIG3: &str = include_str!("../../../examples/mpf-figure3.bpf");
const APPX_A: &str = include_str!("../../../examples/mpf-appendix-a.bpf");

/// Session i: 10.2.x.y:(1024 + i) -> 10.1.1.2:22, x.y = i.
fn session(i: usize) -> (u32, u32, u32) {
    (0x0a02_0000 + i as u32, 1024 + i as u32, 22)
}

fn figure3(keys: (u32, u32, u32)) -> MpfProgram {
    let base = MpfProgram::parse(FIG3).unwrap();
    let mut insns = base.insns().to_vec();
    let site = base.key_sites()[0];
    insns[site.pc + 1].k = keys.0;
    insns[site.pc + 2].k = keys.1;
    insns[site.pc + 3].k = keys.2;
    MpfProgram::new(&insns).unwrap()
}

fn appendix_a(keys: (u32, u32, u32)) -> Validated {
    let mut insns = sluice_bpf::parse_program(APPX_A).unwrap();
    // ld [26]; jeq src / ldh [x+14]; jeq sport / ldh [x+16]; jeq dport.
    insns[5].k = keys.0;
    insns[13].k = keys.1;
    insns[15].k = keys.2;
    Validated::new(&insns).unwrap()
}

/// Ethernet/IPv4/TCP, 10 bytes of data, session i.
fn packet(i: usize) -> Vec<u8> {
    let (src, sport, dport) = session(i);
    let mut p = vec![0u8; 14 + 20 + 20 + 10];
    p[12] = 0x08;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&50u16.to_be_bytes());
    p[20] = 0x40; // DF
    p[22] = 64;
    p[23] = 6;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&0x0a01_0102u32.to_be_bytes());
    p[34..36].copy_from_slice(&(sport as u16).to_be_bytes());
    p[36..38].copy_from_slice(&(dport as u16).to_be_bytes());
    p[46] = 0x50;
    p
}

fn bench(c: &mut Criterion) {
    let sizes: Vec<usize> = std::env::var("SLUICE_MPF_SIZES")
        .ok()
        .map(|s| {
            s.split_whitespace()
                .filter_map(|t| t.parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![1, 10, 100, 1000, 10000]);
    let quick = std::env::var_os("SLUICE_BENCH_QUICK").is_some();
    let mut g = c.benchmark_group("table4");
    g.sample_size(10);
    g.warm_up_time(Duration::from_millis(if quick { 300 } else { 1000 }));
    g.measurement_time(Duration::from_millis(if quick { 1500 } else { 5000 }));
    for &n in &sizes {
        let mut set = MpfSet::default();
        let mut sep = Separate::default();
        let mut bpf = Vec::with_capacity(n);
        for i in 0..n {
            let p = figure3(session(i));
            set.insert(&p);
            sep.insert(&p);
            bpf.push(appendix_a(session(i)));
        }
        assert_eq!(set.stats().groups, 1);
        // 4096 packets of uniformly chosen sessions.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let pkts: Vec<Vec<u8>> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                packet((x % n as u64) as usize)
            })
            .collect();
        let mut out = Vec::new();
        // Each engine accepts each packet exactly once.
        for p in &pkts[..64] {
            set.process(p, p.len() as u32, 0, &mut out);
            assert_eq!(out.len(), 1);
            sep.process(p, p.len() as u32, 0, &mut out);
            assert_eq!(out.len(), 1);
            assert_eq!(
                bpf.iter().filter(|v| v.run(p, p.len() as u32) != 0).count(),
                1
            );
        }
        let mut i = 0usize;
        g.bench_function(BenchmarkId::new("mpf_set", n), |b| {
            b.iter(|| {
                let p = &pkts[i & 4095];
                i += 1;
                set.process(black_box(p), p.len() as u32, 0, &mut out);
                out.len()
            })
        });
        g.bench_function(BenchmarkId::new("mpf_one_by_one", n), |b| {
            b.iter(|| {
                let p = &pkts[i & 4095];
                i += 1;
                sep.process(black_box(p), p.len() as u32, 0, &mut out);
                out.len()
            })
        });
        g.bench_function(BenchmarkId::new("bpf_one_by_one", n), |b| {
            b.iter(|| {
                let p = &pkts[i & 4095];
                i += 1;
                let mut hits = 0;
                for v in &bpf {
                    hits += (v.run(black_box(p), p.len() as u32) != 0) as usize;
                }
                hits
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
