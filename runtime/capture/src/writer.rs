//! Buffered pcap and pcapng writers.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use crate::error::{CaptureError, ErrorKind};
use crate::format::{
    CaptureFormat, InterfaceInfo, BLOCK_EPB, BLOCK_IDB, BLOCK_SHB, BYTE_ORDER_MAGIC,
};
use crate::Packet;

const OUT_BUFFER: usize = 256 * 1024;

/// Writes packets to a pcap or pcapng file.
///
/// * pcap: the 24-byte header is written at once, with the format's
///   timestamp precision (`nanos`), byte order, link type, snaplen and FCS
///   length. Every packet must have the file's link type.
/// * pcapng: a section header is written at once (byte order from the
///   format), then one interface description (with `if_tsresol` = 9, i.e.
///   nanoseconds) for each distinct (link type, snaplen) of the packets,
///   declared when first seen (or up front, see
///   [`declare_interface`](Self::declare_interface)), then one enhanced
///   packet block per packet.
///
/// Output is buffered; call [`finish`](Self::finish) to flush and see any
/// error (dropping the writer flushes too but ignores errors).
///
/// ```
/// use sluice_capture::{CaptureFormat, CaptureWriter, Packet};
///
/// let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 65535))?;
/// w.write_packet(&Packet::new(1, 0, 1, &[0u8; 60]))?;
/// let bytes = w.finish()?;
/// assert_eq!(bytes.len(), 24 + 16 + 60);
/// # Ok::<(), sluice_capture::CaptureError>(())
/// ```
pub struct CaptureWriter<W: Write> {
    out: BufWriter<W>,
    name: String,
    pos: u64,
    kind: Kind,
    /// Packets written (buffered ones included).
    packets: u64,
    /// Packets whose every byte the inner writer has taken.
    packets_out: u64,
    /// Where each packet still (partly) in the buffer ends.
    pending: VecDeque<u64>,
}

impl<W: Write> std::fmt::Debug for CaptureWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureWriter")
            .field("name", &self.name)
            .field("offset", &self.pos)
            .finish_non_exhaustive()
    }
}

enum Kind {
    Pcap {
        be: bool,
        nanos: bool,
        linktype: u16,
    },
    PcapNg {
        be: bool,
        interfaces: Vec<InterfaceInfo>,
        last: usize,
    },
}

impl CaptureWriter<Box<dyn Write + Send>> {
    /// Creates (truncates) a file, or writes to standard output for `-`
    /// (named `<stdout>` in errors), in the given format.
    ///
    /// To write "in the input's format", pass the reader's
    /// [`format`](crate::CaptureReader::format).
    ///
    /// ```no_run
    /// use sluice_capture::{CaptureReader, CaptureWriter};
    ///
    /// let mut r = CaptureReader::open("in.pcap")?;
    /// let mut w = CaptureWriter::create("out.pcap", &r.format())?;
    /// while let Some(p) = r.next_packet()? {
    ///     if p.data.len() > 100 {
    ///         w.write_packet(&p)?;
    ///     }
    /// }
    /// w.finish()?;
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn create(path: impl AsRef<Path>, format: &CaptureFormat) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        if path.as_os_str() == "-" {
            return CaptureWriter::new(Box::new(io::stdout()), "<stdout>", format);
        }
        let name = path.display().to_string();
        let file = File::create(path).map_err(|e| CaptureError::new(&name, 0, e.into()))?;
        CaptureWriter::new(Box::new(file), name, format)
    }
}

