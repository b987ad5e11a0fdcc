//! FFPF's buffers (§3.1): the circular packet buffer of a flow group
//! ([`PBuf`]), the index buffer of a filter ([`IBuf`]) and the persistent
//! memory array of a filter ([`MBuf`]).
//!
//! # Layout
//!
//! Every buffer is one flat array of atomic words, its counters included
//! in a header at the start; positions are offsets into that array, never
//! pointers. The array lives on this process's heap ([`PBuf::new`],
//! [`IBuf::new`]) or in a region shared with other processes
//! ([`PBuf::in_region`], [`PBuf::attach`], [`IBuf::in_region`],
//! [`IBuf::attach`]): the sluice daemon writes a group's buffers and each
//! client process reads its own with the same [`Reader`]. Values read from
//! a region another process can write are never trusted to stay in range:
//! lengths and counts taken from there are clamped before use.
//!
//! * [`PBuf`]: `slots` fixed-size slots. Slot `i` starts at word
//!   `i * slot_words`; its first [`HEADER_WORDS`] words are the header
//!   (timestamp seconds; nanoseconds and link type; captured and wire
//!   length; snapshot length and interface), the rest the packet bytes.
//!   Packets longer than the slot are stored truncated (their captured
//!   length shrinks; the wire length stays).
//! * [`IBuf`]: `capacity` entries of two words: the packet's position in
//!   the PBuf and the filter's classification result. FFPF stores a 32-bit
//!   slot index; sluice stores the 64-bit *position* (slot index plus
//!   `slots` times the PBuf's wrap counter), so a reader can tell without
//!   ambiguity whether the slot still holds its packet.
//! * [`MBuf`]: 32-bit words the filter and the application both read and
//!   write.
//!
//! # Positions and preferences
//!
//! Each circular buffer has a write position `W` (positions written so far;
//! the slot is `W % slots` and the *wrap counter* is `W / slots`) and, for
//! fast-reader preference, a claim position `H` that runs ahead of `W` while
//! a slot is being written. Readers own their read position `R`.
//!
//! * [`Preference::Slow`] (SRP): the writer never overwrites what a reader
//!   has not read. It stops (drops the packet, counted) when `W` is a full
//!   buffer ahead of the slowest reader `R*`. Readers publish `R` in batches.
//! * [`Preference::Fast`] (FRP): the writer never waits. Readers copy a
//!   packet out, then check `H` (and the IBuf's `H`): if the writer has
//!   started on the slot again, the copy is discarded and the packet counted
//!   lost. Every entry a reader skips or discards is counted, so
//!   `delivered + lost` equals the entries written for it.
//!
//! # Memory orderings
//!
//! * Writer, SRP: store the data (plain copy or relaxed stores) and then
//!   `W` with `Release`. A reader loads `W` with `Acquire` before reading
//!   the data, so the data is visible; it stores its `R` with `Release`
//!   after it has finished reading, and the writer loads every `R` with
//!   `Acquire` before reusing a slot, so the reader's reads happen before
//!   the writer's next writes of that slot.
//! * Writer, FRP: store `H = p + 1` (`Relaxed`), `fence(Release)`, store the
//!   data with relaxed atomic stores, store `W = p + 1` (`Release`). Reader:
//!   load `W` (`Acquire`), copy the data with relaxed atomic loads,
//!   `fence(Acquire)`, load `H` (`Relaxed`): if the writer had begun to
//!   overwrite the slot, the fences make its `H` store visible, and the copy
//!   is discarded (a sequence lock).
//! * [`MBuf`] words are independent relaxed atomics; a filter's updates
//!   for one packet are bracketed by a version counter (again a sequence
//!   lock), so [`MBuf::snapshot`] and [`MBuf::load_u64`] read consistent
//!   values while the filter runs.
//!
//! # Sizes
//!
//! Sizes come from users (`sluice flow --slots`, Python's `FlowGroup`,
//! the daemon's `--pbuf-mib`), so they are bounded and allocated without
//! aborting: a PBuf has at most [`MAX_SLOTS`] slots of at most
//! [`MAX_SLOT_BYTES`] bytes and takes at most [`MAX_PBUF_BYTES`]; an IBuf
//! has at most [`MAX_SLOTS`] entries. Beyond a limit, or when the memory
//! cannot be had (`try_reserve`), the constructors return
//! [`crate::Error::Config`] naming the limit.

use crate::Error;
use sluice_shm::Region;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Arc;

mod mbuf;
mod reader;

pub use mbuf::MBuf;
pub use reader::{PacketRef, Reader};

/// Words of a PBuf slot's header.
pub const HEADER_WORDS: usize = 4;
/// Readers one IBuf can have at once.
pub const MAX_READERS: usize = 32;
/// Most slots a PBuf, or entries an IBuf, may have: 16,777,216.
pub const MAX_SLOTS: usize = 1 << 24;
/// Most bytes of packet one PBuf slot may hold: 262,144 (libpcap's
/// largest snapshot length; no packet sluice reads is longer).
pub const MAX_SLOT_BYTES: usize = 262_144;
/// Most memory one PBuf may take: 4 GiB.
pub const MAX_PBUF_BYTES: usize = 4 << 30;
const FREE: u64 = u64::MAX;

