//! `sluice split`: many named filters over a capture in one pass, with one
//! merged classifier per link type (not one program per filter).

use super::live::{Live, LiveArgs};
use super::{
    cached, for_each_packet, for_each_packet_declaring, linktype_of, open_capture,
    open_capture_mapped, out_fail, read_text, signals, Fail, Reader,
};
use clap::ArgGroup;
use sluice::capture::sink::{FileSet, Placement};
use sluice::capture::{CaptureFormat, Packet};
use sluice::fragments::{Config, Counters, Dispatcher, Limits, Mode, Output, Source};
use sluice::live::session::{Classify, Event};
use sluice::split::{FilterLine, Merging, MergingScratch, NotMpf};
use sluice::{LinkType, Program};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[path = "split_count.rs"]
mod count;
#[path = "split_ebpf.rs"]
mod kernel;

/// The arguments of `sluice split`.
#[derive(clap::Args)]
#[command(group(ArgGroup::new("output").required(true).multiple(true).args(["out_dir", "count", "verdicts"])))]
#[command(group(ArgGroup::new("report").multiple(true).args(["count", "verdicts"])))]
pub struct SplitArgs {
    /// Capture file to read (pcap or pcapng; `-` for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<String>,
    /// Live capture options (-i IFACE and what goes with it).
    #[command(flatten)]
    live: LiveArgs,
    /// The filters: one `name<TAB>expression` per line; `#` starts a comment.
    #[arg(long, value_name = "FILTERS")]
    filters: String,
    /// Write each filter's packets to DIR/name.pcap (name.pcapng for pcapng
    /// input); files are replaced only when the run gets to write packets.
    #[arg(long = "out-dir", value_name = "DIR")]
    out_dir: Option<PathBuf>,
    /// Print `name<TAB>count` per filter, in file order.
    #[arg(long)]
    count: bool,
    /// Print `name<TAB>` and one 0/1 per packet, per filter, in file order.
    #[arg(long)]
    verdicts: bool,
    /// Give each packet only to the first matching filter in file order.
    #[arg(long = "first-match")]
    first_match: bool,
    /// Print --count and --verdicts as one JSON object.
    #[arg(long, requires = "report")]
    json: bool,
    /// Engine: the merged filters as machine code (the default) or walked
    /// in Rust.
    #[arg(long, value_enum)]
    engine: Option<super::filter::EngineArg>,
    /// With -i, --engine ebpf and --count: the filter set also runs as an
    /// XDP program chain on the interface, counting the frames it
    /// receives before the kernel's stack. Frames no filter wants are
    /// dropped there for the whole host, not only for this capture (for a
    /// monitoring port). The socket's chain counts the frames the host
    /// sends. One Ethernet interface; detached when the run ends.
    #[arg(long)]
    xdp: bool,
    /// Fragment dispatch: later fragments of an IP datagram go to the
    /// filters that took its first fragment (held when they come first).
    #[arg(long)]
    fragments: bool,
    /// With --fragments: most fragments held at once waiting for their
    /// first fragment [default: 1024].
    #[arg(long = "hold-packets", value_name = "N", requires = "fragments")]
    hold_packets: Option<usize>,
    /// With --fragments: most bytes held at once [default: 4194304].
    #[arg(long = "hold-bytes", value_name = "N", requires = "fragments")]
    hold_bytes: Option<usize>,
    /// With --fragments: how long a fragment is held, in seconds of packet
    /// time [default: 5].
    #[arg(long = "hold-timeout", value_name = "SECS", requires = "fragments", value_parser = super::seconds)]
    hold_timeout: Option<std::time::Duration>,
    /// With --fragments: how long a datagram's filters are remembered after
    /// its first fragment, in seconds of packet time [default: 30].
    #[arg(long = "datagram-timeout", value_name = "SECS", requires = "fragments", value_parser = super::seconds)]
    datagram_timeout: Option<std::time::Duration>,
    /// With --fragments: most datagrams remembered at once [default: 65536].
    #[arg(long = "max-datagrams", value_name = "N", requires = "fragments")]
    max_datagrams: Option<usize>,
    /// MPF: every filter is a `bpf:` program, MPF instructions allowed
    /// (ret_match_imm, jmp_match_imm, register_data, ret_match_data,
    /// postpone), installed in one MPF set: programs that differ only in
    /// their keys run once per packet, and postponed packets go out after
    /// the packet that lets them through.
    #[arg(long, conflicts_with_all = ["fragments", "first_match", "engine"])]
    mpf: bool,
    /// With --mpf: most packets waiting in the postponed queue [default: 1024].
    #[arg(long = "mpf-pending", value_name = "N", requires = "mpf")]
    mpf_pending: Option<usize>,
}

