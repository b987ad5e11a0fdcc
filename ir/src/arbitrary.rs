//! proptest strategies for random IR: values, predicates and packets that
//! exercise every construct (aborting loads, division by zero, large shifts,
//! sets, protochain), shared by the back ends' differential tests.
//! Enabled by the `arbitrary` feature.
//!
//! ```
//! use proptest::strategy::{Strategy, ValueTree};
//! let mut runner = proptest::test_runner::TestRunner::default();
//! let p = sluice_ir::arbitrary::pred().new_tree(&mut runner).unwrap().current();
//! let _ = sluice_ir::eval_pred(&p, &[0u8; 80], 80);
//! ```

use crate::{BinOp, CmpOp, Pred, Size, Val};
use proptest::prelude::*;

fn ld(off: u32, size: Size) -> Val {
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
