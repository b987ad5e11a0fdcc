//! The machine functions of a tree's units, kept up to date as the tree
//! changes: only the units whose nodes changed are planned again, and
//! only those whose plan differs are compiled again.
//!
//! A [`Code`] is one state of them all, shared by the two copies of a
//! [`NativeTreeClassifier`](super::NativeTreeClassifier): the root's
//! function, the function of every other unit in a table by node (in
//! chunks, so that a change copies only the chunks it touches and the
//! code a reader still runs stays as it was), and where the probed tables
//! and set conditions are (each copy points the code at its own tables).
//!
//! Within an update's budget a function is compiled here only when it is
//! expected to fit in the time left (its plan's weight times the cost per
//! weight learnt so far); otherwise the worker compiles it and its units
//! wait, walked in Rust, until an update collects it.

use super::emit::{self, Consts};
use super::plan::{Ids, PNode, Plan};
use super::run::TreeFn;
use super::worker::{Job, Worker};
use crate::{CodePages, NativeError};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use sluice_classifier::tree::node::{summary, NodeId, NONE};
use sluice_classifier::tree::DecisionTree;
use std::collections::BTreeSet;
use std::sync::Arc;

use std::time::{Duration, Instant};

/// Units of at least this many nodes are compiled with their constants as
/// immediates, not as a shape's data: a large plan's shape is seldom
/// another unit's, and immediates fold into the compares and the marks'
/// addresses. The 956-filter broad mix went from 590 to 500 ns a packet
/// (corpus 600: 104 to 83 ns), generated sets the same (docs/merging.md).
pub(crate) const IMMEDIATE_NODES: usize = 16;

/// Node ids per chunk of the function table.
pub(crate) const CHUNK: usize = 4096;

/// A machine function: a whole plan's (the root's), or a shape's, which
/// every unit of that shape runs with its own data.
pub(crate) struct Function {
    pub func: TreeFn,
    pub bytes: usize,
    /// Holds the function's pages; dropped last.
    _pages: CodePages,
}

impl Function {
    /// Compile `root` (a whole plan, or a shape with [`Consts::Data`]).
    pub(crate) fn compile(root: &PNode, consts: Consts) -> Result<Function, NativeError> {
        let (func, pages, bytes) = emit::compile(root, consts)?;
        Ok(Function {
            func,
            bytes,
            _pages: pages,
        })
    }
}

// SAFETY: the pages are finalized (read and execute only) before the
// `Function` exists and freed only when it drops; the function reads the
// packet, tables and data it is given and writes only the caller's
// buffers, so any thread may call it and the value may move between
// threads.
unsafe impl Send for Function {}
// SAFETY: see `Send`; nothing changes after it is built.
unsafe impl Sync for Function {}

/// What compiling any function costs here besides its plan's weight
/// (Cranelift's setup, finalising the pages): measured 150-350 µs for
/// the smallest plans, 200-500 µs for plans of weight 6-26.
const FIXED_COST: Duration = Duration::from_micros(150);

/// Functions kept unused, per cache: a filter removed and inserted again,
/// or a table that comes and goes with a block of keys, finds its code
/// still there instead of compiling it again.
const SPARE: usize = 64;

/// Functions by plan: those a unit uses, and up to [`SPARE`] of the most
/// recently used others.
#[derive(Default)]
struct FnCache {
    map: HashMap<PNode, (Arc<Function>, u64)>,
    /// Counts [`FnCache::tidy`] calls: when a function was last used.
    epoch: u64,
}

impl FnCache {
    fn get(&mut self, plan: &PNode) -> Option<Arc<Function>> {
        let epoch = self.epoch;
        self.map.get_mut(plan).map(|(f, seen)| {
            *seen = epoch;
            f.clone()
        })
    }

    fn insert(&mut self, plan: PNode, f: Arc<Function>) {
        self.map.insert(plan, (f, self.epoch));
    }

