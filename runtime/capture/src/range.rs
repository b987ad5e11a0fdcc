//! Reading one byte range of a capture, so that many workers can share a
//! large file: each reads the records that *start* inside its range.
//!
//! * [`CaptureReader::checkpoint`] says where a reader stands between two
//!   records and what it knows there (byte order, time-stamp unit, the
//!   pcapng interfaces); [`CaptureReader::resume`] carries on from a
//!   [`Checkpoint`] in another reader, another process or another machine
//!   ([`Checkpoint::to_bytes`], [`Checkpoint::from_bytes`]).
//! * [`CaptureReader::stop_at`] ends a reader before the first record or
//!   block that starts at or past an offset.
//! * [`open_range`] finds the first record at or after an arbitrary offset
//!   without reading what comes before it: a chain of plausible record
//!   headers (a heuristic). [`verify_chain`] then proves the cut exact: the
//!   range before must have stopped at exactly the checkpoint the next one
//!   started from, and a range that does not is read again from the exact
//!   checkpoint. No packet is lost or read twice, whatever the heuristic
//!   guessed.
//!
//! ```
//! use sluice_capture::{open_range, verify_chain, CaptureFormat, CaptureWriter, Packet};
//! use std::io::Cursor;
//!
//! let mut w = CaptureWriter::new(Vec::new(), "mem", &CaptureFormat::pcap(1, 65535))?;
//! for i in 0..100u32 {
//!     w.write_packet(&Packet::new(1_700_000_000 + i as i64, 0, 1, &[i as u8; 100]))?;
//! }
//! let file = w.finish()?;
//! let size = file.len() as u64;
//! // Two ranges, cut in the middle of a record.
//! let cuts = [(0, 5000), (5000, size)];
//! let mut ends = Vec::new();
//! let mut seen = Vec::new();
//! for (start, end) in cuts {
//!     let mut part = open_range(Cursor::new(&file), "mem", start, end, None)?;
//!     while let Some(p) = part.next_packet()? {
//!         seen.push(p.data[0]);
//!     }
//!     ends.push(part.finish());
//! }
//! assert!(verify_chain(&ends).is_ok());
//! assert_eq!(seen, (0..100).collect::<Vec<u8>>());
//! # Ok::<(), sluice_capture::CaptureError>(())
//! ```

use crate::error::{CaptureError, ErrorKind};
use crate::format::{
    CaptureFormat, InterfaceInfo, BLOCK_EPB, BLOCK_IDB, BLOCK_OPB, BLOCK_SHB, BLOCK_SPB,
    BYTE_ORDER_MAGIC, MAX_BLOCK_LEN,
};
use crate::input::Input;
use crate::reader::{Block, Interface, NgState, PcapState, State};
use crate::CaptureReader;
use sluice_wire::bytes::{u16_at, u32_at};
use std::io::{Read, Seek, SeekFrom};

/// Where a reader stands between two records, with everything it knows
/// there: enough for another reader to carry on from that byte.
///
/// Two checkpoints are equal when a reader resumed from either reads the
/// same packets from there on.
///
/// ```
/// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Checkpoint, Packet};
/// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcapng())?;
/// w.write_packet(&Packet::new(1, 0, 1, b"one"))?;
/// w.write_packet(&Packet::new(2, 0, 1, b"two"))?;
/// let bytes = w.finish()?;
/// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
/// r.next_packet()?;
/// let cp = Checkpoint::from_bytes(&r.checkpoint().to_bytes()).unwrap();
/// let rest = &bytes[cp.offset() as usize..];
/// let mut again = CaptureReader::resume(rest, "m", &cp);
/// assert_eq!(again.next_packet()?.unwrap().data, b"two");
/// # Ok::<(), sluice_capture::CaptureError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    offset: u64,
    format: CaptureFormat,
    state: State,
}

