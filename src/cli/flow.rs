//! `sluice flow`: FFPF flows in the `ffpf-flow` notation, run to the end
//! of their sources in one flow group (shared instances, one packet
//! buffer), with what every flow and filter produced.

use super::{out_fail, print_out, signals, Fail};
use sluice::capture::sink::{out_dir, write_text, OutputFile, Placement};
use sluice::capture::CaptureFormat;
use sluice::flow::buffer::Preference;
use sluice::flow::policy::{Credentials, Policy};
use sluice::flow::{Flow, FlowReport, Group, GroupConfig};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// The arguments of `sluice flow`.
#[derive(clap::Args)]
pub struct FlowArgs {
    /// Flow specifications, e.g. `(file,in.pcap) -> (sampler,2,4) -> (BPF,"tcp") -> (packetcount,,8)`.
    #[arg(value_name = "SPEC", required = true)]
    specs: Vec<String>,
    /// Print one JSON object: {"flows": [{"spec", "packets", "delivered", "drops", "filters": [{"class", "instance", "result"}]}]}.
    #[arg(long)]
    json: bool,
    /// Write the instantiated graph (flows, instances, classes) as Graphviz DOT (`-` for standard output).
    #[arg(long, value_name = "FILE")]
    dot: Option<String>,
    /// Check every flow against this policy file (no file: everything is allowed).
    #[arg(long, value_name = "FILE")]
    policy: Option<String>,
    /// Write each flow's packets to DIR/flowN.pcap (N from 1, in argument order).
    #[arg(short = 'w', value_name = "DIR")]
    write: Option<PathBuf>,
    /// Packet buffer slots.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    slots: usize,
    /// Bytes of each packet the packet buffer keeps (longer packets are
    /// written truncated with -w; filters see them whole).
    #[arg(long = "slot-bytes", value_name = "N", default_value_t = 65535)]
    slot_bytes: usize,
    /// Buffer management: srp (slow-reader preference) or frp (fast-reader preference).
    #[arg(long, value_name = "PREF", default_value = "srp")]
    preference: String,
    /// Deliver packets to each flow in batches of N (the flow's callback interval).
    #[arg(long, value_name = "N", default_value_t = 64)]
    every: u64,
    /// Open the flows in the sluice daemon listening at PATH (live
    /// sources only: `(iface,NAME) -> (BPF,"expression")`) and read their
    /// packets from its shared buffers, until SIGINT or SIGTERM.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["policy", "dot"])]
    daemon: Option<PathBuf>,
    /// With --daemon: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "daemon", value_parser = super::seconds)]
    duration: Option<std::time::Duration>,
    /// With --daemon: stop when every flow has read this many packets.
    #[arg(short = 'c', value_name = "N", requires = "daemon")]
    count: Option<u64>,
}

/// Packets a flow writes with -w, and the first write error.
#[derive(Default)]
struct Output {
    writer: Option<OutputFile>,
    path: PathBuf,
    error: Option<String>,
}

fn text_report(i: usize, r: &FlowReport) -> String {
    let mut s = format!(
        "flow {}: {}\n  packets {}  delivered {}  drops {}\n",
        i + 1,
        r.spec,
        r.packets,
        r.delivered,
        r.drops
    );
    let w = r
        .filters
        .iter()
        .map(|f| f.instance.len())
        .max()
        .unwrap_or(0);
    for f in &r.filters {
        s.push_str(&format!(
            "  {:w$}  {}  {}\n",
            f.instance,
            f.element,
            f.result,
            w = w
        ));
    }
    s
}

