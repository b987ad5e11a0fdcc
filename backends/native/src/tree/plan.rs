//! What the code generator makes of a decision tree: one machine function
//! per *unit*, a part of the tree, as plain data.
//!
//! A unit starts at a node (the root, or a node reached through a large
//! table) and takes in every node reached from it by a skip edge, a
//! condition edge or a small table's key (at most [`SMALL_KEYS`] keys:
//! compares against immediates, by vector or by binary search), up to
//! [`MAX_NODES`] nodes. A larger table is probed in the code, in the tree's own
//! [`KeyTable`] (the table stays data, so a key added to it needs no new
//! code): a key whose child only accepts one filter reports it from the
//! slot's datum, any other child is a unit of its own, called through a
//! table of functions by node ([`Child::Unit`]), as is a node past the size
//! limit. A change to the tree replans only the units whose nodes changed,
//! and compiles only those whose plan is not the same as before.
//!
//! ```
//! use sluice_classifier::tree::DecisionTree;
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_native::tree::plan::{Ids, Plan};
//! let mut t = DecisionTree::default();
//! t.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
//! let mut ids = Ids::default();
//! let p = Plan::unit(&t, 0, &mut ids);
//! assert_eq!(p.members, vec![0, 1]);
//! ```

use sluice_classifier::table::KeyTable;
use sluice_classifier::tree::field::{FieldId, Read};
use sluice_classifier::tree::label::Cond;
use sluice_classifier::tree::node::{summary, NodeId, Tuple, NONE};
use sluice_classifier::tree::DecisionTree;
use sluice_ir::{CmpOp, Pred, Val};

/// Tables with at most this many keys are compiled as a search of
/// compares against immediates, their children in place (16 rather than
/// 8: a broad mix 3-6% faster, 600 corpus filters 9%, where a probe and a
/// call per child cost more than four or five compares). The table's own
/// threshold for sparse slots, so that every table probed as data is
/// sparse.
pub const SMALL_KEYS: usize = sluice_classifier::table::SPARSE_KEYS;

/// At least this many disjoint range conditions on one node are found by a
/// binary search.
pub const RANGE_SEARCH: usize = 6;

/// The most nodes compiled into one unit; the nodes past it start units
/// of their own. A call between units costs a few nanoseconds: with 256
/// a packet of a 956-filter broad mix made 25.9 calls and took 682 ns,
/// with 1,024 it made 12.0 and took 619 ns. Compiling is more than linear
/// in a function's size, though: at 512 the broad mix's first build
/// compiles in 129 ms of CPU instead of 155-170 (its largest function
/// took 48 ms alone) and runs as fast (docs/merging.md).
pub const MAX_NODES: usize = 512;

/// The most nodes compiled into the root's unit, which runs for every
/// packet and is compiled again whenever a filter of a new shape changes
/// the top of the tree. 128 keeps most of a broad mix's chain of first
/// fields in one function (956 filters: 425-435 ns a packet against
/// 475-484 at 16). While the worker compiles it the root runs through
/// the walk in Rust, yet with a filter of a new shape coming or going
/// every 10 ms a reader still ran faster than at 16 (806-812 against
/// 858-883 ns a packet; docs/merging.md).
pub const MAX_ROOT_NODES: usize = 128;

/// A part of the tree of at most this many nodes that a unit reaches
/// past its size limit is compiled in place, not called (see
/// [`Plan::unit`]).
pub const SMALL_PART: usize = 16;

/// A node with more edges than this (conditions and small tables' keys)
/// starts a unit of its own wherever it is reached: its code is large
/// (a compare and a call or a subtree per edge), so a unit above it that
/// changes, the root's above all, is not slowed by compiling it again.
pub const MAX_FANOUT: usize = 24;

