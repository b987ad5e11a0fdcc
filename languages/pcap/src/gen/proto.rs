//! Protocol tests: "the link carries protocol P", bare protocol names, and
//! the keyword primitives that step over encapsulations.

use super::{err, GResult, Gen};
use crate::ast::{ByteOp, Llc, Other, Proto, Span};
use crate::link::{LinkType, ProtoField};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// Ethernet types and LLC SAPs the generator names.
pub(crate) mod ethertype {
    pub const IP: u32 = 0x0800;
    pub const ARP: u32 = 0x0806;
    pub const RARP: u32 = 0x8035;
    pub const IPV6: u32 = 0x86dd;
    pub const ATALK: u32 = 0x809b;
    pub const AARP: u32 = 0x80f3;
    pub const IPX: u32 = 0x8137;
    pub const DECNET: u32 = 0x6003;
    pub const LAT: u32 = 0x6004;
    pub const SCA: u32 = 0x6007;
    pub const MOPRC: u32 = 0x6002;
    pub const MOPDL: u32 = 0x6001;
    pub const PPPOED: u32 = 0x8863;
    pub const PPPOES: u32 = 0x8864;
    pub const MPLS: u32 = 0x8847;
    pub const VLAN_TPIDS: [u32; 3] = [0x8100, 0x88a8, 0x9100];
    /// Largest 802.3 length: type fields above it are Ethernet types.
    pub const ETHERMTU: u32 = 1500;
    pub const SAP_ISONS: u32 = 0xfe;
    pub const SAP_IP: u32 = 0x06;
    pub const SAP_NETBEUI: u32 = 0xf0;
    pub const SAP_IPX: u32 = 0xe0;
    pub const SAP_8021D: u32 = 0x42;
}
use ethertype as et;

/// IP protocol numbers the generator names.
pub(crate) mod ipproto {
    pub const ICMP: u32 = 1;
    pub const IGMP: u32 = 2;
    pub const TCP: u32 = 6;
    pub const IGRP: u32 = 9;
    pub const UDP: u32 = 17;
    pub const ESP: u32 = 50;
    pub const AH: u32 = 51;
    pub const ICMPV6: u32 = 58;
    pub const PIM: u32 = 103;
    pub const VRRP: u32 = 112;
    pub const SCTP: u32 = 132;
    pub const FRAGMENT: u32 = 44;
}

/// OSI network-layer protocol identifiers (after the 0xfefe LLC header).
const ISO8473_CLNP: u32 = 0x81;
const ISO9542_ESIS: u32 = 0x82;
const ISO10589_ISIS: u32 = 0x83;

/// A load `off` bytes after `at`. A constant address is computed modulo
/// 2^32, as libpcap computes its constant offsets (this matters only for
/// the Juniper links whose network layer is at libpcap's "not set" offset).
/// `(v & mask) == k` as libpcap's code generator tests it (`gen_mcmp`:
/// `and #mask; jeq #k`), in the form its optimiser then sees: with `k` 0
/// its peephole pass makes it `jset #mask` with the branches swapped, so
/// it is `not (v & mask != 0)` here (the same test; what the refusal
/// model relates to other tests depends on it: `wlan type mgt and wlan
/// type data` is a `jset` and a `jeq` to libpcap, and kept).
///
/// ```ignore
/// mcmp(fc, 0x0c, 0) == Pred::not(Pred::cmp(CmpOp::Set, fc, Val::Const(0x0c)))
/// ```
pub(crate) fn mcmp(v: Val, mask: u32, k: u32) -> Pred {
    if k == 0 && mask != 0 && mask != u32::MAX {
        return Pred::not(Pred::cmp(CmpOp::Set, v, Val::Const(mask)));
    }
    Pred::masked_eq(v, mask, k)
}

/// `v & bit != 0` as libpcap tests a single bit (`gen_set`: `jset`).
pub(crate) fn bit_set(v: Val, bit: u32) -> Pred {
    Pred::cmp(CmpOp::Set, v, Val::Const(bit))
}

