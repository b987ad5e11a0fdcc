//! Filter classes: what an element of a graph does.
//!
//! A [`FilterClass`] checks an element's arguments when a flow is populated
//! ([`FilterClass::check`], which also says how much MBuf it needs and which
//! external functions it calls, for authorisation) and builds a running
//! [`Element`] when the flow is instantiated. A [`SourceClass`] does the
//! same for packet sources. [`Classes`] is the registry; applications may
//! register their own classes next to the built-in ones:
//!
//! | class | arguments | passes | MBuf | result |
//! | --- | --- | --- | --- | --- |
//! | `file` | `PATH` | every packet of a pcap or pcapng file | | packets read |
//! | `replay` | `PATH,RATE[,UNIT][,CLOCK][,PASSES]` | the file again and again at a rate | | packets, passes |
//! | `sampler` | `N[,BYTES]` | the first of every `N` packets | 4 bytes: position in the cycle | seen, passed |
//! | `BPF` | `EXPR` or BPF text (`-d`/`-dd`/`-ddd`; `@FILE` reads a file; `cspf:`/`dpf:` prefixes) | what the filter accepts; result = its return value | | accepted |
//! | `CSPF`, `DPF` | a CSPF program (`;` between instructions) or DPF atoms; `@FILE` | as `BPF` | | accepted |
//! | `packetcount` | `[pass][,BYTES]` | nothing (everything with `pass`) | 8 bytes: the count | count |
//! | `bytecount` | `[pass][,BYTES]` | nothing (everything with `pass`) | 8 bytes: wire bytes | count |
//! | `FPL-2` | `PROGRAM[,BYTES]` (`@FILE` reads a file) | packets the program returns non-zero for; result = that value | the program's `MEM` and registers | runs, passed, memory |
//! | `strsearch` | `PATTERN[,PATTERN…]` | packets containing a pattern; result = 1 + pattern index | 8 bytes per pattern: matches | per-pattern counts |
//! | `hashcount` | `TOPN[,SLOTS][,pass]` | nothing (everything with `pass`) | 64 bytes per slot: key, packets, bytes | top-N flows |
//! | `rtsp` | `[control][,SLOTS]` | RTP/RTCP of ports negotiated by RTSP SETUP (and the RTSP packets with `control`) | 32 bytes per session | sessions |
//!
//! Counters do not pass packets on by default, as in FFPF's example where
//! `(bytecount,,8)` keeps a statistic and hands no packets to the
//! application. See the crate documentation for the details of each class.

use crate::buffer::MBuf;
use crate::value::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// A packet as filters see it.
///
/// ```
/// let p = sluice_flow::class::Pkt { data: &[1, 2], wirelen: 2, linktype: 1, ts_sec: 0, ts_nsec: 0, big_endian: false };
/// assert_eq!(p.data.len(), 2);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Pkt<'a> {
    /// Captured bytes.
    pub data: &'a [u8],
    /// Length on the wire.
    pub wirelen: u32,
    /// Link type (`LINKTYPE_*`).
    pub linktype: u16,
    /// Timestamp seconds.
    pub ts_sec: i64,
    /// Timestamp nanoseconds.
    pub ts_nsec: u32,
    /// Whether the capture was written big-endian (NULL/ENC links).
    pub big_endian: bool,
}

/// An argument problem: which argument (index) and, within it, the
/// character offset, so the flow specification error can give a column.
///
/// ```
/// let e = sluice_flow::class::ArgError::at(0, "not a number");
/// assert_eq!(e.arg, Some(0));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgError {
    /// The argument, or `None` for the element as a whole.
    pub arg: Option<usize>,
    /// Characters into the argument.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl ArgError {
    /// An error about argument `arg`.
    ///
    /// ```
    /// assert_eq!(sluice_flow::class::ArgError::at(2, "x").offset, 0);
    /// ```
    pub fn at(arg: usize, message: impl Into<String>) -> ArgError {
        ArgError {
            arg: Some(arg),
            offset: 0,
            message: message.into(),
        }
    }

    /// An error about the element as a whole.
    ///
    /// ```
    /// assert_eq!(sluice_flow::class::ArgError::element("x").arg, None);
    /// ```
    pub fn element(message: impl Into<String>) -> ArgError {
        ArgError {
            arg: None,
            offset: 0,
            message: message.into(),
        }
    }
}

