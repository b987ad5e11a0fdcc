//! How a cached flow's key is read from a packet: each field as a plain
//! load resolved once per subtable ([`Op`]), the key as masked words of
//! the packet's first bytes ([`Wide`]: a computed field by the bytes it
//! reads, the few fields the words cannot cover read one by one), and
//! the packet's signature that points the first level at an entry.
//!
//! Rule: these reads give exactly the values the tree's field reader
//! gives (or [`ABORT`] where it aborts); a packet a wide form accepts
//! agrees with the key on every field; a signature is only a hint.

use super::super::{DecisionTree, Scratch};
use crate::field::load;
use crate::tree::field::{FieldId, Fields};
use sluice_ir::flat::Touch;
use std::hash::{Hash, Hasher};

/// A field's value in a key: the value, or [`ABORT`] when the read aborts.
pub(super) const ABORT: u64 = 1 << 32;

/// How a subtable reads one of its fields: the tree's read of it
/// ([`crate::tree::field::Read`]), resolved once when the subtable is made, so
/// that a lookup reads plain loads without going through the field table.
#[derive(Clone, Copy, Debug)]
pub(super) enum Op {
    /// `size` bytes at `off`, or at `off` past the IPv4 header whose first
    /// byte is at `hdr` ([`NO_HDR`]: none), then `& mask`.
    Load {
        hdr: u32,
        off: u32,
        size: u8,
        mask: u32,
    },
    /// The wire length.
    Len,
    /// A constant.
    Const(u32),
    /// Anything else: the tree's reader, memoised per packet.
    Slow(FieldId),
}

/// [`Op::Load`] at a fixed offset.
pub(super) const NO_HDR: u32 = u32::MAX;

impl Op {
    pub(super) fn of(fields: &crate::tree::field::Fields, f: FieldId) -> Op {
        use crate::tree::field::Read;
        match fields.how(f) {
            Read::Load {
                hdr,
                off,
                size,
                mask,
            } if hdr.map_or(true, |h| h != NO_HDR) => Op::Load {
                hdr: hdr.unwrap_or(NO_HDR),
                off: *off,
                size: *size,
                mask: *mask,
            },
            Read::Len => Op::Len,
            Read::Const(k) => Op::Const(*k),
            _ => Op::Slow(f),
        }
    }

    /// The field's value in a key: as [`crate::tree::field::Fields::read`]
    /// reads it, or [`ABORT`].
    #[inline(always)]
    pub(super) fn read(self, t: &DecisionTree, pkt: &[u8], wirelen: u32, s: &mut Scratch) -> u64 {
        match self {
            Op::Load {
                hdr,
                off,
                size,
                mask,
            } => {
                let Some(at) = address(hdr, off, pkt) else {
                    return ABORT;
                };
                match load(pkt, at, u32::from(size)) {
                    Some(v) => u64::from(v & mask),
                    None => ABORT,
                }
            }
            Op::Len => u64::from(wirelen),
            Op::Const(k) => u64::from(k),
            Op::Slow(f) => t
                .fields
                .read(f, pkt, wirelen, &mut s.memo)
                .map_or(ABORT, u64::from),
        }
    }
}

/// Where an [`Op::Load`] reads: `off`, or `off` past the IPv4 header whose
/// first byte is at `hdr`; `None` when the packet lacks that byte.
#[inline(always)]
fn address(hdr: u32, off: u32, pkt: &[u8]) -> Option<u64> {
    if hdr == NO_HDR {
        return Some(u64::from(off));
    }
    pkt.get(hdr as usize)
        .map(|b| (u64::from(b & 0xf) << 2) + u64::from(off))
}

/// Bytes of a packet a [`Wide`] form covers.
pub(super) const WIDE_BYTES: usize = 128;

/// An entry's key as the first-level check reads it: a packet of at
/// least `need` bytes and fewer than `below` (where the key's loads
/// aborted) whose first [`WIDE_BYTES`] bytes, as little-endian
/// words `& mask`, equal `value` (and whose wire length is `wirelen`, if
/// the key has it) agrees with the entry on every field the form covers
/// (each a load at a fixed offset, or behind an IPv4 header whose length
/// nibble is then part of the mask, or the wire length). A load and a
/// compare per eight bytes up to `need` instead of a read per field. The fields it cannot cover (a
/// computed field, or a load beyond those bytes), at most [`REST`] of
/// them, are listed in `rest` and read one by one. `need` above
/// [`WIDE_BYTES`]: no such form (more such fields than that); every
/// field is read one by one.
#[derive(Clone, Debug)]
pub(super) struct Wide {
    mask: [u64; WIDE_BYTES / 8],
    value: [u64; WIDE_BYTES / 8],
    need: u32,
    below: u32,
    /// The wire length, as `u64`, or [`ANY_LEN`].
    wirelen: u64,
    /// The key's fields the words do not cover, by index: the first
    /// `rests` of them.
    rest: [u8; REST],
    rests: u8,
}

