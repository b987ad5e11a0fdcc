//! The groups of a program of many filters as a trie of their guards:
//! the guards numbered so that each group's, sorted, read the commonest
//! field first and equalities on one field sit side by side in constant
//! order; runs of groups that share a guard test it once, and sibling
//! runs that test one field with different constants read it once and
//! binary-search the constants (a switch).
//!
//! Rule: every path through the trie reaches a group's body exactly when
//! all of its guards hold (an abort in a guard skips the run it heads),
//! so the program's answers stay the merged classifier's.

use super::{lengths, Maps, Unit};
use crate::emit::{Emitter, Label};
use crate::insn::{op, Insn};
use crate::Error;
use sluice_classifier::merged::Merged;
use sluice_ir::{CmpOp, Pred, Val};
use std::collections::HashMap;

impl Maps<'_> {
    /// Groups sorted by their guards, whose first `depth` guards hold:
    /// runs that share their next guard test it once.
    pub(super) fn trie(
        &self,
        e: &mut Emitter,
        m: &Merged,
        guards: &[Pred],
        groups: &[(u32, u32, &[usize])],
        depth: usize,
    ) -> Result<(), Error> {
        let mut i = 0;
        while i < groups.len() {
            let (g, k, gs) = groups[i];
            let skip = e.label();
            // What the verifier learnt of the lengths is forgotten at
            // each test (see `lengths`).
            lengths(e, self.mode);
            if gs.len() == depth {
                self.group(e, m, g, k, skip)?;
                e.mark(skip);
                i += 1;
                continue;
            }
            let guard = gs[depth];
            let end = i + groups[i..]
                .iter()
                .take_while(|(_, _, o)| o.get(depth) == Some(&guard))
                .count();
            if let Some(next) = self.switch(e, m, guards, groups, i, end, depth, skip)? {
                i = next;
                continue;
            }
            let inner = e.label();
            e.reject = skip;
            e.cond(&guards[guard], inner, skip)?;
            e.mark(inner);
            self.trie(e, m, guards, &groups[i..end], depth + 1)?;
            e.mark(skip);
            i = end;
        }
        Ok(())
    }

    /// Runs from `i` (the first ending at `end`) whose next guards are
    /// equalities on one value with different constants, when there are
    /// at least [`SWITCH`]: the value read once (an abort skips them
    /// all), a binary search of the constants to the run of the one it
    /// equals. Returns where the runs end, or `None` (nothing emitted).
    #[allow(clippy::too_many_arguments)]
    fn switch(
        &self,
        e: &mut Emitter,
        m: &Merged,
        guards: &[Pred],
        groups: &[(u32, u32, &[usize])],
        i: usize,
        end: usize,
        depth: usize,
        skip: Label,
    ) -> Result<Option<usize>, Error> {
        let Some((v, _)) = equality(&guards[groups[i].2[depth]]) else {
            return Ok(None);
        };
        // The runs: (start, end, constant).
        let mut runs = vec![(i, end, equality(&guards[groups[i].2[depth]]).expect("eq").1)];
        let mut at = end;
        while at < groups.len() {
            let Some(&g) = groups[at].2.get(depth) else {
                break;
            };
            match equality(&guards[g]) {
                Some((w, k)) if w == v => {
                    let stop = at
                        + groups[at..]
                            .iter()
                            .take_while(|(_, _, o)| o.get(depth) == Some(&g))
                            .count();
                    runs.push((at, stop, k));
                    at = stop;
                }
                _ => break,
            }
        }
        if runs.len() < SWITCH {
            return Ok(None);
        }
        e.reject = skip;
        e.val(v)?;
        let targets: Vec<(u32, Label)> = runs.iter().map(|r| (r.2, e.label())).collect();
        search_to(e, &targets, skip);
        for (r, (_, l)) in runs.iter().zip(&targets) {
            e.mark(*l);
            self.trie(e, m, guards, &groups[r.0..r.1], depth + 1)?;
            e.goto(skip);
        }
        e.mark(skip);
        Ok(Some(at))
    }
}

/// Runs of equalities on one value that the trie reads once and
/// searches, from this many.
const SWITCH: usize = 3;

/// Jump to the label of w0's constant among `targets` (sorted by
/// constant, distinct), to `none` when it is none of them.
fn search_to(e: &mut Emitter, targets: &[(u32, Label)], none: Label) {
    if targets.len() <= 4 {
        for (k, l) in targets {
            e.jump(
                Insn::new(op::JMP32 | op::JEQ | op::K, 0, 0, 0, *k as i32),
                *l,
            );
        }
        e.goto(none);
        return;
    }
    let mid = targets.len() / 2;
    let right = e.label();
    e.jump(
        Insn::new(
            op::JMP32 | op::JGT | op::K,
            0,
            0,
            0,
            targets[mid - 1].0 as i32,
        ),
        right,
    );
    search_to(e, &targets[..mid], none);
    e.mark(right);
    search_to(e, &targets[mid..], none);
}

/// `v == k`'s value and constant, if the guard is that.
fn equality(p: &Pred) -> Option<(&Val, u32)> {
    match p {
        Pred::Cmp {
            op: CmpOp::Eq,
            lhs,
            rhs: Val::Const(k),
        } => Some((lhs, *k)),
        _ => None,
    }
}

/// Number the guards so that each group's, sorted, read the commonest
/// field first, and equalities on one field sit side by side in constant
/// order (a run the trie tests with one read and a search); sort each
/// group's guards and the groups by them. Returns the guards by number.
pub(super) fn order_guards(interned: HashMap<Pred, usize>, units: &mut [Unit]) -> Vec<Pred> {
    let mut old: Vec<Pred> = vec![Pred::True; interned.len()];
    for (p, i) in interned {
        old[i] = p;
    }
    // The field a guard reads: an equality's value, else the guard itself.
    let mut fields: HashMap<&Val, usize> = HashMap::new();
    let field: Vec<usize> = old
        .iter()
        .enumerate()
        .map(|(i, p)| match equality(p) {
            Some((v, _)) => {
                let n = fields.len() + old.len();
                *fields.entry(v).or_insert(n)
            }
            None => i,
        })
        .collect();
    let mut uses: HashMap<usize, usize> = HashMap::new();
    for u in units.iter() {
        if let Unit::Group(_, _, gs) = u {
            for &g in gs {
                *uses.entry(field[g]).or_default() += 1;
            }
        }
    }
    let key = |g: usize| {
        let k = equality(&old[g]).map_or(0, |(_, k)| k);
        (std::cmp::Reverse(uses[&field[g]]), field[g], k, g)
    };
    let mut order: Vec<usize> = (0..old.len()).collect();
    order.sort_by_key(|&g| key(g));
    let mut new = vec![0; old.len()];
    for (n, &g) in order.iter().enumerate() {
        new[g] = n;
    }
    for u in units.iter_mut() {
        if let Unit::Group(_, _, gs) = u {
            for g in gs.iter_mut() {
                *g = new[*g];
            }
            gs.sort_unstable();
        }
    }
    units.sort_by(|a, b| match (a, b) {
        (Unit::Group(x, xk, xs), Unit::Group(y, yk, ys)) => (xs, x, xk).cmp(&(ys, y, yk)),
        _ => std::cmp::Ordering::Equal,
    });
    let mut guards = vec![Pred::True; old.len()];
    for (g, p) in old.into_iter().enumerate() {
        guards[new[g]] = p;
    }
    guards
}
