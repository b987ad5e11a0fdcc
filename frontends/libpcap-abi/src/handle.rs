//! The `pcap_t` handle: what every kind of handle (dead, offline, created,
//! live) holds, the registry that tells a live handle from a closed or
//! made-up pointer, and the functions that only read a handle.
//!
//! The rule: every entry point may be called at any time — from inside a
//! `pcap_loop` callback of the same handle, from another thread, after
//! `pcap_breakloop`, after `pcap_close` — and gets libpcap's answer or an
//! error, never a crash. So:
//!
//! * what accessors read (link type, snapshot length, the `FILE *`, the
//!   descriptor, …) sits in atomics, read without a lock;
//! * what a read changes (the file reader, the live ring) sits in a
//!   lock (`Lease`) held for one record at a time and never across the
//!   user's callback, so a callback may read, set a filter, take
//!   statistics or close the handle;
//! * C holds a pointer to an `Arc`'d handle; each call looks it up in the
//!   registry and keeps its own reference for the call, so a handle
//!   closed meanwhile (by the callback) stays valid memory until the call
//!   returns. A closed handle is kept, emptied, in a quarantine of the
//!   last [`QUARANTINE`] closes: its address is not reused meanwhile, so
//!   a second `pcap_close` of it, or any other call, is recognised as
//!   stale (libpcap would close whatever handle reused the address), and
//!   its last error message stays readable.

use crate::live::{Live, Settings};
use crate::offline::Offline;
use crate::types::*;
use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering,
};
use std::sync::{Arc, Mutex, MutexGuard};

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
    /// Closed: everything was released.
    Closed,
}

/// A handle's kind, readable without the source's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Dead = 0,
    Offline = 1,
    Created = 2,
    Live = 3,
    Closed = 4,
}

/// An `i32` shared between threads (a `Cell` that is `Sync`).
#[derive(Debug, Default)]
pub(crate) struct Int(AtomicI32);

impl Int {
    pub(crate) fn new(v: c_int) -> Int {
        Int(AtomicI32::new(v))
    }
    pub(crate) fn get(&self) -> c_int {
        self.0.load(Ordering::Acquire)
    }
    pub(crate) fn set(&self, v: c_int) {
        self.0.store(v, Ordering::Release)
    }
}

/// A `bool` shared between threads.
#[derive(Debug, Default)]
pub(crate) struct Flag(AtomicBool);

impl Flag {
    pub(crate) fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
    pub(crate) fn set(&self, v: bool) {
        self.0.store(v, Ordering::Release)
    }
}

/// Locks a mutex, whatever a panic elsewhere left in it (the data is
/// plain state, valid between any two statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A lock for what one thread uses at a time (a handle's source): taken
/// with one atomic operation, given back with a store, so that a read
/// pays little for it per packet. A thread that finds it taken waits
/// (spinning, then sleeping): it is held for one record at a time, or
/// while a read waits for the rest of a record on a pipe.
pub(crate) struct Lease<T> {
    busy: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, which one thread
// holds at a time (the `busy` flag, taken with Acquire, given back with
// Release).
unsafe impl<T: Send> Sync for Lease<T> {}

impl<T> Lease<T> {
    pub(crate) fn new(value: T) -> Lease<T> {
        Lease {
            busy: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, waiting while another thread holds it (never
    /// called by a thread that holds it: no read holds it across a
    /// callback).
    pub(crate) fn lock(&self) -> LeaseGuard<'_, T> {
        let mut tries = 0u32;
        while self
            .busy
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            tries = tries.saturating_add(1);
            if tries < 100 {
                std::hint::spin_loop();
            } else if tries < 200 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
        LeaseGuard { lease: self }
    }
}

/// The holder of a [`Lease`]; gives it back when dropped.
pub(crate) struct LeaseGuard<'a, T> {
    lease: &'a Lease<T>,
}

impl<T> std::ops::Deref for LeaseGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lease.
        unsafe { &*self.lease.value.get() }
    }
}

impl<T> std::ops::DerefMut for LeaseGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lease, so no other reference is.
        unsafe { &mut *self.lease.value.get() }
    }
}

impl<T> Drop for LeaseGuard<'_, T> {
    fn drop(&mut self) {
        self.lease.busy.store(false, Ordering::Release);
    }
}

