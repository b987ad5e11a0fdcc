use crate::*;
use proptest::prelude::*;
use sluice_ir::eval_pred;

/// Ethernet, IPv4 with `ihl` words of header, TCP `sport -> dport`, from
/// 192.12.69.1.
fn tcp_packet(ihl: u8, sport: u16, dport: u16) -> Vec<u8> {
    let ip = 14;
    let tcp = ip + 4 * ihl as usize;
    let mut p = vec![0u8; tcp + 20];
    p[12] = 0x08;
    p[ip] = 0x40 | ihl;
    p[ip + 9] = 6;
    p[ip + 12..ip + 16].copy_from_slice(&[192, 12, 69, 1]);
    p[ip + 16..ip + 20].copy_from_slice(&[10, 0, 0, 2]);
    p[tcp..tcp + 2].copy_from_slice(&sport.to_be_bytes());
    p[tcp + 2..tcp + 4].copy_from_slice(&dport.to_be_bytes());
    p
}

const FIGURE_1: &str = "
# Check Ethernet header
(12:16 == 0x800) & # IP datagram?
# Skip over ether header (14 bytes)
(SHIFT(6 + 6 + 2)) & # Check IP header
(9:8 == 6) & # Check protocol: TCP is 6
(12:32 == 0xc00c4501) & # Check IP src addr (192.12.69.1)
# Skip past IP header (assume fixed sized; 20 bytes)
(SHIFT(20)) & # TCP header
(0:16 == 1234) & # Check source port (2 bytes)
(2:16 == 4321) # Check destination port (2 bytes)
";

/// The interpreter and the canonical IR agree on every prefix.
fn agree(f: &Filter, pkt: &[u8]) {
    let ir = canonical(f);
    for n in 0..=pkt.len() {
        let want = f.run(&pkt[..n]);
        let got = eval_pred(&ir, &pkt[..n], n as u32) == Ok(true);
        assert_eq!(got, want, "length {n}: {f}\nIR {ir:?}");
    }
}

#[test]
fn figure_1_accepts_its_session_only() {
    let f = parse(FIGURE_1).unwrap();
    assert_eq!(f.atoms.len(), 7);
    let pkt = tcp_packet(5, 1234, 4321);
    assert!(f.run(&pkt));
    assert!(!f.run(&tcp_packet(5, 1234, 4322)));
    assert!(!f.run(&tcp_packet(5, 1235, 4321)));
    // A fixed 20-byte header is assumed, as the figure says.
    assert!(!f.run(&tcp_packet(6, 1234, 4321)));
    for p in [pkt, tcp_packet(5, 1, 4321), tcp_packet(6, 1234, 4321)] {
        agree(&f, &p);
    }
    // Coalesced into five atoms: ethertype, protocol, source address, ports.
    let ir = canonical(&f);
    assert!(
        matches!(&ir, sluice_ir::Pred::And(v) if v.len() == 4),
        "{ir:?}"
    );
}

#[test]
fn equal_filters_written_differently_are_one_ir() {
    let spellings = [
        FIGURE_1.to_string(),
        // Absolute offsets, other order, && and constants on the left.
        "(1234 == 34:16) && (36:16 == 4321) && (6 == 23:8) && (26:32 == 0xc00c4501) && (12:16 == 2048)".into(),
        // Coalesced ports, the address in halves, masks that keep every bit.
        "(12:16 & 0xffff == 0x800) && SHIFT(7) && SHIFT(7) && (9:8 & 0xff == 6) && (12:16 == 0xc00c) \
         && (14:16 == 0x4501) && SHIFT(10 + 10) && (0:32 == 1234 << 16 | 4321)".into(),
        // Arithmetic that solves to the same constants, bytes one by one.
        "(12:8 == 8) && (13:8 == 0) && (23:8 + 1 == 7) && (26:32 ^ 0xffffffff == ~0xc00c4501) \
         && (34:16 - 1000 == 234) && ((36:16 << 4) == 4321 << 4)".into(),
        // Shifts back and forth, reads at offsets that wrap around to the same bytes.
        "SHIFT(14) && SHIFT(0 - 14) && (12:16 == 0x800) && SHIFT(34) && ((0 - 11):8 == 6) \
         && ((0 - 8):32 == 3222029569) && (0:16 == 1234) && (2:16 == 4321)".into(),
    ];
    let irs: Vec<_> = spellings
        .iter()
        .map(|s| canonical(&parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))))
        .collect();
    for (s, ir) in spellings.iter().zip(&irs) {
        assert_eq!(ir, &irs[0], "{s}");
    }
    for s in &spellings {
        let f = parse(s).unwrap();
        agree(&f, &tcp_packet(5, 1234, 4321));
        agree(&f, &tcp_packet(5, 1234, 4320));
    }
}

