//! A quick proof that libpcap's optimiser keeps a program: one path from
//! the first test to `ret #accept` that the refusal model ([`crate::refuse`])
//! cannot cut.
//!
//! The rule: the model cuts a path only where a test on it is decided
//! against the path's direction, by a fact an earlier test on the same
//! path gave (jump threading, `fold_edge`'s two rules) or by constants
//! (`x & 0 = 1`). Threading and merging keep every path that no such
//! decision cuts, so if one path to `ret #accept` survives the decisions
//! the model can make from everything known along it, the program's first
//! block cannot become `ret #0` and there is nothing to refuse. Finding
//! such a path walks a few tests of the predicate instead of threading
//! and merging the whole program twice (a 100,000-term `host a or host b
//! or …` takes the first `host`); where no path is found within the
//! budget, the caller runs the model.

use std::collections::HashMap;

use sluice_ir::{CmpOp, Pred, Val};

use crate::refuse::fold;
use crate::LowerError;

/// What a comparison is compared with.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Rhs<'a> {
    K(u32),
    V(&'a Val),
}

/// One fact learnt on the path, to undo on backtracking.
enum Undo<'a> {
    Fact((&'a Val, CmpOp, Rhs<'a>)),
    Equal(&'a Val),
}

struct Walk<'a> {
    /// `lhs op rhs` is known to be true or false on the path.
    facts: HashMap<(&'a Val, CmpOp, Rhs<'a>), bool>,
    /// `lhs == k` held on the path.
    equal: HashMap<&'a Val, u32>,
    undo: Vec<Undo<'a>>,
    /// Tests left to look at.
    budget: usize,
    /// Refuse arithmetic as libpcap does (else it is just not constant).
    arithmetic: bool,
}

/// Whether a path to `ret #accept` that the model cannot cut was found
/// within `budget` tests (`None`: look with the model).
pub(crate) fn keeps(pred: &Pred, arithmetic: bool, budget: usize) -> Option<bool> {
    let mut w = Walk {
        facts: HashMap::new(),
        equal: HashMap::new(),
        undo: Vec::new(),
        budget,
        arithmetic,
    };
    match w.path(pred, true) {
        Ok(true) => Some(true),
        _ => None,
    }
}

/// The walk ran out of budget or met what it does not model.
struct GiveUp;

impl<'a> Walk<'a> {
    /// The constant a value folds to in the model (pass 2), if any.
    fn constant(&self, v: &Val) -> Result<Option<u32>, GiveUp> {
        match fold(v) {
            Ok(k) => Ok(k.map(|(_, k)| k)),
            Err(LowerError::Refused(_)) if !self.arithmetic => Ok(None),
            Err(_) => Err(GiveUp),
        }
    }

    /// What the model decides for `lhs op rhs` on this path, if anything.
    fn decided(&self, lhs: &'a Val, op: CmpOp, rhs: Rhs<'a>) -> Result<Option<bool>, GiveUp> {
        if let Some(&t) = self.facts.get(&(lhs, op, rhs)) {
            return Ok(Some(t));
        }
        if let (CmpOp::Eq, Rhs::K(k)) = (op, rhs) {
            if self.equal.get(lhs).is_some_and(|&e| e != k) {
                return Ok(Some(false));
            }
        }
        let l = self.constant(lhs)?;
        let r = match rhs {
            Rhs::K(k) => Some(k),
            Rhs::V(v) => self.constant(v)?,
        };
        Ok(match (l, r) {
            (Some(a), Some(b)) => Some(op.apply(a, b)),
            _ => None,
        })
    }

    fn learn(&mut self, lhs: &'a Val, op: CmpOp, rhs: Rhs<'a>, truth: bool) {
        if self.facts.insert((lhs, op, rhs), truth).is_none() {
            self.undo.push(Undo::Fact((lhs, op, rhs)));
        }
        if let (CmpOp::Eq, Rhs::K(k), true) = (op, rhs, truth) {
            if self.equal.insert(lhs, k).is_none() {
                self.undo.push(Undo::Equal(lhs));
            }
        }
    }

