//! Unit tests: hand-made files in both byte orders, round trips, corrupt and
//! truncated input.

use std::io::Read;

use crate::{
    CaptureError, CaptureFormat, CaptureReader, CaptureWriter, ErrorKind, InterfaceInfo, Packet,
};

// ---------- helpers to craft files by hand ----------

fn w16(be: bool, v: u16) -> [u8; 2] {
    if be {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn w32(be: bool, v: u32) -> [u8; 4] {
    if be {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

/// pcap file header.
fn pcap_header(be: bool, magic: u32, major: u16, minor: u16, snaplen: u32, lt: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(w32(be, magic));
    v.extend(w16(be, major));
    v.extend(w16(be, minor));
    v.extend([0; 8]);
    v.extend(w32(be, snaplen));
    v.extend(w32(be, lt));
    v
}

fn pcap_record(be: bool, sec: u32, frac: u32, wirelen: u32, data: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(w32(be, sec));
    v.extend(w32(be, frac));
    v.extend(w32(be, data.len() as u32));
    v.extend(w32(be, wirelen));
    v.extend(data);
    v
}

/// A pcapng block with the given body (padded to 4 bytes).
fn block(be: bool, t: u32, body: &[u8]) -> Vec<u8> {
    let mut b = body.to_vec();
    while b.len() % 4 != 0 {
        b.push(0);
    }
    let len = (b.len() + 12) as u32;
    let mut v = Vec::new();
    v.extend(w32(be, t));
    v.extend(w32(be, len));
    v.extend(b);
    v.extend(w32(be, len));
    v
}

fn opt(be: bool, code: u16, value: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend(w16(be, code));
    v.extend(w16(be, value.len() as u16));
    v.extend(value);
    while v.len() % 4 != 0 {
        v.push(0);
    }
    v
}

fn shb(be: bool, major: u16, minor: u16, options: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w32(be, 0x1A2B_3C4D));
    body.extend(w16(be, major));
    body.extend(w16(be, minor));
    body.extend([0xff; 8]);
    body.extend(options);
    block(be, 0x0A0D_0D0A, &body)
}

fn idb(be: bool, lt: u16, snaplen: u32, options: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w16(be, lt));
    body.extend([0, 0]);
    body.extend(w32(be, snaplen));
    body.extend(options);
    block(be, 1, &body)
}

fn epb(be: bool, iface: u32, ts: u64, wirelen: u32, data: &[u8], options: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w32(be, iface));
    body.extend(w32(be, (ts >> 32) as u32));
    body.extend(w32(be, ts as u32));
    body.extend(w32(be, data.len() as u32));
    body.extend(w32(be, wirelen));
    body.extend(data);
    while body.len() % 4 != 0 {
        body.push(0);
    }
    body.extend(options);
    block(be, 6, &body)
}

fn opb(be: bool, iface: u16, ts: u64, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w16(be, iface));
    body.extend(w16(be, 0));
    body.extend(w32(be, (ts >> 32) as u32));
    body.extend(w32(be, ts as u32));
    body.extend(w32(be, data.len() as u32));
    body.extend(w32(be, data.len() as u32));
    body.extend(data);
    block(be, 2, &body)
}

fn spb(be: bool, wirelen: u32, data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(w32(be, wirelen));
    body.extend(data);
    block(be, 3, &body)
}

/// An owned copy of a packet, for comparisons.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owned {
    ts_sec: i64,
    ts_nsec: u32,
    wirelen: u32,
    linktype: u16,
    interface: u32,
    data: Vec<u8>,
}

impl From<Packet<'_>> for Owned {
    fn from(p: Packet<'_>) -> Self {
        assert_eq!(p.caplen as usize, p.data.len());
        Owned {
            ts_sec: p.ts_sec,
            ts_nsec: p.ts_nsec,
            wirelen: p.wirelen,
            linktype: p.linktype,
            interface: p.interface,
            data: p.data.to_vec(),
        }
    }
}

/// Reads everything: the packets before the first error, and that error.
fn read_all_from<R: Read>(r: R) -> (Vec<Owned>, Option<CaptureError>) {
    let mut reader = match CaptureReader::from_reader(r, "test") {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut v = Vec::new();
    loop {
        match reader.next_packet() {
            Ok(Some(p)) => v.push(p.into()),
            Ok(None) => return (v, None),
            Err(e) => {
                // After an error the reader is finished.
                assert!(matches!(reader.next_packet(), Ok(None)));
                return (v, Some(e));
            }
        }
    }
}

fn read_all(bytes: &[u8]) -> (Vec<Owned>, Option<CaptureError>) {
    let whole = read_all_from(bytes);
    // Same answer when the input arrives one byte per read.
    let trickle = read_all_from(OneByte(bytes));
    assert_eq!(whole.0, trickle.0);
    assert_eq!(
        whole.1.as_ref().map(|e| (e.offset(), e.to_string())),
        trickle.1.as_ref().map(|e| (e.offset(), e.to_string()))
    );
    whole
}

fn read_ok(bytes: &[u8]) -> Vec<Owned> {
    let (v, e) = read_all(bytes);
    if let Some(e) = e {
        panic!("unexpected error: {e}");
    }
    v
}

/// A reader that returns one byte per `read` call.
struct OneByte<'a>(&'a [u8]);

