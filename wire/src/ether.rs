//! Ethernet types and 802.1Q/802.1ad VLAN tags, for every link header
//! that names its payload with an Ethernet type (Ethernet, Linux cooked
//! capture, Cisco HDLC, SNAP).
//!
//! ```
//! use sluice_wire::ether::{self, ETHERTYPE_IPV4};
//! // Ethernet with one 802.1Q tag (VLAN 5) in front of IPv4.
//! let mut f = [0u8; 22];
//! f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
//! f[14..16].copy_from_slice(&5u16.to_be_bytes());
//! f[16..18].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
//! let mut vlans = Vec::new();
//! let end = ether::skip_vlan_tags(&f, 12, 14, usize::MAX, |tci| vlans.push(tci & 0xfff));
//! assert_eq!((end, vlans), (Some((18, ETHERTYPE_IPV4)), vec![5]));
//! ```

use crate::bytes::be16;

/// IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// The tag protocol identifiers of a VLAN tag: 802.1Q, 802.1ad and the
/// older 0x9100 used for stacked tags.
pub const VLAN_TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
/// The largest value of a type/length field that is an 802.3 length, not
/// an Ethernet type.
pub const MAX_8023_LENGTH: u16 = 1500;

/// Whether an Ethernet type announces a VLAN tag.
///
/// ```
/// assert!(sluice_wire::ether::is_vlan(0x88a8));
/// assert!(!sluice_wire::ether::is_vlan(0x0800));
/// ```
#[inline]
pub fn is_vlan(ethertype: u16) -> bool {
    VLAN_TPIDS.contains(&ethertype)
}

/// Follow the VLAN tags behind a link header whose Ethernet type is at
/// `type_at` and whose payload starts at `payload`: where the payload
/// behind the tags starts and the Ethernet type that names it. `tag` sees
/// each tag's TCI (priority, DEI and the 12-bit VLAN ID), outermost first.
/// At most `max_tags` tags are followed; past them the type is returned
/// as it is. `None` when the packet ends inside the type or a tag.
///
/// ```
/// use sluice_wire::ether::skip_vlan_tags;
/// let untagged = [0u8, 0, 0x86, 0xdd];
/// assert_eq!(skip_vlan_tags(&untagged, 2, 4, 8, |_| {}), Some((4, 0x86dd)));
/// let cut = [0x81u8, 0x00, 0, 5];
/// assert_eq!(skip_vlan_tags(&cut, 0, 2, 8, |_| {}), None);
/// ```
#[inline]
pub fn skip_vlan_tags(
    p: &[u8],
    type_at: usize,
    payload: usize,
    max_tags: usize,
    mut tag: impl FnMut(u16),
) -> Option<(usize, u16)> {
    let mut ty = be16(p, type_at)?;
    let mut off = payload;
    let mut tags = 0;
    while is_vlan(ty) && tags < max_tags {
        let tci = be16(p, off)?;
        ty = be16(p, off.checked_add(2)?)?;
        tag(tci);
        off += 4;
        tags += 1;
    }
    Some((off, ty))
}
