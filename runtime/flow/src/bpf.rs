//! The `BPF` class: a tcpdump filter expression or a classic BPF program.
//!
//! `(BPF,"tcp port 80")` compiles the expression with `sluice-filter`
//! (pcap language → IR → native code, with the classic BPF program as the
//! fallback interpreter) for every link type its
//! sources deliver, with libpcap's meaning and a snapshot length of 262144
//! (the return value on accept, as `sluice filter` uses). The argument is
//! taken as BPF program text instead when it looks like one: tcpdump's
//! `-d` (`(000) ldh [12]`), `-dd` (`{ 0x28, … }`) or `-ddd` (a count, then
//! `code jt jf k` lines; on a command line the lines may be separated by
//! commas: `"4,40 0 0 12,21 0 1 2048,6 0 0 65535,6 0 0 0"`). `@FILE` takes
//! the argument from a file (an expression as `tcpdump -F` reads one, `#`
//! comments and all, or a program): the group reads it once the policy's
//! `read=` rules allowed it ([`crate::class::Files`]), and errors in it
//! name the file, line and column without quoting it. Programs must pass the userland verifier; they
//! run as native code when they lift into the IR, in `sluice-bpf`'s
//! interpreter otherwise.
//!
//! The argument may also be in sluice's other filter languages, with the
//! prefix the rest of sluice uses: `(BPF,"dpf:(12:16 == 0x800)")`, or
//! `cspf:` for a CSPF program (one line, `;` between instructions, or
//! `cspf:@FILE`). The classes `CSPF` and `DPF` ([`LanguageClass`]) take the
//! program without the prefix: `(DPF,"(12:16 == 0x800) && (23:8 == 6)")`.
//! Both go through the IR like expressions, so they run as native code and
//! merge with the other filters.
//!
//! Elements of this class hanging off the same point of a group's graph
//! are run together through one merged classifier (`sluice-classifier`).

use crate::buffer::MBuf;
use crate::class::{ArgError, BuildEnv, ClassInfo, Element, Files, FilterClass, Pkt};
use crate::value::Value;
use sluice_filter::{Error, Language, LinkType, Program, Spec};
use sluice_ir::Filter;
use std::collections::HashMap;

/// Snapshot length the expressions return on accept.
pub const SNAPLEN: u32 = 262_144;

/// The `BPF` filter class.
///
/// ```
/// use sluice_flow::class::FilterClass;
/// use sluice_flow::bpf::BpfClass;
/// assert!(BpfClass.check(&["tcp port 80".into()]).is_ok());
/// let e = BpfClass.check(&["tcp prot 80".into()]).unwrap_err();
/// assert_eq!(e.arg, Some(0));
/// assert!(BpfClass.check(&["1,6 0 0 65535".into()]).is_ok());
/// ```
pub struct BpfClass;

/// The argument of a `BPF` element, checked.
enum Text {
    /// A pcap expression, compiled for each link type the sources deliver.
    Expr(String),
    /// A pcap expression from a file, likewise (errors name the file).
    File(Spec),
    /// A CSPF or DPF program (no link type needed; compiled when built).
    Other(Spec),
    /// A classic BPF program.
    Code(Program),
}

/// The file a `BPF` argument names: `@FILE`, `cspf:@FILE` or
/// `dpf:@FILE` (the path as written).
fn file_ref(raw: &str) -> Option<String> {
    let rest = match Language::split(raw) {
        (Language::Cspf | Language::Dpf, rest, _) => rest,
        _ => raw,
    };
    rest.trim().strip_prefix('@').map(|p| p.trim().to_string())
}

/// A CSPF or DPF program (the text after its `cspf:` or `dpf:` prefix,
/// or `@FILE`), checked; `None` when the text has no such prefix.
fn other_language(raw: &str, files: &Files) -> Option<Result<Spec, ArgError>> {
    let name = match Language::split(raw).0 {
        Language::Cspf => "CSPF",
        Language::Dpf => "DPF",
        _ => return None,
    };
    let checked = Spec::parse_with(raw, None, |p| files.read(p)).and_then(|mut spec| {
        // Columns count within the program, after its prefix.
        spec.column_offset = 0;
        spec.check()?;
        Ok(spec)
    });
    Some(checked.map_err(|e| ArgError::at(0, language_error(name, e))))
}

/// A CSPF or DPF error as the `BPF` class reports it: `DPF: message`, or
/// for a `@FILE` program the file, line and column and a message that
/// quotes nothing of the file.
fn language_error(name: &str, e: Error) -> String {
    if e.file().is_some() {
        return e.to_string();
    }
    match e.innermost() {
        Error::Cspf(c) => format!("{name}: {c}"),
        Error::Dpf(d) => format!("{name}: {d}"),
        _ => e.to_string(),
    }
}

