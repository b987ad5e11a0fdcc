//! Tests the path has already decided (a pass over a filter before it is
//! lowered to machine code).
//!
//! Inside `and(a, b, ...)` the later conjuncts run only where `a` held, and
//! inside `or(a, b, ...)` only where `a` failed. So a later comparison of
//! the same value with a constant is already settled there: `v == k` is
//! true where `v == k` held, and false where `v == k` failed or where
//! `v == j` held for another constant `j`. The pcap compiler's output is
//! full of these (`ip6 and udp port 53` tests the ethertype for IPv6 twice
//! and then for IPv4 inside the IPv6 branch); each settled test becomes
//! `true` or `false`, which the lowering turns into a jump.
//!
//! The result is exactly the filter's meaning, aborts included: a settled
//! test's value was computed on the same packet earlier on every path that
//! reaches it, and that earlier evaluation did not abort, so evaluating it
//! again could not have aborted either. Only equality tests of a value
//! with a constant are settled; everything else is kept as it is.

use sluice_ir::{CmpOp, Pred, Val};

/// What is known about `value == constant` on the current path.
type Fact = (Val, u32, bool);

/// `p` with the tests its own structure settles replaced by `true` or
/// `false`, and how many were.
pub(crate) fn settle(p: &Pred) -> (Pred, usize) {
    let mut facts = Vec::new();
    let mut settled = 0;
    let out = walk(p, &mut facts, &mut settled);
    (out, settled)
}

fn walk(p: &Pred, facts: &mut Vec<Fact>, settled: &mut usize) -> Pred {
    match p {
        Pred::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs: Val::Const(k),
        } => {
            let mut known = None;
            for (v, c, holds) in facts.iter() {
                if v != lhs {
                    continue;
                }
                if c == k {
                    known = Some(*holds);
                    break;
                }
                if *holds {
                    known = Some(false);
                    break;
                }
            }
            match known {
                Some(b) => {
                    *settled += 1;
                    if b {
                        Pred::True
                    } else {
                        Pred::False
                    }
                }
                None => p.clone(),
            }
        }
        Pred::Not(q) => Pred::Not(Box::new(walk(q, facts, settled))),
        Pred::And(ps) | Pred::Or(ps) => {
            let and = matches!(p, Pred::And(_));
            let mark = facts.len();
            let mut out = Vec::with_capacity(ps.len());
            for q in ps {
                let q = walk(q, facts, settled);
                // Later siblings run only where this one held (`and`) or
                // failed (`or`).
                implied(&q, and, facts);
                out.push(q);
            }
            facts.truncate(mark);
            if and {
                Pred::And(out)
            } else {
                Pred::Or(out)
            }
        }
        _ => p.clone(),
    }
}

/// Push what `q` having the outcome `holds` says about equality tests.
fn implied(q: &Pred, holds: bool, facts: &mut Vec<Fact>) {
    match q {
        Pred::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs: Val::Const(k),
        } => facts.push((lhs.clone(), *k, holds)),
        Pred::Not(q) => implied(q, !holds, facts),
        // All of them held / any of them failed ...
        Pred::And(qs) if holds => qs.iter().for_each(|q| implied(q, true, facts)),
        // ... none of them held / all of them failed.
        Pred::Or(qs) if !holds => qs.iter().for_each(|q| implied(q, false, facts)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{Filter, Size};

    fn ether_type(k: u32) -> Pred {
        Pred::eq(Val::load_abs(12, Size::Half), k)
    }

    /// `ip6 and (ip6 and udp or ip and udp)`, the shape of what the pcap
    /// compiler writes for `ip6 and udp port 53`: the second IPv6 test is
    /// true, the IPv4 one false.
    #[test]
    fn repeated_and_excluded_tests_are_settled() {
        let udp6 = Pred::eq(Val::load_abs(20, Size::Byte), 17);
        let udp4 = Pred::eq(Val::load_abs(23, Size::Byte), 17);
        let p = Pred::and(vec![
            ether_type(0x86dd),
            Pred::or(vec![
                Pred::and(vec![ether_type(0x86dd), udp6.clone()]),
                Pred::and(vec![ether_type(0x800), udp4.clone()]),
            ]),
        ]);
        let (q, n) = settle(&p);
        assert_eq!(n, 2);
        let want = Pred::And(vec![
            ether_type(0x86dd),
            Pred::Or(vec![
                Pred::And(vec![Pred::True, udp6]),
                Pred::And(vec![Pred::False, udp4]),
            ]),
        ]);
        assert_eq!(q, want);
    }

    /// A failed disjunct settles later ones; facts do not leak out of the
    /// `and` or `or` that established them.
    #[test]
    fn facts_stay_in_their_scope() {
        let p = Pred::Or(vec![
            ether_type(0x800),
            Pred::Not(Box::new(ether_type(0x800))),
        ]);
        assert_eq!(
            settle(&p).0,
            Pred::Or(vec![ether_type(0x800), Pred::Not(Box::new(Pred::False))])
        );
        let p = Pred::Or(vec![
            Pred::And(vec![ether_type(0x800), ether_type(0x800)]),
            ether_type(0x800),
        ]);
        let (q, n) = settle(&p);
        assert_eq!(n, 1);
        assert_eq!(
            q,
            Pred::Or(vec![
                Pred::And(vec![ether_type(0x800), Pred::True]),
                ether_type(0x800)
            ])
        );
    }

    /// The settled filter means the same on every prefix of a few packets
    /// (the property tests in `tests.rs` check the compiled code on random
    /// filters).
    #[test]
    fn settled_filters_mean_the_same() {
        let f = Filter::new(
            Pred::and(vec![
                ether_type(0x86dd),
                Pred::or(vec![
                    ether_type(0x800),
                    Pred::eq(Val::load_abs(20, Size::Byte), 17),
                ]),
            ]),
            1,
        );
        let (q, n) = settle(&f.pred);
        assert_eq!(n, 1);
        let g = Filter::new(q, 1);
        let mut pkt = [0u8; 40];
        pkt[12] = 0x86;
        pkt[13] = 0xdd;
        pkt[20] = 17;
        for len in 0..=pkt.len() {
            assert_eq!(f.run(&pkt[..len], 40), g.run(&pkt[..len], 40));
        }
    }
}
