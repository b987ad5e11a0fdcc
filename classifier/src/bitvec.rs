//! Bit vectors per field (Lakshman and Stiliadis), over the tree's own
//! fields and folded paths: the design issue 33 asked to be measured
//! against the decision tree ([`crate::tree`]), kept as a reference
//! engine in Rust.
//!
//! Every accepting path of every filter gets one bit. For each field that
//! some path tests, the values the paths name (keys, range ends, excluded
//! values) cut the field's value space into elementary intervals, and each
//! interval holds a bit vector: the paths whose test of the field holds
//! everywhere in it, and every path that does not test the field. A
//! packet reads each field once, finds its interval by binary search and
//! ANDs the interval's vector into the paths still alive; the bits left at
//! the end are the paths that hold, and their filters are the packet's.
//! A read that aborts leaves only the paths that do not test the field,
//! as the tree's skip edge does.
//!
//! Two of the aggregated bit vector paper's (ABV) ideas keep the work down
//! where a field is tested by few paths: paths are numbered in the order
//! of their tests, so paths of the same protocol share words, and a field
//! stores and ANDs only the words that hold a path testing it, and is not
//! read at all once those words are dead. Parts of a condition that are
//! not intervals (bit masks, large sets) are checked path by path after
//! the AND, for the paths still alive.
//!
//! The structure is built once from a set of filters; it has no inserts.
//!
//! ```
//! use sluice_classifier::bitvec::{BitScratch, BitVectors};
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{CmpOp, Filter, Pred, Size, Val};
//! let byte = |o| Val::load_abs(o, Size::Byte);
//! let a = Compiled::new(Filter::new(Pred::eq(byte(0), 1), 1));
//! let b = Compiled::new(Filter::new(Pred::cmp(CmpOp::Gt, byte(1), Val::Const(4)), 1));
//! let bv = BitVectors::build([(0, &a, 0), (1, &b, 5)]);
//! let (mut s, mut out) = (BitScratch::default(), Vec::new());
//! bv.classify(&[1, 9], 2, &mut s, &mut out);
//! out.sort_unstable();
//! assert_eq!(out, [0, 1]);
//! assert_eq!(bv.classify_first(&[1, 9], 2, &mut s), Some(1));
//! bv.classify(&[1], 1, &mut s, &mut out); // byte 1 is past the packet
//! assert_eq!(out, [0]);
//! ```

use crate::merged::{Compiled, Whole};
use crate::tree::field::{FieldId, Fields, Memo};
use crate::tree::label::{Cond, Label};
use crate::tree::node::Item;
use crate::tree::DecisionTree;
use std::cmp::{Ordering, Reverse};

/// A field's value finds its interval in a table of at most
/// `2^TOP_BITS + 2` entries indexed by its top bits, then a binary search
/// between two of them.
const TOP_BITS: u32 = 12;

/// One field's intervals and their vectors, over the words that hold a
/// path testing the field.
#[derive(Clone, Debug)]
struct FieldIndex {
    field: FieldId,
    /// Words (indexes into the packet's vector) with a path testing the
    /// field.
    words: Vec<u32>,
    /// Start of each elementary interval, ascending; the first is 0.
    starts: Vec<u32>,
    /// Where to search: `v >> shift` indexes `top`, whose entries `i`
    /// and `i + 1` bound the intervals that can hold `v` (values past the
    /// table are in the last interval).
    shift: u32,
    top: Vec<u32>,
    /// `starts.len() + 1` rows of `words.len()` words: row 0 for a read
    /// that aborts (the paths that do not test the field), then one row
    /// per interval.
    rows: Vec<u64>,
    /// Conditions with parts that are not intervals, each checked once:
    /// the condition and the bits of its paths (over `words`), cleared
    /// when it fails.
    extra: Vec<(Cond, Vec<u64>)>,
}

