//! Realistic heterogeneous filter sets and traffic for sluice's benchmarks
//! and differential tests, seeded; and the shared conformance corpus.
//!
//! * [`filter_set`] / [`Workload::filters`]: `n` pcap filter expressions of
//!   the kinds people write when they split traffic by many rules (per
//!   customer, per incident, per service): hosts and nets (single and
//!   lists, IPv4 and IPv6), ports and port ranges, protocols, `vlan` and
//!   `mpls` stacks, TCP flags, ICMP types, lengths, payload byte tests and
//!   DSCP, combined with `and`, `or`, `not` and parentheses.
//! * [`traffic`] / [`Workload::traffic`]: Ethernet frames drawn from the
//!   same universe of customers (addresses, ports, VLANs, labels, payload
//!   words), so that the average packet matches a few filters (between 1
//!   and 10 at every `n` from 10 to 100,000).
//! * [`corpus_filters`] and [`corpus_packets`]: the shared corpus
//!   (`conformance/expressions.txt` and every Ethernet packet of
//!   `conformance/pcaps`).
//! * [`broad_mix`] / [`broad_expressions`]: the corpus's expressions and
//!   random ones of every shape with constants from the corpus's packets,
//!   so that a packet matches about 150 of about 1,000 filters.
//! * [`acl_rules`] / [`acl_traffic`]: five-tuple firewall rules in the
//!   manner of ClassBench's ACL seeds (prefixes, protocol, port ranges)
//!   and traffic drawn from them.
//! * [`flow_traffic`]: the same traffic drawn from a fixed set of flows
//!   (what a flow cache needs to pay).
//! * [`write_pcap`] and [`pcap_bytes`]: frames as a pcap file.
//! * [`features`]: what an expression tests, from its text.
//!
//! # The universe
//!
//! Filters and packets draw their constants from a seeded universe of
//! customers. Customer `c` has its own IPv4 /16 with one to three /24s and
//! 2 to 16 hosts in them, an IPv6 /48 with /64s and hosts, a VLAN (and the
//! provider's service VLAN it rides in), an MPLS label, one or two
//! services on unregistered ports and maybe some well-known ones, a block
//! of ports and two payload words. A set of `n` filters has about
//! `n / filters_per_customer` customers ([`Mix::filters_per_customer`]):
//! filter `i` names a customer below `(i + 1) / filters_per_customer`, and
//! traffic for `n` filters draws its customers by the same law, so that
//! early (large) customers have more rules and more traffic and the mean
//! number of filters a packet matches stays the same as `n` grows.
//!
//! # Determinism and prefix stability
//!
//! Everything is a function of the seed, the [`Mix`] and the index: the
//! crate uses its own SplitMix64 generator (not `rand`, whose algorithms
//! may change between releases), started afresh for every filter, packet
//! and customer. So the filters of `(n, seed)` are the first `n` filters of
//! `(m, seed)` for every `m > n`, and the packets of
//! `traffic(n, seed, p)` are the first `p` of `traffic(n, seed, q)` for
//! `q > p` (traffic depends on `n`, which sets its customer pool).
//!
//! # Matches per packet
//!
//! The mean number of filters of `filter_set(n, 1)` that a packet of
//! `traffic(n, 1, _)` matches, by libpcap's verdicts (5,000 packets up to
//! n = 1,000, then 2,000 and 1,000; `cargo test -p sluice-workload --
//! --ignored --nocapture` prints it). About one of them is the packet's
//! customer's catch-all rule; the few unselective rules add 0.5 to 1.2.
//!
//! | n | 10 | 100 | 1,000 | 10,000 | 100,000 |
//! |---|---|---|---|---|---|
//! | matches per packet | 2.42 | 3.22 | 3.40 | 4.05 | 4.60 |
//!
//! ```
//! use sluice_workload::{filter_set, traffic, Workload};
//!
//! let filters = filter_set(100, 7);
//! assert_eq!(filters.len(), 100);
//! assert_eq!(filters[..10], filter_set(10, 7)[..]);
//! let packets = traffic(100, 7, 50);
//! assert_eq!(packets.len(), 50);
//! assert!(packets.iter().all(|(data, wire)| data.len() <= *wire as usize));
//! assert_eq!(Workload::new(100, 7).expressions(), filters);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod acl;
mod broad;
mod corpus;
mod features;
mod filters;
mod flows;
mod rng;
mod sessions;
mod traffic;
mod universe;

pub use acl::{acl_filters_file, acl_rules, acl_traffic, AclRule};
pub use broad::{broad_expressions, broad_mix};
pub use corpus::{corpus_filters, corpus_packets, pcap_bytes, write_pcap};
pub use features::{features, Feature};
pub use flows::flow_traffic;
pub use sessions::{session, session_expression, tcp_frame};

use universe::Universe;

