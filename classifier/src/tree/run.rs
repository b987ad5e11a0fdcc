//! Classifying a packet with the tree, in Rust: the reference the native
//! code must agree with.
//!
//! From the root, a node reports its leaf, reads its field once, looks
//! the value (with the fields of each table after it) up in each of its
//! tables and follows the hits, follows every condition edge the value
//! meets, and then goes on along its skip edge. A read that aborts
//! follows nothing but the skip edge: every path through the node's
//! tables and conditions needs that value. Each filter found is
//! reported once, however many of its paths hold.
//!
//! ```
//! use sluice_classifier::tree::DecisionTree;
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! let mut t = DecisionTree::default();
//! t.insert(7, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
//! let mut out = Vec::new();
//! t.classify(&[1], 1, &mut Default::default(), &mut out);
//! assert_eq!(out, vec![7]);
//! ```

use super::field::{FieldId, Fields, Memo};
use super::node::{NodeId, Nodes, MAX_TUPLE, NONE};

/// Reusable per-reader memory for classifying with a
/// [`DecisionTree`](super::DecisionTree).
///
/// ```
/// use sluice_classifier::{merged::Compiled, tree::{DecisionTree, Scratch}};
/// use sluice_ir::{Filter, Pred, Size, Val};
/// let mut t = DecisionTree::default();
/// t.insert(5, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1)), 0);
/// // One scratch serves packet after packet.
/// let (mut s, mut out) = (Scratch::default(), Vec::new());
/// t.classify(&[7], 1, &mut s, &mut out);
/// assert_eq!(out, [5]);
/// t.classify(&[8], 1, &mut s, &mut out);
/// assert!(out.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    pub(crate) memo: Memo,
    /// The slots of the packet's filters as found (a filter may be found
    /// twice).
    pub(crate) hits: Vec<u32>,
    /// Which filters a packet has reported already.
    pub(crate) dedup: Dedup,
}

/// Per-reader memory for reporting each filter of a packet once, however
/// many of its paths are found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dedup {
    /// Per filter slot: the epoch it was last reported in.
    seen: Vec<u32>,
    epoch: u32,
}

impl Dedup {
    /// Start a packet over `slots` filter slots.
    pub(crate) fn start(&mut self, slots: usize) {
        if self.seen.len() < slots {
            self.seen.resize(slots, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.seen.iter_mut().for_each(|s| *s = 0);
            self.epoch = 1;
        }
    }

    /// True the first time `slot` is offered since [`Dedup::start`].
    #[inline]
    pub(crate) fn first_time(&mut self, slot: u32) -> bool {
        let s = &mut self.seen[slot as usize];
        let first = *s != self.epoch;
        *s = self.epoch;
        first
    }
}

impl Scratch {
    /// The per-packet memory of computed fields (for engines that read
    /// fields themselves).
    ///
    /// ```
    /// let mut s = sluice_classifier::tree::Scratch::default();
    /// s.memo().next_packet(1);
    /// assert_eq!(s.memo().cached(0, || Some(4)), Some(4));
    /// assert_eq!(s.memo().cached(0, || None), Some(4)); // the same memory
    /// ```
    pub fn memo(&mut self) -> &mut Memo {
        &mut self.memo
    }

    /// Start a packet.
    pub(crate) fn next_packet(&mut self) {
        self.memo.next_packet(0);
        self.hits.clear();
    }
}

/// What a walk records of the fields it reads: nothing
/// ([`visit`]), or each field's id ([`Vec<FieldId>`], for the flow
/// cache's key: the walk's answer depends on nothing else).
pub(crate) trait Trace {
    fn read(&mut self, field: FieldId);
}

impl Trace for () {
    #[inline(always)]
    fn read(&mut self, _: FieldId) {}
}

impl Trace for Vec<FieldId> {
    #[inline]
    fn read(&mut self, field: FieldId) {
        self.push(field);
    }
}

/// Add the slot of every filter found below node `n` to `out`.
pub(crate) fn visit(
    fields: &Fields,
    nodes: &Nodes,
    n: NodeId,
    pkt: &[u8],
    wirelen: u32,
    memo: &mut Memo,
    out: &mut Vec<u32>,
) {
    visit_traced(fields, nodes, n, pkt, wirelen, memo, out, &mut ());
}

/// [`visit`], telling `trace` of every field read.
#[allow(clippy::too_many_arguments)]
pub(crate) fn visit_traced<T: Trace>(
    fields: &Fields,
    nodes: &Nodes,
    mut n: NodeId,
    pkt: &[u8],
    wirelen: u32,
    memo: &mut Memo,
    out: &mut Vec<u32>,
    trace: &mut T,
) {
    loop {
        let node = nodes.get(n);
        out.extend(node.leaf.iter().map(|e| e.slot));
        if let Some(field) = node.field {
            trace.read(field);
            if let Some(v) = fields.read(field, pkt, wirelen, memo) {
                for t in &node.tuples {
                    let mut key = [0u32; MAX_TUPLE];
                    key[0] = v;
                    let w = t.fields.len();
                    let mut loaded = true;
                    for (k, f) in key[1..w].iter_mut().zip(&t.fields[1..]) {
                        trace.read(*f);
                        match fields.read(*f, pkt, wirelen, memo) {
                            Some(x) => *k = x,
                            None => {
                                loaded = false;
                                break;
                            }
                        }
                    }
                    if loaded {
                        if let Some(c) = t.child(&key[..w]) {
                            visit_traced(fields, nodes, c, pkt, wirelen, memo, out, trace);
                        }
                    }
                }
                for (c, child) in &node.conds {
                    if c.holds(v) {
                        visit_traced(fields, nodes, *child, pkt, wirelen, memo, out, trace);
                    }
                }
            }
        }
        n = node.skip;
        if n == NONE {
            return;
        }
    }
}
