//! `sluice.Daemon` and `sluice.DaemonFlow`: a client of the sluice daemon
//! (`sluice daemon -i IFACE --socket PATH`). Flows opened in the daemon
//! are read from the buffers it shares with this process, packet by
//! packet as `(timestamp, frame)` (what `sluice.open` gives) or in
//! `sluice.Batch`es (what `Reader.read_batch` gives).
//!
//! The rule: every wait for packets runs with the GIL released and looks
//! at Python's signals every 100 ms; iterating stops cleanly on Ctrl-C
//! (the flow's `interrupted` is then true) and at the flow's end, while
//! explicit calls (`next`, `read_batch`) raise. The counts always add up:
//! `delivered + lost = accepted` once nothing is waiting.

use crate::batch::{packet_tuple, Batch, Builder};
use crate::errors::filter_error_at;
use crate::wait::{seconds, until, Waited};
use pyo3::exceptions::{
    PyConnectionError, PyEOFError, PyFileNotFoundError, PyOSError, PyPermissionError,
    PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use sluice_capture::sink::io_message;
use sluice_daemon::{Client, DaemonError};
use sluice_flow::spec::{Element, Graph};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A daemon error as the Python exception a user expects: a refused
/// filter as `FilterError` (with its column in `spec`), a policy refusal
/// as `PermissionError` (naming the rule), a socket that is not there as
/// `FileNotFoundError`, the daemon gone as `ConnectionError`, the flow's
/// end as `EOFError`.
fn daemon_error(py: Python<'_>, e: DaemonError, spec: Option<&str>) -> PyErr {
    let text = match &e {
        DaemonError::Socket(p, io) => format!("socket {}: {}", p.display(), io_message(io)),
        DaemonError::File(p, io) => format!("{}: {}", p.display(), io_message(io)),
        DaemonError::Io(io) => io_message(io),
        _ => e.to_string(),
    };
    match e {
        DaemonError::Refused {
            message,
            column: Some(c),
            rule: None,
        } => filter_error_at(
            py,
            message,
            spec.unwrap_or(""),
            Some(1),
            Some(c),
            None,
            None,
        ),
        DaemonError::Refused { rule: Some(_), .. } => PyPermissionError::new_err(text),
        DaemonError::Refused { .. } | DaemonError::Config(_) => PyValueError::new_err(text),
        DaemonError::Socket(_, io) | DaemonError::File(_, io) | DaemonError::Io(io) => {
            match io.kind() {
                std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(text),
                std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(text),
                std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::ConnectionReset => {
                    PyConnectionError::new_err(text)
                }
                _ => PyOSError::new_err(text),
            }
        }
        DaemonError::Gone => PyConnectionError::new_err(text),
        DaemonError::Ended => PyEOFError::new_err(text),
        _ => PyRuntimeError::new_err(text),
    }
}

/// A connection to a sluice daemon.
///
/// ``Daemon(path="/run/sluice.sock", name="python")``: connects at once
/// (``FileNotFoundError`` when no daemon listens there,
/// ``PermissionError`` when the socket's mode keeps this user out).
/// ``flow()`` opens a flow; ``status()`` is the daemon's status as this
/// user may see it (what ``sluice daemon --status --json`` prints).
///
/// .. code-block:: python
///
///     with sluice.Daemon("/run/sluice.sock") as d:
///         with d.flow("tcp port 80") as web:
///             for ts, frame in web:
///                 ...
///             print(web.stats())   # accepted, delivered, lost, waiting
#[pyclass(module = "sluice", frozen)]
pub struct Daemon {
    client: Mutex<Option<Client>>,
    path: PathBuf,
}

impl Daemon {
    fn client(&self) -> PyResult<MutexGuard<'_, Option<Client>>> {
        let g = self.client.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            return Err(PyValueError::new_err("the daemon connection is closed"));
        }
        Ok(g)
    }
}

