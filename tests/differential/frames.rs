//! Frames of the link types beyond Ethernet and the IP links: LANs with
//! 802.2 LLC (FDDI, token ring), Frame Relay, OpenBSD's enc and pflog, the
//! 802.11 family (bare, radiotap, Prism/AVS, PPI, AVS), and what rides in
//! them: PPPoE sessions and UDP tunnels (Geneve, VXLAN) with an inner
//! frame.

use super::*;

/// An 802.2 LLC header: SNAP carrying an Ethernet type (the payload made
/// by `network`), or another SAP with random bytes.
pub(crate) fn llc(rng: &mut Rng, p: &mut Pb) {
    if rng.chance(80) {
        p.put(&[0xaa, 0xaa, 0x03, 0, 0, 0]);
        let at = p.buf.len();
        p.u16(0);
        p.mark();
        let et = network(rng, p);
        p.buf[at..at + 2].copy_from_slice(&et.to_be_bytes());
    } else {
        let sap = rng.pick(&[0x42, 0xe0, 0xfe, 0xf0, 0x06, 0x98]);
        p.put(&[sap, sap, rng.pick(&[0x03, 0xf3, 0x00])]);
        p.mark();
        let n = rng.below(30);
        p.put(&rng.bytes(n));
    }
}

/// A PPPoE session header and its PPP frame (IPv4, IPv6, MPLS or other);
/// returns the Ethernet type (PPPoE session).
pub(crate) fn pppoe_session(rng: &mut Rng, p: &mut Pb) -> u16 {
    p.put(&[0x11, 0]);
    p.u16(rng.pick(TAGS) as u16);
    p.u16(0);
    p.mark();
    match rng.below(6) {
        0 | 1 => {
            p.u16(0x0021);
            p.mark();
            ipv4(rng, p);
        }
        2 => {
            p.u16(0x0057);
            p.mark();
            ipv6(rng, p);
        }
        3 => {
            // MPLS unicast over PPP, then an IPv4 packet.
            p.u16(0x0281);
            p.mark();
            let label = rng.pick(TAGS);
            p.u32(label << 12 | 1 << 8 | 64);
            p.mark();
            ipv4(rng, p);
        }
        _ => {
            p.u16(rng.next_u64() as u16);
            p.mark();
            let n = rng.below(30);
            p.put(&rng.bytes(n));
        }
    }
    0x8864
}

/// A UDP tunnel after an 8-byte UDP header whose destination port is at
/// `dport_at`: Geneve (options, an Ethernet frame or a bare IP packet) or
/// VXLAN (an Ethernet frame).
pub(crate) fn udp_tunnel(rng: &mut Rng, p: &mut Pb, dport_at: usize) {
    p.depth += 1;
    let vni = if rng.chance(80) {
        rng.pick(TAGS)
    } else {
        rng.next_u32() & 0xff_ffff
    };
    if rng.chance(50) {
        p.buf[dport_at..dport_at + 2].copy_from_slice(&6081u16.to_be_bytes());
        let opt_words = rng.pick(&[0, 0, 1, 2]);
        let version = if rng.chance(90) { 0 } else { 0x40 };
        p.put(&[version | opt_words, 0]);
        let ty: u16 = rng.pick(&[0x6558, 0x6558, 0x0800, 0x86dd, 0x8847]);
        p.u16(ty);
        p.u32(vni << 8);
        p.put(&rng.bytes(4 * opt_words as usize));
        p.mark();
        match ty {
            0x6558 => ethernet(rng, p),
            0x0800 => ipv4(rng, p),
            0x86dd => ipv6(rng, p),
            _ => p.put(&rng.bytes(20)),
        }
    } else {
        p.buf[dport_at..dport_at + 2].copy_from_slice(&4789u16.to_be_bytes());
        let flags = if rng.chance(90) { 0x08 } else { rng.byte() };
        p.put(&[flags, 0, 0, 0]);
        p.u32(vni << 8);
        p.mark();
        ethernet(rng, p);
    }
    p.depth -= 1;
}

