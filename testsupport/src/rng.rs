//! A small seeded generator (splitmix64).

/// A small seeded generator (splitmix64): the same seed gives the same
/// numbers everywhere, so every failure reproduces from its seed.
///
/// ```
/// let mut r = sluice_testsupport::Rng::new(1);
/// let v = r.bytes(4);
/// assert_eq!(v.len(), 4);
/// assert!(r.range(3, 5) >= 3);
/// ```
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    ///
    /// ```
    /// let (mut a, mut b) = (sluice_testsupport::Rng::new(9), sluice_testsupport::Rng::new(9));
    /// assert_eq!(a.next_u64(), b.next_u64());
    /// ```
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    ///
    /// ```
    /// let mut r = sluice_testsupport::Rng::new(0);
    /// assert_ne!(r.next_u64(), r.next_u64());
    /// ```
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// The next 32 random bits.
    ///
    /// ```
    /// use sluice_testsupport::Rng;
    /// // The high half of the next 64 bits.
    /// assert_eq!(Rng::new(0).next_u32() as u64, Rng::new(0).next_u64() >> 32);
    /// ```
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// A number below `n` (0 when `n` is 0).
    ///
    /// ```
    /// let mut r = sluice_testsupport::Rng::new(3);
    /// assert!(r.below(5) < 5);
    /// assert_eq!(r.below(0), 0);
    /// ```
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// A number from `lo` to `hi`, both included.
    ///
    /// ```
    /// let mut r = sluice_testsupport::Rng::new(3);
    /// assert!((2..=4).contains(&r.range(2, 4)));
    /// ```
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True `percent` times in a hundred.
    ///
    /// ```
    /// let mut r = sluice_testsupport::Rng::new(3);
    /// assert!(!r.chance(0));
    /// assert!(r.chance(100));
    /// ```
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// One of `items`.
    ///
    /// ```
    /// let mut r = sluice_testsupport::Rng::new(3);
    /// assert!([1, 2, 3].contains(&r.pick(&[1, 2, 3])));
    /// ```
    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }

    /// A random byte.
    ///
    /// ```
    /// use sluice_testsupport::Rng;
    /// // The low byte of the next 64 bits.
    /// assert_eq!(Rng::new(3).byte() as u64, Rng::new(3).next_u64() & 0xff);
    /// ```
    pub fn byte(&mut self) -> u8 {
        self.next_u64() as u8
    }

    /// `n` random bytes.
    ///
    /// ```
    /// assert_eq!(sluice_testsupport::Rng::new(3).bytes(5).len(), 5);
    /// ```
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}
