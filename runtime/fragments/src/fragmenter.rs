//! A small IP fragmenter for tests, benchmarks and examples: real IPv4 and
//! IPv6 headers (lengths, identification, flags, offsets, next headers and
//! checksums all filled in), UDP or TCP inside, wrapped in a link header.
//!
//! ```
//! use sluice_fragments::fragmenter::{Datagram, Link};
//! let d = Datagram::tcp_v6([1; 16], [2; 16], 1234, 80, 77, &[0; 3000]).with_hop_by_hop();
//! let frags = d.fragments(4);
//! assert_eq!(frags.len(), 4);
//! assert_eq!(Link::Sll2.wrap(&frags[0]).len(), 20 + frags[0].len());
//! ```

/// One IP datagram before fragmentation.
///
/// ```
/// let d = sluice_fragments::fragmenter::Datagram::udp_v4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 3, b"hi");
/// assert_eq!(d.whole().len(), 20 + 8 + 2);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// IPv6 rather than IPv4.
    pub v6: bool,
    /// Source address (IPv4 in the first 4 bytes).
    pub src: [u8; 16],
    /// Destination address (IPv4 in the first 4 bytes).
    pub dst: [u8; 16],
    /// Upper-layer protocol.
    pub proto: u8,
    /// Identification (IPv4 uses the low 16 bits).
    pub id: u32,
    /// IPv6 only: put a Hop-by-Hop Options header in the unfragmentable part.
    pub hop_by_hop: bool,
    /// The fragmentable part: transport header and data.
    pub payload: Vec<u8>,
}

fn v4(a: [u8; 4]) -> [u8; 16] {
    let mut o = [0; 16];
    o[..4].copy_from_slice(&a);
    o
}

