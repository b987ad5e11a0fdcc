//! A filter's persistent memory array ([`MBuf`]), shared by the filter and
//! the application; a version counter brackets each packet's updates (a
//! sequence lock, see the parent module's memory orderings).
//!
//! The memory is on this process's heap, or in a shared region (the
//! daemon's flows: the daemon's elements write it, the client maps it
//! read-only). Both are laid out alike, in 32-bit words: 0 a magic word,
//! 1 the number of words, 2 the version, 3 unused, then the words.

use sluice_shm::Region;
use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

/// "SLMB": what a region laid out as an MBuf starts with.
const MAGIC: u32 = u32::from_be_bytes(*b"SLMB");
/// Header words before the memory's own.
const HEADER: usize = 4;
const VERSION: usize = 2;

enum Store {
    Heap(Box<[AtomicU32]>),
    Shared(Arc<Region>),
}

/// A filter's persistent memory array: 32-bit words that the filter and the
/// application both read and write.
///
/// The filter brackets its updates for one packet with a version counter,
/// so [`MBuf::snapshot`] and [`MBuf::load_u64`] never see half an update.
/// Application writes ([`MBuf::store`]) take effect between packets; a word
/// the filter also updates may lose a concurrent application write (FFPF
/// has the same race; use such words for configuration).
///
/// ```
/// let m = sluice_flow::buffer::MBuf::new(4);
/// m.store(1, 42).unwrap();
/// assert_eq!(m.load(1), Some(42));
/// assert!(m.store(4, 0).is_err());
/// ```
pub struct MBuf {
    store: Store,
    len: usize,
    /// False for a region mapped read-only: every write is then refused
    /// (`store`) or ignored (the filter side), never a fault.
    writable: bool,
    pending: Mutex<Vec<(u32, u32)>>,
    app_writes: AtomicBool,
}

impl std::fmt::Debug for MBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MBuf({} words)", self.len)
    }
}

impl MBuf {
    /// An array of `words` zero words.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(3).len(), 3);
    /// ```
    pub fn new(words: usize) -> MBuf {
        let all: Box<[AtomicU32]> = (0..HEADER + words).map(|_| AtomicU32::new(0)).collect();
        all[0].store(MAGIC, Ordering::Relaxed);
        all[1].store(words as u32, Ordering::Relaxed);
        MBuf::laid_out(Store::Heap(all), words)
    }

