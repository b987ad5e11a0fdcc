//! Output rotation (`-C`, `-G`, `-W`): the same file names and bytes as
//! Debian's tcpdump for `-C` on a capture larger than a million bytes, and
//! `-G` on a slow input fed through a pipe.

use super::common::{fresh_dir, s, sluice, text};
use sluice::capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// One Ethernet/IPv4 packet of `len` bytes: UDP when `udp`, else TCP, its
/// payload bytes drawn from `seed`.
fn packet(len: usize, udp: bool, seed: u32) -> Vec<u8> {
    let mut p = vec![0u8; len.max(54)];
    p[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    p[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    p[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (p.len() - 14) as u16;
    p[14] = 0x45;
    p[16..18].copy_from_slice(&ip_len.to_be_bytes());
    p[22] = 64;
    p[23] = if udp { 17 } else { 6 };
    p[26..30].copy_from_slice(&[10, 0, 0, 1]);
    p[30..34].copy_from_slice(&[10, 0, 0, 2]);
    p[34..38].copy_from_slice(&[0x13, 0x88, 0x00, 0x35]);
    let mut x = seed.wrapping_mul(2_654_435_761).max(1);
    for b in &mut p[54..] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x as u8;
    }
    p
}

/// A pcap file of `n` packets of 60 to 1,500 bytes (every third one UDP),
/// one a millisecond from 2021-01-01.
fn capture(path: &Path, n: u32) {
    let mut out = Vec::new();
    let mut w = CaptureWriter::new(&mut out, "big", &CaptureFormat::pcap(1, 65535)).unwrap();
    for i in 0..n {
        let len = 60 + (i as usize * 7919) % 1441;
        let data = packet(len, i % 3 == 0, i);
        let t = 1_609_459_200_000 + i64::from(i);
        let p = Packet::new(t / 1000, (t % 1000) as u32 * 1_000_000, 1, &data);
        w.write_packet(&p).unwrap();
    }
    w.finish().unwrap();
    std::fs::write(path, out).unwrap();
}

/// The files of a directory: name and bytes, by name.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
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

/// Every packet of a capture: timestamp and bytes.
fn packets(bytes: &[u8]) -> Vec<(i64, u32, Vec<u8>)> {
    let mut r = CaptureReader::from_reader(bytes, "t").unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push((p.ts_sec, p.ts_nsec, p.data.to_vec()));
    }
    v
}

/// Run tcpdump with these arguments (keeping root's rights, as a test
/// directory needs); false when there is no tcpdump.
fn tcpdump(args: &[&str]) -> bool {
    let user = Command::new("id").arg("-un").output();
    let user = user.map(|o| text(&o.stdout).trim().to_string());
    let mut cmd = Command::new("tcpdump");
    if let Ok(u) = user.as_deref() {
        if !u.is_empty() {
            cmd.args(["-Z", u]);
        }
    }
    match cmd.args(args).output() {
        Ok(o) => {
            assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
            true
        }
        Err(_) => false,
    }
}

#[test]
fn c_and_w_name_and_fill_files_as_tcpdump_does() {
    let dir = fresh_dir("rotate-c");
    let input = dir.join("big.pcap");
    capture(&input, 3_000);
    assert!(std::fs::metadata(&input).unwrap().len() > 2_000_000);
    let cases: [&[&str]; 6] = [
        &["-C", "1"],
        &["-C", "1", "-W", "3"],
        &["-C", "1", "-W", "2"],
        &["-C", "1", "-W", "1"],
        &["-C", "1", "-W", "11"],
        &["-C", "1", "greater 600"],
    ];
    for (i, case) in cases.iter().enumerate() {
        let ours = dir.join(format!("ours{i}"));
        let theirs = dir.join(format!("theirs{i}"));
        std::fs::create_dir_all(&ours).unwrap();
        std::fs::create_dir_all(&theirs).unwrap();
        let mut args = vec!["filter", "-r", s(&input)];
        let out = ours.join("out");
        args.extend(["-w", s(&out)]);
        args.extend(case.iter());
        let o = sluice(&args);
        assert!(o.status.success(), "{case:?}: {}", text(&o.stderr));
        let mine = files(&ours);
        let one_file = *case == ["-C", "1", "-W", "1"];
        assert!(mine.len() >= if one_file { 1 } else { 2 }, "{case:?}");
        let out = theirs.join("out");
        let mut targs = vec!["-r", s(&input), "-w", s(&out)];
        targs.extend(case.iter());
        if !tcpdump(&targs) {
            println!("skipped (tcpdump): not installed");
            return;
        }
        let want = files(&theirs);
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|f| f.0.clone()).collect::<Vec<_>>();
        assert_eq!(names(&mine), names(&want), "{case:?}");
        for ((name, a), (_, b)) in mine.iter().zip(&want) {
            assert!(
                a == b,
                "{case:?}: {name} differs ({} and {} bytes)",
                a.len(),
                b.len()
            );
        }
    }
}

