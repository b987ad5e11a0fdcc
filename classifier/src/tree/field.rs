//! The values a decision tree tests, interned and put in one total order.
//!
//! A *field* is anything a path's atom tests: an IR value (a packet load,
//! possibly masked or computed, or the wire length) or a whole predicate
//! that does not reduce to one (a comparison of two packet values, a
//! `protochain`), which reads as 1 or 0. Each distinct field gets one id,
//! and a packet's value of it is read at most once per node that tests it:
//! a plain or masked load at a fixed offset or behind an IPv4 header costs
//! one bounds check and one load; other values go through the IR's
//! reference interpreter, memoised per packet.
//!
//! Fields are ordered by protocol layer, which is the order in which a
//! path's tests go down the tree: fixed-offset loads by offset (link
//! header, then network header, then transport at fixed offsets), then
//! loads behind an IPv4 header, then other computed values, the wire
//! length, and predicates last. The order only decides how well paths share
//! prefixes, never what a filter means: an atom holds or not whatever the
//! order it is checked in (see [`crate::path`]).
//!
//! ```
//! use sluice_classifier::tree::field::Fields;
//! use sluice_ir::{Val, Size};
//! let mut f = Fields::default();
//! let proto = f.intern_val(&Val::load_abs(23, Size::Byte));
//! let ether = f.intern_val(&Val::load_abs(12, Size::Half));
//! assert!(f.before(ether, proto));
//! assert_eq!(f.read(ether, &[0; 14], 14, &mut Default::default()), Some(0));
//! assert_eq!(f.read(proto, &[0; 14], 14, &mut Default::default()), None);
//! ```

use crate::field::{ipv4_header_length, load};
use sluice_ir::flat::Flat;
use sluice_ir::{BinOp, Pred, Val};
use std::cmp::Ordering;
use std::collections::HashMap;

/// Index of an interned field.
pub type FieldId = u32;

/// What a field is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// An IR value.
    Val(Val),
    /// A predicate, read as 1 (true) or 0 (false).
    Pred(Pred),
}

/// `size` bytes (big-endian) at `off`, or at `off` past the IPv4 header
/// whose first byte is at `hdr`; `None` past the packet.
///
/// ```
/// use sluice_classifier::tree::field::load_at;
/// assert_eq!(load_at(&[0x45, 1, 2, 3, 4, 5], None, 1, 2), Some(0x102));
/// assert_eq!(load_at(&[0x41, 0, 0, 0, 9], Some(0), 0, 1), Some(9));
/// assert_eq!(load_at(&[0x41], Some(0), 0, 1), None);
/// ```
#[inline]
pub fn load_at(pkt: &[u8], hdr: Option<u32>, off: u32, size: u8) -> Option<u32> {
    let at = match hdr {
        None => u64::from(off),
        Some(h) => (u64::from(*pkt.get(h as usize)? & 0xf) << 2) + u64::from(off),
    };
    load(pkt, at, u32::from(size))
}

/// How a field is read.
///
/// ```
/// use sluice_classifier::tree::field::{Fields, Read};
/// let mut f = Fields::default();
/// let id = f.intern_val(&sluice_ir::Val::Len);
/// assert_eq!(f.how(id), &Read::Len);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    /// A constant.
    Const(u32),
    /// The wire length.
    Len,
    /// `size` bytes (1, 2 or 4, big-endian) at `off`, or at `off` past the
    /// IPv4 header whose first byte is at `hdr` (`4 * (pkt[hdr] & 0xf)`),
    /// then `& mask`.
    Load {
        /// Where the IPv4 header starts, if the offset is behind it.
        hdr: Option<u32>,
        /// The offset.
        off: u32,
        /// Bytes loaded.
        size: u8,
        /// Applied after the load (`u32::MAX` for none).
        mask: u32,
    },
    /// Any other value, through the IR interpreter.
    Generic(Val),
    /// A predicate: 1 or 0.
    Pred(Pred),
}

