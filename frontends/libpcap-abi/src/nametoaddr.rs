//! Interfaces and names: `pcap_findalldevs` (the interfaces sluice can
//! capture on, with their addresses), and libpcap's `namedb.h` helpers
//! (host, network, port, protocol, Ethernet-type and LLC names, Ethernet
//! addresses), on the C library's resolvers as libpcap uses them.

use crate::types::*;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, CStr, CString};

/// `PROTO_UNDEF`: a name with no protocol.
pub const PROTO_UNDEF: c_int = -1;

/// One address of an interface, copied out of `getifaddrs`.
pub(crate) struct IfAddr {
    pub name: String,
    pub family: Option<c_int>,
    pub addr: Option<Vec<u8>>,
    pub netmask: Option<Vec<u8>>,
    pub broadaddr: Option<Vec<u8>>,
    pub dstaddr: Option<Vec<u8>>,
    /// IPv4 address and netmask in network byte order.
    pub v4: Option<u32>,
    pub v4_mask: Option<u32>,
}

/// The bytes of a socket address of a family we list.
///
/// # Safety
/// `sa` NULL or a valid socket address.
unsafe fn sockaddr_bytes(sa: *const libc::sockaddr) -> Option<Vec<u8>> {
    // SAFETY: as documented.
    let family = c_int::from(unsafe { sa.as_ref() }?.sa_family);
    let len = match family {
        libc::AF_INET => std::mem::size_of::<libc::sockaddr_in>(),
        libc::AF_INET6 => std::mem::size_of::<libc::sockaddr_in6>(),
        libc::AF_PACKET => std::mem::size_of::<libc::sockaddr_ll>(),
        _ => return None,
    };
    // SAFETY: a socket address of that family is that long.
    Some(unsafe { std::slice::from_raw_parts(sa.cast::<u8>(), len) }.to_vec())
}

fn v4(bytes: &Option<Vec<u8>>) -> Option<u32> {
    let b = bytes.as_ref()?;
    (b.len() >= 8 && u16::from_ne_bytes([b[0], b[1]]) == libc::AF_INET as u16)
        .then(|| u32::from_ne_bytes([b[4], b[5], b[6], b[7]]))
}

/// Every link-layer (`AF_PACKET`), IPv4 and IPv6 address of every
/// interface, in `getifaddrs` order (libpcap lists them so).
pub(crate) fn if_addresses() -> Vec<IfAddr> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = head;
    // SAFETY: walking the list getifaddrs made, before freeing it.
    while let Some(ifa) = unsafe { at.as_ref() } {
        // SAFETY: the list's own pointers.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        // SAFETY: as above.
        let addr = unsafe { sockaddr_bytes(ifa.ifa_addr) };
        if addr.is_some() {
            // SAFETY: as above; ifa_ifu is the broadcast or destination
            // address, by IFF_BROADCAST / IFF_POINTOPOINT.
            let (netmask, other) =
                unsafe { (sockaddr_bytes(ifa.ifa_netmask), sockaddr_bytes(ifa.ifa_ifu)) };
            let p2p = ifa.ifa_flags & libc::IFF_POINTOPOINT as c_uint != 0;
            let broadcast = ifa.ifa_flags & libc::IFF_BROADCAST as c_uint != 0;
            out.push(IfAddr {
                name,
                family: addr
                    .as_ref()
                    .map(|b| c_int::from(u16::from_ne_bytes([b[0], b[1]]))),
                v4: v4(&addr),
                v4_mask: v4(&netmask),
                addr,
                netmask,
                broadaddr: if broadcast { other.clone() } else { None },
                dstaddr: if p2p { other } else { None },
            });
        }
        at = ifa.ifa_next;
    }
    // SAFETY: the list getifaddrs made, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// A malloc'd copy of bytes (NULL for none), for C to free.
fn c_copy(bytes: Option<&[u8]>) -> *mut libc::sockaddr {
    let Some(b) = bytes else {
        return std::ptr::null_mut();
    };
    // SAFETY: a fresh allocation of b.len() bytes, checked, filled.
    unsafe {
        let p = libc::malloc(b.len()).cast::<u8>();
        if !p.is_null() {
            std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len());
        }
        p.cast()
    }
}

