//! The universe both generators draw their constants from: customers, each
//! with its own IPv4 /16 and IPv6 /48, hosts in a few subnets of them, a
//! VLAN, an MPLS label, service ports, a port range and payload words; and
//! the addresses of the outside world, disjoint from every customer's.
//!
//! Customer `c`'s attributes depend only on the seed and `c`. Blocks, VLANs
//! and labels come from bijections of `c` (odd multipliers modulo a power
//! of two, or a multiplier modulo a prime), so distinct customers get
//! distinct /16s (up to 32,768 customers), /48s (262,144), VLANs (4,093)
//! and labels (524,288) before any wraps around.

use crate::rng::{Rng, Stream};
use crate::Mix;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A transport protocol of a service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    Tcp,
    Udp,
}

impl Transport {
    /// The pcap keyword.
    pub(crate) fn keyword(self) -> &'static str {
        match self {
            Transport::Tcp => "tcp",
            Transport::Udp => "udp",
        }
    }
}

/// Well-known TCP services, weighted by how often traffic uses them.
pub(crate) const TCP_KNOWN: &[(u32, u16)] = &[
    (30, 443),
    (14, 80),
    (5, 22),
    (3, 25),
    (5, 8080),
    (3, 8443),
    (2, 3306),
    (2, 5432),
    (2, 6379),
    (1, 9200),
    (1, 27017),
    (1, 5672),
    (1, 1883),
    (1, 3389),
    (1, 993),
    (1, 389),
    (1, 9092),
];

/// Well-known UDP services, weighted likewise.
pub(crate) const UDP_KNOWN: &[(u32, u16)] = &[
    (30, 53),
    (6, 123),
    (8, 443),
    (2, 161),
    (2, 514),
    (2, 500),
    (2, 4500),
    (3, 5060),
    (1, 1194),
    (2, 51820),
    (1, 67),
    (1, 4789),
];

/// First octets of the outside world's IPv4 addresses; no customer block
/// starts with one of them.
pub(crate) const EXTERNAL_V4: &[u8] = &[
    8, 13, 17, 20, 23, 31, 34, 35, 40, 52, 54, 64, 66, 74, 104, 108, 142, 151, 157, 216,
];

/// The /32s customers' /48s are carved from (four, so two bits of the
/// 18-bit block index); the outside world's IPv6 addresses are in
/// 2400::/8.
pub(crate) const V6_PROVIDERS: [[u16; 2]; 4] = [
    [0x2001, 0x0db8],
    [0x2a02, 0x06b8],
    [0x2600, 0x1f18],
    [0x2a01, 0x04f8],
];

/// First octets customers' /16s start with: 128 of the unicast octets,
/// spread over 1..=223, none of them special or external.
fn customer_octets() -> [u8; 128] {
    let special = [0u8, 100, 127, 169, 192, 198, 203];
    let allowed: Vec<u8> = (1..=223u8)
        .filter(|o| !special.contains(o) && !EXTERNAL_V4.contains(o))
        .collect();
    let mut out = [0u8; 128];
    for (i, o) in out.iter_mut().enumerate() {
        *o = allowed[i * allowed.len() / 128];
    }
    out
}

/// One customer: the things its filters name and its packets carry.
#[derive(Clone, Debug)]
pub(crate) struct Customer {
    /// Its IPv4 /16 (first two octets).
    pub(crate) net16: [u8; 2],
    /// Third octets of its /24 subnets.
    pub(crate) subnets: Vec<u8>,
    /// Its IPv4 hosts (in the subnets).
    pub(crate) hosts: Vec<Ipv4Addr>,
    /// Its IPv6 /48 (first three groups).
    pub(crate) net48: [u16; 3],
    /// Fourth groups of its /64 subnets.
    pub(crate) subnets6: Vec<u16>,
    /// Its IPv6 hosts (in the /64s).
    pub(crate) hosts6: Vec<Ipv6Addr>,
    /// Its customer VLAN (the inner tag of QinQ).
    pub(crate) vlan: u16,
    /// The provider's service VLAN it is carried in (QinQ outer tag).
    pub(crate) svlan: u16,
    /// Its MPLS service label (bottom of the stack).
    pub(crate) label: u32,
    /// Its own services on unregistered ports (1024..=32767), at least one.
    pub(crate) custom: Vec<(Transport, u16)>,
    /// The well-known services it runs (maybe none).
    pub(crate) known: Vec<(Transport, u16)>,
    /// A block of ports its application uses (inclusive bounds).
    pub(crate) range: (u16, u16),
    /// A 4-byte word at the start of its application's payloads.
    pub(crate) word: u32,
    /// A 2-byte message type its UDP application starts payloads with.
    pub(crate) word16: u16,
}

