//! Helpers the command-line test files share (each test file is its own
//! crate and uses what it needs, hence the `dead_code` allowance).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Run the `sluice` command built for these tests.
pub fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

/// Command output as text.
pub fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// A path inside the repository.
pub fn manifest(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The small capture shipped in the repository.
pub fn sample() -> String {
    manifest("examples/sample.pcap")
        .to_string_lossy()
        .into_owned()
}

/// A fresh, empty directory for one test of this test binary.
pub fn fresh_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-test-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A file path in this test binary's own temporary directory.
pub fn tmp_file(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A path as `&str` (test paths are UTF-8).
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}
