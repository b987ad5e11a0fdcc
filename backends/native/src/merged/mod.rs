//! The merged classifier compiled to machine code (DPF's dynamic code
//! generation for many filters at once).
//!
//! A [`Merged`] classifier is a list of groups, each guards + key fields +
//! a hash table of keys ([`sluice_classifier::merged`]). [`NativeMerged`]
//! turns the groups into machine functions that, per packet:
//!
//! - read every field once however many groups use it, and check the
//!   captured length once for all the fixed-offset fields a set of groups
//!   needs, and once per IPv4 header for the fields behind it
//!   (bounds-check aggregation); a packet too short for a read makes
//!   exactly the groups that need that read fail, as the Rust path does;
//! - test a field shared by several groups once and dispatch on its value,
//!   like DPF's trie (for example on the ethertype, then the protocol);
//! - for a group of few keys (at most [`SMALL_KEYS`]), compare the fields
//!   with the keys as immediates (a search tree on the first field that
//!   tells them apart, then the rest; adjacent fields compared as one wider
//!   load: atom coalescing), with no table;
//! - for a larger group whose key fields are all packet loads, keep a copy
//!   of its keys in packet byte order (`merged/raw.rs`: adjacent fields
//!   packed into one load, loads packed into 64-bit words), hash the loaded
//!   words in the generated code and probe that copy: no byte swaps, one
//!   compare per word; other large groups hash the key with the table's own
//!   hash and probe the group's [`KeyTable`](sluice_classifier::table::KeyTable).
//!   Both stay data: adding a key does not touch the code.
//!
//! Groups are clustered by the first field they all test (typically the
//! ethertype and its value) and each cluster is one machine function,
//! cached by what it was built from: a change regenerates only the
//! clusters whose groups changed structurally or whose small key sets
//! changed ([`NativeStats::compilations`] counts them). Groups the code
//! generator cannot express (computed values other than `len`, protochain,
//! large `in` sets in guards) run through the Rust path of [`Merged`], and
//! filters that run whole are run as [`Merged`] runs them, so the answers
//! are exactly [`Merged::classify`]'s, [`Merged::classify_first`]'s and
//! [`Merged::classify_batch`]'s.
//!
//! [`NativeClassifier`] is the concurrent form (one writer, readers that
//! never wait), on the same left-right scheme as
//! [`sluice_classifier::Classifier`]: the code is published together with
//! the tables it was built for, and old code lives until the copy that
//! refers to it is updated, which happens only after every reader has left
//! that copy.
//!
//! ```
//! use sluice_classifier::merged::{Compiled, Merged};
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_native::merged::NativeMerged;
//! let mut m = NativeMerged::new();
//! let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
//! m.insert(0, &Compiled::new(port(80)), 0);
//! m.insert(1, &Compiled::new(port(443)), 0);
//! m.update();
//! let mut out = Vec::new();
//! m.classify(&[0, 0, 1, 187], 4, &mut Default::default(), &mut out);
//! assert_eq!(out, vec![1]);
//! assert_eq!(m.native_stats().keys_in_code, 2);
//! ```
//!
//! The parts, in the order a change flows through them: `plan.rs` makes
//! each group paths of conditions with an action and clusters the groups;
//! `units.rs` compiles a cluster into its machine functions and caches
//! them; `emit.rs` generates a function's reads, length checks, tests and
//! dispatch, `probe.rs` what a path does when it holds (hits, table
//! probes, prefetches) and `hash.rs` the perfect hashes of small key sets;
//! `raw.rs` keeps large groups' keys in packet byte order (in memory from
//! `slots.rs`). This file is the engine: [`NativeMerged`] keeps the code
//! and the packed tables in step with the data and chooses the path each
//! call takes: from a change until the code is brought up to date
//! ([`NativeMerged::update`], or a publish), the Rust path, so stale code
//! never runs.

use crate::batch::{desc_buf, descs, BATCH_CHUNK};
use sluice_classifier::merged::{better, Compiled, GroupView, Merged, Scratch, Slot};
use sluice_classifier::{Change, Classifier, Engine, Reader};
use std::fmt;
use std::sync::{Arc, Mutex};

