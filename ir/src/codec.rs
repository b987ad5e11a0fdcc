//! The intermediate form as bytes: a compact binary encoding of [`Val`],
//! [`Pred`] and [`Filter`], for shipping compiled filters to other
//! processes (sluice's Dask workers) instead of compiling them again.
//!
//! The rule: [`Reader`] is the only way bytes become IR, and it refuses
//! (never panics on) anything that is not exactly an encoding: unknown
//! tags, lengths past the input, nesting deeper than [`MAX_DEPTH`], `In`
//! keys that are not sorted and distinct, references to shared values not
//! read yet. A shared value ([`Val::Shared`]) is written once and referred
//! to by number after that ([`Encoder`]), and read back shared. Integers are little-endian;
//! each node is a tag byte and its fields. The layout is versioned by the
//! format that carries it (see `sluice_split::shipped`), not here.
//!
//! ```
//! use sluice_ir::codec::{encode_filter, Reader};
//! use sluice_ir::{CmpOp, Filter, Pred, Size, Val};
//! let f = Filter::new(Pred::cmp(CmpOp::Eq, Val::load_abs(12, Size::Half), Val::Const(0x800)), 65535);
//! let mut bytes = Vec::new();
//! encode_filter(&f, &mut bytes);
//! let mut r = Reader::new(&bytes);
//! assert_eq!(r.filter().unwrap(), f);
//! assert!(r.is_empty());
//! assert!(Reader::new(&bytes[..bytes.len() - 1]).filter().is_err());
//! ```

use crate::{BinOp, CmpOp, Filter, Pred, Shared, Size, Val};
use std::fmt;
use std::sync::Arc;

/// The deepest nesting of values and predicates a reader accepts.
pub const MAX_DEPTH: usize = 512;

/// Why bytes are not an encoding: what was expected, and at which byte.
///
/// ```
/// let e = sluice_ir::codec::Reader::new(&[9]).val().unwrap_err();
/// assert_eq!(e.to_string(), "byte 0: unknown value tag 9");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodecError {
    /// The byte offset.
    pub at: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for CodecError {}

/// Append a little-endian `u32`.
///
/// ```
/// let mut b = Vec::new();
/// sluice_ir::codec::put_u32(&mut b, 0x0102_0304);
/// assert_eq!(b, [4, 3, 2, 1]);
/// ```
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Append a length (a `u32`).
///
/// ```
/// let mut b = Vec::new();
/// sluice_ir::codec::put_len(&mut b, 2);
/// assert_eq!(sluice_ir::codec::Reader::new(&b).u32().unwrap(), 2);
/// ```
pub fn put_len(out: &mut Vec<u8>, n: usize) {
    put_u32(out, u32::try_from(n).expect("fewer than 2^32 items"));
}

/// Append sorted keys: their count, then each.
///
/// ```
/// let mut b = Vec::new();
/// sluice_ir::codec::put_keys(&mut b, &[1, 7]);
/// assert_eq!(&sluice_ir::codec::Reader::new(&b).keys().unwrap()[..], &[1, 7]);
/// ```
pub fn put_keys(out: &mut Vec<u8>, keys: &[u32]) {
    put_len(out, keys.len());
    for &k in keys {
        put_u32(out, k);
    }
}

fn size_tag(s: Size) -> u8 {
    match s {
        Size::Byte => 1,
        Size::Half => 2,
        Size::Word => 4,
    }
}

const BIN_OPS: [BinOp; 10] = BinOp::ALL;

const CMP_OPS: [CmpOp; 4] = [CmpOp::Eq, CmpOp::Gt, CmpOp::Ge, CmpOp::Set];

/// Writes IR into bytes, remembering the shared values ([`Val::Shared`])
/// already written: each is written once, later uses refer to it by its
/// number, so a value built on shared ones (pcap's nested tunnels) stays
/// the size it has in memory, and reading it back shares it again.
///
/// ```
/// use sluice_ir::{codec, BinOp, Size, Val};
/// let off = Val::shared(Val::bin(BinOp::Add, Val::load_abs(0, Size::Byte), Val::Const(4)));
/// let v = Val::bin(BinOp::Add, off.clone(), off);
/// let mut b = Vec::new();
/// codec::Encoder::new(&mut b).val(&v);
/// assert_eq!(codec::Reader::new(&b).val().unwrap(), v);
/// ```
pub struct Encoder<'a> {
    out: &'a mut Vec<u8>,
    shared: std::collections::HashMap<usize, u32>,
}

