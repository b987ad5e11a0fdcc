//! The optimiser, on the DAG. Every step preserves the meaning including
//! aborts:
//!
//! * **jump threading with facts**: along each edge we know the outcome of
//!   earlier tests (`[12:2] != 0x800`, ...). A node whose test is decided by
//!   what holds on an edge is skipped by that edge; a node decided by what
//!   holds on all its incoming edges forwards to its successor. A skipped
//!   test's value was already computed successfully on that path (the fact is
//!   about the same expression), so skipping it cannot hide an abort.
//! * **constants**: a test whose values are known constants whenever they
//!   are computed (`x & 0 == 1`, libpcap's reductions, see
//!   [`sluice_ir::Val::known`]) goes one way; it is skipped only if it
//!   cannot abort.
//! * **merging**: identical nodes (same test, same successors) become one;
//!   a test that cannot abort and whose successors are equal disappears.
//!
//! Facts are computed in one pass in topological order, as the intersection
//! over incoming edges, and bounded to [`MAX_FACTS`] per edge, so the pass is
//! linear in the size of the DAG.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use sluice_ir::CmpOp;

use crate::dag::{Dag, Node, NodeId, Rhs, Test, ValId};

/// At most this many facts are remembered along an edge.
const MAX_FACTS: usize = 32;
/// At most this many facts about one value are remembered.
const MAX_FACTS_PER_VALUE: usize = 4;
/// At most this many nodes are skipped by one edge (the rest is done by
/// forwarding, which needs no walk).
const MAX_HOPS: usize = 64;
const NONE: NodeId = NodeId::MAX;

/// `lhs op rhs` is known to be `truth`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Fact {
    lhs: ValId,
    op: u8,
    rhs: Rhs,
    truth: bool,
}

fn op_code(op: CmpOp) -> u8 {
    match op {
        CmpOp::Eq => 0,
        CmpOp::Gt => 1,
        CmpOp::Ge => 2,
        CmpOp::Set => 3,
    }
}

fn fact_of(test: &Test, truth: bool) -> Option<Fact> {
    match *test {
        Test::Cmp { lhs, op, rhs } => Some(Fact {
            lhs,
            op: op_code(op),
            rhs,
            truth,
        }),
        Test::ProtoChain { .. } => None,
    }
}

/// Facts sorted by `Fact`, each with the generation it was last learnt or
/// used in (the least recently used is forgotten first: a guard such as
/// `ether proto ip` that decides test after test stays).
#[derive(Clone, Debug, Default)]
struct Facts(Vec<(Fact, u64)>);

impl Facts {
    fn add(&mut self, f: Fact, gen: u64) {
        match self.0.binary_search_by(|(g, _)| g.cmp(&f)) {
            Ok(i) => self.0[i].1 = gen,
            Err(i) => {
                self.0.insert(i, (f, gen));
                // Facts sort by value, so one value's facts are adjacent:
                // keep the few most recently used (a search tree over a set
                // otherwise piles up range facts that every decision scans).
                let same = |j: usize| self.0[j].0.lhs == f.lhs;
                let (mut lo, mut hi) = (i, i + 1);
                while lo > 0 && same(lo - 1) {
                    lo -= 1;
                }
                while hi < self.0.len() && same(hi) {
                    hi += 1;
                }
                if hi - lo > MAX_FACTS_PER_VALUE {
                    let oldest = (lo..hi).min_by_key(|&j| self.0[j].1).expect("non-empty");
                    self.0.remove(oldest);
                }
                if self.0.len() > MAX_FACTS {
                    let oldest = (0..self.0.len())
                        .min_by_key(|&j| self.0[j].1)
                        .expect("non-empty");
                    self.0.remove(oldest);
                }
            }
        }
    }

    fn intersect(&mut self, other: &Facts) {
        let mut out = Vec::with_capacity(self.0.len().min(other.0.len()));
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].0.cmp(&b[j].0) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    out.push((a[i].0, a[i].1.max(b[j].1)));
                    i += 1;
                    j += 1;
                }
            }
        }
        self.0 = out;
    }

    /// The outcome of `test` if the facts decide it (by `rules`); the
    /// deciding fact is marked as used in generation `gen`.
    fn decide(&mut self, test: &Test, gen: u64, rules: Rules) -> Option<bool> {
        let Test::Cmp { lhs, op, rhs } = *test else {
            return None;
        };
        let start = self.0.partition_point(|(f, _)| f.lhs < lhs);
        self.0[start..]
            .iter_mut()
            .take_while(|(f, _)| f.lhs == lhs)
            .find_map(|(f, g)| {
                let d = match rules {
                    Rules::Sluice => decide_one(f, op, rhs)?,
                    Rules::Libpcap => decide_libpcap(f, op, rhs)?,
                };
                *g = gen;
                Some(d)
            })
    }
}

