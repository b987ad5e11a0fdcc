//! Reading and writing capture files (pcap and pcapng) for sluice.
//!
//! * [`CaptureReader`] streams packets from pcap (micro- and nanosecond,
//!   both byte orders) or pcapng (several sections and interfaces, enhanced,
//!   simple and obsolete packet blocks) with constant memory and no
//!   allocation per packet.
//! * [`CaptureWriter`] writes pcap or pcapng, mirroring a reader's
//!   [`CaptureFormat`] when asked to.
//! * [`CaptureError`] names the file, the byte offset and the problem.
//! * [`Packet`] is a packet borrowed from a buffer, [`OwnedPacket`] one
//!   that owns its bytes: the two packet types of every stage after this.
//! * [`sink`] writes accepted packets to files safely: no clobbering, no
//!   half-written files, rotation, one file per filter.
//! * [`decompress`] and [`SeekableInput`] take a gzip or zstd layer off a
//!   capture as it is read ([`Compression`] tells them apart), for every
//!   reader of captures alike.
//!
//! ```
//! use sluice_capture::{CaptureReader, CaptureWriter, CaptureFormat, Packet};
//!
//! let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcapng())?;
//! w.write_packet(&Packet::new(10, 20, 1, &[0xff; 14]))?;
//! let file = w.finish()?;
//!
//! let mut r = CaptureReader::from_reader(&file[..], "mem")?;
//! let out_format = r.format();
//! let mut out = CaptureWriter::new(Vec::new(), "copy", &out_format)?;
//! while let Some(p) = r.next_packet()? {
//!     out.write_packet(&p)?;
//! }
//! assert_eq!(out.finish()?, file);
//! # Ok::<(), sluice_capture::CaptureError>(())
//! ```
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod compress;
mod error;
mod format;
mod input;
#[allow(unsafe_code)]
mod mapped;
mod owned;
mod range;
mod reader;
pub mod sink;
mod writer;

pub use compress::{decompress, Compression, DecompressError, SeekableInput};
pub use error::{CaptureError, ErrorKind};
pub use format::{max_snaplen_for_linktype, CaptureFormat, InterfaceInfo};
pub use mapped::Mapped;
pub use owned::OwnedPacket;
pub use range::{
    open_range, verify_chain, BadCheckpoint, CaptureRange, ChainFault, Checkpoint, RangeEnds,
};
pub use reader::CaptureReader;
pub use writer::CaptureWriter;

/// One packet: its timestamp, lengths, link type and captured bytes.
///
/// Packets from a [`CaptureReader`] borrow the reader's buffer. To write a
/// packet of your own, build one with [`Packet::new`] or a struct literal.
///
/// ```
/// use sluice_capture::Packet;
///
/// let p = Packet { wirelen: 60, snaplen: 65535, ..Packet::new(1_700_000_000, 5, 1, &[0u8; 42]) };
/// assert_eq!(p.caplen, 42);
/// assert_eq!(p.wirelen, 60);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Seconds since 1970-01-01 UTC (pcapng `if_tsoffset` applied).
    pub ts_sec: i64,
    /// Nanoseconds within the second, whatever the file's resolution.
    pub ts_nsec: u32,
    /// Captured length: the length of `data`.
    pub caplen: u32,
    /// Length of the packet on the wire (original length).
    pub wirelen: u32,
    /// Link-layer header type of the packet's interface (`LINKTYPE_*`).
    pub linktype: u16,
    /// Snapshot length of the file (pcap) or of the packet's interface (pcapng).
    pub snaplen: u32,
    /// pcapng interface index within its section (0 for pcap).
    pub interface: u32,
    /// The captured bytes.
    pub data: &'a [u8],
}

impl<'a> Packet<'a> {
    /// A copy that owns its bytes.
    ///
    /// ```
    /// use sluice_capture::Packet;
    /// let p = Packet::new(1, 2, 1, b"abc");
    /// assert_eq!(p.to_owned_packet().as_packet(), p);
    /// ```
    pub fn to_owned_packet(&self) -> OwnedPacket {
        OwnedPacket::from(self)
    }

    /// A packet with these timestamp, link type and bytes; `caplen` and
    /// `wirelen` are `data.len()`, `snaplen` is 262144 and `interface` 0.
    ///
    /// ```
    /// use sluice_capture::Packet;
    /// let p = Packet::new(1, 2, 1, b"hello");
    /// assert_eq!((p.caplen, p.wirelen, p.snaplen), (5, 5, 262144));
    /// ```
    pub fn new(ts_sec: i64, ts_nsec: u32, linktype: u16, data: &'a [u8]) -> Self {
        let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
        Packet {
            ts_sec,
            ts_nsec,
            caplen: len,
            wirelen: len,
            linktype,
            snaplen: 262_144,
            interface: 0,
            data,
        }
    }
}

#[cfg(test)]
mod tests;
