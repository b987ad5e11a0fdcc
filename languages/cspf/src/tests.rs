use crate::*;
use proptest::prelude::*;
use sluice_ir::eval_pred;

fn tcp_packet() -> Vec<u8> {
    // Ethernet, IPv4 (IHL 5), TCP 1234 -> 80.
    let mut p = vec![0u8; 54];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[30..34].copy_from_slice(&[10, 0, 0, 2]);
    p[34..36].copy_from_slice(&1234u16.to_be_bytes());
    p[36..38].copy_from_slice(&80u16.to_be_bytes());
    p
}

/// The interpreter and the IR agree on every prefix of the packet.
fn agree(p: &Program, pkt: &[u8]) {
    let ir = lower(p.insns());
    for n in 0..=pkt.len() {
        let want = p.run(&pkt[..n]);
        let got = eval_pred(&ir, &pkt[..n], n as u32) == Ok(true);
        assert_eq!(got, want, "length {n}\n{}\nIR {ir:?}", disassemble(p));
    }
}

#[test]
fn encoding_matches_the_enet_and_mach_numbering() {
    let i = Insn::new(Action::PushWord(6), Op::Nop);
    assert_eq!(i.words(), vec![16 + 6]);
    assert_eq!(Insn::new(Action::NoPush, Op::Eq).words(), vec![1 << 10]);
    assert_eq!(
        Insn::new(Action::Push00ff, Op::And).words(),
        vec![(6 << 10) | 6]
    );
    assert_eq!(Insn::new(Action::PushStk(0), Op::Nop).words(), vec![992]);
    assert_eq!(Insn::new(Action::PushInd, Op::Nop).words(), vec![14]);
    assert_eq!(
        Insn::new(Action::PushZero, Op::Sub).words(),
        vec![(17 << 10) | 2]
    );
    for code in 0..18 {
        assert_eq!(Op::from_code(code).map(Op::code), Some(code));
    }
    for code in 0..1024u16 {
        if let Some(a) = Action::from_code(code) {
            assert_eq!(a.code(), code);
        }
    }
}

#[test]
fn decode_errors_name_the_word() {
    assert_eq!(
        decode(&[22, 7]),
        Err(DecodeError::Action { word: 1, code: 7 })
    );
    assert_eq!(decode(&[960]), Err(DecodeError::Header { word: 0 }));
    assert_eq!(decode(&[15]), Err(DecodeError::Header { word: 0 }));
    assert_eq!(
        decode(&[18 << 10]),
        Err(DecodeError::Op { word: 0, code: 18 })
    );
    assert_eq!(
        decode(&[22, 1]),
        Err(DecodeError::MissingLiteral { word: 1 })
    );
}

#[test]
fn verifier_finds_underflow_overflow_and_length() {
    let v = |t: &str| verify(&crate::asm::parse(t, false).unwrap().0, Limits::default());
    assert_eq!(v("pushone | cand"), Err(VerifyError::EmptyAtEnd));
    assert_eq!(v("pushone | cand pushone"), Ok(1));
    // The initial word is there to be used once.
    assert_eq!(
        v("pushone | cand pushone | cand"),
        Err(VerifyError::Underflow { insn: 1 })
    );
    assert_eq!(v("nopush | cand"), Err(VerifyError::Underflow { insn: 0 }));
    assert_eq!(v("pushzero | cor"), Err(VerifyError::EmptyAtEnd));
    assert_eq!(v("pushstk + 1"), Err(VerifyError::Underflow { insn: 0 }));
    assert_eq!(v("pushone pushstk + 1 | and"), Ok(2));
    let deep = "pushone ".repeat(31);
    assert_eq!(v(&deep), Ok(32));
    assert_eq!(
        v(&format!("{deep} pushone")),
        Err(VerifyError::Overflow { insn: 31, max: 32 })
    );
    let long = "pushlit #1 | and ".repeat(128);
    assert!(matches!(
        v(&long),
        Err(VerifyError::TooLong {
            words: 256,
            max: 255
        })
    ));
}