    /// After an update: drop the unused functions past the [`SPARE`] most
    /// recently used.
    fn tidy(&mut self) {
        self.epoch += 1;
        let mut unused: Vec<u64> = Vec::new();
        for (f, seen) in self.map.values_mut() {
            if Arc::strong_count(f) > 1 {
                *seen = self.epoch;
            } else {
                unused.push(*seen);
            }
        }
        if unused.len() <= SPARE {
            return;
        }
        // Keep the SPARE most recently used: those seen after the
        // SPARE-th latest epoch, and as many seen at it as there is room
        // for (no plan is copied to find them).
        let (_, &mut at, _) = unused.select_nth_unstable_by(SPARE - 1, |a, b| b.cmp(a));
        let mut room = SPARE - unused.iter().filter(|&&e| e > at).count();
        self.map.retain(|_, (f, seen)| {
            if Arc::strong_count(f) > 1 || *seen > at {
                return true;
            }
            let keep = *seen == at && room > 0;
            room -= usize::from(keep);
            keep
        });
    }

    /// Functions a unit uses.
    fn in_use(&self) -> usize {
        self.map
            .values()
            .filter(|(f, _)| Arc::strong_count(f) > 1)
            .count()
    }

    /// Code bytes held.
    fn bytes(&self) -> usize {
        self.map.values().map(|(f, _)| f.bytes).sum()
    }
}

/// One unit: its plan, its function (none while its compilation waits:
/// the tree's walk runs it then), and the data the function reads.
pub(crate) struct UnitCode {
    pub plan: Arc<Plan>,
    pub function: Option<Arc<Function>>,
    pub data: Box<[u32]>,
}

/// The (function, data block) of `CHUNK` consecutive node ids (function
/// 0 where a node has no unit), and the units that own them.
#[derive(Clone)]
pub(crate) struct Chunk {
    fns: Box<[usize]>,
    keep: Box<[Option<Arc<UnitCode>>]>,
}

impl Chunk {
    fn empty() -> Chunk {
        Chunk {
            fns: vec![0; 2 * CHUNK].into(),
            keep: vec![None; CHUNK].into(),
        }
    }
}

/// One state of a tree's machine code (see the module doc).
pub struct Code {
    /// The root's unit (its function may wait: then the tree's walk runs).
    pub(crate) root: Arc<UnitCode>,
    /// Holds the arrays `chunk_ptrs` points into, and their units.
    _chunks: Vec<Arc<Chunk>>,
    /// `chunks`' function arrays, as the code reads them.
    pub(crate) chunk_ptrs: Vec<*const usize>,
    /// Where each probed table number is.
    pub(crate) tables: Arc<[Option<(NodeId, usize)>]>,
    /// Where each set condition number is.
    pub(crate) sets: Arc<[Option<(NodeId, usize)>]>,
    pub(crate) units: usize,
    /// Units whose compilation waits for a later update.
    pub(crate) pending: usize,
    pub(crate) shapes: usize,
    pub(crate) bytes: usize,
    pub(crate) in_place: usize,
}

// SAFETY: `chunk_ptrs` point into `chunks`' arrays, which this value keeps
// alive and never changes (a change makes new chunks).
unsafe impl Send for Code {}
// SAFETY: see `Send`: read only.
unsafe impl Sync for Code {}

/// The code generator's state, shared by the two copies of a classifier.
#[derive(Default)]
pub(crate) struct Compiler {
    units: HashMap<NodeId, Arc<UnitCode>>,
    /// The function of each shape in use (and a few not).
    shapes: FnCache,
    /// The functions with immediates (the root's and large units'): in
    /// use, made by the worker for a next update, or kept.
    roots: FnCache,
    /// Compiles what a budget has no room for.
    worker: Worker,
    /// What compiling costs per unit of a plan's weight, learnt (ns).
    per_weight: f64,
    /// A job the worker could not compile: the next update fails with it.
    failed: Option<NativeError>,
    /// The unit each node compiled in place belongs to.
    unit_of: HashMap<NodeId, NodeId>,
    ids: Ids,
    chunks: Vec<Arc<Chunk>>,
    pub compilations: usize,
    /// Of the writer's updates.
    pub compile_time: Duration,
    /// Of the worker's jobs.
    pub background_time: Duration,
    bytes: usize,
    in_place: usize,
    /// Units planned whose compilation waits (a budget ran out).
    pending: BTreeSet<NodeId>,
    /// When the update in progress may stop compiling.
    deadline: Option<Instant>,
    /// During a first build: the functions to compile once every unit is
    /// planned, on every core (with their plans' weights).
    batch: Option<HashMap<Job, usize>>,
}

