//! Many frames handed over from Python at once: a list of `bytes`, or one
//! contiguous buffer with `n + 1` offsets (Arrow's binary layout: frame
//! `i` is `data[offsets[i]:offsets[i+1]]`), with optional wire lengths;
//! or a [`Batch`](crate::batch::Batch) read from a capture.
//!
//! The rule: what the native call indexes with is *copied* before it is
//! checked, or comes from a `Batch`'s own Rust-held positions (made
//! right when the batch was built, and out of Python's reach). The call runs with the GIL released, so another Python thread
//! may rewrite a numpy array meanwhile: the offsets and wire lengths are
//! copied into Rust memory first and only the copies are checked and used,
//! so a rewrite can change nothing the bounds depend on. The frame buffer
//! itself is not copied: its length cannot change while it is held (numpy
//! and `bytearray` refuse to resize a buffer that is exported), and new
//! bytes written into it meanwhile give new verdicts, never a bad index.

use crate::batch::Batch;
use numpy::{PyArrayMethods, PyReadonlyArray1};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyBytesMethods};

/// Frames from Python, borrowed for the length of one call (the objects
/// they come from are held, so the GIL can be released meanwhile).
pub struct Frames<'py> {
    kind: Kind<'py>,
    /// Copied from the caller's array, then checked.
    wirelens: Option<Vec<i64>>,
}

enum Kind<'py> {
    /// A `Batch` as it was built: its bytes and its Rust-held positions.
    Trusted {
        data: Bound<'py, PyBytes>,
        spans: std::sync::Arc<crate::batch::Spans>,
    },
    /// One `bytes` object per frame.
    List(Vec<Bound<'py, PyBytes>>),
    /// One buffer (`bytes`, or any buffer as a uint8 array) and offsets
    /// (copied from the caller's array, then checked).
    Packed {
        data: Buffer<'py>,
        offsets: Vec<i64>,
    },
}

/// The buffer of packed frames.
enum Buffer<'py> {
    Bytes(Bound<'py, PyBytes>),
    Array(PyReadonlyArray1<'py, u8>),
}

impl Buffer<'_> {
    fn as_slice(&self) -> PyResult<&[u8]> {
        Ok(match self {
            Buffer::Bytes(b) => b.as_bytes(),
            Buffer::Array(a) => a.as_slice()?,
        })
    }
}

/// `numpy.ascontiguousarray(obj, dtype)`: zero-copy for a matching array
/// or any object with the buffer protocol (`bytes`, `bytearray`,
/// `memoryview`, `mmap`).
fn as_array<'py>(obj: &Bound<'py, PyAny>, dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    let np = obj.py().import("numpy")?;
    if dtype == "uint8" && !obj.hasattr("dtype")? {
        return np.call_method1("frombuffer", (obj, dtype));
    }
    np.call_method1("ascontiguousarray", (obj, dtype))
}

fn readonly<'py, T: numpy::Element>(
    a: Bound<'py, PyAny>,
    what: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    let arr = a
        .cast_into::<numpy::PyArray1<T>>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be one-dimensional")))?;
    Ok(arr.readonly())
}

/// A one-dimensional contiguous array of `T` as it is (no numpy call), or
/// converted by `numpy.ascontiguousarray(obj, dtype)`.
fn array<'py, T: numpy::Element>(
    obj: &Bound<'py, PyAny>,
    dtype: &str,
    what: &str,
) -> PyResult<PyReadonlyArray1<'py, T>> {
    if let Ok(a) = obj.cast::<numpy::PyArray1<T>>() {
        let r = a.readonly();
        if r.as_slice().is_ok() {
            return Ok(r);
        }
    }
    readonly::<T>(as_array(obj, dtype)?, what)
}

