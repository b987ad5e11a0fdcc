//! The crate graph goes one way: every crate depends only on crates of its
//! own floor or floors below it (ARCHITECTURE.md draws them), and the
//! crates made for tests are only ever dev-dependencies. Front ends (the
//! `sluice` command in `src/`, every crate under `frontends/` and
//! `python/`) compile filters through the front door, `sluice-filter`:
//! none depends on a language crate, not even for its tests, but for the
//! exceptions listed in [`FRONT_DOOR_EXCEPTIONS`] with their reasons (the
//! `sluice` facade re-exports the languages for library users, and its
//! command names none). Read from `cargo metadata` and the command's
//! sources, so a dependency that breaks a rule fails here.

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
        &[
            "sluice-cbpf",
            "sluice-native",
            "sluice-ebpf",
            "sluice-libpcap",
        ],
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

/// Where front ends live, relative to the workspace: a crate there is on
/// the front-end floor, and so under the front-door rule.
const FRONT_END_DIRS: &[&str] = &["frontends/", "python/"];

/// The library facade: its package is also the command's (`src/`).
const FACADE: &str = "sluice";

/// Front ends that may depend on a language crate, and why. Each must
/// still need its exception (a stale one fails the test).
const FRONT_DOOR_EXCEPTIONS: &[(&str, &str)] = &[(
    FACADE,
    "the library facade re-exports every layer (`sluice::pcap`, ...) for \
     library users from src/lib.rs; the command in the same package names \
     none (the_command_names_no_language_crate checks its sources)",
)];

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
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (front, languages) = (floor(FRONT_ENDS), floor(LANGUAGES));
    let mut wrong = Vec::new();
    let mut seen = 0;
    let mut excepted = Vec::new();
    for p in meta["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let manifest = std::path::Path::new(p["manifest_path"].as_str().unwrap());
        let dir = manifest.strip_prefix(root).unwrap_or(manifest);
        let dir = dir.to_string_lossy();
        if FRONT_END_DIRS.iter().any(|d| dir.starts_with(d)) && !front.contains(&name) {
            wrong.push(format!(
                "{name} lives in {dir} but is not on the {FRONT_ENDS} floor"
            ));
        }
        if !front.contains(&name) {
            continue;
        }
        seen += 1;
        let exception = FRONT_DOOR_EXCEPTIONS.iter().find(|(c, _)| *c == name);
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if !languages.contains(&dep) {
                continue;
            }
            match exception {
                Some(_) => excepted.push(name),
                None => wrong.push(format!(
                    "{name} depends on {dep}{}: ask sluice-filter instead, or list \
                     the exception with its reason in FRONT_DOOR_EXCEPTIONS",
                    match d["kind"].as_str() {
                        Some("dev") => " (for its tests)",
                        _ => "",
                    }
                )),
            }
        }
    }
    for (c, why) in FRONT_DOOR_EXCEPTIONS {
        assert!(!why.is_empty(), "the exception for {c} gives no reason");
        if !excepted.contains(c) {
            wrong.push(format!(
                "{c} no longer depends on a language crate: drop its exception"
            ));
        }
    }
    assert_eq!(seen, front.len(), "a front end is not in the workspace");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Whether `code` names `word` as a whole identifier right after `prefix`
/// (`""` for anywhere).
fn names_after(code: &str, prefix: &str, word: &str) -> bool {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let needle = format!("{prefix}{word}");
    code.match_indices(&needle).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + needle.len()..].chars().next();
        !before.is_some_and(ident) && !after.is_some_and(ident)
    })
}

/// The `sluice` crate's command and helpers name no language crate, under
/// any of its names (`sluice_pcap`, `crate::pcap`, `sluice::pcap`, or
/// `pcap` inside a `use crate::{...}` or `use sluice::{...}` list, over
/// several lines too): only `src/lib.rs` re-exports them.
#[test]
fn the_command_names_no_language_crate() {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let shorts: Vec<&str> = floor(LANGUAGES)
        .iter()
        .map(|c| c.trim_start_matches("sluice-"))
        .collect();
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
        // Inside a `use` of the facade or of the crate itself, up to its `;`.
        let mut in_root_use = false;
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let stmt = code.trim_start().trim_start_matches("pub(crate) ");
            let stmt = stmt.trim_start_matches("pub ");
            if stmt.starts_with("use crate::") || stmt.starts_with("use sluice::") {
                in_root_use = true;
            }
            for short in &shorts {
                let named = names_after(code, "sluice_", short)
                    || names_after(code, "crate::", short)
                    || names_after(code, "sluice::", short)
                    || (in_root_use && names_after(code, "", short));
                if named {
                    wrong.push(format!(
                        "{}:{}: names the {short} language crate: compile through \
                         sluice::filter",
                        f.display(),
                        i + 1
                    ));
                }
            }
            if code.contains(';') {
                in_root_use = false;
            }
        }
    }
    assert!(read >= 20, "only {read} source files under src/?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn names_after_finds_whole_identifiers_only() {
    assert!(names_after("use sluice_pcap::ast;", "sluice_", "pcap"));
    assert!(names_after(
        "let x = crate::pcap::compile(t);",
        "crate::",
        "pcap"
    ));
    assert!(names_after("    cli, pcap,", "", "pcap"));
    assert!(!names_after("use crate::pcap_names;", "crate::", "pcap"));
    assert!(!names_after("let libpcap = 1;", "", "pcap"));
    assert!(!names_after("use sluice_filter::Spec;", "sluice_", "fpl"));
}
