//! Readers on other threads classify continuously while the writer
//! inserts, copies by key, removes and publishes: every answer a reader
//! gets is the answer of a published state, and of a state no older than
//! the one its previous answer came from (readers never go back).

use crate::changes::{copy, key_like, Live, Pool};
use crate::support::*;
use sluice_classifier::merged::Merged;
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{Auto, Classifier, Engine, Reader};
use sluice_native::tree::NativeTree;
use sluice_testsupport::Rng;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a reader saw: (packet, whether `classify_first`, answer number in
/// its table of distinct answers).
struct Seen {
    log: Vec<(u32, bool, u32)>,
    answers: Vec<Vec<u32>>,
}

fn read<E: Engine>(r: Reader<E>, pkts: Arc<Vec<Pkt>>, stop: Arc<AtomicBool>, t: usize) -> Seen {
    let mut seen = Seen {
        log: Vec::new(),
        answers: Vec::new(),
    };
    let mut index: HashMap<Vec<u32>, u32> = HashMap::new();
    let mut out = Vec::new();
    let mut k = t * 7;
    while !stop.load(Ordering::Relaxed) && seen.log.len() < 4_000_000 {
        let i = k % pkts.len();
        let p = &pkts[i];
        let first = k % 3 == 0;
        if first {
            out.clear();
            out.extend(r.classify_first(&p.data, p.wirelen).map(|f| f.0));
        } else {
            r.classify_into(&p.data, p.wirelen, &mut out);
        }
        let n = index.len() as u32;
        let a = *index.entry(out.clone()).or_insert_with(|| {
            seen.answers.push(out.clone());
            n
        });
        seen.log.push((i as u32, first, a));
        k += 1;
    }
    seen
}

/// The answers of a state (its live filters, each alone) on every packet:
/// all matches and the winner.
fn answers(live: &[Live], pkts: &[Pkt]) -> Vec<(Vec<u32>, Vec<u32>)> {
    pkts.iter()
        .map(|p| {
            let m: Vec<&Live> = live
                .iter()
                .filter(|l| l.filter.run(&p.data, p.wirelen) != 0)
                .collect();
            let mut all: Vec<u32> = m.iter().map(|l| l.id.0).collect();
            all.sort_unstable();
            let first = m
                .iter()
                .max_by_key(|l| (l.priority, std::cmp::Reverse(l.id)))
                .map(|l| l.id.0);
            (all, first.into_iter().collect())
        })
        .collect()
}

/// Run the writer's script with two readers racing it, then check what
/// they saw. Returns (states, answers read, states some reader saw).
fn race<E>(pool: &Pool, seed: u64, setup: fn(&Reader<E>)) -> (usize, usize, usize)
where
    E: Engine + Send + Sync + 'static,
    E::Scratch: Send,
{
    let pkts = Arc::new(pool.packets.clone());
    let mut rng = Rng::new(seed);
    let mut c: Classifier<E> = Classifier::default();
    let mut live: Vec<Live> = Vec::new();
    for _ in 0..3 {
        let src = &pool.homogeneous[rng.below(pool.homogeneous.len())];
        live.push(Live::inserted(
            c.insert_compiled(src.compiled.clone(), 0),
            src,
            0,
        ));
    }
    c.publish();
    let mut states = vec![live.clone()];
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (r, pkts, stop, started) =
                (c.reader(), pkts.clone(), stop.clone(), started.clone());
            setup(&r);
            std::thread::spawn(move || {
                started.fetch_add(1, Ordering::Relaxed);
                read(r, pkts, stop, t)
            })
        })
        .collect();
    while started.load(Ordering::Relaxed) < 2 {
        std::thread::yield_now();
    }
    let t0 = Instant::now();
    for s in 0..30 {
        // Key-only copies first: `insert_keys` publishes what is pending
        // before it looks at its model, and nothing is pending here.
        let copyable: Vec<&Live> = live
            .iter()
            .filter(|l| l.path.as_ref().is_some_and(|p| !p.key().is_empty()))
            .collect();
        if !copyable.is_empty() && rng.chance(70) {
            let like = copyable[rng.below(copyable.len())].clone();
            let keys: Vec<Vec<u32>> = (0..rng.range(1, 6))
                .map(|_| key_like(&mut rng, pool, like.path.as_ref().unwrap()))
                .collect();
            let p = rng.range(0, 4) as i32 - 2;
            let ids = c
                .insert_keys(like.id, keys.clone(), p)
                .expect("insert_keys");
            for (id, key) in ids.into_iter().zip(&keys) {
                live.push(copy(&like, id, key, p));
            }
        }
        for _ in 0..rng.range(1, 6) {
            let src = if s >= 10 && rng.chance(70) {
                &pool.heterogeneous[rng.below(pool.heterogeneous.len())]
            } else {
                &pool.homogeneous[rng.below(pool.homogeneous.len())]
            };
            let p = rng.range(0, 4) as i32 - 2;
            live.push(Live::inserted(
                c.insert_compiled(src.compiled.clone(), p),
                src,
                p,
            ));
        }
        for _ in 0..rng.range(0, 4) {
            if live.len() > 1 {
                let l = live.swap_remove(rng.below(live.len()));
                c.remove(l.id);
            }
        }
        c.publish();
        states.push(live.clone());
        std::thread::sleep(Duration::from_millis(15));
    }
    let writing = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    let seen: Vec<Seen> = readers.into_iter().map(|t| t.join().unwrap()).collect();
    // Every state's answers, then every reader's answers in order.
    let want: Vec<Vec<(Vec<u32>, Vec<u32>)>> = states.iter().map(|l| answers(l, &pkts)).collect();
    let mut reached = 0;
    let mut total = 0;
    for (t, s) in seen.iter().enumerate() {
        let mut lo = 0;
        for (n, &(i, first, a)) in s.log.iter().enumerate() {
            let got = &s.answers[a as usize];
            let pick = |w: &(Vec<u32>, Vec<u32>)| if first { w.1.clone() } else { w.0.clone() };
            let Some(at) = (lo..states.len()).find(|&st| &pick(&want[st][i as usize]) == got)
            else {
                let p = &pkts[i as usize];
                let older: Vec<usize> = (0..lo)
                    .filter(|&st| &pick(&want[st][i as usize]) == got)
                    .collect();
                panic!(
                    "reader {t}, answer {n} ({}): {got:?} on {} is no state's from {lo} on \
                     (state {lo} says {:?}; older states with it: {older:?})\n  packet {}",
                    if first { "classify_first" } else { "classify" },
                    p.origin,
                    pick(&want[lo][i as usize]),
                    hex(&p.data)
                );
            };
            lo = at;
        }
        reached = reached.max(lo);
        total += s.log.len();
    }
    println!("{} states written in {writing:.1?}", states.len());
    (states.len(), total, reached)
}

