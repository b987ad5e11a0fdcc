//! A flow cache in front of the decision tree, as Open vSwitch's
//! megaflow cache: each entry is keyed by exactly the fields the tree's
//! walk read for a packet, with their values (or that the read aborted),
//! and holds the filters that walk found.
//!
//! The walk's answer depends on nothing but the values of the fields it
//! reads (each node reads its field, follows the table keys and conditions
//! the value meets, then its skip edge), so every packet that agrees with
//! an entry on those fields gets the entry's answer: a *megaflow*. Entries
//! made by walks are disjoint (a packet of an entry's flow would have made
//! the same walk and read the same fields), so the first entry found is
//! the answer. Entries are grouped by the set of fields they read (a
//! *subtable*, one hash table each), and a lookup probes the subtables,
//! the most hit first, until one has the packet's key.
//!
//! **Invalidation is precise.** The tree keeps a short log of its changes
//! ([`ChangeLog`]), each with a stamp that sums up the history so far. A
//! cache made for an earlier stamp replays the log entries after it: an
//! inserted filter drops only the entries whose flows it may match (none
//! of its paths contradicts the entry's known values: a test on a field the
//! entry did not read counts as maybe), a removed one only the entries that
//! report it. A cache too far behind the log, or made for another tree, is
//! emptied.
//!
//! **Bounded, per reader, and only where it pays.** A cache belongs to one
//! reader's scratch memory (no sharing, no locks); it holds at most
//! [`MAX_ENTRIES`] flows in at most [`MAX_SUBTABLES`] subtables and is
//! emptied when full. A miss costs the lookup and a walk that records the
//! fields it reads (the tree's walk in Rust), so over each window of
//! [`WINDOW`] lookups the cache checks its hit rate, and below
//! [`MIN_HIT_RATE`] (or when packets cost more with it than without it,
//! sampled one in [`SAMPLE`]) it steps aside (every packet goes straight
//! to the engine) for a period that grows fourfold each time a later trial
//! fails again. A trial ends as soon as it has missed too often to reach
//! the rate (a quarter of a window), so on traffic where no flow repeats
//! it costs about 1,000 traced walks now and then: at 100,000 filters
//! (a walk of about 7 µs) a few percent over the first million packets,
//! less after.
//!
//! ```
//! use sluice_classifier::tree::{flow::{FlowCache, Lookup}, DecisionTree, Scratch};
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! let mut t = DecisionTree::default();
//! t.insert(7, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
//! let (mut cache, mut s) = (FlowCache::default(), Scratch::default());
//! let pkt = [1u8, 2, 3];
//! assert_eq!(cache.lookup(&t, &pkt, 3, &mut s), Lookup::Miss);
//! let slots = cache.learn(&t, &pkt, 3, &mut s).to_vec();
//! assert_eq!(t.id_of(slots[0]), Some(7));
//! // Another packet of the same flow: byte 0 is all the walk read.
//! assert_eq!(cache.lookup(&t, &[1, 9, 9], 3, &mut s), Lookup::Hit);
//! assert_eq!(cache.slots(), &slots[..]);
//! ```

mod changes;
mod key;
#[cfg(test)]
mod tests;

pub use changes::ChangeLog;
pub(crate) use changes::Logged;

use super::field::FieldId;
use super::{run, DecisionTree, Scratch};
use changes::{path_may_match, KeyBlock};
use key::{signature, Op, Wide, ABORT};
use rustc_hash::FxHashMap;

/// Flows one cache holds at most (it is emptied when full).
pub const MAX_ENTRIES: usize = 1 << 15;

/// Distinct sets of fields (subtables) one cache holds at most (it is
/// emptied when full).
pub const MAX_SUBTABLES: usize = 4096;

/// Subtables a lookup probes, the most hit first, after the one the
/// packet's signature points to.
pub const PROBES: usize = 4;

/// Entries of the signature table (a power of two), in buckets of
/// [`WAYS`].
const SIGNATURES: usize = 1 << 14;

