//! `geneve` and `vxlan`: UDP tunnels after which every primitive looks at
//! the inner packet.
//!
//! Where the inner packet starts depends on the outer packet: on the IPv4
//! header length, and for Geneve on its option length and payload type. The
//! intermediate form has no "if" for values, so the offsets are computed with
//! branch-free arithmetic from 0/1 indicators; every load they make is inside
//! bytes the tunnel test already read (or reads, exactly as libpcap does).

use super::proto::{ethertype as et, ipproto, ld};
use super::{err, GResult, Gen};
use crate::ast::Span;
use crate::link::ProtoField;
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

const GENEVE_PORT: u32 = 6081;
const VXLAN_PORT: u32 = 4789;
/// Geneve payload type of an Ethernet frame ("transparent Ethernet bridging").
const ETHERTYPE_TEB: u32 = 0x6558;

fn bin(op: BinOp, a: Val, b: Val) -> Val {
    Val::bin(op, a, b)
}

/// 1 if the 16-bit value `x` equals `k`, else 0.
fn eq16(x: Val, k: u32) -> Val {
    let differs = bin(
        BinOp::Shr,
        bin(
            BinOp::Add,
            bin(BinOp::Xor, x, Val::Const(k)),
            Val::Const(0xffff),
        ),
        Val::Const(16),
    );
    bin(BinOp::Xor, differs, Val::Const(1))
}

/// `c ? a : b` for an indicator `c` in {0, 1} (wrapping arithmetic).
fn select(c: Val, a: Val, b: Val) -> Val {
    let diff = bin(BinOp::Sub, a, b.clone());
    bin(BinOp::Add, b, bin(BinOp::Mul, c, diff))
}

/// A test that is always true but performs the load (and so aborts where
/// libpcap's program would).
fn touch(v: Val) -> Pred {
    Pred::cmp(CmpOp::Ge, v, Val::Const(0))
}

impl Gen {
    /// The UDP header's offset from the network header, as a value: the IPv4
    /// header length on IPv4, 40 on IPv6.
    fn udp_offset(&self) -> Val {
        let at = self.off.proto_at.clone().expect("EtherType field");
        let is_v4 = eq16(ld(&at, 0, Size::Half), et::IP);
        let hl = bin(
            BinOp::Shl,
            bin(
                BinOp::And,
                ld(&self.off.net, 0, Size::Byte),
                Val::Const(0xf),
            ),
            Val::Const(2),
        );
        select(is_v4, hl, Val::Const(40))
    }

    /// The UDP-tunnel test: IPv4 (unfragmented) or IPv6 carrying UDP to
    /// `port`, plus `extra(udp_header)` tests on each.
    fn udp_tunnel(
        &self,
        port: u32,
        extra: impl Fn(&dyn Fn(u32, Size) -> Val) -> Vec<Pred>,
    ) -> Pred {
        let net = self.off.net.clone();
        let v4_at = |off: u32, size: Size| self.transport_load(off, size);
        let v6_at = |off: u32, size: Size| ld(&net, 40 + off, Size::Half).resize(size);
        let mut v4 = vec![
            self.linktype(et::IP),
            Pred::eq(ld(&net, 9, Size::Byte), ipproto::UDP),
            self.ip_not_frag(),
            Pred::eq(v4_at(2, Size::Half), port),
        ];
        v4.extend(extra(&v4_at));
        let mut v6 = vec![
            self.linktype(et::IPV6),
            Pred::eq(ld(&net, 6, Size::Byte), ipproto::UDP),
            Pred::eq(v6_at(2, Size::Half), port),
        ];
        v6.extend(extra(&v6_at));
        Pred::or(vec![Pred::and(v4), Pred::and(v6)])
    }

