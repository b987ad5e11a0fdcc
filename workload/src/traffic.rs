//! The traffic generator: Ethernet frames between the universe's customers
//! and the outside world.
//!
//! Packet `i` is drawn from its own random stream: a customer (by the same
//! law filters pick theirs), a local host of it and a peer (another
//! customer's host or an outside address), the family (IPv4, IPv6, ARP or
//! another EtherType), the encapsulation (802.1Q, QinQ or an MPLS stack
//! with the customer's VLAN or label), the transport and ports (the
//! customer's services, its port range or well-known ones), TCP flags, a
//! frame length, and a payload that starts with what the port's protocol
//! or the customer's application sends (HTTP, TLS, DNS, the customer's
//! payload words). Some IPv4 and IPv6 packets are fragments, a few carry
//! IP options or IPv6 extension headers, and a few are truncated.
//!
//! Lengths and headers are consistent (IHL, total length, IPv6 payload
//! length, UDP length, TCP data offset, SCTP chunk lengths); the IPv4
//! header checksum is right, the transport checksums are not computed.

use crate::rng::{Rng, Stream};
use crate::universe::{Customer, Transport, Universe, TCP_KNOWN, UDP_KNOWN};
use std::net::{Ipv4Addr, Ipv6Addr};

const IPPROTO_ICMP: u8 = 1;
const IPPROTO_IGMP: u8 = 2;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_GRE: u8 = 47;
const IPPROTO_ESP: u8 = 50;
const IPPROTO_ICMPV6: u8 = 58;
const IPPROTO_OSPF: u8 = 89;
const IPPROTO_SCTP: u8 = 132;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;
const ECE: u8 = 0x40;
const CWR: u8 = 0x80;

/// Organisationally unique identifiers hosts' MAC addresses start with.
const OUIS: &[[u8; 3]] = &[
    [0x00, 0x1b, 0x21],
    [0x3c, 0xfd, 0xfe],
    [0x00, 0x50, 0x56],
    [0x52, 0x54, 0x00],
    [0xf8, 0xbc, 0x12],
    [0x00, 0x25, 0x90],
];

/// The transport of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum L4 {
    Tcp,
    Udp,
    Icmp,
    Gre,
    Sctp,
    Esp,
    Other,
}

/// Who talks: addresses of both ends, the server's port and whether the
/// packet goes from client to server.
struct Talk<A> {
    local: A,
    remote: A,
    /// The remote end's customer, when it is one.
    peer: Option<Customer>,
    local_is_server: bool,
    request: bool,
}

impl<A: Copy> Talk<A> {
    /// (source, destination).
    fn ends(&self) -> (A, A) {
        let (client, server) = if self.local_is_server {
            (self.remote, self.local)
        } else {
            (self.local, self.remote)
        };
        if self.request {
            (client, server)
        } else {
            (server, client)
        }
    }
}

