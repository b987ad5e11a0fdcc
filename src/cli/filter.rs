//! `sluice filter`: one filter over a capture, with tcpdump's options.
//!
//! Every option of tcpdump 4.99's manual is known here: it does what
//! tcpdump does, or it is refused with one line saying what to use
//! instead ([`super::compat`]). Printed packets are decoded by tcpdump
//! itself where it is installed ([`super::decode`]).

use super::compat::CompatArgs;
use super::decode::{DecodeArgs, Lines, Style};
use super::live::{Live, LiveArgs};
use super::print::{Dump, Options};
use super::rotate::RotateArgs;
use super::{cached, for_each_packet_declaring, linktype_of, open_capture_mapped, print_out};
use super::{out_fail, signals, usage, Fail, Stdout};
use clap::ArgAction;
use sluice::capture::sink::{Placement, Rotation};
use sluice::capture::{CaptureFormat, Packet};
use sluice::live::session::{Classify, Event, KernelProgram, Make};
use sluice::live::KernelFilter;
use sluice::{LinkType, Program, Runner};
use std::collections::HashMap;
use std::io::IsTerminal;

/// The arguments of `sluice filter`. Options may come before or after the
/// expression, as with tcpdump (`sluice filter tcp port 80 -r in.pcap`).
#[derive(clap::Args)]
pub struct FilterArgs {
    /// Capture file to read (pcap or pcapng, gzip or zstd compressed or not; `-` for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<String>,
    /// Write accepted packets to this file, in the input's format (`-` for standard output). The file is replaced only when the run gets to write packets.
    #[arg(short = 'w', value_name = "OUT")]
    write: Option<String>,
    #[command(flatten)]
    rotate: RotateArgs,
    /// Print the number of accepted packets (with -w: written too; with
    /// --verdicts: on the line after the verdicts).
    #[arg(long)]
    count: bool,
    /// Print one line per input packet: 1 if accepted, 0 if not.
    #[arg(long)]
    verdicts: bool,
    /// Print --count's result as JSON: {"packets": N, "accepted": M}; with
    /// -i, the capture's counts too (on standard error, one object).
    #[arg(long)]
    json: bool,
    /// Stop after N accepted packets.
    #[arg(short = 'c', value_name = "N")]
    max: Option<u64>,
    /// Live capture options (-i IFACE and what goes with it).
    #[command(flatten)]
    live: LiveArgs,
    /// List the interfaces -i can capture on, as tcpdump -D does, and exit.
    #[arg(short = 'D', long = "list-interfaces", exclusive = true)]
    list_interfaces: bool,
    /// Print the compiled program (-d: readable, -dd: C array, -ddd: decimal) and exit.
    #[arg(short = 'd', action = ArgAction::Count, conflicts_with_all = ["write", "count", "verdicts", "print", "max"])]
    dump: u8,
    /// With -d and no capture: the link type to compile for (e.g. EN10MB, RAW, LINUX_SLL).
    #[arg(
        short = 'y',
        value_name = "LINKTYPE",
        requires = "dump",
        conflicts_with = "read"
    )]
    linktype: Option<String>,
    /// Read the expression from this file (an expression on the command
    /// line is then ignored, with a warning, as tcpdump does).
    #[arg(short = 'F', value_name = "EXPRFILE", conflicts_with = "bpf_file")]
    expr_file: Option<String>,
    /// Load a classic BPF program (tcpdump -d, -dd or -ddd output) instead of an expression.
    #[arg(long = "bpf-file", value_name = "PROG", conflicts_with = "expression")]
    bpf_file: Option<String>,
    /// Do not optimise the compiled program (tcpdump's -O).
    #[arg(short = 'O', long = "no-optimize")]
    no_optimize: bool,
    /// Snapshot length: with -w, packets are written cut to it; with -i,
    /// packets are captured cut to it; with -d, what the program returns
    /// on accept [default: 262144; 0 means 262144]. Printing a file does
    /// not use it, as with tcpdump.
    #[arg(short = 's', long = "snapshot-length", value_name = "SNAPLEN")]
    snaplen: Option<u32>,
    /// Engine: native code (the default on x86-64 and AArch64; the
    /// interpreter runs any filter it cannot compile), the BPF
    /// interpreter, or eBPF run by the kernel (on files each packet with
    /// BPF_PROG_TEST_RUN, with -i as the rings' socket filter; root, or
    /// CAP_BPF and CAP_NET_ADMIN).
    #[arg(long, value_enum)]
    engine: Option<EngineArg>,
    /// With -i: also run the filter as an XDP program on the interface,
    /// before the kernel's stack. Frames it rejects are dropped for the
    /// whole host, not only for this capture (for a monitoring port).
    /// Native XDP where the driver has it, generic otherwise; detached
    /// when the run ends, however it ends. Ethernet interfaces only;
    /// frames the host sends are not seen by XDP (the socket's pre-filter
    /// still judges them).
    #[arg(long)]
    xdp: bool,
    /// Print addresses and ports as numbers, not names (-n, -nn).
    #[arg(short = 'n', action = ArgAction::Count)]
    numeric: u8,
    /// Print the link-level header on each line (Ethernet: addresses, type, length).
    #[arg(short = 'e')]
    link_header: bool,
    /// Print each packet in hex after its line, without (-x) or with (-xx) the link header.
    #[arg(short = 'x', action = ArgAction::Count)]
    hex: u8,
    /// Print each packet in hex and ASCII, without (-X) or with (-XX) the link header.
    #[arg(short = 'X', action = ArgAction::Count)]
    hex_ascii: u8,
    /// Print each packet in ASCII, without (-A) or with (-AA) the link header.
    #[arg(short = 'A', action = ArgAction::Count)]
    ascii: u8,
    /// Timestamps: none (-t), seconds since 1970 (-tt), delta since the previous
    /// line (-ttt), date and time (-tttt), delta since the first line (-ttttt);
    /// the default is the local time of day.
    #[arg(short = 't', action = ArgAction::Count)]
    ts_format: u8,
    /// Quick output: less protocol information on each line.
    #[arg(short = 'q')]
    quick: bool,
    /// Timestamps printed (and written with -w to a pcap file) in micro- or nanoseconds.
    #[arg(
        long = "time-stamp-precision",
        alias = "time-precision",
        value_enum,
        value_name = "PRECISION"
    )]
    precision: Option<Precision>,
    /// Shorthand for --time-stamp-precision micro.
    #[arg(long, conflicts_with_all = ["precision", "nano"])]
    micro: bool,
    /// Shorthand for --time-stamp-precision nano.
    #[arg(long, conflicts_with = "precision")]
    nano: bool,
    /// Write each packet out as soon as it is handled (-w file and standard output).
    #[arg(short = 'U', long = "packet-buffered")]
    unbuffered: bool,
    /// With -w: print the packets' lines on standard output too.
    #[arg(long, requires = "write")]
    print: bool,
    /// Refuse host names in the expression instead of resolving them
    /// (by default `host NAME` is resolved when the filter compiles, as
    /// libpcap does: /etc/hosts and DNS as the system is configured).
    #[arg(long = "no-resolve")]
    no_resolve: bool,
    #[command(flatten)]
    decode: DecodeArgs,
    #[command(flatten)]
    compat: CompatArgs,
    /// The filter expression (the words are joined with spaces, as tcpdump does).
    expression: Vec<String>,
}