fn c_string(s: &str) -> *mut c_char {
    let c = CString::new(s).unwrap_or_default();
    // SAFETY: strdup of a valid C string; C frees it.
    unsafe { libc::strdup(c.as_ptr()) }
}

/// `pcap_findalldevs`: the interfaces, up and running first, `any`
/// before the ones that are not, loopback last among equals, as libpcap
/// lists them. Free with [`pcap_freealldevs`].
///
/// # Safety
/// `alldevsp` NULL or writable; `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_findalldevs(
    alldevsp: *mut *mut pcap_if,
    errbuf: *mut c_char,
) -> c_int {
    crate::guard::entry(-1, move || {
        if alldevsp.is_null() {
            return PCAP_ERROR;
        }
        let all = match sluice_live::interfaces() {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: as documented.
                unsafe { crate::put_errbuf(errbuf, &e.to_string()) };
                return PCAP_ERROR;
            }
        };
        let addrs = if_addresses();
        let mut entries: Vec<(String, Option<&str>, u32)> = all
            .iter()
            .map(|i| {
                let mut flags = 0;
                if i.up {
                    flags |= PCAP_IF_UP;
                }
                if i.running {
                    flags |= PCAP_IF_RUNNING;
                }
                if i.loopback {
                    flags |= PCAP_IF_LOOPBACK | PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE;
                } else {
                    flags |= match i.connected {
                        Some(true) => PCAP_IF_CONNECTION_STATUS_CONNECTED,
                        Some(false) => PCAP_IF_CONNECTION_STATUS_DISCONNECTED,
                        // The driver does not say: "not applicable" to libpcap.
                        None => PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
                    };
                }
                (i.name.clone(), None, flags)
            })
            .collect();
        let any_at = all
            .iter()
            .position(|i| i.loopback || !(i.up && i.running))
            .unwrap_or(all.len());
        entries.insert(
            any_at,
            (
                "any".into(),
                Some("Pseudo-device that captures on all interfaces"),
                PCAP_IF_UP | PCAP_IF_RUNNING | PCAP_IF_CONNECTION_STATUS_NOT_APPLICABLE,
            ),
        );
        let mut head: *mut pcap_if = std::ptr::null_mut();
        for (name, what, flags) in entries.iter().rev() {
            let mut list: *mut pcap_addr = std::ptr::null_mut();
            for a in addrs.iter().rev().filter(|a| a.name == *name) {
                // SAFETY: a zeroed allocation for one pcap_addr, checked.
                let node = unsafe { libc::calloc(1, std::mem::size_of::<pcap_addr>()) }
                    .cast::<pcap_addr>();
                if node.is_null() {
                    continue;
                }
                // SAFETY: the node just allocated.
                unsafe {
                    (*node).next = list;
                    (*node).addr = c_copy(a.addr.as_deref());
                    (*node).netmask = c_copy(a.netmask.as_deref());
                    (*node).broadaddr = c_copy(a.broadaddr.as_deref());
                    (*node).dstaddr = c_copy(a.dstaddr.as_deref());
                }
                list = node;
            }
            // SAFETY: a zeroed allocation for one pcap_if, checked.
            let dev = unsafe { libc::calloc(1, std::mem::size_of::<pcap_if>()) }.cast::<pcap_if>();
            if dev.is_null() {
                continue;
            }
            // SAFETY: the node just allocated.
            unsafe {
                (*dev).next = head;
                (*dev).name = c_string(name);
                (*dev).description = what.map_or(std::ptr::null_mut(), c_string);
                (*dev).addresses = list;
                (*dev).flags = *flags;
            }
            head = dev;
        }
        // SAFETY: checked non-NULL.
        unsafe { *alldevsp = head };
        0
    })
}

/// `pcap_freealldevs`.
///
/// # Safety
/// `alldevs` NULL or a list from [`pcap_findalldevs`].
#[no_mangle]
pub unsafe extern "C" fn pcap_freealldevs(alldevs: *mut pcap_if) {
    crate::guard::entry((), move || {
        let mut dev = alldevs;
        // SAFETY: the list and everything in it were malloc'd by
        // pcap_findalldevs; each is freed once.
        unsafe {
            while !dev.is_null() {
                let next = (*dev).next;
                let mut a = (*dev).addresses;
                while !a.is_null() {
                    let an = (*a).next;
                    libc::free((*a).addr.cast());
                    libc::free((*a).netmask.cast());
                    libc::free((*a).broadaddr.cast());
                    libc::free((*a).dstaddr.cast());
                    libc::free(a.cast());
                    a = an;
                }
                libc::free((*dev).name.cast());
                libc::free((*dev).description.cast());
                libc::free(dev.cast());
                dev = next;
            }
        }
    })
}

