//! Mapped reading ([`CaptureReader::from_mapped`]): the same packets as
//! reading, each a slice of the file at its place, and a file cut short
//! under the reader ends the reading with an error instead of SIGBUS.

use sluice_capture::{
    CaptureFormat, CaptureReader, CaptureWriter, ErrorKind, Mapped, OwnedPacket, Packet,
};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-mapped-{}-{name}", std::process::id()))
}

fn read_all(mut r: CaptureReader<Box<dyn std::io::Read + Send>>) -> Vec<OwnedPacket> {
    let mut all = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        all.push(p.to_owned_packet());
    }
    all
}

fn mapped(path: &Path) -> CaptureReader<Box<dyn std::io::Read + Send>> {
    let map = Mapped::new(&File::open(path).unwrap()).expect("a regular file maps");
    CaptureReader::from_mapped(Arc::new(map), path.display().to_string()).unwrap()
}

/// Every capture of the corpus (pcap and pcapng, both byte orders) reads
/// the same mapped as read, and each mapped packet's bytes are the
/// file's at the place the mapping gives.
#[test]
fn mapped_files_read_as_read_files() {
    let pcaps = sluice_testsupport::corpus::pcaps();
    if pcaps.is_empty() {
        return sluice_testsupport::corpus::skipped("mapped corpus captures");
    }
    let mut packets = 0;
    for path in &pcaps {
        let Ok(read) = CaptureReader::open(path) else {
            continue;
        };
        let whole = std::fs::read(path).unwrap();
        let mut m = mapped(path);
        let map = m.mapping().unwrap().clone();
        let mut at = Vec::new();
        while let Some(p) = m.next_packet().unwrap() {
            let off = map.offset_of(p.data).unwrap();
            assert_eq!(&whole[off..off + p.data.len()], p.data);
            at.push(p.to_owned_packet());
        }
        assert_eq!(at, read_all(read), "{}", path.display());
        packets += at.len();
    }
    assert!(packets > 1000, "{packets} packets");
}

/// A file cut short while mapped: the packets before the cut are the
/// file's, the record that reaches past it is refused with
/// `ErrorKind::Shrank`, and the process lives on (the handler mapped zero
/// pages where the file was). The mapping reads as zeros past the cut.
#[test]
fn a_file_cut_short_ends_the_reading_with_an_error() {
    let path = temp("cut.pcap");
    let mut w = CaptureWriter::new(Vec::new(), "m", &CaptureFormat::pcap(1, 65535)).unwrap();
    let frame: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    for i in 0..4000u32 {
        w.write_packet(&Packet::new(i64::from(i), 0, 1, &frame))
            .unwrap();
    }
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    let mut r = mapped(&path);
    for _ in 0..100 {
        assert_eq!(r.next_packet().unwrap().unwrap().data, &frame[..]);
    }
    let cut = 1 << 20;
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let mut good = 100u64;
    let err = loop {
        match r.next_packet() {
            Ok(Some(p)) => {
                assert_eq!(p.data, &frame[..], "packet {good}");
                assert_eq!(p.ts_sec, good as i64);
                good += 1;
            }
            Ok(None) => panic!("the reading ended without an error after {good} packets"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err.kind(), ErrorKind::Shrank), "{err}");
    // Records are 1,016 bytes after a 24-byte header: those wholly before
    // the cut are read, the next is not.
    assert_eq!(good, (cut - 24) / 1016);
    assert!(r.next_packet().unwrap().is_none());
    let m = r.mapping().unwrap();
    assert!(m.shrank());
    assert!(m.bytes()[cut as usize + 4096..].iter().all(|&b| b == 0));
    std::fs::remove_file(&path).unwrap();
}

/// What cannot be mapped is not: an empty file, a directory.
#[test]
fn only_regular_files_with_bytes_map() {
    let path = temp("empty.pcap");
    std::fs::write(&path, b"").unwrap();
    assert!(Mapped::new(&File::open(&path).unwrap()).is_none());
    std::fs::remove_file(&path).unwrap();
    assert!(Mapped::new(&File::open(std::env::temp_dir()).unwrap()).is_none());
}

/// Set in the child of `a_fault_elsewhere_still_ends_the_process`.
const CHILD: &str = "SLUICE_MAPPED_TEST_CHILD";

/// The child's part: with the handler installed (a file mapped), a read
/// past the end of a mapping that is not sluice's must still end the
/// process with SIGBUS, not loop or read zeros.
#[test]
#[allow(unsafe_code)]
fn fault_elsewhere_child() {
    let Some(dir) = std::env::var_os(CHILD) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: sets this process's core size limit from a valid struct, so
    // the SIGBUS below leaves no core file.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    let ours = dir.join("ours.pcap");
    std::fs::write(&ours, [0u8; 64]).unwrap();
    let _mapped = Mapped::new(&File::open(&ours).unwrap()).expect("maps");
    let other = dir.join("other");
    std::fs::write(&other, [1u8; 8192]).unwrap();
    let file = File::open(&other).unwrap();
    // SAFETY: a new read-only mapping of an open file, read below only
    // through a raw pointer within its length.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ,
            libc::MAP_SHARED,
            std::os::fd::AsRawFd::as_raw_fd(&file),
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    File::options()
        .write(true)
        .open(&other)
        .unwrap()
        .set_len(0)
        .unwrap();
    // SAFETY: within the mapping; the page is gone from the file, so this
    // read faults (SIGBUS), which is what the test is for.
    let byte = unsafe { std::ptr::read_volatile((p as *const u8).add(4096)) };
    println!("read {byte} past the end of a mapping that is not sluice's");
}

/// A SIGBUS that is not a read past a mapped capture goes to the action
/// there was before (Rust's, then the default): the process ends with it.
#[test]
fn a_fault_elsewhere_still_ends_the_process() {
    use std::os::unix::process::ExitStatusExt;
    let dir = temp("child");
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "fault_elsewhere_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD, &dir)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("the child did not end: the fault looped");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
}
