//! The system calls live capture needs, each wrapped once: the packet
//! socket, its options, `bind`, `poll`, the ring's memory map and
//! `sendmmsg`. Every `unsafe` block of the crate is in this file; the rest
//! works on the safe types here.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// The result of a libc call returning -1 on failure.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// An `AF_PACKET` socket.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// A new packet socket, `SOCK_RAW` (link headers included) or
    /// `SOCK_DGRAM` (cooked), bound to no protocol yet so that it receives
    /// nothing until [`PacketSocket::bind`].
    pub fn new(cooked: bool) -> io::Result<PacketSocket> {
        let kind = if cooked {
            libc::SOCK_DGRAM
        } else {
            libc::SOCK_RAW
        };
        // SAFETY: socket(2) takes no pointers; a non-negative result is a
        // fresh descriptor that nothing else owns.
        let fd = check(unsafe { libc::socket(libc::AF_PACKET, kind | libc::SOCK_CLOEXEC, 0) })?;
        Ok(PacketSocket {
            // SAFETY: `fd` was just returned by socket(2) and is owned here only.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// The raw descriptor (for `poll`).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `setsockopt(level, name, value)` with a plain-data value.
    pub fn set<T: Copy>(&self, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
        // SAFETY: `value` points to a live `T` of the size passed; the
        // kernel only reads it.
        check(unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (value as *const T).cast(),
                std::mem::size_of::<T>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// `getsockopt(level, name)` into a plain-data value that starts zeroed.
    pub fn get<T: Copy + Default>(&self, level: libc::c_int, name: libc::c_int) -> io::Result<T> {
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>() as libc::socklen_t;
        // SAFETY: `value` is a live `T` and `len` its size; the kernel
        // writes at most `len` bytes into it.
        check(unsafe {
            libc::getsockopt(
                self.raw(),
                level,
                name,
                (&mut value as *mut T).cast(),
                &mut len,
            )
        })?;
        Ok(value)
    }

    /// Attach a classic BPF program (`SO_ATTACH_FILTER`; the kernel swaps
    /// programs atomically).
    pub fn attach_filter(&self, code: &[libc::sock_filter]) -> io::Result<()> {
        let prog = libc::sock_fprog {
            len: code.len() as libc::c_ushort,
            filter: code.as_ptr() as *mut libc::sock_filter,
        };
        // The kernel copies the instructions during the call.
        self.set(libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &prog)
    }

    /// Attach an eBPF socket filter by its program's descriptor
    /// (`SO_ATTACH_BPF`, in place of any classic one; the socket takes its
    /// own reference to the program).
    pub fn attach_bpf(&self, prog_fd: libc::c_int) -> io::Result<()> {
        self.set(libc::SOL_SOCKET, libc::SO_ATTACH_BPF, &prog_fd)
    }

    /// Bind to interface `ifindex` (0: every interface) for every protocol.
    pub fn bind(&self, ifindex: i32, protocol: u16) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data; all zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol.to_be();
        addr.sll_ifindex = ifindex;
        // SAFETY: `addr` is a live sockaddr_ll and its size is passed.
        check(unsafe {
            libc::bind(
                self.raw(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        })
        .map(drop)
    }

    /// Wait until the socket is readable or has an error, at most
    /// `timeout`. Returns the `revents` bits (0 on timeout).
    pub fn poll(&self, timeout: Duration) -> io::Result<i16> {
        let mut pfd = libc::pollfd {
            fd: self.raw(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one live pollfd, count 1.
        match check(unsafe { libc::poll(&mut pfd, 1, ms) }) {
            Ok(_) => Ok(pfd.revents),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The socket's pending error (`SO_ERROR`), cleared by reading it.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let e: libc::c_int = self.get(libc::SOL_SOCKET, libc::SO_ERROR)?;
        Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
    }

    /// Send up to `frames.len()` frames in one `sendmmsg` call; returns
    /// how many the kernel took (the first one not taken failed with the
    /// error, if none was taken).
    pub fn send_many(&self, frames: &[&[u8]]) -> io::Result<usize> {
        let mut iov: Vec<libc::iovec> = frames
            .iter()
            .map(|f| libc::iovec {
                iov_base: f.as_ptr() as *mut libc::c_void,
                iov_len: f.len(),
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: msghdr is plain data; all zero is a valid value.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = v;
                h.msg_iovlen = 1;
                libc::mmsghdr {
                    msg_hdr: h,
                    msg_len: 0,
                }
            })
            .collect();
        // SAFETY: `msgs` holds `msgs.len()` headers, each pointing to one
        // iovec of `iov` that points into a frame of `frames`; all outlive
        // the call, and the kernel only reads the frames.
        let n = check(unsafe {
            libc::sendmmsg(self.raw(), msgs.as_mut_ptr(), msgs.len() as libc::c_uint, 0)
        })?;
        Ok(n as usize)
    }
}

/// The receive ring's memory, mapped from the socket.
pub struct RingMap {
    base: *mut u8,
    len: usize,
    block_size: usize,
}

// SAFETY: the mapping is owned by one `RingMap`; blocks are handed out only
// through `&mut self` methods, so moving it to another thread is sound.
unsafe impl Send for RingMap {}

/// Where a block's status word lives: `tpacket_block_desc.hdr.bh1.block_status`.
const BLOCK_STATUS: usize = 8;

impl RingMap {
    /// Map `block_size * blocks` bytes of the socket's `PACKET_RX_RING`.
    pub fn new(sock: &PacketSocket, block_size: usize, blocks: usize) -> io::Result<RingMap> {
        let len = block_size * blocks;
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel
        // checks the length against the ring it set up.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                sock.raw(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(RingMap {
            base: base.cast(),
            len,
            block_size,
        })
    }

    /// The number of blocks.
    pub fn blocks(&self) -> usize {
        self.len / self.block_size
    }

    fn status_ptr(&self, block: usize) -> *mut u32 {
        assert!(block < self.blocks());
        // SAFETY: in bounds (asserted); block starts are page aligned, so
        // the u32 at offset 8 is aligned.
        unsafe { self.base.add(block * self.block_size + BLOCK_STATUS).cast() }
    }

    /// The block's status word, read as the kernel last wrote it; a block
    /// the kernel has handed over (`TP_STATUS_USER`) is then safe to read.
    pub fn status(&self, block: usize) -> u32 {
        // SAFETY: an aligned in-bounds u32 of the mapping, which the kernel
        // writes concurrently: read it volatile, then order later reads of
        // the block after it.
        let s = unsafe { std::ptr::read_volatile(self.status_ptr(block)) };
        fence(Ordering::Acquire);
        s
    }

    /// The bytes of a block the kernel has handed over, or `None` if it
    /// still owns it.
    pub fn user_block(&mut self, block: usize) -> Option<&[u8]> {
        if self.status(block) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        // SAFETY: the kernel handed this block to user space and does not
        // write it until `release` gives it back, which needs `&mut self`
        // and so ends this borrow first.
        Some(unsafe {
            std::slice::from_raw_parts(self.base.add(block * self.block_size), self.block_size)
        })
    }

    /// Give a block back to the kernel.
    pub fn release(&mut self, block: usize) {
        fence(Ordering::Release);
        // SAFETY: an aligned in-bounds u32 of the mapping; no slice of the
        // block is alive (see `user_block`).
        unsafe { std::ptr::write_volatile(self.status_ptr(block), libc::TP_STATUS_KERNEL) }
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// The number of online processors.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether the interface reports a link (ethtool's `ETHTOOL_GLINK`, as
/// libpcap asks it); an error where the driver does not say
/// (`EOPNOTSUPP`, `EINVAL`: a device for which "connected" does not apply).
pub fn link_detected(name: &str) -> io::Result<bool> {
    const ETHTOOL_GLINK: u32 = 0x0000_000a;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::from_raw_os_error(libc::ENODEV));
    }
    // SAFETY: a plain datagram socket, owned (closed on drop) at once.
    let sock =
        unsafe { OwnedFd::from_raw_fd(check(libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0))?) };
    let mut value = EthtoolValue {
        cmd: ETHTOOL_GLINK,
        data: 0,
    };
    // SAFETY: an all-zero ifreq is valid; the name fits (checked above).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL with an ifreq whose data points at a live
    // ethtool_value for the duration of the call.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCETHTOOL as _, &mut ifr) })?;
    Ok(value.data != 0)
}