/// A filter class for one of sluice's other languages, `CSPF` or `DPF`:
/// the `BPF` class with the language given by the class name.
///
/// ```
/// use sluice_flow::class::FilterClass;
/// use sluice_flow::bpf::LanguageClass;
/// let dpf = LanguageClass::dpf();
/// assert_eq!(dpf.name(), "DPF");
/// assert!(dpf.check(&["(12:16 == 0x800)".into()]).is_ok());
/// assert!(dpf.check(&["(12:16 == ".into()]).is_err());
/// assert!(LanguageClass::cspf().check(&["pushword P[6]; pushlit | eq; #0x800".into()]).is_ok());
/// ```
pub struct LanguageClass {
    name: &'static str,
    prefix: &'static str,
}

impl LanguageClass {
    /// The `CSPF` class: a CSPF program, one line with `;` between
    /// instructions, or `@FILE`.
    ///
    /// ```
    /// use sluice_flow::class::FilterClass;
    /// assert_eq!(sluice_flow::bpf::LanguageClass::cspf().name(), "CSPF");
    /// ```
    pub fn cspf() -> LanguageClass {
        LanguageClass {
            name: "CSPF",
            prefix: "cspf:",
        }
    }

    /// The `DPF` class: DPF atoms joined by `&&` (or `@FILE`).
    ///
    /// ```
    /// use sluice_flow::class::FilterClass;
    /// assert_eq!(sluice_flow::bpf::LanguageClass::dpf().name(), "DPF");
    /// ```
    pub fn dpf() -> LanguageClass {
        LanguageClass {
            name: "DPF",
            prefix: "dpf:",
        }
    }

    fn prefixed(&self, args: &[String]) -> Vec<String> {
        let mut v = args.to_vec();
        if let Some(first) = v.first_mut() {
            *first = format!("{}{first}", self.prefix);
        }
        v
    }
}

impl FilterClass for LanguageClass {
    fn name(&self) -> &str {
        self.name
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        BpfClass.check(&self.prefixed(args))
    }
    fn files(&self, args: &[String]) -> Vec<String> {
        BpfClass.files(&self.prefixed(args))
    }
    fn check_loaded(&self, args: &[String], files: &Files) -> Result<ClassInfo, ArgError> {
        BpfClass.check_loaded(&self.prefixed(args), files)
    }
    fn build(&self, args: &[String], env: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        BpfClass.build(&self.prefixed(args), env)
    }
}

fn looks_like_program(t: &str) -> bool {
    let t = t.trim_start();
    let mut cs = t.chars();
    match cs.next() {
        Some('{') => true,
        Some('(') => cs.next().is_some_and(|c| c.is_ascii_digit()),
        Some(c) if c.is_ascii_digit() => {
            let head: String = t.chars().take_while(|c| c.is_ascii_digit()).collect();
            matches!(t[head.len()..].chars().next(), Some('\n' | ',' | '\r'))
        }
        _ => false,
    }
}

/// The argument, checked; `None` when it names a file and `files` is
/// `None` (at populate: the file is read only once authorised).
fn load(args: &[String], files: Option<&Files>) -> Result<Option<Text>, ArgError> {
    crate::class::at_most(
        args,
        1,
        "(BPF,EXPRESSION) or (BPF,PROGRAM_TEXT) or (BPF,@FILE)",
    )?;
    let raw = args
        .first()
        .ok_or_else(|| ArgError::element("BPF needs an expression or a program: (BPF,\"tcp\")"))?;
    let file = file_ref(raw);
    let files = match (files, &file) {
        (Some(f), _) => f,
        (None, Some(_)) => return Ok(None),
        (None, None) => &Files::default(),
    };
    if let Some(spec) = other_language(raw, files) {
        return Ok(Some(Text::Other(spec?)));
    }
    if let Some(path) = file {
        return from_file(&path, files).map(Some);
    }
    let text = raw.clone();
    if looks_like_program(&text) {
        let t = if !text.contains('\n') && !text.trim_start().starts_with('{') {
            text.replace(',', "\n")
        } else {
            text.clone()
        };
        let prog = Program::from_bpf_text(&t).map_err(|e| {
            ArgError::at(
                0,
                match e {
                    Error::BpfText(e) => format!("BPF program line {}: {}", e.line, e.message),
                    e => format!("BPF program: {e}"),
                },
            )
        })?;
        Ok(Some(Text::Code(prog)))
    } else {
        if text.trim().is_empty() {
            return Err(ArgError::at(0, "empty filter expression"));
        }
        let spec = Spec {
            language: Language::Pcap,
            text: text.clone(),
            file: None,
            column_offset: 0,
        };
        if let Err(e) = spec.check() {
            // The offset counts characters of the argument as written.
            let offset = match e.offset() {
                Some(at) => text[..at.min(text.len())].chars().count(),
                _ => 0,
            };
            let message = match e {
                Error::Expression(e) => e.message,
                e => e.to_string(),
            };
            return Err(ArgError {
                arg: Some(0),
                offset,
                message,
            });
        }
        Ok(Some(Text::Expr(text)))
    }
}