/// A checkpoint's bytes that [`Checkpoint::from_bytes`] cannot read.
///
/// ```
/// assert!(sluice_capture::Checkpoint::from_bytes(b"nonsense").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a capture checkpoint: {0}")]
pub struct BadCheckpoint(&'static str);

/// The first bytes of [`Checkpoint::to_bytes`] (and its version).
const CHECKPOINT_MAGIC: &[u8; 5] = b"SLCP\x01";

impl Checkpoint {
    /// The file offset of the next record or block.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 9))?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// assert_eq!(r.checkpoint().offset(), 24);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The capture's format, as the reader at the start of the file gave it
    /// (what output files of the same format are written with).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter};
    /// let bytes = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 9))?.finish()?;
    /// let r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// assert_eq!(r.checkpoint().format().linktype(), Some(1));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The checkpoint as bytes, to send to another process
    /// ([`Checkpoint::from_bytes`] reads them back).
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Checkpoint, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcapng())?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"a"))?;
    /// let bytes = w.finish()?;
    /// let cp = CaptureReader::from_reader(&bytes[..], "m")?.checkpoint();
    /// assert_eq!(Checkpoint::from_bytes(&cp.to_bytes()), Ok(cp));
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        b.extend_from_slice(CHECKPOINT_MAGIC);
        b.extend_from_slice(&self.offset.to_le_bytes());
        match self.format {
            CaptureFormat::Pcap {
                nanos,
                big_endian,
                linktype,
                snaplen,
                fcs_len,
            } => {
                b.extend_from_slice(&[0, nanos as u8, big_endian as u8]);
                b.extend_from_slice(&linktype.to_le_bytes());
                b.extend_from_slice(&snaplen.to_le_bytes());
                b.extend_from_slice(&[fcs_len.is_some() as u8, fcs_len.unwrap_or(0)]);
            }
            CaptureFormat::PcapNg {
                big_endian,
                first_interface,
            } => {
                b.extend_from_slice(&[1, big_endian as u8, first_interface.is_some() as u8]);
                let i = first_interface.unwrap_or(crate::InterfaceInfo {
                    linktype: 0,
                    snaplen: 0,
                });
                b.extend_from_slice(&i.linktype.to_le_bytes());
                b.extend_from_slice(&i.snaplen.to_le_bytes());
            }
        }
        match &self.state {
            State::Pcap(st) => {
                b.extend_from_slice(&[0, st.big_endian as u8, st.nanos as u8]);
                b.extend_from_slice(&st.linktype.to_le_bytes());
                for v in [st.snaplen, st.snapshot, st.max_caplen] {
                    b.extend_from_slice(&v.to_le_bytes());
                }
                b.extend_from_slice(&[st.swap_lengths, st.record_header as u8]);
            }
            State::PcapNg(ng) => {
                b.extend_from_slice(&[1, ng.big_endian as u8]);
                b.extend_from_slice(&(ng.interfaces.len() as u32).to_le_bytes());
                for i in &ng.interfaces {
                    b.extend_from_slice(&i.linktype.to_le_bytes());
                    b.extend_from_slice(&i.snaplen.to_le_bytes());
                    b.extend_from_slice(&i.snapshot.to_le_bytes());
                    b.extend_from_slice(&i.units_per_sec.to_le_bytes());
                    b.extend_from_slice(&i.ts_offset.to_le_bytes());
                }
            }
        }
        b
    }

    /// Read a checkpoint made by [`Checkpoint::to_bytes`].
    ///
    /// ```
    /// assert!(sluice_capture::Checkpoint::from_bytes(b"SLCP\x01").is_err());
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Checkpoint, BadCheckpoint> {
        let mut c = Cursor { b: bytes, at: 0 };
        if c.take(CHECKPOINT_MAGIC.len())? != CHECKPOINT_MAGIC {
            return Err(BadCheckpoint("wrong magic or version"));
        }
        let offset = c.u64()?;
        let format = match c.u8()? {
            0 => {
                let (nanos, big_endian) = (c.flag()?, c.flag()?);
                let (linktype, snaplen) = (c.u16()?, c.u32()?);
                let (has_fcs, fcs) = (c.flag()?, c.u8()?);
                CaptureFormat::Pcap {
                    nanos,
                    big_endian,
                    linktype,
                    snaplen,
                    fcs_len: has_fcs.then_some(fcs),
                }
            }
            1 => {
                let (big_endian, has_first) = (c.flag()?, c.flag()?);
                let (linktype, snaplen) = (c.u16()?, c.u32()?);
                CaptureFormat::PcapNg {
                    big_endian,
                    first_interface: has_first
                        .then_some(crate::InterfaceInfo { linktype, snaplen }),
                }
            }
            _ => return Err(BadCheckpoint("unknown format")),
        };
        let state = match c.u8()? {
            0 => State::Pcap(PcapState {
                big_endian: c.flag()?,
                nanos: c.flag()?,
                linktype: c.u16()?,
                snaplen: c.u32()?,
                snapshot: c.u32()?,
                max_caplen: c.u32()?,
                swap_lengths: c.u8()?,
                record_header: c.u8()? as usize,
                last_times: (0, 0),
            }),
            1 => {
                let big_endian = c.flag()?;
                let n = c.u32()? as usize;
                if n > bytes.len() / 26 {
                    return Err(BadCheckpoint("too many interfaces for its length"));
                }
                let mut interfaces = Vec::with_capacity(n);
                for _ in 0..n {
                    interfaces.push(Interface {
                        linktype: c.u16()?,
                        snaplen: c.u32()?,
                        snapshot: c.u32()?,
                        units_per_sec: c.u64()?,
                        ts_offset: c.u64()? as i64,
                    });
                }
                State::PcapNg(NgState {
                    big_endian,
                    interfaces,
                })
            }
            _ => return Err(BadCheckpoint("unknown state")),
        };
        if c.at != bytes.len() {
            return Err(BadCheckpoint("bytes left over"));
        }
        Ok(Checkpoint {
            offset,
            format,
            state,
        })
    }
}

