//! When a program "rejects all packets": libpcap's rule, not sluice's.
//!
//! libpcap refuses an expression, when it optimises, if its optimiser
//! turns the program's first block into `ret #0`. Its optimiser is weaker
//! than sluice's in known ways, so sluice's own optimiser proves more
//! programs empty than libpcap refuses (`rarp and llc` is an Ethernet type
//! and a length at once: sluice knows, libpcap compiles a program that
//! rejects everything). Refusing must follow libpcap, so it is decided on
//! a model of libpcap's optimiser, in its two passes (optimize.c):
//!
//! 1. without changing statements: jump threading with only the facts of
//!    `fold_edge` (the same comparison of the same value; an equality that
//!    held with another constant), tests of plain constants decided
//!    (`1 = 0`), and tests whose branches meet removed whatever they load;
//! 2. changing statements: arithmetic folded and `x & 0`, `x * 0` reduced
//!    ([`sluice_ir::Val::known`]), which decides more tests, but jumps are
//!    no longer threaded: identical blocks are merged, and only a chain of
//!    decided tests from the first block can reach `ret #0`.
//!
//! So `ether[0] & 0 = 1` and `ip and 1 = 0` are refused, `ip and len & 0 =
//! 1` and `rarp and llc` are not (their programs reject every packet).
//!
//! The second pass also refuses arithmetic it cannot do, in the blocks the
//! first pass left reachable, as it meets it (optimize.c's `opt_stmt`; in
//! each pass over `A op X`):
//! - both known: folded (a division or modulus by 0 is an error; a shift
//!   by 32 or more gives 0);
//! - only X known: rewritten to `A op #k`, an error for a shift by more
//!   than 31; in the next pass `op #0` makes `*` and `&` give 0 and `/` and
//!   `%` an error;
//! - only A known, and 0: `*`, `/`, `%`, `&`, `<<`, `>>` give 0 (so `0 / x`
//!   is no error even where `x` later folds to 0).

use std::fmt;

use crate::dag::{Dag, Node, Test};
use crate::opt::{merge, thread, Collapse, Rules};
use crate::LowerError;
use sluice_ir::{BinOp, Filter, Pred, Val};

/// Arithmetic libpcap's optimiser refuses.
///
/// ```
/// use sluice_cbpf::Refusal;
/// assert_eq!(Refusal::Shift(41).to_string(), "shift by more than 31 bits (41)");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A division by a value that folds to 0.
    DivisionByZero,
    /// A modulus by a value that folds to 0.
    ModulusByZero,
    /// A shift by a value that folds to more than 31.
    Shift(u32),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::DivisionByZero => f.write_str("division by zero"),
            Refusal::ModulusByZero => f.write_str("modulus by zero"),
            Refusal::Shift(k) => write!(f, "shift by more than 31 bits ({k})"),
        }
    }
}

/// What libpcap's optimiser does with the program of `filter`: `Ok` if
/// it keeps it, [`LowerError::Refused`] for arithmetic it cannot do,
/// [`LowerError::RejectsAll`] if it reduces it to `ret #0`.
///
/// `arithmetic`: refuse arithmetic as libpcap's optimiser does (pcap
/// expressions); otherwise such values are just not constant.
pub(crate) fn check(filter: &Filter, arithmetic: bool) -> Result<(), LowerError> {
    // Arithmetic the model would refuse is looked for in the blocks it
    // reaches: where there is none anywhere, a path it cannot cut is
    // enough to keep the program.
    if !(arithmetic && refusable_arithmetic(&filter.pred))
        && crate::keeps::keeps(&filter.pred, arithmetic, QUICK_BUDGET) == Some(true)
    {
        return Ok(());
    }
    model(filter, arithmetic)
}

/// How many tests the quick proof looks at before the model decides.
const QUICK_BUDGET: usize = 1 << 20;

/// Whether some value of `p` has arithmetic libpcap's optimiser may refuse.
fn refusable_arithmetic(p: &Pred) -> bool {
    match p {
        Pred::True | Pred::False => false,
        Pred::Cmp { lhs, rhs, .. } => fold(lhs).is_err() || fold(rhs).is_err(),
        Pred::Not(q) => refusable_arithmetic(q),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(refusable_arithmetic),
        Pred::In { val, .. } => fold(val).is_err(),
        Pred::ProtoChain { start, .. } => fold(start).is_err(),
    }
}

