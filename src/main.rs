//! The `sluice` command.
//!
//! `sluice filter` reads a capture, runs a filter on every packet, and
//! writes, counts or prints what it accepts, with tcpdump's habits: `-r`,
//! `-w`, `-d`/`-dd`/`-ddd`, `-y`, `-F`, `-O`, and exit status 0 on success,
//! 1 on a bad expression or file, 2 on bad usage.

use clap::{ArgAction, Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use sluice::capture::{CaptureError, CaptureReader, CaptureWriter, Packet};
use sluice::{LinkType, Program};
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// Compiling large expressions allocates many small nodes; mimalloc does that
/// about twice as fast as the system allocator here (see README).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "sluice",
    version,
    about = "Packet filters with libpcap's exact meaning"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Filter a capture file with a pcap expression or a BPF program.
    Filter(FilterArgs),
}

#[derive(clap::Args)]
struct FilterArgs {
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
    /// Print --count results as JSON.
    #[arg(long)]
    json: bool,
    /// The filter expression (the words are joined with spaces, as tcpdump does).
    #[arg(trailing_var_arg = true)]
    expression: Vec<String>,
}

/// A failure that ends the run with status 1.
struct Fail(String);

impl<E: std::fmt::Display> From<E> for Fail {
    fn from(e: E) -> Fail {
        Fail(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Filter(args) => filter(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(msg)) => {
            let _ = std::io::stdout().flush();
            eprintln!("sluice: {msg}");
            ExitCode::from(1)
        }
    }
}

/// Where the filter comes from.
enum Source {
    Expression(String),
    Bpf(Program),
}

impl Source {
    fn program(&self, lt: LinkType, snaplen: u32, optimize: bool) -> Result<Program, Fail> {
        match self {
            Source::Bpf(p) => Ok(p.clone()),
            Source::Expression(e) => Program::from_expression(e, lt, snaplen, optimize)
                .map_err(|err| Fail(format!("{err} (in '{e}')"))),
        }
    }
}

fn read_text(path: &str) -> Result<String, Fail> {
    std::fs::read_to_string(path).map_err(|e| Fail(format!("{path}: {e}")))
}

fn linktype_of(n: u16, file: &str) -> Result<LinkType, Fail> {
    LinkType::from_number(n as u32)
        .ok_or_else(|| Fail(format!("{file}: link type {n} is not supported yet")))
}

fn filter(args: FilterArgs) -> Result<(), Fail> {
    let source = if let Some(path) = &args.bpf_file {
        Source::Bpf(Program::from_bpf_text(&read_text(path)?)?)
    } else if let Some(path) = &args.expr_file {
        // tcpdump ignores '#' comments in -F files.
        let text: Vec<String> = read_text(path)?
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").to_string())
            .collect();
        Source::Expression(text.join(" ").trim().to_string())
    } else {
        Source::Expression(args.expression.join(" "))
    };
    let optimize = !args.no_optimize;

    if args.dump > 0 && args.read.is_none() {
        let lt = match &args.linktype {
            Some(name) => LinkType::from_name(name)
                .ok_or_else(|| Fail(format!("unknown link type '{name}'")))?,
            None => LinkType::EN10MB,
        };
        let prog = source.program(lt, args.snaplen, optimize)?;
        return print_out(&dump(&prog, args.dump));
    }

    let path = args.read.clone().unwrap_or_else(|| "-".to_string());
    let mut reader = CaptureReader::open(&path)?;
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
        let prog = source.program(linktype_of(lt, &name)?, snaplen, optimize)?;
        return print_out(&dump(&prog, args.dump));
    }

    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let bar = (std::io::stderr().is_terminal() && size > (64 << 20)).then(|| {
        let b = ProgressBar::new(size);
        b.set_style(
            ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });

    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let (mut seen, mut accepted) = (0u64, 0u64);
    let status: Result<(), Fail> = loop {
        let pkt: Packet<'_> = match reader.next_packet() {
            Ok(Some(p)) => p,
            Ok(None) => break Ok(()),
            Err(e) => break Err(capture_fail(e)),
        };
        let key = (pkt.linktype, pkt.snaplen);
        let program = match programs.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let lt = match linktype_of(pkt.linktype, &name) {
                    Ok(lt) => lt,
                    Err(e) => break Err(e),
                };
                let snaplen = if pkt.snaplen == 0 {
                    262144
                } else {
                    pkt.snaplen
                };
                match source.program(lt, snaplen, optimize) {
                    Ok(p) => v.insert(p),
                    Err(e) => break Err(e),
                }
            }
        };
        let verdict = program.run(pkt.data, pkt.wirelen) != 0;
        seen += 1;
        if args.verdicts {
            let _ = writeln!(out, "{}", verdict as u8);
        }
        if verdict {
            accepted += 1;
            if let Some(w) = writer.as_mut() {
                if let Err(e) = w.write_packet(&pkt) {
                    break Err(e.into());
                }
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
        if let Some(b) = &bar {
            if seen % 4096 == 0 {
                b.set_position(reader.offset());
            }
        }
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
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

/// Print to standard output; a reader that went away (`| head`) is not an error.
fn print_out(text: &str) -> Result<(), Fail> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

fn capture_fail(e: CaptureError) -> Fail {
    Fail(e.to_string())
}

fn dump(p: &Program, level: u8) -> String {
    match level {
        1 => sluice::bpf::disasm_d(p.bpf()),
        2 => sluice::bpf::disasm_dd(p.bpf()),
        _ => sluice::bpf::disasm_ddd(p.bpf()),
    }
}
