//! Capture files written byte by byte, in either byte order, for tests
//! that need what sluice's own writer never makes: a big-endian file, a
//! pcapng section without interfaces, a file without packets.
//!
//! ```
//! use sluice_testsupport::savefile;
//! let f = savefile::pcap(0, true, &[&[0, 0, 0, 2]]);
//! assert_eq!(&f[..4], &[0xa1, 0xb2, 0xc3, 0xd4]);
//! assert_eq!(f.len(), 24 + 16 + 4);
//! ```

fn put32(out: &mut Vec<u8>, be: bool, v: u32) {
    out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

fn put16(out: &mut Vec<u8>, be: bool, v: u16) {
    out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

/// A pcap file (microsecond stamps, snapshot length 65535) of link type
/// `linktype` holding `packets`, written big-endian or little-endian.
///
/// ```
/// let f = sluice_testsupport::savefile::pcap(1, false, &[]);
/// assert_eq!(&f[..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
/// assert_eq!(f.len(), 24);
/// ```
pub fn pcap(linktype: u32, big_endian: bool, packets: &[&[u8]]) -> Vec<u8> {
    let be = big_endian;
    let mut out = Vec::new();
    put32(&mut out, be, 0xa1b2_c3d4);
    put16(&mut out, be, 2);
    put16(&mut out, be, 4);
    put32(&mut out, be, 0);
    put32(&mut out, be, 0);
    put32(&mut out, be, 65535);
    put32(&mut out, be, linktype);
    for (i, p) in packets.iter().enumerate() {
        put32(&mut out, be, 1_700_000_000 + i as u32);
        put32(&mut out, be, 0);
        put32(&mut out, be, p.len() as u32);
        put32(&mut out, be, p.len() as u32);
        out.extend_from_slice(p);
    }
    out
}

/// One pcapng block: type, body padded to 4 bytes, both lengths.
fn block(out: &mut Vec<u8>, be: bool, kind: u32, body: &[u8]) {
    let padded = body.len().div_ceil(4) * 4;
    let total = (12 + padded) as u32;
    put32(out, be, kind);
    put32(out, be, total);
    out.extend_from_slice(body);
    out.resize(out.len() + padded - body.len(), 0);
    put32(out, be, total);
}

/// A pcapng section header block in the given byte order.
///
/// ```
/// let s = sluice_testsupport::savefile::pcapng_section(true);
/// assert_eq!(s.len(), 28);
/// assert_eq!(&s[8..12], &[0x1a, 0x2b, 0x3c, 0x4d]);
/// ```
pub fn pcapng_section(big_endian: bool) -> Vec<u8> {
    let be = big_endian;
    let mut body = Vec::new();
    put32(&mut body, be, 0x1a2b_3c4d);
    put16(&mut body, be, 1);
    put16(&mut body, be, 0);
    body.extend_from_slice(&[0xff; 8]);
    let mut out = Vec::new();
    block(&mut out, be, 0x0a0d_0d0a, &body);
    out
}

/// A pcapng interface description block (snapshot length 65535).
///
/// ```
/// assert_eq!(sluice_testsupport::savefile::pcapng_interface(false, 0).len(), 20);
/// ```
pub fn pcapng_interface(big_endian: bool, linktype: u16) -> Vec<u8> {
    let be = big_endian;
    let mut body = Vec::new();
    put16(&mut body, be, linktype);
    put16(&mut body, be, 0);
    put32(&mut body, be, 65535);
    let mut out = Vec::new();
    block(&mut out, be, 1, &body);
    out
}

/// A pcapng enhanced packet block for interface `interface`.
///
/// ```
/// assert_eq!(sluice_testsupport::savefile::pcapng_packet(false, 0, &[1, 2, 3]).len(), 36);
/// ```
pub fn pcapng_packet(big_endian: bool, interface: u32, data: &[u8]) -> Vec<u8> {
    let be = big_endian;
    let mut body = Vec::new();
    put32(&mut body, be, interface);
    put32(&mut body, be, 0);
    put32(&mut body, be, 0);
    put32(&mut body, be, data.len() as u32);
    put32(&mut body, be, data.len() as u32);
    body.extend_from_slice(data);
    let mut out = Vec::new();
    block(&mut out, be, 6, &body);
    out
}

/// A pcapng file of one section in the given byte order with one interface
/// of link type `linktype` and `packets` on it.
///
/// ```
/// let f = sluice_testsupport::savefile::pcapng(0, true, &[&[0, 0, 0, 2]]);
/// assert_eq!(f.len(), 28 + 20 + 36);
/// ```
pub fn pcapng(linktype: u16, big_endian: bool, packets: &[&[u8]]) -> Vec<u8> {
    let mut out = pcapng_section(big_endian);
    out.extend(pcapng_interface(big_endian, linktype));
    for p in packets {
        out.extend(pcapng_packet(big_endian, 0, p));
    }
    out
}
