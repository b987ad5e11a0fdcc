//! `sluice daemon`: one live capture shared by many client processes
//! (see [`sluice_daemon`]), and `--status` to ask a running one what it
//! is doing.
//!
//! The rule: the daemon's work is the runtime's; this module reads
//! options, turns SIGINT/SIGTERM into a stop and SIGHUP into a policy
//! reload, starts the status page (`--http`), and prints.

use super::{print_out, signals, Fail};
use sluice::flow::buffer::Preference;
use sluice_daemon::http::{Board, Http};
use sluice_daemon::{Client, Config, Daemon, Steering};
use std::path::PathBuf;

/// The arguments of `sluice daemon`.
#[derive(clap::Args)]
pub struct DaemonArgs {
    /// Capture on this interface (repeat for more).
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        required_unless_present = "status"
    )]
    interfaces: Vec<String>,
    /// The socket clients connect to.
    #[arg(long, value_name = "PATH", default_value = "/run/sluice/sluice.sock")]
    socket: PathBuf,
    /// The socket's mode, in octal (who may connect at all) [default: 0660].
    #[arg(long = "socket-mode", value_name = "MODE", value_parser = octal)]
    socket_mode: Option<u32>,
    /// The socket's group, by name or number.
    #[arg(long = "socket-group", value_name = "GROUP")]
    socket_group: Option<String>,
    /// Who may open which flows (sluice flow's policy format; live sources
    /// are `source=iface:NAME`). Without one, only root and the daemon's
    /// own user may.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Size of each flow group's packet buffer, in MiB.
    #[arg(long = "pbuf-mib", value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=16384))]
    pbuf_mib: u64,
    /// Bytes of each packet a buffer slot keeps.
    #[arg(long = "slot-bytes", value_name = "N", default_value_t = 9216, value_parser = clap::value_parser!(u64).range(64..=262144))]
    slot_bytes: u64,
    /// Capture threads per interface (fanout) [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    workers: Option<u64>,
    /// Buffer management: srp (slow-reader preference: a full buffer
    /// drops new packets) or frp (fast-reader preference: readers that
    /// fall behind lose packets).
    #[arg(long, value_name = "PREF", default_value = "srp")]
    preference: String,
    /// Endpoints: each packet to the one flow that claims it (priority,
    /// then age), as CSPF's ports and MPF's endpoints.
    #[arg(long = "first-match")]
    first_match: bool,
    /// With srp: cut loose a flow whose reader has not moved for SECS
    /// while its group's buffer is full (counted).
    #[arg(long = "stall-timeout", value_name = "SECS", value_parser = super::seconds)]
    stall_timeout: Option<std::time::Duration>,
    /// No kernel pre-filter (every packet is copied to user space).
    #[arg(long = "no-kernel-filter")]
    no_kernel_filter: bool,
    /// Serve the status, read-only, over HTTP at ADDR (IP:PORT; port 0
    /// picks one): /status.json, /history.json and a live page at /.
    #[arg(long, value_name = "ADDR", conflicts_with = "status")]
    http: Option<String>,
    /// Let --http listen on an address other than loopback (whoever
    /// reaches it sees every client's filters and counts).
    #[arg(long = "http-any", requires = "http")]
    http_any: bool,
    /// Ask the daemon at --socket what it is doing, print it and exit.
    #[arg(long)]
    status: bool,
    /// With --status: one JSON object.
    #[arg(long, requires = "status")]
    json: bool,
}

/// `--socket-mode`'s value.
fn octal(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("'{s}' is not a file mode in octal (e.g. 0660)"))
}

/// A group's number from its name or number.
fn group_id(name: &str) -> Result<u32, Fail> {
    if let Ok(n) = name.parse::<u32>() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let n = f.next()?;
            let gid = f.nth(1)?.parse::<u32>().ok()?;
            (n == name).then_some(gid)
        })
        .next()
        .ok_or_else(|| Fail(format!("--socket-group: no group '{name}'")))
}