/// How the code reads a field.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum FieldRead {
    /// `size` bytes at `off` (past the IPv4 header at `hdr` if given), then `& mask`.
    Load {
        /// Offset of the IPv4 header's first byte, for an offset behind it.
        hdr: Option<u32>,
        /// The offset.
        off: u32,
        /// 1, 2 or 4.
        size: u8,
        /// Applied after the load.
        mask: u32,
    },
    /// The wire length.
    Len,
    /// A constant.
    Const(u32),
    /// Any other IR value, computed in the code (a load at a computed
    /// address, arithmetic).
    Val(Val),
    /// A comparison of two values, as 1 or 0.
    Cmp(CmpOp, Val, Val),
    /// Anything else (`protochain`): the tree's own reader, through a call.
    Call(FieldId),
}

impl FieldRead {
    fn of(t: &DecisionTree, f: FieldId) -> FieldRead {
        match t.fields().how(f) {
            Read::Load {
                hdr,
                off,
                size,
                mask,
            } => FieldRead::Load {
                hdr: *hdr,
                off: *off,
                size: *size,
                mask: *mask,
            },
            Read::Len => FieldRead::Len,
            Read::Const(k) => FieldRead::Const(*k),
            Read::Generic(v) => FieldRead::Val(v.clone()),
            Read::Pred(Pred::Cmp { op, lhs, rhs }) => FieldRead::Cmp(*op, lhs.clone(), rhs.clone()),
            Read::Pred(_) => FieldRead::Call(f),
        }
    }
}

/// Where an edge leads.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Child {
    /// Compiled in place.
    Node(Box<PNode>),
    /// The unit of this node, called.
    Unit(u32),
}

/// A table compiled as compares.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Small {
    /// The fields after the node's own (the key's other words).
    pub more: Vec<FieldRead>,
    /// Each key and its child.
    pub keys: Vec<(Vec<u32>, Child)>,
}

/// A table probed in memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Big {
    /// The fields after the node's own.
    pub more: Vec<FieldRead>,
    /// The table's number in [`Ids::tables`].
    pub table: u32,
}

/// A condition edge: every part that is there must hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PCond {
    /// Smallest value allowed, when not 0.
    pub lo: Option<u32>,
    /// Largest value allowed, when not `u32::MAX`.
    pub hi: Option<u32>,
    /// Bits that must be clear, when some.
    pub none: Option<u32>,
    /// Masks of which some bit must be set.
    pub any: Vec<u32>,
    /// Values excluded.
    pub ne: Vec<u32>,
    /// The condition's number in [`Ids::sets`] when it has set parts,
    /// which the code checks with a call.
    pub sets: Option<u32>,
    /// Where it leads.
    pub child: Child,
}

impl PCond {
    fn of(c: &Cond, sets: Option<u32>, child: Child) -> PCond {
        PCond {
            lo: (c.lo != 0).then_some(c.lo),
            hi: (c.hi != u32::MAX).then_some(c.hi),
            none: (c.none != 0).then_some(c.none),
            any: c.any.clone(),
            ne: c.ne.clone(),
            sets,
            child,
        }
    }
}

/// Values from `start` up to the next segment's start.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The segment's first value.
    pub start: u32,
    /// The children of the ranges that cover it.
    pub covers: Vec<Child>,
}

/// One node as compiled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PNode {
    /// Slots of the filters accepted here, each with whether its filter
    /// may be found on another path too (then the code reports it only
    /// the first time).
    pub leaf: Vec<(u32, bool)>,
    /// The field tested.
    pub field: Option<FieldRead>,
    /// Tables compiled as compares.
    pub small: Vec<Small>,
    /// Tables probed.
    pub big: Vec<Big>,
    /// Condition edges.
    pub conds: Vec<PCond>,
    /// Condition edges that are only ranges, when there are many: the
    /// values cut into segments at every range's ends, ascending, each
    /// with the children of the ranges that cover it, found by a binary
    /// search instead of testing every range (port blocks by the
    /// hundred). A range over several segments has its child called as a
    /// unit from each.
    pub segments: Vec<Segment>,
    /// The skip edge.
    pub skip: Option<Child>,
}

