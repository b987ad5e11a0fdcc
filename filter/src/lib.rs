//! One filter, in any of sluice's languages, compiled for a link type into
//! a [`Program`] that runs on packets: the library every front end of
//! sluice uses (the `sluice` command, FFPF flows, and the C and Python
//! front ends to come).
//!
//! * [`Language`] and [`Spec`]: which language a filter text is in (its
//!   `pcap:`, `bpf:`, `cspf:` or `dpf:` prefix) and its program text,
//!   with `LANG:@path` files read.
//! * [`ProgramBuilder`]: how to compile it (link type, snapshot length,
//!   optimisation, the capture's byte order), made by [`Program::builder`].
//! * [`Program`]: the compiled filter: its intermediate form, its classic
//!   BPF program and, on demand, native code; [`Runner`] picks the engine.
//! * [`Error`]: why a filter could not be built; for text read from a
//!   file it names the file, line and column and repeats nothing of the
//!   file ([`redact`]).
//! * [`read_text_file`]: every filter, program, filter-set and policy file
//!   is read through it, up to [`MAX_TEXT_FILE_BYTES`].
//!
//! Every language goes through sluice's pipeline: the language crate
//! ([`sluice_pcap`], [`sluice_bpf`], [`sluice_cspf`], [`sluice_dpf`]) →
//! the intermediate form ([`sluice_ir`]) → classic BPF ([`sluice_cbpf`])
//! and native code ([`sluice_native`]).
//!
//! ```
//! use sluice_filter::{LinkType, Program, Runner};
//! let p = Program::builder(LinkType::EN10MB).build("udp port 53").unwrap();
//! assert_eq!(p.run(&[0u8; 60], 60), 0);
//! assert_eq!(p.run_with(Runner::Native, &[0u8; 60], 60), 0);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod builder;
mod error;
mod language;
mod program;
mod redact;
mod textfile;
mod union;

pub use builder::{ProgramBuilder, SystemResolver};
pub use error::{caret_under, Error};
pub use language::{Language, Spec};
pub use program::{NotNative, Program, Runner};
pub use redact::redact;
pub use sluice_wire::link::LinkType;
pub use textfile::{read_text, read_text_file, MAX_TEXT_FILE_BYTES};
