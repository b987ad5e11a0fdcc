//! The eBPF back end against the IR's reference interpreter, in the
//! kernel (`BPF_PROG_TEST_RUN`). Where the kernel refuses BPF for lack of
//! privilege the tests say SKIPPED, unless `SLUICE_LIVE_REQUIRED` is set.

use super::*;
use proptest::prelude::*;
use sluice_ir::arbitrary;
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// Load `f`, or None (after saying SKIPPED) where BPF is not permitted.
fn load(f: &Filter) -> Option<Loaded> {
    match Loaded::compile(f, Mode::TestRun) {
        Ok(p) => Some(p),
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
            None
        }
        Err(e) => panic!("{e}\nprogram:\n{}", dump(&lower(f, Mode::TestRun).unwrap())),
    }
}

/// The packets each filter meets: the sample packets, cut at every length
/// up to 60 bytes, and the random one.
fn packets(extra: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for p in arbitrary::sample_packets()
        .into_iter()
        .chain([extra.to_vec()])
    {
        for cut in [0, 1, 9, 13, 14, 15, 20, 23, 34, 35, 38, 40, 54, 58] {
            if cut < p.len() {
                out.push(p[..cut].to_vec());
            }
        }
        out.push(p);
    }
    out
}

fn agree(f: &Filter, pkts: &[Vec<u8>]) {
    let Some(prog) = load(f) else { return };
    for p in pkts {
        for wirelen in [p.len() as u32, p.len() as u32 + 100] {
            let want = f.run(p, wirelen);
            let got = prog
                .run(p, wirelen)
                .unwrap_or_else(|e| panic!("{e}: packet of {} bytes, wirelen {wirelen}", p.len()));
            assert_eq!(
                got,
                want,
                "filter {:?}\npacket {p:02x?} wirelen {wirelen}\n{}",
                f.pred,
                dump(&lower(f, Mode::TestRun).unwrap())
            );
        }
    }
}

#[test]
fn hand_built_filters_agree_with_the_interpreter() {
    let pkts = packets(&[]);
    for p in arbitrary::hand_built_filters() {
        agree(&Filter::new(p, 262144), &pkts);
    }
}

#[test]
fn every_form_agrees_with_the_interpreter() {
    let b = |x: u32| Val::load_abs(x, Size::Byte);
    let h = |x: u32| Val::load_abs(x, Size::Half);
    let var = Val::ip_hdr_len(14);
    let shared = Val::shared(Val::plus(var.clone(), 14));
    let mut ps = vec![
        Pred::eq(Val::Len, 60),
        Pred::cmp(CmpOp::Gt, Val::Len, h(16)),
        Pred::cmp(CmpOp::Set, b(14), Val::Const(0x40)),
        Pred::eq(Val::load(shared.clone(), 2, Size::Half), 80),
        Pred::And(vec![
            Pred::eq(Val::load(shared.clone(), 0, Size::Half), 80),
            Pred::eq(Val::load(shared.clone(), 2, Size::Word), 80),
        ]),
        Pred::is_in(h(12), vec![0x800, 0x86dd, 0x806, 1, 2, 3, 4, 5, 6, 7, 8]),
        Pred::not(Pred::eq(Val::load_abs(u32::MAX - 1, Size::Byte), 0)),
        Pred::eq(Val::load(Val::Const(u32::MAX), 4, Size::Byte), 0),
        Pred::eq(Val::load(b(14), u32::MAX, Size::Byte), 0),
        Pred::eq(Val::Neg(Box::new(b(20))), 0),
    ];
    for op in BinOp::ALL {
        for k in [0, 1, 3, 31, 32, 40] {
            let c = Val::Bin(op, Box::new(h(12)), Box::new(Val::Const(k)));
            ps.push(Pred::cmp(CmpOp::Ge, c, Val::Const(0x100)));
            let x = Val::Bin(
                op,
                Box::new(h(12)),
                Box::new(Val::bin(BinOp::And, b(23), Val::Const(k))),
            );
            ps.push(Pred::cmp(CmpOp::Gt, x, b(22)));
        }
    }
    for v6 in [false, true] {
        for proto in [6, 17, 51, 59, 0] {
            ps.push(Pred::ProtoChain {
                v6,
                start: Val::Const(14),
                proto,
            });
            ps.push(Pred::ProtoChain {
                v6,
                start: b(0),
                proto,
            });
        }
    }
    let pkts = packets(&[]);
    for p in ps {
        agree(&Filter::new(p, 96), &pkts);
    }
}

#[test]
fn a_cyclic_protochain_aborts() {
    // IPv4 with AH whose length points back at itself.
    let mut p = vec![0u8; 60];
    p[14] = 0x45;
    p[23] = 51;
    p[34] = 51; // next header: AH again
    p[35] = 3; // (3 + 2) * 4 = 20: the same AH header
    for proto in [6, 51] {
        let f = Filter::new(
            Pred::ProtoChain {
                v6: false,
                start: Val::Const(14),
                proto,
            },
            1,
        );
        agree(&f, &[p.clone()]);
    }
}

