//! The machine functions of the clusters, and the cache that keeps them.
//!
//! A cluster gets a hit function (one packet, every hit written out), a
//! batch function (many packets, one result word each) and, when a path
//! probes a table, the batch function pipelined for tables larger than
//! the caches. [`Hit`], [`TableDesc`], [`UnitFn`], [`BatchUnitFn`],
//! [`NO_MATCH`] and [`MANY`] are the interface between that code and Rust.
//! The [`Compiler`] keeps each cluster's functions with the signatures of
//! the groups they were built from, and compiles again only the clusters
//! whose signatures changed.
//!
//! The rule: a cluster's functions are all built from the same paths, so
//! whichever a call takes, the answer is the same.

use super::emit::Gen;
use super::plan::{plan_group, Action, ClusterKey, GroupSig, Item, Plan};
use super::probe::Out;
use super::raw::RawTable;
use crate::batch::DescLayout;
use crate::probe::key_slot_bytes;
use crate::{CodePages, NativeError};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, InstBuilder, MemFlags, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_module::Module;
use sluice_classifier::merged::{Merged, Slot};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most paths (one per key of a small group, one per large group) in
/// one machine function; a larger cluster is split.
const MAX_UNIT_ITEMS: usize = 512;

/// The most groups in one machine function (each reports at most one hit
/// per packet, into a buffer of this many on the caller's stack).
pub(super) const MAX_UNIT_GROUPS: usize = 64;

/// Packets per chunk of a batch function's software pipeline over a large
/// table: the slots of one chunk are prefetched while the chunk before is
/// probed.
pub(crate) const PIPE: usize = 16;

/// One match found by generated code: a group and the slot of its key.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Hit {
    pub(super) group: u32,
    pub(super) value: u32,
    pub(super) datum: u32,
}

/// Where a group's table is, as generated code reads it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct TableDesc {
    pub(super) words: *const u32,
    pub(super) mask: u64,
    /// For a [`RawTable`]: the home slot is `raw_hash(key) >> shift`.
    pub(super) shift: u64,
    /// For a [`RawTable`]: the value-and-datum word of each slot.
    pub(super) values: *const u64,
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
pub(super) type BatchUnitFn =
    unsafe extern "C" fn(descs: *const u8, n: u64, tables: *const TableDesc, out: *mut u32);

/// A batch result: no group of the function matched.
pub(super) const NO_MATCH: u32 = u32::MAX;

/// A batch result: more than one group matched, or the key matched has
/// several filters; the caller asks the hit function instead. (Filter ids
/// of single-filter slots are below `Slot::LIST_BASE - 1`, so neither
/// value is a filter.)
pub(super) const MANY: u32 = u32::MAX - 1;

/// A slot's value and datum as the tables generated code reads hold them:
/// one word, the value in its low half.
pub(super) fn slot_word(s: Slot) -> u64 {
    s.value as u64 | (s.datum as u64) << 32
}

/// A slot's batch result word: its only filter, or [`MANY`].
pub(super) fn answer(s: Slot) -> u32 {
    s.single_filter().unwrap_or(MANY)
}

/// What the code generator emitted for one function.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct UnitStats {
    pub(super) keys_in_code: usize,
    /// Sets of keys dispatched by a perfect hash.
    pub(super) hashed_sets: usize,
    pub(super) probes: usize,
    pub(super) loads: usize,
    pub(super) bounds_checks: usize,
    pub(super) coalesced: usize,
    /// Functions with a version for IPv4 headers of 5 words.
    pub(super) ipv4_fast: usize,
    code_bytes: usize,
}

/// One cluster's machine functions: the hit function (one packet, every
/// hit written out), the batch function (many packets, one result word
/// each) and, when a path probes a table, the batch function pipelined for
/// large tables, built from the same paths.
pub(super) struct Unit {
    func: UnitFn,
    pub(super) batch: BatchUnitFn,
    pub(super) pipelined: Option<Pipelined>,
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
/// and shared by both copies of a [`NativeClassifier`](super::NativeClassifier)
/// (its [`Engine::Derived`](sluice_classifier::Engine::Derived) state).
/// Opaque.
///
/// ```
/// use sluice_classifier::{merged::Compiled, Engine};
/// use sluice_native::merged::NativeMerged;
/// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// let (mut first, mut second) = (NativeMerged::new(), NativeMerged::new());
/// first.insert(0, &f, 0);
/// second.insert(0, &f, 0);
/// let mut code: Option<<NativeMerged as Engine>::Derived> = None;
/// first.refresh(&mut code); // builds the code ...
/// assert!(code.is_some());
/// second.refresh(&mut code); // ... which the second copy adopts
/// assert_eq!(second.native_stats().compilations, 0);
/// assert_eq!(second.classify_first(&[], 0, &mut Default::default()), Some(0));
/// ```
pub struct Code {
    pub(super) units: Vec<Arc<Unit>>,
    /// The units' entries, in the same order (the per-packet loop).
    pub(super) fns: Box<[UnitFn]>,
    /// The units' batch entries, in the same order.
    pub(super) batch_fns: Box<[BatchUnitFn]>,
    /// Groups run by the Rust path.
    pub(super) fallback: Vec<u32>,
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
    /// Time the last [`NativeMerged::update`](super::NativeMerged::update)
    /// took (planning and compiling).
    pub last_update: Duration,
    /// Time spent compiling in the last update (zero when nothing changed).
    pub last_compile: Duration,
}

/// The code cache: per cluster (and chunk), the signatures its function
/// was built from.
#[derive(Default)]
pub(super) struct Compiler {
    pub(super) cache: HashMap<(ClusterKey, usize), (Vec<GroupSig>, Arc<Unit>)>,
    pub(super) stats: NativeStats,
    pub(super) small: usize,
}

impl Compiler {
    /// The code for `m`: cached functions where their groups are unchanged.
    pub(super) fn build(&mut self, m: &Merged, packed: &[Option<RawTable>]) -> Arc<Code> {
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
pub(super) struct Pipelined {
    pub(super) func: BatchUnitFn,
    /// The groups its paths probe, with their slots' size in bytes.
    probed: Box<[(u32, usize)]>,
}

impl Pipelined {
    /// True when one of its tables has at least `bytes` of slots, so that
    /// its probes mostly miss the caches ([`prefetch_slots`]).
    pub(super) fn big(&self, descs: &[TableDesc], bytes: usize) -> bool {
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

/// Tables of at least this many slots of `slot_bytes` are prefetched a
/// chunk ahead by the batch functions ([`PIPE`]): those of `bytes` and
/// more (by default half the last-level cache), whose slots mostly come
/// from memory. A smaller table is mostly in the caches, and the prefetch
/// pass (parsing and hashing every packet twice) costs more than it saves
/// (measured with the earlier whole-batch pass): on this project's 2-core EPYC
/// (32 MiB L3), with 1M packets of random sessions, an 8 MiB table probed
/// in 13.4 ns a packet without the pass and 16.5 ns with it, a 16 MiB one
/// in 24.4-32.5 ns without and 20.9-22.6 ns with.
pub(super) fn prefetch_slots(bytes: usize, slot_bytes: usize) -> u64 {
    (bytes / slot_bytes.max(1)).next_power_of_two() as u64
}

/// The size of the largest CPU cache, from Linux's sysfs (16 MiB where it
/// cannot be read), read once.
pub(super) fn last_level_cache() -> usize {
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
pub(super) fn cache_size(s: &str) -> Option<usize> {
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
