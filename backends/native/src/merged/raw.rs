//! Probed tables in packet byte order: the form of a large group's keys
//! that generated code can look up with the fewest instructions.
//!
//! A group's [`KeyTable`](sluice_classifier::table::KeyTable) holds each
//! key as one 32-bit number per field, in network order. To probe it,
//! code must load every field on its own, swap its bytes and spread six
//! words over three hash inputs. Here the key fields are laid out the way
//! the packet holds them instead: runs of adjacent fields become one
//! 1-, 2-, 4- or 8-byte load (both IPv4 addresses one load, both ports
//! another; DPF's atom coalescing applied to the probe), and the loads are
//! packed into as few 64-bit words as they fit in, unswapped. The code
//! hashes those words and compares them with the slot's in one compare
//! per word.
//!
//! [`RawTable`] is such a table for one group, kept by
//! [`NativeMerged`](super::NativeMerged) next to the group's own table:
//! every key change of the group is copied here (the value and datum words
//! are the group table's, so a hit means the same thing). A slot holds the
//! packed key and the slot's 32-bit answer for the batch functions (the
//! key's only filter, or "several"; "no match" marks an empty slot), so
//! that they need not decode the value, nor, with one group, look at it at
//! all. The answer takes the upper half of the key's last word when that
//! word's loads fit in four bytes (a session key: both addresses in one
//! word, both ports and the answer in the other: 16 bytes), and a word of
//! its own otherwise; slots are rounded up to a power of two words so that
//! none straddles two cache lines and one prefetch brings all of it. The
//! value and datum, which only the hit functions need, are in an array of
//! their own, one word per slot. Linear probing from the top bits of
//! [`raw_hash`]; a removal shifts later keys back, so there are no
//! tombstones and a probe stops at the first empty slot. Tables are kept
//! sparse ([`RawTable::full`]) so that a key is nearly always in its home
//! slot and the compare's branch is predictable.

use super::emit::adjacent_run;
use super::plan::R;
use super::slots::Slots;
use super::units::{answer, slot_word, NO_MATCH};
use sluice_classifier::merged::Slot;

/// Multipliers of the packed key words in [`raw_hash`] (cycling): odd
/// 32-bit numbers sign-extended to 64 bits, so that x86-64 multiplies by
/// them with a 32-bit immediate into another register (no copy of a word
/// the compare still needs, no constant load). The fold and the full
/// 64-bit multiply after them spread every bit to the top.
pub(super) const RAW_MUL: [u64; 4] = [
    0x9e37_79b1_u32 as i32 as i64 as u64,
    0x85eb_ca77_u32 as i32 as i64 as u64,
    0xc2b2_ae3d_u32 as i32 as i64 as u64,
    0xa7d4_eb2f_u32 as i32 as i64 as u64,
];

/// Tables stay at most an eighth full up to this size ([`RawTable::full`]):
/// 64 MiB, four million 16-byte slots (half a million session keys).
const SPARSE_BYTES: usize = 64 << 20;

/// The final multiplier of [`raw_hash`].
pub(super) const RAW_MIX: u64 = 0xd6e8_feb8_6659_fd93;

/// The hash of packed key words: their products with [`RAW_MUL`] summed
/// (independent multiplies), the high half folded into the low, and one
/// more multiply so that the top bits, which index the table, depend on
/// every input bit. (Without the fold and the last multiply, 50,000
/// consecutive source addresses, whose varying bytes sit in the middle of
/// the word, took 4.3 slots per lookup instead of 1.3: test
/// `structured_keys_spread`.)
pub(super) fn raw_hash(words: &[u64]) -> u64 {
    let mut h = 0u64;
    for (i, w) in words.iter().enumerate() {
        h = h.wrapping_add(w.wrapping_mul(RAW_MUL[i % RAW_MUL.len()]));
    }
    (h ^ (h >> 32)).wrapping_mul(RAW_MIX)
}

/// One load of a packed key: `r` (a run of adjacent key fields, 1, 2, 4 or
/// 8 bytes) goes to byte `at` of word `word`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct Load {
    pub r: R,
    pub word: usize,
    pub at: u32,
}

