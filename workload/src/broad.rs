//! Broad mixes: random pcap expressions of every shape, with constants
//! taken from the packets they will run on, so that many of them match
//! most packets.
//!
//! The generated sets ([`crate::filter_set`]) are rules of a few hundred
//! shapes, each selective: a packet matches a handful. A broad mix is the
//! other end: expressions of the kind the differential tests draw
//! (`not`, `or` across protocols and fields, lengths, byte tests, flags,
//! protocols, hosts, nets and ports), nested up to three deep, whose
//! constants are read from a packet of the traffic (an address, a port, a
//! byte at an offset), so that a `not`, an `or` or a loose comparison
//! matches a large share of the traffic. Added to the corpus's
//! expressions (`corpus_filters`) they make the benchmark's broad mix,
//! where a packet of the shared corpus matches about a hundred and fifty
//! filters of about a thousand.
//!
//! ```
//! let pkts = vec![(vec![0u8; 60], 60)];
//! let a = sluice_workload::broad_expressions(&pkts, 20, 1, |_| true);
//! assert_eq!(a.len(), 20);
//! assert_eq!(a[..5], sluice_workload::broad_expressions(&pkts, 5, 1, |_| true)[..]);
//! ```

use crate::rng::{Rng, Stream};
use std::fmt::Write;

/// `n` random expressions (see the module doc) that `keep` accepts, with
/// constants from `packets` (Ethernet frames: captured bytes and wire
/// length). Draw `i` depends only on `(packets, seed, i)`, and draws are
/// kept in order, so a shorter list is a prefix of a longer one. `keep`
/// drops what the compiler refuses: a draw may contradict itself (`arp
/// and not arp`), which libpcap rejects as matching nothing. With no
/// packets, constants are drawn at random.
pub fn broad_expressions(
    packets: &[(Vec<u8>, u32)],
    n: usize,
    seed: u64,
    mut keep: impl FnMut(&str) -> bool,
) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut i = 0u64;
    while out.len() < n {
        let mut rng = Rng::new(seed, Stream::Broad, i);
        i += 1;
        let pkt: &[u8] = match packets.len() {
            0 => &[],
            len => &packets[rng.index(len)].0,
        };
        let e = Gen { rng, pkt }.expr(3);
        if keep(&e) {
            out.push(e);
        }
    }
    out
}

/// The benchmark's broad mix: the first `corpus` expressions of the
/// shared corpus, then `generated` [`broad_expressions`] with constants
/// from the corpus's Ethernet packets (`seed` 1 in the benchmarks).
/// (`keep` as for [`broad_expressions`]). `broad_mix(dir, 600, 356, 1,
/// compiles)` is the 956-filter set of issue 33.
///
/// ```no_run
/// let set = sluice_workload::broad_mix("../shared".as_ref(), 600, 356, 1, |_| true)?;
/// assert_eq!(set.len(), 956);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn broad_mix(
    shared_dir: &std::path::Path,
    corpus: usize,
    generated: usize,
    seed: u64,
    keep: impl FnMut(&str) -> bool,
) -> std::io::Result<Vec<String>> {
    let mut set = crate::corpus_filters(shared_dir, corpus)?;
    let packets = crate::corpus_packets(shared_dir)?;
    set.extend(broad_expressions(&packets, generated, seed, keep));
    Ok(set)
}

/// A generator drawing its constants from one packet.
struct Gen<'a> {
    rng: Rng,
    pkt: &'a [u8],
}

