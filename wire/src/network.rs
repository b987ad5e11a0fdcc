//! Finding the IP header behind a link header: the [`Locator`] reads the
//! link's protocol field where the link-type table ([`crate::link`]) says
//! it is and tells whether IPv4 or IPv6 follows, and where.
//!
//! It knows what each kind of protocol field means for IP (an Ethernet
//! type, a PPP protocol number, an address family...) and follows
//! 802.1Q/802.1ad VLAN tags behind Ethernet-typed headers.
//!
//! ```
//! use sluice_wire::link::LinkType;
//! use sluice_wire::network::{Ip, Locator};
//! let mut frame = [0u8; 34];
//! frame[12] = 0x08; // IPv4
//! frame[14] = 0x45;
//! let n = Locator::new(LinkType::EN10MB, false).locate(&frame).unwrap();
//! assert_eq!((n.offset, n.ip, n.vlans), (14, Ip::V4, 0));
//! ```

use crate::bytes::{be16, u32_at};
use crate::ether::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use crate::link::{Layout, LinkType, ProtoField};

/// `AF_INET`, the same on every system.
pub const AF_INET: u32 = 2;
/// `AF_INET6` on Linux.
pub const AF_INET6_LINUX: u32 = 10;
/// `AF_INET6` on the BSDs: NetBSD and OpenBSD (24), FreeBSD (28), macOS (30).
pub const AF_INET6_BSD: [u32; 3] = [24, 28, 30];
/// At most this many VLAN tags are followed.
pub const MAX_VLAN_TAGS: usize = 8;

/// Which IP a packet carries.
///
/// ```
/// assert_ne!(sluice_wire::network::Ip::V4, sluice_wire::network::Ip::V6);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// Where a packet's IP header is.
///
/// ```
/// use sluice_wire::network::{Ip, Network};
/// let n = Network { offset: 14, ip: Ip::V6, vlans: 0 };
/// assert_eq!(n.offset, 14);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Network {
    /// Offset of the IP header from the start of the packet.
    pub offset: usize,
    /// IPv4 or IPv6.
    pub ip: Ip,
    /// The 12-bit VLAN IDs of the tags in front of it, outermost in the low
    /// bits, 12 bits each (five tags fit; a sixth and later are folded in
    /// with xor); 0 for an untagged packet.
    pub vlans: u64,
}

/// How a link header says "IPv4" or "IPv6".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Proto {
    /// An Ethernet type at `at` (VLAN tags followed).
    EtherType { at: u32, vlan: bool },
    /// An 802.2 LLC header ending at the payload; a SNAP header's Ethernet type at `at`.
    Snap { at: u32 },
    /// A PPP protocol number at `at`.
    Ppp { at: u32 },
    /// A 4-byte address family at `at`, big-endian or little-endian.
    Family4 { at: u32, big: bool },
    /// A one-byte address family at `at` (Solaris ipnet).
    FamilyByte { at: u32 },
    /// The IP version nibble decides.
    Version,
    /// Always IPv4.
    Only4,
    /// Always IPv6.
    Only6,
    /// No IP behind this link that we can find.
    None,
}

/// Finds the network header of one link type.
///
/// ```
/// use sluice_wire::link::LinkType;
/// use sluice_wire::network::Locator;
/// let l = Locator::new(LinkType::EN10MB, false);
/// assert!(l.locate(&[0u8; 60]).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locator {
    proto: Proto,
    payload: u32,
}

