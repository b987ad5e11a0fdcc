//! Loads arbitrary bytes as CSPF instruction words (big-endian pairs),
//! verifies them and runs them on a packet. The first byte says how many
//! words follow; the rest is the packet. Any panic is a bug; the IR
//! lowering must give the interpreter's verdict on the packet and on every
//! prefix of it, and the disassembly must assemble back to the same words.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_cspf::{assemble, disassemble, lower, Program};

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n as usize * 2).min(rest.len() & !1);
    let words: Vec<u16> = rest[..n]
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]))
        .collect();
    let pkt = &rest[n..];
    let Ok(prog) = Program::from_words(&words) else {
        return;
    };
    let ir = lower(prog.insns());
    for len in 0..=pkt.len() {
        let want = prog.run(&pkt[..len]);
        let got = sluice_ir::eval_pred(&ir, &pkt[..len], len as u32) == Ok(true);
        assert_eq!(got, want, "length {len}");
    }
    let text = disassemble(&prog);
    assert_eq!(
        assemble(&text).expect("disassembly assembles").words(),
        words
    );
});