/// Numbers for the probed tables and the conditions with set parts of
/// every unit, by where they are in the tree (node, index in the node),
/// kept while some unit uses them so that an unchanged unit plans the
/// same as before.
///
/// ```
/// let mut ids = sluice_native::tree::plan::Ids::default();
/// let a = ids.tables.take((3, 0));
/// assert_eq!(ids.tables.take((3, 0)), a);
/// ids.tables.put((3, 0));
/// ids.tables.put((3, 0));
/// assert!(ids.tables.all()[a].is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Ids {
    /// Probed tables.
    pub tables: Numbers,
    /// Conditions with set parts.
    pub sets: Numbers,
}

/// Reference-counted numbers for places in the tree.
#[derive(Clone, Debug, Default)]
pub struct Numbers {
    by_place: rustc_hash::FxHashMap<(NodeId, usize), (usize, u32)>,
    places: Vec<Option<(NodeId, usize)>>,
    free: Vec<usize>,
}

impl Numbers {
    /// The number of a place, counting one more use.
    pub fn take(&mut self, at: (NodeId, usize)) -> usize {
        if let Some((i, uses)) = self.by_place.get_mut(&at) {
            *uses += 1;
            return *i;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.places[i] = Some(at);
                i
            }
            None => {
                self.places.push(Some(at));
                self.places.len() - 1
            }
        };
        self.by_place.insert(at, (i, 1));
        i
    }

    /// One use of a place fewer; its number is freed after the last.
    pub fn put(&mut self, at: (NodeId, usize)) {
        if let Some((i, uses)) = self.by_place.get_mut(&at) {
            *uses -= 1;
            if *uses == 0 {
                let i = *i;
                self.by_place.remove(&at);
                self.places[i] = None;
                self.free.push(i);
            }
        }
    }

    /// Every number's place (`None` for a free number).
    pub fn all(&self) -> &[Option<(NodeId, usize)>] {
        &self.places
    }
}

/// One unit's plan (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The unit's first node.
    pub root: PNode,
    /// The nodes compiled in place, the first node among them.
    pub members: Vec<NodeId>,
    /// The places of the tables probed and the set conditions checked.
    pub tables: Vec<(NodeId, usize)>,
    /// See [`Plan::tables`].
    pub sets: Vec<(NodeId, usize)>,
    /// The units called for the nodes past the size limit.
    pub calls: Vec<NodeId>,
    /// The size limit: [`MAX_ROOT_NODES`] or [`MAX_NODES`].
    pub budget: usize,
    /// The size: nodes, edges and tables (what compiling it costs grows
    /// with it).
    pub weight: usize,
}

impl Plan {
    /// The plan of the unit that starts at node `n`, taking numbers for
    /// its tables and set conditions from `ids` (give them back with
    /// [`Plan::release`]).
    ///
    /// ```
    /// use sluice_native::tree::plan::{Ids, Plan};
    /// let p = Plan::unit(&Default::default(), 0, &mut Ids::default());
    /// assert_eq!(p.members, vec![0]);
    /// ```
    pub fn unit(t: &DecisionTree, n: NodeId, ids: &mut Ids) -> Plan {
        let mut p = Plan {
            budget: match n == t.nodes().root() {
                true => MAX_ROOT_NODES,
                false => MAX_NODES,
            },
            ..Plan::default()
        };
        p.root = p.node(t, n, ids);
        p
    }

    /// Give back the numbers [`Plan::unit`] took.
    ///
    /// ```
    /// use sluice_native::tree::plan::{Ids, Plan};
    /// let mut ids = Ids::default();
    /// let p = Plan { tables: vec![(4, 0)], ..Plan::default() };
    /// assert_eq!(ids.tables.take((4, 0)), 0);
    /// p.release(&mut ids);
    /// assert_eq!(ids.tables.all(), &[None]); // number 0 is free again
    /// ```
    pub fn release(&self, ids: &mut Ids) {
        for &at in &self.tables {
            ids.tables.put(at);
        }
        for &at in &self.sets {
            ids.sets.put(at);
        }
    }

