//! The shared conformance corpus: `../shared/conformance` beside the
//! repository (libpcap's verdicts, expressions and captures). Tests that
//! need it skip, with a message, where it is absent.
//!
//! ```
//! use sluice_testsupport::corpus;
//! match corpus::root() {
//!     Some(root) => assert!(root.join("pcaps").is_dir()),
//!     None => corpus::skipped("this example"),
//! }
//! ```

use sluice_capture::{CaptureFormat, CaptureReader};
use std::path::{Path, PathBuf};

/// Where the corpus is expected.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/conformance");

/// The corpus folder, if it is there.
///
/// ```
/// if let Some(root) = sluice_testsupport::corpus::root() {
///     assert!(root.ends_with("conformance"));
/// }
/// ```
pub fn root() -> Option<PathBuf> {
    let p = PathBuf::from(ROOT);
    p.is_dir().then_some(p)
}

/// Say that a test is skipped because the corpus is absent.
///
/// ```
/// use sluice_testsupport::corpus;
/// let Some(exprs) = corpus::text("expressions.txt") else {
///     return corpus::skipped("this example");
/// };
/// assert!(exprs.lines().count() > 0);
/// ```
pub fn skipped(what: &str) {
    println!("skipped ({what}): ../shared/conformance not found");
}

/// A file of the corpus (`name` relative to its folder), if the corpus is
/// there (the file itself may still be missing).
///
/// ```
/// if let Some(p) = sluice_testsupport::corpus::path("expressions.txt") {
///     assert!(p.ends_with("expressions.txt"));
/// }
/// ```
pub fn path(name: &str) -> Option<PathBuf> {
    root().map(|r| r.join(name))
}

/// The text of a corpus file, if there is one.
///
/// ```
/// use sluice_testsupport::corpus;
/// assert_eq!(corpus::text("no such file"), None);
/// if corpus::root().is_some() {
///     assert!(corpus::text("expressions.txt").is_some_and(|t| !t.is_empty()));
/// }
/// ```
pub fn text(name: &str) -> Option<String> {
    std::fs::read_to_string(path(name)?).ok()
}

/// The lines of a corpus file, if there is one.
///
/// ```
/// if let Some(exprs) = sluice_testsupport::corpus::lines("expressions.txt") {
///     assert!(!exprs.is_empty());
/// }
/// ```
pub fn lines(name: &str) -> Option<Vec<String>> {
    Some(text(name)?.lines().map(str::to_string).collect())
}

/// The lines of a gzip-compressed corpus file (the oracle's verdict
/// tables), if there is one; a file that does not decompress panics.
///
/// ```
/// use sluice_testsupport::corpus;
/// assert_eq!(corpus::gz_lines("no such file.gz"), None);
/// if let Some(v) = corpus::gz_lines("oracle/verdicts-master.tsv.gz") {
///     assert!(v.iter().all(|l| l.split('\t').count() >= 3));
/// }
/// ```
pub fn gz_lines(name: &str) -> Option<Vec<String>> {
    use std::io::Read;
    let file = std::fs::File::open(path(name)?).ok()?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut s)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    Some(s.lines().map(str::to_string).collect())
}

/// libpcap master's unoptimised verdicts, keyed by (capture, expression
/// line number): what a program compiled without the optimiser accepts,
/// for the expressions where the optimised program differs (the
/// conformance rule). Empty where the corpus is absent.
///
/// ```
/// let v = sluice_testsupport::corpus::unopt_verdicts();
/// assert!(v.keys().all(|(cap, line)| !cap.is_empty() && line.parse::<usize>().is_ok()));
/// ```
pub fn unopt_verdicts() -> std::collections::HashMap<(String, String), String> {
    gz_lines("oracle/verdicts-master-unopt.tsv.gz")
        .unwrap_or_default()
        .into_iter()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f.len() >= 4).then(|| ((f[0].to_string(), f[1].to_string()), f[3].to_string()))
        })
        .collect()
}

/// The captures of `pcaps/`, sorted by name; none where the corpus is
/// absent.
///
/// ```
/// let caps = sluice_testsupport::corpus::pcaps();
/// assert!(caps.windows(2).all(|w| w[0] < w[1]));
/// ```
pub fn pcaps() -> Vec<PathBuf> {
    let Some(dir) = path("pcaps") else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files
}

