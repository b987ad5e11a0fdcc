//! The merged decision tree compiled to machine code: DPF's dynamic code
//! generation for the whole set of filters at once.
//!
//! [`NativeTree`] keeps a [`DecisionTree`] and machine functions made
//! from its units' [`plan`]s: the tree's tests in the tree's order, as
//! compares and branches with the constants as immediates, the large
//! tables probed in place, the units reached through them called
//! (`emit.rs`). A change to the filters makes the code stale until
//! [`NativeTree::update`]; until then classification walks the tree in
//! Rust, so stale code never runs. An update plans again only the units
//! whose nodes changed and compiles only those whose plan changed, so a
//! key-only insert into a large table compiles nothing (`units.rs`). A
//! publish of the concurrent form compiles within [`PUBLISH_BUDGET`] and
//! hands what does not fit to a worker thread (`worker.rs`).
//!
//! Every answer is the tree's own ([`DecisionTree::classify`] and
//! [`DecisionTree::classify_first`]): the code only replaces the walk.
//! [`NativeTreeClassifier`] is the concurrent form (one writer, readers
//! that never wait), on [`sluice_classifier::Classifier`].
//!
//! ```
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_native::tree::NativeTree;
//! let mut t = NativeTree::new();
//! let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
//! t.insert(0, &Compiled::new(port(80)), 0);
//! t.insert(1, &Compiled::new(port(443)), 0);
//! t.update();
//! let mut out = Vec::new();
//! t.classify(&[0, 0, 1, 187], 4, &mut Default::default(), &mut out);
//! assert_eq!(out, vec![1]);
//! assert!(t.native_stats().code_bytes > 0);
//! ```

mod emit;
pub mod plan;
mod run;
mod units;
mod worker;

use run::TableDesc;
use sluice_classifier::merged::Compiled;
use sluice_classifier::tree::flow::{FlowCache, FlowStats, Lookup};
use sluice_classifier::tree::{DecisionTree, Scratch};
use sluice_classifier::{Change, Classifier, Engine, Reader};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long one publish of a [`NativeTreeClassifier`] may spend
/// compiling. A function expected to take longer (from its plan's size
/// and the compilations so far) is compiled by a worker thread instead,
/// and collected by a later publish; until then its part of the tree is
/// walked in Rust. A publish with nothing new to do waits for the worker
/// up to this long ([`sluice_classifier::Classifier::settle`] publishes
/// until nothing waits).
pub const PUBLISH_BUDGET: Duration = Duration::from_micros(500);
pub use units::Code;

/// The flow cache is used from this many filters on: below, the code is
/// faster than a lookup.
pub const FLOW_CACHE_MIN: usize = 1000;

/// How many packets ahead a batch prefetches the packets' first bytes.
const AHEAD: usize = 4;
use units::Compiler;

/// What the code generator did, for tests and benchmarks.
///
/// ```
/// assert_eq!(sluice_native::tree::NativeTree::new().native_stats().compilations, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeTreeStats {
    /// Unit functions compiled so far.
    pub compilations: usize,
    /// Units (parts of the tree with code of their own) of the current code.
    pub units: usize,
    /// Distinct functions the small units share (units of fewer than
    /// `IMMEDIATE_NODES` (16) nodes that differ only in constants run
    /// one function with their own data); the root and larger units have
    /// functions of their own.
    pub shapes: usize,
    /// Size of the code held: the current code, and functions no unit
    /// uses that are kept for reuse (a few dozen at most).
    pub code_bytes: usize,
    /// Nodes compiled in place.
    pub nodes: usize,
    /// Numbers given to probed tables.
    pub tables: usize,
    /// Units whose code waits for a later update.
    pub pending: usize,
    /// Time the updates spent compiling, in total.
    pub compile_time: Duration,
    /// Time the worker thread spent compiling what did not fit in a
    /// publish's budget, in total.
    pub background_time: Duration,
}

