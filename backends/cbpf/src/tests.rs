//! Lowering must agree with the IR's reference interpreter on every packet.

use proptest::prelude::*;
use sluice_bpf::{op::*, run, Verifier};
use sluice_ir::{BinOp, Filter, Pred, Size, Val};

use crate::{lower, lower_with, Insn, LowerError, Options};

const ACCEPT: u32 = 262144;
const NO_OPT: Options = Options { optimize: false };

fn both(f: &Filter) -> [(bool, Result<Vec<Insn>, LowerError>); 2] {
    [
        (false, lower_with(f, NO_OPT)),
        (true, lower_with(f, Options::default())),
    ]
}

/// Programs pass the kernel's checks (but for their length), unless they
/// contain `protochain`'s backward jump, which only userland accepts.
fn verify(prog: &[Insn]) {
    let backward = prog
        .iter()
        .enumerate()
        .any(|(pc, i)| i.code == BPF_JMP | BPF_JA && (pc as u32 + 1).checked_add(i.k).is_none());
    let v = if backward {
        Verifier::userland()
    } else {
        Verifier::kernel().max_len(usize::MAX)
    };
    if let Err(e) = v.verify(prog) {
        panic!("{e}\n{}", sluice_bpf::disasm_d(prog));
    }
}

/// Check the lowered programs on every prefix of `pkt`, with two wire lengths.
fn check_on(f: &Filter, progs: &[(bool, Result<Vec<Insn>, LowerError>)], pkt: &[u8]) {
    for cut in 0..=pkt.len() {
        let p = &pkt[..cut];
        for wirelen in [cut as u32, pkt.len() as u32 + 7] {
            let want = f.run(p, wirelen);
            for (opt, prog) in progs {
                let got = match prog {
                    Ok(prog) => run(prog, p, wirelen),
                    Err(LowerError::RejectsAll) if *opt => 0,
                    // libpcap's optimiser refuses its arithmetic: no program.
                    Err(LowerError::Refused(_)) if *opt => continue,
                    Err(e) => panic!("lowering failed: {e}"),
                };
                assert_eq!(
                    got,
                    want,
                    "optimize={opt} len={cut} wirelen={wirelen}\nfilter {:?}\npacket {:02x?}\n{}",
                    f.pred,
                    p,
                    prog.as_ref()
                        .map(|p| sluice_bpf::disasm_d(p))
                        .unwrap_or_default()
                );
            }
        }
    }
}

fn check(f: &Filter, pkts: &[Vec<u8>]) {
    let progs = both(f);
    for p in progs.iter().filter_map(|p| p.1.as_ref().ok()) {
        verify(p);
    }
    for pkt in pkts {
        check_on(f, &progs, pkt);
    }
}

#[test]
fn hand_built_filters() {
    let pkts = sample_packets();
    for (i, pred) in shared_filters().into_iter().enumerate() {
        check(&Filter::new(pred, ACCEPT + i as u32), &pkts);
    }
}

fn protochain(v6: bool, start: Val, proto: u8) -> Pred {
    Pred::ProtoChain { v6, start, proto }
}

#[test]
fn protochain_matches_ir() {
    let mut pkts = sample_packets();
    // IPv6 + hop-by-hop + routing + AH + TCP.
    let mut p = vec![0u8; 120];
    p[12] = 0x86;
    p[13] = 0xdd;
    p[20] = 0; // hop-by-hop
    p[54] = 43; // routing
    p[55] = 0; // 8 bytes
    p[62] = 51; // AH
    p[63] = 0;
    p[70] = 6;
    p[71] = 4; // AH length
    pkts.push(p.clone());
    // AH pointing at itself (IR aborts after 65536 steps).
    let mut q = vec![0u8; 40];
    q[14] = 0x45;
    q[23] = 51;
    q[14 + 8] = 51;
    q[14 + 9] = 0;
    pkts.push(q);
    let mut v4 = vec![0u8; 80];
    v4[14] = 0x45;
    v4[23] = 51;
    v4[34] = 59;
    v4[35] = 1;
    pkts.push(v4);
    for v6 in [false, true] {
        for proto in [6, 17, 51, 59, 0, 43] {
            for start in [
                Val::Const(14),
                Val::Const(u32::MAX),
                bin(BinOp::Add, Val::Const(10), ld(0, Size::Byte)),
                bin(BinOp::Add, Val::Const(u32::MAX - 10), ld(0, Size::Byte)),
            ] {
                let f = Filter::new(protochain(v6, start.clone(), proto), ACCEPT);
                check(&f, &pkts);
                let f = Filter::new(
                    Pred::And(vec![
                        ether_type(if v6 { 0x86dd } else { 0x800 }),
                        protochain(v6, start, proto),
                    ]),
                    ACCEPT,
                );
                check(&f, &pkts);
            }
        }
    }
}

