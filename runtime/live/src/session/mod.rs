//! A live capture session: the rings on one interface, a worker thread
//! per ring (joined by fanout), each worker classifying what its ring
//! hands over, the accepted packets merged back into timestamp order, a
//! filter swapped while capturing, the kernel's counts, and the ways a
//! capture ends (a stop flag, a duration, the sink).
//!
//! The rule: workers only capture and classify; everything that writes
//! (printing, files, counts, delivery to clients) happens on the thread
//! that called [`Session::run`], in timestamp order, through its sink.
//! Whatever ends the capture, every packet accepted before it reaches the
//! sink (unless the sink asked to stop), and the kernel's counts are read
//! from every ring.
//!
//! ```no_run
//! use sluice_live::session::{Controls, Event, Session, SessionConfig};
//! let mut session = Session::open(&SessionConfig::new("eth0"))?;
//! let controls = Controls::default();
//! let classify = || -> sluice_live::session::Classify {
//!     Box::new(|data: &[u8], _wirelen: u32, ids: &mut Vec<u32>| {
//!         if data.len() > 100 {
//!             ids.push(0);
//!         }
//!     })
//! };
//! let (report, status) = session.run(&controls, true, classify, |event| {
//!     if let Event::Packet(pkt, _) = event {
//!         println!("{} bytes", pkt.caplen);
//!     }
//!     Ok::<bool, sluice_live::LiveError>(true)
//! });
//! status?;
//! println!("{}", report.text(false));
//! # Ok::<(), sluice_live::LiveError>(())
//! ```

mod merge;
mod worker;

use crate::{Capture, Config, KernelFilter, KernelStats, LiveError};
use merge::Merge;
use sluice_bpf::Insn;
use sluice_capture::Packet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::{Msg, Worker};

/// How a worker classifies: the ids of the filters that accept a packet
/// (its bytes and wire length) go into the vector; none: rejected.
pub type Classify = Box<dyn FnMut(&[u8], u32, &mut Vec<u32>) + Send>;

/// Builds a worker's [`Classify`] (each worker its own).
pub type Make = Arc<dyn Fn() -> Classify + Send + Sync>;

/// What a reload runs: a new filter (its classifiers, and the kernel
/// pre-filter's program), or why there is none.
pub type Reload = Box<dyn Fn() -> Result<(Make, KernelProgram), String> + Send>;

/// The kernel pre-filter a reload puts in place.
///
/// ```
/// use sluice_bpf::{op::*, Insn};
/// let p = sluice_live::session::KernelProgram::Classic(vec![Insn::stmt(BPF_RET | BPF_K, 1)]);
/// assert!(matches!(p, sluice_live::session::KernelProgram::Classic(_)));
/// ```
#[derive(Clone, Debug)]
pub enum KernelProgram {
    /// Classic BPF, made into the kernel's form for the link type (none
    /// where the kernel cannot run it, as [`Session::prefilter`] does).
    Classic(Vec<Insn>),
    /// A loaded eBPF socket filter ([`KernelFilter::ebpf`]).
    Ebpf(KernelFilter),
}

impl From<Vec<Insn>> for KernelProgram {
    fn from(program: Vec<Insn>) -> KernelProgram {
        KernelProgram::Classic(program)
    }
}

/// A filter put in place while capturing, for the workers to pick up: its
/// number (from 1), its classifiers, its kernel program.
type Swap = (u64, Make, Option<KernelFilter>);

/// How a session is set up: the rings and how many.
///
/// ```
/// let c = sluice_live::session::SessionConfig::new("eth0");
/// assert_eq!(c.workers, 1);
/// assert!(c.kernel_filter);
/// ```
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// Each ring's settings (the fanout group is set for several workers).
    pub capture: Config,
    /// Capture threads, one ring each (1 to 64).
    pub workers: usize,
    /// Run a pre-filter in the kernel where one is given and fits.
    pub kernel_filter: bool,
    /// The longest a worker waits on its ring before it looks at the
    /// controls again (a stop, a reload): how soon a swapped filter is in
    /// force on a quiet link.
    pub poll: Duration,
}

