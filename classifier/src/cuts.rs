//! HiCuts (Gupta and McKeown) over the tree's own fields and folded
//! paths: the geometric design issue 33 asked to be measured against the
//! decision tree ([`crate::tree`]), kept as a reference engine in Rust.
//!
//! The dimensions are the packet's loads without their masks (so that
//! prefixes of every length on one address are ranges of one dimension)
//! and the tree's other fields. Each accepting path is a box: on each
//! dimension it tests, the range its labels allow (a superset where a
//! mask is not a prefix); on the others, every value. A node cuts one
//! dimension's range into equal pieces (a power of two of them, up to 64)
//! and sends each path to every piece its box meets, so a path that
//! leaves the dimension open is copied into every piece; a read that
//! aborts goes to a child of the paths that do not test it. A node of at
//! most [`BINTH`] paths, one no cut shrinks, or one made after the copies
//! reach [`BUDGET`] times the paths is a leaf whose paths are checked one
//! by one, exactly. The dimension and the number of pieces are HiCuts'
//! heuristic: the most pieces whose copies stay within [`SPFAC`] times
//! the node's paths, on the dimension whose largest piece is smallest.
//!
//! ```
//! use sluice_classifier::cuts::{CutScratch, Cuts};
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{CmpOp, Filter, Pred, Size, Val};
//! let byte = |o| Val::load_abs(o, Size::Byte);
//! let a = Compiled::new(Filter::new(Pred::eq(byte(0), 1), 1));
//! let b = Compiled::new(Filter::new(Pred::cmp(CmpOp::Gt, byte(1), Val::Const(4)), 1));
//! let c = Cuts::build([(0, &a, 0), (1, &b, 5)]);
//! let (mut s, mut out) = (CutScratch::default(), Vec::new());
//! c.classify(&[1, 9], 2, &mut s, &mut out);
//! out.sort_unstable();
//! assert_eq!(out, [0, 1]);
//! assert_eq!(c.classify_first(&[1, 9], 2, &mut s), Some(1));
//! c.classify(&[1], 1, &mut s, &mut out); // byte 1 is past the packet
//! assert_eq!(out, [0]);
//! ```

use crate::merged::Compiled;
use crate::pathset::{Dedup, PathSet};
use crate::tree::field::{load_at, FieldId, Fields, Memo, Read};
use crate::tree::label::Label;
use std::collections::{HashMap, VecDeque};

/// A node of at most this many paths is a leaf.
pub const BINTH: usize = 8;

/// A cut may copy the node's paths into its pieces up to this many times
/// over (counting each piece once more).
pub const SPFAC: usize = 4;

/// At most `2^MAX_CUT_BITS` pieces a node.
const MAX_CUT_BITS: u32 = 6;

/// Past this depth every node is a leaf.
const MAX_DEPTH: u32 = 24;

/// Once the pieces made hold this many times the paths (plus 4,096),
/// every further node is a leaf: sets whose paths leave most fields open
/// would otherwise be copied without end.
pub const BUDGET: usize = 16;

/// The 4,096 of [`BUDGET`].
const SPARE: usize = 4096;

/// What a node cuts: a load without its mask (so that a prefix of any
/// length is a range of the same dimension), or any other field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Dim {
    /// `size` bytes at `off`, or at `off` past the IPv4 header at `hdr`.
    Load {
        hdr: Option<u32>,
        off: u32,
        size: u8,
    },
    /// A field read as the tree reads it.
    Field(FieldId),
}

/// A path's box: per dimension, the values it may take (a superset for
/// masks and conditions; the leaves check exactly).
type Box = Vec<(u32, u32, u32)>;

#[derive(Clone, Debug)]
enum Node {
    /// Paths (indexes) checked one by one.
    Leaf(Vec<u32>),
    /// Piece `(v - lo) >> shift` of the dimension's value `v`, or `abort`.
    Cut {
        dim: u32,
        lo: u32,
        shift: u32,
        children: Vec<u32>,
        abort: u32,
    },
}

/// Per-reader memory for [`Cuts::classify`].
///
/// ```
/// let s = sluice_classifier::cuts::CutScratch::default();
/// assert_eq!(s.work.packets, 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct CutScratch {
    /// Work counted since the scratch was made.
    pub work: CutWork,
    memo: Memo,
    dedup: Dedup,
    slots: Vec<u32>,
}

