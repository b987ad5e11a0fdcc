//! `sluice filter`: one filter over a capture.

use super::{cached, for_each_packet, linktype_of, open_capture, print_out, read_text, Fail};
use clap::ArgAction;
use sluice::capture::CaptureWriter;
use sluice::{LinkType, Program, Runner};
use std::collections::HashMap;
use std::io::Write;

/// The arguments of `sluice filter`.
#[derive(clap::Args)]
pub struct FilterArgs {
    /// Capture file to read (pcap or pcapng; `-` for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    read: Option<String>,
    /// Write accepted packets to this file, in the input's format (`-` for standard output).
    #[arg(short = 'w', value_name = "OUT")]
    write: Option<String>,
    /// Print the number of accepted packets.
    #[arg(long)]
    count: bool,
    /// Print one line per input packet: 1 if accepted, 0 if not.
    #[arg(long)]
    verdicts: bool,
    /// Print the compiled program (-d: readable, -dd: C array, -ddd: decimal) and exit.
    #[arg(short = 'd', action = ArgAction::Count)]
    dump: u8,
    /// Link type to compile for when no capture is read (e.g. EN10MB, RAW, LINUX_SLL).
    #[arg(short = 'y', value_name = "LINKTYPE")]
    linktype: Option<String>,
    /// Read the expression from this file.
    #[arg(short = 'F', value_name = "EXPRFILE")]
    expr_file: Option<String>,
    /// Load a classic BPF program (tcpdump -d, -dd or -ddd output) instead of an expression.
    #[arg(long = "bpf-file", value_name = "PROG")]
    bpf_file: Option<String>,
    /// Do not optimise the compiled program (tcpdump's -O).
    #[arg(short = 'O')]
    no_optimize: bool,
    /// Snapshot length the compiled filter returns on accept when there is no capture.
    #[arg(short = 's', value_name = "SNAPLEN", default_value_t = 262144)]
    snaplen: u32,
    /// Engine: native code (the default on x86-64 and AArch64; the
    /// interpreter runs any filter it cannot compile) or the BPF interpreter.
    #[arg(long, value_enum)]
    engine: Option<EngineArg>,
    /// Print --count results as JSON.
    #[arg(long)]
    json: bool,
    /// The filter expression (the words are joined with spaces, as tcpdump does).
    #[arg(trailing_var_arg = true)]
    expression: Vec<String>,
}

/// `--engine`.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum EngineArg {
    /// The classic BPF interpreter.
    Interp,
    /// Machine code (falls back to the interpreter where it cannot be built).
    Native,
}

/// Where the filter comes from.
enum Source {
    Expression(String),
    Bpf(Program),
}

impl Source {
    fn program(
        &self,
        lt: LinkType,
        snaplen: u32,
        optimize: bool,
        big_endian: bool,
    ) -> Result<Program, Fail> {
        match self {
            Source::Bpf(p) => Ok(p.clone()),
            // Any language, named by its prefix (pcap by default).
            Source::Expression(e) => Program::builder(lt)
                .snaplen(snaplen)
                .optimize(optimize)
                .capture_big_endian(big_endian)
                .build(e)
                .map_err(|err| Fail(format!("{err} (in '{e}')"))),
        }
    }
}

/// Run `sluice filter`.
pub fn run(args: FilterArgs) -> Result<(), Fail> {
    let source = if let Some(path) = &args.bpf_file {
        Source::Bpf(Program::from_bpf_text(&read_text(path)?)?)
    } else if let Some(path) = &args.expr_file {
        // tcpdump ignores '#' comments in -F files.
        Source::Expression(expression_file(&read_text(path)?))
    } else {
        Source::Expression(args.expression.join(" "))
    };
    let optimize = !args.no_optimize;
    let runner = match args.engine {
        Some(EngineArg::Interp) => Runner::Interp,
        Some(EngineArg::Native) => Runner::Native,
        None => Runner::host_default(),
    };

    if args.dump > 0 && args.read.is_none() {
        let lt = match &args.linktype {
            Some(name) => LinkType::from_name(name)
                .ok_or_else(|| Fail(format!("unknown link type '{name}'")))?,
            None => LinkType::EN10MB,
        };
        let prog = source.program(lt, args.snaplen, optimize, cfg!(target_endian = "big"))?;
        return print_out(&dump(&prog, args.dump));
    }

    let (mut reader, size) = open_capture(args.read.as_deref())?;
    let big_endian = super::big_endian(&reader.format());
    let name = reader.name().to_string();
    let mut programs: HashMap<(u16, u32), Program> = HashMap::new();
    let mut writer = match &args.write {
        Some(out) => Some(CaptureWriter::create(out, &reader.format())?),
        None => None,
    };
    if args.dump > 0 {
        let lt = reader
            .linktype()
            .ok_or_else(|| Fail(format!("{name}: no interface before the first packet")))?;
        let snaplen = match reader.format() {
            sluice::capture::CaptureFormat::Pcap { snaplen, .. } => snaplen,
            _ => args.snaplen,
        };
        let prog = source.program(linktype_of(lt, &name)?, snaplen, optimize, big_endian)?;
        return print_out(&dump(&prog, args.dump));
    }

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (mut seen, mut accepted) = (0u64, 0u64);
    let status = for_each_packet(&mut reader, size, |pkt| {
        let program = cached(&mut programs, (pkt.linktype, pkt.snaplen), || {
            let lt = linktype_of(pkt.linktype, &name)?;
            let snaplen = if pkt.snaplen == 0 {
                super::DEFAULT_SNAPLEN
            } else {
                pkt.snaplen
            };
            source.program(lt, snaplen, optimize, big_endian)
        })?;
        let verdict = program.run_with(runner, pkt.data, pkt.wirelen) != 0;
        seen += 1;
        if args.verdicts {
            let _ = writeln!(out, "{}", verdict as u8);
        }
        if verdict {
            accepted += 1;
            if let Some(w) = writer.as_mut() {
                w.write_packet(pkt)?;
            } else if !args.count && !args.verdicts {
                let _ = writeln!(
                    out,
                    "{}.{:06} {}, length {}",
                    pkt.ts_sec,
                    pkt.ts_nsec / 1000,
                    sluice::summary::summarize(pkt.linktype, pkt.data),
                    pkt.wirelen
                );
            }
        }
        Ok(())
    });
    // Whatever happened, keep everything processed so far.
    if let Some(w) = writer {
        w.finish()?;
    }
    if args.count {
        if args.json {
            let _ = writeln!(out, "{{\"packets\": {seen}, \"accepted\": {accepted}}}");
        } else {
            let _ = writeln!(out, "{accepted}");
        }
    }
    out.flush()?;
    status
}

/// The expression of a `-F` file: its lines without `#` comments, joined;
/// a file that starts with another language's prefix (`cspf:`...) is
/// taken whole, line breaks and all.
pub fn expression_file(text: &str) -> String {
    if sluice::Language::split(text).0 != sluice::Language::Pcap {
        return text.to_string();
    }
    let lines: Vec<&str> = text.lines().map(super::strip_comment).collect();
    lines.join(" ").trim().to_string()
}

fn dump(p: &Program, level: u8) -> String {
    match level {
        1 => sluice::bpf::disasm_d(p.bpf()),
        2 => sluice::bpf::disasm_dd(p.bpf()),
        _ => sluice::bpf::disasm_ddd(p.bpf()),
    }
}
