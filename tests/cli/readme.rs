//! The README runs as written: every command of its `sh` blocks runs
//! verbatim in a fresh copy of the repository holding only the files git
//! ships (`git ls-files`), with the `sluice` under test first on `PATH`
//! and a scratch `HOME`, and must succeed; what they write stays in the
//! copy's `out/`. Live commands run as root on a private network (one
//! namespace, a veth pair named `eth0`/`eth1` as the README names them);
//! without root they are skipped, saying so, unless
//! `SLUICE_LIVE_REQUIRED` is set.
//!
//! The commands that build from source are not run in the copy: each
//! would rebuild the workspace in release (3.5 minutes here) a second
//! time. [`BUILDS`] names each with where it does run; a README command
//! that is neither run here nor listed there fails the test.
//!
//! `SLUICE_README_BIN=/usr/bin/sluice` runs the same commands with an
//! installed `sluice` (the test command does, after installing the
//! Debian package).

use super::common::{fresh_dir, manifest, text};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// README commands that build or install from source, and where each
/// runs instead of here.
const BUILDS: &[(&str, &str)] = &[
    (
        "cargo run --release -- filter -r examples/sample.pcap 'tcp port 80'",
        "scripts/test.sh runs it as written after its release build",
    ),
    ("scripts/test.sh", "the run this test is part of"),
    (
        "cargo install --locked cargo-deb",
        "scripts/test.sh runs it as written",
    ),
    (
        "scripts/build-deb.sh",
        "scripts/test.sh runs it as written (a release build)",
    ),
    (
        "apt-get install -y ./target/debian/sluice_*.deb",
        "scripts/test.sh runs it as written as root, then this test against /usr/bin/sluice",
    ),
    (
        "cargo install --path . --locked",
        "a second release build; the test puts the sluice under test in ~/.cargo/bin instead",
    ),
    (
        "scripts/install-libpcap.sh --prefix ~/.cargo",
        "a release build of the library; the test puts the built one in ~/.cargo/lib/sluice instead",
    ),
    (
        "python3 -m venv out/venv && out/venv/bin/pip install -v './python[pandas,dask,http]'",
        "a release build of the module; scripts/test.sh builds its wheel with maturin and installs it into a fresh venv",
    ),
];

/// The commands of the README's `sh` blocks, continuation lines joined.
fn commands(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        match line.trim_end().strip_suffix('\\') {
            Some(head) => pending.push_str(head),
            None => {
                pending.push_str(line);
                out.push(std::mem::take(&mut pending).trim().to_string());
            }
        }
    }
    out
}

/// Without its `# comment`.
fn bare(cmd: &str) -> &str {
    cmd.split("  #").next().unwrap_or(cmd).trim()
}

/// Whether a command captures or sends on an interface.
fn live(cmd: &str) -> bool {
    cmd.contains(" -i ") || cmd.starts_with("sluice list-interfaces")
}

/// The `sluice` under test: `SLUICE_README_BIN`, else this build's.
fn sluice_bin() -> PathBuf {
    std::env::var_os("SLUICE_README_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sluice")))
}

/// A copy of the files git ships (as they are in the work tree).
fn fresh_copy(dir: &Path) -> PathBuf {
    let copy = dir.join("repo");
    let o = Command::new("git")
        .args(["-C", manifest("").to_str().unwrap(), "ls-files", "-z"])
        .output()
        .expect("git ls-files");
    assert!(o.status.success(), "{}", text(&o.stderr));
    for f in o.stdout.split(|b| *b == 0).filter(|f| !f.is_empty()) {
        let rel = std::str::from_utf8(f).unwrap();
        let from = manifest(rel);
        if !from.is_file() {
            continue; // deleted in the work tree
        }
        let to = copy.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&from, &to).unwrap();
    }
    copy
}

/// A scratch home where `cargo install` and `install-libpcap.sh --prefix
/// ~/.cargo` would have put sluice and its libpcap.
fn home_with_cargo_install(dir: &Path, sluice: &Path) -> PathBuf {
    let home = dir.join("home");
    let bin = home.join(".cargo/bin");
    let lib = home.join(".cargo/lib/sluice");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(sluice, bin.join("sluice")).unwrap();
    let o = Command::new(sluice)
        .args(["exec", "--print-dir"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let found = PathBuf::from(text(&o.stdout).trim()).join("libpcap.so.0.8");
    std::fs::copy(&found, lib.join("libpcap.so.0.8")).unwrap();
    std::os::unix::fs::symlink("libpcap.so.0.8", lib.join("libpcap.so.1")).unwrap();
    home
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0")
}

/// Everything under `dir`, relative, but `out/`.
fn files(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, at: &Path, into: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(at).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if rel.starts_with("out") {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, into);
            } else {
                into.push(rel);
            }
        }
    }
    let mut v = Vec::new();
    walk(dir, dir, &mut v);
    v.sort();
    v
}

/// A namespace with a veth pair `eth0`/`eth1`, deleted on drop.
struct Ns(String);

impl Ns {
    fn new() -> Result<Ns, String> {
        let name = format!("slreadme{}", std::process::id());
        let ns = Ns(name.clone());
        let steps: &[&[&str]] = &[
            &["netns", "add", &name],
            &[
                "-n", &name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
            ],
            &["-n", &name, "link", "set", "lo", "up"],
            &["-n", &name, "link", "set", "eth0", "up"],
            &["-n", &name, "link", "set", "eth1", "up"],
        ];
        for args in steps {
            let o = Command::new("ip")
                .args(*args)
                .output()
                .map_err(|e| format!("ip: {e}"))?;
            if !o.status.success() {
                return Err(format!("ip {}: {}", args.join(" "), text(&o.stderr)));
            }
        }
        Ok(ns)
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).output();
    }
}

