//! Capturing from a live interface for `filter -i` and `split -i`: the
//! options tcpdump users know, one worker thread per ring (joined by
//! fanout), their accepted packets merged back into timestamp order, and
//! the kernel's counts printed when the capture stops.
//!
//! The rule: workers only capture and classify; everything that writes
//! (printing, files, counts) happens on the calling thread, in timestamp
//! order, through the `sink` given to [`Live::run`].

mod merge;

use super::Fail;
use merge::{Batch, Item, Merge};
use sluice::capture::Packet;
use sluice::live::{Capture, Config, Direction, KernelFilter, KernelStats, LiveError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The options of a live capture.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LiveArgs {
    /// Capture live from this interface (`any`: every interface, Linux
    /// cooked v2 frames) instead of reading a file.
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        conflicts_with = "read"
    )]
    pub interface: Option<String>,
    /// With -i: the size of each ring (one per worker) in KiB [default: 65536].
    #[arg(
        short = 'B',
        long = "buffer-size",
        value_name = "KiB",
        requires = "interface"
    )]
    pub buffer: Option<usize>,
    /// With -i: leave the interface out of promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode", requires = "interface")]
    pub no_promiscuous: bool,
    /// With -i: capture packets received (in), sent (out) or both (inout).
    #[arg(short = 'Q', long = "direction", value_enum, requires = "interface")]
    pub direction: Option<DirectionArg>,
    /// With -i: hand packets over as they arrive, not in blocks.
    #[arg(long = "immediate-mode", alias = "immediate", requires = "interface")]
    pub immediate: bool,
    /// With -i: capture threads, one ring each, joined in a fanout group
    /// that keeps both directions of a flow on one thread [default: the
    /// number of cores].
    #[arg(long, value_name = "N", requires = "interface")]
    pub workers: Option<usize>,
    /// With -i: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "interface", value_parser = super::seconds)]
    pub duration: Option<Duration>,
    /// With -i: bytes of each ring block, in KiB [default: 1024].
    #[arg(long = "block-size", value_name = "KiB", requires = "interface")]
    pub block_kib: Option<usize>,
    /// With -i: the longest a ring block waits before it is handed over,
    /// in milliseconds [default: 100].
    #[arg(long = "block-timeout", value_name = "MS", requires = "interface")]
    pub block_timeout_ms: Option<u64>,
    /// With -i: no kernel pre-filter (every packet is copied to the ring
    /// and filtered in user space only).
    #[arg(long = "no-kernel-filter", requires = "interface")]
    pub no_kernel_filter: bool,
}

/// `-Q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DirectionArg {
    /// Received packets.
    In,
    /// Sent packets.
    Out,
    /// Both.
    Inout,
}

/// A live failure as the command reports it.
fn fail(e: LiveError) -> Fail {
    Fail(e.to_string())
}

/// What a worker sends.
enum Msg {
    Batch(Batch),
    Done {
        worker: usize,
        stats: Result<KernelStats, LiveError>,
        error: Option<LiveError>,
    },
}

/// What the sink of [`Live::run`] is handed.
pub enum Event<'a> {
    /// An accepted packet and the ids of the filters that accepted it.
    Packet(&'a Packet<'a>, &'a [u32]),
    /// About a second has passed: push buffered output to its files, so
    /// files of a long capture can be read while they grow.
    Flush,
}

/// How a worker classifies: accepted packets' filter ids go into the vector.
pub type Classify = Box<dyn FnMut(&[u8], u32, &mut Vec<u32>) + Send>;

/// Builds a worker's [`Classify`] (each worker its own).
pub type Make = Arc<dyn Fn() -> Classify + Send + Sync>;

/// What SIGHUP runs: a new filter (its classifiers, and the classic BPF
/// the kernel pre-filter is made from), or why there is none.
pub type Reload = Box<dyn Fn() -> Result<(Make, Vec<sluice::bpf::Insn>), Fail>>;

/// A filter put in place while capturing, for the workers to pick up: its
/// number (from 1), its classifiers, its kernel program.
type Swap = (u64, Make, Option<KernelFilter>);