/// Packet `i` of the universe: (captured bytes, length on the wire).
pub(crate) fn packet(u: &Universe, i: usize) -> (Vec<u8>, u32) {
    let mut r = Rng::new(u.seed, Stream::Packet, i as u64);
    let cust = u.customer(u.traffic_customer(&mut r));
    let m = &u.mix;
    let other = 1.0 - m.ipv6 - m.arp - m.other_ethertypes;
    let family = r.weighted_pick(&[
        (weight(other), 4u8),
        (weight(m.ipv6), 6),
        (weight(m.arp), 0),
        (weight(m.other_ethertypes), 1),
    ]);
    // Tags: none, 802.1Q, QinQ or (IP only) MPLS.
    let enc = r.unit();
    let mut vlans: Vec<(u16, u16)> = Vec::new();
    let mut labels: Vec<u32> = Vec::new();
    if enc < m.vlan {
        vlans.push((0x8100, cust.vlan));
    } else if enc < m.vlan + m.qinq {
        let outer = if r.chance(0.6) { 0x88a8 } else { 0x8100 };
        vlans.push((outer, cust.svlan));
        vlans.push((0x8100, cust.vlan));
    } else if enc < m.vlan + m.qinq + m.mpls && (family == 4 || family == 6) {
        if r.chance(0.5) {
            labels.push(*r.pick(&u.transport_labels));
        }
        labels.push(cust.label);
    }
    let overhead = 14 + 4 * vlans.len() + 4 * labels.len();
    let target = frame_length(&mut r).max(60);
    let budget = target.saturating_sub(overhead);
    let (ethertype, l3, macs) = match family {
        4 => {
            let talk = talk(&mut r, u, &cust, Customer::pick_host, Universe::external_v4);
            let (s, d) = talk.ends();
            let l3 = ipv4_packet(&mut r, u, &cust, &talk, budget);
            (0x0800, l3, (mac(u, &d.octets()), mac(u, &s.octets())))
        }
        6 => {
            let talk = talk(
                &mut r,
                u,
                &cust,
                Customer::pick_host6,
                Universe::external_v6,
            );
            let (s, d) = talk.ends();
            let l3 = ipv6_packet(&mut r, u, &cust, &talk, budget);
            (0x86dd, l3, (mac(u, &d.octets()), mac(u, &s.octets())))
        }
        0 => arp(&mut r, u, &cust),
        _ => other_ethertype(&mut r, budget),
    };
    let mut f = Vec::with_capacity(overhead + l3.len() + 4);
    f.extend_from_slice(&macs.0);
    f.extend_from_slice(&macs.1);
    for &(tpid, vid) in &vlans {
        let pcp = if r.chance(0.8) {
            0
        } else {
            r.range(1, 7) as u16
        };
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&((pcp << 13) | vid).to_be_bytes());
    }
    if labels.is_empty() {
        f.extend_from_slice(&ethertype.to_be_bytes());
    } else {
        f.extend_from_slice(&0x8847u16.to_be_bytes());
        for (k, &label) in labels.iter().enumerate() {
            let bottom = u32::from(k + 1 == labels.len());
            let entry = (label << 12) | (bottom << 8) | 64;
            f.extend_from_slice(&entry.to_be_bytes());
        }
    }
    f.extend_from_slice(&l3);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    let wire = f.len() as u32;
    if r.chance(m.truncated) {
        let snap = *r.pick(&[54usize, 64, 68, 96, 128, 200]);
        if snap < f.len() {
            f.truncate(snap);
        }
    }
    (f, wire)
}

/// A probability as an integer weight.
fn weight(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * 1_000_000.0).round() as u32
}

/// A frame length: many small frames (acknowledgements, DNS, pings), some
/// medium ones and a large share of full-sized ones.
fn frame_length(r: &mut Rng) -> usize {
    match r.weighted(&[35, 15, 12, 28, 10]) {
        0 => r.range(60, 90) as usize,
        1 => r.range(91, 300) as usize,
        2 => r.range(301, 999) as usize,
        3 => r.range(1000, 1513) as usize,
        _ => 1514,
    }
}

/// A MAC address for an IP address (the same address always has the same
/// MAC under one seed).
fn mac(u: &Universe, addr: &[u8]) -> [u8; 6] {
    let mut h = u.seed;
    for &b in addr {
        h = crate::rng::mix(h ^ u64::from(b)).wrapping_add(0x9e37);
    }
    let oui = OUIS[(h % OUIS.len() as u64) as usize];
    let v = (h >> 16).to_be_bytes();
    [oui[0], oui[1], oui[2], v[5], v[6], v[7]]
}

/// The peer customer, if this packet's peer is one.
fn peer(r: &mut Rng, u: &Universe) -> Option<Customer> {
    if r.chance(u.mix.peer_customer) {
        Some(u.customer(u.traffic_customer(r)))
    } else {
        None
    }
}

