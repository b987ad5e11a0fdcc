//! Packet sources: capture files, read once or replayed at a rate.
//!
//! * `(file,PATH)`: every packet of a pcap or pcapng file (`-` is standard
//!   input), with its own timestamps.
//! * `(replay,PATH,RATE[,UNIT][,CLOCK][,PASSES])`: the file read `PASSES`
//!   times (default 1) at `RATE` per second. `UNIT` is `pps` (packets,
//!   the default), `Bps` or `bytes` (wire bytes) or `bps` or `bits` (wire
//!   bits). `CLOCK` is `packet` (the default: packets go out as fast as the
//!   group takes them, with timestamps rewritten to the rate, starting at
//!   the file's first timestamp, so timestamp-driven filters see the chosen
//!   rate) or `wall` (packets are released at the rate in real time,
//!   stamped with the time of release; a group under slow-reader
//!   preference then drops what its readers cannot keep up with, as with a
//!   live device).
//! * `(iface,NAME[,SECONDS][,PACKETS])` (also `device`): live capture on
//!   an interface (`any` for all of them), through the kernel's packet
//!   ring, until SECONDS have passed, PACKETS were captured, or
//!   [`stop_flag`] is set (the command sets it on SIGINT, SIGTERM and
//!   SIGHUP; file sources end there too).

use crate::class::{number, ArgError, Source, SourceClass, SourcePacket};
use crate::value::Value;
use sluice_capture::{CaptureFormat, CaptureReader};
use sluice_live::{Capture, Config, KernelStats};
use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime};

type Reader = CaptureReader<Box<dyn Read + Send>>;

fn open(path: &str) -> Result<Reader, String> {
    CaptureReader::open(path).map_err(|e| e.to_string())
}

fn big_endian(f: &CaptureFormat) -> bool {
    match *f {
        CaptureFormat::Pcap { big_endian, .. } => big_endian,
        CaptureFormat::PcapNg { big_endian, .. } => big_endian,
    }
}

fn fill(r: &mut Reader, out: &mut SourcePacket) -> Result<bool, String> {
    // Asked to stop: the file ends here, as if it had no more packets.
    if stopped() {
        return Ok(false);
    }
    let be = big_endian(&r.format());
    match r.next_packet().map_err(|e| e.to_string())? {
        None => Ok(false),
        Some(p) => {
            out.packet.set(&p);
            out.big_endian = be;
            out.due = None;
            Ok(true)
        }
    }
}

fn linktypes_of(r: &Reader) -> Vec<(u16, bool)> {
    r.linktype()
        .map(|l| vec![(l, big_endian(&r.format()))])
        .unwrap_or_default()
}

/// The `file` source class.
///
/// ```
/// use sluice_flow::class::SourceClass;
/// assert!(sluice_flow::source::FileClass.check(&["a.pcap".into()]).is_ok());
/// assert!(sluice_flow::source::FileClass.check(&[]).is_err());
/// ```
pub struct FileClass;

struct FileSource {
    r: Reader,
    packets: u64,
}

impl SourceClass for FileClass {
    fn name(&self) -> &str {
        "file"
    }
    fn check(&self, args: &[String]) -> Result<(), ArgError> {
        crate::class::at_most(args, 1, "(file,PATH)")?;
        match args.first() {
            Some(p) if !p.is_empty() => Ok(()),
            _ => Err(ArgError::element("file needs a path: (file,PATH)")),
        }
    }
    fn file(&self, args: &[String]) -> Option<String> {
        args.first().filter(|p| p.as_str() != "-").cloned()
    }
    fn open(&self, args: &[String]) -> Result<Box<dyn Source>, ArgError> {
        self.check(args)?;
        let r = open(&args[0]).map_err(|e| ArgError::at(0, e))?;
        Ok(Box::new(FileSource { r, packets: 0 }))
    }
}

impl Source for FileSource {
    fn next(&mut self, out: &mut SourcePacket) -> Result<bool, String> {
        let got = fill(&mut self.r, out)?;
        self.packets += got as u64;
        Ok(got)
    }
    fn linktypes(&self) -> Vec<(u16, bool)> {
        linktypes_of(&self.r)
    }
    fn report(&self) -> Value {
        Value::map([("packets", Value::U64(self.packets))])
    }
}