/// The flow specification for what a Python caller gives: a whole
/// specification (`(iface,NAME) -> ...`) as it is, anything else as the
/// filter of a flow on `interface` (the daemon's only interface by
/// default); an empty filter takes every packet.
fn flow_spec(text: &str, interface: Option<&str>, interfaces: &[String]) -> PyResult<String> {
    if let Ok(g) = sluice_flow::spec::parse(text) {
        if g.stages
            .first()
            .is_some_and(|s| s.iter().all(|e| e.class.eq_ignore_ascii_case("iface")))
        {
            return Ok(text.to_string());
        }
    }
    let name = match (interface, interfaces) {
        (Some(i), _) => i.to_string(),
        (None, [one]) => one.clone(),
        (None, all) => {
            return Err(PyValueError::new_err(format!(
                "the daemon captures on {}: say which with interface=",
                all.join(", ")
            )))
        }
    };
    let element = |class: &str, args: Vec<String>| Element {
        class: class.into(),
        arg_columns: vec![0; args.len()],
        args,
        column: 0,
    };
    let mut stages = vec![vec![element("iface", vec![name])]];
    if !text.trim().is_empty() {
        stages.push(vec![element("BPF", vec![text.to_string()])]);
    }
    Ok(Graph { stages }.to_string())
}

#[pymethods]
impl Daemon {
    #[new]
    #[pyo3(signature = (path=PathBuf::from("/run/sluice.sock"), name="python"))]
    fn new(py: Python<'_>, path: PathBuf, name: &str) -> PyResult<Daemon> {
        let client = py
            .detach(|| Client::connect(&path, name))
            .map_err(|e| daemon_error(py, e, None))?;
        Ok(Daemon {
            client: Mutex::new(Some(client)),
            path,
        })
    }

    /// Open a flow: ``spec`` is a filter for the daemon's interface
    /// (``"tcp port 80"``, any language by prefix; ``""`` takes every
    /// packet; ``interface=`` when the daemon captures on several), or a
    /// whole specification, ``'(iface,eth0) -> (BPF,"tcp")'``.
    /// ``priority`` orders endpoints on a ``--first-match`` daemon. A
    /// filter the daemon refuses raises ``sluice.FilterError`` with its
    /// column; one the policy refuses, ``PermissionError`` naming the rule.
    #[pyo3(signature = (spec="", priority=0, interface=None))]
    fn flow(
        slf: &Bound<'_, Self>,
        spec: &str,
        priority: i32,
        interface: Option<&str>,
    ) -> PyResult<DaemonFlow> {
        let py = slf.py();
        let mut guard = slf.get().client()?;
        let client = guard.as_mut().expect("checked open");
        let names: Vec<String> = client.interfaces().iter().map(|i| i.name.clone()).collect();
        let spec = flow_spec(spec, interface, &names)?;
        let flow = py
            .detach(|| client.open(&spec, priority))
            .map_err(|e| daemon_error(py, e, Some(&spec)))?;
        Ok(DaemonFlow {
            linktype: flow.linktype(),
            snaplen: flow.snaplen(),
            flow: Mutex::new(Some(flow)),
            spec: Mutex::new(spec),
            daemon: slf.clone().unbind(),
            interrupted: AtomicBool::new(false),
        })
    }

    /// The daemon's status as a dict (clients, flows, counts): all of it
    /// for root and the daemon's own user, one's own flows for others.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let guard = self.client()?;
        let client = guard.as_ref().expect("checked open");
        let v = py
            .detach(|| client.status())
            .map_err(|e| daemon_error(py, e, None))?;
        let text = serde_json::to_string(&v).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        py.import("json")?.call_method1("loads", (text,))
    }

    /// The interfaces the daemon captures on: dicts with ``name``,
    /// ``linktype`` and ``snaplen``.
    #[getter]
    fn interfaces<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let guard = self.client()?;
        let list = PyList::empty(py);
        for i in guard.as_ref().expect("checked open").interfaces() {
            let d = PyDict::new(py);
            d.set_item("name", &i.name)?;
            d.set_item("linktype", i.linktype)?;
            d.set_item("snaplen", i.snaplen)?;
            list.append(d)?;
        }
        Ok(list)
    }

    /// ``"monitor"`` (every flow sees what its filter accepts) or
    /// ``"endpoint"`` (each packet to one flow).
    #[getter]
    fn mode(&self) -> PyResult<String> {
        Ok(self
            .client()?
            .as_ref()
            .expect("checked open")
            .mode()
            .to_string())
    }

    /// The socket's path.
    #[getter]
    fn path(&self) -> String {
        self.path.display().to_string()
    }

    /// Close the connection (flows opened on it stay readable until they
    /// are closed).
    fn close(&self) {
        self.client.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> bool {
        self.close();
        false
    }

    fn __repr__(&self) -> String {
        format!("sluice.Daemon({:?})", self.path.display().to_string())
    }
}

