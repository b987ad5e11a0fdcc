//! What the ABI test files share (each test file is its own crate and uses
//! what it needs, hence the `dead_code` allowance): where the candidate
//! library is, a directory that makes programs load it in place of the
//! system libpcap ([`abi_dir`]), running one program on both libraries
//! with a time limit, comparing outputs, and a bounded thread pool.
//!
//! Only the standard library is used, so the root crate's live tests can
//! include this file too (`#[path]`).
//!
//! The candidate is `SLUICE_ABI_LIB` if set (a path to a `.so`), else the
//! sluice build's `libpcap.so`: `target/<profile>/libpcap.so`, or
//! `target/<profile>/deps/libpcap.so` (where `cargo test` leaves it without
//! `cargo build`), the newer of the two. The baseline is the same program
//! with no `LD_LIBRARY_PATH`: Debian's libpcap.so.0.8.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Debian's libpcap, the baseline.
pub const SYSTEM_LIBPCAP: &str = "/usr/lib/x86_64-linux-gnu/libpcap.so.0.8";

/// The shared library under test.
pub fn candidate() -> PathBuf {
    if let Some(p) = std::env::var_os("SLUICE_ABI_LIB") {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "SLUICE_ABI_LIB={}: no such file", p.display());
        return p;
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    // target/<profile>/deps/<test>-<hash>
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test runs from target/<profile>/deps");
    let found: Vec<PathBuf> = [profile.join("libpcap.so"), profile.join("deps/libpcap.so")]
        .into_iter()
        .filter(|p| p.is_file())
        .collect();
    found
        .into_iter()
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
        .unwrap_or_else(|| {
            panic!(
                "no candidate library: neither {0}/libpcap.so nor {0}/deps/libpcap.so exists; \
                 build it (cargo build -p sluice-libpcap-abi) or set SLUICE_ABI_LIB",
                profile.display()
            )
        })
}

/// A fresh directory, made once per test process, holding the candidate as
/// `libpcap.so.0.8` (a copy, so a rebuild during the run changes nothing)
/// with `libpcap.so.1` and `libpcap.so` pointing at it: with
/// `LD_LIBRARY_PATH` set to it, Debian's programs load the candidate.
pub fn abi_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let lib = candidate();
        let dir = std::env::temp_dir().join(format!("sluice-abi-lib-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(&lib, dir.join("libpcap.so.0.8"))
            .unwrap_or_else(|e| panic!("copy {}: {e}", lib.display()));
        for alias in ["libpcap.so.1", "libpcap.so"] {
            std::os::unix::fs::symlink("libpcap.so.0.8", dir.join(alias)).unwrap();
        }
        eprintln!(
            "candidate libpcap: {} (in {})",
            lib.display(),
            dir.display()
        );
        dir
    })
}

/// Which libpcap a program runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lib {
    /// The library under test, through [`abi_dir`].
    Candidate,
    /// Debian's libpcap.
    System,
}

impl Lib {
    /// Both, candidate first.
    pub const BOTH: [Lib; 2] = [Lib::Candidate, Lib::System];

    /// A short name for file names and messages.
    pub fn tag(self) -> &'static str {
        match self {
            Lib::Candidate => "candidate",
            Lib::System => "system",
        }
    }

    /// Make `cmd` run on this library, in the C locale and UTC (tcpdump
    /// prints local times).
    pub fn apply(self, cmd: &mut Command) {
        cmd.env("LC_ALL", "C")
            .env("TZ", "UTC")
            .env_remove("LD_PRELOAD");
        match self {
            Lib::Candidate => cmd.env("LD_LIBRARY_PATH", abi_dir()),
            Lib::System => cmd.env_remove("LD_LIBRARY_PATH"),
        };
    }

    /// `program args...` on this library.
    pub fn command<S: AsRef<std::ffi::OsStr>>(self, program: &str, args: &[S]) -> Command {
        let mut c = Command::new(program);
        c.args(args);
        self.apply(&mut c);
        c
    }
}

