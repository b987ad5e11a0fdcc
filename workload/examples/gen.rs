//! Dump generated workloads and the shared corpus.
//!
//! ```text
//! cargo run -p sluice-workload --example gen -- filters N SEED > flows.txt
//! cargo run -p sluice-workload --example gen -- traffic PACKETS SEED out.pcap [N]
//! cargo run -p sluice-workload --example gen -- flows PACKETS SEED out.pcap N FLOWS
//! cargo run -p sluice-workload --example gen -- corpus out.pcap [SHARED_DIR] [PACKETS]
//! cargo run -p sluice-workload --example gen -- broad CORPUS GENERATED SEED [SHARED_DIR] > mix.txt
//! cargo run -p sluice-workload --example gen -- acl N SEED > acl.txt
//! cargo run -p sluice-workload --example gen -- acl-traffic PACKETS SEED out.pcap N
//! ```
//!
//! `flows` writes traffic for `N` filters drawn from `FLOWS` flows
//! (`sluice_workload::flow_traffic`). `filters` prints `name<TAB>expression` lines, the format `sluice split
//! --filters` and `sluice bench --filters` read. `traffic` writes the
//! traffic for `N` filters (default 1,000) as a pcap file. `corpus` writes
//! every Ethernet packet of `SHARED_DIR/conformance/pcaps` (default
//! `../shared`) as one pcap file, repeated until it has `PACKETS` packets if
//! that is given (the corpus has 6,758). `broad` prints the broad mix
//! (`sluice_workload::broad_mix`): the first `CORPUS` corpus expressions
//! and `GENERATED` random ones with constants from the corpus's packets
//! (`broad 600 356 1` is issue 33's set of 956; `broad 600 400 1`, 1,000).
//! `acl` prints `N` five-tuple firewall rules (`sluice_workload::acl_rules`)
//! and `acl-traffic` writes traffic drawn from them.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: gen filters N SEED
       gen traffic PACKETS SEED OUT.pcap [N]
       gen flows PACKETS SEED OUT.pcap N FLOWS
       gen corpus OUT.pcap [SHARED_DIR] [PACKETS]
       gen broad CORPUS GENERATED SEED [SHARED_DIR]
       gen acl N SEED
       gen acl-traffic PACKETS SEED OUT.pcap N";

fn number(s: Option<&String>, what: &str) -> Result<u64, String> {
    let s = s.ok_or_else(|| format!("missing {what}\n{USAGE}"))?;
    s.replace(['_', ','], "")
        .parse()
        .map_err(|_| format!("{what}: not a number: {s}"))
}

/// Write `text` to standard output.
fn print(text: &str) -> Result<(), String> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(|e| e.to_string())
}

/// The OUT argument.
fn out(arg: Option<&String>) -> Result<&String, String> {
    arg.ok_or_else(|| format!("missing OUT\n{USAGE}"))
}

fn run(args: &[String]) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("filters") => {
            let n = number(args.get(1), "N")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let text = sluice_workload::Workload::new(n, seed).filters_file();
            print(&text)
        }
        Some("traffic") => {
            let packets = number(args.get(1), "PACKETS")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let out = out(args.get(3))?;
            let n = match args.get(4) {
                Some(_) => number(args.get(4), "N")? as usize,
                None => 1000,
            };
            let frames = sluice_workload::traffic(n, seed, packets);
            sluice_workload::write_pcap(Path::new(out), &frames).map_err(|e| e.to_string())
        }
        Some("flows") => {
            let packets = number(args.get(1), "PACKETS")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let out = out(args.get(3))?;
            let n = number(args.get(4), "N")? as usize;
            let flows = number(args.get(5), "FLOWS")? as usize;
            let frames = sluice_workload::flow_traffic(n, seed, packets, flows);
            sluice_workload::write_pcap(Path::new(out), &frames).map_err(|e| e.to_string())
        }
        Some("corpus") => {
            let out = out(args.get(1))?;
            let shared = args.get(2).map_or("../shared", String::as_str);
            let mut packets = sluice_workload::corpus_packets(Path::new(shared))
                .map_err(|e| format!("{shared}/conformance/pcaps: {e}"))?;
            if args.get(3).is_some() {
                let want = number(args.get(3), "PACKETS")? as usize;
                let one = packets.len().max(1);
                packets = packets
                    .iter()
                    .cycle()
                    .take(want.max(one))
                    .cloned()
                    .collect();
                packets.truncate(want);
            }
            sluice_workload::write_pcap(Path::new(out), &packets).map_err(|e| e.to_string())?;
            eprintln!("{out}: {} packets", packets.len());
            Ok(())
        }
        Some("broad") => {
            let corpus = number(args.get(1), "CORPUS")? as usize;
            let generated = number(args.get(2), "GENERATED")? as usize;
            let seed = number(args.get(3), "SEED")?;
            let shared = args.get(4).map_or("../shared", String::as_str);
            // What sluice's pcap compiler (libpcap's meaning) refuses is
            // drawn again.
            let pcap = sluice::Program::builder(sluice::LinkType::EN10MB);
            let compiles = |e: &str| pcap.build(e).is_ok();
            let set =
                sluice_workload::broad_mix(Path::new(shared), corpus, generated, seed, compiles)
                    .map_err(|e| format!("{shared}/conformance: {e}"))?;
            let mut text = String::new();
            for (i, e) in set.iter().enumerate() {
                let kind = if i < corpus { "corpus" } else { "broad" };
                text.push_str(&format!("{i:04}-{kind}\t{e}\n"));
            }
            print(&text)
        }
        Some("acl") => {
            let n = number(args.get(1), "N")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let text = sluice_workload::acl_filters_file(n, seed);
            print(&text)
        }
        Some("acl-traffic") => {
            let packets = number(args.get(1), "PACKETS")? as usize;
            let seed = number(args.get(2), "SEED")?;
            let out = out(args.get(3))?;
            let n = number(args.get(4), "N")? as usize;
            let rules = sluice_workload::acl_rules(n, seed);
            let frames = sluice_workload::acl_traffic(&rules, seed, packets);
            sluice_workload::write_pcap(Path::new(out), &frames).map_err(|e| e.to_string())
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
