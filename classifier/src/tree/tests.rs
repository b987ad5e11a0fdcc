//! The tree against each filter run alone, over generated filter sets,
//! packets, and random insert and remove sequences.

use super::*;
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Size, Val};

/// A small deterministic generator (xorshift).
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Fields over a tiny 8-byte "packet": absolute bytes and halves, a
/// masked byte, a load behind a variable header length, and `len`.
fn val(g: &mut Gen) -> Val {
    match g.below(6) {
        0 | 1 => Val::load_abs(g.below(8) as u32, Size::Byte),
        2 => Val::load_abs(g.below(7) as u32, Size::Half),
        3 => Val::bin(
            BinOp::And,
            Val::load_abs(g.below(8) as u32, Size::Byte),
            Val::Const(0x0f),
        ),
        4 => Val::load(
            Val::bin(BinOp::And, Val::load_abs(0, Size::Byte), Val::Const(3)),
            4,
            Size::Byte,
        ),
        _ => Val::Len,
    }
}

fn atom(g: &mut Gen) -> Pred {
    let v = val(g);
    let k = g.below(6) as u32;
    match g.below(8) {
        0..=3 => Pred::eq(v, k),
        4 => Pred::cmp(CmpOp::Gt, v, Val::Const(k)),
        5 => Pred::cmp(CmpOp::Ge, v, Val::Const(k)),
        6 => Pred::cmp(CmpOp::Set, v, Val::Const(k)),
        _ => Pred::is_in(v, vec![k, k + 1, g.below(6) as u32]),
    }
}

fn pred(g: &mut Gen, depth: u32) -> Pred {
    if depth == 0 || g.below(3) == 0 {
        return atom(g);
    }
    let n = 2 + g.below(2) as usize;
    let parts: Vec<Pred> = (0..n).map(|_| pred(g, depth - 1)).collect();
    match g.below(5) {
        0 | 1 => Pred::and(parts),
        2 | 3 => Pred::or(parts),
        _ => Pred::not(parts.into_iter().next().unwrap()),
    }
}

fn packets(g: &mut Gen) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..300 {
        let len = g.below(9) as usize;
        out.push((0..len).map(|_| g.below(6) as u8).collect());
    }
    out
}

/// Every filter alone, by the IR interpreter.
fn expected(filters: &[(u32, Filter, i32)], pkt: &[u8]) -> Vec<u32> {
    let mut v: Vec<u32> = filters
        .iter()
        .filter(|(_, f, _)| f.run(pkt, pkt.len() as u32 + 2) != 0)
        .map(|(id, ..)| *id)
        .collect();
    v.sort_unstable();
    v
}

fn expected_first(filters: &[(u32, Filter, i32)], pkt: &[u8]) -> Option<u32> {
    filters
        .iter()
        .filter(|(_, f, _)| f.run(pkt, pkt.len() as u32 + 2) != 0)
        .max_by_key(|(id, _, p)| (*p, std::cmp::Reverse(*id)))
        .map(|(id, ..)| *id)
}

/// Every table's datum is its child's summary, and free nodes are empty.
fn check_summaries(t: &DecisionTree) {
    for n in t.nodes().all() {
        for tu in &n.tuples {
            for (_, v, datum) in tu.table.entries() {
                assert_eq!(datum, node::summary(t.nodes().get(v - 1)));
            }
        }
    }
}

fn check(t: &DecisionTree, filters: &[(u32, Filter, i32)], pkts: &[Vec<u8>]) {
    check_summaries(t);
    let mut s = Scratch::default();
    let mut out = Vec::new();
    for pkt in pkts {
        let wirelen = pkt.len() as u32 + 2;
        t.classify(pkt, wirelen, &mut s, &mut out);
        out.sort_unstable();
        assert_eq!(out, expected(filters, pkt), "packet {pkt:?}");
        assert_eq!(
            t.classify_first(pkt, wirelen, &mut s),
            expected_first(filters, pkt)
        );
    }
}

