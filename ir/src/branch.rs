//! A predicate as control flow: the one walk of `and`, `or` and `not`
//! that every stage turning a predicate into jumps shares (the classic
//! BPF back end's DAG, native code's blocks, the classifier's paths).
//!
//! The rule: continuation passing. Lowering a predicate with the two
//! places control goes when it holds (`t`) and when not (`f`) gives the
//! place that evaluates it. `not` swaps `t` and `f`; the operands of an
//! `and` are chained right to left, each going on to the next when it
//! holds and to the `and`'s `f` when not; `or` is the dual. Operands are
//! evaluated left to right, as the IR means them, so a load that aborts
//! aborts where it would in [`Filter::run`](crate::Filter::run). Only the
//! tests (`Cmp`, `In`, `ProtoChain`) are the engine's own; the walk is
//! linear in the predicate's size, its recursion as deep as the nesting
//! of `and`, `or` and `not`.
//!
//! ```
//! use sluice_ir::branch::Branches;
//! use sluice_ir::{CmpOp, Pred, Size, Val};
//! // A decision DAG: nodes 0 (reject) and 1 (accept), then tests.
//! struct Dag(Vec<(Pred, usize, usize)>);
//! impl Branches for Dag {
//!     type Target = usize;
//!     fn test(&mut self, p: &Pred, t: usize, f: usize) -> usize {
//!         self.0.push((p.clone(), t, f));
//!         self.0.len() + 1
//!     }
//! }
//! let a = Pred::cmp(CmpOp::Eq, Val::load_abs(0, Size::Byte), Val::Const(1));
//! let b = Pred::cmp(CmpOp::Eq, Val::load_abs(1, Size::Byte), Val::Const(2));
//! let mut dag = Dag(Vec::new());
//! // a and not b: a is tested first, b only when a holds.
//! let entry = dag.lower(&Pred::And(vec![a.clone(), Pred::Not(Box::new(b.clone()))]), 1, 0);
//! assert_eq!(dag.0, vec![(b, 0, 1), (a, 2, 0)]);
//! assert_eq!(entry, 3);
//! ```

use crate::Pred;

/// A target predicates are lowered into: where control can go, and how a
/// test is made. [`Branches::lower`] does the rest.
///
/// ```
/// use sluice_ir::branch::Branches;
/// use sluice_ir::Pred;
/// // Count the tests a predicate makes.
/// struct Count(usize);
/// impl Branches for Count {
///     type Target = ();
///     fn test(&mut self, _: &Pred, _: (), _: ()) {
///         self.0 += 1;
///     }
/// }
/// let mut c = Count(0);
/// let p = sluice_ir::Filter::new(Pred::Or(vec![Pred::True, Pred::False]), 1);
/// c.lower(&p.pred, (), ());
/// assert_eq!(c.0, 0);
/// ```
pub trait Branches {
    /// A place control goes: a node, a block.
    type Target: Copy;

    /// The place that makes the test `p` (a `Cmp`, `In` or `ProtoChain`)
    /// and goes on at `t` when it holds, at `f` when not.
    fn test(&mut self, p: &Pred, t: Self::Target, f: Self::Target) -> Self::Target;

    /// An `and` the engine lowers whole its own way (native code checks
    /// the bounds of the loads of an `and` that rejects when it fails
    /// once, ahead of its tests), or `None` for the usual chain.
    ///
    /// ```
    /// use sluice_ir::branch::Branches;
    /// use sluice_ir::Pred;
    /// struct Whole;
    /// impl Branches for Whole {
    ///     type Target = u32;
    ///     fn test(&mut self, _: &Pred, t: u32, _: u32) -> u32 {
    ///         t + 10
    ///     }
    ///     fn and(&mut self, ps: &[Pred], _: u32, _: u32) -> Option<u32> {
    ///         Some(ps.len() as u32)
    ///     }
    /// }
    /// let eq = Pred::cmp(sluice_ir::CmpOp::Eq, sluice_ir::Val::Len, sluice_ir::Val::Const(1));
    /// assert_eq!(Whole.lower(&Pred::And(vec![eq.clone(), eq.clone()]), 1, 0), 2);
    /// assert_eq!(Whole.lower(&Pred::Or(vec![eq.clone(), eq]), 1, 0), 11);
    /// ```
    fn and(&mut self, ps: &[Pred], t: Self::Target, f: Self::Target) -> Option<Self::Target> {
        let _ = (ps, t, f);
        None
    }

    /// The place that evaluates `p` and goes on at `t` when it holds, at
    /// `f` when not (see the module's rule).
    ///
    /// ```
    /// use sluice_ir::branch::Branches;
    /// use sluice_ir::Pred;
    /// struct Tests;
    /// impl Branches for Tests {
    ///     type Target = bool;
    ///     fn test(&mut self, _: &Pred, t: bool, _: bool) -> bool {
    ///         t
    ///     }
    /// }
    /// assert!(Tests.lower(&Pred::Not(Box::new(Pred::False)), true, false));
    /// ```
    fn lower(&mut self, p: &Pred, t: Self::Target, f: Self::Target) -> Self::Target {
        match p {
            Pred::True => t,
            Pred::False => f,
            Pred::Not(q) => self.lower(q, f, t),
            Pred::And(ps) => match self.and(ps, t, f) {
                Some(whole) => whole,
                None => ps.iter().rev().fold(t, |cur, q| self.lower(q, cur, f)),
            },
            Pred::Or(ps) => ps.iter().rev().fold(f, |cur, q| self.lower(q, t, cur)),
            Pred::Cmp { .. } | Pred::In { .. } | Pred::ProtoChain { .. } => self.test(p, t, f),
        }
    }
}
