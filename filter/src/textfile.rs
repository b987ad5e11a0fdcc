//! Text files from the user (filter expressions, BPF programs, filter
//! sets, flow programs named with `@FILE`, policy files) read with a
//! bound: one helper, so that `/dev/zero`, a FIFO that never ends or a
//! huge file is refused with a clear error instead of reading until
//! memory runs out.
//!
//! The rule: at most [`MAX_TEXT_FILE_BYTES`] (32 MiB) are read. A regular
//! file larger than that is refused before anything is read; anything
//! else (a device, a pipe) is read up to one byte past the bound and then
//! refused. The largest files the benchmarks use fit several times over
//! (100,000 generated `split` filters: 5.9 MB; 100,000 live-benchmark
//! session filters: about 10 MB; a 100,000-term `host … or host …`
//! expression: 2.0 MB). The text must be UTF-8; the error names the byte
//! offset of the first bad byte, never the bytes.
//!
//! ```
//! use sluice_filter::{read_text_file, MAX_TEXT_FILE_BYTES};
//! let e = read_text_file("/dev/zero".as_ref()).unwrap_err();
//! assert!(e.to_string().contains("32 MiB"), "{e}");
//! assert_eq!(MAX_TEXT_FILE_BYTES, 32 << 20);
//! ```

use std::io::{self, Read};
use std::path::Path;

/// The most bytes sluice reads from a filter, program, filter-set,
/// flow-program or policy file: 32 MiB.
pub const MAX_TEXT_FILE_BYTES: u64 = 32 << 20;

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "longer than {} MiB, the limit for filter, program and policy files",
            MAX_TEXT_FILE_BYTES >> 20
        ),
    )
}

/// Read a whole text file of at most [`MAX_TEXT_FILE_BYTES`].
///
/// Errors: the file's own (not found, permission denied, a directory),
/// "longer than 32 MiB, the limit for filter, program and policy files",
/// or "not UTF-8 text (byte offset N)".
///
/// ```
/// let dir = std::env::temp_dir().join(format!("sluice-textfile-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let p = dir.join("f.txt");
/// std::fs::write(&p, "tcp port 80\n").unwrap();
/// assert_eq!(sluice_filter::read_text_file(&p).unwrap(), "tcp port 80\n");
/// std::fs::write(&p, b"ab\xffcd").unwrap();
/// assert_eq!(sluice_filter::read_text_file(&p).unwrap_err().to_string(), "not UTF-8 text (byte offset 2)");
/// std::fs::remove_dir_all(&dir).unwrap();
/// ```
pub fn read_text_file(path: &Path) -> io::Result<String> {
    let file = std::fs::File::open(path)?;
    if let Ok(m) = file.metadata() {
        if m.is_file() && m.len() > MAX_TEXT_FILE_BYTES {
            return Err(too_large());
        }
    }
    read_text(file)
}

/// Read text from any reader (standard input, a descriptor another
/// process passed) with the same bound and the same errors as
/// [`read_text_file`].
///
/// ```
/// assert_eq!(sluice_filter::read_text(&b"ip"[..]).unwrap(), "ip");
/// let endless = std::io::repeat(b'a');
/// assert!(sluice_filter::read_text(endless).is_err());
/// ```
pub fn read_text(reader: impl Read) -> io::Result<String> {
    let mut buf = Vec::new();
    reader.take(MAX_TEXT_FILE_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_TEXT_FILE_BYTES {
        return Err(too_large());
    }
    String::from_utf8(buf).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "not UTF-8 text (byte offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_big_regular_file_is_refused_before_reading() {
        let dir = std::env::temp_dir().join(format!("sluice-textfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("big");
        let f = std::fs::File::create(&p).unwrap();
        // A sparse file: nothing is written, so a read would be all zeros.
        f.set_len(MAX_TEXT_FILE_BYTES + 1).unwrap();
        let e = read_text_file(&p).unwrap_err();
        assert!(e.to_string().contains("limit"), "{e}");
        f.set_len(MAX_TEXT_FILE_BYTES).unwrap();
        assert_eq!(
            read_text_file(&p).unwrap().len() as u64,
            MAX_TEXT_FILE_BYTES
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn devices_and_directories() {
        assert!(read_text_file("/dev/zero".as_ref())
            .unwrap_err()
            .to_string()
            .contains("32 MiB"));
        assert_eq!(read_text_file("/dev/null".as_ref()).unwrap(), "");
        assert!(read_text_file("/".as_ref()).is_err());
    }
}