mod emit;
mod hash;
mod plan;
mod probe;
mod raw;
pub(crate) mod slots;
mod units;

pub(crate) use units::PIPE;
pub use units::{Code, NativeStats};

use plan::R;
use raw::{Layout, RawTable};
use units::{last_level_cache, BatchUnitFn, Compiler, Hit, TableDesc};
use units::{MANY, MAX_UNIT_GROUPS, NO_MATCH};

#[cfg(test)]
use units::{cache_size, prefetch_slots};

/// Groups with at most this many keys have their keys compiled into the
/// code as immediates; larger ones are probed in their hash table (the
/// table's threshold for sparse slots, as for the decision tree's).
///
/// ```
/// assert!(sluice_native::merged::SMALL_KEYS >= 8);
/// ```
pub const SMALL_KEYS: usize = sluice_classifier::table::SPARSE_KEYS;

/// Make group `g`'s packed table (if it has one) agree with its table on
/// `key`; when the key does not fit the table's layout (a field all keys
/// shared has another value in it), build the table again from the
/// group's, with a layout that takes it.
fn sync_key(m: &Merged, raw: &mut [Option<RawTable>], g: u32, key: &[u32]) {
    let Some(slot @ Some(_)) = raw.get_mut(g as usize) else {
        return;
    };
    let Some(view) = m.group_view(g) else { return };
    let e = view
        .table()
        .entry_hashed(key, sluice_classifier::table::hash(key));
    if !slot.as_mut().is_some_and(|t| t.set(key, e)) {
        *slot = build_raw(&view);
    }
}

/// A packed table of group `g`'s keys, if its key fields are all packet
/// loads; fields equal in every key are left to the code
/// ([`Layout::fixed`]).
fn build_raw(g: &GroupView<'_>) -> Option<RawTable> {
    let key = g
        .key_fields()
        .into_iter()
        .map(|(_, r)| R::of(r))
        .collect::<Option<Vec<R>>>()?;
    let mut fixed: Option<Vec<Option<u32>>> = None;
    for (k, _) in g.keys() {
        match &mut fixed {
            None => fixed = Some(k.iter().map(|&v| Some(v)).collect()),
            Some(f) => {
                for (f, &v) in f.iter_mut().zip(k) {
                    if *f != Some(v) {
                        *f = None;
                    }
                }
            }
        }
    }
    let mut t = RawTable::new(Layout::of(&key, &fixed.unwrap_or_default())?);
    for (k, s) in g.keys() {
        let fits = t.set(k, Some((s.value, s.datum)));
        debug_assert!(fits, "a layout made for these keys takes them");
    }
    Some(t)
}

/// A [`Merged`] classifier with its groups compiled to machine code.
///
/// Change it with the forwarding methods, then call
/// [`NativeMerged::update`]: until then classification takes the Rust path
/// (never stale code).
///
/// ```
/// use sluice_classifier::merged::Compiled;
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = sluice_native::merged::NativeMerged::new();
/// m.insert(7, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
/// m.update();
/// assert_eq!(m.classify_first(&[1], 1, &mut Default::default()), Some(7));
/// ```
pub struct NativeMerged {
    merged: Merged,
    code: Arc<Code>,
    /// Per group, its table in *this* copy of the data.
    descs: Vec<TableDesc>,
    /// Per group probed by code with packed keys, its keys in that form
    /// (kept equal to the group's table by every change); empty while no
    /// group has one, and only as long as the last group that has one.
    raw: Vec<Option<RawTable>>,
    /// False after a change until [`NativeMerged::update`].
    fresh: bool,
    /// Shared by the two copies of a [`NativeClassifier`].
    compiler: Arc<Mutex<Compiler>>,
    /// False: never compile, always the Rust path ([`NativeMerged::interpreted`]).
    native: bool,
    /// Batch calls take the pipelined functions when a probed table has
    /// at least this many bytes ([`prefetch_slots`](units::prefetch_slots)).
    prefetch_bytes: usize,
    /// Per unit of `code`, the batch function batch calls take: the
    /// pipelined one when one of its tables is that large, else the plain
    /// one (chosen again whenever the tables change). Functions of
    /// `code`, which holds their pages.
    batch_fns: Vec<BatchUnitFn>,
}

