//! # sluice-ebpf: sluice's intermediate form as eBPF, run by the kernel
//!
//! [`lower`] turns a [`Filter`] into eBPF instructions ([`Insn`]), with no
//! C compiler or LLVM anywhere; [`Loaded::load`] hands them to the kernel's
//! verifier and keeps the program's file descriptor (closed on drop, never
//! pinned); [`Loaded::run`] runs one packet through the kernel's own
//! execution with `BPF_PROG_TEST_RUN`.
//!
//! ## Program types and packet access
//!
//! A program is built for a [`Mode`]:
//! - [`Mode::TestRun`] is a `BPF_PROG_TYPE_SCHED_CLS` program: its test run
//!   hands the program the whole frame from the link header on (a socket
//!   filter's test run starts at the network header), and lets the caller
//!   set `skb->cb`, where [`Loaded::run`] puts the captured length
//!   (`cb[0]`) and the length on the wire (`cb[1]`): a file's packet may
//!   be cut short, and the kernel's test run wants at least 14 bytes (34
//!   for IPv4, 54 for IPv6), so shorter packets are padded and the
//!   program bounds itself by `cb[0]`. The test run takes packets up to
//!   [`MAX_TEST_PACKET`] bytes (one page).
//! - [`Mode::Socket`] is a `BPF_PROG_TYPE_SOCKET_FILTER` program for
//!   `SO_ATTACH_BPF`, a pre-filter: the captured and wire lengths are both
//!   `skb->len`, and a frame whose VLAN tag the kernel took off passes
//!   (user space, which sees the tag put back, judges it).
//!
//! - [`Mode::Xdp`] is a `BPF_PROG_TYPE_XDP` program: `XDP_PASS` for a
//!   frame the filter accepts, `XDP_DROP` for the rest (and for an abort);
//!   both lengths are `data_end - data`.
//!
//! Socket filters read packet bytes with the classic-style
//! `BPF_LD_ABS`/`BPF_LD_IND` instructions: they read through
//! `skb_header_pointer`, so they work on paged (non-linear) socket
//! buffers, convert from network byte order, and end the program with
//! return value 0 when out of bounds, exactly the IR's abort; the program
//! type has no direct packet access. Because `LD_IND` takes a signed
//! 32-bit offset (negative offsets are the kernel's special
//! `SKF_NET_OFF`/`SKF_LL_OFF` areas), every load is first checked
//! explicitly against the captured length, so the kernel never sees an
//! address above it. Test runs and XDP programs see their whole frame in
//! one buffer and read it directly (`data`/`data_end`), which costs a few
//! instructions where a helper call cost about 8 ns.

//! ## Loader
//!
//! The kernel is called directly with `bpf(2)` (module `sys`, the only
//! unsafe code). aya loads programs from ELF objects and has no public call
//! for a raw instruction array; `libbpf-sys` would build libbpf's C sources
//! with libelf and zlib for two system calls whose ABI is small and stable.
//! A verifier refusal comes back as [`Error::Refused`] with the verifier's
//! log.
//!
//! ```no_run
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_ebpf::{Loaded, Mode};
//! let f = Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 262144);
//! let prog = Loaded::load(&sluice_ebpf::lower(&f, Mode::TestRun)?, Mode::TestRun)?;
//! let mut pkt = [0u8; 60];
//! pkt[12] = 8;
//! assert_eq!(prog.run(&pkt, 60)?, 262144);
//! assert_eq!(prog.run(&pkt[..13], 60)?, 0);
//! # Ok::<(), sluice_ebpf::Error>(())
//! ```
#![warn(missing_docs)]

mod btf;
mod chain;
mod emit;
mod insn;
mod keys;
pub mod multi;
mod set;
mod sys;
pub mod tree;
mod vm;

pub use emit::{lower, lower_for_link};
pub use insn::{dump, op, Insn};
pub use multi::MultiFilter;
pub use set::KernelSet;
pub use sluice_ir::Filter;
pub use tree::TreeFilter;

