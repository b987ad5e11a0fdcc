//! An open-addressing hash table from fixed-length keys of 32-bit words to a
//! 32-bit value and a 32-bit datum, stored flat: each slot is
//! `[value, datum, key words...]`, so a lookup touches one cache line (keys
//! of up to 14 words) and a batch of lookups can all be in flight at once.
//!
//! ```
//! use sluice_classifier::table::KeyTable;
//! let mut t = KeyTable::new(2);
//! t.insert(&[10, 20], 7);
//! assert_eq!(t.get(&[10, 20]), Some(7));
//! assert_eq!(t.get(&[10, 21]), None);
//! t.remove(&[10, 20]);
//! assert_eq!(t.get(&[10, 20]), None);
//! ```

/// Value word of an empty slot.
const EMPTY: u32 = 0;
/// Value word of a slot whose key was removed (lookups probe past it).
const GONE: u32 = u32::MAX;

/// Tables of more keys than this whose slots take at most
/// [`SPARSE_BYTES`] keep at most one key in eight slots, others one in
/// two. Generated code probes such a table by hashing (the native back
/// end compiles smaller ones as compares, its `SMALL_KEYS` being this),
/// and the sparser slots make a probe stop at its home slot almost
/// always: on the generated sets of 1,000 and 10,000 filters this took
/// 10–20% off a packet (docs/merging.md).
pub const SPARSE_KEYS: usize = 16;
/// See [`SPARSE_KEYS`]: the sparse slots a table needs are at most this
/// many bytes (a table this large is out of the first-level cache anyway,
/// and its memory matters more than its collisions); past them, two slots
/// a key.
pub const SPARSE_BYTES: usize = 64 * 1024;

/// A hash table from `width`-word keys to non-zero values below `u32::MAX`.
///
/// ```
/// let t = sluice_classifier::table::KeyTable::new(3);
/// assert!(t.is_empty());
/// ```
#[derive(Clone, Debug)]
pub struct KeyTable {
    width: usize,
    /// `mask + 1` slots of `width + 2` words.
    words: Vec<u32>,
    mask: usize,
    len: usize,
    used: usize,
}

/// The multipliers of [`hash`]: the key's length, then its 64-bit words in
/// turn (cycling), then the final mix. Code generators that hash keys
/// themselves use the same constants.
///
/// ```
/// assert!(sluice_classifier::table::HASH_WORDS.iter().all(|m| m % 2 == 1));
/// ```
pub const HASH_LEN: u64 = 0x9e37_79b9_7f4a_7c15;
/// See [`HASH_LEN`].
///
/// ```
/// assert_eq!(sluice_classifier::table::HASH_WORDS.len(), 4);
/// ```
pub const HASH_WORDS: [u64; 4] = [
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
];
/// See [`HASH_LEN`].
///
/// ```
/// assert_eq!(sluice_classifier::table::HASH_MIX % 2, 1);
/// ```
pub const HASH_MIX: u64 = 0xd6e8_feb8_6659_fd93;

/// The hash of a key. Words are taken two at a time as 64-bit values (the
/// last alone, zero-extended, if the count is odd); each is multiplied by
/// its own constant and the products are summed with the length's, so the
/// multiplies are independent of each other (a short dependency chain for
/// the CPU), then one xor-shift, multiply, xor-shift mix spreads every bit
/// into the low bits the table indexes with.
///
/// ```
/// use sluice_classifier::table::hash;
/// assert_ne!(hash(&[1, 2]), hash(&[2, 1]));
/// assert_ne!(hash(&[1]), hash(&[1, 0]));
/// ```
#[inline]
pub fn hash(key: &[u32]) -> u64 {
    let mut acc = (key.len() as u64).wrapping_mul(HASH_LEN);
    for (i, p) in key.chunks(2).enumerate() {
        let w = p[0] as u64 | (p.get(1).copied().unwrap_or(0) as u64) << 32;
        acc = acc.wrapping_add(w.wrapping_mul(HASH_WORDS[i % HASH_WORDS.len()]));
    }
    let h = (acc ^ (acc >> 32)).wrapping_mul(HASH_MIX);
    h ^ (h >> 29)
}