/// Work counted over every packet a [`CutScratch`] served.
///
/// ```
/// assert_eq!(sluice_classifier::cuts::CutWork::default().cuts, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutWork {
    /// Packets classified.
    pub packets: u64,
    /// Cut nodes passed.
    pub cuts: u64,
    /// Paths checked at leaves.
    pub checked: u64,
}

/// Size of a [`Cuts`].
///
/// ```
/// let s = sluice_classifier::cuts::Cuts::build([]).stats();
/// assert_eq!((s.paths, s.leaves), (0, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutStats {
    /// Accepting paths.
    pub paths: usize,
    /// Cut nodes.
    pub cuts: usize,
    /// Leaves.
    pub leaves: usize,
    /// Paths held by all leaves (copies counted).
    pub entries: usize,
    /// Approximate bytes.
    pub bytes: usize,
}

/// Filters cut into boxes (see the module doc).
///
/// ```
/// assert_eq!(sluice_classifier::cuts::Cuts::build([]).stats().cuts, 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Cuts {
    set: PathSet,
    dims: Vec<Dim>,
    /// Each path's box, by dimension index.
    boxes: Vec<Box>,
    nodes: Vec<Node>,
    /// Paths held by the pieces made so far (while building).
    made: usize,
}

/// The widest value of a load of `size` bytes.
fn widest(size: u8) -> u32 {
    match size {
        1 => 0xff,
        2 => 0xffff,
        _ => u32::MAX,
    }
}

/// The dimension an item tests and the values it allows there (a
/// superset; an empty range when it allows none).
fn item_box(fields: &Fields, field: FieldId, label: &Label) -> (Dim, u32, u32) {
    // The values the label allows, as one range.
    let (mut lo, mut hi) = match label {
        Label::Eq(keys) => keys
            .first()
            .zip(keys.last())
            .map_or((1, 0), |(a, b)| (*a, *b)),
        Label::Cond(c) => (c.lo, c.hi),
    };
    let mut dim = Dim::Field(field);
    if let Read::Load {
        hdr,
        off,
        size,
        mask,
    } = fields.how(field)
    {
        // A prefix mask (ones, then zeros): `v & mask` in lo..=hi means v
        // in lo..=(hi | low), a range of the unmasked load.
        let low = !*mask & widest(*size);
        if low == widest(*size) || (low + 1).is_power_of_two() {
            dim = Dim::Load {
                hdr: *hdr,
                off: *off,
                size: *size,
            };
            hi |= low;
        }
    }
    let (a, b) = full_range(dim, fields);
    lo = lo.max(a);
    (dim, lo, hi.min(b))
}

/// The values a dimension can take.
fn full_range(dim: Dim, fields: &Fields) -> (u32, u32) {
    match dim {
        Dim::Load { size, .. } => (0, widest(size)),
        Dim::Field(f) => match fields.how(f) {
            Read::Const(k) => (*k, *k),
            Read::Pred(_) => (0, 1),
            Read::Load { size, mask, .. } => (0, widest(*size) & *mask),
            Read::Len | Read::Generic(_) => (0, u32::MAX),
        },
    }
}

/// A path's range on dimension `d`, if it tests it.
fn range_of(b: &Box, d: u32) -> Option<(u32, u32)> {
    b.iter().find(|x| x.0 == d).map(|x| (x.1, x.2))
}

/// The shift that cuts `lo..=hi` into at most `2^bits` pieces.
fn shift_for(lo: u32, hi: u32, bits: u32) -> u32 {
    let span = u64::from(hi - lo) + 1;
    let need = 64 - (span - 1).leading_zeros();
    need.saturating_sub(bits)
}

