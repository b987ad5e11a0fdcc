//! IEEE 802.11 link types: bare 802.11 (`IEEE802_11`) and 802.11 after a
//! radio header (radiotap, AVS, Prism, PPI), with libpcap master's meaning.
//!
//! Two offsets vary per packet: where the 802.11 header starts (after the
//! radio header, whose length the packet gives) and where its payload, the
//! LLC header, starts (24 bytes on, 2 more for QoS data frames, rounded up
//! to 4 when radiotap says the driver padded it). libpcap computes both in a
//! prologue that runs before the rest of the program, and only when some
//! primitive needs them; a packet too short for the prologue's loads
//! rejects whatever the rest would say. Here the offsets are branch-free
//! values from 0/1 indicators (a conditional load reads a harmless address
//! when its condition is false), and [`Gen::wlan_finish`] prepends the
//! prologue's loads as tests when the filter used the offsets.
//!
//! ```
//! use sluice_pcap::{compile, link::LinkType};
//! let f = compile("wlan type data", LinkType::IEEE802_11, 65535).unwrap();
//! assert_eq!(f.run(&[0x08, 0x01], 2), 65535);
//! assert_eq!(f.run(&[0x80, 0x00], 2), 0);
//! ```

use super::proto::{ethertype as et, ld, mcmp};
use super::{err, GResult, Gen, Offsets};
use crate::ast::{Dir, Expr, Llc, Span, Wlan};
use crate::link::{LinkType, ProtoField};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};
use std::cell::Cell;

/// Which variable offsets a filter used, so which prologue loads libpcap runs.
#[derive(Debug, Default)]
pub(crate) struct Uses {
    /// The start of the 802.11 header (after a radio header).
    header: Cell<bool>,
    /// The start of the 802.11 payload.
    payload: Cell<bool>,
}

/// PPI's per-packet DLT field (little-endian 105 at bytes 4..8), as loaded big-endian.
const PPI_DLT_80211: u32 = 0x6900_0000;
/// Prism headers that are really AVS headers start with this (masked by 0xfffff000).
const AVS_MAGIC: u32 = 0x8021_1000;
/// A Prism header's fixed length.
const PRISM_LEN: u32 = 144;

fn bin(op: BinOp, a: Val, b: Val) -> Val {
    Val::bin(op, a, b)
}

fn k(v: u32) -> Val {
    Val::Const(v)
}

/// 1 if `x` (less than `2^bits`) equals `v`, else 0.
fn eq_ind(x: Val, v: u32, bits: u32) -> Val {
    let differs = bin(
        BinOp::Shr,
        bin(BinOp::Add, bin(BinOp::Xor, x, k(v)), k((1 << bits) - 1)),
        k(bits),
    );
    bin(BinOp::Xor, differs, k(1))
}

/// A test that is always true but performs the load.
fn touch(v: Val) -> Pred {
    Pred::cmp(CmpOp::Ge, v, k(0))
}

fn abs(off: u32, size: Size) -> Val {
    Val::load_abs(off, size)
}

/// Is the link type one of the 802.11 family?
pub(crate) fn is_wlan(dlt: LinkType) -> bool {
    matches!(
        dlt,
        LinkType::IEEE802_11
            | LinkType::IEEE802_11_RADIO
            | LinkType::IEEE802_11_RADIO_AVS
            | LinkType::PRISM_HEADER
            | LinkType::PPI
    )
}

/// Which per-packet layout a filter is generated for: libpcap computes the
/// offsets at run time; sluice generates the filter once per layout that
/// changes more than arithmetic on loaded bytes, and lets the packet pick.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Variant {
    /// Radiotap: the driver padded the 802.11 header to a multiple of 4.
    pub padded: bool,
    /// Prism: the header is really an AVS header.
    pub avs: bool,
}

