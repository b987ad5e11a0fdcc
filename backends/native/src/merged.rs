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

use crate::batch::{desc_buf, descs, prefetch, DescLayout, BATCH_CHUNK};
use crate::{CodePages, NativeError};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Block, InstBuilder, MemFlags, Signature, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::Module;
use sluice_classifier::merged::{
    better, Compiled, FieldRead, GroupView, GuardView, Merged, Scratch, Slot,
};
use sluice_classifier::path::Test;
use sluice_classifier::{Change, Classifier, Engine, Reader};
use sluice_ir::Val;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod raw;
pub(crate) mod slots;
use raw::{Layout, RawTable, RAW_MIX, RAW_MUL};

/// Groups with at most this many keys have their keys compiled into the
/// code as immediates; larger ones are probed in their hash table.
///
/// ```
/// assert!(sluice_native::merged::SMALL_KEYS >= 8);
/// ```
pub const SMALL_KEYS: usize = 16;

/// `in` sets in guards with more keys than this are left to the Rust path.
const MAX_IN_KEYS: usize = 64;

/// The most paths (one per key of a small group, one per large group) in
/// one machine function; a larger cluster is split.
const MAX_UNIT_ITEMS: usize = 512;

/// The most groups in one machine function (each reports at most one hit
/// per packet, into a buffer of this many on the caller's stack).
const MAX_UNIT_GROUPS: usize = 64;

/// Packets per chunk of a batch function's software pipeline over a large
/// table: the slots of one chunk are prefetched while the chunk before is
/// probed.
pub(crate) const PIPE: usize = 16;

/// One match found by generated code: a group and the slot of its key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Hit {
    group: u32,
    value: u32,
    datum: u32,
}

/// Where a group's table is, as generated code reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TableDesc {
    words: *const u32,
    mask: u64,
    /// For a [`RawTable`]: the home slot is `raw_hash(key) >> shift`.
    shift: u64,
    /// For a [`RawTable`]: the value-and-datum word of each slot.
    values: *const u64,
}

/// A cluster's machine function: hits written to `out`, their number returned.
type UnitFn = unsafe extern "C" fn(
    pkt: *const u8,
    caplen: u64,
    wirelen: u32,
    tables: *const TableDesc,
    out: *mut Hit,
) -> u64;

/// A cluster's batch function: for each of `n` packets (descriptors at
/// `descs` in [`DescLayout::get`]'s layout), `out[i]` gets [`NO_MATCH`],
/// the one filter of the packet's only match in the cluster, or [`MANY`].
type BatchUnitFn =
    unsafe extern "C" fn(descs: *const u8, n: u64, tables: *const TableDesc, out: *mut u32);

/// A batch result: no group of the function matched.
const NO_MATCH: u32 = u32::MAX;

/// A batch result: more than one group matched, or the key matched has
/// several filters; the caller asks the hit function instead. (Filter ids
/// of single-filter slots are below `Slot::LIST_BASE - 1`, so neither
/// value is a filter.)
const MANY: u32 = u32::MAX - 1;

/// A slot's value and datum as the tables generated code reads hold them:
/// one word, the value in its low half.
fn slot_word(s: Slot) -> u64 {
    s.value as u64 | (s.datum as u64) << 32
}

/// A slot's batch result word: its only filter, or [`MANY`].
fn answer(s: Slot) -> u32 {
    s.single_filter().unwrap_or(MANY)
}

/// A field read the code generator handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum R {
    /// `size` bytes at a fixed offset.
    Abs { off: u32, size: u8 },
    /// `size` bytes at `4 * (pkt[hdr] & 0xf) + off`.
    Rel { hdr: u32, off: u32, size: u8 },
    /// The wire length.
    Len,
    /// A constant.
    Const(u32),
}

impl R {
    fn of(read: FieldRead<'_>) -> Option<R> {
        match read {
            FieldRead::Direct(d) => Some(R::at(d.header(), d.offset(), d.size())),
            FieldRead::Value(Val::Len) => Some(R::Len),
            FieldRead::Value(Val::Const(k)) => Some(R::Const(*k)),
            FieldRead::Value(_) => None,
        }
    }

    /// `size` bytes at `off`, behind the IPv4 header whose first byte is
    /// at `hdr` when there is one.
    fn at(hdr: Option<u32>, off: u32, size: u32) -> R {
        let size = size as u8;
        match hdr {
            None => R::Abs { off, size },
            Some(hdr) => R::Rel { hdr, off, size },
        }
    }

    /// Bytes loaded (0 for `len` and constants).
    fn size(self) -> u32 {
        match self {
            R::Abs { size, .. } | R::Rel { size, .. } => size as u32,
            R::Len | R::Const(_) => 0,
        }
    }

    /// `k` as the raw (host-order) value a load of this field gives when
    /// the field equals `k` ([`crate::raw_const`]; `len` and constants are
    /// not loads); `None` if the field can never equal `k`.
    fn raw(self, k: u32) -> Option<u32> {
        match self.size() {
            s @ (1 | 2 | 4) => crate::raw_const(k, s),
            _ => Some(k),
        }
    }

    /// A mask for a raw value ([`crate::raw_mask`]).
    fn raw_mask(self, m: u32) -> u32 {
        match self.size() {
            s @ (1 | 2 | 4) => crate::raw_mask(m, s),
            _ => m,
        }
    }
}

/// One condition of a path: the field reads without aborting and, with a
/// test, the test gives `truth`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Cond {
    r: R,
    test: Option<Test>,
    truth: bool,
}

/// What a path does when all its conditions hold.
#[derive(Clone, Debug)]
enum Action {
    /// Report a key of a small group.
    Hit { group: u32, slot: Slot },
    /// Hash the key fields (read by the path's conditions) and probe the
    /// group's table, or with a layout its [`RawTable`] (the path's
    /// conditions read the layout's loads instead of the fields).
    Probe {
        group: u32,
        key: Vec<R>,
        raw: Option<Layout>,
    },
}

/// A path of a cluster: a key of a small group, or a whole large group.
#[derive(Clone, Debug)]
struct Item {
    conds: Vec<Cond>,
    action: Action,
}

impl R {
    /// This read when the IPv4 header whose first byte is at `hdr` is
    /// `words` 32-bit words long: behind it, a fixed offset (`None` if
    /// that offset does not fit 32 bits).
    fn with_ipv4_words(self, hdr: u32, words: u32) -> Option<R> {
        match self {
            R::Rel { hdr: h, off, size } if h == hdr => Some(R::Abs {
                off: off.checked_add(4 * words)?,
                size,
            }),
            r => Some(r),
        }
    }

    /// The first byte of the IPv4 header this reads behind, if it does.
    fn ipv4_header(self) -> Option<u32> {
        match self {
            R::Rel { hdr, .. } => Some(hdr),
            _ => None,
        }
    }
}

impl Item {
    /// Every field read of the path: its conditions', then its action's.
    fn reads(&self) -> impl Iterator<Item = R> + '_ {
        let (key, layout): (&[R], _) = match &self.action {
            Action::Probe { key, raw, .. } => (key, raw.as_ref()),
            Action::Hit { .. } => (&[], None),
        };
        let packed = layout.into_iter().flat_map(|l| {
            let loads = l.loads.iter().map(|ld| ld.r);
            loads.chain(l.fixed.iter().map(|f| f.0))
        });
        let conds = self.conds.iter().map(|c| c.r);
        conds.chain(key.iter().copied()).chain(packed)
    }

    /// The path when the IPv4 header at `hdr` is `words` words long
    /// ([`R::with_ipv4_words`]); the caller checked that every offset fits.
    fn with_ipv4_words(&self, hdr: u32, words: u32) -> Item {
        let fix = |r: R| r.with_ipv4_words(hdr, words).unwrap_or(r);
        let conds = self
            .conds
            .iter()
            .map(|c| Cond {
                r: fix(c.r),
                ..c.clone()
            })
            .collect();
        let action = match &self.action {
            Action::Probe { group, key, raw } => Action::Probe {
                group: *group,
                key: key.iter().map(|&r| fix(r)).collect(),
                raw: raw.as_ref().map(|l| l.with_reads(fix)),
            },
            a => a.clone(),
        };
        Item { conds, action }
    }
}

/// The first byte of the IPv4 header that every path reads behind, when
/// they all read behind the same one (and every offset behind it still
/// fits 32 bits for a header of 5 words): where
/// [`Gen::emit_top`] emits a version of the code for a header of 5 words.
fn common_ipv4_header(items: &[Item]) -> Option<u32> {
    let hdr = items.first()?.reads().find_map(R::ipv4_header)?;
    let all = items.iter().all(|it| {
        it.reads().any(|r| r.ipv4_header() == Some(hdr))
            && it.reads().all(|r| r.with_ipv4_words(hdr, 5).is_some())
    });
    all.then_some(hdr)
}

/// What a group's code was built from (equal signatures: the same code).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum GroupSig {
    /// Keys as immediates: every key and its slot, sorted.
    Small(u32, Vec<(Vec<u32>, Slot)>),
    /// A table probe, with the packed layout it uses (if any).
    Large(u32, Option<Layout>),
}

/// How a group is handled.
enum Plan {
    /// No keys: matches nothing.
    Empty,
    /// The Rust path.
    Fallback,
    /// Code: the cluster key, the signature and the paths.
    Code(ClusterKey, GroupSig, Vec<Item>),
}

/// Groups testing the same field (and the same value of it) share a function.
type ClusterKey = (Option<R>, Option<u32>);

/// The group's guards as conditions, `None` if one cannot be compiled.
fn guard_conds(g: &GroupView<'_>) -> Option<Vec<Cond>> {
    g.guards()
        .into_iter()
        .map(|gv| match gv {
            GuardView::Field {
                read, test, truth, ..
            } => {
                if let Test::In(keys) = test {
                    if keys.sorted().len() > MAX_IN_KEYS {
                        return None;
                    }
                }
                Some(Cond {
                    r: R::of(read)?,
                    test: Some(test.clone()),
                    truth,
                })
            }
            GuardView::Pred { .. } => None,
        })
        .collect()
}

/// How group `g` is handled: keys in code when it has at most `small`,
/// else a probe of its packed table when it has one (`packed`: its
/// layout), else of its own table.
fn plan_group(g: &GroupView<'_>, small: usize, packed: Option<&Layout>) -> Plan {
    if g.is_empty() {
        return Plan::Empty;
    }
    let Some(guards) = guard_conds(g) else {
        return Plan::Fallback;
    };
    let Some(key) = g
        .key_fields()
        .into_iter()
        .map(|(_, r)| R::of(r))
        .collect::<Option<Vec<R>>>()
    else {
        return Plan::Fallback;
    };
    let id = g.id();
    if g.len() <= small {
        let mut keys: Vec<(Vec<u32>, Slot)> = g.keys().map(|(k, s)| (k.to_vec(), s)).collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let items: Vec<Item> = keys
            .iter()
            .map(|(k, slot)| {
                let mut conds = guards.clone();
                conds.extend(key.iter().zip(k).map(|(r, &w)| Cond {
                    r: *r,
                    test: Some(Test::Eq(w)),
                    truth: true,
                }));
                Item {
                    conds,
                    action: Action::Hit {
                        group: id,
                        slot: *slot,
                    },
                }
            })
            .collect();
        // Cluster by the lowest fixed-offset field every key tests, and its
        // value when every key has the same.
        let first = key
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, R::Abs { .. }))
            .min_by_key(|(_, r)| **r);
        let cluster = match first {
            Some((i, r)) => {
                let v = keys[0].0[i];
                let same = keys.iter().all(|(k, _)| k[i] == v);
                (Some(*r), same.then_some(v))
            }
            None => (None, None),
        };
        Plan::Code(cluster, GroupSig::Small(id, keys), items)
    } else {
        let raw = packed.cloned();
        let mut conds = guards;
        let reads: Vec<R> = match &raw {
            Some(l) => {
                // Fields every key has the same value of are tested here.
                conds.extend(l.fixed.iter().map(|&(r, v)| Cond {
                    r,
                    test: Some(Test::Eq(v)),
                    truth: true,
                }));
                l.loads.iter().map(|l| l.r).collect()
            }
            None => key.clone(),
        };
        conds.extend(reads.into_iter().map(|r| Cond {
            r,
            test: None,
            truth: true,
        }));
        let first = conds
            .iter()
            .filter(|c| matches!(c.r, R::Abs { .. }))
            .map(|c| c.r)
            .min();
        Plan::Code(
            (first, None),
            GroupSig::Large(id, raw.clone()),
            vec![Item {
                conds,
                action: Action::Probe {
                    group: id,
                    key,
                    raw,
                },
            }],
        )
    }
}