/// Reads the little-endian fields of a checkpoint.
struct Cursor<'a> {
    b: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], BadCheckpoint> {
        let s = self
            .b
            .get(self.at..self.at + n)
            .ok_or(BadCheckpoint("too short"))?;
        self.at += n;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, BadCheckpoint> {
        Ok(self.take(1)?[0])
    }
    fn flag(&mut self) -> Result<bool, BadCheckpoint> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(BadCheckpoint("a flag is neither 0 nor 1")),
        }
    }
    fn u16(&mut self) -> Result<u16, BadCheckpoint> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, BadCheckpoint> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, BadCheckpoint> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_le_bytes(a))
    }
}

impl<R: Read> CaptureReader<R> {
    /// Where this reader stands: the offset of the next record or block
    /// and what the reader knows there. Taken between two packets (or at
    /// the end), it lets [`CaptureReader::resume`] carry on from here.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 99))?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"abc"))?;
    /// let bytes = w.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// r.next_packet()?;
    /// assert_eq!(r.checkpoint().offset(), 24 + 16 + 3);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn checkpoint(&self) -> Checkpoint {
        let mut state = self.state.clone();
        if let State::Pcap(st) = &mut state {
            st.last_times = (0, 0);
        }
        Checkpoint {
            offset: self.input.pos(),
            format: self.format,
            state,
        }
    }

    /// A reader that carries on from `checkpoint`: `reader` gives the
    /// file's bytes from the checkpoint's offset on (a file seeked there,
    /// say); errors name the file `name` and count offsets from its start.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 99))?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"a"))?;
    /// w.write_packet(&Packet::new(2, 0, 1, b"b"))?;
    /// let bytes = w.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// r.next_packet()?;
    /// let cp = r.checkpoint();
    /// let mut rest = CaptureReader::resume(&bytes[cp.offset() as usize..], "m", &cp);
    /// assert_eq!(rest.next_packet()?.unwrap().ts_sec, 2);
    /// assert_eq!(rest.offset(), bytes.len() as u64);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn resume(reader: R, name: impl Into<String>, checkpoint: &Checkpoint) -> Self {
        // What the file declared before the checkpoint.
        let mut declared: Vec<InterfaceInfo> = Vec::new();
        let infos: Vec<InterfaceInfo> = match &checkpoint.state {
            State::Pcap(st) => vec![InterfaceInfo {
                linktype: st.linktype,
                snaplen: st.snaplen,
            }],
            State::PcapNg(ng) => ng
                .interfaces
                .iter()
                .map(|i| InterfaceInfo {
                    linktype: i.linktype,
                    snaplen: i.snaplen,
                })
                .collect(),
        };
        for i in infos {
            if !declared.contains(&i) {
                declared.push(i);
            }
        }
        CaptureReader {
            input: Input::at(reader, checkpoint.offset),
            name: name.into(),
            format: checkpoint.format,
            state: checkpoint.state.clone(),
            done: false,
            declared,
            stop: u64::MAX,
            stream: false,
        }
    }

    /// Stop before the first record (pcap) or block (pcapng) that starts
    /// at or past `offset`: [`CaptureReader::next_packet`] then returns
    /// `Ok(None)`, and [`CaptureReader::checkpoint`] is where the next
    /// range's reader starts.
    ///
    /// ```
    /// use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
    /// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 99))?;
    /// w.write_packet(&Packet::new(1, 0, 1, b"a"))?;
    /// w.write_packet(&Packet::new(2, 0, 1, b"b"))?;
    /// let bytes = w.finish()?;
    /// let mut r = CaptureReader::from_reader(&bytes[..], "m")?;
    /// r.stop_at(24 + 1); // inside the first record: it is read, the second is not
    /// assert!(r.next_packet()?.is_some());
    /// assert!(r.next_packet()?.is_none());
    /// assert_eq!(r.checkpoint().offset(), 24 + 17);
    /// # Ok::<(), sluice_capture::CaptureError>(())
    /// ```
    pub fn stop_at(&mut self, offset: u64) {
        self.stop = offset;
    }

    /// Read a pcapng file's blocks up to its first packet block (the
    /// interfaces it declares first), so that [`CaptureReader::checkpoint`]
    /// knows them all; nothing to do for pcap.
    fn read_to_first_packet(&mut self) -> Result<(), CaptureError> {
        loop {
            let State::PcapNg(ng) = &self.state else {
                return Ok(());
            };
            let be = ng.big_endian;
            if self.done || self.fill(8)? < 8 {
                return Ok(());
            }
            let t = u32_at(self.input.bytes(), 0, be).unwrap_or(0);
            if matches!(t, BLOCK_SHB | BLOCK_EPB | BLOCK_SPB | BLOCK_OPB) {
                return Ok(());
            }
            if let Err(e) = self.next_ng_block().map(|b| matches!(b, Block::End)) {
                self.done = true;
                return Err(e);
            }
        }
    }
}