// SAFETY: the raw pointers in `descs` point into `self.merged`'s tables or
// `self.raw`'s and are only read (by generated code) through `&self`, never written; they
// are rebuilt whenever `merged` changes, before the code runs again
// (`fresh`), and changing `merged` or `raw` needs `&mut self`. Nothing is
// tied to a thread.
unsafe impl Send for NativeMerged {}
// SAFETY: see `Send`: through `&self` everything is read only (the code
// writes only into a hit buffer on the caller's stack).
unsafe impl Sync for NativeMerged {}

impl Clone for NativeMerged {
    fn clone(&self) -> NativeMerged {
        let mut m = NativeMerged {
            merged: self.merged.clone(),
            code: self.code.clone(),
            descs: Vec::new(),
            raw: self.raw.clone(),
            fresh: false,
            compiler: self.compiler.clone(),
            native: self.native,
            prefetch_bytes: self.prefetch_bytes,
            batch_fns: Vec::new(),
        };
        // The clone's table pointers must be its own.
        m.install(self.code.clone());
        m.fresh = self.fresh;
        m
    }
}

impl fmt::Debug for NativeMerged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeMerged")
            .field("filters", &self.merged.len())
            .field("units", &self.code.units.len())
            .finish_non_exhaustive()
    }
}

impl Default for NativeMerged {
    fn default() -> Self {
        NativeMerged::new()
    }
}

impl NativeMerged {
    /// An empty classifier.
    ///
    /// ```
    /// assert!(sluice_native::merged::NativeMerged::new().merged().is_empty());
    /// ```
    pub fn new() -> NativeMerged {
        NativeMerged::from_merged(Merged::default())
    }

    /// Compile an existing [`Merged`].
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::from_merged(Default::default());
    /// assert_eq!(m.native_stats().units, 0);
    /// ```
    pub fn from_merged(merged: Merged) -> NativeMerged {
        NativeMerged::with_small_keys(merged, SMALL_KEYS)
    }

    /// Compile with keys in code for groups of at most `small` keys
    /// (0: every group is probed in its table).
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::with_small_keys(Default::default(), 0);
    /// assert_eq!(m.native_stats().keys_in_code, 0);
    /// ```
    pub fn with_small_keys(merged: Merged, small: usize) -> NativeMerged {
        let mut m = NativeMerged {
            merged,
            code: Arc::new(Code {
                units: Vec::new(),
                fns: Box::new([]),
                batch_fns: Box::new([]),
                fallback: Vec::new(),
            }),
            descs: Vec::new(),
            raw: Vec::new(),
            fresh: false,
            compiler: Arc::new(Mutex::new(Compiler {
                small,
                ..Compiler::default()
            })),
            native: true,
            prefetch_bytes: last_level_cache() / 2,
            batch_fns: Vec::new(),
        };
        m.update();
        m
    }

    /// Let batch calls take the pipelined batch functions, which prefetch
    /// the slots of the next chunk of packets while they probe a chunk,
    /// when a probed table has at least `bytes` of slots (by default half
    /// the last-level cache).
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::new().with_prefetch_bytes(1 << 20);
    /// assert!(m.merged().is_empty());
    /// ```
    pub fn with_prefetch_bytes(mut self, bytes: usize) -> NativeMerged {
        self.prefetch_bytes = bytes;
        self.choose_batch_fns();
        self
    }

