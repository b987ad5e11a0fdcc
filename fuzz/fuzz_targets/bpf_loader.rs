//! Parses arbitrary bytes as a BPF program text (any of tcpdump's -d, -dd,
//! -ddd forms), verifies it and runs it on a packet. The input is split at
//! the first NUL: text before, packet bytes after. Any panic is a bug; the
//! checking interpreter and the verified fast path must agree, and the text
//! forms must round-trip.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice_bpf::{disasm_d, disasm_ddd, parse_program, run, Verifier};

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let Ok(prog) = parse_program(text) else {
        return;
    };
    let wirelen = pkt.len() as u32 + 4;
    let result = run(&prog, pkt, wirelen);
    let _ = Verifier::kernel().verify(&prog);
    if let Ok(v) = Verifier::userland().validate(&prog) {
        assert_eq!(v.run(pkt, wirelen), result);
    }
    assert_eq!(parse_program(&disasm_ddd(&prog)).ok().as_ref(), Some(&prog));
    if !prog.is_empty() {
        let d = disasm_d(&prog);
        let back = parse_program(&d).expect("-d output parses");
        assert_eq!(disasm_d(&back), d);
    }
});
