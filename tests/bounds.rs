//! Bad input never takes sluice down or past its policy (issue 36): the
//! flow policy as an unprivileged user against traversal, `.`, `//`,
//! symlinks, capital letters and `@FILE`; errors that quote nothing of a
//! file; sizes and files past their bounds refused under a memory limit
//! (`ulimit -v`, setrlimit in the child) instead of aborting; pcapng
//! section headers read as Debian's tcpdump reads them.

mod common;
use common::{fresh_dir, s, sample, sluice, text};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// An unprivileged user the tests run sluice as (`nobody`).
const NOBODY: &str = "65534";

fn is_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

/// Wait for a child at most `limit`, killing it past that (a test that
/// would hang on a FIFO fails instead).
fn finish(mut child: std::process::Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?} (it opened a file it should not have)");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// sluice run as `nobody` (setpriv), from `dir`.
fn as_nobody(dir: &Path, args: &[&str]) -> Output {
    let child = Command::new("setpriv")
        .args([
            "--reuid",
            NOBODY,
            "--regid",
            NOBODY,
            "--clear-groups",
            env!("CARGO_BIN_EXE_sluice"),
        ])
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("setpriv (util-linux)");
    finish(child, Duration::from_secs(60), &args.join(" "))
}

/// sluice under a memory limit of `mib` MiB of address space.
fn limited(mib: u64, args: &[&str]) -> Output {
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", mib * 1024))
        .arg(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    finish(child, Duration::from_secs(120), &args.join(" "))
}

/// A tree every user can read: data/ (allowed), data/private and
/// data/Private (denied), outside/, filters/ (readable with @FILE), a
/// secret, a FIFO (opening it would block) and symlinks into and out of
/// data/.
struct Tree {
    root: PathBuf,
    policy: PathBuf,
}

const SECRET: &str = "admin:$6$Xq7ZpL0w$SecretHash:19000:0:99999:7:::\n";
const SECRET_WORDS: [&str; 4] = ["Xq7ZpL0w", "SecretHash", "admin", "99999"];

fn tree(test: &str) -> Tree {
    let root = fresh_dir(test);
    for d in ["data/private", "data/Private", "outside", "filters"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    for f in [
        "data/ok.pcap",
        "data/private/x.pcap",
        "data/Private/x.pcap",
        "outside/x.pcap",
    ] {
        std::fs::copy(sample(), root.join(f)).unwrap();
    }
    std::fs::write(root.join("outside/secret"), SECRET).unwrap();
    std::fs::write(root.join("filters/secret"), SECRET).unwrap();
    std::fs::write(root.join("filters/tcp.txt"), "tcp # web\n").unwrap();
    std::os::unix::fs::symlink(root.join("data/private/x.pcap"), root.join("data/in.pcap"))
        .unwrap();
    std::os::unix::fs::symlink(root.join("outside/x.pcap"), root.join("data/out.pcap")).unwrap();
    std::os::unix::fs::symlink(root.join("outside"), root.join("filters/up")).unwrap();
    for fifo in [root.join("fifo"), root.join("data/live.fifo")] {
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
    }
    let r = s(&root);
    let policy = root.join("policy");
    std::fs::write(
        &policy,
        format!(
            "deny source=file:{r}/data/private\n\
             deny source=file:{r}/data/Private\n\
             allow source=file:{r}/data/ class=bpf,packetcount\n\
             allow read={r}/filters\n"
        ),
    )
    .unwrap();
    // Readable (and the directories searchable) by everyone.
    for entry in walk(&root) {
        let m = std::fs::symlink_metadata(&entry).unwrap();
        if m.file_type().is_symlink() {
            continue;
        }
        let mode = if m.is_dir() { 0o755 } else { 0o644 };
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let mut up = root.clone();
    while let Some(p) = up.parent() {
        up = p.to_path_buf();
        let m = std::fs::metadata(&up).unwrap();
        assert!(
            m.permissions().mode() & 0o001 != 0,
            "{} is not searchable by others",
            up.display()
        );
    }
    Tree { root, policy }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn no_secret(o: &Output, what: &str) {
    let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
    for w in SECRET_WORDS {
        assert!(
            !all.contains(w),
            "{what}: the output quotes the file ({w}):\n{all}"
        );
    }
}

#[test]
fn the_policy_holds_for_an_unprivileged_user() {
    if !is_root() {
        eprintln!(
            "skipped: the policy test runs sluice as another user with setpriv, which needs root"
        );
        return;
    }
    let t = tree("policy");
    let r = s(&t.root);
    let pol = s(&t.policy);
    let data = t.root.join("data");
    let refused = |spec: &str, rule: Option<usize>, what: &str| {
        let o = as_nobody(&data, &["flow", "--policy", pol, spec]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {spec}: {err}");
        match rule {
            Some(line) => assert!(
                err.contains(&format!("refused by {pol}:{line}:")),
                "{what}: {err}"
            ),
            None => assert!(
                err.contains("refused: ") && err.contains("no rule allows"),
                "{what}: {err}"
            ),
        }
        no_secret(&o, what);
    };
    let count = format!("(file,{r}/data/ok.pcap) -> (packetcount)");
    let o = as_nobody(&data, &["flow", "--json", "--policy", pol, &count]);
    assert!(o.status.success(), "allowed: {}", text(&o.stderr));

    // Traversal out of data/, relative and absolute.
    refused(
        "(file,../outside/x.pcap) -> (packetcount)",
        None,
        "traversal",
    );
    refused(
        &format!("(file,{r}/data/../outside/x.pcap) -> (packetcount)"),
        None,
        "traversal",
    );
    refused(
        &format!("(file,{r}/data/../outside/secret) -> (packetcount)"),
        None,
        "traversal to a non-capture",
    );
    // `.`, `//` and a symlink into the denied directory meet the deny rule.
    refused(
        &format!("(file,{r}/data/./private/x.pcap) -> (packetcount)"),
        Some(1),
        "dot",
    );
    refused(
        &format!("(file,{r}/data//private/x.pcap) -> (packetcount)"),
        Some(1),
        "double slash",
    );
    refused("(file,in.pcap) -> (packetcount)", Some(1), "symlink in");
    refused("(file,out.pcap) -> (packetcount)", None, "symlink out");
    // A deny rule with capital letters matches the path as written.
    refused(
        &format!("(file,{r}/data/Private/x.pcap) -> (packetcount)"),
        Some(2),
        "case",
    );
    // @FILE outside read=: refused before it is opened (a FIFO would
    // block), also through `..` and a symlink under filters/.
    let fifo = format!("{r}/fifo");
    refused(&format!("(file,ok.pcap) -> (BPF,@{fifo})"), None, "@FILE");
    refused(
        &format!("(file,ok.pcap) -> (BPF,\"@{r}/filters/../outside/secret\")"),
        None,
        "@FILE traversal",
    );
    refused(
        &format!("(file,ok.pcap) -> (BPF,@{r}/filters/up/secret)"),
        None,
        "@FILE symlink",
    );
    // A class the policy does not allow is refused before its file is
    // read (the issue's `(DPF,"@secret")`).
    refused(
        &format!("(file,ok.pcap) -> (DPF,\"@{fifo}\")"),
        None,
        "class first",
    );
    // A later flow's refusal comes before an earlier, allowed one opens
    // anything (its source is a FIFO: opening it would block).
    let o = as_nobody(
        &data,
        &[
            "flow",
            "--policy",
            pol,
            "(file,live.fifo) -> (packetcount)",
            "(file,../outside/x.pcap)",
        ],
    );
    assert!(
        text(&o.stderr).contains("flow 2: refused"),
        "{}",
        text(&o.stderr)
    );

    // Allowed @FILE: read and used.
    let o = as_nobody(
        &data,
        &[
            "flow",
            "--json",
            "--policy",
            pol,
            &format!("(file,ok.pcap) -> (BPF,@{r}/filters/tcp.txt) -> (packetcount)"),
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    // Allowed, but not a program: the error gives line and column only.
    let o = as_nobody(
        &data,
        &[
            "flow",
            "--policy",
            pol,
            &format!("(file,ok.pcap) -> (BPF,@{r}/filters/secret)"),
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("filters/secret: line 1, column "),
        "{}",
        text(&o.stderr)
    );
    no_secret(&o, "@FILE error");
}

#[test]
fn a_policy_others_can_write_is_warned_about() {
    let t = tree("policy-mode");
    std::fs::set_permissions(&t.policy, std::fs::Permissions::from_mode(0o666)).unwrap();
    let spec = format!("(file,{}/data/ok.pcap) -> (packetcount)", s(&t.root));
    let o = sluice(&["flow", "--policy", s(&t.policy), &spec]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("warning: policy file")
            && text(&o.stderr).contains("writable by everyone"),
        "{}",
        text(&o.stderr)
    );
    std::fs::set_permissions(&t.policy, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = sluice(&["flow", "--policy", s(&t.policy), &spec]);
    assert!(!text(&o.stderr).contains("warning"), "{}", text(&o.stderr));
}

#[test]
fn errors_quote_nothing_of_a_file() {
    let dir = fresh_dir("leaks");
    let secret = dir.join("shadow");
    std::fs::write(&secret, SECRET.repeat(300)).unwrap();
    let sec = s(&secret);
    let filters = dir.join("filters.txt");
    std::fs::write(
        &filters,
        format!("x\tbpf:@{sec}\ny\tpcap:@{sec}\nz\tdpf:@{sec}\n"),
    )
    .unwrap();
    let smp = sample();
    let cases: Vec<(&str, Vec<String>)> = vec![
        (
            "-F",
            vec!["filter".into(), "-d".into(), "-F".into(), sec.into()],
        ),
        (
            "bpf:@",
            vec!["filter".into(), "-d".into(), format!("bpf:@{sec}")],
        ),
        (
            "cspf:@",
            vec!["filter".into(), "-d".into(), format!("cspf:@{sec}")],
        ),
        (
            "--bpf-file",
            vec![
                "filter".into(),
                "-d".into(),
                "--bpf-file".into(),
                sec.into(),
            ],
        ),
        (
            "split --filters",
            vec![
                "split".into(),
                "-r".into(),
                smp.clone(),
                "--filters".into(),
                s(&filters).into(),
                "--count".into(),
            ],
        ),
        (
            "flow @FILE",
            vec!["flow".into(), format!("(file,{smp}) -> (BPF,@{sec})")],
        ),
        (
            "flow FPL @FILE",
            vec!["flow".into(), format!("(file,{smp}) -> (FPL-2,@{sec})")],
        ),
        (
            "flow source",
            vec!["flow".into(), format!("(file,{sec}) -> (packetcount)")],
        ),
        (
            "filter -r",
            vec![
                "filter".into(),
                "-r".into(),
                sec.into(),
                "--count".into(),
                "ip".into(),
            ],
        ),
    ];
    for (what, args) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = sluice(&args);
        assert_eq!(o.status.code(), Some(1), "{what}: {}", text(&o.stderr));
        no_secret(&o, what);
        let err = text(&o.stderr);
        // Short: a line, not the file (the old -F error was 40 KB).
        assert!(err.len() < 1000, "{what}: {} bytes of error", err.len());
        if !matches!(what, "flow source" | "filter -r") {
            assert!(err.contains("line 1, column "), "{what}: {err}");
        }
    }
    // A capture that is not one: neither its first bytes nor their value.
    let o = sluice(&["filter", "-r", sec, "--count", "ip"]);
    assert!(!text(&o.stderr).contains("0x"), "{}", text(&o.stderr));
}

#[test]
fn sizes_past_their_limits_are_refused_not_aborted() {
    let smp = sample();
    let spec = format!("(file,{smp}) -> (packetcount)");
    for (args, limit) in [
        (vec!["flow", "--slots", "1000000", &spec], "4 GiB"),
        (vec!["flow", "--slot-bytes", "4294967295", &spec], "262144"),
        (
            vec!["flow", "--slots", "100000000", "--slot-bytes", "1", &spec],
            "16777216",
        ),
    ] {
        // Before: "memory allocation of 65568000000 bytes failed", SIGABRT.
        let o = limited(2048, &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("limit") && err.contains(limit),
            "{args:?}: {err}"
        );
    }
    // Within the limits but past what the process may have: an error
    // from try_reserve, not an abort.
    let o = limited(
        512,
        &["flow", "--slots", "4096", "--slot-bytes", "262144", &spec],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("cannot allocate"),
        "{}",
        text(&o.stderr)
    );
    // Within both it runs.
    let o = limited(
        2048,
        &["flow", "--slots", "1024", "--slot-bytes", "262144", &spec],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
}

#[test]
fn endless_files_are_read_up_to_their_bound() {
    let smp = sample();
    let dir = fresh_dir("endless");
    let filters = dir.join("filters.txt");
    std::fs::write(&filters, "z\tpcap:@/dev/zero\n").unwrap();
    let cases: Vec<Vec<String>> = vec![
        vec![
            "filter".into(),
            "-d".into(),
            "-F".into(),
            "/dev/zero".into(),
        ],
        vec!["filter".into(), "-d".into(), "pcap:@/dev/zero".into()],
        vec![
            "filter".into(),
            "-d".into(),
            "--bpf-file".into(),
            "/dev/zero".into(),
        ],
        vec![
            "split".into(),
            "-r".into(),
            smp.clone(),
            "--filters".into(),
            "/dev/zero".into(),
            "--count".into(),
        ],
        vec![
            "split".into(),
            "-r".into(),
            smp.clone(),
            "--filters".into(),
            s(&filters).into(),
            "--count".into(),
        ],
        vec!["flow".into(), format!("(file,{smp}) -> (BPF,@/dev/zero)")],
        vec![
            "flow".into(),
            "--policy".into(),
            "/dev/zero".into(),
            format!("(file,{smp})"),
        ],
    ];
    for args in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Before: read until memory ran out ("out of memory", or 2-4 GB
        // without a limit).
        let o = limited(1024, &args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains("32 MiB"), "{args:?}: {err}");
    }
    // A filter file of 100,000 session filters (the live benchmark's
    // size, about 10 MB) is well inside the bound.
    let big = dir.join("sessions.txt");
    let mut text_ = String::new();
    for i in 0..100_000u32 {
        text_.push_str(&format!(
            "s{i}\ttcp and src host 10.{}.{}.{} and dst host 192.168.{}.{} and src port {} and dst port 80\n",
            (i >> 16) & 255,
            (i >> 8) & 255,
            i & 255,
            (i >> 8) & 255,
            i & 255,
            1024 + i % 60000
        ));
    }
    std::fs::write(&big, &text_).unwrap();
    assert!(text_.len() > 9_000_000);
    let o = sluice(&["split", "-r", &smp, "--filters", s(&big), "--count"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// pcapng files built block by block, read by Debian's tcpdump and by
/// sluice: the same number of packets (issue 36: sluice read 0 where
/// tcpdump read them all).
#[test]
fn pcapng_section_headers_as_tcpdump_reads_them() {
    if Command::new("tcpdump").arg("--version").output().is_err() {
        eprintln!("skipped: tcpdump is not installed (scripts/test.sh installs it)");
        return;
    }
    fn block(t: u32, body: &[u8], trailer: Option<u32>) -> Vec<u8> {
        let n = 12 + body.len() as u32;
        let mut v = t.to_le_bytes().to_vec();
        v.extend(n.to_le_bytes());
        v.extend(body);
        v.extend(trailer.unwrap_or(n).to_le_bytes());
        v
    }
    let shb = |major: u16, minor: u16, trailer: Option<u32>| {
        let mut b = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
        b.extend(major.to_le_bytes());
        b.extend(minor.to_le_bytes());
        b.extend((-1i64).to_le_bytes());
        block(0x0A0D_0D0A, &b, trailer)
    };
    let shb12 = block(0x0A0D_0D0A, &[], None);
    let idb = || {
        let mut b = 1u16.to_le_bytes().to_vec();
        b.extend([0, 0]);
        b.extend(65535u32.to_le_bytes());
        block(1, &b, None)
    };
    let packets = |from: u32, to: u32| {
        let mut v = Vec::new();
        for i in from..to {
            let mut b = 0u32.to_le_bytes().to_vec();
            b.extend(0u32.to_le_bytes());
            b.extend(i.to_le_bytes());
            b.extend(60u32.to_le_bytes());
            b.extend(60u32.to_le_bytes());
            b.extend([0u8; 60]);
            v.extend(block(6, &b, None));
        }
        v
    };
    let cat = |parts: &[&[u8]]| parts.concat();
    let (p1, p2) = (packets(0, 5), packets(5, 10));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "two sections",
            cat(&[&shb(1, 0, None), &idb(), &p1, &shb(1, 0, None), &idb(), &p2]),
        ),
        ("first trailer", cat(&[&shb(1, 0, Some(999)), &idb(), &p1])),
        (
            "later trailer",
            cat(&[
                &shb(1, 0, None),
                &idb(),
                &p1,
                &shb(1, 0, Some(999)),
                &idb(),
                &p2,
            ]),
        ),
        (
            "early 0.0",
            cat(&[&shb(1, 0, None), &shb(0, 0, None), &idb(), &p1]),
        ),
        (
            "early 2.0",
            cat(&[&shb(1, 0, None), &shb(2, 0, None), &idb(), &p1]),
        ),
        (
            "early 12 bytes",
            cat(&[&shb(1, 0, None), &shb12, &idb(), &p1]),
        ),
        (
            "early trailer",
            cat(&[&shb(1, 0, None), &shb(1, 0, Some(999)), &idb(), &p1]),
        ),
        (
            "later 0.0",
            cat(&[&shb(1, 0, None), &idb(), &p1, &shb(0, 0, None), &idb(), &p2]),
        ),
        (
            "later 2.0",
            cat(&[&shb(1, 0, None), &idb(), &p1, &shb(2, 0, None), &idb(), &p2]),
        ),
        (
            "later 1.1",
            cat(&[&shb(1, 0, None), &idb(), &p1, &shb(1, 1, None), &idb(), &p2]),
        ),
        (
            "later 12 bytes",
            cat(&[&shb(1, 0, None), &idb(), &p1, &shb12, &idb(), &p2]),
        ),
        ("first 1.1", cat(&[&shb(1, 1, None), &idb(), &p1])),
        ("first 12 bytes", cat(&[&shb12, &idb(), &p1])),
    ];
    let dir = fresh_dir("sections");
    for (what, bytes) in cases {
        let f = dir.join(format!("{}.pcapng", what.replace(' ', "-")));
        std::fs::write(&f, &bytes).unwrap();
        let theirs = Command::new("tcpdump")
            .args(["-nr", s(&f)])
            .output()
            .unwrap();
        let ours = sluice(&["filter", "-r", s(&f)]);
        let lines = |o: &Output| text(&o.stdout).lines().count();
        assert_eq!(
            lines(&ours),
            lines(&theirs),
            "{what}: {}",
            text(&ours.stderr)
        );
        // Where tcpdump reports an error, so does sluice.
        assert_eq!(
            ours.status.success(),
            !text(&theirs.stderr).contains("tcpdump: "),
            "{what}: tcpdump said {}, sluice {}",
            text(&theirs.stderr),
            text(&ours.stderr)
        );
    }
}
