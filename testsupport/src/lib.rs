//! What sluice's tests and benchmarks share, so that no test file writes
//! them again: [`Rng`], a small seeded generator (every failure reproduces
//! from its seed), and [`corpus`], the readers of the shared conformance
//! corpus (`../shared/conformance` beside the repository, skipped with a
//! message where it is absent), and [`master`], libpcap master built from
//! `../shared/reference` and loaded, the oracle of the differential tests.
//!
//! Only ever a dev-dependency.
//!
//! ```
//! use sluice_testsupport::{corpus, Rng};
//! let mut rng = Rng::new(7);
//! let n = rng.below(10);
//! assert!(n < 10);
//! assert_eq!(Rng::new(7).below(10), n);
//! for path in corpus::pcaps() {
//!     assert!(path.is_file());
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod corpus;
pub mod master;
mod rng;
pub mod savefile;

pub use rng::Rng;

/// Resident set size of this process, in bytes (`/proc/self/statm`; 0
/// where there is none), for the benches' memory figures.
///
/// ```
/// assert!(sluice_testsupport::rss() > 0 || !std::path::Path::new("/proc/self/statm").exists());
/// ```
pub fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|x| x.parse().ok())
        .unwrap_or(0);
    pages * 4096
}
