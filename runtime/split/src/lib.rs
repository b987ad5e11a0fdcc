//! Many named filters over a capture in one pass: `sluice split` as a
//! library, for the command and the Python module alike.
//!
//! * [`FilterLine`], [`parse_filters`], [`filter_pairs`]: a named filter
//!   set, from a `name<TAB>filter` file or from pairs.
//! * [`compile`]: filters compiled for merging on every core.
//! * [`Merging`]: the set merged into one classifier for a link type
//!   (machine code, or walked in Rust).
//! * [`Splitter`]: the set compiled once per link type met and shared by
//!   threads; [`Classify`] gives each packet's filters (all of them, or
//!   the first in set order).
//! * Output files are written by [`sluice_capture::sink::FileSet`]: one
//!   capture file per filter, all put in place when finished, or none.
//! * [`split`]: one pass over a file, or over the records that start in
//!   one byte range of it ([`Part`]), so that workers can share a large
//!   file (with [`sluice_capture::verify_chain`] proving the cuts exact).
//!
//! ```
//! use sluice_split::{filter_pairs, split, Options, Part, Splitter};
//! let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
//! let set = filter_pairs([("web", "tcp port 80"), ("dns", "udp port 53")]).unwrap();
//! let splitter = Splitter::new(set, Options::default());
//! let report = split(sample.as_ref(), &splitter, &Part::whole(), None, &mut |_| true)?;
//! println!("{} packets, web {}, dns {}", report.packets, report.counts[0], report.counts[1]);
//! # Ok::<(), sluice_split::SplitError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compile;
mod error;
mod filters;
mod merging;
mod run;
mod splitter;

pub use error::{BadFilter, SplitError};
pub use filters::{check_name, filter_pairs, parse_filters, FilterLine};
pub use merging::{sort_ids, Merging, MergingScratch, Rejected};
pub use run::{split, Outputs, Part, Report};
pub use splitter::{Classify, Options, Splitter};
