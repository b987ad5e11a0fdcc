//! The messages between the daemon and its clients: one JSON object per
//! `SOCK_SEQPACKET` message, at most [`sluice_shm::MAX_MESSAGE`] bytes.
//!
//! The rule: [`parse_request`] is the only way a client's bytes become a
//! request, and it refuses (never panics on) anything that is not exactly
//! one of the requests below: unknown fields, wrong types, overlong
//! strings, more than [`MAX_SPEC`] bytes of flow specification. What the
//! daemon sends back is a [`Reply`]; descriptors travel beside
//! [`Reply::Opened`] only.
//!
//! ```
//! use sluice_daemon::proto::{parse_request, Request};
//! let r = parse_request(br#"{"op":"open","spec":"(iface,eth0) -> (BPF,\"tcp\")"}"#).unwrap();
//! assert!(matches!(r, Request::Open { .. }));
//! assert!(parse_request(b"{\"op\":\"open\"}").is_err());
//! assert!(parse_request(b"\xff\xfe").is_err());
//! ```

use serde::{Deserialize, Serialize};

/// The protocol's version; a client and a daemon of different versions
/// refuse each other at `hello`.
pub const VERSION: u32 = 1;

/// The longest flow specification a client may send.
pub const MAX_SPEC: usize = 16 * 1024;

/// The longest reply a client takes from a memory file.
pub const MAX_LARGE_REPLY: usize = 256 << 20;

/// The longest client name (`hello`'s `name`, shown in the status).
pub const MAX_NAME: usize = 256;

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The first message: the client's protocol version and a name for
    /// the status (its command, usually).
    Hello {
        /// [`VERSION`].
        version: u32,
        /// What the client calls itself.
        #[serde(default)]
        name: String,
    },
    /// Open a flow: `(iface,NAME) -> (BPF,"expression")` (or `CSPF`,
    /// `DPF`; no filter stage: every packet). Endpoint daemons use the
    /// priority (higher first, then older flows first).
    Open {
        /// The flow specification, in `ffpf-flow` notation.
        spec: String,
        /// Priority among endpoints.
        #[serde(default)]
        priority: i32,
    },
    /// Replace an open flow's filter (libpcap's `pcap_setfilter`): the
    /// specification must name the same source.
    Filter {
        /// The flow.
        flow: u64,
        /// The new specification.
        spec: String,
    },
    /// Add filters to an open flow (each in any language, by its prefix):
    /// a packet any of them accepts reaches the flow once, its entry's
    /// result saying which (the flow's filters count from 1).
    AddFilters {
        /// The flow.
        flow: u64,
        /// The filters.
        filters: Vec<String>,
    },
    /// Close a flow.
    Close {
        /// The flow.
        flow: u64,
    },
    /// What the daemon is doing (clients, flows, counts): everything for
    /// root and the daemon's own user, one's own flows for anyone else.
    Status,
}

/// What the daemon answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// `hello` accepted.
    Hello {
        /// [`VERSION`].
        version: u32,
        /// The daemon's program and version.
        daemon: String,
        /// The interfaces it captures on.
        interfaces: Vec<Interface>,
        /// `monitor` (every accepting flow gets each packet) or `endpoint`
        /// (each packet to one flow).
        mode: String,
    },
    /// A flow is open: three descriptors come with this message, the
    /// group's packet buffer (read-only), the flow's index buffer
    /// (read-write) and its wake-up.
    Opened {
        /// The flow's number on this connection.
        flow: u64,
        /// The reader slot of the index buffer the daemon registered for
        /// the client (it starts at the first packet).
        reader: usize,
        /// The link type of the packets.
        linktype: u16,
        /// Bytes of each packet kept.
        snaplen: u32,
    },
    /// Done (`filter`, `close`).
    Done,
    /// `add_filters` done: the result number of the first filter added.
    Added {
        /// Its result number (the next added are numbered after it).
        first: u32,
    },
    /// The status, as JSON.
    Status {
        /// See `sluice daemon --status --json`.
        status: serde_json::Value,
    },
    /// The reply is too long for a message: it is in the memory file that
    /// comes with this one, `bytes` long (a status with many clients).
    Large {
        /// Its length.
        bytes: usize,
    },
    /// Refused or failed: why, and where.
    Error {
        /// The message.
        message: String,
        /// The policy rule that refused (`FILE:LINE`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rule: Option<String>,
        /// The column of the specification the error is at (1-based).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        column: Option<usize>,
    },
}

