//! IP fragment dispatch (MPF section 3): later fragments of a datagram go to
//! the filters that accepted its first fragment.
//!
//! Only the first fragment of an IP datagram carries the transport header, so
//! a filter on ports (`tcp port 80`, libpcap's meaning) sees the first
//! fragment and misses every other one. A [`Dispatcher`] sits beside the
//! classifier: the caller classifies each packet as usual and hands the
//! packet and its filter ids to [`Dispatcher::dispatch`], which
//!
//! * passes non-fragments through unchanged;
//! * remembers, for a first fragment (IPv4 offset 0 with MF set; IPv6 with a
//!   Fragment header at offset 0 with M set, found by walking the extension
//!   headers), which filters took it, under the datagram's [`parse::Key`]
//!   (source, destination, protocol / next header, identification);
//! * sends every later fragment of a remembered datagram to those filters
//!   too;
//! * holds later fragments that come before their first fragment (copied
//!   once, up to [`Limits::hold_packets`] packets and [`Limits::hold_bytes`]
//!   bytes, for [`Limits::hold_timeout`]) and delivers them right after the
//!   first fragment, or gives them up and counts them ([`Counters`]).
//!
//! Time is the packets' own clock (their timestamps; never the wall clock),
//! so a capture replayed faster than real time expires state exactly as it
//! would have live. The clock never runs backwards: a packet older than one
//! already seen counts as arriving at the newest time seen.
//!
//! # Which filters get a later fragment
//!
//! * [`Mode::All`] (monitoring: every matching filter): the filters that
//!   accept the fragment itself (as without fragment dispatch, so nothing a
//!   filter would see alone is taken away), plus those that accepted its
//!   datagram's first fragment. A fragment held because its first fragment
//!   is missing goes at once to the filters that accept it itself, and later
//!   to the datagram's other filters.
//! * [`Mode::First`] (demultiplexing: one winner): the winner of its
//!   datagram's first fragment if there is one, otherwise its own winner. A
//!   held fragment waits for that decision; if its first fragment never comes
//!   (timeout, full queue, end of input) it goes to its own winner, if any,
//!   and is still counted as dropped for its datagram (see
//!   [`Counters::fallback`]).
//!
//! # Datagram state
//!
//! A first fragment creates (or replaces: duplicates, or an identification
//! reused for a new datagram) its datagram's entry, which lives for
//! [`Limits::datagram_timeout`] from that first fragment, then expires. It is
//! *not* removed when the fragment without MF/M is seen: fragments can come
//! duplicated and out of order, so the last fragment by offset may arrive
//! before the middle ones, and a duplicate may follow the last. At most
//! [`Limits::max_datagrams`] entries are kept; beyond that the oldest is
//! evicted (counted).
//!
//! # Ordering of deliveries
//!
//! [`Dispatcher::dispatch`] fills an [`Output`] with deliveries in this
//! order: held fragments given up by this packet's arrival (only in
//! [`Mode::First`], to their own winner), then the packet itself, then held
//! fragments the packet released (when it is their first fragment). So a
//! caller that writes each delivery to per-filter capture files as it comes
//! writes a released fragment right after its first fragment: files stay in
//! delivery order, not timestamp order. [`Dispatcher::flush`] at the end of
//! input gives up every fragment still held.
//!
//! ```
//! use sluice_capture::{OwnedPacket, Packet};
//! use sluice_fragments::{Config, Dispatcher, Output, Source};
//! use sluice_fragments::fragmenter::{Datagram, Link};
//!
//! // A UDP datagram to port 53 in three IPv4 fragments, on Ethernet.
//! let d = Datagram::udp_v4([10, 0, 0, 1], [10, 0, 0, 2], 5000, 53, 0x1234, &[7; 2000]);
//! let frags: Vec<Vec<u8>> = d.fragments(3).iter().map(|f| Link::Ethernet.wrap(f)).collect();
//! let mut disp = Dispatcher::new(Config::default());
//! let mut out = Output::default();
//! let mut got = vec![];
//! // The last fragment first, then the first, then the middle one; filter
//! // 7 accepts only the first fragment (it alone holds the UDP port).
//! for (i, at) in [2, 0, 1].into_iter().enumerate() {
//!     let pkt = Packet::new(1, i as u32, 1, &frags[at]);
//!     let ids: &[u32] = if at == 0 { &[7] } else { &[] };
//!     disp.dispatch(&pkt, ids, &mut out);
//!     for d in out.iter() {
//!         let index = match d.source { Source::Current => i as u64, Source::Held(h) => h.index };
//!         got.push((index, d.filters.to_vec()));
//!     }
//! }
//! assert_eq!(got, vec![(1, vec![7]), (0, vec![7]), (2, vec![7])]);
//! assert_eq!(disp.counters().released, 1);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fragmenter;
pub mod parse;

