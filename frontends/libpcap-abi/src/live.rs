//! Live capture: `pcap_create`, its setters and `pcap_activate` open
//! sluice's TPACKET_V3 ring ([`sluice_live::Capture`]); `pcap_setfilter`
//! puts the program in the kernel too; interfaces, statistics, the
//! selectable descriptor and sending, as libpcap has them on Linux.
//!
//! Packets handed over are judged in user space by the handle's filter
//! (the kernel program is a pre-filter: it lets VLAN-tagged frames
//! through, as the kernel sees them with the tag taken off). A read
//! that stops in the middle of a ring block (a count reached,
//! `pcap_breakloop`) leaves the block's other packets in the ring for the
//! next read, so none is lost and the descriptor stays readable for
//! programs that `select` on it (dumpcap reads one packet per wake-up).

use crate::filter::Installed;
use crate::handle::{handle_or, lock, pcap_t, Kind, Source, BAD_HANDLE};
use crate::names::linktype_to_dlt;
use crate::read::{accepts, header};
use crate::types::*;
use sluice_capture::Packet;
use sluice_live::{Capture, Config, Direction, KernelFilter, LiveError};
use std::ffi::{c_char, c_int, CString};

use std::time::Duration;

/// What `pcap_create`'s setters record, for `pcap_activate`.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    device: String,
    snaplen: c_int,
    promisc: bool,
    timeout_ms: c_int,
    buffer_size: c_int,
    immediate: bool,
    direction: Direction,
}

impl Settings {
    /// `pcap_set_timeout`'s milliseconds.
    pub(crate) fn timeout_ms(&self) -> c_int {
        self.timeout_ms
    }
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            device: "any".into(),
            snaplen: 262_144,
            promisc: false,
            timeout_ms: 0,
            buffer_size: 2 << 20,
            immediate: false,
            direction: Direction::InOut,
        }
    }
}

/// Where a live handle's packets come from.
pub(crate) enum Feed {
    /// A ring of its own.
    Ring(Capture),
    /// The sluice daemon's shared buffers (`SLUICE_DAEMON`).
    Daemon(crate::attach::Attached),
}

/// An activated capture.
pub(crate) struct Live {
    feed: Feed,
    /// The link types the device offers (`pcap_list_datalinks`).
    dlts: Vec<c_int>,
    /// The filter judges a frame as the kernel saw it (see
    /// [`Live::set_kernel_filter`]).
    judge_kernel_view: bool,
    buffer: c_int,
    sender: Option<sluice_live::Sender>,
    /// The packet last handed over (a copy: the ring's block moves on).
    pkt: Vec<u8>,
}

impl Live {
    pub(crate) fn fd(&self) -> c_int {
        match &self.feed {
            Feed::Ring(cap) => cap.fd(),
            Feed::Daemon(d) => d.fd(),
        }
    }

    /// The device's name.
    pub(crate) fn device(&self) -> &str {
        match &self.feed {
            Feed::Ring(cap) => cap.name(),
            Feed::Daemon(d) => d.device(),
        }
    }

    pub(crate) fn buffer_size(&self) -> c_int {
        self.buffer
    }

    /// The link types the device offers.
    pub(crate) fn datalinks(&self) -> &[c_int] {
        &self.dlts
    }

    /// Puts the program in the kernel; one the kernel cannot run leaves
    /// the kernel accepting everything (user space still filters). On
    /// Ethernet a program that does not read VLAN tags runs as libpcap's
    /// does, on the frame as the kernel sees it (a tag the kernel took
    /// off is not in it), and user space judges that same frame.
    pub(crate) fn set_kernel_filter(&mut self, p: &Installed) -> Result<(), String> {
        let cap = match &mut self.feed {
            Feed::Ring(cap) => cap,
            Feed::Daemon(d) => return d.set_filter(p.program.bpf()),
        };
        let (bpf, linktype) = (p.program.bpf(), cap.linktype());
        self.judge_kernel_view = linktype == 1 && !p.reads_vlan_tags;
        let kf = if self.judge_kernel_view {
            KernelFilter::as_kernel_sees(bpf, linktype)
        } else {
            KernelFilter::new(bpf, linktype)
        };
        cap.set_filter(kf).map(|_| ()).map_err(|e| e.to_string())
    }