impl KeyTable {
    /// An empty table for keys of `width` words.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::table::KeyTable::new(1).len(), 0);
    /// ```
    pub fn new(width: usize) -> KeyTable {
        KeyTable {
            width,
            words: vec![EMPTY; 8 * (width + 2)],
            mask: 7,
            len: 0,
            used: 0,
        }
    }

    /// Number of keys.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert(&[1], 1);
    /// assert_eq!(t.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the table has no keys.
    ///
    /// ```
    /// assert!(sluice_classifier::table::KeyTable::new(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory the slots take.
    ///
    /// ```
    /// assert!(sluice_classifier::table::KeyTable::new(1).bytes() > 0);
    /// ```
    pub fn bytes(&self) -> usize {
        self.words.len() * 4
    }

    /// Key width in words.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::table::KeyTable::new(3).width(), 3);
    /// ```
    pub fn width(&self) -> usize {
        self.width
    }

    /// The slots as stored, for code that probes the table itself (the
    /// native classifier): `slots()` slots of `width() + 2` words each,
    /// `[value, datum, key...]`; value 0 is an empty slot (a probe stops
    /// there), `u32::MAX` a removed key (a probe goes on); a key lives in
    /// the first slot from `hash(key) & (slots() - 1)` on, stepping by one
    /// slot and wrapping. At least one slot is always empty.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert_with(&[5], 9, 2);
    /// let h = t.home(sluice_classifier::table::hash(&[5]));
    /// assert_eq!(&t.words()[h * 3..h * 3 + 3], &[9, 2, 5]);
    /// ```
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The first slot to probe for a hash.
    ///
    /// ```
    /// let t = sluice_classifier::table::KeyTable::new(1);
    /// assert!(t.home(12345) < 8);
    /// ```
    #[inline]
    pub fn home(&self, h: u64) -> usize {
        h as usize & self.mask
    }

    /// Read the home slot's first word: issuing this for a batch of packets
    /// before their lookups lets the cache misses overlap.
    ///
    /// ```
    /// use sluice_classifier::table::{hash, KeyTable};
    /// let mut t = KeyTable::new(1);
    /// let home = t.home(hash(&[5]));
    /// assert_eq!(t.touch(home), 0); // empty
    /// t.insert(&[5], 9);
    /// assert_eq!(t.touch(home), 9); // the first key hashed there
    /// ```
    #[inline]
    pub fn touch(&self, slot: usize) -> u32 {
        self.words[slot * (self.width + 2)]
    }

    /// Look a key up.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert(&[5], 9);
    /// assert_eq!(t.get(&[5]), Some(9));
    /// ```
    #[inline]
    pub fn get(&self, key: &[u32]) -> Option<u32> {
        self.get_hashed(key, hash(key))
    }

    /// Look a key up with its precomputed [`hash`].
    ///
    /// ```
    /// use sluice_classifier::table::{KeyTable, hash};
    /// let mut t = KeyTable::new(1);
    /// t.insert(&[5], 9);
    /// assert_eq!(t.get_hashed(&[5], hash(&[5])), Some(9));
    /// ```
    #[inline]
    pub fn get_hashed(&self, key: &[u32], h: u64) -> Option<u32> {
        self.entry_hashed(key, h).map(|(v, _)| v)
    }