use parse::{Fragment, Key, Locator, Piece};
use sluice_capture::{OwnedPacket, Packet};
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// Whether a packet goes to every matching filter or to a single winner.
///
/// ```
/// assert_eq!(sluice_fragments::Mode::default(), sluice_fragments::Mode::All);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Monitoring: every filter that accepts.
    #[default]
    All,
    /// Demultiplexing: the one winning filter.
    First,
}

/// How much the dispatcher holds and for how long.
///
/// ```
/// let l = sluice_fragments::Limits::default();
/// assert_eq!(l.hold_packets, 1024);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most fragments held at once, waiting for their first fragment.
    pub hold_packets: usize,
    /// Most bytes (captured bytes of held fragments) held at once.
    pub hold_bytes: usize,
    /// How long a fragment is held, from its arrival.
    pub hold_timeout: Duration,
    /// How long a datagram's filters are remembered after its first fragment.
    pub datagram_timeout: Duration,
    /// Most datagrams remembered at once.
    pub max_datagrams: usize,
}

impl Default for Limits {
    /// 1,024 fragments and 4 MiB held for up to 5 s; datagrams remembered
    /// for 30 s (Linux's reassembly timeout), up to 65,536 of them.
    fn default() -> Limits {
        Limits {
            hold_packets: 1024,
            hold_bytes: 4 << 20,
            hold_timeout: Duration::from_secs(5),
            datagram_timeout: Duration::from_secs(30),
            max_datagrams: 65_536,
        }
    }
}

/// A dispatcher's settings.
///
/// ```
/// let c = sluice_fragments::Config { mode: sluice_fragments::Mode::First, ..Default::default() };
/// assert!(!c.big_endian);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// All matching filters or one winner.
    pub mode: Mode,
    /// Holding and expiry limits.
    pub limits: Limits,
    /// The capture's byte order (the NULL and ENC links write their address
    /// family in it).
    pub big_endian: bool,
}

/// What happened to the packets so far. Every later fragment is counted
/// once in `later_on_arrival` or `held`, and every held fragment ends in
/// exactly one of `released`, `released_unclaimed`, `dropped_timeout`,
/// `dropped_full`, `dropped_end`, or is still held
/// ([`Dispatcher::holding`]):
///
/// ```
/// let c = sluice_fragments::Counters::default();
/// assert!(c.balanced(0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets given to [`Dispatcher::dispatch`].
    pub packets: u64,
    /// First fragments (offset 0, more to come).
    pub first_fragments: u64,
    /// Later fragments (offset above 0).
    pub later_fragments: u64,
    /// Later fragments whose datagram was known when they came (its first
    /// fragment seen and not expired), decided at once.
    pub later_on_arrival: u64,
    /// Later fragments that came before their first fragment and were held.
    pub held: u64,
    /// Held fragments delivered when their first fragment came.
    pub released: u64,
    /// Held fragments whose first fragment came but that no filter wanted.
    pub released_unclaimed: u64,
    /// Held fragments given up after [`Limits::hold_timeout`].
    pub dropped_timeout: u64,
    /// Held fragments given up because the queue was full (the oldest go first).
    pub dropped_full: u64,
    /// Held fragments given up at [`Dispatcher::flush`] (end of input).
    pub dropped_end: u64,
    /// Of the dropped ones, those delivered to their own winner instead
    /// ([`Mode::First`] only).
    pub fallback: u64,
    /// Datagram entries that expired after [`Limits::datagram_timeout`].
    pub datagrams_expired: u64,
    /// Datagram entries evicted because [`Limits::max_datagrams`] were kept.
    pub datagrams_evicted: u64,
}