/// The `replay` source class.
///
/// ```
/// use sluice_flow::class::SourceClass;
/// let c = sluice_flow::source::ReplayClass;
/// assert!(c.check(&["a.pcap".into(), "1000".into(), "pps".into(), "wall".into(), "2".into()]).is_ok());
/// assert!(c.check(&["a.pcap".into(), "0".into()]).is_err());
/// assert!(c.check(&["a.pcap".into(), "10".into(), "furlongs".into()]).is_err());
/// ```
pub struct ReplayClass;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Unit {
    Packets,
    Bytes,
    Bits,
}

struct ReplayArgs {
    path: String,
    rate: f64,
    unit: Unit,
    wall: bool,
    passes: u64,
}

fn replay_args(args: &[String]) -> Result<ReplayArgs, ArgError> {
    let usage = "(replay,PATH,RATE[,pps|Bps|bps][,packet|wall][,PASSES])";
    crate::class::at_most(args, 5, usage)?;
    let path = match args.first() {
        Some(p) if !p.is_empty() => p.clone(),
        _ => return Err(ArgError::element(format!("replay needs a path: {usage}"))),
    };
    let rate_text = args
        .get(1)
        .ok_or_else(|| ArgError::element(format!("replay needs a rate: {usage}")))?;
    let rate: f64 = rate_text
        .parse()
        .ok()
        .filter(|r: &f64| r.is_finite() && *r > 0.0)
        .ok_or_else(|| {
            ArgError::at(
                1,
                format!("rate must be a positive number, found {rate_text:?}"),
            )
        })?;
    let unit = match args.get(2).map(String::as_str) {
        None | Some("") | Some("pps") => Unit::Packets,
        Some("Bps") | Some("bytes") => Unit::Bytes,
        Some("bps") | Some("bits") => Unit::Bits,
        Some(o) => {
            return Err(ArgError::at(
                2,
                format!("unit must be pps, Bps (bytes/s) or bps (bits/s), found {o:?}"),
            ))
        }
    };
    let wall = match args.get(3).map(String::as_str) {
        None | Some("") | Some("packet") => false,
        Some("wall") => true,
        Some(o) => {
            return Err(ArgError::at(
                3,
                format!("clock must be packet or wall, found {o:?}"),
            ))
        }
    };
    let passes = match args.get(4).map(String::as_str) {
        None | Some("") => 1,
        Some(_) => number(args, 4, "PASSES")?,
    };
    if passes == 0 {
        return Err(ArgError::at(4, "PASSES must be at least 1"));
    }
    Ok(ReplayArgs {
        path,
        rate,
        unit,
        wall,
        passes,
    })
}

struct Replay {
    a: ReplayArgs,
    r: Reader,
    pass: u64,
    sent: u64,
    /// Units (packets, bytes or bits) released so far.
    units: f64,
    start_ts: Option<(i64, u32)>,
    start_wall: Option<(Instant, SystemTime)>,
}

impl SourceClass for ReplayClass {
    fn name(&self) -> &str {
        "replay"
    }
    fn check(&self, args: &[String]) -> Result<(), ArgError> {
        replay_args(args).map(|_| ())
    }
    fn file(&self, args: &[String]) -> Option<String> {
        args.first().filter(|p| p.as_str() != "-").cloned()
    }
    fn open(&self, args: &[String]) -> Result<Box<dyn Source>, ArgError> {
        let a = replay_args(args)?;
        let r = open(&a.path).map_err(|e| ArgError::at(0, e))?;
        Ok(Box::new(Replay {
            a,
            r,
            pass: 1,
            sent: 0,
            units: 0.0,
            start_ts: None,
            start_wall: None,
        }))
    }
}

fn add(ts: (i64, u32), secs: f64) -> (i64, u32) {
    let whole = secs.floor();
    let mut s = ts.0 + whole as i64;
    let mut ns = ts.1 as u64 + ((secs - whole) * 1e9) as u64;
    if ns >= 1_000_000_000 {
        s += 1;
        ns -= 1_000_000_000;
    }
    (s, ns as u32)
}

