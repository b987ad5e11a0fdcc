//! Compressed captures split as their plain form does (read whole, never
//! in ranges), and fragment dispatch and MPF sets through the library.

use sluice_split::{filter_pairs, split, split_reader, Options, Part, SplitError, Splitter};
use std::io::Write;

fn sample() -> Vec<u8> {
    std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/sample.pcap"
    ))
    .unwrap()
}

fn set(options: Options) -> Splitter {
    let f = filter_pairs([
        ("tcp", "tcp"),
        ("udp", "udp"),
        ("vlan", "vlan"),
        ("all", ""),
    ])
    .unwrap();
    Splitter::new(f, options)
}

#[test]
fn gzip_splits_as_the_plain_capture() {
    let raw = sample();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&raw).unwrap();
    let gz = gz.finish().unwrap();
    let s = set(Options::default());
    let plain = split_reader(
        std::io::Cursor::new(raw),
        "p",
        &s,
        &Part::whole(),
        None,
        &mut |_| true,
    )
    .unwrap();
    let zipped = split_reader(
        std::io::Cursor::new(gz.clone()),
        "z",
        &s,
        &Part::whole(),
        None,
        &mut |_| true,
    )
    .unwrap();
    assert!(plain.error.is_none() && zipped.error.is_none());
    assert_eq!(plain.counts, zipped.counts);
    assert_eq!(plain.packets, zipped.packets);
    assert!(plain.counts[3] > 0);
    // A file on disk too.
    let dir = std::env::temp_dir().join(format!("sluice-split-gz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.pcap.gz");
    std::fs::write(&path, &gz).unwrap();
    let on_disk = split(&path, &s, &Part::whole(), None, &mut |_| true).unwrap();
    assert_eq!(on_disk.counts, plain.counts);
    // Ranges of a compressed capture are refused, naming it.
    let part = Part {
        start: 0,
        end: 100,
        resume: None,
    };
    match split(&path, &s, &part, None, &mut |_| true) {
        Err(SplitError::Settings(m)) => assert!(m.contains("s.pcap.gz"), "{m}"),
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fragments_and_mpf_report_their_counters() {
    let s = set(Options {
        fragments: Some(Default::default()),
        ..Options::default()
    });
    let r = split_reader(
        std::io::Cursor::new(sample()),
        "f",
        &s,
        &Part::whole(),
        None,
        &mut |_| true,
    )
    .unwrap();
    let c = r.fragments.expect("fragment counters");
    assert_eq!(c.packets, r.packets);
    assert!(c.balanced(0));
    // Not every filter is an MPF program: each bad one is named.
    let m = set(Options {
        mpf: Some(Default::default()),
        ..Options::default()
    });
    match split_reader(
        std::io::Cursor::new(sample()),
        "m",
        &m,
        &Part::whole(),
        None,
        &mut |_| true,
    ) {
        Err(SplitError::Programs(bad)) => assert_eq!(bad.len(), 4, "{bad:?}"),
        other => panic!("{other:?}"),
    }
}
