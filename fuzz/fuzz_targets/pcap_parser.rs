//! Fuzzes the pcap filter lexer and parser: any input must give an
//! expression or a `CompileError`, never a panic or a stack overflow.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(e) = sluice_pcap::parser::parse(text) {
            // The error must point inside (or just past) the text.
            assert!(e.span.start <= text.len(), "{e}");
        }
    }
});