/// Per-reader memory of a [`NativeTree`].
///
/// ```
/// use sluice_ir::{Filter, Pred, Size, Val};
/// let mut t = sluice_native::tree::NativeTree::new();
/// t.insert(1, &sluice_classifier::merged::Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1)), 0);
/// t.update();
/// // One scratch serves packet after packet.
/// let mut s = sluice_native::tree::NativeScratch::default();
/// assert_eq!(t.classify_first(&[7], 1, &mut s), Some(1));
/// assert_eq!(t.classify_first(&[8], 1, &mut s), None);
/// assert_eq!(t.classify_first(&[7], 1, &mut s), Some(1));
/// ```
#[derive(Debug)]
pub struct NativeScratch {
    tree: Scratch,
    slots: Vec<u32>,
    seen: run::Seen,
    /// This reader's flow cache ([`sluice_classifier::tree::flow`]), on
    /// by default; `None` when turned off.
    flow: Option<Box<FlowCache>>,
    /// The cache is used at every set size.
    always: bool,
}

impl Default for NativeScratch {
    fn default() -> NativeScratch {
        NativeScratch {
            tree: Scratch::default(),
            slots: Vec::new(),
            seen: run::Seen::default(),
            flow: Some(Box::default()),
            always: false,
        }
    }
}

impl Clone for NativeScratch {
    /// A fresh scratch with the same settings (a cache is per reader).
    fn clone(&self) -> NativeScratch {
        let mut s = NativeScratch::default();
        s.set_flow_cache(self.flow.is_some());
        if self.always {
            s.set_flow_cache_always();
        }
        s
    }
}

impl NativeScratch {
    /// Turn this reader's flow cache on (the default) or off. The cache
    /// keeps the flows of the traffic this reader classifies, keyed by
    /// the fields the tree read for them, and steps aside by itself on
    /// traffic whose flows do not repeat
    /// ([`sluice_classifier::tree::flow`]).
    ///
    /// ```
    /// let mut s = sluice_native::tree::NativeScratch::default();
    /// s.set_flow_cache(false);
    /// assert!(s.flow_stats().is_none());
    /// ```
    pub fn set_flow_cache(&mut self, on: bool) {
        match (on, self.flow.is_some()) {
            (true, false) => self.flow = Some(Box::default()),
            (false, true) => self.flow = None,
            _ => {}
        }
    }

    /// Turn the flow cache on for every packet of every set, whether it
    /// pays or not (tests; benchmarks of the cache alone).
    ///
    /// ```
    /// let mut s = sluice_native::tree::NativeScratch::default();
    /// s.set_flow_cache_always();
    /// assert!(s.flow_stats().is_some());
    /// ```
    pub fn set_flow_cache_always(&mut self) {
        let mut f = Box::<FlowCache>::default();
        f.set_always(true);
        self.flow = Some(f);
        self.always = true;
    }

    /// Hold at most `flows` flows in the flow cache, when it is on (see
    /// [`FlowCache::set_capacity`]; tests of eviction).
    ///
    /// ```
    /// let mut s = sluice_native::tree::NativeScratch::default();
    /// s.set_flow_cache_capacity(16);
    /// ```
    pub fn set_flow_cache_capacity(&mut self, flows: usize) {
        if let Some(f) = self.flow.as_deref_mut() {
            f.set_capacity(flows);
        }
    }

    /// What the flow cache did, when it is on.
    ///
    /// ```
    /// let s = sluice_native::tree::NativeScratch::default();
    /// assert_eq!(s.flow_stats().unwrap().hits, 0);
    /// ```
    pub fn flow_stats(&self) -> Option<FlowStats> {
        self.flow.as_ref().map(|f| f.stats())
    }
}

/// A decision tree with its machine code (see the module doc).
///
/// ```
/// let t = sluice_native::tree::NativeTree::new();
/// assert!(t.tree().is_empty());
/// ```
pub struct NativeTree {
    tree: DecisionTree,
    code: Option<Arc<Code>>,
    /// The code's probed tables in *this* copy of the tree, by number.
    descs: Vec<TableDesc>,
    /// True when `code` fits the tree as it is.
    fresh: bool,
    /// False: never compile (the tree's walk only).
    native: bool,
    /// The code generator, shared by the two copies of a classifier.
    compiler: Arc<Mutex<Compiler>>,
}

