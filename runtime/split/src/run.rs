//! One pass of a filter set over a capture file, or over the records that
//! start in one byte range of it: counts per filter, and per-filter
//! capture files.

use crate::{SplitError, Splitter};
use sluice_capture::sink::{FileSet, Placement};
use sluice_capture::{open_range, CaptureFormat, Checkpoint, Packet, RangeEnds, SeekableInput};
use sluice_fragments::{Dispatcher, Mode, Output, Source};
use std::io::{Read, Seek};
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
    /// Fragment dispatch's counts (with [`crate::Options::fragments`]).
    pub fragments: Option<sluice_fragments::Counters>,
    /// The MPF set's counts (with [`crate::Options::mpf`]): postponed
    /// packets that timed out, were refused or still wait are there.
    pub mpf: Option<sluice_mpf::Stats>,
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
/// packets and, with `outputs`, write them to per-filter files. A gzip
/// or zstd file is decompressed as it is read (whole: it has no ranges).
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
    split_reader(file, &name, splitter, part, outputs, progress)
}

/// [`split`] over any seekable input (a file opened some other way, a
/// remote file read in ranges), named `name` in errors.
///
/// ```
/// use sluice_split::{filter_pairs, split_reader, Options, Part, Splitter};
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
/// let bytes = std::fs::read(sample).unwrap();
/// let set = Splitter::new(filter_pairs([("all", "")]).unwrap(), Options::default());
/// let r = split_reader(std::io::Cursor::new(bytes), "mem", &set, &Part::whole(), None, &mut |_| true)?;
/// assert_eq!(r.counts[0], r.packets);
/// # Ok::<(), sluice_split::SplitError>(())
/// ```
pub fn split_reader<R: Read + Seek + Send + 'static>(
    input: R,
    name: &str,
    splitter: &Splitter,
    part: &Part,
    outputs: Option<&Outputs>,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Report, SplitError> {
    let input = SeekableInput::new(input).map_err(|e| SplitError::Compressed(name.into(), e))?;
    let whole = part.start == 0 && part.end == u64::MAX && part.resume.is_none();
    if input.compression().is_some() && !whole {
        return Err(SplitError::Settings(format!(
            "{name}: a compressed capture is read whole, not in byte ranges"
        )));
    }
    run(input, name, splitter, part, outputs, progress)
}

/// Where the packets of a run go: counts and per-filter files.
struct Deliver {
    counts: Vec<u64>,
    files: Option<FileSet>,
}

impl Deliver {
    fn to(&mut self, pkt: &Packet<'_>, ids: &[u32]) -> Result<(), SplitError> {
        for &id in ids {
            self.counts[id as usize] += 1;
            if let Some(f) = self.files.as_mut() {
                f.write(id as usize, pkt).map_err(SplitError::Output)?;
            }
        }
        Ok(())
    }
}

/// What decides where the packets of a run go.
enum Judge<'a> {
    /// The merged classifier, alone.
    Plain(crate::Classify<'a>),
    /// The merged classifier, then fragment dispatch.
    Fragments(crate::Classify<'a>, Box<Dispatcher>, Output),
    /// One MPF set.
    Mpf(Box<sluice_mpf::MpfSet>, Vec<sluice_mpf::Delivery>),
}

fn run<R: Read + Seek>(
    input: R,
    name: &str,
    splitter: &Splitter,
    part: &Part,
    outputs: Option<&Outputs>,
    progress: &mut dyn FnMut(u64) -> bool,
) -> Result<Report, SplitError> {
    let options = splitter.options();
    if options.mpf.is_some() && (options.fragments.is_some() || options.first_match) {
        return Err(SplitError::Settings(
            "MPF splits give each packet to every filter that takes it, without fragment dispatch"
                .into(),
        ));
    }
    let mut range = open_range(input, name, part.start, part.end, part.resume.as_ref())?;
    let format = range.format();
    let big_endian = match format {
        CaptureFormat::Pcap { big_endian, .. } | CaptureFormat::PcapNg { big_endian, .. } => {
            big_endian
        }
    };
    let mut mode = match (options.mpf, options.fragments) {
        (Some(_), _) => Judge::Mpf(Box::new(splitter.mpf()?), Vec::new()),
        (None, limits) => {
            // Compile for the capture's link type before anything is
            // written (a pcapng file that names none before its first
            // packet: when the packet comes).
            if let Some(lt) = format.linktype() {
                splitter.merged(lt, big_endian)?;
            }
            let classify = splitter.classifier(big_endian);
            match limits {
                None => Judge::Plain(classify),
                Some(limits) => Judge::Fragments(
                    classify,
                    Box::new(Dispatcher::new(sluice_fragments::Config {
                        mode: match options.first_match {
                            true => Mode::First,
                            false => Mode::All,
                        },
                        limits,
                        big_endian,
                    })),
                    Output::default(),
                ),
            }
        }
    };
    let n = splitter.filters().len();
    let files = match outputs {
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
    let mut to = Deliver {
        counts: vec![0u64; n],
        files,
    };
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
        let done = match &mut mode {
            Judge::Plain(classify) => classify.classify(&pkt).and_then(|ids| to.to(&pkt, ids)),
            Judge::Fragments(classify, dispatcher, out) => {
                classify.classify(&pkt).and_then(|ids| {
                    // Held fragments come out after the packet that
                    // releases them.
                    dispatcher.dispatch(&pkt, ids, out);
                    out.iter().try_for_each(|d| match d.source {
                        Source::Current => to.to(&pkt, d.filters),
                        Source::Held(h) => to.to(&h.as_packet(), d.filters),
                    })
                })
            }
            Judge::Mpf(set, out) => {
                let ts = pkt.ts_sec.max(0) as u64 * 1_000_000_000 + u64::from(pkt.ts_nsec);
                set.process(pkt.data, pkt.wirelen, ts, out);
                out.iter().try_for_each(|d| match &d.late {
                    None => to.to(&pkt, &[d.filter.0]),
                    // A postponed packet let through: written now, with
                    // its own time stamp.
                    Some(p) => to.to(
                        &Packet {
                            ts_sec: (p.ts_ns / 1_000_000_000) as i64,
                            ts_nsec: (p.ts_ns % 1_000_000_000) as u32,
                            caplen: p.data.len() as u32,
                            wirelen: p.wirelen,
                            data: &p.data,
                            ..pkt
                        },
                        &[d.filter.0],
                    ),
                })
            }
        };
        packets += 1;
        if let Err(e) = done {
            error = Some(e);
            break;
        }
        if packets % PROGRESS_EVERY == 0 && !progress(range.offset()) {
            error = Some(SplitError::Stopped);
            break;
        }
    }
    // End of input: fragments still held are given up (in first-match
    // mode those some filter accepts alone go to it).
    let (fragments, mpf) = match &mut mode {
        Judge::Fragments(_, dispatcher, out) => {
            dispatcher.flush(out);
            if error.is_none() {
                let late = out.iter().try_for_each(|d| match d.source {
                    Source::Held(h) => to.to(&h.as_packet(), d.filters),
                    Source::Current => Ok(()),
                });
                error = late.err();
            }
            (Some(*dispatcher.counters()), None)
        }
        Judge::Mpf(set, _) => (None, Some(set.stats())),
        Judge::Plain(_) => (None, None),
    };
    let files = match to.files.take() {
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
        counts: to.counts,
        files,
        ends,
        format,
        fragments,
        mpf,
        error,
    })
}
