//! A filter as a set of accepting paths, each a conjunction of atoms.
//!
//! A filter's predicate becomes a decision DAG (tests with a true and a
//! false successor, accept and reject leaves). Evaluating the filter walks
//! exactly one path through it. So the filter accepts a packet exactly when
//! some accepting path has every atom *hold* on it, where an atom holds when
//! its value loads without aborting and its test comes out as the path says.
//! This is exact, aborts included, and it does not depend on the order the
//! atoms are checked in, which is what lets many filters share their tests.
//!
//! A conjunction's paths are the combinations of its parts' paths, and a
//! disjunction's are its parts' side by side where no part can abort
//! when a later one holds; anything else is enumerated depth first with
//! the facts known along the path: a test decided by earlier atoms on the
//! same value is followed without a new atom (its load is the same load,
//! so it cannot abort on its own), and contradictory paths disappear.
//! Filters with too many paths are not split up; the classifier runs them
//! as whole programs.
//!
//! ```
//! use sluice_ir::{Pred, Val, Size};
//! use sluice_classifier::path::paths;
//! let eth = Val::load_abs(12, Size::Half);
//! let p = Pred::and(vec![Pred::eq(eth.clone(), 0x800), Pred::not(Pred::eq(eth, 0x86dd))]);
//! let ps = paths(&p, 1).unwrap();
//! assert_eq!(ps.len(), 1);
//! assert_eq!(ps[0].atoms.len(), 1); // the second test is decided by the first
//! ```

use sluice_ir::branch::Branches;
use sluice_ir::{CmpOp, Pred, Val};
use std::sync::Arc;

/// What an atom tests about its value.
///
/// ```
/// use sluice_classifier::path::Test;
/// assert!(Test::Eq(5).apply(5));
/// assert!(Test::Set(4).apply(6));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Test {
    /// `v == k`.
    Eq(u32),
    /// `v > k`.
    Gt(u32),
    /// `v >= k`.
    Ge(u32),
    /// `v & k != 0`.
    Set(u32),
    /// `v` is one of the keys.
    In(KeySet),
}

/// A set of keys: sorted (for comparing and expanding) and hashed (for a
/// membership test that costs one probe however large the set).
///
/// ```
/// let s = sluice_classifier::path::KeySet::new(vec![5, 1, 9].into());
/// assert!(s.contains(9) && !s.contains(2));
/// assert_eq!(&s.sorted()[..], &[1, 5, 9]);
/// ```
#[derive(Clone, Debug)]
pub struct KeySet {
    sorted: Arc<[u32]>,
    /// Open addressing, `u32::MAX` marks an empty slot (the key
    /// `u32::MAX` itself is remembered apart).
    slots: Arc<[u32]>,
    has_max: bool,
}

impl KeySet {
    /// A set of the keys (sorted and deduplicated here).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::path::KeySet::new(vec![2, 2].into()).sorted().len(), 1);
    /// ```
    pub fn new(keys: Arc<[u32]>) -> KeySet {
        let mut v = keys.to_vec();
        v.sort_unstable();
        v.dedup();
        let n = (v.len() * 2).next_power_of_two().max(8);
        let mut slots = vec![u32::MAX; n];
        let mut has_max = false;
        for &k in &v {
            if k == u32::MAX {
                has_max = true;
                continue;
            }
            let mut i = Self::home(k, n);
            while slots[i] != u32::MAX {
                i = (i + 1) & (n - 1);
            }
            slots[i] = k;
        }
        KeySet {
            sorted: v.into(),
            slots: slots.into(),
            has_max,
        }
    }

