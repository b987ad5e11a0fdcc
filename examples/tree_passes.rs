//! The merged engine's own instructions a packet, for valgrind: a filters
//! file (as `sluice split --filters`) merged into the default engine
//! (`NativeAuto`, all code compiled), then every packet of a capture
//! classified PASSES times, in a function of its own, with the flow cache
//! off (`CACHE=1` leaves it on, `CACHE=always` on for every packet).
//!
//! Rule: a measurement tool, not a test. Count with
//!
//! ```sh
//! valgrind --tool=callgrind --collect-atstart=no --toggle-collect='*classify_passes*' \
//!     target/release/examples/tree_passes FILTERS CAPTURE 1
//! ```
//!
//! and again with 3 passes: the difference over twice the packets is the
//! engine's instructions a packet, and `callgrind_annotate` splits it by
//! function (the machine code shows as addresses in `memfd:sluice-code`).
//! `AGAIN=K` classifies each packet K times in a row instead (a packet
//! the branch predictor and the caches have just seen).

use sluice::capture::CaptureReader;
use sluice::classifier::Engine;
use sluice::native::NativeAuto;
use sluice::{LinkType, Program};
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [filters, capture, passes] = args.as_slice() else {
        eprintln!("usage: tree_passes FILTERS CAPTURE PASSES");
        std::process::exit(2);
    };
    let passes: usize = passes.parse().expect("PASSES");
    let again: usize = std::env::var("AGAIN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let texts: Vec<String> = std::fs::read_to_string(filters)
        .expect("filters file")
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split_once('\t').map_or(l, |(_, e)| e).to_string())
        .collect();
    let mut reader = CaptureReader::open(capture).expect("capture");
    let mut pkts = Vec::new();
    while let Some(p) = reader.next_packet().expect("packet") {
        pkts.push((p.data.to_vec(), p.wirelen));
    }
    let builder = Program::builder(LinkType::EN10MB);
    let mut engine = NativeAuto::empty();
    for (i, (c, t)) in sluice::merge::compile_all(&builder, &texts)
        .into_iter()
        .zip(&texts)
        .enumerate()
    {
        let c = c.unwrap_or_else(|e| panic!("{t}: {e}"));
        engine.insert(i as u32, Arc::new(c), (texts.len() - i) as i32);
    }
    engine.update();
    let mut s: <NativeAuto as Engine>::Scratch = Default::default();
    match std::env::var("CACHE").as_deref() {
        Ok("1") => {}
        // On for every packet: no timing decides (valgrind's would not be
        // the machine's).
        Ok("always") => s.tree_mut().set_flow_cache_always(),
        _ => s.tree_mut().set_flow_cache(false),
    }
    let matched = classify_passes(&engine, &pkts, passes, again, &mut s);
    if let Some(st) = s.tree_mut().flow_stats() {
        eprintln!("flow cache: {st:?}");
    }
    println!(
        "{} filters ({}), {} packets, {passes} passes, each packet {again} times: {matched} matches",
        texts.len(),
        if engine.is_tree() { "tree" } else { "tuple space" },
        pkts.len()
    );
}

#[inline(never)]
fn classify_passes(
    engine: &NativeAuto,
    pkts: &[(Vec<u8>, u32)],
    passes: usize,
    again: usize,
    s: &mut <NativeAuto as Engine>::Scratch,
) -> u64 {
    let mut ids = Vec::new();
    let mut matched = 0u64;
    for _ in 0..passes {
        for (d, w) in pkts {
            for _ in 0..again {
                engine.classify(d, *w, s, &mut ids);
            }
            matched += ids.len() as u64;
        }
    }
    matched
}
