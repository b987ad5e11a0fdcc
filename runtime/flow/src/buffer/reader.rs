//! Readers of a flow's buffers: [`Reader`] walks an IBuf's entries and
//! hands out each as a [`PacketRef`] borrowing the PBuf's bytes.
//!
//! The rule: a reader only reads the buffers; its one write is its own
//! position in the IBuf's reader slot (published every `batch` packets),
//! which is what lets the writer reuse space under slow-reader preference.

use super::{IBuf, Meta, PBuf, Preference, FREE};
use std::sync::atomic::{fence, Ordering};

/// A packet handed to a reader: metadata, classification result and bytes.
///
/// ```
/// let p = sluice_flow::buffer::PacketRef { meta: Default::default(), result: 1, data: b"x" };
/// assert_eq!(p.to_capture().caplen, 1);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct PacketRef<'a> {
    /// Timestamp, lengths, link type.
    pub meta: Meta,
    /// The classification result the flow's last filter returned.
    pub result: u32,
    /// The stored bytes.
    pub data: &'a [u8],
}

impl<'a> PacketRef<'a> {
    /// As a capture packet (to write it with `sluice_capture::CaptureWriter`).
    ///
    /// ```
    /// let p = sluice_flow::buffer::PacketRef { meta: Default::default(), result: 1, data: b"ab" };
    /// assert_eq!(p.to_capture().data, b"ab");
    /// ```
    pub fn to_capture(&self) -> sluice_capture::Packet<'a> {
        sluice_capture::Packet {
            ts_sec: self.meta.ts_sec,
            ts_nsec: self.meta.ts_nsec,
            caplen: self.data.len() as u32,
            wirelen: self.meta.wirelen.max(self.data.len() as u32),
            linktype: self.meta.linktype,
            snaplen: self.meta.snaplen,
            interface: self.meta.interface,
            data: self.data,
        }
    }
}

/// One application's reader of a flow: walks the IBuf of the flow's last
/// filter and finds the packets in the group's PBuf.
///
/// Reading advances a private position; it is published to the writer
/// every `batch` packets (FFPF's batched advance of `R`), and on
/// [`Reader::commit`] and drop.
///
/// ```
/// use std::sync::Arc;
/// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader, Meta};
/// let pbuf = Arc::new(PBuf::new(4, 16, Preference::Slow).unwrap());
/// let ibuf = Arc::new(IBuf::new(4, Preference::Slow).unwrap());
/// let mut r = Reader::new(pbuf.clone(), ibuf.clone(), 2).unwrap();
/// let pos = pbuf.store(&Meta { caplen: 2, wirelen: 2, ..Meta::default() }, b"hi", 0).unwrap();
/// ibuf.push(pos, 9);
/// let p = r.next().unwrap();
/// assert_eq!((p.data, p.result), (&b"hi"[..], 9));
/// assert!(r.next().is_none());
/// assert_eq!((r.delivered(), r.lost()), (1, 0));
/// ```
pub struct Reader {
    pbuf: std::sync::Arc<PBuf>,
    ibuf: std::sync::Arc<IBuf>,
    slot: usize,
    r: u64,
    published: u64,
    batch: u64,
    delivered: u64,
    lost: u64,
    scratch: Vec<u8>,
}

impl Reader {
    /// Register a reader on `ibuf` (whose entries point into `pbuf`),
    /// publishing its position every `batch` packets; `None` when the IBuf
    /// has no free reader slot.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), Arc::new(IBuf::new(1, Preference::Fast).unwrap()), 64);
    /// assert!(r.is_some());
    /// ```
    pub fn new(
        pbuf: std::sync::Arc<PBuf>,
        ibuf: std::sync::Arc<IBuf>,
        batch: u64,
    ) -> Option<Reader> {
        let slot = ibuf.register()?;
        Reader::adopt(pbuf, ibuf, slot, batch)
    }

    /// A reader on a slot of `ibuf` someone else registered for it (the
    /// daemon registers its client's slot when it opens the flow, so that
    /// no packet falls between opening and reading); `None` when `slot`
    /// is not a registered reader slot.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// let ib = Arc::new(IBuf::new(4, Preference::Slow).unwrap());
    /// let slot = ib.register().unwrap();
    /// ib.push(0, 1);
    /// let r = Reader::adopt(Arc::new(PBuf::new(1, 8, Preference::Slow).unwrap()), ib, slot, 1).unwrap();
    /// assert_eq!(r.available(), 1);
    /// ```
    pub fn adopt(
        pbuf: std::sync::Arc<PBuf>,
        ibuf: std::sync::Arc<IBuf>,
        slot: usize,
        batch: u64,
    ) -> Option<Reader> {
        let r = ibuf.readers().get(slot)?.load(Ordering::Acquire);
        if r == FREE {
            return None;
        }
        let r = r.min(ibuf.written());
        Some(Reader {
            pbuf,
            ibuf,
            slot,
            r,
            published: r,
            batch: batch.max(1),
            delivered: 0,
            lost: 0,
            scratch: Vec::new(),
        })
    }

    /// Entries written and not yet read (some may turn out lost under FRP).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// let ib = Arc::new(IBuf::new(4, Preference::Fast).unwrap());
    /// let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), ib.clone(), 1).unwrap();
    /// ib.push(0, 1);
    /// assert_eq!(r.available(), 1);
    /// ```
    pub fn available(&self) -> u64 {
        self.ibuf.written().saturating_sub(self.r)
    }

