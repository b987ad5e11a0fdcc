//! A filter set as one eBPF program chain with maps
//! ([`sluice::ebpf::MultiFilter`]): its load time, a key-only insert's
//! time, and its cost per packet in the kernel beside the native merged
//! engine's (`sluice split`'s default) on the same set and packets, for
//! docs/ebpf.md.
//!
//! Rule: a measurement tool, not a test; run it on a release build as
//! root: `cargo run --release --example ebpf_set_cost -- sessions 100000`
//! or `-- generated 1000` (optionally a REPEAT for the test run, default
//! 200; `INLINE=K` in the environment sets `Options::inline`). The
//! kernel's figures are `BPF_PROG_TEST_RUN`'s mean time per run
//! and the kernel's own statistics of the program (`run_time_ns /
//! run_cnt`, statistics on through `BPF_ENABLE_STATS` for the runs: the
//! chain without the test run's loop); the native figure is the call per
//! packet from Rust, the packets held in memory. `MODE=xdp` builds and
//! runs the set as an XDP chain (frames whole), `MODE=socket` only loads
//! the socket filter chain. `ENGINE=tree` measures the decision tree as
//! eBPF ([`sluice::ebpf::TreeFilter`]) instead of the group chain, and
//! for test runs also counts the eBPF instructions each packet executes
//! (`TreeFilter::count_instructions`, sluice's own interpreter of the
//! programs). `NATIVE_PASSES=K` only classifies the packets K times with
//! the native engine and exits: run under `valgrind --tool=lackey` with
//! two values of K, the difference in instructions over the extra
//! passes is the native engine's instructions per packet (with
//! `valgrind --tool=callgrind --collect-atstart=no
//! --toggle-collect='*native_passes*'`, only the passes are counted:
//! the build's count varies from run to run).

use sluice::classifier::merged::{Compiled, Merged};
use sluice::ebpf::multi::Options;
use sluice::ebpf::{Mode, MultiFilter};
use sluice::split::{Merging, MergingScratch};
use sluice::{LinkType, Program};
use sluice_workload::{session, session_expression, tcp_frame};
use std::time::Instant;

