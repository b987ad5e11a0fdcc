//! Authorisation (FFPF §3.4): a policy file checked against a whole flow
//! definition when the flow is instantiated, before any element opens or
//! reads anything.
//!
//! # Format
//!
//! One rule per line; `#` starts a comment; words are separated by spaces.
//!
//! ```text
//! # who may use what: the first allow/deny rule that matches decides
//! allow uid=1000,1001 source=file,replay class=bpf,sampler,packetcount,bytecount
//! deny  source=file:/data/private
//! allow gid=100 source=file:/data/ class=*
//! allow uid=1000 source=iface:eth1
//! deny  uid=* class=strsearch
//! allow extern=GetDynTCPDPortFromRTSP uid=1000
//! # programs read with @FILE: only those under /srv/filters
//! allow read=/srv/filters
//!
//! # ordering: every path to a strsearch element passes a sampler first
//! require sampler before strsearch
//! # every path from an rtsp element goes on through a packetcount
//! require packetcount after rtsp uid=1000
//!
//! # callbacks at most once every 1000 packets, unless the flow samples
//! callback every>=1000 unless sampler
//! callback every<=100000
//! ```
//!
//! * `allow` / `deny` rules name users with `uid=` and `gid=` (numbers,
//!   comma-separated, `*` for anyone; a rule with neither applies to
//!   everyone; `gid` matches the primary and the supplementary groups) and
//!   items with `source=`, `class=`, `extern=` and `read=`. Every source,
//!   filter class, external function and `@FILE` of the flow is looked up
//!   in the rules in file order; the first rule that names the user and
//!   the item decides; an item no rule names is refused.
//! * `class=` lists class names (case-insensitive) or `*`.
//! * `source=` lists source classes (`file`, `replay`, `iface`, or `*`),
//!   each optionally with a target after a colon. For a source that reads
//!   a file (`file`, `replay`) the target is a path: the rule covers that
//!   file or directory and everything under it. Paths are compared as the
//!   kernel resolves them: both the rule's path and the flow's are made
//!   canonical (absolute, symlinks, `.`, `..` and `//` resolved) and
//!   compared component by component, case and all, so
//!   `examples/../../tmp/x.pcap`, `/data/./private/x`, `/data//private/x`
//!   or a symlink into `/data/private` all meet a rule on `/data/private`.
//!   A relative path in a rule is taken from the directory sluice runs
//!   in. For other sources (`iface:eth0`) the target is the name, matched
//!   exactly.
//! * `read=` lists paths (or `*`) for the files elements read with `@FILE`
//!   (`(BPF,@prog.bpf)`, `(FPL-2,@count.fpl)`, `(BPF,"cspf:@p.cspf")`),
//!   compared like source paths. A flow naming a file no `read=` rule
//!   allows is refused before the file is opened.
//! * `extern=` lists FPL-2 external functions (case matters) or `*`. They
//!   are checked once the flow's `@FILE` programs are read (the program
//!   says which it calls) and before anything runs.
//! * `require A before B` refuses a flow in which some path from a source
//!   reaches a `B` element without passing an `A` element first (in the
//!   staged notation: some earlier stage must consist of `A` elements
//!   only); `require A after B` likewise for the stages after `B`.
//! * `callback every>=N` refuses flows asking for callbacks more often than
//!   every `N` packets, `callback every<=N` less often; `unless C` exempts
//!   flows in which every path passes a `C` element.
//! * `require` and `callback` rules may name users as well (`uid=`,
//!   `gid=`); then they apply to those users only.
//!
//! Paths and names in rules cannot contain `,`, `#` or blanks. Refusals
//! name the rule as `FILE:LINE`. No policy at all ([`Policy::allow_all`])
//! allows everything for the user running sluice. [`Policy::load`] reads
//! at most 32 MiB and warns ([`Policy::warnings`]) when someone other than
//! root or its owner could change the file.
//!
//! ```
//! use sluice_flow::policy::{Policy, Credentials, FlowShape, ElemShape};
//! let p = Policy::parse("allow uid=1000 source=file class=bpf,sampler\nrequire sampler before bpf\n", "pol").unwrap();
//! let shape = |classes: &[&str]| FlowShape {
//!     stages: classes.iter().enumerate().map(|(i, c)| vec![ElemShape::new(c, i == 0, &["x"])]).collect(),
//!     callback_every: None,
//! };
//! let me = Credentials { uid: 1000, gids: vec![1000] };
//! assert!(p.check(&shape(&["file", "sampler", "bpf"]), &me).is_ok());
//! let e = p.check(&shape(&["file", "bpf"]), &me).unwrap_err();
//! assert_eq!(e.rule.as_deref(), Some("pol:2"));
//! let e = p.check(&shape(&["file", "sampler"]), &Credentials { uid: 7, gids: vec![] }).unwrap_err();
//! assert!(e.to_string().contains("no rule allows source file"));
//! ```