/// The model itself: libpcap's two passes on the program's DAG.
pub(crate) fn model(filter: &Filter, arithmetic: bool) -> Result<(), LowerError> {
    let fold = |v: &Val| match fold(v) {
        Err(LowerError::Refused(_)) if !arithmetic => Ok(None),
        r => r,
    };
    let mut dag = Dag::build_as(filter, true);
    // Pass 1, to a fixed point (two rounds reach it on these DAGs).
    for _ in 0..2 {
        thread(&mut dag, Rules::Libpcap);
        merge(&mut dag, Collapse::Always);
    }
    // Pass 2, over what pass 1 left reachable: arithmetic folded (or
    // refused); decided tests go one way; identical blocks merge.
    let n = dag.nodes.len();
    let mut reach = vec![false; n];
    reach[dag.entry as usize] = true;
    for id in (0..n).rev() {
        let Node::Test { test, jt, jf } = dag.nodes[id] else {
            continue;
        };
        if !reach[id] {
            continue;
        }
        reach[jt as usize] = true;
        reach[jf as usize] = true;
        let Test::Cmp { lhs, op, rhs } = test else {
            if let Test::ProtoChain { start, .. } = test {
                fold(&dag.vals[start as usize])?;
            }
            continue;
        };
        let l = fold(&dag.vals[lhs as usize])?;
        let r = match rhs {
            crate::dag::Rhs::K(k) => Some((0, k)),
            crate::dag::Rhs::V(v) => fold(&dag.vals[v as usize])?,
        };
        if let (Some((_, a)), Some((_, b))) = (l, r) {
            let to = if op.apply(a, b) { jt } else { jf };
            dag.nodes[id] = Node::Test {
                test,
                jt: to,
                jf: to,
            };
        }
    }
    merge(&mut dag, Collapse::Never);
    // The first block: past tests whose branches meet.
    let mut at = dag.entry;
    loop {
        match dag.nodes[at as usize] {
            Node::Leaf(0) => return Err(LowerError::RejectsAll),
            Node::Leaf(_) => return Ok(()),
            Node::Test { jt, jf, .. } if jt == jf => at = jt,
            Node::Test { .. } => return Ok(()),
        }
    }
}