/// What a class tells about an element before it is built.
///
/// ```
/// let i = sluice_flow::class::ClassInfo::default();
/// assert_eq!(i.mbuf_words, 0);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassInfo {
    /// Words of MBuf the element needs.
    pub mbuf_words: usize,
    /// External functions the element calls (for authorisation).
    pub externs: Vec<String>,
}

/// A running filter instance.
pub trait Element: Send {
    /// Process one packet that reached the element; the classification
    /// result (0: the packet does not go on). `mem` is the element's MBuf;
    /// the group brackets the call with [`MBuf::begin`] / [`MBuf::end`].
    /// An `Err` stops the group's run with the message.
    fn run(&mut self, pkt: &Pkt<'_>, mem: &MBuf) -> Result<u32, String>;

    /// Called at batch boundaries, when the flow is paused and at the end:
    /// elements keeping a private copy of their memory publish it here.
    fn sync(&mut self, _mem: &MBuf) {}

    /// What the element has produced so far (counters, tables).
    fn report(&self, mem: &MBuf) -> Value;

    /// Whether the element takes every packet it is handed, though it
    /// passes none on: a statistic (counters, `hashcount`). A flow ending
    /// in it counts the packets that reach it as its packets.
    fn takes_all(&self) -> bool {
        false
    }

    /// The element as a plain filter over the packet for a link type, if it
    /// is one (then elements attached at the same point are merged into one
    /// classifier).
    fn ir(&mut self, _linktype: u16, _big_endian: bool) -> Option<sluice_ir::Filter> {
        None
    }

    /// Note that the element ran inside a merged classifier and returned
    /// `result` (to keep its own statistics).
    fn merged_result(&mut self, _result: u32) {}
}

/// The text of the files a flow's elements name with `@FILE`, read by the
/// group once the policy allowed them (with
/// [`sluice_filter::read_text_file`]), by the path as written after the `@`.
/// Classes take `@FILE` text from here and never read files themselves.
///
/// ```
/// let mut f = sluice_flow::class::Files::default();
/// f.insert("prog.bpf", "ret #1\n".into());
/// assert_eq!(f.get("prog.bpf"), Some("ret #1\n"));
/// assert!(f.get("other").is_none());
/// ```
#[derive(Clone, Debug, Default)]
pub struct Files {
    texts: HashMap<String, Arc<str>>,
}

impl Files {
    /// Record the text of the file named `path`.
    ///
    /// ```
    /// let mut f = sluice_flow::class::Files::default();
    /// f.insert("a", "x".into());
    /// assert_eq!(f.get("a"), Some("x"));
    /// ```
    pub fn insert(&mut self, path: &str, text: String) {
        self.texts.insert(path.to_string(), text.into());
    }

    /// The text of the file named `path`, if it was read.
    ///
    /// ```
    /// assert!(sluice_flow::class::Files::default().get("a").is_none());
    /// ```
    pub fn get(&self, path: &str) -> Option<&str> {
        self.texts.get(path).map(|t| &**t)
    }

    /// The text of `path` for [`sluice_filter::Spec::parse_with`].
    pub(crate) fn read(&self, path: &std::path::Path) -> std::io::Result<String> {
        path.to_str()
            .and_then(|p| self.get(p))
            .map(str::to_string)
            .ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not read: the flow names it, but it was not authorised and read",
                )
            })
    }
}

/// The link types an element will see (from the sources upstream), to
/// compile for them at instantiation, and the text of the files it names.
///
/// ```
/// let e = sluice_flow::class::BuildEnv { linktypes: vec![(1, false)], ..Default::default() };
/// assert_eq!(e.linktypes.len(), 1);
/// ```
#[derive(Clone, Debug, Default)]
pub struct BuildEnv {
    /// `(link type, capture big-endian)` pairs.
    pub linktypes: Vec<(u16, bool)>,
    /// The `@FILE` texts of the flow being instantiated.
    pub files: Files,
}

