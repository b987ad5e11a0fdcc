//! libpcap's C API, call by call: `tests/c/api.c` is compiled against the
//! system `<pcap/pcap.h>` (its `_Static_assert`s pin the structure layouts
//! and constants of the ABI), linked with `-lpcap`, and run on the
//! candidate library and on Debian's libpcap. The two transcripts must be
//! equal line by line (lines marked `~ KEY ~ VALUE` hold text two correct
//! libraries may print differently: only KEY is compared), standard error
//! and exit status equal, and every file the program wrote with
//! `pcap_dump` and friends byte-identical.
#![forbid(unsafe_code)]

mod common;

use common::{abi_dir, first_difference, resolved_libpcap, run, scratch, Lib, Ran};
use sluice_testsupport::corpus;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/api.c");

/// The compiled program, built once per test process (`None` where it
/// cannot be built here; see [`common::build_c`]).
fn api_program() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| common::build_c(Path::new(SOURCE)))
        .as_deref()
}

/// What a `~ KEY ~ VALUE` line is compared by: KEY.
fn loose_key(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("~ ")?;
    // "~ KEY ~ VALUE", or "~ KEY ~" with an empty value.
    let end = rest
        .rfind(" ~ ")
        .or_else(|| rest.strip_suffix(" ~").map(str::len))?;
    Some(&rest[..end])
}

/// Lines where libpcap master (sluice's oracle) and Debian's 1.10.3 print
/// differently: `(candidate, system)` fragments accepted in place of each
/// other. Master names `ldx` of the packet length; 1.10.3 calls it
/// unimplemented.
const MASTER_DIFFERS: &[(&str, &str)] = &[("ldx      #pktlen", "unimp    0x81")];

/// Whether a differing line is one of [`MASTER_DIFFERS`].
fn master_differs(a: &str, b: &str) -> bool {
    MASTER_DIFFERS
        .iter()
        .any(|(m, d)| a.contains(m) && b.contains(d) && a.replace(m, d) == b)
}

/// Two transcripts agree: every line equal, or both loose with one key.
/// The error names the first differing line and the capture it is about.
fn compare_transcripts(cand: &str, sys: &str) -> Result<(), String> {
    let mut section = "(before the corpus captures)";
    let mut c = cand.lines();
    let mut s = sys.lines();
    for n in 1.. {
        let (a, b) = match (c.next(), s.next()) {
            (None, None) => return Ok(()),
            (a, b) => (a.unwrap_or("<end>"), b.unwrap_or("<end>")),
        };
        if let Some(name) = b.strip_prefix("== ") {
            section = name;
        }
        if a == b || master_differs(a, b) {
            continue;
        }
        match (loose_key(a), loose_key(b)) {
            (Some(x), Some(y)) if x == y => continue,
            _ => {
                return Err(format!(
                    "transcripts differ at line {n} (in {section}):\n  candidate: {a}\n  system:    {b}"
                ))
            }
        }
    }
    unreachable!()
}

/// The names of the files in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The program's run on `lib` in a scratch directory of its own.
fn run_api(bin: &Path, pcaps: &Path, lib: Lib) -> (Ran, PathBuf) {
    let dir = scratch(&format!("api-{}", lib.tag()));
    let cmd = lib.command(
        bin.to_str().unwrap(),
        &[dir.to_str().unwrap(), pcaps.to_str().unwrap()],
    );
    // Standard input: a small capture, read as "-".
    let stdin = pcaps.join("802.1ad_QinQ.pcap");
    (run(cmd, Some(&stdin), Duration::from_secs(120)), dir)
}

#[test]
fn loose_lines_compare_only_their_key() {
    assert_eq!(loose_key("~ images 'tcp' ~ 12 insns"), Some("images 'tcp'"));
    assert_eq!(loose_key("~ other sources ~"), Some("other sources"));
    assert!(compare_transcripts("a\n~ k ~ 1\n", "a\n~ k ~ 2\n").is_ok());
    assert!(compare_transcripts("a\n~ k ~ 1\n", "a\n~ j ~ 1\n").is_err());
    assert!(compare_transcripts("a\nb ~ 1\n", "a\nb ~ 2\n").is_err());
    assert!(compare_transcripts("a\n", "a\nb\n").is_err());
    let e = compare_transcripts("== x.pcap\np 1\n", "== x.pcap\np 2\n").unwrap_err();
    assert!(e.contains("line 2 (in x.pcap)"), "{e}");
}

#[test]
fn the_candidate_is_what_programs_load() {
    let Some(bin) = api_program() else { return };
    let bin = bin.to_str().unwrap();
    let on_candidate = resolved_libpcap(Lib::Candidate, bin);
    let want = abi_dir().join("libpcap.so.0.8");
    assert!(
        on_candidate.contains(want.to_str().unwrap()),
        "with LD_LIBRARY_PATH the program loads {on_candidate}, not {}",
        want.display()
    );
    let on_system = resolved_libpcap(Lib::System, bin);
    assert!(
        !on_system.contains(abi_dir().to_str().unwrap()) && on_system.contains("libpcap.so.0.8"),
        "{on_system}"
    );
}

#[test]
fn api_transcripts_and_dumps_match() {
    let Some(bin) = api_program() else { return };
    let caps = corpus::pcaps();
    let Some(pcaps) = corpus::path("pcaps").filter(|_| !caps.is_empty()) else {
        corpus::skipped("api");
        return;
    };
    let (sys, sys_dir) = run_api(bin, &pcaps, Lib::System);
    // The baseline ran through: no test passes on two empty transcripts.
    let t = sys.out();
    assert!(
        sys.ok() && t.ends_with("done\n"),
        "baseline: {}\n{}",
        sys.status,
        sys.err()
    );
    assert_eq!(
        t.lines().filter(|l| l.starts_with("== ")).count(),
        caps.len()
    );
    assert!(t.lines().filter(|l| l.starts_with("pkt ")).count() > 5000);
    let (cand, cand_dir) = run_api(bin, &pcaps, Lib::Candidate);
    assert_eq!(
        cand.status,
        sys.status,
        "exit status; candidate stderr: {}",
        cand.err()
    );
    if let Err(e) = compare_transcripts(&cand.out(), &t) {
        panic!("{e}");
    }
    if let Some(d) = first_difference(&cand.stderr, &sys.stderr) {
        panic!("stderr (pcap_perror) differs at {d}");
    }
    // Every file written (dumps, appends, the test's own inputs).
    let names = listing(&sys_dir);
    assert_eq!(listing(&cand_dir), names, "the files written");
    assert!(names.iter().filter(|n| n.starts_with("dump-")).count() >= 2 * caps.len());
    let mut failures = Vec::new();
    for n in &names {
        let (a, b) = (cand_dir.join(n), sys_dir.join(n));
        if b.is_file() {
            if let Err(e) = common::same_file(n, &a, &b) {
                failures.push(e);
            }
        }
    }
    common::report("files written through pcap_dump", names.len(), &failures);
    let _ = std::fs::remove_dir_all(&cand_dir);
    let _ = std::fs::remove_dir_all(&sys_dir);
}