impl SplitArgs {
    /// The fragment dispatcher, with --fragments.
    fn dispatcher(&self, big_endian: bool) -> Option<Dispatcher> {
        let d = Limits::default();
        self.fragments.then(|| {
            Dispatcher::new(Config {
                mode: if self.first_match {
                    Mode::First
                } else {
                    Mode::All
                },
                limits: Limits {
                    hold_packets: self.hold_packets.unwrap_or(d.hold_packets),
                    hold_bytes: self.hold_bytes.unwrap_or(d.hold_bytes),
                    hold_timeout: self.hold_timeout.unwrap_or(d.hold_timeout),
                    datagram_timeout: self.datagram_timeout.unwrap_or(d.datagram_timeout),
                    max_datagrams: self.max_datagrams.unwrap_or(d.max_datagrams),
                },
                big_endian,
            })
        })
    }
}

/// All filters merged for one link type; earlier lines get higher
/// priorities, so the first-match winner is the first line that matches.
/// Errors name the line and the compile error's column.
/// `capture` is the byte order of the capture file the packets come from
/// (`None`: a live interface), which libpcap's meaning of the loopback
/// links depends on.
fn build(
    filters: &[FilterLine],
    lt: LinkType,
    capture: Option<bool>,
    file: &str,
    native: bool,
) -> Result<Merging, Vec<(usize, String)>> {
    let builder = builder(lt, capture, file);
    Merging::build(filters, &builder, native).map_err(|r| rejected(filters, lt, file, r))
}

/// The compilation of `sluice filter`, so that the same expressions are
/// refused (including those that reject every packet). Any language (a
/// `pcap:`, `bpf:`, `cspf:` or `dpf:` prefix; `LANG:@path` relative to
/// the filters file).
fn builder(lt: LinkType, capture: Option<bool>, file: &str) -> sluice::ProgramBuilder {
    Program::builder(lt)
        .snaplen(super::DEFAULT_SNAPLEN)
        .offline(capture.is_some())
        .capture_big_endian(capture.unwrap_or(cfg!(target_endian = "big")))
        .dir(Path::new(file).parent())
}

/// The filters that do not compile, each named with its line.
fn rejected(
    filters: &[FilterLine],
    lt: LinkType,
    file: &str,
    rejected: Vec<sluice::split::Rejected>,
) -> Vec<(usize, String)> {
    rejected
        .into_iter()
        .map(|r| {
            let f = &filters[r.index];
            let e = r.error;
            (
                f.line,
                format!(
                    "{file}:{}: {}: {e} (link type {})",
                    f.line,
                    f.name,
                    lt.name()
                ),
            )
        })
        .collect()
}

/// Every bad line, in line order, one per line of the message.
fn many(mut errors: Vec<(usize, String)>, before_output: bool) -> Fail {
    errors.sort_by_key(|e| e.0);
    let n = errors.len();
    let mut lines: Vec<String> = errors.into_iter().map(|e| e.1).collect();
    let s = if n == 1 { "" } else { "s" };
    lines.push(if before_output {
        format!("{n} bad line{s}, nothing written")
    } else {
        format!("{n} bad line{s} for a link type met in the capture; stopped there")
    });
    Fail(lines.join("\nsluice: "))
}