impl Counters {
    /// All held fragments given up, whatever the reason.
    ///
    /// ```
    /// let c = sluice_fragments::Counters { dropped_full: 2, dropped_end: 1, ..Default::default() };
    /// assert_eq!(c.dropped(), 3);
    /// ```
    pub fn dropped(&self) -> u64 {
        self.dropped_timeout + self.dropped_full + self.dropped_end
    }

    /// Whether the counts balance with `holding` fragments still held.
    ///
    /// ```
    /// let c = sluice_fragments::Counters { later_fragments: 2, held: 2, released: 1, ..Default::default() };
    /// assert!(c.balanced(1));
    /// ```
    pub fn balanced(&self, holding: usize) -> bool {
        self.later_fragments == self.later_on_arrival + self.held
            && self.held
                == self.released + self.released_unclaimed + self.dropped() + holding as u64
            && self.fallback <= self.dropped()
    }
}

/// A held fragment: an owned copy of the packet, with its place in the input.
///
/// ```
/// use sluice_fragments::HeldPacket;
/// let h = HeldPacket::copy(3, &sluice_capture::Packet::new(1, 2, 1, b"abc"));
/// assert_eq!((h.index, h.as_packet().data), (3, &b"abc"[..]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldPacket {
    /// Index of the packet in input order (from 0: the count of packets
    /// given to [`Dispatcher::dispatch`] before it).
    pub index: u64,
    /// The packet (the runtime's owned packet type).
    pub packet: OwnedPacket,
}

impl HeldPacket {
    /// Copy a packet.
    ///
    /// ```
    /// let h = sluice_fragments::HeldPacket::copy(0, &sluice_capture::Packet::new(1, 2, 1, b"x"));
    /// assert_eq!(h.packet.ts_nsec, 2);
    /// ```
    pub fn copy(index: u64, p: &Packet<'_>) -> HeldPacket {
        HeldPacket {
            index,
            packet: OwnedPacket::from(p),
        }
    }

    /// Overwrite with a copy of `p`, reusing the buffer.
    fn fill(&mut self, index: u64, p: &Packet<'_>) {
        self.index = index;
        self.packet.set(p);
    }

    /// The packet, borrowed (for example to write it to a capture file).
    ///
    /// ```
    /// let h = sluice_fragments::HeldPacket::copy(0, &sluice_capture::Packet::new(1, 2, 113, b"x"));
    /// assert_eq!(h.as_packet().linktype, 113);
    /// ```
    pub fn as_packet(&self) -> Packet<'_> {
        self.packet.as_packet()
    }
}

/// Which packet a delivery is.
///
/// ```
/// assert!(matches!(sluice_fragments::Source::Current, sluice_fragments::Source::Current));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// The packet just given to [`Dispatcher::dispatch`].
    Current,
    /// A fragment held earlier (its copy, with its input index).
    Held(&'a HeldPacket),
}

/// One delivery: a packet and the filters it goes to (ids in increasing
/// order, never empty).
///
/// ```
/// let out = sluice_fragments::Output::default();
/// assert_eq!(out.iter().count(), 0);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Delivery<'a> {
    /// The packet.
    pub source: Source<'a>,
    /// Its filters.
    pub filters: &'a [u32],
}