/// What a finished (or stopped) program did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    /// `exit N`, `signal N` or `timed out`.
    pub status: String,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Ran {
    /// Standard output as text.
    pub fn out(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    /// Standard error as text.
    pub fn err(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
    /// Whether it exited with status 0.
    pub fn ok(&self) -> bool {
        self.status == "exit 0"
    }
}

fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// At most [`jobs`] programs run at once in one test process, whatever
/// the number of tests running side by side.
struct Slots {
    busy: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

/// A running program's slot, given back when dropped.
struct Slot(&'static Slots);

impl Slots {
    fn take(&'static self) -> Slot {
        let mut busy = self.busy.lock().unwrap();
        while *busy >= jobs() {
            busy = self.freed.wait(busy).unwrap();
        }
        *busy += 1;
        Slot(self)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *self.0.busy.lock().unwrap() -= 1;
        self.0.freed.notify_one();
    }
}

static SLOTS: Slots = Slots {
    busy: std::sync::Mutex::new(0),
    freed: std::sync::Condvar::new(),
};

/// Run `cmd` with `stdin` (a file, or nothing), killed after `limit`
/// (which counts from the start, not from the wait for a slot).
pub fn run(mut cmd: Command, stdin: Option<&Path>, limit: Duration) -> Ran {
    let _slot = SLOTS.take();
    let input = match stdin {
        Some(p) => {
            Stdio::from(std::fs::File::open(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        }
        None => Stdio::null(),
    };
    let mut child = cmd
        .stdin(input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd:?}: {e}"));
    let out = drain(child.stdout.take().unwrap());
    let err = drain(child.stderr.take().unwrap());
    let start = Instant::now();
    let mut timed_out = false;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    use std::os::unix::process::ExitStatusExt;
    let status = if timed_out {
        format!("timed out after {limit:?}")
    } else if let Some(c) = status.code() {
        format!("exit {c}")
    } else {
        format!("signal {}", status.signal().unwrap_or(0))
    };
    Ran {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Run the command `make` builds on the candidate, then on the system
/// libpcap: `(candidate, system)`.
pub fn both(make: impl Fn(Lib) -> Command, stdin: Option<&Path>, limit: Duration) -> (Ran, Ran) {
    (
        run(make(Lib::Candidate), stdin, limit),
        run(make(Lib::System), stdin, limit),
    )
}

/// The first line where `got` and `want` differ, with its number, or
/// `None` where they are equal.
pub fn first_difference(got: &[u8], want: &[u8]) -> Option<String> {
    if got == want {
        return None;
    }
    let g = String::from_utf8_lossy(got);
    let w = String::from_utf8_lossy(want);
    let mut gl = g.split_inclusive('\n');
    let mut wl = w.split_inclusive('\n');
    for n in 1.. {
        match (gl.next(), wl.next()) {
            (Some(a), Some(b)) if a == b => continue,
            (a, b) => {
                return Some(format!(
                    "line {n}:\n  candidate: {:?}\n  system:    {:?}",
                    a.unwrap_or("<end>"),
                    b.unwrap_or("<end>")
                ))
            }
        }
    }
    unreachable!()
}

/// Compare two runs: exit status, standard output, standard error. The
/// error says what differs first.
pub fn same_run(what: &str, cand: &Ran, sys: &Ran) -> Result<(), String> {
    if cand.status != sys.status {
        return Err(format!(
            "{what}: status {} on the candidate, {} on the system libpcap; candidate stderr: {}",
            cand.status,
            sys.status,
            cand.err().trim_end()
        ));
    }
    if let Some(d) = first_difference(&cand.stdout, &sys.stdout) {
        return Err(format!("{what}: stdout differs at {d}"));
    }
    if let Some(d) = first_difference(&cand.stderr, &sys.stderr) {
        return Err(format!("{what}: stderr differs at {d}"));
    }
    Ok(())
}

/// Two files must hold the same bytes.
pub fn same_file(what: &str, cand: &Path, sys: &Path) -> Result<(), String> {
    let a = std::fs::read(cand).map_err(|e| format!("{what}: {}: {e}", cand.display()))?;
    let b = std::fs::read(sys).map_err(|e| format!("{what}: {}: {e}", sys.display()))?;
    if a == b {
        return Ok(());
    }
    let at = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    Err(format!(
        "{what}: {} ({} bytes) and {} ({} bytes) differ from byte {at}",
        cand.display(),
        a.len(),
        sys.display(),
        b.len()
    ))
}

/// Panic listing `failures` (the first few in full) if there are any.
pub fn report(what: &str, total: usize, failures: &[String]) {
    if failures.is_empty() {
        eprintln!("{what}: {total} comparisons, all equal");
        return;
    }
    let shown: Vec<&str> = failures.iter().take(8).map(String::as_str).collect();
    panic!(
        "{what}: {} of {total} differ; the first:\n{}",
        failures.len(),
        shown.join("\n---\n")
    );
}

/// `f` over `items` on at most `threads` threads; results in order.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let results = std::sync::Mutex::new(&mut slots);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= items.len() {
                    break;
                }
                let r = f(&items[i]);
                results.lock().unwrap()[i] = Some(r);
            });
        }
    });
    slots.into_iter().map(|r| r.unwrap()).collect()
}

/// How many programs to run at once: 3, or `SLUICE_ABI_JOBS` (in all, per
/// test process; see [`run`]).
pub fn jobs() -> usize {
    std::env::var("SLUICE_ABI_JOBS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(3)
}

/// A fresh, empty scratch directory for one test.
pub fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-abi-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Say that `what` cannot run here and why; panic instead where
/// `SLUICE_ABI_REQUIRED` is set (the test script sets it: there every
/// tool is installed).
pub fn skip(what: &str, why: &str) {
    if std::env::var_os("SLUICE_ABI_REQUIRED").is_some() {
        panic!("{what}: {why} (SLUICE_ABI_REQUIRED is set)");
    }
    eprintln!("SKIPPED {what}: {why}");
}

/// Whether `program` can be run (found on PATH or as a path).
pub fn have(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// The libpcap `binary` loads on `lib`, as the dynamic loader resolves it
/// (`ldd`): the harness really swaps the library.
pub fn resolved_libpcap(lib: Lib, binary: &str) -> String {
    let o = lib.command("ldd", &[binary]).output().expect("run ldd");
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .find(|l| l.contains("libpcap.so"))
        .map(|l| l.trim().to_string())
        .unwrap_or_default()
}

/// Compile the C program `source` with `cc` against the system
/// `<pcap/pcap.h>`, linked with `-lpcap` (so it NEEDs libpcap.so.0.8);
/// `None`, after [`skip`], where libpcap-dev or `cc` is missing. A program
/// that does not compile (an ABI assertion failing) fails the test.
pub fn build_c(source: &Path) -> Option<PathBuf> {
    let header = "/usr/include/pcap/pcap.h";
    let name = source.file_stem().unwrap().to_str().unwrap();
    if !Path::new(header).is_file() {
        skip(
            name,
            &format!("{header} missing (apt-get install libpcap-dev)"),
        );
        return None;
    }
    let bin = scratch(&format!("build-{name}")).join(name);
    let o = Command::new("cc")
        .args([
            "-std=c11",
            "-D_DEFAULT_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-O1",
        ])
        .arg("-o")
        .arg(&bin)
        .arg(source)
        .arg("-lpcap")
        .output();
    match o {
        Err(e) => {
            skip(name, &format!("no C compiler (cc): {e}"));
            None
        }
        Ok(o) => {
            assert!(
                o.status.success(),
                "cc {} failed:\n{}",
                source.display(),
                String::from_utf8_lossy(&o.stderr)
            );
            Some(bin)
        }
    }
}
