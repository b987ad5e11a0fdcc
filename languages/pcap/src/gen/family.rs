//! Protocol tests on the links whose header names an address family: BSD
//! loopback (NULL, in the capturing host's byte order; LOOP, in network
//! byte order), OpenBSD's enc (as NULL) and pflog (one byte).
//!
//! libpcap master has two rules ([`crate::Options::offline`]):
//! - **without a capture file** (`pcap_open_dead`, `tcpdump -y`): this
//!   host's values, Linux's `AF_INET` (2) and `AF_INET6` (10), on NULL and
//!   enc in this host's byte order;
//! - **on a capture file** (`tcpdump -r`): the file may come from any BSD,
//!   so IPv6 is any of their `AF_INET6` values, 30 (macOS), 24 (NetBSD,
//!   OpenBSD) and 28 (FreeBSD), in that order; on NULL and enc each value
//!   in either byte order, the file's "unswapped" order first.
//!
//! ```
//! use sluice_pcap::{compile_options, link::LinkType, Options};
//! let file = Options { offline: true, capture_big_endian: true, ..Options::new(1) };
//! let f = compile_options("ip", LinkType::NULL, &file).unwrap().filter;
//! assert_eq!(f.run(&[0, 0, 0, 2], 4), 1); // big-endian AF_INET
//! assert_eq!(f.run(&[2, 0, 0, 0], 4), 1); // little-endian AF_INET
//! ```

use super::proto::{ethertype as et, ld};
use super::Gen;
use sluice_ir::{Pred, Size, Val};
use sluice_wire::network::{AF_INET, AF_INET6_LINUX};

/// The BSDs' `AF_INET6` values in the order libpcap tests them on a capture
/// file: macOS, NetBSD/OpenBSD, FreeBSD.
const AF_INET6_SAVEFILE: [u32; 3] = [30, 24, 28];

/// How the address family is stored in the link header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Field {
    /// A 4-byte word in the capturing host's byte order (NULL, enc).
    HostWord,
    /// A 4-byte word in network byte order (LOOP).
    NetWord,
    /// One byte (pflog).
    Byte,
}

impl Gen {
    /// The address families that mean `proto` here, in libpcap's order
    /// (none: the link cannot carry it).
    fn families(&self, proto: u32) -> &'static [u32] {
        match (proto, self.offline) {
            (et::IP, _) => &[AF_INET],
            (et::IPV6, false) => &[AF_INET6_LINUX],
            (et::IPV6, true) => &AF_INET6_SAVEFILE,
            _ => &[],
        }
    }

    /// "The link carries `proto`" where the field at `at` holds an address
    /// family.
    pub(crate) fn family_linktype(&self, proto: u32, at: &Val, field: Field) -> Pred {
        let families = self.families(proto);
        if families.is_empty() {
            return Pred::False;
        }
        let host_big = cfg!(target_endian = "big");
        // The byte orders the values are compared in, as big-endian loads
        // read them: `true` leaves a value as it is.
        let orders: &[bool] = match (field, self.offline) {
            (Field::Byte, _) | (Field::NetWord, _) => &[true],
            // Without a file: the capturing host is this one, whose order
            // `capture_big_endian` gives (this host's by default).
            (Field::HostWord, false) => {
                if self.capture_big_endian {
                    &[true]
                } else {
                    &[false]
                }
            }
            // A file: unswapped first when the file is in this host's order.
            (Field::HostWord, true) => {
                if self.capture_big_endian == host_big {
                    &[true, false]
                } else {
                    &[false, true]
                }
            }
        };
        let size = match field {
            Field::Byte => Size::Byte,
            _ => Size::Word,
        };
        let value = ld(at, 0, size);
        let mut tests = Vec::new();
        for &unswapped in orders {
            for &af in families {
                let v = if unswapped { af } else { af.swap_bytes() };
                tests.push(Pred::eq(value.clone(), v));
            }
        }
        Pred::or(tests)
    }
}

#[cfg(test)]
mod tests {
    use crate::link::LinkType;
    use crate::{compile_options, Options};

    fn accepts(lt: LinkType, offline: bool, be: bool, expr: &str, pkt: &[u8]) -> bool {
        let o = Options {
            offline,
            capture_big_endian: be,
            ..Options::new(1)
        };
        let f = compile_options(expr, lt, &o).unwrap().filter;
        f.run(pkt, pkt.len() as u32) != 0
    }

    #[test]
    fn savefiles_accept_every_bsd_inet6_in_either_order_on_null() {
        for be in [false, true] {
            for af in [24u32, 28, 30] {
                for word in [af.to_le_bytes(), af.to_be_bytes()] {
                    assert!(accepts(LinkType::NULL, true, be, "ip6", &word));
                    assert!(accepts(LinkType::ENC, true, be, "ip6", &word));
                    assert!(!accepts(LinkType::NULL, true, be, "ip", &word));
                }
            }
            for word in [10u32.to_le_bytes(), 10u32.to_be_bytes()] {
                assert!(!accepts(LinkType::NULL, true, be, "ip6", &word));
            }
            for word in [2u32.to_le_bytes(), 2u32.to_be_bytes()] {
                assert!(accepts(LinkType::NULL, true, be, "ip", &word));
            }
        }
    }

    #[test]
    fn loop_savefiles_are_network_order_only() {
        for af in [24u32, 28, 30] {
            assert!(accepts(
                LinkType::LOOP,
                true,
                false,
                "ip6",
                &af.to_be_bytes()
            ));
            assert!(!accepts(
                LinkType::LOOP,
                true,
                false,
                "ip6",
                &af.to_le_bytes()
            ));
        }
        assert!(!accepts(LinkType::LOOP, true, false, "ip6", &[0, 0, 0, 10]));
        assert!(accepts(LinkType::LOOP, false, false, "ip6", &[0, 0, 0, 10]));
    }

    #[test]
    fn without_a_file_the_hosts_values() {
        let le = !cfg!(target_endian = "big");
        assert!(accepts(
            LinkType::NULL,
            false,
            !le,
            "ip6",
            &10u32.to_ne_bytes()
        ));
        assert!(!accepts(
            LinkType::NULL,
            false,
            !le,
            "ip6",
            &30u32.to_ne_bytes()
        ));
        assert!(accepts(LinkType::PFLOG, false, !le, "ip6", &[0, 10]));
        assert!(!accepts(LinkType::PFLOG, false, !le, "ip6", &[0, 30]));
        assert!(accepts(LinkType::PFLOG, true, !le, "ip6", &[0, 30]));
    }
}