    fn child(&mut self, t: &DecisionTree, n: NodeId, ids: &mut Ids) -> Child {
        // A node that only accepts one filter has no unit of its own (a
        // table reports it from its datum): called, it would run through
        // the tree's walk in Rust. Its code is one report, so it goes in
        // place wherever it is reached, past the size limit too.
        let only_accepts = summary(t.nodes().get(n)) != 0;
        // Past the size limit a small part still goes in place (up to
        // twice the limit): its own function would cost a call, more
        // than its code.
        let over = self.members.len() >= self.budget
            && (self.members.len() >= 2 * self.budget || !within(t, n, SMALL_PART));
        if !only_accepts && (over || fanout(t, n) > MAX_FANOUT) {
            self.calls.push(n);
            return Child::Unit(n);
        }
        Child::Node(Box::new(self.node(t, n, ids)))
    }

    fn node(&mut self, t: &DecisionTree, n: NodeId, ids: &mut Ids) -> PNode {
        self.members.push(n);
        let node = t.nodes().get(n);
        self.weight += 1 + fanout(t, n) + node.tuples.len();
        let mut p = PNode {
            leaf: node
                .leaf
                .iter()
                .map(|e| (e.slot, t.repeats(e.slot)))
                .collect(),
            field: node.field.map(|f| FieldRead::of(t, f)),
            ..PNode::default()
        };
        for (i, tu) in node.tuples.iter().enumerate() {
            let more: Vec<FieldRead> = tu.fields[1..]
                .iter()
                .map(|&f| FieldRead::of(t, f))
                .collect();
            if in_code(tu) {
                let mut keys: Vec<(Vec<u32>, NodeId)> = tu
                    .table
                    .entries()
                    .map(|(k, v, _)| (k.to_vec(), v - 1))
                    .collect();
                keys.sort();
                let keys = keys
                    .into_iter()
                    .map(|(k, c)| (k, self.child(t, c, ids)))
                    .collect();
                p.small.push(Small { more, keys });
            } else {
                self.tables.push((n, i));
                p.big.push(Big {
                    more,
                    table: ids.tables.take((n, i)) as u32,
                });
            }
        }
        // Many conditions that are only ranges (port blocks): segments.
        let range = |c: &Cond| {
            c.ne.is_empty()
                && c.any.is_empty()
                && c.none == 0
                && c.not_in.is_empty()
                && c.is_in.is_none()
        };
        let ranges: Vec<(u32, u32, NodeId)> = node
            .conds
            .iter()
            .filter(|(c, _)| range(c))
            .map(|(c, child)| (c.lo, c.hi, *child))
            .collect();
        let cut = (ranges.len() >= RANGE_SEARCH)
            .then(|| segments(&ranges))
            .flatten();
        for (i, (cond, c)) in node.conds.iter().enumerate() {
            if cut.is_some() && range(cond) {
                continue;
            }
            let sets = (!cond.not_in.is_empty() || cond.is_in.is_some()).then(|| {
                self.sets.push((n, i));
                ids.sets.take((n, i)) as u32
            });
            let child = self.child(t, *c, ids);
            p.conds.push(PCond::of(cond, sets, child));
        }
        if let Some((starts, covers)) = cut {
            let mut seen = rustc_hash::FxHashMap::default();
            for c in covers.iter().flatten() {
                *seen.entry(*c).or_insert(0usize) += 1;
            }
            for (start, cover) in starts.into_iter().zip(covers) {
                let covers = cover
                    .into_iter()
                    .map(|c| match seen[&c] {
                        1 => self.child(t, c, ids),
                        // Copied into each segment: one report, no call.
                        _ if summary(t.nodes().get(c)) != 0 => self.child(t, c, ids),
                        _ => {
                            self.calls.push(c);
                            Child::Unit(c)
                        }
                    })
                    .collect();
                p.segments.push(Segment { start, covers });
            }
        }
        if node.skip != NONE {
            p.skip = Some(self.child(t, node.skip, ids));
        }
        p
    }
}