/// Signatures per bucket of the signature table (one cache line): a
/// flow keeps its place when another flow's signature falls in the same
/// bucket, and a signature may point at several entries (packets of one
/// flow that differ in a field the signature leaves out).
const WAYS: usize = 4;

/// Lookups per window over which the hit rate is judged.
pub const WINDOW: u32 = 4096;

/// Below this share of hits in a window the cache steps aside.
pub const MIN_HIT_RATE: f64 = 0.75;

/// Misses that end a window early: more and its hit rate is under
/// [`MIN_HIT_RATE`] whatever the rest of it does.
const MAX_MISSES: u32 = ((1.0 - MIN_HIT_RATE) * WINDOW as f64) as u32;

/// More misses than this in a window: the cache is still learning the
/// traffic's flows (see [`LEARNING`]).
const LEARNING_MISSES: u32 = WINDOW / 64;

/// Windows in a row that may still be learning before their cost counts.
const LEARNING: u32 = 4;

/// Changes the tree remembers for caches to replay; a cache further
/// behind is emptied.
pub const LOG_LEN: usize = 256;

/// One packet in this many has its cost sampled (see
/// [`FlowCache::tick`]).
pub const SAMPLE: u32 = 64;

/// Windows between samples of the cost without the cache, at first and
/// after a sample the cache did not clearly win.
const RESAMPLE: u32 = 16;

/// The most windows between such samples (a window in 257 then costs
/// what a packet costs without the cache).
const MAX_RESAMPLE: u32 = 256;

/// The longest the cache steps aside for, in packets.
const MAX_BYPASS: u32 = 1 << 22;

/// Sampled costs of packets: their sum and count, and the two largest,
/// which the mean leaves out: a timer interrupt or a page fault in one of
/// a window's 64 samples (tens of microseconds on this kind of machine)
/// would otherwise decide the window alone.
#[derive(Clone, Copy, Debug, Default)]
struct Cost {
    total: u64,
    n: u32,
    top: [u64; 2],
}

impl Cost {
    fn add(&mut self, ns: u64) {
        self.total += ns;
        self.n += 1;
        if ns > self.top[1] {
            self.top[1] = ns;
            if ns > self.top[0] {
                self.top.swap(0, 1);
            }
        }
    }

    /// The mean without the two largest samples (all of them when there
    /// are two or fewer).
    fn mean(&self) -> Option<f64> {
        match self.n {
            0 => None,
            1 | 2 => Some(self.total as f64 / f64::from(self.n)),
            n => Some((self.total - self.top[0] - self.top[1]) as f64 / f64::from(n - 2)),
        }
    }
}

/// What the cache said of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The packet's flow is cached: [`FlowCache::slots`] has the tree
    /// slots of its filters, each once.
    Hit,
    /// Not cached: classify with [`FlowCache::learn`] to add it.
    Miss,
    /// The cache is stepping aside (it does not pay on this traffic):
    /// classify without it.
    Bypass,
}

/// The cached flows that read one set of fields.
#[derive(Debug)]
struct Subtable {
    fields: Box<[FieldId]>,
    ops: Box<[Op]>,
    /// Key → index of the entry in [`FlowCache::entries`].
    flows: FxHashMap<Box<[u64]>, u32>,
    hits: u64,
}

/// One cached flow.
#[derive(Debug)]
struct Entry {
    /// Its subtable, or [`FREE`].
    sub: u32,
    /// Its fields' values, in the subtable's order.
    key: Box<[u64]>,
    /// The tree slots of its filters, each once.
    slots: Box<[u32]>,
    /// The key as masked words of the packet's first bytes, where it can
    /// be.
    wide: Wide,
}

impl Default for Entry {
    fn default() -> Entry {
        Entry {
            sub: FREE,
            key: Box::default(),
            slots: Box::default(),
            wide: Wide::NONE,
        }
    }
}

/// [`Entry::sub`] of an entry that holds no flow.
const FREE: u32 = u32::MAX;