/// A flow open in the daemon.
///
/// Iterating gives ``(timestamp, frame)`` per packet, as ``sluice.open``
/// does, waiting as long as it takes; it ends when the flow ends or on
/// Ctrl-C (then ``interrupted`` is true). ``batches()`` gives
/// ``sluice.Batch``es with stop conditions; ``next(timeout)`` and
/// ``read_batch(max_packets, timeout)`` wait at most ``timeout`` seconds.
#[pyclass(module = "sluice", frozen)]
pub struct DaemonFlow {
    flow: Mutex<Option<sluice_daemon::DaemonFlow>>,
    spec: Mutex<String>,
    daemon: Py<Daemon>,
    linktype: u16,
    snaplen: u32,
    interrupted: AtomicBool,
}

type Guard<'a> = MutexGuard<'a, Option<sluice_daemon::DaemonFlow>>;

/// A packet read from a flow, copied out of the shared buffer.
struct Owned {
    ts_sec: i64,
    ts_nsec: u32,
    wirelen: u32,
    linktype: u16,
    data: Vec<u8>,
}

impl Owned {
    fn packet(&self) -> sluice_capture::Packet<'_> {
        sluice_capture::Packet {
            ts_sec: self.ts_sec,
            ts_nsec: self.ts_nsec,
            caplen: self.data.len() as u32,
            wirelen: self.wirelen,
            linktype: self.linktype,
            snaplen: 0,
            interface: 0,
            data: &self.data,
        }
    }
}

