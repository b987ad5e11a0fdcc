//! One-line packet summaries for `sluice filter`'s default output, in the
//! spirit of tcpdump's: addresses, ports and protocol, nothing deeper.
//!
//! ```
//! let eth_arp = [0xffu8; 14];
//! assert!(sluice::summary::summarize(1, &eth_arp).contains("ethertype"));
//! ```

use sluice_wire::bytes::be16;
use sluice_wire::ether::{self, ETHERTYPE_ARP, ETHERTYPE_IPV4, ETHERTYPE_IPV6, MAX_8023_LENGTH};
use sluice_wire::link::{Layout, LinkType};
use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Describe a packet of the given LINKTYPE in one line.
///
/// ```
/// let mut raw = vec![0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// assert_eq!(sluice::summary::summarize(101, &raw), "IP 10.0.0.1 > 10.0.0.2: icmp");
/// ```
pub fn summarize(linktype: u16, pkt: &[u8]) -> String {
    let mut out = String::new();
    // Link types by the number capture files use (not the old aliases).
    let lt =
        LinkType::from_number(u32::from(linktype)).filter(|l| l.number() == u32::from(linktype));
    let layout = lt.map(Layout::of);
    // Where the link header names its payload, and where that starts.
    let header = layout.and_then(|l| Some((l.proto_at? as usize, l.payload as usize)));
    match (lt, header) {
        (Some(LinkType::EN10MB), Some((ty_at, payload))) => ethernet(pkt, ty_at, payload, &mut out),
        (Some(LinkType::RAW | LinkType::IPV4 | LinkType::IPV6), _) => ip_any(pkt, &mut out),
        (Some(LinkType::LINUX_SLL | LinkType::LINUX_SLL2), Some((ty_at, payload)))
            if pkt.len() >= payload =>
        {
            ether_payload(be16(pkt, ty_at).unwrap_or(0), &pkt[payload..], &mut out)
        }
        _ => {
            let _ = write!(out, "link type {linktype}, {} bytes", pkt.len());
        }
    }
    out
}

fn ethernet(pkt: &[u8], ty_at: usize, payload: usize, out: &mut String) {
    if be16(pkt, ty_at).is_none() || pkt.len() < payload {
        out.push_str("truncated Ethernet");
        return;
    }
    let tags = ether::skip_vlan_tags(pkt, ty_at, payload, usize::MAX, |tci| {
        let _ = write!(out, "vlan {} ", tci & 0xfff);
    });
    match tags {
        Some((off, ty)) => ether_payload(ty, &pkt[off..], out),
        None => out.push_str("truncated VLAN tag"),
    }
}

fn ether_payload(ty: u16, p: &[u8], out: &mut String) {
    match ty {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => ip_any(p, out),
        ETHERTYPE_ARP => {
            let (Some(op), true) = (be16(p, 6), p.len() >= 28) else {
                out.push_str("ARP, truncated");
                return;
            };
            let ip = |at: usize| Ipv4Addr::new(p[at], p[at + 1], p[at + 2], p[at + 3]);
            match op {
                1 => {
                    let _ = write!(out, "ARP, Request who-has {} tell {}", ip(24), ip(14));
                }
                2 => {
                    let _ = write!(out, "ARP, Reply {} is-at {:02x?}", ip(14), &p[8..14]);
                }
                op => {
                    let _ = write!(out, "ARP, op {op}");
                }
            }
        }
        ty if ty <= MAX_8023_LENGTH => {
            let _ = write!(out, "802.3, length {ty}");
        }
        ty => {
            let _ = write!(out, "ethertype 0x{ty:04x}, {} bytes", p.len());
        }
    }
}

fn ip_any(p: &[u8], out: &mut String) {
    match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => {
            let hl = ((p[0] & 0xf) as usize) * 4;
            let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]);
            let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
            let frag = be16(p, 6).unwrap_or(0) & 0x1fff;
            let payload = if frag == 0 { p.get(hl..) } else { None };
            transport("IP", &src.to_string(), &dst.to_string(), p[9], payload, out);
        }
        Some(6) if p.len() >= 40 => {
            let a = |at: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&p[at..at + 16]);
                Ipv6Addr::from(b).to_string()
            };
            transport("IP6", &a(8), &a(24), p[6], p.get(40..), out);
        }
        _ => out.push_str("truncated or unknown IP"),
    }
}

fn transport(fam: &str, src: &str, dst: &str, proto: u8, p: Option<&[u8]>, out: &mut String) {
    let name = match proto {
        1 => "icmp",
        6 => "tcp",
        17 => "udp",
        58 => "icmp6",
        132 => "sctp",
        _ => "",
    };
    let ports = p
        .filter(|_| matches!(proto, 6 | 17 | 132))
        .and_then(|p| Some((be16(p, 0)?, be16(p, 2)?)));
    match ports {
        Some((sp, dp)) => {
            let _ = write!(out, "{fam} {src}.{sp} > {dst}.{dp}: {name}");
            if proto == 6 {
                if let Some(&flags) = p.and_then(|p| p.get(13)) {
                    let names = [
                        (0x02, 'S'),
                        (0x01, 'F'),
                        (0x04, 'R'),
                        (0x08, 'P'),
                        (0x10, '.'),
                    ];
                    let f: String = names
                        .iter()
                        .filter(|(b, _)| flags & b != 0)
                        .map(|(_, c)| *c)
                        .collect();
                    let _ = write!(out, " [{f}]");
                }
            }
        }
        None if name.is_empty() => {
            let _ = write!(out, "{fam} {src} > {dst}: ip-proto-{proto}");
        }
        None => {
            let _ = write!(out, "{fam} {src} > {dst}: {name}");
        }
    }
}
