//! What a path asks of one field, in the two forms a node can answer:
//! equality with one of some keys (answered by one table lookup, however
//! many paths ask) or a condition (a range, excluded values, bits set or
//! clear), checked per edge.
//!
//! A path's atoms on the same field are folded into one label: `v > 5`
//! and `!(v > 9)` become the range 6..=9, `v == 7` with `v != 3` becomes
//! the key 7, `v in {1, 2, 3}` with `v >= 2` the keys 2 and 3, and
//! contradictions (`v == 1` and `v == 2`) make the path impossible. The
//! label holds exactly when all the atoms hold; the field's load must
//! succeed either way.
//!
//! ```
//! use sluice_classifier::tree::label::Label;
//! use sluice_classifier::path::Test;
//! let l = Label::of(&[(Test::Gt(5), true), (Test::Gt(9), false)]).unwrap();
//! assert!(l.holds(6) && l.holds(9) && !l.holds(10) && !l.holds(5));
//! assert_eq!(Label::of(&[(Test::Eq(7), true), (Test::Eq(3), false)]), Some(Label::Eq(vec![7])));
//! assert_eq!(Label::of(&[(Test::Eq(1), true), (Test::Eq(2), true)]), None);
//! ```

use crate::path::{KeySet, Test};

/// Sets larger than this stay one membership test instead of one table
/// key each: a path goes on below every key of its set, so each key
/// carries a copy of the rest of the path.
pub const MAX_KEYS: usize = 16;

/// A folded set of tests on one field.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Label {
    /// The value is one of these keys (sorted, at least one).
    Eq(Vec<u32>),
    /// The value meets a condition.
    Cond(Cond),
}

/// A condition on a value: every part must hold.
///
/// ```
/// use sluice_classifier::tree::label::Cond;
/// let c = Cond { lo: 10, hi: 20, ne: vec![15], ..Cond::default() };
/// assert!(c.holds(10) && !c.holds(15) && !c.holds(21));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cond {
    /// Smallest value allowed.
    pub lo: u32,
    /// Largest value allowed.
    pub hi: u32,
    /// Values excluded (sorted).
    pub ne: Vec<u32>,
    /// Masks of which some bit must be set, each (sorted).
    pub any: Vec<u32>,
    /// Bits that must be clear.
    pub none: u32,
    /// Sets the value must not be in.
    pub not_in: Vec<KeySet>,
    /// A set the value must be in (one too large to expand into keys).
    pub is_in: Option<KeySet>,
}

impl Default for Cond {
    /// The condition every value meets (the load must still succeed).
    fn default() -> Cond {
        Cond {
            lo: 0,
            hi: u32::MAX,
            ne: Vec::new(),
            any: Vec::new(),
            none: 0,
            not_in: Vec::new(),
            is_in: None,
        }
    }
}

impl Cond {
    /// Does `v` meet the condition?
    ///
    /// ```
    /// use sluice_classifier::tree::label::Cond;
    /// assert!(Cond::default().holds(12345));
    /// let flags = Cond { any: vec![0x02], none: 0x10, ..Cond::default() };
    /// assert!(flags.holds(0x02) && !flags.holds(0x12) && !flags.holds(0x01));
    /// ```
    #[inline]
    pub fn holds(&self, v: u32) -> bool {
        v >= self.lo
            && v <= self.hi
            && v & self.none == 0
            && self.any.iter().all(|m| v & m != 0)
            && !self.ne.contains(&v)
            && self.not_in.iter().all(|s| !s.contains(v))
            && self.is_in.as_ref().map_or(true, |s| s.contains(v))
    }

    /// True when the condition is only a range (and no other part).
    ///
    /// ```
    /// use sluice_classifier::tree::label::Cond;
    /// assert!(Cond { lo: 1, hi: 1023, ..Cond::default() }.is_range());
    /// assert!(!Cond { ne: vec![3], ..Cond::default() }.is_range());
    /// ```
    pub fn is_range(&self) -> bool {
        self.ne.is_empty()
            && self.any.is_empty()
            && self.none == 0
            && self.not_in.is_empty()
            && self.is_in.is_none()
    }
}