pub(crate) fn ld(at: &Val, off: u32, size: Size) -> Val {
    match at {
        Val::Const(c) => Val::load_abs(c.wrapping_add(off), size),
        at => Val::load(at.clone(), off, size),
    }
}

/// An 802.2 SNAP header at `pl`: the LLC word (`aa aa 03` and the OUI's
/// first byte) and the word holding the rest of the OUI and the type.
fn snap(pl: &Val, oui_and_type: u32, llc: u32) -> Pred {
    Pred::and(vec![
        Pred::eq(ld(pl, 4, Size::Word), oui_and_type),
        Pred::eq(ld(pl, 0, Size::Word), llc),
    ])
}

/// AppleTalk (Apple's OUI 08-00-07) or AARP (OUI 0) in a SNAP header.
fn appletalk_snap(pl: &Val, proto: u32) -> Pred {
    if proto == et::ATALK {
        snap(pl, 0x0007_809b, 0xaaaa_0308)
    } else {
        snap(pl, et::AARP, 0xaaaa_0300)
    }
}

pub(crate) fn ppp_proto(ethertype: u32) -> u32 {
    match ethertype {
        et::IP => 0x0021,
        et::IPV6 => 0x0057,
        et::DECNET => 0x0027,
        et::ATALK => 0x0029,
        et::SAP_ISONS => 0x0023,
        et::SAP_IPX => 0x002b,
        et::SAP_8021D => 0x0031,
        // Xerox NS (Ethernet type 0x0600); NetBEUI's SAP and IPX's
        // Ethernet type stay as they are, as in libpcap master.
        0x0600 => 0x003f,
        other => other,
    }
}

impl Gen {
    /// "The current link header carries `proto`" (an Ethernet type, or an
    /// LLC SAP for values up to 1500).
    pub(crate) fn linktype(&self, proto: u32) -> Pred {
        let o = &self.off;
        if o.mpls_depth > 0 {
            // Inside MPLS: the bottom-of-stack bit of the last label, then the IP version.
            let bos = bit_set(ld(&o.net, 0, Size::Byte).sub_off(2), 1);
            return match proto {
                et::IP => Pred::and(vec![bos, mcmp(ld(&o.net, 0, Size::Byte), 0xf0, 0x40)]),
                et::IPV6 => Pred::and(vec![bos, mcmp(ld(&o.net, 0, Size::Byte), 0xf0, 0x60)]),
                _ => {
                    self.refuse("unsupported protocol over mpls");
                    Pred::False
                }
            };
        }
        match o.field {
            ProtoField::EtherType => self.ether_linktype(proto),
            ProtoField::Sll => self.sll_linktype(proto),
            ProtoField::Ppp => {
                let at = o.proto_at.clone().expect("PPP has a protocol field");
                Pred::eq(ld(&at, 0, Size::Half), ppp_proto(proto))
            }
            ProtoField::CiscoHdlc => {
                let at = o.proto_at.clone().expect("C-HDLC has a protocol field");
                let v = match proto {
                    et::SAP_ISONS => 0xfefe,
                    p => p,
                };
                Pred::eq(ld(&at, 0, Size::Half), v)
            }
            ProtoField::AddressFamily { network_order } => {
                let field = if network_order {
                    super::family::Field::NetWord
                } else {
                    super::family::Field::HostWord
                };
                self.family_linktype(proto, &Val::Const(0), field)
            }
            ProtoField::IpVersion => match proto {
                et::IP => mcmp(ld(&o.net, 0, Size::Byte), 0xf0, 0x40),
                et::IPV6 => mcmp(ld(&o.net, 0, Size::Byte), 0xf0, 0x60),
                _ => Pred::False,
            },
            ProtoField::OnlyIpv4 => {
                if proto == et::IP {
                    Pred::True
                } else {
                    Pred::False
                }
            }
            ProtoField::OnlyIpv6 => {
                if proto == et::IPV6 {
                    Pred::True
                } else {
                    Pred::False
                }
            }
            ProtoField::Ieee80211 => self.wlan_linktype(proto),
            _ => self.link_linktype(proto),
        }
    }

