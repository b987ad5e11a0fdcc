//! Reading packets: `pcap_loop`, `pcap_dispatch`, `pcap_next`,
//! `pcap_next_ex` and `pcap_breakloop`, on files and live captures, with
//! the handle's filter (sluice's native code) applied in between.
//!
//! The return codes are libpcap's: `pcap_loop` gives 0 when the count is
//! reached or the file ends, -1 on error, -2 after `pcap_breakloop`;
//! `pcap_dispatch` gives the number of packets handed over; `pcap_next_ex`
//! gives 1, 0 on a live timeout, -2 at the end of a file.

use crate::guard;
use crate::handle::{lock, pcap_t, Kind, Source, BAD_HANDLE};
use crate::offline::{file_error, grown_bufsize, Offline};
use crate::types::*;
use sluice_capture::Packet;
use sluice_filter::{Program, Runner};
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The C header of a packet, time stamp in the handle's precision.
pub(crate) fn header(pkt: &Packet<'_>, nano: bool) -> pcap_pkthdr {
    let frac = if nano {
        pkt.ts_nsec
    } else {
        pkt.ts_nsec / 1000
    };
    pcap_pkthdr {
        ts: libc::timeval {
            tv_sec: pkt.ts_sec as libc::time_t,
            tv_usec: frac as libc::suseconds_t,
        },
        caplen: pkt.caplen,
        len: pkt.wirelen,
    }
}

/// The C header of a pcap file's record as libpcap makes it: the
/// record's two time-stamp fields (`times`, from the file, in its unit)
/// read as signed 32-bit numbers and only scaled to the handle's
/// precision, so a time before 1970 is negative and an out-of-range
/// fraction is passed on unchanged.
pub(crate) fn pcap_record_header(
    pkt: &Packet<'_>,
    times: (u32, u32),
    file_nano: bool,
    nano: bool,
) -> pcap_pkthdr {
    let frac = i64::from(times.1 as i32);
    let frac = match (file_nano, nano) {
        (false, true) => frac * 1000,
        (true, false) => frac / 1000,
        _ => frac,
    };
    pcap_pkthdr {
        ts: libc::timeval {
            tv_sec: libc::time_t::from(times.0 as i32),
            tv_usec: frac as libc::suseconds_t,
        },
        caplen: pkt.caplen,
        len: pkt.wirelen,
    }
}

/// Whether the handle's filter (if any) accepts the packet.
#[inline]
pub(crate) fn accepts(filter: Option<&Program>, pkt: &Packet<'_>) -> bool {
    filter.map_or(true, |f| {
        f.run_with(Runner::host_default(), pkt.data, pkt.wirelen) != 0
    })
}

/// A read loop's copy of the handle's filter, renewed when
/// `pcap_setfilter` (from the callback, or another thread) changes it.
pub(crate) struct FilterCache {
    program: Option<Arc<Program>>,
    generation: u64,
}

impl FilterCache {
    fn new(h: &pcap_t) -> FilterCache {
        let (program, generation) = h.filter();
        FilterCache {
            program,
            generation,
        }
    }

    /// The filter now in force.
    #[inline]
    pub(crate) fn current(&mut self, h: &pcap_t) -> Option<&Program> {
        if h.filter_gen() != self.generation {
            *self = FilterCache::new(h);
        }
        self.program.as_deref()
    }
}

/// What one step of a read gives.
pub(crate) enum Step {
    /// An accepted packet: its header, and its bytes, which stay where
    /// they are until the handle's next read or close.
    Packet(pcap_pkthdr, *const u8),
    /// The end of a file (for now: a stream may grow).
    End,
    /// `pcap_breakloop` was seen between records.
    Break,
    /// A stream with nothing buffered: wait for this descriptor.
    Wait(c_int),
    /// A live capture with nothing ready: wait for this descriptor.
    Idle(c_int),
    /// An error (the handle's message is set): this code.
    Fail(c_int),
    /// The step panicked (a bug; the panic hook printed it).
    Panicked,
}

/// The next packet a file gives that the filter accepts. `ready`: the
/// stream was just seen readable, so read even with nothing buffered.
fn offline_step(h: &pcap_t, o: &mut Offline, filter: &mut FilterCache, mut ready: bool) -> Step {
    let nano = h.precision.get() == PCAP_TSTAMP_PRECISION_NANO;
    let pcapng = matches!(
        o.reader.format(),
        sluice_capture::CaptureFormat::PcapNg { .. }
    );
    loop {
        if !ready {
            if let Some(fd) = o.must_wait() {
                return Step::Wait(fd);
            }
        }
        ready = false;
        let (pkt, times) = match o.reader.next_record() {
            Ok(Some(p)) => p,
            Ok(None) => return Step::End,
            Err(e) => {
                return Step::Fail(h.fail(PCAP_ERROR, &file_error(&e, Some(h.snapshot.get()))))
            }
        };
        if pkt.linktype != o.linktype {
            let msg = format!(
                "an interface has a type {} different from the type of the first interface",
                pkt.linktype
            );
            return Step::Fail(h.fail(PCAP_ERROR, &msg));
        }
        let bufsize = h.bufsize.get();
        if pkt.caplen as i64 > i64::from(bufsize) {
            h.bufsize
                .set(grown_bufsize(pcapng, bufsize, pkt.caplen, h.snapshot.get()));
        }
        if accepts(filter.current(h), &pkt) {
            let hdr = match times {
                Some(t) => pcap_record_header(&pkt, t, o.file_nano, nano),
                None => header(&pkt, nano),
            };
            return Step::Packet(hdr, pkt.data.as_ptr());
        }
        if h.break_loop.load(Ordering::Acquire) {
            return Step::Break;
        }
    }
}