/// A kind of filter element.
pub trait FilterClass: Send + Sync {
    /// The canonical name (matched case-insensitively).
    fn name(&self) -> &str;
    /// Other names it answers to.
    fn aliases(&self) -> &[&str] {
        &[]
    }
    /// Check the arguments (at populate). Never reads a file: an argument
    /// naming one (`@FILE`, see [`FilterClass::files`]) is checked by
    /// [`FilterClass::check_loaded`] once the file is authorised and read.
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError>;
    /// The files the arguments name with `@FILE` (the path as written),
    /// which the group authorises (the policy's `read=` rules) and reads
    /// before the element is checked again and built. Default: none.
    fn files(&self, _args: &[String]) -> Vec<String> {
        Vec::new()
    }
    /// Check the arguments with the text of their files (at instantiate,
    /// before anything runs); the external functions it returns are
    /// authorised too. Default: [`FilterClass::check`].
    fn check_loaded(&self, args: &[String], _files: &Files) -> Result<ClassInfo, ArgError> {
        self.check(args)
    }
    /// Build an instance (at instantiate); `@FILE` text is in
    /// [`BuildEnv::files`].
    fn build(&self, args: &[String], env: &BuildEnv) -> Result<Box<dyn Element>, ArgError>;
}

/// A packet read from a source: the runtime's owned packet, with what a
/// flow needs besides.
///
/// ```
/// let p = sluice_flow::class::SourcePacket::default();
/// assert!(p.packet.data.is_empty());
/// ```
#[derive(Clone, Debug, Default)]
pub struct SourcePacket {
    /// The packet.
    pub packet: sluice_capture::OwnedPacket,
    /// Whether the capture was written big-endian.
    pub big_endian: bool,
    /// When a wall-clock source may release the packet.
    pub due: Option<std::time::Instant>,
}

/// A running packet source.
pub trait Source: Send {
    /// Read the next packet into `out`; `Ok(false)` at the end.
    fn next(&mut self, out: &mut SourcePacket) -> Result<bool, String>;
    /// Link types it is known to deliver (from the file header).
    fn linktypes(&self) -> Vec<(u16, bool)>;
    /// What it has done (packets read, passes).
    fn report(&self) -> Value;
}

/// A kind of packet source.
pub trait SourceClass: Send + Sync {
    /// The canonical name.
    fn name(&self) -> &str;
    /// Check the arguments (at populate).
    fn check(&self, args: &[String]) -> Result<(), ArgError>;
    /// The file the source reads, if it reads one (the path as written):
    /// the policy compares it, made canonical, with its `source=` paths,
    /// and [`SourceClass::open`] gets the canonical path in its place.
    /// Default: none (the policy matches the first argument as a name).
    fn file(&self, _args: &[String]) -> Option<String> {
        None
    }
    /// Open the source (at instantiate).
    fn open(&self, args: &[String]) -> Result<Box<dyn Source>, ArgError>;
}

/// The registry of classes a group can instantiate.
///
/// ```
/// let c = sluice_flow::class::Classes::builtin();
/// assert!(c.filter("bpf").is_some());
/// assert!(c.source("file").is_some());
/// assert!(c.filter("nonesuch").is_none());
/// ```
#[derive(Clone)]
pub struct Classes {
    filters: HashMap<String, Arc<dyn FilterClass>>,
    sources: HashMap<String, Arc<dyn SourceClass>>,
}

impl Classes {
    /// No classes at all.
    ///
    /// ```
    /// assert!(sluice_flow::class::Classes::empty().filter("bpf").is_none());
    /// ```
    pub fn empty() -> Classes {
        Classes {
            filters: HashMap::new(),
            sources: HashMap::new(),
        }
    }

