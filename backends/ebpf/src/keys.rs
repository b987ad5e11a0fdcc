//! The tree's large tables as one open-addressing hash table of sluice's
//! own, in a `BPF_MAP_TYPE_ARRAY` of buckets, looked up by code in the
//! program.
//!
//! Rule: a key is the table's number and its words, padded with zeros to
//! an even count; the program hashes it ([`hash`], the same in user space
//! and in the code), reads its bucket (an array lookup, which the kernel
//! inlines as an address computation), and compares the key with each of
//! the bucket's [`SLOTS`] slots, two words at a time. A key whose bucket
//! was full when it was placed is in one of the next [`PROBES`] buckets,
//! and a bucket with an empty last slot ends the search. Keys are only
//! added when the table is built: nothing is removed, so a full bucket
//! stays full. A value of 0 is an empty slot (values are never 0).
//!
//! Why not the kernel's hash map: its lookup hashes the key with
//! `jhash` and walks a bucket list through a helper call, about 20 ns a
//! probe with a 28-byte key; this one is a multiply per key word pair and
//! a few compares.

use crate::emit::{alu64, alu64x, Emitter, Label};
use crate::insn::{op, Insn};
use crate::multi::{call, ld_map, ldx, map_err, stx, HELPER_MAP_LOOKUP};
use crate::{sys, Error};
use std::os::fd::OwnedFd;

/// Slots of a bucket.
pub(crate) const SLOTS: usize = 4;
/// Buckets a key may be placed in: its own and the next three.
pub(crate) const PROBES: usize = 4;
/// `BPF_MAP_TYPE_ARRAY`.
const MAP_ARRAY: u32 = 2;
/// The hash's multiplier (2^64 / the golden ratio, odd).
const MUL: u64 = 0x9e37_79b9_7f4a_7c15;
/// The final mix's multiplier (splitmix64's second).
const MIX: u64 = 0xbf58_476d_1ce4_e5b9;

/// The hash of a key of an even number of words: each pair, as the
/// 64-bit word the program loads from the stack, mixed in by a multiply,
/// then the halves folded and multiplied once more; the top bits are the
/// bucket.
pub(crate) fn hash(words: &[u32]) -> u64 {
    let mut h = 0u64;
    for pair in words.chunks(2) {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&pair[0].to_ne_bytes());
        b[4..].copy_from_slice(&pair.get(1).copied().unwrap_or(0).to_ne_bytes());
        h = (h ^ u64::from_ne_bytes(b)).wrapping_mul(MUL);
    }
    // Keys of related words (addresses in a row, ports) otherwise
    // crowd into a few buckets.
    (h ^ (h >> 32)).wrapping_mul(MIX)
}

#[cfg(test)]
thread_local! {
    /// Tests: the next table starts with room for an eighth of its keys.
    pub(crate) static CROWDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A key's words (the table's number first) and its value.
pub(crate) type Entry = (Vec<u32>, u32);

/// One table's keys in a map of buckets, and how the code reads it.
#[derive(Debug)]
pub(crate) struct KeyTable {
    fd: OwnedFd,
    /// log2 of the number of buckets (at least 1).
    bits: u32,
    /// Words of a key with its padding (even).
    words: usize,
}

impl KeyTable {
    /// A table with room for `keys` keys of `key_words` words (the
    /// table's number not counted), about half full.
    pub(crate) fn new(keys: usize, key_words: usize) -> Result<KeyTable, Error> {
        #[cfg(test)]
        let keys = if CROWDED.with(|c| c.replace(false)) {
            keys / 8
        } else {
            keys
        };
        let buckets = (2 * keys).div_ceil(SLOTS).max(2).next_power_of_two();
        let bits = buckets.trailing_zeros();
        let words = (1 + key_words).next_multiple_of(2);
        let value = (SLOTS * Self::stride(words)) as u32;
        let fd = sys::map_create(MAP_ARRAY, 4, value, buckets as u32, "sluice_tree_tab")
            .map_err(map_err("creating the key table"))?;
        Ok(KeyTable { fd, bits, words })
    }

    /// Bytes of a slot: the key's words, the value, padding.
    fn stride(words: usize) -> usize {
        4 * (words + 2)
    }

    /// Words of a key with its table's number and padding: the program's
    /// key buffer must hold this many, zeros after the key.
    pub(crate) fn words(&self) -> usize {
        self.words
    }

