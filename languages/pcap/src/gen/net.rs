//! Qualified primitives: `host`, `net`, `port`, `portrange`, `proto`,
//! `protochain`, `gateway`, for link, IPv4, IPv6, ARP and DECnet addresses.

use super::proto::{ethertype as et, ipproto, ld, mcmp};
use super::{err, GResult, Gen};
use crate::ast::{Dir, Kind, Prim, Proto, Span, Value};
use crate::names;
use sluice_ir::{CmpOp, Pred, Size, Val};

/// Combine the source and destination tests of a direction qualifier.
fn by_dir(dir: Option<Dir>, src: impl FnOnce() -> Pred, dst: impl FnOnce() -> Pred) -> Pred {
    match dir {
        Some(Dir::Src) => src(),
        Some(Dir::Dst) => dst(),
        Some(Dir::SrcAndDst) => Pred::and(vec![src(), dst()]),
        _ => Pred::or(vec![src(), dst()]),
    }
}

fn dir_name(d: Dir) -> &'static str {
    match d {
        Dir::Addr1 => "addr1",
        Dir::Addr2 => "addr2",
        Dir::Addr3 => "addr3",
        Dir::Addr4 => "addr4",
        Dir::Ra => "ra",
        Dir::Ta => "ta",
        _ => "src/dst",
    }
}

fn check_dir(dir: Option<Dir>, span: Span) -> GResult<()> {
    match dir {
        Some(d @ (Dir::Addr1 | Dir::Addr2 | Dir::Addr3 | Dir::Addr4 | Dir::Ra | Dir::Ta)) => err(
            span,
            format!("'{}' is only supported on 802.11", dir_name(d)),
        ),
        _ => Ok(()),
    }
}

/// The keyword of a primitive's kind.
fn kind_keyword(k: Kind) -> &'static str {
    match k {
        Kind::Host => "host",
        Kind::Net => "net",
        Kind::Port => "port",
        Kind::PortRange => "portrange",
        Kind::Gateway => "gateway",
        Kind::Proto => "proto",
        Kind::ProtoChain => "protochain",
    }
}

fn proto_name(p: Proto) -> String {
    format!("{p:?}").to_ascii_lowercase()
}

/// Which transport protocols a `port` primitive looks at.
#[derive(Clone, Copy)]
enum PortProtos {
    One(u32),
    All,
}

const PORT_PROTOS: [u32; 3] = [ipproto::TCP, ipproto::UDP, ipproto::SCTP];

impl Gen {
    pub(crate) fn prim(&mut self, p: &Prim) -> GResult<Pred> {
        let q = p.qual;
        let ipv4_net = match &p.value {
            Value::Cidr(a, _) => !matches!(**a, Value::Ipv6(..)),
            v => matches!(v, Value::Masked(..)),
        };
        if ipv4_net && q.kind.is_none() && q.dir.is_some() {
            // Without a kind an IPv4 network is a `net` only where nothing
            // qualifies it (libpcap master's grammar).
            return err(
                p.value_span,
                format!(
                    "'net' is needed before '{}' after a direction",
                    value_text(&p.value)
                ),
            );
        }
        if let (Value::Cidr(..) | Value::Masked(..), Some(kind)) = (&p.value, q.kind) {
            // An IPv4 network (`a/len`, `a mask m`) is a `net`: libpcap
            // master's grammar refuses ports and protocols for it, then
            // checks the value and refuses any other kind (`host
            // 192.168.1.0/24` is a mistake users make).
            let ipv4 = !matches!(&p.value, Value::Cidr(a, _) if matches!(**a, Value::Ipv6(..)));
            let kw = kind_keyword(kind);
            let form = match &p.value {
                Value::Cidr(..) => "prefix length",
                _ => "netmask",
            };
            if ipv4
                && matches!(
                    kind,
                    Kind::Port | Kind::PortRange | Kind::Proto | Kind::ProtoChain
                )
            {
                return err(
                    p.value_span,
                    format!("'{kw}' qualifier applied to IPv4 address and {form}"),
                );
            }
            if ipv4 && kind != Kind::Net && q.proto != Some(Proto::Decnet) {
                ipv4_value(&p.value, false, p.value_span)?;
                return err(
                    p.value_span,
                    format!(
                        "'{kw}' is not a valid qualifier for '{}'",
                        value_text(&p.value)
                    ),
                );
            }
        }
        match q.kind {
            Some(Kind::Port) => self.port(p, false),
            Some(Kind::PortRange) => self.port(p, true),
            Some(Kind::Proto) => self.proto_kind(p),
            Some(Kind::ProtoChain) => self.protochain(p),
            Some(Kind::Gateway) => err(
                p.value_span,
                "'gateway' needs a host's Ethernet address from /etc/ethers, which sluice does not read (no DNS either)",
            ),
            Some(Kind::Host) | Some(Kind::Net) | None => self.host_or_net(p),
        }
    }