/// The offsets of an 802.11 link type for one layout variant.
pub(crate) fn offsets(dlt: LinkType, v: Variant) -> Offsets {
    let link = header_start(dlt, v);
    let payload = payload_start(&link, v.padded);
    Offsets {
        field: ProtoField::Ieee80211,
        proto_at: Some(Val::plus(payload.clone(), 6)),
        net: Val::plus(payload, 8),
        link,
        macs: None,
        mpls_depth: 0,
        vlan_depth: 0,
        tunnels: 0,
        dlt,
        link_dlt: dlt,
    }
}

/// Where the 802.11 header starts: after the radio header.
fn header_start(dlt: LinkType, v: Variant) -> Val {
    match dlt {
        // Little-endian 16-bit length at bytes 2..4.
        LinkType::IEEE802_11_RADIO | LinkType::PPI => bin(
            BinOp::Or,
            bin(BinOp::Shl, abs(3, Size::Byte), k(8)),
            abs(2, Size::Byte),
        ),
        // Big-endian 32-bit length at bytes 4..8.
        LinkType::IEEE802_11_RADIO_AVS => abs(4, Size::Word),
        LinkType::PRISM_HEADER if v.avs => abs(4, Size::Word),
        LinkType::PRISM_HEADER => k(PRISM_LEN),
        _ => k(0),
    }
}

/// A Prism capture whose header is an AVS header (loads bytes 0..4).
fn prism_is_avs() -> Pred {
    mcmp(abs(0, Size::Word), 0xffff_f000, AVS_MAGIC)
}

/// Where the 802.11 payload (the LLC header) starts, given the header start
/// and, on radiotap, whether the driver padded the header to a multiple of 4.
fn payload_start(lh: &Val, padded: bool) -> Val {
    let fc = ld(lh, 0, Size::Byte);
    // QoS data frames have 2 more bytes.
    let qos2 = bin(
        BinOp::Shl,
        eq_ind(bin(BinOp::And, fc, k(0x8c)), 0x88, 8),
        k(1),
    );
    let m = Val::plus(bin(BinOp::Add, lh.clone(), qos2), 24);
    if padded {
        bin(BinOp::And, Val::plus(m, 3), k(!3))
    } else {
        m
    }
}

/// Radiotap: a data frame whose first presence word has the flags field
/// and no extension, with the flags byte (after the TSFT field when present)
/// saying the payload is padded to a multiple of 4. Loads what libpcap's
/// prologue loads, in its order.
fn radiotap_padded(fc: &Val) -> Pred {
    let present = abs(4, Size::Word);
    let set = |m: u32| Pred::cmp(CmpOp::Set, present.clone(), k(m));
    let pad = |at: u32| Pred::cmp(CmpOp::Set, abs(at, Size::Byte), k(0x20));
    Pred::and(vec![
        mcmp(fc.clone(), 0x0c, 0x08),
        set(0x0200_0000),
        Pred::not(set(0x80)),
        Pred::or(vec![
            Pred::and(vec![set(0x0100_0000), pad(16)]),
            Pred::and(vec![Pred::not(set(0x0100_0000)), pad(8)]),
        ]),
    ])
}

impl Gen {
    /// Whether the filter has read the 802.11 header's and payload's
    /// offsets so far.
    pub(crate) fn wlan_used(&self) -> (bool, bool) {
        (self.wlan_uses.header.get(), self.wlan_uses.payload.get())
    }

    /// The start of the 802.11 header, noting that the filter uses it.
    ///
    /// Before a `pppoes`, `geneve` or `vxlan` on a link with a radio header
    /// libpcap reads it from a register its prologue never writes (the
    /// prologue fills the registers those keywords moved the link header
    /// to), so at offset 0 ([`Gen::wlan_unset`]).
    pub(crate) fn wlan_header(&self) -> Val {
        self.wlan_uses.header.set(true);
        if self.wlan_header_unset {
            return k(0);
        }
        self.off.link.clone()
    }