/// What the capture counted, for the report at the end.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Packets handed to the sink (tcpdump's "captured").
    pub captured: u64,
    /// Packets the workers saw, accepted or not.
    pub seen: u64,
    /// Per worker: the kernel's counts.
    pub workers: Vec<KernelStats>,
    /// Accepted packets dropped because the writer's queue was full.
    pub queue_dropped: u64,
}

impl Report {
    fn sum(&self) -> KernelStats {
        let mut all = KernelStats::default();
        for w in &self.workers {
            all.received += w.received;
            all.dropped += w.dropped;
        }
        all
    }

    /// tcpdump's three lines (and sluice's own drops when there were any),
    /// or with `json` one object with them and each worker's.
    pub fn text(&self, json: bool) -> String {
        let all = self.sum();
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
/// ```ignore
/// assert_eq!(counts_line(1, 2, 0), "1 packet captured, 2 packets received by filter, 0 packets dropped by kernel");
/// ```
fn counts_line(captured: u64, received: u64, dropped: u64) -> String {
    let s = |n: u64| if n == 1 { "" } else { "s" };
    format!(
        "{captured} packet{} captured, {received} packet{} received by filter, {dropped} packet{} dropped by kernel",
        s(captured),
        s(received),
        s(dropped)
    )
}

/// What ends or interrupts a capture from outside: SIGINT/SIGTERM (and
/// the sink, `-c`), `--duration`, and SIGUSR1 asking for the counts.
struct Control {
    stop: Arc<AtomicBool>,
    usr1: Arc<AtomicBool>,
    /// SIGHUP, when there is a filter to reload (else SIGHUP ends sluice).
    hup: Option<Arc<AtomicBool>>,
    deadline: Option<Instant>,
}

impl Control {
    fn new(duration: Option<Duration>, reloads: bool) -> Result<Control, Fail> {
        let usr1 = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, usr1.clone())?;
        let hup = match reloads {
            true => {
                let hup = Arc::new(AtomicBool::new(false));
                signal_hook::flag::register(signal_hook::consts::SIGHUP, hup.clone())?;
                Some(hup)
            }
            false => None,
        };
        Ok(Control {
            stop: stop_on_signals()?,
            usr1,
            hup,
            deadline: duration.map(|d| Instant::now() + d),
        })
    }

    /// Whether SIGHUP came since the last call.
    fn reload_wanted(&self) -> bool {
        self.hup
            .as_ref()
            .is_some_and(|h| h.swap(false, Ordering::Relaxed))
    }

    /// Whether the capture is to stop (the deadline checked first).
    fn stopping(&self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.stop.load(Ordering::Relaxed)
    }

    /// Whether SIGUSR1 came since the last call.
    fn counts_wanted(&self) -> bool {
        self.usr1.swap(false, Ordering::Relaxed)
    }
}

/// After a stop, the rounds of waiting for the ring blocks still open:
/// each a block timeout (and a margin) long, until one brings nothing,
/// three at most.
#[derive(Default)]
struct Drain {
    rounds: u32,
}

impl Drain {
    /// How long the next wait for packets lasts.
    fn wait(&mut self, stopping: bool, block_timeout: Duration) -> Duration {
        if stopping {
            self.rounds += 1;
            block_timeout + Duration::from_millis(20)
        } else {
            Duration::from_millis(100)
        }
    }

    /// Whether capturing is over, after a wait that `got` blocks or not.
    fn finished(&self, stopping: bool, got: bool) -> bool {
        stopping && (!got || self.rounds >= 3)
    }
}

/// Open rings on an interface, ready to run.
pub struct Live {
    captures: Vec<Capture>,
    args: LiveArgs,
    block_timeout: Duration,
    reload: Option<Reload>,
    linktype: u16,
}

/// Set by SIGINT and SIGTERM (a second one ends the process at once).
pub fn stop_on_signals() -> Result<Arc<AtomicBool>, Fail> {
    let flag = Arc::new(AtomicBool::new(false));
    set_on_signals(&flag)?;
    Ok(flag)
}

/// Set `flag` on SIGINT and SIGTERM; a second one ends the process at once.
pub fn set_on_signals(flag: &Arc<AtomicBool>) -> Result<(), Fail> {
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 1, flag.clone())?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(())
}

