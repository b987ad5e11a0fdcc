//! sluice: packet filters with libpcap's exact meaning, many at once, fast.
//!
//! This crate is the `sluice` command and the library's one door: every
//! layer of the pipeline is re-exported here under a short name, so one
//! dependency reaches all of them. (`sluice-filter`, re-exported as
//! [`filter`], is the stage every front end compiles a filter through.)
//!
//! | layer | module | what it holds |
//! | --- | --- | --- |
//! | one filter, any language | [`filter`] ([`Program`], [`Spec`], [`Language`], [`Runner`]) | text → a program that runs, for a link type |
//! | languages | [`pcap`], [`bpf`], [`cspf`], [`dpf`], [`fpl`] | tcpdump expressions, classic BPF (and MPF), CSPF, DPF, FPL-2 |
//! | intermediate form | [`ir`] | the meaning every language compiles to |
//! | back ends | [`cbpf`], [`native`], [`libpcap`] | classic BPF, machine code (Cranelift), the system libpcap as a yardstick |
//! | many filters at once | [`classifier`], [`mpf`], [`split`] | the merged classifier, MPF's shared-prefix sets, one pass of a named filter set over a capture (or a byte range of it) |
//! | runtime | [`capture`], [`live`], [`fragments`], [`flow`], [`shm`], [`daemon`] | pcap/pcapng files and safe writers, live interfaces and sessions, IP fragments, FFPF flows, shared memory between processes, the daemon and its clients |
//! | the wire below IP | [`wire`] ([`LinkType`]) | link types and their headers, VLAN tags, finding the IP header |
//!
//! ```
//! use sluice::{LinkType, Program, Runner};
//! // One expression, compiled for Ethernet with tcpdump's defaults.
//! let p = Program::builder(LinkType::EN10MB).build("udp port 53").unwrap();
//! assert_eq!(p.run(&[0u8; 60], 60), 0);
//! // The same filter in another language, through the same door.
//! let q = Program::builder(LinkType::EN10MB).build("dpf: (12:16 == 0x800)").unwrap();
//! let mut ip = [0u8; 34];
//! ip[12] = 8;
//! assert_eq!(q.run_with(Runner::Native, &ip, 34), 262144);
//! // The layers underneath are one path away.
//! let ir: &sluice::ir::Filter = p.ir().unwrap();
//! assert!(sluice::cbpf::lower(ir).is_ok());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use sluice_bpf as bpf;
pub use sluice_capture as capture;
pub use sluice_cbpf as cbpf;
pub use sluice_classifier as classifier;
pub use sluice_cspf as cspf;
pub use sluice_daemon as daemon;
pub use sluice_dpf as dpf;
pub use sluice_ebpf as ebpf;
pub use sluice_filter as filter;
pub use sluice_flow as flow;
pub use sluice_fpl as fpl;
pub use sluice_fragments as fragments;
pub use sluice_ir as ir;
pub use sluice_libpcap as libpcap;
pub use sluice_live as live;
pub use sluice_mpf as mpf;
pub use sluice_native as native;
pub use sluice_pcap as pcap;
pub use sluice_shm as shm;
pub use sluice_split as split;
pub use sluice_wire as wire;

pub use sluice_filter::{Error, Language, LinkType, Program, ProgramBuilder, Runner, Spec};

pub mod merge;
pub mod summary;
pub mod timing;