/// How a range's reading ended: the checkpoint it started from and the one
/// it stopped at, for [`verify_chain`].
///
/// ```
/// let e = sluice_capture::RangeEnds { start: 0, end: 24, first: None, next: None, failed: false };
/// assert!(e.first.is_none());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeEnds {
    /// The range's first byte.
    pub start: u64,
    /// The byte after the range.
    pub end: u64,
    /// Where the reader started: the first record at or after `start` as
    /// it found it (`None`: it found none before `end`).
    pub first: Option<Checkpoint>,
    /// Where it stopped: the first record or block at or after `end`
    /// (the end of the file), `None` when it found no first record or
    /// failed.
    pub next: Option<Checkpoint>,
    /// Reading failed (a corrupt or truncated record).
    pub failed: bool,
}

/// The records of a capture that start in one byte range, from
/// [`open_range`].
#[derive(Debug)]
pub struct CaptureRange<R> {
    /// `None`: no record starts in the range, as far as the search for one
    /// could tell.
    reader: Option<CaptureReader<R>>,
    /// The capture's format, from the start of the file.
    format: CaptureFormat,
    start: u64,
    end: u64,
    first: Option<Checkpoint>,
    failed: bool,
}

impl<R: Read> CaptureRange<R> {
    /// The next packet that starts in the range (`Ok(None)` after the
    /// last). An error here is the file's only if [`verify_chain`] finds
    /// that the range started at the right place.
    pub fn next_packet(&mut self) -> Result<Option<crate::Packet<'_>>, CaptureError> {
        let Some(r) = self.reader.as_mut() else {
            return Ok(None);
        };
        let p = r.next_packet();
        self.failed |= p.is_err();
        p
    }

    /// The capture's format, as its head gives it (what outputs of the
    /// same format are written with).
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The file offset of the next record or block (for progress).
    pub fn offset(&self) -> u64 {
        self.reader.as_ref().map_or(self.end, CaptureReader::offset)
    }

    /// After the last packet: where the range started and stopped, for
    /// [`verify_chain`].
    pub fn finish(self) -> RangeEnds {
        let next = match (&self.reader, self.failed) {
            (Some(r), false) => Some(r.checkpoint()),
            _ => None,
        };
        RangeEnds {
            start: self.start,
            end: self.end,
            failed: self.failed,
            first: self.first,
            next,
        }
    }
}

/// How far past the start of a range the first record is looked for.
const SEARCH: u64 = 4 << 20;
/// How many bytes past a candidate the chain of records may reach.
const LOOKAHEAD: u64 = 4 << 20;
/// Consecutive plausible records that make a candidate the first record.
const CHAIN: usize = 16;