fn op_of(code: u8) -> CmpOp {
    match code {
        0 => CmpOp::Eq,
        1 => CmpOp::Gt,
        2 => CmpOp::Ge,
        _ => CmpOp::Set,
    }
}

/// What the fact `f` (about the same left side) says about `lhs op rhs`.
fn decide_one(f: &Fact, op: CmpOp, rhs: Rhs) -> Option<bool> {
    let fop = op_of(f.op);
    if fop == op && f.rhs == rhs {
        return Some(f.truth);
    }
    let (Rhs::K(k1), Rhs::K(k2)) = (f.rhs, rhs) else {
        return None;
    };
    // The range [lo, hi] the value is known to lie in.
    let range = match (fop, f.truth) {
        (CmpOp::Eq, true) => Some((k1, k1)),
        (CmpOp::Gt, true) if k1 < u32::MAX => Some((k1 + 1, u32::MAX)),
        (CmpOp::Gt, false) => Some((0, k1)),
        (CmpOp::Ge, true) => Some((k1, u32::MAX)),
        (CmpOp::Ge, false) if k1 > 0 => Some((0, k1 - 1)),
        _ => None,
    };
    if let Some((lo, hi)) = range {
        if lo == hi {
            return Some(op.apply(lo, k2));
        }
        return match op {
            CmpOp::Eq if k2 < lo || k2 > hi => Some(false),
            CmpOp::Gt if lo > k2 => Some(true),
            CmpOp::Gt if hi <= k2 => Some(false),
            CmpOp::Ge if lo >= k2 => Some(true),
            CmpOp::Ge if hi < k2 => Some(false),
            _ => None,
        };
    }
    match (fop, f.truth, op) {
        // v & k1 != 0 and k1 ⊆ k2: v & k2 != 0.
        (CmpOp::Set, true, CmpOp::Set) if k1 & !k2 == 0 => Some(true),
        // v & k1 == 0 and k2 ⊆ k1: v & k2 == 0.
        (CmpOp::Set, false, CmpOp::Set) if k2 & !k1 == 0 => Some(false),
        (CmpOp::Set, false, CmpOp::Eq) if k2 & k1 != 0 => Some(false),
        _ => None,
    }
}

/// What jump threading may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rules {
    /// Every fact sluice knows (ranges, bits) and constants known by
    /// libpcap's reductions ([`Dag::known_outcome`]).
    Sluice,
    /// Only what libpcap's optimiser threads jumps with: the same test
    /// of the same value, and an equality that held with another
    /// constant; no reductions (libpcap makes them in a later pass).
    Libpcap,
}

/// What libpcap's jump threading knows from fact `f` about `lhs op rhs`
/// (optimize.c's `fold_edge`): the same comparison with the same operand
/// has the same outcome; after an equality with a constant held, an
/// equality with another constant fails.
fn decide_libpcap(f: &Fact, op: CmpOp, rhs: Rhs) -> Option<bool> {
    let fop = op_of(f.op);
    if fop != op {
        return None;
    }
    if f.rhs == rhs {
        return Some(f.truth);
    }
    match (op, f.truth, f.rhs, rhs) {
        (CmpOp::Eq, true, Rhs::K(_), Rhs::K(_)) => Some(false),
        _ => None,
    }
}

pub(crate) fn optimize(dag: &mut Dag) {
    thread(dag, Rules::Sluice);
    merge(dag, Collapse::IfSafe);
}

fn succ(node: &Node, d: bool) -> NodeId {
    match *node {
        Node::Test { jt, jf, .. } => {
            if d {
                jt
            } else {
                jf
            }
        }
        Node::Leaf(_) => unreachable!("leaves have no successors"),
    }
}

