//! The module's exceptions: a bad filter is a `FilterError` (a
//! `ValueError`) with its message and position as attributes and a caret
//! line in its text; a bad capture is a `CaptureError` (a `ValueError`)
//! naming the file and byte offset; a file that cannot be opened is the
//! `OSError` subclass Python users expect (`FileNotFoundError`, ...).

use pyo3::exceptions::{
    PyFileNotFoundError, PyIsADirectoryError, PyKeyboardInterrupt, PyOSError, PyPermissionError,
    PyValueError,
};
use pyo3::prelude::*;
use sluice_capture::{CaptureError as RustCaptureError, DecompressError, ErrorKind};
use sluice_split::SplitError;

pyo3::create_exception!(
    sluice,
    FilterError,
    PyValueError,
    "A filter (or flow specification) that does not compile.\n\n\
     Attributes: ``message`` (what is wrong), ``text`` (the filter as\n\
     given), ``line`` and ``column`` (1-based, or None where the language\n\
     reports no position), ``offset`` (0-based byte offset in a pcap\n\
     expression, or None), ``name`` (the filter's name in a set, or None).\n\
     ``str(e)`` is the message, then the text with a caret under the column."
);

pyo3::create_exception!(
    sluice,
    CaptureError,
    PyValueError,
    "A capture file that is not pcap or pcapng, or is truncated or corrupt.\n\n\
     Attributes: ``message``, ``path`` and ``offset`` (the byte offset of\n\
     the problem). Every packet before it was delivered."
);

/// The text with a caret under a 1-based column of its `line`.
fn caret(text: &str, line: usize, column: usize) -> String {
    text.lines()
        .nth(line.saturating_sub(1))
        .map_or_else(String::new, |l| sluice_filter::caret_under(l, column))
}

/// A `FilterError` from a message and a position in `text`.
pub fn filter_error_at(
    py: Python<'_>,
    message: String,
    text: &str,
    line: Option<usize>,
    column: Option<usize>,
    offset: Option<usize>,
    name: Option<&str>,
) -> PyErr {
    let shown = match (line, column) {
        (Some(l), Some(c)) if l > 1 => {
            format!("line {l}, column {c}: {message}{}", caret(text, l, c))
        }
        (_, Some(c)) => format!("column {c}: {message}{}", caret(text, 1, c)),
        _ => message.clone(),
    };
    let err = FilterError::new_err(shown);
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("message", message)?;
        value.setattr("text", text)?;
        value.setattr("line", line)?;
        value.setattr("column", column)?;
        value.setattr("offset", offset)?;
        value.setattr("name", name)?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(e) => e,
    }
}

/// A `FilterError` for a filter that does not compile (its cause is
/// `sluice_filter::Error`, position included).
pub fn filter_error(
    py: Python<'_>,
    e: &sluice_filter::Error,
    text: &str,
    name: Option<&str>,
) -> PyErr {
    // A filter read from a file: the caret would point into the file.
    let (line, column) = match e.file() {
        Some(_) => (None, None),
        None => (e.line(), e.column()),
    };
    // The position is an attribute; the message says what is wrong.
    let full = e.to_string();
    let what = match column {
        Some(c) => {
            let lead = format!("column {c}: ");
            match full.find(&lead) {
                Some(at) => full[at + lead.len()..].to_string(),
                None => full.clone(),
            }
        }
        None => full.clone(),
    };
    let message = match name {
        Some(n) => format!("{n}: {what}"),
        None => what,
    };
    filter_error_at(py, message, text, line, column, e.offset(), name)
}

/// An I/O error as the `OSError` subclass Python has for it.
pub fn io_error(e: &std::io::Error, path: &str) -> PyErr {
    os_error(e, format!("{path}: {}", io_message(e)))
}

/// An output that could not be written, in the command's words.
pub fn output_error(e: &sluice_capture::sink::OutputError) -> PyErr {
    os_error(e.io(), e.to_string())
}

