//! One capture file being written, without clobbering and without ever
//! leaving half a file under the user's name.
//!
//! The rule: a regular file is written to a hidden temporary file beside
//! it (`.NAME.sluice-PID-N.tmp`, created with `O_CREAT|O_EXCL`, so a link
//! planted under that name is never followed) and renamed over NAME only
//! by [`OutputFile::finish`]. Dropping an unfinished file removes its
//! temporary. Devices and pipes (`/dev/null`, a FIFO) are written
//! directly, `-` is standard output, and [`Placement::InPlace`] writes a
//! regular file under its own name from the first byte (live captures,
//! whose files are read while they grow).
//!
//! Every temporary is listed in a process-wide registry, so that a
//! process told to die at once (a second Ctrl-C) can remove them with
//! [`remove_temporaries`]; only SIGKILL leaves one behind, and
//! [`stale_temporaries`] finds those for the next run to name.

use crate::{CaptureError, CaptureFormat, CaptureWriter, ErrorKind, InterfaceInfo, Packet};
use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// How a regular file is put in place.
///
/// ```
/// use sluice_capture::sink::Placement;
/// assert_ne!(Placement::Replace, Placement::InPlace);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Written beside its name and renamed over it when finished: a run
    /// that fails or is dropped leaves an existing file as it was.
    Replace,
    /// Written under its own name from the first byte (tcpdump's way for
    /// live captures, whose files are read while they grow).
    InPlace,
}

/// Why an output could not be written: the output's name, what went
/// wrong, and how many packets reached the file before it did.
///
/// ```
/// use sluice_capture::sink::OutputError;
/// let e = OutputError::new("out.pcap", std::io::Error::from_raw_os_error(28), Some(1234));
/// assert_eq!(e.to_string(), "cannot write output out.pcap: No space left on device (after 1,234 packets)");
/// ```
#[derive(Debug)]
pub struct OutputError {
    name: String,
    source: std::io::Error,
    packets: Option<u64>,
    /// What became of the output (and of its set), when it matters.
    note: Option<&'static str>,
    /// The name says what failed on its own (an option and its directory),
    /// not an output being written.
    plain: bool,
}

impl OutputError {
    /// An error writing `name`, after `packets` packets reached it (`None`
    /// when it failed before any packet was written: opening it).
    pub fn new(name: impl Into<String>, source: std::io::Error, packets: Option<u64>) -> Self {
        OutputError {
            name: name.into(),
            source,
            packets,
            note: None,
            plain: false,
        }
    }

    /// An error about something other than an output being written (an
    /// output directory given with an option): `what` alone names it.
    pub fn about(what: impl Into<String>, source: std::io::Error) -> Self {
        OutputError {
            plain: true,
            ..OutputError::new(what, source, None)
        }
    }

    /// The output's name as given (`<stdout>` for standard output).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Packets that reached the file before the error, if it got that far.
    pub fn packets(&self) -> Option<u64> {
        self.packets
    }

    /// The I/O error underneath.
    pub fn io(&self) -> &std::io::Error {
        &self.source
    }

    /// The same error, saying also what became of the output.
    pub(crate) fn with_note(mut self, note: &'static str) -> Self {
        self.note = Some(note);
        self
    }
}

impl fmt::Display for OutputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.plain {
            f.write_str("cannot write output ")?;
        }
        write!(f, "{}: {}", self.name, io_message(&self.source))?;
        if let Some(n) = self.packets {
            let s = if n == 1 { "" } else { "s" };
            write!(f, " (after {} packet{s})", thousands(n))?;
        }
        if let Some(note) = self.note {
            write!(f, "; {note}")?;
        }
        Ok(())
    }
}

impl std::error::Error for OutputError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// An I/O error as the system words it, without Rust's `(os error N)`.
///
/// ```
/// let e = std::io::Error::from_raw_os_error(2);
/// assert_eq!(sluice_capture::sink::io_message(&e), "No such file or directory");
/// ```
pub fn io_message(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error ") {
        Some(at) if s.ends_with(')') => s[..at].to_string(),
        _ => s,
    }
}

/// A count with thousands separators (`1,234`).
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The temporaries of this process not yet renamed or removed.
static TEMPS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

fn register(path: &Path) {
    let mut t = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    t.get_or_insert_with(HashSet::new)
        .insert(path.to_path_buf());
}