    pub(crate) fn ether_linktype(&self, proto: u32) -> Pred {
        let at = self
            .off
            .proto_at
            .clone()
            .expect("Ethernet has a type field");
        let ty = ld(&at, 0, Size::Half);
        let pl = self.off.net.clone();
        let is_llc = || Pred::not(Pred::cmp(CmpOp::Gt, ty.clone(), Val::Const(et::ETHERMTU)));
        match proto {
            et::SAP_IP | et::SAP_ISONS | et::SAP_NETBEUI => Pred::and(vec![
                is_llc(),
                Pred::eq(ld(&pl, 0, Size::Half), proto << 8 | proto),
            ]),
            et::SAP_IPX => Pred::or(vec![
                Pred::eq(ty.clone(), et::IPX),
                Pred::and(vec![
                    is_llc(),
                    Pred::or(vec![
                        snap(&pl, et::IPX, 0xaaaa_0300),
                        Pred::eq(ld(&pl, 0, Size::Byte), et::SAP_IPX),
                        Pred::eq(ld(&pl, 0, Size::Half), 0xffff),
                    ]),
                ]),
            ]),
            et::ATALK | et::AARP => Pred::or(vec![
                Pred::eq(ty.clone(), proto),
                Pred::and(vec![is_llc(), appletalk_snap(&pl, proto)]),
            ]),
            p if p <= et::ETHERMTU => {
                Pred::and(vec![is_llc(), Pred::eq(ld(&pl, 0, Size::Byte), p)])
            }
            p => Pred::eq(ty, p),
        }
    }

    fn sll_linktype(&self, proto: u32) -> Pred {
        let at = self.off.proto_at.clone().expect("SLL has a protocol field");
        let ty = ld(&at, 0, Size::Half);
        let pl = self.off.net.clone();
        if self.off.dlt == LinkType::LINUX_SLL2 {
            return Pred::eq(ty, proto);
        }
        const P_802_3: u32 = 1;
        const P_802_2: u32 = 4;
        let llc = || Pred::eq(ty.clone(), P_802_2);
        match proto {
            et::SAP_ISONS | et::SAP_NETBEUI => Pred::and(vec![
                llc(),
                Pred::eq(ld(&pl, 0, Size::Half), proto << 8 | proto),
            ]),
            et::SAP_IPX => Pred::or(vec![
                Pred::eq(ty.clone(), et::IPX),
                Pred::eq(ty.clone(), P_802_3),
                Pred::and(vec![
                    llc(),
                    Pred::or(vec![
                        Pred::eq(ld(&pl, 0, Size::Byte), et::SAP_IPX),
                        snap(&pl, et::IPX, 0xaaaa_0300),
                    ]),
                ]),
            ]),
            et::ATALK | et::AARP => Pred::or(vec![
                Pred::eq(ty.clone(), proto),
                Pred::and(vec![llc(), appletalk_snap(&pl, proto)]),
            ]),
            p if p <= et::ETHERMTU => Pred::and(vec![llc(), Pred::eq(ld(&pl, 0, Size::Byte), p)]),
            p => Pred::eq(ty, p),
        }
    }

    /// IPv4 carries `p` in its protocol field.
    pub(crate) fn ip_proto(&self, p: u32) -> Pred {
        Pred::and(vec![
            self.linktype(et::IP),
            Pred::eq(ld(&self.off.net, 9, Size::Byte), p),
        ])
    }

    /// IPv6 carries `p` as next header, directly or after a fragment header.
    pub(crate) fn ip6_proto(&self, p: u32) -> Pred {
        let nh = ld(&self.off.net, 6, Size::Byte);
        Pred::and(vec![
            self.linktype(et::IPV6),
            Pred::or(vec![
                Pred::eq(nh.clone(), p),
                Pred::and(vec![
                    Pred::eq(nh, ipproto::FRAGMENT),
                    Pred::eq(ld(&self.off.net, 40, Size::Byte), p),
                ]),
            ]),
        ])
    }