    #[inline]
    fn home(k: u32, n: usize) -> usize {
        ((k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize & (n - 1)
    }

    /// Is `k` in the set?
    ///
    /// ```
    /// assert!(sluice_classifier::path::KeySet::new(vec![u32::MAX].into()).contains(u32::MAX));
    /// ```
    #[inline]
    pub fn contains(&self, k: u32) -> bool {
        if k == u32::MAX {
            return self.has_max;
        }
        let n = self.slots.len();
        let mut i = Self::home(k, n);
        loop {
            match self.slots[i] {
                x if x == k => return true,
                u32::MAX => return false,
                _ => i = (i + 1) & (n - 1),
            }
        }
    }

    /// The keys, ascending.
    ///
    /// ```
    /// assert!(sluice_classifier::path::KeySet::new(vec![].into()).sorted().is_empty());
    /// ```
    pub fn sorted(&self) -> &Arc<[u32]> {
        &self.sorted
    }
}

impl PartialEq for KeySet {
    fn eq(&self, other: &KeySet) -> bool {
        // Copies of one filter share their sets: no need to compare keys.
        Arc::ptr_eq(&self.sorted, &other.sorted) || self.sorted == other.sorted
    }
}

impl Eq for KeySet {}

impl std::hash::Hash for KeySet {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.sorted.hash(h)
    }
}

impl PartialOrd for KeySet {
    fn partial_cmp(&self, other: &KeySet) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for KeySet {
    fn cmp(&self, other: &KeySet) -> std::cmp::Ordering {
        self.sorted.cmp(&other.sorted)
    }
}

impl Test {
    /// The test's outcome for a known value.
    ///
    /// ```
    /// assert!(!sluice_classifier::path::Test::Gt(5).apply(5));
    /// ```
    pub fn apply(&self, v: u32) -> bool {
        match self {
            Test::Eq(k) => v == *k,
            Test::Gt(k) => v > *k,
            Test::Ge(k) => v >= *k,
            Test::Set(k) => v & k != 0,
            Test::In(keys) => keys.contains(v),
        }
    }
}

/// One condition of a path.
///
/// ```
/// use sluice_classifier::path::{Atom, Test};
/// let a = Atom::Field { val: sluice_ir::Val::Len, test: Test::Eq(60), truth: false };
/// assert!(matches!(a, Atom::Field { truth: false, .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// `test(val) == truth`, the value loading without an abort.
    Field {
        /// The value tested.
        val: Val,
        /// The test.
        test: Test,
        /// The outcome the path needs.
        truth: bool,
    },
    /// A test with a computed right side or a `protochain`: evaluated as a
    /// predicate, it must give `truth` without aborting.
    Pred {
        /// The predicate (a comparison or a protochain).
        pred: Pred,
        /// The outcome the path needs.
        truth: bool,
    },
}

impl Atom {
    /// The atom that only asks `val` to load without aborting.
    ///
    /// ```
    /// use sluice_classifier::path::Atom;
    /// let a = Atom::load_only(sluice_ir::Val::load_abs(20, sluice_ir::Size::Byte));
    /// assert!(a.is_load_only() && a.holds(&[0; 21], 21) && !a.holds(&[0; 20], 20));
    /// ```
    pub fn load_only(val: Val) -> Atom {
        Atom::Field {
            val,
            test: Test::Ge(0),
            truth: true,
        }
    }

    /// True for an atom made by [`Atom::load_only`].
    pub fn is_load_only(&self) -> bool {
        matches!(
            self,
            Atom::Field {
                test: Test::Ge(0),
                truth: true,
                ..
            }
        )
    }

    /// Does the atom hold on the packet?
    ///
    /// ```
    /// use sluice_classifier::path::{Atom, Test};
    /// let a = Atom::Field { val: sluice_ir::Val::Len, test: Test::Eq(60), truth: true };
    /// assert!(a.holds(&[], 60));
    /// ```
    pub fn holds(&self, pkt: &[u8], wirelen: u32) -> bool {
        match self {
            Atom::Field { val, test, truth } => {
                matches!(sluice_ir::eval_val(val, pkt, wirelen), Ok(v) if test.apply(v) == *truth)
            }
            Atom::Pred { pred, truth } => {
                matches!(sluice_ir::eval_pred(pred, pkt, wirelen), Ok(b) if b == *truth)
            }
        }
    }
}

/// An accepting path: every atom must hold; the filter then returns `accept`.
///
/// ```
/// let p = sluice_classifier::path::Path { atoms: vec![], accept: 1 };
/// assert!(p.atoms.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Path {
    /// The conditions, sorted (a canonical order, so equal paths compare equal).
    pub atoms: Vec<Atom>,
    /// The filter's return value on this path (non-zero).
    pub accept: u32,
}

