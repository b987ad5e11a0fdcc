//! Meaning-preserving rewrites of predicates.
//!
//! Every rewrite keeps aborts: an operand that can abort is never dropped
//! unless it would not have been evaluated anyway.
//!
//! ```
//! use sluice_ir::{Pred, simplify::simplify};
//! assert_eq!(simplify(Pred::Not(Box::new(Pred::Not(Box::new(Pred::True))))), Pred::True);
//! ```

use crate::{CmpOp, Pred, Val};

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

/// DPF's "fast disjunctions", exactly: rewrite long `or`s of equality tests
/// into set lookups ([`Pred::In`]) without changing any verdict, aborts
/// included.
///
/// Two rewrites, both on runs of consecutive `or` operands:
/// - **guard grouping**: `(v = a and X) or (v = b and Y) or (v = a and Z)`
///   becomes `(v = a and (X or Z)) or (v = b and Y)`. The guards test one
///   value, so the first operand evaluates it (and aborts if it must) in both
///   forms, and a packet takes exactly the operands of its own group, in the
///   original order.
/// - **sets**: in `v = k1 or w = k2 or v = k3 or w = k4 or ...`, once every
///   value of the run has been evaluated once (the shortest prefix that
///   mentions each), the rest cannot abort, so it may be reordered and
///   grouped: `v = k1 or w = k2 or v ∈ {k3, ...} or w ∈ {k4, ...}`.
///
/// ```
/// use sluice_ir::{Pred, Val, Size, simplify::fast_disjunctions};
/// let src = Val::load_abs(26, Size::Word);
/// let p = Pred::or((1..=100).map(|k| Pred::eq(src.clone(), k)).collect());
/// let q = fast_disjunctions(p.clone());
/// assert!(matches!(&q, Pred::Or(v) if v.len() == 2));
/// for k in [0u8, 1, 50, 100, 101] {
///     let mut pkt = [0u8; 30];
///     pkt[29] = k;
///     assert_eq!(sluice_ir::eval_pred(&p, &pkt, 30), sluice_ir::eval_pred(&q, &pkt, 30));
/// }
/// ```
pub fn fast_disjunctions(mut p: Pred) -> Pred {
    rewrite(&mut p);
    p
}

/// The rewrite in place: small nodes are visited, not rebuilt.
fn rewrite(p: &mut Pred) {
    match p {
        Pred::Or(ps) => {
            ps.iter_mut().for_each(rewrite);
            if ps.len() >= MIN_RUN {
                let ops = std::mem::take(ps);
                *p = Pred::or(collect_sets(group_guards(ops)));
            }
        }
        Pred::And(ps) => ps.iter_mut().for_each(rewrite),
        Pred::Not(q) => rewrite(q),
        _ => {}
    }
}

/// Fewer operands than this are left as they are.
const MIN_RUN: usize = 4;

/// `v = c` as (v, c).
fn as_eq(p: &Pred) -> Option<(&Val, u32)> {
    match p {
        Pred::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs: Val::Const(c),
        } => Some((lhs, *c)),
        _ => None,
    }
}

/// The leading equality test of an `and` operand. (Plain equality tests
/// are the business of the set rewrite.)
fn guard_of(p: &Pred) -> Option<(&Val, u32)> {
    match p {
        Pred::And(v) => v.first().and_then(as_eq),
        _ => None,
    }
}

/// What an operand requires after its guard.
fn rest_of(p: Pred) -> Pred {
    match p {
        Pred::And(mut v) => {
            v.remove(0);
            Pred::and(v)
        }
        _ => Pred::True,
    }
}

fn group_guards(ps: Vec<Pred>) -> Vec<Pred> {
    if ps.len() < MIN_RUN {
        return ps;
    }
    let mut out = Vec::with_capacity(ps.len());
    let mut it = ps.into_iter().peekable();
    while let Some(first) = it.next() {
        let Some((v, _)) = guard_of(&first) else {
            out.push(first);
            continue;
        };
        let v = v.clone();
        let mut run = vec![first];
        while let Some(next) = it.peek() {
            match guard_of(next) {
                Some((w, _)) if *w == v => run.push(it.next().expect("peeked")),
                _ => break,
            }
        }
        if run.len() < 2 {
            out.extend(run);
            continue;
        }
        // Group by guard constant, in order of first appearance.
        let mut order: Vec<u32> = Vec::new();
        let mut groups: std::collections::HashMap<u32, Vec<Pred>> = Default::default();
        for p in run {
            let c = guard_of(&p).expect("guarded").1;
            groups
                .entry(c)
                .or_insert_with(|| {
                    order.push(c);
                    Vec::new()
                })
                .push(rest_of(p));
        }
        for c in order {
            let rests = groups.remove(&c).expect("group");
            let body = fast_disjunctions(Pred::or(rests));
            out.push(Pred::and(vec![Pred::eq(v.clone(), c), body]));
        }
    }
    out
}

