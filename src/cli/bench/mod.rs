//! `sluice bench`: packets of a capture held in memory, run again and again
//! through each engine, timed per packet, next to libpcap's `bpf_filter` on
//! the same packets when libpcap is installed.
//!
//! One expression: sluice's engines (native code per call and per batch, the
//! BPF interpreter, the IR's reference interpreter) against libpcap running
//! the program its own compiler makes. A filters file (`--filters`, the
//! format of `sluice split`): the merged engines against every filter run
//! one after another (the CSPF/BPF model), with sluice's native code,
//! sluice's interpreter and libpcap ([`many`]).
//!
//! Each engine's figure is the median of five timed samples, each long
//! enough to take a fifth of `--seconds`. Every engine must accept the same
//! packets as the reference: a disagreement is a bug and fails the run.

mod many;

use super::{linktype_of, open_capture, print_out, Fail, DEFAULT_SNAPLEN};
use sluice::timing::ns_per_packet;
use sluice::{LinkType, Program, Runner};
use std::time::Duration;

/// The arguments of `sluice bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Capture file whose packets are held in memory and classified.
    #[arg(short = 'r', value_name = "FILE")]
    read: String,
    /// Many filters at once: one `name<TAB>filter` per line (as `sluice split`).
    #[arg(long, value_name = "FILTERS", conflicts_with = "expression")]
    filters: Option<String>,
    /// Measure only this engine (and libpcap); its result is the JSON line.
    #[arg(long, value_enum)]
    engine: Option<BenchEngine>,
    /// Seconds spent timing each engine.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    seconds: f64,
    /// Leave libpcap out even when it is installed.
    #[arg(long = "no-libpcap", conflicts_with = "libpcap")]
    no_libpcap: bool,
    /// The libpcap shared library to compare with (a build of libpcap
    /// master, say); default: $SLUICE_LIBPCAP, else the system's.
    #[arg(long, value_name = "LIBPCAP.so")]
    libpcap: Option<std::path::PathBuf>,
    /// The filter expression (the words are joined with spaces).
    #[arg(trailing_var_arg = true)]
    expression: Vec<String>,
}

/// The engines `sluice bench` times.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BenchEngine {
    /// Native code, one call per packet (one filter), or every filter's
    /// native code one after another (a filters file).
    Native,
    /// Native code, 32 packets per call (one filter only).
    NativeBatch,
    /// The classic BPF interpreter (every filter in turn for a filters file).
    Interp,
    /// The IR's reference interpreter (one filter only).
    Reference,
    /// The merged decision tree walked in Rust, one packet per call (a
    /// filters file only).
    Classifier,
    /// The merged decision tree walked in Rust, 32 packets per call (a
    /// filters file only).
    ClassifierBatch,
    /// The merged decision tree as machine code, one packet per call (a
    /// filters file only; the default engine everywhere sluice merges).
    ClassifierNative,
    /// The merged decision tree as machine code, 32 packets per call (a
    /// filters file only).
    ClassifierNativeBatch,
    /// The default engine with its flow cache turned off, one packet per
    /// call (a filters file only; to compare with); also its work, each
    /// packet classified again right after itself (the time less what the
    /// traffic's variety costs in mispredicted branches and cache misses),
    /// and the cache on for every packet.
    ClassifierNativeNoCache,
    /// Bit vectors per field (Lakshman and Stiliadis) over the tree's
    /// fields, in Rust, one packet per call (a filters file only; to
    /// compare with; only when asked for, since its vectors grow as
    /// filters × intervals).
    Bitvector,
    /// HiCuts (cuts of the fields' value ranges, paths checked at the
    /// leaves) over the tree's fields, in Rust, one packet per call (a
    /// filters file only; to compare with; only when asked for).
    Cuts,
    /// A decision diagram of hash-consed tests with a match list per
    /// outcome over the tree's fields, in Rust, one packet per call (a
    /// filters file only; to compare with; only when asked for).
    Dag,
    /// Tuple space search (one table per filter shape), in Rust (a
    /// filters file only; the earlier engine, to compare with).
    Groups,
    /// Tuple space search as machine code, 32 packets per call (a filters
    /// file only).
    GroupsNative,
}

