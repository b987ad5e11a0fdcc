//! Which language a filter is written in: one prefix for the command line
//! and filters files, so one filter set can mix languages.
//!
//! | prefix | language |
//! | --- | --- |
//! | `pcap:` (or none) | tcpdump's filter expressions |
//! | `bpf:` | classic BPF, as `tcpdump -d`, `-dd` or `-ddd` prints it |
//! | `cspf:` | the CSPF stack machine, in MPF Appendix C's notation ([`sluice_cspf`]) |
//! | `dpf:` | DPF atoms ([`sluice_dpf`]) |
//!
//! `LANG:@path` reads the program from a file (relative paths from the
//! directory given to [`Spec::parse`], the filters file's, or the current
//! one). On one line, `;` separates the instructions of a `bpf:` or
//! `cspf:` program; in a multi-line text (a file) CSPF's `;` starts a
//! comment, as in the seed's notation.
//!
//! Every language is compiled through the IR: CSPF and DPF filters print as
//! BPF with `-d`, run as native code and merge in the classifier like
//! expressions. CSPF and DPF read the frame from its first byte whatever
//! the link type.
//!
//! ```
//! use sluice_filter::{LinkType, Program};
//! let build = Program::builder(LinkType::EN10MB).snaplen(1).capture_big_endian(false);
//! let pcap = build.build("ip proto 6").unwrap();
//! let cspf = build.build("cspf: pushword P[6]; pushlit | cand #0x800; pushword P[11]; push00ff | and; pushlit | eq #6").unwrap();
//! let dpf = build.build("dpf: (12:16 == 0x800) && (23:8 == 6)").unwrap();
//! let mut pkt = [0u8; 34];
//! pkt[12] = 8;
//! pkt[14] = 0x45;
//! pkt[23] = 6;
//! for p in [&pcap, &cspf, &dpf] {
//!     assert_eq!(p.run(&pkt, 34), 1);
//!     assert_eq!(p.run_native(&pkt, 34), 1);
//! }
//! ```

use crate::{Error, Program, ProgramBuilder};
use std::borrow::Cow;
use std::path::Path;

/// A filter language.
///
/// ```
/// use sluice_filter::Language;
/// assert_eq!(Language::split("dpf:(12:16 == 0x800)"), (Language::Dpf, "(12:16 == 0x800)", 4));
/// assert_eq!(Language::split("tcp port 80"), (Language::Pcap, "tcp port 80", 0));
/// assert_eq!(Language::split("host ::1").0, Language::Pcap);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    /// tcpdump's filter expressions (the default).
    Pcap,
    /// Classic BPF program text.
    Bpf,
    /// CSPF stack-machine assembly.
    Cspf,
    /// DPF atoms.
    Dpf,
}

impl Language {
    /// Every language.
    pub const ALL: [Language; 4] = [Language::Pcap, Language::Bpf, Language::Cspf, Language::Dpf];

    /// The prefix's name (without the colon).
    ///
    /// ```
    /// assert_eq!(sluice_filter::Language::Cspf.name(), "cspf");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Language::Pcap => "pcap",
            Language::Bpf => "bpf",
            Language::Cspf => "cspf",
            Language::Dpf => "dpf",
        }
    }

    /// The language a filter text names with its prefix, the text after
    /// the prefix, and the prefix's length in bytes (leading blanks
    /// included). No prefix: pcap, the whole text.
    ///
    /// ```
    /// use sluice_filter::Language;
    /// assert_eq!(Language::split("  BPF:1\n6 0 0 1\n").0, Language::Bpf);
    /// ```
    pub fn split(text: &str) -> (Language, &str, usize) {
        let trimmed = text.trim_start();
        let lead = text.len() - trimmed.len();
        for l in Language::ALL {
            let n = l.name().len();
            if trimmed.len() > n
                && trimmed.as_bytes()[n] == b':'
                && trimmed[..n].eq_ignore_ascii_case(l.name())
            {
                return (l, &trimmed[n + 1..], lead + n + 1);
            }
        }
        (Language::Pcap, text, 0)
    }
}

