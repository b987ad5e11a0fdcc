//! A filter's accepting paths with the negations its other paths make
//! needless taken out.
//!
//! Path enumeration ([`crate::path`]) keeps every test a path passed,
//! so `src == A or dst == A` has the paths `src == A` and
//! `src != A, dst == A`: exact, but the second path's `src != A` is a
//! condition of its own in every filter written that way, which a merged
//! structure cannot share. When every packet that meets path `P` with one
//! atom `a` turned into its opposite is accepted by the filter's other
//! paths, `P` may drop `a` and keep only that `a`'s value loads: a packet
//! that meets the rest of `P` either meets `a` (and `P`) or its opposite
//! (and another path). Whether the other paths accept every such packet
//! is settled by a path whose atoms it meets, or by splitting on one atom
//! a path misses, a few levels deep (`ip6 src net A/48 or ip6 dst net
//! A/48` tests two words of each address and needs that). Port ranges and
//! `src or dst` tests come down to one test per path this way, and a path
//! another implies is dropped. The load stays because it may abort (libpcap's rule), unless
//! another atom of the path loads further from the same base, which
//! cannot succeed without it.
//!
//! `src == 7 or dst == 7` comes down to two paths of one test each
//! (`tests::either_address_is_one_test_per_path`). Crate-internal: the
//! merged classifier's [`Compiled`](crate::merged::Compiled) applies it.

use crate::path::{load_span, Atom, Path, Test};
use rustc_hash::FxHashMap as HashMap;
use sluice_ir::Val;

/// Paths with at most this many members get the search of [`Atoms::covered`];
/// larger sets only the plain check.
const SEARCH_PATHS: usize = 32;

/// How many atoms deep [`Atoms::covered`] splits.
const SEARCH_DEPTH: u32 = 6;

/// True when no value meets both atoms (tests of one value).
fn contradict(a: &Atom, b: &Atom) -> bool {
    let (
        Atom::Field { val, test, truth },
        Atom::Field {
            val: v2,
            test: t2,
            truth: r2,
        },
    ) = (a, b)
    else {
        return false;
    };
    if val != v2 {
        return false;
    }
    match (test, truth, t2, r2) {
        (Test::Eq(k), true, t, r) | (t, r, Test::Eq(k), true) => t.apply(*k) != *r,
        _ => test == t2 && truth != r2,
    }
}

/// A set of atoms, as bits of their numbers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Set([u64; 4]);

/// The most atoms (with their opposites and load-only forms) a filter may
/// have for the search; a larger filter keeps its paths as they are.
const MAX_ATOMS: usize = 256;

impl Set {
    fn of(i: u32) -> Set {
        let mut s = Set::default();
        s.0[i as usize / 64] = 1 << (i % 64);
        s
    }
    fn has(self, i: u32) -> bool {
        self.0[i as usize / 64] >> (i % 64) & 1 != 0
    }
    fn with(self, i: u32) -> Set {
        self | Set::of(i)
    }
    fn without(self, i: u32) -> Set {
        self & !Set::of(i)
    }
    fn is_empty(self) -> bool {
        self.0 == [0; 4]
    }
    fn meets(self, o: Set) -> bool {
        !(self & o).is_empty()
    }
    fn within(self, o: Set) -> bool {
        (self & !o).is_empty()
    }
    fn len(self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    fn iter(self) -> impl Iterator<Item = u32> {
        (0..4u32).flat_map(move |w| {
            let mut rest = self.0[w as usize];
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let i = rest.trailing_zeros();
                    rest &= rest - 1;
                    w * 64 + i
                })
            })
        })
    }
}

impl std::ops::BitAnd for Set {
    type Output = Set;
    fn bitand(self, o: Set) -> Set {
        Set(std::array::from_fn(|i| self.0[i] & o.0[i]))
    }
}

impl std::ops::BitOr for Set {
    type Output = Set;
    fn bitor(self, o: Set) -> Set {
        Set(std::array::from_fn(|i| self.0[i] | o.0[i]))
    }
}

