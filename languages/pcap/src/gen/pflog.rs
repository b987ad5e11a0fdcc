//! OpenBSD pf's log header: `on`/`ifname`, `rset`, `rnr`, `srnr`, `reason`,
//! `action`, and where the logged packet starts.

use super::proto::ld;
use super::{err, GResult, Gen};
use crate::ast::{Other, Span};
use crate::link::LinkType;
use sluice_ir::{BinOp, Pred, Size, Val};

/// Field offsets in the pflog header.
const ACTION_AT: u32 = 2;
const REASON_AT: u32 = 3;
const IFNAME_AT: u32 = 4;
const RULESET_AT: u32 = 20;
const RULENR_AT: u32 = 36;
const SUBRULENR_AT: u32 = 40;
/// Interface and ruleset names are NUL-terminated in 16 bytes.
const NAME_MAX: usize = 15;

/// Compare the bytes at `at` with `bytes`: words from the end, then a
/// half-word and a byte, as libpcap does.
fn bytes_eq(at: u32, bytes: &[u8]) -> Pred {
    let mut parts = Vec::new();
    let mut n = bytes.len();
    let z = Val::Const(0);
    while n >= 4 {
        let w = u32::from_be_bytes([bytes[n - 4], bytes[n - 3], bytes[n - 2], bytes[n - 1]]);
        parts.push(Pred::eq(ld(&z, at + n as u32 - 4, Size::Word), w));
        n -= 4;
    }
    while n >= 2 {
        let h = u16::from_be_bytes([bytes[n - 2], bytes[n - 1]]) as u32;
        parts.push(Pred::eq(ld(&z, at + n as u32 - 2, Size::Half), h));
        n -= 2;
    }
    if n > 0 {
        parts.push(Pred::eq(ld(&z, at, Size::Byte), bytes[0] as u32));
    }
    Pred::and(parts)
}

impl Gen {
    /// The logged packet: after the header, whose length (first byte) is
    /// rounded up to a multiple of 4.
    pub(crate) fn pflog_payload(&self) -> Val {
        Val::bin(
            BinOp::And,
            Val::bin(BinOp::Add, ld(&Val::Const(0), 0, Size::Byte), Val::Const(3)),
            Val::Const(0xffff_fffc),
        )
    }

    /// libpcap computes the logged packet's offset in a prologue, before
    /// anything else, when the filter uses it: a packet too short for the
    /// header's length byte rejects whatever the rest says. The load to
    /// put before `pred`, if any.
    pub(crate) fn pflog_prologue(&self, pred: &Pred) -> Option<Pred> {
        let payload = self.pflog_payload();
        if self.off.dlt != LinkType::PFLOG || !uses(pred, &payload) {
            return None;
        }
        Some(Pred::cmp(
            sluice_ir::CmpOp::Ge,
            ld(&Val::Const(0), 0, Size::Byte),
            Val::Const(0),
        ))
    }

    /// A pflog primitive.
    pub(crate) fn pflog_field(&mut self, o: &Other, span: Span) -> GResult<Pred> {
        if self.off.dlt != LinkType::PFLOG {
            return err(
                span,
                format!("pflog primitives are not supported on {}", self.off.dlt),
            );
        }
        let z = Val::Const(0);
        let name = |at: u32, s: &str, what: &str| {
            if s.len() > NAME_MAX {
                return err(
                    span,
                    format!("{what} names can only be {NAME_MAX} characters"),
                );
            }
            Ok(bytes_eq(at, s.as_bytes()))
        };
        match o {
            Other::PfIfname(s) => name(IFNAME_AT, s, "interface"),
            Other::PfRuleset(s) => name(RULESET_AT, s, "ruleset"),
            Other::PfRulenum(n) => Ok(Pred::eq(ld(&z, RULENR_AT, Size::Word), *n)),
            Other::PfSubrulenum(n) => Ok(Pred::eq(ld(&z, SUBRULENR_AT, Size::Word), *n)),
            Other::PfReason(n) => Ok(Pred::eq(ld(&z, REASON_AT, Size::Byte), *n)),
            Other::PfAction(n) => Ok(Pred::eq(ld(&z, ACTION_AT, Size::Byte), *n)),
            _ => err(span, "not a pflog primitive"),
        }
    }
}

/// Whether `v` occurs in `p`.
pub(crate) fn uses(p: &Pred, v: &Val) -> bool {
    fn in_val(x: &Val, v: &Val) -> bool {
        x == v
            || match x {
                Val::Load { base, .. } => in_val(base, v),
                Val::Bin(_, a, b) => in_val(a, v) || in_val(b, v),
                Val::Neg(a) => in_val(a, v),
                // (Only tunnels share values; pflog's payload is never in one.)
                Val::Shared(_) | Val::Const(_) | Val::Len => false,
            }
    }
    match p {
        Pred::True | Pred::False => false,
        Pred::Cmp { lhs, rhs, .. } => in_val(lhs, v) || in_val(rhs, v),
        Pred::Not(q) => uses(q, v),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().any(|q| uses(q, v)),
        Pred::In { val, .. } => in_val(val, v),
        Pred::ProtoChain { start, .. } => in_val(start, v),
    }
}
