//! The control loop: clients connect, say hello, open, refilter and close
//! flows, ask for the status, and go away; the loop keeps the merged
//! classifiers, the flow groups and the routing tables in step.
//!
//! The rule: who a client is comes from the kernel ([`Peer`]), and every
//! request is checked against the policy in force when it arrives; the
//! daemon never opens a file a client names (file sources and `@FILE`
//! programs are refused: a client reads them itself). A client that
//! sends garbage gets an error reply; one that does not read its replies
//! is disconnected; one that goes away has its flows closed and their
//! buffers released.

use super::flows::Open;
use super::{Daemon, Steering};
use crate::proto::{self, Reply, Request};
use crate::DaemonError;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use sluice_flow::policy::Policy;
use sluice_shm::{Channel, Peer};
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Most clients at once.
const MAX_CLIENTS: usize = 4096;

/// A connected client.
pub(crate) struct Client {
    pub(crate) id: u64,
    chan: Channel,
    pub(crate) peer: Peer,
    pub(crate) name: String,
    pub(crate) command: String,
    greeted: bool,
    pub(crate) flows: HashMap<u64, Open>,
    pub(crate) since: Instant,
}

/// The control thread's state.
pub(crate) struct Control<'d> {
    pub(crate) d: &'d mut Daemon,
    pub(crate) clients: Vec<Client>,
    next_client: u64,
    pub(crate) next_flow: u64,
    pub(crate) started: Instant,
    /// Clients refused by the policy, requests refused as malformed.
    pub(crate) refused: u64,
    pub(crate) bad_requests: u64,
}

/// What a request comes to: a reply and the descriptors sent with it.
pub(crate) type Answer = (Reply, Vec<OwnedFd>);

/// An error reply with a message only.
pub(crate) fn err(message: impl Into<String>) -> Answer {
    (Reply::error(message), Vec::new())
}