/// A `@FILE` argument: a program or an expression, from the text the
/// group read. Errors name the file, line and column and repeat nothing
/// of it.
fn from_file(path: &str, files: &Files) -> Result<Text, ArgError> {
    let text = files
        .read(std::path::Path::new(path))
        .map_err(|e| ArgError::at(0, format!("{path}: {e}")))?;
    if looks_like_program(&text) {
        let t = if !text.contains('\n') && !text.trim_start().starts_with('{') {
            text.replace(',', "\n")
        } else {
            text
        };
        let spec = Spec {
            language: Language::Bpf,
            text: t,
            file: Some(path.to_string()),
            column_offset: 0,
        };
        let prog = spec
            .compile(&Program::builder(LinkType::EN10MB))
            .map_err(|e| ArgError::at(0, format!("BPF program: {e}")))?;
        return Ok(Text::Code(prog));
    }
    if text.trim().is_empty() {
        return Err(ArgError::at(0, format!("{path}: empty filter expression")));
    }
    let spec = Spec {
        language: Language::Pcap,
        text,
        file: Some(path.to_string()),
        column_offset: 0,
    };
    spec.check().map_err(|e| ArgError::at(0, e.to_string()))?;
    Ok(Text::File(spec))
}

/// A compiled program, with its native code built up front.
fn ready(p: Program) -> Program {
    p.native();
    p
}

/// The program of an expression for a link type (and the capture's byte
/// order).
fn expression(text: &str, linktype: u16, big_endian: bool) -> Result<Program, String> {
    let lt = LinkType::from_number(linktype as u32)
        .ok_or_else(|| format!("link type {linktype} is not supported"))?;
    Program::builder(lt)
        .snaplen(SNAPLEN)
        .capture_big_endian(big_endian)
        .expression(text)
        .map(ready)
        .map_err(|e| match e {
            Error::Expression(_) | Error::RejectsAll => format!("{e} (link type {})", lt.name()),
            e => e.to_string(),
        })
}

struct Bpf {
    text: Text,
    codes: HashMap<(u16, bool), Program>,
    last: (u16, bool),
    accepted: u64,
}

impl Bpf {
    fn code(&mut self, linktype: u16, big_endian: bool) -> Result<&Program, String> {
        let key = match self.text {
            Text::Code(_) | Text::Other(_) => (0, false),
            Text::Expr(_) | Text::File(_) => (linktype, big_endian),
        };
        if !self.codes.contains_key(&key) {
            let c = match &self.text {
                Text::Expr(t) => expression(t, linktype, big_endian)?,
                Text::File(spec) => {
                    let lt = LinkType::from_number(linktype as u32)
                        .ok_or_else(|| format!("link type {linktype} is not supported"))?;
                    let b = Program::builder(lt)
                        .snaplen(SNAPLEN)
                        .capture_big_endian(big_endian);
                    spec.compile(&b)
                        .map(ready)
                        .map_err(|e| format!("{e} (link type {})", lt.name()))?
                }
                Text::Code(p) => ready(p.clone()),
                // CSPF and DPF read the frame whatever the link type.
                Text::Other(spec) => spec
                    .compile(&Program::builder(LinkType::EN10MB).snaplen(SNAPLEN))
                    .map(ready)
                    .map_err(|e| e.to_string())?,
            };
            self.codes.insert(key, c);
        }
        self.last = key;
        Ok(&self.codes[&key])
    }
}

impl FilterClass for BpfClass {
    fn name(&self) -> &str {
        "BPF"
    }
    fn aliases(&self) -> &[&str] {
        &["pcap", "tcpdump"]
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        load(args, None)?;
        Ok(ClassInfo::default())
    }
    fn files(&self, args: &[String]) -> Vec<String> {
        args.first().and_then(|a| file_ref(a)).into_iter().collect()
    }
    fn check_loaded(&self, args: &[String], files: &Files) -> Result<ClassInfo, ArgError> {
        load(args, Some(files))?;
        Ok(ClassInfo::default())
    }
    fn build(&self, args: &[String], env: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        let text = load(args, Some(&env.files))?
            .ok_or_else(|| ArgError::at(0, "the program's file was not read"))?;
        let mut b = Bpf {
            text,
            codes: HashMap::new(),
            last: (u16::MAX, false),
            accepted: 0,
        };
        for &(lt, be) in &env.linktypes {
            b.code(lt, be).map_err(|e| ArgError::at(0, e))?;
        }
        if matches!(b.text, Text::Code(_) | Text::Other(_)) {
            b.code(0, false).map_err(|e| ArgError::at(0, e))?;
        }
        b.last = (u16::MAX, false);
        Ok(Box::new(b))
    }
}

