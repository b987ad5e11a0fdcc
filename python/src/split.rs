//! `sluice.split` and `sluice.FilterSet`: many named filters over a
//! capture in one pass (the `sluice split` command's library), and the
//! per-range step that `sluice.dask` runs on its workers.

use crate::errors::{filter_error_at, split_error};
use crate::pyfile::Source;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use sluice_capture::{verify_chain, ChainFault, Checkpoint, RangeEnds};
use sluice_split::{filter_pairs, Options, Outputs, Part, Report, SplitError, Splitter};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Fragment dispatch's limits from Python: ``True`` (the defaults) or a
/// dict of ``hold_packets``, ``hold_bytes``, ``hold_timeout`` (seconds),
/// ``datagram_timeout`` (seconds), ``max_datagrams``.
fn fragment_limits(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<sluice_fragments::Limits>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(on) = v.extract::<bool>() {
        return Ok(on.then(sluice_fragments::Limits::default));
    }
    let d = v.cast::<PyDict>().map_err(|_| {
        PyTypeError::new_err("fragments: True, or a dict of hold_packets, hold_bytes, hold_timeout, datagram_timeout, max_datagrams")
    })?;
    let mut l = sluice_fragments::Limits::default();
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        let secs = |v: &Bound<'_, PyAny>| -> PyResult<Duration> {
            let s: f64 = v.extract()?;
            Duration::try_from_secs_f64(s).map_err(|_| {
                PyValueError::new_err(format!("{key}: {s} is not a number of seconds"))
            })
        };
        match key.as_str() {
            "hold_packets" => l.hold_packets = v.extract()?,
            "hold_bytes" => l.hold_bytes = v.extract()?,
            "hold_timeout" => l.hold_timeout = secs(&v)?,
            "datagram_timeout" => l.datagram_timeout = secs(&v)?,
            "max_datagrams" => l.max_datagrams = v.extract()?,
            other => {
                return Err(PyValueError::new_err(format!(
                    "fragments: unknown limit {other:?}"
                )))
            }
        }
    }
    Ok(Some(l))
}

/// MPF's settings from Python: ``True`` or a dict with ``pending`` (most
/// packets in the postponed queue).
fn mpf_config(v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<sluice_mpf::Config>> {
    let Some(v) = v.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    if let Ok(on) = v.extract::<bool>() {
        return Ok(on.then(sluice_mpf::Config::default));
    }
    let d = v
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("mpf: True, or a dict with pending"))?;
    let mut c = sluice_mpf::Config::default();
    for (k, v) in d.iter() {
        match k.extract::<String>()?.as_str() {
            "pending" => c.max_pending = v.extract()?,
            other => {
                return Err(PyValueError::new_err(format!(
                    "mpf: unknown setting {other:?}"
                )))
            }
        }
    }
    Ok(Some(c))
}

/// How a set splits, from the keyword arguments.
pub fn options(
    first_match: bool,
    fragments: Option<&Bound<'_, PyAny>>,
    mpf: Option<&Bound<'_, PyAny>>,
) -> PyResult<Options> {
    let o = Options {
        first_match,
        fragments: fragment_limits(fragments)?,
        mpf: mpf_config(mpf)?,
        ..Options::default()
    };
    if o.mpf.is_some() && (o.first_match || o.fragments.is_some()) {
        return Err(PyValueError::new_err(
            "mpf gives each packet to every filter that takes it: not with first_match or fragments",
        ));
    }
    Ok(o)
}

/// A named filter set, compiled once per link type met and reused by
/// every split it runs (and by threads at once).
///
/// ``FilterSet(filters, first_match=False, fragments=None, mpf=None)``:
/// ``filters`` is a dict of name to filter text (any language, by
/// prefix), or a list of (name, text) pairs; names become file names.
/// ``fragments`` (``True`` or a dict of limits) sends later IP fragments
/// to the filters of their first fragment, as ``sluice split
/// --fragments``; ``mpf`` (``True`` or ``{"pending": N}``) runs the
/// filters, ``bpf:`` programs, as one MPF set (``sluice split --mpf``).
/// Filters compile when the first capture is split (``compile()`` does it
/// now); a bad filter raises ``sluice.FilterError`` naming it.
///
/// >>> s = sluice.FilterSet({"web": "tcp port 80", "dns": "udp port 53"})
/// >>> s.names
/// ['web', 'dns']
#[pyclass(module = "sluice", frozen)]
pub struct FilterSet {
    splitter: Arc<Splitter>,
    /// Link types loaded from shipped bytes (not compiled here).
    loaded: std::sync::Mutex<Vec<String>>,
}

