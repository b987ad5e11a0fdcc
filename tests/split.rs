//! `sluice split` against `sluice filter` run once per expression: counts,
//! verdicts and output files must agree; first-match, formats, bad lines,
//! truncated captures and usage errors.

mod common;
use common::{fresh_dir as tmp, manifest, s, sample, sluice, text};
use sluice_testsupport::corpus;

use sluice::capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
use std::path::Path;

/// What `sluice filter` says about one expression: count, verdicts, output bytes.
struct Alone {
    count: u64,
    verdicts: String,
    written: Vec<u8>,
}

/// Run `sluice filter` alone; `None` if it refuses the expression here.
fn alone(capture: &str, expr: &str, dir: &Path, i: usize) -> Option<Alone> {
    let out = dir.join(format!("alone-{i}"));
    let o = sluice(&[
        "filter",
        "-r",
        capture,
        "-w",
        s(&out),
        "--verdicts",
        "--count",
        expr,
    ]);
    if !o.status.success() {
        return None;
    }
    let stdout = text(&o.stdout);
    let mut lines: Vec<&str> = stdout.lines().collect();
    let count = lines.pop().unwrap().parse().unwrap();
    Some(Alone {
        count,
        verdicts: lines.concat(),
        written: std::fs::read(&out).unwrap(),
    })
}