impl Read for OneByte<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match (self.0.split_first(), buf.first_mut()) {
            (Some((b, rest)), Some(slot)) => {
                *slot = *b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

fn sample_packets() -> Vec<Vec<u8>> {
    vec![vec![0xaa; 60], vec![1, 2, 3], vec![], (0..=255).collect()]
}

// ---------- pcap ----------

#[test]
fn pcap_round_trip_all_precisions_and_orders() {
    for nanos in [false, true] {
        for big_endian in [false, true] {
            let format = CaptureFormat::Pcap {
                nanos,
                big_endian,
                linktype: 113,
                snaplen: 4096,
                fcs_len: None,
            };
            let mut w = CaptureWriter::new(Vec::new(), "mem", &format).unwrap();
            for (i, d) in sample_packets().iter().enumerate() {
                let p = Packet {
                    wirelen: d.len() as u32 + 7,
                    ..Packet::new(1_600_000_000 + i as i64, 123_456_789, 113, d)
                };
                w.write_packet(&p).unwrap();
            }
            let bytes = w.finish().unwrap();
            let mut r = CaptureReader::from_reader(&bytes[..], "mem").unwrap();
            assert_eq!(r.format(), format);
            assert_eq!(r.linktype(), Some(113));
            let mut n = 0;
            while let Some(p) = r.next_packet().unwrap() {
                let d = &sample_packets()[n];
                assert_eq!(p.data, &d[..]);
                assert_eq!(p.wirelen, d.len() as u32 + 7);
                assert_eq!(p.ts_sec, 1_600_000_000 + n as i64);
                assert_eq!(p.ts_nsec, if nanos { 123_456_789 } else { 123_456_000 });
                assert_eq!(p.snaplen, 4096);
                n += 1;
            }
            assert_eq!(n, 4);
            assert_eq!(r.offset(), bytes.len() as u64);
        }
    }
}

#[test]
fn pcap_big_endian_by_hand() {
    let mut f = pcap_header(true, 0xa1b2_c3d4, 2, 4, 65535, 1);
    assert_eq!(&f[..4], &[0xa1, 0xb2, 0xc3, 0xd4]);
    f.extend(pcap_record(true, 10, 999_999, 100, &[9; 20]));
    f.extend(pcap_record(true, 11, 1, 4, &[8; 4]));
    let v = read_ok(&f);
    assert_eq!(v.len(), 2);
    assert_eq!(
        (v[0].ts_sec, v[0].ts_nsec, v[0].wirelen),
        (10, 999_999_000, 100)
    );
    assert_eq!((v[1].ts_sec, v[1].ts_nsec, v[1].data.len()), (11, 1000, 4));

    let mut f = pcap_header(true, 0xa1b2_3c4d, 2, 4, 65535, 1);
    f.extend(pcap_record(true, 10, 999_999_999, 100, &[9; 20]));
    let v = read_ok(&f);
    assert_eq!(v[0].ts_nsec, 999_999_999);
    let r = CaptureReader::from_reader(&f[..], "x").unwrap();
    assert!(matches!(
        r.format(),
        CaptureFormat::Pcap {
            nanos: true,
            big_endian: true,
            ..
        }
    ));
}

#[test]
fn pcap_microsecond_overflow_carries_into_seconds() {
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 65535, 1);
    f.extend(pcap_record(false, 10, 2_500_000, 1, &[0]));
    let v = read_ok(&f);
    assert_eq!((v[0].ts_sec, v[0].ts_nsec), (12, 500_000_000));
}

#[test]
fn pcap_versions() {
    for (major, minor, ok) in [
        (1, 0, false),
        (2, 5, false),
        (3, 0, false),
        (2, 4, true),
        (2, 3, true),
        (2, 0, true),
    ] {
        let f = pcap_header(false, 0xa1b2_c3d4, major, minor, 65535, 1);
        let r = CaptureReader::from_reader(&f[..], "v");
        assert_eq!(r.is_ok(), ok, "version {major}.{minor}");
        if let Err(e) = r {
            assert_eq!(e.offset(), 4);
            assert!(matches!(
                e.kind(),
                ErrorKind::ArchaicVersion { .. } | ErrorKind::UnsupportedVersion { .. }
            ));
        }
    }
}

#[test]
fn pcap_old_versions_swap_lengths() {
    // Before 2.3 the caplen and len fields were the other way round.
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 2, 65535, 1);
    f.extend(w32(false, 1));
    f.extend(w32(false, 0));
    f.extend(w32(false, 100)); // len
    f.extend(w32(false, 3)); // caplen
    f.extend([1, 2, 3]);
    let v = read_ok(&f);
    assert_eq!((v[0].wirelen, v[0].data.len()), (100, 3));
    // 2.3: swapped only if caplen > len.
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 3, 65535, 1);
    f.extend(w32(false, 1));
    f.extend(w32(false, 0));
    f.extend(w32(false, 100));
    f.extend(w32(false, 3));
    f.extend([1, 2, 3]);
    assert_eq!(read_ok(&f)[0].data.len(), 3);
}