use std::fmt;
use std::path::{Component, Path, PathBuf};

/// Who is asking.
///
/// ```
/// let c = sluice_flow::policy::Credentials::current();
/// assert!(!c.gids.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Credentials {
    /// User id.
    pub uid: u32,
    /// Primary group first, then supplementary groups.
    pub gids: Vec<u32>,
}

impl Credentials {
    /// The user running this process (`getuid`, `getgid`, `getgroups`).
    ///
    /// ```
    /// let c = sluice_flow::policy::Credentials::current();
    /// assert_eq!(c.uid, sluice_flow::policy::Credentials::current().uid);
    /// ```
    pub fn current() -> Credentials {
        // SAFETY: getuid and getgid take no arguments, cannot fail and
        // touch no memory of ours.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        let mut gids = vec![gid];
        let mut buf = vec![0 as libc::gid_t; 256];
        // SAFETY: `buf` has room for `buf.len()` group ids, and getgroups
        // writes at most that many (it fails with EINVAL otherwise).
        let n = unsafe { libc::getgroups(buf.len() as libc::c_int, buf.as_mut_ptr()) };
        if n > 0 {
            for g in &buf[..n as usize] {
                if !gids.contains(g) {
                    gids.push(*g);
                }
            }
        }
        Credentials { uid, gids }
    }
}

/// One element of a flow definition, as authorisation sees it.
///
/// ```
/// let e = sluice_flow::policy::ElemShape { class: "bpf".into(), source: false, args: vec![], externs: vec![], file: None, reads: vec![] };
/// assert!(!e.source);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElemShape {
    /// Canonical class name, lower case.
    pub class: String,
    /// Whether it is a packet source.
    pub source: bool,
    /// Its arguments as written (a source's first argument names what it
    /// reads).
    pub args: Vec<String>,
    /// External functions it calls.
    pub externs: Vec<String>,
    /// For a source that reads a file: that file, canonical (see
    /// [`canonical`]).
    pub file: Option<PathBuf>,
    /// The files it reads with `@FILE`, canonical.
    pub reads: Vec<PathBuf>,
}

impl ElemShape {
    /// An element with no file, no `@FILE` and no external function.
    ///
    /// ```
    /// let e = sluice_flow::policy::ElemShape::new("BPF", false, &["tcp"]);
    /// assert_eq!((e.class.as_str(), e.args.len()), ("bpf", 1));
    /// ```
    pub fn new(class: &str, source: bool, args: &[&str]) -> ElemShape {
        ElemShape {
            class: class.to_ascii_lowercase(),
            source,
            args: args.iter().map(|a| a.to_string()).collect(),
            externs: Vec::new(),
            file: None,
            reads: Vec::new(),
        }
    }
}

/// A path as the kernel resolves it: absolute (a relative path is taken
/// from the current directory), every symlink followed, `.`, `..` and
/// repeated `/` resolved. The path must exist (else the error of
/// `realpath`).
///
/// ```
/// use std::path::Path;
/// let p = sluice_flow::policy::canonical(Path::new("/usr/./bin//../bin")).unwrap();
/// assert_eq!(p, std::fs::canonicalize("/usr/bin").unwrap());
/// assert!(sluice_flow::policy::canonical(Path::new("/nonexistent/x")).is_err());
/// ```
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    std::fs::canonicalize(path)
}

/// A rule's path made canonical as far as it exists: the longest existing
/// ancestor resolved by the kernel, the rest resolved by name (`.`, `..`,
/// repeated `/`). A rule may name a directory that does not exist yet.
///
/// ```
/// use std::path::Path;
/// let p = sluice_flow::policy::rule_path(Path::new("/nonexistent/./a//b/../c"));
/// assert_eq!(p, Path::new("/nonexistent/a/c"));
/// ```
pub fn rule_path(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    // Resolve names lexically first, then let the kernel resolve the
    // longest prefix that exists (symlinks in it included).
    let mut lexical = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                lexical.pop();
            }
            Component::Normal(n) => lexical.push(n),
            _ => {}
        }
    }
    if let Ok(p) = std::fs::canonicalize(&abs) {
        return p;
    }
    let mut head = lexical.clone();
    let mut tail = Vec::new();
    loop {
        if let Ok(p) = std::fs::canonicalize(&head) {
            let mut out = p;
            for t in tail.iter().rev() {
                out.push(t);
            }
            return out;
        }
        match (head.file_name().map(|n| n.to_os_string()), head.parent()) {
            (Some(n), Some(parent)) => {
                tail.push(n);
                head = parent.to_path_buf();
            }
            _ => return lexical,
        }
    }
}

