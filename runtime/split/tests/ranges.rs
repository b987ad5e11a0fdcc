//! A file split in byte ranges gives what the whole file gives: the same
//! counts, and per filter the same packets in the same order across the
//! ranges' files, whatever the cuts (corpus captures, pcap and pcapng).

use sluice_capture::{verify_chain, CaptureReader, ChainFault, RangeEnds};
use sluice_split::{filter_pairs, split, Options, Outputs, Part, Report, Splitter};
use sluice_testsupport::{corpus, Rng};
use std::path::{Path, PathBuf};

/// (seconds, nanoseconds, wire length, data) of each packet of a file.
fn packets(path: &Path) -> Vec<(i64, u32, u32, Vec<u8>)> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push((p.ts_sec, p.ts_nsec, p.wirelen, p.data.to_vec()));
    }
    out
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-split-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Split `path` in ranges cut at `cuts`, each range's files suffixed with
/// its number, reading again whatever `verify_chain` says.
fn by_ranges(path: &Path, set: &Splitter, cuts: &[u64], dir: &Path) -> Vec<Report> {
    let size = std::fs::metadata(path).unwrap().len();
    let mut bounds: Vec<u64> = cuts
        .iter()
        .copied()
        .filter(|&c| c > 0 && c < size)
        .collect();
    bounds.extend([0, size]);
    bounds.sort_unstable();
    bounds.dedup();
    let run = |i: usize, resume| {
        let part = Part {
            start: bounds[i],
            end: bounds[i + 1],
            resume,
        };
        let out = Outputs {
            dir: dir.to_path_buf(),
            suffix: format!(".{i:04}"),
            eager: false,
        };
        split(path, set, &part, Some(&out), &mut |_| true).unwrap()
    };
    let mut reports: Vec<Report> = (0..bounds.len() - 1).map(|i| run(i, None)).collect();
    loop {
        let ends: Vec<RangeEnds> = reports.iter().map(|r| r.ends.clone()).collect();
        match verify_chain(&ends) {
            Ok(()) => return reports,
            Err(ChainFault::Redo(i, cp)) => {
                // The range's wrong files are replaced or removed.
                for f in reports[i].files.iter().flatten() {
                    std::fs::remove_file(f).unwrap();
                }
                reports[i] = run(i, cp);
            }
            Err(ChainFault::Failed(i)) => {
                panic!(
                    "{}: range {i} failed: {:?}",
                    path.display(),
                    reports[i].error
                )
            }
        }
    }
}

#[test]
fn ranges_equal_the_whole_file() {
    let mut pcaps = corpus::pcaps();
    if pcaps.is_empty() {
        return corpus::skipped("split ranges");
    }
    // The largest captures of each format: the most records to cut between.
    pcaps.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).unwrap().len()));
    let ng: Vec<PathBuf> = pcaps
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pcapng"))
        .take(3)
        .cloned()
        .collect();
    let mut chosen: Vec<PathBuf> = pcaps
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e != "pcapng"))
        .take(4)
        .cloned()
        .collect();
    chosen.extend(ng);
    let exprs = corpus::lines("expressions.txt").unwrap();
    let pairs: Vec<(String, String)> = exprs
        .iter()
        .take(40)
        .enumerate()
        .map(|(i, e)| (format!("f{i}"), e.clone()))
        .chain([("all".to_string(), String::new())])
        .collect();
    let mut rng = Rng::new(20);
    let mut compared = 0;
    for first_match in [false, true] {
        let set = Splitter::new(
            filter_pairs(pairs.clone()).unwrap(),
            Options {
                first_match,
                ..Options::default()
            },
        );
        for path in &chosen {
            let size = std::fs::metadata(path).unwrap().len();
            let whole_dir = scratch("whole");
            let whole = Outputs {
                dir: whole_dir.clone(),
                suffix: String::new(),
                eager: true,
            };
            let all = split(path, &set, &Part::whole(), Some(&whole), &mut |_| true).unwrap();
            if all.error.is_some() {
                continue; // a deliberately broken capture: nothing to compare
            }
            for _ in 0..4 {
                let cuts: Vec<u64> = (0..1 + rng.below(5))
                    .map(|_| rng.below(size as usize) as u64)
                    .collect();
                let dir = scratch("ranges");
                let parts = by_ranges(path, &set, &cuts, &dir);
                let packets_in_parts: u64 = parts.iter().map(|r| r.packets).sum();
                assert_eq!(
                    packets_in_parts,
                    all.packets,
                    "{} cut at {cuts:?}",
                    path.display()
                );
                for (i, f) in set.filters().iter().enumerate() {
                    let count: u64 = parts.iter().map(|r| r.counts[i]).sum();
                    assert_eq!(count, all.counts[i], "{} {}", path.display(), f.name);
                    let joined: Vec<_> = parts
                        .iter()
                        .filter_map(|r| r.files[i].as_deref())
                        .flat_map(packets)
                        .collect();
                    let single = packets(all.files[i].as_deref().unwrap());
                    assert!(
                        joined == single,
                        "{} cut at {cuts:?}: {}",
                        path.display(),
                        f.name
                    );
                }
                std::fs::remove_dir_all(&dir).ok();
                compared += 1;
            }
            std::fs::remove_dir_all(&whole_dir).unwrap();
        }
    }
    assert!(compared >= 40, "only {compared} splits compared");
}

#[test]
fn bad_filters_are_reported_with_their_column_before_anything_is_written() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
    let set = Splitter::new(
        filter_pairs([("ok", "tcp"), ("bad", "tcp port"), ("worse", "udp prt 53")]).unwrap(),
        Options::default(),
    );
    let dir = scratch("bad");
    let out = Outputs {
        dir: dir.clone(),
        suffix: String::new(),
        eager: true,
    };
    let e = split(
        sample.as_ref(),
        &set,
        &Part::whole(),
        Some(&out),
        &mut |_| true,
    )
    .unwrap_err();
    let sluice_split::SplitError::Filters(bad) = &e else {
        panic!("{e}");
    };
    let names: Vec<&str> = bad.iter().map(|b| b.filter.name.as_str()).collect();
    assert_eq!(names, ["bad", "worse"]);
    assert_eq!(bad[0].error.column(), Some(9), "{}", bad[0].error);
    assert!(!dir.exists(), "nothing is written");
}

#[test]
fn the_progress_callback_stops_a_run() {
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
    let set = Splitter::new(filter_pairs([("all", "")]).unwrap(), Options::default());
    // sample.pcap is smaller than one progress step: the callback is not
    // called, the run ends normally.
    let r = split(sample.as_ref(), &set, &Part::whole(), None, &mut |_| false).unwrap();
    assert!(r.error.is_none());
    assert_eq!(r.counts[0], r.packets);
}