    /// An array of `words` zero words in a new shared region, to pass to
    /// another process (see [`MBuf::region`] and [`MBuf::attach`]).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::in_region(3)?;
    /// assert!(m.region().is_some());
    /// m.begin(); m.set(2, 9); m.end();
    /// let seen = sluice_flow::buffer::MBuf::attach(std::sync::Arc::new(
    ///     sluice_shm::Region::map(m.region().unwrap().read_only_fd()?, false)?,
    /// ))?;
    /// assert_eq!(seen.snapshot(), vec![0, 0, 9]);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn in_region(words: usize) -> std::io::Result<MBuf> {
        let len = u32::try_from(words)
            .ok()
            .filter(|&w| (w as usize) <= (sluice_shm::MAX_REGION / 4 - HEADER))
            .ok_or_else(|| {
                std::io::Error::other(format!("an MBuf of {words} words is too large"))
            })?;
        let region = Region::create("mbuf", (HEADER + words) * 4)?;
        let w = region.words32();
        w[1].store(len, Ordering::Relaxed);
        w[0].store(MAGIC, Ordering::Release);
        Ok(MBuf::laid_out(Store::Shared(Arc::new(region)), words))
    }

    /// The memory another process laid out in `region` (the reading side;
    /// checked against the region's size). A read-only region gives an
    /// MBuf to read: [`MBuf::store`] on it is refused, and the filter
    /// side's writes do nothing.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_flow::buffer::MBuf;
    /// let m = MBuf::in_region(2)?;
    /// let fd = m.region().unwrap().read_only_fd()?;
    /// let ro = MBuf::attach(Arc::new(sluice_shm::Region::map(fd, false)?))?;
    /// assert!(ro.store(0, 1).is_err());
    /// ro.begin(); ro.set(0, 1); ro.end();
    /// assert_eq!(ro.snapshot(), vec![0, 0]);
    /// let pbuf = sluice_flow::buffer::PBuf::in_region(1, 8, sluice_flow::buffer::Preference::Fast)?;
    /// assert!(MBuf::attach(pbuf.region().unwrap().clone()).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn attach(region: Arc<Region>) -> std::io::Result<MBuf> {
        let w = region.words32();
        let bad = || std::io::Error::other("the shared region is not a filter memory (MBuf)");
        if w.len() < HEADER || w[0].load(Ordering::Acquire) != MAGIC {
            return Err(bad());
        }
        let len = w[1].load(Ordering::Relaxed) as usize;
        if HEADER + len > w.len() {
            return Err(bad());
        }
        Ok(MBuf::laid_out(Store::Shared(region), len))
    }

    fn laid_out(store: Store, len: usize) -> MBuf {
        let writable = match &store {
            Store::Heap(_) => true,
            Store::Shared(r) => r.writable(),
        };
        MBuf {
            store,
            len,
            writable,
            pending: Mutex::new(Vec::new()),
            app_writes: AtomicBool::new(false),
        }
    }

    /// The region the memory lives in, if it is shared.
    pub fn region(&self) -> Option<&Arc<Region>> {
        match &self.store {
            Store::Shared(r) => Some(r),
            Store::Heap(_) => None,
        }
    }

    #[inline]
    fn all(&self) -> &[AtomicU32] {
        match &self.store {
            Store::Heap(w) => w,
            Store::Shared(r) => r.words32(),
        }
    }

    #[inline]
    fn words(&self) -> &[AtomicU32] {
        &self.all()[HEADER..HEADER + self.len]
    }

    #[inline]
    fn version(&self) -> &AtomicU32 {
        &self.all()[VERSION]
    }

    /// Number of words.
    ///
    /// ```
    /// assert!(sluice_flow::buffer::MBuf::new(0).is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no words.
    ///
    /// ```
    /// assert!(!sluice_flow::buffer::MBuf::new(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// One word, or `None` past the end.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(1).load(1), None);
    /// ```
    pub fn load(&self, i: usize) -> Option<u32> {
        self.words().get(i).map(|w| w.load(Ordering::Relaxed))
    }

    /// Write one word (application side).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(1);
    /// assert!(m.store(0, 5).is_ok());
    /// ```
    pub fn store(&self, i: usize, v: u32) -> Result<(), crate::Error> {
        if !self.writable {
            return Err(crate::Error::MBufReadOnly);
        }
        let w = self.words().get(i).ok_or(crate::Error::MBufRange {
            index: i,
            len: self.len,
        })?;
        w.store(v, Ordering::Relaxed);
        if let Ok(mut p) = self.pending.lock() {
            p.push((i as u32, v));
            self.app_writes.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// A consistent copy of every word (retries while the filter is in the
    /// middle of an update).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.store(0, 1).unwrap();
    /// assert_eq!(m.snapshot(), vec![1, 0]);
    /// ```
    pub fn snapshot(&self) -> Vec<u32> {
        self.consistent(|| {
            self.words()
                .iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect()
        })
    }

    /// Words `i` and `i + 1` as one little-endian 64-bit value (`i` low),
    /// read consistently; 0 past the end.
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.store(1, 1).unwrap();
    /// assert_eq!(m.load_u64(0), 1 << 32);
    /// ```
    pub fn load_u64(&self, i: usize) -> u64 {
        self.consistent(|| {
            self.load(i).unwrap_or(0) as u64 | (self.load(i + 1).unwrap_or(0) as u64) << 32
        })
    }

    fn consistent<T>(&self, read: impl Fn() -> T) -> T {
        let mut spins = 0u32;
        loop {
            let v1 = self.version().load(Ordering::Acquire);
            if v1 % 2 == 0 {
                let out = read();
                fence(Ordering::Acquire);
                if self.version().load(Ordering::Relaxed) == v1 {
                    return out;
                }
            }
            spins += 1;
            if spins > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Start a filter update (filter side; one writer).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(1);
    /// m.begin(); m.set(0, 3); m.end();
    /// assert_eq!(m.load(0), Some(3));
    /// ```
    #[inline]
    pub fn begin(&self) {
        if !self.writable {
            return;
        }
        let v = self.version().load(Ordering::Relaxed);
        self.version().store(v.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
    }

    /// End a filter update.
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.begin();
    /// m.set(0, 1);
    /// m.set(1, 2);
    /// m.end();
    /// // A reader sees the update whole once it has ended.
    /// assert_eq!(m.snapshot(), vec![1, 2]);
    /// assert_eq!(m.load_u64(0), 2 << 32 | 1);
    /// ```
    #[inline]
    pub fn end(&self) {
        if !self.writable {
            return;
        }
        let v = self.version().load(Ordering::Relaxed);
        self.version().store(v.wrapping_add(1), Ordering::Release);
    }

    /// Read a word (filter side; 0 past the end).
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(0).get(5), 0);
    /// ```
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        self.words().get(i).map_or(0, |w| w.load(Ordering::Relaxed))
    }

    /// Write a word (filter side, between [`MBuf::begin`] and
    /// [`MBuf::end`]; ignored past the end).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(1);
    /// m.set(9, 1);
    /// assert_eq!(m.snapshot(), vec![0]);
    /// ```
    #[inline]
    pub fn set(&self, i: usize, v: u32) {
        if !self.writable {
            return;
        }
        if let Some(w) = self.words().get(i) {
            w.store(v, Ordering::Relaxed);
        }
    }

    /// Add to the 64-bit counter in words `i`, `i + 1` (filter side).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.begin(); m.add_u64(0, u32::MAX as u64 + 2); m.end();
    /// assert_eq!(m.load_u64(0), u32::MAX as u64 + 2);
    /// ```
    #[inline]
    pub fn add_u64(&self, i: usize, by: u64) {
        let v = (self.get(i) as u64 | (self.get(i + 1) as u64) << 32).wrapping_add(by);
        self.set(i, v as u32);
        self.set(i + 1, (v >> 32) as u32);
    }

    /// Application writes since the last call, for filters that keep a
    /// private working copy of their memory (filter side).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.store(1, 7).unwrap();
    /// assert_eq!(m.take_app_writes(), vec![(1, 7)]);
    /// assert!(m.take_app_writes().is_empty());
    /// ```
    pub fn take_app_writes(&self) -> Vec<(u32, u32)> {
        if !self.app_writes.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        self.pending
            .lock()
            .map(|mut p| std::mem::take(&mut *p))
            .unwrap_or_default()
    }

    /// Replace the words with a filter's private copy (filter side, one
    /// consistent update).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(2);
    /// m.publish(&[4, 5]);
    /// assert_eq!(m.snapshot(), vec![4, 5]);
    /// ```
    pub fn publish(&self, words: &[u32]) {
        if !self.writable {
            return;
        }
        self.begin();
        for (w, v) in self.words().iter().zip(words) {
            w.store(*v, Ordering::Relaxed);
        }
        self.end();
    }
}
