//! Host names in expressions (`host NAME`): libpcap turns them into
//! addresses when it compiles, through the system resolver. This crate does
//! no lookups itself; a compilation given a [`Resolver`] asks it, and one
//! given none refuses names, as sluice always did.
//!
//! ```
//! use sluice_pcap::{compile_with, link::LinkType, resolve::Resolver};
//! use std::net::IpAddr;
//! use std::sync::Arc;
//!
//! #[derive(Debug)]
//! struct Fixed;
//! impl Resolver for Fixed {
//!     fn host(&self, name: &str) -> Result<Vec<IpAddr>, String> {
//!         match name {
//!             "gw" => Ok(vec!["10.0.0.1".parse().unwrap()]),
//!             _ => Err("no such host".into()),
//!         }
//!     }
//! }
//! let r: Arc<dyn Resolver> = Arc::new(Fixed);
//! assert!(compile_with("ip host gw", LinkType::RAW, 65535, false, Some(r.clone())).is_ok());
//! let e = compile_with("host nowhere", LinkType::RAW, 65535, false, Some(r)).unwrap_err();
//! assert!(e.to_string().contains("cannot resolve host name 'nowhere': no such host"));
//! ```

use std::net::IpAddr;

/// Turns a host name into its addresses (IPv4 and IPv6, in the order the
/// resolver gives them), or says why it cannot.
pub trait Resolver: Send + Sync + std::fmt::Debug {
    /// The addresses of `name`; `Err` with the reason when it has none.
    fn host(&self, name: &str) -> Result<Vec<IpAddr>, String>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, compile_with, link::LinkType};
    use std::sync::Arc;

    #[derive(Debug)]
    struct Two;
    impl Resolver for Two {
        fn host(&self, name: &str) -> Result<Vec<IpAddr>, String> {
            match name {
                "both" => Ok(vec!["10.0.0.1".parse().unwrap(), "::1".parse().unwrap()]),
                "six" => Ok(vec!["::1".parse().unwrap()]),
                _ => Err("Name or service not known".into()),
            }
        }
    }

    /// A name compiles to the or of its addresses, as libpcap's does.
    #[test]
    fn names_become_their_addresses() {
        let r: Arc<dyn Resolver> = Arc::new(Two);
        let lt = LinkType::EN10MB;
        let cases = [
            ("host both", "host 10.0.0.1 or host ::1"),
            ("src both", "src host 10.0.0.1 or src host ::1"),
            ("ip host both", "ip host 10.0.0.1"),
            ("ip6 dst host both", "ip6 dst host ::1"),
            ("not host six", "not host ::1"),
        ];
        for (named, literal) in cases {
            let a = compile_with(named, lt, 9, false, Some(r.clone())).unwrap();
            let b = compile(literal, lt, 9).unwrap();
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{named}");
        }
        for (bad, msg) in [
            (
                "host nowhere",
                "cannot resolve host name 'nowhere': Name or service not known",
            ),
            (
                "ip host six",
                "unknown host 'six' for specified address family",
            ),
            ("ether host both", "/etc/ethers"),
            ("net both", "network name"),
        ] {
            let e = compile_with(bad, lt, 9, false, Some(r.clone())).unwrap_err();
            assert!(e.to_string().contains(msg), "{bad}: {e}");
        }
        assert!(compile("host both", lt, 9).is_err());
    }
}
