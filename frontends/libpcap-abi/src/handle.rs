//! The `pcap_t` handle: what every kind of handle (dead, offline, created,
//! live) holds, the registry that tells a live handle from a freed or
//! made-up pointer, and the functions that only read a handle.
//!
//! A handle is touched from one thread at a time, as libpcap's are, but
//! C calls back into it from inside `pcap_loop` (`pcap_geterr`,
//! `pcap_stats`, `pcap_breakloop`, `pcap_dump_open` of the same handle).
//! So every entry point takes `&pcap_t`, and what changes sits in `Cell`s
//! and `RefCell`s: a call that needs what the loop holds gets an error,
//! not a second mutable borrow.

use crate::live::{Live, Settings};
use crate::offline::Offline;
use crate::types::*;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::collections::HashSet;
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// What a handle reads from.
pub(crate) enum Source {
    /// `pcap_open_dead`: compiles and writes, never reads.
    Dead,
    /// A capture file.
    Offline(Box<Offline>),
    /// `pcap_create`d, not yet activated.
    Created,
    /// An activated live capture.
    Live(Box<Live>),
}

/// libpcap's `pcap_t`; C only ever holds a pointer to it.
pub struct pcap_t {
    errbuf: UnsafeCell<[u8; PCAP_ERRBUF_SIZE]>,
    pub(crate) break_loop: Arc<AtomicBool>,
    /// DLT value (not the file's LINKTYPE value).
    pub(crate) dlt: Cell<c_int>,
    /// The upper 16 bits of a pcap file's link-type field (FCS length
    /// bits), written back by `pcap_dump_open`.
    pub(crate) linktype_ext: Cell<u32>,
    pub(crate) snapshot: Cell<c_int>,
    pub(crate) precision: Cell<c_int>,
    pub(crate) swapped: Cell<bool>,
    pub(crate) version: Cell<(c_int, c_int)>,
    pub(crate) nonblock: Cell<bool>,
    pub(crate) source: RefCell<Source>,
    pub(crate) settings: RefCell<Settings>,
    pub(crate) filter: RefCell<Option<Arc<sluice_filter::Program>>>,
    /// The packet `pcap_next`/`pcap_next_ex` hand out, valid to the next call.
    pub(crate) next_hdr: UnsafeCell<pcap_pkthdr>,
    pub(crate) next_data: RefCell<Vec<u8>>,
    /// A live capture's counts as of its last read, for `pcap_stats`
    /// from inside a packet callback.
    pub(crate) live_stats: Cell<pcap_stat>,
}

static HANDLES: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// The last messages of recently closed handles. Some programs (pcapy's
/// `compile`) read `pcap_geterr` right after `pcap_close`, which works on
/// libpcap by the luck of freed memory; here it works by design.
static CLOSED: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
const CLOSED_KEPT: usize = 16;

impl pcap_t {
    /// A new handle in the registry; C gets the pointer.
    pub(crate) fn register(
        source: Source,
        dlt: c_int,
        snapshot: c_int,
        precision: c_int,
    ) -> *mut pcap_t {
        crate::announce();
        let p = Box::into_raw(Box::new(pcap_t {
            errbuf: UnsafeCell::new([0; PCAP_ERRBUF_SIZE]),
            break_loop: Arc::new(AtomicBool::new(false)),
            dlt: Cell::new(dlt),
            linktype_ext: Cell::new(0),
            snapshot: Cell::new(snapshot),
            precision: Cell::new(precision),
            swapped: Cell::new(false),
            version: Cell::new((2, 4)),
            nonblock: Cell::new(false),
            source: RefCell::new(source),
            settings: RefCell::new(Settings::default()),
            filter: RefCell::new(None),
            next_hdr: UnsafeCell::new(pcap_pkthdr {
                ts: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                },
                caplen: 0,
                len: 0,
            }),
            next_data: RefCell::new(Vec::new()),
            live_stats: Cell::new(pcap_stat::default()),
        }));
        lock().get_or_insert_with(HashSet::new).insert(p as usize);
        p
    }

    /// The handle behind a C pointer, if it is one this library made and
    /// has not closed.
    ///
    /// # Safety
    /// The handle must not be closed while the reference is used (C calls
    /// `pcap_close` from one thread, after the loop returns).
    pub(crate) unsafe fn get<'a>(p: *mut pcap_t) -> Option<&'a pcap_t> {
        if p.is_null() || !lock().as_ref().is_some_and(|s| s.contains(&(p as usize))) {
            return None;
        }
        // SAFETY: registered pointers come from Box::into_raw and are
        // removed from the registry before they are freed.
        Some(unsafe { &*p })
    }

    /// Sets the message `pcap_geterr` returns.
    pub(crate) fn set_err(&self, msg: &str) {
        // SAFETY: the buffer belongs to this handle; C reads it only
        // through the pointer pcap_geterr gave, between calls.
        let buf = unsafe { &mut *self.errbuf.get() };
        let n = msg.len().min(PCAP_ERRBUF_SIZE - 1);
        buf[..n].copy_from_slice(&msg.as_bytes()[..n]);
        buf[n] = 0;
    }

    /// Sets the message and returns `code`, for `return p.fail(...)`.
    pub(crate) fn fail(&self, code: c_int, msg: &str) -> c_int {
        self.set_err(msg);
        code
    }

    /// The current message, as text.
    pub(crate) fn message(&self) -> String {
        // SAFETY: the handle's own buffer, always NUL-terminated.
        let buf = unsafe { &*self.errbuf.get() };
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }

    pub(crate) fn errbuf_ptr(&self) -> *mut c_char {
        self.errbuf.get().cast()
    }

    /// Whether `pcap_breakloop` was called; clears the request.
    pub(crate) fn take_break(&self) -> bool {
        self.break_loop.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn is_activated(&self) -> bool {
        !matches!(*self.source.borrow(), Source::Created)
    }
}