    /// IPv4 or IPv6 carries `p`.
    pub(crate) fn ip_any_proto(&self, p: u32) -> Pred {
        Pred::or(vec![self.ip_proto(p), self.ip6_proto(p)])
    }

    /// The IPv4 packet is not a non-first fragment.
    pub(crate) fn ip_not_frag(&self) -> Pred {
        Pred::not(Pred::cmp(
            CmpOp::Set,
            ld(&self.off.net, 6, Size::Half),
            Val::Const(0x1fff),
        ))
    }

    /// Where the OSI network-layer protocol id sits, relative to the link
    /// payload: after the 3-byte LLC header on LANs, after C-HDLC's one
    /// padding byte, right away on PPP and Linux cooked captures.
    pub(crate) fn osi_nlpid_at(&self) -> u32 {
        match self.off.field {
            ProtoField::CiscoHdlc => 1,
            ProtoField::Ppp | ProtoField::Sll => 0,
            _ => 3,
        }
    }

    /// A load `k` bytes after the OSI network-layer protocol id.
    pub(crate) fn osi_load(&self, k: u32) -> Val {
        match self.link_osi_at() {
            Some(at) => ld(&at, k, Size::Byte),
            None => ld(&self.off.net, self.osi_nlpid_at() + k, Size::Byte),
        }
    }

    fn iso_proto(&self, nlpid: u32) -> Pred {
        // Frame Relay: the UI control byte and the NLPID, in one test.
        if self.off.field == ProtoField::Frelay {
            return Pred::eq(ld(&Val::Const(2), 0, Size::Half), 0x0300 | nlpid);
        }
        Pred::and(vec![
            self.linktype(et::SAP_ISONS),
            Pred::eq(self.osi_load(0), nlpid),
        ])
    }

    /// IS-IS of the PDU types `types` (the type's low five bits, 4 bytes
    /// into the IS-IS header; on Frame Relay libpcap reads it 4 bytes
    /// into the frame).
    pub(crate) fn isis_pdu(&self, types: &[u32]) -> Pred {
        let pdu = if self.off.field == ProtoField::Frelay {
            ld(&self.off.net, 4, Size::Byte)
        } else {
            self.osi_load(4)
        };
        Pred::or(
            types
                .iter()
                .map(|&t| {
                    Pred::and(vec![
                        self.iso_proto(ISO10589_ISIS),
                        mcmp(pdu.clone(), 0x1f, t),
                    ])
                })
                .collect(),
        )
    }

