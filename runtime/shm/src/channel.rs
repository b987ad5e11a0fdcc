//! Unix sockets between the daemon and its clients: `SOCK_SEQPACKET`, so
//! each message arrives whole or not at all, with descriptors passed
//! beside a message (`SCM_RIGHTS`) and the peer's identity taken from
//! the kernel (`SO_PEERCRED`, `SO_PEERGROUPS`), never from the peer.
//!
//! The rule: a message is at most [`MAX_MESSAGE`] bytes and carries at
//! most [`MAX_FDS`] descriptors; anything longer is reported as cut
//! (and the descriptors that did not fit are closed by the kernel), so a
//! peer cannot make the other side allocate or hold more than that.

use rustix::event::{poll, PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{
    accept_with, bind, connect, listen, recvmsg, sendmsg, socket_with, socketpair,
    sockopt::socket_peercred, AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags,
    ReturnFlags, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketAddrUnix, SocketFlags,
    SocketType,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The longest message either side sends or accepts.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// Who is at the other end of a channel, as the kernel says.
///
/// ```
/// let (a, b) = sluice_shm::Channel::pair()?;
/// let me = a.peer()?;
/// assert_eq!(me.uid, rustix::process::getuid().as_raw());
/// assert_eq!(me.pid, std::process::id());
/// # drop(b);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its process id (when it connected).
    pub pid: u32,
    /// Its user id.
    pub uid: u32,
    /// Its primary group.
    pub gid: u32,
    /// Its supplementary groups.
    pub groups: Vec<u32>,
}

/// One message received.
#[derive(Debug, Default)]
pub struct Received {
    /// The message's bytes.
    pub bytes: Vec<u8>,
    /// The descriptors that came with it.
    pub fds: Vec<OwnedFd>,
    /// The message or its descriptors were longer than the limits.
    pub truncated: bool,
}

/// A connected channel (see the module documentation).
#[derive(Debug)]
pub struct Channel {
    fd: OwnedFd,
}

fn io(e: Errno) -> io::Error {
    io::Error::from(e)
}

impl Channel {
    /// Connect to the daemon's socket at `path`.
    pub fn connect(path: &Path) -> io::Result<Channel> {
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        let addr = SocketAddrUnix::new(path)?;
        connect(&fd, &addr)?;
        Ok(Channel { fd })
    }

    /// Two channels joined to each other (for tests and threads).
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let (a, b) = socketpair(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        Ok((Channel { fd: a }, Channel { fd: b }))
    }

    /// Send one message with descriptors beside it without waiting: a
    /// peer that does not read (its socket buffer full) gets an error
    /// instead of holding the sender up.
    pub fn send_now(&self, msg: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_with(msg, fds, SendFlags::NOSIGNAL | SendFlags::DONTWAIT)
    }

    /// Send one message with descriptors beside it.
    ///
    /// ```
    /// use std::os::fd::AsFd;
    /// let (a, b) = sluice_shm::Channel::pair()?;
    /// let r = sluice_shm::Region::create("doc", 8)?;
    /// a.send(b"here", &[r.fd()])?;
    /// let got = b.recv()?.unwrap();
    /// assert_eq!((&got.bytes[..], got.fds.len(), got.truncated), (&b"here"[..], 1, false));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn send(&self, msg: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
        self.send_with(msg, fds, SendFlags::NOSIGNAL)
    }

    fn send_with(&self, msg: &[u8], fds: &[BorrowedFd<'_>], flags: SendFlags) -> io::Result<()> {
        if msg.len() > MAX_MESSAGE || fds.len() > MAX_FDS {
            return Err(io::Error::other("message too long"));
        }
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
            return Err(io::Error::other("too many descriptors"));
        }
        let n = sendmsg(&self.fd, &[IoSlice::new(msg)], &mut control, flags)?;
        match n == msg.len() {
            true => Ok(()),
            false => Err(io::Error::other("message cut short")),
        }
    }

    /// Receive one message; `None` when the peer has closed its end.
    pub fn recv(&self) -> io::Result<Option<Received>> {
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let r = recvmsg(
            &self.fd,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(it) = m {
                fds.extend(it);
            }
        }
        if r.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        let truncated = r.flags.contains(ReturnFlags::TRUNC)
            || r.flags.contains(ReturnFlags::CTRUNC)
            || fds.len() > MAX_FDS;
        buf.truncate(r.bytes.min(MAX_MESSAGE));
        Ok(Some(Received {
            bytes: buf,
            fds,
            truncated,
        }))
    }

    /// Wait up to `timeout` for a message (or the peer's end); `false`
    /// when none came in time.
    pub fn readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        let ts = timeout.map(|t| rustix::event::Timespec {
            tv_sec: t.as_secs() as i64,
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        loop {
            match poll(&mut fds, ts.as_ref()) {
                Ok(n) => return Ok(n > 0),
                Err(Errno::INTR) => continue,
                Err(e) => return Err(io(e)),
            }
        }
    }

    /// Who is at the other end.
    pub fn peer(&self) -> io::Result<Peer> {
        let c = socket_peercred(&self.fd)?;
        Ok(Peer {
            pid: c.pid.as_raw_nonzero().get() as u32,
            uid: c.uid.as_raw(),
            gid: c.gid.as_raw(),
            groups: peer_groups(self.fd.as_raw_fd())?,
        })
    }

    /// The socket's descriptor (to poll it).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Channel {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// The supplementary groups of a socket's peer (`SO_PEERGROUPS`).
fn peer_groups(fd: RawFd) -> io::Result<Vec<u32>> {
    let mut groups = vec![0 as libc::gid_t; 64];
    loop {
        let mut len = (groups.len() * std::mem::size_of::<libc::gid_t>()) as libc::socklen_t;
        // SAFETY: `groups` is a live buffer of `len` bytes that the kernel
        // fills with at most `len` bytes (and says how many it needed).
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        let n = len as usize / std::mem::size_of::<libc::gid_t>();
        if r == 0 {
            groups.truncate(n);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && n > groups.len() && n <= 65536 {
            groups.resize(n, 0);
            continue;
        }
        return Err(e);
    }
}

/// The daemon's listening socket.
#[derive(Debug)]
pub struct Listener {
    fd: OwnedFd,
    path: PathBuf,
}

impl Listener {
    /// Listen at `path`. A socket file left there by a daemon no longer
    /// running is replaced; one a daemon still answers on, or a file that
    /// is not a socket, is an error. `mode` (e.g. `0o660`) and `group`
    /// decide who may connect at all.
    pub fn bind(path: &Path, mode: Option<u32>, group: Option<u32>) -> io::Result<Listener> {
        use std::os::unix::fs::FileTypeExt;
        // Its directory (`/run/sluice`) is made when missing.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                std::fs::create_dir_all(dir)?;
            }
        }
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if !m.file_type().is_socket() {
                return Err(io::Error::other(format!(
                    "{} exists and is not a socket",
                    path.display()
                )));
            }
            if Channel::connect(path).is_ok() {
                return Err(io::Error::other(format!(
                    "a daemon is already listening on {}",
                    path.display()
                )));
            }
            std::fs::remove_file(path)?;
        }
        let fd = socket_with(
            AddressFamily::UNIX,
            SocketType::SEQPACKET,
            SocketFlags::CLOEXEC,
            None,
        )?;
        bind(&fd, &SocketAddrUnix::new(path)?)?;
        if let Some(m) = mode {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(m))?;
        }
        if let Some(g) = group {
            std::os::unix::fs::chown(path, None, Some(g))?;
        }
        listen(&fd, 128)?;
        Ok(Listener {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// Accept a client, if one is waiting (the listener is polled first).
    pub fn accept(&self) -> io::Result<Channel> {
        let fd = accept_with(&self.fd, SocketFlags::CLOEXEC)?;
        Ok(Channel { fd })
    }

    /// The socket file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The socket's descriptor (to poll it).
    pub fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Listener {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_and_many_descriptors_are_cut_not_kept() {
        let (a, b) = Channel::pair().unwrap();
        assert!(a.send(&vec![0; MAX_MESSAGE + 1], &[]).is_err());
        // Through the raw socket: a message past the limit arrives cut.
        let big = vec![1u8; MAX_MESSAGE + 100];
        let n = rustix::net::send(&a.fd, &big, SendFlags::empty()).unwrap();
        assert_eq!(n, big.len());
        let got = b.recv().unwrap().unwrap();
        assert!(got.truncated);
        assert_eq!(got.bytes.len(), MAX_MESSAGE);
        drop(a);
        assert!(b.recv().unwrap().is_none());
    }

    #[test]
    fn listeners_refuse_to_steal_a_live_socket() {
        let path = std::env::temp_dir().join(format!("sluice-chan-{}.sock", std::process::id()));
        let l = Listener::bind(&path, Some(0o600), None).unwrap();
        let c = Channel::connect(&path).unwrap();
        let s = l.accept().unwrap();
        c.send(b"x", &[]).unwrap();
        assert_eq!(s.recv().unwrap().unwrap().bytes, b"x");
        assert_eq!(s.peer().unwrap().pid, std::process::id());
        // Another daemon on the same path is refused (its probe connects).
        assert!(Listener::bind(&path, None, None).is_err());
        assert!(path.exists());
        drop(l);
        assert!(!path.exists());
    }
}
