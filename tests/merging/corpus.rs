//! The 600 corpus expressions merged, over every packet of the shared
//! corpus and every truncation of a sample of them: against each filter
//! run alone, and each filter alone against libpcap master's verdicts (the
//! corpus oracle).

use crate::support::*;
use flate2::read::GzDecoder;
use sluice_testsupport::corpus;
use std::collections::HashMap;
use std::io::Read;
use std::time::Instant;

/// `capture -> line -> verdicts` of an oracle file.
fn oracle(name: &str) -> HashMap<String, HashMap<usize, String>> {
    let path = corpus::path(name).expect("corpus");
    let mut s = String::new();
    GzDecoder::new(std::fs::File::open(path).expect("oracle file"))
        .read_to_string(&mut s)
        .expect("gzip");
    let mut out: HashMap<String, HashMap<usize, String>> = HashMap::new();
    for l in s.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        if f.len() >= 4 && f[2] == "OK" {
            out.entry(f[0].to_string())
                .or_default()
                .insert(f[1].parse().expect("line number"), f[3].to_string());
        }
    }
    out
}

#[test]
fn corpus_filters_merged_on_corpus_packets() {
    let Some(shared) = shared() else {
        corpus::skipped("merging");
        return;
    };
    let t0 = Instant::now();
    let exprs = sluice_workload::corpus_filters(&shared, 600).expect("expressions");
    assert_eq!(exprs.len(), 600);
    let opt = oracle("oracle/verdicts-master.tsv.gz");
    let unopt = oracle("oracle/verdicts-master-unopt.tsv.gz");
    // Every capture's packets, each with its capture and index for the
    // oracle.
    let mut pkts = Vec::new();
    let mut at = Vec::new();
    for path in corpus::pcaps() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        for (j, p) in corpus::packets(&path).into_iter().enumerate() {
            assert_eq!(p.linktype, 1, "{name}: Ethernet only");
            pkts.push(Pkt::new(p.data, p.wirelen, format!("{name} packet {j}")));
            at.push((name.clone(), j));
        }
    }
    let whole = pkts.len();
    let set = members(&exprs, false);
    let pkts = with_truncations(pkts, 41, 200);
    let want = expected(&set, &pkts);
    // Each filter alone is libpcap master's, optimised or not (the
    // optimiser drops loads whose value cannot change the result, so on
    // some truncated packets the two differ: either is right).
    let mut wrong = Vec::new();
    for (k, (cap, j)) in at.iter().enumerate() {
        for (i, m) in set.iter().enumerate() {
            let line = i + 1;
            let bit = |o: &HashMap<String, HashMap<usize, String>>| {
                o.get(cap)
                    .and_then(|c| c.get(&line))
                    .map(|v| v.as_bytes()[*j] == b'1')
            };
            let ours = want[k].binary_search(&(i as u32)).is_ok();
            let a = bit(&opt).unwrap_or_else(|| panic!("no oracle verdict for {cap}:{line}"));
            if ours != a && bit(&unopt) != Some(ours) && wrong.len() < 20 {
                wrong.push(format!("{cap}:{line} `{}` packet {j}: {ours}", m.expr));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "alone, not libpcap's:\n{}",
        wrong.join("\n")
    );
    let t1 = Instant::now();
    let engines = Engines::build(&set);
    let t2 = Instant::now();
    engines.check("corpus filters", &set, &pkts, &want);
    let matches: usize = want[..whole].iter().map(Vec::len).sum();
    println!(
        "600 corpus filters, {whole} corpus packets ({:.1} matches each) and {} truncations; \
         tree: {} nodes, {} run whole; reference {:.1?}, build {:.1?}, check {:.1?}",
        matches as f64 / whole as f64,
        pkts.len() - whole,
        engines.tree.stats().nodes,
        engines.tree.stats().whole,
        t1 - t0,
        t2 - t1,
        t2.elapsed()
    );
    // The diagram's answers above came from both kinds of leaf.
    let dag = engines.dag.stats();
    assert!(
        dag.fields > 100 && dag.lists > 10 && dag.rest > 0,
        "{dag:?}"
    );
}