impl Path {
    /// The atoms less the load-only ones (`Ge(0)`) that another atom's
    /// load covers: a load at or past the same end behind the same base
    /// succeeds only when theirs does. A load-only atom that stays is
    /// read as the one byte at its end, so that the same check in other
    /// paths and filters is the same field. The path means the same.
    ///
    /// ```
    /// use sluice_classifier::path::{Atom, Path, Test};
    /// use sluice_ir::{Size, Val};
    /// let only = |o, s| Atom::load_only(Val::load_abs(o, s));
    /// let p = Path {
    ///     atoms: vec![
    ///         only(3, Size::Half),
    ///         only(40, Size::Half),
    ///         Atom::Field { val: Val::load_abs(30, Size::Word), test: Test::Eq(7), truth: false },
    ///     ],
    ///     accept: 1,
    /// };
    /// let fewer = p.covered_loads_dropped();
    /// assert_eq!(fewer.len(), 2);
    /// assert!(fewer.contains(&only(41, Size::Byte)));
    /// ```
    pub fn covered_loads_dropped(&self) -> Vec<Atom> {
        // (base, end) of each plain or masked load, a constant base folded
        // into the end.
        let spans: Vec<Option<(Option<&Val>, u64)>> = self
            .atoms
            .iter()
            .map(|a| match a {
                Atom::Field { val, .. } => load_span(val).map(|(base, end)| match base {
                    Val::Const(c) => (None, *c as u64 + end),
                    b => (Some(b), end),
                }),
                Atom::Pred { .. } => None,
            })
            .collect();
        let mut out = Vec::with_capacity(self.atoms.len());
        for (i, a) in self.atoms.iter().enumerate() {
            let (true, Some((base, end))) = (a.is_load_only(), spans[i]) else {
                out.push(a.clone());
                continue;
            };
            let covered = spans.iter().enumerate().any(|(j, s)| {
                j != i
                    && matches!(s, Some((b, e)) if *b == base
                        && (*e > end || (*e == end && (!self.atoms[j].is_load_only() || j < i))))
            });
            if covered {
                continue;
            }
            let last = u32::try_from(end - 1).ok().map(|o| match base {
                None => Val::load_abs(o, sluice_ir::Size::Byte),
                Some(b) => Val::load(b.clone(), o, sluice_ir::Size::Byte),
            });
            out.push(last.map_or_else(|| a.clone(), Atom::load_only));
        }
        out
    }

    /// The constants of the path's equality tests, in atom order: the key
    /// of a key-only copy of its filter.
    ///
    /// ```
    /// use sluice_classifier::path::{Atom, Path, Test};
    /// let eq = |k| Atom::Field { val: sluice_ir::Val::Len, test: Test::Eq(k), truth: true };
    /// let p = Path { atoms: vec![eq(60)], accept: 1 };
    /// assert_eq!(p.key(), vec![60]);
    /// assert_eq!(p.with_key(&[64]).key(), vec![64]);
    /// ```
    pub fn key(&self) -> Vec<u32> {
        self.atoms
            .iter()
            .filter_map(|a| match a {
                Atom::Field {
                    test: Test::Eq(k),
                    truth: true,
                    ..
                } => Some(*k),
                _ => None,
            })
            .collect()
    }

    /// The path with the constants of its equality tests replaced by
    /// `key`, in atom order (`key` has one word per equality; with all
    /// words 0, the path's shape).
    pub fn with_key(&self, key: &[u32]) -> Path {
        let mut next = key.iter();
        let atoms = self
            .atoms
            .iter()
            .map(|a| match a {
                Atom::Field {
                    val,
                    test: Test::Eq(_),
                    truth: true,
                } => Atom::Field {
                    val: val.clone(),
                    test: Test::Eq(*next.next().expect("one key word per equality")),
                    truth: true,
                },
                a => a.clone(),
            })
            .collect();
        Path {
            atoms,
            accept: self.accept,
        }
    }
}

/// Limits that keep path enumeration small; a filter over them is run whole.
pub const MAX_PATHS: usize = 256;
/// Longest path kept.
pub const MAX_ATOMS: usize = 64;
/// Work budget of one enumeration (DAG nodes visited).
pub const MAX_STEPS: usize = 1 << 16;

/// Why a filter has no path form.
///
/// ```
/// assert_eq!(sluice_classifier::path::TooComplex.to_string(), "too many paths to merge");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooComplex;