/// The allocator `sluice` itself runs with: loads are measured as the
/// command pays them.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kind, n, repeat) = match args.as_slice() {
        [k, n] => (k.as_str(), n.parse::<u32>().expect("N"), 200),
        [k, n, r] => (
            k.as_str(),
            n.parse::<u32>().expect("N"),
            r.parse().expect("REPEAT"),
        ),
        _ => {
            eprintln!("usage: ebpf_set_cost sessions|generated N [REPEAT]");
            std::process::exit(2);
        }
    };
    let (exprs, pkts): (Vec<String>, Vec<(Vec<u8>, u32)>) = match kind {
        "sessions" => {
            // 1,000 packets: one in ten of a session in the set, the rest
            // of sessions that are not.
            let pkts = (0..1000u32)
                .map(|k| {
                    let i = if k % 10 == 0 { k * 7919 % n } else { n + k };
                    let (a, b, p, q) = session(i);
                    (tcp_frame(a, b, p, q), 60)
                })
                .collect();
            ((0..n).map(session_expression).collect(), pkts)
        }
        "generated" => (
            sluice_workload::filter_set(n as usize, 1),
            sluice_workload::traffic(n as usize, 1, 1000)
                .into_iter()
                .filter(|(d, _)| d.len() <= sluice::ebpf::MAX_TEST_PACKET)
                .collect(),
        ),
        _ => panic!("sessions or generated"),
    };
    let t = Instant::now();
    let compiled: Vec<Compiled> = exprs
        .iter()
        .map(|e| {
            let p = Program::builder(LinkType::EN10MB)
                .offline(true)
                .expression(e)
                .expect("expression");
            Compiled::new(p.ir().expect("IR").clone())
        })
        .collect();
    let compile = t.elapsed();
    if let Some(k) = std::env::var("NATIVE_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        let native = Merging::from_compiled(compiled.to_vec(), true);
        let hits = native_passes(&native, &pkts, k);
        println!(
            "{kind} {n}\tnative\t{k} passes over {} packets\t{hits} matched",
            pkts.len()
        );
        return;
    }
    let set: Vec<(u32, &Compiled)> = compiled
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32, c))
        .collect();
    // The merge alone, as part of the load.
    let t = Instant::now();
    let mut merged = Merged::default();
    for (i, c) in &set {
        merged.insert(*i, c, 0);
    }
    let merge = t.elapsed();
    drop(merged);
    // INLINE=K: groups of at most K keys as code (Options::inline).
    let inline = std::env::var("INLINE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(Options::default().inline);
    let opts = Options {
        capacity: n + 10_000,
        inline,
        ..Default::default()
    };
    // MODE=xdp: the set as an XDP chain, run by XDP's test run (frames
    // whole); MODE=socket: the socket filter chain, loaded only (a socket
    // filter has no test run of its frames as captured).
    let mode = match std::env::var("MODE").as_deref() {
        Ok("xdp") => Mode::Xdp,
        Ok("socket") => Mode::Socket,
        _ => Mode::TestRun,
    };
    if std::env::var("ENGINE").as_deref() == Ok("tree") {
        tree_cost(kind, n, &set, &compiled, pkts, mode, repeat);
        return;
    }
    let t = Instant::now();
    let mut m = MultiFilter::build(&set, mode, opts).expect("load");
    let load = t.elapsed();
    let insns: usize = m.instructions().iter().sum();
    if mode == Mode::Socket {
        println!(
            "{kind} {n}\tsocket filter chain\tload {load:.2?}\t{} programs, {insns} insns",
            m.programs()
        );
        return;
    }
    let pkts = for_mode(pkts, mode);
    // Cost per packet: the kernel's (statistics off: they time every run,
    // which costs more than some programs), the test run's floor (a set
    // of one filter that never matches, on the same packets), the
    // kernel's own statistics in runs of their own; then the native
    // merged engine's.
    let run = |d: &[u8], w, r| m.bench(d, w, r).expect("test run");
    let (kernel_ns, hits) = kernel_cost(&pkts, mode, repeat, run);
    let never = Compiled::new(sluice::ir::Filter::new(sluice::ir::Pred::False, 1));
    let floor = MultiFilter::build(&[(0, &never)], mode, Options::default()).expect("floor");
    let run = |d: &[u8], w, r| floor.bench(d, w, r).expect("test run");
    let floor_ns = kernel_cost(&pkts, mode, repeat, run).0;
    let stats = sluice::ebpf::enable_stats().expect("BPF statistics");
    let before = m.run_stats().expect("statistics");
    for (d, w) in &pkts {
        m.bench(d, *w, repeat).expect("test run");
    }
    let after = m.run_stats().expect("statistics");
    drop(stats);
    let stats_ns = (after.0 - before.0) as f64 / (after.1 - before.1).max(1) as f64;
    let native_ns = native_cost(&compiled, &pkts, repeat, hits);

    // Key-only inserts (sessions): map updates, no reload.
    let mut insert = String::from("-");
    if kind == "sessions" {
        let mut key0 = Vec::new();
        m.merged().keys_of(0, |_, k| key0 = k.to_vec());
        let (a0, b0, p0, q0) = session(0);
        let k = 10_000u32;
        let keys: Vec<Vec<u32>> = (0..k)
            .map(|j| {
                let (a, b, p, q) = session(n + 100_000 + j);
                key0.iter()
                    .map(|&w| match w {
                        w if w == a0 => a,
                        w if w == b0 => b,
                        w if w == p0 as u32 => p as u32,
                        w if w == q0 as u32 => q as u32,
                        w => w,
                    })
                    .collect()
            })
            .collect();
        let t = Instant::now();
        for (j, key) in keys.iter().enumerate() {
            m.insert_keyed(n + j as u32, 0, key)
                .expect("key-only insert");
        }
        insert = format!("{:.2} µs", t.elapsed().as_secs_f64() * 1e6 / f64::from(k));
    }
    println!(
        "{kind} {n}\t{} groups ({} of one key), {} run whole\tcompile {compile:.2?}\tload {load:.2?} (merge alone {merge:.2?})\t{} programs, {insns} insns\tkey-only insert {insert}\t{} packets, {hits} matched\tkernel {:.1} ns/packet (floor {floor_ns:.1}; bpf_stats {:.1})\tnative {:.1} ns/packet",
        m.merged().groups(),
        m.merged().group_views().filter(|g| g.len() == 1).count(),
        m.merged().whole(),
        m.programs(),
        pkts.len(),
        kernel_ns,
        stats_ns,
        native_ns
    );
}

