//! TCP session filters and packets for the native merged classifier's
//! tests and examples (the examples include this file with `#[path]`).

use sluice_ir::{CmpOp, Pred, Size, Val};

/// `tcp and src host a and dst host b and src port p and dst port q`, as
/// the pcap compiler writes it for Ethernet.
pub fn session(a: u32, b: u32, p: u32, q: u32) -> Pred {
    let ld = Val::load_abs;
    let port = |off| Val::load(Val::ip_hdr_len(14), off, Size::Half);
    Pred::and(vec![
        Pred::eq(ld(12, Size::Half), 0x800),
        Pred::eq(ld(23, Size::Byte), 6),
        Pred::eq(ld(26, Size::Word), a),
        Pred::eq(ld(30, Size::Word), b),
        Pred::not(Pred::cmp(
            CmpOp::Set,
            ld(20, Size::Half),
            Val::Const(0x1fff),
        )),
        Pred::eq(port(14), p),
        Pred::eq(port(16), q),
    ])
}

/// An Ethernet/IPv4/TCP packet (IPv4 header of `ihl` words, fragment
/// field `frag`, protocol `proto`).
pub fn tcp_packet(a: u32, b: u32, p: u16, q: u16, ihl: u8, frag: u16, proto: u8) -> Vec<u8> {
    let mut v = vec![0u8; 14 + ihl as usize * 4 + 20];
    v[12] = 8;
    v[14] = 0x40 | ihl;
    v[20..22].copy_from_slice(&frag.to_be_bytes());
    v[23] = proto;
    v[26..30].copy_from_slice(&a.to_be_bytes());
    v[30..34].copy_from_slice(&b.to_be_bytes());
    let t = 14 + ihl as usize * 4;
    v[t..t + 2].copy_from_slice(&p.to_be_bytes());
    v[t + 2..t + 4].copy_from_slice(&q.to_be_bytes());
    v
}