impl BenchEngine {
    fn name(self) -> &'static str {
        match self {
            BenchEngine::Native => "native",
            BenchEngine::NativeBatch => "native-batch",
            BenchEngine::Interp => "interp",
            BenchEngine::Reference => "reference",
            BenchEngine::Classifier => "classifier",
            BenchEngine::ClassifierBatch => "classifier-batch",
            BenchEngine::ClassifierNative => "classifier-native",
            BenchEngine::ClassifierNativeBatch => "classifier-native-batch",
            BenchEngine::ClassifierNativeNoCache => "classifier-native-no-cache",
            BenchEngine::Bitvector => "bitvector",
            BenchEngine::Cuts => "cuts",
            BenchEngine::Dag => "dag",
            BenchEngine::Groups => "groups",
            BenchEngine::GroupsNative => "groups-native",
        }
    }
}

/// The packets, one after another in one buffer.
struct Packets {
    bytes: Vec<u8>,
    /// (start, end, wire length) of each packet in `bytes`.
    spans: Vec<(usize, usize, u32)>,
}

impl Packets {
    fn iter(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        self.spans.iter().map(|&(a, b, w)| (&self.bytes[a..b], w))
    }
    fn len(&self) -> usize {
        self.spans.len()
    }
}

/// One row of the table.
struct Row {
    /// The `--engine` name (`libpcap` for libpcap).
    engine: &'static str,
    /// What the table says.
    label: String,
    ns: f64,
    accepted: u64,
}

/// Batches for the batch engines.
const BATCH: usize = 32;

/// Run `sluice bench`.
pub fn run(args: BenchArgs) -> Result<(), Fail> {
    let (packets, lt, big_endian, skipped) = load(&args.read)?;
    if packets.len() == 0 {
        return Err(Fail(format!("{}: no packets to time", args.read)));
    }
    if skipped > 0 {
        eprintln!(
            "sluice bench: {skipped} packets of other link types than {} left out",
            lt.name()
        );
    }
    if !(args.seconds > 0.0 && args.seconds < 3600.0) {
        return Err(Fail(format!(
            "--seconds {}: must be between 0 and 3600",
            args.seconds
        )));
    }
    let budget = Duration::from_secs_f64(args.seconds);
    let for_many = matches!(
        args.engine,
        Some(
            BenchEngine::Classifier
                | BenchEngine::ClassifierBatch
                | BenchEngine::ClassifierNative
                | BenchEngine::ClassifierNativeBatch
                | BenchEngine::ClassifierNativeNoCache
                | BenchEngine::Bitvector
                | BenchEngine::Cuts
                | BenchEngine::Dag
                | BenchEngine::Groups
                | BenchEngine::GroupsNative
        )
    );
    let for_one = matches!(
        args.engine,
        Some(BenchEngine::NativeBatch | BenchEngine::Reference)
    );
    match (&args.engine, args.filters.is_some()) {
        (Some(e), false) if for_many => {
            return Err(Fail(format!("--engine {}: needs --filters", e.name())))
        }
        (Some(e), true) if for_one => {
            return Err(Fail(format!(
                "--engine {}: times one filter, not a --filters file",
                e.name()
            )))
        }
        _ => {}
    }
    let libpcap = if args.no_libpcap {
        None
    } else {
        let loaded = match &args.libpcap {
            Some(path) => sluice::libpcap::Libpcap::load_from(path),
            None => sluice::libpcap::Libpcap::load(),
        };
        match loaded {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("sluice bench: {e}; no libpcap column");
                None
            }
        }
    };
    let (rows, nfilters, lib_row, default_engine, floor) = match &args.filters {
        Some(file) => {
            let (rows, n, lib) = many::many(
                &args,
                file,
                &packets,
                (lt, big_endian),
                budget,
                libpcap.as_ref(),
            )?;
            // The fastest merged engine where native code exists.
            let best = if sluice::Runner::host_default() == sluice::Runner::Native {
                BenchEngine::ClassifierNative
            } else {
                BenchEngine::ClassifierBatch
            };
            (rows, n, lib, best, None)
        }
        None => {
            let (rows, lib, floor) =
                one(&args, &packets, lt, big_endian, budget, libpcap.as_ref())?;
            (rows, 1, lib, BenchEngine::Native, floor)
        }
    };
    let chosen = args.engine.unwrap_or(default_engine).name();
    let mut text = format!(
        "sluice bench: {} packets ({} bytes) from {}, {} filter{}, link type {}\n",
        packets.len(),
        packets.bytes.len(),
        args.read,
        nfilters,
        if nfilters == 1 { "" } else { "s" },
        lt.name()
    );
    text.push_str(&format!(
        "{:<40} {:>10} {:>14} {:>10} {:>10}\n",
        "engine", "ns/packet", "packets/s", "accepted", "vs libpcap"
    ));
    for r in rows.iter().chain(lib_row.iter()) {
        let vs = lib_row
            .as_ref()
            .map(|l| format!("{:.2}x", l.ns / r.ns))
            .unwrap_or_else(|| "-".into());
        text.push_str(&format!(
            "{:<40} {:>10.2} {:>14.0} {:>10} {:>10}\n",
            r.label,
            r.ns,
            1e9 / r.ns,
            r.accepted,
            vs
        ));
    }
    if let Some(ns) = floor {
        text.push_str(&format!(
            "{:<40} {:>10.2} {:>14.0} {:>10} {:>10}\n",
            "memory floor (touch first cache line)",
            ns,
            1e9 / ns,
            "-",
            "-"
        ));
    }
    let main = rows
        .iter()
        .find(|r| r.engine == chosen)
        .or(rows.first())
        .ok_or_else(|| Fail("no engine was timed".into()))?;
    let mut json = format!(
        "{{\"engine\": \"{}\", \"ns_per_packet\": {:.3}, \"packets\": {}, \"filters\": {}",
        main.engine,
        main.ns,
        packets.len(),
        nfilters
    );
    if let Some(l) = &lib_row {
        json.push_str(&format!(", \"libpcap_ns_per_packet\": {:.3}", l.ns));
    }
    json.push_str("}\n");
    text.push_str(&json);
    print_out(&text)?;
    // Every sluice engine must agree with the first (the reference order).
    if let Some(first) = rows.first() {
        for r in &rows[1..] {
            if r.accepted != first.accepted {
                return Err(Fail(format!(
                    "engines disagree: {} accepted {} packets, {} accepted {}",
                    first.label, first.accepted, r.label, r.accepted
                )));
            }
        }
    }
    Ok(())
}