fn lock() -> std::sync::MutexGuard<'static, Option<HashSet<usize>>> {
    HANDLES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether `p` is a registered handle; `None` when the registry is busy
/// (a signal handler interrupted its own thread holding it).
pub(crate) fn known(p: *mut pcap_t) -> Option<bool> {
    match HANDLES.try_lock() {
        Ok(s) => Some(s.as_ref().is_some_and(|s| s.contains(&(p as usize)))),
        Err(std::sync::TryLockError::Poisoned(e)) => Some(
            e.into_inner()
                .as_ref()
                .is_some_and(|s| s.contains(&(p as usize))),
        ),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

/// The error every function gives for a NULL or unknown handle.
pub(crate) const BAD_HANDLE: c_int = PCAP_ERROR;

/// `pcap_close`: closes the file or capture and frees the handle. A NULL
/// or unknown pointer is ignored.
///
/// # Safety
/// `p` is NULL or a handle from this library, not used after this call.
#[no_mangle]
pub unsafe extern "C" fn pcap_close(p: *mut pcap_t) {
    if p.is_null() || !lock().as_mut().is_some_and(|s| s.remove(&(p as usize))) {
        return;
    }
    // SAFETY: the pointer was registered (so came from Box::into_raw) and
    // is now out of the registry, so nothing else frees it.
    let h = unsafe { Box::from_raw(p) };
    let last = h.message();
    drop(h);
    let mut closed = CLOSED.lock().unwrap_or_else(|e| e.into_inner());
    closed.retain(|(q, _)| *q != p as usize);
    if closed.len() >= CLOSED_KEPT {
        closed.remove(0);
    }
    closed.push((p as usize, last));
}

/// `pcap_geterr`: the handle's last error message ("" for a NULL or
/// unknown handle).
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_geterr(p: *mut pcap_t) -> *mut c_char {
    // SAFETY: checked against the registry.
    if let Some(h) = unsafe { pcap_t::get(p) } {
        return h.errbuf_ptr();
    }
    let closed = CLOSED.lock().unwrap_or_else(|e| e.into_inner());
    let msg = match closed.iter().rev().find(|(q, _)| *q == p as usize) {
        // A closed handle's last message, where it had one.
        Some((_, m)) if !m.is_empty() => m.as_str(),
        _ => "not a pcap_t of this library",
    };
    crate::names::scratch(msg).cast_mut()
}

/// `pcap_perror`: prints `prefix: message` on stderr.
///
/// # Safety
/// `p` as for [`pcap_geterr`]; `prefix` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn pcap_perror(p: *mut pcap_t, prefix: *const c_char) {
    // SAFETY: as documented above.
    let (msg, prefix) = unsafe { (crate::cstr(pcap_geterr(p)), crate::cstr(prefix)) };
    let msg = msg.map(|m| m.to_string_lossy()).unwrap_or_default();
    match prefix {
        Some(pre) => eprintln!("{}: {msg}", pre.to_string_lossy()),
        None => eprintln!("{msg}"),
    }
}

macro_rules! handle_or {
    ($p:expr, $bad:expr) => {
        // SAFETY: the pointer is checked against the registry.
        match unsafe { pcap_t::get($p) } {
            Some(h) => h,
            None => return $bad,
        }
    };
}
pub(crate) use handle_or;

/// The "not activated" error, for functions called on a created handle.
fn not_activated(h: &pcap_t) -> c_int {
    h.fail(PCAP_ERROR_NOT_ACTIVATED, crate::types::NOT_ACTIVATED_MSG)
}

/// `pcap_datalink`: the handle's DLT value.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_datalink(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    h.dlt.get()
}