/// The per-filter output files, one in `dir` for each filter, created
/// now (each gets a file, packets or not); `placement` says how they are
/// put in place (live captures write in place).
fn outputs(
    dir: &Path,
    filters: &[FilterLine],
    format: &CaptureFormat,
    placement: Placement,
) -> Result<FileSet, Fail> {
    super::name_stale_in(dir);
    let names: Vec<&str> = filters.iter().map(|f| f.name.as_str()).collect();
    FileSet::create(dir, &names, format, "", true, placement).map_err(out_fail)
}

/// Close every output file and put them in place (all or none), each
/// declaring the input's interface when it got no packet.
fn finish(outputs: Option<FileSet>, reader: Option<&Reader>) -> Result<(), Fail> {
    let Some(mut o) = outputs else {
        return Ok(());
    };
    if let Some(info) = reader.and_then(|r| r.declared_interfaces().first().copied()) {
        o.declare(info).map_err(out_fail)?;
    }
    o.finish().map(|_| ()).map_err(out_fail)
}

/// One bit per packet.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    fn set(&mut self, i: u64) {
        let w = (i / 64) as usize;
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        self.0[w] |= 1 << (i % 64);
    }

    fn row(&self, len: u64) -> Vec<u8> {
        (0..len)
            .map(|i| {
                let on = self
                    .0
                    .get((i / 64) as usize)
                    .map_or(0, |w| (w >> (i % 64)) & 1);
                b'0' + on as u8
            })
            .collect()
    }
}

/// The filters as MPF programs in one set (filter ids in line order;
/// `sluice_split::mpf_set`), each bad line named.
fn build_mpf(
    filters: &[FilterLine],
    file: &str,
    config: sluice::mpf::Config,
) -> Result<sluice::mpf::MpfSet, Vec<(usize, String)>> {
    sluice::split::mpf_set(filters, Path::new(file).parent(), config).map_err(|bad| {
        bad.into_iter()
            .map(|b| {
                let f = &filters[b.index];
                let why = match b.why {
                    NotMpf::Language(l) => format!("--mpf takes bpf: programs, not {}", l.name()),
                    other => other.to_string(),
                };
                (f.line, format!("{file}:{}: {}: {why}", f.line, f.name))
            })
            .collect()
    })
}

/// `sluice split --mpf`: every packet through one MPF set.
fn run_mpf(args: &SplitArgs, filters: &[FilterLine], file: &str) -> Result<(), Fail> {
    let config = sluice::mpf::Config {
        max_pending: args
            .mpf_pending
            .unwrap_or(sluice::mpf::Config::default().max_pending),
    };
    let mut set = build_mpf(filters, file, config).map_err(|e| many(e, true))?;
    if filters.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }
    signals::install(false)?;
    let (mut reader, size) = open_capture(args.read.as_deref())?;
    let format = reader.format();
    let mut outputs = match &args.out_dir {
        Some(dir) => Some(outputs(dir, filters, &format, Placement::Replace)?),
        None => None,
    };
    let mut counts = vec![0u64; filters.len()];
    let mut bits: Vec<Bits> = (0..filters.len()).map(|_| Bits::default()).collect();
    let mut seen = 0u64;
    let mut out = Vec::new();
    let status = for_each_packet(&mut reader, size, |pkt| {
        let ts = pkt.ts_sec.max(0) as u64 * 1_000_000_000 + pkt.ts_nsec as u64;
        set.process(pkt.data, pkt.wirelen, ts, &mut out);
        let mut to = Deliver {
            counts: &mut counts,
            bits: args.verdicts.then_some(&mut bits),
            outputs: outputs.as_mut(),
        };
        for d in &out {
            match &d.late {
                None => to.deliver(seen, pkt, &[d.filter.0])?,
                // A postponed packet let through: written now, with its
                // own timestamp.
                Some(p) => {
                    let late = Packet {
                        ts_sec: (p.ts_ns / 1_000_000_000) as i64,
                        ts_nsec: (p.ts_ns % 1_000_000_000) as u32,
                        caplen: p.data.len() as u32,
                        wirelen: p.wirelen,
                        data: &p.data,
                        ..*pkt
                    };
                    to.deliver(p.seq, &late, &[d.filter.0])?
                }
            }
        }
        seen += 1;
        Ok(())
    });
    let finished = finish(outputs, Some(&reader));
    let s = set.stats();
    let dropped = s.pending_expired + s.pending_dropped_full;
    if (dropped > 0 || s.pending > 0) && !args.json {
        eprintln!(
            "sluice: mpf: postponed packets not delivered: {} (filter, packet) pairs timed out, {} refused with the queue full, {} packets still waiting at the end of input",
            s.pending_expired, s.pending_dropped_full, s.pending
        );
    }
    // A failed run prints no counts.
    status.and(finished)?;
    report(args, filters, &counts, &bits, seen, None)
}

