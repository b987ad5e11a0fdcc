//! Live capture and transmit on Linux for sluice.
//!
//! * [`Capture`] reads one interface (or `any`) through an `AF_PACKET`
//!   socket with a TPACKET_V3 memory-mapped ring: promiscuous mode, a
//!   snapshot length, a direction, nanosecond timestamps, an optional
//!   kernel pre-filter ([`KernelFilter`]) and an optional fanout group so
//!   several workers share an interface by flow. Packets come out as
//!   [`sluice_capture::Packet`]s, what capture files give, with VLAN tags
//!   the kernel took off put back where libpcap puts them and the `any`
//!   device's frames under a Linux cooked v2 header.
//! * [`session::Session`] runs a whole capture: a worker per ring joined
//!   by fanout, each classifying, the accepted packets merged back into
//!   timestamp order for one sink, a filter swapped while capturing, the
//!   kernel's counts, and the ways a capture ends. Every front end that
//!   captures live (the command, flows, the daemon) runs through it.
//! * [`Sender`] sends frames out of an interface, paced.
//! * [`interfaces()`] lists interfaces as tcpdump's `-D` does.
//!
//! ```no_run
//! use sluice_live::{Capture, Config};
//! let mut cap = Capture::open(&Config::new("eth0"))?;
//! let mut seen = 0;
//! cap.dispatch(std::time::Duration::from_millis(100), |pkt| {
//!     seen += 1;
//!     pkt.caplen > 0
//! })?;
//! let stats = cap.stats()?;
//! println!("{seen} packets, {} dropped by the kernel", stats.dropped);
//! # Ok::<(), sluice_live::LiveError>(())
//! ```
//!
//! The rule of the crate: every system call is wrapped once in `sys`
//! (the only module with `unsafe`); the ring walk and frame building are
//! safe code over bytes the kernel handed over.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod capture;
mod error;
pub mod interfaces;
mod kernel;
mod retag;
mod ring;
mod send;
pub mod session;
mod sys;

pub use capture::{Capture, Config, Direction, Dispatched, KernelStats};
pub use error::LiveError;
pub use interfaces::{interfaces, Interface};
pub use kernel::{KernelFilter, MAX_INSNS};
pub use ring::{BlockWalk, Frame, Framing};
pub use send::{Pace, SendStats, Sender, BATCH};
pub use sys::cores;
