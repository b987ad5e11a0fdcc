//! The native tree's flow cache on generated rule sets
//! (`sluice_workload::filter_set`) and traffic whose flows repeat
//! (`sluice_workload::flow_traffic`, plus fresh traffic and truncations):
//! a reader with its cache on for every packet answers exactly as a reader
//! without it, on every packet, while filters are removed and inserted
//! again between packets (a stale entry shows as a wrong answer), and with
//! a cache small enough to be emptied again and again (eviction). A third
//! reader with its own cache classifies the same packets in batches of
//! random sizes (`classify_batch`, `classify_first_batch`), the changes
//! falling between batches. Each answer also equals the live filters run
//! alone.

use crate::support::*;
use sluice_native::tree::{NativeScratch, NativeTree};
use sluice_testsupport::Rng;

/// The packets: `flow_traffic` (flows repeat), the set's own traffic
/// (rarely repeats) and every truncation of every 40th of those.
fn packets(n: usize, seed: u64) -> Vec<Pkt> {
    let flows = sluice_workload::flow_traffic(n, seed, 2400, 200)
        .into_iter()
        .enumerate()
        .map(|(k, (d, w))| Pkt::new(d, w, format!("flow_traffic({n}, {seed}) packet {k}")));
    let fresh = sluice_workload::traffic(n, seed ^ 0x5a, 200)
        .into_iter()
        .enumerate()
        .map(|(k, (d, w))| Pkt::new(d, w, format!("traffic({n}) packet {k}")));
    let fresh: Vec<Pkt> = fresh.collect();
    let mut pkts: Vec<Pkt> = flows.collect();
    pkts.extend(with_truncations(fresh, 40, 100));
    pkts
}

/// Check every packet with and without the cache, then change the set;
/// `capacity` flows at most in the cache. Returns the cache's counters.
fn run(n: usize, seed: u64, capacity: usize) -> sluice_classifier::tree::flow::FlowStats {
    let exprs = sluice_workload::filter_set(n, seed);
    let set = members(&exprs, false);
    let pkts = packets(n, seed);
    let want = expected(&set, &pkts);
    let mut t = NativeTree::new();
    for (i, m) in set.iter().enumerate() {
        t.insert(raw_id(i), &m.compiled, m.priority);
    }
    t.update();
    let mut plain = NativeScratch::default();
    plain.set_flow_cache(false);
    let mut cached = NativeScratch::default();
    cached.set_flow_cache_always();
    cached.set_flow_cache_capacity(capacity);
    let mut batched = NativeScratch::default();
    batched.set_flow_cache_always();
    batched.set_flow_cache_capacity(capacity);
    let mut live = vec![true; n];
    let mut rng = Rng::new(seed);
    let (mut got, mut base) = (Vec::new(), Vec::new());
    let mut fails = Vec::new();
    let mut changes = 0;
    // Shuffled packet order, in rounds: the changes fall between packets
    // of the same flows.
    for round in 0..4 {
        let mut order: Vec<usize> = (0..pkts.len()).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.below(i + 1));
        }
        let mut j = 0;
        while j < order.len() {
            // A batch of 1 to 40 packets, through the third reader.
            let chunk = &order[j..(j + 1 + rng.below(40)).min(order.len())];
            let batch: Vec<(&[u8], u32)> = chunk
                .iter()
                .map(|&k| (&pkts[k].data[..], pkts[k].wirelen))
                .collect();
            let mut in_batch = vec![Vec::new(); batch.len()];
            let mut first_in_batch = vec![None; batch.len()];
            t.classify_batch(&batch, &mut batched, &mut in_batch);
            t.classify_first_batch(&batch, &mut batched, &mut first_in_batch);
            for (b, &k) in chunk.iter().enumerate() {
                let p = &pkts[k];
                let (d, w) = (&p.data[..], p.wirelen);
                t.classify(d, w, &mut cached, &mut got);
                t.classify(d, w, &mut plain, &mut base);
                got.sort_unstable();
                base.sort_unstable();
                in_batch[b].sort_unstable();
                let first = t.classify_first(d, w, &mut cached);
                let base_first = t.classify_first(d, w, &mut plain);
                let alone: Vec<u32> = want[k]
                    .iter()
                    .filter(|&&i| live[i as usize])
                    .map(|&i| raw_id(i as usize))
                    .collect();
                let agree = got == base
                    && in_batch[b] == base
                    && first == base_first
                    && first_in_batch[b] == base_first
                    && base == alone;
                if !agree && fails.len() < 8 {
                    fails.push(format!(
                        "filter_set({n}, {seed}), round {round}, after {changes} changes: {}: \
                         cached {got:?} first {first:?}, batch {:?} first {:?}, \
                         uncached {base:?} first {base_first:?}, alone {alone:?}\n  packet {}",
                        p.origin,
                        in_batch[b],
                        first_in_batch[b],
                        hex(d)
                    ));
                }
            }
            let before = j;
            j += chunk.len();
            // About every 300 packets, remove a few live filters and put
            // back a few removed ones (same id, same filter), between
            // batches.
            if before / 300 != j / 300 {
                for _ in 0..3 {
                    let i = rng.below(n);
                    let m = &set[i];
                    if live[i] {
                        t.remove(raw_id(i));
                    } else {
                        t.insert(raw_id(i), &m.compiled, m.priority);
                    }
                    live[i] = !live[i];
                    changes += 1;
                }
                if rng.chance(50) {
                    t.update();
                }
            }
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
    let f = cached.flow_stats().expect("the cache is on");
    let fb = batched.flow_stats().expect("the cache is on");
    assert!(
        fb.hits > pkts.len() as u64,
        "the batches' cache answered: {fb:?}"
    );
    assert!(
        fb.invalidated > 0,
        "changes dropped the batches' entries: {fb:?}"
    );
    println!(
        "filter_set({n}, {seed}), cache of {capacity}: {} packets x 4, {changes} changes: {f:?}",
        pkts.len()
    );
    assert!(f.hits > pkts.len() as u64, "the cache answered: {f:?}");
    assert!(f.invalidated > 0, "changes dropped entries: {f:?}");
    f
}

#[test]
fn flow_cache_on_300_generated_filters() {
    let f = run(300, 31, usize::MAX);
    assert_eq!(f.flushes, 0, "nothing evicted: {f:?}");
}

/// A cache of 64 flows: emptied again and again (eviction), and
/// relearnt, while the set changes.
#[test]
fn flow_cache_evicting_on_1000_generated_filters() {
    let f = run(1000, 32, 64);
    assert!(f.flushes > 10, "the cache was emptied when full: {f:?}");
}