impl<'a> Encoder<'a> {
    /// An encoder appending to `out`.
    pub fn new(out: &'a mut Vec<u8>) -> Encoder<'a> {
        Encoder {
            out,
            shared: Default::default(),
        }
    }

    /// The bytes written so far (and before).
    pub fn out(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Append a value.
    ///
    /// ```
    /// use sluice_ir::{codec, Val};
    /// let mut b = Vec::new();
    /// codec::Encoder::new(&mut b).val(&Val::Len);
    /// assert_eq!(codec::Reader::new(&b).val().unwrap(), Val::Len);
    /// ```
    pub fn val(&mut self, v: &Val) {
        match v {
            Val::Const(c) => {
                self.out.push(0);
                put_u32(self.out, *c);
            }
            Val::Len => self.out.push(1),
            Val::Load { base, offset, size } => {
                self.out.push(2);
                self.val(base);
                put_u32(self.out, *offset);
                self.out.push(size_tag(*size));
            }
            Val::Bin(op, a, b) => {
                self.out.push(3);
                self.out
                    .push(BIN_OPS.iter().position(|o| o == op).expect("every op") as u8);
                self.val(a);
                self.val(b);
            }
            Val::Neg(a) => {
                self.out.push(4);
                self.val(a);
            }
            Val::Shared(s) => match self.shared.get(&s.id()) {
                Some(&n) => {
                    self.out.push(6);
                    put_u32(self.out, n);
                }
                None => {
                    self.out.push(5);
                    self.val(s.val());
                    let n = u32::try_from(self.shared.len()).expect("fewer than 2^32 values");
                    self.shared.insert(s.id(), n);
                }
            },
        }
    }

    /// Append a predicate.
    ///
    /// ```
    /// use sluice_ir::{codec, Pred};
    /// let mut b = Vec::new();
    /// codec::Encoder::new(&mut b).pred(&Pred::Not(Box::new(Pred::True)));
    /// assert_eq!(codec::Reader::new(&b).pred().unwrap(), Pred::Not(Box::new(Pred::True)));
    /// ```
    pub fn pred(&mut self, p: &Pred) {
        match p {
            Pred::True => self.out.push(0),
            Pred::False => self.out.push(1),
            Pred::Cmp { op, lhs, rhs } => {
                self.out.push(2);
                self.out
                    .push(CMP_OPS.iter().position(|o| o == op).expect("every op") as u8);
                self.val(lhs);
                self.val(rhs);
            }
            Pred::Not(a) => {
                self.out.push(3);
                self.pred(a);
            }
            Pred::And(ps) | Pred::Or(ps) => {
                self.out.push(if matches!(p, Pred::And(_)) { 4 } else { 5 });
                put_len(self.out, ps.len());
                for q in ps {
                    self.pred(q);
                }
            }
            Pred::In { val, keys } => {
                self.out.push(6);
                self.val(val);
                put_keys(self.out, keys);
            }
            Pred::ProtoChain { v6, start, proto } => {
                self.out.push(7);
                self.out.push(u8::from(*v6));
                self.val(start);
                self.out.push(*proto);
            }
        }
    }

    /// Append a filter: its predicate, then its accept value.
    ///
    /// ```
    /// use sluice_ir::{codec, Filter, Pred};
    /// let mut b = Vec::new();
    /// codec::Encoder::new(&mut b).filter(&Filter::new(Pred::True, 9));
    /// assert_eq!(b, [0, 9, 0, 0, 0]);
    /// ```
    pub fn filter(&mut self, f: &Filter) {
        self.pred(&f.pred);
        put_u32(self.out, f.accept);
    }
}

/// Append a filter with an encoder of its own ([`Encoder::filter`]).
///
/// ```
/// use sluice_ir::{codec, Filter, Pred};
/// let mut b = Vec::new();
/// codec::encode_filter(&Filter::new(Pred::False, 1), &mut b);
/// assert_eq!(codec::Reader::new(&b).filter().unwrap(), Filter::new(Pred::False, 1));
/// ```
pub fn encode_filter(f: &Filter, out: &mut Vec<u8>) {
    Encoder::new(out).filter(f);
}

/// Bytes being decoded, with the position and nesting depth.
///
/// ```
/// let mut r = sluice_ir::codec::Reader::new(&[1, 2, 0, 0, 0]);
/// assert_eq!((r.u8().unwrap(), r.u32().unwrap()), (1, 2));
/// assert!(r.is_empty() && r.u8().is_err());
/// ```
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
    /// The shared values read so far, by number.
    shared: Vec<Shared>,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader {
            bytes,
            at: 0,
            depth: 0,
            shared: Vec::new(),
        }
    }

