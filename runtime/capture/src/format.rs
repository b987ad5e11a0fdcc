//! Format descriptions and on-disk constants.

pub(crate) const BLOCK_SHB: u32 = 0x0A0D_0D0A;
pub(crate) const BLOCK_IDB: u32 = 1;
pub(crate) const BLOCK_OPB: u32 = 2;
pub(crate) const BLOCK_SPB: u32 = 3;
pub(crate) const BLOCK_EPB: u32 = 6;
pub(crate) const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// Largest pcapng block this reader buffers (packet and interface blocks).
pub(crate) const MAX_BLOCK_LEN: u32 = 256 * 1024 * 1024;

/// The largest captured length that is sane for a link type (libpcap's
/// rule: 262144 bytes, more for a few link types that carry big messages);
/// the link-type table's [`sluice_wire::link::max_snaplen`].
///
/// ```
/// use sluice_capture::max_snaplen_for_linktype;
/// assert_eq!(max_snaplen_for_linktype(1), 262_144);
/// assert_eq!(max_snaplen_for_linktype(231), 128 * 1024 * 1024); // D-Bus
/// ```
pub fn max_snaplen_for_linktype(linktype: u16) -> u32 {
    sluice_wire::link::max_snaplen(linktype)
}

/// Link type and snapshot length of one pcapng interface.
///
/// ```
/// use sluice_capture::InterfaceInfo;
/// let i = InterfaceInfo { linktype: 1, snaplen: 65535 };
/// assert_eq!(i.linktype, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InterfaceInfo {
    /// Link-layer header type (`LINKTYPE_*` value).
    pub linktype: u16,
    /// Snapshot length declared for the interface (0: unlimited).
    pub snaplen: u32,
}

/// Which capture file format a file has or should have.
///
/// A reader reports it ([`CaptureReader::format`](crate::CaptureReader::format));
/// a writer takes it ([`CaptureWriter::create`](crate::CaptureWriter::create)),
/// so output can mirror the input.
///
/// ```
/// use sluice_capture::CaptureFormat;
///
/// let f = CaptureFormat::Pcap { nanos: true, big_endian: false, linktype: 1, snaplen: 262144, fcs_len: None };
/// assert_eq!(f.linktype(), Some(1));
/// assert!(CaptureFormat::pcapng().is_pcapng());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaptureFormat {
    /// Classic libpcap format.
    Pcap {
        /// Nanosecond timestamps (magic `a1b23c4d`) rather than microseconds.
        nanos: bool,
        /// The file is big-endian.
        big_endian: bool,
        /// Link-layer header type: the low 16 bits of the header's link-type field.
        linktype: u16,
        /// Snapshot length from the file header.
        snaplen: u32,
        /// FCS length in 16-bit words (bits 28..=31 of the link-type field),
        /// present when bit 26 (the "FCS length present" flag) is set.
        fcs_len: Option<u8>,
    },
    /// pcapng.
    PcapNg {
        /// The (first) section is big-endian.
        big_endian: bool,
        /// The first interface, if the file declares one before its first packet.
        /// A writer declares it up front, so even an empty output has it.
        first_interface: Option<InterfaceInfo>,
    },
}

impl CaptureFormat {
    /// A little-endian microsecond pcap format with this link type and snaplen.
    ///
    /// ```
    /// use sluice_capture::CaptureFormat;
    /// assert_eq!(CaptureFormat::pcap(1, 65535).linktype(), Some(1));
    /// ```
    pub fn pcap(linktype: u16, snaplen: u32) -> Self {
        CaptureFormat::Pcap {
            nanos: false,
            big_endian: false,
            linktype,
            snaplen,
            fcs_len: None,
        }
    }

    /// A little-endian pcapng format with no interface declared in advance.
    ///
    /// ```
    /// use sluice_capture::CaptureFormat;
    /// assert!(CaptureFormat::pcapng().is_pcapng());
    /// ```
    pub fn pcapng() -> Self {
        CaptureFormat::PcapNg {
            big_endian: false,
            first_interface: None,
        }
    }

    /// True for pcapng.
    ///
    /// ```
    /// use sluice_capture::CaptureFormat;
    /// assert!(!CaptureFormat::pcap(1, 0).is_pcapng());
    /// ```
    pub fn is_pcapng(&self) -> bool {
        matches!(self, CaptureFormat::PcapNg { .. })
    }

    /// The pcap link type, or the first pcapng interface's link type.
    ///
    /// ```
    /// use sluice_capture::CaptureFormat;
    /// assert_eq!(CaptureFormat::pcapng().linktype(), None);
    /// ```
    pub fn linktype(&self) -> Option<u16> {
        match self {
            CaptureFormat::Pcap { linktype, .. } => Some(*linktype),
            CaptureFormat::PcapNg {
                first_interface, ..
            } => first_interface.map(|i| i.linktype),
        }
    }
}