impl SessionConfig {
    /// One ring on `interface`, with [`Config::new`]'s defaults.
    pub fn new(interface: &str) -> SessionConfig {
        SessionConfig {
            capture: Config::new(interface),
            workers: 1,
            kernel_filter: true,
            poll: Duration::from_millis(100),
        }
    }
}

/// What ends or interrupts a capture from outside; flags another thread
/// (a signal handler's, a control socket's) sets.
///
/// ```
/// let c = sluice_live::session::Controls::default();
/// c.stop.store(true, std::sync::atomic::Ordering::Relaxed);
/// assert!(c.stopping());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Controls {
    /// Stop: the capture drains what the rings hold and ends.
    pub stop: Arc<AtomicBool>,
    /// Set to have the sink handed [`Event::Counts`] (tcpdump's SIGUSR1).
    pub counts: Arc<AtomicBool>,
    /// Set to run the session's reload ([`Session::on_reload`]).
    pub reload: Arc<AtomicBool>,
    /// Stop at this time.
    pub deadline: Option<Instant>,
}

impl Controls {
    /// Whether the capture is to stop (the deadline checked first).
    pub fn stopping(&self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.stop.load(Ordering::Relaxed)
    }

    fn reload_wanted(&self) -> bool {
        self.reload.swap(false, Ordering::Relaxed)
    }

    fn counts_wanted(&self) -> bool {
        self.counts.swap(false, Ordering::Relaxed)
    }
}

/// What the sink of [`Session::run`] is handed.
#[derive(Debug)]
pub enum Event<'a> {
    /// An accepted packet and the ids of the filters that accepted it.
    Packet(&'a Packet<'a>, &'a [u32]),
    /// About a second has passed: push buffered output to its files, so
    /// files of a long capture can be read while they grow.
    Flush,
    /// The packets of one read of the rings have all been handed over
    /// (a sink that wakes readers can do it once per read, not once per
    /// packet).
    Handed,
    /// The counts so far, asked for with [`Controls::counts`].
    Counts {
        /// Packets handed to the sink.
        captured: u64,
        /// The kernel's counts, summed over the rings.
        kernel: KernelStats,
    },
    /// A reload ran: the new filter is in place (with the kernel program's
    /// length, if the kernel runs one), or why the one in force is kept.
    Reloaded(Result<Option<usize>, String>),
}

/// What the capture counted, for the report at the end.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Packets handed to the sink (tcpdump's "captured").
    pub captured: u64,
    /// Packets the workers saw, accepted or not.
    pub seen: u64,
    /// Per worker: the kernel's counts.
    pub workers: Vec<KernelStats>,
    /// Accepted packets dropped because the sink's queue was full.
    pub queue_dropped: u64,
}

impl Report {
    /// The kernel's counts summed over the workers.
    pub fn kernel(&self) -> KernelStats {
        let mut all = KernelStats::default();
        for w in &self.workers {
            all.received += w.received;
            all.dropped += w.dropped;
        }
        all
    }

    /// tcpdump's three lines (and sluice's own drops when there were
    /// any), or with `json` one object with them and each worker's.
    ///
    /// ```
    /// let r = sluice_live::session::Report { captured: 1, seen: 3, ..Default::default() };
    /// assert_eq!(r.text(false), "1 packet captured\n0 packets received by filter\n0 packets dropped by kernel\n");
    /// ```
    pub fn text(&self, json: bool) -> String {
        let all = self.kernel();
        if json {
            let workers: Vec<String> = self
                .workers
                .iter()
                .map(|w| {
                    format!(
                        "{{\"received\": {}, \"dropped\": {}}}",
                        w.received, w.dropped
                    )
                })
                .collect();
            return format!(
                "{{\"captured\": {}, \"received\": {}, \"dropped\": {}, \"dropped_by_sluice\": {}, \"workers\": [{}]}}\n",
                self.captured,
                all.received,
                all.dropped,
                self.queue_dropped,
                workers.join(", ")
            );
        }
        let s = |n: u64| if n == 1 { "" } else { "s" };
        let mut out = format!(
            "{} packet{} captured\n{} packet{} received by filter\n{} packet{} dropped by kernel\n",
            self.captured,
            s(self.captured),
            all.received,
            s(all.received),
            all.dropped,
            s(all.dropped)
        );
        if self.queue_dropped > 0 {
            out += &format!(
                "{} packet{} dropped by sluice (output queue full)\n",
                self.queue_dropped,
                s(self.queue_dropped)
            );
        }
        out
    }
}