#[test]
fn g_starts_a_file_a_second_on_a_slow_input() {
    let dir = fresh_dir("rotate-g");
    let input = dir.join("in.pcap");
    capture(&input, 20);
    let bytes = std::fs::read(&input).unwrap();
    // What one run without rotation accepts.
    let all = dir.join("all.pcap");
    let o = sluice(&["filter", "-r", s(&input), "-w", s(&all), "udp"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let accepted = packets(&std::fs::read(&all).unwrap());
    assert_eq!(accepted.len(), 7);

    // The same packets fed one every 250 ms, over five seconds.
    let run = |sub: &str, extra: &[&str]| -> (Vec<(String, Vec<u8>)>, String) {
        let out_dir = dir.join(sub);
        std::fs::create_dir_all(&out_dir).unwrap();
        let pattern: PathBuf = out_dir.join("out-%Y%m%d-%H%M%S.pcap");
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["filter", "-r", "-", "-w", s(&pattern), "-G", "1"])
            .args(extra)
            .arg("udp")
            .env("TZ", "UTC")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let input = bytes.clone();
        let feeder = std::thread::spawn(move || {
            // The header, then one packet record (16 bytes and the data) at
            // a time; sluice may have stopped reading (-W), ending the feed.
            let mut at = 24;
            let _ = stdin.write_all(&input[..at]);
            while at < input.len() {
                let caplen = u32::from_le_bytes(input[at + 8..at + 12].try_into().unwrap());
                let end = at + 16 + caplen as usize;
                std::thread::sleep(Duration::from_millis(250));
                if stdin.write_all(&input[at..end]).is_err() {
                    return;
                }
                at = end;
            }
        });
        let o = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        assert!(o.status.success(), "{extra:?}: {}", text(&o.stderr));
        (files(&out_dir), text(&o.stderr))
    };

    let (made, _) = run("plain", &[]);
    assert!(
        made.len() >= 2,
        "{:?}",
        made.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let mut joined = Vec::new();
    for (name, b) in &made {
        assert!(
            name.starts_with("out-20") && name.ends_with(".pcap"),
            "{name}"
        );
        // Every file is a whole capture with the input's header.
        assert_eq!(b[..24], bytes[..24], "{name}");
        joined.extend(packets(b));
    }
    assert_eq!(joined, accepted);

    // -W 2: two files, then the run ends well; what they hold is what
    // was accepted, in order, up to the moment the third was due.
    let (made, stderr) = run("ring", &["-W", "2"]);
    assert_eq!(
        made.len(),
        2,
        "{:?}",
        made.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert!(stderr.contains("maximum file limit reached: 2"), "{stderr}");
    let joined: Vec<_> = made.iter().flat_map(|f| packets(&f.1)).collect();
    assert!(!joined.is_empty() && joined.len() < accepted.len());
    assert_eq!(joined[..], accepted[..joined.len()]);
}

#[test]
fn rotation_needs_a_file() {
    let dir = fresh_dir("rotate-usage");
    let input = dir.join("in.pcap");
    capture(&input, 3);
    let out = dir.join("out");
    let cases: [&[&str]; 8] = [
        &["-C", "1"],
        &["-G", "5", "-W", "2"],
        &["-w", "-", "-C", "1"],
        &["-w", s(&out), "-W", "3"],
        &["-w", s(&out), "-C", "0"],
        &["-w", s(&out), "-C", "1k"],
        &["-w", s(&out), "-G", "0"],
        &["-w", "bad-%Q", "-G", "1"],
    ];
    for case in cases {
        let mut args = vec!["filter", "-r", s(&input)];
        args.extend(case);
        let o = sluice(&args);
        assert_eq!(o.status.code(), Some(2), "{case:?}");
        assert_eq!(text(&o.stdout), "", "{case:?}");
    }
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "nothing written"
    );
}
