//! Merges the filters of arbitrary expressions (one per line before the
//! first NUL; packet bytes after it) and runs the merged classifier as
//! machine code, with every large group probed in its table (packed copies
//! with shared key fields tested in code included; batches through the
//! pipelined functions, as for tables too large for the caches) and with
//! the default split between keys in code and tables, on the packet and every
//! truncation of it, one call at a time and in batches. Then it removes
//! every other filter, adds key-only inserts made from the packet's bytes
//! (which can break a packed layout and make it rebuilt), and checks
//! again. Every answer must equal the Rust merged classifier's; any panic
//! is a bug.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "input.rs"]
mod input;
use sluice::native::merged::NativeMerged;
use sluice_classifier::merged::{Compiled, Merged, Scratch};

/// Every answer of each of `ns` equals `m`'s on the packet and its cuts.
fn agree(ns: &[NativeMerged], m: &Merged, pkt: &[u8]) {
    let wire = pkt.len() as u32 + 2;
    let cuts: Vec<(&[u8], u32)> = (0..=pkt.len()).map(|l| (&pkt[..l], wire)).collect();
    let mut s = Scratch::default();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for n in ns {
        for &(cut, w) in &cuts {
            n.classify(cut, w, &mut s, &mut a);
            m.classify(cut, w, &mut s, &mut b);
            assert_eq!(a, b, "classify");
            assert_eq!(
                n.classify_first(cut, w, &mut s),
                m.classify_first(cut, w, &mut s),
                "classify_first"
            );
        }
        let mut x = vec![Vec::new(); cuts.len()];
        let mut y = vec![Vec::new(); cuts.len()];
        n.classify_batch(&cuts, &mut s, &mut x);
        m.classify_batch(&cuts, &mut s, &mut y);
        assert_eq!(x, y, "classify_batch");
        let mut f = vec![None; cuts.len()];
        n.classify_first_batch(&cuts, &mut s, &mut f);
        let want: Vec<Option<u32>> = cuts
            .iter()
            .map(|&(p, w)| m.classify_first(p, w, &mut s))
            .collect();
        assert_eq!(f, want, "classify_first_batch");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((text, pkt)) = input::text_and_packet(data) else {
        return;
    };
    let mut m = Merged::default();
    let mut ns = [
        NativeMerged::with_small_keys(Merged::default(), 0).with_prefetch_bytes(0),
        NativeMerged::new(),
    ];
    let mut ids = Vec::new();
    for (i, line) in text.lines().take(16).enumerate() {
        let Ok(f) = sluice::pcap::compile(line, sluice::LinkType::EN10MB, 65535) else {
            continue;
        };
        let c = Compiled::new(f);
        let prio = (i % 3) as i32;
        m.insert(i as u32, &c, prio);
        for n in &mut ns {
            n.insert(i as u32, &c, prio);
        }
        ids.push(i as u32);
    }
    for n in &mut ns {
        n.update();
    }
    agree(&ns, &m, pkt);
    // Remove every other filter; add keys like each remaining filter's,
    // their words taken from the packet.
    let mut next = 100;
    let mut words = pkt
        .chunks(2)
        .map(|c| c.iter().fold(0u32, |a, &b| a << 8 | b as u32))
        .cycle();
    for (k, &id) in ids.iter().enumerate() {
        if k % 2 == 1 {
            m.remove(id);
            ns.iter_mut().for_each(|n| n.remove(id));
            continue;
        }
        let Some(width) = m.key_width_of(id) else { continue };
        if pkt.is_empty() {
            continue;
        }
        for _ in 0..3 {
            let key: Vec<u32> = (&mut words).take(width).collect();
            let ok = m.insert_keyed(next, id, &key, 1);
            for n in &mut ns {
                assert_eq!(n.insert_keyed(next, id, &key, 1), ok, "insert_keyed");
            }
            next += 1;
        }
    }
    for n in &mut ns {
        n.update();
    }
    agree(&ns, &m, pkt);
});