/// Run `sluice split`.
pub fn run(args: SplitArgs) -> Result<(), Fail> {
    if args.live.interface.is_none() {
        super::filter::refuse_live_options(&args.live);
    }
    let file = args.filters.as_str();
    let (filters, mut errors) = sluice::split::parse_filters(&read_text(file)?, file);
    if args.mpf {
        if !errors.is_empty() {
            return Err(many(errors, true));
        }
        return run_mpf(&args, &filters, file);
    }
    let ebpf = matches!(args.engine, Some(super::filter::EngineArg::Ebpf));
    let per_packet = args.out_dir.is_some() || args.first_match;
    if args.xdp && (args.live.interface.is_none() || !ebpf || !args.count || per_packet) {
        super::usage("--xdp counts in the kernel before its stack: it goes with -i IFACE, --engine ebpf and --count (not --out-dir or --first-match)");
    }
    if args.live.interface.is_some() {
        if !errors.is_empty() {
            return Err(many(errors, true));
        }
        if ebpf && !per_packet {
            return kernel::run_live(&args, &filters, file);
        }
        return run_live(&args, &filters, file);
    }
    if ebpf {
        return kernel::run(&args, &filters, errors, file);
    }
    // Interrupted (SIGINT, SIGTERM, SIGHUP), the run stops reading and
    // keeps what it wrote, as tcpdump does.
    signals::install(false)?;
    // Mapped, a file's packets go to --count's threads by place, uncopied.
    let (mut reader, size) = open_capture_mapped(args.read.as_deref())?;
    let name = reader.name().to_string();
    let format = reader.format();
    let big_endian = super::big_endian(&format);

    // Compile everything for the capture's link type before writing anything.
    let native = !matches!(args.engine, Some(super::filter::EngineArg::Interp));
    let build =
        |filters: &[FilterLine], lt, file: &str| build(filters, lt, Some(big_endian), file, native);
    let mut classifiers: HashMap<u16, Merging> = HashMap::new();
    for info in reader.declared_interfaces() {
        if classifiers.contains_key(&info.linktype) {
            continue;
        }
        match build(&filters, linktype_of(info.linktype, &name)?, file) {
            Ok(m) => {
                classifiers.insert(info.linktype, m);
            }
            Err(e) => errors.extend(e),
        }
    }
    // (A pcapng file without an interface before its first packet: the
    // filters compile when that packet comes, still before any output.)
    if !errors.is_empty() {
        return Err(many(errors, true));
    }
    if filters.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }

    let mut outputs: Option<FileSet> = None;
    let open_outputs = |outputs: &mut Option<FileSet>| -> Result<(), Fail> {
        if let (None, Some(dir)) = (&outputs, &args.out_dir) {
            *outputs = Some(self::outputs(dir, &filters, &format, Placement::Replace)?);
        }
        Ok(())
    };
    if !classifiers.is_empty() {
        open_outputs(&mut outputs)?;
    }

    let mut dispatcher = args.dispatcher(big_endian);
    // Counts alone, of a file of one link type: on every core.
    let pcap = matches!(format, sluice::capture::CaptureFormat::Pcap { .. });
    let threads = count::threads();
    if !per_packet && !args.verdicts && dispatcher.is_none() && pcap && threads > 1 {
        if let Some(merged) = classifiers.values().next() {
            let (status, counts, seen) =
                count::count(&mut reader, size, merged, filters.len(), threads);
            let finished = finish(None, Some(&reader));
            status.and(finished)?;
            return report(&args, &filters, &counts, &[], seen, None);
        }
    }
    let mut counts = vec![0u64; filters.len()];
    let mut bits: Vec<Bits> = (0..filters.len()).map(|_| Bits::default()).collect();
    let mut seen = 0u64;
    let mut scratch = MergingScratch::default();
    let mut ids: Vec<u32> = Vec::new();
    let mut delivered = Output::default();
    // Both the interface hook and the packet loop build classifiers.
    let classifiers = std::cell::RefCell::new(classifiers);
    let classifier = |classifiers: &mut HashMap<u16, Merging>, lt: u16| {
        let first = classifiers.is_empty();
        cached(classifiers, lt, || {
            build(&filters, linktype_of(lt, &name)?, file).map_err(|e| many(e, first))
        })
        .map(|_| ())
    };
    let status = for_each_packet_declaring(
        &mut reader,
        size,
        // Interfaces declared later, used by a packet or not.
        |info| classifier(&mut classifiers.borrow_mut(), info.linktype),
        |pkt| {
            let mut classifiers = classifiers.borrow_mut();
            classifier(&mut classifiers, pkt.linktype)?;
            let merged = classifiers.get_mut(&pkt.linktype).expect("just built");
            if args.first_match {
                ids.clear();
                ids.extend(merged.classify_first(pkt.data, pkt.wirelen, &mut scratch));
            } else if dispatcher.is_some() {
                // Dispatched to fragments in filter order.
                merged.classify_sorted(pkt.data, pkt.wirelen, &mut scratch, &mut ids);
            } else {
                // Counts, verdicts and each filter's file do not depend on
                // the order of a packet's filters: no sort (with ~170
                // matches a packet it cost about a sixth of the run).
                merged.classify(pkt.data, pkt.wirelen, &mut scratch, &mut ids);
            }
            open_outputs(&mut outputs)?;
            let mut to = Deliver {
                counts: &mut counts,
                bits: args.verdicts.then_some(&mut bits),
                outputs: outputs.as_mut(),
            };
            match dispatcher.as_mut() {
                // Held fragments come out after the packet that releases them.
                Some(d) => {
                    d.dispatch(pkt, &ids, &mut delivered);
                    for del in delivered.iter() {
                        match del.source {
                            Source::Current => to.deliver(seen, pkt, del.filters)?,
                            Source::Held(h) => to.deliver(h.index, &h.as_packet(), del.filters)?,
                        }
                    }
                }
                None => to.deliver(seen, pkt, &ids)?,
            }
            seen += 1;
            Ok(true)
        },
    );
    let classifiers = classifiers.into_inner();
    // End of input: fragments still held are given up (in --first-match
    // mode those some filter accepts alone go to it).
    if let Some(d) = dispatcher.as_mut() {
        d.flush(&mut delivered);
        let mut to = Deliver {
            counts: &mut counts,
            bits: args.verdicts.then_some(&mut bits),
            outputs: outputs.as_mut(),
        };
        for del in delivered.iter() {
            if let Source::Held(h) = del.source {
                to.deliver(h.index, &h.as_packet(), del.filters)?;
            }
        }
        let c = d.counters();
        if c.dropped() > 0 && !args.json {
            eprintln!(
                "sluice: fragments: {} held fragments dropped (timeout {}, queue full {}, end of input {}; {} of them went to their own filter)",
                c.dropped(),
                c.dropped_timeout,
                c.dropped_full,
                c.dropped_end,
                c.fallback
            );
        }
    }
    // A capture without packets and without an interface: check the filters
    // for Ethernet before creating the (empty) outputs.
    if status.is_ok() && outputs.is_none() && classifiers.is_empty() {
        build(&filters, LinkType::EN10MB, file).map_err(|e| many(e, true))?;
        open_outputs(&mut outputs)?;
    }
    // Whatever happened (the end, an interrupt, a bad record), keep
    // everything processed so far.
    let finished = finish(outputs, Some(&reader));
    let frag = dispatcher.as_ref().map(|d| *d.counters());
    // A failed run prints no counts.
    status.and(finished)?;
    report(&args, &filters, &counts, &bits, seen, frag.as_ref())
}