impl Source for Replay {
    fn next(&mut self, out: &mut SourcePacket) -> Result<bool, String> {
        loop {
            if fill(&mut self.r, out)? {
                break;
            }
            if self.pass >= self.a.passes {
                return Ok(false);
            }
            self.pass += 1;
            self.r = open(&self.a.path)?;
        }
        let secs = self.units / self.a.rate;
        self.units += match self.a.unit {
            Unit::Packets => 1.0,
            Unit::Bytes => out.packet.wirelen as f64,
            Unit::Bits => 8.0 * out.packet.wirelen as f64,
        };
        self.sent += 1;
        if self.a.wall {
            let (i0, s0) = *self
                .start_wall
                .get_or_insert_with(|| (Instant::now(), SystemTime::now()));
            let d = Duration::from_secs_f64(secs);
            out.due = Some(i0 + d);
            let t = (s0 + d)
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default();
            out.packet.ts_sec = t.as_secs() as i64;
            out.packet.ts_nsec = t.subsec_nanos();
        } else {
            let t0 = *self
                .start_ts
                .get_or_insert((out.packet.ts_sec, out.packet.ts_nsec));
            let (s, ns) = add(t0, secs);
            out.packet.ts_sec = s;
            out.packet.ts_nsec = ns;
        }
        Ok(true)
    }
    fn linktypes(&self) -> Vec<(u16, bool)> {
        linktypes_of(&self.r)
    }
    fn report(&self) -> Value {
        Value::map([
            ("packets", Value::U64(self.sent)),
            ("passes", Value::U64(self.pass)),
        ])
    }
}