impl FieldIndex {
    /// The row of value `v` (or of an abort).
    #[inline]
    fn row(&self, v: Option<u32>) -> &[u64] {
        let n = self.words.len();
        let r = match v {
            None => 0,
            Some(v) => match self.top.get((v >> self.shift) as usize..) {
                Some([lo, hi, ..]) => {
                    let (lo, hi) = (*lo as usize, *hi as usize);
                    lo + self.starts[lo..hi].partition_point(|&s| s <= v)
                }
                _ => self.starts.len(),
            },
        };
        &self.rows[r * n..(r + 1) * n]
    }
}

/// Per-reader memory for [`BitVectors::classify`].
///
/// ```
/// let s = sluice_classifier::bitvec::BitScratch::default();
/// # let _ = s;
/// ```
#[derive(Clone, Debug, Default)]
pub struct BitScratch {
    /// Fields read and words ANDed since the scratch was made: the work
    /// a packet costs, to compare with the tree's visits.
    pub work: BitWork,
    alive: Vec<u64>,
    memo: Memo,
    seen: Vec<u32>,
    epoch: u32,
}

/// Work counted over every packet a [`BitScratch`] served.
///
/// ```
/// let w = sluice_classifier::bitvec::BitWork::default();
/// assert_eq!(w.packets, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitWork {
    /// Packets classified.
    pub packets: u64,
    /// Fields read (fields skipped because their paths were dead are not).
    pub reads: u64,
    /// Words ANDed (a field's words still alive, each time it is read).
    pub words: u64,
}

/// Filters as bit vectors per field (see the module doc).
///
/// ```
/// let bv = sluice_classifier::bitvec::BitVectors::build([]);
/// assert_eq!(bv.stats().paths, 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct BitVectors {
    fields: Fields,
    /// Fields in the tree's order (protocol layer first).
    index: Vec<FieldIndex>,
    /// Every path's bit set.
    all: Vec<u64>,
    /// The filter slot of each bit.
    slot_of: Vec<u32>,
    /// Id and priority of each slot.
    ids: Vec<u32>,
    prios: Vec<i32>,
    /// Whether some filter has several paths (its slot can come up twice).
    several: bool,
    /// Filters that run whole, in winning order: (id, priority, program).
    whole: Vec<(u32, i32, Whole)>,
}

/// Size of a [`BitVectors`].
///
/// ```
/// let s = sluice_classifier::bitvec::BitVectors::build([]).stats();
/// assert_eq!((s.fields, s.bytes), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BitStats {
    /// Accepting paths (bits).
    pub paths: usize,
    /// Fields searched.
    pub fields: usize,
    /// Elementary intervals over all fields.
    pub intervals: usize,
    /// Distinct conditions checked whole (not intervals).
    pub extra: usize,
    /// Bytes of the vectors.
    pub bytes: usize,
}

/// The part of a label that intervals answer: keys, a range, excluded
/// values.
fn interval_part(l: &Label, v: u32) -> bool {
    match l {
        Label::Eq(keys) => keys.binary_search(&v).is_ok(),
        Label::Cond(c) => v >= c.lo && v <= c.hi && c.ne.binary_search(&v).is_err(),
    }
}

/// Whether a condition has parts that intervals do not answer.
fn has_extra(l: &Label) -> bool {
    match l {
        Label::Eq(_) => false,
        Label::Cond(c) => {
            !c.any.is_empty() || c.none != 0 || !c.not_in.is_empty() || c.is_in.is_some()
        }
    }
}

/// Push the start of every interval a label's interval part cuts.
fn cut(l: &Label, starts: &mut Vec<u32>) {
    let mut point = |k: u32| {
        starts.push(k);
        if let Some(n) = k.checked_add(1) {
            starts.push(n);
        }
    };
    match l {
        Label::Eq(keys) => keys.iter().for_each(|&k| point(k)),
        Label::Cond(c) => {
            c.ne.iter().for_each(|&k| point(k));
            starts.push(c.lo);
            if let Some(n) = c.hi.checked_add(1) {
                starts.push(n);
            }
        }
    }
}