impl FilterSet {
    /// A filter set from what a Python caller gives: a `FilterSet`, a
    /// dict or a list of pairs.
    pub fn from_py(
        py: Python<'_>,
        filters: &Bound<'_, PyAny>,
        options: Options,
    ) -> PyResult<Arc<Splitter>> {
        if let Ok(set) = filters.cast::<FilterSet>() {
            let s = &set.get().splitter;
            let o = s.options();
            if o.first_match != options.first_match
                || o.fragments != options.fragments
                || o.mpf != options.mpf
            {
                return Err(PyValueError::new_err(
                    "first_match, fragments or mpf differ from the FilterSet's: give them to FilterSet()",
                ));
            }
            return Ok(s.clone());
        }
        let pairs: Vec<(String, String)> = if let Ok(d) = filters.cast::<PyDict>() {
            d.iter()
                .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
                .collect::<PyResult<_>>()
                .map_err(|_: PyErr| {
                    PyTypeError::new_err("filters: a dict of name to filter text")
                })?
        } else {
            filters.extract().map_err(|_| {
                PyTypeError::new_err(
                    "filters: a dict of name to filter text, or (name, text) pairs",
                )
            })?
        };
        let set =
            filter_pairs(pairs.iter().map(|(n, e)| (n.as_str(), e.as_str()))).map_err(|bad| {
                let (i, msg) = &bad[0];
                let name = &pairs[i - 1].0;
                filter_error_at(py, msg.clone(), name, None, None, None, Some(name))
            })?;
        let splitter = Splitter::new(set, options);
        // MPF programs are checked now, as filters are when they compile.
        if splitter.options().mpf.is_some() {
            splitter.mpf().map_err(|e| split_error(py, e))?;
        }
        Ok(Arc::new(splitter))
    }
}

#[pymethods]
impl FilterSet {
    #[new]
    #[pyo3(signature = (filters, first_match=false, fragments=None, mpf=None))]
    fn new(
        py: Python<'_>,
        filters: &Bound<'_, PyAny>,
        first_match: bool,
        fragments: Option<&Bound<'_, PyAny>>,
        mpf: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<FilterSet> {
        let options = options(first_match, fragments, mpf)?;
        Ok(FilterSet {
            splitter: FilterSet::from_py(py, filters, options)?,
            loaded: Default::default(),
        })
    }

    /// Compile the set for a link type now (name or number; Ethernet by
    /// default), to see bad filters before any capture is read.
    #[pyo3(signature = (linktype=None))]
    fn compile(&self, py: Python<'_>, linktype: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let lt = match linktype {
            Some(v) if !v.is_none() => crate::filter::linktype(v)?,
            _ => sluice_filter::LinkType::EN10MB,
        };
        let splitter = self.splitter.clone();
        let n = lt.number() as u16;
        py.detach(move || splitter.merged(n, cfg!(target_endian = "big")).map(drop))
            .map_err(|e| split_error(py, e))
    }

