//! sluice as libpcap: a shared library with libpcap's C ABI, so programs
//! built against libpcap — Debian's tcpdump, dumpcap, ngrep, the pcapy,
//! pcapy-ng and pypcap Python bindings — run on sluice unmodified: its
//! compiler (libpcap master's meaning), its native code, its capture file
//! readers and its TPACKET_V3 live ring.
//!
//! The library is built as `libpcap.so` with Debian's soname
//! `libpcap.so.0.8`; `sluice exec -- CMD` runs a program with it in place
//! of the system's. It exports every function libpcap 1.10.3 exports on
//! Linux (96 symbols; the programs above import 64 of them):
//!
//! * handles: [`pcap_open_offline`], [`pcap_open_offline_with_tstamp_precision`],
//!   [`pcap_fopen_offline`], [`pcap_open_dead`], [`pcap_create`],
//!   [`pcap_activate`], [`pcap_open_live`], [`pcap_close`] and the setters;
//! * reading: [`pcap_loop`], [`pcap_dispatch`], [`pcap_next`],
//!   [`pcap_next_ex`], [`pcap_breakloop`];
//! * filters: [`pcap_compile`], [`pcap_setfilter`], [`pcap_offline_filter`],
//!   [`bpf_filter`], [`bpf_validate`], [`bpf_image`], [`bpf_dump`];
//! * writing: [`pcap_dump_open`], [`pcap_dump`], [`pcap_dump_close`], …;
//! * names, versions, errors and interfaces.
//!
//! The rule of the crate: C may pass anything. A NULL or closed handle,
//! a bad link type or a bad program gets an error code and a message,
//! never a crash: handles and dumpers are looked up in a registry before
//! use. Everything else is the safe Rust of the crates below; the `unsafe`
//! here is the C boundary itself, each block with a SAFETY comment.
//!
//! ```
//! use std::ffi::CStr;
//! let v = unsafe { CStr::from_ptr(pcap::pcap_lib_version()) };
//! assert!(v.to_str().unwrap().contains("sluice"));
//! ```

#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]
// libpcap's C ABI takes raw pointers: every entry point is `unsafe`, each
// dereference in a block with its SAFETY note.
#![allow(unsafe_code)]

mod attach;
mod dlt_table;
pub mod dump;
mod fastfilter;
pub mod filter;
pub mod guard;
pub mod handle;
pub mod live;
pub mod names;
pub mod nametoaddr;
pub mod offline;
pub mod read;
// libpcap's types and constants, named and valued as in <pcap/pcap.h>;
// their meaning is libpcap's documentation.
#[allow(missing_docs)]
pub mod types;
mod wording;

pub use dump::*;
pub use filter::*;
pub use handle::*;
pub use live::*;
pub use names::*;
pub use nametoaddr::*;
pub use offline::*;
pub use read::*;
pub use types::*;

use std::ffi::{c_char, CStr};

/// A C string argument: `None` for NULL.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string that outlives `'a`.
pub(crate) unsafe fn cstr<'a>(s: *const c_char) -> Option<&'a CStr> {
    if s.is_null() {
        None
    } else {
        // SAFETY: non-NULL, and the caller vouches for the terminator.
        Some(unsafe { CStr::from_ptr(s) })
    }
}

/// Writes `msg` into a caller's `PCAP_ERRBUF_SIZE` error buffer, if any.
///
/// # Safety
/// `errbuf` is NULL or points to at least `PCAP_ERRBUF_SIZE` writable bytes.
pub(crate) unsafe fn put_errbuf(errbuf: *mut c_char, msg: &str) {
    if errbuf.is_null() {
        return;
    }
    let n = msg.len().min(PCAP_ERRBUF_SIZE - 1);
    // SAFETY: the caller's buffer holds PCAP_ERRBUF_SIZE bytes; we write
    // at most that many, the last a NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(msg.as_ptr(), errbuf.cast::<u8>(), n);
        *errbuf.add(n) = 0;
    }
}

/// Whether `SLUICE_DEBUG` asks for the "running on sluice" line.
fn debug_enabled() -> bool {
    std::env::var_os("SLUICE_DEBUG").is_some_and(|v| !v.is_empty() && v != "0")
}

/// Says once, on stderr, that the program runs on sluice (with
/// `SLUICE_DEBUG=1`).
pub(crate) fn announce() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if debug_enabled() {
            let prog = std::env::args().next().unwrap_or_default();
            eprintln!(
                "sluice: {prog} is running on sluice's libpcap ({})",
                names::LIB_VERSION.to_str().unwrap_or_default()
            );
        }
    });
}
