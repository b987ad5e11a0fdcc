//! Random packets: structured (Ethernet, VLAN, MPLS, PPPoE, LLC/SNAP, IPv4,
//! IPv6, transports, ARP) and wrapped for every link type, cut, mutated,
//! purely random, and real ones from the corpus.

use super::*;

/// A packet under construction, with the offsets where headers end.
#[derive(Default)]
pub(crate) struct Pb {
    pub(crate) buf: Vec<u8>,
    pub(crate) marks: Vec<usize>,
    /// How many tunnels deep the packet being built is.
    pub(crate) depth: u32,
}

impl Pb {
    pub(crate) fn put(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }
    pub(crate) fn mark(&mut self) {
        self.marks.push(self.buf.len());
    }
}

pub(crate) fn port(rng: &mut Rng) -> u16 {
    if rng.chance(75) {
        rng.pick(PORTS)
    } else {
        rng.next_u64() as u16
    }
}

pub(crate) fn l4(rng: &mut Rng, p: &mut Pb, proto: u8) {
    match proto {
        6 => {
            p.u16(port(rng));
            p.u16(port(rng));
            p.u32(rng.next_u64() as u32);
            p.u32(rng.next_u64() as u32);
            let opts = if rng.chance(70) { 0 } else { rng.below(4) };
            let off = if rng.chance(90) {
                (5 + opts) as u8
            } else {
                rng.byte() >> 4
            };
            p.put(&[off << 4, rng.byte()]);
            p.put(&rng.bytes(6));
            let o = rng.bytes(opts * 4);
            p.put(&o);
        }
        17 => {
            p.u16(port(rng));
            let dport_at = p.buf.len();
            p.u16(port(rng));
            p.u16(rng.range(8, 100) as u16);
            p.u16(rng.next_u64() as u16);
            if p.depth < 2 && rng.chance(25) {
                p.mark();
                udp_tunnel(rng, p, dport_at);
                return;
            }
        }
        132 => {
            p.u16(port(rng));
            p.u16(port(rng));
            p.put(&rng.bytes(8));
        }
        1 => {
            p.put(&[rng.pick(&[0, 3, 8, 11, 5, 13, 255]), rng.pick(&[0, 1, 3])]);
            p.put(&rng.bytes(6));
        }
        58 => {
            p.put(&[
                rng.pick(&[128, 129, 133, 134, 135, 136, 1, 143]),
                rng.pick(&[0, 1]),
            ]);
            p.put(&rng.bytes(6));
        }
        _ => {
            let n = rng.below(12);
            p.put(&rng.bytes(n));
        }
    }
    p.mark();
    let n = rng.below(16);
    p.put(&rng.bytes(n));
}

pub(crate) fn l4_proto(rng: &mut Rng) -> u8 {
    if rng.chance(85) {
        rng.pick(&[6, 6, 17, 17, 132, 1, 58, 2, 47, 50, 51, 103, 112])
    } else {
        rng.byte()
    }
}

pub(crate) fn ipv4(rng: &mut Rng, p: &mut Pb) {
    let start = p.buf.len();
    let ihl = if rng.chance(80) { 5 } else { rng.range(0, 15) };
    p.put(&[
        if rng.chance(95) {
            0x40 | ihl as u8
        } else {
            rng.byte()
        },
        rng.byte(),
    ]);
    p.u16(0);
    p.u16(rng.next_u64() as u16);
    let frag: u16 = match rng.below(10) {
        0 => 0x2000,
        1 => 0x2000 | (rng.next_u64() as u16 & 0x1fff),
        2 => rng.next_u64() as u16 & 0x1fff,
        3 | 4 => 0x4000,
        _ => 0,
    };
    p.u16(frag);
    let proto = l4_proto(rng);
    p.put(&[rng.byte(), proto]);
    p.u16(rng.next_u64() as u16);
    let src = if rng.chance(85) {
        rng.pick(IP4)
    } else {
        [rng.byte(), rng.byte(), rng.byte(), rng.byte()]
    };
    let dst = rng.pick(IP4);
    p.put(&src);
    p.put(&dst);
    p.mark();
    if ihl > 5 {
        let o = rng.bytes((ihl - 5) * 4);
        p.put(&o);
        p.mark();
    }
    l4(rng, p, proto);
    let total = (p.buf.len() - start) as u16;
    let tl = if rng.chance(90) {
        total
    } else {
        rng.next_u64() as u16
    };
    p.buf[start + 2..start + 4].copy_from_slice(&tl.to_be_bytes());
}