/// The order key of a field (see the module doc): layer class, offset,
/// width, mask.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rank {
    class: u8,
    off: u32,
    size: u8,
    /// 0 for an unmasked load, so a field is tried before its masks.
    masked: u8,
    mask: u32,
}

/// Interned fields.
///
/// ```
/// let f = sluice_classifier::tree::field::Fields::default();
/// assert!(f.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Fields {
    sources: Vec<Source>,
    reads: Vec<Read>,
    /// Per field, its value as a flat program where it is computed
    /// ([`Read::Generic`]) and can be one.
    flats: Vec<Option<Flat>>,
    ranks: Vec<Rank>,
    ids: HashMap<Source, FieldId>,
}

/// The one form of a value that has several (`None` when `s` is it), so
/// that the same bytes read the same way are one field: a load at a
/// constant base is a load at the sum (when that does not overflow), and
/// a mask that keeps every bit a load gives is dropped. Each form loads
/// the same bytes and aborts on the same packets.
///
/// ```
/// use sluice_classifier::tree::field::Fields;
/// use sluice_ir::{BinOp, Size, Val};
/// let mut f = Fields::default();
/// let byte = f.intern_val(&Val::load_abs(14, Size::Byte));
/// let at = Val::Load { base: Box::new(Val::Const(2)), offset: 12, size: Size::Byte };
/// assert_eq!(f.intern_val(&at), byte);
/// let masked = Val::Bin(BinOp::And, Box::new(at), Box::new(Val::Const(0xffff)));
/// assert_eq!(f.intern_val(&masked), byte);
/// ```
fn canonical(s: &Source) -> Option<Source> {
    fn val(v: &Val) -> Option<Val> {
        match v {
            Val::Load { base, offset, size } => match **base {
                Val::Const(c) if c != 0 => Some(Val::load_abs(c.checked_add(*offset)?, *size)),
                _ => None,
            },
            Val::Bin(BinOp::And, a, m) => {
                let inner = val(a);
                let load = inner.as_ref().unwrap_or(a);
                // A mask that reads nothing and never aborts is its value:
                // the pcap front end leaves `tcp-syn|tcp-ack` unfolded, as
                // libpcap's parser does.
                let mask = m.known().filter(|_| !m.can_abort());
                let keeps_all = match (load, mask) {
                    (Val::Load { size, .. }, Some(m)) => {
                        // Every bit of the 1, 2 or 4 bytes loaded.
                        let all = u32::MAX >> (32 - 8 * size.bytes());
                        m & all == all
                    }
                    _ => false,
                };
                let folded = mask.is_some() && !m.is_const();
                match (keeps_all, inner) {
                    (true, inner) => Some(inner.unwrap_or_else(|| (**a).clone())),
                    (false, None) if !folded => None,
                    (false, inner) => Some(Val::Bin(
                        BinOp::And,
                        Box::new(inner.unwrap_or_else(|| (**a).clone())),
                        Box::new(mask.map_or_else(|| (**m).clone(), Val::Const)),
                    )),
                }
            }
            _ => None,
        }
    }
    match s {
        Source::Val(v) => val(v).map(Source::Val),
        Source::Pred(_) => None,
    }
}

/// A load the fast reader handles: `(hdr, off, size)`.
fn plain_load(v: &Val) -> Option<(Option<u32>, u32, u8)> {
    let Val::Load { base, offset, size } = v else {
        return None;
    };
    let size = size.bytes() as u8;
    match base.as_ref() {
        Val::Const(b) => Some((None, b.checked_add(*offset)?, size)),
        b => Some((Some(ipv4_header_length(b)?), *offset, size)),
    }
}

fn read_of(s: &Source) -> Read {
    let v = match s {
        Source::Pred(p) => return Read::Pred(p.clone()),
        Source::Val(v) => v,
    };
    match v {
        Val::Const(k) => return Read::Const(*k),
        Val::Len => return Read::Len,
        _ => {}
    }
    let (load, mask) = match v {
        Val::Bin(BinOp::And, a, m) => match **m {
            Val::Const(m) => (a.as_ref(), m),
            _ => (v, u32::MAX),
        },
        v => (v, u32::MAX),
    };
    match plain_load(load) {
        Some((hdr, off, size)) => Read::Load {
            hdr,
            off,
            size,
            mask,
        },
        None => Read::Generic(v.clone()),
    }
}