    fn require_tunnel_link(&self, what: &str, span: Span) -> GResult<()> {
        let link_ok = matches!(
            self.off.field,
            ProtoField::EtherType | ProtoField::Ieee80211
        );
        if !link_ok || self.off.proto_at.is_none() {
            return err(
                span,
                format!("'{what}' is not supported on {} yet", self.off.dlt),
            );
        }
        Ok(())
    }

    /// Move every offset to the inner Ethernet frame at `inner`.
    fn enter_ethernet(&mut self, inner: Val, proto_at: Val, net: Val) {
        self.off.link = inner.clone();
        self.off.macs = Some((Val::plus(inner.clone(), 6), inner));
        self.off.proto_at = Some(proto_at);
        self.off.net = net;
        self.off.field = ProtoField::EtherType;
        self.off.mpls_depth = 0;
    }

    pub(crate) fn geneve(&mut self, vni: Option<u32>, span: Span) -> GResult<Pred> {
        self.require_tunnel_link("geneve", span)?;
        if let Some(v) = vni {
            if v > 0xff_ffff {
                return err(
                    span,
                    format!("Geneve VNI {v} greater than maximum 16777215"),
                );
            }
        }
        let tunnel = self.udp_tunnel(GENEVE_PORT, |at| {
            // Version 0 (top two bits of the first byte), then the VNI.
            let mut v = vec![Pred::masked_eq(at(8, Size::Byte), 0xc0, 0)];
            if let Some(vni) = vni {
                v.push(Pred::masked_eq(at(12, Size::Word), 0xffff_ff00, vni << 8));
            }
            v
        });
        let start = Val::plus(bin(BinOp::Add, self.udp_offset(), self.off.net.clone()), 8);
        let opt_len = ld(&start, 0, Size::Byte);
        let payload_type = ld(&start, 2, Size::Half);
        let inner = Val::plus(
            bin(
                BinOp::Add,
                bin(
                    BinOp::Mul,
                    bin(BinOp::And, opt_len.clone(), Val::Const(0x3f)),
                    Val::Const(4),
                ),
                start.clone(),
            ),
            8,
        );
        let is_eth = eq16(payload_type.clone(), ETHERTYPE_TEB);
        let proto_at = select(
            is_eth.clone(),
            Val::plus(inner.clone(), 12),
            Val::plus(start.clone(), 2),
        );
        let net = bin(
            BinOp::Add,
            inner.clone(),
            bin(BinOp::Mul, is_eth, Val::Const(14)),
        );
        // libpcap reads the option length and payload type right after the
        // tunnel test; a packet too short for them aborts the filter.
        let pred = Pred::and(vec![tunnel, touch(opt_len), touch(payload_type)]);
        self.enter_ethernet(inner, proto_at, net);
        Ok(pred)
    }

    pub(crate) fn vxlan(&mut self, vni: Option<u32>, span: Span) -> GResult<Pred> {
        self.require_tunnel_link("vxlan", span)?;
        if let Some(v) = vni {
            if v > 0xff_ffff {
                return err(span, format!("VXLAN VNI {v} greater than maximum 16777215"));
            }
        }
        let tunnel = self.udp_tunnel(VXLAN_PORT, |at| match vni {
            Some(vni) => vec![Pred::masked_eq(at(12, Size::Word), 0xffff_ff00, vni << 8)],
            None => vec![],
        });
        // UDP header (8) and VXLAN header (8), then an Ethernet frame.
        let inner = Val::plus(bin(BinOp::Add, self.udp_offset(), self.off.net.clone()), 16);
        let proto_at = Val::plus(inner.clone(), 12);
        let net = Val::plus(inner.clone(), 14);
        self.enter_ethernet(inner, proto_at, net);
        Ok(tunnel)
    }
}

/// Loads of another width at the same place.
trait Resize {
    fn resize(self, size: Size) -> Val;
}

impl Resize for Val {
    fn resize(self, size: Size) -> Val {
        match self {
            Val::Load { base, offset, .. } => Val::Load { base, offset, size },
            v => v,
        }
    }
}
