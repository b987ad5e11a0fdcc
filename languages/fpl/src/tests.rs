use super::*;
use std::sync::Arc;

fn compile(src: &str) -> Program {
    Program::compile(src, &Externs::builtin()).unwrap_or_else(|e| panic!("{e}\n{src}"))
}

fn refuse(src: &str) -> Error {
    match Program::compile(src, &Externs::builtin()) {
        Ok(p) => panic!("compiled: {src}\n{p:?}"),
        Err(e) => e,
    }
}

fn run1(src: &str, pkt: &[u8]) -> u32 {
    let p = compile(src);
    let mut mem = vec![0; p.mem_words()];
    p.run(pkt, &mut mem)
}

/// An Ethernet/IPv4/TCP frame (20-byte headers) with the given ports.
fn tcp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 6;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[46] = 0x50;
    f.extend_from_slice(payload);
    f
}

#[test]
fn operators_follow_c() {
    assert_eq!(run1("RETURN 1 + 2 * 3;", &[]), 7);
    assert_eq!(run1("RETURN (1 + 2) * 3;", &[]), 9);
    assert_eq!(run1("RETURN 1 << 4 | 1;", &[]), 17);
    assert_eq!(run1("RETURN 7 & 3 == 3;", &[]), 1); // == binds tighter than &
    assert_eq!(run1("RETURN 0 - 1;", &[]), u32::MAX);
    assert_eq!(run1("RETURN -1 > 5;", &[]), 1); // unsigned
    assert_eq!(run1("RETURN 17 % 5 + 17 / 5;", &[]), 5);
    assert_eq!(run1("RETURN !0 + !7 + ~0;", &[]), 0);
    assert_eq!(run1("RETURN 1 << 32;", &[]), 0);
    assert_eq!(run1("RETURN 0x80000000 >> 31;", &[]), 1);
    assert_eq!(run1("RETURN 1 || PKT.B[9];", &[]), 1); // short-circuit: no abort
    assert_eq!(run1("RETURN 0 && PKT.B[9];", &[]), 0);
    assert_eq!(run1("RETURN 1 && PKT.B[9];", &[]), 0); // abort
    assert_eq!(run1("RETURN 2 && 3;", &[]), 1);
    assert_eq!(run1("R[0] = 10; R[0] -= 3; R[0] *= 4; R[0] <<= 1; R[0] ^= 1; R[0] |= 0x100; R[0] &= 0x1ff; R[0] >>= 1; R[0] %= 50; R[0] /= 2; RETURN R[0];", &[]), 3);
    // 10, 7, 4, 1, then 1 - 3 wraps: the loop would not end, its bound aborts it.
    assert_eq!(
        run1(
            "FOR (R[0] = 10; R[0] > 0; R[0] -= 3) R[1]++; ROF RETURN 1;",
            &[]
        ),
        0
    );
}

#[test]
fn packet_reads() {
    let pkt = [0x12, 0x34, 0x56, 0x78, 0x9a];
    assert_eq!(run1("RETURN PKT.B[4];", &pkt), 0x9a);
    assert_eq!(run1("RETURN PKT.W[1];", &pkt), 0x3456);
    assert_eq!(run1("RETURN PKT.DW[1];", &pkt), 0x3456789a);
    assert_eq!(run1("RETURN PKT.DW[2] + 1;", &pkt), 0); // past the end: abort
    assert_eq!(run1("RETURN PKT.B[0xffffffff];", &pkt), 0);
    assert_eq!(run1("RETURN PKT.B[0].U1[3];", &pkt), 1); // 0x12 = 0001_0010
    assert_eq!(run1("RETURN PKT.B[0].U1[4];", &pkt), 0);
    assert_eq!(run1("RETURN PKT.B[0].U4[1];", &pkt), 2);
    assert_eq!(run1("RETURN PKT.W[0].U8[1];", &pkt), 0x34);
    assert_eq!(run1("RETURN PKT.DW[0].U16[1];", &pkt), 0x5678);
    assert_eq!(run1("RETURN 1 + PKT.B[0].U1[PKT.B[0]];", &pkt), 0); // part 18 of 8: abort
    let f = tcp(1234, 80, b"");
    assert_eq!(run1("RETURN PKT.TCP_DPORT;", &f), 80);
    assert_eq!(run1("RETURN PKT.TCP_SPORT;", &f), 1234);
    assert_eq!(run1("RETURN PKT.IP_PROTO == PROTO_TCP;", &f), 1);
    assert_eq!(run1("RETURN PKT.IP_SRC;", &f), 0x0a000001);
    assert_eq!(run1("RETURN PKT.IP_DEST;", &f), 0x0a000002);
    assert_eq!(run1("RETURN PKT.TCP_DATA_OFF;", &f), 54);
    assert_eq!(run1("RETURN pkt.ip_version;", &f), 4);
    // IP options move the TCP header.
    let mut g = f.clone();
    g[14] = 0x46;
    g.splice(34..34, [0u8; 4]);
    assert_eq!(run1("RETURN PKT.TCP_DPORT;", &g), 80);
    assert_eq!(run1("RETURN PKT.TCP_DPORT;", &f[..37]), 0);
}

