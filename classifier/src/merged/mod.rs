//! The merged decision structure (single-threaded; [`crate::Classifier`]
//! shares it between a writer and many readers).
//!
//! Every filter's accepting paths are split into *guards* and a *key*. The
//! key is the constants of the path's `field == constant` atoms (and of
//! `field ∈ set` atoms, expanded); the guards are everything else. Paths
//! with the same guards and the same key fields form a group — MPF's
//! "filters that differ only in constants" — and a group is one hash table
//! from key to filters. A packet costs one pass over the groups: check the
//! guards, read the key fields, one probe. The number of filters does not
//! enter. Filters whose paths are too many run whole, after the groups.
//!
//! ```
//! use sluice_classifier::merged::{Merged, Compiled};
//! use sluice_ir::{Filter, Pred, Val, Size};
//! let mut m = Merged::default();
//! let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
//! m.insert(0, &Compiled::new(port(80)), 0);
//! m.insert(1, &Compiled::new(port(443)), 0);
//! let mut out = Vec::new();
//! m.classify(&[0, 0, 1, 187], 4, &mut Default::default(), &mut out);
//! assert_eq!(out, vec![1]);
//! assert_eq!(m.groups(), 1);
//! ```
//!
//! The parts: `compiled.rs` prepares a filter outside any lock
//! ([`Compiled`]), `codec.rs` writes and reads it as bytes; `group.rs` is one group, its table and the lists of
//! filters that share a key; this file places filters in groups and
//! classifies; `view.rs` is what a code generator may read of the groups
//! ([`GroupView`], [`Slot`], [`Merged::match_groups`], …) to give exactly
//! this classifier's answers in machine code.

mod codec;
mod compiled;
mod group;
mod view;

pub use codec::{decode_compiled, encode_compiled};
pub use compiled::{Compiled, Whole};
pub use view::{better, FieldRead, GroupView, GuardView, Slot};

use crate::field::{FieldId, Fields, Memo};
use crate::id_map::IdMap;
use crate::path::{Atom, Path, Test};
use crate::table::{hash, KeyTable};
use group::{Entry, Group, Guard, Plan, MAX_DIRECT_KEY, MULTI};
use std::collections::HashMap;
use std::sync::Arc;

/// The most keys one path may expand into (sets times sets); beyond it a set
/// stays a guard.
pub const MAX_EXPANSION: usize = 1 << 20;

/// What identifies a group: its guard atoms and key values.
type Shape = (Vec<Atom>, Vec<sluice_ir::Val>);

/// A filter that runs whole.
#[derive(Clone, Debug)]
struct WholeFilter {
    filter: u32,
    priority: i32,
    whole: Whole,
}

/// Where a filter is, for removal.
#[derive(Clone, Debug)]
enum Placement {
    Keys(Vec<(u32, Vec<u32>)>),
    /// One key of one group (the key-only inserts): the group, and the key
    /// at a word offset in a block of keys shared with the other copy of the
    /// classifier and with the other filters inserted in the same batch.
    Key(u32, Arc<[u32]>, u32),
    Whole,
}

/// The merged classifier's data.
///
/// ```
/// let m = sluice_classifier::merged::Merged::default();
/// assert_eq!(m.len(), 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Merged {
    fields: Fields,
    groups: Vec<Group>,
    shapes: HashMap<Shape, u32>,
    whole: Vec<WholeFilter>,
    filters: IdMap<(i32, Placement)>,
}

/// Reusable per-reader memory for classification.
///
/// ```
/// use sluice_classifier::merged::{Compiled, Merged, Scratch};
/// use sluice_ir::{Filter, Pred, Size, Val};
/// let mut m = Merged::default();
/// m.insert(5, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1)), 0);
/// // One scratch serves packet after packet.
/// let (mut s, mut out) = (Scratch::default(), Vec::new());
/// m.classify(&[7], 1, &mut s, &mut out);
/// assert_eq!(out, [5]);
/// m.classify(&[8], 1, &mut s, &mut out);
/// assert!(out.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    memo: Memo,
    key: Vec<u32>,
    batch: Vec<Probe>,
}