/// When (in which pass) a value becomes a known constant for libpcap's
/// optimiser, and which; `None` if it never does. Refusals as the
/// optimiser reports them.
pub(crate) fn fold(v: &Val) -> Result<Option<(u32, u32)>, LowerError> {
    let refuse = |r| Err(LowerError::Refused(r));
    Ok(match v {
        Val::Const(k) => Some((0, *k)),
        Val::Len => None,
        Val::Load { base, .. } => {
            fold(base)?;
            None
        }
        Val::Neg(x) => fold(x)?.map(|(p, k)| (p, k.wrapping_neg())),
        // The value itself (libpcap computes it where it is used; shared
        // values come from nested tunnels, at most a few levels deep).
        Val::Shared(s) => fold(s.val())?,
        Val::Bin(op, a, b) => {
            let fa = fold(a)?;
            let fb = fold(b)?;
            let zero_a = matches!(
                op,
                BinOp::Mul | BinOp::Div | BinOp::Mod | BinOp::And | BinOp::Shl | BinOp::Shr
            );
            match (fa, fb) {
                // A is 0 before X is known: the operation gives 0.
                (Some((pa, 0)), fb) if zero_a && fb.map_or(true, |(pb, _)| pa < pb) => {
                    Some((pa, 0))
                }
                // X is known first: `op #k`, then reduced a pass later.
                (fa, Some((pb, k))) if fa.map_or(true, |(pa, _)| pb < pa) => {
                    if matches!(op, BinOp::Shl | BinOp::Shr) && k > 31 {
                        return refuse(Refusal::Shift(k));
                    }
                    match (op, k) {
                        (BinOp::Div, 0) => return refuse(Refusal::DivisionByZero),
                        (BinOp::Mod, 0) => return refuse(Refusal::ModulusByZero),
                        (BinOp::Mul | BinOp::And, 0) => Some((pb + 1, 0)),
                        // A becomes known later: folded then.
                        _ => fa.and_then(|(pa, x)| op.apply(x, k).map(|r| (pa, r))),
                    }
                }
                // Both known in the same pass: folded.
                (Some((pa, x)), Some((pb, k))) => match (op, k) {
                    (BinOp::Div, 0) => return refuse(Refusal::DivisionByZero),
                    (BinOp::Mod, 0) => return refuse(Refusal::ModulusByZero),
                    _ => op.apply(x, k).map(|r| (pa.max(pb), r)),
                },
                _ => None,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{CmpOp, Pred, Size};

    fn b(v: Val) -> Box<Val> {
        Box::new(v)
    }

    fn check_all(f: &Filter) -> Result<(), LowerError> {
        check(f, true)
    }

    fn rejects_all(f: &Filter) -> bool {
        check(f, true) == Err(LowerError::RejectsAll)
    }

    #[test]
    fn libpcap_refuses_reductions_at_the_root_only() {
        let byte0 = Val::load_abs(0, Size::Byte);
        let and0 = Val::Bin(BinOp::And, b(byte0), b(Val::Const(0)));
        let reduced = Pred::Cmp {
            op: CmpOp::Eq,
            lhs: and0,
            rhs: Val::Const(1),
        };
        assert!(rejects_all(&Filter::new(reduced.clone(), 1)));
        let ip = Pred::eq(Val::load_abs(12, Size::Half), 0x800);
        let after = Pred::and(vec![ip.clone(), reduced]);
        assert!(!rejects_all(&Filter::new(after, 1)));
        // A plain constant test is decided in the first pass.
        let never = Pred::Cmp {
            op: CmpOp::Eq,
            lhs: Val::Const(1),
            rhs: Val::Const(0),
        };
        assert!(rejects_all(&Filter::new(Pred::and(vec![ip, never]), 1)));
    }

    #[test]
    fn libpcap_threads_equalities_not_ranges() {
        let ty = Val::load_abs(12, Size::Half);
        let ip = Pred::eq(ty.clone(), 0x800);
        let ip6 = Pred::eq(ty.clone(), 0x86dd);
        assert!(rejects_all(&Filter::new(
            Pred::and(vec![ip.clone(), ip6]),
            1
        )));
        let llc = Pred::not(Pred::cmp(CmpOp::Gt, ty, Val::Const(1500)));
        assert!(!rejects_all(&Filter::new(Pred::and(vec![ip, llc]), 1)));
    }

    #[test]
    fn arithmetic_refused_as_libpcap_meets_it() {
        let load = Val::load_abs(14, Size::Byte);
        let k = |v| b(Val::Const(v));
        let rel = |v: Val| {
            Filter::new(
                Pred::Cmp {
                    op: CmpOp::Eq,
                    lhs: v,
                    rhs: Val::Const(1),
                },
                1,
            )
        };
        // x % (8 % 4): the divisor folds first.
        let m = Val::Bin(
            BinOp::Mod,
            b(load.clone()),
            b(Val::Bin(BinOp::Mod, k(8), k(4))),
        );
        assert_eq!(
            check_all(&rel(m)),
            Err(LowerError::Refused(Refusal::ModulusByZero))
        );
        // x >> (1 + 40)
        let s = Val::Bin(
            BinOp::Shr,
            b(load.clone()),
            b(Val::Bin(BinOp::Add, k(1), k(40))),
        );
        assert_eq!(
            check_all(&rel(s)),
            Err(LowerError::Refused(Refusal::Shift(41)))
        );
        // 443 >> 41 folds to 0; 0 / (len * 0) is 0.
        let f = Val::Bin(BinOp::Shr, k(443), b(Val::Bin(BinOp::Add, k(1), k(40))));
        assert_eq!(check_all(&rel(f)), Err(LowerError::RejectsAll));
        let lz = Val::Bin(BinOp::Mul, b(Val::Len), k(0));
        let z = Val::Bin(BinOp::Div, k(0), b(lz.clone()));
        assert_eq!(check_all(&rel(z)), Err(LowerError::RejectsAll));
        // 6 / (len * 0): the divisor folds to 0 after 6 is known.
        let d = Val::Bin(BinOp::Div, k(6), b(lz));
        assert_eq!(
            check_all(&rel(d)),
            Err(LowerError::Refused(Refusal::DivisionByZero))
        );
        // Unreachable after the first pass: not looked at.
        let ip = Pred::eq(Val::load_abs(12, Size::Half), 0x800);
        let arp = Pred::eq(Val::load_abs(12, Size::Half), 0x806);
        let m = Val::Bin(BinOp::Mod, b(load), b(Val::Bin(BinOp::Mod, k(8), k(4))));
        let p = Pred::or(vec![
            Pred::eq(Val::Len, 60),
            Pred::and(vec![ip, arp, rel(m).pred]),
        ]);
        assert_eq!(check_all(&Filter::new(p, 1)), Ok(()));
    }
}
