//! Why a filter could not be built.

use std::fmt;

/// Why a filter could not be built.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let e = Program::builder(LinkType::EN10MB).expression("port").unwrap_err();
/// assert!(e.to_string().contains("column"));
/// ```
#[derive(Debug)]
pub enum Error {
    /// The expression is not valid.
    Expression(sluice_pcap::CompileError),
    /// The expression is valid but accepts no packet at all (libpcap refuses these too).
    RejectsAll,
    /// The program could not be lowered to classic BPF.
    Lower(String),
    /// A BPF program text could not be parsed.
    BpfText(sluice_bpf::ParseError),
    /// A BPF program failed verification.
    BpfVerify(sluice_bpf::VerifyError),
    /// A CSPF program could not be assembled or verified.
    Cspf(sluice_cspf::Error),
    /// A DPF filter could not be parsed.
    Dpf(sluice_dpf::ParseError),
    /// A `LANG:@file` filter whose file could not be read.
    File {
        /// The file, as it was opened.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A `LANG:@file` filter whose text is in error.
    InFile {
        /// The file the text came from.
        path: String,
        /// The error in it.
        source: Box<Error>,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Expression(e) => write!(f, "{e}"),
            Error::RejectsAll => write!(f, "expression rejects all packets"),
            Error::Lower(e) => write!(f, "{e}"),
            Error::BpfText(e) => write!(f, "{e}"),
            Error::BpfVerify(e) => write!(f, "{e}"),
            Error::Cspf(e) => write!(f, "cspf: {e}"),
            Error::Dpf(e) => write!(f, "dpf: {e}"),
            Error::File { path, source } => write!(f, "{path}: {source}"),
            Error::InFile { path, source } => write!(f, "{path}: {source}"),
        }
    }
}

impl std::error::Error for Error {}
