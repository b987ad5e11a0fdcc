//! Traffic whose flows repeat: packets drawn from a fixed set of flows,
//! each packet a copy of its flow's first packet with what changes from
//! packet to packet along a real flow changed (IPv4 identification, TCP
//! sequence and acknowledgement numbers).
//!
//! [`crate::traffic`] draws every packet afresh from the customers'
//! addresses, ports and payload words, so a packet rarely repeats another
//! one's headers: the case a flow cache cannot help. Captures of real
//! traffic are the other case: a few flows carry most packets. This
//! generator gives the benchmark that case over the same universe.
//!
//! ```
//! let t = sluice_workload::flow_traffic(100, 1, 1000, 50);
//! assert_eq!(t.len(), 1000);
//! assert_eq!(t, sluice_workload::flow_traffic(100, 1, 1000, 50));
//! ```

use crate::rng::{Rng, Stream};

/// `packets` frames of the traffic for `filter_set(n, seed)` drawn from
/// `flows` flows (the first `flows` packets of [`crate::traffic`]), flow
/// `f` with weight `1 / (f + 1)` (a few large flows and many small ones,
/// as in captures).
pub fn flow_traffic(n: usize, seed: u64, packets: usize, flows: usize) -> Vec<(Vec<u8>, u32)> {
    let heads = crate::traffic(n, seed, flows.max(1));
    // Cumulative Zipf weights.
    let mut cum = Vec::with_capacity(heads.len());
    let mut total = 0.0;
    for f in 0..heads.len() {
        total += 1.0 / (f as f64 + 1.0);
        cum.push(total);
    }
    (0..packets)
        .map(|i| {
            let mut rng = Rng::new(seed, Stream::FlowPacket, i as u64);
            let x = rng.unit() * total;
            let f = cum.partition_point(|&c| c < x).min(heads.len() - 1);
            let (mut data, wire) = heads[f].clone();
            vary(&mut data, &mut rng);
            (data, wire)
        })
        .collect()
}

/// Change what changes along a flow: the IPv4 identification, TCP's
/// sequence and acknowledgement numbers (after up to two VLAN tags).
fn vary(d: &mut [u8], rng: &mut Rng) {
    let half = |d: &[u8], o: usize| d.get(o..o + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = 12;
    while matches!(half(d, at), Some(0x8100 | 0x88a8)) {
        at += 4;
    }
    let l3 = at + 2;
    if half(d, at) != Some(0x0800) || d.len() < l3 + 20 {
        return;
    }
    let id = rng.next_u32().to_be_bytes();
    d[l3 + 4..l3 + 6].copy_from_slice(&id[..2]);
    let ihl = usize::from(d[l3] & 0xf) * 4;
    let l4 = l3 + ihl;
    if d[l3 + 9] == 6 && d.len() >= l4 + 12 {
        let seq = rng.next_u64().to_be_bytes();
        d[l4 + 4..l4 + 12].copy_from_slice(&seq);
    }
}
