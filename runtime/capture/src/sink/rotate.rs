//! Rotating one output over many files, as tcpdump's `-C`, `-G` and `-W`
//! do it:
//!
//! * size (`-C`): before a packet is written, a file already larger than
//!   the limit (its header counted) is closed and the next one opened:
//!   `FILE`, `FILE1`, `FILE2`… With a file count (`-W N`) the names are
//!   numbered from 0 with the digits of N − 1 (`FILE0`…`FILE2` for 3, no
//!   number at all for 1) and the numbers go round: the oldest is
//!   overwritten.
//! * period (`-G`): before a packet is written, once that many seconds of
//!   wall-clock time (whole seconds since 1970, as `time()` counts them)
//!   have passed since the current file was opened, the next one is
//!   opened. The name is then a strftime pattern, formatted in local time
//!   for the second the file starts. With a size too, the number restarts
//!   at each new period. With a file count and no size, the run ends when
//!   the N-th rotation comes due.
//!
//! The rule: rotation happens only when a packet is written, as with
//! tcpdump (a quiet link opens no new file), and every file is a complete
//! capture with the output's header, written through [`OutputFile`] (a
//! temporary renamed into place when it is closed, or in place).

use super::file::{OutputError, OutputFile, Placement};
use crate::{CaptureFormat, Packet};
use chrono::format::{Item, StrftimeItems};
use chrono::{DateTime, Local, TimeZone, Utc};
use std::fmt::Write as _;

/// When to start a new file (tcpdump's `-C`, `-G`, `-W`).
///
/// ```
/// let r = sluice_capture::sink::Rule { size: Some(1_000_000), seconds: None, files: Some(4) };
/// assert!(r.any());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rule {
    /// A new file when the current one is larger than this many bytes.
    pub size: Option<u64>,
    /// A new file every this many seconds (the name a strftime pattern).
    pub seconds: Option<u32>,
    /// With `size`: a ring of this many files; with `seconds` alone: stop
    /// after this many files.
    pub files: Option<u32>,
}

impl Rule {
    /// Whether the output rotates at all.
    pub fn any(&self) -> bool {
        self.size.is_some() || self.seconds.is_some() || self.files.is_some()
    }
}

/// Whether chrono can format every `%` conversion of `pattern` (a `-G`
/// file name).
///
/// ```
/// assert!(sluice_capture::sink::valid_pattern("out-%Y%m%d-%H%M%S.pcap"));
/// assert!(!sluice_capture::sink::valid_pattern("out-%Q"));
/// ```
pub fn valid_pattern(pattern: &str) -> bool {
    !StrftimeItems::new(pattern).any(|i| matches!(i, Item::Error))
}

/// How the files are named.
#[derive(Clone, Debug)]
struct Names {
    /// `-w`'s argument.
    pattern: String,
    /// `-G`: the pattern is a strftime pattern.
    timed: bool,
    /// How many digits a file's number has at least (`-C` with `-W N`:
    /// those of N - 1, so `-W 10` gives 0…9 and `-W 11` gives 00…10).
    digits: usize,
}

impl Names {
    fn new(path: &str, rule: &Rule) -> Names {
        let digits = match (rule.size, rule.files) {
            (Some(_), Some(n)) => (n - 1).checked_ilog10().map_or(0, |d| d as usize + 1),
            _ => 0,
        };
        Names {
            pattern: path.to_string(),
            timed: rule.seconds.is_some(),
            digits,
        }
    }

    /// The name of file number `n` of the period that began at `when`:
    /// the (formatted) pattern, then the number unless it is 0 and there
    /// are no digits to fill.
    fn name<Tz: TimeZone>(&self, when: &DateTime<Tz>, n: u64) -> Result<String, OutputError>
    where
        Tz::Offset: std::fmt::Display,
    {
        let mut name = String::new();
        if self.timed {
            write!(name, "{}", when.format(&self.pattern)).map_err(|_| {
                OutputError::new(
                    self.pattern.clone(),
                    std::io::Error::other("invalid strftime pattern"),
                    None,
                )
            })?;
        } else {
            name.push_str(&self.pattern);
        }
        if n > 0 || self.digits > 0 {
            let _ = write!(name, "{n:0width$}", width = self.digits);
        }
        Ok(name)
    }
}

/// Seconds since 1970 now.
fn wall_clock() -> i64 {
    Utc::now().timestamp()
}

/// A second as a local date and time (the earlier one where a clock
/// change makes it ambiguous).
fn local(secs: i64) -> DateTime<Local> {
    Local
        .timestamp_opt(secs, 0)
        .earliest()
        .unwrap_or_else(|| Utc::now().with_timezone(&Local))
}