    fn host_or_net(&mut self, p: &Prim) -> GResult<Pred> {
        let q = p.qual;
        let is_net = q.kind == Some(Kind::Net);
        let span = p.value_span;
        match &p.value {
            Value::Mac(mac) => {
                if is_net {
                    return err(span, "a MAC address cannot be a 'net'");
                }
                match q.proto {
                    // libpcap master wants `ether` (or `link`, `wlan`, ...)
                    // before a MAC address.
                    None => err(span, "Ethernet address used in non-ether expression"),
                    Some(Proto::Link) => self.link_host(*mac, q.dir, span),
                    Some(other) => err(
                        span,
                        format!(
                            "'{}' is not a valid qualifier for a MAC address",
                            proto_name(other)
                        ),
                    ),
                }
            }
            Value::Ipv6(addr, len) => {
                let len = match (len, is_net) {
                    (Some(l), _) if *l > 128 => {
                        return err(span, format!("mask length must be <= 128, not {l}"))
                    }
                    (Some(l), _) => *l,
                    (None, _) => 128,
                };
                if len < 128 && !is_net {
                    return err(span, "an IPv6 address with a prefix length needs 'net'");
                }
                check_prefix6(addr, len, span)?;
                match q.proto {
                    None | Some(Proto::Ip6) => {
                        check_dir(q.dir, span)?;
                        Ok(self.ip6_host(addr, len, q.dir))
                    }
                    Some(other) => err(
                        span,
                        format!(
                            "'{}' is not a valid qualifier for an IPv6 address",
                            proto_name(other)
                        ),
                    ),
                }
            }
            Value::Dotted { .. } | Value::Num(_) | Value::Cidr(..) | Value::Masked(..) => {
                if q.proto == Some(Proto::Decnet) {
                    return self.decnet_host(p);
                }
                let (addr, mask) = ipv4_value(&p.value, is_net, span)?;
                self.ipv4_host(addr, mask, q.proto, q.dir, span)
            }
            Value::Name(n) => {
                if q.kind.is_none() {
                    if let Some(pred) = self.bare_name(n, q.proto, span)? {
                        return Ok(pred);
                    }
                }
                match (&self.resolver, is_net) {
                    (Some(r), false) => {
                        let r = r.clone();
                        self.named_host(n, r.as_ref(), p, span)
                    }
                    (Some(_), true) => err(
                        span,
                        format!("'{n}' is a network name; sluice resolves host names only: give an address"),
                    ),
                    (None, _) => err(
                        span,
                        format!(
                            "'{n}' is a host name; sluice resolves no names here (no DNS): give an address"
                        ),
                    ),
                }
            }
            Value::Arcnet(a) => match q.proto {
                None | Some(Proto::Link) if !is_net => self.arcnet_host(*a, q.dir, span),
                _ => err(span, "ARCnet addresses are only supported as link hosts"),
            },
        }
    }

