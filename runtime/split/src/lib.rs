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
//! * [`split`], [`split_reader`]: one pass over a file (gzip and zstd
//!   ones decompressed as they are read), or over the records that start
//!   in one byte range of it ([`Part`]), so that workers can share a large
//!   file (with [`sluice_capture::verify_chain`] proving the cuts exact);
//!   with fragment dispatch ([`Options::fragments`]) or as one MPF set
//!   ([`Options::mpf`], [`mpf_set`]).
//! * [`shipped`]: a set compiled once, as bytes another process loads
//!   ([`Splitter::export`], [`Splitter::load`]) instead of compiling it.
//!
//! ```
//! use sluice_split::{filter_pairs, split, Options, Part, Splitter};
//! let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
//! let set = filter_pairs([("web", "tcp port 80"), ("dns", "udp port 53")]).unwrap();
//! let splitter = Splitter::new(set, Options::default());
//! let report = split(sample.as_ref(), &splitter, &Part::whole(), None, &mut |_| true)?;
//! // As `tcpdump -r` counts them: 14 packets, 5 to port 80, 2 to port 53.
//! assert_eq!((report.packets, report.counts[0], report.counts[1]), (14, 5, 2));
//! # Ok::<(), sluice_split::SplitError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod compile;
mod error;
mod filters;
mod merging;
mod mpf;
mod run;
pub mod shipped;
mod splitter;

pub use error::{BadFilter, SplitError};
pub use filters::{check_name, filter_pairs, parse_filters, FilterLine};
pub use merging::{compile_set, Merging, MergingScratch, Rejected};
pub use mpf::{mpf_set, BadProgram, NotMpf};
pub use run::{split, split_reader, Outputs, Part, Report};
pub use splitter::{Classify, Options, Splitter};
