//! `sluice.LiveCapture`: live capture from Python on the runtime's live
//! session (`sluice_live::session::Session`), what `sluice filter -i`
//! runs: the same filter compiled for the interface and run in the
//! kernel where it fits, the same stop conditions (a packet count, a
//! duration, Ctrl-C) and the same counts; accepted packets come to
//! Python as `sluice.Batch`es and, with `write=`, go to capture files
//! through the runtime's rotation (tcpdump's `-w`, `-C`, `-G`, `-W`).
//!
//! The rule: the session runs on a thread of its own and hands packets
//! over in batches under a lock; Python waits for them with the GIL
//! released. A consumer slower than the link holds the session back
//! (the kernel then drops, and counts it), never the other way round;
//! whatever ends the capture, every packet accepted before it is handed
//! over, and the error that ended it (if any) comes after them.

use crate::batch::{Batch, Builder};
use crate::errors::output_error;
use crate::filter::{compile, Filter};
use crate::wait::{seconds, until, Waited};
use crate::writer::rule;
use pyo3::exceptions::{
    PyKeyboardInterrupt, PyOSError, PyPermissionError, PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sluice_capture::sink::{Placement, Rotation};
use sluice_capture::CaptureFormat;
use sluice_filter::{LinkType, Program, Runner};
use sluice_live::session::{Classify, Controls, Event, Report, Session, SessionConfig};
use sluice_live::{Config, Direction, KernelStats, LiveError};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A live failure as the Python exception for it.
fn live_error(e: &LiveError) -> PyErr {
    match e {
        LiveError::Permission { .. } => PyPermissionError::new_err(e.to_string()),
        LiveError::Config(_) => PyValueError::new_err(e.to_string()),
        _ => PyOSError::new_err(e.to_string()),
    }
}

/// Why a capture ended early.
enum Failure {
    Live(LiveError),
    Output(sluice_capture::sink::OutputError),
}

impl From<LiveError> for Failure {
    fn from(e: LiveError) -> Failure {
        Failure::Live(e)
    }
}

/// What the session thread and Python share.
#[derive(Default)]
struct State {
    /// Accepted packets not yet taken by Python.
    ready: Builder,
    /// When the first packet in `ready` came.
    first: Option<Instant>,
    /// Packets handed to the sink.
    accepted: u64,
    /// Whether Python takes batches (false: `run()` only counts and writes).
    keep: bool,
    /// Python is gone: the sink stops the capture.
    closed: bool,
    /// The session has ended.
    finished: bool,
    /// The session's counts at the end.
    report: Option<Report>,
    /// The kernel's counts the last time they were asked for.
    kernel: Option<KernelStats>,
    /// How many times the kernel's counts came.
    counted: u64,
    /// Why it ended early (raised after the last batch).
    failure: Option<Failure>,
}

struct Shared {
    state: Mutex<State>,
    cond: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A live capture on an interface, iterated as ``sluice.Batch``es of the
/// packets ``filter`` accepts (what ``sluice filter -i IFACE FILTER``
/// keeps).
///
/// ``LiveCapture(interface, filter="", count=None, duration=None,
/// snaplen=262144, promiscuous=True, direction="inout", immediate=False,
/// workers=None, buffer_kib=None, block_kib=None, block_timeout_ms=None,
/// kernel_filter=True, optimize=True, max_packets=65536, latency=0.1,
/// write=None, file_size=None, rotate_seconds=None, max_files=None,
/// nanoseconds=False)``. ``filter`` is text in any language (or a
/// ``sluice.Filter`` compiled for the interface's link type); it runs in
/// the kernel where it fits and on every packet in user space. Capturing
/// starts at once and stops after ``count`` accepted packets,
/// ``duration`` seconds, ``stop()``, or Ctrl-C while iterating (the
/// packets captured before it still come, then the iteration ends and
/// ``interrupted`` is true). A batch is handed over when it holds
/// ``max_packets`` packets or ``latency`` seconds after its first packet.
/// ``write=PATH`` writes the accepted packets to capture files too, as
/// ``-w`` (with ``file_size``, ``rotate_seconds``, ``max_files`` as
/// ``-C``, ``-G``, ``-W``). ``stats()`` gives the counts ``sluice filter
/// -i`` prints; ``run()`` captures to the end without handing batches
/// over. Capturing needs CAP_NET_RAW (``PermissionError`` otherwise).
///
/// .. code-block:: python
///
///     with sluice.LiveCapture("eth0", "tcp port 80", duration=10) as cap:
///         for batch in cap:
///             print(len(batch), sluice.to_arrow(batch).num_rows)
///     print(cap.stats())   # captured, received, dropped...
#[pyclass(module = "sluice", frozen)]
pub struct LiveCapture {
    shared: Arc<Shared>,
    controls: Controls,
    thread: Mutex<Option<JoinHandle<()>>>,
    interface: String,
    linktype: u16,
    snaplen: u32,
    max: usize,
    latency: Duration,
    interrupted: AtomicBool,
    prefilter: Option<usize>,
}

/// Each worker's classifier for one program: filter id 0 when it accepts.
fn classifier(program: Arc<Program>) -> impl Fn() -> Classify {
    move || -> Classify {
        let p = program.clone();
        let runner = Runner::host_default();
        Box::new(move |data: &[u8], wirelen: u32, ids: &mut Vec<u32>| {
            if p.run_with(runner, data, wirelen) != 0 {
                ids.push(0);
            }
        })
    }
}

/// The session's sink: packets into the shared batch (waiting while it is
/// full and Python is there to take it) and into the output files.
fn deliver(
    shared: &Shared,
    writer: &mut Option<Rotation>,
    max: usize,
    count: Option<u64>,
    event: Event<'_>,
) -> Result<bool, Failure> {
    match event {
        Event::Packet(pkt, _) => {
            if let Some(w) = writer.as_mut() {
                // `-G` with `-W` made its last file: the capture ends.
                if !w.write(pkt).map_err(Failure::Output)? {
                    return Ok(false);
                }
            }
            let mut st = shared.lock();
            if st.keep {
                while st.ready.len() >= max && st.keep && !st.closed {
                    st = shared
                        .cond
                        .wait_timeout(st, Duration::from_millis(100))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                if st.closed {
                    return Ok(false);
                }
                if st.keep {
                    st.ready.push(pkt);
                    st.first.get_or_insert_with(Instant::now);
                    if st.ready.len() >= max {
                        shared.cond.notify_all();
                    }
                }
            }
            st.accepted += 1;
            Ok(count.map_or(true, |n| st.accepted < n))
        }
        Event::Flush => {
            if let Some(w) = writer.as_mut() {
                w.flush().map_err(Failure::Output)?;
            }
            shared.cond.notify_all();
            Ok(!shared.lock().closed)
        }
        Event::Counts { kernel, .. } => {
            let mut st = shared.lock();
            st.kernel = Some(kernel);
            st.counted += 1;
            shared.cond.notify_all();
            Ok(true)
        }
        // One read of the rings handed over: whoever waits for a batch
        // looks again (once per read, not per packet).
        Event::Handed => {
            shared.cond.notify_all();
            Ok(true)
        }
        Event::Reloaded(_) => Ok(true),
    }
}

impl LiveCapture {
    /// Take a batch when one is due; `Some(None)`: the capture has ended
    /// and everything was taken.
    fn take(&self, st: &mut State, now: Instant) -> Option<Option<Builder>> {
        let due = st.ready.len() >= self.max
            || st.first.is_some_and(|t| now >= t + self.latency)
            || (st.finished && !st.ready.is_empty());
        if due && !st.ready.is_empty() {
            st.first = None;
            self.shared.cond.notify_all();
            return Some(Some(std::mem::take(&mut st.ready)));
        }
        st.finished.then_some(None)
    }

    /// Wait for the session thread to end.
    fn join(&self, py: Python<'_>) {
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            py.detach(|| {
                let _ = t.join();
            });
        }
    }

    /// The failure that ended the capture, once, as an exception.
    fn raise_failure(&self) -> PyResult<()> {
        match self.shared.lock().failure.take() {
            Some(Failure::Live(e)) => Err(live_error(&e)),
            Some(Failure::Output(e)) => Err(output_error(&e)),
            None => Ok(()),
        }
    }
}

#[pymethods]
impl LiveCapture {
    #[new]
    #[pyo3(signature = (interface, filter=None, count=None, duration=None, snaplen=262144, promiscuous=true, direction="inout", immediate=false, workers=None, buffer_kib=None, block_kib=None, block_timeout_ms=None, kernel_filter=true, optimize=true, max_packets=65536, latency=0.1, write=None, file_size=None, rotate_seconds=None, max_files=None, nanoseconds=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        interface: &str,
        filter: Option<&Bound<'_, PyAny>>,
        count: Option<u64>,
        duration: Option<f64>,
        snaplen: u32,
        promiscuous: bool,
        direction: &str,
        immediate: bool,
        workers: Option<usize>,
        buffer_kib: Option<usize>,
        block_kib: Option<usize>,
        block_timeout_ms: Option<u64>,
        kernel_filter: bool,
        optimize: bool,
        max_packets: usize,
        latency: f64,
        write: Option<std::path::PathBuf>,
        file_size: Option<u64>,
        rotate_seconds: Option<u32>,
        max_files: Option<u32>,
        nanoseconds: bool,
    ) -> PyResult<LiveCapture> {
        if count == Some(0) {
            return Err(PyValueError::new_err("count must be at least 1"));
        }
        let duration = seconds(duration)?;
        let latency = seconds(Some(latency))?.unwrap_or_default();
        let rule = rule(file_size, rotate_seconds, max_files)?;
        if write.is_none() && rule.any() {
            return Err(PyValueError::new_err(
                "file_size, rotate_seconds and max_files rotate the files of write=",
            ));
        }
        let mut config = Config::new(interface);
        config.snaplen = snaplen;
        config.promiscuous = promiscuous;
        config.direction = match direction {
            "inout" => Direction::InOut,
            "in" => Direction::In,
            "out" => Direction::Out,
            d => {
                return Err(PyValueError::new_err(format!(
                    "direction {d:?}: in, out or inout"
                )))
            }
        };
        config.immediate = immediate;
        if let Some(kib) = block_kib {
            config.block_size = kib.saturating_mul(1024);
        }
        if let Some(ms) = block_timeout_ms {
            config.block_timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(kib) = buffer_kib {
            config.buffer_kib(kib);
        }
        let session_config = SessionConfig {
            capture: config,
            workers: workers.unwrap_or_else(sluice_live::cores),
            kernel_filter,
            ..SessionConfig::new(interface)
        };
        let mut session = py
            .detach(|| Session::open(&session_config))
            .map_err(|e| live_error(&e))?;
        let lt = session.linktype();
        let link = LinkType::from_number(u32::from(lt)).ok_or_else(|| {
            PyOSError::new_err(format!(
                "{interface}: link type {lt} is not supported for filtering"
            ))
        })?;
        let program = match filter {
            Some(f) if f.is_instance_of::<Filter>() => {
                let f = f.cast::<Filter>()?.get();
                if f.linktype_ref() != link {
                    return Err(PyTypeError::new_err(format!(
                        "the filter is compiled for {}, {interface} has {}",
                        f.linktype_ref().name(),
                        link.name()
                    )));
                }
                f.program_ref().clone()
            }
            Some(f) if !f.is_none() => {
                let text: String = f.extract().map_err(|_| {
                    PyTypeError::new_err("filter: text in any language, or a sluice.Filter")
                })?;
                compile(py, &text, link, snaplen, optimize, None)?.1
            }
            _ => compile(py, "", link, snaplen, optimize, None)?.1,
        };
        let prefilter = match session.prefilter(Some(program.bpf())) {
            Ok(sluice_live::session::Prefilter::Installed(n)) => Some(n),
            Ok(_) => None,
            Err(e) => return Err(live_error(&e)),
        };
        // Compiled, the interface open: only now is an output file made.
        let format = CaptureFormat::Pcap {
            nanos: nanoseconds,
            big_endian: cfg!(target_endian = "big"),
            linktype: lt,
            snaplen: session.snaplen(),
            fcs_len: None,
        };
        let mut writer = match &write {
            Some(path) => Some(
                Rotation::create(
                    &path.display().to_string(),
                    &format,
                    &rule,
                    Placement::InPlace,
                )
                .map_err(|e| output_error(&e))?,
            ),
            None => None,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                keep: true,
                ..State::default()
            }),
            cond: Condvar::new(),
        });
        let controls = Controls {
            deadline: duration.map(|d| Instant::now() + d),
            ..Controls::default()
        };
        let max = max_packets.max(1);
        let (snap, name) = (session.snaplen(), session.name().to_string());
        let thread = {
            let (shared, controls) = (shared.clone(), controls.clone());
            let make = classifier(Arc::new(program));
            std::thread::Builder::new()
                .name(format!("sluice-live-{name}"))
                .spawn(move || {
                    let (report, status) = session.run(&controls, true, make, |event| {
                        deliver(&shared, &mut writer, max, count, event)
                    });
                    let finished = writer.map_or(Ok(()), |w| w.finish().map_err(Failure::Output));
                    let mut st = shared.lock();
                    st.finished = true;
                    st.kernel = Some(report.kernel());
                    st.report = Some(report);
                    st.failure = status.and(finished).err();
                    shared.cond.notify_all();
                })
                .map_err(|e| PyOSError::new_err(format!("cannot start the capture thread: {e}")))?
        };
        Ok(LiveCapture {
            shared,
            controls,
            thread: Mutex::new(Some(thread)),
            interface: name,
            linktype: lt,
            snaplen: snap,
            max,
            latency,
            interrupted: AtomicBool::new(false),
            prefilter,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Batch>> {
        loop {
            let shared = &self.shared;
            let got = until(py, None, |slice| {
                let mut st = shared.lock();
                st.keep = true;
                let deadline = Instant::now() + slice;
                loop {
                    let now = Instant::now();
                    if let Some(b) = self.take(&mut st, now) {
                        return Ok(Some(b));
                    }
                    if now >= deadline {
                        return Ok(None);
                    }
                    let mut wait = deadline - now;
                    if let Some(t) = st.first {
                        wait = wait.min((t + self.latency).saturating_duration_since(now));
                    }
                    st = shared
                        .cond
                        .wait_timeout(st, wait.max(Duration::from_millis(1)))
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            })?;
            match got {
                Waited::Got(Some(b)) => return Ok(Some(b.finish(py))),
                Waited::Got(None) | Waited::TimedOut => {
                    self.join(py);
                    self.raise_failure()?;
                    return Ok(None);
                }
                Waited::Interrupted => {
                    // Ctrl-C: stop, then hand over what was captured
                    // before it; a second one while draining raises.
                    if self.interrupted.swap(true, Ordering::Relaxed) {
                        self.shared.lock().closed = true;
                        return Err(PyKeyboardInterrupt::new_err(()));
                    }
                    self.controls.stop.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    /// Capture to the end (``count``, ``duration``, ``stop()``, Ctrl-C)
    /// without handing batches over (the packets are counted, and
    /// written with ``write=``); returns ``stats()``.
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        {
            let mut st = self.shared.lock();
            st.keep = false;
            st.ready = Builder::default();
            st.first = None;
            self.shared.cond.notify_all();
        }
        loop {
            let shared = &self.shared;
            let got = until(py, None, |slice| {
                let st = shared.lock();
                if st.finished {
                    return Ok(Some(()));
                }
                let _ = shared.cond.wait_timeout(st, slice);
                Ok(None)
            })?;
            match got {
                Waited::Interrupted => {
                    if self.interrupted.swap(true, Ordering::Relaxed) {
                        return Err(PyKeyboardInterrupt::new_err(()));
                    }
                    self.controls.stop.store(true, Ordering::Relaxed);
                }
                _ => break,
            }
        }
        self.join(py);
        self.raise_failure()?;
        self.stats(py)
    }

    /// Stop capturing: what was captured before still comes.
    fn stop(&self) {
        self.controls.stop.store(true, Ordering::Relaxed);
    }

    /// The counts ``sluice filter -i`` prints: ``captured`` (packets
    /// accepted and handed over), ``received`` (by the kernel's filter)
    /// and ``dropped`` (by the kernel), ``dropped_by_sluice`` (the
    /// session's queue), ``packets`` (seen by the workers) and per worker
    /// ``workers``; ``finished`` says whether the capture has ended
    /// (while it runs, the kernel's counts are asked for and may lag by a
    /// poll interval).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let finished = self.shared.lock().finished;
        if !finished {
            // Ask the session for the kernel's counts and wait a little.
            let before = self.shared.lock().counted;
            self.controls.counts.store(true, Ordering::Relaxed);
            let shared = &self.shared;
            let _ = until(py, Some(Duration::from_millis(500)), |slice| {
                let st = shared.lock();
                if st.counted > before || st.finished {
                    return Ok(Some(()));
                }
                let _ = shared.cond.wait_timeout(st, slice);
                Ok(None)
            })?;
        }
        let st = self.shared.lock();
        let d = PyDict::new(py);
        let kernel = st.kernel.unwrap_or_default();
        d.set_item("captured", st.accepted)?;
        d.set_item("received", kernel.received)?;
        d.set_item("dropped", kernel.dropped)?;
        let report = st.report.clone().unwrap_or_default();
        d.set_item("dropped_by_sluice", report.queue_dropped)?;
        d.set_item("packets", report.seen)?;
        let workers = PyList::empty(py);
        for w in &report.workers {
            let x = PyDict::new(py);
            x.set_item("received", w.received)?;
            x.set_item("dropped", w.dropped)?;
            workers.append(x)?;
        }
        d.set_item("workers", workers)?;
        d.set_item("finished", st.finished)?;
        Ok(d)
    }

    /// tcpdump's lines for the counts at the end (``json=True``: the
    /// object ``sluice filter -i --json`` prints); ``None`` while the
    /// capture runs.
    #[pyo3(signature = (json=false))]
    fn report(&self, json: bool) -> Option<String> {
        self.shared.lock().report.as_ref().map(|r| r.text(json))
    }

    /// The interface's name.
    #[getter]
    fn interface(&self) -> &str {
        &self.interface
    }

    /// The link type of the captured frames.
    #[getter]
    fn linktype(&self) -> u16 {
        self.linktype
    }

    /// The snapshot length.
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// The kernel pre-filter's length in instructions, or ``None`` when
    /// the kernel runs none (too long, refused, or turned off).
    #[getter]
    fn kernel_filter(&self) -> Option<usize> {
        self.prefilter
    }

    /// Whether Ctrl-C stopped the capture.
    #[getter]
    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// Stop and wait for the end; batches not taken are dropped (they
    /// are still counted and written).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.controls.stop.store(true, Ordering::Relaxed);
        {
            let mut st = self.shared.lock();
            st.keep = false;
            st.ready = Builder::default();
            self.shared.cond.notify_all();
        }
        self.join(py);
        self.raise_failure()
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("<sluice.LiveCapture on {}>", self.interface)
    }
}

impl Drop for LiveCapture {
    fn drop(&mut self) {
        self.controls.stop.store(true, Ordering::Relaxed);
        let mut st = self.shared.lock();
        st.closed = true;
        st.keep = false;
        self.shared.cond.notify_all();
        // The thread ends within a poll interval; it is not waited for
        // (dropping happens with the GIL held).
    }
}