/// A pending probe of a batch.
#[derive(Clone, Copy, Debug)]
struct Probe {
    packet: u32,
    group: u32,
    key_at: u32,
    hash: u64,
}

impl Merged {
    /// Number of filters.
    ///
    /// ```
    /// assert!(sluice_classifier::merged::Merged::default().is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// True when there are no filters.
    ///
    /// ```
    /// assert!(sluice_classifier::merged::Merged::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Number of groups (distinct shapes).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().groups(), 0);
    /// ```
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Number of filters that run whole.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().whole(), 0);
    /// ```
    pub fn whole(&self) -> usize {
        self.whole.len()
    }

    /// Approximate bytes of the groups' tables and lists.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().table_bytes(), 0);
    /// ```
    pub fn table_bytes(&self) -> usize {
        self.groups
            .iter()
            .map(|g| g.table.bytes() + g.lists.iter().map(|l| 24 + l.capacity() * 8).sum::<usize>())
            .sum()
    }

    fn group_for(&mut self, guards: Vec<Atom>, key_vals: Vec<sluice_ir::Val>) -> u32 {
        let shape = (guards, key_vals);
        if let Some(&g) = self.shapes.get(&shape) {
            return g;
        }
        let compiled: Vec<Guard> = shape
            .0
            .iter()
            .map(|a| match a {
                Atom::Field { val, test, truth } => {
                    Guard::Field(self.fields.intern(val), test.clone(), *truth)
                }
                Atom::Pred { pred, truth } => Guard::Pred(pred.clone(), *truth),
            })
            .collect();
        let key: Vec<FieldId> = shape.1.iter().map(|v| self.fields.intern(v)).collect();
        let plan = (key.len() <= MAX_DIRECT_KEY)
            .then(|| {
                let guards = compiled
                    .iter()
                    .map(|g| match g {
                        Guard::Field(f, test, truth) => {
                            Some((self.fields.direct(*f)?, test.clone(), *truth))
                        }
                        Guard::Pred(..) => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                let key = key
                    .iter()
                    .map(|f| self.fields.direct(*f))
                    .collect::<Option<Vec<_>>>()?;
                Some(Plan { guards, key })
            })
            .flatten();
        let id = self.groups.len() as u32;
        self.groups.push(Group {
            guards: compiled,
            table: KeyTable::new(key.len()),
            key,
            plan,
            lists: Vec::new(),
            free: Vec::new(),
        });
        self.shapes.insert(shape, id);
        id
    }

    fn add_key(&mut self, group: u32, key: &[u32], e: Entry) {
        self.add_key_hashed(group, key, hash(key), e);
    }

    fn add_key_hashed(&mut self, group: u32, key: &[u32], h: u64, e: Entry) {
        let g = &mut self.groups[group as usize];
        match g.table.entry_hashed(key, h) {
            None => {
                let (v, datum) = match e.single() {
                    Some(s) => s,
                    None => (g.new_list(vec![e]), 0),
                };
                g.table.insert_with(key, v, datum);
            }
            Some((v, datum)) if v < MULTI => {
                let old = Entry {
                    filter: v - 1,
                    priority: datum as i32,
                };
                if old != e {
                    let list = g.new_list(vec![old, e]);
                    g.table.insert_with(key, list, 0);
                }
            }
            Some((v, _)) => {
                let list = &mut g.lists[(v - MULTI) as usize];
                if !list.contains(&e) {
                    list.push(e);
                }
            }
        }
    }

    fn drop_key(&mut self, group: u32, key: &[u32], filter: u32) {
        let g = &mut self.groups[group as usize];
        match g.table.entry_hashed(key, hash(key)) {
            None => {}
            Some((v, _)) if v < MULTI && v - 1 == filter => {
                g.table.remove(key);
            }
            Some((v, _)) if v < MULTI => {}
            Some((v, _)) => {
                let list = &mut g.lists[(v - MULTI) as usize];
                list.retain(|e| e.filter != filter);
                match list.as_slice() {
                    [] => {
                        g.table.remove(key);
                        g.free_list(v);
                    }
                    [only] => {
                        if let Some((sv, sd)) = only.single() {
                            g.table.insert_with(key, sv, sd);
                            g.free_list(v);
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Split one path into its group and keys (sets expanded).
    fn place(&mut self, path: &Path) -> (u32, Vec<Vec<u32>>) {
        let mut guards = Vec::new();
        let mut key_vals = Vec::new();
        let mut choices: Vec<Vec<u32>> = Vec::new();
        let mut expansion = 1usize;
        for a in &path.atoms {
            match a {
                Atom::Field {
                    val,
                    test: Test::Eq(k),
                    truth: true,
                } => {
                    key_vals.push(val.clone());
                    choices.push(vec![*k]);
                }
                Atom::Field {
                    val,
                    test: Test::In(keys),
                    truth: true,
                } if expansion.saturating_mul(keys.sorted().len()) <= MAX_EXPANSION => {
                    expansion *= keys.sorted().len();
                    key_vals.push(val.clone());
                    choices.push(keys.sorted().to_vec());
                }
                a => guards.push(a.clone()),
            }
        }
        let group = self.group_for(guards, key_vals);
        let mut keys: Vec<Vec<u32>> = vec![Vec::new()];
        for c in choices {
            keys = keys
                .into_iter()
                .flat_map(|k| {
                    c.iter().map(move |&x| {
                        let mut k = k.clone();
                        k.push(x);
                        k
                    })
                })
                .collect();
        }
        (group, keys)
    }

    /// Add a filter with an id (ids must be new) and a priority.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// let mut m = Merged::default();
    /// m.insert(5, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.len(), 1);
    /// ```
    pub fn insert(&mut self, id: u32, c: &Compiled, priority: i32) {
        let e = Entry {
            filter: id,
            priority,
        };
        let placement = match &c.paths {
            Some(paths) => {
                let mut placed = Vec::new();
                for p in paths {
                    let (g, keys) = self.place(p);
                    for k in keys {
                        self.add_key(g, &k, e);
                        placed.push((g, k));
                    }
                }
                Placement::Keys(placed)
            }
            None => {
                // Kept in winning order (priority, then insertion), so the
                // first-match search can stop at the first that accepts.
                let rank = |w: &WholeFilter| (std::cmp::Reverse(w.priority), w.filter);
                let new = WholeFilter {
                    filter: id,
                    priority,
                    whole: c.whole.clone(),
                };
                let at = self.whole.partition_point(|w| rank(w) < rank(&new));
                self.whole.insert(at, new);
                Placement::Whole
            }
        };
        self.filters.insert(id, (priority, placement));
    }

    /// Add a filter equal to `like` but for its key: valid when `like` sits
    /// in exactly one group under exactly one key of the same length. This
    /// is the cheap path (MPF's collapsed filters): one table insert.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(m.insert_keyed(1, 0, &[2], 0));
    /// let mut out = Vec::new();
    /// m.classify(&[2], 1, &mut Default::default(), &mut out);
    /// assert_eq!(out, vec![1]);
    /// ```
    pub fn insert_keyed(&mut self, id: u32, like: u32, key: &[u32], priority: i32) -> bool {
        self.insert_shared_key(id, like, key.into(), priority)
    }

    /// [`Merged::insert_keyed`] with a key that may be shared (by the two
    /// copies of a [`crate::Classifier`]).
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(m.insert_shared_key(1, 0, vec![2].into(), 0));
    /// ```
    pub fn insert_shared_key(
        &mut self,
        id: u32,
        like: u32,
        key: Arc<[u32]>,
        priority: i32,
    ) -> bool {
        let Some(group) = self.keyed_group(like, key.len()) else {
            return false;
        };
        self.add_key(
            group,
            &key,
            Entry {
                filter: id,
                priority,
            },
        );
        self.filters
            .insert(id, (priority, Placement::Key(group, key, 0)));
        true
    }

    /// The group `like` sits in, when its filters may be copied with a key of `width`.
    fn keyed_group(&self, like: u32, width: usize) -> Option<u32> {
        match self.filters.get(&like) {
            Some((_, Placement::Keys(v))) if v.len() == 1 && v[0].1.len() == width => Some(v[0].0),
            Some((_, Placement::Key(g, ..))) if self.groups[*g as usize].key.len() == width => {
                Some(*g)
            }
            _ => None,
        }
    }

    /// Put a block of keys (one after another, `width` words each) in the
    /// order their home slots will have once `like`'s table holds them all
    /// (a stable counting sort on the slot's top bits), so that
    /// [`Merged::insert_key_block`] sweeps the table instead of missing the
    /// cache on every key. Returns the sorted block and each input key's
    /// position in it.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// let (sorted, pos) = m.sort_key_block(0, 1, &[3, 4]);
    /// assert_eq!((sorted.len(), pos.len()), (2, 2));
    /// ```
    pub fn sort_key_block(&self, like: u32, width: usize, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
        let n = keys.len() / width.max(1);
        let Some(group) = self.keyed_group(like, width).filter(|_| width > 0) else {
            return (keys.to_vec(), (0..n as u32).collect());
        };
        let table = &self.groups[group as usize].table;
        let slots = table.slots_for(n);
        let slot_bits = slots.trailing_zeros();
        let bits = slot_bits.min(16);
        let shift = slot_bits - bits;
        let bucket = |k: &[u32]| ((hash(k) as usize & (slots - 1)) >> shift) as u32;
        let buckets: Vec<u32> = keys.chunks_exact(width).map(bucket).collect();
        let mut start = vec![0u32; (1 << bits) + 1];
        for &b in &buckets {
            start[b as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut sorted = vec![0u32; keys.len()];
        let mut pos = Vec::with_capacity(n);
        for (k, &b) in keys.chunks_exact(width).zip(&buckets) {
            let at = &mut start[b as usize];
            sorted[*at as usize * width..(*at as usize + 1) * width].copy_from_slice(k);
            pos.push(*at);
            *at += 1;
        }
        (sorted, pos)
    }

    /// Insert `keys.len() / width` filters like `like`, with ids from
    /// `first` on and the keys one after another in `keys`. The table is
    /// grown once; keys given in the order of [`Merged::sort_key_block`] go
    /// in as one sweep of the table. False (nothing inserted) when `like`
    /// cannot be copied with keys of `width` words.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(m.insert_key_block(1, 0, 1, vec![2, 3].into(), 0));
    /// assert_eq!(m.len(), 3);
    /// ```
    pub fn insert_key_block(
        &mut self,
        first: u32,
        like: u32,
        width: usize,
        keys: Arc<[u32]>,
        priority: i32,
    ) -> bool {
        let Some(group) = self.keyed_group(like, width) else {
            return false;
        };
        if width == 0 || keys.len() % width != 0 {
            return false;
        }
        let n = keys.len() / width;
        self.groups[group as usize].table.reserve(n);
        for (i, key) in keys.chunks_exact(width).enumerate() {
            let entry = Entry {
                filter: first + i as u32,
                priority,
            };
            self.add_key_hashed(group, key, hash(key), entry);
        }
        self.filters.reserve(n);
        for i in 0..n {
            let at = (i * width) as u32;
            self.filters.insert(
                first + i as u32,
                (priority, Placement::Key(group, keys.clone(), at)),
            );
        }
        true
    }

    /// True if [`Merged::insert_keyed`] with `like` and a key of `width`
    /// words would succeed.
    ///
    /// ```
    /// assert!(!sluice_classifier::merged::Merged::default().accepts_key_like(0, 1));
    /// ```
    pub fn accepts_key_like(&self, like: u32, width: usize) -> bool {
        self.key_width_of(like) == Some(width)
    }

    /// The key width of a filter that [`Merged::insert_keyed`] can copy.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().key_width_of(0), None);
    /// ```
    pub fn key_width_of(&self, like: u32) -> Option<usize> {
        match self.filters.get(&like) {
            Some((_, Placement::Keys(v))) if v.len() == 1 => Some(v[0].1.len()),
            Some((_, Placement::Key(g, ..))) => Some(self.groups[*g as usize].key.len()),
            _ => None,
        }
    }

    /// Call `f(group, key)` for every key filter `id` put in a group's
    /// table (none for a filter that runs whole or an unknown id): what
    /// code that mirrors the tables must look at after the filter is
    /// inserted or before it is removed.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1)), 0);
    /// let mut keys = Vec::new();
    /// m.keys_of(0, |g, k| keys.push((g, k.to_vec())));
    /// assert_eq!(keys, vec![(0, vec![7])]);
    /// ```
    pub fn keys_of(&self, id: u32, mut f: impl FnMut(u32, &[u32])) {
        match self.filters.get(&id) {
            Some((_, Placement::Keys(placed))) => {
                for (g, k) in placed {
                    f(*g, k);
                }
            }
            Some((_, Placement::Key(g, keys, at))) => {
                let width = self.groups[*g as usize].key.len();
                f(*g, &keys[*at as usize..*at as usize + width]);
            }
            Some((_, Placement::Whole)) | None => {}
        }
    }

    /// Remove a filter; unknown ids are ignored.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// let mut m = Merged::default();
    /// m.insert(5, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// m.remove(5);
    /// assert!(m.is_empty());
    /// ```
    pub fn remove(&mut self, id: u32) {
        match self.filters.remove(&id) {
            Some((_, Placement::Keys(placed))) => {
                for (g, k) in placed {
                    self.drop_key(g, &k, id);
                }
            }
            Some((_, Placement::Key(g, keys, at))) => {
                let width = self.groups[g as usize].key.len();
                self.drop_key(g, &keys[at as usize..at as usize + width], id);
            }
            Some((_, Placement::Whole)) => self.whole.retain(|w| w.filter != id),
            None => {}
        }
    }

    #[inline]
    fn guards_hold(&self, g: &Group, pkt: &[u8], wirelen: u32, memo: &mut Memo) -> bool {
        g.guards.iter().all(|guard| match guard {
            Guard::Field(f, test, truth) => {
                matches!(memo.get(&self.fields, *f, pkt, wirelen), Some(v) if test.apply(v) == *truth)
            }
            Guard::Pred(p, truth) => {
                matches!(sluice_ir::eval_pred(p, pkt, wirelen), Ok(b) if b == *truth)
            }
        })
    }

    /// A group's key on a packet, when its guards hold and no read aborts:
    /// read straight from the packet into `buf` for a group with a plan,
    /// through the memo into `spill` otherwise.
    #[inline]
    fn group_key<'k>(
        &self,
        g: &Group,
        pkt: &[u8],
        wirelen: u32,
        memo: &mut Memo,
        buf: &'k mut [u32; MAX_DIRECT_KEY],
        spill: &'k mut Vec<u32>,
    ) -> Option<&'k [u32]> {
        if let Some(plan) = &g.plan {
            return plan.key(pkt, buf).then(|| &buf[..plan.key.len()]);
        }
        if !self.guards_hold(g, pkt, wirelen, memo) {
            return None;
        }
        spill.clear();
        for &f in &g.key {
            spill.push(memo.get(&self.fields, f, pkt, wirelen)?);
        }
        Some(spill)
    }

    /// Call `f` for every table entry the packet's keys find (the merged
    /// part of classification; filters that run whole are not included).
    #[inline]
    fn each_keyed_match(
        &self,
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
        mut f: impl FnMut(Entry),
    ) {
        s.memo.next_packet(self.fields.len());
        let mut buf = [0u32; MAX_DIRECT_KEY];
        for g in &self.groups {
            if g.table.is_empty() {
                continue;
            }
            let Some(key) = self.group_key(g, pkt, wirelen, &mut s.memo, &mut buf, &mut s.key)
            else {
                continue;
            };
            if let Some((v, datum)) = g.table.entry_hashed(key, hash(key)) {
                g.each(v, datum, &mut f);
            }
        }
    }

    /// Every filter that accepts the packet, as ids in increasing order.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// let mut out = vec![9];
    /// m.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        out.clear();
        self.each_keyed_match(pkt, wirelen, s, |e| out.push(e.filter));
        for w in &self.whole {
            if w.whole.run(pkt, wirelen) != 0 {
                out.push(w.filter);
            }
        }
        if out.len() > 1 {
            out.sort_unstable();
            out.dedup();
        }
    }

    /// The single winner (demultiplexing): the accepting filter of highest
    /// priority, the earliest inserted (lowest id) among equals.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// assert_eq!(m.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        fn consider(best: &mut Option<Entry>, e: Entry) {
            let better = match best {
                None => true,
                Some(b) => {
                    (e.priority, std::cmp::Reverse(e.filter))
                        > (b.priority, std::cmp::Reverse(b.filter))
                }
            };
            if better {
                *best = Some(e);
            }
        }
        let mut best: Option<Entry> = None;
        self.each_keyed_match(pkt, wirelen, s, |e| consider(&mut best, e));
        // Whole filters are in winning order: the first that accepts is the
        // best of them, and once one ranks below the merged winner none
        // after it can win.
        for w in &self.whole {
            let e = Entry {
                filter: w.filter,
                priority: w.priority,
            };
            if let Some(b) = best {
                if (e.priority, std::cmp::Reverse(e.filter))
                    < (b.priority, std::cmp::Reverse(b.filter))
                {
                    break;
                }
            }
            if w.whole.run(pkt, wirelen) != 0 {
                consider(&mut best, e);
                break;
            }
        }
        best.map(|e| e.filter)
    }

    /// Classify many packets at once, in three passes so that the cache
    /// misses of the probes overlap: read every packet's keys and hash them;
    /// touch every probe's home slot in a tight loop (the loads are
    /// independent, so the processor keeps many in flight); then probe.
    /// `out[i]` gets packet `i`'s filters.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// let mut out = vec![Vec::new(); 2];
    /// m.classify_batch(&[(&[][..], 0), (&[1][..], 1)], &mut Default::default(), &mut out);
    /// assert!(out.iter().all(|o| o.is_empty()));
    /// ```
    pub fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Scratch, out: &mut [Vec<u32>]) {
        let Scratch { memo, key, batch } = s;
        batch.clear();
        key.clear();
        let mut buf = [0u32; MAX_DIRECT_KEY];
        let mut spill = Vec::new();
        for (i, (pkt, wirelen)) in pkts.iter().enumerate() {
            out[i].clear();
            memo.next_packet(self.fields.len());
            for (gi, g) in self.groups.iter().enumerate() {
                if g.table.is_empty() {
                    continue;
                }
                let Some(k) = self.group_key(g, pkt, *wirelen, memo, &mut buf, &mut spill) else {
                    continue;
                };
                batch.push(Probe {
                    packet: i as u32,
                    group: gi as u32,
                    key_at: key.len() as u32,
                    hash: hash(k),
                });
                key.extend_from_slice(k);
            }
        }
        let mut touched = 0u32;
        for p in batch.iter() {
            let t = &self.groups[p.group as usize].table;
            touched = touched.wrapping_add(t.touch(t.home(p.hash)));
        }
        std::hint::black_box(touched);
        for p in batch.iter() {
            let g = &self.groups[p.group as usize];
            let k = &key[p.key_at as usize..p.key_at as usize + g.key.len()];
            if let Some((v, datum)) = g.table.entry_hashed(k, p.hash) {
                let o = &mut out[p.packet as usize];
                g.each(v, datum, |e| o.push(e.filter));
            }
        }
        for (i, (pkt, wirelen)) in pkts.iter().enumerate() {
            for w in &self.whole {
                if w.whole.run(pkt, *wirelen) != 0 {
                    out[i].push(w.filter);
                }
            }
            if out[i].len() > 1 {
                out[i].sort_unstable();
                out[i].dedup();
            }
        }
    }
}

#[cfg(test)]
mod tests;
