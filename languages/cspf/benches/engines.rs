//! CSPF filters on every engine: ns per packet for the CSPF interpreter,
//! the IR's reference interpreter, the BPF interpreter (IR lowered to
//! classic BPF) and native code (IR compiled with Cranelift). Packets: the
//! Ethernet packets of ../shared/conformance/pcaps/mptcp-v0.pcap (whose
//! session MPF Appendix C's example selects), or synthetic TCP packets
//! when the corpus is absent.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_cspf::assemble;

const APPENDIX_C: &str = include_str!("../../../examples/mpf-appendix-c.cspf");

/// The CSPF paper's first example, with eq/gt/le and two ands (no short circuits).
const PUP_RANGE: &str = "pushword P[6] pushlit | eq #0x0800
    pushword P[11] push00ff | and pushzero | gt
    pushword P[11] push00ff | and pushlit | le #17
    and and";

fn packets() -> Vec<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/conformance/pcaps/mptcp-v0.pcap"
    );
    let mut out = Vec::new();
    if let Ok(mut r) = sluice_capture::CaptureReader::open(path) {
        while let Ok(Some(p)) = r.next_packet() {
            out.push(p.data.to_vec());
        }
    }
    if out.is_empty() {
        for port in 0..64u16 {
            let mut p = vec![0u8; 66];
            p[12] = 8;
            p[14] = 0x45;
            p[23] = 6;
            p[34..36].copy_from_slice(&(35930 + port).to_be_bytes());
            p[37] = 22;
            out.push(p);
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let pkts = packets();
    let mut g = c.benchmark_group("cspf");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for (name, src) in [("appendix_c", APPENDIX_C), ("pup_range", PUP_RANGE)] {
        let prog = assemble(src).expect("assembles");
        let ir = prog.to_ir(1);
        let bpf = sluice_cbpf::lower(&ir).expect("lowers");
        let native = sluice_native::NativeFilter::compile(&ir).expect("compiles");
        let want: usize = pkts.iter().filter(|p| prog.run(p)).count();
        let got: usize = pkts
            .iter()
            .filter(|p| native.run(p, p.len() as u32) != 0)
            .count();
        assert_eq!(got, want, "{name}");
        g.bench_function(format!("{name}/cspf_interpreter"), |b| {
            b.iter(|| pkts.iter().filter(|p| prog.run(black_box(p))).count())
        });
        g.bench_function(format!("{name}/ir_reference"), |b| {
            b.iter(|| {
                pkts.iter()
                    .filter(|p| ir.run(black_box(p), p.len() as u32) != 0)
                    .count()
            })
        });
        g.bench_function(format!("{name}/bpf_interpreter"), |b| {
            b.iter(|| {
                pkts.iter()
                    .filter(|p| sluice_bpf::run(&bpf, black_box(p), p.len() as u32) != 0)
                    .count()
            })
        });
        g.bench_function(format!("{name}/native"), |b| {
            b.iter(|| {
                pkts.iter()
                    .filter(|p| native.run(black_box(p), p.len() as u32) != 0)
                    .count()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