    /// Packets delivered so far.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// # let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), Arc::new(IBuf::new(1, Preference::Fast).unwrap()), 1).unwrap();
    /// assert_eq!(r.delivered(), 0);
    /// ```
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Packets found overwritten before they could be read (FRP).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// # let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), Arc::new(IBuf::new(1, Preference::Fast).unwrap()), 1).unwrap();
    /// assert_eq!(r.lost(), 0);
    /// ```
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Publish the read position now (instead of at the next batch).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::{IBuf, Meta, PBuf, Preference, Reader};
    /// let pbuf = Arc::new(PBuf::new(4, 8, Preference::Slow).unwrap());
    /// let ibuf = Arc::new(IBuf::new(4, Preference::Slow).unwrap());
    /// let mut r = Reader::new(pbuf.clone(), ibuf.clone(), 64).unwrap();
    /// let pos = pbuf.store(&Meta { caplen: 1, ..Meta::default() }, &[7], 0).unwrap();
    /// ibuf.push(pos, 1);
    /// assert!(r.next().is_some());
    /// assert_eq!(ibuf.oldest_needed(), Some(pos)); // the writer still keeps it
    /// r.commit();
    /// assert_eq!(ibuf.oldest_needed(), None);
    /// ```
    pub fn commit(&mut self) {
        if self.published != self.r {
            self.ibuf.publish(self.slot, self.r);
            self.published = self.r;
        }
    }

    /// The next packet, if one is waiting (FFPF's `filter_getnext_pkt`).
    /// Under FRP, entries or packets overwritten before they were read are
    /// skipped and counted in [`Reader::lost`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader, Meta};
    /// let pbuf = Arc::new(PBuf::new(2, 8, Preference::Fast).unwrap());
    /// let ibuf = Arc::new(IBuf::new(8, Preference::Fast).unwrap());
    /// let mut r = Reader::new(pbuf.clone(), ibuf.clone(), 1).unwrap();
    /// for i in 0..3u8 {
    ///     let pos = pbuf.store(&Meta { caplen: 1, ..Meta::default() }, &[i], 0).unwrap();
    ///     ibuf.push(pos, 1);
    /// }
    /// assert_eq!(r.next().unwrap().data, &[1]); // packet 0 was overwritten
    /// assert_eq!(r.lost(), 1);
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<PacketRef<'_>> {
        // The packet handed out last time is released now.
        if self.r - self.published >= self.batch {
            self.commit();
        }
        loop {
            let w = self.ibuf.written();
            if self.r >= w {
                self.commit();
                return None;
            }
            match self.pbuf.pref {
                Preference::Slow => {
                    let (pos, result) = self.ibuf.entry(self.r);
                    self.r += 1;
                    self.delivered += 1;
                    // SAFETY: our published position is at most the entry
                    // just read (we publish `r` only when the next call
                    // starts, after this packet's borrow has ended), so the
                    // writer's `oldest` is at most `pos` and it does not
                    // overwrite the slot while the returned borrow of
                    // `self` lives.
                    let (meta, data) = unsafe { self.pbuf.read_slice(pos) };
                    return Some(PacketRef { meta, result, data });
                }
                Preference::Fast => {
                    if w - self.r > self.ibuf.cap {
                        let skipped = w - self.ibuf.cap - self.r;
                        self.lost += skipped;
                        self.r += skipped;
                    }
                    let i = self.r;
                    let (pos, result) = self.ibuf.entry(i);
                    self.r += 1;
                    let meta = self.pbuf.read_into(pos, &mut self.scratch);
                    fence(Ordering::Acquire);
                    match meta {
                        Some(meta) if self.ibuf.intact(i) => {
                            self.delivered += 1;
                            return Some(PacketRef {
                                meta,
                                result,
                                data: &self.scratch,
                            });
                        }
                        _ => self.lost += 1,
                    }
                }
            }
        }
    }

    /// Wait until at least `n` entries are waiting, the stream is finished,
    /// or `timeout` passes (FFPF's `wait_for_n_pkts`); returns the number
    /// waiting. It polls with a short back-off rather than sleeping on a
    /// kernel object, so a writer never pays for waking readers.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    /// use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// let ib = Arc::new(IBuf::new(4, Preference::Fast).unwrap());
    /// let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), ib.clone(), 1).unwrap();
    /// assert_eq!(r.wait_for(1, Duration::from_millis(1)), 0);
    /// ```
    pub fn wait_for(&self, n: u64, timeout: std::time::Duration) -> u64 {
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        loop {
            let a = self.available();
            if a >= n || self.ibuf.finished() || start.elapsed() >= timeout {
                return self.available().max(a);
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else if spins < 128 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }

    /// Whether the writer has finished this stream and everything was read.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
    /// let ib = Arc::new(IBuf::new(1, Preference::Fast).unwrap());
    /// let r = Reader::new(Arc::new(PBuf::new(1, 1, Preference::Fast).unwrap()), ib.clone(), 1).unwrap();
    /// ib.finish();
    /// assert!(r.at_end());
    /// ```
    pub fn at_end(&self) -> bool {
        self.ibuf.finished() && self.available() == 0
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.ibuf.unregister(self.slot);
    }
}
