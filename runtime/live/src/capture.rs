//! A live capture on one interface (or `any`): a packet socket with a
//! TPACKET_V3 receive ring, promiscuous mode, a direction, an optional
//! kernel pre-filter and an optional fanout group; packets come out as
//! [`sluice_capture::Packet`]s, the type capture files give.

use crate::interfaces::{self, Interface, LINUX_SLL2};
use crate::kernel::KernelFilter;
use crate::ring::{BlockWalk, Framing, PACKET_OUTGOING};
use crate::sys::{PacketSocket, RingMap};
use crate::LiveError;
use sluice_capture::Packet;
use std::time::Duration;

/// `ETH_P_ALL`: every protocol.
const ETH_P_ALL: u16 = 0x0003;
/// `TPACKET_V3` of `enum tpacket_versions`.
const TPACKET_V3: libc::c_int = 2;

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

/// Which packets to capture by direction (tcpdump's `-Q`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Direction {
    /// Received and sent (the default).
    #[default]
    InOut,
    /// Received only.
    In,
    /// Sent only.
    Out,
}

/// How a capture is set up. [`Config::new`] gives defaults that suit a
/// 10 Gb/s link: 64 blocks of 1 MiB (about 50 ms of a full link), blocks
/// handed over after at most 100 ms.
#[derive(Clone, Debug)]
pub struct Config {
    /// The interface's name, or `any` for every interface (Linux cooked v2).
    pub interface: String,
    /// Bytes kept of each packet (libpcap's snapshot length).
    pub snaplen: u32,
    /// Put the interface in promiscuous mode (not for `any`).
    pub promiscuous: bool,
    /// Directions captured.
    pub direction: Direction,
    /// Bytes per ring block (a multiple of the page size).
    pub block_size: usize,
    /// Blocks in the ring.
    pub blocks: usize,
    /// How long the kernel fills a block before handing it over anyway.
    pub block_timeout: Duration,
    /// Hand packets over as soon as they arrive (a 1 ms block timeout).
    pub immediate: bool,
    /// Join this fanout group (the kernel's symmetric flow hash: both
    /// directions on one socket, and the fragments of a datagram, hashed on
    /// its addresses, too; no defragmentation, so frames stay as sent),
    /// for several workers on one interface.
    pub fanout: Option<u16>,
}

impl Config {
    /// The defaults for `interface`.
    ///
    /// ```
    /// let c = sluice_live::Config::new("eth0");
    /// assert_eq!((c.block_size, c.blocks, c.snaplen), (1 << 20, 64, 262144));
    /// ```
    pub fn new(interface: &str) -> Config {
        Config {
            interface: interface.to_string(),
            snaplen: 262144,
            promiscuous: true,
            direction: Direction::InOut,
            block_size: 1 << 20,
            blocks: 64,
            block_timeout: Duration::from_millis(100),
            immediate: false,
            fanout: None,
        }
    }

    /// Set the ring's total size in KiB (tcpdump's `-B`), keeping the
    /// block size (fewer, smaller blocks for rings under 4 MiB).
    pub fn buffer_kib(&mut self, kib: usize) {
        let bytes = kib.max(64) * 1024;
        let page = 4096;
        if bytes < 4 * self.block_size {
            self.block_size = (bytes / 4).max(page) / page * page;
        }
        self.blocks = (bytes / self.block_size).max(2);
    }
}

/// Counts the kernel keeps for a socket (`PACKET_STATISTICS`), summed over
/// the capture's life.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelStats {
    /// Packets that passed the kernel filter (dropped ones included):
    /// tcpdump's "received by filter".
    pub received: u64,
    /// Packets the kernel dropped because the ring was full: tcpdump's
    /// "dropped by kernel".
    pub dropped: u64,
}