/// Where one key field goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Field {
    /// Into word `word` from byte `at`, `size` bytes.
    Packed { word: usize, at: u32, size: u32 },
    /// Nowhere: every key has this value, and the code tests it.
    Fixed(u32),
}

/// Where a group's key fields go in the packed words.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Layout {
    /// The loads, in packet order.
    pub loads: Vec<Load>,
    /// Fields every key had the same value of when the table was built
    /// (for sessions: the ethertype and the protocol), with that value:
    /// the code tests them like guards and they stay out of the words.
    pub fixed: Vec<(R, u32)>,
    /// Per key field, in key order.
    fields: Vec<Field>,
    /// Packed words per key.
    pub words: usize,
    /// The answer's byte offset in a slot: 4 bytes into the key's last
    /// word when its loads leave that half free, else the word after.
    pub answer_at: usize,
}

/// Why a key has no packed form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unpacked {
    /// A value does not fit its field: no packet has this key.
    Never,
    /// A fixed field has another value: the layout must change.
    Fixed,
}

impl Layout {
    /// The layout of a key of these fields, those with `Some(value)` in
    /// `fixed` left out (unless that would leave none); `None` unless every
    /// field is a 1-, 2- or 4-byte packet load (and the host is
    /// little-endian, where a load's bytes keep their packet order in the
    /// word).
    pub(crate) fn of(key: &[R], fixed: &[Option<u32>]) -> Option<Layout> {
        if cfg!(target_endian = "big") || key.is_empty() {
            return None;
        }
        let keep_all = fixed.len() != key.len() || fixed.iter().all(Option::is_some);
        let mut places: Vec<(Option<u32>, u32, u32, usize)> = Vec::new();
        let mut fields = vec![Field::Fixed(0); key.len()];
        let mut fixed_conds = Vec::new();
        for (i, r) in key.iter().enumerate() {
            if let (false, Some(v)) = (keep_all, fixed.get(i).copied().flatten()) {
                if !matches!(r, R::Abs { .. } | R::Rel { .. }) || !matches!(r.size(), 1 | 2 | 4) {
                    return None;
                }
                fields[i] = Field::Fixed(v);
                fixed_conds.push((*r, v));
                continue;
            }
            match *r {
                R::Abs { off, size } if matches!(size, 1 | 2 | 4) => {
                    places.push((None, off, size as u32, i))
                }
                R::Rel { hdr, off, size } if matches!(size, 1 | 2 | 4) => {
                    places.push((Some(hdr), off, size as u32, i))
                }
                _ => return None,
            }
        }
        places.sort_unstable();
        // Runs of adjacent fields: (first place index, end, width).
        let mut runs = Vec::new();
        let mut i = 0;
        while i < places.len() {
            let (end, width) =
                adjacent_run(places.len(), i, |k| (places[k].0, places[k].1, places[k].2));
            runs.push((i, end, width));
            i = end;
        }
        // Widest first, each into the first word with room.
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by_key(|&k| std::cmp::Reverse(runs[k].2));
        let mut used: Vec<u32> = Vec::new();
        let mut placed = vec![(0usize, 0u32); runs.len()];
        for k in order {
            let width = runs[k].2;
            let word = match used.iter().position(|&u| u + width <= 8) {
                Some(w) => w,
                None => {
                    used.push(0);
                    used.len() - 1
                }
            };
            placed[k] = (word, used[word]);
            used[word] += width;
        }
        let mut loads = Vec::new();
        for (k, &(first, end, width)) in runs.iter().enumerate() {
            let (hdr, off, _, _) = places[first];
            let (word, at) = placed[k];
            let r = R::at(hdr, off, width);
            loads.push(Load { r, word, at });
            for &(_, foff, size, field) in &places[first..end] {
                fields[field] = Field::Packed {
                    word,
                    at: at + (foff - off),
                    size,
                };
            }
        }
        let words = used.len();
        let answer_at = match used.last() {
            Some(&u) if u <= 4 => (words - 1) * 8 + 4,
            _ => words * 8,
        };
        Some(Layout {
            loads,
            fixed: fixed_conds,
            fields,
            words,
            answer_at,
        })
    }

