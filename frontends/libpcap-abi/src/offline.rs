//! Capture files: `pcap_open_offline` and its kin read pcap and pcapng
//! through sluice's reader, from a `FILE *` the handle owns (so
//! `pcap_file` and `pcap_fileno` give what libpcap gives), and
//! `pcap_open_dead` makes a handle that only compiles and writes.
//!
//! As libpcap: the link type and snapshot length are known when the open
//! returns (a pcapng file is read up to its first interface description
//! block, and refused without one); a later pcapng interface of another
//! link type is an error when its first packet is read; errors read as
//! libpcap's, since tcpdump prints them.

use crate::handle::{pcap_t, Source};
use crate::names::{errno_text, linktype_to_dlt};
use crate::types::*;
use sluice_capture::{
    max_snaplen_for_linktype, CaptureError, CaptureFormat, CaptureReader, ErrorKind,
};
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint};
use std::io::{self, Read};
use std::rc::Rc;

/// A `FILE *` as a byte reader, keeping the first 24 bytes (a pcap
/// file's header, whose link-type field has bits the reader drops).
pub(crate) struct CFile {
    file: *mut libc::FILE,
    head: Rc<RefCell<Vec<u8>>>,
}

impl Read for CFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the FILE is open for as long as the Offline owning it.
        let n = unsafe { libc::fread(buf.as_mut_ptr().cast(), 1, buf.len(), self.file) };
        // SAFETY: as above.
        if n == 0 && !buf.is_empty() && unsafe { libc::ferror(self.file) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let mut head = self.head.borrow_mut();
        let keep = (24 - head.len().min(24)).min(n);
        head.extend_from_slice(&buf[..keep]);
        Ok(n)
    }
}

/// The upper 16 bits of a pcap header's link-type field.
fn linktype_ext(head: &[u8], big_endian: bool) -> u32 {
    let Some(b) = head.get(20..24) else {
        return 0;
    };
    let b = [b[0], b[1], b[2], b[3]];
    let v = if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    };
    v & 0xffff_0000
}

/// An open capture file.
pub(crate) struct Offline {
    file: *mut libc::FILE,
    pub(crate) reader: CaptureReader<CFile>,
    /// The LINKTYPE of the first interface; packets of others are refused.
    pub(crate) linktype: u16,
}

impl Offline {
    pub(crate) fn file(&self) -> *mut libc::FILE {
        self.file
    }
}

impl Drop for Offline {
    fn drop(&mut self) {
        // SAFETY: the FILE is ours (opened, or handed over by
        // pcap_fopen_offline) and closed only here.
        unsafe { libc::fclose(self.file) };
    }
}

/// libpcap's wording of a capture-file error.
pub(crate) fn file_error(e: &CaptureError, snapshot: Option<c_int>) -> String {
    match e.kind() {
        ErrorKind::Io(io) => format!(
            "error reading dump file: {}",
            errno_text(io.raw_os_error().unwrap_or(libc::EIO))
        ),
        ErrorKind::BadMagic(_) => "unknown file format".into(),
        ErrorKind::Truncated { what, have, need } => match *what {
            "file magic number" => format!(
                "truncated dump file; tried to read {need} file header bytes, only got {have}"
            ),
            "pcap file header" => format!(
                "truncated dump file; tried to read {need} file header bytes, only got {}",
                have.saturating_sub(4)
            ),
            "packet record header" => {
                format!("truncated dump file; tried to read {need} header bytes, only got {have}")
            }
            "packet record" => {
                let hl = if need - have > 0 { 16 } else { 0 };
                format!(
                    "truncated dump file; tried to read {} captured bytes, only got {}",
                    need.saturating_sub(hl),
                    have.saturating_sub(hl)
                )
            }
            // libpcap reads a section header's first 12 bytes, then the
            // rest; any other block's 8-byte header, then the rest.
            "block header" => {
                format!("truncated pcapng dump file; tried to read {need} bytes, only got {have}")
            }
            what => {
                let read = if what == "section header block" {
                    12
                } else {
                    8
                };
                format!(
                    "truncated pcapng dump file; tried to read {} bytes, only got {}",
                    need.saturating_sub(read),
                    have.saturating_sub(read)
                )
            }
        },
        ErrorKind::BadBlockLength {
            block_type: 0x0a0d_0d0a,
            len,
            ..
        } if *len < 28 => format!(
            "Section Header Block in pcapng dump file has invalid length 28 < _{len}_ < 1048576 (BT_SHB_INSANE_MAX)"
        ),
        ErrorKind::ArchaicVersion { .. } => "archaic pcap savefile format".into(),
        ErrorKind::UnsupportedVersion {
            format,
            major,
            minor,
        } => {
            format!("unsupported {format} savefile version {major}.{minor}")
        }
        // libpcap 1.10 names the file's snapshot length here.
        ErrorKind::CaplenTooLarge { caplen, max } => match snapshot {
            Some(s) => {
                format!("invalid packet capture length {caplen}, bigger than snaplen of {s}")
            }
            None => format!("invalid packet capture length {caplen}, bigger than maximum of {max}"),
        },
        _ => e.kind().to_string(),
    }
}

