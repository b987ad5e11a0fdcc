//! Interrupting a run keeps what it wrote: SIGINT, SIGTERM and SIGHUP at
//! random points of a 100 MB capture leave each output of `filter -w`,
//! `-C` rotation and `split --out-dir` a valid capture (Debian's tcpdump
//! reads it whole) equal to a prefix of what the uninterrupted run writes,
//! the run exits 0 as tcpdump does, and no temporary file remains. After
//! a SIGKILL the next run names what was left, and what was left is
//! readable up to its last complete packet.

use super::common::{fresh_dir, s, sample, sluice, text};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A capture of about 100 MB: the sample's packets over and over (made
/// once, and kept for the next run: it is the same every time).
fn big() -> PathBuf {
    static PATH: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let input = std::fs::read(sample()).unwrap();
        let body = &input[24..];
        let mut out = input[..24].to_vec();
        while out.len() < 100 << 20 {
            out.extend_from_slice(body);
        }
        let path = std::env::temp_dir().join("sluice-test-interrupt-input.pcap");
        if std::fs::read(&path).ok().as_deref() != Some(&out[..]) {
            let part = path.with_extension(format!("{}.part", std::process::id()));
            std::fs::write(&part, out).unwrap();
            std::fs::rename(&part, &path).unwrap();
        }
        path
    })
    .clone()
}

/// The records of a pcap file (header excluded), each whole; `None` if
/// the file is not a pcap file cut at a record boundary.
fn records(bytes: &[u8]) -> Option<Vec<&[u8]>> {
    if bytes.len() < 24 || bytes[..4] != [0xd4, 0xc3, 0xb2, 0xa1] {
        return None;
    }
    let mut at = 24;
    let mut v = Vec::new();
    while at < bytes.len() {
        let caplen = u32::from_le_bytes(bytes.get(at + 8..at + 12)?.try_into().ok()?) as usize;
        let end = at + 16 + caplen;
        v.push(bytes.get(at..end)?);
        at = end;
    }
    Some(v)
}

/// The records of several files, in order.
fn all_records(files: &[PathBuf]) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).unwrap();
        let r = records(&bytes).unwrap_or_else(|| panic!("{} is not whole", f.display()));
        v.extend(r.into_iter().map(<[u8]>::to_vec));
    }
    v
}

/// Debian's tcpdump reads the file to its end without complaint.
fn tcpdump_reads(path: &Path) {
    let o = Command::new("tcpdump")
        .args(["-r", s(path), "-w", "/dev/null"])
        .output()
        .expect("tcpdump (scripts/test.sh installs it)");
    assert!(
        o.status.success() && !text(&o.stderr).contains("truncated"),
        "{}: {}",
        path.display(),
        text(&o.stderr)
    );
}

/// Files of a directory whose names start with `prefix`, sorted by the
/// number after it (out, out1, out2…), and whether any temporary is there.
fn outputs(dir: &Path, prefix: &str) -> (Vec<PathBuf>, bool) {
    let mut files = Vec::new();
    let mut temps = false;
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".tmp") {
            temps = true;
        } else if let Some(n) = name.strip_prefix(prefix) {
            let k: u64 = if n.is_empty() { 0 } else { n.parse().unwrap() };
            files.push((k, dir.join(&name)));
        }
    }
    files.sort();
    (files.into_iter().map(|(_, p)| p).collect(), temps)
}

fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Wait until `child` catches SIGINT (its `SigCgt` in /proc), or up to
/// five seconds: a signal before then ends the process by default, which
/// says nothing of how a run stops (on a loaded machine the start alone
/// can take longer than the shortest delay).
fn takes_sigint(child: &Child) {
    let status = format!("/proc/{}/status", child.id());
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        let caught = std::fs::read_to_string(&status)
            .ok()
            .and_then(|t| {
                let hex = t
                    .lines()
                    .find_map(|l| l.strip_prefix("SigCgt:"))?
                    .trim()
                    .to_string();
                u64::from_str_radix(&hex, 16).ok()
            })
            .is_some_and(|mask| mask & (1 << (2 - 1)) != 0);
        if caught {
            return;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -{sig}");
}

/// Delays in milliseconds spread over a run of `ms`, from a fixed seed.
fn delays(ms: u64, n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            5 + (x >> 33) % (ms * 9 / 10).max(10)
        })
        .collect()
}

/// Run `args` to the end once (how long it takes), then interrupted at
/// random points with each of SIGINT, SIGTERM and SIGHUP: `check` is
/// given the output directory of each interrupted run and of the whole
/// run, and says whether the output was cut short (at least one must be,
/// or the test proves nothing).
fn interrupted(
    name: &str,
    args: impl Fn(&Path) -> Vec<String>,
    check: impl Fn(&Path, &Path) -> bool,
) {
    let mut cut = 0;
    let full = fresh_dir(&format!("{name}-full"));
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args(&full))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let ms = t.elapsed().as_millis() as u64;
    let sigs = ["INT", "TERM", "HUP", "INT", "TERM"];
    for (i, delay) in delays(ms, sigs.len(), 0x5eed ^ ms).into_iter().enumerate() {
        let dir = fresh_dir(&format!("{name}-{i}"));
        let child = start(&args(&dir).iter().map(String::as_str).collect::<Vec<_>>());
        takes_sigint(&child);
        std::thread::sleep(Duration::from_millis(delay));
        signal(&child, sigs[i]);
        let o = child.wait_with_output().unwrap();
        assert_eq!(
            o.status.code(),
            Some(0),
            "SIG{} after {delay} ms: {}",
            sigs[i],
            text(&o.stderr)
        );
        cut += usize::from(check(&dir, &full));
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&full);
    assert!(cut > 0, "no run was interrupted before its end");
}

