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
//! use sluice::{Program, LinkType};
//! let pcap = Program::from_spec("ip proto 6", LinkType::EN10MB, 1, true, false).unwrap();
//! let cspf = Program::from_spec("cspf: pushword P[6]; pushlit | cand #0x800; pushword P[11]; push00ff | and; pushlit | eq #6",
//!                               LinkType::EN10MB, 1, true, false).unwrap();
//! let dpf = Program::from_spec("dpf: (12:16 == 0x800) && (23:8 == 6)", LinkType::EN10MB, 1, true, false).unwrap();
//! let mut pkt = [0u8; 34];
//! pkt[12] = 8;
//! pkt[14] = 0x45;
//! pkt[23] = 6;
//! for p in [&pcap, &cspf, &dpf] {
//!     assert_eq!(p.run(&pkt, 34), 1);
//!     assert_eq!(p.run_native(&pkt, 34), 1);
//! }
//! ```

use crate::{Error, LinkType, Program};
use std::path::Path;
use std::sync::Arc;

/// A filter language.
///
/// ```
/// use sluice::Language;
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
    /// assert_eq!(sluice::Language::Cspf.name(), "cspf");
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
    /// assert_eq!(sluice::Language::split("  BPF:1\n6 0 0 1\n").0, sluice::Language::Bpf);
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
/// use sluice::{Language, Spec};
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
    /// `dir` when given and the path is relative).
    ///
    /// ```
    /// let e = sluice::Spec::parse("dpf:@/nonexistent/x.dpf", None).unwrap_err();
    /// assert!(e.to_string().contains("/nonexistent/x.dpf"));
    /// ```
    pub fn parse(text: &str, dir: Option<&Path>) -> Result<Spec, Error> {
        let (language, rest, prefix) = Language::split(text);
        if let Some(path) = rest.trim().strip_prefix('@') {
            let path = path.trim();
            let full = match dir {
                Some(d) if Path::new(path).is_relative() => d.join(path),
                _ => Path::new(path).to_path_buf(),
            };
            let body = std::fs::read_to_string(&full)
                .map_err(|e| Error::Spec(format!("{}: {e}", full.display())))?;
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

    /// Compile the filter; accepted packets get `snaplen`. `linktype` and
    /// the capture's byte order matter to pcap expressions only.
    ///
    /// ```
    /// use sluice::{Spec, LinkType};
    /// let p = Spec::parse("dpf:(0:8 == 0x45)", None).unwrap().compile(LinkType::RAW, 9, true, false).unwrap();
    /// assert_eq!(p.run(&[0x45], 1), 9);
    /// ```
    pub fn compile(
        &self,
        linktype: LinkType,
        snaplen: u32,
        optimize: bool,
        capture_big_endian: bool,
    ) -> Result<Program, Error> {
        let one_line = !self.text.trim_end().contains('\n');
        let located = |e: Error| match &self.file {
            Some(f) => Error::Spec(format!("{f}: {e}")),
            None => e,
        };
        match self.language {
            Language::Pcap => {
                let text = if self.file.is_some() {
                    // As tcpdump -F: '#' comments, lines joined.
                    let lines: Vec<&str> = self
                        .text
                        .lines()
                        .map(|l| l.split('#').next().unwrap_or(""))
                        .collect();
                    lines.join(" ")
                } else {
                    self.text.clone()
                };
                Program::from_expression_for(&text, linktype, snaplen, optimize, capture_big_endian)
                    .map_err(located)
            }
            Language::Bpf => {
                let text = if one_line {
                    self.text.replace(';', "\n")
                } else {
                    self.text.clone()
                };
                Program::from_bpf_text(&text).map_err(located)
            }
            Language::Cspf => {
                let assembled = if one_line && self.file.is_none() {
                    sluice_cspf::assemble_inline(&self.text)
                } else {
                    sluice_cspf::assemble(&self.text)
                };
                let prog = assembled.map_err(|mut e| {
                    if let sluice_cspf::Error::Asm(a) = &mut e {
                        if a.line == 1 {
                            a.column += self.column_offset;
                        }
                    }
                    located(Error::Cspf(e))
                })?;
                Program::from_ir(prog.to_ir(snaplen), optimize).map_err(located)
            }
            Language::Dpf => {
                let f = sluice_dpf::parse(&self.text).map_err(|mut e| {
                    if e.line == 1 {
                        e.column += self.column_offset;
                    }
                    located(Error::Dpf(e))
                })?;
                Program::from_ir(f.to_ir(snaplen), optimize).map_err(located)
            }
        }
    }
}

impl Program {
    /// Compile a filter in any language, named by its prefix (see
    /// [`Language`]); no prefix is a pcap expression, as
    /// [`Program::from_expression_for`].
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// let p = Program::from_spec("bpf: 1; 6 0 0 7", LinkType::EN10MB, 1, true, false).unwrap();
    /// assert_eq!(p.run(&[], 0), 7);
    /// let e = Program::from_spec("cspf: pushword P[6] | frob", LinkType::EN10MB, 1, true, false).unwrap_err();
    /// assert!(e.to_string().contains("column 23"), "{e}");
    /// ```
    pub fn from_spec(
        text: &str,
        linktype: LinkType,
        snaplen: u32,
        optimize: bool,
        capture_big_endian: bool,
    ) -> Result<Program, Error> {
        Program::from_spec_in(text, None, linktype, snaplen, optimize, capture_big_endian)
    }

    /// Like [`Program::from_spec`], reading `LANG:@path` files relative to
    /// `dir`.
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// assert!(Program::from_spec_in("tcp", None, LinkType::EN10MB, 1, true, false).is_ok());
    /// ```
    pub fn from_spec_in(
        text: &str,
        dir: Option<&Path>,
        linktype: LinkType,
        snaplen: u32,
        optimize: bool,
        capture_big_endian: bool,
    ) -> Result<Program, Error> {
        Spec::parse(text, dir)?.compile(linktype, snaplen, optimize, capture_big_endian)
    }

    /// A program from an IR filter: the fast-disjunction rewrite when
    /// optimising, then classic BPF for the interpreter and `-d`.
    pub(crate) fn from_ir(mut ir: sluice_ir::Filter, optimize: bool) -> Result<Program, Error> {
        if optimize {
            ir.pred = sluice_ir::simplify::fast_disjunctions(ir.pred);
        }
        let bpf = match sluice_cbpf::lower_with(&ir, sluice_cbpf::Options { optimize }) {
            Ok(b) => b,
            Err(sluice_cbpf::LowerError::RejectsAll) => return Err(Error::RejectsAll),
            Err(e) => return Err(Error::Lower(e.to_string())),
        };
        Ok(Program {
            ir: Some(ir),
            bpf,
            native: Arc::default(),
        })
    }
}
