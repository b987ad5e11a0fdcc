//! Link types beyond Ethernet and the IP-only links: 802.2 LLC links (FDDI,
//! token ring, IP over Fibre Channel, ATM RFC 1483), SunATM, ARCnet, BSD/OS
//! PPP, SLIP, pflog, ipnet, Frame Relay, enc, LocalTalk, the Juniper
//! family, and the links that have no protocol field at all (MTP2, BACnet
//! MS/TP, USB, Bluetooth, CAN and the other raw-byte links).
//!
//! Each function here answers one question the generator asks of the link
//! ("does it carry protocol P", "where is the OSI protocol id", "which way
//! did the packet go") for the links whose answer is not Ethernet's.

use super::family::Field;
use super::proto::{ethertype as et, ld, mcmp, ppp_proto};
use super::{err, GResult, Gen};
use crate::ast::{Dir, Span};
use crate::link::{Layout, LinkType, ProtoField};
use sluice_ir::{CmpOp, Pred, Size, Val};

/// ARCnet protocol ids (RFC 1201 numbering).
mod arctype {
    pub const IP: u32 = 0xd4;
    pub const ARP: u32 = 0xd5;
    pub const REVARP: u32 = 0xd6;
    pub const ATALK: u32 = 0xdd;
    pub const INET6: u32 = 0xc4;
}

/// SunATM: the traffic type in the low nibble of the first byte.
const SUNATM_LANE: u32 = 1;
const SUNATM_LLC: u32 = 2;

/// Where libpcap reads the OSI protocol id on a Juniper link: its link
/// payload offset plus its "no SNAP" network offset, where either may be
/// libpcap's "not set" marker (-1), added modulo 2^32.
fn juniper_osi_at(dlt: LinkType) -> u32 {
    use LinkType::*;
    match dlt {
        JUNIPER_MFR | JUNIPER_MLFR | JUNIPER_MLPPP | JUNIPER_PPP | JUNIPER_CHDLC
        | JUNIPER_FRELAY => 3,
        JUNIPER_PPPOE_ATM => 5,
        JUNIPER_GGSN | JUNIPER_MONITOR => 11,
        JUNIPER_ATM1 => 14,
        JUNIPER_ATM2 => 18,
        JUNIPER_ETHER | JUNIPER_PPPOE => 35,
        _ => 0u32.wrapping_sub(2),
    }
}

impl Gen {
    /// Set up offsets that the fixed layout table cannot express.
    pub(crate) fn link_setup(&mut self) {
        if self.off.dlt == LinkType::PFLOG {
            self.off.net = self.pflog_payload();
        }
    }

    /// Start of the 802.2 LLC header on an LLC link: the SNAP type field is
    /// 6 bytes into it.
    fn llc_start(&self) -> Val {
        match self
            .off
            .proto_at
            .clone()
            .expect("LLC links have a type field")
        {
            Val::Const(c) => Val::Const(c - 6),
            v => Val::bin(sluice_ir::BinOp::Sub, v, Val::Const(6)),
        }
    }

    /// libpcap's test of an 802.2 LLC header for `proto`: SAPs compared in
    /// the DSAP (both SAPs for IP, ISO and NetBEUI), AppleTalk by its SNAP
    /// header, other Ethernet types where a SNAP header would carry them.
    fn llc_linktype(&self, proto: u32) -> Pred {
        let llc = self.llc_start();
        match proto {
            et::SAP_IP | et::SAP_ISONS | et::SAP_NETBEUI => {
                Pred::eq(ld(&llc, 0, Size::Half), proto << 8 | proto)
            }
            et::SAP_IPX => Pred::eq(ld(&llc, 0, Size::Byte), et::SAP_IPX),
            et::ATALK => Pred::and(vec![
                Pred::eq(ld(&llc, 4, Size::Word), 0x0007_809b),
                Pred::eq(ld(&llc, 0, Size::Word), 0xaaaa_0308),
            ]),
            p if p <= et::ETHERMTU => Pred::eq(ld(&llc, 0, Size::Byte), p),
            p => Pred::eq(ld(&llc, 6, Size::Half), p),
        }
    }

    fn sunatm_kind(&self, kind: u32) -> Pred {
        mcmp(ld(&Val::Const(0), 0, Size::Byte), 0xf, kind)
    }

    /// Not a LAN-emulation control frame (their first two bytes are 0xff00).
    fn not_le_control(&self) -> Pred {
        Pred::not(Pred::eq(ld(&Val::Const(4), 0, Size::Half), 0xff00))
    }

