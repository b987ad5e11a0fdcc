//! Compiles arbitrary text as a pcap filter expression for several link
//! types, optimised and not, and runs every program that compiles on a
//! packet. The input is split at the first NUL: expression text before,
//! packet bytes after. Any panic is a bug, and the three engines (optimised
//! BPF, unoptimised BPF, the IR reference interpreter) must agree.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice::{LinkType, Program};

const LINKS: [LinkType; 5] = [
    LinkType::EN10MB,
    LinkType::RAW,
    LinkType::LINUX_SLL,
    LinkType::NULL,
    LinkType::PPP,
];

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let wirelen = pkt.len() as u32 + 2;
    for lt in LINKS {
        let opt = Program::builder(lt).snaplen(65535).expression(text);
        let unopt = Program::builder(lt).snaplen(65535).optimize(false).expression(text);
        if let (Ok(o), Ok(u)) = (&opt, &unopt) {
            let r = u.run_reference(pkt, wirelen);
            assert_eq!(
                o.run(pkt, wirelen),
                r,
                "optimised vs reference: {text:?} on {lt}"
            );
            assert_eq!(
                u.run(pkt, wirelen),
                r,
                "unoptimised vs reference: {text:?} on {lt}"
            );
        }
    }
});