/// The flow cache (see the module doc). One per reader.
#[derive(Debug)]
pub struct FlowCache {
    /// The tree stamp the entries are valid for.
    stamp: Option<u64>,
    subtables: Vec<Subtable>,
    /// Subtable by its fields.
    by_fields: FxHashMap<Box<[FieldId]>, u32>,
    /// Subtables, the most hit first (sorted now and then).
    order: Vec<u32>,
    /// The flows, each at a fixed index while it is cached.
    flows: Vec<Entry>,
    /// Indices of free entries in `flows`.
    free: Vec<u32>,
    /// Signature → entry + 1 of the last packets with it, the latest
    /// first in its bucket: the exact first level (a hint: the entry's
    /// key, read from the packet, decides).
    signatures: Box<[(u64, u32)]>,
    /// The last lookup's signature (also kept with the wire length, for
    /// the flows whose keys hold the length: a flow has an entry per
    /// length, more than a bucket of the first holds).
    signature: u64,
    /// The entry of the last hit or flow learnt, or [`FREE`].
    last: u32,
    entries: usize,
    key: Vec<u64>,
    trace: Vec<FieldId>,
    slots: Vec<u32>,
    lookups: u64,
    window_lookups: u32,
    window_hits: u32,
    /// Packets left to let pass without looking (stepping aside).
    bypass: u32,
    /// How long the next step aside lasts.
    backoff: u32,
    /// Packets seen, for sampling their cost.
    ticks: u32,
    /// Sampled cost of packets with the cache (this window) and without
    /// it (the last step aside).
    with: Cost,
    without: Cost,
    /// Windows since the cost without the cache was last sampled.
    windows: u32,
    /// Windows between samples of the cost without the cache: from
    /// [`RESAMPLE`], doubled each time the cache wins clearly, up to
    /// [`MAX_RESAMPLE`].
    resample: u32,
    /// Windows in a row not judged by their cost (still learning).
    learning: u32,
    /// Never step aside (tests, benchmarks).
    always: bool,
    /// Flows held at most ([`MAX_ENTRIES`] unless set).
    capacity: usize,
    /// Counters for tests and benchmarks.
    stats: FlowStats,
}

/// What a cache did.
///
/// ```
/// let s = sluice_classifier::tree::flow::FlowCache::default().stats();
/// assert_eq!(s.hits + s.misses, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets answered from the cache.
    pub hits: u64,
    /// Packets looked up and not found.
    pub misses: u64,
    /// Packets let pass while the cache stepped aside.
    pub bypassed: u64,
    /// Entries dropped by replayed changes.
    pub invalidated: u64,
    /// Times the cache was emptied (full, or too far behind the tree).
    pub flushes: u64,
    /// Flows held now.
    pub entries: usize,
    /// Of those, the flows the first level compares as masked words of
    /// the packet's first bytes (the others field by field).
    pub wide: usize,
    /// Subtables held now.
    pub subtables: usize,
    /// Bytes the cache holds now, about: its tables, keys and slots.
    pub bytes: usize,
}

impl Default for FlowCache {
    fn default() -> FlowCache {
        FlowCache {
            stamp: None,
            subtables: Vec::new(),
            by_fields: FxHashMap::default(),
            order: Vec::new(),
            flows: Vec::new(),
            free: Vec::new(),
            signatures: vec![(0, 0); SIGNATURES].into(),
            signature: 0,
            last: FREE,
            entries: 0,
            key: Vec::new(),
            trace: Vec::new(),
            slots: Vec::new(),
            lookups: 0,
            window_lookups: 0,
            window_hits: 0,
            bypass: 0,
            backoff: WINDOW * 4,
            ticks: 0,
            with: Cost::default(),
            without: Cost::default(),
            windows: 0,
            resample: RESAMPLE,
            learning: 0,
            always: false,
            capacity: MAX_ENTRIES,
            stats: FlowStats::default(),
        }
    }
}

/// The first way of a signature's bucket in the signature table.
#[inline]
fn bucket(sig: u64) -> usize {
    sig as usize & (SIGNATURES - WAYS)
}