pub(crate) fn ipv6(rng: &mut Rng, p: &mut Pb) {
    p.put(&[
        0x60 | (rng.byte() & 0x0f),
        rng.byte(),
        rng.byte(),
        rng.byte(),
    ]);
    p.u16(rng.range(0, 200) as u16);
    let nh_at = p.buf.len();
    p.put(&[0, rng.byte()]);
    p.put(&rng.pick(IP6_BYTES));
    p.put(&rng.pick(IP6_BYTES));
    p.mark();
    let mut nh_at = nh_at;
    for _ in 0..rng.pick(&[0, 0, 0, 1, 1, 2, 3]) {
        let h = rng.pick(&[0, 43, 44, 60, 51]);
        p.buf[nh_at] = h;
        nh_at = p.buf.len();
        match h {
            44 => {
                p.put(&[0, 0]);
                let off: u16 = rng.pick(&[0, 1, 0x100 << 3]);
                p.u16(off | rng.below(2) as u16);
                p.u32(rng.next_u64() as u32);
            }
            51 => {
                let len = rng.below(3);
                p.put(&[0, (len + 1) as u8]);
                p.put(&rng.bytes(6 + len * 4));
            }
            _ => {
                let len = rng.below(3);
                p.put(&[0, len as u8]);
                p.put(&rng.bytes(6 + len * 8));
            }
        }
        p.mark();
    }
    let proto = if rng.chance(10) { 59 } else { l4_proto(rng) };
    p.buf[nh_at] = proto;
    l4(rng, p, proto);
}

pub(crate) fn arp(rng: &mut Rng, p: &mut Pb) {
    p.put(&[0, 1, 8, 0, 6, 4, 0, rng.pick(&[1, 2, 3, 4])]);
    p.mark();
    p.put(&rng_mac(rng));
    p.put(&rng.pick(IP4));
    p.put(&rng_mac(rng));
    p.put(&rng.pick(IP4));
    p.mark();
}

/// A network-layer payload; returns its Ethernet type.
pub(crate) fn network(rng: &mut Rng, p: &mut Pb) -> u16 {
    if p.depth < 2 && rng.chance(8) {
        p.depth += 1;
        let et = pppoe_session(rng, p);
        p.depth -= 1;
        return et;
    }
    match rng.below(10) {
        0..=3 => {
            ipv4(rng, p);
            0x0800
        }
        4..=6 => {
            ipv6(rng, p);
            0x86dd
        }
        7 => {
            arp(rng, p);
            rng.pick(&[0x0806, 0x8035])
        }
        _ => {
            let n = rng.below(40);
            p.put(&rng.bytes(n));
            rng.pick(ETHERTYPES)
        }
    }
}

pub(crate) fn ip_payload(rng: &mut Rng, p: &mut Pb) -> u16 {
    if rng.chance(55) {
        ipv4(rng, p);
        0x0800
    } else {
        ipv6(rng, p);
        0x86dd
    }
}

