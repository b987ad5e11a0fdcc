//! Capture files: `pcap_open_offline` and its kin read pcap and pcapng
//! through sluice's reader, from a `FILE *` (so `pcap_file` and
//! `pcap_get_selectable_fd` give what libpcap gives), and `pcap_open_dead`
//! makes a handle that only compiles and writes.
//!
//! The rule, libpcap's: the stream is the source of truth. Records are
//! read from it with `fread`s of exactly their bytes, never ahead, so
//! after each packet it stands just after that packet's record: a
//! program may `ftell` and `fseek` it (tcpslice does) and reading goes on
//! from where it put it; bytes a program read and put back before the
//! open (`fread` then `rewind` of standard input, as tcptrace does) are
//! read, since `-` is C's `stdin` itself; and a record that arrives on a
//! pipe is handed over as soon as its last byte has come.
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
use std::ffi::{c_char, c_int, c_uint};
use std::io::{self, Read};

extern "C" {
    static mut stdin: *mut libc::FILE;
}

/// A `FILE *` as a byte reader, keeping the first 24 bytes read (a pcap
/// file's header, whose link-type field has bits the reader drops).
pub(crate) struct CFile {
    file: *mut libc::FILE,
    head: Vec<u8>,
}

impl Read for CFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = if crate::guard::take_buffered(self.file, buf) {
            buf.len()
        } else {
            self.fread(buf)?
        };
        if self.head.len() < 24 {
            let keep = (24 - self.head.len()).min(n);
            self.head.extend_from_slice(&buf[..keep]);
        }
        Ok(n)
    }
}

