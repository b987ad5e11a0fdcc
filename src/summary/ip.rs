//! IPv4 and IPv6 in tcpdump's quick form: addresses, ports, the transport
//! protocol and its payload length.

use super::Net;
use sluice_wire::bytes::be16;
use std::net::{Ipv4Addr, Ipv6Addr};

/// An IPv4 packet (`p` starts at its header).
pub(crate) fn v4(p: &[u8]) -> Net {
    if p.len() < 20 || p[0] >> 4 != 4 {
        return Net::new("IP", false, "[|ip]".into());
    }
    let hl = ((p[0] & 0xf) as usize) * 4;
    let total = be16(p, 2).unwrap_or(0) as usize;
    let src = Ipv4Addr::new(p[12], p[13], p[14], p[15]).to_string();
    let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]).to_string();
    if hl < 20 {
        return Net::new("IP", false, format!("{src} > {dst}: [|ip]"));
    }
    let payload_len = total.saturating_sub(hl);
    let frag = be16(p, 6).unwrap_or(0) & 0x1fff;
    if frag != 0 {
        // A later fragment: no transport header to read.
        return Net::new("IP", false, format!("{src} > {dst}: ip-proto-{}", p[9]));
    }
    let payload = p.get(hl..).unwrap_or(&[]);
    let body = transport(&src, &dst, p[9], payload, payload_len, false);
    Net::new("IP", false, body)
}

/// An IPv6 packet (`p` starts at its header); hop-by-hop, routing and
/// destination options headers are walked to the transport header.
pub(crate) fn v6(p: &[u8]) -> Net {
    if p.len() < 40 || p[0] >> 4 != 6 {
        return Net::new("IP6", false, "[|ip6]".into());
    }
    let addr = |at: usize| {
        let mut b = [0u8; 16];
        b.copy_from_slice(&p[at..at + 16]);
        Ipv6Addr::from(b).to_string()
    };
    let (src, dst) = (addr(8), addr(24));
    let mut len = be16(p, 4).unwrap_or(0) as usize;
    let (mut next, mut at) = (p[6], 40usize);
    loop {
        match next {
            0 | 43 | 60 => {
                let (Some(&n), Some(&l)) = (p.get(at), p.get(at + 1)) else {
                    return Net::new("IP6", false, format!("{src} > {dst}: [|ip6]"));
                };
                let ext = (l as usize + 1) * 8;
                next = n;
                at += ext;
                len = len.saturating_sub(ext);
            }
            44 => {
                let (Some(&n), Some(off)) = (p.get(at), be16(p, at + 2)) else {
                    return Net::new("IP6", false, format!("{src} > {dst}: [|ip6]"));
                };
                if off & 0xfff8 != 0 {
                    return Net::new("IP6", false, format!("{src} > {dst}: frag"));
                }
                next = n;
                at += 8;
                len = len.saturating_sub(8);
            }
            _ => break,
        }
    }
    let payload = p.get(at..).unwrap_or(&[]);
    Net::new(
        "IP6",
        false,
        transport(&src, &dst, next, payload, len, true),
    )
}

/// `src.port > dst.port: tcp N`, `…: UDP, length N`, ICMP echo and the
/// like; `len` is the transport segment's length from the IP header.
fn transport(src: &str, dst: &str, proto: u8, p: &[u8], len: usize, v6: bool) -> String {
    let ports = || Some((be16(p, 0)?, be16(p, 2)?));
    match proto {
        6 => match (ports(), p.get(12)) {
            (Some((sp, dp)), Some(&off)) => {
                let data = len.saturating_sub(((off >> 4) as usize) * 4);
                format!("{src}.{sp} > {dst}.{dp}: tcp {data}")
            }
            _ => format!("{src} > {dst}: [|tcp]"),
        },
        17 => match (ports(), be16(p, 4)) {
            (Some((sp, dp)), Some(ulen)) => format!(
                "{src}.{sp} > {dst}.{dp}: UDP, length {}",
                (ulen as usize).saturating_sub(8)
            ),
            _ => format!("{src} > {dst}: [|udp]"),
        },
        132 => match ports() {
            Some((sp, dp)) => format!("{src}.{sp} > {dst}.{dp}: sctp"),
            None => format!("{src} > {dst}: [|sctp]"),
        },
        1 if !v6 => format!("{src} > {dst}: {}", icmp(p, len)),
        58 if v6 => format!("{src} > {dst}: {}", icmp6(p, len)),
        n => format!("{src} > {dst}: {}", other_proto(n, len)),
    }
}

fn echo(p: &[u8]) -> String {
    match (be16(p, 4), be16(p, 6)) {
        (Some(id), Some(seq)) => format!(", id {id}, seq {seq}"),
        _ => String::new(),
    }
}

fn icmp(p: &[u8], len: usize) -> String {
    match p.first() {
        Some(0) => format!("ICMP echo reply{}, length {len}", echo(p)),
        Some(8) => format!("ICMP echo request{}, length {len}", echo(p)),
        Some(3) => format!("ICMP unreachable, length {len}"),
        Some(5) => format!("ICMP redirect, length {len}"),
        Some(11) => format!("ICMP time exceeded in-transit, length {len}"),
        Some(13) => format!("ICMP time stamp query, length {len}"),
        Some(14) => format!("ICMP time stamp reply, length {len}"),
        Some(t) => format!("ICMP type-#{t}, length {len}"),
        None => format!("ICMP, length {len}"),
    }
}

fn icmp6(p: &[u8], len: usize) -> String {
    let name = match p.first() {
        Some(128) => return format!("ICMP6, echo request{}, length {len}", echo(p)),
        Some(129) => return format!("ICMP6, echo reply{}, length {len}", echo(p)),
        Some(1) => "destination unreachable".to_string(),
        Some(2) => "packet too big".to_string(),
        Some(3) => "time exceeded in-transit".to_string(),
        Some(133) => "router solicitation".to_string(),
        Some(134) => "router advertisement".to_string(),
        Some(135) => "neighbor solicitation".to_string(),
        Some(136) => "neighbor advertisement".to_string(),
        Some(143) => "multicast listener report v2".to_string(),
        Some(t) => format!("type-#{t}"),
        None => return format!("ICMP6, length {len}"),
    };
    format!("ICMP6, {name}, length {len}")
}

/// Transport protocols summarised by name and length only.
fn other_proto(n: u8, len: usize) -> String {
    let name = match n {
        2 => "IGMP",
        4 => "IP-in-IP",
        41 => "IP6-in-IP",
        47 => "GREv0",
        50 => "ESP",
        51 => "AH",
        89 => "OSPF",
        103 => "PIM",
        112 => "VRRP",
        _ => return format!("ip-proto-{n} {len}"),
    };
    format!("{name}, length {len}")
}