/// Fields of a key a [`Wide`] form leaves to be read one by one, at most.
pub(super) const REST: usize = 4;

/// [`Wide::wirelen`] of a key without the wire length.
pub(super) const ANY_LEN: u64 = u64::MAX;

impl Wide {
    pub(super) const NONE: Wide = Wide {
        mask: [0; WIDE_BYTES / 8],
        value: [0; WIDE_BYTES / 8],
        need: u32::MAX,
        below: u32::MAX,
        wirelen: ANY_LEN,
        rest: [0; REST],
        rests: 0,
    };

    /// The form of `key` (read by `ops` from `pkt`, `wirelen` bytes on
    /// the wire).
    pub(super) fn of(fields: &Fields, ops: &[Op], key: &[u64], pkt: &[u8], wirelen: u32) -> Wide {
        let mut w = Wide {
            need: 0,
            ..Wide::NONE
        };
        for (i, (op, &k)) in ops.iter().zip(key).enumerate() {
            match *op {
                Op::Const(_) => {}
                Op::Load {
                    hdr,
                    off,
                    size,
                    mask,
                } => {
                    let Some(at) = address(hdr, off, pkt) else {
                        // Aborted for want of the header's first byte.
                        w.below = w.below.min(hdr.saturating_add(1));
                        continue;
                    };
                    let beyond = |b: u64| b > WIDE_BYTES as u64;
                    if beyond(at + u64::from(size)) || (hdr != NO_HDR && beyond(u64::from(hdr) + 1))
                    {
                        // Beyond the words (or behind a header length
                        // beyond them): read one by one.
                        if !w.later(i) {
                            return Wide::NONE;
                        }
                        continue;
                    }
                    // The header length the address depends on is part of
                    // the form.
                    if hdr != NO_HDR {
                        w.byte(u64::from(hdr), 0x0f, pkt[hdr as usize]);
                    }
                    if k == ABORT {
                        // The packet ends before the load's end.
                        let end = (at + u64::from(size)).min(u64::from(u32::MAX));
                        w.below = w.below.min(end as u32);
                        continue;
                    }
                    for j in 0..u64::from(size) {
                        let shift = 8 * (u64::from(size) - 1 - j);
                        let (m, v) = ((mask >> shift) as u8, (k >> shift) as u8);
                        w.byte(at + j, m, v);
                    }
                }
                Op::Len if k != ABORT => w.wirelen = k,
                Op::Slow(f) if w.traced(fields, f, k, pkt, wirelen) => {}
                Op::Len | Op::Slow(_) => {
                    if !w.later(i) {
                        return Wide::NONE;
                    }
                }
            }
        }
        w
    }

    /// Cover computed field `f` (whose value is `k` on `pkt`) by the
    /// bytes and the wire length it reads, and the end of the load that
    /// aborts it: a packet that agrees on them has the same value. False
    /// (and the form as it was) when some are beyond the form's bytes, or
    /// the field cannot say what it reads.
    fn traced(&mut self, fields: &Fields, f: FieldId, k: u64, pkt: &[u8], wirelen: u32) -> bool {
        let mut w = self.clone();
        let mut covered = true;
        let value = fields.read_traced(f, pkt, wirelen, |t| match t {
            Touch::Len => w.wirelen = u64::from(wirelen),
            Touch::Bytes { at, width } => {
                let end = at + u64::from(width);
                if end > pkt.len() as u64 {
                    w.below = w.below.min(end.min(u64::from(u32::MAX)) as u32);
                } else if end > WIDE_BYTES as u64 {
                    covered = false;
                } else {
                    for j in at..end {
                        w.byte(j, 0xff, pkt[j as usize]);
                    }
                }
            }
        });
        let Some(value) = value else {
            return false;
        };
        debug_assert_eq!(
            value.map_or(ABORT, u64::from),
            k,
            "the key's value of field {f}"
        );
        if covered {
            *self = w;
        }
        covered
    }

