//! The merged classifier: key blocks against single inserts, shared keys
//! against a plain model, first-match order over filters that run whole.

use super::*;
use sluice_ir::{Filter, Pred, Size, Val};

/// A block of keys (with a repeat and a key already present) behaves
/// like the same keys inserted one by one, removals included.
#[test]
fn key_blocks_equal_single_inserts() {
    let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
    let keys: Vec<u32> = (0..500).map(|i| i * 7 % 300).chain([0, 0]).collect();
    let (mut a, mut b) = (Merged::default(), Merged::default());
    a.insert(0, &Compiled::new(port(0)), 0);
    b.insert(0, &Compiled::new(port(0)), 0);
    assert!(a.insert_key_block(1, 0, 1, keys.clone().into(), 2));
    for (i, k) in keys.iter().enumerate() {
        assert!(b.insert_keyed(1 + i as u32, 0, &[*k], 2));
    }
    for id in (0..keys.len() as u32).step_by(3) {
        a.remove(id);
        b.remove(id);
    }
    let mut s = Scratch::default();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for q in 0..310u32 {
        let pkt = [0, 0, (q >> 8) as u8, q as u8];
        a.classify(&pkt, 4, &mut s, &mut x);
        b.classify(&pkt, 4, &mut s, &mut y);
        assert_eq!(x, y);
        assert_eq!(
            a.classify_first(&pkt, 4, &mut s),
            b.classify_first(&pkt, 4, &mut s)
        );
    }
    assert_eq!(a.len(), b.len());
}

/// Filters sharing keys (inline single entries turning into lists and
/// back) against a plain model, under random inserts and removals.
#[test]
fn shared_keys_match_a_model() {
    let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
    let mut m = Merged::default();
    let mut model: Vec<(u32, u32, i32)> = Vec::new();
    let mut x: u64 = 99;
    let mut s = Scratch::default();
    let mut out = Vec::new();
    let mut next = 0u32;
    for _ in 0..3000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let p = (x >> 40) as u32 % 6;
        let prio = (x >> 20) as i32 % 3;
        if x % 3 == 0 && !model.is_empty() {
            let (id, _, _) = model.remove((x >> 8) as usize % model.len());
            m.remove(id);
        } else if x % 3 == 1 && !model.is_empty() {
            let like = model[(x >> 8) as usize % model.len()].0;
            assert!(m.insert_keyed(next, like, &[2048 + p], prio));
            model.push((next, 2048 + p, prio));
            next += 1;
        } else {
            m.insert(next, &Compiled::new(port(2048 + p)), prio);
            model.push((next, 2048 + p, prio));
            next += 1;
        }
        for q in 2048..2054u32 {
            let pkt = [0, 0, (q >> 8) as u8, q as u8];
            let mut want: Vec<u32> = model.iter().filter(|f| f.1 == q).map(|f| f.0).collect();
            want.sort_unstable();
            m.classify(&pkt, 4, &mut s, &mut out);
            assert_eq!(out, want);
            let first = model
                .iter()
                .filter(|f| f.1 == q)
                .max_by_key(|f| (f.2, std::cmp::Reverse(f.0)))
                .map(|f| f.0);
            assert_eq!(m.classify_first(&pkt, 4, &mut s), first);
            let mut batch = vec![Vec::new(); 2];
            m.classify_batch(&[(&pkt[..], 4), (&pkt[..3], 3)], &mut s, &mut batch);
            assert_eq!(batch[0], want);
            assert!(batch[1].is_empty());
        }
    }
}

#[test]
fn first_match_over_whole_filters_follows_priority_then_insertion() {
    use sluice_bpf::op::{BPF_ABS, BPF_B, BPF_LD, BPF_RET};
    use sluice_bpf::Insn;
    // `ret A` after loading byte 0: accepts when byte 0 is non-zero; not
    // liftable, so these filters run whole.
    let prog = [
        Insn::stmt(BPF_LD | BPF_B | BPF_ABS, 0),
        Insn::stmt(BPF_RET | sluice_bpf::op::BPF_A, 0),
    ];
    let whole = Compiled::from_bpf(&prog);
    assert!(whole.paths().is_none());
    let keyed = Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1));
    let mut m = Merged::default();
    m.insert(0, &whole, 1);
    m.insert(1, &whole, 5);
    m.insert(2, &keyed, 5);
    m.insert(3, &whole, 5);
    m.insert(4, &keyed, 9);
    let mut s = Scratch::default();
    // Byte 0 = 1: all match; priority 9 wins (filter 4).
    assert_eq!(m.classify_first(&[1], 1, &mut s), Some(4));
    m.remove(4);
    // Priority 5: filters 1 (whole), 2 (keyed), 3 (whole): lowest id wins.
    assert_eq!(m.classify_first(&[1], 1, &mut s), Some(1));
    m.remove(1);
    assert_eq!(m.classify_first(&[1], 1, &mut s), Some(2));
    // Byte 0 = 2: only the whole filters match.
    assert_eq!(m.classify_first(&[2], 1, &mut s), Some(3));
    m.remove(3);
    assert_eq!(m.classify_first(&[2], 1, &mut s), Some(0));
    assert_eq!(m.classify_first(&[0], 1, &mut s), None);
    let mut out = Vec::new();
    m.classify(&[2], 1, &mut s, &mut out);
    assert_eq!(out, vec![0]);
}

#[test]
fn a_filter_too_branchy_to_merge_runs_whole_with_its_meaning() {
    // 2^18 accepting paths: too many to merge, and no BPF program given,
    // so it runs its intermediate form (it used to reject everything when
    // it could not be lowered).
    let b = |i: u32| Val::load_abs(i, Size::Byte);
    let f = Filter::new(
        Pred::and(
            (0..18)
                .map(|i| Pred::or(vec![Pred::eq(b(i), 1), Pred::eq(b(i), 2)]))
                .collect(),
        ),
        5,
    );
    let whole = Compiled::new(f.clone());
    assert!(whole.paths().is_none());
    let mut m = Merged::default();
    m.insert(0, &whole, 0);
    let mut s = Scratch::default();
    for pkt in [vec![1u8; 18], vec![2u8; 18], vec![1, 3, 1], vec![2u8; 17]] {
        let mut out = Vec::new();
        m.classify(&pkt, pkt.len() as u32, &mut s, &mut out);
        assert_eq!(
            !out.is_empty(),
            f.run(&pkt, pkt.len() as u32) != 0,
            "{pkt:?}"
        );
    }
}
