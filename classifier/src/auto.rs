//! The engine to use: tuple space search while the filters have few
//! shapes, the decision tree once they have more.
//!
//! Filters that differ only in constants (TCP sessions, MPF's collapsed
//! filters) are one table in either structure, and for them the tuple
//! space's code is the leaner (one probe of a packed key, no tree to
//! walk). Once the filters come in more than [`MAX_GROUPS`] shapes, tuple
//! space pays a probe per shape and the tree is much faster, so [`Auto`]
//! moves to the tree, for good: it replays every change so far into it
//! (the changes are kept until then; they share their filters and keys
//! with the engine), at the change that adds the shape, in both copies of
//! a [`Classifier`](crate::Classifier) alike.
//!
//! ```
//! use sluice_classifier::{Auto, Engine, Change};
//! use sluice_classifier::merged::{Compiled, Merged};
//! use sluice_classifier::tree::DecisionTree;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use std::sync::Arc;
//! let mut a: Auto<Merged, DecisionTree> = Auto::empty();
//! let byte = |o, k| Arc::new(Compiled::new(Filter::new(Pred::eq(Val::load_abs(o, Size::Byte), k), 1)));
//! a.change(&Change::Insert(0, byte(0, 1), 0));
//! a.change(&Change::Insert(1, byte(0, 2), 0));
//! assert!(!a.is_tree());
//! for o in 1..=5 {
//!     a.change(&Change::Insert(1 + o, byte(o, 1), 0));
//! }
//! assert!(a.is_tree());
//! let mut out = Vec::new();
//! a.classify(&[2, 1], 2, &mut Default::default(), &mut out);
//! out.sort();
//! assert_eq!(out, vec![1, 2]);
//! ```

use crate::merged::Merged;
use crate::{Change, Engine};

/// More shapes than this and [`Auto`] moves to the decision tree.
pub const MAX_GROUPS: usize = 4;

/// Engines that group filters by shape and can tell how many groups.
pub trait Shapes {
    /// Number of groups (distinct shapes).
    fn shapes(&self) -> usize;
}

impl Shapes for Merged {
    fn shapes(&self) -> usize {
        self.groups()
    }
}

/// Tuple space search `G` while the filters have at most [`MAX_GROUPS`]
/// shapes, the decision tree `T` after (see the module doc).
#[derive(Clone, Debug)]
pub struct Auto<G, T> {
    groups: Option<G>,
    tree: Option<T>,
    /// Every change while `groups` is in use, for the tree to replay.
    log: Vec<Change>,
}

impl<G: Engine + Shapes, T: Engine> Auto<G, T> {
    /// True once the decision tree is in use.
    pub fn is_tree(&self) -> bool {
        self.tree.is_some()
    }

    /// The tuple space engine, while in use.
    pub fn groups(&self) -> Option<&G> {
        self.groups.as_ref()
    }

    /// The decision tree engine, once in use.
    pub fn tree(&self) -> Option<&T> {
        self.tree.as_ref()
    }

    /// Move to the tree when the filters have too many shapes, or the
    /// changes kept for it outgrow the filters (removals and inserts
    /// over a long time).
    fn maybe_move(&mut self) {
        let Some(g) = &self.groups else { return };
        let live = g.stats().0;
        if g.shapes() <= MAX_GROUPS && self.log.len() <= 4 * live + 65_536 {
            return;
        }
        let mut t = T::empty();
        for c in self.log.drain(..) {
            t.change(&c);
        }
        self.tree = Some(t);
        self.groups = None;
    }
}

/// Per-reader memory of both engines.
#[derive(Debug, Default)]
pub struct AutoScratch<GS, TS> {
    groups: GS,
    tree: TS,
}

impl<GS, TS> AutoScratch<GS, TS> {
    /// The tree engine's part (for its per-reader settings, such as a
    /// flow cache).
    ///
    /// ```
    /// let mut s = sluice_classifier::auto::AutoScratch::<(), u8>::default();
    /// *s.tree_mut() = 3;
    /// ```
    pub fn tree_mut(&mut self) -> &mut TS {
        &mut self.tree
    }
}

