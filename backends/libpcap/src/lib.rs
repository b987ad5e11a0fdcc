//! The system libpcap as a reference engine, loaded at run time.
//!
//! `sluice bench` and the benchmarks put libpcap's numbers next to sluice's
//! in the same run. Linking libpcap would make building sluice need
//! libpcap's development files; loading the shared library when it is there
//! (`libpcap.so.0.8` on Debian, which tcpdump pulls in) keeps sluice
//! buildable everywhere and still compares against the real thing.
//!
//! Only a few entry points are used: `pcap_open_dead`, `pcap_open_offline`,
//! `pcap_compile`, `pcap_freecode`, `pcap_close`/`pcap_geterr` and
//! `bpf_filter`, plus `pcap_lib_version`. Programs are copied out of libpcap
//! right after they are compiled, so a [`Program`] owns its instructions.
//!
//! Which libpcap: [`Libpcap::load`] takes the file named by the environment
//! variable `SLUICE_LIBPCAP` when it is set (a libpcap built from its
//! current source, for example, which is the reference for what an
//! expression means), else the system's; [`Libpcap::load_from`] takes a
//! path. A handle on a capture file ([`Libpcap::open_offline`]) compiles as
//! `tcpdump -r` does, which differs from a handle without a file on the
//! loopback link types (libpcap accepts every BSD's address family there).
//!
//! This crate holds the only `unsafe` outside the native back end and the
//! buffer code: calling C through function pointers cannot be otherwise.
//!
//! ```
//! if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
//!     let p = pcap.compile("ip", 12, 65535, true).unwrap(); // 12: raw IP
//!     assert_eq!(p.run(&[0x45, 0, 0, 20], 20), 65535);
//! }
//! ```

// Loading libpcap and calling it is foreign code: each call is an
// `unsafe` block with its SAFETY note.
#![allow(unsafe_code)]
#![warn(missing_docs)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::Mutex;

/// Why libpcap could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No libpcap shared library was found, or it lacks an entry point.
    #[error("libpcap is not available: {0}")]
    Unavailable(String),
    /// libpcap refused the expression; its own message.
    #[error("libpcap: {0}")]
    Compile(String),
    /// libpcap could not open a capture file; its own message.
    #[error("libpcap: {0}")]
    Open(String),
    /// The expression contains a NUL byte.
    #[error("the expression contains a NUL byte")]
    Nul,
}

/// One instruction as libpcap lays it out (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RawInsn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

/// `struct bpf_program`.
#[repr(C)]
struct RawProgram {
    len: c_uint,
    insns: *mut RawInsn,
}

type OpenDead = unsafe extern "C" fn(c_int, c_int) -> *mut c_void;
type OpenOffline = unsafe extern "C" fn(*const c_char, *mut c_char) -> *mut c_void;
type Datalink = unsafe extern "C" fn(*mut c_void) -> c_int;
type Compile =
    unsafe extern "C" fn(*mut c_void, *mut RawProgram, *const c_char, c_int, u32) -> c_int;
type FreeCode = unsafe extern "C" fn(*mut RawProgram);
type Close = unsafe extern "C" fn(*mut c_void);
type GetErr = unsafe extern "C" fn(*mut c_void) -> *const c_char;
type Filter = unsafe extern "C" fn(*const RawInsn, *const u8, c_uint, c_uint) -> c_uint;
type Version = unsafe extern "C" fn() -> *const c_char;

/// The loaded library and its entry points.
///
/// ```
/// match sluice_libpcap::Libpcap::load() {
///     Ok(pcap) => assert!(pcap.version().contains("libpcap")),
///     Err(e) => eprintln!("{e}"),
/// }
/// ```
pub struct Libpcap {
    open_dead: OpenDead,
    open_offline: OpenOffline,
    datalink: Datalink,
    compile: Compile,
    free_code: FreeCode,
    close: Close,
    get_err: GetErr,
    filter: Filter,
    version: Version,
    /// libpcap's compiler keeps global state in older versions: one
    /// compile at a time.
    lock: Mutex<()>,
    // Declared last so the function pointers above never outlive it.
    _lib: libloading::Library,
}

/// The names the shared library goes by, most specific first.
const NAMES: &[&str] = &[
    "libpcap.so.0.8",
    "libpcap.so.1",
    "libpcap.so",
    "libpcap.dylib",
];

/// The environment variable naming the libpcap shared library to load
/// instead of the system's.
pub const ENV: &str = "SLUICE_LIBPCAP";