    /// Where libpcap reads the 802.11 offsets at 0 until the first
    /// `pppoes`, `geneve` or `vxlan` of `e` (including that keyword's own
    /// link test): the header start when it follows a radio header, and,
    /// for the tunnels (which move the payload to new registers too), the
    /// payload start. Sets the flags and the offsets accordingly.
    pub(crate) fn wlan_unset(&mut self, e: &Expr) {
        fn first(e: &Expr) -> Option<bool> {
            match e {
                Expr::And(v) | Expr::Or(v) => v.iter().find_map(first),
                Expr::Not(x, _) => first(x),
                Expr::Other(crate::ast::Other::Pppoes(_), _) => Some(false),
                Expr::Other(crate::ast::Other::Geneve(_) | crate::ast::Other::Vxlan(_), _) => {
                    Some(true)
                }
                _ => None,
            }
        }
        let dlt = self.off.dlt;
        let Some(tunnel) = first(e).filter(|_| is_wlan(dlt)) else {
            return;
        };
        self.wlan_header_unset = dlt != LinkType::IEEE802_11;
        if tunnel {
            self.wlan_payload_unset = true;
            self.off.proto_at = Some(k(6));
            self.off.net = k(8);
        }
    }

    /// The start of the current link header (`link[...]`, `byte`): on
    /// 802.11 links after the radio header, noting that the filter uses it.
    pub(crate) fn link_header(&self) -> Val {
        if self.off.field == ProtoField::Ieee80211 {
            self.wlan_header()
        } else {
            self.off.link.clone()
        }
    }

    /// The start of the LLC header, noting that the filter uses it.
    pub(crate) fn wlan_llc_at(&self) -> Val {
        self.wlan_uses.header.set(true);
        self.wlan_uses.payload.set(true);
        if self.wlan_payload_unset {
            return k(4 * self.off.vlan_depth);
        }
        Val::plus(
            payload_start(&self.off.link, self.wlan_variant.padded),
            4 * self.off.vlan_depth,
        )
    }

    fn fc(&self) -> Val {
        ld(&self.wlan_header(), 0, Size::Byte)
    }

    fn flags(&self) -> Val {
        ld(&self.wlan_header(), 1, Size::Byte)
    }

    fn data_frame(&self) -> Pred {
        mcmp(self.fc(), 0x0c, 0x08)
    }

    /// Refuse 802.11 primitives on other links.
    fn require_wlan(&self, what: &str, span: Span) -> GResult<()> {
        if self.off.field != ProtoField::Ieee80211 {
            return err(
                span,
                format!("{what} supported only on 802.11 ({} here)", self.off.dlt),
            );
        }
        Ok(())
    }

    /// "The 802.11 frame carries `proto`": a data frame whose LLC header
    /// names it (a SNAP header's type for Ethernet types).
    pub(crate) fn wlan_linktype(&self, proto: u32) -> Pred {
        let data = self.data_frame();
        let llc = self.wlan_llc_at();
        let test = match proto {
            0x06 | et::SAP_ISONS | et::SAP_NETBEUI => {
                Pred::eq(ld(&llc, 0, Size::Half), proto << 8 | proto)
            }
            et::SAP_IPX => Pred::eq(ld(&llc, 0, Size::Byte), et::SAP_IPX),
            et::ATALK => Pred::and(vec![
                Pred::eq(ld(&llc, 4, Size::Word), 0x0007_809b),
                Pred::eq(ld(&llc, 0, Size::Word), 0xaaaa_0308),
            ]),
            p if p <= et::ETHERMTU => Pred::eq(ld(&llc, 0, Size::Byte), p),
            p => {
                let at = self.off.proto_at.clone().expect("802.11 SNAP type");
                Pred::eq(ld(&at, 0, Size::Half), p)
            }
        };
        Pred::and(vec![data, test])
    }