#[test]
fn the_seeds_first_example_pup_types_in_a_range() {
    // The CSPF paper's first example, for its 3 Mb/s Ethernet: the packet
    // type in the second word is PUP (2), and the PUP type (the low byte of
    // word 3) is above 0 and at most 100. Written with eq/gt/le and two ands.
    let p = assemble(
        "pushword P[1] pushlit | eq #2
         pushword P[3] push00ff | and pushzero | gt
         pushword P[3] push00ff | and pushlit | le #100
         and and",
    )
    .unwrap();
    let pkt = |ty: u16, pup: u8| {
        let mut v = vec![0u8; 8];
        v[2..4].copy_from_slice(&ty.to_be_bytes());
        v[7] = pup;
        v
    };
    assert!(p.run(&pkt(2, 1)));
    assert!(p.run(&pkt(2, 100)));
    assert!(!p.run(&pkt(2, 0)));
    assert!(!p.run(&pkt(2, 101)));
    assert!(!p.run(&pkt(3, 50)));
    assert!(!p.run(&pkt(2, 50)[..7]));
    for pk in [pkt(2, 1), pkt(2, 0), pkt(2, 100), pkt(2, 101), pkt(5, 5)] {
        agree(&p, &pk);
    }
    // The lowering is a plain conjunction, no 0/1 arithmetic.
    let ir = format!("{:?}", lower(p.insns()));
    assert!(!ir.contains("Shr"), "{ir}");
}

#[test]
fn the_seeds_second_example_short_circuit_socket() {
    // The second example: a 32-bit PUP destination socket in words 7 and 8
    // tested with cand, then the packet type with eq.
    let p = assemble(
        "pushword P[8] pushlit | cand #0x0023
         pushword P[7] pushzero | cand
         pushword P[1] pushlit | eq #2",
    )
    .unwrap();
    let mut pkt = vec![0u8; 18];
    pkt[3] = 2;
    pkt[17] = 0x23;
    assert!(p.run(&pkt));
    pkt[14] = 1;
    assert!(!p.run(&pkt));
    agree(&p, &pkt);
    pkt[14] = 0;
    agree(&p, &pkt);
    let ir = lower(p.insns());
    assert!(
        matches!(&ir, sluice_ir::Pred::And(v) if v.len() == 3),
        "{ir:?}"
    );
}

#[test]
fn short_circuits_return_and_continue() {
    let pkt = [0u8, 5];
    let t = |src: &str| assemble(src).unwrap().run(&pkt);
    assert!(t("pushword P[0] pushlit | cor #5 pushzero"));
    assert!(!t("pushword P[0] pushlit | cor #6 pushzero"));
    assert!(!t("pushword P[0] pushlit | cand #6 pushone"));
    assert!(t("pushword P[0] pushlit | cand #5 pushone"));
    assert!(!t("pushword P[0] pushlit | cnor #5 pushone"));
    assert!(t("pushword P[0] pushlit | cnor #6 pushone"));
    assert!(t("pushword P[0] pushlit | cnand #6 pushzero"));
    assert!(!t("pushword P[0] pushlit | cnand #5 pushzero"));
    // Nothing is pushed: the initial true decides at the end.
    assert!(t("pushword P[0] pushlit | cand #5"));
}

#[test]
fn a_read_past_the_packet_rejects_even_after_a_later_accepting_exit() {
    // Word 50 is read first (and left on the stack); then cor would accept.
    let p = assemble("pushword P[50] pushword P[0] pushlit | cor #5 pushzero").unwrap();
    assert!(!p.run(&[0, 5]));
    agree(&p, &[0, 5]);
    let mut long = vec![0u8; 102];
    long[1] = 5;
    assert!(p.run(&long));
    agree(&p, &long);
}

#[test]
fn indirect_words_and_stack_words() {
    // Word index from the packet: word 0 holds 2, word 2 holds 0x1234.
    let p = assemble("pushword P[0] pushind pushlit | eq #0x1234").unwrap();
    assert!(p.run(&[0, 2, 0, 0, 0x12, 0x34]));
    assert!(!p.run(&[0, 3, 0, 0, 0x12, 0x34]));
    agree(&p, &[0, 2, 0, 0, 0x12, 0x34]);
    agree(&p, &[0, 3, 0, 0, 0x12, 0x34, 0, 0]);
    let q = assemble("pushlit #7 dup | add pushstk + 0 pushlit | eq #14").unwrap();
    assert!(q.run(&[]));
}

