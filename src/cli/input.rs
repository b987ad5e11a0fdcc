//! Opening the capture a command reads: a file or standard input, gzip or
//! zstd compressed ones decompressed as they are read, with errors that say
//! it was the input that failed.

use super::{io_msg, Fail, Reader};
use sluice::capture::CaptureReader;
use std::io::{IsTerminal, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// How a compressed file starts, and whether sluice reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// gzip (read).
    Gzip,
    /// Zstandard (read).
    Zstd,
    /// xz (refused: decompress it first).
    Xz,
    /// bzip2 (refused: decompress it first).
    Bzip2,
}

impl Compression {
    /// The compression a file's first bytes announce, if any.
    pub fn sniff(head: &[u8]) -> Option<Compression> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(Compression::Gzip)
        } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
            Some(Compression::Zstd)
        } else if head.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
            Some(Compression::Xz)
        } else if head.starts_with(b"BZh") && head.len() > 3 && (b'1'..=b'9').contains(&head[3]) {
            Some(Compression::Bzip2)
        } else {
            None
        }
    }

    /// The name of the compression and of the command that undoes it.
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
        }
    }
}

/// Read up to `n` bytes from the start of a stream (fewer at its end).
fn head(r: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut have = 0;
    while have < n {
        match r.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(k) => have += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(have);
    Ok(buf)
}

/// The stream with a compressed capture's layer taken off (gzip, zstd),
/// or an error for a compression sluice does not read.
pub fn decompress(mut raw: Box<dyn Read + Send>, name: &str) -> Result<Box<dyn Read + Send>, Fail> {
    let start =
        head(&mut raw, 6).map_err(|e| Fail(format!("cannot read input {name}: {}", io_msg(&e))))?;
    let kind = Compression::sniff(&start);
    COMPRESSED.store(kind.is_some(), Ordering::Relaxed);
    let whole: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(start).chain(raw));
    Ok(match kind {
        None => whole,
        Some(Compression::Gzip) => Box::new(flate2::read::MultiGzDecoder::new(whole)),
        Some(Compression::Zstd) => Box::new(
            zstd::stream::read::Decoder::new(whole)
                .map_err(|e| Fail(format!("{name}: zstd: {}", io_msg(&e))))?,
        ),
        Some(c) => {
            return Err(Fail(format!(
                "{name}: compressed with {}: decompress it first ({} -dc {name} | sluice ... -r -)",
                c.name(),
                c.name()
            )))
        }
    })
}

/// Open a capture (`None` or `-`: standard input), gzip and zstd files
/// decompressed as they are read; also returns its size in bytes when
/// known (0 otherwise), for the progress bar. With no `-r` and a terminal
/// on standard input there is nothing to read: that is a usage error
/// (`-r -` reads the terminal all the same, after saying so).
pub fn open_capture(path: Option<&str>) -> Result<(Reader, u64), Fail> {
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
    fn sniffs_compressions() {
        assert_eq!(
            Compression::sniff(&[0x1f, 0x8b, 8]),
            Some(Compression::Gzip)
        );
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::sniff(&[0xfd, b'7', b'z', b'X', b'Z', 0]),
            Some(Compression::Xz)
        );
        assert_eq!(Compression::sniff(b"BZh91AY"), Some(Compression::Bzip2));
        assert_eq!(Compression::sniff(&[0xd4, 0xc3, 0xb2, 0xa1]), None);
        assert_eq!(Compression::sniff(&[]), None);
    }

    #[test]
    fn short_streams_pass_through() {
        let mut r = decompress(Box::new(std::io::Cursor::new(vec![1u8, 2])), "x").unwrap();
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!(all, [1, 2]);
    }
}
