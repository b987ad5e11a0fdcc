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

use crate::field::{Direct, FieldId, Fields, Memo};
use crate::path::{paths, Atom, Path, Test};
use crate::table::{hash, KeyTable};
use sluice_bpf::Insn;
use sluice_ir::{Filter, Pred};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// The most keys one path may expand into (sets times sets); beyond it a set
/// stays a guard.
pub const MAX_EXPANSION: usize = 1 << 20;

/// A filter prepared for insertion (compiled outside any lock).
///
/// ```
/// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// assert!(c.paths().is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Compiled {
    filter: Filter,
    paths: Option<Vec<Path>>,
    program: Arc<[Insn]>,
}

impl Compiled {
    /// Prepare an IR filter: its paths, or, when it has too many to merge, a
    /// BPF program for running it whole.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred};
    /// let c = sluice_classifier::merged::Compiled::new(Filter::new(Pred::False, 1));
    /// assert_eq!(c.paths().unwrap().len(), 0);
    /// ```
    pub fn new(filter: Filter) -> Compiled {
        let pred = sluice_ir::simplify::fast_disjunctions(filter.pred.clone());
        let paths = paths(&pred, filter.accept).ok();
        // Only a filter that runs whole needs its BPF program.
        let program: Arc<[Insn]> = if paths.is_some() {
            Arc::from([])
        } else {
            let lowered = sluice_cbpf::lower_with(
                &Filter::new(pred, filter.accept),
                sluice_cbpf::Options { optimize: true },
            );
            match lowered {
                Ok(p) => p.into(),
                // Rejects everything: a program that says so.
                Err(_) => vec![Insn::stmt(
                    sluice_bpf::op::BPF_RET | sluice_bpf::op::BPF_K,
                    0,
                )]
                .into(),
            }
        };
        Compiled {
            filter,
            paths,
            program,
        }
    }

    /// A filter given as a classic BPF program: lifted into the IR and
    /// merged like any other when its control flow allows
    /// ([`sluice_bpf::lift`]), otherwise run whole.
    ///
    /// ```
    /// use sluice_bpf::{Insn, op};
    /// let c = sluice_classifier::merged::Compiled::from_bpf(&[Insn::stmt(op::BPF_RET | op::BPF_K, 1)]);
    /// assert!(c.paths().is_some());
    /// let ret_a = [Insn::stmt(op::BPF_RET | op::BPF_A, 0)];
    /// assert!(sluice_classifier::merged::Compiled::from_bpf(&ret_a).paths().is_none());
    /// ```
    pub fn from_bpf(prog: &[Insn]) -> Compiled {
        match sluice_bpf::lift(prog) {
            Ok(filter) => {
                let pred = sluice_ir::simplify::fast_disjunctions(filter.pred.clone());
                Compiled {
                    paths: paths(&pred, filter.accept).ok(),
                    filter,
                    program: prog.into(),
                }
            }
            Err(_) => Compiled {
                filter: Filter::new(Pred::False, 0),
                paths: None,
                program: prog.into(),
            },
        }
    }

    /// The accepting paths, when the filter can be merged.
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// assert_eq!(c.paths().unwrap().len(), 1);
    /// ```
    pub fn paths(&self) -> Option<&[Path]> {
        self.paths.as_deref()
    }

    /// The classic BPF program a filter that cannot be merged runs as
    /// (empty for one that merges).
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 3));
    /// assert!(c.program().is_empty());
    /// ```
    pub fn program(&self) -> Arc<[Insn]> {
        self.program.clone()
    }

    /// The filter this was made from (for expressions).
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 3));
    /// assert_eq!(c.filter().accept, 3);
    /// ```
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
}

/// A guard, compiled against the interned fields.
#[derive(Clone, Debug)]
enum Guard {
    Field(FieldId, Test, bool),
    Pred(Pred, bool),
}

/// One filter's place in a group's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    filter: u32,
    priority: i32,
}

/// Table values from here up are list indexes (plus `MULTI`); below, a
/// key's only filter (plus one) with its priority in the slot's datum word.
const MULTI: u32 = 0x8000_0000;

