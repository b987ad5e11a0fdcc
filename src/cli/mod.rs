//! What the subcommands share: failures, reading filter text, opening
//! captures, walking their packets with a progress bar.

pub mod bench;
pub mod filter;
pub mod flow;
pub mod split;

use indicatif::{ProgressBar, ProgressStyle};
use sluice::capture::{CaptureReader, Packet};
use sluice::LinkType;
use std::collections::HashMap;
use std::hash::Hash;
use std::io::{IsTerminal, Read, Write};

/// A failure that ends the run with status 1.
pub struct Fail(pub String);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

/// A capture being read (a file or standard input).
pub type Reader = CaptureReader<Box<dyn Read + Send>>;

/// The snapshot length filters return when the capture gives none.
pub const DEFAULT_SNAPLEN: u32 = 262144;

/// The whole text of a file, with the file name in the error.
pub fn read_text(path: &str) -> Result<String, Fail> {
    std::fs::read_to_string(path).map_err(|e| Fail(format!("{path}: {e}")))
}

/// A line of filter text without its `#` comment (tcpdump's `-F` rule; the
/// pcap language never uses `#`).
pub fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or("")
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

/// Open a capture (`None` or `-`: standard input); also returns its size in
/// bytes when known (0 otherwise), for the progress bar.
pub fn open_capture(path: Option<&str>) -> Result<(Reader, u64), Fail> {
    let path = path.unwrap_or("-");
    let reader = CaptureReader::open(path)?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    Ok((reader, size))
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
/// every complete packet before the problem has been handed to `each`).
pub fn for_each_packet(
    reader: &mut Reader,
    size: u64,
    mut each: impl FnMut(&Packet<'_>) -> Result<(), Fail>,
) -> Result<(), Fail> {
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
        match reader.next_packet() {
            Ok(Some(pkt)) => {
                if let Err(e) = each(&pkt) {
                    break Err(e);
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(Fail(e.to_string())),
        }
        seen += 1;
        if let Some(b) = &bar {
            if seen % 4096 == 0 {
                b.set_position(reader.offset());
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
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