impl std::ops::Not for Set {
    type Output = Set;
    fn not(self) -> Set {
        Set(self.0.map(|w| !w))
    }
}

/// The atoms of a filter's paths, numbered, with their opposites and
/// load-only forms, so that conjunctions are bit sets and the search
/// compares bits instead of IR trees.
struct Atoms {
    list: Vec<Atom>,
    /// Each atom's opposite (`u32::MAX` for a predicate atom).
    flip: Vec<u32>,
    /// The atom that only asks the atom's value to load (itself for one).
    loads: Vec<u32>,
    /// What each atom implies: itself, and every load-only atom whose
    /// value cannot fail to load when it holds.
    implies: Vec<Set>,
    /// The load-only atoms.
    loads_only: Set,
    /// The atoms each atom contradicts (no value meets both).
    conflicts: Vec<Set>,
    memo: HashMap<(Set, u32), bool>,
}

impl Atoms {
    /// Number every atom of `paths`, with its opposite and load-only form.
    fn of(paths: &[Path]) -> Option<Atoms> {
        let mut list: Vec<Atom> = Vec::new();
        let mut ids: HashMap<Atom, u32> = HashMap::default();
        let mut add = |a: Atom, list: &mut Vec<Atom>| -> u32 {
            *ids.entry(a.clone()).or_insert_with(|| {
                list.push(a);
                (list.len() - 1) as u32
            })
        };
        for p in paths {
            for a in &p.atoms {
                add(a.clone(), &mut list);
            }
        }
        let originals = list.len();
        let mut flip = vec![u32::MAX; originals];
        let mut loads = vec![u32::MAX; originals];
        for i in 0..originals {
            if let Atom::Field { val, test, truth } = list[i].clone() {
                flip[i] = add(
                    Atom::Field {
                        val: val.clone(),
                        test: test.clone(),
                        truth: !truth,
                    },
                    &mut list,
                );
                loads[i] = add(Atom::load_only(val), &mut list);
            }
        }
        if list.len() > MAX_ATOMS {
            return None;
        }
        // The added atoms' own opposites and load-only forms, where known.
        flip.resize(list.len(), u32::MAX);
        loads.resize(list.len(), u32::MAX);
        for i in 0..originals {
            let f = flip[i];
            if f != u32::MAX {
                flip[f as usize] = i as u32;
                loads[f as usize] = loads[i];
            }
        }
        let mut loads_only = Set::default();
        for (i, a) in list.iter().enumerate() {
            if a.is_load_only() {
                loads_only = loads_only.with(i as u32);
                loads[i] = i as u32;
            }
        }
        fn span(a: &Atom) -> Option<(&Val, u64)> {
            match a {
                Atom::Field { val, .. } => load_span(val),
                Atom::Pred { .. } => None,
            }
        }
        let never = |a: &Atom| {
            matches!(
                a,
                Atom::Field {
                    val: Val::Len | Val::Const(_),
                    ..
                }
            )
        };
        let implies: Vec<Set> = list
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let mut set = Set::of(i as u32);
                if loads[i] != u32::MAX {
                    set = set.with(loads[i]);
                }
                for (j, b) in list.iter().enumerate() {
                    if !b.is_load_only() {
                        continue;
                    }
                    let covered = never(b)
                        || matches!((span(a), span(b)), (Some((ba, ea)), Some((bb, eb))) if ba == bb && ea >= eb);
                    if covered {
                        set = set.with(j as u32);
                    }
                }
                set
            })
            .collect();
        let conflicts: Vec<Set> = list
            .iter()
            .map(|a| {
                list.iter()
                    .enumerate()
                    .filter(|(_, b)| contradict(a, b))
                    .fold(Set::default(), |s, (j, _)| s.with(j as u32))
            })
            .collect();
        Some(Atoms {
            list,
            flip,
            loads,
            implies,
            loads_only,
            conflicts,
            memo: HashMap::default(),
        })
    }

    /// True when no packet meets every atom of `c`.
    fn contradictory(&self, c: Set) -> bool {
        c.iter().any(|i| self.conflicts[i as usize].meets(c))
    }

    /// Everything the atoms of `c` imply.
    fn closure(&self, c: Set) -> Set {
        c.iter()
            .fold(Set::default(), |out, i| out | self.implies[i as usize])
    }

    /// True if the atoms of `c` other than `a` make `a`'s value load.
    fn load_implied(&self, c: Set, a: u32) -> bool {
        let l = self.loads[a as usize];
        l != u32::MAX && self.closure(c.without(a)).has(l)
    }

    /// Is every packet that meets all of `c` accepted by some path? A path
    /// whose atoms `c` implies settles it; failing that, a path whose
    /// missing atoms `c` already loads splits the question on its first
    /// missing atom `m`: `c` with `m`, and `c` with `m`'s opposite, each
    /// searched one level less deep (an IPv6 address is four words, so
    /// `src or dst host` needs four levels).
    fn covered(&mut self, c: Set, paths: &[Set], depth: u32) -> bool {
        if self.contradictory(c) {
            return true;
        }
        let have = self.closure(c);
        if paths.iter().any(|q| q.within(have)) {
            return true;
        }
        if depth == 0 || paths.len() > SEARCH_PATHS {
            return false;
        }
        if let Some(&known) = self.memo.get(&(c, depth)) {
            return known;
        }
        let mut near: Vec<Set> = paths
            .iter()
            .map(|q| *q & !have)
            .filter(|missing| {
                missing.len() <= depth
                    && !missing.meets(self.loads_only)
                    && missing.iter().all(|m| {
                        let f = self.flip[m as usize];
                        !self.conflicts[m as usize].meets(c)
                            && f != u32::MAX
                            && !c.has(f)
                            && have.has(self.loads[m as usize])
                    })
            })
            .collect();
        near.sort_by_key(|m| m.len());
        let mut answer = false;
        for missing in near.into_iter().take(2) {
            let m = missing.iter().next().expect("a missing atom");
            let opposite = self.flip[m as usize];
            if self.covered(c.with(m), paths, depth - 1)
                && self.covered(c.with(opposite), paths, depth - 1)
            {
                answer = true;
                break;
            }
        }
        self.memo.insert((c, depth), answer);
        answer
    }
}

