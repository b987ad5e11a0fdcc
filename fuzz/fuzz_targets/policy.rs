//! Fuzzes the flow policy's parser and checker: any text must parse or
//! give an error naming a line inside it, never a panic; a parsed policy
//! must answer any flow shape (classes, sources with and without files,
//! `@FILE` reads, external functions, callbacks, users) with `Ok` or a
//! refusal whose rule is a line of the policy.
//!
//! Input: the policy text, a NUL, then bytes that pick the flow and the
//! user.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_flow::policy::{Credentials, ElemShape, FlowShape, Policy};
use std::path::PathBuf;

#[path = "input.rs"]
mod input;

const CLASSES: [&str; 8] = [
    "file", "replay", "iface", "bpf", "sampler", "strsearch", "fpl-2", "packetcount",
];
const PATHS: [&str; 6] = [
    "/data/a.pcap",
    "/data/private/x",
    "/data/Private/x",
    "/tmp/x",
    "/",
    "/srv/filters/p.bpf",
];
const EXTERNS: [&str; 3] = ["GetDynTCPDPortFromRTSP", "md5", "*"];

/// A flow shape and a user from the bytes after the NUL.
fn shape(b: &[u8]) -> (FlowShape, Credentials) {
    let mut it = b.iter().copied();
    let mut next = || it.next().unwrap_or(0) as usize;
    let stages_n = 1 + next() % 4;
    let mut stages = Vec::new();
    for si in 0..stages_n {
        let mut stage = Vec::new();
        for _ in 0..1 + next() % 3 {
            let class = CLASSES[next() % CLASSES.len()];
            let source = si == 0;
            let path = PATHS[next() % PATHS.len()];
            let mut e = ElemShape::new(class, source, &[path]);
            if source && next() % 2 == 0 {
                e.file = Some(PathBuf::from(path));
            }
            for _ in 0..next() % 3 {
                e.reads.push(PathBuf::from(PATHS[next() % PATHS.len()]));
            }
            for _ in 0..next() % 2 {
                e.externs.push(EXTERNS[next() % EXTERNS.len()].to_string());
            }
            stage.push(e);
        }
        stages.push(stage);
    }
    let callback_every = match next() % 3 {
        0 => None,
        _ => Some((next() as u64) << (next() % 24)),
    };
    let uid = [0u32, 1000, 1001, 65534][next() % 4];
    let gids = (0..next() % 3).map(|_| [0u32, 50, 100][next() % 3]).collect();
    (FlowShape { stages, callback_every }, Credentials { uid, gids })
}

fuzz_target!(|data: &[u8]| {
    let Some((text, rest)) = input::text_and_packet(data) else {
        return;
    };
    let lines = text.lines().count();
    match Policy::parse(text, "fuzz.policy") {
        Err(e) => assert!(e.line >= 1 && e.line <= lines.max(1), "{e}"),
        Ok(p) => {
            let (flow, cred) = shape(rest);
            if let Err(r) = p.check(&flow, &cred) {
                if let Some(rule) = &r.rule {
                    let n: usize = rule
                        .strip_prefix("fuzz.policy:")
                        .and_then(|l| l.parse().ok())
                        .expect("FILE:LINE");
                    assert!(n >= 1 && n <= lines, "{rule}");
                }
            }
        }
    }
});