impl std::fmt::Display for TooComplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("too many paths to merge")
    }
}

/// The accepting paths of a predicate whose filter returns `accept`.
///
/// ```
/// use sluice_ir::Pred;
/// assert_eq!(sluice_classifier::path::paths(&Pred::False, 1).unwrap().len(), 0);
/// assert_eq!(sluice_classifier::path::paths(&Pred::True, 1).unwrap().len(), 1);
/// ```
pub fn paths(pred: &Pred, accept: u32) -> Result<Vec<Path>, TooComplex> {
    if accept == 0 {
        return Ok(Vec::new());
    }
    // Values computed once and reused (nested tunnels) would be copied
    // into every path: such filters run whole, as classic BPF.
    if pred.has_shared() {
        return Err(TooComplex);
    }
    match by_parts(pred, accept) {
        Ok(mut out) => {
            out.sort_by(|a, b| a.atoms.cmp(&b.atoms));
            out.dedup();
            Ok(out)
        }
        Err(TooComplex) => walked(pred, accept),
    }
}

/// The paths of a conjunction are every combination of its parts' paths;
/// the paths of a disjunction are its parts' paths side by side when no
/// part can abort where a later part holds (every load of an earlier
/// part is covered by a load each path of the later part makes), so that
/// the later part's paths need not carry the earlier parts' failure.
/// Anything else is walked whole.
fn by_parts(pred: &Pred, accept: u32) -> Result<Vec<Path>, TooComplex> {
    match pred {
        Pred::And(ps) => {
            let mut acc = vec![Path {
                atoms: Vec::new(),
                accept,
            }];
            for p in ps {
                let more = by_parts(p, accept)?;
                acc = combine(&acc, &more)?;
                if acc.is_empty() {
                    break;
                }
            }
            Ok(acc)
        }
        Pred::Or(ps) => {
            let parts = ps
                .iter()
                .map(|p| by_parts(p, accept))
                .collect::<Result<Vec<_>, _>>()?;
            let mut before: Vec<(&Val, u64)> = Vec::new();
            for (p, part) in ps.iter().zip(&parts) {
                let covered = part
                    .iter()
                    .all(|q| before.iter().all(|(b, e)| path_loads_past(q, b, *e)));
                if !covered || !pred_loads(p, &mut before) {
                    return walked(pred, accept);
                }
            }
            let out: Vec<Path> = parts.into_iter().flatten().collect();
            if out.len() > MAX_PATHS {
                return Err(TooComplex);
            }
            Ok(out)
        }
        p => walked(p, accept),
    }
}

/// Every path of `a` joined with every path of `b`, leaving out joins
/// whose atoms contradict each other.
fn combine(a: &[Path], b: &[Path]) -> Result<Vec<Path>, TooComplex> {
    let mut out = Vec::new();
    for p in a {
        for q in b {
            let mut atoms = p.atoms.clone();
            atoms.extend(q.atoms.iter().cloned());
            atoms.sort();
            atoms.dedup();
            if atoms.len() > MAX_ATOMS {
                return Err(TooComplex);
            }
            if contradictory(&atoms) {
                continue;
            }
            drop_decided(&mut atoms);
            if out.len() == MAX_PATHS {
                return Err(TooComplex);
            }
            out.push(Path {
                atoms,
                accept: p.accept,
            });
        }
    }
    Ok(out)
}

/// Leave out the atoms that an equality on the same value decides (they
/// load the same value, so they cannot abort on their own).
fn drop_decided(atoms: &mut Vec<Atom>) {
    let known: Vec<(Val, u32)> = atoms
        .iter()
        .filter_map(|a| match a {
            Atom::Field {
                val,
                test: Test::Eq(k),
                truth: true,
            } => Some((val.clone(), *k)),
            _ => None,
        })
        .collect();
    if known.is_empty() {
        return;
    }
    atoms.retain(|a| match a {
        Atom::Field {
            test: Test::Eq(_),
            truth: true,
            ..
        } => true,
        Atom::Field { val, .. } => !known.iter().any(|(v, _)| v == val),
        Atom::Pred { .. } => true,
    });
}

