//! A decision diagram of hash-consed tests with a match list per outcome,
//! over the tree's own fields and folded paths: the third design issue 33
//! asked to be measured against the decision tree ([`crate::tree`]),
//! kept as a reference engine in Rust.
//!
//! A node is a state of the classification: a place in the tree's order
//! of fields, and the accepting paths alive there that still have tests
//! to pass. States with the same place and the same paths are one node
//! (hash-consing), so equal subproblems reached by different outcomes are
//! built and stored once. A field's node cuts the field's values into the
//! intervals its alive testers name, as the bit vectors do
//! ([`crate::bitvec`]), and each interval leads to the state of the paths
//! that hold there; a read that aborts leads to the paths that do not
//! test the field. Parts of a condition that are not intervals (bit
//! masks, large sets) are nodes of their own with two outcomes. Fields no
//! alive path tests are skipped. Each outcome (an edge) carries the list
//! of filters whose last test it passes, so a packet makes one test a
//! node, never visits a path twice, and copies its filters out list by
//! list.
//!
//! Independent filters multiply the states (each combination of outcomes
//! is one). The build goes breadth first under a budget of work (paths
//! placed in states); a state whose expansion could pass it, and every
//! state left when it runs out, become leaves that check their paths one
//! by one, as HiCuts' leaves do ([`crate::cuts`]).
//!
//! The structure is built once from a set of filters; it has no inserts.
//!
//! ```
//! use sluice_classifier::dag::{Dag, DagScratch};
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{CmpOp, Filter, Pred, Size, Val};
//! let byte = |o| Val::load_abs(o, Size::Byte);
//! let a = Compiled::new(Filter::new(Pred::eq(byte(0), 1), 1));
//! let b = Compiled::new(Filter::new(Pred::cmp(CmpOp::Gt, byte(1), Val::Const(4)), 1));
//! let dag = Dag::build([(0, &a, 0), (1, &b, 5)]);
//! let (mut s, mut out) = (DagScratch::default(), Vec::new());
//! dag.classify(&[1, 9], 2, &mut s, &mut out);
//! out.sort_unstable();
//! assert_eq!(out, [0, 1]);
//! assert_eq!(dag.classify_first(&[1, 9], 2, &mut s), Some(1));
//! dag.classify(&[1], 1, &mut s, &mut out); // byte 1 is past the packet
//! assert_eq!(out, [0]);
//! ```

use crate::bitvec::{cut, has_extra, spans};
use crate::merged::Compiled;
use crate::pathset::{Dedup, PathSet};
use crate::tree::field::{FieldId, Memo};
use crate::tree::label::{Cond, Label};
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;

/// Work the build may do (paths placed in the states it makes) before the
/// states left become leaves that check their paths.
const WORK: u64 = 100_000_000;

/// An outcome: the node it leads to and the filter slots whose last test
/// it passes (`lists[start..end]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Edge {
    to: u32,
    start: u32,
    end: u32,
}

/// One node of the diagram.
#[derive(Clone, Debug)]
enum Node {
    /// Read the field at place `at`; the value's interval (the last start
    /// at or below it) gives the outcome, an abort gives `abort`.
    Field {
        at: u32,
        starts: Box<[u32]>,
        kids: Box<[Edge]>,
        abort: Edge,
    },
    /// Whether condition `cond` of the field at place `at` (read before)
    /// holds.
    Check {
        at: u32,
        cond: u32,
        yes: Edge,
        no: Edge,
    },
    /// No path is left.
    Done,
    /// Paths (`rest[start..end]`) checked one by one: a state the budget
    /// left unbuilt.
    Rest { start: u32, end: u32 },
}

/// Per-reader memory for [`Dag::classify`].
///
/// ```
/// let s = sluice_classifier::dag::DagScratch::default();
/// # let _ = s;
/// ```
#[derive(Clone, Debug, Default)]
pub struct DagScratch {
    /// Nodes visited and paths checked since the scratch was made: the
    /// work a packet costs, to compare with the tree's visits.
    pub work: DagWork,
    memo: Memo,
    dedup: Dedup,
    slots: Vec<u32>,
}

/// Work counted over every packet a [`DagScratch`] served.
///
/// ```
/// let w = sluice_classifier::dag::DagWork::default();
/// assert_eq!(w.packets, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DagWork {
    /// Packets classified.
    pub packets: u64,
    /// Field and condition nodes passed.
    pub tests: u64,
    /// Paths checked one by one in leaves the budget left unbuilt.
    pub checked: u64,
}