use std::os::fd::OwnedFd;

/// Which program type a filter is built and loaded as.
///
/// ```
/// assert_ne!(sluice_ebpf::Mode::TestRun, sluice_ebpf::Mode::Socket);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `BPF_PROG_TYPE_SCHED_CLS`, run on packets from files with
    /// `BPF_PROG_TEST_RUN` ([`Loaded::run`]).
    TestRun,
    /// `BPF_PROG_TYPE_SOCKET_FILTER`, for a socket (`SO_ATTACH_BPF`).
    Socket,
    /// `BPF_PROG_TYPE_XDP`, before the kernel's stack: `XDP_PASS` for a
    /// packet the filter accepts, `XDP_DROP` for the rest.
    Xdp,
}

impl Mode {
    fn prog_type(self) -> u32 {
        match self {
            Mode::TestRun => 3,
            Mode::Socket => 1,
            Mode::Xdp => 6,
        }
    }
}

/// The largest packet [`Loaded::run`] takes: the kernel's test run copies
/// a packet into one page, less its headroom and shared info.
/// (On x86-64 with 4 KiB pages: 3,712 bytes, measured on Linux 6.18.)
pub const MAX_TEST_PACKET: usize = 3_700;

/// Packets shorter than this go to the test run padded with zeros: an
/// Ethernet header and an IPv6 header.
const MIN_TEST_FRAME: usize = 54;

