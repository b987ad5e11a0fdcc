//! Packet fields the classifier reads, interned so each is read at most once
//! per packet however many filters test it, with fast forms for the common
//! shapes (a fixed offset; an offset past an IPv4 header).
//!
//! ```
//! use sluice_ir::{Val, Size};
//! use sluice_classifier::field::Fields;
//! let mut f = Fields::default();
//! let id = f.intern(&Val::load_abs(1, Size::Half));
//! assert_eq!(f.read(id, &[0, 1, 2], 3), Some(0x0102));
//! assert_eq!(f.read(id, &[0, 1], 2), None);
//! ```

use sluice_ir::{BinOp, Size, Val};
use std::collections::HashMap;

/// Index of an interned field.
pub type FieldId = u32;

/// How a field is read.
#[derive(Clone, Debug)]
enum Read {
    Const(u32),
    Len,
    /// `size` bytes at a fixed offset.
    Abs {
        off: u32,
        size: u32,
    },
    /// `size` bytes at `4 * (pkt[hdr] & 0xf) + off`.
    AfterIpv4 {
        hdr: u32,
        off: u32,
        size: u32,
    },
    /// Anything else, through the reference interpreter.
    Generic(Val),
}

/// Interned fields.
///
/// ```
/// let f = sluice_classifier::field::Fields::default();
/// assert_eq!(f.len(), 0);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Fields {
    reads: Vec<Read>,
    /// The value of each field, by id.
    vals: Vec<Val>,
    ids: HashMap<Val, FieldId>,
}

/// The big-endian value of `size` (1, 2 or 4) bytes at `at`, if captured.
#[inline]
pub(crate) fn load(pkt: &[u8], at: u64, size: u32) -> Option<u32> {
    let end = at + size as u64;
    if end > pkt.len() as u64 {
        return None;
    }
    let b = &pkt[at as usize..end as usize];
    Some(match size {
        1 => b[0] as u32,
        2 => u16::from_be_bytes([b[0], b[1]]) as u32,
        _ => u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
    })
}

/// `4 * (pkt[h] & 0xf)` as IR, if `v` is that.
pub(crate) fn ipv4_header_length(v: &Val) -> Option<u32> {
    let Val::Bin(BinOp::Shl, a, two) = v else {
        return None;
    };
    let Val::Bin(BinOp::And, l, mask) = a.as_ref() else {
        return None;
    };
    let Val::Load {
        base,
        offset,
        size: Size::Byte,
    } = l.as_ref()
    else {
        return None;
    };
    (**two == Val::Const(2) && **mask == Val::Const(0xf) && **base == Val::Const(0))
        .then_some(*offset)
}

impl Fields {
    /// The id of a value, adding it if new.
    ///
    /// ```
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let a = f.intern(&sluice_ir::Val::Len);
    /// assert_eq!(f.intern(&sluice_ir::Val::Len), a);
    /// ```
    pub fn intern(&mut self, v: &Val) -> FieldId {
        if let Some(&id) = self.ids.get(v) {
            return id;
        }
        let read = match v {
            Val::Const(k) => Read::Const(*k),
            Val::Len => Read::Len,
            Val::Load { base, offset, size } => match base.as_ref() {
                Val::Const(b) if (*b as u64 + *offset as u64) <= u32::MAX as u64 => Read::Abs {
                    off: b + offset,
                    size: size.bytes(),
                },
                b => match ipv4_header_length(b) {
                    Some(hdr) => Read::AfterIpv4 {
                        hdr,
                        off: *offset,
                        size: size.bytes(),
                    },
                    None => Read::Generic(v.clone()),
                },
            },
            v => Read::Generic(v.clone()),
        };
        let id = self.reads.len() as FieldId;
        self.reads.push(read);
        self.vals.push(v.clone());
        self.ids.insert(v.clone(), id);
        id
    }

    /// Number of fields.
    ///
    /// ```
    /// assert!(sluice_classifier::field::Fields::default().is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.reads.len()
    }

    /// True when no field is interned.
    ///
    /// ```
    /// assert!(sluice_classifier::field::Fields::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.reads.is_empty()
    }

    /// The IR value a field reads.
    ///
    /// ```
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let id = f.intern(&sluice_ir::Val::Len);
    /// assert_eq!(f.val(id), &sluice_ir::Val::Len);
    /// ```
    pub fn val(&self, id: FieldId) -> &Val {
        &self.vals[id as usize]
    }

    /// The field as a [`Direct`] read, when it is one.
    ///
    /// ```
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let id = f.intern(&sluice_ir::Val::Len);
    /// assert!(f.direct(id).is_none());
    /// ```
    pub fn direct(&self, id: FieldId) -> Option<Direct> {
        match self.reads[id as usize] {
            Read::Abs { off, size } => Some(Direct {
                hdr: u32::MAX,
                off,
                size,
            }),
            Read::AfterIpv4 { hdr, off, size } if hdr != u32::MAX => {
                Some(Direct { hdr, off, size })
            }
            _ => None,
        }
    }

    /// Read a field; `None` when the read aborts (past the captured bytes).
    ///
    /// ```
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let id = f.intern(&sluice_ir::Val::Len);
    /// assert_eq!(f.read(id, &[], 60), Some(60));
    /// ```
    #[inline]
    pub fn read(&self, id: FieldId, pkt: &[u8], wirelen: u32) -> Option<u32> {
        match &self.reads[id as usize] {
            Read::Const(k) => Some(*k),
            Read::Len => Some(wirelen),
            Read::Abs { off, size } => load(pkt, *off as u64, *size),
            Read::AfterIpv4 { hdr, off, size } => {
                let hl = (*pkt.get(*hdr as usize)? as u64 & 0xf) << 2;
                load(pkt, hl + *off as u64, *size)
            }
            Read::Generic(v) => sluice_ir::eval_val(v, pkt, wirelen).ok(),
        }
    }
}

