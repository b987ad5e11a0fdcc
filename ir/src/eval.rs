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
    Ok(bytes.iter().fold(0u32, |acc, &b| (acc << 8) | b as u32))
}

/// Evaluate a value on a packet.
///
/// ```
/// use sluice_ir::{eval_val, Val};
/// assert_eq!(eval_val(&Val::Len, &[], 60), Ok(60));
/// ```
pub fn eval_val(v: &Val, pkt: &[u8], wirelen: u32) -> Result<u32, Abort> {
    match v {
        Val::Const(k) => Ok(*k),
        Val::Len => Ok(wirelen),
        Val::Load { base, offset, size } => {
            let b = eval_val(base, pkt, wirelen)?;
            load(pkt, b, *offset, size.bytes())
        }
        Val::Bin(op, a, b) => {
            let a = eval_val(a, pkt, wirelen)?;
            let b = eval_val(b, pkt, wirelen)?;
            op.apply(a, b).ok_or(Abort)
        }
        Val::Neg(a) => Ok(eval_val(a, pkt, wirelen)?.wrapping_neg()),
    }
}

/// Evaluate a predicate on a packet.
///
/// ```
/// use sluice_ir::{eval_pred, Pred};
/// assert_eq!(eval_pred(&Pred::True, &[], 0), Ok(true));
/// ```
pub fn eval_pred(p: &Pred, pkt: &[u8], wirelen: u32) -> Result<bool, Abort> {
    match p {
        Pred::True => Ok(true),
        Pred::False => Ok(false),
        Pred::Cmp { op, lhs, rhs } => {
            let a = eval_val(lhs, pkt, wirelen)?;
            let b = eval_val(rhs, pkt, wirelen)?;
            Ok(op.apply(a, b))
        }
        Pred::Not(q) => Ok(!eval_pred(q, pkt, wirelen)?),
        Pred::And(ps) => {
            for q in ps {
                if !eval_pred(q, pkt, wirelen)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Pred::Or(ps) => {
            for q in ps {
                if eval_pred(q, pkt, wirelen)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Pred::In { val, keys } => {
            let v = eval_val(val, pkt, wirelen)?;
            Ok(keys.binary_search(&v).is_ok())
        }
        Pred::ProtoChain { v6, start, proto } => {
            let start = eval_val(start, pkt, wirelen)?;
            protochain(pkt, start, *v6, *proto)
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
/// header is `4 * (AH length + 2)` from the network header).
fn protochain(pkt: &[u8], start: u32, v6: bool, want: u8) -> Result<bool, Abort> {
    let want = want as u32;
    let (mut next, mut off) = if v6 {
        (load(pkt, start, 6, 1)?, 40u32)
    } else {
        let hl = (load(pkt, start, 0, 1)? & 0xf) << 2;
        (load(pkt, start, 9, 1)?, hl)
    };
    for _ in 0..PROTOCHAIN_MAX_STEPS {
        if next == want || next == IPPROTO_NONE {
            return Ok(next == want);
        }
        if v6 && IPV6_EXT_HEADERS.contains(&next) {
            let base = start.checked_add(off).ok_or(Abort)?;
            let nh = load(pkt, base, 0, 1)?;
            let len = load(pkt, base, 1, 1)?;
            off = len.wrapping_add(1).wrapping_mul(8).wrapping_add(off);
            next = nh;
        } else if next == IPPROTO_AH {
            let base = start.checked_add(off).ok_or(Abort)?;
            let nh = load(pkt, base, 0, 1)?;
            let len = load(pkt, base, 1, 1)?;
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
