//! Many endpoints of one daemon in one process, for the benchmarks: one
//! connection (one client, as the daemon sees it) per filter, each flow
//! read until the time is up; then each flow's counts as JSON.
//!
//! ```text
//! endpoints SOCKET IFACE FILTERS SECONDS
//! ```
//!
//! FILTERS holds one pcap expression per line. "listening on" goes to
//! standard error once every flow is open; standard output gets
//! `{"flows": [[delivered, lost, accepted], ...]}` in the file's order.

use sluice_daemon::{wait_any, Client, DaemonFlow};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        eprintln!("usage: endpoints SOCKET IFACE FILTERS SECONDS");
        std::process::exit(2);
    }
    let socket = std::path::Path::new(&args[1]);
    let iface = &args[2];
    let text = std::fs::read_to_string(&args[3]).expect("the filters file");
    let seconds: f64 = args[4].parse().expect("seconds");
    let mut clients = Vec::new();
    let mut flows: Vec<DaemonFlow> = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut c = Client::connect(socket, "endpoints").expect("connect");
        let f = c
            .open(&format!("(iface,{iface}) -> (BPF,\"{line}\")"), 0)
            .expect("open a flow");
        clients.push(c);
        flows.push(f);
    }
    eprintln!("listening on {} flows", flows.len());
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let mut delivered = vec![0u64; flows.len()];
    while Instant::now() < end {
        let mut got = false;
        for (i, f) in flows.iter_mut().enumerate() {
            while let Ok(Some(_)) = f.next(Some(Duration::ZERO)) {
                delivered[i] += 1;
                got = true;
            }
        }
        if !got {
            let all: Vec<&DaemonFlow> = flows.iter().collect();
            let _ = wait_any(&all, Duration::from_millis(100));
        }
    }
    let rows: Vec<String> = flows
        .iter()
        .zip(&delivered)
        .map(|(f, d)| {
            let s = f.stats();
            format!("[{d}, {}, {}]", s.lost, s.accepted)
        })
        .collect();
    println!("{{\"flows\": [{}]}}", rows.join(", "));
}