/// True for a node that is not (or no longer) part of the tree.
fn dead(t: &DecisionTree, n: NodeId) -> bool {
    let all = t.nodes().all();
    match all.get(n as usize) {
        None => true,
        Some(node) => {
            n != t.nodes().root()
                && node.field.is_none()
                && node.skip == NONE
                && node.leaf.is_empty()
        }
    }
}

/// True for a node a table cannot report from its datum: it needs code.
fn needs_unit(t: &DecisionTree, n: NodeId) -> bool {
    !dead(t, n) && summary(t.nodes().get(n)) == 0
}

impl Compiler {
    /// Bring the code up to date after the tree's nodes `changed`.
    ///
    /// With a `budget`, compilation stops once it is spent: the units left
    /// run through the tree's walk (correct, slower) and are compiled by
    /// later updates.
    pub(crate) fn update(
        &mut self,
        t: &DecisionTree,
        changed: &[NodeId],
        budget: Option<Duration>,
    ) -> Result<Arc<Code>, NativeError> {
        self.deadline = budget.map(|b| Instant::now() + b);
        // What the worker finished; an update with nothing else to do
        // waits for it, within its budget.
        let wait = match budget {
            Some(b) if changed.is_empty() && !self.pending.is_empty() => b,
            _ => Duration::ZERO,
        };
        self.collect(wait);
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let root = t.nodes().root();
        // The first build looks at every node, whatever was recorded.
        let all: Vec<NodeId>;
        let changed = if self.units.is_empty() {
            all = (0..t.nodes().all().len() as NodeId).collect();
            &all
        } else {
            changed
        };
        let mut todo: BTreeSet<NodeId> = BTreeSet::new();
        if !self.units.contains_key(&root) {
            todo.insert(root);
        }
        for d in changed {
            if let Some(&u) = self.unit_of.get(d) {
                todo.insert(u);
            }
            if self.units.contains_key(d) {
                todo.insert(*d);
            }
        }
        // The first build compiles everything, whatever the budget, once
        // every unit is planned and on every core.
        if self.units.is_empty() {
            self.deadline = None;
            self.batch = Some(HashMap::default());
        }
        let mut done: HashSet<NodeId> = HashSet::default();
        self.work(t, &mut todo, &mut done)?;
        // Nodes in no unit that need code are reached through a large
        // table: each is a unit of its own.
        for &d in changed {
            if !self.unit_of.contains_key(&d) && needs_unit(t, d) {
                todo.insert(d);
            }
        }
        self.work(t, &mut todo, &mut done)?;
        if let Some(jobs) = self.batch.take() {
            self.compile_batch(jobs)?;
        }
        // Units planned earlier whose compilation waited: the worker's
        // functions, or compiled here while time is left.
        for u in std::mem::take(&mut self.pending) {
            let Some(code) = self.units.get(&u).cloned() else {
                continue;
            };
            if code.function.is_some() {
                continue;
            }
            let code = Arc::new(self.code_for(code.plan.clone(), u == root)?);
            if code.function.is_none() {
                self.pending.insert(u);
            }
            self.set_fn(u, Some(code.clone()));
            self.units.insert(u, code);
        }
        let chunks = t.nodes().all().len().div_ceil(CHUNK);
        if self.chunks.len() < chunks {
            let empty = Arc::new(Chunk::empty());
            self.chunks.resize(chunks, empty);
        }
        self.shapes.tidy();
        self.roots.tidy();
        self.bytes = self.shapes.bytes() + self.roots.bytes();
        let root = self.units.get(&root).expect("the root has a unit").clone();
        self.pending
            .retain(|u| self.units.get(u).is_some_and(|c| c.function.is_none()));
        Ok(Arc::new(Code {
            root,
            chunk_ptrs: self.chunks.iter().map(|c| c.fns.as_ptr()).collect(),
            _chunks: self.chunks.clone(),
            tables: self.ids.tables.all().into(),
            sets: self.ids.sets.all().into(),
            units: self.units.len(),
            pending: self.pending.len(),
            shapes: self.shapes.in_use(),
            bytes: self.bytes,
            in_place: self.in_place,
        }))
    }

