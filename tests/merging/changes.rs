//! Random sequences of inserts (generated filters), key-only inserts
//! (`insert_keyed` and `insert_keys` copies of one-path filters), removals
//! and publishes: after each publish the classifier's answers equal those
//! of a fresh classifier built from the live filters, and each live
//! filter run alone.

use crate::support::*;
use sluice_classifier::merged::Compiled;
use sluice_classifier::merged::Merged;
use sluice_classifier::path::{Atom, Path, Test};
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{Auto, Classifier, Engine, FilterId, Reader};
use sluice_ir::{CmpOp, Filter, Pred, Val};
use sluice_native::tree::NativeTree;
use sluice_testsupport::Rng;
use std::collections::HashMap;
use std::sync::Arc;

/// A filter the sequences can insert: compiled, with its path when it
/// has exactly one (then it can be copied by key).
#[derive(Clone)]
pub struct Source {
    pub text: String,
    pub compiled: Arc<Compiled>,
    pub path: Option<Path>,
}

impl Source {
    fn of(i: usize, e: &str) -> Source {
        let compiled = compiled(i, e, &program(e));
        let path = match compiled.paths() {
            Some([p]) => Some(p.clone()),
            _ => None,
        };
        Source {
            text: e.to_string(),
            compiled,
            path,
        }
    }
}

/// The filters of the sequences: filters of two shapes made from the
/// traffic's own addresses and ports (so that their keys match packets;
/// alone, they keep `Auto` on tuple space search), and a generated
/// heterogeneous set.
pub struct Pool {
    pub homogeneous: Vec<Source>,
    pub heterogeneous: Vec<Source>,
    /// Keys of the one-path sources, by shape.
    pub keys: HashMap<Path, Vec<Vec<u32>>>,
    pub packets: Vec<Pkt>,
}

impl Pool {
    pub fn new(seed: u64, n: usize, traffic: usize) -> Pool {
        let raw = sluice_workload::traffic(n, seed, traffic);
        let mut homog = Vec::new();
        for (d, _) in &raw {
            // Untagged IPv4 TCP or UDP: the destination host and port.
            if d.len() < 38 || d[12..14] != [8, 0] || d[14] >> 4 != 4 {
                continue;
            }
            let ihl = 4 * (d[14] & 15) as usize;
            let (proto, l4) = (d[23], 14 + ihl);
            if d.len() < l4 + 4 {
                continue;
            }
            let ip = |o: usize| format!("{}.{}.{}.{}", d[o], d[o + 1], d[o + 2], d[o + 3]);
            let port = |o: usize| u16::from_be_bytes([d[o], d[o + 1]]);
            match proto {
                6 => homog.push(format!(
                    "ip dst host {} and tcp dst port {}",
                    ip(30),
                    port(l4 + 2)
                )),
                17 => homog.push(format!(
                    "ip src host {} and udp src port {}",
                    ip(26),
                    port(l4)
                )),
                _ => {}
            }
        }
        homog.sort();
        homog.dedup();
        homog.truncate(80);
        let homogeneous: Vec<Source> = homog
            .iter()
            .enumerate()
            .map(|(i, e)| Source::of(i, e))
            .collect();
        let heterogeneous: Vec<Source> = sluice_workload::filter_set(n, seed)
            .iter()
            .enumerate()
            .map(|(i, e)| Source::of(i, e))
            .collect();
        let mut keys: HashMap<Path, Vec<Vec<u32>>> = HashMap::new();
        for s in homogeneous.iter().chain(&heterogeneous) {
            if let Some(p) = &s.path {
                keys.entry(shape_of(p)).or_default().push(p.key());
            }
        }
        assert!(
            homogeneous.iter().filter(|s| s.path.is_some()).count() > 20,
            "one-path filters made from the traffic"
        );
        let pkts = raw
            .into_iter()
            .enumerate()
            .map(|(k, (d, w))| Pkt::new(d, w, format!("traffic({n}, {seed}) packet {k}")))
            .collect();
        Pool {
            homogeneous,
            heterogeneous,
            keys,
            packets: with_truncations(pkts, 40, 90),
        }
    }
}

/// A live filter of a classifier.
#[derive(Clone)]
pub struct Live {
    pub id: FilterId,
    what: String,
    /// What it means alone.
    pub filter: Filter,
    /// How it was inserted (`None`: a key-only copy, inserted whole in a
    /// fresh build as `filter`).
    compiled: Option<Arc<Compiled>>,
    pub path: Option<Path>,
    pub priority: i32,
}