/// A filter's language and program text, after its prefix and any
/// `@file` are resolved.
///
/// ```
/// use sluice_filter::{Language, Spec};
/// let s = Spec::parse("cspf:pushone", None).unwrap();
/// assert_eq!((s.language, s.text.as_str(), s.file.is_none()), (Language::Cspf, "pushone", true));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The language.
    pub language: Language,
    /// The program text.
    pub text: String,
    /// The file the text was read from (`LANG:@path`).
    pub file: Option<String>,
    /// Characters before the text on its first line (the prefix), so that
    /// error columns count from the start of what the user wrote.
    pub column_offset: usize,
}

impl Spec {
    /// Resolve a filter text: its prefix, and `@path` (read relative to
    /// `dir` when given and the path is relative, with
    /// [`read_text_file`](crate::read_text_file): at most 32 MiB).
    ///
    /// ```
    /// let e = sluice_filter::Spec::parse("dpf:@/nonexistent/x.dpf", None).unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/x.dpf"));
    /// let e = sluice_filter::Spec::parse("bpf:@/dev/zero", None).unwrap_err();
    /// assert!(e.to_string().contains("32 MiB"));
    /// ```
    pub fn parse(text: &str, dir: Option<&Path>) -> Result<Spec, Error> {
        Spec::parse_with(text, dir, crate::read_text_file)
    }

    /// [`Spec::parse`] with `read` reading the file of a `LANG:@path`
    /// text: for front ends whose files are read by someone else first
    /// (an authorised flow reads its `@FILE` programs before anything
    /// runs).
    ///
    /// ```
    /// use sluice_filter::{Language, Spec};
    /// let s = Spec::parse_with("dpf:@prog", None, |p| {
    ///     assert_eq!(p, std::path::Path::new("prog"));
    ///     Ok("(12:16 == 0x800)".to_string())
    /// }).unwrap();
    /// assert_eq!((s.language, s.file.as_deref()), (Language::Dpf, Some("prog")));
    /// ```
    pub fn parse_with(
        text: &str,
        dir: Option<&Path>,
        read: impl FnOnce(&Path) -> std::io::Result<String>,
    ) -> Result<Spec, Error> {
        let (language, rest, prefix) = Language::split(text);
        if let Some(path) = rest.trim().strip_prefix('@') {
            let path = path.trim();
            let full = match dir {
                Some(d) if Path::new(path).is_relative() => d.join(path),
                _ => Path::new(path).to_path_buf(),
            };
            let body = read(&full).map_err(|source| Error::File {
                path: full.display().to_string(),
                source,
            })?;
            return Ok(Spec {
                language,
                text: body,
                file: Some(full.display().to_string()),
                column_offset: 0,
            });
        }
        Ok(Spec {
            language,
            text: rest.to_string(),
            file: None,
            column_offset: text[..prefix].chars().count(),
        })
    }

    /// A filter file as `tcpdump -F` reads one (`#` comments, lines
    /// joined), or, with `language`, a program in that language
    /// (`--bpf-file`). Without `language` a `bpf:`, `cspf:` or `dpf:`
    /// prefix at the start of the file picks the language. Read with
    /// [`read_text_file`](crate::read_text_file); errors in it name the
    /// file, line and column and quote nothing of it.
    ///
    /// ```
    /// use sluice_filter::{Language, LinkType, Program, Spec};
    /// let dir = std::env::temp_dir().join(format!("sluice-spec-read-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir).unwrap();
    /// let f = dir.join("expr");
    /// std::fs::write(&f, "tcp # web\n and port secret\n").unwrap();
    /// let spec = Spec::read(&f, None).unwrap();
    /// let e = spec.compile(&Program::builder(LinkType::EN10MB)).unwrap_err();
    /// // "unknown port name 'secret'": the file's words are taken out.
    /// assert!(e.to_string().ends_with("expr: line 2, column 11: unknown … name '…'"), "{e}");
    /// assert_eq!((e.line(), e.column()), (Some(2), Some(11)));
    /// assert_eq!(Spec::read(&f, Some(Language::Bpf)).unwrap().language, Language::Bpf);
    /// std::fs::remove_dir_all(&dir).unwrap();
    /// ```
    pub fn read(path: &Path, language: Option<Language>) -> Result<Spec, Error> {
        let shown = path.display().to_string();
        let body = crate::read_text_file(path).map_err(|source| Error::File {
            path: shown.clone(),
            source,
        })?;
        let (language, text, column_offset) = match language {
            Some(l) => (l, body, 0),
            None => {
                let (l, rest, prefix) = Language::split(&body);
                let offset = body[..prefix].chars().count();
                (l, rest.to_string(), offset)
            }
        };
        Ok(Spec {
            language,
            text,
            file: Some(shown),
            column_offset,
        })
    }