/// libpcap's `pcap_t`; C only ever holds a pointer to it.
pub struct pcap_t {
    errbuf: UnsafeCell<[u8; PCAP_ERRBUF_SIZE]>,
    pub(crate) break_loop: AtomicBool,
    kind: AtomicU8,
    /// DLT value (not the file's LINKTYPE value).
    pub(crate) dlt: Int,
    /// The upper 16 bits of a pcap file's link-type field (FCS length
    /// bits), written back by `pcap_dump_open`.
    pub(crate) linktype_ext: AtomicU32,
    pub(crate) snapshot: Int,
    /// A file's read buffer size as libpcap reports it (`pcap_bufsize`).
    pub(crate) bufsize: Int,
    pub(crate) precision: Int,
    pub(crate) swapped: Flag,
    pub(crate) version: [Int; 2],
    pub(crate) nonblock: Flag,
    /// An offline handle's stream (`pcap_file`), else NULL.
    pub(crate) file: AtomicPtr<libc::FILE>,
    /// The descriptor `pcap_get_selectable_fd` gives, or -1.
    pub(crate) selectable: Int,
    /// A live capture's socket (`pcap_fileno`), or -1.
    pub(crate) socket: Int,
    pub(crate) source: Lease<Source>,
    pub(crate) settings: Mutex<Settings>,
    filter: Mutex<Option<Arc<sluice_filter::Program>>>,
    /// Counts `pcap_setfilter`s, so a read loop sees a new filter at the
    /// next packet without taking the lock for every one.
    filter_gen: AtomicU64,
    /// The packet `pcap_next`/`pcap_next_ex` hand out, valid to the next
    /// call.
    pub(crate) next_hdr: UnsafeCell<pcap_pkthdr>,
}

// SAFETY: everything is atomic or behind a lock, except the error buffer
// and pcap_next_ex's header, which C reads through pointers we hand out,
// as it reads libpcap's: a program that uses one handle from two threads
// at once races on them there too. They hold plain bytes, so a race gives
// a garbled message or header, never an invalid Rust value.
unsafe impl Sync for pcap_t {}
// SAFETY: as above; the FILE and ring inside may be used from any thread.
unsafe impl Send for pcap_t {}

/// The open handles, by the address C holds.
static HANDLES: Mutex<Option<HashMap<usize, Arc<pcap_t>>>> = Mutex::new(None);

/// The last closed handles, emptied, oldest first.
static CLOSED: Mutex<VecDeque<Arc<pcap_t>>> = Mutex::new(VecDeque::new());

/// How many closed handles keep their address (and last message).
pub const QUARANTINE: usize = 1024;

impl pcap_t {
    /// A new handle in the registry; C gets the pointer.
    pub(crate) fn register(
        source: Source,
        dlt: c_int,
        snapshot: c_int,
        precision: c_int,
    ) -> *mut pcap_t {
        crate::announce();
        let kind = match source {
            Source::Dead => Kind::Dead,
            Source::Offline(_) => Kind::Offline,
            Source::Created => Kind::Created,
            Source::Live(_) => Kind::Live,
            Source::Closed => Kind::Closed,
        };
        let h = Arc::new(pcap_t {
            errbuf: UnsafeCell::new([0; PCAP_ERRBUF_SIZE]),
            break_loop: AtomicBool::new(false),
            kind: AtomicU8::new(kind as u8),
            dlt: Int::new(dlt),
            linktype_ext: AtomicU32::new(0),
            snapshot: Int::new(snapshot),
            bufsize: Int::new(snapshot),
            precision: Int::new(precision),
            swapped: Flag::default(),
            version: [Int::new(2), Int::new(4)],
            nonblock: Flag::default(),
            file: AtomicPtr::new(std::ptr::null_mut()),
            selectable: Int::new(-1),
            socket: Int::new(-1),
            source: Lease::new(source),
            settings: Mutex::new(Settings::default()),
            filter: Mutex::new(None),
            filter_gen: AtomicU64::new(0),
            next_hdr: UnsafeCell::new(pcap_pkthdr {
                ts: libc::timeval {
                    tv_sec: 0,
                    tv_usec: 0,
                },
                caplen: 0,
                len: 0,
            }),
        });
        let p = Arc::as_ptr(&h).cast_mut();
        registry()
            .get_or_insert_with(HashMap::new)
            .insert(p as usize, h);
        p
    }

    /// The handle behind a C pointer, if it is one this library made and
    /// has not closed; the caller's reference keeps it alive.
    pub(crate) fn get(p: *mut pcap_t) -> Option<Arc<pcap_t>> {
        if p.is_null() {
            return None;
        }
        registry()
            .as_ref()
            .and_then(|s| s.get(&(p as usize)).cloned())
    }

    /// What the handle reads from.
    pub(crate) fn kind(&self) -> Kind {
        match self.kind.load(Ordering::Acquire) {
            0 => Kind::Dead,
            1 => Kind::Offline,
            2 => Kind::Created,
            3 => Kind::Live,
            _ => Kind::Closed,
        }
    }