/// Run `sluice daemon`.
pub fn run(args: DaemonArgs) -> Result<(), Fail> {
    if args.status {
        return status(&args);
    }
    let preference: Preference = args.preference.parse().map_err(Fail)?;
    let mut config = Config::new(args.interfaces.clone(), args.socket.clone());
    config.socket_mode = Some(args.socket_mode.unwrap_or(0o660));
    config.socket_group = args.socket_group.as_deref().map(group_id).transpose()?;
    config.policy = args.policy.clone();
    config.pbuf_mib = args.pbuf_mib as usize;
    config.slot_bytes = args.slot_bytes as usize;
    config.workers = args.workers.unwrap_or(1) as usize;
    config.preference = preference;
    config.first_match = args.first_match;
    config.stall_timeout = args.stall_timeout;
    config.kernel_filter = !args.no_kernel_filter;
    signals::install(true)?;
    // The status page listens before the capture opens, so a bad address
    // is an error before anything runs.
    let http = match &args.http {
        Some(addr) => {
            let board = Board::new();
            config.board = Some(board.clone());
            Some(Http::start(addr, args.http_any, board).map_err(|e| Fail(e.to_string()))?)
        }
        None => None,
    };
    let daemon = Daemon::new(config).map_err(|e| Fail(e.to_string()))?;
    if let Some(h) = &http {
        eprintln!("sluice: status page at http://{}/", h.local_addr());
    }
    let names: Vec<String> = daemon
        .interfaces()
        .iter()
        .map(|(n, lt)| {
            let lt = sluice::LinkType::from_number(u32::from(*lt)).map_or("?", |l| l.name());
            format!("{n} ({lt})")
        })
        .collect();
    eprintln!(
        "sluice: daemon listening on {}, capturing on {}",
        args.socket.display(),
        names.join(", ")
    );
    let steering = Steering {
        stop: signals::stop_flag(),
        reload_policy: signals::reload_flag(),
    };
    let reports = daemon.run(&steering).map_err(|e| Fail(e.to_string()))?;
    for (name, r) in reports {
        let k = r.kernel();
        eprintln!(
            "sluice: {name}: {} packets delivered, {} received by filter, {} dropped by kernel",
            r.captured, k.received, k.dropped
        );
    }
    Ok(())
}

/// `--status`: the daemon's status as this user may see it.
fn status(args: &DaemonArgs) -> Result<(), Fail> {
    let client =
        Client::connect(&args.socket, "sluice daemon --status").map_err(|e| Fail(e.to_string()))?;
    let s = client.status().map_err(|e| Fail(e.to_string()))?;
    if args.json {
        return print_out(&format!("{s}\n"));
    }
    print_out(&status_text(&s))
}

/// The status for people.
fn status_text(s: &serde_json::Value) -> String {
    let d = &s["daemon"];
    let mut out = format!(
        "sluice daemon, pid {}, up {:.0} s, {} mode, {}, socket {}, {} client{}\n",
        d["pid"],
        d["uptime_s"].as_f64().unwrap_or(0.0),
        d["mode"].as_str().unwrap_or("?"),
        d["preference"].as_str().unwrap_or("?"),
        d["socket"].as_str().unwrap_or("?"),
        d["clients"],
        if d["clients"] == 1 { "" } else { "s" },
    );
    for i in s["interfaces"].as_array().into_iter().flatten() {
        out += &format!(
            "interface {}: {} received by filter, {} dropped by kernel, {} packets delivered, {} filters\n",
            i["name"].as_str().unwrap_or("?"),
            i["received"],
            i["dropped_by_kernel"],
            i["packets_delivered"],
            i["filters"]
        );
    }
    for c in s["clients"].as_array().into_iter().flatten() {
        out += &format!(
            "client {}: pid {} uid {} {}\n",
            c["client"],
            c["pid"],
            c["uid"],
            c["command"].as_str().unwrap_or("")
        );
        for f in c["flows"].as_array().into_iter().flatten() {
            out += &format!(
                "  flow {} {}: {} accepted, {} read, {} dropped{}\n",
                f["flow"],
                f["spec"].as_str().unwrap_or(""),
                f["accepted"],
                f["read"],
                f["dropped"],
                if f["stalled"] == true {
                    ", cut loose (stalled)"
                } else {
                    ""
                }
            );
        }
    }
    out
}
