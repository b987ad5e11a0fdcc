//! A client of the daemon: connect, open flows, read their packets from
//! the shared buffers the daemon passes, with no system call per packet.
//!
//! The rule: the client reads what it names itself (an `@FILE` program
//! is read here, with the client's own rights, and sent as text), maps
//! the group's packet buffer read-only and its own index buffer
//! read-write, and sleeps on its wake-up only after saying so in shared
//! memory, so a busy reader never makes the daemon signal it.
//!
//! ```no_run
//! use sluice_daemon::Client;
//! let mut client = Client::connect("/run/sluice/sluice.sock".as_ref(), "doc")?;
//! let mut flow = client.open("(iface,eth0) -> (BPF,\"tcp port 80\")", 0)?;
//! while let Some(pkt) = flow.next(Some(std::time::Duration::from_secs(1)))? {
//!     println!("{} bytes", pkt.data.len());
//! }
//! let s = flow.stats();
//! assert_eq!(s.delivered + s.lost, s.accepted);
//! # Ok::<(), sluice_daemon::DaemonError>(())
//! ```

use crate::proto::{self, Interface, Reply, Request};
use crate::DaemonError;
use sluice_flow::buffer::{IBuf, PBuf, PacketRef, Reader};
use sluice_shm::{Channel, Region, Wake};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A connection to the daemon.
pub struct Client {
    chan: Arc<Mutex<Channel>>,
    interfaces: Vec<Interface>,
    mode: String,
}

/// Ask and wait for the answer (with the descriptors that came with it).
fn ask(
    chan: &Mutex<Channel>,
    r: &Request,
) -> Result<(Reply, Vec<std::os::fd::OwnedFd>), DaemonError> {
    let chan = chan.lock().unwrap_or_else(|e| e.into_inner());
    chan.send(&proto::request_bytes(r), &[])
        .map_err(DaemonError::Io)?;
    let got = chan
        .recv()
        .map_err(DaemonError::Io)?
        .ok_or(DaemonError::Gone)?;
    let mut reply = proto::parse_reply(&got.bytes).map_err(|e| DaemonError::Protocol(e.0))?;
    let mut fds = got.fds;
    if let Reply::Large { bytes } = reply {
        // The reply is in the memory file that came with it.
        let fd = fds
            .pop()
            .ok_or_else(|| DaemonError::Protocol("a long reply without its file".into()))?;
        let all = sluice_shm::read_bytes(fd, bytes.min(proto::MAX_LARGE_REPLY))
            .map_err(DaemonError::Io)?;
        reply = proto::parse_reply(&all).map_err(|e| DaemonError::Protocol(e.0))?;
        fds.clear();
    }
    if let Reply::Error {
        message,
        rule,
        column,
    } = reply
    {
        return Err(DaemonError::Refused {
            message,
            rule,
            column,
        });
    }
    Ok((reply, fds))
}

/// `@FILE` operands of a specification's filter read here, so the daemon
/// gets program text only: `(BPF,"@prog.txt")` becomes the file's text.
fn inline_files(spec: &str) -> Result<String, DaemonError> {
    let Ok(mut graph) = sluice_flow::spec::parse(spec) else {
        return Ok(spec.to_string());
    };
    let mut changed = false;
    for stage in graph.stages.iter_mut().skip(1) {
        for e in stage.iter_mut() {
            if let Some(arg) = e.args.first_mut() {
                let (lang, program, _) = sluice_filter::Language::split(arg);
                if let Some(path) = program.trim_start().strip_prefix('@') {
                    let text = read_bounded(path)?;
                    let prefix = &arg[..arg.len() - program.len()];
                    let _ = lang;
                    *arg = format!("{prefix}{text}");
                    changed = true;
                }
            }
        }
    }
    Ok(match changed {
        true => graph.to_string(),
        false => spec.to_string(),
    })
}

/// The most bytes of a program file a client sends.
const MAX_PROGRAM: u64 = proto::MAX_SPEC as u64;

fn read_bounded(path: &str) -> Result<String, DaemonError> {
    use std::io::Read;
    let f = std::fs::File::open(path).map_err(|e| DaemonError::File(path.into(), e))?;
    let mut text = String::new();
    f.take(MAX_PROGRAM + 1)
        .read_to_string(&mut text)
        .map_err(|e| DaemonError::File(path.into(), e))?;
    if text.len() as u64 > MAX_PROGRAM {
        return Err(DaemonError::File(
            path.into(),
            std::io::Error::other(format!("longer than {MAX_PROGRAM} bytes")),
        ));
    }
    Ok(text)
}

impl Client {
    /// Connect and say hello; `name` is shown in the daemon's status.
    pub fn connect(socket: &Path, name: &str) -> Result<Client, DaemonError> {
        let chan = Channel::connect(socket).map_err(|e| DaemonError::Socket(socket.into(), e))?;
        let chan = Arc::new(Mutex::new(chan));
        let hello = Request::Hello {
            version: proto::VERSION,
            name: name.chars().take(proto::MAX_NAME).collect(),
        };
        match ask(&chan, &hello)?.0 {
            Reply::Hello {
                interfaces, mode, ..
            } => Ok(Client {
                chan,
                interfaces,
                mode,
            }),
            other => Err(DaemonError::Protocol(format!("unexpected reply {other:?}"))),
        }
    }

