//! Five-tuple firewall rules (access control lists) in the manner of
//! ClassBench's ACL seeds, as pcap expressions, and traffic drawn from
//! them: the rule set a firewall or a per-service split has.
//!
//! A rule is a conjunction over the five-tuple: a source and a
//! destination prefix (any, /8 ... /32, most often /24 and /32), TCP, UDP
//! or any protocol, and a source and a destination port that is any, one
//! well-known or random port, `0-1023`, `1024-65535` or a short random
//! range. Rule `i` depends only on the seed and `i`, so the rules of
//! `(n, seed)` are the first `n` of `(m, seed)`. Each packet is drawn from
//! one rule, early rules more often (the square of a uniform draw picks
//! the rule, as real traffic favours some rules), with addresses and ports
//! inside it; one packet in five gets a random source address.
//!
//! ```
//! use sluice_workload::{acl_rules, acl_traffic};
//! let rules = acl_rules(100, 1);
//! assert_eq!(rules.len(), 100);
//! assert_eq!(acl_rules(10, 1)[..], rules[..10]);
//! let packets = acl_traffic(&rules, 1, 50);
//! assert!(packets.iter().all(|(f, wire)| f.len() == *wire as usize && f.len() >= 60));
//! ```

use crate::rng::{Rng, Stream};
use crate::traffic::checksum;

/// One five-tuple rule.
///
/// ```
/// let r = sluice_workload::AclRule {
///     src: (0x0a00_0000, 8),
///     dst: (0xc0a8_0101, 32),
///     proto: Some(6),
///     sport: (0, 65535),
///     dport: (1024, 65535),
/// };
/// assert_eq!(r.expression(), "src net 10.0.0.0/8 and dst host 192.168.1.1 and tcp and dst portrange 1024-65535");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclRule {
    /// Source prefix and its length (0: any source).
    pub src: (u32, u8),
    /// Destination prefix and its length (0: any destination).
    pub dst: (u32, u8),
    /// IP protocol (6 or 17), or any.
    pub proto: Option<u8>,
    /// Source ports, inclusive (`(0, 65535)`: any).
    pub sport: (u16, u16),
    /// Destination ports, inclusive.
    pub dport: (u16, u16),
}

const ANY_PORT: (u16, u16) = (0, 65535);

fn dotted(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        l => u32::MAX << (32 - u32::from(l)),
    }
}

impl AclRule {
    /// The rule as a pcap expression (`ip` for a rule that takes every
    /// IPv4 packet).
    ///
    /// ```
    /// let r = sluice_workload::acl_rules(1, 3)[0];
    /// assert!(!r.expression().is_empty());
    /// ```
    pub fn expression(&self) -> String {
        let mut parts = Vec::new();
        for (dir, (a, l)) in [("src", self.src), ("dst", self.dst)] {
            match l {
                0 => {}
                32 => parts.push(format!("{dir} host {}", dotted(a))),
                _ => parts.push(format!("{dir} net {}/{l}", dotted(a))),
            }
        }
        match self.proto {
            Some(6) => parts.push("tcp".to_string()),
            Some(17) => parts.push("udp".to_string()),
            Some(p) => parts.push(format!("ip proto {p}")),
            None => {}
        }
        for (dir, (a, b)) in [("src", self.sport), ("dst", self.dport)] {
            if (a, b) == ANY_PORT {
                continue;
            }
            parts.push(match a == b {
                true => format!("{dir} port {a}"),
                false => format!("{dir} portrange {a}-{b}"),
            });
        }
        if parts.is_empty() {
            return "ip".to_string();
        }
        parts.join(" and ")
    }

    fn draw(r: &mut Rng) -> AclRule {
        let proto = r.weighted_pick(&[(60, Some(6u8)), (30, Some(17)), (10, None)]);
        let src = prefix(r);
        let dst = prefix(r);
        let (sport, dport) = match proto {
            Some(_) => (ports(r), ports(r)),
            None => (ANY_PORT, ANY_PORT),
        };
        AclRule {
            src,
            dst,
            proto,
            sport,
            dport,
        }
    }
}

fn prefix(r: &mut Rng) -> (u32, u8) {
    let len = r.weighted_pick(&[
        (10, 0u8),
        (3, 8),
        (10, 16),
        (5, 20),
        (25, 24),
        (7, 28),
        (40, 32),
    ]);
    let first = u32::from(*r.pick(&[10u8, 172, 192, 100, 45]));
    let a = (first << 24) | (r.next_u32() & 0x00ff_ffff);
    (a & mask(len), len)
}

fn ports(r: &mut Rng) -> (u16, u16) {
    const WELL_KNOWN: [u16; 10] = [80, 443, 22, 25, 53, 123, 8080, 3306, 5432, 161];
    match r.weighted(&[50, 30, 8, 4, 8]) {
        0 => ANY_PORT,
        1 => {
            let p = match r.chance(0.1) {
                true => r.range(1, 65535) as u16,
                false => *r.pick(&WELL_KNOWN),
            };
            (p, p)
        }
        2 => (1024, 65535),
        3 => (0, 1023),
        _ => {
            let a = r.range(0, 64999) as u16;
            (a, a.saturating_add(r.range(1, 1999) as u16))
        }
    }
}