    /// The kernel's counts since the capture opened.
    pub(crate) fn stats(&mut self) -> Result<pcap_stat, String> {
        let cap = match &mut self.feed {
            Feed::Ring(cap) => cap,
            Feed::Daemon(d) => return Ok(d.stats()),
        };
        let s = cap.stats().map_err(|e| live_message(&e).1)?;
        Ok(pcap_stat {
            ps_recv: s.received as u32,
            ps_drop: s.dropped as u32,
            ps_ifdrop: 0,
        })
    }

    /// The next packet ready in the ring that `filter` accepts, copied
    /// out of the ring (`None`: nothing ready now). Does not wait: the
    /// caller waits on [`Live::fd`] outside, where it may be cancelled.
    /// The rest of the ring block stays for the next call, so the socket
    /// stays readable for programs that `select` on it.
    pub(crate) fn take_one(
        &mut self,
        filter: Option<&sluice_filter::Program>,
        nano: bool,
    ) -> Result<Option<(pcap_pkthdr, *const u8)>, String> {
        let kernel_view = self.judge_kernel_view;
        let cap = match &mut self.feed {
            Feed::Ring(cap) => cap,
            Feed::Daemon(d) => return d.take_one(filter, nano),
        };
        let (pkt_buf, mut got) = (&mut self.pkt, None);
        let r = cap.dispatch_views(Duration::ZERO, |pkt, view| {
            let judged = match view {
                Some(v) if kernel_view => Packet {
                    data: v,
                    caplen: v.len() as u32,
                    wirelen: pkt.wirelen.saturating_sub(4),
                    ..*pkt
                },
                _ => *pkt,
            };
            if !accepts(filter, &judged) {
                return true;
            }
            pkt_buf.clear();
            pkt_buf.extend_from_slice(pkt.data);
            got = Some(header(pkt, nano));
            false
        });
        match (r, got) {
            (_, Some(hdr)) => Ok(Some((hdr, self.pkt.as_ptr()))),
            (Ok(_), None) => Ok(None),
            (Err(e), None) => Err(live_message(&e).1),
        }
    }
}

/// The link types libpcap offers for a device on Linux: a wired
/// Ethernet device also offers DOCSIS (a cable modem termination system
/// puts DOCSIS frames on Ethernet), the others their own type only.
fn device_datalinks(device: &str, dlt: c_int) -> Vec<c_int> {
    const DLT_EN10MB: c_int = 1;
    const DLT_DOCSIS: c_int = 143;
    const ARPHRD_ETHER: u16 = 1;
    let wired_ethernet = dlt == DLT_EN10MB
        && sluice_live::interfaces::interface(device).is_ok_and(|i| i.hardware == ARPHRD_ETHER)
        && !std::path::Path::new("/sys/class/net")
            .join(device)
            .join("wireless")
            .exists();
    if wired_ethernet {
        vec![DLT_EN10MB, DLT_DOCSIS]
    } else {
        vec![dlt]
    }
}

/// libpcap's status code and message for a live error.
fn live_message(e: &LiveError) -> (c_int, String) {
    match e {
        LiveError::Permission { call, source, .. } => (
            PCAP_ERROR_PERM_DENIED,
            format!(
                "{call}: {}",
                crate::names::errno_text(source.raw_os_error().unwrap_or(libc::EPERM))
            ),
        ),
        LiveError::NoSuchInterface(_) | LiveError::InterfaceGone(_) => {
            (PCAP_ERROR_NO_SUCH_DEVICE, "No such device exists".into())
        }
        LiveError::InterfaceDown(_) => (PCAP_ERROR, "The interface went down".into()),
        other => (PCAP_ERROR, other.to_string()),
    }
}

/// `pcap_create`: a handle on an interface (NULL is `any`), to be set up
/// and activated.
///
/// # Safety
/// `source` NULL or a C string; `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_create(source: *const c_char, _errbuf: *mut c_char) -> *mut pcap_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        let device = unsafe { crate::cstr(source) }
            .map_or_else(|| "any".into(), |s| s.to_string_lossy().into_owned());
        let p = pcap_t::register(Source::Created, 1, 262_144, PCAP_TSTAMP_PRECISION_MICRO);
        if let Some(h) = pcap_t::get(p) {
            lock(&h.settings).device = device;
        }
        p
    })
}

/// Runs `set` on a created handle's settings: 0, or
/// `PCAP_ERROR_ACTIVATED` once the handle is active.
fn set(p: *mut pcap_t, set: impl FnOnce(&mut Settings)) -> c_int {
    let h = handle_or!(p, BAD_HANDLE);
    if h.is_activated() {
        return h.fail(PCAP_ERROR_ACTIVATED, crate::types::ACTIVATED_MSG);
    }
    set(&mut lock(&h.settings));
    0
}

