//! Waking a sleeping reader in another process: an `eventfd` both sides
//! hold.
//!
//! The rule: a writer signals only a reader that said it is going to
//! sleep (a flag in shared memory the reader sets, then checks for work
//! once more, before it waits), so a busy reader costs its writer no
//! system call per packet, and a sleeping one is never missed.

use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags};
use rustix::io::Errno;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

/// An event counter one side signals and the other waits on.
///
/// ```
/// let w = sluice_shm::Wake::new()?;
/// assert!(!w.wait(Some(std::time::Duration::from_millis(1)))?);
/// w.signal()?;
/// assert!(w.wait(Some(std::time::Duration::from_millis(1)))?);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Wake {
    fd: OwnedFd,
}

impl Wake {
    /// A new one, not signalled.
    pub fn new() -> io::Result<Wake> {
        let fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Wake { fd })
    }

    /// One passed by another process.
    pub fn from_fd(fd: OwnedFd) -> Wake {
        Wake { fd }
    }

    /// Wake the waiter (a no-op if it is already signalled).
    pub fn signal(&self) -> io::Result<()> {
        match rustix::io::write(&self.fd, &1u64.to_ne_bytes()) {
            Ok(_) | Err(Errno::AGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Wait until signalled or `timeout` passes (`None`: no limit);
    /// `true` when it was signalled (the signal is consumed).
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let ts = timeout.map(|t| rustix::event::Timespec {
            tv_sec: t.as_secs() as i64,
            tv_nsec: i64::from(t.subsec_nanos()),
        });
        let mut fds = [PollFd::new(&self.fd, PollFlags::IN)];
        loop {
            match poll(&mut fds, ts.as_ref()) {
                Ok(0) => return Ok(false),
                Ok(_) => break,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        let mut b = [0u8; 8];
        match rustix::io::read(&self.fd, &mut b) {
            Ok(_) => Ok(true),
            Err(Errno::AGAIN) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

impl AsFd for Wake {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
