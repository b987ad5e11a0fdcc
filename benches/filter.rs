//! ns per packet of sluice's engines next to libpcap's `bpf_filter`, on the
//! same packets and the same expressions, in one run.
//!
//! `cargo bench --bench filter` prints a Markdown table, with the time to
//! compile each filter to native code (median of 21 compiles; the free of the
//! previous one included). The packets are every
//! packet of the shared corpus captures, held in memory (warm in cache, as in
//! the seeds' measurements). Each figure is the median of 9 timed passes.
//! libpcap is the system one (Debian's libpcap-dev), through the `pcap` crate.
//! "native batch" runs the same packet list through `NativeFilter::run_batch`
//! in batches of 32 consecutive packets (the loop over a batch is in the
//! generated code); "native" calls `NativeFilter::run` once per packet.
//! "loop floor" is a loop over the batch path's packet list that only
//! reads each packet's first and 64th byte (the header line filters read)
//! and tests nothing: no filter reading those packets can run faster, so
//! libpcap's time over it bounds the speed-up any filter could show here.

use sluice::native::floor::header_bytes;
use sluice::native::NativeFilter;
use sluice::{LinkType, Program};
use sluice_testsupport::corpus;
use std::hint::black_box;
use std::time::Instant;

const EXPRESSIONS: &[&str] = &[
    "tcp",
    "tcp src port 80",
    "ip src 192.168.1.3 and udp and dst port 54321",
    "tcp and src host 10.0.0.1 and dst host 10.0.0.2 and src port 1234 and dst port 80",
    "host 192.168.1.1 or host 10.0.0.1 or host 172.16.0.1",
    "vlan and tcp",
    "ip6 and udp port 53",
    "not arp and greater 100",
];

fn load_packets() -> Vec<(Vec<u8>, u32)> {
    corpus::pcaps_or_sample()
        .iter()
        .filter_map(corpus::Capture::read)
        .filter(|c| c.format.linktype() == Some(1))
        .flat_map(|c| c.packets)
        .map(|p| (p.data, p.wirelen))
        .collect()
}

/// Median ns per packet of 9 timings of 20 calls of `pass`, each over
/// `packets` packets (`pass` returns what it found, so that it cannot be
/// left out).
fn median_ns(packets: usize, mut pass: impl FnMut() -> u64) -> f64 {
    let mut runs = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        let mut n = 0u64;
        for _ in 0..20 {
            n = n.wrapping_add(pass());
        }
        black_box(n);
        runs.push(t.elapsed().as_nanos() as f64 / (20 * packets) as f64);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[runs.len() / 2]
}

/// Median ns per packet of `f` over all packets.
fn time(pkts: &[(Vec<u8>, u32)], mut f: impl FnMut(&[u8], u32) -> bool) -> f64 {
    median_ns(pkts.len(), || {
        pkts.iter().map(|(p, w)| f(black_box(p), *w) as u64).sum()
    })
}

/// The packets as the batch paths take them.
fn refs(pkts: &[(Vec<u8>, u32)]) -> Vec<(&[u8], u32)> {
    pkts.iter().map(|(p, w)| (&p[..], *w)).collect()
}

/// Median ns per packet of `native.run_batch` over all packets, in batches
/// of 32 consecutive packets of the same list.
fn time_batch(pkts: &[(Vec<u8>, u32)], native: &NativeFilter) -> f64 {
    let refs = refs(pkts);
    let mut out = [0u32; 32];
    median_ns(pkts.len(), || {
        let mut n = 0;
        for batch in black_box(&refs[..]).chunks(32) {
            let out = &mut out[..batch.len()];
            native.run_batch(batch, out);
            n += out.iter().filter(|&&v| v != 0).count() as u64;
        }
        n
    })
}

/// Median ns per packet of a loop over the same `(&[u8], u32)` list as
/// [`time_batch`] that reads each packet's header bytes
/// ([`header_bytes`]) and nothing else.
fn time_floor(pkts: &[(Vec<u8>, u32)]) -> f64 {
    let refs = refs(pkts);
    median_ns(pkts.len(), || {
        black_box(&refs[..])
            .iter()
            .map(|(p, _)| header_bytes(p))
            .fold(0u64, u64::wrapping_add)
    })
}

fn main() {
    let pkts = load_packets();
    println!("{} packets in memory\n", pkts.len());
    let floor = time_floor(&pkts);
    println!("| expression | sluice native batch | sluice native | sluice BPF interpreter | sluice IR interpreter | libpcap bpf_filter | libpcap / native batch | libpcap / native | libpcap / loop floor | native compile |");
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let (mut log_batch, mut log_single, mut count) = (0.0f64, 0.0f64, 0);
    let dead = pcap::Capture::dead(pcap::Linktype(1)).expect("libpcap");
    for e in EXPRESSIONS {
        let prog = Program::builder(LinkType::EN10MB)
            .expression(e)
            .expect("compiles");
        let native = prog.native().expect("native code");
        let batch = time_batch(&pkts, native);
        let fast = time(&pkts, |p, w| native.run(p, w) != 0);
        let ir = prog.ir().expect("an expression has IR");
        let mut compiles: Vec<f64> = (0..21)
            .map(|_| {
                let t = Instant::now();
                black_box(NativeFilter::compile(ir).expect("compiles"));
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect();
        compiles.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let compile_us = compiles[compiles.len() / 2];
        let ours = time(&pkts, |p, w| prog.run(p, w) != 0);
        let reference = time(&pkts, |p, w| prog.run_reference(p, w) != 0);
        let theirs = match dead.compile(e, true) {
            Ok(bpf) => time(&pkts, |p, _| bpf.filter(p)),
            Err(_) => f64::NAN,
        };
        println!(
            "| `{e}` | {batch:.1} ns | {fast:.1} ns | {ours:.1} ns | {reference:.1} ns | {theirs:.1} ns | {:.2}× | {:.2}× | {:.1}× | {compile_us:.0} µs |",
            theirs / batch,
            theirs / fast,
            theirs / floor
        );
        if theirs.is_finite() {
            log_batch += (theirs / batch).ln();
            log_single += (theirs / fast).ln();
            count += 1;
        }
    }
    if count > 0 {
        println!(
            "\ngeometric mean of libpcap / native: {:.2}× in batches of 32, {:.2}× one call per packet",
            (log_batch / count as f64).exp(),
            (log_single / count as f64).exp()
        );
    }
    println!(
        "loop floor (each packet's first and 64th byte, nothing tested): {floor:.2} ns per packet"
    );
}