    /// `host NAME`: every address the resolver gives, as libpcap does
    /// (IPv4 ones as `host A` with the qualifiers, also testing ARP and
    /// RARP without a protocol; IPv6 ones as `ip6 host A`), or-ed.
    fn named_host(
        &self,
        name: &str,
        r: &dyn crate::resolve::Resolver,
        p: &Prim,
        span: Span,
    ) -> GResult<Pred> {
        let q = p.qual;
        let (v4, v6) = match q.proto {
            None => (true, true),
            Some(Proto::Ip | Proto::Arp | Proto::Rarp) => (true, false),
            Some(Proto::Ip6) => (false, true),
            Some(Proto::Link) => {
                return err(
                    span,
                    format!("'{name}': sluice reads no /etc/ethers: give a MAC address"),
                )
            }
            Some(other) => {
                return err(
                    span,
                    format!(
                        "'{}' is not a valid qualifier for a host name",
                        proto_name(other)
                    ),
                )
            }
        };
        let addrs = r
            .host(name)
            .or_else(|why| err(span, format!("cannot resolve host name '{name}': {why}")))?;
        let mut preds = Vec::new();
        for a in addrs {
            match a {
                std::net::IpAddr::V4(a) if v4 => {
                    preds.push(self.ipv4_host(u32::from(a), u32::MAX, q.proto, q.dir, span)?)
                }
                std::net::IpAddr::V6(a) if v6 => {
                    check_dir(q.dir, span)?;
                    preds.push(self.ip6_host(&a.octets(), 128, q.dir));
                }
                _ => {}
            }
        }
        if preds.is_empty() {
            return err(
                span,
                format!("unknown host '{name}' for specified address family"),
            );
        }
        Ok(Pred::or(preds))
    }

    /// A name after `proto` qualifiers alone, e.g. `ether \ip`? libpcap
    /// treats only host names here; nothing but DNS could resolve it.
    fn bare_name(&self, _n: &str, _p: Option<Proto>, _span: Span) -> GResult<Option<Pred>> {
        Ok(None)
    }

    fn link_host(&self, mac: [u8; 6], dir: Option<Dir>, span: Span) -> GResult<Pred> {
        if self.off.field == crate::link::ProtoField::Ieee80211 {
            return Ok(self.wlan_host(mac, dir));
        }
        check_dir(dir, span)?;
        let Some((src, dst)) = self.off.macs.clone() else {
            return err(
                span,
                format!("Ethernet addresses are not supported on {}", self.off.dlt),
            );
        };
        Ok(by_dir(
            dir,
            || self.mac_eq(&src, mac),
            || self.mac_eq(&dst, mac),
        ))
    }

    fn ipv4_host(
        &self,
        addr: u32,
        mask: u32,
        proto: Option<Proto>,
        dir: Option<Dir>,
        span: Span,
    ) -> GResult<Pred> {
        check_dir(dir, span)?;
        let net = self.off.net.clone();
        let one = |ethertype: u32, src_off: u32, dst_off: u32| {
            // A zero mask (net 0/0) tests nothing and loads nothing (libpcap master).
            let cmp = |off: u32| {
                if mask == 0 {
                    Pred::True
                } else {
                    mcmp(ld(&net, off, Size::Word), mask, addr)
                }
            };
            Pred::and(vec![
                self.linktype(ethertype),
                by_dir(dir, || cmp(src_off), || cmp(dst_off)),
            ])
        };
        match proto {
            // Inside MPLS only IPv4 can follow (libpcap tests no ARP there).
            None if self.off.mpls_depth > 0 => Ok(one(et::IP, 12, 16)),
            None => Ok(Pred::or(vec![
                one(et::IP, 12, 16),
                one(et::ARP, 14, 24),
                one(et::RARP, 14, 24),
            ])),
            Some(Proto::Ip) => Ok(one(et::IP, 12, 16)),
            Some(Proto::Arp) => Ok(one(et::ARP, 14, 24)),
            Some(Proto::Rarp) => Ok(one(et::RARP, 14, 24)),
            Some(Proto::Link) => err(span, "illegal link layer address"),
            Some(other) => err(
                span,
                format!(
                    "'{}' is not a valid qualifier for an IPv4 address",
                    proto_name(other)
                ),
            ),
        }
    }

    fn ip6_host(&self, addr: &[u8; 16], len: u32, dir: Option<Dir>) -> Pred {
        let net = self.off.net.clone();
        let cmp = |base: u32| {
            let mut parts = Vec::with_capacity(4);
            for w in 0..4u32 {
                let bits = len.saturating_sub(w * 32).min(32);
                let mask = if bits == 0 {
                    0
                } else {
                    u32::MAX << (32 - bits)
                };
                let i = (w * 4) as usize;
                let word = u32::from_be_bytes([addr[i], addr[i + 1], addr[i + 2], addr[i + 3]]);
                let load = ld(&net, base + w * 4, Size::Word);
                parts.push(if mask == 0 {
                    Pred::True
                } else if mask == u32::MAX {
                    Pred::eq(load, word & mask)
                } else {
                    Pred::eq(
                        Val::Bin(
                            sluice_ir::BinOp::And,
                            Box::new(load),
                            Box::new(Val::Const(mask)),
                        ),
                        word & mask,
                    )
                });
            }
            Pred::and(parts)
        };
        Pred::and(vec![
            self.linktype(et::IPV6),
            by_dir(dir, || cmp(8), || cmp(24)),
        ])
    }