/// Why a filter could not be built, loaded or run.
///
/// ```
/// let e = sluice_ebpf::Error::TooDeep;
/// assert!(e.to_string().contains("stack"));
/// ```
#[derive(Debug)]
pub enum Error {
    /// The filter's values nest deeper than the 512-byte stack holds.
    TooDeep,
    /// The program (this many instructions) is too long for 16-bit jumps.
    TooLarge(usize),
    /// The kernel refused to load the program: the error, and the
    /// verifier's log.
    Refused(std::io::Error, String),
    /// The kernel refused the program for lack of privilege (it needs
    /// CAP_BPF and CAP_NET_ADMIN, or root).
    NotPermitted(std::io::Error),
    /// `BPF_PROG_TEST_RUN` failed.
    Run(std::io::Error),
    /// A packet longer than the kernel's test run takes.
    PacketTooLong(usize),
    /// The kernel refused to attach (or replace) an XDP program on the
    /// interface named.
    Attach(String, std::io::Error),
    /// A map could not be created, read or written: what, and why.
    Map(&'static str, std::io::Error),
    /// A filter set or a change to it that this program cannot take
    /// (the message says what, and what to do instead).
    Unsupported(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::TooDeep => write!(f, "the filter nests deeper than the eBPF stack holds"),
            Error::TooLarge(n) => write!(f, "the eBPF program ({n} instructions) is too long for its jumps"),
            Error::Refused(e, log) => write!(f, "the kernel's verifier refused the eBPF program: {e}\n{log}"),
            Error::NotPermitted(e) => write!(
                f,
                "the kernel refused to load an eBPF program ({e}): it needs root, or CAP_BPF and CAP_NET_ADMIN"
            ),
            Error::Run(e) => write!(f, "BPF_PROG_TEST_RUN failed: {e}"),
            Error::PacketTooLong(n) => write!(
                f,
                "a packet of {n} bytes is longer than the kernel's test run takes ({MAX_TEST_PACKET})"
            ),
            Error::Attach(iface, e) if e.raw_os_error() == Some(libc::EBUSY) => write!(
                f,
                "{iface}: another XDP program is attached to the interface ({e})"
            ),
            Error::Attach(iface, e) => write!(f, "{iface}: attaching the XDP program failed: {e}"),
            Error::Map(what, e) => write!(f, "eBPF map: {what}: {e}"),
            Error::Unsupported(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Refused(e, _)
            | Error::NotPermitted(e)
            | Error::Run(e)
            | Error::Attach(_, e)
            | Error::Map(_, e) => Some(e),
            _ => None,
        }
    }
}

/// A program loaded into the kernel; its descriptor is closed on drop.
///
/// ```no_run
/// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 7);
/// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::TestRun)?;
/// assert_eq!(p.run(&[], 0)?, 7);
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
#[derive(Debug)]
pub struct Loaded {
    fd: OwnedFd,
    mode: Mode,
    insns: usize,
}

impl Loaded {
    /// Lower and load a filter.
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::False, 7);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::TestRun)?;
    /// assert_eq!(p.run(&[0; 20], 20)?, 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn compile(f: &Filter, mode: Mode) -> Result<Loaded, Error> {
        Loaded::load(&lower(f, mode)?, mode)
    }

    /// Lower (for a capture of link type `linktype`, see
    /// [`lower_for_link`]) and load a filter.
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 7);
    /// let p = sluice_ebpf::Loaded::compile_for_link(&f, sluice_ebpf::Mode::Socket, 276)?;
    /// assert_eq!(p.mode(), sluice_ebpf::Mode::Socket);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn compile_for_link(f: &Filter, mode: Mode, linktype: u16) -> Result<Loaded, Error> {
        Loaded::load(&lower_for_link(f, mode, linktype)?, mode)
    }

    /// Load instructions built for `mode`. On a refusal the program is
    /// loaded once more with the verifier's log on, and the error carries
    /// the log.
    ///
    /// ```no_run
    /// use sluice_ebpf::{Insn, Loaded, Mode};
    /// // "exit" with r0 never set: the verifier refuses it.
    /// let err = Loaded::load(&[Insn::new(0x95, 0, 0, 0, 0)], Mode::TestRun).unwrap_err();
    /// assert!(err.to_string().contains("R0 !read_ok"));
    /// ```
    pub fn load(insns: &[Insn], mode: Mode) -> Result<Loaded, Error> {
        Ok(Loaded {
            fd: load_program(insns, mode)?,
            mode,
            insns: insns.len(),
        })
    }

    /// The program's length in instructions, as loaded.
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 1);
    /// assert!(sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::TestRun)?.len() > 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        self.insns
    }

    /// The program type it was built and loaded for.
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 1);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::Socket)?;
    /// assert_eq!(p.mode(), sluice_ebpf::Mode::Socket);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The program's file descriptor (for `SO_ATTACH_BPF`).
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 1);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::Socket)?;
    /// assert!(p.fd().as_raw_fd() >= 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Run a packet (`pkt` its captured bytes, `wirelen` its length on
    /// the wire) through the program in the kernel: the filter's result.
    /// Only for [`Mode::TestRun`] programs.
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::eq(sluice_ir::Val::Len, 60), 1);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::TestRun)?;
    /// assert_eq!(p.run(&[0; 20], 60)?, 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> Result<u32, Error> {
        Ok(self.bench(pkt, wirelen, 1)?.0)
    }

    /// Run an Ethernet frame (at least 14 bytes, all of it captured)
    /// through an [`Mode::Xdp`] program in the kernel: its verdict,
    /// `XDP_PASS` (2) or `XDP_DROP` (1).
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::eq(sluice_ir::Val::Len, 60), 1);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::Xdp)?;
    /// assert_eq!(p.run_xdp(&[0; 60])?, 2);
    /// assert_eq!(p.run_xdp(&[0; 61])?, 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run_xdp(&self, frame: &[u8]) -> Result<u32, Error> {
        assert_eq!(self.mode, Mode::Xdp, "only XDP programs give XDP verdicts");
        Ok(test_run_xdp(&self.fd, frame, 1)?.0)
    }

    /// Run a packet `repeat` times: (the filter's result, the kernel's
    /// mean time per run in nanoseconds).
    ///
    /// ```no_run
    /// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 1);
    /// let p = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::TestRun)?;
    /// let (r, _ns) = p.bench(&[0; 60], 60, 1000)?;
    /// assert_eq!(r, 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn bench(&self, pkt: &[u8], wirelen: u32, repeat: u32) -> Result<(u32, u32), Error> {
        assert_eq!(
            self.mode,
            Mode::TestRun,
            "only test-run programs run on packets"
        );
        test_run(&self.fd, pkt, wirelen, repeat)
    }
}

