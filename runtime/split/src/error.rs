//! Why a split could not run or stopped, with the cause kept.

use crate::FilterLine;
use sluice_capture::CaptureError;
use sluice_filter::LinkType;

/// A filter of the set that does not compile for a link type.
#[derive(Debug)]
pub struct BadFilter {
    /// The filter (its name, line and text).
    pub filter: FilterLine,
    /// The link type it was compiled for.
    pub linktype: LinkType,
    /// Why (the column is [`sluice_filter::Error::column`]).
    pub error: sluice_filter::Error,
}

impl std::fmt::Display for BadFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} (link type {})",
            self.filter.name,
            self.error,
            self.linktype.name()
        )
    }
}

/// Why a split could not run, or stopped.
///
/// ```
/// let e = sluice_split::SplitError::LinkType(9999);
/// assert_eq!(e.to_string(), "link type 9999 is not supported yet");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum SplitError {
    /// Filters that do not compile for a link type met in the capture
    /// (each one of them, in set order).
    #[error("{}", .0.iter().map(|b| b.to_string()).collect::<Vec<_>>().join("; "))]
    Filters(Vec<BadFilter>),
    /// Filters that are not MPF programs (each one of them, with why).
    #[error("{}", .0.iter().map(|(f, why)| format!("{}: {why}", f.name)).collect::<Vec<_>>().join("; "))]
    Programs(Vec<(FilterLine, String)>),
    /// A compressed capture that cannot be read (the input's name, and
    /// why: a compression sluice does not read, or its first bytes).
    #[error("{0}: {1}")]
    Compressed(String, #[source] sluice_capture::DecompressError),
    /// Settings that cannot work together, or an input they do not fit.
    #[error("{0}")]
    Settings(String),
    /// The set has no filter.
    #[error("no filters")]
    NoFilters,
    /// A link type that sluice cannot compile filters for.
    #[error("link type {0} is not supported yet")]
    LinkType(u16),
    /// The capture could not be opened or read (a truncated or corrupt
    /// record: every packet before it was processed).
    #[error(transparent)]
    Capture(#[from] CaptureError),
    /// An output file could not be written (the message names it, and
    /// how many packets it holds).
    #[error(transparent)]
    Output(#[from] sluice_capture::sink::OutputError),
    /// The caller's progress callback asked to stop (an interrupt).
    #[error("stopped")]
    Stopped,
}