/// tcpdump's one-line form of the counts (what it prints on SIGUSR1).
///
/// ```
/// use sluice_live::{session::counts_line, KernelStats};
/// let k = KernelStats { received: 2, dropped: 0 };
/// assert_eq!(counts_line(1, k), "1 packet captured, 2 packets received by filter, 0 packets dropped by kernel");
/// ```
pub fn counts_line(captured: u64, kernel: KernelStats) -> String {
    let s = |n: u64| if n == 1 { "" } else { "s" };
    let (received, dropped) = (kernel.received, kernel.dropped);
    format!(
        "{captured} packet{} captured, {received} packet{} received by filter, {dropped} packet{} dropped by kernel",
        s(captured),
        s(received),
        s(dropped)
    )
}

/// After a stop, the rounds of waiting for the ring blocks still open:
/// each a block timeout (and a margin) long, until one brings nothing,
/// three at most.
pub(crate) struct Drain {
    rounds: u32,
    /// How long a wait lasts while not stopping.
    poll: Duration,
}

impl Drain {
    pub(crate) fn new(poll: Duration) -> Drain {
        Drain { rounds: 0, poll }
    }

    /// How long the next wait for packets lasts.
    pub(crate) fn wait(&mut self, stopping: bool, block_timeout: Duration) -> Duration {
        if stopping {
            self.rounds += 1;
            block_timeout + Duration::from_millis(20)
        } else {
            self.poll
        }
    }

    /// Whether capturing is over, after a wait that `got` blocks or not.
    pub(crate) fn finished(&self, stopping: bool, got: bool) -> bool {
        stopping && (!got || self.rounds >= 3)
    }
}

/// What a kernel pre-filter came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefilter {
    /// The kernel runs it, this many instructions long.
    Installed(usize),
    /// The kernel refused it (it accepts everything instead).
    Refused,
    /// None: none given, too long for the kernel, or turned off.
    None,
}

/// Open rings on an interface, ready to run (see the module docs).
pub struct Session {
    captures: Vec<Capture>,
    kernel_filter: bool,
    block_timeout: Duration,
    reload: Option<Reload>,
    linktype: u16,
    name: String,
    snaplen: u32,
    poll: Duration,
}

