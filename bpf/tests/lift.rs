//! Lifting to the IR keeps every program's meaning: the lifted filter
//! returns what the interpreter returns, on libpcap's own programs and on
//! random ones, for packets of every length.

use sluice_bpf::{lift, parse_program, run, Insn, VALID_CODES};
use sluice_testsupport::{corpus, Rng};

const ACCEPT: &str = "libpcap-tests/accept.jsonl";
/// Packets shaped like Ethernet/IPv4/IPv6 headers with random fields, cut at
/// every length, plus random bytes.
fn packets(rng: &mut Rng) -> Vec<(Vec<u8>, u32)> {
    let mut out = Vec::new();
    for round in 0..24 {
        let mut p: Vec<u8> = (0..96).map(|_| rng.next_u64() as u8).collect();
        let ty: u16 = [0x0800, 0x86dd, 0x0806, 0x8100, 0x8847, 0x05dc][round % 6];
        p[12..14].copy_from_slice(&ty.to_be_bytes());
        p[14] = if round % 2 == 0 { 0x45 } else { 0x60 };
        p[23] = [6, 17, 1, 132][round % 4];
        p[20] = [6, 17, 58, 44][(round / 4) % 4];
        for len in (0..=p.len()).step_by(1 + round % 3) {
            out.push((p[..len].to_vec(), p.len() as u32));
        }
    }
    out
}

#[test]
fn libpcaps_programs_lift_exactly() {
    let Some(text) = corpus::text(ACCEPT) else {
        corpus::skipped(ACCEPT);
        return;
    };
    let mut rng = Rng::new(0x9e3779b97f4a7c15);
    let pkts = packets(&mut rng);
    let (mut lifted, mut total) = (0, 0);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let Some(prog) = v["expected_bpf"]
            .as_str()
            .and_then(|t| parse_program(t).ok())
        else {
            continue;
        };
        total += 1;
        let Ok(f) = lift(&prog) else { continue };
        lifted += 1;
        for (p, w) in &pkts {
            assert_eq!(f.run(p, *w), run(&prog, p, *w), "{} on {p:02x?}", v["id"]);
        }
    }
    eprintln!("{lifted} of {total} libpcap programs lifted");
    assert!(lifted * 10 >= total * 9, "only {lifted} of {total} lifted");
}

fn random_program(rng: &mut Rng) -> Vec<Insn> {
    let len = 2 + rng.below(20);
    let accept = 1 + rng.below(3) as u32;
    let mut prog = Vec::new();
    while prog.len() < len - 1 {
        let remaining = len - 1 - prog.len();
        let code = VALID_CODES[rng.below(VALID_CODES.len())];
        // Returns of A/X and of other constants are not liftable: keep the
        // random programs liftable so the comparison is exercised.
        if code & 0x07 == 0x06 {
            continue;
        }
        let mut i = Insn::jump(
            code,
            [0, 1, 12, 14, 23, 40, 0x800, 6, 0xffff_fff0][rng.below(9)],
            0,
            0,
        );
        match code {
            0x05 => i.k = rng.below(remaining) as u32,
            c if c & 0x07 == 0x05 => {
                i.jt = rng.below(remaining.min(256)) as u8;
                i.jf = rng.below(remaining.min(256)) as u8;
            }
            0x60 | 0x61 | 0x02 | 0x03 => i.k = rng.below(16) as u32,
            _ => {}
        }
        prog.push(i);
    }
    prog.push(Insn::stmt(0x06, if rng.below(3) == 0 { 0 } else { accept }));
    // Branches may reach returns of 0 or `accept` only: patch other rets.
    prog
}

#[test]
fn random_programs_lift_exactly() {
    let mut rng = Rng::new(12345);
    let pkts = packets(&mut rng);
    let mut lifted = 0;
    for _ in 0..3000 {
        let prog = random_program(&mut rng);
        let Ok(f) = lift(&prog) else { continue };
        lifted += 1;
        for (p, w) in pkts.iter().step_by(7) {
            assert_eq!(f.run(p, *w), run(&prog, p, *w), "{prog:?} on {p:02x?}");
        }
    }
    assert!(lifted > 1000, "only {lifted} random programs lifted");
}
