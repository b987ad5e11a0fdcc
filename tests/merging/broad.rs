//! Broad mixes (`sluice_workload::broad_mix`): corpus expressions and
//! random ones of every shape whose constants come from the corpus's
//! packets, so that a packet matches a large share of the filters. Every
//! engine, and the native tree's flow cache, against each filter run
//! alone; the random ones alone against libpcap.

use crate::support::*;
use sluice_testsupport::corpus;
use std::time::Instant;

fn run(corpus_n: usize, generated: usize, seed: u64, every: usize) {
    let Some(shared) = shared() else {
        corpus::skipped("merging broad mixes");
        return;
    };
    let t0 = Instant::now();
    let compiles = |e: &str| {
        sluice::Program::builder(sluice::LinkType::EN10MB)
            .build(e)
            .is_ok()
    };
    let exprs = sluice_workload::broad_mix(&shared, corpus_n, generated, seed, compiles)
        .expect("the corpus");
    // The random expressions alone are compared with libpcap (the corpus
    // expressions are, with libpcap master's verdicts, in `corpus`).
    let mut set = members(&exprs[..corpus_n], false);
    let mut random = members(&exprs[corpus_n..], true);
    for m in random.iter_mut().filter(|m| byteop_bug(&m.expr)) {
        m.libpcap = None;
    }
    set.extend(random);
    let pkts: Vec<Pkt> = sluice_workload::corpus_packets(&shared)
        .expect("corpus packets")
        .into_iter()
        .enumerate()
        .skip(seed as usize % every)
        .step_by(every)
        .map(|(k, (d, w))| Pkt::new(d, w, format!("corpus packet {k}")))
        .collect();
    let whole = pkts.len();
    let pkts = with_truncations(pkts, 13, 120);
    let want = expected(&set, &pkts);
    let t1 = Instant::now();
    let engines = Engines::build(&set);
    let t2 = Instant::now();
    let what = format!("broad_mix({corpus_n}, {generated}, {seed})");
    engines.check(&what, &set, &pkts, &want);
    let matches: usize = want[..whole].iter().map(Vec::len).sum();
    let per = matches as f64 / whole as f64;
    println!(
        "{what}: {whole} corpus packets ({per:.1} matches each) and {} truncations; \
         reference {:.1?}, build {:.1?}, check {:.1?}",
        pkts.len() - whole,
        t1 - t0,
        t2 - t1,
        t2.elapsed()
    );
    assert!(
        per > exprs.len() as f64 / 20.0,
        "a broad mix: packets match many filters ({per:.1} of {})",
        exprs.len()
    );
}

/// Does the expression use `byte N & V` or `byte N | V`? Debian's
/// libpcap 1.10.3 compiles those without loading the byte (its
/// `gen_byteop` emits the AND or OR on whatever the accumulator holds:
/// `tcpdump -d 'ether[13] >= 6 or not (byte 29 & 168)'` tests
/// `ether[13] & 0xa8`), so they are compared with each filter run alone
/// only (libpcap master, which loads the byte, is compared in the
/// differential tests).
fn byteop_bug(e: &str) -> bool {
    let w: Vec<&str> = e
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')')
        .filter(|w| !w.is_empty())
        .collect();
    w.windows(3)
        .any(|x| x[0] == "byte" && x[1].parse::<u32>().is_ok() && matches!(x[2], "&" | "|"))
}

#[test]
fn byteop_bug_finds_the_operators() {
    assert!(byteop_bug("not (byte 29 & 168)"));
    assert!(byteop_bug("tcp or byte 3 | 1"));
    assert!(!byteop_bug("byte 29 = 168 and ether[2] & 1 != 0"));
}

#[test]
fn broad_mix_of_200() {
    run(100, 100, 1, 5);
}

#[test]
fn broad_mix_of_956() {
    run(600, 356, 1, 11);
}
