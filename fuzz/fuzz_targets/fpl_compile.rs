//! Fuzzes the FPL parser and checker: any input must give a program or an
//! `Error` whose position lies inside the text, never a panic or a stack
//! overflow; a program that compiles must run on a few packets (including
//! the input's own bytes) without panicking and within its work bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_fpl::{Externs, Limits, Program};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A small work limit keeps each run short.
    let limits = Limits {
        max_work: 100_000,
        ..Limits::default()
    };
    match Program::compile_with(text, &Externs::builtin(), &limits) {
        Err(e) => {
            let lines = text.lines().count().max(1) as u32;
            assert!(e.line >= 1 && e.line <= lines + 1, "{e}");
            assert!(e.col >= 1, "{e}");
        }
        Ok(p) => {
            if p.mem_words() > 1 << 20 {
                return;
            }
            let mut mem = vec![0u32; p.mem_words()];
            for pkt in [&[][..], &[0x45; 60][..], data] {
                p.run(pkt, &mut mem);
            }
        }
    }
});
