//! Keys for key-only inserts, made from the set itself.
//!
//! A filter of one path is inserted key-only by giving the constants of
//! its equality tests, in the path's order (what
//! [`sluice::classifier::Classifier::insert_keys`] takes). The template is
//! a filter of the set of one path; the other filters of the set with the
//! same path up to those constants are its samples. New keys are the
//! samples' keys with the position that varies most among them (a host
//! address, for a host-and-port filter) moved on: more hosts of the same
//! customers, each key new.

use sluice::classifier::merged::Compiled;
use sluice::classifier::path::{Atom, KeySet, Path, Test};
use std::collections::HashSet;

/// The one path of `c`, if it has exactly one.
pub fn single_path(c: &Compiled) -> Option<&Path> {
    match c.paths()? {
        [p] => Some(p),
        _ => None,
    }
}

/// A path with the constants of its equality tests cleared: paths of one
/// shape have equal shapes.
pub fn shape_of(p: &Path) -> Vec<Atom> {
    p.with_key(&vec![0; p.key().len()]).atoms
}

/// A filter's shape: its paths with the constants of every test cleared
/// (equalities, comparisons, bit tests and sets; the fields, masks and
/// offsets stay), sorted. Filters that differ only in such constants
/// (`host A` and `host B`, `len > 100` and `len > 200`) have one shape;
/// `None` for a filter that runs whole.
pub fn filter_shape(c: &Compiled) -> Option<Vec<Vec<Atom>>> {
    let clear = |a: &Atom| match a {
        Atom::Field { val, test, truth } => Atom::Field {
            val: val.clone(),
            test: match test {
                Test::Eq(_) => Test::Eq(0),
                Test::Gt(_) => Test::Gt(0),
                Test::Ge(_) => Test::Ge(0),
                Test::Set(_) => Test::Set(0),
                Test::In(_) => Test::In(KeySet::new(Vec::new().into())),
            },
            truth: *truth,
        },
        a => a.clone(),
    };
    let mut paths: Vec<Vec<Atom>> = c
        .paths()?
        .iter()
        .map(|p| p.atoms.iter().map(clear).collect())
        .collect();
    paths.sort();
    paths.dedup();
    Some(paths)
}

/// `count` distinct keys like `samples` (all of one width, at least one),
/// none of them a sample.
pub fn keys_like(samples: &[Vec<u32>], count: usize) -> Vec<Vec<u32>> {
    let width = samples[0].len();
    // The position with the most distinct values among the samples.
    let spread = |q: usize| samples.iter().map(|k| k[q]).collect::<HashSet<_>>().len();
    let q = (0..width).max_by_key(|&q| spread(q)).unwrap_or(0);
    let taken: HashSet<&Vec<u32>> = samples.iter().collect();
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(count);
    let mut step = 1u32;
    while out.len() < count {
        for s in samples {
            let mut k = s.clone();
            k[q] = k[q].wrapping_add(step);
            if !taken.contains(&k) && seen.insert(k.clone()) {
                out.push(k);
                if out.len() == count {
                    break;
                }
            }
        }
        step += 1;
    }
    out
}
