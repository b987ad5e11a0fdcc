//! Capturing from a live interface for `filter -i` and `split -i`: the
//! options tcpdump users know, turned into a [`Session`] of the runtime,
//! with the command's signals as its controls and tcpdump's messages for
//! what the session reports.
//!
//! The rule: the capture itself (rings, workers, merge, filter swap,
//! counts) is the runtime's; this module only reads options, answers
//! signals and prints.

use super::{signals, Fail};
use sluice::live::session::{
    counts_line, Controls, Event, KernelProgram, Make, Prefilter, Report, Session, SessionConfig,
};
use sluice::live::{Config, Direction, LiveError};
use std::time::{Duration, Instant};

/// The options of a live capture.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LiveArgs {
    /// Capture live from this interface (`any`: every interface, Linux
    /// cooked v2 frames) instead of reading a file.
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        conflicts_with = "read"
    )]
    pub interface: Option<String>,
    /// With -i: the size of each ring (one per worker) in KiB [default: 65536].
    #[arg(
        short = 'B',
        long = "buffer-size",
        value_name = "KiB",
        requires = "interface"
    )]
    pub buffer: Option<usize>,
    /// With -i: leave the interface out of promiscuous mode.
    #[arg(short = 'p', long = "no-promiscuous-mode", requires = "interface")]
    pub no_promiscuous: bool,
    /// With -i: capture packets received (in), sent (out) or both (inout).
    #[arg(short = 'Q', long = "direction", value_enum, requires = "interface")]
    pub direction: Option<DirectionArg>,
    /// With -i: hand packets over as they arrive, not in blocks.
    #[arg(long = "immediate-mode", alias = "immediate", requires = "interface")]
    pub immediate: bool,
    /// With -i: capture threads, one ring each, joined in a fanout group
    /// that keeps both directions of a flow on one thread [default: the
    /// number of cores].
    #[arg(long, value_name = "N", requires = "interface")]
    pub workers: Option<usize>,
    /// With -i: stop after this many seconds.
    #[arg(long, value_name = "SECS", requires = "interface", value_parser = super::seconds)]
    pub duration: Option<Duration>,
    /// With -i: bytes of each ring block, in KiB [default: 1024].
    #[arg(long = "block-size", value_name = "KiB", requires = "interface")]
    pub block_kib: Option<usize>,
    /// With -i: the longest a ring block waits before it is handed over,
    /// in milliseconds [default: 100].
    #[arg(long = "block-timeout", value_name = "MS", requires = "interface")]
    pub block_timeout_ms: Option<u64>,
    /// With -i: no kernel pre-filter (every packet is copied to the ring
    /// and filtered in user space only).
    #[arg(long = "no-kernel-filter", requires = "interface")]
    pub no_kernel_filter: bool,
}

/// `-Q`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DirectionArg {
    /// Received packets.
    In,
    /// Sent packets.
    Out,
    /// Both.
    Inout,
}

/// A live failure as the command reports it.
fn fail(e: LiveError) -> Fail {
    Fail(e.to_string())
}

/// What SIGHUP runs: a new filter (its classifiers, and the kernel
/// pre-filter's program), or why there is none.
pub type Reload = Box<dyn Fn() -> Result<(Make, KernelProgram), Fail> + Send>;

/// Open rings on an interface, ready to run.
pub struct Live {
    session: Session,
    duration: Option<Duration>,
    reloads: bool,
    /// The kernel pre-filter is eBPF (and a reload's is too).
    ebpf: bool,
}

