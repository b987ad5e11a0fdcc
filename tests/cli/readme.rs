//! The README's commands run as written: every `sluice` command in a
//! fenced `sh` block that names a file shipped in `examples/` is run from
//! a scratch directory that sees the repository's `examples/` (so what they
//! write stays out of the work tree), with the built `sluice` first on
//! `PATH`, and must succeed.

use super::common::{fresh_dir, manifest, text};
use std::process::Command;

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

/// Whether the test runs this command: sluice, naming a shipped file
/// (`sluice bench` measures for seconds and is left to its own tests).
fn runs(cmd: &str) -> bool {
    cmd.starts_with("sluice ") && cmd.contains("examples/") && !cmd.starts_with("sluice bench")
}

#[test]
fn readme_commands_run_as_written() {
    let readme = std::fs::read_to_string(manifest("README.md")).unwrap();
    let all = commands(&readme);
    let chosen: Vec<&String> = all.iter().filter(|c| runs(c)).collect();
    assert!(chosen.len() >= 15, "{chosen:#?}");
    let dir = fresh_dir("readme");
    std::os::unix::fs::symlink(manifest("examples"), dir.join("examples")).unwrap();
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_sluice"))
        .parent()
        .unwrap()
        .to_path_buf();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // Commands that need a file an earlier command writes run in order.
    for cmd in all.iter().filter(|c| c.starts_with("sluice ")) {
        let needed = runs(cmd) || cmd.contains("> prog.txt");
        if !needed {
            continue;
        }
        let o = Command::new("sh")
            .args(["-c", cmd])
            .current_dir(&dir)
            .env("PATH", &path)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{cmd}\nstatus {:?}\n{}",
            o.status,
            text(&o.stderr)
        );
    }
    // What the commands wrote is where they said.
    for f in ["web.pcap", "arp.pcap", "out/web.pcap", "out/flow1.pcap"] {
        assert!(dir.join(f).exists(), "{f}");
    }
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