/// Two atoms on one value that no value meets together.
fn contradictory(atoms: &[Atom]) -> bool {
    atoms.iter().enumerate().any(|(i, a)| {
        atoms[i + 1..].iter().any(|b| match (a, b) {
            (
                Atom::Field { val, test, truth },
                Atom::Field {
                    val: v2,
                    test: t2,
                    truth: r2,
                },
            ) if val == v2 => match (test, truth, t2, r2) {
                (Test::Eq(k), true, t, r) | (t, r, Test::Eq(k), true) => t.apply(*k) != *r,
                _ => test == t2 && truth != r2,
            },
            (
                Atom::Pred { pred, truth },
                Atom::Pred {
                    pred: p2,
                    truth: r2,
                },
            ) => pred == p2 && truth != r2,
            _ => false,
        })
    })
}

/// `(base, end)` of a plain or masked load: it succeeds exactly when
/// `base + end` bytes are captured.
pub(crate) fn load_span(v: &Val) -> Option<(&Val, u64)> {
    let v = match v {
        Val::Bin(sluice_ir::BinOp::And, a, m) if m.is_const() => a.as_ref(),
        v => v,
    };
    match v {
        Val::Load { base, offset, size } => {
            Some((base.as_ref(), *offset as u64 + size.bytes() as u64))
        }
        _ => None,
    }
}

/// Record the loads evaluating `v` makes, as (base, end): the load
/// succeeds exactly when `base + end` bytes are captured. False when `v`
/// may abort otherwise (a division by a value that may be zero).
fn val_loads<'v>(v: &'v Val, out: &mut Vec<(&'v Val, u64)>) -> bool {
    match v {
        Val::Const(_) | Val::Len => true,
        Val::Load { base, offset, size } => {
            out.push((base, *offset as u64 + size.bytes() as u64));
            val_loads(base, out)
        }
        Val::Bin(op, a, b) => {
            let divides = matches!(op, sluice_ir::BinOp::Div | sluice_ir::BinOp::Mod)
                && !matches!(**b, Val::Const(c) if c != 0);
            !divides && val_loads(a, out) && val_loads(b, out)
        }
        Val::Neg(a) => val_loads(a, out),
        // (Filters with shared values are not split into paths: see
        // `paths`.)
        Val::Shared(s) => val_loads(s.val(), out),
    }
}

/// [`val_loads`] of every value a predicate may evaluate.
fn pred_loads<'p>(p: &'p Pred, out: &mut Vec<(&'p Val, u64)>) -> bool {
    match p {
        Pred::True | Pred::False => true,
        Pred::Cmp { lhs, rhs, .. } => val_loads(lhs, out) && val_loads(rhs, out),
        Pred::Not(q) => pred_loads(q, out),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().all(|q| pred_loads(q, out)),
        Pred::In { val, .. } => val_loads(val, out),
        Pred::ProtoChain { .. } => false,
    }
}

/// Does some atom of `q` load from `base` up to `end` or further (so `q`
/// cannot hold unless that many bytes are there)?
fn path_loads_past(q: &Path, base: &Val, end: u64) -> bool {
    q.atoms.iter().any(|a| {
        let mut loads = Vec::new();
        match a {
            Atom::Field { val, .. } => {
                val_loads(val, &mut loads);
            }
            Atom::Pred { pred, .. } => {
                pred_loads(pred, &mut loads);
            }
        }
        loads.iter().any(|(b, e)| *b == base && *e >= end)
    })
}

/// The paths of a predicate by walking its decision graph (every test's
/// outcome on the way kept).
fn walked(pred: &Pred, accept: u32) -> Result<Vec<Path>, TooComplex> {
    let mut dag = Dag::default();
    let entry = dag.lower(pred, ACCEPT, REJECT);
    let mut walk = Walk {
        dag: &dag,
        stack: Vec::new(),
        out: Vec::new(),
        steps: 0,
        accept,
    };
    walk.visit(entry)?;
    let mut out = walk.out;
    out.sort_by(|a, b| a.atoms.cmp(&b.atoms));
    out.dedup();
    Ok(out)
}

type NodeId = u32;
const REJECT: NodeId = 0;
const ACCEPT: NodeId = 1;

#[derive(Clone, Debug)]
enum Cond {
    Field(Val, Test),
    Pred(Pred),
}

