//! The `sluice` command.
//!
//! `sluice filter` reads a capture, runs a filter on every packet, and
//! writes, counts or prints what it accepts, with tcpdump's habits: `-r`,
//! `-w`, `-d`/`-dd`/`-ddd`, `-y`, `-F`, `-O`. `sluice split` runs many
//! named filters over a capture in one pass with one merged classifier.
//! Exit status: 0 on success, 1 on a bad expression or file, 2 on bad usage.

#![forbid(unsafe_code)]

mod cli;

use clap::{CommandFactory, Parser, Subcommand};
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
    Filter(Box<cli::filter::FilterArgs>),
    /// Split a capture by many named filters in one pass (one merged classifier).
    Split(cli::split::SplitArgs),
    /// Run FFPF flows (`(file,in.pcap) -> (sampler,2,4) -> (BPF,"tcp") -> (packetcount,,8)`) and report what each produced.
    Flow(cli::flow::FlowArgs),
    /// Share live capture with many client processes (one capture, one merged classifier, shared-memory buffers, a policy).
    Daemon(cli::daemon::DaemonArgs),
    /// List the interfaces `-i` can capture on (tcpdump's -D).
    #[command(name = "list-interfaces")]
    ListInterfaces {
        /// One JSON array of objects.
        #[arg(long)]
        json: bool,
    },
    /// Send a capture's frames out of an interface (tcpreplay's core).
    Replay(cli::replay::ReplayArgs),
    /// Run a program on sluice's libpcap (`sluice exec -- tcpdump -r x.pcap tcp`).
    Exec(cli::exec::ExecArgs),
    /// Time each engine on a capture held in memory, next to libpcap.
    Bench(cli::bench::BenchArgs),
    /// Print a shell completion script: `sluice completions bash > /etc/bash_completion.d/sluice`.
    Completions {
        /// The shell (bash, zsh, fish, elvish, powershell).
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print a manual page (roff): `sluice man | man -l -`, `sluice man filter`.
    Man {
        /// A subcommand's page instead of the command's.
        #[arg(value_name = "SUBCOMMAND")]
        page: Option<String>,
    },
}

/// A completion script for `shell`, from the same definitions as the parser.
fn completions(shell: clap_complete::Shell) -> Result<(), cli::Fail> {
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "sluice", &mut out);
    cli::print_out(&String::from_utf8_lossy(&out))
}

/// The manual page of the command or of one subcommand.
fn man(page: Option<&str>) -> Result<(), cli::Fail> {
    let mut cmd = Cli::command();
    cmd.build();
    let cmd = match page {
        None => cmd,
        Some(name) => {
            let sub = cmd
                .find_subcommand(name)
                .ok_or_else(|| cli::Fail(format!("no subcommand '{name}'")))?
                .clone();
            let full = format!("sluice-{name}");
            sub.name(full.clone()).bin_name(full)
        }
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    cli::print_out(&String::from_utf8_lossy(&out))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Filter(args) => cli::filter::run(*args),
        Cmd::Split(args) => cli::split::run(args),
        Cmd::Flow(args) => cli::flow::run(args),
        Cmd::Daemon(args) => cli::daemon::run(args),
        Cmd::Bench(args) => cli::bench::run(args),
        Cmd::ListInterfaces { json } => cli::live::list_interfaces(json),
        Cmd::Replay(args) => cli::replay::run(args),
        Cmd::Exec(args) => cli::exec::run(args),
        Cmd::Completions { shell } => completions(shell),
        Cmd::Man { page } => man(page.as_deref()),
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
