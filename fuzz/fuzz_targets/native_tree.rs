//! Merges the filters of arbitrary expressions (one per line before the
//! first NUL; packet bytes after it) into the decision tree and runs it as
//! machine code (`NativeTree`) and through the default engine
//! (`NativeAuto`: tuple space search while the filters have few shapes,
//! then the tree), on the packet and every truncation of it, one call at
//! a time and in batches. Then it removes every other filter, adds
//! key-only copies of the remaining one-path filters with keys made from
//! the packet's bytes (one by one and as a block), updates, and checks
//! again. Every answer must equal the tree's Rust walk (`DecisionTree`)
//! and, for the filters inserted whole, each filter run alone; any panic
//! is a bug. The native tree also answers through a flow cache on for
//! every packet (each cut twice: learnt, then from the cache; then all
//! cuts as batches), kept from before the changes to after them, so that
//! an entry the changes should have dropped shows. The designs measured
//! against the tree (bit vectors, cuts, and the decision diagram under
//! budgets of 0 to 100,000 paths placed) must give the walk's answers as
//! well.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice::native::tree::{NativeScratch, NativeTree};
use sluice::native::NativeAuto;
use sluice_classifier::bitvec::BitVectors;
use sluice_classifier::cuts::Cuts;
use sluice_classifier::dag::Dag;
use sluice_classifier::merged::Compiled;
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{Change, Engine};
use std::sync::Arc;

/// Every answer of `t` and `a` equals the tree's walk `d` on the packet
/// and its cuts, and `alone` (the filters inserted whole: id, filter,
/// priority) agrees with `d` on those filters (and on the winner, when
/// `exact_first`: they are all the filters).
fn agree(
    t: &NativeTree,
    a: &NativeAuto,
    d: &DecisionTree,
    alone: &[(u32, sluice_ir::Filter, i32)],
    pkt: &[u8],
    exact_first: bool,
    cached: &mut NativeScratch,
) {
    let wire = pkt.len() as u32 + 2;
    let cuts: Vec<(&[u8], u32)> = (0..=pkt.len()).map(|l| (&pkt[..l], wire)).collect();
    let (mut ts, mut as_, mut ds) = Default::default();
    let (mut x, mut y, mut z) = (Vec::new(), Vec::new(), Vec::new());
    for &(cut, w) in &cuts {
        d.classify(cut, w, &mut ds, &mut x);
        x.sort_unstable();
        t.classify(cut, w, &mut ts, &mut y);
        y.sort_unstable();
        a.classify(cut, w, &mut as_, &mut z);
        z.sort_unstable();
        assert_eq!(y, x, "NativeTree classify");
        // Into a new buffer, whose room is only what the code reserves.
        let mut fresh = Vec::new();
        t.classify(cut, w, &mut ts, &mut fresh);
        fresh.sort_unstable();
        assert_eq!(fresh, x, "NativeTree classify, a new buffer");
        assert_eq!(z, x, "NativeAuto classify");
        for pass in ["learnt", "cached"] {
            t.classify(cut, w, cached, &mut y);
            y.sort_unstable();
            assert_eq!(y, x, "NativeTree classify, flow cache {pass}");
            let first = d.classify_first(cut, w, &mut ds);
            assert_eq!(t.classify_first(cut, w, cached), first, "flow cache first");
        }
        let first = d.classify_first(cut, w, &mut ds);
        assert_eq!(t.classify_first(cut, w, &mut ts), first, "NativeTree first");
        assert_eq!(
            a.classify_first(cut, w, &mut as_),
            first,
            "NativeAuto first"
        );
        for (id, f, _) in alone {
            let hit = f.run(cut, w) != 0;
            assert_eq!(x.binary_search(id).is_ok(), hit, "filter {id} alone");
        }
        if exact_first {
            let best = alone
                .iter()
                .filter(|(_, f, _)| f.run(cut, w) != 0)
                .max_by_key(|(id, _, p)| (*p, std::cmp::Reverse(*id)))
                .map(|(id, ..)| *id);
            assert_eq!(first, best, "first alone");
        }
    }
    let mut bx = vec![Vec::new(); cuts.len()];
    let mut by = vec![Vec::new(); cuts.len()];
    t.classify_batch(&cuts, &mut ts, &mut bx);
    a.classify_batch(&cuts, &mut as_, &mut by);
    let mut fx = vec![None; cuts.len()];
    let mut fy = vec![None; cuts.len()];
    t.classify_first_batch(&cuts, &mut ts, &mut fx);
    a.classify_first_batch(&cuts, &mut as_, &mut fy);
    // The batches through the flow cache: the cuts learnt above, or
    // learnt now and then answered from the cache.
    let mut bc = vec![Vec::new(); cuts.len()];
    let mut fc = vec![None; cuts.len()];
    t.classify_batch(&cuts, cached, &mut bc);
    t.classify_first_batch(&cuts, cached, &mut fc);
    for (k, &(cut, w)) in cuts.iter().enumerate() {
        d.classify(cut, w, &mut ds, &mut x);
        x.sort_unstable();
        bx[k].sort_unstable();
        by[k].sort_unstable();
        assert_eq!(bx[k], x, "NativeTree classify_batch");
        assert_eq!(by[k], x, "NativeAuto classify_batch");
        bc[k].sort_unstable();
        assert_eq!(bc[k], x, "NativeTree classify_batch, flow cache");
        let first = d.classify_first(cut, w, &mut ds);
        assert_eq!(fx[k], first, "NativeTree classify_first_batch");
        assert_eq!(fy[k], first, "NativeAuto classify_first_batch");
        assert_eq!(fc[k], first, "NativeTree classify_first_batch, flow cache");
    }
}