impl BitVectors {
    /// Build from `(id, filter, priority)` triples (ids distinct).
    ///
    /// ```
    /// use sluice_classifier::{bitvec::BitVectors, merged::Compiled};
    /// let t = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// assert_eq!(BitVectors::build([(3, &t, 0)]).stats().paths, 1);
    /// ```
    pub fn build<'a>(filters: impl IntoIterator<Item = (u32, &'a Compiled, i32)>) -> BitVectors {
        let mut bv = BitVectors::default();
        let mut paths: Vec<(u32, Vec<Item>)> = Vec::new();
        for (id, c, priority) in filters {
            match c.absorbed_paths() {
                Some(ps) => {
                    let slot = bv.ids.len() as u32;
                    bv.ids.push(id);
                    bv.prios.push(priority);
                    let before = paths.len();
                    for p in ps {
                        if let Some(items) = DecisionTree::fold_path(&mut bv.fields, p) {
                            paths.push((slot, items));
                        }
                    }
                    bv.several |= paths.len() - before > 1;
                }
                None => bv.whole.push((id, priority, c.whole().clone())),
            }
        }
        bv.whole.sort_by_key(|w| (Reverse(w.1), w.0));
        // Paths in the order of their tests: paths of one protocol share
        // words, which a packet of another clears early and then skips.
        let fields = &bv.fields;
        paths.sort_by(|a, b| {
            for (x, y) in a.1.iter().zip(&b.1) {
                let o = fields
                    .order(x.field, y.field)
                    .then_with(|| x.label.cmp(&y.label));
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.1.len().cmp(&b.1.len()).then(a.0.cmp(&b.0))
        });
        let words = paths.len().div_ceil(64);
        bv.all = vec![0; words];
        for b in 0..paths.len() {
            bv.all[b / 64] |= 1 << (b % 64);
        }
        bv.slot_of = paths.iter().map(|p| p.0).collect();
        // Each field's testers: (bit, label).
        let mut testers: Vec<Vec<(u32, &Label)>> = vec![Vec::new(); bv.fields.len()];
        for (bit, (_, items)) in paths.iter().enumerate() {
            for i in items {
                testers[i.field as usize].push((bit as u32, &i.label));
            }
        }
        let mut order: Vec<FieldId> = (0..testers.len() as FieldId)
            .filter(|&f| !testers[f as usize].is_empty())
            .collect();
        order.sort_by(|&a, &b| bv.fields.order(a, b));
        bv.index = order
            .into_iter()
            .map(|f| Self::field_index(f, &testers[f as usize]))
            .collect();
        bv
    }

    fn field_index(field: FieldId, testers: &[(u32, &Label)]) -> FieldIndex {
        let mut words: Vec<u32> = testers.iter().map(|t| t.0 / 64).collect();
        words.dedup(); // bits ascend
        let n = words.len();
        let col = |bit: u32| words.binary_search(&(bit / 64)).expect("a tester's word");
        let mut starts = vec![0];
        testers.iter().for_each(|t| cut(t.1, &mut starts));
        starts.sort_unstable();
        starts.dedup();
        // Row 0: the paths that do not test the field; every row starts
        // from it.
        let mut none = vec![u64::MAX; n];
        for &(bit, _) in testers {
            none[col(bit)] &= !(1 << (bit % 64));
        }
        let mut rows = Vec::with_capacity((starts.len() + 1) * n);
        for _ in 0..=starts.len() {
            rows.extend_from_slice(&none);
        }
        let mut extra = Vec::new();
        for &(bit, label) in testers {
            let (c, m) = (col(bit), 1u64 << (bit % 64));
            let mut set = |v: u32| {
                let r = starts.partition_point(|&s| s <= v);
                rows[r * n + c] |= m;
            };
            match label {
                Label::Eq(keys) => keys.iter().for_each(|&k| set(k)),
                Label::Cond(cond) => {
                    let a = starts.partition_point(|&s| s <= cond.lo) - 1;
                    let b = starts.partition_point(|&s| s <= cond.hi) - 1;
                    for r in a..=b {
                        if interval_part(label, starts[r]) {
                            rows[(r + 1) * n + c] |= m;
                        }
                    }
                    if has_extra(label) {
                        let at = match extra.iter().position(|e: &(Cond, Vec<u64>)| e.0 == *cond) {
                            Some(at) => at,
                            None => {
                                extra.push((cond.clone(), vec![0; n]));
                                extra.len() - 1
                            }
                        };
                        extra[at].1[c] |= m;
                    }
                }
            }
        }
        let last = *starts.last().expect("0 starts every field");
        let shift = (32 - last.leading_zeros()).saturating_sub(TOP_BITS);
        let top = (0..=(last >> shift) as u64 + 1)
            .map(|i| starts.partition_point(|&s| (s as u64) < i << shift) as u32)
            .collect();
        FieldIndex {
            field,
            words,
            starts,
            shift,
            top,
            rows,
            extra,
        }
    }

    /// Sizes (see [`BitStats`]).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::bitvec::BitVectors::build([]).stats().intervals, 0);
    /// ```
    pub fn stats(&self) -> BitStats {
        BitStats {
            paths: self.slot_of.len(),
            fields: self.index.len(),
            intervals: self.index.iter().map(|f| f.starts.len()).sum(),
            extra: self.index.iter().map(|f| f.extra.len()).sum(),
            bytes: self.index.iter().map(|f| f.rows.len() * 8).sum(),
        }
    }

    /// The paths that hold, as bits in `s.alive`.
    fn paths(&self, pkt: &[u8], wirelen: u32, s: &mut BitScratch) {
        s.alive.clear();
        s.alive.extend_from_slice(&self.all);
        s.memo.next_packet(self.fields.len());
        s.work.packets += 1;
        let alive = &mut s.alive;
        for f in &self.index {
            if f.words.iter().all(|&w| alive[w as usize] == 0) {
                continue;
            }
            s.work.reads += 1;
            let v = self.fields.read(f.field, pkt, wirelen, &mut s.memo);
            // Words already dead are not loaded again.
            for (&w, &r) in f.words.iter().zip(f.row(v)) {
                let a = &mut alive[w as usize];
                if *a != 0 {
                    *a &= r;
                    s.work.words += 1;
                }
            }
            if let Some(v) = v {
                for (c, bits) in &f.extra {
                    if !c.holds(v) {
                        for (&w, &b) in f.words.iter().zip(bits) {
                            alive[w as usize] &= !b;
                        }
                    }
                }
            }
        }
    }

    /// Every filter that accepts the packet, as ids, each once, in no
    /// particular order.
    ///
    /// ```
    /// let bv = sluice_classifier::bitvec::BitVectors::build([]);
    /// let mut out = vec![1];
    /// bv.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut BitScratch, out: &mut Vec<u32>) {
        out.clear();
        self.paths(pkt, wirelen, s);
        if self.several {
            s.seen.resize(self.ids.len(), 0);
            s.epoch = s.epoch.wrapping_add(1);
            if s.epoch == 0 {
                s.seen.iter_mut().for_each(|x| *x = 0);
                s.epoch = 1;
            }
        }
        for (w, &word) in s.alive.iter().enumerate() {
            let mut x = word;
            while x != 0 {
                let slot = self.slot_of[w * 64 + x.trailing_zeros() as usize];
                x &= x - 1;
                if self.several {
                    let seen = &mut s.seen[slot as usize];
                    if *seen == s.epoch {
                        continue;
                    }
                    *seen = s.epoch;
                }
                out.push(self.ids[slot as usize]);
            }
        }
        for (id, _, w) in &self.whole {
            if w.run(pkt, wirelen) != 0 {
                out.push(*id);
            }
        }
    }

    /// The accepting filter of highest priority, the lowest id among
    /// equals.
    ///
    /// ```
    /// let bv = sluice_classifier::bitvec::BitVectors::build([]);
    /// assert_eq!(bv.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut BitScratch) -> Option<u32> {
        self.paths(pkt, wirelen, s);
        let mut best: Option<(i32, Reverse<u32>)> = None;
        for (w, &word) in s.alive.iter().enumerate() {
            let mut x = word;
            while x != 0 {
                let slot = self.slot_of[w * 64 + x.trailing_zeros() as usize] as usize;
                x &= x - 1;
                let r = (self.prios[slot], Reverse(self.ids[slot]));
                best = best.max(Some(r));
            }
        }
        for (id, priority, w) in &self.whole {
            let r = (*priority, Reverse(*id));
            if best.is_some_and(|b| r < b) {
                break;
            }
            if w.run(pkt, wirelen) != 0 {
                best = Some(r);
                break;
            }
        }
        best.map(|(_, Reverse(id))| id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{CmpOp, Filter, Pred, Size, Val};

    /// Filters of every test kind on two fields (a byte and a half word,
    /// ranges ending at the field's top and at `u32::MAX`, excluded
    /// values, bit masks, sets), alone and combined with `and`, `or` and
    /// `not`: the vectors accept exactly what each filter does, on every
    /// value of the byte, with the half word present and cut off.
    #[test]
    fn vectors_accept_what_each_filter_does() {
        let byte = || Val::load_abs(0, Size::Byte);
        let half = || Val::load_abs(1, Size::Half);
        let cmp = |op, v: Val, k| Pred::cmp(op, v, Val::Const(k));
        let mut preds = Vec::new();
        // Each kind of test with its own constants, so that no interval
        // bound is made by another kind's.
        for (op, ks) in [
            (CmpOp::Eq, &[0, 1, 0x80, 0xff, 0x100][..]),
            (CmpOp::Gt, &[2, 0x41, 0xfe, u32::MAX][..]),
            (CmpOp::Ge, &[0, 5, 0x90, 0x100][..]),
            (CmpOp::Set, &[0, 0x11, 0x80][..]),
        ] {
            for &k in ks {
                preds.push(cmp(op, byte(), k));
            }
        }
        preds.push(cmp(CmpOp::Eq, half(), 0x0102));
        preds.push(cmp(CmpOp::Gt, half(), 0x8000));
        let mut all = Vec::new();
        for (i, p) in preds.iter().enumerate() {
            let q = &preds[(i * 7 + 3) % preds.len()];
            all.push(p.clone());
            all.push(Pred::not(p.clone()));
            all.push(Pred::and(vec![p.clone(), Pred::not(q.clone())]));
            all.push(Pred::or(vec![p.clone(), q.clone()]));
        }
        // The whole set, then its negations alone: there no range's upper
        // bound is another filter's lower one.
        let negations: Vec<Pred> = preds.iter().map(|p| Pred::not(p.clone())).collect();
        for filters in [all, negations] {
            check(&filters);
        }
    }

    fn check(filters: &[Pred]) {
        let compiled: Vec<Compiled> = filters
            .iter()
            .map(|p| Compiled::new(Filter::new(p.clone(), 1)))
            .collect();
        let bv = BitVectors::build(
            compiled
                .iter()
                .enumerate()
                .map(|(i, c)| (i as u32, c, (i % 5) as i32)),
        );
        let (mut s, mut out) = (BitScratch::default(), Vec::new());
        for v in 0..=255u8 {
            for pkt in [&[v, 1, 2][..], &[v][..]] {
                let want: Vec<u32> = compiled
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.whole().run(pkt, pkt.len() as u32) != 0)
                    .map(|(i, _)| i as u32)
                    .collect();
                bv.classify(pkt, pkt.len() as u32, &mut s, &mut out);
                out.sort_unstable();
                assert_eq!(out, want, "byte {v}, {} bytes", pkt.len());
                let first = want.iter().copied().max_by_key(|&i| (i % 5, Reverse(i)));
                assert_eq!(bv.classify_first(pkt, pkt.len() as u32, &mut s), first);
            }
        }
        assert!(s.work.packets == 512 * 2 && s.work.reads > 0);
    }
}
