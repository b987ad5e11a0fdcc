//! Sending frames out of an interface (tcpreplay's core): a packet socket
//! bound to the interface, frames handed to the kernel in batches with
//! `sendmmsg`, paced by packets or bits per second, by the capture's own
//! timing, or as fast as the kernel takes them.

use crate::interfaces;
use crate::sys::PacketSocket;
use crate::LiveError;
use std::time::{Duration, Instant};

/// Most frames per `sendmmsg` call.
pub const BATCH: usize = 64;

/// How fast frames go out.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// As fast as the kernel takes them.
    Top,
    /// This many packets per second.
    Packets(f64),
    /// This many megabits per second (frame bytes).
    Mbps(f64),
    /// The gaps between the capture's timestamps.
    Capture,
}

/// Frames sent and refused so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendStats {
    /// Frames the kernel took.
    pub sent: u64,
    /// Frames the kernel refused (too long for the link, malformed).
    pub refused: u64,
    /// Bytes of the frames sent.
    pub bytes: u64,
}

/// Where pacing started: the time, the first frame's capture time, and
/// the frames (sent or refused) and bytes sent before.
#[derive(Clone, Copy)]
struct Clock {
    t0: Instant,
    ts0: i128,
    base: (u64, u64),
}

/// A sender on one interface.
pub struct Sender {
    sock: PacketSocket,
    name: String,
    pace: Pace,
    start: Option<Clock>,
    stats: SendStats,
    /// Link type of the interface's frames.
    linktype: u16,
}

impl Sender {
    /// A sender on `interface` (not `any`).
    pub fn open(interface: &str, pace: Pace) -> Result<Sender, LiveError> {
        let sock = PacketSocket::new(false).map_err(|e| LiveError::call(interface, "socket", e))?;
        if interface == "any" {
            return Err(LiveError::Config(
                "any: frames can only be sent on one interface".into(),
            ));
        }
        let iface = interfaces::interface(interface)?;
        // Protocol 0: the socket sends but receives nothing.
        sock.bind(iface.index, 0)
            .map_err(|e| LiveError::call(interface, "bind", e))?;
        Ok(Sender {
            sock,
            name: interface.to_string(),
            pace,
            start: None,
            stats: SendStats::default(),
            linktype: iface.linktype().0,
        })
    }

    /// The link type frames must have on this interface.
    pub fn linktype(&self) -> u16 {
        self.linktype
    }

    /// The counts so far.
    pub fn stats(&self) -> SendStats {
        self.stats
    }

    /// Restart the pacing clock (between loops over a capture).
    pub fn restart(&mut self) {
        self.start = None;
    }

    /// Frames and bytes handed over since the pacing clock started.
    fn progress(&self, base: (u64, u64)) -> (u64, u64) {
        (
            self.stats.sent + self.stats.refused - base.0,
            self.stats.bytes - base.1,
        )
    }

    /// Send frames (with their capture timestamps in nanoseconds), waiting
    /// as the pace says; returns when all were sent or refused.
    pub fn send(&mut self, frames: &[(&[u8], i128)]) -> Result<(), LiveError> {
        let mut at = 0;
        while at < frames.len() {
            let base = (self.stats.sent + self.stats.refused, self.stats.bytes);
            let clock = *self.start.get_or_insert(Clock {
                t0: Instant::now(),
                ts0: frames[at].1,
                base,
            });
            let elapsed = clock.t0.elapsed();
            let (done, bytes) = self.progress(clock.base);
            let left = frames.len() - at;
            // How many frames are due now, and if none, when the next is.
            let (n, next) = match self.pace {
                Pace::Top => (left, Duration::ZERO),
                Pace::Packets(pps) => {
                    let allowed = (elapsed.as_secs_f64() * pps) as u64 + 1;
                    let next = Duration::from_secs_f64(done as f64 / pps);
                    (allowed.saturating_sub(done) as usize, next)
                }
                Pace::Mbps(mbps) => {
                    let next = Duration::from_secs_f64(bytes as f64 * 8.0 / (mbps * 1e6));
                    (usize::from(next <= elapsed), next)
                }
                Pace::Capture => {
                    let since = |ts: i128| {
                        Duration::from_nanos((ts - clock.ts0).clamp(0, u64::MAX as i128) as u64)
                    };
                    let n = frames[at..]
                        .iter()
                        .take_while(|f| since(f.1) <= elapsed)
                        .count();
                    (n, since(frames[at].1))
                }
            };
            let n = n.min(left).min(BATCH);
            if n == 0 {
                std::thread::sleep(next.saturating_sub(elapsed).min(Duration::from_millis(100)));
                continue;
            }
            let batch: Vec<&[u8]> = frames[at..at + n].iter().map(|f| f.0).collect();
            match self.sock.send_many(&batch) {
                Ok(0) => std::thread::yield_now(),
                Ok(k) => {
                    self.stats.sent += k as u64;
                    self.stats.bytes += batch[..k].iter().map(|f| f.len() as u64).sum::<u64>();
                    at += k;
                }
                Err(e) => match e.raw_os_error() {
                    // The queue is full: wait for it to drain.
                    Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                        std::thread::sleep(Duration::from_micros(50))
                    }
                    Some(libc::EMSGSIZE) | Some(libc::EINVAL) => {
                        self.stats.refused += 1;
                        at += 1;
                    }
                    Some(libc::ENETDOWN) => {
                        return Err(LiveError::InterfaceDown(self.name.clone()))
                    }
                    Some(libc::ENXIO) | Some(libc::ENODEV) => {
                        return Err(LiveError::InterfaceGone(self.name.clone()))
                    }
                    _ => return Err(LiveError::call(&self.name, "sendmmsg", e)),
                },
            }
        }
        Ok(())
    }
}
