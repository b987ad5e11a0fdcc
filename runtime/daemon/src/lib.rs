//! The sluice daemon: packets to processes.
//!
//! One process captures ([`sluice_live::session::Session`]), classifies
//! every packet once with one merged classifier over every client's
//! filters, and delivers what each client's flows accept through memory
//! the client maps: FFPF's flow groups (one packet buffer per user and
//! interface, written once, read by each of that user's flows) with an
//! index buffer per flow, under slow- or fast-reader preference. CSPF's
//! and MPF's endpoints are the `first_match` mode: each packet to exactly
//! one flow, by priority, then age.
//!
//! * [`server`]: the daemon ([`Daemon`], [`Config`], [`Steering`]).
//! * [`client`]: connecting and reading ([`Client`], [`DaemonFlow`]).
//! * [`proto`]: the messages between them.
//! * [`http`]: the status page (`--http`).
//!
//! Who a client is comes from the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`);
//! what it may open is decided by the policy file (`sluice_flow::policy`,
//! live sources named `source=iface:NAME`), checked on every request.
//! The daemon never opens a file a client names.
//!
//! ```no_run
//! use sluice_daemon::{Config, Daemon, Steering};
//! let daemon = Daemon::new(Config::new(vec!["eth0".into()], "/run/sluice/sluice.sock".into()))?;
//! let steering = Steering::default();
//! daemon.run(&steering)?;
//! # Ok::<(), sluice_daemon::DaemonError>(())
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod http;
pub mod proto;
pub mod server;

pub use client::{wait_any, Client, DaemonFlow, FlowStats};
pub use server::{Config, Daemon, Steering};

/// What can go wrong, on either side.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A setting that cannot work.
    #[error("{0}")]
    Config(String),
    /// Live capture failed.
    #[error(transparent)]
    Live(sluice_live::LiveError),
    /// The policy file could not be read.
    #[error(transparent)]
    Policy(#[from] sluice_flow::policy::PolicyError),
    /// The socket could not be made or reached.
    #[error("socket {}: {}", .0.display(), .1)]
    Socket(std::path::PathBuf, #[source] std::io::Error),
    /// A file the client reads for a flow.
    #[error("{}: {}", .0.display(), .1)]
    File(std::path::PathBuf, #[source] std::io::Error),
    /// Another system call failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The daemon refused a request: why, the policy rule (`FILE:LINE`),
    /// the column of the specification or filter.
    #[error("{message}{}", rule.as_ref().map(|r| format!(" (policy {r})")).unwrap_or_default())]
    Refused {
        /// Why.
        message: String,
        /// The rule.
        rule: Option<String>,
        /// The column.
        column: Option<usize>,
    },
    /// A message was not what the protocol says.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The daemon went away.
    #[error("the daemon has gone away")]
    Gone,
    /// The flow ended (closed, or cut loose for stalling).
    #[error("the flow has ended")]
    Ended,
}

impl From<sluice_live::LiveError> for DaemonError {
    fn from(e: sluice_live::LiveError) -> DaemonError {
        DaemonError::Live(e)
    }
}