impl Session {
    /// Open the rings `config` asks for.
    pub fn open(config: &SessionConfig) -> Result<Session, LiveError> {
        let mut ring = config.capture.clone();
        let workers = config.workers.clamp(1, 64);
        if workers > 1 && ring.fanout.is_none() {
            ring.fanout = Some((std::process::id() & 0xffff) as u16);
        }
        let block_timeout = if ring.immediate {
            Duration::from_millis(1)
        } else {
            ring.block_timeout
        };
        let captures = (0..workers)
            .map(|_| Capture::open(&ring))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Session {
            linktype: captures[0].linktype(),
            name: captures[0].name().to_string(),
            snaplen: captures[0].snaplen(),
            captures,
            kernel_filter: config.kernel_filter,
            block_timeout,
            reload: None,
            poll: config.poll,
        })
    }

    /// The link type of the captured frames.
    pub fn linktype(&self) -> u16 {
        self.linktype
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The snapshot length of the rings.
    pub fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Attach a kernel pre-filter built from `program` to every ring
    /// (unless the configuration turned the kernel filter off).
    pub fn prefilter(&mut self, program: Option<&[Insn]>) -> Result<Prefilter, LiveError> {
        let filter = program.and_then(|p| self.kernel_filter(p));
        let Some(f) = filter else {
            for c in &mut self.captures {
                c.set_filter(None)?;
            }
            return Ok(Prefilter::None);
        };
        let mut all = true;
        for c in &mut self.captures {
            all &= c.set_filter(Some(f.clone()))?;
        }
        Ok(match all {
            true => Prefilter::Installed(f.len()),
            false => Prefilter::Refused,
        })
    }

    /// Attach a loaded eBPF socket filter to every ring as the kernel
    /// pre-filter (see [`crate::Capture::set_ebpf`]); false, with nothing
    /// attached, when the kernel filter is off.
    pub fn prefilter_ebpf(&mut self, prog: std::os::fd::BorrowedFd<'_>) -> Result<bool, LiveError> {
        if !self.kernel_filter {
            return Ok(false);
        }
        for c in &mut self.captures {
            c.set_ebpf(prog)?;
        }
        Ok(true)
    }

    /// The kernel's form of `program`, unless the kernel filter is off or
    /// the kernel cannot run it.
    fn kernel_filter(&self, program: &[Insn]) -> Option<KernelFilter> {
        match self.kernel_filter {
            false => None,
            true => KernelFilter::new(program, self.linktype),
        }
    }

    /// When [`Controls::reload`] is set, put the filter `reload` gives in
    /// place of the one in force: in the kernel (swapped atomically) and
    /// in user space, where every packet after the swap, queued in the
    /// ring before it or not, is judged by the new filter. A reload that
    /// fails keeps the filter in force; either way the sink is told.
    pub fn on_reload(&mut self, reload: Reload) {
        self.reload = Some(reload);
    }

    /// Run the reload: the new filter, or why there is none.
    fn reloaded(&self, number: u64) -> Result<Swap, String> {
        let Some(reload) = self.reload.as_ref() else {
            return Err("no reload is set".into());
        };
        let (make, program) = reload()?;
        let kernel = match program {
            KernelProgram::Classic(p) => self.kernel_filter(&p),
            KernelProgram::Ebpf(k) => Some(k).filter(|_| self.kernel_filter),
        };
        Ok((number, make, kernel))
    }

    /// Capture until [`Controls`] say stop, the sink says stop (`Ok(false)`)
    /// or fails, or a ring fails; each worker classifies with its own
    /// classifier (from `make`), and the sink gets every accepted packet
    /// with its filter ids, in timestamp order across workers, an
    /// [`Event::Flush`] about every second, and the other events as they
    /// come. `with_bytes: false` hands the sink packets without their
    /// bytes (counting only).
    pub fn run<E: From<LiveError>>(
        mut self,
        controls: &Controls,
        with_bytes: bool,
        make: impl Fn() -> Classify,
        mut sink: impl FnMut(Event<'_>) -> Result<bool, E>,
    ) -> (Report, Result<(), E>) {
        if self.captures.len() == 1 {
            return self.run_inline(controls, make(), sink);
        }
        let stop = controls.stop.clone();
        let (linktype, snaplen) = (self.linktype, self.snaplen);
        let n = self.captures.len();
        let (tx, rx) = sync_channel::<Msg>(256);
        let block_timeout = self.block_timeout;
        let mut report = Report {
            workers: vec![KernelStats::default(); n],
            ..Report::default()
        };
        let mut status: Result<(), E> = Ok(());
        // A filter swapped in on a reload, for the workers to pick up.
        let swap: Arc<std::sync::Mutex<Option<Swap>>> = Arc::default();
        let swapped = Arc::new(AtomicU64::new(0));
        // Each worker's kernel counts, for Event::Counts.
        let counts: Vec<Arc<[AtomicU64; 2]>> = (0..n).map(|_| Arc::default()).collect();
        std::thread::scope(|scope| {
            let queue_dropped = Arc::new(AtomicU64::new(0));
            for (w, cap) in std::mem::take(&mut self.captures).into_iter().enumerate() {
                let worker = Worker {
                    index: w,
                    cap,
                    counts: counts[w].clone(),
                    swap: swap.clone(),
                    swapped: swapped.clone(),
                    tx: tx.clone(),
                    stop: stop.clone(),
                    classify: make(),
                    with_bytes,
                    block_timeout,
                    poll: self.poll,
                    dropped: queue_dropped.clone(),
                };
                scope.spawn(move || worker.run());
            }
            drop(tx);
            let mut merge = Merge::new(n);
            let mut handed = 0;
            let mut sink_open = true;
            let mut alive = n;
            let mut flushed = Instant::now();
            while alive > 0 {
                if controls.reload_wanted() && self.reload.is_some() {
                    let number = swapped.load(Ordering::Relaxed) + 1;
                    let told = match self.reloaded(number) {
                        Ok(new) => {
                            let kernel = new.2.as_ref().map(KernelFilter::len);
                            *swap.lock().unwrap_or_else(|e| e.into_inner()) = Some(new);
                            swapped.store(number, Ordering::Release);
                            Ok(kernel)
                        }
                        Err(e) => Err(e),
                    };
                    if sink_open {
                        let _ = sink(Event::Reloaded(told));
                    }
                }
                if controls.counts_wanted() && sink_open {
                    let sum = |i: usize| counts.iter().map(|c| c[i].load(Ordering::Relaxed)).sum();
                    let kernel = KernelStats {
                        received: sum(0),
                        dropped: sum(1),
                    };
                    let _ = sink(Event::Counts {
                        captured: report.captured,
                        kernel,
                    });
                }
                if sink_open && flushed.elapsed() >= Duration::from_secs(1) {
                    flushed = Instant::now();
                    if let Err(e) = sink(Event::Flush) {
                        stop.store(true, Ordering::Relaxed);
                        sink_open = false;
                        if status.is_ok() {
                            status = Err(e);
                        }
                    }
                }
                controls.stopping();
                match rx.recv_timeout(Duration::from_millis(50)) {
                    Ok(Msg::Batch(b)) => {
                        report.seen += b.seen;
                        merge.push(b);
                    }
                    Ok(Msg::Done {
                        worker,
                        stats,
                        error,
                    }) => {
                        alive -= 1;
                        merge.done(worker);
                        match stats {
                            Ok(s) => report.workers[worker] = s,
                            Err(e) if status.is_ok() => status = Err(e.into()),
                            Err(_) => {}
                        }
                        if let Some(e) = error {
                            stop.store(true, Ordering::Relaxed);
                            if status.is_ok() {
                                status = Err(e.into());
                            }
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => break,
                }
                // Hand over what no worker can still precede.
                let r = merge.drain(alive == 0, |item, bytes, ids| {
                    if !sink_open {
                        return Ok(());
                    }
                    let data = &bytes[item.data.0 as usize..(item.data.0 + item.data.1) as usize];
                    let pkt = Packet {
                        ts_sec: item.ts_sec,
                        ts_nsec: item.ts_nsec,
                        caplen: data.len() as u32,
                        wirelen: item.wirelen,
                        linktype,
                        snaplen,
                        interface: 0,
                        data,
                    };
                    report.captured += 1;
                    if !sink(Event::Packet(&pkt, ids))? {
                        sink_open = false;
                        stop.store(true, Ordering::Relaxed);
                    }
                    Ok(())
                });
                if let Err(e) = r {
                    // The sink failed (an output): stop, keep what was written.
                    stop.store(true, Ordering::Relaxed);
                    sink_open = false;
                    if status.is_ok() {
                        status = Err(e);
                    }
                }
                if sink_open && report.captured != handed {
                    handed = report.captured;
                    let _ = sink(Event::Handed);
                }
            }
            report.queue_dropped = queue_dropped.load(Ordering::Relaxed);
        });
        (report, status)
    }

    /// One ring: capture, classify and hand packets to the sink on the
    /// calling thread, straight from the ring (no copy, nothing to merge).
    fn run_inline<E: From<LiveError>>(
        mut self,
        controls: &Controls,
        mut classify: Classify,
        mut sink: impl FnMut(Event<'_>) -> Result<bool, E>,
    ) -> (Report, Result<(), E>) {
        let mut cap = self.captures.pop().expect("one ring");
        let mut report = Report {
            workers: vec![KernelStats::default()],
            ..Report::default()
        };
        let mut status: Result<(), E> = Ok(());
        let (mut drain, mut flushed, mut ids) = (Drain::new(self.poll), Instant::now(), Vec::new());
        let mut sink_open = true;
        let mut swaps = 0;
        loop {
            if controls.reload_wanted() && self.reload.is_some() {
                let told = match self.reloaded(swaps + 1) {
                    Ok((n, make, kernel)) => {
                        swaps = n;
                        let len = kernel.as_ref().map(KernelFilter::len);
                        // The kernel's program first, then every packet from
                        // here on (in the ring already or not) is judged by
                        // the new one in user space too.
                        if let Err(e) = cap.set_filter(kernel) {
                            status = Err(e.into());
                            break;
                        }
                        classify = make();
                        Ok(len)
                    }
                    Err(e) => Err(e),
                };
                let _ = sink(Event::Reloaded(told));
            }
            if controls.counts_wanted() {
                if let Ok(kernel) = cap.stats() {
                    let _ = sink(Event::Counts {
                        captured: report.captured,
                        kernel,
                    });
                }
            }
            if flushed.elapsed() >= Duration::from_secs(1) {
                flushed = Instant::now();
                if let Err(e) = sink(Event::Flush) {
                    status = Err(e);
                    break;
                }
            }
            let stopping = controls.stopping();
            let wait = drain.wait(stopping, self.block_timeout);
            let mut failed = None;
            let r = cap.dispatch(wait, |pkt| {
                report.seen += 1;
                ids.clear();
                classify(pkt.data, pkt.wirelen, &mut ids);
                if ids.is_empty() {
                    return true;
                }
                report.captured += 1;
                match sink(Event::Packet(pkt, &ids)) {
                    Ok(go_on) => sink_open = go_on,
                    Err(e) => {
                        failed = Some(e);
                        sink_open = false;
                    }
                }
                sink_open
            });
            if let Some(e) = failed {
                status = Err(e);
            }
            if sink_open && matches!(&r, Ok(d) if d.packets > 0) {
                let _ = sink(Event::Handed);
            }
            match r {
                Err(e) => {
                    if status.is_ok() {
                        status = Err(e.into());
                    }
                    break;
                }
                // The sink is done (-c, an output failed): stop at once.
                Ok(_) if !sink_open => break,
                Ok(d) if drain.finished(stopping, d.blocks > 0) => break,
                Ok(_) => {}
            }
        }
        match cap.stats() {
            Ok(s) => report.workers[0] = s,
            Err(e) if status.is_ok() => status = Err(e.into()),
            Err(_) => {}
        }
        (report, status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_as_tcpdump() {
        let r = Report {
            captured: 1,
            seen: 3,
            workers: vec![
                KernelStats {
                    received: 2,
                    dropped: 0,
                },
                KernelStats {
                    received: 1,
                    dropped: 1,
                },
            ],
            queue_dropped: 0,
        };
        assert_eq!(
            r.text(false),
            "1 packet captured\n3 packets received by filter\n1 packet dropped by kernel\n"
        );
        assert!(r.text(true).contains("\"workers\": [{\"received\": 2"));
    }

    #[test]
    fn controls_stop_at_their_deadline() {
        let c = Controls {
            deadline: Some(Instant::now()),
            ..Controls::default()
        };
        assert!(c.stopping());
        assert!(c.stop.load(Ordering::Relaxed));
    }
}