    /// A bare protocol name (`tcp`, `ip6`, `isis`, ...).
    pub(crate) fn proto_abbrev(&mut self, p: Proto, span: Span) -> GResult<Pred> {
        use ipproto as ipp;
        Ok(match p {
            Proto::Ip => self.linktype(et::IP),
            Proto::Ip6 => self.linktype(et::IPV6),
            Proto::Arp => self.linktype(et::ARP),
            Proto::Rarp => self.linktype(et::RARP),
            Proto::Tcp => self.ip_any_proto(ipp::TCP),
            Proto::Udp => self.ip_any_proto(ipp::UDP),
            Proto::Sctp => self.ip_any_proto(ipp::SCTP),
            Proto::Icmp => self.ip_proto(ipp::ICMP),
            Proto::Igmp => self.ip_proto(ipp::IGMP),
            Proto::Igrp => self.ip_proto(ipp::IGRP),
            Proto::Pim => self.ip_any_proto(ipp::PIM),
            Proto::Vrrp | Proto::Carp => self.ip_proto(ipp::VRRP),
            Proto::Icmp6 => self.ip6_proto(ipp::ICMPV6),
            Proto::Ah => self.ip_any_proto(ipp::AH),
            Proto::Esp => self.ip_any_proto(ipp::ESP),
            Proto::Atalk => self.linktype(et::ATALK),
            Proto::Aarp => self.linktype(et::AARP),
            Proto::Decnet => self.linktype(et::DECNET),
            Proto::Lat => self.linktype(et::LAT),
            Proto::Sca => self.linktype(et::SCA),
            Proto::Moprc => self.linktype(et::MOPRC),
            Proto::Mopdl => self.linktype(et::MOPDL),
            Proto::Iso => self.linktype(et::SAP_ISONS),
            Proto::Esis => self.iso_proto(ISO9542_ESIS),
            Proto::Isis => self.iso_proto(ISO10589_ISIS),
            Proto::Clnp => self.iso_proto(ISO8473_CLNP),
            Proto::L1 => self.isis_pdu(&[0x1a, 0x18, 0x12, 0x0f, 0x11]),
            Proto::L2 => self.isis_pdu(&[0x1b, 0x19, 0x14, 0x10, 0x11]),
            Proto::Iih => self.isis_pdu(&[0x11, 0x0f, 0x10]),
            Proto::Lsp => self.isis_pdu(&[0x12, 0x14]),
            Proto::Snp => self.isis_pdu(&[0x1b, 0x1a, 0x18, 0x19]),
            Proto::Csnp => self.isis_pdu(&[0x18, 0x19]),
            Proto::Psnp => self.isis_pdu(&[0x1a, 0x1b]),
            Proto::Stp => self.linktype(et::SAP_8021D),
            Proto::Ipx => self.linktype(et::SAP_IPX),
            Proto::Netbeui => self.linktype(et::SAP_NETBEUI),
            Proto::Link => return err(span, "'link' needs a qualifier or an index here"),
            Proto::Radio => return err(span, "'radio' is only supported on 802.11 with radiotap"),
        })
    }

    /// Keyword primitives.
    pub(crate) fn other(&mut self, o: &Other, span: Span) -> GResult<Pred> {
        match o {
            Other::Less(n) => Ok(Pred::not(Pred::cmp(CmpOp::Gt, Val::Len, Val::Const(*n)))),
            Other::Greater(n) => Ok(Pred::cmp(CmpOp::Ge, Val::Len, Val::Const(*n))),
            Other::Byte(idx, op, v) => {
                if *v > 255 {
                    return err(span, format!("byte argument {v} greater than maximum 255"));
                }
                let b = ld(&self.link_header(), *idx, Size::Byte);
                Ok(match op {
                    ByteOp::Eq => Pred::eq(b, *v),
                    ByteOp::Lt => Pred::not(Pred::cmp(CmpOp::Ge, b, Val::Const(*v))),
                    ByteOp::Gt => Pred::cmp(CmpOp::Gt, b, Val::Const(*v)),
                    // `and #v; jeq #0`, negated: libpcap's peephole pass
                    // makes it `jset #v` (which never holds for 0).
                    ByteOp::And => bit_set(b, *v),
                    ByteOp::Or => Pred::not(Pred::eq(Val::bin(BinOp::Or, b, Val::Const(*v)), 0)),
                })
            }
            Other::Broadcast(p) => self.broadcast(*p, span),
            Other::Multicast(p) => self.multicast(*p, span),
            Other::Vlan(id) => self.vlan(*id, span),
            Other::Mpls(label) => self.mpls(*label, span),
            Other::Pppoed => Ok(self.linktype(et::PPPOED)),
            Other::Pppoes(sess) => self.pppoes(*sess, span),
            Other::Llc(sub) => self.llc(*sub, span),
            Other::Wlan(_, w) => self.wlan_frame(*w, span),
            Other::Geneve(vni) => self.geneve(*vni, span),
            Other::Atm(a) => self.atm(*a, span),
            Other::AtmField(f, list) => self.atm_field(*f, list, span),
            Other::Mtp2(t) => self.mtp2(*t, span),
            Other::Mtp3Field(f, list) => self.mtp3_field(*f, list, span),
            Other::PfIfname(_)
            | Other::PfRuleset(_)
            | Other::PfRulenum(_)
            | Other::PfSubrulenum(_)
            | Other::PfReason(_)
            | Other::PfAction(_) => self.pflog_field(o, span),
            Other::Vxlan(vni) => self.vxlan(*vni, span),
            Other::Inbound | Other::Outbound => {
                let out = matches!(o, Other::Outbound);
                let dir = match self.off.link_dlt {
                    LinkType::LINUX_SLL => ld(&Val::Const(0), 0, Size::Half),
                    LinkType::LINUX_SLL2 => ld(&Val::Const(0), 10, Size::Byte),
                    _ => return self.link_direction(out, span),
                };
                const PACKET_OUTGOING: u32 = 4;
                let p = Pred::eq(dir, PACKET_OUTGOING);
                Ok(if out { p } else { Pred::not(p) })
            }
            // The current link's (a `pppoes` before it makes it PPP).
            Other::Ifindex(n) => match self.off.link_dlt {
                LinkType::LINUX_SLL2 => Ok(Pred::eq(ld(&Val::Const(0), 4, Size::Word), *n)),
                dlt => err(span, format!("'ifindex' not supported on {dlt}")),
            },
        }
    }