/// A program accepting what any filter accepts, for the kernel: when
/// every filter is a pcap expression (`LANG:@path` read relative to
/// `dir`), there are few enough of them, and the result fits the
/// kernel's limit.
fn union_program(
    filters: &[FilterLine],
    lt: LinkType,
    dir: Option<&Path>,
) -> Option<Vec<sluice::bpf::Insn>> {
    if filters.len() > sluice::split::compile::UNION_MAX {
        return None;
    }
    let exprs = filters
        .iter()
        .map(|f| {
            Some(
                sluice::Spec::parse(&f.expression, dir)
                    .ok()?
                    .expression()?
                    .to_string(),
            )
        })
        .collect::<Option<Vec<String>>>()?;
    let exprs: Vec<&str> = exprs.iter().map(String::as_str).collect();
    let builder = Program::builder(lt).snaplen(super::DEFAULT_SNAPLEN);
    sluice::split::compile::union_program(&exprs, &builder, sluice::live::MAX_INSNS)
}

/// `sluice split -i`: the filters merged for the interface's link type,
/// their union in the kernel where it fits (with `--engine ebpf`, the
/// whole set as an eBPF chain, however many), one ring per worker.
fn run_live(args: &SplitArgs, filters: &[FilterLine], file: &str) -> Result<(), Fail> {
    if args.verdicts || args.fragments {
        super::usage("--verdicts and --fragments read files; with -i, use --count or --out-dir");
    }
    if filters.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }
    let mut live = Live::open(&args.live, super::DEFAULT_SNAPLEN)?;
    let lt = linktype_of(live.linktype(), live.name())?;
    let big_endian = cfg!(target_endian = "big");
    let native = !matches!(args.engine, Some(super::filter::EngineArg::Interp));
    let merged = build(filters, lt, None, file, native).map_err(|e| many(e, true))?;
    // Held for the run: the chain's later programs go when it is dropped.
    let _chain = match args.engine {
        Some(super::filter::EngineArg::Ebpf) => {
            Some(kernel::prefilter(&mut live, filters, lt, file)?)
        }
        _ => {
            let union = union_program(filters, lt, Path::new(file).parent());
            live.prefilter(union.as_deref())?;
            None
        }
    };
    let format = CaptureFormat::Pcap {
        nanos: false,
        big_endian,
        linktype: live.linktype(),
        snaplen: super::DEFAULT_SNAPLEN,
        fcs_len: None,
    };
    let mut outputs = match &args.out_dir {
        Some(dir) => Some(outputs(dir, filters, &format, Placement::InPlace)?),
        None => None,
    };
    eprintln!("sluice: {}", live.banner());
    let merged = Arc::new(merged);
    let first_match = args.first_match;
    let make = || -> Classify {
        let m = merged.clone();
        let mut scratch = MergingScratch::default();
        Box::new(move |data: &[u8], wirelen: u32, ids: &mut Vec<u32>| {
            if first_match {
                ids.extend(m.classify_first(data, wirelen, &mut scratch));
            } else {
                m.classify_sorted(data, wirelen, &mut scratch, ids);
            }
        })
    };
    let mut counts = vec![0u64; filters.len()];
    let (report_, status) = live.run(outputs.is_some(), make, |event| {
        let (pkt, ids) = match event {
            Event::Packet(pkt, ids) => (pkt, ids),
            Event::Flush => {
                if let Some(o) = outputs.as_mut() {
                    o.flush().map_err(out_fail)?;
                }
                return Ok(true);
            }
            _ => return Ok(true),
        };
        let mut to = Deliver {
            counts: &mut counts,
            bits: None,
            outputs: outputs.as_mut(),
        };
        to.deliver(0, pkt, ids)?;
        Ok(true)
    });
    let finished = finish(outputs.take(), None);
    eprint!("{}", report_.text(args.json));
    status.and(finished)?;
    if args.count {
        report(args, filters, &counts, &[], report_.seen, None)?;
    }
    Ok(())
}