/// A signature with the wire length.
#[inline]
fn with_len(sig: u64, wirelen: u32) -> u64 {
    let x = (sig ^ u64::from(wirelen)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 29)
}

impl FlowCache {
    /// What the cache did so far.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::flow::FlowCache::default().stats().entries, 0);
    /// ```
    pub fn stats(&self) -> FlowStats {
        use std::mem::size_of;
        // A hash table entry: the key's pointer and length, the entry's
        // index, and a control byte.
        let entry = size_of::<Box<[u64]>>() + size_of::<u32>() + 1;
        let tables: usize = self
            .subtables
            .iter()
            .map(|st| {
                st.flows.capacity() * entry
                    + st.fields.len() * (size_of::<FieldId>() * 2 + size_of::<Op>())
            })
            .sum();
        let flows: usize = self
            .flows
            .iter()
            .map(|e| size_of::<Entry>() + e.key.len() * 8 + e.slots.len() * 4)
            .sum();
        FlowStats {
            entries: self.entries,
            wide: self
                .flows
                .iter()
                .filter(|e| e.sub != FREE && e.wide.exists())
                .count(),
            subtables: self.subtables.len(),
            bytes: tables
                + flows
                + self.free.capacity() * 4
                + self.signatures.len() * size_of::<(u64, u32)>()
                + self.subtables.capacity() * size_of::<Subtable>(),
            ..self.stats
        }
    }

    /// Forget every flow.
    ///
    /// ```
    /// sluice_classifier::tree::flow::FlowCache::default().clear();
    /// ```
    pub fn clear(&mut self) {
        self.subtables.clear();
        self.by_fields.clear();
        self.order.clear();
        self.flows.clear();
        self.free.clear();
        self.signatures.fill((0, 0));
        self.last = FREE;
        self.entries = 0;
        self.stats.flushes += 1;
    }

    /// Bring the entries up to date with the tree's changes.
    fn sync(&mut self, t: &DecisionTree) {
        let now = t.log.stamp();
        let Some(was) = self.stamp else {
            self.stamp = Some(now);
            return;
        };
        if was == now {
            return;
        }
        self.stamp = Some(now);
        if self.entries == 0 {
            return;
        }
        let Some(changes) = t.log.since(was) else {
            self.clear();
            return;
        };
        let changes: Vec<Logged> = changes.cloned().collect();
        for c in &changes {
            self.replay(c);
        }
    }

    /// Drop the entries a change may alter.
    fn replay(&mut self, c: &Logged) {
        let mut dropped = 0;
        let block = match c {
            Logged::Keys(t, keys) => KeyBlock::new(t, keys),
            _ => None,
        };
        let mut word = Vec::new();
        for (i, e) in self.flows.iter_mut().enumerate() {
            if e.sub == FREE {
                continue;
            }
            let st = &mut self.subtables[e.sub as usize];
            let (fields, key) = (&st.fields[..], &e.key[..]);
            let stale = match c {
                Logged::Removed(slot) => e.slots.contains(slot),
                Logged::Whole => false,
                Logged::Paths(paths) => paths.iter().any(|p| path_may_match(fields, key, p)),
                Logged::Keys(..) => match &block {
                    Some(b) => b.may_match(fields, key, &mut word),
                    None => true,
                },
            };
            if stale {
                st.flows.remove(key);
                *e = Entry::default();
                self.free.push(i as u32);
                if self.last == i as u32 {
                    self.last = FREE;
                }
                dropped += 1;
            }
        }
        self.entries -= dropped;
        self.stats.invalidated += dropped as u64;
    }