impl Customer {
    /// The /16 as text (`a.b.0.0/16`).
    pub(crate) fn net16_text(&self) -> String {
        format!("{}.{}.0.0/16", self.net16[0], self.net16[1])
    }

    /// Subnet `i` (modulo the count) as text (`a.b.c.0/24`).
    pub(crate) fn net24_text(&self, i: usize) -> String {
        let s = self.subnets[i % self.subnets.len()];
        format!("{}.{}.{s}.0/24", self.net16[0], self.net16[1])
    }

    /// The /48 as text.
    pub(crate) fn net48_text(&self) -> String {
        let [a, b, c] = self.net48;
        format!("{}/48", Ipv6Addr::new(a, b, c, 0, 0, 0, 0, 0))
    }

    /// IPv6 subnet `i` (modulo the count) as text (`x:y:z:w::/64`).
    pub(crate) fn net64_text(&self, i: usize) -> String {
        let [a, b, c] = self.net48;
        let s = self.subnets6[i % self.subnets6.len()];
        format!("{}/64", Ipv6Addr::new(a, b, c, s, 0, 0, 0, 0))
    }

    /// One of its IPv4 hosts: the first (its main server) two times in
    /// five, else any. Filters and traffic both pick hosts this way, so
    /// the busy hosts are also the ones most rules name.
    pub(crate) fn pick_host(&self, r: &mut Rng) -> Ipv4Addr {
        if r.chance(0.5) {
            self.hosts[0]
        } else {
            *r.pick(&self.hosts)
        }
    }

    /// One of its IPv6 hosts, the first two times in five.
    pub(crate) fn pick_host6(&self, r: &mut Rng) -> Ipv6Addr {
        if r.chance(0.5) {
            self.hosts6[0]
        } else {
            *r.pick(&self.hosts6)
        }
    }

    /// Every service (custom first).
    pub(crate) fn services(&self) -> impl Iterator<Item = &(Transport, u16)> {
        self.custom.iter().chain(self.known.iter())
    }
}

/// The universe of one seed, with the size `n` of the filter set it serves.
#[derive(Clone, Debug)]
pub(crate) struct Universe {
    pub(crate) seed: u64,
    pub(crate) n: usize,
    pub(crate) mix: Mix,
    octets: [u8; 128],
    off16: u32,
    off48: u32,
    offvlan: u32,
    offlabel: u32,
    /// Transport labels of the provider core (outer MPLS labels).
    pub(crate) transport_labels: [u32; 6],
    /// Service VLANs of the provider (QinQ outer tags).
    svlans: [u16; 8],
}

/// The customer count for `m` filters: `ceil(m / filters_per_customer)`,
/// at least one.
pub(crate) fn customers_for(m: usize, mix: &Mix) -> usize {
    m.div_ceil(mix.filters_per_customer.max(1)).max(1)
}

impl Universe {
    pub(crate) fn new(n: usize, seed: u64, mix: Mix) -> Universe {
        let mut r = Rng::new(seed, Stream::Universe, 0);
        let mut transport_labels = [0u32; 6];
        for l in &mut transport_labels {
            *l = r.range(16, 999) as u32;
        }
        let mut svlans = [0u16; 8];
        for (i, v) in svlans.iter_mut().enumerate() {
            *v = [100u16, 200, 300, 400, 1000, 2000, 3000, 4000][i] + r.range(0, 9) as u16;
        }
        Universe {
            seed,
            n,
            mix,
            octets: customer_octets(),
            off16: r.next_u32(),
            off48: r.next_u32(),
            offvlan: r.next_u32(),
            offlabel: r.next_u32(),
            transport_labels,
            svlans,
        }
    }