// SAFETY: the raw pointers in `descs` point into `self.tree`'s tables and
// are only read (by generated code, through `&self`); they are rebuilt
// whenever the tree changes, before the code runs again (`fresh`), and
// changing the tree needs `&mut self`. The compiler is behind a mutex.
// Nothing is tied to a thread.
unsafe impl Send for NativeTree {}
// SAFETY: see `Send`: through `&self` everything is read only (the code
// writes only into the caller's scratch buffer).
unsafe impl Sync for NativeTree {}

impl Clone for NativeTree {
    /// A tree with code of its own to come: the clone's code generator
    /// starts afresh (the two copies of a classifier share one instead,
    /// see `sync_with`).
    fn clone(&self) -> NativeTree {
        let mut tree = self.tree.clone();
        tree.take_changed();
        let mut t = NativeTree {
            tree,
            code: None,
            descs: Vec::new(),
            fresh: false,
            native: self.native,
            compiler: Arc::default(),
        };
        if self.native {
            t.update();
        }
        t
    }
}

impl std::fmt::Debug for NativeTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeTree")
            .field("filters", &self.tree.len())
            .field("stats", &self.native_stats())
            .finish_non_exhaustive()
    }
}

impl Default for NativeTree {
    fn default() -> Self {
        NativeTree::new()
    }
}

impl NativeTree {
    /// An empty tree.
    ///
    /// ```
    /// assert_eq!(sluice_native::tree::NativeTree::new().tree().len(), 0);
    /// ```
    pub fn new() -> NativeTree {
        NativeTree::from_tree(DecisionTree::default())
    }

    /// Compile an existing tree (at the next [`NativeTree::update`]).
    ///
    /// ```
    /// let t = sluice_native::tree::NativeTree::from_tree(Default::default());
    /// assert!(t.tree().is_empty());
    /// ```
    pub fn from_tree(mut tree: DecisionTree) -> NativeTree {
        tree.track_changes(true);
        NativeTree {
            tree,
            code: None,
            descs: Vec::new(),
            fresh: false,
            native: cfg!(any(target_arch = "x86_64", target_arch = "aarch64")),
            compiler: Arc::default(),
        }
    }

    /// A tree that never compiles: the same answers from the tree's walk
    /// in Rust (for comparing the two).
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::interpreted(Default::default());
    /// t.update();
    /// assert_eq!(t.native_stats().compilations, 0);
    /// ```
    pub fn interpreted(tree: DecisionTree) -> NativeTree {
        NativeTree {
            native: false,
            ..NativeTree::from_tree(tree)
        }
    }

    /// The tree.
    ///
    /// ```
    /// assert!(sluice_native::tree::NativeTree::new().tree().is_empty());
    /// ```
    pub fn tree(&self) -> &DecisionTree {
        &self.tree
    }

    /// Add a filter (see [`DecisionTree::insert`]).
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::new();
    /// t.insert(1, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.tree().len(), 1);
    /// ```
    pub fn insert(&mut self, id: u32, c: &Compiled, priority: i32) {
        self.fresh = false;
        self.tree.insert(id, c, priority);
        self.whole_as_code(id, c);
    }

    /// After inserting filter `id`: when it runs whole, run it as native
    /// code (when that compiles), not through the BPF interpreter.
    fn whole_as_code(&mut self, id: u32, c: &Compiled) {
        if self.tree.runs_whole(id) {
            if let Ok(code) = crate::NativeFilter::compile(c.filter()) {
                self.tree.set_whole_code(id, Arc::new(code));
            }
        }
    }

    /// Add filters copied by key (see [`DecisionTree::insert_key_block`]).
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::new();
    /// assert!(!t.insert_key_block(1, 0, 1, vec![2].into(), 0));
    /// ```
    pub fn insert_key_block(
        &mut self,
        first: u32,
        like: u32,
        width: usize,
        keys: Arc<[u32]>,
        priority: i32,
    ) -> bool {
        self.fresh = false;
        self.tree
            .insert_key_block(first, like, width, keys, priority)
    }