    /// Compile the filter with the builder's link type, snapshot length
    /// and byte order (the last two matter to pcap expressions only).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program, Spec};
    /// let spec = Spec::parse("dpf:(0:8 == 0x45)", None).unwrap();
    /// let p = spec.compile(&Program::builder(LinkType::RAW).snaplen(9)).unwrap();
    /// assert_eq!(p.run(&[0x45], 1), 9);
    /// ```
    pub fn compile(&self, options: &ProgramBuilder) -> Result<Program, Error> {
        let compiled = match self.language {
            Language::Pcap => options.expression(&self.pcap_text()),
            Language::Bpf => Program::from_bpf_text(&self.bpf_text()),
            Language::Cspf => self.cspf().and_then(|p| {
                Program::from_ir(p.to_ir(options.snaplen), options.optimize, false, None)
            }),
            Language::Dpf => self.dpf().and_then(|f| {
                Program::from_ir(f.to_ir(options.snaplen), options.optimize, false, None)
            }),
        };
        compiled.map_err(|e| self.located(e))
    }

    /// Check the filter's text without compiling it for a link type: a
    /// pcap expression parses, a BPF program parses and passes the
    /// verifier, a CSPF program assembles, a DPF filter parses. What only
    /// a link type tells (an expression that rejects every packet, a
    /// protocol the link cannot carry) waits for [`Spec::compile`].
    ///
    /// ```
    /// use sluice_filter::Spec;
    /// assert!(Spec::parse("tcp port 80", None).unwrap().check().is_ok());
    /// let e = Spec::parse("tcp port", None).unwrap().check().unwrap_err();
    /// assert_eq!(e.to_string(), "column 9: expected a value after 'port', found end of expression");
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        let checked = match self.language {
            Language::Pcap => sluice_pcap::parser::parse(&self.pcap_text())
                .map(drop)
                .map_err(Error::Expression),
            Language::Bpf => Program::from_bpf_text(&self.bpf_text()).map(drop),
            Language::Cspf => self.cspf().map(drop),
            Language::Dpf => self.dpf().map(drop),
        };
        checked.map_err(|e| self.located(e))
    }

    /// Whether the text is one line (trailing blanks aside).
    fn one_line(&self) -> bool {
        !self.text.trim_end().contains('\n')
    }

    /// An error about this filter's text as front ends show it: for text
    /// read from a file, [`Error::InFile`] with the file's line and column
    /// and nothing of the file in the message ([`crate::redact`]); for
    /// text given directly, the error as it is.
    ///
    /// ```
    /// use sluice_filter::{Error, Language, Spec};
    /// let spec = Spec { language: Language::Bpf, text: "ld [12]\nfrob x\n".into(), file: Some("p.bpf".into()), column_offset: 0 };
    /// let e = spec.check().unwrap_err();
    /// assert!(matches!(e, Error::InFile { line: Some(2), column: Some(1), .. }));
    /// assert_eq!(e.to_string(), "p.bpf: line 2, column 1: unknown mnemonic `…`");
    /// ```
    pub fn locate(&self, e: Error) -> Error {
        self.located(e)
    }

    /// An error in the text, with the file it came from.
    fn located(&self, e: Error) -> Error {
        let Some(path) = &self.file else {
            return e;
        };
        if matches!(e, Error::InFile { .. } | Error::File { .. }) {
            return e;
        }
        let (line, column) = self.position(&e);
        let e = redacted(e, &self.text);
        let message = crate::redact(&bare_message(&e), &self.text);
        Error::InFile {
            path: path.clone(),
            line,
            column,
            message,
            source: Box::new(e),
        }
    }

    /// Line and column in the file of an error in its text.
    fn position(&self, e: &Error) -> (Option<usize>, Option<usize>) {
        let first = |line: usize, col: usize| {
            if line == 1 {
                col + self.column_offset
            } else {
                col
            }
        };
        match e {
            Error::Expression(c) if self.language == Language::Pcap => {
                // pcap_text joined the lines (comments cut) with spaces.
                let mut at = 0usize;
                let mut last = (1, 1);
                for (i, raw) in self.text.lines().enumerate() {
                    let piece = raw.split('#').next().unwrap_or("");
                    let start = c.span.start;
                    if start <= at + piece.len() {
                        let col = piece
                            .get(..start.saturating_sub(at))
                            .map_or(piece.chars().count(), |s| s.chars().count())
                            + 1;
                        return (Some(i + 1), Some(first(i + 1, col)));
                    }
                    last = (i + 1, piece.chars().count() + 1);
                    at += piece.len() + 1;
                }
                (Some(last.0), Some(first(last.0, last.1)))
            }
            Error::BpfText(p) if self.one_line() => {
                // One line: `;` separated the instructions.
                let pieces: Vec<&str> = self.text.split(';').collect();
                let before: usize = pieces
                    .iter()
                    .take(p.line.saturating_sub(1))
                    .map(|s| s.chars().count() + 1)
                    .sum();
                (Some(1), Some(first(1, before + p.column)))
            }
            Error::BpfText(p) => (Some(p.line), Some(first(p.line, p.column))),
            // The CSPF and DPF columns were shifted by the prefix already.
            Error::Cspf(sluice_cspf::Error::Asm(a)) => (Some(a.line), Some(a.column)),
            Error::Dpf(d) => (Some(d.line), Some(d.column)),
            _ => (None, None),
        }
    }

    /// A pcap expression's text: from a file, as tcpdump -F reads one
    /// (`#` comments, lines joined).
    fn pcap_text(&self) -> Cow<'_, str> {
        if self.file.is_none() {
            return Cow::Borrowed(&self.text);
        }
        let lines: Vec<&str> = self
            .text
            .lines()
            .map(|l| l.split('#').next().unwrap_or(""))
            .collect();
        Cow::Owned(lines.join(" "))
    }

    /// A BPF program's text: on one line, `;` separates instructions.
    fn bpf_text(&self) -> Cow<'_, str> {
        if self.one_line() {
            Cow::Owned(self.text.replace(';', "\n"))
        } else {
            Cow::Borrowed(&self.text)
        }
    }

    /// The CSPF program, with error columns counted from the prefix.
    fn cspf(&self) -> Result<sluice_cspf::Program, Error> {
        let assembled = if self.one_line() && self.file.is_none() {
            sluice_cspf::assemble_inline(&self.text)
        } else {
            sluice_cspf::assemble(&self.text)
        };
        assembled.map_err(|mut e| {
            if let sluice_cspf::Error::Asm(a) = &mut e {
                if a.line == 1 {
                    a.column += self.column_offset;
                }
            }
            Error::Cspf(e)
        })
    }

    /// The DPF filter, with error columns counted from the prefix.
    fn dpf(&self) -> Result<sluice_dpf::Filter, Error> {
        sluice_dpf::parse(&self.text).map_err(|mut e| {
            if e.line == 1 {
                e.column += self.column_offset;
            }
            Error::Dpf(e)
        })
    }
}

/// The error with the words of `text` taken out of its message.
fn redacted(e: Error, text: &str) -> Error {
    match e {
        Error::Expression(mut c) => {
            c.message = crate::redact(&c.message, text);
            Error::Expression(c)
        }
        Error::BpfText(mut p) => {
            p.message = crate::redact(&p.message, text);
            Error::BpfText(p)
        }
        Error::Cspf(sluice_cspf::Error::Asm(mut a)) => {
            a.message = crate::redact(&a.message, text);
            Error::Cspf(sluice_cspf::Error::Asm(a))
        }
        Error::Dpf(mut d) => {
            d.message = crate::redact(&d.message, text);
            Error::Dpf(d)
        }
        e => e,
    }
}

/// What is wrong, without the position the error's own text puts first.
fn bare_message(e: &Error) -> String {
    match e {
        Error::Expression(c) => c.message.clone(),
        Error::BpfText(p) => p.message.clone(),
        Error::Cspf(sluice_cspf::Error::Asm(a)) => format!("cspf: {}", a.message),
        Error::Dpf(d) => format!("dpf: {}", d.message),
        e => e.to_string(),
    }
}
