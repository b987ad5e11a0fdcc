//! The flow cache against the tree's own walk: precise invalidation,
//! aborted reads in keys, the wide form, and stepping aside.

use super::*;
use crate::merged::Compiled;
use sluice_ir::{Filter, Pred, Size, Val};

fn byte_eq(o: u32, k: u32) -> Compiled {
    Compiled::new(Filter::new(Pred::eq(Val::load_abs(o, Size::Byte), k), 1))
}

fn answer(c: &mut FlowCache, t: &DecisionTree, pkt: &[u8], s: &mut Scratch) -> Vec<u32> {
    let slots = match c.lookup(t, pkt, pkt.len() as u32, s) {
        Lookup::Hit => c.slots().to_vec(),
        Lookup::Miss => c.learn(t, pkt, pkt.len() as u32, s).to_vec(),
        Lookup::Bypass => panic!("always on"),
    };
    let mut ids: Vec<u32> = slots.iter().map(|&s| t.id_of(s).unwrap()).collect();
    ids.sort_unstable();
    ids
}

/// An insert drops only the flows the new filter may match; a removal
/// only the flows that report the filter removed.
#[test]
fn invalidation_is_precise() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    t.insert(2, &byte_eq(0, 2), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1]);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2]);
    assert_eq!(answer(&mut c, &t, &[3, 0], &mut s), Vec::<u32>::new());
    assert_eq!(c.stats().entries, 3);
    // A filter on byte 0 = 2: only the second flow may change.
    t.insert(3, &byte_eq(0, 2), 0);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1]);
    assert_eq!(c.stats().invalidated, 1);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3]);
    // A filter on byte 1, which no flow read: every flow may change.
    t.insert(4, &byte_eq(1, 0), 0);
    assert_eq!(answer(&mut c, &t, &[3, 0], &mut s), vec![4]);
    assert_eq!(c.stats().invalidated, 4);
    // Removing filter 1 drops only the flows that report it.
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1, 4]);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3, 4]);
    let (before, hits) = (c.stats().invalidated, c.stats().hits);
    t.remove(1);
    // The next lookup replays the removal: the flow of [1, 0] goes,
    // the flow of [2, 0] stays and answers.
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3, 4]);
    assert_eq!(c.stats().invalidated, before + 1);
    assert_eq!(c.stats().hits, hits + 1);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![4]);
    assert_eq!(c.stats().hits, hits + 1, "learnt again");
    assert_eq!(c.stats().invalidated, before + 1);
}

/// A cache made for another tree, or too far behind the log, is
/// emptied rather than trusted.
#[test]
fn another_tree_or_a_long_history_empties_the_cache() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[1], &mut s), vec![1]);
    let mut other = DecisionTree::default();
    other.insert(1, &byte_eq(0, 2), 0);
    assert_eq!(answer(&mut c, &other, &[1], &mut s), Vec::<u32>::new());
    assert_eq!(c.stats().flushes, 1);
    for k in 0..LOG_LEN as u32 + 1 {
        other.insert(10 + k, &byte_eq(5, k), 0);
    }
    assert_eq!(answer(&mut c, &other, &[2], &mut s), vec![1]);
    assert_eq!(c.stats().flushes, 2);
}

/// Aborted reads are part of a flow's key: a shorter packet is
/// another flow.
#[test]
fn aborts_are_part_of_the_key() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(3, 0), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[0, 0, 0, 0], &mut s), vec![1]);
    assert_eq!(answer(&mut c, &t, &[0, 0, 0], &mut s), Vec::<u32>::new());
    assert_eq!(answer(&mut c, &t, &[9, 9, 9, 0], &mut s), vec![1]);
    assert_eq!(c.stats().hits, 1);
}

