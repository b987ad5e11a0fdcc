//! Zeroed 64-bit words for a packed table's slots. Large tables are mapped
//! on their own, aligned to 2 MiB and marked for transparent huge pages
//! (`madvise(MADV_HUGEPAGE)`; kernels set to `madvise` give them only when
//! asked), so that a probe of a table of millions of keys costs a cache
//! miss but not also a TLB miss: 64 MB of slots are 32 huge pages instead
//! of 16,384 small ones. Smaller tables, and any table where mapping fails,
//! live on the heap.

use std::ops::{Deref, DerefMut};

/// Tables of at least this many bytes are mapped on huge pages.
const HUGE_MIN: usize = 4 << 20;

/// The huge page size the mapping is aligned to.
const HUGE: usize = 2 << 20;

/// Zeroed words, on the heap or mapped on huge pages.
pub(crate) enum Slots {
    Heap(Vec<u64>),
    Mapped(Mapping),
}

/// An anonymous mapping holding `len` words from `words`.
pub(crate) struct Mapping {
    base: *mut libc::c_void,
    size: usize,
    words: *mut u64,
    len: usize,
}

// SAFETY: the mapping is owned by this value alone (no other pointer to it
// escapes but through `&self`/`&mut self` borrows), so moving it to another
// thread or reading it from several is as safe as for a `Vec<u64>`.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`; shared access only reads.
unsafe impl Sync for Mapping {}

impl Slots {
    /// `len` zeroed words.
    pub(crate) fn zeroed(len: usize) -> Slots {
        let bytes = len * 8;
        if bytes >= HUGE_MIN && cfg!(target_os = "linux") {
            if let Some(m) = Mapping::new(len) {
                return Slots::Mapped(m);
            }
        }
        Slots::Heap(vec![0; len])
    }

    /// True when the words are mapped for huge pages.
    #[cfg(test)]
    pub fn is_mapped(&self) -> bool {
        matches!(self, Slots::Mapped(_))
    }
}

impl Mapping {
    fn new(len: usize) -> Option<Mapping> {
        let want = (len * 8).div_ceil(HUGE) * HUGE;
        let size = want + HUGE;
        // SAFETY: an anonymous private mapping of `size` bytes at an
        // address the kernel chooses; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let skip = (HUGE - base as usize % HUGE) % HUGE;
        // SAFETY: `skip < HUGE` and the mapping is `want + HUGE` bytes, so
        // `base + skip .. base + skip + want` lies inside it.
        let words = unsafe { base.cast::<u8>().add(skip) }.cast::<u64>();
        // SAFETY: advice on a range inside our own mapping; failure (a
        // kernel without transparent huge pages) leaves small pages, which
        // is only slower.
        unsafe { libc::madvise(words.cast(), want, libc::MADV_HUGEPAGE) };
        Some(Mapping {
            base,
            size,
            words,
            len,
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base` and `size` are the mapping made in `new`, unmapped
        // once, here; no borrow of the words outlives `self`.
        unsafe { libc::munmap(self.base, self.size) };
    }
}

impl Deref for Slots {
    type Target = [u64];

    fn deref(&self) -> &[u64] {
        match self {
            Slots::Heap(v) => v,
            // SAFETY: `words` points to `len` words inside the live
            // mapping, zero-filled by the kernel (so initialised), 8-byte
            // aligned (2 MiB aligned), and borrowed for as long as `self`.
            Slots::Mapped(m) => unsafe { std::slice::from_raw_parts(m.words, m.len) },
        }
    }
}

impl DerefMut for Slots {
    fn deref_mut(&mut self) -> &mut [u64] {
        match self {
            Slots::Heap(v) => v,
            // SAFETY: as in `deref`, and `&mut self` makes the borrow
            // exclusive.
            Slots::Mapped(m) => unsafe { std::slice::from_raw_parts_mut(m.words, m.len) },
        }
    }
}

impl Clone for Slots {
    fn clone(&self) -> Slots {
        let mut copy = Slots::zeroed(self.len());
        copy.copy_from_slice(self);
        copy
    }
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots").field("words", &self.len()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_slots_are_mapped_zeroed_and_writable() {
        let mut s = Slots::zeroed(HUGE_MIN / 8 + 3);
        assert!(s.is_mapped());
        assert!(s.iter().all(|&w| w == 0));
        let n = s.len();
        s[n - 1] = 7;
        s[0] = 5;
        let c = s.clone();
        assert_eq!((c[0], c[n - 1], c.len()), (5, 7, n));
        assert!(!Slots::zeroed(16).is_mapped());
    }
}
