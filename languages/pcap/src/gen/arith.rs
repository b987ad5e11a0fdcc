//! Relations and arithmetic: `proto[index:size]`, `len`, operators.
//!
//! An arithmetic expression becomes a value plus the *guards* its loads need
//! (`tcp[0]` needs "this is an unfragmented IPv4 TCP packet"), with libpcap
//! master's bookkeeping: a load's guards follow those of its index; a
//! binary operator keeps only its left operand's guards (the right
//! operand's loads run unguarded, as in libpcap); a relation runs the right
//! side's guards, then the left side's, then compares.
//!
//! Division and modulus by zero and shifts by more than 31 bits are refused
//! as libpcap's code generator refuses them: when the right operand's
//! first instruction loads such a constant (`x / ppp[0:4]` divides by what
//! `ld #0` starts, so it is refused; `x % (8 % 4)` is not). libpcap's
//! optimiser refuses the rest when it folds them, and so does sluice's
//! ([`crate::Compiled`]).

use super::proto::{ethertype as et, ipproto};
use super::{err, GResult, Gen};
use crate::ast::{Arith, ArithOp, Proto, RelOp, Span};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// The constant libpcap's first instruction for `a` loads (`ld #k`), if
/// it starts with one: a number, or an expression whose leftmost leaf (a
/// load's index included) is one.
fn first_constant(a: &Arith) -> Option<u32> {
    match a {
        Arith::Num(n, _) => Some(*n),
        Arith::Len(_) => None,
        Arith::Neg(x, _) | Arith::Bin(_, x, _, _) => first_constant(x),
        Arith::Load { index, .. } => first_constant(index),
    }
}

impl Gen {
    pub(crate) fn relation(
        &mut self,
        op: RelOp,
        a: &Arith,
        b: &Arith,
        _span: Span,
    ) -> GResult<Pred> {
        let mut guards_a = Vec::new();
        let va = self.arith(a, &mut guards_a)?;
        let mut guards = Vec::new();
        let vb = self.arith(b, &mut guards)?;
        // libpcap frees both sides' registers once it compares them.
        self.reg_free(2);
        // A comparison is never decided while the program is generated:
        // libpcap's optimiser folds `1 = 1`, and only when it runs.
        let cmp = |op, lhs, rhs| Pred::Cmp { op, lhs, rhs };
        let test = match op {
            RelOp::Eq => cmp(CmpOp::Eq, va, vb),
            RelOp::Ne => Pred::not(cmp(CmpOp::Eq, va, vb)),
            RelOp::Gt => cmp(CmpOp::Gt, va, vb),
            RelOp::Ge => cmp(CmpOp::Ge, va, vb),
            RelOp::Lt => Pred::not(cmp(CmpOp::Ge, va, vb)),
            RelOp::Le => Pred::not(cmp(CmpOp::Gt, va, vb)),
        };
        guards.extend(guards_a);
        guards.push(test);
        Ok(Pred::and(guards))
    }

    fn arith(&mut self, a: &Arith, guards: &mut Vec<Pred>) -> GResult<Val> {
        // libpcap's registers ([`super::regs`]): every number, `len` and
        // load result holds one.
        Ok(match a {
            Arith::Num(n, span) => {
                self.reg_take_at(*span)?;
                Val::Const(*n)
            }
            Arith::Len(span) => {
                self.reg_take_at(*span)?;
                Val::Len
            }
            // Nothing is folded here: libpcap folds arithmetic only in its
            // optimiser's second pass, which decides less than its first
            // (see sluice-cbpf's `refuse`); sluice's optimiser folds it.
            Arith::Neg(x, _) => Val::Neg(Box::new(self.arith(x, guards)?)),
            Arith::Bin(op, x, y, span) => {
                let vx = self.arith(x, guards)?;
                // libpcap drops the right operand's guards.
                let vy = self.arith(y, &mut Vec::new())?;
                self.reg_free(2);
                self.reg_take_at(*span)?;
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
                if let Some(c) = first_constant(y) {
                    match op {
                        BinOp::Div if c == 0 => return err(*span, "division by zero"),
                        BinOp::Mod if c == 0 => return err(*span, "modulus by zero"),
                        BinOp::Shl | BinOp::Shr if c > 31 => {
                            return err(*span, format!("shift by more than 31 bits ({c})"))
                        }
                        _ => {}
                    }
                }
                Val::Bin(op, Box::new(vx), Box::new(vy))
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
                // The result's register first, then the link offsets the
                // load reads, then the index's is freed.
                self.reg_take_at(*span)?;
                let (h, p) = self.reg_load_reads(*proto);
                self.reg_link(h, p);
                if self.reg_out() {
                    return err(*span, super::regs::TOO_MANY);
                }
                let v = self.load(*proto, idx, size, *span, guards)?;
                self.reg_free(1);
                v
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
            Link => at(&self.link_header()),
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
                // IPv4 only, as libpcap checks it: the IP protocol, and the
                // first fragment.
                let number = match proto {
                    Tcp => ipproto::TCP,
                    Udp => ipproto::UDP,
                    Sctp => ipproto::SCTP,
                    Icmp => ipproto::ICMP,
                    Igmp => ipproto::IGMP,
                    Igrp => ipproto::IGRP,
                    Pim => ipproto::PIM,
                    _ => ipproto::VRRP,
                };
                guards.push(self.linktype(et::IP));
                guards.push(Pred::eq(super::proto::ld(&net, 9, Size::Byte), number));
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