#[derive(Clone, Debug)]
enum Node {
    Leaf,
    Test { cond: Cond, t: NodeId, f: NodeId },
}

#[derive(Default)]
struct Dag {
    nodes: Vec<Node>,
}

impl Dag {
    fn push(&mut self, n: Node) -> NodeId {
        if self.nodes.is_empty() {
            self.nodes = vec![Node::Leaf, Node::Leaf];
        }
        self.nodes.push(n);
        (self.nodes.len() - 1) as NodeId
    }

    fn node(&mut self, cond: Cond, t: NodeId, f: NodeId) -> NodeId {
        self.push(Node::Test { cond, t, f })
    }
}

/// Tests are the DAG's nodes; `and`, `or` and `not` are the IR's one walk
/// ([`sluice_ir::branch`]), as in the back ends.
impl Branches for Dag {
    type Target = NodeId;

    fn test(&mut self, p: &Pred, t: NodeId, f: NodeId) -> NodeId {
        match p {
            Pred::Cmp { op, lhs, rhs } => match rhs {
                Val::Const(k) => {
                    let test = match op {
                        CmpOp::Eq => Test::Eq(*k),
                        CmpOp::Gt => Test::Gt(*k),
                        CmpOp::Ge => Test::Ge(*k),
                        CmpOp::Set => Test::Set(*k),
                    };
                    self.node(Cond::Field(lhs.clone(), test), t, f)
                }
                _ => self.node(Cond::Pred(p.clone()), t, f),
            },
            Pred::In { val, keys } => self.node(
                Cond::Field(val.clone(), Test::In(KeySet::new(keys.clone()))),
                t,
                f,
            ),
            Pred::ProtoChain { .. } => self.node(Cond::Pred(p.clone()), t, f),
            // `and`, `or`, `not` and constants are the walk's.
            p => self.lower(p, t, f),
        }
    }
}

struct Walk<'a> {
    dag: &'a Dag,
    /// The atoms of the current path.
    stack: Vec<Atom>,
    out: Vec<Path>,
    steps: usize,
    accept: u32,
}

