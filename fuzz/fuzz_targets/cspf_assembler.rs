//! Assembles arbitrary text as a CSPF program (the file form, where `;`
//! starts a comment, and the one-line form, where it separates
//! instructions). The input is split at the first NUL: text before, packet
//! bytes after. Any panic is a bug; an assembled program must run, lower
//! to the IR with the interpreter's verdict, and disassemble back to
//! itself.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice_cspf::{assemble, assemble_inline, disassemble, lower};

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    for prog in [assemble(text), assemble_inline(text)]
        .into_iter()
        .flatten()
    {
        let ir = lower(prog.insns());
        let want = prog.run(pkt);
        let got = sluice_ir::eval_pred(&ir, pkt, pkt.len() as u32) == Ok(true);
        assert_eq!(got, want);
        assert_eq!(assemble(&disassemble(&prog)).as_ref(), Ok(&prog));
    }
});
