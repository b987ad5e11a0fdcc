//! tcpdump's everyday options, compared with Debian's tcpdump on corpus
//! captures: `-c`, the `-x`/`-xx`/`-X`/`-XX`/`-A` dumps, the `-t` formats
//! and the one-line summary for the common link types.

use super::common::{fresh_dir, s, sample, sluice, text};
use sluice::capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
use sluice_testsupport::corpus;
use std::path::{Path, PathBuf};
use std::process::Command;

/// tcpdump's standard output for these arguments (`None`: no tcpdump here).
fn tcpdump(args: &[&str]) -> Option<String> {
    let o = Command::new("tcpdump")
        .args(args)
        .env("TZ", "EST5EDT")
        .output()
        .ok()?;
    o.status.success().then(|| text(&o.stdout))
}

/// sluice's standard output, with the same time zone as tcpdump's.
fn ours(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("TZ", "EST5EDT")
        .output()
        .unwrap();
    assert!(o.status.success(), "{args:?}: {}", text(&o.stderr));
    text(&o.stdout)
}

/// The sample and a spread of the corpus's captures.
fn captures() -> Vec<String> {
    let mut v = vec![sample()];
    v.extend(
        corpus::pcaps()
            .iter()
            .step_by(25)
            .map(|p| p.to_string_lossy().into_owned()),
    );
    v
}

fn dump_lines(out: &str) -> Vec<&str> {
    out.lines().filter(|l| l.starts_with("\t0x")).collect()
}

#[test]
fn hex_dumps_equal_tcpdumps() {
    for cap in captures() {
        for flag in ["-x", "-xx", "-X", "-XX"] {
            // tcpdump's quick form, as sluice's (its full decoders dump a
            // packet they find malformed from the link header on).
            let Some(theirs) = tcpdump(&["-r", &cap, "-nn", "-q", flag]) else {
                return corpus::skipped("tcpdump");
            };
            let mine = ours(&["filter", "-r", &cap, flag]);
            assert_eq!(dump_lines(&mine), dump_lines(&theirs), "{cap} {flag}");
        }
    }
}

#[test]
fn ascii_dump_and_lines_equal_tcpdumps_on_the_sample() {
    // Every line of the sample is one tcpdump prints the same way.
    for flags in [&[][..], &["-A"], &["-AA"], &["-e"], &["-X"], &["-t", "-xx"]] {
        let smp = sample();
        let mut args = vec!["-r", smp.as_str(), "-nn", "-q"];
        args.extend(flags);
        let Some(theirs) = tcpdump(&args) else {
            return corpus::skipped("tcpdump");
        };
        let mut mine_args = vec!["filter", "-r", smp.as_str()];
        mine_args.extend(flags);
        assert_eq!(ours(&mine_args), theirs, "{flags:?}");
    }
}

#[test]
fn count_and_timestamp_formats_equal_tcpdumps() {
    // The timestamp column's width, per format (micro, nano).
    let width = |t: &str, nano: bool| -> usize {
        let w = match t {
            "" => 15,
            "-ttt" | "-ttttt" => 16,
            "-tttt" => 26,
            _ => 0,
        };
        w + if nano { 3 } else { 0 }
    };
    for cap in captures().iter().take(8) {
        for t in ["", "-t", "-tt", "-ttt", "-tttt", "-ttttt"] {
            for nano in [false, true] {
                let mut args = vec!["-r", cap.as_str(), "-nn", "-c", "7"];
                if !t.is_empty() {
                    args.push(t);
                }
                if nano {
                    args.extend(["--time-stamp-precision", "nano"]);
                }
                let Some(theirs) = tcpdump(&args) else {
                    return corpus::skipped("tcpdump");
                };
                let mut mine = vec!["filter"];
                mine.extend(&args);
                mine.retain(|a| *a != "-nn");
                let mine = ours(&mine);
                let column = |out: &str| -> Vec<String> {
                    out.lines()
                        .filter(|l| !l.starts_with('\t'))
                        .map(|l| match t {
                            "-t" => String::new(),
                            "-tt" => l.split(' ').next().unwrap().to_string(),
                            _ => l.chars().take(width(t, nano)).collect(),
                        })
                        .collect()
                };
                assert_eq!(column(&mine), column(&theirs), "{cap} {t} nano {nano}");
                assert!(column(&mine).len() <= 7);
            }
        }
    }
}

