//! libpcap 1.10.3's words for a refused qualified primitive (`host X`,
//! `net X`, `port X`, `proto X`, ...): its checks in its own order — the
//! shape of the value first (which grammar rule read it), then the kind
//! (`host`, `port`, ...), then the protocol qualifier, then the direction
//! — and the first that fails gives the message.

use super::Ctx;
use sluice_pcap::ast::{Dir, Kind, Prim, Proto, Value};
use sluice_pcap::names;
use std::net::IpAddr;

/// libpcap's keyword for a protocol qualifier.
pub(super) fn kw(p: Proto) -> &'static str {
    match p {
        Proto::Link => "link",
        Proto::Ip => "ip",
        Proto::Arp => "arp",
        Proto::Rarp => "rarp",
        Proto::Sctp => "sctp",
        Proto::Tcp => "tcp",
        Proto::Udp => "udp",
        Proto::Icmp => "icmp",
        Proto::Igmp => "igmp",
        Proto::Igrp => "igrp",
        Proto::Pim => "pim",
        Proto::Vrrp => "vrrp",
        Proto::Carp => "carp",
        Proto::Atalk => "atalk",
        Proto::Aarp => "aarp",
        Proto::Decnet => "decnet",
        Proto::Lat => "lat",
        Proto::Sca => "sca",
        Proto::Moprc => "moprc",
        Proto::Mopdl => "mopdl",
        Proto::Ip6 => "ip6",
        Proto::Icmp6 => "icmp6",
        Proto::Ah => "ah",
        Proto::Esp => "esp",
        Proto::Iso => "iso",
        Proto::Esis => "esis",
        Proto::Isis => "isis",
        Proto::L1 => "l1",
        Proto::L2 => "l2",
        Proto::Iih => "iih",
        Proto::Lsp => "lsp",
        Proto::Snp => "snp",
        Proto::Psnp => "psnp",
        Proto::Csnp => "csnp",
        Proto::Clnp => "clnp",
        Proto::Stp => "stp",
        Proto::Ipx => "ipx",
        Proto::Netbeui => "netbeui",
        Proto::Radio => "radio",
    }
}

/// What an 802.11-only direction qualifier was applied to.
#[derive(Clone, Copy)]
enum Applied {
    /// An IPv4, IPv6 or DECnet address.
    Address,
    Ports,
    PortRanges,
    /// A MAC address on Ethernet.
    EthernetMac,
    /// A MAC address on FDDI, Token Ring, IP over Fibre Channel, or an
    /// ARCnet address.
    OtherMac,
}

/// The error for an 802.11-only direction qualifier, if `dir` is one.
fn wlan_dir(dir: Option<Dir>, applied: Applied) -> Option<String> {
    let (subject, plural) = match dir? {
        Dir::Addr1 => ("'addr1' and 'address1'", true),
        Dir::Addr2 => ("'addr2' and 'address2'", true),
        Dir::Addr3 => ("'addr3' and 'address3'", true),
        Dir::Addr4 => ("'addr4' and 'address4'", true),
        Dir::Ra => ("'ra'", false),
        Dir::Ta => ("'ta'", false),
        _ => return None,
    };
    let (are, a_qualifier) = if plural {
        ("are", "valid qualifiers")
    } else {
        ("is", "a valid qualifier")
    };
    Some(match applied {
        Applied::Address => format!(
            "{subject} {are} not {a_qualifier} for addresses other than 802.11 MAC addresses"
        ),
        Applied::Ports => format!("{subject} {are} not {a_qualifier} for ports"),
        Applied::PortRanges => format!("{subject} {are} not {a_qualifier} for port ranges"),
        Applied::EthernetMac => {
            format!("{subject} {are} only supported on 802.11 with 802.11 headers")
        }
        Applied::OtherMac => format!("{subject} {are} only supported on 802.11"),
    })
}

