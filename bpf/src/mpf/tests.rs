use super::disasm as disasm_d;
use super::*;
use crate::{disasm_dd, disasm_ddd, parse_program, run, Verifier};

/// Data registered forever, with a log of registrations.
#[derive(Default)]
struct Log {
    data: Vec<(Vec<u32>, u32)>,
}

impl MpfEnv for Log {
    fn register(&mut self, data: &[u32], timeout_ms: u32) {
        self.data.push((data.to_vec(), timeout_ms));
    }
    fn lookup(&mut self, data: &[u32]) -> bool {
        self.data.iter().any(|(d, _)| d == data)
    }
}

fn p(text: &str) -> Vec<Insn> {
    parse_program(text).unwrap()
}

#[test]
fn encodings_are_not_classic_and_round_trip() {
    let all = [
        Ext::Key(0xdead_beef),
        Ext::RetMatchImm { n: 3, ret: 262144 },
        Ext::JmpMatchImm { n: 2, jt: 4, jf: 7 },
        Ext::RegisterData {
            n: 2,
            timeout_ms: 30_000,
        },
        Ext::RetMatchData {
            n: 2,
            ret: u32::MAX,
        },
        Ext::Postpone { timeout_ms: 5 },
    ];
    for e in all {
        let i = e.encode();
        assert_eq!(Ext::decode(&i), Some(e));
        assert!(!crate::is_valid_code(i.code));
        assert!(i.decode().is_none());
        // The kernel's verifier and the classic interpreter refuse them.
        let prog = [i, Insn::stmt(BPF_RET | BPF_K, 1)];
        assert_eq!(
            Verifier::kernel().verify(&prog),
            Err(VerifyError::UnknownOpcode {
                pc: 0,
                code: i.code
            })
        );
        assert!(Verifier::userland().verify(&prog).is_err());
        assert_eq!(run(&prog, &[0; 64], 64), 0);
    }
    // No classic opcode decodes as an extension.
    for code in 0..=0xffu16 {
        assert_eq!(Ext::decode(&Insn::stmt(code, 1)), None);
    }
}

/// Figure 3 with concrete constants, as the `-d` form prints it.
const FIG3: &str = "\
(000) ldh      [12]
(001) jeq      #0x800           jt 2\tjf 18
(002) ld       [30]
(003) jeq      #0xa010102       jt 4\tjf 18
(004) ldb      [23]
(005) jeq      #0x6             jt 6\tjf 18
(006) ldh      [20]
(007) and      #0xbfff
(008) jeq      #0x0             jt 9\tjf 18
(009) ld       [26]
(010) st       M[0]
(011) ldxb     4*([14]&0xf)
(012) ldh      [x + 14]
(013) st       M[1]
(014) ldh      [x + 16]
(015) st       M[2]
(016) ret_match_imm #3, #262144
(017) key      #0xa020102
(018) ret      #0
";

#[test]
fn d_text_round_trips_with_key_words() {
    // (016)'s keys: 3 words, the third missing: the listing above has one
    // key only, so verification must fail...
    let insns = p(FIG3);
    assert_eq!(disasm_d(&insns), FIG3);
    assert_eq!(
        verify_mpf(&insns),
        Err(VerifyError::MpfMissingKeys {
            pc: 16,
            n: 3,
            found: 1
        })
    );
    // ...and with all three keys it passes.
    let good = FIG3.replace(
        "(017) key      #0xa020102\n(018) ret      #0\n",
        "(017) key      #0xa020102\n(018) key      #0x8c79\n(019) key      #0x16\n(020) ret      #0\n",
    )
    .replace("jf 18", "jf 20");
    let insns = p(&good);
    assert_eq!(disasm_d(&insns), good);
    assert_eq!(p(&disasm_dd(&insns)), insns);
    assert_eq!(p(&disasm_ddd(&insns)), insns);
    let prog = MpfProgram::new(&insns).unwrap();
    assert_eq!(prog.keys(), vec![0x0a02_0102, 0x8c79, 0x16]);
    assert_eq!(
        prog.key_sites(),
        &[KeySite {
            pc: 16,
            n: 3,
            jump: false
        }]
    );
    assert!(!prog.is_classic());
}