    /// Look a key up with its precomputed [`hash`]: its value and datum.
    ///
    /// ```
    /// use sluice_classifier::table::{KeyTable, hash};
    /// let mut t = KeyTable::new(1);
    /// t.insert_with(&[5], 9, 3);
    /// assert_eq!(t.entry_hashed(&[5], hash(&[5])), Some((9, 3)));
    /// ```
    #[inline]
    pub fn entry_hashed(&self, key: &[u32], h: u64) -> Option<(u32, u32)> {
        debug_assert_eq!(key.len(), self.width);
        let stride = self.width + 2;
        let mut i = self.home(h);
        loop {
            let s = &self.words[i * stride..(i + 1) * stride];
            match s[0] {
                EMPTY => return None,
                GONE => {}
                v if &s[2..] == key => return Some((v, s[1])),
                _ => {}
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Insert or replace; `value` must be neither 0 nor `u32::MAX`.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert(&[5], 9);
    /// t.insert(&[5], 10);
    /// assert_eq!((t.get(&[5]), t.len()), (Some(10), 1));
    /// ```
    pub fn insert(&mut self, key: &[u32], value: u32) {
        self.insert_with(key, value, 0);
    }

    /// Insert or replace a value with a datum stored next to it (read back by
    /// [`KeyTable::entry_hashed`] from the same cache line).
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(2);
    /// t.insert_with(&[5, 6], 9, 7);
    /// assert_eq!(t.iter().collect::<Vec<_>>(), vec![(&[5u32, 6][..], 9)]);
    /// ```
    pub fn insert_with(&mut self, key: &[u32], value: u32, datum: u32) {
        assert!(value != EMPTY && value != GONE, "reserved value");
        assert_eq!(key.len(), self.width, "key width");
        if !self.fits(self.used + 1, self.mask + 1) {
            self.grow();
        }
        let stride = self.width + 2;
        let mut i = self.home(hash(key));
        let mut reuse = None;
        loop {
            let at = i * stride;
            match self.words[at] {
                EMPTY => break,
                GONE => {
                    reuse.get_or_insert(i);
                }
                _ if &self.words[at + 2..at + stride] == key => {
                    self.words[at] = value;
                    self.words[at + 1] = datum;
                    return;
                }
                _ => {}
            }
            i = (i + 1) & self.mask;
        }
        let slot = match reuse {
            Some(r) => r,
            None => {
                self.used += 1;
                i
            }
        };
        let at = slot * stride;
        self.words[at] = value;
        self.words[at + 1] = datum;
        self.words[at + 2..at + stride].copy_from_slice(key);
        self.len += 1;
    }

    /// Remove a key, returning its value.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert(&[5], 9);
    /// assert_eq!(t.remove(&[5]), Some(9));
    /// assert_eq!(t.remove(&[5]), None);
    /// ```
    pub fn remove(&mut self, key: &[u32]) -> Option<u32> {
        let stride = self.width + 2;
        let mut i = self.home(hash(key));
        loop {
            let at = i * stride;
            match self.words[at] {
                EMPTY => return None,
                GONE => {}
                v if &self.words[at + 2..at + stride] == key => {
                    self.words[at] = GONE;
                    self.len -= 1;
                    return Some(v);
                }
                _ => {}
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Every (key, value), in slot order.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert(&[5], 9);
    /// assert_eq!(t.iter().collect::<Vec<_>>(), vec![(&[5u32][..], 9)]);
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = (&[u32], u32)> {
        self.words
            .chunks_exact(self.width + 2)
            .filter(|s| s[0] != EMPTY && s[0] != GONE)
            .map(|s| (&s[2..], s[0]))
    }

    /// Every (key, value, datum), in slot order.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.insert_with(&[5], 9, 4);
    /// assert_eq!(t.entries().collect::<Vec<_>>(), vec![(&[5u32][..], 9, 4)]);
    /// ```
    pub fn entries(&self) -> impl Iterator<Item = (&[u32], u32, u32)> {
        self.words
            .chunks_exact(self.width + 2)
            .filter(|s| s[0] != EMPTY && s[0] != GONE)
            .map(|s| (&s[2..], s[0], s[1]))
    }

    /// Number of slots (a power of two).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::table::KeyTable::new(1).slots(), 8);
    /// ```
    pub fn slots(&self) -> usize {
        self.mask + 1
    }

    /// Make room for `additional` more keys without growing again.
    ///
    /// ```
    /// let mut t = sluice_classifier::table::KeyTable::new(1);
    /// t.reserve(100);
    /// let slots = t.slots();
    /// (0..100).for_each(|k| t.insert(&[k], 1));
    /// assert_eq!(t.slots(), slots);
    /// ```
    pub fn reserve(&mut self, additional: usize) {
        let slots = self.slots_for(additional);
        if slots != self.mask + 1 {
            self.rebuild(slots);
        }
    }

    /// The number of slots after [`KeyTable::reserve`] of `additional`.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::table::KeyTable::new(1).slots_for(10_000), 32_768);
    /// ```
    pub fn slots_for(&self, additional: usize) -> usize {
        let mut slots = self.mask + 1;
        while !self.fits(self.used + additional + 1, slots) {
            slots *= 2;
        }
        slots
    }

    /// Whether `slots` slots may hold `keys` keys (removed ones included):
    /// two slots a key, and eight for more than [`SPARSE_KEYS`] keys as
    /// long as such slots take at most [`SPARSE_BYTES`]. The slots needed
    /// never fall as keys are added (past the sparse size they stay at it
    /// until two a key need more), so inserting never rebuilds a table at
    /// a size too small for the keys it already holds.
    fn fits(&self, keys: usize, slots: usize) -> bool {
        let mut need = 2 * keys;
        if keys > SPARSE_KEYS {
            let cap = SPARSE_BYTES / ((self.width + 2) * 4);
            need = need.max((8 * keys).min(cap));
        }
        need <= slots
    }

    fn grow(&mut self) {
        // Double until the live keys take at most half of what the slots
        // may hold; when removed keys filled the slots, a rebuild at this
        // size will do.
        let mut slots = self.mask + 1;
        while !self.fits(2 * (self.len + 1), slots) {
            slots *= 2;
        }
        self.rebuild(slots);
    }

    fn rebuild(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.words, vec![EMPTY; slots * (self.width + 2)]);
        self.mask = slots - 1;
        self.len = 0;
        self.used = 0;
        for s in old.chunks_exact(self.width + 2) {
            if s[0] != EMPTY && s[0] != GONE {
                self.insert_with(&s[2..], s[0], s[1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_like_a_map_under_random_operations() {
        let mut t = KeyTable::new(2);
        let mut m: HashMap<[u32; 2], u32> = HashMap::new();
        let mut x: u64 = 12345;
        for step in 0..50_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let key = [(x >> 40) as u32 % 300, (x >> 20) as u32 % 3];
            if x % 3 == 0 {
                assert_eq!(t.remove(&key), m.remove(&key));
            } else {
                t.insert(&key, step + 1);
                m.insert(key, step + 1);
            }
            assert_eq!(t.len(), m.len());
        }
        for (k, v) in &m {
            assert_eq!(t.get(k), Some(*v));
        }
        assert_eq!(t.iter().count(), m.len());
    }

    #[test]
    fn tables_past_sixteen_keys_are_sparse_while_small() {
        let mut t = KeyTable::new(1);
        (0..16).for_each(|k| t.insert(&[k], k + 1));
        assert!(t.slots() <= 64, "16 keys: {} slots", t.slots());
        t.insert(&[16], 17);
        assert!(t.slots() >= 8 * 17, "17 keys: {} slots", t.slots());
        (17..600).for_each(|k| t.insert(&[k], k + 1));
        assert!(t.slots() >= 8 * 600, "600 keys: {} slots", t.slots());
        // Eight slots a key would take more than SPARSE_BYTES: two will do.
        let mut big = KeyTable::new(1);
        big.reserve(10_000);
        assert!(big.slots() >= 2 * 10_000 && big.slots() < 4 * 10_000);
        (0..10_000).for_each(|k| big.insert(&[k], k + 1));
        assert_eq!(big.slots(), 32_768);
        assert!((0..600).all(|k| t.get(&[k]) == Some(k + 1)));
        assert!((0..10_000).all(|k| big.get(&[k]) == Some(k + 1)));
        // The slots needed never fall as keys are added: a table is never
        // rebuilt too small for the keys it holds (which rebuilt it on
        // every insert).
        for width in 1..=6 {
            let t = KeyTable::new(width);
            // The fewest slots that fit k keys (fits is monotone in slots).
            let need = |k| {
                let (mut lo, mut hi) = (0, 1 << 20);
                while lo + 1 < hi {
                    let mid = (lo + hi) / 2;
                    match t.fits(k, mid) {
                        true => hi = mid,
                        false => lo = mid,
                    }
                }
                hi
            };
            assert!((1..20_000).all(|k| need(k) <= need(k + 1)), "width {width}");
        }
    }
}
