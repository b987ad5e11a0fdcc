//! A rough classification of pcap expressions by what they test, from
//! their text: enough to check that a filter set covers every kind of rule
//! and to describe any set (the corpus's too).

use std::collections::BTreeSet;
use std::fmt;

/// What a filter expression tests (one expression has several).
///
/// ```
/// use sluice_workload::{features, Feature};
/// let f = features("vlan 10 and udp and dst host 10.0.0.1");
/// assert!(f.contains(&Feature::Vlan) && f.contains(&Feature::Udp));
/// assert!(f.contains(&Feature::Host) && f.contains(&Feature::And));
/// assert!(!f.contains(&Feature::VlanStack));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// `host A` with an IPv4 address.
    Host,
    /// `host A` with an IPv6 address.
    Host6,
    /// Two or more `host` primitives (or `host A or B`).
    HostList,
    /// `net N` with an IPv4 network.
    Net,
    /// `net N` with an IPv6 network.
    Net6,
    /// Two or more `net` primitives.
    NetList,
    /// `port P`.
    Port,
    /// Two or more `port` primitives.
    PortList,
    /// `portrange A-B`.
    PortRange,
    /// `tcp` as a protocol (not `tcp[...]`).
    Tcp,
    /// `udp` as a protocol.
    Udp,
    /// `icmp` as a protocol.
    Icmp,
    /// `icmp6` as a protocol.
    Icmp6,
    /// `ip proto N`.
    IpProto,
    /// `sctp`.
    Sctp,
    /// `arp`.
    Arp,
    /// `ip6`.
    Ip6,
    /// `vlan`.
    Vlan,
    /// Two or more `vlan` primitives (a QinQ stack).
    VlanStack,
    /// `mpls`.
    Mpls,
    /// Two or more `mpls` primitives (a label stack).
    MplsStack,
    /// `tcp[tcpflags]`.
    TcpFlags,
    /// `icmp[icmptype]` or `icmp6[icmp6type]`.
    IcmpType,
    /// `len`, `greater` or `less`.
    Length,
    /// A payload byte test: `tcp[...]`, `udp[...]` at a payload offset.
    Payload,
    /// A DSCP test (`ip[1] & 0xfc`).
    Dscp,
    /// `and` (or `&&`).
    And,
    /// `or` (or `||`).
    Or,
    /// `not` (or `!`).
    Not,
    /// Parentheses.
    Parens,
}

impl Feature {
    /// Every feature, in order.
    ///
    /// ```
    /// assert_eq!(sluice_workload::Feature::ALL.len(), 30);
    /// ```
    pub const ALL: [Feature; 30] = [
        Feature::Host,
        Feature::Host6,
        Feature::HostList,
        Feature::Net,
        Feature::Net6,
        Feature::NetList,
        Feature::Port,
        Feature::PortList,
        Feature::PortRange,
        Feature::Tcp,
        Feature::Udp,
        Feature::Icmp,
        Feature::Icmp6,
        Feature::IpProto,
        Feature::Sctp,
        Feature::Arp,
        Feature::Ip6,
        Feature::Vlan,
        Feature::VlanStack,
        Feature::Mpls,
        Feature::MplsStack,
        Feature::TcpFlags,
        Feature::IcmpType,
        Feature::Length,
        Feature::Payload,
        Feature::Dscp,
        Feature::And,
        Feature::Or,
        Feature::Not,
        Feature::Parens,
    ];
}

impl fmt::Display for Feature {
    /// The feature's name in lower case (`host6`, `vlan_stack`).
    ///
    /// ```
    /// assert_eq!(sluice_workload::Feature::VlanStack.to_string(), "vlan_stack");
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Feature::Host => "host",
            Feature::Host6 => "host6",
            Feature::HostList => "host_list",
            Feature::Net => "net",
            Feature::Net6 => "net6",
            Feature::NetList => "net_list",
            Feature::Port => "port",
            Feature::PortList => "port_list",
            Feature::PortRange => "portrange",
            Feature::Tcp => "tcp",
            Feature::Udp => "udp",
            Feature::Icmp => "icmp",
            Feature::Icmp6 => "icmp6",
            Feature::IpProto => "ip_proto",
            Feature::Sctp => "sctp",
            Feature::Arp => "arp",
            Feature::Ip6 => "ip6",
            Feature::Vlan => "vlan",
            Feature::VlanStack => "vlan_stack",
            Feature::Mpls => "mpls",
            Feature::MplsStack => "mpls_stack",
            Feature::TcpFlags => "tcp_flags",
            Feature::IcmpType => "icmp_type",
            Feature::Length => "length",
            Feature::Payload => "payload",
            Feature::Dscp => "dscp",
            Feature::And => "and",
            Feature::Or => "or",
            Feature::Not => "not",
            Feature::Parens => "parens",
        };
        f.write_str(s)
    }
}

