//! What processes need to share packets without copying them per
//! process: memory regions ([`Region`]), sockets that pass descriptors
//! and know who is at the other end ([`Channel`], [`Listener`]), and
//! wake-ups that cost nothing while a reader is busy ([`Wake`]).
//!
//! The sluice daemon keeps its flow groups' buffers in regions it passes
//! to its clients; `sluice-flow`'s buffers lay themselves out in a
//! region's words, so the same reader code runs in process or across
//! processes.
//!
//! ```
//! use std::sync::atomic::Ordering;
//! let (daemon, client) = sluice_shm::Channel::pair()?;
//! let region = sluice_shm::Region::create("doc", 4096)?;
//! region.words()[0].store(1, Ordering::Release);
//! daemon.send(b"buffer", &[region.read_only_fd()?.as_fd()])?;
//! let mut got = client.recv()?.unwrap();
//! let mapped = sluice_shm::Region::map(got.fds.remove(0), false)?;
//! assert_eq!(mapped.words()[0].load(Ordering::Acquire), 1);
//! # use std::os::fd::AsFd;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The rule of the crate: every system call and every `unsafe` block of
//! the daemon's shared-memory path is here, each with its SAFETY note.
#![warn(missing_docs)]
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod channel;
#[allow(unsafe_code)]
mod region;
mod wake;

pub use channel::{Channel, Listener, Peer, Received, MAX_FDS, MAX_MESSAGE};
pub use region::{bytes_file, read_bytes, Region, MAX_REGION};
pub use wake::Wake;