    /// "The link carries `proto`" for the link types of this module.
    pub(crate) fn link_linktype(&self, proto: u32) -> Pred {
        let o = &self.off;
        let at = || o.proto_at.clone().expect("protocol field");
        match o.field {
            ProtoField::Llc => self.llc_linktype(proto),
            ProtoField::SunAtm => {
                Pred::and(vec![self.sunatm_kind(SUNATM_LLC), self.llc_linktype(proto)])
            }
            ProtoField::LaneEther => {
                Pred::and(vec![self.not_le_control(), self.ether_linktype(proto)])
            }
            ProtoField::PppBsdos => {
                let f = ld(&at(), 0, Size::Half);
                if proto == et::IP {
                    Pred::or(vec![
                        Pred::eq(f.clone(), 0x21),
                        Pred::eq(f.clone(), 0x2d),
                        Pred::eq(f, 0x2f),
                    ])
                } else {
                    Pred::eq(f, ppp_proto(proto))
                }
            }
            ProtoField::SlipIp => match proto {
                et::IP => mcmp(ld(&o.link, 0, Size::Byte), 0xf0, 0x40),
                et::IPV6 => mcmp(ld(&o.link, 0, Size::Byte), 0xf0, 0x60),
                _ => Pred::False,
            },
            ProtoField::FamilyByte if o.dlt == LinkType::IPNET => {
                // Solaris: AF_INET is 2, AF_INET6 26.
                let f = ld(&at(), 0, Size::Byte);
                match proto {
                    et::IP => Pred::eq(f, 2),
                    et::IPV6 => Pred::eq(f, 26),
                    _ => Pred::False,
                }
            }
            ProtoField::FamilyByte => self.family_linktype(proto, &at(), Field::Byte),
            ProtoField::EncFamily => self.family_linktype(proto, &at(), Field::HostWord),
            ProtoField::Frelay => {
                let f = ld(&at(), 0, Size::Half);
                match proto {
                    et::IP => Pred::eq(f, 0x03cc),
                    et::IPV6 => Pred::eq(f, 0x038e),
                    et::SAP_ISONS => Pred::or(vec![
                        Pred::eq(f.clone(), 0x0381),
                        Pred::eq(f.clone(), 0x0382),
                        Pred::eq(f, 0x0383),
                    ]),
                    _ => Pred::False,
                }
            }
            ProtoField::PlainEtherType => Pred::eq(ld(&at(), 0, Size::Half), proto),
            ProtoField::OnlyAtalk => {
                if proto == et::ATALK {
                    Pred::True
                } else {
                    Pred::False
                }
            }
            ProtoField::Arcnet => {
                let t = match proto {
                    et::IP => arctype::IP,
                    et::ARP => arctype::ARP,
                    et::RARP => arctype::REVARP,
                    et::ATALK => arctype::ATALK,
                    et::IPV6 => arctype::INET6,
                    _ => return Pred::False,
                };
                Pred::eq(ld(&at(), 0, Size::Byte), t)
            }
            ProtoField::JuniperCookie => {
                mcmp(ld(&Val::Const(0), 0, Size::Word), 0xffff_ff00, 0x4d47_4300)
            }
            _ => {
                self.refuse(format!(
                    "{} link-layer type filtering not implemented",
                    self.off.dlt
                ));
                Pred::False
            }
        }
    }

    /// Where the OSI network-layer protocol id is, for the links of this
    /// module (`None`: ask the general rule).
    pub(crate) fn link_osi_at(&self) -> Option<Val> {
        match self.off.field {
            ProtoField::Llc | ProtoField::SunAtm => Some(Val::plus(self.llc_start(), 3)),
            // 802.11: after the 3-byte LLC header, as on the LANs.
            ProtoField::Ieee80211 => Some(Val::plus(self.wlan_llc_at(), 3)),
            ProtoField::Frelay => Some(Val::Const(3)),
            ProtoField::PppBsdos | ProtoField::PlainEtherType => Some(self.off.net.clone()),
            ProtoField::JuniperCookie => Some(Val::Const(juniper_osi_at(self.off.dlt))),
            _ => None,
        }
    }