#[test]
fn pcap_fcs_bits_and_reserved_bits() {
    // Bit 26: FCS length present; bits 28..31: FCS length (2 x 16 bits).
    let f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 65535, 0x2400_0001);
    let r = CaptureReader::from_reader(&f[..], "fcs").unwrap();
    assert_eq!(
        r.format(),
        CaptureFormat::Pcap {
            nanos: false,
            big_endian: false,
            linktype: 1,
            snaplen: 65535,
            fcs_len: Some(2)
        }
    );
    // FCS length bits without the flag: link type still 1, no FCS length.
    let f = pcap_header(true, 0xa1b2_c3d4, 2, 4, 65535, 0x3000_0001);
    let r = CaptureReader::from_reader(&f[..], "fcs").unwrap();
    assert!(matches!(
        r.format(),
        CaptureFormat::Pcap {
            linktype: 1,
            fcs_len: None,
            ..
        }
    ));
    // Writing keeps the FCS field.
    let bytes = CaptureWriter::new(
        Vec::new(),
        "w",
        &CaptureFormat::Pcap {
            nanos: false,
            big_endian: false,
            linktype: 1,
            snaplen: 65535,
            fcs_len: Some(2),
        },
    )
    .unwrap()
    .finish()
    .unwrap();
    assert_eq!(&bytes[20..24], &0x2400_0001u32.to_le_bytes());
    // Reserved bits 16..25 set: rejected.
    let f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 65535, 0x0030_0000);
    let e = CaptureReader::from_reader(&f[..], "r").err().unwrap();
    assert!(matches!(
        e.kind(),
        ErrorKind::ReservedLinkTypeBits(0x0030_0000)
    ));
    assert_eq!(e.offset(), 20);
}

#[test]
fn pcap_caplen_limits() {
    // Longer than the snaplen: cut to the snaplen, like libpcap.
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 14, 1);
    f.extend(pcap_record(false, 1, 0, 60, &[7; 20]));
    f.extend(pcap_record(false, 2, 0, 60, &[8; 10]));
    let v = read_ok(&f);
    assert_eq!(v[0].data, vec![7; 14]);
    assert_eq!(v[1].data, vec![8; 10]);
    // Larger than sane: an error at that record, after the good packet.
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 0, 1);
    f.extend(pcap_record(false, 1, 0, 60, &[7; 20]));
    let bad_at = f.len() as u64;
    f.extend(w32(false, 1));
    f.extend(w32(false, 0));
    f.extend(w32(false, 262_145));
    f.extend(w32(false, 262_145));
    let (v, e) = read_all(&f);
    assert_eq!(v.len(), 1);
    let e = e.unwrap();
    assert_eq!(e.offset(), bad_at);
    assert!(matches!(
        e.kind(),
        ErrorKind::CaplenTooLarge {
            caplen: 262_145,
            max: 262_144
        }
    ));
    // D-Bus allows larger messages: a 300000-byte packet reads fine.
    let big = vec![5u8; 300_000];
    let mut f = pcap_header(false, 0xa1b2_c3d4, 2, 4, 0, 231);
    f.extend(pcap_record(false, 1, 0, 300_000, &big));
    f.extend(pcap_record(false, 1, 0, 3, &[1, 2, 3]));
    let v = read_ok(&f);
    assert_eq!(v[0].data.len(), 300_000);
    assert_eq!(v[1].data, vec![1, 2, 3]);
}

#[test]
fn bad_magic_and_empty() {
    let (_, e) = read_all(b"\x00\x01\x02\x03rest of it");
    let e = e.unwrap();
    assert!(matches!(e.kind(), ErrorKind::BadMagic(0x0001_0203)));
    assert_eq!(e.offset(), 0);
    let (_, e) = read_all(b"");
    assert!(matches!(
        e.unwrap().kind(),
        ErrorKind::Truncated {
            have: 0,
            need: 4,
            ..
        }
    ));
}

#[test]
fn kuznetzov_pcap() {
    let mut f = pcap_header(false, 0xa1b2_cd34, 2, 4, 65535, 1);
    let mut rec = pcap_record(false, 5, 6, 3, &[]);
    rec.truncate(16);
    rec[8..12].copy_from_slice(&3u32.to_le_bytes());
    rec.extend([0; 8]); // ifindex, protocol, pkt_type, pad
    rec.extend([1, 2, 3]);
    f.extend(rec);
    let v = read_ok(&f);
    assert_eq!(v[0].data, vec![1, 2, 3]);
}

