//! Sorting a packet's filter ids: the engines find a packet's filters in
//! their own order (the tree's walk, a group's chain), and readers give
//! them in increasing id order. The rule: distinct ids in, the same ids
//! out in order, in time linear in their number and the largest id / 64.

/// Below this many ids a comparison sort is as fast as the bitmap.
const SORT_MAX: usize = 24;

/// Sort distinct filter ids in place. A packet of a broad mix matches a
/// hundred filters or more, and sorting them by comparison cost more
/// than finding them (issue 33: a quarter of `sluice split`'s time, and
/// 40% of a reader's one packet at a time): many ids are set as bits in
/// `bits` (left all zero again) and read back in order.
///
/// ```
/// let mut ids = (0..100u32).rev().map(|i| i * 7).collect::<Vec<_>>();
/// sluice_classifier::sort_ids(&mut ids, &mut Vec::new());
/// assert!(ids.windows(2).all(|w| w[0] < w[1]) && ids.len() == 100);
/// ```
pub fn sort_ids(ids: &mut Vec<u32>, bits: &mut Vec<u64>) {
    if ids.len() <= SORT_MAX {
        ids.sort_unstable();
        return;
    }
    let max = ids.iter().copied().max().unwrap_or(0) as usize;
    let words = max / 64 + 1;
    if bits.len() < words {
        bits.resize(words, 0);
    }
    for &id in ids.iter() {
        bits[id as usize / 64] |= 1 << (id % 64);
    }
    ids.clear();
    for (w, word) in bits[..words].iter_mut().enumerate() {
        let mut x = std::mem::take(word);
        while x != 0 {
            ids.push((w * 64) as u32 + x.trailing_zeros());
            x &= x - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::sort_ids;
    use proptest::prelude::*;

    proptest! {
        /// Equal to a comparison sort on every size around the switch,
        /// ids up to 2^20, and the bitmap left clear for the next call.
        #[test]
        fn sorts_like_a_comparison_sort(set in prop::collection::hash_set(0u32..1 << 20, 0..200)) {
            let mut ids: Vec<u32> = set.into_iter().collect();
            let mut want = ids.clone();
            want.sort_unstable();
            let mut bits = Vec::new();
            sort_ids(&mut ids, &mut bits);
            prop_assert_eq!(&ids, &want);
            prop_assert!(bits.iter().all(|&w| w == 0));
        }
    }
}