/// The captures of `pcaps/`, or the repository's `examples/sample.pcap`
/// where the corpus is absent: for benchmarks, which run on something
/// either way.
///
/// ```
/// assert!(!sluice_testsupport::corpus::pcaps_or_sample().is_empty());
/// ```
pub fn pcaps_or_sample() -> Vec<PathBuf> {
    let files = pcaps();
    if files.is_empty() {
        return vec![PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../examples/sample.pcap"
        ))];
    }
    files
}

/// One packet of a capture, owned.
///
/// ```
/// let p = sluice_testsupport::corpus::Packet { linktype: 1, data: vec![0; 60], wirelen: 60, snaplen: 0, ts_sec: 1, ts_nsec: 5 };
/// assert_eq!(p.ts_nanos(), 1_000_000_005);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The link type (LINKTYPE number).
    pub linktype: u16,
    /// The captured bytes.
    pub data: Vec<u8>,
    /// The length on the wire.
    pub wirelen: u32,
    /// The snapshot length of its capture or interface (0: none given).
    pub snaplen: u32,
    /// Seconds of the timestamp.
    pub ts_sec: i64,
    /// Nanoseconds of the timestamp.
    pub ts_nsec: u32,
}

impl Packet {
    /// The timestamp in nanoseconds (times before 1970 count as 1970).
    ///
    /// ```
    /// let p = sluice_testsupport::corpus::Packet { linktype: 1, data: vec![], wirelen: 0, snaplen: 0, ts_sec: -1, ts_nsec: 0 };
    /// assert_eq!(p.ts_nanos(), 0);
    /// ```
    pub fn ts_nanos(&self) -> u64 {
        (self.ts_sec.max(0) as u64) * 1_000_000_000 + u64::from(self.ts_nsec)
    }
}

/// A capture read whole.
///
/// ```
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sample.pcap");
/// let c = sluice_testsupport::corpus::Capture::read(sample).unwrap();
/// assert!(!c.packets.is_empty());
/// assert_eq!(c.name, "sample.pcap");
/// ```
#[derive(Clone, Debug)]
pub struct Capture {
    /// The file's name (without its folder).
    pub name: String,
    /// The file's format as the reader found it.
    pub format: CaptureFormat,
    /// Its packets, up to the end or the first one that cannot be read.
    pub packets: Vec<Packet>,
}

impl Capture {
    /// The link type of its last packet, or of its first interface (1,
    /// Ethernet, when it has neither).
    ///
    /// ```
    /// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sample.pcap");
    /// assert_eq!(sluice_testsupport::corpus::Capture::read(sample).unwrap().linktype(), 1);
    /// ```
    pub fn linktype(&self) -> u16 {
        self.packets
            .last()
            .map(|p| p.linktype)
            .or(self.format.linktype())
            .unwrap_or(1)
    }

    /// Read a capture file: `None` if it cannot be opened; its packets up
    /// to the end or to the first that cannot be read.
    ///
    /// ```
    /// assert!(sluice_testsupport::corpus::Capture::read("/nonexistent.pcap").is_none());
    /// ```
    pub fn read(path: impl AsRef<Path>) -> Option<Capture> {
        let path = path.as_ref();
        let mut r = CaptureReader::open(path).ok()?;
        let mut packets = Vec::new();
        while let Ok(Some(p)) = r.next_packet() {
            packets.push(Packet {
                linktype: p.linktype,
                data: p.data.to_vec(),
                wirelen: p.wirelen,
                snaplen: p.snaplen,
                ts_sec: p.ts_sec,
                ts_nsec: p.ts_nsec,
            });
        }
        Some(Capture {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            format: r.format(),
            packets,
        })
    }
}

/// Every packet of a capture file (none if it cannot be opened), up to the
/// end or the first that cannot be read.
///
/// ```
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/sample.pcap");
/// assert!(sluice_testsupport::corpus::packets(sample).iter().all(|p| p.linktype == 1));
/// ```
pub fn packets(path: impl AsRef<Path>) -> Vec<Packet> {
    Capture::read(path).map(|c| c.packets).unwrap_or_default()
}
