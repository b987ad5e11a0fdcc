//! A small seeded random number generator (SplitMix64) with the few draws
//! the generator needs.
//!
//! The crate keeps its own generator instead of `rand`'s so that a seed
//! gives the same filters and packets on every platform and with every
//! version of every dependency: `rand` documents that its value-producing
//! algorithms (ranges, floats, choices) may change between releases, which
//! would silently change every workload. SplitMix64 (Steele, Lea and Flood
//! 2014) passes BigCrush, needs one `u64` of state and can be started at
//! any (seed, stream, index) by hashing them, so filter `i` and packet `i`
//! are drawn from their own streams and do not depend on how many came
//! before them.

/// The golden-ratio increment of SplitMix64.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijective 64-bit mixer.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Independent streams of one seed (each draw site has its own).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stream {
    /// The attributes of customer `i`.
    Customer = 1,
    /// Filter `i`.
    Filter = 2,
    /// Packet `i`.
    Packet = 3,
    /// The universe's global constants (permutation offsets, label pools).
    Universe = 4,
    /// Broad-mix expression `i`.
    Broad = 5,
    /// Packet `i` of traffic drawn from flows.
    FlowPacket = 6,
    /// Five-tuple rule `i`.
    Acl = 7,
    /// Packet `i` of traffic drawn from five-tuple rules.
    AclPacket = 8,
}

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    /// The generator for item `index` of `stream` under `seed`.
    pub(crate) fn new(seed: u64, stream: Stream, index: u64) -> Rng {
        let s = mix(seed ^ mix((stream as u64).wrapping_mul(GAMMA)));
        Rng(mix(s ^ mix(index.wrapping_add(GAMMA))))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GAMMA);
        mix(self.0)
    }

    /// The next 32 random bits.
    pub(crate) fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (`n > 0`; multiply-shift, bias below 2^-32 for
    /// the ranges used here).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `0..n` as a `usize`.
    pub(crate) fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        debug_assert!(lo <= hi);
        lo + self.below(hi - lo + 1)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.index(xs.len())]
    }

    /// An index drawn with the given (not all zero) weights.
    pub(crate) fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut r = self.below(total);
        for (i, &w) in weights.iter().enumerate() {
            if r < u64::from(w) {
                return i;
            }
            r -= u64::from(w);
        }
        unreachable!("weights sum to more than the draw")
    }

    /// One value of `(weight, value)` pairs.
    pub(crate) fn weighted_pick<T: Copy>(&mut self, table: &[(u32, T)]) -> T {
        let total: u64 = table.iter().map(|&(w, _)| u64::from(w)).sum();
        let mut r = self.below(total);
        for &(w, v) in table {
            if r < u64::from(w) {
                return v;
            }
            r -= u64::from(w);
        }
        unreachable!("weights sum to more than the draw")
    }

    /// Fill `out` with random bytes.
    pub(crate) fn fill(&mut self, out: &mut [u8]) {
        for chunk in out.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map(|_| Rng::new(7, Stream::Filter, 3).next_u64())
            .collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let b = Rng::new(7, Stream::Filter, 4).next_u64();
        let c = Rng::new(7, Stream::Packet, 3).next_u64();
        let d = Rng::new(8, Stream::Filter, 3).next_u64();
        assert!(a[0] != b && a[0] != c && a[0] != d && b != c);
        // Fixed values: a seed's workload must never change silently.
        let mut r = Rng::new(0, Stream::Customer, 0);
        assert_eq!(mix(0), 0);
        assert_eq!(mix(1), 0x5692_161d_100b_05e5);
        assert_eq!(r.next_u64(), 0xfa25_02a8_9c74_497f);
        assert_eq!(r.next_u64(), 0x860d_24d0_1744_9cec);
    }

    #[test]
    fn draws_stay_in_range() {
        let mut r = Rng::new(1, Stream::Packet, 0);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            let v = r.range(5, 14);
            assert!((5..=14).contains(&v));
            seen[(v - 5) as usize] = true;
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert!(seen.iter().all(|&s| s));
        let mut counts = [0; 3];
        for _ in 0..3000 {
            counts[r.weighted(&[1, 0, 2])] += 1;
        }
        assert_eq!(counts[1], 0);
        assert!(counts[2] > counts[0]);
    }
}