#[test]
fn a_refusal_carries_the_verifiers_log() {
    match Loaded::load(&[Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)], Mode::TestRun) {
        Err(Error::Refused(_, log)) => assert!(log.contains("R0 !read_ok"), "{log}"),
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED: the kernel refuses BPF here ({e})")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_dump_reads_like_bpftool() {
    let f = Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 262144);
    // Programs copy the frame's first bytes to the stack and read there;
    // past them, socket filters use LD_ABS, test runs and XDP read the
    // packet directly; then to host order.
    let text = dump(&lower(&f, Mode::Socket).unwrap());
    assert!(text.contains("call bpf_skb_load_bytes#26"), "{text}");
    assert!(text.contains("r0 = *(u16 *)(r10 -490)"), "{text}");
    let far = Filter::new(Pred::eq(Val::load_abs(80, Size::Half), 1), 1);
    let text = dump(&lower(&far, Mode::Socket).unwrap());
    assert!(text.contains("r0 = ntoh(*(u16 *)skb[80])"), "{text}");
    let text = dump(&lower(&far, Mode::TestRun).unwrap());
    assert!(text.contains("r0 = *(u16 *)(r2 +80)"), "{text}");
    assert!(text.contains("r0 = be16 r0"), "{text}");
    let text = dump(&lower(&f, Mode::TestRun).unwrap());
    assert!(text.contains("if w0 == 0x800 goto pc+"), "{text}");
    assert!(text.contains("w0 = 262144"), "{text}");
    let text = dump(&lower(&f, Mode::Xdp).unwrap());
    assert!(text.contains("call bpf_xdp_load_bytes#189"), "{text}");
}

/// An XDP program passes exactly the frames the filter accepts (XDP's
/// test run takes frames of 14 bytes or more, captured whole).
fn xdp_agrees(f: &Filter, pkts: &[Vec<u8>]) {
    let prog = match Loaded::compile(f, Mode::Xdp) {
        Ok(p) => p,
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
            return;
        }
        Err(e) => panic!("{e}\nprogram:\n{}", dump(&lower(f, Mode::Xdp).unwrap())),
    };
    for p in pkts.iter().filter(|p| p.len() >= 14) {
        let want = match f.run(p, p.len() as u32) {
            0 => 1,
            _ => 2,
        };
        let got = prog.run_xdp(p).unwrap();
        assert_eq!(got, want, "filter {:?}\npacket {p:02x?}", f.pred);
    }
}

#[test]
fn xdp_programs_pass_what_the_interpreter_accepts() {
    for p in arbitrary::hand_built_filters() {
        xdp_agrees(&Filter::new(p, 262144), &packets(&[]));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_filters_agree_with_the_interpreter(p in arbitrary::pred(), pkt in arbitrary::packet()) {
        agree(&Filter::new(p, 1), &packets(&pkt));
    }

    #[test]
    fn random_xdp_programs_agree_with_the_interpreter(p in arbitrary::pred(), pkt in arbitrary::packet()) {
        xdp_agrees(&Filter::new(p, 1), &packets(&pkt));
    }
}

#[test]
fn cooked_loads_read_the_socket_buffer_or_pass() {
    let ld = |off, size| Val::load_abs(off, size);
    // Cooked v2: the protocol from skb->protocol (swapped), the packet
    // type from skb->pkt_type, the port past the 20-byte header at 22 - 20.
    let f = Filter::new(
        Pred::and(vec![
            Pred::eq(ld(0, Size::Half), 0x800),
            Pred::eq(ld(10, Size::Byte), 0),
            Pred::eq(ld(42, Size::Half), 80),
        ]),
        262144,
    );
    let text = dump(&lower_for_link(&f, Mode::Socket, 276).unwrap());
    assert!(text.contains("r0 = *(u32 *)(r6 +16)\n"), "{text}");
    assert!(text.contains("r0 = be16 r0"), "{text}");
    assert!(text.contains("r0 = *(u32 *)(r6 +4)\n"), "{text}");
    assert!(text.contains("skb[22]"), "{text}");
    // The captured length counts the header the kernel's frame lacks.
    assert!(text.contains("r7 += 20"), "{text}");
    // The hardware type is not in the socket buffer: the packet passes.
    let hatype = Filter::new(Pred::eq(ld(8, Size::Half), 1), 262144);
    let text = dump(&lower_for_link(&hatype, Mode::Socket, 276).unwrap());
    assert!(!text.contains("skb["), "{text}");
    // Cooked v1: the protocol at 14, the packet type at 0 (two bytes).
    let v1 = Filter::new(Pred::eq(ld(14, Size::Half), 0x86dd), 262144);
    let text = dump(&lower_for_link(&v1, Mode::Socket, 113).unwrap());
    assert!(text.contains("r0 = *(u32 *)(r6 +16)\n"), "{text}");
    // Ethernet, and other modes: as lower() builds them.
    assert_eq!(
        lower_for_link(&f, Mode::Socket, 1).unwrap(),
        lower(&f, Mode::Socket).unwrap()
    );
    assert_eq!(
        lower_for_link(&f, Mode::TestRun, 276).unwrap(),
        lower(&f, Mode::TestRun).unwrap()
    );
}

#[test]
fn socket_filters_verify() {
    for p in arbitrary::hand_built_filters() {
        let f = Filter::new(p, 262144);
        for linktype in [113, 276] {
            if let Err(e) = Loaded::compile_for_link(&f, Mode::Socket, linktype) {
                if !matches!(e, Error::NotPermitted(_)) {
                    panic!("cooked {linktype}: {e}");
                }
            }
        }
        match Loaded::compile(&f, Mode::Socket) {
            Ok(_) => {}
            Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
                eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
                return;
            }
            Err(e) => panic!("{e}"),
        }
    }
}
