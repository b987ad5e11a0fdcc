//! The system libpcap as a reference engine, loaded at run time.
//!
//! `sluice bench` and the benchmarks put libpcap's numbers next to sluice's
//! in the same run. Linking libpcap would make building sluice need
//! libpcap's development files; loading the shared library when it is there
//! (`libpcap.so.0.8` on Debian, which tcpdump pulls in) keeps sluice
//! buildable everywhere and still compares against the real thing.
//!
//! Only five entry points are used: `pcap_open_dead`, `pcap_compile`,
//! `pcap_freecode`, `pcap_close`/`pcap_geterr` and `bpf_filter`, plus
//! `pcap_lib_version`. Programs are copied out of libpcap right after they
//! are compiled, so a [`Program`] owns its instructions.
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

impl Libpcap {
    /// Load the system libpcap, or say why not.
    ///
    /// ```
    /// let _maybe = sluice_libpcap::Libpcap::load();
    /// ```
    pub fn load() -> Result<Libpcap, Error> {
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
    ///     println!("{}", p.version());
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
        let text = CString::new(expr).map_err(|_| Error::Nul)?;
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: pcap_open_dead takes plain integers and returns a handle or
        // null; the handle is closed below on every path.
        let handle =
            unsafe { (self.open_dead)(dlt as c_int, snaplen.min(i32::MAX as u32) as c_int) };
        if handle.is_null() {
            return Err(Error::Compile(format!(
                "link type {dlt} is not known to libpcap"
            )));
        }
        let mut raw = RawProgram {
            len: 0,
            insns: std::ptr::null_mut(),
        };
        // SAFETY: `handle` is live, `raw` is a valid out-parameter and `text`
        // is NUL-terminated; 0xffffffff is PCAP_NETMASK_UNKNOWN.
        let status =
            unsafe { (self.compile)(handle, &mut raw, text.as_ptr(), optimize as c_int, u32::MAX) };
        let result = if status < 0 {
            // SAFETY: after a failed compile pcap_geterr gives a
            // NUL-terminated message owned by the still-open handle.
            let msg = unsafe { CStr::from_ptr((self.get_err)(handle)) };
            Err(Error::Compile(msg.to_string_lossy().into_owned()))
        } else {
            let insns = if raw.insns.is_null() || raw.len == 0 {
                Vec::new()
            } else {
                // SAFETY: a successful pcap_compile fills `raw` with `len`
                // initialised instructions that stay valid until freed.
                unsafe { std::slice::from_raw_parts(raw.insns, raw.len as usize) }.to_vec()
            };
            // SAFETY: `raw` came from pcap_compile and is freed once.
            unsafe { (self.free_code)(&mut raw) };
            Ok(Program { pcap: self, insns })
        };
        // SAFETY: the handle came from pcap_open_dead and is closed once.
        unsafe { (self.close)(handle) };
        result
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