#[test]
fn libpcap_shape() {
    // ether[12:2] == 0x86dd or ether[12:2] == 0x800: the second test reuses A.
    let f = Filter::new(
        Pred::Or(vec![ether_type(0x86dd), ether_type(0x800)]),
        ACCEPT,
    );
    let prog = lower(&f).unwrap();
    assert_eq!(
        sluice_bpf::disasm_d(&prog),
        "(000) ldh      [12]\n\
         (001) jeq      #0x86dd          jt 3\tjf 2\n\
         (002) jeq      #0x800           jt 3\tjf 4\n\
         (003) ret      #262144\n\
         (004) ret      #0\n"
    );
    // The IP header length uses ldxb.
    let f = Filter::new(
        eq(Val::load(Val::ip_hdr_len(14), 16, Size::Half), 80),
        ACCEPT,
    );
    let prog = lower(&f).unwrap();
    assert_eq!(prog[0], Insn::stmt(BPF_LDX | BPF_B | BPF_MSH, 14));
    assert_eq!(prog[1], Insn::stmt(BPF_LD | BPF_H | BPF_IND, 16));
}

#[test]
fn rejects_all() {
    let f = Filter::new(
        Pred::And(vec![ether_type(0x800), ether_type(0x86dd)]),
        ACCEPT,
    );
    assert_eq!(lower(&f), Err(LowerError::RejectsAll));
    assert!(lower_with(&f, NO_OPT).is_ok());
    assert_eq!(
        lower(&Filter::new(Pred::False, 1)),
        Err(LowerError::RejectsAll)
    );
    // A test that can abort is not a rejection of everything.
    let f = Filter::new(Pred::not(ether_type(0x800)), ACCEPT);
    assert!(lower(&f).is_ok());
}

#[test]
fn too_complex() {
    // Sums whose both sides need scratch, nested on both sides: one scratch
    // word per level whichever side goes first.
    let leaf = |i: u32| bin(BinOp::Add, ld(i, Size::Byte), ld(i + 1, Size::Byte));
    let deep = |n: u32| {
        let mut v = leaf(0);
        for i in 0..n {
            v = bin(BinOp::Add, bin(BinOp::Add, leaf(i), leaf(i + 1)), v);
            v = bin(BinOp::Add, v, bin(BinOp::Add, leaf(i), leaf(i + 2)));
        }
        v
    };
    // Balanced trees need log2(leaves) words.
    fn balanced(n: u32, at: u32) -> Val {
        if n == 0 {
            bin(BinOp::Add, ld(at, Size::Byte), ld(at + 1, Size::Byte))
        } else {
            bin(BinOp::Sub, balanced(n - 1, at), balanced(n - 1, at + 2))
        }
    }
    let f = Filter::new(eq(balanced(17, 0), 0), 1);
    assert_eq!(lower(&f), Err(LowerError::TooComplex));
    let f = Filter::new(eq(balanced(5, 0), 0), 1);
    check(&f, &sample_packets());
    // Long chains need few words: the deeper side goes first.
    let f = Filter::new(eq(deep(40), 0), 1);
    let prog = lower(&f).unwrap();
    assert!(prog.iter().all(|i| i.code != BPF_ST || i.k < 3));
    check(&f, &sample_packets());
    // Right-nested sums with simple left sides need none.
    let mut v = ld(0, Size::Byte);
    for i in 0..20 {
        v = bin(BinOp::Add, ld(i, Size::Byte), v);
    }
    let f = Filter::new(eq(v, 0), 1);
    let prog = lower(&f).unwrap();
    assert!(prog.iter().all(|i| i.code != BPF_ST));
    check(&f, &sample_packets());
}

