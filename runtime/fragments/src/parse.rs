//! Finding the IP header behind a link header, and the fragment fields in it.
//!
//! Where the IP header starts behind a link header is `sluice-wire`'s
//! business ([`sluice_wire::network::Locator`], from sluice's one
//! link-type table); this module reads the fragment fields of the IPv4
//! header or IPv6 fragment header found there.
//!
//! ```
//! use sluice_fragments::parse::{Locator, Piece};
//! use sluice_wire::link::LinkType;
//! // A raw IPv4 packet: offset 185 × 8 bytes, no MF: the last fragment.
//! let mut ip = [0u8; 28];
//! ip[0] = 0x45;
//! ip[4..6].copy_from_slice(&7u16.to_be_bytes());
//! ip[6..8].copy_from_slice(&185u16.to_be_bytes());
//! ip[9] = 17;
//! let f = Locator::new(LinkType::RAW, false).fragment(&ip).unwrap();
//! assert_eq!((f.piece, f.offset, f.key.id), (Piece::Later, 1480, 7));
//! ```

use sluice_wire::link::LinkType;
use sluice_wire::network::{Ip, Network};

/// Which datagram a fragment belongs to: source, destination, protocol
/// (IPv4's protocol field, or the next-header field of IPv6's fragment
/// header) and identification, and the VLAN IDs of the tags the packet
/// carried: the same addresses and identification on two VLANs (private
/// address space reused per VLAN) are two datagrams.
///
/// ```
/// use sluice_fragments::parse::Key;
/// let k = Key::v4([10, 0, 0, 1], [10, 0, 0, 2], 17, 99);
/// assert!(!k.v6 && k.id == 99 && k.vlan == 0);
/// assert_ne!(k, k.on_vlans(7));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    /// IPv6 (addresses use all 16 bytes) rather than IPv4 (the first 4).
    pub v6: bool,
    /// Upper-layer protocol.
    pub proto: u8,
    /// Identification (16 bits for IPv4, 32 for IPv6).
    pub id: u32,
    /// Source address.
    pub src: [u8; 16],
    /// Destination address.
    pub dst: [u8; 16],
    /// The 12-bit VLAN IDs of the packet's tags, outermost in the low bits,
    /// 12 bits each (five tags fit; a sixth and later are folded in with
    /// xor); 0 for an untagged packet.
    pub vlan: u64,
}

/// Six words instead of the derived field-by-field hashing (a third of
/// the time of a fragment went into hashing its key).
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let word = |b: &[u8; 16], at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_ne_bytes(w)
        };
        h.write_u64(word(&self.src, 0));
        h.write_u64(word(&self.src, 8));
        h.write_u64(word(&self.dst, 0));
        h.write_u64(word(&self.dst, 8));
        h.write_u64(u64::from(self.id) << 16 | u64::from(self.proto) << 8 | u64::from(self.v6));
        h.write_u64(self.vlan);
    }
}

impl Key {
    /// An IPv4 datagram's key.
    ///
    /// ```
    /// let k = sluice_fragments::parse::Key::v4([1, 2, 3, 4], [5, 6, 7, 8], 6, 1);
    /// assert_eq!(&k.src[..4], &[1, 2, 3, 4]);
    /// ```
    pub fn v4(src: [u8; 4], dst: [u8; 4], proto: u8, id: u16) -> Key {
        let mut k = Key {
            v6: false,
            proto,
            id: u32::from(id),
            src: [0; 16],
            dst: [0; 16],
            vlan: 0,
        };
        k.src[..4].copy_from_slice(&src);
        k.dst[..4].copy_from_slice(&dst);
        k
    }

    /// An IPv6 datagram's key.
    ///
    /// ```
    /// let k = sluice_fragments::parse::Key::v6([1; 16], [2; 16], 17, 1 << 20);
    /// assert!(k.v6);
    /// ```
    pub fn v6(src: [u8; 16], dst: [u8; 16], proto: u8, id: u32) -> Key {
        Key {
            v6: true,
            proto,
            id,
            src,
            dst,
            vlan: 0,
        }
    }

    /// The same datagram key for a packet that carried VLAN tags (`vlan`
    /// as in [`Key::vlan`]).
    ///
    /// ```
    /// let k = sluice_fragments::parse::Key::v4([1, 2, 3, 4], [5, 6, 7, 8], 6, 1).on_vlans(3);
    /// assert_eq!(k.vlan, 3);
    /// ```
    pub fn on_vlans(self, vlan: u64) -> Key {
        Key { vlan, ..self }
    }
}

/// Where a fragment lies in its datagram.
///
/// ```
/// use sluice_fragments::parse::Piece;
/// assert_ne!(Piece::First, Piece::Later);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Offset 0 with more fragments to come: the fragment holding the
    /// upper-layer header.
    First,
    /// Any other fragment (offset above 0; the last one has no MF/M flag).
    Later,
}

/// The fragment fields of one packet.
///
/// ```
/// use sluice_fragments::parse::{Fragment, Key, Piece};
/// let f = Fragment { key: Key::v4([0; 4], [0; 4], 17, 1), piece: Piece::First, offset: 0, more: true };
/// assert!(f.more);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    /// The datagram.
    pub key: Key,
    /// First or later.
    pub piece: Piece,
    /// Byte offset of this fragment's data in the datagram.
    pub offset: u32,
    /// More fragments follow (IPv4 MF, IPv6 M).
    pub more: bool,
}