impl Libpcap {
    /// Load the libpcap named by `SLUICE_LIBPCAP` when it is set, else the
    /// system libpcap, or say why not.
    ///
    /// ```
    /// match sluice_libpcap::Libpcap::load() {
    ///     Ok(pcap) => assert!(pcap.version().starts_with("libpcap version ")),
    ///     // Without a libpcap the error says which names were tried.
    ///     Err(e) => assert!(e.to_string().contains("libpcap")),
    /// }
    /// ```
    pub fn load() -> Result<Libpcap, Error> {
        if let Some(path) = std::env::var_os(ENV).filter(|p| !p.is_empty()) {
            return Libpcap::load_from(std::path::Path::new(&path))
                .map_err(|e| Error::Unavailable(format!("{ENV}={}: {e}", path.to_string_lossy())));
        }
        let mut last = String::from("no library name tried");
        for name in NAMES {
            // SAFETY: loading libpcap runs its initialisers, which only set
            // up libpcap's own state; it is a well-known system library.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => return Libpcap::from_library(lib),
                Err(e) => last = e.to_string(),
            }
        }
        Err(Error::Unavailable(last))
    }

    /// Load the libpcap shared library at `path` (a build of libpcap's
    /// current source, say). On Linux its own symbols come first
    /// (`RTLD_DEEPBIND`), so that a process that also links the system
    /// libpcap still runs this one's code throughout.
    ///
    /// ```
    /// let e = sluice_libpcap::Libpcap::load_from("/nonexistent/libpcap.so".as_ref());
    /// assert!(e.is_err());
    /// ```
    pub fn load_from(path: &std::path::Path) -> Result<Libpcap, Error> {
        #[cfg(target_os = "linux")]
        // SAFETY: as in `load`: loading runs libpcap's initialisers. The
        // flags are dlopen(3)'s: RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND (8).
        let lib = unsafe {
            libloading::os::unix::Library::open(
                Some(path),
                libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL | 0x8,
            )
        }
        .map(libloading::Library::from);
        #[cfg(not(target_os = "linux"))]
        // SAFETY: as in `load`.
        let lib = unsafe { libloading::Library::new(path) };
        Libpcap::from_library(lib.map_err(|e| Error::Unavailable(e.to_string()))?)
    }

    fn from_library(lib: libloading::Library) -> Result<Libpcap, Error> {
        fn sym<T: Copy>(lib: &libloading::Library, name: &[u8]) -> Result<T, Error> {
            // SAFETY: each symbol is looked up with the C signature libpcap
            // documents for it (pcap(3PCAP)); the copies of the function
            // pointers live in the same struct as the library, which is
            // dropped after them.
            unsafe { lib.get::<T>(name) }
                .map(|s| *s)
                .map_err(|e| Error::Unavailable(e.to_string()))
        }
        Ok(Libpcap {
            open_dead: sym(&lib, b"pcap_open_dead\0")?,
            open_offline: sym(&lib, b"pcap_open_offline\0")?,
            datalink: sym(&lib, b"pcap_datalink\0")?,
            compile: sym(&lib, b"pcap_compile\0")?,
            free_code: sym(&lib, b"pcap_freecode\0")?,
            close: sym(&lib, b"pcap_close\0")?,
            get_err: sym(&lib, b"pcap_geterr\0")?,
            filter: sym(&lib, b"bpf_filter\0")?,
            version: sym(&lib, b"pcap_lib_version\0")?,
            lock: Mutex::new(()),
            _lib: lib,
        })
    }

    /// libpcap's version string, e.g. `libpcap version 1.10.3 (...)`.
    ///
    /// ```
    /// if let Ok(p) = sluice_libpcap::Libpcap::load() {
    ///     let v = p.version();
    ///     assert!(v.starts_with("libpcap version "), "{v}");
    /// }
    /// ```
    pub fn version(&self) -> String {
        // SAFETY: pcap_lib_version returns a pointer to a static,
        // NUL-terminated string.
        unsafe { CStr::from_ptr((self.version)()) }
            .to_string_lossy()
            .into_owned()
    }

    /// Compile `expr` with libpcap for link type `dlt` (a DLT number), as
    /// tcpdump would (`optimize` is tcpdump's default; netmask unknown).
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     assert!(pcap.compile("tcp port", 1, 65535, true).is_err());
    ///     assert!(pcap.compile("tcp port 80", 1, 65535, true).unwrap().len() > 3);
    /// }
    /// ```
    pub fn compile(
        &self,
        expr: &str,
        dlt: u32,
        snaplen: u32,
        optimize: bool,
    ) -> Result<Program<'_>, Error> {
        self.open_dead(dlt, snaplen)?.compile(expr, optimize)
    }

    /// A handle without a capture file for link type `dlt`
    /// (`pcap_open_dead`): what `tcpdump -y DLT -d` compiles with.
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     let h = pcap.open_dead(0, 65535).unwrap();
    ///     assert_eq!(h.datalink(), 0);
    ///     assert!(h.compile("ip6", true).is_ok());
    /// }
    /// ```
    pub fn open_dead(&self, dlt: u32, snaplen: u32) -> Result<Handle<'_>, Error> {
        // SAFETY: pcap_open_dead takes plain integers and returns a handle or
        // null; a handle is closed when the `Handle` is dropped.
        let raw = unsafe { (self.open_dead)(dlt as c_int, snaplen.min(i32::MAX as u32) as c_int) };
        if raw.is_null() {
            return Err(Error::Compile(format!(
                "link type {dlt} is not known to libpcap"
            )));
        }
        Ok(Handle { pcap: self, raw })
    }

    /// A handle reading the capture file at `path` (`pcap_open_offline`,
    /// pcap or pcapng): what `tcpdump -r FILE` compiles with. Its link type
    /// and snapshot length are the file's (a pcapng file's first interface).
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     assert!(pcap.open_offline("/nonexistent.pcap".as_ref()).is_err());
    /// }
    /// ```
    pub fn open_offline(&self, path: &std::path::Path) -> Result<Handle<'_>, Error> {
        let name = CString::new(path.as_os_str().as_encoded_bytes()).map_err(|_| Error::Nul)?;
        let mut errbuf = [0 as c_char; 256];
        // SAFETY: `name` is NUL-terminated and `errbuf` has libpcap's
        // PCAP_ERRBUF_SIZE (256) bytes; the result is a handle or null.
        let raw = unsafe { (self.open_offline)(name.as_ptr(), errbuf.as_mut_ptr()) };
        if raw.is_null() {
            // SAFETY: on failure libpcap wrote a NUL-terminated message
            // into `errbuf`, which is zeroed beyond it.
            let msg = unsafe { CStr::from_ptr(errbuf.as_ptr()) };
            return Err(Error::Open(msg.to_string_lossy().into_owned()));
        }
        Ok(Handle { pcap: self, raw })
    }

    /// Make a program that libpcap's `bpf_filter` runs from sluice's
    /// classic BPF instructions (to time libpcap's interpreter on the very
    /// program sluice runs).
    ///
    /// ```
    /// use sluice_bpf::Insn;
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     let p = pcap.program(&[Insn { code: 0x06, jt: 0, jf: 0, k: 7 }]);
    ///     assert_eq!(p.run(&[], 0), 7);
    /// }
    /// ```
    pub fn program(&self, insns: &[sluice_bpf::Insn]) -> Program<'_> {
        let insns = insns
            .iter()
            .map(|i| RawInsn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect();
        Program { pcap: self, insns }
    }
}