    /// The number of customers the traffic of an `n`-filter set is drawn
    /// from.
    pub(crate) fn customers(&self) -> usize {
        customers_for(self.n, &self.mix)
    }

    /// A customer index for item `i` of a sequence whose customer pool
    /// grows with it: uniform below `customers_for(i + 1)`. Filter `i`
    /// names such a customer; a packet draws `i` uniformly below `n` first,
    /// so packets and filters follow the same law over customers (early
    /// customers have more rules and more traffic, as large customers do).
    pub(crate) fn customer_for_item(&self, r: &mut Rng, i: usize) -> usize {
        r.index(customers_for(i + 1, &self.mix))
    }

    /// A customer index the traffic of an `n`-filter set draws.
    pub(crate) fn traffic_customer(&self, r: &mut Rng) -> usize {
        let i = r.index(self.n.max(1));
        self.customer_for_item(r, i)
    }

    /// Customer `c`.
    pub(crate) fn customer(&self, c: usize) -> Customer {
        let mut r = Rng::new(self.seed, Stream::Customer, c as u64);
        let c32 = c as u32;
        let i16 = c32.wrapping_mul(0x6a5d).wrapping_add(self.off16) & 0x7fff;
        let net16 = [self.octets[(i16 >> 8) as usize], i16 as u8];
        let nsub = r.weighted_pick(&[(5u32, 1usize), (3, 2), (2, 3)]);
        let mut subnets = Vec::with_capacity(nsub);
        while subnets.len() < nsub {
            let s = if r.chance(0.5) {
                r.range(0, 15) as u8
            } else {
                r.next_u32() as u8
            };
            if !subnets.contains(&s) {
                subnets.push(s);
            }
        }
        let nhosts = r.weighted_pick(&[
            (25u32, 2usize),
            (20, 3),
            (15, 4),
            (15, 6),
            (10, 8),
            (10, 12),
            (5, 16),
        ]);
        let mut hosts = Vec::with_capacity(nhosts);
        while hosts.len() < nhosts {
            let s = *r.pick(&subnets);
            let h = if r.chance(0.4) {
                r.range(1, 20) as u8
            } else {
                r.range(1, 254) as u8
            };
            let a = Ipv4Addr::new(net16[0], net16[1], s, h);
            if !hosts.contains(&a) {
                hosts.push(a);
            }
        }
        let i48 = c32.wrapping_mul(0x2_b3a5).wrapping_add(self.off48) & 0x3_ffff;
        let p = V6_PROVIDERS[(i48 >> 16) as usize];
        let net48 = [p[0], p[1], i48 as u16];
        let nsub6 = r.weighted_pick(&[(6u32, 1usize), (3, 2), (1, 3)]);
        let mut subnets6 = Vec::with_capacity(nsub6);
        while subnets6.len() < nsub6 {
            let s = if r.chance(0.6) {
                r.range(0, 16) as u16
            } else {
                r.next_u32() as u16
            };
            if !subnets6.contains(&s) {
                subnets6.push(s);
            }
        }
        let nhosts6 = (nhosts / 2).max(2);
        let mut hosts6 = Vec::with_capacity(nhosts6);
        while hosts6.len() < nhosts6 {
            let s = *r.pick(&subnets6);
            let iid = if r.chance(0.5) {
                r.range(1, 0x1ff)
            } else {
                r.next_u64()
            };
            let [a, b, c] = net48;
            let x = Ipv6Addr::new(
                a,
                b,
                c,
                s,
                (iid >> 48) as u16,
                (iid >> 32) as u16,
                (iid >> 16) as u16,
                iid as u16,
            );
            if !hosts6.contains(&x) {
                hosts6.push(x);
            }
        }
        // 4093 is prime: any multiplier below it is a bijection.
        let vlan = 2 + ((u64::from(c32) * 2_731 + u64::from(self.offvlan)) % 4093) as u16;
        let svlan = self.svlans[r.index(self.svlans.len())];
        let label = 16 + (c32.wrapping_mul(0x5_a4e3).wrapping_add(self.offlabel) & 0x7_ffff);
        let ncustom = r.weighted_pick(&[(7u32, 1usize), (3, 2)]);
        let mut custom = Vec::with_capacity(ncustom);
        while custom.len() < ncustom {
            let t = if r.chance(0.75) {
                Transport::Tcp
            } else {
                Transport::Udp
            };
            let port = r.range(1024, 32767) as u16;
            if !custom.iter().any(|&(_, p)| p == port) {
                custom.push((t, port));
            }
        }
        let nknown = r.weighted_pick(&[(3u32, 0usize), (5, 1), (2, 2)]);
        let mut known = Vec::with_capacity(nknown);
        while known.len() < nknown {
            let s = if r.chance(0.75) {
                (Transport::Tcp, r.weighted_pick(TCP_KNOWN))
            } else {
                (Transport::Udp, r.weighted_pick(UDP_KNOWN))
            };
            if !known.contains(&s) {
                known.push(s);
            }
        }
        let size = r.weighted_pick(&[(3u32, 16u16), (4, 32), (4, 64), (2, 128), (1, 256)]);
        let base = 1024 + size * r.below(u64::from((32768 - 1024) / size)) as u16;
        let word = loop {
            let w = r.next_u32();
            if w.to_be_bytes().iter().all(|&b| b != 0) {
                break w;
            }
        };
        let word16 = r.range(0x0100, 0xfffe) as u16;
        Customer {
            net16,
            subnets,
            hosts,
            net48,
            subnets6,
            hosts6,
            vlan,
            svlan,
            label,
            custom,
            known,
            range: (base, base + size - 1),
            word,
            word16,
        }
    }

