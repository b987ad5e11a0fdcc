//! Machine code of many functions packed into shared pages.
//!
//! A JIT module puts each function at the start of pages of its own. A
//! decision tree's code is a few hundred functions, so every function's
//! first lines fall in the same sets of the instruction cache and each
//! takes a page (and a TLB entry) of its own. Here functions are placed
//! one after another, each on a cache line of its own, in chunks of
//! executable memory (Linux on x86-64).
//!
//! The rule: a byte that any thread may run is never written again, and
//! no page is writable and executable through one mapping.
//! - A chunk is a memory file mapped read+execute once. Code is written
//!   through a second, read+write mapping of the pages it lands on, made
//!   for the copy and unmapped right after it. The unmapping flushes the
//!   other cores' TLBs, so they see the new code before its address is
//!   returned.
//! - Space is never reused: a function's lines are written once, before
//!   any pointer to them exists, and a chunk is unmapped (and its file
//!   closed) when its last function is dropped. The arena holds the chunk
//!   it fills only weakly, so a process whose code is all dropped holds
//!   no chunk, no descriptor and no mapping for it.
//! - A page whose functions are all dropped goes back to the system (a
//!   hole punched in the file), so a tree changed again and again does
//!   not hold the memory of its past code.
//! - A process forked from one with a chunk never writes to it: it starts
//!   a chunk of its own, so neither process writes lines the other runs.
//!
//! Where memory files or two mappings are refused, or elsewhere than on
//! x86-64 Linux, [`Arena::install`] returns `None` and the caller keeps its
//! function in a JIT module of its own.

use std::sync::{Arc, Mutex, Weak};

/// Each function starts on a line of its own.
const LINE: usize = 64;
/// The smallest chunk: a large function gets a chunk of its size.
const CHUNK_BYTES: usize = 256 * 1024;

/// One function's code in a chunk: the chunk stays mapped while this lives.
pub(crate) struct Placed {
    chunk: Arc<Chunk>,
    at: usize,
    len: usize,
}

impl Drop for Placed {
    fn drop(&mut self) {
        let mut live = self.chunk.live.lock().unwrap_or_else(|e| e.into_inner());
        for p in pages(self.at, self.len) {
            live[p] -= 1;
            if live[p] == 0 {
                self.chunk.punch(p);
            }
        }
    }
}

/// The pages that bytes `at..at + len` of a chunk lie on.
fn pages(at: usize, len: usize) -> std::ops::Range<usize> {
    let page = page_size();
    at / page..(at + len.max(1)).div_ceil(page)
}

impl Placed {
    /// The address of the function's first instruction.
    pub(crate) fn ptr(&self) -> *const u8 {
        self.chunk.rx.wrapping_add(self.at)
    }
}

/// A chunk: its memory file and the file's executable mapping.
struct Chunk {
    rx: *const u8,
    len: usize,
    /// The memory file, to map its pages writable and to give pages back.
    fd: std::os::fd::OwnedFd,
    /// How many functions have code on each page. Held while code is
    /// written, so that no page is given back under a write.
    live: Mutex<Vec<u32>>,
}

impl Chunk {
    /// Give page `p` back to the system: its functions are all dropped.
    /// Code written there later gets a fresh page.
    fn punch(&self, p: usize) {
        use std::os::fd::AsRawFd;
        let page = page_size();
        // SAFETY: frees page `p` of the chunk's file, which no live function
        // has code on; the mapping reads zeros there until a write.
        unsafe {
            libc::fallocate(
                self.fd.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                (p * page) as libc::off_t,
                page as libc::off_t,
            )
        };
    }
}

// SAFETY: the mapping is only read and run through `rx`, never written
// (code goes in through a separate, short-lived mapping in `install`), and
// it is unmapped only when the last owner drops.
unsafe impl Send for Chunk {}
// SAFETY: as for `Send`.
unsafe impl Sync for Chunk {}

impl Drop for Chunk {
    fn drop(&mut self) {
        // SAFETY: `rx` and `len` are the mapping made in `Arena::grow`; no
        // `Placed` (and so no pointer to code in it) is left.
        unsafe { libc::munmap(self.rx as *mut libc::c_void, self.len) };
    }
}

/// The chunk being filled, while a function placed in it lives.
struct Current {
    chunk: Weak<Chunk>,
    used: usize,
    /// The process that made the chunk.
    pid: u32,
}

/// Chunks of code: the one being filled, if any; `Err` once chunks proved
/// impossible in this process.
pub(crate) struct Arena(Mutex<Result<Option<Current>, ()>>);

/// The process's code arena.
pub(crate) static CODE: Arena = Arena::new();

impl Arena {
    /// An arena with no chunk yet.
    pub(crate) const fn new() -> Arena {
        Arena(Mutex::new(Ok(None)))
    }

