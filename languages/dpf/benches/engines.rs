//! DPF filters on every engine: ns per packet for the DPF interpreter (the
//! parsed atoms), the canonical IR's reference interpreter, the BPF
//! interpreter and native code. Packets: the Ethernet packets of
//! ../shared/conformance/pcaps/mptcp-v0.pcap (whose session the examples
//! select), or synthetic TCP packets when the corpus is absent.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "../../bench_engines.rs"]
mod common;
use sluice_dpf::parse;

const FIGURE_1: &str = include_str!("../../../examples/dpf-figure1.dpf");
const SESSION: &str = include_str!("../../../examples/dpf-tcp-session.dpf");

fn bench(c: &mut Criterion) {
    let pkts = common::packets();
    let mut g = c.benchmark_group("dpf");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for (name, src) in [("figure_1", FIGURE_1), ("session_indirect_shift", SESSION)] {
        let f = parse(src).expect("parses");
        common::engines(&mut g, "dpf", name, |p| f.run(p), &f.to_ir(1), &pkts);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