    /// The same layout with each load's and fixed field's read replaced
    /// by `f` of it (the packed words stay as they are).
    pub(crate) fn with_reads(&self, f: impl Fn(R) -> R) -> Layout {
        Layout {
            loads: self
                .loads
                .iter()
                .map(|l| Load { r: f(l.r), ..*l })
                .collect(),
            fixed: self.fixed.iter().map(|&(r, k)| (f(r), k)).collect(),
            ..self.clone()
        }
    }

    /// Words per slot: the key's, and the answer's if it has a word of its
    /// own, rounded up to a power of two.
    pub(crate) fn stride(&self) -> usize {
        (self.answer_at / 8 + 1).next_power_of_two()
    }

    /// Bytes per slot.
    pub(crate) fn slot_bytes(&self) -> usize {
        self.stride() * 8
    }

    /// True when the answer shares the key's last word (whose packed value
    /// then fits in its low 32 bits).
    pub(crate) fn answer_in_key(&self) -> bool {
        self.answer_at < self.words * 8
    }

    /// A key (one network-order value per field, as the group's table
    /// holds it) as packed words, into `out` (`words` long).
    pub(crate) fn pack(&self, key: &[u32], out: &mut [u64]) -> Result<(), Unpacked> {
        debug_assert_eq!(key.len(), self.fields.len());
        let mut bytes = vec![[0u8; 8]; self.words];
        let mut other = false;
        for (&k, f) in key.iter().zip(&self.fields) {
            match *f {
                Field::Packed { word, at, size } => {
                    if size < 4 && k >> (8 * size) != 0 {
                        return Err(Unpacked::Never);
                    }
                    let be = k.to_be_bytes();
                    let at = at as usize;
                    bytes[word][at..at + size as usize].copy_from_slice(&be[4 - size as usize..]);
                }
                Field::Fixed(v) => other |= k != v,
            }
        }
        if other {
            return Err(Unpacked::Fixed);
        }
        for (o, b) in out.iter_mut().zip(bytes) {
            *o = u64::from_le_bytes(b);
        }
        Ok(())
    }
}

/// A group's keys, packed ([`Layout`]), with their table's value and
/// datum words.
#[derive(Clone, Debug)]
pub(super) struct RawTable {
    layout: Layout,
    /// `mask + 1` slots of `layout.stride()` words.
    slots: Slots,
    /// Per slot, its value and datum ([`slot_word`]; 0 when empty).
    values: Vec<u64>,
    mask: usize,
    len: usize,
}

impl RawTable {
    /// An empty table for keys of this layout.
    pub(crate) fn new(layout: Layout) -> RawTable {
        RawTable::with_slots(layout, 8)
    }

    fn with_slots(layout: Layout, n: usize) -> RawTable {
        debug_assert!(n.is_power_of_two() && n >= 2);
        let mut t = RawTable {
            slots: Slots::zeroed(n * layout.stride()),
            values: vec![0; n],
            layout,
            mask: n - 1,
            len: 0,
        };
        for i in 0..n {
            t.clear(i);
        }
        t
    }

    /// Make slot `i` empty: zero words, and "no match" as its answer (so
    /// that code which compares a packet's key with an empty slot's zeros
    /// and takes the answer without more tests still gets no match).
    fn clear(&mut self, i: usize) {
        let s = self.stride();
        self.slots[i * s..(i + 1) * s].fill(0);
        self.set_answer(i, NO_MATCH);
        self.values[i] = 0;
    }

    /// The word of slot `i` holding the answer, and the answer's shift in
    /// it (layouts exist on little-endian hosts only, where byte `at` of a
    /// word is bits `8 * at..`).
    fn answer_word(&self, i: usize) -> (usize, u32) {
        let at = self.layout.answer_at;
        (i * self.stride() + at / 8, 8 * (at % 8) as u32)
    }