/// Take the waiting packets into `b` until it holds `max`; when none is
/// waiting, wait up to `wait` for one. `Ok(false)`: the flow has ended.
fn fill(
    flow: &mut sluice_daemon::DaemonFlow,
    b: &mut Builder,
    max: usize,
    wait: Duration,
) -> Result<bool, DaemonError> {
    let mut waited = false;
    while b.len() < max {
        let t = if waited || !b.is_empty() {
            Duration::ZERO
        } else {
            wait
        };
        match flow.next(Some(t)) {
            Ok(Some(p)) => b.push(&p.to_capture()),
            Ok(None) => {
                // Under fast-reader preference an entry found overwritten
                // reads as none while others wait.
                if flow.available() == 0 {
                    if !b.is_empty() || waited {
                        break;
                    }
                    waited = true;
                }
            }
            Err(DaemonError::Ended) => return Ok(false),
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

impl DaemonFlow {
    fn lock(&self) -> PyResult<Guard<'_>> {
        let g = self.flow.lock().unwrap_or_else(|e| e.into_inner());
        if g.is_none() {
            return Err(PyValueError::new_err("the flow is closed"));
        }
        Ok(g)
    }

    /// The next packet, waiting up to `timeout`: `Ok(None)` when none
    /// came, `Waited::Interrupted` on Ctrl-C.
    fn next_packet(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
    ) -> PyResult<Waited<Option<Owned>>> {
        let take = |f: &mut sluice_daemon::DaemonFlow, t: Duration| {
            f.next(Some(t)).map(|p| {
                p.map(|p| Owned {
                    ts_sec: p.meta.ts_sec,
                    ts_nsec: p.meta.ts_nsec,
                    wirelen: p.meta.wirelen.max(p.data.len() as u32),
                    linktype: p.meta.linktype,
                    data: p.data.to_vec(),
                })
            })
        };
        // A packet waiting is taken with the GIL held (no system call).
        {
            let mut g = self.lock()?;
            let f = g.as_mut().expect("checked open");
            if f.available() > 0 {
                match take(f, Duration::ZERO) {
                    Ok(Some(p)) => return Ok(Waited::Got(Some(p))),
                    Ok(None) => {}
                    Err(e) => return Err(daemon_error(py, e, None)),
                }
            }
        }
        let flow = &self.flow;
        let got = until(py, timeout, |slice| {
            let mut g = flow.lock().unwrap_or_else(|e| e.into_inner());
            let Some(f) = g.as_mut() else {
                return Err(PyValueError::new_err("the flow is closed"));
            };
            take(f, slice).map_err(|e| Python::attach(|py| daemon_error(py, e, None)))
        })?;
        Ok(match got {
            Waited::Got(p) => Waited::Got(Some(p)),
            Waited::TimedOut => Waited::Got(None),
            Waited::Interrupted => Waited::Interrupted,
        })
    }
}

#[pymethods]
impl DaemonFlow {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(f64, Py<PyBytes>)>> {
        match self.next_packet(py, None) {
            Ok(Waited::Got(Some(p))) => Ok(Some(packet_tuple(py, &p.packet()))),
            Ok(Waited::Got(None)) => Ok(None),
            Ok(Waited::Interrupted) => {
                self.interrupted.store(true, Ordering::Relaxed);
                Ok(None)
            }
            Ok(Waited::TimedOut) => Ok(None),
            Err(e) if e.is_instance_of::<PyEOFError>(py) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The next packet as ``(timestamp, frame)``, waiting at most
    /// ``timeout`` seconds (``None``: as long as it takes); ``None`` when
    /// none came in time. ``EOFError`` when the flow has ended,
    /// ``ConnectionError`` when the daemon has gone.
    #[pyo3(signature = (timeout=None))]
    fn next(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<(f64, Py<PyBytes>)>> {
        match self.next_packet(py, seconds(timeout)?)? {
            Waited::Got(Some(p)) => Ok(Some(packet_tuple(py, &p.packet()))),
            Waited::Got(None) | Waited::TimedOut => Ok(None),
            Waited::Interrupted => Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(())),
        }
    }

    /// Up to ``max_packets`` packets as a ``sluice.Batch``: what is
    /// waiting, or after waiting at most ``timeout`` seconds for the first
    /// (an empty batch when none came). ``EOFError`` when the flow has
    /// ended and nothing is left.
    #[pyo3(signature = (max_packets=65536, timeout=None))]
    fn read_batch(
        &self,
        py: Python<'_>,
        max_packets: usize,
        timeout: Option<f64>,
    ) -> PyResult<Batch> {
        let timeout = seconds(timeout)?;
        let mut b = Builder::default();
        let flow = &self.flow;
        let max = max_packets.max(1);
        let got = until(py, timeout, |slice| {
            let mut g = flow.lock().unwrap_or_else(|e| e.into_inner());
            let Some(f) = g.as_mut() else {
                return Err(PyValueError::new_err("the flow is closed"));
            };
            let open = fill(f, &mut b, max, slice)
                .map_err(|e| Python::attach(|py| daemon_error(py, e, None)))?;
            Ok((!b.is_empty() || !open).then_some(open))
        })?;
        match got {
            Waited::Got(false) if b.is_empty() => Err(daemon_error(py, DaemonError::Ended, None)),
            Waited::Interrupted if b.is_empty() => {
                Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(()))
            }
            _ => Ok(b.finish(py)),
        }
    }

    /// An iterator of ``sluice.Batch``es of at most ``max_packets``
    /// packets, each handed over when full or ``latency`` seconds after
    /// its first packet; it ends after ``count`` packets, after
    /// ``duration`` seconds, when the flow ends, or on Ctrl-C (then the
    /// flow's ``interrupted`` is true).
    #[pyo3(signature = (max_packets=65536, count=None, duration=None, latency=0.1))]
    fn batches(
        slf: &Bound<'_, Self>,
        max_packets: usize,
        count: Option<u64>,
        duration: Option<f64>,
        latency: f64,
    ) -> PyResult<FlowBatches> {
        drop(slf.get().lock()?);
        Ok(FlowBatches {
            flow: slf.clone().unbind(),
            max: max_packets.max(1),
            latency: seconds(Some(latency))?.unwrap_or_default(),
            state: Mutex::new(BatchState {
                left: count,
                deadline: seconds(duration)?.map(|d| Instant::now() + d),
                done: false,
            }),
        })
    }

    /// The flow's counts: ``accepted`` by its filter, ``delivered`` (read
    /// here), ``lost`` (dropped by the daemon with the buffer full, or
    /// overwritten before they were read) and ``waiting``.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let g = self.lock()?;
        let s = g.as_ref().expect("checked open").stats();
        let d = PyDict::new(py);
        d.set_item("accepted", s.accepted)?;
        d.set_item("delivered", s.delivered)?;
        d.set_item("lost", s.lost)?;
        d.set_item("waiting", s.waiting)?;
        Ok(d)
    }

    /// What the flow's elements after its filters report (FFPF's filters
    /// with memory, run in the daemon), in order: ``[{"class":
    /// "hashcount", "report": {"flows": …, "top": […]}}, …]``, an empty
    /// list for a flow of filters only. A flow ended by a failing element
    /// raises ``ValueError`` naming it.
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let text = {
            let g = self.lock()?;
            let f = g.as_ref().expect("checked open");
            py.detach(|| f.report())
                .map_err(|e| daemon_error(py, e, None))?
                .to_string()
        };
        py.import("json")?.call_method1("loads", (text,))
    }

    /// Replace the flow's filter (a filter or a whole specification on the
    /// same interface, as ``Daemon.flow`` takes them); packets from here
    /// on are judged by the new one.
    #[pyo3(signature = (spec, interface=None))]
    fn set_filter(&self, py: Python<'_>, spec: &str, interface: Option<&str>) -> PyResult<()> {
        let mut current = self.spec.lock().unwrap_or_else(|e| e.into_inner());
        // The flow's interface, from its specification.
        let iface = sluice_flow::spec::parse(&current)
            .ok()
            .and_then(|g| g.stages.first().and_then(|s| s.first()).cloned())
            .and_then(|e| e.args.first().cloned());
        let names: Vec<String> = iface.into_iter().collect();
        let spec = flow_spec(spec, interface, &names)?;
        let mut g = self.lock()?;
        let f = g.as_mut().expect("checked open");
        py.detach(|| f.set_filter(&spec))
            .map_err(|e| daemon_error(py, e, Some(&spec)))?;
        *current = spec;
        Ok(())
    }

    /// Close the flow in the daemon (reading it then raises ``ValueError``).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let f = self.flow.lock().unwrap_or_else(|e| e.into_inner()).take();
        match f {
            Some(f) => match py.detach(|| f.close()) {
                // A daemon already gone has closed it.
                Ok(()) | Err(DaemonError::Gone) => Ok(()),
                Err(e) => Err(daemon_error(py, e, None)),
            },
            None => Ok(()),
        }
    }

    /// The flow's specification.
    #[getter]
    fn spec(&self) -> String {
        self.spec.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The link type of its packets.
    #[getter]
    fn linktype(&self) -> u16 {
        self.linktype
    }

    /// Bytes of each packet kept.
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Whether an iteration stopped on Ctrl-C.
    #[getter]
    fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Relaxed)
    }

    /// The daemon it was opened in.
    #[getter]
    fn daemon(&self, py: Python<'_>) -> Py<Daemon> {
        self.daemon.clone_ref(py)
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
        format!("<sluice.DaemonFlow {}>", self.spec())
    }
}