/// A conversation of customer `c` in one address family: a local host
/// (`host`), and a peer customer's host or an external one (`external`).
fn talk<A>(
    r: &mut Rng,
    u: &Universe,
    c: &Customer,
    host: fn(&Customer, &mut Rng) -> A,
    external: fn(&Universe, &mut Rng) -> A,
) -> Talk<A> {
    let local = host(c, r);
    let peer = peer(r, u);
    let remote = match &peer {
        Some(p) => host(p, r),
        None => external(u, r),
    };
    Talk {
        local,
        remote,
        peer,
        local_is_server: r.chance(0.6),
        request: r.chance(0.55),
    }
}

/// The transport of an IPv4 or IPv6 packet.
fn transport(r: &mut Rng, v6: bool) -> L4 {
    if v6 {
        r.weighted_pick(&[
            (60u32, L4::Tcp),
            (27, L4::Udp),
            (9, L4::Icmp),
            (2, L4::Sctp),
            (1, L4::Gre),
            (1, L4::Esp),
        ])
    } else {
        r.weighted_pick(&[
            (620u32, L4::Tcp),
            (250, L4::Udp),
            (60, L4::Icmp),
            (25, L4::Gre),
            (20, L4::Sctp),
            (15, L4::Esp),
            (10, L4::Other),
        ])
    }
}

/// Where a server port comes from, and so what its payload looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Service {
    /// A well-known port.
    Known,
    /// A customer's own application (custom port or port range), whose
    /// payloads start with the customer's words.
    Own {
        /// The customer's 4-byte word.
        word: u32,
        /// The customer's 2-byte message type.
        word16: u16,
    },
}

/// A server port of transport `t`: the server customer's custom service,
/// well-known service or port range, or a well-known port.
fn server_port(r: &mut Rng, server: Option<&Customer>, t: Transport) -> (u16, Service) {
    let known = |r: &mut Rng| match t {
        Transport::Tcp => r.weighted_pick(TCP_KNOWN),
        Transport::Udp => r.weighted_pick(UDP_KNOWN),
    };
    let Some(c) = server else {
        return (known(r), Service::Known);
    };
    let own = Service::Own {
        word: c.word,
        word16: c.word16,
    };
    match r.weighted(&[50, 20, 12, 18]) {
        0 => {
            let own_ports: Vec<u16> = c.custom.iter().filter(|s| s.0 == t).map(|s| s.1).collect();
            if own_ports.is_empty() {
                (c.custom[0].1, own)
            } else {
                (*r.pick(&own_ports), own)
            }
        }
        1 if !c.known.is_empty() => (r.pick(&c.known).1, Service::Known),
        2 => (
            r.range(u64::from(c.range.0), u64::from(c.range.1)) as u16,
            own,
        ),
        _ => (known(r), Service::Known),
    }
}

/// A client's port.
fn client_port(r: &mut Rng) -> u16 {
    match r.weighted(&[85, 10, 5]) {
        0 => r.range(32768, 60999) as u16,
        1 => r.range(1024, 32767) as u16,
        _ => r.range(49152, 65535) as u16,
    }
}

/// (source port, destination port, server port, whose service).
fn ports<A: Copy>(
    r: &mut Rng,
    c: &Customer,
    talk: &Talk<A>,
    t: Transport,
) -> (u16, u16, u16, Service) {
    let server = if talk.local_is_server {
        Some(c)
    } else {
        talk.peer.as_ref()
    };
    let (sp, svc) = server_port(r, server, t);
    let cp = client_port(r);
    if talk.request {
        (cp, sp, sp, svc)
    } else {
        (sp, cp, sp, svc)
    }
}

