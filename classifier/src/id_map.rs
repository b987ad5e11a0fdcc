//! Maps keyed by filter id: ids are dense counters, so their hash is one
//! multiply, with the id itself in the low bits (consecutive ids land in
//! consecutive buckets, so a batch of new filters fills the map in order)
//! and mixed bits on top (the map's tag byte).
//!
//! Crate-internal: the merged and tree classifiers' filter tables.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from filter id to `V`.
pub(crate) type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;

/// The hasher of [`IdMap`].
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        let mixed = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        self.0 = (mixed & 0xffff_ffff_0000_0000) | n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::IdMap;

    #[test]
    fn maps_ids() {
        let mut m = IdMap::<&str>::default();
        m.insert(7, "web");
        m.insert(8, "dns");
        assert_eq!(m.get(&7), Some(&"web"));
        assert_eq!(m.get(&8), Some(&"dns"));
        assert_eq!(m.get(&9), None);
    }
}