    /// The same interface without machine code: every call takes the Rust
    /// path of [`Merged`] (`--engine interp`).
    ///
    /// ```
    /// use sluice_classifier::merged::{Compiled, Merged};
    /// let mut base = Merged::default();
    /// base.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let m = sluice_native::merged::NativeMerged::interpreted(base);
    /// assert_eq!(m.native_stats().units, 0);
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), Some(0));
    /// ```
    pub fn interpreted(merged: Merged) -> NativeMerged {
        let mut m = NativeMerged::with_small_keys(Merged::default(), SMALL_KEYS);
        m.native = false;
        m.merged = merged;
        m.update();
        m
    }

    /// The data the code was built from.
    ///
    /// ```
    /// assert_eq!(sluice_native::merged::NativeMerged::new().merged().groups(), 0);
    /// ```
    pub fn merged(&self) -> &Merged {
        &self.merged
    }

    /// [`Merged::insert`]; takes effect in code at [`NativeMerged::update`].
    ///
    /// ```
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.merged().len(), 1);
    /// ```
    pub fn insert(&mut self, id: u32, c: &Compiled, priority: i32) {
        self.fresh = false;
        self.merged.insert(id, c, priority);
        self.sync(id);
    }

    /// [`Merged::insert_keyed`].
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(m.insert_keyed(1, 0, &[2], 0));
    /// ```
    pub fn insert_keyed(&mut self, id: u32, like: u32, key: &[u32], priority: i32) -> bool {
        self.fresh = false;
        let done = self.merged.insert_keyed(id, like, key, priority);
        self.sync(id);
        done
    }

    /// [`Merged::insert_key_block`].
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(m.insert_key_block(1, 0, 1, vec![2, 3].into(), 0));
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
        let n = keys.len().checked_div(width).unwrap_or(1) as u32;
        let done = self
            .merged
            .insert_key_block(first, like, width, keys, priority);
        for id in first..first.saturating_add(n) {
            self.sync(id);
        }
        done
    }

    /// [`Merged::remove`].
    ///
    /// ```
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(3, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// m.update();
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), Some(3));
    /// m.remove(3);
    /// m.update();
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), None);
    /// assert_eq!(m.merged().len(), 0);
    /// ```
    pub fn remove(&mut self, id: u32) {
        self.fresh = false;
        let mut keys = Vec::new();
        if !self.raw.is_empty() {
            let raw = &self.raw;
            self.merged.keys_of(id, |g, k| {
                if matches!(raw.get(g as usize), Some(Some(_))) {
                    keys.push((g, k.to_vec()));
                }
            });
        }
        self.merged.remove(id);
        for (g, k) in keys {
            sync_key(&self.merged, &mut self.raw, g, &k);
        }
    }

    /// Copy the table entries of filter `id`'s keys to the packed tables.
    fn sync(&mut self, id: u32) {
        if self.raw.is_empty() {
            return;
        }
        let (m, raw) = (&self.merged, &mut self.raw);
        m.keys_of(id, |g, k| sync_key(m, raw, g, k));
    }

    /// Give every group that code probes with packed keys (more than
    /// `small` keys, fields the layout takes) its packed table, built from
    /// the group's table the first time.
    fn ensure_raw(&mut self) {
        if !self.native {
            return;
        }
        let small = self.compiler().small;
        for g in self.merged.group_views() {
            let id = g.id() as usize;
            if g.len() <= small || self.raw.get(id).is_some_and(Option::is_some) {
                continue;
            }
            if let Some(t) = build_raw(&g) {
                // `raw` stays empty until a group has a packed table, so
                // changes elsewhere cost nothing here.
                if self.raw.len() <= id {
                    self.raw.resize_with(id + 1, || None);
                }
                self.raw[id] = Some(t);
            }
        }
    }

    /// Bytes the packed copies of large groups' keys take (on top of
    /// [`Merged::table_bytes`]).
    ///
    /// ```
    /// assert_eq!(sluice_native::merged::NativeMerged::new().packed_bytes(), 0);
    /// ```
    pub fn packed_bytes(&self) -> usize {
        self.raw.iter().flatten().map(RawTable::bytes).sum()
    }

    /// Bring the code up to date with the data: functions whose groups did
    /// not change are reused; a key added to a probed group changes nothing.
    ///
    /// ```
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// m.update();
    /// let built = m.native_stats().compilations;
    /// m.update(); // nothing changed: nothing is compiled again
    /// assert_eq!(m.native_stats().compilations, built);
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), Some(0));
    /// ```
    pub fn update(&mut self) {
        if !self.native {
            self.fresh = false;
            return;
        }
        self.ensure_raw();
        let code = self.compile();
        self.install(code);
    }

    /// The code for the data and packed tables as they are now (cached
    /// functions where their groups did not change).
    fn compile(&self) -> Arc<Code> {
        self.compiler().build(&self.merged, &self.raw)
    }

    /// The code generator shared by both copies (a panic while it was
    /// held leaves it usable: its cache is only an optimisation).
    fn compiler(&self) -> std::sync::MutexGuard<'_, Compiler> {
        self.compiler.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Use `code`, built for this state of the data (and its packed
    /// tables: [`NativeMerged::ensure_raw`] ran before it was built).
    fn install(&mut self, code: Arc<Code>) {
        self.code = code;
        self.refresh_descs();
        self.fresh = self.native;
    }

    fn refresh_descs(&mut self) {
        self.descs = self
            .merged
            .group_views()
            .map(|g| match self.raw.get(g.id() as usize) {
                Some(Some(t)) => TableDesc {
                    words: t.as_ptr().cast(),
                    mask: t.mask(),
                    shift: t.shift(),
                    values: t.values_ptr(),
                },
                _ => {
                    let t = g.table();
                    TableDesc {
                        words: t.words().as_ptr(),
                        mask: (t.slots() - 1) as u64,
                        shift: 0,
                        values: std::ptr::null(),
                    }
                }
            })
            .collect();
        self.choose_batch_fns();
    }

    /// Per unit, the batch function for tables of their present size
    /// (`batch_fns`).
    fn choose_batch_fns(&mut self) {
        let (descs, bytes) = (&self.descs, self.prefetch_bytes);
        self.batch_fns = self
            .code
            .units
            .iter()
            .map(|u| match &u.pipelined {
                Some(p) if p.big(descs, bytes) => p.func,
                _ => u.batch,
            })
            .collect();
    }

    /// What the code generator holds and has done.
    ///
    /// ```
    /// assert_eq!(sluice_native::merged::NativeMerged::new().native_stats().units, 0);
    /// ```
    pub fn native_stats(&self) -> NativeStats {
        self.compiler().stats
    }

    /// Call `f(filter, priority)` for every match of the groups.
    #[inline]
    fn each_group_match(
        &self,
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
        mut f: impl FnMut(u32, i32),
    ) {
        let m = &self.merged;
        let mut hits = [const { std::mem::MaybeUninit::<Hit>::uninit() }; MAX_UNIT_GROUPS];
        for &func in self.code.fns.iter() {
            // SAFETY: the code reads only `pkt[i]` with `i + width <=
            // caplen` (every load is covered by a length check against
            // `caplen`, the slice's length), the `TableDesc`s of the groups
            // it probes (`descs` has one per group of `merged`, the data the
            // code was built for: `fresh` is checked by the callers) and the
            // slots of those tables (indexes masked by the table's
            // `slots() - 1`, slots of `width + 2` words: inside the table's
            // words, which live in `self.merged` and do not change while
            // `&self` is borrowed). It writes at most one hit per group of
            // its unit (each group reports at most one) into `hits`, which
            // holds `MAX_UNIT_GROUPS`, the most groups a unit has. It always
            // terminates: no loops but the probe, which stops at an empty
            // slot (a table always has one) or after `slots()` steps. The
            // code pages live as long as `self.code.units`, which `self`
            // holds.
            let n = unsafe {
                func(
                    pkt.as_ptr(),
                    pkt.len() as u64,
                    wirelen,
                    self.descs.as_ptr(),
                    hits.as_mut_ptr().cast::<Hit>(),
                )
            } as usize;
            for h in hits.iter().take(n) {
                // SAFETY: the code wrote the first `n` hits of this call.
                let h = unsafe { h.assume_init_ref() };
                let slot = Slot {
                    value: h.value,
                    datum: h.datum,
                };
                m.each_slot_filter(h.group, slot, &mut f);
            }
        }
        if !self.code.fallback.is_empty() {
            m.match_groups(&self.code.fallback, pkt, wirelen, s, |g, slot| {
                m.each_slot_filter(g, slot, &mut f)
            });
        }
    }

    /// Whether the batch functions answer alone: the code is fresh, no
    /// group takes the Rust path and no filter runs whole.
    fn coded(&self) -> bool {
        self.fresh && self.code.fallback.is_empty() && self.merged.whole() == 0
    }

    /// Per packet, through the batch functions: [`NO_MATCH`], the only
    /// filter of its only match, or [`MANY`] (ask the hit functions).
    /// Only when [`NativeMerged::coded`].
    fn results(&self, pkts: &[(&[u8], u32)], out: &mut [u32]) {
        debug_assert_eq!(pkts.len(), out.len());
        let Some((&first, rest)) = self.batch_fns.split_first() else {
            out.fill(NO_MATCH);
            return;
        };
        let mut buf = desc_buf();
        let mut more = [const { std::mem::MaybeUninit::<u32>::uninit() }; BATCH_CHUNK];
        for (pkts, out) in pkts.chunks(BATCH_CHUNK).zip(out.chunks_mut(BATCH_CHUNK)) {
            let n = pkts.len();
            let descs = descs(&mut buf, pkts);
            // SAFETY: `descs` holds the descriptors of `pkts` (`n <=
            // BATCH_CHUNK`) in the layout the code was generated for: the
            // pairs themselves or copies in `buf`, each from a slice of
            // `pkts` that outlives the call. Each function reads only those
            // `n` descriptors, for each packet
            // the bytes `ptr[j]` with `j + width <= caplen` (the same
            // bounds-checked paths as the hit function), the `TableDesc`s
            // of its groups and their slots (as in `each_group_match`), and
            // writes only `out[..n]` (`out.len() == n` here) or
            // `more[..n]`. It terminates: the loop runs `n` times and the
            // body's only loop is the bounded probe. The code pages live as
            // long as `self.code`, which `self` holds.
            unsafe { first(descs, n as u64, self.descs.as_ptr(), out.as_mut_ptr()) };
            for &f in rest {
                // SAFETY: as above.
                unsafe {
                    f(
                        descs,
                        n as u64,
                        self.descs.as_ptr(),
                        more.as_mut_ptr().cast(),
                    )
                };
                for (a, b) in out.iter_mut().zip(&more[..n]) {
                    // SAFETY: the call wrote `more[..n]`.
                    *a = Self::either(*a, unsafe { b.assume_init() });
                }
            }
        }
    }

    /// True when batch calls take a pipelined function (one chosen by
    /// [`NativeMerged::choose_batch_fns`] is not its unit's plain one).
    #[cfg(test)]
    fn pipelines(&self) -> bool {
        let units = self.code.units.iter();
        self.batch_fns
            .iter()
            .zip(units)
            .any(|(&f, u)| f as usize != u.batch as usize)
    }

    /// Two functions' result words for one packet as one: a match in
    /// either, or [`MANY`] when both matched.
    #[inline]
    fn either(a: u32, b: u32) -> u32 {
        match (a, b) {
            (NO_MATCH, x) | (x, NO_MATCH) => x,
            _ => MANY,
        }
    }

    /// The result word of one packet ([`NativeMerged::results`]).
    #[inline]
    fn result(&self, pkt: &[u8], wirelen: u32) -> u32 {
        let mut buf = desc_buf();
        let pair = [(pkt, wirelen)];
        let d = descs(&mut buf, &pair);
        let mut acc = NO_MATCH;
        for &f in self.code.batch_fns.iter() {
            let mut r = NO_MATCH;
            // SAFETY: as in `results`, with one descriptor (`d`, of `pkt`,
            // which outlives the call) and one result word (`r`).
            unsafe { f(d, 1, self.descs.as_ptr(), &mut r) };
            acc = Self::either(acc, r);
        }
        acc
    }

    /// Every filter that accepts the packet, as ids in increasing order
    /// (exactly [`Merged::classify`]).
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::new();
    /// let mut out = vec![9];
    /// m.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        if !self.coded() {
            return self.classify_hits(pkt, wirelen, s, out);
        }
        match self.result(pkt, wirelen) {
            NO_MATCH => out.clear(),
            MANY => self.classify_hits(pkt, wirelen, s, out),
            f => {
                out.clear();
                out.push(f);
            }
        }
    }

    /// [`NativeMerged::classify`] through the hit functions.
    fn classify_hits(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        if !self.fresh {
            return self.merged.classify(pkt, wirelen, s, out);
        }
        out.clear();
        self.each_group_match(pkt, wirelen, s, |f, _| out.push(f));
        if self.merged.whole() > 0 {
            self.merged.whole_matches(pkt, wirelen, out);
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }

    /// The single winner (exactly [`Merged::classify_first`]).
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::new();
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        if !self.coded() {
            return self.first_hits(pkt, wirelen, s);
        }
        match self.result(pkt, wirelen) {
            NO_MATCH => None,
            MANY => self.first_hits(pkt, wirelen, s),
            f => Some(f),
        }
    }

    /// [`NativeMerged::classify_first`] through the hit functions.
    fn first_hits(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        if !self.fresh {
            return self.merged.classify_first(pkt, wirelen, s);
        }
        let mut best: Option<(u32, i32)> = None;
        self.each_group_match(pkt, wirelen, s, |f, p| {
            if better(best, f, p) {
                best = Some((f, p));
            }
        });
        if self.merged.whole() == 0 {
            return best.map(|(f, _)| f);
        }
        self.merged
            .first_with_whole(pkt, wirelen, best)
            .map(|(f, _)| f)
    }

    /// Classify many packets (exactly [`Merged::classify_batch`]):
    /// `out[i]` gets packet `i`'s filters. The packets go through the batch
    /// functions (one machine call per 64 packets and function) and only
    /// those with more than one match take the hit functions.
    ///
    /// ```
    /// let m = sluice_native::merged::NativeMerged::new();
    /// let mut out = vec![vec![1]; 2];
    /// m.classify_batch(&[(&[][..], 0), (&[1][..], 1)], &mut Default::default(), &mut out);
    /// assert!(out.iter().all(|o| o.is_empty()));
    /// ```
    pub fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Scratch, out: &mut [Vec<u32>]) {
        if !self.fresh {
            return self.merged.classify_batch(pkts, s, out);
        }
        if !self.coded() {
            for ((pkt, wirelen), o) in pkts.iter().zip(out.iter_mut()) {
                self.classify_hits(pkt, *wirelen, s, o);
            }
            return;
        }
        let mut r = [NO_MATCH; BATCH_CHUNK];
        for (pkts, out) in pkts.chunks(BATCH_CHUNK).zip(out.chunks_mut(BATCH_CHUNK)) {
            let r = &mut r[..pkts.len()];
            self.results(pkts, r);
            for ((&x, (pkt, wirelen)), o) in r.iter().zip(pkts).zip(out.iter_mut()) {
                match x {
                    NO_MATCH => o.clear(),
                    MANY => self.classify_hits(pkt, *wirelen, s, o),
                    f => {
                        o.clear();
                        o.push(f);
                    }
                }
            }
        }
    }

    /// The single winner of each of many packets (exactly
    /// [`Merged::classify_first`] per packet), through the batch functions:
    /// the demultiplexer's fast path.
    ///
    /// # Panics
    ///
    /// If `out.len() != pkts.len()`.
    ///
    /// ```
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = sluice_native::merged::NativeMerged::new();
    /// m.insert(4, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// m.update();
    /// let mut out = [Some(9); 3];
    /// m.classify_first_batch(&[(&[1][..], 1), (&[2][..], 1), (&[][..], 0)], &mut Default::default(), &mut out);
    /// assert_eq!(out, [Some(4), None, None]);
    /// ```
    pub fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut Scratch,
        out: &mut [Option<u32>],
    ) {
        assert_eq!(pkts.len(), out.len(), "one result slot per packet");
        if !self.coded() {
            for ((pkt, wirelen), o) in pkts.iter().zip(out.iter_mut()) {
                *o = self.first_hits(pkt, *wirelen, s);
            }
            return;
        }
        let mut r = [NO_MATCH; BATCH_CHUNK];
        for (pkts, out) in pkts.chunks(BATCH_CHUNK).zip(out.chunks_mut(BATCH_CHUNK)) {
            let n = pkts.len();
            let (r, out) = (&mut r[..n], &mut out[..n]);
            self.results(pkts, r);
            for ((o, &x), &(pkt, wirelen)) in out.iter_mut().zip(r.iter()).zip(pkts) {
                *o = if x < MANY {
                    Some(x)
                } else if x == NO_MATCH {
                    None
                } else {
                    self.first_hits(pkt, wirelen, s)
                };
            }
        }
    }
}

