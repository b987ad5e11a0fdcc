//! # sluice-mpf: MPF's collapsed filters, per-filter state and postponed packets
//!
//! MPF (Yuhara, Bershad, Maeda and Moss, 1994) extends BPF with match
//! instructions whose immediates are the only difference between the
//! filters of one protocol's sessions (the instructions themselves are in
//! [`sluice_bpf::mpf`]). [`MpfSet`] installs such programs:
//!
//! * programs with the same *shape* (equal but for their key immediates,
//!   [`MpfProgram::shape`]) collapse into one group: the common code runs
//!   once per packet and each `ret_match_imm`/`jmp_match_imm` is one probe
//!   of a hash table from key tuple to filter ids (§2);
//! * `register_data` stores scratch words for the filter that matched, in a
//!   second table of the group, until a timeout in packet time (§3);
//! * `postpone` puts the packet in a pending queue; after every new packet
//!   the queue is run again (a registration may now let it match), and a
//!   packet leaves it when every filter it waited for has decided, when its
//!   timeout passes (counted in [`Stats::pending_expired`]) — or it never
//!   enters it when the queue is full ([`Stats::pending_dropped_full`]).
//!
//! Every filter gets exactly what it would get if it ran alone with its own
//! state: [`Separate`] runs the programs one by one that way (the CSPF/BPF
//! model), and the tests check the two agree.
//!
//! Time is the packets' clock (nanoseconds, as a capture gives them), never
//! the wall clock, so a capture replayed at any speed expires the same
//! state. Timeouts in programs are milliseconds, as in the paper.
//!
//! ```
//! use sluice_bpf::mpf::MpfProgram;
//! use sluice_mpf::MpfSet;
//! let session = |port: u16| MpfProgram::parse(&format!(
//!     "ldh [0]\nst M[0]\nret_match_imm #1, #64\nkey #{port}\n")).unwrap();
//! let mut set = MpfSet::default();
//! let a = set.insert(&session(80));
//! let b = set.insert(&session(443));
//! assert_eq!(set.stats().groups, 1); // collapsed
//! let mut out = Vec::new();
//! set.process(&[0x01, 0xbb], 2, 0, &mut out);
//! assert_eq!(out.len(), 1);
//! assert_eq!((out[0].filter, out[0].snaplen), (b, 64));
//! assert_ne!(a, b);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod separate;
mod set;

pub use separate::Separate;
pub use set::MpfSet;
pub use sluice_bpf::mpf::MpfProgram;

use std::sync::Arc;

/// A filter installed in an [`MpfSet`] or [`Separate`]; ids are never
/// reused.
///
/// ```
/// use sluice_mpf::FilterId;
/// assert!(FilterId(1) < FilterId(2));
/// assert_eq!(FilterId(7).to_string(), "7");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FilterId(pub u32);

impl std::fmt::Display for FilterId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// A packet kept in the pending queue, handed back when it is delivered.
///
/// ```
/// use sluice_mpf::PendingPacket;
/// let p = PendingPacket { seq: 3, ts_ns: 10, wirelen: 2, data: vec![1, 2].into() };
/// assert_eq!(&p.data[..], &[1, 2]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingPacket {
    /// The packet's number: how many packets were processed before it.
    pub seq: u64,
    /// Its timestamp (nanoseconds).
    pub ts_ns: u64,
    /// Its length on the wire.
    pub wirelen: u32,
    /// Its captured bytes.
    pub data: Box<[u8]>,
}

/// One packet accepted by one filter.
///
/// ```
/// use sluice_mpf::{Delivery, FilterId};
/// let d = Delivery { filter: FilterId(0), snaplen: 96, seq: 5, late: None };
/// assert!(d.is_current());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The filter that accepted.
    pub filter: FilterId,
    /// What its program returned: how many bytes to deliver.
    pub snaplen: u32,
    /// The packet's number (see [`PendingPacket::seq`]).
    pub seq: u64,
    /// `None` for the packet just processed; for a postponed packet that a
    /// later packet let through, the packet itself.
    pub late: Option<Arc<PendingPacket>>,
}

impl Delivery {
    /// Whether this is the packet just given to `process`.
    ///
    /// ```
    /// use sluice_mpf::{Delivery, FilterId};
    /// assert!(Delivery { filter: FilterId(0), snaplen: 1, seq: 0, late: None }.is_current());
    /// ```
    pub fn is_current(&self) -> bool {
        self.late.is_none()
    }
}

/// Limits of a set.
///
/// ```
/// let c = sluice_mpf::Config::default();
/// assert_eq!(c.max_pending, 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most packets the pending queue holds ([`MpfSet`]: one queue for the
    /// set; [`Separate`]: one queue per filter). A packet postponed when
    /// the queue is full is dropped and counted.
    pub max_pending: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config { max_pending: 1024 }
    }
}

/// Counters of a set. Nothing is dropped without being counted here.
///
/// ```
/// let s = sluice_mpf::MpfSet::default().stats();
/// assert_eq!((s.filters, s.groups, s.pending_expired), (0, 0, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Filters installed.
    pub filters: usize,
    /// Groups of collapsed programs ([`Separate`]: one per filter).
    pub groups: usize,
    /// Filters that share their group with at least one other.
    pub collapsed_filters: usize,
    /// Packets processed.
    pub packets: u64,
    /// Packets that entered the pending queue.
    pub postponed: u64,
    /// Packets in the pending queue now.
    pub pending: usize,
    /// (packet, filter) pairs dropped because the queue was full.
    pub pending_dropped_full: u64,
    /// (packet, filter) pairs dropped from the queue because their timeout
    /// passed before the filter decided.
    pub pending_expired: u64,
    /// `register_data` executions (one per filter that registered).
    pub registered: u64,
    /// Registrations removed because their timeout passed.
    pub data_expired: u64,
}

/// Milliseconds (program timeouts) to nanoseconds (packet time).
fn ms(t: u32) -> u64 {
    t as u64 * 1_000_000
}

#[cfg(test)]
mod tests;
