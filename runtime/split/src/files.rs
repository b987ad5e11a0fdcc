//! One capture file per filter in a directory: `DIR/NAME.pcap` (or
//! `.pcapng`, as the input), each written under a temporary name and
//! renamed when finished, so a reader never sees half a file and a run
//! that fails leaves the files it would replace as they were.

use crate::{FilterLine, SplitError};
use sluice_capture::{CaptureError, CaptureFormat, CaptureWriter, ErrorKind, Packet};
use std::fs::File;
use std::path::{Path, PathBuf};

/// An output file being written: the writer and its temporary name.
struct Open {
    writer: CaptureWriter<File>,
    temp: PathBuf,
}

/// The per-filter output files of one split (or one range of it).
///
/// ```
/// use sluice_capture::{CaptureFormat, Packet};
/// use sluice_split::{filter_pairs, OutputFiles};
/// let dir = std::env::temp_dir().join(format!("sluice-split-doc-{}", std::process::id()));
/// let set = filter_pairs([("a", "ip"), ("b", "arp")]).unwrap();
/// let mut out = OutputFiles::create(&dir, &set, &CaptureFormat::pcap(1, 65535), "", false)?;
/// out.write(0, &Packet::new(1, 0, 1, &[0u8; 60]))?;
/// let files = out.finish()?;
/// assert!(files[0].as_ref().unwrap().ends_with("a.pcap"));
/// assert!(files[1].is_none()); // lazy: no packet, no file
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), sluice_split::SplitError>(())
/// ```
pub struct OutputFiles {
    paths: Vec<PathBuf>,
    format: CaptureFormat,
    open: Vec<Option<Open>>,
    packets: Vec<u64>,
}

impl OutputFiles {
    /// Files `dir/NAME{suffix}.pcap` (`.pcapng` for a pcapng format), one
    /// per filter; `eager` creates every file now (an empty capture for a
    /// filter that gets no packet, as `sluice split` does), otherwise a
    /// file is created with its first packet. The directory is created if
    /// missing.
    pub fn create(
        dir: &Path,
        filters: &[FilterLine],
        format: &CaptureFormat,
        suffix: &str,
        eager: bool,
    ) -> Result<OutputFiles, SplitError> {
        match std::fs::metadata(dir) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(SplitError::Output {
                    path: dir.to_path_buf(),
                    source: std::io::Error::other("exists and is not a directory"),
                })
            }
            Err(_) => std::fs::create_dir_all(dir).map_err(|source| SplitError::Output {
                path: dir.to_path_buf(),
                source,
            })?,
        }
        let ext = if format.is_pcapng() { "pcapng" } else { "pcap" };
        let mut out = OutputFiles {
            paths: filters
                .iter()
                .map(|f| dir.join(format!("{}{suffix}.{ext}", f.name)))
                .collect(),
            format: *format,
            open: filters.iter().map(|_| None).collect(),
            packets: vec![0; filters.len()],
        };
        if eager {
            for i in 0..filters.len() {
                out.open_file(i)?;
            }
        }
        Ok(out)
    }

    fn failed(&self, i: usize, e: CaptureError) -> SplitError {
        let path = self.paths[i].clone();
        let source = match e.into_kind() {
            ErrorKind::Io(io) => io,
            other => std::io::Error::other(other.to_string()),
        };
        SplitError::Output { path, source }
    }

    fn open_file(&mut self, i: usize) -> Result<&mut Open, SplitError> {
        if self.open[i].is_none() {
            let path = &self.paths[i];
            let file_name = path.file_name().unwrap_or_default().to_string_lossy();
            let temp = path.with_file_name(format!(".{file_name}.{}.tmp", std::process::id()));
            let file = File::create(&temp).map_err(|source| SplitError::Output {
                path: path.clone(),
                source,
            })?;
            let name = path.display().to_string();
            let writer = match CaptureWriter::new(file, name, &self.format) {
                Ok(w) => w,
                Err(e) => {
                    let _ = std::fs::remove_file(&temp);
                    return Err(self.failed(i, e));
                }
            };
            self.open[i] = Some(Open { writer, temp });
        }
        match self.open[i].as_mut() {
            Some(o) => Ok(o),
            None => unreachable!("the file was just opened"),
        }
    }

    /// Write a packet to filter `i`'s file.
    pub fn write(&mut self, i: usize, pkt: &Packet<'_>) -> Result<(), SplitError> {
        let open = self.open_file(i)?;
        if let Err(e) = open.writer.write_packet(pkt) {
            return Err(self.failed(i, e));
        }
        self.packets[i] += 1;
        Ok(())
    }

    /// Flush, close and rename every file to its name; the files, `None`
    /// for a filter that got none (lazy files). Stops at the first error;
    /// the temporary files not renamed are removed.
    pub fn finish(mut self) -> Result<Vec<Option<PathBuf>>, SplitError> {
        let mut files = Vec::with_capacity(self.open.len());
        for i in 0..self.open.len() {
            let Some(Open { writer, temp }) = self.open[i].take() else {
                files.push(None);
                continue;
            };
            let done = writer
                .finish()
                .map_err(|e| self.failed(i, e))
                .and_then(|f| {
                    drop(f);
                    std::fs::rename(&temp, &self.paths[i]).map_err(|source| SplitError::Output {
                        path: self.paths[i].clone(),
                        source,
                    })
                });
            if let Err(e) = done {
                let _ = std::fs::remove_file(&temp);
                return Err(e);
            }
            files.push(Some(self.paths[i].clone()));
        }
        Ok(files)
    }
}

impl Drop for OutputFiles {
    /// Files never finished leave no temporary file behind.
    fn drop(&mut self) {
        for o in self.open.iter_mut().filter_map(Option::take) {
            drop(o.writer);
            let _ = std::fs::remove_file(&o.temp);
        }
    }
}