/// A process's command name (`/proc/PID/comm`), for the status.
fn command_of(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl<'d> Control<'d> {
    pub(crate) fn new(d: &'d mut Daemon) -> Control<'d> {
        Control {
            d,
            clients: Vec::new(),
            next_client: 1,
            next_flow: 1,
            started: Instant::now(),
            refused: 0,
            bad_requests: 0,
        }
    }

    /// Answer clients until told to stop.
    pub(crate) fn run(mut self, steering: &Steering) -> Result<(), DaemonError> {
        while !steering.stop.load(Ordering::Relaxed) {
            if steering.reload_policy.swap(false, Ordering::Relaxed) {
                self.reload_policy();
            }
            self.publish();
            // eBPF pre-filters no longer in force are let go (their
            // programs and maps closed).
            for i in &mut self.d.ifaces {
                i.held.release(i.applied.load(Ordering::Acquire));
            }
            // An eBPF pre-filter built on its own thread goes in force
            // (or makes way for the set wanted now).
            for n in 0..self.d.ifaces.len() {
                if self.d.ifaces[n].held.finished() {
                    self.set_union(n, false);
                }
            }
            let (accept, ready) = self.wait(Duration::from_millis(200))?;
            if accept {
                self.accept();
            }
            for id in ready {
                self.serve(id);
            }
        }
        let ids: Vec<u64> = self.clients.iter().map(|c| c.id).collect();
        for id in ids {
            self.drop_client(id);
        }
        Ok(())
    }

    fn reload_policy(&mut self) {
        let Some(path) = &self.d.config.policy else {
            return;
        };
        match Policy::load(&path.to_string_lossy()) {
            Ok(p) => {
                self.d.policy = p;
                eprintln!("sluice daemon: policy {} read again", path.display());
            }
            Err(e) => eprintln!("sluice daemon: {e}; the policy in force is kept"),
        }
    }

    /// Wait for the listener or clients: whether a client is waiting to
    /// connect, and the clients with a message (or gone).
    fn wait(&self, timeout: Duration) -> Result<(bool, Vec<u64>), DaemonError> {
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(self.clients.len() + 1);
        fds.push(PollFd::new(&self.d.listener, PollFlags::IN));
        for c in &self.clients {
            fds.push(PollFd::new(&c.chan, PollFlags::IN));
        }
        let ts = Timespec {
            tv_sec: timeout.as_secs() as i64,
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        match poll(&mut fds, Some(&ts)) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok((false, Vec::new())),
            Err(e) => return Err(DaemonError::Io(e.into())),
        }
        let accept = !fds[0].revents().is_empty();
        let ready = fds[1..]
            .iter()
            .zip(&self.clients)
            .filter(|(f, _)| !f.revents().is_empty())
            .map(|(_, c)| c.id)
            .collect();
        Ok((accept, ready))
    }

    fn accept(&mut self) {
        let chan = match self.d.listener.accept() {
            Ok(c) => c,
            Err(_) => return,
        };
        if self.clients.len() >= MAX_CLIENTS {
            let _ = chan.send_now(&Reply::error("too many clients").to_bytes(), &[]);
            return;
        }
        let Ok(peer) = chan.peer() else {
            return;
        };
        let id = self.next_client;
        self.next_client += 1;
        self.clients.push(Client {
            id,
            command: command_of(peer.pid),
            chan,
            peer,
            name: String::new(),
            greeted: false,
            flows: HashMap::new(),
            since: Instant::now(),
        });
    }

    fn client(&mut self, id: u64) -> Option<&mut Client> {
        self.clients.iter_mut().find(|c| c.id == id)
    }

    /// Read and answer one message of client `id` (or see it gone).
    fn serve(&mut self, id: u64) {
        let Some(c) = self.client(id) else {
            return;
        };
        let msg = match c.chan.recv() {
            Ok(Some(m)) => m,
            Ok(None) | Err(_) => return self.drop_client(id),
        };
        let answer = if msg.truncated {
            self.bad_requests += 1;
            err(format!(
                "bad request: longer than {} bytes or with too many descriptors",
                sluice_shm::MAX_MESSAGE
            ))
        } else {
            match proto::parse_request(&msg.bytes) {
                Ok(r) => self.answer(id, r),
                Err(e) => {
                    self.bad_requests += 1;
                    err(e.to_string())
                }
            }
        };
        // Descriptors a client sent are closed here: the daemon takes none.
        drop(msg.fds);
        let Some(c) = self.client(id) else {
            return;
        };
        let mut bytes = answer.0.to_bytes();
        let mut fds_owned = answer.1;
        if bytes.len() > sluice_shm::MAX_MESSAGE {
            // Too long for one message: in a memory file beside a short one.
            match sluice_shm::bytes_file("reply", &bytes) {
                Ok(fd) => {
                    fds_owned = vec![fd];
                    bytes = Reply::Large { bytes: bytes.len() }.to_bytes();
                }
                Err(_) => {
                    fds_owned = Vec::new();
                    bytes = Reply::error("the reply is too long").to_bytes();
                }
            }
        }
        let fds: Vec<BorrowedFd<'_>> = fds_owned.iter().map(|f| f.as_fd()).collect();
        if c.chan.send_now(&bytes, &fds).is_err() {
            // A client that does not read its replies is let go.
            self.drop_client(id);
        }
    }

    fn answer(&mut self, id: u64, r: Request) -> Answer {
        let greeted = self.client(id).is_some_and(|c| c.greeted);
        match r {
            Request::Hello { version, name } => {
                if version != proto::VERSION {
                    return err(format!(
                        "protocol version {version} is not this daemon's ({})",
                        proto::VERSION
                    ));
                }
                if let Some(c) = self.client(id) {
                    c.greeted = true;
                    c.name = name;
                }
                (self.hello(), Vec::new())
            }
            _ if !greeted => err("say hello first"),
            Request::Open { spec, priority } => self.open(id, &spec, priority),
            Request::Filter { flow, spec } => self.refilter(id, flow, &spec),
            Request::AddFilters { flow, filters } => self.add_filters(id, flow, &filters),
            Request::Close { flow } => match self.close(id, flow) {
                true => (Reply::Done, Vec::new()),
                false => err(format!("no flow {flow}")),
            },
            Request::Report { flow } => self.report(id, flow),
            Request::Status => {
                let status = self.status_for(id);
                (Reply::Status { status }, Vec::new())
            }
        }
    }

    fn hello(&self) -> Reply {
        Reply::Hello {
            version: proto::VERSION,
            daemon: format!("sluice {}", env!("CARGO_PKG_VERSION")),
            interfaces: self
                .d
                .ifaces
                .iter()
                .map(|i| proto::Interface {
                    name: i.name.clone(),
                    linktype: i.linktype,
                    snaplen: i.snaplen.min(self.d.config.slot_bytes as u32),
                })
                .collect(),
            mode: match self.d.config.first_match {
                true => "endpoint".into(),
                false => "monitor".into(),
            },
        }
    }

    /// A client is gone (or let go): its flows close, its buffers are
    /// released.
    fn drop_client(&mut self, id: u64) {
        let Some(at) = self.clients.iter().position(|c| c.id == id) else {
            return;
        };
        let mut c = self.clients.swap_remove(at);
        for (_, open) in c.flows.drain() {
            self.release(open);
        }
    }
}
