//! What sluice knows of the wire below IP, in one place (smoltcp's `wire`
//! layer is the model): link types and where each keeps its headers, the
//! Ethernet types and VLAN tags that lead to IP, finding the IP header,
//! and the bounds-checked byte readers everything else uses.
//!
//! * [`link`]: the link-type table: names, LINKTYPE numbers, where the
//!   protocol field and the payload are ([`link::Layout`]).
//! * [`ether`]: Ethernet types and VLAN tags.
//! * [`network`]: the [`network::Locator`], which finds the IP header
//!   behind any link header the table describes.
//! * [`bytes`]: `be16` and friends, `None` past the end.
//!
//! The pcap language's code generator, IP fragment handling, FFPF's
//! statistics classes, the capture reader and the command's packet
//! summaries all ask this crate; none keeps offsets of its own.
//!
//! ```
//! use sluice_wire::link::{Layout, LinkType};
//! use sluice_wire::network::{Ip, Locator};
//! let sll = LinkType::from_name("LINUX_SLL").unwrap();
//! assert_eq!((Layout::of(sll).proto_at, Layout::of(sll).payload), (Some(14), 16));
//! let mut pkt = [0u8; 36];
//! pkt[14] = 0x86; // IPv6
//! pkt[15] = 0xdd;
//! pkt[16] = 0x60;
//! assert_eq!(Locator::new(sll, false).locate(&pkt).map(|n| (n.offset, n.ip)), Some((16, Ip::V6)));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bytes;
pub mod ether;
pub mod link;
pub mod network;
