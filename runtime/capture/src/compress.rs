//! Compressed captures: gzip and zstd files read as they are
//! decompressed, xz and bzip2 recognised and refused with what to do.
//!
//! The rule: every reader of captures (the command, the split library,
//! the Python module) takes the compression layer off here, so a file one
//! of them reads, all of them read. A compressed capture is read from its
//! start only: [`SeekableInput`] lets range readers open it whole, and
//! any seek elsewhere fails saying so.
//!
//! ```
//! use sluice_capture::{decompress, Compression};
//! use std::io::{Read, Write};
//! let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
//! gz.write_all(b"capture bytes")?;
//! let raw = gz.finish()?;
//! let (mut stream, kind) = decompress(Box::new(std::io::Cursor::new(raw)))?;
//! assert_eq!(kind, Some(Compression::Gzip));
//! let mut text = String::new();
//! stream.read_to_string(&mut text)?;
//! assert_eq!(text, "capture bytes");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::{self, Read, Seek, SeekFrom};

/// How a compressed file starts, and whether sluice reads it.
///
/// ```
/// use sluice_capture::Compression;
/// assert_eq!(Compression::sniff(&[0x1f, 0x8b, 8]), Some(Compression::Gzip));
/// assert_eq!(Compression::sniff(&[0xd4, 0xc3, 0xb2, 0xa1]), None);
/// assert_eq!(Compression::Xz.name(), "xz");
/// ```
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
    ///
    /// ```
    /// use sluice_capture::Compression;
    /// assert_eq!(Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd]), Some(Compression::Zstd));
    /// ```
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
    ///
    /// ```
    /// assert_eq!(sluice_capture::Compression::Gzip.name(), "gzip");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
        }
    }

    /// Whether sluice reads it.
    ///
    /// ```
    /// assert!(sluice_capture::Compression::Zstd.is_read());
    /// assert!(!sluice_capture::Compression::Bzip2.is_read());
    /// ```
    pub fn is_read(self) -> bool {
        matches!(self, Compression::Gzip | Compression::Zstd)
    }
}

/// Why a possibly compressed input cannot be read.
///
/// ```
/// use sluice_capture::{decompress, DecompressError};
/// let xz = vec![0xfd, b'7', b'z', b'X', b'Z', 0, 1, 2];
/// let e = decompress(Box::new(std::io::Cursor::new(xz))).err().unwrap();
/// assert!(matches!(e, DecompressError::Unsupported(_)));
/// assert_eq!(e.to_string(), "compressed with xz: decompress it first");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum DecompressError {
    /// Its first bytes could not be read.
    #[error("cannot read its first bytes")]
    Read(#[source] io::Error),
    /// The zstd decoder could not start.
    #[error("zstd")]
    Zstd(#[source] io::Error),
    /// A compression sluice does not read.
    #[error("compressed with {}: decompress it first", .0.name())]
    Unsupported(Compression),
}

/// Read up to `n` bytes from the start of a stream (fewer at its end).
fn head(r: &mut impl Read, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n];
    let mut have = 0;
    while have < n {
        match r.read(&mut buf[have..]) {
            Ok(0) => break,
            Ok(k) => have += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(have);
    Ok(buf)
}

/// The decoder for a stream of a compression sluice reads.
fn decoder(
    whole: Box<dyn Read + Send>,
    kind: Compression,
) -> Result<Box<dyn Read + Send>, DecompressError> {
    Ok(match kind {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(whole)),
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::new(whole).map_err(DecompressError::Zstd)?)
        }
        other => return Err(DecompressError::Unsupported(other)),
    })
}

/// The stream with a compressed capture's layer taken off (gzip, zstd),
/// and the compression found; the stream as it is when it is not
/// compressed.
///
/// ```
/// let (_, kind) = sluice_capture::decompress(Box::new(std::io::Cursor::new(vec![0xd4, 0xc3])))?;
/// assert_eq!(kind, None);
/// # Ok::<(), sluice_capture::DecompressError>(())
/// ```
pub fn decompress(
    mut raw: Box<dyn Read + Send>,
) -> Result<(Box<dyn Read + Send>, Option<Compression>), DecompressError> {
    let start = head(&mut raw, 6).map_err(DecompressError::Read)?;
    let kind = Compression::sniff(&start);
    let whole: Box<dyn Read + Send> = Box::new(io::Cursor::new(start).chain(raw));
    Ok(match kind {
        None => (whole, None),
        Some(k) => (decoder(whole, k)?, Some(k)),
    })
}