/// The transport header and payload: (IP protocol number, bytes).
fn l4_bytes<A: Copy>(
    r: &mut Rng,
    c: &Customer,
    talk: &Talk<A>,
    l4: L4,
    v6: bool,
    budget: usize,
) -> (u8, Vec<u8>) {
    match l4 {
        L4::Tcp => {
            let (s, d, sp, svc) = ports(r, c, talk, Transport::Tcp);
            (IPPROTO_TCP, tcp(r, s, d, sp, svc, talk.request, budget))
        }
        L4::Udp => {
            let (s, d, sp, svc) = ports(r, c, talk, Transport::Udp);
            (IPPROTO_UDP, udp(r, s, d, sp, svc, budget))
        }
        L4::Icmp if v6 => (IPPROTO_ICMPV6, icmp6(r, budget)),
        L4::Icmp => (IPPROTO_ICMP, icmp(r, budget)),
        L4::Sctp => (IPPROTO_SCTP, sctp(r, c, talk, budget)),
        L4::Gre => (IPPROTO_GRE, gre(r, budget)),
        L4::Esp => {
            let mut b = vec![0u8; budget.clamp(24, 1400)];
            r.fill(&mut b);
            b[..4].copy_from_slice(&(0x100 + r.below(4096) as u32).to_be_bytes());
            (IPPROTO_ESP, b)
        }
        L4::Other => {
            if r.chance(0.5) {
                (
                    IPPROTO_IGMP,
                    vec![0x16, 0, 0, 0, 239, 1, 1, r.range(1, 254) as u8],
                )
            } else {
                let mut b = vec![0u8; 44];
                r.fill(&mut b);
                b[0] = 2;
                b[1] = 1;
                b[2..4].copy_from_slice(&44u16.to_be_bytes());
                (IPPROTO_OSPF, b)
            }
        }
    }
}

/// An IPv4 packet of the talk within `budget` bytes (at least its headers).
fn ipv4_packet(
    r: &mut Rng,
    u: &Universe,
    c: &Customer,
    talk: &Talk<Ipv4Addr>,
    budget: usize,
) -> Vec<u8> {
    let options: &[u8] = if r.chance(0.02) {
        &[0x94, 0x04, 0x00, 0x00] // router alert
    } else {
        &[]
    };
    let hlen = 20 + options.len();
    let l4 = transport(r, false);
    let (proto, mut body) = l4_bytes(r, c, talk, l4, false, budget.saturating_sub(hlen));
    // Fragments: a first fragment keeps the transport header, a later one
    // carries data only.
    let mut frag: u16 = 0;
    if body.len() >= 24 && r.chance(u.mix.fragments) {
        if r.chance(0.5) {
            body.truncate(body.len() / 8 * 8);
            frag = 0x2000;
        } else {
            r.fill(&mut body);
            let more = if r.chance(0.5) { 0x2000 } else { 0 };
            frag = more | r.range(1, 185) as u16;
        }
    } else if proto == IPPROTO_TCP && r.chance(0.8) {
        frag = 0x4000; // don't fragment
    }
    let (src, dst) = talk.ends();
    let tos = dscp(r) | if r.chance(0.1) { 2 } else { 0 };
    let total = (hlen + body.len()) as u16;
    let ttl = r.weighted_pick(&[(50u32, 64u8), (30, 128), (5, 255), (15, 0)]);
    let ttl = if ttl == 0 { r.range(1, 63) as u8 } else { ttl };
    let mut p = Vec::with_capacity(hlen + body.len());
    p.push(0x40 | (hlen / 4) as u8);
    p.push(tos);
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&(r.next_u32() as u16).to_be_bytes());
    p.extend_from_slice(&frag.to_be_bytes());
    p.push(ttl);
    p.push(proto);
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(options);
    let sum = checksum(&p);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend_from_slice(&body);
    p
}

/// A DSCP byte (the ECN bits clear): mostly best effort, some EF, AF41,
/// AF11 and CS1.
fn dscp(r: &mut Rng) -> u8 {
    r.weighted_pick(&[(85u32, 0u8), (5, 0xb8), (4, 0x88), (3, 0x28), (3, 0x20)])
}