fn name_arg<'a>(s: *const c_char) -> Option<&'a str> {
    // SAFETY: C passes NULL or a C string.
    unsafe { crate::cstr(s) }.and_then(|c| c.to_str().ok())
}

thread_local! {
    static HOST_ADDRS: RefCell<(Vec<u32>, Vec<*mut u32>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// `pcap_nametoaddr`: a host's IPv4 addresses, in host byte order, as a
/// NULL-terminated array (per-thread, valid to the next call), or NULL.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoaddr(name: *const c_char) -> *mut *mut u32 {
    crate::guard::entry(std::ptr::null_mut(), move || {
        let Some(name) = name_arg(name) else {
            return std::ptr::null_mut();
        };
        use std::net::ToSocketAddrs;
        let found: Vec<u32> = match (name, 0).to_socket_addrs() {
            Ok(it) => it
                .filter_map(|a| match a {
                    std::net::SocketAddr::V4(v) => Some(u32::from(*v.ip())),
                    _ => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        if found.is_empty() {
            return std::ptr::null_mut();
        }
        HOST_ADDRS.with(|h| {
            let mut h = h.borrow_mut();
            h.0 = found;
            let base = h.0.as_mut_ptr();
            let n = h.0.len();
            // SAFETY: pointers into the vector just filled, n of them.
            h.1 = (0..n).map(|i| unsafe { base.add(i) }).collect();
            h.1.push(std::ptr::null_mut());
            h.1.as_mut_ptr()
        })
    })
}

/// `pcap_nametoaddrinfo`: `getaddrinfo` for a host (free with
/// `freeaddrinfo`), or NULL.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoaddrinfo(name: *const c_char) -> *mut libc::addrinfo {
    crate::guard::entry(std::ptr::null_mut(), move || {
        if name.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: an all-zero addrinfo is a valid "no hints" value.
        let mut hints: libc::addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_family = libc::AF_UNSPEC;
        hints.ai_socktype = libc::SOCK_STREAM;
        hints.ai_protocol = libc::IPPROTO_TCP;
        let mut res = std::ptr::null_mut();
        // SAFETY: a C string name, hints and an out-pointer.
        if unsafe { libc::getaddrinfo(name, std::ptr::null(), &hints, &mut res) } != 0 {
            return std::ptr::null_mut();
        }
        res
    })
}

#[repr(C)]
struct netent {
    n_name: *mut c_char,
    n_aliases: *mut *mut c_char,
    n_addrtype: c_int,
    n_net: u32,
}

extern "C" {
    fn getnetbyname(name: *const c_char) -> *mut netent;
    fn ether_hostton(hostname: *const c_char, addr: *mut [u8; 6]) -> c_int;
}

/// `pcap_nametonetaddr`: a network's number from the networks database,
/// or 0.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametonetaddr(name: *const c_char) -> u32 {
    crate::guard::entry(0, move || {
        if name.is_null() {
            return 0;
        }
        // SAFETY: a C string; the result is NULL or the C library's entry.
        unsafe { getnetbyname(name).as_ref() }.map_or(0, |n| n.n_net)
    })
}

/// The port of a service name for one protocol, or a number.
fn service(name: &str, proto: &CStr) -> Option<c_int> {
    let c = CString::new(name).ok()?;
    // SAFETY: C strings; the result is NULL or the C library's entry.
    let s = unsafe { libc::getservbyname(c.as_ptr(), proto.as_ptr()).as_ref() }?;
    Some(c_int::from(u16::from_be(s.s_port as u16)))
}

/// `pcap_nametoport`: a service's port and protocol (`PROTO_UNDEF` when
/// TCP and UDP both have it on the same port); 1 if found, else 0.
///
/// # Safety
/// `port` and `proto` writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoport(
    name: *const c_char,
    port: *mut c_int,
    proto: *mut c_int,
) -> c_int {
    crate::guard::entry(-1, move || {
        let (Some(name), false, false) = (name_arg(name), port.is_null(), proto.is_null()) else {
            return 0;
        };
        let (tcp, udp) = (service(name, c"tcp"), service(name, c"udp"));
        let (p, pr) = match (tcp, udp) {
            (Some(t), Some(u)) if t == u => (t, PROTO_UNDEF),
            (Some(t), _) => (t, libc::IPPROTO_TCP),
            (None, Some(u)) => (u, libc::IPPROTO_UDP),
            (None, None) => return 0,
        };
        // SAFETY: checked non-NULL, writable per the contract.
        unsafe { (*port, *proto) = (p, pr) };
        1
    })
}

/// `pcap_nametoportrange`: `A-B` of numbers or service names; 1 if both
/// ends are known, else 0.
///
/// # Safety
/// `port1`, `port2` and `proto` writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoportrange(
    name: *const c_char,
    port1: *mut c_int,
    port2: *mut c_int,
    proto: *mut c_int,
) -> c_int {
    crate::guard::entry(-1, move || {
        let Some((a, b)) = name_arg(name).and_then(|n| n.split_once('-')) else {
            return 0;
        };
        if port1.is_null() || port2.is_null() || proto.is_null() {
            return 0;
        }
        let end = |s: &str| -> Option<(c_int, c_int)> {
            if let Ok(n) = s.parse::<u16>() {
                return Some((c_int::from(n), PROTO_UNDEF));
            }
            let c = CString::new(s).ok()?;
            let (mut port, mut pr) = (0, 0);
            // SAFETY: local out-pointers and a C string.
            (unsafe { pcap_nametoport(c.as_ptr(), &mut port, &mut pr) } == 1).then_some((port, pr))
        };
        let (Some((p1, pr1)), Some((p2, pr2))) = (end(a), end(b)) else {
            return 0;
        };
        // SAFETY: checked non-NULL.
        unsafe { (*port1, *port2, *proto) = (p1, p2, if pr1 == pr2 { pr1 } else { PROTO_UNDEF }) };
        1
    })
}

