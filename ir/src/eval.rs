//! The reference interpreter of the intermediate form.
//!
//! It defines what a [`Pred`] means; every other engine must agree with it on
//! every packet. Evaluation is left to right with short-circuit `and`/`or`;
//! a load past the captured bytes or a division by zero returns
//! [`Err(Abort)`](Abort), which makes the whole filter reject.
//!
//! ```
//! use sluice_ir::{eval_pred, Pred, Val, Size, Abort};
//! let p = Pred::not(Pred::eq(Val::load_abs(100, Size::Byte), 1));
//! assert_eq!(eval_pred(&p, &[0; 10], 10), Err(Abort)); // not "true"
//! ```

use crate::flat::Touch;
use crate::{Pred, Val};

/// The filter aborted: an out-of-bounds load or a division by zero.
///
/// ```
/// assert_eq!(format!("{:?}", sluice_ir::Abort), "Abort");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Abort;

/// How many headers `protochain` follows before giving up (libpcap would loop
/// forever on a chain of AH headers that points at itself; sluice rejects).
pub const PROTOCHAIN_MAX_STEPS: u32 = 1 << 16;

/// Load `width` bytes big-endian at `base + offset`, or abort.
///
/// ```
/// assert_eq!(sluice_ir::eval::load(&[1, 2, 3], 1, 0, 2), Ok(0x0203));
/// assert!(sluice_ir::eval::load(&[1, 2, 3], 2, 0, 2).is_err());
/// ```
#[inline]
pub fn load(pkt: &[u8], base: u32, offset: u32, width: u32) -> Result<u32, Abort> {
    let start = base as u64 + offset as u64;
    let end = start + width as u64;
    if end > pkt.len() as u64 {
        return Err(Abort);
    }
    let bytes = &pkt[start as usize..end as usize];
    Ok(match *bytes {
        [a] => u32::from(a),
        [a, b] => u32::from(u16::from_be_bytes([a, b])),
        [a, b, c, d] => u32::from_be_bytes([a, b, c, d]),
        _ => bytes.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32),
    })
}

/// [`load`], told to `touch` first (see [`crate::flat::Flat::eval_traced`]).
#[inline(always)]
pub(crate) fn load_traced(
    pkt: &[u8],
    touch: &mut impl FnMut(Touch),
    base: u32,
    offset: u32,
    width: u32,
) -> Result<u32, Abort> {
    touch(Touch::Bytes {
        at: u64::from(base) + u64::from(offset),
        width,
    });
    load(pkt, base, offset, width)
}

/// Evaluate a value on a packet.
///
/// ```
/// use sluice_ir::{eval_val, Val};
/// assert_eq!(eval_val(&Val::Len, &[], 60), Ok(60));
/// ```
pub fn eval_val(v: &Val, pkt: &[u8], wirelen: u32) -> Result<u32, Abort> {
    Eval::new(pkt, wirelen).val(v)
}

/// Evaluate a predicate on a packet.
///
/// ```
/// use sluice_ir::{eval_pred, Pred};
/// assert_eq!(eval_pred(&Pred::True, &[], 0), Ok(true));
/// ```
pub fn eval_pred(p: &Pred, pkt: &[u8], wirelen: u32) -> Result<bool, Abort> {
    Eval::new(pkt, wirelen).pred(p)
}

/// One evaluation: the packet, and the shared values already computed
/// (a [`Val::Shared`] means its inner value, which depends on the packet
/// only, so it is computed once per packet).
struct Eval<'a> {
    pkt: &'a [u8],
    wirelen: u32,
    /// (shared value's id, its value), in the order computed.
    memo: Vec<(usize, u32)>,
}