/// `--engine`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum EngineArg {
    /// The classic BPF interpreter.
    Interp,
    /// Machine code (falls back to the interpreter where it cannot be built).
    Native,
    /// eBPF, verified and run by the kernel: BPF_PROG_TEST_RUN on files, the socket filter with -i.
    Ebpf,
}

/// `--time-stamp-precision`.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Precision {
    /// Microseconds.
    Micro,
    /// Nanoseconds.
    Nano,
}

/// Where the filter comes from.
enum Source {
    /// Filter text, and whether host names in it are resolved.
    Expression(String, bool),
    /// A `-F` file (its errors name the file, line and column and quote
    /// nothing of it), and whether host names in it are resolved.
    File(sluice::Spec, bool),
    Bpf(Program),
}

impl Source {
    /// The program for a link type. `file` is the byte order of the
    /// capture file the packets come from (libpcap compiles for a file as
    /// `tcpdump -r` does, for a handle without one, `-y` and live capture,
    /// as `pcap_open_dead` does: they differ on the loopback links).
    fn program(
        &self,
        lt: LinkType,
        snaplen: u32,
        optimize: bool,
        file: Option<bool>,
    ) -> Result<Program, Fail> {
        match self {
            Source::Bpf(p) => Ok(p.clone()),
            // Any language, named by its prefix (pcap by default).
            Source::Expression(_, resolve) | Source::File(_, resolve) => {
                let mut b = Program::builder(lt)
                    .snaplen(snaplen)
                    .optimize(optimize)
                    .offline(file.is_some())
                    .capture_big_endian(file.unwrap_or(cfg!(target_endian = "big")));
                if *resolve {
                    b = b.resolver(std::sync::Arc::new(sluice::filter::SystemResolver));
                }
                match self {
                    Source::File(spec, _) => spec.compile(&b).map_err(|err| Fail(err.to_string())),
                    Source::Expression(e, _) => {
                        b.build(e).map_err(|err| Fail(format!("{err} (in '{e}')")))
                    }
                    Source::Bpf(_) => unreachable!("matched above"),
                }
            }
        }
    }
}