    /// The set compiled for a link type (name or number; Ethernet by
    /// default) as bytes in sluice's versioned shipped format: what
    /// ``load`` takes in another process (a Dask worker) that has the same
    /// filters, instead of compiling them again.
    ///
    /// >>> s = sluice.FilterSet({"web": "tcp port 80"})
    /// >>> blob = s.export()
    /// >>> sluice.FilterSet({"web": "tcp port 80"}).load(blob)
    /// 'EN10MB'
    #[pyo3(signature = (linktype=None))]
    fn export<'py>(
        &self,
        py: Python<'py>,
        linktype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let lt = match linktype {
            Some(v) if !v.is_none() => crate::filter::linktype(v)?,
            _ => sluice_filter::LinkType::EN10MB,
        };
        let splitter = self.splitter.clone();
        let n = lt.number() as u16;
        let bytes = py
            .detach(move || splitter.export(n, cfg!(target_endian = "big")))
            .map_err(|e| split_error(py, e))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Load bytes ``export`` made from the same filters and settings by
    /// the same sluice: the set's merged classifier for their link type is
    /// built from them, nothing compiled. Returns the link type's name;
    /// ``ValueError`` when the bytes are not such bytes.
    fn load(&self, py: Python<'_>, shipped: &[u8]) -> PyResult<String> {
        let splitter = self.splitter.clone();
        let bytes = shipped.to_vec();
        let (lt, _) = py
            .detach(move || splitter.load(&bytes))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        let name = sluice_filter::LinkType::from_number(u32::from(lt))
            .map_or_else(|| lt.to_string(), |l| l.name().to_string());
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name.clone());
        Ok(name)
    }

    /// The link types whose classifier was loaded from shipped bytes
    /// (``load``) rather than compiled here.
    #[getter]
    fn loaded(&self) -> Vec<String> {
        self.loaded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The filters' names, in order.
    #[getter]
    fn names(&self) -> Vec<String> {
        self.splitter
            .filters()
            .iter()
            .map(|f| f.name.clone())
            .collect()
    }

    /// The filters as a dict of name to text.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for f in self.splitter.filters() {
            d.set_item(&f.name, &f.expression)?;
        }
        Ok(d)
    }

    /// Whether each packet goes to the first matching filter only.
    #[getter]
    fn first_match(&self) -> bool {
        self.splitter.options().first_match
    }

    /// Whether later IP fragments go to the filters of their first
    /// fragment.
    #[getter]
    fn fragments(&self) -> bool {
        self.splitter.options().fragments.is_some()
    }

    /// Whether the filters run as one MPF set.
    #[getter]
    fn mpf(&self) -> bool {
        self.splitter.options().mpf.is_some()
    }

    fn __len__(&self) -> usize {
        self.splitter.filters().len()
    }

    fn __repr__(&self) -> String {
        format!("<sluice.FilterSet of {} filters>", self.__len__())
    }
}

/// Run a split with the GIL released, checking for Ctrl-C (and letting
/// other threads run Python) every 65,536 packets.
fn run(
    py: Python<'_>,
    source: Source,
    splitter: &Splitter,
    part: &Part,
    outputs: Option<&Outputs>,
) -> PyResult<Report> {
    let mut interrupted: Option<PyErr> = None;
    let result = py.detach(|| {
        let mut progress = |_offset: u64| match Python::attach(|py| py.check_signals()) {
            Ok(()) => true,
            Err(e) => {
                interrupted = Some(e);
                false
            }
        };
        match source {
            Source::Path(path) => {
                sluice_split::split(&path, splitter, part, outputs, &mut progress)
            }
            Source::File(f, name) => {
                let f = std::io::BufReader::with_capacity(1 << 20, f);
                sluice_split::split_reader(f, &name, splitter, part, outputs, &mut progress)
            }
        }
    });
    if let Some(e) = interrupted {
        return Err(e);
    }
    result.map_err(|e| split_error(py, e))
}

/// Fragment dispatch's and MPF's counts as dicts.
fn counters<'py>(py: Python<'py>, report: &Report) -> PyResult<(Py<PyAny>, Py<PyAny>)> {
    let frag = match &report.fragments {
        Some(c) => {
            let d = PyDict::new(py);
            for (k, v) in [
                ("first_fragments", c.first_fragments),
                ("later_fragments", c.later_fragments),
                ("later_on_arrival", c.later_on_arrival),
                ("held", c.held),
                ("released", c.released),
                ("released_unclaimed", c.released_unclaimed),
                ("dropped", c.dropped()),
                ("dropped_timeout", c.dropped_timeout),
                ("dropped_full", c.dropped_full),
                ("dropped_end", c.dropped_end),
                ("fallback", c.fallback),
                ("datagrams_expired", c.datagrams_expired),
                ("datagrams_evicted", c.datagrams_evicted),
            ] {
                d.set_item(k, v)?;
            }
            d.into_any().unbind()
        }
        None => py.None(),
    };
    let mpf = match &report.mpf {
        Some(s) => {
            let d = PyDict::new(py);
            d.set_item("groups", s.groups)?;
            d.set_item("pending", s.pending)?;
            d.set_item("pending_expired", s.pending_expired)?;
            d.set_item("pending_dropped_full", s.pending_dropped_full)?;
            d.into_any().unbind()
        }
        None => py.None(),
    };
    Ok((frag, mpf))
}

