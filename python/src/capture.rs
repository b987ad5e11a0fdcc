//! `sluice.open`: a pcap or pcapng file read as dpkt's readers read it,
//! `(timestamp, frame)` per packet, or in batches of frames in one buffer
//! (for `Filter.verdicts` and Arrow).

use crate::batch::{packet_tuple, Batch, Builder};
use crate::errors::{capture_error, decompress_error, io_error};
use crate::pyfile::Source;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use sluice_capture::{CaptureFormat, CaptureReader};
use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::Mutex;

/// A capture being read (decompressed as it is read when it is gzip or
/// zstd).
type Inner = CaptureReader<Box<dyn Read + Send>>;

/// A pcap or pcapng file, read packet by packet.
///
/// Iterating gives ``(timestamp, frame)`` pairs as dpkt's readers do
/// (``timestamp`` in seconds as a float, ``frame`` the captured bytes);
/// ``read_batch`` gives many frames at once in one buffer. A truncated or
/// corrupt file raises ``sluice.CaptureError`` after every packet before
/// the problem.
///
/// >>> with sluice.open("examples/sample.pcap") as r:
/// ...     ts, frame = next(iter(r))
/// ...     r.linktype
/// 1
#[pyclass(module = "sluice", frozen)]
pub struct Reader {
    inner: Mutex<State>,
    path: String,
    format: CaptureFormat,
}

/// The reader, and an error met by a batch that is raised by the next
/// call (the batch itself gave the packets before it).
struct State {
    reader: Option<Inner>,
    error: Option<sluice_capture::CaptureError>,
}

impl Reader {
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&mut Inner) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = guard.error.take() {
            return Err(capture_error(py, e));
        }
        match guard.reader.as_mut() {
            Some(r) => f(r),
            None => Err(PyValueError::new_err("I/O operation on closed capture")),
        }
    }
}

/// Open a capture (pcap or pcapng, told apart by its first bytes; gzip
/// and zstd files are decompressed as they are read): a path, or a file
/// object (anything with ``read``: an open file, ``io.BytesIO``, an fsspec
/// file), named ``name`` in errors. ``sluice.open`` also takes URLs
/// (``http://``, ``s3://``... through fsspec).
///
/// >>> r = sluice.open("examples/sample.pcap")
/// >>> sum(1 for _ in r) > 0
/// True
#[pyfunction]
#[pyo3(signature = (source, name=None, close=false))]
pub fn open(
    py: Python<'_>,
    source: &Bound<'_, PyAny>,
    name: Option<String>,
    close: bool,
) -> PyResult<Reader> {
    let source = Source::extract(source, name, close)?;
    let name = source.name();
    let raw: Box<dyn Read + Send> = match source {
        Source::Path(path) => {
            let file = File::open(&path).map_err(|e| io_error(&e, &name))?;
            let meta = file.metadata().map_err(|e| io_error(&e, &name))?;
            if meta.is_dir() {
                return Err(io_error(&std::io::Error::other("Is a directory"), &name));
            }
            Box::new(BufReader::with_capacity(1 << 20, file))
        }
        Source::File(f, _) => Box::new(BufReader::with_capacity(1 << 20, f)),
    };
    let (stream, _) = py
        .detach(|| sluice_capture::decompress(raw))
        .map_err(|e| decompress_error(py, e, &name))?;
    let reader = py
        .detach(|| CaptureReader::from_reader(stream, &name))
        .map_err(|e| capture_error(py, e))?;
    Ok(Reader {
        format: reader.format(),
        inner: Mutex::new(State {
            reader: Some(reader),
            error: None,
        }),
        path: name,
    })
}

#[pymethods]
impl Reader {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<(f64, Py<PyBytes>)>> {
        self.with(py, |r| match r.next_packet() {
            Ok(Some(p)) => Ok(Some(packet_tuple(py, &p))),
            Ok(None) => Ok(None),
            Err(e) => Err(capture_error(py, e)),
        })
    }

    /// Up to ``max_packets`` packets as one ``sluice.Batch`` (frames in one
    /// buffer with offsets, wire lengths, time stamps, link types); an
    /// empty batch at the end of the file.
    ///
    /// >>> r = sluice.open("examples/sample.pcap")
    /// >>> b = r.read_batch(4)
    /// >>> len(b), sluice.Filter("ip").verdicts(b).shape
    /// (4, (4,))
    #[pyo3(signature = (max_packets=65536))]
    fn read_batch(&self, py: Python<'_>, max_packets: usize) -> PyResult<Batch> {
        let mut batch = Builder::default();
        let failed = self.with(py, |r| {
            while batch.len() < max_packets {
                match r.next_packet() {
                    Ok(Some(p)) => batch.push(&p),
                    Ok(None) => break,
                    Err(e) => return Ok(Some(e)),
                }
            }
            Ok(None)
        })?;
        // An error after some packets: they come now, the error with the
        // next call.
        if let Some(e) = failed {
            if batch.is_empty() {
                return Err(capture_error(py, e));
            }
            self.inner.lock().unwrap_or_else(|x| x.into_inner()).error = Some(e);
        }
        Ok(batch.finish(py))
    }

    /// The link type of a pcap file, or of a pcapng file's first
    /// interface (``None`` if it declares none before its first packet).
    #[getter]
    fn linktype(&self) -> Option<u16> {
        self.format.linktype()
    }

    /// dpkt's name for ``linktype``.
    fn datalink(&self) -> Option<u16> {
        self.format.linktype()
    }

    /// ``"pcap"`` or ``"pcapng"``.
    #[getter]
    fn format(&self) -> &'static str {
        if self.format.is_pcapng() {
            "pcapng"
        } else {
            "pcap"
        }
    }

    /// The snapshot length of a pcap file or of a pcapng file's first
    /// interface.
    #[getter]
    fn snaplen(&self) -> Option<u32> {
        match self.format {
            CaptureFormat::Pcap { snaplen, .. } => Some(snaplen),
            CaptureFormat::PcapNg {
                first_interface, ..
            } => first_interface.map(|i| i.snaplen),
        }
    }

    /// Whether a pcap file keeps nanosecond time stamps.
    #[getter]
    fn nanoseconds(&self) -> bool {
        matches!(self.format, CaptureFormat::Pcap { nanos: true, .. })
    }

    /// The file's path.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Close the file (iteration then raises ``ValueError``).
    fn close(&self) {
        let mut guard = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        guard.reader = None;
        guard.error = None;
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
        format!("sluice.open({:?})", self.path)
    }
}
