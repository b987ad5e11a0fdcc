//! What programs do to libpcap besides reading packets in order
//! (`tests/c/reentry.c`, run on the candidate and on Debian's libpcap,
//! transcripts and written files compared):
//!
//! - every accessor, `pcap_setfilter`, `pcap_next_ex`, `pcap_stats`,
//!   `pcap_compile` and `pcap_breakloop` called from inside a callback
//!   (ettercap calls `pcap_file` there), on pcap and pcapng captures;
//! - `pthread_cancel` of a thread in `pcap_loop` (waiting on a pipe, and
//!   inside its callback) and `pthread_exit` from a callback: the thread
//!   ends with `PTHREAD_CANCELED`, its cleanup handlers run, the handle
//!   stays usable and closes (iftop cancels its capture thread);
//! - stdio positions: `ftell`/`fseek` of `pcap_file()`'s stream after each
//!   record (tcpslice), `pcap_fopen_offline`, `-` after `fread` and
//!   `rewind` of stdin (tcptrace), `pcap_dump_ftell`, `pcap_dump_file`,
//!   `pcap_dump_fopen` after a prefix;
//! - a slow writer on a pipe: each record is handed over before the next
//!   is written (`tcpdump -l -r -` behind tcpreplay -v).
//!
//! - `bpf_filter` and `pcap_offline_filter` (sluice's native code, cached
//!   by the program's instructions): verdicts of compiled programs, of
//!   one array rewritten in place with each program in turn, of a program
//!   with unreachable bytes in it;
//! - `pcap_compile` on a dead handle with a snapshot length of 0: refused
//!   ("snaplen of 0 rejects all packets").
//!
//! Two cases crash libpcap and run on the candidate only: `pcap_close`
//! twice with a new handle at the freed address, and `pcap_close` from
//! inside the loop's callback.
#![forbid(unsafe_code)]

mod common;

use common::{run, same_file, same_run, scratch, Lib, Ran};
use sluice_testsupport::corpus;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

const SOURCE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/c/reentry.c");
const LIMIT: Duration = Duration::from_secs(60);

fn program() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| common::build_c(Path::new(SOURCE)))
        .as_deref()
}

fn sample() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/sample.pcap")
}

fn on(lib: Lib, args: &[&str], stdin: Option<&Path>) -> Ran {
    let bin = program().unwrap().to_str().unwrap();
    run(lib.command(bin, args), stdin, LIMIT)
}

/// Runs `args` on both libraries; they must agree, and the system
/// library's run must exit 0 and contain `expect`.
fn agree(args: &[&str], stdin: Option<&Path>, expect: &str) -> (Ran, Ran) {
    let sys = on(Lib::System, args, stdin);
    assert!(
        sys.ok() && sys.out().contains(expect),
        "baseline {args:?}: {}\n{}{}",
        sys.status,
        sys.out(),
        sys.err()
    );
    let cand = on(Lib::Candidate, args, stdin);
    if let Err(e) = same_run(&format!("reentry {args:?}"), &cand, &sys) {
        panic!("{e}\ncandidate stdout:\n{}", cand.out());
    }
    (cand, sys)
}

#[test]
fn accessors_from_inside_a_callback_answer_as_on_libpcap() {
    if program().is_none() {
        return;
    }
    let s = sample();
    agree(
        &["callback", s.to_str().unwrap()],
        None,
        "breakloop\nloop returned -2 after 6",
    );
    // pcapng and other link types, where the corpus is here.
    for name in [
        "of13_ericsson.pcapng",
        "802.1ad_QinQ.pcap",
        "dhcp-option-108.pcapng",
    ] {
        let Some(c) = corpus::path("pcaps")
            .map(|p| p.join(name))
            .filter(|p| p.is_file())
        else {
            corpus::skipped("reentry callback");
            return;
        };
        agree(&["callback", c.to_str().unwrap()], None, "pkt 1 ");
    }
}

#[test]
fn cancelled_capture_threads_end_as_on_libpcap() {
    if program().is_none() {
        return;
    }
    let s = sample();
    agree(
        &["cancel", s.to_str().unwrap()],
        None,
        "cancel in callback: callbacks 2, cleanup handler ran, thread returned PTHREAD_CANCELED",
    );
}

#[test]
fn stdio_streams_are_where_libpcap_leaves_them() {
    if program().is_none() {
        return;
    }
    let s = sample();
    let mut dirs = Vec::new();
    let mut runs = Vec::new();
    for lib in [Lib::System, Lib::Candidate] {
        let dir = scratch(&format!("reentry-stdio-{}", lib.tag()));
        runs.push(on(
            lib,
            &["stdio", s.to_str().unwrap(), dir.to_str().unwrap()],
            Some(&s),
        ));
        dirs.push(dir);
    }
    let (sys, cand) = (&runs[0], &runs[1]);
    assert!(
        sys.ok() && sys.out().contains("after fseek to 82: len 71, at 169"),
        "baseline: {}",
        sys.out()
    );
    if let Err(e) = same_run("reentry stdio", cand, sys) {
        panic!("{e}\ncandidate stdout:\n{}", cand.out());
    }
    for f in ["dump.pcap", "fopen.pcap"] {
        same_file(f, &dirs[1].join(f), &dirs[0].join(f)).unwrap();
    }
}

#[test]
fn a_slow_pipe_writer_is_read_record_by_record() {
    if program().is_none() {
        return;
    }
    let s = sample();
    let (_, sys) = agree(&["pipe", s.to_str().unwrap()], None, "next_ex -2");
    assert!(!sys.out().contains("late"), "{}", sys.out());
}

#[test]
fn bpf_filter_gives_libpcaps_verdicts() {
    if program().is_none() {
        return;
    }
    let s = sample();
    agree(
        &["filters", s.to_str().unwrap()],
        None,
        "'tcp port 80': accepted 5 (value 262144)",
    );
    if let Some(c) = corpus::path("pcaps")
        .map(|p| p.join("pim-packet-assortment.pcap"))
        .filter(|p| p.is_file())
    {
        agree(
            &["filters", c.to_str().unwrap()],
            None,
            "all four agree yes",
        );
    }
}

#[test]
fn a_snapshot_length_of_0_compiles_nothing_as_on_libpcap() {
    if program().is_none() {
        return;
    }
    agree(
        &["snaplen"],
        None,
        "snaplen 0: compile -1 snaplen of 0 rejects all packets",
    );
}

#[test]
fn stale_and_self_closed_handles_are_recognised() {
    if program().is_none() {
        return;
    }
    let r = on(Lib::Candidate, &["twice"], None);
    assert!(r.ok(), "{}: {}", r.status, r.err());
    assert_eq!(
        r.out(),
        "after a second close of the first: b's datalink 12\n"
    );
    let s = sample();
    let r = on(Lib::Candidate, &["closecb", s.to_str().unwrap()], None);
    assert!(r.ok(), "{}: {}", r.status, r.err());
    assert_eq!(r.out(), "loop returned -1\nsecond close ignored\n");
}