/// Split a capture by many named filters in one pass (one merged
/// classifier), as ``sluice split`` does; returns each filter's packet
/// count, as a dict in filter order.
///
/// ``source``: a path or a file object (``sluice.split`` also takes
/// URLs); gzip and zstd captures are decompressed as they are read.
/// ``filters``: a dict of name to filter text, (name, text) pairs or a
/// ``sluice.FilterSet``. ``out_dir``: write each filter's packets to
/// ``out_dir/NAME.pcap`` (``.pcapng`` for pcapng input; every file is
/// written, empty ones too, and each replaces an existing one only when
/// finished). ``count=True`` with no ``out_dir`` only counts (one of them
/// is needed). ``first_match``: each packet goes to the first matching
/// filter only. ``fragments``, ``mpf``: as ``sluice split --fragments``
/// and ``--mpf`` (see ``FilterSet``). ``stats=True`` returns a dict of
/// ``packets``, ``counts`` and the ``fragments`` and ``mpf`` counters
/// (``None`` when not used), what ``sluice split --json`` prints.
///
/// >>> counts = sluice.split("examples/sample.pcap", {"tcp": "tcp", "udp": "udp"}, count=True)
/// >>> sorted(counts)
/// ['tcp', 'udp']
#[pyfunction]
#[pyo3(signature = (source, filters, out_dir=None, count=false, first_match=false, fragments=None, mpf=None, stats=false, name=None))]
#[allow(clippy::too_many_arguments)]
pub fn split<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    filters: &Bound<'py, PyAny>,
    out_dir: Option<PathBuf>,
    count: bool,
    first_match: bool,
    fragments: Option<&Bound<'py, PyAny>>,
    mpf: Option<&Bound<'py, PyAny>>,
    stats: bool,
    name: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    if out_dir.is_none() && !count && !stats {
        return Err(PyValueError::new_err(
            "nothing to do: give out_dir, or count=True to count only",
        ));
    }
    let splitter = FilterSet::from_py(py, filters, options(first_match, fragments, mpf)?)?;
    let source = Source::extract(source, name, false)?;
    let outputs = out_dir.map(|dir| Outputs {
        dir,
        suffix: String::new(),
        eager: true,
    });
    let report = run(py, source, &splitter, &Part::whole(), outputs.as_ref())?;
    if let Some(e) = report.error {
        return Err(split_error(py, e));
    }
    let d = PyDict::new(py);
    for (f, c) in splitter.filters().iter().zip(&report.counts) {
        d.set_item(&f.name, c)?;
    }
    if !stats {
        return Ok(d);
    }
    let (frag, mpf) = counters(py, &report)?;
    let all = PyDict::new(py);
    all.set_item("packets", report.packets)?;
    all.set_item("counts", d)?;
    all.set_item("fragments", frag)?;
    all.set_item("mpf", mpf)?;
    Ok(all)
}