    /// Look the packet's flow up. `s`'s memo must be fresh for this packet
    /// (the lookup starts it).
    pub fn lookup(
        &mut self,
        t: &DecisionTree,
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
    ) -> Lookup {
        if self.bypass > 0 {
            self.bypass -= 1;
            self.stats.bypassed += 1;
            return Lookup::Bypass;
        }
        self.sync(t);
        self.lookups += 1;
        // A window ends after WINDOW lookups, or early once it has missed
        // too often to reach MIN_HIT_RATE: a trial on traffic whose flows
        // do not repeat costs at most that many misses (each a traced
        // walk in Rust). This lookup is the first of the next window.
        let missed = self.window_lookups - self.window_hits;
        if self.window_lookups >= WINDOW || missed > MAX_MISSES {
            if self.always {
                self.window_lookups = 0;
                self.window_hits = 0;
            } else {
                self.judge();
            }
        }
        self.window_lookups += 1;
        if self.lookups % 1024 == 0 {
            let subtables = &self.subtables;
            self.order
                .sort_by(|&a, &b| subtables[b as usize].hits.cmp(&subtables[a as usize].hits));
        }
        s.memo.next_packet(0);
        self.signature = signature(pkt);
        // The exact first level: the entries the last packets with this
        // signature found (a flow whose packets differ in a field the
        // signature leaves out, such as the length, has one entry each),
        // the latest first. A probe each, and the entry's fields read from
        // the packet and compared with its key, no hashing.
        let mut first = None;
        for with_length in [false, true] {
            let sig = match with_length {
                false => self.signature,
                true => with_len(self.signature, wirelen),
            };
            let b = bucket(sig);
            for way in 0..WAYS {
                let first_way = !with_length && way == 0;
                let (s1, e1) = self.signatures[b + way];
                if s1 != sig || e1 == 0 {
                    continue;
                }
                let e = &self.flows[e1 as usize - 1];
                if e.sub == FREE {
                    continue;
                }
                let st = &self.subtables[e.sub as usize];
                if e.wide.agrees(&st.ops, &e.key, t, pkt, wirelen, s) {
                    let sub = e.sub;
                    return self.hit(e1 - 1, sub, wirelen, first_way);
                }
                first.get_or_insert(e.sub);
            }
        }
        let tries = first.into_iter().chain(
            self.order
                .iter()
                .copied()
                .filter(|&i| Some(i) != first)
                .take(PROBES),
        );
        let mut found = None;
        for i in tries {
            let st = &self.subtables[i as usize];
            self.key.clear();
            for op in st.ops.iter() {
                self.key.push(op.read(t, pkt, wirelen, s));
            }
            if let Some(&e) = st.flows.get(&self.key[..]) {
                found = Some((e, i));
                break;
            }
        }
        match found {
            Some((e, i)) => self.hit(e, i, wirelen, false),
            None => {
                self.stats.misses += 1;
                Lookup::Miss
            }
        }
    }

    /// Count a hit on entry `e` of subtable `sub`; `exact` when the first
    /// level found it.
    #[inline]
    fn hit(&mut self, e: u32, sub: u32, wirelen: u32, exact: bool) -> Lookup {
        self.window_hits += 1;
        self.stats.hits += 1;
        self.subtables[sub as usize].hits += 1;
        self.last = e;
        if !exact {
            self.remember(e, wirelen);
        }
        Lookup::Hit
    }

    /// Where the signature table holds a packet's hint (the cache line a
    /// batch prefetches a few packets ahead); `None` while the cache steps
    /// aside.
    ///
    /// ```
    /// let c = sluice_classifier::tree::flow::FlowCache::default();
    /// assert!(c.hint_line(&[0; 60]).is_some());
    /// ```
    #[inline]
    pub fn hint_line(&self, pkt: &[u8]) -> Option<*const u8> {
        if self.bypass > 0 {
            return None;
        }
        let b = bucket(signature(pkt));
        Some(self.signatures[b..].as_ptr().cast())
    }

    /// Point the last lookup's signature, without the wire length and
    /// with it, at entry `e`.
    fn remember(&mut self, e: u32, wirelen: u32) {
        self.remember_at(self.signature, e);
        self.remember_at(with_len(self.signature, wirelen), e);
    }