fn collect_sets(ps: Vec<Pred>) -> Vec<Pred> {
    if ps.len() < MIN_RUN {
        return ps;
    }
    let mut out = Vec::with_capacity(ps.len());
    let mut it = ps.into_iter().peekable();
    while let Some(first) = it.next() {
        if as_eq(&first).is_none() {
            out.push(first);
            continue;
        }
        let mut run = vec![first];
        while it.peek().is_some_and(|p| as_eq(p).is_some()) {
            run.push(it.next().expect("peeked"));
        }
        // The prefix ends after the first mention of the run's last new value.
        let mut seen: Vec<Val> = Vec::new();
        let mut prefix_end = 0;
        for (i, p) in run.iter().enumerate() {
            let v = as_eq(p).expect("equality").0;
            if !seen.contains(v) {
                seen.push(v.clone());
                prefix_end = i + 1;
            }
        }
        if run.len() - prefix_end < MIN_RUN {
            out.extend(run);
            continue;
        }
        let rest = run.split_off(prefix_end);
        out.extend(run);
        let mut keys: Vec<(Val, Vec<u32>)> = seen.into_iter().map(|v| (v, Vec::new())).collect();
        for p in rest {
            let (v, c) = as_eq(&p).expect("equality");
            let slot = keys.iter_mut().find(|(w, _)| w == v).expect("seen");
            slot.1.push(c);
        }
        for (v, ks) in keys {
            if !ks.is_empty() {
                out.push(Pred::is_in(v, ks));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{eval_pred, Size};

    fn host_like(n: u32) -> Pred {
        // (eth = 0x800 and (src = k or dst = k)) or (eth = 0x806 and ...) for each k.
        let eth = Val::load_abs(12, Size::Half);
        let mut alts = Vec::new();
        for k in 1..=n {
            for (ty, s, d) in [(0x800, 26, 30), (0x806, 28, 38)] {
                alts.push(Pred::and(vec![
                    Pred::eq(eth.clone(), ty),
                    Pred::or(vec![
                        Pred::eq(Val::load_abs(s, Size::Word), k),
                        Pred::eq(Val::load_abs(d, Size::Word), k),
                    ]),
                ]));
            }
        }
        Pred::or(alts)
    }

    #[test]
    fn rewritten_host_lists_agree_on_every_length_and_value() {
        let p = host_like(50);
        let q = fast_disjunctions(p.clone());
        let text = format!("{q:?}");
        assert!(text.contains("In {"), "{text}");
        let mut pkt = [0u8; 48];
        for ty in [0x800u16, 0x806, 0x86dd] {
            pkt[12..14].copy_from_slice(&ty.to_be_bytes());
            for (s, d) in [
                (0u32, 0u32),
                (1, 0),
                (0, 1),
                (7, 9),
                (50, 3),
                (0, 50),
                (51, 52),
            ] {
                for at in [(26, 30), (28, 38)] {
                    pkt[at.0..at.0 + 4].copy_from_slice(&s.to_be_bytes());
                    pkt[at.1..at.1 + 4].copy_from_slice(&d.to_be_bytes());
                    for len in 0..=pkt.len() {
                        assert_eq!(
                            eval_pred(&p, &pkt[..len], len as u32),
                            eval_pred(&q, &pkt[..len], len as u32),
                            "type {ty:x} src {s} dst {d} len {len}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn short_runs_are_left_alone() {
        let v = Val::load_abs(0, Size::Byte);
        let p = Pred::or(vec![Pred::eq(v.clone(), 1), Pred::eq(v, 2)]);
        assert_eq!(fast_disjunctions(p.clone()), p);
    }
}
