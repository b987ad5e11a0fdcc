//! Dump generated workloads and the shared corpus.
//!
//! ```text
//! cargo run -p sluice-workload --example gen -- filters N SEED > flows.txt
//! cargo run -p sluice-workload --example gen -- traffic PACKETS SEED out.pcap [N]
//! cargo run -p sluice-workload --example gen -- corpus out.pcap [SHARED_DIR]
//! ```
//!
//! `filters` prints `name<TAB>expression` lines, the format `sluice split
//! --filters` and `sluice bench --filters` read. `traffic` writes the
//! traffic for `N` filters (default 1,000) as a pcap file. `corpus` writes
//! every Ethernet packet of `SHARED_DIR/conformance/pcaps` (default
//! `../shared`) as one pcap file.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: gen filters N SEED
       gen traffic PACKETS SEED OUT.pcap [N]
       gen corpus OUT.pcap [SHARED_DIR]";

fn number(s: Option<&String>, what: &str) -> Result<u64, String> {
    let s = s.ok_or_else(|| format!("missing {what}\n{USAGE}"))?;
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{what}: not a number: {s}"))
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("filters") => {
            let n = number(args.get(1), "N")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let text = sluice_workload::Workload::new(n, seed).filters_file();
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .map_err(|e| e.to_string())
        }
        Some("traffic") => {
            let packets = number(args.get(1), "PACKETS")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let out = args.get(3).ok_or_else(|| format!("missing OUT\n{USAGE}"))?;
            let n = match args.get(4) {
                Some(_) => number(args.get(4), "N")? as usize,
                None => 1000,
            };
            let frames = sluice_workload::traffic(n, seed, packets);
            sluice_workload::write_pcap(Path::new(out), &frames).map_err(|e| e.to_string())
        }
        Some("corpus") => {
            let out = args.get(1).ok_or_else(|| format!("missing OUT\n{USAGE}"))?;
            let shared = args.get(2).map_or("../shared", String::as_str);
            let packets = sluice_workload::corpus_packets(Path::new(shared))
                .map_err(|e| format!("{shared}/conformance/pcaps: {e}"))?;
            sluice_workload::write_pcap(Path::new(out), &packets).map_err(|e| e.to_string())?;
            eprintln!("{out}: {} packets", packets.len());
            Ok(())
        }
        _ => Err(USAGE.to_string()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