    /// The interfaces the daemon captures on.
    pub fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    /// `monitor` or `endpoint`.
    pub fn mode(&self) -> &str {
        &self.mode
    }

    /// Open a flow (`(iface,NAME) -> (BPF,"expression")`; `priority`
    /// matters to endpoint daemons).
    pub fn open(&mut self, spec: &str, priority: i32) -> Result<DaemonFlow, DaemonError> {
        let spec = inline_files(spec)?;
        let (reply, mut fds) = ask(&self.chan, &Request::Open { spec, priority })?;
        let Reply::Opened {
            flow,
            reader,
            linktype,
            snaplen,
        } = reply
        else {
            return Err(DaemonError::Protocol("expected an opened flow".into()));
        };
        if fds.len() != 3 {
            return Err(DaemonError::Protocol(format!(
                "an opened flow comes with 3 descriptors, not {}",
                fds.len()
            )));
        }
        let wake = Wake::from_fd(fds.pop().expect("three"));
        let ibuf_fd = fds.pop().expect("three");
        let pbuf_fd = fds.pop().expect("three");
        let pbuf = Arc::new(PBuf::attach(Arc::new(Region::map(pbuf_fd, false)?))?);
        let ibuf = Arc::new(IBuf::attach(Arc::new(Region::map(ibuf_fd, true)?))?);
        let reader = Reader::adopt(pbuf, ibuf.clone(), reader, 64)
            .ok_or_else(|| DaemonError::Protocol("the reader slot is not registered".into()))?;
        Ok(DaemonFlow {
            chan: self.chan.clone(),
            flow,
            reader,
            ibuf,
            wake,
            linktype,
            snaplen,
            closed: false,
        })
    }

    /// The daemon's status as this client may see it.
    pub fn status(&self) -> Result<serde_json::Value, DaemonError> {
        match ask(&self.chan, &Request::Status)?.0 {
            Reply::Status { status } => Ok(status),
            other => Err(DaemonError::Protocol(format!("unexpected reply {other:?}"))),
        }
    }
}

/// Sleep until one of `flows` has a packet waiting (or is woken), or
/// `timeout` passes: for a reader of several flows, after it found all of
/// them empty.
pub fn wait_any(flows: &[&DaemonFlow], timeout: Duration) -> Result<(), DaemonError> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    for _ in 0..2048 {
        if flows.iter().any(|f| f.reader.available() > 0) {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    if flows.iter().any(|f| !f.prepare_sleep()) {
        return Ok(());
    }
    let mut fds: Vec<PollFd<'_>> = flows
        .iter()
        .map(|f| PollFd::new(&f.wake, PollFlags::IN))
        .collect();
    let ts = Timespec {
        tv_sec: timeout.as_secs() as i64,
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&ts)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(e) => return Err(DaemonError::Io(e.into())),
    }
    let woken: Vec<bool> = fds.iter().map(|p| !p.revents().is_empty()).collect();
    for (f, woken) in flows.iter().zip(woken) {
        // Consume the wake-ups that came (each is signalled at most once
        // per sleep); the others are left alone, a read of each would be
        // one system call per flow per wait.
        if woken {
            let _ = f.wake.wait(Some(Duration::ZERO));
        }
    }
    Ok(())
}

/// A flow's counts: `delivered + lost = accepted` once every packet
/// accepted so far has been read or found lost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Packets the flow's filter accepted.
    pub accepted: u64,
    /// Packets read.
    pub delivered: u64,
    /// Packets lost: dropped by the daemon (a full buffer) or overwritten
    /// before they were read (fast-reader preference).
    pub lost: u64,
    /// Packets accepted and waiting to be read.
    pub waiting: u64,
}

/// An open flow of a daemon client.
pub struct DaemonFlow {
    chan: Arc<Mutex<Channel>>,
    flow: u64,
    reader: Reader,
    ibuf: Arc<IBuf>,
    wake: Wake,
    linktype: u16,
    snaplen: u32,
    closed: bool,
}

impl DaemonFlow {
    /// The link type of its packets.
    pub fn linktype(&self) -> u16 {
        self.linktype
    }

