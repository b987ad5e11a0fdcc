//! The daemon itself: its live captures, one merged classifier per
//! interface, its flow groups, and the control loop that answers clients.
//!
//! The rule: one thread per interface captures and delivers (the data
//! path, [`deliver`]); one control thread owns everything else (clients,
//! flows, the classifiers' writers, the policy) and changes what the data
//! path sees only by publishing: the classifier's next copy and the next
//! routing table. Nothing a client sends reaches the data path except a
//! compiled filter.

pub(crate) mod chain;
mod control;
pub(crate) mod deliver;
pub(crate) mod flows;
mod kernel;
mod publish;
mod status;
#[cfg(test)]
mod stress;

use crate::DaemonError;
use arc_swap::ArcSwap;
use deliver::{Clock, Deliver, Group, PathCounts, Routes};
use sluice_flow::buffer::Preference;
use sluice_flow::policy::Policy;
use sluice_live::session::{
    Classify, Controls, Event, KernelProgram, Report, Session, SessionConfig,
};
use sluice_live::KernelStats;
use sluice_native::AutoClassifier;
use sluice_shm::Listener;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a daemon is set up (the command's options).
///
/// ```
/// let c = sluice_daemon::Config::new(vec!["eth0".into()], "/run/sluice/sluice.sock".into());
/// assert_eq!(c.pbuf_mib, 64);
/// assert!(!c.first_match);
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    /// The interfaces to capture on.
    pub interfaces: Vec<String>,
    /// The socket clients connect to.
    pub socket: PathBuf,
    /// The socket file's mode (who may connect at all), e.g. `0o660`.
    pub socket_mode: Option<u32>,
    /// The socket file's group.
    pub socket_group: Option<u32>,
    /// The policy file (none: only the daemon's own user and root may
    /// open flows).
    pub policy: Option<PathBuf>,
    /// Size of each flow group's packet buffer, in MiB.
    pub pbuf_mib: usize,
    /// Bytes of each packet a buffer slot keeps (longer packets are kept
    /// cut to it; their wire length stays).
    pub slot_bytes: usize,
    /// Index buffer entries per flow (0: as many as the packet buffer has
    /// slots).
    pub ibuf_entries: usize,
    /// Slow- or fast-reader preference for every buffer.
    pub preference: Preference,
    /// Capture threads per interface (fanout).
    pub workers: usize,
    /// Bytes of each packet captured.
    pub snaplen: u32,
    /// Endpoints: each packet to the one flow that claims it (priority,
    /// then age); otherwise every flow whose filter accepts it.
    pub first_match: bool,
    /// Under slow-reader preference, cut loose a flow whose reader has not
    /// moved for this long while its group's buffer is full.
    pub stall_timeout: Option<Duration>,
    /// Run the union of the flows' filters in the kernel where it fits.
    pub kernel_filter: bool,
    /// Where the control thread publishes samples and the status for the
    /// status page (`--http`), if anywhere.
    pub board: Option<Arc<crate::http::Board>>,
}

impl Config {
    /// The defaults for these interfaces and socket.
    pub fn new(interfaces: Vec<String>, socket: PathBuf) -> Config {
        Config {
            interfaces,
            socket,
            socket_mode: None,
            socket_group: None,
            policy: None,
            pbuf_mib: 64,
            slot_bytes: 9216,
            ibuf_entries: 0,
            preference: Preference::Slow,
            workers: 1,
            snaplen: 262_144,
            first_match: false,
            stall_timeout: None,
            kernel_filter: true,
            board: None,
        }
    }

    /// Slots of each group's packet buffer.
    pub(crate) fn slots(&self) -> usize {
        let slot = self.slot_bytes + 8 * sluice_flow::buffer::HEADER_WORDS;
        (self.pbuf_mib.saturating_mul(1 << 20) / slot.max(1)).max(16)
    }

    /// Entries of each flow's index buffer.
    pub(crate) fn ibuf_entries(&self) -> usize {
        match self.ibuf_entries {
            0 => self.slots(),
            n => n,
        }
    }
}

/// What the front end sets to steer a running daemon (from signals).
#[derive(Clone, Debug, Default)]
pub struct Steering {
    /// Stop: close every client and capture, and return.
    pub stop: Arc<AtomicBool>,
    /// Read the policy file again (SIGHUP); authorised flows stay.
    pub reload_policy: Arc<AtomicBool>,
}