/// An 802.11 frame: data frames (QoS or not, any DS bits, LLC/SNAP and a
/// network payload), management and control frames, or noise.
pub(crate) fn wlan(rng: &mut Rng, p: &mut Pb) {
    match rng.below(10) {
        0..=5 => {
            let fc0 = rng.pick(&[0x08, 0x08, 0x88, 0x88, 0x48, 0x28]);
            let ds = rng.below(4) as u8;
            let fc1 = if rng.chance(90) { ds } else { rng.byte() };
            p.put(&[fc0, fc1]);
            p.u16(0);
            for _ in 0..3 {
                p.put(&rng_mac(rng));
            }
            p.u16(rng.next_u64() as u16);
            if fc1 & 3 == 3 {
                p.put(&rng_mac(rng));
            }
            if fc0 & 0x8c == 0x88 {
                p.u16(0);
            }
            p.mark();
            llc(rng, p);
        }
        6 | 7 => {
            p.put(&[rng.pick(&[0x80, 0x40, 0x50, 0x00, 0xb0, 0xd0]), 0]);
            p.u16(0);
            for _ in 0..3 {
                p.put(&rng_mac(rng));
            }
            p.u16(0);
            p.mark();
            let n = rng.below(30);
            p.put(&rng.bytes(n));
        }
        8 => {
            p.put(&[rng.pick(&[0xb4, 0xc4, 0xd4, 0xa4]), 0]);
            p.u16(0);
            p.put(&rng_mac(rng));
            p.mark();
            if rng.chance(50) {
                p.put(&rng_mac(rng));
            }
        }
        _ => {
            let n = rng.below(40);
            p.put(&rng.bytes(n));
        }
    }
}

/// A radiotap header (none, the flags field, or TSFT and flags, perhaps an
/// extended presence bitmap) and an 802.11 frame, padded after its header
/// to a multiple of 4 when the flags say so.
pub(crate) fn radiotap(rng: &mut Rng, p: &mut Pb) {
    let present: u32 = rng.pick(&[0, 0x2, 0x3, 0x2, 0x8000_0002, 0x4]);
    let mut fields = Vec::new();
    if present & 0x8000_0000 != 0 {
        fields.extend_from_slice(&0u32.to_le_bytes());
    }
    let pad_flag = if rng.chance(50) { 0x20 } else { 0 };
    if present & 1 != 0 {
        fields.extend_from_slice(&rng.bytes(8));
    }
    if present & 2 != 0 {
        fields.push(pad_flag | if rng.chance(10) { 0x10 } else { 0 });
    }
    if present & 4 != 0 {
        fields.push(rng.byte());
    }
    let len = (8 + fields.len()) as u16 + rng.pick(&[0, 0, 1, 3]);
    p.put(&[0, 0]);
    p.put(&len.to_le_bytes());
    p.put(&present.to_le_bytes());
    p.put(&fields);
    p.buf.resize(len as usize, 0);
    p.mark();
    let start = p.buf.len();
    let mut frame = Pb {
        depth: p.depth,
        ..Pb::default()
    };
    wlan(rng, &mut frame);
    let padded = pad_flag != 0 && present & 0x8000_0002 == 2;
    let data = frame.buf.first().is_some_and(|fc| fc & 0x0c == 0x08);
    // The 802.11 header's end (first mark of a data frame): round it up.
    match (padded && data, frame.marks.first()) {
        (true, Some(&hdr)) => {
            let at = start + hdr;
            let pad = (4 - at % 4) % 4;
            p.put(&frame.buf[..hdr]);
            p.put(&vec![0; pad]);
            p.put(&frame.buf[hdr..]);
            p.marks.extend(frame.marks.iter().map(|m| m + start + pad));
        }
        _ => {
            p.put(&frame.buf);
            p.marks.extend(frame.marks.iter().map(|m| m + start));
        }
    }
}

/// A link header before an 802.11 frame for the 802.11 link types.
pub(crate) fn wlan_link(rng: &mut Rng, p: &mut Pb, lt: LinkType) {
    match lt {
        LinkType::IEEE802_11_RADIO => return radiotap(rng, p),
        LinkType::PPI => {
            let len: u16 = rng.pick(&[8, 8, 8, 12, 20]);
            let dlt: u32 = rng.pick(&[105, 105, 105, 127, 1]);
            p.put(&[0, 0]);
            p.put(&len.to_le_bytes());
            p.put(&dlt.to_le_bytes());
            p.buf.resize(len as usize, 0);
        }
        LinkType::PRISM_HEADER | LinkType::IEEE802_11_RADIO_AVS => {
            let avs = lt == LinkType::IEEE802_11_RADIO_AVS || rng.chance(40);
            if avs {
                let len: u32 = rng.pick(&[64, 64, 64, 32, 80]);
                p.u32(0x8021_1001);
                p.u32(len);
                p.buf.resize(len as usize, 0);
            } else {
                p.put(&0x44u32.to_le_bytes());
                p.put(&144u32.to_le_bytes());
                p.buf.resize(144, 0);
            }
        }
        _ => {}
    }
    p.mark();
    wlan(rng, p);
}