    fn broadcast(&self, p: Option<Proto>, span: Span) -> GResult<Pred> {
        match p {
            None | Some(Proto::Link) if self.off.field == ProtoField::Ieee80211 => {
                Ok(self.wlan_broadcast())
            }
            None | Some(Proto::Link) if self.link_cast(false, span).is_some() => {
                self.link_cast(false, span).expect("checked")
            }
            None | Some(Proto::Link) => match &self.off.macs {
                Some((_, dst)) => Ok(self.mac_eq(dst, [0xff; 6])),
                None => err(span, format!("not a broadcast link ({})", self.off.dlt)),
            },
            Some(Proto::Ip) => match self.netmask {
                // The destination's host part all zeros or all ones.
                Some(mask) => {
                    let dst = || ld(&self.off.net, 16, Size::Word);
                    Ok(Pred::and(vec![
                        self.linktype(et::IP),
                        Pred::or(vec![
                            mcmp(dst(), !mask, 0),
                            mcmp(dst(), !mask, !mask),
                        ]),
                    ]))
                }
                None => err(
                    span,
                    "netmask not known, so 'ip broadcast' not supported (use 'ip dst host a.b.c.255')",
                ),
            },
            Some(_) => err(span, "only link-layer/IP broadcast filters supported"),
        }
    }

    fn multicast(&self, p: Option<Proto>, span: Span) -> GResult<Pred> {
        match p {
            None | Some(Proto::Link) if self.off.field == ProtoField::Ieee80211 => {
                Ok(self.wlan_multicast())
            }
            None | Some(Proto::Link) if self.link_cast(true, span).is_some() => {
                self.link_cast(true, span).expect("checked")
            }
            None | Some(Proto::Link) => match &self.off.macs {
                Some((_, dst)) => Ok(Pred::cmp(CmpOp::Set, ld(dst, 0, Size::Byte), Val::Const(1))),
                None => err(span, format!("not a multicast link ({})", self.off.dlt)),
            },
            Some(Proto::Ip) => Ok(Pred::and(vec![
                self.linktype(et::IP),
                mcmp(ld(&self.off.net, 16, Size::Byte), 0xf0, 0xe0),
            ])),
            Some(Proto::Ip6) => Ok(Pred::and(vec![
                self.linktype(et::IPV6),
                Pred::eq(ld(&self.off.net, 24, Size::Byte), 0xff),
            ])),
            Some(_) => err(span, "only link-layer/IP multicast filters supported"),
        }
    }

