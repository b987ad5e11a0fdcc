//! The shared corpus: every Ethernet packet of `conformance/pcaps` as one
//! capture, with the first N expressions of `conformance/expressions.txt`.

use crate::config::Config;
use crate::packets::Packets;
use crate::report::Record;
use crate::set::{measure, Plan};

/// Measure each N (every engine on every packet of the corpus).
pub fn run(cfg: &Config, sizes: &[usize], lib: &sluice::libpcap::Libpcap) {
    let most = sizes.iter().copied().max().unwrap_or(0);
    let all = sluice_workload::corpus_filters(&cfg.shared, most).unwrap_or_else(|e| {
        panic!(
            "{}/conformance/expressions.txt: {e} (set SLUICE_SHARED)",
            cfg.shared.display()
        )
    });
    for &n in sizes {
        assert!(
            n <= all.len(),
            "the corpus has {} expressions, not {n}",
            all.len()
        );
        eprintln!("corpus: {n} expressions");
        let input = || {
            let frames = sluice_workload::corpus_packets(&cfg.shared)
                .unwrap_or_else(|e| panic!("{}/conformance/pcaps: {e}", cfg.shared.display()));
            let packets = Packets::new(&frames);
            eprintln!("  {} packets ({} bytes)", packets.len(), packets.bytes());
            let known = crate::oracle::libpcap_deviations(&cfg.shared);
            let plan = Plan {
                one_by_one: Some(packets.len()),
                tuple_space: true,
                libpcap_known: known.into_iter().filter(|&i| i < n).collect(),
            };
            (packets, plan)
        };
        let mut r = Record::default();
        measure(cfg, &all[..n], input, lib, &mut r);
        r.write(cfg, "corpus");
    }
}
