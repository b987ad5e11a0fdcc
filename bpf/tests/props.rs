//! Property tests: nothing panics on arbitrary input, text forms round-trip.

use proptest::prelude::*;
use sluice_bpf::{
    disasm_d, disasm_dd, disasm_ddd, parse_program, run, verify, Insn, Limits, Validated,
    VALID_CODES,
};

fn insn() -> impl Strategy<Value = Insn> {
    let code = prop_oneof![
        3 => proptest::sample::select(VALID_CODES.to_vec()),
        1 => any::<u16>(),
    ];
    let k = prop_oneof![any::<u32>(), 0u32..70, Just(u32::MAX), Just(0xffff_f030)];
    (code, any::<u8>(), any::<u8>(), k).prop_map(|(code, jt, jf, k)| Insn { code, jt, jf, k })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics(text in "\\PC{0,200}") {
        let _ = parse_program(&text);
    }

    #[test]
    fn parser_never_panics_on_near_misses(
        lines in proptest::collection::vec(
            "(\\(0?0[0-9]\\) )?(ld|ldh|ldb|ldx|ldxb|st|jeq|ja|ret|add|unimp|tax|\\{|[0-9]+) {0,3}[#\\[\\]xM0-9a-fA-F+*&(), -]{0,16}( jt -?[0-9]{1,3}\tjf [0-9]{1,3})?( ; 0x[0-9]{4})?",
            0..8)
    ) {
        let _ = parse_program(&lines.join("\n"));
    }

    #[test]
    fn verifier_and_interpreter_never_panic(
        prog in proptest::collection::vec(insn(), 0..40),
        pkt in proptest::collection::vec(any::<u8>(), 0..64),
        wirelen in any::<u32>(),
    ) {
        let r = run(&prog, &pkt, wirelen);
        let _ = verify(&prog, &Limits::KERNEL);
        if let Ok(v) = Validated::new(&prog) {
            prop_assert_eq!(v.run(&pkt, wirelen), r);
        }
    }

    #[test]
    fn text_forms_round_trip(prog in proptest::collection::vec(insn(), 1..40)) {
        prop_assert_eq!(&parse_program(&disasm_dd(&prog)).unwrap(), &prog);
        prop_assert_eq!(&parse_program(&disasm_ddd(&prog)).unwrap(), &prog);
        let d = disasm_d(&prog);
        let back = parse_program(&d).unwrap();
        prop_assert_eq!(disasm_d(&back), d);
    }
}