impl<'py> Frames<'py> {
    /// Read `frames` (a list of bytes-like objects, a buffer with
    /// `offsets`, or a `Batch`) and optional `wirelens`.
    pub fn extract(
        frames: &Bound<'py, PyAny>,
        offsets: Option<&Bound<'py, PyAny>>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Frames<'py>> {
        if let Ok(batch) = frames.cast::<Batch>() {
            if offsets.is_some() {
                return Err(PyTypeError::new_err("a Batch carries its own offsets"));
            }
            let b = batch.get();
            if wirelens.is_none() {
                return Ok(Frames {
                    kind: Kind::Trusted {
                        data: b.data.bind(frames.py()).clone(),
                        spans: b.spans.clone(),
                    },
                    wirelens: None,
                });
            }
            let wl = match wirelens {
                Some(w) => Some(w.clone()),
                None => Some(b.wirelens.bind(frames.py()).clone().into_any()),
            };
            return Frames::extract(
                b.data.bind(frames.py()),
                Some(b.offsets.bind(frames.py())),
                wl.as_ref(),
            );
        }
        // Copies: another thread may rewrite the arrays during the call.
        let wirelens = match wirelens {
            Some(w) if !w.is_none() => {
                Some(array::<i64>(w, "int64", "wirelens")?.as_slice()?.to_vec())
            }
            _ => None,
        };
        let kind = match offsets {
            Some(o) if !o.is_none() => {
                let data = match frames.cast::<PyBytes>() {
                    Ok(b) => Buffer::Bytes(b.clone()),
                    Err(_) => Buffer::Array(readonly::<u8>(
                        as_array(frames, "uint8")?,
                        "the frame buffer",
                    )?),
                };
                let offsets = array::<i64>(o, "int64", "offsets")?.as_slice()?.to_vec();
                check_offsets(&offsets, data.as_slice()?.len())?;
                Kind::Packed { data, offsets }
            }
            _ => {
                if frames.is_instance_of::<PyBytes>() || frames.hasattr("dtype")? {
                    return Err(PyTypeError::new_err(
                        "frames: give a list of bytes, or one buffer with offsets=",
                    ));
                }
                let mut list = Vec::new();
                for item in frames.try_iter()? {
                    let item = item?;
                    list.push(match item.cast_into::<PyBytes>() {
                        Ok(b) => b,
                        Err(e) => {
                            // Any object with the buffer protocol (a
                            // number is not a frame, so not bytes(5)).
                            let obj = e.into_inner();
                            let py = obj.py();
                            let view = py.import("builtins")?.getattr("memoryview")?;
                            let copy = view
                                .call1((&obj,))
                                .and_then(|v| py.get_type::<PyBytes>().call1((v,)))
                                .map_err(|_| {
                                    PyTypeError::new_err(format!(
                                        "frames must be bytes-like, not {}",
                                        obj.get_type()
                                            .name()
                                            .map(|n| n.to_string())
                                            .unwrap_or_default()
                                    ))
                                })?;
                            copy.cast_into::<PyBytes>()?
                        }
                    });
                }
                Kind::List(list)
            }
        };
        let f = Frames { kind, wirelens };
        if let Some(w) = &f.wirelens {
            if w.len() != f.len() {
                return Err(PyValueError::new_err(format!(
                    "{} wire lengths for {} frames",
                    w.len(),
                    f.len()
                )));
            }
            if let Some(bad) = w.iter().find(|&&x| !(0..=u32::MAX as i64).contains(&x)) {
                return Err(PyValueError::new_err(format!(
                    "wire length {bad} out of range"
                )));
            }
        }
        Ok(f)
    }

    /// The number of frames.
    pub fn len(&self) -> usize {
        match &self.kind {
            Kind::List(l) => l.len(),
            Kind::Packed { offsets, .. } => offsets.len().saturating_sub(1),
            Kind::Trusted { spans, .. } => spans.wirelens.len(),
        }
    }

    /// The frames as slices, valid while `self` lives: what the GIL-free
    /// part of a call works on.
    pub fn view(&self) -> PyResult<View<'_>> {
        let wirelens = self.wirelens.as_deref();
        Ok(match &self.kind {
            Kind::Trusted { data, spans } => View {
                slices: Slices::Trusted {
                    data: data.as_bytes(),
                    offsets: &spans.offsets,
                    wirelens: &spans.wirelens,
                },
                wirelens: None,
            },
            Kind::List(l) => View {
                slices: Slices::List(l.iter().map(|b| b.as_bytes()).collect()),
                wirelens,
            },
            Kind::Packed { data, offsets } => View {
                slices: Slices::Packed {
                    data: data.as_slice()?,
                    offsets,
                },
                wirelens,
            },
        })
    }
}