/// What the code generator emitted for one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct UnitStats {
    keys_in_code: usize,
    /// Sets of keys dispatched by a perfect hash.
    hashed_sets: usize,
    probes: usize,
    loads: usize,
    bounds_checks: usize,
    coalesced: usize,
    /// Functions with a version for IPv4 headers of 5 words.
    ipv4_fast: usize,
    code_bytes: usize,
}

/// One cluster's machine functions: the hit function (one packet, every
/// hit written out), the batch function (many packets, one result word
/// each) and, when a path probes a table, the batch function pipelined for
/// large tables, built from the same paths.
struct Unit {
    func: UnitFn,
    batch: BatchUnitFn,
    pipelined: Option<Pipelined>,
    /// Own the code pages (freed when this is dropped).
    _pages: CodePages,
    _batch_pages: CodePages,
    _pipelined_pages: Option<CodePages>,
    /// Tables the code reads by address (perfect-hash key sets).
    _data: Vec<Box<[u64]>>,
    stats: UnitStats,
}

// SAFETY: after `finalize_definitions` the module is only touched again to
// free its memory in `Drop` (exclusive access). The code is immutable
// (read+execute pages), reentrant and keeps no state between calls: it
// writes only the hit array it is given.
unsafe impl Send for Unit {}
// SAFETY: see `Send`.
unsafe impl Sync for Unit {}

/// The compiled form of one state of a [`Merged`]: built once per publish
/// and shared by both copies of a [`NativeClassifier`] (its
/// [`Engine::Derived`] state). Opaque.
///
/// ```
/// use sluice_classifier::Engine;
/// let _: Option<<sluice_native::merged::NativeMerged as Engine>::Derived> = None;
/// ```
pub struct Code {
    units: Vec<Arc<Unit>>,
    /// The units' entries, in the same order (the per-packet loop).
    fns: Box<[UnitFn]>,
    /// The units' batch entries, in the same order.
    batch_fns: Box<[BatchUnitFn]>,
    /// Groups run by the Rust path.
    fallback: Vec<u32>,
}

/// What the native merged classifier holds and has done.
///
/// ```
/// let s = sluice_native::merged::NativeMerged::new().native_stats();
/// assert_eq!(s.compilations, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NativeStats {
    /// Machine functions compiled since the start (a function reused from
    /// the cache is not counted).
    pub compilations: u64,
    /// Machine functions in use.
    pub units: usize,
    /// Groups whose keys are immediates in the code.
    pub small_groups: usize,
    /// Keys compiled as immediates.
    pub keys_in_code: usize,
    /// Key sets of small groups dispatched by a perfect hash chosen for
    /// their keys (DPF's hashed disjunctions), in all functions in use:
    /// one multiply-shift and one compare of the whole key, no collision
    /// chain and no data-dependent branch before the compare.
    pub hashed_sets: usize,
    /// Groups probed in their hash table by the code.
    pub probe_groups: usize,
    /// Groups left to the Rust path.
    pub fallback_groups: usize,
    /// Length checks emitted, in all functions in use.
    pub bounds_checks: usize,
    /// Compares merged away by atom coalescing, in all functions in use.
    pub coalesced: usize,
    /// Clusters whose code has a version for IPv4 headers of 5 words, where
    /// the fields behind the header are at fixed offsets (their counts
    /// above are of the general version).
    pub ipv4_fast: usize,
    /// Bytes of machine code in use.
    pub code_bytes: usize,
    /// Time the last [`NativeMerged::update`] took (planning and compiling).
    pub last_update: Duration,
    /// Time spent compiling in the last update (zero when nothing changed).
    pub last_compile: Duration,
}

/// The code cache: per cluster (and chunk), the signatures its function
/// was built from.
#[derive(Default)]
struct Compiler {
    cache: HashMap<(ClusterKey, usize), (Vec<GroupSig>, Arc<Unit>)>,
    stats: NativeStats,
    small: usize,
}

impl Compiler {
    /// The code for `m`: cached functions where their groups are unchanged.
    fn build(&mut self, m: &Merged, packed: &[Option<RawTable>]) -> Arc<Code> {
        let t0 = Instant::now();
        let mut compile_time = Duration::ZERO;
        let mut clusters: BTreeMap<ClusterKey, Vec<(GroupSig, Vec<Item>)>> = BTreeMap::new();
        let mut fallback = Vec::new();
        for g in m.group_views() {
            let layout = packed
                .get(g.id() as usize)
                .and_then(Option::as_ref)
                .map(RawTable::layout);
            match plan_group(&g, self.small, layout) {
                Plan::Empty => {}
                Plan::Fallback => fallback.push(g.id()),
                Plan::Code(key, sig, items) => clusters.entry(key).or_default().push((sig, items)),
            }
        }
        let mut stats = NativeStats {
            compilations: self.stats.compilations,
            ..NativeStats::default()
        };
        let mut units = Vec::new();
        let mut cache = HashMap::new();
        for (key, groups) in clusters {
            // Chunks of at most MAX_UNIT_ITEMS paths (whole groups).
            let mut chunks: Vec<Vec<(GroupSig, Vec<Item>)>> = vec![Vec::new()];
            let mut n = 0;
            for g in groups {
                let full = chunks.last().map_or(0, Vec::len) >= MAX_UNIT_GROUPS;
                if n > 0 && (n + g.1.len() > MAX_UNIT_ITEMS || full) {
                    chunks.push(Vec::new());
                    n = 0;
                }
                n += g.1.len();
                chunks.last_mut().unwrap().push(g);
            }
            for (ci, chunk) in chunks.into_iter().enumerate() {
                let sigs: Vec<GroupSig> = chunk.iter().map(|g| g.0.clone()).collect();
                let unit = match self.cache.remove(&(key, ci)) {
                    Some((old, unit)) if old == sigs => Some(unit),
                    _ => {
                        let t = Instant::now();
                        let ngroups = chunk.len();
                        let items: Vec<Item> = chunk.into_iter().flat_map(|g| g.1).collect();
                        let built = compile_unit(items, ngroups);
                        compile_time += t.elapsed();
                        stats.compilations += 1;
                        built.ok().map(Arc::new)
                    }
                };
                match unit {
                    Some(u) => {
                        for s in &sigs {
                            match s {
                                GroupSig::Small(..) => stats.small_groups += 1,
                                GroupSig::Large(..) => stats.probe_groups += 1,
                            }
                        }
                        stats.keys_in_code += u.stats.keys_in_code;
                        stats.hashed_sets += u.stats.hashed_sets;
                        stats.bounds_checks += u.stats.bounds_checks;
                        stats.coalesced += u.stats.coalesced;
                        stats.ipv4_fast += u.stats.ipv4_fast;
                        stats.code_bytes += u.stats.code_bytes;
                        units.push(u.clone());
                        cache.insert((key, ci), (sigs, u));
                    }
                    None => fallback.extend(sigs.iter().map(|s| match s {
                        GroupSig::Small(g, _) | GroupSig::Large(g, _) => *g,
                    })),
                }
            }
        }
        self.cache = cache;
        fallback.sort_unstable();
        stats.units = units.len();
        stats.fallback_groups = fallback.len();
        stats.last_compile = compile_time;
        stats.last_update = t0.elapsed();
        self.stats = stats;
        Arc::new(Code {
            fns: units.iter().map(|u| u.func).collect(),
            batch_fns: units.iter().map(|u| u.batch).collect(),
            units,
            fallback,
        })
    }
}

/// Generate and compile one cluster's functions.
fn compile_unit(items: Vec<Item>, groups: usize) -> Result<Unit, NativeError> {
    // The caller's hit buffer holds MAX_UNIT_GROUPS hits: at most one per group.
    if groups > MAX_UNIT_GROUPS {
        return Err(NativeError::Limit(format!(
            "{groups} groups in one function"
        )));
    }
    // The groups the paths probe in their tables, with their slots' size
    // in bytes.
    let mut probed: Vec<(u32, usize)> = items
        .iter()
        .filter_map(|it| match &it.action {
            Action::Probe {
                group,
                raw: Some(l),
                ..
            } => Some((*group, l.slot_bytes())),
            Action::Probe { group, key, .. } => Some((*group, key_slot_bytes(key.len()))),
            Action::Hit { .. } => None,
        })
        .collect();
    probed.sort_unstable();
    probed.dedup();
    let mut stats = UnitStats::default();
    let mut data = Vec::new();
    let (code, pages) = compile_fn(items.clone(), groups, FnKind::Hit, &mut stats, &mut data)?;
    // The batch functions follow the same paths: only their size counts.
    let mut more = UnitStats::default();
    let kind = FnKind::Batch;
    let (batch, batch_pages) = compile_fn(items.clone(), groups, kind, &mut more, &mut data)?;
    let pipelined = if probed.is_empty() {
        None
    } else {
        let kind = FnKind::Pipelined;
        let (f, pages) = compile_fn(items, groups, kind, &mut more, &mut data)?;
        // SAFETY: `f` is the entry of a batch function just finalized, as
        // for `batch` below.
        let func = unsafe { std::mem::transmute::<*const u8, BatchUnitFn>(f) };
        let probed = probed.into();
        Some((Pipelined { func, probed }, pages))
    };
    stats.code_bytes += more.code_bytes;
    // SAFETY: `code` is the entry of the hit function just finalized, whose
    // signature (pointer, i64, i32, pointer, pointer) -> i64 in the host's
    // default calling convention is exactly `UnitFn`'s `extern "C"` ABI.
    let func = unsafe { std::mem::transmute::<*const u8, UnitFn>(code) };
    // SAFETY: `batch` is the entry of the batch function just finalized,
    // whose signature (pointer, i64, pointer, pointer) -> () in the host's
    // default calling convention is exactly `BatchUnitFn`'s ABI.
    let batch = unsafe { std::mem::transmute::<*const u8, BatchUnitFn>(batch) };
    let (pipelined, pipelined_pages) = pipelined.unzip();
    Ok(Unit {
        func,
        batch,
        pipelined,
        _pages: pages,
        _batch_pages: batch_pages,
        _pipelined_pages: pipelined_pages,
        _data: data,
        stats,
    })
}

/// A cluster's pipelined batch function, and the tables it probes.
struct Pipelined {
    func: BatchUnitFn,
    /// The groups its paths probe, with their slots' size in bytes.
    probed: Box<[(u32, usize)]>,
}