fn unregister(path: &Path) {
    let mut t = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(set) = t.as_mut() {
        set.remove(path);
    }
}

/// Remove every temporary file this process has open (for a process about
/// to exit without finishing its outputs, on a second interrupt). Returns
/// how many were removed.
///
/// ```
/// assert_eq!(sluice_capture::sink::remove_temporaries(), 0);
/// ```
pub fn remove_temporaries() -> usize {
    let mut t = TEMPS.lock().unwrap_or_else(|e| e.into_inner());
    let all: Vec<PathBuf> = t.as_mut().map(|s| s.drain().collect()).unwrap_or_default();
    all.iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// A temporary file left in a directory by a sluice run that was killed
/// before it could finish (SIGKILL, a crash): what the next run names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleTemporary {
    /// The temporary file.
    pub path: PathBuf,
    /// The output it was to become.
    pub output: PathBuf,
    /// The process that wrote it (no longer running).
    pub pid: u32,
    /// Its size in bytes.
    pub bytes: u64,
}

impl fmt::Display for StaleTemporary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} was left by an interrupted run (process {}, now gone) writing {}: {} bytes, readable up to its last complete packet; rename it to keep it, or remove it",
            self.path.display(),
            self.pid,
            self.output.display(),
            thousands(self.bytes)
        )
    }
}

/// The name of temporary number `n` of process `pid` for `file`.
fn temp_file_name(file: &str, pid: u32, n: u64) -> String {
    format!(".{file}.sluice-{pid}-{n}.tmp")
}

/// The output name and process of a temporary's file name, if it is one.
fn parse_temp_name(name: &str) -> Option<(&str, u32)> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let at = rest.rfind(".sluice-")?;
    let (file, tail) = (&rest[..at], &rest[at + ".sluice-".len()..]);
    let (pid, n) = tail.split_once('-')?;
    let pid: u32 = pid.parse().ok()?;
    n.parse::<u64>().ok()?;
    (!file.is_empty()).then_some((file, pid))
}

/// Whether process `pid` is running.
fn alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// The temporaries in `dir` that sluice runs no longer running left
/// behind (see [`StaleTemporary`]); none when `dir` cannot be read.
///
/// ```
/// let dir = std::env::temp_dir().join(format!("sluice-stale-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// // Process 0 never runs a sluice.
/// std::fs::write(dir.join(".out.pcap.sluice-0-3.tmp"), b"x").unwrap();
/// let stale = sluice_capture::sink::stale_temporaries(&dir);
/// assert_eq!(stale.len(), 1);
/// assert!(stale[0].output.ends_with("out.pcap"));
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn stale_temporaries(dir: &Path) -> Vec<StaleTemporary> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<StaleTemporary> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let (file, pid) = parse_temp_name(name.to_str()?)?;
            if alive(pid) {
                return None;
            }
            let meta = e.metadata().ok()?;
            meta.is_file().then(|| StaleTemporary {
                path: e.path(),
                output: dir.join(file),
                pid,
                bytes: meta.len(),
            })
        })
        .collect();
    found.sort_by(|a, b| a.path.cmp(&b.path));
    found
}

/// Where the bytes go.
enum Target {
    Stdout,
    /// Written under its own name (a device, a pipe, or in place).
    Direct,
    /// A temporary file, renamed to `path` by [`OutputFile::finish`].
    Temp {
        temp: PathBuf,
        path: PathBuf,
    },
}