    fn set_answer(&mut self, i: usize, a: u32) {
        let (w, shift) = self.answer_word(i);
        let keep = !(u64::from(u32::MAX) << shift);
        self.slots[w] = (self.slots[w] & keep) | u64::from(a) << shift;
    }

    /// Slot `i`'s answer: [`NO_MATCH`] exactly when it is empty.
    fn answer(&self, i: usize) -> u32 {
        let (w, shift) = self.answer_word(i);
        (self.slots[w] >> shift) as u32
    }

    /// How the keys are packed.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The slots, for generated code.
    pub(crate) fn as_ptr(&self) -> *const u64 {
        self.slots.as_ptr()
    }

    /// The value-and-datum words, one per slot, for generated code.
    pub(crate) fn values_ptr(&self) -> *const u64 {
        self.values.as_ptr()
    }

    /// Slot count minus one.
    pub(crate) fn mask(&self) -> u64 {
        self.mask as u64
    }

    /// The home slot is `raw_hash(key) >> shift()`: 64 minus the log2 of
    /// the slot count.
    pub(crate) fn shift(&self) -> u64 {
        64 - (self.mask as u64 + 1).trailing_zeros() as u64
    }

    /// Bytes the slots and the value words take.
    pub(crate) fn bytes(&self) -> usize {
        (self.slots.len() + self.values.len()) * 8
    }