#[test]
fn jmp_match_imm_targets_count_from_after_the_keys() {
    let text = "\
(000) ld       #0x5
(001) st       M[0]
(002) jmp_match_imm #1               jt 5\tjf 4
(003) key      #0x5
(004) ret      #0
(005) ret      #7
";
    let insns = p(text);
    assert_eq!(insns[2], Insn::jump(MPF_JMP_MATCH_IMM, 1, 1, 0));
    assert_eq!(disasm_d(&insns), text);
    let prog = MpfProgram::new(&insns).unwrap();
    assert_eq!(prog.run(&[], 0, &mut NoData), MpfVerdict::Return(7));
    let other = p(&text.replace("key      #0x5", "key      #0x6"));
    assert_eq!(run_mpf(&other, &[], 0, &mut NoData), MpfVerdict::Return(0));
    // Targets before the keys' end are refused by the parser.
    let e = parse_program(&text.replace("jt 5\tjf 4", "jt 3\tjf 4")).unwrap_err();
    assert!(e.message.contains("not 0..=255"), "{e}");
    let e = parse_program("jmp_match_imm #1\nkey #1\nret #0\n").unwrap_err();
    assert!(e.message.contains("needs `jt"), "{e}");
    let e = parse_program("ret_match_imm #1\nkey #1\n").unwrap_err();
    assert!(e.message.contains("two operands"), "{e}");
    let e = parse_program("postpone #1 jt 1 jf 1\nret #0\n").unwrap_err();
    assert!(e.message.contains("no jt"), "{e}");
    let e = parse_program("ret_match_data #300, #1\n").unwrap_err();
    assert!(e.message.contains("at most 255"), "{e}");
}

#[test]
fn ret_match_imm_equals_table_1s_bpf_sequence() {
    // Table 1: ret_match_imm #3, #R == three loads and jeqs.
    let keys = [0x0a00_0001u32, 1234, 80];
    let mpf = MpfProgram::parse(&format!(
        "ld M[0]\nret_match_imm #3, #262144\nkey #{}\nkey #{}\nkey #{}\n",
        keys[0], keys[1], keys[2]
    ));
    // A load of M[0] before any store is fine in userland rules.
    let mpf = mpf.unwrap();
    let bpf = |mem: [u32; 3]| -> u32 {
        let text = format!(
            "ld #{}\nst M[0]\nld #{}\nst M[1]\nld #{}\nst M[2]\n\
             ld M[0]\njeq #{} jt 8 jf 13\nld M[1]\njeq #{} jt 10 jf 13\n\
             ld M[2]\njeq #{} jt 12 jf 13\nret #262144\nret #0\n",
            mem[0] as i32, mem[1] as i32, mem[2] as i32, keys[0], keys[1], keys[2]
        );
        run(&p(&text), &[], 0)
    };
    let with_mem = |mem: [u32; 3]| -> MpfVerdict {
        let mut prog = p(&format!(
            "ld #{}\nst M[0]\nld #{}\nst M[1]\nld #{}\nst M[2]\n",
            mem[0] as i32, mem[1] as i32, mem[2] as i32
        ));
        prog.extend_from_slice(&mpf.insns()[1..]);
        MpfProgram::new(&prog).unwrap().run(&[], 0, &mut NoData)
    };
    for mem in [
        keys,
        [keys[0], keys[1], 81],
        [keys[0], 1235, 80],
        [0, 1234, 80],
        [0, 0, 0],
    ] {
        assert_eq!(with_mem(mem), MpfVerdict::Return(bpf(mem)), "{mem:?}");
    }
}

/// Appendix B made real (the example file's shape, small constants).
fn appendix_b() -> MpfProgram {
    MpfProgram::parse(
        "\
ldh [12]
jeq #0x800 jt 2 jf 35
ld [30]
jeq #0x0a000002 jt 4 jf 35
ldb [23]
jeq #6 jt 6 jf 35
ldh [20]
jset #0x1fff jt 29 jf 8
ld [26]
st M[0]
ldxb 4*([14]&0xf)
ldh [x + 14]
st M[1]
ldh [x + 16]
st M[2]
ldh [20]
jset #0x2000 jt 21 jf 17
ret_match_imm #3, #262144
key #0x0a000001
key #1234
key #80
jmp_match_imm #3 jt 25 jf 35
key #0x0a000001
key #1234
key #80
ldh [18]
st M[1]
register_data #2, #1000
ret #262144
ld [26]
st M[0]
ldh [18]
st M[1]
ret_match_data #2, #262144
postpone #500
ret #0
",
    )
    .unwrap()
}