impl Element for Bpf {
    #[inline]
    fn run(&mut self, pkt: &Pkt<'_>, _: &MBuf) -> Result<u32, String> {
        let key = match self.text {
            Text::Code(_) | Text::Other(_) => (0, false),
            Text::Expr(_) | Text::File(_) => (pkt.linktype, pkt.big_endian),
        };
        let r = if key == self.last {
            self.codes[&key].run_native(pkt.data, pkt.wirelen)
        } else {
            self.code(pkt.linktype, pkt.big_endian)?
                .run_native(pkt.data, pkt.wirelen)
        };
        self.accepted += (r != 0) as u64;
        Ok(r)
    }

    fn report(&self, _: &MBuf) -> Value {
        Value::U64(self.accepted)
    }

    fn ir(&mut self, linktype: u16, big_endian: bool) -> Option<Filter> {
        let c = self.code(linktype, big_endian).ok()?;
        // Only filters that accept with one constant can share a classifier
        // (the classifier reports which filters accept, not a value).
        c.ir().cloned()
    }

    fn merged_result(&mut self, result: u32) {
        self.accepted += (result != 0) as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_program_text() {
        assert!(looks_like_program("(000) ldh [12]"));
        assert!(looks_like_program("{ 0x6, 0, 0, 0 },"));
        assert!(looks_like_program("2\n6 0 0 1\n6 0 0 0"));
        assert!(looks_like_program("1,6 0 0 1"));
        assert!(!looks_like_program("tcp"));
        assert!(!looks_like_program("(tcp or udp)"));
        assert!(!looks_like_program("1 = 1"));
    }

    #[test]
    fn expression_errors_point_into_the_argument() {
        let e = BpfClass.check(&["tcp and and".into()]).unwrap_err();
        assert_eq!(e.arg, Some(0));
        assert!(e.offset >= 4, "{e:?}");
        let e = BpfClass.check(&["2,6 0 0 1".into()]).unwrap_err();
        assert!(e.message.contains("BPF program"), "{e:?}");
    }

    #[test]
    fn runs_expression_and_program_alike() {
        let env = BuildEnv {
            linktypes: vec![(1, false)],
            ..Default::default()
        };
        let mut ip = vec![0u8; 34];
        ip[12] = 0x08;
        ip[14] = 0x45;
        let p = Pkt {
            data: &ip,
            wirelen: 34,
            linktype: 1,
            ts_sec: 0,
            ts_nsec: 0,
            big_endian: false,
        };
        let m = MBuf::new(0);
        let mut a = BpfClass.build(&["ip".into()], &env).unwrap();
        let mut b = BpfClass
            .build(
                &["4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0".into()],
                &env,
            )
            .unwrap();
        assert_eq!(a.run(&p, &m).unwrap(), SNAPLEN);
        assert_eq!(b.run(&p, &m).unwrap(), SNAPLEN);
        assert!(a.ir(1, false).is_some());
        // The same filter in DPF and CSPF, through their classes and prefixes.
        let mut arp = ip.clone();
        arp[13] = 0x06;
        let q = Pkt { data: &arp, ..p };
        let dpf = "(12:16 == 0x800)".to_string();
        let cspf = "pushword P[6]; pushlit | eq; #0x0800".to_string();
        let mut c = LanguageClass::dpf()
            .build(std::slice::from_ref(&dpf), &env)
            .unwrap();
        let mut d = LanguageClass::cspf()
            .build(std::slice::from_ref(&cspf), &env)
            .unwrap();
        let mut e = BpfClass.build(&[format!("dpf:{dpf}")], &env).unwrap();
        for x in [&mut c, &mut d, &mut e] {
            assert_eq!(x.run(&p, &m).unwrap(), SNAPLEN);
            assert_eq!(x.run(&q, &m).unwrap(), 0);
            assert_eq!(
                x.run(
                    &Pkt {
                        data: &ip[..13],
                        ..p
                    },
                    &m
                )
                .unwrap(),
                0
            );
            assert!(x.ir(1, false).is_some(), "merges with the others");
        }
        let err = LanguageClass::cspf()
            .check(&["pushword P[6] | frob".into()])
            .unwrap_err();
        assert!(err.message.contains("CSPF"), "{err:?}");
    }
}