/// `pcap_set_snaplen`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_snaplen(p: *mut pcap_t, snaplen: c_int) -> c_int {
    crate::guard::entry(-1, move || set(p, |s| s.snaplen = snaplen))
}

/// `pcap_set_promisc`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_promisc(p: *mut pcap_t, promisc: c_int) -> c_int {
    crate::guard::entry(-1, move || set(p, |s| s.promisc = promisc != 0))
}

/// `pcap_set_timeout`: milliseconds a read waits for packets (the ring's
/// block time-out).
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_timeout(p: *mut pcap_t, ms: c_int) -> c_int {
    crate::guard::entry(-1, move || set(p, |s| s.timeout_ms = ms.max(0)))
}

/// `pcap_set_buffer_size`: the ring's size in bytes.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_buffer_size(p: *mut pcap_t, bytes: c_int) -> c_int {
    crate::guard::entry(-1, move || {
        set(p, |s| {
            if bytes > 0 {
                s.buffer_size = bytes;
            }
        })
    })
}

/// `pcap_set_immediate_mode`: hand packets over as they arrive.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_immediate_mode(p: *mut pcap_t, on: c_int) -> c_int {
    crate::guard::entry(-1, move || set(p, |s| s.immediate = on != 0))
}

/// `pcap_set_rfmon`: monitor mode is not offered; accepted when off.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_rfmon(p: *mut pcap_t, _on: c_int) -> c_int {
    crate::guard::entry(-1, move || set(p, |_| ()))
}

/// `pcap_can_set_rfmon`: 0 (no monitor mode).
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_can_set_rfmon(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        handle_or!(p, BAD_HANDLE);
        0
    })
}

/// `pcap_set_tstamp_type`: only the host's time stamps are offered.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_tstamp_type(p: *mut pcap_t, t: c_int) -> c_int {
    crate::guard::entry(-1, move || match set(p, |_| ()) {
        0 if t == 0 => 0,
        0 => PCAP_WARNING_TSTAMP_TYPE_NOTSUP,
        e => e,
    })
}

/// `pcap_set_tstamp_precision`: micro- or nanoseconds.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_tstamp_precision(p: *mut pcap_t, precision: c_int) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if h.is_activated() {
            return h.fail(PCAP_ERROR_ACTIVATED, crate::types::ACTIVATED_MSG);
        }
        if precision != PCAP_TSTAMP_PRECISION_MICRO && precision != PCAP_TSTAMP_PRECISION_NANO {
            return PCAP_ERROR_TSTAMP_PRECISION_NOTSUP;
        }
        h.precision.set(precision);
        0
    })
}

/// `pcap_set_protocol_linux`: only `ETH_P_ALL` (0) is offered.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_set_protocol_linux(p: *mut pcap_t, protocol: c_int) -> c_int {
    crate::guard::entry(-1, move || match set(p, |_| ()) {
        0 if protocol == 0 || protocol == libc::ETH_P_ALL => 0,
        0 => PCAP_ERROR,
        e => e,
    })
}

/// `pcap_list_tstamp_types`: the one type offered, the host's
/// (`PCAP_TSTAMP_HOST`), in a malloc'd list freed by
/// [`pcap_free_tstamp_types`].
///
/// # Safety
/// `p` NULL or from this library; `types` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_list_tstamp_types(p: *mut pcap_t, types: *mut *mut c_int) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if types.is_null() {
            return h.fail(PCAP_ERROR, "pcap_list_tstamp_types: NULL list pointer");
        }
        // SAFETY: malloc of one int, checked.
        let list = unsafe { libc::malloc(std::mem::size_of::<c_int>()) }.cast::<c_int>();
        if list.is_null() {
            return h.fail(PCAP_ERROR, "malloc: Cannot allocate memory");
        }
        // SAFETY: one int allocated; `types` writable per the contract.
        unsafe {
            *list = 0;
            *types = list;
        }
        1
    })
}

/// `pcap_free_tstamp_types`.
///
/// # Safety
/// `types` NULL or from [`pcap_list_tstamp_types`].
#[no_mangle]
pub unsafe extern "C" fn pcap_free_tstamp_types(types: *mut c_int) {
    crate::guard::entry((), move || {
        // SAFETY: malloc'd or NULL.
        unsafe { libc::free(types.cast()) }
    })
}