impl Entry {
    /// The table value and datum of a key whose only filter this is.
    fn single(self) -> Option<(u32, u32)> {
        (self.filter < MULTI - 1).then_some((self.filter + 1, self.priority as u32))
    }
}

/// The longest key read into a fixed buffer (longer ones use the memo path).
const MAX_DIRECT_KEY: usize = 16;

/// A group whose guards and key fields are all [`Direct`] reads: checked and
/// read straight from the packet, without the memo.
#[derive(Clone, Debug)]
struct Plan {
    guards: Vec<(Direct, Test, bool)>,
    key: Vec<Direct>,
}

impl Plan {
    /// The key into `out`; false when a guard fails or a read aborts.
    #[inline]
    fn key(&self, pkt: &[u8], out: &mut [u32; MAX_DIRECT_KEY]) -> bool {
        for (d, test, truth) in &self.guards {
            match d.read(pkt) {
                Some(v) if test.apply(v) == *truth => {}
                _ => return false,
            }
        }
        for (o, d) in out.iter_mut().zip(&self.key) {
            match d.read(pkt) {
                Some(v) => *o = v,
                None => return false,
            }
        }
        true
    }
}

/// Paths with the same guards and key fields.
#[derive(Clone, Debug)]
struct Group {
    guards: Vec<Guard>,
    key: Vec<FieldId>,
    plan: Option<Plan>,
    table: KeyTable,
    /// The filters of keys with more than one (a table value `MULTI + i`
    /// names `lists[i]`).
    lists: Vec<Vec<Entry>>,
    free: Vec<u32>,
}

impl Group {
    /// Call `f` on every filter of a table value and datum.
    #[inline]
    fn each(&self, v: u32, datum: u32, mut f: impl FnMut(Entry)) {
        if v < MULTI {
            f(Entry {
                filter: v - 1,
                priority: datum as i32,
            });
        } else {
            self.lists[(v - MULTI) as usize].iter().for_each(|e| f(*e));
        }
    }

    fn new_list(&mut self, list: Vec<Entry>) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.lists[i as usize] = list;
                i
            }
            None => {
                self.lists.push(list);
                (self.lists.len() - 1) as u32
            }
        };
        assert!(i < MULTI - 1, "too many shared keys");
        MULTI + i
    }

    fn free_list(&mut self, v: u32) {
        let i = v - MULTI;
        self.lists[i as usize] = Vec::new();
        self.free.push(i);
    }
}

/// What identifies a group: its guard atoms and key values.
type Shape = (Vec<Atom>, Vec<sluice_ir::Val>);

/// A filter that runs whole.
#[derive(Clone, Debug)]
struct Whole {
    filter: u32,
    priority: i32,
    program: Arc<[Insn]>,
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

/// A hasher for filter ids (dense counters): one multiply.
#[derive(Clone, Copy, Debug, Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    /// The id itself in the low bits (the table's bucket: consecutive ids
    /// land in consecutive buckets, so a batch of new filters fills the map
    /// in order) and mixed bits on top (the map's tag byte).
    fn write_u32(&mut self, n: u32) {
        let mixed = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (mixed & 0xffff_ffff_0000_0000) | n as u64;
    }
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
    whole: Vec<Whole>,
    filters: HashMap<u32, (i32, Placement), BuildHasherDefault<IdHasher>>,
}

