//! Generated heterogeneous filter sets (`sluice_workload::filter_set`),
//! merged, against each filter run alone and against libpcap.

use crate::support::*;
use std::time::Instant;

/// Packets for a set of `n` filters: its traffic, every truncation (up
/// to 160 bytes, which covers every header the generated filters test)
/// of every 25th packet, and every `corpus_every`th corpus packet.
fn packets(n: usize, seed: u64, traffic: usize, corpus_every: usize) -> Vec<Pkt> {
    let t: Vec<Pkt> = sluice_workload::traffic(n, seed, traffic)
        .into_iter()
        .enumerate()
        .map(|(k, (d, w))| Pkt::new(d, w, format!("traffic({n}, {seed}) packet {k}")))
        .collect();
    let mut pkts = with_truncations(t, 25, 160);
    if let Some(shared) = shared() {
        let corpus = sluice_workload::corpus_packets(&shared).expect("corpus packets");
        pkts.extend(
            corpus
                .into_iter()
                .enumerate()
                .skip(seed as usize % corpus_every)
                .step_by(corpus_every)
                .map(|(k, (d, w))| Pkt::new(d, w, format!("corpus packet {k}"))),
        );
    }
    pkts
}

fn run(n: usize, seed: u64, traffic: usize) {
    let t0 = Instant::now();
    let exprs = sluice_workload::filter_set(n, seed);
    let set = members(&exprs, true);
    let pkts = packets(n, seed, traffic, 7);
    let want = expected(&set, &pkts);
    let t1 = Instant::now();
    let engines = Engines::build(&set);
    let t2 = Instant::now();
    engines.check(&format!("filter_set({n}, {seed})"), &set, &pkts, &want);
    let matches: usize = want.iter().map(Vec::len).sum();
    let tree = engines.native_tree.native_stats();
    println!(
        "filter_set({n}, {seed}): {} packets, {:.2} matches per packet; tree: {} nodes; \
         native: {} units, {} shapes; auto is tree: {}; reference {:.1?}, build {:.1?}, check {:.1?}",
        pkts.len(),
        matches as f64 / pkts.len() as f64,
        engines.tree.stats().nodes,
        tree.units,
        tree.shapes,
        engines.native_auto.is_tree(),
        t1 - t0,
        t2 - t1,
        t2.elapsed()
    );
    assert!(matches > pkts.len() / 2, "the traffic matches the filters");
}

#[test]
fn generated_10_and_30() {
    for seed in [1, 2] {
        run(10, seed, 2000);
        run(30, seed, 2000);
    }
}

#[test]
fn generated_100_and_300() {
    for seed in [1, 2] {
        run(100, seed, 2000);
    }
    run(300, 3, 2000);
}

#[test]
fn generated_1000() {
    for seed in [1, 2, 3] {
        run(1000, seed, 3000);
    }
}

/// 10,000 filters on demand: `SLUICE_SOAK=1 cargo test --test merging
/// soak -- --nocapture` (`SLUICE_SOAK_N` and `SLUICE_SOAK_SEED` for
/// another size or seed).
#[test]
fn generated_soak() {
    if !soak() {
        println!("skipped: set SLUICE_SOAK=1 for 10,000 generated filters");
        return;
    }
    let n = env_num("SLUICE_SOAK_N").unwrap_or(10_000) as usize;
    let seed = env_num("SLUICE_SOAK_SEED").unwrap_or(3);
    run(n, seed, 2000);
}
