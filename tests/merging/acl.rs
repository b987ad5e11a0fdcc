//! Five-tuple firewall rule sets (`sluice_workload::acl_rules`), merged,
//! against each filter run alone and against libpcap.

use crate::support::*;

fn run(n: usize, seed: u64, traffic: usize) {
    let rules = sluice_workload::acl_rules(n, seed);
    let exprs: Vec<String> = rules.iter().map(|r| r.expression()).collect();
    let set = members(&exprs, true);
    let t: Vec<Pkt> = sluice_workload::acl_traffic(&rules, seed, traffic)
        .into_iter()
        .enumerate()
        .map(|(k, (d, w))| Pkt::new(d, w, format!("acl_traffic({n}, {seed}) packet {k}")))
        .collect();
    let pkts = with_truncations(t, 25, 60);
    let want = expected(&set, &pkts);
    let engines = Engines::build(&set);
    engines.check(&format!("acl_rules({n}, {seed})"), &set, &pkts, &want);
    let matches: usize = want.iter().map(Vec::len).sum();
    println!(
        "acl_rules({n}, {seed}): {} packets, {:.2} matches per packet, tree of {} nodes",
        pkts.len(),
        matches as f64 / pkts.len() as f64,
        engines.tree.stats().nodes
    );
    assert!(matches > traffic, "the traffic matches the rules");
}

#[test]
fn acl_100_and_1000() {
    run(100, 1, 2000);
    run(1000, 2, 3000);
}