impl Live {
    /// `src` inserted with this id and priority.
    pub fn inserted(id: FilterId, src: &Source, priority: i32) -> Live {
        Live {
            id,
            what: src.text.clone(),
            filter: src.compiled.filter().clone(),
            compiled: Some(src.compiled.clone()),
            path: src.path.clone(),
            priority,
        }
    }
}

/// The classifier's answers equal a fresh build's and each live filter's
/// alone, on every packet.
///
/// `kept` is a reader kept from the start of the sequence (with its flow
/// cache, if the engine has one: a stale entry after a change shows as a
/// wrong answer here); it must answer as the fresh reader does.
fn check_state<E: Engine>(
    c: &Classifier<E>,
    kept: &Reader<E>,
    live: &[Live],
    pkts: &[Pkt],
    what: &str,
) {
    let mut sorted: Vec<&Live> = live.iter().collect();
    sorted.sort_by_key(|l| l.id);
    let mut fresh: Classifier<E> = Classifier::default();
    for l in &sorted {
        match &l.compiled {
            Some(c) => fresh.insert_compiled(c.clone(), l.priority),
            None => fresh.insert(&l.filter, l.priority),
        };
    }
    fresh.publish();
    assert_eq!(c.len(), live.len(), "{what}: len");
    let (r, f) = (c.reader(), fresh.reader());
    let mut fails = Vec::new();
    let mut out = Vec::new();
    for p in pkts {
        let (d, w) = (&p.data[..], p.wirelen);
        let alone: Vec<&Live> = sorted
            .iter()
            .copied()
            .filter(|l| l.filter.run(d, w) != 0)
            .collect();
        let want: Vec<FilterId> = alone.iter().map(|l| l.id).collect();
        let want_first = alone
            .iter()
            .max_by_key(|l| (l.priority, std::cmp::Reverse(l.id)))
            .map(|l| l.id);
        let got = r.classify(d, w);
        let kept_got = kept.classify(d, w);
        let kept_first = kept.classify_first(d, w);
        if (&kept_got, kept_first) != (&want, want_first) && fails.len() < 8 {
            fails.push(format!(
                "{what}: {} (wire {w}): the kept reader answers {kept_got:?} first {kept_first:?}, alone {want:?} first {want_first:?}\n  packet {}",
                p.origin,
                hex(d)
            ));
        }
        f.classify_into(d, w, &mut out);
        let fresh_got: Vec<FilterId> = out.iter().map(|&k| sorted[k as usize].id).collect();
        let got_first = r.classify_first(d, w);
        let fresh_first = f.classify_first(d, w).map(|k| sorted[k.0 as usize].id);
        if (&got, &fresh_got, got_first, fresh_first) != (&want, &want, want_first, want_first)
            && fails.len() < 8
        {
            let name = |id: &FilterId| {
                let l = sorted.iter().find(|l| l.id == *id).unwrap();
                format!("{} `{}`", id.0, l.what)
            };
            let names = |v: &[FilterId]| v.iter().map(name).collect::<Vec<_>>();
            fails.push(format!(
                "{what}: {} (wire {w}):\n  got   {:?} first {:?}\n  fresh {:?} first {:?}\n  alone {:?} first {:?}\n  packet {}",
                p.origin,
                names(&got),
                got_first.as_ref().map(name),
                names(&fresh_got),
                fresh_first.as_ref().map(name),
                names(&want),
                want_first.as_ref().map(name),
                hex(d)
            ));
        }
    }
    assert!(fails.is_empty(), "{}", fails.join("\n"));
}

/// What a sequence did, for the report and for checking it did it.
#[derive(Debug, Default)]
pub struct Counts {
    pub inserts: usize,
    pub keyed: usize,
    pub blocks: usize,
    pub removals: usize,
    pub publishes: usize,
    pub checked_in_groups: usize,
    pub checked_in_tree: usize,
}

/// A key for a copy of `path`: another filter's of the same shape, the
/// path's own, or the path's with one word changed.
pub fn key_like(rng: &mut Rng, pool: &Pool, path: &Path) -> Vec<u32> {
    let own = path.key();
    let others = &pool.keys[&shape_of(path)];
    match rng.below(10) {
        0..=5 => others[rng.below(others.len())].clone(),
        6 | 7 => own,
        _ => {
            let mut k = own;
            let i = rng.below(k.len());
            k[i] = k[i].wrapping_add(1);
            k
        }
    }
}