/// `pcap_activate`: opens the ring. 0, or a `PCAP_ERROR_*` code with
/// `pcap_geterr` saying why.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_activate(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if h.is_activated() {
            return h.fail(PCAP_ERROR_ACTIVATED, crate::types::ACTIVATED_MSG);
        }
        let s = lock(&h.settings).clone();
        let mut config = Config::new(&s.device);
        config.snaplen = if s.snaplen <= 0 || s.snaplen > 262_144 {
            262_144
        } else {
            s.snaplen as u32
        };
        config.promiscuous = s.promisc;
        config.direction = s.direction;
        config.immediate = s.immediate;
        if s.timeout_ms > 0 {
            config.block_timeout = Duration::from_millis(s.timeout_ms as u64);
        }
        config.buffer_kib((s.buffer_size.max(65_536) as usize).div_ceil(1024));
        // With SLUICE_DAEMON set, the daemon captures and this handle reads
        // its shared buffers.
        let daemon = std::env::var("SLUICE_DAEMON")
            .ok()
            .filter(|p| !p.is_empty());
        let (feed, linktype, snaplen) = match daemon {
            Some(path) => match crate::attach::Attached::open(&path, &s.device) {
                Ok(d) => {
                    let (lt, sl) = (d.linktype(), d.snaplen().min(config.snaplen));
                    (Feed::Daemon(d), lt, sl)
                }
                Err(msg) => return h.fail(PCAP_ERROR, &msg),
            },
            None => match Capture::open(&config) {
                Ok(c) => {
                    let (lt, sl) = (c.linktype(), c.snaplen());
                    (Feed::Ring(c), lt, sl)
                }
                Err(e) => {
                    let (code, msg) = live_message(&e);
                    return h.fail(code, &msg);
                }
            },
        };
        let dlt = linktype_to_dlt(u32::from(linktype));
        h.dlt.set(dlt);
        h.snapshot.set(snaplen as c_int);
        let live = Live {
            dlts: device_datalinks(&s.device, dlt),
            judge_kernel_view: false,
            buffer: (config.block_size * config.blocks) as c_int,
            feed,
            sender: None,
            pkt: Vec::new(),
        };
        h.socket.set(live.fd());
        h.selectable.set(live.fd());
        h.set_source(Source::Live(Box::new(live)));
        0
    })
}

/// `pcap_open_live`: [`pcap_create`], the settings and [`pcap_activate`]
/// in one call.
///
/// # Safety
/// `device` NULL or a C string; `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_open_live(
    device: *const c_char,
    snaplen: c_int,
    promisc: c_int,
    to_ms: c_int,
    errbuf: *mut c_char,
) -> *mut pcap_t {
    crate::guard::entry(std::ptr::null_mut(), move || {
        // SAFETY: as documented.
        let p = unsafe { pcap_create(device, errbuf) };
        // SAFETY: p was just created by this library.
        let status = unsafe {
            pcap_set_snaplen(p, snaplen);
            pcap_set_promisc(p, promisc);
            pcap_set_timeout(p, to_ms);
            pcap_activate(p)
        };
        if status < 0 {
            let Some(h) = pcap_t::get(p) else {
                return std::ptr::null_mut();
            };
            let dev = lock(&h.settings).device.clone();
            // SAFETY: the handle's NUL-terminated buffer.
            let why = unsafe { crate::cstr(h.errbuf_ptr()) }
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            // SAFETY: a static or per-thread C string.
            let status_text = unsafe { crate::cstr(crate::names::pcap_statustostr(status)) }
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let msg = match status {
                PCAP_ERROR => format!("{dev}: {why}"),
                PCAP_ERROR_NO_SUCH_DEVICE | PCAP_ERROR_PERM_DENIED | -11 => {
                    format!("{dev}: {status_text} ({why})")
                }
                _ => format!("{dev}: {status_text}"),
            };
            // SAFETY: as documented.
            unsafe { crate::put_errbuf(errbuf, &msg) };
            // SAFETY: registered, not used again.
            unsafe { crate::handle::pcap_close(p) };
            return std::ptr::null_mut();
        }
        p
    })
}

