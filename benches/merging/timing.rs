//! Clocks: ns per packet of a pass over packets, and the process's RSS.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median ns per packet of `pass`, which runs over `packets` packets once
/// and returns how many matches it found: five samples, each of enough
/// passes to take a fifth of `budget` (at least one). Also the matches of
/// the first (warm-up) pass.
pub fn ns_per_packet(
    budget: Duration,
    packets: usize,
    mut pass: impl FnMut() -> u64,
) -> (f64, u64) {
    let t = Instant::now();
    let matches = black_box(pass());
    let once = t.elapsed().max(Duration::from_nanos(1));
    let per_sample = budget / 5;
    let reps = (per_sample.as_nanos() / once.as_nanos()).clamp(1, 1 << 20) as u32;
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..reps {
                black_box(pass());
            }
            t.elapsed().as_nanos() as f64 / (reps as f64 * packets.max(1) as f64)
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    (samples[2], matches)
}

/// The median of some durations (the upper one of an even count).
pub fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d.get(d.len() / 2).copied().unwrap_or_default()
}

/// Milliseconds, for the TSV.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