/// Every cut of a file: the complete packets, then an error naming the
/// start of the cut header/record/block (never a panic); no error when the
/// cut falls on a block boundary.
///
/// `packet_ends`: where each packet record ends; `block_ends`: where every
/// structure (file header, blocks, records) ends.
fn check_every_cut(file: &[u8], packet_ends: &[usize], block_ends: &[usize]) {
    for cut in 0..=file.len() {
        let (v, e) = read_all(&file[..cut]);
        let complete = packet_ends.iter().filter(|&&b| b <= cut).count();
        assert_eq!(v.len(), complete, "cut at {cut}");
        let at_boundary = block_ends.contains(&cut);
        // A pcapng file cut before its first interface description ends
        // without one: refused whole (at the end of what is there).
        if let Some(e) = e
            .as_ref()
            .filter(|e| matches!(e.kind(), ErrorKind::NoInterfaces))
        {
            assert!(at_boundary, "{e} for cut at {cut}");
            assert_eq!(e.offset(), cut as u64, "{e}");
            continue;
        }
        match e {
            None => assert!(at_boundary, "no error for cut at {cut}"),
            Some(e) => {
                assert!(!at_boundary, "error {e} for cut at {cut}");
                let last = block_ends
                    .iter()
                    .copied()
                    .filter(|&b| b <= cut)
                    .max()
                    .unwrap_or(0);
                assert_eq!(e.offset(), last as u64, "cut at {cut}: {e}");
                assert!(matches!(e.kind(), ErrorKind::Truncated { .. }), "{e}");
            }
        }
    }
}

#[test]
fn pcap_truncated_at_every_offset() {
    for be in [false, true] {
        let mut f = pcap_header(be, 0xa1b2_c3d4, 2, 4, 65535, 1);
        let mut ends = Vec::new();
        for (i, d) in sample_packets().iter().take(3).enumerate() {
            f.extend(pcap_record(be, i as u32, 0, d.len() as u32, d));
            ends.push(f.len());
        }
        let mut blocks = ends.clone();
        blocks.push(24);
        check_every_cut(&f, &ends, &blocks);
    }
}

// ---------- pcapng ----------

fn two_interface_file(be: bool) -> (Vec<u8>, Vec<usize>, Vec<usize>) {
    let mut f = shb(be, 1, 0, &opt(be, 4, b"sluice test\0"));
    f.extend(idb(
        be,
        1,
        65535,
        &[opt(be, 2, b"eth0"), opt(be, 9, &[9]), opt(be, 0, &[])].concat(),
    ));
    f.extend(idb(
        be,
        113,
        128,
        &[
            opt(be, 9, &[3]),
            opt(
                be,
                14,
                &w32(be, 0)
                    .iter()
                    .chain(&[0; 4])
                    .copied()
                    .collect::<Vec<_>>(),
            ),
        ]
        .concat(),
    ));
    let mut ends = Vec::new();
    f.extend(epb(be, 0, 1_500_000_000_123_456_789, 60, &[0xee; 60], &[]));
    ends.push(f.len());
    // An unknown block, an interface statistics block and a custom block are skipped.
    f.extend(block(be, 0x0000_0BAD, &[1, 2, 3, 4, 5, 6, 7, 8]));
    f.extend(block(be, 5, &[0; 16]));
    f.extend(block(be, 0x4000_0BAD, &[0; 4]));
    f.extend(epb(
        be,
        1,
        1_500_000_000_250,
        200,
        &[0x11; 150],
        &opt(be, 1, b"comment"),
    ));
    ends.push(f.len());
    f.extend(opb(be, 0, 7_000_000_001, &[0x22; 5]));
    ends.push(f.len());
    f.extend(spb(be, 9, &[0x33; 9]));
    ends.push(f.len());
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < f.len() {
        let len = if be {
            u32::from_be_bytes(f[at + 4..at + 8].try_into().unwrap())
        } else {
            u32::from_le_bytes(f[at + 4..at + 8].try_into().unwrap())
        };
        at += len as usize;
        blocks.push(at);
    }
    (f, ends, blocks)
}

#[test]
fn pcapng_two_interfaces_spb_opb_and_skipped_blocks() {
    for be in [false, true] {
        let (f, _, _) = two_interface_file(be);
        let r = CaptureReader::from_reader(&f[..], "ng").unwrap();
        assert_eq!(
            r.format(),
            CaptureFormat::PcapNg {
                big_endian: be,
                first_interface: Some(InterfaceInfo {
                    linktype: 1,
                    snaplen: 65535
                })
            }
        );
        let v = read_ok(&f);
        assert_eq!(v.len(), 4);
        // Nanosecond interface.
        assert_eq!(
            (v[0].ts_sec, v[0].ts_nsec, v[0].linktype, v[0].interface),
            (1_500_000_000, 123_456_789, 1, 0)
        );
        assert_eq!(v[0].data, vec![0xee; 60]);
        // Millisecond interface with snaplen 128: data cut to 128.
        assert_eq!(
            (v[1].ts_sec, v[1].ts_nsec, v[1].linktype, v[1].interface),
            (1_500_000_000, 250_000_000, 113, 1)
        );
        assert_eq!((v[1].data.len(), v[1].wirelen), (128, 200));
        // OPB on interface 0 (nanoseconds).
        assert_eq!((v[2].ts_sec, v[2].ts_nsec, v[2].data.len()), (7, 1, 5));
        // SPB: interface 0, no timestamp.
        assert_eq!(
            (v[3].ts_sec, v[3].linktype, v[3].data.clone()),
            (0, 1, vec![0x33; 9])
        );
    }
}