    /// `llc [sub]` on 802.11: data frames (all carry an LLC header).
    pub(crate) fn wlan_llc(&self, sub: Option<Llc>) -> Pred {
        let base = self.data_frame();
        let Some(sub) = sub else { return base };
        let ctl = ld(&self.wlan_llc_at(), 2, Size::Byte);
        let test = match sub {
            Llc::I => Pred::not(Pred::cmp(CmpOp::Set, ctl, k(1))),
            Llc::S => mcmp(ctl, 3, 1),
            Llc::U => mcmp(ctl, 3, 3),
            Llc::SSub(v) => mcmp(ctl, 0x0f, v),
            Llc::USub(v) => mcmp(ctl, 0xef, v),
        };
        Pred::and(vec![base, test])
    }

    /// `type`, `subtype`, `dir`.
    pub(crate) fn wlan_frame(&self, w: Wlan, span: Span) -> GResult<Pred> {
        self.require_wlan("802.11 link-layer types and directions", span)?;
        Ok(match w {
            Wlan::Type(t) => mcmp(self.fc(), 0x0c, t),
            Wlan::TypeSubtype(v) => mcmp(self.fc(), 0xfc, v),
            Wlan::Subtype(s) => mcmp(self.fc(), 0xf0, s),
            Wlan::Dir(d) if d > 3 => return err(span, format!("invalid 802.11 direction {d}")),
            Wlan::Dir(d) => mcmp(self.flags(), 0x03, d),
        })
    }

    fn fc_set(&self, m: u32) -> Pred {
        Pred::cmp(CmpOp::Set, self.fc(), k(m))
    }

    fn flags_set(&self, m: u32) -> Pred {
        Pred::cmp(CmpOp::Set, self.flags(), k(m))
    }

    /// A control frame that is CTS or ACK (they have no transmitter address).
    fn cts_or_ack(&self) -> Pred {
        Pred::and(vec![
            mcmp(self.fc(), 0x0c, 0x04),
            Pred::or(vec![
                mcmp(self.fc(), 0xf0, 0xc0),
                mcmp(self.fc(), 0xf0, 0xd0),
            ]),
        ])
    }

    /// The destination address test: `leaf(offset)` at the DA, which sits
    /// at 4 in management frames and in data frames without To DS, at 16
    /// in data frames with To DS; control frames have none.
    fn wlan_dst(&self, leaf: &dyn Fn(u32) -> Pred) -> Pred {
        Pred::and(vec![
            Pred::not(self.fc_set(0x04)),
            Pred::or(vec![
                Pred::and(vec![Pred::not(self.fc_set(0x08)), leaf(4)]),
                Pred::and(vec![
                    self.fc_set(0x08),
                    Pred::or(vec![
                        Pred::and(vec![Pred::not(self.flags_set(0x01)), leaf(4)]),
                        Pred::and(vec![self.flags_set(0x01), leaf(16)]),
                    ]),
                ]),
            ]),
        ])
    }

    /// The source address test: at 10 in management frames and data frames
    /// without From DS, at 16 with From DS only, at 24 with both.
    fn wlan_src(&self, leaf: &dyn Fn(u32) -> Pred) -> Pred {
        Pred::and(vec![
            Pred::not(self.fc_set(0x04)),
            Pred::or(vec![
                Pred::and(vec![Pred::not(self.fc_set(0x08)), leaf(10)]),
                Pred::and(vec![
                    self.fc_set(0x08),
                    Pred::or(vec![
                        Pred::and(vec![Pred::not(self.flags_set(0x02)), leaf(10)]),
                        Pred::and(vec![
                            self.flags_set(0x02),
                            Pred::or(vec![
                                Pred::and(vec![Pred::not(self.flags_set(0x01)), leaf(16)]),
                                Pred::and(vec![self.flags_set(0x01), leaf(24)]),
                            ]),
                        ]),
                    ]),
                ]),
            ]),
        ])
    }