fn ipv4_tcp(src: u32, id: u16, flags_off: u16, sport: u16, dport: u16) -> Vec<u8> {
    let mut pkt = vec![0u8; 60];
    pkt[12] = 0x08;
    pkt[14] = 0x45;
    pkt[18..20].copy_from_slice(&id.to_be_bytes());
    pkt[20..22].copy_from_slice(&flags_off.to_be_bytes());
    pkt[23] = 6;
    pkt[26..30].copy_from_slice(&src.to_be_bytes());
    pkt[30..34].copy_from_slice(&0x0a00_0002u32.to_be_bytes());
    pkt[34..36].copy_from_slice(&sport.to_be_bytes());
    pkt[36..38].copy_from_slice(&dport.to_be_bytes());
    pkt
}

#[test]
fn appendix_b_registers_matches_and_postpones() {
    let prog = appendix_b();
    assert_eq!(prog.key_sites().len(), 2);
    let mut env = Log::default();
    let s = 0x0a00_0001;
    // A whole packet of the session: accepted, nothing registered.
    let whole = ipv4_tcp(s, 7, 0x4000, 1234, 80);
    assert_eq!(prog.run(&whole, 60, &mut env), MpfVerdict::Return(262144));
    assert!(env.data.is_empty());
    // Another session: rejected.
    let other = ipv4_tcp(s, 7, 0, 1235, 80);
    assert_eq!(prog.run(&other, 60, &mut env), MpfVerdict::Return(0));
    // A later fragment before the first: postponed.
    let later = ipv4_tcp(s, 99, 0x0010, 0, 0);
    assert_eq!(
        prog.run(&later, 60, &mut env),
        MpfVerdict::Postpone { timeout_ms: 500 }
    );
    // The first fragment registers (src, id) and is accepted.
    let first = ipv4_tcp(s, 99, 0x2000, 1234, 80);
    assert_eq!(prog.run(&first, 60, &mut env), MpfVerdict::Return(262144));
    assert_eq!(env.data, vec![(vec![s, 99], 1000)]);
    // Now the later fragment matches the registered data.
    assert_eq!(prog.run(&later, 60, &mut env), MpfVerdict::Return(262144));
    // A first fragment of another session registers nothing.
    let first_other = ipv4_tcp(s, 100, 0x2000, 1, 80);
    assert_eq!(prog.run(&first_other, 60, &mut env), MpfVerdict::Return(0));
    assert_eq!(env.data.len(), 1);
    // Truncated: rejected, never postponed.
    assert_eq!(prog.run(&later[..27], 60, &mut env), MpfVerdict::Return(0));
}