impl<'a> Eval<'a> {
    fn new(pkt: &'a [u8], wirelen: u32) -> Eval<'a> {
        Eval {
            pkt,
            wirelen,
            memo: Vec::new(),
        }
    }

    fn val(&mut self, v: &Val) -> Result<u32, Abort> {
        match v {
            Val::Const(k) => Ok(*k),
            Val::Len => Ok(self.wirelen),
            Val::Load { base, offset, size } => {
                let b = self.val(base)?;
                load(self.pkt, b, *offset, size.bytes())
            }
            Val::Bin(op, a, b) => {
                let a = self.val(a)?;
                let b = self.val(b)?;
                op.apply(a, b).ok_or(Abort)
            }
            Val::Neg(a) => Ok(self.val(a)?.wrapping_neg()),
            Val::Shared(s) => {
                let id = s.id();
                if let Some(&(_, x)) = self.memo.iter().find(|(i, _)| *i == id) {
                    return Ok(x);
                }
                let x = self.val(s.val())?;
                self.memo.push((id, x));
                Ok(x)
            }
        }
    }

    fn pred(&mut self, p: &Pred) -> Result<bool, Abort> {
        match p {
            Pred::True => Ok(true),
            Pred::False => Ok(false),
            Pred::Cmp { op, lhs, rhs } => {
                let a = self.val(lhs)?;
                let b = self.val(rhs)?;
                Ok(op.apply(a, b))
            }
            Pred::Not(q) => Ok(!self.pred(q)?),
            Pred::And(ps) => {
                for q in ps {
                    if !self.pred(q)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Pred::Or(ps) => {
                for q in ps {
                    if self.pred(q)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Pred::In { val, keys } => {
                let v = self.val(val)?;
                Ok(keys.binary_search(&v).is_ok())
            }
            Pred::ProtoChain { v6, start, proto } => {
                let start = self.val(start)?;
                protochain(self.pkt, start, *v6, *proto)
            }
        }
    }
}

/// IPv6 extension headers that `protochain` steps over: hop-by-hop options,
/// destination options, routing, fragment.
const IPV6_EXT_HEADERS: [u32; 4] = [0, 60, 43, 44];
const IPPROTO_AH: u32 = 51;
const IPPROTO_NONE: u32 = 59;

/// Walk the header chain from a network header at `start` (libpcap's
/// `protochain`, including its treatment of AH: the walk's offset after an AH
/// header is `4 * (AH length + 2)` from the network header): whether it
/// reaches protocol `want`. What [`Pred::ProtoChain`] tests once its
/// start is known.
///
/// ```
/// let mut pkt = [0u8; 20];
/// pkt[0] = 0x45; // IPv4, a 20-byte header
/// pkt[9] = 6; // TCP
/// assert_eq!(sluice_ir::eval::protochain(&pkt, 0, false, 6), Ok(true));
/// assert_eq!(sluice_ir::eval::protochain(&pkt, 0, false, 17), Ok(false));
/// ```
pub fn protochain(pkt: &[u8], start: u32, v6: bool, want: u8) -> Result<bool, Abort> {
    protochain_with(pkt, start, v6, want, &mut |_| {})
}

/// [`protochain`], telling `touch` each byte it reads, in order (as
/// [`crate::flat::Flat::eval_traced`]: the answer is a function of those
/// bytes and of where the packet ends before the last, if it aborted).
///
/// ```
/// use sluice_ir::flat::Touch;
/// let mut pkt = [0u8; 20];
/// pkt[0] = 0x45;
/// pkt[9] = 6;
/// let mut seen = Vec::new();
/// assert_eq!(sluice_ir::eval::protochain_traced(&pkt, 0, false, 6, |t| seen.push(t)), Ok(true));
/// assert_eq!(seen, [Touch::Bytes { at: 0, width: 1 }, Touch::Bytes { at: 9, width: 1 }]);
/// ```
pub fn protochain_traced(
    pkt: &[u8],
    start: u32,
    v6: bool,
    want: u8,
    mut touch: impl FnMut(Touch),
) -> Result<bool, Abort> {
    protochain_with(pkt, start, v6, want, &mut touch)
}

#[inline(always)]
fn protochain_with(
    pkt: &[u8],
    start: u32,
    v6: bool,
    want: u8,
    touch: &mut impl FnMut(Touch),
) -> Result<bool, Abort> {
    let mut byte = |base: u32, offset: u32| load_traced(pkt, touch, base, offset, 1);
    let want = want as u32;
    let (mut next, mut off) = if v6 {
        (byte(start, 6)?, 40u32)
    } else {
        let hl = (byte(start, 0)? & 0xf) << 2;
        (byte(start, 9)?, hl)
    };
    for _ in 0..PROTOCHAIN_MAX_STEPS {
        if next == want || next == IPPROTO_NONE {
            return Ok(next == want);
        }
        if v6 && IPV6_EXT_HEADERS.contains(&next) {
            let base = start.checked_add(off).ok_or(Abort)?;
            let nh = byte(base, 0)?;
            let len = byte(base, 1)?;
            off = len.wrapping_add(1).wrapping_mul(8).wrapping_add(off);
            next = nh;
        } else if next == IPPROTO_AH {
            let base = start.checked_add(off).ok_or(Abort)?;
            let nh = byte(base, 0)?;
            let len = byte(base, 1)?;
            off = len.wrapping_add(2).wrapping_mul(4);
            next = nh;
        } else {
            return Ok(false);
        }
    }
    Err(Abort)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BinOp, CmpOp, Size};

    proptest::proptest! {
        /// A packet that agrees with another where the protocol chain's
        /// trace says has the same answer.
        #[test]
        fn the_chain_depends_on_what_its_trace_says(
            a in proptest::collection::vec(
                proptest::prop_oneof![3 => proptest::prelude::any::<u8>(), 1 => 0u8..4, 1 => proptest::prelude::Just(0x45u8), 1 => proptest::sample::select(vec![0u8, 43, 44, 51, 60, 6, 17, 59])],
                0..120,
            ),
            other in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
            v6 in proptest::prelude::any::<bool>(),
            want in proptest::sample::select(vec![6u8, 17, 51, 58]),
        ) {
            let mut touched = Vec::new();
            let answer = protochain_traced(&a, 0, v6, want, |t| touched.push(t));
            proptest::prop_assert_eq!(answer, protochain(&a, 0, v6, want));
            let b = crate::flat::agreeing(&a, &touched, other);
            proptest::prop_assert_eq!(protochain(&b, 0, v6, want), answer, "{:?} and {:?}", a, b);
        }
    }

    #[test]
    fn abort_under_not_and_or() {
        let oob = Pred::eq(Val::load_abs(10, Size::Byte), 0);
        let pkt = [0u8; 10];
        assert_eq!(eval_pred(&Pred::not(oob.clone()), &pkt, 10), Err(Abort));
        assert_eq!(
            eval_pred(&Pred::Or(vec![oob.clone(), Pred::True]), &pkt, 10),
            Err(Abort)
        );
        // Short circuit: a true left side never evaluates the right.
        assert_eq!(
            eval_pred(&Pred::Or(vec![Pred::True, oob]), &pkt, 10),
            Ok(true)
        );
    }

    #[test]
    fn loads_are_big_endian_and_bounded() {
        let pkt = [1, 2, 3, 4, 5];
        assert_eq!(load(&pkt, 0, 1, 4), Ok(0x02030405));
        assert_eq!(load(&pkt, 0, 2, 4), Err(Abort));
        assert_eq!(load(&pkt, u32::MAX, 1, 1), Err(Abort));
        assert_eq!(load(&pkt, 0, u32::MAX, 4), Err(Abort));
    }

    #[test]
    fn division_by_zero_aborts() {
        let v = Val::Bin(BinOp::Div, Box::new(Val::Len), Box::new(Val::Const(0)));
        assert_eq!(eval_val(&v, &[], 5), Err(Abort));
        let p = Pred::cmp(CmpOp::Eq, v, Val::Const(0));
        assert_eq!(eval_pred(&Pred::not(p), &[], 5), Err(Abort));
    }

    #[test]
    fn a_shared_value_means_its_inner_value() {
        // Ten levels, each using the one before twice: 2^10 copies unshared.
        let mut v = Val::load_abs(0, Size::Byte);
        for _ in 0..10 {
            let s = Val::shared(v);
            v = Val::bin(
                BinOp::Add,
                Val::load(s.clone(), 0, Size::Byte),
                Val::bin(BinOp::And, s, Val::Const(1)),
            );
        }
        let pkt = [0u8, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1];
        // The same value without sharing, evaluated as a tree.
        fn unshare(v: &Val) -> Val {
            match v {
                Val::Shared(s) => unshare(s.val()),
                Val::Load { base, offset, size } => Val::load(unshare(base), *offset, *size),
                Val::Bin(op, a, b) => Val::Bin(*op, Box::new(unshare(a)), Box::new(unshare(b))),
                Val::Neg(a) => Val::Neg(Box::new(unshare(a))),
                v => v.clone(),
            }
        }
        let plain = unshare(&v);
        for n in 0..=pkt.len() {
            assert_eq!(
                eval_val(&v, &pkt[..n], 60),
                eval_val(&plain, &pkt[..n], 60),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn protochain_v4_ah_then_tcp() {
        // IPv4 header (20 bytes, proto AH) then AH (next = TCP, len = 4 → 24 bytes).
        let mut pkt = vec![0u8; 64];
        pkt[0] = 0x45;
        pkt[9] = 51;
        pkt[20] = 6; // AH next header
        pkt[21] = 1; // AH length
        let p = Pred::ProtoChain {
            v6: false,
            start: Val::Const(0),
            proto: 6,
        };
        assert_eq!(eval_pred(&p, &pkt, 64), Ok(true));
        let p17 = Pred::ProtoChain {
            v6: false,
            start: Val::Const(0),
            proto: 17,
        };
        assert_eq!(eval_pred(&p17, &pkt, 64), Ok(false));
    }
}