/// A fresh temporary beside `path`, created exclusively (a file or link
/// of that name already there is an error, never followed).
fn create_temp(path: &Path) -> std::io::Result<(std::fs::File, PathBuf)> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::new(),
    };
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(temp_file_name(&file, std::process::id(), n));
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
        {
            Ok(f) => {
                register(&temp);
                return Ok((f, temp));
            }
            // Someone else's file of that name: take the next number.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < u64::MAX => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Open `path` for writing as `placement` says (see the module docs).
fn open(path: &str, placement: Placement) -> Result<(Box<dyn Write + Send>, Target), OutputError> {
    if path == "-" {
        return Ok((Box::new(std::io::stdout()), Target::Stdout));
    }
    let fail = |e: std::io::Error| OutputError::new(path, e, None);
    let in_place = placement == Placement::InPlace;
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(fail(std::io::Error::other("Is a directory"))),
        // A device or a pipe: written as it is.
        Ok(m) if !m.is_file() => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(fail)?;
            Ok((Box::new(f), Target::Direct))
        }
        Ok(_) if in_place => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map_err(fail)?;
            Ok((Box::new(f), Target::Direct))
        }
        Err(_) if in_place => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(fail)?;
            Ok((Box::new(f), Target::Direct))
        }
        existing => {
            // Through a symbolic link, the file it names is replaced.
            let real = match &existing {
                Ok(_) => std::fs::canonicalize(path).map_err(fail)?,
                Err(_) => PathBuf::from(path),
            };
            let (f, temp) = create_temp(&real).map_err(fail)?;
            if let Ok(m) = existing {
                let _ = f.set_permissions(m.permissions());
            }
            Ok((Box::new(f), Target::Temp { temp, path: real }))
        }
    }
}

/// One capture file being written (see the module documentation).
///
/// ```
/// use sluice_capture::{CaptureFormat, Packet};
/// use sluice_capture::sink::{OutputFile, Placement};
/// let dir = std::env::temp_dir().join(format!("sluice-outfile-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let path = dir.join("a.pcap");
/// std::fs::write(&path, b"precious").unwrap();
/// let mut out = OutputFile::create(path.to_str().unwrap(), &CaptureFormat::pcap(1, 65535), Placement::Replace)?;
/// out.write(&Packet::new(1, 0, 1, &[0u8; 60]))?;
/// assert_eq!(std::fs::read(&path).unwrap(), b"precious"); // not yet
/// out.finish()?;
/// assert_eq!(std::fs::read(&path).unwrap().len(), 24 + 16 + 60);
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), sluice_capture::sink::OutputError>(())
/// ```
pub struct OutputFile {
    writer: Option<CaptureWriter<Box<dyn Write + Send>>>,
    target: Target,
    name: String,
    /// Cut packets to this many bytes (`-s`).
    snaplen: Option<u32>,
    /// Flush after every packet (`-U`).
    flush_each: bool,
    /// A write failed: the file is not put in place (a temporary is
    /// removed, an existing file kept as it was).
    failed: bool,
}

/// What a failed output written through a temporary comes to.
const NOT_WRITTEN: &str = "the file was not written (an existing one is left as it was)";

impl OutputFile {
    /// Start writing a capture file in `format` (its header is written at
    /// once); `-` is standard output.
    pub fn create(
        path: &str,
        format: &CaptureFormat,
        placement: Placement,
    ) -> Result<OutputFile, OutputError> {
        let (w, target) = open(path, placement)?;
        let name = if path == "-" { "<stdout>" } else { path }.to_string();
        let mut out = OutputFile {
            writer: None,
            target,
            name,
            snaplen: None,
            flush_each: false,
            failed: false,
        };
        match CaptureWriter::new(w, out.name.clone(), format) {
            Ok(w) => out.writer = Some(w),
            Err(e) => return Err(out.failed(e)),
        }
        Ok(out)
    }

    /// Cut every packet written to `snaplen` bytes (`-s`).
    pub fn truncate_to(mut self, snaplen: Option<u32>) -> OutputFile {
        self.snaplen = snaplen;
        self
    }

    /// Flush after every packet (tcpdump's `-U`).
    pub fn set_flush_each(&mut self, on: bool) {
        self.flush_each = on;
    }

    /// The output's name (`<stdout>` for `-`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this output is standard output.
    pub fn is_stdout(&self) -> bool {
        matches!(self.target, Target::Stdout)
    }

    /// The failure for a write error, with how many packets reached the
    /// file before it; the file will not be put in place.
    fn failed(&mut self, e: CaptureError) -> OutputError {
        let packets = self.writer.as_ref().map(|w| w.packets_out());
        let io = match e.into_kind() {
            ErrorKind::Io(io) => io,
            other => std::io::Error::other(other.to_string()),
        };
        self.failed = true;
        let e = OutputError::new(self.name.clone(), io, packets);
        match self.target {
            Target::Temp { .. } => e.with_note(NOT_WRITTEN),
            _ => e,
        }
    }

