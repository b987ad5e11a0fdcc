//! The machine code against the tree's own walk and against each filter
//! alone, on generated filter sets and packets of every length.

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

/// Values over a 24-byte packet: plain and masked loads, loads behind a
/// variable header (as IPv4's), computed values, `len`.
fn val(g: &mut Gen) -> Val {
    let hdr = Val::ip_hdr_len(2);
    match g.below(9) {
        0 | 1 => Val::load_abs(g.below(12) as u32, Size::Byte),
        2 => Val::load_abs(g.below(11) as u32, Size::Half),
        3 => Val::load_abs(g.below(9) as u32, Size::Word),
        4 => Val::bin(
            BinOp::And,
            Val::load_abs(g.below(12) as u32, Size::Half),
            Val::Const(0x0ff0),
        ),
        5 => Val::load(hdr, g.below(6) as u32, Size::Byte),
        6 => match g.below(3) {
            0 => Val::bin(
                BinOp::Shr,
                Val::load_abs(g.below(12) as u32, Size::Byte),
                Val::Const(2),
            ),
            1 => Val::bin(
                BinOp::Div,
                Val::load_abs(g.below(12) as u32, Size::Byte),
                Val::load_abs(g.below(12) as u32, Size::Byte),
            ),
            _ => Val::load(
                Val::bin(
                    BinOp::Mod,
                    Val::load_abs(g.below(12) as u32, Size::Byte),
                    Val::Const(7),
                ),
                1,
                Size::Half,
            ),
        },
        7 => Val::Len,
        _ => Val::load_abs(g.below(12) as u32, Size::Byte),
    }
}