/// One output written as a series of files by a [`Rule`] (see the module
/// documentation); with an empty rule, one file alone, as [`OutputFile`]
/// writes it.
///
/// ```
/// use sluice_capture::{CaptureFormat, Packet};
/// use sluice_capture::sink::{Placement, Rotation, Rule};
/// let dir = std::env::temp_dir().join(format!("sluice-rotation-doc-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let name = dir.join("ring.pcap");
/// let rule = Rule { size: Some(100), seconds: None, files: Some(2) };
/// let mut out = Rotation::create(name.to_str().unwrap(), &CaptureFormat::pcap(1, 65535), &rule, Placement::Replace)?;
/// for t in 0..3 {
///     assert!(out.write(&Packet::new(t, 0, 1, &[0u8; 100]))?);
/// }
/// out.finish()?;
/// assert!(dir.join("ring.pcap0").exists() && dir.join("ring.pcap1").exists());
/// std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), sluice_capture::sink::OutputError>(())
/// ```
pub struct Rotation {
    out: Option<OutputFile>,
    rule: Rule,
    names: Names,
    format: CaptureFormat,
    snaplen: Option<u32>,
    /// Flush after every packet (`-U`), in every file.
    flush_each: bool,
    /// The current file's number in its `-C` series (0 at each `-G` period).
    count: u64,
    /// `-G` rotations so far.
    rotations: u64,
    /// The second the current `-G` period began.
    since: i64,
    /// Seconds since 1970 (the wall clock; a fake one in tests).
    clock: fn() -> i64,
    /// `-G` with `-W`: the last file is closed, nothing more is written.
    ended: bool,
    /// How each file is put in place.
    placement: Placement,
}

impl Rotation {
    /// Start writing: the first file is opened at once, each put in place
    /// as `placement` says (live captures write in place, as tcpdump does).
    pub fn create(
        path: &str,
        format: &CaptureFormat,
        rule: &Rule,
        placement: Placement,
    ) -> Result<Rotation, OutputError> {
        Rotation::with_clock(path, format, rule, wall_clock, placement)
    }

    fn with_clock(
        path: &str,
        format: &CaptureFormat,
        rule: &Rule,
        clock: fn() -> i64,
        placement: Placement,
    ) -> Result<Rotation, OutputError> {
        let mut out = Rotation {
            out: None,
            rule: *rule,
            names: Names::new(path, rule),
            format: *format,
            snaplen: None,
            flush_each: false,
            count: 0,
            rotations: 0,
            since: clock(),
            clock,
            ended: false,
            placement,
        };
        out.open()?;
        Ok(out)
    }

    /// Cut every packet written to `snaplen` bytes (`-s`).
    pub fn truncate_to(mut self, snaplen: Option<u32>) -> Rotation {
        self.snaplen = snaplen;
        self.out = self.out.map(|o| o.truncate_to(snaplen));
        self
    }

    /// Flush after every packet (tcpdump's `-U`), in every file.
    pub fn set_flush_each(&mut self, on: bool) {
        self.flush_each = on;
    }

    /// With a period and a file count: the number of files made, once the
    /// last of them is closed and nothing more is written.
    pub fn limit_reached(&self) -> Option<u64> {
        self.ended.then_some(self.rotations)
    }

    /// Declare an interface of the input in the current file (see
    /// [`OutputFile::declare`]).
    pub fn declare(&mut self, info: crate::InterfaceInfo) -> Result<(), OutputError> {
        self.out.as_mut().map_or(Ok(()), |o| o.declare(info))
    }

    /// Open the file for the current period and number.
    fn open(&mut self) -> Result<(), OutputError> {
        let name = if self.names.timed {
            self.names.name(&local(self.since), self.count)?
        } else {
            self.names
                .name(&Utc.timestamp_opt(0, 0).unwrap(), self.count)?
        };
        let mut out =
            OutputFile::create(&name, &self.format, self.placement)?.truncate_to(self.snaplen);
        out.set_flush_each(self.flush_each);
        self.out = Some(out);
        Ok(())
    }

    /// Close the current file (it takes its name now).
    fn close(&mut self) -> Result<(), OutputError> {
        self.out.take().map_or(Ok(()), OutputFile::finish)
    }

