//! Nothing lost or told falsely: a typo never touches an existing output
//! file, a failed run prints nothing on stdout, flags that would be ignored
//! are refused, a closed pipe ends quietly, errors say which side failed,
//! compressed captures are read or refused by name.

use super::common::{fresh_dir, s, sample, sluice, text};
use super::{hash, sluice_stdin};
use std::io::{Read, Write};
use std::process::{Command, Stdio};

#[test]
fn a_typo_never_changes_an_existing_output() {
    let dir = fresh_dir("typo");
    let keep = dir.join("keep.pcap");
    std::fs::copy(sample(), &keep).unwrap();
    let before = hash(&keep);
    // filter -w, with and without other outputs.
    for extra in [&[][..], &["--count"][..], &["--count", "--json"][..]] {
        let smp = sample();
        let mut args = vec!["filter", "-r", &smp, "-w", s(&keep)]
            .into_iter()
            .map(String::from)
            .collect::<Vec<_>>();
        args.extend(extra.iter().map(|a| a.to_string()));
        args.push("tcp prt 80".into());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = sluice(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_eq!(text(&o.stdout), "", "nothing on stdout: {args:?}");
        assert!(text(&o.stderr).contains("prt"), "{}", text(&o.stderr));
        assert_eq!(hash(&keep), before, "{args:?}");
    }
    // split --out-dir: an existing NAME.pcap stays as it was.
    let filters = dir.join("filters.txt");
    std::fs::write(&filters, "web\ttcp port 80\nbad\ttcp prt 80\n").unwrap();
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(sample(), out.join("web.pcap")).unwrap();
    let o = split_to(&filters, s(&out));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "");
    assert_eq!(hash(&out.join("web.pcap")), before);
    // flow -w: a bad filter in a flow leaves flow1.pcap alone.
    let flows = dir.join("flows");
    std::fs::create_dir_all(&flows).unwrap();
    std::fs::copy(sample(), flows.join("flow1.pcap")).unwrap();
    let spec = format!("(file,{}) -> (BPF,\"tcp prt 80\")", sample());
    let o = sluice(&["flow", "-w", s(&flows), &spec]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stdout), "");
    assert_eq!(hash(&flows.join("flow1.pcap")), before);
    // No temporary file is left behind.
    for d in [&dir, &out, &flows] {
        for e in std::fs::read_dir(d).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.ends_with(".tmp"), "{name} left in {}", d.display());
        }
    }
    // A good run replaces the file.
    let o = sluice(&["filter", "-r", &sample(), "-w", s(&keep), "arp"]);
    assert!(o.status.success());
    assert_ne!(hash(&keep), before);
}

/// `sluice split` of the sample with these filters into `out`, counting.
fn split_to(filters: &std::path::Path, out: &str) -> std::process::Output {
    sluice(&[
        "split",
        "-r",
        &sample(),
        "--filters",
        s(filters),
        "--out-dir",
        out,
        "--count",
    ])
}

#[test]
fn flags_that_would_be_ignored_are_refused() {
    let smp = sample();
    let refused: &[&[&str]] = &[
        &["filter", "-r", &smp, "--json", "tcp"],
        &["filter", "-r", &smp, "-y", "RAW", "-d", "tcp"],
        &["filter", "-y", "RAW", "tcp"],
        &["filter", "-r", &smp, "-x", "--count", "tcp"],
        &["filter", "-r", &smp, "-e", "-w", "/dev/null", "tcp"],
        &["filter", "-r", &smp, "-d", "--count", "tcp"],
        &["filter", "-r", &smp, "--print", "tcp"],
    ];
    for args in refused {
        let o = sluice(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout), "", "{args:?}");
    }
    // --count with --verdicts means something: the verdicts, then the count.
    let o = sluice(&["filter", "-r", &smp, "--verdicts", "--count", "arp"]);
    assert!(o.status.success());
    assert_eq!(text(&o.stdout), format!("1\n{}1\n", "0\n".repeat(13)));
}

