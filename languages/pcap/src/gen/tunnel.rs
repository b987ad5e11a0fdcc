//! `geneve` and `vxlan`: UDP tunnels after which every primitive looks at
//! the inner packet, on every link type that carries IP (libpcap master
//! compiles them wherever it can test for IPv4 and IPv6; the inner packet
//! is always Ethernet, or for Geneve a bare network packet).
//!
//! Where the inner packet starts depends on the outer packet: on the IPv4
//! header length, and for Geneve on its option length and payload type. The
//! intermediate form has no "if" for values, so the offsets are computed with
//! branch-free arithmetic from 0/1 indicators; every load they make is inside
//! bytes the tunnel test already read (or reads, exactly as libpcap does).
//!
//! libpcap's Geneve code jumps inside a block, so it turns its optimiser
//! off for any expression with `geneve` ([`crate::Compiled`]).

use super::proto::{ethertype as et, ipproto, ld, mcmp};
use super::{err, GResult, Gen};
use crate::ast::Span;
use crate::link::ProtoField;
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// VXLAN's flags byte: only the "VNI present" bit.
const VXLAN_FLAGS: u32 = 0x08;

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

/// 1 if `x` is not 0, else 0.
fn nonzero(x: Val) -> Val {
    let neg = bin(BinOp::Sub, Val::Const(0), x.clone());
    bin(BinOp::Shr, bin(BinOp::Or, x, neg), Val::Const(31))
}

/// 1 if `a < b` (unsigned), else 0: the borrow out of `a - b`.
fn below(a: Val, b: Val) -> Val {
    let not = |v: Val| bin(BinOp::Xor, v, Val::Const(u32::MAX));
    let borrow = bin(
        BinOp::Or,
        bin(BinOp::And, not(a.clone()), b.clone()),
        bin(
            BinOp::And,
            not(bin(BinOp::Xor, a.clone(), b.clone())),
            bin(BinOp::Sub, a, b),
        ),
    );
    bin(BinOp::Shr, borrow, Val::Const(31))
}

/// `p` as a value, 1 when it holds and 0 when not, computed without
/// branches (every load in `p` is made). `None` for a protocol chain.
fn indicator(p: &Pred) -> Option<Val> {
    let one = Val::Const(1);
    Some(match p {
        Pred::True => one,
        Pred::False => Val::Const(0),
        Pred::Cmp { op, lhs, rhs } => match op {
            CmpOp::Eq => bin(
                BinOp::Xor,
                nonzero(bin(BinOp::Xor, lhs.clone(), rhs.clone())),
                one,
            ),
            CmpOp::Set => nonzero(bin(BinOp::And, lhs.clone(), rhs.clone())),
            CmpOp::Gt => below(rhs.clone(), lhs.clone()),
            CmpOp::Ge => bin(BinOp::Xor, below(lhs.clone(), rhs.clone()), one),
        },
        Pred::Not(q) => bin(BinOp::Xor, indicator(q)?, one),
        Pred::And(ps) | Pred::Or(ps) => {
            let op = if matches!(p, Pred::And(_)) {
                BinOp::And
            } else {
                BinOp::Or
            };
            let mut it = ps.iter();
            let mut acc = indicator(it.next()?)?;
            for q in it {
                acc = bin(op, acc, indicator(q)?);
            }
            acc
        }
        Pred::In { val, keys } => {
            let mut acc = Val::Const(0);
            for &k in keys.iter() {
                acc = bin(BinOp::Or, acc, indicator(&Pred::eq(val.clone(), k))?);
            }
            acc
        }
        Pred::ProtoChain { .. } => return None,
    })
}

impl Gen {
    /// The UDP header's offset from the network header, as a value: the IPv4
    /// header length where the link says IPv4, 40 (IPv6) elsewhere. The
    /// tunnel test has read what the link's IPv4 test reads.
    fn udp_offset(&self) -> Val {
        let is_v4 = match &self.off.field {
            // Inside MPLS the IP version says it (the tunnel's IPv4 and
            // IPv6 tests are the bottom label and the version nibble).
            _ if self.off.mpls_depth > 0 => {
                indicator(&self.linktype(et::IP)).unwrap_or(Val::Const(1))
            }
            ProtoField::EtherType => {
                let at = self.off.proto_at.clone().expect("EtherType field");
                eq16(ld(&at, 0, Size::Half), et::IP)
            }
            _ => indicator(&self.linktype(et::IP)).unwrap_or(Val::Const(1)),
        };
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

    /// Refuse a tunnel after which the offsets cannot move (they are
    /// always known on links that carry IP).
    fn require_tunnel_link(&self, what: &str, span: Span) -> GResult<()> {
        if self.off.field == ProtoField::NoLinkType {
            return err(
                span,
                format!("'{what}' is not supported on {}", self.off.dlt),
            );
        }
        Ok(())
    }

    /// The tunnel's own outer test is made: what follows reads its offsets
    /// (see [`Gen::wlan_unset`]).
    fn wlan_set(&mut self) {
        self.wlan_header_unset = false;
        self.wlan_payload_unset = false;
    }

    /// A tunnel's header position, held once when it is computed from an
    /// earlier tunnel's offsets: each tunnel's offsets use the last ones
    /// several times (a load at them, and the sum), so copies would grow
    /// by that factor per tunnel; held once, the filter grows linearly.
    fn nested(&self, at: Val) -> Val {
        if self.off.tunnels == 0 {
            return at;
        }
        Val::shared(at)
    }

    /// Move every offset to the inner Ethernet frame at `inner`.
    fn enter_ethernet(&mut self, inner: Val, proto_at: Val, net: Val) {
        self.off.tunnels += 1;
        self.off.link = inner.clone();
        self.off.macs = Some((Val::plus(inner.clone(), 6), inner));
        self.off.proto_at = Some(proto_at);
        self.off.net = net;
        self.off.field = ProtoField::EtherType;
        // (MPLS labels stepped over before the tunnel still count, as in
        // libpcap master: `mpls and vxlan and vlan` is refused.)
        self.off.link_dlt = crate::link::LinkType::EN10MB;
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
            let mut v = vec![mcmp(at(8, Size::Byte), 0xc0, 0)];
            if let Some(vni) = vni {
                v.push(mcmp(at(12, Size::Word), 0xffff_ff00, vni << 8));
            }
            v
        });
        let start = self.nested(Val::plus(
            bin(BinOp::Add, self.udp_offset(), self.off.net.clone()),
            8,
        ));
        self.wlan_set();
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
        self.no_optimize.set(true);
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
        let tunnel = self.udp_tunnel(VXLAN_PORT, |at| {
            let mut v = vec![Pred::eq(at(8, Size::Byte), VXLAN_FLAGS)];
            if let Some(vni) = vni {
                v.push(mcmp(at(12, Size::Word), 0xffff_ff00, vni << 8));
            }
            v
        });
        // UDP header (8) and VXLAN header (8), then an Ethernet frame.
        let inner = self.nested(Val::plus(
            bin(BinOp::Add, self.udp_offset(), self.off.net.clone()),
            16,
        ));
        self.wlan_set();
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