#[test]
fn hash_is_fnv1a_mod_size() {
    let f = tcp(1, 2, b"");
    let want = hash(&f[26..38]) % 1000;
    assert_eq!(run1("RETURN HASH(26, 12, 1000);", &f), want);
    assert_eq!(run1("RETURN HASH(26, 12, 1000) + 1;", &f[..37]), 0);
}

#[test]
fn memory_persists_and_aborts_keep_writes() {
    let p = compile("DECLARE MEM[4]; MEM[PKT.B[0]] += 1; R[0]++; RETURN MEM[PKT.B[1]];");
    assert_eq!(p.mem_words(), 5);
    let mut mem = vec![0; 5];
    assert_eq!(p.run(&[1, 1], &mut mem), 1);
    assert_eq!(p.run(&[1, 1], &mut mem), 2);
    assert_eq!(p.run(&[9, 1], &mut mem), 0); // MEM[9]: abort before R[0]++
    assert_eq!(p.run(&[3, 7], &mut mem), 0); // MEM[7]: abort after the writes
    assert_eq!(mem, [0, 2, 0, 1, 3]);
    // A larger MBuf than needed is fine.
    let mut big = vec![0; 10];
    p.run(&[0, 0], &mut big);
    assert_eq!(big[..5], [1, 0, 0, 0, 1]);
}

#[test]
#[should_panic(expected = "the MBuf has 1 words")]
fn short_mbuf_panics() {
    compile("MEM[1] = 1;").run(&[], &mut [0]);
}

#[test]
fn mem_size_inference() {
    assert_eq!(compile("RETURN 1;").mem_size(), 0);
    assert_eq!(compile("MEM[9] = 1;").mem_size(), 10);
    assert_eq!(compile("MEM[PKT.B[0]]++;").mem_size(), 256);
    assert_eq!(compile("MEM[PKT.W[0] & 0x3f]++;").mem_size(), 64);
    assert_eq!(compile("MEM[HASH(0, 4, 1000)]++;").mem_size(), 1000);
    assert_eq!(compile("MEM[R[0]]++;").mem_size(), DEFAULT_MEM_WORDS);
    assert_eq!(compile("MEM[R[0]]++; MEM[300] = 1;").mem_size(), 301);
    let p = compile("MEM[R[0] & 7] = 1; MEM[PKT.B[0] % 10] = 2;");
    assert_eq!(p.mem_size(), 10);
    // Proven accesses carry no run-time check.
    assert!(matches!(
        p.body()[0],
        ir::Stmt::SetMem { checked: false, .. }
    ));
    let p = compile("DECLARE MEM[8]; MEM[PKT.B[0]] = 1;");
    assert!(matches!(
        p.body()[0],
        ir::Stmt::SetMem { checked: true, .. }
    ));
    let l = Limits {
        mem_words: Some(3),
        ..Limits::default()
    };
    assert_eq!(
        Program::compile_with("MEM[2] = 1;", &Externs::new(), &l)
            .unwrap()
            .mem_words(),
        3
    );
    assert!(Program::compile_with("MEM[3] = 1;", &Externs::new(), &l).is_err());
}

