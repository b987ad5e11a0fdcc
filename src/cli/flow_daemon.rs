//! `sluice flow --daemon PATH SPEC…`: flows opened in a running sluice
//! daemon, their packets read from its shared buffers and written (`-w`)
//! or counted, until a signal, `--duration` or `-c`.
//!
//! The rule: every packet the daemon accepted for a flow is accounted for
//! in the report: read, or lost (dropped by the daemon, or overwritten
//! before it was read).

use super::{out_fail, print_out, signals, Fail};
use sluice::capture::sink::{out_dir, OutputFile, Placement};
use sluice::capture::CaptureFormat;
use sluice_daemon::{Client, DaemonError, DaemonFlow};
use std::path::Path;
use std::time::{Duration, Instant};

/// One flow being read.
struct Reading {
    spec: String,
    flow: DaemonFlow,
    out: Option<OutputFile>,
    packets: u64,
}

fn fail(e: DaemonError) -> Fail {
    Fail(e.to_string())
}

/// Run the flows in the daemon at `socket` (see the module docs).
pub fn run(
    specs: &[String],
    socket: &Path,
    write: Option<&Path>,
    json: bool,
    duration: Option<Duration>,
    count: Option<u64>,
) -> Result<(), Fail> {
    signals::install(false)?;
    let mut client = Client::connect(socket, "sluice flow").map_err(fail)?;
    if let Some(dir) = write {
        out_dir("-w", dir).map_err(out_fail)?;
    }
    let mut flows = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let flow = client.open(spec, 0).map_err(|e| match &e {
            DaemonError::Refused {
                column: Some(c), ..
            } => Fail(format!(
                "flow {}: {e}{}",
                i + 1,
                sluice_filter::caret_under(spec, *c)
            )),
            _ => Fail(format!("flow {}: {e}", i + 1)),
        })?;
        let out = match write {
            Some(dir) => {
                let path = dir.join(format!("flow{}.pcap", i + 1));
                let format = CaptureFormat::pcap(flow.linktype(), flow.snaplen());
                Some(
                    OutputFile::create(&path.to_string_lossy(), &format, Placement::InPlace)
                        .map_err(out_fail)?,
                )
            }
            None => None,
        };
        flows.push(Reading {
            spec: spec.clone(),
            flow,
            out,
            packets: 0,
        });
    }
    eprintln!(
        "sluice: listening on the daemon at {} ({} flow{})",
        socket.display(),
        flows.len(),
        if flows.len() == 1 { "" } else { "s" }
    );
    let deadline = duration.map(|d| Instant::now() + d);
    let mut status = Ok(());
    let mut flushed = Instant::now();
    'reading: while !signals::stopping() && deadline.map_or(true, |d| Instant::now() < d) {
        if count.is_some_and(|n| flows.iter().all(|f| f.packets >= n)) {
            break;
        }
        // Everything waiting in every flow, then sleep until more comes.
        let mut got = false;
        for f in &mut flows {
            loop {
                if count.is_some_and(|n| f.packets >= n) {
                    break;
                }
                match f.flow.next(Some(Duration::ZERO)) {
                    Ok(Some(p)) => {
                        got = true;
                        f.packets += 1;
                        if let Some(o) = f.out.as_mut() {
                            if let Err(e) = o.write(&p.to_capture()) {
                                status = Err(out_fail(e));
                                break 'reading;
                            }
                        }
                    }
                    // (Under frp, entries found overwritten are skipped.)
                    Ok(None) => {
                        if f.flow.available() == 0 {
                            break;
                        }
                    }
                    Err(e) => {
                        status = Err(Fail(format!("{}: {e}", f.spec)));
                        break 'reading;
                    }
                }
            }
        }
        if flushed.elapsed() >= Duration::from_secs(1) {
            flushed = Instant::now();
            for o in flows.iter_mut().filter_map(|f| f.out.as_mut()) {
                o.flush().map_err(out_fail)?;
            }
        }
        if !got {
            let all: Vec<&DaemonFlow> = flows.iter().map(|f| &f.flow).collect();
            sluice_daemon::wait_any(&all, Duration::from_millis(100)).map_err(fail)?;
        }
    }
    let mut items = Vec::new();
    let mut text = String::new();
    for (i, f) in flows.into_iter().enumerate() {
        let s = f.flow.stats();
        if let Some(o) = f.out {
            o.finish().map_err(out_fail)?;
        }
        // What the elements after the filters counted (none: []).
        let elements = match f.flow.report() {
            Ok(e) => e,
            Err(e) => {
                status = status.and(Err(Fail(format!("flow {}: {e}", i + 1))));
                serde_json::json!([])
            }
        };
        items.push(format!(
            "{{\"spec\": {}, \"packets\": {}, \"lost\": {}, \"accepted\": {}, \"waiting\": {}, \"elements\": {}}}",
            super::split::json_string(&f.spec),
            s.delivered,
            s.lost,
            s.accepted,
            s.waiting,
            elements
        ));
        text += &format!(
            "flow {}: {}\n  packets {}  lost {}  accepted {}\n",
            i + 1,
            f.spec,
            s.delivered,
            s.lost,
            s.accepted
        );
        text += &element_lines(&elements);
        let _ = f.flow.close();
    }
    status?;
    if json {
        print_out(&format!("{{\"flows\": [{}]}}\n", items.join(", ")))
    } else {
        print_out(&text)
    }
}

/// The element reports of a flow as text: a `top` list (hashcount) one
/// flow a line, anything else as its JSON.
fn element_lines(elements: &serde_json::Value) -> String {
    let mut out = String::new();
    for e in elements.as_array().into_iter().flatten() {
        let class = e["class"].as_str().unwrap_or("?");
        let report = &e["report"];
        match report["top"].as_array() {
            Some(top) => {
                out += &format!("  {class}: {} flows\n", report["flows"]);
                for t in top {
                    out += &format!(
                        "    {}  packets {}  bytes {}\n",
                        t["flow"].as_str().unwrap_or("?"),
                        t["packets"],
                        t["bytes"]
                    );
                }
            }
            None => out += &format!("  {class}: {report}\n"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::element_lines;

    #[test]
    fn top_flows_print_one_a_line() {
        let e = serde_json::json!([
            {"class": "hashcount", "report": {"flows": 2, "top": [
                {"flow": "tcp 10.0.0.1:1 > 10.0.0.2:80", "packets": 3, "bytes": 180}]}},
            {"class": "packetcount", "report": {"count": 5}}
        ]);
        assert_eq!(
            element_lines(&e),
            "  hashcount: 2 flows\n    tcp 10.0.0.1:1 > 10.0.0.2:80  packets 3  bytes 180\n  packetcount: {\"count\":5}\n"
        );
    }
}