    /// Write one packet (cut to the `-s` length).
    pub fn write(&mut self, pkt: &Packet<'_>) -> Result<(), OutputError> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let mut p = *pkt;
        if let Some(s) = self.snaplen {
            if p.caplen > s {
                p.caplen = s;
                p.data = &p.data[..s as usize];
            }
            p.snaplen = s;
        }
        let mut r = w.write_packet(&p);
        if r.is_ok() && self.flush_each {
            r = w.flush();
        }
        match r {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Declare an interface the input has (pcapng), so that even an output
    /// that gets no packet of it is a file every reader takes.
    pub fn declare(&mut self, info: InterfaceInfo) -> Result<(), OutputError> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        if w.interfaces_declared() > 0 {
            return Ok(());
        }
        match w.declare_interface(info) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Packets written so far (buffered ones included).
    pub fn packets(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.packets())
    }

    /// Bytes written so far, buffered ones included (the header too).
    pub fn offset(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.offset())
    }

    /// Push what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        let r = match self.writer.as_mut() {
            Some(w) => w.flush(),
            None => return Ok(()),
        };
        match r {
            Ok(()) => Ok(()),
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Flush and close the file, without putting it in place yet: the
    /// first half of [`finish`](Self::finish), for a set of outputs that
    /// are all put in place or none ([`FileSet`](super::FileSet)).
    pub fn close(&mut self) -> Result<(), OutputError> {
        let Some(w) = self.writer.take() else {
            return self.check_failed();
        };
        let packets = w.packets_out();
        match w.finish() {
            Ok(file) => {
                drop(file);
                self.check_failed()
            }
            Err(e) => {
                let io = match e.into_kind() {
                    ErrorKind::Io(io) => io,
                    other => std::io::Error::other(other.to_string()),
                };
                self.failed = true;
                let e = OutputError::new(self.name.clone(), io, Some(packets));
                Err(match self.target {
                    Target::Temp { .. } => e.with_note(NOT_WRITTEN),
                    _ => e,
                })
            }
        }
    }

    /// An output whose write failed earlier cannot be finished.
    fn check_failed(&self) -> Result<(), OutputError> {
        match self.failed {
            false => Ok(()),
            true => Err(OutputError::new(
                self.name.clone(),
                std::io::Error::other("an earlier write failed"),
                None,
            )
            .with_note(NOT_WRITTEN)),
        }
    }

    /// Put a closed file in place under its name: the second half of
    /// [`finish`](Self::finish).
    pub fn commit(&mut self) -> Result<(), OutputError> {
        self.close()?;
        if let Target::Temp { temp, path } = &self.target {
            std::fs::rename(temp, path)
                .map_err(|e| OutputError::new(self.name.clone(), e, None))?;
            unregister(temp);
            self.target = Target::Direct;
        }
        Ok(())
    }

    /// Flush, close, and put the file in place under its final name.
    pub fn finish(mut self) -> Result<(), OutputError> {
        self.commit()
    }
}

impl Drop for OutputFile {
    /// An output never finished leaves no temporary file.
    fn drop(&mut self) {
        if let Target::Temp { temp, .. } = &self.target {
            drop(self.writer.take());
            let _ = std::fs::remove_file(temp);
            unregister(temp);
        }
    }
}

/// Write a whole text file the same way: through a temporary renamed over
/// `path` (`-`: standard output).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("sluice-text-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let p = dir.join("g.dot");
/// sluice_capture::sink::write_text(p.to_str().unwrap(), "digraph {}\n").unwrap();
/// assert_eq!(std::fs::read_to_string(&p).unwrap(), "digraph {}\n");
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn write_text(path: &str, text: &str) -> Result<(), OutputError> {
    let (mut w, target) = open(path, Placement::Replace)?;
    let fail = |e: std::io::Error| OutputError::new(path, e, None);
    let written = w.write_all(text.as_bytes()).and_then(|_| w.flush());
    drop(w);
    if let Target::Temp { temp, path: real } = target {
        let placed = written.and_then(|_| std::fs::rename(&temp, real));
        if placed.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        unregister(&temp);
        return placed.map_err(fail);
    }
    written.map_err(fail)
}