/// Whether [`stop_flag`] is set.
fn stopped() -> bool {
    STOP.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Set to end every source at its next packet boundary, as if its input
/// had ended (the `sluice flow` command sets it on SIGINT, SIGTERM and
/// SIGHUP, so files keep what was written).
///
/// ```
/// let f = sluice_flow::source::stop_flag();
/// assert!(!f.load(std::sync::atomic::Ordering::Relaxed));
/// ```
pub fn stop_flag() -> Arc<AtomicBool> {
    STOP.get_or_init(|| Arc::new(AtomicBool::new(false)))
        .clone()
}

/// The `iface` source class (also registered as `device`): live capture.
///
/// ```
/// use sluice_flow::class::SourceClass;
/// let c = sluice_flow::source::DeviceClass::new("iface");
/// assert!(c.check(&["eth0".into(), "10".into()]).is_ok());
/// assert!(c.check(&[]).is_err());
/// assert!(c.check(&["eth0".into(), "soon".into()]).is_err());
/// ```
pub struct DeviceClass {
    name: &'static str,
}

impl DeviceClass {
    /// The class under `name`.
    pub fn new(name: &'static str) -> DeviceClass {
        DeviceClass { name }
    }
}

/// `(iface,NAME[,SECONDS][,PACKETS])`, checked.
fn device_args(args: &[String]) -> Result<(String, Option<Duration>, Option<u64>), ArgError> {
    let usage = "(iface,NAME[,SECONDS][,PACKETS])";
    crate::class::at_most(args, 3, usage)?;
    let name = match args.first() {
        Some(n) if !n.is_empty() => n.clone(),
        _ => {
            return Err(ArgError::element(format!(
                "iface needs an interface: {usage}"
            )))
        }
    };
    let secs = match args.get(1).map(String::as_str) {
        None | Some("") => None,
        Some(t) => Some(
            t.parse::<f64>()
                .ok()
                .and_then(|s| Duration::try_from_secs_f64(s).ok())
                .ok_or_else(|| ArgError::at(1, format!("SECONDS must be a number, found {t:?}")))?,
        ),
    };
    let packets = match args.get(2).map(String::as_str) {
        None | Some("") => None,
        Some(_) => Some(number(args, 2, "PACKETS")?),
    };
    Ok((name, secs, packets))
}

struct DeviceSource {
    cap: Capture,
    queue: VecDeque<SourcePacket>,
    deadline: Option<Instant>,
    limit: Option<u64>,
    packets: u64,
    stop: Arc<AtomicBool>,
    stats: KernelStats,
}

impl SourceClass for DeviceClass {
    fn name(&self) -> &str {
        self.name
    }
    fn check(&self, args: &[String]) -> Result<(), ArgError> {
        device_args(args).map(|_| ())
    }
    fn open(&self, args: &[String]) -> Result<Box<dyn Source>, ArgError> {
        let (name, secs, limit) = device_args(args)?;
        let mut config = Config::new(&name);
        config.snaplen = sluice_wire::link::max_snaplen(1);
        let cap = Capture::open(&config).map_err(|e| ArgError::at(0, e.to_string()))?;
        Ok(Box::new(DeviceSource {
            cap,
            queue: VecDeque::new(),
            deadline: secs.map(|s| Instant::now() + s),
            limit,
            packets: 0,
            stop: stop_flag(),
            stats: KernelStats::default(),
        }))
    }
}

impl Source for DeviceSource {
    fn next(&mut self, out: &mut SourcePacket) -> Result<bool, String> {
        loop {
            if self.limit.is_some_and(|n| self.packets >= n) {
                return Ok(false);
            }
            if let Some(p) = self.queue.pop_front() {
                *out = p;
                self.packets += 1;
                return Ok(true);
            }
            let ended = self.stop.load(Ordering::Relaxed)
                || self.deadline.is_some_and(|d| Instant::now() >= d);
            if ended {
                return Ok(false);
            }
            let queue = &mut self.queue;
            self.cap
                .dispatch(Duration::from_millis(100), |p| {
                    queue.push_back(SourcePacket {
                        packet: sluice_capture::OwnedPacket {
                            interface: 0,
                            ..p.to_owned_packet()
                        },
                        big_endian: cfg!(target_endian = "big"),
                        due: None,
                    });
                    true
                })
                .map_err(|e| e.to_string())?;
            self.stats = self.cap.stats().map_err(|e| e.to_string())?;
        }
    }
    fn linktypes(&self) -> Vec<(u16, bool)> {
        vec![(self.cap.linktype(), cfg!(target_endian = "big"))]
    }
    fn report(&self) -> Value {
        Value::map([
            ("packets", Value::U64(self.packets)),
            ("received", Value::U64(self.stats.received)),
            ("dropped", Value::U64(self.stats.dropped)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> String {
        format!("{}/../../examples/sample.pcap", env!("CARGO_MANIFEST_DIR"))
    }

    fn drain(s: &mut dyn Source) -> Vec<SourcePacket> {
        let mut v = Vec::new();
        let mut p = SourcePacket::default();
        while s.next(&mut p).unwrap() {
            v.push(p.clone());
        }
        v
    }

    #[test]
    fn replay_packet_clock_rewrites_timestamps() {
        let args: Vec<String> = vec![
            sample(),
            "4".into(),
            "pps".into(),
            "packet".into(),
            "2".into(),
        ];
        let mut s = ReplayClass.open(&args).unwrap();
        let once = drain(&mut *FileClass.open(&[sample()]).unwrap());
        let v = drain(&mut *s);
        assert_eq!(v.len(), 2 * once.len());
        let t0 = (v[0].packet.ts_sec, v[0].packet.ts_nsec);
        assert_eq!(t0, (once[0].packet.ts_sec, once[0].packet.ts_nsec));
        // 4 packets per second: packet 5 is 1.25 s after the first.
        assert_eq!((v[5].packet.ts_sec, v[5].packet.ts_nsec), add(t0, 1.25));
        assert_eq!(v[once.len()].packet.data, once[0].packet.data);
        assert_eq!(s.report().get("passes"), Some(&Value::U64(2)));
    }

    #[test]
    fn replay_byte_rate_and_wall_clock() {
        let args: Vec<String> = vec![sample(), "1000000".into(), "Bps".into(), "wall".into()];
        let mut s = ReplayClass.open(&args).unwrap();
        let v = drain(&mut *s);
        let d0 = v[0].due.unwrap();
        let last = v.last().unwrap();
        let bytes: u64 = v[..v.len() - 1]
            .iter()
            .map(|p| p.packet.wirelen as u64)
            .sum();
        let want = Duration::from_secs_f64(bytes as f64 / 1e6);
        let got = last.due.unwrap() - d0;
        assert!(
            got.as_secs_f64() - want.as_secs_f64() < 1e-6,
            "{got:?} {want:?}"
        );
    }
}
