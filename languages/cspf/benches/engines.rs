//! CSPF filters on every engine: ns per packet for the CSPF interpreter,
//! the IR's reference interpreter, the BPF interpreter (IR lowered to
//! classic BPF) and native code (IR compiled with Cranelift). Packets: the
//! Ethernet packets of ../shared/conformance/pcaps/mptcp-v0.pcap (whose
//! session MPF Appendix C's example selects), or synthetic TCP packets
//! when the corpus is absent.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};

#[path = "../../bench_engines.rs"]
mod common;
use sluice_cspf::assemble;

const APPENDIX_C: &str = include_str!("../../../examples/mpf-appendix-c.cspf");

/// The CSPF paper's first example, with eq/gt/le and two ands (no short circuits).
const PUP_RANGE: &str = "pushword P[6] pushlit | eq #0x0800
    pushword P[11] push00ff | and pushzero | gt
    pushword P[11] push00ff | and pushlit | le #17
    and and";

fn bench(c: &mut Criterion) {
    let pkts = common::packets();
    let mut g = c.benchmark_group("cspf");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for (name, src) in [("appendix_c", APPENDIX_C), ("pup_range", PUP_RANGE)] {
        let prog = assemble(src).expect("assembles");
        common::engines(&mut g, "cspf", name, |p| prog.run(p), &prog.to_ir(1), &pkts);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