    /// Replaces the source (activation, closing), keeping [`Self::kind`]
    /// in step; returns the old one.
    pub(crate) fn set_source(&self, source: Source) -> Source {
        let kind = match source {
            Source::Dead => Kind::Dead,
            Source::Offline(_) => Kind::Offline,
            Source::Created => Kind::Created,
            Source::Live(_) => Kind::Live,
            Source::Closed => Kind::Closed,
        };
        let mut src = self.source.lock();
        self.kind.store(kind as u8, Ordering::Release);
        std::mem::replace(&mut *src, source)
    }

    /// Sets the message `pcap_geterr` returns.
    pub(crate) fn set_err(&self, msg: &str) {
        // SAFETY: the buffer belongs to this handle; C reads it only
        // through the pointer pcap_geterr gave (see the Sync note).
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

    pub(crate) fn errbuf_ptr(&self) -> *mut c_char {
        self.errbuf.get().cast()
    }

    /// Whether `pcap_breakloop` was called; clears the request.
    pub(crate) fn take_break(&self) -> bool {
        self.break_loop.swap(false, Ordering::AcqRel)
    }

    pub(crate) fn is_activated(&self) -> bool {
        self.kind() != Kind::Created
    }

    /// The installed filter and its generation.
    pub(crate) fn filter(&self) -> (Option<Arc<sluice_filter::Program>>, u64) {
        let f = lock(&self.filter);
        (f.clone(), self.filter_gen.load(Ordering::Acquire))
    }

    /// The filter generation, to see whether [`Self::filter`] changed.
    pub(crate) fn filter_gen(&self) -> u64 {
        self.filter_gen.load(Ordering::Acquire)
    }

    /// Installs a filter for the packets read from now on.
    pub(crate) fn set_filter(&self, program: Option<Arc<sluice_filter::Program>>) {
        let mut f = lock(&self.filter);
        *f = program;
        self.filter_gen.fetch_add(1, Ordering::AcqRel);
    }
}

fn registry() -> MutexGuard<'static, Option<HashMap<usize, Arc<pcap_t>>>> {
    lock(&HANDLES)
}

/// Whether `p` is a registered handle; `None` when the registry stays
/// busy (a signal handler interrupted its own thread holding it: another
/// thread holds it only for a lookup, so a short wait finds it free).
pub(crate) fn known(p: *mut pcap_t) -> Option<bool> {
    let found = |s: &Option<HashMap<usize, Arc<pcap_t>>>| {
        s.as_ref().is_some_and(|s| s.contains_key(&(p as usize)))
    };
    for _ in 0..100_000 {
        match HANDLES.try_lock() {
            Ok(s) => return Some(found(&s)),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(found(&e.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => std::hint::spin_loop(),
        }
    }
    None
}

/// The error every function gives for a NULL or unknown handle.
pub(crate) const BAD_HANDLE: c_int = PCAP_ERROR;

/// `pcap_close`: closes the file or capture and frees the handle. A NULL,
/// unknown or already closed pointer is ignored. From inside a callback of
/// the same handle, the loop then returns -1 after the callback.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_close(p: *mut pcap_t) {
    crate::guard::entry((), || {
        if p.is_null() {
            return;
        }
        let Some(h) = registry().as_mut().and_then(|s| s.remove(&(p as usize))) else {
            return;
        };
        // Files are closed, rings unmapped and sockets closed here; a
        // loop running on the handle finds it closed after its callback.
        drop(h.set_source(Source::Closed));
        h.set_filter(None);
        let mut closed = lock(&CLOSED);
        if closed.len() >= QUARANTINE {
            closed.pop_front();
        }
        closed.push_back(h);
    })
}

/// `pcap_geterr`: the handle's last error message ("" for a NULL or
/// unknown handle). A recently closed handle's last message stays
/// readable: pcapy's `compile` reads it right after `pcap_close`, which
/// works on libpcap only by the luck of freed memory.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_geterr(p: *mut pcap_t) -> *mut c_char {
    crate::guard::entry(std::ptr::null_mut(), || {
        if let Some(h) = pcap_t::get(p) {
            return h.errbuf_ptr();
        }
        let closed = lock(&CLOSED);
        if let Some(h) = closed
            .iter()
            .rev()
            .find(|h| Arc::as_ptr(h) == p.cast_const())
        {
            // A closed handle's last message, where it had one.
            // SAFETY: the handle's own buffer.
            if unsafe { *h.errbuf.get() }[0] != 0 {
                return h.errbuf_ptr();
            }
        }
        crate::names::scratch("not a pcap_t of this library").cast_mut()
    })
}

