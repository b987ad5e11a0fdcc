//! Many filters, one pass: sluice's merged classifier.
//!
//! Filters are inserted and removed by one writer while any number of
//! readers classify packets without ever waiting for it: the data lives in
//! two copies (the `left-right` crate); readers use one, the writer changes
//! the other and [`Classifier::publish`] swaps them. A packet costs one pass
//! over the *shapes* of the installed filters (filters that differ only in
//! constants share a hash table), not over the filters: see [`merged`].
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

#![warn(missing_docs)]

pub mod field;
pub mod merged;
pub mod path;
pub mod table;

use left_right::{Absorb, ReadHandle, ReadHandleFactory, WriteHandle};
use merged::{Compiled, Merged, Scratch};
use std::cell::RefCell;
use std::sync::Arc;

/// A filter's identity in a classifier; ids grow in insertion order.
///
/// ```
/// assert!(sluice_classifier::FilterId(1) < sluice_classifier::FilterId(2));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterId(pub u32);

/// A change to the classifier, applied to both copies.
#[derive(Clone, Debug)]
enum Op {
    Insert(u32, Arc<Compiled>, i32),
    InsertKeyed(u32, u32, Arc<[u32]>, i32),
    /// First id, like, key width, keys one after another, priority.
    InsertKeys(u32, u32, usize, Arc<[u32]>, i32),
    Remove(u32),
}

impl Absorb<Op> for Merged {
    fn absorb_first(&mut self, op: &mut Op, _: &Self) {
        match op {
            Op::Insert(id, c, p) => self.insert(*id, c, *p),
            Op::InsertKeyed(id, like, key, p) => {
                self.insert_shared_key(*id, *like, key.clone(), *p);
            }
            Op::InsertKeys(first, like, width, keys, p) => {
                self.insert_key_block(*first, *like, *width, keys.clone(), *p);
            }
            Op::Remove(id) => self.remove(*id),
        }
    }

    fn sync_with(&mut self, first: &Self) {
        *self = first.clone();
    }
}

/// The writer side: insert, remove, publish.
///
/// ```
/// let c = sluice_classifier::Classifier::new();
/// assert_eq!(c.len(), 0);
/// ```
pub struct Classifier {
    w: WriteHandle<Merged, Op>,
    factory: ReadHandleFactory<Merged>,
    next: u32,
    live: usize,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new()
    }
}

impl Classifier {
    /// An empty classifier.
    ///
    /// ```
    /// let _ = sluice_classifier::Classifier::new();
    /// ```
    pub fn new() -> Classifier {
        let (w, r) = left_right::new::<Merged, Op>();
        Classifier {
            factory: r.factory(),
            w,
            next: 0,
            live: 0,
        }
    }

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
        self.w.append(Op::Insert(id, c, priority));
        FilterId(id)
    }

    /// Insert a filter equal to `like` except for its key constants: one
    /// hash-table insert, no compilation. `None` if `like` is not a filter of
    /// exactly one key of that length.
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
        // Check against the published copy, then against pending inserts.
        self.w.publish();
        let ok = {
            let g = self.w.enter()?;
            g.accepts_key_like(like.0, key.len())
        };
        if !ok {
            return None;
        }
        let id = self.fresh();
        self.w
            .append(Op::InsertKeyed(id, like.0, key.into(), priority));
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
        self.w.publish();
        let width = {
            let g = self.w.enter()?;
            g.key_width(like.0)?
        };
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
        let (sorted, pos) = {
            let g = self.w.enter()?;
            g.sort_key_block(like.0, width, &flat)
        };
        let n = pos.len();
        let first = self.next;
        self.next += n as u32;
        self.live += n;
        if n > 0 {
            self.w.append(Op::InsertKeys(
                first,
                like.0,
                width,
                sorted.into(),
                priority,
            ));
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
        self.w.append(Op::Remove(id.0));
    }

    /// Make every change so far visible to readers. Readers never wait; the
    /// writer waits for readers still on the old copy.
    ///
    /// ```
    /// sluice_classifier::Classifier::new().publish();
    /// ```
    pub fn publish(&mut self) {
        self.w.publish();
    }

    /// A reader handle (one per thread; clone it to hand out more).
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// let r = c.reader();
    /// let r2 = r.clone();
    /// assert!(r2.classify(&[], 0).is_empty());
    /// ```
    pub fn reader(&self) -> Reader {
        Reader {
            r: self.factory.handle(),
            factory: self.factory.clone(),
            scratch: RefCell::new(Scratch::default()),
        }
    }

    /// Statistics of the published copy: (filters, groups, filters run whole, table bytes).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::Classifier::new().stats(), (0, 0, 0, 0));
    /// ```
    pub fn stats(&self) -> (usize, usize, usize, usize) {
        match self.w.enter() {
            Some(g) => (g.len(), g.groups(), g.whole(), g.table_bytes()),
            None => (0, 0, 0, 0),
        }
    }
}

impl Merged {
    fn key_width(&self, like: u32) -> Option<usize> {
        self.key_width_of(like)
    }
}

/// A reader: classifies packets against the last published filters.
///
/// ```
/// let c = sluice_classifier::Classifier::new();
/// assert_eq!(c.reader().classify_first(&[], 0), None);
/// ```
pub struct Reader {
    r: ReadHandle<Merged>,
    factory: ReadHandleFactory<Merged>,
    scratch: RefCell<Scratch>,
}

impl Clone for Reader {
    fn clone(&self) -> Reader {
        Reader {
            r: self.factory.handle(),
            factory: self.factory.clone(),
            scratch: RefCell::new(Scratch::default()),
        }
    }
}

impl Reader {
    /// Every filter accepting the packet (monitoring: every flow that wants it).
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
            g.classify(pkt, wirelen, &mut self.scratch.borrow_mut(), out);
        }
    }

    /// The single winner: highest priority, then earliest inserted.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// assert_eq!(c.reader().classify_first(&[], 0), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32) -> Option<FilterId> {
        let g = self.r.enter()?;
        g.classify_first(pkt, wirelen, &mut self.scratch.borrow_mut())
            .map(FilterId)
    }

    /// Classify a batch of packets, overlapping their table lookups.
    ///
    /// ```
    /// let c = sluice_classifier::Classifier::new();
    /// let mut out = vec![vec![]; 1];
    /// c.reader().classify_batch(&[(&[][..], 0)], &mut out);
    /// ```
    pub fn classify_batch(&self, pkts: &[(&[u8], u32)], out: &mut [Vec<u32>]) {
        match self.r.enter() {
            Some(g) => g.classify_batch(pkts, &mut self.scratch.borrow_mut(), out),
            None => out.iter_mut().for_each(Vec::clear),
        }
    }
}
