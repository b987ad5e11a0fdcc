//! The cost of compiling a large expression, counted in instructions
//! (valgrind's callgrind, `Ir`), not time: `sluice filter -r
//! examples/sample.pcap --count` with a 10,000-term `host a or host b or
//! …` (the compile benchmark's workload, ten times smaller) must not
//! execute more than 1.5 times the baseline committed in
//! `benches/compile-instructions.txt`, so that a slip like the one that
//! doubled the 100,000-term compile (a second run of the refusal model)
//! fails when it lands. Instruction counts do not depend on the machine's
//! load; they do on the build, so the baseline is for this test profile
//! (`cargo test`, opt-level 1), and other profiles skip.
//!
//! `scripts/test.sh` installs valgrind and sets `SLUICE_VALGRIND_REQUIRED`,
//! so that a machine without it fails instead of skipping.

mod common;
use common::{manifest, sample};

use std::process::Command;

/// The workload: `host 10.0.x.y or …` with `n` terms.
fn hosts(n: u32) -> String {
    (1..=n)
        .map(|i| format!("host 10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// The baseline's instruction count for `name`.
fn baseline(name: &str) -> u64 {
    let path = manifest("benches/compile-instructions.txt");
    let text = std::fs::read_to_string(&path).expect("the baseline file");
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(name)).then(|| f.next()?.replace('_', "").parse().ok())?
        })
        .unwrap_or_else(|| panic!("no baseline for {name} in {}", path.display()))
}

#[test]
fn compiling_a_large_expression_costs_no_more_than_its_baseline() {
    if !cfg!(debug_assertions) {
        eprintln!("SKIPPED: the baseline counts the test profile's build");
        return;
    }
    let have = Command::new("valgrind").arg("--version").output().is_ok();
    if !have {
        assert!(
            std::env::var_os("SLUICE_VALGRIND_REQUIRED").is_none(),
            "valgrind is required (apt-get install valgrind)"
        );
        eprintln!("SKIPPED: no valgrind (apt-get install valgrind)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-compile-cost-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let expr = dir.join("hosts.txt");
    std::fs::write(&expr, hosts(10_000)).unwrap();
    let o = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(["filter", "-r", &sample(), "--count", "-F"])
        .arg(&expr)
        .output()
        .expect("run valgrind");
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let accepted = String::from_utf8_lossy(&o.stdout);
    assert!(accepted.trim().parse::<u64>().is_ok(), "{accepted}");
    let counted: u64 = err
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no instruction count in:\n{err}"));
    let base = baseline("hosts-10000");
    let ratio = counted as f64 / base as f64;
    println!("hosts-10000: {counted} instructions, {ratio:.2} times the baseline {base}");
    if ratio < 1.0 / 1.5 {
        println!("  (much cheaper than the baseline: update benches/compile-instructions.txt)");
    }
    assert!(
        ratio <= 1.5,
        "compiling 10,000 terms took {counted} instructions, {ratio:.2} times the baseline \
         {base} (benches/compile-instructions.txt): a compile-time regression"
    );
}
