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
//! packet reads each field once, finds its interval (a table of the
//! value's top bits, then a short binary search) and ANDs the interval's
//! vector into the paths still alive; the bits left at
//! the end are the paths that hold, and their filters are the packet's.
//! A read that aborts leaves only the paths that do not test the field,
//! as the tree's skip edge does.
//!
//! Two of the aggregated bit vector paper's (ABV) ideas keep the work down
//! where a field is tested by few paths: paths are numbered in the order
//! of their tests, so paths of the same protocol share words, and a field
//! stores and ANDs only the words that hold a path testing it, does not
//! load a word already dead, and is not read at all once all its words
//! are. Parts of a condition that are not intervals (bit masks, large
//! sets) are checked after the AND, once per distinct condition.
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

use crate::merged::Compiled;
use crate::pathset::{Dedup, PathSet};
use crate::tree::field::{FieldId, Memo};
use crate::tree::label::{Cond, Label};
use std::cmp::Ordering;

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
    dedup: Dedup,
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
    set: PathSet,
    /// Fields in the tree's order (protocol layer first).
    index: Vec<FieldIndex>,
    /// Every path's bit set.
    all: Vec<u64>,
    /// The filter slot of each bit.
    slot_of: Vec<u32>,
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

/// Whether a condition has parts that intervals do not answer.
pub(crate) fn has_extra(l: &Label) -> bool {
    match l {
        Label::Eq(_) => false,
        Label::Cond(c) => {
            !c.any.is_empty() || c.none != 0 || !c.not_in.is_empty() || c.is_in.is_some()
        }
    }
}

/// Push the start of every interval a label's interval part cuts.
pub(crate) fn cut(l: &Label, starts: &mut Vec<u32>) {
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

/// Call `f(a, b)` for each run `a..=b` of the elementary intervals
/// (indexes into `starts`, which holds every start [`cut`] pushed for
/// `l`) where `l`'s interval part holds.
pub(crate) fn spans(l: &Label, starts: &[u32], mut f: impl FnMut(usize, usize)) {
    let at = |v: u32| starts.partition_point(|&s| s <= v) - 1;
    match l {
        Label::Eq(keys) => keys.iter().for_each(|&k| f(at(k), at(k))),
        Label::Cond(c) if c.lo <= c.hi => {
            let (mut from, to) = (at(c.lo), at(c.hi));
            // Each excluded value is an interval of its own.
            for r in
                c.ne.iter()
                    .filter(|&&k| c.lo <= k && k <= c.hi)
                    .map(|&k| at(k))
            {
                if from < r {
                    f(from, r - 1);
                }
                from = r + 1;
            }
            if from <= to {
                f(from, to);
            }
        }
        Label::Cond(_) => {}
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
        let mut set = PathSet::gather(filters);
        let mut paths = std::mem::take(&mut set.paths);
        // Paths in the order of their tests: paths of one protocol share
        // words, which a packet of another clears early and then skips.
        let fields = &set.fields;
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
        let mut bv = BitVectors {
            set,
            ..BitVectors::default()
        };
        let words = paths.len().div_ceil(64);
        bv.all = vec![0; words];
        for b in 0..paths.len() {
            bv.all[b / 64] |= 1 << (b % 64);
        }
        bv.slot_of = paths.iter().map(|p| p.0).collect();
        // Each field's testers: (bit, label).
        let mut testers: Vec<Vec<(u32, &Label)>> = vec![Vec::new(); bv.set.fields.len()];
        for (bit, (_, items)) in paths.iter().enumerate() {
            for i in items {
                testers[i.field as usize].push((bit as u32, &i.label));
            }
        }
        let mut order: Vec<FieldId> = (0..testers.len() as FieldId)
            .filter(|&f| !testers[f as usize].is_empty())
            .collect();
        order.sort_by(|&a, &b| bv.set.fields.order(a, b));
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
            // Row `r + 1` is interval `r`'s.
            spans(label, &starts, |a, b| {
                (a..=b).for_each(|r| rows[(r + 1) * n + c] |= m);
            });
            if let Label::Cond(cond) = label {
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
        s.memo.next_packet(self.set.fields.len());
        s.work.packets += 1;
        let alive = &mut s.alive;
        for f in &self.index {
            if f.words.iter().all(|&w| alive[w as usize] == 0) {
                continue;
            }
            s.work.reads += 1;
            let v = self.set.fields.read(f.field, pkt, wirelen, &mut s.memo);
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
        self.paths(pkt, wirelen, s);
        let slots = alive_slots(&s.alive, &self.slot_of);
        self.set.report(slots, pkt, wirelen, &mut s.dedup, out);
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
        let slots = alive_slots(&s.alive, &self.slot_of);
        self.set.first(slots, pkt, wirelen)
    }
}

/// The slots of the bits set in `alive`.
fn alive_slots<'a>(alive: &'a [u64], slot_of: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
    alive.iter().enumerate().flat_map(move |(w, &word)| {
        let mut x = word;
        std::iter::from_fn(move || {
            (x != 0).then(|| {
                let b = x.trailing_zeros() as usize;
                x &= x - 1;
                slot_of[w * 64 + b]
            })
        })
    })
}