/// The first `n` rules of `seed`.
///
/// ```
/// assert_eq!(sluice_workload::acl_rules(3, 9), sluice_workload::acl_rules(3, 9));
/// ```
pub fn acl_rules(n: usize, seed: u64) -> Vec<AclRule> {
    (0..n)
        .map(|i| AclRule::draw(&mut Rng::new(seed, Stream::Acl, i as u64)))
        .collect()
}

/// `acl_rules(n, seed)` as `name<TAB>expression` lines, the format of
/// `sluice split --filters` and `sluice bench --filters`.
///
/// ```
/// let text = sluice_workload::acl_filters_file(2, 1);
/// assert!(text.starts_with("acl000000\t"));
/// assert_eq!(text.lines().count(), 2);
/// ```
pub fn acl_filters_file(n: usize, seed: u64) -> String {
    acl_rules(n, seed)
        .iter()
        .enumerate()
        .map(|(i, r)| format!("acl{i:06}\t{}\n", r.expression()))
        .collect()
}

fn inside(r: &mut Rng, (a, len): (u32, u8)) -> u32 {
    a | (r.next_u32() & !mask(len))
}

fn port_in(r: &mut Rng, (a, b): (u16, u16)) -> u16 {
    r.range(u64::from(a), u64::from(b)) as u16
}

/// `packets` Ethernet frames (IPv4, TCP or UDP, 60 bytes and more),
/// each drawn from one of `rules` (see the module doc), with their wire
/// lengths (the whole frame is captured).
///
/// ```
/// let rules = sluice_workload::acl_rules(10, 2);
/// let t = sluice_workload::acl_traffic(&rules, 2, 20);
/// assert_eq!(t[..5], sluice_workload::acl_traffic(&rules, 2, 5)[..]);
/// ```
pub fn acl_traffic(rules: &[AclRule], seed: u64, packets: usize) -> Vec<(Vec<u8>, u32)> {
    (0..packets)
        .map(|j| {
            let r = &mut Rng::new(seed, Stream::AclPacket, j as u64);
            let rule = match rules.len() {
                0 => AclRule::draw(r),
                n => {
                    let u = r.unit();
                    rules[((n as f64 * u * u) as usize).min(n - 1)]
                }
            };
            let mut src = inside(r, rule.src);
            if r.chance(0.2) {
                src = r.next_u32();
            }
            let dst = inside(r, rule.dst);
            let proto = rule.proto.unwrap_or(*r.pick(&[6u8, 17]));
            let (sp, dp) = (port_in(r, rule.sport), port_in(r, rule.dport));
            let mut l4 = Vec::with_capacity(20);
            l4.extend_from_slice(&sp.to_be_bytes());
            l4.extend_from_slice(&dp.to_be_bytes());
            match proto {
                6 => {
                    l4.extend_from_slice(&r.next_u32().to_be_bytes());
                    l4.extend_from_slice(&[0, 0, 0, 0, 0x50, 0x10, 0x20, 0, 0, 0, 0, 0]);
                }
                _ => l4.extend_from_slice(&[0, 8, 0, 0]),
            }
            let total = (20 + l4.len()) as u16;
            let mut ip = vec![0x45, 0];
            ip.extend_from_slice(&total.to_be_bytes());
            ip.extend_from_slice(&(j as u16).to_be_bytes());
            ip.extend_from_slice(&[0, 0, 64, proto, 0, 0]);
            ip.extend_from_slice(&src.to_be_bytes());
            ip.extend_from_slice(&dst.to_be_bytes());
            let sum = checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 8, 0];
            f.extend_from_slice(&ip);
            f.extend_from_slice(&l4);
            f.resize(f.len().max(60), 0);
            let wire = f.len() as u32;
            (f, wire)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each packet drawn from a rule (without the random source) lies
    /// inside it, and the rules have every kind of part.
    #[test]
    fn packets_lie_inside_their_rules() {
        let rules = acl_rules(2000, 5);
        let kinds = |f: &dyn Fn(&AclRule) -> bool| rules.iter().filter(|r| f(r)).count();
        assert!(kinds(&|r| r.src.1 == 0) > 100 && kinds(&|r| r.dst.1 == 32) > 500);
        assert!(kinds(&|r| r.proto.is_none()) > 100 && kinds(&|r| r.dport == (1024, 65535)) > 50);
        assert!(kinds(&|r| r.sport.0 != r.sport.1 && r.sport != ANY_PORT) > 100);
        let one = [rules[7]];
        for (f, _) in acl_traffic(&one, 1, 200) {
            let r = one[0];
            let dst = u32::from_be_bytes(f[30..34].try_into().unwrap());
            assert_eq!(dst & mask(r.dst.1), r.dst.0);
            if let Some(p) = r.proto {
                assert_eq!(f[23], p);
            }
            let dp = u16::from_be_bytes([f[36], f[37]]);
            assert!(r.dport.0 <= dp && dp <= r.dport.1);
        }
    }
}
