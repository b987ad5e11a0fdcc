//! One-line packet summaries for `sluice filter`'s default output, in the
//! form of tcpdump's one-line quick output (`tcpdump -q -nn`): the
//! addresses, ports and protocol (`IP 10.0.0.1.80 > 10.0.0.2.5000: tcp 0`,
//! `ARP, Request who-has …`, `IP6 …`, 802.11 frames by type), for every
//! link type behind which sluice finds the network header; not a full
//! protocol decoder.
//!
//! ```
//! let mut arp = vec![0xffu8; 6];
//! arp.extend([2, 0, 0, 0, 0, 1, 8, 6]);
//! arp.extend([0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
//! arp.extend([0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
//! assert_eq!(
//!     sluice::summary::summarize(1, &arp),
//!     "ARP, Request who-has 10.0.0.2 tell 10.0.0.1, length 28"
//! );
//! ```

mod ip;
mod wlan;

use sluice_wire::bytes::be16;
use sluice_wire::ether::{is_vlan, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, MAX_8023_LENGTH};
use sluice_wire::link::{Layout, LinkType, ProtoField};
use sluice_wire::network::{Ip, Locator};
use std::fmt::Write;

/// Reverse ARP's Ethernet type.
const ETHERTYPE_REVARP: u16 = 0x8035;

/// What one packet looks like in one line.
///
/// ```
/// let raw = [0x45u8, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
///            0, 53, 0x13, 0x88, 0, 8, 0, 0];
/// let d = sluice::summary::describe(101, false, &raw, 28);
/// assert_eq!(d.line, "IP 10.0.0.1.53 > 10.0.0.2.5000: UDP, length 0");
/// assert_eq!(d.link_len, 0);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Described {
    /// The line, as `tcpdump -q -nn` prints it after the timestamp.
    pub line: String,
    /// The line with the link-level header first (`-e`): for Ethernet
    /// `SRC > DST, TYPE, length N: …`; other links as [`line`](Self::line).
    pub with_link: String,
    /// Bytes of link-level header before the network header (where
    /// `-x`/`-X`/`-A` start; `-xx`/`-XX` start at 0).
    pub link_len: usize,
}

/// The network-layer part of a summary.
pub(crate) struct Net {
    /// `IP`, `IP6`, `ARP`... (empty: none).
    label: &'static str,
    /// `ARP, Request` (a comma after the label) or `IP 1.2.3.4` (a space).
    comma: bool,
    /// What follows the label.
    body: String,
}

impl Net {
    pub(crate) fn new(label: &'static str, comma: bool, body: String) -> Net {
        Net { label, comma, body }
    }

    fn line(&self) -> String {
        match (self.label, self.comma) {
            ("", _) => self.body.clone(),
            (l, true) => format!("{l}, {}", self.body),
            (l, false) => format!("{l} {}", self.body),
        }
    }
}

/// Describe a packet of the given LINKTYPE in one line (see [`describe`]).
///
/// ```
/// let raw = vec![0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// assert_eq!(sluice::summary::summarize(101, &raw), "IP 10.0.0.1 > 10.0.0.2: ICMP, length 0");
/// ```
pub fn summarize(linktype: u16, pkt: &[u8]) -> String {
    describe(linktype, cfg!(target_endian = "big"), pkt, pkt.len() as u32).line
}

/// Describe a packet: its link type (a capture's number), the capture's
/// byte order (NULL and ENC links keep their address family in it), the
/// captured bytes and the length on the wire.
///
/// ```
/// // USB on Linux: no network header sluice can find, so the link's name.
/// let d = sluice::summary::describe(189, false, &[1, 2, 3], 3);
/// assert_eq!(d.line, "USB_LINUX, length 3");
/// ```
pub fn describe(linktype: u16, big_endian: bool, pkt: &[u8], wirelen: u32) -> Described {
    // Link types by the number capture files use (not the old aliases).
    let lt =
        LinkType::from_number(u32::from(linktype)).filter(|l| l.number() == u32::from(linktype));
    let Some(lt) = lt else {
        let line = format!("link type {linktype}, length {wirelen}");
        return Described {
            with_link: line.clone(),
            line,
            link_len: 0,
        };
    };
    if lt == LinkType::EN10MB {
        return ethernet(pkt, wirelen);
    }
    if let Some((net, link_len)) = wlan::describe(lt, pkt, wirelen) {
        let line = net.line();
        return Described {
            with_link: line.clone(),
            line,
            link_len,
        };
    }
    let (net, link_len) = other_link(lt, big_endian, pkt, wirelen);
    let line = net.line();
    Described {
        with_link: line.clone(),
        line,
        link_len,
    }
}