impl<'a> Delivery<'a> {
    /// The delivered packet, given the packet just dispatched.
    ///
    /// ```
    /// let out = sluice_fragments::Output::default();
    /// let p = sluice_capture::Packet::new(1, 2, 1, b"x");
    /// for d in out.iter() { let _ = d.packet(&p); }
    /// ```
    pub fn packet(&self, current: &Packet<'a>) -> Packet<'a> {
        match self.source {
            Source::Current => *current,
            Source::Held(h) => h.as_packet(),
        }
    }
}

/// The deliveries of one call, reused from call to call (no allocation per
/// packet once warm).
///
/// ```
/// let mut out = sluice_fragments::Output::default();
/// assert!(out.is_empty());
/// ```
#[derive(Debug, Default)]
pub struct Output {
    /// (held packet index into `held` or `usize::MAX` for the current one, ids range).
    items: Vec<(usize, usize, usize)>,
    ids: Vec<u32>,
    held: Vec<HeldPacket>,
}

impl Output {
    /// The deliveries, in order.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::Output::default().iter().len(), 0);
    /// ```
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Delivery<'_>> + '_ {
        self.items.iter().map(move |&(h, a, b)| Delivery {
            source: if h == usize::MAX {
                Source::Current
            } else {
                Source::Held(&self.held[h])
            },
            filters: &self.ids[a..b],
        })
    }

    /// True when nothing is delivered.
    ///
    /// ```
    /// assert!(sluice_fragments::Output::default().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Number of deliveries.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::Output::default().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Take the held packets delivered by the last call (they are otherwise
    /// recycled by the next call).
    ///
    /// ```
    /// assert!(sluice_fragments::Output::default().take_held().is_empty());
    /// ```
    pub fn take_held(&mut self) -> Vec<HeldPacket> {
        std::mem::take(&mut self.held)
    }

    /// Deliver the current packet to `ids` (the common path: a packet that
    /// is not a fragment).
    #[inline]
    fn push_current(&mut self, ids: &[u32]) {
        if !ids.is_empty() {
            let a = self.ids.len();
            self.ids.extend_from_slice(ids);
            self.items.push((usize::MAX, a, self.ids.len()));
        }
    }

