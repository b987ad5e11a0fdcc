//! `sluice.Classifier`: many filters merged into one classifier (machine
//! code), filters inserted and removed at any time, frames classified one
//! at a time or in batches without the GIL.

use crate::errors::filter_error;
use crate::filter::{linktype, Filter};
use crate::frames::Frames;
use numpy::PyArray1;
use pyo3::exceptions::{PyKeyError, PyTypeError};
use pyo3::prelude::*;
use sluice_filter::{LinkType, Program};
use sluice_native::{AutoClassifier, NativeAuto};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// Frames classified by the batch engine at once.
const CHUNK: usize = 64;

/// The writer, a reader of what it published, and whether there is
/// something to publish.
struct State {
    writer: AutoClassifier,
    reader: sluice_classifier::Reader<NativeAuto>,
    live: HashSet<u32>,
    dirty: bool,
}

impl State {
    /// Publish pending changes (with the native code compiled) before
    /// classifying.
    fn ready(&mut self) {
        if self.dirty {
            self.writer.settle();
            self.dirty = false;
        }
    }
}

/// Many filters merged into one classifier.
///
/// ``Classifier(linktype="EN10MB", first_match=False, snaplen=262144)``.
/// ``insert`` returns a filter's id; ``classify`` gives the ids of every
/// filter that accepts a frame, in increasing order, or with
/// ``first_match=True`` the single winner (highest ``priority``, then
/// earliest inserted) or ``None``.
///
/// >>> c = sluice.Classifier()
/// >>> web = c.insert("tcp port 80")
/// >>> v4 = c.insert("ip")
/// >>> frame = bytes(12) + b"\x08\x00" + bytes(46)
/// >>> c.classify(frame) == [v4]
/// True
/// >>> c.remove(v4)
/// >>> c.classify(frame)
/// []
#[pyclass(module = "sluice", frozen)]
pub struct Classifier {
    state: Mutex<State>,
    linktype: LinkType,
    snaplen: u32,
    first_match: bool,
}

impl Classifier {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl Classifier {
    #[new]
    #[pyo3(signature = (linktype=None, first_match=false, snaplen=262144))]
    fn new(
        linktype: Option<&Bound<'_, PyAny>>,
        first_match: bool,
        snaplen: u32,
    ) -> PyResult<Classifier> {
        let lt = match linktype {
            Some(v) if !v.is_none() => self::linktype(v)?,
            _ => LinkType::EN10MB,
        };
        let writer = AutoClassifier::default();
        let reader = writer.reader();
        Ok(Classifier {
            state: Mutex::new(State {
                writer,
                reader,
                live: HashSet::new(),
                dirty: true,
            }),
            linktype: lt,
            snaplen,
            first_match,
        })
    }

    /// Add a filter (text in any language, or a ``sluice.Filter`` compiled
    /// for the same link type); returns its id. Higher ``priority`` wins
    /// in first-match mode.
    #[pyo3(signature = (filter, priority=0))]
    fn insert(&self, py: Python<'_>, filter: &Bound<'_, PyAny>, priority: i32) -> PyResult<u32> {
        let program = if let Ok(f) = filter.cast::<Filter>() {
            let f = f.get();
            if f.linktype_ref() != self.linktype {
                return Err(PyTypeError::new_err(format!(
                    "the filter is compiled for {}, the classifier for {}",
                    f.linktype_ref().name(),
                    self.linktype.name()
                )));
            }
            f.program_ref().clone()
        } else {
            let text: String = filter
                .extract()
                .map_err(|_| PyTypeError::new_err("insert takes filter text or a sluice.Filter"))?;
            Program::builder(self.linktype)
                .snaplen(self.snaplen)
                .resolver(Arc::new(sluice_filter::SystemResolver))
                .build(&text)
                .map_err(|e| filter_error(py, &e, &text, None))?
        };
        let compiled = program.for_merging();
        let mut s = self.lock();
        let id = s.writer.insert_compiled(Arc::new(compiled), priority);
        s.live.insert(id.0);
        s.dirty = true;
        Ok(id.0)
    }