/// Lines of the forms sluice prints exactly as tcpdump -q does.
fn comparable(line: &str) -> bool {
    let body = line.split_once(' ').map_or("", |x| x.1);
    (body.starts_with("IP ") || body.starts_with("IP6 "))
        && (line.contains(": tcp ") || line.contains(": UDP, length "))
        || body.starts_with("ARP, Request")
        || body.starts_with("ARP, Reply")
        || line.contains(": ICMP echo ")
}

#[test]
fn summary_lines_equal_tcpdumps_on_ethernet() {
    let mut compared = 0;
    for cap in captures() {
        let Some(theirs) = tcpdump(&["-r", &cap, "-nn", "-q"]) else {
            return corpus::skipped("tcpdump");
        };
        let mine = ours(&["filter", "-r", &cap]);
        let theirs: Vec<&str> = theirs.lines().collect();
        let mine: Vec<&str> = mine.lines().collect();
        assert_eq!(mine.len(), theirs.len(), "{cap}");
        for (m, t) in mine.iter().zip(&theirs) {
            if comparable(t) {
                assert_eq!(m, t, "{cap}");
                compared += 1;
            }
        }
    }
    assert!(compared > 10, "{compared}");
}

/// The sample's packets rewritten for another link type: `head` gives
/// the link header for an IP packet of version 4 or 6 (None: skip it).
fn relink(lt: u16, dir: &Path, head: impl Fn(u8) -> Option<Vec<u8>>) -> PathBuf {
    let path = dir.join(format!("lt{lt}.pcap"));
    let bytes = std::fs::read(sample()).unwrap();
    let mut r = CaptureReader::from_reader(&bytes[..], "sample").unwrap();
    let mut out = Vec::new();
    let mut w = CaptureWriter::new(&mut out, "out", &CaptureFormat::pcap(lt, 65535)).unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        let ip = &p.data[14..];
        let ty = u16::from_be_bytes([p.data[12], p.data[13]]);
        if ty != 0x0800 && ty != 0x86dd {
            continue;
        }
        let Some(mut data) = head(ip[0] >> 4) else {
            continue;
        };
        data.extend_from_slice(ip);
        w.write_packet(&Packet::new(p.ts_sec, p.ts_nsec, lt, &data))
            .unwrap();
    }
    w.finish().unwrap();
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn summary_lines_for_other_link_types() {
    let dir = fresh_dir("links");
    let sll = |v: u8| {
        let mut h = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
        h.extend(if v == 4 { [8, 0] } else { [0x86, 0xdd] });
        Some(h)
    };
    let caps = [
        relink(101, &dir, |_| Some(vec![])),
        relink(0, &dir, |v| {
            Some(if v == 4 { 2u32 } else { 30 }.to_le_bytes().to_vec())
        }),
        relink(113, &dir, sll),
    ];
    for cap in &caps {
        let mine = ours(&["filter", "-r", s(cap)]);
        // (The VLAN-tagged packet of the sample is left out.)
        assert_eq!(mine.lines().count(), 12, "{}", cap.display());
        if let Some(theirs) = tcpdump(&["-r", s(cap), "-nn", "-q"]) {
            for (m, t) in mine.lines().zip(theirs.lines()) {
                if comparable(t) {
                    assert_eq!(m, t, "{}", cap.display());
                }
            }
        }
        // Every link type shows the same IP line as Ethernet did.
        assert!(
            mine.contains("IP 192.168.1.10.40000 > 93.184.216.34.80: tcp 37"),
            "{mine}"
        );
        assert!(mine.contains("IP6 fe80::1 > ff02::1: ICMP6, echo request"));
    }
    // 802.11 frames by type (radiotap in front), no doubled "length".
    if let Some(wlan) = corpus::root().map(|r| r.join("libpcap-tests/filter/wpa-Induction.pcap")) {
        if wlan.exists() {
            let mine = ours(&["filter", "-r", s(&wlan), "-c", "10"]);
            assert!(mine.contains(" Beacon"), "{mine}");
            assert!(
                mine.contains(" Acknowledgment RA:00:0d:93:82:36:3a"),
                "{mine}"
            );
            assert!(!mine.contains("length 0, length"), "{mine}");
        }
    }
}

#[test]
fn c_stops_after_n_accepted() {
    let o = sluice(&["filter", "-r", &sample(), "-c", "2", "--count", "tcp"]);
    assert_eq!(text(&o.stdout), "2\n");
    if let Some(theirs) = tcpdump(&["-r", &sample(), "-nn", "-q", "-c", "3", "udp or arp"]) {
        assert_eq!(
            ours(&["filter", "-r", &sample(), "-c", "3", "udp or arp"]),
            theirs
        );
    }
}