    /// Copy `code` (a function that refers to nothing outside itself, whose
    /// first byte must be aligned to `align`) into executable memory. `None`
    /// where this process cannot have such memory; the caller places the code
    /// another way.
    pub(crate) fn install(&self, code: &[u8], align: usize) -> Option<Placed> {
        if !cfg!(all(target_os = "linux", target_arch = "x86_64")) || align > LINE {
            return None;
        }
        let mut arena = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let slot = arena.as_mut().ok()?;
        let pid = std::process::id();
        // The chunk being filled, if a function still holds it, this
        // process made it and the code fits after what it holds.
        let open = slot.as_ref().and_then(|c| {
            let chunk = c.chunk.upgrade().filter(|_| c.pid == pid)?;
            (c.used + code.len() <= chunk.len).then_some((chunk, c.used))
        });
        let (chunk, at) = match open {
            Some(open) => open,
            None => match grow(code.len()) {
                Some(chunk) => (chunk, 0),
                None => {
                    *arena = Err(());
                    return None;
                }
            },
        };
        let mut live = chunk.live.lock().unwrap_or_else(|e| e.into_inner());
        write(&chunk, at, code)?;
        for p in pages(at, code.len()) {
            live[p] += 1;
        }
        drop(live);
        *slot = Some(Current {
            chunk: Arc::downgrade(&chunk),
            used: (at + code.len()).div_ceil(LINE) * LINE,
            pid,
        });
        Some(Placed {
            chunk,
            at,
            len: code.len(),
        })
    }
}

/// A new chunk for at least `need` bytes.
fn grow(need: usize) -> Option<Arc<Chunk>> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let page = page_size();
    let len = need.max(CHUNK_BYTES).div_ceil(page) * page;
    // A file that may be mapped executable (`MFD_EXEC`, Linux 6.3 on;
    // earlier kernels refuse the flag and allow it anyway).
    let name = c"sluice-code";
    // SAFETY: a memory file with a constant name; the descriptor returned
    // is owned here alone.
    let mut fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_EXEC) };
    if fd < 0 {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    }
    if fd < 0 {
        return None;
    }
    // SAFETY: `fd` was just opened and is not owned elsewhere.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sizes the file just made.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
        return None;
    }
    // SAFETY: a new shared, read+execute mapping of the whole file; nothing
    // else is at the address the kernel picks.
    let rx = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_EXEC,
            libc::MAP_SHARED,
            fd.as_raw_fd(),
            0,
        )
    };
    if rx == libc::MAP_FAILED {
        return None;
    }
    Some(Arc::new(Chunk {
        rx: rx as *const u8,
        len,
        fd,
        live: Mutex::new(vec![0; len / page]),
    }))
}

/// Write `code` at byte `at` of the chunk, through a writable mapping of
/// the pages it lands on, unmapped before returning.
fn write(chunk: &Chunk, at: usize, code: &[u8]) -> Option<()> {
    use std::os::fd::AsRawFd;
    let page = page_size();
    let on = pages(at, code.len());
    let (first, end) = (on.start * page, on.end * page);
    // SAFETY: a new shared, read+write mapping of pages `first..end` of the
    // chunk's file, which lie within it (`install` checked the room).
    let rw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            end - first,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            chunk.fd.as_raw_fd(),
            first as libc::off_t,
        )
    };
    if rw == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: `at - first + code.len() <= end - first`: the copy stays in
    // the mapping. Bytes `at..` of the chunk were never handed out, so no
    // thread runs or reads them.
    unsafe {
        std::ptr::copy_nonoverlapping(code.as_ptr(), (rw as *mut u8).add(at - first), code.len());
        libc::munmap(rw, end - first);
    }
    Some(())
}