/// One interface: its capture thread and what the control thread keeps.
pub(crate) struct Iface {
    pub(crate) name: String,
    pub(crate) linktype: u16,
    pub(crate) snaplen: u32,
    /// The merged classifier's writer (readers are in the capture thread).
    pub(crate) classifier: AutoClassifier,
    pub(crate) routes: Arc<ArcSwap<Routes>>,
    /// The flow groups, by user.
    pub(crate) groups: HashMap<u32, Arc<Group>>,
    /// The kernel pre-filter the capture thread picks up on a reload,
    /// with its generation (counted up at each change).
    pub(crate) union: Arc<Mutex<(u64, KernelProgram)>>,
    /// The eBPF pre-filters in force or waiting ([`kernel`]).
    pub(crate) held: kernel::Held,
    /// Each filter in the classifier, compiled (for an eBPF pre-filter).
    pub(crate) compiled: HashMap<u32, Arc<sluice_classifier::merged::Compiled>>,
    /// The generation of the kernel pre-filter in force.
    pub(crate) applied: Arc<AtomicU64>,
    pub(crate) controls: Controls,
    pub(crate) counts: Arc<PathCounts>,
    /// The kernel's counts, refreshed about every second.
    pub(crate) kernel: Arc<[AtomicU64; 2]>,
    thread: Option<std::thread::JoinHandle<(Report, Result<(), DaemonError>)>>,
}

/// A running daemon (see the module documentation).
pub struct Daemon {
    config: Config,
    listener: Listener,
    policy: Policy,
    ifaces: Vec<Iface>,
}

/// A program that accepts nothing (the kernel filter while no flow is open).
pub(crate) fn reject_all() -> Vec<sluice_bpf::Insn> {
    use sluice_bpf::op::{BPF_K, BPF_RET};
    vec![sluice_bpf::Insn::stmt(BPF_RET | BPF_K, 0)]
}

impl Daemon {
    /// Open every interface's capture and the socket (nothing is captured
    /// into user space until a flow is open).
    pub fn new(config: Config) -> Result<Daemon, DaemonError> {
        if config.interfaces.is_empty() {
            return Err(DaemonError::Config(
                "no interface to capture on (-i)".into(),
            ));
        }
        let policy = match &config.policy {
            Some(p) => Policy::load(&p.to_string_lossy())?,
            None => Policy::allow_all(),
        };
        raise_fd_limit();
        let clock = Arc::new(Clock::new());
        let mut ifaces = Vec::new();
        for name in &config.interfaces {
            let mut sc = SessionConfig::new(name);
            sc.capture.snaplen = config.snaplen;
            sc.workers = config.workers.max(1);
            sc.kernel_filter = config.kernel_filter;
            // A new flow waits for its kernel filter: look often.
            sc.poll = Duration::from_millis(10);
            let mut session = Session::open(&sc).map_err(DaemonError::Live)?;
            let linktype = session.linktype();
            let snaplen = session.snaplen();
            let union = Arc::new(Mutex::new((0, KernelProgram::Classic(reject_all()))));
            session
                .prefilter(Some(&reject_all()))
                .map_err(DaemonError::Live)?;
            let mut iface = Iface {
                name: name.clone(),
                linktype,
                snaplen,
                classifier: AutoClassifier::default(),
                routes: Arc::new(ArcSwap::from_pointee(Routes::default())),
                groups: HashMap::new(),
                union,
                held: kernel::Held::default(),
                compiled: HashMap::new(),
                applied: Arc::default(),
                controls: Controls::default(),
                counts: Arc::default(),
                kernel: Arc::default(),
                thread: None,
            };
            iface.classifier.publish();
            iface.thread = Some(start_capture(&iface, session, &config, clock.clone()));
            ifaces.push(iface);
        }
        let listener = Listener::bind(&config.socket, config.socket_mode, config.socket_group)
            .map_err(|e| DaemonError::Socket(config.socket.clone(), e))?;
        Ok(Daemon {
            config,
            listener,
            policy,
            ifaces,
        })
    }

    /// The interfaces captured on: name and link type.
    pub fn interfaces(&self) -> Vec<(String, u16)> {
        self.ifaces
            .iter()
            .map(|i| (i.name.clone(), i.linktype))
            .collect()
    }