impl Walk<'_> {
    fn visit(&mut self, mut id: NodeId) -> Result<(), TooComplex> {
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(TooComplex);
            }
            let Some(Node::Test { cond, t, f }) = self.dag.nodes.get(id as usize) else {
                if id == ACCEPT {
                    if self.out.len() == MAX_PATHS {
                        return Err(TooComplex);
                    }
                    let mut atoms = self.stack.clone();
                    atoms.sort();
                    atoms.dedup();
                    self.out.push(Path {
                        atoms,
                        accept: self.accept,
                    });
                }
                return Ok(());
            };
            if let Some(d) = self.decide(cond) {
                id = if d { *t } else { *f };
                continue;
            }
            if self.stack.len() == MAX_ATOMS {
                return Err(TooComplex);
            }
            for (truth, next) in [(true, *t), (false, *f)] {
                self.stack.push(match cond {
                    Cond::Field(val, test) => Atom::Field {
                        val: val.clone(),
                        test: test.clone(),
                        truth,
                    },
                    Cond::Pred(pred) => Atom::Pred {
                        pred: pred.clone(),
                        truth,
                    },
                });
                let r = self.visit(next);
                self.stack.pop();
                r?;
            }
            return Ok(());
        }
    }

    /// The outcome of a test if the path's atoms already decide it.
    fn decide(&self, cond: &Cond) -> Option<bool> {
        match cond {
            Cond::Pred(p) => self.stack.iter().find_map(|a| match a {
                Atom::Pred { pred, truth } if pred == p => Some(*truth),
                _ => None,
            }),
            Cond::Field(v, test) => {
                for a in &self.stack {
                    let Atom::Field {
                        val,
                        test: known,
                        truth,
                    } = a
                    else {
                        continue;
                    };
                    if val != v {
                        continue;
                    }
                    if known == test {
                        return Some(*truth);
                    }
                    // A known value decides every test.
                    if let (Test::Eq(k), true) = (known, truth) {
                        return Some(test.apply(*k));
                    }
                    // v is not in a set: an equality with a member is false.
                    if let (Test::In(keys), false, Test::Eq(k)) = (known, truth, test) {
                        if keys.contains(*k) {
                            return Some(false);
                        }
                    }
                }
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::Size;

    fn holds_all(p: &Path, pkt: &[u8]) -> bool {
        p.atoms.iter().all(|a| a.holds(pkt, pkt.len() as u32))
    }

    /// The defining property: the filter accepts iff some path holds.
    fn check(pred: &Pred, pkts: &[Vec<u8>]) {
        let ps = paths(pred, 7).unwrap();
        for pkt in pkts {
            let want = matches!(sluice_ir::eval_pred(pred, pkt, pkt.len() as u32), Ok(true));
            let got = ps.iter().any(|p| holds_all(p, pkt));
            assert_eq!(got, want, "{pred:?} on {pkt:?}");
        }
    }

    fn packets() -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for a in [0u8, 1, 2, 8] {
            for b in [0u8, 1, 6] {
                let p = [a, b, 8, 0, 6, 1];
                for len in 0..=p.len() {
                    out.push(p[..len].to_vec());
                }
            }
        }
        out
    }

    #[test]
    fn paths_are_exact_with_aborts() {
        let b = |o| Val::load_abs(o, Size::Byte);
        let preds = [
            Pred::or(vec![Pred::eq(b(5), 1), Pred::eq(b(0), 1)]),
            Pred::not(Pred::eq(b(5), 1)),
            Pred::and(vec![
                Pred::eq(b(0), 1),
                Pred::not(Pred::or(vec![Pred::eq(b(1), 6), Pred::eq(b(9), 0)])),
            ]),
            Pred::or(vec![
                Pred::and(vec![Pred::eq(b(0), 8), Pred::eq(b(1), 0)]),
                Pred::and(vec![Pred::eq(b(0), 1), Pred::eq(b(4), 6)]),
                Pred::eq(b(2), 8),
            ]),
            Pred::is_in(b(1), vec![1, 6]),
            Pred::cmp(CmpOp::Eq, b(0), b(1)),
        ];
        for p in &preds {
            check(p, &packets());
        }
    }

    proptest::proptest! {
        /// Dropping covered load-only atoms keeps a path's meaning, with
        /// loads at fixed offsets and behind an IPv4 header, on packets
        /// cut at every length.
        #[test]
        fn covered_loads_keep_the_meaning(
            atoms in proptest::collection::vec((0u32..24, 0usize..3, proptest::bool::ANY, 0u8..4, 0u32..256), 1..7),
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 40),
        ) {
            let hdr = Val::Bin(
                sluice_ir::BinOp::Shl,
                Box::new(Val::Bin(
                    sluice_ir::BinOp::And,
                    Box::new(Val::load_abs(2, Size::Byte)),
                    Box::new(Val::Const(0xf)),
                )),
                Box::new(Val::Const(2)),
            );
            let atoms: Vec<Atom> = atoms
                .into_iter()
                .map(|(off, size, behind, kind, k)| {
                    let size = [Size::Byte, Size::Half, Size::Word][size];
                    let val = match behind {
                        false => Val::load_abs(off, size),
                        true => Val::Load { base: Box::new(hdr.clone()), offset: off, size },
                    };
                    let (val, test, truth) = match kind {
                        0 => (val, Test::Ge(0), true),
                        1 => (val, Test::Gt(k), true),
                        2 => (Val::Bin(sluice_ir::BinOp::And, Box::new(val), Box::new(Val::Const(k))), Test::Eq(0), false),
                        _ => (val, Test::Eq(k), false),
                    };
                    Atom::Field { val, test, truth }
                })
                .collect();
            let p = Path { atoms, accept: 1 };
            let fewer = Path { atoms: p.covered_loads_dropped(), accept: 1 };
            for len in 0..=bytes.len() {
                let pkt = &bytes[..len];
                proptest::prop_assert_eq!(holds_all(&p, pkt), holds_all(&fewer, pkt), "{:?} at {}", p, len);
            }
        }
    }

    #[test]
    fn contradictions_disappear() {
        let eth = Val::load_abs(12, Size::Half);
        let p = Pred::and(vec![Pred::eq(eth.clone(), 0x800), Pred::eq(eth, 0x86dd)]);
        assert!(paths(&p, 1).unwrap().is_empty());
    }
}