/// Where a buffer's words live.
#[derive(Clone, Debug)]
enum Storage {
    /// This process's heap.
    Heap(Arc<[AtomicU64]>),
    /// A region shared with other processes.
    Shared(Arc<Region>),
}

impl Storage {
    /// `n` zeroed words on the heap, or an error naming `what` when the
    /// memory cannot be had (never an abort).
    fn heap(n: usize, what: &str) -> Result<Storage, Error> {
        let mut v: Vec<AtomicU64> = Vec::new();
        v.try_reserve_exact(n).map_err(|_| {
            Error::Config(format!(
                "cannot allocate {} bytes of memory for {what}",
                n.saturating_mul(8)
            ))
        })?;
        v.extend((0..n).map(|_| AtomicU64::new(0)));
        Ok(Storage::Heap(v.into()))
    }

    fn words(&self) -> &[AtomicU64] {
        match self {
            Storage::Heap(w) => w,
            Storage::Shared(r) => r.words(),
        }
    }
}

/// A buffer's magic word: what it is and the layout's version.
const PBUF_MAGIC: u64 = u64::from_be_bytes(*b"SLPBUF01");
const IBUF_MAGIC: u64 = u64::from_be_bytes(*b"SLIBUF01");

// The PBuf's header words.
const P_MAGIC: usize = 0;
const P_SLOTS: usize = 1;
const P_SLOT_BYTES: usize = 2;
const P_PREF: usize = 3;
const P_HEAD: usize = 4;
const P_W: usize = 5;
const P_DROPS: usize = 6;
/// Words before the first slot.
const P_HEADER: usize = 8;

// The IBuf's header words.
const I_MAGIC: usize = 0;
const I_CAP: usize = 1;
const I_PREF: usize = 2;
const I_HEAD: usize = 3;
const I_W: usize = 4;
const I_USED: usize = 5;
const I_DROPS: usize = 6;
const I_DONE: usize = 7;
const I_ACCEPTED: usize = 8;
const I_SLEEPING: usize = 9;
/// The reader slots.
const I_READERS: usize = 16;
/// Words before the first entry.
const I_HEADER: usize = I_READERS + MAX_READERS;

fn pref_word(p: Preference) -> u64 {
    match p {
        Preference::Slow => 0,
        Preference::Fast => 1,
    }
}

fn pref_of(w: u64) -> Option<Preference> {
    match w {
        0 => Some(Preference::Slow),
        1 => Some(Preference::Fast),
        _ => None,
    }
}

/// Why a shared region is not a buffer of the expected kind.
fn bad_region(what: &str) -> std::io::Error {
    std::io::Error::other(format!("the shared region is not a {what}"))
}

/// What the writer does when readers fall behind (FFPF's buffer management
/// systems).
///
/// ```
/// assert_eq!("frp".parse::<sluice_flow::buffer::Preference>(), Ok(sluice_flow::buffer::Preference::Fast));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preference {
    /// Slow-reader preference: the writer drops new packets while the
    /// slowest reader is a full buffer behind.
    Slow,
    /// Fast-reader preference: the writer always writes; readers detect
    /// overwritten packets and count them lost.
    Fast,
}

impl std::str::FromStr for Preference {
    type Err = String;
    fn from_str(s: &str) -> Result<Preference, String> {
        match s.to_ascii_lowercase().as_str() {
            "srp" | "slow" => Ok(Preference::Slow),
            "frp" | "fast" => Ok(Preference::Fast),
            _ => Err(format!("unknown buffer preference {s:?} (srp or frp)")),
        }
    }
}

impl std::fmt::Display for Preference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Preference::Slow => "srp",
            Preference::Fast => "frp",
        })
    }
}

/// A packet's metadata as stored in a PBuf slot.
///
/// ```
/// let m = sluice_flow::buffer::Meta { ts_sec: 1, ts_nsec: 2, caplen: 3, wirelen: 4, linktype: 1, snaplen: 65535, interface: 0 };
/// assert_eq!(m.caplen, 3);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    /// Seconds since 1970.
    pub ts_sec: i64,
    /// Nanoseconds within the second.
    pub ts_nsec: u32,
    /// Bytes stored (after any truncation to the slot size).
    pub caplen: u32,
    /// Length on the wire.
    pub wirelen: u32,
    /// Link type (`LINKTYPE_*`).
    pub linktype: u16,
    /// Snapshot length of the packet's source.
    pub snaplen: u32,
    /// Interface index within its source.
    pub interface: u32,
}

impl From<&sluice_capture::Packet<'_>> for Meta {
    /// The slot header of a packet (its captured length: its bytes').
    fn from(p: &sluice_capture::Packet<'_>) -> Meta {
        Meta {
            ts_sec: p.ts_sec,
            ts_nsec: p.ts_nsec,
            caplen: p.data.len() as u32,
            wirelen: p.wirelen,
            linktype: p.linktype,
            snaplen: p.snaplen,
            interface: p.interface,
        }
    }
}