/// One range of one file, as ``sluice.dask`` runs it on a worker: the
/// records of ``source`` (a path, or a seekable file object named
/// ``name``) that start in ``start..end`` (from the checkpoint ``resume``
/// when known), counted and written to ``out_dir/NAME{suffix}.pcap``
/// files (only filters that get packets). Returns a dict: ``packets``,
/// ``fragments`` and ``mpf`` (their counters, or None), ``counts`` (list),
/// ``files`` (list of paths or None), ``ends`` (the range's ends, for
/// ``verify_ranges``),
/// ``error`` (``None`` or the exception the range stopped with: the
/// file's error only if ``verify_ranges`` finds the range started right).
#[pyfunction]
#[pyo3(signature = (source, filters, start, end, resume=None, out_dir=None, suffix=String::new(), name=None))]
#[allow(clippy::too_many_arguments)]
pub fn split_range<'py>(
    py: Python<'py>,
    source: &Bound<'py, PyAny>,
    filters: &Bound<'py, PyAny>,
    start: u64,
    end: u64,
    resume: Option<&[u8]>,
    out_dir: Option<PathBuf>,
    suffix: String,
    name: Option<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let source = Source::extract(source, name, false)?;
    let set = filters
        .cast::<FilterSet>()
        .map_err(|_| PyTypeError::new_err("split_range takes a sluice.FilterSet"))?;
    let splitter = set.get().splitter.clone();
    let resume = match resume {
        Some(b) => {
            Some(Checkpoint::from_bytes(b).map_err(|e| PyValueError::new_err(e.to_string()))?)
        }
        None => None,
    };
    let part = Part { start, end, resume };
    let outputs = out_dir.map(|dir| Outputs {
        dir,
        suffix,
        eager: false,
    });
    let report = run(py, source, &splitter, &part, outputs.as_ref())?;
    let d = PyDict::new(py);
    d.set_item("packets", report.packets)?;
    let (frag, mpf) = counters(py, &report)?;
    d.set_item("fragments", frag)?;
    d.set_item("mpf", mpf)?;
    d.set_item("counts", report.counts)?;
    let files: Vec<Option<String>> = report
        .files
        .iter()
        .map(|f| f.as_ref().map(|p| p.display().to_string()))
        .collect();
    d.set_item("files", files)?;
    d.set_item("ends", ends_to_py(py, &report.ends))?;
    let capture_error = matches!(report.error, Some(SplitError::Capture(_)));
    d.set_item("capture_error", capture_error)?;
    d.set_item(
        "error",
        report.error.map(|e| split_error(py, e).into_value(py)),
    )?;
    Ok(d)
}

/// A range's ends as plain Python values: (start, end, first, next,
/// failed), checkpoints as bytes.
fn ends_to_py<'py>(
    py: Python<'py>,
    e: &RangeEnds,
) -> (
    u64,
    u64,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    bool,
) {
    let bytes = |c: &Option<Checkpoint>| c.as_ref().map(|c| PyBytes::new(py, &c.to_bytes()));
    (e.start, e.end, bytes(&e.first), bytes(&e.next), e.failed)
}

type EndsTuple = (u64, u64, Option<Vec<u8>>, Option<Vec<u8>>, bool);

/// Check that a file's ranges (their ``ends``, in order) read every
/// record exactly once. ``None``: they did. ``("redo", i, checkpoint)``:
/// range ``i`` must be split again with ``resume=checkpoint`` (bytes, or
/// None for the file's start), then check again. ``("failed", i)``: range
/// ``i``'s error is the file's.
#[pyfunction]
pub fn verify_ranges<'py>(py: Python<'py>, ends: Vec<EndsTuple>) -> PyResult<Py<PyAny>> {
    let parse = |b: &Option<Vec<u8>>| -> PyResult<Option<Checkpoint>> {
        match b {
            Some(b) => Checkpoint::from_bytes(b)
                .map(Some)
                .map_err(|e| PyValueError::new_err(e.to_string())),
            None => Ok(None),
        }
    };
    let mut ranges = Vec::with_capacity(ends.len());
    for (start, end, first, next, failed) in &ends {
        ranges.push(RangeEnds {
            start: *start,
            end: *end,
            first: parse(first)?,
            next: parse(next)?,
            failed: *failed,
        });
    }
    Ok(match verify_chain(&ranges) {
        Ok(()) => py.None(),
        Err(ChainFault::Redo(i, cp)) => {
            let cp = cp.map(|c| PyBytes::new(py, &c.to_bytes()));
            ("redo", i, cp).into_pyobject(py)?.into_any().unbind()
        }
        Err(ChainFault::Failed(i)) => ("failed", i).into_pyobject(py)?.into_any().unbind(),
    })
}