/// The knobs of a workload: how many filters a customer has, how many
/// filters are unselective, and the shares of the traffic mix.
///
/// ```
/// use sluice_workload::{Mix, Workload};
/// let mix = Mix { ipv6: 0.5, ..Mix::default() };
/// let w = Workload::with_mix(100, 1, mix);
/// assert_eq!(w.traffic(10).len(), 10);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Mix {
    /// Filters per customer, `K`: `n` filters name `ceil(n / K)`
    /// customers, and filter `c * K` is customer `c`'s catch-all rule (its
    /// /16, or its /16 and /48), the rule a per-customer split starts with
    /// (default 6).
    pub filters_per_customer: usize,
    /// The probability that one of the first `unselective_knee` filters is
    /// unselective (`tcp`, `not port 22`, `len > 1000`...); later filter
    /// `i` is unselective with probability
    /// `unselective_share * unselective_knee / (i + 1)`, so their number
    /// grows with the logarithm of `n` and each packet's matches stay few
    /// (default 0.05).
    pub unselective_share: f64,
    /// See [`Mix::unselective_share`] (default 20).
    pub unselective_knee: usize,
    /// Share of IPv6 packets (default 0.25; IPv4 gets what the other three
    /// shares leave, 0.70 by default).
    pub ipv6: f64,
    /// Share of ARP packets (default 0.03).
    pub arp: f64,
    /// Share of other EtherTypes: LLDP and 802.3 spanning tree (default
    /// 0.02).
    pub other_ethertypes: f64,
    /// Share of frames with one 802.1Q tag, the customer's VLAN (default
    /// 0.10).
    pub vlan: f64,
    /// Share of QinQ frames: the provider's service VLAN, then the
    /// customer's (default 0.04).
    pub qinq: f64,
    /// Share of IP packets in an MPLS stack (one or two labels, the
    /// customer's at the bottom; default 0.05).
    pub mpls: f64,
    /// Share of IPv4 and of IPv6 packets that are fragments (default 0.03).
    pub fragments: f64,
    /// Share of frames captured shorter than they were on the wire
    /// (default 0.02).
    pub truncated: f64,
    /// Share of packets whose other end is a host of another customer
    /// rather than the outside world (default 0.3).
    pub peer_customer: f64,
}

impl Default for Mix {
    fn default() -> Mix {
        Mix {
            filters_per_customer: 6,
            unselective_share: 0.05,
            unselective_knee: 20,
            ipv6: 0.25,
            arp: 0.03,
            other_ethertypes: 0.02,
            vlan: 0.10,
            qinq: 0.04,
            mpls: 0.05,
            fragments: 0.03,
            truncated: 0.02,
            peer_customer: 0.3,
        }
    }
}

/// One generated filter.
///
/// ```
/// let f = sluice_workload::Workload::new(10, 1).filter(3);
/// assert!(f.name.starts_with("000003-"));
/// assert!(!f.expression.is_empty());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// A unique name: the index, the customer (`c17`, or `any` for an
    /// unselective filter) and the form, as `000042-c17-host_port`.
    pub name: String,
    /// The pcap expression.
    pub expression: String,
    /// The rule form it was drawn from (`host`, `vlan_stack`, `word`, ...,
    /// or `unselective`).
    pub form: &'static str,
    /// The customer whose constants it names (`None` if unselective).
    pub customer: Option<usize>,
    /// Whether it names a host, net, port, VLAN, label or payload value
    /// (false for the few broad rules such as `tcp` or `len > 1000`).
    pub selective: bool,
}

/// A seeded workload for `n` filters: the filters and traffic drawn from
/// one universe.
///
/// ```
/// use sluice_workload::Workload;
/// let w = Workload::new(1000, 42);
/// let filters = w.filters();
/// assert_eq!(filters.len(), 1000);
/// assert!(filters.iter().filter(|f| f.selective).count() > 950);
/// let (frame, wire) = w.packet(0);
/// assert!(frame.len() <= wire as usize && wire >= 60);
/// ```
#[derive(Clone, Debug)]
pub struct Workload {
    universe: Universe,
}

impl Workload {
    /// The workload of `n` filters under `seed` with the default [`Mix`].
    ///
    /// ```
    /// assert_eq!(sluice_workload::Workload::new(5, 0).n(), 5);
    /// ```
    pub fn new(n: usize, seed: u64) -> Workload {
        Workload::with_mix(n, seed, Mix::default())
    }

    /// The workload of `n` filters under `seed` with this mix.
    ///
    /// ```
    /// use sluice_workload::{Mix, Workload};
    /// let w = Workload::with_mix(50, 3, Mix { unselective_share: 0.0, ..Mix::default() });
    /// assert!(w.filters().iter().all(|f| f.selective));
    /// ```
    pub fn with_mix(n: usize, seed: u64, mix: Mix) -> Workload {
        Workload {
            universe: Universe::new(n, seed, mix),
        }
    }

