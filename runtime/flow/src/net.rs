//! Just enough header parsing for the statistics classes: where the IP
//! header starts on the common link types, and a packet's transport
//! five-tuple.

use sluice_wire::bytes::{be16, u32_at};
use sluice_wire::ether::{self, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use sluice_wire::link::{Layout, LinkType};
use sluice_wire::network::{AF_INET, AF_INET6_BSD};

/// A transport-layer flow key: addresses (IPv4 in the first 4 bytes), ports
/// and protocol.
///
/// ```
/// let k = sluice_flow::net::FiveTuple::default();
/// assert_eq!(k.proto, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// 4 for IPv4, 6 for IPv6.
    pub family: u8,
    /// IP protocol (6 TCP, 17 UDP, …).
    pub proto: u8,
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// Source port (0 when the protocol has none).
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
}

impl FiveTuple {
    /// The key with source and destination swapped.
    ///
    /// ```
    /// let k = sluice_flow::net::FiveTuple { sport: 1, dport: 2, ..Default::default() };
    /// assert_eq!(k.reversed().sport, 2);
    /// ```
    pub fn reversed(&self) -> FiveTuple {
        FiveTuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            ..*self
        }
    }

    /// Addresses and ports as text: `10.0.0.1:80 > 10.0.0.2:1234 tcp`.
    ///
    /// ```
    /// let mut k = sluice_flow::net::FiveTuple { family: 4, proto: 6, sport: 80, dport: 9, ..Default::default() };
    /// k.src[..4].copy_from_slice(&[10, 0, 0, 1]);
    /// assert_eq!(k.to_string(), "10.0.0.1:80 > 0.0.0.0:9 tcp");
    /// ```
    pub fn text(&self) -> String {
        self.to_string()
    }
}

fn addr(family: u8, a: &[u8; 16]) -> String {
    if family == 6 {
        std::net::Ipv6Addr::from(*a).to_string()
    } else {
        std::net::Ipv4Addr::new(a[0], a[1], a[2], a[3]).to_string()
    }
}

impl std::fmt::Display for FiveTuple {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let proto = match self.proto {
            6 => "tcp".to_string(),
            17 => "udp".to_string(),
            132 => "sctp".to_string(),
            1 => "icmp".to_string(),
            58 => "icmp6".to_string(),
            p => format!("proto {p}"),
        };
        let (s, d) = (addr(self.family, &self.src), addr(self.family, &self.dst));
        if self.family == 6 {
            write!(f, "[{s}]:{} > [{d}]:{} {proto}", self.sport, self.dport)
        } else {
            write!(f, "{s}:{} > {d}:{} {proto}", self.sport, self.dport)
        }
    }
}

/// Offset of the network header and its EtherType-style protocol for a
/// link type: Ethernet (with 802.1Q/802.1ad tags), raw IP, Linux cooked
/// v1/v2, BSD loopback (NULL/LOOP, the address family in either byte
/// order). Where the headers are comes from `sluice-wire`'s link table.
///
/// ```
/// let mut eth = [0u8; 20];
/// eth[12] = 0x08;
/// assert_eq!(sluice_flow::net::network_header(1, &eth), Some((14, 0x0800)));
/// assert_eq!(sluice_flow::net::network_header(101, &[0x45]), Some((0, 0x0800)));
/// ```
pub fn network_header(linktype: u16, p: &[u8]) -> Option<(usize, u16)> {
    let lt = LinkType::from_number(u32::from(linktype))?;
    let layout = Layout::of(lt);
    let proto_at = || layout.proto_at.map(|at| at as usize);
    let payload = layout.payload as usize;
    match lt {
        LinkType::EN10MB => ether::skip_vlan_tags(p, proto_at()?, payload, usize::MAX, |_| {}),
        // RAW (and its old numbers), IPV4, IPV6: the version nibble.
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 => {
            let v = p.first()? >> 4;
            Some((
                payload,
                if v == 6 {
                    ETHERTYPE_IPV6
                } else {
                    ETHERTYPE_IPV4
                },
            ))
        }
        LinkType::LINUX_SLL | LinkType::LINUX_SLL2 => Some((payload, be16(p, proto_at()?)?)),
        LinkType::NULL | LinkType::LOOP => {
            let at = proto_at()?;
            let fam = u32_at(p, at, false)?;
            let fam_be = u32_at(p, at, true)?;
            let v4 = fam == AF_INET || fam_be == AF_INET;
            let v6 = AF_INET6_BSD.contains(&fam) || AF_INET6_BSD.contains(&fam_be);
            v4.then_some((payload, ETHERTYPE_IPV4))
                .or(v6.then_some((payload, ETHERTYPE_IPV6)))
        }
        _ => None,
    }
}

/// Where a packet's transport header starts, with its five-tuple (first
/// fragments and unfragmented packets only; later fragments have no ports
/// and give `None`).
///
/// ```
/// // IPv4/UDP 10.0.0.1:53 > 10.0.0.2:1000 on a raw link.
/// let mut p = vec![0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// p.extend_from_slice(&[0, 53, 3, 232, 0, 8, 0, 0]);
/// let (k, off) = sluice_flow::net::five_tuple(101, &p).unwrap();
/// assert_eq!((k.proto, k.sport, k.dport, off), (17, 53, 1000, 20));
/// ```
pub fn five_tuple(linktype: u16, p: &[u8]) -> Option<(FiveTuple, usize)> {
    let (nh, et) = network_header(linktype, p)?;
    let mut k = FiveTuple::default();
    let (th, proto) = match et {
        ETHERTYPE_IPV4 => {
            let v = *p.get(nh)?;
            if v >> 4 != 4 {
                return None;
            }
            let ihl = ((v & 0xf) as usize) * 4;
            if ihl < 20 || p.len() < nh + 20 {
                return None;
            }
            let frag = be16(p, nh + 6)? & 0x1fff;
            if frag != 0 {
                return None;
            }
            k.family = 4;
            k.src[..4].copy_from_slice(&p[nh + 12..nh + 16]);
            k.dst[..4].copy_from_slice(&p[nh + 16..nh + 20]);
            (nh + ihl, p[nh + 9])
        }
        ETHERTYPE_IPV6 => {
            if p.len() < nh + 40 || p[nh] >> 4 != 6 {
                return None;
            }
            k.family = 6;
            k.src.copy_from_slice(&p[nh + 8..nh + 24]);
            k.dst.copy_from_slice(&p[nh + 24..nh + 40]);
            (nh + 40, p[nh + 6])
        }
        _ => return None,
    };
    k.proto = proto;
    if matches!(proto, 6 | 17 | 132) {
        k.sport = be16(p, th)?;
        k.dport = be16(p, th + 2)?;
    }
    Some((k, th))
}

/// The payload of a TCP segment (after its options), or of a UDP datagram.
///
/// ```
/// let mut p = vec![0x45, 0, 0, 44, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
/// p.extend_from_slice(&[0, 80, 3, 232, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0, 0, 0, 0, 0, 0, 0]);
/// p.extend_from_slice(b"GET /");
/// assert_eq!(sluice_flow::net::payload(101, &p).unwrap().1, b"GET /");
/// ```
pub fn payload(linktype: u16, p: &[u8]) -> Option<(FiveTuple, &[u8])> {
    let (k, th) = five_tuple(linktype, p)?;
    let start = match k.proto {
        6 => th + ((*p.get(th + 12)? >> 4) as usize) * 4,
        17 => th + 8,
        _ => return None,
    };
    Some((k, p.get(start..)?))
}
