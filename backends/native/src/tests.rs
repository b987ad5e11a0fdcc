//! Native code must agree with the IR's reference interpreter on every packet.

use proptest::prelude::*;
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Size, Val};

use crate::NativeFilter;

const ACCEPT: u32 = 262144;

fn ld(off: u32, size: Size) -> Val {
    Val::load_abs(off, size)
}
fn eq(v: Val, k: u32) -> Pred {
    Pred::eq(v, k)
}
fn bin(op: BinOp, a: Val, b: Val) -> Val {
    Val::Bin(op, Box::new(a), Box::new(b))
}
fn ether_type(k: u32) -> Pred {
    eq(ld(12, Size::Half), k)
}
fn host(a: u32) -> Pred {
    Pred::And(vec![
        ether_type(0x800),
        Pred::Or(vec![eq(ld(26, Size::Word), a), eq(ld(30, Size::Word), a)]),
    ])
}

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

/// A deterministic pseudo-random generator for packet bytes.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn sample_packets() -> Vec<Vec<u8>> {
    let mut pkts = Vec::new();
    let mut rng = Rng(0x9e3779b97f4a7c15);
    let mut ip4 = vec![0u8; 80];
    ip4[12] = 0x08;
    ip4[14] = 0x45;
    ip4[23] = 6;
    ip4[26..30].copy_from_slice(&[10, 0, 0, 1]);
    ip4[30..34].copy_from_slice(&[10, 0, 0, 2]);
    pkts.push(ip4.clone());
    ip4[14] = 0x46;
    ip4[23] = 17;
    pkts.push(ip4);
    let mut ip6 = vec![0u8; 80];
    ip6[12] = 0x86;
    ip6[13] = 0xdd;
    ip6[20] = 6;
    pkts.push(ip6);
    // IPv6 + hop-by-hop + routing + AH + TCP.
    let mut p = vec![0u8; 120];
    p[12] = 0x86;
    p[13] = 0xdd;
    p[54] = 43;
    p[62] = 51;
    p[70] = 6;
    p[71] = 4;
    pkts.push(p);
    // AH pointing at itself: the walk gives up (abort).
    let mut q = vec![0u8; 40];
    q[14] = 0x45;
    q[23] = 51;
    q[22] = 51;
    pkts.push(q);
    for _ in 0..12 {
        let mut p = vec![0u8; 80];
        for b in p.iter_mut() {
            let r = rng.next();
            *b = if r % 3 == 0 {
                (r >> 8) as u8
            } else {
                (r >> 8) as u8 % 4
            };
        }
        pkts.push(p);
    }
    pkts
}