/// Size of a [`Dag`].
///
/// ```
/// let s = sluice_classifier::dag::Dag::build([]).stats();
/// assert_eq!((s.fields, s.rest), (0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DagStats {
    /// Accepting paths.
    pub paths: usize,
    /// Field nodes.
    pub fields: usize,
    /// Condition nodes.
    pub checks: usize,
    /// Outcomes of the field nodes (intervals, after merging neighbours
    /// with the same outcome).
    pub edges: usize,
    /// Distinct match lists.
    pub lists: usize,
    /// Filter slots over the distinct match lists.
    pub listed: usize,
    /// Leaves that check their paths one by one.
    pub rest: usize,
    /// Paths held by those leaves.
    pub rest_paths: usize,
    /// Bytes of nodes and lists.
    pub bytes: usize,
    /// Paths placed in states during the build (its work).
    pub work: u64,
}

/// Filters as a decision diagram (see the module doc).
///
/// ```
/// let dag = sluice_classifier::dag::Dag::build([]);
/// assert_eq!(dag.stats().paths, 0);
/// ```
#[derive(Clone, Debug)]
pub struct Dag {
    set: PathSet,
    /// The field at each place, in the tree's order.
    order: Vec<FieldId>,
    /// The conditions with parts that are not intervals, at each place.
    conds: Vec<Vec<Cond>>,
    nodes: Vec<Node>,
    root: Edge,
    lists: Vec<u32>,
    distinct_lists: usize,
    rest: Vec<u32>,
    work: u64,
}

/// A step of a path: its test of the interval at a place (stage 0), or of
/// the place's condition `c` (stage `c + 1`).
type Step = (u32, u32);

/// A state: the place and stage of its first step, and the paths alive
/// that have steps left (ascending).
type State = (u32, u32, Rc<[u32]>);

/// The build's working memory.
struct Builder<'a> {
    /// Each path's filter slot.
    slot: Vec<u32>,
    /// Each path's label at each place it tests, by place.
    labels: Vec<Vec<(u32, &'a Label)>>,
    /// Each path's steps, ascending.
    steps: Vec<Vec<Step>>,
    places: u32,
    states: Vec<State>,
    state_ids: HashMap<State, u32>,
    lists: Vec<u32>,
    list_ids: HashMap<Vec<u32>, (u32, u32)>,
    work: u64,
}

impl<'a> Builder<'a> {
    /// The label path `p` has at `at`.
    fn label(&self, p: u32, at: u32) -> Option<&'a Label> {
        let ls = &self.labels[p as usize];
        ls.binary_search_by_key(&at, |l| l.0).ok().map(|i| ls[i].1)
    }

    /// The outcome that leaves `alive` at step `(at, stage)`: the filters
    /// of the paths with no step left, and the node of the first step
    /// some other path takes (made if new).
    fn edge(&mut self, at: u32, stage: u32, alive: &[u32]) -> Edge {
        self.work += alive.len() as u64;
        let (mut done, mut pending) = (Vec::new(), Vec::new());
        let mut next = (self.places, 0);
        for &p in alive {
            let s = &self.steps[p as usize];
            match s.get(s.partition_point(|&x| x < (at, stage))) {
                Some(&x) => {
                    pending.push(p);
                    next = next.min(x);
                }
                None => done.push(self.slot[p as usize]),
            }
        }
        done.sort_unstable();
        done.dedup();
        let (start, end) = match self.list_ids.get(&done) {
            Some(&r) => r,
            None => {
                let r = (
                    self.lists.len() as u32,
                    (self.lists.len() + done.len()) as u32,
                );
                self.lists.extend_from_slice(&done);
                self.list_ids.insert(done, r);
                r
            }
        };
        let key = (next.0, next.1, Rc::from(pending));
        let to = match self.state_ids.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.states.len() as u32;
                self.state_ids.insert(key.clone(), id);
                self.states.push(key);
                id
            }
        };
        Edge { to, start, end }
    }

    /// The field node at `at` over `alive`, or `None` when placing its
    /// children's paths could take the work past `limit`.
    fn field(&mut self, at: u32, alive: &[u32], limit: u64) -> Option<Node> {
        let (mut testers, mut non) = (Vec::new(), Vec::new());
        for &p in alive {
            match self.label(p, at) {
                Some(l) => testers.push((p, l)),
                None => non.push(p),
            }
        }
        let mut starts = vec![0];
        testers.iter().for_each(|t| cut(t.1, &mut starts));
        starts.sort_unstable();
        starts.dedup();
        // Each interval's child holds at most every alive path.
        let most = (alive.len() * (starts.len() + 1)) as u64;
        if self.work.saturating_add(most) > limit {
            return None;
        }
        // Where each tester's interval part starts and stops holding.
        let mut on: Vec<Vec<u32>> = vec![Vec::new(); starts.len() + 1];
        let mut off: Vec<Vec<u32>> = vec![Vec::new(); starts.len() + 1];
        for (p, l) in &testers {
            spans(l, &starts, |a, b| {
                on[a].push(*p);
                off[b + 1].push(*p);
            });
        }
        let mut active = BTreeSet::new();
        let (mut kept, mut kids) = (Vec::new(), Vec::<Edge>::new());
        for (r, &start) in starts.iter().enumerate() {
            let changed = !on[r].is_empty() || !off[r].is_empty();
            off[r].iter().for_each(|p| {
                active.remove(p);
            });
            active.extend(on[r].iter().copied());
            if r > 0 && !changed {
                continue;
            }
            let mut child: Vec<u32> = non.iter().chain(&active).copied().collect();
            child.sort_unstable();
            let kid = self.edge(at, 1, &child);
            if kids.last() != Some(&kid) {
                kept.push(start);
                kids.push(kid);
            }
        }
        let abort = self.edge(at + 1, 0, &non);
        Some(Node::Field {
            at,
            starts: kept.into(),
            kids: kids.into(),
            abort,
        })
    }

    /// The condition node of condition `c` at `at` over `alive`.
    fn check(&mut self, at: u32, c: u32, alive: &[u32]) -> Node {
        let failed: Vec<u32> = alive
            .iter()
            .copied()
            .filter(|&p| self.steps[p as usize].binary_search(&(at, c + 1)).is_err())
            .collect();
        let no = self.edge(at, c + 2, &failed);
        let yes = self.edge(at, c + 2, alive);
        Node::Check {
            at,
            cond: c,
            yes,
            no,
        }
    }
}

