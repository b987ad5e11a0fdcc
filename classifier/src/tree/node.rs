//! The tree's nodes, and how a path goes in and comes out.
//!
//! A path is a list of [`Item`]s, one per field it tests, in field order
//! ([`Fields::order`]). A node tests one field, its smallest; the paths
//! that reach it go on by one of three edges:
//!
//! - **tables** ([`Tuple`]): paths whose next labels are equalities go on
//!   by the value of the field, or of the field and the ones after it
//!   that all those paths also test for equality (a tuple: a TCP session
//!   is one key of six fields). One lookup answers every path of the
//!   table, whatever its number;
//! - **conditions**: paths with a range, excluded values or flag bits on
//!   the field, one edge per distinct condition;
//! - **skip**: paths that do not test the field go on to the next node,
//!   which tests a later field.
//!
//! A path ends at the node where its items run out: the node's *leaf*
//! lists the filters accepted there. Paths that share their first tests
//! share the nodes that make them, so every test is made once per packet
//! however many filters need it, and a filter is looked at only after the
//! tests before it have passed.
//!
//! A node's tables all start with its field. A path goes into the longest
//! table whose fields begin its run of equalities; failing that, a small
//! table with a shorter common prefix is split at it (its keys move down
//! one level), and a large one is left alone beside a new table for the
//! path (one more lookup per packet instead of moving every key: tuple
//! space search, for the rare path that breaks up a large uniform set).
//! A large block of key-only copies of one filter goes into a table of its
//! whole run instead ([`Subst::whole`]), so each copy is one key.
//!
//! ```
//! use sluice_classifier::tree::node::{Entry, Item, Nodes};
//! use sluice_classifier::tree::field::Fields;
//! use sluice_classifier::tree::label::Label;
//! use sluice_ir::{Size, Val};
//! let mut f = Fields::default();
//! let a = f.intern_val(&Val::load_abs(0, Size::Byte));
//! let mut nodes = Nodes::default();
//! let root = nodes.root();
//! nodes.insert(&f, root, &[Item { field: a, label: Label::Eq(vec![1, 2]) }], Entry { slot: 0, priority: 0 });
//! assert_eq!(nodes.len(), 3); // the root and one node per key
//! nodes.remove(&f, root, &[Item { field: a, label: Label::Eq(vec![1, 2]) }], 0);
//! assert_eq!(nodes.len(), 1);
//! ```

use super::field::{FieldId, Fields};
use super::label::{Cond, Label};
use crate::table::KeyTable;

/// Index of a node.
pub type NodeId = u32;

/// No node.
pub const NONE: NodeId = u32::MAX;

/// The most fields one table is keyed by.
pub const MAX_TUPLE: usize = 12;

/// The most keys one path puts in one table (the product of its sets'
/// sizes; each key carries a copy of the rest of the path); the run of
/// equalities is cut before a set that would exceed it.
pub const MAX_EXPANSION: usize = 64;

/// Tables with at most this many keys are split when a path shares only
/// a prefix of their fields; larger ones get a table beside them.
pub const SPLIT_MAX: usize = 4096;

/// A filter at a leaf: its dense slot and its priority.
///
/// ```
/// let e = sluice_classifier::tree::node::Entry { slot: 3, priority: -1 };
/// assert_eq!(e.slot, 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Entry {
    /// The filter's slot in the tree.
    pub slot: u32,
    /// Its priority (higher wins a first match).
    pub priority: i32,
}

/// What a path asks of one field.
///
/// ```
/// let i = sluice_classifier::tree::node::Item { field: 0, label: sluice_classifier::tree::label::Label::Eq(vec![1]) };
/// assert_eq!(i.field, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Item {
    /// The field.
    pub field: FieldId,
    /// What its value must be.
    pub label: Label,
}