fn page_size() -> usize {
    // SAFETY: sysconf only reads a system setting.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `mov eax, imm32; ret`: a function returning `k`.
    fn returns(k: u32) -> Vec<u8> {
        let mut c = vec![0xb8];
        c.extend_from_slice(&k.to_le_bytes());
        c.push(0xc3);
        c
    }

    fn call(p: &Placed) -> u32 {
        // SAFETY: `p` holds `returns(k)`, a complete x86-64 function of
        // this type.
        let f: extern "C" fn() -> u32 = unsafe { std::mem::transmute(p.ptr()) };
        f()
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn functions_share_pages_on_lines_of_their_own_and_run() {
        let a = Arena::new();
        let placed: Vec<Placed> = (0..100u32)
            .map(|k| a.install(&returns(k), 16).expect("executable memory"))
            .collect();
        for (k, p) in placed.iter().enumerate() {
            assert_eq!(call(p), k as u32);
            assert_eq!(p.ptr() as usize % LINE, 0);
        }
        let pages: std::collections::HashSet<usize> =
            placed.iter().map(|p| p.ptr() as usize / 4096).collect();
        assert!(
            pages.len() <= 3,
            "{} pages for 100 small functions",
            pages.len()
        );
        // A function larger than a chunk gets one of its own.
        let mut big = vec![0x90u8; CHUNK_BYTES + 10]; // nops
        big.extend(returns(7));
        let p = a.install(&big, 16).unwrap();
        assert_eq!(call(&p), 7);
        assert_eq!(call(&placed[99]), 99);
        assert!(a.install(&returns(1), 128).is_none());
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn no_mapping_is_writable_and_executable() {
        let a = Arena::new();
        let p = a.install(&returns(5), 16).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for l in maps.lines() {
            let perms = l.split(' ').nth(1).unwrap();
            assert!(!(perms.contains('w') && perms.contains('x')), "{l}");
        }
        let perms = crate::tests::perms_at(p.ptr() as usize);
        assert!(perms.starts_with("r-xs"), "{perms}");
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn a_chunk_lives_while_its_functions_do() {
        let arena = Arena::new();
        let a = arena.install(&returns(1), 16).unwrap();
        let chunk = Arc::downgrade(&a.chunk);
        // Move the arena to a new chunk: only `a` holds the old one then.
        let big = vec![0xc3u8; CHUNK_BYTES];
        let b = arena.install(&big, 16).unwrap();
        drop(b);
        assert_eq!(call(&a), 1);
        assert!(chunk.upgrade().is_some());
        drop(a);
        assert!(chunk.upgrade().is_none());
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn the_chunk_being_filled_goes_with_its_last_function() {
        let arena = Arena::new();
        let a = arena.install(&returns(1), 16).unwrap();
        let b = arena.install(&returns(2), 16).unwrap();
        assert!(Arc::ptr_eq(&a.chunk, &b.chunk));
        let chunk = Arc::downgrade(&a.chunk);
        let (rx, len) = (a.chunk.rx as usize, a.chunk.len);
        drop(a);
        assert!(chunk.upgrade().is_some(), "`b` still runs there");
        assert_eq!(call(&b), 2);
        drop(b);
        // No function is left: the chunk's file and mapping are gone, though
        // the arena was still filling it.
        assert!(chunk.upgrade().is_none());
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let start = format!("{rx:x}-{:x} ", rx + len);
        assert!(
            !maps
                .lines()
                .any(|l| l.starts_with(&start) && l.contains("sluice-code")),
            "still mapped"
        );
        // The next function gets a new chunk and runs.
        let c = arena.install(&returns(3), 16).unwrap();
        assert_eq!(call(&c), 3);
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn a_forked_child_writes_to_chunks_of_its_own() {
        let arena = Arena::new();
        let one = arena.install(&returns(1), 16).unwrap();
        let chunk = |p: &Placed| Arc::as_ptr(&p.chunk) as usize;
        // SAFETY: the child only uses its own arena (no lock another
        // thread could hold), checks and leaves with `_exit`.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let two = arena.install(&returns(2), 16);
            let ok = two.is_some_and(|t| {
                call(&t) == 2 && chunk(&t) != chunk(&one) && t.chunk.rx != one.chunk.rx
            });
            // SAFETY: ends the child without running the test harness.
            unsafe { libc::_exit(if ok && call(&one) == 1 { 0 } else { 1 }) };
        }
        let three = arena.install(&returns(3), 16).unwrap();
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
        assert_eq!(chunk(&three), chunk(&one));
        assert_eq!((call(&one), call(&three)), (1, 3));
    }

    /// Bytes the chunk's file holds in memory.
    fn held(c: &Chunk) -> u64 {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain C struct, all zeros valid.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fstat` writes `st` for the chunk's open file.
        assert_eq!(unsafe { libc::fstat(c.fd.as_raw_fd(), &mut st) }, 0);
        st.st_blocks as u64 * 512
    }

    #[test]
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    fn pages_of_dropped_functions_go_back() {
        let arena = Arena::new();
        // 40 functions of 5,000 bytes: nops, then `return k`.
        let placed: Vec<Placed> = (0..40u32)
            .map(|k| {
                let mut c = vec![0x90u8; 5000];
                c.extend(returns(k));
                arena.install(&c, 16).unwrap()
            })
            .collect();
        let chunk = placed[0].chunk.clone();
        assert!(placed.iter().all(|p| Arc::ptr_eq(&p.chunk, &chunk)));
        let all = held(&chunk);
        assert!(all >= 40 * 5000, "{all}");
        let mut placed = placed;
        let kept = placed.split_off(38);
        drop(placed);
        // Two functions of 5,006 bytes, lines apart, lie on at most 4 pages.
        assert!(held(&chunk) <= 4 * 4096, "{} of {all}", held(&chunk));
        assert_eq!((call(&kept[0]), call(&kept[1])), (38, 39));
        // The space after them is written afresh.
        let next = arena.install(&returns(7), 16).unwrap();
        assert!(Arc::ptr_eq(&next.chunk, &chunk));
        assert_eq!(call(&next), 7);
    }
}
