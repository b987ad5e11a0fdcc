//! The symbols programs import, and pypcap on both libraries.
//!
//! A program whose libpcap lacks a symbol it imports fails when it loads,
//! so the candidate must export every symbol Debian's libpcap exports,
//! and so every libpcap symbol of Debian's tcpdump, tshark, dumpcap and
//! ngrep and of the Python bindings (python3-pcapy, pcapy-ng, pypcap)
//! (`nm -D`). pypcap's reader (`tests/py/pypcap_read.py`: reading, its
//! filters, its BPF programs' verdicts, its errors) must print the same on
//! both libraries.
#![forbid(unsafe_code)]

mod common;

use common::{abi_dir, candidate, resolved_libpcap, run, same_run, skip, Lib, SYSTEM_LIBPCAP};
use sluice_testsupport::corpus;
use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

/// `nm -D` of `file`: the defined (`defined`) or undefined dynamic
/// symbols, without version suffixes.
fn dynamic_symbols(file: &str, defined: bool) -> BTreeSet<String> {
    let flag = if defined {
        "--defined-only"
    } else {
        "--undefined-only"
    };
    let o = Command::new("nm")
        .args(["-D", flag, file])
        .output()
        .unwrap_or_else(|e| panic!("nm: {e} (apt-get install binutils)"));
    assert!(
        o.status.success(),
        "nm -D {file}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .map(|s| s.split('@').next().unwrap_or(s).to_string())
        .collect()
}

/// The Python with the bindings built from source (scripts/test.sh's
/// virtual environment), if there is one.
fn bindings_python() -> Option<String> {
    std::env::var("SLUICE_PYPCAP_PYTHON")
        .or_else(|_| std::env::var("SLUICE_PCAPY_NG_PYTHON"))
        .ok()
}

/// Where `module` is for `python`, if it imports.
fn module_file(python: &str, module: &str) -> Option<String> {
    let o = Command::new(python)
        .args(["-c", &format!("import {module}; print({module}.__file__)")])
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

#[test]
fn every_symbol_programs_import_is_exported() {
    if !std::path::Path::new(SYSTEM_LIBPCAP).exists() {
        skip(
            "symbols",
            &format!("{SYSTEM_LIBPCAP} missing (apt-get install libpcap0.8)"),
        );
        return;
    }
    let system = dynamic_symbols(SYSTEM_LIBPCAP, true);
    let cand = dynamic_symbols(candidate().to_str().unwrap(), true);
    let missing: Vec<&String> = system.difference(&cand).collect();
    assert!(
        missing.is_empty(),
        "exported by libpcap, not by the candidate: {missing:?}"
    );
    assert!(system.len() >= 90, "{system:?}");
    // The programs: their imports that libpcap defines.
    let mut users: Vec<(String, String)> = ["tcpdump", "tshark", "dumpcap", "ngrep"]
        .iter()
        .filter_map(|p| {
            let o = Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .ok()?;
            let path = String::from_utf8_lossy(&o.stdout).trim().to_string();
            (!path.is_empty()).then(|| (p.to_string(), path))
        })
        .collect();
    if let Some(m) = module_file("/usr/bin/python3", "pcapy") {
        users.push(("python3-pcapy".into(), m));
    }
    if let Some(py) = bindings_python() {
        for (name, module) in [("pcapy-ng", "pcapy"), ("pypcap", "pcap")] {
            if let Some(m) = module_file(&py, module) {
                users.push((name.into(), m));
            }
        }
    }
    if users.len() < 7 {
        skip(
            "symbols",
            &format!("only {} of the 7 programs are here", users.len()),
        );
    }
    let mut union = BTreeSet::new();
    for (name, file) in &users {
        let wanted: BTreeSet<String> = dynamic_symbols(file, false)
            .intersection(&system)
            .cloned()
            .collect();
        assert!(
            !wanted.is_empty(),
            "{name} ({file}) imports nothing of libpcap"
        );
        let lacking: Vec<&String> = wanted.difference(&cand).collect();
        assert!(
            lacking.is_empty(),
            "{name} imports {lacking:?}, not exported"
        );
        eprintln!("{name}: {} libpcap symbols", wanted.len());
        union.extend(wanted);
    }
    eprintln!(
        "{} programs import {} of libpcap's {} symbols",
        users.len(),
        union.len(),
        system.len()
    );
}

const CAPTURES: &[&str] = &[
    "mptcp-v0.pcap",
    "of13_ericsson.pcapng",
    "802.1ad_QinQ.pcap",
    "dhcpv4v6-rfc5970-rfc8572.pcap",
    "msnlb2.pcapng",
];

#[test]
fn pypcap_reads_alike() {
    let Some(pcaps) = corpus::path("pcaps") else {
        corpus::skipped("pypcap");
        return;
    };
    let Some(python) = bindings_python() else {
        skip(
            "pypcap",
            "no Python with pypcap built from source (SLUICE_PYPCAP_PYTHON; scripts/test.sh makes one)",
        );
        return;
    };
    let Some(module) = module_file(&python, "pcap") else {
        skip(
            "pypcap",
            &format!("{python} cannot import pcap (pip install --no-binary pypcap pypcap)"),
        );
        return;
    };
    let on = resolved_libpcap(Lib::Candidate, &module);
    assert!(
        on.contains(abi_dir().to_str().unwrap()),
        "{module} does not load the candidate: {on}"
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/pypcap_read.py");
    let mut args = vec![script.to_string()];
    args.extend(
        CAPTURES
            .iter()
            .map(|c| pcaps.join(c).to_str().unwrap().to_string()),
    );
    let limit = Duration::from_secs(60);
    let c = run(Lib::Candidate.command(&python, &args), None, limit);
    let s = run(Lib::System.command(&python, &args), None, limit);
    assert!(
        s.ok() && s.out().ends_with("done\n"),
        "pypcap on the system libpcap: {}",
        s.err()
    );
    assert!(s.out().lines().filter(|l| l.starts_with("pkt ")).count() > 100);
    if let Err(e) = same_run("pypcap", &c, &s) {
        panic!("{e}");
    }
}