    /// Every built-in class.
    ///
    /// ```
    /// let c = sluice_flow::class::Classes::builtin();
    /// assert!(c.filter("strsearch").is_some());
    /// ```
    pub fn builtin() -> Classes {
        let mut c = Classes::empty();
        c.register_source(Arc::new(crate::source::FileClass));
        c.register_source(Arc::new(crate::source::ReplayClass));
        c.register_source(Arc::new(crate::source::DeviceClass::new("iface")));
        c.register_source(Arc::new(crate::source::DeviceClass::new("device")));
        c.register_filter(Arc::new(SamplerClass));
        c.register_filter(Arc::new(CountClass { bytes: false }));
        c.register_filter(Arc::new(CountClass { bytes: true }));
        c.register_filter(Arc::new(StrSearchClass));
        c.register_filter(Arc::new(crate::bpf::BpfClass));
        c.register_filter(Arc::new(crate::bpf::LanguageClass::cspf()));
        c.register_filter(Arc::new(crate::bpf::LanguageClass::dpf()));
        c.register_filter(Arc::new(crate::stats::HashCountClass));
        c.register_filter(Arc::new(crate::stats::RtspClass));
        c.register_filter(Arc::new(crate::fpl::FplClass::new()));
        c
    }

    /// Add (or replace) a filter class, under its name and aliases.
    ///
    /// ```
    /// let mut c = sluice_flow::class::Classes::empty();
    /// c.register_filter(std::sync::Arc::new(sluice_flow::class::SamplerClass));
    /// assert!(c.filter("SAMPLER").is_some());
    /// ```
    pub fn register_filter(&mut self, class: Arc<dyn FilterClass>) {
        for a in class.aliases() {
            self.filters.insert(a.to_ascii_lowercase(), class.clone());
        }
        self.filters
            .insert(class.name().to_ascii_lowercase(), class.clone());
    }

    /// Add (or replace) a source class.
    ///
    /// ```
    /// let mut c = sluice_flow::class::Classes::empty();
    /// c.register_source(std::sync::Arc::new(sluice_flow::source::FileClass));
    /// assert!(c.source("file").is_some());
    /// ```
    pub fn register_source(&mut self, class: Arc<dyn SourceClass>) {
        self.sources
            .insert(class.name().to_ascii_lowercase(), class);
    }

    /// The filter class called `name` (any case).
    ///
    /// ```
    /// assert_eq!(sluice_flow::class::Classes::builtin().filter("Sampler").unwrap().name(), "sampler");
    /// ```
    pub fn filter(&self, name: &str) -> Option<&Arc<dyn FilterClass>> {
        self.filters.get(&name.to_ascii_lowercase())
    }

    /// The source class called `name` (any case).
    ///
    /// ```
    /// assert!(sluice_flow::class::Classes::builtin().source("replay").is_some());
    /// ```
    pub fn source(&self, name: &str) -> Option<&Arc<dyn SourceClass>> {
        self.sources.get(&name.to_ascii_lowercase())
    }

    /// Every class name, sources first, sorted.
    ///
    /// ```
    /// assert!(sluice_flow::class::Classes::builtin().names().contains(&"bytecount".to_string()));
    /// ```
    pub fn names(&self) -> Vec<String> {
        let mut s: Vec<String> = self
            .sources
            .values()
            .map(|c| c.name().to_string())
            .collect();
        s.sort();
        s.dedup();
        let mut f: Vec<String> = self
            .filters
            .values()
            .map(|c| c.name().to_string())
            .collect();
        f.sort();
        f.dedup();
        s.extend(f);
        s
    }
}

/// Parse a count argument (decimal).
pub(crate) fn number(args: &[String], i: usize, what: &str) -> Result<u64, ArgError> {
    let a = args
        .get(i)
        .ok_or_else(|| ArgError::element(format!("missing argument {}: {what}", i + 1)))?;
    a.parse::<u64>()
        .map_err(|_| ArgError::at(i, format!("{what}: expected a number, found {a:?}")))
}

/// The optional MBuf size argument in bytes: at least `need`, rounded up to
/// whole words.
pub(crate) fn mbuf_bytes(args: &[String], i: usize, need: usize) -> Result<usize, ArgError> {
    match args.get(i).map(|s| s.as_str()) {
        None | Some("") => Ok(need.div_ceil(4)),
        Some(a) => {
            let n: usize = a.parse().map_err(|_| {
                ArgError::at(
                    i,
                    format!("MBuf size: expected a number of bytes, found {a:?}"),
                )
            })?;
            if n < need {
                return Err(ArgError::at(
                    i,
                    format!("MBuf of {n} bytes is too small: this element needs at least {need}"),
                ));
            }
            if n > 64 << 20 {
                return Err(ArgError::at(
                    i,
                    format!("MBuf of {n} bytes is larger than 64 MiB"),
                ));
            }
            Ok(n.div_ceil(4))
        }
    }
}