/// Any link but Ethernet and 802.11: IP where the link-type table finds
/// it, ARP behind Ethernet-typed headers, else the link's name.
fn other_link(lt: LinkType, big_endian: bool, pkt: &[u8], wirelen: u32) -> (Net, usize) {
    if let Some(n) = Locator::new(lt, big_endian).locate(pkt) {
        let rest = &pkt[n.offset.min(pkt.len())..];
        let net = match n.ip {
            Ip::V4 => ip::v4(rest),
            Ip::V6 => ip::v6(rest),
        };
        return (net, n.offset);
    }
    let layout = Layout::of(lt);
    let payload = layout.payload as usize;
    let typed = matches!(
        layout.field,
        ProtoField::EtherType | ProtoField::Sll | ProtoField::PlainEtherType
    );
    if let (true, Some(at)) = (typed, layout.proto_at) {
        if let (Some(ty), Some(rest)) = (be16(pkt, at as usize), pkt.get(payload..)) {
            let len = (wirelen as usize).saturating_sub(payload);
            if let Some(net) = arp_like(ty, rest, len) {
                return (net, payload);
            }
        }
    }
    let body = format!("{}, length {wirelen}", lt.name());
    (Net::new("", false, body), 0)
}

/// The name tcpdump gives an Ethernet type in `-e` output.
fn ethertype_name(ty: u16) -> String {
    match ty {
        ETHERTYPE_IPV4 => "IPv4".into(),
        ETHERTYPE_IPV6 => "IPv6".into(),
        ETHERTYPE_ARP => "ARP".into(),
        ETHERTYPE_REVARP => "Reverse ARP".into(),
        0x8100 => "802.1Q".into(),
        0x88a8 => "802.1Q-QinQ".into(),
        0x9100 => "802.1Q-9100".into(),
        0x8847 => "MPLS unicast".into(),
        0x8848 => "MPLS multicast".into(),
        0x88cc => "LLDP".into(),
        0x8863 => "PPPoE D".into(),
        0x8864 => "PPPoE S".into(),
        ty => format!("Unknown Ethertype (0x{ty:04x})"),
    }
}

/// Ethernet types tcpdump names without decoding what they carry here.
fn known_ethertype(ty: u16) -> bool {
    !ethertype_name(ty).starts_with("Unknown")
}

/// A MAC (or other hardware) address, `aa:bb:…`.
pub(crate) fn mac(b: &[u8]) -> String {
    let parts: Vec<String> = b.iter().map(|x| format!("{x:02x}")).collect();
    parts.join(":")
}

fn ethernet(pkt: &[u8], wirelen: u32) -> Described {
    let truncated = |what: &str| Described {
        line: what.to_string(),
        with_link: what.to_string(),
        link_len: 0,
    };
    let Some(outer) = be16(pkt, 12) else {
        return truncated("[|ether]");
    };
    let mut with = format!(
        "{} > {}, {}, length {wirelen}: ",
        mac(&pkt[6..12]),
        mac(&pkt[0..6]),
        if outer <= MAX_8023_LENGTH {
            "802.3".to_string()
        } else {
            ethertype_name(outer)
        }
    );
    // VLAN tags: shown with -e only, as tcpdump does.
    let (mut ty, mut at) = (outer, 14usize);
    let mut tags = 0;
    while is_vlan(ty) && tags < sluice_wire::network::MAX_VLAN_TAGS {
        let (Some(tci), Some(inner)) = (be16(pkt, at), be16(pkt, at + 2)) else {
            with.push_str("[|vlan]");
            return Described {
                line: "[|vlan]".into(),
                with_link: with,
                link_len: pkt.len(),
            };
        };
        let _ = write!(with, "vlan {}, p {}, ", tci & 0xfff, tci >> 13);
        if is_vlan(inner) {
            let _ = write!(with, "{}, ", ethertype_name(inner));
        }
        ty = inner;
        at += 4;
        tags += 1;
    }
    let rest = &pkt[at.min(pkt.len())..];
    let len = (wirelen as usize).saturating_sub(at);
    if ty > MAX_8023_LENGTH && !known_ethertype(ty) && tags == 0 {
        // What tcpdump cannot name it shows with the link header.
        return Described {
            line: with.clone(),
            with_link: with,
            link_len: at.min(pkt.len()),
        };
    }
    let net = ether_payload(ty, rest, len);
    let line = net.line();
    if tags > 0 {
        // Behind tags tcpdump names the inner type before the packet.
        if net.comma || net.label.is_empty() {
            with.push_str(&line);
        } else {
            let _ = write!(with, "{}, {}", ethertype_name(ty), net.body);
        }
    } else {
        with.push_str(&net.body);
    }
    Described {
        line,
        with_link: with,
        link_len: at.min(pkt.len()),
    }
}