impl Label {
    /// Fold the tests a path makes of one field (each with the outcome it
    /// needs) into one label; `None` when no value meets them all.
    ///
    /// ```
    /// use sluice_classifier::tree::label::Label;
    /// use sluice_classifier::path::{KeySet, Test};
    /// let set = Test::In(KeySet::new(vec![1, 2, 3].into()));
    /// assert_eq!(Label::of(&[(set, true), (Test::Ge(2), true)]), Some(Label::Eq(vec![2, 3])));
    /// assert_eq!(Label::of(&[(Test::Ge(0), false)]), None);
    /// ```
    pub fn of(tests: &[(Test, bool)]) -> Option<Label> {
        let mut keys: Option<Vec<u32>> = None;
        let mut c = Cond::default();
        for (t, truth) in tests {
            match (t, *truth) {
                (Test::Eq(k), true) => keys = Some(intersect(keys, &[*k])),
                (Test::In(s), true) => keys = Some(intersect(keys, s.sorted())),
                (Test::Eq(k), false) => c.ne.push(*k),
                (Test::In(s), false) => c.not_in.push(s.clone()),
                (Test::Gt(k), true) => c.lo = c.lo.max(k.checked_add(1)?),
                (Test::Gt(k), false) => c.hi = c.hi.min(*k),
                (Test::Ge(k), true) => c.lo = c.lo.max(*k),
                (Test::Ge(k), false) => c.hi = c.hi.min(k.checked_sub(1)?),
                (Test::Set(0), true) => return None,
                (Test::Set(m), true) => c.any.push(*m),
                (Test::Set(m), false) => c.none |= m,
            }
        }
        if let Some(keys) = keys {
            let keys: Vec<u32> = keys.into_iter().filter(|&k| c.holds(k)).collect();
            return match keys.len() {
                0 => None,
                n if n > MAX_KEYS => Some(Label::Cond(Cond {
                    is_in: Some(KeySet::new(keys.into())),
                    ..Cond::default()
                })),
                _ => Some(Label::Eq(keys)),
            };
        }
        if c.lo > c.hi {
            return None;
        }
        if c.lo == c.hi {
            return c.holds(c.lo).then(|| Label::Eq(vec![c.lo]));
        }
        c.ne.sort_unstable();
        c.ne.dedup();
        c.ne.retain(|&k| k >= c.lo && k <= c.hi);
        c.any.sort_unstable();
        c.any.dedup();
        // A mask of which some bit must be set, all of whose bits must be
        // clear, leaves nothing.
        if c.any.iter().any(|m| m & !c.none == 0) {
            return None;
        }
        c.not_in.sort();
        c.not_in.dedup();
        Some(Label::Cond(c))
    }

    /// Does value `v` meet the label?
    ///
    /// ```
    /// assert!(sluice_classifier::tree::label::Label::Eq(vec![1, 5]).holds(5));
    /// ```
    pub fn holds(&self, v: u32) -> bool {
        match self {
            Label::Eq(keys) => keys.binary_search(&v).is_ok(),
            Label::Cond(c) => c.holds(v),
        }
    }
}

fn intersect(keys: Option<Vec<u32>>, with: &[u32]) -> Vec<u32> {
    match keys {
        None => with.to_vec(),
        Some(k) => k
            .into_iter()
            .filter(|x| with.binary_search(x).is_ok())
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every combination of up to three tests folds to a label that holds
    /// exactly where they all do.
    #[test]
    fn labels_mean_their_tests() {
        let consts = [0u32, 1, 2, 3, 7, 8, 0xff, u32::MAX];
        let mut tests = Vec::new();
        for &k in &consts {
            tests.push(Test::Eq(k));
            tests.push(Test::Gt(k));
            tests.push(Test::Ge(k));
            tests.push(Test::Set(k));
        }
        tests.push(Test::In(KeySet::new(vec![1, 3, 8, u32::MAX].into())));
        tests.push(Test::In(KeySet::new(vec![0, 2, 3].into())));
        let vals: Vec<u32> = (0..12)
            .chain([0xfe, 0xff, 0x100, u32::MAX - 1, u32::MAX])
            .collect();
        let mut checked = 0;
        for a in &tests {
            for b in &tests {
                for (ta, tb) in [(true, true), (true, false), (false, true), (false, false)] {
                    let both = [(a.clone(), ta), (b.clone(), tb)];
                    let label = Label::of(&both);
                    for &v in &vals {
                        let want = both.iter().all(|(t, truth)| t.apply(v) == *truth);
                        let got = label.as_ref().is_some_and(|l| l.holds(v));
                        assert_eq!(got, want, "{both:?} at {v}: {label:?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 10_000);
    }
}