#[test]
fn filter_w_keeps_a_prefix() {
    let input = big();
    interrupted(
        "filter",
        |dir| {
            let out = dir.join("out.pcap");
            vec![
                "filter".into(),
                "-r".into(),
                s(&input).into(),
                "-w".into(),
                s(&out).into(),
                "tcp".into(),
            ]
        },
        |dir, full| {
            let (files, temps) = outputs(dir, "out.pcap");
            assert!(!temps, "a temporary file remains in {}", dir.display());
            assert_eq!(files.len(), 1, "{files:?}");
            tcpdump_reads(&files[0]);
            let got = std::fs::read(&files[0]).unwrap();
            let want = std::fs::read(full.join("out.pcap")).unwrap();
            assert!(records(&got).is_some());
            assert_eq!(got[..], want[..got.len()], "not a prefix");
            got.len() < want.len()
        },
    );
}

#[test]
fn rotation_keeps_a_prefix() {
    let input = big();
    interrupted(
        "rotate",
        |dir| {
            let out = dir.join("out");
            vec![
                "filter".into(),
                "-r".into(),
                s(&input).into(),
                "-w".into(),
                s(&out).into(),
                "-C".into(),
                "7".into(),
                "udp or tcp".into(),
            ]
        },
        |dir, full| {
            let (files, temps) = outputs(dir, "out");
            assert!(!temps, "a temporary file remains in {}", dir.display());
            for f in &files {
                tcpdump_reads(f);
            }
            let got = all_records(&files);
            let want = all_records(&outputs(full, "out").0);
            assert!(!files.is_empty() && got.len() <= want.len());
            assert_eq!(got[..], want[..got.len()], "not a prefix");
            got.len() < want.len()
        },
    );
}

#[test]
fn split_keeps_a_prefix_of_every_output() {
    let input = big();
    let filters = fresh_dir("interrupt-filters").join("f.txt");
    std::fs::write(&filters, "web\ttcp port 80\nudp\tudp\narp\tarp\nall\t\n").unwrap();
    interrupted(
        "split",
        |dir| {
            vec![
                "split".into(),
                "-r".into(),
                s(&input).into(),
                "--filters".into(),
                s(&filters).into(),
                "--out-dir".into(),
                s(dir).into(),
            ]
        },
        |dir, full| {
            let mut cut = false;
            for name in ["web", "udp", "arp", "all"] {
                let (files, temps) = outputs(dir, &format!("{name}.pcap"));
                assert!(!temps, "a temporary file remains in {}", dir.display());
                assert_eq!(files.len(), 1, "{name}");
                tcpdump_reads(&files[0]);
                let got = std::fs::read(&files[0]).unwrap();
                let want = std::fs::read(full.join(format!("{name}.pcap"))).unwrap();
                assert_eq!(got[..], want[..got.len()], "{name}: not a prefix");
                cut |= got.len() < want.len();
            }
            cut
        },
    );
}

/// `filter -r - -w OUT tcp` fed the first `bytes` of `input` through a
/// pipe that then stays open (the run waits for more), 300 ms on.
fn fed(input: &Path, out: &Path, bytes: usize) -> (Child, std::process::ChildStdin) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["filter", "-r", "-", "-w", s(out), "tcp"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let head = std::fs::read(input).unwrap()[..bytes].to_vec();
    std::io::Write::write_all(&mut stdin, &head).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    (child, stdin)
}

#[test]
fn a_second_interrupt_ends_at_once_and_leaves_nothing() {
    let input = big();
    let dir = fresh_dir("twice");
    let out = dir.join("out.pcap");
    // A slow pipe keeps the run busy: -r - from a writer that waits.
    let (child, stdin) = fed(&input, &out, 1 << 20);
    // Blocked reading its input, it cannot stop by itself: the second
    // signal ends it.
    signal(&child, "INT");
    std::thread::sleep(Duration::from_millis(100));
    signal(&child, "INT");
    let o = child.wait_with_output().unwrap();
    drop(stdin);
    assert_eq!(o.status.code(), Some(130), "{}", text(&o.stderr));
    let (_, temps) = outputs(&dir, "out.pcap");
    assert!(!temps, "a temporary file remains");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn after_a_kill_the_next_run_names_what_was_left() {
    let input = big();
    let dir = fresh_dir("killed");
    let out = dir.join("out.pcap");
    // Fed from a pipe, the run is still going when it is killed: 4 MB
    // in, about half of it accepted, much of that flushed to the file.
    let (child, stdin) = fed(&input, &out, 4 << 20);
    signal(&child, "KILL");
    let _ = child.wait_with_output();
    drop(stdin);
    let left: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| s(p).ends_with(".tmp"))
        .collect();
    assert_eq!(left.len(), 1, "one temporary is left by SIGKILL");
    // What it holds reads up to its last complete packet, and is what
    // an uninterrupted run writes first.
    let bytes = std::fs::read(&left[0]).unwrap();
    let o = Command::new("tcpdump")
        .args(["-n", "-r", s(&left[0])])
        .output()
        .unwrap();
    assert!(
        text(&o.stdout).lines().count() > 1000,
        "{}",
        text(&o.stderr)
    );
    let full = dir.join("full.pcap");
    let o = sluice(&["filter", "-r", s(&input), "-w", s(&full), "tcp"]);
    assert!(o.status.success());
    let want = std::fs::read(&full).unwrap();
    assert_eq!(bytes[..], want[..bytes.len()]);
    // The next run names it, and finishes as usual.
    let o = sluice(&["filter", "-r", &sample(), "-w", s(&out), "tcp"]);
    assert!(o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains(s(&left[0])) && err.contains("interrupted run"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