    /// Answer clients until `steering.stop` is set; then close every flow
    /// and capture and return the captures' reports.
    pub fn run(mut self, steering: &Steering) -> Result<Vec<(String, Report)>, DaemonError> {
        let status = control::Control::new(&mut self).run(steering);
        for i in &self.ifaces {
            i.controls.stop.store(true, Ordering::Relaxed);
        }
        let mut reports = Vec::new();
        let mut failed = status.err();
        for i in &mut self.ifaces {
            if let Some(t) = i.thread.take() {
                match t.join() {
                    Ok((report, r)) => {
                        if let Err(e) = r {
                            failed.get_or_insert(e);
                        }
                        reports.push((i.name.clone(), report));
                    }
                    Err(_) => {
                        failed.get_or_insert(DaemonError::Config(format!(
                            "the capture thread of {} failed",
                            i.name
                        )));
                    }
                }
            }
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(reports),
        }
    }
}

/// Start an interface's capture thread: the session's sink delivers to
/// the flows the routing table names.
fn start_capture(
    iface: &Iface,
    session: Session,
    config: &Config,
    clock: Arc<Clock>,
) -> std::thread::JoinHandle<(Report, Result<(), DaemonError>)> {
    let routes = iface.routes.clone();
    let counts = iface.counts.clone();
    let kernel = iface.kernel.clone();
    let controls = iface.controls.clone();
    let union = iface.union.clone();
    let applied = iface.applied.clone();
    let readers = iface.classifier.reader();
    let first_match = config.first_match;
    let stall = config.stall_timeout;
    let name = iface.name.clone();
    std::thread::Builder::new()
        .name(format!("capture {name}"))
        .spawn(move || {
            let mut session = session;
            // Each capture worker gets its own reader (they are not Sync).
            let make_readers = Mutex::new(readers);
            let make: sluice_live::session::Make = Arc::new(move || -> Classify {
                let r = make_readers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                Box::new(move |data: &[u8], wirelen: u32, ids: &mut Vec<u32>| {
                    if first_match {
                        ids.clear();
                        ids.extend(r.classify_first(data, wirelen).map(|f| f.0));
                    } else {
                        r.classify_into(data, wirelen, ids);
                    }
                })
            });
            let reload_make = make.clone();
            // The generation a reload read, in force once it has run.
            let reading = Arc::new(AtomicU64::new(0));
            let read = reading.clone();
            session.on_reload(Box::new(move || {
                let (generation, program) = union.lock().unwrap_or_else(|e| e.into_inner()).clone();
                read.store(generation, Ordering::Relaxed);
                Ok((reload_make.clone(), program))
            }));
            let mut deliver = Deliver::new(routes, stall, clock, counts);
            let mut last_counts = std::time::Instant::now();
            let ticker = controls.counts.clone();
            let (report, status) = session.run(&controls, true, &*make, |event| {
                match event {
                    Event::Packet(pkt, ids) => deliver.packet(pkt, ids),
                    Event::Handed => deliver.handed(),
                    Event::Counts { kernel: k, .. } => store_kernel(&kernel, k),
                    Event::Flush => {
                        // Ask for the kernel's counts about every second.
                        if last_counts.elapsed() >= Duration::from_secs(1) {
                            last_counts = std::time::Instant::now();
                            ticker.store(true, Ordering::Relaxed);
                        }
                    }
                    Event::Reloaded(_) => {
                        applied.store(reading.load(Ordering::Relaxed), Ordering::Release);
                    }
                }
                Ok::<bool, DaemonError>(true)
            });
            store_kernel(&kernel, report.kernel());
            (report, status)
        })
        .expect("spawn a capture thread")
}

fn store_kernel(into: &[AtomicU64; 2], k: KernelStats) {
    into[0].store(k.received, Ordering::Relaxed);
    into[1].store(k.dropped, Ordering::Relaxed);
}

/// Raise the soft limit on open descriptors to the hard limit: each
/// client costs the daemon a socket, a region and a wake-up per flow.
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut r = getrlimit(Resource::Nofile);
    if r.current < r.maximum {
        r.current = r.maximum;
        let _ = setrlimit(Resource::Nofile, r);
    }
}