#[test]
fn random_sets_agree_with_each_filter_alone() {
    for seed in 1..40u64 {
        let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let n = 1 + g.below(60) as usize;
        let filters: Vec<(u32, Filter, i32)> = (0..n)
            .map(|i| {
                (
                    i as u32 * 3,
                    Filter::new(pred(&mut g, 3), 1),
                    g.below(3) as i32,
                )
            })
            .collect();
        let mut t = DecisionTree::default();
        for (id, f, p) in &filters {
            t.insert(*id, &Compiled::new(f.clone()), *p);
        }
        check(&t, &filters, &packets(&mut g));
    }
}

#[test]
fn random_inserts_and_removes_agree_with_a_fresh_build() {
    for seed in 1..30u64 {
        let mut g = Gen(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let mut t = DecisionTree::default();
        let mut live: Vec<(u32, Filter, i32)> = Vec::new();
        let pkts = packets(&mut g);
        for step in 0..120u32 {
            if !live.is_empty() && g.below(3) == 0 {
                let i = g.below(live.len() as u64) as usize;
                let (id, ..) = live.swap_remove(i);
                t.remove(id);
            } else {
                let f = Filter::new(pred(&mut g, 2), 1);
                let p = g.below(3) as i32;
                t.insert(step, &Compiled::new(f.clone()), p);
                live.push((step, f, p));
            }
            if step % 20 == 19 {
                check(&t, &live, &pkts);
            }
        }
        check(&t, &live, &pkts);
        for (id, ..) in &live {
            t.remove(*id);
        }
        assert!(t.is_empty());
        assert!(
            t.nodes().is_empty(),
            "seed {seed}: {} nodes left",
            t.nodes().len()
        );
    }
}

#[test]
fn key_only_inserts_mean_the_same_as_compiling() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let session = |k0: u32, k1: u32| {
        Pred::and(vec![
            Pred::eq(b(0), k0),
            Pred::cmp(CmpOp::Gt, b(2), Val::Const(1)),
            Pred::eq(b(1), k1),
        ])
    };
    let mut t = DecisionTree::default();
    t.insert(0, &Compiled::new(Filter::new(session(1, 2), 1)), 0);
    assert_eq!(t.key_width_of(0), Some(2));
    let mut filters = vec![(0, Filter::new(session(1, 2), 1), 0)];
    let mut keys = Vec::new();
    for (i, (a, c)) in [(1, 3), (2, 2), (1, 2), (4, 4)].into_iter().enumerate() {
        keys.extend([a, c]);
        filters.push((i as u32 + 1, Filter::new(session(a, c), 1), 0));
    }
    assert!(t.insert_key_block(1, 0, 2, keys.into(), 0));
    let mut g = Gen(77);
    check(&t, &filters, &packets(&mut g));
    for id in [2, 0, 4] {
        t.remove(id);
        filters.retain(|f| f.0 != id);
        check(&t, &filters, &packets(&mut g));
    }
}

#[test]
fn a_session_set_is_one_table() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let mut t = DecisionTree::default();
    for k in 0..200u32 {
        let p = Pred::and(vec![
            Pred::eq(b(0), 6),
            Pred::eq(b(1), k % 7),
            Pred::eq(b(2), k / 7),
        ]);
        t.insert(k, &Compiled::new(Filter::new(p, 1)), 0);
    }
    let st = t.stats();
    assert_eq!((st.tables, st.nodes), (1, 201), "{st:?}");
    // A filter sharing only the first field splits the table once.
    t.insert(999, &Compiled::new(Filter::new(Pred::eq(b(0), 6), 1)), 0);
    let mut out = Vec::new();
    t.classify(&[6, 3, 1], 3, &mut Default::default(), &mut out);
    out.sort_unstable();
    assert_eq!(out, vec![10, 999]);
}