impl Meta {
    fn encode(&self) -> [u64; HEADER_WORDS] {
        [
            self.ts_sec as u64,
            self.ts_nsec as u64 | (self.linktype as u64) << 32,
            self.caplen as u64 | (self.wirelen as u64) << 32,
            self.snaplen as u64 | (self.interface as u64) << 32,
        ]
    }

    fn decode(w: [u64; HEADER_WORDS]) -> Meta {
        Meta {
            ts_sec: w[0] as i64,
            ts_nsec: w[1] as u32,
            linktype: (w[1] >> 32) as u16,
            caplen: w[2] as u32,
            wirelen: (w[2] >> 32) as u32,
            snaplen: w[3] as u32,
            interface: (w[3] >> 32) as u32,
        }
    }
}

/// The circular packet buffer of a flow group: each packet any flow of the
/// group wants is stored once.
///
/// ```
/// use sluice_flow::buffer::{PBuf, Preference, Meta};
/// let p = PBuf::new(4, 64, Preference::Slow).unwrap();
/// let meta = Meta { caplen: 3, wirelen: 3, ..Meta::default() };
/// let pos = p.store(&meta, b"abc", p.written()).unwrap();
/// assert_eq!(pos, 0);
/// assert_eq!(p.written(), 1);
/// ```
pub struct PBuf {
    slots: u64,
    slot_words: usize,
    slot_bytes: usize,
    pref: Preference,
    store: Storage,
}

impl std::fmt::Debug for PBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PBuf")
            .field("slots", &self.slots)
            .field("slot_bytes", &self.slot_bytes)
            .field("preference", &self.pref)
            .field("written", &self.written())
            .field("shared", &self.region().is_some())
            .finish()
    }
}