/// The Internet checksum of `b`.
pub(crate) fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|w| u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0)))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// An IPv6 packet of the talk within `budget` bytes.
fn ipv6_packet(
    r: &mut Rng,
    u: &Universe,
    c: &Customer,
    talk: &Talk<Ipv6Addr>,
    budget: usize,
) -> Vec<u8> {
    let l4 = transport(r, true);
    let ext_kind = if r.chance(u.mix.fragments) {
        44
    } else if r.chance(0.03) {
        *r.pick(&[0u8, 60])
    } else {
        255
    };
    let ext_len = if ext_kind == 255 { 0 } else { 8 };
    let (proto, mut body) = l4_bytes(r, c, talk, l4, true, budget.saturating_sub(40 + ext_len));
    let mut ext = Vec::new();
    match ext_kind {
        44 => {
            let later = body.len() >= 24 && r.chance(0.5);
            let (offset, more) = if later {
                r.fill(&mut body);
                (r.range(1, 180) as u16, r.chance(0.5))
            } else {
                body.truncate((body.len() / 8 * 8).max(8.min(body.len())));
                (0, true)
            };
            ext.extend_from_slice(&[proto, 0]);
            ext.extend_from_slice(&((offset << 3) | u16::from(more)).to_be_bytes());
            ext.extend_from_slice(&r.next_u32().to_be_bytes());
        }
        0 | 60 => ext.extend_from_slice(&[proto, 0, 1, 4, 0, 0, 0, 0]),
        _ => {}
    }
    let next = if ext.is_empty() { proto } else { ext_kind };
    let (src, dst) = talk.ends();
    let flow = if r.chance(0.5) {
        r.below(1 << 20) as u32
    } else {
        0
    };
    let first = (6u32 << 28) | (u32::from(dscp(r)) << 20) | flow;
    let plen = (ext.len() + body.len()) as u16;
    let mut p = Vec::with_capacity(40 + plen as usize);
    p.extend_from_slice(&first.to_be_bytes());
    p.extend_from_slice(&plen.to_be_bytes());
    p.push(next);
    p.push(*r.pick(&[64u8, 64, 255, 128]));
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    p.extend_from_slice(&ext);
    p.extend_from_slice(&body);
    p
}

/// TCP flags of a segment and whether it carries data.
fn tcp_flags(r: &mut Rng) -> (u8, bool) {
    r.weighted_pick(&[
        (6u32, (SYN, false)),
        (5, (SYN | ACK, false)),
        (25, (ACK, false)),
        (45, (PSH | ACK, true)),
        (10, (ACK, true)),
        (4, (FIN | ACK, false)),
        (3, (RST, false)),
        (2, (RST | ACK, false)),
        (1, (SYN | ECE | CWR, false)),
        (1, (URG | PSH | ACK, true)),
    ])
}

