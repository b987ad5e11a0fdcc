//! Yardsticks for the benchmarks: what reading the packets costs a single
//! filter ([`header_bytes`]), and what memory alone costs a hash
//! demultiplexer over a large table ([`MemoryFloor`]).

use crate::batch::prefetch;
use crate::merged::slots::Slots;
use crate::merged::PIPE;

/// The first byte of a packet's first cache line and its 64th byte (or its
/// last, if shorter), added: the read of the header bytes filters test,
/// with nothing tested. A loop of this alone over the packets is the floor
/// under any filter that reads them (`sluice bench`'s "memory floor", the
/// filter bench's "loop floor").
///
/// ```
/// assert_eq!(sluice_native::floor::header_bytes(&[3, 0, 4]), 7);
/// assert_eq!(sluice_native::floor::header_bytes(&[]), 0);
/// ```
#[inline]
pub fn header_bytes(pkt: &[u8]) -> u64 {
    let last = pkt.len().min(64).saturating_sub(1);
    let first = pkt.first().copied().unwrap_or(0) as u64;
    first + pkt.get(last).copied().unwrap_or(0) as u64
}

/// Words in a 64-byte cache line.
const LINE_WORDS: usize = 8;

/// How many packets ahead [`MemoryFloor::run`] prefetches: two of the
/// pipelined batch functions' chunks, as far ahead as they look.
const AHEAD: usize = 2 * PIPE;

/// The least any hash demultiplexer can spend per packet on this machine:
/// a loop that reads each packet's first cache line (the header bytes
/// filters read) and one line of a table, picked by hashing the packet's
/// addresses and ports, prefetched `AHEAD` packets ahead; no tests, no
/// key compares, no probing. The table has the size of the tables the
/// classifier probes and lies on huge pages as they do, so that the
/// batch path can be set beside it, table size by table size: what the
/// classifier adds is its own work, what is left is memory's.
///
/// ```
/// use sluice_native::floor::MemoryFloor;
/// let floor = MemoryFloor::new(1 << 20);
/// let pkt = [0u8; 54];
/// let pkts = [(&pkt[..], 54)];
/// floor.run(&pkts);
/// assert_eq!(floor.bytes(), 1 << 20);
/// ```
pub struct MemoryFloor {
    slots: Slots,
    /// Lines in the table, minus one (a power of two minus one).
    mask: usize,
}

impl MemoryFloor {
    /// A table of `bytes` rounded up to a power of two of 64-byte lines
    /// (at least one), each line written once so that no timed pass
    /// faults a page in.
    pub fn new(bytes: usize) -> MemoryFloor {
        let lines = bytes.div_ceil(64).max(1).next_power_of_two();
        let mut slots = Slots::zeroed(lines * LINE_WORDS);
        for (l, line) in slots.chunks_mut(LINE_WORDS).enumerate() {
            line[0] = l as u64;
        }
        MemoryFloor {
            slots,
            mask: lines - 1,
        }
    }

    /// The table's size in bytes.
    pub fn bytes(&self) -> usize {
        self.slots.len() * 8
    }

    /// The line a packet picks: a hash of its bytes 26 to 38 (the
    /// addresses and ports behind an IPv4 header of 5 words) where it has
    /// them.
    fn line(&self, pkt: &[u8]) -> usize {
        let word = |at: usize| {
            pkt.get(at..at + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map_or(0, u64::from_ne_bytes)
        };
        let h = (word(26) ^ word(30).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (h >> 32) as usize & self.mask
    }

    /// Prefetch the line `pkt` picks; that line's first word's index.
    fn fetch(&self, pkt: &[u8]) -> usize {
        let at = self.line(pkt) * LINE_WORDS;
        prefetch(self.slots[at..].as_ptr().cast());
        at
    }

    /// One pass over `pkts`; the sum of the bytes and words read (so that
    /// the reads cannot be left out). Each packet is hashed once, `AHEAD`
    /// packets before its line is read.
    pub fn run(&self, pkts: &[(&[u8], u32)]) -> u64 {
        // Where the next `AHEAD` packets' lines start, by packet index
        // modulo `AHEAD`.
        let mut ahead = [0usize; AHEAD];
        for (at, (p, _)) in ahead.iter_mut().zip(pkts) {
            *at = self.fetch(p);
        }
        let mut sum = 0u64;
        for (i, (p, _)) in pkts.iter().enumerate() {
            let at = &mut ahead[i % AHEAD];
            sum = sum.wrapping_add(header_bytes(p));
            sum = sum.wrapping_add(self.slots[*at]);
            if let Some((q, _)) = pkts.get(i + AHEAD) {
                *at = self.fetch(q);
            }
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every packet reads its two header bytes and the first word of the
    /// line its hash picks, which holds that line's number.
    #[test]
    fn a_pass_reads_each_packets_bytes_and_line() {
        let floor = MemoryFloor::new(64 * 1024);
        assert_eq!(floor.bytes(), 64 * 1024);
        let mut a = vec![0u8; 54];
        a[0] = 3;
        a[53] = 4;
        a[26..38].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 4, 0, 0, 80]);
        let short = [7u8; 10];
        let pkts = [(&a[..], 54), (&short[..], 10)];
        let want = 3 + 4 + floor.line(&a) as u64 + 7 + 7 + floor.line(&short) as u64;
        assert_eq!(floor.run(&pkts), want);
        assert_eq!(floor.line(&short), floor.line(&[]));
        assert!(floor.line(&a) <= floor.mask);
    }

    /// A size that is not a power of two of lines is rounded up; none is
    /// one line.
    #[test]
    fn sizes_round_up_to_a_power_of_two_of_lines() {
        assert_eq!(MemoryFloor::new(0).bytes(), 64);
        assert_eq!(MemoryFloor::new(65).bytes(), 128);
        assert_eq!(MemoryFloor::new(3 << 20).bytes(), 4 << 20);
    }
}