    /// Write one packet, in a new file first if one is due. `Ok(false)`:
    /// `-G` with `-W N` has made its N files, the packet was not written
    /// and the run should stop.
    pub fn write(&mut self, pkt: &Packet<'_>) -> Result<bool, OutputError> {
        if self.ended {
            return Ok(false);
        }
        if let Some(period) = self.rule.seconds {
            let now = (self.clock)();
            if now - self.since >= i64::from(period) {
                self.since = now;
                self.rotations += 1;
                self.close()?;
                let last = self.rule.files.filter(|_| self.rule.size.is_none());
                if last.is_some_and(|n| self.rotations >= u64::from(n)) {
                    self.ended = true;
                    return Ok(false);
                }
                self.count = 0;
                self.open()?;
            }
        }
        if let Some(limit) = self.rule.size {
            if self.out.as_ref().is_some_and(|o| o.offset() > limit) {
                self.close()?;
                self.count += 1;
                if self.rule.files.is_some_and(|n| self.count >= u64::from(n)) {
                    self.count = 0;
                }
                self.open()?;
            }
        }
        match self.out.as_mut() {
            Some(out) => {
                out.set_flush_each(self.flush_each);
                out.write(pkt)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Push what is buffered to the current file.
    pub fn flush(&mut self) -> Result<(), OutputError> {
        self.out.as_mut().map_or(Ok(()), OutputFile::flush)
    }

    /// Flush and close the current file.
    pub fn finish(mut self) -> Result<(), OutputError> {
        self.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;
    use std::cell::Cell;
    use std::path::{Path, PathBuf};

    fn rule(size: Option<u64>, seconds: Option<u32>, files: Option<u32>) -> Rule {
        Rule {
            size,
            seconds,
            files,
        }
    }

    /// The names of files 0..n of one period.
    fn names(path: &str, r: &Rule, n: u64) -> Vec<String> {
        let at = FixedOffset::east_opt(3600)
            .unwrap()
            .with_ymd_and_hms(2024, 3, 9, 7, 5, 3)
            .unwrap();
        let names = Names::new(path, r);
        (0..n).map(|i| names.name(&at, i).unwrap()).collect()
    }

    #[test]
    fn names_with_c_alone_count_from_the_bare_name() {
        let r = rule(Some(1), None, None);
        assert_eq!(names("out", &r, 12)[..3], ["out", "out1", "out2"]);
        assert_eq!(names("out", &r, 12)[11], "out11");
        // Without -G, % is an ordinary character.
        assert_eq!(names("a%Y", &r, 2), ["a%Y", "a%Y1"]);
    }

    #[test]
    fn names_with_w_have_the_digits_of_n_minus_1() {
        let digits = |w: u32| names("f", &rule(Some(1), None, Some(w)), 1)[0].len() - 1;
        assert_eq!(digits(1), 0);
        assert_eq!(digits(2), 1);
        assert_eq!(digits(10), 1);
        assert_eq!(digits(11), 2);
        assert_eq!(digits(100), 2);
        assert_eq!(digits(101), 3);
        assert_eq!(
            names("out", &rule(Some(1), None, Some(11)), 3),
            ["out00", "out01", "out02"]
        );
        assert_eq!(names("out", &rule(Some(1), None, Some(1)), 1), ["out"]);
    }

    #[test]
    fn names_with_g_are_strftime_patterns() {
        let g = rule(None, Some(60), None);
        assert_eq!(
            names("out-%Y%m%d-%H%M%S.pcap", &g, 1),
            ["out-20240309-070503.pcap"]
        );
        // -G with -W alone: no number (-W only counts the files).
        assert_eq!(names("x-%M%%", &rule(None, Some(1), Some(3)), 1), ["x-05%"]);
        // -G with -C: the number after the formatted name.
        assert_eq!(
            names("o-%S", &rule(Some(1), Some(1), None), 3),
            ["o-03", "o-031", "o-032"]
        );
        assert_eq!(
            names("o-%S", &rule(Some(1), Some(1), Some(3)), 2),
            ["o-030", "o-031"]
        );
        assert!(valid_pattern("out-%Y%m%d-%H%M%S.pcap"));
        assert!(!valid_pattern("out-%Q"));
        assert!(!valid_pattern("out-%"));
    }

    fn dir(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("sluice-rotate-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// The files of a directory, by name, with their packet counts.
    fn files(d: &Path) -> Vec<(String, usize)> {
        let mut v: Vec<(String, usize)> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let bytes = std::fs::read(&p).unwrap();
                let mut r = crate::CaptureReader::from_reader(&bytes[..], "t").unwrap();
                let mut n = 0;
                while r.next_packet().unwrap().is_some() {
                    n += 1;
                }
                (p.file_name().unwrap().to_string_lossy().into_owned(), n)
            })
            .collect();
        v.sort();
        v
    }

    /// The size limit of these tests, in bytes (less than -C 1 so that
    /// one packet, which readers take up to 262,144 bytes, can fill it).
    const LIMIT: u64 = 100_000;

    /// Packet data that makes a new pcap file of exactly LIMIT bytes
    /// (with the file's header and the packet's): not larger.
    fn exact() -> Vec<u8> {
        vec![0u8; LIMIT as usize - 40]
    }

    /// One byte more: the file is then larger than LIMIT.
    fn over() -> Vec<u8> {
        vec![0u8; LIMIT as usize - 39]
    }

    #[test]
    fn the_ring_overwrites_the_oldest() {
        let d = dir("ring");
        let path = d.join("out");
        let fmt = CaptureFormat::pcap(1, 65535);
        let data = over();
        let mut w = Rotation::create(
            path.to_str().unwrap(),
            &fmt,
            &rule(Some(LIMIT), None, Some(3)),
            Placement::Replace,
        )
        .unwrap();
        // One packet per file: out0, out1, out2, out0 again…
        for t in 1..7 {
            assert!(w.write(&Packet::new(t, 0, 1, &data)).unwrap());
        }
        assert!(w.write(&Packet::new(7, 0, 1, &[0; 10])).unwrap());
        w.finish().unwrap();
        assert_eq!(
            files(&d),
            [("out0".into(), 1), ("out1".into(), 1), ("out2".into(), 1)]
        );
        let first_ts = |name: &str| {
            let b = std::fs::read(d.join(name)).unwrap();
            u32::from_le_bytes(b[24..28].try_into().unwrap())
        };
        assert_eq!(
            [first_ts("out0"), first_ts("out1"), first_ts("out2")],
            [7, 5, 6]
        );
    }

    #[test]
    fn c_without_w_counts_up() {
        let d = dir("count");
        let path = d.join("out");
        let fmt = CaptureFormat::pcap(1, 65535);
        let data = exact();
        let mut w = Rotation::create(
            path.to_str().unwrap(),
            &fmt,
            &rule(Some(LIMIT), None, None),
            Placement::Replace,
        )
        .unwrap();
        // A file of exactly LIMIT bytes takes one more packet.
        for t in 0..4 {
            w.write(&Packet::new(t, 0, 1, &data)).unwrap();
            w.write(&Packet::new(t, 0, 1, &[0; 100])).unwrap();
        }
        w.finish().unwrap();
        let want = [("out", 2), ("out1", 2), ("out2", 2), ("out3", 2)];
        let want: Vec<(String, usize)> = want.iter().map(|(n, c)| (n.to_string(), *c)).collect();
        assert_eq!(files(&d), want);
    }

    thread_local! {
        static NOW: Cell<i64> = const { Cell::new(0) };
    }

    fn fake_clock() -> i64 {
        NOW.with(|n| n.get())
    }

    #[test]
    fn g_with_w_stops_after_n_files() {
        let d = dir("g");
        let pattern = d.join("g-%s");
        let fmt = CaptureFormat::pcap(1, 65535);
        let r = rule(None, Some(10), Some(2));
        NOW.with(|n| n.set(1_000));
        let mut w = Rotation::with_clock(
            pattern.to_str().unwrap(),
            &fmt,
            &r,
            fake_clock,
            Placement::Replace,
        )
        .unwrap();
        let mut written = 0;
        for t in 0..40 {
            NOW.with(|n| n.set(1_000 + t));
            if !w.write(&Packet::new(t, 0, 1, &[1; 60])).unwrap() {
                break;
            }
            written += 1;
        }
        assert_eq!(written, 20);
        assert!(!w.write(&Packet::new(99, 0, 1, &[1; 60])).unwrap());
        w.finish().unwrap();
        assert_eq!(files(&d), [("g-1000".into(), 10), ("g-1010".into(), 10)]);
    }

    #[test]
    fn g_with_c_numbers_within_each_period() {
        let d = dir("gc");
        let pattern = d.join("p%s-");
        let fmt = CaptureFormat::pcap(1, 65535);
        let r = rule(Some(LIMIT), Some(5), None);
        let data = exact();
        NOW.with(|n| n.set(50));
        let mut w = Rotation::with_clock(
            pattern.to_str().unwrap(),
            &fmt,
            &r,
            fake_clock,
            Placement::Replace,
        )
        .unwrap();
        for t in 0..3 {
            w.write(&Packet::new(t, 0, 1, &data)).unwrap();
            w.write(&Packet::new(t, 0, 1, &[0; 10])).unwrap();
        }
        NOW.with(|n| n.set(56));
        w.write(&Packet::new(9, 0, 1, &data)).unwrap();
        w.write(&Packet::new(9, 0, 1, &[0; 10])).unwrap();
        w.write(&Packet::new(9, 0, 1, &data)).unwrap();
        w.finish().unwrap();
        // p50- gets two packets (exactly LIMIT bytes, then larger),
        // p50-1 the next two…, and the next period starts at p56- again.
        assert_eq!(
            files(&d),
            [
                ("p50-".into(), 2),
                ("p50-1".into(), 2),
                ("p50-2".into(), 2),
                ("p56-".into(), 2),
                ("p56-1".into(), 1),
            ]
        );
    }

    #[test]
    fn rule_and_patterns() {
        assert!(!Rule::default().any());
        assert!(rule(None, None, Some(2)).any());
        assert!(valid_pattern("out-%H"));
        assert!(!valid_pattern("out-%"));
    }
}
