//! Writing capture files: `pcap_dumper_t` is, as in libpcap, the `FILE *`
//! the file is written through, so `pcap_dump_file` and `pcap_dump_ftell`
//! are stdio's, and output to `-` interleaves with the program's own
//! stdout in order. Files are pcap, in this machine's byte order, with the
//! handle's time-stamp precision: byte for byte what libpcap writes.

use crate::handle::{handle_or, pcap_t};
use crate::names::dlt_to_linktype;
use crate::types::*;
use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_char, c_int, c_long};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// libpcap's `pcap_dumper_t`: a stdio stream.
pub type pcap_dumper_t = libc::FILE;

/// The streams this library opened as dumpers and has not closed.
static DUMPERS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

fn dumpers() -> std::sync::MutexGuard<'static, Option<HashSet<usize>>> {
    DUMPERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// How many dumpers have been closed: a dumper this thread found in the
/// registry stays known until the next close.
static CLOSES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The dumper this thread last found, and `CLOSES` then.
    static LAST_KNOWN: Cell<(usize, u64)> = const { Cell::new((0, u64::MAX)) };
}

/// Whether `d` is an open dumper of this library. `pcap_dump` asks for
/// every packet, so the answer for the dumper last asked about is kept
/// per thread until a dumper is closed (no lock, no hash per packet).
fn known(d: *mut pcap_dumper_t) -> bool {
    if d.is_null() {
        return false;
    }
    let closes = CLOSES.load(Ordering::Acquire);
    if LAST_KNOWN.with(Cell::get) == (d as usize, closes) {
        return true;
    }
    let found = dumpers()
        .as_ref()
        .is_some_and(|s| s.contains(&(d as usize)));
    if found {
        LAST_KNOWN.with(|l| l.set((d as usize, closes)));
    }
    found
}

extern "C" {
    static mut stdout: *mut libc::FILE;
}

/// The file header for a handle: magic of its precision, version 2.4,
/// its snapshot length and its link type's LINKTYPE value.
fn file_header(h: &pcap_t) -> Result<[u8; 24], String> {
    let dlt = h.dlt.get();
    let Some(linktype) = dlt_to_linktype(dlt) else {
        return Err(format!(
            "link-layer type {dlt} isn't supported in savefiles"
        ));
    };
    let magic = if h.precision.get() == PCAP_TSTAMP_PRECISION_NANO {
        NSEC_TCPDUMP_MAGIC
    } else {
        TCPDUMP_MAGIC
    };
    let mut b = [0u8; 24];
    b[0..4].copy_from_slice(&magic.to_ne_bytes());
    b[4..6].copy_from_slice(&2u16.to_ne_bytes());
    b[6..8].copy_from_slice(&4u16.to_ne_bytes());
    b[16..20].copy_from_slice(&(h.snapshot.get() as u32).to_ne_bytes());
    b[20..24].copy_from_slice(
        &(linktype | h.linktype_ext.load(std::sync::atomic::Ordering::Acquire)).to_ne_bytes(),
    );
    Ok(b)
}

/// Writes the header to a new stream and registers it.
fn start(h: &pcap_t, f: *mut libc::FILE, name: &str, close_on_error: bool) -> *mut pcap_dumper_t {
    let fail = |msg: String| {
        if close_on_error {
            // SAFETY: a stream this function's caller opened for us.
            unsafe { libc::fclose(f) };
        }
        h.set_err(&msg);
        std::ptr::null_mut()
    };
    let header = match file_header(h) {
        Ok(b) => b,
        Err(e) => return fail(format!("{name}: {e}")),
    };
    // SAFETY: an open stream and a 24-byte buffer.
    if unsafe { libc::fwrite(header.as_ptr().cast(), 1, 24, f) } != 24 {
        let e = std::io::Error::last_os_error();
        return fail(format!(
            "Can't write to {name}: {}",
            crate::names::errno_text(e.raw_os_error().unwrap_or(libc::EIO))
        ));
    }
    dumpers()
        .get_or_insert_with(HashSet::new)
        .insert(f as usize);
    f
}

