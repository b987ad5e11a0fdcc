//! `sluice.Batch`: frames read together, one buffer and offsets (Arrow's
//! binary layout), and [`Builder`], the owned form every source of
//! batches fills without the GIL (capture files, daemon flows, live
//! captures) before it becomes a `Batch`.
//!
//! The rule: a batch is built in Rust memory with no Python object in
//! sight, so the reading side can run with the GIL released; only the
//! finished vectors are handed to Python, each moved (not copied) into
//! its numpy array.

use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sluice_capture::Packet;
use std::sync::Arc;

/// Frames read together: ``data`` holds them one after another, frame i
/// is ``data[offsets[i]:offsets[i+1]]``; ``wirelens``, ``timestamps_ns``
/// (nanoseconds since 1970) and ``linktypes`` are numpy arrays, one entry
/// per frame. ``Filter.verdicts`` and ``Classifier.classify_batch`` take a
/// batch as it is; ``to_arrow()`` makes a pyarrow table of it without
/// copying the frames.
///
/// >>> b = sluice.open("examples/sample.pcap").read_batch(3)
/// >>> len(b), int(b.offsets[0]), len(b.data) == int(b.offsets[-1])
/// (3, 0, True)
#[pyclass(module = "sluice", frozen)]
pub struct Batch {
    /// The frames, one after another.
    #[pyo3(get)]
    pub data: Py<PyBytes>,
    /// n + 1 byte positions in ``data`` (int64).
    #[pyo3(get)]
    pub offsets: Py<PyArray1<i64>>,
    /// Lengths on the wire (int64).
    #[pyo3(get)]
    pub wirelens: Py<PyArray1<i64>>,
    /// Time stamps in nanoseconds since 1970 (int64).
    #[pyo3(get)]
    pub timestamps_ns: Py<PyArray1<i64>>,
    /// Link types (uint16).
    #[pyo3(get)]
    pub linktypes: Py<PyArray1<u16>>,
    /// Where each frame is, as the batch was built: what native calls
    /// index `data` with (the numpy arrays above may be rewritten by
    /// Python code; these cannot, and were right when they were made).
    pub spans: Arc<Spans>,
}

/// A batch's frame positions and wire lengths, kept in Rust memory.
#[derive(Debug, Default)]
pub struct Spans {
    /// n + 1 byte positions in the batch's data, never decreasing, the
    /// last one its length.
    pub offsets: Vec<i64>,
    /// Wire lengths.
    pub wirelens: Vec<u32>,
}

#[pymethods]
impl Batch {
    fn __len__(&self, py: Python<'_>) -> usize {
        use numpy::PyUntypedArrayMethods;
        self.wirelens.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("<sluice.Batch of {} frames>", self.__len__(py))
    }
}

/// A batch being filled, in Rust memory.
#[derive(Debug)]
pub struct Builder {
    data: Vec<u8>,
    offsets: Vec<i64>,
    wirelens: Vec<i64>,
    ts: Vec<i64>,
    linktypes: Vec<u16>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            data: Vec::new(),
            offsets: vec![0],
            wirelens: Vec::new(),
            ts: Vec::new(),
            linktypes: Vec::new(),
        }
    }
}

impl Builder {
    /// Add one packet (its bytes copied).
    #[inline]
    pub fn push(&mut self, p: &Packet<'_>) {
        self.data.extend_from_slice(p.data);
        self.offsets.push(self.data.len() as i64);
        self.wirelens.push(i64::from(p.wirelen));
        let ns = p.ts_sec.saturating_mul(1_000_000_000);
        self.ts.push(ns.saturating_add(i64::from(p.ts_nsec)));
        self.linktypes.push(p.linktype);
    }

    /// Packets in the batch.
    pub fn len(&self) -> usize {
        self.wirelens.len()
    }

    /// Whether it holds no packet.
    pub fn is_empty(&self) -> bool {
        self.wirelens.is_empty()
    }

    /// The finished batch, as Python objects.
    pub fn finish(self, py: Python<'_>) -> Batch {
        let spans = Arc::new(Spans {
            offsets: self.offsets.clone(),
            wirelens: self.wirelens.iter().map(|&w| w as u32).collect(),
        });
        Batch {
            data: PyBytes::new(py, &self.data).unbind(),
            offsets: PyArray1::from_vec(py, self.offsets).unbind(),
            wirelens: PyArray1::from_vec(py, self.wirelens).unbind(),
            timestamps_ns: PyArray1::from_vec(py, self.ts).unbind(),
            linktypes: PyArray1::from_vec(py, self.linktypes).unbind(),
            spans,
        }
    }
}

/// A packet as the capture iterators give it: ``(timestamp, frame)``,
/// the time stamp in seconds as a float (dpkt's form).
pub fn packet_tuple(py: Python<'_>, p: &Packet<'_>) -> (f64, Py<PyBytes>) {
    let ts = p.ts_sec as f64 + f64::from(p.ts_nsec) / 1e9;
    (ts, PyBytes::new(py, p.data).unbind())
}