/// After an Ethernet type field: the payload, possibly more encapsulation.
pub(crate) fn ether_payload(rng: &mut Rng, p: &mut Pb, type_at: usize, depth: usize) {
    let ty: u16 = match rng.below(14) {
        0 | 1 if depth < 3 => {
            // VLAN tag
            let vid = if rng.chance(80) {
                rng.pick(TAGS) as u16
            } else {
                rng.next_u64() as u16
            };
            p.u16(vid & if rng.chance(80) { 0x0fff } else { 0xffff });
            p.u16(0);
            p.mark();
            ether_payload(rng, p, p.buf.len() - 2, depth + 1);
            rng.pick(&[0x8100, 0x8100, 0x88a8, 0x9100])
        }
        2 if depth < 3 => {
            // MPLS label stack
            let n = rng.range(1, 3);
            for i in 0..n {
                let label = rng.pick(TAGS);
                let bos = u32::from(i + 1 == n || rng.chance(5));
                p.u32(label << 12 | bos << 8 | rng.byte() as u32);
                p.mark();
            }
            if rng.chance(85) {
                ip_payload(rng, p);
            } else {
                let n = rng.below(30);
                let b = rng.bytes(n);
                p.put(&b);
            }
            rng.pick(&[0x8847, 0x8847, 0x8848])
        }
        3 if depth < 3 => {
            // PPPoE session
            p.put(&[0x11, 0]);
            p.u16(rng.pick(TAGS) as u16);
            p.u16(0);
            p.mark();
            let (pp, ip) = match rng.below(5) {
                0 => (0x0021u16, true),
                1 => (0x0057, true),
                2 => (rng.next_u64() as u16, false),
                _ => (0, true),
            };
            let at = p.buf.len();
            p.u16(pp);
            p.mark();
            if ip {
                let et = ip_payload(rng, p);
                if pp == 0 {
                    let v = if et == 0x0800 { 0x0021u16 } else { 0x0057 };
                    p.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
                }
            } else {
                let n = rng.below(30);
                let b = rng.bytes(n);
                p.put(&b);
            }
            rng.pick(&[0x8864, 0x8864, 0x8863])
        }
        4 => {
            // 802.3 length + LLC (SNAP sometimes)
            let dsap = rng.pick(&[0x42, 0xaa, 0xe0, 0xfe, 0xf0, 0x06, 0x98, 0xbc]);
            let ssap = if rng.chance(80) { dsap } else { rng.byte() };
            p.put(&[dsap, ssap, rng.pick(&[0x03, 0x03, 0x00, 0x01, 0xf3, 0x6f])]);
            p.mark();
            if dsap == 0xaa {
                p.put(&[0, 0, 0]);
                let at = p.buf.len();
                p.u16(0);
                p.mark();
                let et = network(rng, p);
                p.buf[at..at + 2].copy_from_slice(&et.to_be_bytes());
            } else {
                let n = rng.below(40);
                let b = rng.bytes(n);
                p.put(&b);
            }
            let len = (p.buf.len() - type_at - 2) as u16;
            if rng.chance(85) {
                len.min(1500)
            } else {
                rng.pick(&[0, 1500, 1501, 0x05ff, 0x0600])
            }
        }
        _ => network(rng, p),
    };
    p.buf[type_at..type_at + 2].copy_from_slice(&ty.to_be_bytes());
}

pub(crate) fn ethernet(rng: &mut Rng, p: &mut Pb) {
    let dst = if rng.chance(80) {
        rng_mac(rng)
    } else {
        [rng.byte(); 6]
    };
    p.put(&dst);
    p.put(&rng_mac(rng));
    p.u16(0);
    p.mark();
    ether_payload(rng, p, 12, 0);
}

pub(crate) fn build(rng: &mut Rng, lt: LinkType) -> Pb {
    let mut p = Pb::default();
    match lt {
        LinkType::EN10MB => ethernet(rng, &mut p),
        LinkType::RAW => {
            if rng.chance(5) {
                p.put(&rng.bytes(30));
            } else {
                ip_payload(rng, &mut p);
            }
        }
        LinkType::IPV4 => ipv4(rng, &mut p),
        LinkType::IPV6 => ipv6(rng, &mut p),
        LinkType::NULL | LinkType::LOOP => {
            p.u32(0);
            p.mark();
            let et = network(rng, &mut p);
            // NULL: the capturing host's byte order, either.
            let af = family(rng, et, lt == LinkType::NULL);
            p.buf[..4].copy_from_slice(&af);
        }
        LinkType::LINUX_SLL | LinkType::LINUX_SLL2 => {
            let hdr = if lt == LinkType::LINUX_SLL { 16 } else { 20 };
            let proto_at = if lt == LinkType::LINUX_SLL { 14 } else { 0 };
            let h = rng.bytes(hdr);
            p.put(&h);
            p.mark();
            let et = match rng.below(8) {
                0 => {
                    // LLC
                    p.put(&[rng.pick(&[0x42, 0xe0, 0xfe, 0xaa, 0xf0]), 0x42, 3]);
                    let n = rng.below(20);
                    let b = rng.bytes(n);
                    p.put(&b);
                    rng.pick(&[4, 1, 4])
                }
                _ => network(rng, &mut p),
            };
            p.buf[proto_at..proto_at + 2].copy_from_slice(&et.to_be_bytes());
        }
        LinkType::PPP | LinkType::C_HDLC | LinkType::PPP_ETHER => {
            let hdr = if lt == LinkType::PPP_ETHER { 8 } else { 4 };
            let h = rng.bytes(hdr);
            p.put(&h);
            p.mark();
            let et = network(rng, &mut p);
            let v = if lt == LinkType::C_HDLC {
                et
            } else {
                match et {
                    0x0800 => 0x0021,
                    0x86dd => 0x0057,
                    o => rng.pick(&[o, 0x0027, 0x0029, 0x002b, 0x0031, 0x003f, 0x0023]),
                }
            };
            let v = if rng.chance(90) {
                v
            } else {
                rng.next_u64() as u16
            };
            p.buf[hdr - 2..hdr].copy_from_slice(&v.to_be_bytes());
        }
        _ => {
            if build_more(rng, &mut p, lt).is_none() {
                p.put(&rng.bytes(40));
            }
        }
    }
    p
}