pub(crate) fn at_most(args: &[String], n: usize, usage: &str) -> Result<(), ArgError> {
    if args.len() > n {
        return Err(ArgError::at(
            n,
            format!("too many arguments; usage: {usage}"),
        ));
    }
    Ok(())
}

/// `(sampler,N[,BYTES])`: passes the first of every `N` packets; its
/// position in the cycle is word 0 of its MBuf (so the application can
/// reset or shift it).
///
/// ```
/// use sluice_flow::class::{FilterClass, SamplerClass};
/// let info = SamplerClass.check(&["2".into(), "4".into()]).unwrap();
/// assert_eq!(info.mbuf_words, 1);
/// assert!(SamplerClass.check(&["0".into()]).is_err());
/// ```
pub struct SamplerClass;

struct Sampler {
    every: u32,
    seen: u64,
    passed: u64,
}

impl FilterClass for SamplerClass {
    fn name(&self) -> &str {
        "sampler"
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        at_most(args, 2, "(sampler,N[,MBUF_BYTES])")?;
        let n = number(args, 0, "one packet in N")?;
        if n == 0 || n > u32::MAX as u64 {
            return Err(ArgError::at(0, "N must be between 1 and 4294967295"));
        }
        Ok(ClassInfo {
            mbuf_words: mbuf_bytes(args, 1, 4)?,
            externs: vec![],
        })
    }
    fn build(&self, args: &[String], _: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        self.check(args)?;
        Ok(Box::new(Sampler {
            every: number(args, 0, "N")? as u32,
            seen: 0,
            passed: 0,
        }))
    }
}

impl Element for Sampler {
    fn run(&mut self, _: &Pkt<'_>, mem: &MBuf) -> Result<u32, String> {
        let c = mem.get(0) % self.every;
        mem.set(0, (c + 1) % self.every);
        self.seen += 1;
        if c == 0 {
            self.passed += 1;
            Ok(1)
        } else {
            Ok(0)
        }
    }
    fn report(&self, _: &MBuf) -> Value {
        Value::map([
            ("every", Value::U64(self.every as u64)),
            ("seen", Value::U64(self.seen)),
            ("passed", Value::U64(self.passed)),
        ])
    }
}

/// `(packetcount[,pass][,BYTES])` and `(bytecount[,pass][,BYTES])`: a
/// 64-bit counter of packets or wire bytes in MBuf words 0 (low) and 1
/// (high). They pass nothing on unless the first argument is `pass`.
///
/// ```
/// use sluice_flow::class::{FilterClass, CountClass};
/// let c = CountClass { bytes: true };
/// assert_eq!(c.name(), "bytecount");
/// assert_eq!(c.check(&["".into(), "8".into()]).unwrap().mbuf_words, 2);
/// assert!(c.check(&["".into(), "4".into()]).is_err());
/// ```
pub struct CountClass {
    /// Count bytes (wire length) rather than packets.
    pub bytes: bool,
}

struct Count {
    bytes: bool,
    pass: bool,
}

fn pass_flag(args: &[String], i: usize) -> Result<bool, ArgError> {
    match args.get(i).map(|s| s.to_ascii_lowercase()).as_deref() {
        None | Some("") => Ok(false),
        Some("pass") => Ok(true),
        Some(other) => Err(ArgError::at(
            i,
            format!("expected nothing or 'pass', found {other:?}"),
        )),
    }
}

impl FilterClass for CountClass {
    fn name(&self) -> &str {
        if self.bytes {
            "bytecount"
        } else {
            "packetcount"
        }
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        at_most(args, 2, &format!("({}[,pass][,MBUF_BYTES])", self.name()))?;
        pass_flag(args, 0)?;
        Ok(ClassInfo {
            mbuf_words: mbuf_bytes(args, 1, 8)?,
            externs: vec![],
        })
    }
    fn build(&self, args: &[String], _: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        self.check(args)?;
        Ok(Box::new(Count {
            bytes: self.bytes,
            pass: pass_flag(args, 0)?,
        }))
    }
}

