//! Nothing sluice loads into the kernel outlives it: the system's BPF
//! programs and maps named `sluice…`, as Debian's bpftool lists them,
//! before and after runs of the command that load them: `--engine ebpf`
//! on a file, and a live capture with the eBPF socket filter and `--xdp`
//! (on the loopback interface of a namespace of its own, whose driver has
//! no XDP: it runs in the kernel's generic hook) that ends by Ctrl-C or by
//! SIGKILL. The count
//! while the capture runs must have gone up, so the test can fail. Alone
//! in its test binary, so that no other test loads programs meanwhile.
//!
//! Needs root and bpftool; where either is missing the test says SKIPPED,
//! unless `SLUICE_LIVE_REQUIRED` is set, when it fails.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Programs and maps in the whole system whose names start with `sluice`.
fn sluice_objects() -> usize {
    ["prog", "map"]
        .iter()
        .map(|what| {
            let o = Command::new("bpftool")
                .args(["-j", what, "show"])
                .output()
                .expect("bpftool");
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            v.as_array()
                .unwrap()
                .iter()
                .filter(|p| p["name"].as_str().is_some_and(|n| n.starts_with("sluice")))
                .count()
        })
        .sum()
}

/// Wait (up to 5 s: the kernel frees programs after an RCU grace period)
/// until the count is `want`; the count then.
fn settles_at(want: usize) -> usize {
    let start = Instant::now();
    loop {
        let n = sluice_objects();
        if n == want || start.elapsed() > Duration::from_secs(5) {
            return n;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The count once it has stopped falling: programs and maps of the test
/// binaries run before this one may still be on their way out (the kernel
/// frees them after a grace period).
fn settled() -> usize {
    let mut last = sluice_objects();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(300));
        let n = sluice_objects();
        if n == last {
            break;
        }
        last = n;
    }
    last
}

/// A child process killed when dropped (a failed assertion must not
/// leave a capture running with its programs attached).
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn skip(why: &str) -> bool {
    if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
        panic!("required, but {why}");
    }
    eprintln!("SKIPPED: {why}");
    true
}

/// A namespace with its loopback interface up, removed on drop.
struct Ns(String);

impl Ns {
    fn new() -> Option<Ns> {
        let name = format!("sluice-ebpfsys-{}", std::process::id());
        let ok = |args: &[&str]| {
            Command::new("ip")
                .args(args)
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&["netns", "add", &name]) {
            return None;
        }
        let ns = Ns(name);
        ok(&["-n", &ns.0, "link", "set", "lo", "up"]).then_some(ns)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn no_program_or_map_outlives_the_command() {
    if Command::new("bpftool").arg("version").output().is_err() && skip("bpftool is missing") {
        return;
    }
    let before = settled();
    let sluice = env!("CARGO_BIN_EXE_sluice");
    let o = Command::new(sluice)
        .args([
            "filter",
            "--engine",
            "ebpf",
            "--count",
            "-r",
            "examples/sample.pcap",
            "tcp",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    if !o.status.success() && err.contains("it needs root") && skip(&err) {
        return;
    }
    assert!(o.status.success(), "{err}");
    assert_eq!(settles_at(before), before, "after --engine ebpf on a file");
    let Some(ns) = Ns::new() else {
        skip("no network namespace (not root?)");
        return;
    };
    for signal in ["INT", "KILL"] {
        let mut child = Child(
            Command::new("ip")
                .args(["netns", "exec", &ns.0, sluice])
                .args(["filter", "-i", "lo", "--engine", "ebpf", "--xdp", "udp"])
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let said = Arc::new(Mutex::new(String::new()));
        let reader = {
            let said = said.clone();
            let err = child.0.stderr.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let mut s = said.lock().unwrap();
                    s.push_str(&line);
                    s.push('\n');
                }
            })
        };
        let start = Instant::now();
        while !said.lock().unwrap().contains("listening on") {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{}",
                said.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        // Loopback has no XDP in its driver: generic XDP.
        assert!(
            said.lock()
                .unwrap()
                .contains("XDP pre-filter on lo (generic"),
            "{}",
            said.lock().unwrap()
        );
        // The socket filter and the XDP program.
        assert!(sluice_objects() >= before + 2, "{}", said.lock().unwrap());
        let _ = Command::new("kill")
            .args([&format!("-{signal}"), &child.0.id().to_string()])
            .status();
        let status = child.0.wait().unwrap();
        reader.join().unwrap();
        assert_eq!(
            status.success(),
            signal == "INT",
            "{}",
            said.lock().unwrap()
        );
        assert_eq!(settles_at(before), before, "after SIG{signal}");
    }
}