/// A table keyed by the values of some fields: key → child node.
///
/// ```
/// let t = sluice_classifier::tree::node::Tuple::new(vec![0, 1]);
/// assert_eq!(t.table.width(), 2);
/// ```
#[derive(Clone, Debug)]
pub struct Tuple {
    /// The fields, in field order; the first is the node's.
    pub fields: Vec<FieldId>,
    /// Their values → child node + 1, with the child's [`summary`] as
    /// the datum.
    pub table: KeyTable,
}

impl Tuple {
    /// An empty table keyed by `fields`.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::node::Tuple::new(vec![4]).table.is_empty());
    /// ```
    pub fn new(fields: Vec<FieldId>) -> Tuple {
        Tuple {
            table: KeyTable::new(fields.len()),
            fields,
        }
    }

    /// The child of a key.
    ///
    /// ```
    /// let mut t = sluice_classifier::tree::node::Tuple::new(vec![4]);
    /// t.table.insert(&[7], 3);
    /// assert_eq!(t.child(&[7]), Some(2));
    /// ```
    #[inline]
    pub fn child(&self, key: &[u32]) -> Option<NodeId> {
        self.table.get(key).map(|v| v - 1)
    }
}

/// One node (see the module doc).
///
/// ```
/// let n = sluice_classifier::tree::node::Node::default();
/// assert!(n.field.is_none() && n.skip == sluice_classifier::tree::node::NONE);
/// ```
#[derive(Clone, Debug)]
pub struct Node {
    /// The field the node tests (`None` for a node that only accepts).
    pub field: Option<FieldId>,
    /// Tables on the field (and the fields after it).
    pub tuples: Vec<Tuple>,
    /// Condition edges on the field.
    pub conds: Vec<(Cond, NodeId)>,
    /// Where the paths that do not test the field go on.
    pub skip: NodeId,
    /// Filters accepted on reaching this node.
    pub leaf: Vec<Entry>,
}

impl Default for Node {
    fn default() -> Node {
        Node {
            field: None,
            tuples: Vec::new(),
            conds: Vec::new(),
            skip: NONE,
            leaf: Vec::new(),
        }
    }
}

impl Node {
    fn is_empty(&self) -> bool {
        self.field.is_none() && self.skip == NONE && self.leaf.is_empty()
    }
}

/// What a table says of a child beside its id: `slot + 1` when the child
/// only accepts one filter (it tests nothing more), else 0. Code that
/// probes a table reports such a child's filter without visiting it.
///
/// ```
/// use sluice_classifier::tree::node::{summary, Entry, Node};
/// let mut n = Node::default();
/// n.leaf.push(Entry { slot: 4, priority: 0 });
/// assert_eq!(summary(&n), 5);
/// n.field = Some(0);
/// assert_eq!(summary(&n), 0);
/// ```
pub fn summary(n: &Node) -> u32 {
    match n.leaf.as_slice() {
        [e] if n.field.is_none() && n.skip == NONE => e.slot + 1,
        _ => 0,
    }
}

/// `a == b`, the cheap parts first: a node's conditions are scanned for
/// every path put or taken below it, and most differ in a bound or a
/// length.
fn same(a: &Cond, b: &Cond) -> bool {
    // Element by element: the lists are short, mostly empty, and a
    // library compare call for each would cost more than the loop.
    a.lo == b.lo
        && a.hi == b.hi
        && a.none == b.none
        && a.ne.iter().eq(b.ne.iter())
        && a.any.iter().eq(b.any.iter())
        && a.not_in == b.not_in
        && a.is_in == b.is_in
}

/// The nodes of a tree, node 0 its root.
///
/// ```
/// let n = sluice_classifier::tree::node::Nodes::default();
/// assert_eq!(n.len(), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Nodes {
    nodes: Vec<Node>,
    free: Vec<NodeId>,
    /// When set, the nodes whose content changed since the last
    /// [`Nodes::take_changed`] (with repeats), for code generators that
    /// rebuild only what changed.
    changed: Option<Vec<NodeId>>,
}

impl Default for Nodes {
    fn default() -> Nodes {
        Nodes {
            nodes: vec![Node::default()],
            free: Vec::new(),
            changed: None,
        }
    }
}