    /// `inbound` / `outbound` on links whose header records the direction.
    pub(crate) fn link_direction(&self, outbound: bool, span: Span) -> GResult<Pred> {
        let b = |off: u32| ld(&Val::Const(0), off, Size::Byte);
        let pick = |inb: Pred, outb: Pred| if outbound { outb } else { inb };
        Ok(match self.off.link_dlt {
            LinkType::SLIP | LinkType::PPP_PPPD => pick(Pred::eq(b(0), 0), Pred::eq(b(0), 1)),
            LinkType::IPNET => {
                let h = ld(&Val::Const(0), 2, Size::Half);
                pick(Pred::eq(h.clone(), 2), Pred::eq(h, 1))
            }
            LinkType::PFLOG => pick(Pred::eq(b(60), 1), Pred::eq(b(60), 2)),
            // Juniper: the flags byte after the 3-byte magic cookie.
            dlt if Layout::of(dlt).field == ProtoField::JuniperCookie => {
                let set = Pred::cmp(CmpOp::Set, b(3), Val::Const(1));
                pick(set.clone(), Pred::not(set))
            }
            LinkType::DSA_TAG_BRCM => pick(
                Pred::not(Pred::cmp(CmpOp::Set, b(12), Val::Const(0xe0))),
                mcmp(b(12), 0xe0, 0x20),
            ),
            LinkType::DSA_TAG_DSA => pick(
                Pred::not(Pred::cmp(CmpOp::Set, b(12), Val::Const(0x40))),
                mcmp(b(12), 0xc0, 0x40),
            ),
            dlt => {
                return err(
                    span,
                    format!("not a live capture, 'inbound'/'outbound' not supported on {dlt}"),
                )
            }
        })
    }

    /// Link broadcast/multicast on links whose addresses are not 6-byte
    /// MACs at fixed places (`None`: the general rule).
    pub(crate) fn link_cast(&self, multicast: bool, span: Span) -> Option<GResult<Pred>> {
        let b = |off: u32| ld(&Val::Const(0), off, Size::Byte);
        Some(match self.off.field {
            ProtoField::Arcnet => Ok(Pred::eq(b(1), 0)),
            _ if self.off.dlt == LinkType::BACNET_MS_TP => {
                if multicast {
                    err(span, "not a multicast link (BACNET_MS_TP)")
                } else {
                    Ok(Pred::eq(b(3), 0xff))
                }
            }
            ProtoField::LaneEther => {
                let (_, dst) = self.off.macs.clone().expect("LANE has MACs");
                let test = if multicast {
                    Pred::cmp(CmpOp::Set, ld(&dst, 0, Size::Byte), Val::Const(1))
                } else {
                    self.mac_eq(&dst, [0xff; 6])
                };
                Ok(Pred::and(vec![self.not_le_control(), test]))
            }
            _ => return None,
        })
    }

    /// `link host $xx`: an ARCnet (or BACnet MS/TP) station address.
    pub(crate) fn arcnet_host(&self, addr: u8, dir: Option<Dir>, span: Span) -> GResult<Pred> {
        let (src, dst) = match self.off.dlt {
            LinkType::ARCNET | LinkType::ARCNET_LINUX => (0, 1),
            LinkType::BACNET_MS_TP => (4, 3),
            _ => return err(span, "ARCnet addresses are only supported on ARCnet links"),
        };
        let t = |off: u32| Pred::eq(ld(&Val::Const(0), off, Size::Byte), addr as u32);
        Ok(match dir {
            Some(Dir::Src) => t(src),
            Some(Dir::Dst) => t(dst),
            Some(Dir::SrcAndDst) => Pred::and(vec![t(src), t(dst)]),
            None | Some(Dir::SrcOrDst) => Pred::or(vec![t(src), t(dst)]),
            Some(_) => return err(span, "this direction is only supported on 802.11"),
        })
    }

    /// `llc` on links of this module (`None`: the general rule).
    pub(crate) fn link_llc(&self, span: Span) -> Option<GResult<(Pred, Val)>> {
        Some(Ok(match self.off.link_dlt {
            LinkType::FDDI | LinkType::IEEE802 | LinkType::ATM_RFC1483 => {
                (Pred::True, self.llc_start())
            }
            LinkType::SUNATM if self.off.field == ProtoField::SunAtm => {
                (self.sunatm_kind(SUNATM_LLC), self.llc_start())
            }
            LinkType::ATM_CLIP
            | LinkType::IP_OVER_FC
            | LinkType::NETANALYZER
            | LinkType::NETANALYZER_TRANSPARENT => {
                return Some(err(
                    span,
                    format!("'llc' not supported on {}", self.off.link_dlt),
                ))
            }
            _ => return None,
        }))
    }

    /// `lane`: SunATM LAN emulation; later primitives see the Ethernet frame
    /// after the 2-byte LE header.
    pub(crate) fn lane(&mut self) -> Pred {
        let p = self.sunatm_kind(SUNATM_LANE);
        self.off.field = ProtoField::LaneEther;
        self.off.macs = Some((Val::Const(4 + 2 + 6), Val::Const(4 + 2)));
        self.off.proto_at = Some(Val::Const(4 + 2 + 12));
        self.off.net = Val::Const(4 + 2 + 14);
        p
    }
}
