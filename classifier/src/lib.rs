//! Many filters, one pass: sluice's merged classifier.
//!
//! Filters are inserted and removed by one writer while any number of
//! readers classify packets without ever waiting for it: the data lives in
//! two copies (the `left-right` crate); readers use one, the writer changes
//! the other and [`Classifier::publish`] swaps them. The filters are merged
//! into one decision tree ([`tree`]): every distinct test is made at most
//! once per packet, tests on one field are answered by one lookup, and a
//! packet costs the tests it passes and the filters it matches, not the
//! number installed. While the filters come in at most a few shapes
//! (filters that differ only in constants, such as TCP sessions), one
//! hash table per shape ([`merged`], tuple space search) is the leaner
//! form; the default engine, [`Auto`], uses it until a filter of a new
//! shape makes the tree the better one.
//!
//! ```
//! use sluice_classifier::Classifier;
//! use sluice_ir::{Filter, Pred, Val, Size};
//! let mut c = Classifier::new();
//! let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
//! let web = c.insert(&port(80), 0);
//! let tls = c.insert(&port(443), 0);
//! c.publish();
//! let r = c.reader();
//! assert_eq!(r.classify(&[0, 0, 0, 80], 4), vec![web]);
//! c.remove(web);
//! c.publish();
//! assert!(r.classify(&[0, 0, 0, 80], 4).is_empty());
//! # let _ = tls;
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub(crate) mod absorb;
pub mod auto;
pub mod bitvec;
pub mod cuts;
pub mod dag;
pub mod field;
pub(crate) mod id_map;
pub mod merged;
pub mod path;
pub(crate) mod pathset;
mod sorted;
pub mod table;
pub mod tree;

pub use auto::Auto;
use left_right::{Absorb, ReadHandle, ReadHandleFactory, WriteHandle};
use merged::{Compiled, Merged, Scratch};
pub use sorted::sort_ids;
use std::cell::RefCell;
use std::sync::Arc;
pub use tree::DecisionTree;

/// A filter's identity in a classifier; ids grow in insertion order.
///
/// ```
/// assert!(sluice_classifier::FilterId(1) < sluice_classifier::FilterId(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterId(pub u32);

/// A change to the filters, applied to both copies of a [`Classifier`].
///
/// ```
/// use sluice_classifier::{Change, Engine, merged::Merged};
/// let mut m = Merged::empty();
/// m.change(&Change::Remove(3)); // removing an unknown id does nothing
/// assert!(m.is_empty());
/// ```
#[derive(Clone, Debug)]
pub enum Change {
    /// Id, filter, priority.
    Insert(u32, Arc<Compiled>, i32),
    /// Id, the filter it is like, its key, priority.
    InsertKeyed(u32, u32, Arc<[u32]>, i32),
    /// First id, like, key width, keys one after another, priority.
    InsertKeys(u32, u32, usize, Arc<[u32]>, i32),
    /// Id.
    Remove(u32),
}

/// What a [`Classifier`] keeps two copies of and its readers classify with:
/// the merged decision tree ([`DecisionTree`], the default), the groups of
/// [`Merged`] (tuple space search), or an engine built over either (native
/// code, in `sluice-native`) that derives more state at each publish.
///
/// ```
/// use sluice_classifier::{Engine, merged::{Merged, Scratch}};
/// let m = Merged::empty();
/// let mut out = vec![1];
/// Engine::classify(&m, &[], 0, &mut Scratch::default(), &mut out);
/// assert!(out.is_empty());
/// ```
pub trait Engine: Clone {
    /// State derived once per publish and shared by both copies (for
    /// example machine code); `()` for none.
    type Derived: Clone;
    /// Per-reader memory for classifying.
    type Scratch: Default;
    /// An engine without filters.
    fn empty() -> Self;
    /// Apply one change.
    fn change(&mut self, c: &Change);
    /// The key width of filters that [`Change::InsertKeyed`] can copy from
    /// `like` (`None`: it cannot be copied by key).
    fn key_width_of(&self, like: u32) -> Option<usize>;
    /// The order in which a block of keys like `like` is best inserted,
    /// and each input key's position in it (see
    /// [`Merged::sort_key_block`]); the input order by default.
    fn sort_key_block(&self, _like: u32, width: usize, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let n = keys.len() / width.max(1);
        (keys.to_vec(), (0..n as u32).collect())
    }
    /// (filters, groups or nodes, filters run whole, bytes of tables).
    fn stats(&self) -> (usize, usize, usize, usize);
    /// Bring derived state up to date before a publish: the first copy
    /// finds `slot` empty, builds and leaves its result there; the second
    /// copy takes it from `slot`.
    fn refresh(&mut self, _slot: &mut Option<Self::Derived>) {}
    /// True when derived state is complete; an engine that spreads its
    /// work over publishes (native code compiled within a time budget)
    /// says false until it is ([`Classifier::settle`]).
    fn settled(&self) -> bool {
        true
    }
    /// Become equal to `first` (left-right's first synchronisation).
    fn sync_with(&mut self, first: &Self) {
        *self = first.clone();
    }
    /// Every filter accepting the packet, as ids, each once, in any order
    /// ([`Reader::classify`] sorts them).
    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Self::Scratch, out: &mut Vec<u32>);
    /// The single winner: highest priority, then earliest inserted.
    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Self::Scratch) -> Option<u32>;
    /// `out[i]` gets packet `i`'s filters (each once, in any order).
    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Self::Scratch, out: &mut [Vec<u32>]);
    /// `out[i]` gets packet `i`'s single winner (as
    /// [`Engine::classify_first`]); engines with a batch path override it.
    fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut Self::Scratch,
        out: &mut [Option<u32>],
    ) {
        for ((pkt, wirelen), o) in pkts.iter().zip(out.iter_mut()) {
            *o = self.classify_first(pkt, *wirelen, s);
        }
    }
}