fn rank_of(r: &Read) -> Rank {
    let (class, off, size, mask) = match r {
        Read::Load {
            hdr: None,
            off,
            size,
            mask,
        } => (0, *off, *size, *mask),
        Read::Load {
            hdr: Some(h),
            off,
            size,
            mask,
        } => (1, h.saturating_add(*off), *size, *mask),
        Read::Generic(_) => (2, 0, 0, u32::MAX),
        Read::Len => (3, 0, 0, u32::MAX),
        Read::Const(_) => (4, 0, 0, u32::MAX),
        Read::Pred(_) => (5, 0, 0, u32::MAX),
    };
    Rank {
        class,
        off,
        size,
        masked: (mask != u32::MAX) as u8,
        mask,
    }
}

impl Fields {
    /// The id of a field, adding it if new.
    ///
    /// ```
    /// use sluice_classifier::tree::field::{Fields, Source};
    /// let mut f = Fields::default();
    /// let a = f.intern(&Source::Val(sluice_ir::Val::Len));
    /// assert_eq!(f.intern(&Source::Val(sluice_ir::Val::Len)), a);
    /// assert_eq!(f.len(), 1);
    /// ```
    pub fn intern(&mut self, s: &Source) -> FieldId {
        let canon = canonical(s);
        let s = canon.as_ref().unwrap_or(s);
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = self.sources.len() as FieldId;
        let read = read_of(s);
        self.flats.push(match &read {
            Read::Generic(v) => Flat::new(v),
            _ => None,
        });
        self.ranks.push(rank_of(&read));
        self.reads.push(read);
        self.sources.push(s.clone());
        self.ids.insert(s.clone(), id);
        id
    }

    /// [`Fields::intern`] of an IR value.
    ///
    /// ```
    /// let mut f = sluice_classifier::tree::field::Fields::default();
    /// let a = f.intern_val(&sluice_ir::Val::Len);
    /// assert_eq!(a, 0);
    /// ```
    pub fn intern_val(&mut self, v: &Val) -> FieldId {
        self.intern(&Source::Val(v.clone()))
    }

    /// The id of a field already interned.
    ///
    /// ```
    /// use sluice_classifier::tree::field::{Fields, Source};
    /// let f = Fields::default();
    /// assert_eq!(f.get(&Source::Val(sluice_ir::Val::Len)), None);
    /// ```
    pub fn get(&self, s: &Source) -> Option<FieldId> {
        let canon = canonical(s);
        self.ids.get(canon.as_ref().unwrap_or(s)).copied()
    }

    /// Number of fields.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::field::Fields::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// True when no field is interned.
    ///
    /// ```
    /// assert!(sluice_classifier::tree::field::Fields::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// What field `id` is.
    ///
    /// ```
    /// use sluice_classifier::tree::field::{Fields, Source};
    /// let mut f = Fields::default();
    /// let a = f.intern_val(&sluice_ir::Val::Len);
    /// assert_eq!(f.source(a), &Source::Val(sluice_ir::Val::Len));
    /// ```
    pub fn source(&self, id: FieldId) -> &Source {
        &self.sources[id as usize]
    }

    /// How field `id` is read.
    ///
    /// ```
    /// use sluice_classifier::tree::field::{Fields, Read};
    /// let mut f = Fields::default();
    /// let a = f.intern_val(&sluice_ir::Val::load_abs(12, sluice_ir::Size::Half));
    /// assert_eq!(f.how(a), &Read::Load { hdr: None, off: 12, size: 2, mask: u32::MAX });
    /// ```
    pub fn how(&self, id: FieldId) -> &Read {
        &self.reads[id as usize]
    }