#[test]
fn options_may_follow_the_expression() {
    let o = sluice(&["filter", "tcp", "port", "80", "-r", &sample(), "--count"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "5\n");
}

/// A capture of `n` copies of the sample's packets (a few MB of output).
fn big_capture(n: usize) -> std::path::PathBuf {
    let input = std::fs::read(sample()).unwrap();
    let mut out = input[..24].to_vec();
    for _ in 0..n {
        out.extend_from_slice(&input[24..]);
    }
    let path = fresh_dir("big").join("big.pcap");
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let big = big_capture(4000);
    for args in [
        vec!["filter", "-r", s(&big)],
        vec!["filter", "-r", s(&big), "--verdicts", ""],
        vec!["filter", "-r", s(&big), "-w", "-", ""],
        vec!["filter", "-r", s(&big), "-X"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = [0u8; 16];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut first)
            .unwrap();
        drop(child.stdout.take());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        // Printed packets are tcpdump's, which says so and names the file.
        let err = text(&o.stderr);
        let said: Vec<&str> = err
            .lines()
            .filter(|l| {
                !l.starts_with("sluice: tcpdump prints") && !l.starts_with("reading from file")
            })
            .collect();
        assert!(said.is_empty(), "{args:?}: {err}");
    }
}

#[test]
fn errors_say_which_side_failed() {
    let o = sluice(&["filter", "-r", "nonexist.pcap", ""]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        "sluice: cannot open input nonexist.pcap: No such file or directory\n"
    );
    let big = big_capture(2000);
    let o = sluice(&["filter", "-r", s(&big), "-w", "/dev/full", ""]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("sluice: cannot write output /dev/full: No space left on device (after ")
            && err.trim_end().ends_with(" packets)"),
        "{err}"
    );
    let filters = fresh_dir("side").join("f.txt");
    std::fs::write(&filters, "all\t\n").unwrap();
    let o = split_to(&filters, &sample());
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        text(&o.stderr),
        format!(
            "sluice: --out-dir {}: exists and is not a directory\n",
            sample()
        )
    );
}

#[test]
fn compressed_captures() {
    let raw = std::fs::read(sample()).unwrap();
    let dir = fresh_dir("compressed");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    let zst = zstd::encode_all(&raw[..], 3).unwrap();
    for (name, bytes) in [("s.pcap.gz", &gz), ("s.pcap.zst", &zst)] {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let o = sluice(&["filter", "-r", s(&path), "--count", "tcp port 80"]);
        assert_eq!(text(&o.stdout), "5\n", "{name}: {}", text(&o.stderr));
        let o = sluice_stdin(&["filter", "-r", "-", "--count", "udp"], bytes);
        assert_eq!(text(&o.stdout), "3\n", "{name} on stdin");
    }
    let xz = dir.join("s.pcap.xz");
    std::fs::write(&xz, [0xfd, b'7', b'z', b'X', b'Z', 0, 0, 4]).unwrap();
    let o = sluice(&["filter", "-r", s(&xz), ""]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("compressed with xz: decompress it first"),
        "{err}"
    );
}

#[test]
fn a_terminal_on_stdin_is_not_a_capture() {
    // `script` gives sluice a terminal on standard input (util-linux).
    let Ok(o) = Command::new("script")
        .args([
            "-qec",
            &format!("{} filter tcp", env!("CARGO_BIN_EXE_sluice")),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .output()
    else {
        return;
    };
    let all = text(&o.stdout);
    assert!(all.contains("no capture to read"), "{all}");
    assert_eq!(o.status.code(), Some(2), "{all}");
}

#[test]
fn snaplen_precision_and_print_on_write() {
    let dir = fresh_dir("write-opts");
    let out = dir.join("cut.pcap");
    let o = sluice(&[
        "filter",
        "-r",
        &sample(),
        "-w",
        s(&out),
        "-s",
        "40",
        "--time-stamp-precision",
        "nano",
        "--print",
        "-t",
        "-U",
        "tcp",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // (`tcp` leaves out the sample's VLAN-tagged TCP packet.)
    assert_eq!(text(&o.stdout).lines().count(), 6);
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(&bytes[..4], &[0x4d, 0x3c, 0xb2, 0xa1], "nanosecond pcap");
    assert_eq!(u32::from_le_bytes(bytes[16..20].try_into().unwrap()), 40);
    let mut r = sluice::capture::CaptureReader::from_reader(&bytes[..], "cut").unwrap();
    let mut n = 0;
    while let Some(p) = r.next_packet().unwrap() {
        assert!(p.caplen <= 40 && p.wirelen >= p.caplen);
        n += 1;
    }
    assert_eq!(n, 6);
}
