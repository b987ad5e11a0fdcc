//! Writing capture files without clobbering: a regular file is written to
//! a temporary file beside it and renamed over the final name when the run
//! ends, so a run that fails before it writes anything leaves an existing
//! file as it was. Devices and pipes (`/dev/null`, `/dev/full`, a FIFO) are
//! written directly, `-` is standard output.

use super::{io_msg, stdout_failed, thousands, Fail};
use sluice::capture::{CaptureError, CaptureFormat, CaptureWriter, ErrorKind, Packet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the bytes go.
enum Target {
    Stdout,
    Direct,
    /// A temporary file, renamed to `path` by [`CaptureOut::finish`].
    Temp {
        temp: PathBuf,
        path: PathBuf,
    },
}

/// One capture file being written (see the module documentation).
pub struct CaptureOut {
    writer: Option<CaptureWriter<Box<dyn Write + Send>>>,
    target: Target,
    name: String,
    packets: u64,
    /// Cut packets to this many bytes (`-s`).
    snaplen: Option<u32>,
    /// Flush after every packet (`-U`).
    pub flush_each: bool,
}

/// A fresh temporary name beside `path`.
fn temp_name(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = format!(".{file}.sluice-{}-{n}.tmp", std::process::id());
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(tmp),
        _ => PathBuf::from(tmp),
    }
}

/// Open `path` for writing (see the module documentation); `in_place`
/// writes a regular file under its own name from the start.
fn open(path: &str, in_place: bool) -> Result<(Box<dyn Write + Send>, Target), Fail> {
    if path == "-" {
        return Ok((Box::new(std::io::stdout()), Target::Stdout));
    }
    let fail = |e: std::io::Error| Fail(format!("cannot write output {path}: {}", io_msg(&e)));
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => Err(Fail(format!("cannot write output {path}: Is a directory"))),
        Ok(m) if !m.is_file() || in_place => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(m.is_file())
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
        Ok(m) if !m.is_file() => {
            let f = std::fs::OpenOptions::new()
                .write(true)
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
            let temp = temp_name(&real);
            let f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&temp)
                .map_err(fail)?;
            if let Ok(m) = existing {
                let _ = f.set_permissions(m.permissions());
            }
            Ok((Box::new(f), Target::Temp { temp, path: real }))
        }
    }
}

impl CaptureOut {
    /// Start writing a capture file in `format` (the header is written at
    /// once, to the temporary file).
    pub fn create(path: &str, format: &CaptureFormat) -> Result<CaptureOut, Fail> {
        CaptureOut::create_with(path, format, false)
    }

    /// Start writing a capture file under its own name from the first
    /// byte, as tcpdump does: for live captures, which run until stopped
    /// and whose file is read while it grows.
    pub fn create_in_place(path: &str, format: &CaptureFormat) -> Result<CaptureOut, Fail> {
        CaptureOut::create_with(path, format, true)
    }

    fn create_with(path: &str, format: &CaptureFormat, in_place: bool) -> Result<CaptureOut, Fail> {
        let (w, target) = open(path, in_place)?;
        let name = if path == "-" { "<stdout>" } else { path }.to_string();
        let mut out = CaptureOut {
            writer: None,
            target,
            name,
            packets: 0,
            snaplen: None,
            flush_each: false,
        };
        match CaptureWriter::new(w, out.name.clone(), format) {
            Ok(w) => out.writer = Some(w),
            Err(e) => return Err(out.failed(e)),
        }
        Ok(out)
    }

    /// Cut every packet written to `snaplen` bytes (`-s`).
    pub fn truncate_to(mut self, snaplen: Option<u32>) -> CaptureOut {
        self.snaplen = snaplen;
        self
    }

    /// The failure for a write error, naming the output and how far it got.
    fn failed(&self, e: CaptureError) -> Fail {
        let what = match e.kind() {
            ErrorKind::Io(io) => {
                if matches!(self.target, Target::Stdout) {
                    return stdout_failed(io);
                }
                io_msg(io)
            }
            other => other.to_string(),
        };
        let n = self.packets;
        let s = if n == 1 { "" } else { "s" };
        Fail(format!(
            "cannot write output {}: {what} (after {} packet{s})",
            self.name,
            thousands(n)
        ))
    }