/// The paths with needless tests dropped (see the module doc); the
/// filter accepts exactly the same packets.
///
/// No paths stay no paths (`tests::no_paths_stay_none`).
pub(crate) fn absorb(paths: Vec<Path>) -> Vec<Path> {
    let Some(accept) = paths.first().map(|p| p.accept) else {
        return paths;
    };
    if paths.iter().any(|p| p.accept != accept) {
        return paths;
    }
    let Some(mut atoms) = Atoms::of(&paths) else {
        return paths;
    };
    let index: HashMap<&Atom, u32> = atoms
        .list
        .iter()
        .enumerate()
        .map(|(i, a)| (a, i as u32))
        .collect();
    let mut ps: Vec<Set> = paths
        .iter()
        .map(|p| p.atoms.iter().fold(Set::default(), |s, a| s.with(index[a])))
        .collect();
    drop(index);
    loop {
        let mut changed = false;
        for pi in 0..ps.len() {
            for a in ps[pi].iter().collect::<Vec<_>>() {
                let opposite = atoms.flip[a as usize];
                if opposite == u32::MAX || atoms.loads_only.has(a) || !ps[pi].has(a) {
                    continue;
                }
                // Only a path that takes the other way at `a` can cover
                // the packets that do (paths that do not test it at all
                // are handled below).
                if !ps.iter().any(|q| q.has(opposite)) {
                    continue;
                }
                let c = ps[pi].without(a).with(opposite);
                if !atoms.covered(c, &ps, SEARCH_DEPTH) {
                    continue;
                }
                atoms.memo.clear();
                let keep_load = !atoms.load_implied(ps[pi], a);
                ps[pi] = ps[pi].without(a);
                if keep_load {
                    ps[pi] = ps[pi].with(atoms.loads[a as usize]);
                }
                changed = true;
            }
        }
        // Paths that became equal are one (fewer for the search).
        ps.sort_unstable();
        ps.dedup();
        if !changed {
            break;
        }
    }
    // A path another one's atoms all imply adds nothing.
    let closures: Vec<Set> = ps.iter().map(|p| atoms.closure(*p)).collect();
    let mut out: Vec<Path> = ps
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            !ps.iter()
                .enumerate()
                .any(|(j, q)| j != *i && q.len() < p.len() && q.within(closures[*i]))
        })
        .map(|(_, p)| {
            let mut a: Vec<Atom> = p.iter().map(|i| atoms.list[i as usize].clone()).collect();
            a.sort();
            Path { atoms: a, accept }
        })
        .collect();
    out.sort_by(|a, b| a.atoms.cmp(&b.atoms));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::paths;
    use sluice_ir::{BinOp, CmpOp, Pred, Size};

    #[test]
    fn either_address_is_one_test_per_path() {
        use sluice_ir::Val;
        let (src, dst) = (Val::load_abs(26, Size::Word), Val::load_abs(30, Size::Word));
        let host = Pred::or(vec![Pred::eq(src, 7), Pred::eq(dst, 7)]);
        let ps = absorb(paths(&host, 1).unwrap());
        assert_eq!(ps.len(), 2);
        assert!(ps.iter().all(|p| p.atoms.len() == 1));
    }

    #[test]
    fn no_paths_stay_none() {
        assert!(absorb(Vec::new()).is_empty());
    }

    fn holds(p: &Path, pkt: &[u8]) -> bool {
        p.atoms.iter().all(|a| a.holds(pkt, pkt.len() as u32))
    }

    /// Random predicates over a 6-byte packet: the absorbed paths accept
    /// exactly the packets the originals do, on every packet of every
    /// length up to 6 over a small alphabet.
    #[test]
    fn absorbed_paths_mean_the_same() {
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut pkts = vec![vec![]];
        for len in 1..=6usize {
            for i in 0..200u64 {
                pkts.push((0..len).map(|j| ((i >> j) % 3) as u8).collect());
            }
        }
        let mut shrunk = 0;
        for _ in 0..400 {
            let atom = |next: &mut dyn FnMut(u64) -> u64| {
                let v = match next(3) {
                    0 => Val::load_abs(next(6) as u32, Size::Byte),
                    1 => Val::load_abs(next(5) as u32, Size::Half),
                    _ => Val::bin(
                        BinOp::And,
                        Val::load_abs(next(6) as u32, Size::Byte),
                        Val::Const(1),
                    ),
                };
                match next(3) {
                    0 => Pred::eq(v, next(3) as u32),
                    1 => Pred::cmp(CmpOp::Gt, v, Val::Const(next(3) as u32)),
                    _ => Pred::not(Pred::eq(v, next(3) as u32)),
                }
            };
            let mut parts = Vec::new();
            for _ in 0..2 + next(3) {
                let conj: Vec<Pred> = (0..1 + next(2)).map(|_| atom(&mut next)).collect();
                parts.push(Pred::and(conj));
            }
            let pred = Pred::or(parts);
            let Ok(before) = paths(&pred, 1) else {
                continue;
            };
            let after = absorb(before.clone());
            let atoms = |ps: &[Path]| ps.iter().map(|p| p.atoms.len()).sum::<usize>();
            shrunk += (atoms(&after) < atoms(&before)) as usize;
            for pkt in &pkts {
                let a = before.iter().any(|p| holds(p, pkt));
                let b = after.iter().any(|p| holds(p, pkt));
                assert_eq!(a, b, "{pred:?} on {pkt:?}: {before:?} vs {after:?}");
            }
        }
        assert!(shrunk > 50, "only {shrunk} sets got smaller");
    }
}
