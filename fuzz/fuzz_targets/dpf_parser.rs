//! Parses arbitrary text as a DPF filter and canonicalises it. The input is
//! split at the first NUL: text before, packet bytes after. Any panic is a
//! bug; the canonical IR must give the interpreter's verdict on the packet
//! and every prefix of it, and the printed filter must parse back to the
//! same atoms.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice_dpf::{canonical, parse};

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let Ok(f) = parse(text) else {
        return;
    };
    let ir = canonical(&f);
    for len in 0..=pkt.len() {
        let want = f.run(&pkt[..len]);
        let got = sluice_ir::eval_pred(&ir, &pkt[..len], len as u32) == Ok(true);
        assert_eq!(got, want, "length {len}");
    }
    assert_eq!(parse(&f.to_string()).as_ref(), Ok(&f));
});