/// `msg` as the `OSError` subclass Python has for `e`.
fn os_error(e: &std::io::Error, msg: String) -> PyErr {
    match e.kind() {
        std::io::ErrorKind::NotFound => PyFileNotFoundError::new_err(msg),
        std::io::ErrorKind::PermissionDenied => PyPermissionError::new_err(msg),
        _ if e.raw_os_error() == Some(21) => PyIsADirectoryError::new_err(msg),
        _ if e.to_string() == "Is a directory" => PyIsADirectoryError::new_err(msg),
        _ => PyOSError::new_err(msg),
    }
}

use sluice_capture::sink::io_message;

/// A capture error: I/O as `OSError`, anything else as `CaptureError`.
pub fn capture_error(py: Python<'_>, e: RustCaptureError) -> PyErr {
    if let ErrorKind::Io(io) = e.kind() {
        return io_error(io, e.file());
    }
    bad_capture(
        py,
        e.to_string(),
        e.kind().to_string(),
        e.file(),
        e.offset(),
    )
}

/// A `CaptureError` with its attributes.
fn bad_capture(py: Python<'_>, shown: String, message: String, path: &str, offset: u64) -> PyErr {
    let err = CaptureError::new_err(shown);
    let value = err.value(py);
    let set = || -> PyResult<()> {
        value.setattr("message", message)?;
        value.setattr("path", path)?;
        value.setattr("offset", offset)?;
        Ok(())
    };
    match set() {
        Ok(()) => err,
        Err(x) => x,
    }
}

/// A compressed input that cannot be read: its first bytes unreadable
/// (`OSError`), or a compression sluice does not read (`CaptureError`,
/// saying what to do).
pub fn decompress_error(py: Python<'_>, e: DecompressError, name: &str) -> PyErr {
    match e {
        DecompressError::Read(io) => io_error(&io, name),
        DecompressError::Zstd(io) => {
            let m = format!("zstd: {}", io_message(&io));
            bad_capture(py, format!("{name}: {m}"), m, name, 0)
        }
        DecompressError::Unsupported(c) => {
            let m = format!(
                "compressed with {0}: decompress it first ({0} -dc {name} > capture.pcap)",
                c.name()
            );
            bad_capture(py, format!("{name}: {m}"), m, name, 0)
        }
    }
}

/// A split's error as the matching Python exception (a set's first bad
/// filter, with the others named in the message).
pub fn split_error(py: Python<'_>, e: SplitError) -> PyErr {
    match e {
        SplitError::Filters(bad) => {
            let Some(first) = bad.first() else {
                return PyValueError::new_err("no filters");
            };
            let mut err = filter_error(
                py,
                &first.error,
                &first.filter.expression,
                Some(&first.filter.name),
            );
            if bad.len() > 1 {
                let others: Vec<&str> = bad[1..].iter().map(|b| b.filter.name.as_str()).collect();
                let note = format!(
                    "{} (and {} more bad filters: {})",
                    err.value(py),
                    others.len(),
                    others.join(", ")
                );
                let again = filter_error(
                    py,
                    &first.error,
                    &first.filter.expression,
                    Some(&first.filter.name),
                );
                let _ = again.value(py).setattr("args", (note,));
                err = again;
            }
            err
        }
        SplitError::NoFilters => PyValueError::new_err("no filters"),
        SplitError::LinkType(n) => {
            PyValueError::new_err(format!("link type {n} is not supported yet"))
        }
        SplitError::Capture(c) => capture_error(py, c),
        SplitError::Output(e) => output_error(&e),
        SplitError::Programs(bad) => {
            let Some((first, why)) = bad.first() else {
                return PyValueError::new_err("no filters");
            };
            let mut message = format!("{}: {why}", first.name);
            if bad.len() > 1 {
                let others: Vec<&str> = bad[1..].iter().map(|b| b.0.name.as_str()).collect();
                message += &format!(
                    " (and {} more bad filters: {})",
                    others.len(),
                    others.join(", ")
                );
            }
            filter_error_at(
                py,
                message,
                &first.expression,
                None,
                None,
                None,
                Some(&first.name),
            )
        }
        SplitError::Settings(m) => PyValueError::new_err(m),
        SplitError::Compressed(name, e) => decompress_error(py, e, &name),
        SplitError::Stopped => PyKeyboardInterrupt::new_err("split interrupted"),
    }
}