/// Every packet of the capture's first link type, in one buffer.
fn load(path: &str) -> Result<(Packets, LinkType, bool, u64), Fail> {
    let (mut reader, _) = open_capture(Some(path))?;
    let big_endian = super::big_endian(&reader.format());
    let mut packets = Packets {
        bytes: Vec::new(),
        spans: Vec::new(),
    };
    let mut first: Option<u16> = reader.linktype();
    let mut skipped = 0u64;
    while let Some(p) = reader.next_packet()? {
        let lt = *first.get_or_insert(p.linktype);
        if p.linktype != lt {
            skipped += 1;
            continue;
        }
        let a = packets.bytes.len();
        packets.bytes.extend_from_slice(p.data);
        packets.spans.push((a, packets.bytes.len(), p.wirelen));
    }
    let lt = linktype_of(first.unwrap_or(1), path)?;
    Ok((packets, lt, big_endian, skipped))
}

fn wants(args: &BenchArgs, e: BenchEngine) -> bool {
    args.engine.map_or(true, |x| x == e)
}

/// The engines' rows, libpcap's row and the memory floor (ns per packet).
type OneResult = (Vec<Row>, Option<Row>, Option<f64>);

/// One expression through each engine.
fn one(
    args: &BenchArgs,
    packets: &Packets,
    lt: LinkType,
    big_endian: bool,
    budget: Duration,
    libpcap: Option<&sluice::libpcap::Libpcap>,
) -> Result<OneResult, Fail> {
    let expr = args.expression.join(" ");
    let program = Program::builder(lt)
        .snaplen(DEFAULT_SNAPLEN)
        .offline(true)
        .capture_big_endian(big_endian)
        .build(&expr)
        .map_err(|e| Fail(format!("{e} (in '{expr}')")))?;
    let n = packets.len();
    let mut floor = None;
    let mut rows = Vec::new();
    let mut add = |engine: BenchEngine, (ns, accepted): (f64, u64)| {
        rows.push(Row {
            engine: engine.name(),
            label: engine.name().to_string(),
            ns,
            accepted,
        })
    };
    let count = |engine: Runner| {
        let p = &program;
        move || {
            packets
                .iter()
                .filter(|&(d, w)| p.run_with(engine, d, w) != 0)
                .count() as u64
        }
    };
    if wants(args, BenchEngine::Native) {
        if program.native().is_none() {
            eprintln!("sluice bench: no native code for this filter; 'native' is the interpreter");
        }
        add(
            BenchEngine::Native,
            ns_per_packet(budget, n, count(Runner::Native)),
        );
    }
    if wants(args, BenchEngine::NativeBatch) {
        if let Some(nf) = program.native() {
            // Each batch's descriptors are built from the buffer as they
            // would be by a caller that reads packets (the figure includes
            // that work, as a Python caller's does).
            let mut chunk: Vec<(&[u8], u32)> = Vec::with_capacity(BATCH);
            let mut out = [0u32; BATCH];
            add(
                BenchEngine::NativeBatch,
                ns_per_packet(budget, n, || {
                    let mut acc = 0u64;
                    for spans in packets.spans.chunks(BATCH) {
                        chunk.clear();
                        chunk.extend(spans.iter().map(|&(a, b, w)| (&packets.bytes[a..b], w)));
                        let o = &mut out[..chunk.len()];
                        nf.run_batch(&chunk, o);
                        acc += o.iter().filter(|&&v| v != 0).count() as u64;
                    }
                    acc
                }),
            );
        }
    }
    if wants(args, BenchEngine::Interp) {
        add(
            BenchEngine::Interp,
            ns_per_packet(budget, n, count(Runner::Interp)),
        );
    }
    if wants(args, BenchEngine::Reference) && program.ir().is_some() {
        add(
            BenchEngine::Reference,
            ns_per_packet(budget, n, count(Runner::Reference)),
        );
    }
    // The memory floor: a loop that only touches the header bytes filters
    // read (the first cache line of each packet), so on a capture larger
    // than the caches it shows what memory alone costs.
    if args.engine.is_none() {
        let (ns, _) = ns_per_packet(budget, n, || {
            packets
                .iter()
                .map(|(d, _)| sluice::native::floor::header_bytes(d))
                .sum::<u64>()
        });
        floor = Some(ns);
    }
    let lib = match libpcap {
        Some(l) => match libpcap_program(l, &expr, None, &program, (lt, &args.read)) {
            Ok(p) => {
                let (ns, accepted) = ns_per_packet(budget, n, || {
                    packets.iter().filter(|&(d, w)| p.run(d, w) != 0).count() as u64
                });
                Some(Row {
                    engine: "libpcap",
                    label: version_label(l),
                    ns,
                    accepted,
                })
            }
            Err(e) => {
                eprintln!("sluice bench: libpcap could not compile it: {e}");
                None
            }
        },
        None => None,
    };
    Ok((rows, lib, floor))
}