    fn decnet_host(&self, p: &Prim) -> GResult<Pred> {
        let span = p.value_span;
        if p.qual.kind == Some(Kind::Net) {
            return err(span, "'decnet' is not a valid qualifier for 'net'");
        }
        let addr = match &p.value {
            Value::Dotted { text, .. } => parse_decnet(text),
            _ => None,
        };
        let Some(addr) = addr else {
            return err(
                span,
                format!("invalid DECnet address '{}'", value_text(&p.value)),
            );
        };
        check_dir(p.qual.dir, span)?;
        // The address is stored little-endian in the packet.
        let want = (addr as u16).swap_bytes() as u32;
        let net = self.off.net.clone();
        // Data packet headers: short (flags & 7 == 2), padded short
        // (flags 0x81.., & 0xff07 == 0x8102), long (6), padded long (0x8106).
        let one = |short_off: u32, long_off: u32| {
            Pred::or(vec![
                Pred::and(vec![
                    mcmp(ld(&net, 2, Size::Byte), 0x7, 2),
                    Pred::eq(ld(&net, short_off, Size::Half), want),
                ]),
                Pred::and(vec![
                    mcmp(ld(&net, 2, Size::Half), 0xff07, 0x8102),
                    Pred::eq(ld(&net, short_off + 1, Size::Half), want),
                ]),
                Pred::and(vec![
                    mcmp(ld(&net, 2, Size::Byte), 0x7, 6),
                    Pred::eq(ld(&net, long_off, Size::Half), want),
                ]),
                Pred::and(vec![
                    mcmp(ld(&net, 2, Size::Half), 0xff07, 0x8106),
                    Pred::eq(ld(&net, long_off + 1, Size::Half), want),
                ]),
            ])
        };
        let lt = self.linktype(et::DECNET);
        Ok(match p.qual.dir {
            Some(Dir::Src) => Pred::and(vec![lt, one(5, 17)]),
            Some(Dir::Dst) => Pred::and(vec![lt, one(3, 9)]),
            Some(Dir::SrcAndDst) => Pred::and(vec![
                Pred::and(vec![lt.clone(), one(5, 17)]),
                Pred::and(vec![lt, one(3, 9)]),
            ]),
            _ => Pred::or(vec![
                Pred::and(vec![lt.clone(), one(5, 17)]),
                Pred::and(vec![lt, one(3, 9)]),
            ]),
        })
    }