/// libpcap's words for the first check `p` fails, in libpcap's order;
/// `None` where its checks all pass (the refusal is then sluice's own,
/// or comes from code generation libpcap shares with other primitives).
pub(super) fn refusal(p: &Prim, cx: &Ctx<'_>) -> Option<String> {
    let q = p.qual;
    let text = cx.text(p.value_span);
    match &p.value {
        Value::Name(n) => scode(n, p, cx),
        Value::Cidr(base, len) => {
            let s1 = match base.as_ref() {
                Value::Ipv6(..) => return mcode6(text, Some(*len), p),
                _ => text.split('/').next().unwrap_or(text).trim(),
            };
            mcode(s1, None, *len, p)
        }
        Value::Masked(..) => {
            let mut parts = text.splitn(2, "mask");
            let s1 = parts.next().unwrap_or("").trim();
            let s2 = parts.next().unwrap_or("").trim();
            mcode(s1, Some(s2), 0, p)
        }
        Value::Dotted { text, addr, bits } => {
            // The grammar's rule for a dotted host number.
            let kind = match q.kind {
                Some(Kind::Port) => Some("port"),
                Some(Kind::PortRange) => Some("portrange"),
                Some(Kind::Proto) => Some("proto"),
                Some(Kind::ProtoChain) => Some("protochain"),
                _ => None,
            };
            if let Some(k) = kind {
                return Some(format!("'{k}' modifier applied to ip host"));
            }
            if *bits == 0 || ipv4_prefix(text).is_none() {
                return Some(format!("invalid IPv4 address '{text}'"));
            }
            ncode(*addr, p, cx)
        }
        Value::Num(v) => ncode(*v, p, cx),
        Value::Ipv6(_, len) => mcode6(text, *len, p),
        Value::Mac(_) => ecode(p, cx),
        Value::Arcnet(_) => acode(p, cx),
    }
}

/// `host`/`net` for an IPv4 address (libpcap's `gen_host`): the protocol
/// qualifier, then the direction.
fn host4(proto: Option<Proto>, dir: Option<Dir>, net: bool) -> Option<String> {
    let t = if net { "net" } else { "host" };
    let p = match proto {
        None | Some(Proto::Ip | Proto::Arp | Proto::Rarp | Proto::Decnet) => {
            return wlan_dir(dir, Applied::Address)
        }
        Some(p) => p,
    };
    Some(match p {
        Proto::Link => format!("link-layer modifier applied to {t}"),
        Proto::Atalk => "AppleTalk host filtering not implemented".into(),
        Proto::Lat => "LAT host filtering not implemented".into(),
        Proto::Sca => "SCA host filtering not implemented".into(),
        Proto::Moprc => "MOPRC host filtering not implemented".into(),
        Proto::Mopdl => "MOPDL host filtering not implemented".into(),
        Proto::Aarp => "AARP host filtering not implemented".into(),
        Proto::Iso => "ISO host filtering not implemented".into(),
        Proto::Ipx => "IPX host filtering not implemented".into(),
        Proto::Ip6 => "'ip6' modifier applied to ip host".into(),
        other => format!("'{}' modifier applied to {t}", kw(other)),
    })
}

/// `host`/`net` for an IPv6 address (libpcap's `gen_host6`).
fn host6(proto: Option<Proto>, dir: Option<Dir>, net: bool) -> Option<String> {
    let t = if net { "net" } else { "host" };
    Some(match proto {
        None | Some(Proto::Ip6) => return wlan_dir(dir, Applied::Address),
        Some(Proto::Link) => format!("link-layer modifier applied to ip6 {t}"),
        Some(Proto::Atalk) => format!("AppleTalk modifier applied to ip6 {t}"),
        Some(other) => format!("'{}' modifier applied to ip6 {t}", kw(other)),
    })
}

/// A `port` or `portrange` number's protocol qualifier.
fn port_proto(proto: Option<Proto>, range: bool) -> Option<String> {
    match proto {
        None | Some(Proto::Tcp | Proto::Udp | Proto::Sctp) => None,
        Some(_) => Some(format!(
            "illegal qualifier of '{}'",
            if range { "portrange" } else { "port" }
        )),
    }
}