/// `pcap_nametoproto`: an IP protocol's number, or `PROTO_UNDEF`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoproto(name: *const c_char) -> c_int {
    crate::guard::entry(-1, move || {
        if name.is_null() {
            return PROTO_UNDEF;
        }
        // SAFETY: a C string; the result is NULL or the C library's entry.
        unsafe { libc::getprotobyname(name).as_ref() }.map_or(PROTO_UNDEF, |p| p.p_proto)
    })
}

/// One entry of `eproto_db`.
#[repr(C)]
pub struct eproto {
    /// Name.
    pub s: *const c_char,
    /// Ethernet type.
    pub p: u16,
}

// SAFETY: the table only holds pointers to static strings.
unsafe impl Sync for eproto {}

macro_rules! ep {
    ($s:literal, $p:expr) => {
        eproto {
            s: $s.as_ptr(),
            p: $p,
        }
    };
}

/// libpcap's Ethernet-type names (`eproto_db`), NULL-terminated.
#[no_mangle]
pub static eproto_db: [eproto; 23] = [
    ep!(c"aarp", 0x80f3),
    ep!(c"arp", 0x0806),
    ep!(c"atalk", 0x809b),
    ep!(c"decnet", 0x6003),
    ep!(c"ip", 0x0800),
    ep!(c"ip6", 0x86dd),
    ep!(c"ipx", 0x8137),
    ep!(c"lat", 0x6004),
    ep!(c"loopback", 0x9000),
    ep!(c"mopdl", 0x6001),
    ep!(c"moprc", 0x6002),
    ep!(c"netbeui", 0x8191),
    ep!(c"pup", 0x0200),
    ep!(c"rarp", 0x8035),
    ep!(c"sca", 0x6007),
    ep!(c"sprite", 0x0500),
    ep!(c"vexp", 0x805b),
    ep!(c"vprod", 0x805c),
    ep!(c"xns", 0x0600),
    ep!(c"decdns", 0x803c),
    ep!(c"decdts", 0x803e),
    ep!(c"lanbridge", 0x8038),
    eproto {
        s: std::ptr::null(),
        p: 0,
    },
];