/// The features of a pcap expression, from its words.
///
/// ```
/// use sluice_workload::{features, Feature};
/// let f = features("(host 10.0.0.1 or host 10.0.0.2) and (port 80 or port 443)");
/// for x in [Feature::Host, Feature::HostList, Feature::Port, Feature::PortList,
///           Feature::Or, Feature::And, Feature::Parens] {
///     assert!(f.contains(&x), "{x}");
/// }
/// assert!(features("tcp[20:4] = 0x47455420").contains(&Feature::Payload));
/// assert!(features("ip6 host 2001:db8::1").contains(&Feature::Host6));
/// ```
pub fn features(expression: &str) -> BTreeSet<Feature> {
    let mut out = BTreeSet::new();
    let spaced: String = expression
        .chars()
        .flat_map(|c| match c {
            '(' | ')' => {
                out.insert(Feature::Parens);
                vec![' ', c, ' ']
            }
            _ => vec![c],
        })
        .collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    let count = |w: &str| words.iter().filter(|&&x| x == w).count();
    let (hosts, nets, ports, vlans, mplses) = (
        count("host"),
        count("net"),
        count("port"),
        count("vlan"),
        count("mpls"),
    );
    for (k, w) in words.iter().enumerate() {
        let next = words.get(k + 1).copied().unwrap_or("");
        let f = match *w {
            "host" if next.contains(':') => Some(Feature::Host6),
            "host" => Some(Feature::Host),
            "net" if next.contains(':') => Some(Feature::Net6),
            "net" => Some(Feature::Net),
            "port" => Some(Feature::Port),
            "portrange" => Some(Feature::PortRange),
            "tcp" => Some(Feature::Tcp),
            "udp" => Some(Feature::Udp),
            "icmp" => Some(Feature::Icmp),
            "icmp6" => Some(Feature::Icmp6),
            "sctp" => Some(Feature::Sctp),
            "arp" => Some(Feature::Arp),
            "ip6" => Some(Feature::Ip6),
            "proto" => Some(Feature::IpProto),
            "vlan" => Some(Feature::Vlan),
            "mpls" => Some(Feature::Mpls),
            "len" | "greater" | "less" => Some(Feature::Length),
            "and" | "&&" => Some(Feature::And),
            "or" | "||" => Some(Feature::Or),
            "not" | "!" => Some(Feature::Not),
            _ => None,
        };
        out.extend(f);
        if w.starts_with('!') && *w != "!=" {
            out.insert(Feature::Not);
        }
    }
    // `host A or B` names two hosts with one `host`.
    let address = |w: &str| w.starts_with(|c: char| c.is_ascii_digit()) || w.contains(':');
    let shorthand = words
        .windows(4)
        .any(|w| w[0] == "host" && w[2] == "or" && address(w[3]));
    if hosts >= 2 || shorthand {
        out.insert(Feature::HostList);
    }
    if nets >= 2 {
        out.insert(Feature::NetList);
    }
    if ports >= 2 {
        out.insert(Feature::PortList);
    }
    if vlans >= 2 {
        out.insert(Feature::VlanStack);
    }
    if mplses >= 2 {
        out.insert(Feature::MplsStack);
    }
    let squeezed: String = expression.chars().filter(|c| !c.is_whitespace()).collect();
    if squeezed.contains("tcpflags") {
        out.insert(Feature::TcpFlags);
    }
    if squeezed.contains("icmptype") || squeezed.contains("icmp6type") {
        out.insert(Feature::IcmpType);
    }
    if squeezed.contains("ip[1]&0xfc") {
        out.insert(Feature::Dscp);
    }
    for proto in ["tcp[", "udp["] {
        for (at, _) in squeezed.match_indices(proto) {
            let rest = &squeezed[at + proto.len()..];
            if !rest.starts_with("tcpflags") && !rest.starts_with("12") {
                out.insert(Feature::Payload);
            }
        }
    }
    out
}
