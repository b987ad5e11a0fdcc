//! Filters prepared for merging, compiled on every core: the
//! `sluice-split` crate's [`compile`](sluice_split::compile) module, kept
//! under its old path.
//!
//! ```
//! use sluice::{LinkType, Program};
//! let builder = Program::builder(LinkType::EN10MB);
//! let out = sluice::merge::compile_all(&builder, &["tcp port 80", "udp prt 53"]);
//! assert!(out[0].is_ok());
//! assert!(out[1].is_err());
//! ```

pub use sluice_split::compile::{compile, compile_all};