impl Engine for Merged {
    type Derived = ();
    type Scratch = Scratch;

    fn empty() -> Merged {
        Merged::default()
    }

    fn key_width_of(&self, like: u32) -> Option<usize> {
        Merged::key_width_of(self, like)
    }

    fn sort_key_block(&self, like: u32, width: usize, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
        Merged::sort_key_block(self, like, width, keys)
    }

    fn stats(&self) -> (usize, usize, usize, usize) {
        (self.len(), self.groups(), self.whole(), self.table_bytes())
    }

    fn change(&mut self, c: &Change) {
        match c {
            Change::Insert(id, c, p) => self.insert(*id, c, *p),
            Change::InsertKeyed(id, like, key, p) => {
                self.insert_shared_key(*id, *like, key.clone(), *p);
            }
            Change::InsertKeys(first, like, width, keys, p) => {
                self.insert_key_block(*first, *like, *width, keys.clone(), *p);
            }
            Change::Remove(id) => self.remove(*id),
        }
    }

    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        Merged::classify(self, pkt, wirelen, s, out)
    }

    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        Merged::classify_first(self, pkt, wirelen, s)
    }

    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Scratch, out: &mut [Vec<u32>]) {
        Merged::classify_batch(self, pkts, s, out)
    }
}

impl Engine for DecisionTree {
    type Derived = ();
    type Scratch = tree::Scratch;

    fn empty() -> DecisionTree {
        DecisionTree::default()
    }

    fn change(&mut self, c: &Change) {
        match c {
            Change::Insert(id, c, p) => self.insert(*id, c, *p),
            Change::InsertKeyed(id, like, key, p) => {
                self.insert_keyed(*id, *like, key.clone(), *p);
            }
            Change::InsertKeys(first, like, width, keys, p) => {
                self.insert_key_block(*first, *like, *width, keys.clone(), *p);
            }
            Change::Remove(id) => self.remove(*id),
        }
    }

    fn key_width_of(&self, like: u32) -> Option<usize> {
        DecisionTree::key_width_of(self, like)
    }

    fn stats(&self) -> (usize, usize, usize, usize) {
        let s = DecisionTree::stats(self);
        (s.filters, s.nodes, s.whole, s.bytes)
    }

    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut tree::Scratch, out: &mut Vec<u32>) {
        DecisionTree::classify(self, pkt, wirelen, s, out)
    }

    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut tree::Scratch) -> Option<u32> {
        DecisionTree::classify_first(self, pkt, wirelen, s)
    }

    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut tree::Scratch, out: &mut [Vec<u32>]) {
        DecisionTree::classify_batch(self, pkts, s, out)
    }
}

/// What the writer appends: a change, or the refresh a publish starts with.
enum Op<E: Engine> {
    Change(Change),
    Refresh(Option<E::Derived>),
}

/// One of the two copies (a local type, so that it can absorb [`Op`]s).
#[derive(Clone)]
struct Twin<E>(E);