fn check<E: Engine + Send + Sync + 'static>(name: &str, seed: u64, setup: fn(&Reader<E>))
where
    E::Scratch: Send,
{
    let pool = Pool::new(seed, 200, 300);
    let (states, reads, reached) = race::<E>(&pool, seed, setup);
    println!("{name}: {states} states, {reads} answers read, up to state {reached}");
    assert!(reads > 1000, "the readers ran");
    assert!(reached > 5, "readers saw the changes");
}

#[test]
fn concurrent_readers_native_tree_classifier() {
    check::<NativeTree>("NativeTreeClassifier", 21, |_| {});
}

/// Readers with their flow caches on for every packet, while the writer
/// inserts and removes: each answer must be one of a state's.
#[test]
fn concurrent_readers_with_flow_caches() {
    check::<NativeTree>("NativeTreeClassifier, flow caches", 24, |r| {
        r.with_scratch(|s| s.set_flow_cache_always())
    });
}

#[test]
fn concurrent_readers_classifier() {
    check::<Auto<Merged, DecisionTree>>("Classifier", 22, |_| {});
}

#[test]
fn concurrent_readers_auto_classifier() {
    check::<sluice_native::NativeAuto>("AutoClassifier", 23, |r| {
        r.with_scratch(|s| s.tree_mut().set_flow_cache_always())
    });
}