#[test]
fn hand_built_filters() {
    let pkts = sample_packets();
    let oob = eq(ld(100, Size::Byte), 0);
    let div0 = Pred::cmp(
        CmpOp::Eq,
        bin(BinOp::Div, Val::Len, ld(0, Size::Byte)),
        Val::Const(0),
    );
    let filters = vec![
        Pred::True,
        Pred::False,
        ether_type(0x800),
        Pred::not(ether_type(0x800)),
        host(0x0a000001),
        Pred::Or(vec![host(0x0a000001), host(0x0a000002), host(0x0a000003)]),
        Pred::And(vec![ether_type(0x800), ether_type(0x86dd)]),
        Pred::Or(vec![ether_type(0x86dd), ether_type(0x800)]),
        Pred::not(oob.clone()),
        Pred::Or(vec![oob.clone(), Pred::True]),
        Pred::Or(vec![Pred::True, oob.clone()]),
        Pred::And(vec![Pred::False, oob.clone()]),
        Pred::And(vec![ether_type(0x800), oob.clone()]),
        Pred::not(Pred::And(vec![ether_type(0x800), oob])),
        div0.clone(),
        Pred::not(div0),
        Pred::cmp(
            CmpOp::Eq,
            bin(BinOp::Mod, ld(14, Size::Byte), Val::Const(0)),
            Val::Const(0),
        ),
        Pred::not(Pred::cmp(
            CmpOp::Eq,
            bin(BinOp::Div, Val::Len, Val::Const(0)),
            Val::Const(0),
        )),
        Pred::cmp(
            CmpOp::Eq,
            bin(BinOp::Div, ld(14, Size::Word), Val::Const(7)),
            Val::Const(0),
        ),
        Pred::cmp(CmpOp::Gt, Val::ip_hdr_len(14), Val::Const(20)),
        eq(Val::load(Val::ip_hdr_len(14), 16, Size::Half), 0),
        eq(Val::load(Val::ip_hdr_len(14), 14, Size::Word), 0),
        eq(ld(0xffff_ffff, Size::Byte), 0),
        Pred::not(eq(
            Val::Load {
                base: Box::new(Val::Const(5)),
                offset: 0xffff_fffe,
                size: Size::Word,
            },
            0,
        )),
        Pred::not(eq(
            Val::Load {
                base: Box::new(Val::Len),
                offset: 0xffff_fff0,
                size: Size::Half,
            },
            0,
        )),
        Pred::cmp(CmpOp::Set, ld(0, Size::Byte), ld(1, Size::Byte)),
        Pred::cmp(CmpOp::Set, ld(12, Size::Half), Val::Const(0x0800)),
        Pred::cmp(CmpOp::Ge, Val::Len, ld(1, Size::Half)),
        Pred::cmp(
            CmpOp::Gt,
            bin(BinOp::Shl, ld(0, Size::Word), ld(1, Size::Byte)),
            bin(BinOp::Shr, ld(2, Size::Word), ld(3, Size::Byte)),
        ),
        Pred::cmp(
            CmpOp::Eq,
            bin(BinOp::Shl, Val::Const(1), Val::Len),
            Val::Const(0),
        ),
        Pred::cmp(
            CmpOp::Eq,
            bin(BinOp::Shr, ld(0, Size::Word), Val::Const(40)),
            Val::Const(0),
        ),
        Pred::cmp(
            CmpOp::Gt,
            Val::Neg(Box::new(ld(2, Size::Half))),
            bin(BinOp::Sub, Val::Len, Val::Const(3)),
        ),
        Pred::is_in(
            ld(12, Size::Half),
            vec![0x800, 0x86dd, 0x806, 0x8100, 0x88a8],
        ),
        Pred::is_in(ld(14, Size::Byte), (0..40).step_by(3).collect()),
        Pred::is_in(ld(23, Size::Byte), vec![0, 1, 2, 3, 5, 6, 7, 8, 17]),
        Pred::is_in(
            ld(26, Size::Word),
            (0..100).map(|i| 0x0a000000 + i * 977).collect(),
        ),
        Pred::In {
            val: ld(14, Size::Byte),
            keys: Vec::new().into(),
        },
        Pred::not(Pred::In {
            val: ld(100, Size::Byte),
            keys: vec![1, 2].into(),
        }),
        Pred::ProtoChain {
            v6: true,
            start: Val::Const(14),
            proto: 6,
        },
        Pred::ProtoChain {
            v6: false,
            start: Val::Const(14),
            proto: 6,
        },
        Pred::not(Pred::ProtoChain {
            v6: false,
            start: Val::Const(14),
            proto: 17,
        }),
    ];
    for (i, pred) in filters.into_iter().enumerate() {
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
    let addr = n.code_ptr() as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| {
            let range = l.split(' ').next().unwrap();
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                usize::from_str_radix(a, 16).unwrap(),
                usize::from_str_radix(b, 16).unwrap(),
            );
            (a..b).contains(&addr)
        })
        .expect("code is mapped");
    let perms = line.split(' ').nth(1).unwrap();
    assert!(perms.starts_with("r-x"), "{line}");
}

// ---------------------------------------------------------------- random

use sluice_ir::arbitrary::{packet as arb_packet, pred as arb_pred};

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