    /// A computed field's value (or `None` where it aborts), telling
    /// `touch` what it reads of the packet (see
    /// [`Flat::eval_traced`]); `None` for a field that cannot say: a
    /// value too deep for a flat program, a predicate other than a
    /// protocol chain from a known header, or a plain read.
    #[inline]
    pub(crate) fn read_traced(
        &self,
        id: FieldId,
        pkt: &[u8],
        wirelen: u32,
        touch: impl FnMut(sluice_ir::flat::Touch),
    ) -> Option<Option<u32>> {
        match &self.reads[id as usize] {
            Read::Generic(_) => self.flats[id as usize]
                .as_ref()
                .map(|f| f.eval_traced(pkt, wirelen, touch)),
            Read::Pred(Pred::ProtoChain {
                v6,
                start: Val::Const(start),
                proto,
            }) => Some(
                sluice_ir::eval::protochain_traced(pkt, *start, *v6, *proto, touch)
                    .ok()
                    .map(u32::from),
            ),
            _ => None,
        }
    }

    /// The order of two fields (see the module doc).
    ///
    /// ```
    /// let mut f = sluice_classifier::tree::field::Fields::default();
    /// let a = f.intern_val(&sluice_ir::Val::Len);
    /// assert_eq!(f.order(a, a), std::cmp::Ordering::Equal);
    /// ```
    pub fn order(&self, a: FieldId, b: FieldId) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        self.ranks[a as usize]
            .cmp(&self.ranks[b as usize])
            .then_with(|| self.sources[a as usize].cmp(&self.sources[b as usize]))
    }

    /// True if `a` comes before `b`.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::tree::field::Fields::default();
    /// let len = f.intern_val(&Val::Len);
    /// let byte = f.intern_val(&Val::load_abs(100, Size::Byte));
    /// assert!(f.before(byte, len));
    /// ```
    pub fn before(&self, a: FieldId, b: FieldId) -> bool {
        self.order(a, b) == Ordering::Less
    }

    /// Read field `id` from a packet; `None` when the read aborts (a load
    /// past the captured bytes, a division by zero). `memo` keeps the
    /// values of computed fields for the current packet.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::tree::field::Fields::default();
    /// let a = f.intern_val(&Val::load_abs(0, Size::Half));
    /// assert_eq!(f.read(a, &[1, 2], 60, &mut Default::default()), Some(0x102));
    /// ```
    #[inline]
    pub fn read(&self, id: FieldId, pkt: &[u8], wirelen: u32, memo: &mut Memo) -> Option<u32> {
        match &self.reads[id as usize] {
            Read::Load {
                hdr,
                off,
                size,
                mask,
            } => load_at(pkt, *hdr, *off, *size).map(|v| v & mask),
            Read::Len => Some(wirelen),
            Read::Const(k) => Some(*k),
            Read::Generic(_) | Read::Pred(_) => memo.cached(id, || self.compute(id, pkt, wirelen)),
        }
    }

    /// Read a computed field (no memo): by a flat program or a protocol
    /// chain's walk where it has one ([`Fields::read_traced`], telling
    /// nothing), else by the IR interpreter.
    fn compute(&self, id: FieldId, pkt: &[u8], wirelen: u32) -> Option<u32> {
        if let Some(v) = self.read_traced(id, pkt, wirelen, |_| {}) {
            return v;
        }
        match &self.reads[id as usize] {
            Read::Generic(v) => sluice_ir::eval_val(v, pkt, wirelen).ok(),
            Read::Pred(p) => sluice_ir::eval_pred(p, pkt, wirelen).ok().map(u32::from),
            _ => self.read(id, pkt, wirelen, &mut Memo::default()),
        }
    }
}