    /// The byte offset reached.
    pub fn position(&self) -> usize {
        self.at
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at == self.bytes.len()
    }

    /// An error at the current byte.
    pub fn error(&self, what: impl Into<String>) -> CodecError {
        CodecError {
            at: self.at,
            what: what.into(),
        }
    }

    /// The next `n` bytes.
    ///
    /// ```
    /// let mut r = sluice_ir::codec::Reader::new(b"abc");
    /// assert_eq!(r.take(2).unwrap(), b"ab");
    /// assert_eq!(r.position(), 2);
    /// assert!(r.take(2).is_err());
    /// ```
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        match self.bytes.get(self.at..self.at.saturating_add(n)) {
            Some(s) if self.at.checked_add(n).is_some() => {
                self.at += n;
                Ok(s)
            }
            _ => Err(self.error(format!(
                "{n} bytes needed, {} left",
                self.bytes.len() - self.at
            ))),
        }
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, CodecError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, CodecError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A length, refused when `each` bytes per item would run past the
    /// input (so a bogus length allocates nothing).
    ///
    /// ```
    /// let huge = [255, 255, 255, 255, 1];
    /// assert!(sluice_ir::codec::Reader::new(&huge).count(1).is_err());
    /// ```
    pub fn count(&mut self, each: usize) -> Result<usize, CodecError> {
        let n = self.u32()? as usize;
        let left = self.bytes.len() - self.at;
        if n.saturating_mul(each.max(1)) > left {
            return Err(self.error(format!("{n} items cannot fit in {left} bytes")));
        }
        Ok(n)
    }

