//! `sluice.Writer`: capture files written from Python through the
//! runtime's sinks (`sluice_capture::sink::Rotation` over `OutputFile`),
//! with tcpdump's rotation (`-C`, `-G`, `-W`) and the sinks' safety: no
//! file clobbered, none left half written under its name.
//!
//! The rule: the module creates capture files only through
//! `sluice_capture::sink` (this file, live captures' `write=`, and
//! `split`'s per-filter files through `sluice_split`).

use crate::batch::Batch;
use crate::errors::output_error;
use crate::filter::linktype;
use numpy::PyArrayMethods;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytesMethods;
use sluice_capture::sink::{Placement, Rotation, Rule};
use sluice_capture::{CaptureFormat, InterfaceInfo, Packet};
use std::sync::Mutex;

/// tcpdump's rotation rule from the keyword arguments: `file_size` in
/// bytes (`-C`, in millions of bytes there), `rotate_seconds` (`-G`),
/// `max_files` (`-W`).
pub fn rule(
    file_size: Option<u64>,
    rotate_seconds: Option<u32>,
    max_files: Option<u32>,
) -> PyResult<Rule> {
    if file_size == Some(0) || rotate_seconds == Some(0) || max_files == Some(0) {
        return Err(PyValueError::new_err(
            "file_size, rotate_seconds and max_files must be positive",
        ));
    }
    if max_files.is_some() && file_size.is_none() && rotate_seconds.is_none() {
        return Err(PyValueError::new_err(
            "max_files needs file_size (a ring of files) or rotate_seconds (stop after N files)",
        ));
    }
    Ok(Rule {
        size: file_size,
        seconds: rotate_seconds,
        files: max_files,
    })
}

/// A capture file being written (pcap, or pcapng with ``pcapng=True``).
///
/// ``Writer(path, linktype="EN10MB", snaplen=262144, nanoseconds=False,
/// pcapng=False, file_size=None, rotate_seconds=None, max_files=None,
/// in_place=False)``. With ``file_size`` (bytes) a new file is started
/// when the current one is larger (``path``, ``path1``, ...; with
/// ``max_files`` a ring ``path0``...), with ``rotate_seconds`` every so
/// many seconds (``path`` is then a strftime pattern), as tcpdump's
/// ``-C``, ``-G`` and ``-W``. Each file is written beside its name and
/// takes it when finished, unless ``in_place`` (tcpdump's way, for files
/// read while they grow). ``write`` takes one frame, ``write_batch`` a
/// ``sluice.Batch``; ``close()`` (or the end of a ``with`` block) finishes.
///
/// >>> import os, tempfile
/// >>> path = os.path.join(tempfile.mkdtemp(), "out.pcap")
/// >>> with sluice.Writer(path) as w:
/// ...     w.write(bytes(60), ts=1.5)
/// ...     w.write_batch(sluice.open("examples/sample.pcap").read_batch(3))
/// >>> sum(1 for _ in sluice.open(path))
/// 4
#[pyclass(module = "sluice", frozen)]
pub struct Writer {
    out: Mutex<Option<Rotation>>,
    path: String,
    linktype: u16,
    packets: Mutex<u64>,
}

impl Writer {
    fn with<T>(&self, f: impl FnOnce(&mut Rotation, &mut u64) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = self.packets.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(r) => f(r, &mut n),
            None => Err(PyValueError::new_err("I/O operation on closed writer")),
        }
    }
}

/// Write one packet; `false` when a rotation with `max_files` has made
/// its last file (nothing more is written).
fn put(r: &mut Rotation, n: &mut u64, p: &Packet<'_>) -> PyResult<bool> {
    let more = r.write(p).map_err(|e| output_error(&e))?;
    if more {
        *n += 1;
    }
    Ok(more)
}