/// The first word of a loopback header: an address family for the packet
/// behind it, as some host wrote it (either byte order where the host's
/// order counts).
pub(crate) fn family(rng: &mut Rng, et: u16, host_order: bool) -> [u8; 4] {
    let af: u32 = match et {
        0x0800 => 2,
        0x86dd => rng.pick(&[10, 24, 28, 30]),
        _ => rng.pick(&[7, 0, 2, 10, 26]),
    };
    let af = if rng.chance(90) {
        af
    } else {
        rng.next_u64() as u32
    };
    if host_order && rng.chance(70) {
        af.to_le_bytes()
    } else {
        af.to_be_bytes()
    }
}

/// Frames of the link types of this module (`None`: not one of them).
pub(crate) fn build_more(rng: &mut Rng, p: &mut Pb, lt: LinkType) -> Option<()> {
    match lt {
        LinkType::FDDI => {
            p.put(&[rng.pick(&[0x50, 0x51, 0x41])]);
            p.put(&rng_mac(rng));
            p.put(&rng_mac(rng));
            p.mark();
            llc(rng, p);
        }
        LinkType::IEEE802 => {
            p.put(&[0x10, 0x40]);
            p.put(&rng_mac(rng));
            p.put(&rng_mac(rng));
            p.mark();
            llc(rng, p);
        }
        LinkType::FRELAY => {
            let nlpid = rng.pick(&[0xcc, 0xcc, 0x8e, 0x80, 0x81, 0x83]);
            p.put(&[0x18, 0x41, 0x03, nlpid]);
            p.mark();
            if nlpid == 0x8e {
                ipv6(rng, p);
            } else {
                ipv4(rng, p);
            }
        }
        LinkType::ENC => {
            p.put(&[0; 4]);
            p.put(&rng.bytes(8));
            p.mark();
            let et = network(rng, p);
            let af = family(rng, et, true);
            p.buf[..4].copy_from_slice(&af);
        }
        LinkType::PFLOG => {
            let hl = rng.pick(&[61u8, 61, 64, 48, 0, 100]);
            let rounded = (hl as usize + 3) & !3;
            p.put(&[hl, 0]);
            p.put(&rng.bytes(rounded.max(2) - 2));
            p.buf.truncate(rounded.max(2));
            p.mark();
            let et = network(rng, p);
            p.buf[1] = family(rng, et, false)[3];
        }
        LinkType::IEEE802_11
        | LinkType::IEEE802_11_RADIO
        | LinkType::IEEE802_11_RADIO_AVS
        | LinkType::PRISM_HEADER
        | LinkType::PPI => wlan_link(rng, p, lt),
        _ => return None,
    }
    Some(())
}

/// A corpus packet's network payload behind a link header of this
/// module's link types (`None`: not one of them, or it cannot carry it).
pub(crate) fn rewrap_more(et: u16, body: &[u8], lt: LinkType, rng: &mut Rng) -> Option<Vec<u8>> {
    let ip = matches!(et, 0x0800 | 0x86dd);
    let snap = |pre: &[u8]| {
        let mut h = pre.to_vec();
        h.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0]);
        h.extend_from_slice(&et.to_be_bytes());
        h
    };
    let mut data_frame = || {
        let mut h = vec![0x08, 0x01, 0, 0];
        h.extend(rng_mac(rng));
        h.extend(rng_mac(rng));
        h.extend(rng_mac(rng));
        h.extend([0, 0]);
        h
    };
    let mut out = match lt {
        LinkType::FDDI => {
            let mut h = vec![0x50];
            h.extend(rng_mac(rng));
            h.extend(rng_mac(rng));
            snap(&h)
        }
        LinkType::IEEE802 => {
            let mut h = vec![0x10, 0x40];
            h.extend(rng_mac(rng));
            h.extend(rng_mac(rng));
            snap(&h)
        }
        LinkType::IEEE802_11 => snap(&data_frame()),
        LinkType::IEEE802_11_RADIO => {
            let mut h = vec![0, 0, 8, 0, 0, 0, 0, 0];
            h.extend(data_frame());
            snap(&h)
        }
        LinkType::PPI => {
            let mut h = vec![0, 0, 8, 0, 105, 0, 0, 0];
            h.extend(data_frame());
            snap(&h)
        }
        LinkType::ENC if ip => {
            let af: u32 = if et == 0x0800 { 2 } else { 24 };
            let mut h = af.to_le_bytes().to_vec();
            h.extend([0; 8]);
            h
        }
        LinkType::FRELAY if ip => vec![0x18, 0x41, 3, if et == 0x0800 { 0xcc } else { 0x8e }],
        _ => return None,
    };
    out.extend_from_slice(body);
    Some(out)
}
