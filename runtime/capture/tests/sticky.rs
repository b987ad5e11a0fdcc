//! A shared (sticky, world-writable) directory where another user has
//! planted links under every name the writer's next temporaries can take:
//! the writer never follows one, so the links' targets are never written,
//! and its outputs still land under their own names.
//!
//! Planting as another user needs root (setpriv); without it the test
//! says so and skips, unless `SLUICE_LIVE_REQUIRED` is set (the test
//! script sets it as root).

use sluice_capture::sink::{FileSet, OutputFile, Placement};
use sluice_capture::{CaptureFormat, Packet};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// Make a symbolic link `link` -> `target` as user `nobody` (65534).
fn plant(target: &Path, link: &Path) -> Result<(), String> {
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "ln",
            "-s",
        ])
        .arg(target)
        .arg(link)
        .output()
        .map_err(|e| format!("setpriv: {e}"))?;
    match o.status.success() {
        true => Ok(()),
        false => Err(String::from_utf8_lossy(&o.stderr).trim().to_string()),
    }
}

#[test]
fn planted_links_in_a_sticky_directory_are_never_followed() {
    let shared = std::env::temp_dir().join(format!("sluice-sticky-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&shared);
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let victim = std::env::temp_dir().join(format!("sluice-victim-{}", std::process::id()));
    std::fs::write(&victim, b"the victim's bytes").unwrap();
    // Every temporary name this process can use first, for each output.
    let pid = std::process::id();
    let mut planted = 0;
    for file in ["out.pcap", "a.pcap", "b.pcap"] {
        for n in 0..32 {
            let link = shared.join(format!(".{file}.sluice-{pid}-{n}.tmp"));
            match plant(&victim, &link) {
                Ok(()) => planted += 1,
                Err(e) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_some() => {
                    panic!("cannot plant a link as another user: {e}")
                }
                Err(e) => {
                    eprintln!("SKIPPED: planting links as another user needs root ({e})");
                    return;
                }
            }
        }
    }
    assert_eq!(planted, 96);
    let fmt = CaptureFormat::pcap(1, 65535);
    let pkt = Packet::new(1, 0, 1, &[7u8; 60]);
    let out = shared.join("out.pcap");
    let mut w = OutputFile::create(out.to_str().unwrap(), &fmt, Placement::Replace).unwrap();
    w.write(&pkt).unwrap();
    w.finish().unwrap();
    let mut set =
        FileSet::create(&shared, &["a", "b"], &fmt, "", true, Placement::Replace).unwrap();
    set.write(1, &pkt).unwrap();
    set.finish().unwrap();
    assert_eq!(std::fs::read(&victim).unwrap(), b"the victim's bytes");
    for name in ["out.pcap", "b.pcap"] {
        let meta = std::fs::symlink_metadata(shared.join(name)).unwrap();
        assert!(meta.is_file() && meta.len() == 24 + 16 + 60, "{name}");
    }
    std::fs::remove_dir_all(&shared).unwrap();
    std::fs::remove_file(&victim).unwrap();
}
