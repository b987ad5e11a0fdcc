//! What an application does with a running flow, wherever the flow runs:
//! in this process ([`Flow`]) or in the sluice daemon (the daemon crate's
//! `DaemonFlow`). Code written against [`FlowAccess`] reads packets,
//! filter memories and reports the same way from either.
//!
//! The rule: only what both can honour is here — a reader of the flow's
//! packets, an element's memory, and the flow's report.

use super::{Flow, FlowReport};
use crate::buffer::{MBuf, Reader};
use crate::Error;
use std::sync::Arc;

/// A running flow, in this process or in the daemon (see the module
/// documentation).
///
/// ```
/// use sluice_flow::{Flow, FlowAccess, Group};
/// let g = Group::new(Default::default()).unwrap();
/// let mut f = Flow::create(&g);
/// f.populate("(file,../../examples/sample.pcap) -> (BPF,\"tcp\") -> (packetcount,pass)").unwrap();
/// f.instantiate_unchecked().unwrap();
/// f.activate().unwrap();
/// let flow: &dyn FlowAccess = &f; // or a sluice_daemon::DaemonFlow
/// let mut r = flow.reader(64).unwrap();
/// g.run().unwrap();
/// let mut n = 0;
/// while r.next().is_some() {
///     n += 1;
/// }
/// assert!(n > 0);
/// assert_eq!(flow.mbuf(2, 0).unwrap().load_u64(0), n);
/// assert_eq!(flow.report().unwrap().filters.len(), 3);
/// ```
pub trait FlowAccess {
    /// A new reader of the flow's packets, advancing its position every
    /// `batch` packets (see [`Flow::reader`]).
    fn reader(&self, batch: u64) -> Result<Reader, Error>;

    /// The memory (MBuf) of the element at `stage`, `index` (both from 0;
    /// stage 0 is the source). Elements without memory have an empty one.
    fn mbuf(&self, stage: usize, index: usize) -> Result<Arc<MBuf>, Error>;

    /// What the flow and each of its elements produced so far.
    fn report(&self) -> Result<FlowReport, Error>;
}

impl FlowAccess for Flow {
    fn reader(&self, batch: u64) -> Result<Reader, Error> {
        Flow::reader(self, batch)
    }

    fn mbuf(&self, stage: usize, index: usize) -> Result<Arc<MBuf>, Error> {
        Flow::mbuf(self, stage, index)
    }

    fn report(&self) -> Result<FlowReport, Error> {
        Flow::report(self)
    }
}
