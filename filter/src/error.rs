//! Why a filter could not be built, with the cause and the position in the
//! text kept as data.

/// Why a filter could not be built.
///
/// Each variant keeps the error of the stage that failed as its
/// [`source`](std::error::Error::source); the text the command prints is
/// this error's `Display`. Where the language reports a position,
/// [`Error::line`], [`Error::column`] and [`Error::offset`] give it as
/// numbers, so every front end can point at the same place.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let e = Program::builder(LinkType::EN10MB).expression("port").unwrap_err();
/// assert_eq!(e.to_string(), "column 5: expected a value after 'port', found end of expression");
/// assert_eq!((e.line(), e.column(), e.offset()), (Some(1), Some(5), Some(4)));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The expression is not valid.
    #[error(transparent)]
    Expression(#[from] sluice_pcap::CompileError),
    /// The expression is valid but accepts no packet at all (libpcap refuses these too).
    #[error("expression rejects all packets")]
    RejectsAll,
    /// The program could not be lowered to classic BPF.
    #[error(transparent)]
    Lower(sluice_cbpf::LowerError),
    /// A BPF program text could not be parsed.
    #[error(transparent)]
    BpfText(#[from] sluice_bpf::ParseError),
    /// A BPF program failed verification.
    #[error(transparent)]
    BpfVerify(#[from] sluice_bpf::VerifyError),
    /// A CSPF program could not be assembled or verified.
    #[error("cspf: {0}")]
    Cspf(#[from] sluice_cspf::Error),
    /// A DPF filter could not be parsed.
    #[error("dpf: {0}")]
    Dpf(#[from] sluice_dpf::ParseError),
    /// A `LANG:@file` filter whose file could not be read.
    #[error("{path}: {source}")]
    File {
        /// The file, as it was opened.
        path: String,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// A filter read from a file (`LANG:@file`, `-F`, `--bpf-file`) whose
    /// text is in error. The message names the file, the line and the
    /// column, and repeats nothing of the file ([`crate::redact`]): the
    /// parser's own message is kept in `source`, with the file's words
    /// taken out of it too.
    #[error("{path}: {}{message}", position(*line, *column))]
    InFile {
        /// The file the text came from.
        path: String,
        /// 1-based line in the file, where the language reports one.
        line: Option<usize>,
        /// 1-based column (characters) in that line.
        column: Option<usize>,
        /// What is wrong, without the file's words.
        message: String,
        /// The error in it (its message redacted the same way).
        source: Box<Error>,
    },
}

fn position(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!("line {l}, column {c}: "),
        (Some(l), None) => format!("line {l}: "),
        _ => String::new(),
    }
}

impl Error {
    /// The error at the bottom of a `LANG:@file` wrapping: what went wrong
    /// in the text.
    ///
    /// ```
    /// use sluice_filter::{Error, Spec};
    /// let dir = std::env::temp_dir().join(format!("sluice-filter-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// std::fs::write(dir.join("bad.dpf"), "(12:16 == ").unwrap();
    /// let e = Spec::parse("dpf:@bad.dpf", Some(&dir)).unwrap().check().unwrap_err();
    /// assert!(matches!(e.innermost(), Error::Dpf(_)));
    /// assert!(e.file().unwrap().ends_with("bad.dpf"));
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn innermost(&self) -> &Error {
        match self {
            Error::InFile { source, .. } => source.innermost(),
            e => e,
        }
    }

    /// The file the filter's text was read from (`LANG:@path`), when the
    /// error is in it or reading it failed.
    ///
    /// ```
    /// let e = sluice_filter::Spec::parse("bpf:@/nonexistent.bpf", None).unwrap_err();
    /// assert_eq!(e.file(), Some("/nonexistent.bpf"));
    /// ```
    pub fn file(&self) -> Option<&str> {
        match self {
            Error::File { path, .. } | Error::InFile { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The 1-based line of the text the error is on, where the language
    /// reports a position (a pcap expression is one line).
    ///
    /// ```
    /// let e = sluice_filter::Program::from_bpf_text("1\n6 0 0 1\nfrob").unwrap_err();
    /// assert_eq!(e.line(), Some(3));
    /// ```
    pub fn line(&self) -> Option<usize> {
        if let Error::InFile { line, .. } = self {
            return *line;
        }
        match self.innermost() {
            Error::Expression(_) => Some(1),
            Error::BpfText(e) => Some(e.line),
            Error::Cspf(sluice_cspf::Error::Asm(e)) => Some(e.line),
            Error::Dpf(e) => Some(e.line),
            _ => None,
        }
    }

    /// The 1-based column the command prints (`column N`): bytes from the
    /// start of a pcap expression, characters in the other languages,
    /// counted from the start of what was written (a `cspf:` or `dpf:`
    /// prefix on the first line included).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let e = Program::builder(LinkType::EN10MB).build("dpf: (12:16 == ").unwrap_err();
    /// assert_eq!(e.column(), Some(16));
    /// assert!(e.to_string().contains("column 16"));
    /// ```
    pub fn column(&self) -> Option<usize> {
        if let Error::InFile { column, .. } = self {
            return *column;
        }
        match self.innermost() {
            Error::Expression(e) => Some(e.span.column()),
            Error::BpfText(e) => Some(e.column),
            Error::Cspf(sluice_cspf::Error::Asm(e)) => Some(e.column),
            Error::Dpf(e) => Some(e.column),
            _ => None,
        }
    }

    /// The byte offset in the text where the error starts, where the
    /// language reports one (pcap expressions given as text; for a file,
    /// [`Error::line`] and [`Error::column`] say where).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let e = Program::builder(LinkType::EN10MB).expression("tcp and and").unwrap_err();
    /// assert_eq!(e.offset(), Some(8));
    /// ```
    pub fn offset(&self) -> Option<usize> {
        match self {
            Error::Expression(e) => Some(e.span.start),
            _ => None,
        }
    }
}

/// A line of text with a caret under a 1-based column, indented two
/// spaces and after a newline, as sluice's front ends append it to an
/// error message (tabs before the column are kept, so the caret lines up).
///
/// ```
/// assert_eq!(sluice_filter::caret_under("tcp port", 5), "\n  tcp port\n      ^");
/// ```
pub fn caret_under(line: &str, column: usize) -> String {
    let pad: String = line
        .chars()
        .take(column.saturating_sub(1))
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    format!("\n  {line}\n  {pad}^")
}
