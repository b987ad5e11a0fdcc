//! Native code must agree with the IR's reference interpreter on every packet.

use proptest::prelude::*;
use sluice_ir::{Filter, Pred, Size};

use crate::NativeFilter;

const ACCEPT: u32 = 262144;

/// Check native code on every prefix of every packet, with two wire lengths.
fn check(f: &Filter, pkts: &[Vec<u8>]) -> NativeFilter {
    let n = NativeFilter::compile(f).unwrap_or_else(|e| panic!("{e}: {:?}", f.pred));
    for pkt in pkts {
        for cut in 0..=pkt.len() {
            let p = &pkt[..cut];
            for wirelen in [cut as u32, pkt.len() as u32 + 7] {
                assert_eq!(
                    n.run(p, wirelen),
                    f.run(p, wirelen),
                    "len={cut} wirelen={wirelen}\nfilter {:?}\npacket {p:02x?}",
                    f.pred
                );
            }
        }
    }
    n
}

#[test]
fn hand_built_filters() {
    let pkts = sample_packets();
    for (i, pred) in shared_filters().into_iter().enumerate() {
        check(&Filter::new(pred, ACCEPT + i as u32), &pkts);
    }
}

/// DPF's bounds-check aggregation: `tcp src port 80`-like conjunctions of
/// fixed-offset loads need one length check, not one per load.
#[test]
fn bounds_checks_are_aggregated() {
    let session = Pred::And(vec![
        ether_type(0x800),
        eq(ld(23, Size::Byte), 6),
        eq(ld(26, Size::Word), 0x0a000001),
        eq(ld(30, Size::Word), 0x0a000002),
        eq(ld(34, Size::Half), 1234),
    ]);
    let n = check(&Filter::new(session, 1), &sample_packets());
    let s = n.stats();
    assert_eq!(s.loads, 5);
    assert_eq!((s.bounds_checks, s.aggregated_checks), (1, 1), "{s:?}");

    // Under `not` a false conjunct accepts: no aggregation, one check per load.
    let negated = Pred::not(Pred::And(vec![
        ether_type(0x800),
        eq(ld(23, Size::Byte), 6),
    ]));
    let n = check(&Filter::new(negated, 1), &sample_packets());
    assert_eq!(
        (n.stats().bounds_checks, n.stats().aggregated_checks),
        (2, 0)
    );

    // A load behind an `or` is not certain: the aggregated check covers only
    // the certain ones, the other keeps its own.
    let p = Pred::And(vec![
        ether_type(0x800),
        Pred::Or(vec![eq(ld(26, Size::Word), 1), eq(ld(60, Size::Word), 1)]),
    ]);
    let n = check(&Filter::new(p, 1), &sample_packets());
    assert_eq!(
        (n.stats().bounds_checks, n.stats().aggregated_checks),
        (2, 1)
    );
}

/// An IPv4/TCP packet (14-byte Ethernet, IPv4 header of `ihl` words) from
/// 10.0.0.1:1234 to 10.0.0.2:80.
fn tcp_packet(ihl: u8) -> Vec<u8> {
    let mut p = vec![0u8; 14 + 4 * ihl as usize + 20];
    p[12] = 8;
    p[14] = 0x40 | ihl;
    p[23] = 6;
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[30..34].copy_from_slice(&[10, 0, 0, 2]);
    let th = 14 + 4 * ihl as usize;
    p[th..th + 4].copy_from_slice(&[0x04, 0xd2, 0, 80]);
    p
}

/// The TCP header's field at `off` (after a variable-length IPv4 header).
fn tcp_field(off: u32, size: Size) -> sluice_ir::Val {
    sluice_ir::Val::load(sluice_ir::Val::ip_hdr_len(14), 14 + off, size)
}