#[pymethods]
impl Writer {
    #[new]
    #[pyo3(signature = (path, linktype=None, snaplen=262144, nanoseconds=false, pcapng=false, file_size=None, rotate_seconds=None, max_files=None, in_place=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        path: std::path::PathBuf,
        linktype: Option<&Bound<'_, PyAny>>,
        snaplen: u32,
        nanoseconds: bool,
        pcapng: bool,
        file_size: Option<u64>,
        rotate_seconds: Option<u32>,
        max_files: Option<u32>,
        in_place: bool,
    ) -> PyResult<Writer> {
        let lt = match linktype {
            Some(v) if !v.is_none() => self::linktype(v)?.number() as u16,
            _ => 1,
        };
        let big_endian = cfg!(target_endian = "big");
        let format = match pcapng {
            false => CaptureFormat::Pcap {
                nanos: nanoseconds,
                big_endian,
                linktype: lt,
                snaplen,
                fcs_len: None,
            },
            true => CaptureFormat::PcapNg {
                big_endian,
                first_interface: Some(InterfaceInfo {
                    linktype: lt,
                    snaplen,
                }),
            },
        };
        let rule = rule(file_size, rotate_seconds, max_files)?;
        let name = path.display().to_string();
        let placement = match in_place {
            true => Placement::InPlace,
            false => Placement::Replace,
        };
        let out =
            Rotation::create(&name, &format, &rule, placement).map_err(|e| output_error(&e))?;
        Ok(Writer {
            out: Mutex::new(Some(out)),
            path: name,
            linktype: lt,
            packets: Mutex::new(0),
        })
    }

    /// Write one frame: ``ts`` in seconds since 1970 (a float, as the
    /// readers give it; now if not given), ``wirelen`` its length on the
    /// wire (the frame's length by default). ``False`` when a rotation
    /// with ``max_files`` has made its last file and nothing more is
    /// written.
    #[pyo3(signature = (frame, ts=None, wirelen=None))]
    fn write(&self, frame: &[u8], ts: Option<f64>, wirelen: Option<u32>) -> PyResult<bool> {
        let ts = ts.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        });
        if !ts.is_finite() {
            return Err(PyValueError::new_err(format!("time stamp {ts}")));
        }
        let sec = ts.floor();
        let nsec = (((ts - sec) * 1e9).round() as u32).min(999_999_999);
        let len = u32::try_from(frame.len())
            .map_err(|_| PyValueError::new_err("a frame of 4 GiB or more"))?;
        let p = Packet {
            wirelen: wirelen.unwrap_or(len).max(len),
            ..Packet::new(sec as i64, nsec, self.linktype, frame)
        };
        self.with(|r, n| put(r, n, &p))
    }

    /// Write every frame of a ``sluice.Batch`` with its time stamp, wire
    /// length and link type; returns how many were written.
    fn write_batch(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<usize> {
        let b = batch
            .cast::<Batch>()
            .map_err(|_| PyTypeError::new_err("write_batch takes a sluice.Batch"))?
            .get();
        let data = b.data.bind(py).as_bytes();
        let offsets = b.offsets.bind(py).to_vec()?;
        let wirelens = b.wirelens.bind(py).to_vec()?;
        let ts = b.timestamps_ns.bind(py).to_vec()?;
        let lts = b.linktypes.bind(py).to_vec()?;
        let n = wirelens.len();
        if offsets.len() != n + 1 || ts.len() != n || lts.len() != n {
            return Err(PyValueError::new_err(
                "a batch whose arrays disagree in length",
            ));
        }
        self.with(|r, count| {
            py.detach(|| {
                let mut done = 0;
                for i in 0..n {
                    let (a, z) = (offsets[i], offsets[i + 1]);
                    if a < 0 || z < a || z as usize > data.len() {
                        return Err(PyValueError::new_err(format!("offsets[{i}] out of range")));
                    }
                    let frame = &data[a as usize..z as usize];
                    let p = Packet {
                        wirelen: u32::try_from(wirelens[i])
                            .unwrap_or(u32::MAX)
                            .max(frame.len() as u32),
                        ..Packet::new(
                            ts[i].div_euclid(1_000_000_000),
                            ts[i].rem_euclid(1_000_000_000) as u32,
                            lts[i],
                            frame,
                        )
                    };
                    if !put(r, count, &p)? {
                        break;
                    }
                    done += 1;
                }
                Ok(done)
            })
        })
    }

    /// Push what is buffered to the current file.
    fn flush(&self) -> PyResult<()> {
        self.with(|r, _| r.flush().map_err(|e| output_error(&e)))
    }

    /// Finish the current file (it takes its name now); writing then
    /// raises ``ValueError``.
    fn close(&self) -> PyResult<()> {
        let out = self.out.lock().unwrap_or_else(|e| e.into_inner()).take();
        match out {
            Some(r) => r.finish().map_err(|e| output_error(&e)),
            None => Ok(()),
        }
    }

    /// Packets written.
    #[getter]
    fn packets(&self) -> u64 {
        *self.packets.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The path (or pattern) given.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __exit__(
        &self,
        _ty: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close()?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("sluice.Writer({:?})", self.path)
    }
}

impl Drop for Writer {
    /// A writer dropped unclosed finishes its file, as a Python file
    /// object is flushed when it is collected.
    fn drop(&mut self) {
        if let Some(r) = self.out.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = r.finish();
        }
    }
}
