//! The native engine against the IR's reference interpreter: every corpus
//! expression on every packet of every corpus capture (and on every
//! truncation of each capture's first packets). Skipped when `../shared` is
//! absent.

use sluice::capture::CaptureReader;
use sluice::{LinkType, Program, Runner};
use std::collections::HashMap;
use std::path::Path;

struct Capture {
    name: String,
    linktype: u16,
    packets: Vec<(Vec<u8>, u32)>,
}

fn captures(dir: &Path) -> Vec<Capture> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(mut r) = CaptureReader::open(&f) else {
            continue;
        };
        let mut c = Capture {
            name: f.file_name().unwrap().to_string_lossy().into_owned(),
            linktype: r.linktype().unwrap_or(1),
            packets: Vec::new(),
        };
        while let Ok(Some(p)) = r.next_packet() {
            c.linktype = p.linktype;
            c.packets.push((p.data.to_vec(), p.wirelen));
        }
        out.push(c);
    }
    out
}

#[test]
fn native_equals_reference_on_the_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/conformance");
    if !root.is_dir() {
        println!("skipped: ../shared/conformance not found");
        return;
    }
    let exprs: Vec<String> = std::fs::read_to_string(root.join("expressions.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let caps = captures(&root.join("pcaps"));
    let mut programs: HashMap<(usize, u16), Option<Program>> = HashMap::new();
    let (mut checked, mut compiled, mut native) = (0u64, 0usize, 0usize);
    for c in &caps {
        let Some(lt) = LinkType::from_number(c.linktype as u32) else {
            continue;
        };
        for (n, e) in exprs.iter().enumerate() {
            let p = programs.entry((n, c.linktype)).or_insert_with(|| {
                let p = Program::builder(lt).expression(e).ok()?;
                compiled += 1;
                native += p.native().is_some() as usize;
                Some(p)
            });
            let Some(p) = p else { continue };
            let mut check = |data: &[u8], wirelen: u32| {
                let got = p.run_with(Runner::Native, data, wirelen);
                let want = p.run_reference(data, wirelen);
                assert_eq!(
                    got, want,
                    "{} '{e}' packet {data:02x?} wirelen {wirelen}",
                    c.name
                );
                checked += 1;
            };
            for (data, wirelen) in &c.packets {
                check(data, *wirelen);
            }
            for (data, wirelen) in c.packets.iter().take(2) {
                for cut in 0..data.len().min(128) {
                    check(&data[..cut], *wirelen);
                }
            }
        }
    }
    println!("{checked} verdicts checked, {native} of {compiled} programs native");
    assert!(compiled > 0 && native == compiled);
}
