//! Waiting for packets from Python: native waits run with the GIL
//! released, in slices short enough that Ctrl-C (and every other signal
//! handler Python runs) is seen within [`SLICE`].
//!
//! The rule: no call of the module blocks with the GIL held, and none
//! blocks longer than a slice without looking at Python's signals.

use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use std::time::{Duration, Instant};

/// The longest a native wait lasts before Python's signals are checked.
pub const SLICE: Duration = Duration::from_millis(100);

/// What a wait came to.
pub enum Waited<T> {
    /// `step` gave a value.
    Got(T),
    /// The timeout passed first.
    TimedOut,
    /// Ctrl-C (KeyboardInterrupt) came first.
    Interrupted,
}

/// Call `step` (GIL released) with the time it may wait, at most
/// [`SLICE`], until it gives a value or `timeout` passes (`None`: no
/// limit), checking Python's signals between calls. A KeyboardInterrupt
/// is returned as [`Waited::Interrupted`]; any other exception a signal
/// handler raises is an error.
pub fn until<T: Send>(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut step: impl FnMut(Duration) -> PyResult<Option<T>> + Send,
) -> PyResult<Waited<T>> {
    let start = Instant::now();
    loop {
        let left = match timeout {
            Some(t) => t.saturating_sub(start.elapsed()),
            None => SLICE,
        };
        let slice = left.min(SLICE);
        if let Some(v) = py.detach(|| step(slice))? {
            return Ok(Waited::Got(v));
        }
        if let Err(e) = py.check_signals() {
            if e.is_instance_of::<PyKeyboardInterrupt>(py) {
                return Ok(Waited::Interrupted);
            }
            return Err(e);
        }
        if timeout.is_some_and(|t| start.elapsed() >= t) {
            return Ok(Waited::TimedOut);
        }
    }
}

/// A timeout in seconds from Python (`None`: wait as long as it takes),
/// refused when negative or not a number.
pub fn seconds(timeout: Option<f64>) -> PyResult<Option<Duration>> {
    match timeout {
        None => Ok(None),
        Some(t) => Duration::try_from_secs_f64(t).map(Some).map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "timeout {t}: a number of seconds, 0 or more"
            ))
        }),
    }
}