/// A whole flow definition: stages of parallel elements, and the callback
/// interval it asks for.
///
/// ```
/// let s = sluice_flow::policy::FlowShape { stages: vec![], callback_every: Some(10) };
/// assert_eq!(s.callback_every, Some(10));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowShape {
    /// Stages in order.
    pub stages: Vec<Vec<ElemShape>>,
    /// Packets per callback, if the flow has one.
    pub callback_every: Option<u64>,
}

/// A malformed policy line.
///
/// ```
/// let e = sluice_flow::policy::Policy::parse("permit all", "p.txt").unwrap_err();
/// assert_eq!(e.to_string(), "p.txt:1: unknown rule \"permit\" (allow, deny, require, callback)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct PolicyError {
    /// The policy's name (its file).
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

/// A refused flow: the rule (`FILE:LINE`, or `None` when no rule allowed an
/// item) and why.
///
/// ```
/// let r = sluice_flow::policy::Refusal { rule: Some("p:3".into()), message: "no".into() };
/// assert_eq!(r.to_string(), "refused by p:3: no");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct Refusal {
    /// The rule that refused, as `FILE:LINE`.
    pub rule: Option<String>,
    /// Why.
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.rule {
            Some(r) => write!(f, "refused by {r}: {}", self.message),
            None => write!(f, "refused: {}", self.message),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Ids {
    Any,
    Some(Vec<u32>),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Who {
    uid: Option<Ids>,
    gid: Option<Ids>,
}

impl Who {
    fn matches(&self, c: &Credentials) -> bool {
        let m = |ids: &Option<Ids>, vals: &[u32]| match ids {
            None => None,
            Some(Ids::Any) => Some(true),
            Some(Ids::Some(l)) => Some(vals.iter().any(|v| l.contains(v))),
        };
        match (m(&self.uid, &[c.uid]), m(&self.gid, &c.gids)) {
            (None, None) => true,
            (a, b) => a == Some(true) || b == Some(true),
        }
    }
}

/// A `source=` item: a class (or `*`) and what it may read.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SourceItem {
    /// Lower case, or `*`.
    class: String,
    /// The target as written (a name, for sources that read no file).
    name: Option<String>,
    /// The target as a canonical path prefix (for sources reading files).
    path: Option<PathBuf>,
}

impl SourceItem {
    fn parse(item: &str) -> SourceItem {
        match item.split_once(':').filter(|(_, t)| !t.is_empty()) {
            Some((c, t)) => SourceItem {
                class: c.to_ascii_lowercase(),
                name: Some(t.to_string()),
                path: Some(rule_path(Path::new(t))),
            },
            None => SourceItem {
                class: item.trim_end_matches(':').to_ascii_lowercase(),
                name: None,
                path: None,
            },
        }
    }

    fn matches(&self, e: &ElemShape) -> bool {
        if self.class != "*" && self.class != e.class {
            return false;
        }
        match (&self.name, &self.path, &e.file) {
            (None, _, _) => true,
            (_, Some(prefix), Some(file)) => file.starts_with(prefix),
            (Some(name), _, None) => e.args.first() == Some(name),
            _ => false,
        }
    }
}

/// A `read=` item: `*` or a canonical path prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ReadItem {
    Any,
    Under(PathBuf),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Rule {
    Access {
        allow: bool,
        who: Who,
        sources: Option<Vec<SourceItem>>,
        classes: Option<Vec<String>>,
        externs: Option<Vec<String>>,
        reads: Option<Vec<ReadItem>>,
    },
    Order {
        who: Who,
        first: String,
        then: String,
        before: bool,
    },
    Callback {
        who: Who,
        at_least: bool,
        n: u64,
        unless: Option<String>,
    },
}

/// A parsed policy.
///
/// ```
/// let p = sluice_flow::policy::Policy::allow_all();
/// assert!(p.is_allow_all());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Policy {
    file: String,
    rules: Vec<(usize, Rule)>,
    allow_all: bool,
    warnings: Vec<String>,
}