#[test]
fn arithmetic_is_16_bit() {
    let t = |src: &str| assemble(src).unwrap().run(&[0xff, 0xff]);
    assert!(t("pushword P[0] pushone | add pushzero | eq"));
    assert!(t("pushzero pushone | sub pushffff | eq"));
    assert!(t("pushword P[0] pushlit | lsh #16 pushzero | eq"));
    assert!(t("pushword P[0] pushlit | lsh #4 pushlit | eq #0xfff0"));
    assert!(t("pushword P[0] pushlit | rsh #15 pushone | eq"));
    for src in [
        "pushword P[0] pushone | add pushzero | eq",
        "pushword P[0] pushlit | lsh #4 pushlit | eq #0xfff0",
        "pushword P[0] pushword P[0] | lt pushword P[0] | add pushlit | eq #0xffff",
    ] {
        agree(&assemble(src).unwrap(), &[0xff, 0xff]);
        agree(&assemble(src).unwrap(), &[0x12, 0x34]);
    }
}

#[test]
fn assembler_errors_are_positioned() {
    let e = |t: &str| assemble(t).unwrap_err().to_string();
    assert!(e("pushword P[6]\n  pushlt").starts_with("line 2, column 3: unknown instruction"));
    assert!(
        e("pushlit | cand").contains("needs its literal"),
        "{}",
        e("pushlit | cand")
    );
    assert!(e("pushword P[944]").contains("beyond pushword's range"));
    assert!(e("pushlit #0x10000").contains("16 bits"));
    assert!(e("pushlit #X").contains("undefined name 'X'"));
    assert!(e(".define and 3").contains("mnemonic"));
    assert!(e(".define A 3 .define A 4").contains("already defined"));
    assert!(e("pushone | frob").contains("unknown operation 'frob'"));
    assert!(e("pushhdr 3").contains("header pushes"));
    assert!(e("/* open").contains("unterminated"));
    assert!(e("pushone $").contains("unexpected character"));
    assert!(e(".priority 256 pushone").contains("above 255"));
    assert!(e("pushone | cand pushone | cand").contains("instruction 1: stack underflow"));
}

#[test]
fn inline_form_takes_semicolons_as_separators() {
    let a =
        assemble_inline("pushword P[6]; pushlit | cand #0x800; pushword P[7]; pushzero | cnand")
            .unwrap();
    let b = assemble(
        "pushword P[6] ; a comment\npushlit | cand #0x800\npushword P[7] pushzero | cnand",
    )
    .unwrap();
    assert_eq!(a, b);
    let p = assemble(".priority 9\n.copy\n.define X (1 | 2) << 8\npushlit #~X").unwrap();
    assert_eq!((p.priority, p.copy), (9, true));
    assert_eq!(p.insns()[0].action, Action::PushLit(!0x0300));
}

#[test]
fn mpf_appendix_c_verbatim_shape() {
    // The program of MPF's Appendix C (session constants for 10.0.0.1:1234
    // -> 10.0.0.2:80), with big-endian words: the IHL is the high byte's
    // low nibble, so "mask, shift left 1" becomes "mask 0x0f00, shift right 7".
    let src = "
        .define OFF_ETHERTYPE 6   .define ETHERTYPE_IP 0x0800
        .define OFF_DST_IP_HI 15  .define OFF_DST_IP_LO 16
        .define OFF_SRC_IP_HI 13  .define OFF_SRC_IP_LO 14
        .define OFF_TTL_PROTO 11  .define PROTO_MASK 0x00ff .define IPPROTO_TCP 6
        .define OFF_FRAG 10       .define DONT_FRAG_BIT 0x4000
        .define OFF_VER_IHL 7     .define IHL_MASK 0x0f00
        .define OFF_IP 7          .define OFF_DST_PORT 1
        pushword P[OFF_ETHERTYPE] ; push ethertype
        pushlit | cand
        #ETHERTYPE_IP
        pushword P[OFF_DST_IP_HI] pushlit | cand #0x0a00
        pushword P[OFF_DST_IP_LO] pushlit | cand #0x0002
        pushword P[OFF_TTL_PROTO] pushlit | and #PROTO_MASK pushlit | cand #IPPROTO_TCP
        pushword P[OFF_FRAG] pushlit | and #!DONT_FRAG_BIT pushzero | cand
        pushword P[OFF_SRC_IP_HI] pushlit | cand #0x0a00
        pushword P[OFF_SRC_IP_LO] pushlit | cand #0x0001
        pushword P[OFF_VER_IHL] pushlit and #IHL_MASK pushlit rsh #7
        pushlit add #OFF_IP pushstk + 0
        pushind pushlit cand #1234
        pushlit add #OFF_DST_PORT
        pushind
        pushlit cand #80
    ";
    let p = assemble(src).unwrap();
    let pkt = tcp_packet();
    assert!(p.run(&pkt));
    let mut other = pkt.clone();
    other[37] = 81;
    assert!(!p.run(&other));
    let mut frag = pkt.clone();
    frag[21] = 1;
    assert!(!p.run(&frag));
    let mut df = pkt.clone();
    df[20] = 0x40;
    assert!(p.run(&df));
    let mut opts = vec![0u8; 58];
    opts[..34].copy_from_slice(&pkt[..34]);
    opts[14] = 0x46;
    opts[38..42].copy_from_slice(&pkt[34..38]);
    assert!(p.run(&opts));
    for pk in [&pkt, &other, &frag, &opts] {
        agree(&p, pk);
    }
    // The lowering is one conjunction, with the ports read through the
    // header length.
    let ir = lower(p.insns());
    assert!(
        matches!(&ir, sluice_ir::Pred::And(v) if v.len() == 9),
        "{ir:?}"
    );
}