impl<E: Engine> Absorb<Op<E>> for Twin<E> {
    fn absorb_first(&mut self, op: &mut Op<E>, _: &Self) {
        match op {
            Op::Change(c) => self.0.change(c),
            Op::Refresh(slot) => self.0.refresh(slot),
        }
    }

    fn sync_with(&mut self, first: &Self) {
        self.0.sync_with(&first.0);
    }
}

/// The writer side: insert, remove, publish. `Classifier` runs the merged
/// filters in Rust; `Classifier<E>` runs them through another [`Engine`]
/// (`sluice_native::merged::NativeClassifier` is machine code).
///
/// ```
/// let c = sluice_classifier::Classifier::new();
/// assert_eq!(c.len(), 0);
/// ```
pub struct Classifier<E: Engine = Auto<Merged, DecisionTree>> {
    w: WriteHandle<Twin<E>, Op<E>>,
    factory: ReadHandleFactory<Twin<E>>,
    next: u32,
    live: usize,
}

impl<E: Engine> Default for Classifier<E> {
    fn default() -> Self {
        let (w, r) = left_right::new_from_empty::<Twin<E>, Op<E>>(Twin(E::empty()));
        Classifier {
            factory: r.factory(),
            w,
            next: 0,
            live: 0,
        }
    }
}

impl Classifier {
    /// An empty classifier.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// assert!(c.is_empty());
    /// assert!(c.reader().classify(&[1, 2, 3], 3).is_empty());
    /// ```
    pub fn new() -> Classifier {
        Classifier::default()
    }
}