/// One random sequence on a classifier over `E`: first with the filters
/// of two shapes only (tuple space search, for `Auto`), then with the
/// generated ones too; checks after each publish.
pub fn sequence<E: Engine>(
    pool: &Pool,
    seed: u64,
    ops: usize,
    mut is_tree: impl FnMut(&Classifier<E>) -> Option<bool>,
    setup: impl Fn(&Reader<E>),
) -> (Counts, Reader<E>) {
    let mut rng = Rng::new(seed);
    let mut c: Classifier<E> = Classifier::default();
    let kept = c.reader();
    setup(&kept);
    let mut live: Vec<Live> = Vec::new();
    let mut n = Counts::default();
    for op in 0..ops {
        let phase_b = op >= ops / 3;
        let what = rng.below(100);
        // Copies need a live one-path filter with a key.
        let copyable: Vec<usize> = (0..live.len())
            .filter(|&i| live[i].path.as_ref().is_some_and(|p| !p.key().is_empty()))
            .collect();
        if what < 35 || live.is_empty() {
            let src = if phase_b && rng.chance(70) {
                &pool.heterogeneous[rng.below(pool.heterogeneous.len())]
            } else {
                &pool.homogeneous[rng.below(pool.homogeneous.len())]
            };
            let priority = rng.range(0, 4) as i32 - 2;
            let id = c.insert_compiled(src.compiled.clone(), priority);
            live.push(Live::inserted(id, src, priority));
            n.inserts += 1;
        } else if what < 55 && !copyable.is_empty() {
            let like = live[copyable[rng.below(copyable.len())]].clone();
            let path = like.path.as_ref().unwrap();
            let priority = rng.range(0, 4) as i32 - 2;
            if rng.chance(60) {
                let key = key_like(&mut rng, pool, path);
                let id = c
                    .insert_keyed(like.id, &key, priority)
                    .unwrap_or_else(|| panic!("insert_keyed like `{}` {key:?}", like.what));
                live.push(copy(&like, id, &key, priority));
                n.keyed += 1;
            } else {
                // Now and then a block large enough for a table of its own.
                let block = sluice::classifier::tree::BLOCK_TABLE;
                let count = match rng.chance(15) {
                    true => rng.range(block, block + 40),
                    false => rng.range(1, 12),
                };
                let keys: Vec<Vec<u32>> =
                    (0..count).map(|_| key_like(&mut rng, pool, path)).collect();
                let ids = c
                    .insert_keys(like.id, keys.clone(), priority)
                    .unwrap_or_else(|| panic!("insert_keys like `{}`", like.what));
                assert_eq!(ids.len(), keys.len());
                for (id, key) in ids.into_iter().zip(&keys) {
                    live.push(copy(&like, id, key, priority));
                }
                n.blocks += 1;
            }
        } else if what < 85 && !live.is_empty() {
            let l = live.swap_remove(rng.below(live.len()));
            c.remove(l.id);
            n.removals += 1;
        } else {
            c.publish();
            n.publishes += 1;
            match is_tree(&c) {
                Some(true) => n.checked_in_tree += 1,
                Some(false) => n.checked_in_groups += 1,
                None => {}
            }
            check_state(
                &c,
                &kept,
                &live,
                &pool.packets,
                &format!("seed {seed}, op {op}"),
            );
        }
    }
    c.publish();
    check_state(
        &c,
        &kept,
        &live,
        &pool.packets,
        &format!("seed {seed}, end"),
    );
    (n, kept)
}

pub fn copy(like: &Live, id: FilterId, key: &[u32], priority: i32) -> Live {
    let path = like.path.as_ref().unwrap().with_key(key);
    Live {
        id,
        what: format!("{} with key {key:?}", like.what),
        filter: path_filter(&path),
        compiled: None,
        path: Some(path),
        priority,
    }
}