/// Reusable per-reader memory for classification.
///
/// ```
/// let s = sluice_classifier::merged::Scratch::default();
/// drop(s);
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
                let rank = |w: &Whole| (std::cmp::Reverse(w.priority), w.filter);
                let new = Whole {
                    filter: id,
                    priority,
                    program: c.program.clone(),
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
            if sluice_bpf::run(&w.program, pkt, wirelen) != 0 {
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
            if sluice_bpf::run(&w.program, pkt, wirelen) != 0 {
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
                if sluice_bpf::run(&w.program, pkt, *wirelen) != 0 {
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

/// How a group's field is read, for code generators: a [`Direct`] read
/// (a fixed offset, or an offset past an IPv4 header), or any other IR
/// value (a constant, `len`, a computed address).
///
/// ```
/// use sluice_classifier::merged::{FieldRead, Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 1)), 0);
/// let g = m.group_view(0).unwrap();
/// assert!(matches!(g.key_fields()[0].1, FieldRead::Direct(_)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum FieldRead<'a> {
    /// One bounds-checked load.
    Direct(Direct),
    /// Any other value (evaluated as the IR's reference interpreter does).
    Value(&'a sluice_ir::Val),
}

/// One guard of a group, as [`GroupView::guards`] describes it.
///
/// ```
/// use sluice_classifier::merged::{GuardView, Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// let p = Pred::not(Pred::eq(Val::load_abs(0, Size::Byte), 7));
/// m.insert(0, &Compiled::new(Filter::new(p, 1)), 0);
/// let g = m.group_view(0).unwrap();
/// assert!(matches!(g.guards()[0], GuardView::Field { truth: false, .. }));
/// ```
#[derive(Clone, Debug)]
pub enum GuardView<'a> {
    /// `test(field) == truth`, the field read without aborting.
    Field {
        /// The interned field (equal ids: the same value).
        field: FieldId,
        /// How it is read.
        read: FieldRead<'a>,
        /// The test.
        test: &'a Test,
        /// The outcome the group needs.
        truth: bool,
    },
    /// A predicate (computed comparison, protochain) that must give
    /// `truth` without aborting.
    Pred {
        /// The predicate.
        pred: &'a Pred,
        /// The outcome the group needs.
        truth: bool,
    },
}

/// A table value and its datum: where a key's filters are found
/// ([`Merged::each_slot_filter`]).
///
/// ```
/// let s = sluice_classifier::merged::Slot { value: 1, datum: 0 };
/// assert_eq!(s.value, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The table's value word (never 0 or `u32::MAX`).
    pub value: u32,
    /// The datum word next to it.
    pub datum: u32,
}

impl Slot {
    /// Table values below this name one filter (`value - 1`, with its
    /// priority in the datum word); from here up, a list of filters. Code
    /// generators that decode slots themselves test against it.
    ///
    /// ```
    /// use sluice_classifier::merged::Slot;
    /// assert!(Slot { value: 1, datum: 0 }.value < Slot::LIST_BASE);
    /// ```
    pub const LIST_BASE: u32 = MULTI;

    /// The key's only filter, if it has exactly one (else its filters are
    /// a list: [`Merged::each_slot_filter`]).
    ///
    /// ```
    /// use sluice_classifier::merged::Slot;
    /// assert_eq!(Slot { value: 8, datum: 0 }.single_filter(), Some(7));
    /// assert_eq!(Slot { value: Slot::LIST_BASE, datum: 0 }.single_filter(), None);
    /// ```
    pub fn single_filter(self) -> Option<u32> {
        (self.value < MULTI).then(|| self.value - 1)
    }
}

/// A read-only description of one group: its guards, its key fields and
/// its keys. A packet matches a key of the group when every guard holds,
/// every key field reads without aborting, and the fields' values equal the
/// key word for word; the key's filters then accept it.
///
/// ```
/// use sluice_classifier::merged::{Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(2, Size::Half), 80), 1)), 3);
/// let g = m.group_view(0).unwrap();
/// assert_eq!(g.len(), 1);
/// let (key, slot) = g.keys().next().unwrap();
/// assert_eq!(key, &[80]);
/// let mut f = vec![];
/// m.each_slot_filter(0, slot, |id, prio| f.push((id, prio)));
/// assert_eq!(f, vec![(0, 3)]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct GroupView<'a> {
    m: &'a Merged,
    g: &'a Group,
    id: u32,
}

impl<'a> GroupView<'a> {
    /// The group's index (stable: groups are never renumbered).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().id(), 0);
    /// ```
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The guards, in the group's canonical order.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(m.group_view(0).unwrap().guards().is_empty());
    /// ```
    pub fn guards(&self) -> Vec<GuardView<'a>> {
        let m = self.m;
        self.g
            .guards
            .iter()
            .map(|g| match g {
                Guard::Field(f, test, truth) => GuardView::Field {
                    field: *f,
                    read: m.field_read(*f),
                    test,
                    truth: *truth,
                },
                Guard::Pred(pred, truth) => GuardView::Pred {
                    pred,
                    truth: *truth,
                },
            })
            .collect()
    }

    /// The key fields, in key order, each with how it is read.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(m.group_view(0).unwrap().key_fields().is_empty());
    /// ```
    pub fn key_fields(&self) -> Vec<(FieldId, FieldRead<'a>)> {
        self.g
            .key
            .iter()
            .map(|f| (*f, self.m.field_read(*f)))
            .collect()
    }

    /// Number of distinct keys in the table.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.g.table.len()
    }

    /// True when the group has no keys (it matches nothing).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// m.remove(0);
    /// assert!(m.group_view(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.g.table.is_empty()
    }

    /// Every key with its slot, in table order.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().keys().count(), 1);
    /// ```
    pub fn keys(&self) -> impl Iterator<Item = (&'a [u32], Slot)> + 'a {
        self.g
            .table
            .words()
            .chunks_exact(self.g.table.width() + 2)
            .filter(|s| s[0] != 0 && s[0] != u32::MAX)
            .map(|s| {
                (
                    &s[2..],
                    Slot {
                        value: s[0],
                        datum: s[1],
                    },
                )
            })
    }

    /// The group's hash table (data a code generator may probe itself:
    /// [`KeyTable::words`]).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().table().width(), 0);
    /// ```
    pub fn table(&self) -> &'a KeyTable {
        &self.g.table
    }
}