    fn work(
        &mut self,
        t: &DecisionTree,
        todo: &mut BTreeSet<NodeId>,
        done: &mut HashSet<NodeId>,
    ) -> Result<(), NativeError> {
        while let Some(u) = todo.pop_first() {
            // A node another unit has just taken in needs no unit. It is
            // not done: a unit planned later in this update may take it
            // out again and call it (past its size limit), and then it
            // must be planned, or it runs through the tree's walk.
            if matches!(self.unit_of.get(&u), Some(&o) if o != u) {
                continue;
            }
            if !done.insert(u) {
                continue;
            }
            // A unit whose first node is gone, or now only accepts one
            // filter (its table reports it), is no longer needed.
            if u != t.nodes().root() && !needs_unit(t, u) {
                for m in self.drop_unit(u) {
                    if m != u && !self.unit_of.contains_key(&m) && needs_unit(t, m) {
                        todo.insert(m);
                    }
                }
                continue;
            }
            self.replan(t, u, todo)?;
        }
        Ok(())
    }

    /// Plan unit `u` again (compiling it when its plan changed); units it
    /// now needs go to `todo`.
    fn replan(
        &mut self,
        t: &DecisionTree,
        u: NodeId,
        todo: &mut BTreeSet<NodeId>,
    ) -> Result<(), NativeError> {
        let old = self.units.get(&u).cloned();
        if let Some(o) = &old {
            for m in &o.plan.members {
                if self.unit_of.get(m) == Some(&u) {
                    self.unit_of.remove(m);
                }
            }
        }
        // New numbers first, so unchanged tables keep theirs.
        let plan = Arc::new(Plan::unit(t, u, &mut self.ids));
        if let Some(o) = &old {
            o.plan.release(&mut self.ids);
        }
        for &m in &plan.members {
            if m != u && self.units.contains_key(&m) {
                // Now compiled in place here.
                self.drop_unit(m);
            }
            self.unit_of.insert(m, u);
        }
        for &c in &plan.calls {
            if !self.units.contains_key(&c) {
                todo.insert(c);
            }
        }
        if let Some(o) = &old {
            for &m in &o.plan.members {
                if !self.unit_of.contains_key(&m) && needs_unit(t, m) {
                    todo.insert(m);
                }
            }
        }
        let code = match &old {
            Some(o) if *o.plan == *plan && o.function.is_some() => o.clone(),
            _ => {
                let code = self.code_for(plan, u == t.nodes().root())?;
                if code.function.is_none() {
                    self.pending.insert(u);
                }
                Arc::new(code)
            }
        };
        if let Some(o) = &old {
            self.in_place -= o.plan.members.len();
        }
        self.in_place += code.plan.members.len();
        self.set_fn(u, Some(code.clone()));
        self.units.insert(u, code);
        Ok(())
    }