impl<W: Write> CaptureWriter<W> {
    /// Starts writing to any writer (buffered internally); `name` is used in
    /// error messages. Writes the file header immediately.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter};
    ///
    /// let f = CaptureFormat::Pcap { nanos: true, big_endian: true, linktype: 1, snaplen: 1500, fcs_len: None };
    /// let bytes = CaptureWriter::new(Vec::new(), "mem", &f)?.finish()?;
    /// assert_eq!(&bytes[..4], &[0xa1, 0xb2, 0x3c, 0x4d]);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn new(
        writer: W,
        name: impl Into<String>,
        format: &CaptureFormat,
    ) -> Result<Self, CaptureError> {
        let mut w = CaptureWriter {
            out: BufWriter::with_capacity(OUT_BUFFER, writer),
            name: name.into(),
            pos: 0,
            kind: Kind::Pcap {
                be: false,
                nanos: false,
                linktype: 0,
            },
            packets: 0,
            packets_out: 0,
            pending: VecDeque::new(),
        };
        match *format {
            CaptureFormat::Pcap {
                nanos,
                big_endian: be,
                linktype,
                snaplen,
                fcs_len,
            } => {
                w.kind = Kind::Pcap {
                    be,
                    nanos,
                    linktype,
                };
                let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
                let mut lt_field = u32::from(linktype);
                if let Some(f) = fcs_len {
                    lt_field |= 0x0400_0000 | (u32::from(f & 0xf) << 28);
                }
                let mut h = [0u8; 24];
                h[0..4].copy_from_slice(&e32(be, magic));
                h[4..6].copy_from_slice(&e16(be, 2));
                h[6..8].copy_from_slice(&e16(be, 4));
                h[16..20].copy_from_slice(&e32(be, snaplen));
                h[20..24].copy_from_slice(&e32(be, lt_field));
                w.put(&h)?;
            }
            CaptureFormat::PcapNg {
                big_endian: be,
                first_interface,
            } => {
                w.kind = Kind::PcapNg {
                    be,
                    interfaces: Vec::new(),
                    last: 0,
                };
                let mut h = [0u8; 28];
                h[0..4].copy_from_slice(&e32(be, BLOCK_SHB));
                h[4..8].copy_from_slice(&e32(be, 28));
                h[8..12].copy_from_slice(&e32(be, BYTE_ORDER_MAGIC));
                h[12..14].copy_from_slice(&e16(be, 1));
                h[14..16].copy_from_slice(&e16(be, 0));
                h[16..24].copy_from_slice(&[0xff; 8]); // section length unknown
                h[24..28].copy_from_slice(&e32(be, 28));
                w.put(&h)?;
                if let Some(i) = first_interface {
                    w.declare_interface(i)?;
                }
            }
        }
        Ok(w)
    }

    /// Makes sure the output can hold packets of this link type and snaplen;
    /// returns the interface index. For pcapng this writes an interface
    /// description if the pair is new; for pcap it checks the link type.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter, InterfaceInfo};
    /// let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcapng())?;
    /// assert_eq!(w.declare_interface(InterfaceInfo { linktype: 1, snaplen: 0 })?, 0);
    /// assert_eq!(w.declare_interface(InterfaceInfo { linktype: 105, snaplen: 0 })?, 1);
    /// assert_eq!(w.declare_interface(InterfaceInfo { linktype: 1, snaplen: 0 })?, 0);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn declare_interface(&mut self, info: InterfaceInfo) -> Result<u32, CaptureError> {
        let (be, index) = match &mut self.kind {
            Kind::Pcap { linktype, .. } => {
                if *linktype == info.linktype {
                    return Ok(0);
                }
                let file = *linktype;
                return Err(self.err(ErrorKind::LinkTypeMismatch {
                    file,
                    packet: info.linktype,
                }));
            }
            Kind::PcapNg {
                be,
                interfaces,
                last,
            } => {
                if interfaces.get(*last) == Some(&info) {
                    return Ok(*last as u32);
                }
                if let Some(i) = interfaces.iter().position(|x| *x == info) {
                    *last = i;
                    return Ok(i as u32);
                }
                interfaces.push(info);
                *last = interfaces.len() - 1;
                (*be, *last)
            }
        };
        // IDB: header, linktype, reserved, snaplen, if_tsresol=9, end of options, trailer.
        let mut b = [0u8; 32];
        b[0..4].copy_from_slice(&e32(be, BLOCK_IDB));
        b[4..8].copy_from_slice(&e32(be, 32));
        b[8..10].copy_from_slice(&e16(be, info.linktype));
        b[12..16].copy_from_slice(&e32(be, info.snaplen));
        b[16..18].copy_from_slice(&e16(be, 9));
        b[18..20].copy_from_slice(&e16(be, 1));
        b[20] = 9;
        // b[24..28]: opt_endofopt (zeros)
        b[28..32].copy_from_slice(&e32(be, 32));
        self.put(&b)?;
        Ok(index as u32)
    }

    /// Writes one packet: its timestamp, wire length and `data` (the
    /// `caplen` field is ignored; `data.len()` is written).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter, Packet, ErrorKind};
    /// let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 65535))?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"ok"))?;
    /// // A pcap file has one link type.
    /// let e = w.write_packet(&Packet::new(1, 0, 113, b"no")).unwrap_err();
    /// assert!(matches!(e.kind(), ErrorKind::LinkTypeMismatch { file: 1, packet: 113 }));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn write_packet(&mut self, p: &Packet<'_>) -> Result<(), CaptureError> {
        let Ok(caplen) = u32::try_from(p.data.len()) else {
            return Err(self.err(ErrorKind::Unwritable("packet longer than 4 GiB")));
        };
        match self.kind {
            Kind::Pcap {
                be,
                nanos,
                linktype,
            } => {
                if p.linktype != linktype {
                    return Err(self.err(ErrorKind::LinkTypeMismatch {
                        file: linktype,
                        packet: p.linktype,
                    }));
                }
                // The header's 32 bits of seconds, as libpcap's dumper
                // writes them (a time out of range wraps, it is not refused).
                let secs = p.ts_sec as u32;
                let frac = if nanos { p.ts_nsec } else { p.ts_nsec / 1000 };
                let mut h = [0u8; 16];
                h[0..4].copy_from_slice(&e32(be, secs));
                h[4..8].copy_from_slice(&e32(be, frac));
                h[8..12].copy_from_slice(&e32(be, caplen));
                h[12..16].copy_from_slice(&e32(be, p.wirelen));
                self.put(&h)?;
                self.put(p.data)?;
            }
            Kind::PcapNg { be, .. } => {
                let padded = (p.data.len() + 3) & !3;
                let Some(len) = u32::try_from(padded + 32)
                    .ok()
                    .filter(|l| *l <= crate::format::MAX_BLOCK_LEN)
                else {
                    return Err(self.err(ErrorKind::Unwritable("packet too long for a block")));
                };
                // 64 bits of nanoseconds (a time out of range wraps).
                let ts = (p.ts_sec as u64)
                    .wrapping_mul(1_000_000_000)
                    .wrapping_add(u64::from(p.ts_nsec));
                let id = self.declare_interface(InterfaceInfo {
                    linktype: p.linktype,
                    snaplen: p.snaplen,
                })?;
                let mut h = [0u8; 28];
                h[0..4].copy_from_slice(&e32(be, BLOCK_EPB));
                h[4..8].copy_from_slice(&e32(be, len));
                h[8..12].copy_from_slice(&e32(be, id));
                h[12..16].copy_from_slice(&e32(be, (ts >> 32) as u32));
                h[16..20].copy_from_slice(&e32(be, ts as u32));
                h[20..24].copy_from_slice(&e32(be, caplen));
                h[24..28].copy_from_slice(&e32(be, p.wirelen));
                self.put(&h)?;
                self.put(p.data)?;
                self.put(&[0u8; 3][..padded - p.data.len()])?;
                self.put(&e32(be, len))?;
            }
        }
        self.packets += 1;
        self.pending.push_back(self.pos);
        self.settle();
        Ok(())
    }

    /// Count the packets whose bytes have all left the buffer.
    fn settle(&mut self) {
        let taken = self.pos - self.out.buffer().len() as u64;
        while self.pending.front().is_some_and(|&end| end <= taken) {
            self.pending.pop_front();
            self.packets_out += 1;
        }
    }

    /// Packets written so far, buffered ones included.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 0))?;
    /// w.write_packet(&Packet::new(1, 0, 1, &[0u8; 4]))?;
    /// assert_eq!((w.packets(), w.packets_out()), (1, 0));
    /// w.flush()?;
    /// assert_eq!(w.packets_out(), 1);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn packets(&self) -> u64 {
        self.packets
    }

    /// Packets whose every byte the underlying writer has taken (what a
    /// file holds whole when a later write fails).
    pub fn packets_out(&self) -> u64 {
        self.packets_out
    }

    /// Interfaces declared so far (pcapng; 1 for pcap).
    pub fn interfaces_declared(&self) -> usize {
        match &self.kind {
            Kind::Pcap { .. } => 1,
            Kind::PcapNg { interfaces, .. } => interfaces.len(),
        }
    }

    /// Number of bytes written so far (including buffered ones).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter};
    /// let w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcapng())?;
    /// assert_eq!(w.offset(), 28); // the section header block
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn offset(&self) -> u64 {
        self.pos
    }

    /// Writes out what is buffered (for `tcpdump -U`-style output that a
    /// reader sees packet by packet).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 0))?;
    /// w.write_packet(&Packet::new(1, 0, 1, &[0u8; 4]))?;
    /// w.flush()?;
    /// assert_eq!(w.finish()?.len(), 24 + 16 + 4);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn flush(&mut self) -> Result<(), CaptureError> {
        let r = self.out.flush();
        self.settle();
        match r {
            Ok(()) => Ok(()),
            Err(e) => Err(self.err(e.into())),
        }
    }

    /// Flushes the buffer and returns the underlying writer.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureWriter};
    /// let bytes: Vec<u8> = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 0))?.finish()?;
    /// assert_eq!(bytes.len(), 24);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn finish(mut self) -> Result<W, CaptureError> {
        // A pcapng file without an interface description is one no reader
        // takes: an output that got no packet declares Ethernet.
        if self.interfaces_declared() == 0 {
            self.declare_interface(InterfaceInfo {
                linktype: 1,
                snaplen: 0,
            })?;
        }
        let (name, pos) = (self.name, self.pos);
        let mut inner = self
            .out
            .into_inner()
            .map_err(|e| CaptureError::new(&name, pos, e.into_error().into()))?;
        inner
            .flush()
            .map_err(|e| CaptureError::new(&name, pos, e.into()))?;
        Ok(inner)
    }

    fn err(&self, kind: ErrorKind) -> CaptureError {
        CaptureError::new(self.name.clone(), self.pos, kind)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), CaptureError> {
        match self.out.write_all(bytes) {
            Ok(()) => {
                self.pos += bytes.len() as u64;
                Ok(())
            }
            Err(e) => Err(self.err(e.into())),
        }
    }
}

fn e16(be: bool, v: u16) -> [u8; 2] {
    if be {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}

fn e32(be: bool, v: u32) -> [u8; 4] {
    if be {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    }
}
