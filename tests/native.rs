//! The native engine against the IR's reference interpreter: every corpus
//! expression on every packet of every corpus capture (and on every
//! truncation of each capture's first packets). Skipped when `../shared` is
//! absent.

use sluice::{LinkType, Program, Runner};
use sluice_testsupport::corpus;
use std::collections::HashMap;

struct Capture {
    name: String,
    linktype: u16,
    packets: Vec<(Vec<u8>, u32)>,
}

/// Every corpus capture, with the link type of its last packet (or of its
/// first interface).
fn captures() -> Vec<Capture> {
    corpus::pcaps()
        .iter()
        .filter_map(corpus::Capture::read)
        .map(|c| Capture {
            linktype: c.linktype(),
            name: c.name,
            packets: c.packets.into_iter().map(|p| (p.data, p.wirelen)).collect(),
        })
        .collect()
}

#[test]
fn native_equals_reference_on_the_corpus() {
    let Some(exprs) = corpus::lines("expressions.txt") else {
        corpus::skipped("native");
        return;
    };
    let caps = captures();
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
