//! A private network for live tests: two network namespaces joined by a
//! veth pair (IPv6 off, so nothing crosses it but what a test sends), and
//! programs run inside them in the background.
//!
//! Tests need root (CAP_NET_ADMIN and CAP_NET_RAW). Without it they say so
//! and skip, unless `SLUICE_LIVE_REQUIRED` is set (the test script sets it
//! when it runs as root), where a missing privilege fails the test.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The two ends of a veth pair, each in a namespace of its own.
pub struct Net {
    /// The sending namespace (interface `va`, 10.231.0.1).
    pub a: String,
    /// The capturing namespace (interface `vb`, 10.231.0.2).
    pub b: String,
    /// A scratch directory for this network's files.
    pub dir: PathBuf,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

impl Net {
    /// A fresh network, or `None` (after saying why) where namespaces
    /// cannot be made here.
    pub fn new(test: &str) -> Option<Net> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("sl{}-{n}", std::process::id());
        let net = Net {
            a: format!("{tag}a"),
            b: format!("{tag}b"),
            dir: std::env::temp_dir().join(format!("sluice-live-{tag}-{test}")),
        };
        match net.build() {
            Ok(()) => {
                let _ = std::fs::remove_dir_all(&net.dir);
                std::fs::create_dir_all(&net.dir).unwrap();
                Some(net)
            }
            Err(e) => {
                if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
                    panic!("{test}: cannot make a test network: {e}");
                }
                eprintln!("SKIPPED {test}: live tests need root to make network namespaces ({e})");
                None
            }
        }
    }

    fn build(&self) -> Result<(), String> {
        ip(&["netns", "add", &self.a])?;
        ip(&["netns", "add", &self.b])?;
        ip(&[
            "link", "add", "va", "netns", &self.a, "type", "veth", "peer", "name", "vb", "netns",
            &self.b,
        ])?;
        for (ns, dev, addr) in [
            (&self.a, "va", "10.231.0.1/24"),
            (&self.b, "vb", "10.231.0.2/24"),
        ] {
            for key in ["all", "default", dev] {
                let path = format!("net.ipv6.conf.{key}.disable_ipv6=1");
                let o = Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw", &path])
                    .output()
                    .map_err(|e| e.to_string())?;
                if !o.status.success() {
                    return Err(format!("sysctl {path} failed"));
                }
            }
            ip(&["-n", ns, "link", "set", dev, "mtu", "9000"])?;
            ip(&["-n", ns, "addr", "add", addr, "dev", dev])?;
            ip(&["-n", ns, "link", "set", dev, "up"])?;
        }
        // Both ends report carrier once the pair is up.
        let start = Instant::now();
        for (ns, dev) in [(&self.a, "va"), (&self.b, "vb")] {
            loop {
                let o = Command::new("ip")
                    .args(["-n", ns, "link", "show", "dev", dev])
                    .output()
                    .map_err(|e| e.to_string())?;
                if String::from_utf8_lossy(&o.stdout).contains("state UP") {
                    break;
                }
                if start.elapsed() > Duration::from_secs(10) {
                    return Err(format!("{dev} not up after 10 s"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// A command run inside namespace `ns`.
    pub fn cmd(&self, ns: &str, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]).args(args);
        c
    }

    /// `sluice ARGS` in the capturing namespace.
    pub fn sluice(&self, args: &[&str]) -> Command {
        self.cmd(&self.b, env!("CARGO_BIN_EXE_sluice"), args)
    }

    /// `sluice replay -i va -r CAPTURE EXTRA...` in the sending namespace.
    pub fn sender(&self, capture: &Path, extra: &[&str]) -> Command {
        let mut args = vec!["replay", "-i", "va", "-r", capture.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.cmd(&self.a, env!("CARGO_BIN_EXE_sluice"), &args)
    }

    /// Send a capture's frames from the sending namespace as fast as the
    /// kernel takes them; returns how many were sent.
    pub fn replay(&self, capture: &Path) -> u64 {
        let o = self
            .sender(capture, &["--topspeed", "--json"])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "replay: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["sent"].as_u64().unwrap()
    }

    /// A file in this network's scratch directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // The veth pair goes with its namespaces.
        let _ = ip(&["netns", "del", &self.a]);
        let _ = ip(&["netns", "del", &self.b]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A program running in the background, its output collected.
pub struct Bg {
    child: Child,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

fn collect(
    mut r: impl Read + Send + 'static,
    into: Arc<Mutex<Vec<u8>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = r.read(&mut buf) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&buf[..n]);
        }
    })
}

impl Bg {
    /// Start `cmd` with its outputs collected.
    pub fn start(mut cmd: Command) -> Bg {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start a program");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let threads = vec![
            collect(child.stdout.take().unwrap(), stdout.clone()),
            collect(child.stderr.take().unwrap(), stderr.clone()),
        ];
        Bg {
            child,
            stdout,
            stderr,
            threads,
        }
    }

    /// What it printed on standard error so far.
    pub fn stderr_now(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// Wait until it says it is listening (sluice and tcpdump both do).
    pub fn listening(&mut self) {
        let start = Instant::now();
        while !self.stderr_now().contains("listening on") {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("exited ({status}) before listening: {}", self.stderr_now());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "not listening after 20 s: {}",
                self.stderr_now()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Send a signal (`USR1`, `INT`...).
    pub fn signal(&self, name: &str) {
        let _ = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status();
    }

    /// Wait until standard error holds `what` (at most 10 s).
    pub fn said(&self, what: &str) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if self.stderr_now().contains(what) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Send SIGINT, then wait for it to end.
    pub fn interrupt(self) -> Output {
        self.signal("INT");
        self.wait()
    }

    /// Wait for it to end by itself (killed after 30 s).
    pub fn wait(mut self) -> Output {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = self.child.kill();
                panic!("still running after 30 s: {}", self.stderr_now());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        Output {
            status,
            stdout: std::mem::take(&mut self.stdout.lock().unwrap()),
            stderr: std::mem::take(&mut self.stderr.lock().unwrap()),
        }
    }
}

/// The frames of a capture file: bytes and length on the wire.
pub fn frames(path: &Path) -> Vec<(Vec<u8>, u32)> {
    let mut r = sluice::capture::CaptureReader::open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.data.to_vec(), p.wirelen));
    }
    out
}

/// The timestamps of a capture file, in nanoseconds.
pub fn stamps(path: &Path) -> Vec<i128> {
    let mut r = sluice::capture::CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push(i128::from(p.ts_sec) * 1_000_000_000 + i128::from(p.ts_nsec));
    }
    out
}

/// What libpcap (Debian's tcpdump) accepts of a capture file with `expr`.
pub fn libpcap_filter(capture: &Path, expr: &str, out: &Path) -> Vec<(Vec<u8>, u32)> {
    let o = Command::new("tcpdump")
        .args([
            "-r",
            capture.to_str().unwrap(),
            "-w",
            out.to_str().unwrap(),
            expr,
        ])
        .output()
        .expect("run tcpdump");
    assert!(
        o.status.success(),
        "tcpdump -r {} '{expr}': {}",
        capture.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    frames(out)
}