/// One step of a read: the next accepted packet, taken with the
/// handle's source locked, which is released before the packet is
/// handed over. Runs inside [`guard::entry`] (live) or [`guard::pure`]
/// (files, whose reads guard themselves).
fn step(h: &pcap_t, filter: &mut FilterCache, ready: bool) -> Step {
    let mut src = h.source.lock();
    match &mut *src {
        Source::Offline(o) => offline_step(h, o, filter, ready),
        Source::Live(l) => {
            let nano = h.precision.get() == PCAP_TSTAMP_PRECISION_NANO;
            match l.take_one(filter.current(h), nano) {
                Ok(Some((hdr, data))) => Step::Packet(hdr, data),
                Ok(None) => Step::Idle(l.fd()),
                Err(msg) => Step::Fail(h.fail(PCAP_ERROR, &msg)),
            }
        }
        Source::Dead => Step::Fail(h.fail(
            PCAP_ERROR,
            "Packets can't be read from a pcap_open_dead pcap_t",
        )),
        Source::Created => {
            Step::Fail(h.fail(PCAP_ERROR_NOT_ACTIVATED, crate::types::NOT_ACTIVATED_MSG))
        }
        Source::Closed => Step::Fail(h.fail(PCAP_ERROR, CLOSED_MSG)),
    }
}

/// The error of a read on a handle closed meanwhile (by its callback).
const CLOSED_MSG: &str = "the pcap_t was closed while it was being read";

/// How long one live read waits for packets at most, so that
/// `pcap_breakloop` from another thread is seen.
const SLICE_MS: c_int = 100;

/// One read operation (libpcap's `read_op`): up to `cnt` accepted packets
/// (`cnt` ≤ 0: all a file has, or all a live capture has ready) handed
/// to `each`. Returns the count, or a negative libpcap code.
///
/// Nothing of the handle is borrowed while `each` runs, so the callback
/// may call anything on the handle, close it included. `each` and the
/// waits may be cancelled (see [`crate::guard`]): the unwinding leaves
/// the handle between two packets.
pub(crate) fn read_op(
    h: &pcap_t,
    cnt: c_int,
    each: &mut dyn FnMut(&pcap_pkthdr, *const u8),
) -> c_int {
    let mut filter = guard::pure(None, || Some(FilterCache::new(h)));
    let Some(filter) = filter.as_mut() else {
        return PCAP_ERROR;
    };
    let mut n: c_int = 0;
    let mut ready = false;
    let mut waited = false;
    loop {
        guard::testcancel();
        if h.break_loop.load(Ordering::Acquire) {
            if n == 0 {
                h.take_break();
                return PCAP_ERROR_BREAK;
            }
            return n;
        }
        if cnt > 0 && n >= cnt {
            return n;
        }
        // A file's step calls no cancellation point outside
        // guard::quiet; a live one may (the ring's poll).
        let got = if h.kind() == Kind::Live {
            guard::entry(Step::Panicked, || step(h, filter, ready))
        } else {
            guard::pure(Step::Panicked, || step(h, filter, ready))
        };
        ready = false;
        match got {
            Step::Packet(hdr, data) => {
                each(&hdr, data);
                n = n.saturating_add(1);
                if h.kind() == Kind::Closed {
                    return h.fail(PCAP_ERROR, CLOSED_MSG);
                }
            }
            Step::End => return n,
            Step::Break => continue,
            Step::Wait(fd) => ready = guard::wait_readable(fd, SLICE_MS),
            Step::Idle(fd) => {
                if n > 0 || waited || h.nonblock.get() {
                    return n;
                }
                waited = true;
                let ms = guard::pure(SLICE_MS, || live_wait_ms(h));
                guard::wait_readable(fd, ms);
            }
            Step::Panicked => {
                return h.fail(
                    PCAP_ERROR,
                    "internal error in sluice's libpcap (see standard error)",
                )
            }
            Step::Fail(code) => return code,
        }
    }
}

/// How long a live read waits: the handle's time-out, at most a slice.
fn live_wait_ms(h: &pcap_t) -> c_int {
    let ms = lock(&h.settings).timeout_ms();
    if ms <= 0 {
        SLICE_MS
    } else {
        ms.min(SLICE_MS)
    }
}