impl Element for Count {
    #[inline]
    fn run(&mut self, pkt: &Pkt<'_>, mem: &MBuf) -> Result<u32, String> {
        mem.add_u64(0, if self.bytes { pkt.wirelen as u64 } else { 1 });
        Ok(self.pass as u32)
    }
    fn report(&self, mem: &MBuf) -> Value {
        Value::U64(mem.load_u64(0))
    }
    fn takes_all(&self) -> bool {
        true
    }
}

/// `(strsearch,PATTERN[,PATTERN…])`: passes packets whose captured bytes
/// contain one of the patterns; the result is 1 + the index of the
/// leftmost match's pattern. One pattern is searched with
/// `memchr::memmem` (a two-way/SIMD substring search), several at once with
/// an Aho-Corasick automaton (`aho-corasick`). In patterns, `\xNN` is a
/// byte in hex, `\n`, `\r`, `\t`, `\0` the usual characters (write a
/// backslash as `\x5c`). The MBuf holds one 64-bit count per pattern (the
/// packets whose leftmost match is that pattern).
///
/// ```
/// use sluice_flow::class::{FilterClass, StrSearchClass};
/// assert_eq!(StrSearchClass.check(&["GET".into(), "POST".into()]).unwrap().mbuf_words, 4);
/// assert!(StrSearchClass.check(&[r"\xZZ".into()]).is_err());
/// ```
pub struct StrSearchClass;

enum Matcher {
    One(Box<memchr::memmem::Finder<'static>>),
    Many(aho_corasick::AhoCorasick),
}

struct StrSearch {
    matcher: Matcher,
    patterns: Vec<Vec<u8>>,
}

/// Decode a pattern's escapes; errors carry the character offset.
pub(crate) fn unescape(s: &str) -> Result<Vec<u8>, (usize, String)> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            i += 1;
            continue;
        }
        match chars.get(i + 1) {
            Some('n') => out.push(b'\n'),
            Some('r') => out.push(b'\r'),
            Some('t') => out.push(b'\t'),
            Some('0') => out.push(0),
            Some('x') => {
                let hex: String = chars.iter().skip(i + 2).take(2).collect();
                let v = (hex.len() == 2)
                    .then(|| u8::from_str_radix(&hex, 16).ok())
                    .flatten()
                    .ok_or((i, format!("\\x needs two hex digits, found {hex:?}")))?;
                out.push(v);
                i += 2;
            }
            Some(c) => {
                return Err((
                    i,
                    format!("unknown escape \\{c} (use \\x5c for a backslash)"),
                ))
            }
            None => return Err((i, "a pattern cannot end with a lone backslash".to_string())),
        }
        i += 2;
    }
    Ok(out)
}

impl StrSearchClass {
    fn patterns(args: &[String]) -> Result<Vec<Vec<u8>>, ArgError> {
        if args.is_empty() {
            return Err(ArgError::element(
                "strsearch needs at least one pattern: (strsearch,PATTERN[,PATTERN...])",
            ));
        }
        args.iter()
            .enumerate()
            .map(|(i, a)| {
                let p = unescape(a).map_err(|(off, m)| ArgError {
                    arg: Some(i),
                    offset: off,
                    message: m,
                })?;
                if p.is_empty() {
                    return Err(ArgError::at(i, "empty pattern"));
                }
                Ok(p)
            })
            .collect()
    }
}

impl FilterClass for StrSearchClass {
    fn name(&self) -> &str {
        "strsearch"
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        let p = Self::patterns(args)?;
        Ok(ClassInfo {
            mbuf_words: 2 * p.len(),
            externs: vec![],
        })
    }
    fn build(&self, args: &[String], _: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        let patterns = Self::patterns(args)?;
        let matcher = if patterns.len() == 1 {
            Matcher::One(Box::new(
                memchr::memmem::Finder::new(&patterns[0]).into_owned(),
            ))
        } else {
            Matcher::Many(
                aho_corasick::AhoCorasick::builder()
                    .match_kind(aho_corasick::MatchKind::LeftmostFirst)
                    .build(&patterns)
                    .map_err(|e| ArgError::element(format!("patterns: {e}")))?,
            )
        };
        Ok(Box::new(StrSearch { matcher, patterns }))
    }
}