impl sluice_classifier::auto::Shapes for NativeMerged {
    fn shapes(&self) -> usize {
        self.merged.groups()
    }
}

impl Engine for NativeMerged {
    type Derived = Arc<Code>;
    type Scratch = Scratch;

    fn empty() -> NativeMerged {
        NativeMerged::new()
    }

    fn key_width_of(&self, like: u32) -> Option<usize> {
        self.merged.key_width_of(like)
    }

    fn sort_key_block(&self, like: u32, width: usize, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
        self.merged.sort_key_block(like, width, keys)
    }

    fn stats(&self) -> (usize, usize, usize, usize) {
        let m = &self.merged;
        (m.len(), m.groups(), m.whole(), m.table_bytes())
    }

    fn change(&mut self, c: &Change) {
        match c {
            Change::Insert(id, c, p) => self.insert(*id, c, *p),
            Change::InsertKeyed(id, like, key, p) => {
                self.fresh = false;
                self.merged.insert_shared_key(*id, *like, key.clone(), *p);
                self.sync(*id);
            }
            Change::InsertKeys(first, like, width, keys, p) => {
                self.insert_key_block(*first, *like, *width, keys.clone(), *p);
            }
            Change::Remove(id) => self.remove(*id),
        }
    }

    /// The code is built by the first copy to refresh and shared with the
    /// second.
    fn refresh(&mut self, slot: &mut Option<Arc<Code>>) {
        // Both copies reach this point after the same changes, so both
        // make the same packed tables with the same layouts, and the code
        // the first copy builds fits the second's tables.
        self.ensure_raw();
        let code = match slot {
            Some(c) => c.clone(),
            None => {
                let c = self.compile();
                *slot = Some(c.clone());
                c
            }
        };
        self.install(code);
    }