/// A capture input that may be compressed: a seekable file as it is, or
/// a compressed one's decompressed stream, which can only be "sought" to
/// where it is (so a reader of ranges can open it whole, and nothing
/// more).
///
/// ```
/// use sluice_capture::{open_range, SeekableInput};
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
/// let input = SeekableInput::new(std::fs::File::open(sample)?)?;
/// assert!(input.compression().is_none());
/// let mut r = open_range(input, "sample", 0, u64::MAX, None)?;
/// assert!(r.next_packet()?.is_some());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SeekableInput<R> {
    inner: Inner<R>,
    compression: Option<Compression>,
}

enum Inner<R> {
    Plain(R),
    Stream {
        stream: Box<dyn Read + Send>,
        pos: u64,
    },
}

impl<R: Read + Seek + Send + 'static> SeekableInput<R> {
    /// Look at the first bytes of `file` (then back to its start).
    ///
    /// ```
    /// let i = sluice_capture::SeekableInput::new(std::io::Cursor::new(vec![0x1f, 0x8b, 8]))?;
    /// assert_eq!(i.compression(), Some(sluice_capture::Compression::Gzip));
    /// # Ok::<(), sluice_capture::DecompressError>(())
    /// ```
    pub fn new(mut file: R) -> Result<SeekableInput<R>, DecompressError> {
        let start = head(&mut file, 6).map_err(DecompressError::Read)?;
        file.seek(SeekFrom::Start(0))
            .map_err(DecompressError::Read)?;
        let Some(kind) = Compression::sniff(&start) else {
            return Ok(SeekableInput {
                inner: Inner::Plain(file),
                compression: None,
            });
        };
        Ok(SeekableInput {
            inner: Inner::Stream {
                stream: decoder(Box::new(file), kind)?,
                pos: 0,
            },
            compression: Some(kind),
        })
    }
}

impl<R> SeekableInput<R> {
    /// The compression taken off, if any.
    ///
    /// ```
    /// let i = sluice_capture::SeekableInput::new(std::io::Cursor::new(vec![1u8, 2, 3])).unwrap();
    /// assert_eq!(i.compression(), None);
    /// ```
    pub fn compression(&self) -> Option<Compression> {
        self.compression
    }
}

impl<R: Read> Read for SeekableInput<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Plain(r) => r.read(buf),
            Inner::Stream { stream, pos } => {
                let n = stream.read(buf)?;
                *pos += n as u64;
                Ok(n)
            }
        }
    }
}

impl<R: Seek> Seek for SeekableInput<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        match &mut self.inner {
            Inner::Plain(r) => r.seek(to),
            Inner::Stream { pos, .. } => match to {
                SeekFrom::Start(n) if n == *pos => Ok(n),
                SeekFrom::Current(0) => Ok(*pos),
                _ => Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "a compressed capture is read from its start to its end only (no ranges)",
                )),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn sniffs_compressions() {
        assert_eq!(
            Compression::sniff(&[0x28, 0xb5, 0x2f, 0xfd, 0]),
            Some(Compression::Zstd)
        );
        assert_eq!(
            Compression::sniff(&[0xfd, b'7', b'z', b'X', b'Z', 0]),
            Some(Compression::Xz)
        );
        assert_eq!(Compression::sniff(b"BZh91AY"), Some(Compression::Bzip2));
        assert_eq!(Compression::sniff(b"BZhx"), None);
        assert_eq!(Compression::sniff(&[]), None);
    }

    #[test]
    fn short_streams_pass_through() {
        let (mut r, kind) = decompress(Box::new(io::Cursor::new(vec![1u8, 2]))).unwrap();
        let mut all = Vec::new();
        r.read_to_end(&mut all).unwrap();
        assert_eq!((all, kind), (vec![1, 2], None));
    }

    #[test]
    fn compressed_inputs_seek_only_where_they_are() {
        let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
        let z = zstd::stream::encode_all(&data[..], 3).unwrap();
        let mut input = SeekableInput::new(io::Cursor::new(z)).unwrap();
        assert_eq!(input.compression(), Some(Compression::Zstd));
        assert_eq!(input.seek(SeekFrom::Start(0)).unwrap(), 0);
        let mut first = [0u8; 100];
        input.read_exact(&mut first).unwrap();
        assert_eq!(input.stream_position().unwrap(), 100);
        assert!(input.seek(SeekFrom::End(0)).is_err());
        assert!(input.seek(SeekFrom::Start(0)).is_err());
        let mut rest = Vec::new();
        input.read_to_end(&mut rest).unwrap();
        assert_eq!([&first[..], &rest[..]].concat(), data);
        // Plain files keep every seek.
        let mut plain = SeekableInput::new(io::Cursor::new(data.clone())).unwrap();
        assert_eq!(plain.seek(SeekFrom::End(0)).unwrap(), 5000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&data).unwrap();
        let gz = SeekableInput::new(io::Cursor::new(gz.finish().unwrap())).unwrap();
        assert_eq!(gz.compression(), Some(Compression::Gzip));
    }
}