impl Pipelined {
    /// True when one of its tables has at least `bytes` of slots, so that
    /// its probes mostly miss the caches ([`prefetch_slots`]).
    fn big(&self, descs: &[TableDesc], bytes: usize) -> bool {
        self.probed.iter().any(|&(g, slot_bytes)| {
            descs
                .get(g as usize)
                .is_some_and(|d| d.mask >= prefetch_slots(bytes, slot_bytes) - 1)
        })
    }
}

/// Which of a cluster's functions [`compile_fn`] builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FnKind {
    /// `(pkt, caplen, wirelen, tables, out) -> hits` ([`UnitFn`]).
    Hit,
    /// A loop over packet descriptors, one result word per packet
    /// ([`BatchUnitFn`]).
    Batch,
    /// The same loop as a software pipeline, for probed tables too large
    /// for the caches ([`PIPE`]).
    Pipelined,
}

/// Generate and compile one function of a cluster (`kind`). Its entry and
/// the pages that hold it; tables the code reads by address are added to
/// `data`, which must outlive the code.
fn compile_fn(
    items: Vec<Item>,
    groups: usize,
    kind: FnKind,
    stats: &mut UnitStats,
    data: &mut Vec<Box<[u64]>>,
) -> Result<(*const u8, CodePages), NativeError> {
    let mut module = CodePages::module()?;
    let ptr = module.target_config().pointer_type();
    if ptr != types::I64 {
        return Err(NativeError::Limit(
            "the merged classifier needs 64-bit pointers".into(),
        ));
    }
    let mut ctx = module.make_context();
    let sig = &mut ctx.func.signature;
    if kind != FnKind::Hit {
        sig.params.push(AbiParam::new(ptr));
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(ptr));
        sig.params.push(AbiParam::new(ptr));
    } else {
        sig.params.push(AbiParam::new(ptr));
        sig.params.push(AbiParam::new(types::I64));
        sig.params.push(AbiParam::new(types::I32));
        sig.params.push(AbiParam::new(ptr));
        sig.params.push(AbiParam::new(ptr));
        sig.returns.push(AbiParam::new(types::I64));
    }
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let p = b.block_params(entry).to_vec();
        let start = b.create_block();
        let done = b.create_block();
        let count = Variable::from_u32(0);
        // For a batch: the loop's descriptor and result pointers, their end
        // and the loop's blocks.
        let mut lp = None;
        let (descs, n) = (p[0], p[1]);
        let layout = DescLayout::get();
        let stride = layout.stride as i64;
        // The pipelined function runs in chunks of `PIPE` packets: before
        // a chunk is probed, the paths run once over the next chunk with
        // every probe replaced by a prefetch of its first slot
        // (`Out::Prefetch`), so memory fetches one chunk's slots while the
        // core probes the chunk before (the first chunk prefetches itself
        // too). The main loop runs up to `stop`: the chunk's end, or in
        // the plain batch function the batch's end.
        let stop = Variable::from_u32(1);
        let mut prefetch = None;
        let (pkt, caplen, wirelen, tables, out) = if kind != FnKind::Hit {
            // The loops step a descriptor pointer (and the main loop a
            // result pointer with it).
            b.declare_var(stop, ptr);
            let head = b.create_block();
            let d = b.append_block_param(head, ptr);
            let slot = b.append_block_param(head, ptr);
            let exit = b.create_block();
            let end = layout.end(&mut b, ptr, descs, n);
            let mut chunk = None;
            if kind == FnKind::Batch {
                // entry: if n == 0 return, else head(descs, out).
                b.def_var(stop, end);
                b.ins().brif(n, head, &[descs, p[3]], exit, &[]);
            } else {
                // chunk(c, cs, from): the chunk's packets run from c (their
                // results from cs) to stop = min(c + PIPE, end); prefetch
                // from `from` to min(stop + PIPE, end), then probe.
                let ch = b.create_block();
                let c = b.append_block_param(ch, ptr);
                let cs = b.append_block_param(ch, ptr);
                let from = b.append_block_param(ch, ptr);
                // entry: if n == 0 return, else chunk(descs, out, descs).
                b.ins().brif(n, ch, &[descs, p[3], descs], exit, &[]);
                b.switch_to_block(ch);
                let cstop = chunk_end(&mut b, c, end);
                b.def_var(stop, cstop);
                let pstop = chunk_end(&mut b, cstop, end);
                let pre_head = b.create_block();
                let pd = b.append_block_param(pre_head, ptr);
                let any = b.ins().icmp(IntCC::UnsignedLessThan, from, pstop);
                b.ins().brif(any, pre_head, &[from], head, &[c, cs]);
                b.switch_to_block(pre_head);
                let (pkt, caplen, wirelen) = layout.read(&mut b, ptr, pd);
                let pre_start = b.create_block();
                b.ins().jump(pre_start, &[]);
                prefetch = Some((pd, pre_head, pre_start, pkt, caplen, wirelen, pstop, c, cs));
                chunk = Some(ch);
                // (pre_done is filled after the paths.)
            }
            b.switch_to_block(exit);
            b.ins().return_(&[]);
            // head(d, slot): read the descriptor at d, mark the result "no
            // match", then the paths.
            b.switch_to_block(head);
            let (pkt, caplen, wirelen) = layout.read(&mut b, ptr, d);
            // With one group, a hit ends the packet (`done`) and every other
            // way out is "no match" (`nomatch`, below); with several, the
            // word starts as "no match" and hits update it.
            let single = groups == 1;
            if !single {
                let none = b.ins().iconst(types::I32, NO_MATCH as i64);
                b.ins().store(MemFlags::trusted(), none, slot, 0);
            }
            b.ins().jump(start, &[]);
            lp = Some((d, slot, end, head, exit, chunk));
            let done = single.then_some(done);
            (pkt, caplen, wirelen, p[2], Out::First { slot, done })
        } else {
            b.declare_var(count, types::I64);
            let zero = b.ins().iconst(types::I64, 0);
            b.def_var(count, zero);
            b.ins().jump(start, &[]);
            (p[0], p[1], p[2], p[3], Out::Hits { out: p[4], count })
        };
        let mut g = Gen {
            b,
            pkt,
            caplen,
            wirelen,
            tables,
            out,
            stats,
            data,
            steps: Vec::new(),
        };
        if let (
            Some((pd, pre_head, pre_start, pkt, caplen, wirelen, pstop, c, cs)),
            Some((_, _, _, head, _, _)),
        ) = (prefetch, lp)
        {
            let pre_done = g.b.create_block();
            let main = (g.pkt, g.caplen, g.wirelen, g.out);
            (g.pkt, g.caplen, g.wirelen, g.out) = (pkt, caplen, wirelen, Out::Prefetch);
            // Only the probing paths matter in this pass.
            let probes: Vec<Item> = items
                .iter()
                .filter(|it| matches!(it.action, Action::Probe { .. }))
                .cloned()
                .collect();
            let saved = std::mem::take(g.stats);
            g.emit_top(pre_start, probes, pre_done);
            *g.stats = saved;
            (g.pkt, g.caplen, g.wirelen, g.out) = main;
            // pre_done: pd + stride < pstop ? pre_head(pd + stride) : head(c, cs).
            g.b.switch_to_block(pre_done);
            let pd1 = g.b.ins().iadd_imm(pd, stride);
            let more = g.b.ins().icmp(IntCC::UnsignedLessThan, pd1, pstop);
            g.b.ins().brif(more, pre_head, &[pd1], head, &[c, cs]);
        }
        // With one group, the ways out without a match store "no match"
        // in a block laid out after the loop's step, so that a hit falls
        // through into the step.
        let nomatch = match g.out {
            Out::First {
                slot,
                done: Some(_),
            } => {
                let nomatch = g.b.create_block();
                // Cranelift orders blocks by the control flow, not by
                // creation; a cold block goes after all the others.
                g.b.set_cold_block(nomatch);
                g.emit_top(start, items, nomatch);
                Some((nomatch, slot))
            }
            _ => {
                g.emit_top(start, items, done);
                None
            }
        };
        match lp {
            // done: d + stride < stop ? head(d + stride, slot + 4), else
            // the next chunk if there is one, else return. The fast
            // version's hits have a copy of this step of their own
            // (`g.steps`), so that they fall through into it.
            Some((d, slot, end, head, exit, chunk)) => {
                let next = chunk.map(|_| {
                    let next = g.b.create_block();
                    g.b.append_block_param(next, ptr);
                    g.b.append_block_param(next, ptr);
                    next
                });
                for blk in std::iter::once(done).chain(std::mem::take(&mut g.steps)) {
                    g.b.switch_to_block(blk);
                    let stop = g.b.use_var(stop);
                    let (d1, slot1, more) = layout.step(&mut g.b, d, slot, stop);
                    match next {
                        None => g.b.ins().brif(more, head, &[d1, slot1], exit, &[]),
                        Some(next) => g.b.ins().brif(more, head, &[d1, slot1], next, &[d1, slot1]),
                    };
                }
                if let (Some(ch), Some(next)) = (chunk, next) {
                    // next(d1, slot1): d1 < end ? chunk(d1, slot1, min(d1 + PIPE, end)) : return.
                    g.b.switch_to_block(next);
                    let (d1, slot1) = (g.b.block_params(next)[0], g.b.block_params(next)[1]);
                    let rest = g.b.ins().icmp(IntCC::UnsignedLessThan, d1, end);
                    let from = chunk_end(&mut g.b, d1, end);
                    g.b.ins().brif(rest, ch, &[d1, slot1, from], exit, &[]);
                }
            }
            None => {
                g.b.switch_to_block(done);
                let n = g.b.use_var(count);
                g.b.ins().return_(&[n]);
            }
        }
        if let Some((nomatch, slot)) = nomatch {
            g.b.switch_to_block(nomatch);
            let none = g.b.ins().iconst(types::I32, NO_MATCH as i64);
            g.b.ins().store(MemFlags::trusted(), none, slot, 0);
            g.b.ins().jump(done, &[]);
        }
        g.b.seal_all_blocks();
        g.b.finalize();
    }
    let name = match kind {
        FnKind::Hit => "classify",
        FnKind::Batch => "classify_batch",
        FnKind::Pipelined => "classify_pipelined",
    };
    let (code, bytes) = CodePages::finish(&mut module, &mut ctx, name)?;
    stats.code_bytes += bytes;
    Ok((code, CodePages::new(module)))
}

/// In generated code: the descriptor pointer [`PIPE`] packets after `d`,
/// or `end` if that is sooner.
fn chunk_end(b: &mut FunctionBuilder, d: Value, end: Value) -> Value {
    let ahead = b
        .ins()
        .iadd_imm(d, (PIPE * DescLayout::get().stride) as i64);
    b.ins().umin(ahead, end)
}

/// A coalesced compare: the `width` bytes (1, 2, 4, 8 or 16) at `base`,
/// and-ed with `mask`, equal `value` (both in packet order; bytes past
/// `width` are zero).
#[derive(Clone, Copy)]
struct MaskTest {
    base: u32,
    width: u32,
    mask: [u8; 16],
    value: [u8; 16],
}

impl MaskTest {
    /// Nothing tested yet.
    fn new(base: u32, width: u32) -> MaskTest {
        let (mask, value) = ([0; 16], [0; 16]);
        MaskTest {
            base,
            width,
            mask,
            value,
        }
    }

    /// Also test the bytes at `off` (inside the window): `mask` and
    /// `value`, packet order.
    fn put(&mut self, off: u32, mask: &[u8], value: &[u8]) {
        let at = (off - self.base) as usize;
        self.mask[at..at + mask.len()].copy_from_slice(mask);
        self.value[at..at + value.len()].copy_from_slice(value);
    }
}

