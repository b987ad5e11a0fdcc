//! Meaning-preserving rewrites of predicates.
//!
//! Every rewrite keeps aborts: an operand that can abort is never dropped
//! unless it would not have been evaluated anyway.
//!
//! ```
//! use sluice_ir::{Pred, simplify::simplify};
//! assert_eq!(simplify(Pred::Not(Box::new(Pred::Not(Box::new(Pred::True))))), Pred::True);
//! ```

use crate::Pred;

/// Rebuild a predicate bottom-up through the folding constructors
/// ([`Pred::and`], [`Pred::or`], [`Pred::not`], [`Pred::cmp`]).
///
/// ```
/// use sluice_ir::{Pred, simplify::simplify};
/// assert_eq!(simplify(Pred::And(vec![Pred::True, Pred::False])), Pred::False);
/// ```
pub fn simplify(p: Pred) -> Pred {
    match p {
        Pred::Not(q) => Pred::not(simplify(*q)),
        Pred::And(ps) => Pred::and(ps.into_iter().map(simplify).collect()),
        Pred::Or(ps) => Pred::or(ps.into_iter().map(simplify).collect()),
        Pred::Cmp { op, lhs, rhs } => Pred::cmp(op, lhs, rhs),
        p => p,
    }
}