    /// Add a delivery unless `ids` is empty; an undelivered held packet is
    /// handed back.
    fn push_ids(
        &mut self,
        held: Option<HeldPacket>,
        ids: impl IntoIterator<Item = u32>,
    ) -> Option<HeldPacket> {
        let a = self.ids.len();
        self.ids.extend(ids);
        let b = self.ids.len();
        if a == b {
            return held;
        }
        let h = match held {
            Some(h) => {
                self.held.push(h);
                self.held.len() - 1
            }
            None => usize::MAX,
        };
        self.items.push((h, a, b));
        None
    }
}

/// A held fragment and what it waits for.
#[derive(Debug)]
struct Held {
    packet: HeldPacket,
    key: Key,
    /// The filters that accepted the fragment itself (at most one in [`Mode::First`]).
    own: Vec<u32>,
    seq: u64,
}

/// A remembered datagram.
#[derive(Debug)]
struct Datagram {
    filters: Vec<u32>,
    gen: u64,
}

/// The fragment dispatcher: see the crate documentation.
///
/// ```
/// use sluice_fragments::{Config, Dispatcher, Output};
/// let mut d = Dispatcher::new(Config::default());
/// let mut out = Output::default();
/// d.dispatch(&sluice_capture::Packet::new(0, 0, 1, &[0u8; 60]), &[3], &mut out);
/// assert_eq!(out.iter().next().unwrap().filters, &[3]);
/// ```
#[derive(Debug)]
pub struct Dispatcher {
    cfg: Config,
    links: Vec<(u16, Locator)>,
    now: i64,
    next_index: u64,
    seq: u64,
    datagrams: HashMap<Key, Datagram>,
    /// (deadline, key, generation), deadlines non-decreasing.
    datagram_order: VecDeque<(i64, Key, u64)>,
    slots: Vec<Option<Held>>,
    free_slots: Vec<usize>,
    /// (deadline, slot, seq), deadlines non-decreasing.
    held_order: VecDeque<(i64, usize, u64)>,
    waiting: HashMap<Key, Vec<(usize, u64)>>,
    holding: usize,
    held_bytes: usize,
    spare_packets: Vec<HeldPacket>,
    spare_ids: Vec<Vec<u32>>,
    spare_lists: Vec<Vec<(usize, u64)>>,
    scratch: Vec<u32>,
    counters: Counters,
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

fn timestamp(p: &Packet<'_>) -> i64 {
    p.ts_sec
        .saturating_mul(1_000_000_000)
        .saturating_add(i64::from(p.ts_nsec))
}

impl Dispatcher {
    /// A dispatcher with these settings.
    ///
    /// ```
    /// let d = sluice_fragments::Dispatcher::new(Default::default());
    /// assert_eq!(d.holding(), 0);
    /// ```
    pub fn new(cfg: Config) -> Dispatcher {
        Dispatcher {
            cfg,
            links: Vec::new(),
            now: i64::MIN,
            next_index: 0,
            seq: 0,
            datagrams: HashMap::new(),
            datagram_order: VecDeque::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            held_order: VecDeque::new(),
            waiting: HashMap::new(),
            holding: 0,
            held_bytes: 0,
            spare_packets: Vec::new(),
            spare_ids: Vec::new(),
            spare_lists: Vec::new(),
            scratch: Vec::new(),
            counters: Counters::default(),
        }
    }

    /// The settings.
    ///
    /// ```
    /// let d = sluice_fragments::Dispatcher::new(Default::default());
    /// assert_eq!(d.config().mode, sluice_fragments::Mode::All);
    /// ```
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters so far.
    ///
    /// ```
    /// let d = sluice_fragments::Dispatcher::new(Default::default());
    /// assert_eq!(d.counters().packets, 0);
    /// ```
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Fragments held now.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::Dispatcher::new(Default::default()).holding(), 0);
    /// ```
    pub fn holding(&self) -> usize {
        self.holding
    }

    /// Captured bytes held now.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::Dispatcher::new(Default::default()).held_bytes(), 0);
    /// ```
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Datagrams remembered now.
    ///
    /// ```
    /// assert_eq!(sluice_fragments::Dispatcher::new(Default::default()).datagrams(), 0);
    /// ```
    pub fn datagrams(&self) -> usize {
        self.datagrams.len()
    }

    /// Classify `pkt` with a classifier reader of any engine (the native
    /// `sluice_native::AutoClassifier` as well as the default one; every
    /// matching filter in [`Mode::All`], the winner in [`Mode::First`])
    /// and dispatch it.
    ///
    /// ```
    /// use sluice_classifier::Classifier;
    /// use sluice_ir::{Filter, Pred};
    /// let mut c = Classifier::new();
    /// let id = c.insert(&Filter::new(Pred::True, 1), 0);
    /// c.publish();
    /// let mut d = sluice_fragments::Dispatcher::new(Default::default());
    /// let mut out = sluice_fragments::Output::default();
    /// d.dispatch_with(&c.reader(), &sluice_capture::Packet::new(0, 0, 1, &[0u8; 20]), &mut out);
    /// assert_eq!(out.iter().next().unwrap().filters, &[id.0]);
    /// ```
    pub fn dispatch_with<E: sluice_classifier::Engine>(
        &mut self,
        reader: &sluice_classifier::Reader<E>,
        pkt: &Packet<'_>,
        out: &mut Output,
    ) {
        let mut ids = std::mem::take(&mut self.scratch);
        match self.cfg.mode {
            Mode::All => reader.classify_into(pkt.data, pkt.wirelen, &mut ids),
            Mode::First => {
                ids.clear();
                ids.extend(reader.classify_first(pkt.data, pkt.wirelen).map(|f| f.0));
            }
        }
        self.dispatch(pkt, &ids, out);
        self.scratch = ids;
    }

