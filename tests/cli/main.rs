//! The `sluice` command as a user runs it: flags, outputs, exit codes, and
//! tcpdump's habits compared with Debian's tcpdump.

#[path = "../common/mod.rs"]
mod common;

mod basics;
mod full_disk;
mod interrupt;
mod readme;
mod rotate;
mod safety;
mod tcpdump;

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Run sluice with `input` on its standard input.
fn sluice_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sluice");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(input);
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// A file's bytes hashed (to see that a file did not change).
fn hash(path: &std::path::Path) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::fs::read(path).unwrap().hash(&mut h);
    h.finish()
}