    /// `wlan [dir] host MAC` (also `ether`/`link` on 802.11).
    pub(crate) fn wlan_host(&self, mac: [u8; 6], dir: Option<Dir>) -> Pred {
        let lh = self.wlan_header();
        let leaf = |off: u32| self.mac_eq(&Val::plus(lh.clone(), off), mac);
        match dir {
            Some(Dir::Src) => self.wlan_src(&leaf),
            Some(Dir::Dst) => self.wlan_dst(&leaf),
            Some(Dir::SrcAndDst) => Pred::and(vec![self.wlan_src(&leaf), self.wlan_dst(&leaf)]),
            None | Some(Dir::SrcOrDst) => {
                Pred::or(vec![self.wlan_src(&leaf), self.wlan_dst(&leaf)])
            }
            Some(Dir::Addr1) => leaf(4),
            Some(Dir::Addr2) => Pred::and(vec![Pred::not(self.cts_or_ack()), leaf(10)]),
            Some(Dir::Addr3) => Pred::and(vec![Pred::not(mcmp(self.fc(), 0x0c, 0x04)), leaf(16)]),
            Some(Dir::Addr4) => Pred::and(vec![mcmp(self.flags(), 0x03, 0x03), leaf(24)]),
            // Receiver: addr1, except in management frames.
            Some(Dir::Ra) => Pred::and(vec![self.fc_set(0x08), leaf(4)]),
            // Transmitter: addr2, except in management frames, CTS and ACK.
            Some(Dir::Ta) => Pred::and(vec![
                self.fc_set(0x08),
                Pred::not(self.cts_or_ack()),
                leaf(10),
            ]),
        }
    }

    /// `broadcast` on 802.11: the destination address is all ones.
    pub(crate) fn wlan_broadcast(&self) -> Pred {
        self.wlan_host([0xff; 6], Some(Dir::Dst))
    }

    /// `multicast` on 802.11: the destination address has the group bit.
    pub(crate) fn wlan_multicast(&self) -> Pred {
        let lh = self.wlan_header();
        let leaf = |off: u32| Pred::cmp(CmpOp::Set, ld(&lh, off, Size::Byte), k(1));
        self.wlan_dst(&leaf)
    }

    /// `radio[i]`: a load in the radio header, from the start of the packet.
    /// libpcap master reads it on radiotap, AVS and Prism links, not on
    /// PPI, and not once a tunnel made the link Ethernet.
    pub(crate) fn radio_load(&self, idx: Val, size: Size, span: Span) -> GResult<Val> {
        match self.off.link_dlt {
            LinkType::IEEE802_11_RADIO
            | LinkType::IEEE802_11_RADIO_AVS
            | LinkType::PRISM_HEADER => Ok(Gen::at(idx, &k(0), 0, size)),
            dlt => err(
                span,
                format!("radio information not present in capture ({dlt})"),
            ),
        }
    }

    /// The same expression generated for another layout variant.
    fn variant(&self, e: &Expr, v: Variant) -> GResult<Pred> {
        let mut g = Gen {
            wlan_variant: v,
            capture_big_endian: self.capture_big_endian,
            offline: self.offline,
            resolver: self.resolver.clone(),
            netmask: self.netmask,
            ..Gen::new(offsets(self.off.dlt, v))
        };
        g.wlan_unset(e);
        Ok(super::constants(g.expr(e)?))
    }