    fn port(&mut self, p: &Prim, range: bool) -> GResult<Pred> {
        let span = p.value_span;
        let q = p.qual;
        check_dir(q.dir, span)?;
        let (v4, v6, protos) = match q.proto {
            None => (true, true, PortProtos::All),
            Some(Proto::Tcp) => (true, true, PortProtos::One(ipproto::TCP)),
            Some(Proto::Udp) => (true, true, PortProtos::One(ipproto::UDP)),
            Some(Proto::Sctp) => (true, true, PortProtos::One(ipproto::SCTP)),
            Some(other) => {
                return err(
                    span,
                    format!(
                        "'{}' is not a valid qualifier for 'port'",
                        proto_name(other)
                    ),
                )
            }
        };
        let qualified = match protos {
            PortProtos::One(x) => Some(x),
            PortProtos::All => None,
        };
        let (lo, hi, transport) = if range {
            port_range(&p.value, qualified, span)?
        } else {
            let (port, t) = port_value(&p.value, qualified, span)?;
            (port, port, t)
        };
        // A service name known for one transport only restricts the test to it.
        let protos = match transport {
            Some(x) => PortProtos::One(x),
            None => PortProtos::All,
        };
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let test = |v: Val| {
            if lo == hi {
                Pred::eq(v, lo)
            } else {
                Pred::and(vec![
                    Pred::cmp(CmpOp::Ge, v.clone(), Val::Const(lo)),
                    Pred::not(Pred::cmp(CmpOp::Gt, v, Val::Const(hi))),
                ])
            }
        };
        let list: Vec<u32> = match protos {
            PortProtos::One(x) => vec![x],
            PortProtos::All => PORT_PROTOS.to_vec(),
        };
        // libpcap's shape: the transport protocols, then one test of the
        // ports (what its optimiser can prove about the program, and so
        // what it refuses, depends on it).
        let net = self.off.net.clone();
        let mut alts = Vec::new();
        if v6 {
            let nh = ld(&net, 6, Size::Byte);
            alts.push(Pred::and(vec![
                self.linktype(et::IPV6),
                Pred::or(list.iter().map(|&x| Pred::eq(nh.clone(), x)).collect()),
                by_dir(
                    q.dir,
                    || test(ld(&net, 40, Size::Half)),
                    || test(ld(&net, 42, Size::Half)),
                ),
            ]));
        }
        if v4 {
            let proto = ld(&net, 9, Size::Byte);
            alts.push(Pred::and(vec![
                self.linktype(et::IP),
                Pred::or(list.iter().map(|&x| Pred::eq(proto.clone(), x)).collect()),
                self.ip_not_frag(),
                by_dir(
                    q.dir,
                    || test(self.transport_load(0, Size::Half)),
                    || test(self.transport_load(2, Size::Half)),
                ),
            ]));
        }
        Ok(Pred::or(alts))
    }

    /// libpcap master's range checks of a link-layer protocol number,
    /// which depend on the link's protocol field: an LLC SAP (up to 1500)
    /// must fit a byte and an Ethernet type 16 bits where the field holds
    /// them, PPP and Cisco HDLC protocols 16 bits; links without such a
    /// field check nothing (the test is just false).
    fn check_link_proto(&self, n: u32, span: Span) -> GResult<()> {
        use crate::link::{LinkType, ProtoField as F};
        let (sap, max) = match self.off.field {
            F::Sll if self.off.link_dlt == LinkType::LINUX_SLL2 => (false, "EtherType"),
            F::EtherType | F::Llc | F::Ieee80211 | F::Sll | F::SunAtm | F::LaneEther => {
                (true, "EtherType")
            }
            F::PlainEtherType => (false, "EtherType"),
            F::Ppp | F::PppBsdos => (false, "PPP protocol"),
            F::CiscoHdlc => (false, "HDLC protocol"),
            _ => return Ok(()),
        };
        if sap && n <= et::ETHERMTU && n > 0xff {
            return err(span, format!("LLC DSAP {n} greater than maximum 255"));
        }
        if n > 0xffff {
            return err(span, format!("{max} {n} greater than maximum 65535"));
        }
        Ok(())
    }

    fn proto_kind(&mut self, p: &Prim) -> GResult<Pred> {
        let span = p.value_span;
        let q = p.qual;
        let num = |max: u32, what: &str| -> GResult<u32> {
            match &p.value {
                Value::Num(n) if *n <= max => Ok(*n),
                Value::Num(n) => err(span, format!("{what} {n} greater than maximum {max}")),
                v => err(
                    span,
                    format!("expected a number, found '{}'", value_text(v)),
                ),
            }
        };
        match q.proto {
            None => {
                let n = self.ip_proto_number(&p.value, span)?;
                Ok(Pred::or(vec![self.ip_proto(n), self.ip6_proto(n)]))
            }
            Some(Proto::Ip) => {
                let n = self.ip_proto_number(&p.value, span)?;
                Ok(self.ip_proto(n))
            }
            Some(Proto::Ip6) => {
                let n = self.ip_proto_number(&p.value, span)?;
                Ok(self.ip6_proto(n))
            }
            Some(Proto::Link) => {
                let n = match &p.value {
                    Value::Num(n) => *n,
                    Value::Name(name) => match names::ether_type(name)
                        .map(u32::from)
                        .or_else(|| names::llc_sap(name).map(u32::from))
                    {
                        Some(v) => v,
                        None => return err(span, format!("unknown ether proto '{name}'")),
                    },
                    v => {
                        return err(
                            span,
                            format!("expected a protocol, found '{}'", value_text(v)),
                        )
                    }
                };
                self.check_link_proto(n, span)?;
                Ok(self.linktype(n))
            }
            Some(Proto::Iso) => {
                let n = match &p.value {
                    Value::Name(name) => match name.as_str() {
                        "clnp" => 0x81,
                        "esis" | "es-is" => 0x82,
                        "isis" | "is-is" => 0x83,
                        _ => return err(span, format!("unknown ISO protocol '{name}'")),
                    },
                    _ => num(255, "ISO protocol")?,
                };
                Ok(Pred::and(vec![
                    self.linktype(et::SAP_ISONS),
                    Pred::eq(self.osi_load(0), n),
                ]))
            }
            Some(Proto::Isis) => {
                let n = num(31, "IS-IS PDU type")?;
                Ok(self.isis_pdu(&[n]))
            }
            Some(other) => err(
                span,
                format!(
                    "'{}' is not a valid qualifier for 'proto'",
                    proto_name(other)
                ),
            ),
        }
    }