/// DPF's atom coalescing: source and destination port (adjacent 16-bit
/// fields) become one 32-bit compare, the fragment field's mask and the
/// protocol byte stay separate; and the two loads behind the variable IPv4
/// header length share one length check (one check per indirect base).
#[test]
fn adjacent_atoms_coalesce_and_indirect_checks_aggregate() {
    let session = Pred::And(vec![
        ether_type(0x800),
        eq(ld(23, Size::Byte), 6),
        eq(ld(26, Size::Word), 0x0a000001),
        eq(ld(30, Size::Word), 0x0a000002),
        Pred::eq(
            sluice_ir::Val::bin(
                sluice_ir::BinOp::And,
                ld(20, Size::Half),
                sluice_ir::Val::Const(0x1fff),
            ),
            0,
        ),
        eq(tcp_field(0, Size::Half), 1234),
        eq(tcp_field(2, Size::Half), 80),
    ]);
    let mut pkts = sample_packets();
    pkts.extend([tcp_packet(5), tcp_packet(6), tcp_packet(15)]);
    let n = check(&Filter::new(session.clone(), 1), &pkts);
    assert_eq!(n.run(&tcp_packet(5), 54), 1);
    assert_eq!(n.run(&tcp_packet(7), 62), 1);
    let s = n.stats();
    assert_eq!(s.coalesced, 1, "{s:?}");
    assert_eq!(s.aggregated_indirect, 0, "one indirect load left: {s:?}");
    // Only the ports, written as a nested `and`: still merged.
    let ports = Pred::And(vec![
        ether_type(0x800),
        Pred::And(vec![
            eq(tcp_field(2, Size::Half), 80),
            eq(ld(23, Size::Byte), 6),
        ]),
        eq(tcp_field(0, Size::Half), 1234),
    ]);
    let n = check(&Filter::new(ports, 1), &pkts);
    assert_eq!(n.stats().coalesced, 1);
    // Two indirect loads that cannot merge (not adjacent): one check.
    let apart = Pred::And(vec![
        ether_type(0x800),
        eq(tcp_field(0, Size::Half), 1234),
        Pred::eq(
            sluice_ir::Val::bin(
                sluice_ir::BinOp::And,
                tcp_field(13, Size::Byte),
                sluice_ir::Val::Const(2),
            ),
            2,
        ),
    ]);
    let n = check(&Filter::new(apart, 1), &pkts);
    let s = n.stats();
    assert_eq!((s.coalesced, s.aggregated_indirect), (0, 1), "{s:?}");
    // A constant added to the base is folded into the offset: the same
    // ports spelled `(hl + 14)[0]` and `hl[16]` still meet and merge.
    let hl = sluice_ir::Val::ip_hdr_len(14);
    let spelled = Pred::And(vec![
        ether_type(0x800),
        eq(
            sluice_ir::Val::load(
                sluice_ir::Val::bin(sluice_ir::BinOp::Add, hl.clone(), sluice_ir::Val::Const(14)),
                0,
                Size::Half,
            ),
            1234,
        ),
        eq(sluice_ir::Val::load(hl, 16, Size::Half), 80),
    ]);
    let n = check(&Filter::new(spelled, 1), &pkts);
    assert_eq!(n.run(&tcp_packet(5), 54), 1);
    assert_eq!(n.stats().coalesced, 1, "{:?}", n.stats());
    let flags = Pred::eq(
        sluice_ir::Val::load(
            sluice_ir::Val::bin(
                sluice_ir::BinOp::Add,
                sluice_ir::Val::ip_hdr_len(14),
                sluice_ir::Val::Const(14),
            ),
            13,
            Size::Byte,
        ),
        0,
    );
    let n = check(
        &Filter::new(Pred::And(vec![ether_type(0x800), flags]), 1),
        &pkts,
    );
    assert_eq!(n.stats().folded_offsets, 1, "{:?}", n.stats());
    // Under `not`, a false conjunct accepts: nothing is merged or hoisted.
    let n = check(&Filter::new(Pred::not(session), 1), &pkts);
    let s = n.stats();
    assert_eq!((s.coalesced, s.aggregated_indirect), (0, 0), "{s:?}");
}