impl Cuts {
    /// Build from `(id, filter, priority)` triples (ids distinct).
    ///
    /// ```
    /// use sluice_classifier::{cuts::Cuts, merged::Compiled};
    /// let t = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// assert_eq!(Cuts::build([(3, &t, 0)]).stats().paths, 1);
    /// ```
    pub fn build<'a>(filters: impl IntoIterator<Item = (u32, &'a Compiled, i32)>) -> Cuts {
        let mut c = Cuts {
            set: PathSet::gather(filters),
            ..Cuts::default()
        };
        let mut dim_ids: HashMap<Dim, u32> = HashMap::new();
        let mut all = Vec::new();
        for (p, (_, items)) in c.set.paths.iter().enumerate() {
            let mut b: Box = Vec::new();
            for i in items {
                let (dim, lo, hi) = item_box(&c.set.fields, i.field, &i.label);
                let d = *dim_ids.entry(dim).or_insert_with(|| {
                    c.dims.push(dim);
                    c.dims.len() as u32 - 1
                });
                match b.iter_mut().find(|x| x.0 == d) {
                    Some(x) => {
                        x.1 = x.1.max(lo);
                        x.2 = x.2.min(hi);
                    }
                    None => b.push((d, lo, hi)),
                }
            }
            // A box empty on some dimension holds no packet.
            if b.iter().all(|x| x.1 <= x.2) {
                all.push(p as u32);
            }
            c.boxes.push(b);
        }
        c.grow(all);
        c
    }

    /// A dimension's range at this node.
    fn range(&self, ranges: &HashMap<u32, (u32, u32)>, d: u32) -> (u32, u32) {
        ranges
            .get(&d)
            .copied()
            .unwrap_or_else(|| full_range(self.dims[d as usize], &self.set.fields))
    }

    /// A dimension's value on a packet (`None`: the read aborts).
    fn read(&self, d: u32, pkt: &[u8], wirelen: u32, memo: &mut Memo) -> Option<u32> {
        match self.dims[d as usize] {
            Dim::Load { hdr, off, size } => load_at(pkt, hdr, off, size),
            Dim::Field(f) => self.set.fields.read(f, pkt, wirelen, memo),
        }
    }

    /// HiCuts' choice for `paths`: (dimension, shift), if a cut makes
    /// every piece smaller than the node.
    fn choose(&self, paths: &[u32], ranges: &HashMap<u32, (u32, u32)>) -> Option<(u32, u32)> {
        let mut fields: Vec<u32> = paths
            .iter()
            .flat_map(|&p| self.boxes[p as usize].iter().map(|x| x.0))
            .collect();
        fields.sort_unstable();
        fields.dedup();
        let mut best: Option<(usize, u32, u32)> = None;
        for f in fields {
            let (lo, hi) = self.range(ranges, f);
            if lo == hi {
                continue;
            }
            // Each path's hull on the field (None: it leaves it open).
            let hulls: Vec<Option<(u32, u32)>> = paths
                .iter()
                .map(|&p| {
                    range_of(&self.boxes[p as usize], f).map(|(a, b)| {
                        let (a, b) = (a.max(lo), b.min(hi));
                        if a <= b {
                            (a, b)
                        } else {
                            (lo, lo)
                        }
                    })
                })
                .collect();
            let mut chosen = None;
            for bits in 1..=MAX_CUT_BITS {
                let shift = shift_for(lo, hi, bits);
                let pieces = ((hi - lo) >> shift) as usize + 1;
                let mut diff = vec![0i64; pieces + 1];
                for h in &hulls {
                    let (a, b) = match h {
                        Some((a, b)) => {
                            (((a - lo) >> shift) as usize, ((b - lo) >> shift) as usize)
                        }
                        None => (0, pieces - 1),
                    };
                    diff[a] += 1;
                    diff[b + 1] -= 1;
                }
                let mut run = 0;
                let (mut total, mut largest) = (0usize, 0usize);
                for d in &diff[..pieces] {
                    run += d;
                    total += run as usize;
                    largest = largest.max(run as usize);
                }
                if total + pieces > SPFAC * paths.len() && chosen.is_some() {
                    break;
                }
                chosen = Some((largest, shift));
                if shift == 0 {
                    break;
                }
            }
            if let Some((largest, shift)) = chosen {
                if best.map_or(true, |b| largest < b.0) {
                    best = Some((largest, f, shift));
                }
            }
        }
        best.filter(|b| b.0 < paths.len()).map(|b| (b.1, b.2))
    }

    /// Build the nodes breadth first, so that the budget of copies is
    /// shared by the whole of each level rather than spent on the first
    /// branches.
    fn grow(&mut self, all: Vec<u32>) {
        type Ranges = HashMap<u32, (u32, u32)>;
        let mut queue: VecDeque<(u32, Vec<u32>, Ranges, u32)> = VecDeque::new();
        self.nodes.push(Node::Leaf(Vec::new()));
        queue.push_back((0, all, Ranges::new(), 0));
        while let Some((id, paths, ranges, depth)) = queue.pop_front() {
            let spent = self.made > BUDGET * self.set.paths.len() + SPARE;
            let cut = match paths.len() <= BINTH || depth >= MAX_DEPTH || spent {
                true => None,
                false => self.choose(&paths, &ranges),
            };
            let Some((f, shift)) = cut else {
                self.nodes[id as usize] = Node::Leaf(paths);
                continue;
            };
            let (lo, hi) = self.range(&ranges, f);
            let pieces = ((hi - lo) >> shift) + 1;
            let mut children = Vec::with_capacity(pieces as usize);
            let mut child = |c: &mut Cuts, paths: Vec<u32>, ranges: Ranges| {
                let at = c.nodes.len() as u32;
                c.nodes.push(Node::Leaf(Vec::new()));
                c.made += paths.len();
                queue.push_back((at, paths, ranges, depth + 1));
                at
            };
            for i in 0..pieces {
                let a = lo + (i << shift);
                let b = if i + 1 == pieces {
                    hi
                } else {
                    a + ((1u32 << shift) - 1)
                };
                let inside: Vec<u32> = paths
                    .iter()
                    .copied()
                    .filter(|&p| {
                        range_of(&self.boxes[p as usize], f)
                            .map_or(true, |(x, y)| x.max(a) <= y.min(b))
                    })
                    .collect();
                let mut r = ranges.clone();
                r.insert(f, (a, b));
                children.push(child(self, inside, r));
            }
            let open: Vec<u32> = paths
                .iter()
                .copied()
                .filter(|&p| range_of(&self.boxes[p as usize], f).is_none())
                .collect();
            let abort = child(self, open, ranges);
            self.nodes[id as usize] = Node::Cut {
                dim: f,
                lo,
                shift,
                children,
                abort,
            };
        }
    }

    /// Sizes (see [`CutStats`]).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::cuts::Cuts::build([]).stats().entries, 0);
    /// ```
    pub fn stats(&self) -> CutStats {
        let mut s = CutStats {
            paths: self.set.paths.len(),
            ..CutStats::default()
        };
        for n in &self.nodes {
            match n {
                Node::Leaf(ps) => {
                    s.leaves += 1;
                    s.entries += ps.len();
                    s.bytes += 32 + 4 * ps.len();
                }
                Node::Cut { children, .. } => {
                    s.cuts += 1;
                    s.bytes += 48 + 4 * children.len();
                }
            }
        }
        s
    }

    /// The slots of the paths that hold, into `s.slots` (a filter may
    /// come up more than once).
    fn slots(&self, pkt: &[u8], wirelen: u32, s: &mut CutScratch) {
        s.memo.next_packet(self.set.fields.len());
        s.slots.clear();
        s.work.packets += 1;
        let mut n = 0;
        while let Some(node) = self.nodes.get(n) {
            match node {
                Node::Leaf(ps) => {
                    s.work.checked += ps.len() as u64;
                    self.set
                        .push_holding(ps, pkt, wirelen, &mut s.memo, &mut s.slots);
                    return;
                }
                Node::Cut {
                    dim,
                    lo,
                    shift,
                    children,
                    abort,
                } => {
                    s.work.cuts += 1;
                    let next = match self.read(*dim, pkt, wirelen, &mut s.memo) {
                        None => Some(abort),
                        // The node's range holds every value that leads
                        // here; anything else would be a bug, found by
                        // the tests as a missed match.
                        Some(v) => v
                            .checked_sub(*lo)
                            .and_then(|d| children.get((d >> shift) as usize)),
                    };
                    match next {
                        Some(&c) => n = c as usize,
                        None => return,
                    }
                }
            }
        }
    }

    /// Every filter that accepts the packet, as ids, each once, in no
    /// particular order.
    ///
    /// ```
    /// let c = sluice_classifier::cuts::Cuts::build([]);
    /// let mut out = vec![1];
    /// c.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut CutScratch, out: &mut Vec<u32>) {
        self.slots(pkt, wirelen, s);
        let CutScratch { slots, dedup, .. } = s;
        self.set
            .report(slots.iter().copied(), pkt, wirelen, dedup, out);
    }

    /// The accepting filter of highest priority, the lowest id among
    /// equals.
    ///
    /// ```
    /// let c = sluice_classifier::cuts::Cuts::build([]);
    /// assert_eq!(c.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut CutScratch) -> Option<u32> {
        self.slots(pkt, wirelen, s);
        self.set.first(s.slots.iter().copied(), pkt, wirelen)
    }
}
