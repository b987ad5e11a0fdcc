//! Relations and arithmetic: `proto[index:size]`, `len`, operators.
//!
//! An arithmetic expression becomes a value plus the *guards* its loads need
//! (`tcp[0]` needs "this is an unfragmented IPv4 TCP packet"). A relation
//! runs all guards first, left side before right, then compares; like
//! libpcap, no load happens unless every guard holds.

use super::proto::{ethertype as et, ipproto};
use super::{err, GResult, Gen};
use crate::ast::{Arith, ArithOp, Proto, RelOp, Span};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

impl Gen {
    pub(crate) fn relation(
        &mut self,
        op: RelOp,
        a: &Arith,
        b: &Arith,
        _span: Span,
    ) -> GResult<Pred> {
        let mut guards = Vec::new();
        let va = self.arith(a, &mut guards)?;
        let vb = self.arith(b, &mut guards)?;
        let test = match op {
            RelOp::Eq => Pred::cmp(CmpOp::Eq, va, vb),
            RelOp::Ne => Pred::not(Pred::cmp(CmpOp::Eq, va, vb)),
            RelOp::Gt => Pred::cmp(CmpOp::Gt, va, vb),
            RelOp::Ge => Pred::cmp(CmpOp::Ge, va, vb),
            RelOp::Lt => Pred::not(Pred::cmp(CmpOp::Ge, va, vb)),
            RelOp::Le => Pred::not(Pred::cmp(CmpOp::Gt, va, vb)),
        };
        guards.push(test);
        Ok(Pred::and(guards))
    }

    fn arith(&mut self, a: &Arith, guards: &mut Vec<Pred>) -> GResult<Val> {
        Ok(match a {
            Arith::Num(n, _) => Val::Const(*n),
            Arith::Len(_) => Val::Len,
            Arith::Neg(x, _) => {
                let v = self.arith(x, guards)?;
                match v {
                    Val::Const(c) => Val::Const(c.wrapping_neg()),
                    v => Val::Neg(Box::new(v)),
                }
            }
            Arith::Bin(op, x, y, span) => {
                let vx = self.arith(x, guards)?;
                let vy = self.arith(y, guards)?;
                let op = match op {
                    ArithOp::Add => BinOp::Add,
                    ArithOp::Sub => BinOp::Sub,
                    ArithOp::Mul => BinOp::Mul,
                    ArithOp::Div => BinOp::Div,
                    ArithOp::Mod => BinOp::Mod,
                    ArithOp::And => BinOp::And,
                    ArithOp::Or => BinOp::Or,
                    ArithOp::Xor => BinOp::Xor,
                    ArithOp::Shl => BinOp::Shl,
                    ArithOp::Shr => BinOp::Shr,
                };
                if let Val::Const(c) = vy {
                    match op {
                        BinOp::Div if c == 0 => return err(*span, "division by zero"),
                        BinOp::Mod if c == 0 => return err(*span, "modulus by zero"),
                        BinOp::Shl | BinOp::Shr if c > 31 => {
                            return err(*span, format!("shift by more than 31 bits ({c})"))
                        }
                        _ => {}
                    }
                }
                // Keep a load even when the result is known (x & 0): it may abort.
                if vx.can_abort() || vy.can_abort() {
                    Val::Bin(op, Box::new(vx), Box::new(vy))
                } else {
                    Val::bin(op, vx, vy)
                }
            }
            Arith::Load {
                proto,
                index,
                size,
                span,
            } => {
                let Some(size) = Size::from_bytes(*size) else {
                    return err(*span, format!("data size must be 1, 2, or 4, not {size}"));
                };
                let idx = self.arith(index, guards)?;
                self.load(*proto, idx, size, *span, guards)?
            }
        })
    }

    fn load(
        &mut self,
        proto: Proto,
        idx: Val,
        size: Size,
        span: Span,
        guards: &mut Vec<Pred>,
    ) -> GResult<Val> {
        use Proto::*;
        let net = self.off.net.clone();
        let at = |base: &Val| Gen::at(idx.clone(), base, 0, size);
        Ok(match proto {
            Link if self.off.field == crate::link::ProtoField::Ieee80211 => at(&self.wlan_header()),
            Link => at(&self.off.link.clone()),
            Radio => self.radio_load(idx, size, span)?,
            Ip | Arp | Rarp | Atalk | Decnet | Sca | Lat | Mopdl | Moprc | Ip6 => {
                let ethertype = match proto {
                    Ip => et::IP,
                    Arp => et::ARP,
                    Rarp => et::RARP,
                    Atalk => et::ATALK,
                    Decnet => et::DECNET,
                    Sca => et::SCA,
                    Lat => et::LAT,
                    Mopdl => et::MOPDL,
                    Moprc => et::MOPRC,
                    _ => et::IPV6,
                };
                guards.push(self.linktype(ethertype));
                at(&net)
            }
            Tcp | Udp | Sctp | Icmp | Igmp | Igrp | Pim | Vrrp | Carp => {
                guards.push(self.linktype(et::IP));
                guards.push(self.proto_abbrev(proto, span)?);
                guards.push(self.ip_not_frag());
                self.transport_load_at(idx, size)
            }
            Icmp6 => {
                guards.push(self.linktype(et::IPV6));
                guards.push(Pred::eq(
                    super::proto::ld(&net, 6, Size::Byte),
                    ipproto::ICMPV6,
                ));
                Gen::at(idx, &net, 40, size)
            }
            other => {
                return err(
                    span,
                    format!(
                        "'{}' does not support the index operation",
                        format!("{other:?}").to_ascii_lowercase()
                    ),
                )
            }
        })
    }
}