/// Comma-separated items as written (no case folding: paths and
/// external functions keep theirs).
fn items(v: &str) -> Vec<&str> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// Class names, lower case.
fn class_list(v: &str) -> Vec<String> {
    items(v).iter().map(|s| s.to_ascii_lowercase()).collect()
}

/// Why someone other than root and the file's owner could change a policy
/// file, if they could: the file or its directory writable by its group or
/// by others (a directory with the sticky bit lets others add files, not
/// replace this one).
fn writable_by_others(path: &str) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    if m.mode() & 0o022 != 0 {
        return Some(format!(
            "policy file {path} is writable by {} (mode {:04o})",
            if m.mode() & 0o002 != 0 {
                "everyone"
            } else {
                "its group"
            },
            m.mode() & 0o7777
        ));
    }
    // SAFETY: geteuid takes no arguments and cannot fail.
    let me = unsafe { libc::geteuid() };
    if m.uid() != 0 && m.uid() != me {
        return Some(format!(
            "policy file {path} belongs to uid {}, neither root nor the user checking it",
            m.uid()
        ));
    }
    let dir = Path::new(path).canonicalize().ok()?.parent()?.to_path_buf();
    let d = std::fs::metadata(&dir).ok()?;
    if d.mode() & 0o022 != 0 && d.mode() & 0o1000 == 0 {
        return Some(format!(
            "the directory of policy file {path} ({}) is writable by others (mode {:04o}): they can replace the file",
            dir.display(),
            d.mode() & 0o7777
        ));
    }
    None
}

fn ids(v: &str) -> Result<Ids, String> {
    if v == "*" {
        return Ok(Ids::Any);
    }
    v.split(',')
        .map(|s| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("expected numeric ids or '*', found {s:?}"))
        })
        .collect::<Result<_, _>>()
        .map(Ids::Some)
}

impl Policy {
    /// The policy when there is no policy file: everything is allowed.
    ///
    /// ```
    /// use sluice_flow::policy::*;
    /// let shape = FlowShape { stages: vec![], callback_every: Some(1) };
    /// assert!(Policy::allow_all().check(&shape, &Credentials::current()).is_ok());
    /// ```
    pub fn allow_all() -> Policy {
        Policy {
            file: String::new(),
            rules: Vec::new(),
            allow_all: true,
            warnings: Vec::new(),
        }
    }

    /// Whether this is [`Policy::allow_all`].
    ///
    /// ```
    /// assert!(!sluice_flow::policy::Policy::parse("", "p").unwrap().is_allow_all());
    /// ```
    pub fn is_allow_all(&self) -> bool {
        self.allow_all
    }

    /// Read a policy file (at most 32 MiB,
    /// [`sluice_filter::read_text_file`]) and note in
    /// [`Policy::warnings`] whether others could change it.
    ///
    /// ```
    /// assert!(sluice_flow::policy::Policy::load("/nonexistent/policy").is_err());
    /// assert!(sluice_flow::policy::Policy::load("/dev/zero").unwrap_err().to_string().contains("32 MiB"));
    /// ```
    pub fn load(path: &str) -> Result<Policy, PolicyError> {
        let text = sluice_filter::read_text_file(Path::new(path)).map_err(|e| PolicyError {
            file: path.to_string(),
            line: 0,
            message: e.to_string(),
        })?;
        let mut p = Policy::parse(&text, path)?;
        p.warnings.extend(writable_by_others(path));
        Ok(p)
    }