#[test]
fn dense_sets_use_a_jump_table() {
    let p = Pred::is_in(ld(23, Size::Byte), vec![0, 1, 2, 3, 5, 6, 7, 8, 17]);
    let n = check(&Filter::new(p, 1), &sample_packets());
    assert_eq!(n.stats().jump_tables, 1);
    let sparse = Pred::is_in(ld(26, Size::Word), (0..100).map(|i| i * 977).collect());
    let n = check(&Filter::new(sparse, 1), &sample_packets());
    assert_eq!(n.stats().jump_tables, 0);
}

#[test]
fn compiles_many_and_frees_them() {
    // Each filter's pages are freed on drop; this would exhaust nothing
    // either way, but runs the drop path many times under the test harness.
    for i in 0..200u32 {
        let n = NativeFilter::compile(&Filter::new(host(i), 1)).unwrap();
        assert_eq!(n.run(&[0; 10], 10), 0);
    }
}

#[test]
fn usable_from_other_threads() {
    let n = std::sync::Arc::new(NativeFilter::compile(&Filter::new(ether_type(0x800), 5)).unwrap());
    let mut pkt = vec![0u8; 20];
    pkt[12] = 8;
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let (n, pkt) = (n.clone(), pkt.clone());
            std::thread::spawn(move || n.run(&pkt, 20))
        })
        .collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), 5);
    }
}

/// The code pages are read+execute and not writable (W^X).
#[cfg(target_os = "linux")]
#[test]
fn code_pages_are_not_writable() {
    let n = NativeFilter::compile(&Filter::new(host(1), 1)).unwrap();
    let perms = perms_at(n.code_ptr() as usize);
    assert!(perms.starts_with("r-x"), "{perms}");
}

/// The permissions of the mapping that holds `addr`, from `/proc/self/maps`.
pub(crate) fn perms_at(addr: usize) -> String {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| {
            let (a, b) = l.split(' ').next().unwrap().split_once('-').unwrap();
            let a = usize::from_str_radix(a, 16).unwrap();
            let b = usize::from_str_radix(b, 16).unwrap();
            (a..b).contains(&addr)
        })
        .expect("code is mapped");
    line.split(' ').nth(1).unwrap().to_string()
}

/// A function placed in the arena runs from its shared, read+execute
/// pages; one placed without (as where memory files are refused) goes
/// into a module of its own, and runs the same.
#[test]
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn placed_code_runs_from_shared_pages_or_a_module() {
    use crate::{arena::Arena, CodePages};
    use cranelift_codegen::ir::{types, AbiParam, InstBuilder};
    use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
    let arena = Arena::new();
    for (into, perms) in [(Some(&arena), "r-xs"), (None, "r-xp")] {
        let mut ctx = CodePages::context().unwrap();
        ctx.func.signature.returns.push(AbiParam::new(types::I32));
        let mut fctx = FunctionBuilderContext::new();
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.switch_to_block(entry);
        b.seal_block(entry);
        let v = b.ins().iconst(types::I32, 42);
        b.ins().return_(&[v]);
        b.finalize();
        let (code, bytes, pages) = CodePages::place_in(&mut ctx, "test", into).unwrap();
        assert!(bytes > 0);
        assert_eq!(perms_at(code as usize), perms);
        // SAFETY: `code` is the function just placed, of type () -> u32 in
        // the host's calling convention; `pages` keeps it mapped.
        let f = unsafe { std::mem::transmute::<*const u8, extern "C" fn() -> u32>(code) };
        assert_eq!(f(), 42);
        drop(pages);
    }
}

// ---------------------------------------------------------------- random