    /// Compare 6 bytes at `at` with a MAC address (last four bytes first, as libpcap does).
    pub(crate) fn mac_eq(&self, at: &Val, mac: [u8; 6]) -> Pred {
        let hi = u16::from_be_bytes([mac[0], mac[1]]) as u32;
        let lo = u32::from_be_bytes([mac[2], mac[3], mac[4], mac[5]]);
        Pred::and(vec![
            Pred::eq(ld(at, 2, Size::Word), lo),
            Pred::eq(ld(at, 0, Size::Half), hi),
        ])
    }

    fn require_ethernet_like(&self, what: &str, span: Span) -> GResult<()> {
        if self.off.field != ProtoField::EtherType {
            return err(span, format!("'{what}' not supported on {}", self.off.dlt));
        }
        Ok(())
    }

    fn vlan(&mut self, id: Option<u32>, span: Span) -> GResult<Pred> {
        // libpcap allows VLAN tags in 802.11 frames, but not behind PPI.
        let wlan = self.off.field == ProtoField::Ieee80211 && self.off.dlt != LinkType::PPI;
        if !wlan {
            self.require_ethernet_like("vlan", span)?;
        }
        if let Some(id) = id {
            if id > 4095 {
                return err(span, format!("VLAN tag {id} greater than maximum 4095"));
            }
        }
        if self.off.mpls_depth > 0 {
            return err(span, "no VLAN match after MPLS");
        }
        let at = self.off.proto_at.clone().expect("Ethernet type field");
        let ty = ld(&at, 0, Size::Half);
        let mut parts = vec![Pred::or(
            et::VLAN_TPIDS
                .iter()
                .map(|&t| match wlan {
                    true => self.linktype(t),
                    false => Pred::eq(ty.clone(), t),
                })
                .collect(),
        )];
        if let Some(id) = id {
            parts.push(mcmp(ld(&self.off.net, 0, Size::Half), 0xfff, id));
        }
        self.off.proto_at = Some(Val::plus(at, 4));
        self.off.net = Val::plus(self.off.net.clone(), 4);
        self.off.vlan_depth += 1;
        Ok(Pred::and(parts))
    }

    fn mpls(&mut self, label: Option<u32>, span: Span) -> GResult<Pred> {
        if let Some(l) = label {
            if l > 0xfffff {
                return err(span, format!("MPLS label {l} greater than maximum 1048575"));
            }
        }
        let first = if self.off.mpls_depth > 0 {
            // The previous label must not be the bottom of the stack.
            Pred::not(bit_set(ld(&self.off.net, 0, Size::Byte).sub_off(2), 1))
        } else {
            match self.off.field {
                ProtoField::EtherType | ProtoField::CiscoHdlc => {
                    let at = self.off.proto_at.clone().expect("type field");
                    Pred::eq(ld(&at, 0, Size::Half), et::MPLS)
                }
                ProtoField::Ppp
                    if !matches!(
                        self.off.link_dlt,
                        LinkType::PPP_ETHER | LinkType::PPP_PPPD | LinkType::PPP_SERIAL
                    ) =>
                {
                    let at = self.off.proto_at.clone().expect("PPP protocol field");
                    Pred::eq(ld(&at, 0, Size::Half), 0x0281)
                }
                _ => return err(span, format!("no MPLS support for {}", self.off.dlt)),
            }
        };
        let mut parts = vec![first];
        if let Some(l) = label {
            parts.push(mcmp(ld(&self.off.net, 0, Size::Word), 0xfffff000, l << 12));
        }
        self.off.net = Val::plus(self.off.net.clone(), 4);
        self.off.mpls_depth += 1;
        Ok(Pred::and(parts))
    }