/// What is known at a point of the generated code (it dominates there).
#[derive(Clone, Default)]
struct Ctx {
    /// Raw (host-order) values of fields read.
    raw: Vec<(R, Value)>,
    /// Their values in network order (as the tables hold them).
    be: Vec<(R, Value)>,
    /// `4 * (pkt[hdr] & 0xf)` as a 64-bit value, per `hdr`.
    hl: Vec<(u32, Value)>,
    /// The captured length is at least this.
    known: u64,
    /// Per `hdr`: the captured length is at least `hl + this`.
    rel: Vec<(u32, u64)>,
}

fn find<K: PartialEq + Copy, V: Copy>(v: &[(K, V)], k: K) -> Option<V> {
    v.iter().find(|(x, _)| *x == k).map(|(_, y)| *y)
}

/// A test and the outcome wanted (`None`: the field need only be read).
type TestSig = (Option<Test>, bool);

/// The code generator of one function.
struct Gen<'a, 's> {
    b: FunctionBuilder<'a>,
    pkt: Value,
    caplen: Value,
    wirelen: Value,
    tables: Value,
    out: Out,
    stats: &'s mut UnitStats,
    /// Tables the code reads by address; they live as long as the code.
    data: &'s mut Vec<Box<[u64]>>,
    /// Blocks that get a copy of the batch loop's step (the fast version's
    /// way on after a hit, [`Gen::emit_top`]).
    steps: Vec<Block>,
}

/// Where a function's matches go.
#[derive(Clone, Copy)]
enum Out {
    /// The hit function: hits written to `out[count]`, their number in
    /// `count` (returned).
    Hits { out: Value, count: Variable },
    /// The batch function: the packet's result word at `slot`
    /// ([`NO_MATCH`], a filter or [`MANY`]). `done`: the function has one
    /// group, so at most one match per packet, and a hit writes the word
    /// and goes on with the next packet there.
    First { slot: Value, done: Option<Block> },
    /// The batch function's first pass over a batch with a large table:
    /// a probe only prefetches its first slot; nothing is recorded.
    Prefetch,
}

/// A linear probe's loop in generated code: its head block with the slot
/// index and the steps left as parameters, the table's mask and the
/// current slot's address.
struct ProbeWalk {
    head: Block,
    i: Value,
    left: Value,
    mask: Value,
    slot: Value,
}

/// Tables of at least this many slots of `slot_bytes` are prefetched a
/// chunk ahead by the batch functions ([`PIPE`]): those of `bytes` and
/// more (by default half the last-level cache), whose slots mostly come
/// from memory. A smaller table is mostly in the caches, and the prefetch
/// pass (parsing and hashing every packet twice) costs more than it saves
/// (measured with the earlier whole-batch pass): on this project's 2-core EPYC
/// (32 MiB L3), with 1M packets of random sessions, an 8 MiB table probed
/// in 13.4 ns a packet without the pass and 16.5 ns with it, a 16 MiB one
/// in 24.4-32.5 ns without and 20.9-22.6 ns with.
fn prefetch_slots(bytes: usize, slot_bytes: usize) -> u64 {
    (bytes / slot_bytes.max(1)).next_power_of_two() as u64
}

/// The size of the largest CPU cache, from Linux's sysfs (16 MiB where it
/// cannot be read), read once.
fn last_level_cache() -> usize {
    static BYTES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
        let sizes = std::fs::read_dir(dir).into_iter().flatten().flatten();
        sizes
            .filter_map(|e| std::fs::read_to_string(e.path().join("size")).ok())
            .filter_map(|s| cache_size(&s))
            .max()
            .unwrap_or(16 << 20)
    })
}

/// A cache size as sysfs writes it ("32768K", "1M", "512"), in bytes.
fn cache_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let shift = match unit {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        _ => return None,
    };
    n.checked_mul(1 << shift)
}

/// Bytes per slot of a group's own [`KeyTable`](sluice_classifier::table::KeyTable)
/// with keys of `width` fields: value, datum and the key, 32 bits each.
fn key_slot_bytes(width: usize) -> usize {
    (width + 2) * 4
}

/// Called from generated code: ask the CPU to bring the cache line at `p`
/// (a slot of a probed table) closer, ahead of the probe that reads it.
extern "C" fn prefetch_helper(p: *const u8) {
    prefetch(p)
}

/// The constant a load of `width` (2, 4 or 8) bytes gives where memory
/// holds `bytes` (host byte order), zero-extended.
fn ne_word(bytes: &[u8; 8], width: u32) -> u64 {
    match width {
        1 => bytes[0] as u64,
        2 => u16::from_ne_bytes([bytes[0], bytes[1]]) as u64,
        4 => u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64,
        _ => u64::from_ne_bytes(*bytes),
    }
}

/// Where fields lie, as `(header, offset, size)`, `place(k)` for the k-th
/// of `n` fields sorted by place: the longest run of adjacent fields from
/// `i` (same header, each starting where the last ends) whose sizes add up
/// to 2, 4 or 8 bytes, as its end and that total (the run of field `i`
/// alone when no longer one adds up). Atom coalescing reads such a run
/// with one load.
fn adjacent_run(
    n: usize,
    i: usize,
    place: impl Fn(usize) -> (Option<u32>, u32, u32),
) -> (usize, u32) {
    let (hdr, off, size) = place(i);
    let (mut j, mut total) = (i + 1, size);
    let mut best = (i + 1, size);
    while j < n {
        let (h2, o2, s2) = place(j);
        if h2 != hdr || o2 != off + total || total + s2 > 8 {
            break;
        }
        total += s2;
        j += 1;
        if matches!(total, 2 | 4 | 8) {
            best = (j, total);
        }
    }
    best
}

/// Flags of packet loads: they cannot trap (a length check dominates
/// them) but are not marked read-only, so Cranelift treats them as
/// effectful and never moves one above its length check.
fn flags() -> MemFlags {
    MemFlags::new().with_notrap()
}

impl Gen<'_, '_> {
    /// Fill `blk` with the code of a packet's `items`, then continue at
    /// `cont`. When every item reads behind the IPv4 header at one place,
    /// the code comes twice: for the usual header of 5 words, with every
    /// field behind it at a fixed offset (no header-length arithmetic, the
    /// length checks and compares merged with the ones before the header),
    /// and for any header, the general code. The fast version is entered
    /// only when the packet's header byte says 5 words and every read the
    /// paths share is in the captured bytes; any test that fails before it
    /// is entered sends the packet to the general code, which decides
    /// alone. Past the entry, the fast version is the general code with a
    /// known header length, so both give the same answer.
    fn emit_top(&mut self, blk: Block, items: Vec<Item>, cont: Block) {
        let Some(hdr) = common_ipv4_header(&items) else {
            self.emit(blk, items, Ctx::default(), cont);
            return;
        };
        let mut fast: Vec<Item> = items.iter().map(|it| it.with_ipv4_words(hdr, 5)).collect();
        let general = self.b.create_block();
        self.b.switch_to_block(blk);
        // The fast version's statistics are not counted: it is the general
        // code again, specialised.
        let saved = std::mem::take(self.stats);
        // A single group's hit goes on with the next packet: the fast
        // version's hits in a step of their own, laid out after them.
        let out = self.out;
        if let Out::First {
            slot,
            done: Some(_),
        } = out
        {
            let step = self.b.create_block();
            self.steps.push(step);
            self.out = Out::First {
                slot,
                done: Some(step),
            };
        }
        let mut ctx = Ctx::default();
        self.aggregate(&fast, &mut ctx, general, hdr as u64 + 1);
        let entry = (hdr, 0x0f, 5, general);
        self.shared_masks(&mut fast, &ctx, cont, Some(entry));
        let rest = self.b.create_block();
        self.b.ins().jump(rest, &[]);
        self.emit(rest, fast, ctx, cont);
        self.out = out;
        *self.stats = saved;
        self.stats.ipv4_fast += 1;
        self.emit(general, items, Ctx::default(), cont);
    }

    /// Fill `blk` with the code of `items`: every item whose conditions
    /// hold does its action; then continue at `cont`.
    fn emit(&mut self, blk: Block, items: Vec<Item>, mut ctx: Ctx, cont: Block) {
        self.b.switch_to_block(blk);
        if items.is_empty() {
            self.b.ins().jump(cont, &[]);
            return;
        }
        self.aggregate(&items, &mut ctx, cont, 0);
        let mut items = items;
        self.shared_masks(&mut items, &ctx, cont, None);
        let mut rest = Vec::new();
        for it in items {
            if it.conds.is_empty() {
                self.action(&it.action, &mut ctx);
            } else {
                rest.push(it);
            }
        }
        if rest.is_empty() {
            self.b.ins().jump(cont, &[]);
            return;
        }
        if rest.len() == 1 {
            let it = rest.pop().unwrap();
            self.leaf(it, ctx, cont);
            return;
        }
        let rest = match self.perfect_hash(rest, &mut ctx, cont) {
            Ok(()) => return,
            Err(rest) => rest,
        };
        // The field most paths test (known ones first, then by offset).
        let mut counts: BTreeMap<R, usize> = BTreeMap::new();
        for it in &rest {
            let mut seen: Vec<R> = it.conds.iter().map(|c| c.r).collect();
            seen.sort_unstable();
            seen.dedup();
            for r in seen {
                *counts.entry(r).or_default() += 1;
            }
        }
        let f = counts
            .iter()
            .max_by_key(|(r, n)| (**n, find(&ctx.raw, **r).is_some(), std::cmp::Reverse(**r)))
            .map(|(r, _)| *r)
            .expect("items have conditions");
        let (with, without): (Vec<Item>, Vec<Item>) = rest
            .into_iter()
            .partition(|it| it.conds.iter().any(|c| c.r == f));
        let rest_blk = if without.is_empty() {
            cont
        } else {
            self.b.create_block()
        };
        let outer = ctx.clone();
        let v = self.read_raw(&mut ctx, f, rest_blk);
        let mut eq: BTreeMap<u32, Vec<Item>> = BTreeMap::new();
        let mut others: Vec<(TestSig, Vec<Item>)> = Vec::new();
        for mut it in with {
            let i = it.conds.iter().position(|c| c.r == f).unwrap();
            let c = it.conds.remove(i);
            match c.test {
                Some(Test::Eq(k)) if c.truth => {
                    if let Some(rk) = f.raw(k) {
                        eq.entry(rk).or_default().push(it);
                    }
                }
                test => {
                    let sig = (test, c.truth);
                    match others.iter_mut().find(|(s, _)| *s == sig) {
                        Some((_, v)) => v.push(it),
                        None => others.push((sig, vec![it])),
                    }
                }
            }
        }
        let other_blk = if others.is_empty() {
            rest_blk
        } else {
            self.b.create_block()
        };
        if eq.is_empty() {
            self.b.ins().jump(other_blk, &[]);
        } else {
            let arms: Vec<(u32, Block)> = eq.keys().map(|&k| (k, self.b.create_block())).collect();
            self.dispatch(v, f, &arms, other_blk);
            for ((_, blk), (_, items)) in arms.into_iter().zip(eq) {
                self.emit(blk, items, ctx.clone(), other_blk);
            }
        }
        let n = others.len();
        let mut cur = other_blk;
        for (i, ((test, truth), items)) in others.into_iter().enumerate() {
            let next = if i + 1 == n {
                rest_blk
            } else {
                self.b.create_block()
            };
            self.b.switch_to_block(cur);
            let sub = self.b.create_block();
            match test {
                None => {
                    self.b.ins().jump(sub, &[]);
                }
                Some(t) => {
                    let mut c2 = ctx.clone();
                    self.test(&mut c2, f, &t, truth, sub, next);
                }
            }
            self.emit(sub, items, ctx.clone(), next);
            cur = next;
        }
        if !without.is_empty() {
            self.emit(rest_blk, without, outer, cont);
        }
    }

