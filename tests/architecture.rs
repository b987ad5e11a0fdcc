//! The crate graph goes one way: every crate depends only on crates of its
//! own floor or floors below it (ARCHITECTURE.md draws them), and the
//! crates made for tests are only ever dev-dependencies. Front ends
//! compile filters through the front door, `sluice-filter`: none depends
//! on a language crate (the `sluice` facade re-exports them for library
//! users, and its command names none). Read from `cargo metadata` and the
//! command's sources, so a dependency that breaks a rule fails here.

use std::collections::BTreeMap;
use std::process::Command;

/// The floors, lowest first: the pipeline of ARCHITECTURE.md.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "foundations",
        &["sluice-wire", "sluice-ir", "sluice-bpf", "sluice-shm"],
    ),
    (
        "languages",
        &["sluice-pcap", "sluice-cspf", "sluice-dpf", "sluice-fpl"],
    ),
    ("optimiser and merger", &["sluice-classifier"]),
    (
        "back ends",
        &["sluice-cbpf", "sluice-native", "sluice-libpcap"],
    ),
    ("one filter, any language", &["sluice-filter"]),
    (
        "runtime",
        &[
            "sluice-capture",
            "sluice-live",
            "sluice-fragments",
            "sluice-mpf",
            "sluice-flow",
            "sluice-split",
            "sluice-daemon",
        ],
    ),
    (
        "front ends",
        &["sluice", "sluice-libpcap-abi", "sluice-python"],
    ),
];

/// Crates for tests and benchmarks only.
const TEST_ONLY: &[&str] = &["sluice-testsupport", "sluice-workload"];

/// The floor whose crates are front ends, and the one of languages: a
/// front end asks `sluice-filter` what it would learn from a language
/// crate (a filter's language, `vlan` use, libpcap's wording of a
/// refusal, link types by name).
const FRONT_ENDS: &str = "front ends";
const LANGUAGES: &str = "languages";

/// The library facade: it re-exports every layer (`sluice::pcap`, ...)
/// for library users; its command does not use them.
const FACADE: &str = "sluice";

/// The crates' metadata, without their dependencies' packages.
fn metadata() -> serde_json::Value {
    let o = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The crates of a floor.
fn floor(name: &str) -> &'static [&'static str] {
    FLOORS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .expect("a floor of FLOORS")
}

#[test]
fn the_crate_graph_goes_one_way() {
    let meta = metadata();
    let floor: BTreeMap<&str, usize> = FLOORS
        .iter()
        .enumerate()
        .flat_map(|(i, (_, crates))| crates.iter().map(move |c| (*c, i)))
        .collect();
    let mut wrong = Vec::new();
    let mut seen = 0;
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if !name.starts_with("sluice") || name == "sluice-fuzz" {
            continue;
        }
        seen += 1;
        let mine = floor.get(name).copied();
        if mine.is_none() && !TEST_ONLY.contains(&name) {
            wrong.push(format!(
                "{name} is on no floor: add it to ARCHITECTURE.md and here"
            ));
            continue;
        }
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            let dev = d["kind"].as_str() == Some("dev");
            if !dep.starts_with("sluice") || dev {
                continue;
            }
            if TEST_ONLY.contains(&dep) {
                wrong.push(format!("{name} depends on {dep}, a crate for tests only"));
                continue;
            }
            let (Some(m), Some(t)) = (mine, floor.get(dep).copied()) else {
                continue;
            };
            if t > m {
                wrong.push(format!(
                    "{name} ({}) depends on {dep} ({}), a floor above it",
                    FLOORS[m].0, FLOORS[t].0
                ));
            }
        }
    }
    assert!(seen >= 20, "only {seen} crates in the workspace?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn front_ends_compile_through_the_front_door() {
    let meta = metadata();
    let (front, languages) = (floor(FRONT_ENDS), floor(LANGUAGES));
    let mut wrong = Vec::new();
    let mut seen = 0;
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        if !front.contains(&name) || name == FACADE {
            continue;
        }
        seen += 1;
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if languages.contains(&dep) && d["kind"].as_str() != Some("dev") {
                wrong.push(format!(
                    "{name} depends on {dep}: ask sluice-filter instead"
                ));
            }
        }
    }
    assert_eq!(seen, front.len() - 1, "a front end is not in the workspace");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The `sluice` crate's command and helpers name no language crate, under
/// any of its names: only `src/lib.rs` re-exports them.
#[test]
fn the_command_names_no_language_crate() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut names = Vec::new();
    for c in floor(LANGUAGES) {
        let short = c.trim_start_matches("sluice-");
        names.push(format!("sluice_{short}::"));
        names.push(format!("sluice::{short}::"));
        names.push(format!("crate::{short}::"));
        names.push(format!("sluice::{short};"));
    }
    let mut files = vec![src.clone()];
    let mut wrong = Vec::new();
    let mut read = 0;
    while let Some(f) = files.pop() {
        if f.is_dir() {
            for e in std::fs::read_dir(&f).unwrap() {
                files.push(e.unwrap().path());
            }
            continue;
        }
        if f.extension() != Some(std::ffi::OsStr::new("rs")) || f == src.join("lib.rs") {
            continue;
        }
        read += 1;
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(n) = names.iter().find(|n| code.contains(n.as_str())) {
                wrong.push(format!(
                    "{}:{}: names `{n}`: compile through sluice::filter",
                    f.display(),
                    i + 1
                ));
            }
        }
    }
    assert!(read >= 20, "only {read} source files under src/?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