    /// A boolean byte (0 or 1).
    ///
    /// ```
    /// assert!(sluice_ir::codec::Reader::new(&[2]).bool().is_err());
    /// ```
    pub fn bool(&mut self) -> Result<bool, CodecError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.error(format!("{b} is not a boolean"))),
        }
    }

    /// Sorted, distinct keys.
    pub fn keys(&mut self) -> Result<Arc<[u32]>, CodecError> {
        let n = self.count(4)?;
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.u32()?;
            if keys.last().is_some_and(|&last| last >= k) {
                return Err(self.error("keys not sorted and distinct"));
            }
            keys.push(k);
        }
        Ok(keys.into())
    }

    fn enter(&mut self) -> Result<(), CodecError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    /// A value.
    pub fn val(&mut self) -> Result<Val, CodecError> {
        self.enter()?;
        let at = self.at;
        let v = match self.u8()? {
            0 => Val::Const(self.u32()?),
            1 => Val::Len,
            2 => {
                let base = Box::new(self.val()?);
                let offset = self.u32()?;
                let size = Size::from_bytes(u32::from(self.u8()?))
                    .ok_or_else(|| self.error("bad load size"))?;
                Val::Load { base, offset, size }
            }
            3 => {
                let op = *BIN_OPS
                    .get(self.u8()? as usize)
                    .ok_or_else(|| self.error("unknown operator"))?;
                Val::Bin(op, Box::new(self.val()?), Box::new(self.val()?))
            }
            4 => Val::Neg(Box::new(self.val()?)),
            5 => {
                let s = Shared::new(self.val()?);
                self.shared.push(s.clone());
                Val::Shared(s)
            }
            6 => {
                let n = self.u32()? as usize;
                let s = self
                    .shared
                    .get(n)
                    .ok_or_else(|| self.error(format!("no shared value {n} read before")))?;
                Val::Shared(s.clone())
            }
            t => {
                return Err(CodecError {
                    at,
                    what: format!("unknown value tag {t}"),
                })
            }
        };
        self.depth -= 1;
        Ok(v)
    }

    /// A predicate.
    pub fn pred(&mut self) -> Result<Pred, CodecError> {
        self.enter()?;
        let at = self.at;
        let p = match self.u8()? {
            0 => Pred::True,
            1 => Pred::False,
            2 => {
                let op = *CMP_OPS
                    .get(self.u8()? as usize)
                    .ok_or_else(|| self.error("unknown comparison"))?;
                Pred::Cmp {
                    op,
                    lhs: self.val()?,
                    rhs: self.val()?,
                }
            }
            3 => Pred::Not(Box::new(self.pred()?)),
            t @ (4 | 5) => {
                let n = self.count(1)?;
                let mut ps = Vec::with_capacity(n);
                for _ in 0..n {
                    ps.push(self.pred()?);
                }
                if t == 4 {
                    Pred::And(ps)
                } else {
                    Pred::Or(ps)
                }
            }
            6 => Pred::In {
                val: self.val()?,
                keys: self.keys()?,
            },
            7 => Pred::ProtoChain {
                v6: self.bool()?,
                start: self.val()?,
                proto: self.u8()?,
            },
            t => {
                return Err(CodecError {
                    at,
                    what: format!("unknown predicate tag {t}"),
                })
            }
        };
        self.depth -= 1;
        Ok(p)
    }

    /// A filter.
    pub fn filter(&mut self) -> Result<Filter, CodecError> {
        let pred = self.pred()?;
        Ok(Filter::new(pred, self.u32()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(f: &Filter) {
        let mut b = Vec::new();
        encode_filter(f, &mut b);
        let mut r = Reader::new(&b);
        assert_eq!(&r.filter().unwrap(), f);
        assert!(r.is_empty());
        // Every strict prefix is refused, never a panic.
        for cut in 0..b.len() {
            assert!(Reader::new(&b[..cut]).filter().is_err(), "cut {cut}");
        }
    }

    #[test]
    fn every_node_round_trips() {
        let load = Val::load(Val::ip_hdr_len(14), 16, Size::Half);
        let p = Pred::Or(vec![
            Pred::And(vec![
                Pred::Cmp {
                    op: CmpOp::Set,
                    lhs: Val::Bin(BinOp::Xor, Box::new(load.clone()), Box::new(Val::Len)),
                    rhs: Val::Const(3),
                },
                Pred::Not(Box::new(Pred::True)),
            ]),
            Pred::In {
                val: Val::Neg(Box::new(load)),
                keys: vec![1, 5, 9].into(),
            },
            Pred::ProtoChain {
                v6: true,
                start: Val::Const(14),
                proto: 6,
            },
            Pred::False,
        ]);
        round(&Filter::new(p, 262144));
    }

    #[test]
    fn shared_values_stay_shared_and_small() {
        // Each level uses the one below twice: written out, 2^40 loads.
        let mut v = Val::load_abs(14, Size::Byte);
        for _ in 0..40 {
            v = Val::shared(Val::bin(BinOp::Add, v.clone(), v));
        }
        let f = Filter::new(Pred::cmp(CmpOp::Eq, v, Val::Const(3)), 1);
        let mut b = Vec::new();
        encode_filter(&f, &mut b);
        assert!(b.len() < 1000, "{} bytes", b.len());
        // Equality of values read back (other allocations) walks them
        // written out: round trips of a smaller tower.
        let mut small = Val::load_abs(14, Size::Byte);
        for _ in 0..8 {
            small = Val::shared(Val::bin(BinOp::Add, small.clone(), small));
        }
        round(&Filter::new(Pred::cmp(CmpOp::Eq, small, Val::Const(3)), 1));
        let back = Reader::new(&b).filter().unwrap();
        let Pred::Cmp {
            lhs: Val::Shared(top),
            ..
        } = &back.pred
        else {
            panic!("{back:?}");
        };
        let Val::Bin(_, a, c) = top.val() else {
            panic!()
        };
        let (Val::Shared(a), Val::Shared(c)) = (&**a, &**c) else {
            panic!()
        };
        assert_eq!(a.id(), c.id(), "read back shared");
        // A reference to a value not read yet.
        assert!(Reader::new(&[6, 0, 0, 0, 0]).val().is_err());
    }

    #[test]
    fn garbage_is_refused() {
        assert!(
            Reader::new(&[6, 0, 0, 0, 0, 0, 2, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0, 0])
                .pred()
                .is_err()
        );
        assert!(Reader::new(&[4, 255, 255, 255, 255]).pred().is_err());
        let deep = vec![3u8; MAX_DEPTH + 10];
        assert!(Reader::new(&deep).pred().is_err());
        for b in 0..=255u8 {
            let _ = Reader::new(&[b, b, b, b, b, b, b]).filter();
        }
    }
}