impl Locator {
    /// The locator for a link type. `big_endian` is the capture file's byte
    /// order, which the NULL and ENC links use for their address family.
    ///
    /// ```
    /// use sluice_wire::link::LinkType;
    /// use sluice_wire::network::Locator;
    /// assert!(Locator::new(LinkType::LINUX_SLL2, false).knows_ip());
    /// assert!(!Locator::new(LinkType::USB_LINUX, false).knows_ip());
    /// ```
    pub fn new(lt: LinkType, big_endian: bool) -> Locator {
        let layout = Layout::of(lt);
        let at = layout.proto_at;
        let proto = match (layout.field, at) {
            (ProtoField::EtherType, Some(at)) => Proto::EtherType { at, vlan: true },
            (ProtoField::Sll, Some(at)) => Proto::EtherType { at, vlan: true },
            (ProtoField::CiscoHdlc | ProtoField::PlainEtherType, Some(at)) => {
                Proto::EtherType { at, vlan: false }
            }
            (ProtoField::Llc, Some(at)) if layout.payload >= 8 => Proto::Snap { at },
            (ProtoField::Ppp, Some(at)) => Proto::Ppp { at },
            (ProtoField::AddressFamily { network_order }, Some(at)) => Proto::Family4 {
                at,
                big: network_order || big_endian,
            },
            (ProtoField::EncFamily, Some(at)) => Proto::Family4 {
                at,
                big: big_endian,
            },
            // pflog's header length varies per packet; ipnet's is fixed.
            (ProtoField::FamilyByte, Some(at)) if lt == LinkType::IPNET => Proto::FamilyByte { at },
            (ProtoField::IpVersion, _) => Proto::Version,
            (ProtoField::OnlyIpv4, _) => Proto::Only4,
            (ProtoField::OnlyIpv6, _) => Proto::Only6,
            _ => Proto::None,
        };
        Locator {
            proto,
            payload: layout.payload,
        }
    }

    /// Whether IP packets can be found behind this link type at all.
    ///
    /// ```
    /// use sluice_wire::{link::LinkType, network::Locator};
    /// assert!(Locator::new(LinkType::NULL, true).knows_ip());
    /// ```
    pub fn knows_ip(&self) -> bool {
        self.proto != Proto::None
    }

    /// Where the IP header starts, which IP, and the VLAN IDs of the tags
    /// in front of it, if the packet carries IP.
    ///
    /// ```
    /// use sluice_wire::{link::LinkType, network::{Ip, Locator}};
    /// // BSD loopback, little-endian capture: AF_INET6 (FreeBSD's 28).
    /// let n = Locator::new(LinkType::NULL, false).locate(&[28, 0, 0, 0, 0x60]).unwrap();
    /// assert_eq!((n.offset, n.ip), (4, Ip::V6));
    /// ```
    #[inline]
    pub fn locate(&self, p: &[u8]) -> Option<Network> {
        let payload = self.payload as usize;
        let at = |offset: usize, ip: Ip| {
            Some(Network {
                offset,
                ip,
                vlans: 0,
            })
        };
        let by_type = |t: u16| match t {
            ETHERTYPE_IPV4 => Some(Ip::V4),
            ETHERTYPE_IPV6 => Some(Ip::V6),
            _ => None,
        };
        match self.proto {
            Proto::EtherType { at: type_at, vlan } => {
                let mut vlans = 0u64;
                let mut tags = 0;
                let max = if vlan { MAX_VLAN_TAGS } else { 0 };
                let (offset, t) =
                    ether::skip_vlan_tags(p, type_at as usize, payload, max, |tci| {
                        vlans ^= u64::from(tci & 0x0fff) << (12 * (tags % 5));
                        tags += 1;
                    })?;
                Some(Network {
                    offset,
                    ip: by_type(t)?,
                    vlans,
                })
            }
            Proto::Snap { at: type_at } => {
                let llc = payload - 8;
                if p.get(llc..llc + 6)? != [0xaa, 0xaa, 0x03, 0, 0, 0] {
                    return None;
                }
                at(payload, by_type(be16(p, type_at as usize)?)?)
            }
            Proto::Ppp { at: proto_at } => match be16(p, proto_at as usize)? {
                0x0021 => at(payload, Ip::V4),
                0x0057 => at(payload, Ip::V6),
                _ => None,
            },
            Proto::Family4 { at: family_at, big } => match u32_at(p, family_at as usize, big)? {
                AF_INET => at(payload, Ip::V4),
                AF_INET6_LINUX => at(payload, Ip::V6),
                af if AF_INET6_BSD.contains(&af) => at(payload, Ip::V6),
                _ => None,
            },
            // Solaris: AF_INET is 2, AF_INET6 26.
            Proto::FamilyByte { at: family_at } => match *p.get(family_at as usize)? {
                2 => at(payload, Ip::V4),
                26 => at(payload, Ip::V6),
                _ => None,
            },
            Proto::Version => match *p.get(payload)? >> 4 {
                4 => at(payload, Ip::V4),
                6 => at(payload, Ip::V6),
                _ => None,
            },
            Proto::Only4 => at(payload, Ip::V4),
            Proto::Only6 => at(payload, Ip::V6),
            Proto::None => None,
        }
    }
}
