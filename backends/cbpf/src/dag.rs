//! The control-flow DAG: tests with a true and a false successor, and
//! `ret` leaves. Built from a predicate by continuation passing, so it is
//! linear in the size of the IR.
//!
//! Invariant: every successor of a node has a smaller id than the node, so
//! decreasing id order is a topological order. Node 0 is `ret #0` (reject
//! and abort), node 1 is `ret #accept`.

use std::collections::HashMap;

use sluice_ir::{CmpOp, Filter, Pred, Val};

use crate::opt::FxBuild;

pub(crate) type NodeId = u32;
pub(crate) type ValId = u32;

pub(crate) const REJECT: NodeId = 0;
pub(crate) const ACCEPT: NodeId = 1;

/// Right side of a comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Rhs {
    K(u32),
    V(ValId),
}

/// What a node tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Test {
    Cmp { lhs: ValId, op: CmpOp, rhs: Rhs },
    ProtoChain { v6: bool, start: ValId, proto: u8 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Node {
    /// `ret #k`.
    Leaf(u32),
    Test {
        test: Test,
        jt: NodeId,
        jf: NodeId,
    },
}

pub(crate) struct Dag {
    /// Interned values: the same expression always has the same id.
    pub vals: Vec<Val>,
    val_ids: HashMap<Val, ValId, FxBuild>,
    pub nodes: Vec<Node>,
    pub entry: NodeId,
    /// Tests as libpcap's peephole pass leaves them (the refusal model).
    peep: bool,
}

impl Dag {
    pub fn build(filter: &Filter) -> Dag {
        Dag::build_as(filter, false)
    }

    /// The DAG, with tests as libpcap's peephole pass leaves them (`peep`:
    /// `jset #0` never holds) for the refusal model.
    pub fn build_as(filter: &Filter, peep: bool) -> Dag {
        let mut dag = Dag {
            vals: Vec::new(),
            val_ids: HashMap::default(),
            nodes: vec![Node::Leaf(0), Node::Leaf(filter.accept)],
            entry: REJECT,
            peep,
        };
        dag.entry = dag.lower(&filter.pred, ACCEPT, REJECT);
        dag
    }

    pub fn intern(&mut self, v: &Val) -> ValId {
        if let Some(&id) = self.val_ids.get(v) {
            return id;
        }
        let id = self.vals.len() as ValId;
        self.vals.push(v.clone());
        self.val_ids.insert(v.clone(), id);
        id
    }

    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        (self.nodes.len() - 1) as NodeId
    }

    /// The node that evaluates `p` and continues at `t` when it holds and at
    /// `f` when not. Recursion depth is the nesting depth of `p`; the
    /// operands of an `and`/`or` are chained in a loop, right to left.
    fn lower(&mut self, p: &Pred, t: NodeId, f: NodeId) -> NodeId {
        match p {
            Pred::True => t,
            Pred::False => f,
            Pred::Cmp { op, lhs, rhs } => {
                if let (Val::Const(a), Val::Const(b)) = (lhs, rhs) {
                    return if op.apply(*a, *b) { t } else { f };
                }
                let lhs = self.intern(lhs);
                let rhs = match rhs {
                    Val::Const(k) => Rhs::K(*k),
                    v => Rhs::V(self.intern(v)),
                };
                let test = Test::Cmp { lhs, op: *op, rhs };
                // libpcap's peephole pass gives `jset #0` (which never
                // holds) one successor, the false one.
                let t = if self.peep && *op == CmpOp::Set && rhs == Rhs::K(0) {
                    f
                } else {
                    t
                };
                self.push(Node::Test { test, jt: t, jf: f })
            }
            Pred::Not(q) => self.lower(q, f, t),
            Pred::And(ps) => {
                let mut cur = t;
                for q in ps.iter().rev() {
                    cur = self.lower(q, cur, f);
                }
                cur
            }
            Pred::Or(ps) => {
                let mut cur = f;
                for q in ps.iter().rev() {
                    cur = self.lower(q, t, cur);
                }
                cur
            }
            Pred::In { val, keys } => {
                let lhs = self.intern(val);
                if keys.is_empty() {
                    // No key: false, but the value is still read (and may abort).
                    let test = Test::Cmp {
                        lhs,
                        op: CmpOp::Ge,
                        rhs: Rhs::K(0),
                    };
                    return self.push(Node::Test { test, jt: f, jf: f });
                }
                self.lower_set(lhs, keys, t, f)
            }
            Pred::ProtoChain { v6, start, proto } => {
                let start = self.intern(start);
                let test = Test::ProtoChain {
                    v6: *v6,
                    start,
                    proto: *proto,
                };
                self.push(Node::Test { test, jt: t, jf: f })
            }
        }
    }

    /// Membership of a value in sorted keys as a balanced search tree:
    /// `jge` splits a range in two, small ranges end in `jeq` chains, so a
    /// packet takes O(log n) tests. Recursion depth is O(log n).
    fn lower_set(&mut self, lhs: ValId, keys: &[u32], t: NodeId, f: NodeId) -> NodeId {
        const CHAIN: usize = 4;
        if keys.len() <= CHAIN {
            let mut cur = f;
            for &k in keys.iter().rev() {
                let test = Test::Cmp {
                    lhs,
                    op: CmpOp::Eq,
                    rhs: Rhs::K(k),
                };
                cur = self.push(Node::Test {
                    test,
                    jt: t,
                    jf: cur,
                });
            }
            return cur;
        }
        let mid = keys.len() / 2;
        let high = self.lower_set(lhs, &keys[mid..], t, f);
        let low = self.lower_set(lhs, &keys[..mid], t, f);
        let test = Test::Cmp {
            lhs,
            op: CmpOp::Ge,
            rhs: Rhs::K(keys[mid]),
        };
        self.push(Node::Test {
            test,
            jt: high,
            jf: low,
        })
    }

    /// The outcome of `test` whenever it does not abort, if its values are
    /// known constants ([`Val::known`]: `x & 0 == 1` is false).
    pub fn known_outcome(&self, test: &Test) -> Option<bool> {
        let Test::Cmp { lhs, op, rhs } = *test else {
            return None;
        };
        let l = self.vals[lhs as usize].known()?;
        let r = match rhs {
            Rhs::K(k) => k,
            Rhs::V(v) => self.vals[v as usize].known()?,
        };
        Some(op.apply(l, r))
    }

    /// True if evaluating the test can abort the filter.
    pub fn can_abort(&self, test: &Test) -> bool {
        match *test {
            Test::Cmp { lhs, rhs, .. } => {
                self.vals[lhs as usize].can_abort()
                    || matches!(rhs, Rhs::V(r) if self.vals[r as usize].can_abort())
            }
            Test::ProtoChain { .. } => true,
        }
    }
}