/// What libpcap runs for a filter: its own compilation of a pcap
/// expression (what tcpdump would run: compiled on the capture file itself
/// when libpcap can open it, as `tcpdump -r` compiles, else for the link
/// type), or sluice's classic BPF for the other languages (libpcap's
/// interpreter on the same program).
fn libpcap_program<'l>(
    l: &'l sluice::libpcap::Libpcap,
    text: &str,
    dir: Option<&std::path::Path>,
    program: &Program,
    (lt, capture): (LinkType, &str),
) -> Result<sluice::libpcap::Program<'l>, String> {
    let spec = sluice::Spec::parse(text, dir).map_err(|e| e.to_string())?;
    match spec.language {
        sluice::Language::Pcap => {
            let handle = match l.open_offline(std::path::Path::new(capture)) {
                Ok(h) if h.datalink() as u32 == lt.dlt() => h,
                _ => l
                    .open_dead(lt.dlt(), DEFAULT_SNAPLEN)
                    .map_err(|e| e.to_string())?,
            };
            handle.compile(&spec.text, true).map_err(|e| e.to_string())
        }
        _ => Ok(l.program(program.bpf())),
    }
}

/// `libpcap 1.10.3` from libpcap's version string.
fn version_label(l: &sluice::libpcap::Libpcap) -> String {
    let v = l.version();
    let number = v
        .split_whitespace()
        .find(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .unwrap_or("");
    format!("libpcap {number} bpf_filter").trim().to_string()
}