/// Run `sluice flow`.
pub fn run(args: FlowArgs) -> Result<(), Fail> {
    if let Some(path) = args.daemon.clone() {
        return super::flow_daemon::run(
            &args.specs,
            &path,
            args.write.as_deref(),
            args.json,
            args.duration,
            args.count,
        );
    }
    let preference: Preference = args.preference.parse().map_err(Fail)?;
    if args.slots == 0 || args.slot_bytes == 0 || args.every == 0 {
        return Err(Fail(
            "--slots, --slot-bytes and --every must be positive".into(),
        ));
    }
    let cfg = GroupConfig {
        slots: args.slots,
        slot_bytes: args.slot_bytes,
        ibuf_entries: args.slots,
        preference,
        ..GroupConfig::default()
    };
    if args.every > cfg.ibuf_entries as u64 {
        return Err(Fail(format!(
            "--every {} is more than the buffer's {} slots",
            args.every, cfg.ibuf_entries
        )));
    }
    let policy = match &args.policy {
        Some(p) => Policy::load(p)?,
        None => Policy::allow_all(),
    };
    for w in policy.warnings() {
        eprintln!("sluice: warning: {w}");
    }
    let cred = Credentials::current();
    // Sources end at SIGINT, SIGTERM or SIGHUP as at their end (a live
    // one runs until then), and every flow's file keeps what it got.
    signals::install(false)?;
    signals::also_stop(sluice::flow::source::stop_flag());
    let group = Group::new(cfg).map_err(|e| Fail(format!("--slots, --slot-bytes: {e}")))?;
    let at = |i: usize, e: sluice::flow::Error| match &e {
        sluice::flow::Error::Spec(s) => Fail(format!(
            "flow {}: {e}{}",
            i + 1,
            sluice_filter::caret_under(&args.specs[i], s.column)
        )),
        _ => Fail(format!("flow {}: {e}", i + 1)),
    };
    // Every flow is checked against the policy before any of them opens
    // or reads anything.
    let mut flows = Vec::new();
    for (i, spec) in args.specs.iter().enumerate() {
        let mut flow = Flow::create(&group);
        flow.populate(spec).map_err(|e| at(i, e))?;
        flows.push(flow);
    }
    for (i, flow) in flows.iter().enumerate() {
        flow.authorise(&policy, &cred).map_err(|e| at(i, e))?;
    }
    let mut outputs = Vec::new();
    for (i, flow) in flows.iter_mut().enumerate() {
        let at = |e| at(i, e);
        let out = Arc::new(Mutex::new(Output {
            path: args
                .write
                .as_ref()
                .map(|d| d.join(format!("flow{}.pcap", i + 1)))
                .unwrap_or_default(),
            ..Output::default()
        }));
        let write = args.write.is_some();
        let sink = out.clone();
        flow.on_packets(args.every, move |batch| {
            if !write {
                while batch.next().is_some() {}
                return;
            }
            let mut o = sink.lock().unwrap_or_else(|e| e.into_inner());
            while let Some(p) = batch.next() {
                if o.error.is_some() {
                    continue;
                }
                let pkt = p.to_capture();
                if o.writer.is_none() {
                    let format = CaptureFormat::pcap(pkt.linktype, pkt.snaplen.max(pkt.caplen));
                    let path = o.path.to_string_lossy().into_owned();
                    match OutputFile::create(&path, &format, Placement::Replace) {
                        Ok(w) => o.writer = Some(w),
                        Err(e) => o.error = Some(e.to_string()),
                    }
                }
                if let Some(w) = o.writer.as_mut() {
                    if let Err(e) = w.write(&pkt) {
                        o.error = Some(e.to_string());
                    }
                }
            }
        })
        .map_err(at)?;
        flow.instantiate(&policy, &cred).map_err(at)?;
        outputs.push(out);
    }
    // Every flow is checked before the output directory is made.
    if let Some(dir) = &args.write {
        out_dir("-w", dir).map_err(out_fail)?;
        super::name_stale_in(dir);
    }
    for f in &mut flows {
        f.activate()?;
    }
    let run = group.run();
    if let Some(path) = &args.dot {
        write_text(path, &group.dot()).map_err(out_fail)?;
    }
    // Close the capture files (an empty flow still gets an empty file).
    for out in &outputs {
        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = o.error.take() {
            return Err(Fail(e));
        }
        if args.write.is_some() {
            let w = match o.writer.take() {
                Some(w) => w,
                None => OutputFile::create(
                    &o.path.to_string_lossy(),
                    &CaptureFormat::pcap(1, 65535),
                    Placement::Replace,
                )
                .map_err(out_fail)?,
            };
            w.finish().map_err(out_fail)?;
        }
    }
    run?;
    let reports = flows
        .iter()
        .map(|f| f.report())
        .collect::<Result<Vec<_>, _>>()?;
    let text = if args.json {
        let items: Vec<String> = reports.iter().map(FlowReport::to_json).collect();
        format!("{{\"flows\": [{}]}}\n", items.join(", "))
    } else {
        reports
            .iter()
            .enumerate()
            .map(|(i, r)| text_report(i, r))
            .collect::<Vec<_>>()
            .join("")
    };
    print_out(&text)
}
