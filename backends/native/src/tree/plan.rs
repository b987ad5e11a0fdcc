//! What the code generator makes of a decision tree: the part of the tree
//! compiled into one machine function, as plain data.
//!
//! From the root, every node reached by a skip edge, a condition edge or a
//! small table's key (at most [`SMALL_KEYS`] keys: a binary search of
//! compares against immediates) is compiled in place, up to
//! [`MAX_NODES`] nodes. A larger table is
//! probed in the code, in the tree's own [`KeyTable`] (the table stays
//! data, so adding a key to it needs no new code): a key whose child only
//! accepts one filter reports it from the slot's datum, any other child is
//! run by the tree's own walk ([`Child::Visit`]), as is any node past the
//! size limit. The plan is compared with the last one to reuse the code
//! when only large tables changed.
//!
//! ```
//! use sluice_classifier::tree::DecisionTree;
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_native::tree::plan::Plan;
//! let mut t = DecisionTree::default();
//! t.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
//! let p = Plan::of(&t);
//! assert_eq!((p.nodes, p.tables.len()), (2, 0));
//! ```

use sluice_classifier::table::KeyTable;
use sluice_classifier::tree::field::{FieldId, Read};
use sluice_classifier::tree::label::Cond;
use sluice_classifier::tree::node::{NodeId, NONE};
use sluice_classifier::tree::DecisionTree;
use sluice_ir::{CmpOp, Pred, Val};

/// Tables with at most this many keys are compiled as a search of
/// compares against immediates, their children in place.
pub const SMALL_KEYS: usize = 64;

/// The most nodes compiled into one function; the tree's walk runs the
/// rest.
pub const MAX_NODES: usize = 20_000;

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
    /// Run by the tree's walk from this node.
    Visit(NodeId),
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
    /// Index into [`Plan::tables`].
    pub table: usize,
}

/// A condition edge.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PCond {
    /// The condition.
    pub cond: Cond,
    /// Index into [`Plan::sets`] when the condition has set parts, which
    /// the code checks with a call.
    pub sets: Option<usize>,
    /// Where it leads.
    pub child: Child,
}

/// One node as compiled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PNode {
    /// Slots of the filters accepted here.
    pub leaf: Vec<u32>,
    /// The field tested.
    pub field: Option<FieldRead>,
    /// Tables compiled as compares.
    pub small: Vec<Small>,
    /// Tables probed.
    pub big: Vec<Big>,
    /// Condition edges.
    pub conds: Vec<PCond>,
    /// The skip edge.
    pub skip: Option<Child>,
}

/// The compiled part of a tree (see the module doc).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Plan {
    /// The root.
    pub root: PNode,
    /// The probed tables, as (node, index of the table in the node).
    pub tables: Vec<(NodeId, usize)>,
    /// Conditions with set parts, as (node, index of the edge).
    pub sets: Vec<(NodeId, usize)>,
    /// Nodes compiled in place.
    pub nodes: usize,
}

impl Plan {
    /// The plan of a tree.
    ///
    /// ```
    /// let p = sluice_native::tree::plan::Plan::of(&Default::default());
    /// assert_eq!(p.nodes, 1);
    /// ```
    pub fn of(t: &DecisionTree) -> Plan {
        let mut p = Plan::default();
        p.root = p.node(t, t.nodes().root());
        p
    }

    fn child(&mut self, t: &DecisionTree, n: NodeId) -> Child {
        if self.nodes >= MAX_NODES {
            return Child::Visit(n);
        }
        Child::Node(Box::new(self.node(t, n)))
    }

    fn node(&mut self, t: &DecisionTree, n: NodeId) -> PNode {
        self.nodes += 1;
        let node = t.nodes().get(n);
        let mut p = PNode {
            leaf: node.leaf.iter().map(|e| e.slot).collect(),
            field: node.field.map(|f| FieldRead::of(t, f)),
            ..PNode::default()
        };
        for (i, tu) in node.tuples.iter().enumerate() {
            let more: Vec<FieldRead> = tu.fields[1..]
                .iter()
                .map(|&f| FieldRead::of(t, f))
                .collect();
            if tu.table.len() <= SMALL_KEYS {
                let mut keys: Vec<(Vec<u32>, NodeId)> = tu
                    .table
                    .entries()
                    .map(|(k, v, _)| (k.to_vec(), v - 1))
                    .collect();
                keys.sort();
                let keys = keys
                    .into_iter()
                    .map(|(k, c)| (k, self.child(t, c)))
                    .collect();
                p.small.push(Small { more, keys });
            } else {
                self.tables.push((n, i));
                p.big.push(Big {
                    more,
                    table: self.tables.len() - 1,
                });
            }
        }
        for (i, (cond, c)) in node.conds.iter().enumerate() {
            let sets = (!cond.not_in.is_empty() || cond.is_in.is_some()).then(|| {
                self.sets.push((n, i));
                self.sets.len() - 1
            });
            let child = self.child(t, *c);
            p.conds.push(PCond {
                cond: cond.clone(),
                sets,
                child,
            });
        }
        if node.skip != NONE {
            p.skip = Some(self.child(t, node.skip));
        }
        p
    }
}

/// The table a plan's [`Big`] probes, in a tree of the same shape.
pub(crate) fn table(t: &DecisionTree, at: (NodeId, usize)) -> &KeyTable {
    &t.nodes().get(at.0).tuples[at.1].table
}

/// The condition a plan's set check tests, in a tree of the same shape.
pub(crate) fn set_cond(t: &DecisionTree, at: (NodeId, usize)) -> &Cond {
    &t.nodes().get(at.0).conds[at.1].0
}