impl FilterArgs {
    /// Whether packets are printed one line each (the default, or --print).
    fn prints_packets(&self) -> bool {
        !self.count && !self.verdicts && (self.write.is_none() || self.print)
    }

    /// `--time-stamp-precision`, `--micro` or `--nano`.
    fn precision(&self) -> Option<Precision> {
        match (self.precision, self.micro, self.nano) {
            (Some(p), _, _) => Some(p),
            (None, true, _) => Some(Precision::Micro),
            (None, _, true) => Some(Precision::Nano),
            _ => None,
        }
    }

    /// Refuse options that would be silently ignored (exit status 2).
    fn check(&self) {
        self.rotate.check(self.write.as_deref());
        let live = self.live.interface.is_some();
        self.compat.check(live);
        if !live {
            refuse_live_options(&self.live);
            if self.xdp {
                usage("--xdp is an option of live capture: add -i IFACE (a capture file has no interface to set)");
            }
        }
        let printing = [
            (self.link_header, "-e"),
            (self.hex > 0, "-x"),
            (self.hex_ascii > 0, "-X"),
            (self.ascii > 0, "-A"),
            (self.ts_format > 0, "-t"),
        ];
        let flag = printing
            .iter()
            .find(|(on, _)| *on)
            .map(|(_, f)| *f)
            .or(self.decode.printing_flag());
        if let Some(flag) = flag {
            if self.dump > 0 || self.count || self.verdicts {
                usage(&format!(
                    "{flag} changes how packets are printed; -d, --count and --verdicts print no packets"
                ));
            }
            if self.write.is_some() && !self.print {
                usage(&format!(
                    "{flag} changes how packets are printed; with -w, add --print to print them"
                ));
            }
        }
        if self.max == Some(0) {
            usage("invalid packet count 0: -c takes a count of at least 1, as tcpdump's does");
        }
        if self.json && !self.count && !live {
            usage("--json prints --count's result (or, with -i, the capture's counts)");
        }
        if live && self.verdicts {
            usage("--verdicts prints a line per packet of a file; with -i, use --count or -w");
        }
        if live && self.linktype.is_some() {
            usage("-y picks the link type of a program printed without a capture; with -i the interface decides it");
        }
        if self.precision().is_some() && !self.prints_packets() && self.write.is_none() {
            usage("--time-stamp-precision applies to printed packets and to -w files");
        }
    }

    fn snaplen(&self) -> u32 {
        match self.snaplen {
            None | Some(0) => super::DEFAULT_SNAPLEN,
            Some(s) => s,
        }
    }
}

/// The output file's format: the input's, with -s and --time-stamp-precision.
fn out_format(args: &FilterArgs, input: CaptureFormat) -> CaptureFormat {
    match input {
        CaptureFormat::Pcap {
            nanos,
            big_endian,
            linktype,
            snaplen,
            fcs_len,
        } => CaptureFormat::Pcap {
            nanos: match args.precision() {
                Some(p) => p == Precision::Nano,
                None => nanos,
            },
            big_endian,
            linktype,
            snaplen: args.snaplen.map_or(snaplen, |_| args.snaplen()),
            fcs_len,
        },
        ng => ng,
    }
}

/// Refuse the live capture options without `-i` (usage error): they
/// would be ignored silently on a file.
pub fn refuse_live_options(live: &LiveArgs) {
    let given = [
        (live.buffer.is_some(), "-B"),
        (live.no_promiscuous, "-p"),
        (live.direction.is_some(), "-Q"),
        (live.immediate, "--immediate-mode"),
        (live.workers.is_some(), "--workers"),
        (live.duration.is_some(), "--duration"),
        (live.block_kib.is_some(), "--block-size"),
        (live.block_timeout_ms.is_some(), "--block-timeout"),
        (live.no_kernel_filter, "--no-kernel-filter"),
    ];
    if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
        usage(&format!(
            "{flag} is an option of live capture: add -i IFACE (a capture file has no interface to set)"
        ));
    }
}