    /// Remove a filter.
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::new();
    /// t.insert(3, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// t.update();
    /// assert_eq!(t.classify_first(&[], 0, &mut Default::default()), Some(3));
    /// t.remove(3);
    /// t.update();
    /// assert_eq!(t.classify_first(&[], 0, &mut Default::default()), None);
    /// assert!(t.tree().is_empty());
    /// ```
    pub fn remove(&mut self, id: u32) {
        self.fresh = false;
        self.tree.remove(id);
    }

    /// Bring the code up to date with the tree (compiling only what
    /// changed).
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::new();
    /// t.update();
    /// t.update();
    /// assert_eq!(t.native_stats().compilations, 1);
    /// ```
    pub fn update(&mut self) {
        let code = self.build(None);
        self.install(code);
    }

    /// True when every unit has its code (an update within a budget may
    /// leave some to later ones; their parts of the tree are walked in
    /// Rust until then).
    ///
    /// ```
    /// let mut t = sluice_native::tree::NativeTree::new();
    /// t.update();
    /// assert!(t.settled());
    /// ```
    pub fn settled(&self) -> bool {
        self.code.as_ref().map_or(true, |c| c.pending == 0)
    }

    /// The code for the tree as it is (none where code cannot be made:
    /// then the tree's walk answers).
    fn build(&mut self, budget: Option<Duration>) -> Option<Arc<Code>> {
        let changed = self.tree.take_changed();
        if !self.native {
            return None;
        }
        let mut c = self.compiler();
        match c.update(&self.tree, &changed, budget) {
            Ok(code) => Some(code),
            Err(_) => {
                // A partial state is no use: start afresh next time.
                *c = Compiler::default();
                None
            }
        }
    }