    /// Add libpcap's whole-program tests: PPI's "the packet is 802.11"
    /// check, and the prologue loads of the offsets the filter used. A
    /// filter that used an offset whose form depends on the packet (Prism
    /// or AVS header; radiotap padding) is generated once per form, and the
    /// packet decides which runs.
    ///
    /// Also what libpcap's optimiser judges when it is on (see
    /// [`crate::Compiled::judged`]): the prologue's loads are statements
    /// of the first block, not tests, so they are left out (on radiotap,
    /// `ether[0] & 0 = 1` reduces to `ret #0` and is refused).
    pub(crate) fn wlan_finish(&self, pred: Pred, e: &Expr) -> GResult<(Pred, Option<Pred>)> {
        let dlt = self.off.dlt;
        // The empty expression accepts everything, even on PPI.
        if !is_wlan(dlt) || matches!(e, Expr::True(_)) {
            return Ok((pred, None));
        }
        let mut parts = Vec::new();
        let mut tests = Vec::new();
        // libpcap adds PPI's check when the current link is still PPI (not
        // after `pppoes` or a tunnel).
        if dlt == LinkType::PPI && self.off.link_dlt == LinkType::PPI {
            parts.push(Pred::eq(abs(4, Size::Word), PPI_DLT_80211));
            tests.push(Pred::eq(abs(4, Size::Word), PPI_DLT_80211));
        }
        let payload = self.wlan_uses.payload.get();
        let header = self.wlan_uses.header.get() || payload;
        // libpcap's code for the Prism header's length (always) and for
        // the 802.11 payload offset (when used) jumps inside a block,
        // which its optimiser cannot handle: it turns the optimiser off.
        if dlt == LinkType::PRISM_HEADER || payload {
            self.no_optimize.set(true);
        }
        let mut pred = pred;
        if header {
            match dlt {
                LinkType::IEEE802_11_RADIO | LinkType::PPI => parts.push(touch(abs(3, Size::Byte))),
                LinkType::IEEE802_11_RADIO_AVS => parts.push(touch(abs(4, Size::Word))),
                LinkType::PRISM_HEADER => {
                    parts.push(Pred::and(vec![
                        touch(abs(0, Size::Word)),
                        Pred::or(vec![Pred::not(prism_is_avs()), touch(abs(4, Size::Word))]),
                    ]));
                    let avs = self.variant(
                        e,
                        Variant {
                            avs: true,
                            ..self.wlan_variant
                        },
                    )?;
                    pred = Pred::or(vec![
                        Pred::and(vec![prism_is_avs(), avs]),
                        Pred::and(vec![Pred::not(prism_is_avs()), pred]),
                    ]);
                }
                _ => {}
            }
        }
        if payload {
            // Prism's header start is a constant or a loaded word, both
            // read above; the frame control byte is the first one at it.
            let fc = ld(&header_start(dlt, Variant::default()), 0, Size::Byte);
            let fc_avs = ld(
                &header_start(
                    dlt,
                    Variant {
                        avs: true,
                        padded: false,
                    },
                ),
                0,
                Size::Byte,
            );
            parts.push(match dlt {
                LinkType::PRISM_HEADER => Pred::or(vec![
                    Pred::and(vec![prism_is_avs(), touch(fc_avs)]),
                    touch(fc.clone()),
                ]),
                _ => touch(fc.clone()),
            });
            if dlt == LinkType::IEEE802_11_RADIO {
                let present = abs(4, Size::Word);
                let set = |m: u32| Pred::cmp(CmpOp::Set, present.clone(), k(m));
                parts.push(Pred::or(vec![
                    Pred::not(mcmp(fc.clone(), 0x0c, 0x08)),
                    Pred::and(vec![
                        touch(present.clone()),
                        Pred::or(vec![
                            Pred::not(set(0x0200_0000)),
                            set(0x80),
                            Pred::and(vec![set(0x0100_0000), touch(abs(16, Size::Byte))]),
                            touch(abs(8, Size::Byte)),
                        ]),
                    ]),
                ]));
                let padded = self.variant(
                    e,
                    Variant {
                        padded: true,
                        ..self.wlan_variant
                    },
                )?;
                let pad = radiotap_padded(&fc);
                pred = Pred::or(vec![
                    Pred::and(vec![pad.clone(), padded]),
                    Pred::and(vec![Pred::not(pad), pred]),
                ]);
            }
        }
        if parts.is_empty() {
            return Ok((pred, None));
        }
        let judged = (parts.len() > tests.len()).then(|| {
            tests.push(pred.clone());
            Pred::and(tests)
        });
        parts.push(pred);
        Ok((Pred::and(parts), judged))
    }
}
