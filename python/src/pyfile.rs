//! A Python file object (anything with `read`, and `seek`/`tell` for
//! ranges: an open file, `io.BytesIO`, an fsspec file over HTTP or S3)
//! read from Rust as `std::io::Read + Seek`, and what `sluice.open` and
//! `sluice.split` take as their input: a path or such an object.
//!
//! The rule: the GIL is taken for each call into the object only, so the
//! reading side (a split, a reader's batch) runs with it released between
//! reads; reads are large (the callers buffer a mebibyte), so the cost of
//! taking it is small beside the bytes moved. A Python exception becomes
//! an I/O error carrying its text.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyBytesMethods};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::PathBuf;

/// A Python file object, read from Rust.
pub struct PyFile {
    obj: Py<PyAny>,
    /// Close the object when this is dropped (the module opened it).
    owned: bool,
}

fn io_err(e: PyErr) -> io::Error {
    Python::attach(|py| {
        let kind = if e.is_instance_of::<pyo3::exceptions::PyFileNotFoundError>(py) {
            io::ErrorKind::NotFound
        } else if e.is_instance_of::<pyo3::exceptions::PyPermissionError>(py) {
            io::ErrorKind::PermissionDenied
        } else {
            io::ErrorKind::Other
        };
        io::Error::new(kind, e.value(py).to_string())
    })
}

impl PyFile {
    /// Read `obj` (which has a `read` method); `owned`: close it at the end.
    pub fn new(obj: Py<PyAny>, owned: bool) -> PyFile {
        PyFile { obj, owned }
    }
}

impl Read for PyFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Python::attach(|py| {
            let got = self
                .obj
                .call_method1(py, "read", (buf.len(),))
                .map_err(io_err)?;
            let got = got.bind(py);
            let bytes = match got.cast::<PyBytes>() {
                Ok(b) => b.as_bytes().to_vec(),
                // bytearray, memoryview...
                Err(_) => got.extract::<Vec<u8>>().map_err(io_err)?,
            };
            if bytes.len() > buf.len() {
                return Err(io::Error::other(format!(
                    "read({}) returned {} bytes",
                    buf.len(),
                    bytes.len()
                )));
            }
            buf[..bytes.len()].copy_from_slice(&bytes);
            Ok(bytes.len())
        })
    }
}

impl Seek for PyFile {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let (offset, whence) = match to {
            SeekFrom::Start(n) => (n as i64, 0),
            SeekFrom::Current(n) => (n, 1),
            SeekFrom::End(n) => (n, 2),
        };
        Python::attach(|py| {
            self.obj
                .call_method1(py, "seek", (offset, whence))
                .map_err(io_err)?;
            self.obj
                .call_method0(py, "tell")
                .and_then(|p| p.extract::<u64>(py))
                .map_err(io_err)
        })
    }
}

impl Drop for PyFile {
    fn drop(&mut self) {
        if self.owned {
            Python::attach(|py| {
                let _ = self.obj.call_method0(py, "close");
            });
        }
    }
}

/// What a caller gives as a capture: a path, or a file object.
pub enum Source {
    /// A file on this machine.
    Path(PathBuf),
    /// A Python file object, and a name for errors.
    File(PyFile, String),
}

impl Source {
    /// `source` as a path (`str` or `os.PathLike`) or a file object (with
    /// `read`); `name` names a file object in errors (its `name`
    /// attribute, or `<file>`); `owned`: close the object when done.
    pub fn extract(
        source: &Bound<'_, PyAny>,
        name: Option<String>,
        owned: bool,
    ) -> PyResult<Source> {
        if source.hasattr("read")? {
            let name = match name {
                Some(n) => n,
                None => source
                    .getattr("name")
                    .ok()
                    .and_then(|n| n.extract::<String>().ok())
                    .unwrap_or_else(|| "<file>".into()),
            };
            return Ok(Source::File(
                PyFile::new(source.clone().unbind(), owned),
                name,
            ));
        }
        source.extract::<PathBuf>().map(Source::Path).map_err(|_| {
            PyTypeError::new_err(format!(
                "a capture is a path, a URL or a file object, not {}",
                source
                    .get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })
    }

    /// The name errors give it.
    pub fn name(&self) -> String {
        match self {
            Source::Path(p) => p.display().to_string(),
            Source::File(_, n) => n.clone(),
        }
    }
}