/// Finds the network header of one link type and reads fragment fields.
///
/// ```
/// use sluice_fragments::parse::Locator;
/// use sluice_wire::link::LinkType;
/// let l = Locator::new(LinkType::EN10MB, false);
/// assert!(l.fragment(&[0u8; 60]).is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locator(sluice_wire::network::Locator);

/// At most this many IPv6 extension headers are walked before giving up.
const MAX_EXTENSIONS: usize = 16;

impl Locator {
    /// The locator for a link type. `big_endian` is the capture file's byte
    /// order, which the NULL and ENC links use for their address family.
    ///
    /// ```
    /// use sluice_fragments::parse::Locator;
    /// use sluice_wire::link::LinkType;
    /// assert!(Locator::new(LinkType::LINUX_SLL2, false).knows_ip());
    /// assert!(!Locator::new(LinkType::USB_LINUX, false).knows_ip());
    /// ```
    pub fn new(lt: LinkType, big_endian: bool) -> Locator {
        Locator(sluice_wire::network::Locator::new(lt, big_endian))
    }

    /// Whether IP packets can be found behind this link type at all.
    ///
    /// ```
    /// use sluice_fragments::parse::Locator;
    /// assert!(Locator::new(sluice_wire::link::LinkType::NULL, true).knows_ip());
    /// ```
    pub fn knows_ip(&self) -> bool {
        self.0.knows_ip()
    }

    /// The packet's fragment fields; `None` for anything that is not an IP
    /// fragment (not IP, not fragmented, an IPv6 atomic fragment, or
    /// captured too short to tell).
    ///
    /// ```
    /// use sluice_fragments::parse::Locator;
    /// use sluice_wire::link::LinkType;
    /// let mut ip = [0u8; 20];
    /// ip[0] = 0x45;
    /// ip[6] = 0x20; // MF, offset 0
    /// assert!(Locator::new(LinkType::IPV4, false).fragment(&ip).is_some());
    /// ip[6] = 0x40; // DF only
    /// assert!(Locator::new(LinkType::IPV4, false).fragment(&ip).is_none());
    /// ```
    #[inline]
    pub fn fragment(&self, p: &[u8]) -> Option<Fragment> {
        let Network { offset, ip, vlans } = self.0.locate(p)?;
        let mut f = match ip {
            Ip::V4 => v4(p, offset),
            Ip::V6 => v6(p, offset),
        }?;
        f.key.vlan = vlans;
        Some(f)
    }
}

#[inline]
fn v4(p: &[u8], off: usize) -> Option<Fragment> {
    let h = p.get(off..off.checked_add(20)?)?;
    if h[0] >> 4 != 4 || h[0] & 0x0f < 5 {
        return None;
    }
    let flags = u16::from_be_bytes([h[6], h[7]]);
    let offset = u32::from(flags & 0x1fff) * 8;
    let more = flags & 0x2000 != 0;
    if offset == 0 && !more {
        return None;
    }
    let mut src = [0; 4];
    let mut dst = [0; 4];
    src.copy_from_slice(&h[12..16]);
    dst.copy_from_slice(&h[16..20]);
    Some(Fragment {
        key: Key::v4(src, dst, h[9], u16::from_be_bytes([h[4], h[5]])),
        piece: if offset == 0 {
            Piece::First
        } else {
            Piece::Later
        },
        offset,
        more,
    })
}

#[inline]
fn v6(p: &[u8], off: usize) -> Option<Fragment> {
    let h = p.get(off..off.checked_add(40)?)?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let mut next = h[6];
    let mut at = off + 40;
    for _ in 0..MAX_EXTENSIONS {
        match next {
            // Hop-by-hop, routing, destination options, mobility, HIP, shim6:
            // length in 8-byte units, not counting the first 8.
            0 | 43 | 60 | 135 | 139 | 140 => {
                let e = p.get(at..at + 2)?;
                next = e[0];
                at += (usize::from(e[1]) + 1) * 8;
            }
            // Authentication header: length in 4-byte units, not counting the first 8.
            51 => {
                let e = p.get(at..at + 2)?;
                next = e[0];
                at += (usize::from(e[1]) + 2) * 4;
            }
            44 => {
                let f = p.get(at..at + 8)?;
                let field = u16::from_be_bytes([f[2], f[3]]);
                let offset = u32::from(field >> 3) * 8;
                let more = field & 1 != 0;
                if offset == 0 && !more {
                    // An atomic fragment (RFC 6946): a whole datagram.
                    return None;
                }
                let mut src = [0; 16];
                let mut dst = [0; 16];
                src.copy_from_slice(&h[8..24]);
                dst.copy_from_slice(&h[24..40]);
                return Some(Fragment {
                    key: Key::v6(src, dst, f[0], u32::from_be_bytes([f[4], f[5], f[6], f[7]])),
                    piece: if offset == 0 {
                        Piece::First
                    } else {
                        Piece::Later
                    },
                    offset,
                    more,
                });
            }
            _ => return None,
        }
    }
    None
}