/// What a publish derives: the engine in use's.
#[derive(Clone, Debug)]
pub enum AutoDerived<GD, TD> {
    /// Tuple space's.
    Groups(GD),
    /// The tree's.
    Tree(TD),
}

impl<G: Engine + Shapes, T: Engine> Engine for Auto<G, T> {
    type Derived = AutoDerived<G::Derived, T::Derived>;
    type Scratch = AutoScratch<G::Scratch, T::Scratch>;

    fn empty() -> Self {
        Auto {
            groups: Some(G::empty()),
            tree: None,
            log: Vec::new(),
        }
    }

    fn change(&mut self, c: &Change) {
        match (&mut self.groups, &mut self.tree) {
            (Some(g), _) => {
                g.change(c);
                self.log.push(c.clone());
                self.maybe_move();
            }
            (_, Some(t)) => t.change(c),
            _ => unreachable!("one engine is in use"),
        }
    }

    fn key_width_of(&self, like: u32) -> Option<usize> {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.key_width_of(like),
            (_, Some(t)) => t.key_width_of(like),
            _ => None,
        }
    }

    fn sort_key_block(&self, like: u32, width: usize, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.sort_key_block(like, width, keys),
            (_, Some(t)) => t.sort_key_block(like, width, keys),
            _ => (
                keys.to_vec(),
                (0..(keys.len() / width.max(1)) as u32).collect(),
            ),
        }
    }

    fn stats(&self) -> (usize, usize, usize, usize) {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.stats(),
            (_, Some(t)) => t.stats(),
            _ => (0, 0, 0, 0),
        }
    }

    fn refresh(&mut self, slot: &mut Option<Self::Derived>) {
        match (&mut self.groups, &mut self.tree) {
            (Some(g), _) => {
                let mut inner = match slot.take() {
                    Some(AutoDerived::Groups(d)) => Some(d),
                    _ => None,
                };
                g.refresh(&mut inner);
                *slot = inner.map(AutoDerived::Groups);
            }
            (_, Some(t)) => {
                let mut inner = match slot.take() {
                    Some(AutoDerived::Tree(d)) => Some(d),
                    _ => None,
                };
                t.refresh(&mut inner);
                *slot = inner.map(AutoDerived::Tree);
            }
            _ => {}
        }
    }

    fn settled(&self) -> bool {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.settled(),
            (_, Some(t)) => t.settled(),
            _ => true,
        }
    }

    fn sync_with(&mut self, first: &Self) {
        self.log = first.log.clone();
        match (&first.groups, &first.tree) {
            (Some(fg), _) => {
                let mut g = G::empty();
                g.sync_with(fg);
                self.groups = Some(g);
                self.tree = None;
            }
            (_, Some(ft)) => {
                let mut t = T::empty();
                t.sync_with(ft);
                self.tree = Some(t);
                self.groups = None;
            }
            _ => {}
        }
    }

    fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Self::Scratch, out: &mut Vec<u32>) {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.classify(pkt, wirelen, &mut s.groups, out),
            (_, Some(t)) => t.classify(pkt, wirelen, &mut s.tree, out),
            _ => out.clear(),
        }
    }

    fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Self::Scratch) -> Option<u32> {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.classify_first(pkt, wirelen, &mut s.groups),
            (_, Some(t)) => t.classify_first(pkt, wirelen, &mut s.tree),
            _ => None,
        }
    }

    fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Self::Scratch, out: &mut [Vec<u32>]) {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.classify_batch(pkts, &mut s.groups, out),
            (_, Some(t)) => t.classify_batch(pkts, &mut s.tree, out),
            _ => out.iter_mut().for_each(Vec::clear),
        }
    }

    fn classify_first_batch(
        &self,
        pkts: &[(&[u8], u32)],
        s: &mut Self::Scratch,
        out: &mut [Option<u32>],
    ) {
        match (&self.groups, &self.tree) {
            (Some(g), _) => g.classify_first_batch(pkts, &mut s.groups, out),
            (_, Some(t)) => t.classify_first_batch(pkts, &mut s.tree, out),
            _ => out.fill(None),
        }
    }
}

