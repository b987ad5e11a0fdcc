//! Reads every capture of the shared conformance corpus and checks packet
//! counts, link types and sizes against what libpcap reported
//! (`pcaps-info.tsv`, and the per-packet expectations of `apply.jsonl`).
//! Skipped, with a message, when the corpus is not present.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, ErrorKind};

fn corpus() -> Option<PathBuf> {
    let root = sluice_testsupport::corpus::root();
    if root.is_none() {
        sluice_testsupport::corpus::skipped("capture conformance");
    }
    root
}

struct Summary {
    packets: usize,
    linktypes: Vec<u16>,
    end_offset: u64,
}

fn read(path: &Path) -> Summary {
    let mut r = CaptureReader::open(path).unwrap_or_else(|e| panic!("{e}"));
    let mut s = Summary {
        packets: 0,
        linktypes: Vec::new(),
        end_offset: 0,
    };
    while let Some(p) = r.next_packet().unwrap_or_else(|e| panic!("{e}")) {
        assert_eq!(p.caplen as usize, p.data.len());
        assert!(p.ts_nsec < 1_000_000_000);
        if !s.linktypes.contains(&p.linktype) {
            s.linktypes.push(p.linktype);
        }
        s.packets += 1;
    }
    s.end_offset = r.offset();
    s
}

/// Copies a file through the writer in its own format and checks that the
/// copy reads back with the same packets.
fn copy_matches(path: &Path) {
    let mut r = CaptureReader::open(path).unwrap();
    let mut w = CaptureWriter::new(Vec::new(), "copy", &r.format()).unwrap();
    let mut orig = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        orig.push((p.ts_sec, p.ts_nsec, p.wirelen, p.linktype, p.data.to_vec()));
        w.write_packet(&p).unwrap();
    }
    let bytes = w.finish().unwrap();
    let mut r2 = CaptureReader::from_reader(&bytes[..], "copy").unwrap();
    assert_eq!(r2.format(), r.format(), "{}", path.display());
    let mut i = 0;
    while let Some(p) = r2.next_packet().unwrap() {
        let o = &orig[i];
        assert_eq!(
            (p.ts_sec, p.ts_nsec, p.wirelen, p.linktype, p.data),
            (o.0, o.1, o.2, o.3, &o.4[..]),
            "{} packet {i}",
            path.display()
        );
        i += 1;
    }
    assert_eq!(i, orig.len());
}

#[test]
fn pcaps_match_libpcap_info() {
    let Some(dir) = corpus() else { return };
    let tsv = std::fs::read_to_string(dir.join("pcaps-info.tsv")).unwrap();
    let mut expected = HashMap::new();
    for line in tsv.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 6, "{line}");
        expected.insert(f[0].to_string(), f);
    }
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir.join("pcaps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let key = format!("pcaps/{}", path.file_name().unwrap().to_string_lossy());
        let f = expected
            .get(&key)
            .unwrap_or_else(|| panic!("{key} missing from pcaps-info.tsv"));
        let s = read(&path);
        assert_eq!(s.packets.to_string(), f[3], "{key}: packet count");
        let linktype: u16 = f[2].parse().unwrap();
        assert!(
            s.linktypes.iter().all(|&l| l == linktype),
            "{key}: link type"
        );
        assert_eq!(s.end_offset.to_string(), f[4], "{key}: bytes read");
        let r = CaptureReader::open(&path).unwrap();
        assert_eq!(r.linktype(), Some(linktype), "{key}: link type");
        assert_eq!(r.format().is_pcapng(), f[1] == "pcapng", "{key}: format");
        let snaplen = match r.format() {
            CaptureFormat::Pcap { snaplen, .. } => Some(snaplen),
            CaptureFormat::PcapNg {
                first_interface, ..
            } => first_interface.map(|i| i.snaplen),
        };
        assert_eq!(
            snaplen.map(|s| s.to_string()).as_deref(),
            Some(f[5]),
            "{key}: snaplen"
        );
        copy_matches(&path);
        checked += 1;
    }
    assert_eq!(checked, expected.len());
    println!("checked {checked} captures");
}