/// A TCP segment.
fn tcp(
    r: &mut Rng,
    sport: u16,
    dport: u16,
    server_port: u16,
    svc: Service,
    request: bool,
    budget: usize,
) -> Vec<u8> {
    let (flags, data) = tcp_flags(r);
    let options: Vec<u8> = if flags & SYN != 0 {
        let mut o = vec![2, 4, 0x05, 0xb4, 4, 2, 8, 10];
        o.extend_from_slice(&r.next_u64().to_be_bytes());
        o.extend_from_slice(&[1, 3, 3, 7]);
        o
    } else if r.chance(0.5) {
        let mut o = vec![1, 1, 8, 10];
        o.extend_from_slice(&r.next_u64().to_be_bytes());
        o
    } else {
        Vec::new()
    };
    let hlen = 20 + options.len();
    let mut p = Vec::with_capacity(budget.max(hlen));
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&r.next_u32().to_be_bytes());
    let ack = if flags & ACK != 0 { r.next_u32() } else { 0 };
    p.extend_from_slice(&ack.to_be_bytes());
    p.push(((hlen / 4) as u8) << 4);
    p.push(flags);
    p.extend_from_slice(&(r.range(512, 65535) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    p.extend_from_slice(&options);
    if data {
        let n = budget.saturating_sub(hlen).max(1);
        p.extend_from_slice(&tcp_payload(r, server_port, svc, request, n));
    }
    p
}

/// `n` bytes of a TCP payload: HTTP, TLS, the customer's word or noise.
fn tcp_payload(r: &mut Rng, server_port: u16, svc: Service, request: bool, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    r.fill(&mut b);
    // Customers' own applications speak their own protocol (starting with
    // the customer's word) or, a quarter of the time, HTTP.
    let own = match svc {
        Service::Own { word, .. } => Some(word),
        Service::Known => None,
    };
    let http = matches!(server_port, 80 | 8080 | 8000) || (own.is_some() && r.chance(0.25));
    let head: Vec<u8> = if http && request {
        let m = r.weighted_pick(&[(7u32, "GET "), (2, "POST "), (1, "PUT "), (1, "HEAD ")]);
        format!("{m}/{:x} HTTP/1.1\r\nHost: example\r\n\r\n", r.next_u32()).into_bytes()
    } else if http {
        b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n".to_vec()
    } else if matches!(server_port, 443 | 8443) {
        let t = if r.chance(0.9) { 0x17 } else { 0x16 };
        let l = (n.saturating_sub(5) as u16).to_be_bytes();
        vec![t, 3, 3, l[0], l[1]]
    } else {
        match own {
            Some(word) if r.chance(0.7) => word.to_be_bytes().to_vec(),
            _ => Vec::new(),
        }
    };
    let k = head.len().min(n);
    b[..k].copy_from_slice(&head[..k]);
    b
}

/// A UDP datagram.
fn udp(
    r: &mut Rng,
    sport: u16,
    dport: u16,
    server_port: u16,
    svc: Service,
    budget: usize,
) -> Vec<u8> {
    let n = if server_port == 53 {
        budget.saturating_sub(8).clamp(17, 512)
    } else {
        budget.saturating_sub(8).max(4)
    };
    let mut data = vec![0u8; n];
    r.fill(&mut data);
    if server_port == 53 {
        // A DNS header and a short name.
        let flags: u16 = if sport == 53 { 0x8180 } else { 0x0100 };
        data[2..4].copy_from_slice(&flags.to_be_bytes());
        data[4..12].copy_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
        data[12..17].copy_from_slice(&[3, b'w', b'w', b'w', 0]);
    } else if let Service::Own { word, word16 } = svc {
        match r.weighted(&[45, 30, 25]) {
            0 => data[..4].copy_from_slice(&word.to_be_bytes()),
            1 => data[..2].copy_from_slice(&word16.to_be_bytes()),
            _ => {}
        }
    }
    let mut p = Vec::with_capacity(8 + n);
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&((8 + n) as u16).to_be_bytes());
    p.extend_from_slice(&[0, 0]);
    p.extend_from_slice(&data);
    p
}

/// An ICMP message.
fn icmp(r: &mut Rng, budget: usize) -> Vec<u8> {
    let (t, code) = r.weighted_pick(&[
        (40u32, (8u8, 0u8)),
        (35, (0, 0)),
        (6, (3, 3)),
        (4, (3, 1)),
        (3, (3, 13)),
        (7, (11, 0)),
        (2, (5, 1)),
        (3, (13, 0)),
    ]);
    let n = if t == 8 || t == 0 {
        budget.clamp(8, 1480)
    } else {
        36
    };
    let mut p = vec![0u8; n];
    r.fill(&mut p);
    p[0] = t;
    p[1] = code;
    p[2] = 0;
    p[3] = 0;
    if t == 3 || t == 11 || t == 5 {
        // The start of the datagram the error is about.
        p[4..8].fill(0);
        p[8] = 0x45;
        p[9] = 0;
        p[10..12].copy_from_slice(&60u16.to_be_bytes());
        p[17] = *r.pick(&[IPPROTO_TCP, IPPROTO_UDP]);
    }
    p
}

/// An ICMPv6 message.
fn icmp6(r: &mut Rng, budget: usize) -> Vec<u8> {
    let (t, code) = r.weighted_pick(&[
        (35u32, (128u8, 0u8)),
        (30, (129, 0)),
        (12, (135, 0)),
        (10, (136, 0)),
        (5, (1, 4)),
        (3, (133, 0)),
        (2, (134, 0)),
        (3, (3, 0)),
    ]);
    let n = match t {
        128 | 129 => budget.clamp(8, 1440),
        135 | 136 => 32,
        133 => 16,
        134 => 64,
        _ => 48,
    };
    let mut p = vec![0u8; n];
    r.fill(&mut p);
    p[0] = t;
    p[1] = code;
    p[2] = 0;
    p[3] = 0;
    p
}