impl Live {
    /// Open the rings `args` asks for, `snaplen` bytes of each packet.
    pub fn open(args: &LiveArgs, snaplen: u32) -> Result<Live, Fail> {
        let name = args.interface.as_deref().unwrap_or("any");
        let mut config = Config::new(name);
        config.snaplen = snaplen;
        config.promiscuous = !args.no_promiscuous;
        config.direction = match args.direction {
            None | Some(DirectionArg::Inout) => Direction::InOut,
            Some(DirectionArg::In) => Direction::In,
            Some(DirectionArg::Out) => Direction::Out,
        };
        config.immediate = args.immediate;
        if let Some(kib) = args.block_kib {
            config.block_size = kib.saturating_mul(1024);
        }
        if let Some(ms) = args.block_timeout_ms {
            config.block_timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(kib) = args.buffer {
            config.buffer_kib(kib);
        }
        let session = Session::open(&SessionConfig {
            capture: config,
            workers: args.workers.unwrap_or_else(sluice::live::cores),
            kernel_filter: !args.no_kernel_filter,
            ..SessionConfig::new(name)
        })
        .map_err(fail)?;
        Ok(Live {
            session,
            duration: args.duration,
            reloads: false,
            ebpf: false,
        })
    }

    /// The link type of the captured frames.
    pub fn linktype(&self) -> u16 {
        self.session.linktype()
    }

    /// The interface's name.
    pub fn name(&self) -> &str {
        self.session.name()
    }

    /// Attach a kernel pre-filter built from `program` to every ring,
    /// unless `--no-kernel-filter`. Returns whether the kernel runs it.
    pub fn prefilter(&mut self, program: Option<&[sluice::bpf::Insn]>) -> Result<bool, Fail> {
        let got = self.session.prefilter(program).map_err(fail)?;
        if std::env::var_os("SLUICE_DEBUG").is_some() {
            eprintln!(
                "sluice: kernel pre-filter: {}",
                match got {
                    Prefilter::Installed(n) => format!("{n} instructions"),
                    Prefilter::Refused => "refused by the kernel".into(),
                    Prefilter::None => "none".into(),
                }
            );
        }
        Ok(matches!(got, Prefilter::Installed(_)))
    }

    /// Attach a loaded eBPF socket filter of `insns` instructions to every
    /// ring, unless `--no-kernel-filter`. Returns whether the kernel runs it.
    pub fn prefilter_ebpf(
        &mut self,
        prog: std::os::fd::BorrowedFd<'_>,
        insns: usize,
    ) -> Result<bool, Fail> {
        let got = self.session.prefilter_ebpf(prog).map_err(fail)?;
        self.ebpf = got;
        if std::env::var_os("SLUICE_DEBUG").is_some() {
            match got {
                true => eprintln!("sluice: kernel pre-filter: eBPF, {insns} instructions"),
                false => eprintln!("sluice: kernel pre-filter: none"),
            }
        }
        Ok(got)
    }

    /// On SIGHUP, put the filter `reload` gives in place of the one in
    /// force (see [`Session::on_reload`]); a reload that fails keeps the
    /// filter in force and says why.
    pub fn on_sighup(&mut self, reload: Reload) {
        self.reloads = true;
        self.session
            .on_reload(Box::new(move || reload().map_err(|Fail(e)| e)));
    }

    /// The line tcpdump prints when it starts listening.
    pub fn banner(&self) -> String {
        let lt = self.linktype();
        let name = sluice::LinkType::from_number(u32::from(lt)).map_or("?", |l| l.name());
        // libpcap's descriptions of the link types a live capture gets.
        let what = match lt {
            1 => "Ethernet",
            6 => "Token ring",
            10 => "FDDI",
            101 => "Raw IP",
            104 => "Cisco HDLC",
            105 => "802.11",
            107 => "Frame Relay",
            113 => "Linux cooked v1",
            119 => "802.11 plus Prism header",
            127 => "802.11 plus radiotap header",
            276 => "Linux cooked v2",
            _ => name,
        };
        format!(
            "listening on {}, link-type {name} ({what}), snapshot length {} bytes",
            self.name(),
            self.session.snaplen()
        )
    }

    /// Capture until SIGINT, SIGTERM, SIGHUP (unless it reloads),
    /// `--duration`, the sink saying stop, or a failure (see
    /// [`Session::run`]); SIGUSR1 prints the counts so far, as tcpdump
    /// does. The sink gets [`Event::Packet`] and [`Event::Flush`].
    pub fn run(
        self,
        with_bytes: bool,
        make: impl Fn() -> sluice::live::session::Classify,
        mut sink: impl FnMut(Event<'_>) -> Result<bool, Fail>,
    ) -> (Report, Result<(), Fail>) {
        if let Err(e) = signals::install(self.reloads) {
            return (Report::default(), Err(e));
        }
        let ebpf = self.ebpf;
        let controls = Controls {
            stop: signals::stop_flag(),
            counts: signals::counts_flag(),
            reload: signals::reload_flag(),
            deadline: self.duration.map(|d| Instant::now() + d),
        };
        self.session
            .run(&controls, with_bytes, make, |event| match event {
                Event::Counts { captured, kernel } => {
                    eprintln!("sluice: {}", counts_line(captured, kernel));
                    Ok(true)
                }
                Event::Reloaded(Ok(kernel)) => {
                    let what = match kernel {
                        Some(n) if ebpf => format!("kernel pre-filter: eBPF, {n} instructions"),
                        Some(n) => format!("kernel pre-filter: {n} instructions"),
                        None => "no kernel pre-filter".into(),
                    };
                    eprintln!("sluice: filter changed ({what})");
                    Ok(true)
                }
                Event::Reloaded(Err(e)) => {
                    eprintln!("sluice: {e}; the filter in force is kept");
                    Ok(true)
                }
                other => sink(other),
            })
    }
}

/// The interfaces `-i` takes, numbered as tcpdump's `-D` numbers them
/// (the `any` device after the interfaces that are up and running, before
/// loopback); with `json`, one object per interface.
pub fn list_interfaces(json: bool) -> Result<(), Fail> {
    let all = sluice::live::interfaces().map_err(fail)?;
    let any_at = all
        .iter()
        .position(|i| i.loopback || !(i.up && i.running))
        .unwrap_or(all.len());
    let mut lines: Vec<(String, String, String)> = all
        .iter()
        .map(|i| (i.name.clone(), String::new(), i.flags()))
        .collect();
    lines.insert(
        any_at,
        (
            "any".into(),
            "Pseudo-device that captures on all interfaces".into(),
            "[Up, Running]".into(),
        ),
    );
    let mut out = String::new();
    if json {
        let items: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(n, (name, what, flags))| {
                format!(
                    "{{\"number\": {}, \"name\": {}, \"description\": {}, \"flags\": {}}}",
                    n + 1,
                    super::split::json_string(name),
                    super::split::json_string(what),
                    super::split::json_string(flags.trim_matches(['[', ']']))
                )
            })
            .collect();
        out = format!("[{}]\n", items.join(", "));
    } else {
        for (n, (name, what, flags)) in lines.iter().enumerate() {
            let what = if what.is_empty() {
                String::new()
            } else {
                format!(" ({what})")
            };
            out += &format!("{}.{name}{what} {flags}\n", n + 1);
        }
    }
    super::print_out(&out)
}