    /// Keys of one small group that all test the same fields for
    /// equality, at least [`HASH_MIN_KEYS`] of them: dispatched by a
    /// perfect hash chosen for these keys (DPF's hashed disjunctions).
    /// Fields equal in every key are tested once; the others are read as
    /// few words as possible (adjacent fields as one 2-, 4- or 8-byte
    /// load), combined, and multiplied by a constant found so that no two
    /// keys share a slot of a table of at most eight times as many slots,
    /// so there is no collision chain: one slot is loaded and the whole key
    /// compared with one branch. Unused slots hold a copy of a key that
    /// hashes elsewhere, so they never match. `Err(items)` when the items
    /// do not have that form or no multiplier was found (the search tree
    /// is used instead).
    fn perfect_hash(
        &mut self,
        items: Vec<Item>,
        ctx: &mut Ctx,
        cont: Block,
    ) -> Result<(), Vec<Item>> {
        let Some(shape) = hash_shape(&items) else {
            return Err(items);
        };
        let HashShape {
            group,
            fixed,
            words,
            keys,
        } = shape;
        let Some((mult, bits)) = find_multiplier(&keys) else {
            return Err(items);
        };
        self.stats.hashed_sets += 1;
        self.stats.keys_in_code += keys.len();
        self.stats.coalesced += words.iter().map(|w| w.fields - 1).sum::<usize>();
        // Column by column, one word per slot in each: the key's words,
        // then value | datum << 32, then the batch function's result word
        // (so that a slot's word is at the column's start + 8 × the slot,
        // which x86-64 addresses without a shift of its own).
        let k = words.len();
        let slots = 1usize << bits;
        let mut table = vec![0u64; slots * (k + 2)];
        for (j, w) in keys[0].0.iter().enumerate() {
            // Copies of the first key: it hashes to its own slot, never here.
            table[j * slots..(j + 1) * slots].fill(*w);
        }
        for (key, slot) in &keys {
            let at = (combine(key).wrapping_mul(mult) >> (64 - bits)) as usize;
            for (j, w) in key.iter().enumerate() {
                table[j * slots + at] = *w;
            }
            table[k * slots + at] = slot_word(*slot);
            table[(k + 1) * slots + at] = answer(*slot) as u64;
        }
        let table: Box<[u64]> = table.into();
        let base = table.as_ptr() as i64;
        self.data.push(table);
        // The fields every key tests alike.
        for (r, k) in fixed {
            let next = self.b.create_block();
            self.test(ctx, r, &Test::Eq(k), true, next, cont);
            self.b.switch_to_block(next);
        }
        // Read every word (a failed read fails every key), combine, hash.
        let mut vals = Vec::with_capacity(k);
        for w in &words {
            vals.push(if w.fields == 1 {
                self.read_raw64(ctx, w.r, cont)
            } else {
                self.stats.loads += 1;
                let a = self.addr(ctx, w.r, w.width, cont);
                self.load_word(a, w.width, types::I64)
            });
        }
        let mut x = vals[0];
        for (i, &v) in vals.iter().enumerate().skip(1) {
            let m = self.b.ins().imul_imm(v, COMBINE[i - 1] as i64);
            x = self.b.ins().iadd(x, m);
        }
        let h = self.b.ins().imul_imm(x, mult as i64);
        let h = self.b.ins().ushr_imm(h, (64 - bits) as i64);
        let off = self.b.ins().ishl_imm(h, 3);
        let column = |j: usize| (8 * slots * j) as i32;
        // The table's address, read from a cell rather than used as an
        // immediate: a read-only load is hoisted out of the batch loop into
        // a register, where an immediate would be rematerialised at every
        // use.
        let cell: Box<[u64]> = vec![base as u64].into();
        let cell_at = self.b.ins().iconst(types::I64, cell.as_ptr() as i64);
        self.data.push(cell);
        let fl = MemFlags::trusted().with_readonly();
        let base = self.b.ins().load(types::I64, fl, cell_at, 0);
        let at = self.b.ins().iadd(off, base);
        let mut diff = None;
        for (i, &have) in vals.iter().enumerate() {
            let want = self.b.ins().load(types::I64, fl, at, column(i));
            let d = self.b.ins().bxor(want, have);
            diff = Some(match diff {
                None => d,
                Some(acc) => self.b.ins().bor(acc, d),
            });
        }
        let diff = diff.expect("at least one word");
        let found = self.b.create_block();
        self.b.ins().brif(diff, cont, &[], found, &[]);
        self.b.switch_to_block(found);
        let vd = self.b.ins().load(types::I64, fl, at, column(k));
        let value = self.b.ins().ireduce(types::I32, vd);
        let datum = self.b.ins().ushr_imm(vd, 32);
        let datum = self.b.ins().ireduce(types::I32, datum);
        let result = self.b.ins().load(types::I32, fl, at, column(k + 1));
        self.hit(group, value, datum, None, Some(result));
        self.b.ins().jump(cont, &[]);
        Ok(())
    }

    /// Conditions every item has, on fixed-offset fields inside the length
    /// already checked, that are an equality or "no bit of a mask set":
    /// those within one 2-, 4- or 8-byte window are tested together as one
    /// load, one `and` and one compare (atom coalescing with masks: the
    /// IPv4 fragment offset and the protocol byte are one 32-bit test),
    /// and removed from the items. When one fails, every item fails, so
    /// it goes to `fail`. `entry`: a byte `(offset, mask, value, to)` that
    /// must be tested first whatever else coalesces with it (the fast
    /// version's header length, [`Gen::emit_top`]); that compare goes to
    /// `to` when it fails.
    fn shared_masks(
        &mut self,
        items: &mut [Item],
        ctx: &Ctx,
        fail: Block,
        entry: Option<(u32, u32, u32, Block)>,
    ) {
        // (offset, size, mask, value) of each candidate, in field order;
        // the entry test has no condition of its own.
        let mut cands: Vec<(u32, u32, u32, u32, Option<Cond>)> = Vec::new();
        let Some(first) = items.first() else { return };
        for c in &first.conds {
            let R::Abs { off, size } = c.r else { continue };
            let size = size as u32;
            // Past the bytes known to be there no window can be used (and
            // offsets near 2^32 would overflow the window arithmetic).
            if !matches!(size, 1 | 2 | 4)
                || find(&ctx.raw, c.r).is_some()
                || off as u64 + size as u64 > ctx.known
            {
                continue;
            }
            let full = if size == 4 {
                u32::MAX
            } else {
                (1 << (8 * size)) - 1
            };
            let (mask, value) = match (&c.test, c.truth) {
                (Some(Test::Eq(k)), true) if *k <= full => (full, *k),
                (Some(Test::Set(m)), false) => (m & full, 0),
                _ => continue,
            };
            if items[1..].iter().all(|it| it.conds.contains(c)) {
                cands.push((off, size, mask, value, Some(c.clone())));
            }
        }
        if let Some((off, mask, value, _)) = entry {
            cands.push((off, 1, mask, value, None));
        }
        cands.sort_by_key(|c| (c.0, c.1));
        let entry_at = cands.iter().position(|c| c.4.is_none());
        // A window's compare from the candidates `group` (the first at `base`).
        let window = |base: u32, width: u32, group: &[usize]| {
            let mut t = MaskTest::new(base, width);
            for &g in group {
                let (off, size, m, v, _) = cands[g];
                let n = size as usize;
                t.put(off, &m.to_be_bytes()[4 - n..], &v.to_be_bytes()[4 - n..]);
            }
            let conds: Vec<Cond> = group.iter().filter_map(|&g| cands[g].4.clone()).collect();
            (t, group.iter().any(|&g| Some(g) == entry_at), conds)
        };
        // Windows of candidates that fit in 8 bytes from the first without
        // overlapping: (compare, has the entry, conditions).
        let mut windows = Vec::new();
        let mut i = 0;
        while i < cands.len() {
            let base = cands[i].0;
            let mut group = vec![i];
            let mut end = base + cands[i].1;
            let mut j = i + 1;
            while j < cands.len() && cands[j].0 + cands[j].1 <= base + 8 {
                if cands[j].0 >= end {
                    group.push(j);
                    end = cands[j].0 + cands[j].1;
                }
                j += 1;
            }
            let width = [2u32, 4, 8].into_iter().find(|w| base + w >= end);
            match width.filter(|w| (base + w) as u64 <= ctx.known) {
                Some(w) if group.len() > 1 => {
                    i = *group.last().unwrap_or(&i) + 1;
                    windows.push(window(base, w, &group));
                }
                // Alone, or no wider load fits: the condition stays for
                // the paths.
                _ => i += 1,
            }
        }
        // The entry is tested whatever happened to it above (alone, or
        // passed over by a window that overlaps it), and first.
        if let Some(e) = entry_at {
            if !windows.iter().any(|w| w.1) {
                windows.push(window(cands[e].0, 1, &[e]));
            }
        }
        windows.sort_by_key(|w| !w.1);
        let mut rest = &windows[..];
        if let (Some((first, true, _)), Some((.., to))) = (windows.first(), entry) {
            // The entry's window and the windows after it within 16 bytes
            // of its start are one vector compare; when that fails, the
            // entry's own compare tells which way to go.
            let base = first.base;
            let within = |w: &&(MaskTest, bool, Vec<Cond>)| {
                w.0.base >= base && w.0.base + w.0.width <= base + 16
            };
            let n = match base as u64 + 16 <= ctx.known {
                true => windows[1..].iter().take_while(within).count(),
                false => 0,
            };
            if n > 0 {
                let mut all = MaskTest::new(base, 16);
                for (t, ..) in &windows[..=n] {
                    let w = t.width as usize;
                    all.put(t.base, &t.mask[..w], &t.value[..w]);
                }
                let (next, recheck) = (self.b.create_block(), self.b.create_block());
                self.stats.loads += 1;
                self.mask_test(&all, next, recheck);
                self.b.switch_to_block(recheck);
                self.mask_test(first, fail, to);
                self.b.switch_to_block(next);
                rest = &windows[n + 1..];
            }
        }
        for (t, has_entry, _) in rest {
            let to = match entry {
                Some((.., to)) if *has_entry => to,
                _ => fail,
            };
            self.stats.loads += 1;
            let next = self.b.create_block();
            self.mask_test(t, next, to);
            self.b.switch_to_block(next);
        }
        for (_, _, conds) in &windows {
            self.stats.coalesced += conds.len().saturating_sub(1);
            for c in conds {
                for it in items.iter_mut() {
                    if let Some(at) = it.conds.iter().position(|x| x == c) {
                        it.conds.remove(at);
                    }
                }
            }
        }
    }

