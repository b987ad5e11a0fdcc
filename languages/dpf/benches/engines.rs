//! DPF filters on every engine: ns per packet for the DPF interpreter (the
//! parsed atoms), the canonical IR's reference interpreter, the BPF
//! interpreter and native code. Packets: the Ethernet packets of
//! ../shared/conformance/pcaps/mptcp-v0.pcap (whose session the examples
//! select), or synthetic TCP packets when the corpus is absent.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use sluice_dpf::parse;

const FIGURE_1: &str = include_str!("../../../examples/dpf-figure1.dpf");
const SESSION: &str = include_str!("../../../examples/dpf-tcp-session.dpf");

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
    let mut g = c.benchmark_group("dpf");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for (name, src) in [("figure_1", FIGURE_1), ("session_indirect_shift", SESSION)] {
        let f = parse(src).expect("parses");
        let ir = f.to_ir(1);
        let bpf = sluice_cbpf::lower(&ir).expect("lowers");
        let native = sluice_native::NativeFilter::compile(&ir).expect("compiles");
        let want: usize = pkts.iter().filter(|p| f.run(p)).count();
        let got: usize = pkts
            .iter()
            .filter(|p| native.run(p, p.len() as u32) != 0)
            .count();
        assert_eq!(got, want, "{name}");
        g.bench_function(format!("{name}/dpf_interpreter"), |b| {
            b.iter(|| pkts.iter().filter(|p| f.run(black_box(p))).count())
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
