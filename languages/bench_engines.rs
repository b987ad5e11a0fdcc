//! The engine benchmark the CSPF and DPF crates share (each includes this
//! file with `#[path]`): a filter in the language's own interpreter, the
//! IR's reference interpreter, the BPF interpreter and native code, on the
//! same packets.

use criterion::measurement::WallTime;
use criterion::{black_box, BenchmarkGroup};

/// The Ethernet packets of ../shared/conformance/pcaps/mptcp-v0.pcap (the
/// session the languages' examples select), or synthetic TCP packets when
/// the corpus is absent.
pub fn packets() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = sluice_testsupport::corpus::path("pcaps/mptcp-v0.pcap")
        .map(sluice_testsupport::corpus::packets)
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.data)
        .collect();
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

/// Time filter `name` in every engine: `own` is the language's interpreter
/// (benchmarked as `{lang}_interpreter`), `ir` its lowering. Native code
/// must accept exactly the packets `own` does.
pub fn engines(
    g: &mut BenchmarkGroup<'_, WallTime>,
    lang: &str,
    name: &str,
    own: impl Fn(&[u8]) -> bool,
    ir: &sluice_ir::Filter,
    pkts: &[Vec<u8>],
) {
    let bpf = sluice_cbpf::lower(ir).expect("lowers");
    let native = sluice_native::NativeFilter::compile(ir).expect("compiles");
    let want: usize = pkts.iter().filter(|p| own(p)).count();
    let got: usize = pkts
        .iter()
        .filter(|p| native.run(p, p.len() as u32) != 0)
        .count();
    assert_eq!(got, want, "{name}");
    g.bench_function(format!("{name}/{lang}_interpreter"), |b| {
        b.iter(|| pkts.iter().filter(|p| own(black_box(p))).count())
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