    /// Bytes of each packet kept.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The wake-up's descriptor: readable when packets wait after the
    /// reader said it sleeps ([`DaemonFlow::prepare_sleep`]).
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.wake.as_fd()
    }

    /// Take a pending wake-up off the descriptor (a reader that polls it
    /// itself does this when it comes to read).
    pub fn consume_wake(&self) {
        let _ = self.wake.wait(Some(Duration::ZERO));
    }

    /// Packets waiting to be read.
    pub fn available(&self) -> u64 {
        self.reader.available()
    }

    /// The next packet, waiting up to `timeout` (`None`: as long as it
    /// takes) for one; `Ok(None)` when none came in time. An error when
    /// the flow ended (closed, cut loose, the daemon gone).
    pub fn next(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<PacketRef<'_>>, DaemonError> {
        // The clock is read only once a wait begins: a busy reader takes
        // packets without asking the time.
        let mut start = None;
        loop {
            // Finished first: an entry pushed before the flow finished is
            // then seen as available below.
            let finished = self.ibuf.finished();
            if self.reader.available() > 0 {
                return Ok(self.reader.next());
            }
            if finished {
                return Err(DaemonError::Ended);
            }
            let left = match timeout {
                Some(t) => match t.checked_sub(start.get_or_insert_with(Instant::now).elapsed()) {
                    Some(l) if !l.is_zero() => Some(l),
                    _ => {
                        // Nothing waiting: what was read is released.
                        self.reader.commit();
                        return Ok(None);
                    }
                },
                None => None,
            };
            self.sleep(left)?;
        }
    }

    /// Say the reader is about to sleep; `true` when it may (nothing is
    /// waiting), after which the wake-up's descriptor becomes readable
    /// when a packet comes (for callers that poll it themselves).
    pub fn prepare_sleep(&self) -> bool {
        self.ibuf.set_sleeping();
        self.reader.available() == 0 && !self.ibuf.finished()
    }

    /// Wait a few microseconds for a packet without a system call (a
    /// daemon handing over a burst keeps a busy reader awake): whether
    /// one came.
    fn spin(&self) -> bool {
        for _ in 0..2048 {
            if self.reader.available() > 0 {
                return true;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// Sleep until woken or `timeout`, checking now and then that the
    /// daemon is still there.
    fn sleep(&mut self, timeout: Option<Duration>) -> Result<(), DaemonError> {
        self.reader.commit();
        if self.spin() || !self.prepare_sleep() {
            return Ok(());
        }
        let slice = Duration::from_millis(200);
        let t = timeout.map_or(slice, |t| t.min(slice));
        if !self.wake.wait(Some(t)).map_err(DaemonError::Io)? {
            // Nothing for a while: is the daemon still there? (Its socket
            // is readable only when it has gone; it sends nothing unasked.)
            let chan = self.chan.lock().unwrap_or_else(|e| e.into_inner());
            if chan
                .readable(Some(Duration::ZERO))
                .map_err(DaemonError::Io)?
            {
                return Err(DaemonError::Gone);
            }
        }
        Ok(())
    }

    /// The flow's counts.
    pub fn stats(&self) -> FlowStats {
        FlowStats {
            accepted: self.ibuf.accepted(),
            delivered: self.reader.delivered(),
            lost: self.ibuf.drops() + self.reader.lost(),
            waiting: self.reader.available(),
        }
    }

    /// Add filters to the flow (any language, by prefix; `@FILE` read
    /// here): the result number of the first (a packet's
    /// [`PacketRef::result`] says which of the flow's filters took it,
    /// counting from 1).
    pub fn add_filters(&mut self, filters: &[&str]) -> Result<u32, DaemonError> {
        let mut all = Vec::with_capacity(filters.len());
        for f in filters {
            let (_, program, _) = sluice_filter::Language::split(f);
            all.push(match program.trim_start().strip_prefix('@') {
                Some(path) => format!("{}{}", &f[..f.len() - program.len()], read_bounded(path)?),
                None => f.to_string(),
            });
        }
        // As many to a message as fit.
        let limit = sluice_shm::MAX_MESSAGE - 1024;
        let mut batches: Vec<Vec<String>> = vec![Vec::new()];
        let mut bytes = 0;
        for f in all {
            if bytes + f.len() + 8 > limit && !batches[batches.len() - 1].is_empty() {
                batches.push(Vec::new());
                bytes = 0;
            }
            bytes += f.len() + 8;
            let last = batches.len() - 1;
            batches[last].push(f);
        }
        let mut first = None;
        for filters in batches.into_iter().filter(|b| !b.is_empty()) {
            let r = ask(
                &self.chan,
                &Request::AddFilters {
                    flow: self.flow,
                    filters,
                },
            )?;
            match r.0 {
                Reply::Added { first: n } => {
                    first.get_or_insert(n);
                }
                other => return Err(DaemonError::Protocol(format!("unexpected reply {other:?}"))),
            }
        }
        first.ok_or_else(|| DaemonError::Protocol("no filters to add".into()))
    }

    /// Replace the flow's filter (same interface).
    pub fn set_filter(&mut self, spec: &str) -> Result<(), DaemonError> {
        let spec = inline_files(spec)?;
        ask(
            &self.chan,
            &Request::Filter {
                flow: self.flow,
                spec,
            },
        )
        .map(|_| ())
    }

    /// Close the flow.
    pub fn close(mut self) -> Result<(), DaemonError> {
        self.closed = true;
        self.reader.commit();
        ask(&self.chan, &Request::Close { flow: self.flow }).map(|_| ())
    }
}

impl Drop for DaemonFlow {
    fn drop(&mut self) {
        if !self.closed {
            let _ = ask(&self.chan, &Request::Close { flow: self.flow });
        }
    }
}
