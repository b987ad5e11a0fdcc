//! MTP2 message types (`fisu`, `lssu`, `msu` and the high-speed `h` forms)
//! and MTP3 routing-label fields (`sio`, `opc`, `dpc`, `sls`, `h` forms).
//!
//! The routing label is little-endian and its fields straddle bytes, so a
//! field is a masked big-endian load compared with the value re-encoded the
//! way the bytes hold it (as libpcap does, also for `<` and `>`).

use super::atm::rel;
use super::proto::ld;
use super::{err, GResult, Gen};
use crate::ast::{Mtp2Type, Mtp3Field, RelOp, Span};
use crate::link::LinkType;
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// The MTP2 length indicator byte, and the extended (high-speed) one.
const LI_AT: u32 = 2;
const HLI_AT: u32 = 4;
/// The MTP3 service information octet; the routing label follows it.
const SIO_AT: u32 = 3;
/// How much further the high-speed (extended) MTP2 header reaches.
const H_EXTRA: u32 = 3;

fn masked(v: Val, mask: u32) -> Val {
    Val::bin(BinOp::And, v, Val::Const(mask))
}

/// `lo < (v & mask) <= hi`, the length-indicator range of a message type.
fn li_range(v: Val, lo: u32, hi: Option<u32>) -> Pred {
    let mut p = vec![Pred::cmp(CmpOp::Gt, v.clone(), Val::Const(lo))];
    if let Some(hi) = hi {
        p.push(Pred::not(Pred::cmp(CmpOp::Gt, v, Val::Const(hi))));
    }
    Pred::and(p)
}

impl Gen {
    /// Where the MTP2 header starts: right away, after a 4-byte pseudo-header,
    /// or after a 20-byte ERF record header.
    fn mtp2_start(&self, span: Span) -> GResult<Val> {
        Ok(Val::Const(match self.off.dlt {
            LinkType::MTP2 => 0,
            LinkType::MTP2_WITH_PHDR => 4,
            LinkType::ERF => 20,
            dlt => {
                return err(
                    span,
                    format!("MTP2/MTP3 primitives are not supported on {dlt}"),
                )
            }
        }))
    }

    /// An MTP2 message type: FISU (length 0), LSSU (1 or 2), MSU (more).
    pub(crate) fn mtp2(&mut self, t: Mtp2Type, span: Span) -> GResult<Pred> {
        let z = self.mtp2_start(span)?;
        let li = masked(ld(&z, LI_AT, Size::Byte), 0x3f);
        let hli = masked(ld(&z, HLI_AT, Size::Half), 0xff80);
        let none = |v: Val, m: u32| {
            let Val::Bin(_, load, _) = v else {
                unreachable!()
            };
            Pred::not(Pred::cmp(CmpOp::Set, *load, Val::Const(m)))
        };
        Ok(match t {
            Mtp2Type::Fisu => none(li, 0x3f),
            Mtp2Type::Lssu => li_range(li, 0, Some(2)),
            Mtp2Type::Msu => li_range(li, 2, None),
            Mtp2Type::Hfisu => none(hli, 0xff80),
            Mtp2Type::Hlssu => li_range(hli, 0, Some(0x100)),
            Mtp2Type::Hmsu => li_range(hli, 0x100, None),
        })
    }

    /// An MTP3 field compared with an or-list of values.
    pub(crate) fn mtp3_field(
        &mut self,
        f: Mtp3Field,
        list: &[(RelOp, u32)],
        span: Span,
    ) -> GResult<Pred> {
        let z = self.mtp2_start(span)?;
        use Mtp3Field::*;
        let extra = match f {
            Hsio | Hopc | Hdpc | Hsls => H_EXTRA,
            _ => 0,
        };
        let at = SIO_AT + extra;
        let (name, max, v, enc): (&str, u32, Val, fn(u32) -> u32) = match f {
            Sio | Hsio => ("sio", 255, ld(&z, at, Size::Byte), |k| k),
            Dpc | Hdpc => (
                "dpc",
                16383,
                masked(ld(&z, at + 1, Size::Half), 0xff3f),
                |k| (k & 0xff) << 8 | (k >> 8) & 0x3f,
            ),
            Opc | Hopc => (
                "opc",
                16383,
                masked(ld(&z, at + 1, Size::Word), 0x00c0_ff0f),
                |k| (k & 0x3) << 22 | ((k >> 2) & 0xff) << 8 | (k >> 10) & 0xf,
            ),
            Sls | Hsls => ("sls", 15, masked(ld(&z, at + 4, Size::Byte), 0xf0), |k| {
                k << 4
            }),
        };
        let mut alts = Vec::with_capacity(list.len());
        for &(op, k) in list {
            if k > max {
                return err(span, format!("{name} {k} greater than maximum {max}"));
            }
            alts.push(rel(op, v.clone(), enc(k)));
        }
        Ok(Pred::or(alts))
    }
}