impl PBuf {
    /// A buffer of `slots` slots (at least 1) holding up to `slot_bytes`
    /// bytes of each packet; refused past [`MAX_SLOTS`], [`MAX_SLOT_BYTES`]
    /// or [`MAX_PBUF_BYTES`], or when the memory cannot be had.
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference};
    /// let p = PBuf::new(8, 1514, Preference::Fast).unwrap();
    /// assert_eq!(p.slots(), 8);
    /// let e = PBuf::new(1_000_000, 65535, Preference::Slow).err().unwrap();
    /// assert!(e.to_string().contains("more than the limit of 4 GiB"), "{e}");
    /// assert!(PBuf::new(1 << 40, 1, Preference::Slow).is_err());
    /// assert!(PBuf::new(1, u32::MAX as usize, Preference::Slow).is_err());
    /// ```
    pub fn new(slots: usize, slot_bytes: usize, pref: Preference) -> Result<PBuf, Error> {
        let (slots, slot_words) = PBuf::checked_shape(slots, slot_bytes)?;
        let store = Storage::heap(P_HEADER + slots * slot_words, "the packet buffer")?;
        Ok(PBuf::laid_out(store, slots, slot_bytes, pref))
    }

    /// The slots and words per slot of a buffer, within the limits.
    fn checked_shape(slots: usize, slot_bytes: usize) -> Result<(usize, usize), Error> {
        let slots = slots.max(1);
        if slots > MAX_SLOTS {
            return Err(Error::Config(format!(
                "a packet buffer of {slots} slots is more than the limit of {MAX_SLOTS}"
            )));
        }
        if slot_bytes > MAX_SLOT_BYTES {
            return Err(Error::Config(format!(
                "packet buffer slots of {slot_bytes} bytes are more than the limit of {MAX_SLOT_BYTES}"
            )));
        }
        let slot_words = HEADER_WORDS + slot_bytes.div_ceil(8);
        let bytes = (P_HEADER + slots * slot_words) * 8;
        if bytes > MAX_PBUF_BYTES {
            return Err(Error::Config(format!(
                "a packet buffer of {slots} slots of {slot_bytes} bytes takes {bytes} bytes, more than the limit of {} GiB",
                MAX_PBUF_BYTES >> 30
            )));
        }
        Ok((slots, slot_words))
    }

    /// A buffer like [`PBuf::new`]'s, in a new region shared with other
    /// processes (the region is what they map, read-only).
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference};
    /// let p = PBuf::in_region(4, 64, Preference::Slow)?;
    /// let seen = PBuf::attach(std::sync::Arc::new(sluice_shm::Region::map(p.region().unwrap().read_only_fd()?, false)?))?;
    /// assert_eq!((seen.slots(), seen.slot_bytes()), (4, 64));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn in_region(slots: usize, slot_bytes: usize, pref: Preference) -> std::io::Result<PBuf> {
        let (slots, slot_words) = PBuf::checked_shape(slots, slot_bytes)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let region = Region::create("pbuf", (P_HEADER + slots * slot_words) * 8)?;
        Ok(PBuf::laid_out(
            Storage::Shared(Arc::new(region)),
            slots,
            slot_bytes,
            pref,
        ))
    }

    /// The buffer another process laid out in `region` (the reading side:
    /// its header is checked against the region's size).
    pub fn attach(region: Arc<Region>) -> std::io::Result<PBuf> {
        let w = region.words();
        let word = |i: usize| w.get(i).map_or(0, |x| x.load(Ordering::Acquire));
        if w.len() < P_HEADER || word(P_MAGIC) != PBUF_MAGIC {
            return Err(bad_region("packet buffer"));
        }
        let slots = usize::try_from(word(P_SLOTS)).unwrap_or(0);
        let slot_bytes = usize::try_from(word(P_SLOT_BYTES)).unwrap_or(usize::MAX);
        let pref = pref_of(word(P_PREF)).ok_or_else(|| bad_region("packet buffer"))?;
        let slot_words = slot_bytes
            .checked_add(7)
            .map(|b| b / 8 + HEADER_WORDS)
            .ok_or_else(|| bad_region("packet buffer"))?;
        let need = slots
            .checked_mul(slot_words)
            .and_then(|n| n.checked_add(P_HEADER));
        if slots == 0 || need.map_or(true, |n| n > w.len()) {
            return Err(bad_region("packet buffer"));
        }
        Ok(PBuf {
            slots: slots as u64,
            slot_words,
            slot_bytes,
            pref,
            store: Storage::Shared(region),
        })
    }

    /// The region the buffer lives in, if it is shared.
    pub fn region(&self) -> Option<&Arc<Region>> {
        match &self.store {
            Storage::Shared(r) => Some(r),
            Storage::Heap(_) => None,
        }
    }

    fn laid_out(store: Storage, slots: usize, slot_bytes: usize, pref: Preference) -> PBuf {
        let w = store.words();
        w[P_SLOTS].store(slots as u64, Ordering::Relaxed);
        w[P_SLOT_BYTES].store(slot_bytes as u64, Ordering::Relaxed);
        w[P_PREF].store(pref_word(pref), Ordering::Relaxed);
        w[P_MAGIC].store(PBUF_MAGIC, Ordering::Release);
        PBuf {
            slots: slots as u64,
            slot_words: HEADER_WORDS + slot_bytes.div_ceil(8),
            slot_bytes,
            pref,
            store,
        }
    }

    fn words(&self) -> &[AtomicU64] {
        self.store.words()
    }

    fn w_word(&self) -> &AtomicU64 {
        &self.words()[P_W]
    }

    fn head_word(&self) -> &AtomicU64 {
        &self.words()[P_HEAD]
    }

    /// Number of slots.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::PBuf::new(0, 1, sluice_flow::buffer::Preference::Slow).unwrap().slots(), 1);
    /// ```
    pub fn slots(&self) -> usize {
        self.slots as usize
    }

    /// Bytes of packet data a slot holds.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::PBuf::new(1, 100, sluice_flow::buffer::Preference::Slow).unwrap().slot_bytes(), 100);
    /// ```
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Bytes of memory the buffer occupies.
    ///
    /// ```
    /// let p = sluice_flow::buffer::PBuf::new(2, 8, sluice_flow::buffer::Preference::Slow).unwrap();
    /// assert_eq!(p.memory_bytes(), (8 + 2 * (4 + 1)) * 8);
    /// ```
    pub fn memory_bytes(&self) -> usize {
        self.words().len() * 8
    }

    /// The buffer management system.
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference};
    /// assert_eq!(PBuf::new(1, 1, Preference::Fast).unwrap().preference(), Preference::Fast);
    /// ```
    pub fn preference(&self) -> Preference {
        self.pref
    }

    /// Positions written so far (`W`; the wrap counter is `W / slots`).
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::PBuf::new(1, 1, sluice_flow::buffer::Preference::Slow).unwrap().written(), 0);
    /// ```
    pub fn written(&self) -> u64 {
        self.w_word().load(Ordering::Acquire)
    }

    /// How many times `W` has wrapped to slot 0.
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference, Meta};
    /// let p = PBuf::new(2, 8, Preference::Fast).unwrap();
    /// for _ in 0..5 { p.store(&Meta::default(), &[], 0); }
    /// assert_eq!(p.wraps(), 2);
    /// ```
    pub fn wraps(&self) -> u64 {
        self.written() / self.slots
    }

    /// Packets the writer dropped because the buffer was full (SRP).
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference, Meta};
    /// let p = PBuf::new(1, 8, Preference::Slow).unwrap();
    /// assert!(p.store(&Meta::default(), &[], 0).is_some());
    /// assert!(p.store(&Meta::default(), &[], 0).is_none()); // nobody read position 0
    /// assert_eq!(p.drops(), 1);
    /// ```
    pub fn drops(&self) -> u64 {
        self.words()[P_DROPS].load(Ordering::Relaxed)
    }

    /// Store a packet (writer side; one writer at a time). `oldest` is the
    /// oldest position a reader still needs (`R*`; ignored under FRP).
    /// Returns the packet's position, or `None` when SRP had to drop it.
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference, Meta};
    /// let p = PBuf::new(2, 4, Preference::Slow).unwrap();
    /// let m = Meta { caplen: 6, wirelen: 6, ..Meta::default() };
    /// let pos = p.store(&m, b"abcdef", 0).unwrap();
    /// let (meta, data) = p.read_copy(pos).unwrap();
    /// assert_eq!((meta.caplen, meta.wirelen, &data[..]), (4, 6, &b"abcd"[..]));
    /// ```
    pub fn store(&self, meta: &Meta, data: &[u8], oldest: u64) -> Option<u64> {
        let words = self.words();
        let pos = words[P_W].load(Ordering::Relaxed);
        let len = data.len().min(self.slot_bytes);
        let mut meta = *meta;
        meta.caplen = len as u32;
        let base = self.slot_base(pos);
        let header = meta.encode();
        match self.pref {
            Preference::Slow => {
                if pos.saturating_sub(oldest) >= self.slots {
                    words[P_DROPS].fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                for (i, h) in header.iter().enumerate() {
                    words[base + i].store(*h, Ordering::Relaxed);
                }
                let dst = (base + HEADER_WORDS) * 8;
                // SAFETY: `dst .. dst + len` lies inside `words` (the slot
                // has `slot_bytes >= len` data bytes), and `words` is
                // writable here: only the writer stores, and the writer
                // made the buffer (heap, or a region it mapped read-write).
                // Under SRP no reader reads this slot now: readers only
                // read positions in `oldest .. W`, and `pos - oldest <
                // slots` means slot `pos % slots` holds no such position;
                // readers that read it earlier published their `R` with
                // Release, loaded by the caller (Acquire) to compute
                // `oldest`. The words are `AtomicU64` (interior
                // mutability), so writing through a pointer derived from a
                // shared reference is allowed, and a `u8` copy has no
                // alignment requirement.
                unsafe {
                    let p = (words.as_ptr() as *mut u8).add(dst);
                    std::ptr::copy_nonoverlapping(data.as_ptr(), p, len);
                }
                words[P_W].store(pos + 1, Ordering::Release);
            }
            Preference::Fast => {
                words[P_HEAD].store(pos + 1, Ordering::Relaxed);
                fence(Ordering::Release);
                for (i, h) in header.iter().enumerate() {
                    words[base + i].store(*h, Ordering::Relaxed);
                }
                let body = &words[base + HEADER_WORDS..];
                let mut chunks = data[..len].chunks_exact(8);
                let mut i = 0;
                for c in &mut chunks {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(c);
                    body[i].store(u64::from_ne_bytes(b), Ordering::Relaxed);
                    i += 1;
                }
                let rest = chunks.remainder();
                if !rest.is_empty() {
                    let mut b = [0u8; 8];
                    b[..rest.len()].copy_from_slice(rest);
                    body[i].store(u64::from_ne_bytes(b), Ordering::Relaxed);
                }
                words[P_W].store(pos + 1, Ordering::Release);
            }
        }
        Some(pos)
    }

    fn slot_base(&self, pos: u64) -> usize {
        P_HEADER + (pos % self.slots) as usize * self.slot_words
    }

    fn header(&self, pos: u64) -> Meta {
        let base = self.slot_base(pos);
        let words = self.words();
        let mut w = [0u64; HEADER_WORDS];
        for (i, x) in w.iter_mut().enumerate() {
            *x = words[base + i].load(Ordering::Relaxed);
        }
        Meta::decode(w)
    }

    /// True while position `pos` has not been (and is not being)
    /// overwritten.
    fn intact(&self, pos: u64) -> bool {
        self.head_word()
            .load(Ordering::Relaxed)
            .max(self.w_word().load(Ordering::Relaxed))
            <= pos.saturating_add(self.slots)
    }

    /// Copy the packet at `pos` out of the buffer with atomic loads and
    /// check afterwards that it was not overwritten meanwhile (any
    /// preference; `None` when it was).
    ///
    /// ```
    /// use sluice_flow::buffer::{PBuf, Preference, Meta};
    /// let p = PBuf::new(1, 8, Preference::Fast).unwrap();
    /// p.store(&Meta::default(), b"a", 0);
    /// p.store(&Meta::default(), b"b", 0);
    /// assert!(p.read_copy(0).is_none());
    /// assert_eq!(p.read_copy(1).unwrap().1, b"b");
    /// ```
    pub fn read_copy(&self, pos: u64) -> Option<(Meta, Vec<u8>)> {
        let mut out = Vec::new();
        let meta = self.read_into(pos, &mut out)?;
        Some((meta, out))
    }

    pub(crate) fn read_into(&self, pos: u64, out: &mut Vec<u8>) -> Option<Meta> {
        if pos >= self.w_word().load(Ordering::Acquire) {
            return None;
        }
        let meta = self.header(pos);
        let len = (meta.caplen as usize).min(self.slot_bytes);
        let base = self.slot_base(pos) + HEADER_WORDS;
        out.clear();
        for w in &self.words()[base..base + len.div_ceil(8)] {
            out.extend_from_slice(&w.load(Ordering::Relaxed).to_ne_bytes());
        }
        out.truncate(len);
        fence(Ordering::Acquire);
        self.intact(pos).then_some(meta)
    }

    /// The packet at `pos` without copying (SRP readers, whose unread
    /// positions the writer does not overwrite).
    ///
    /// # Safety
    ///
    /// The caller must hold a registered SRP reader position at or before
    /// `pos` (published to the IBuf) for as long as the slice lives, so that
    /// the writer cannot reuse the slot.
    pub(crate) unsafe fn read_slice(&self, pos: u64) -> (Meta, &[u8]) {
        let meta = self.header(pos);
        let len = (meta.caplen as usize).min(self.slot_bytes);
        let start = (self.slot_base(pos) + HEADER_WORDS) * 8;
        // SAFETY: `start .. start + len` lies inside the words (`len` is
        // clamped to the slot). The writer stored these bytes before its
        // Release store of `W`, which the caller observed (Acquire) before
        // reaching `pos`; by the caller's contract it does not write the
        // slot again while the slice lives, so no write races with these
        // non-atomic reads (which a read-only mapping allows).
        let data = unsafe {
            std::slice::from_raw_parts((self.words().as_ptr() as *const u8).add(start), len)
        };
        (meta, data)
    }
}