/// An SCTP packet: the common header and one DATA, INIT, SACK or
/// HEARTBEAT chunk.
fn sctp<A: Copy>(r: &mut Rng, c: &Customer, talk: &Talk<A>, budget: usize) -> Vec<u8> {
    let server = if r.chance(0.5) {
        *r.pick(&[2905u16, 3868, 36412, 38412, 9899])
    } else {
        c.custom[0].1
    };
    let client = if r.chance(0.5) {
        server
    } else {
        client_port(r)
    };
    let (s, d) = if talk.request {
        (client, server)
    } else {
        (server, client)
    };
    let mut p = Vec::with_capacity(budget.max(32));
    p.extend_from_slice(&s.to_be_bytes());
    p.extend_from_slice(&d.to_be_bytes());
    p.extend_from_slice(&r.next_u32().to_be_bytes());
    p.extend_from_slice(&[0, 0, 0, 0]);
    let kind = r.weighted(&[70, 8, 15, 7]);
    let mut chunk = match kind {
        0 => {
            let data = budget.saturating_sub(12 + 16).clamp(4, 1400) / 4 * 4;
            let mut ch = vec![0u8; 16 + data];
            r.fill(&mut ch);
            ch[0] = 0;
            ch[1] = 3;
            ch
        }
        1 => {
            let mut ch = vec![0u8; 20];
            r.fill(&mut ch);
            ch[0] = 1;
            ch[1] = 0;
            ch
        }
        2 => {
            let mut ch = vec![0u8; 16];
            r.fill(&mut ch);
            ch[0] = 3;
            ch[1] = 0;
            ch[12..16].fill(0);
            ch
        }
        _ => {
            let mut ch = vec![0u8; 12];
            r.fill(&mut ch);
            ch[0] = 4;
            ch[1] = 0;
            ch[4..6].copy_from_slice(&1u16.to_be_bytes());
            ch[6..8].copy_from_slice(&8u16.to_be_bytes());
            ch
        }
    };
    let len = chunk.len() as u16;
    chunk[2..4].copy_from_slice(&len.to_be_bytes());
    p.extend_from_slice(&chunk);
    p
}

