//! Filters as the tree folds them (each accepting path a list of items,
//! one per field), with the bookkeeping every engine built from such
//! paths needs: slots, ids, priorities, filters that run whole, and how a
//! packet's slots become its answer. Used by the engines measured
//! against the tree ([`crate::bitvec`], [`crate::cuts`], [`crate::dag`]).

use crate::merged::{Compiled, Whole};
use crate::tree::field::{Fields, Memo};
use crate::tree::node::Item;
use crate::tree::{winner, DecisionTree};
use std::cmp::Reverse;

pub(crate) use crate::tree::Dedup;

/// Filters as folded paths (see the module doc).
#[derive(Clone, Debug, Default)]
pub(crate) struct PathSet {
    pub(crate) fields: Fields,
    /// Each accepting path: its filter's slot and its items.
    pub(crate) paths: Vec<(u32, Vec<Item>)>,
    /// Id and priority of each slot.
    ids: Vec<u32>,
    prios: Vec<i32>,
    /// Whether some filter has several paths (its slot can come up twice).
    several: bool,
    /// Filters that run whole, in winning order: (id, priority, program).
    whole: Vec<(u32, i32, Whole)>,
}

impl PathSet {
    /// Fold `(id, filter, priority)` triples (ids distinct).
    pub(crate) fn gather<'a>(
        filters: impl IntoIterator<Item = (u32, &'a Compiled, i32)>,
    ) -> PathSet {
        let mut s = PathSet::default();
        for (id, c, priority) in filters {
            match c.absorbed_paths() {
                Some(ps) => {
                    let slot = s.ids.len() as u32;
                    s.ids.push(id);
                    s.prios.push(priority);
                    let before = s.paths.len();
                    for p in ps {
                        if let Some(items) = DecisionTree::fold_path(&mut s.fields, p) {
                            s.paths.push((slot, items));
                        }
                    }
                    s.several |= s.paths.len() - before > 1;
                }
                None => s.whole.push((id, priority, c.whole().clone())),
            }
        }
        s.whole.sort_by_key(|w| (Reverse(w.1), w.0));
        s
    }

    /// Push onto `out` the slot of each of `paths` (indexes into
    /// [`PathSet::paths`]) whose every item reads and holds for the packet.
    pub(crate) fn push_holding(
        &self,
        paths: &[u32],
        pkt: &[u8],
        wirelen: u32,
        memo: &mut Memo,
        out: &mut Vec<u32>,
    ) {
        for &p in paths {
            let (slot, items) = &self.paths[p as usize];
            let holds = items.iter().all(|i| {
                let v = self.fields.read(i.field, pkt, wirelen, memo);
                v.is_some_and(|v| i.label.holds(v))
            });
            if holds {
                out.push(*slot);
            }
        }
    }

    /// The ids of the filters of `slots` (each perhaps more than once) and
    /// of the accepting filters that run whole, each once, into `out`.
    pub(crate) fn report(
        &self,
        slots: impl Iterator<Item = u32>,
        pkt: &[u8],
        wirelen: u32,
        d: &mut Dedup,
        out: &mut Vec<u32>,
    ) {
        let several = self.several;
        if several {
            d.start(self.ids.len());
        }
        let distinct = slots.filter(|&slot| !several || d.first_time(slot));
        out.clear();
        out.extend(distinct.map(|slot| self.ids[slot as usize]));
        for (id, _, w) in &self.whole {
            if w.run(pkt, wirelen) != 0 {
                out.push(*id);
            }
        }
    }