impl Dag {
    /// Build from `(id, filter, priority)` triples (ids distinct).
    ///
    /// ```
    /// use sluice_classifier::{dag::Dag, merged::Compiled};
    /// let t = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// assert_eq!(Dag::build([(3, &t, 0)]).stats().paths, 1);
    /// ```
    pub fn build<'a>(filters: impl IntoIterator<Item = (u32, &'a Compiled, i32)>) -> Dag {
        Dag::build_within(filters, WORK)
    }

    /// Build as [`Dag::build`] does, but stop making states once `work`
    /// paths have been placed in them ([`DagStats::work`]); the states
    /// left check their paths one by one.
    ///
    /// ```
    /// use sluice_classifier::{dag::Dag, merged::Compiled};
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let f = Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1));
    /// assert_eq!(Dag::build_within([(3, &f, 0)], 0).stats().rest, 1);
    /// ```
    pub fn build_within<'a>(
        filters: impl IntoIterator<Item = (u32, &'a Compiled, i32)>,
        work: u64,
    ) -> Dag {
        let set = PathSet::gather(filters);
        let mut order: Vec<FieldId> = {
            let mut tested = vec![false; set.fields.len()];
            set.paths
                .iter()
                .flat_map(|p| &p.1)
                .for_each(|i| tested[i.field as usize] = true);
            (0..tested.len() as FieldId)
                .filter(|&f| tested[f as usize])
                .collect()
        };
        order.sort_by(|&a, &b| set.fields.order(a, b));
        let mut place = vec![u32::MAX; set.fields.len()];
        for (at, &f) in order.iter().enumerate() {
            place[f as usize] = at as u32;
        }
        let mut conds: Vec<Vec<Cond>> = vec![Vec::new(); order.len()];
        let mut b = Builder {
            slot: set.paths.iter().map(|p| p.0).collect(),
            labels: Vec::new(),
            steps: Vec::new(),
            places: order.len() as u32,
            states: Vec::new(),
            state_ids: HashMap::new(),
            lists: Vec::new(),
            list_ids: HashMap::new(),
            work: 0,
        };
        for (_, items) in &set.paths {
            let mut labels: Vec<(u32, &Label)> = items
                .iter()
                .map(|i| (place[i.field as usize], &i.label))
                .collect();
            labels.sort_by_key(|l| l.0);
            let mut steps = Vec::new();
            for &(at, l) in &labels {
                steps.push((at, 0));
                if let (true, Label::Cond(c)) = (has_extra(l), l) {
                    let cs = &mut conds[at as usize];
                    let k = cs.iter().position(|x| x == c).unwrap_or_else(|| {
                        cs.push(c.clone());
                        cs.len() - 1
                    }) as u32;
                    steps.push((at, k + 1));
                }
            }
            steps.sort_unstable();
            b.labels.push(labels);
            b.steps.push(steps);
        }
        let all: Vec<u32> = (0..set.paths.len() as u32).collect();
        let root = b.edge(0, 0, &all);
        let (mut nodes, mut rest) = (Vec::new(), Vec::new());
        let mut next = 0;
        while next < b.states.len() {
            let (at, stage, alive) = b.states[next].clone();
            next += 1;
            let built = if alive.is_empty() {
                Some(Node::Done)
            } else if b.work > work {
                None
            } else if stage == 0 {
                b.field(at, &alive, work)
            } else {
                Some(b.check(at, stage - 1, &alive))
            };
            nodes.push(built.unwrap_or_else(|| {
                let start = rest.len() as u32;
                rest.extend(alive.iter().copied());
                Node::Rest {
                    start,
                    end: rest.len() as u32,
                }
            }));
        }
        Dag {
            work: b.work,
            distinct_lists: b.list_ids.len(),
            lists: b.lists,
            set,
            order,
            conds,
            nodes,
            root,
            rest,
        }
    }

    /// Sizes (see [`DagStats`]).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::dag::Dag::build([]).stats().edges, 0);
    /// ```
    pub fn stats(&self) -> DagStats {
        let mut s = DagStats {
            paths: self.set.paths.len(),
            work: self.work,
            lists: self.distinct_lists,
            listed: self.lists.len(),
            ..DagStats::default()
        };
        for n in &self.nodes {
            s.bytes += std::mem::size_of::<Node>();
            match n {
                Node::Field { kids, .. } => {
                    s.fields += 1;
                    s.edges += kids.len();
                    s.bytes += kids.len() * (4 + std::mem::size_of::<Edge>());
                }
                Node::Check { .. } => s.checks += 1,
                Node::Done => {}
                Node::Rest { start, end } => {
                    s.rest += 1;
                    s.rest_paths += (end - start) as usize;
                }
            }
        }
        s.bytes += (self.lists.len() + self.rest.len()) * 4;
        s
    }

    /// The slots a packet collects along its walk into `s.slots`, with
    /// those of the paths that hold in a leaf the budget left unbuilt.
    fn walk(&self, pkt: &[u8], wirelen: u32, s: &mut DagScratch) {
        s.memo.next_packet(self.set.fields.len());
        s.work.packets += 1;
        s.slots.clear();
        let read = |at: &u32, memo: &mut Memo| {
            let f = self.order[*at as usize];
            self.set.fields.read(f, pkt, wirelen, memo)
        };
        let mut e = self.root;
        loop {
            s.slots
                .extend_from_slice(&self.lists[e.start as usize..e.end as usize]);
            e = match &self.nodes[e.to as usize] {
                Node::Field {
                    at,
                    starts,
                    kids,
                    abort,
                } => match read(at, &mut s.memo) {
                    Some(v) => kids[starts.partition_point(|&x| x <= v) - 1],
                    None => *abort,
                },
                Node::Check { at, cond, yes, no } => {
                    let c = &self.conds[*at as usize][*cond as usize];
                    match read(at, &mut s.memo) {
                        Some(v) if c.holds(v) => *yes,
                        _ => *no,
                    }
                }
                Node::Done => return,
                Node::Rest { start, end } => {
                    let paths = &self.rest[*start as usize..*end as usize];
                    s.work.checked += paths.len() as u64;
                    self.set
                        .push_holding(paths, pkt, wirelen, &mut s.memo, &mut s.slots);
                    return;
                }
            };
            s.work.tests += 1;
        }
    }

    /// Every filter that accepts the packet, as ids, each once, in no
    /// particular order.
    ///
    /// ```
    /// let dag = sluice_classifier::dag::Dag::build([]);
    /// let mut out = vec![1];
    /// dag.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut DagScratch, out: &mut Vec<u32>) {
        self.walk(pkt, wirelen, s);
        let DagScratch { slots, dedup, .. } = s;
        self.set
            .report(slots.iter().copied(), pkt, wirelen, dedup, out);
    }

    /// The accepting filter of highest priority, the lowest id among
    /// equals.
    ///
    /// ```
    /// let dag = sluice_classifier::dag::Dag::build([]);
    /// assert_eq!(dag.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut DagScratch) -> Option<u32> {
        self.walk(pkt, wirelen, s);
        self.set.first(s.slots.iter().copied(), pkt, wirelen)
    }
}