impl Merged {
    fn field_read(&self, f: FieldId) -> FieldRead<'_> {
        match self.fields.direct(f) {
            Some(d) => FieldRead::Direct(d),
            None => FieldRead::Value(self.fields.val(f)),
        }
    }

    /// A group's description, `None` past the last group.
    ///
    /// ```
    /// assert!(sluice_classifier::merged::Merged::default().group_view(0).is_none());
    /// ```
    pub fn group_view(&self, group: u32) -> Option<GroupView<'_>> {
        self.groups.get(group as usize).map(|g| GroupView {
            m: self,
            g,
            id: group,
        })
    }

    /// Every group's description, by index.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().group_views().count(), 0);
    /// ```
    pub fn group_views(&self) -> impl Iterator<Item = GroupView<'_>> {
        self.groups.iter().enumerate().map(|(i, g)| GroupView {
            m: self,
            g,
            id: i as u32,
        })
    }

    /// The filters that run whole, in winning order: (id, priority, program).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().whole_filters().count(), 0);
    /// ```
    pub fn whole_filters(&self) -> impl Iterator<Item = (u32, i32, &[Insn])> {
        self.whole
            .iter()
            .map(|w| (w.filter, w.priority, &w.program[..]))
    }

    /// Call `f(filter, priority)` for every filter of a group's slot (as
    /// found in [`GroupView::keys`] or by probing the group's table).
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// m.each_slot_filter(0, sluice_classifier::merged::Slot { value: 1, datum: 0 }, |_, _| unreachable!());
    /// ```
    #[inline]
    pub fn each_slot_filter(&self, group: u32, slot: Slot, mut f: impl FnMut(u32, i32)) {
        if let Some(g) = self.groups.get(group as usize) {
            if let Some(filter) = slot.single_filter() {
                f(filter, slot.datum as i32);
            } else if let Some(list) = g.lists.get((slot.value - MULTI) as usize) {
                list.iter().for_each(|e| f(e.filter, e.priority));
            }
        }
    }

    /// The Rust path for some groups only (those a code generator left
    /// out): `f(group, slot)` for each listed group whose key the packet
    /// matches.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut hits = vec![];
    /// m.match_groups(&[0], &[], 0, &mut Default::default(), |g, s| hits.push((g, s)));
    /// assert_eq!(hits.len(), 1);
    /// ```
    #[inline]
    pub fn match_groups(
        &self,
        groups: &[u32],
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
        mut f: impl FnMut(u32, Slot),
    ) {
        s.memo.next_packet(self.fields.len());
        let mut buf = [0u32; MAX_DIRECT_KEY];
        for &gi in groups {
            let Some(g) = self.groups.get(gi as usize) else {
                continue;
            };
            if g.table.is_empty() {
                continue;
            }
            let Some(key) = self.group_key(g, pkt, wirelen, &mut s.memo, &mut buf, &mut s.key)
            else {
                continue;
            };
            if let Some((value, datum)) = g.table.entry_hashed(key, hash(key)) {
                f(gi, Slot { value, datum });
            }
        }
    }

    /// Append every filter that runs whole and accepts the packet to `out`
    /// (the part of [`Merged::classify`] after the groups).
    ///
    /// ```
    /// let mut out = vec![];
    /// sluice_classifier::merged::Merged::default().whole_matches(&[], 0, &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn whole_matches(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>) {
        for w in &self.whole {
            if sluice_bpf::run(&w.program, pkt, wirelen) != 0 {
                out.push(w.filter);
            }
        }
    }

    /// The winner of [`Merged::classify_first`] given the best (filter,
    /// priority) among the groups' matches: the filters that run whole are
    /// tried in winning order, stopping as soon as none can win.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// assert_eq!(m.first_with_whole(&[], 0, Some((3, 1))), Some((3, 1)));
    /// ```
    pub fn first_with_whole(
        &self,
        pkt: &[u8],
        wirelen: u32,
        best: Option<(u32, i32)>,
    ) -> Option<(u32, i32)> {
        let mut best = best;
        for w in &self.whole {
            let e = (w.priority, std::cmp::Reverse(w.filter));
            if let Some((bf, bp)) = best {
                if e < (bp, std::cmp::Reverse(bf)) {
                    break;
                }
            }
            if sluice_bpf::run(&w.program, pkt, wirelen) != 0 {
                if better(best, w.filter, w.priority) {
                    best = Some((w.filter, w.priority));
                }
                break;
            }
        }
        best
    }
}