/// Run `sluice filter`.
pub fn run(args: FilterArgs) -> Result<(), Fail> {
    if args.compat.version {
        return print_out(&format!("sluice {}\n", env!("CARGO_PKG_VERSION")));
    }
    args.check();
    let source = if let Some(path) = &args.bpf_file {
        let spec = read_spec(path, Some(sluice::Language::Bpf))?;
        Source::Bpf(spec.compile(&Program::builder(LinkType::EN10MB))?)
    } else if let Some(path) = &args.expr_file {
        if !args.expression.is_empty() {
            eprintln!(
                "sluice: warning: the expression on the command line is ignored: -F {path} gives it"
            );
        }
        // tcpdump ignores '#' comments in -F files.
        Source::File(read_spec(path, None)?, !args.no_resolve)
    } else {
        Source::Expression(args.expression.join(" "), !args.no_resolve)
    };
    let optimize = !args.no_optimize;
    let runner = match args.engine {
        Some(EngineArg::Interp) => Runner::Interp,
        Some(EngineArg::Native) => Runner::Native,
        // The eBPF engine runs beside the program (see `Ebpf`).
        Some(EngineArg::Ebpf) | None => Runner::host_default(),
    };
    let ebpf = matches!(args.engine, Some(EngineArg::Ebpf));

    if args.list_interfaces {
        return super::live::list_interfaces(args.json);
    }
    if args.live.interface.is_some() {
        return run_live(&args, &source, optimize, runner);
    }
    if args.dump > 0 && args.read.is_none() {
        let lt = match &args.linktype {
            Some(name) => LinkType::from_name(name)
                .ok_or_else(|| Fail(format!("unknown link type '{name}'")))?,
            None => LinkType::EN10MB,
        };
        let prog = source.program(lt, args.snaplen(), optimize, None)?;
        if ebpf {
            return print_out(&Ebpf::dump(&prog, args.dump)?);
        }
        return print_out(&dump(&prog, args.dump));
    }

    // Interrupted (SIGINT, SIGTERM, SIGHUP), the run stops reading and
    // keeps what it wrote, as tcpdump does.
    signals::install(false)?;
    let (mut reader, size) = open_capture_mapped(args.read.as_deref())?;
    let format = reader.format();
    let big_endian = super::big_endian(&format);
    let name = reader.name().to_string();
    let mut programs: HashMap<(u16, u32), Program> = HashMap::new();
    let snaplen_of = |snaplen: u32| {
        if snaplen == 0 {
            super::DEFAULT_SNAPLEN
        } else {
            snaplen
        }
    };
    if args.dump > 0 {
        let lt = reader
            .linktype()
            .ok_or_else(|| Fail(format!("{name}: no interface before the first packet")))?;
        let snaplen = match (args.snaplen, format) {
            (Some(_), _) => args.snaplen(),
            (None, CaptureFormat::Pcap { snaplen, .. }) => snaplen,
            _ => super::DEFAULT_SNAPLEN,
        };
        let prog = source.program(linktype_of(lt, &name)?, snaplen, optimize, Some(big_endian))?;
        if ebpf {
            return print_out(&Ebpf::dump(&prog, args.dump)?);
        }
        return print_out(&dump(&prog, args.dump));
    }
    // Compile for the link type the file declares (a pcap header, the
    // pcapng interfaces before the first packet) before any output is
    // opened: a typo leaves an existing output file as it was, and a file
    // without packets still refuses a bad expression, as tcpdump does.
    let compile = |programs: &mut HashMap<(u16, u32), Program>, lt: u16, snaplen: u32| {
        cached(programs, (lt, snaplen), || {
            source.program(
                linktype_of(lt, &name)?,
                snaplen_of(snaplen),
                optimize,
                Some(big_endian),
            )
        })
        .map(|_| ())
    };
    for info in reader.declared_interfaces() {
        compile(&mut programs, info.linktype, info.snaplen)?;
    }
    if let Some(p) = programs.values().next() {
        say_if_not_native(p, args.engine);
    }
    // With --engine ebpf, each program's eBPF twin, loaded in the kernel.
    let mut loaded: HashMap<(u16, u32), Ebpf> = HashMap::new();
    if ebpf {
        for (key, p) in &programs {
            loaded.insert(*key, Ebpf::load(p)?);
        }
    }
    let mut to = Accepted::new(&args);
    let open_writer = |to: &mut Accepted| -> Result<(), Fail> {
        if let (None, Some(path)) = (&to.writer, &args.write) {
            let format = out_format(&args, format);
            super::name_stale_temporaries(path);
            let mut w = Rotation::create(path, &format, &args.rotate.rule(), Placement::Replace)
                .map_err(out_fail)?
                .truncate_to(args.snaplen.map(|_| args.snaplen()));
            w.set_flush_each(args.unbuffered);
            to.writer = Some(w);
        }
        // Printed packets go to tcpdump in the input's own format.
        to.open_lines(&args, big_endian, Some(&name), &format)
    };
    if !programs.is_empty() {
        open_writer(&mut to)?;
    }

    let mut seen = 0u64;
    // Both the interface hook and the packet loop compile into it.
    let programs = std::cell::RefCell::new(programs);
    let status = for_each_packet_declaring(
        &mut reader,
        size,
        // Interfaces declared later, used by a packet or not.
        |info| compile(&mut programs.borrow_mut(), info.linktype, info.snaplen),
        |pkt| {
            let mut programs = programs.borrow_mut();
            let program = cached(&mut programs, (pkt.linktype, pkt.snaplen), || {
                let lt = linktype_of(pkt.linktype, &name)?;
                source.program(lt, snaplen_of(pkt.snaplen), optimize, Some(big_endian))
            })?;
            let verdict = if ebpf {
                let key = (pkt.linktype, pkt.snaplen);
                let prog = cached(&mut loaded, key, || Ebpf::load(program))?;
                prog.run(pkt.data, pkt.wirelen, seen + 1)? != 0
            } else {
                program.run_with(runner, pkt.data, pkt.wirelen) != 0
            };
            open_writer(&mut to)?;
            seen += 1;
            if args.verdicts {
                to.out.put(if verdict { "1\n" } else { "0\n" })?;
            }
            let go_on = !verdict || to.take(pkt)?;
            to.out.packet_done()?;
            Ok(go_on)
        },
    );
    // Whatever happened (the end, an interrupt, a bad record), keep
    // everything processed so far.
    if status.is_ok() {
        open_writer(&mut to)?;
    }
    // An output that got no packet still declares the input's interface.
    if let (Some(w), Some(info)) = (to.writer.as_mut(), reader.declared_interfaces().first()) {
        w.declare(*info).map_err(out_fail)?;
    }
    let (accepted, mut out, finished) = to.finish();
    let status = status.and(finished);
    // The count of what was read before any error, then the error, as
    // tcpdump prints them.
    if args.count {
        let count = if args.json {
            format!("{{\"packets\": {seen}, \"accepted\": {accepted}}}\n")
        } else {
            format!("{accepted}\n")
        };
        if let Err(e) = out.put(&count) {
            return status.and(Err(e));
        }
    }
    let flushed = out.flush();
    status.and(flushed)
}

