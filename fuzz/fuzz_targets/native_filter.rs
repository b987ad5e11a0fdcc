//! Compiles arbitrary text as a pcap filter expression, then to machine
//! code, and runs the machine code on the packet and on every truncation of
//! it, one call at a time and as one batch. The input is split at the
//! first NUL: expression text before, packet bytes after. The machine code
//! must equal the IR reference interpreter on every one (the settled tests,
//! byte-order compares, coalesced atoms and aggregated length checks of the
//! native back end included); any panic is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice::{LinkType, Program};

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let wirelen = pkt.len() as u32 + 2;
    for lt in [LinkType::EN10MB, LinkType::RAW] {
        let Ok(p) = Program::builder(lt).snaplen(65535).expression(text) else {
            continue;
        };
        let Some(n) = p.native() else {
            continue;
        };
        let cuts: Vec<(&[u8], u32)> = (0..=pkt.len()).map(|l| (&pkt[..l], wirelen)).collect();
        let mut batch = vec![0; cuts.len()];
        n.run_batch(&cuts, &mut batch);
        for ((cut, w), b) in cuts.iter().zip(&batch) {
            let want = p.run_reference(cut, *w);
            assert_eq!(
                n.run(cut, *w),
                want,
                "native vs reference: {text:?} on {lt}"
            );
            assert_eq!(*b, want, "native batch vs reference: {text:?} on {lt}");
        }
    }
});