    /// The nodes some unit calls that have no function to call (each
    /// runs through the tree's walk in Rust): none once an update
    /// without a budget is done (for tests).
    #[cfg(test)]
    pub fn calls_without_code(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self
            .units
            .values()
            .flat_map(|u| u.plan.calls.iter().copied())
            .filter(|c| self.units.get(c).map_or(true, |u| u.function.is_none()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// The first nodes of the units, ascending (for tests).
    #[cfg(test)]
    pub fn unit_roots(&self) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self.units.keys().copied().collect();
        v.sort_unstable();
        v
    }

    /// Drop unit `u`; the nodes it had compiled in place.
    fn drop_unit(&mut self, u: NodeId) -> Vec<NodeId> {
        let Some(o) = self.units.remove(&u) else {
            return Vec::new();
        };
        o.plan.release(&mut self.ids);
        for m in &o.plan.members {
            if self.unit_of.get(m) == Some(&u) {
                self.unit_of.remove(m);
            }
        }
        self.in_place -= o.plan.members.len();
        self.set_fn(u, None);
        o.plan.members.clone()
    }

    /// A unit's code: the root's, and any unit of [`IMMEDIATE_NODES`] or
    /// more, compiled with its constants as immediates (the root runs for
    /// every packet; a large plan's shape is rarely another unit's), any
    /// other unit the function of its shape (compiled the first time the
    /// shape is seen) with its constants as data. Within a budget, a
    /// function that would not fit in what is left goes to the worker: the
    /// unit waits (no function).
    fn code_for(&mut self, plan: Arc<Plan>, root: bool) -> Result<UnitCode, NativeError> {
        let (job, data): (Job, Vec<u32>) = if root || plan.members.len() >= IMMEDIATE_NODES {
            ((plan.root.clone(), Consts::Immediate), Vec::new())
        } else {
            let (shape, data) = plan.root.shape();
            ((shape, Consts::Data), data)
        };
        let function = match self.cache(job.1).get(&job.0) {
            Some(f) => Some(f),
            None if self.batch.is_some() => {
                if let Some(b) = self.batch.as_mut() {
                    b.insert(job, plan.weight);
                }
                None
            }
            // Here when it fits, or when no thread can take it.
            None if self.fits(&plan) || !self.worker.submit(job.clone()) => {
                let f = Arc::new(self.compile(&job.0, job.1, plan.weight)?);
                self.cache(job.1).insert(job.0, f.clone());
                Some(f)
            }
            None => None,
        };
        Ok(UnitCode {
            plan,
            function,
            data: data.into(),
        })
    }

    /// The functions compiled with constants of this kind.
    fn cache(&mut self, consts: Consts) -> &mut FnCache {
        match consts {
            Consts::Immediate => &mut self.roots,
            Consts::Data => &mut self.shapes,
        }
    }

    /// True when compiling `plan` here is expected to end within the
    /// update's budget (always without one).
    fn fits(&self, plan: &Plan) -> bool {
        let Some(deadline) = self.deadline else {
            return true;
        };
        let cost =
            FIXED_COST + Duration::from_nanos((self.per_weight() * plan.weight as f64) as u64);
        Instant::now() + cost <= deadline
    }

    fn per_weight(&self) -> f64 {
        if self.per_weight > 0.0 {
            self.per_weight
        } else {
            // Before the first measurement: about what Cranelift takes here.
            40_000.0
        }
    }

    fn compile(
        &mut self,
        root: &PNode,
        consts: Consts,
        weight: usize,
    ) -> Result<Function, NativeError> {
        let start = Instant::now();
        let f = Function::compile(root, consts)?;
        let took = start.elapsed();
        self.compilations += 1;
        self.compile_time += took;
        self.learn(took, weight);
        Ok(f)
    }

    /// Compile a first build's functions on every core, into the caches
    /// (the units waiting for them take them next).
    fn compile_batch(&mut self, jobs: HashMap<Job, usize>) -> Result<(), NativeError> {
        // The heaviest first, so that no large function starts last and
        // keeps one core busy alone.
        let mut jobs: Vec<(Job, usize)> = jobs.into_iter().collect();
        jobs.sort_by_key(|j| std::cmp::Reverse(j.1));
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = cores.min(jobs.len() / 4).max(1);
        let start = Instant::now();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let run = || {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((job, weight)) = jobs.get(i) else {
                    return out;
                };
                let t = Instant::now();
                out.push((i, Function::compile(&job.0, job.1), t.elapsed(), *weight));
            }
        };
        let done: Vec<_> = match threads {
            1 => run(),
            _ => std::thread::scope(|s| {
                let handles: Vec<_> = (0..threads).map(|_| s.spawn(run)).collect();
                handles
                    .into_iter()
                    .flat_map(|h| match h.join() {
                        Ok(v) => v,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect()
            }),
        };
        self.compile_time += start.elapsed();
        for (i, f, took, weight) in done {
            let f = Arc::new(f?);
            self.compilations += 1;
            self.learn(took, weight);
            let (node, consts) = jobs[i].0.clone();
            self.cache(consts).insert(node, f);
        }
        Ok(())
    }

    /// Update the cost per weight with one compilation's.
    fn learn(&mut self, took: Duration, weight: usize) {
        let x = took.saturating_sub(FIXED_COST).as_nanos() as f64 / weight.max(1) as f64;
        self.per_weight = match self.per_weight > 0.0 {
            true => 0.8 * self.per_weight + 0.2 * x,
            false => x,
        };
    }

    /// Take the worker's finished functions into the caches, waiting up
    /// to `wait` for one when none has finished.
    fn collect(&mut self, wait: Duration) {
        for ((node, consts), f, took) in self.worker.collect(wait) {
            match f {
                Ok(f) => {
                    self.compilations += 1;
                    self.background_time += took;
                    self.cache(consts).insert(node, Arc::new(f));
                }
                Err(e) => self.failed = Some(e),
            }
        }
    }

    /// Point node `n`'s entry of the function table at a unit (copying its
    /// chunk if a published `Code` still shares it).
    fn set_fn(&mut self, n: NodeId, code: Option<Arc<UnitCode>>) {
        let (c, i) = (n as usize / CHUNK, n as usize % CHUNK);
        if self.chunks.len() <= c {
            let empty = Arc::new(Chunk::empty());
            self.chunks.resize(c + 1, empty);
        }
        let chunk = Arc::make_mut(&mut self.chunks[c]);
        let func = code.as_ref().and_then(|u| u.function.as_ref());
        chunk.fns[2 * i] = func.map_or(0, |f| f.func as usize);
        chunk.fns[2 * i + 1] = code.as_ref().map_or(0, |u| u.data.as_ptr() as usize);
        chunk.keep[i] = code;
    }
}

#[cfg(test)]
mod fn_cache_tests {
    use super::*;

    /// Past the spare functions, the least recently used unused ones go;
    /// the used ones and the [`SPARE`] latest unused ones stay.
    #[test]
    fn tidy_keeps_used_functions_and_the_latest_spare_ones() {
        let mut cache = FnCache::default();
        let plan = |i: u32| PNode {
            leaf: vec![(i, false)],
            ..PNode::default()
        };
        let mut held = Vec::new();
        let n = SPARE as u32 + 40;
        for i in 0..n {
            let f = Arc::new(Function::compile(&plan(i), Consts::Immediate).expect("compiles"));
            if i % 10 == 0 {
                held.push(f.clone());
            }
            cache.insert(plan(i), f);
            // Two plans each epoch, so that an epoch is cut in the middle.
            if i % 2 == 1 {
                cache.tidy();
            }
        }
        cache.tidy();
        let used = held.len();
        assert_eq!(cache.map.len(), used + SPARE);
        assert_eq!(cache.in_use(), used);
        for i in (0..n).step_by(10) {
            assert!(
                cache.map.contains_key(&plan(i)),
                "used function {i} dropped"
            );
        }
        // The unused, latest first; the boundary may cut an epoch of two.
        let unused: Vec<u32> = (0..n).rev().filter(|i| i % 10 != 0).collect();
        for &i in &unused[..SPARE - 2] {
            assert!(
                cache.map.contains_key(&plan(i)),
                "recent function {i} dropped"
            );
        }
        for &i in &unused[SPARE + 2..] {
            assert!(!cache.map.contains_key(&plan(i)), "old function {i} kept");
        }
    }
}