impl<E: Engine> Classifier<E> {
    /// Number of filters (including unpublished changes).
    ///
    /// ```
    /// let mut c = sluice_classifier::Classifier::new();
    /// c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 0);
    /// assert_eq!(c.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when no filter is installed.
    ///
    /// ```
    /// assert!(sluice_classifier::Classifier::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn fresh(&mut self) -> u32 {
        let id = self.next;
        self.next += 1;
        self.live += 1;
        id
    }

    /// Insert a filter with a priority (higher wins in [`Reader::classify_first`]).
    /// It takes effect at the next [`Classifier::publish`].
    ///
    /// ```
    /// let mut c = sluice_classifier::Classifier::new();
    /// let id = c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 5);
    /// assert_eq!(id.0, 0);
    /// ```
    pub fn insert(&mut self, filter: &sluice_ir::Filter, priority: i32) -> FilterId {
        self.insert_compiled(Arc::new(Compiled::new(filter.clone())), priority)
    }

    /// Insert a filter prepared with [`Compiled`] (for example a classic BPF
    /// program: [`Compiled::from_bpf`]).
    ///
    /// ```
    /// use sluice_bpf::{Insn, op};
    /// use sluice_classifier::{Classifier, merged::Compiled};
    /// let mut c = Classifier::new();
    /// let id = c.insert_compiled(std::sync::Arc::new(Compiled::from_bpf(&[Insn::stmt(op::BPF_RET | op::BPF_K, 9)])), 0);
    /// c.publish();
    /// assert_eq!(c.reader().classify(&[], 0), vec![id]);
    /// ```
    pub fn insert_compiled(&mut self, c: Arc<Compiled>, priority: i32) -> FilterId {
        let id = self.fresh();
        self.w.append(Op::Change(Change::Insert(id, c, priority)));
        FilterId(id)
    }

    /// Insert a filter equal to `like` except for its key constants: one
    /// hash-table insert, no compilation. `None` if `like` is not a filter of
    /// exactly one key of that length, or `key` is empty.
    ///
    /// ```
    /// use sluice_classifier::Classifier;
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut c = Classifier::new();
    /// let a = c.insert(&Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1), 0);
    /// c.publish();
    /// let b = c.insert_keyed(a, &[2], 0).unwrap();
    /// c.publish();
    /// assert_eq!(c.reader().classify(&[2], 1), vec![b]);
    /// ```
    pub fn insert_keyed(&mut self, like: FilterId, key: &[u32], priority: i32) -> Option<FilterId> {
        // A filter without keys has no constants to vary: a copy of it
        // is `insert` again.
        if key.is_empty() {
            return None;
        }
        // Check against the published copy, with pending inserts published.
        self.publish();
        let ok = self.w.enter()?.0.key_width_of(like.0) == Some(key.len());
        if !ok {
            return None;
        }
        let id = self.fresh();
        self.w.append(Op::Change(Change::InsertKeyed(
            id,
            like.0,
            key.into(),
            priority,
        )));
        Some(FilterId(id))
    }

    /// Insert many key-only filters like `like` at once (one publish check,
    /// one operation for both copies). The ids are new and all greater than
    /// earlier ones; among the batch they follow the table's order, except
    /// that equal keys keep their order.
    ///
    /// ```
    /// use sluice_classifier::Classifier;
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut c = Classifier::new();
    /// let a = c.insert(&Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1), 0);
    /// c.publish();
    /// let ids = c.insert_keys(a, (2..5).map(|k| vec![k]), 0).unwrap();
    /// c.publish();
    /// assert_eq!(c.reader().classify(&[3], 1), vec![ids[1]]);
    /// ```
    pub fn insert_keys(
        &mut self,
        like: FilterId,
        keys: impl IntoIterator<Item = Vec<u32>>,
        priority: i32,
    ) -> Option<Vec<FilterId>> {
        self.publish();
        let width = self.w.enter()?.0.key_width_of(like.0)?;
        if width == 0 {
            return None;
        }
        let mut flat = Vec::new();
        for k in keys {
            if k.len() != width {
                return None;
            }
            flat.extend_from_slice(&k);
        }
        let (sorted, pos) = self.w.enter()?.0.sort_key_block(like.0, width, &flat);
        let n = pos.len();
        let first = self.next;
        self.next += n as u32;
        self.live += n;
        if n > 0 {
            self.w.append(Op::Change(Change::InsertKeys(
                first,
                like.0,
                width,
                sorted.into(),
                priority,
            )));
        }
        Some(pos.into_iter().map(|p| FilterId(first + p)).collect())
    }

    /// Remove a filter (at the next publish).
    ///
    /// ```
    /// let mut c = sluice_classifier::Classifier::new();
    /// let id = c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 0);
    /// c.remove(id);
    /// assert!(c.is_empty());
    /// ```
    pub fn remove(&mut self, id: FilterId) {
        if id.0 < self.next {
            self.live = self.live.saturating_sub(1);
        }
        self.w.append(Op::Change(Change::Remove(id.0)));
    }

    /// Make every change so far visible to readers, with the engine's
    /// derived state (native code) brought up to date first. Readers never
    /// wait; the writer waits for readers still on the old copy, so state
    /// they may still use is dropped only after they leave it.
    ///
    /// ```
    /// let mut c = sluice_classifier::Classifier::new();
    /// let r = c.reader();
    /// let id = c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 0);
    /// assert!(r.classify(&[], 0).is_empty()); // not visible yet
    /// c.publish();
    /// assert_eq!(r.classify(&[], 0), vec![id]);
    /// ```
    pub fn publish(&mut self) {
        self.w.append(Op::Refresh(None));
        self.w.publish();
    }

    /// Publish until the engine's derived state is complete (native code
    /// compiled within a time budget per publish, see [`Engine::settled`]);
    /// every state on the way answers correctly, only more slowly.
    ///
    /// ```
    /// use sluice_classifier::Engine;
    /// let mut c = sluice_classifier::Classifier::new();
    /// let id = c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 0);
    /// c.settle();
    /// assert_eq!(c.published(|e| e.settled()), Some(true));
    /// assert_eq!(c.reader().classify_first(&[], 0), Some(id));
    /// ```
    pub fn settle(&mut self) {
        self.publish();
        for _ in 0..100_000 {
            if self.published(|e| e.settled()).unwrap_or(true) {
                return;
            }
            self.publish();
        }
    }

    /// A reader handle (one per thread; clone it to hand out more).
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// let r = c.reader();
    /// let r2 = r.clone();
    /// assert!(r2.classify(&[], 0).is_empty());
    /// ```
    pub fn reader(&self) -> Reader<E> {
        Reader {
            r: self.factory.handle(),
            factory: self.factory.clone(),
            scratch: RefCell::new(E::Scratch::default()),
            bits: RefCell::default(),
        }
    }

    /// Run `f` on the published engine (for its statistics), or `None`
    /// before the first publish.
    ///
    /// ```
    /// use sluice_classifier::Engine;
    /// let c = sluice_classifier::Classifier::new();
    /// assert_eq!(c.published(|m| m.stats().0), Some(0));
    /// ```
    pub fn published<R>(&self, f: impl FnOnce(&E) -> R) -> Option<R> {
        self.w.enter().map(|g| f(&g.0))
    }

    /// Statistics of the published copy: (filters, groups or nodes,
    /// filters run whole, table bytes).
    ///
    /// ```
    /// let mut c = sluice_classifier::Classifier::new();
    /// c.insert(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1), 0);
    /// c.publish();
    /// assert_eq!(c.stats().0, 1);
    /// ```
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        self.published(|e| e.stats()).unwrap_or((0, 0, 0, 0))
    }
}

