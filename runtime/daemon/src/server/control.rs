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

use super::deliver::{Group, Member, Route};
use super::{reject_all, Daemon, Steering};
use crate::proto::{self, Reply, Request};
use crate::DaemonError;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use sluice_classifier::FilterId;
use sluice_filter::{Language, Program};
use sluice_flow::buffer::{IBuf, PBuf};
use sluice_flow::policy::{Credentials, ElemShape, FlowShape, Policy};
use sluice_shm::{Channel, Peer, Wake};
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most clients at once.
const MAX_CLIENTS: usize = 4096;
/// Most flows one client may have open.
const MAX_FLOWS_PER_CLIENT: usize = 1024;
/// Most filters in one interface's kernel pre-filter union.
const UNION_MAX: usize = 256;

/// An open flow.
pub(crate) struct Open {
    pub(crate) iface: usize,
    pub(crate) filter: FilterId,
    pub(crate) member: Arc<Member>,
    pub(crate) group: Arc<Group>,
    pub(crate) spec: String,
    /// The filter as compiled (with its language prefix).
    pub(crate) expression: String,
    pub(crate) priority: i32,
}

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
    next_flow: u64,
    pub(crate) started: Instant,
    /// Clients refused by the policy, requests refused as malformed.
    pub(crate) refused: u64,
    pub(crate) bad_requests: u64,
}

/// What a request comes to: a reply and the descriptors sent with it.
type Answer = (Reply, Vec<OwnedFd>);