/// libpcap's snapshot length of a file: zero (or beyond `INT_MAX`)
/// becomes the link type's maximum.
fn adjust_snapshot(linktype: u16, snaplen: u32) -> c_int {
    // libpcap 1.10 keeps any value up to INT_MAX.
    if snaplen == 0 || snaplen > i32::MAX as u32 {
        max_snaplen_for_linktype(linktype) as c_int
    } else {
        snaplen as c_int
    }
}

/// Opens a handle on an open `FILE *` (which it then owns, even on error).
fn open_file(
    file: *mut libc::FILE,
    name: &str,
    precision: c_int,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    let fail = |msg: &str| {
        // SAFETY: errbuf is the caller's PCAP_ERRBUF_SIZE buffer or NULL.
        unsafe { crate::put_errbuf(errbuf, msg) };
        std::ptr::null_mut()
    };
    if precision != PCAP_TSTAMP_PRECISION_MICRO && precision != PCAP_TSTAMP_PRECISION_NANO {
        // SAFETY: ours to close.
        unsafe { libc::fclose(file) };
        return fail(&format!("unknown time stamp resolution {precision}"));
    }
    let head = Rc::new(RefCell::new(Vec::new()));
    let input = CFile {
        file,
        head: Rc::clone(&head),
    };
    let opened = CaptureReader::from_reader(input, name).and_then(|mut r| {
        let first = r.read_interface()?;
        Ok((r, first))
    });
    let (reader, first) = match opened {
        Ok(x) => x,
        Err(e) => {
            // SAFETY: the reader is gone; the FILE is ours to close.
            unsafe { libc::fclose(file) };
            return fail(&file_error(&e, None));
        }
    };
    let Some(first) = first else {
        // SAFETY: as above.
        unsafe { libc::fclose(file) };
        return fail("the capture file has no Interface Description Blocks");
    };
    let format = reader.format();
    let (swapped, version, ext) = match format {
        CaptureFormat::Pcap { big_endian, .. } => (
            big_endian != cfg!(target_endian = "big"),
            (2, 4),
            linktype_ext(&head.borrow(), big_endian),
        ),
        CaptureFormat::PcapNg { big_endian, .. } => {
            (big_endian != cfg!(target_endian = "big"), (1, 0), 0)
        }
    };
    let offline = Offline {
        file,
        reader,
        linktype: first.linktype,
    };
    let dlt = linktype_to_dlt(u32::from(first.linktype));
    let mut snapshot = adjust_snapshot(first.linktype, first.snaplen);
    // The modified format of some old Linux tcpdumps wrote Ethernet
    // snapshot lengths 14 bytes short; libpcap adds them back.
    let magic = head.borrow().get(..4).map(|m| [m[0], m[1], m[2], m[3]]);
    let kuznetzov = magic.is_some_and(|m| {
        u32::from_le_bytes(m) == 0xa1b2_cd34 || u32::from_be_bytes(m) == 0xa1b2_cd34
    });
    if kuznetzov && dlt == 1 {
        snapshot = snapshot.saturating_add(14);
    }
    let p = pcap_t::register(Source::Offline(Box::new(offline)), dlt, snapshot, precision);
    // SAFETY: just registered.
    let h = unsafe { &*p };
    h.swapped.set(swapped);
    h.version.set(version);
    h.linktype_ext.set(ext);
    p
}

