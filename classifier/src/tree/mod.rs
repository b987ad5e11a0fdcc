//! The merged decision tree: many filters of any shapes in one structure
//! whose every test is made at most once per packet.
//!
//! Each filter's accepting paths ([`crate::path`]) are folded field by
//! field into [`Item`]s and sorted in field order (protocol layer:
//! link, network, transport, then computed values). Paths go into one
//! tree ([`node`]) where they share the nodes of their common tests: DPF's
//! and PathFinder's merged trie, with three generalisations. A node
//! dispatches on its field's value with one table lookup for every path
//! that asks for equality (many keys cost one probe, and a run of
//! equalities on several fields shared by every path of a table is one
//! key: a table of TCP sessions is one probe, MPF's collapsed filters);
//! conditions (ranges, excluded values, flag bits) are edges checked once
//! per node visit; and paths that do not test the node's field go on by
//! a skip edge instead of being copied under every value (a backtracking
//! trie, so its size is the size of the paths). A packet reaches only the
//! nodes whose tests it has passed: the cost follows the tests that
//! succeed, and the matches, not the number of filters installed.
//!
//! Every filter keeps its exact meaning: a path holds when every one of
//! its atoms loads without aborting and tests as the path needs, whatever
//! the order they are checked in, which is what lets the tree reorder and
//! share them. Filters with too many paths to split run whole after the
//! tree, as classic BPF (as in [`crate::merged`]).
//!
//! ```
//! use sluice_classifier::tree::DecisionTree;
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! let mut t = DecisionTree::default();
//! let byte = |o| Val::load_abs(o, Size::Byte);
//! t.insert(0, &Compiled::new(Filter::new(Pred::eq(byte(0), 1), 1)), 0);
//! t.insert(1, &Compiled::new(Filter::new(Pred::and(vec![Pred::eq(byte(0), 1), Pred::eq(byte(1), 2)]), 1)), 5);
//! t.insert(2, &Compiled::new(Filter::new(Pred::eq(byte(1), 2), 1)), 0);
//! let mut out = Vec::new();
//! let s = &mut Default::default();
//! t.classify(&[1, 2], 2, s, &mut out);
//! out.sort_unstable(); // found in the tree's order
//! assert_eq!(out, vec![0, 1, 2]);
//! assert_eq!(t.classify_first(&[1, 2], 2, s), Some(1));
//! t.remove(1);
//! t.classify(&[1, 2], 2, s, &mut out);
//! assert_eq!(out, vec![0, 2]);
//! ```

pub mod field;
pub mod flow;
pub mod label;
pub mod node;
mod run;

pub(crate) use run::Dedup;
pub use run::Scratch;

use crate::id_map::IdMap;
use crate::merged::Compiled;
use crate::merged::Whole;
use crate::path::{Atom, Path, Test};
use field::{FieldId, Fields, Source};
use label::Label;
use node::{Entry, Item, Nodes, Subst};
use std::sync::Arc;

/// Key-only inserts of at least this many keys at once go into tables of
/// their whole run of equalities (see [`Subst::whole`]): a block that
/// large is a uniform set, like sessions, whose copies are best one key
/// each, at the price of one more lookup at the node where their table
/// sits beside a shorter one.
pub const BLOCK_TABLE: usize = 64;

/// A filter's paths as the tree takes them: items in field order, dead
/// paths (whose tests contradict each other) left out.
type Items = Vec<Vec<Item>>;

/// How a key-only filter is made from the filter it copies: the copied
/// path (the slow way: [`Path::with_key`] and fold again), and, when each
/// key field is tested by its equality alone, the folded items and which
/// of them the key words replace (the fast way: one walk down the tree).
#[derive(Debug)]
pub(crate) struct Template {
    path: Path,
    width: usize,
    fast: Option<(Vec<Item>, Vec<usize>)>,
}

/// Where a filter is, for removal.
#[derive(Clone, Debug)]
enum Form {
    Paths(Arc<Items>),
    /// A key-only filter: its template and its key, at a word offset in a
    /// block shared with the filters inserted with it.
    Keyed(Arc<Template>, Arc<[u32]>, u32),
    Whole,
}