/// `proto N` (libpcap's `gen_proto`): the direction, then the protocol.
fn proto_of(proto: Option<Proto>, dir: Option<Dir>) -> Option<String> {
    if dir.is_some() {
        return Some("direction applied to 'proto'".into());
    }
    let p = proto?;
    Some(match p {
        Proto::Link | Proto::Ip | Proto::Ip6 | Proto::Iso | Proto::Isis => return None,
        Proto::Arp => "arp does not encapsulate another protocol".into(),
        Proto::Rarp => "rarp does not encapsulate another protocol".into(),
        Proto::Atalk => "AppleTalk encapsulation is not specifiable".into(),
        Proto::Decnet => "DECNET encapsulation is not specifiable".into(),
        Proto::Lat => "LAT does not encapsulate another protocol".into(),
        Proto::Sca => "SCA does not encapsulate another protocol".into(),
        Proto::Moprc => "MOPRC does not encapsulate another protocol".into(),
        Proto::Mopdl => "MOPDL does not encapsulate another protocol".into(),
        Proto::Clnp => "'clnp proto' is not supported".into(),
        other => format!("'{} proto' is bogus", kw(other)),
    })
}

/// `protochain N` (libpcap's `gen_protochain`).
fn protochain(proto: Option<Proto>, cx: &Ctx<'_>) -> Option<String> {
    match proto {
        None | Some(Proto::Ip | Proto::Ip6) => cx
            .sluice_says("protochain")
            .then(|| "'protochain' not supported with variable length headers".into()),
        Some(_) => Some("bad protocol applied for 'protochain'".into()),
    }
}

/// A name (libpcap's `gen_scode`).
fn scode(name: &str, p: &Prim, cx: &Ctx<'_>) -> Option<String> {
    let q = p.qual;
    match q.kind {
        Some(Kind::Net) => Some(format!("unknown network '{name}'")),
        None | Some(Kind::Host) => match q.proto {
            Some(Proto::Link) => Some(link_host_name(name, cx)),
            Some(Proto::Decnet) => Some(format!(
                "decnet name support not included, '{name}' cannot be translated\n"
            )),
            proto => {
                let Some(addrs) = cx.resolve(name) else {
                    return Some(format!("unknown host '{name}'"));
                };
                let (mut v4, mut v6) = (proto, proto);
                if proto.is_none() && !cx.has_link_type_field() {
                    (v4, v6) = (Some(Proto::Ip), Some(Proto::Ip6));
                }
                let mut any = false;
                for a in addrs {
                    let e = match a {
                        IpAddr::V4(_) if v4 != Some(Proto::Ip6) => host4(v4, q.dir, false),
                        IpAddr::V6(_) if v6 != Some(Proto::Ip) => host6(v6, q.dir, false),
                        _ => continue,
                    };
                    if e.is_some() {
                        return e;
                    }
                    any = true;
                }
                (!any).then(|| {
                    let family = if proto.is_none() {
                        ""
                    } else {
                        " for specified address family"
                    };
                    format!("unknown host '{name}'{family}")
                })
            }
        },
        Some(k @ (Kind::Port | Kind::PortRange)) => {
            named_port(name, q.proto, k == Kind::PortRange).or_else(|| {
                // libpcap tests the link type before the direction.
                if cx.no_link_type() {
                    return Some(super::other::not_implemented(cx));
                }
                wlan_dir(
                    q.dir,
                    if k == Kind::PortRange {
                        Applied::PortRanges
                    } else {
                        Applied::Ports
                    },
                )
            })
        }
        Some(Kind::Gateway) => Some("'gateway' not supported in this configuration".into()),
        Some(Kind::Proto) => match lookup_proto(name, q.proto) {
            Err(e) => Some(e),
            Ok(_) => proto_of(q.proto, q.dir),
        },
        Some(Kind::ProtoChain) => match lookup_proto(name, q.proto) {
            Err(e) => Some(e),
            Ok(_) => protochain(q.proto, cx),
        },
    }
}

/// `ether host NAME`: libpcap looks names up in `/etc/ethers` on links
/// with MAC addresses; sluice reads no such file, so the name is unknown.
fn link_host_name(name: &str, cx: &Ctx<'_>) -> String {
    match cx.dlt_name() {
        "EN10MB" | "NETANALYZER" | "NETANALYZER_TRANSPARENT" => {
            format!("unknown ether host '{name}'")
        }
        "FDDI" => format!("unknown FDDI host '{name}'"),
        "IEEE802" => format!("unknown token ring host '{name}'"),
        "IEEE802_11" | "PRISM_HEADER" | "IEEE802_11_RADIO_AVS" | "IEEE802_11_RADIO" | "PPI" => {
            format!("unknown 802.11 host '{name}'")
        }
        "IP_OVER_FC" => format!("unknown Fibre Channel host '{name}'"),
        _ => "only ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel supports link-level host name".into(),
    }
}