/// How packets are printed, from the options: what tcpdump is given, and
/// sluice's own printer's options.
fn style<'a>(args: &'a FilterArgs, big_endian: bool, input: Option<&'a str>) -> Style<'a> {
    Style {
        numeric: args.numeric,
        quick: args.quick,
        unbuffered: args.unbuffered,
        nanos: args.precision() == Some(Precision::Nano),
        hex: args.hex,
        hex_ascii: args.hex_ascii,
        ascii: args.ascii,
        ts: args.ts_format,
        link: args.link_header,
        decode: &args.decode,
        input,
        own: Options {
            ts: args.ts_format,
            nanos: args.precision() == Some(Precision::Nano),
            link: args.link_header,
            dump: Dump::from_flags(args.hex, args.hex_ascii, args.ascii),
            big_endian,
            number: args.decode.number,
        },
    }
}

/// Where accepted packets go: the `-w` file(s), printed lines, the count
/// that `-c` stops at.
struct Accepted {
    writer: Option<Rotation>,
    lines: Option<Lines>,
    out: Stdout,
    accepted: u64,
    max: Option<u64>,
}

impl Accepted {
    /// No output file and no printer yet.
    fn new(args: &FilterArgs) -> Accepted {
        Accepted {
            writer: None,
            lines: None,
            out: Stdout::new(args.unbuffered || args.decode.line_buffered),
            accepted: 0,
            max: args.max,
        }
    }

    /// Start the printer when `args` print packets (tcpdump, or sluice's
    /// own), packets handed over in `format`.
    fn open_lines(
        &mut self,
        args: &FilterArgs,
        big_endian: bool,
        input: Option<&str>,
        format: &CaptureFormat,
    ) -> Result<(), Fail> {
        if self.lines.is_none() && args.prints_packets() {
            self.lines = Some(Lines::open(&style(args, big_endian, input), format)?);
        }
        Ok(())
    }

