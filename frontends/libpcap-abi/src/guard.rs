//! The C boundary's two rules: no panic crosses it, and a thread's
//! cancellation (`pthread_cancel`, `pthread_exit`) passes through it.
//!
//! glibc cancels a thread by unwinding its stack ("forced unwinding"),
//! from a cancellation point (`read`, `poll`, `fread`, `write`, …). Rust
//! runs destructors on the way, but `catch_unwind` stops a forced unwind
//! too, and glibc then aborts ("FATAL: exception not rethrown"). So the
//! library's code runs in two kinds of region:
//!
//! * [`entry`]: the body of an entry point, or a step of a read loop:
//!   `catch_unwind` turns a panic into the function's error value, and
//!   the thread's cancellation is disabled meanwhile, so no forced unwind
//!   can start inside. A cancellation requested then waits for the next
//!   cancellation point outside.
//! * outside them, only what may be cancelled: the user's callback, and
//!   the waits of a read loop ([`wait_readable`], [`testcancel`]). These
//!   are called through `"C-unwind"` declarations, and the functions that
//!   run them (`pcap_loop`, `pcap_dispatch`, `pcap_next_ex`, `pcap_next`)
//!   are `extern "C-unwind"`: a forced unwind runs their destructors,
//!   which leave the handle as it was between two packets, and goes on to
//!   the thread's start, as through libpcap.
//!
//! ```
//! // A panic in an entry point's body becomes its error value.
//! assert_eq!(pcap::guard::entry(-1, || -> i32 { panic!("bug") }), -1);
//! assert_eq!(pcap::guard::entry(-1, || 7), 7);
//! ```

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

const PTHREAD_CANCEL_DISABLE: c_int = 1;

extern "C" {
    fn pthread_setcancelstate(state: c_int, old: *mut c_int) -> c_int;
}

extern "C-unwind" {
    fn pthread_testcancel();
    fn poll(fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int;
}

/// Runs an entry point's body: a panic gives `fallback` (after the panic
/// hook has printed it), and no cancellation starts inside.
pub fn entry<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    let mut old: c_int = 0;
    // SAFETY: a valid state and a writable out-pointer.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    let r = catch_unwind(AssertUnwindSafe(f));
    let mut ignored: c_int = 0;
    // SAFETY: restores the state saved above.
    unsafe { pthread_setcancelstate(old, &mut ignored) };
    r.unwrap_or(fallback)
}

/// [`entry`] for code with no cancellation point, or with each one
/// inside [`quiet`]: a panic gives `fallback`; cancellation is left as
/// it is (cheaper: `bpf_filter`, a file's next record, `pcap_dump`).
#[inline(always)]
pub fn pure<R>(fallback: R, f: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

/// Runs `f` (a call that may be a cancellation point, inside a
/// [`pure`] region) with the thread's cancellation disabled.
pub(crate) fn quiet<R>(f: impl FnOnce() -> R) -> R {
    let mut old: c_int = 0;
    // SAFETY: a valid state and a writable out-pointer.
    unsafe { pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &mut old) };
    // Restored also if `f` panics.
    struct Restore(c_int);
    impl Drop for Restore {
        fn drop(&mut self) {
            let mut ignored: c_int = 0;
            // SAFETY: restores the state saved above.
            unsafe { pthread_setcancelstate(self.0, &mut ignored) };
        }
    }
    let _restore = Restore(old);
    f()
}

/// The first fields of glibc's `struct _IO_FILE` (stable since glibc
/// 2.1; gnulib's `freadahead` and `fpending` read them too).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[repr(C)]
struct GlibcFileHead {
    flags: c_int,
    read_ptr: *const u8,
    read_end: *const u8,
    read_base: *const u8,
    write_base: *const u8,
    write_ptr: *const u8,
    write_end: *const u8,
    buf_base: *const u8,
    buf_end: *const u8,
    save_base: *const u8,
    backup_base: *const u8,
    save_end: *const u8,
    markers: *const u8,
    chain: *const u8,
    fileno: c_int,
    flags2: c_int,
}

/// Takes `buf.len()` bytes from `file`'s buffer, as `fread` would take
/// them (without its call and its checks), where they are all there and
/// the stream is used by one thread (no lock needed); `false` otherwise,
/// then `fread` must be called. gnulib's `freadptr`/`freadseek` use the
/// same fields the same way.
pub(crate) fn take_buffered(file: *mut libc::FILE, buf: &mut [u8]) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64"))]
    {
        const IN_BACKUP: c_int = 0x100;
        const EOF_SEEN: c_int = 0x10;
        const ERR_SEEN: c_int = 0x20;
        const NEED_LOCK: c_int = 128;
        // SAFETY: an open glibc stream starts with these fields.
        let h = unsafe { &mut *file.cast::<GlibcFileHead>() };
        let avail = (h.read_end as usize).saturating_sub(h.read_ptr as usize);
        const CURRENTLY_PUTTING: c_int = 0x800;
        if h.flags & (IN_BACKUP | EOF_SEEN | ERR_SEEN | CURRENTLY_PUTTING) != 0
            || h.flags2 & NEED_LOCK != 0
            || avail < buf.len()
        {
            return false;
        }
        // SAFETY: `avail` bytes from read_ptr are the stream's buffered
        // input; the stream is not shared with another thread.
        unsafe {
            std::ptr::copy_nonoverlapping(h.read_ptr, buf.as_mut_ptr(), buf.len());
            h.read_ptr = h.read_ptr.add(buf.len());
        }
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu", target_pointer_width = "64")))]
    {
        let _ = (file, buf);
        false
    }
}

/// Whether reading `n` bytes from `file` takes them from its buffer
/// (no system call, so no cancellation point); `false` where that cannot
/// be known.
pub(crate) fn buffered_read(file: *mut libc::FILE, n: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: an open glibc stream starts with these fields.
        let h = unsafe { &*file.cast::<GlibcFileHead>() };
        (h.read_end as usize).saturating_sub(h.read_ptr as usize) >= n
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (file, n);
        false
    }
}

/// Whether writing `n` bytes to `file` puts them in its buffer (no
/// system call): a fully buffered stream with room for them.
pub(crate) fn buffered_write(file: *mut libc::FILE, n: usize) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const UNBUFFERED: c_int = 0x0002;
        const LINE_BUF: c_int = 0x0200;
        // SAFETY: an open glibc stream starts with these fields.
        let h = unsafe { &*file.cast::<GlibcFileHead>() };
        h.flags & (UNBUFFERED | LINE_BUF) == 0
            && (h.write_end as usize).saturating_sub(h.write_ptr as usize) >= n
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (file, n);
        false
    }
}

/// Acts on a pending cancellation of this thread (a cancellation point).
pub(crate) fn testcancel() {
    // SAFETY: no arguments; may unwind, declared so.
    unsafe { pthread_testcancel() }
}

/// Waits up to `ms` milliseconds (-1: for ever) until `fd` is readable,
/// as a cancellation point. Returns whether it is (or has an error or
/// end to report, which the next read gives).
pub(crate) fn wait_readable(fd: c_int, ms: c_int) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd, ours; may unwind, declared so.
        let n = unsafe { poll(&mut pfd, 1, ms) };
        if n >= 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return n != 0;
        }
    }
}
