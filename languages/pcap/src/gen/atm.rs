//! SunATM primitives: `vpi`, `vci`, the OAM/signalling circuit keywords and
//! `lane`. Only the SunATM link type records the ATM header.

use super::proto::ld;
use super::{err, GResult, Gen};
use crate::ast::{Atm, AtmField, RelOp, Span};
use crate::link::LinkType;
use sluice_ir::{CmpOp, Pred, Size, Val};

/// The VPI byte and VCI half-word of the SunATM pseudo-header.
const VPI_AT: u32 = 1;
const VCI_AT: u32 = 2;
/// The Q.2931 message type, in a signalling cell after the pseudo-header.
const MSG_TYPE_AT: u32 = 9;

/// Q.2931 message types: call proceeding, connect, connect ack, setup,
/// release, release complete.
const CALL_PROCEED: u32 = 0x02;
const CONNECT: u32 = 0x07;
const CONNECT_ACK: u32 = 0x0f;
const SETUP: u32 = 0x05;
const RELEASE: u32 = 0x4d;
const RELEASE_DONE: u32 = 0x5a;

/// `v op k` for an or-list operator of `vpi`/`vci`/MTP3 fields.
/// (`rel(RelOp::Gt, v, 5)` is `v > 5`.)
pub(crate) fn rel(op: RelOp, v: Val, k: u32) -> Pred {
    match op {
        RelOp::Eq => Pred::eq(v, k),
        RelOp::Ne => Pred::not(Pred::eq(v, k)),
        RelOp::Gt => Pred::cmp(CmpOp::Gt, v, Val::Const(k)),
        RelOp::Ge => Pred::cmp(CmpOp::Ge, v, Val::Const(k)),
        RelOp::Lt => Pred::not(Pred::cmp(CmpOp::Ge, v, Val::Const(k))),
        RelOp::Le => Pred::not(Pred::cmp(CmpOp::Gt, v, Val::Const(k))),
    }
}

impl Gen {
    fn require_sunatm(&self, what: &str, span: Span) -> GResult<()> {
        if self.off.dlt != LinkType::SUNATM {
            return err(span, format!("'{what}' supported only on SUNATM"));
        }
        Ok(())
    }

    fn vpi_vci(&self, vpi: u32, vci: u32) -> Pred {
        Pred::and(vec![
            Pred::eq(ld(&Val::Const(0), VPI_AT, Size::Byte), vpi),
            Pred::eq(ld(&Val::Const(0), VCI_AT, Size::Half), vci),
        ])
    }

    fn vpi_vci_any(&self, vcis: &[u32]) -> Pred {
        let vci = ld(&Val::Const(0), VCI_AT, Size::Half);
        Pred::and(vec![
            Pred::eq(ld(&Val::Const(0), VPI_AT, Size::Byte), 0),
            Pred::or(vcis.iter().map(|&c| Pred::eq(vci.clone(), c)).collect()),
        ])
    }

    fn msg_type(&self, types: &[u32]) -> Pred {
        let t = ld(&Val::Const(0), MSG_TYPE_AT, Size::Byte);
        Pred::or(types.iter().map(|&k| Pred::eq(t.clone(), k)).collect())
    }

    /// An ATM keyword primitive.
    pub(crate) fn atm(&mut self, a: Atm, span: Span) -> GResult<Pred> {
        let name = format!("{a:?}").to_ascii_lowercase();
        self.require_sunatm(&name, span)?;
        Ok(match a {
            Atm::Lane => self.lane(),
            Atm::Metac => self.vpi_vci(0, 1),
            Atm::Bcc => self.vpi_vci(0, 2),
            Atm::Oamf4sc => self.vpi_vci(0, 3),
            Atm::Oamf4ec => self.vpi_vci(0, 4),
            Atm::Sc => self.vpi_vci(0, 5),
            Atm::Ilmic => self.vpi_vci(0, 16),
            Atm::Oam | Atm::Oamf4 => self.vpi_vci_any(&[3, 4]),
            Atm::Connectmsg => Pred::and(vec![
                self.vpi_vci(0, 5),
                self.msg_type(&[
                    RELEASE_DONE,
                    RELEASE,
                    CONNECT_ACK,
                    CONNECT,
                    SETUP,
                    CALL_PROCEED,
                ]),
            ]),
            Atm::Metaconnect => Pred::and(vec![
                self.vpi_vci(0, 1),
                self.msg_type(&[RELEASE_DONE, RELEASE, CONNECT, SETUP, CALL_PROCEED]),
            ]),
        })
    }

    /// `vpi`/`vci` compared with an or-list of values.
    pub(crate) fn atm_field(
        &mut self,
        f: AtmField,
        list: &[(RelOp, u32)],
        span: Span,
    ) -> GResult<Pred> {
        let (name, v, max) = match f {
            AtmField::Vpi => ("vpi", ld(&Val::Const(0), VPI_AT, Size::Byte), 255),
            AtmField::Vci => ("vci", ld(&Val::Const(0), VCI_AT, Size::Half), 65535),
        };
        self.require_sunatm(name, span)?;
        let mut alts = Vec::with_capacity(list.len());
        for &(op, k) in list {
            if k > max {
                return err(span, format!("{name} {k} greater than maximum {max}"));
            }
            alts.push(rel(op, v.clone(), k));
        }
        Ok(Pred::or(alts))
    }
}