#[test]
fn ports_priorities_and_copies() {
    let any = || assemble("pushone").unwrap();
    let ip = || assemble("pushword P[6] pushlit | eq #0x0800").unwrap();
    let mut s = PortSet::new();
    let low = s.insert(any(), 1, false);
    let mon = s.insert(any(), 200, true);
    let ipp = s.insert(ip(), 100, false);
    let ip2 = s.insert(ip(), 100, false);
    let pkt = tcp_packet();
    assert_eq!(s.deliver(&pkt), vec![mon, ipp]);
    assert_eq!(s.deliver(&[0u8; 14]), vec![mon, low]);
    s.remove(ipp);
    assert_eq!(s.deliver(&pkt), vec![mon, ip2]);
    s.remove(mon);
    assert_eq!(s.deliver(&[0u8; 3]), vec![low]);
}

#[test]
fn ports_deliver_like_the_merged_classifier() {
    use sluice_classifier::merged::{Compiled, Merged};
    // Sessions (copy or not) at several priorities, a monitor that copies,
    // a catch-all at the bottom; packets from a generated mix.
    let session = |src: u16, dst: u16| {
        assemble(&format!(
            "pushword P[6] pushlit | cand #0x0800
             pushword P[11] push00ff | and pushlit | cand #6
             pushword P[17] pushlit | cand #{src}
             pushword P[18] pushlit | cand #{dst}"
        ))
        .unwrap()
    };
    let mut s = PortSet::new();
    let mut merged = Merged::default();
    let mut add = |s: &mut PortSet, p: Program, prio: u8, copy: bool| {
        let ir = p.to_ir(1);
        let id = s.insert(p, prio, copy);
        merged.insert(id.0, &Compiled::new(ir), prio as i32);
    };
    add(
        &mut s,
        assemble("pushword P[6] pushlit | eq #0x0800").unwrap(),
        50,
        true,
    );
    for k in 0..20u16 {
        add(
            &mut s,
            session(1000 + k % 7, 80 + k % 3),
            (k % 4) as u8 * 10,
            k % 5 == 0,
        );
    }
    add(&mut s, assemble("pushone").unwrap(), 0, false);
    add(
        &mut s,
        assemble("pushword P[40] pushone | cor pushzero").unwrap(),
        10,
        true,
    );
    let mut scratch = Default::default();
    let mut ids = Vec::new();
    let mut checked = 0;
    for src in 995..1010u16 {
        for dst in 78..84u16 {
            for len in [14usize, 36, 38, 54, 82] {
                let mut pkt = tcp_packet();
                pkt[34..36].copy_from_slice(&src.to_be_bytes());
                pkt[36..38].copy_from_slice(&dst.to_be_bytes());
                pkt.resize(82, 0);
                let pkt = &pkt[..len];
                merged.classify(pkt, len as u32, &mut scratch, &mut ids);
                let want = s.deliver(pkt);
                let got = s.deliver_with(|id| ids.contains(&id.0));
                assert_eq!(got, want, "src {src} dst {dst} len {len}");
                checked += !want.is_empty() as usize;
            }
        }
    }
    assert!(checked > 100);
}