    /// Dispatch one packet that the filters `ids` accept (in increasing
    /// order; in [`Mode::First`] the winner alone, or nothing). `out` is
    /// cleared and receives the deliveries (see the crate documentation for
    /// their order).
    ///
    /// ```
    /// let mut d = sluice_fragments::Dispatcher::new(Default::default());
    /// let mut out = sluice_fragments::Output::default();
    /// d.dispatch(&sluice_capture::Packet::new(0, 0, 1, &[0u8; 60]), &[], &mut out);
    /// assert!(out.is_empty());
    /// assert_eq!(d.counters().packets, 1);
    /// ```
    pub fn dispatch(&mut self, pkt: &Packet<'_>, ids: &[u32], out: &mut Output) {
        self.clear(out);
        let index = self.next_index;
        self.next_index += 1;
        self.counters.packets += 1;
        self.now = self.now.max(timestamp(pkt));
        self.expire(out);
        let ids = match self.cfg.mode {
            Mode::All => ids,
            Mode::First => &ids[..ids.len().min(1)],
        };
        let frag = self.locator(pkt.linktype).fragment(pkt.data);
        let Some(frag) = frag else {
            out.push_current(ids);
            return;
        };
        match frag.piece {
            Piece::First => self.first(frag, ids, out),
            Piece::Later => self.later(frag, index, pkt, ids, out),
        }
    }

    /// End of input: every fragment still held is given up (counted in
    /// [`Counters::dropped_end`]; in [`Mode::First`] delivered to its own
    /// winner if it has one), and every datagram is forgotten.
    ///
    /// ```
    /// let mut d = sluice_fragments::Dispatcher::new(Default::default());
    /// let mut out = sluice_fragments::Output::default();
    /// d.flush(&mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn flush(&mut self, out: &mut Output) {
        self.clear(out);
        while let Some((_, slot, seq)) = self.held_order.pop_front() {
            if self.is_live(slot, seq) {
                self.give_up(slot, Drop::End, out);
            }
        }
        for (_, d) in self.datagrams.drain() {
            self.spare_ids.push(d.filters);
        }
        self.datagram_order.clear();
    }

    fn clear(&mut self, out: &mut Output) {
        out.items.clear();
        out.ids.clear();
        self.spare_packets.append(&mut out.held);
    }

    fn locator(&mut self, linktype: u16) -> Locator {
        if let Some(&(_, l)) = self.links.iter().find(|(n, _)| *n == linktype) {
            return l;
        }
        let l = match sluice_wire::link::LinkType::from_number(u32::from(linktype)) {
            Some(lt) => Locator::new(lt, self.cfg.big_endian),
            None => Locator::new(sluice_wire::link::LinkType::USB_LINUX, false),
        };
        self.links.push((linktype, l));
        l
    }

    fn is_live(&self, slot: usize, seq: u64) -> bool {
        matches!(&self.slots[slot], Some(h) if h.seq == seq)
    }

    /// Give up held fragments and datagrams whose time is over.
    fn expire(&mut self, out: &mut Output) {
        while let Some(&(deadline, slot, seq)) = self.held_order.front() {
            if deadline >= self.now {
                break;
            }
            self.held_order.pop_front();
            if self.is_live(slot, seq) {
                self.give_up(slot, Drop::Timeout, out);
            }
        }
        while let Some(&(deadline, key, gen)) = self.datagram_order.front() {
            if deadline >= self.now {
                break;
            }
            self.datagram_order.pop_front();
            if self.forget(&key, gen) {
                self.counters.datagrams_expired += 1;
            }
        }
    }

