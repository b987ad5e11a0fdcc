//! proptest strategies for random IR: values, predicates and packets that
//! exercise every construct (aborting loads, division by zero, large shifts,
//! sets, protochain), shared by the back ends' differential tests.
//! Enabled by the `arbitrary` feature.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! let mut runner = proptest::test_runner::TestRunner::default();
//! let p = sluice_ir::arbitrary::pred().new_tree(&mut runner).unwrap().current();
//! let pkt = [0u8; 80];
//! // Whatever it is, its negation answers the opposite (or aborts alike).
//! let not = sluice_ir::Pred::not(p.clone());
//! match sluice_ir::eval_pred(&p, &pkt, 80) {
//!     Ok(v) => assert_eq!(sluice_ir::eval_pred(&not, &pkt, 80), Ok(!v)),
//!     Err(_) => assert!(sluice_ir::eval_pred(&not, &pkt, 80).is_err()),
//! }
//! ```

use crate::{BinOp, CmpOp, Pred, Size, Val};
use proptest::prelude::*;

/// `size` bytes at a fixed offset.
pub fn ld(off: u32, size: Size) -> Val {
    Val::load_abs(off, size)
}

fn arb_const() -> impl Strategy<Value = u32> {
    prop_oneof![
        4 => 0u32..4,
        1 => Just(0xf),
        1 => Just(31),
        1 => Just(32),
        1 => Just(33),
        1 => Just(0x800),
        1 => Just(u32::MAX),
        1 => Just(u32::MAX - 1),
        2 => any::<u32>(),
    ]
}

fn arb_size() -> impl Strategy<Value = Size> {
    prop_oneof![Just(Size::Byte), Just(Size::Half), Just(Size::Word)]
}

fn arb_offset() -> impl Strategy<Value = u32> {
    prop_oneof![
        10 => 0u32..84,
        1 => Just(u32::MAX),
        1 => Just(u32::MAX - 3),
    ]
}

fn arb_binop() -> impl Strategy<Value = BinOp> {
    prop_oneof![
        Just(BinOp::Add),
        Just(BinOp::Sub),
        Just(BinOp::Mul),
        Just(BinOp::Div),
        Just(BinOp::Mod),
        Just(BinOp::And),
        Just(BinOp::Or),
        Just(BinOp::Xor),
        Just(BinOp::Shl),
        Just(BinOp::Shr),
    ]
}

/// Random values: constants, loads at fixed and computed addresses, arithmetic.
pub fn val() -> impl Strategy<Value = Val> {
    let leaf = prop_oneof![
        3 => arb_const().prop_map(Val::Const),
        1 => Just(Val::Len),
        6 => (arb_offset(), arb_size()).prop_map(|(o, s)| Val::load_abs(o, s)),
        1 => (0u32..80).prop_map(Val::ip_hdr_len),
    ];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            3 => (inner.clone(), 0u32..40, arb_size()).prop_map(|(b, o, s)| Val::Load {
                base: Box::new(b),
                offset: o,
                size: s,
            }),
            4 => (arb_binop(), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Val::Bin(op, Box::new(a), Box::new(b))),
            3 => (arb_binop(), inner.clone(), arb_const())
                .prop_map(|(op, a, k)| Val::Bin(op, Box::new(a), Box::new(Val::Const(k)))),
            1 => inner.prop_map(|a| Val::Neg(Box::new(a))),
        ]
    })
}

fn arb_cmpop() -> impl Strategy<Value = CmpOp> {
    prop_oneof![
        Just(CmpOp::Eq),
        Just(CmpOp::Gt),
        Just(CmpOp::Ge),
        Just(CmpOp::Set)
    ]
}

/// Sets of keys: small, dense (jump tables) and sparse (search trees).
fn arb_keys() -> impl Strategy<Value = Vec<u32>> {
    prop_oneof![
        prop::collection::vec(0u32..8, 0..6),
        prop::collection::vec(0u32..24, 8..20),
        prop::collection::vec(arb_const(), 0..30),
        (any::<u32>(), prop::collection::vec(0u32..16, 8..16))
            .prop_map(|(base, ks)| ks.into_iter().map(|k| base.wrapping_add(k)).collect()),
    ]
}