    /// The accepting filter of highest priority, the lowest id among
    /// equals, among the filters of `slots` and those that run whole.
    pub(crate) fn first(
        &self,
        slots: impl Iterator<Item = u32>,
        pkt: &[u8],
        wirelen: u32,
    ) -> Option<u32> {
        winner(
            slots.map(|s| (self.ids[s as usize], self.prios[s as usize])),
            self.whole
                .iter()
                .map(|(id, priority, w)| (*id, *priority, move || w.run(pkt, wirelen) != 0)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitvec::{BitScratch, BitVectors};
    use crate::cuts::{CutScratch, Cuts};
    use crate::dag::{Dag, DagScratch};
    use sluice_ir::{CmpOp, Filter, Pred, Size, Val};

    /// Filters of every test kind on two fields (a byte and a half word,
    /// ranges ending at the field's top and at `u32::MAX`, excluded
    /// values, bit masks, sets), alone and combined with `and`, `or` and
    /// `not`: bit vectors, cuts and the diagram accept exactly what each
    /// filter does, on every value of the byte, with the half word
    /// present and cut off.
    #[test]
    fn engines_accept_what_each_filter_does() {
        let byte = || Val::load_abs(0, Size::Byte);
        let half = || Val::load_abs(1, Size::Half);
        let cmp = |op, v: Val, k| Pred::cmp(op, v, Val::Const(k));
        let mut preds = Vec::new();
        // Each kind of test with its own constants, so that no interval
        // bound is made by another kind's.
        for (op, ks) in [
            (CmpOp::Eq, &[0, 1, 0x80, 0xff, 0x100][..]),
            (CmpOp::Gt, &[2, 0x41, 0xfe, u32::MAX][..]),
            (CmpOp::Ge, &[0, 5, 0x90, 0x100][..]),
            (CmpOp::Set, &[0, 0x11, 0x80][..]),
        ] {
            for &k in ks {
                preds.push(cmp(op, byte(), k));
            }
        }
        preds.push(cmp(CmpOp::Eq, half(), 0x0102));
        preds.push(cmp(CmpOp::Gt, half(), 0x8000));
        let mut all = Vec::new();
        for (i, p) in preds.iter().enumerate() {
            let q = &preds[(i * 7 + 3) % preds.len()];
            all.push(p.clone());
            all.push(Pred::not(p.clone()));
            all.push(Pred::and(vec![p.clone(), Pred::not(q.clone())]));
            all.push(Pred::or(vec![p.clone(), q.clone()]));
        }
        // The whole set, then its negations alone: there no range's upper
        // bound is another filter's lower one.
        let negations: Vec<Pred> = preds.iter().map(|p| Pred::not(p.clone())).collect();
        assert!(check(&all).cuts > 0, "the whole set is cut");
        check(&negations);
    }

    /// Check both engines on `filters`; the cuts' size.
    fn check(filters: &[Pred]) -> crate::cuts::CutStats {
        let compiled: Vec<Compiled> = filters
            .iter()
            .map(|p| Compiled::new(Filter::new(p.clone(), 1)))
            .collect();
        let triples = || {
            compiled
                .iter()
                .enumerate()
                .map(|(i, c)| (i as u32, c, (i % 5) as i32))
        };
        let bv = BitVectors::build(triples());
        let cuts = Cuts::build(triples());
        // The diagram whole, and with budgets that leave its root or some
        // of its states to be checked path by path.
        let dags = [0, 50, 150, u64::MAX].map(|work| Dag::build_within(triples(), work));
        let (mut s, mut cs, mut out) = (BitScratch::default(), CutScratch::default(), Vec::new());
        let mut ds = DagScratch::default();
        for v in 0..=255u8 {
            for pkt in [&[v, 1, 2][..], &[v][..]] {
                let want: Vec<u32> = compiled
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| c.whole().run(pkt, pkt.len() as u32) != 0)
                    .map(|(i, _)| i as u32)
                    .collect();
                bv.classify(pkt, pkt.len() as u32, &mut s, &mut out);
                out.sort_unstable();
                assert_eq!(out, want, "bit vectors: byte {v}, {} bytes", pkt.len());
                let first = want.iter().copied().max_by_key(|&i| (i % 5, Reverse(i)));
                assert_eq!(bv.classify_first(pkt, pkt.len() as u32, &mut s), first);
                cuts.classify(pkt, pkt.len() as u32, &mut cs, &mut out);
                out.sort_unstable();
                assert_eq!(out, want, "cuts: byte {v}, {} bytes", pkt.len());
                assert_eq!(cuts.classify_first(pkt, pkt.len() as u32, &mut cs), first);
                for dag in &dags {
                    dag.classify(pkt, pkt.len() as u32, &mut ds, &mut out);
                    out.sort_unstable();
                    let rest = dag.stats().rest;
                    assert_eq!(
                        out,
                        want,
                        "dag ({rest} rest): byte {v}, {} bytes",
                        pkt.len()
                    );
                    assert_eq!(dag.classify_first(pkt, pkt.len() as u32, &mut ds), first);
                }
            }
        }
        assert!(s.work.packets == 512 * 2 && s.work.reads > 0);
        let rest = dags.each_ref().map(|d| d.stats().rest);
        assert!(rest[0] == 1 && rest[1] > 0 && rest[3] == 0, "{rest:?}");
        cuts.stats()
    }
}