    /// Point `sig` at entry `e`, first in its bucket: moved there if the
    /// bucket has it, else the last one leaves.
    fn remember_at(&mut self, sig: u64, e: u32) {
        let b = bucket(sig);
        let bucket = &mut self.signatures[b..b + WAYS];
        let at = bucket
            .iter()
            .position(|&x| x == (sig, e + 1))
            .unwrap_or(WAYS - 1);
        bucket[..=at].rotate_right(1);
        bucket[0] = (sig, e + 1);
    }

    /// Start a packet: the time now for one packet in [`SAMPLE`], whose
    /// cost the caller reports with [`FlowCache::sampled`] (none while
    /// the cache steps aside for more than one more [`WINDOW`]).
    ///
    /// ```
    /// let mut c = sluice_classifier::tree::flow::FlowCache::default();
    /// let t = (0..64).filter_map(|_| c.tick()).count();
    /// assert_eq!(t, 64 / sluice_classifier::tree::flow::SAMPLE as usize);
    /// ```
    #[inline]
    pub fn tick(&mut self) -> Option<std::time::Instant> {
        // Stepping aside for long: only the last window before the next
        // trial is sampled (what the trial compares with).
        if self.bypass > WINDOW {
            return None;
        }
        self.ticks = self.ticks.wrapping_add(1);
        (self.ticks % SAMPLE == 0).then(std::time::Instant::now)
    }

    /// The cost of a sampled packet (see [`FlowCache::tick`]): classified
    /// with the cache (`cached`) or without it (stepping aside).
    pub fn sampled(&mut self, since: std::time::Instant, cached: bool) {
        let ns = since.elapsed().as_nanos().min(u128::from(u32::MAX)) as u64;
        let c = if cached {
            &mut self.with
        } else {
            &mut self.without
        };
        c.add(ns);
    }

    /// End of a window: step aside if too few lookups hit, or if packets
    /// cost more with the cache than they did without it; now and then
    /// step aside for one window to sample the cost without it.
    fn judge(&mut self) {
        let rate = f64::from(self.window_hits) / f64::from(self.window_lookups);
        let misses = self.window_lookups - self.window_hits;
        self.window_lookups = 0;
        self.window_hits = 0;
        let (with, without) = (self.with.mean(), self.without.mean());
        self.with = Cost::default();
        self.windows += 1;
        // A window that still learns many flows costs their walks, which
        // later windows do not: up to LEARNING windows in a row are not
        // judged by their cost (only by their hit rate).
        let learning = misses > LEARNING_MISSES && self.learning < LEARNING;
        self.learning = if learning { self.learning + 1 } else { 0 };
        let dearer = !learning && matches!((with, without), (Some(a), Some(b)) if a > b);
        if rate < MIN_HIT_RATE || dearer {
            self.bypass = self.backoff;
            self.backoff = (self.backoff * 4).min(MAX_BYPASS);
            self.without = Cost::default();
            self.windows = 0;
            self.learning = 0;
            self.resample = RESAMPLE;
        } else {
            self.backoff = WINDOW * 4;
            if (with.is_some() && without.is_none()) || self.windows >= self.resample {
                // Sample the cost without the cache for one window; the
                // more clearly the cache wins, the rarer the sample (each
                // costs a window without it).
                let clear = matches!((with, without), (Some(a), Some(b)) if a * 1.25 < b);
                self.resample = match clear {
                    true => (self.resample * 2).min(MAX_RESAMPLE),
                    false => RESAMPLE,
                };
                self.bypass = WINDOW;
                self.without = Cost::default();
                self.windows = 0;
            }
        }
    }

    /// Look every packet up, whether it pays or not (tests, and
    /// benchmarks of the cache alone); by default the cache steps aside
    /// where it does not pay.
    ///
    /// ```
    /// let mut c = sluice_classifier::tree::flow::FlowCache::default();
    /// c.set_always(true);
    /// assert!(!c.stepping_aside());
    /// ```
    pub fn set_always(&mut self, always: bool) {
        self.always = always;
        if always {
            self.bypass = 0;
        }
    }