impl Element for StrSearch {
    fn run(&mut self, pkt: &Pkt<'_>, mem: &MBuf) -> Result<u32, String> {
        let hit = match &self.matcher {
            Matcher::One(f) => f.find(pkt.data).map(|_| 0),
            Matcher::Many(ac) => ac.find(pkt.data).map(|m| m.pattern().as_usize()),
        };
        Ok(match hit {
            Some(i) => {
                mem.add_u64(2 * i, 1);
                i as u32 + 1
            }
            None => 0,
        })
    }
    fn report(&self, mem: &MBuf) -> Value {
        Value::List(
            self.patterns
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    Value::map([
                        (
                            "pattern",
                            Value::Str(String::from_utf8_lossy(p).into_owned()),
                        ),
                        ("packets", Value::U64(mem.load_u64(2 * i))),
                    ])
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(data: &[u8]) -> Pkt<'_> {
        Pkt {
            data,
            wirelen: data.len() as u32 + 10,
            linktype: 1,
            ts_sec: 0,
            ts_nsec: 0,
            big_endian: false,
        }
    }

    fn build(class: &dyn FilterClass, args: &[&str]) -> (Box<dyn Element>, MBuf) {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let info = class.check(&args).unwrap();
        (
            class.build(&args, &BuildEnv::default()).unwrap(),
            MBuf::new(info.mbuf_words),
        )
    }

    #[test]
    fn sampler_passes_one_in_n_and_keeps_state_in_mbuf() {
        let (mut s, m) = build(&SamplerClass, &["3", "4"]);
        let got: Vec<u32> = (0..7).map(|_| s.run(&pkt(b""), &m).unwrap()).collect();
        assert_eq!(got, [1, 0, 0, 1, 0, 0, 1]);
        // The application moves the cycle.
        m.store(0, 0).unwrap();
        assert_eq!(s.run(&pkt(b""), &m).unwrap(), 1);
    }

    #[test]
    fn counters_count_and_pass_only_when_asked() {
        let (mut b, m) = build(&CountClass { bytes: true }, &["", "8"]);
        assert_eq!(b.run(&pkt(b"abc"), &m).unwrap(), 0);
        assert_eq!(b.run(&pkt(b"abcd"), &m).unwrap(), 0);
        assert_eq!(b.report(&m), Value::U64(13 + 14));
        let (mut p, m) = build(&CountClass { bytes: false }, &["pass"]);
        assert_eq!(p.run(&pkt(b"x"), &m).unwrap(), 1);
        assert_eq!(p.report(&m), Value::U64(1));
        assert!(CountClass { bytes: false }.check(&["fast".into()]).is_err());
    }

    #[test]
    fn strsearch_one_and_many() {
        let (mut one, m) = build(&StrSearchClass, &["GET"]);
        assert_eq!(one.run(&pkt(b"xxGETyy"), &m).unwrap(), 1);
        assert_eq!(one.run(&pkt(b"xxGEyy"), &m).unwrap(), 0);
        let (mut many, m) = build(&StrSearchClass, &["POST", "GET", r"\x00\xff"]);
        assert_eq!(many.run(&pkt(b"a GET b POST"), &m).unwrap(), 2);
        assert_eq!(many.run(&pkt(b"\x00\xff"), &m).unwrap(), 3);
        assert_eq!(many.run(&pkt(b"nothing"), &m).unwrap(), 0);
        assert_eq!(m.load_u64(2), 1);
        assert_eq!(m.load_u64(4), 1);
    }

    #[test]
    fn unescape_errors_point_inside() {
        assert_eq!(unescape(r"ab\q").unwrap_err().0, 2);
        assert_eq!(unescape(r"\x4").unwrap_err().0, 0);
        assert_eq!(unescape(r"\x41\n").unwrap(), b"A\n");
    }
}
