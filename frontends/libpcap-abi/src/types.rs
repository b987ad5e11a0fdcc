//! libpcap's C types and constants, laid out as `pcap.h` and `bpf.h` lay
//! them out. The C test program (`tests/c/api.c`) checks the same sizes
//! against the system header, so the two cannot drift apart.

use std::ffi::{c_char, c_int, c_uint};

/// `bpf_u_int32`.
pub type BpfU32 = u32;

/// `struct bpf_insn`: one classic BPF instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct bpf_insn {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant operand.
    pub k: BpfU32,
}

/// `struct bpf_program`: a counted array of instructions owned by the
/// library (freed by `pcap_freecode`).
#[repr(C)]
#[derive(Debug)]
pub struct bpf_program {
    /// Number of instructions.
    pub bf_len: c_uint,
    /// The instructions (malloc'd).
    pub bf_insns: *mut bpf_insn,
}

/// `struct pcap_pkthdr`: a packet's time stamp and lengths.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct pcap_pkthdr {
    /// Time stamp; `tv_usec` holds nanoseconds on a nanosecond handle.
    pub ts: libc::timeval,
    /// Bytes present.
    pub caplen: BpfU32,
    /// Length on the wire.
    pub len: BpfU32,
}

/// `struct pcap_stat`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct pcap_stat {
    /// Packets received.
    pub ps_recv: c_uint,
    /// Packets dropped for lack of buffer space.
    pub ps_drop: c_uint,
    /// Packets dropped by the interface.
    pub ps_ifdrop: c_uint,
}

/// `struct pcap_addr`: one address of an interface.
#[repr(C)]
#[derive(Debug)]
pub struct pcap_addr {
    /// The next address, or NULL.
    pub next: *mut pcap_addr,
    /// Address.
    pub addr: *mut libc::sockaddr,
    /// Its netmask.
    pub netmask: *mut libc::sockaddr,
    /// Broadcast address.
    pub broadaddr: *mut libc::sockaddr,
    /// Point-to-point destination.
    pub dstaddr: *mut libc::sockaddr,
}

/// `struct pcap_if` (`pcap_if_t`): one interface of `pcap_findalldevs`.
#[repr(C)]
#[derive(Debug)]
pub struct pcap_if {
    /// The next interface, or NULL.
    pub next: *mut pcap_if,
    /// Name for `pcap_create`.
    pub name: *mut c_char,
    /// Description, or NULL.
    pub description: *mut c_char,
    /// Addresses.
    pub addresses: *mut pcap_addr,
    /// `PCAP_IF_*` flags.
    pub flags: BpfU32,
}

/// The callback of `pcap_loop` and `pcap_dispatch`.
pub type pcap_handler =
    Option<unsafe extern "C-unwind" fn(user: *mut u8, h: *const pcap_pkthdr, bytes: *const u8)>;

/// Size of libpcap's error buffers (`PCAP_ERRBUF_SIZE`).
pub const PCAP_ERRBUF_SIZE: usize = 256;

/// libpcap's generic failure (`PCAP_ERROR`).
pub const PCAP_ERROR: c_int = -1;
/// A loop ended by `pcap_breakloop` (`PCAP_ERROR_BREAK`).
pub const PCAP_ERROR_BREAK: c_int = -2;
pub const PCAP_ERROR_NOT_ACTIVATED: c_int = -3;
pub const PCAP_ERROR_ACTIVATED: c_int = -4;
pub const PCAP_ERROR_NO_SUCH_DEVICE: c_int = -5;
pub const PCAP_ERROR_RFMON_NOTSUP: c_int = -6;
pub const PCAP_ERROR_PERM_DENIED: c_int = -8;
pub const PCAP_ERROR_IFACE_NOT_UP: c_int = -9;
pub const PCAP_ERROR_CANTSET_TSTAMP_TYPE: c_int = -10;
pub const PCAP_ERROR_TSTAMP_PRECISION_NOTSUP: c_int = -12;
pub const PCAP_WARNING_TSTAMP_TYPE_NOTSUP: c_int = 3;

pub const PCAP_TSTAMP_PRECISION_MICRO: c_int = 0;
pub const PCAP_TSTAMP_PRECISION_NANO: c_int = 1;

pub const PCAP_D_INOUT: c_int = 0;
pub const PCAP_D_IN: c_int = 1;
pub const PCAP_D_OUT: c_int = 2;

pub const PCAP_IF_LOOPBACK: u32 = 0x1;
pub const PCAP_IF_UP: u32 = 0x2;
pub const PCAP_IF_RUNNING: u32 = 0x4;
pub const PCAP_IF_WIRELESS: u32 = 0x8;
pub const PCAP_IF_CONNECTION_STATUS_CONNECTED: u32 = 0x10;
pub const PCAP_IF_CONNECTION_STATUS_DISCONNECTED: u32 = 0x20;
pub const PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE: u32 = 0x30;

/// libpcap's message for a setting changed on an activated handle (its
/// double space included).
pub const ACTIVATED_MSG: &str = "can't perform  operation on activated capture";
/// libpcap's message for a handle used before `pcap_activate`.
pub const NOT_ACTIVATED_MSG: &str = "This handle hasn't been activated yet";

/// `PCAP_NETMASK_UNKNOWN`: `pcap_compile` without a netmask.
pub const PCAP_NETMASK_UNKNOWN: u32 = 0xffff_ffff;

/// The pcap file magic numbers, microsecond and nanosecond.
pub const TCPDUMP_MAGIC: u32 = 0xa1b2_c3d4;
pub const NSEC_TCPDUMP_MAGIC: u32 = 0xa1b2_3c4d;

// The layouts of x86-64 and aarch64 Linux, checked at compile time.
const _: () = assert!(std::mem::size_of::<bpf_insn>() == 8);
const _: () = assert!(std::mem::size_of::<bpf_program>() == 16);
const _: () = assert!(std::mem::size_of::<pcap_pkthdr>() == 24);
const _: () = assert!(std::mem::size_of::<pcap_stat>() == 12);
const _: () = assert!(std::mem::size_of::<pcap_if>() == 40);
const _: () = assert!(std::mem::size_of::<pcap_addr>() == 40);