    /// Hold at most `flows` flows (at least one; [`MAX_ENTRIES`] by
    /// default): when full, the cache is emptied before it learns the
    /// next flow. Smaller caches show eviction in tests.
    ///
    /// ```
    /// use sluice_classifier::tree::flow::{FlowCache, Lookup};
    /// use sluice_classifier::tree::{DecisionTree, Scratch};
    /// let t = DecisionTree::default();
    /// let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    /// c.set_always(true);
    /// c.set_capacity(1);
    /// c.learn(&t, &[1], 1, &mut s);
    /// c.learn(&t, &[], 0, &mut s);
    /// assert_eq!((c.stats().entries, c.stats().flushes), (1, 1));
    /// ```
    pub fn set_capacity(&mut self, flows: usize) {
        self.capacity = flows.max(1);
        if self.entries > self.capacity {
            self.clear();
        }
    }

    /// True while the cache steps aside.
    ///
    /// ```
    /// assert!(!sluice_classifier::tree::flow::FlowCache::default().stepping_aside());
    /// ```
    pub fn stepping_aside(&self) -> bool {
        self.bypass > 0
    }

    /// The slots of the last hit or of the last flow learnt.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::flow::FlowCache::default().slots().is_empty());
    /// ```
    pub fn slots(&self) -> &[u32] {
        match self.flows.get(self.last as usize) {
            Some(e) => &e.slots,
            None => &[],
        }
    }

    /// Classify a packet the lookup missed by the tree's walk, recording
    /// the fields it reads, and cache its flow: the tree slots of its
    /// filters, each once.
    pub fn learn(&mut self, t: &DecisionTree, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> &[u32] {
        self.sync(t);
        s.next_packet();
        self.trace.clear();
        let root = t.nodes.root();
        run::visit_traced(
            &t.fields,
            &t.nodes,
            root,
            pkt,
            wirelen,
            &mut s.memo,
            &mut s.hits,
            &mut self.trace,
        );
        self.slots.clear();
        s.dedup.start(t.slots());
        let hits = std::mem::take(&mut s.hits);
        for &slot in &hits {
            if s.dedup.first_time(slot) {
                self.slots.push(slot);
            }
        }
        s.hits = hits;
        self.trace.sort_unstable();
        self.trace.dedup();
        self.key.clear();
        for &f in &self.trace {
            self.key
                .push(match t.fields.read(f, pkt, wirelen, &mut s.memo) {
                    Some(v) => u64::from(v),
                    None => ABORT,
                });
        }
        if self.entries >= self.capacity || self.subtables.len() >= MAX_SUBTABLES {
            self.clear();
        }
        let i = match self.by_fields.get(&self.trace[..]) {
            Some(&i) => i,
            None => {
                let i = self.subtables.len() as u32;
                self.subtables.push(Subtable {
                    fields: self.trace.clone().into(),
                    ops: self.trace.iter().map(|&f| Op::of(&t.fields, f)).collect(),
                    flows: FxHashMap::default(),
                    hits: 0,
                });
                self.by_fields.insert(self.trace.clone().into(), i);
                self.order.push(i);
                i
            }
        };
        let st = &mut self.subtables[i as usize];
        let e = match st.flows.get(&self.key[..]) {
            // Cached already (in a subtable the lookup did not probe).
            Some(&e) => e,
            None => {
                let e = match self.free.pop() {
                    Some(e) => e,
                    None => {
                        self.flows.push(Entry::default());
                        self.flows.len() as u32 - 1
                    }
                };
                st.flows.insert(self.key.clone().into(), e);
                self.flows[e as usize] = Entry {
                    sub: i,
                    key: self.key.clone().into(),
                    slots: self.slots.clone().into(),
                    wide: Wide::of(&t.fields, &st.ops, &self.key, pkt, wirelen),
                };
                self.entries += 1;
                e
            }
        };
        self.last = e;
        self.remember(e, wirelen);
        &self.flows[e as usize].slots
    }
}