/// An open libpcap handle (`pcap_t`), with or without a capture file; it
/// is closed when dropped.
///
/// ```
/// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
///     let h = pcap.open_dead(1, 100).unwrap();
///     assert!(h.compile("tcp port", true).is_err());
///     assert_eq!(h.compile("ip", true).unwrap().run(&[0u8; 12], 12), 0);
/// }
/// ```
pub struct Handle<'a> {
    pcap: &'a Libpcap,
    raw: *mut c_void,
}

impl<'a> Handle<'a> {
    /// The handle's link type (`pcap_datalink`).
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     assert_eq!(pcap.open_dead(12, 100).unwrap().datalink(), 12);
    /// }
    /// ```
    pub fn datalink(&self) -> i32 {
        // SAFETY: the handle is open for as long as `self` lives.
        unsafe { (self.pcap.datalink)(self.raw) }
    }

    /// Compile `expr` on this handle (tcpdump's `optimize` unless `-O`;
    /// netmask unknown).
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     let h = pcap.open_dead(1, 100).unwrap();
    ///     assert!(h.compile("udp", false).unwrap().len() > 2);
    /// }
    /// ```
    pub fn compile(&self, expr: &str, optimize: bool) -> Result<Program<'a>, Error> {
        let pcap = self.pcap;
        let text = CString::new(expr).map_err(|_| Error::Nul)?;
        let _guard = pcap.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut raw = RawProgram {
            len: 0,
            insns: std::ptr::null_mut(),
        };
        // SAFETY: the handle is live, `raw` is a valid out-parameter and
        // `text` is NUL-terminated; 0xffffffff is PCAP_NETMASK_UNKNOWN.
        let status = unsafe {
            (pcap.compile)(
                self.raw,
                &mut raw,
                text.as_ptr(),
                optimize as c_int,
                u32::MAX,
            )
        };
        if status < 0 {
            // SAFETY: after a failed compile pcap_geterr gives a
            // NUL-terminated message owned by the still-open handle.
            let msg = unsafe { CStr::from_ptr((pcap.get_err)(self.raw)) };
            return Err(Error::Compile(msg.to_string_lossy().into_owned()));
        }
        let insns = if raw.insns.is_null() || raw.len == 0 {
            Vec::new()
        } else {
            // SAFETY: a successful pcap_compile fills `raw` with `len`
            // initialised instructions that stay valid until freed.
            unsafe { std::slice::from_raw_parts(raw.insns, raw.len as usize) }.to_vec()
        };
        // SAFETY: `raw` came from pcap_compile and is freed once.
        unsafe { (pcap.free_code)(&mut raw) };
        Ok(Program { pcap, insns })
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: the handle came from pcap_open_dead or pcap_open_offline
        // and is closed once, here.
        unsafe { (self.pcap.close)(self.raw) };
    }
}