#[test]
fn loops() {
    assert_eq!(
        run1(
            "FOR (R[0] = 0; R[0] < 10; R[0]++) R[1] += R[0]; ROF RETURN R[1];",
            &[]
        ),
        45
    );
    assert_eq!(
        run1(
            "FOR (R[0] = 10; R[0] >= 3; R[0] -= 3) R[1]++; ROF RETURN R[1];",
            &[]
        ),
        3
    );
    assert_eq!(
        run1(
            "FOR (R[0] = 0; R[0] != 12; R[0] += 4) R[1]++; ROF RETURN R[1] * 100 + R[0];",
            &[]
        ),
        312
    );
    // BREAK leaves the innermost loop only.
    let src = "FOR (R[0] = 0; R[0] < 5; R[0]++)
                 FOR (R[1] = 0; R[1] < 5; R[1]++)
                   IF R[1] == 2 THEN BREAK; FI
                   R[2]++;
                 ROF
               ROF
               RETURN R[2];";
    assert_eq!(run1(src, &[]), 10);
    // A loop over the packet's bytes: bounded by the range of PKT.B.
    let src = "FOR (R[0] = 0; R[0] < PKT.B[0]; R[0]++) R[1] += PKT.B[R[0] + 1]; ROF RETURN R[1];";
    let p = compile(src);
    let mut mem = vec![0; p.mem_words()];
    assert_eq!(p.run(&[3, 1, 2, 3, 4], &mut mem), 6);
    assert_eq!(p.run(&[9, 1, 2, 3, 4], &mut mem), 0); // reads past the end
    assert!(matches!(p.body()[0], ir::Stmt::Loop { max_trips: 255, .. }));
    // Inside a loop with a known bound, its register's range is known too.
    let p = compile("FOR (R[0] = 2; R[0] < 10; R[0] += 3) MEM[R[0]] = 1; ROF");
    assert_eq!(p.mem_size(), 10);
    let ir::Stmt::Loop { body, .. } = &p.body()[0] else {
        panic!()
    };
    assert!(matches!(body[0], ir::Stmt::SetMem { checked: false, .. }));
    let p = compile("FOR (R[0] = 0; R[0] < 4; R[0]++) FOR (R[1] = R[0]; R[1] <= R[0] + 2; R[1]++) MEM[R[1]]++; ROF ROF");
    assert_eq!(p.mem_size(), 6);
    let mut mem = vec![0; p.mem_words()];
    p.run(&[], &mut mem);
    assert_eq!(mem[..6], [1, 2, 3, 3, 2, 1]);
    // After the loop, or with an unknown bound, the register is unknown.
    assert_eq!(
        compile("FOR (R[0] = 0; R[0] < 4; R[0]++) ROF MEM[R[0]] = 1;").mem_size(),
        DEFAULT_MEM_WORDS
    );
    // A limit in a register: bounded by the MBuf size, aborting beyond it.
    let p = compile("DECLARE MEM[4]; FOR (R[1] = 0; R[1] < R[0]; R[1]++) R[2]++; ROF RETURN 1;");
    assert!(matches!(p.body()[0], ir::Stmt::Loop { max_trips: 4, .. }));
    let mut mem = vec![0; p.mem_words()];
    mem[p.reg_base()] = 4;
    assert_eq!(p.run(&[], &mut mem), 1);
    mem[p.reg_base()] = 5;
    assert_eq!(p.run(&[], &mut mem), 0);
    assert_eq!(mem[p.reg_base() + 2], 8);
}