/// Random predicates over a small pool of shared values and random ones.
pub fn pred() -> impl Strategy<Value = Pred> {
    let pooled = prop_oneof![
        Just(ld(12, Size::Half)),
        Just(ld(14, Size::Byte)),
        Just(ld(20, Size::Word)),
        Just(Val::Len),
    ];
    let leaf = prop_oneof![
        1 => Just(Pred::True),
        1 => Just(Pred::False),
        6 => (arb_cmpop(), pooled.clone(), arb_const())
            .prop_map(|(op, v, k)| Pred::Cmp { op, lhs: v, rhs: Val::Const(k) }),
        4 => (arb_cmpop(), val(), arb_const())
            .prop_map(|(op, v, k)| Pred::Cmp { op, lhs: v, rhs: Val::Const(k) }),
        2 => (arb_cmpop(), val(), val())
            .prop_map(|(op, lhs, rhs)| Pred::Cmp { op, lhs, rhs }),
        2 => (prop_oneof![pooled, val()], arb_keys()).prop_map(|(val, mut keys)| {
            keys.sort_unstable();
            keys.dedup();
            Pred::In { val, keys: keys.into() }
        }),
        1 => (any::<bool>(), prop_oneof![
                (0u32..20).prop_map(Val::Const),
                val(),
            ], prop_oneof![Just(6u8), Just(51), Just(59), Just(0), any::<u8>()])
            .prop_map(|(v6, start, proto)| Pred::ProtoChain { v6, start, proto }),
    ];
    leaf.prop_recursive(5, 40, 5, |inner| {
        prop_oneof![
            1 => inner.clone().prop_map(|p| Pred::Not(Box::new(p))),
            2 => prop::collection::vec(inner.clone(), 0..5).prop_map(Pred::And),
            2 => prop::collection::vec(inner, 0..5).prop_map(Pred::Or),
        ]
    })
}

/// Random 80-byte packets biased towards header-like bytes (cut them to
/// every length to test bounds).
pub fn packet() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        6 => 0u8..4,
        1 => Just(0x08),
        1 => Just(0x45),
        1 => Just(51),
        1 => Just(59),
        1 => Just(6),
        1 => Just(43),
        4 => any::<u8>(),
    ];
    prop::collection::vec(byte, 80)
}

/// `v == k`.
pub fn eq(v: Val, k: u32) -> Pred {
    Pred::eq(v, k)
}

/// `a op b`, not folded.
pub fn bin(op: BinOp, a: Val, b: Val) -> Val {
    Val::Bin(op, Box::new(a), Box::new(b))
}

/// The Ethernet type field equals `k`.
pub fn ether_type(k: u32) -> Pred {
    eq(ld(12, Size::Half), k)
}

/// IPv4 source or destination `a` on Ethernet.
pub fn host(a: u32) -> Pred {
    Pred::And(vec![
        ether_type(0x800),
        Pred::Or(vec![eq(ld(26, Size::Word), a), eq(ld(30, Size::Word), a)]),
    ])
}

/// A small xorshift generator, for reproducible sample packets.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Packets for hand-built filters: Ethernet/IPv4/TCP and UDP, IPv6 with
/// extension headers and AH, an AH header pointing at itself, and random
/// bytes (cut them to every length to test bounds).
pub fn sample_packets() -> Vec<Vec<u8>> {
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

/// Hand-built filters covering what a back end must get right: aborts under
/// `not` and `or`, division by zero, overflowing addresses, large shifts,
/// variable offsets, sets and protochain. Run them on [`sample_packets`].
pub fn hand_built_filters() -> Vec<Pred> {
    let oob = eq(ld(100, Size::Byte), 0);
    let div0 = Pred::cmp(
        CmpOp::Eq,
        bin(BinOp::Div, Val::Len, ld(0, Size::Byte)),
        Val::Const(0),
    );
    let mut filters = vec![
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
    filters.extend(vec![
        eq(Val::load(Val::ip_hdr_len(14), 14, Size::Half), 0),
        eq(bin(BinOp::Shl, ld(0, Size::Byte), Val::Const(40)), 0),
        eq(Val::Neg(Box::new(ld(0, Size::Byte))), 0xffff_ffff),
        Pred::cmp(CmpOp::Gt, Val::Len, Val::Const(60)),
        Pred::Or(vec![
            Pred::cmp(CmpOp::Gt, ld(0, Size::Byte), Val::Const(2)),
            Pred::cmp(CmpOp::Gt, ld(0, Size::Byte), Val::Const(1)),
            Pred::cmp(CmpOp::Ge, ld(0, Size::Byte), Val::Const(1)),
            Pred::cmp(CmpOp::Set, ld(0, Size::Byte), Val::Const(3)),
            eq(ld(0, Size::Byte), 0),
        ]),
        Pred::Cmp {
            op: CmpOp::Eq,
            lhs: Val::Const(3),
            rhs: Val::Const(3),
        },
    ]);
    filters
}