    /// Write, count and print an accepted packet; `false` when the run
    /// should stop (`-c` reached, or `-G` with `-W` made its last file).
    fn take(&mut self, pkt: &Packet<'_>) -> Result<bool, Fail> {
        if let Some(w) = self.writer.as_mut() {
            if !w.write(pkt).map_err(out_fail)? {
                if let Some(n) = w.limit_reached() {
                    eprintln!("sluice: maximum file limit reached: {n}");
                }
                return Ok(false);
            }
        }
        self.accepted += 1;
        if let Some(l) = self.lines.as_mut() {
            l.packet(pkt, &mut self.out)?;
        }
        Ok(self.max.map_or(true, |n| self.accepted < n))
    }

    /// Push buffered output to its file and to standard output.
    fn flush(&mut self) -> Result<(), Fail> {
        if let Some(w) = self.writer.as_mut() {
            w.flush().map_err(out_fail)?;
        }
        if let Some(l) = self.lines.as_mut() {
            l.flush()?;
        }
        self.out.flush()
    }

    /// Close the output file and the printer: the count, standard output,
    /// and how closing went.
    fn finish(self) -> (u64, Stdout, Result<(), Fail>) {
        let finished = self.writer.map_or(Ok(()), |w| w.finish().map_err(out_fail));
        let printed = self.lines.map_or(Ok(()), Lines::finish);
        (self.accepted, self.out, finished.and(printed))
    }
}

/// `sluice filter -i`: the filter compiled for the interface's link type,
/// run in the kernel where it can be and on every packet in user space.
fn run_live(
    args: &FilterArgs,
    source: &Source,
    optimize: bool,
    runner: Runner,
) -> Result<(), Fail> {
    let snaplen = args.snaplen();
    let mut live = Live::open(&args.live, snaplen)?;
    if args.compat.list_link_types {
        return print_out(&super::compat::link_types(live.name(), &live.banner()));
    }
    let lt = linktype_of(live.linktype(), live.name())?;
    let big_endian = cfg!(target_endian = "big");
    let program = source.program(lt, snaplen, optimize, None)?;
    say_if_not_native(&program, args.engine);
    if args.dump > 0 {
        return print_out(&dump(&program, args.dump));
    }
    // With --engine ebpf the kernel's pre-filter is the filter's eBPF
    // program (held until the run ends; the sockets hold it too), on
    // Ethernet and raw IP links; user space judges every packet again.
    let ebpf = matches!(args.engine, Some(EngineArg::Ebpf));
    let _ebpf = match ebpf {
        true => {
            let k = Ebpf::socket_filter(&program, live.linktype(), live.name())?;
            if let Some(fd) = k.ebpf_fd() {
                live.prefilter_ebpf(fd, k.len())?;
            }
            Some(k)
        }
        false => {
            live.prefilter(Some(program.bpf()))?;
            None
        }
    };
    // With --xdp, the filter also runs before the kernel's stack (the
    // link is held until the run ends; the kernel detaches it then).
    let xdp = match args.xdp {
        true => Some(std::sync::Arc::new(Ebpf::xdp(
            &program,
            live.linktype(),
            live.name(),
        )?)),
        false => None,
    };
    let nanos = args.precision() == Some(Precision::Nano);
    let format = CaptureFormat::Pcap {
        nanos,
        big_endian,
        linktype: live.linktype(),
        snaplen,
        fcs_len: None,
    };
    // Compiled, the interface open: only now is an output file opened.
    let mut to = Accepted::new(args);
    if let Some(path) = &args.write {
        let mut w = Rotation::create(path, &format, &args.rotate.rule(), Placement::InPlace)
            .map_err(out_fail)?;
        w.set_flush_each(args.unbuffered);
        to.writer = Some(w);
    }
    to.open_lines(args, big_endian, None, &format)?;
    eprintln!("sluice: {}", live.banner());
    // With -F, SIGHUP reads the file again and swaps the filter in.
    if let Some(path) = args.expr_file.clone() {
        let resolve = !args.no_resolve;
        let (linktype, name) = (live.linktype(), live.name().to_string());
        let xdp = xdp.clone();
        live.on_sighup(Box::new(move || {
            let spec = read_spec(&path, None)?;
            let p = Source::File(spec, resolve)
                .program(lt, snaplen, optimize, None)
                .map_err(|e| Fail(format!("{path}: {}", e.0)))?;
            // The new filter's own eBPF program with --engine ebpf (a
            // verifier's refusal keeps the filter in force).
            let kernel = match ebpf {
                true => KernelProgram::Ebpf(Ebpf::socket_filter(&p, linktype, &name)?),
                false => KernelProgram::Classic(p.bpf().to_vec()),
            };
            // Last, once nothing else can fail: the XDP program swapped.
            if let Some(link) = &xdp {
                Ebpf::replace_xdp(link, &p)?;
            }
            Ok((classifier(std::sync::Arc::new(p), runner), kernel))
        }));
    }
    let make = classifier(std::sync::Arc::new(program), runner);
    let with_bytes = to.writer.is_some() || to.lines.is_some();
    // A terminal sees each packet as it comes (tcpdump's lines are
    // line-buffered there); -v with -w and nothing printed counts the
    // packets written once a second, as tcpdump does.
    let eager = std::io::stdout().is_terminal();
    let got = args.decode.verbose > 0 && args.write.is_some() && to.lines.is_none();
    let mut last_got = std::time::Instant::now();
    let (report, status) = live.run(with_bytes, &*make, |event| {
        let go_on = match event {
            Event::Flush => {
                to.flush()?;
                true
            }
            Event::Packet(pkt, _) => {
                let go_on = to.take(pkt)?;
                to.out.packet_done()?;
                if eager {
                    if let Some(l) = to.lines.as_mut() {
                        l.flush()?;
                    }
                }
                go_on
            }
            _ => true,
        };
        if got && last_got.elapsed() >= std::time::Duration::from_secs(1) {
            last_got = std::time::Instant::now();
            eprint!("Got {}\r", to.accepted);
        }
        Ok(go_on)
    });
    // Whatever happened, keep everything captured so far.
    let (accepted, mut out, finished) = to.finish();
    let flushed = out.flush();
    eprint!("{}", report.text(args.json));
    status.and(finished).and(flushed)?;
    if args.count {
        print_out(&match args.json {
            true => format!(
                "{{\"packets\": {}, \"accepted\": {accepted}}}\n",
                report.seen
            ),
            false => format!("{accepted}\n"),
        })?;
    }
    Ok(())
}

