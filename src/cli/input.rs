//! Opening the capture a command reads: a file or standard input, gzip or
//! zstd compressed ones decompressed as they are read, with errors that say
//! it was the input that failed.

use super::{io_msg, Fail, Reader};
use sluice::capture::{CaptureReader, Compression, DecompressError, Mapped};
use std::io::{IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes read from the file of the capture opened last, before any
/// decompression (what the progress bar compares with the file's size).
static RAW_READ: AtomicU64 = AtomicU64::new(0);
/// Whether the capture opened last is compressed.
static COMPRESSED: AtomicBool = AtomicBool::new(false);

/// A file that counts the bytes read from it in [`RAW_READ`].
struct Counted<R>(R);

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.0.read(buf)?;
        RAW_READ.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// How far into its file the capture opened last has been read, in the
/// file's own bytes: the reader's offset, or for a compressed file the
/// compressed bytes read so far (the size is the compressed size).
pub fn position(reader: &Reader) -> u64 {
    if COMPRESSED.load(Ordering::Relaxed) {
        RAW_READ.load(Ordering::Relaxed)
    } else {
        reader.offset()
    }
}

/// The stream with a compressed capture's layer taken off (gzip, zstd;
/// `sluice_capture::decompress`), or an error for a compression sluice
/// does not read, in the command's words.
pub fn decompress(raw: Box<dyn Read + Send>, name: &str) -> Result<Box<dyn Read + Send>, Fail> {
    let (stream, kind) = sluice::capture::decompress(raw).map_err(|e| match e {
        DecompressError::Read(e) => Fail(format!("cannot read input {name}: {}", io_msg(&e))),
        DecompressError::Zstd(e) => Fail(format!("{name}: zstd: {}", io_msg(&e))),
        DecompressError::Unsupported(c) => Fail(format!(
            "{name}: compressed with {}: decompress it first ({} -dc {name} | sluice ... -r -)",
            c.name(),
            c.name()
        )),
    })?;
    COMPRESSED.store(kind.is_some(), Ordering::Relaxed);
    Ok(stream)
}

/// Open a capture (`None` or `-`: standard input), gzip and zstd files
/// decompressed as they are read; also returns its size in bytes when
/// known (0 otherwise), for the progress bar. With no `-r` and a terminal
/// on standard input there is nothing to read: that is a usage error
/// (`-r -` reads the terminal all the same, after saying so).
pub fn open_capture(path: Option<&str>) -> Result<(Reader, u64), Fail> {
    open(path, false)
}

/// [`open_capture`], with a plain (uncompressed) regular file mapped into
/// memory ([`sluice::capture::Mapped`]), so that its packets are slices of
/// the file that other threads can take by their offsets
/// ([`Reader::mapping`]); anything else is read as `open_capture` reads it.
pub fn open_capture_mapped(path: Option<&str>) -> Result<(Reader, u64), Fail> {
    open(path, true)
}

fn open(path: Option<&str>, map: bool) -> Result<(Reader, u64), Fail> {
    if path.is_none() && std::io::stdin().is_terminal() {
        super::usage(
            "no capture to read: standard input is a terminal; give -r FILE (or -r - to read standard input)",
        );
    }
    let path = path.unwrap_or("-");
    if path == "-" && std::io::stdin().is_terminal() {
        let _ = writeln!(
            std::io::stderr(),
            "sluice: reading a capture from standard input, a terminal (end it with Ctrl-D)"
        );
    }
    let (raw, name, size): (Box<dyn Read + Send>, String, u64) = if path == "-" {
        (Box::new(std::io::stdin()), "<stdin>".into(), 0)
    } else {
        let file = std::fs::File::open(path)
            .map_err(|e| Fail(format!("cannot open input {path}: {}", io_msg(&e))))?;
        let meta = file
            .metadata()
            .map_err(|e| Fail(format!("cannot open input {path}: {}", io_msg(&e))))?;
        if meta.is_dir() {
            return Err(Fail(format!("cannot open input {path}: Is a directory")));
        }
        if let Some(m) = map.then(|| Mapped::new(&file)).flatten() {
            let head = &m.bytes()[..m.bytes().len().min(8)];
            if Compression::sniff(head).is_none() {
                COMPRESSED.store(false, Ordering::Relaxed);
                let reader = CaptureReader::from_mapped(Arc::new(m), path)?;
                return Ok((reader, meta.len()));
            }
        }
        RAW_READ.store(0, Ordering::Relaxed);
        (Box::new(Counted(file)), path.to_string(), meta.len())
    };
    let stream = decompress(raw, &name)?;
    let reader = CaptureReader::from_reader(stream, name)?;
    Ok((reader, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_streams_pass_through() {
        let mut r = decompress(Box::new(std::io::Cursor::new(vec![1u8, 2])), "x").unwrap();
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, [1, 2]);
    }

    #[test]
    fn refusals_name_the_input_and_the_command() {
        let xz = vec![0xfd, b'7', b'z', b'X', b'Z', 0, 1];
        let Err(Fail(e)) = decompress(Box::new(std::io::Cursor::new(xz)), "a.xz") else {
            panic!("xz is refused");
        };
        assert_eq!(
            e,
            "a.xz: compressed with xz: decompress it first (xz -dc a.xz | sluice ... -r -)"
        );
    }
}