use sluice_ir::arbitrary::{
    eq, ether_type, hand_built_filters as shared_filters, host, ld, packet as arb_packet,
    pred as arb_pred, sample_packets,
};

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(512),
        ..ProptestConfig::default()
    })]

    /// Random filters on random packets cut to every length 0..=80.
    #[test]
    fn random_filters_agree_with_ir(
        pred in arb_pred(),
        accept in prop_oneof![Just(ACCEPT), 1u32..],
        pkts in prop::collection::vec(arb_packet(), 3),
    ) {
        let f = Filter::new(pred, accept);
        check(&f, &pkts);
    }

    /// Long conjunctions and disjunctions (aggregated checks, long chains).
    #[test]
    fn big_random_filters_agree_with_ir(
        ps in prop::collection::vec(arb_pred(), 20..80),
        and in any::<bool>(),
        not in any::<bool>(),
        pkts in prop::collection::vec(arb_packet(), 2),
    ) {
        let pred = if and { Pred::And(ps) } else { Pred::Or(ps) };
        let pred = if not { Pred::Not(Box::new(pred)) } else { pred };
        check(&Filter::new(pred, ACCEPT), &pkts);
    }

    /// Conjunctions of compares of neighbouring fields, at fixed offsets and
    /// behind the IPv4 header length, under `not` and `or` or not: what
    /// atom coalescing and indirect check aggregation rewrite.
    #[test]
    fn coalescing_agrees_with_ir(
        atoms in prop::collection::vec((any::<bool>(), 10u32..30, 0usize..3, any::<u32>(), any::<u32>(), any::<bool>()), 1..10),
        wrap in 0u8..4,
        pkts in prop::collection::vec(arb_packet(), 2),
    ) {
        let mut conj = Vec::new();
        for (indirect, off, size, k, mask, masked) in atoms {
            let size = [Size::Byte, Size::Half, Size::Word][size];
            let v = match (indirect, off % 3) {
                (false, _) => ld(off, size),
                (true, 0) => sluice_ir::Val::load(
                    sluice_ir::Val::bin(sluice_ir::BinOp::Add, sluice_ir::Val::ip_hdr_len(14), sluice_ir::Val::Const(4 + off - 10)),
                    10,
                    size,
                ),
                (true, _) => tcp_field(off - 10, size),
            };
            let width = size.bytes();
            let full = if width == 4 { u32::MAX } else { (1 << (8 * width)) - 1 };
            // Often the value the field has in a TCP packet, so whole
            // conjunctions match; else constants the field can or cannot hold.
            let k = match k % 4 {
                0 => k,
                1 => k & full,
                _ => sluice_ir::eval_val(&v, &tcp_packet(5), 54).unwrap_or(k),
            };
            let p = if masked {
                Pred::eq(sluice_ir::Val::bin(sluice_ir::BinOp::And, v, sluice_ir::Val::Const(mask)), k & mask)
            } else {
                eq(v, k)
            };
            conj.push(p);
        }
        let and = Pred::And(conj);
        let pred = match wrap {
            0 => and,
            1 => Pred::not(and),
            2 => Pred::Or(vec![and, eq(ld(0, Size::Byte), 1)]),
            _ => Pred::And(vec![ether_type(0x800), and]),
        };
        let mut pkts = pkts;
        pkts.extend([tcp_packet(5), tcp_packet(9)]);
        check(&Filter::new(pred, ACCEPT), &pkts);
    }

    /// `run_batch` equals `run` packet by packet: random filters, random
    /// batches (empty, one packet, across the 64-packet chunks) of random
    /// packets cut to random lengths with random wire lengths.
    #[test]
    fn run_batch_equals_run(
        pred in arb_pred(),
        accept in prop_oneof![Just(ACCEPT), 1u32..],
        batch in prop_oneof![
            1 => Just(0usize),
            1 => Just(1usize),
            4 => 0usize..140,
        ].prop_flat_map(|n| prop::collection::vec((arb_packet(), 0usize..=80, any::<u32>()), n)),
    ) {
        let n = NativeFilter::compile(&Filter::new(pred, accept)).unwrap();
        let pkts: Vec<(&[u8], u32)> = batch.iter().map(|(p, cut, w)| (&p[..*cut], *w)).collect();
        let mut out = vec![0xdead_beef; pkts.len()];
        n.run_batch(&pkts, &mut out);
        let want: Vec<u32> = pkts.iter().map(|(p, w)| n.run(p, *w)).collect();
        prop_assert_eq!(&out, &want);
        // Again on the same code, and on a batch of the first packet alone.
        n.run_batch(&pkts, &mut out);
        prop_assert_eq!(&out, &want);
        if let Some(first) = pkts.first() {
            let mut one = [0xdead_beef];
            n.run_batch(std::slice::from_ref(first), &mut one);
            prop_assert_eq!(one[0], want[0]);
        }
        n.run_batch(&[], &mut []);
    }
}

