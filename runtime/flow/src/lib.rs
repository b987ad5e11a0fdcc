//! FFPF (Bos et al. 2004) in process: flows, filter graphs in the
//! `ffpf-flow` notation, flow groups sharing one circular packet buffer,
//! per-filter index buffers and persistent memory, and authorisation.
//!
//! * [`spec`]: the graph notation, `(file,in.pcap) -> (sampler,2,4) ->
//!   (BPF,"tcp") | (BPF,"udp") -> (bytecount,,8)`.
//! * [`Group`] and [`Flow`]: a flow's life cycle (create, populate,
//!   instantiate, activate, pause, close); flows of one group share the
//!   instances of their common prefixes and one [`buffer::PBuf`].
//! * [`class`]: the filter classes (sources, sampler, BPF, counters,
//!   string search, [`fpl`]: FPL-2 programs, [`stats`]: hash counter with top-N and the RTSP
//!   dynamic-port tracker) and the traits to add more.
//! * [`buffer`]: PBuf, IBuf, MBuf and readers under slow- or fast-reader
//!   preference; offsets only, atomics with documented orderings.
//! * [`policy`]: the policy file checked at instantiation.
//!
//! ```
//! use sluice_flow::{Flow, Group, GroupConfig};
//! let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
//! let group = Group::new(GroupConfig::default()).unwrap();
//! let mut tcp = Flow::create(&group);
//! tcp.populate(&format!("(file,{sample}) -> (sampler,2,4) -> (BPF,\"tcp\") -> (packetcount,,8)")).unwrap();
//! let mut udp = Flow::create(&group);
//! udp.populate(&format!("(file,{sample}) -> (sampler,2,4) -> (BPF,\"udp\") -> (packetcount,,8)")).unwrap();
//! for f in [&mut tcp, &mut udp] {
//!     f.instantiate_unchecked().unwrap();
//!     f.activate().unwrap();
//! }
//! // One file, one sampler, two BPF filters, two counters.
//! assert_eq!(group.instance_count(), 6);
//! group.run().unwrap();
//! assert!(group.dot().contains("sampler#1"));
//! ```

#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod bpf;
// The shared packet buffer copies and lends packet bytes (SAFETY notes there).
#[allow(unsafe_code)]
pub mod buffer;
pub mod class;
pub mod fpl;
mod group;
pub mod net;
// Credentials come from getuid/getgroups (SAFETY notes there).
#[allow(unsafe_code)]
pub mod policy;
pub mod source;
pub mod spec;
pub mod stats;
pub mod value;

#[cfg(test)]
mod tests;

pub use group::{Batch, FilterReport, Flow, FlowReport, FlowState, Group, GroupConfig, RunStats};

/// Everything that can go wrong with flows.
///
/// ```
/// let e = sluice_flow::Error::State { op: "activate", state: sluice_flow::FlowState::Created };
/// assert_eq!(e.to_string(), "cannot activate a flow that is created");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad flow specification (column and message).
    #[error(transparent)]
    Spec(#[from] spec::SpecError),
    /// An operation out of the life cycle's order.
    #[error("cannot {op} a flow that is {state}")]
    State {
        /// The operation.
        op: &'static str,
        /// The flow's state.
        state: FlowState,
    },
    /// Authorisation refused the flow.
    #[error(transparent)]
    Refused(policy::Refusal),
    /// A bad policy file.
    #[error(transparent)]
    Policy(#[from] policy::PolicyError),
    /// A bad setting.
    #[error("{0}")]
    Config(String),
    /// An element failed while packets ran (a capture error, a filter that
    /// cannot compile for a link type met in the capture).
    #[error("{element}: {message}")]
    Run {
        /// The element and instance.
        element: String,
        /// What happened.
        message: String,
    },
    /// An MBuf index past the end.
    #[error("MBuf word {index} is out of range (the MBuf has {len} words)")]
    MBufRange {
        /// The index.
        index: usize,
        /// The MBuf's length in words.
        len: usize,
    },
}