    fn compiler(&self) -> std::sync::MutexGuard<'_, Compiler> {
        // A panic while it was held leaves a state that may not fit the
        // tree: start afresh.
        self.compiler.lock().unwrap_or_else(|e| {
            let mut g = e.into_inner();
            *g = Compiler::default();
            g
        })
    }

    /// Use `code`, built for a tree of this shape.
    fn install(&mut self, code: Option<Arc<Code>>) {
        self.descs = match &code {
            Some(c) => c
                .tables
                .iter()
                .map(|at| match at {
                    Some(at) => {
                        let t = plan::table(&self.tree, *at);
                        TableDesc {
                            words: t.words().as_ptr(),
                            mask: (t.slots() - 1) as u64,
                        }
                    }
                    None => TableDesc {
                        words: std::ptr::null(),
                        mask: 0,
                    },
                })
                .collect(),
            None => Vec::new(),
        };
        self.code = code;
        self.fresh = true;
    }

    /// What the code generator did.
    ///
    /// ```
    /// assert_eq!(sluice_native::tree::NativeTree::new().native_stats().code_bytes, 0);
    /// ```
    pub fn native_stats(&self) -> NativeTreeStats {
        let c = self.compiler();
        let mut s = NativeTreeStats {
            compilations: c.compilations,
            compile_time: c.compile_time,
            background_time: c.background_time,
            ..NativeTreeStats::default()
        };
        if let Some(code) = &self.code {
            s.units = code.units;
            s.pending = code.pending;
            s.shapes = code.shapes;
            s.code_bytes = code.bytes;
            s.nodes = code.in_place;
            s.tables = code.tables.iter().filter(|t| t.is_some()).count();
        }
        s
    }

    /// The slots the tree finds for a packet, into `s.slots`; true when
    /// each is there once (the code's), false when a filter found on
    /// several paths is there as often (the tree's walk).
    #[inline]
    fn slots(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch) -> bool {
        s.slots.clear();
        if self.run_code(pkt, wirelen, s, None) {
            return true;
        }
        self.walk(pkt, wirelen, s);
        false
    }

    /// The tree's walk in Rust from the root, into `s.slots` (cleared
    /// first): a filter found on several paths is there as often.
    fn walk(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch) {
        s.slots.clear();
        s.tree.memo().next_packet(0);
        let root = self.tree.nodes().root();
        self.tree
            .visit_from(root, pkt, wirelen, &mut s.tree, &mut s.slots);
    }

    /// Run the code on a packet, when it fits the tree: the slots it finds
    /// (each once) are appended to `into`, or to `s.slots` where `None`.
    /// False when there is no code to run (then nothing is appended).
    #[inline]
    fn run_code(
        &self,
        pkt: &[u8],
        wirelen: u32,
        s: &mut NativeScratch,
        into: Option<&mut Vec<u32>>,
    ) -> bool {
        let Some(c) = self.code.as_deref().filter(|_| self.fresh) else {
            return false;
        };
        let Some(root) = c.root.function.as_ref() else {
            return false;
        };
        let target = run::Target {
            func: root.func,
            fns: c.chunk_ptrs.as_ptr(),
            tree: &self.tree,
            sets: &c.sets,
            tables: &self.descs,
        };
        let out = into.unwrap_or(&mut s.slots);
        // SAFETY: `c` was built for a tree of this shape (it is fresh) and
        // `descs` describes this tree's tables by the code's numbers
        // (`install`).
        unsafe { run::call(&target, pkt, wirelen, &mut s.tree, &mut s.seen, out) };
        true
    }

    /// The tree slots of the packet's filters from the reader's flow
    /// cache, learnt now if it missed; `None` when the cache is off or
    /// stepping aside (then the code answers).
    #[inline]
    fn cached<'s>(&self, pkt: &[u8], wirelen: u32, s: &'s mut NativeScratch) -> Option<&'s [u32]> {
        let flow = s.flow.as_deref_mut()?;
        // Small sets are faster through the code than any lookup.
        if self.tree.len() < FLOW_CACHE_MIN && !s.always {
            return None;
        }
        match flow.lookup(&self.tree, pkt, wirelen, &mut s.tree) {
            Lookup::Bypass => None,
            Lookup::Hit => Some(flow.slots()),
            Lookup::Miss => Some(flow.learn(&self.tree, pkt, wirelen, &mut s.tree)),
        }
    }

    /// Every filter that accepts the packet, as ids in increasing order.
    ///
    /// ```
    /// let t = sluice_native::tree::NativeTree::new();
    /// let mut out = vec![1];
    /// t.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch, out: &mut Vec<u32>) {
        next_in_buffer(pkt);
        self.classify_here(pkt, wirelen, s, out);
    }

    /// [`NativeTree::classify`] without the prefetch of the next packet
    /// (batches prefetch the packets they hold).
    fn classify_here(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch, out: &mut Vec<u32>) {
        out.clear();
        let since = self.tick(s);
        if let Some(slots) = self.cached(pkt, wirelen, s) {
            self.tree.report_distinct(pkt, wirelen, slots, out);
            Self::sampled(s, since, true);
            return;
        }
        // The code writes its slots straight into `out`; they become ids
        // there.
        if self.run_code(pkt, wirelen, s, Some(out)) {
            self.tree.report_distinct_in_place(pkt, wirelen, out);
        } else {
            self.walk(pkt, wirelen, s);
            self.tree.report(pkt, wirelen, &s.slots, &mut s.tree, out);
        }
        Self::sampled(s, since, false);
    }

    /// The flow cache's sampling clock (see [`FlowCache::tick`]).
    #[inline]
    fn tick(&self, s: &mut NativeScratch) -> Option<std::time::Instant> {
        match s.flow.as_deref_mut() {
            Some(f) if self.tree.len() >= FLOW_CACHE_MIN || s.always => f.tick(),
            _ => None,
        }
    }

    #[inline]
    fn sampled(s: &mut NativeScratch, since: Option<std::time::Instant>, cached: bool) {
        if let (Some(t), Some(f)) = (since, s.flow.as_deref_mut()) {
            f.sampled(t, cached);
        }
    }

    /// The single winner: highest priority, then earliest inserted.
    ///
    /// ```
    /// let t = sluice_native::tree::NativeTree::new();
    /// assert_eq!(t.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch) -> Option<u32> {
        next_in_buffer(pkt);
        self.classify_first_here(pkt, wirelen, s)
    }

    /// [`NativeTree::classify_first`] without the prefetch of the next
    /// packet.
    fn classify_first_here(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch) -> Option<u32> {
        let since = self.tick(s);
        if let Some(slots) = self.cached(pkt, wirelen, s) {
            let first = self.tree.report_first(pkt, wirelen, slots);
            Self::sampled(s, since, true);
            return first;
        }
        self.slots(pkt, wirelen, s);
        let first = self.tree.report_first(pkt, wirelen, &s.slots);
        Self::sampled(s, since, false);
        first
    }

    /// Prefetch what classifying `pkts[k]` reads first while the packets
    /// before it are classified: its first bytes [`AHEAD`] packets ahead,
    /// and, when the flow cache answers, its hint's line in the cache's
    /// signature table half as far ahead (computed from those bytes,
    /// fetched by then).
    #[inline]
    fn prefetch_ahead(&self, pkts: &[(&[u8], u32)], k: usize, s: &NativeScratch) {
        if let Some((p, _)) = pkts.get(k + AHEAD) {
            crate::batch::prefetch(p.as_ptr());
            if p.len() > 64 {
                crate::batch::prefetch(p[64..].as_ptr());
            }
        }
        if let (Some((p, _)), Some(f)) = (pkts.get(k + AHEAD / 2), s.flow.as_deref()) {
            if self.tree.len() >= FLOW_CACHE_MIN || s.always {
                if let Some(line) = f.hint_line(p) {
                    crate::batch::prefetch(line);
                }
            }
        }
    }

    /// `out[i]` gets packet `i`'s filters: each as [`NativeTree::classify`]
    /// finds it (through the reader's flow cache where it answers), with
    /// the packets ahead prefetched.
    ///
    /// ```
    /// let t = sluice_native::tree::NativeTree::new();
    /// let mut out = vec![Vec::new()];
    /// t.classify_batch(&[(&[][..], 0)], &mut Default::default(), &mut out);
    /// assert!(out[0].is_empty());
    /// ```
    pub fn classify_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut NativeScratch,
        out: &mut [Vec<u32>],
    ) {
        for (k, ((pkt, wirelen), o)) in pkts.iter().zip(out.iter_mut()).enumerate() {
            self.prefetch_ahead(pkts, k, s);
            self.classify_here(pkt, *wirelen, s, o);
        }
    }

    /// `out[i]` gets packet `i`'s single winner (as
    /// [`NativeTree::classify_first`], with the packets ahead prefetched).
    ///
    /// ```
    /// let t = sluice_native::tree::NativeTree::new();
    /// let mut out = [Some(1)];
    /// t.classify_first_batch(&[(&[][..], 0)], &mut Default::default(), &mut out);
    /// assert_eq!(out, [None]);
    /// ```
    pub fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut NativeScratch,
        out: &mut [Option<u32>],
    ) {
        for (k, ((pkt, wirelen), o)) in pkts.iter().zip(out.iter_mut()).enumerate() {
            self.prefetch_ahead(pkts, k, s);
            *o = self.classify_first_here(pkt, *wirelen, s);
        }
    }
}