    /// Branch to `yes` when `t` holds, else to `no`. Sixteen bytes are one
    /// vector compare.
    fn mask_test(&mut self, t: &MaskTest, yes: Block, no: Block) {
        let a = self.b.ins().iadd_imm(self.pkt, t.base as i64);
        if t.width == 16 {
            let fl = MemFlags::new().with_notrap().with_readonly();
            let v = self.b.ins().load(types::I8X16, fl, a, 0);
            let mut vconst = |bytes: &[u8; 16]| {
                let c = self.b.func.dfg.constants.insert(bytes.to_vec().into());
                self.b.ins().vconst(types::I8X16, c)
            };
            let (m, k) = (vconst(&t.mask), vconst(&t.value));
            let v = self.b.ins().band(v, m);
            let eq = self.b.ins().icmp(IntCC::Equal, v, k);
            let bits = self.b.ins().vhigh_bits(types::I32, eq);
            let ok = self.b.ins().icmp_imm(IntCC::Equal, bits, 0xffff);
            self.b.ins().brif(ok, yes, &[], no, &[]);
            return;
        }
        let word = |b: &[u8; 16]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[..8]);
            ne_word(&w, t.width) as i64
        };
        let v = self.load_word(a, t.width, types::I32);
        let (m, k) = (word(&t.mask), word(&t.value));
        let full = match t.width {
            1 => 0xff,
            2 => 0xffff,
            4 => u32::MAX as i64,
            _ => -1,
        };
        let v = if m == full {
            v
        } else {
            self.b.ins().band_imm(v, m)
        };
        let ok = self.b.ins().icmp_imm(IntCC::Equal, v, k);
        self.b.ins().brif(ok, yes, &[], no, &[]);
    }

    /// One length check for the fixed-offset reads every item needs (and
    /// one per IPv4 header for the reads behind it), and for at least
    /// `at_least` bytes: when it fails, every item fails, so it goes to
    /// `fail`.
    fn aggregate(&mut self, items: &[Item], ctx: &mut Ctx, fail: Block, at_least: u64) {
        let mut common: Option<Vec<R>> = None;
        for it in items {
            let rs: Vec<R> = it.conds.iter().map(|c| c.r).collect();
            common = Some(match common {
                None => rs,
                Some(c) => c.into_iter().filter(|r| rs.contains(r)).collect(),
            });
        }
        let common = common.unwrap_or_default();
        let mut end = at_least;
        let mut covered = 0;
        let mut rel: Vec<(u32, u64)> = Vec::new();
        for r in &common {
            match *r {
                R::Abs { off, size } => {
                    end = end.max(off as u64 + size as u64);
                    covered += 1;
                }
                R::Rel { hdr, off, size } => {
                    end = end.max(hdr as u64 + 1);
                    let e = off as u64 + size as u64;
                    match rel.iter_mut().find(|(h, _)| *h == hdr) {
                        Some((_, x)) => *x = (*x).max(e),
                        None => rel.push((hdr, e)),
                    }
                }
                _ => {}
            }
        }
        if end > ctx.known && (covered > 1 || !rel.is_empty() || at_least > 0) {
            self.stats.bounds_checks += 1;
            let short = self
                .b
                .ins()
                .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
            self.branch_out(short, fail);
            ctx.known = end;
        }
        for (hdr, e) in rel {
            if find(&ctx.rel, hdr).unwrap_or(0) < e {
                let hl = self.hl(ctx, hdr, fail);
                self.rel_check(ctx, hl, hdr, e, fail);
            }
        }
    }

    /// The `width` (1, 2, 4 or 8) bytes at `a` as loaded, zero-extended to
    /// `ty` (`I32` for 1, 2 and 4 bytes, or `I64`; always `I64` for 8).
    fn load_word(&mut self, a: Value, width: u32, ty: cranelift_codegen::ir::Type) -> Value {
        match (width, ty) {
            (1, _) => self.b.ins().uload8(ty, flags(), a, 0),
            (2, _) => self.b.ins().uload16(ty, flags(), a, 0),
            (4, types::I64) => self.b.ins().uload32(flags(), a, 0),
            (4, _) => self.b.ins().load(types::I32, flags(), a, 0),
            _ => self.b.ins().load(types::I64, flags(), a, 0),
        }
    }

    /// Branch to `fail` when `cond`, else go on in a fresh block.
    fn branch_out(&mut self, cond: Value, fail: Block) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// Check `hl + end <= caplen`, else `fail`.
    fn rel_check(&mut self, ctx: &mut Ctx, hl: Value, hdr: u32, end: u64, fail: Block) {
        self.stats.bounds_checks += 1;
        let e = self.b.ins().iadd_imm(hl, end as i64);
        let over = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, e, self.caplen);
        self.branch_out(over, fail);
        match ctx.rel.iter_mut().find(|(h, _)| *h == hdr) {
            Some((_, x)) => *x = end,
            None => ctx.rel.push((hdr, end)),
        }
    }

    /// `4 * (pkt[hdr] & 0xf)`, 64 bits.
    fn hl(&mut self, ctx: &mut Ctx, hdr: u32, fail: Block) -> Value {
        if let Some(v) = find(&ctx.hl, hdr) {
            return v;
        }
        let byte = self.read_raw(ctx, R::Abs { off: hdr, size: 1 }, fail);
        // Widened before the shift, so that x86-64 folds the shift into
        // the scale of the addresses behind the header.
        let x = self.b.ins().band_imm(byte, 0xf);
        let x = self.b.ins().uextend(types::I64, x);
        let x = self.b.ins().ishl_imm(x, 2);
        ctx.hl.push((hdr, x));
        x
    }

    /// The address of `width` bytes at `r`'s place, bounds-checked (to
    /// `fail`) unless a dominating check covers them.
    fn addr(&mut self, ctx: &mut Ctx, r: R, width: u32, fail: Block) -> Value {
        match r {
            R::Abs { off, .. } => {
                let end = off as u64 + width as u64;
                if end > ctx.known {
                    self.stats.bounds_checks += 1;
                    let short =
                        self.b
                            .ins()
                            .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
                    self.branch_out(short, fail);
                    ctx.known = end;
                }
                self.b.ins().iadd_imm(self.pkt, off as i64)
            }
            R::Rel { hdr, off, .. } => {
                let hl = self.hl(ctx, hdr, fail);
                let end = off as u64 + width as u64;
                if find(&ctx.rel, hdr).unwrap_or(0) < end {
                    self.rel_check(ctx, hl, hdr, end, fail);
                }
                let a = self.b.ins().iadd(self.pkt, hl);
                self.b.ins().iadd_imm(a, off as i64)
            }
            R::Len | R::Const(_) => unreachable!("not a load"),
        }
    }

    /// A field's raw value (host order of its bytes), 32 bits (64 for an
    /// 8-byte load of a packed key).
    fn read_raw(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        if let Some(v) = find(&ctx.raw, r) {
            return v;
        }
        let v = match r {
            R::Len => self.wirelen,
            R::Const(k) => self.b.ins().iconst(types::I32, k as i64),
            R::Abs { size, .. } | R::Rel { size, .. } => {
                self.stats.loads += 1;
                let a = self.addr(ctx, r, size as u32, fail);
                self.load_word(a, size as u32, types::I32)
            }
        };
        ctx.raw.push((r, v));
        v
    }

    /// A field's raw value widened to 64 bits: a field read before is
    /// extended, one read first here is loaded straight into 64 bits.
    fn read_raw64(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        match r {
            R::Abs { size, .. } | R::Rel { size, .. } if find(&ctx.raw, r).is_none() => {
                self.stats.loads += 1;
                let a = self.addr(ctx, r, size as u32, fail);
                self.load_word(a, size as u32, types::I64)
            }
            _ => {
                let v = self.read_raw(ctx, r, fail);
                if self.b.func.dfg.value_type(v) == types::I64 {
                    v
                } else {
                    self.b.ins().uextend(types::I64, v)
                }
            }
        }
    }

    /// A field's value (network order, as the IR means it).
    fn read_be(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        if let Some(v) = find(&ctx.be, r) {
            return v;
        }
        let raw = self.read_raw(ctx, r, fail);
        let v = match r.size() {
            2 if cfg!(target_endian = "little") => {
                let s = self.b.ins().bswap(raw);
                self.b.ins().ushr_imm(s, 16)
            }
            4 if cfg!(target_endian = "little") => self.b.ins().bswap(raw),
            _ => raw,
        };
        ctx.be.push((r, v));
        v
    }

    /// Branch on a test of field `r`: to `t` when it gives `truth`, else `e`.
    fn test(&mut self, ctx: &mut Ctx, r: R, test: &Test, truth: bool, t: Block, e: Block) {
        let (yes, no) = if truth { (t, e) } else { (e, t) };
        match test {
            Test::Eq(k) => match r.raw(*k) {
                Some(rk) => {
                    let v = self.read_raw(ctx, r, e);
                    let c = self.b.ins().icmp_imm(IntCC::Equal, v, rk as i64);
                    self.b.ins().brif(c, yes, &[], no, &[]);
                }
                None => {
                    // The field cannot equal k (but must still be read).
                    self.read_raw(ctx, r, e);
                    self.b.ins().jump(no, &[]);
                }
            },
            Test::Set(m) => {
                let v = self.read_raw(ctx, r, e);
                let x = self.b.ins().band_imm(v, r.raw_mask(*m) as i64);
                self.b.ins().brif(x, yes, &[], no, &[]);
            }
            Test::Gt(k) | Test::Ge(k) => {
                let v = self.read_be(ctx, r, e);
                let cc = if matches!(test, Test::Gt(_)) {
                    IntCC::UnsignedGreaterThan
                } else {
                    IntCC::UnsignedGreaterThanOrEqual
                };
                let c = self.b.ins().icmp_imm(cc, v, *k as i64);
                self.b.ins().brif(c, yes, &[], no, &[]);
            }
            Test::In(keys) => {
                let v = self.read_raw(ctx, r, e);
                let mut raws: Vec<u32> = keys.sorted().iter().filter_map(|&k| r.raw(k)).collect();
                raws.sort_unstable();
                raws.dedup();
                let arms: Vec<(u32, Block)> = raws.into_iter().map(|k| (k, yes)).collect();
                self.dispatch(v, r, &arms, no);
            }
        }
    }

    /// In the current block: go to the arm whose raw constant equals `v`,
    /// else to `default` (a chain of compares for a few, a search tree on
    /// the raw values for more: any order works for equality).
    fn dispatch(&mut self, v: Value, r: R, arms: &[(u32, Block)], default: Block) {
        let _ = r;
        if arms.len() <= 4 {
            for (i, (k, blk)) in arms.iter().enumerate() {
                let c = self.b.ins().icmp_imm(IntCC::Equal, v, *k as i64);
                if i + 1 == arms.len() {
                    self.b.ins().brif(c, *blk, &[], default, &[]);
                } else {
                    self.branch_in(c, *blk);
                }
            }
            if arms.is_empty() {
                self.b.ins().jump(default, &[]);
            }
            return;
        }
        let mid = arms.len() / 2;
        let (hi, lo) = (self.b.create_block(), self.b.create_block());
        let c = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, v, arms[mid].0 as i64);
        self.b.ins().brif(c, hi, &[], lo, &[]);
        self.b.switch_to_block(hi);
        self.dispatch(v, r, &arms[mid..], default);
        self.b.switch_to_block(lo);
        self.dispatch(v, r, &arms[..mid], default);
    }

    /// Branch to `t` when `cond`, else go on in a fresh block.
    fn branch_in(&mut self, cond: Value, t: Block) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, t, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// One path alone: its equality tests on adjacent fields as wider
    /// compares, the rest one by one, then its action; continue at `cont`
    /// (also when a condition fails).
    fn leaf(&mut self, it: Item, mut ctx: Ctx, cont: Block) {
        let mut wide: Vec<(Option<u32>, u32, u32, u32)> = Vec::new(); // (hdr, off, size, k)
        let mut rest = Vec::new();
        for c in it.conds {
            let (hdr, off, size) = match c.r {
                R::Abs { off, size } => (None, off, size as u32),
                R::Rel { hdr, off, size } => (Some(hdr), off, size as u32),
                _ => {
                    rest.push(c);
                    continue;
                }
            };
            match c.test {
                Some(Test::Eq(k)) if c.truth && find(&ctx.raw, c.r).is_none() => {
                    if c.r.raw(k).is_none() {
                        // Never equal: the path cannot hold (a read that
                        // would abort makes it fail just the same).
                        self.b.ins().jump(cont, &[]);
                        return;
                    }
                    wide.push((hdr, off, size, k));
                }
                _ => rest.push(c),
            }
        }
        wide.sort_unstable();
        wide.dedup();
        // Known values first (no load), then the coalesced loads, then the rest.
        rest.sort_by_key(|c| find(&ctx.raw, c.r).is_none());
        let mut i = 0;
        while i < wide.len() {
            let (end, width) = adjacent_run(wide.len(), i, |k| (wide[k].0, wide[k].1, wide[k].2));
            if end - i == 1 {
                let (hdr, off, size, k) = wide[i];
                let r = R::at(hdr, off, size);
                let next = self.b.create_block();
                self.test(&mut ctx, r, &Test::Eq(k), true, next, cont);
                self.b.switch_to_block(next);
            } else {
                self.stats.coalesced += end - i - 1;
                self.stats.loads += 1;
                let (mut bytes, mut at) = ([0u8; 8], 0);
                for &(_, _, size, k) in &wide[i..end] {
                    let n = size as usize;
                    bytes[at..at + n].copy_from_slice(&k.to_be_bytes()[4 - n..]);
                    at += n;
                }
                let (hdr, off, _, _) = wide[i];
                let r = R::at(hdr, off, 1);
                let a = self.addr(&mut ctx, r, width, cont);
                let v = self.load_word(a, width, types::I32);
                let k = ne_word(&bytes, width) as i64;
                let c = self.b.ins().icmp_imm(IntCC::Equal, v, k);
                let next = self.b.create_block();
                self.b.ins().brif(c, next, &[], cont, &[]);
                self.b.switch_to_block(next);
            }
            i = end;
        }
        for c in rest {
            let next = self.b.create_block();
            match &c.test {
                Some(t) => self.test(&mut ctx, c.r, t, c.truth, next, cont),
                None => {
                    self.read_raw(&mut ctx, c.r, cont);
                    self.b.ins().jump(next, &[]);
                }
            }
            self.b.switch_to_block(next);
        }
        self.action(&it.action, &mut ctx);
        self.b.ins().jump(cont, &[]);
    }

    /// Record a match of `group` with slot words `value` and `datum`
    /// (`known`: the slot when it is a constant). The hit function writes
    /// `out[count] = (group, value, datum)` and counts it; the batch
    /// function turns the packet's result word from [`NO_MATCH`] into the
    /// slot's only filter, or into [`MANY`] for a second match or a slot
    /// with several filters (`result`: that word for this slot when the
    /// caller has it at hand).
    fn hit(
        &mut self,
        group: u32,
        value: Value,
        datum: Value,
        known: Option<Slot>,
        result: Option<Value>,
    ) {
        let fl = MemFlags::trusted();
        match self.out {
            Out::Prefetch => {}
            Out::Hits { out, count } => {
                let n = self.b.use_var(count);
                let off = self.b.ins().imul_imm(n, std::mem::size_of::<Hit>() as i64);
                let a = self.b.ins().iadd(out, off);
                let g = self.b.ins().iconst(types::I32, group as i64);
                self.b
                    .ins()
                    .store(fl, g, a, std::mem::offset_of!(Hit, group) as i32);
                self.b
                    .ins()
                    .store(fl, value, a, std::mem::offset_of!(Hit, value) as i32);
                self.b
                    .ins()
                    .store(fl, datum, a, std::mem::offset_of!(Hit, datum) as i32);
                let n1 = self.b.ins().iadd_imm(n, 1);
                self.b.def_var(count, n1);
            }
            Out::First { slot, done } => {
                let many = self.b.ins().iconst(types::I32, MANY as i64);
                let cand = match (known, result) {
                    (_, Some(r)) => r,
                    (Some(s), None) => {
                        let r = answer(s);
                        self.b.ins().iconst(types::I32, r as i64)
                    }
                    (None, None) => {
                        let one = self.b.ins().icmp_imm(
                            IntCC::UnsignedLessThan,
                            value,
                            Slot::LIST_BASE as i64,
                        );
                        let f = self.b.ins().iadd_imm(value, -1);
                        self.b.ins().select(one, f, many)
                    }
                };
                match done {
                    // The only group: its hit is the packet's answer.
                    Some(done) => {
                        self.b.ins().store(fl, cand, slot, 0);
                        self.b.ins().jump(done, &[]);
                        // What the caller emits after the hit is unreachable.
                        let dead = self.b.create_block();
                        self.b.switch_to_block(dead);
                    }
                    None => {
                        let old = self.b.ins().load(types::I32, fl, slot, 0);
                        let first = self.b.ins().icmp_imm(IntCC::Equal, old, NO_MATCH as i64);
                        let r = self.b.ins().select(first, cand, many);
                        self.b.ins().store(fl, r, slot, 0);
                    }
                }
            }
        }
    }

    /// Do an action in the current block (which may end up being another).
    fn action(&mut self, a: &Action, ctx: &mut Ctx) {
        match a {
            Action::Hit { group, slot } => {
                self.stats.keys_in_code += 1;
                let v = self.b.ins().iconst(types::I32, slot.value as i64);
                let d = self.b.ins().iconst(types::I32, slot.datum as i64);
                self.hit(*group, v, d, Some(*slot), None);
            }
            Action::Probe {
                group,
                raw: Some(layout),
                ..
            } => {
                self.stats.probes += 1;
                let after = self.b.create_block();
                // Every load was read by a condition of this path.
                let mut words: Vec<Option<Value>> = vec![None; layout.words];
                for l in &layout.loads {
                    let v = self.read_raw64(ctx, l.r, after);
                    let v = if l.at > 0 {
                        self.b.ins().ishl_imm(v, 8 * l.at as i64)
                    } else {
                        v
                    };
                    words[l.word] = Some(match words[l.word] {
                        None => v,
                        Some(w) => self.b.ins().bor(w, v),
                    });
                }
                let words: Vec<Value> = words.into_iter().map(|w| w.expect("a load")).collect();
                self.probe_raw(*group, &words, layout, after);
                self.b.switch_to_block(after);
            }
            Action::Probe { group, key, .. } => {
                self.stats.probes += 1;
                let after = self.b.create_block();
                // Every key field was read by a condition of this path.
                let vals: Vec<Value> = key.iter().map(|r| self.read_be(ctx, *r, after)).collect();
                self.probe(*group, &vals, after);
                self.b.switch_to_block(after);
            }
        }
    }

    /// Hash packed key `words` as [`raw_hash`] does and probe group
    /// `group`'s [`RawTable`] (slots as `layout` says); a hit is written;
    /// continue at `after`.
    fn probe_raw(&mut self, group: u32, words: &[Value], layout: &Layout, after: Block) {
        let mut h: Option<Value> = None;
        for (j, w) in words.iter().enumerate() {
            let x = self.b.ins().imul_imm(*w, RAW_MUL[j % RAW_MUL.len()] as i64);
            h = Some(match h {
                None => x,
                Some(h) => self.b.ins().iadd(h, x),
            });
        }
        let h = h.expect("a word");
        let hi = self.b.ins().ushr_imm(h, 32);
        let h = self.b.ins().bxor(h, hi);
        let h = self.b.ins().imul_imm(h, RAW_MIX as i64);
        let desc = self.b.ins().iadd_imm(
            self.tables,
            (group as usize * std::mem::size_of::<TableDesc>()) as i64,
        );
        let fl = MemFlags::trusted().with_readonly();
        let field = |g: &mut Self, at: usize| g.b.ins().load(types::I64, fl, desc, at as i32);
        let base = field(self, std::mem::offset_of!(TableDesc, words));
        let shift = field(self, std::mem::offset_of!(TableDesc, shift));
        let i0 = self.b.ins().ushr(h, shift);
        let stride = layout.slot_bytes() as i64;
        let answer_at = layout.answer_at as i32;
        let mask = field(self, std::mem::offset_of!(TableDesc, mask));
        let Some(walk) = self.probe_start(base, i0, mask, stride, after) else {
            return;
        };
        let slot = walk.slot;
        // The slot's answer: "no match" marks an empty slot.
        let a = self.b.ins().load(types::I32, fl, slot, answer_at);
        let differs = self.b.create_block();
        let last = words.len() - 1;
        for (j, w) in words.iter().enumerate() {
            // A word shared with the answer: its key is the low half.
            let s = if j == last && layout.answer_in_key() {
                self.b.ins().uload32(fl, slot, (8 * j) as i32)
            } else {
                self.b.ins().load(types::I64, fl, slot, (8 * j) as i32)
            };
            let ne = self.b.ins().icmp(IntCC::NotEqual, s, *w);
            self.branch_out(ne, differs);
        }
        // The key matches. A batch function with one group stores the
        // answer whatever it is (an empty slot's zeros can equal a
        // packet's key, and its answer is "no match"). Otherwise an empty
        // slot holds no key.
        if !matches!(self.out, Out::First { done: Some(_), .. }) {
            let empty = self.b.ins().icmp_imm(IntCC::Equal, a, NO_MATCH as i64);
            let found = self.b.create_block();
            self.b.ins().brif(empty, after, &[], found, &[]);
            self.b.switch_to_block(found);
        }
        match self.out {
            Out::First { .. } => self.hit(group, a, a, None, Some(a)),
            _ => {
                // The hit functions report the value and datum, from the
                // table's array of them.
                let values = field(self, std::mem::offset_of!(TableDesc, values));
                let off = self.b.ins().ishl_imm(walk.i, 3);
                let at = self.b.ins().iadd(values, off);
                let v = self.b.ins().load(types::I32, fl, at, 0);
                let datum = self.b.ins().load(types::I32, fl, at, 4);
                self.hit(group, v, datum, None, None);
            }
        }
        self.b.ins().jump(after, &[]);
        // Another key: go on unless the slot is empty.
        self.b.switch_to_block(differs);
        let empty = self.b.ins().icmp_imm(IntCC::Equal, a, NO_MATCH as i64);
        let step = self.b.create_block();
        self.b.ins().brif(empty, after, &[], step, &[]);
        self.b.switch_to_block(step);
        self.probe_step(&walk, after);
    }

    /// The start of a linear probe from slot `i0` of a table at `base`
    /// (`mask + 1` slots of `stride` bytes). In the prefetch pass: prefetch
    /// that slot, continue at `after` and return `None`. Otherwise: the
    /// loop over slots, its head switched to, with the slot's address.
    fn probe_start(
        &mut self,
        base: Value,
        i0: Value,
        mask: Value,
        stride: i64,
        after: Block,
    ) -> Option<ProbeWalk> {
        if matches!(self.out, Out::Prefetch) {
            let off = self.b.ins().imul_imm(i0, stride);
            let slot = self.b.ins().iadd(base, off);
            self.call_prefetch(slot);
            self.b.ins().jump(after, &[]);
            return None;
        }
        let budget = self.b.ins().iadd_imm(mask, 1);
        let head = self.b.create_block();
        let i = self.b.append_block_param(head, types::I64);
        let left = self.b.append_block_param(head, types::I64);
        self.b.ins().jump(head, &[i0, budget]);
        self.b.switch_to_block(head);
        let off = self.b.ins().imul_imm(i, stride);
        let slot = self.b.ins().iadd(base, off);
        Some(ProbeWalk {
            head,
            i,
            left,
            mask,
            slot,
        })
    }

    /// Go on to the next slot of a probe (wrapping), or to `after` once
    /// every slot was seen.
    fn probe_step(&mut self, w: &ProbeWalk, after: Block) {
        let i1 = self.b.ins().iadd_imm(w.i, 1);
        let i1 = self.b.ins().band(i1, w.mask);
        let l1 = self.b.ins().iadd_imm(w.left, -1);
        self.b.ins().brif(l1, w.head, &[i1, l1], after, &[]);
    }

    /// Call [`prefetch_helper`] on `addr`.
    fn call_prefetch(&mut self, addr: Value) {
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        sig.params.push(AbiParam::new(types::I64));
        let sigref = self.b.import_signature(sig);
        let helper = prefetch_helper as extern "C" fn(_);
        let callee = self.b.ins().iconst(types::I64, helper as usize as i64);
        self.b.ins().call_indirect(sigref, callee, &[addr]);
    }

    /// Hash `key` as [`sluice_classifier::table::hash`] does (with its
    /// constants) and probe group `group`'s table; a hit is written;
    /// continue at `after`.
    fn probe(&mut self, group: u32, key: &[Value], after: Block) {
        use sluice_classifier::table::{HASH_LEN, HASH_MIX, HASH_WORDS};
        let mut acc = self
            .b
            .ins()
            .iconst(types::I64, (key.len() as u64).wrapping_mul(HASH_LEN) as i64);
        let mut words: Vec<Value> = Vec::new();
        for (i, ch) in key.chunks(2).enumerate() {
            let lo = self.b.ins().uextend(types::I64, ch[0]);
            let w = if ch.len() == 2 {
                let hi = self.b.ins().uextend(types::I64, ch[1]);
                let hi = self.b.ins().ishl_imm(hi, 32);
                self.b.ins().bor(lo, hi)
            } else {
                lo
            };
            words.push(w);
            let x = self
                .b
                .ins()
                .imul_imm(w, HASH_WORDS[i % HASH_WORDS.len()] as i64);
            acc = self.b.ins().iadd(acc, x);
        }
        let s = self.b.ins().ushr_imm(acc, 32);
        let x = self.b.ins().bxor(acc, s);
        let x = self.b.ins().imul_imm(x, HASH_MIX as i64);
        let s = self.b.ins().ushr_imm(x, 29);
        let h = self.b.ins().bxor(x, s);
        let desc = self.b.ins().iadd_imm(
            self.tables,
            (group as usize * std::mem::size_of::<TableDesc>()) as i64,
        );
        let fl = MemFlags::trusted().with_readonly();
        let base = self.b.ins().load(
            types::I64,
            fl,
            desc,
            std::mem::offset_of!(TableDesc, words) as i32,
        );
        let mask = self.b.ins().load(
            types::I64,
            fl,
            desc,
            std::mem::offset_of!(TableDesc, mask) as i32,
        );
        let i0 = self.b.ins().band(h, mask);
        let stride = key_slot_bytes(key.len());
        let Some(walk) = self.probe_start(base, i0, mask, stride as i64, after) else {
            return;
        };
        let slot = walk.slot;
        let v = self.b.ins().load(types::I32, fl, slot, 0);
        let next = self.b.create_block();
        let live = self.b.create_block();
        self.b.ins().brif(v, live, &[], after, &[]);
        self.b.switch_to_block(live);
        let gone = self.b.ins().icmp_imm(IntCC::Equal, v, u32::MAX as i64);
        self.branch_out(gone, next);
        for (j, w) in words.iter().enumerate() {
            let at = (8 + 8 * j) as i32;
            let two = key.len() > 2 * j + 1;
            let s = if two {
                self.b.ins().load(types::I64, fl, slot, at)
            } else {
                let s = self.b.ins().load(types::I32, fl, slot, at);
                self.b.ins().uextend(types::I64, s)
            };
            let ne = self.b.ins().icmp(IntCC::NotEqual, s, *w);
            self.branch_out(ne, next);
        }
        let datum = self.b.ins().load(types::I32, fl, slot, 4);
        self.hit(group, v, datum, None, None);
        self.b.ins().jump(after, &[]);
        self.b.switch_to_block(next);
        self.probe_step(&walk, after);
    }
}

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

