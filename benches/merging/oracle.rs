//! libpcap's own known deviations on the corpus expressions, from the
//! shared oracle.
//!
//! sluice means what libpcap master means, optimised or not (see
//! `../shared/conformance/README.md`); the libpcap a machine has may be
//! older (Debian's 1.10.3 misreads `byte 8 & 5` and `ip multicast`) and
//! its optimiser deletes loads that decide an abort on truncated packets.
//! The oracle holds every expression's verdicts on every corpus capture by
//! libpcap 1.10.3, master and master unoptimised: an expression on whose
//! verdicts they differ anywhere is one the libpcap baseline may
//! legitimately disagree with sluice on. Any other disagreement stops the
//! run.

use crate::rows::Known;
use flate2::read::GzDecoder;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

/// The three verdict files compared.
const FILES: [&str; 3] = [
    "verdicts-1.10.3.tsv.gz",
    "verdicts-master.tsv.gz",
    "verdicts-master-unopt.tsv.gz",
];

/// Indexes (from 0) of the corpus expressions whose verdicts differ
/// between the oracle's libpcap versions; empty (every disagreement
/// fatal) if the oracle cannot be read.
pub fn libpcap_deviations(shared: &Path) -> Known {
    let dir = shared.join("conformance/oracle");
    let mut tables = Vec::new();
    for f in FILES {
        match read(&dir.join(f)) {
            Ok(t) => tables.push(t),
            Err(e) => {
                eprintln!(
                    "merging bench: {}: {e}; no known libpcap deviations",
                    dir.join(f).display()
                );
                return Known::new();
            }
        }
    }
    let mut known = Known::new();
    for (key, verdicts) in &tables[0] {
        if tables[1..].iter().any(|t| t.get(key) != Some(verdicts)) {
            known.insert(key.1 - 1);
        }
    }
    known
}

/// `(capture, line)` to the rest of the line (`OK` and the verdicts, or
/// `ERR` and the message).
fn read(path: &Path) -> std::io::Result<HashMap<(String, usize), String>> {
    let mut text = String::new();
    GzDecoder::new(std::fs::File::open(path)?).read_to_string(&mut text)?;
    let mut out = HashMap::new();
    for l in text.lines() {
        let mut cells = l.splitn(3, '\t');
        let (Some(capture), Some(line), Some(rest)) = (cells.next(), cells.next(), cells.next())
        else {
            continue;
        };
        if let Ok(line) = line.parse::<usize>() {
            out.insert((capture.to_string(), line), rest.to_string());
        }
    }
    Ok(out)
}
