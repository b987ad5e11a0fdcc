//! A capture file mapped into memory ([`Mapped`]), so that a reader hands
//! out its packets where the kernel keeps the file: no copy into a buffer,
//! and other threads can take packets by their offsets in the file.
//!
//! Rule: every `unsafe` of the crate is here. A mapped file cut short by
//! another process while it is read would kill the process (SIGBUS) at
//! the first read past its new end. The crate's SIGBUS handler maps zero
//! pages over the part that is gone and marks the mapping instead, and the
//! reader ends with an error at the record that read them
//! ([`Mapped::shrank`]). Faults anywhere else go to the handler that was
//! there before (Rust's own, which reports stack overflows).
//!
//! ```
//! use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Mapped, Packet};
//! let path = std::env::temp_dir().join(format!("mapped-doc-{}.pcap", std::process::id()));
//! let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 1500))?;
//! w.write_packet(&Packet::new(1, 0, 1, b"abc"))?;
//! std::fs::write(&path, w.finish()?).unwrap();
//! let map = Mapped::new(&std::fs::File::open(&path).unwrap()).expect("a regular file maps");
//! let map = std::sync::Arc::new(map);
//! let mut r = CaptureReader::from_mapped(map.clone(), "m")?;
//! let p = r.next_packet()?.unwrap();
//! // The packet is the file's own bytes: after the 24-byte header and the
//! // 16-byte record header.
//! assert_eq!(map.offset_of(p.data), Some(40));
//! # std::fs::remove_file(&path).unwrap();
//! # Ok::<(), sluice_capture::CaptureError>(())
//! ```

use std::ffi::{c_int, c_void};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

/// Mappings open at once, at most: the SIGBUS handler looks through this
/// many slots. A file opened when all are taken is read instead.
const SLOTS: usize = 64;

/// Where one mapping is, for the SIGBUS handler (0: the slot is free).
struct Slot {
    taken: AtomicBool,
    base: AtomicUsize,
    len: AtomicUsize,
    shrank: AtomicBool,
}

static SLOT: [Slot; SLOTS] = [const {
    Slot {
        taken: AtomicBool::new(false),
        base: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        shrank: AtomicBool::new(false),
    }
}; SLOTS];

/// The page size, read when the handler is installed.
static PAGE: AtomicUsize = AtomicUsize::new(4096);

/// What SIGBUS did before the handler was installed.
static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();

/// A regular file mapped whole, read-only, until this is dropped.
pub struct Mapped {
    /// The first byte's address (kept as a number: the bytes are only
    /// reached through [`Mapped::bytes`]).
    addr: usize,
    len: usize,
    slot: usize,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped")
            .field("len", &self.len)
            .field("shrank", &self.shrank())
            .finish_non_exhaustive()
    }
}

impl Mapped {
    /// `file` mapped whole; `None` where it is not mapped and should be
    /// read instead: not a regular file, empty, larger than the address
    /// space, 64 mappings already open, or refused by the system.
    pub fn new(file: &File) -> Option<Mapped> {
        let meta = file.metadata().ok()?;
        let len = usize::try_from(meta.len()).ok()?;
        if !meta.is_file() || len == 0 || !install() {
            return None;
        }
        let slot = SLOT.iter().position(|s| {
            s.taken
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        // SAFETY: a new read-only shared mapping of an open descriptor,
        // at an address the system chooses; nothing else refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            SLOT[slot].taken.store(false, Ordering::Release);
            return None;
        }
        // SAFETY: advice on the mapping just made, which changes no byte
        // of it; its failure is harmless and ignored.
        unsafe { libc::madvise(p, len, libc::MADV_SEQUENTIAL) };
        let s = &SLOT[slot];
        s.shrank.store(false, Ordering::Relaxed);
        s.len.store(len, Ordering::Relaxed);
        s.base.store(p as usize, Ordering::Release);
        Some(Mapped {
            addr: p as usize,
            len,
            slot,
        })
    }

    /// The file's bytes, as they were when it was mapped (bytes past the
    /// end of a file cut short since read as zeros).
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `addr..addr + len` is this struct's mapping, readable
        // until `drop` unmaps it, which the borrow of `self` rules out. If
        // the file is cut short, the handler maps zero pages over the lost
        // part before any read of it completes, so every byte stays
        // readable. Another process writing the file changes the bytes
        // under this slice; the readers treat the bytes as untrusted input
        // and check every length against the slice, so such a change reads
        // as a corrupt file, not as memory out of bounds.
        unsafe { std::slice::from_raw_parts(self.addr as *const u8, self.len) }
    }