/// `pcap_open_offline_with_tstamp_precision`: opens a pcap or pcapng file
/// (`-` is the standard input).
///
/// # Safety
/// `fname` NULL or a C string; `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_open_offline_with_tstamp_precision(
    fname: *const c_char,
    precision: c_uint,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    // SAFETY: as documented.
    let Some(name) = (unsafe { crate::cstr(fname) }) else {
        // SAFETY: as documented.
        unsafe { crate::put_errbuf(errbuf, "A null pointer was supplied as the file name") };
        return std::ptr::null_mut();
    };
    let file = if name.to_bytes() == b"-" {
        // SAFETY: standard input's descriptor, duplicated so that closing
        // the handle leaves fd 0 open for the program.
        unsafe { libc::fdopen(libc::dup(0), c"rb".as_ptr()) }
    } else {
        // SAFETY: a valid C string and mode.
        unsafe { libc::fopen(name.as_ptr(), c"rb".as_ptr()) }
    };
    let shown = name.to_string_lossy();
    if file.is_null() {
        let err = io::Error::last_os_error();
        let msg = format!(
            "{shown}: {}",
            errno_text(err.raw_os_error().unwrap_or(libc::EIO))
        );
        // SAFETY: as documented.
        unsafe { crate::put_errbuf(errbuf, &msg) };
        return std::ptr::null_mut();
    }
    open_file(file, &shown, precision as c_int, errbuf)
}

/// `pcap_open_offline`: as [`pcap_open_offline_with_tstamp_precision`]
/// with microseconds.
///
/// # Safety
/// As [`pcap_open_offline_with_tstamp_precision`].
#[no_mangle]
pub unsafe extern "C" fn pcap_open_offline(
    fname: *const c_char,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    // SAFETY: as documented.
    unsafe {
        pcap_open_offline_with_tstamp_precision(
            fname,
            PCAP_TSTAMP_PRECISION_MICRO as c_uint,
            errbuf,
        )
    }
}

/// `pcap_fopen_offline_with_tstamp_precision`: reads an open `FILE *`,
/// which the handle then owns (closed by `pcap_close`).
///
/// # Safety
/// `fp` NULL or an open stream; `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_fopen_offline_with_tstamp_precision(
    fp: *mut libc::FILE,
    precision: c_uint,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    if fp.is_null() {
        // SAFETY: as documented.
        unsafe { crate::put_errbuf(errbuf, "A null pointer was supplied as the file") };
        return std::ptr::null_mut();
    }
    open_file(fp, "(FILE)", precision as c_int, errbuf)
}

/// `pcap_fopen_offline`: microsecond time stamps.
///
/// # Safety
/// As [`pcap_fopen_offline_with_tstamp_precision`].
#[no_mangle]
pub unsafe extern "C" fn pcap_fopen_offline(
    fp: *mut libc::FILE,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    // SAFETY: as documented.
    unsafe {
        pcap_fopen_offline_with_tstamp_precision(fp, PCAP_TSTAMP_PRECISION_MICRO as c_uint, errbuf)
    }
}

/// `pcap_open_dead_with_tstamp_precision`: a handle for compiling filters
/// and writing files of link type `dlt`.
#[no_mangle]
pub extern "C" fn pcap_open_dead_with_tstamp_precision(
    dlt: c_int,
    snaplen: c_int,
    precision: c_uint,
) -> *mut pcap_t {
    // libpcap keeps what it is given, even a snapshot length of 0; an
    // unknown precision becomes microseconds.
    let precision = match precision as c_int {
        PCAP_TSTAMP_PRECISION_NANO => PCAP_TSTAMP_PRECISION_NANO,
        _ => PCAP_TSTAMP_PRECISION_MICRO,
    };
    let p = pcap_t::register(Source::Dead, dlt, snaplen, precision);
    // SAFETY: just registered.
    unsafe { &*p }.version.set((0, 0));
    p
}

/// `pcap_open_dead`: microsecond time stamps.
#[no_mangle]
pub extern "C" fn pcap_open_dead(dlt: c_int, snaplen: c_int) -> *mut pcap_t {
    pcap_open_dead_with_tstamp_precision(dlt, snaplen, PCAP_TSTAMP_PRECISION_MICRO as c_uint)
}