    /// The number of filters.
    ///
    /// ```
    /// assert_eq!(sluice_workload::Workload::new(7, 0).filters().len(), 7);
    /// ```
    pub fn n(&self) -> usize {
        self.universe.n
    }

    /// The seed.
    ///
    /// ```
    /// assert_eq!(sluice_workload::Workload::new(7, 9).seed(), 9);
    /// ```
    pub fn seed(&self) -> u64 {
        self.universe.seed
    }

    /// The mix.
    ///
    /// ```
    /// use sluice_workload::{Mix, Workload};
    /// assert_eq!(Workload::new(7, 9).mix(), &Mix::default());
    /// ```
    pub fn mix(&self) -> &Mix {
        &self.universe.mix
    }

    /// The number of customers the traffic is drawn from
    /// (`ceil(n / filters_per_customer)`).
    ///
    /// ```
    /// assert_eq!(sluice_workload::Workload::new(100, 0).customers(), 17);
    /// ```
    pub fn customers(&self) -> usize {
        self.universe.customers()
    }

    /// Filter `i` (any `i`, also `i >= n`: the set is a prefix of an
    /// endless sequence).
    ///
    /// ```
    /// use sluice_workload::Workload;
    /// assert_eq!(Workload::new(10, 1).filter(20), Workload::new(30, 1).filters()[20]);
    /// ```
    pub fn filter(&self, i: usize) -> Filter {
        filters::filter(&self.universe, i)
    }

    /// The `n` filters.
    ///
    /// ```
    /// let w = sluice_workload::Workload::new(20, 1);
    /// assert_eq!(w.filters().len(), 20);
    /// ```
    pub fn filters(&self) -> Vec<Filter> {
        (0..self.n()).map(|i| self.filter(i)).collect()
    }

    /// The `n` expressions.
    ///
    /// ```
    /// let w = sluice_workload::Workload::new(20, 1);
    /// assert_eq!(w.expressions()[4], w.filter(4).expression);
    /// ```
    pub fn expressions(&self) -> Vec<String> {
        (0..self.n()).map(|i| self.filter(i).expression).collect()
    }

    /// The filters as a filters file for `sluice split --filters` and
    /// `sluice bench --filters`: `name<TAB>expression` per line.
    ///
    /// ```
    /// let text = sluice_workload::Workload::new(3, 1).filters_file();
    /// assert_eq!(text.lines().count(), 3);
    /// assert!(text.lines().all(|l| l.split('\t').count() == 2));
    /// ```
    pub fn filters_file(&self) -> String {
        let mut out = String::new();
        for f in self.filters() {
            out.push_str(&f.name);
            out.push('\t');
            out.push_str(&f.expression);
            out.push('\n');
        }
        out
    }

    /// Packet `i` of the traffic: (captured bytes of the Ethernet frame,
    /// its length on the wire).
    ///
    /// ```
    /// let w = sluice_workload::Workload::new(10, 1);
    /// assert_eq!(w.packet(3), w.traffic(4)[3]);
    /// ```
    pub fn packet(&self, i: usize) -> (Vec<u8>, u32) {
        traffic::packet(&self.universe, i)
    }

    /// The first `packets` packets of the traffic.
    ///
    /// ```
    /// let t = sluice_workload::Workload::new(10, 1).traffic(100);
    /// assert_eq!(t.len(), 100);
    /// assert!(t.iter().all(|(d, w)| (60..=1514).contains(w) && d.len() <= *w as usize));
    /// ```
    pub fn traffic(&self, packets: usize) -> Vec<(Vec<u8>, u32)> {
        (0..packets).map(|i| self.packet(i)).collect()
    }
}

/// `n` filter expressions under `seed` with the default [`Mix`]: the
/// first `n` of an endless seeded sequence (so `filter_set(n, s)` is a
/// prefix of `filter_set(m, s)` for `m > n`).
///
/// ```
/// let f = sluice_workload::filter_set(1000, 1);
/// assert_eq!(f.len(), 1000);
/// assert_eq!(f, sluice_workload::filter_set(1000, 1));
/// assert_ne!(f, sluice_workload::filter_set(1000, 2));
/// ```
pub fn filter_set(n: usize, seed: u64) -> Vec<String> {
    Workload::new(n, seed).expressions()
}

/// `packets` Ethernet frames (captured bytes, wire length) of the traffic
/// for the filter set `filter_set(n, seed)`.
///
/// ```
/// let t = sluice_workload::traffic(1000, 1, 20);
/// assert_eq!(t, sluice_workload::traffic(1000, 1, 20));
/// assert_eq!(t[..10], sluice_workload::traffic(1000, 1, 10)[..]);
/// ```
pub fn traffic(n: usize, seed: u64, packets: usize) -> Vec<(Vec<u8>, u32)> {
    Workload::new(n, seed).traffic(packets)
}
