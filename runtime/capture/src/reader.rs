//! Streaming reader for pcap and pcapng files.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::error::{CaptureError, ErrorKind};
use crate::format::{
    max_snaplen_for_linktype, CaptureFormat, InterfaceInfo, BLOCK_EPB, BLOCK_IDB, BLOCK_OPB,
    BLOCK_SHB, BLOCK_SPB, BYTE_ORDER_MAGIC, MAX_BLOCK_LEN,
};
use crate::input::Input;
use crate::{Mapped, Packet};
use sluice_wire::bytes::{u16_at, u32_at, u64_at};
use std::sync::Arc;

/// The longest first section header block libpcap accepts: 1 MiB.
const FIRST_SHB_MAX: u32 = 1024 * 1024;
/// Most interfaces kept for one pcapng section (keeps memory bounded).
const MAX_INTERFACES: usize = 1 << 16;

/// Reads packets from a pcap or pcapng file, one at a time, without
/// allocating per packet.
///
/// The format is detected from the magic number. Packets borrow the reader's
/// buffer, so each one must be dropped before asking for the next
/// ("lending" iteration). Memory use is constant whatever the file size.
///
/// Errors are reported in file order: every complete packet before a
/// truncated or corrupt spot is returned first. After an error the reader is
/// finished and [`next_packet`](Self::next_packet) returns `Ok(None)`.
///
/// ```
/// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
///
/// // Write a small pcap file into memory, then read it back.
/// let format = CaptureFormat::pcap(1, 65535);
/// let mut w = CaptureWriter::new(Vec::new(), "mem", &format)?;
/// w.write_packet(&Packet::new(1, 500_000, 1, &[1, 2, 3]))?;
/// let bytes = w.finish()?;
///
/// let mut r = CaptureReader::from_reader(&bytes[..], "mem")?;
/// let mut count = 0;
/// while let Some(p) = r.next_packet()? {
///     assert_eq!(p.data, &[1, 2, 3]);
///     assert_eq!(p.ts_nsec, 500_000);
///     count += 1;
/// }
/// assert_eq!(count, 1);
/// # Ok::<(), sluice_capture::CaptureError>(())
/// ```
pub struct CaptureReader<R> {
    pub(crate) input: Input<R>,
    pub(crate) name: String,
    pub(crate) format: CaptureFormat,
    pub(crate) state: State,
    pub(crate) done: bool,
    /// Every distinct (link type, snapshot length) declared so far: the
    /// pcap header's, or each pcapng interface description's, in order.
    pub(crate) declared: Vec<InterfaceInfo>,
    /// Stop before a record or block that starts at or past this offset
    /// ([`CaptureReader::stop_at`]).
    pub(crate) stop: u64,
    /// Read as a stream ([`CaptureReader::from_stream`]): no read-ahead,
    /// and the end of input is not final.
    pub(crate) stream: bool,
}