#[test]
fn verifier_rules() {
    let v = |t: &str| verify_mpf(&p(t));
    assert_eq!(
        v("ret_match_imm #0, #1\nret #0\n"),
        Err(VerifyError::MpfWordCount { pc: 0, n: 0 })
    );
    assert_eq!(
        v("ret_match_data #17, #1\nret #0\n"),
        Err(VerifyError::MpfWordCount { pc: 0, n: 17 })
    );
    assert_eq!(
        v(&format!("jmp_match_imm #17 jt {0} jf {0}\nret #0\n", 18)),
        Err(VerifyError::MpfWordCount { pc: 0, n: 17 })
    );
    assert_eq!(
        v("ret_match_imm #2, #1\nkey #1\nret #0\n"),
        Err(VerifyError::MpfMissingKeys {
            pc: 0,
            n: 2,
            found: 1
        })
    );
    assert_eq!(
        v("ret #0\nkey #1\n"),
        Err(VerifyError::MpfStrayKey { pc: 1 })
    );
    assert_eq!(
        v("ld #0\njeq #0 jt 3 jf 5\nret_match_imm #1, #1\nkey #1\nret #1\nret #0\n"),
        Err(VerifyError::MpfJumpIntoKeys { pc: 1, target: 3 })
    );
    assert_eq!(
        v("ld #0\nst M[0]\njmp_match_imm #1 jt 6 jf 5\nkey #1\nret #0\nregister_data #1, #5\nret #1\n"),
        Err(VerifyError::MpfRegisterWithoutMatch { pc: 5 })
    );
    // Both paths through the taken branch: fine.
    assert!(v(
        "ld #0\nst M[0]\njmp_match_imm #1 jt 4 jf 7\nkey #1\njeq #1 jt 5 jf 6\nregister_data #1, #5\nret #1\nret #0\n"
    )
    .is_ok());
    assert_eq!(
        v("ld #0\nret_match_data #1, #1\n"),
        Err(VerifyError::NoFinalReturn { pc: 1 })
    );
    assert_eq!(
        v("ret_match_imm #1, #1\nkey #1\n"),
        Ok(vec![KeySite {
            pc: 0,
            n: 1,
            jump: false
        }])
    );
    assert!(v("postpone #1\n").is_ok());
    assert_eq!(
        verify_mpf(&[Insn::stmt(0x05, 1), Insn::stmt(0x06, 0)]),
        Err(VerifyError::JumpOutOfRange {
            pc: 0,
            target: 2,
            len: 2
        })
    );
    assert_eq!(
        verify_mpf(&[
            Insn::stmt(0x06, 0),
            Insn::stmt(0x05, (-2i32) as u32),
            Insn::stmt(0x06, 0)
        ]),
        Err(VerifyError::BackwardJump { pc: 1, target: 0 })
    );
    assert_eq!(
        verify_mpf(&[Insn::stmt(0x34, 0), Insn::stmt(0x06, 0)]),
        Err(VerifyError::DivisionByZero { pc: 0 })
    );
    assert_eq!(
        verify_mpf(&[Insn::stmt(0x02, 16), Insn::stmt(0x06, 0)]),
        Err(VerifyError::MemoryIndex { pc: 0, k: 16 })
    );
    assert_eq!(verify_mpf(&[]), Err(VerifyError::Empty));
    // Every classic program the userland verifier accepts without backward
    // jumps is an MPF program with no key sites.
    let classic = p("ldh [12]\njeq #0x800 jt 2 jf 3\nret #262144\nret #0\n");
    assert_eq!(verify_mpf(&classic), Ok(vec![]));
}

#[test]
fn classic_programs_run_the_same() {
    let prog = p("ldh [12]\njeq #0x800 jt 2 jf 3\nld #pktlen\nret a\nret #0\n");
    for pkt in [[0u8; 14], {
        let mut x = [0u8; 14];
        x[12] = 8;
        x
    }] {
        assert_eq!(
            run_mpf(&prog, &pkt, 99, &mut NoData),
            MpfVerdict::Return(run(&prog, &pkt, 99))
        );
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn any_insn() -> impl Strategy<Value = Insn> {
        let codes = prop_oneof![
            prop::sample::select(crate::VALID_CODES.to_vec()),
            prop::sample::select(vec![
                MPF_KEY,
                MPF_RET_MATCH_IMM,
                MPF_JMP_MATCH_IMM,
                MPF_REGISTER_DATA,
                MPF_RET_MATCH_DATA,
                MPF_POSTPONE
            ]),
        ];
        (codes, 0u8..6, 0u8..6, prop_oneof![0u32..20, any::<u32>()])
            .prop_map(|(code, jt, jf, k)| Insn { code, jt, jf, k })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Any program: verification, running and text never panic; the
        /// text forms round-trip; verified programs never fall into keys.
        #[test]
        fn arbitrary_programs(prog in prop::collection::vec(any_insn(), 1..24),
                              pkt in prop::collection::vec(any::<u8>(), 0..64)) {
            let verdict = run_mpf(&prog, &pkt, pkt.len() as u32, &mut Log::default());
            let d = disasm_d(&prog);
            if let Ok(back) = parse_program(&d) {
                prop_assert_eq!(disasm_d(&back), d);
            }
            prop_assert_eq!(parse_program(&disasm_dd(&prog)).unwrap(), prog.clone());
            if let Ok(sites) = verify_mpf(&prog) {
                // Verified programs print and parse back to a program that
                // verifies and runs the same.
                let back = parse_program(&disasm_d(&prog)).unwrap();
                prop_assert_eq!(verify_mpf(&back), Ok(sites.clone()));
                prop_assert_eq!(
                    run_mpf(&back, &pkt, pkt.len() as u32, &mut Log::default()),
                    verdict
                );
                for s in sites {
                    prop_assert!(s.n >= 1 && s.n <= 16);
                }
            }
        }
    }
}