#[test]
fn pcapng_timestamp_resolutions_and_offset() {
    let be = false;
    let mut f = shb(be, 1, 0, &[]);
    f.extend(idb(be, 1, 0, &[]));
    f.extend(idb(be, 1, 0, &opt(be, 9, &[0x80 | 10])));
    f.extend(idb(
        be,
        1,
        0,
        &[opt(be, 9, &[0]), opt(be, 14, &(-100i64).to_le_bytes())].concat(),
    ));
    f.extend(epb(be, 0, 3_000_001, 1, &[0], &[]));
    f.extend(epb(be, 1, 2048 + 512, 1, &[0], &[]));
    f.extend(epb(be, 2, 1000, 1, &[0], &[]));
    let v = read_ok(&f);
    assert_eq!((v[0].ts_sec, v[0].ts_nsec), (3, 1000));
    assert_eq!((v[1].ts_sec, v[1].ts_nsec), (2, 500_000_000));
    assert_eq!((v[2].ts_sec, v[2].ts_nsec), (900, 0));
    // Resolutions that do not fit in 64 bits are rejected.
    for bad in [20u8, 0x80 | 64] {
        let mut f = shb(be, 1, 0, &[]);
        f.extend(idb(be, 1, 0, &opt(be, 9, &[bad])));
        let e = CaptureReader::from_reader(&f[..], "r").err().unwrap();
        assert!(matches!(e.kind(), ErrorKind::BadTsResol(_)), "{e}");
        assert_eq!(e.offset(), 28);
    }
}

#[test]
fn pcapng_sections_with_different_byte_orders() {
    let mut f = shb(false, 1, 0, &[]);
    f.extend(idb(false, 1, 0, &[]));
    f.extend(epb(false, 0, 1, 1, &[1], &[]));
    f.extend(shb(true, 1, 2, &[]));
    f.extend(idb(true, 105, 0, &[]));
    f.extend(epb(true, 0, 2, 1, &[2], &[]));
    let v = read_ok(&f);
    assert_eq!((v[0].linktype, v[1].linktype), (1, 105));
    assert_eq!(v[1].data, vec![2]);
    // A new section forgets the old interfaces.
    let mut f = shb(false, 1, 0, &[]);
    f.extend(idb(false, 1, 0, &[]));
    f.extend(idb(false, 1, 0, &[]));
    f.extend(shb(false, 1, 0, &[]));
    f.extend(idb(false, 1, 0, &[]));
    let at = f.len() as u64;
    f.extend(epb(false, 1, 2, 1, &[2], &[]));
    let (_, e) = read_all(&f);
    let e = e.unwrap();
    assert!(matches!(
        e.kind(),
        ErrorKind::UnknownInterface { id: 1, count: 1 }
    ));
    assert_eq!(e.offset(), at);
}

/// Section headers as libpcap reads them (issue 36: sluice read 0 packets
/// where tcpdump read them all): one with an odd version, a bad trailer or
/// only 12 bytes before the first interface is skipped; after it, a new
/// section must be version 1.x of any minor version.
#[test]
fn pcapng_section_headers_as_libpcap_reads_them() {
    for be in [false, true] {
        let head = || {
            let mut f = shb(be, 1, 0, &[]);
            f.extend(idb(be, 1, 0, &[]));
            f.extend(epb(be, 0, 0, 1, b"a", &[]));
            f
        };
        let short = block(be, 0x0A0D_0D0A, &[]);
        let mut bad_trailer = shb(be, 1, 0, &[]);
        let n = bad_trailer.len();
        bad_trailer[n - 4..].copy_from_slice(&w32(be, 999));
        // Before the first interface: skipped, whatever it says.
        for (what, extra, ok) in [
            ("version 0.0", shb(be, 0, 0, &[]), true),
            ("version 2.0", shb(be, 2, 0, &[]), true),
            ("12 bytes", short.clone(), true),
            ("bad trailer", bad_trailer.clone(), false),
        ] {
            let mut f = shb(be, 1, 0, &[]);
            f.extend(extra);
            f.extend(idb(be, 1, 0, &[]));
            f.extend(epb(be, 0, 0, 1, b"a", &[]));
            let (v, e) = read_all(&f);
            assert_eq!((v.len(), e.is_none()), (ok as usize, ok), "{what}: {e:?}");
        }
        // A new section after packets.
        for (what, extra, ok) in [
            ("version 1.1", shb(be, 1, 1, &[]), true),
            ("version 1.2", shb(be, 1, 2, &[]), true),
            ("version 0.0", shb(be, 0, 0, &[]), false),
            ("version 2.0", shb(be, 2, 0, &[]), false),
            ("12 bytes", short.clone(), false),
        ] {
            let mut f = head();
            f.extend(extra);
            f.extend(idb(be, 1, 0, &[]));
            f.extend(epb(be, 0, 0, 1, b"b", &[]));
            let (v, e) = read_all(&f);
            let want = if ok { 2 } else { 1 };
            assert_eq!((v.len(), e.is_none()), (want, ok), "{what}: {e:?}");
        }
    }
}