/// `pcap_setdirection`: `PCAP_D_INOUT`, `PCAP_D_IN` or `PCAP_D_OUT`.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_setdirection(p: *mut pcap_t, d: c_int) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        let dir = match d {
            PCAP_D_INOUT => Direction::InOut,
            PCAP_D_IN => Direction::In,
            PCAP_D_OUT => Direction::Out,
            _ => return h.fail(PCAP_ERROR, &format!("Invalid direction {d}")),
        };
        if matches!(h.kind(), Kind::Offline | Kind::Dead) {
            return h.fail(
                PCAP_ERROR,
                "Setting direction is not supported on savefiles",
            );
        }
        lock(&h.settings).direction = dir;
        if let Source::Live(l) = &mut *h.source.lock() {
            if let Feed::Ring(cap) = &mut l.feed {
                cap.set_direction(dir);
            }
        }
        0
    })
}

/// `pcap_get_selectable_fd`: the socket, readable when packets wait.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_get_selectable_fd(p: *mut pcap_t) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, -1);
        // A live capture's socket, a file's descriptor, as libpcap
        // gives them.
        match h.kind() {
            Kind::Live | Kind::Offline => h.selectable.get(),
            _ => -1,
        }
    })
}

/// `pcap_get_required_select_timeout`: NULL (the descriptor is enough).
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_get_required_select_timeout(_p: *mut pcap_t) -> *const libc::timeval {
    std::ptr::null()
}

/// `pcap_setnonblock`: reads return at once when nothing waits.
///
/// # Safety
/// `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_setnonblock(
    p: *mut pcap_t,
    nonblock: c_int,
    _errbuf: *mut c_char,
) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if h.kind() == Kind::Offline {
            return h.fail(PCAP_ERROR, "Savefiles cannot be put into non-blocking mode");
        }
        h.nonblock.set(nonblock != 0);
        0
    })
}

/// `pcap_getnonblock`.
///
/// # Safety
/// `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_getnonblock(p: *mut pcap_t, _errbuf: *mut c_char) -> c_int {
    crate::guard::entry(-1, move || {
        c_int::from(handle_or!(p, BAD_HANDLE).nonblock.get())
    })
}

/// `pcap_stats`: packets the kernel received and dropped since the
/// capture opened.
///
/// # Safety
/// `ps` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn pcap_stats(p: *mut pcap_t, ps: *mut pcap_stat) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        let stats = match h.kind() {
            Kind::Live => match &mut *h.source.lock() {
                Source::Live(l) => match l.stats() {
                    Ok(s) => s,
                    Err(e) => return h.fail(PCAP_ERROR, &e),
                },
                _ => return BAD_HANDLE,
            },
            Kind::Offline => {
                return h.fail(PCAP_ERROR, "Statistics aren't available from savefiles")
            }
            Kind::Dead => {
                return h.fail(
                    PCAP_ERROR,
                    "Statistics aren't available from a pcap_open_dead pcap_t",
                )
            }
            Kind::Created => {
                return h.fail(PCAP_ERROR_NOT_ACTIVATED, crate::types::NOT_ACTIVATED_MSG)
            }
            Kind::Closed => return BAD_HANDLE,
        };
        if ps.is_null() {
            return h.fail(PCAP_ERROR, "pcap_stats: NULL statistics pointer");
        }
        // SAFETY: writable per the contract.
        unsafe { *ps = stats };
        0
    })
}

/// `pcap_inject`: sends a frame on the capture's interface; the bytes
/// sent, or -1.
///
/// # Safety
/// `buf` valid for `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_inject(
    p: *mut pcap_t,
    buf: *const libc::c_void,
    size: usize,
) -> c_int {
    crate::guard::entry(-1, move || {
        let h = handle_or!(p, BAD_HANDLE);
        if buf.is_null() {
            return h.fail(PCAP_ERROR, "pcap_inject: NULL buffer");
        }
        // SAFETY: size bytes per the contract.
        let frame = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size) };
        let mut src = h.source.lock();
        let Source::Live(l) = &mut *src else {
            return h.fail(PCAP_ERROR, "Sending packets isn't supported on savefiles");
        };
        if l.sender.is_none() {
            match sluice_live::Sender::open(l.device(), sluice_live::Pace::Top) {
                Ok(s) => l.sender = Some(s),
                Err(e) => return h.fail(PCAP_ERROR, &format!("send: {e}")),
            }
        }
        let Some(sender) = l.sender.as_mut() else {
            return PCAP_ERROR;
        };
        let before = sender.stats();
        if let Err(e) = sender.send(&[(frame, 0)]) {
            return h.fail(PCAP_ERROR, &format!("send: {e}"));
        }
        if sender.stats().sent > before.sent {
            size as c_int
        } else {
            h.fail(PCAP_ERROR, "send: the frame was refused")
        }
    })
}