/// `sh -c cmd` in `dir` with `env`, in namespace `ns` when given.
fn shell(cmd: &str, dir: &Path, env: &[(String, String)], ns: Option<&Ns>) -> Command {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", &ns.0, "sh", "-c", cmd]);
            c
        }
        None => {
            let mut c = Command::new("sh");
            c.args(["-c", cmd]);
            c
        }
    };
    c.current_dir(dir).envs(env.iter().cloned());
    c
}

/// Run the live commands on the private network: captures until SIGINT,
/// with the sample sent to them meanwhile; the rest to their end.
fn run_live(cmds: &[&String], copy: &Path, env: &[(String, String)]) {
    let ns = match Ns::new() {
        Ok(ns) => ns,
        Err(e) => {
            assert!(
                std::env::var_os("SLUICE_LIVE_REQUIRED").is_none(),
                "cannot make the README's network: {e}"
            );
            eprintln!("SKIPPED the README's live commands: {e}");
            return;
        }
    };
    let send = "sluice replay -i eth1 -r examples/sample.pcap --topspeed";
    for cmd in cmds {
        let runs_until_interrupted =
            cmd.starts_with("sluice filter") || cmd.starts_with("sluice split");
        if !runs_until_interrupted {
            let o = shell(cmd, copy, env, Some(&ns)).output().unwrap();
            assert!(o.status.success(), "{cmd}: {}", text(&o.stderr));
            continue;
        }
        // `exec`: Ctrl-C reaches sluice, not a shell waiting for it.
        let mut child = shell(&format!("exec {cmd}"), copy, env, Some(&ns))
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The capture is up once sluice says it listens; then traffic.
        let mut err = child.stderr.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut all);
            all
        });
        std::thread::sleep(Duration::from_millis(1500));
        for _ in 0..3 {
            let o = shell(send, copy, env, Some(&ns)).output().unwrap();
            assert!(o.status.success(), "{send}: {}", text(&o.stderr));
        }
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill")
            .args(["-INT", "--", &format!("-{}", child.id())])
            .status();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                panic!("{cmd}: still running 30 s after SIGINT");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let err = reader.join().unwrap();
        assert!(status.success(), "{cmd}: {status}: {err}");
        assert!(err.contains("packets captured"), "{cmd}: {err}");
    }
}

#[test]
fn readme_commands_run_as_written() {
    let readme = std::fs::read_to_string(manifest("README.md")).unwrap();
    let all = commands(&readme);
    let dir = fresh_dir("readme");
    let copy = fresh_copy(&dir);
    let sluice = sluice_bin();
    let home = home_with_cargo_install(&dir, &sluice);
    let path = format!(
        "{}:{}:{}",
        sluice.parent().unwrap().display(),
        home.join(".cargo/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env: Vec<(String, String)> = [
        ("PATH", path),
        ("HOME", home.display().to_string()),
        ("MANPAGER", "cat".into()),
        ("PAGER", "cat".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let before = files(&copy);
    let root = is_root();
    let mut ran = 0;
    let mut lives = Vec::new();
    for cmd in &all {
        if let Some((_, why)) = BUILDS.iter().find(|(b, _)| *b == bare(cmd)) {
            eprintln!("not run here: {cmd} ({why})");
            continue;
        }
        if live(cmd) {
            lives.push(cmd);
            continue;
        }
        if cmd.starts_with("su -c") && !root {
            eprintln!("SKIPPED {cmd}: needs root");
            continue;
        }
        let o = shell(cmd, &copy, &env, None).output().unwrap();
        assert!(
            o.status.success(),
            "{cmd}\nstatus {:?}\n{}",
            o.status,
            text(&o.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 30, "{ran} commands run");
    assert!(lives.len() >= 5, "{lives:?}");
    // Every listed build command is still in the README.
    for (b, _) in BUILDS {
        assert!(all.iter().any(|c| bare(c) == *b), "not in the README: {b}");
    }
    if root || std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
        run_live(&lives, &copy, &env);
    } else {
        eprintln!("SKIPPED the README's live commands: they need root");
    }
    // What the commands wrote is where they said, and only there.
    for f in [
        "out/web.pcap",
        "out/split/web.pcap",
        "out/flows/flow1.pcap",
        "out/exec.pcap",
    ] {
        assert!(copy.join(f).exists(), "{f}");
    }
    assert_eq!(files(&copy), before, "files written outside out/");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn completions_and_man_page() {
    let sluice = env!("CARGO_BIN_EXE_sluice");
    for shell in ["bash", "zsh", "fish"] {
        let o = Command::new(sluice)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(o.status.success(), "{shell}");
        let t = text(&o.stdout);
        assert!(t.contains("time-stamp-precision"), "{shell}");
    }
    let bash = Command::new(sluice)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let script = fresh_dir("completions").join("sluice.bash");
    std::fs::write(&script, &bash.stdout).unwrap();
    if let Ok(o) = Command::new("bash").arg("-n").arg(&script).output() {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    for page in [&["man"][..], &["man", "filter"]] {
        let o = Command::new(sluice).args(page).output().unwrap();
        let t = text(&o.stdout);
        assert!(t.contains(".TH sluice"), "{page:?}");
        assert!(t.contains(".SH NAME"), "{page:?}");
    }
    let o = Command::new(sluice)
        .args(["man", "nosuch"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}