/// Open the part of a capture whose records (pcapng: blocks) start in
/// `start..end`. `resume` is the exact checkpoint to start from when it
/// is known (from the range before, see [`verify_chain`]); without it the
/// file's head is read for its format, and the first record at or after
/// `start` is found by a chain of plausible record headers.
///
/// ```
/// use sluice_capture::{open_range, CaptureFormat, CaptureWriter, Packet};
/// let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 99))?;
/// w.write_packet(&Packet::new(1, 0, 1, b"a"))?;
/// let bytes = w.finish()?;
/// let mut r = open_range(std::io::Cursor::new(&bytes), "m", 0, 30, None)?;
/// assert!(r.next_packet()?.is_some());
/// assert!(r.next_packet()?.is_none());
/// # Ok::<(), sluice_capture::CaptureError>(())
/// ```
pub fn open_range<R: Read + Seek>(
    mut file: R,
    name: &str,
    start: u64,
    end: u64,
    resume: Option<&Checkpoint>,
) -> Result<CaptureRange<R>, CaptureError> {
    let io = |at: u64| move |e: std::io::Error| CaptureError::new(name, at, ErrorKind::Io(e));
    if let Some(cp) = resume {
        file.seek(SeekFrom::Start(cp.offset))
            .map_err(io(cp.offset))?;
        let mut reader = CaptureReader::resume(file, name, cp);
        reader.stop_at(end);
        return Ok(CaptureRange {
            reader: Some(reader),
            format: cp.format,
            start,
            end,
            failed: false,
            first: Some(cp.clone()),
        });
    }
    file.seek(SeekFrom::Start(0)).map_err(io(0))?;
    let mut head = CaptureReader::from_reader(file, name)?;
    head.read_to_first_packet()?;
    let at_head = head.checkpoint();
    let format = at_head.format;
    if start <= at_head.offset {
        head.stop_at(end);
        return Ok(CaptureRange {
            reader: Some(head),
            format,
            start,
            end,
            failed: false,
            first: Some(at_head),
        });
    }
    let mut file = head.input.into_inner();
    let size = file.seek(SeekFrom::End(0)).map_err(io(0))?;
    let window_end = start
        .saturating_add(SEARCH)
        .min(end)
        .saturating_add(LOOKAHEAD)
        .min(size);
    let mut window = Vec::new();
    if window_end > start {
        file.seek(SeekFrom::Start(start)).map_err(io(start))?;
        (&mut file)
            .take(window_end - start)
            .read_to_end(&mut window)
            .map_err(io(start))?;
    }
    let at_eof = start + window.len() as u64 >= size;
    let last = start.saturating_add(SEARCH).min(end).min(size);
    let found = (start..last)
        .find(|&p| plausible_chain(&at_head.state, &window, (p - start) as usize, at_eof));
    let Some(p) = found else {
        return Ok(CaptureRange {
            reader: None,
            format,
            start,
            end,
            failed: false,
            first: None,
        });
    };
    let cp = Checkpoint {
        offset: p,
        ..at_head
    };
    file.seek(SeekFrom::Start(p)).map_err(io(p))?;
    let mut reader = CaptureReader::resume(file, name, &cp);
    reader.stop_at(end);
    Ok(CaptureRange {
        reader: Some(reader),
        format,
        start,
        end,
        failed: false,
        first: Some(cp),
    })
}

/// Whether `CHAIN` plausible records start at `at` in `window` (or
/// plausible records run exactly to the end of the file, or at least two
/// run past the end of the window).
fn plausible_chain(state: &State, window: &[u8], mut at: usize, at_eof: bool) -> bool {
    let mut prev_secs = None;
    for i in 0..CHAIN {
        if at == window.len() {
            return i > 0 && at_eof;
        }
        let step = match state {
            State::Pcap(st) => pcap_record(st, &window[at..], &mut prev_secs),
            State::PcapNg(ng) => ng_block(ng, &window[at..]),
        };
        match step {
            Step::Bad => return false,
            Step::PastWindow => return !at_eof && i >= 2,
            Step::Len(n) => at += n,
        }
    }
    true
}

/// One record or block checked by [`plausible_chain`].
enum Step {
    /// Plausible, this long.
    Len(usize),
    /// Not a record.
    Bad,
    /// It may be one, but it runs past the bytes at hand.
    PastWindow,
}