/// Key sets of at least this many keys are dispatched by a perfect hash
/// (DPF switches from compares to hashing above three).
const HASH_MIN_KEYS: usize = 4;

/// Multipliers of the second and later fields when a key's fields are
/// combined into one word ([`combine`]): odd 32-bit numbers sign-extended
/// to 64 bits, so that x86-64 multiplies by a 32-bit immediate into a
/// fresh register (the multiplier search mixes the sum further).
const COMBINE: [u64; 7] = [
    0x9e37_79b1_u32 as i32 as i64 as u64,
    0x85eb_ca77_u32 as i32 as i64 as u64,
    0xc2b2_ae3d_u32 as i32 as i64 as u64,
    0xa7d4_eb2f_u32 as i32 as i64 as u64,
    0x9e37_79f9_u32 as i32 as i64 as u64,
    0xed55_8ccd_u32 as i32 as i64 as u64,
    0x1a85_ec53_u32 as i32 as i64 as u64,
];

/// A key's raw word values as one word: the first plus each later one
/// times its [`COMBINE`] constant (what the generated code computes).
fn combine(key: &[u64]) -> u64 {
    key.iter().enumerate().fold(0u64, |x, (i, &v)| {
        let m = if i == 0 { 1 } else { COMBINE[i - 1] };
        x.wrapping_add(v.wrapping_mul(m))
    })
}

