//! Outputs are all-or-nothing on a full disk: `split --out-dir` and
//! `filter -w` into a small tmpfs fail with status 1, say what happened,
//! leave every existing output as it was, and leave no temporary or new
//! file behind.
//!
//! Mounting a tmpfs needs root; without it the tests say so and skip,
//! unless `SLUICE_LIVE_REQUIRED` is set (the test script sets it as root).

use super::common::{fresh_dir, s, sample, sluice, text};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs of `kib` KiB mounted on a fresh directory, unmounted on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn new(test: &str, kib: u32) -> Option<Tmpfs> {
        let dir = fresh_dir(test);
        let o = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={kib}k"),
                "tmpfs",
                s(&dir),
            ])
            .output()
            .expect("mount (util-linux)");
        if o.status.success() {
            return Some(Tmpfs(dir));
        }
        let why = text(&o.stderr);
        if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() {
            panic!("{test}: cannot mount a tmpfs: {why}");
        }
        eprintln!("SKIPPED {test}: mounting a tmpfs needs root ({why})");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// A capture of `copies` times the sample's packets, in a directory of
/// its own named after `test` (tests run in parallel).
fn capture(test: &str, copies: usize) -> PathBuf {
    let input = std::fs::read(sample()).unwrap();
    let mut out = input[..24].to_vec();
    for _ in 0..copies {
        out.extend_from_slice(&input[24..]);
    }
    let path = fresh_dir(&format!("{test}-input")).join("in.pcap");
    std::fs::write(&path, out).unwrap();
    path
}

/// The names in a directory and their contents.
fn listing(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn split_on_a_full_disk_replaces_nothing() {
    let Some(fs) = Tmpfs::new("full-split", 512) else {
        return;
    };
    // Outputs of an earlier run, one of each kind of file the run makes.
    std::fs::write(fs.0.join("web.pcap"), b"earlier web").unwrap();
    std::fs::write(fs.0.join("all.pcap"), b"earlier all").unwrap();
    let before = listing(&fs.0);
    let filters = fresh_dir("full-filters").join("f.txt");
    std::fs::write(&filters, "web\ttcp port 80\nudp\tudp\nall\t\n").unwrap();
    // About 2 MB of input into 512 KiB: the disk fills up.
    let input = capture("full-split", 2000);
    let o = sluice(&[
        "split",
        "-r",
        s(&input),
        "--filters",
        s(&filters),
        "--out-dir",
        s(&fs.0),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("No space left on device")
            && err.contains("no output of this run was written"),
        "{err}"
    );
    // Output by output: each is as it was, none is new, no temporary.
    assert_eq!(listing(&fs.0), before);
}

#[test]
fn filter_w_on_a_full_disk_keeps_the_old_file() {
    let Some(fs) = Tmpfs::new("full-filter", 256) else {
        return;
    };
    let out = fs.0.join("out.pcap");
    std::fs::write(&out, b"earlier").unwrap();
    let input = capture("full-filter", 2000);
    let o = sluice(&["filter", "-r", s(&input), "-w", s(&out), ""]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.starts_with(&format!(
            "sluice: cannot write output {}: No space left on device (after ",
            s(&out)
        )) && err.contains("the file was not written"),
        "{err}"
    );
    assert_eq!(
        listing(&fs.0),
        [("out.pcap".to_string(), b"earlier".to_vec())]
    );
}