#[test]
fn classifier_changes_equal_a_fresh_build() {
    // The default engine in Rust: tuple space search, then the tree.
    let pool = Pool::new(11, 300, 600);
    for seed in [1, 2] {
        let (n, _) = sequence::<Auto<Merged, DecisionTree>>(
            &pool,
            seed,
            420,
            |c| c.published(|e| e.is_tree()),
            |_| {},
        );
        println!("Classifier, seed {seed}: {n:?}");
        assert!(n.checked_in_groups > 0 && n.checked_in_tree > 0, "{n:?}");
        assert!(n.keyed > 0 && n.blocks > 0 && n.removals > 0);
    }
}

#[test]
fn native_tree_classifier_changes_equal_a_fresh_build() {
    let pool = Pool::new(12, 300, 600);
    for seed in [3, 4] {
        let (n, _) = sequence::<NativeTree>(&pool, seed, 420, |_| None, |_| {});
        println!("NativeTreeClassifier, seed {seed}: {n:?}");
        assert!(n.keyed > 0 && n.blocks > 0 && n.removals > 0);
    }
}

/// The same with the kept reader's flow cache on for every packet: its
/// entries live across inserts, key-only inserts, blocks and removals, so
/// an entry a change should have dropped answers wrongly.
#[test]
fn native_tree_flow_cache_follows_changes() {
    let pool = Pool::new(13, 300, 600);
    // Seed 6 with a cache of 32 flows: emptied when full, again and
    // again (eviction), between the changes.
    for (seed, capacity) in [(5, usize::MAX), (6, 32)] {
        let (n, kept) = sequence::<NativeTree>(
            &pool,
            seed,
            420,
            |_| None,
            |r| {
                r.with_scratch(|s| {
                    s.set_flow_cache_always();
                    s.set_flow_cache_capacity(capacity);
                })
            },
        );
        let f = kept
            .with_scratch(|s| s.flow_stats())
            .expect("the cache is on");
        println!("NativeTreeClassifier with a flow cache of {capacity}, seed {seed}: {n:?}, {f:?}");
        assert!(n.keyed > 0 && n.blocks > 0 && n.removals > 0);
        assert!(
            f.hits > 1000 && f.invalidated > 0,
            "the cache served and was invalidated: {f:?}"
        );
        if capacity < 100 {
            assert!(f.flushes > 1, "the cache was emptied when full: {f:?}");
        }
    }
}

/// A one-path filter as a predicate: every atom must load and test as the
/// path says (an abort rejects the whole filter, as on the path).
pub fn path_filter(p: &Path) -> Filter {
    let atoms = p
        .atoms
        .iter()
        .map(|a| {
            let (pred, truth) = match a {
                Atom::Field { val, test, truth } => {
                    let k = |k: &u32| Val::Const(*k);
                    let pred = match test {
                        Test::Eq(x) => Pred::eq(val.clone(), *x),
                        Test::Gt(x) => Pred::cmp(CmpOp::Gt, val.clone(), k(x)),
                        Test::Ge(x) => Pred::cmp(CmpOp::Ge, val.clone(), k(x)),
                        Test::Set(x) => Pred::cmp(CmpOp::Set, val.clone(), k(x)),
                        Test::In(s) => Pred::is_in(val.clone(), s.sorted().to_vec()),
                    };
                    (pred, *truth)
                }
                Atom::Pred { pred, truth } => (pred.clone(), *truth),
            };
            if truth {
                pred
            } else {
                Pred::not(pred)
            }
        })
        .collect();
    Filter::new(Pred::and(atoms), p.accept)
}

/// The shape of a one-path filter: its path with the equality constants
/// zeroed (filters of one shape can be copied from each other by key).
pub fn shape_of(p: &Path) -> Path {
    p.with_key(&vec![0; p.key().len()])
}

#[test]
fn auto_classifier_changes_equal_a_fresh_build() {
    let pool = Pool::new(11, 300, 600);
    for seed in [1, 2] {
        let (n, kept) = sequence::<sluice_native::NativeAuto>(
            &pool,
            seed,
            420,
            |c| c.published(|e| e.is_tree()),
            // The kept reader with its flow cache on for every packet.
            |r| r.with_scratch(|s| s.tree_mut().set_flow_cache_always()),
        );
        let f = kept.with_scratch(|s| s.tree_mut().flow_stats());
        println!("AutoClassifier, seed {seed}: {n:?}, {f:?}");
        assert!(n.checked_in_groups > 0 && n.checked_in_tree > 0, "{n:?}");
        assert!(f.is_some_and(|f| f.hits > 0), "the cache served: {f:?}");
    }
}