    /// Leave field `i` of the key to be read one by one: false when
    /// there are too many such fields already.
    fn later(&mut self, i: usize) -> bool {
        let (Ok(i), Some(slot)) = (u8::try_from(i), self.rest.get_mut(usize::from(self.rests)))
        else {
            return false;
        };
        *slot = i;
        self.rests += 1;
        true
    }

    /// Require byte `at` (within [`WIDE_BYTES`]) of the packet `& m` to
    /// be `v`.
    fn byte(&mut self, at: u64, m: u8, v: u8) {
        let (i, shift) = (at as usize / 8, 8 * (at % 8));
        self.mask[i] |= u64::from(m) << shift;
        self.value[i] |= u64::from(v & m) << shift;
        self.need = self.need.max(at as u32 + 1);
    }

    /// How many of the key's fields the form leaves to be read one by
    /// one.
    #[cfg(test)]
    pub(super) fn left(&self) -> usize {
        usize::from(self.rests)
    }

    /// Whether the key has this form (else its fields are read one by one).
    pub(super) fn exists(&self) -> bool {
        self.need <= WIDE_BYTES as u32
    }

    /// Does the packet agree with the key (read by `ops`)? By the words
    /// and the fields they leave, or, without a form, every field read
    /// one by one.
    #[inline]
    pub(super) fn agrees(
        &self,
        ops: &[Op],
        key: &[u64],
        t: &DecisionTree,
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
    ) -> bool {
        let mut same = |i: usize| ops[i].read(t, pkt, wirelen, s) == key[i];
        match self.matches(pkt, wirelen) {
            Some(words) => {
                words
                    && self.rest[..usize::from(self.rests)]
                        .iter()
                        .all(|&i| same(usize::from(i)))
            }
            None => (0..ops.len()).all(same),
        }
    }

    /// Does the packet agree with the words (and the lengths)?
    #[inline]
    fn matches(&self, pkt: &[u8], wirelen: u32) -> Option<bool> {
        if !self.exists() {
            return None;
        }
        if pkt.len() < self.need as usize
            || pkt.len() >= self.below as usize
            || (self.wirelen != ANY_LEN && self.wirelen != u64::from(wirelen))
        {
            return Some(false);
        }
        // The words up to `need`; the packet may end within the last one
        // (past `need`, where the mask is zero).
        let words = (self.need as usize).div_ceil(8);
        let full = words.min(pkt.len() / 8);
        let mut diff = 0;
        for (i, c) in pkt[..8 * full].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            diff |= (u64::from_le_bytes(b) & self.mask[i]) ^ self.value[i];
        }
        if full < words {
            let mut b = [0u8; 8];
            let tail = &pkt[8 * full..];
            b[..tail.len()].copy_from_slice(tail);
            diff |= (u64::from_le_bytes(b) & self.mask[full]) ^ self.value[full];
        }
        Some(diff == 0)
    }
}

