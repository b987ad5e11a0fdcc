//! What the subcommands share: failures, reading filter text, opening
//! captures, walking their packets with a progress bar, standard output.

pub mod bench;
pub mod compat;
pub mod daemon;
pub mod decode;
pub mod exec;
pub mod filter;
pub mod flow;
pub mod flow_daemon;
pub mod input;
pub mod live;
pub mod print;
pub mod replay;
pub mod rotate;
pub mod signals;
pub mod split;

pub use input::{open_capture, open_capture_mapped};

use indicatif::{ProgressBar, ProgressStyle};
use sluice::capture::{CaptureReader, Packet};
use sluice::LinkType;
use std::collections::HashMap;
use std::hash::Hash;
use std::io::{IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// A failure that ends the run with status 1.
#[derive(Debug)]
pub struct Fail(pub String);

/// Set when standard output was closed by its reader (`| head -1`): the
/// run then ends quietly with status 0, as other Unix filters do.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether standard output was closed by its reader.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}

/// The failure for an error writing to standard output: a closed pipe is
/// remembered (the run ends quietly), anything else is reported.
pub fn stdout_failed(e: &std::io::Error) -> Fail {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        Fail("standard output closed".into())
    } else {
        Fail(format!("cannot write output <stdout>: {}", io_msg(e)))
    }
}

/// A usage error: printed with clap's usage hint, exit status 2.
pub fn usage(msg: &str) -> ! {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{msg}\n")).exit()
}

/// An I/O error as the system words it, without Rust's `(os error N)`.
pub use sluice::capture::sink::io_message as io_msg;

/// The failure for an output that could not be written: standard output
/// closed by its reader ends the run quietly, as for printed lines.
pub fn out_fail(e: sluice::capture::sink::OutputError) -> Fail {
    if e.name() == "<stdout>" {
        return stdout_failed(e.io());
    }
    Fail(e.to_string())
}

/// Name, on standard error, the temporary files that killed runs left in
/// the directory of `output` (see [`sluice::capture::sink::stale_temporaries`]).
pub fn name_stale_temporaries(output: &str) {
    if output == "-" {
        return;
    }
    let dir = std::path::Path::new(output)
        .parent()
        .unwrap_or(std::path::Path::new(""));
    name_stale_in(dir);
}

/// Name the stale temporary files of one directory.
pub fn name_stale_in(dir: &std::path::Path) {
    for t in sluice::capture::sink::stale_temporaries(dir) {
        eprintln!("sluice: warning: {t}");
    }
}

/// A non-negative number of seconds (an option's value).
pub fn seconds(s: &str) -> Result<std::time::Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    std::time::Duration::try_from_secs_f64(v).map_err(|_| format!("'{s}' is not a duration"))
}

/// Buffered standard output for per-packet lines: a closed pipe stops the
/// run quietly; with `-U` every packet's lines are flushed at once.
pub struct Stdout {
    out: std::io::BufWriter<std::io::Stdout>,
    /// Flush after every [`Stdout::packet_done`].
    pub flush_each: bool,
}

impl Stdout {
    /// Standard output, buffered.
    pub fn new(flush_each: bool) -> Stdout {
        Stdout {
            out: std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout()),
            flush_each,
        }
    }

    /// Write text as it is.
    pub fn put(&mut self, text: &str) -> Result<(), Fail> {
        self.out
            .write_all(text.as_bytes())
            .map_err(|e| stdout_failed(&e))
    }

    /// The end of one packet's output (flushed with `-U`).
    pub fn packet_done(&mut self) -> Result<(), Fail> {
        if self.flush_each {
            self.flush()?;
        }
        Ok(())
    }

    /// Flush what is buffered.
    pub fn flush(&mut self) -> Result<(), Fail> {
        self.out.flush().map_err(|e| stdout_failed(&e))
    }
}

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

/// A capture being read (a file or standard input).
pub type Reader = CaptureReader<Box<dyn Read + Send>>;

/// The snapshot length filters return when the capture gives none.
pub const DEFAULT_SNAPLEN: u32 = 262144;