/// Offsets must start at 0 or more, never decrease and end inside the
/// buffer.
fn check_offsets(offsets: &[i64], len: usize) -> PyResult<()> {
    if offsets.is_empty() {
        return Err(PyValueError::new_err(
            "offsets: need n + 1 offsets for n frames (at least one)",
        ));
    }
    if offsets[0] < 0 {
        return Err(PyValueError::new_err(format!(
            "offsets[0] is negative ({})",
            offsets[0]
        )));
    }
    if let Some(i) = offsets.windows(2).position(|w| w[1] < w[0]) {
        return Err(PyValueError::new_err(format!(
            "offsets decrease at {} ({} after {})",
            i + 1,
            offsets[i + 1],
            offsets[i]
        )));
    }
    let last = offsets[offsets.len() - 1];
    if last as u64 > len as u64 {
        return Err(PyValueError::new_err(format!(
            "offsets end at {last}, past the buffer's {len} bytes"
        )));
    }
    Ok(())
}

/// Frames as slices, with no Python object in sight (so it can cross
/// into code that runs without the GIL).
pub struct View<'a> {
    slices: Slices<'a>,
    wirelens: Option<&'a [i64]>,
}

enum Slices<'a> {
    List(Vec<&'a [u8]>),
    Packed {
        data: &'a [u8],
        offsets: &'a [i64],
    },
    Trusted {
        data: &'a [u8],
        offsets: &'a [i64],
        wirelens: &'a [u32],
    },
}

impl<'a> View<'a> {
    /// The number of frames.
    pub fn len(&self) -> usize {
        match &self.slices {
            Slices::List(l) => l.len(),
            Slices::Packed { offsets, .. } => offsets.len().saturating_sub(1),
            Slices::Trusted { wirelens, .. } => wirelens.len(),
        }
    }

    /// Frame `i` and its wire length.
    #[inline]
    pub fn get(&self, i: usize) -> (&'a [u8], u32) {
        let data = match &self.slices {
            Slices::List(l) => l[i],
            // Checked by `check_offsets` when the offsets came in.
            Slices::Packed { data, offsets } => &data[offsets[i] as usize..offsets[i + 1] as usize],
            Slices::Trusted {
                data,
                offsets,
                wirelens,
            } => {
                return (
                    &data[offsets[i] as usize..offsets[i + 1] as usize],
                    wirelens[i],
                )
            }
        };
        let wirelen = match self.wirelens {
            Some(w) => w[i] as u32,
            None => u32::try_from(data.len()).unwrap_or(u32::MAX),
        };
        (data, wirelen)
    }

    /// Frames `start..end` into `out` (cleared first), for the batch
    /// engines.
    pub fn chunk(&self, start: usize, end: usize, out: &mut Vec<(&'a [u8], u32)>) {
        out.clear();
        match (&self.slices, self.wirelens) {
            (
                Slices::Trusted {
                    data,
                    offsets,
                    wirelens,
                },
                _,
            ) => {
                let spans = offsets[start..=end].windows(2);
                out.extend(
                    spans
                        .zip(&wirelens[start..end])
                        .map(|(w, &wl)| (&data[w[0] as usize..w[1] as usize], wl)),
                );
            }
            // The common case, one pass over the offsets: each frame's
            // start and end come from one window (checked on the way in).
            (Slices::Packed { data, offsets }, None) => {
                out.extend(offsets[start..=end].windows(2).map(|w| {
                    let frame = &data[w[0] as usize..w[1] as usize];
                    (frame, frame.len() as u32)
                }));
            }
            (Slices::Packed { data, offsets }, Some(wirelens)) => {
                let spans = offsets[start..=end].windows(2);
                out.extend(spans.zip(&wirelens[start..end]).map(|(w, &wl)| {
                    // Wire lengths were checked to fit a u32.
                    (&data[w[0] as usize..w[1] as usize], wl as u32)
                }));
            }
            _ => out.extend((start..end).map(|i| self.get(i))),
        }
    }
}