/// A classic BPF program that libpcap's interpreter runs.
///
/// ```
/// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
///     let p = pcap.compile("udp", 1, 100, true).unwrap();
///     assert_eq!(p.run(&[0u8; 10], 10), 0); // too short: rejected
/// }
/// ```
pub struct Program<'a> {
    pcap: &'a Libpcap,
    insns: Vec<RawInsn>,
}

impl Program<'_> {
    /// libpcap's `bpf_filter` on one packet: its return value (0 rejects).
    /// An empty program accepts nothing.
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     let p = pcap.compile("ip", 12, 9, true).unwrap();
    ///     assert_eq!(p.run(&[0x45; 20], 20), 9);
    /// }
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        if self.insns.is_empty() {
            return 0;
        }
        // SAFETY: the program is non-empty, and it either came from
        // pcap_compile (well formed) or was built from sluice instructions
        // that the caller had verified; bpf_filter reads at most `buflen`
        // bytes of `pkt`, which is exactly the slice's length.
        unsafe {
            (self.pcap.filter)(
                self.insns.as_ptr(),
                pkt.as_ptr(),
                wirelen,
                pkt.len() as c_uint,
            )
        }
    }

    /// The number of instructions.
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     assert_eq!(pcap.compile("", 1, 100, true).unwrap().len(), 1);
    /// }
    /// ```
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    /// Whether the program has no instructions.
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     assert!(!pcap.compile("", 1, 100, true).unwrap().is_empty());
    /// }
    /// ```
    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    /// The program as sluice instructions (libpcap's code generator's output).
    ///
    /// ```
    /// if let Ok(pcap) = sluice_libpcap::Libpcap::load() {
    ///     let p = pcap.compile("ip", 1, 100, true).unwrap();
    ///     assert_eq!(p.insns().len(), p.len());
    /// }
    /// ```
    pub fn insns(&self) -> Vec<sluice_bpf::Insn> {
        self.insns
            .iter()
            .map(|i| sluice_bpf::Insn {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agrees_with_sluice_interpreter_when_present() {
        let Ok(pcap) = Libpcap::load() else {
            eprintln!("libpcap not installed; skipped");
            return;
        };
        let p = pcap.compile("tcp port 80", 1, 262144, true).unwrap();
        let insns = p.insns();
        let mut pkt = vec![0u8; 54];
        pkt[12] = 8;
        pkt[14] = 0x45;
        pkt[23] = 6;
        pkt[36] = 0;
        pkt[37] = 80;
        for cut in 0..=pkt.len() {
            let d = &pkt[..cut];
            let ours = sluice_bpf::run(&insns, d, 54);
            assert_eq!(p.run(d, 54), ours, "cut {cut}");
            assert_eq!(pcap.program(&insns).run(d, 54), ours);
        }
        assert_eq!(p.run(&pkt, 54), 262144);
        assert!(matches!(pcap.compile("a\0b", 1, 1, true), Err(Error::Nul)));
        assert!(matches!(
            pcap.compile("tcp port", 1, 1, true),
            Err(Error::Compile(_))
        ));
    }
}
