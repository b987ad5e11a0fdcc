//! Clocks for benchmarks: the median ns per packet of a pass over
//! packets, the way `sluice bench` and the merging benchmark time every
//! engine.
//!
//! The rule: a time is a median of five samples taken after a warm-up
//! pass, each sample long enough to be measured; never a timed test.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// Median ns per packet of `pass`, which runs over `packets` packets once
/// and returns a count (matches, accepted packets): five samples, each of
/// enough passes to take a fifth of `budget` (at least one). Also the
/// count of the first (warm-up) pass.
///
/// ```
/// let data = vec![1u8; 1000];
/// let (ns, count) = sluice::timing::ns_per_packet(std::time::Duration::from_millis(5), data.len(), || {
///     data.iter().filter(|&&b| b == 1).count() as u64
/// });
/// assert_eq!(count, 1000);
/// assert!(ns > 0.0);
/// ```
pub fn ns_per_packet(
    budget: Duration,
    packets: usize,
    mut pass: impl FnMut() -> u64,
) -> (f64, u64) {
    let t = Instant::now();
    let count = black_box(pass());
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
    (samples[2], count)
}