    /// Write one packet (cut to the `-s` length).
    pub fn write(&mut self, pkt: &Packet<'_>) -> Result<(), Fail> {
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
            Ok(()) => {
                self.packets += 1;
                Ok(())
            }
            Err(e) => Err(self.failed(e)),
        }
    }

    /// Bytes written so far, buffered ones included (the header too).
    pub fn offset(&self) -> u64 {
        self.writer.as_ref().map_or(0, |w| w.offset())
    }

    /// Push what is buffered to the file.
    pub fn flush(&mut self) -> Result<(), Fail> {
        let r = match self.writer.as_mut() {
            Some(w) => w.flush(),
            None => return Ok(()),
        };
        r.map_err(|e| self.failed(e))
    }

    /// Flush, close, and put the file in place under its final name.
    pub fn finish(mut self) -> Result<(), Fail> {
        let Some(w) = self.writer.take() else {
            return Ok(());
        };
        let file = w.finish().map_err(|e| self.failed(e))?;
        drop(file);
        if let Target::Temp { temp, path } = &self.target {
            std::fs::rename(temp, path)
                .map_err(|e| Fail(format!("cannot write output {}: {}", self.name, io_msg(&e))))?;
            self.target = Target::Direct;
        }
        Ok(())
    }
}

impl Drop for CaptureOut {
    /// A run that never finished its output leaves no temporary file.
    fn drop(&mut self) {
        if let Target::Temp { temp, .. } = &self.target {
            let _ = std::fs::remove_file(temp);
        }
    }
}

/// Write a whole text file the same way (through a temporary file renamed
/// over `path`; `-`: standard output).
pub fn write_text(path: &str, text: &str) -> Result<(), Fail> {
    if path == "-" {
        return super::print_out(text);
    }
    let (mut w, target) = open(path, false)?;
    let fail = |e: std::io::Error| Fail(format!("cannot write output {path}: {}", io_msg(&e)));
    w.write_all(text.as_bytes())
        .and_then(|_| w.flush())
        .map_err(fail)?;
    drop(w);
    if let Target::Temp { temp, path: real } = target {
        if let Err(e) = std::fs::rename(&temp, real) {
            let _ = std::fs::remove_file(&temp);
            return Err(fail(e));
        }
    }
    Ok(())
}

/// Check (or create) a directory that outputs go into; `flag` names the
/// option in the error (`--out-dir in.pcap: exists and is not a directory`).
pub fn out_dir(flag: &str, dir: &Path) -> Result<(), Fail> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Fail(format!(
            "{flag} {}: exists and is not a directory",
            dir.display()
        ))),
        Err(_) => std::fs::create_dir_all(dir)
            .map_err(|e| Fail(format!("{flag} {}: {}", dir.display(), io_msg(&e)))),
    }
}

/// A file for the tests of this module.
#[cfg(test)]
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-output-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_only_when_finished() {
        let p = scratch("keep.pcap");
        std::fs::write(&p, b"precious").unwrap();
        let path = p.to_str().unwrap();
        let out = CaptureOut::create(path, &CaptureFormat::pcap(1, 65535)).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        drop(out);
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        let mut out = CaptureOut::create(path, &CaptureFormat::pcap(1, 65535)).unwrap();
        out.write(&Packet::new(1, 0, 1, &[0; 20])).unwrap();
        out.finish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap().len(), 24 + 16 + 20);
        let leftovers = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".tmp")
            })
            .count();
        assert_eq!(leftovers, 0);
    }

    #[test]
    fn device_errors_name_the_output() {
        let mut out = CaptureOut::create("/dev/full", &CaptureFormat::pcap(1, 65535)).unwrap();
        let big = vec![0u8; 60_000];
        let mut err = None;
        for _ in 0..10 {
            if let Err(e) = out.write(&Packet::new(1, 0, 1, &big)) {
                err = Some(e.0);
                break;
            }
        }
        let msg = match err {
            Some(m) => m,
            None => out.finish().err().unwrap().0,
        };
        assert!(
            msg.starts_with("cannot write output /dev/full: No space left on device (after "),
            "{msg}"
        );
    }

    #[test]
    fn out_dir_must_be_a_directory() {
        let f = scratch("not-a-dir");
        std::fs::write(&f, b"x").unwrap();
        let e = out_dir("--out-dir", &f).err().unwrap().0;
        assert!(e.ends_with("exists and is not a directory"), "{e}");
    }
}