#[test]
fn externs_get_their_ranges() {
    let mut ext = Externs::new();
    ext.register(
        "sum",
        3,
        1,
        Arc::new(|i: &[u32], o: &mut [u32], _: &[u8]| {
            o[0] = i.iter().sum();
            7
        }),
    )
    .unwrap();
    ext.register(
        "rev",
        4,
        4,
        Arc::new(|i: &[u32], o: &mut [u32], _: &[u8]| {
            for (k, w) in o.iter_mut().enumerate() {
                *w = i[3 - k];
            }
            0
        }),
    )
    .unwrap();
    let p = Program::compile(
        "DECLARE MEM[8]; MEM[1] = 1; MEM[2] = 2; MEM[3] = 3; R[0] = EXTERN(sum, 1, 0);
         EXTERN(\"rev\", 0, 1);  // overlapping: rev reads a copy
         RETURN R[0];",
        &ext,
    )
    .unwrap();
    let mut mem = vec![0; p.mem_words()];
    assert_eq!(p.run(&[], &mut mem), 7);
    assert_eq!(mem[..5], [6, 3, 2, 1, 6]);
    let e = Program::compile("DECLARE MEM[8]; EXTERN(sum, 6, 0);", &ext).unwrap_err();
    assert!(e.message.contains("input (3 words) words 6..9"), "{e}");
    assert_eq!((e.line, e.col), (1, 29));
    let e = Program::compile("DECLARE MEM[8]; EXTERN(rev, 0, 5);", &ext).unwrap_err();
    assert!(e.message.contains("output"), "{e}");
    assert!(Program::compile("EXTERN(nope, 0, 0);", &ext).is_err());
    assert!(Program::compile("EXTERN(sum, R[0], 0);", &ext).is_err());
    // Without a declaration the MBuf grows to cover the ranges.
    let p = Program::compile("EXTERN(sum, 10, 20);", &ext).unwrap();
    assert_eq!(p.mem_size(), 21);
}

#[test]
fn refusals_name_line_and_column() {
    let cases: &[(&str, u32, u32, &str)] = &[
        ("DECLARE MEM[4];\nMEM[4] = 1;", 2, 5, "outside the MBuf"),
        (
            "DECLARE MEM[4];\nRETURN MEM[PKT.B[0] + 10];",
            2,
            12,
            "at least 10",
        ),
        ("R[32] = 1;", 1, 3, "R[0] to R[31]"),
        ("R[PKT.B[0]] = 1;", 1, 3, "constant"),
        ("FOR (R[0] = 0; 1; R[0]++) ROF", 1, 16, "counts a register"),
        ("FOR (R[0] = 0; R[0] < 9; R[1]++) ROF", 1, 26, "R[0]"),
        (
            "FOR (R[0] = 0; R[0] < 9; R[0] += PKT.B[0]) ROF",
            1,
            34,
            "constant above 0",
        ),
        (
            "FOR (R[0] = 0; R[0] < 9; R[0]++)\n  R[0] = 1;\nROF",
            2,
            3,
            "cannot be assigned",
        ),
        (
            "FOR (R[0] = 0; R[0] < 100000; R[0]++) FOR (R[1] = 0; R[1] < 100; R[1]++) ROF ROF",
            1,
            1,
            "more than the limit",
        ),
        ("BREAK;", 1, 1, "outside a FOR"),
        ("IF 1 THEN RETURN 1;", 1, 20, "FI"),
        ("RETURN HASH(0, PKT.B[0], 4);", 1, 16, "constant"),
        ("RETURN HASH(0, 4, 0);", 1, 19, "above 0"),
        ("RETURN HASH(0, 5000, 4);", 1, 16, "at most"),
        ("RETURN PKT.B[0].U1[8];", 1, 20, "does not exist"),
        ("RETURN PKT.B[0].U16[0];", 1, 17, "no 16-bit parts"),
        ("RETURN PKT.FOO;", 1, 12, "unknown packet field"),
        ("RETURN IP_PROTO;", 1, 8, "PKT.IP_PROTO"),
        ("RETURN x;", 1, 8, "unknown name"),
        ("1 = 2;", 1, 3, "needs a register"),
        ("ROF", 1, 1, "without a matching"),
        ("R[0] = 1", 1, 9, "expected `;`"),
        ("DECLARE MEM[99999999];", 1, 1, "larger than the limit"),
        (
            "EXTERN(GetDynTCPDPortFromRTSP, 0, 0)\n;\n\n  x",
            4,
            3,
            "unknown name",
        ),
    ];
    for (src, line, col, msg) in cases {
        let e = refuse(src);
        assert!(
            (e.line, e.col) == (*line, *col) && e.message.contains(msg),
            "{src:?}: got {e}, want {line}:{col} {msg}"
        );
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let deep = format!("RETURN {}1{};", "(".repeat(10_000), ")".repeat(10_000));
    assert!(refuse(&deep).message.contains("nested"));
    let deep = format!("RETURN {}1;", "!".repeat(10_000));
    assert!(refuse(&deep).message.contains("nested"));
    let long = format!("RETURN 1{};", " + 1".repeat(10_000));
    assert!(refuse(&long).message.contains("nested"));
    let deep = format!("{}{}", "IF 1 THEN ".repeat(10_000), "FI ".repeat(10_000));
    assert!(refuse(&deep).message.contains("nested"));
}

/// Figure 6 as in examples/fpl-figure6.fpl: per-flow TCP packet counts.
#[test]
fn figure6_counts_flows() {
    let src = include_str!("../../../examples/fpl-figure6.fpl");
    let p = compile(src);
    assert_eq!(p.mem_size(), 256);
    let mut mem = vec![0; p.mem_words()];
    let a = tcp(1000, 80, b"x");
    let b = tcp(1001, 80, b"");
    for _ in 0..3 {
        assert_eq!(p.run(&a, &mut mem), 0);
    }
    p.run(&b, &mut mem);
    let mut udp = a.clone();
    udp[23] = 17;
    p.run(&udp, &mut mem);
    p.run(&a[..30], &mut mem); // too short to hash: not counted
    let ha = (hash(&a[26..38]) % 256) as usize;
    let hb = (hash(&b[26..38]) % 256) as usize;
    assert_ne!(ha, hb);
    assert_eq!((mem[ha], mem[hb]), (3, 1));
    assert_eq!(mem[..256].iter().sum::<u32>(), 4);
}

/// Figure 7 as in examples/fpl-figure7.fpl: data packets of RTSP-announced ports.
#[test]
fn figure7_follows_rtsp_ports() {
    let src = include_str!("../../../examples/fpl-figure7.fpl");
    let p = compile(src);
    let mut mem = vec![0; p.mem_words()];
    let data = tcp(7000, 5000, b"rtp");
    assert_eq!(p.run(&data, &mut mem), 0);
    let setup = tcp(
        40000,
        554,
        b"SETUP rtsp://m/v RTSP/1.0\r\nTransport: RTP/AVP/TCP;client_port=5000-5001\r\n\r\n",
    );
    assert_eq!(p.run(&setup, &mut mem), 0);
    assert_eq!(mem[p.reg_base()], 1);
    assert_eq!(mem[0], 5000);
    assert_eq!(p.run(&data, &mut mem), 1);
    assert_eq!(p.run(&tcp(7000, 5001, b""), &mut mem), 0);
    // A second announcement adds a port.
    let setup2 = tcp(
        40001,
        554,
        b"SETUP x RTSP/1.0\r\nTransport: RTP/AVP;client_port=6000\r\n",
    );
    p.run(&setup2, &mut mem);
    assert_eq!(p.run(&tcp(1, 6000, b""), &mut mem), 1);
    assert_eq!(p.run(&data, &mut mem), 1);
    assert_eq!(mem[p.reg_base()], 2);
}

mod no_panics {
    use super::*;
    use proptest::prelude::*;

    /// Pieces of FPL, so that random text gets past the lexer often.
    const PIECES: &[&str] = &[
        "IF ",
        "THEN ",
        "ELSE ",
        "FI ",
        "FOR ",
        "ROF ",
        "BREAK",
        "RETURN ",
        "R[",
        "MEM[",
        "]",
        "(",
        ")",
        ";",
        ",",
        "PKT.B[",
        "PKT.W[",
        "PKT.DW[",
        ".U1[",
        ".U8[",
        "PKT.TCP_DPORT",
        "PKT.IP_PROTO",
        "HASH(",
        "EXTERN(",
        "GetDynTCPDPortFromRTSP",
        "DECLARE MEM[",
        "0",
        "1",
        "7",
        "255",
        "4294967295",
        "+",
        "-",
        "*",
        "/",
        "%",
        "<<",
        ">>",
        "&",
        "|",
        "^",
        "~",
        "!",
        "==",
        "!=",
        "<",
        "<=",
        ">",
        ">=",
        "&&",
        "||",
        "=",
        "+=",
        "++",
        "--",
        "\n",
        " ",
        "PROTO_TCP",
        "TRUE",
        "//x\n",
        "\"s\"",
    ];

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            proptest::collection::vec(proptest::sample::select(PIECES), 0..60)
                .prop_map(|v| v.concat()),
            ".{0,80}",
            // The examples, cut and spliced.
            (0usize..2000, 0usize..2000, ".{0,8}").prop_map(|(a, b, s)| {
                let src = include_str!("../../../examples/fpl-figure7.fpl");
                let cut = |n: usize| {
                    let n = n.min(src.len());
                    (0..=n)
                        .rev()
                        .find(|&k| src.is_char_boundary(k))
                        .unwrap_or(0)
                };
                let (a, b) = (cut(a.min(b)), cut(a.max(b)));
                format!("{}{}{}", &src[..a], s, &src[b..])
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn any_text_compiles_or_errs_inside_it(src in text(), pkt in proptest::collection::vec(any::<u8>(), 0..64)) {
            let limits = Limits { max_work: 20_000, ..Limits::default() };
            match Program::compile_with(&src, &Externs::builtin(), &limits) {
                Err(e) => {
                    prop_assert!(e.line >= 1 && e.col >= 1);
                    prop_assert!(e.line as usize <= src.split('\n').count(), "{e}");
                }
                Ok(p) => {
                    prop_assert!(p.work() <= 20_000);
                    let mut mem = vec![0; p.mem_words().min(1 << 20)];
                    if mem.len() == p.mem_words() {
                        p.run(&pkt, &mut mem);
                        p.run(&[], &mut mem);
                    }
                }
            }
        }
    }
}