/// `pcap_perror`: prints `prefix: message` on stderr.
///
/// # Safety
/// `p` as for [`pcap_geterr`]; `prefix` NULL or a C string.
#[no_mangle]
pub unsafe extern "C" fn pcap_perror(p: *mut pcap_t, prefix: *const c_char) {
    crate::guard::entry((), move || {
        // SAFETY: as documented above.
        let (msg, prefix) = unsafe { (crate::cstr(pcap_geterr(p)), crate::cstr(prefix)) };
        let msg = msg.map(|m| m.to_string_lossy()).unwrap_or_default();
        match prefix {
            Some(pre) => eprintln!("{}: {msg}", pre.to_string_lossy()),
            None => eprintln!("{msg}"),
        }
    })
}

macro_rules! handle_or {
    ($p:expr, $bad:expr) => {
        match $crate::handle::pcap_t::get($p) {
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
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        h.dlt.get()
    })
}

/// `pcap_datalink_ext`: the extension bits of a pcap file's link-type
/// field (its FCS length), 0 for other handles.
///
/// # Safety
/// As [`pcap_datalink`].
#[no_mangle]
pub unsafe extern "C" fn pcap_datalink_ext(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        h.linktype_ext.load(Ordering::Acquire) as c_int
    })
}

/// `pcap_snapshot`: the snapshot length.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_snapshot(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        h.snapshot.get()
    })
}

/// `pcap_is_swapped`: whether the file's byte order differs from ours.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_is_swapped(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        c_int::from(h.swapped.get())
    })
}

/// `pcap_major_version`: the file's major version (2 for pcap).
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_major_version(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        h.version[0].get()
    })
}

/// `pcap_minor_version`: the file's minor version.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_minor_version(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        h.version[1].get()
    })
}

/// `pcap_get_tstamp_precision`.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_get_tstamp_precision(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || handle_or!(p, BAD_HANDLE).precision.get())
}

/// `pcap_bufsize`: the buffer size (the snapshot length for files, the
/// ring's size for live captures).
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_bufsize(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        let size = match &*h.source.lock() {
            Source::Live(l) => l.buffer_size(),
            Source::Offline(_) => h.bufsize.get(),
            _ => h.snapshot.get(),
        };
        size
    })
}

/// `pcap_list_datalinks`: the one link type a file or live capture has,
/// in a malloc'd array freed by [`pcap_free_datalinks`]; returns the
/// count.
///
/// # Safety
/// `p` as above; `dlts` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_list_datalinks(p: *mut pcap_t, dlts: *mut *mut c_int) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if !h.is_activated() {
            return not_activated(&h);
        }
        if dlts.is_null() {
            return h.fail(PCAP_ERROR, "pcap_list_datalinks: NULL list pointer");
        }
        let offered = datalinks(&h);
        // SAFETY: malloc of offered.len() ints; checked for NULL.
        let list =
            unsafe { libc::malloc(std::mem::size_of_val(offered.as_slice())) }.cast::<c_int>();
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
    })
}

/// The link types a handle offers: a live device's list, else its own.
fn datalinks(h: &pcap_t) -> Vec<c_int> {
    let offered = match &*h.source.lock() {
        Source::Live(l) => l.datalinks().to_vec(),
        _ => vec![h.dlt.get()],
    };
    offered
}

/// `pcap_free_datalinks`.
///
/// # Safety
/// `dlts` is NULL or from [`pcap_list_datalinks`].
#[no_mangle]
pub unsafe extern "C" fn pcap_free_datalinks(dlts: *mut c_int) {
    crate::guard::entry((), move || {
        // SAFETY: malloc'd by pcap_list_datalinks (free(NULL) is a no-op).
        unsafe { libc::free(dlts.cast()) }
    })
}

/// `pcap_set_datalink`: only the handle's own link type is accepted.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_datalink(p: *mut pcap_t, dlt: c_int) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if dlt == h.dlt.get() {
            return 0;
        }
        if h.is_activated() && datalinks(&h).contains(&dlt) {
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
    })
}

/// `pcap_file`: the `FILE *` a file handle reads, or NULL.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_file(p: *mut pcap_t) -> *mut libc::FILE {
    crate::guard::entry(std::ptr::null_mut(), move || {
        let h = handle_or!(p, std::ptr::null_mut());
        match h.kind() {
            Kind::Offline => h.file.load(Ordering::Acquire),
            _ => std::ptr::null_mut(),
        }
    })
}

/// `pcap_fileno`: a live capture's socket, or -1.
///
/// # Safety
/// `p` is NULL or a pointer C got from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_fileno(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, -1);
        // libpcap 1.10 gives -1 for a savefile (its descriptor is
        // pcap_get_selectable_fd's).
        h.socket.get()
    })
}