    /// Remove a filter by id (``KeyError`` if there is none).
    fn remove(&self, id: u32) -> PyResult<()> {
        let mut s = self.lock();
        if !s.live.remove(&id) {
            return Err(PyKeyError::new_err(id));
        }
        s.writer.remove(sluice_classifier::FilterId(id));
        s.dirty = true;
        Ok(())
    }

    /// The ids of the filters that accept one frame, in increasing
    /// order; with ``first_match``, the winner or ``None``.
    #[pyo3(signature = (frame, wirelen=None))]
    fn classify(&self, py: Python<'_>, frame: &[u8], wirelen: Option<u32>) -> PyResult<Py<PyAny>> {
        let wl = wirelen.unwrap_or(u32::try_from(frame.len()).unwrap_or(u32::MAX));
        let mut s = self.lock();
        s.ready();
        if self.first_match {
            let won = s.reader.classify_first(frame, wl).map(|id| id.0);
            return Ok(won.into_pyobject(py)?.into_any().unbind());
        }
        let mut ids = Vec::new();
        s.reader.classify_into(frame, wl, &mut ids);
        Ok(ids.into_pyobject(py)?.into_any().unbind())
    }

    /// Classify many frames (as ``Filter.verdicts`` takes them) with the
    /// GIL released. With ``first_match``: one int64 per frame, the
    /// winner's id or -1. Otherwise two int64 arrays ``(frame, filter)``,
    /// one entry per match, frames in order and each frame's filters in
    /// increasing id order (``sluice.matches_table`` turns them into a
    /// table).
    #[pyo3(signature = (frames, offsets=None, wirelens=None))]
    fn classify_batch<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        offsets: Option<&Bound<'py, PyAny>>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let frames = Frames::extract(frames, offsets, wirelens)?;
        let view = frames.view()?;
        let state = &self.state;
        let first_match = self.first_match;
        let (a, b) = py.detach(|| {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            s.ready();
            let reader = &s.reader;
            let n = view.len();
            let mut chunk = Vec::with_capacity(CHUNK);
            if first_match {
                let mut won = vec![-1i64; n];
                let mut out = vec![None; CHUNK];
                for start in (0..n).step_by(CHUNK) {
                    let end = (start + CHUNK).min(n);
                    view.chunk(start, end, &mut chunk);
                    let out = &mut out[..end - start];
                    reader.classify_first_batch(&chunk, out);
                    for (w, o) in won[start..end].iter_mut().zip(out.iter()) {
                        *w = o.map_or(-1, i64::from);
                    }
                }
                return (won, Vec::new());
            }
            let (mut frame, mut filter) = (Vec::new(), Vec::new());
            let mut out: Vec<Vec<u32>> = vec![Vec::new(); CHUNK];
            let mut bits = Vec::new();
            for start in (0..n).step_by(CHUNK) {
                let end = (start + CHUNK).min(n);
                view.chunk(start, end, &mut chunk);
                let out = &mut out[..end - start];
                reader.classify_batch(&chunk, out);
                for (k, ids) in out.iter_mut().enumerate() {
                    sluice_classifier::sort_ids(ids, &mut bits);
                    for &id in ids.iter() {
                        frame.push((start + k) as i64);
                        filter.push(i64::from(id));
                    }
                }
            }
            (frame, filter)
        });
        if first_match {
            return Ok(PyArray1::from_vec(py, a).into_any().unbind());
        }
        let pair = (PyArray1::from_vec(py, a), PyArray1::from_vec(py, b));
        Ok(pair.into_pyobject(py)?.into_any().unbind())
    }

    /// The ids of the filters installed.
    fn ids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.lock().live.iter().copied().collect();
        v.sort_unstable();
        v
    }

    fn __len__(&self) -> usize {
        self.lock().live.len()
    }

    /// Whether each frame goes to one filter only.
    #[getter]
    fn first_match(&self) -> bool {
        self.first_match
    }

    /// The link type's name.
    #[getter]
    fn linktype(&self) -> &'static str {
        self.linktype.name()
    }

    fn __repr__(&self) -> String {
        format!(
            "<sluice.Classifier of {} filters, {}{}>",
            self.__len__(),
            self.linktype.name(),
            if self.first_match {
                ", first match"
            } else {
                ""
            }
        )
    }
}