#[derive(Clone, Debug)]
struct Info {
    slot: u32,
    form: Form,
    /// For filters that can be copied by key.
    template: Option<Arc<Template>>,
}

/// A filter that runs whole, as classic BPF.
#[derive(Clone, Debug)]
struct WholeFilter {
    filter: u32,
    priority: i32,
    whole: Whole,
    /// The same filter as code a back end made of it, run instead.
    code: Option<Arc<dyn WholeCode>>,
}

impl WholeFilter {
    fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match &self.code {
            Some(c) => c.run(pkt, wirelen),
            None => self.whole.run(pkt, wirelen),
        }
    }
}

/// A filter that runs whole, compiled by a back end
/// ([`DecisionTree::set_whole_code`]): it must accept exactly the packets
/// the filter does, with the same value.
pub trait WholeCode: Send + Sync + std::fmt::Debug {
    /// The accept value on one packet, or 0.
    fn run(&self, pkt: &[u8], wirelen: u32) -> u32;
}

/// The merged decision tree (see the module doc).
///
/// ```
/// let t = sluice_classifier::tree::DecisionTree::default();
/// assert!(t.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct DecisionTree {
    fields: Fields,
    nodes: Nodes,
    filters: IdMap<Info>,
    /// Filter id of each slot (`u32::MAX` for a free one).
    ids: Vec<u32>,
    /// How many used slots hold a filter whose id is not the slot's
    /// number: none when filters were inserted with ids 0, 1, 2… (as
    /// `split` and the benchmark do), and then a packet's slots are its
    /// ids, copied in one go.
    renamed: usize,
    /// Priority of each slot.
    prios: Vec<i32>,
    free_slots: Vec<u32>,
    whole: Vec<WholeFilter>,
    /// Recent changes, for flow caches ([`flow`]).
    log: flow::ChangeLog,
}

/// Statistics of a [`DecisionTree`].
///
/// ```
/// let s = sluice_classifier::tree::DecisionTree::default().stats();
/// assert_eq!((s.filters, s.nodes), (0, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Filters installed.
    pub filters: usize,
    /// Nodes of the tree.
    pub nodes: usize,
    /// Tables (one lookup each when reached).
    pub tables: usize,
    /// Condition edges.
    pub conds: usize,
    /// Distinct fields tested.
    pub fields: usize,
    /// Filters that run whole.
    pub whole: usize,
    /// Approximate bytes of the tree.
    pub bytes: usize,
}

