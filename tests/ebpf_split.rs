//! `sluice split --engine ebpf --count`: the merged filter set as one
//! chain of eBPF programs with maps, counting in the kernel, against the
//! default engine and against libpcap's per-filter counts.
//!
//! - Generated heterogeneous sets (`sluice_workload::filter_set`, as the
//!   merging tests use) on their traffic, and 10,000 TCP session filters:
//!   the kernel's counts equal `sluice split --count`'s and libpcap's
//!   (each filter compiled by libpcap and run alone on every packet).
//! - Key-only inserts and removals (map updates, no reload) change the
//!   counts exactly as they change the default engine's answers.
//! - The system's BPF programs and maps are the same before and after.
//!
//! libpcap's `bpf_filter` takes the captured length as the length on the
//! wire, so the captures here hold whole packets only. Where the kernel
//! refuses BPF (no root, no CAP_BPF) the tests say SKIPPED, unless
//! `SLUICE_LIVE_REQUIRED` is set (scripts/test.sh sets it as root), when
//! they fail.

use pcap::{Capture, Linktype};
use sluice::classifier::merged::Compiled;
use sluice::classifier::{Classifier, FilterId};
use sluice::ebpf::multi::Options;
use sluice::ebpf::{Error, Mode, MultiFilter};
use sluice_workload::{session, session_expression, tcp_frame};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this process may load BPF programs; false (after saying
/// SKIPPED) where it may not and nothing requires it.
fn bpf_permitted(what: &str) -> bool {
    let f = sluice::ir::Filter::new(sluice::ir::Pred::True, 1);
    match sluice::ebpf::Loaded::compile(&f, Mode::TestRun) {
        Ok(_) => true,
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED {what}: the kernel refuses BPF here ({e})");
            false
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-ebpf-split-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

/// `sluice split --count` with `engine` (None: the default): the counts
/// in file order.
fn split_counts(dir: &Path, engine: Option<&str>) -> Vec<u64> {
    let (f, r) = (dir.join("filters.txt"), dir.join("in.pcap"));
    let mut args = vec!["split", "--count", "--filters", f.to_str().unwrap()];
    args.extend(["-r", r.to_str().unwrap()]);
    if let Some(e) = engine {
        args.extend(["--engine", e]);
    }
    let out = sluice(&args);
    assert!(
        out.status.success(),
        "sluice {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().parse().unwrap())
        .collect()
}

/// Each expression compiled by libpcap (optimised) and run alone on every
/// packet: its count.
fn libpcap_counts(exprs: &[String], pkts: &[(Vec<u8>, u32)]) -> Vec<u64> {
    let cap = Capture::dead(Linktype::ETHERNET).expect("libpcap dead handle");
    exprs
        .iter()
        .map(|e| {
            let p = cap
                .compile(e, true)
                .unwrap_or_else(|err| panic!("{e}: {err}"));
            pkts.iter().filter(|(d, _)| p.filter(d)).count() as u64
        })
        .collect()
}

/// Write the set and the packets, and check the three counts agree.
fn check(name: &str, exprs: &[String], pkts: &[(Vec<u8>, u32)]) -> Vec<u64> {
    let dir = tmpdir(name);
    let text: String = exprs
        .iter()
        .enumerate()
        .map(|(i, e)| format!("f{i}\t{e}\n"))
        .collect();
    std::fs::write(dir.join("filters.txt"), text).unwrap();
    sluice_workload::write_pcap(&dir.join("in.pcap"), pkts).unwrap();
    let kernel = split_counts(&dir, Some("ebpf"));
    let default = split_counts(&dir, None);
    assert_eq!(
        kernel, default,
        "{name}: the kernel's counts against the default engine's"
    );
    let libpcap = libpcap_counts(exprs, pkts);
    let bad: Vec<String> = (0..exprs.len())
        .filter(|&i| kernel[i] != libpcap[i])
        .take(10)
        .map(|i| format!("{}: kernel {}, libpcap {}", exprs[i], kernel[i], libpcap[i]))
        .collect();
    assert!(
        bad.is_empty(),
        "{name}: against libpcap:\n{}",
        bad.join("\n")
    );
    std::fs::remove_dir_all(&dir).unwrap();
    kernel
}

/// Whole packets only (see the module doc).
fn whole(pkts: Vec<(Vec<u8>, u32)>) -> Vec<(Vec<u8>, u32)> {
    pkts.into_iter()
        .filter(|(d, w)| d.len() == *w as usize && d.len() <= sluice::ebpf::MAX_TEST_PACKET)
        .collect()
}

#[test]
fn generated_heterogeneous_sets_count_as_the_default_engine_and_libpcap() {
    if !bpf_permitted("split --engine ebpf on generated sets") {
        return;
    }
    for (n, seed) in [(10, 1), (100, 2), (300, 3), (1000, 4)] {
        let exprs = sluice_workload::filter_set(n, seed);
        let pkts = whole(sluice_workload::traffic(n, seed, 2000));
        let counts = check(&format!("set{n}-{seed}"), &exprs, &pkts);
        let total: u64 = counts.iter().sum();
        assert!(
            total > pkts.len() as u64 / 2,
            "the traffic matches the filters"
        );
    }
}

#[test]
fn ten_thousand_sessions_count_as_the_default_engine_and_libpcap() {
    if !bpf_permitted("split --engine ebpf on 10,000 sessions") {
        return;
    }
    let n = 10_000u32;
    let exprs: Vec<String> = (0..n).map(session_expression).collect();
    // Every 7th session's packets (some twice), replies that no session
    // matches, and packets of sessions that are not in the set.
    let mut pkts = Vec::new();
    for i in (0..n + 500).step_by(7) {
        let (a, b, p, q) = session(i);
        pkts.push((tcp_frame(a, b, p, q), 60));
        pkts.push((tcp_frame(b, a, q, p), 60));
        if i % 3 == 0 {
            pkts.push((tcp_frame(a, b, p, q), 60));
        }
    }
    let counts = check("sessions", &exprs, &pkts);
    assert_eq!(
        counts.iter().filter(|&&c| c > 0).count(),
        (n as usize).div_ceil(7)
    );
}

#[test]
fn key_only_inserts_and_removals_count_as_the_default_engine_does() {
    if !bpf_permitted("key-only changes") {
        return;
    }
    let (progs0, maps0) = sluice::ebpf::system_ids().unwrap();
    let program = |e: &str| {
        sluice::Program::builder(sluice::LinkType::EN10MB)
            .expression(e)
            .unwrap()
            .ir()
            .unwrap()
            .clone()
    };
    let base = 200u32;
    let compiled: Vec<Compiled> = (0..base)
        .map(|i| Compiled::new(program(&session_expression(i))))
        .collect();
    let set: Vec<(u32, &Compiled)> = compiled
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32, c))
        .collect();
    let opts = Options {
        capacity: 1000,
        ..Default::default()
    };
    let mut m = MultiFilter::build(&set, Mode::TestRun, opts).unwrap();
    let insns = m.instructions().to_vec();
    // The default engine, with the same filters in the same order (its ids
    // are insertion order, as ours).
    let mut c: Classifier = Classifier::new();
    for i in 0..base {
        assert_eq!(c.insert(&program(&session_expression(i)), 0), FilterId(i));
    }
    // Sessions 200..600 inserted by key, copies of session 0.
    let mut like_key = Vec::new();
    m.merged().keys_of(0, |_, k| like_key = k.to_vec());
    let (a0, b0, p0, q0) = session(0);
    let key_for = |i: u32| -> Vec<u32> {
        let (a, b, p, q) = session(i);
        like_key
            .iter()
            .map(|&w| match w {
                w if w == a0 => a,
                w if w == b0 => b,
                w if w == p0 as u32 => p as u32,
                w if w == q0 as u32 => q as u32,
                w => w,
            })
            .collect()
    };
    for i in base..600 {
        m.insert_keyed(i, 0, &key_for(i)).unwrap();
        assert_eq!(
            c.insert_keyed(FilterId(0), &key_for(i), 0),
            Some(FilterId(i))
        );
    }
    // Every third removed, old and new.
    for i in (0..600).step_by(3) {
        m.remove(i).unwrap();
        c.remove(FilterId(i));
    }
    c.publish();
    assert_eq!(m.instructions(), &insns[..], "no reload");
    let r = c.reader();
    let mut want = vec![0u64; 1000];
    for i in 0..650 {
        let (a, b, p, q) = session(i);
        for f in [tcp_frame(a, b, p, q), tcp_frame(b, a, q, p)] {
            let ids = r.classify(&f, 60);
            let got = m.run(&f, 60).unwrap();
            assert_eq!(got != 0, !ids.is_empty(), "session {i}");
            for id in ids {
                want[id.0 as usize] += 1;
            }
        }
    }
    assert_eq!(m.counts().unwrap(), want);
    assert_eq!(want.iter().filter(|&&n| n == 1).count(), 400);
    drop(m);
    // The system's programs and maps as before (freed after an RCU grace
    // period: wait up to 10 s). Other processes may load their own
    // meanwhile, so ours are looked for, not counted.
    let t = std::time::Instant::now();
    loop {
        let (progs, maps) = sluice::ebpf::system_ids().unwrap();
        let new_progs = progs.iter().filter(|p| !progs0.contains(p)).count();
        let new_maps = maps.iter().filter(|p| !maps0.contains(p)).count();
        if new_progs == 0 && new_maps == 0 {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "{new_progs} programs and {new_maps} maps more than before"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn options_that_need_user_space_are_refused() {
    let dir = tmpdir("refused");
    let f = dir.join("filters.txt");
    std::fs::write(&f, "web\ttcp port 80\n").unwrap();
    // (With -i, --out-dir and --first-match take the chain as the rings'
    // pre-filter: tests/live.)
    for extra in [
        &["--verdicts"][..],
        &["--first-match", "--count"],
        &["--out-dir", "/nonexistent"],
    ] {
        let mut args = vec![
            "split",
            "--engine",
            "ebpf",
            "--filters",
            f.to_str().unwrap(),
        ];
        args.extend(["-r", "examples/sample.pcap"]);
        args.extend(extra);
        let out = sluice(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("--engine ebpf"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