/// `host a_1 or ... or host a_n`, each guarded by the ethertype test.
fn many_hosts(n: u32) -> Filter {
    Filter::new(
        Pred::Or((0..n).map(|i| host(0x0a00_0000 + i)).collect()),
        ACCEPT,
    )
}

/// Every jump stays inside the program and goes forward.
fn assert_forward(prog: &[Insn]) {
    for (pc, i) in prog.iter().enumerate() {
        if i.code & 0x07 == BPF_JMP {
            if i.code == BPF_JMP | BPF_JA {
                assert!(pc + 1 + (i.k as usize) < prog.len());
            } else {
                assert!(pc + 1 + (i.jt.max(i.jf) as usize) < prog.len());
            }
        }
    }
}

#[test]
fn long_jumps_through_ja() {
    // The `or`'s true edges all go to the final test, far away: `ja`.
    let f = Filter::new(
        Pred::And(vec![
            Pred::Or((0..300).map(|i| eq(ld(26, Size::Word), i)).collect()),
            eq(ld(14, Size::Byte), 0x45),
        ]),
        ACCEPT,
    );
    let mut pkts = sample_packets();
    for i in [0u32, 1, 299, 300] {
        let mut p = pkts[0].clone();
        p[26..30].copy_from_slice(&i.to_be_bytes());
        pkts.push(p.clone());
        p[14] = 0x46;
        pkts.push(p);
    }
    for (_, prog) in both(&f) {
        let prog = prog.unwrap();
        assert_forward(&prog);
        assert!(prog.iter().any(|i| i.code == BPF_JMP | BPF_JA));
    }
    check(&f, &pkts);
}

#[test]
fn long_jumps() {
    let f = many_hosts(300);
    let mut pkts = sample_packets();
    for i in [0u32, 1, 150, 299, 300] {
        let mut p = pkts[0].clone();
        p[30..34].copy_from_slice(&(0x0a00_0000 + i).to_be_bytes());
        pkts.push(p.clone());
        p[26..30].copy_from_slice(&(0x0a00_0000 + i).to_be_bytes());
        pkts.push(p);
    }
    for (opt, prog) in both(&f) {
        let prog = prog.unwrap();
        assert!(prog.len() > 600, "optimize={opt}: {}", prog.len());
        assert_forward(&prog);
        // Far jumps to `ret` go to nearby copies of it.
        assert!(prog.iter().filter(|i| i.code == BPF_RET | BPF_K).count() > 2);
    }
    for pkt in &pkts {
        check_on(&f, &both(&f), pkt);
    }
}

#[test]
fn optimiser_removes_repeated_guards() {
    let f = many_hosts(50);
    let plain = lower_with(&f, NO_OPT).unwrap();
    let opt = lower(&f).unwrap();
    let guards = |p: &[Insn]| p.iter().filter(|i| **i == Insn::stmt(0x28, 12)).count();
    println!(
        "50 hosts: {} insns unoptimised, {} optimised; ldh [12]: {} vs {}",
        plain.len(),
        opt.len(),
        guards(&plain),
        guards(&opt)
    );
    assert!(opt.len() < plain.len());
    assert_eq!(guards(&opt), 1);
    assert_eq!(guards(&plain), 50);
}