/// A path's keys with some replaced: the key-only inserts' way of
/// reusing another filter's path with its own constants.
///
/// ```
/// let s = sluice_classifier::tree::node::Subst { at: &[1], keys: &[80], whole: false };
/// assert_eq!(s.key(1), Some(80));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Subst<'a> {
    /// Indexes of the items whose key is replaced (ascending).
    pub at: &'a [usize],
    /// Their keys.
    pub keys: &'a [u32],
    /// Put each run of equalities into a table of the whole run, made
    /// beside a shorter table that begins it if need be: for a large block
    /// of copies of one filter, so that each copy is one key and one leaf
    /// (reported from the table's datum, no code of its own) instead of a
    /// subtree below a shared shorter table.
    pub whole: bool,
}

impl Subst<'_> {
    /// The key replacing item `i`'s, if any.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::node::Subst::default().key(0), None);
    /// ```
    #[inline]
    pub fn key(&self, i: usize) -> Option<u32> {
        self.at.iter().position(|&a| a == i).map(|j| self.keys[j])
    }
}

/// A path being walked: its items from `from` on, with substitutions.
#[derive(Clone, Copy)]
struct Walk<'a> {
    items: &'a [Item],
    from: usize,
    subst: Subst<'a>,
}

impl<'a> Walk<'a> {
    fn rest(&self) -> &'a [Item] {
        &self.items[self.from..]
    }

    fn skip(self, n: usize) -> Walk<'a> {
        Walk {
            from: self.from + n,
            ..self
        }
    }

    /// The keys of item `i` (relative to `from`), which must be an equality.
    fn keys(&self, i: usize) -> &'a [u32] {
        let at = self.from + i;
        if let Some(j) = self.subst.at.iter().position(|&a| a == at) {
            return std::slice::from_ref(&self.subst.keys[j]);
        }
        match &self.items[at].label {
            Label::Eq(k) => k,
            Label::Cond(_) => &[],
        }
    }

    /// The length of the run of equalities at the start, cut so that
    /// their keys multiply to at most [`MAX_EXPANSION`].
    fn eq_run(&self) -> usize {
        let mut n = 0;
        let mut product = 1usize;
        for (i, it) in self.rest().iter().enumerate().take(MAX_TUPLE) {
            if !matches!(it.label, Label::Eq(_)) {
                break;
            }
            product = product.saturating_mul(self.keys(i).len());
            if n > 0 && product > MAX_EXPANSION {
                break;
            }
            n += 1;
        }
        n
    }

    /// Every key of the first `w` items (the product of their sets).
    fn each_key(&self, w: usize, mut f: impl FnMut(&[u32])) {
        // One key (every set of one value, the usual case): no lists.
        if w <= MAX_TUPLE && (0..w).all(|i| self.keys(i).len() == 1) {
            let mut key = [0u32; MAX_TUPLE];
            for (i, k) in key.iter_mut().enumerate().take(w) {
                *k = self.keys(i)[0];
            }
            return f(&key[..w]);
        }
        let sets: Vec<&[u32]> = (0..w).map(|i| self.keys(i)).collect();
        let mut key: Vec<u32> = sets.iter().map(|s| s[0]).collect();
        let mut at = vec![0usize; w];
        loop {
            f(&key);
            let mut i = w;
            loop {
                if i == 0 {
                    return;
                }
                i -= 1;
                at[i] += 1;
                if at[i] < sets[i].len() {
                    key[i] = sets[i][at[i]];
                    break;
                }
                at[i] = 0;
                key[i] = sets[i][0];
            }
        }
    }
}

impl Nodes {
    /// The root.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::node::Nodes::default().root(), 0);
    /// ```
    pub fn root(&self) -> NodeId {
        0
    }