/// `--engine ebpf`: a program's intermediate form as eBPF, loaded in the
/// kernel and run there on each packet (`BPF_PROG_TEST_RUN`).
struct Ebpf(sluice::ebpf::Loaded);

/// A loaded eBPF socket filter, held by a live capture's pre-filter.
struct SocketProgram(sluice::ebpf::Loaded);

impl std::os::fd::AsFd for SocketProgram {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(self.0.fd())
    }
}

impl Ebpf {
    /// `p`'s intermediate form, which eBPF is made from; the error names
    /// the option (`what`) that asked for it.
    fn ir<'p>(p: &'p Program, what: &str) -> Result<&'p sluice::ir::Filter, Fail> {
        p.ir().ok_or_else(|| {
            Fail(format!(
                "{what}: this BPF program has no intermediate form to compile to eBPF"
            ))
        })
    }

    /// The eBPF program for `p`'s intermediate form.
    fn lower(p: &Program) -> Result<Vec<sluice::ebpf::Insn>, Fail> {
        let ir = Ebpf::ir(p, "--engine ebpf")?;
        sluice::ebpf::lower(ir, sluice::ebpf::Mode::TestRun)
            .map_err(|e| Fail(format!("--engine ebpf: {e}")))
    }

    /// `p` as the eBPF socket filter of a live capture of link type
    /// `linktype` on `iface`, loaded (Ethernet, raw IP and cooked links,
    /// as on the `any` device; on others the kernel's view of a frame is
    /// not the capture's).
    fn socket_filter(p: &Program, linktype: u16, iface: &str) -> Result<KernelFilter, Fail> {
        if ![1, 12, 101, 113, 276].contains(&linktype) {
            return Err(Fail(format!(
                "--engine ebpf: {iface}: live capture runs eBPF on Ethernet, raw IP and cooked (any) links only"
            )));
        }
        let ir = Ebpf::ir(p, "--engine ebpf")?;
        let loaded =
            sluice::ebpf::Loaded::compile_for_link(ir, sluice::ebpf::Mode::Socket, linktype)
                .map_err(|e| Fail(format!("--engine ebpf: {e}")))?;
        let insns = loaded.len();
        Ok(KernelFilter::ebpf(
            std::sync::Arc::new(SocketProgram(loaded)),
            insns,
        ))
    }

    /// `p` as an XDP program attached to `iface` (an Ethernet interface,
    /// not `any`), said on standard error: frames it rejects are dropped
    /// before the kernel's stack.
    fn xdp(p: &Program, linktype: u16, iface: &str) -> Result<sluice::ebpf::XdpLink, Fail> {
        if linktype != 1 || iface == "any" {
            return Err(Fail(format!(
                "--xdp: {iface}: XDP runs on one Ethernet interface (not 'any', not other links)"
            )));
        }
        let prog = Ebpf::xdp_program(p)?;
        let link =
            sluice::ebpf::XdpLink::attach(&prog, iface).map_err(|e| Fail(format!("--xdp: {e}")))?;
        let mode = if link.native() { "native" } else { "generic" };
        eprintln!(
            "sluice: XDP pre-filter on {iface} ({mode}, {} instructions): frames the filter rejects are dropped before the kernel's stack",
            prog.len()
        );
        Ok(link)
    }

    /// `p` as a loaded XDP program.
    fn xdp_program(p: &Program) -> Result<sluice::ebpf::Loaded, Fail> {
        let ir = Ebpf::ir(p, "--xdp")?;
        sluice::ebpf::Loaded::compile(ir, sluice::ebpf::Mode::Xdp)
            .map_err(|e| Fail(format!("--xdp: {e}")))
    }

    /// Put `p`'s XDP program in place of the one `link` holds.
    fn replace_xdp(link: &sluice::ebpf::XdpLink, p: &Program) -> Result<(), Fail> {
        let prog = Ebpf::xdp_program(p)?;
        link.replace(&prog).map_err(|e| Fail(format!("--xdp: {e}")))
    }

    /// Load `p`'s eBPF program: the kernel's refusal, with the verifier's
    /// log, is the error.
    fn load(p: &Program) -> Result<Ebpf, Fail> {
        let insns = Ebpf::lower(p)?;
        sluice::ebpf::Loaded::load(&insns, sluice::ebpf::Mode::TestRun)
            .map(Ebpf)
            .map_err(|e| Fail(format!("--engine ebpf: {e}")))
    }

    /// The filter's result on packet number `n` (counted from 1).
    fn run(&self, data: &[u8], wirelen: u32, n: u64) -> Result<u32, Fail> {
        self.0
            .run(data, wirelen)
            .map_err(|e| Fail(format!("--engine ebpf: packet {n}: {e}")))
    }

    /// `-d`: the program as `bpftool prog dump xlated` lists it; `-dd`:
    /// as a C array of `struct bpf_insn`; `-ddd`: one encoded instruction
    /// a line, in decimal.
    fn dump(p: &Program, level: u8) -> Result<String, Fail> {
        let insns = Ebpf::lower(p)?;
        Ok(match level {
            1 => sluice::ebpf::dump(&insns),
            2 => insns
                .iter()
                .map(|i| {
                    format!(
                        "{{ {:#04x}, {}, {}, {}, {:#010x} }},\n",
                        i.code, i.dst, i.src, i.off, i.imm as u32
                    )
                })
                .collect(),
            _ => {
                let mut s = format!("{}\n", insns.len());
                for i in &insns {
                    s += &format!("{}\n", i.encode());
                }
                s
            }
        })
    }
}