/// Does (filter, priority) beat the best so far in first-match order
/// (higher priority, then lower id)?
///
/// ```
/// use sluice_classifier::merged::better;
/// assert!(better(None, 5, 0));
/// assert!(better(Some((5, 0)), 3, 0));
/// assert!(!better(Some((5, 1)), 3, 0));
/// ```
#[inline]
pub fn better(best: Option<(u32, i32)>, filter: u32, priority: i32) -> bool {
    match best {
        None => true,
        Some((bf, bp)) => (priority, std::cmp::Reverse(filter)) > (bp, std::cmp::Reverse(bf)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{Size, Val};

    /// A block of keys (with a repeat and a key already present) behaves
    /// like the same keys inserted one by one, removals included.
    #[test]
    fn key_blocks_equal_single_inserts() {
        let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
        let keys: Vec<u32> = (0..500).map(|i| i * 7 % 300).chain([0, 0]).collect();
        let (mut a, mut b) = (Merged::default(), Merged::default());
        a.insert(0, &Compiled::new(port(0)), 0);
        b.insert(0, &Compiled::new(port(0)), 0);
        assert!(a.insert_key_block(1, 0, 1, keys.clone().into(), 2));
        for (i, k) in keys.iter().enumerate() {
            assert!(b.insert_keyed(1 + i as u32, 0, &[*k], 2));
        }
        for id in (0..keys.len() as u32).step_by(3) {
            a.remove(id);
            b.remove(id);
        }
        let mut s = Scratch::default();
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for q in 0..310u32 {
            let pkt = [0, 0, (q >> 8) as u8, q as u8];
            a.classify(&pkt, 4, &mut s, &mut x);
            b.classify(&pkt, 4, &mut s, &mut y);
            assert_eq!(x, y);
            assert_eq!(
                a.classify_first(&pkt, 4, &mut s),
                b.classify_first(&pkt, 4, &mut s)
            );
        }
        assert_eq!(a.len(), b.len());
    }

    /// Filters sharing keys (inline single entries turning into lists and
    /// back) against a plain model, under random inserts and removals.
    #[test]
    fn shared_keys_match_a_model() {
        let port = |p| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
        let mut m = Merged::default();
        let mut model: Vec<(u32, u32, i32)> = Vec::new();
        let mut x: u64 = 99;
        let mut s = Scratch::default();
        let mut out = Vec::new();
        let mut next = 0u32;
        for _ in 0..3000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let p = (x >> 40) as u32 % 6;
            let prio = (x >> 20) as i32 % 3;
            if x % 3 == 0 && !model.is_empty() {
                let (id, _, _) = model.remove((x >> 8) as usize % model.len());
                m.remove(id);
            } else if x % 3 == 1 && !model.is_empty() {
                let like = model[(x >> 8) as usize % model.len()].0;
                assert!(m.insert_keyed(next, like, &[2048 + p], prio));
                model.push((next, 2048 + p, prio));
                next += 1;
            } else {
                m.insert(next, &Compiled::new(port(2048 + p)), prio);
                model.push((next, 2048 + p, prio));
                next += 1;
            }
            for q in 2048..2054u32 {
                let pkt = [0, 0, (q >> 8) as u8, q as u8];
                let mut want: Vec<u32> = model.iter().filter(|f| f.1 == q).map(|f| f.0).collect();
                want.sort_unstable();
                m.classify(&pkt, 4, &mut s, &mut out);
                assert_eq!(out, want);
                let first = model
                    .iter()
                    .filter(|f| f.1 == q)
                    .max_by_key(|f| (f.2, std::cmp::Reverse(f.0)))
                    .map(|f| f.0);
                assert_eq!(m.classify_first(&pkt, 4, &mut s), first);
                let mut batch = vec![Vec::new(); 2];
                m.classify_batch(&[(&pkt[..], 4), (&pkt[..3], 3)], &mut s, &mut batch);
                assert_eq!(batch[0], want);
                assert!(batch[1].is_empty());
            }
        }
    }

    #[test]
    fn first_match_over_whole_filters_follows_priority_then_insertion() {
        use sluice_bpf::op::{BPF_ABS, BPF_B, BPF_LD, BPF_RET};
        // `ret A` after loading byte 0: accepts when byte 0 is non-zero; not
        // liftable, so these filters run whole.
        let prog = [
            Insn::stmt(BPF_LD | BPF_B | BPF_ABS, 0),
            Insn::stmt(BPF_RET | sluice_bpf::op::BPF_A, 0),
        ];
        let whole = Compiled::from_bpf(&prog);
        assert!(whole.paths().is_none());
        let keyed = Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1));
        let mut m = Merged::default();
        m.insert(0, &whole, 1);
        m.insert(1, &whole, 5);
        m.insert(2, &keyed, 5);
        m.insert(3, &whole, 5);
        m.insert(4, &keyed, 9);
        let mut s = Scratch::default();
        // Byte 0 = 1: all match; priority 9 wins (filter 4).
        assert_eq!(m.classify_first(&[1], 1, &mut s), Some(4));
        m.remove(4);
        // Priority 5: filters 1 (whole), 2 (keyed), 3 (whole): lowest id wins.
        assert_eq!(m.classify_first(&[1], 1, &mut s), Some(1));
        m.remove(1);
        assert_eq!(m.classify_first(&[1], 1, &mut s), Some(2));
        // Byte 0 = 2: only the whole filters match.
        assert_eq!(m.classify_first(&[2], 1, &mut s), Some(3));
        m.remove(3);
        assert_eq!(m.classify_first(&[2], 1, &mut s), Some(0));
        assert_eq!(m.classify_first(&[0], 1, &mut s), None);
        let mut out = Vec::new();
        m.classify(&[2], 1, &mut s, &mut out);
        assert_eq!(out, vec![0]);
    }
}