/// The whole text of a file (at most [`sluice::filter::MAX_TEXT_FILE_BYTES`]),
/// with the file name in the error.
pub fn read_text(path: &str) -> Result<String, Fail> {
    sluice::filter::read_text_file(path.as_ref())
        .map_err(|e| Fail(format!("cannot open {path}: {}", io_msg(&e))))
}

/// The link type of a capture's link-type number, if sluice supports it.
/// The byte order the capture was written in (the capturing host's): NULL
/// and ENC links keep their address family in it.
pub fn big_endian(format: &sluice::capture::CaptureFormat) -> bool {
    match *format {
        sluice::capture::CaptureFormat::Pcap { big_endian, .. } => big_endian,
        sluice::capture::CaptureFormat::PcapNg { big_endian, .. } => big_endian,
    }
}

pub fn linktype_of(n: u16, file: &str) -> Result<LinkType, Fail> {
    LinkType::from_number(n as u32)
        .ok_or_else(|| Fail(format!("{file}: link type {n} is not supported yet")))
}

/// The value cached under `key`, built by `build` the first time (one
/// program or classifier per link type of a pcapng file).
pub fn cached<K: Eq + Hash, T>(
    map: &mut HashMap<K, T>,
    key: K,
    build: impl FnOnce() -> Result<T, Fail>,
) -> Result<&mut T, Fail> {
    Ok(match map.entry(key) {
        std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(build()?),
    })
}

/// Run `each` on every packet of the capture, in order, with a progress bar
/// on standard error for long files when it is a terminal. Stops at the
/// first error of `each` or of the capture (a truncated or corrupt file:
/// every complete packet before the problem has been handed to `each`),
/// and, as at the end of the input, when the run is asked to stop
/// ([`signals::stopping`]).
pub fn for_each_packet(
    reader: &mut Reader,
    size: u64,
    mut each: impl FnMut(&Packet<'_>) -> Result<(), Fail>,
) -> Result<(), Fail> {
    for_each_packet_while(reader, size, |p| each(p).map(|_| true))
}

/// Like [`for_each_packet`], stopping early when `each` returns `false`
/// (`-c N`).
pub fn for_each_packet_while(
    reader: &mut Reader,
    size: u64,
    each: impl FnMut(&Packet<'_>) -> Result<bool, Fail>,
) -> Result<(), Fail> {
    for_each_packet_declaring(reader, size, |_| Ok(()), each)
}

/// Like [`for_each_packet_while`], calling `declared` once for each link
/// type and snapshot length the file declares (a pcap header, each pcapng
/// interface description) before the next packet is read, and at the end:
/// so a program is compiled for an interface no packet uses, as libpcap
/// compiles for the file's link type whatever it holds.
pub fn for_each_packet_declaring(
    reader: &mut Reader,
    size: u64,
    mut declared: impl FnMut(&sluice::capture::InterfaceInfo) -> Result<(), Fail>,
    mut each: impl FnMut(&Packet<'_>) -> Result<bool, Fail>,
) -> Result<(), Fail> {
    let mut known = 0;
    let mut announce = |reader: &Reader| -> Result<(), Fail> {
        for info in &reader.declared_interfaces()[known..] {
            declared(info)?;
            known += 1;
        }
        Ok(())
    };
    let bar = (std::io::stderr().is_terminal() && size > (64 << 20)).then(|| {
        let b = ProgressBar::new(size);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    let mut seen = 0u64;
    let status = loop {
        if let Err(e) = announce(reader) {
            break Err(e);
        }
        if signals::stopping() {
            break Ok(());
        }
        match reader.next_packet() {
            Ok(Some(pkt)) => match each(&pkt) {
                Ok(true) => {}
                Ok(false) => break Ok(()),
                Err(e) => break Err(e),
            },
            Ok(None) => break announce(reader),
            Err(e) => break Err(Fail(e.to_string())),
        }
        seen += 1;
        if let Some(b) = &bar {
            if seen % 4096 == 0 {
                b.set_position(input::position(reader));
            }
        }
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    status
}

/// Print to standard output; a reader that went away (`| head`) is not an error.
pub fn print_out(text: &str) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            Ok(())
        }
        Err(e) => Err(stdout_failed(&e)),
        Ok(()) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_messages_and_counts() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(io_msg(&e), "No such file or directory");
    }
}
