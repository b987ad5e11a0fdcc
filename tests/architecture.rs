//! The crate graph goes one way: every crate depends only on crates of its
//! own floor or floors below it (ARCHITECTURE.md draws them), and the
//! crates made for tests are only ever dev-dependencies. Read from
//! `cargo metadata`, so a dependency that breaks the rule fails here.

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

#[test]
fn the_crate_graph_goes_one_way() {
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
    let meta: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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