impl DecisionTree {
    /// Number of filters.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::DecisionTree::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.filters.len()
    }

    /// True when no filter is installed.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::DecisionTree::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The fields the tree tests.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::DecisionTree::default().fields().is_empty());
    /// ```
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// The nodes (for code generators and statistics).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::DecisionTree::default().nodes().len(), 1);
    /// ```
    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    /// Record from now on which nodes change, for code generators that
    /// rebuild only what changed ([`DecisionTree::take_changed`]).
    ///
    /// ```
    /// let mut t = sluice_classifier::tree::DecisionTree::default();
    /// t.track_changes(true);
    /// assert!(t.take_changed().is_empty());
    /// ```
    pub fn track_changes(&mut self, on: bool) {
        self.nodes.track_changes(on);
    }

    /// The nodes whose content changed since the last call (see
    /// [`Nodes::take_changed`]); empty unless changes are tracked.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.track_changes(true);
    /// t.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.take_changed(), vec![0]);
    /// ```
    pub fn take_changed(&mut self) -> Vec<node::NodeId> {
        self.nodes.take_changed()
    }

    /// Forget the changes recorded so far (see [`Nodes::forget_changed`]).
    ///
    /// ```
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = sluice_classifier::tree::DecisionTree::default();
    /// t.track_changes(true);
    /// t.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// t.forget_changed();
    /// assert!(t.take_changed().is_empty());
    /// ```
    pub fn forget_changed(&mut self) {
        self.nodes.forget_changed();
    }

    /// The filter id in a slot (as leaves name filters), if the slot is used.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::DecisionTree::default().id_of(0), None);
    /// ```
    pub fn id_of(&self, slot: u32) -> Option<u32> {
        self.ids
            .get(slot as usize)
            .copied()
            .filter(|&i| i != u32::MAX)
    }

    /// True if the filter in `slot` may be found on more than one path
    /// for one packet (it has several paths), so a walk may report it
    /// twice; false for a filter of one path.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(!t.repeats(0));
    /// ```
    pub fn repeats(&self, slot: u32) -> bool {
        let Some(id) = self.id_of(slot) else {
            return true;
        };
        match self.filters.get(&id).map(|i| &i.form) {
            Some(Form::Paths(items)) => items.len() > 1,
            Some(Form::Keyed(..)) => false,
            _ => true,
        }
    }

    /// True when filter `id` runs whole after the tree (its paths could
    /// not be enumerated within the limits), so that a back end may give
    /// it code ([`DecisionTree::set_whole_code`]).
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(3, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(!t.runs_whole(3));
    /// ```
    pub fn runs_whole(&self, id: u32) -> bool {
        self.filters
            .get(&id)
            .is_some_and(|i| matches!(i.form, Form::Whole))
    }

    /// Run filter `id`, one that runs whole, as `code` from now on (a back
    /// end's compiled form of it); false when `id` does not run whole.
    ///
    /// ```
    /// use sluice_classifier::tree::{DecisionTree, WholeCode};
    /// #[derive(Debug)]
    /// struct All;
    /// impl WholeCode for All {
    ///     fn run(&self, _: &[u8], _: u32) -> u32 { 1 }
    /// }
    /// let mut t = DecisionTree::default();
    /// assert!(!t.set_whole_code(3, std::sync::Arc::new(All)));
    /// ```
    pub fn set_whole_code(&mut self, id: u32, code: Arc<dyn WholeCode>) -> bool {
        match self.whole.iter_mut().find(|w| w.filter == id) {
            Some(w) => {
                w.code = Some(code);
                true
            }
            None => false,
        }
    }

    /// The filters that run whole after the tree, in the order they run:
    /// (id, priority, program).
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.whole_filters().count(), 0); // it has a path
    /// ```
    pub fn whole_filters(&self) -> impl Iterator<Item = (u32, i32, &Whole)> + '_ {
        self.whole.iter().map(|w| (w.filter, w.priority, &w.whole))
    }

    /// Number of filter slots (used and free): leaves name slots below it.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::DecisionTree::default().slots(), 0);
    /// ```
    pub fn slots(&self) -> usize {
        self.ids.len()
    }

    /// Size and shape.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.stats().filters, 1);
    /// ```
    pub fn stats(&self) -> TreeStats {
        let all = self.nodes.all();
        TreeStats {
            filters: self.filters.len(),
            nodes: self.nodes.len(),
            tables: all.iter().map(|n| n.tuples.len()).sum(),
            conds: all.iter().map(|n| n.conds.len()).sum(),
            fields: self.fields.len(),
            whole: self.whole.len(),
            bytes: self.nodes.bytes() + self.ids.capacity() * 4 + self.filters.capacity() * 48,
        }
    }

    /// Fold a path into items (`None` when its tests contradict each other).
    pub(crate) fn fold_path(fields: &mut Fields, p: &Path) -> Option<Vec<Item>> {
        let mut by_field: Vec<(FieldId, Test, bool)> = p
            .covered_loads_dropped()
            .iter()
            .map(|a| match a {
                Atom::Field { val, test, truth } => (
                    fields.intern(&Source::Val(val.clone())),
                    test.clone(),
                    *truth,
                ),
                Atom::Pred { pred, truth } => (
                    fields.intern(&Source::Pred(pred.clone())),
                    Test::Eq(1),
                    *truth,
                ),
            })
            .collect();
        by_field.sort_by(|a, b| fields.order(a.0, b.0));
        let mut items = Vec::new();
        for run in by_field.chunk_by(|a, b| a.0 == b.0) {
            let tests: Vec<(Test, bool)> = run.iter().map(|(_, t, b)| (t.clone(), *b)).collect();
            items.push(Item {
                field: run[0].0,
                label: Label::of(&tests)?,
            });
        }
        Some(items)
    }

    /// The template of a filter of one path, for key-only copies of it;
    /// `folded` is that path's items when the caller has them already.
    fn template_of(
        fields: &mut Fields,
        paths: &[Path],
        folded: Option<&Vec<Item>>,
    ) -> Option<Arc<Template>> {
        let [p] = paths else { return None };
        if p.atoms.iter().any(|a| {
            matches!(a, Atom::Field { test: Test::In(s), truth: true, .. } if s.sorted().len() > 1)
        }) {
            return None;
        }
        // Each field atom's field, and whether it is a key (an equality).
        let atoms: Vec<(FieldId, bool)> = p
            .atoms
            .iter()
            .filter_map(|a| match a {
                Atom::Field { val, test, truth } => Some((
                    fields.intern(&Source::Val(val.clone())),
                    *truth && matches!(test, Test::Eq(_)),
                )),
                _ => None,
            })
            .collect();
        let eq_fields: Vec<FieldId> = atoms.iter().filter(|a| a.1).map(|a| a.0).collect();
        let items = match folded {
            Some(items) => Some(items.clone()),
            None => Self::fold_path(fields, p),
        };
        let fast = items.and_then(|items| {
            // Each key field must be tested by its equality alone, so that
            // any key keeps the fold exact.
            let alone = |f: FieldId| atoms.iter().filter(|a| a.0 == f).count() == 1;
            let at: Option<Vec<usize>> = eq_fields
                .iter()
                .map(|&f| {
                    alone(f)
                        .then(|| items.iter().position(|i| i.field == f))
                        .flatten()
                })
                .collect();
            Some((items, at?))
        });
        Some(Arc::new(Template {
            path: p.clone(),
            width: eq_fields.len(),
            fast,
        }))
    }

    fn new_slot(&mut self, id: u32, priority: i32) -> u32 {
        match self.free_slots.pop() {
            Some(s) => {
                self.renamed += usize::from(id != s);
                self.ids[s as usize] = id;
                self.prios[s as usize] = priority;
                s
            }
            None => {
                self.renamed += usize::from(id as usize != self.ids.len());
                self.ids.push(id);
                self.prios.push(priority);
                (self.ids.len() - 1) as u32
            }
        }
    }

    /// Add a filter with a new id and a priority (higher wins a first match).
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(4, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn insert(&mut self, id: u32, c: &Compiled, priority: i32) {
        if self.filters.contains_key(&id) {
            self.remove(id);
        }
        match (c.paths(), c.absorbed_paths()) {
            (Some(paths), Some(simple)) => self.insert_paths(id, paths, simple, priority),
            _ => {
                let rank = |w: &WholeFilter| (std::cmp::Reverse(w.priority), w.filter);
                let new = WholeFilter {
                    filter: id,
                    priority,
                    whole: c.whole().clone(),
                    code: None,
                };
                let at = self.whole.partition_point(|w| rank(w) < rank(&new));
                self.whole.insert(at, new);
                let slot = self.new_slot(id, priority);
                // Run after the tree, never cached: nothing to drop.
                self.log.record((3u8, id, slot), flow::Logged::Whole);
                let info = Info {
                    slot,
                    form: Form::Whole,
                    template: None,
                };
                self.filters.insert(id, info);
            }
        }
    }

    /// Add a filter (with a new id) given by its accepting paths, and the
    /// same with the tests its other paths make needless dropped (negations
    /// that would otherwise be conditions of this filter alone).
    fn insert_paths(&mut self, id: u32, paths: &[Path], simple: &[Path], priority: i32) {
        let slot = self.new_slot(id, priority);
        let e = Entry { slot, priority };
        let items: Items = simple
            .iter()
            .filter_map(|p| Self::fold_path(&mut self.fields, p))
            .collect();
        let root = self.nodes.root();
        for p in &items {
            self.nodes.insert(&self.fields, root, p, e);
        }
        // One path, not absorbed: its items are folded already.
        let folded = match (paths, std::ptr::eq(paths, simple), &items[..]) {
            ([_], true, [one]) => Some(one),
            _ => None,
        };
        let template = Self::template_of(&mut self.fields, paths, folded);
        let items = Arc::new(items);
        self.log
            .record((0u8, id, slot, &*items), flow::Logged::Paths(items.clone()));
        let info = Info {
            slot,
            form: Form::Paths(items),
            template,
        };
        self.filters.insert(id, info);
    }

    /// The number of key words a filter copied from `like` takes
    /// ([`DecisionTree::insert_keyed`]): the constants of its path's
    /// equality tests, in the path's atom order. `None` unless `like` has
    /// exactly one path and no set of several keys.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let mut t = DecisionTree::default();
    /// t.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert_eq!(t.key_width_of(0), Some(1));
    /// ```
    pub fn key_width_of(&self, like: u32) -> Option<usize> {
        self.filters.get(&like)?.template.as_ref().map(|t| t.width)
    }

    /// Add a filter equal to `like` but for the constants of its equality
    /// tests (MPF's collapsed filters: one walk down the tree, no
    /// compilation). False (nothing added) unless `key` has
    /// [`DecisionTree::key_width_of`] words.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let mut t = DecisionTree::default();
    /// t.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(t.insert_keyed(1, 0, vec![2].into(), 0));
    /// let mut out = Vec::new();
    /// t.classify(&[2], 1, &mut Default::default(), &mut out);
    /// assert_eq!(out, vec![1]);
    /// ```
    pub fn insert_keyed(&mut self, id: u32, like: u32, key: Arc<[u32]>, priority: i32) -> bool {
        let width = key.len();
        self.insert_key_block(id, like, width, key, priority)
    }

    /// Add `keys.len() / width` filters like `like` (ids from `first` on),
    /// the keys one after another in `keys`. False (nothing added) unless
    /// `width` is `like`'s key width and not zero.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let mut t = DecisionTree::default();
    /// t.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 1), 1)), 0);
    /// assert!(t.insert_key_block(1, 0, 1, vec![2, 3].into(), 0));
    /// assert_eq!(t.len(), 3);
    /// ```
    pub fn insert_key_block(
        &mut self,
        first: u32,
        like: u32,
        width: usize,
        keys: Arc<[u32]>,
        priority: i32,
    ) -> bool {
        let Some(template) = self.filters.get(&like).and_then(|i| i.template.clone()) else {
            return false;
        };
        if width == 0 || template.width != width || keys.len() % width != 0 {
            return false;
        }
        for (i, key) in keys.chunks_exact(width).enumerate() {
            let id = first + i as u32;
            if self.filters.contains_key(&id) {
                self.remove(id);
            }
            match &template.fast {
                Some((items, at)) => {
                    let slot = self.new_slot(id, priority);
                    let root = self.nodes.root();
                    let s = Subst {
                        at,
                        keys: key,
                        whole: keys.len() / width >= BLOCK_TABLE,
                    };
                    self.nodes
                        .insert_subst(&self.fields, root, items, s, Entry { slot, priority });
                    self.filters.insert(
                        id,
                        Info {
                            slot,
                            form: Form::Keyed(template.clone(), keys.clone(), (i * width) as u32),
                            template: Some(template.clone()),
                        },
                    );
                }
                None => {
                    let path = template.path.with_key(key);
                    let one = [path];
                    self.insert_paths(id, &one, &one, priority);
                }
            }
        }
        if template.fast.is_some() {
            let what = (1u8, first, like, keys.to_vec());
            self.log.record(what, flow::Logged::Keys(template, keys));
        }
        true
    }

    /// Remove a filter; unknown ids are ignored.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(4, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// t.remove(4);
    /// assert!(t.is_empty() && t.nodes().is_empty());
    /// ```
    pub fn remove(&mut self, id: u32) {
        let Some(info) = self.filters.remove(&id) else {
            return;
        };
        let root = self.nodes.root();
        match &info.form {
            Form::Paths(items) => {
                for p in items.iter() {
                    self.nodes.remove(&self.fields, root, p, info.slot);
                }
            }
            Form::Keyed(t, keys, at) => {
                let (items, pos) = t.fast.as_ref().expect("keyed filters have a fast template");
                let key = &keys[*at as usize..*at as usize + t.width];
                let s = Subst {
                    at: pos,
                    keys: key,
                    whole: false,
                };
                self.nodes
                    .remove_subst(&self.fields, root, items, s, info.slot);
            }
            Form::Whole => self.whole.retain(|w| w.filter != id),
        }
        self.renamed -= usize::from(self.ids[info.slot as usize] != info.slot);
        self.ids[info.slot as usize] = u32::MAX;
        self.free_slots.push(info.slot);
        self.log
            .record((2u8, id, info.slot), flow::Logged::Removed(info.slot));
    }

    /// The slots the tree finds for a packet (a filter may appear more
    /// than once), into `s.hits`.
    #[inline]
    fn tree_hits(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) {
        s.next_packet();
        let root = self.nodes.root();
        run::visit(
            &self.fields,
            &self.nodes,
            root,
            pkt,
            wirelen,
            &mut s.memo,
            &mut s.hits,
        );
    }

    /// Run the tree from node `n` only, adding the slots of the filters
    /// found below it to `slots` (for engines that run the rest of the
    /// tree themselves). Computed fields are read through `s`'s memo,
    /// which the caller resets per packet ([`Scratch::memo`]).
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut slots = Vec::new();
    /// t.visit_from(0, &[], 0, &mut Default::default(), &mut slots);
    /// assert_eq!(t.id_of(slots[0]), Some(9));
    /// ```
    pub fn visit_from(
        &self,
        n: node::NodeId,
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
        slots: &mut Vec<u32>,
    ) {
        run::visit(
            &self.fields,
            &self.nodes,
            n,
            pkt,
            wirelen,
            &mut s.memo,
            slots,
        );
    }

    /// Every filter that accepts the packet, as ids, each once, in no
    /// particular order (sorting them is the caller's choice: a
    /// demultiplexer has no use for it).
    ///
    /// ```
    /// let t = sluice_classifier::tree::DecisionTree::default();
    /// let mut out = vec![3];
    /// t.classify(&[], 0, &mut Default::default(), &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn classify(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch, out: &mut Vec<u32>) {
        out.clear();
        self.tree_hits(pkt, wirelen, s);
        let hits = std::mem::take(&mut s.hits);
        self.report(pkt, wirelen, &hits, s, out);
        s.hits = hits;
    }

    /// The filters of `slots` (found by running the tree, each perhaps more
    /// than once) and the accepting filters that run whole, as ids, each
    /// once, in no particular order, appended to `out`.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut out = Vec::new();
    /// t.report(&[], 0, &[0, 0], &mut Default::default(), &mut out);
    /// assert_eq!(out, vec![9]);
    /// ```
    pub fn report(
        &self,
        pkt: &[u8],
        wirelen: u32,
        slots: &[u32],
        s: &mut Scratch,
        out: &mut Vec<u32>,
    ) {
        match slots {
            [] => {}
            [one] => out.push(self.ids[*one as usize]),
            _ => {
                s.dedup.start(self.ids.len());
                for &slot in slots {
                    if s.dedup.first_time(slot) {
                        out.push(self.ids[slot as usize]);
                    }
                }
            }
        }
        self.report_whole(pkt, wirelen, out);
    }

    /// [`DecisionTree::report`] of slots that are already distinct (each
    /// filter found once): no deduplication.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut out = Vec::new();
    /// t.report_distinct(&[], 0, &[0], &mut out);
    /// assert_eq!(out, vec![9]);
    /// ```
    #[inline]
    pub fn report_distinct(&self, pkt: &[u8], wirelen: u32, slots: &[u32], out: &mut Vec<u32>) {
        let from = out.len();
        out.extend_from_slice(slots);
        self.ids_from(pkt, wirelen, out, from);
    }

    /// [`DecisionTree::report_distinct`] where the slots are already in
    /// `out` (each once, found by code that wrote them there): each becomes
    /// its filter's id in place, and the filters that run whole and accept
    /// the packet are appended. Saves the copy on every packet.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut out = vec![0];
    /// t.report_distinct_in_place(&[], 0, &mut out);
    /// assert_eq!(out, vec![9]);
    /// ```
    #[inline]
    pub fn report_distinct_in_place(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>) {
        self.ids_from(pkt, wirelen, out, 0);
    }

    /// The slots in `out` from `from` on become their filters' ids, and
    /// the filters that run whole and accept the packet are appended.
    #[inline]
    fn ids_from(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>, from: usize) {
        // While every used slot's filter has the slot's number as its id,
        // there is nothing to rename.
        if self.renamed != 0 {
            for s in &mut out[from..] {
                *s = self.ids[*s as usize];
            }
        }
        if !self.whole.is_empty() {
            self.report_whole(pkt, wirelen, out);
        }
    }

    /// Append the filters that run whole and accept the packet.
    fn report_whole(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>) {
        for w in &self.whole {
            if w.run(pkt, wirelen) != 0 {
                out.push(w.filter);
            }
        }
    }

    /// The single winner (demultiplexing): the accepting filter of highest
    /// priority, the earliest inserted (lowest id) among equals.
    ///
    /// ```
    /// let t = sluice_classifier::tree::DecisionTree::default();
    /// assert_eq!(t.classify_first(&[], 0, &mut Default::default()), None);
    /// ```
    pub fn classify_first(&self, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> Option<u32> {
        self.tree_hits(pkt, wirelen, s);
        self.report_first(pkt, wirelen, &s.hits)
    }

    /// The winner among the filters of `slots` (found by running the
    /// tree) and the filters that run whole.
    ///
    /// ```
    /// use sluice_classifier::tree::DecisionTree;
    /// use sluice_classifier::merged::Compiled;
    /// let mut t = DecisionTree::default();
    /// t.insert(9, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(t.report_first(&[], 0, &[0]), Some(9));
    /// ```
    pub fn report_first(&self, pkt: &[u8], wirelen: u32, slots: &[u32]) -> Option<u32> {
        winner(
            slots
                .iter()
                .map(|&s| (self.ids[s as usize], self.prios[s as usize])),
            self.whole
                .iter()
                .map(|w| (w.filter, w.priority, move || w.run(pkt, wirelen) != 0)),
        )
    }

    /// `out[i]` gets packet `i`'s filters, as [`DecisionTree::classify`].
    ///
    /// ```
    /// let t = sluice_classifier::tree::DecisionTree::default();
    /// let mut out = vec![Vec::new(); 2];
    /// t.classify_batch(&[(&[][..], 0), (&[1][..], 1)], &mut Default::default(), &mut out);
    /// assert!(out.iter().all(|o| o.is_empty()));
    /// ```
    pub fn classify_batch(&self, pkts: &[(&[u8], u32)], s: &mut Scratch, out: &mut [Vec<u32>]) {
        for ((pkt, wirelen), o) in pkts.iter().zip(out.iter_mut()) {
            self.classify(pkt, *wirelen, s, o);
        }
    }
}

/// The single winner among the filters found, as `(id, priority)`, and
/// the filters that run whole, as `(id, priority, accepts)` in winning
/// order: the highest priority, the lowest id among equals. A filter that
/// runs whole is run only while it could still win: the first that
/// accepts is the best of them, and once one ranks below the winner so
/// far none after it can win.
pub(crate) fn winner<W: FnOnce() -> bool>(
    found: impl Iterator<Item = (u32, i32)>,
    whole: impl Iterator<Item = (u32, i32, W)>,
) -> Option<u32> {
    let rank = |filter: u32, priority: i32| (priority, std::cmp::Reverse(filter));
    let mut best = found.map(|(f, p)| rank(f, p)).max();
    for (filter, priority, accepts) in whole {
        let r = rank(filter, priority);
        if best.is_some_and(|b| r < b) {
            break;
        }
        if accepts() {
            best = Some(r);
            break;
        }
    }
    best.map(|(_, std::cmp::Reverse(f))| f)
}

#[cfg(test)]
mod tests;