    fn ip_proto_number(&self, v: &Value, span: Span) -> GResult<u32> {
        match v {
            Value::Num(n) if *n <= 255 => Ok(*n),
            Value::Num(n) => err(span, format!("IP protocol {n} greater than maximum 255")),
            Value::Name(name) => match names::ip_protocol(name) {
                Some(n) => Ok(n as u32),
                None => err(span, format!("unknown IP protocol '{name}'")),
            },
            v => err(
                span,
                format!("expected a protocol, found '{}'", value_text(v)),
            ),
        }
    }

    fn protochain(&mut self, p: &Prim) -> GResult<Pred> {
        let span = p.value_span;
        let n = self.ip_proto_number(&p.value, span)? as u8;
        if !self.off.net.is_const() {
            return err(
                span,
                "'protochain' not supported with variable length headers",
            );
        }
        // Its loop is a backward jump, which libpcap's optimiser cannot
        // handle: libpcap turns it off, even where the link makes the
        // test false (`ip6 protochain 6` on IPV4 rejects every packet
        // without an error).
        if matches!(p.qual.proto, None | Some(Proto::Ip) | Some(Proto::Ip6)) {
            self.no_optimize.set(true);
        }
        let v4 = || {
            Pred::and(vec![
                self.linktype(et::IP),
                Pred::ProtoChain {
                    v6: false,
                    start: self.off.net.clone(),
                    proto: n,
                },
            ])
        };
        let v6 = || {
            Pred::and(vec![
                self.linktype(et::IPV6),
                Pred::ProtoChain {
                    v6: true,
                    start: self.off.net.clone(),
                    proto: n,
                },
            ])
        };
        match p.qual.proto {
            None => Ok(Pred::or(vec![v4(), v6()])),
            Some(Proto::Ip) => Ok(v4()),
            Some(Proto::Ip6) => Ok(v6()),
            Some(other) => err(
                span,
                format!(
                    "'{}' is not a valid qualifier for 'protochain'",
                    proto_name(other)
                ),
            ),
        }
    }
}

/// IPv4 address and mask of a host or net value.
fn ipv4_value(v: &Value, is_net: bool, span: Span) -> GResult<(u32, u32)> {
    match v {
        Value::Num(n) => {
            if is_net {
                let (mut a, mut m) = (*n, u32::MAX);
                while a != 0 && a & 0xff00_0000 == 0 {
                    a <<= 8;
                    m <<= 8;
                }
                Ok((a, m))
            } else {
                Ok((*n, u32::MAX))
            }
        }
        Value::Dotted { addr, bits, text } => {
            if *bits > 32
                || text
                    .split('.')
                    .any(|p| p.parse::<u32>().map_or(true, |x| x > 255))
            {
                return err(span, format!("invalid IPv4 address '{text}'"));
            }
            let shift = 32 - bits;
            Ok((
                addr.checked_shl(shift).unwrap_or(0),
                u32::MAX.checked_shl(shift).unwrap_or(0),
            ))
        }
        Value::Cidr(a, len) => {
            if *len > 32 {
                return err(span, format!("mask length must be <= 32, not {len}"));
            }
            let addr = full_ipv4(a, span)?;
            let mask = if *len == 0 { 0 } else { u32::MAX << (32 - len) };
            if addr & !mask != 0 {
                return err(
                    span,
                    format!("non-network bits set in \"{}/{len}\"", value_text(a)),
                );
            }
            Ok((addr, mask))
        }
        Value::Masked(a, m) => {
            let addr = full_ipv4(a, span)?;
            let mask = full_ipv4(m, span)?;
            if addr & !mask != 0 {
                return err(
                    span,
                    format!("non-network bits set in \"{}\"", value_text(a)),
                );
            }
            Ok((addr, mask))
        }
        v => err(
            span,
            format!("expected an IPv4 address, found '{}'", value_text(v)),
        ),
    }
}