/// A packet's signature: a hash of the header fields that stay the same
/// along a flow (addresses, VLAN tags, protocol, ports, TCP flags), not of
/// those that change from packet to packet (IP identification, length,
/// checksums, sequence numbers). Only a hint of which entry holds the
/// packet's flow: the entry's key, read from the packet, decides.
///
/// Ethernet frames of IPv4 with a 20-byte header, or of IPv6, behind up
/// to two VLAN tags, take a few wide loads and two or three
/// multiplications; other packets hash their headers bytewise.
#[inline]
pub(super) fn signature(pkt: &[u8]) -> u64 {
    // Bytes of VLAN tags before the type.
    let tag = |o: usize| {
        matches!(
            pkt.get(12 + o..14 + o),
            Some([0x81, 0x00] | [0x88, 0xa8] | [0x91, 0x00])
        )
    };
    let o = match (tag(0), tag(4)) {
        (false, _) => 0,
        (true, false) => 4,
        (true, true) => 8,
    };
    // The frame from `o` on: its bytes 0..12 are the addresses' last
    // 12 - o bytes and the tags, 12..14 the type.
    let Some(h) = pkt.get(o..) else {
        return bytewise_signature(pkt);
    };
    let w = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&h[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let fold = |x: u64, y: u64| {
        let p = u128::from(x) * u128::from(y);
        (p as u64) ^ ((p >> 64) as u64)
    };
    match h.get(12..15) {
        Some([0x08, 0x00, 0x45]) if h.len() >= 48 => {
            // Little-endian: byte o + i of the frame is bits 8i..8i + 8.
            // Bytes 0..16: the addresses, type, version, header length, TOS.
            let (a, b) = (w(0), w(8));
            // Bytes 20..24: flags, fragment offset, TTL, protocol (not the
            // length and identification before them).
            let c = w(16) & 0xffff_ffff_0000_0000;
            // Bytes 26..32 (not the checksum before them): the addresses.
            let d = w(24) & !0xffff;
            // Bytes 32..38: the rest of the addresses, the ports.
            let e = w(32) & 0x0000_ffff_ffff_ffff;
            // Bytes 46..48 of TCP: data offset and flags.
            let f = if h[23] == 6 {
                w(40) & 0xffff_0000_0000_0000
            } else {
                0
            };
            fold(a ^ d ^ 0x9e37_79b9_7f4a_7c15, b ^ f ^ 0xbf58_476d_1ce4_e5b9)
                ^ fold(c ^ 0x94d0_49bb_1331_11eb, e ^ 0x2545_f491_4f6c_dd1d)
        }
        Some([0x86, 0xdd, _]) if h.len() >= 64 => {
            // Bytes 0..16: the addresses, type, version, class, label.
            let (a, b) = (w(0), w(8));
            // Bytes 16..24: the label's rest, next header, the source
            // (not the payload's length and the hop limit).
            let c = w(16) & 0xffff_00ff_0000_ffff;
            // Bytes 24..56: the addresses, the source port.
            let (d, e, f, g) = (w(24), w(32), w(40), w(48));
            // Bytes 56..58: the destination port; 66..68 of TCP: data
            // offset and flags.
            let mut i = w(56) & 0xffff;
            if h[20] == 6 && h.len() >= 68 {
                i |= w(60) & 0xffff_0000_0000_0000;
            }
            fold(a ^ d ^ 0x9e37_79b9_7f4a_7c15, b ^ e ^ 0xbf58_476d_1ce4_e5b9)
                ^ fold(c ^ f ^ 0x94d0_49bb_1331_11eb, g ^ i ^ 0x2545_f491_4f6c_dd1d)
        }
        _ => bytewise_signature(pkt),
    }
}

/// [`signature`] of any packet: its headers hashed bytewise.
pub(super) fn bytewise_signature(pkt: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    let half = |o: usize| pkt.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 12;
    while matches!(half(at), Some(0x8100 | 0x88a8 | 0x9100)) {
        at += 4;
    }
    let bytes = |h: &mut rustc_hash::FxHasher, r: std::ops::Range<usize>| {
        let r = r.start.min(pkt.len())..r.end.min(pkt.len());
        h.write(&pkt[r]);
    };
    bytes(&mut h, 0..at + 2);
    let l3 = at + 2;
    let l4 = match half(at) {
        Some(0x0800) => {
            let ihl = pkt.get(l3).map_or(20, |b| usize::from(b & 0xf) * 4);
            bytes(&mut h, l3..l3 + 2); // version, header length, TOS
            bytes(&mut h, l3 + 6..l3 + 8); // flags, fragment offset
            bytes(&mut h, l3 + 9..l3 + 10); // protocol
            bytes(&mut h, l3 + 12..l3 + 20); // addresses
            pkt.get(l3 + 9).map(|p| (l3 + ihl, *p))
        }
        Some(0x86dd) => {
            bytes(&mut h, l3..l3 + 4);
            bytes(&mut h, l3 + 6..l3 + 7);
            bytes(&mut h, l3 + 8..l3 + 40);
            pkt.get(l3 + 6).map(|p| (l3 + 40, *p))
        }
        _ => {
            bytes(&mut h, l3..l3 + 48);
            None
        }
    };
    match l4 {
        Some((l4, 6)) => {
            bytes(&mut h, l4..l4 + 4);
            bytes(&mut h, l4 + 12..l4 + 14); // data offset, flags
        }
        Some((l4, 17 | 132)) => bytes(&mut h, l4..l4 + 4),
        Some((l4, _)) => bytes(&mut h, l4..l4 + 4),
        None => {}
    }
    pkt.len().min(64).hash(&mut h);
    h.finish()
}
