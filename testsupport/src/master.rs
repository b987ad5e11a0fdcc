//! libpcap master, the reference for what an expression means: built once
//! from the source in `../shared/reference` (its script stamps the build)
//! into `target/libpcap-master`, and loaded at run time through
//! `sluice-libpcap`.
//!
//! Tests that compare with master skip with a message where it cannot be
//! built (no shared folder, no cmake), unless `SLUICE_MASTER_REQUIRED` is
//! set: `scripts/test.sh` sets it, so in CI such a test fails instead of
//! passing without comparing anything.
//!
//! ```no_run
//! if let Some(master) = sluice_testsupport::master::load("this example") {
//!     assert!(master.version().contains("libpcap"));
//! }
//! ```

use sluice_libpcap::Libpcap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The repository's root (the workspace).
const WORKSPACE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

/// The build script beside the source tarball.
fn script() -> PathBuf {
    Path::new(WORKSPACE).join("../shared/reference/build-libpcap-master.sh")
}

/// Where master is installed: `$CARGO_TARGET_DIR/libpcap-master` (relative
/// to the workspace when relative), else `target/libpcap-master`.
///
/// ```
/// assert!(sluice_testsupport::master::prefix().ends_with("libpcap-master"));
/// ```
pub fn prefix() -> PathBuf {
    let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|t| !t.is_empty()) {
        Some(t) => Path::new(WORKSPACE).join(t),
        None => Path::new(WORKSPACE).join("target"),
    };
    target.join("libpcap-master")
}

/// Whether a missing master fails the test (`SLUICE_MASTER_REQUIRED`).
///
/// ```
/// // The variable's presence counts, not its value.
/// let set = std::env::var_os("SLUICE_MASTER_REQUIRED").is_some();
/// assert_eq!(sluice_testsupport::master::required(), set);
/// ```
pub fn required() -> bool {
    std::env::var_os("SLUICE_MASTER_REQUIRED").is_some()
}

/// Builds master once per process (the script itself does nothing when its
/// stamp is there); the shared library's path, or why not.
fn build() -> Result<PathBuf, String> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let prefix = prefix();
            let so = prefix.join("lib/libpcap.so");
            let script = script();
            if !script.is_file() {
                return if so.is_file() {
                    Ok(so)
                } else {
                    Err(format!("{} not found", script.display()))
                };
            }
            // Test binaries run at once: one builds, the others wait for it
            // (a directory is created atomically).
            let lock = prefix.with_extension("lock");
            let _ = std::fs::create_dir_all(prefix.parent().unwrap_or(Path::new(".")));
            let start = std::time::Instant::now();
            while std::fs::create_dir(&lock).is_err() {
                // A lock left by a process that died while building.
                let stale = std::fs::metadata(&lock)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > std::time::Duration::from_secs(300));
                if stale {
                    let _ = std::fs::remove_dir(&lock);
                    continue;
                }
                if start.elapsed() > std::time::Duration::from_secs(600) {
                    return Err(format!("{} stayed locked", lock.display()));
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            let out = Command::new("bash").arg(&script).arg(&prefix).output();
            let _ = std::fs::remove_dir(&lock);
            let out = out.map_err(|e| format!("cannot run {}: {e}", script.display()))?;
            if !out.status.success() {
                return Err(format!(
                    "{} failed (it needs cmake, flex and bison): {}",
                    script.display(),
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
            if so.is_file() {
                Ok(so)
            } else {
                Err(format!("{} was not built", so.display()))
            }
        })
        .clone()
}

/// The path of master's shared library, building it when needed; `None`
/// (with a message naming `what`) where it cannot be built, or a panic when
/// [`required`].
///
/// ```no_run
/// let so = sluice_testsupport::master::library("this example");
/// ```
pub fn library(what: &str) -> Option<PathBuf> {
    match build() {
        Ok(p) => Some(p),
        Err(e) => unavailable(what, &e),
    }
}

/// libpcap master loaded, or `None` (with a message) where it cannot be
/// built or loaded; a panic instead when [`required`].
///
/// ```no_run
/// let master = sluice_testsupport::master::load("this example");
/// ```
pub fn load(what: &str) -> Option<Libpcap> {
    let so = library(what)?;
    match Libpcap::load_from(&so) {
        Ok(l) => Some(l),
        Err(e) => unavailable(what, &e.to_string()),
    }
}

fn unavailable<T>(what: &str, why: &str) -> Option<T> {
    if required() {
        panic!("{what}: libpcap master is not available: {why} (SLUICE_MASTER_REQUIRED is set)");
    }
    println!("skipped ({what}): libpcap master is not available: {why}");
    None
}