    /// Remove a datagram entry if it is still generation `gen`.
    fn forget(&mut self, key: &Key, gen: u64) -> bool {
        match self.datagrams.get(key) {
            Some(d) if d.gen == gen => {
                if let Some(d) = self.datagrams.remove(key) {
                    self.spare_ids.push(d.filters);
                }
                true
            }
            _ => false,
        }
    }

    #[inline(never)]
    fn first(&mut self, frag: Fragment, ids: &[u32], out: &mut Output) {
        self.counters.first_fragments += 1;
        out.push_current(ids);
        self.seq += 1;
        let gen = self.seq;
        let deadline = self
            .now
            .saturating_add(nanos(self.cfg.limits.datagram_timeout));
        if self.cfg.limits.max_datagrams == 0 {
            self.counters.datagrams_evicted += 1;
        } else {
            match self.datagrams.get_mut(&frag.key) {
                Some(d) => {
                    d.filters.clear();
                    d.filters.extend_from_slice(ids);
                    d.gen = gen;
                }
                None => {
                    while self.datagrams.len() >= self.cfg.limits.max_datagrams {
                        let Some((_, key, g)) = self.datagram_order.pop_front() else {
                            break;
                        };
                        if self.forget(&key, g) {
                            self.counters.datagrams_evicted += 1;
                        }
                    }
                    let mut filters = self.spare_ids.pop().unwrap_or_default();
                    filters.clear();
                    filters.extend_from_slice(ids);
                    self.datagrams.insert(frag.key, Datagram { filters, gen });
                }
            }
            self.datagram_order.push_back((deadline, frag.key, gen));
            if self.datagram_order.len() > 2 * self.datagrams.len() + 64 {
                let datagrams = &self.datagrams;
                self.datagram_order
                    .retain(|(_, k, g)| datagrams.get(k).is_some_and(|d| d.gen == *g));
            }
        }
        // Release the fragments that waited for this one, in arrival order.
        if self.waiting.is_empty() {
            return;
        }
        let Some(mut list) = self.waiting.remove(&frag.key) else {
            return;
        };
        for &(slot, seq) in &list {
            if !self.is_live(slot, seq) {
                continue;
            }
            let Some(h) = self.take_slot(slot) else {
                continue;
            };
            let own_delivered = self.cfg.mode == Mode::All && !h.own.is_empty();
            let unused = match self.cfg.mode {
                Mode::All => out.push_ids(
                    Some(h.packet),
                    ids.iter().copied().filter(|i| !h.own.contains(i)),
                ),
                Mode::First => {
                    let winner = ids.first().or(h.own.first()).copied();
                    out.push_ids(Some(h.packet), winner)
                }
            };
            // In Mode::All a fragment to which the first fragment's filters
            // add nothing was still delivered (to its own filters) on arrival.
            if unused.is_none() || own_delivered {
                self.counters.released += 1;
            } else {
                self.counters.released_unclaimed += 1;
            }
            self.spare_packets.extend(unused);
            self.spare_ids.push(h.own);
        }
        list.clear();
        self.spare_lists.push(list);
    }

