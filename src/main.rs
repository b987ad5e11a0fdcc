//! The `sluice` command.
//!
//! `sluice filter` reads a capture, runs a filter on every packet, and
//! writes, counts or prints what it accepts, with tcpdump's habits: `-r`,
//! `-w`, `-d`/`-dd`/`-ddd`, `-y`, `-F`, `-O`. `sluice split` runs many
//! named filters over a capture in one pass with one merged classifier.
//! Exit status: 0 on success, 1 on a bad expression or file, 2 on bad usage.

#![forbid(unsafe_code)]

mod cli;

use clap::{Parser, Subcommand};
use std::io::Write;
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
    Filter(cli::filter::FilterArgs),
    /// Split a capture by many named filters in one pass (one merged classifier).
    Split(cli::split::SplitArgs),
    /// Run FFPF flows (`(file,in.pcap) -> (sampler,2,4) -> (BPF,"tcp") -> (packetcount,,8)`) and report what each produced.
    Flow(cli::flow::FlowArgs),
    /// Time each engine on a capture held in memory, next to libpcap.
    Bench(cli::bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Filter(args) => cli::filter::run(args),
        Cmd::Split(args) => cli::split::run(args),
        Cmd::Flow(args) => cli::flow::run(args),
        Cmd::Bench(args) => cli::bench::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // A reader that went away (`| head -1`) ends the run quietly.
        Err(_) if cli::stdout_closed() => ExitCode::SUCCESS,
        Err(cli::Fail(msg)) => {
            let _ = std::io::stdout().flush();
            let _ = writeln!(std::io::stderr(), "sluice: {msg}");
            ExitCode::from(1)
        }
    }
}