impl Live {
    /// Open the rings `args` asks for, `snaplen` bytes of each packet.
    pub fn open(args: &LiveArgs, snaplen: u32) -> Result<Live, Fail> {
        let name = args.interface.as_deref().unwrap_or("any");
        let mut config = Config::new(name);
        config.snaplen = snaplen;
        config.promiscuous = !args.no_promiscuous;
        config.direction = match args.direction {
            None | Some(DirectionArg::Inout) => Direction::InOut,
            Some(DirectionArg::In) => Direction::In,
            Some(DirectionArg::Out) => Direction::Out,
        };
        config.immediate = args.immediate;
        if let Some(kib) = args.block_kib {
            config.block_size = kib.saturating_mul(1024);
        }
        if let Some(ms) = args.block_timeout_ms {
            config.block_timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(kib) = args.buffer {
            config.buffer_kib(kib);
        }
        let workers = args
            .workers
            .unwrap_or_else(sluice::live::cores)
            .clamp(1, 64);
        if workers > 1 {
            config.fanout = Some((std::process::id() & 0xffff) as u16);
        }
        let block_timeout = if config.immediate {
            Duration::from_millis(1)
        } else {
            config.block_timeout
        };
        let captures = (0..workers)
            .map(|_| Capture::open(&config))
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(Live {
            linktype: captures[0].linktype(),
            captures,
            args: args.clone(),
            block_timeout,
            reload: None,
        })
    }

    /// The link type of the captured frames.
    pub fn linktype(&self) -> u16 {
        self.linktype
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        self.captures[0].name()
    }

    /// Attach a kernel pre-filter built from `program` to every ring,
    /// unless `--no-kernel-filter`. Returns whether the kernel runs it.
    pub fn prefilter(&mut self, program: Option<&[sluice::bpf::Insn]>) -> Result<bool, Fail> {
        let filter = program.and_then(|p| self.kernel_filter(p));
        let mut all = filter.is_some();
        for c in &mut self.captures {
            all &= c.set_filter(filter.clone()).map_err(fail)?;
        }
        if std::env::var_os("SLUICE_DEBUG").is_some() {
            eprintln!(
                "sluice: kernel pre-filter: {}",
                match (&filter, all) {
                    (Some(f), true) => format!("{} instructions", f.len()),
                    (Some(_), false) => "refused by the kernel".into(),
                    (None, _) => "none".into(),
                }
            );
        }
        Ok(all)
    }

    /// The kernel's form of `program`, unless `--no-kernel-filter` or the
    /// kernel cannot run it.
    fn kernel_filter(&self, program: &[sluice::bpf::Insn]) -> Option<KernelFilter> {
        match self.args.no_kernel_filter {
            true => None,
            false => KernelFilter::new(program, self.linktype()),
        }
    }

    /// On SIGHUP, put the filter `reload` gives in place of the one in
    /// force: in the kernel (swapped atomically) and in user space, where
    /// every packet after the swap, queued in the ring before it or not,
    /// is judged by the new filter. A reload that fails keeps the filter
    /// in force and says why.
    pub fn on_sighup(&mut self, reload: Reload) {
        self.reload = Some(reload);
    }

    /// Run the reload, on SIGHUP: the new filter, or `None` (said why).
    fn reloaded(&self, number: u64) -> Option<Swap> {
        let reload = self.reload.as_ref()?;
        match reload() {
            Ok((make, program)) => {
                let kernel = self.kernel_filter(&program);
                let what = match &kernel {
                    Some(k) => format!("kernel pre-filter: {} instructions", k.len()),
                    None => "no kernel pre-filter".into(),
                };
                eprintln!("sluice: filter changed ({what})");
                Some((number, make, kernel))
            }
            Err(Fail(e)) => {
                eprintln!("sluice: {e}; the filter in force is kept");
                None
            }
        }
    }

    /// The line tcpdump prints when it starts listening.
    pub fn banner(&self) -> String {
        let lt = self.linktype();
        let name = sluice::LinkType::from_number(u32::from(lt)).map_or("?", |l| l.name());
        // libpcap's descriptions of the link types a live capture gets.
        let what = match lt {
            1 => "Ethernet",
            6 => "Token ring",
            10 => "FDDI",
            101 => "Raw IP",
            104 => "Cisco HDLC",
            105 => "802.11",
            107 => "Frame Relay",
            113 => "Linux cooked v1",
            119 => "802.11 plus Prism header",
            127 => "802.11 plus radiotap header",
            276 => "Linux cooked v2",
            _ => name,
        };
        format!(
            "listening on {}, link-type {name} ({what}), snapshot length {} bytes",
            self.name(),
            self.captures[0].snaplen()
        )
    }

    /// Capture until a signal, `--duration`, the sink saying stop, or a
    /// failure; each worker classifies with its own `classify` (from
    /// `make`), and the sink gets every accepted packet with its filter
    /// ids, in timestamp order across workers, and a [`Event::Flush`]
    /// about every second. `with_bytes: false` hands
    /// the sink packets without their bytes (counting only).
    ///
    /// Whatever ends the capture, every packet accepted before it reaches
    /// the sink (unless the sink asked to stop), and the kernel's counts
    /// are read from every ring.
    pub fn run(
        mut self,
        with_bytes: bool,
        make: impl Fn() -> Classify,
        mut sink: impl FnMut(Event<'_>) -> Result<bool, Fail>,
    ) -> (Report, Result<(), Fail>) {
        let control = match Control::new(self.args.duration, self.reload.is_some()) {
            Ok(c) => c,
            Err(e) => return (Report::default(), Err(e)),
        };
        if self.captures.len() == 1 {
            return self.run_inline(&control, make(), sink);
        }
        let stop = control.stop.clone();
        let linktype = self.linktype();
        let snaplen = self.captures[0].snaplen();
        let n = self.captures.len();
        let (tx, rx) = sync_channel::<Msg>(256);
        let block_timeout = self.block_timeout;
        let mut report = Report {
            workers: vec![KernelStats::default(); n],
            ..Report::default()
        };
        let mut status: Result<(), Fail> = Ok(());
        // A filter swapped in on SIGHUP, for the workers to pick up.
        let swap: Arc<std::sync::Mutex<Option<Swap>>> = Arc::default();
        let swapped = Arc::new(AtomicU64::new(0));
        // Each worker's kernel counts, for SIGUSR1.
        let counts: Vec<Arc<[AtomicU64; 2]>> = (0..n).map(|_| Arc::default()).collect();
        std::thread::scope(|scope| {
            let queue_dropped = Arc::new(AtomicU64::new(0));
            for (w, cap) in std::mem::take(&mut self.captures).into_iter().enumerate() {
                let (tx, stop, classify) = (tx.clone(), stop.clone(), make());
                let dropped = queue_dropped.clone();
                let counts = counts[w].clone();
                let (swap, swapped) = (swap.clone(), swapped.clone());
                scope.spawn(move || {
                    let worker = Worker {
                        index: w,
                        cap,
                        counts,
                        swap,
                        swapped,
                        tx,
                        stop,
                        classify,
                        with_bytes,
                        block_timeout,
                        dropped,
                    };
                    worker.run()
                });
            }
            drop(tx);
            let mut merge = Merge::new(n);
            let mut sink_open = true;
            let mut alive = n;
            let mut flushed = Instant::now();
            while alive > 0 {
                if control.reload_wanted() {
                    let number = swapped.load(Ordering::Relaxed) + 1;
                    if let Some(new) = self.reloaded(number) {
                        *swap.lock().unwrap_or_else(|e| e.into_inner()) = Some(new);
                        swapped.store(number, Ordering::Release);
                    }
                }
                if control.counts_wanted() {
                    let sum = |i: usize| counts.iter().map(|c| c[i].load(Ordering::Relaxed)).sum();
                    eprintln!("sluice: {}", counts_line(report.captured, sum(0), sum(1)));
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
                control.stopping();
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
                            Err(e) if status.is_ok() => status = Err(fail(e)),
                            Err(_) => {}
                        }
                        if let Some(e) = error {
                            stop.store(true, Ordering::Relaxed);
                            if status.is_ok() {
                                status = Err(fail(e));
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
            }
            report.queue_dropped = queue_dropped.load(Ordering::Relaxed);
        });
        (report, status)
    }
}

impl Live {
    /// One ring: capture, classify and hand packets to the sink on the
    /// calling thread, straight from the ring (no copy, nothing to merge).
    fn run_inline(
        mut self,
        control: &Control,
        mut classify: Classify,
        mut sink: impl FnMut(Event<'_>) -> Result<bool, Fail>,
    ) -> (Report, Result<(), Fail>) {
        let mut cap = self.captures.pop().expect("one ring");
        let mut report = Report {
            workers: vec![KernelStats::default()],
            ..Report::default()
        };
        let mut status: Result<(), Fail> = Ok(());
        let (mut drain, mut flushed, mut ids) = (Drain::default(), Instant::now(), Vec::new());
        let mut sink_open = true;
        let mut swaps = 0;
        loop {
            if control.reload_wanted() {
                if let Some((n, make, kernel)) = self.reloaded(swaps + 1) {
                    swaps = n;
                    // The kernel's program first, then every packet from
                    // here on (in the ring already or not) is judged by
                    // the new one in user space too.
                    if let Err(e) = cap.set_filter(kernel) {
                        status = Err(fail(e));
                        break;
                    }
                    classify = make();
                }
            }
            if control.counts_wanted() {
                if let Ok(s) = cap.stats() {
                    eprintln!(
                        "sluice: {}",
                        counts_line(report.captured, s.received, s.dropped)
                    );
                }
            }
            if flushed.elapsed() >= Duration::from_secs(1) {
                flushed = Instant::now();
                if let Err(e) = sink(Event::Flush) {
                    status = Err(e);
                    break;
                }
            }
            let stopping = control.stopping();
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
            match r {
                Err(e) => {
                    if status.is_ok() {
                        status = Err(fail(e));
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
            Err(e) if status.is_ok() => status = Err(fail(e)),
            Err(_) => {}
        }
        (report, status)
    }
}

/// One capture thread.
struct Worker {
    index: usize,
    cap: Capture,
    /// Its kernel counts so far (received, dropped), for SIGUSR1.
    counts: Arc<[AtomicU64; 2]>,
    /// The filter last swapped in, and its number.
    swap: Arc<std::sync::Mutex<Option<Swap>>>,
    swapped: Arc<AtomicU64>,
    tx: SyncSender<Msg>,
    stop: Arc<AtomicBool>,
    classify: Classify,
    with_bytes: bool,
    block_timeout: Duration,
    dropped: Arc<AtomicU64>,
}

/// Nanoseconds since 1970 now.
fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl Worker {
    fn run(mut self) {
        let mut ids = Vec::new();
        let mut counted = Instant::now();
        let mut drain = Drain::default();
        let mut in_force = 0;
        // The last batch's sizes: the next one starts with room for as
        // much, so a busy link's batches are not grown copy by copy.
        let mut sizes = (0, 0, 0);
        let error = loop {
            if self.swapped.load(Ordering::Acquire) != in_force {
                let new = self.swap.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some((n, make, kernel)) = new {
                    in_force = n;
                    if let Err(e) = self.cap.set_filter(kernel) {
                        break Some(e);
                    }
                    self.classify = make();
                }
            }
            let stopping = self.stop.load(Ordering::Relaxed);
            let wait = drain.wait(stopping, self.block_timeout);
            let mut batch = Batch {
                worker: self.index,
                horizon: 0,
                seen: 0,
                bytes: Vec::with_capacity(sizes.0),
                items: Vec::with_capacity(sizes.1),
                ids: Vec::with_capacity(sizes.2),
            };
            let (classify, with_bytes) = (&mut self.classify, self.with_bytes);
            let before = now_ns();
            let r = self.cap.dispatch(wait, |pkt| {
                batch.seen += 1;
                ids.clear();
                classify(pkt.data, pkt.wirelen, &mut ids);
                if !ids.is_empty() {
                    let data = if with_bytes {
                        let at = batch.bytes.len() as u32;
                        batch.bytes.extend_from_slice(pkt.data);
                        (at, pkt.data.len() as u32)
                    } else {
                        (0, 0)
                    };
                    let at = batch.ids.len() as u32;
                    batch.ids.extend_from_slice(&ids);
                    batch.items.push(Item {
                        ts_sec: pkt.ts_sec,
                        ts_nsec: pkt.ts_nsec,
                        wirelen: pkt.wirelen,
                        data,
                        ids: (at, ids.len() as u32),
                    });
                }
                true
            });
            // Packets still to come are in blocks that were still open
            // when the ring was last looked at, opened at most a block
            // timeout before.
            let slack = (self.block_timeout + Duration::from_millis(20)).as_nanos() as i128;
            let floor = before - slack;
            batch.horizon = batch.items.last().map_or(floor, |i| i.ts().max(floor));
            if counted.elapsed() >= Duration::from_millis(250) {
                counted = Instant::now();
                if let Ok(s) = self.cap.stats() {
                    self.counts[0].store(s.received, Ordering::Relaxed);
                    self.counts[1].store(s.dropped, Ordering::Relaxed);
                }
            }
            sizes = (batch.bytes.len(), batch.items.len(), batch.ids.len());
            let got = matches!(&r, Ok(d) if d.blocks > 0);
            let items = batch.items.len() as u64;
            match self.tx.try_send(Msg::Batch(batch)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    self.dropped.fetch_add(items, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => break None,
            }
            match r {
                Err(e) => break Some(e),
                Ok(_) if drain.finished(stopping, got) => break None,
                Ok(_) => {}
            }
        };
        let stats = self.cap.stats();
        let _ = self.tx.send(Msg::Done {
            worker: self.index,
            stats,
            error,
        });
    }
}

/// The interfaces `-i` takes, numbered as tcpdump's `-D` numbers them
/// (the `any` device after the interfaces that are up and running, before
/// loopback); with `json`, one object per interface.
pub fn list_interfaces(json: bool) -> Result<(), Fail> {
    let all = sluice::live::interfaces().map_err(fail)?;
    let any_at = all
        .iter()
        .position(|i| i.loopback || !(i.up && i.running))
        .unwrap_or(all.len());
    let mut lines: Vec<(String, String, String)> = all
        .iter()
        .map(|i| (i.name.clone(), String::new(), i.flags()))
        .collect();
    lines.insert(
        any_at,
        (
            "any".into(),
            "Pseudo-device that captures on all interfaces".into(),
            "[Up, Running]".into(),
        ),
    );
    let mut out = String::new();
    if json {
        let items: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(n, (name, what, flags))| {
                format!(
                    "{{\"number\": {}, \"name\": {}, \"description\": {}, \"flags\": {}}}",
                    n + 1,
                    super::split::json_string(name),
                    super::split::json_string(what),
                    super::split::json_string(flags.trim_matches(['[', ']']))
                )
            })
            .collect();
        out = format!("[{}]\n", items.join(", "));
    } else {
        for (n, (name, what, flags)) in lines.iter().enumerate() {
            let what = if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            };
            out += &format!("{}.{name}{what} {flags}\n", n + 1);
        }
    }
    super::print_out(&out)
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
        assert_eq!(
            counts_line(1, 2, 0),
            "1 packet captured, 2 packets received by filter, 0 packets dropped by kernel"
        );
    }
}