/// Candidate expressions: a spread over the corpus list (or a few of our own).
fn candidates() -> Vec<String> {
    let mut v: Vec<String> = [
        "tcp port 80",
        "udp",
        "arp",
        "icmp",
        "ip",
        "ip6",
        "tcp",
        "",
        "not tcp",
        "udp port 53 or tcp port 80",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(t) = corpus::text("expressions.txt") {
        let lines: Vec<&str> = t.lines().filter(|l| !l.trim().is_empty()).collect();
        v.extend(lines.iter().step_by(13).map(|l| l.to_string()));
    }
    v
}

/// Filters that `sluice filter` accepts on this capture, with what it says.
fn filters_for(capture: &str, dir: &Path) -> (String, Vec<Alone>) {
    let mut file = String::from("# name<TAB>expression\n\n");
    let mut results = Vec::new();
    for (i, e) in candidates().iter().enumerate() {
        if let Some(a) = alone(capture, e, dir, i) {
            file.push_str(&format!("f{i}\t{e}\n"));
            results.push(a);
        }
    }
    (file, results)
}

fn names(filters: &str) -> Vec<String> {
    filters
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect()
}

/// Split `capture` and compare everything with `sluice filter` alone.
fn check_capture(capture: &str, test: &str) {
    let dir = tmp(test);
    let (filters, alone) = filters_for(capture, &dir);
    assert!(
        alone.len() >= 20,
        "{capture}: only {} filters compile",
        alone.len()
    );
    let matched: u64 = alone.iter().map(|a| a.count).sum();
    eprintln!("{capture}: {} filters, {matched} matches", alone.len());
    let ffile = dir.join("filters.txt");
    std::fs::write(&ffile, &filters).unwrap();
    let names = names(&filters);
    let ext = if capture.ends_with(".pcapng") {
        "pcapng"
    } else {
        "pcap"
    };

    // Counts.
    let o = sluice(&["split", "-r", capture, "--filters", s(&ffile), "--count"]);
    assert!(o.status.success(), "{capture}: {}", text(&o.stderr));
    let want: Vec<String> = names
        .iter()
        .zip(&alone)
        .map(|(n, a)| format!("{n}\t{}", a.count))
        .collect();
    assert_eq!(
        text(&o.stdout).lines().collect::<Vec<_>>(),
        want,
        "{capture}"
    );

    // Verdicts.
    let o = sluice(&["split", "-r", capture, "--filters", s(&ffile), "--verdicts"]);
    assert!(o.status.success(), "{capture}: {}", text(&o.stderr));
    let want: Vec<String> = names
        .iter()
        .zip(&alone)
        .map(|(n, a)| format!("{n}\t{}", a.verdicts))
        .collect();
    let got = text(&o.stdout);
    assert_eq!(got.lines().collect::<Vec<_>>(), want, "{capture}");

    // Output files, byte for byte.
    let out = dir.join("out");
    let o = sluice(&[
        "split",
        "-r",
        capture,
        "--filters",
        s(&ffile),
        "--out-dir",
        s(&out),
    ]);
    assert!(o.status.success(), "{capture}: {}", text(&o.stderr));
    assert!(o.stdout.is_empty());
    for (n, a) in names.iter().zip(&alone) {
        let written = std::fs::read(out.join(format!("{n}.{ext}")))
            .unwrap_or_else(|e| panic!("{capture}: {n}.{ext}: {e}"));
        assert!(
            written == a.written,
            "{capture}: {n} differs from filter -w"
        );
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), names.len());

    // First match: each packet goes to the first line that matches it.
    let packets = alone[0].verdicts.len();
    let mut first = vec![None; packets];
    for (i, a) in alone.iter().enumerate() {
        for (p, v) in a.verdicts.bytes().enumerate() {
            if v == b'1' && first[p].is_none() {
                first[p] = Some(i);
            }
        }
    }
    let o = sluice(&[
        "split",
        "-r",
        capture,
        "--filters",
        s(&ffile),
        "--verdicts",
        "--count",
        "--first-match",
    ]);
    assert!(o.status.success(), "{capture}: {}", text(&o.stderr));
    let got = text(&o.stdout);
    let lines: Vec<&str> = got.lines().collect();
    let (counts, verdicts) = lines.split_at(names.len());
    let total: u64 = counts
        .iter()
        .map(|l| l.split('\t').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total as usize, first.iter().flatten().count(), "{capture}");
    for (i, l) in verdicts.iter().enumerate() {
        let row = l.split('\t').nth(1).unwrap();
        let want: String = first
            .iter()
            .map(|f| if *f == Some(i) { '1' } else { '0' })
            .collect();
        assert_eq!(row, want, "{capture}: first-match row of {}", names[i]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sample_agrees_with_filter() {
    check_capture(&sample(), "sample");
}

/// A few real captures of the shared corpus, pcap and pcapng.
#[test]
fn corpus_captures_agree_with_filter() {
    let Some(dir) = corpus::path("pcaps") else {
        corpus::skipped("split on corpus captures");
        return;
    };
    for name in [
        "mptcp-v0.pcap",
        "pim-packet-assortment.pcap",
        "vrrp.pcap",
        "of13_ericsson.pcapng",
        "OSPFv2_Capture_FINAL.pcapng",
    ] {
        let p = dir.join(name);
        if p.exists() {
            check_capture(s(&p), name);
        } else {
            eprintln!("skipped: {} is absent", p.display());
        }
    }
}

/// A pcapng file with two link types (Ethernet, and the same IPv4 packets
/// raw): one classifier per link type, pcapng out.
#[test]
fn pcapng_with_two_link_types() {
    let dir = tmp("two-links");
    let ng = dir.join("two.pcapng");
    {
        let mut r = CaptureReader::open(sample()).unwrap();
        let mut w = CaptureWriter::create(&ng, &CaptureFormat::pcapng()).unwrap();
        while let Some(p) = r.next_packet().unwrap() {
            w.write_packet(&p).unwrap();
            if p.data.len() > 14 && p.data[12..14] == [0x08, 0x00] {
                let raw = Packet {
                    wirelen: p.wirelen - 14,
                    ..Packet::new(p.ts_sec, p.ts_nsec, 101, &p.data[14..])
                };
                w.write_packet(&raw).unwrap();
            }
        }
        w.finish().unwrap();
    }
    let ng = s(&ng).to_string();
    let exprs = ["ip", "tcp port 80", "udp", "icmp", "", "ip host 10.0.0.1"];
    let mut filters = String::new();
    let mut alone_results = Vec::new();
    for (i, e) in exprs.iter().enumerate() {
        let a = alone(&ng, e, &dir, i).unwrap_or_else(|| panic!("filter refuses {e}"));
        filters.push_str(&format!("f{i}\t{e}\n"));
        alone_results.push(a);
    }
    let ffile = dir.join("filters.txt");
    std::fs::write(&ffile, &filters).unwrap();
    let out = dir.join("out");
    let o = sluice(&[
        "split",
        "-r",
        &ng,
        "--filters",
        s(&ffile),
        "--out-dir",
        s(&out),
        "--verdicts",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    for (i, (l, a)) in text(&o.stdout).lines().zip(&alone_results).enumerate() {
        assert_eq!(l, format!("f{i}\t{}", a.verdicts));
        let written = std::fs::read(out.join(format!("f{i}.pcapng"))).unwrap();
        assert!(written == a.written, "f{i} differs from filter -w");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn json_and_empty_outputs() {
    let dir = tmp("json");
    let ffile = dir.join("filters.txt");
    std::fs::write(
        &ffile,
        "web\ttcp port 80\nnone\tudp port 9\r\narp\tarp # comment\n",
    )
    .unwrap();
    let o = sluice(&[
        "split",
        "-r",
        &sample(),
        "--filters",
        s(&ffile),
        "--count",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["packets"], 14);
    assert_eq!(v["filters"][0]["name"], "web");
    assert_eq!(v["filters"][0]["accepted"], 5);
    assert_eq!(v["filters"][1]["accepted"], 0);
    assert_eq!(v["filters"][2]["accepted"], 1);
    // A filter that matched nothing still gets a header-only file.
    let out = dir.join("out");
    let o = sluice(&[
        "split",
        "-r",
        &sample(),
        "--filters",
        s(&ffile),
        "--out-dir",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(out.join("none.pcap")).unwrap().len(), 24);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_lines_exit_1_and_write_nothing() {
    let dir = tmp("bad");
    let out = dir.join("out");
    let cases = [
        ("web\ttcp port 80\nno tab here\n", 2),
        ("web\ttcp port 80\n\n\tudp\n", 3),
        ("web\ttcp port 80\nweb\tudp\n", 2),
        ("# c\nweb\ttcp port 80\na/b\tudp\n", 3),
        ("web\ttcp port 80\n..\tudp\n", 2),
        ("web\ttcp port 80\nx\tudp port\n", 2),
        ("web\ttcp port 80\n\n\n\nx\tip and ip6\n", 5),
    ];
    for (filters, line) in cases {
        let ffile = dir.join("filters.txt");
        std::fs::write(&ffile, filters).unwrap();
        let o = sluice(&[
            "split",
            "-r",
            &sample(),
            "--filters",
            s(&ffile),
            "--out-dir",
            s(&out),
            "--count",
        ]);
        assert_eq!(o.status.code(), Some(1), "{filters:?}");
        let err = text(&o.stderr);
        assert!(
            err.contains(&format!("filters.txt:{line}:")),
            "{filters:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{filters:?}");
        assert!(!out.exists(), "{filters:?}: output created");
    }
    // The compile error's column is reported.
    let ffile = dir.join("filters.txt");
    std::fs::write(&ffile, "x\ttcp port\n").unwrap();
    let o = sluice(&["split", "-r", &sample(), "--filters", s(&ffile), "--count"]);
    assert!(text(&o.stderr).contains("column"), "{}", text(&o.stderr));
    // Every bad line is reported, not only the first.
    std::fs::write(&ffile, "a\tudp port\nb\n\tip\n").unwrap();
    let o = sluice(&["split", "-r", &sample(), "--filters", s(&ffile), "--count"]);
    let err = text(&o.stderr);
    for l in 1..=3 {
        assert!(err.contains(&format!("filters.txt:{l}:")), "{err}");
    }
    // A missing filters file or capture is status 1 too.
    let o = sluice(&[
        "split",
        "-r",
        &sample(),
        "--filters",
        "/nonexistent/f",
        "--count",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let o = sluice(&[
        "split",
        "-r",
        "/nonexistent.pcap",
        "--filters",
        s(&ffile),
        "--count",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_capture_keeps_complete_packets() {
    let dir = tmp("trunc");
    let bytes = std::fs::read(sample()).unwrap();
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let ffile = dir.join("filters.txt");
    std::fs::write(&ffile, "all\t\nudp\tudp\n").unwrap();
    let out = dir.join("out");
    let o = sluice(&[
        "split",
        "-r",
        s(&cut),
        "--filters",
        s(&ffile),
        "--out-dir",
        s(&out),
        "--count",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(err.contains("cut.pcap"), "{err}");
    // A failed run prints no counts; the files keep every complete packet.
    assert_eq!(text(&o.stdout), "");
    for (i, (name, expr)) in [("all", ""), ("udp", "udp")].iter().enumerate() {
        let w = dir.join(format!("alone-{i}"));
        let f = sluice(&["filter", "-r", s(&cut), "-w", s(&w), expr]);
        assert_eq!(f.status.code(), Some(1));
        let a = std::fs::read(&w).unwrap();
        assert!(a == std::fs::read(out.join(format!("{name}.pcap"))).unwrap());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn usage_errors_exit_2() {
    let f = manifest("Cargo.toml");
    let f = s(&f);
    let sample = sample();
    for args in [
        vec!["split", "-r", &sample, "--filters", f],
        vec!["split", "-r", &sample, "--count"],
        vec![
            "split",
            "-r",
            &sample,
            "--filters",
            f,
            "--out-dir",
            "/tmp/x",
            "--json",
        ],
        vec!["split", "--filters", f, "--count", "--no-such-flag"],
    ] {
        assert_eq!(sluice(&args).status.code(), Some(2), "{args:?}");
    }
}

/// The merged classifier as machine code (the default) and interpreted
/// (`--engine interp`) give the same verdicts, first-match included.
#[test]
fn native_and_interpreted_engines_agree() {
    let dir = tmp("engines");
    let mut captures = vec![sample()];
    for name in ["mptcp-v0.pcap", "pim-packet-assortment.pcap", "vrrp.pcap"] {
        if let Some(p) = corpus::path(&format!("pcaps/{name}")).filter(|p| p.exists()) {
            captures.push(s(&p).to_string());
        }
    }
    for capture in &captures {
        let (filters, _) = filters_for(capture, &dir);
        let file = dir.join("filters.txt");
        std::fs::write(&file, &filters).unwrap();
        for extra in [&[][..], &["--first-match"][..]] {
            let run = |engine: &str| {
                let mut args = vec!["split", "-r", capture, "--filters", s(&file), "--verdicts"];
                args.extend_from_slice(extra);
                args.extend_from_slice(&["--engine", engine]);
                let o = sluice(&args);
                assert!(o.status.success(), "{}", text(&o.stderr));
                text(&o.stdout)
            };
            let native = run("native");
            assert!(native.lines().count() >= 10, "{capture}: {native}");
            assert_eq!(native, run("interp"), "{capture} {extra:?}");
        }
    }
}

/// `--count` of a pcap file runs on every core, batch by batch: its
/// counts equal the one-thread loop's (`--verdicts`, ones per row), on a
/// file of several batches, mapped or read from standard input; a file
/// cut short still prints no counts.
#[test]
fn counts_on_every_core_equal_the_verdicts() {
    let dir = tmp("cores");
    let bytes = std::fs::read(sample()).unwrap();
    // The sample's 14 packets 500 times: 7,000 packets, several batches.
    let mut big = bytes[..24].to_vec();
    for _ in 0..500 {
        big.extend_from_slice(&bytes[24..]);
    }
    let file = dir.join("big.pcap");
    std::fs::write(&file, &big).unwrap();
    let (filters, alone) = filters_for(&sample(), &dir);
    let ffile = dir.join("filters.txt");
    std::fs::write(&ffile, &filters).unwrap();
    let run = |extra: &str, f: &Path| {
        let o = sluice(&["split", "-r", s(f), "--filters", s(&ffile), extra]);
        (o.status.code(), text(&o.stdout), text(&o.stderr))
    };
    let (code, counts, err) = run("--count", &file);
    assert_eq!(code, Some(0), "{err}");
    let (code, verdicts, err) = run("--verdicts", &file);
    assert_eq!(code, Some(0), "{err}");
    let from_verdicts: Vec<String> = verdicts
        .lines()
        .map(|l| {
            let (name, row) = l.split_once('\t').unwrap();
            assert_eq!(row.len(), 7000);
            format!("{name}\t{}", row.bytes().filter(|b| *b == b'1').count())
        })
        .collect();
    assert_eq!(counts.lines().collect::<Vec<_>>(), from_verdicts);
    // 500 times each filter's count on the sample.
    for (line, a) in counts.lines().zip(&alone) {
        assert_eq!(line.split('\t').nth(1), Some(&*(500 * a.count).to_string()));
    }
    // A file is mapped and its packets go to the threads by place; from
    // standard input they are copied into the batches: the same counts.
    let piped = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["split", "-r", "-", "--filters", s(&ffile), "--count"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
    assert_eq!(text(&piped.stdout), counts);
    let cut = dir.join("cut.pcap");
    std::fs::write(&cut, &big[..big.len() - 10]).unwrap();
    let (code, out, err) = run("--count", &cut);
    assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    assert!(err.contains("cut.pcap"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