#[test]
fn the_classifier_merges_spellings_into_one_group() {
    use sluice_classifier::merged::{Compiled, Merged};
    let mut m = Merged::default();
    let mut id = 0;
    for sport in 1000..1010u16 {
        for (k, text) in [
            format!("(12:16 == 0x800) && SHIFT(14) && (9:8 == 6) && SHIFT(20) && (0:16 == {sport}) && (2:16 == 80)"),
            format!("(34:32 == {sport} << 16 | 80) && (23:8 == 6) && (12:16 == 0x800)"),
            format!("(6 == 23:8) && (35:8 == {}) && (34:8 == {}) && (36:16 == 80) && (12:8 == 8) && (13:8 == 0)", sport & 0xff, sport >> 8),
        ]
        .iter()
        .enumerate()
        {
            let f = parse(text).unwrap().to_ir(1);
            m.insert(id, &Compiled::new(f), k as i32);
            id += 1;
        }
    }
    assert_eq!(m.groups(), 1);
    let mut out = Vec::new();
    m.classify(
        &tcp_packet(5, 1003, 80),
        54,
        &mut Default::default(),
        &mut out,
    );
    assert_eq!(out, vec![9, 10, 11]);
}

#[test]
fn indirect_shift_skips_a_variable_header() {
    let f = parse(
        "(12:16 == 0x800) && SHIFT(14) && (9:8 == 6) && SHIFT((0:8 & 0xf) << 2) && (2:16 == 4321)",
    )
    .unwrap();
    for ihl in [5u8, 6, 15] {
        let p = tcp_packet(ihl, 1, 4321);
        assert!(f.run(&p));
        agree(&f, &p);
    }
    assert!(!f.run(&tcp_packet(6, 1, 4320)));
    // The read after the shift has the pcap compiler's shape: base 4 * IHL, offset 14 + 2.
    let ir = format!("{:?}", canonical(&f));
    assert!(ir.contains("offset: 16"), "{ir}");
}

#[test]
fn impossible_atoms_reject_everything() {
    for text in [
        "(12:8 == 256)",
        "(12:16 & 0xff == 0x100)",
        "(12:8 == 1) && (12:16 == 0x0200)",
        "(12:8 > 255)",
        "((12:8 << 4) == 0x101)",
        "(1 == 2)",
        "(12:8 / 0 == 0)",
    ] {
        assert_eq!(
            canonical(&parse(text).unwrap()),
            sluice_ir::Pred::False,
            "{text}"
        );
    }
}

#[test]
fn atoms_that_always_hold_still_bound_the_packet() {
    let f = parse("(30:8 >= 0) && (12:8 & 0 == 0)").unwrap();
    let ir = canonical(&f);
    assert_eq!(eval_pred(&ir, &[0; 31], 31), Ok(true));
    assert!(eval_pred(&ir, &[0; 30], 30).is_err());
    agree(&f, &[0; 40]);
}

#[test]
fn parse_errors_are_positioned() {
    let e = |t: &str| parse(t).unwrap_err();
    let p = e("(12:16 == 0x800) &&\n (9:7 == 6)");
    assert_eq!((p.line, p.column), (2, 5));
    assert!(e("(12:16 == 1 == 2)").message.contains("do not chain"));
    assert!(e("12:16").message.contains("not a value"));
    assert!(e("(1:8 == 1) && 5").message.contains("joins atoms"));
    assert!(e("(1:8 == 1) + (2:8 == 2)")
        .message
        .contains("needs two values"));
    assert!(e("(1:8 == 1").message.contains("expected ')'"));
    assert!(e("(1:8 == 0x1ffffffff)").message.contains("bad number"));
    assert!(e("(foo == 1)").message.contains("unknown word 'foo'"));
    assert!(e("").message.contains("empty"));
    assert!(e("SHIFT((1:8 == 2))")
        .message
        .contains("SHIFT takes a value"));
    assert!(e("(1:8 == $)").message.contains("unexpected character"));
    assert_eq!(e("(1:8 == 1) &&").column, 14);
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert!(e(&deep).message.contains("nested too deeply"));
    assert!(e(&"~".repeat(1000)).message.contains("nested too deeply"));
}