/// `pcap_sendpacket`: [`pcap_inject`] returning 0 or -1.
///
/// # Safety
/// As [`pcap_inject`].
#[no_mangle]
pub unsafe extern "C" fn pcap_sendpacket(p: *mut pcap_t, buf: *const u8, size: c_int) -> c_int {
    crate::guard::entry(-1, move || {
        // SAFETY: as documented.
        if unsafe { pcap_inject(p, buf.cast(), size.max(0) as usize) } < 0 {
            PCAP_ERROR
        } else {
            0
        }
    })
}

/// `pcap_init`: nothing to set up; the two character encodings are
/// accepted, anything else refused.
///
/// # Safety
/// Pointer arguments are NULL or valid, as for libpcap.
#[no_mangle]
pub unsafe extern "C" fn pcap_init(opts: std::ffi::c_uint, errbuf: *mut c_char) -> c_int {
    crate::guard::entry(-1, move || {
        // PCAP_CHAR_ENC_LOCAL (0) and PCAP_CHAR_ENC_UTF_8 (1).
        if opts > 1 {
            // SAFETY: NULL or PCAP_ERRBUF_SIZE bytes.
            unsafe { crate::put_errbuf(errbuf, "Unknown options specified") };
            return PCAP_ERROR;
        }
        0
    })
}

/// The IPv4 address and netmask of an interface, from `getifaddrs`.
fn ipv4_of(device: &str) -> Option<(u32, u32)> {
    let mut found = None;
    for a in crate::nametoaddr::if_addresses() {
        if a.name == device {
            if let (Some(libc::AF_INET), Some(addr), Some(mask)) = (a.family, a.v4, a.v4_mask) {
                found = Some((addr, mask));
                break;
            }
        }
    }
    found
}

/// `pcap_lookupnet`: an interface's IPv4 network and netmask, in network
/// byte order (0 and 0 for `any`).
///
/// # Safety
/// `device` NULL or a C string; `net`, `mask` writable; `errbuf` NULL or
/// `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_lookupnet(
    device: *const c_char,
    net: *mut u32,
    mask: *mut u32,
    errbuf: *mut c_char,
) -> c_int {
    crate::guard::entry(-1, move || {
        if net.is_null() || mask.is_null() {
            // SAFETY: as documented.
            unsafe { crate::put_errbuf(errbuf, "pcap_lookupnet: NULL result pointer") };
            return PCAP_ERROR;
        }
        // SAFETY: as documented.
        let dev = unsafe { crate::cstr(device) }.map(|d| d.to_string_lossy().into_owned());
        let Some(dev) = dev.filter(|d| d != "any") else {
            // SAFETY: checked non-NULL.
            unsafe { (*net, *mask) = (0, 0) };
            return 0;
        };
        match ipv4_of(&dev) {
            Some((addr, m)) => {
                // SAFETY: checked non-NULL; both in network byte order.
                unsafe { (*net, *mask) = (addr & m, m) };
                0
            }
            None => {
                let msg = if sluice_live::interfaces::interface(&dev).is_ok() {
                    format!("{dev}: no IPv4 address assigned")
                } else {
                    format!("SIOCGIFADDR: {dev}: No such device")
                };
                // SAFETY: as documented.
                unsafe { crate::put_errbuf(errbuf, &msg) };
                PCAP_ERROR
            }
        }
    })
}

/// `pcap_lookupdev`: the first interface that is up and not loopback.
///
/// # Safety
/// `errbuf` NULL or `PCAP_ERRBUF_SIZE` bytes.
#[no_mangle]
pub unsafe extern "C" fn pcap_lookupdev(errbuf: *mut c_char) -> *mut c_char {
    crate::guard::entry(std::ptr::null_mut(), move || {
        thread_local! {
            static NAME: std::cell::RefCell<CString> = std::cell::RefCell::new(CString::default());
        }
        let first = sluice_live::interfaces()
            .ok()
            .and_then(|all| all.into_iter().find(|i| i.up && !i.loopback))
            .and_then(|i| CString::new(i.name).ok());
        match first {
            Some(name) => NAME.with(|n| {
                *n.borrow_mut() = name;
                n.borrow().as_ptr().cast_mut()
            }),
            None => {
                // SAFETY: as documented.
                unsafe { crate::put_errbuf(errbuf, "no suitable device found") };
                std::ptr::null_mut()
            }
        }
    })
}