struct BatchState {
    left: Option<u64>,
    deadline: Option<Instant>,
    done: bool,
}

/// The batches of a daemon flow (``DaemonFlow.batches()``).
#[pyclass(module = "sluice", frozen)]
pub struct FlowBatches {
    flow: Py<DaemonFlow>,
    max: usize,
    latency: Duration,
    state: Mutex<BatchState>,
}

#[pymethods]
impl FlowBatches {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Batch>> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.done || st.left == Some(0) {
            return Ok(None);
        }
        let owner = self.flow.bind(py).get();
        let max = st.left.map_or(self.max, |n| self.max.min(n as usize));
        let (latency, deadline) = (self.latency, st.deadline);
        let mut b = Builder::default();
        let mut first: Option<Instant> = None;
        let flow = &owner.flow;
        let got = until(py, None, |slice| {
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(Some(false));
            }
            let mut slice = slice;
            if let Some(d) = deadline {
                slice = slice.min(d - now);
            }
            if let Some(t) = first {
                slice = slice.min(latency.saturating_sub(t.elapsed()));
            }
            let mut g = flow.lock().unwrap_or_else(|e| e.into_inner());
            let Some(f) = g.as_mut() else {
                return Err(PyValueError::new_err("the flow is closed"));
            };
            let open = fill(f, &mut b, max, slice)
                .map_err(|e| Python::attach(|py| daemon_error(py, e, None)))?;
            if !b.is_empty() && first.is_none() {
                first = Some(Instant::now());
            }
            let due = first.is_some_and(|t| t.elapsed() >= latency);
            Ok((!open || b.len() >= max || due).then_some(open))
        })?;
        match got {
            Waited::Got(true) => {}
            Waited::Got(false) | Waited::TimedOut => st.done = true,
            Waited::Interrupted => {
                owner.interrupted.store(true, Ordering::Relaxed);
                st.done = true;
            }
        }
        if let Some(n) = st.left.as_mut() {
            *n -= (b.len() as u64).min(*n);
        }
        if b.is_empty() {
            return Ok(None);
        }
        Ok(Some(b.finish(py)))
    }
}