/// Where a packet goes: counts, verdict bits and output files.
struct Deliver<'a> {
    counts: &'a mut [u64],
    bits: Option<&'a mut Vec<Bits>>,
    outputs: Option<&'a mut FileSet>,
}

impl Deliver<'_> {
    /// Packet `index` (input order) goes to `ids`.
    fn deliver(&mut self, index: u64, pkt: &Packet<'_>, ids: &[u32]) -> Result<(), Fail> {
        for &id in ids {
            let i = id as usize;
            self.counts[i] += 1;
            if let Some(b) = self.bits.as_deref_mut() {
                b[i].set(index);
            }
            if let Some(o) = self.outputs.as_deref_mut() {
                o.write(i, pkt).map_err(out_fail)?;
            }
        }
        Ok(())
    }
}

/// Print the counts and verdicts on standard output.
fn report(
    args: &SplitArgs,
    filters: &[FilterLine],
    counts: &[u64],
    bits: &[Bits],
    seen: u64,
    frag: Option<&Counters>,
) -> Result<(), Fail> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = if args.json {
        json(&mut out, args, filters, counts, bits, seen, frag)
    } else {
        text(&mut out, args, filters, counts, bits, seen)
    };
    result
        .and_then(|_| out.flush())
        .map_err(|e| super::stdout_failed(&e))
}

