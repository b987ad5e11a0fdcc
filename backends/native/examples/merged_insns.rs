//! Ten TCP session filters merged and compiled (DPF's Table 3 set-up), run
//! over packets of those sessions: count instructions per packet with
//!
//! ```sh
//! valgrind --tool=callgrind target/release/examples/merged_insns 0
//! valgrind --tool=callgrind target/release/examples/merged_insns 100000
//! ```
//!
//! and divide the difference by 10 × the second argument (each pass runs
//! the ten packets once). `SESSIONS=N` changes the number of filters,
//! `ENGINE=rust` runs the Rust path instead, `SMALL=K` compiles keys as
//! immediates only for groups of at most K keys, `BATCH=1` classifies the
//! packets with `NativeMerged::classify_first_batch` (one machine call per
//! 64 packets) instead of one call per packet. It prints the time per
//! packet too, on the packets in a shuffled order (`SHUFFLE=1`: 4096
//! packets of random sessions, so that branches are not predictable;
//! `PACKETS=K` makes it K packets, so that with many sessions the table's
//! slots come from memory rather than the cache; `HOT=K` draws them from
//! the first K sessions only; `PREFETCH=B` prefetches
//! tables of at least B bytes, as `NativeMerged::with_prefetch_bytes`
//! does). The packets lie back to back in one buffer and the clock starts
//! after they are built. Session ports wrap
//! every 64,000 sessions so that every filter stays matchable.

use sluice_classifier::merged::{Compiled, Merged, Scratch};
use sluice_ir::Filter;
use sluice_native::merged::NativeMerged;
use std::hint::black_box;

#[path = "../src/merged/fixtures.rs"]
mod fixtures;
use fixtures::{session, tcp_packet};

/// A packet of session (a, b, p, q): IPv4 header of 5 words, DF set.
fn packet(a: u32, b: u32, p: u16, q: u16) -> Vec<u8> {
    tcp_packet(a, b, p, q, 5, 0x4000, 6)
}

fn main() {
    let iters: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let n: u32 = std::env::var("SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let rust = std::env::var("ENGINE").is_ok_and(|e| e == "rust");
    let mut m = Merged::default();
    let mut pkts = Vec::new();
    for i in 0..n {
        let (a, b, p, q) = (0x0a00_0000 + i, 0xc0a8_0000 + 7 * i, 1024 + i % 64_000, 80);
        m.insert(i, &Compiled::new(Filter::new(session(a, b, p, q), 1)), 0);
        pkts.push(packet(a, b, p as u16, q as u16));
    }
    pkts.truncate(10);
    if std::env::var_os("SHUFFLE").is_some() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let count: usize = std::env::var("PACKETS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(4096);
        let hot = std::env::var("HOT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(n as u64)
            .clamp(1, n as u64);
        pkts = (0..count)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let i = (x % hot) as u32;
                packet(
                    0x0a00_0000 + i,
                    0xc0a8_0000 + 7 * i,
                    1024 + (i % 64_000) as u16,
                    80,
                )
            })
            .collect();
    }
    let small = std::env::var("SMALL")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(sluice_native::merged::SMALL_KEYS);
    let mut nm = NativeMerged::with_small_keys(m.clone(), small);
    if let Some(bytes) = std::env::var("PREFETCH").ok().and_then(|s| s.parse().ok()) {
        nm = nm.with_prefetch_bytes(bytes);
    }
    let mut s = Scratch::default();
    let mut found = 0u64;
    let batch = std::env::var_os("BATCH").is_some();
    // The packets back to back in one buffer, as a capture read into
    // memory holds them (separate allocations would land wherever the
    // allocator has room, so that reading them in order misses the caches).
    let bytes: Vec<u8> = pkts.concat();
    let slices: Vec<(&[u8], u32)> = bytes.chunks(54).map(|p| (p, 54)).collect();
    let mut firsts = vec![None; slices.len()];
    let t = std::time::Instant::now();
    for _ in 0..iters * batch as usize {
        nm.classify_first_batch(black_box(&slices), &mut s, &mut firsts);
        found += firsts.iter().filter(|f| f.is_some()).count() as u64;
    }
    for _ in 0..iters * !batch as usize {
        for &(p, _) in &slices {
            let p = black_box(p);
            let r = if rust {
                m.classify_first(p, 54, &mut s)
            } else {
                nm.classify_first(p, 54, &mut s)
            };
            found += r.is_some() as u64;
        }
    }
    let ns = t.elapsed().as_nanos() as f64 / (iters * pkts.len()).max(1) as f64;
    println!(
        "{found} packets matched, {ns:.2} ns per packet; {:?}",
        nm.native_stats()
    );
}
