//! The cost per packet of one filter as eBPF in the kernel
//! (`BPF_PROG_TEST_RUN` with `repeat`: the kernel's own mean time per
//! run) beside the native engine's on the same capture, for docs/ebpf.md.
//!
//! Rule: a measurement tool, not a test; run it on a release build:
//! `cargo run --release --example ebpf_cost -- CAPTURE REPEAT EXPRESSION...`
//! (as root). The kernel's figure covers the program's run only (the test
//! run's setup of the socket buffer is outside it); the native figure is
//! the call per packet from Rust, the packets held in memory.

use sluice::capture::CaptureReader;
use sluice::ebpf::{Loaded, Mode, MAX_TEST_PACKET};
use sluice::{LinkType, Program, Runner};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, repeat, expr) = match args.as_slice() {
        [p, r, e @ ..] if !e.is_empty() => (p, r.parse::<u32>().expect("REPEAT"), e.join(" ")),
        _ => {
            eprintln!("usage: ebpf_cost CAPTURE REPEAT EXPRESSION...");
            std::process::exit(2);
        }
    };
    let mut reader = CaptureReader::open(path).expect("capture");
    let mut pkts = Vec::new();
    let mut lt = 1;
    while let Some(p) = reader.next_packet().expect("packet") {
        lt = p.linktype;
        if p.data.len() <= MAX_TEST_PACKET {
            pkts.push((p.data.to_vec(), p.wirelen));
        }
    }
    let prog = Program::builder(LinkType::from_number(lt as u32).expect("link type"))
        .offline(true)
        .expression(&expr)
        .expect("expression");
    let ir = prog.ir().expect("an intermediate form");
    let ebpf = Loaded::compile(ir, Mode::TestRun).expect("load");
    let (mut kernel_ns, mut accepted) = (0u64, 0u64);
    for (d, w) in &pkts {
        let (r, ns) = ebpf.bench(d, *w, repeat).expect("test run");
        kernel_ns += ns as u64;
        accepted += (r != 0) as u64;
        assert_eq!(r != 0, prog.run_with(Runner::Native, d, *w) != 0);
    }
    let start = Instant::now();
    let mut native_acc = 0u64;
    for _ in 0..repeat {
        for (d, w) in &pkts {
            native_acc += (prog.run_with(Runner::Native, d, *w) != 0) as u64;
        }
    }
    let native_ns = start.elapsed().as_nanos() as f64 / (repeat as f64 * pkts.len() as f64);
    assert_eq!(native_acc, accepted * repeat as u64);
    println!(
        "{expr}\t{} packets, {accepted} accepted\tebpf {} insns\tebpf (kernel test run) {:.1} ns/packet\tnative {:.1} ns/packet",
        pkts.len(),
        ebpf.len(),
        kernel_ns as f64 / pkts.len() as f64,
        native_ns
    );
}