    fn rollback(&mut self, to: usize) {
        while self.undo.len() > to {
            match self.undo.pop().expect("non-empty") {
                Undo::Fact(k) => {
                    self.facts.remove(&k);
                }
                Undo::Equal(v) => {
                    self.equal.remove(v);
                }
            }
        }
    }

    /// Extends the path through `p` so that `p` comes out `want`: `Ok(false)`
    /// if no such extension survives the model's decisions (facts rolled
    /// back), `Ok(true)` with the facts of the extension learnt.
    fn path(&mut self, p: &'a Pred, want: bool) -> Result<bool, GiveUp> {
        self.budget = self.budget.checked_sub(1).ok_or(GiveUp)?;
        match p {
            Pred::True => Ok(want),
            Pred::False => Ok(!want),
            Pred::Not(q) => self.path(q, !want),
            Pred::Cmp { op, lhs, rhs } => {
                let rhs = match rhs {
                    Val::Const(k) => Rhs::K(*k),
                    v => Rhs::V(v),
                };
                // `jset #0` never holds (libpcap's peephole pass).
                if *op == CmpOp::Set && rhs == Rhs::K(0) {
                    return Ok(!want);
                }
                match self.decided(lhs, *op, rhs)? {
                    Some(d) => Ok(d == want),
                    None => {
                        self.learn(lhs, *op, rhs, want);
                        Ok(true)
                    }
                }
            }
            // A protocol chain is a test the model knows nothing about.
            Pred::ProtoChain { .. } => Ok(true),
            // A set is a search tree of `jge` and `jeq` tests: not walked.
            Pred::In { .. } => Err(GiveUp),
            // `and` true (`or` false): every operand so. `and` false (`or`
            // true): the first operands the other way, then one so.
            Pred::And(ps) | Pred::Or(ps) => {
                let all = matches!(p, Pred::And(_)) == want;
                let start = self.undo.len();
                if all {
                    for q in ps {
                        if !self.path(q, want)? {
                            self.rollback(start);
                            return Ok(false);
                        }
                    }
                    return Ok(true);
                }
                for q in ps {
                    let here = self.undo.len();
                    if self.path(q, want)? {
                        return Ok(true);
                    }
                    self.rollback(here);
                    if !self.path(q, !want)? {
                        self.rollback(start);
                        return Ok(false);
                    }
                }
                self.rollback(start);
                Ok(false)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{BinOp, Size};

    fn ty(k: u32) -> Pred {
        Pred::eq(Val::load_abs(12, Size::Half), k)
    }

    #[test]
    fn a_path_is_found_where_one_survives() {
        let hosts: Vec<Pred> = (0..1000)
            .map(|i| Pred::and(vec![ty(0x800), Pred::eq(Val::load_abs(26, Size::Word), i)]))
            .collect();
        assert_eq!(keeps(&Pred::or(hosts), true, 100), Some(true));
        // `ip and ip6`: every path is cut.
        assert_eq!(
            keeps(&Pred::and(vec![ty(0x800), ty(0x86dd)]), true, 100),
            None
        );
        // `x & 0 = 1` is decided by constants.
        let and0 = Val::bin(BinOp::And, Val::load_abs(0, Size::Byte), Val::Const(0));
        assert_eq!(keeps(&Pred::eq(and0.clone(), 1), true, 100), None);
        assert_eq!(keeps(&Pred::not(Pred::eq(and0, 1)), true, 100), Some(true));
        // `not ip or ip6`: the first operand false, then the second true.
        let p = Pred::and(vec![
            ty(0x800),
            Pred::or(vec![Pred::not(ty(0x800)), ty(0x86dd)]),
        ]);
        assert_eq!(keeps(&p, true, 100), None);
        // Out of budget: the model decides.
        let long = Pred::and(
            (0..50)
                .map(|i| Pred::eq(Val::load_abs(i, Size::Byte), 1))
                .collect(),
        );
        assert_eq!(keeps(&long, true, 10), None);
        assert_eq!(keeps(&long, true, 100), Some(true));
    }
}