/// An XDP program attached to an interface through a BPF link: the kernel
/// runs it on every frame the interface receives, before its stack, and
/// detaches it when this is dropped or the process ends, however it ends
/// (nothing is pinned).
///
/// ```no_run
/// let f = sluice_ebpf::Filter::new(sluice_ir::Pred::True, 1);
/// let prog = sluice_ebpf::Loaded::compile(&f, sluice_ebpf::Mode::Xdp)?;
/// let link = sluice_ebpf::XdpLink::attach(&prog, "eth0")?;
/// println!("XDP ({})", if link.native() { "native" } else { "generic" });
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
#[derive(Debug)]
pub struct XdpLink {
    fd: OwnedFd,
    iface: String,
    native: bool,
}

impl XdpLink {
    /// Attach `prog` (an [`Mode::Xdp`] program) to the interface `iface`:
    /// in the driver where it has XDP, else generic (in the kernel's
    /// receive path, for any interface).
    pub fn attach(prog: &Loaded, iface: &str) -> Result<XdpLink, Error> {
        assert_eq!(
            prog.mode,
            Mode::Xdp,
            "only XDP programs attach to an interface"
        );
        XdpLink::attach_fd(&prog.fd, iface)
    }

    /// Attach the XDP program `prog` (native, else generic).
    pub(crate) fn attach_fd(prog: &OwnedFd, iface: &str) -> Result<XdpLink, Error> {
        let ifindex = sys::ifindex(iface).map_err(|e| Error::Attach(iface.into(), e))?;
        const SKB_MODE: u32 = 1 << 1;
        const DRV_MODE: u32 = 1 << 2;
        match sys::xdp_link(prog, ifindex, DRV_MODE) {
            Ok(fd) => Ok(XdpLink {
                fd,
                iface: iface.into(),
                native: true,
            }),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => Err(Error::Attach(iface.into(), e)),
            Err(_) => match sys::xdp_link(prog, ifindex, SKB_MODE) {
                Ok(fd) => Ok(XdpLink {
                    fd,
                    iface: iface.into(),
                    native: false,
                }),
                Err(e) => Err(Error::Attach(iface.into(), e)),
            },
        }
    }

    /// Whether the driver runs it (native XDP), not the kernel's generic
    /// receive path.
    pub fn native(&self) -> bool {
        self.native
    }

    /// Put `prog` in place of the attached program, atomically: every
    /// frame is judged by one or the other.
    pub fn replace(&self, prog: &Loaded) -> Result<(), Error> {
        assert_eq!(
            prog.mode,
            Mode::Xdp,
            "only XDP programs attach to an interface"
        );
        sys::link_update(&self.fd, &prog.fd).map_err(|e| Error::Attach(self.iface.clone(), e))
    }
}

/// The ids of every BPF program and every map in the system, as the
/// kernel lists them: (programs, maps).
///
/// ```no_run
/// let (progs, maps) = sluice_ebpf::system_ids()?;
/// # let _ = (progs, maps);
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
pub fn system_ids() -> Result<(Vec<u32>, Vec<u32>), Error> {
    let ids = |maps| {
        sys::system_ids(maps).map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) => Error::NotPermitted(e),
            _ => Error::Map("listing the system's BPF objects", e),
        })
    };
    Ok((ids(false)?, ids(true)?))
}

