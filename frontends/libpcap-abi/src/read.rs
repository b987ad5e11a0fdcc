//! Reading packets: `pcap_loop`, `pcap_dispatch`, `pcap_next`,
//! `pcap_next_ex` and `pcap_breakloop`, on files and live captures, with
//! the handle's filter (sluice's native code) applied in between.
//!
//! The return codes are libpcap's: `pcap_loop` gives 0 when the count is
//! reached or the file ends, -1 on error, -2 after `pcap_breakloop`;
//! `pcap_dispatch` gives the number of packets handed over; `pcap_next_ex`
//! gives 1, 0 on a live timeout, -2 at the end of a file.

use crate::handle::{handle_or, pcap_t, Source, BAD_HANDLE};
use crate::offline::file_error;
use crate::types::*;
use sluice_capture::Packet;
use sluice_filter::{Program, Runner};
use std::ffi::c_int;
use std::sync::atomic::Ordering;

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

/// One read operation: up to `cnt` accepted packets (`cnt` ≤ 0: all a
/// file has, or all a live capture has ready) handed to `each`. Returns
/// the count, or a negative libpcap code.
pub(crate) fn read_op(h: &pcap_t, cnt: c_int, each: &mut dyn FnMut(&pcap_pkthdr, &[u8])) -> c_int {
    let Ok(mut src) = h.source.try_borrow_mut() else {
        return h.fail(
            PCAP_ERROR,
            "a packet was read from inside a packet callback of the same handle",
        );
    };
    match &mut *src {
        Source::Offline(o) => {
            let filter = h.filter.borrow().clone();
            let nano = h.precision.get() == PCAP_TSTAMP_PRECISION_NANO;
            let file_nano = matches!(
                o.reader.format(),
                sluice_capture::CaptureFormat::Pcap { nanos: true, .. }
            );
            let mut n = 0;
            loop {
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
                let (pkt, times) = match o.reader.next_record() {
                    Ok(Some(p)) => p,
                    Ok(None) => return n,
                    Err(e) => return h.fail(PCAP_ERROR, &file_error(&e, Some(h.snapshot.get()))),
                };
                if pkt.linktype != o.linktype {
                    let msg = format!(
                        "an interface has a type {} different from the type of the first interface",
                        pkt.linktype
                    );
                    return h.fail(PCAP_ERROR, &msg);
                }
                if accepts(filter.as_deref(), &pkt) {
                    let hdr = match times {
                        Some(t) => pcap_record_header(&pkt, t, file_nano, nano),
                        None => header(&pkt, nano),
                    };
                    each(&hdr, pkt.data);
                    n += 1;
                }
            }
        }
        Source::Live(l) => l.read(h, cnt, each),
        Source::Dead => h.fail(
            PCAP_ERROR,
            "Packets can't be read from a pcap_open_dead pcap_t",
        ),
        Source::Created => h.fail(PCAP_ERROR_NOT_ACTIVATED, crate::types::NOT_ACTIVATED_MSG),
    }
}

/// Calls the C callback.
fn callback(cb: pcap_handler, user: *mut u8) -> impl FnMut(&pcap_pkthdr, &[u8]) {
    move |hdr, data| {
        if let Some(cb) = cb {
            // SAFETY: the program's own callback and user pointer, called
            // as libpcap calls it: header and data valid for the call.
            unsafe { cb(user, hdr, data.as_ptr()) }
        }
    }
}

/// `pcap_loop`: reads until `cnt` packets (≤ 0: forever, or to the end of
/// a file) have been handed to `cb`.
///
/// # Safety
/// `p` NULL or from this library; `cb` a valid callback (or NULL).
#[no_mangle]
pub unsafe extern "C" fn pcap_loop(
    p: *mut pcap_t,
    cnt: c_int,
    cb: pcap_handler,
    user: *mut u8,
) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    let mut each = callback(cb, user);
    let mut left = cnt;
    let live = matches!(h.source.try_borrow().as_deref(), Ok(Source::Live(_)));
    loop {
        let mut n = read_op(h, if cnt > 0 { left } else { -1 }, &mut each);
        while live && n == 0 && !h.nonblock.get() {
            n = read_op(h, if cnt > 0 { left } else { -1 }, &mut each);
        }
        if n <= 0 {
            return n;
        }
        if cnt > 0 {
            left -= n;
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
pub unsafe extern "C" fn pcap_dispatch(
    p: *mut pcap_t,
    cnt: c_int,
    cb: pcap_handler,
    user: *mut u8,
) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    read_op(h, cnt, &mut callback(cb, user))
}

/// `pcap_next_ex`: the next packet, kept in the handle until the next
/// call.
///
/// # Safety
/// `p` NULL or from this library; `hdr` and `data` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_next_ex(
    p: *mut pcap_t,
    hdr: *mut *mut pcap_pkthdr,
    data: *mut *const u8,
) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if hdr.is_null() || data.is_null() {
        return h.fail(PCAP_ERROR, "pcap_next_ex: NULL header or data pointer");
    }
    let Ok(mut buf) = h.next_data.try_borrow_mut() else {
        return h.fail(
            PCAP_ERROR,
            "pcap_next_ex called from inside a packet callback",
        );
    };
    let mut got = None;
    let n = read_op(h, 1, &mut |hd, d| {
        buf.clear();
        buf.extend_from_slice(d);
        got = Some(*hd);
    });
    let offline = matches!(*h.source.borrow(), Source::Offline(_));
    match (n, got) {
        (1, Some(hd)) => {
            // SAFETY: the handle's own header slot; the out-pointers were
            // checked non-NULL. The data stays in `next_data` until the
            // next call, as libpcap's buffer does.
            unsafe {
                *h.next_hdr.get() = hd;
                *hdr = h.next_hdr.get();
                *data = buf.as_ptr();
            }
            1
        }
        (0, _) if offline => PCAP_ERROR_BREAK,
        (n, _) => n.min(0),
    }
}

/// `pcap_next`: [`pcap_next_ex`] returning the data (NULL on timeout,
/// error or end of file) and filling `hdr`.
///
/// # Safety
/// `p` NULL or from this library; `hdr` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_next(p: *mut pcap_t, hdr: *mut pcap_pkthdr) -> *const u8 {
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
    // signal interrupted: then the pointer is trusted, as libpcap trusts it.
    if p.is_null() || crate::handle::known(p) == Some(false) {
        return;
    }
    // SAFETY: a registered handle (or, in a signal handler that could not
    // look, the one C opened); only an atomic is touched.
    unsafe { (*p).break_loop.store(true, Ordering::Release) };
}
