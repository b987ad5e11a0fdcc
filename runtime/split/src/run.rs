//! One pass of a filter set over a capture file, or over the records that
//! start in one byte range of it: counts per filter, and per-filter
//! capture files.

use crate::{SplitError, Splitter};
use sluice_capture::sink::{FileSet, Placement};
use sluice_capture::{open_range, CaptureFormat, Checkpoint, RangeEnds};
use std::path::{Path, PathBuf};

/// Which part of the file a run reads.
///
/// ```
/// let whole = sluice_split::Part::whole();
/// assert_eq!((whole.start, whole.end), (0, u64::MAX));
/// ```
#[derive(Clone, Debug)]
pub struct Part {
    /// First byte: the run reads the records that start at or after it.
    pub start: u64,
    /// The run stops before the first record that starts at or after it.
    pub end: u64,
    /// The exact place to start from, when known (see
    /// [`sluice_capture::verify_chain`]); otherwise the first record at or
    /// after `start` is searched for.
    pub resume: Option<Checkpoint>,
}

impl Part {
    /// The whole file.
    pub fn whole() -> Part {
        Part {
            start: 0,
            end: u64::MAX,
            resume: None,
        }
    }
}

/// Where the per-filter files go.
///
/// ```
/// let o = sluice_split::Outputs { dir: "out".into(), suffix: String::new(), eager: true };
/// assert!(o.eager);
/// ```
#[derive(Clone, Debug)]
pub struct Outputs {
    /// The directory (created if missing).
    pub dir: PathBuf,
    /// Put between a filter's name and the extension (a shard's number).
    pub suffix: String,
    /// Create every filter's file, even without packets (as `sluice
    /// split`); otherwise only files that get packets exist.
    pub eager: bool,
}

/// What one run did.
#[derive(Debug)]
pub struct Report {
    /// Packets read.
    pub packets: u64,
    /// Packets given to each filter, in set order.
    pub counts: Vec<u64>,
    /// Each filter's output file (`None`: none written).
    pub files: Vec<Option<PathBuf>>,
    /// Where reading started and stopped (for a range); a run that
    /// stopped with an error is `failed` and has no `next`.
    pub ends: RangeEnds,
    /// The capture's format.
    pub format: CaptureFormat,
    /// Why the run stopped before the end of its part, if it did: a
    /// corrupt or truncated record (in a range: the file's error only if
    /// the range is found to have started right), a link type met in the
    /// capture that the filters do not compile for, an output that
    /// cannot be written, or the progress callback's stop. Everything
    /// read before it was counted and written.
    pub error: Option<SplitError>,
}

/// How many packets between two calls of the progress callback.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Split the records of `path` that start in `part`: count each filter's
/// packets and, with `outputs`, write them to per-filter files.
/// `progress` is called with the file offset reached every 65,536
/// packets; returning `false` stops the run ([`SplitError::Stopped`] in
/// the report).
///
/// Errors found before any packet is read (the file cannot be opened, a
/// filter does not compile for the capture's link type, the output
/// directory cannot be made) are returned as `Err`, and nothing is
/// written.
///
/// ```
/// use sluice_split::{filter_pairs, split, Options, Part, Splitter};
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
/// let set = Splitter::new(filter_pairs([("tcp", "tcp"), ("udp", "udp")]).unwrap(), Options::default());
/// let r = split(sample.as_ref(), &set, &Part::whole(), None, &mut |_| true)?;
/// assert!(r.error.is_none());
/// assert_eq!(r.counts.len(), 2);
/// assert!(r.counts[0] > 0 && r.counts[0] + r.counts[1] <= r.packets);
/// # Ok::<(), sluice_split::SplitError>(())
/// ```
pub fn split(
    path: &Path,
    splitter: &Splitter,
    part: &Part,
    outputs: Option<&Outputs>,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Report, SplitError> {
    let name = path.display().to_string();
    let open_error = |e: std::io::Error| {
        SplitError::Capture(sluice_capture::CaptureError::new(
            &name,
            0,
            sluice_capture::ErrorKind::Io(e),
        ))
    };
    let file = std::fs::File::open(path).map_err(open_error)?;
    if file.metadata().map_err(open_error)?.is_dir() {
        return Err(open_error(std::io::Error::other("Is a directory")));
    }
    let file = std::io::BufReader::with_capacity(1 << 20, file);
    let mut range = open_range(file, &name, part.start, part.end, part.resume.as_ref())?;
    let format = range.format();
    let big_endian = match format {
        CaptureFormat::Pcap { big_endian, .. } | CaptureFormat::PcapNg { big_endian, .. } => {
            big_endian
        }
    };
    // Compile for the capture's link type before anything is written
    // (a pcapng file that names none before its first packet: when the
    // packet comes).
    if let Some(lt) = format.linktype() {
        splitter.merged(lt, big_endian)?;
    }
    let n = splitter.filters().len();
    let mut files = match outputs {
        Some(o) => {
            let names: Vec<&str> = splitter.filters().iter().map(|f| f.name.as_str()).collect();
            let mut set = FileSet::create(
                &o.dir,
                &names,
                &format,
                &o.suffix,
                o.eager,
                Placement::Replace,
            )?;
            if let CaptureFormat::PcapNg {
                first_interface: Some(info),
                ..
            } = format
            {
                set.declare(info)?;
            }
            Some(set)
        }
        None => None,
    };
    let mut classify = splitter.classifier(big_endian);
    let mut counts = vec![0u64; n];
    let mut packets = 0u64;
    let mut error = None;
    loop {
        let pkt = match range.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break,
            Err(e) => {
                error = Some(SplitError::Capture(e));
                break;
            }
        };
        let ids = match classify.classify(&pkt) {
            Ok(ids) => ids,
            Err(e) => {
                error = Some(e);
                break;
            }
        };
        let mut failed = None;
        for &id in ids {
            counts[id as usize] += 1;
            if let Some(f) = files.as_mut() {
                if let Err(e) = f.write(id as usize, &pkt) {
                    failed = Some(SplitError::Output(e));
                    break;
                }
            }
        }
        packets += 1;
        if failed.is_some() {
            error = failed;
            break;
        }
        if packets % PROGRESS_EVERY == 0 && !progress(range.offset()) {
            error = Some(SplitError::Stopped);
            break;
        }
    }
    let files = match files {
        Some(f) => match f.finish() {
            Ok(v) => v,
            Err(e) => {
                error = error.or(Some(SplitError::Output(e)));
                vec![None; n]
            }
        },
        None => vec![None; n],
    };
    let mut ends = range.finish();
    if error.is_some() {
        // Stopped early, whatever the cause: no exact stop to chain from.
        ends.failed = true;
        ends.next = None;
    }
    Ok(Report {
        packets,
        counts,
        files,
        ends,
        format,
        error,
    })
}