/// The pcap compiler's `ip6 and udp port 53` tests the IPv6 ethertype again
/// inside its `and` and the IPv4 one inside the IPv6 branch: those tests
/// are settled (compiled as jumps), the 16-bit tests compare the loaded
/// bytes with the constant in packet byte order, and the code still equals
/// the reference on IPv6, IPv4 and ARP packets cut to every length.
#[test]
fn settled_tests_and_byte_order_compares() {
    use sluice_pcap::link::LinkType;
    let f = sluice_pcap::compile("ip6 and udp port 53", LinkType::EN10MB, ACCEPT).unwrap();
    let mut v6 = vec![0u8; 62];
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    v6[20] = 17;
    v6[56..58].copy_from_slice(&53u16.to_be_bytes());
    let mut v4 = vec![0u8; 42];
    v4[12] = 8;
    v4[14] = 0x45;
    v4[23] = 17;
    v4[36..38].copy_from_slice(&53u16.to_be_bytes());
    let mut arp = vec![0u8; 42];
    arp[12..14].copy_from_slice(&[8, 6]);
    let n = check(&f, &[v6.clone(), v4, arp]);
    assert_eq!(n.run(&v6, 62), ACCEPT);
    let s = n.stats();
    assert!(s.settled >= 2, "{s:?}");
    assert!(s.raw_compares >= 2, "{s:?}");
}

/// libpcap's "not a fragment" test is a `jset` (`not (ip[6:2] & 0x1fff !=
/// 0)`, as the pcap front end writes it): an atom like `& 0x1fff == 0`.
#[test]
fn unset_bits_are_atoms_too() {
    use sluice_ir::{CmpOp, Val};
    let session = Pred::And(vec![
        ether_type(0x800),
        Pred::not(Pred::cmp(
            CmpOp::Set,
            ld(20, Size::Half),
            Val::Const(0x1fff),
        )),
        // TTL and protocol, right after the fragment field.
        eq(ld(22, Size::Half), 0x4006),
    ]);
    let mut pkts = sample_packets();
    pkts.extend([tcp_packet(5), tcp_packet(6)]);
    let n = check(&Filter::new(session, 1), &pkts);
    assert_eq!(n.stats().coalesced, 1, "{:?}", n.stats());
}

/// Values held once (`Val::Shared`, nested tunnels' offsets) are copied
/// into their uses while the copies stay small, and left to classic BPF
/// beyond that.
#[test]
fn shared_values_are_copied_while_small() {
    use sluice_ir::{BinOp, Val};
    let chain = |levels: usize| {
        let mut v = ld(0, Size::Byte);
        for _ in 0..levels {
            let s = Val::shared(v);
            v = Val::bin(
                BinOp::Add,
                Val::load(s.clone(), 1, Size::Byte),
                Val::bin(BinOp::And, s, Val::Const(3)),
            );
        }
        Filter::new(Pred::cmp(sluice_ir::CmpOp::Gt, Val::Len, v), 1)
    };
    let pkts: Vec<Vec<u8>> = vec![(0..40u32).map(|i| (i % 3) as u8).collect()];
    check(&chain(4), &pkts);
    assert!(NativeFilter::compile(&chain(40)).is_err());
}