/// True when the part of the tree from node `n` that would be compiled
/// in place (through conditions, small tables' keys and skip edges) has
/// at most `limit` nodes.
pub(crate) fn within(t: &DecisionTree, n: NodeId, limit: usize) -> bool {
    let mut todo = vec![n];
    let mut count = 0;
    while let Some(m) = todo.pop() {
        count += 1;
        if count > limit {
            return false;
        }
        let node = t.nodes().get(m);
        todo.extend(node.conds.iter().map(|(_, c)| *c));
        for tu in node.tuples.iter().filter(|tu| in_code(tu)) {
            todo.extend(tu.table.entries().map(|(_, v, _)| v - 1));
        }
        if node.skip != NONE {
            todo.push(node.skip);
        }
    }
    true
}

/// Node `n`'s edges that its code tests one by one: conditions and the
/// keys of small tables.
fn fanout(t: &DecisionTree, n: NodeId) -> usize {
    let node = t.nodes().get(n);
    let small: usize = node
        .tuples
        .iter()
        .filter(|tu| in_code(tu))
        .map(|tu| tu.table.len())
        .sum();
    node.conds.len() + small
}

/// True when a tuple's table is compiled as a search, its children in
/// place (at most [`SMALL_KEYS`] keys); a larger one is probed as data.
fn in_code(tu: &Tuple) -> bool {
    tu.table.len() <= SMALL_KEYS
}

impl PNode {
    /// The node with every constant (slots, keys, bounds, masks, excluded
    /// values, table, set and node numbers) replaced by its place in the
    /// returned data, in walk order: nodes that differ only in constants
    /// have the same shape, and code compiled for the shape runs any of
    /// them given its data (MPF's collapsed filters, for whole subtrees).
    ///
    /// ```
    /// use sluice_native::tree::plan::PNode;
    /// let a = PNode { leaf: vec![(4, false)], ..PNode::default() };
    /// let b = PNode { leaf: vec![(9, false)], ..PNode::default() };
    /// assert_eq!(a.shape().0, b.shape().0);
    /// assert_eq!(b.shape().1, vec![9]);
    /// ```
    pub fn shape(&self) -> (PNode, Vec<u32>) {
        let mut data = Vec::new();
        let s = self.shaped(&mut data, &mut Default::default());
        (s, data)
    }

    /// The shape of `self` (see [`PNode::shape`]); a filter's slot
    /// reported at several leaves has one place (`leaves`), so that the
    /// code knows the leaves report one filter.
    fn shaped(&self, data: &mut Vec<u32>, leaves: &mut rustc_hash::FxHashMap<u32, u32>) -> PNode {
        let leaf = self
            .leaf
            .iter()
            .map(|&(k, r)| {
                let at = *leaves.entry(k).or_insert_with(|| {
                    data.push(k);
                    (data.len() - 1) as u32
                });
                (at, r)
            })
            .collect();
        let small: Vec<Small> = self
            .small
            .iter()
            .map(|t| {
                // Keys sharing a first word share its place, so that the
                // shape's search groups them as the plan's does.
                let mut first: Option<(u32, u32)> = None;
                let keys = t
                    .keys
                    .iter()
                    .map(|(k, c)| {
                        let mut out = Vec::with_capacity(k.len());
                        for (i, &x) in k.iter().enumerate() {
                            match first {
                                Some((w, at)) if i == 0 && w == x => out.push(at),
                                _ => {
                                    data.push(x);
                                    let at = (data.len() - 1) as u32;
                                    if i == 0 {
                                        first = Some((x, at));
                                    }
                                    out.push(at);
                                }
                            }
                        }
                        (out, c.shaped(data, leaves))
                    })
                    .collect();
                Small {
                    more: t.more.clone(),
                    keys,
                }
            })
            .collect();
        let mut put = |k: u32| {
            data.push(k);
            (data.len() - 1) as u32
        };
        let big = self
            .big
            .iter()
            .map(|t| Big {
                more: t.more.clone(),
                table: put(t.table),
            })
            .collect();
        let conds = self
            .conds
            .iter()
            .map(|c| {
                let mut put = |k: u32| {
                    data.push(k);
                    (data.len() - 1) as u32
                };
                let mut out = PCond {
                    lo: c.lo.map(&mut put),
                    hi: c.hi.map(&mut put),
                    none: c.none.map(&mut put),
                    any: c.any.iter().map(|&k| put(k)).collect(),
                    ne: c.ne.iter().map(|&k| put(k)).collect(),
                    sets: c.sets.map(&mut put),
                    child: Child::Unit(0),
                };
                out.child = c.child.shaped(data, leaves);
                out
            })
            .collect();
        let segments = self
            .segments
            .iter()
            .map(|g| {
                data.push(g.start);
                let start = (data.len() - 1) as u32;
                Segment {
                    start,
                    covers: g.covers.iter().map(|c| c.shaped(data, leaves)).collect(),
                }
            })
            .collect();
        let skip = self.skip.as_ref().map(|c| c.shaped(data, leaves));
        PNode {
            leaf,
            field: self.field.clone(),
            small,
            big,
            conds,
            segments,
            skip,
        }
    }
}