fn text(
    out: &mut impl Write,
    args: &SplitArgs,
    filters: &[FilterLine],
    counts: &[u64],
    bits: &[Bits],
    seen: u64,
) -> std::io::Result<()> {
    if args.count {
        for (f, c) in filters.iter().zip(counts) {
            writeln!(out, "{}\t{c}", f.name)?;
        }
    }
    if args.verdicts {
        for (f, b) in filters.iter().zip(bits) {
            write!(out, "{}\t", f.name)?;
            out.write_all(&b.row(seen))?;
            writeln!(out)?;
        }
    }
    Ok(())
}

fn json(
    out: &mut impl Write,
    args: &SplitArgs,
    filters: &[FilterLine],
    counts: &[u64],
    bits: &[Bits],
    seen: u64,
    frag: Option<&Counters>,
) -> std::io::Result<()> {
    write!(out, "{{\"packets\": {seen}, ")?;
    if let Some(c) = frag {
        write!(out, "\"fragments\": {}, ", fragment_json(c))?;
    }
    write!(out, "\"filters\": [")?;
    for (i, f) in filters.iter().enumerate() {
        if i > 0 {
            write!(out, ", ")?;
        }
        write!(out, "{{\"name\": {}", json_string(&f.name))?;
        if args.count {
            write!(out, ", \"accepted\": {}", counts[i])?;
        }
        if args.verdicts {
            write!(out, ", \"verdicts\": \"")?;
            out.write_all(&bits[i].row(seen))?;
            write!(out, "\"")?;
        }
        write!(out, "}}")?;
    }
    writeln!(out, "]}}")
}

/// The fragment counters as a JSON object.
fn fragment_json(c: &Counters) -> String {
    format!(
        "{{\"first_fragments\": {}, \"later_fragments\": {}, \"later_on_arrival\": {}, \"held\": {}, \"released\": {}, \"released_unclaimed\": {}, \"dropped\": {}, \"dropped_timeout\": {}, \"dropped_full\": {}, \"dropped_end\": {}, \"fallback\": {}, \"datagrams_expired\": {}, \"datagrams_evicted\": {}}}",
        c.first_fragments,
        c.later_fragments,
        c.later_on_arrival,
        c.held,
        c.released,
        c.released_unclaimed,
        c.dropped(),
        c.dropped_timeout,
        c.dropped_full,
        c.dropped_end,
        c.fallback,
        c.datagrams_expired,
        c.datagrams_evicted
    )
}

/// A JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_rows() {
        let mut b = Bits::default();
        b.set(1);
        b.set(70);
        let row = b.row(72);
        assert_eq!(row.len(), 72);
        assert_eq!(row.iter().filter(|&&c| c == b'1').count(), 2);
        assert_eq!((row[1], row[70], row[0]), (b'1', b'1', b'0'));
    }

    #[test]
    fn json_strings_escape() {
        assert_eq!(json_string("a\"b\\c\t"), "\"a\\\"b\\\\c\\u0009\"");
    }
}