#[test]
fn pcapng_versions() {
    for (major, minor, ok) in [
        (1, 0, true),
        (1, 2, true),
        (1, 1, false),
        (0, 1, false),
        (2, 0, false),
    ] {
        let mut f = shb(false, major, minor, &[]);
        f.extend(idb(false, 1, 0, &[]));
        let r = CaptureReader::from_reader(&f[..], "v");
        assert_eq!(r.is_ok(), ok, "{major}.{minor}");
    }
}

#[test]
fn pcapng_without_interfaces_is_refused() {
    for be in [false, true] {
        // A section header alone, two sections, or a section with a block
        // of another kind: nothing says what a packet would be.
        let one = shb(be, 1, 0, &[]);
        let mut two = one.clone();
        two.extend(shb(be, 1, 0, &[]));
        let mut other = one.clone();
        other.extend(block(be, 0xBAD, &[0; 8]));
        for f in [one.clone(), two, other] {
            let e = match CaptureReader::from_reader(&f[..], "x.pcapng") {
                Err(e) => e,
                Ok(mut r) => r.next_packet().unwrap_err(),
            };
            assert!(matches!(e.kind(), ErrorKind::NoInterfaces), "{e}");
            assert!(e.to_string().contains("no Interface Description Blocks"));
        }
        // A second section header in the other byte order, before any
        // interface: libpcap reads its length in the first one's order,
        // so does sluice (an error, not a section).
        let mut swapped = one.clone();
        swapped.extend(shb(!be, 1, 0, &[]));
        assert!(read_all(&swapped).1.is_some());
        // One interface in a later section is enough.
        let mut late = shb(be, 1, 0, &[]);
        late.extend(shb(be, 1, 0, &[]));
        late.extend(idb(be, 1, 0, &[]));
        let mut r = CaptureReader::from_reader(&late[..], "x.pcapng").unwrap();
        assert!(r.next_packet().unwrap().is_none());
        assert_eq!(r.declared_interfaces().len(), 1);
    }
}

#[test]
fn pcapng_corrupt_block_lengths() {
    let be = false;
    let mut good = shb(be, 1, 0, &[]);
    good.extend(idb(be, 1, 0, &[]));
    good.extend(epb(be, 0, 1, 1, &[1], &[]));
    let epb_at = good.len();
    let tail = epb(be, 0, 2, 1, &[2], &[]);

    // Each corruption of the second EPB: the first packet comes out, then an
    // error at the second block.
    type Corrupt = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(Corrupt, &str)> = vec![
        (
            Box::new(|b: &mut Vec<u8>| b[4..8].copy_from_slice(&33u32.to_le_bytes())),
            "not a multiple of 4",
        ),
        (
            Box::new(|b: &mut Vec<u8>| b[4..8].copy_from_slice(&8u32.to_le_bytes())),
            "shorter",
        ),
        (
            Box::new(|b: &mut Vec<u8>| b[4..8].copy_from_slice(&28u32.to_le_bytes())),
            "shorter",
        ),
        (
            Box::new(|b: &mut Vec<u8>| {
                b[4..8].copy_from_slice(&u32::MAX.wrapping_sub(3).to_le_bytes())
            }),
            "256 MiB",
        ),
        (
            Box::new(|b: &mut Vec<u8>| {
                let n = b.len();
                b[n - 4..].copy_from_slice(&99u32.to_le_bytes())
            }),
            "don't match",
        ),
        (
            Box::new(|b: &mut Vec<u8>| b[20..24].copy_from_slice(&100u32.to_le_bytes())),
            "captured length",
        ),
        (
            Box::new(|b: &mut Vec<u8>| b[4..8].copy_from_slice(&1000u32.to_le_bytes())),
            "file ends",
        ),
    ];
    for (corrupt, msg) in cases {
        let mut b = tail.clone();
        corrupt(&mut b);
        let mut f = good.clone();
        f.extend(b);
        let (v, e) = read_all(&f);
        assert_eq!(v.len(), 1, "{msg}");
        let e = e.unwrap();
        assert!(e.to_string().contains(msg), "{e} should say {msg}");
        assert!(
            e.offset() >= epb_at as u64 && e.offset() < f.len() as u64,
            "{e}"
        );
    }

    // Trailer mismatch on a skipped block and on the section header.
    let mut f = good.clone();
    let mut b = block(be, 0xBAD, &[0; 8]);
    let n = b.len();
    b[n - 4..].copy_from_slice(&0u32.to_le_bytes());
    f.extend(b);
    let (v, e) = read_all(&f);
    assert_eq!(v.len(), 1);
    assert!(matches!(
        e.unwrap().kind(),
        ErrorKind::BlockLengthMismatch {
            header: 20,
            trailer: 0
        }
    ));

    // libpcap does not check the first section header's trailer; a later
    // one's it does.
    let mut f = shb(be, 1, 0, &[]);
    f[24..28].copy_from_slice(&0u32.to_le_bytes());
    f.extend(idb(be, 1, 0, &[]));
    f.extend(epb(be, 0, 0, 1, b"a", &[]));
    let mut later = f.clone();
    later.extend(shb(be, 1, 0, &[]));
    let n = later.len();
    later[n - 4..].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(read_ok(&f).len(), 1);
    let (v, e) = read_all(&later);
    assert_eq!(v.len(), 1);
    assert!(matches!(
        e.unwrap().kind(),
        ErrorKind::BlockLengthMismatch { .. }
    ));

    // Bad byte-order magic.
    let mut f = shb(be, 1, 0, &[]);
    f[8] = 0;
    let e = CaptureReader::from_reader(&f[..], "shb").err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::BadByteOrderMagic(_)));
    assert_eq!(e.offset(), 8);

    // IDB option running past the end of the block.
    let mut f = shb(be, 1, 0, &[]);
    let mut i = idb(be, 1, 0, &opt(be, 2, b"eth0"));
    i[18..20].copy_from_slice(&200u16.to_le_bytes());
    f.extend(i);
    let e = CaptureReader::from_reader(&f[..], "idb").err().unwrap();
    assert!(matches!(e.kind(), ErrorKind::BadBlock { .. }), "{e}");
}