/// One word of a hashed key: `fields` adjacent fields read as one load of
/// `width` bytes at `r`'s place (or the one field `r` itself).
#[derive(Clone, Copy, Debug)]
struct HashWord {
    r: R,
    width: u32,
    fields: usize,
}

/// A set of keys a perfect hash can dispatch ([`hash_shape`]).
struct HashShape {
    group: u32,
    /// Fields with the same value in every key, and that value.
    fixed: Vec<(R, u32)>,
    /// The other fields, as words.
    words: Vec<HashWord>,
    /// Each key's raw word values (zero-extended) and its slot.
    keys: Vec<(Vec<u64>, Slot)>,
}

/// The form a perfect hash needs: every item a key of the same small
/// group, testing the same fixed-width fields for equality and nothing
/// else, at least [`HASH_MIN_KEYS`] distinct keys (keys whose value cannot
/// fit a field never match and are left out).
fn hash_shape(items: &[Item]) -> Option<HashShape> {
    if items.len() < HASH_MIN_KEYS {
        return None;
    }
    let Action::Hit { group, .. } = items[0].action else {
        return None;
    };
    let mut fields: Vec<R> = items[0].conds.iter().map(|c| c.r).collect();
    fields.sort_unstable();
    if fields.is_empty()
        || fields.windows(2).any(|w| w[0] == w[1])
        || !fields
            .iter()
            .all(|r| matches!(r, R::Abs { .. } | R::Rel { .. }) && matches!(r.size(), 1 | 2 | 4))
    {
        return None;
    }
    // Each key's values (as the IR means them) per field.
    let mut keys: Vec<(Vec<u32>, Slot)> = Vec::with_capacity(items.len());
    for it in items {
        let Action::Hit { group: g, slot } = it.action else {
            return None;
        };
        if g != group || it.conds.len() != fields.len() {
            return None;
        }
        let mut key = vec![0u32; fields.len()];
        let mut possible = true;
        for c in &it.conds {
            let (Some(Test::Eq(k)), true) = (&c.test, c.truth) else {
                return None;
            };
            let i = fields.binary_search(&c.r).ok()?;
            key[i] = *k;
            possible &= c.r.raw(*k).is_some();
        }
        if possible {
            keys.push((key, slot));
        }
    }
    if keys.len() < HASH_MIN_KEYS {
        return None;
    }
    let same: Vec<bool> = (0..fields.len())
        .map(|i| keys.iter().all(|(k, _)| k[i] == keys[0].0[i]))
        .collect();
    // The fields in (header, offset) order, adjacent ones as one word when
    // together they are 2, 4 or 8 bytes. A word whose fields are equal in
    // every key is tested field by field instead of hashed; a field equal
    // in every key that shares a word with others is hashed with them (it
    // costs nothing more there).
    let place = |r: R| match r {
        R::Abs { off, size } => (None, off, size as u32),
        R::Rel { hdr, off, size } => (Some(hdr), off, size as u32),
        R::Len | R::Const(_) => unreachable!("checked above"),
    };
    let mut order: Vec<usize> = (0..fields.len()).collect();
    order.sort_by_key(|&i| place(fields[i]));
    let mut fixed: Vec<(R, u32)> = Vec::new();
    let mut words: Vec<(HashWord, Vec<usize>)> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let (hdr, off, _) = place(fields[order[i]]);
        let (end, width) = adjacent_run(order.len(), i, |k| place(fields[order[k]]));
        let fields_in = order[i..end].to_vec();
        i = end;
        if fields_in.iter().all(|&f| same[f]) {
            fixed.extend(fields_in.iter().map(|&f| (fields[f], keys[0].0[f])));
            continue;
        }
        let r = if fields_in.len() == 1 {
            fields[fields_in[0]]
        } else {
            R::at(hdr, off, 1)
        };
        words.push((
            HashWord {
                r,
                width,
                fields: fields_in.len(),
            },
            fields_in,
        ));
    }
    if words.is_empty() || words.len() > COMBINE.len() + 1 {
        return None;
    }
    // Each key's raw word values, as the loads give them.
    let mut raw_keys: Vec<(Vec<u64>, Slot)> = keys
        .iter()
        .map(|(key, slot)| {
            let vals = words
                .iter()
                .map(|(w, fs)| {
                    if w.fields == 1 {
                        return fields[fs[0]].raw(key[fs[0]]).unwrap_or(0) as u64;
                    }
                    let mut bytes = [0u8; 8];
                    let mut at = 0;
                    for &f in fs {
                        let n = fields[f].size() as usize;
                        bytes[at..at + n].copy_from_slice(&key[f].to_be_bytes()[4 - n..]);
                        at += n;
                    }
                    ne_word(&bytes, w.width)
                })
                .collect();
            (vals, *slot)
        })
        .collect();
    raw_keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if raw_keys.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(HashShape {
        group,
        fixed,
        words: words.into_iter().map(|(w, _)| w).collect(),
        keys: raw_keys,
    })
}

/// A multiplier under which the keys' combined words ([`combine`]) land in
/// distinct slots of a table of `2^bits` slots (from the first power of
/// two at least twice the keys' count to four times that), tried from a fixed sequence so that the
/// same keys always give the same code.
fn find_multiplier(keys: &[(Vec<u64>, Slot)]) -> Option<(u64, u32)> {
    let words: Vec<u64> = keys.iter().map(|(k, _)| combine(k)).collect();
    let min_bits = usize::BITS - (keys.len() - 1).leading_zeros() + 1;
    let mut seen = Vec::new();
    for bits in min_bits..min_bits + 3 {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..256 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = x | 1;
            seen.clear();
            seen.resize(1 << bits, false);
            let injective = words.iter().all(|w| {
                let h = (w.wrapping_mul(m) >> (64 - bits)) as usize;
                !std::mem::replace(&mut seen[h], true)
            });
            if injective {
                return Some((m, bits));
            }
        }
    }
    None
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
    /// at least this many bytes ([`prefetch_slots`]).
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
    /// m.remove(3);
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
    /// m.update();
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
