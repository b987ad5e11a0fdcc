//! A filter's persistent memory array ([`MBuf`]), shared by the filter and
//! the application; a version counter brackets each packet's updates (a
//! sequence lock, see the parent module's memory orderings).

use std::sync::atomic::{fence, AtomicBool, AtomicU32, Ordering};
use std::sync::Mutex;

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
    words: Box<[AtomicU32]>,
    version: AtomicU32,
    pending: Mutex<Vec<(u32, u32)>>,
    app_writes: AtomicBool,
}

impl std::fmt::Debug for MBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MBuf({} words)", self.words.len())
    }
}

impl MBuf {
    /// An array of `words` zero words.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(3).len(), 3);
    /// ```
    pub fn new(words: usize) -> MBuf {
        MBuf {
            words: (0..words).map(|_| AtomicU32::new(0)).collect(),
            version: AtomicU32::new(0),
            pending: Mutex::new(Vec::new()),
            app_writes: AtomicBool::new(false),
        }
    }

    /// Number of words.
    ///
    /// ```
    /// assert!(sluice_flow::buffer::MBuf::new(0).is_empty());
    /// ```
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// Whether it has no words.
    ///
    /// ```
    /// assert!(!sluice_flow::buffer::MBuf::new(1).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// One word, or `None` past the end.
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(1).load(1), None);
    /// ```
    pub fn load(&self, i: usize) -> Option<u32> {
        self.words.get(i).map(|w| w.load(Ordering::Relaxed))
    }

    /// Write one word (application side).
    ///
    /// ```
    /// let m = sluice_flow::buffer::MBuf::new(1);
    /// assert!(m.store(0, 5).is_ok());
    /// ```
    pub fn store(&self, i: usize, v: u32) -> Result<(), crate::Error> {
        let w = self.words.get(i).ok_or(crate::Error::MBufRange {
            index: i,
            len: self.words.len(),
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
            self.words
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
            let v1 = self.version.load(Ordering::Acquire);
            if v1 % 2 == 0 {
                let out = read();
                fence(Ordering::Acquire);
                if self.version.load(Ordering::Relaxed) == v1 {
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
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v.wrapping_add(1), Ordering::Relaxed);
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
        let v = self.version.load(Ordering::Relaxed);
        self.version.store(v.wrapping_add(1), Ordering::Release);
    }

    /// Read a word (filter side; 0 past the end).
    ///
    /// ```
    /// assert_eq!(sluice_flow::buffer::MBuf::new(0).get(5), 0);
    /// ```
    #[inline]
    pub fn get(&self, i: usize) -> u32 {
        self.words.get(i).map_or(0, |w| w.load(Ordering::Relaxed))
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
        if let Some(w) = self.words.get(i) {
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
        self.begin();
        for (w, v) in self.words.iter().zip(words) {
            w.store(*v, Ordering::Relaxed);
        }
        self.end();
    }
}