/// An IPv4 value in `a/len` or `a mask m`: short forms are left-aligned.
fn full_ipv4(v: &Value, span: Span) -> GResult<u32> {
    match v {
        Value::Dotted { addr, bits, text } => {
            if text
                .split('.')
                .any(|p| p.parse::<u32>().map_or(true, |x| x > 255))
            {
                return err(span, format!("invalid IPv4 address '{text}'"));
            }
            Ok(addr.checked_shl(32 - bits).unwrap_or(0))
        }
        Value::Num(n) => Ok(*n),
        v => err(
            span,
            format!("expected an IPv4 address, found '{}'", value_text(v)),
        ),
    }
}

fn check_prefix6(addr: &[u8; 16], len: u32, span: Span) -> GResult<()> {
    let full = u128::from_be_bytes(*addr);
    let mask = if len == 0 {
        0
    } else {
        u128::MAX << (128 - len)
    };
    if full & !mask != 0 {
        return err(span, "non-network bits set in the IPv6 net");
    }
    Ok(())
}

fn parse_decnet(text: &str) -> Option<u32> {
    let (a, n) = text.split_once('.')?;
    let area: u32 = a.parse().ok()?;
    let node: u32 = n.parse().ok()?;
    (area <= 63 && node <= 1023).then_some(area << 10 | node)
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Num(n) => n.to_string(),
        Value::Name(s) => s.clone(),
        Value::Dotted { text, .. } => text.clone(),
        Value::Cidr(a, l) => format!("{}/{l}", value_text(a)),
        Value::Masked(a, m) => format!("{} mask {}", value_text(a), value_text(m)),
        Value::Ipv6(a, l) => {
            let s = std::net::Ipv6Addr::from(*a).to_string();
            match l {
                Some(l) => format!("{s}/{l}"),
                None => s,
            }
        }
        Value::Mac(m) => m
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        Value::Arcnet(a) => format!("${a:02x}"),
    }
}

/// The transport protocols a service name is defined for, and its port:
/// `Some(proto)` when only one of them has it, `None` when TCP and UDP agree.
/// A service name as libpcap looks it up (`getservbyname` for TCP, then
/// for UDP; SCTP entries are never found): its port, the TCP one where
/// both exist, and the transport it names, `None` where TCP and UDP give
/// the same port (then any transport).
fn lookup_service(name: &str) -> Option<(u32, Option<u32>)> {
    let sp = names::service(name)?;
    match (sp.tcp, sp.udp) {
        (Some(t), Some(u)) if t == u => Some((t as u32, None)),
        (Some(t), _) => Some((t as u32, Some(ipproto::TCP))),
        (None, Some(u)) => Some((u as u32, Some(ipproto::UDP))),
        (None, None) => None,
    }
}

fn transport_name(x: u32) -> &'static str {
    match x {
        ipproto::TCP => "tcp",
        ipproto::UDP => "udp",
        _ => "sctp",
    }
}

/// The transport a port (or range) by name stands for under the
/// qualifier `proto`: libpcap refuses a name that is another transport's
/// (`udp port ssh`: "port 'ssh' is tcp").
fn name_transport(
    named: Option<u32>,
    proto: Option<u32>,
    what: &str,
    span: Span,
) -> GResult<Option<u32>> {
    match (named, proto) {
        (Some(n), Some(q)) if n != q => err(span, format!("{what} is {}", transport_name(n))),
        (_, Some(q)) => Ok(Some(q)),
        (n, None) => Ok(n),
    }
}