/// The designs measured against the tree, built from `set` (id, filter,
/// priority), answer as the tree's walk `d` does on the packet and its
/// cuts. The diagram's budgets leave its root, some states or none to
/// be checked path by path, and keep an input from growing it for long.
fn designs_agree(d: &DecisionTree, set: &[(u32, Arc<Compiled>, i32)], pkt: &[u8]) {
    let triples = || set.iter().map(|(id, c, p)| (*id, &**c, *p));
    let bv = BitVectors::build(triples());
    let cuts = Cuts::build(triples());
    let dags = [0, 64, 100_000].map(|work| Dag::build_within(triples(), work));
    let wire = pkt.len() as u32 + 2;
    let (mut ds, mut bs, mut cs, mut gs) = Default::default();
    let (mut want, mut got) = (Vec::new(), Vec::new());
    for l in 0..=pkt.len() {
        let cut = &pkt[..l];
        d.classify(cut, wire, &mut ds, &mut want);
        want.sort_unstable();
        let first = d.classify_first(cut, wire, &mut ds);
        // One design's answers (classify, then the first) on this cut.
        macro_rules! same {
            ($e:expr, $s:expr, $name:literal) => {
                $e.classify(cut, wire, $s, &mut got);
                got.sort_unstable();
                assert_eq!(got, want, "{} classify", $name);
                assert_eq!($e.classify_first(cut, wire, $s), first, "{} first", $name);
            };
        }
        same!(bv, &mut bs, "BitVectors");
        same!(cuts, &mut cs, "Cuts");
        for dag in &dags {
            same!(dag, &mut gs, "Dag");
        }
    }
}

/// Apply a change to every engine.
fn change(d: &mut DecisionTree, t: &mut NativeTree, a: &mut NativeAuto, c: Change) {
    d.change(&c);
    t.change(&c);
    a.change(&c);
}

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let mut d = DecisionTree::default();
    let mut t = NativeTree::new();
    let mut a = NativeAuto::empty();
    let (mut alone, mut set) = (Vec::new(), Vec::new());
    for (i, line) in text.lines().take(16).enumerate() {
        let Ok(f) = sluice::pcap::compile(line, sluice::LinkType::EN10MB, 65535) else {
            continue;
        };
        let prio = (i % 3) as i32;
        // Ids far from slots, so that a slot taken for an id shows.
        let id = 3 * i as u32 + 1;
        let compiled = Arc::new(Compiled::new(f.clone()));
        change(
            &mut d,
            &mut t,
            &mut a,
            Change::Insert(id, compiled.clone(), prio),
        );
        alone.push((id, f, prio));
        set.push((id, compiled, prio));
    }
    t.update();
    a.update();
    let mut cached = NativeScratch::default();
    cached.set_flow_cache_always();
    agree(&t, &a, &d, &alone, pkt, true, &mut cached);
    designs_agree(&d, &set, pkt);
    // Remove every other filter; copy the others by key, with words
    // taken from the packet: one by one, then as a block.
    let mut next = 1000;
    let mut words = pkt
        .chunks(2)
        .map(|c| c.iter().fold(0u32, |a, &b| a << 8 | b as u32))
        .cycle();
    let ids: Vec<u32> = alone.iter().map(|(id, ..)| *id).collect();
    for (k, &id) in ids.iter().enumerate() {
        if k % 2 == 1 {
            change(&mut d, &mut t, &mut a, Change::Remove(id));
            alone.retain(|(i, ..)| *i != id);
            continue;
        }
        let width = d.key_width_of(id);
        assert_eq!(t.key_width_of(id), width, "NativeTree key width");
        assert_eq!(a.key_width_of(id), width, "NativeAuto key width");
        let Some(width) = width.filter(|&w| w > 0) else {
            continue;
        };
        if pkt.is_empty() {
            continue;
        }
        for _ in 0..2 {
            let key: Vec<u32> = (&mut words).take(width).collect();
            change(
                &mut d,
                &mut t,
                &mut a,
                Change::InsertKeyed(next, id, key.into(), 1),
            );
            next += 1;
        }
        let block: Vec<u32> = (&mut words).take(3 * width).collect();
        let (sorted, _) = d.sort_key_block(id, width, &block);
        change(
            &mut d,
            &mut t,
            &mut a,
            Change::InsertKeys(next, id, width, sorted.into(), 2),
        );
        next += 3;
    }
    t.update();
    a.update();
    agree(&t, &a, &d, &alone, pkt, false, &mut cached);
});