fn arb_expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        3 => prop_oneof![Just(0u32), Just(1), Just(2), Just(4), Just(6), Just(0xf), Just(0x800), Just(u32::MAX), any::<u32>()]
            .prop_map(Expr::Num),
        4 => (0u32..44, prop_oneof![Just(8u8), Just(16), Just(32)])
            .prop_map(|(a, bits)| Expr::Load { addr: Box::new(Expr::Num(a)), bits }),
    ];
    leaf.prop_recursive(3, 12, 2, |inner| {
        prop_oneof![
            4 => (
                prop_oneof![
                    Just(BinOp::Add), Just(BinOp::Sub), Just(BinOp::Mul), Just(BinOp::Div),
                    Just(BinOp::Mod), Just(BinOp::And), Just(BinOp::Or), Just(BinOp::Xor),
                    Just(BinOp::Shl), Just(BinOp::Shr)
                ],
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Expr::Bin(op, Box::new(a), Box::new(b))),
            1 => inner.clone().prop_map(|a| Expr::Not(Box::new(a))),
            1 => inner.clone().prop_map(|a| Expr::Neg(Box::new(a))),
            1 => (inner, prop_oneof![Just(8u8), Just(16)])
                .prop_map(|(a, bits)| Expr::Load { addr: Box::new(a), bits }),
        ]
    })
}

fn arb_rel() -> impl Strategy<Value = Rel> {
    prop_oneof![
        4 => Just(Rel::Eq),
        1 => Just(Rel::Ne),
        1 => Just(Rel::Lt),
        1 => Just(Rel::Le),
        1 => Just(Rel::Gt),
        1 => Just(Rel::Ge)
    ]
}

fn arb_filter() -> impl Strategy<Value = Filter> {
    let atom = prop_oneof![
        5 => (arb_rel(), arb_expr(), arb_expr()).prop_map(|(r, a, b)| Atom::Cmp(r, a, b)),
        // The value side is often a constant, as in real filters.
        4 => (arb_rel(), arb_expr(), 0u32..300).prop_map(|(r, a, b)| Atom::Cmp(r, a, Expr::Num(b))),
        2 => (0u32..20).prop_map(|k| Atom::Shift(Expr::Num(k))),
        1 => arb_expr().prop_map(Atom::Shift),
    ];
    prop::collection::vec(atom, 1..6).prop_map(|atoms| Filter { atoms })
}

fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![3 => 0u8..8, 1 => any::<u8>()], 0..70),
        (0usize..80, 5u8..8).prop_map(|(n, ihl)| {
            let p = tcp_packet(ihl, 1234, 4321);
            p[..n.min(p.len())].to_vec()
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn canonical_ir_equals_the_interpreter(f in arb_filter(), pkt in arb_packet()) {
        let ir = canonical(&f);
        for n in [pkt.len(), pkt.len().saturating_sub(1), pkt.len() / 2] {
            let want = f.run(&pkt[..n]);
            let got = eval_pred(&ir, &pkt[..n], n as u32) == Ok(true);
            prop_assert_eq!(got, want, "length {}: {}\nIR {:?}", n, f, ir);
        }
    }

    #[test]
    fn printing_parses_back(f in arb_filter()) {
        let text = f.to_string();
        prop_assert_eq!(parse(&text).unwrap(), f);
    }

    #[test]
    fn reordering_atoms_without_shifts_keeps_the_ir(f in arb_filter(), seed in any::<u64>()) {
        let mut atoms: Vec<Atom> = f.atoms.into_iter().filter(|a| matches!(a, Atom::Cmp(..))).collect();
        prop_assume!(!atoms.is_empty());
        let a = canonical(&Filter { atoms: atoms.clone() });
        let k = (seed as usize) % atoms.len();
        atoms.rotate_left(k);
        atoms.reverse();
        prop_assert_eq!(canonical(&Filter { atoms }), a);
    }

    #[test]
    fn random_text_never_panics(text in "[ -~\n]{0,80}") {
        let _ = parse(&text).map(|f| canonical(&f));
    }

    #[test]
    fn token_soup_never_panics(toks in prop::collection::vec(prop_oneof![
        Just("("), Just(")"), Just(":"), Just("8"), Just("16"), Just("32"), Just("=="), Just("&&"), Just("&"),
        Just("SHIFT"), Just("0x800"), Just("<<"), Just("~"), Just("-"), Just("!="), Just("#"), Just("\n"),
        Just("4294967295"), Just("/"), Just("0")
    ], 0..30)) {
        let text = toks.join(" ");
        if let Ok(f) = parse(&text) {
            let _ = f.run(&[0u8; 40]);
            let _ = canonical(&f);
        }
    }
}