/// An interface the daemon captures on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    /// Its name.
    pub name: String,
    /// The link type of its frames.
    pub linktype: u16,
    /// Bytes of each packet kept.
    pub snaplen: u32,
}

impl Reply {
    /// An error reply with a message only.
    pub fn error(message: impl Into<String>) -> Reply {
        Reply::Error {
            message: message.into(),
            rule: None,
            column: None,
        }
    }

    /// The reply as bytes to send.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_else(|_| br#"{"reply":"error","message":"?"}"#.to_vec())
    }
}

/// Why bytes from a client are not a request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("bad request: {0}")]
pub struct ProtoError(pub String);

/// A client's message as a request, checked (see the module docs).
pub fn parse_request(bytes: &[u8]) -> Result<Request, ProtoError> {
    if bytes.len() > sluice_shm::MAX_MESSAGE {
        return Err(ProtoError("message too long".into()));
    }
    let r: Request = serde_json::from_slice(bytes).map_err(|e| {
        // serde's message may quote the input: keep only its category and
        // position.
        ProtoError(format!(
            "not a request ({:?} error at line {} column {})",
            e.classify(),
            e.line(),
            e.column()
        ))
    })?;
    match &r {
        Request::Hello { name, .. } if name.len() > MAX_NAME => {
            Err(ProtoError(format!("name longer than {MAX_NAME} bytes")))
        }
        Request::Open { spec, .. } | Request::Filter { spec, .. } if spec.len() > MAX_SPEC => Err(
            ProtoError(format!("flow specification longer than {MAX_SPEC} bytes")),
        ),
        _ => Ok(r),
    }
}

/// A daemon's message as a reply (the client side).
pub fn parse_reply(bytes: &[u8]) -> Result<Reply, ProtoError> {
    serde_json::from_slice(bytes).map_err(|e| ProtoError(format!("not a reply: {e}")))
}

/// A request as bytes to send (the client side).
pub fn request_bytes(r: &Request) -> Vec<u8> {
    serde_json::to_vec(r).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn requests_round_trip() {
        for r in [
            Request::Hello {
                version: VERSION,
                name: "tcpdump".into(),
            },
            Request::Open {
                spec: "(iface,lo)".into(),
                priority: -3,
            },
            Request::Filter {
                flow: 2,
                spec: "(iface,lo) -> (BPF,tcp)".into(),
            },
            Request::Close { flow: 9 },
            Request::AddFilters {
                flow: 1,
                filters: vec!["tcp".into(), "cspf: pushlit #1".into()],
            },
            Request::Status,
        ] {
            assert_eq!(parse_request(&request_bytes(&r)).unwrap(), r);
        }
    }

    #[test]
    fn refusals_do_not_quote_the_input() {
        let e = parse_request(br#"{"op":"open","spec":"x","secret":"hunter2"}"#).unwrap_err();
        assert!(!e.0.contains("hunter2"), "{e}");
        let long = format!(r#"{{"op":"open","spec":"{}"}}"#, "a".repeat(MAX_SPEC + 1));
        assert!(parse_request(long.as_bytes()).is_err());
        let deep = "[".repeat(10_000);
        assert!(parse_request(deep.as_bytes()).is_err());
    }

    proptest! {
        #[test]
        fn any_bytes_are_a_request_or_an_error(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse_request(&bytes);
        }

        #[test]
        fn mangled_requests_are_refused_or_parsed(cut in 0usize..80, byte in any::<u8>(), at in 0usize..80) {
            let mut b = request_bytes(&Request::Open { spec: "(iface,eth0) -> (BPF,\"tcp port 80\")".into(), priority: 1 });
            let n = b.len();
            b.truncate(n - cut.min(n));
            if !b.is_empty() {
                let i = at % b.len();
                b[i] = byte;
            }
            let _ = parse_request(&b);
        }
    }
}