/// Per-packet memory of computed fields, so each is computed once per
/// packet however many nodes test it (the tuple space's, with the tree's
/// fields computed by [`Fields::read`]).
pub use crate::field::Memo;

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{CmpOp, Size};

    #[test]
    fn a_canonical_form_reads_and_aborts_alike() {
        let pkt: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        for base in [0u32, 1, 7, 30, u32::MAX - 2] {
            for off in [0u32, 3, 9] {
                for size in [Size::Byte, Size::Half, Size::Word] {
                    let or = |a, b| {
                        Val::Bin(BinOp::Or, Box::new(Val::Const(a)), Box::new(Val::Const(b)))
                    };
                    let masks = [
                        None,
                        Some(Val::Const(0xff)),
                        Some(Val::Const(0xffff)),
                        Some(Val::Const(u32::MAX)),
                        Some(Val::Const(0x0f)),
                        // Masks of constants, folded: some bits, all bits,
                        // and one undefined (left as it is).
                        Some(or(0x0c, 0x03)),
                        Some(or(0xff00, 0x00ff)),
                        Some(Val::Bin(
                            BinOp::Div,
                            Box::new(Val::Const(1)),
                            Box::new(Val::Const(0)),
                        )),
                    ];
                    for mask in masks {
                        let load = Val::Load {
                            base: Box::new(Val::Const(base)),
                            offset: off,
                            size,
                        };
                        let v = match mask {
                            None => load,
                            Some(m) => Val::Bin(BinOp::And, Box::new(load), Box::new(m)),
                        };
                        let Some(Source::Val(c)) = canonical(&Source::Val(v.clone())) else {
                            continue;
                        };
                        for n in 0..=pkt.len() {
                            assert_eq!(
                                sluice_ir::eval_val(&v, &pkt[..n], 60),
                                sluice_ir::eval_val(&c, &pkt[..n], 60),
                                "{v:?} as {c:?} on {n} bytes"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_mask_of_constants_reads_as_a_masked_load() {
        // `tcp[13] & (tcp-syn|tcp-ack)` as the pcap front end gives it.
        let hl = Val::ip_hdr_len(14);
        let flags = Val::Load {
            base: Box::new(hl),
            offset: 27,
            size: Size::Byte,
        };
        let or = Val::Bin(BinOp::Or, Box::new(Val::Const(2)), Box::new(Val::Const(16)));
        let unfolded = Val::Bin(BinOp::And, Box::new(flags.clone()), Box::new(or));
        let folded = Val::Bin(BinOp::And, Box::new(flags), Box::new(Val::Const(0x12)));
        let mut f = Fields::default();
        let id = f.intern_val(&unfolded);
        assert_eq!(f.intern_val(&folded), id);
        assert_eq!(
            f.how(id),
            &Read::Load {
                hdr: Some(14),
                off: 27,
                size: 1,
                mask: 0x12
            }
        );
        // An undefined mask stays the interpreter's.
        let undefined = Val::Bin(BinOp::Mod, Box::new(Val::Const(2)), Box::new(Val::Const(0)));
        let v = Val::Bin(BinOp::And, Box::new(Val::Len), Box::new(undefined));
        let id = f.intern_val(&v);
        assert!(matches!(f.how(id), Read::Generic(_)));
    }

    #[test]
    fn every_read_agrees_with_the_interpreter() {
        let vals = [
            Val::load_abs(12, Size::Half),
            Val::bin(
                BinOp::And,
                Val::load_abs(20, Size::Half),
                Val::Const(0x1fff),
            ),
            Val::load(Val::ip_hdr_len(14), 16, Size::Half),
            Val::bin(
                BinOp::And,
                Val::load(Val::ip_hdr_len(14), 13, Size::Byte),
                Val::Const(0x12),
            ),
            Val::bin(BinOp::Shr, Val::load_abs(14, Size::Byte), Val::Const(4)),
            // A word of the TCP payload: computed, as a flat program.
            Val::load(
                Val::bin(
                    BinOp::Add,
                    Val::bin(
                        BinOp::Shr,
                        Val::bin(
                            BinOp::And,
                            Val::load(Val::ip_hdr_len(14), 26, Size::Byte),
                            Val::Const(0xf0),
                        ),
                        Val::Const(2),
                    ),
                    Val::ip_hdr_len(14),
                ),
                14,
                Size::Word,
            ),
            Val::Len,
            Val::Const(7),
        ];
        let pred = Pred::cmp(
            CmpOp::Gt,
            Val::load_abs(16, Size::Half),
            Val::load_abs(18, Size::Half),
        );
        let mut f = Fields::default();
        let mut ids: Vec<FieldId> = vals.iter().map(|v| f.intern_val(v)).collect();
        ids.push(f.intern(&Source::Pred(pred.clone())));
        let mut pkt: Vec<u8> = (0..80u8).map(|i| i.wrapping_mul(37)).collect();
        pkt[14] = 0x46;
        for len in 0..=pkt.len() {
            let p = &pkt[..len];
            let mut memo = Memo::default();
            memo.next_packet(f.len());
            for (i, v) in vals.iter().enumerate() {
                let want = sluice_ir::eval_val(v, p, 99).ok();
                assert_eq!(f.read(ids[i], p, 99, &mut memo), want, "{v:?} at {len}");
            }
            let want = sluice_ir::eval_pred(&pred, p, 99).ok().map(u32::from);
            assert_eq!(f.read(ids[vals.len()], p, 99, &mut memo), want);
        }
    }

    /// `protochain` from a constant start is read without the
    /// interpreter, and answers (and aborts) as it does, on chains through
    /// IPv6 extension headers and AH cut at every length.
    #[test]
    fn protochain_reads_agree_with_the_interpreter() {
        let mut preds = Vec::new();
        for v6 in [false, true] {
            for proto in [6u8, 17, 0, 43, 44, 51, 59, 60] {
                for start in [
                    Val::Const(14),
                    Val::Const(18),
                    Val::bin(BinOp::Add, Val::Len, Val::Const(0)),
                ] {
                    preds.push(Pred::ProtoChain { v6, start, proto });
                }
            }
        }
        let mut f = Fields::default();
        let ids: Vec<FieldId> = preds
            .iter()
            .map(|p| f.intern(&Source::Pred(p.clone())))
            .collect();
        // IPv6 (next: hop-by-hop), hop-by-hop (next: routing, 8 bytes),
        // routing (next: AH, 16 bytes), AH (next: TCP); and an IPv4 header
        // with AH then UDP; and bytes of no meaning.
        let mut v6 = vec![0u8; 14 + 40 + 8 + 16 + 12 + 20];
        v6[14] = 0x60;
        v6[14 + 6] = 0;
        v6[54] = 43;
        v6[62] = 51;
        v6[63] = 1;
        v6[78] = 6;
        v6[79] = 1;
        let mut v4 = vec![0u8; 14 + 20 + 12 + 8];
        v4[14] = 0x45;
        v4[14 + 9] = 51;
        v4[34] = 17;
        v4[35] = 1;
        let noise: Vec<u8> = (0..90u8).map(|i| i.wrapping_mul(37) ^ 0x2c).collect();
        for pkt in [&v6, &v4, &noise] {
            for len in 0..=pkt.len() {
                let p = &pkt[..len];
                let mut memo = Memo::default();
                memo.next_packet(f.len());
                for (pred, &id) in preds.iter().zip(&ids) {
                    let want = sluice_ir::eval_pred(pred, p, 99).ok().map(u32::from);
                    assert_eq!(f.read(id, p, 99, &mut memo), want, "{pred:?} at {len}");
                }
            }
        }
    }

    #[test]
    fn layers_come_in_order() {
        let mut f = Fields::default();
        let len = f.intern_val(&Val::Len);
        let port = f.intern_val(&Val::load(Val::ip_hdr_len(14), 2, Size::Half));
        let net = f.intern_val(&Val::bin(
            BinOp::And,
            Val::load_abs(26, Size::Word),
            Val::Const(0xff00_0000),
        ));
        let host = f.intern_val(&Val::load_abs(26, Size::Word));
        let ether = f.intern_val(&Val::load_abs(12, Size::Half));
        let mut all = vec![len, port, net, host, ether];
        all.sort_by(|a, b| f.order(*a, *b));
        assert_eq!(all, vec![ether, host, net, port, len]);
    }
}