/// `pcap_dump_open`: creates (or truncates) a pcap file for the handle's
/// packets; `-` is the standard output.
///
/// # Safety
/// `p` NULL or from this library; `fname` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_open(
    p: *mut pcap_t,
    fname: *const c_char,
) -> *mut pcap_dumper_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        let h = handle_or!(p, std::ptr::null_mut());
        // SAFETY: as documented.
        let Some(name) = (unsafe { crate::cstr(fname) }) else {
            h.set_err("A null pointer was supplied as the file name");
            return std::ptr::null_mut();
        };
        let shown = name.to_string_lossy().into_owned();
        if name.to_bytes() == b"-" {
            // SAFETY: C's standard output stream.
            return start(&h, unsafe { stdout }, "standard output", false);
        }
        // SAFETY: a C string path and mode.
        let f = unsafe { libc::fopen(name.as_ptr(), c"wb".as_ptr()) };
        if f.is_null() {
            let e = std::io::Error::last_os_error();
            h.set_err(&format!(
                "{shown}: {}",
                crate::names::errno_text(e.raw_os_error().unwrap_or(libc::EIO))
            ));
            return std::ptr::null_mut();
        }
        start(&h, f, &shown, true)
    })
}

/// `pcap_dump_fopen`: writes to a stream the caller opened (closed by
/// `pcap_dump_close`).
///
/// # Safety
/// `p` NULL or from this library; `f` NULL or an open stream.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_fopen(p: *mut pcap_t, f: *mut libc::FILE) -> *mut pcap_dumper_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        let h = handle_or!(p, std::ptr::null_mut());
        if f.is_null() {
            h.set_err("A null pointer was supplied as the file");
            return std::ptr::null_mut();
        }
        start(&h, f, "stream", false)
    })
}

/// `pcap_dump_open_append`: appends to an existing pcap file of the same
/// link type and precision (a missing or empty file is created).
///
/// # Safety
/// As [`pcap_dump_open`].
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_open_append(
    p: *mut pcap_t,
    fname: *const c_char,
) -> *mut pcap_dumper_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        let h = handle_or!(p, std::ptr::null_mut());
        // SAFETY: as documented.
        let Some(name) = (unsafe { crate::cstr(fname) }) else {
            h.set_err("A null pointer was supplied as the file name");
            return std::ptr::null_mut();
        };
        let shown = name.to_string_lossy().into_owned();
        let existing = std::fs::read(&*shown).ok().filter(|b| !b.is_empty());
        let Some(bytes) = existing else {
            // SAFETY: as documented.
            return unsafe { pcap_dump_open(p, fname) };
        };
        let want = match file_header(&h) {
            Ok(b) => b,
            Err(e) => {
                h.set_err(&format!("{shown}: {e}"));
                return std::ptr::null_mut();
            }
        };
        let magic = bytes
            .get(0..4)
            .map(|m| u32::from_ne_bytes([m[0], m[1], m[2], m[3]]));
        let why = match magic {
            _ if bytes.len() < 24 => Some("not a pcap file"),
            Some(m) if m.swap_bytes() == TCPDUMP_MAGIC || m.swap_bytes() == NSEC_TCPDUMP_MAGIC => {
                Some("different byte order, cannot append to file")
            }
            Some(m) if m == TCPDUMP_MAGIC || m == NSEC_TCPDUMP_MAGIC => (bytes[0..4] != want[0..4])
                .then_some("different time stamp precision, cannot append to file"),
            _ => Some("not a pcap file"),
        };
        if let Some(why) = why {
            h.set_err(&format!("{shown}: {why}"));
            return std::ptr::null_mut();
        }
        if bytes[20..24] != want[20..24] {
            h.set_err(&format!(
                "{shown}: different linktype, cannot append to file"
            ));
            return std::ptr::null_mut();
        }
        // SAFETY: a C string path and mode.
        let f = unsafe { libc::fopen(name.as_ptr(), c"ab".as_ptr()) };
        if f.is_null() {
            let e = std::io::Error::last_os_error();
            h.set_err(&format!(
                "{shown}: {}",
                crate::names::errno_text(e.raw_os_error().unwrap_or(libc::EIO))
            ));
            return std::ptr::null_mut();
        }
        dumpers()
            .get_or_insert_with(HashSet::new)
            .insert(f as usize);
        f
    })
}

