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

/// The work of a packet apart from what the traffic's variety costs:
/// `pass(k)` runs over `packets` packets once, each classified `k` times
/// in a row, and returns a count. The pass with each packet once and the
/// pass with each packet [`AGAIN`] times alternate, nine rounds within
/// `budget`; each round's work is its second pass less its first, over
/// the extra times (the cost of a packet the branch predictor and the
/// caches have just seen). Returns the medians of the rounds: ns per
/// packet once, ns of the work, and the first pass's count.
///
/// ```
/// let data = vec![1u8; 1000];
/// let (once, work, count) = sluice::timing::work_per_packet(std::time::Duration::from_millis(5), data.len(), |k| {
///     (0..k).map(|_| data.iter().filter(|&&b| b == 1).count() as u64).last().unwrap_or(0)
/// });
/// assert_eq!(count, 1000);
/// assert!(once > 0.0 && work >= 0.0);
/// ```
pub fn work_per_packet(
    budget: Duration,
    packets: usize,
    mut pass: impl FnMut(usize) -> u64,
) -> (f64, f64, u64) {
    const ROUNDS: usize = 9;
    let mut clock = |times: usize, reps: u32| {
        let t = Instant::now();
        let mut count = 0;
        for _ in 0..reps {
            count = black_box(pass(times));
        }
        (t.elapsed(), count)
    };
    let (once, count) = clock(1, 1);
    clock(AGAIN, 1);
    let per_pass = budget / (ROUNDS * (1 + AGAIN)) as u32;
    let reps = (per_pass.as_nanos() / once.as_nanos().max(1)).clamp(1, 1 << 20) as u32;
    let per = |d: Duration| d.as_nanos() as f64 / (reps as f64 * packets.max(1) as f64);
    let (mut firsts, mut works) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let first = per(clock(1, reps).0);
        let all = per(clock(AGAIN, reps).0);
        firsts.push(first);
        works.push(((all - first) / (AGAIN - 1) as f64).max(0.0));
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(firsts), median(works), count)
}

/// How many times in a row [`work_per_packet`] classifies each packet.
pub const AGAIN: usize = 4;