#[test]
fn hundred_thousand_terms() {
    let f = many_hosts(100_000);
    for opts in [Options::default(), NO_OPT] {
        let t = std::time::Instant::now();
        let prog = lower_with(&f, opts).unwrap();
        println!(
            "100000 hosts, optimize={}: {} insns in {:?}",
            opts.optimize,
            prog.len(),
            t.elapsed()
        );
        let mut pkt = sample_packets()[0].clone();
        assert_eq!(run(&prog, &pkt, 80), ACCEPT); // 10.0.0.1
        pkt[26..30].copy_from_slice(&[10, 1, 0x86, 0x9f]); // 10.1.134.159 = 99999
        pkt[30..34].copy_from_slice(&[1, 1, 1, 1]);
        assert_eq!(run(&prog, &pkt, 80), ACCEPT);
        pkt[29] = 0xa0;
        assert_eq!(run(&prog, &pkt, 80), 0);
        pkt[12] = 0x86;
        assert_eq!(run(&prog, &pkt, 80), 0);
    }
}

// ---------------------------------------------------------------- random

use sluice_ir::arbitrary::{
    bin, eq, ether_type, hand_built_filters as shared_filters, host, ld, packet as arb_packet,
    pred as arb_pred, sample_packets,
};

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(768),
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_filters_agree_with_ir(
        pred in arb_pred(),
        accept in prop_oneof![Just(ACCEPT), 1u32..],
        pkts in prop::collection::vec(arb_packet(), 3),
    ) {
        let f = Filter::new(pred, accept);
        let progs = both(&f);
        for (opt, p) in &progs {
            match p {
                Err(e) => prop_assert!(
                    *opt && matches!(e, LowerError::RejectsAll | LowerError::Refused(_)),
                    "{e}"
                ),
                Ok(p) => verify(p),
            }
        }
        for pkt in &pkts {
            check_on(&f, &progs, pkt);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256) / 8,
        ..ProptestConfig::default()
    })]

    /// Big random filters: their programs need trampolines.
    #[test]
    fn big_random_filters_agree_with_ir(
        ps in prop::collection::vec(arb_pred(), 60..150),
        and in any::<bool>(),
        pkts in prop::collection::vec(arb_packet(), 2),
    ) {
        let pred = if and { Pred::And(ps) } else { Pred::Or(ps) };
        let f = Filter::new(Pred::not(pred), ACCEPT);
        let progs = both(&f);
        for (opt, p) in &progs {
            match p {
                Err(e) => prop_assert!(
                    *opt && matches!(e, LowerError::RejectsAll | LowerError::Refused(_)),
                    "{e}"
                ),
                Ok(p) => verify(p),
            }
        }
        for pkt in &pkts {
            check_on(&f, &progs, pkt);
        }
    }
}

#[test]
fn sets_lower_to_search_trees_that_agree_with_the_ir() {
    // Sets of every size around the chain/tree boundary, values inside,
    // between and outside the keys, on every packet length.
    for n in [2usize, 3, 4, 5, 8, 9, 31, 100] {
        let keys: Vec<u32> = (0..n as u32).map(|i| i * 7 + 3).collect();
        let word = ld(10, Size::Word);
        let set = Pred::is_in(word.clone(), keys.clone());
        let filters = [
            Filter::new(set.clone(), 1),
            Filter::new(Pred::not(set.clone()), 1),
            Filter::new(Pred::or(vec![eq(ld(0, Size::Byte), 9), set.clone()]), 1),
            Filter::new(Pred::and(vec![set, eq(ld(14, Size::Byte), 1)]), 1),
        ];
        let mut pkts = Vec::new();
        for v in [
            0u32,
            3,
            4,
            10,
            keys[n / 2],
            keys[n - 1],
            keys[n - 1] + 1,
            u32::MAX,
        ] {
            let mut p = [1u8; 15];
            p[10..14].copy_from_slice(&v.to_be_bytes());
            for len in 0..=p.len() {
                pkts.push(p[..len].to_vec());
            }
        }
        for f in &filters {
            check(f, &pkts);
        }
        let prog = crate::lower(&filters[0]).unwrap();
        if n > 8 {
            assert!(
                prog.len() < 2 * n + 8,
                "{} instructions for {n} keys",
                prog.len()
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(2048),
        ..ProptestConfig::default()
    })]

    /// The quick proof that libpcap keeps a program (a path its optimiser
    /// cannot cut) never keeps one the model of that optimiser refuses.
    #[test]
    fn the_quick_proof_never_keeps_what_the_model_refuses(
        ps in prop::collection::vec(arb_pred(), 1..4),
        arithmetic in any::<bool>(),
    ) {
        // Contradictions are likelier with a few operands on one pool.
        let pred = Pred::and(ps);
        let f = Filter::new(pred, ACCEPT);
        if crate::keeps::keeps(&f.pred, arithmetic, 10_000) == Some(true) {
            let model = crate::refuse::model(&f, arithmetic);
            prop_assert!(
                !matches!(model, Err(LowerError::RejectsAll)),
                "kept, but the model refuses {:?}", f.pred
            );
        }
    }
}

