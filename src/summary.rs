//! One-line packet summaries for `sluice filter`'s default output, in the
//! spirit of tcpdump's: addresses, ports and protocol, nothing deeper.
//!
//! ```
//! let eth_arp = [0xffu8; 14];
//! assert!(sluice::summary::summarize(1, &eth_arp).contains("ethertype"));
//! ```

use std::fmt::Write;
use std::net::{Ipv4Addr, Ipv6Addr};

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Describe a packet of the given LINKTYPE in one line.
///
/// ```
/// let mut raw = vec![0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// assert_eq!(sluice::summary::summarize(101, &raw), "IP 10.0.0.1 > 10.0.0.2: icmp");
/// ```
pub fn summarize(linktype: u16, pkt: &[u8]) -> String {
    let mut out = String::new();
    match linktype {
        1 => ethernet(pkt, &mut out),
        101 | 228 | 229 => ip_any(pkt, &mut out),
        113 if pkt.len() >= 16 => ether_payload(be16(pkt, 14).unwrap_or(0), &pkt[16..], &mut out),
        276 if pkt.len() >= 20 => ether_payload(be16(pkt, 0).unwrap_or(0), &pkt[20..], &mut out),
        _ => {
            let _ = write!(out, "link type {linktype}, {} bytes", pkt.len());
        }
    }
    out
}

fn ethernet(pkt: &[u8], out: &mut String) {
    let (Some(mut ty), true) = (be16(pkt, 12), pkt.len() >= 14) else {
        out.push_str("truncated Ethernet");
        return;
    };
    let mut off = 14;
    while matches!(ty, 0x8100 | 0x88a8 | 0x9100) {
        let (Some(tci), Some(next)) = (be16(pkt, off), be16(pkt, off + 2)) else {
            out.push_str("truncated VLAN tag");
            return;
        };
        let _ = write!(out, "vlan {} ", tci & 0xfff);
        ty = next;
        off += 4;
    }
    ether_payload(ty, &pkt[off..], out);
}

fn ether_payload(ty: u16, p: &[u8], out: &mut String) {
    match ty {
        0x0800 | 0x86dd => ip_any(p, out),
        0x0806 => {
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
        ty if ty <= 1500 => {
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