/// A field read that needs no memo: a fixed offset, or an offset past an
/// IPv4 header (both cost one bounds check and one load, less than a memo
/// lookup would).
///
/// ```
/// use sluice_ir::{Val, Size};
/// let mut f = sluice_classifier::field::Fields::default();
/// let id = f.intern(&Val::load_abs(1, Size::Half));
/// let d = f.direct(id).unwrap();
/// assert_eq!(d.read(&[0, 1, 2]), Some(0x0102));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Direct {
    /// Offset of the IPv4 header's first byte, or `u32::MAX` for a fixed offset.
    hdr: u32,
    off: u32,
    size: u32,
}

impl Direct {
    /// Where the IPv4 header starts whose length (`4 * (pkt[h] & 0xf)`) is
    /// added to the offset, or `None` for a fixed offset.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let a = f.intern(&Val::load_abs(12, Size::Half));
    /// let b = f.intern(&Val::load(Val::ip_hdr_len(14), 16, Size::Half));
    /// assert_eq!(f.direct(a).unwrap().header(), None);
    /// assert_eq!(f.direct(b).unwrap().header(), Some(14));
    /// ```
    pub fn header(&self) -> Option<u32> {
        (self.hdr != u32::MAX).then_some(self.hdr)
    }

    /// The offset: from the packet's start, or past the IPv4 header.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let a = f.intern(&Val::load_abs(12, Size::Half));
    /// assert_eq!(f.direct(a).unwrap().offset(), 12);
    /// ```
    pub fn offset(&self) -> u32 {
        self.off
    }

    /// Bytes read: 1, 2 or 4 (big-endian).
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let a = f.intern(&Val::load_abs(12, Size::Half));
    /// assert_eq!(f.direct(a).unwrap().size(), 2);
    /// ```
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Read the field; `None` when the read aborts.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let id = f.intern(&Val::load_abs(4, Size::Word));
    /// assert_eq!(f.direct(id).unwrap().read(&[0; 6]), None);
    /// ```
    #[inline]
    pub fn read(&self, pkt: &[u8]) -> Option<u32> {
        let at = if self.hdr == u32::MAX {
            self.off as u64
        } else {
            ((*pkt.get(self.hdr as usize)? as u64 & 0xf) << 2) + self.off as u64
        };
        load(pkt, at, self.size)
    }
}

/// Per-packet memory of field reads: each field is read once per packet.
///
/// ```
/// let mut f = sluice_classifier::field::Fields::default();
/// let id = f.intern(&sluice_ir::Val::Len);
/// let mut m = sluice_classifier::field::Memo::default();
/// m.next_packet(f.len());
/// assert_eq!(m.get(&f, id, &[], 9), Some(9));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Memo {
    epoch: u32,
    /// (epoch, value + 1 or 0 for an abort) per field.
    slots: Vec<(u32, u64)>,
}

impl Memo {
    /// Forget the previous packet, with room for `fields` fields (more is
    /// made as fields past it are read).
    ///
    /// ```
    /// let mut m = sluice_classifier::field::Memo::default();
    /// m.next_packet(4);
    /// assert_eq!(m.cached(2, || Some(7)), Some(7));
    /// assert_eq!(m.cached(2, || Some(8)), Some(7)); // remembered
    /// m.next_packet(4);
    /// assert_eq!(m.cached(2, || Some(8)), Some(8)); // forgotten
    /// ```
    #[inline]
    pub fn next_packet(&mut self, fields: usize) {
        if self.slots.len() < fields {
            self.slots.resize(fields, (0, 0));
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.slots.iter_mut().for_each(|s| s.0 = 0);
            self.epoch = 1;
        }
    }

    /// A field's value on the current packet, read at most once.
    ///
    /// ```
    /// let mut f = sluice_classifier::field::Fields::default();
    /// let id = f.intern(&sluice_ir::Val::load_abs(0, sluice_ir::Size::Byte));
    /// let mut m = sluice_classifier::field::Memo::default();
    /// m.next_packet(f.len());
    /// assert_eq!(m.get(&f, id, &[], 0), None);
    /// ```
    #[inline]
    pub fn get(&mut self, fields: &Fields, id: FieldId, pkt: &[u8], wirelen: u32) -> Option<u32> {
        self.cached(id, || fields.read(id, pkt, wirelen))
    }

    /// Field `id`'s value on the current packet: `compute`'s the first
    /// time it is asked for (always before the first
    /// [`Memo::next_packet`]), the remembered one after.
    ///
    /// ```
    /// let mut m = sluice_classifier::field::Memo::default();
    /// m.next_packet(0);
    /// assert_eq!(m.cached(3, || Some(7)), Some(7));
    /// assert_eq!(m.cached(3, || None), Some(7));
    /// ```
    #[inline]
    pub fn cached(&mut self, id: FieldId, compute: impl FnOnce() -> Option<u32>) -> Option<u32> {
        if self.slots.len() <= id as usize {
            self.slots.resize(id as usize + 1, (0, 0));
        }
        let slot = &mut self.slots[id as usize];
        if slot.0 != self.epoch || self.epoch == 0 {
            *slot = (self.epoch, compute().map_or(0, |x| x as u64 + 1));
        }
        slot.1.checked_sub(1).map(|x| x as u32)
    }
}
