//! A region of memory shared between processes: an anonymous memory file
//! (`memfd_create`) mapped into each process that holds its descriptor.
//!
//! The rule: a region is seen only as a slice of `AtomicU64` words, so
//! every access from either side is an atomic access or goes through the
//! buffer code's documented protocol; a region handed to another process
//! read-only is mapped without write permission there (its descriptor is
//! reopened read-only), so that process cannot write it even by mistake.

use rustix::fs::{fstat, ftruncate, memfd_create, MemfdFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::atomic::AtomicU64;

/// The largest region sluice creates or maps (a bound on what a peer can
/// make us map): 16 GiB.
pub const MAX_REGION: usize = 16 << 30;

/// A mapped memory file (see the module documentation).
///
/// ```
/// use std::sync::atomic::Ordering;
/// let r = sluice_shm::Region::create("doc", 64)?;
/// r.words()[0].store(7, Ordering::Relaxed);
/// let ro = sluice_shm::Region::map(r.read_only_fd()?, false)?;
/// assert_eq!(ro.words()[0].load(Ordering::Relaxed), 7);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Region {
    fd: OwnedFd,
    ptr: *mut core::ffi::c_void,
    len: usize,
    writable: bool,
}

// SAFETY: the mapping is only ever accessed through `&[AtomicU64]`
// (atomic, shareable between threads) or through the buffer code's own
// unsafe reads, which follow the documented writer/reader protocol; the
// pointer itself is not tied to a thread.
unsafe impl Send for Region {}
// SAFETY: as above: shared access is by atomics only.
unsafe impl Sync for Region {}

impl Region {
    /// A new zeroed region of `bytes` bytes (rounded up to whole words),
    /// mapped read-write; `name` shows in `/proc/PID/fd` and `maps`.
    pub fn create(name: &str, bytes: usize) -> io::Result<Region> {
        let len = bytes.max(8).div_ceil(8) * 8;
        if len > MAX_REGION {
            return Err(io::Error::other(format!(
                "a shared region of {len} bytes is more than the {MAX_REGION}-byte limit"
            )));
        }
        let fd = memfd_create(format!("sluice-{name}"), MemfdFlags::CLOEXEC)?;
        ftruncate(&fd, len as u64)?;
        Region::map_len(fd, len, true)
    }

    /// Map a region another process created and passed: read-write only
    /// when `writable` (the descriptor must allow it).
    pub fn map(fd: OwnedFd, writable: bool) -> io::Result<Region> {
        let st = fstat(&fd)?;
        let len = usize::try_from(st.st_size).map_err(|_| io::Error::other("bad region size"))?;
        if len == 0 || len % 8 != 0 || len > MAX_REGION {
            return Err(io::Error::other(format!(
                "a shared region of {len} bytes is not one sluice made"
            )));
        }
        Region::map_len(fd, len, writable)
    }

    fn map_len(fd: OwnedFd, len: usize, writable: bool) -> io::Result<Region> {
        let prot = match writable {
            true => ProtFlags::READ | ProtFlags::WRITE,
            false => ProtFlags::READ,
        };
        // Every page is made and mapped now (as a kernel packet ring is
        // allocated when it is set up): a packet written or read later
        // then never waits for a page fault, which on a fresh buffer cost
        // more than the rest of the packet's handling together.
        let flags = MapFlags::SHARED | MapFlags::POPULATE;
        // SAFETY: a fresh shared mapping of `len` bytes of a memory file at
        // an address the kernel picks: it aliases no Rust object. The file
        // is `len` bytes long (fstat or ftruncate said so), so every page
        // of the mapping is backed.
        let ptr = unsafe { mmap(core::ptr::null_mut(), len, prot, flags, &fd, 0)? };
        Ok(Region {
            fd,
            ptr,
            len,
            writable,
        })
    }

    /// The region as words.
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` is a live mapping of `len` bytes (a multiple of 8,
        // page-aligned, so 8-byte aligned) for as long as `self` lives.
        // `AtomicU64` has the layout of `u64`, and any bit pattern is a
        // valid one; every access through the slice is atomic, so writes
        // by other processes are not data races. On a read-only mapping
        // the slice must only be loaded from: the buffer code's readers
        // never store to a region they were given read-only.
        unsafe { std::slice::from_raw_parts(self.ptr as *const AtomicU64, self.len / 8) }
    }

    /// Bytes mapped.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a region has at least one word.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether this process may write the region.
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The region's descriptor (to pass it read-write).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A new descriptor of the same memory that allows reading only: a
    /// process given it can map the region read-only and nothing more.
    pub fn read_only_fd(&self) -> io::Result<OwnedFd> {
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let f = std::fs::OpenOptions::new().read(true).open(path)?;
        Ok(OwnedFd::from(f))
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are the mapping made in `map_len`, unmapped
        // once, here; no slice from `words` outlives `self`.
        let _ = unsafe { munmap(self.ptr, self.len) };
    }
}

/// Bytes in a new memory file, for a message too long for a socket: the
/// descriptor goes beside a short message, the reader takes the bytes with
/// [`read_bytes`].
///
/// ```
/// let fd = sluice_shm::bytes_file("doc", b"a long status")?;
/// assert_eq!(sluice_shm::read_bytes(fd, 100)?, b"a long status");
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn bytes_file(name: &str, bytes: &[u8]) -> io::Result<OwnedFd> {
    use std::io::Write;
    let fd = memfd_create(format!("sluice-{name}"), MemfdFlags::CLOEXEC)?;
    let mut f = std::fs::File::from(fd);
    f.write_all(bytes)?;
    Ok(OwnedFd::from(f))
}

/// The bytes of a memory file another process passed (at most `max`).
pub fn read_bytes(fd: OwnedFd, max: usize) -> io::Result<Vec<u8>> {
    use std::io::{Read, Seek};
    let mut f = std::fs::File::from(fd);
    f.rewind()?;
    let mut v = Vec::new();
    f.take(max as u64 + 1).read_to_end(&mut v)?;
    if v.len() > max {
        return Err(io::Error::other(format!("more than {max} bytes")));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn read_only_descriptors_cannot_map_for_writing() {
        let r = Region::create("t", 4096).unwrap();
        r.words()[3].store(42, Ordering::Relaxed);
        let fd = r.read_only_fd().unwrap();
        let fd2 = fd.try_clone().unwrap();
        assert!(Region::map(fd, true).is_err());
        let ro = Region::map(fd2, false).unwrap();
        assert_eq!(ro.words()[3].load(Ordering::Relaxed), 42);
        assert!(!ro.writable());
        r.words()[3].store(43, Ordering::Relaxed);
        assert_eq!(ro.words()[3].load(Ordering::Relaxed), 43);
    }

    #[test]
    fn sizes_are_bounded() {
        assert!(Region::create("t", MAX_REGION + 1).is_err());
        assert_eq!(Region::create("t", 1).unwrap().len(), 8);
    }
}