    /// Keys held.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.len
    }

    fn stride(&self) -> usize {
        self.layout.stride()
    }

    fn is_empty(&self, i: usize) -> bool {
        self.answer(i) == NO_MATCH
    }

    /// Word `j` of slot `i`'s packed key (the last word without the
    /// answer when they share it).
    fn key_word(&self, i: usize, j: usize) -> u64 {
        let w = self.slots[i * self.stride() + j];
        if j + 1 == self.layout.words && self.layout.answer_in_key() {
            w & u64::from(u32::MAX)
        } else {
            w
        }
    }

    /// True when slot `i` holds `key` (or, empty, has its words).
    fn key_eq(&self, i: usize, key: &[u64]) -> bool {
        key.iter()
            .enumerate()
            .all(|(j, &k)| self.key_word(i, j) == k)
    }

    /// Slot `i`'s packed key, into `out`.
    fn key_into(&self, i: usize, out: &mut Vec<u64>) {
        out.clear();
        out.extend((0..self.layout.words).map(|j| self.key_word(i, j)));
    }

    /// Slot `i`'s packed key.
    #[cfg(test)]
    fn key(&self, i: usize) -> Vec<u64> {
        let mut k = Vec::new();
        self.key_into(i, &mut k);
        k
    }

    fn home(&self, key: &[u64]) -> usize {
        (raw_hash(key) >> self.shift()) as usize
    }

    /// The slot holding `key`, or the empty slot where it would go.
    fn find(&self, key: &[u64]) -> Result<usize, usize> {
        let mut i = self.home(key);
        loop {
            if self.is_empty(i) {
                return Err(i);
            }
            if self.key_eq(i, key) {
                return Ok(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    fn write(&mut self, i: usize, key: &[u64], value: u32, datum: u32) {
        let s = self.stride();
        self.slots[i * s..i * s + key.len()].copy_from_slice(key);
        self.set_answer(i, answer(Slot { value, datum }));
        self.values[i] = slot_word(Slot { value, datum });
    }

    /// Move slot `from`'s key, answer and value to slot `to`.
    fn move_slot(&mut self, from: usize, to: usize) {
        let s = self.stride();
        self.slots.copy_within(from * s..(from + 1) * s, to * s);
        self.values[to] = self.values[from];
    }

    /// The value and datum of a key (one network-order value per field).
    #[cfg(test)]
    pub fn get(&self, key: &[u32]) -> Option<(u32, u32)> {
        let mut packed = vec![0; self.layout.words];
        self.layout.pack(key, &mut packed).ok()?;
        let i = self.find(&packed).ok()?;
        let w = self.values[i];
        Some((w as u32, (w >> 32) as u32))
    }

    /// Make `key`'s entry `Some((value, datum))` (value non-zero) or none;
    /// false when the key cannot have an entry in this layout (a fixed
    /// field differs): the table must be built again with another.
    #[must_use]
    pub(crate) fn set(&mut self, key: &[u32], entry: Option<(u32, u32)>) -> bool {
        let mut packed = vec![0; self.layout.words];
        match self.layout.pack(key, &mut packed) {
            Ok(()) => {}
            Err(Unpacked::Never) => return true,
            Err(Unpacked::Fixed) => return entry.is_none(),
        }
        match (self.find(&packed), entry) {
            (Ok(i), Some((v, d))) => self.write(i, &packed, v, d),
            (Ok(i), None) => self.remove_at(i),
            (Err(_), None) => {}
            (Err(i), Some((v, d))) => {
                debug_assert_ne!(v, 0);
                let i = if self.full() {
                    self.grow();
                    self.find(&packed).expect_err("a new key")
                } else {
                    i
                };
                self.write(i, &packed, v, d);
                self.len += 1;
            }
        }
        true
    }

    /// True when one more key needs a bigger table: one more key would
    /// make it more than an eighth full, or, for a table whose doubling
    /// would pass [`SPARSE_BYTES`], more than half full. In a sparse table
    /// nearly every key is in its home slot, so the probe's first compare
    /// is almost always right and its branch predicted: with 1M packets of
    /// random sessions, 100 sessions probed in 9.0 ns a packet at 1/8 and
    /// 12.2-14.5 ns at 1/2, 1,000 in 9.5-10.0 against 13.4-13.6, and even
    /// 1,000,000 (every probe a cache miss) in 25-28 ns against 37-42.
    fn full(&self) -> bool {
        let (slots, len) = (self.mask + 1, self.len + 1);
        if 2 * slots * self.layout.slot_bytes() <= SPARSE_BYTES {
            len * 8 > slots
        } else {
            len * 2 > slots
        }
    }

    /// Empty slot `i` and move later keys of its run back so that every
    /// key stays reachable from its home without passing an empty slot.
    fn remove_at(&mut self, i: usize) {
        let mut hole = i;
        let mut j = (i + 1) & self.mask;
        let mut key = Vec::with_capacity(self.layout.words);
        while !self.is_empty(j) {
            self.key_into(j, &mut key);
            let home = self.home(&key);
            // The key at j may fill the hole when its home is not after
            // the hole (cyclically, between hole and j).
            if (j.wrapping_sub(home) & self.mask) >= (j.wrapping_sub(hole) & self.mask) {
                self.move_slot(j, hole);
                hole = j;
            }
            j = (j + 1) & self.mask;
        }
        self.clear(hole);
        self.len -= 1;
    }

    fn grow(&mut self) {
        let mut bigger = RawTable::with_slots(self.layout.clone(), (self.mask + 1) * 2);
        let s = self.stride();
        let mut key = Vec::with_capacity(self.layout.words);
        for j in 0..=self.mask {
            if self.is_empty(j) {
                continue;
            }
            self.key_into(j, &mut key);
            let i = bigger.find(&key).expect_err("keys are distinct");
            bigger.slots[i * s..(i + 1) * s].copy_from_slice(&self.slots[j * s..(j + 1) * s]);
            bigger.values[i] = self.values[j];
            bigger.len += 1;
        }
        *self = bigger;
    }
}

#[cfg(test)]
mod tests {
    use super::super::MANY;
    use super::*;
    use proptest::prelude::*;

    /// The session key: ethertype, protocol, addresses, ports.
    fn session_key() -> [R; 6] {
        [
            R::Abs { off: 12, size: 2 },
            R::Abs { off: 23, size: 1 },
            R::Abs { off: 26, size: 4 },
            R::Abs { off: 30, size: 4 },
            R::Rel {
                hdr: 14,
                off: 14,
                size: 2,
            },
            R::Rel {
                hdr: 14,
                off: 16,
                size: 2,
            },
        ]
    }

    fn session_layout() -> Layout {
        Layout::of(&session_key(), &[]).expect("a layout")
    }

    #[test]
    fn session_keys_pack_into_two_words() {
        let l = session_layout();
        assert_eq!(l.words, 2);
        // Addresses one 8-byte load, ports one 4-byte load, ethertype and
        // protocol on their own.
        let sizes: Vec<u32> = l.loads.iter().map(|x| x.r.size()).collect();
        assert_eq!(sizes, vec![2, 1, 8, 4]);
        let mut w = [0u64; 2];
        assert_eq!(
            l.pack(&[0x800, 6, 0x0a00_0001, 0xc0a8_0002, 1024, 80], &mut w),
            Ok(())
        );
        // Word 0 holds the packet's bytes 26..34 as loaded.
        assert_eq!(w[0].to_le_bytes(), [10, 0, 0, 1, 192, 168, 0, 2]);
        // Word 1: the ports (4 bytes, widest first), then the ethertype,
        // then the protocol.
        assert_eq!(w[1].to_le_bytes(), [4, 0, 0, 80, 8, 0, 6, 0]);
        // A value too wide for its field has no packed form.
        assert_eq!(
            l.pack(&[0x1_0800, 6, 1, 2, 3, 4], &mut w),
            Err(Unpacked::Never)
        );
    }

    #[test]
    fn fixed_fields_stay_out_of_the_words() {
        let key = session_key();
        let l = Layout::of(&key, &[Some(0x800), Some(6), None, None, None, None]).unwrap();
        assert_eq!(l.fixed, vec![(key[0], 0x800), (key[1], 6)]);
        assert_eq!(l.words, 2);
        let sizes: Vec<u32> = l.loads.iter().map(|x| x.r.size()).collect();
        assert_eq!(sizes, vec![8, 4]);
        let mut w = [0u64; 2];
        assert_eq!(l.pack(&[0x800, 6, 1, 2, 3, 4], &mut w), Ok(()));
        assert_eq!(
            l.pack(&[0x86dd, 6, 1, 2, 3, 4], &mut w),
            Err(Unpacked::Fixed)
        );
        // A key of the other value cannot go in; removing it is a no-op.
        let mut t = RawTable::new(l.clone());
        assert!(!t.set(&[0x800, 17, 1, 2, 3, 4], Some((1, 0))));
        assert!(t.set(&[0x800, 17, 1, 2, 3, 4], None));
        // Every field fixed: none is.
        let all = Layout::of(&key, &[Some(1); 6]).unwrap();
        assert!(all.fixed.is_empty());
    }

    /// A session key without the ethertype and protocol takes two words:
    /// the answer goes in the upper half of the ports' word (a 16-byte
    /// slot); with them, the ports' word is full and the answer takes a
    /// word of its own (32 bytes with the rounding).
    #[test]
    fn answer_shares_a_word_when_it_fits() {
        let key = session_key();
        let fixed = [Some(0x800), Some(6), None, None, None, None];
        let l = Layout::of(&key, &fixed).unwrap();
        assert_eq!((l.words, l.answer_at, l.stride()), (2, 12, 2));
        assert!(l.answer_in_key());
        let l = session_layout();
        assert_eq!((l.words, l.answer_at, l.stride()), (2, 16, 4));
        assert!(!l.answer_in_key());
        // Addresses only: one word, the answer in the next.
        let l = Layout::of(&key[2..4], &[]).unwrap();
        assert_eq!((l.words, l.answer_at, l.stride()), (1, 8, 2));
        // One port: key and answer in one word.
        let l = Layout::of(&key[4..5], &[]).unwrap();
        assert_eq!((l.words, l.answer_at, l.stride()), (1, 4, 1));
    }

    #[test]
    fn slots_hold_the_batch_answer() {
        let key = session_key();
        let fixed = [Some(0x800), Some(6), None, None, None, None];
        for layout in [session_layout(), Layout::of(&key, &fixed).unwrap()] {
            let mut t = RawTable::new(layout);
            let k = [0x800, 6, 1, 2, 3, 4];
            let stored = |t: &RawTable| {
                let mut packed = [0u64; 2];
                assert_eq!(t.layout.pack(&k, &mut packed), Ok(()));
                let i = t.find(&packed).expect("present");
                assert_eq!(t.key(i), packed);
                t.answer(i)
            };
            assert!(t.set(&k, Some((8, 0))));
            assert_eq!(stored(&t), 7);
            assert!(t.set(&k, Some((Slot::LIST_BASE + 2, 0))));
            assert_eq!(stored(&t), MANY);
            assert_eq!(t.get(&k), Some((Slot::LIST_BASE + 2, 0)));
            assert!(t.set(&k, None));
            assert!((0..=t.mask).all(|i| t.answer(i) == NO_MATCH));
        }
    }

    /// The mean number of slots a successful lookup reads.
    fn mean_probes(t: &RawTable) -> f64 {
        let (mut sum, mut n) = (0usize, 0usize);
        for i in 0..=t.mask {
            if !t.is_empty(i) {
                let home = t.home(&t.key(i));
                sum += ((i.wrapping_sub(home)) & t.mask) + 1;
                n += 1;
            }
        }
        sum as f64 / n.max(1) as f64
    }

    /// Structured key sets (consecutive addresses, consecutive ports, one
    /// octet or one port varying alone, both addresses stepping together)
    /// spread over the table about as well as random keys do: at most half
    /// full, linear probing reads 1.5 slots per lookup on average.
    #[test]
    fn structured_keys_spread() {
        type KeyOf = fn(u32) -> [u32; 6];
        let sets: [(&str, KeyOf); 5] = [
            ("consecutive sources", |i| {
                [0x800, 6, 0x0a00_0000 + i, 0xc0a8_0001, 1024, 80]
            }),
            ("consecutive source ports", |i| {
                [0x800, 6, 0x0a00_0001, 0xc0a8_0001, i, 80]
            }),
            ("last octet and port", |i| {
                [
                    0x800,
                    6,
                    0x0a00_0000 + (i & 0xff),
                    0xc0a8_0001,
                    1024 + (i >> 8),
                    443,
                ]
            }),
            ("destinations by 256", |i| {
                [0x800, 6, 0x0a00_0001, i << 8, 1024, 80]
            }),
            ("both addresses", |i| {
                [
                    0x800,
                    6,
                    0x0a00_0000 + i,
                    0xc0a8_0000 + 7 * i,
                    1024 + i % 64_000,
                    80,
                ]
            }),
        ];
        for (name, key) in sets {
            for n in [1_000u32, 50_000] {
                let mut t = RawTable::new(session_layout());
                for i in 0..n {
                    assert!(t.set(&key(i), Some((i + 1, 0))));
                }
                let m = mean_probes(&t);
                assert!(m < 2.0, "{name}, {n} keys: {m:.2} slots per lookup");
            }
        }
    }

    #[test]
    fn other_fields_have_no_layout() {
        assert!(Layout::of(&[R::Len], &[]).is_none());
        assert!(Layout::of(&[], &[]).is_none());
        assert!(Layout::of(&[R::Abs { off: 0, size: 3 }], &[]).is_none());
    }

    proptest! {
        /// Sets and removals in any order leave the table equal to a map.
        #[test]
        fn matches_a_map(ops in prop::collection::vec((0u32..64, 0u32..3, any::<bool>()), 1..400), fixed in any::<bool>()) {
            let layout = if fixed {
                Layout::of(&session_key(), &[Some(0x800), Some(6), None, None, None, None]).unwrap()
            } else {
                session_layout()
            };
            let mut t = RawTable::new(layout);
            let mut model = std::collections::HashMap::new();
            for (i, (k, v, add)) in ops.iter().enumerate() {
                let key = [0x800, 6, k % 8, k / 8, 1000 + k, 80];
                if *add {
                    prop_assert!(t.set(&key, Some((v + 1, i as u32))));
                    model.insert(*k, (v + 1, i as u32));
                } else {
                    prop_assert!(t.set(&key, None));
                    model.remove(k);
                }
                prop_assert_eq!(t.len(), model.len());
            }
            for k in 0..64 {
                let key = [0x800, 6, k % 8, k / 8, 1000 + k, 80];
                prop_assert_eq!(t.get(&key), model.get(&k).copied());
            }
        }
    }
}