    /// An address of the outside world (never in a customer's /16).
    pub(crate) fn external_v4(&self, r: &mut Rng) -> Ipv4Addr {
        let v = r.next_u32();
        Ipv4Addr::new(
            *r.pick(EXTERNAL_V4),
            (v >> 16) as u8,
            (v >> 8) as u8,
            (v as u8).max(1),
        )
    }

    /// An IPv6 address of the outside world (in 2400::/8).
    pub(crate) fn external_v6(&self, r: &mut Rng) -> Ipv6Addr {
        let a = r.next_u64();
        let b = r.next_u64();
        Ipv6Addr::new(
            0x2400 | (a >> 56) as u16,
            (a >> 40) as u16,
            (a >> 24) as u16,
            (a >> 8) as u16,
            (b >> 48) as u16,
            (b >> 32) as u16,
            (b >> 16) as u16,
            b as u16,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn customers_have_distinct_blocks() {
        let u = Universe::new(1000, 3, Mix::default());
        let mut nets = std::collections::HashSet::new();
        let mut nets6 = std::collections::HashSet::new();
        let mut vlans = std::collections::HashSet::new();
        for c in 0..4000 {
            let k = u.customer(c);
            assert!(nets.insert(k.net16));
            assert!(nets6.insert(k.net48));
            assert!(vlans.insert(k.vlan));
            assert!((2..=4094).contains(&k.vlan));
            assert!(k.label >= 16 && k.label < 1 << 20);
            assert!(!EXTERNAL_V4.contains(&k.net16[0]));
            assert!(k.hosts.iter().all(|h| h.octets()[..2] == k.net16));
            assert!(k.range.0 >= 1024 && k.range.1 <= 32767);
            assert!(!k.custom.is_empty());
        }
    }

    #[test]
    fn customers_are_reproducible() {
        let u = Universe::new(10, 9, Mix::default());
        let v = Universe::new(100_000, 9, Mix::default());
        assert_eq!(
            format!("{:?}", u.customer(5)),
            format!("{:?}", v.customer(5))
        );
    }
}