    /// The map's descriptor.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The table as the counting interpreter reads it.
    pub(crate) fn vm_map(&self) -> crate::vm::Map<'_> {
        crate::vm::Map::Array {
            value: SLOTS * Self::stride(self.words),
            entries: 1 << self.bits,
            fd: Some(&self.fd),
        }
    }

    /// Keys this table could hold (its buckets' slots).
    pub(crate) fn room(&self) -> usize {
        SLOTS << self.bits
    }

    /// Where each key goes: the buckets' contents, or `None` when some
    /// key finds no free slot in its [`PROBES`] buckets (a larger table
    /// then). Each key's words are the table's number and the key.
    pub(crate) fn place(&self, entries: &[Entry]) -> Option<Vec<Vec<Entry>>> {
        let n = 1usize << self.bits;
        let mut buckets: Vec<Vec<Entry>> = vec![Vec::new(); n];
        for (key, value) in entries {
            let mut words = key.clone();
            words.resize(self.words, 0);
            let home = (hash(&words) >> (64 - self.bits)) as usize;
            let b = (0..PROBES)
                .map(|k| (home + k) & (n - 1))
                .find(|b| buckets[*b].len() < SLOTS)?;
            buckets[b].push((words, *value));
        }
        Some(buckets)
    }

    /// Write the placed buckets into the map.
    pub(crate) fn fill(&self, buckets: &[Vec<Entry>]) -> Result<(), Error> {
        let stride = Self::stride(self.words);
        for (i, b) in buckets.iter().enumerate().filter(|(_, b)| !b.is_empty()) {
            let mut v = vec![0u8; SLOTS * stride];
            for (s, (words, value)) in b.iter().enumerate() {
                let at = s * stride;
                for (j, w) in words.iter().enumerate() {
                    v[at + 4 * j..at + 4 * j + 4].copy_from_slice(&w.to_ne_bytes());
                }
                let at = at + 4 * self.words;
                v[at..at + 4].copy_from_slice(&value.to_ne_bytes());
            }
            sys::map_update(&self.fd, &(i as u32).to_ne_bytes(), &v)
                .map_err(map_err("filling the key table"))?;
        }
        Ok(())
    }

    /// The lookup of the key at stack offset `buf` ([`KeyTable::words`]
    /// words, 8-aligned; the 4 bytes at `index` are the code's own): its
    /// value in w1, or on to `miss`. r0-r5 are lost.
    pub(crate) fn lookup(&self, e: &mut Emitter, buf: i16, index: i16, miss: Label) {
        let found = e.label();
        e.put(Insn::new(op::LD | op::DW, 3, 0, 0, MUL as u32 as i32));
        e.put(Insn::new(0, 0, 0, 0, (MUL >> 32) as u32 as i32));
        e.put(alu64(op::MOV, 1, 0));
        for i in 0..self.words / 2 {
            e.put(ldx(op::DW, 2, 10, buf + 8 * i as i16));
            e.put(alu64x(op::XOR, 1, 2));
            e.put(alu64x(op::MUL, 1, 3));
        }
        e.put(alu64x(op::MOV, 2, 1));
        e.put(alu64(op::RSH, 2, 32));
        e.put(alu64x(op::XOR, 1, 2));
        e.put(Insn::new(op::LD | op::DW, 3, 0, 0, MIX as u32 as i32));
        e.put(Insn::new(0, 0, 0, 0, (MIX >> 32) as u32 as i32));
        e.put(alu64x(op::MUL, 1, 3));
        e.put(alu64(op::RSH, 1, 64 - self.bits as i32));
        e.put(stx(op::W, 10, index, 1));
        let stride = Self::stride(self.words) as i16;
        for probe in 0..PROBES {
            ld_map(e, 1, &self.fd);
            e.put(alu64x(op::MOV, 2, 10));
            e.put(alu64(op::ADD, 2, index as i32));
            e.put(call(HELPER_MAP_LOOKUP));
            e.jump(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, 0), miss);
            for s in 0..SLOTS as i16 {
                let other = e.label();
                for i in 0..(self.words / 2) as i16 {
                    e.put(ldx(op::DW, 2, 0, s * stride + 8 * i));
                    e.put(ldx(op::DW, 3, 10, buf + 8 * i));
                    e.jump(Insn::new(op::JMP | op::JNE | op::X, 2, 3, 0, 0), other);
                }
                e.put(ldx(op::W, 1, 0, s * stride + 4 * self.words as i16));
                e.goto(found);
                e.mark(other);
            }
            if probe + 1 == PROBES {
                e.goto(miss);
                break;
            }
            // A bucket with room ends the search: the key would be in it.
            let last = (SLOTS as i16 - 1) * stride + 4 * self.words as i16;
            e.put(ldx(op::W, 2, 0, last));
            e.jump(Insn::new(op::JMP | op::JEQ | op::K, 2, 0, 0, 0), miss);
            e.put(ldx(op::W, 1, 10, index));
            e.put(alu64(op::ADD, 1, 1));
            e.put(alu64(op::AND, 1, ((1u64 << self.bits) - 1) as i32));
            e.put(stx(op::W, 10, index, 1));
        }
        e.mark(found);
        // An empty slot matches a key of zeros: not there.
        e.jump(Insn::new(op::JMP | op::JEQ | op::K, 1, 0, 0, 0), miss);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_reads_every_word() {
        let base = [7u32, 1, 2, 3, 4, 5];
        for i in 0..base.len() {
            for bit in [0, 13, 31] {
                let mut k = base;
                k[i] ^= 1 << bit;
                assert_ne!(hash(&k) >> 48, hash(&base) >> 48, "word {i} bit {bit}");
            }
        }
    }

    #[test]
    fn placement_probes_past_full_buckets_and_gives_up() {
        // Room for 600 keys, fuller than built: some buckets overflow.
        let Ok(t) = KeyTable::new(600, 2) else {
            eprintln!("SKIPPED: no BPF maps here");
            return;
        };
        let keys: Vec<Entry> = (0..1100u32)
            .map(|k| (vec![3, k.wrapping_mul(2_654_435_761), k ^ 0x5bd1], k + 1))
            .collect();
        let b = t.place(&keys).expect("room within four buckets");
        assert_eq!(b.iter().map(Vec::len).sum::<usize>(), 1100);
        let moved = keys
            .iter()
            .filter(|(k, _)| {
                let mut w = k.clone();
                w.resize(t.words(), 0);
                let home = (hash(&w) >> (64 - t.bits)) as usize;
                !b[home].iter().any(|(x, _)| *x == w)
            })
            .count();
        assert!(moved > 0, "some keys sit past a full bucket");
        let tiny = KeyTable::new(1, 2).unwrap();
        assert!(tiny.place(&keys).is_none());
    }
}
