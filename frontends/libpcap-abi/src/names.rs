//! Names and numbers: link-layer types (and the mapping between the DLT
//! values programs see and the LINKTYPE values files hold), time-stamp
//! types, status codes, errno texts and the library's version.
//!
//! Every string handed to C here is static, or lives in a per-thread
//! buffer as libpcap's do (`pcap_statustostr` of an unknown code,
//! `pcap_strerror`, `pcap_datalink_val_to_description_or_dlt`).

use crate::dlt_table::DLTS;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr};

/// The libpcap release whose ABI and messages this library has.
pub const COMPATIBLE: &str = "1.10.3";

/// `pcap_lib_version()`'s text.
pub static LIB_VERSION: &CStr =
    c"libpcap version 1.10.3 (sluice 0.1.0: libpcap 1.10.3's ABI, libpcap master's filters)";

/// `pcap_version[]`, the version as a data symbol.
#[no_mangle]
pub static pcap_version: [u8; 7] = *b"1.10.3\0";

/// The DLT value of a file's LINKTYPE value (they differ on a few link
/// types, for historical reasons).
pub fn linktype_to_dlt(linktype: u32) -> c_int {
    match linktype {
        100 => 11, // ATM_RFC1483
        101 => 12, // RAW
        102 => 15, // SLIP_BSDOS
        103 => 16, // PPP_BSDOS
        106 => 19, // ATM_CLIP
        other => other as c_int,
    }
}

/// The LINKTYPE value written in files for a DLT value, or `None` for a
/// value with no LINKTYPE (libpcap refuses to write those).
pub fn dlt_to_linktype(dlt: c_int) -> Option<u32> {
    let lt = match dlt {
        0..=10 => dlt,
        11 => 100,
        12 => 101,
        15 => 102,
        16 => 103,
        19 => 106,
        32 | 50 | 51 | 99 => dlt,
        104..=304 => dlt,
        _ => return None,
    };
    Some(lt as u32)
}

thread_local! {
    static SCRATCH: RefCell<[u8; 128]> = const { RefCell::new([0; 128]) };
}

/// Puts `text` in this thread's scratch buffer and returns it for C; it
/// stays valid until the next call on this thread.
pub fn scratch(text: &str) -> *const c_char {
    SCRATCH.with(|b| {
        let mut b = b.borrow_mut();
        let n = text.len().min(b.len() - 1);
        b[..n].copy_from_slice(&text.as_bytes()[..n]);
        b[n] = 0;
        b.as_ptr().cast()
    })
}

/// `pcap_datalink_name_to_val`: a DLT name, `DLT_` prefix left off, in any
/// case; -1 when unknown.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pcap_datalink_name_to_val(name: *const c_char) -> c_int {
    crate::guard::entry(-1, move || {
        // SAFETY: the caller passes NULL or a C string.
        let Some(name) = (unsafe { crate::cstr(name) }) else {
            return -1;
        };
        DLTS.iter()
            .find(|(n, _, _)| n.to_bytes().eq_ignore_ascii_case(name.to_bytes()))
            .map_or(-1, |e| e.2)
    })
}

/// `pcap_datalink_val_to_name`: the name of a DLT value, or NULL.
#[no_mangle]
pub extern "C" fn pcap_datalink_val_to_name(dlt: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        DLTS.iter()
            .find(|e| e.2 == dlt)
            .map_or(std::ptr::null(), |e| e.0.as_ptr())
    })
}

/// `pcap_datalink_val_to_description`: the description of a DLT value,
/// or NULL.
#[no_mangle]
pub extern "C" fn pcap_datalink_val_to_description(dlt: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        DLTS.iter()
            .find(|e| e.2 == dlt)
            .map_or(std::ptr::null(), |e| e.1.as_ptr())
    })
}

/// `pcap_datalink_val_to_description_or_dlt`: the description, or
/// `DLT n`.
#[no_mangle]
pub extern "C" fn pcap_datalink_val_to_description_or_dlt(dlt: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        match DLTS.iter().find(|e| e.2 == dlt) {
            Some(e) => e.1.as_ptr(),
            None => scratch(&format!("DLT {dlt}")),
        }
    })
}

