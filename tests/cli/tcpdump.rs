//! tcpdump's options, compared with Debian's tcpdump on corpus captures:
//! what `sluice filter` prints (tcpdump's decode, handed the accepted
//! packets) on every corpus capture at `-r`, `-n`, `-nn`, `-e`, `-v`,
//! `-vv` and `-q`; every option of tcpdump's manual either doing what
//! tcpdump does or refused in one line; and sluice's own printer (used
//! without tcpdump): `-c`, the dumps, the `-t` formats and the one-line
//! summary for the common link types.

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

/// sluice's standard output, with the same time zone as tcpdump's,
/// printed by sluice's own printer (as without tcpdump).
fn ours(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env("TZ", "EST5EDT")
        .env("SLUICE_TCPDUMP", "none")
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

/// How to run a program with no network (`unshare -n`, or in a user
/// namespace `unshare -rn`), so that name lookups without `-n` fail at
/// once for tcpdump and sluice alike instead of waiting on DNS; `None`
/// where neither works (the lookups then run as they are).
fn offline() -> Option<Vec<&'static str>> {
    [vec!["unshare", "-n", "--"], vec!["unshare", "-rn", "--"]]
        .into_iter()
        .find(|pre| {
            Command::new(pre[0])
                .args(&pre[1..])
                .arg("true")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// A program's standard output and exit status, run through `pre`.
fn run(pre: &[&str], program: &str, args: &[&str]) -> (String, Option<i32>) {
    let mut all: Vec<&str> = pre.to_vec();
    all.push(program);
    all.extend(args);
    let o = Command::new(all[0])
        .args(&all[1..])
        .env("TZ", "EST5EDT")
        .output()
        .unwrap();
    (text(&o.stdout), o.status.code())
}

#[test]
fn prints_what_tcpdump_prints_on_every_corpus_capture() {
    let caps = corpus::pcaps();
    if caps.is_empty() {
        return corpus::skipped("the corpus");
    }
    if tcpdump(&["-r", &sample()]).is_none() {
        return corpus::skipped("tcpdump");
    }
    let pre = offline().unwrap_or_default();
    let sluice = env!("CARGO_BIN_EXE_sluice");
    let modes: [&[&str]; 7] = [&[], &["-n"], &["-nn"], &["-e"], &["-v"], &["-vv"], &["-q"]];
    // Two threads, each taking every other capture.
    let caps = &caps;
    let pre = &pre;
    let failures: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|k| {
                scope.spawn(move || {
                    let mut bad = Vec::new();
                    for cap in caps.iter().skip(k).step_by(2) {
                        let cap = s(cap);
                        for mode in modes {
                            let mut args = vec!["-r", cap];
                            args.extend(mode);
                            let theirs = run(pre, "tcpdump", &args);
                            let mut mine_args = vec!["filter"];
                            mine_args.extend(&args);
                            let mine = run(pre, sluice, &mine_args);
                            if mine != theirs {
                                bad.push(format!("{cap} {mode:?}"));
                            }
                        }
                    }
                    bad
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} differ: {failures:#?}",
        failures.len()
    );
}

/// Every option of tcpdump 4.99's manual, as `sluice filter -r` on the
/// sample takes it: `Some(args)` prints what `tcpdump -r SAMPLE args`
/// prints; `None` is refused with status 2 and one line naming what to
/// use instead.
fn matrix() -> Vec<(Vec<&'static str>, bool)> {
    let same = |a: &[&'static str]| (a.to_vec(), true);
    let refused = |a: &[&'static str]| (a.to_vec(), false);
    vec![
        same(&["-A"]),
        same(&["-AA", "-nn"]),
        same(&["-b", "-nn"]),
        same(&["-c", "3", "-nn"]),
        same(&["-e", "-nn"]),
        same(&[
            "-E",
            "0x1@192.1.2.45 3des-cbc-hmac96:0x4043434545464649494a4a4c4c4f4f515152525454575758",
            "-nn",
        ]),
        same(&["-H", "-nn"]),
        same(&["-j", "host", "-nn"]),
        same(&["--time-stamp-type", "host", "-nn"]),
        same(&["-K", "-v", "-nn"]),
        same(&["--dont-verify-checksums", "-nn"]),
        same(&["-l", "-nn"]),
        same(&["-M", "secret", "-nn"]),
        same(&["-n"]),
        same(&["-nn"]),
        same(&["-N"]),
        same(&["-#", "-nn"]),
        same(&["--number", "-nn"]),
        same(&["-O", "-nn", "tcp"]),
        same(&["--no-optimize", "-nn", "tcp"]),
        same(&["-q"]),
        same(&["-S", "-nn"]),
        same(&["--absolute-tcp-sequence-numbers", "-nn"]),
        same(&["-s", "0", "-nn"]),
        same(&["-s", "64", "-nn"]),
        same(&["--snapshot-length", "0", "-nn"]),
        same(&["-T", "vxlan", "-nn"]),
        same(&["-t", "-nn"]),
        same(&["-tt", "-nn"]),
        same(&["-ttt", "-nn"]),
        same(&["-tttt", "-nn"]),
        same(&["-ttttt", "-nn"]),
        same(&["-u", "-nn"]),
        same(&["-U", "-nn"]),
        same(&["--packet-buffered", "-nn"]),
        same(&["-v", "-nn"]),
        same(&["-vv", "-nn"]),
        same(&["-vvv", "-nn"]),
        same(&["-x", "-nn"]),
        same(&["-xx", "-nn"]),
        same(&["-X", "-nn"]),
        same(&["-XX", "-nn"]),
        same(&["--time-stamp-precision", "nano", "-nn"]),
        same(&["--nano", "-nn"]),
        same(&["--micro", "-nn"]),
        same(&["-Z", "root", "-nn"]),
        same(&["-F", "EXPRFILE", "-nn"]),
        refused(&["-c", "0"]),
        refused(&["-f"]),
        refused(&["-I"]),
        refused(&["--monitor-mode"]),
        refused(&["-J"]),
        refused(&["-j", "adapter"]),
        refused(&["-L"]),
        refused(&["-V", "files.txt"]),
        refused(&["-z", "gzip"]),
        refused(&["-Z", "nobody"]),
        refused(&["-B", "1024"]),
        refused(&["-p"]),
        refused(&["-Q", "in"]),
        refused(&["--immediate-mode"]),
        refused(&["--workers", "2"]),
        refused(&["--duration", "1"]),
    ]
}

#[test]
fn every_tcpdump_option_works_as_tcpdumps_or_is_refused_in_one_line() {
    if tcpdump(&["-r", &sample()]).is_none() {
        return corpus::skipped("tcpdump");
    }
    let dir = fresh_dir("matrix");
    let exprfile = dir.join("expr.txt");
    std::fs::write(&exprfile, "# web\ntcp port 80\n").unwrap();
    let pre = offline().unwrap_or_default();
    let smp = sample();
    for (opts, same) in matrix() {
        let opts: Vec<&str> = opts
            .iter()
            .map(|o| if *o == "EXPRFILE" { s(&exprfile) } else { o })
            .collect();
        let mut args = vec!["filter", "-r", smp.as_str()];
        args.extend(&opts);
        if same {
            let theirs = run(&pre, "tcpdump", &args[1..]);
            let mine = run(&pre, env!("CARGO_BIN_EXE_sluice"), &args);
            assert_eq!(theirs.1, Some(0), "tcpdump {opts:?}");
            assert_eq!(mine, theirs, "{opts:?}");
        } else {
            let o = sluice(&args);
            let err = text(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{opts:?}: {err}");
            let lines: Vec<&str> = err.lines().filter(|l| !l.is_empty()).collect();
            assert_eq!(lines.len(), 1, "{opts:?}: {err}");
            assert!(!err.contains("'-- "), "{opts:?}: {err}");
            assert!(o.stdout.is_empty(), "{opts:?}");
        }
    }
    // An expression beside -F is ignored with a warning, as tcpdump does.
    let o = sluice(&["filter", "-r", &smp, "-F", s(&exprfile), "--count", "udp"]);
    assert_eq!(text(&o.stdout), "5\n");
    assert!(text(&o.stderr).contains("ignored"), "{}", text(&o.stderr));
}

#[test]
fn counts_come_before_a_capture_error_as_with_tcpdump() {
    let dir = fresh_dir("truncated");
    let cut = dir.join("cut.pcap");
    let bytes = std::fs::read(sample()).unwrap();
    std::fs::write(&cut, &bytes[..1000]).unwrap();
    let o = sluice(&["filter", "-r", s(&cut), "--count"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "12\n");
    assert!(
        text(&o.stderr).contains("byte offset"),
        "{}",
        text(&o.stderr)
    );
    if let Ok(theirs) = Command::new("tcpdump")
        .args(["-r", s(&cut), "--count"])
        .output()
    {
        assert_eq!(theirs.status.code(), Some(1));
        assert_eq!(text(&theirs.stdout), "12 packets\n");
    }
}

#[test]
fn printing_without_tcpdump_says_what_to_install() {
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["filter", "-r", &sample(), "-v"])
        .env("SLUICE_TCPDUMP", "none")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("apt-get install tcpdump"));
    assert!(o.stdout.is_empty());
    let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["filter", "-r", &sample(), "-c", "1"])
        .env("SLUICE_TCPDUMP", "none")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(text(&o.stderr).contains("apt-get install tcpdump"));
    assert_eq!(text(&o.stdout).lines().count(), 1);
    // With tcpdump, the hand-off is said once.
    if tcpdump(&["-r", &sample()]).is_some() {
        let o = sluice(&["filter", "-r", &sample(), "-nn"]);
        let err = text(&o.stderr);
        assert_eq!(err.matches("tcpdump prints").count(), 1, "{err}");
        assert!(
            err.contains(&format!("reading from file {},", sample())),
            "{err}"
        );
    }
}
