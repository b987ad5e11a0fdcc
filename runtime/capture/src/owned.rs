//! The owned packet: what a stage keeps after the buffer a [`Packet`]
//! borrowed from is gone (a packet held back, queued to another thread,
//! or built by a source).
//!
//! The rule: the fields are [`Packet`]'s, with the bytes owned; one
//! converts to the other without loss, and no other stage defines its own
//! packet metadata.

use crate::Packet;

/// A packet that owns its bytes; [`as_packet`](Self::as_packet) lends it
/// out as a [`Packet`].
///
/// ```
/// use sluice_capture::{OwnedPacket, Packet};
/// let mut o = OwnedPacket::default();
/// o.set(&Packet::new(5, 6, 1, &[1, 2, 3]));
/// assert_eq!(o.as_packet().data, &[1, 2, 3]);
/// assert_eq!((o.ts_sec, o.ts_nsec, o.caplen), (5, 6, 3));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OwnedPacket {
    /// Seconds since 1970-01-01 UTC.
    pub ts_sec: i64,
    /// Nanoseconds within the second.
    pub ts_nsec: u32,
    /// Captured length (`data.len()` unless a source cut the bytes kept).
    pub caplen: u32,
    /// Length on the wire.
    pub wirelen: u32,
    /// Link-layer header type (`LINKTYPE_*`).
    pub linktype: u16,
    /// Snapshot length of the packet's file or interface.
    pub snaplen: u32,
    /// pcapng interface index within its section (0 for pcap).
    pub interface: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

impl OwnedPacket {
    /// Become a copy of `p`, reusing this packet's allocation.
    pub fn set(&mut self, p: &Packet<'_>) {
        self.ts_sec = p.ts_sec;
        self.ts_nsec = p.ts_nsec;
        self.caplen = p.caplen;
        self.wirelen = p.wirelen;
        self.linktype = p.linktype;
        self.snaplen = p.snaplen;
        self.interface = p.interface;
        self.data.clear();
        self.data.extend_from_slice(p.data);
    }

    /// The packet, borrowed.
    pub fn as_packet(&self) -> Packet<'_> {
        Packet {
            ts_sec: self.ts_sec,
            ts_nsec: self.ts_nsec,
            caplen: self.caplen,
            wirelen: self.wirelen,
            linktype: self.linktype,
            snaplen: self.snaplen,
            interface: self.interface,
            data: &self.data,
        }
    }
}

impl From<&Packet<'_>> for OwnedPacket {
    fn from(p: &Packet<'_>) -> OwnedPacket {
        let mut o = OwnedPacket::default();
        o.set(p);
        o
    }
}