#[test]
fn sessions_in_appendix_c_form_merge_into_one_classifier_group() {
    use sluice_classifier::merged::{Compiled, Merged};
    let src = |sport: u16, dport: u16| {
        format!(
            "pushword P[6] pushlit | cand #0x0800
             pushword P[11] pushlit | and #0x00ff pushlit | cand #6
             pushword P[10] pushlit | and #0xbfff pushzero | cand
             pushword P[7] pushlit | and #0x0f00 pushlit | rsh #7 pushlit | add #7 dup
             pushind pushlit | cand #{sport}
             pushlit | add #1 pushind pushlit | cand #{dport}"
        )
    };
    let mut m = Merged::default();
    let mut id = 0;
    for sport in 1230..1240 {
        for dport in [80, 443] {
            m.insert(
                id,
                &Compiled::new(assemble(&src(sport, dport)).unwrap().to_ir(1)),
                0,
            );
            id += 1;
        }
    }
    assert_eq!(m.groups(), 1);
    let mut out = Vec::new();
    m.classify(&tcp_packet(), 54, &mut Default::default(), &mut out);
    assert_eq!(out, vec![8]); // 1234 -> 80
}

fn arb_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => (0u16..30).prop_map(Action::PushWord),
        1 => Just(Action::PushWord(MAX_PUSHWORD)),
        3 => prop_oneof![
            Just(0u16), Just(1), Just(2), Just(6), Just(7), Just(15), Just(16), Just(0x800),
            Just(0x0f00), Just(0xff), Just(0xffff), any::<u16>()
        ].prop_map(Action::PushLit),
        1 => Just(Action::PushZero),
        1 => Just(Action::PushOne),
        1 => Just(Action::PushFfff),
        1 => Just(Action::PushFf00),
        1 => Just(Action::Push00ff),
        2 => Just(Action::NoPush),
        2 => Just(Action::PushInd),
        1 => (0u16..4).prop_map(Action::PushStk),
    ]
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![6 => Just(Op::Nop), 12 => (0u16..18).prop_map(|c| Op::from_code(c).unwrap_or(Op::Nop))]
}

pub(crate) fn arb_insns() -> impl Strategy<Value = Vec<Insn>> {
    prop::collection::vec(
        (arb_action(), arb_op()).prop_map(|(a, o)| Insn::new(a, o)),
        0..14,
    )
}

pub(crate) fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(prop_oneof![3 => 0u8..4, 1 => any::<u8>()], 0..70),
        (0usize..60).prop_map(|n| tcp_packet()[..n.min(54)].to_vec()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn interpreter_and_ir_agree(insns in arb_insns(), pkt in arb_packet()) {
        // Verified or not: both reject where the stack fails.
        let ir = lower(&insns);
        for n in [pkt.len(), pkt.len().saturating_sub(1), pkt.len() / 2] {
            let want = run(&insns, &pkt[..n]);
            let got = eval_pred(&ir, &pkt[..n], n as u32) == Ok(true);
            prop_assert_eq!(got, want, "length {} {:?}\nIR {:?}", n, insns, ir);
        }
    }

    #[test]
    fn disassembly_assembles_back(insns in arb_insns(), prio in any::<u8>(), copy in any::<bool>()) {
        if let Ok(mut p) = Program::from_insns(insns) {
            p.priority = prio;
            p.copy = copy;
            let text = disassemble(&p);
            prop_assert_eq!(assemble(&text).unwrap(), p.clone());
            let words = p.words();
            let back = Program::from_words(&words).unwrap();
            prop_assert_eq!(back.insns(), p.insns());
        }
    }

    #[test]
    fn random_words_never_panic(words in prop::collection::vec(any::<u16>(), 0..40), pkt in arb_packet()) {
        if let Ok(p) = Program::from_words(&words) {
            let _ = p.run(&pkt);
            let _ = lower(p.insns());
        }
    }

    #[test]
    fn random_text_never_panics(text in "[ -~\n]{0,80}") {
        let _ = assemble(&text);
        let _ = assemble_inline(&text);
    }

    #[test]
    fn token_soup_never_panics(toks in prop::collection::vec(prop_oneof![
        Just("pushword"), Just("P["), Just("]"), Just("pushlit"), Just("|"), Just("cand"), Just("#"),
        Just("0x800"), Just("pushstk"), Just("+"), Just("dup"), Just(".define"), Just("X"), Just("("),
        Just(")"), Just("~"), Just("<<"), Just("99999999999"), Just(";"), Just("/*"), Just("*/"),
        Just(".priority"), Just(".copy"), Just("pushind"), Just("eq"), Just("0")
    ], 0..24)) {
        let text = toks.join(" ");
        let _ = assemble(&text);
        let _ = assemble_inline(&text);
    }
}