    #[inline(never)]
    fn later(
        &mut self,
        frag: Fragment,
        index: u64,
        pkt: &Packet<'_>,
        ids: &[u32],
        out: &mut Output,
    ) {
        self.counters.later_fragments += 1;
        if let Some(d) = self.datagrams.get(&frag.key) {
            self.counters.later_on_arrival += 1;
            match self.cfg.mode {
                Mode::All => {
                    out.push_ids(None, union(ids, &d.filters));
                }
                Mode::First => {
                    out.push_ids(None, d.filters.first().or(ids.first()).copied());
                }
            }
            return;
        }
        // Its first fragment has not come (or its entry expired): hold it.
        self.counters.held += 1;
        if self.cfg.mode == Mode::All {
            out.push_current(ids);
        }
        let limits = self.cfg.limits;
        let len = pkt.data.len();
        if limits.hold_packets == 0 || len > limits.hold_bytes {
            self.counters.dropped_full += 1;
            if self.cfg.mode == Mode::First && !ids.is_empty() {
                self.counters.fallback += 1;
                out.push_current(ids);
            }
            return;
        }
        while self.holding >= limits.hold_packets || self.held_bytes + len > limits.hold_bytes {
            let Some((_, slot, seq)) = self.held_order.pop_front() else {
                break;
            };
            if self.is_live(slot, seq) {
                self.give_up(slot, Drop::Full, out);
            }
        }
        let mut packet = match self.spare_packets.pop() {
            Some(mut p) => {
                p.fill(index, pkt);
                p
            }
            None => HeldPacket::copy(index, pkt),
        };
        packet.index = index;
        let mut own = self.spare_ids.pop().unwrap_or_default();
        own.clear();
        own.extend_from_slice(ids);
        self.seq += 1;
        let seq = self.seq;
        let deadline = self.now.saturating_add(nanos(limits.hold_timeout));
        let held = Held {
            packet,
            key: frag.key,
            own,
            seq,
        };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.slots[s] = Some(held);
                s
            }
            None => {
                self.slots.push(Some(held));
                self.slots.len() - 1
            }
        };
        self.holding += 1;
        self.held_bytes += len;
        self.held_order.push_back((deadline, slot, seq));
        if self.held_order.len() > 2 * self.holding + 64 {
            let slots = &self.slots;
            self.held_order
                .retain(|&(_, s, q)| matches!(&slots[s], Some(h) if h.seq == q));
        }
        let spare = &mut self.spare_lists;
        self.waiting
            .entry(frag.key)
            .or_insert_with(|| spare.pop().unwrap_or_default())
            .push((slot, seq));
    }

    /// Empty a held slot.
    fn take_slot(&mut self, slot: usize) -> Option<Held> {
        let h = self.slots[slot].take()?;
        self.free_slots.push(slot);
        self.holding -= 1;
        self.held_bytes -= h.packet.packet.data.len();
        Some(h)
    }

    /// Give up a held fragment: count it, and in Mode::First deliver it to
    /// its own winner.
    fn give_up(&mut self, slot: usize, why: Drop, out: &mut Output) {
        let Some(h) = self.take_slot(slot) else {
            return;
        };
        if let Some(list) = self.waiting.get_mut(&h.key) {
            list.retain(|&(s, q)| !(s == slot && q == h.seq));
            if list.is_empty() {
                if let Some(list) = self.waiting.remove(&h.key) {
                    self.spare_lists.push(list);
                }
            }
        }
        match why {
            Drop::Timeout => self.counters.dropped_timeout += 1,
            Drop::Full => self.counters.dropped_full += 1,
            Drop::End => self.counters.dropped_end += 1,
        }
        let unused = if self.cfg.mode == Mode::First && !h.own.is_empty() {
            self.counters.fallback += 1;
            out.push_ids(Some(h.packet), h.own.iter().copied())
        } else {
            Some(h.packet)
        };
        self.spare_packets.extend(unused);
        self.spare_ids.push(h.own);
    }
}

/// Why a held fragment is given up.
#[derive(Clone, Copy)]
enum Drop {
    Timeout,
    Full,
    End,
}

/// The union of two increasing id lists, increasing.
fn union<'a>(a: &'a [u32], b: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || match (a.get(i), b.get(j)) {
        (Some(&x), Some(&y)) => {
            if x < y {
                i += 1;
                Some(x)
            } else if y < x {
                j += 1;
                Some(y)
            } else {
                i += 1;
                j += 1;
                Some(x)
            }
        }
        (Some(&x), None) => {
            i += 1;
            Some(x)
        }
        (None, Some(&y)) => {
            j += 1;
            Some(y)
        }
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests;