    fn sync_with(&mut self, first: &Self) {
        self.merged = first.merged.clone();
        self.raw = first.raw.clone();
        self.compiler = first.compiler.clone();
        // Table pointers must be this copy's own.
        self.install(first.code.clone());
        self.fresh = first.fresh;
    }

    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        NativeMerged::classify(self, pkt, wirelen, s, out)
    }

    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        NativeMerged::classify_first(self, pkt, wirelen, s)
    }

    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Scratch, out: &mut [Vec<u32>]) {
        NativeMerged::classify_batch(self, pkts, s, out)
    }

    fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut Scratch,
        out: &mut [Option<u32>],
    ) {
        NativeMerged::classify_first_batch(self, pkts, s, out)
    }
}

/// The concurrent classifier with the merged filters as machine code:
/// [`sluice_classifier::Classifier`] over [`NativeMerged`], so inserts,
/// removals and publishing work the same, and each publish builds the code
/// for the new filters first. Readers never wait; they keep running the
/// code of the copy they are in until they next enter, and that code is
/// freed only after.
///
/// ```
/// use sluice_native::merged::NativeClassifier;
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut c = NativeClassifier::default();
/// let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
/// let web = c.insert(&port(80), 0);
/// c.publish();
/// let r = c.reader();
/// assert_eq!(r.classify(&[0, 0, 0, 80], 4), vec![web]);
/// c.remove(web);
/// c.publish();
/// assert!(r.classify(&[0, 0, 0, 80], 4).is_empty());
/// ```
pub type NativeClassifier = Classifier<NativeMerged>;

/// A reader of a [`NativeClassifier`].
///
/// ```
/// let c = sluice_native::merged::NativeClassifier::default();
/// let r: sluice_native::merged::NativeReader = c.reader();
/// assert_eq!(r.classify_first(&[], 0), None);
/// ```
pub type NativeReader = Reader<NativeMerged>;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod tests;