/// A reader: classifies packets against the last published filters.
///
/// ```
/// let c = sluice_classifier::Classifier::new();
/// assert_eq!(c.reader().classify_first(&[], 0), None);
/// ```
pub struct Reader<E: Engine = Auto<Merged, DecisionTree>> {
    r: ReadHandle<Twin<E>>,
    factory: ReadHandleFactory<Twin<E>>,
    scratch: RefCell<E::Scratch>,
    /// One bit per filter id, for [`sort_ids`].
    bits: RefCell<Vec<u64>>,
}

impl<E: Engine> Clone for Reader<E> {
    fn clone(&self) -> Reader<E> {
        Reader {
            r: self.factory.handle(),
            factory: self.factory.clone(),
            scratch: RefCell::new(E::Scratch::default()),
            bits: RefCell::default(),
        }
    }
}

impl<E: Engine> Reader<E> {
    /// Every filter accepting the packet (monitoring: every flow that wants
    /// it), in increasing id order.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// assert!(c.reader().classify(&[1, 2, 3], 3).is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32) -> Vec<FilterId> {
        let mut out = Vec::new();
        self.classify_into(pkt, wirelen, &mut out);
        out.into_iter().map(FilterId).collect()
    }

    /// Like [`Reader::classify`], into a reused vector of raw ids.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// let mut out = vec![];
    /// c.reader().classify_into(&[], 0, &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify_into(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>) {
        out.clear();
        if let Some(g) = self.r.enter() {
            g.0.classify(pkt, wirelen, &mut self.scratch.borrow_mut(), out);
        }
        sort_ids(out, &mut self.bits.borrow_mut());
    }

    /// Run `f` on this reader's own memory: for the engine's per-reader
    /// settings (such as `sluice_native`'s flow cache) and statistics.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// let r = c.reader();
    /// r.with_scratch(|s| *s = Default::default());
    /// ```
    pub fn with_scratch<R>(&self, f: impl FnOnce(&mut E::Scratch) -> R) -> R {
        f(&mut self.scratch.borrow_mut())
    }

    /// The single winner: highest priority, then earliest inserted.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// assert_eq!(c.reader().classify_first(&[], 0), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32) -> Option<FilterId> {
        let g = self.r.enter()?;
        g.0.classify_first(pkt, wirelen, &mut self.scratch.borrow_mut())
            .map(FilterId)
    }

    /// Classify a batch of packets: `out[i]` gets packet `i`'s filters,
    /// each once, in any order (the engine's; [`Reader::classify`] sorts).
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let mut c = sluice_classifier::Classifier::new();
    /// let one = c.insert(&Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1), 0);
    /// c.publish();
    /// let mut out = vec![vec![9]; 2];
    /// c.reader().classify_batch(&[(&[1][..], 1), (&[2][..], 1)], &mut out);
    /// assert_eq!(out, vec![vec![one.0], vec![]]);
    /// ```
    pub fn classify_batch(&self, pkts: &[(&[u8], u32)], out: &mut [Vec<u32>]) {
        match self.r.enter() {
            Some(g) => {
                g.0.classify_batch(pkts, &mut self.scratch.borrow_mut(), out)
            }
            None => out.iter_mut().for_each(Vec::clear),
        }
    }

    /// The single winner of each of a batch of packets (`out[i]` for
    /// packet `i`, as [`Reader::classify_first`] gives it): the
    /// demultiplexer's batch call. One entry for the whole batch.
    ///
    /// # Panics
    ///
    /// If `out.len() != pkts.len()`.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let mut c = sluice_classifier::Classifier::new();
    /// let one = c.insert(&Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1), 0);
    /// c.publish();
    /// let mut out = [None; 2];
    /// c.reader().classify_first_batch(&[(&[1][..], 1), (&[2][..], 1)], &mut out);
    /// assert_eq!(out, [Some(one.0), None]);
    /// ```
    pub fn classify_first_batch(&self, pkts: &[(&[u8], u32)], out: &mut [Option<u32>]) {
        assert_eq!(pkts.len(), out.len(), "one result slot per packet");
        match self.r.enter() {
            Some(g) => {
                g.0.classify_first_batch(pkts, &mut self.scratch.borrow_mut(), out)
            }
            None => out.fill(None),
        }
    }
}