/// With `--engine native` asked for, say on standard error why a program
/// runs in the BPF interpreter instead, if it does.
fn say_if_not_native(p: &Program, engine: Option<EngineArg>) {
    if matches!(engine, Some(EngineArg::Native)) {
        if let Err(why) = p.native_or_why() {
            eprintln!("sluice: --engine native: the BPF interpreter runs this filter: {why}");
        }
    }
}

/// Each worker's classifier for one program: filter id 0 when it accepts.
fn classifier(program: std::sync::Arc<Program>, runner: Runner) -> Make {
    std::sync::Arc::new(move || -> Classify {
        let p = program.clone();
        Box::new(move |data: &[u8], wirelen: u32, ids: &mut Vec<u32>| {
            if p.run_with(runner, data, wirelen) != 0 {
                ids.push(0);
            }
        })
    })
}

/// A `-F` or `--bpf-file` file, read with a bound.
fn read_spec(path: &str, language: Option<sluice::Language>) -> Result<sluice::Spec, Fail> {
    sluice::Spec::read(path.as_ref(), language).map_err(|e| match e {
        sluice::Error::File { source, .. } => {
            Fail(format!("cannot open {path}: {}", super::io_msg(&source)))
        }
        e => Fail(e.to_string()),
    })
}

fn dump(p: &Program, level: u8) -> String {
    match level {
        1 => sluice::bpf::disasm_d(p.bpf()),
        2 => sluice::bpf::disasm_dd(p.bpf()),
        _ => sluice::bpf::disasm_ddd(p.bpf()),
    }
}