/// What an Ethernet type's payload `p` is (`len`: its length on the wire).
fn ether_payload(ty: u16, p: &[u8], len: usize) -> Net {
    match ty {
        ETHERTYPE_IPV4 => ip::v4(p),
        ETHERTYPE_IPV6 => ip::v6(p),
        ty if ty <= MAX_8023_LENGTH => Net::new("", false, format!("802.3, length {ty}")),
        ty => arp_like(ty, p, len).unwrap_or_else(|| {
            Net::new("", false, format!("{}, length {len}", ethertype_name(ty)))
        }),
    }
}

/// ARP and reverse ARP, with the hardware and protocol address lengths of
/// the header (Ethernet's 6 and 4, ARCnet's 1...).
fn arp_like(ty: u16, p: &[u8], len: usize) -> Option<Net> {
    let label = match ty {
        ETHERTYPE_ARP => "ARP",
        ETHERTYPE_REVARP => "RARP",
        _ => return None,
    };
    let (Some(op), Some(&hl), Some(&pl)) = (be16(p, 6), p.get(4), p.get(5)) else {
        return Some(Net::new(label, true, "[|arp]".into()));
    };
    let (hl, pl) = (hl as usize, pl as usize);
    let need = 8 + 2 * hl + 2 * pl;
    if p.len() < need {
        return Some(Net::new(label, true, "[|arp]".into()));
    }
    let proto = |at: usize| {
        let b = &p[at..at + pl];
        if pl == 4 {
            format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
        } else {
            mac(b)
        }
    };
    let (sha, spa) = (mac(&p[8..8 + hl]), proto(8 + hl));
    let (tha, tpa) = (
        mac(&p[8 + hl + pl..8 + 2 * hl + pl]),
        proto(8 + 2 * hl + pl),
    );
    let body = match op {
        1 => format!("Request who-has {tpa} tell {spa}"),
        2 => format!("Reply {spa} is-at {sha}"),
        3 => format!("Reverse Request who-is {tha} tell {sha}"),
        4 => format!("Reverse Reply {tha} at {tpa}"),
        op => format!("op {op}"),
    };
    Some(Net::new(label, true, format!("{body}, length {len}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend([2, 0, 0, 0, 0, 1]);
        f.extend(ty.to_be_bytes());
        f.extend(payload);
        f
    }

    #[test]
    fn ethernet_with_and_without_link_header() {
        let ip = [
            0x45u8, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, 0, 80, 0x13, 0x88,
            0, 0, 0, 0, 0, 0, 0, 0, 0x50, 2, 0, 0, 0, 0, 0, 0,
        ];
        let f = eth(0x0800, &ip);
        let d = describe(1, false, &f, f.len() as u32);
        assert_eq!(d.line, "IP 10.0.0.1.80 > 10.0.0.2.5000: tcp 0");
        assert_eq!(
            d.with_link,
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, IPv4, length 54: 10.0.0.1.80 > 10.0.0.2.5000: tcp 0"
        );
        assert_eq!(d.link_len, 14);
        let mut tagged = eth(0x8100, &[0, 100, 8, 0]);
        tagged.extend(ip);
        let d = describe(1, false, &tagged, tagged.len() as u32);
        assert_eq!(d.line, "IP 10.0.0.1.80 > 10.0.0.2.5000: tcp 0");
        assert_eq!(d.link_len, 18);
        assert!(d
            .with_link
            .contains("802.1Q, length 58: vlan 100, p 0, IPv4, 10.0.0.1.80"));
    }

    #[test]
    fn truncated_and_unknown() {
        assert_eq!(describe(1, false, &[1, 2], 2).line, "[|ether]");
        let f = eth(0x88b5, &[0; 10]);
        assert_eq!(
            describe(1, false, &f, 24).line,
            "02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff, Unknown Ethertype (0x88b5), length 24: "
        );
        assert_eq!(
            describe(1, false, &eth(0x0806, &[0; 4]), 18).line,
            "ARP, [|arp]"
        );
        assert_eq!(
            describe(60000, false, &[], 0).line,
            "link type 60000, length 0"
        );
    }

    #[test]
    fn null_link_and_linux_cooked() {
        let mut null = 2u32.to_le_bytes().to_vec();
        null.extend([
            0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        let d = describe(0, false, &null, 24);
        assert_eq!(
            (d.line.as_str(), d.link_len),
            ("IP 10.0.0.1 > 10.0.0.2: ICMP, length 0", 4)
        );
        let mut sll = vec![0u8; 14];
        sll.extend(0x0806u16.to_be_bytes());
        sll.extend([0, 1, 8, 0, 6, 4, 0, 2, 2, 0, 0, 0, 0, 1, 10, 0, 0, 1]);
        sll.extend([0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        let d = describe(113, false, &sll, sll.len() as u32);
        assert_eq!(
            d.line,
            "ARP, Reply 10.0.0.1 is-at 02:00:00:00:00:01, length 28"
        );
    }
}