/// A live capture (see the module documentation).
pub struct Capture {
    sock: PacketSocket,
    ring: RingMap,
    next_block: usize,
    /// Where a dispatch stopped inside `next_block`, which stays the
    /// user's until its last packet is handed over.
    held: Option<Resume>,
    framing: Framing,
    linktype: u16,
    snaplen: u32,
    direction: Direction,
    lo_index: Option<i32>,
    name: String,
    scratch: Vec<u8>,
    stats: KernelStats,
    filter: Option<KernelFilter>,
}

/// Where to go on in a block a dispatch stopped in.
#[derive(Clone, Copy, Debug)]
struct Resume {
    left: u32,
    at: usize,
}

/// What one [`Capture::dispatch`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dispatched {
    /// Packets handed to the callback.
    pub packets: u64,
    /// Blocks handed back to the kernel.
    pub blocks: u64,
    /// The callback asked to stop.
    pub stopped: bool,
}

impl Capture {
    /// Open a capture as `config` says.
    ///
    /// Errors name the interface and the failing call; no permission to
    /// open a packet socket is [`LiveError::Permission`].
    pub fn open(config: &Config) -> Result<Capture, LiveError> {
        Capture::open_filtered(config, None)
    }

    /// Open a capture with a kernel pre-filter attached before any packet
    /// reaches the ring.
    pub fn open_filtered(
        config: &Config,
        filter: Option<KernelFilter>,
    ) -> Result<Capture, LiveError> {
        let name = config.interface.as_str();
        let any = name == "any";
        // The socket first: without permission, that is what to report.
        let cooked_any = any;
        let sock = PacketSocket::new(cooked_any).map_err(|e| LiveError::call(name, "socket", e))?;
        let iface: Option<Interface> = if any {
            None
        } else {
            Some(interfaces::interface(name)?)
        };
        let (linktype, cooked) = match &iface {
            None => (LINUX_SLL2, true),
            Some(i) => i.linktype(),
        };
        let sock = if cooked && !cooked_any {
            PacketSocket::new(true).map_err(|e| LiveError::call(name, "socket", e))?
        } else {
            sock
        };
        if config.block_size % 4096 != 0 || config.block_size < 8192 || config.blocks < 2 {
            return Err(LiveError::Config(format!(
                "{name}: ring blocks must be a multiple of 4096 bytes, at least 8192, and at least 2 of them (got {} x {})",
                config.block_size, config.blocks
            )));
        }
        let call = |call: &'static str| move |e| LiveError::call(name, call, e);
        sock.set(libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)
            .map_err(call("PACKET_VERSION"))?;
        if config.direction == Direction::In {
            // Older kernels lack it; the direction is also checked below.
            let _ = sock.set(
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &1 as &libc::c_int,
            );
        }
        let timeout = if config.immediate {
            Duration::from_millis(1)
        } else {
            config.block_timeout
        };
        let frame_size = 2048;
        let req = libc::tpacket_req3 {
            tp_block_size: config.block_size as u32,
            tp_block_nr: config.blocks as u32,
            tp_frame_size: frame_size,
            tp_frame_nr: (config.block_size / frame_size as usize * config.blocks) as u32,
            tp_retire_blk_tov: timeout.as_millis().clamp(1, u32::MAX as u128) as u32,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sock.set(libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
            .map_err(call("PACKET_RX_RING"))?;
        let ring = RingMap::new(&sock, config.block_size, config.blocks).map_err(call("mmap"))?;
        let mut capture = Capture {
            sock,
            ring,
            next_block: 0,
            held: None,
            framing: Framing::new(linktype, cooked),
            linktype,
            snaplen: config.snaplen.max(1),
            direction: config.direction,
            lo_index: interfaces::interface("lo").ok().map(|i| i.index),
            name: name.to_string(),
            scratch: Vec::with_capacity(65536),
            stats: KernelStats::default(),
            filter: None,
        };
        if let Some(f) = filter {
            capture.set_filter(Some(f))?;
        }
        let index = iface.as_ref().map_or(0, |i| i.index);
        capture.sock.bind(index, ETH_P_ALL).map_err(call("bind"))?;
        if config.promiscuous && !any {
            let mreq = libc::packet_mreq {
                mr_ifindex: index,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            capture
                .sock
                .set(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(call("PACKET_ADD_MEMBERSHIP"))?;
        }
        if let Some(group) = config.fanout {
            let arg: u32 = u32::from(group) | (libc::PACKET_FANOUT_HASH << 16);
            capture
                .sock
                .set(libc::SOL_PACKET, libc::PACKET_FANOUT, &arg)
                .map_err(call("PACKET_FANOUT"))?;
        }
        // A fresh start for the counters.
        capture.read_stats()?;
        capture.stats = KernelStats::default();
        Ok(capture)
    }

    /// The capture's link type (`LINKTYPE_*`).
    pub fn linktype(&self) -> u16 {
        self.linktype
    }

    /// The snapshot length.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The packet socket's descriptor: readable (for `poll`/`select`)
    /// when a ring block is ready, as libpcap's selectable descriptor.
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.sock.raw()
    }

    /// Which directions are handed over from now on (`pcap_setdirection`).
    pub fn set_direction(&mut self, direction: Direction) {
        self.direction = direction;
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attach (or with `None`, detach) the kernel pre-filter. The kernel
    /// swaps programs atomically; packets already in the ring were passed
    /// by the old program, so callers filter every packet again in user
    /// space, which sluice always does. Returns whether the kernel took
    /// the program (it may refuse one it cannot run: then nothing is
    /// attached and every packet reaches user space).
    pub fn set_filter(&mut self, filter: Option<KernelFilter>) -> Result<bool, LiveError> {
        use std::os::fd::AsRawFd;
        let taken = match &filter {
            // An eBPF program the socket refuses is an error, not a
            // silent fallback: it was asked for by name.
            Some(f) => match f.ebpf_fd() {
                Some(fd) => {
                    self.sock
                        .attach_bpf(fd.as_raw_fd())
                        .map_err(|e| LiveError::call(&self.name, "SO_ATTACH_BPF", e))?;
                    true
                }
                None => self.sock.attach_filter(f.code()).is_ok(),
            },
            None => false,
        };
        if !taken {
            // Accept everything rather than keep an old program.
            let all = KernelFilter::accept_all();
            self.sock
                .attach_filter(all.code())
                .map_err(|e| LiveError::call(&self.name, "SO_ATTACH_FILTER", e))?;
        }
        self.filter = filter.filter(|_| taken);
        Ok(taken)
    }

    /// Attach an eBPF socket filter (the descriptor of a loaded
    /// `BPF_PROG_TYPE_SOCKET_FILTER` program) as the kernel pre-filter, in
    /// place of the classic one; the same rule holds: it may accept more
    /// than the user's filter, never less.
    pub fn set_ebpf(&mut self, prog: std::os::fd::BorrowedFd<'_>) -> Result<(), LiveError> {
        use std::os::fd::AsRawFd;
        self.sock
            .attach_bpf(prog.as_raw_fd())
            .map_err(|e| LiveError::call(&self.name, "SO_ATTACH_BPF", e))?;
        self.filter = None;
        Ok(())
    }

    /// Whether a kernel pre-filter is attached.
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// Read the kernel's counters (they reset on reading) into the totals.
    fn read_stats(&mut self) -> Result<(), LiveError> {
        let s: TpacketStatsV3 = self
            .sock
            .get(libc::SOL_PACKET, libc::PACKET_STATISTICS)
            .map_err(|e| LiveError::call(&self.name, "PACKET_STATISTICS", e))?;
        self.stats.received += u64::from(s.packets);
        self.stats.dropped += u64::from(s.drops);
        Ok(())
    }

    /// The kernel's counters since the capture opened.
    pub fn stats(&mut self) -> Result<KernelStats, LiveError> {
        self.read_stats()?;
        Ok(self.stats)
    }

    /// Wait up to `timeout` for packets, then hand every packet of every
    /// block ready to `each`, which returns `false` to stop after the
    /// packet it was given. The block's other packets are then kept for
    /// the next dispatch (the block stays the user's, so the socket polls
    /// readable while they wait, as with libpcap). A packet filtered out
    /// by direction is not handed over.
    pub fn dispatch(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(&Packet<'_>) -> bool,
    ) -> Result<Dispatched, LiveError> {
        self.dispatch_views(timeout, |pkt, _| each(pkt))
    }

    /// [`dispatch`](Self::dispatch), also handing over the frame as the
    /// kernel saw it where that differs from the packet: an Ethernet
    /// frame whose VLAN tag the kernel took off and sluice put back (the
    /// kernel's filter, and so libpcap's live filter, reads the frame
    /// without it). `None` where the two are the same.
    pub fn dispatch_views(
        &mut self,
        timeout: Duration,
        mut each: impl FnMut(&Packet<'_>, Option<&[u8]>) -> bool,
    ) -> Result<Dispatched, LiveError> {
        let mut done = Dispatched::default();
        let mut failed = None;
        if self.ring.status(self.next_block) & libc::TP_STATUS_USER == 0 {
            let events = self
                .sock
                .poll(timeout)
                .map_err(|e| LiveError::call(&self.name, "poll", e))?;
            if events & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                // Hand over what was captured before the failure first.
                failed = Some(self.failure());
            }
        }
        let (direction, lo_index) = (self.direction, self.lo_index);
        while let Some(block) = self.ring.user_block(self.next_block) {
            let mut walk = match self.held.take() {
                Some(r) => BlockWalk::resume(block, r.left, r.at),
                None => BlockWalk::new(block),
            };
            for f in &mut walk {
                if !wanted(direction, lo_index, f.pkttype, f.ifindex) {
                    continue;
                }
                let (built, wirelen) = self.framing.build(block, &f, &mut self.scratch);
                let data = if built {
                    &self.scratch[..]
                } else {
                    &block[f.data..f.data + f.caplen as usize]
                };
                let data = &data[..data.len().min(self.snaplen as usize)];
                let pkt = Packet {
                    ts_sec: i64::from(f.sec),
                    ts_nsec: f.nsec,
                    caplen: data.len() as u32,
                    wirelen,
                    linktype: self.linktype,
                    snaplen: self.snaplen,
                    interface: 0,
                    data,
                };
                let raw = matches!(self.framing, Framing::Raw { .. });
                let view = (built && raw).then(|| {
                    let d = &block[f.data..f.data + f.caplen as usize];
                    &d[..d.len().min(self.snaplen as usize)]
                });
                done.packets += 1;
                if !each(&pkt, view) {
                    done.stopped = true;
                    break;
                }
            }
            if done.stopped {
                if let Some((left, at)) = walk.position() {
                    self.held = Some(Resume { left, at });
                    break;
                }
            }
            self.ring.release(self.next_block);
            self.next_block = (self.next_block + 1) % self.ring.blocks();
            done.blocks += 1;
            if done.stopped {
                break;
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }

    /// The error behind a `POLLERR`: the interface went down or away.
    fn failure(&self) -> LiveError {
        match self.sock.take_error() {
            Ok(Some(e)) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                LiveError::InterfaceDown(self.name.clone())
            }
            Ok(Some(e)) if e.raw_os_error() == Some(libc::ENODEV) => {
                LiveError::InterfaceGone(self.name.clone())
            }
            Ok(Some(e)) => LiveError::call(&self.name, "poll", e),
            Ok(None) | Err(_) => {
                if self.name != "any" && interfaces::interface(&self.name).is_err() {
                    LiveError::InterfaceGone(self.name.clone())
                } else {
                    LiveError::InterfaceDown(self.name.clone())
                }
            }
        }
    }
}

/// libpcap's direction rule: outgoing copies on loopback are dropped (they
/// come back as incoming), then `-Q`.
fn wanted(direction: Direction, lo_index: Option<i32>, pkttype: u8, ifindex: i32) -> bool {
    if pkttype == PACKET_OUTGOING {
        Some(ifindex) != lo_index && direction != Direction::In
    } else {
        direction != Direction::Out
    }
}