fn atom(g: &mut Gen) -> Pred {
    let v = val(g);
    let k = g.below(5) as u32;
    match g.below(10) {
        0..=4 => Pred::eq(v, k),
        5 => Pred::cmp(CmpOp::Gt, v, Val::Const(k)),
        6 => Pred::cmp(CmpOp::Ge, v, Val::Const(k + 1)),
        7 => Pred::cmp(CmpOp::Set, v, Val::Const(k + 1)),
        8 => Pred::is_in(v, (0..g.below(20) as u32 + 2).collect()),
        _ => Pred::cmp(CmpOp::Gt, v, val(g)),
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
    for _ in 0..200 {
        let mut p: Vec<u8> = (0..24).map(|_| g.below(5) as u8).collect();
        p[2] = 0x40 | g.below(4) as u8;
        out.push(p);
    }
    // Every length of a few of them.
    for i in 0..5 {
        for len in 0..24 {
            out.push(out[i][..len].to_vec());
        }
    }
    out
}

fn alone(filters: &[(u32, Filter, i32)], pkt: &[u8], wirelen: u32) -> (Vec<u32>, Option<u32>) {
    let hits: Vec<&(u32, Filter, i32)> = filters
        .iter()
        .filter(|(_, f, _)| f.run(pkt, wirelen) != 0)
        .collect();
    let mut ids: Vec<u32> = hits.iter().map(|h| h.0).collect();
    ids.sort_unstable();
    let first = hits
        .iter()
        .max_by_key(|(id, _, p)| (*p, std::cmp::Reverse(*id)))
        .map(|h| h.0);
    (ids, first)
}

fn check(t: &NativeTree, filters: &[(u32, Filter, i32)], pkts: &[Vec<u8>]) {
    let mut s = NativeScratch::default();
    let mut out = Vec::new();
    for pkt in pkts {
        let wirelen = pkt.len() as u32 + 3;
        let (ids, first) = alone(filters, pkt, wirelen);
        t.classify(pkt, wirelen, &mut s, &mut out);
        out.sort_unstable();
        assert_eq!(out, ids, "{pkt:?}");
        // A new buffer too: its room is only what the code reserves.
        let mut fresh = Vec::new();
        t.classify(pkt, wirelen, &mut s, &mut fresh);
        fresh.sort_unstable();
        assert_eq!(fresh, ids, "{pkt:?}");
        assert_eq!(t.classify_first(pkt, wirelen, &mut s), first, "{pkt:?}");
    }
}

#[test]
fn code_agrees_with_each_filter_alone() {
    for seed in 1..25u64 {
        let mut g = Gen(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let n = 1 + g.below(50) as usize;
        let filters: Vec<(u32, Filter, i32)> = (0..n)
            .map(|i| (i as u32, Filter::new(pred(&mut g, 3), 1), g.below(3) as i32))
            .collect();
        let mut t = NativeTree::new();
        for (id, f, p) in &filters {
            t.insert(*id, &Compiled::new(f.clone()), *p);
        }
        t.update();
        eprintln!("{seed}: {:?} {:?}", t.native_stats(), t.tree().stats());
        assert!(t.fresh && t.code.is_some());
        assert_eq!(t.compiler().calls_without_code(), vec![], "seed {seed}");
        check(&t, &filters, &packets(&mut g));
    }
}

/// Past a unit's size limit, a small part of the tree is compiled in
/// place and only larger ones are called; the code agrees with each
/// filter alone.
#[test]
fn small_parts_past_the_limit_stay_in_place() {
    use plan::{Ids, Plan, MAX_ROOT_NODES, SMALL_PART};
    // 300 fields of one word under distinct masks: the root's chain, each
    // node's key leading to a part of two or three nodes (byte tests, a
    // report).
    let filters: Vec<(u32, Filter, i32)> = (0..300u32)
        .map(|i| {
            let word = Val::bin(BinOp::And, Val::load_abs(4, Size::Word), Val::Const(i + 1));
            let mut all = vec![
                Pred::eq(word, 0),
                Pred::cmp(CmpOp::Gt, Val::load_abs(9, Size::Byte), Val::Const(i % 5)),
            ];
            // Parts of two and three nodes, so that the limit falls
            // inside one.
            if i % 2 == 0 {
                all.push(Pred::cmp(
                    CmpOp::Ge,
                    Val::load_abs(10, Size::Byte),
                    Val::Const(2),
                ));
            }
            let p = Pred::and(all);
            (i, Filter::new(p, 1), 0)
        })
        .collect();
    let mut t = NativeTree::new();
    for (id, f, p) in &filters {
        t.insert(*id, &Compiled::new(f.clone()), *p);
    }
    t.update();
    let tree = t.tree();
    let p = Plan::unit(tree, tree.nodes().root(), &mut Ids::default());
    assert!(p.members.len() > MAX_ROOT_NODES, "{}", p.members.len());
    assert!(!p.calls.is_empty());
    for &c in &p.calls {
        assert!(
            !plan::within(tree, c, SMALL_PART),
            "a small part at {c} is called"
        );
    }
    let mut g = Gen(11);
    let mut pkts = packets(&mut g);
    pkts.extend((0..300).map(|i| {
        let mut p = vec![0u8; 24];
        p[9] = (i % 7) as u8;
        p[10] = (i % 4) as u8;
        p[4..8].copy_from_slice(&(!(i as u32 + 1)).to_be_bytes());
        p
    }));
    check(&t, &filters, &pkts);
}

#[test]
fn large_tables_are_probed_and_keep_their_code_across_key_inserts() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let flow = |a: u32, c: u32| Pred::and(vec![Pred::eq(b(0), a), Pred::eq(b(1), c)]);
    let mut t = NativeTree::new();
    let mut filters = Vec::new();
    for i in 0..100u32 {
        let f = Filter::new(flow(i % 5, i / 5), 1);
        t.insert(i, &Compiled::new(f.clone()), 0);
        filters.push((i, f, 0));
    }
    // A filter below one of the keys that tests more, so that key's
    // child is walked rather than reported from the table.
    let deeper = Filter::new(
        Pred::and(vec![flow(1, 1), Pred::cmp(CmpOp::Gt, b(2), Val::Const(1))]),
        1,
    );
    t.insert(100, &Compiled::new(deeper.clone()), 3);
    filters.push((100, deeper, 3));
    t.update();
    assert_eq!(t.native_stats().tables, 1);
    let mut g = Gen(5);
    let pkts: Vec<Vec<u8>> = (0..300)
        .map(|_| vec![g.below(9) as u8, g.below(40) as u8, g.below(4) as u8, 0])
        .collect();
    check(&t, &filters, &pkts);
    // Key-only inserts: the same plan, the same code.
    assert_eq!(t.tree().key_width_of(0), Some(2));
    let before = t.native_stats().compilations;
    let keys: Vec<u32> = (0..30).flat_map(|i| [5 + i % 3, 30 + i]).collect();
    assert!(t.insert_key_block(200, 0, 2, keys.into(), 0));
    for i in 0..30u32 {
        filters.push((200 + i, Filter::new(flow(5 + i % 3, 30 + i), 1), 0));
    }
    t.update();
    assert_eq!(t.native_stats().compilations, before);
    check(&t, &filters, &pkts);
}

#[test]
fn the_concurrent_classifier_agrees_with_the_interpreter() {
    let mut g = Gen(99);
    let mut c = NativeTreeClassifier::default();
    let mut plain = sluice_classifier::Classifier::new();
    let mut ids = Vec::new();
    for round in 0..6 {
        for _ in 0..10 {
            let f = Filter::new(pred(&mut g, 2), 1);
            let p = g.below(3) as i32;
            ids.push((c.insert(&f, p), plain.insert(&f, p)));
        }
        if round % 2 == 1 {
            for _ in 0..5 {
                let (a, b) = ids.swap_remove(g.below(ids.len() as u64) as usize);
                c.remove(a);
                plain.remove(b);
            }
        }
        c.publish();
        plain.publish();
        let (r, q) = (c.reader(), plain.reader());
        for pkt in packets(&mut g) {
            let w = pkt.len() as u32;
            assert_eq!(r.classify(&pkt, w), q.classify(&pkt, w));
            assert_eq!(r.classify_first(&pkt, w), q.classify_first(&pkt, w));
        }
    }
}

/// Filters over one byte with many values (a large table) whose children
/// test more (units of their own), and filters of other shapes, inserted
/// and removed at random: after every update the code agrees with each
/// filter alone, and compiles only what changed.
#[test]
fn incremental_updates_agree_with_each_filter_alone() {
    let b = |o| Val::load_abs(o, Size::Byte);
    for seed in 1..6u64 {
        let mut g = Gen(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let mut t = NativeTree::new();
        let mut live: Vec<(u32, Filter, i32)> = Vec::new();
        let pkts: Vec<Vec<u8>> = (0..400)
            .map(|_| {
                (0..g.below(6) as usize + 2)
                    .map(|_| g.below(200) as u8)
                    .collect()
            })
            .collect();
        for step in 0..200u32 {
            if live.len() > 100 && g.below(3) == 0 {
                let (id, ..) = live.swap_remove(g.below(live.len() as u64) as usize);
                t.remove(id);
            } else {
                let k = g.below(200) as u32;
                let p = match g.below(7) {
                    0 => Pred::eq(b(0), k),
                    1 => Pred::and(vec![
                        Pred::eq(b(0), k),
                        Pred::cmp(CmpOp::Gt, b(1), Val::Const(g.below(200) as u32)),
                    ]),
                    2 => Pred::and(vec![
                        Pred::eq(b(0), k),
                        Pred::eq(b(1), g.below(200) as u32),
                        Pred::eq(b(2), 7),
                    ]),
                    3 => pred(&mut g, 2),
                    _ => Pred::eq(b(0), k),
                };
                let f = Filter::new(p, 1);
                let prio = g.below(3) as i32;
                t.insert(step, &Compiled::new(f.clone()), prio);
                live.push((step, f, prio));
            }
            if step % 9 == 0 {
                t.update();
                check(&t, &live, &pkts);
            }
        }
        t.update();
        check(&t, &live, &pkts);
        let s = t.native_stats();
        assert!(s.units > 1 && s.tables >= 1, "{s:?}");
        // The units kept up to date are the units a fresh code generator
        // makes of the same tree.
        let mut fresh = units::Compiler::default();
        let all: Vec<u32> = (0..t.tree().nodes().all().len() as u32).collect();
        fresh.update(t.tree(), &all, None).unwrap();
        assert_eq!(t.compiler().unit_roots(), fresh.unit_roots(), "seed {seed}");
        assert_eq!(t.compiler().calls_without_code(), vec![], "seed {seed}");
        assert_eq!(fresh.calls_without_code(), vec![], "seed {seed}");
    }
}

/// A publish within a compile budget too small for anything leaves the
/// units to later publishes; every state answers as each filter alone.
#[test]
fn publishes_within_a_budget_settle_later() {
    let mut g = Gen(4242);
    let mut c = NativeTreeClassifier::default();
    let mut filters = Vec::new();
    for i in 0..60u32 {
        let f = Filter::new(pred(&mut g, 2), 1);
        let p = g.below(3) as i32;
        let id = c.insert(&f, p);
        assert_eq!(id.0, i);
        filters.push((i, f, p));
    }
    let pkts = packets(&mut g);
    let check = |c: &NativeTreeClassifier| {
        let r = c.reader();
        for pkt in &pkts {
            let w = pkt.len() as u32 + 3;
            let (ids, first) = alone(&filters, pkt, w);
            let got: Vec<u32> = r.classify(pkt, w).into_iter().map(|f| f.0).collect();
            assert_eq!(got, ids);
            assert_eq!(r.classify_first(pkt, w).map(|f| f.0), first);
        }
    };
    c.publish();
    check(&c);
    c.settle();
    assert_eq!(c.published(|t| t.settled()), Some(true));
    check(&c);
}

/// Many overlapping ranges on one field, alone and with more tests below
/// them: the segments' search finds every range a value is in.
#[test]
fn overlapping_ranges_are_searched() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let mut g = Gen(31);
    let mut t = NativeTree::new();
    let mut filters = Vec::new();
    for i in 0..40u32 {
        let lo = g.below(200) as u32;
        let hi = lo + g.below(60) as u32;
        let range = Pred::and(vec![
            Pred::cmp(CmpOp::Ge, b(1), Val::Const(lo)),
            Pred::not(Pred::cmp(CmpOp::Gt, b(1), Val::Const(hi))),
        ]);
        let p = match i % 3 {
            0 => range,
            1 => Pred::and(vec![range, Pred::eq(b(2), g.below(4) as u32)]),
            _ => Pred::and(vec![range, Pred::cmp(CmpOp::Gt, b(3), Val::Const(1))]),
        };
        let f = Filter::new(p, 1);
        t.insert(i, &Compiled::new(f.clone()), (i % 3) as i32);
        filters.push((i, f, (i % 3) as i32));
    }
    t.update();
    assert_eq!(t.compiler().calls_without_code(), vec![]);
    let pkts: Vec<Vec<u8>> = (0..=255u8)
        .flat_map(|v| [vec![0, v, v % 4, v % 3], vec![0, v]])
        .collect();
    check(&t, &filters, &pkts);
}

/// A change whose code does not fit in an update's budget is compiled by
/// the worker thread: the tree's walk answers for the units that wait, and
/// a later update takes the worker's functions.
#[test]
fn the_worker_compiles_what_a_budget_has_no_room_for() {
    let mut g = Gen(77);
    let mut t = NativeTree::new();
    let mut filters = Vec::new();
    for i in 0..80u32 {
        let f = Filter::new(pred(&mut g, 2), 1);
        let p = g.below(3) as i32;
        t.insert(i, &Compiled::new(f.clone()), p);
        filters.push((i, f, p));
        if i == 39 {
            t.update();
        } else if i > 39 {
            // No time at all: whatever needs compiling goes to the worker.
            let code = t.build(Some(Duration::ZERO));
            t.install(code);
        }
    }
    let pkts = packets(&mut g);
    check(&t, &filters, &pkts);
    assert!(!t.settled(), "{:?}", t.native_stats());
    // Updates with nothing new wait for the worker, within their budget.
    for _ in 0..10_000 {
        if t.settled() {
            break;
        }
        let code = t.build(Some(Duration::from_millis(20)));
        t.install(code);
    }
    let s = t.native_stats();
    assert!(t.settled() && s.background_time > Duration::ZERO, "{s:?}");
    check(&t, &filters, &pkts);
}

/// A unit that reports after calling another unit that reported has
/// room for its own reports: every function reserves its room again
/// after a call, so the output never outgrows its buffer.
#[test]
fn reports_after_a_called_unit_stay_within_the_buffer() {
    let b = |o| Val::load_abs(o, Size::Byte);
    let gt = |o, k| Pred::cmp(CmpOp::Gt, b(o), Val::Const(k));
    let mut filters = Vec::new();
    // A large table on byte 0 whose key 1 leads to a unit of 40 reports,
    // and fields on either side of it in the root's chain whose own
    // conditions report 20 each (few enough to stay in
    // the root's unit).
    for j in 0..40u32 {
        filters.push(Pred::and(vec![Pred::eq(b(0), 1), gt(1, j)]));
    }
    for k in 2..40u32 {
        filters.push(Pred::eq(b(0), k));
    }
    for o in [2, 3, 4, 5] {
        for j in 0..20u32 {
            filters.push(gt(o, j));
        }
    }
    let filters: Vec<(u32, Filter, i32)> = filters
        .into_iter()
        .enumerate()
        .map(|(i, p)| (i as u32, Filter::new(p, 1), 0))
        .collect();
    let mut t = NativeTree::new();
    for (id, f, p) in &filters {
        t.insert(*id, &Compiled::new(f.clone()), *p);
    }
    t.update();
    assert!(t.native_stats().tables >= 1, "{:?}", t.native_stats());
    // `check` classifies each packet into a new buffer too, whose first
    // growth is the one the code reserves.
    let pkts = [
        vec![1u8, 255, 255, 255, 255, 255],
        vec![1, 255, 0, 255, 0, 255],
        vec![3, 255, 255, 255, 255, 255],
    ];
    check(&t, &filters, &pkts);
}

/// Small tables of every size, searched by vector from five distinct first
/// words on (a binary search or compares below): every key, its
/// neighbours, keys of two words sharing a first one, and words with the
/// high bit set find what each filter alone finds.
#[test]
fn small_tables_of_every_size_agree_with_each_filter_alone() {
    let word = || Val::load_abs(0, Size::Word);
    let b = |o| Val::load_abs(o, Size::Byte);
    let mut g = Gen(77);
    for n in 1..=17u32 {
        let keys: Vec<u32> = (0..n)
            .map(|i| match i % 3 {
                0 => 0x8000_0000 | (g.below(1 << 31) as u32),
                1 => g.below(1 << 16) as u32,
                _ => u32::MAX - i,
            })
            .collect();
        let mut filters = Vec::new();
        for (i, &k) in keys.iter().enumerate() {
            let i = i as u32;
            filters.push((2 * i, Filter::new(Pred::eq(word(), k), 1), 0));
            if i % 2 == 0 {
                // A key of two words: the same first word, a byte after.
                let p = Pred::and(vec![Pred::eq(word(), k), Pred::eq(b(4), 7)]);
                filters.push((2 * i + 1, Filter::new(p, 1), 1));
            }
        }
        // Enough other nodes that the root's unit has its constants as
        // immediates (small units share code and read them from data).
        for j in 0..20u32 {
            let p = Pred::cmp(CmpOp::Gt, b(5 + j % 3), Val::Const(j * 11));
            filters.push((100 + j, Filter::new(p, 1), 0));
        }
        let mut t = NativeTree::new();
        for (id, f, p) in &filters {
            t.insert(*id, &Compiled::new(f.clone()), *p);
        }
        t.update();
        assert_eq!(t.compiler().calls_without_code(), vec![], "n {n}");
        let mut pkts = Vec::new();
        for &k in &keys {
            for w in [k, k.wrapping_add(1), k.wrapping_sub(1), k ^ 0x8000_0000] {
                for tail in [[7u8, 200, 0, 99], [8, 0, 250, 1]] {
                    let mut p = w.to_be_bytes().to_vec();
                    p.extend_from_slice(&tail);
                    pkts.push(p);
                }
            }
        }
        pkts.extend((0..64).map(|_| {
            let mut p = (g.next() as u32).to_be_bytes().to_vec();
            p.extend((0..4).map(|_| g.below(256) as u8));
            p
        }));
        pkts.extend([vec![], vec![0x80], keys[0].to_be_bytes()[..3].to_vec()]);
        check(&t, &filters, &pkts);
    }
}
