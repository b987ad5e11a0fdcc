//! ns per packet of FPL programs: the reference interpreter against native
//! code, for Figures 6 and 7 of the FFPF paper and the per-port counter.
//!
//! `cargo bench -p sluice-native --bench fpl`. The packets are every
//! Ethernet packet of the classic-pcap files among the shared corpus
//! captures (or `examples/sample.pcap` without the corpus), held in memory;
//! one criterion iteration runs the program over all of them, so the time
//! per iteration divided by the packet count (printed first) is the time
//! per packet. For Figure 7 the MBuf holds 16 announced ports, so each TCP
//! packet walks a 16-entry array.
//!
//! FFPF's Table 1 compares an FPL filter with the same filter in BPF; the
//! group `fpl-vs-bpf` times `ip and tcp dst port 80` as FPL (interpreter,
//! native) and as pcap compiled by sluice (classic BPF interpreter, native
//! code from the IR), after checking that all four accept the same packets.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sluice_fpl::{Externs, Program};
use sluice_native::fpl::NativeFpl;
use sluice_testsupport::corpus;
use std::hint::black_box;
use std::path::Path;

/// Every packet of the classic-pcap, Ethernet captures of the corpus
/// (`examples/sample.pcap` without it).
fn packets() -> Vec<Vec<u8>> {
    corpus::pcaps_or_sample()
        .iter()
        .filter_map(corpus::Capture::read)
        .filter(|c| !c.format.is_pcapng() && c.format.linktype() == Some(1))
        .flat_map(|c| c.packets)
        .map(|p| p.data)
        .collect()
}

fn bench(c: &mut Criterion) {
    let pkts = packets();
    println!("fpl bench: {} packets per iteration", pkts.len());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let ext = Externs::builtin();
    let mut g = c.benchmark_group("fpl");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    for name in ["fpl-figure6", "fpl-figure7", "fpl-tcp-ports"] {
        let src = std::fs::read_to_string(root.join(format!("{name}.fpl"))).unwrap();
        let p = Program::compile(&src, &ext).unwrap();
        let n = NativeFpl::compile(&p).unwrap();
        // Figure 7: 16 announced ports (not matching the traffic's).
        let setup = |mem: &mut [u32]| {
            if name == "fpl-figure7" {
                for (k, w) in mem[..16].iter_mut().enumerate() {
                    *w = 60_000 + k as u32;
                }
                mem[p.reg_base()] = 16;
            }
        };
        let mut mem = vec![0u32; p.mem_words()];
        g.bench_function(format!("{name}/interpreter"), |b| {
            b.iter(|| {
                setup(&mut mem);
                let mut acc = 0u32;
                for pkt in &pkts {
                    acc = acc.wrapping_add(p.run(black_box(pkt), &mut mem));
                }
                acc
            })
        });
        let mut mem = vec![0u32; p.mem_words()];
        g.bench_function(format!("{name}/native"), |b| {
            b.iter(|| {
                setup(&mut mem);
                let mut acc = 0u32;
                for pkt in &pkts {
                    acc = acc.wrapping_add(n.run(black_box(pkt), &mut mem));
                }
                acc
            })
        });
    }
    g.finish();

    let fpl = "RETURN PKT.ETH_TYPE == ETHERTYPE_IP && PKT.IP_PROTO == PROTO_TCP
               && (PKT.IP_FRAG & 0x1fff) == 0 && PKT.TCP_DPORT == 80;";
    let p = Program::compile(fpl, &ext).unwrap();
    let n = NativeFpl::compile(&p).unwrap();
    let ir = sluice_pcap::compile(
        "ip and tcp dst port 80",
        sluice_pcap::link::LinkType::EN10MB,
        65535,
    )
    .unwrap();
    let bpf = sluice_cbpf::lower(&ir).unwrap();
    let nf = sluice_native::NativeFilter::compile(&ir).unwrap();
    let accepted = |f: &dyn Fn(&[u8]) -> u32| pkts.iter().filter(|q| f(q) != 0).count();
    let want = accepted(&|q| p.run(q, &mut []));
    assert_eq!(want, accepted(&|q| n.run(q, &mut [])));
    assert_eq!(
        want,
        accepted(&|q| sluice_bpf::run(&bpf, q, q.len() as u32))
    );
    assert_eq!(want, accepted(&|q| nf.run(q, q.len() as u32)));
    println!("fpl-vs-bpf: {want} of {} packets accepted", pkts.len());
    let mut g = c.benchmark_group("fpl-vs-bpf");
    g.throughput(Throughput::Elements(pkts.len() as u64));
    type Engine<'a> = (&'a str, Box<dyn Fn(&[u8]) -> u32 + 'a>);
    let engines: Vec<Engine> = vec![
        ("fpl-interpreter", Box::new(|q| p.run(q, &mut []))),
        ("fpl-native", Box::new(|q| n.run(q, &mut []))),
        (
            "bpf-interpreter",
            Box::new(|q| sluice_bpf::run(&bpf, q, q.len() as u32)),
        ),
        ("pcap-native", Box::new(|q| nf.run(q, q.len() as u32))),
    ];
    for (name, f) in &engines {
        g.bench_function(*name, |b| {
            b.iter(|| {
                let mut acc = 0u32;
                for pkt in &pkts {
                    acc = acc.wrapping_add(f(black_box(pkt)));
                }
                acc
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