impl CFile {
    /// `fread` into `buf`: the bytes read.
    fn fread(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (to, len, file) = (buf.as_mut_ptr(), buf.len(), self.file);
        // SAFETY: the FILE is open for as long as the Offline owning it;
        // `to` is writable for `len` bytes.
        let read = move || unsafe { libc::fread(to.cast(), 1, len, file) };
        // A read that needs a system call is a cancellation point: the
        // thread's cancellation waits meanwhile (crate::guard).
        let n = if crate::guard::buffered_read(file, len) {
            read()
        } else {
            crate::guard::quiet(read)
        };
        // SAFETY: as above.
        if n == 0 && len > 0 && unsafe { libc::ferror(file) } != 0 {
            return Err(io::Error::last_os_error());
        }
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
    /// A pcap file with nanosecond time stamps.
    pub(crate) file_nano: bool,
    /// Not a regular file (a pipe, a socket, a terminal): a read may
    /// wait for bytes to come.
    waits: bool,
}

// SAFETY: the stream is used by one thread at a time (the handle's lock);
// stdio streams may move between threads.
unsafe impl Send for Offline {}

impl Offline {
    /// The descriptor to wait on before the next read, where the stream
    /// is a pipe or the like with nothing buffered: the wait is then
    /// made outside the read, where the thread may be cancelled.
    pub(crate) fn must_wait(&self) -> Option<c_int> {
        if !self.waits || crate::guard::buffered_read(self.file, 1) {
            return None;
        }
        // SAFETY: an open stream.
        Some(unsafe { libc::fileno(self.file) })
    }
}

impl Drop for Offline {
    fn drop(&mut self) {
        // As libpcap: the stream is closed, unless it is stdin.
        // SAFETY: the FILE is ours (opened, or handed over by
        // pcap_fopen_offline) and closed only here.
        unsafe {
            if self.file != stdin {
                libc::fclose(self.file);
            }
        }
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

/// libpcap's buffer size after a record of `caplen` bytes: a pcap
/// reader grows its buffer to the next power of two (at most the snapshot
/// length); a pcapng reader reports its first 2 KiB whatever it reads.
pub(crate) fn grown_bufsize(pcapng: bool, bufsize: c_int, caplen: u32, snapshot: c_int) -> c_int {
    if pcapng || i64::from(caplen) <= i64::from(bufsize) {
        return bufsize;
    }
    caplen.checked_next_power_of_two().map_or(snapshot, |n| {
        (n.min(i32::MAX as u32) as c_int).min(snapshot)
    })
}

/// Closes a stream the handle would have owned (not stdin).
fn release(file: *mut libc::FILE) {
    // SAFETY: an open stream handed to us; stdin is the program's.
    unsafe {
        if file != stdin {
            libc::fclose(file);
        }
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
        release(file);
        // SAFETY: errbuf is the caller's PCAP_ERRBUF_SIZE buffer or NULL.
        unsafe { crate::put_errbuf(errbuf, msg) };
        std::ptr::null_mut()
    };
    if precision != PCAP_TSTAMP_PRECISION_MICRO && precision != PCAP_TSTAMP_PRECISION_NANO {
        return fail(&format!("unknown time stamp resolution {precision}"));
    }
    let input = CFile {
        file,
        head: Vec::with_capacity(24),
    };
    let opened = CaptureReader::from_stream(input, name).and_then(|mut r| {
        let first = r.read_interface()?;
        Ok((r, first))
    });
    let (mut reader, first) = match opened {
        Ok(x) => x,
        Err(e) => return fail(&file_error(&e, None)),
    };
    let Some(first) = first else {
        return fail("the capture file has no Interface Description Blocks");
    };
    let head = std::mem::take(&mut reader.get_mut().head);
    let format = reader.format();
    let (swapped, version, ext, file_nano) = match format {
        CaptureFormat::Pcap {
            big_endian, nanos, ..
        } => (
            big_endian != cfg!(target_endian = "big"),
            (2, 4),
            linktype_ext(&head, big_endian),
            nanos,
        ),
        CaptureFormat::PcapNg { big_endian, .. } => {
            (big_endian != cfg!(target_endian = "big"), (1, 0), 0, false)
        }
    };
    // SAFETY: an open stream.
    let fd = unsafe { libc::fileno(file) };
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is the stream's descriptor; st is writable.
    let regular =
        unsafe { libc::fstat(fd, &mut st) } == 0 && st.st_mode & libc::S_IFMT == libc::S_IFREG;
    let offline = Offline {
        file,
        reader,
        linktype: first.linktype,
        file_nano,
        waits: !regular,
    };
    let dlt = linktype_to_dlt(u32::from(first.linktype));
    let mut snapshot = adjust_snapshot(first.linktype, first.snaplen);
    // The modified format of some old Linux tcpdumps wrote Ethernet
    // snapshot lengths 14 bytes short; libpcap adds them back.
    let magic = head.get(..4).map(|m| [m[0], m[1], m[2], m[3]]);
    let kuznetzov = magic.is_some_and(|m| {
        u32::from_le_bytes(m) == 0xa1b2_cd34 || u32::from_be_bytes(m) == 0xa1b2_cd34
    });
    if kuznetzov && dlt == 1 {
        snapshot = snapshot.saturating_add(14);
    }
    let p = pcap_t::register(Source::Offline(Box::new(offline)), dlt, snapshot, precision);
    if let Some(h) = pcap_t::get(p) {
        h.swapped.set(swapped);
        h.version[0].set(version.0);
        h.version[1].set(version.1);
        h.linktype_ext
            .store(ext, std::sync::atomic::Ordering::Release);
        h.file.store(file, std::sync::atomic::Ordering::Release);
        h.selectable.set(fd);
        // libpcap starts with a buffer of 2 KiB at most (the snapshot
        // length, if less, for pcap).
        h.bufsize.set(match format {
            CaptureFormat::Pcap { .. } => snapshot.clamp(0, 2048),
            CaptureFormat::PcapNg { .. } => 2048,
        });
    }
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
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        let Some(name) = (unsafe { crate::cstr(fname) }) else {
            // SAFETY: as documented.
            unsafe { crate::put_errbuf(errbuf, "A null pointer was supplied as the file name") };
            return std::ptr::null_mut();
        };
        let file = if name.to_bytes() == b"-" {
            // SAFETY: C's standard input stream, as libpcap reads it
            // (with what the program read and put back before).
            unsafe { stdin }
        } else {
            // SAFETY: a valid C string and mode.
            let f = unsafe { libc::fopen(name.as_ptr(), c"rb".as_ptr()) };
            if !f.is_null() {
                // A stream of our own gets a larger buffer than stdio's
                // 4 KiB: one read(2) per 256 KiB of file. Positions and
                // pipes behave the same (a read takes what is there).
                // SAFETY: a stream just opened, before any I/O on it;
                // stdio allocates the buffer.
                unsafe { libc::setvbuf(f, std::ptr::null_mut(), libc::_IOFBF, 256 * 1024) };
            }
            f
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
    })
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
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        unsafe {
            pcap_open_offline_with_tstamp_precision(
                fname,
                PCAP_TSTAMP_PRECISION_MICRO as c_uint,
                errbuf,
            )
        }
    })
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
    crate::guard::entry(std::ptr::null_mut(), move || {
        if fp.is_null() {
            // SAFETY: as documented.
            unsafe { crate::put_errbuf(errbuf, "A null pointer was supplied as the file") };
            return std::ptr::null_mut();
        }
        open_file(fp, "(FILE)", precision as c_int, errbuf)
    })
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
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        unsafe {
            pcap_fopen_offline_with_tstamp_precision(
                fp,
                PCAP_TSTAMP_PRECISION_MICRO as c_uint,
                errbuf,
            )
        }
    })
}

/// `pcap_open_dead_with_tstamp_precision`: a handle for compiling filters
/// and writing files of link type `dlt`.
#[no_mangle]
pub extern "C" fn pcap_open_dead_with_tstamp_precision(
    dlt: c_int,
    snaplen: c_int,
    precision: c_uint,
) -> *mut pcap_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        // libpcap keeps what it is given, even a snapshot length of 0; an
        // unknown precision becomes microseconds.
        let precision = match precision as c_int {
            PCAP_TSTAMP_PRECISION_NANO => PCAP_TSTAMP_PRECISION_NANO,
            _ => PCAP_TSTAMP_PRECISION_MICRO,
        };
        let p = pcap_t::register(Source::Dead, dlt, snaplen, precision);
        if let Some(h) = pcap_t::get(p) {
            h.version[0].set(0);
            h.version[1].set(0);
        }
        p
    })
}

/// `pcap_open_dead`: microsecond time stamps.
#[no_mangle]
pub extern "C" fn pcap_open_dead(dlt: c_int, snaplen: c_int) -> *mut pcap_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        pcap_open_dead_with_tstamp_precision(dlt, snaplen, PCAP_TSTAMP_PRECISION_MICRO as c_uint)
    })
}
