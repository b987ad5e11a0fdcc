//! Generated heterogeneous sets: `filter_set(N, seed)` over
//! `traffic(N, seed, P)`, the traffic drawn from the same customers so
//! that each packet matches a few filters.

use crate::config::{Config, ONE_BY_ONE_MAX};
use crate::packets::Packets;
use crate::report::Record;
use crate::set::{measure, Plan};
use sluice_workload::Workload;
use std::time::Instant;

/// Tuple space search (one probe per shape) runs up to this many filters.
pub const TUPLE_SPACE_MAX: usize = 10_000;

/// Measure each N.
pub fn run(cfg: &Config, sizes: &[usize], lib: &sluice::libpcap::Libpcap) {
    for &n in sizes {
        let w = Workload::new(n, cfg.seed);
        let texts = w.expressions();
        eprintln!("generated: {n} filters (seed {})", cfg.seed);
        let input = || {
            let t = Instant::now();
            let packets = Packets::new(&w.traffic(cfg.traffic_packets()));
            eprintln!(
                "  {} packets ({} bytes), made in {:.1} s",
                packets.len(),
                packets.bytes(),
                t.elapsed().as_secs_f64()
            );
            let plan = Plan {
                one_by_one: (n <= ONE_BY_ONE_MAX).then(|| cfg.one_by_one_packets(n, packets.len())),
                tuple_space: n <= TUPLE_SPACE_MAX,
                libpcap_known: Default::default(),
            };
            (packets, plan)
        };
        let mut r = Record::default();
        r.put("seed", cfg.seed);
        measure(cfg, &texts, input, lib, &mut r);
        r.write(cfg, "generated");
    }
}
