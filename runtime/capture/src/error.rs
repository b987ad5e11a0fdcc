//! The error type of this crate.

use std::fmt;

/// What is wrong with a capture file (or with writing one).
///
/// Carried inside a [`CaptureError`], which adds the file name and the byte
/// offset.
///
/// ```
/// use sluice_capture::{CaptureReader, ErrorKind};
///
/// let err = CaptureReader::from_reader(&b"not a capture file"[..], "x").unwrap_err();
/// assert!(matches!(err.kind(), ErrorKind::BadMagic(_)));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The underlying reader or writer failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The first four bytes are neither a pcap nor a pcapng magic number
    /// (kept here; the message does not quote them: the file may be one
    /// its reader should learn nothing about, as tcpdump says only
    /// "unknown file format").
    #[error("not a pcap or pcapng file")]
    BadMagic(u32),
    /// A mapped file ([`Mapped`](crate::Mapped)) was cut short while it
    /// was read: the bytes past its new end read as zeros.
    #[error("the file was cut short while it was read")]
    Shrank,
    /// The file ends in the middle of a header, record or block.
    #[error("file ends inside the {what}: {need} bytes needed, only {have} present")]
    Truncated {
        /// Which structure is cut short ("pcap file header", "packet record", ...).
        what: &'static str,
        /// Bytes of it that are present.
        have: u64,
        /// Bytes it should have.
        need: u64,
    },
    /// The pcap version is older than 2.0.
    #[error("archaic pcap savefile format (version {major}.{minor})")]
    ArchaicVersion {
        /// Major version number.
        major: u16,
        /// Minor version number.
        minor: u16,
    },
    /// The pcap or pcapng version is not one this reader understands.
    #[error("unsupported {format} savefile version {major}.{minor}")]
    UnsupportedVersion {
        /// "pcap" or "pcapng".
        format: &'static str,
        /// Major version number.
        major: u16,
        /// Minor version number.
        minor: u16,
    },
    /// Bits 16..=25 of the pcap link-type field are reserved and must be 0.
    #[error("link-type field {0:#010x} has non-zero reserved bits")]
    ReservedLinkTypeBits(u32),
    /// A pcap record's captured length is not sane for its link type.
    #[error("invalid packet capture length {caplen}, bigger than the maximum of {max}")]
    CaplenTooLarge {
        /// The captured length in the record header.
        caplen: u32,
        /// The largest accepted value.
        max: u32,
    },
    /// A pcapng block length is too small, not a multiple of 4, or huge.
    #[error("bad block length {len} for block type {block_type:#x}: {reason}")]
    BadBlockLength {
        /// The block type.
        block_type: u32,
        /// The length found in the block header.
        len: u32,
        /// Why it is wrong.
        reason: &'static str,
    },
    /// The block length in a pcapng block's trailer differs from its header.
    #[error("block total length in header ({header}) and trailer ({trailer}) don't match")]
    BlockLengthMismatch {
        /// Length from the block header.
        header: u32,
        /// Length from the block trailer.
        trailer: u32,
    },
    /// A pcapng section header has an unknown byte-order magic (kept
    /// here, not quoted in the message: in a file that is not a capture
    /// they are just bytes of it).
    #[error("bad byte-order magic in section header block")]
    BadByteOrderMagic(u32),
    /// A packet block names an interface that has not been described.
    #[error("packet block refers to interface {id}, but the section declares only {count}")]
    UnknownInterface {
        /// The interface id in the packet block.
        id: u32,
        /// How many interfaces the current section has.
        count: usize,
    },
    /// The contents of a pcapng block do not fit in its length.
    #[error("{block} is inconsistent: {reason}")]
    BadBlock {
        /// Name of the block ("enhanced packet block", ...).
        block: &'static str,
        /// What does not fit.
        reason: &'static str,
    },
    /// An interface's `if_tsresol` option asks for an unusable resolution.
    #[error("unsupported timestamp resolution {0:#04x} (if_tsresol)")]
    BadTsResol(u8),
    /// A pcapng file ends without describing any interface: nothing in it
    /// says what its packets are (libpcap refuses it too).
    #[error("the capture file has no Interface Description Blocks")]
    NoInterfaces,
    /// More interfaces in one section than this reader keeps.
    #[error("too many interfaces in one section (limit {0})")]
    TooManyInterfaces(usize),
    /// A packet written to a pcap file has another link type than the file.
    #[error("packet has link type {packet}, but the pcap file has link type {file}")]
    LinkTypeMismatch {
        /// The file's link type.
        file: u16,
        /// The packet's link type.
        packet: u16,
    },
    /// A packet cannot be written in this format (too long, bad timestamp).
    #[error("packet cannot be written: {0}")]
    Unwritable(&'static str),
}

/// An error reading or writing a capture file: which file, where, and what.
///
/// The offset is the byte position in the file of the header, record or block
/// that is wrong (for writers: the number of bytes written before the error).
/// The file is `<stdin>` / `<stdout>` for `-`.
///
/// ```
/// use sluice_capture::CaptureReader;
///
/// // A pcap header cut short after 10 bytes.
/// let bytes = [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0];
/// let err = CaptureReader::from_reader(&bytes[..], "short.pcap").unwrap_err();
/// assert_eq!(err.file(), "short.pcap");
/// assert_eq!(err.offset(), 0);
/// assert!(err.to_string().starts_with("short.pcap: byte offset 0: file ends inside"));
/// ```
#[derive(Debug)]
pub struct CaptureError {
    file: String,
    offset: u64,
    kind: ErrorKind,
}

impl CaptureError {
    /// Creates an error for `file` at byte `offset`.
    ///
    /// ```
    /// use sluice_capture::{CaptureError, ErrorKind};
    /// let e = CaptureError::new("a.pcap", 24, ErrorKind::BadMagic(0));
    /// assert_eq!(e.offset(), 24);
    /// ```
    pub fn new(file: impl Into<String>, offset: u64, kind: ErrorKind) -> Self {
        CaptureError {
            file: file.into(),
            offset,
            kind,
        }
    }

    /// The file name given when the reader or writer was made.
    ///
    /// ```
    /// use sluice_capture::{CaptureError, ErrorKind};
    /// assert_eq!(CaptureError::new("a.pcap", 0, ErrorKind::BadMagic(0)).file(), "a.pcap");
    /// ```
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Byte offset in the file where the problem is.
    ///
    /// ```
    /// use sluice_capture::{CaptureError, ErrorKind};
    /// assert_eq!(CaptureError::new("a.pcap", 7, ErrorKind::BadMagic(0)).offset(), 7);
    /// ```
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// What is wrong.
    ///
    /// ```
    /// use sluice_capture::{CaptureError, ErrorKind};
    /// let e = CaptureError::new("a.pcap", 0, ErrorKind::BadMagic(1));
    /// assert!(matches!(e.kind(), ErrorKind::BadMagic(1)));
    /// ```
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Consumes the error, returning what is wrong.
    ///
    /// ```
    /// use sluice_capture::{CaptureError, ErrorKind};
    /// let e = CaptureError::new("a.pcap", 0, ErrorKind::BadMagic(1));
    /// assert!(matches!(e.into_kind(), ErrorKind::BadMagic(1)));
    /// ```
    pub fn into_kind(self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: byte offset {}: {}",
            self.file, self.offset, self.kind
        )
    }
}

impl std::error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}
