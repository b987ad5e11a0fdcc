//! Clocks: ns per packet of a pass over packets, and the process's RSS.

use std::time::Duration;

pub use sluice::timing::ns_per_packet;

/// The median of some durations (the upper one of an even count).
pub fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d.get(d.len() / 2).copied().unwrap_or_default()
}

/// Milliseconds, for the TSV.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