#[test]
fn pcapng_packet_before_interface() {
    let mut f = shb(false, 1, 0, &[]);
    f.extend(epb(false, 0, 1, 1, &[1], &[]));
    let r = CaptureReader::from_reader(&f[..], "x").unwrap();
    assert_eq!(r.linktype(), None);
    let (v, e) = read_all(&f);
    assert!(v.is_empty());
    assert!(matches!(
        e.unwrap().kind(),
        ErrorKind::UnknownInterface { id: 0, count: 0 }
    ));
    let mut f = shb(false, 1, 0, &[]);
    f.extend(spb(false, 1, &[1]));
    assert!(matches!(
        read_all(&f).1.unwrap().kind(),
        ErrorKind::UnknownInterface { .. }
    ));
}

#[test]
fn pcapng_truncated_at_every_offset() {
    for be in [false, true] {
        let (f, ends, blocks) = two_interface_file(be);
        check_every_cut(&f, &ends, &blocks);
    }
}

#[test]
fn pcapng_large_block_grows_buffer() {
    let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
    let mut f = shb(false, 1, 0, &[]);
    f.extend(idb(false, 231, 0, &[]));
    f.extend(epb(false, 0, 1, 1_000_000, &data, &[]));
    f.extend(block(false, 0xBAD, &vec![0; 700_000]));
    f.extend(epb(false, 0, 1, 3, &data[..3], &[]));
    let v = read_all_from(&f[..]);
    assert!(v.1.is_none());
    assert_eq!(v.0[0].data, data);
    assert_eq!(v.0[1].data, &data[..3]);
}

// ---------- writers ----------

#[test]
fn pcapng_writer_round_trip_multiple_interfaces() {
    for be in [false, true] {
        let format = CaptureFormat::PcapNg {
            big_endian: be,
            first_interface: Some(InterfaceInfo {
                linktype: 1,
                snaplen: 65535,
            }),
        };
        let mut w = CaptureWriter::new(Vec::new(), "w", &format).unwrap();
        let inputs = [
            (1u16, 65535u32, vec![1u8; 61]),
            (113, 1000, vec![2; 7]),
            (1, 65535, vec![3; 8]),
            (1, 100, vec![4; 1]),
        ];
        for (i, (lt, snap, d)) in inputs.iter().enumerate() {
            let p = Packet {
                snaplen: *snap,
                wirelen: 1000,
                ..Packet::new(1_700_000_000 + i as i64, 999_999_999, *lt, d)
            };
            w.write_packet(&p).unwrap();
        }
        let bytes = w.finish().unwrap();
        let mut r = CaptureReader::from_reader(&bytes[..], "r").unwrap();
        assert_eq!(r.format(), format);
        let mut n = 0;
        while let Some(p) = r.next_packet().unwrap() {
            let (lt, snap, d) = &inputs[n];
            assert_eq!(
                (p.linktype, p.snaplen, p.data, p.wirelen),
                (*lt, *snap, &d[..], 1000)
            );
            assert_eq!(
                (p.ts_sec, p.ts_nsec),
                (1_700_000_000 + n as i64, 999_999_999)
            );
            assert_eq!(p.interface, [0, 1, 0, 2][n]);
            n += 1;
        }
        assert_eq!(n, 4);
    }
}