#[test]
fn libpcap_filter_captures_match_apply_tests() {
    let Some(dir) = corpus() else { return };
    let tests = dir.join("libpcap-tests");
    // Packet count per capture = length of `expected_returns` in apply.jsonl.
    let jsonl = std::fs::read_to_string(tests.join("apply.jsonl")).unwrap();
    let mut counts: HashMap<String, usize> = HashMap::new();
    for line in jsonl.lines() {
        let Some(file) = field(line, "\"savefile\": \"", '"') else {
            continue;
        };
        let Some(rets) = field(line, "\"expected_returns\": [", ']') else {
            continue;
        };
        let n = rets.split(',').filter(|x| !x.trim().is_empty()).count();
        let old = counts.insert(file.to_string(), n);
        assert!(
            old.is_none() || old == Some(n),
            "{file}: inconsistent counts"
        );
    }
    let mut checked = 0;
    for entry in std::fs::read_dir(tests.join("filter")).unwrap() {
        let path = entry.unwrap().path();
        let key = format!("filter/{}", path.file_name().unwrap().to_string_lossy());
        let s = read(&path);
        assert_eq!(s.linktypes.len(), 1, "{key}: one link type");
        let r = CaptureReader::open(&path).unwrap();
        assert_eq!(Some(s.linktypes[0]), r.linktype(), "{key}");
        assert_eq!(
            s.end_offset,
            std::fs::metadata(&path).unwrap().len(),
            "{key}"
        );
        if let Some(&n) = counts.get(&key) {
            assert_eq!(s.packets, n, "{key}: packet count");
        }
        copy_matches(&path);
        checked += 1;
    }
    println!("checked {checked} captures");
    assert!(checked > 0);
}

fn field<'a>(line: &'a str, start: &str, end: char) -> Option<&'a str> {
    let from = line.find(start)? + start.len();
    let len = line[from..].find(end)?;
    Some(&line[from..from + len])
}

/// libpcap's own "invalid savefile" tests: all refused.
#[test]
fn libpcap_invalid_savefiles_are_rejected() {
    let Some(dir) = corpus() else { return };
    let tests = dir.join("libpcap-tests");
    type Expect = fn(&ErrorKind) -> bool;
    let cases: [(&str, Expect); 6] = [
        ("pcap-invalid-version-1.pcap", |k| {
            matches!(k, ErrorKind::ArchaicVersion { major: 1, .. })
        }),
        ("pcap-invalid-version-2.pcap", |k| {
            matches!(
                k,
                ErrorKind::UnsupportedVersion {
                    major: 2,
                    minor: 5,
                    ..
                }
            )
        }),
        ("pcapng-invalid-vers-1.pcapng", |k| {
            matches!(
                k,
                ErrorKind::UnsupportedVersion {
                    major: 0,
                    minor: 1,
                    ..
                }
            )
        }),
        ("pcapng-invalid-vers-2.pcapng", |k| {
            matches!(
                k,
                ErrorKind::UnsupportedVersion {
                    major: 1,
                    minor: 1,
                    ..
                }
            )
        }),
        ("shb-option-too-long.pcapng", |k| {
            matches!(k, ErrorKind::BlockLengthMismatch { .. })
        }),
        ("linktype-reserved-field-not-zero.pcap", |k| {
            matches!(k, ErrorKind::ReservedLinkTypeBits(_))
        }),
    ];
    for (name, want) in cases {
        let path = tests.join(name);
        let e = CaptureReader::open(&path)
            .err()
            .unwrap_or_else(|| panic!("{name} accepted"));
        assert!(want(e.kind()), "{name}: {e}");
        assert!(e.file().ends_with(name));
        println!("{e}");
    }
}