/// Values held once (`Val::Shared`, nested tunnels' offsets) are computed
/// once per path into a scratch word and reused where every path to a use
/// computed them; the program stays small where copies would grow
/// exponentially, and means what the IR means on every truncation.
#[test]
fn shared_values_are_computed_once_per_path() {
    // Each level reads at the last one twice and adds it.
    let mut v = ld(0, Size::Byte);
    let mut levels = Vec::new();
    for _ in 0..10 {
        let s = Val::shared(v);
        levels.push(s.clone());
        v = bin(
            BinOp::Add,
            Val::load(s.clone(), 1, Size::Byte),
            bin(BinOp::And, s, Val::Const(3)),
        );
    }
    let deep = Val::shared(v);
    let first = ld(2, Size::Byte);
    let filters = [
        // Used once, then again after a branch that computed it on one
        // side only: the second use must compute it again.
        Pred::and(vec![
            Pred::or(vec![eq(first.clone(), 1), eq(deep.clone(), 7)]),
            Pred::cmp(
                sluice_ir::CmpOp::Gt,
                bin(BinOp::Add, deep.clone(), Val::Const(1)),
                Val::Const(5),
            ),
        ]),
        // Computed on every path before its second use.
        Pred::and(vec![
            Pred::not(eq(deep.clone(), 3)),
            Pred::or(vec![
                eq(first, 4),
                Pred::cmp(
                    sluice_ir::CmpOp::Set,
                    Val::load(levels[4].clone(), 0, Size::Half),
                    Val::Const(0x0101),
                ),
            ]),
            Pred::cmp(sluice_ir::CmpOp::Gt, Val::Len, deep.clone()),
        ]),
    ];
    let pkt: Vec<u8> = (0..40u32).map(|i| ((i * 7 + 1) % 5) as u8).collect();
    let mut pkts = Vec::new();
    for n in 0..=pkt.len() {
        pkts.push(pkt[..n].to_vec());
        let mut q = pkt[..n].to_vec();
        q.iter_mut().for_each(|b| *b ^= 1);
        pkts.push(q);
    }
    for p in filters {
        let f = Filter::new(p, ACCEPT);
        let accepted = pkts.iter().filter(|p| f.run(p, 60) != 0).count();
        assert!(accepted > 0 && accepted < pkts.len(), "{accepted}");
        check(&f, &pkts);
        let prog = crate::lower_with(&f, Options { optimize: false }).unwrap();
        assert!(prog.len() < 400, "{} instructions", prog.len());
    }
}

/// Every lowering is bounded: past the limit it stops with an error.
#[test]
fn programs_past_the_limit_are_refused() {
    let big = Pred::Or((0..200).map(|k| eq(ld(k % 60, Size::Byte), k)).collect());
    let f = Filter::new(big, ACCEPT);
    let dag = crate::dag::Dag::build(&f);
    let full = crate::emit::emit(&dag, false).unwrap();
    assert!(full.len() > 300);
    assert_eq!(
        crate::emit::emit_at_most(&dag, false, 300),
        Err(LowerError::TooLarge)
    );
    assert_eq!(
        crate::emit::emit_at_most(&dag, false, full.len()).unwrap(),
        full
    );
}