/// Wait until one of ``flows`` has a packet waiting, at most ``timeout``
/// seconds; returns the flows that have (a reader of several flows calls
/// it after it found all of them empty).
#[pyfunction]
#[pyo3(signature = (flows, timeout=None))]
pub fn wait_any<'py>(
    py: Python<'py>,
    flows: Vec<Bound<'py, DaemonFlow>>,
    timeout: Option<f64>,
) -> PyResult<Vec<Bound<'py, DaemonFlow>>> {
    let timeout = seconds(timeout)?;
    let ready = |flows: &[Bound<'py, DaemonFlow>]| -> PyResult<Vec<Bound<'py, DaemonFlow>>> {
        let mut out = Vec::new();
        for f in flows {
            let g = f.get().lock()?;
            if g.as_ref().expect("checked open").available() > 0 {
                out.push(f.clone());
            }
        }
        Ok(out)
    };
    let now = ready(&flows)?;
    if !now.is_empty() {
        return Ok(now);
    }
    let owners: Vec<&DaemonFlow> = flows.iter().map(|f| f.get()).collect();
    let got = until(py, timeout, |slice| {
        let guards: Vec<Guard<'_>> = owners
            .iter()
            .map(|f| f.flow.lock().unwrap_or_else(|e| e.into_inner()))
            .collect();
        let mut all = Vec::new();
        for g in &guards {
            match g.as_ref() {
                Some(f) => all.push(f),
                None => return Err(PyValueError::new_err("the flow is closed")),
            }
        }
        sluice_daemon::wait_any(&all, slice)
            .map_err(|e| Python::attach(|py| daemon_error(py, e, None)))?;
        Ok(all.iter().any(|f| f.available() > 0).then_some(()))
    })?;
    match got {
        Waited::Interrupted => Err(pyo3::exceptions::PyKeyboardInterrupt::new_err(())),
        _ => ready(&flows),
    }
}