    /// Number of nodes in use.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::node::Nodes::default().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.nodes.len() - self.free.len()
    }

    /// True when only the root is there and it is empty.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::node::Nodes::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 1 && self.nodes[0].is_empty()
    }

    /// A node.
    ///
    /// ```
    /// let n = sluice_classifier::tree::node::Nodes::default();
    /// assert!(n.get(0).leaf.is_empty());
    /// ```
    #[inline]
    pub fn get(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    /// Every node slot, free ones (empty) included, by id.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::node::Nodes::default().all().len(), 1);
    /// ```
    pub fn all(&self) -> &[Node] {
        &self.nodes
    }

    /// Approximate bytes of memory the nodes and their tables take.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::node::Nodes::default().bytes() > 0);
    /// ```
    pub fn bytes(&self) -> usize {
        let node = std::mem::size_of::<Node>();
        self.nodes.capacity() * node
            + self
                .nodes
                .iter()
                .map(|n| {
                    n.tuples
                        .iter()
                        .map(|t| t.table.bytes() + t.fields.len() * 4 + 48)
                        .sum::<usize>()
                        + n.conds.capacity() * std::mem::size_of::<(Cond, NodeId)>()
                        + n.leaf.capacity() * std::mem::size_of::<Entry>()
                })
                .sum::<usize>()
    }

    /// Start (or stop) recording which nodes change.
    ///
    /// ```
    /// let mut n = sluice_classifier::tree::node::Nodes::default();
    /// n.track_changes(true);
    /// assert_eq!(n.take_changed(), Vec::<u32>::new());
    /// ```
    pub fn track_changes(&mut self, on: bool) {
        self.changed = on.then(Vec::new);
    }

    /// The nodes whose content changed since the last call (each once,
    /// ascending): created, released, or given another leaf, field,
    /// table, table key, condition or skip edge.
    ///
    /// ```
    /// use sluice_classifier::tree::node::{Entry, Nodes};
    /// let mut n = Nodes::default();
    /// n.track_changes(true);
    /// n.insert(&Default::default(), 0, &[], Entry { slot: 1, priority: 0 });
    /// assert_eq!(n.take_changed(), vec![0]);
    /// ```
    pub fn take_changed(&mut self) -> Vec<NodeId> {
        let mut v = self
            .changed
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Forget the changes recorded so far (another copy of the tree
    /// acted on the same changes).
    ///
    /// ```
    /// let mut n = sluice_classifier::tree::node::Nodes::default();
    /// n.track_changes(true);
    /// n.forget_changed();
    /// assert!(n.take_changed().is_empty());
    /// ```
    pub fn forget_changed(&mut self) {
        if let Some(c) = &mut self.changed {
            c.clear();
        }
    }

    #[inline]
    fn touch(&mut self, id: NodeId) {
        if let Some(c) = &mut self.changed {
            c.push(id);
        }
    }

    fn alloc(&mut self) -> NodeId {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                self.nodes.push(Node::default());
                (self.nodes.len() - 1) as NodeId
            }
        };
        self.touch(id);
        id
    }

    fn release(&mut self, id: NodeId) {
        self.nodes[id as usize] = Node::default();
        self.free.push(id);
        self.touch(id);
    }

    /// Add a path's entry below node `n`.
    ///
    /// ```
    /// use sluice_classifier::tree::node::{Entry, Nodes};
    /// let mut n = Nodes::default();
    /// n.insert(&Default::default(), 0, &[], Entry { slot: 1, priority: 0 });
    /// assert_eq!(n.get(0).leaf.len(), 1);
    /// ```
    pub fn insert(&mut self, f: &Fields, n: NodeId, items: &[Item], e: Entry) {
        self.insert_subst(f, n, items, Subst::default(), e);
    }

    /// [`Nodes::insert`] with some equality keys replaced.
    ///
    /// ```
    /// use sluice_classifier::tree::node::{Entry, Item, Nodes, Subst};
    /// use sluice_classifier::tree::label::Label;
    /// let mut f = sluice_classifier::tree::field::Fields::default();
    /// let a = f.intern_val(&sluice_ir::Val::Len);
    /// let mut n = Nodes::default();
    /// let path = [Item { field: a, label: Label::Eq(vec![60]) }];
    /// n.insert_subst(&f, 0, &path, Subst { at: &[0], keys: &[64], whole: false }, Entry { slot: 1, priority: 0 });
    /// assert_eq!(n.get(0).tuples[0].child(&[64]), Some(1));
    /// ```
    pub fn insert_subst(&mut self, f: &Fields, n: NodeId, items: &[Item], s: Subst<'_>, e: Entry) {
        self.put(
            f,
            n,
            Walk {
                items,
                from: 0,
                subst: s,
            },
            e,
        );
    }

    fn put(&mut self, f: &Fields, mut n: NodeId, w: Walk<'_>, e: Entry) {
        loop {
            let Some(first) = w.rest().first() else {
                let leaf = &mut self.nodes[n as usize].leaf;
                if !leaf.contains(&e) {
                    leaf.push(e);
                    self.touch(n);
                }
                return;
            };
            let g = first.field;
            match self.nodes[n as usize].field {
                None => {
                    self.nodes[n as usize].field = Some(g);
                    self.touch(n);
                }
                Some(x) if f.before(g, x) => self.push_down(n, g),
                Some(x) if f.before(x, g) => {
                    n = self.skip_of(n);
                    continue;
                }
                Some(_) => {}
            }
            match &first.label {
                Label::Cond(c) => {
                    let child = self.cond_child(n, c);
                    return self.put(f, child, w.skip(1), e);
                }
                Label::Eq(_) => return self.put_eq(f, n, w, e),
            }
        }
    }

    fn put_eq(&mut self, f: &Fields, n: NodeId, w: Walk<'_>, e: Entry) {
        let run = w.eq_run();
        let mut fields = [0 as FieldId; MAX_TUPLE];
        for (f, i) in fields.iter_mut().zip(&w.rest()[..run]) {
            *f = i.field;
        }
        let t = self.choose_tuple(n, &fields[..run], w.subst.whole);
        let width = self.nodes[n as usize].tuples[t].fields.len();
        let mut children: Vec<(Vec<u32>, NodeId)> = Vec::new();
        let mut one: Option<([u32; MAX_TUPLE], NodeId)> = None;
        w.each_key(width, |key| {
            let tuple = &self.nodes[n as usize].tuples[t];
            let child = match tuple.child(key) {
                Some(c) => c,
                None => {
                    let c = self.alloc();
                    self.nodes[n as usize].tuples[t].table.insert(key, c + 1);
                    self.touch(n);
                    c
                }
            };
            match (&one, children.is_empty()) {
                (None, true) => {
                    let mut k = [0u32; MAX_TUPLE];
                    k[..key.len()].copy_from_slice(key);
                    one = Some((k, child));
                }
                _ => children.push((key.to_vec(), child)),
            }
        });
        if let Some((key, c)) = one {
            self.put(f, c, w.skip(width), e);
            self.resummarise(n, t, &key[..width], c);
        }
        for (key, c) in children {
            self.put(f, c, w.skip(width), e);
            self.resummarise(n, t, &key, c);
        }
    }

    /// Store a child's [`summary`] in its parent's table.
    fn resummarise(&mut self, n: NodeId, t: usize, key: &[u32], child: NodeId) {
        let s = summary(&self.nodes[child as usize]);
        self.nodes[n as usize].tuples[t]
            .table
            .insert_with(key, child + 1, s);
    }

    /// The table a run of equalities on `fields` goes into (see the module doc).
    fn choose_tuple(&mut self, n: NodeId, fields: &[FieldId], whole: bool) -> usize {
        let node = &self.nodes[n as usize];
        let prefix = node
            .tuples
            .iter()
            .enumerate()
            .filter(|(_, t)| {
                t.fields.len() <= fields.len() && t.fields[..] == fields[..t.fields.len()]
            })
            .max_by_key(|(_, t)| t.fields.len());
        match prefix {
            Some((i, t)) if !whole || t.fields.len() == fields.len() => return i,
            _ if whole => {
                self.touch(n);
                let node = &mut self.nodes[n as usize];
                node.tuples.push(Tuple::new(fields.to_vec()));
                return node.tuples.len() - 1;
            }
            _ => {}
        }
        let common = |t: &Tuple| {
            t.fields
                .iter()
                .zip(fields)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let best = node
            .tuples
            .iter()
            .enumerate()
            .filter(|(_, t)| t.table.len() <= SPLIT_MAX)
            .max_by_key(|(_, t)| common(t))
            .map(|(i, t)| (i, common(t)));
        if let Some((i, j)) = best {
            self.split(n, i, j);
            return i;
        }
        self.touch(n);
        let node = &mut self.nodes[n as usize];
        node.tuples.push(Tuple::new(fields.to_vec()));
        node.tuples.len() - 1
    }

    /// Cut table `t` of node `n` after its first `j` fields: each distinct
    /// prefix gets a child keyed by the rest.
    fn split(&mut self, n: NodeId, t: usize, j: usize) {
        let old = std::mem::replace(
            &mut self.nodes[n as usize].tuples[t],
            Tuple::new(Vec::new()),
        );
        let mut top = Tuple::new(old.fields[..j].to_vec());
        let rest = old.fields[j..].to_vec();
        for (key, v, datum) in old.table.entries() {
            let child = match top.child(&key[..j]) {
                Some(c) => c,
                None => {
                    let c = self.alloc();
                    let node = &mut self.nodes[c as usize];
                    node.field = Some(rest[0]);
                    node.tuples.push(Tuple::new(rest.clone()));
                    top.table.insert(&key[..j], c + 1);
                    c
                }
            };
            self.nodes[child as usize].tuples[0]
                .table
                .insert_with(&key[j..], v, datum);
        }
        self.nodes[n as usize].tuples[t] = top;
        self.touch(n);
    }

    /// Node `n` comes to test `g`, before its field: what it tested moves
    /// to a new node behind its skip edge (its leaf stays).
    fn push_down(&mut self, n: NodeId, g: FieldId) {
        let m = self.alloc();
        let node = &mut self.nodes[n as usize];
        let moved = Node {
            field: node.field.take(),
            tuples: std::mem::take(&mut node.tuples),
            conds: std::mem::take(&mut node.conds),
            skip: node.skip,
            leaf: Vec::new(),
        };
        node.field = Some(g);
        node.skip = m;
        self.nodes[m as usize] = moved;
        self.touch(n);
    }

    fn skip_of(&mut self, n: NodeId) -> NodeId {
        match self.nodes[n as usize].skip {
            NONE => {
                let m = self.alloc();
                self.nodes[n as usize].skip = m;
                self.touch(n);
                m
            }
            m => m,
        }
    }

    fn cond_child(&mut self, n: NodeId, c: &Cond) -> NodeId {
        if let Some((_, child)) = self.nodes[n as usize]
            .conds
            .iter()
            .find(|(x, _)| same(x, c))
        {
            return *child;
        }
        let child = self.alloc();
        self.nodes[n as usize].conds.push((c.clone(), child));
        self.touch(n);
        child
    }

    /// Remove the entries of slot `slot` that a path put below node `n`.
    /// True when node `n` is left empty (for a node other than the root,
    /// its parent then drops it).
    ///
    /// ```
    /// use sluice_classifier::tree::node::{Entry, Nodes};
    /// let mut n = Nodes::default();
    /// n.insert(&Default::default(), 0, &[], Entry { slot: 1, priority: 0 });
    /// assert!(n.remove(&Default::default(), 0, &[], 1));
    /// ```
    pub fn remove(&mut self, f: &Fields, n: NodeId, items: &[Item], slot: u32) -> bool {
        self.remove_subst(f, n, items, Subst::default(), slot)
    }

    /// [`Nodes::remove`] of a path inserted with [`Nodes::insert_subst`].
    ///
    /// ```
    /// use sluice_classifier::tree::node::{Entry, Nodes, Subst};
    /// let mut n = Nodes::default();
    /// assert!(n.remove_subst(&Default::default(), 0, &[], Subst::default(), 1));
    /// ```
    pub fn remove_subst(
        &mut self,
        f: &Fields,
        n: NodeId,
        items: &[Item],
        s: Subst<'_>,
        slot: u32,
    ) -> bool {
        self.take(
            f,
            n,
            Walk {
                items,
                from: 0,
                subst: s,
            },
            slot,
        )
    }

    fn take(&mut self, f: &Fields, n: NodeId, w: Walk<'_>, slot: u32) -> bool {
        match w.rest().first() {
            None => {
                let leaf = &mut self.nodes[n as usize].leaf;
                let before = leaf.len();
                leaf.retain(|e| e.slot != slot);
                if leaf.len() != before {
                    self.touch(n);
                }
            }
            Some(first) => {
                let g = first.field;
                match self.nodes[n as usize].field {
                    Some(x) if f.before(x, g) => {
                        let k = self.nodes[n as usize].skip;
                        if k != NONE && self.take(f, k, w, slot) {
                            self.release(k);
                            self.nodes[n as usize].skip = NONE;
                            self.touch(n);
                        }
                    }
                    Some(x) if x == g => match &first.label {
                        Label::Cond(c) => {
                            let node = &self.nodes[n as usize];
                            if let Some(i) = node.conds.iter().position(|(x, _)| same(x, c)) {
                                let child = node.conds[i].1;
                                if self.take(f, child, w.skip(1), slot) {
                                    self.release(child);
                                    self.nodes[n as usize].conds.remove(i);
                                    self.touch(n);
                                }
                            }
                        }
                        Label::Eq(_) => self.take_eq(f, n, w, slot),
                    },
                    _ => {}
                }
            }
        }
        self.tidy(n);
        self.nodes[n as usize].is_empty()
    }

    fn take_eq(&mut self, f: &Fields, n: NodeId, w: Walk<'_>, slot: u32) {
        let run = w.eq_run();
        let fields: Vec<FieldId> = w.rest()[..run].iter().map(|i| i.field).collect();
        // The path is in one of the tables that begin its run (splits
        // keep that true); look in each, longest first.
        let mut widths: Vec<Vec<FieldId>> = self.nodes[n as usize]
            .tuples
            .iter()
            .filter(|t| t.fields.len() <= run && t.fields[..] == fields[..t.fields.len()])
            .map(|t| t.fields.clone())
            .collect();
        widths.sort_by_key(|t| std::cmp::Reverse(t.len()));
        for tf in widths {
            let width = tf.len();
            let mut keys = Vec::new();
            w.each_key(width, |k| keys.push(k.to_vec()));
            for key in keys {
                let Some(t) = self.nodes[n as usize]
                    .tuples
                    .iter()
                    .position(|t| t.fields == tf)
                else {
                    break;
                };
                let Some(child) = self.nodes[n as usize].tuples[t].child(&key) else {
                    continue;
                };
                if self.take(f, child, w.skip(width), slot) {
                    self.release(child);
                    self.touch(n);
                    let node = &mut self.nodes[n as usize];
                    node.tuples[t].table.remove(&key);
                    if node.tuples[t].table.is_empty() {
                        node.tuples.remove(t);
                    }
                } else {
                    self.resummarise(n, t, &key, child);
                }
            }
        }
    }

    /// A node with nothing left to test takes over what its skip edge led
    /// to (which has no leaf of its own: paths end at nodes reached by a
    /// table or condition edge, or at the root).
    fn tidy(&mut self, n: NodeId) {
        let node = &mut self.nodes[n as usize];
        if !node.tuples.is_empty() || !node.conds.is_empty() {
            return;
        }
        if node.field.take().is_some() {
            self.touch(n);
        }
        let k = self.nodes[n as usize].skip;
        if k == NONE {
            return;
        }
        self.touch(n);
        let next = std::mem::take(&mut self.nodes[k as usize]);
        debug_assert!(next.leaf.is_empty());
        let node = &mut self.nodes[n as usize];
        node.field = next.field;
        node.tuples = next.tuples;
        node.conds = next.conds;
        node.skip = next.skip;
        self.release(k);
    }
}
