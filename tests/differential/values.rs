//! Link types (sluice's and libpcap's numbers) and the values expressions
//! and packets share, so that filters often match.

use super::*;

/// The link types generated, with the DLT number libpcap's handle takes.
pub(crate) const LINKS: &[(LinkType, i32)] = &[
    (LinkType::EN10MB, 1),
    (LinkType::RAW, 12),
    (LinkType::LINUX_SLL, 113),
    (LinkType::LINUX_SLL2, 276),
    (LinkType::NULL, 0),
    (LinkType::LOOP, 108),
    (LinkType::IPV4, 228),
    (LinkType::IPV6, 229),
    (LinkType::PPP, 9),
    (LinkType::PPP_ETHER, 51),
    (LinkType::C_HDLC, 104),
    (LinkType::FDDI, 10),
    (LinkType::IEEE802, 6),
    (LinkType::FRELAY, 107),
    (LinkType::ENC, 109),
    (LinkType::PFLOG, 117),
    (LinkType::IEEE802_11, 105),
    (LinkType::IEEE802_11_RADIO, 127),
    (LinkType::PRISM_HEADER, 119),
    (LinkType::PPI, 192),
    (LinkType::IEEE802_11_RADIO_AVS, 163),
];

pub(crate) fn pick_link(rng: &mut Rng) -> usize {
    if rng.chance(50) {
        0
    } else {
        rng.range(1, LINKS.len() - 1)
    }
}

pub(crate) const IP4: &[[u8; 4]] = &[
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [192, 168, 1, 1],
    [192, 168, 1, 254],
    [1, 2, 3, 4],
    [127, 0, 0, 1],
    [224, 0, 0, 251],
    [255, 255, 255, 255],
];
pub(crate) const IP6: &[&str] = &["::1", "fe80::1", "2001:db8::1", "2001:db8::2", "ff02::1"];
pub(crate) const IP6_BYTES: &[[u8; 16]] = &[
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
];
pub(crate) const MACS: &[[u8; 6]] = &[
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb],
    [0x33, 0x33, 0x00, 0x00, 0x00, 0x01],
    [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
];
pub(crate) const PORTS: &[u16] = &[0, 20, 22, 53, 80, 443, 1024, 8080, 65535];
pub(crate) const TAGS: &[u32] = &[0, 1, 5, 100, 1000, 4095];
pub(crate) const ETHERTYPES: &[u16] = &[
    0x0800, 0x86dd, 0x0806, 0x8035, 0x8100, 0x88a8, 0x8847, 0x8848, 0x8863, 0x8864, 0x809b, 0x80f3,
    0x8137, 0x6003, 0x0842, 0x0042,
];

pub(crate) fn ip4_text(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

pub(crate) fn mac_text(rng: &mut Rng, m: [u8; 6]) -> String {
    match rng.below(4) {
        0 => format!(
            "{:x}{:02x}.{:02x}{:02x}.{:02x}{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        ),
        1 => m
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join("-"),
        2 => m
            .iter()
            .map(|b| format!("{b:x}"))
            .collect::<Vec<_>>()
            .join(":"),
        _ => m
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}