#[test]
fn a_large_key_block_gets_a_table_of_its_whole_run() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let triple = |x: u32, y: u32, z: u32| {
        Pred::and(vec![
            Pred::eq(b(0), x),
            Pred::eq(b(1), y),
            Pred::eq(b(3), z),
        ])
    };
    let mut t = DecisionTree::default();
    let mut filters = Vec::new();
    // Filters on the first byte alone make a table of that field, which
    // begins the run of the template below.
    for k in 0..6u32 {
        let f = Filter::new(Pred::eq(b(0), k), 1);
        t.insert(k, &Compiled::new(f.clone()), 0);
        filters.push((k, f, 0));
    }
    let template = Filter::new(triple(1, 2, 3), 1);
    t.insert(10, &Compiled::new(template.clone()), 0);
    filters.push((10, template, 0));
    let before = t.stats();
    let mut keys = Vec::new();
    let mut ids = Vec::new();
    for (i, (x, y, z)) in (0..6u32)
        .flat_map(|x| (0..6u32).flat_map(move |y| (0..6u32).map(move |z| (x, y, z))))
        .filter(|&k| k != (1, 2, 3))
        .take(BLOCK_TABLE + 36)
        .enumerate()
    {
        keys.extend([x, y, z]);
        let id = 100 + i as u32;
        ids.push(id);
        filters.push((id, Filter::new(triple(x, y, z), 1), 0));
    }
    assert!(t.insert_key_block(100, 10, 3, keys.into(), 0));
    let st = t.stats();
    // One table more (the block's, beside the first byte's), and one leaf
    // per key below it.
    assert_eq!(st.tables, before.tables + 1, "{before:?} -> {st:?}");
    assert_eq!(st.nodes, before.nodes + ids.len(), "{before:?} -> {st:?}");
    check_summaries(&t);
    let mut g = Gen(5);
    check(&t, &filters, &packets(&mut g));
    // The template still answers, and the block comes out whole.
    for (n, id) in ids.iter().enumerate() {
        t.remove(*id);
        filters.retain(|f| f.0 != *id);
        if n % 25 == 0 {
            check(&t, &filters, &packets(&mut g));
        }
    }
    check(&t, &filters, &packets(&mut g));
    let after = t.stats();
    assert_eq!((after.tables, after.nodes), (before.tables, before.nodes));
}

/// `report_distinct` copies slots as ids while every filter's id is its
/// slot's number, and maps them once one is not, back and forth as
/// filters come and go.
#[test]
fn distinct_reports_name_the_ids() {
    let byte = |o| Val::load_abs(o, Size::Byte);
    let f = |k: u32| Compiled::new(Filter::new(Pred::eq(byte(0), k), 1));
    let mut t = DecisionTree::default();
    let expect = |t: &DecisionTree, want: &[u32]| {
        let slots: Vec<u32> = (0..t.slots() as u32)
            .filter(|&s| t.id_of(s).is_some())
            .collect();
        let mut out = Vec::new();
        t.report_distinct(&[], 0, &slots, &mut out);
        out.sort_unstable();
        assert_eq!(out, want);
        assert_eq!(t.renamed == 0, slots.iter().all(|&s| t.id_of(s) == Some(s)));
    };
    for id in 0..4 {
        t.insert(id, &f(id), 0);
    }
    expect(&t, &[0, 1, 2, 3]);
    t.remove(1);
    expect(&t, &[0, 2, 3]);
    t.insert(9, &f(9), 0); // takes slot 1
    expect(&t, &[0, 2, 3, 9]);
    t.insert(2, &f(5), 0); // replaced: slot 2 freed, then taken again
    expect(&t, &[0, 2, 3, 9]);
    t.remove(9);
    expect(&t, &[0, 2, 3]);
    t.insert(1, &f(1), 0);
    expect(&t, &[0, 1, 2, 3]);
    assert_eq!(t.renamed, 0);
    t.insert(7, &f(7), 0); // slot 4
    expect(&t, &[0, 1, 2, 3, 7]);
}