/// The index buffer of a filter: one entry (PBuf position, classification
/// result) per packet the filter passed, read by any number of readers.
///
/// ```
/// use sluice_flow::buffer::{IBuf, Preference};
/// let ib = IBuf::new(4, Preference::Slow).unwrap();
/// let r = ib.register().unwrap();
/// assert!(ib.push(7, 1));
/// assert_eq!(ib.written(), 1);
/// ib.unregister(r);
/// ```
pub struct IBuf {
    cap: u64,
    pref: Preference,
    store: Storage,
}

impl std::fmt::Debug for IBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IBuf")
            .field("capacity", &self.cap)
            .field("preference", &self.pref)
            .field("written", &self.written())
            .field("shared", &self.region().is_some())
            .finish()
    }
}

impl IBuf {
    /// An index buffer of `capacity` entries (at least 1, at most
    /// [`MAX_SLOTS`]).
    ///
    /// ```
    /// use sluice_flow::buffer::{IBuf, Preference};
    /// assert_eq!(IBuf::new(16, Preference::Fast).unwrap().capacity(), 16);
    /// assert!(IBuf::new(1 << 40, Preference::Fast).is_err());
    /// ```
    pub fn new(capacity: usize, pref: Preference) -> Result<IBuf, Error> {
        let cap = IBuf::checked_capacity(capacity)?;
        let store = Storage::heap(I_HEADER + 2 * cap, "an index buffer")?;
        Ok(IBuf::laid_out(store, cap, pref))
    }