/// Make sure a directory for outputs exists (created if missing); `flag`
/// names the option in the error (`--out-dir in.pcap: exists and is not a
/// directory`).
///
/// ```
/// let e = sluice_capture::sink::out_dir("--out-dir", std::path::Path::new("/dev/null")).unwrap_err();
/// assert_eq!(e.to_string(), "--out-dir /dev/null: exists and is not a directory");
/// ```
pub fn out_dir(flag: &str, dir: &Path) -> Result<(), OutputError> {
    let name = format!("{flag} {}", dir.display());
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(OutputError::about(
            name,
            std::io::Error::other("exists and is not a directory"),
        )),
        Err(_) => std::fs::create_dir_all(dir).map_err(|e| OutputError::about(name, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that make temporaries run one at a time: one of them
    /// removes every temporary of the process.
    static SERIAL: Mutex<()> = Mutex::new(());

    fn serial() -> std::sync::MutexGuard<'static, ()> {
        SERIAL.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-sink-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn temps(d: &Path) -> usize {
        std::fs::read_dir(d)
            .unwrap()
            .filter(|e| {
                let n = e.as_ref().unwrap().file_name();
                n.to_string_lossy().ends_with(".tmp")
            })
            .count()
    }

    #[test]
    fn replaces_only_when_finished() {
        let _serial = serial();
        let d = scratch("replace");
        let p = d.join("keep.pcap");
        std::fs::write(&p, b"precious").unwrap();
        let path = p.to_str().unwrap();
        let fmt = CaptureFormat::pcap(1, 65535);
        let out = OutputFile::create(path, &fmt, Placement::Replace).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        assert_eq!(temps(&d), 1);
        drop(out);
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        assert_eq!(temps(&d), 0);
        let mut out = OutputFile::create(path, &fmt, Placement::Replace).unwrap();
        out.write(&Packet::new(1, 0, 1, &[0; 20])).unwrap();
        out.finish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap().len(), 24 + 16 + 20);
        assert_eq!(temps(&d), 0);
    }

    #[test]
    fn a_planted_link_is_never_followed() {
        let _serial = serial();
        let d = scratch("planted");
        let victim = d.join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        // Links under every name the next temporaries could take.
        for n in 0..64 {
            let name = temp_file_name("out.pcap", std::process::id(), n);
            let _ = std::os::unix::fs::symlink(&victim, d.join(name));
        }
        let p = d.join("out.pcap");
        let mut out = OutputFile::create(
            p.to_str().unwrap(),
            &CaptureFormat::pcap(1, 65535),
            Placement::Replace,
        )
        .unwrap();
        out.write(&Packet::new(1, 0, 1, &[0; 20])).unwrap();
        out.finish().unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert_eq!(std::fs::read(&p).unwrap().len(), 60);
    }

    #[test]
    fn device_errors_name_the_output_and_what_reached_it() {
        let fmt = CaptureFormat::pcap(1, 65535);
        let mut out = OutputFile::create("/dev/full", &fmt, Placement::Replace).unwrap();
        let big = vec![0u8; 60_000];
        let mut err = None;
        for _ in 0..10 {
            if let Err(e) = out.write(&Packet::new(1, 0, 1, &big)) {
                err = Some(e);
                break;
            }
        }
        let e = err.or_else(|| out.finish().err()).unwrap();
        assert_eq!(e.packets(), Some(0));
        assert!(
            e.to_string().starts_with(
                "cannot write output /dev/full: No space left on device (after 0 packets)"
            ),
            "{e}"
        );
    }

    #[test]
    fn temp_names_parse_back() {
        assert_eq!(
            parse_temp_name(".a.b.pcap.sluice-12-3.tmp"),
            Some(("a.b.pcap", 12))
        );
        assert_eq!(parse_temp_name(".x.sluice-1-.tmp"), None);
        assert_eq!(parse_temp_name("x.sluice-1-2.tmp"), None);
        assert_eq!(parse_temp_name(".sluice-1-2.tmp"), None);
    }

    #[test]
    fn live_temporaries_are_not_stale_and_are_removable() {
        let _serial = serial();
        let d = scratch("registry");
        let p = d.join("o.pcap");
        let out = OutputFile::create(
            p.to_str().unwrap(),
            &CaptureFormat::pcap(1, 65535),
            Placement::Replace,
        )
        .unwrap();
        assert!(stale_temporaries(&d).is_empty());
        assert!(remove_temporaries() >= 1);
        assert_eq!(temps(&d), 0);
        drop(out);
    }
}