/// The first level's wide form never claims a packet that disagrees
/// with the entry's key on a field: fixed and IPv4-header-relative
/// loads, masks, different header lengths, short packets, the wire
/// length.
#[test]
fn the_wide_form_implies_the_key() {
    use sluice_ir::BinOp;
    let mut t = DecisionTree::default();
    let vals = [
        Val::load_abs(12, Size::Half),
        Val::load_abs(23, Size::Byte),
        Val::bin(
            BinOp::And,
            Val::load_abs(20, Size::Half),
            Val::Const(0x1fff),
        ),
        Val::load_abs(26, Size::Word),
        Val::load(Val::ip_hdr_len(14), 16, Size::Half),
        Val::bin(
            BinOp::And,
            Val::load(Val::ip_hdr_len(14), 27, Size::Byte),
            Val::Const(0x12),
        ),
        Val::Len,
    ];
    for (i, v) in vals.iter().enumerate() {
        t.insert(
            i as u32,
            &Compiled::new(Filter::new(Pred::eq(v.clone(), 7), 1)),
            0,
        );
    }
    let ids: Vec<FieldId> = vals
        .iter()
        .map(|v| {
            t.fields
                .get(&super::super::field::Source::Val(v.clone()))
                .unwrap()
        })
        .collect();
    let ops: Vec<Op> = ids.iter().map(|&f| Op::of(&t.fields, f)).collect();
    assert!(
        ops.iter().all(|o| matches!(o, Op::Load { .. } | Op::Len)),
        "{ops:?}"
    );
    let mut s = Scratch::default();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut formed, mut claimed) = (0, 0);
    for _ in 0..3000 {
        let len = 30 + (next() % 40) as usize;
        // Few byte values, so that packets often agree.
        let mut a: Vec<u8> = (0..len).map(|_| (next() % 3) as u8).collect();
        a[14] = 0x44 + (next() % 3) as u8;
        let wa = 100 + (next() % 2) as u32;
        let key: Vec<u64> = ops.iter().map(|o| o.read(&t, &a, wa, &mut s)).collect();
        let w = Wide::of(&ops, &key, &a);
        let Some(own) = w.matches(&a, wa) else {
            continue;
        };
        formed += 1;
        assert!(own, "a packet agrees with its own form");
        for _ in 0..20 {
            let mut b = a.clone();
            // Shorter or longer.
            let len = 20 + (next() % 50) as usize;
            while b.len() < len {
                b.push((next() % 3) as u8);
            }
            b.truncate(len);
            for _ in 0..(next() % 3) {
                if !b.is_empty() {
                    let at = (next() as usize) % b.len();
                    b[at] = (next() % 3) as u8 + if at == 14 { 0x44 } else { 0 };
                }
            }
            let wb = 100 + (next() % 2) as u32;
            if w.matches(&b, wb) == Some(true) {
                claimed += 1;
                let got: Vec<u64> = ops.iter().map(|o| o.read(&t, &b, wb, &mut s)).collect();
                assert_eq!(got, key, "{a:?} claims {b:?}");
            }
        }
    }
    assert!(
        formed > 100 && claimed > 1000,
        "{formed} forms, {claimed} claims"
    );
}

/// Without `always`, a cache that never hits steps aside.
#[test]
fn a_cache_that_does_not_pay_steps_aside() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    t.insert(
        2,
        &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Word), 7), 1)),
        0,
    );
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    let mut aside = 0;
    for k in 0..3 * WINDOW {
        let pkt = k.to_be_bytes();
        match c.lookup(&t, &pkt, 4, &mut s) {
            Lookup::Miss => {
                c.learn(&t, &pkt, 4, &mut s);
            }
            Lookup::Bypass => aside += 1,
            Lookup::Hit => {}
        }
    }
    assert!(aside >= WINDOW, "{:?}", c.stats());
    // A trial ends after about MAX_MISSES misses, not a whole window.
    assert!(
        c.stats().misses < u64::from(WINDOW + 2 * MAX_MISSES),
        "{:?}",
        c.stats()
    );
}

/// Without `always`, a cache whose flows repeat keeps answering
/// across its windows (a hit right after a window is judged counts
/// in the next one).
#[test]
fn a_cache_that_pays_keeps_answering() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    for k in 0..4 * WINDOW {
        let pkt = [(k % 2) as u8, (k >> 8) as u8];
        match c.lookup(&t, &pkt, 2, &mut s) {
            Lookup::Miss => {
                c.learn(&t, &pkt, 2, &mut s);
            }
            Lookup::Bypass | Lookup::Hit => {}
        }
    }
    let f = c.stats();
    assert_eq!(f.misses, 2, "{f:?}");
    assert!(f.hits > u64::from(4 * WINDOW - 4), "{f:?}");
}

#[test]
fn a_few_interrupted_samples_do_not_decide_a_window() {
    let mut c = Cost::default();
    for i in 0..64 {
        c.add(if i % 30 == 7 { 40_000 } else { 100 });
    }
    assert_eq!(c.mean(), Some(100.0));
    // Frequent slow packets (misses) still count.
    let mut m = Cost::default();
    for i in 0..64 {
        m.add(if i % 4 == 0 { 4_000 } else { 100 });
    }
    assert!(m.mean().unwrap() > 900.0);
    assert_eq!(Cost::default().mean(), None);
}