impl Gen<'_> {
    /// The byte at `off` of the packet, or a random one past its end.
    fn byte(&mut self, off: usize) -> u8 {
        match self.pkt.get(off) {
            Some(b) => *b,
            None => self.rng.next_u32() as u8,
        }
    }

    fn half(&mut self, off: usize) -> u16 {
        u16::from_be_bytes([self.byte(off), self.byte(off + 1)])
    }

    /// The IPv4 header's offset when the packet is IPv4 (after at most one
    /// VLAN tag).
    fn ip4(&self) -> Option<usize> {
        let et = |o: usize| {
            self.pkt
                .get(o..o + 2)
                .map(|b| u16::from_be_bytes([b[0], b[1]]))
        };
        match et(12)? {
            0x0800 => Some(14),
            0x8100 if et(16)? == 0x0800 => Some(18),
            _ => None,
        }
    }

    /// An IPv4 address of the packet (source or destination), or a random
    /// one.
    fn addr(&mut self) -> [u8; 4] {
        match self.ip4() {
            Some(ip) if self.pkt.len() >= ip + 20 => {
                let at = ip + if self.rng.chance(0.5) { 12 } else { 16 };
                [
                    self.pkt[at],
                    self.pkt[at + 1],
                    self.pkt[at + 2],
                    self.pkt[at + 3],
                ]
            }
            _ => [
                10,
                self.rng.below(4) as u8,
                self.rng.below(256) as u8,
                1 + self.rng.below(254) as u8,
            ],
        }
    }

    /// A transport port of the packet, or a common one.
    fn port(&mut self) -> u16 {
        if let Some(ip) = self.ip4() {
            let ihl = usize::from(self.byte(ip) & 0x0f) * 4;
            let at = ip + ihl + if self.rng.chance(0.5) { 0 } else { 2 };
            if ihl >= 20 && self.pkt.len() >= at + 2 {
                return self.half(at);
            }
        }
        *self.rng.pick(&[22, 53, 80, 123, 443, 8080, 5060, 1900])
    }

    fn dir(&mut self) -> &'static str {
        const DIRS: [&str; 5] = ["", "", "src ", "dst ", "src or dst "];
        DIRS[self.rng.index(DIRS.len())]
    }

    fn expr(&mut self, depth: usize) -> String {
        if depth == 0 || self.rng.chance(0.4) {
            return self.leaf();
        }
        match self.rng.below(10) {
            0..=2 => {
                let x = self.expr(depth - 1);
                format!("not ({x})")
            }
            k => {
                let a = self.expr(depth - 1);
                let b = self.expr(depth - 1);
                let op = if k % 2 == 0 { "and" } else { "or" };
                format!("({a} {op} {b})")
            }
        }
    }

    fn leaf(&mut self) -> String {
        let cmp = ["=", "!=", ">", "<", ">=", "<="];
        match self.rng.below(16) {
            0 => self
                .rng
                .pick(&[
                    "ip",
                    "ip6",
                    "arp",
                    "tcp",
                    "udp",
                    "icmp",
                    "icmp6",
                    "vlan",
                    "mpls",
                    "igmp",
                    "ip6 and tcp",
                    "ip and udp",
                    "sctp",
                    "pppoes",
                ])
                .to_string(),
            1 | 2 => {
                let a = self.addr();
                let d = self.dir();
                format!("{d}host {}.{}.{}.{}", a[0], a[1], a[2], a[3])
            }
            3 => {
                let a = self.addr();
                let d = self.dir();
                match self.rng.below(3) {
                    0 => format!("{d}net {}.{}.{}.0/24", a[0], a[1], a[2]),
                    1 => format!("{d}net {}.{}.0.0/16", a[0], a[1]),
                    _ => format!("{d}net {}.0.0.0/8", a[0]),
                }
            }
            4 | 5 => {
                let p = self.port();
                let q = *self.rng.pick(&["", "tcp ", "udp "]);
                let d = self.dir();
                format!("{q}{d}port {p}")
            }
            6 => {
                let p = self.port();
                let lo = p.saturating_sub(self.rng.below(1000) as u16);
                let hi = p.saturating_add(self.rng.below(1000) as u16);
                format!("{}portrange {lo}-{hi}", self.dir())
            }
            7 => {
                let n = self.pkt.len().max(60) as u64;
                let l = n.saturating_sub(40) + self.rng.below(80);
                let op = *self
                    .rng
                    .pick(&["len > ", "len < ", "len >= ", "less ", "greater "]);
                format!("{op}{l}")
            }
            8 | 9 => {
                let off = self.rng.index(self.pkt.len().clamp(14, 64));
                let v = self.byte(off);
                let op = *self.rng.pick(&cmp);
                match self.rng.below(3) {
                    0 => {
                        let op = *self.rng.pick(&["=", ">", "<", "&"]);
                        format!("byte {off} {op} {v}")
                    }
                    1 => format!("ether[{off}] {op} {v}"),
                    _ => format!("ether[{off}] & 0x{:02x} != 0", v | 1),
                }
            }
            10 => {
                let off = self.rng.index(20);
                let v = match self.ip4() {
                    Some(ip) => self.byte(ip + off),
                    None => self.rng.next_u32() as u8,
                };
                let op = *self.rng.pick(&cmp);
                format!("ip[{off}] {op} {v}")
            }
            11 => self
                .rng
                .pick(&[
                    "tcp[tcpflags] & tcp-syn != 0",
                    "tcp[tcpflags] & tcp-ack != 0",
                    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
                    "tcp[tcpflags] & (tcp-fin|tcp-rst) != 0",
                    "tcp[13] & 8 = 8",
                    "icmp[icmptype] == icmp-echo",
                    "icmp[icmptype] != icmp-echoreply",
                    "icmp6[icmp6type] == icmp6-echo",
                    "ip[6:2] & 0x1fff = 0",
                    "ip[8] > 32",
                    "udp[8:2] != 0",
                ])
                .to_string(),
            12 => {
                let p = *self.rng.pick(&[1, 6, 17, 47, 50, 58, 89, 132]);
                format!("{}proto {p}", self.rng.pick(&["ip ", "ip6 ", ""]))
            }
            13 => {
                let at = if self.rng.chance(0.5) { 0 } else { 6 };
                let mut s = String::from("ether ");
                s.push_str(if at == 0 { "dst " } else { "src " });
                for i in 0..6 {
                    let b = self.byte(at + i);
                    let _ = write!(s, "{}{b:02x}", if i == 0 { "" } else { ":" });
                }
                s
            }
            14 => {
                let et = self.half(12);
                format!("ether proto 0x{et:04x}")
            }
            _ => {
                let off = self.rng.index(self.pkt.len().clamp(16, 60) - 1);
                let v = self.half(off);
                let op = *self.rng.pick(&cmp);
                format!("ether[{off}:2] {op} 0x{v:04x}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_come_from_the_packets() {
        let mut f = vec![0u8; 54];
        f[12] = 8;
        f[14] = 0x45;
        f[26..30].copy_from_slice(&[192, 0, 2, 7]);
        f[30..34].copy_from_slice(&[192, 0, 2, 7]);
        let pkts = vec![(f, 54)];
        let all = broad_expressions(&pkts, 400, 3, |_| true).join("\n");
        assert!(all.contains("host 192.0.2.7"), "{all}");
        assert!(all.contains("not ("));
        assert!(all.contains(" or "));
    }
}