/// A service name after `port` or `portrange`: its protocol qualifier,
/// the name and its transport.
fn named_port(name: &str, proto: Option<Proto>, range: bool) -> Option<String> {
    if let Some(e) = port_proto(proto, range) {
        return Some(e);
    }
    let in_range = if range { "port in range" } else { "port" };
    let ports = if range {
        // NAME-NAME, each a service or a number (1.10.3 reads no range
        // from a name without a hyphen).
        if !name.contains('-') {
            return Some(format!("unknown port in range '{name}'"));
        }
        let mut ends = Vec::new();
        for part in name.split('-') {
            match names::service(part) {
                Some(s) => ends.push(s),
                None if part.parse::<u32>().is_ok() => {}
                None => return Some(format!("unknown port in range '{name}'")),
            }
        }
        ends.first().copied()
    } else {
        match names::service(name) {
            Some(s) => Some(s),
            None => return Some(format!("unknown port '{name}'")),
        }
    };
    if let Some(s) = ports {
        // The transport the name belongs to, as libpcap picks it (TCP,
        // then UDP, then SCTP).
        let real = if s.tcp.is_some() {
            "tcp"
        } else if s.udp.is_some() {
            "udp"
        } else {
            "sctp"
        };
        let fits = match proto {
            Some(Proto::Tcp) => s.tcp.is_some(),
            Some(Proto::Udp) => s.udp.is_some(),
            Some(Proto::Sctp) => s.sctp.is_some(),
            _ => true,
        };
        if !fits {
            return Some(format!("{in_range} '{name}' is {real}"));
        }
    }
    None
}

/// libpcap's `lookup_proto`: the number a protocol name stands for.
fn lookup_proto(name: &str, proto: Option<Proto>) -> Result<u32, String> {
    match proto {
        None | Some(Proto::Ip | Proto::Ip6) => names::ip_protocol(name)
            .map(u32::from)
            .ok_or_else(|| format!("unknown ip proto '{name}'")),
        Some(Proto::Link) => names::ether_type(name)
            .map(u32::from)
            .or_else(|| names::llc_sap(name).map(u32::from))
            .ok_or_else(|| format!("unknown ether proto '{name}'")),
        Some(Proto::Iso) => names::iso_proto(name)
            .map(u32::from)
            .ok_or_else(|| format!("unknown osi proto '{name}'")),
        Some(_) => Err(format!("unknown protocol: {name}")),
    }
}

/// `A.B.C.D/len` or `A.B.C.D mask M` (libpcap's `gen_mcode`).
fn mcode(s1: &str, s2: Option<&str>, len: u32, p: &Prim) -> Option<String> {
    let q = p.qual;
    let Some(n) = ipv4_prefix(s1) else {
        return Some(format!("invalid IPv4 address '{s1}'"));
    };
    match s2 {
        Some(s2) => match ipv4_prefix(s2) {
            Some(m) if n & !m != 0 => {
                return Some(format!("non-network bits set in \"{s1} mask {s2}\""))
            }
            Some(_) => {}
            None => return Some(format!("invalid IPv4 address '{s2}'")),
        },
        None => {
            if len > 32 {
                return Some("mask length must be <= 32".into());
            }
            let m = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            if n & !m != 0 {
                return Some(format!("non-network bits set in \"{s1}/{len}\""));
            }
        }
    }
    match q.kind {
        Some(Kind::Net) => host4(q.proto, q.dir, true),
        _ => Some("Mask syntax for networks only".into()),
    }
}

/// A dotted IPv4 network number as libpcap reads it (1 to 4 parts, left
/// justified).
fn ipv4_prefix(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut v = 0u32;
    for part in &parts {
        let b: u32 = part.parse().ok()?;
        if b > 255 {
            return None;
        }
        v = (v << 8) | b;
    }
    Some(v << (8 * (4 - parts.len() as u32)))
}