/// The Internet checksum of some byte slices, as if concatenated (each
/// slice but the last must have an even length).
pub(crate) fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum: u32 = 0;
    for p in parts {
        let mut c = p.chunks_exact(2);
        for w in &mut c {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [b] = c.remainder() {
            sum += u32::from(*b) << 8;
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Datagram {
    fn new(v6: bool, src: [u8; 16], dst: [u8; 16], proto: u8, id: u32, l4: Vec<u8>) -> Datagram {
        let mut d = Datagram {
            v6,
            src,
            dst,
            proto,
            id,
            hop_by_hop: false,
            payload: l4,
        };
        d.transport_checksum();
        d
    }

    /// Fill in the UDP or TCP checksum over the pseudo-header and payload.
    fn transport_checksum(&mut self) {
        let at = match self.proto {
            17 => 6,
            6 => 16,
            _ => return,
        };
        self.payload[at] = 0;
        self.payload[at + 1] = 0;
        let len = self.payload.len() as u32;
        let sum = if self.v6 {
            let mut ph = [0u8; 40];
            ph[..16].copy_from_slice(&self.src);
            ph[16..32].copy_from_slice(&self.dst);
            ph[32..36].copy_from_slice(&len.to_be_bytes());
            ph[39] = self.proto;
            checksum(&[&ph, &self.payload])
        } else {
            let mut ph = [0u8; 12];
            ph[..4].copy_from_slice(&self.src[..4]);
            ph[4..8].copy_from_slice(&self.dst[..4]);
            ph[9] = self.proto;
            ph[10..12].copy_from_slice(&(len as u16).to_be_bytes());
            checksum(&[&ph, &self.payload])
        };
        // UDP sends a computed 0 as 0xffff.
        let sum = if sum == 0 && self.proto == 17 {
            0xffff
        } else {
            sum
        };
        self.payload[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    }

    fn udp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
        let mut u = Vec::with_capacity(8 + data.len());
        u.extend_from_slice(&sport.to_be_bytes());
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(data);
        u
    }

    fn tcp(sport: u16, dport: u16, data: &[u8]) -> Vec<u8> {
        let mut t = Vec::with_capacity(20 + data.len());
        t.extend_from_slice(&sport.to_be_bytes());
        t.extend_from_slice(&dport.to_be_bytes());
        t.extend_from_slice(&1000u32.to_be_bytes()); // sequence
        t.extend_from_slice(&2000u32.to_be_bytes()); // acknowledgement
        t.extend_from_slice(&[0x50, 0x18]); // 20-byte header, PSH ACK
        t.extend_from_slice(&65535u16.to_be_bytes()); // window
        t.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
        t.extend_from_slice(data);
        t
    }

    /// A UDP datagram over IPv4.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::udp_v4([1; 4], [2; 4], 1, 53, 9, &[0; 8]);
    /// assert_eq!(d.proto, 17);
    /// ```
    pub fn udp_v4(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        id: u16,
        data: &[u8],
    ) -> Datagram {
        Datagram::new(
            false,
            v4(src),
            v4(dst),
            17,
            u32::from(id),
            Datagram::udp(sport, dport, data),
        )
    }

    /// A TCP segment over IPv4.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::tcp_v4([1; 4], [2; 4], 1, 80, 9, &[]);
    /// assert_eq!(d.payload.len(), 20);
    /// ```
    pub fn tcp_v4(
        src: [u8; 4],
        dst: [u8; 4],
        sport: u16,
        dport: u16,
        id: u16,
        data: &[u8],
    ) -> Datagram {
        Datagram::new(
            false,
            v4(src),
            v4(dst),
            6,
            u32::from(id),
            Datagram::tcp(sport, dport, data),
        )
    }

    /// A UDP datagram over IPv6.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::udp_v6([1; 16], [2; 16], 1, 53, 9, &[]);
    /// assert!(d.v6);
    /// ```
    pub fn udp_v6(
        src: [u8; 16],
        dst: [u8; 16],
        sport: u16,
        dport: u16,
        id: u32,
        data: &[u8],
    ) -> Datagram {
        Datagram::new(true, src, dst, 17, id, Datagram::udp(sport, dport, data))
    }

    /// A TCP segment over IPv6.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::tcp_v6([1; 16], [2; 16], 1, 80, 9, &[]);
    /// assert_eq!(d.proto, 6);
    /// ```
    pub fn tcp_v6(
        src: [u8; 16],
        dst: [u8; 16],
        sport: u16,
        dport: u16,
        id: u32,
        data: &[u8],
    ) -> Datagram {
        Datagram::new(true, src, dst, 6, id, Datagram::tcp(sport, dport, data))
    }

    /// IPv6: with a Hop-by-Hop Options header (padding only) before the
    /// Fragment header, so finding it means walking the header chain.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::udp_v6([1; 16], [2; 16], 1, 53, 9, &[]).with_hop_by_hop();
    /// assert_eq!(d.whole()[6], 0);
    /// ```
    pub fn with_hop_by_hop(mut self) -> Datagram {
        self.hop_by_hop = self.v6;
        self
    }

    /// The IP header of a piece carrying `len` bytes of the fragmentable
    /// part at `offset`; `frag` adds the fragment fields.
    fn header(&self, len: usize, offset: usize, frag: Option<bool>) -> Vec<u8> {
        if self.v6 {
            let ext = if self.hop_by_hop { 8 } else { 0 } + if frag.is_some() { 8 } else { 0 };
            let mut h = vec![0u8; 40];
            h[0] = 0x60;
            h[4..6].copy_from_slice(&((ext + len) as u16).to_be_bytes());
            let after_hbh = if frag.is_some() { 44 } else { self.proto };
            h[6] = if self.hop_by_hop { 0 } else { after_hbh };
            h[7] = 64;
            h[8..24].copy_from_slice(&self.src);
            h[24..40].copy_from_slice(&self.dst);
            if self.hop_by_hop {
                // Next header, length 0 (8 bytes), one PadN option of 4 bytes.
                h.extend_from_slice(&[after_hbh, 0, 1, 4, 0, 0, 0, 0]);
            }
            if let Some(more) = frag {
                let field = ((offset / 8) as u16) << 3 | u16::from(more);
                h.push(self.proto);
                h.push(0);
                h.extend_from_slice(&field.to_be_bytes());
                h.extend_from_slice(&self.id.to_be_bytes());
            }
            h
        } else {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            h[2..4].copy_from_slice(&((20 + len) as u16).to_be_bytes());
            h[4..6].copy_from_slice(&(self.id as u16).to_be_bytes());
            let more = frag.unwrap_or(false);
            let field = (offset / 8) as u16 | if more { 0x2000 } else { 0 };
            h[6..8].copy_from_slice(&field.to_be_bytes());
            h[8] = 64;
            h[9] = self.proto;
            h[12..16].copy_from_slice(&self.src[..4]);
            h[16..20].copy_from_slice(&self.dst[..4]);
            let sum = checksum(&[&h]);
            h[10..12].copy_from_slice(&sum.to_be_bytes());
            h
        }
    }

    /// The datagram unfragmented.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::udp_v4([1; 4], [2; 4], 1, 2, 3, &[]);
    /// assert_eq!(d.whole()[6] & 0x3f, 0);
    /// ```
    pub fn whole(&self) -> Vec<u8> {
        let mut p = self.header(self.payload.len(), 0, None);
        p.extend_from_slice(&self.payload);
        p
    }

    /// The datagram in `n` fragments (fewer if the payload is too short for
    /// `n` pieces of at least 8 bytes; the whole datagram if `n` < 2), in
    /// offset order. Every piece but the last carries a multiple of 8 bytes.
    ///
    /// ```
    /// let d = sluice_fragments::fragmenter::Datagram::udp_v4([1; 4], [2; 4], 1, 2, 3, &[0; 92]);
    /// let f = d.fragments(3);
    /// assert_eq!(f.len(), 3);
    /// assert_eq!(f[1][6..8], [0x20, 5]); // MF, offset 5 × 8 = 40
    /// ```
    pub fn fragments(&self, n: usize) -> Vec<Vec<u8>> {
        let len = self.payload.len();
        if n < 2 || len <= 8 {
            return vec![self.whole()];
        }
        let chunk = len.div_ceil(n).div_ceil(8).max(1) * 8;
        let mut out = Vec::new();
        let mut at = 0;
        while at < len {
            let end = (at + chunk).min(len);
            let mut p = self.header(end - at, at, Some(end < len));
            p.extend_from_slice(&self.payload[at..end]);
            out.push(p);
            at = end;
        }
        out
    }
}

/// A link header to put in front of IP packets.
///
/// ```
/// use sluice_fragments::fragmenter::Link;
/// assert_eq!(Link::Ethernet.linktype(), 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    /// LINKTYPE_RAW: no link header.
    Raw,
    /// Ethernet II.
    Ethernet,
    /// Ethernet with one 802.1Q tag of this VLAN id.
    Vlan(u16),
    /// Ethernet with an 802.1ad outer tag and an 802.1Q inner tag.
    QinQ(u16, u16),
    /// Linux cooked capture v1.
    Sll,
    /// Linux cooked capture v2.
    Sll2,
    /// BSD loopback with the address family little-endian (a little-endian
    /// capture's NULL link).
    NullLe,
    /// OpenBSD loopback (LOOP): the address family big-endian.
    Loop,
}

impl Link {
    /// Every link here.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::fragmenter::Link::ALL.len(), 8);
    /// ```
    pub const ALL: [Link; 8] = [
        Link::Raw,
        Link::Ethernet,
        Link::Vlan(7),
        Link::QinQ(100, 200),
        Link::Sll,
        Link::Sll2,
        Link::NullLe,
        Link::Loop,
    ];

    /// The LINKTYPE number.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::fragmenter::Link::Sll2.linktype(), 276);
    /// ```
    pub fn linktype(self) -> u16 {
        match self {
            Link::Raw => 101,
            Link::Ethernet | Link::Vlan(_) | Link::QinQ(..) => 1,
            Link::Sll => 113,
            Link::Sll2 => 276,
            Link::NullLe => 0,
            Link::Loop => 108,
        }
    }

    /// The VLAN IDs of this link's tags as a datagram key holds them
    /// ([`crate::parse::Key::vlan`]: outermost in the low 12 bits).
    ///
    /// ```
    /// use sluice_fragments::fragmenter::Link;
    /// assert_eq!(Link::QinQ(1, 2).vlan_ids(), 1 | 2 << 12);
    /// assert_eq!(Link::Sll.vlan_ids(), 0);
    /// ```
    pub fn vlan_ids(self) -> u64 {
        match self {
            Link::Vlan(v) => u64::from(v & 0x0fff),
            Link::QinQ(outer, inner) => u64::from(outer & 0x0fff) | u64::from(inner & 0x0fff) << 12,
            _ => 0,
        }
    }

    /// `ip` behind this link's header (the IP version picks the protocol).
    ///
    /// ```
    /// use sluice_fragments::fragmenter::Link;
    /// let p = Link::Vlan(5).wrap(&[0x45; 20]);
    /// assert_eq!(p[12..18], [0x81, 0, 0, 5, 8, 0]);
    /// ```
    pub fn wrap(self, ip: &[u8]) -> Vec<u8> {
        let v6 = ip.first().is_some_and(|b| b >> 4 == 6);
        let ethertype: u16 = if v6 { 0x86dd } else { 0x0800 };
        let macs = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        let mut p = Vec::with_capacity(ip.len() + 24);
        match self {
            Link::Raw => {}
            Link::Ethernet => {
                p.extend_from_slice(&macs);
                p.extend_from_slice(&ethertype.to_be_bytes());
            }
            Link::Vlan(v) => {
                p.extend_from_slice(&macs);
                p.extend_from_slice(&[0x81, 0]);
                p.extend_from_slice(&v.to_be_bytes());
                p.extend_from_slice(&ethertype.to_be_bytes());
            }
            Link::QinQ(outer, inner) => {
                p.extend_from_slice(&macs);
                p.extend_from_slice(&[0x88, 0xa8]);
                p.extend_from_slice(&outer.to_be_bytes());
                p.extend_from_slice(&[0x81, 0]);
                p.extend_from_slice(&inner.to_be_bytes());
                p.extend_from_slice(&ethertype.to_be_bytes());
            }
            Link::Sll => {
                // Packet type (to us), ARPHRD_ETHER, address length 6, address, protocol.
                p.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
                p.extend_from_slice(&ethertype.to_be_bytes());
            }
            Link::Sll2 => {
                p.extend_from_slice(&ethertype.to_be_bytes());
                p.extend_from_slice(&[0, 0]); // reserved
                p.extend_from_slice(&2u32.to_be_bytes()); // interface index
                p.extend_from_slice(&[0, 1, 0, 6]); // ARPHRD_ETHER, to us, address length
                p.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
            }
            Link::NullLe => p.extend_from_slice(&(if v6 { 24u32 } else { 2 }).to_le_bytes()),
            Link::Loop => p.extend_from_slice(&(if v6 { 24u32 } else { 2 }).to_be_bytes()),
        }
        p.extend_from_slice(ip);
        p
    }
}