/// Packets for one (expression, link type) case.
pub(crate) fn packets(rng: &mut Rng, lt: LinkType, corpus: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let p = build(rng, lt);
        let mut b = p.buf;
        if rng.chance(10) {
            for _ in 0..rng.range(1, 3) {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.byte();
                }
            }
        }
        if !rng.chance(35) {
            let cut = if rng.chance(60) && !p.marks.is_empty() {
                let m = rng.pick(&p.marks) as isize + rng.range(0, 6) as isize - 3;
                m.clamp(0, b.len() as isize) as usize
            } else {
                rng.below(b.len() + 1)
            };
            b.truncate(cut);
        }
        out.push(b);
    }
    for _ in 0..3 {
        let n = rng.below(80);
        out.push(rng.bytes(n));
    }
    if !corpus.is_empty() {
        for _ in 0..6 {
            let c = &corpus[rng.below(corpus.len())];
            if let Some(mut b) = rewrap(c, lt, rng) {
                if rng.chance(20) {
                    b.truncate(rng.below(b.len() + 1));
                }
                out.push(b);
            }
        }
    }
    out
}

/// An Ethernet packet from the corpus, with its link header replaced by
/// `lt`'s (only IP packets for the links that carry nothing else).
pub(crate) fn rewrap(eth: &[u8], lt: LinkType, rng: &mut Rng) -> Option<Vec<u8>> {
    if lt == LinkType::EN10MB {
        return Some(eth.to_vec());
    }
    let et = u16::from_be_bytes([*eth.get(12)?, *eth.get(13)?]);
    let body = &eth[14..];
    let ip = matches!(et, 0x0800 | 0x86dd);
    let mut out = match lt {
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 if ip => Vec::new(),
        LinkType::NULL if ip => (if et == 0x0800 { 2u32 } else { 10 })
            .to_le_bytes()
            .to_vec(),
        LinkType::LOOP if ip => (if et == 0x0800 { 2u32 } else { 24 })
            .to_be_bytes()
            .to_vec(),
        LinkType::LINUX_SLL => {
            let mut h = rng.bytes(14);
            h.extend_from_slice(&et.to_be_bytes());
            h
        }
        LinkType::LINUX_SLL2 => {
            let mut h = et.to_be_bytes().to_vec();
            h.extend(rng.bytes(18));
            h
        }
        LinkType::C_HDLC => vec![0x0f, 0, (et >> 8) as u8, et as u8],
        LinkType::PPP | LinkType::PPP_ETHER if ip => {
            let mut h = if lt == LinkType::PPP {
                vec![0xff, 0x03]
            } else {
                vec![0x11, 0, 0, 1, 0, 0]
            };
            h.extend_from_slice(if et == 0x0800 { &[0, 0x21] } else { &[0, 0x57] });
            h
        }
        _ => return rewrap_more(et, body, lt, rng),
    };
    out.extend_from_slice(body);
    Some(out)
}

pub(crate) fn load_corpus() -> Vec<Vec<u8>> {
    if corpus::root().is_none() {
        println!("no corpus packets: ../shared/conformance not found; random packets only");
        return Vec::new();
    }
    corpus::pcaps()
        .iter()
        .flat_map(corpus::packets)
        .filter(|p| p.linktype == 1)
        .map(|p| p.data)
        .collect()
}