/// A GRE packet carrying a small IPv4 UDP or ICMP packet.
fn gre(r: &mut Rng, budget: usize) -> Vec<u8> {
    let inner_body = budget.saturating_sub(4 + 20).clamp(8, 1400);
    let udp_inner = r.chance(0.5);
    let mut inner = Vec::with_capacity(20 + inner_body);
    inner.push(0x45);
    inner.push(0);
    inner.extend_from_slice(&((20 + inner_body) as u16).to_be_bytes());
    inner.extend_from_slice(&(r.next_u32() as u16).to_be_bytes());
    inner.extend_from_slice(&[0, 0, 64]);
    inner.push(if udp_inner { IPPROTO_UDP } else { IPPROTO_ICMP });
    inner.extend_from_slice(&[0, 0]);
    inner.extend_from_slice(&[192, 168, r.next_u32() as u8, r.range(1, 254) as u8]);
    inner.extend_from_slice(&[192, 168, r.next_u32() as u8, r.range(1, 254) as u8]);
    let sum = checksum(&inner);
    inner[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut body = vec![0u8; inner_body];
    r.fill(&mut body);
    if udp_inner {
        body[4..6].copy_from_slice(&(inner_body as u16).to_be_bytes());
    } else {
        body[0] = 8;
        body[1] = 0;
    }
    inner.extend_from_slice(&body);
    let mut p = vec![0, 0, 0x08, 0x00];
    p.extend_from_slice(&inner);
    p
}

/// An ARP request or reply between hosts of the customer (or its
/// gateway): (EtherType, ARP packet, (destination MAC, source MAC)).
fn arp(r: &mut Rng, u: &Universe, c: &Customer) -> (u16, Vec<u8>, ([u8; 6], [u8; 6])) {
    let a = c.pick_host(r);
    let b = if r.chance(0.7) {
        c.pick_host(r)
    } else {
        let o = a.octets();
        Ipv4Addr::new(o[0], o[1], o[2], 1)
    };
    let request = r.chance(0.6);
    let (sha, tha) = (mac(u, &a.octets()), mac(u, &b.octets()));
    let mut p = vec![0, 1, 0x08, 0x00, 6, 4, 0, if request { 1 } else { 2 }];
    p.extend_from_slice(&sha);
    p.extend_from_slice(&a.octets());
    p.extend_from_slice(if request { &[0; 6] } else { &tha });
    p.extend_from_slice(&b.octets());
    let dst = if request { [0xff; 6] } else { tha };
    (0x0806, p, (dst, sha))
}

/// A frame of another EtherType: LLDP or an 802.3 spanning tree BPDU (its
/// "EtherType" field is the 802.3 length).
fn other_ethertype(r: &mut Rng, budget: usize) -> (u16, Vec<u8>, ([u8; 6], [u8; 6])) {
    let mut src = [0u8; 6];
    r.fill(&mut src);
    src[0] &= 0xfe;
    if r.chance(0.5) {
        let mut p = vec![0u8; budget.clamp(46, 300)];
        r.fill(&mut p);
        p[..2].copy_from_slice(&[0x02, 0x07]);
        (0x88cc, p, ([0x01, 0x80, 0xc2, 0, 0, 0x0e], src))
    } else {
        let mut p = vec![0x42, 0x42, 0x03, 0, 0, 0, 0];
        let mut bpdu = [0u8; 32];
        r.fill(&mut bpdu);
        p.extend_from_slice(&bpdu);
        (p.len() as u16, p, ([0x01, 0x80, 0xc2, 0, 0, 0], src))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Mix;

    #[test]
    fn lengths_are_consistent() {
        let u = Universe::new(1000, 5, Mix::default());
        for i in 0..3000 {
            let (f, wire) = packet(&u, i);
            assert!((60..=1514).contains(&(wire as usize)), "{i}: {wire}");
            assert!(f.len() <= wire as usize);
            if f.len() < wire as usize {
                continue;
            }
            let mut off = 12;
            let mut et = u16::from_be_bytes([f[off], f[off + 1]]);
            while et == 0x8100 || et == 0x88a8 {
                off += 4;
                et = u16::from_be_bytes([f[off], f[off + 1]]);
            }
            off += 2;
            if et == 0x8847 {
                while f[off + 2] & 1 == 0 {
                    off += 4;
                }
                off += 4;
                et = if f[off] >> 4 == 4 { 0x0800 } else { 0x86dd };
            }
            match et {
                0x0800 => {
                    let ihl = usize::from(f[off] & 15) * 4;
                    let total = usize::from(u16::from_be_bytes([f[off + 2], f[off + 3]]));
                    assert!(ihl >= 20 && off + total <= f.len(), "{i}");
                    assert!(off + total == f.len() || f.len() == 60, "{i}");
                    assert_eq!(checksum(&f[off..off + ihl]), 0, "{i}");
                    let frag = u16::from_be_bytes([f[off + 6], f[off + 7]]) & 0x3fff;
                    if f[off + 9] == IPPROTO_UDP && frag == 0 {
                        let ul = u16::from_be_bytes([f[off + ihl + 4], f[off + ihl + 5]]);
                        assert_eq!(usize::from(ul), total - ihl, "{i}");
                    }
                }
                0x86dd => {
                    let plen = usize::from(u16::from_be_bytes([f[off + 4], f[off + 5]]));
                    assert!(off + 40 + plen == f.len() || f.len() == 60, "{i}");
                }
                _ => {}
            }
        }
    }
}
