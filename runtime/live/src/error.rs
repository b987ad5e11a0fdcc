//! What can go wrong on a live interface, with the interface and the
//! system call named.

use std::io;

/// A live capture or transmit failure.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No interface of that name.
    #[error("{0}: no such interface (sluice list-interfaces shows them)")]
    NoSuchInterface(String),
    /// The process may not open packet sockets.
    #[error("{interface}: you don't have permission to capture on that device ({call}: {}); capturing needs CAP_NET_RAW (run as root or grant it: setcap cap_net_raw,cap_net_admin=eip $(command -v sluice))", msg(source))]
    Permission {
        /// The interface.
        interface: String,
        /// The system call refused.
        call: &'static str,
        /// The system's error.
        source: io::Error,
    },
    /// The interface went down while capturing.
    #[error("{0}: the interface went down")]
    InterfaceDown(String),
    /// The interface was removed while capturing.
    #[error("{0}: the interface disappeared")]
    InterfaceGone(String),
    /// Settings that cannot work together.
    #[error("{0}")]
    Config(String),
    /// Any other system call failure.
    #[error("{what}: {}", msg(source))]
    System {
        /// The interface and call (`eth0: PACKET_RX_RING`).
        what: String,
        /// The system's error.
        source: io::Error,
    },
}

/// An I/O error as the system words it, without Rust's `(os error N)`.
fn msg(e: &io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(at) if s.ends_with(')') => s[..at].to_string(),
        _ => s,
    }
}

impl LiveError {
    /// A failed call on `interface`; permission errors become
    /// [`LiveError::Permission`].
    pub(crate) fn call(interface: &str, call: &'static str, source: io::Error) -> LiveError {
        match source.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => LiveError::Permission {
                interface: interface.to_string(),
                call,
                source,
            },
            Some(libc::ENODEV) | Some(libc::ENXIO) => {
                LiveError::NoSuchInterface(interface.to_string())
            }
            _ => LiveError::System {
                what: format!("{interface}: {call}"),
                source,
            },
        }
    }
}