/// A host number, dotted or plain (libpcap's `gen_ncode`).
fn ncode(v: u32, p: &Prim, cx: &Ctx<'_>) -> Option<String> {
    let q = p.qual;
    match q.kind {
        None | Some(Kind::Host) | Some(Kind::Net) => {
            if q.proto == Some(Proto::Decnet) {
                return wlan_dir(q.dir, Applied::Address);
            }
            if q.proto == Some(Proto::Link) {
                return Some("illegal link layer address".into());
            }
            host4(q.proto, q.dir, q.kind == Some(Kind::Net))
        }
        Some(k @ (Kind::Port | Kind::PortRange)) => {
            let range = k == Kind::PortRange;
            if let Some(e) = port_proto(q.proto, range) {
                return Some(e);
            }
            if v > 65535 {
                return Some(format!("illegal port number {v} > 65535"));
            }
            // libpcap tests the link type before the direction.
            if cx.no_link_type() {
                return Some(super::other::not_implemented(cx));
            }
            wlan_dir(
                q.dir,
                if range {
                    Applied::PortRanges
                } else {
                    Applied::Ports
                },
            )
        }
        Some(Kind::Gateway) => Some("'gateway' requires a name".into()),
        Some(Kind::Proto) => proto_of(q.proto, q.dir),
        Some(Kind::ProtoChain) => protochain(q.proto, cx),
    }
}

/// An IPv6 address, with or without a prefix length (libpcap's
/// `gen_mcode6`).
fn mcode6(text: &str, len: Option<u32>, p: &Prim) -> Option<String> {
    let q = p.qual;
    let (addr, len) = match len {
        Some(l) => (text.split('/').next().unwrap_or(text).trim(), l),
        None => (text, 128),
    };
    if len > 128 {
        return Some("mask length must be <= 128".into());
    }
    if let Ok(a) = addr.parse::<std::net::Ipv6Addr>() {
        let bits = u128::from(a);
        let mask = if len == 0 {
            0
        } else {
            u128::MAX << (128 - len)
        };
        if bits & !mask != 0 {
            return Some(format!("non-network bits set in \"{addr}/{len}\""));
        }
    }
    match q.kind {
        None | Some(Kind::Host) if len != 128 => Some("Mask syntax for networks only".into()),
        None | Some(Kind::Host) | Some(Kind::Net) => {
            host6(q.proto, q.dir, q.kind == Some(Kind::Net))
        }
        Some(_) => Some("invalid qualifier against IPv6 address".into()),
    }
}

/// A MAC address (libpcap's `gen_ecode`).
fn ecode(p: &Prim, cx: &Ctx<'_>) -> Option<String> {
    let q = p.qual;
    if matches!(q.kind, None | Some(Kind::Host)) && q.proto == Some(Proto::Link) {
        return match cx.dlt_name() {
            "EN10MB" | "NETANALYZER" | "NETANALYZER_TRANSPARENT" => {
                wlan_dir(q.dir, Applied::EthernetMac)
            }
            "FDDI" | "IEEE802" | "IP_OVER_FC" => wlan_dir(q.dir, Applied::OtherMac),
            "IEEE802_11" | "PRISM_HEADER" | "IEEE802_11_RADIO_AVS" | "IEEE802_11_RADIO" | "PPI" => None,
            _ => Some("ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel".into()),
        };
    }
    Some("ethernet address used in non-ether expression".into())
}

/// An ARCnet address `$XX` (libpcap's `gen_acode`).
fn acode(p: &Prim, cx: &Ctx<'_>) -> Option<String> {
    let q = p.qual;
    match cx.dlt_name() {
        "ARCNET" | "ARCNET_LINUX" => {
            if matches!(q.kind, None | Some(Kind::Host)) && q.proto == Some(Proto::Link) {
                wlan_dir(q.dir, Applied::OtherMac)
            } else {
                Some("ARCnet address used in non-arc expression".into())
            }
        }
        _ => Some("aid supported only on ARCnet".into()),
    }
}