/// Calls the C callback.
fn callback(cb: pcap_handler, user: *mut u8) -> impl FnMut(&pcap_pkthdr, *const u8) {
    move |hdr, data| {
        if let Some(cb) = cb {
            // SAFETY: the program's own callback and user pointer, called
            // as libpcap calls it: header and data valid for the call. It
            // may unwind (thread cancellation), which is declared.
            unsafe { cb(user, hdr, data) }
        }
    }
}

/// `pcap_loop`: reads until `cnt` packets (≤ 0: forever, or to the end of
/// a file) have been handed to `cb`.
///
/// # Safety
/// `p` NULL or from this library; `cb` a valid callback (or NULL).
#[no_mangle]
pub unsafe extern "C-unwind" fn pcap_loop(
    p: *mut pcap_t,
    cnt: c_int,
    cb: pcap_handler,
    user: *mut u8,
) -> c_int {
    let Some(h) = guard::pure(None, || pcap_t::get(p)) else {
        return BAD_HANDLE;
    };
    let mut each = callback(cb, user);
    let mut left = cnt;
    let live = h.kind() == Kind::Live;
    loop {
        let mut n = read_op(&h, if cnt > 0 { left } else { -1 }, &mut each);
        while live && n == 0 && !h.nonblock.get() {
            n = read_op(&h, if cnt > 0 { left } else { -1 }, &mut each);
        }
        if n <= 0 {
            return n;
        }
        if cnt > 0 {
            left = left.saturating_sub(n);
            if left <= 0 {
                return 0;
            }
        }
    }
}

/// `pcap_dispatch`: one read operation of up to `cnt` packets.
///
/// # Safety
/// As [`pcap_loop`].
#[no_mangle]
pub unsafe extern "C-unwind" fn pcap_dispatch(
    p: *mut pcap_t,
    cnt: c_int,
    cb: pcap_handler,
    user: *mut u8,
) -> c_int {
    let Some(h) = guard::pure(None, || pcap_t::get(p)) else {
        return BAD_HANDLE;
    };
    read_op(&h, cnt, &mut callback(cb, user))
}

/// `pcap_next_ex`: the next packet; the header is kept in the handle and
/// the bytes where the read left them, both until the next read.
///
/// # Safety
/// `p` NULL or from this library; `hdr` and `data` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn pcap_next_ex(
    p: *mut pcap_t,
    hdr: *mut *mut pcap_pkthdr,
    data: *mut *const u8,
) -> c_int {
    let Some(h) = guard::pure(None, || pcap_t::get(p)) else {
        return BAD_HANDLE;
    };
    if hdr.is_null() || data.is_null() {
        return h.fail(PCAP_ERROR, "pcap_next_ex: NULL header or data pointer");
    }
    let mut got = None;
    let n = read_op(&h, 1, &mut |hd, d| got = Some((*hd, d)));
    match (n, got) {
        (1, Some((hd, d))) => {
            // SAFETY: the handle's own header slot; the out-pointers were
            // checked non-NULL. The data stays where the read left it
            // until the next read, as libpcap's buffer does.
            unsafe {
                *h.next_hdr.get() = hd;
                *hdr = h.next_hdr.get();
                *data = d;
            }
            1
        }
        (0, _) if h.kind() == Kind::Offline => PCAP_ERROR_BREAK,
        (n, _) => n.min(0),
    }
}

/// `pcap_next`: [`pcap_next_ex`] returning the data (NULL on timeout,
/// error or end of file) and filling `hdr`.
///
/// # Safety
/// `p` NULL or from this library; `hdr` NULL or writable.
#[no_mangle]
pub unsafe extern "C-unwind" fn pcap_next(p: *mut pcap_t, hdr: *mut pcap_pkthdr) -> *const u8 {
    let mut hp: *mut pcap_pkthdr = std::ptr::null_mut();
    let mut data: *const u8 = std::ptr::null();
    // SAFETY: local out-pointers.
    if unsafe { pcap_next_ex(p, &mut hp, &mut data) } != 1 || hdr.is_null() {
        return std::ptr::null();
    }
    // SAFETY: hp points at the handle's header slot; hdr is writable.
    unsafe { *hdr = *hp };
    data
}

/// `pcap_breakloop`: makes the running (or next) `pcap_loop` or
/// `pcap_dispatch` return -2. Safe to call from a signal handler.
///
/// # Safety
/// `p` NULL or from this library.
#[no_mangle]
pub unsafe extern "C" fn pcap_breakloop(p: *mut pcap_t) {
    // From a signal handler the registry may be locked by the thread the
    // signal interrupted: then the pointer is trusted, as libpcap trusts
    // it (a closed handle's memory stays valid in quarantine).
    if p.is_null() || crate::handle::known(p) == Some(false) {
        return;
    }
    // SAFETY: a registered handle (or, in a signal handler that could not
    // look, the one C opened); only an atomic is touched.
    unsafe { (*p).break_loop.store(true, Ordering::Release) };
}