    /// Whether the file was cut short while mapped: bytes past its new end
    /// were read as zeros, so what was read from them is not the file's.
    pub fn shrank(&self) -> bool {
        SLOT[self.slot].shrank.load(Ordering::Acquire)
    }

    /// Where `part` starts in the file, if it is a part of [`Mapped::bytes`].
    pub fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let at = (part.as_ptr() as usize).checked_sub(self.addr)?;
        (at + part.len() <= self.len).then_some(at)
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let s = &SLOT[self.slot];
        s.base.store(0, Ordering::Release);
        // SAFETY: the mapping made in `new`, unmapped once; no slice of it
        // outlives `self` (they borrow it), and the slot no longer points
        // the handler at it.
        unsafe { libc::munmap(self.addr as *mut c_void, self.len) };
        s.taken.store(false, Ordering::Release);
    }
}

/// Install the SIGBUS handler once; whether it is installed.
fn install() -> bool {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sysconf reads a constant of the system.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if let Ok(page) = usize::try_from(page) {
            if page.is_power_of_two() {
                PAGE.store(page, Ordering::Relaxed);
            }
        }
        // SAFETY: both structs are plain data, all-zero is a valid value of
        // each; the new action is filled in before `sigaction` reads it, and
        // the handler is an `extern "C"` function of the signature
        // SA_SIGINFO asks for, async-signal-safe (atomics and `mmap` only,
        // or the previous action).
        unsafe {
            let mut new: libc::sigaction = std::mem::zeroed();
            let mut old: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = on_sigbus as *const () as usize;
            new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut new.sa_mask);
            if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
                let _ = PREVIOUS.set(old);
            }
        }
    });
    PREVIOUS.get().is_some()
}

/// SIGBUS: a read past the end of a mapped file cut short maps zero pages
/// from the faulting page to the end of its mapping and marks it (the read
/// then completes, as a zero); any other fault goes to the previous action.
extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid `siginfo_t`.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in &SLOT {
        let base = s.base.load(Ordering::Acquire);
        let len = s.len.load(Ordering::Relaxed);
        if base == 0 || addr < base || addr - base >= len {
            continue;
        }
        let from = addr & !(page - 1);
        let to = (base + len).div_ceil(page) * page;
        // SAFETY: `from..to` lies within this slot's mapping (page-aligned,
        // up to its last page); the zero pages take the place of pages of
        // the file that no longer exist, so every address of the mapping
        // stays readable.
        let p = unsafe {
            libc::mmap(
                from as *mut c_void,
                to - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            s.shrank.store(true, Ordering::Release);
            return;
        }
    }
    let Some(old) = PREVIOUS.get() else {
        return;
    };
    match old.sa_sigaction {
        libc::SIG_DFL | libc::SIG_IGN => {
            // SAFETY: all-zero is a valid `sigaction` (SIG_DFL, no flags);
            // once it is the action, the faulting read runs again and the
            // default action ends the process, as without this handler.
            unsafe {
                let dfl: libc::sigaction = std::mem::zeroed();
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
        f if old.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: the previous action is a handler taking these three
            // arguments (SA_SIGINFO), called as the kernel would call it.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { std::mem::transmute(f) };
            f(sig, info, ctx);
        }
        f => {
            // SAFETY: the previous action is a plain handler of the signal
            // number, called as the kernel would call it.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(f) };
            f(sig);
        }
    }
}