impl<G: Engine + Shapes, T: Engine> Auto<G, T> {
    /// Add a filter (see [`Change::Insert`]).
    ///
    /// ```
    /// use sluice_classifier::{Auto, Engine};
    /// use sluice_classifier::merged::{Compiled, Merged};
    /// let mut a: Auto<Merged, sluice_classifier::tree::DecisionTree> = Auto::empty();
    /// a.insert(0, std::sync::Arc::new(Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1))), 0);
    /// assert_eq!(a.stats().0, 1);
    /// ```
    pub fn insert(&mut self, id: u32, c: std::sync::Arc<crate::merged::Compiled>, priority: i32) {
        self.change(&Change::Insert(id, c, priority));
    }

    /// Bring derived state (native code) up to date, outside a
    /// [`Classifier`](crate::Classifier).
    ///
    /// ```
    /// use sluice_classifier::{Auto, Engine};
    /// use sluice_classifier::merged::{Compiled, Merged};
    /// let mut a: Auto<Merged, sluice_classifier::tree::DecisionTree> = Auto::empty();
    /// a.insert(4, std::sync::Arc::new(Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1))), 0);
    /// a.update();
    /// assert!(a.settled());
    /// assert_eq!(a.classify_first(&[], 0, &mut Default::default()), Some(4));
    /// ```
    pub fn update(&mut self) {
        self.refresh(&mut None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::merged::Compiled;
    use crate::tree::DecisionTree;
    use crate::Classifier;
    use sluice_ir::{Filter, Pred, Size, Val};
    use std::sync::Arc;

    /// The same inserts, key-only inserts and removals give the same
    /// answers in each mode, before and after the move to the tree.
    #[test]
    fn the_move_keeps_every_answer() {
        let b = |o| Val::load_abs(o, Size::Byte);
        let mut c: Classifier<Auto<Merged, DecisionTree>> = Classifier::default();
        let mut plain: Classifier<DecisionTree> = Classifier::default();
        let base = Filter::new(Pred::and(vec![Pred::eq(b(0), 1), Pred::eq(b(1), 2)]), 1);
        let (x, y) = (c.insert(&base, 0), plain.insert(&base, 0));
        c.publish();
        plain.publish();
        // One by one: a block's ids follow each engine's table order.
        let mut a = Vec::new();
        let mut p = Vec::new();
        for k in 0..50u32 {
            a.push(c.insert_keyed(x, &[k % 7, k], 1).unwrap());
            p.push(plain.insert_keyed(y, &[k % 7, k], 1).unwrap());
        }
        c.remove(a[3]);
        plain.remove(p[3]);
        c.remove(x);
        plain.remove(y);
        let pkts: Vec<Vec<u8>> = (0..60u8)
            .flat_map(|i| [vec![i % 7, i], vec![i, 2, i]])
            .collect();
        let check = |c: &Classifier<Auto<Merged, DecisionTree>>,
                     plain: &Classifier<DecisionTree>| {
            let (r, q) = (c.reader(), plain.reader());
            for pkt in &pkts {
                let w = pkt.len() as u32;
                assert_eq!(r.classify(pkt, w), q.classify(pkt, w), "{pkt:?}");
                assert_eq!(r.classify_first(pkt, w), q.classify_first(pkt, w));
            }
        };
        c.publish();
        plain.publish();
        assert_eq!(c.published(|e| e.is_tree()), Some(false));
        check(&c, &plain);
        for o in 2..9 {
            let f = Filter::new(Pred::eq(b(o), o), 1);
            c.insert(&f, 2);
            plain.insert(&f, 2);
        }
        c.publish();
        plain.publish();
        assert_eq!(c.published(|e| e.is_tree()), Some(true));
        check(&c, &plain);
        let _ = Arc::new(Compiled::new(base));
    }
}