/// The decision tree as eBPF: load, programs, kernel ns per packet with
/// its floor, beside the native engine on the same packets.
fn tree_cost(
    kind: &str,
    n: u32,
    set: &[(u32, &Compiled)],
    compiled: &[Compiled],
    pkts: Vec<(Vec<u8>, u32)>,
    mode: Mode,
    repeat: u32,
) {
    use sluice::ebpf::TreeFilter;
    // BUDGET=N: instructions per program before a set is halved.
    let budget = std::env::var("BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(sluice::ebpf::tree::Options::default().budget);
    let opts = sluice::ebpf::tree::Options {
        capacity: n,
        budget,
        ..Default::default()
    };
    let t = Instant::now();
    let m = TreeFilter::build(set, mode, opts).expect("load");
    let load = t.elapsed();
    let insns: usize = m.instructions().iter().sum();
    if mode == Mode::Socket {
        println!(
            "{kind} {n}\ttree socket filter chain\tload {load:.2?}\t{} programs, {insns} insns",
            m.programs()
        );
        return;
    }
    let pkts = for_mode(pkts, mode);
    let run = |d: &[u8], w, r| m.bench(d, w, r).expect("test run");
    let (kernel_ns, hits) = kernel_cost(&pkts, mode, repeat, run);
    let never = Compiled::new(sluice::ir::Filter::new(sluice::ir::Pred::False, 1));
    let floor = TreeFilter::build(&[(0, &never)], mode, Default::default()).expect("floor");
    let run = |d: &[u8], w, r| floor.bench(d, w, r).expect("test run");
    let floor_ns = kernel_cost(&pkts, mode, repeat, run).0;
    let native_ns = native_cost(compiled, &pkts, repeat, hits);
    // Instructions executed a packet, interpreted (test runs only).
    let executed = |m: &TreeFilter| -> String {
        let total: Option<u64> = pkts
            .iter()
            .map(|(d, w)| m.count_instructions(d, *w).ok().map(|c| c.1))
            .sum();
        total.map_or("-".into(), |t| {
            format!("{:.1}", t as f64 / pkts.len() as f64)
        })
    };
    println!(
        "{kind} {n}\ttree\tload {load:.2?}\t{} programs, {insns} insns\t{} packets, {hits} matched\tkernel {:.1} ns/packet (floor {:.1})\teBPF insns/packet {} (floor {})\tnative {native_ns:.1} ns/packet",
        m.programs(),
        pkts.len(),
        kernel_ns,
        floor_ns,
        executed(&m),
        executed(&floor),
    );
}

/// The packets as `mode` takes them: XDP's test run takes frames of 14
/// bytes or more, whole.
fn for_mode(pkts: Vec<(Vec<u8>, u32)>, mode: Mode) -> Vec<(Vec<u8>, u32)> {
    match mode {
        Mode::Xdp => pkts
            .into_iter()
            .filter(|(d, _)| d.len() >= 14)
            .map(|(d, _)| {
                let w = d.len() as u32;
                (d, w)
            })
            .collect(),
        _ => pkts,
    }
}

/// Every packet `repeat` times through `bench` (a loaded set's test
/// run): the mean ns per packet, and how many packets it passed (XDP
/// passes what some filter wants, `XDP_PASS`, 2).
fn kernel_cost(
    pkts: &[(Vec<u8>, u32)],
    mode: Mode,
    repeat: u32,
    bench: impl Fn(&[u8], u32, u32) -> (u32, u32),
) -> (f64, u64) {
    let (mut ns, mut hits) = (0u64, 0u64);
    for (d, w) in pkts {
        let (r, t) = bench(d, *w, repeat);
        ns += t as u64;
        hits += if mode == Mode::Xdp { r == 2 } else { r != 0 } as u64;
    }
    (ns as f64 / pkts.len() as f64, hits)
}

/// The native merged engine's ns per packet on the same packets, checked
/// to pass as many as the kernel did.
fn native_cost(compiled: &[Compiled], pkts: &[(Vec<u8>, u32)], repeat: u32, hits: u64) -> f64 {
    let native = Merging::from_compiled(compiled.to_vec(), true);
    let (mut s, mut ids) = (MergingScratch::default(), Vec::new());
    let mut native_hits = 0u64;
    let t = Instant::now();
    for _ in 0..repeat {
        for (d, w) in pkts {
            native.classify(d, *w, &mut s, &mut ids);
            native_hits += !ids.is_empty() as u64;
        }
    }
    assert_eq!(native_hits, hits * repeat as u64, "the engines agree");
    t.elapsed().as_nanos() as f64 / (repeat as f64 * pkts.len() as f64)
}

/// `k` passes of the native engine over `pkts` (its own function, for
/// callgrind to count alone): the packets some filter matched.
#[inline(never)]
fn native_passes(native: &Merging, pkts: &[(Vec<u8>, u32)], k: u32) -> u64 {
    let (mut s, mut ids) = (MergingScratch::default(), Vec::new());
    let mut hits = 0u64;
    for _ in 0..k {
        for (d, w) in pkts {
            native.classify(d, *w, &mut s, &mut ids);
            hits += !ids.is_empty() as u64;
        }
    }
    hits
}