/// `pcap_dump`: appends one packet; its signature fits `pcap_loop`'s
/// callback (`user` is the dumper).
///
/// # Safety
/// `user` NULL or a dumper; `h` and `sp` valid for `h->caplen` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump(user: *mut u8, h: *const pcap_pkthdr, sp: *const u8) {
    // Called for every packet: cancellation is disabled only around a
    // write that will reach the system (crate::guard).
    crate::guard::pure((), move || {
        let f = user.cast::<pcap_dumper_t>();
        if !known(f) {
            return;
        }
        // SAFETY: as documented.
        let Some(h) = (unsafe { h.as_ref() }) else {
            return;
        };
        if sp.is_null() && h.caplen > 0 {
            return;
        }
        let mut rec = [0u8; 16];
        rec[0..4].copy_from_slice(&(h.ts.tv_sec as u32).to_ne_bytes());
        rec[4..8].copy_from_slice(&(h.ts.tv_usec as u32).to_ne_bytes());
        rec[8..12].copy_from_slice(&h.caplen.to_ne_bytes());
        rec[12..16].copy_from_slice(&h.len.to_ne_bytes());
        // SAFETY: a registered open stream; the record and caplen data bytes.
        let write = || unsafe {
            libc::fwrite(rec.as_ptr().cast(), 1, 16, f);
            if h.caplen > 0 {
                libc::fwrite(sp.cast(), 1, h.caplen as usize, f);
            }
        };
        if crate::guard::buffered_write(f, 16 + h.caplen as usize) {
            write();
        } else {
            crate::guard::quiet(write);
        }
    })
}

/// `pcap_dump_flush`: 0, or -1 when the stream cannot be flushed.
///
/// # Safety
/// `d` NULL or a dumper.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_flush(d: *mut pcap_dumper_t) -> c_int {
    crate::guard::entry(-1, move || {
        if !known(d) {
            return PCAP_ERROR;
        }
        // SAFETY: a registered open stream.
        if unsafe { libc::fflush(d) } == libc::EOF {
            PCAP_ERROR
        } else {
            0
        }
    })
}

/// `pcap_dump_close`: flushes and closes the file.
///
/// # Safety
/// `d` NULL or a dumper, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_close(d: *mut pcap_dumper_t) {
    crate::guard::entry((), move || {
        if d.is_null() || !dumpers().as_mut().is_some_and(|s| s.remove(&(d as usize))) {
            return;
        }
        // Every thread's remembered dumper is asked about again.
        CLOSES.fetch_add(1, Ordering::Release);
        // SAFETY: a stream this library registered, now unregistered.
        unsafe { libc::fclose(d) };
    })
}

/// `pcap_dump_file`: the dumper's stream.
///
/// # Safety
/// `d` NULL or a dumper.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_file(d: *mut pcap_dumper_t) -> *mut libc::FILE {
    crate::guard::entry(std::ptr::null_mut(), move || {
        if known(d) {
            d
        } else {
            std::ptr::null_mut()
        }
    })
}

/// `pcap_dump_ftell`: the current file offset, or -1.
///
/// # Safety
/// `d` NULL or a dumper.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_ftell(d: *mut pcap_dumper_t) -> c_long {
    crate::guard::entry(-1, move || {
        if !known(d) {
            return -1;
        }
        // SAFETY: a registered open stream.
        unsafe { libc::ftell(d) }
    })
}

/// `pcap_dump_ftell64`: the current file offset, or -1.
///
/// # Safety
/// `d` NULL or a dumper.
#[no_mangle]
pub unsafe extern "C" fn pcap_dump_ftell64(d: *mut pcap_dumper_t) -> i64 {
    crate::guard::entry(-1, move || {
        if !known(d) {
            return -1;
        }
        // SAFETY: a registered open stream.
        unsafe { libc::ftello(d) }
    })
}
