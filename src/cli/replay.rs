//! `sluice replay`: send a capture's frames out of an interface, at the
//! capture's own pace, a set rate, or as fast as the kernel takes them.

use super::{open_capture, Fail};
use clap::ArgGroup;
use sluice::live::{Pace, Sender, BATCH};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The arguments of `sluice replay`.
#[derive(clap::Args)]
#[command(group(ArgGroup::new("pace").args(["rate", "mbps", "topspeed"])))]
pub struct ReplayArgs {
    /// The interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interface: String,
    /// The capture whose frames are sent (pcap or pcapng; `-` for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    read: String,
    /// Send this many packets per second [default: the capture's own timing].
    #[arg(long, value_name = "PPS")]
    rate: Option<f64>,
    /// Send this many megabits per second (of frame bytes).
    #[arg(long, value_name = "N")]
    mbps: Option<f64>,
    /// Send as fast as the kernel takes frames.
    #[arg(long)]
    topspeed: bool,
    /// Send the capture this many times.
    #[arg(long = "loop", value_name = "K", default_value_t = 1)]
    loops: u64,
    /// Print the counts as one JSON object.
    #[arg(long)]
    json: bool,
}

/// Run `sluice replay`.
pub fn run(args: ReplayArgs) -> Result<(), Fail> {
    let pace = match (args.rate, args.mbps, args.topspeed) {
        (Some(r), _, _) if r > 0.0 && r.is_finite() => Pace::Packets(r),
        (_, Some(m), _) if m > 0.0 && m.is_finite() => Pace::Mbps(m),
        (None, None, true) => Pace::Top,
        (None, None, false) => Pace::Capture,
        _ => super::usage("--rate and --mbps take a positive number"),
    };
    if args.loops > 1 && args.read == "-" {
        super::usage("--loop reads the capture again: give a file, not standard input");
    }
    let mut sender = Sender::open(&args.interface, pace).map_err(|e| Fail(e.to_string()))?;
    super::signals::install(false)?;
    let stop = super::signals::stop_flag();
    let start = Instant::now();
    let mut frames = Vec::with_capacity(BATCH);
    let mut bytes: Vec<u8> = Vec::new();
    'loops: for _ in 0..args.loops {
        let (mut reader, _) = open_capture(Some(&args.read))?;
        let name = reader.name().to_string();
        sender.restart();
        loop {
            // Up to a batch of frames, copied out of the reader.
            frames.clear();
            bytes.clear();
            let mut end = false;
            while frames.len() < BATCH {
                match reader.next_packet() {
                    Ok(Some(p)) => {
                        if u32::from(p.linktype) != u32::from(sender.linktype()) {
                            return Err(Fail(format!(
                                "{name}: link type {} packets cannot go out of {} (link type {})",
                                p.linktype,
                                args.interface,
                                sender.linktype()
                            )));
                        }
                        let ts = i128::from(p.ts_sec) * 1_000_000_000 + i128::from(p.ts_nsec);
                        frames.push((bytes.len(), p.data.len(), ts));
                        bytes.extend_from_slice(p.data);
                    }
                    Ok(None) => {
                        end = true;
                        break;
                    }
                    Err(e) => return Err(Fail(e.to_string())),
                }
            }
            let batch: Vec<(&[u8], i128)> = frames
                .iter()
                .map(|&(at, len, ts)| (&bytes[at..at + len], ts))
                .collect();
            sender.send(&batch).map_err(|e| Fail(e.to_string()))?;
            if stop.load(Ordering::Relaxed) {
                break 'loops;
            }
            if end {
                break;
            }
        }
    }
    let s = sender.stats();
    let secs = start.elapsed().as_secs_f64().max(1e-9);
    let text = if args.json {
        format!(
            "{{\"sent\": {}, \"refused\": {}, \"bytes\": {}, \"seconds\": {secs:.6}, \"pps\": {:.0}, \"mbps\": {:.3}}}\n",
            s.sent,
            s.refused,
            s.bytes,
            s.sent as f64 / secs,
            s.bytes as f64 * 8.0 / secs / 1e6
        )
    } else {
        format!(
            "{} frames sent ({} bytes) in {secs:.3} s: {:.0} packets/s, {:.3} Mbit/s\n{} frames refused\n",
            s.sent,
            s.bytes,
            s.sent as f64 / secs,
            s.bytes as f64 * 8.0 / secs / 1e6,
            s.refused
        )
    };
    super::print_out(&text)
}