/// Prefetch the bytes just past `pkt`, where the next packet of a capture
/// buffer, a file read into memory or a ring block starts (after a record
/// header of up to 64 bytes): a reader that takes one packet a call is
/// then not stalled on each packet's first line. A wrong guess costs a
/// prefetch of a line nobody reads.
#[inline]
fn next_in_buffer(pkt: &[u8]) {
    let end = pkt.as_ptr_range().end;
    crate::batch::prefetch(end);
    crate::batch::prefetch(end.wrapping_add(64));
}

/// What one copy's publish leaves for the other (the [`Engine::Derived`]
/// state): the code and the code generator that made it, which the other
/// copy adopts so that both build on one generator's units from then on,
/// however each copy came to be (a classifier's second copy, or each copy
/// of an [`Auto`](sluice_classifier::auto::Auto) moving to the tree on
/// its own). Opaque.
///
/// ```
/// use sluice_classifier::{merged::Compiled, Engine};
/// use sluice_native::tree::NativeTree;
/// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// let (mut first, mut second) = (NativeTree::new(), NativeTree::new());
/// first.insert(0, &f, 0);
/// second.insert(0, &f, 0);
/// let mut built: Option<<NativeTree as Engine>::Derived> = None;
/// first.refresh(&mut built); // builds the code ...
/// assert!(built.is_some());
/// second.refresh(&mut built); // ... which the second copy adopts
/// assert_eq!(second.classify_first(&[], 0, &mut Default::default()), Some(0));
/// ```
#[derive(Clone)]
pub struct Built {
    code: Option<Arc<Code>>,
    compiler: Arc<Mutex<Compiler>>,
}

