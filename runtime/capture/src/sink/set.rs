//! One capture file per filter in a directory, put in place all together
//! or not at all.
//!
//! The rule: `DIR/NAME.pcap` (`.pcapng` for a pcapng format) is written
//! through an [`OutputFile`]; [`FileSet::finish`] first closes every file
//! (where a full disk shows), and only when all closed renames them all.
//! A set that fails to close, or is dropped unfinished, replaces none of
//! the files that were there before and leaves no temporary behind.

use super::file::{out_dir, OutputError, OutputFile, Placement};
use crate::{CaptureFormat, InterfaceInfo, Packet};
use std::path::{Path, PathBuf};

/// The per-filter output files of one run (or one range of a file).
///
/// ```
/// use sluice_capture::{CaptureFormat, Packet};
/// use sluice_capture::sink::{FileSet, Placement};
/// let dir = std::env::temp_dir().join(format!("sluice-fileset-doc-{}", std::process::id()));
/// let fmt = CaptureFormat::pcap(1, 65535);
/// let mut out = FileSet::create(&dir, &["a", "b"], &fmt, "", false, Placement::Replace)?;
/// out.write(0, &Packet::new(1, 0, 1, &[0u8; 60]))?;
/// let files = out.finish()?;
/// assert!(files[0].as_ref().unwrap().ends_with("a.pcap"));
/// assert!(files[1].is_none()); // lazy: no packet, no file
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), sluice_capture::sink::OutputError>(())
/// ```
pub struct FileSet {
    paths: Vec<PathBuf>,
    format: CaptureFormat,
    placement: Placement,
    open: Vec<Option<OutputFile>>,
    /// The interfaces the input declared, for files opened later.
    declared: Vec<InterfaceInfo>,
}

impl FileSet {
    /// Files `dir/NAME{suffix}.pcap` (`.pcapng` for a pcapng format), one
    /// per name; `eager` creates every file now (an empty capture for a
    /// filter that gets no packet), otherwise a file is created with its
    /// first packet. The directory is created if missing.
    pub fn create<S: AsRef<str>>(
        dir: &Path,
        names: &[S],
        format: &CaptureFormat,
        suffix: &str,
        eager: bool,
        placement: Placement,
    ) -> Result<FileSet, OutputError> {
        out_dir("--out-dir", dir)?;
        let ext = if format.is_pcapng() { "pcapng" } else { "pcap" };
        let mut set = FileSet {
            paths: names
                .iter()
                .map(|n| dir.join(format!("{}{suffix}.{ext}", n.as_ref())))
                .collect(),
            format: *format,
            placement,
            open: names.iter().map(|_| None).collect(),
            declared: Vec::new(),
        };
        if eager {
            for i in 0..set.paths.len() {
                set.file(i)?;
            }
        }
        Ok(set)
    }

    /// The path of filter `i`'s file.
    pub fn path(&self, i: usize) -> &Path {
        &self.paths[i]
    }

    fn file(&mut self, i: usize) -> Result<&mut OutputFile, OutputError> {
        if self.open[i].is_none() {
            let path = self.paths[i].to_string_lossy().into_owned();
            let mut f = OutputFile::create(&path, &self.format, self.placement)?;
            for info in &self.declared {
                f.declare(*info)?;
            }
            self.open[i] = Some(f);
        }
        match self.open[i].as_mut() {
            Some(f) => Ok(f),
            None => unreachable!("the file was just opened"),
        }
    }

    /// Write a packet to filter `i`'s file. After a failure the set can
    /// no longer be finished: with [`Placement::Replace`] no file of it
    /// is put in place.
    pub fn write(&mut self, i: usize, pkt: &Packet<'_>) -> Result<(), OutputError> {
        let note = self.failure_note();
        self.file(i)?.write(pkt).map_err(|e| e.with_note(note))
    }

    /// What a failure comes to for the whole set.
    fn failure_note(&self) -> &'static str {
        match self.placement {
            Placement::Replace => {
                "no output of this run was written (existing ones are left as they were)"
            }
            Placement::InPlace => "each output holds what it got before the error",
        }
    }

    /// An interface the input declares (pcapng): every file, open now or
    /// later, declares it, so that one without packets is still readable.
    pub fn declare(&mut self, info: InterfaceInfo) -> Result<(), OutputError> {
        if self.declared.is_empty() {
            self.declared.push(info);
            for f in self.open.iter_mut().flatten() {
                f.declare(info)?;
            }
        }
        Ok(())
    }

    /// Push what is buffered to every open file.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        for f in self.open.iter_mut().flatten() {
            f.flush()?;
        }
        Ok(())
    }

    /// Close every file, then put them all in place; the files, `None`
    /// for a filter that got no packet (lazy files). When a file cannot be
    /// closed (a full disk), none is put in place, no temporary remains,
    /// and the error says so.
    pub fn finish(mut self) -> Result<Vec<Option<PathBuf>>, OutputError> {
        for i in 0..self.open.len() {
            let note = self.failure_note();
            if let Some(f) = self.open[i].as_mut() {
                if let Err(e) = f.close() {
                    return Err(e.with_note(note));
                }
            }
        }
        let mut files = Vec::with_capacity(self.open.len());
        for i in 0..self.open.len() {
            match self.open[i].as_mut() {
                Some(f) => {
                    f.commit()?;
                    files.push(Some(self.paths[i].clone()));
                }
                None => files.push(None),
            }
        }
        Ok(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-set-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn empty_pcapng_outputs_are_readable() {
        let d = scratch("ng");
        let fmt = CaptureFormat::pcapng();
        let mut set = FileSet::create(&d, &["x", "y"], &fmt, "", true, Placement::Replace).unwrap();
        set.declare(InterfaceInfo {
            linktype: 113,
            snaplen: 0,
        })
        .unwrap();
        set.finish().unwrap();
        for n in ["x.pcapng", "y.pcapng"] {
            let bytes = std::fs::read(d.join(n)).unwrap();
            let r = crate::CaptureReader::from_reader(&bytes[..], n).unwrap();
            assert_eq!(r.linktype(), Some(113));
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn unfinished_sets_replace_nothing() {
        let d = scratch("drop");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("a.pcap"), b"old").unwrap();
        let fmt = CaptureFormat::pcap(1, 65535);
        let mut set = FileSet::create(&d, &["a", "b"], &fmt, "", true, Placement::Replace).unwrap();
        set.write(0, &Packet::new(1, 0, 1, &[1; 30])).unwrap();
        drop(set);
        let names: Vec<String> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["a.pcap"]);
        assert_eq!(std::fs::read(d.join("a.pcap")).unwrap(), b"old");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