/// `pcap_nametoeproto`: an Ethernet type's number, or `PROTO_UNDEF`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametoeproto(name: *const c_char) -> c_int {
    crate::guard::entry(-1, move || {
        let Some(name) = name_arg(name) else {
            return PROTO_UNDEF;
        };
        eproto_db
            .iter()
            .take_while(|e| !e.s.is_null())
            // SAFETY: static C strings of the table.
            .find(|e| unsafe { CStr::from_ptr(e.s) }.to_bytes() == name.as_bytes())
            .map_or(PROTO_UNDEF, |e| c_int::from(e.p))
    })
}

/// `pcap_nametollc`: an LLC SAP's number, or `PROTO_UNDEF`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_nametollc(name: *const c_char) -> c_int {
    crate::guard::entry(-1, move || match name_arg(name) {
        Some("iso") => 0xfe,
        Some("stp") => 0x42,
        Some("ipx") => 0xe0,
        Some("netbeui") => 0xf0,
        _ => PROTO_UNDEF,
    })
}

/// Parses `xx:xx:xx:xx:xx:xx` (`:`, `.` or `-` between one or two hex
/// digits).
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '.', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut out = [0u8; 6];
    for (o, p) in out.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    Some(out)
}

fn c_mac(mac: [u8; 6]) -> *mut u8 {
    // SAFETY: a fresh 6-byte allocation, checked, filled.
    unsafe {
        let p = libc::malloc(6).cast::<u8>();
        if !p.is_null() {
            std::ptr::copy_nonoverlapping(mac.as_ptr(), p, 6);
        }
        p
    }
}

/// `pcap_ether_aton`: an Ethernet address in malloc'd 6 bytes, or NULL.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_ether_aton(s: *const c_char) -> *mut u8 {
    crate::guard::entry(std::ptr::null_mut(), move || {
        name_arg(s)
            .and_then(parse_mac)
            .map_or(std::ptr::null_mut(), c_mac)
    })
}

/// `pcap_ether_hostton`: a host's Ethernet address from the ethers
/// database, malloc'd, or NULL.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_ether_hostton(name: *const c_char) -> *mut u8 {
    crate::guard::entry(std::ptr::null_mut(), move || {
        if name.is_null() {
            return std::ptr::null_mut();
        }
        let mut mac = [0u8; 6];
        // SAFETY: a C string and a 6-byte out-buffer.
        if unsafe { ether_hostton(name, &mut mac) } != 0 {
            return std::ptr::null_mut();
        }
        c_mac(mac)
    })
}

/// `struct pcap_etherent`.
#[repr(C)]
pub struct pcap_etherent {
    /// Ethernet address.
    pub addr: [u8; 6],
    /// Host name.
    pub name: [c_char; 122],
}

thread_local! {
    static ETHERENT: RefCell<pcap_etherent> = const { RefCell::new(pcap_etherent { addr: [0; 6], name: [0; 122] }) };
}

/// `pcap_next_etherent`: the next `address name` line of an ethers file
/// (per-thread, valid to the next call), or NULL at the end.
///
/// # Safety
/// `fp` NULL or an open stream.
#[no_mangle]
pub unsafe extern "C" fn pcap_next_etherent(fp: *mut libc::FILE) -> *mut pcap_etherent {
    crate::guard::entry(std::ptr::null_mut(), move || {
        if fp.is_null() {
            return std::ptr::null_mut();
        }
        let mut line = [0 as c_char; 1024];
        loop {
            // SAFETY: an open stream and a buffer of that size.
            if unsafe { libc::fgets(line.as_mut_ptr(), line.len() as c_int, fp) }.is_null() {
                return std::ptr::null_mut();
            }
            // SAFETY: fgets NUL-terminates.
            let text = unsafe { CStr::from_ptr(line.as_ptr()) }.to_string_lossy();
            let text = text.split('#').next().unwrap_or_default();
            let mut words = text.split_whitespace();
            let (Some(addr), Some(name)) = (words.next(), words.next()) else {
                continue;
            };
            let Some(mac) = parse_mac(addr) else {
                continue;
            };
            return ETHERENT.with(|e| {
                let mut e = e.borrow_mut();
                e.addr = mac;
                e.name = [0; 122];
                for (d, s) in e.name.iter_mut().zip(name.bytes().take(121)) {
                    *d = s as c_char;
                }
                &mut *e as *mut pcap_etherent
            });
        }
    })
}