fn pcap_record(st: &PcapState, b: &[u8], prev_secs: &mut Option<u32>) -> Step {
    let hl = st.record_header;
    if b.len() < hl {
        return Step::PastWindow;
    }
    let be = st.big_endian;
    let secs = u32_at(b, 0, be).unwrap_or(0);
    let frac = u32_at(b, 4, be).unwrap_or(0);
    let mut caplen = u32_at(b, 8, be).unwrap_or(0);
    let mut wirelen = u32_at(b, 12, be).unwrap_or(0);
    if st.swap_lengths == 2 || (st.swap_lengths == 1 && caplen > wirelen) {
        std::mem::swap(&mut caplen, &mut wirelen);
    }
    let frac_limit = if st.nanos { 1_000_000_000 } else { 1_000_000 };
    let near = prev_secs.map_or(true, |p| p.abs_diff(secs) <= 86_400);
    // Zero-length packets are as rare in captures as runs of zero bytes
    // are common in payloads.
    if caplen > st.max_caplen || wirelen < caplen || wirelen == 0 || frac >= frac_limit || !near {
        return Step::Bad;
    }
    *prev_secs = Some(secs);
    let len = hl + caplen as usize;
    if b.len() < len {
        return Step::PastWindow;
    }
    Step::Len(len)
}

fn ng_block(ng: &NgState, b: &[u8]) -> Step {
    if b.len() < 12 {
        return Step::PastWindow;
    }
    let shb = u32_at(b, 0, false) == Some(BLOCK_SHB);
    let be = if shb {
        match u32_at(b, 8, false) {
            Some(BYTE_ORDER_MAGIC) => false,
            Some(x) if x == BYTE_ORDER_MAGIC.swap_bytes() => true,
            _ => return Step::Bad,
        }
    } else {
        ng.big_endian
    };
    let t = u32_at(b, 0, be).unwrap_or(0);
    let len = u32_at(b, 4, be).unwrap_or(0);
    let min = match t {
        BLOCK_EPB | BLOCK_OPB => 32,
        BLOCK_IDB => 20,
        BLOCK_SPB => 16,
        BLOCK_SHB => 28,
        // Name resolution, interface statistics, decryption secrets,
        // systemd journal export, custom blocks.
        4 | 5 | 9 | 0xA | 0xBAD | 0x4000_0BAD => 12,
        _ => return Step::Bad,
    };
    if len < min || len % 4 != 0 || len > MAX_BLOCK_LEN {
        return Step::Bad;
    }
    if t == BLOCK_EPB || t == BLOCK_OPB {
        let id = if t == BLOCK_EPB {
            u32_at(b, 8, be)
        } else {
            u16_at(b, 8, be).map(u32::from)
        }
        .unwrap_or(u32::MAX);
        let caplen = u32_at(b, 20, be).unwrap_or(u32::MAX);
        if id as usize >= ng.interfaces.len().max(1) || caplen > len - 32 {
            return Step::Bad;
        }
    }
    let n = len as usize;
    if b.len() < n {
        return Step::PastWindow;
    }
    if u32_at(b, n - 4, be) != Some(len) {
        return Step::Bad;
    }
    Step::Len(n)
}

/// What [`verify_chain`] found wrong with a file's ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChainFault {
    /// Range `.0` guessed its start wrong: read it again with `resume` =
    /// `.1`, then check again. `.1` is `None` when the first range did not
    /// start at the file's head (it must start at 0).
    Redo(usize, Option<Checkpoint>),
    /// Range `.0` started at the right place and failed: its error is the
    /// file's (every range before it is exact).
    Failed(usize),
}