#[test]
fn mirror_input_format() {
    // pcap in, pcap out byte for byte (nanosecond, big-endian).
    let mut f = pcap_header(true, 0xa1b2_3c4d, 2, 4, 1500, 0x2400_0065);
    f.extend(pcap_record(true, 10, 5, 100, &[9; 20]));
    f.extend(pcap_record(true, 11, 6, 4, &[8; 4]));
    let mut r = CaptureReader::from_reader(&f[..], "in").unwrap();
    let mut w = CaptureWriter::new(Vec::new(), "out", &r.format()).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        w.write_packet(&p).unwrap();
    }
    assert_eq!(w.finish().unwrap(), f);

    // An empty pcapng output still declares the input's first interface.
    let (f, _, _) = two_interface_file(true);
    let r = CaptureReader::from_reader(&f[..], "in").unwrap();
    let out = CaptureWriter::new(Vec::new(), "out", &r.format())
        .unwrap()
        .finish()
        .unwrap();
    let r2 = CaptureReader::from_reader(&out[..], "out").unwrap();
    assert_eq!(r2.format(), r.format());
}

#[test]
fn writer_copies_times_as_libpcap_dumps_them() {
    // libpcap's dumper writes the seconds' low 32 bits and the fraction
    // as it is, in or out of range: tcpdump -w copies such records.
    let mut w = CaptureWriter::new(Vec::new(), "w", &CaptureFormat::pcap(1, 0)).unwrap();
    w.write_packet(&Packet::new(-1, 0, 1, b"x")).unwrap();
    w.write_packet(&Packet::new(1 << 32 | 7, 1_500_000_000, 1, b"y"))
        .unwrap();
    let b = w.finish().unwrap();
    let field = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    assert_eq!((field(24), field(28)), (u32::MAX, 0));
    assert_eq!((field(24 + 17), field(28 + 17)), (7, 1_500_000));
    let mut w = CaptureWriter::new(Vec::new(), "w", &CaptureFormat::pcapng()).unwrap();
    w.write_packet(&Packet::new(i64::MAX, 0, 1, b"x")).unwrap();
    assert!(w.finish().is_ok());
}

#[test]
fn empty_pcapng_outputs_declare_an_interface() {
    let out = CaptureWriter::new(Vec::new(), "w", &CaptureFormat::pcapng())
        .unwrap()
        .finish()
        .unwrap();
    let r = CaptureReader::from_reader(&out[..], "w").unwrap();
    assert_eq!(r.linktype(), Some(1));
}

#[test]
fn write_error_names_file_and_offset() {
    struct Full;
    impl std::io::Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let w = CaptureWriter::new(Full, "out.pcap", &CaptureFormat::pcap(1, 0)).unwrap();
    let e = w.finish().err().unwrap();
    assert_eq!(e.file(), "out.pcap");
    assert!(e.to_string().contains("disk full"), "{e}");
}

#[test]
fn open_missing_file_names_it() {
    let e = CaptureReader::open("/nonexistent/sluice/x.pcap")
        .err()
        .unwrap();
    assert_eq!(e.file(), "/nonexistent/sluice/x.pcap");
    assert!(matches!(e.kind(), ErrorKind::Io(_)));
}

#[test]
fn files_on_disk() {
    let dir = std::env::temp_dir().join(format!("sluice-capture-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("a.pcapng");
    let mut w = CaptureWriter::create(&path, &CaptureFormat::pcapng()).unwrap();
    w.write_packet(&Packet::new(5, 6, 1, b"abcdef")).unwrap();
    w.finish().unwrap();
    let mut r = CaptureReader::open(&path).unwrap();
    assert_eq!(r.next_packet().unwrap().unwrap().data, b"abcdef");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------- robustness ----------

mod props {
    use super::*;
    use proptest::prelude::*;

    fn drain(bytes: &[u8]) -> usize {
        let Ok(mut r) = CaptureReader::from_reader(bytes, "fuzz") else {
            return 0;
        };
        let mut n = 0;
        while let Ok(Some(p)) = r.next_packet() {
            assert_eq!(p.caplen as usize, p.data.len());
            n += 1;
        }
        n
    }

    fn valid_files() -> Vec<Vec<u8>> {
        let mut pcap = pcap_header(false, 0xa1b2_c3d4, 2, 4, 65535, 1);
        for d in sample_packets() {
            pcap.extend(pcap_record(false, 1, 2, 3, &d));
        }
        vec![
            pcap,
            two_interface_file(false).0,
            two_interface_file(true).0,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            drain(&bytes);
        }

        #[test]
        fn arbitrary_bytes_after_magic_never_panic(
            magic in prop::sample::select(vec![
                [0xd4u8, 0xc3, 0xb2, 0xa1], [0xa1, 0xb2, 0xc3, 0xd4], [0x4d, 0x3c, 0xb2, 0xa1],
                [0x0a, 0x0d, 0x0d, 0x0a], [0x34, 0xcd, 0xb2, 0xa1],
            ]),
            rest in proptest::collection::vec(any::<u8>(), 0..512),
        ) {
            let mut bytes = magic.to_vec();
            bytes.extend(rest);
            drain(&bytes);
        }

        #[test]
        fn mutated_valid_files_never_panic(
            which in 0usize..3,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut f = valid_files().swap_remove(which);
            for (i, b) in edits {
                let i = i.index(f.len());
                f[i] = b;
            }
            drain(&f);
            let c = cut.index(f.len() + 1);
            drain(&f[..c]);
        }
    }
}