/// Jump threading, one pass in topological (decreasing id) order.
pub(crate) fn thread(dag: &mut Dag, rules: Rules) {
    let n = dag.nodes.len();
    let mut pending: Vec<Option<Facts>> = vec![None; n];
    let mut fwd: Vec<NodeId> = vec![NONE; n];
    let mut gen: u64 = 0;
    pending[dag.entry as usize] = Some(Facts::default());

    fn push(pending: &mut [Option<Facts>], nodes: &[Node], t: NodeId, e: Facts) {
        if matches!(nodes[t as usize], Node::Leaf(_)) {
            return;
        }
        match &mut pending[t as usize] {
            Some(old) => old.intersect(&e),
            slot => *slot = Some(e),
        }
    }

    for id in (0..n).rev() {
        let Some(mut facts) = pending[id].take() else {
            continue;
        };
        let Node::Test { test, jt, jf } = dag.nodes[id] else {
            continue;
        };
        gen += 1;
        if let Some(d) = facts.decide(&test, gen, rules) {
            let target = if d { jt } else { jf };
            fwd[id] = target;
            push(&mut pending, &dag.nodes, target, facts);
            continue;
        }
        if let Some(d) = dag.known_outcome(&test).filter(|_| rules == Rules::Sluice) {
            // Decided by constants: skipped if it cannot abort, else it
            // still runs (its loads may abort) and goes one way.
            let target = if d { jt } else { jf };
            if dag.can_abort(&test) {
                dag.nodes[id] = Node::Test {
                    test,
                    jt: target,
                    jf: target,
                };
            } else {
                fwd[id] = target;
            }
            push(&mut pending, &dag.nodes, target, facts);
            continue;
        }
        let mut new = [jt, jf];
        let mut spare = Some(facts);
        for (slot, truth) in new.iter_mut().zip([true, false]) {
            // The last edge takes the set itself.
            let mut e = if truth {
                spare.clone().expect("set present")
            } else {
                spare.take().expect("set present")
            };
            gen += 1;
            if let Some(f) = fact_of(&test, truth) {
                e.add(f, gen);
            }
            let mut t = *slot;
            for _ in 0..MAX_HOPS {
                let node = &dag.nodes[t as usize];
                let Node::Test { test: tt, .. } = node else {
                    break;
                };
                gen += 1;
                let Some(d) = e.decide(tt, gen, rules) else {
                    break;
                };
                t = succ(node, d);
            }
            *slot = t;
            push(&mut pending, &dag.nodes, t, e);
        }
        dag.nodes[id] = Node::Test {
            test,
            jt: new[0],
            jf: new[1],
        };
    }

    // Resolve forwarding chains, with path compression.
    let mut path = Vec::new();
    let mut resolve = |fwd: &mut Vec<NodeId>, mut x: NodeId| -> NodeId {
        while fwd[x as usize] != NONE {
            path.push(x);
            x = fwd[x as usize];
        }
        for p in path.drain(..) {
            fwd[p as usize] = x;
        }
        x
    };
    for id in 0..n {
        if let Node::Test { test, jt, jf } = dag.nodes[id] {
            let jt = resolve(&mut fwd, jt);
            let jf = resolve(&mut fwd, jf);
            dag.nodes[id] = Node::Test { test, jt, jf };
        }
    }
    dag.entry = resolve(&mut fwd, dag.entry);
}

/// When merging removes a test whose successors are the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collapse {
    /// When that cannot hide an abort (sluice's meaning).
    IfSafe,
    /// Always (libpcap's optimiser: loads do not count).
    Always,
    /// Never (libpcap's final merging of identical blocks).
    Never,
}

/// Hash-consing in increasing id order (successors first).
pub(crate) fn merge(dag: &mut Dag, collapse: Collapse) {
    let n = dag.nodes.len();
    let mut canon: Vec<NodeId> = (0..n as NodeId).collect();
    let mut seen: HashMap<Node, NodeId, FxBuild> =
        HashMap::with_capacity_and_hasher(n, FxBuild::default());
    for id in 0..n {
        let node = match dag.nodes[id] {
            Node::Leaf(k) => Node::Leaf(k),
            Node::Test { test, jt, jf } => {
                let (jt, jf) = (canon[jt as usize], canon[jf as usize]);
                // Abort and reject both return 0: a test whose outcomes both
                // reject can go even if it can abort.
                let safe =
                    || !dag.can_abort(&test) || matches!(dag.nodes[jt as usize], Node::Leaf(0));
                let remove = match collapse {
                    Collapse::IfSafe => safe(),
                    Collapse::Always => true,
                    Collapse::Never => false,
                };
                if jt == jf && remove {
                    canon[id] = jt;
                    dag.nodes[id] = Node::Test { test, jt, jf };
                    continue;
                }
                Node::Test { test, jt, jf }
            }
        };
        dag.nodes[id] = node;
        canon[id] = *seen.entry(node).or_insert(id as NodeId);
    }
    dag.entry = canon[dag.entry as usize];
}

/// A fast non-cryptographic hasher for small keys (the DAG's own nodes; no
/// outside input can make it degenerate beyond what the filter itself is).
#[derive(Default)]
pub(crate) struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
    fn write_isize(&mut self, i: isize) {
        self.write_u64(i as u64);
    }
}

pub(crate) type FxBuild = BuildHasherDefault<Fx>;