impl PNode {
    /// The most slots this node's code (and the nodes in place below it)
    /// can report for one packet without calling another unit.
    pub fn pushes(&self) -> usize {
        let child = |c: &Child| match c {
            Child::Node(p) => p.pushes(),
            Child::Unit(_) => 0,
        };
        self.leaf.len()
            + self.big.len()
            + self
                .small
                .iter()
                .flat_map(|s| s.keys.iter().map(|(_, c)| child(c)))
                .sum::<usize>()
            + self.conds.iter().map(|c| child(&c.child)).sum::<usize>()
            + self
                .segments
                .iter()
                .flat_map(|g| g.covers.iter().map(child))
                .sum::<usize>()
            + self.skip.as_ref().map_or(0, child)
    }
}

impl Child {
    fn shaped(&self, data: &mut Vec<u32>, leaves: &mut rustc_hash::FxHashMap<u32, u32>) -> Child {
        match self {
            Child::Node(p) => Child::Node(Box::new(p.shaped(data, leaves))),
            Child::Unit(n) => {
                data.push(*n);
                Child::Unit((data.len() - 1) as u32)
            }
        }
    }
}

/// Cut the values at every range's ends: each segment's first value and
/// the children of the ranges covering it; `None` when the ranges overlap
/// so much that listing them per segment would cost more than testing
/// them in turn.
fn segments(ranges: &[(u32, u32, NodeId)]) -> Option<(Vec<u32>, Vec<Vec<NodeId>>)> {
    let mut points: Vec<u32> = vec![0];
    for &(lo, hi, _) in ranges {
        points.push(lo);
        if let Some(after) = hi.checked_add(1) {
            points.push(after);
        }
    }
    points.sort_unstable();
    points.dedup();
    let covers: Vec<Vec<NodeId>> = points
        .iter()
        .map(|&p| {
            ranges
                .iter()
                .filter(|&&(lo, hi, _)| lo <= p && p <= hi)
                .map(|&(.., c)| c)
                .collect()
        })
        .collect();
    let total: usize = covers.iter().map(Vec::len).sum();
    (total <= 4 * ranges.len()).then_some((points, covers))
}

/// The table at a place, in a tree of the shape it was numbered in.
pub(crate) fn table(t: &DecisionTree, at: (NodeId, usize)) -> &KeyTable {
    &t.nodes().get(at.0).tuples[at.1].table
}

/// The condition at a place, in a tree of the shape it was numbered in.
pub(crate) fn set_cond(t: &DecisionTree, at: (NodeId, usize)) -> &Cond {
    &t.nodes().get(at.0).conds[at.1].0
}
