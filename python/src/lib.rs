//! The `sluice` Python module's native part (`sluice._sluice`): a thin
//! layer over the Rust crates, one file per Python class family.
//!
//! | Python | Rust | file |
//! | --- | --- | --- |
//! | `Filter` | `sluice_filter::Program` | `filter.rs` |
//! | `Classifier` | `sluice_native::AutoClassifier` | `classifier.rs` |
//! | `open`, `Reader` | `sluice_capture::CaptureReader` | `capture.rs` |
//! | `Batch` | frames in one buffer with offsets | `batch.rs` |
//! | `Writer` | `sluice_capture::sink::Rotation` | `writer.rs` |
//! | `LiveCapture` | `sluice_live::session::Session` | `live.rs` |
//! | `Daemon`, `DaemonFlow`, `wait_any` | `sluice_daemon::Client` | `daemon.rs` |
//! | `split`, `FilterSet`, `split_range`, `verify_ranges` | `sluice_split` | `split.rs` |
//! | `Flow`, `FlowGroup` | `sluice_flow` | `flow.rs` |
//! | `FilterError`, `CaptureError` | the crates' errors | `errors.rs` |
//!
//! Frames come in as a list of `bytes` or one buffer with offsets
//! (`frames.rs`); batch calls release the GIL while native code runs,
//! and waits for packets release it in slices that let Ctrl-C through
//! (`wait.rs`).

#![forbid(unsafe_code)]

mod batch;
mod capture;
mod classifier;
mod daemon;
mod errors;
mod filter;
mod flow;
mod frames;
mod live;
mod pyfile;
mod split;
mod wait;
mod writer;

use pyo3::prelude::*;

/// Rust's allocations in the module go to mimalloc, as in the command:
/// compiling a large filter set makes millions of small allocations, and
/// Dask's workers tune glibc's malloc to give memory back eagerly
/// (`MALLOC_TRIM_THRESHOLD_`), which made compiling and splitting there
/// several times slower than in a plain process.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// sluice's native module; import ``sluice``, which re-exports it.
#[pymodule]
fn _sluice(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("FilterError", py.get_type::<errors::FilterError>())?;
    m.add("CaptureError", py.get_type::<errors::CaptureError>())?;
    m.add_class::<filter::Filter>()?;
    m.add_class::<classifier::Classifier>()?;
    m.add_class::<capture::Reader>()?;
    m.add_class::<batch::Batch>()?;
    m.add_class::<writer::Writer>()?;
    m.add_class::<live::LiveCapture>()?;
    m.add_class::<daemon::Daemon>()?;
    m.add_class::<daemon::DaemonFlow>()?;
    m.add_class::<daemon::FlowBatches>()?;
    m.add_function(wrap_pyfunction!(daemon::wait_any, m)?)?;
    m.add_function(wrap_pyfunction!(capture::open, m)?)?;
    m.add_class::<split::FilterSet>()?;
    m.add_function(wrap_pyfunction!(split::split, m)?)?;
    m.add_function(wrap_pyfunction!(split::split_range, m)?)?;
    m.add_function(wrap_pyfunction!(split::verify_ranges, m)?)?;
    m.add_class::<flow::Flow>()?;
    m.add_class::<flow::FlowGroup>()?;
    Ok(())
}