    /// What [`Policy::load`] found worth a warning: a policy file that
    /// someone other than root and its owner could change. Front ends
    /// print these.
    ///
    /// ```
    /// assert!(sluice_flow::policy::Policy::allow_all().warnings().is_empty());
    /// ```
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Parse policy text; `file` names it in errors and refusals.
    ///
    /// ```
    /// let e = sluice_flow::policy::Policy::parse("allow\nrequire a b c\n", "p").unwrap_err();
    /// assert_eq!(e.line, 1);
    /// ```
    pub fn parse(text: &str, file: &str) -> Result<Policy, PolicyError> {
        let mut rules = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let err = |message: String| PolicyError {
                file: file.to_string(),
                line,
                message,
            };
            let words: Vec<&str> = raw
                .split('#')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            let Some(&kw) = words.first() else { continue };
            let mut who = Who::default();
            let mut rest = Vec::new();
            for w in &words[1..] {
                if let Some(v) = w.strip_prefix("uid=") {
                    who.uid = Some(ids(v).map_err(err)?);
                } else if let Some(v) = w.strip_prefix("gid=") {
                    who.gid = Some(ids(v).map_err(err)?);
                } else {
                    rest.push(*w);
                }
            }
            let rule = match kw {
                "allow" | "deny" => {
                    let (mut sources, mut classes, mut externs, mut reads) =
                        (None, None, None, None);
                    for w in &rest {
                        if let Some(v) = w.strip_prefix("source=") {
                            sources = Some(items(v).into_iter().map(SourceItem::parse).collect());
                        } else if let Some(v) = w.strip_prefix("class=") {
                            classes = Some(class_list(v));
                        } else if let Some(v) = w.strip_prefix("extern=") {
                            externs = Some(items(v).into_iter().map(str::to_string).collect());
                        } else if let Some(v) = w.strip_prefix("read=") {
                            reads = Some(
                                items(v)
                                    .into_iter()
                                    .map(|p| match p {
                                        "*" => ReadItem::Any,
                                        p => ReadItem::Under(rule_path(Path::new(p))),
                                    })
                                    .collect(),
                            );
                        } else {
                            return Err(err(format!(
                                "unknown word {w:?} (uid=, gid=, source=, class=, extern=, read=)"
                            )));
                        }
                    }
                    if sources.is_none()
                        && classes.is_none()
                        && externs.is_none()
                        && reads.is_none()
                    {
                        return Err(err(format!(
                            "{kw} needs at least one of source=, class=, extern=, read="
                        )));
                    }
                    Rule::Access {
                        allow: kw == "allow",
                        who,
                        sources,
                        classes,
                        externs,
                        reads,
                    }
                }
                "require" => match rest.as_slice() {
                    [a, rel @ ("before" | "after"), b] => Rule::Order {
                        who,
                        first: a.to_ascii_lowercase(),
                        then: b.to_ascii_lowercase(),
                        before: *rel == "before",
                    },
                    _ => {
                        return Err(err(
                            "expected: require CLASS before|after CLASS [uid=..] [gid=..]".into(),
                        ))
                    }
                },
                "callback" => {
                    let (cond, unless) = match rest.as_slice() {
                        [c] => (*c, None),
                        [c, "unless", u] => (*c, Some(u.to_ascii_lowercase())),
                        _ => {
                            return Err(err(
                                "expected: callback every>=N|every<=N [unless CLASS]".into()
                            ))
                        }
                    };
                    let (at_least, n) = if let Some(n) = cond.strip_prefix("every>=") {
                        (true, n)
                    } else if let Some(n) = cond.strip_prefix("every<=") {
                        (false, n)
                    } else {
                        return Err(err(format!(
                            "expected every>=N or every<=N, found {cond:?}"
                        )));
                    };
                    let n = n
                        .parse()
                        .map_err(|_| err(format!("expected a number of packets, found {n:?}")))?;
                    Rule::Callback {
                        who,
                        at_least,
                        n,
                        unless,
                    }
                }
                other => {
                    return Err(err(format!(
                        "unknown rule {other:?} (allow, deny, require, callback)"
                    )))
                }
            };
            rules.push((line, rule));
        }
        Ok(Policy {
            file: file.to_string(),
            rules,
            allow_all: false,
            warnings: Vec::new(),
        })
    }

    fn at(&self, line: usize) -> Option<String> {
        Some(format!("{}:{line}", self.file))
    }

    fn decide(
        &self,
        cred: &Credentials,
        kind: &str,
        pick: impl Fn(&Rule) -> Option<bool>,
        what: &str,
    ) -> Result<(), Refusal> {
        for (line, r) in &self.rules {
            if let Rule::Access { allow, who, .. } = r {
                if who.matches(cred) && pick(r) == Some(true) {
                    return if *allow {
                        Ok(())
                    } else {
                        Err(Refusal {
                            rule: self.at(*line),
                            message: format!("{kind} {what} is denied to uid {}", cred.uid),
                        })
                    };
                }
            }
        }
        Err(Refusal {
            rule: None,
            message: format!(
                "{}: no rule allows {kind} {what} for uid {} (gids {:?})",
                self.file, cred.uid, cred.gids
            ),
        })
    }

    /// Check a flow definition for a user: `Ok` or the refusal naming the
    /// rule.
    ///
    /// ```
    /// use sluice_flow::policy::*;
    /// let p = Policy::parse("allow class=* source=*\ncallback every>=1000 unless sampler\n", "p").unwrap();
    /// let e = |c: &str| ElemShape::new(c, c == "file", &["f"]);
    /// let mut s = FlowShape { stages: vec![vec![e("file")], vec![e("bpf")]], callback_every: Some(10) };
    /// assert_eq!(p.check(&s, &Credentials::current()).unwrap_err().rule.as_deref(), Some("p:2"));
    /// s.stages.insert(1, vec![e("sampler")]);
    /// assert!(p.check(&s, &Credentials::current()).is_ok());
    /// ```
    pub fn check(&self, flow: &FlowShape, cred: &Credentials) -> Result<(), Refusal> {
        if self.allow_all {
            return Ok(());
        }
        for stage in &flow.stages {
            for e in stage {
                if e.source {
                    let what = match &e.file {
                        Some(f) => format!("{} ({})", e.class, f.display()),
                        None => format!(
                            "{} ({})",
                            e.class,
                            e.args.first().map_or("", String::as_str)
                        ),
                    };
                    self.decide(
                        cred,
                        "source",
                        |r| match r {
                            Rule::Access {
                                sources: Some(s), ..
                            } => Some(s.iter().any(|item| item.matches(e))),
                            _ => None,
                        },
                        &what,
                    )?;
                } else {
                    self.decide(
                        cred,
                        "class",
                        |r| match r {
                            Rule::Access {
                                classes: Some(c), ..
                            } => Some(c.iter().any(|x| x == "*" || *x == e.class)),
                            _ => None,
                        },
                        &e.class,
                    )?;
                }
                for f in &e.reads {
                    self.decide(
                        cred,
                        "reading",
                        |r| match r {
                            Rule::Access { reads: Some(l), .. } => {
                                Some(l.iter().any(|i| match i {
                                    ReadItem::Any => true,
                                    ReadItem::Under(p) => f.starts_with(p),
                                }))
                            }
                            _ => None,
                        },
                        &format!("{} (@FILE of {})", f.display(), e.class),
                    )?;
                }
                for x in &e.externs {
                    self.decide(
                        cred,
                        "external function",
                        |r| match r {
                            Rule::Access {
                                externs: Some(l), ..
                            } => Some(l.iter().any(|y| y == "*" || y == x)),
                            _ => None,
                        },
                        x,
                    )?;
                }
            }
        }
        let only = |i: usize, class: &str| flow.stages[i].iter().all(|e| e.class == class);
        let passes = |class: &str| (0..flow.stages.len()).any(|i| only(i, class));
        for (line, r) in &self.rules {
            match r {
                Rule::Order {
                    who,
                    first,
                    then,
                    before,
                } if who.matches(cred) => {
                    for (s, stage) in flow.stages.iter().enumerate() {
                        if !stage.iter().any(|e| e.class == *then) {
                            continue;
                        }
                        let ok = if *before {
                            (0..s).any(|i| only(i, first))
                        } else {
                            (s + 1..flow.stages.len()).any(|i| only(i, first))
                        };
                        if !ok {
                            return Err(Refusal {
                                rule: self.at(*line),
                                message: format!(
                                    "{then} (stage {}) must be {} a stage of {first} elements only",
                                    s + 1,
                                    if *before {
                                        "preceded by"
                                    } else {
                                        "followed by"
                                    }
                                ),
                            });
                        }
                    }
                }
                Rule::Callback {
                    who,
                    at_least,
                    n,
                    unless,
                } if who.matches(cred) => {
                    let Some(every) = flow.callback_every else {
                        continue;
                    };
                    if unless.as_deref().is_some_and(passes) {
                        continue;
                    }
                    let bad = if *at_least { every < *n } else { every > *n };
                    if bad {
                        return Err(Refusal {
                            rule: self.at(*line),
                            message: format!(
                                "a callback every {every} packets is not allowed (every {} {n} required{})",
                                if *at_least { ">=" } else { "<=" },
                                unless
                                    .as_ref()
                                    .map(|u| format!(" unless the flow passes {u}"))
                                    .unwrap_or_default()
                            ),
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(class: &str, args: &[&str]) -> ElemShape {
        let source = matches!(class, "file" | "replay");
        ElemShape {
            file: source.then(|| PathBuf::from(args[0])),
            ..ElemShape::new(class, source, args)
        }
    }

    fn user(uid: u32, gids: &[u32]) -> Credentials {
        Credentials {
            uid,
            gids: gids.to_vec(),
        }
    }

    #[test]
    fn access_rules_first_match_decides() {
        let p = Policy::parse(
            "deny uid=1001 class=strsearch\nallow uid=1000,1001 gid=50 source=file:/data/ class=*\n",
            "pol",
        )
        .unwrap();
        let flow = |path: &str, class: &str| FlowShape {
            stages: vec![vec![e("file", &[path])], vec![e(class, &["x"])]],
            callback_every: None,
        };
        assert!(p
            .check(&flow("/data/a.pcap", "strsearch"), &user(1000, &[1]))
            .is_ok());
        let r = p
            .check(&flow("/data/a.pcap", "strsearch"), &user(1001, &[1]))
            .unwrap_err();
        assert_eq!(r.rule.as_deref(), Some("pol:1"));
        let r = p
            .check(&flow("/tmp/a.pcap", "bpf"), &user(1000, &[1]))
            .unwrap_err();
        assert_eq!(r.rule, None);
        assert!(r.message.contains("source file (/tmp/a.pcap)"), "{r}");
        // gid 50 is enough.
        assert!(p.check(&flow("/data/x", "bpf"), &user(5, &[7, 50])).is_ok());
    }

    #[test]
    fn externs_need_their_own_allow() {
        let p = Policy::parse("allow source=* class=*\nallow uid=1 extern=md5\n", "p").unwrap();
        let mut f = e("fpl", &["x"]);
        f.externs = vec!["md5".into()];
        let flow = FlowShape {
            stages: vec![vec![e("file", &["a"])], vec![f]],
            callback_every: None,
        };
        assert!(p.check(&flow, &user(1, &[])).is_ok());
        let r = p.check(&flow, &user(2, &[])).unwrap_err();
        assert!(r.message.contains("external function md5"), "{r}");
    }

    #[test]
    fn ordering_rules_look_at_whole_stages() {
        let p = Policy::parse(
            "allow source=* class=*\nrequire sampler before strsearch\nrequire packetcount after rtsp uid=9\n",
            "p",
        )
        .unwrap();
        let u = user(9, &[]);
        let flow = |stages: Vec<Vec<ElemShape>>| FlowShape {
            stages,
            callback_every: None,
        };
        let src = || vec![e("file", &["a"])];
        assert!(p
            .check(
                &flow(vec![
                    src(),
                    vec![e("sampler", &["2"])],
                    vec![e("strsearch", &["x"])]
                ]),
                &u
            )
            .is_ok());
        // A parallel BPF lets unsampled packets reach the search.
        let r = p
            .check(
                &flow(vec![
                    src(),
                    vec![e("sampler", &["2"]), e("bpf", &["tcp"])],
                    vec![e("strsearch", &["x"])],
                ]),
                &u,
            )
            .unwrap_err();
        assert_eq!(r.rule.as_deref(), Some("p:2"));
        let r = p
            .check(&flow(vec![src(), vec![e("rtsp", &[])]]), &u)
            .unwrap_err();
        assert_eq!(r.rule.as_deref(), Some("p:3"));
        // The rtsp rule is only for uid 9.
        assert!(p
            .check(&flow(vec![src(), vec![e("rtsp", &[])]]), &user(8, &[]))
            .is_ok());
    }

    #[test]
    fn callback_rules() {
        let p = Policy::parse("allow source=* class=*\ncallback every<=1000\n", "p").unwrap();
        let f = |every| FlowShape {
            stages: vec![vec![e("file", &["a"])]],
            callback_every: every,
        };
        assert!(p.check(&f(Some(1000)), &user(1, &[])).is_ok());
        assert!(p.check(&f(None), &user(1, &[])).is_ok());
        let r = p.check(&f(Some(1001)), &user(1, &[])).unwrap_err();
        assert_eq!(
            r.to_string(),
            "refused by p:2: a callback every 1001 packets is not allowed (every <= 1000 required)"
        );
    }

    #[test]
    fn parse_errors_name_the_line() {
        for (text, line, msg) in [
            ("allow uid=x class=a", 1, "numeric ids"),
            ("\n\nallow", 3, "needs at least one"),
            ("require a b", 1, "expected: require"),
            ("callback every=5", 1, "every>=N"),
            ("callback every>=x", 1, "number of packets"),
            ("allow class=a frob=1", 1, "unknown word"),
        ] {
            let e = Policy::parse(text, "f").unwrap_err();
            assert_eq!(e.line, line, "{text}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }

    /// A directory tree for path rules: data/{a.pcap,private/x,Caps/x},
    /// out/y and symlinks data/in -> data/private/x, data/out -> out/y.
    fn tree(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-policy-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        for sub in ["data/private", "data/Caps", "out"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        for f in ["data/a.pcap", "data/private/x", "data/Caps/x", "out/y"] {
            std::fs::write(d.join(f), b"").unwrap();
        }
        std::os::unix::fs::symlink(d.join("data/private/x"), d.join("data/in")).unwrap();
        std::os::unix::fs::symlink(d.join("out/y"), d.join("data/out")).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn file_at(path: &Path) -> FlowShape {
        let mut e = ElemShape::new("file", true, &[path.to_str().unwrap()]);
        e.file = Some(canonical(path).unwrap());
        FlowShape {
            stages: vec![vec![e]],
            callback_every: None,
        }
    }

    #[test]
    fn paths_are_compared_canonically_and_by_component() {
        let d = tree("paths");
        let r = d.display();
        let p = Policy::parse(
            &format!("deny source=file:{r}/data/private\ndeny source=file:{r}/data/Caps\nallow source=file:{r}/data/\n"),
            "p",
        )
        .unwrap();
        let me = user(1, &[]);
        let rule = |path: PathBuf| p.check(&file_at(&path), &me).map_err(|e| e.rule);
        assert_eq!(rule(d.join("data/a.pcap")), Ok(()));
        // `..`, `.`, `//` and a symlink are what the kernel makes of them.
        assert_eq!(rule(d.join("data/../out/y")), Err(None));
        assert_eq!(rule(d.join("data/./private/x")), Err(Some("p:1".into())));
        assert_eq!(
            rule(PathBuf::from(format!("{r}/data//private/x"))),
            Err(Some("p:1".into()))
        );
        assert_eq!(rule(d.join("data/in")), Err(Some("p:1".into())));
        assert_eq!(rule(d.join("data/out")), Err(None));
        // No case folding: the capitalised deny matches its directory.
        assert_eq!(rule(d.join("data/Caps/x")), Err(Some("p:2".into())));
        // Components, not text: a rule on data/a does not cover data/a.pcap.
        let q = Policy::parse(&format!("allow source=file:{r}/data/a\n"), "q").unwrap();
        assert!(q.check(&file_at(&d.join("data/a.pcap")), &me).is_err());
        // A rule's own `..` and `//` resolve the same way.
        let q = Policy::parse(
            &format!("deny source=file:{r}/out/..//data/./private\nallow source=*\n"),
            "q",
        )
        .unwrap();
        assert!(q.check(&file_at(&d.join("data/in")), &me).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn relative_rule_paths_are_taken_from_the_current_directory() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            rule_path(Path::new("a/./b//c/../d")),
            cwd.canonicalize().unwrap().join("a/b/d")
        );
    }

    #[test]
    fn at_files_need_a_read_rule() {
        let d = tree("reads");
        let r = d.display();
        let p = Policy::parse(
            &format!("allow source=* class=*\nallow read={r}/data\n"),
            "p",
        )
        .unwrap();
        let flow = |reads: Vec<PathBuf>| {
            let mut e = ElemShape::new("bpf", false, &["@x"]);
            e.reads = reads;
            FlowShape {
                stages: vec![vec![ElemShape::new("file", true, &["a"])], vec![e]],
                callback_every: None,
            }
        };
        let me = user(1, &[]);
        assert!(p.check(&flow(vec![d.join("data/a.pcap")]), &me).is_ok());
        let e = p
            .check(&flow(vec![canonical(&d.join("data/out")).unwrap()]), &me)
            .unwrap_err();
        assert!(e.message.contains("no rule allows reading"), "{e}");
        let all = Policy::parse("allow source=* class=* read=*\n", "p").unwrap();
        assert!(all.check(&flow(vec![d.join("out/y")]), &me).is_ok());
        let none = Policy::parse("allow source=* class=*\n", "p").unwrap();
        assert!(none.check(&flow(vec![d.join("data/a.pcap")]), &me).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn other_sources_are_matched_by_name() {
        let p = Policy::parse("allow source=iface:eth1 class=*\n", "p").unwrap();
        let iface = |name: &str| FlowShape {
            stages: vec![vec![ElemShape::new("iface", true, &[name])]],
            callback_every: None,
        };
        assert!(p.check(&iface("eth1"), &user(1, &[])).is_ok());
        assert!(p.check(&iface("eth10"), &user(1, &[])).is_err());
        assert!(p.check(&iface("ETH1"), &user(1, &[])).is_err());
    }
}