    fn checked_capacity(capacity: usize) -> Result<usize, Error> {
        let cap = capacity.max(1);
        if cap > MAX_SLOTS {
            return Err(Error::Config(format!(
                "an index buffer of {cap} entries is more than the limit of {MAX_SLOTS}"
            )));
        }
        Ok(cap)
    }

    /// An index buffer like [`IBuf::new`]'s, in a new region shared with
    /// another process (its reader, which maps it read-write to publish
    /// its read position).
    ///
    /// ```
    /// use sluice_flow::buffer::{IBuf, Preference};
    /// let ib = IBuf::in_region(8, Preference::Slow)?;
    /// let fd = ib.region().unwrap().fd().try_clone_to_owned()?;
    /// let seen = IBuf::attach(std::sync::Arc::new(sluice_shm::Region::map(fd, true)?))?;
    /// ib.push(3, 1);
    /// assert_eq!((seen.capacity(), seen.written()), (8, 1));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn in_region(capacity: usize, pref: Preference) -> std::io::Result<IBuf> {
        let cap =
            IBuf::checked_capacity(capacity).map_err(|e| std::io::Error::other(e.to_string()))?;
        let region = Region::create("ibuf", (I_HEADER + 2 * cap) * 8)?;
        Ok(IBuf::laid_out(Storage::Shared(Arc::new(region)), cap, pref))
    }

    /// The index buffer another process laid out in `region` (checked
    /// against the region's size).
    pub fn attach(region: Arc<Region>) -> std::io::Result<IBuf> {
        let w = region.words();
        let word = |i: usize| w.get(i).map_or(0, |x| x.load(Ordering::Acquire));
        if w.len() < I_HEADER || word(I_MAGIC) != IBUF_MAGIC {
            return Err(bad_region("index buffer"));
        }
        let cap = usize::try_from(word(I_CAP)).unwrap_or(0);
        let pref = pref_of(word(I_PREF)).ok_or_else(|| bad_region("index buffer"))?;
        let need = cap.checked_mul(2).and_then(|n| n.checked_add(I_HEADER));
        if cap == 0 || need.map_or(true, |n| n > w.len()) {
            return Err(bad_region("index buffer"));
        }
        Ok(IBuf {
            cap: cap as u64,
            pref,
            store: Storage::Shared(region),
        })
    }

    /// The region the buffer lives in, if it is shared.
    pub fn region(&self) -> Option<&Arc<Region>> {
        match &self.store {
            Storage::Shared(r) => Some(r),
            Storage::Heap(_) => None,
        }
    }

    fn laid_out(store: Storage, cap: usize, pref: Preference) -> IBuf {
        let w = store.words();
        w[I_CAP].store(cap as u64, Ordering::Relaxed);
        w[I_PREF].store(pref_word(pref), Ordering::Relaxed);
        for r in &w[I_READERS..I_READERS + MAX_READERS] {
            r.store(FREE, Ordering::Relaxed);
        }
        w[I_MAGIC].store(IBUF_MAGIC, Ordering::Release);
        IBuf {
            cap: cap as u64,
            pref,
            store,
        }
    }

    fn words(&self) -> &[AtomicU64] {
        self.store.words()
    }

    fn readers(&self) -> &[AtomicU64] {
        &self.words()[I_READERS..I_READERS + MAX_READERS]
    }

    /// The reader slots in use: one past the highest ever registered
    /// (clamped: a reader in another process writes this word).
    fn used(&self) -> usize {
        (self.words()[I_USED].load(Ordering::Acquire) as usize).min(MAX_READERS)
    }

    /// Packets the flow's filters accepted (the writer counts them; each
    /// is delivered, dropped by the writer ([`IBuf::drops`]) or lost to a
    /// reader that fell behind ([`Reader::lost`])).
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(2, sluice_flow::buffer::Preference::Fast).unwrap();
    /// ib.count_accepted();
    /// assert_eq!(ib.accepted(), 1);
    /// ```
    pub fn accepted(&self) -> u64 {
        self.words()[I_ACCEPTED].load(Ordering::Relaxed)
    }

    /// Count a packet the flow's filters accepted (writer side).
    pub fn count_accepted(&self) {
        self.words()[I_ACCEPTED].fetch_add(1, Ordering::Relaxed);
    }

    /// The reader says it is about to sleep on its wake-up: the writer
    /// wakes it after its next push ([`IBuf::take_sleeper`]).
    pub fn set_sleeping(&self) {
        self.words()[I_SLEEPING].store(1, Ordering::SeqCst);
        // With the writer's fence in `take_sleeper`: either the reader's
        // next look at `W` sees the writer's push, or the writer sees this
        // flag (no wake-up is lost).
        fence(Ordering::SeqCst);
    }

    /// Writer side, after a push: whether a reader is asleep and must be
    /// woken (the flag is cleared).
    pub fn take_sleeper(&self) -> bool {
        fence(Ordering::SeqCst);
        let s = &self.words()[I_SLEEPING];
        s.load(Ordering::Relaxed) != 0 && s.swap(0, Ordering::SeqCst) != 0
    }

    /// Entries it holds.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::IBuf::new(0, sluice_flow::buffer::Preference::Fast).unwrap().capacity(), 1);
    /// ```
    pub fn capacity(&self) -> usize {
        self.cap as usize
    }

    /// Bytes of memory it occupies.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::IBuf::new(4, sluice_flow::buffer::Preference::Fast).unwrap().memory_bytes(), 4 * 16 + 48 * 8);
    /// ```
    pub fn memory_bytes(&self) -> usize {
        self.words().len() * 8
    }

    /// Entries written so far (`W`).
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Fast).unwrap().written(), 0);
    /// ```
    pub fn written(&self) -> u64 {
        self.words()[I_W].load(Ordering::Acquire)
    }

    /// Entries dropped because the buffer (or the group's PBuf) was full.
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Slow).unwrap();
    /// let _r = ib.register();
    /// ib.push(0, 1);
    /// assert!(!ib.push(1, 1));
    /// assert_eq!(ib.drops(), 1);
    /// ```
    pub fn drops(&self) -> u64 {
        self.words()[I_DROPS].load(Ordering::Relaxed)
    }

    /// Count an entry the writer could not store (its packet is lost to
    /// this flow's readers).
    pub fn count_drop(&self) {
        self.words()[I_DROPS].fetch_add(1, Ordering::Relaxed);
    }

    /// Mark the stream finished (sources exhausted or flow closed): waiting
    /// readers return.
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Slow).unwrap();
    /// ib.finish();
    /// assert!(ib.finished());
    /// ```
    pub fn finish(&self) {
        self.words()[I_DONE].store(1, Ordering::Release);
    }

    /// Whether [`IBuf::finish`] was called (and not undone by a restart).
    ///
    /// ```
    /// assert!(!sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Slow).unwrap().finished());
    /// ```
    pub fn finished(&self) -> bool {
        self.words()[I_DONE].load(Ordering::Acquire) != 0
    }

    pub(crate) fn restart(&self) {
        self.words()[I_DONE].store(0, Ordering::Release);
    }

    /// Register a reader starting at the current write position; `None`
    /// when [`MAX_READERS`] are registered.
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Slow).unwrap();
    /// assert_eq!(ib.register(), Some(0));
    /// ```
    pub fn register(&self) -> Option<usize> {
        let w = self.written();
        for (i, r) in self.readers().iter().enumerate() {
            if r.compare_exchange(FREE, w, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                // A writer that misses this slot for a moment is harmless:
                // the reader starts at the current `W` and needs nothing
                // older.
                self.words()[I_USED].fetch_max(i as u64 + 1, Ordering::AcqRel);
                return Some(i);
            }
        }
        None
    }

    /// Give a reader slot back.
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(1, sluice_flow::buffer::Preference::Slow).unwrap();
    /// let r = ib.register().unwrap();
    /// ib.unregister(r);
    /// assert_eq!(ib.register(), Some(r));
    /// ```
    pub fn unregister(&self, reader: usize) {
        if let Some(r) = self.readers().get(reader) {
            r.store(FREE, Ordering::Release);
        }
    }

    /// Take every reader slot back (writer side, when a reader's process
    /// is gone and cannot give its own back).
    pub fn unregister_all(&self) {
        for r in self.readers() {
            r.store(FREE, Ordering::Release);
        }
    }

    fn publish(&self, reader: usize, r: u64) {
        self.readers()[reader].store(r, Ordering::Release);
    }

    /// The slowest registered reader's position (`W` when there is none;
    /// never past `W`, whatever a reader wrote).
    fn slowest(&self) -> u64 {
        let mut m = self.words()[I_W].load(Ordering::Relaxed);
        for r in &self.readers()[..self.used()] {
            let v = r.load(Ordering::Acquire);
            if v != FREE {
                m = m.min(v);
            }
        }
        m
    }

    /// The oldest PBuf position a reader of this IBuf still needs (writer
    /// side), or `None` when every reader is up to date.
    pub fn oldest_needed(&self) -> Option<u64> {
        let r = self.slowest();
        let w = self.words()[I_W].load(Ordering::Relaxed);
        (r < w).then(|| self.entry(r).0)
    }

    /// The slowest reader's position (writer side), for telling whether a
    /// reader has moved since the last look.
    pub fn slowest_reader(&self) -> u64 {
        self.slowest()
    }

    fn entry(&self, i: u64) -> (u64, u32) {
        let k = I_HEADER + (i % self.cap) as usize * 2;
        let words = self.words();
        (
            words[k].load(Ordering::Relaxed),
            words[k + 1].load(Ordering::Relaxed) as u32,
        )
    }

    /// Whether an entry can be pushed now without dropping (SRP: the
    /// slowest reader is less than a full buffer behind; FRP: always).
    pub fn has_room(&self) -> bool {
        match self.pref {
            Preference::Fast => true,
            Preference::Slow => {
                self.words()[I_W].load(Ordering::Relaxed) - self.slowest() < self.cap
            }
        }
    }

    /// Append an entry (writer side). Under SRP, returns false and counts a
    /// drop when the slowest reader is a full buffer behind.
    ///
    /// ```
    /// let ib = sluice_flow::buffer::IBuf::new(2, sluice_flow::buffer::Preference::Fast).unwrap();
    /// for i in 0..5 { assert!(ib.push(i, 1)); }
    /// assert_eq!(ib.written(), 5);
    /// ```
    pub fn push(&self, pos: u64, result: u32) -> bool {
        self.push_inner(pos, result, true)
    }

    /// [`IBuf::push`] right after [`IBuf::has_room`] said yes (readers only
    /// make more room, so the check need not be repeated).
    pub(crate) fn push_after_check(&self, pos: u64, result: u32) {
        self.push_inner(pos, result, false);
    }

    fn push_inner(&self, pos: u64, result: u32, check: bool) -> bool {
        let words = self.words();
        let w = words[I_W].load(Ordering::Relaxed);
        let k = I_HEADER + (w % self.cap) as usize * 2;
        match self.pref {
            Preference::Slow => {
                if check && w - self.slowest() >= self.cap {
                    self.count_drop();
                    return false;
                }
                words[k].store(pos, Ordering::Relaxed);
                words[k + 1].store(result as u64, Ordering::Relaxed);
            }
            Preference::Fast => {
                words[I_HEAD].store(w + 1, Ordering::Relaxed);
                fence(Ordering::Release);
                words[k].store(pos, Ordering::Relaxed);
                words[k + 1].store(result as u64, Ordering::Relaxed);
            }
        }
        words[I_W].store(w + 1, Ordering::Release);
        true
    }

    fn intact(&self, i: u64) -> bool {
        let words = self.words();
        words[I_HEAD]
            .load(Ordering::Relaxed)
            .max(words[I_W].load(Ordering::Relaxed))
            <= i.saturating_add(self.cap)
    }
}

#[cfg(test)]
mod tests;