/// A port: a number, or a service name; and the transport a name restricts
/// it to.
fn port_value(v: &Value, proto: Option<u32>, span: Span) -> GResult<(u32, Option<u32>)> {
    match v {
        Value::Num(n) if *n <= 65535 => Ok((*n, proto)),
        Value::Num(n) => err(span, format!("port {n} greater than maximum 65535")),
        Value::Name(name) => {
            let Some((port, named)) = lookup_service(name) else {
                return err(span, format!("unknown port name '{name}'"));
            };
            let t = name_transport(named, proto, &format!("port '{name}'"), span)?;
            Ok((port, t))
        }
        v => err(span, format!("expected a port, found '{}'", value_text(v))),
    }
}

/// One side of a port range: a number (decimal, `0x` hex, `0` octal) or
/// a service name, and the transport a name gives.
fn range_side(x: &str, range: &str, span: Span) -> GResult<(u32, Option<u32>)> {
    let number = if let Some(h) = x.strip_prefix("0x").or_else(|| x.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if x.len() > 1 && x.starts_with('0') {
        u32::from_str_radix(&x[1..], 8).ok()
    } else {
        x.parse::<u32>().ok()
    };
    match number {
        Some(n) if n > 65535 => err(span, format!("port {n} greater than maximum 65535")),
        Some(n) => Ok((n, None)),
        None => match lookup_service(x) {
            Some((port, named)) => Ok((port, named)),
            None => err(
                span,
                format!("'{x}' is not a valid port (in range '{range}')"),
            ),
        },
    }
}

/// A port range: a number (a range of one), or `A-B` with exactly one
/// hyphen, each side a number or a service name, as libpcap reads it (a
/// service name with a hyphen cannot be a side); and the transport the
/// names restrict it to.
fn port_range(v: &Value, proto: Option<u32>, span: Span) -> GResult<(u32, u32, Option<u32>)> {
    match v {
        Value::Num(_) => {
            let (p, t) = port_value(v, proto, span)?;
            Ok((p, p, t))
        }
        Value::Name(name) => {
            let Some((a, b)) = name.split_once('-') else {
                return err(span, format!("port range '{name}' contains no hyphen"));
            };
            if b.contains('-') {
                return err(
                    span,
                    format!("port range '{name}' contains more than one hyphen"),
                );
            }
            if a.is_empty() {
                return err(span, format!("port range '{name}' has no starting port"));
            }
            if b.is_empty() {
                return err(span, format!("port range '{name}' has no ending port"));
            }
            let (pa, ta) = range_side(a, name, span)?;
            let (pb, tb) = range_side(b, name, span)?;
            // Sides of different transports make a range of any.
            let named = if ta == tb { ta } else { None };
            let what = format!("port in range '{name}'");
            let t = name_transport(named, proto, &what, span)?;
            Ok((pa, pb, t))
        }
        v => err(
            span,
            format!("expected a port range, found '{}'", value_text(v)),
        ),
    }
}

impl Gen {
    /// A load at `off` into the transport header after an IPv4 header.
    pub(crate) fn transport_load(&self, off: u32, size: Size) -> Val {
        self.transport_load_at(Val::Const(off), size)
    }

    /// A load at a computed offset into the transport header after an IPv4 header.
    pub(crate) fn transport_load_at(&self, off: Val, size: Size) -> Val {
        let net = &self.off.net;
        let hl = match net {
            Val::Const(k) => Val::ip_hdr_len(*k),
            net => Val::bin(
                sluice_ir::BinOp::Shl,
                Val::bin(
                    sluice_ir::BinOp::And,
                    Val::load(net.clone(), 0, Size::Byte),
                    Val::Const(0xf),
                ),
                Val::Const(2),
            ),
        };
        let base = match off {
            Val::Const(0) => hl,
            Val::Const(k) => return Self::at(hl, net, k, size),
            off => Val::bin(sluice_ir::BinOp::Add, off, hl),
        };
        Self::at(base, net, 0, size)
    }

    /// A load at `base + net + k`, folding a constant `net` into the offset.
    pub(crate) fn at(base: Val, net: &Val, k: u32, size: Size) -> Val {
        match net {
            Val::Const(n) => Val::Load {
                base: Box::new(base),
                offset: n.wrapping_add(k),
                size,
            },
            net => Val::Load {
                base: Box::new(Val::bin(sluice_ir::BinOp::Add, base, net.clone())),
                offset: k,
                size,
            },
        }
    }
}