/// `pcap_datalink_ext`: the extension bits of a pcap file's link-type
/// field (its FCS length), 0 for other handles.
///
/// # Safety
/// As [`pcap_datalink`].
#[no_mangle]
pub unsafe extern "C" fn pcap_datalink_ext(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    h.linktype_ext.get() as c_int
}

/// `pcap_snapshot`: the snapshot length.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_snapshot(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    h.snapshot.get()
}

/// `pcap_is_swapped`: whether the file's byte order differs from ours.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_is_swapped(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    c_int::from(h.swapped.get())
}

/// `pcap_major_version`: the file's major version (2 for pcap).
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_major_version(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    h.version.get().0
}

/// `pcap_minor_version`: the file's minor version.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_minor_version(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    h.version.get().1
}

/// `pcap_get_tstamp_precision`.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_get_tstamp_precision(p: *mut pcap_t) -> c_int {
    handle_or!(p, BAD_HANDLE).precision.get()
}

/// `pcap_bufsize`: the buffer size (the snapshot length for files, the
/// ring's size for live captures).
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_bufsize(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    match &*h.source.borrow() {
        Source::Live(l) => l.buffer_size(),
        _ => h.snapshot.get(),
    }
}

/// `pcap_list_datalinks`: the one link type a file or live capture has,
/// in a malloc'd array freed by [`pcap_free_datalinks`]; returns the
/// count.
///
/// # Safety
/// `p` as above; `dlts` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_list_datalinks(p: *mut pcap_t, dlts: *mut *mut c_int) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if !h.is_activated() {
        return not_activated(h);
    }
    if dlts.is_null() {
        return h.fail(PCAP_ERROR, "pcap_list_datalinks: NULL list pointer");
    }
    let offered = datalinks(h);
    // SAFETY: malloc of offered.len() ints; checked for NULL.
    let list = unsafe { libc::malloc(std::mem::size_of_val(offered.as_slice())) }.cast::<c_int>();
    if list.is_null() {
        return h.fail(PCAP_ERROR, "malloc: Cannot allocate memory");
    }
    // SAFETY: `list` holds offered.len() ints; `dlts` is writable
    // (checked non-NULL).
    unsafe {
        std::ptr::copy_nonoverlapping(offered.as_ptr(), list, offered.len());
        *dlts = list;
    }
    offered.len() as c_int
}

/// The link types a handle offers: a live device's list, else its own.
fn datalinks(h: &pcap_t) -> Vec<c_int> {
    match h.source.try_borrow().as_deref() {
        Ok(Source::Live(l)) => l.datalinks().to_vec(),
        _ => vec![h.dlt.get()],
    }
}

/// `pcap_free_datalinks`.
///
/// # Safety
/// `dlts` is NULL or from [`pcap_list_datalinks`].
#[no_mangle]
pub unsafe extern "C" fn pcap_free_datalinks(dlts: *mut c_int) {
    // SAFETY: malloc'd by pcap_list_datalinks (free(NULL) is a no-op).
    unsafe { libc::free(dlts.cast()) }
}

/// `pcap_set_datalink`: only the handle's own link type is accepted.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_datalink(p: *mut pcap_t, dlt: c_int) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if dlt == h.dlt.get() {
        return 0;
    }
    if h.is_activated() && datalinks(h).contains(&dlt) {
        // The frames stay as they are; filters compile for the new type.
        h.dlt.set(dlt);
        return 0;
    }
    let name = crate::names::pcap_datalink_val_to_name(dlt);
    // libpcap: the DLT's name, or "DLT n" for a value without one.
    // SAFETY: NULL or a static C string.
    let name = unsafe { crate::cstr(name) }
        .map_or_else(|| format!("DLT {dlt}"), |n| n.to_string_lossy().into());
    h.fail(
        PCAP_ERROR,
        &format!("{name} is not one of the DLTs supported by this device"),
    )
}

/// `pcap_file`: the `FILE *` a file handle reads, or NULL.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_file(p: *mut pcap_t) -> *mut libc::FILE {
    let h = handle_or!(p, std::ptr::null_mut());
    match &*h.source.borrow() {
        Source::Offline(o) => o.file(),
        _ => std::ptr::null_mut(),
    }
}

/// `pcap_fileno`: a live capture's socket, or -1.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_fileno(p: *mut pcap_t) -> c_int {
    let h = handle_or!(p, -1);
    match &*h.source.borrow() {
        // libpcap 1.10 gives -1 for a savefile (its descriptor is
        // pcap_get_selectable_fd's).
        Source::Offline(_) => -1,
        Source::Live(l) => l.fd(),
        _ => -1,
    }
}