/// Turn on the kernel's run-time statistics of BPF programs
/// (`kernel.bpf_stats_enabled`, through `BPF_ENABLE_STATS`) while the
/// returned descriptor is open; closing it turns them off again.
///
/// ```no_run
/// let on = sluice_ebpf::enable_stats()?;
/// drop(on);
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
pub fn enable_stats() -> Result<OwnedFd, Error> {
    sys::enable_stats().map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => Error::NotPermitted(e),
        _ => Error::Map("enabling the kernel's BPF statistics", e),
    })
}

/// Load instructions built for `mode`; on a refusal the program is loaded
/// once more with the verifier's log on, and the error carries the log's
/// end.
fn load_program(insns: &[Insn], mode: Mode) -> Result<OwnedFd, Error> {
    let code: Vec<u64> = insns.iter().map(Insn::encode).collect();
    let (btf, info) = match btf::subprograms(insns) {
        Some((blob, info)) => (
            Some(sys::btf_load(&blob).map_err(|e| match e.raw_os_error() {
                Some(libc::EPERM) => Error::NotPermitted(e),
                _ => Error::Map("loading the program's type information", e),
            })?),
            info,
        ),
        None => (None, Vec::new()),
    };
    let funcs = btf.as_ref().map(|b| (b, &info[..]));
    match sys::prog_load(mode.prog_type(), &code, "sluice", None, funcs) {
        Ok(fd) => Ok(fd),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(Error::NotPermitted(e)),
        Err(_) => {
            let mut log = vec![0u8; 1 << 24];
            match sys::prog_load(mode.prog_type(), &code, "sluice", Some(&mut log), funcs) {
                // Loaded the second time: keep it.
                Ok(fd) => Ok(fd),
                Err(e) => {
                    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                    let text = String::from_utf8_lossy(&log[..end]);
                    // The end of a long log says why.
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = lines[lines.len().saturating_sub(40)..].join("\n");
                    Err(Error::Refused(e, tail))
                }
            }
        }
    }
}

/// Run a whole frame `repeat` times through the XDP program `fd`: (its
/// verdict, the kernel's mean ns per run).
fn test_run_xdp(fd: &OwnedFd, frame: &[u8], repeat: u32) -> Result<(u32, u32), Error> {
    if frame.len() > MAX_TEST_PACKET {
        return Err(Error::PacketTooLong(frame.len()));
    }
    sys::test_run(fd, frame, &[], repeat).map_err(Error::Run)
}

/// Run a packet `repeat` times through the test-run program `fd`: (its
/// result, the kernel's mean ns per run).
fn test_run(fd: &OwnedFd, pkt: &[u8], wirelen: u32, repeat: u32) -> Result<(u32, u32), Error> {
    if pkt.len() > MAX_TEST_PACKET {
        return Err(Error::PacketTooLong(pkt.len()));
    }
    let data = test_frame(pkt);
    // struct __sk_buff up to the end of cb[]: cb[0], cb[1] at 48, 52.
    let mut ctx = [0u8; 68];
    ctx[48..52].copy_from_slice(&(pkt.len() as u32).to_ne_bytes());
    ctx[52..56].copy_from_slice(&wirelen.to_ne_bytes());
    sys::test_run(fd, &data, &ctx, repeat).map_err(Error::Run)
}

/// The frame a test run is given for `pkt`: the test run refuses frames
/// under 14 bytes, and IPv4 or IPv6 ones too short for the network
/// header, so shorter packets go padded (the program never reads past
/// `cb[0]`, their length).
fn test_frame(pkt: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if pkt.len() < MIN_TEST_FRAME {
        let mut data = vec![0u8; MIN_TEST_FRAME];
        data[..pkt.len()].copy_from_slice(pkt);
        std::borrow::Cow::Owned(data)
    } else {
        std::borrow::Cow::Borrowed(pkt)
    }
}

#[cfg(test)]
mod tests;