fn err(message: impl Into<String>) -> Answer {
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
        let fds: Vec<BorrowedFd<'_>> = answer.1.iter().map(|f| f.as_fd()).collect();
        if c.chan.send_now(&answer.0.to_bytes(), &fds).is_err() {
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
            Request::Close { flow } => match self.close(id, flow) {
                true => (Reply::Done, Vec::new()),
                false => err(format!("no flow {flow}")),
            },
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

    /// The flow a specification asks for: its interface and its filter
    /// (with its language prefix), checked for the daemon's rules and the
    /// policy, or the error reply.
    fn check(&self, id: u64, spec: &str) -> Result<(usize, String), Answer> {
        let graph = sluice_flow::spec::parse(spec).map_err(|e| {
            (
                Reply::Error {
                    message: e.message.clone(),
                    rule: None,
                    column: Some(e.column),
                },
                Vec::new(),
            )
        })?;
        let at = |column: usize, message: String| {
            (
                Reply::Error {
                    message,
                    rule: None,
                    column: Some(column),
                },
                Vec::new(),
            )
        };
        let first = &graph.stages[0];
        let src = &first[0];
        let class = src.class.to_ascii_lowercase();
        if first.len() != 1 || !(class == "iface" || class == "device") {
            return Err(at(
                src.column,
                "a daemon flow starts with one live source, (iface,NAME): files are read in the client".into(),
            ));
        }
        if src.args.len() != 1 {
            return Err(at(
                src.column,
                "(iface,NAME) takes the interface's name only (the daemon decides when capture ends)".into(),
            ));
        }
        let name = &src.args[0];
        let Some(iface) = self.d.ifaces.iter().position(|i| &i.name == name) else {
            let names: Vec<&str> = self.d.ifaces.iter().map(|i| i.name.as_str()).collect();
            return Err(at(
                src.arg_columns.first().copied().unwrap_or(src.column),
                format!(
                    "the daemon does not capture on {name} (it captures on {})",
                    names.join(", ")
                ),
            ));
        };
        let mut shape = FlowShape {
            stages: vec![vec![ElemShape::new("iface", true, &[name.as_str()])]],
            callback_every: None,
        };
        let mut expression = String::new();
        match graph.stages.len() {
            1 => {}
            2 => {
                let stage = &graph.stages[1];
                let e = &stage[0];
                let class = e.class.to_ascii_lowercase();
                let prefix = match class.as_str() {
                    "bpf" => "",
                    "cspf" => "cspf:",
                    "dpf" => "dpf:",
                    _ => {
                        return Err(at(
                            e.column,
                            format!("the daemon runs filters of class BPF, CSPF or DPF, not {}", e.class),
                        ))
                    }
                };
                if stage.len() != 1 || e.args.len() != 1 {
                    return Err(at(e.column, "one filter with one argument".into()));
                }
                expression = format!("{prefix}{}", e.args[0]);
                let (_, program, _) = Language::split(&expression);
                if program.trim_start().starts_with('@') {
                    return Err(at(
                        e.arg_columns.first().copied().unwrap_or(e.column),
                        "the daemon never opens files: read the program in the client and send its text".into(),
                    ));
                }
                let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
                shape.stages.push(vec![ElemShape::new(&class, false, &args)]);
            }
            _ => {
                return Err(at(
                    graph.stages[2][0].column,
                    "a daemon flow is a source and at most one filter; run further elements in the client".into(),
                ))
            }
        }
        let Some(c) = self.clients.iter().find(|c| c.id == id) else {
            return Err(err("gone"));
        };
        let mut gids = vec![c.peer.gid];
        gids.extend(c.peer.groups.iter().copied().filter(|g| *g != c.peer.gid));
        let cred = Credentials {
            uid: c.peer.uid,
            gids,
        };
        self.authorise(&shape, &cred)?;
        Ok((iface, expression))
    }

    /// The policy's word: with no policy file, the daemon's own user and
    /// root only.
    fn authorise(&self, shape: &FlowShape, cred: &Credentials) -> Result<(), Answer> {
        if self.d.policy.is_allow_all() {
            let me = rustix::process::getuid().as_raw();
            if cred.uid == 0 || cred.uid == me {
                return Ok(());
            }
            return Err(err(format!(
                "uid {} may not open flows: the daemon runs without a policy file (--policy), so only root and uid {me} may",
                cred.uid
            )));
        }
        self.d.policy.check(shape, cred).map_err(|r| {
            (
                Reply::Error {
                    message: r.message.clone(),
                    rule: r.rule.clone(),
                    column: None,
                },
                Vec::new(),
            )
        })
    }

    /// Compile a filter for an interface, for the merged classifier.
    fn compile(
        &self,
        iface: usize,
        expression: &str,
    ) -> Result<sluice_classifier::merged::Compiled, Answer> {
        let i = &self.d.ifaces[iface];
        let lt = sluice_filter::LinkType::from_number(u32::from(i.linktype))
            .ok_or_else(|| err(format!("link type {} is not supported", i.linktype)))?;
        let builder = Program::builder(lt).snaplen(i.snaplen);
        sluice_split::compile::compile(&builder, expression).map_err(|e| {
            (
                Reply::Error {
                    message: e.to_string(),
                    rule: None,
                    column: e.column(),
                },
                Vec::new(),
            )
        })
    }

    fn open(&mut self, id: u64, spec: &str, priority: i32) -> Answer {
        if self
            .client(id)
            .is_some_and(|c| c.flows.len() >= MAX_FLOWS_PER_CLIENT)
        {
            return err(format!("at most {MAX_FLOWS_PER_CLIENT} flows per client"));
        }
        let (iface, expression) = match self.check(id, spec) {
            Ok(x) => x,
            Err(a) => {
                self.refused += 1;
                return a;
            }
        };
        let compiled = match self.compile(iface, &expression) {
            Ok(c) => c,
            Err(a) => return a,
        };
        match self.install(id, iface, compiled, spec, &expression, priority) {
            Ok(a) => a,
            Err(e) => err(format!("cannot open the flow: {e}")),
        }
    }

    /// Put a compiled flow in place: its group (made for the user's first
    /// flow on the interface), its index buffer with the client's reader
    /// registered at its start, its route, its filter; then the answer
    /// with the three descriptors.
    fn install(
        &mut self,
        id: u64,
        iface: usize,
        compiled: sluice_classifier::merged::Compiled,
        spec: &str,
        expression: &str,
        priority: i32,
    ) -> std::io::Result<Answer> {
        let uid = self.client(id).map_or(0, |c| c.peer.uid);
        let cfg = &self.d.config;
        let (slots, slot_bytes, entries, pref) = (
            cfg.slots(),
            cfg.slot_bytes,
            cfg.ibuf_entries(),
            cfg.preference,
        );
        let i = &mut self.d.ifaces[iface];
        let group = match i.groups.get(&uid) {
            Some(g) => g.clone(),
            None => {
                let g = Arc::new(Group::new(PBuf::in_region(slots, slot_bytes, pref)?));
                i.groups.insert(uid, g.clone());
                g
            }
        };
        let ibuf = Arc::new(IBuf::in_region(entries, pref)?);
        let reader = ibuf
            .register()
            .ok_or_else(|| std::io::Error::other("no reader slot"))?;
        let wake = Arc::new(Wake::new()?);
        let flow_id = self.next_flow;
        self.next_flow += 1;
        let member = Arc::new(Member::new(flow_id, ibuf.clone(), wake.clone()));
        group.members.rcu(|m| {
            let mut v = (**m).clone();
            v.push(member.clone());
            v
        });
        let filter = i.classifier.insert_compiled(Arc::new(compiled), priority);
        let route = Arc::new(Route {
            group: group.clone(),
            member: member.clone(),
        });
        i.routes.rcu(|r| r.with(filter.0, Some(route.clone())));
        i.classifier.publish();
        let fds = vec![
            group
                .pbuf
                .region()
                .ok_or_else(|| std::io::Error::other("no region"))?
                .read_only_fd()?,
            ibuf.region()
                .ok_or_else(|| std::io::Error::other("no region"))?
                .fd()
                .try_clone_to_owned()?,
            wake.as_fd().try_clone_to_owned()?,
        ];
        let (linktype, snaplen) = (i.linktype, i.snaplen.min(slot_bytes as u32));
        let client = self
            .clients
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| std::io::Error::other("gone"))?;
        let number = client.flows.keys().max().map_or(1, |n| n + 1);
        client.flows.insert(
            number,
            Open {
                iface,
                filter,
                member,
                group,
                spec: spec.to_string(),
                expression: expression.to_string(),
                priority,
            },
        );
        self.set_union(iface, true);
        Ok((
            Reply::Opened {
                flow: number,
                reader,
                linktype,
                snaplen,
            },
            fds,
        ))
    }

    /// Replace a flow's filter, keeping its buffers (pcap_setfilter).
    fn refilter(&mut self, id: u64, flow: u64, spec: &str) -> Answer {
        let Some(open) = self.client(id).and_then(|c| c.flows.get(&flow)) else {
            return err(format!("no flow {flow}"));
        };
        let (old_iface, old_filter, priority) = (open.iface, open.filter, open.priority);
        let (iface, expression) = match self.check(id, spec) {
            Ok(x) => x,
            Err(a) => {
                self.refused += 1;
                return a;
            }
        };
        if iface != old_iface {
            return err("a new filter must keep the flow's interface");
        }
        let compiled = match self.compile(iface, &expression) {
            Ok(c) => c,
            Err(a) => return a,
        };
        let Some(open) = self
            .clients
            .iter_mut()
            .find(|c| c.id == id)
            .and_then(|c| c.flows.get_mut(&flow))
        else {
            return err(format!("no flow {flow}"));
        };
        let i = &mut self.d.ifaces[iface];
        let route = Arc::new(Route {
            group: open.group.clone(),
            member: open.member.clone(),
        });
        let filter = i.classifier.insert_compiled(Arc::new(compiled), priority);
        i.routes.rcu(|r| r.with(filter.0, Some(route.clone())));
        i.classifier.remove(old_filter);
        i.classifier.publish();
        i.routes.rcu(|r| r.with(old_filter.0, None));
        open.filter = filter;
        open.spec = spec.to_string();
        open.expression = expression;
        self.set_union(iface, true);
        (Reply::Done, Vec::new())
    }

    /// Close one flow of a client; false when it has none of that number.
    fn close(&mut self, id: u64, flow: u64) -> bool {
        let Some(open) = self.client(id).and_then(|c| c.flows.remove(&flow)) else {
            return false;
        };
        self.release(open);
        true
    }

    fn release(&mut self, open: Open) {
        let i = &mut self.d.ifaces[open.iface];
        i.classifier.remove(open.filter);
        i.classifier.publish();
        i.routes.rcu(|r| r.with(open.filter.0, None));
        let member = open.member.clone();
        open.group.members.rcu(|m| {
            m.iter()
                .filter(|x| !Arc::ptr_eq(x, &member))
                .cloned()
                .collect::<Vec<_>>()
        });
        open.member.ibuf.unregister_all();
        open.member.ibuf.finish();
        let _ = open.member.wake.signal();
        if open.group.members.load().is_empty() {
            i.groups.retain(|_, g| !Arc::ptr_eq(g, &open.group));
        }
        self.update_union(open.iface);
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

    /// Recompute an interface's kernel pre-filter: nothing while no flow
    /// is open, the union of the flows' pcap filters where it fits, else
    /// everything; the capture thread swaps it in.
    fn update_union(&mut self, iface: usize) {
        self.set_union(iface, false);
    }

    /// [`Self::update_union`], and with `wait` until the capture thread
    /// has the new filter in force (a flow just opened must get its
    /// packets from the moment its client is told it is open).
    fn set_union(&mut self, iface: usize, wait: bool) {
        let exprs: Vec<&str> = self
            .clients
            .iter()
            .flat_map(|c| c.flows.values())
            .filter(|o| o.iface == iface)
            .map(|o| o.expression.as_str())
            .collect();
        let i = &self.d.ifaces[iface];
        let program = if exprs.is_empty() {
            reject_all()
        } else {
            union(&exprs, i.linktype, i.snaplen).unwrap_or_else(|| accept_all(i.snaplen))
        };
        let generation = {
            let mut u = i.union.lock().unwrap_or_else(|e| e.into_inner());
            if u.1 == program {
                return;
            }
            u.0 += 1;
            u.1 = program;
            u.0
        };
        i.controls.reload.store(true, Ordering::Relaxed);
        if !wait {
            return;
        }
        // A flow is open when its packets reach user space: wait (briefly)
        // for the capture thread to put the new kernel filter in place.
        let start = Instant::now();
        while i.applied.load(Ordering::Acquire) < generation
            && start.elapsed() < Duration::from_secs(1)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A program that accepts every packet whole.
fn accept_all(snaplen: u32) -> Vec<sluice_bpf::Insn> {
    use sluice_bpf::op::{BPF_K, BPF_RET};
    vec![sluice_bpf::Insn::stmt(BPF_RET | BPF_K, snaplen)]
}

/// One program accepting what any of the pcap filters accepts, when they
/// are few and all pcap, and the result fits the kernel.
fn union(exprs: &[&str], linktype: u16, snaplen: u32) -> Option<Vec<sluice_bpf::Insn>> {
    if exprs.len() > UNION_MAX
        || exprs
            .iter()
            .any(|e| Language::split(e).0 != Language::Pcap || e.trim().is_empty())
    {
        return None;
    }
    let lt = sluice_filter::LinkType::from_number(u32::from(linktype))?;
    let text: Vec<String> = exprs.iter().map(|e| format!("({e})")).collect();
    let p = Program::builder(lt)
        .snaplen(snaplen)
        .build(&text.join(" or "))
        .ok()?;
    (p.bpf().len() + 3 <= sluice_live::MAX_INSNS).then(|| p.bpf().to_vec())
}