    /// `pppoes [id]`: the link carries a PPPoE session (on any link that
    /// names its payload: libpcap master tests the link for the PPPoE
    /// session type, false where it cannot carry one). After it, the link
    /// is PPP without address and control bytes.
    fn pppoes(&mut self, sess: Option<u32>, span: Span) -> GResult<Pred> {
        if let Some(s) = sess {
            if s > 0xffff {
                return err(
                    span,
                    format!("PPPoE session number {s} greater than maximum 65535"),
                );
            }
        }
        let mut parts = vec![self.linktype(et::PPPOES)];
        self.wlan_header_unset = false;
        if let Some(s) = sess {
            parts.push(Pred::eq(ld(&self.off.net, 2, Size::Half), s));
        }
        // After the 6-byte PPPoE header comes a PPP header, which is now
        // the link header (`link[...]`, `byte` count from it).
        self.off.link = Val::plus(self.off.net.clone(), 6);
        self.off.field = ProtoField::Ppp;
        self.off.proto_at = Some(Val::plus(self.off.net.clone(), 6));
        self.off.net = Val::plus(self.off.net.clone(), 8);
        self.off.macs = None;
        self.off.link_dlt = LinkType::PPP;
        Ok(Pred::and(parts))
    }

    fn llc(&self, sub: Option<Llc>, span: Span) -> GResult<Pred> {
        if let Some(r) = self.link_llc(span) {
            let (base, llc) = r?;
            return Ok(Pred::and(vec![base, llc_control(&llc, sub)]));
        }
        // The LLC header is the link payload: MPLS labels move the network
        // header, not it.
        let payload = Val::plus(
            self.off.net.clone(),
            (4 * self.off.mpls_depth).wrapping_neg(),
        );
        let base = match self.off.field {
            ProtoField::EtherType => {
                let at = self.off.proto_at.clone().expect("type field");
                let ty = ld(&at, 0, Size::Half);
                Pred::and(vec![
                    Pred::not(Pred::cmp(CmpOp::Gt, ty, Val::Const(et::ETHERMTU))),
                    Pred::not(Pred::eq(ld(&payload, 0, Size::Half), 0xffff)),
                ])
            }
            ProtoField::Ieee80211 => return Ok(self.wlan_llc(sub)),
            _ => {
                return err(
                    span,
                    format!("'llc' not supported on {}", self.off.link_dlt),
                )
            }
        };
        let ctl = ld(&payload, 2, Size::Byte);
        let test = match sub {
            None => return Ok(base),
            Some(Llc::I) => Pred::not(Pred::cmp(CmpOp::Set, ctl, Val::Const(1))),
            Some(Llc::S) => mcmp(ctl, 3, 1),
            Some(Llc::U) => mcmp(ctl, 3, 3),
            Some(Llc::SSub(v)) => mcmp(ctl, 0x0f, v),
            Some(Llc::USub(v)) => mcmp(ctl, 0xef, v),
        };
        Ok(Pred::and(vec![base, test]))
    }
}

/// The test of an LLC control byte (2 bytes into the LLC header at `llc`).
fn llc_control(llc: &Val, sub: Option<Llc>) -> Pred {
    let ctl = ld(llc, 2, Size::Byte);
    match sub {
        None => Pred::True,
        Some(Llc::I) => Pred::not(Pred::cmp(CmpOp::Set, ctl, Val::Const(1))),
        Some(Llc::S) => mcmp(ctl, 3, 1),
        Some(Llc::U) => mcmp(ctl, 3, 3),
        Some(Llc::SSub(v)) => mcmp(ctl, 0x0f, v),
        Some(Llc::USub(v)) => mcmp(ctl, 0xef, v),
    }
}

/// Small helpers on values used by the generator.
pub(crate) trait ValExt {
    /// The same load, `k` bytes earlier.
    fn sub_off(self, k: u32) -> Val;
}

impl ValExt for Val {
    fn sub_off(self, k: u32) -> Val {
        match self {
            Val::Load { base, offset, size } if offset >= k => Val::Load {
                base,
                offset: offset - k,
                size,
            },
            Val::Load { base, offset, size } => Val::Load {
                base: Box::new(Val::bin(BinOp::Sub, *base, Val::Const(k - offset))),
                offset: 0,
                size,
            },
            v => v,
        }
    }
}