impl std::fmt::Debug for Built {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Built")
            .field("code", &self.code.is_some())
            .finish_non_exhaustive()
    }
}

impl Engine for NativeTree {
    type Derived = Built;
    type Scratch = NativeScratch;

    fn empty() -> NativeTree {
        NativeTree::new()
    }

    fn change(&mut self, c: &Change) {
        self.fresh = false;
        self.tree.change(c);
        if let Change::Insert(id, c, _) = c {
            self.whole_as_code(*id, c);
        }
    }

    fn key_width_of(&self, like: u32) -> Option<usize> {
        self.tree.key_width_of(like)
    }

    fn stats(&self) -> (usize, usize, usize, usize) {
        Engine::stats(&self.tree)
    }

    /// The first copy to refresh builds the code and leaves it for the
    /// second, whose tree has the same shape after the same changes.
    fn refresh(&mut self, slot: &mut Option<Built>) {
        let code = match slot {
            Some(b) => {
                // The first copy built it from the same changes, with the
                // generator this copy uses from now on.
                self.tree.forget_changed();
                self.compiler = b.compiler.clone();
                b.code.clone()
            }
            None => {
                // A publish compiles for at most this long: a change of a
                // large part of the tree takes effect at once (walked in
                // Rust) and gets its code from the worker at a later one.
                let c = self.build(Some(PUBLISH_BUDGET));
                *slot = Some(Built {
                    code: c.clone(),
                    compiler: self.compiler.clone(),
                });
                c
            }
        };
        self.install(code);
    }

    fn settled(&self) -> bool {
        NativeTree::settled(self)
    }

    fn sync_with(&mut self, first: &Self) {
        self.tree = first.tree.clone();
        self.native = first.native;
        // One code generator for both copies: either may be the first to
        // refresh at a publish, and builds on what the other built.
        self.compiler = first.compiler.clone();
        self.code = None;
        self.fresh = false;
        if first.fresh {
            self.install(first.code.clone());
        }
    }

    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch, out: &mut Vec<u32>) {
        NativeTree::classify(self, pkt, wirelen, s, out)
    }

    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut NativeScratch) -> Option<u32> {
        NativeTree::classify_first(self, pkt, wirelen, s)
    }

    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut NativeScratch, out: &mut [Vec<u32>]) {
        NativeTree::classify_batch(self, pkts, s, out)
    }

    fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut NativeScratch,
        out: &mut [Option<u32>],
    ) {
        NativeTree::classify_first_batch(self, pkts, s, out)
    }
}

/// The concurrent classifier with the decision tree as machine code:
/// [`sluice_classifier::Classifier`] over [`NativeTree`]. Each publish
/// builds the code for the new filters first (or keeps the old code when
/// only large tables changed); readers never wait.
///
/// ```
/// use sluice_native::tree::NativeTreeClassifier;
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut c = NativeTreeClassifier::default();
/// let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
/// let web = c.insert(&port(80), 0);
/// c.publish();
/// let r = c.reader();
/// assert_eq!(r.classify(&[0, 0, 0, 80], 4), vec![web]);
/// c.remove(web);
/// c.publish();
/// assert!(r.classify(&[0, 0, 0, 80], 4).is_empty());
/// ```
pub type NativeTreeClassifier = Classifier<NativeTree>;

/// A reader of a [`NativeTreeClassifier`].
///
/// ```
/// let c = sluice_native::tree::NativeTreeClassifier::default();
/// let r: sluice_native::tree::NativeTreeReader = c.reader();
/// assert_eq!(r.classify_first(&[], 0), None);
/// ```
pub type NativeTreeReader = Reader<NativeTree>;

#[cfg(test)]
mod tests;