/// The time-stamp types: `(name, description)` by value.
const TSTAMP_TYPES: &[(&CStr, &CStr)] = &[
    (c"host", c"Host"),
    (c"host_lowprec", c"Host, low precision"),
    (c"host_hiprec", c"Host, high precision"),
    (c"adapter", c"Adapter"),
    (c"adapter_unsynced", c"Adapter, not synced with system time"),
    (
        c"host_hiprec_unsynced",
        c"Host, high precision, not synced with system time",
    ),
];

/// `pcap_tstamp_type_name_to_val`: -1 (`PCAP_ERROR`) when unknown.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn pcap_tstamp_type_name_to_val(name: *const c_char) -> c_int {
    crate::guard::entry(-1, move || {
        // SAFETY: the caller passes NULL or a C string.
        let Some(name) = (unsafe { crate::cstr(name) }) else {
            return -1;
        };
        TSTAMP_TYPES
            .iter()
            .position(|(n, _)| n.to_bytes().eq_ignore_ascii_case(name.to_bytes()))
            .map_or(-1, |i| i as c_int)
    })
}

/// `pcap_tstamp_type_val_to_name`: NULL when unknown.
#[no_mangle]
pub extern "C" fn pcap_tstamp_type_val_to_name(t: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        usize::try_from(t)
            .ok()
            .and_then(|i| TSTAMP_TYPES.get(i))
            .map_or(std::ptr::null(), |e| e.0.as_ptr())
    })
}

/// `pcap_tstamp_type_val_to_description`: NULL when unknown.
#[no_mangle]
pub extern "C" fn pcap_tstamp_type_val_to_description(t: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        usize::try_from(t)
            .ok()
            .and_then(|i| TSTAMP_TYPES.get(i))
            .map_or(std::ptr::null(), |e| e.1.as_ptr())
    })
}

/// `pcap_statustostr`: the text of a `PCAP_ERROR_*` / `PCAP_WARNING_*`
/// code.
#[no_mangle]
pub extern "C" fn pcap_statustostr(status: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || {
        let text: &CStr = match status {
            1 => c"Generic warning",
            2 => c"That device doesn't support promiscuous mode",
            3 => c"That type of time stamp is not supported by that device",
            -1 => c"Generic error",
            -2 => c"Loop terminated by pcap_breakloop",
            -3 => c"The pcap_t has not been activated",
            -4 => c"The setting can't be changed after the pcap_t is activated",
            -5 => c"No such device exists",
            -6 => c"That device doesn't support monitor mode",
            -7 => c"That operation is supported only in monitor mode",
            -8 => c"You don't have permission to perform this capture on that device",
            -9 => c"That device is not up",
            -10 => c"That device doesn't support setting the time stamp type",
            -11 => c"You don't have permission to capture in promiscuous mode on that device",
            -12 => c"That device doesn't support that time stamp precision",
            _ => return scratch(&format!("Unknown error: {status}")),
        };
        text.as_ptr()
    })
}

/// The C library's text of an `errno` value.
pub fn errno_text(errnum: c_int) -> String {
    std::io::Error::from_raw_os_error(errnum)
        .to_string()
        .split(" (os error")
        .next()
        .unwrap_or_default()
        .to_string()
}

/// `pcap_strerror`: `strerror`, in a per-thread buffer.
#[no_mangle]
pub extern "C" fn pcap_strerror(errnum: c_int) -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || scratch(&errno_text(errnum)))
}

/// `pcap_lib_version`: says it is sluice, and which libpcap it stands in
/// for.
#[no_mangle]
pub extern "C" fn pcap_lib_version() -> *const c_char {
    crate::guard::entry(std::ptr::null(), move || LIB_VERSION.as_ptr())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for (name, _, v) in DLTS {
            // SAFETY: a static C string.
            let got = unsafe { pcap_datalink_name_to_val(name.as_ptr()) };
            assert_eq!(DLTS.iter().find(|e| e.0 == *name).unwrap().2, got);
            assert!(!pcap_datalink_val_to_name(*v).is_null());
        }
        assert_eq!(linktype_to_dlt(101), 12);
        assert_eq!(dlt_to_linktype(12), Some(101));
        assert_eq!(dlt_to_linktype(400), None);
        assert_eq!(errno_text(2), "No such file or directory");
    }
}