/// Check that consecutive ranges of one file (in order, each starting
/// where the one before ends, the first at 0) read every record exactly
/// once: each range must have started from exactly the checkpoint the
/// range before stopped at. The first range starts at the file's head, so
/// by induction every stop is exact.
///
/// ```
/// use sluice_capture::{verify_chain, ChainFault, RangeEnds};
/// assert!(verify_chain(&[]).is_ok());
/// let lost = RangeEnds { start: 0, end: 10, first: None, next: None, failed: false };
/// assert_eq!(verify_chain(&[lost]), Err(ChainFault::Redo(0, None)));
/// ```
pub fn verify_chain(ranges: &[RangeEnds]) -> Result<(), ChainFault> {
    let mut expect: Option<Checkpoint> = None;
    for (i, r) in ranges.iter().enumerate() {
        let truth = match expect.take() {
            Some(t) => t,
            None => match (&r.first, r.start) {
                (Some(first), 0) => first.clone(),
                _ => return Err(ChainFault::Redo(0, None)),
            },
        };
        if r.first.as_ref() == Some(&truth) {
            match &r.next {
                Some(next) => expect = Some(next.clone()),
                None if r.failed => return Err(ChainFault::Failed(i)),
                None => return Err(ChainFault::Redo(i, Some(truth))),
            }
        } else if r.first.is_none() && truth.offset >= r.end {
            // Rightly empty: no record starts in it.
            expect = Some(truth);
        } else {
            return Err(ChainFault::Redo(i, Some(truth)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CaptureWriter, InterfaceInfo, Packet};
    use std::io::Cursor as Mem;

    /// (seconds, nanoseconds, wire length, link type, data) of a packet.
    type Seen = (i64, u32, u32, u16, Vec<u8>);

    fn seen(p: &Packet<'_>) -> Seen {
        (p.ts_sec, p.ts_nsec, p.wirelen, p.linktype, p.data.to_vec())
    }

    fn whole(file: &[u8]) -> Vec<Seen> {
        let mut r = CaptureReader::from_reader(file, "m").unwrap();
        let mut out = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            out.push(seen(&p));
        }
        out
    }

    /// Read `file` in ranges cut at `cuts`, re-reading ranges as
    /// `verify_chain` says until it is satisfied; the packets in order and
    /// how many ranges were read again.
    fn by_ranges(file: &[u8], cuts: &[u64]) -> (Vec<Seen>, usize) {
        let mut bounds = vec![0];
        bounds.extend(
            cuts.iter()
                .copied()
                .filter(|&c| c > 0 && c < file.len() as u64),
        );
        bounds.sort_unstable();
        bounds.dedup();
        bounds.push(file.len() as u64);
        let read = |start: u64, end: u64, resume: Option<&Checkpoint>| {
            let mut part = open_range(Mem::new(file), "m", start, end, resume).unwrap();
            let mut got = Vec::new();
            while let Ok(Some(p)) = part.next_packet() {
                got.push(seen(&p));
            }
            (got, part.finish())
        };
        let mut parts: Vec<(Vec<Seen>, RangeEnds)> =
            bounds.windows(2).map(|w| read(w[0], w[1], None)).collect();
        let mut redone = 0;
        loop {
            let ends: Vec<RangeEnds> = parts.iter().map(|p| p.1.clone()).collect();
            match verify_chain(&ends) {
                Ok(()) => break,
                Err(ChainFault::Failed(i)) => panic!("range {i} failed in a sound file"),
                Err(ChainFault::Redo(i, cp)) => {
                    assert!(cp.is_some(), "the first range always starts at the head");
                    parts[i] = read(ends[i].start, ends[i].end, cp.as_ref());
                    redone += 1;
                    assert!(redone <= parts.len() * 2, "verification does not converge");
                }
            }
        }
        (parts.into_iter().flat_map(|p| p.0).collect(), redone)
    }

    /// A small deterministic generator.
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    fn capture(
        format: &CaptureFormat,
        n: usize,
        seed: u64,
        payload: &dyn Fn(usize) -> Vec<u8>,
    ) -> Vec<u8> {
        let mut rng = Lcg(seed);
        let mut w = CaptureWriter::new(Vec::new(), "m", format).unwrap();
        for i in 0..n {
            let mut data = payload(i);
            data.truncate(rng.next() as usize % 1500);
            let p = Packet {
                wirelen: data.len() as u32 + (rng.next() % 3) as u32,
                ..Packet::new(
                    1_700_000_000 + i as i64 / 10,
                    (rng.next() % 1_000_000) as u32 * 1000,
                    1,
                    &data,
                )
            };
            w.write_packet(&p).unwrap();
        }
        w.finish().unwrap()
    }

    fn formats() -> Vec<CaptureFormat> {
        let pcap = |nanos, big_endian| CaptureFormat::Pcap {
            nanos,
            big_endian,
            linktype: 1,
            snaplen: 65535,
            fcs_len: None,
        };
        vec![
            pcap(false, false),
            pcap(true, true),
            CaptureFormat::pcapng(),
            CaptureFormat::PcapNg {
                big_endian: true,
                first_interface: Some(InterfaceInfo {
                    linktype: 1,
                    snaplen: 65535,
                }),
            },
        ]
    }

    #[test]
    fn ranges_read_every_packet_once() {
        for format in formats() {
            let file = capture(&format, 400, 7, &|i| vec![i as u8; 1500]);
            let all = whole(&file);
            let mut rng = Lcg(11);
            for _ in 0..30 {
                let cuts: Vec<u64> = (0..(rng.next() % 6 + 1))
                    .map(|_| rng.next() % file.len() as u64)
                    .collect();
                let (got, _) = by_ranges(&file, &cuts);
                assert_eq!(got.len(), all.len(), "{format:?} cut at {cuts:?}");
                assert!(got == all, "{format:?} cut at {cuts:?}");
            }
            // Every cut point of the first few records, one by one.
            for cut in 0..2000 {
                let (got, redone) = by_ranges(&file, &[cut]);
                assert!(got == all, "{format:?} cut at {cut}");
                assert_eq!(
                    redone, 0,
                    "{format:?} cut at {cut}: the search guessed wrong"
                );
            }
        }
    }

    #[test]
    fn a_capture_inside_the_packets_does_not_fool_the_ranges() {
        // Payloads that are themselves capture files of the same format:
        // their records look like the outer file's, so the search for the
        // first record may stop inside a packet; verification catches it.
        for format in formats() {
            let inner = capture(&format, 40, 3, &|_| vec![0x45; 60]);
            let file = capture(&format, 300, 5, &|_| inner.clone());
            let all = whole(&file);
            let mut redone_any = 0;
            for cut in (0..file.len() as u64).step_by(97) {
                let (got, redone) = by_ranges(&file, &[cut, cut + 5000, cut + 20_000]);
                assert!(got == all, "{format:?} cut at {cut}");
                redone_any += redone;
            }
            assert!(
                redone_any > 0,
                "{format:?}: no cut was ever guessed wrong; the test tests nothing"
            );
        }
    }

    #[test]
    fn an_interface_declared_mid_file_is_carried_over() {
        let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcapng()).unwrap();
        for i in 0..200u32 {
            // Link type 1 first, then a second interface (Linux cooked) appears.
            let lt = if i < 100 { 1 } else { 113 };
            w.write_packet(&Packet::new(
                1_700_000_000 + i as i64,
                0,
                lt,
                &[i as u8; 90],
            ))
            .unwrap();
        }
        let file = w.finish().unwrap();
        let all = whole(&file);
        for cut in (0..file.len() as u64).step_by(61) {
            let (got, _) = by_ranges(&file, &[cut]);
            assert!(got == all, "cut at {cut}");
        }
    }

    #[test]
    fn checkpoints_round_trip_and_refuse_garbage() {
        for format in formats() {
            let file = capture(&format, 3, 1, &|_| vec![1; 100]);
            let mut r = CaptureReader::from_reader(&file[..], "m").unwrap();
            r.next_packet().unwrap();
            let cp = r.checkpoint();
            let bytes = cp.to_bytes();
            assert_eq!(Checkpoint::from_bytes(&bytes), Ok(cp));
            for n in 0..bytes.len() {
                assert!(Checkpoint::from_bytes(&bytes[..n]).is_err());
            }
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Checkpoint::from_bytes(&longer).is_err());
        }
    }

    #[test]
    fn a_corrupt_range_reports_its_error() {
        let format = CaptureFormat::pcap(1, 65535);
        let mut file = capture(&format, 50, 2, &|_| vec![7; 1500]);
        let n = file.len();
        file.truncate(n - 10);
        let size = file.len() as u64;
        let mut part = open_range(Mem::new(&file), "m", 0, size, None).unwrap();
        let e = loop {
            match part.next_packet() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("no error for a truncated file"),
                Err(e) => break e,
            }
        };
        assert!(matches!(e.kind(), ErrorKind::Truncated { .. }), "{e}");
        let first = part.finish();
        // Cut in two: the second range fails, and is found to be right.
        let mut second = open_range(Mem::new(&file), "m", size / 2, size, None).unwrap();
        while let Ok(Some(_)) = second.next_packet() {}
        let mut head = open_range(Mem::new(&file), "m", 0, size / 2, None).unwrap();
        while let Ok(Some(_)) = head.next_packet() {}
        assert_eq!(
            verify_chain(&[head.finish(), second.finish()]),
            Err(ChainFault::Failed(1))
        );
        assert_eq!(verify_chain(&[first]), Err(ChainFault::Failed(0)));
    }
}
