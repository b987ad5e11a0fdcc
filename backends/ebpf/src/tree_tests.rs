//! The decision tree as eBPF against the tree it mirrors, in the kernel:
//! verdicts and per-filter counts on every packet, cut ones too, for
//! random sets in one program and halved into chains, as test runs and
//! as XDP. Where the kernel refuses BPF for lack of privilege the tests
//! say SKIPPED, unless `SLUICE_LIVE_REQUIRED` is set.

use super::*;
use crate::emit::{XDP_DROP, XDP_PASS};
use crate::multi::tests::packets;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use sluice_classifier::tree::Scratch;
use sluice_ir::{arbitrary, Pred};

fn build(filters: &[(u32, Compiled)], opts: Options, mode: Mode) -> Option<TreeFilter> {
    let refs: Vec<(u32, &Compiled)> = filters.iter().map(|(i, c)| (*i, c)).collect();
    match TreeFilter::build(&refs, mode, opts) {
        Ok(m) => Some(m),
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// Every packet through `m` and through the tree in Rust: the verdicts
/// and the counts agree.
fn agree(m: &TreeFilter, filters: &[(u32, Compiled)], pkts: &[Vec<u8>], what: &str) {
    let mut tree = DecisionTree::default();
    for (id, c) in filters {
        tree.insert(*id, c, 0);
    }
    let before = m.counts().unwrap();
    let mut want = before.clone();
    let (mut s, mut out) = (Scratch::default(), Vec::new());
    let xdp = m.chain.mode() == Mode::Xdp;
    for p in pkts.iter().filter(|p| !xdp || p.len() >= 14) {
        let wirelen = p.len() as u32 + if xdp { 0 } else { 4 };
        tree.classify(p, wirelen, &mut s, &mut out);
        let got = m.run(p, wirelen).unwrap();
        let matched = if xdp {
            assert!(
                got == XDP_PASS || got == XDP_DROP,
                "{what}: XDP verdict {got}"
            );
            got == XDP_PASS
        } else {
            got != 0
        };
        assert_eq!(matched, !out.is_empty(), "{what}: packet {p:02x?}: {out:?}");
        if !xdp {
            // sluice's own interpreter of the programs agrees, and counts.
            let (v, insns) = m.count_instructions(p, wirelen).unwrap();
            assert_eq!(v, got, "{what}: interpreted, packet {p:02x?}");
            assert!(insns > 5, "{what}");
        }
        for id in &out {
            want[*id as usize] += 1;
        }
    }
    assert_eq!(m.counts().unwrap(), want, "{what}");
}

fn random_set(runner: &mut TestRunner, n: usize) -> Vec<(u32, Compiled)> {
    let mut filters: Vec<(u32, Compiled)> = (0..n)
        .map(|i| {
            let p = arbitrary::pred().new_tree(runner).unwrap().current();
            (i as u32 * 2, Compiled::new(Filter::new(p, 1)))
        })
        .collect();
    for (k, p) in arbitrary::hand_built_filters().into_iter().enumerate() {
        filters.push((1000 + k as u32, Compiled::new(Filter::new(p, 1))));
    }
    filters
}

#[test]
fn random_sets_count_as_the_tree_does() {
    let mut runner = TestRunner::deterministic();
    let pkts = packets();
    for round in 0..12 {
        let filters = random_set(&mut runner, 1 + round * 4);
        for budget in [100_000, 600] {
            let opts = Options {
                budget,
                ..Default::default()
            };
            let Some(m) = build(&filters, opts, Mode::TestRun) else {
                return;
            };
            if budget == 600 && round > 4 {
                assert!(m.programs() > 1, "a small budget makes a chain");
            }
            agree(
                &m,
                &filters,
                &pkts,
                &format!("round {round}, budget {budget}"),
            );
            let xdp = build(&filters, opts, Mode::Xdp).expect("built as a test run");
            agree(
                &xdp,
                &filters,
                &pkts,
                &format!("XDP round {round}, budget {budget}"),
            );
        }
    }
}

/// Large tables (key table entries, with children that have code and
/// children that only accept) and small ones (compares), on packets that
/// hit and miss them.
#[test]
fn tables_of_every_size_count_as_the_tree_does() {
    let byte = |o| Val::load_abs(o, sluice_ir::Size::Byte);
    let half = |o| Val::load_abs(o, sluice_ir::Size::Half);
    let mut filters = Vec::new();
    let mut id = 0;
    let mut add = |p: Pred, filters: &mut Vec<(u32, Compiled)>| {
        filters.push((id, Compiled::new(Filter::new(p, 1))));
        id += 1;
    };
    // 40 keys of two fields, one in four with a further test below it.
    for k in 0..40u32 {
        let mut t = vec![Pred::eq(byte(0), k), Pred::eq(half(1), 1000 + k)];
        if k % 4 == 0 {
            t.push(Pred::cmp(sluice_ir::CmpOp::Gt, byte(3), Val::Const(k)));
        }
        add(Pred::and(t), &mut filters);
    }
    // Tables of one field: 100 keys (a binary search in the code), and
    // 1,100 (entries of the key table), one key in five with a test below.
    for k in 0..100u32 {
        let mut t = vec![Pred::eq(half(5), 7 * k)];
        if k % 5 == 0 {
            t.push(Pred::eq(byte(7), k));
        }
        add(Pred::and(t), &mut filters);
    }
    for k in 0..1100u32 {
        let mut t = vec![Pred::eq(Val::load_abs(8, sluice_ir::Size::Word), 3 * k)];
        if k % 5 == 0 {
            t.push(Pred::eq(byte(12), k as u8 as u32));
        }
        add(Pred::and(t), &mut filters);
    }
    // 1,100 keys of two fields (entries of the key table).
    for k in 0..1100u32 {
        let t = vec![Pred::eq(half(16), 5 * k), Pred::eq(byte(18), k % 7)];
        add(Pred::and(t), &mut filters);
    }
    // A small table of one field, and a range on it.
    for k in [7u32, 9, 200] {
        add(Pred::eq(byte(4), k), &mut filters);
    }
    add(
        Pred::cmp(sluice_ir::CmpOp::Gt, byte(4), Val::Const(100)),
        &mut filters,
    );
    let mut pkts = Vec::new();
    for k in 0..44u32 {
        for b3 in [0u8, 20, 255] {
            let h = (1000 + k) as u16;
            pkts.push(vec![k as u8, (h >> 8) as u8, h as u8, b3, (k * 5) as u8]);
            // The first word of a key, not the second.
            let h = h + 1;
            pkts.push(vec![k as u8, (h >> 8) as u8, h as u8, b3, (k * 5) as u8]);
        }
    }
    pkts.push(vec![8]);
    for k in (0..1100u32).chain([1100, 1500]) {
        let mut p = vec![0u8; 20];
        p[16..18].copy_from_slice(&((5 * k) as u16).to_be_bytes());
        p[18] = if k % 4 == 0 { (k % 7) as u8 } else { 9 };
        p[5..7].copy_from_slice(&((7 * k) as u16).to_be_bytes());
        p[7] = if k % 2 == 0 { k as u8 } else { 1 };
        p[8..12].copy_from_slice(&(3 * k).to_be_bytes());
        p[12] = if k % 3 == 0 { k as u8 } else { 2 };
        pkts.push(p.clone());
        pkts.push(p[..9].to_vec());
    }
    // Crowded: the key table starts too small, grows, and keys sit in
    // buckets past their own.
    for (budget, crowded) in [(100_000, false), (6_000, false), (100_000, true)] {
        let opts = Options {
            budget,
            ..Default::default()
        };
        crate::keys::CROWDED.with(|c| c.set(crowded));
        let m = build(&filters, opts, Mode::TestRun);
        crate::keys::CROWDED.with(|c| c.set(false));
        let Some(m) = m else {
            return;
        };
        assert_eq!(m.programs() > 1, budget < 100_000, "{:?}", m.instructions());
        agree(
            &m,
            &filters,
            &pkts,
            &format!("budget {budget}, crowded {crowded}"),
        );
    }
}