impl<R> std::fmt::Debug for CaptureReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureReader")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("offset", &self.input.pos())
            .finish_non_exhaustive()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Pcap(PcapState),
    PcapNg(NgState),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PcapState {
    pub(crate) big_endian: bool,
    pub(crate) nanos: bool,
    pub(crate) linktype: u16,
    pub(crate) snaplen: u32,
    /// Effective snapshot length: longer records are cut to it (as libpcap does).
    pub(crate) snapshot: u32,
    /// Largest sane caplen.
    pub(crate) max_caplen: u32,
    /// 0: never swap caplen/len, 1: swap when caplen > len, 2: always swap.
    pub(crate) swap_lengths: u8,
    /// 16, or 24 for the "Kuznetzov" modified format.
    pub(crate) record_header: usize,
    /// The last record's time-stamp fields as written (seconds, fraction).
    pub(crate) last_times: (u32, u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Interface {
    pub(crate) linktype: u16,
    pub(crate) snaplen: u32,
    pub(crate) snapshot: u32,
    pub(crate) units_per_sec: u64,
    pub(crate) ts_offset: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NgState {
    pub(crate) big_endian: bool,
    pub(crate) interfaces: Vec<Interface>,
}

/// Where the packet bytes are, captured before the buffer is released.
pub(crate) struct Found {
    range: (usize, usize),
    ts_sec: i64,
    ts_nsec: u32,
    wirelen: u32,
    linktype: u16,
    snaplen: u32,
    interface: u32,
}

/// Splits a timestamp counted in `units_per_sec` into seconds and nanoseconds.
fn split_ts(ts: u64, units_per_sec: u64, offset: i64) -> (i64, u32) {
    let units = units_per_sec.max(1);
    let secs = i64::try_from(ts / units).unwrap_or(i64::MAX);
    let frac = u128::from(ts % units);
    let nsec = (frac * 1_000_000_000 / u128::from(units)) as u32;
    (secs.saturating_add(offset), nsec)
}

impl CaptureReader<Box<dyn Read + Send>> {
    /// Opens a capture file; `-` means standard input (named `<stdin>` in
    /// errors).
    ///
    /// ```no_run
    /// use sluice_capture::CaptureReader;
    ///
    /// let mut r = CaptureReader::open("trace.pcapng")?;
    /// while let Some(p) = r.next_packet()? {
    ///     println!("{}.{:09} {} bytes", p.ts_sec, p.ts_nsec, p.caplen);
    /// }
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CaptureError> {
        let path = path.as_ref();
        if path.as_os_str() == "-" {
            return CaptureReader::from_reader(Box::new(io::stdin()), "<stdin>");
        }
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| CaptureError::new(&name, 0, e.into()))?;
        CaptureReader::from_reader(Box::new(file), name)
    }

    /// Reads a mapped file ([`Mapped`]): each packet is a slice of the
    /// mapping itself, not of a buffer it was copied into, so its place in
    /// the file is [`Mapped::offset_of`] its bytes, and threads that share
    /// the mapping can take packets by place. A file cut short while it is
    /// read ends the reading with [`ErrorKind::Shrank`] at the record that
    /// reaches past its new end (that record is not returned; a cut made
    /// after a record is returned shows at the next one).
    ///
    /// The mapping is the file's bytes as they are: a compressed file must
    /// be read through [`decompress`](crate::decompress) instead.
    ///
    /// ```
    /// use sluice_capture::{CaptureReader, Mapped};
    /// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
    /// let map = Mapped::new(&std::fs::File::open(sample).unwrap()).unwrap();
    /// let map = std::sync::Arc::new(map);
    /// let mut r = CaptureReader::from_mapped(map.clone(), "sample")?;
    /// let first = r.next_packet()?.unwrap();
    /// assert_eq!(map.offset_of(first.data), Some(24 + 16));
    /// assert!(std::sync::Arc::ptr_eq(r.mapping().unwrap(), &map));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn from_mapped(map: Arc<Mapped>, name: impl Into<String>) -> Result<Self, CaptureError> {
        let input = Input::mapped(Box::new(io::empty()) as Box<dyn Read + Send>, map);
        CaptureReader::start(input, name.into(), false)
    }
}

impl<R: Read> CaptureReader<R> {
    /// Starts reading from any reader; `name` is used in error messages.
    ///
    /// Reads the file header (for pcapng also the blocks up to the first
    /// interface description), so the format is known on return. No extra
    /// buffering is needed around `reader`. A pcapng file that ends before
    /// any interface description is refused ([`ErrorKind::NoInterfaces`]),
    /// as libpcap refuses it.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader};
    ///
    /// // A little-endian, microsecond pcap header for Ethernet, no packets.
    /// let mut hdr = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    /// hdr.extend_from_slice(&[0; 8]);
    /// hdr.extend_from_slice(&65535u32.to_le_bytes());
    /// hdr.extend_from_slice(&1u32.to_le_bytes());
    /// let mut r = CaptureReader::from_reader(&hdr[..], "empty.pcap")?;
    /// assert!(matches!(r.format(), CaptureFormat::Pcap { linktype: 1, nanos: false, .. }));
    /// assert!(r.next_packet()?.is_none());
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn from_reader(reader: R, name: impl Into<String>) -> Result<Self, CaptureError> {
        CaptureReader::start(Input::new(reader), name.into(), false)
    }

    /// Starts reading a stream whose position matters to others, as
    /// libpcap reads a `FILE *`: each record or block is read from
    /// `reader` with reads of exactly its bytes, never ahead, so after a
    /// packet is returned `reader` stands just after it (a program may
    /// `ftell` it, or `fseek` it and read on from there), and a record
    /// arriving on a pipe is returned as soon as its last byte has come.
    /// The end of input is not final: a later call reads again (a file
    /// that grew, or a stream moved back). After an error the bytes of the
    /// bad record that were read are dropped.
    ///
    /// `reader` should buffer itself (a `FILE *`, a `BufReader`): reads
    /// are one or two per record.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// use std::io::{Cursor, Seek, SeekFrom};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"one"))?;
    /// w.write_packet(&Packet::new(2, 0, 1, b"two"))?;
    /// let mut r = CaptureReader::from_stream(Cursor::new(w.finish()?), "m")?;
    /// assert_eq!(r.next_packet()?.unwrap().data, b"one");
    /// // The stream stands after the first record: 24 + 16 + 3 bytes.
    /// assert_eq!(r.get_mut().stream_position().unwrap(), 43);
    /// assert_eq!(r.next_packet()?.unwrap().data, b"two");
    /// assert!(r.next_packet()?.is_none());
    /// // Moved back, it reads the second record again.
    /// r.get_mut().seek(SeekFrom::Start(43)).unwrap();
    /// assert_eq!(r.next_packet()?.unwrap().data, b"two");
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn from_stream(reader: R, name: impl Into<String>) -> Result<Self, CaptureError> {
        let mut input = Input::new(reader);
        input.exact();
        CaptureReader::start(input, name.into(), true)
    }

    /// The mapped file this reader reads ([`CaptureReader::from_mapped`]).
    pub fn mapping(&self) -> Option<&Arc<Mapped>> {
        self.input.mapping()
    }

    /// The reader underneath, for a stream's owner to move it
    /// ([`CaptureReader::from_stream`]; bytes another reader buffered
    /// ahead are not accounted for).
    pub fn get_mut(&mut self) -> &mut R {
        self.input.inner_mut()
    }

    fn start(input: Input<R>, name: String, stream: bool) -> Result<Self, CaptureError> {
        let mut r = CaptureReader {
            input,
            name,
            format: CaptureFormat::PcapNg {
                big_endian: false,
                first_interface: None,
            },
            state: State::PcapNg(NgState {
                big_endian: false,
                interfaces: Vec::new(),
            }),
            done: false,
            declared: Vec::new(),
            stop: u64::MAX,
            stream,
        };
        let have = r.fill(4)?;
        if have < 4 {
            return Err(r.truncated(0, "file magic number", have, 4));
        }
        let magic = u32::from_le_bytes([
            r.input.bytes()[0],
            r.input.bytes()[1],
            r.input.bytes()[2],
            r.input.bytes()[3],
        ]);
        if magic == BLOCK_SHB {
            r.read_section_header(true)?;
            r.read_to_first_interface()?;
            r.update_ng_format();
            // libpcap refuses a pcapng file that ends before describing
            // an interface: its link type is unknown.
            if r.format.linktype().is_none() && r.fill(1)? == 0 {
                return Err(r.err(r.input.pos(), ErrorKind::NoInterfaces));
            }
        } else {
            r.read_pcap_header(magic)?;
        }
        Ok(r)
    }

    /// The file's format: pcap with its header fields, or pcapng.
    ///
    /// Pass it to [`CaptureWriter::create`](crate::CaptureWriter::create) to
    /// write output in the same format as the input.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, InterfaceInfo};
    /// let ng = CaptureFormat::PcapNg {
    ///     big_endian: false,
    ///     first_interface: Some(InterfaceInfo { linktype: 1, snaplen: 0 }),
    /// };
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &ng)?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// assert!(matches!(r.format(), CaptureFormat::PcapNg { .. }));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The link type of a pcap file, or of the first interface of a pcapng
    /// file (`None` if it declares no interface before its first packet).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(101, 1500))?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// assert_eq!(r.linktype(), Some(101));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn linktype(&self) -> Option<u16> {
        self.format.linktype()
    }

    /// Every distinct link type and snapshot length the file has declared
    /// so far, in the order declared: a pcap file's header, or each
    /// interface description block of a pcapng file read up to now (in
    /// any section). A program can then be compiled for each as soon as
    /// it is known, also where no packet ever uses it.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, InterfaceInfo};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// assert_eq!(r.declared_interfaces(), &[InterfaceInfo { linktype: 1, snaplen: 1500 }]);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn declared_interfaces(&self) -> &[InterfaceInfo] {
        &self.declared
    }

    /// The name used in error messages.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "in.pcap")?;
    /// assert_eq!(r.name(), "in.pcap");
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Number of bytes of the file consumed so far (at the end: the file size).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// while r.next_packet()?.is_some() {}
    /// assert_eq!(r.offset(), 24);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn offset(&self) -> u64 {
        self.input.pos()
    }

    /// Read up to the first interface description of a pcapng file, so
    /// that [`CaptureReader::linktype`] is known before any packet is
    /// read (a pcap file knows it from its header). `Ok(None)` when the
    /// file ends first; a packet block before any interface is an error.
    ///
    /// ```
    /// use sluice_capture::CaptureReader;
    /// let pcap = [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ///             0xff, 0xff, 0, 0, 1, 0, 0, 0];
    /// let mut r = CaptureReader::from_reader(&pcap[..], "x.pcap").unwrap();
    /// assert_eq!(r.read_interface().unwrap().unwrap().linktype, 1);
    /// ```
    pub fn read_interface(&mut self) -> Result<Option<InterfaceInfo>, CaptureError> {
        while self.format.linktype().is_none() && !self.done {
            let step = match self.next_ng_block() {
                Ok(Block::Other) => continue,
                Ok(_) => Ok(()),
                Err(e) => Err(e),
            };
            self.done = true;
            step?;
        }
        Ok(match self.format {
            CaptureFormat::Pcap {
                linktype, snaplen, ..
            } => Some(InterfaceInfo { linktype, snaplen }),
            CaptureFormat::PcapNg {
                first_interface, ..
            } => first_interface,
        })
    }

    /// Returns the next packet, `Ok(None)` at the end of the file, or the
    /// first problem found after the previous packet.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcapng())?;
    /// w.write_packet(&Packet::new(1, 2, 1, b"abc"))?;
    /// let bytes = w.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// let p = r.next_packet()?.unwrap();
    /// assert_eq!((p.ts_sec, p.ts_nsec, p.linktype, p.data), (1, 2, 1, &b"abc"[..]));
    /// assert!(r.next_packet()?.is_none());
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn next_packet(&mut self) -> Result<Option<Packet<'_>>, CaptureError> {
        Ok(self.next_record()?.map(|(p, _)| p))
    }

    /// [`next_packet`](Self::next_packet), with the time-stamp fields of
    /// a pcap file's record as the file holds them: seconds and the
    /// fraction in the file's unit (micro- or nanoseconds), before
    /// [`Packet`]'s normalisation carries a fraction of a second or more
    /// into the seconds (`None` for pcapng). libpcap hands these fields on
    /// unchanged, as signed 32-bit numbers.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?;
    /// w.write_packet(&Packet::new(7, 5_000, 1, b"x"))?;
    /// let bytes = w.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// let (p, times) = r.next_record()?.unwrap();
    /// assert_eq!((p.ts_sec, times), (7, Some((7, 5))));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    #[allow(clippy::type_complexity)]
    pub fn next_record(
        &mut self,
    ) -> Result<Option<(Packet<'_>, Option<(u32, u32)>)>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let found = match &self.state {
            State::Pcap(_) => self.next_pcap(),
            State::PcapNg(_) => self.next_ng(),
        };
        // A record that reaches past the end of a mapped file cut short is
        // zeros, not the file's: its last byte read first tells (a cut
        // takes the file's end, so a record whose last byte is there is
        // whole).
        let found = match found {
            Ok(Some(f)) if self.input.mapping().is_some() => {
                std::hint::black_box(self.input.slice(f.range).last().copied());
                match self.input.shrank() {
                    true => Err(self.err(self.input.pos(), ErrorKind::Shrank)),
                    false => Ok(Some(f)),
                }
            }
            other => other,
        };
        match found {
            Ok(Some(f)) => {
                let times = match &self.state {
                    State::Pcap(st) => Some(st.last_times),
                    State::PcapNg(_) => None,
                };
                let data = self.input.slice(f.range);
                let p = Packet {
                    ts_sec: f.ts_sec,
                    ts_nsec: f.ts_nsec,
                    caplen: data.len() as u32,
                    wirelen: f.wirelen,
                    linktype: f.linktype,
                    snaplen: f.snaplen,
                    interface: f.interface,
                    data,
                };
                Ok(Some((p, times)))
            }
            Ok(None) => {
                self.done = !self.stream;
                Ok(None)
            }
            Err(e) => {
                if self.stream {
                    self.input.discard();
                } else {
                    self.done = true;
                }
                Err(e)
            }
        }
    }

    // ----- helpers -----

    fn err(&self, offset: u64, kind: ErrorKind) -> CaptureError {
        CaptureError::new(self.name.clone(), offset, kind)
    }

    fn truncated(&self, offset: u64, what: &'static str, have: usize, need: usize) -> CaptureError {
        self.err(
            offset,
            ErrorKind::Truncated {
                what,
                have: have as u64,
                need: need as u64,
            },
        )
    }

    pub(crate) fn fill(&mut self, n: usize) -> Result<usize, CaptureError> {
        let pos = self.input.pos();
        self.input.fill(n).map_err(|e| self.err(pos, e.into()))
    }

    /// Fills exactly `n` bytes or reports `what` as truncated at the current
    /// position.
    fn need(&mut self, n: usize, what: &'static str) -> Result<(), CaptureError> {
        let have = self.fill(n)?;
        if have < n {
            return Err(self.truncated(self.input.pos(), what, have, n));
        }
        Ok(())
    }

    // ----- pcap -----

    fn read_pcap_header(&mut self, magic: u32) -> Result<(), CaptureError> {
        let (big_endian, nanos, record_header) = match magic {
            0xa1b2_c3d4 => (false, false, 16),
            0xd4c3_b2a1 => (true, false, 16),
            0xa1b2_3c4d => (false, true, 16),
            0x4d3c_b2a1 => (true, true, 16),
            0xa1b2_cd34 => (false, false, 24),
            0x34cd_b2a1 => (true, false, 24),
            other => return Err(self.err(0, ErrorKind::BadMagic(other.swap_bytes()))),
        };
        self.need(24, "pcap file header")?;
        let h = self.input.bytes();
        let be = big_endian;
        let major = u16_at(h, 4, be).unwrap_or(0);
        let minor = u16_at(h, 6, be).unwrap_or(0);
        let snaplen = u32_at(h, 16, be).unwrap_or(0);
        let lt_field = u32_at(h, 20, be).unwrap_or(0);
        if major < 2 {
            return Err(self.err(4, ErrorKind::ArchaicVersion { major, minor }));
        }
        if major != 2 || minor > 4 {
            return Err(self.err(
                4,
                ErrorKind::UnsupportedVersion {
                    format: "pcap",
                    major,
                    minor,
                },
            ));
        }
        if lt_field & 0x03ff_0000 != 0 {
            return Err(self.err(20, ErrorKind::ReservedLinkTypeBits(lt_field)));
        }
        let linktype = (lt_field & 0xffff) as u16;
        let fcs_len = if lt_field & 0x0400_0000 != 0 {
            Some((lt_field >> 28) as u8)
        } else {
            None
        };
        let max_caplen = max_snaplen_for_linktype(linktype);
        let snapshot = if snaplen == 0 || snaplen > max_caplen {
            max_caplen
        } else {
            snaplen
        };
        let swap_lengths = match minor {
            0..=2 => 2,
            3 => 1,
            _ => 0,
        };
        self.input.consume(24);
        self.declared.push(InterfaceInfo { linktype, snaplen });
        self.format = CaptureFormat::Pcap {
            nanos,
            big_endian,
            linktype,
            snaplen,
            fcs_len,
        };
        self.state = State::Pcap(PcapState {
            big_endian,
            nanos,
            linktype,
            snaplen,
            snapshot,
            max_caplen,
            swap_lengths,
            record_header,
            last_times: (0, 0),
        });
        Ok(())
    }

    fn next_pcap(&mut self) -> Result<Option<Found>, CaptureError> {
        let State::Pcap(st) = &self.state else {
            return Ok(None);
        };
        let (be, hl) = (st.big_endian, st.record_header);
        let at = self.input.pos();
        if at >= self.stop {
            return Ok(None);
        }
        let have = self.fill(hl)?;
        if have == 0 {
            return Ok(None);
        }
        if have < hl {
            return Err(self.truncated(at, "packet record header", have, hl));
        }
        let h = self.input.bytes();
        let secs = u32_at(h, 0, be).unwrap_or(0);
        let frac = u32_at(h, 4, be).unwrap_or(0);
        let mut caplen = u32_at(h, 8, be).unwrap_or(0);
        let mut wirelen = u32_at(h, 12, be).unwrap_or(0);
        let State::Pcap(st) = &self.state else {
            return Ok(None);
        };
        if st.swap_lengths == 2 || (st.swap_lengths == 1 && caplen > wirelen) {
            std::mem::swap(&mut caplen, &mut wirelen);
        }
        if caplen > st.max_caplen {
            let max = st.max_caplen;
            return Err(self.err(at, ErrorKind::CaplenTooLarge { caplen, max }));
        }
        let keep = caplen.min(st.snapshot) as usize;
        let frac_ns = if st.nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1000
        };
        let ts_sec = i64::from(secs) + (frac_ns / 1_000_000_000) as i64;
        let ts_nsec = (frac_ns % 1_000_000_000) as u32;
        let (linktype, snaplen) = (st.linktype, st.snaplen);
        if let State::Pcap(st) = &mut self.state {
            st.last_times = (secs, frac);
        }
        let total = hl + caplen as usize;
        let have = self.fill(total)?;
        if have < total {
            return Err(self.truncated(at, "packet record", have, total));
        }
        let range = self.input.abs_range(hl, keep);
        self.input.consume(total);
        Ok(Some(Found {
            range,
            ts_sec,
            ts_nsec,
            wirelen,
            linktype,
            snaplen,
            interface: 0,
        }))
    }

    // ----- pcapng -----

    fn ng(&mut self) -> &mut NgState {
        if let State::Pcap(_) = self.state {
            self.state = State::PcapNg(NgState {
                big_endian: false,
                interfaces: Vec::new(),
            });
        }
        match &mut self.state {
            State::PcapNg(ng) => ng,
            State::Pcap(_) => unreachable!("state was just set to pcapng"),
        }
    }

    fn update_ng_format(&mut self) {
        if let State::PcapNg(ng) = &self.state {
            self.format = CaptureFormat::PcapNg {
                big_endian: ng.big_endian,
                first_interface: ng.interfaces.first().map(|i| InterfaceInfo {
                    linktype: i.linktype,
                    snaplen: i.snaplen,
                }),
            };
        }
    }

    /// Reads a section header block at the current position: the file's
    /// first (`first`) or one that starts a later section.
    ///
    /// As libpcap reads them: the first must be version 1.0 or 1.2, at
    /// most 1 MiB long, and its trailer is not checked; a later one must
    /// be version 1.x (any minor version), with a trailer that matches.
    fn read_section_header(&mut self, first: bool) -> Result<(), CaptureError> {
        let at = self.input.pos();
        self.need(12, "section header block")?;
        let h = self.input.bytes();
        let bom = u32_at(h, 8, false).unwrap_or(0);
        let be = match bom {
            BYTE_ORDER_MAGIC => false,
            x if x == BYTE_ORDER_MAGIC.swap_bytes() => true,
            other => return Err(self.err(at + 8, ErrorKind::BadByteOrderMagic(other))),
        };
        let len = u32_at(h, 4, be).unwrap_or(0);
        self.check_block_len(at, BLOCK_SHB, len, 28)?;
        if first && len > FIRST_SHB_MAX {
            return Err(self.err(
                at + 4,
                ErrorKind::BadBlockLength {
                    block_type: BLOCK_SHB,
                    len,
                    reason: "larger than the 1 MiB limit for a first section header",
                },
            ));
        }
        let body = self.read_block_trailer(at, len, be, "section header block", !first)?;
        let b = self.input.slice(body);
        let major = u16_at(b, 4, be).unwrap_or(0);
        let minor = u16_at(b, 6, be).unwrap_or(0);
        let supported = major == 1 && (!first || minor == 0 || minor == 2);
        if !supported {
            return Err(self.err(
                at + 12,
                ErrorKind::UnsupportedVersion {
                    format: "pcapng",
                    major,
                    minor,
                },
            ));
        }
        let ng = self.ng();
        ng.big_endian = be;
        ng.interfaces.clear();
        Ok(())
    }

    fn check_block_len(
        &self,
        at: u64,
        block_type: u32,
        len: u32,
        min: u32,
    ) -> Result<(), CaptureError> {
        let reason = if len < min {
            "shorter than the smallest such block"
        } else if len % 4 != 0 {
            "not a multiple of 4"
        } else {
            return Ok(());
        };
        Err(self.err(
            at + 4,
            ErrorKind::BadBlockLength {
                block_type,
                len,
                reason,
            },
        ))
    }

    /// Buffers a whole block of `len` bytes at the current position, checks
    /// its trailer, consumes it and returns the buffer range of its body
    /// (between the 8-byte header and the 4-byte trailer).
    fn read_block(
        &mut self,
        at: u64,
        len: u32,
        be: bool,
        what: &'static str,
    ) -> Result<(usize, usize), CaptureError> {
        self.read_block_trailer(at, len, be, what, true)
    }

    /// [`Self::read_block`], checking the trailer only when `trailer`
    /// (libpcap does not check the first section header's).
    fn read_block_trailer(
        &mut self,
        at: u64,
        len: u32,
        be: bool,
        what: &'static str,
        trailer: bool,
    ) -> Result<(usize, usize), CaptureError> {
        if len > MAX_BLOCK_LEN {
            return Err(self.err(
                at + 4,
                ErrorKind::BadBlockLength {
                    block_type: u32_at(self.input.bytes(), 0, be).unwrap_or(0),
                    len,
                    reason: "larger than the 256 MiB limit",
                },
            ));
        }
        let n = len as usize;
        let have = self.fill(n)?;
        if have < n {
            return Err(self.truncated(at, what, have, n));
        }
        let found = u32_at(self.input.bytes(), n - 4, be).unwrap_or(0);
        if trailer && found != len {
            return Err(self.err(
                at + u64::from(len) - 4,
                ErrorKind::BlockLengthMismatch {
                    header: len,
                    trailer: found,
                },
            ));
        }
        let range = self.input.abs_range(8, n - 12);
        self.input.consume(n);
        Ok(range)
    }

    /// Skips a block we do not interpret, checking its trailer.
    fn skip_block(&mut self, at: u64, len: u32, be: bool) -> Result<(), CaptureError> {
        let body = u64::from(len) - 4;
        let skipped = {
            let pos = self.input.pos();
            self.input.skip(body).map_err(|e| self.err(pos, e.into()))?
        };
        if skipped < body {
            return Err(self.truncated(at, "block", skipped as usize, len as usize));
        }
        let have = self.fill(4)?;
        if have < 4 {
            return Err(self.truncated(at, "block", body as usize + have, len as usize));
        }
        let trailer = u32_at(self.input.bytes(), 0, be).unwrap_or(0);
        if trailer != len {
            return Err(self.err(
                self.input.pos(),
                ErrorKind::BlockLengthMismatch {
                    header: len,
                    trailer,
                },
            ));
        }
        self.input.consume(4);
        Ok(())
    }

    /// After the first section header: read on up to the first interface
    /// description, so that `format()` can name the first link type. Stops
    /// before any packet block. As libpcap does, a section header block
    /// met before the first interface description is skipped like a block
    /// of an unknown type (its length and trailer checked, nothing else):
    /// the section goes on.
    fn read_to_first_interface(&mut self) -> Result<(), CaptureError> {
        loop {
            if self.fill(8)? < 8 {
                return Ok(());
            }
            let be = self.ng().big_endian;
            let t = u32_at(self.input.bytes(), 0, be).unwrap_or(0);
            match t {
                BLOCK_SHB => {
                    let at = self.input.pos();
                    let len = u32_at(self.input.bytes(), 4, be).unwrap_or(0);
                    self.check_block_len(at, t, len, 12)?;
                    self.skip_block(at, len, be)?;
                }
                BLOCK_EPB | BLOCK_SPB | BLOCK_OPB => return Ok(()),
                BLOCK_IDB => {
                    self.next_ng_block()?;
                    return Ok(());
                }
                _ => {
                    self.next_ng_block()?;
                }
            }
        }
    }

    fn next_ng(&mut self) -> Result<Option<Found>, CaptureError> {
        loop {
            match self.next_ng_block()? {
                // Sections without interfaces all the way to the end (not
                // a range's stop).
                Block::End if self.declared.is_empty() && self.input.pos() < self.stop => {
                    return Err(self.err(self.input.pos(), ErrorKind::NoInterfaces))
                }
                Block::End => return Ok(None),
                Block::Packet(f) => return Ok(Some(f)),
                Block::Other => {}
            }
        }
    }

    pub(crate) fn next_ng_block(&mut self) -> Result<Block, CaptureError> {
        let at = self.input.pos();
        if at >= self.stop {
            return Ok(Block::End);
        }
        let have = self.fill(8)?;
        if have == 0 {
            return Ok(Block::End);
        }
        if have < 8 {
            return Err(self.truncated(at, "block header", have, 8));
        }
        if u32_at(self.input.bytes(), 0, false) == Some(BLOCK_SHB) {
            self.read_section_header(false)?;
            return Ok(Block::Other);
        }
        let be = self.ng().big_endian;
        let t = u32_at(self.input.bytes(), 0, be).unwrap_or(0);
        let len = u32_at(self.input.bytes(), 4, be).unwrap_or(0);
        match t {
            BLOCK_IDB => {
                self.check_block_len(at, t, len, 20)?;
                let body = self.read_block(at, len, be, "interface description block")?;
                self.add_interface(at, body, be)?;
                if self.ng().interfaces.len() == 1 && self.format.linktype().is_none() {
                    self.update_ng_format();
                }
                Ok(Block::Other)
            }
            BLOCK_EPB | BLOCK_OPB => {
                let what = if t == BLOCK_EPB {
                    "enhanced packet block"
                } else {
                    "packet block"
                };
                self.check_block_len(at, t, len, 32)?;
                let body = self.read_block(at, len, be, what)?;
                let b = self.input.slice(body);
                let id = if t == BLOCK_EPB {
                    u32_at(b, 0, be)
                } else {
                    u16_at(b, 0, be).map(u32::from)
                }
                .unwrap_or(0);
                let ts_hi = u32_at(b, 4, be).unwrap_or(0);
                let ts_lo = u32_at(b, 8, be).unwrap_or(0);
                let caplen = u32_at(b, 12, be).unwrap_or(0);
                let wirelen = u32_at(b, 16, be).unwrap_or(0);
                if caplen as usize > b.len() - 20 {
                    return Err(self.err(
                        at,
                        ErrorKind::BadBlock {
                            block: what,
                            reason: "captured length is larger than the block",
                        },
                    ));
                }
                let iface = self.interface(at, id)?;
                let ts = (u64::from(ts_hi) << 32) | u64::from(ts_lo);
                let (ts_sec, ts_nsec) = split_ts(ts, iface.units_per_sec, iface.ts_offset);
                let keep = caplen.min(iface.snapshot) as usize;
                Ok(Block::Packet(Found {
                    range: (body.0 + 20, body.0 + 20 + keep),
                    ts_sec,
                    ts_nsec,
                    wirelen,
                    linktype: iface.linktype,
                    snaplen: iface.snaplen,
                    interface: id,
                }))
            }
            BLOCK_SPB => {
                self.check_block_len(at, t, len, 16)?;
                let body = self.read_block(at, len, be, "simple packet block")?;
                let b = self.input.slice(body);
                let wirelen = u32_at(b, 0, be).unwrap_or(0);
                let room = b.len() - 4;
                let iface = self.interface(at, 0)?;
                let keep = (wirelen.min(iface.snapshot) as usize).min(room);
                Ok(Block::Packet(Found {
                    range: (body.0 + 4, body.0 + 4 + keep),
                    ts_sec: 0,
                    ts_nsec: 0,
                    wirelen,
                    linktype: iface.linktype,
                    snaplen: iface.snaplen,
                    interface: 0,
                }))
            }
            _ => {
                self.check_block_len(at, t, len, 12)?;
                self.skip_block(at, len, be)?;
                Ok(Block::Other)
            }
        }
    }

    fn interface(&mut self, at: u64, id: u32) -> Result<Interface, CaptureError> {
        let ng = self.ng();
        match ng.interfaces.get(id as usize) {
            Some(i) => Ok(*i),
            None => {
                let count = ng.interfaces.len();
                Err(self.err(at, ErrorKind::UnknownInterface { id, count }))
            }
        }
    }

    fn add_interface(
        &mut self,
        at: u64,
        body: (usize, usize),
        be: bool,
    ) -> Result<(), CaptureError> {
        let b = self.input.slice(body);
        let linktype = u16_at(b, 0, be).unwrap_or(0);
        let snaplen = u32_at(b, 4, be).unwrap_or(0);
        let mut units_per_sec = 1_000_000u64;
        let mut ts_offset = 0i64;
        let mut off = 8usize;
        // Options: code (2), length (2), value padded to 4 bytes.
        while off + 4 <= b.len() {
            let code = u16_at(b, off, be).unwrap_or(0);
            let olen = u16_at(b, off + 2, be).unwrap_or(0) as usize;
            if code == 0 {
                break;
            }
            let value = off + 4;
            let padded = (olen + 3) & !3;
            if value + padded > b.len() {
                return Err(self.err(
                    at,
                    ErrorKind::BadBlock {
                        block: "interface description block",
                        reason: "an option runs past the end of the block",
                    },
                ));
            }
            match (code, olen) {
                (9, 1..) => {
                    let v = b[value];
                    let exp = u32::from(v & 0x7f);
                    let units = if v & 0x80 != 0 {
                        1u64.checked_shl(exp).filter(|_| exp < 64)
                    } else {
                        10u64.checked_pow(exp)
                    };
                    match units {
                        Some(u) => units_per_sec = u,
                        None => return Err(self.err(at, ErrorKind::BadTsResol(v))),
                    }
                }
                (14, 8..) => ts_offset = u64_at(b, value, be).unwrap_or(0) as i64,
                _ => {}
            }
            off = value + padded;
        }
        let max = max_snaplen_for_linktype(linktype);
        let snapshot = if snaplen == 0 || snaplen > max {
            max
        } else {
            snaplen
        };
        let iface = Interface {
            linktype,
            snaplen,
            snapshot,
            units_per_sec,
            ts_offset,
        };
        let ng = self.ng();
        if ng.interfaces.len() >= MAX_INTERFACES {
            return Err(self.err(at, ErrorKind::TooManyInterfaces(MAX_INTERFACES)));
        }
        ng.interfaces.push(iface);
        let info = InterfaceInfo { linktype, snaplen };
        if !self.declared.contains(&info) && self.declared.len() < MAX_INTERFACES {
            self.declared.push(info);
        }
        Ok(())
    }
}

pub(crate) enum Block {
    End,
    Packet(Found),
    Other,
}
