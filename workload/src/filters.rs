//! The filter generator: rule forms people write when they split traffic
//! per customer, incident or service, filled in with one customer's
//! constants.
//!
//! Filter `i` is drawn from its own random stream. Every
//! `filters_per_customer`-th filter is the catch-all rule of the next
//! customer (its /16, or its /16 and /48); the others are drawn thus: first
//! whether it is one
//! of the few unselective rules (probability `unselective_share` for the
//! first `unselective_knee` filters, then falling as `1 / i`, so their
//! number grows only with the logarithm of the set's size), then its form
//! (weighted), then a customer below `customers_for(i + 1)` and that
//! customer's hosts, nets, ports, VLAN, label or payload word.

use crate::rng::{Rng, Stream};
use crate::universe::{Customer, Transport, Universe, TCP_KNOWN, UDP_KNOWN, V6_PROVIDERS};
use crate::Filter;
use std::net::Ipv6Addr;

/// The selective forms and their weights (out of about 120).
const SELECTIVE: &[(u32, Form)] = &[
    (10, Form::Host),
    (5, Form::HostList),
    (4, Form::Net16),
    (4, Form::Net24),
    (3, Form::NetList),
    (4, Form::Host6),
    (3, Form::Net6),
    (8, Form::HostPort),
    (3, Form::DirHostPort),
    (3, Form::HostsPorts),
    (2, Form::NetPort),
    (2, Form::NetNotPort),
    (1, Form::HostNotPort),
    (2, Form::Host6Port),
    (3, Form::Port),
    (2, Form::PortList),
    (1, Form::PortRange),
    (2, Form::HostPortRange),
    (2, Form::Vlan),
    (3, Form::VlanHost),
    (1, Form::VlanStack),
    (1, Form::VlanProto),
    (1, Form::Mpls),
    (1, Form::MplsHost),
    (1, Form::MplsStack),
    (2, Form::Syn),
    (1, Form::Rst),
    (2, Form::Icmp),
    (1, Form::Icmp6),
    (2, Form::Length),
    (2, Form::Word),
    (1, Form::Http),
    (1, Form::Dscp),
    (3, Form::Proto),
    (2, Form::Conversation),
];

/// The unselective rules (each matches a large share of all traffic).
const UNSELECTIVE: &[&str] = &[
    "tcp",
    "udp",
    "icmp",
    "icmp6",
    "ip proto 47",
    "sctp",
    "arp",
    "ip6",
    "not port 22",
    "len > 1000",
    "greater 1200",
    "less 100",
    "port 443",
    "udp port 53",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
    "icmp[icmptype] == icmp-echo",
    "vlan",
    "mpls",
    "ip[1] & 0xfc == 0xb8",
    "ip6 and tcp dst port 443 and not src net 2001:db8::/32",
    "vlan and tcp",
    "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
    "tcp port 80 or tcp port 8080",
];

/// A selective rule form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Host,
    HostList,
    Net16,
    Net24,
    NetList,
    Host6,
    Net6,
    HostPort,
    DirHostPort,
    HostsPorts,
    NetPort,
    NetNotPort,
    HostNotPort,
    Host6Port,
    Port,
    PortList,
    PortRange,
    HostPortRange,
    Vlan,
    VlanHost,
    VlanStack,
    VlanProto,
    Mpls,
    MplsHost,
    MplsStack,
    Syn,
    Rst,
    Icmp,
    Icmp6,
    Length,
    Word,
    Http,
    Dscp,
    Proto,
    Conversation,
}

impl Form {
    /// The form's name in filter names (`000042-c17-host_port`).
    fn name(self) -> &'static str {
        match self {
            Form::Host => "host",
            Form::HostList => "host_list",
            Form::Net16 => "net16",
            Form::Net24 => "net24",
            Form::NetList => "net_list",
            Form::Host6 => "host6",
            Form::Net6 => "net6",
            Form::HostPort => "host_port",
            Form::DirHostPort => "dir_host_port",
            Form::HostsPorts => "hosts_ports",
            Form::NetPort => "net_port",
            Form::NetNotPort => "net_not_port",
            Form::HostNotPort => "host_not_port",
            Form::Host6Port => "host6_port",
            Form::Port => "port",
            Form::PortList => "port_list",
            Form::PortRange => "portrange",
            Form::HostPortRange => "host_portrange",
            Form::Vlan => "vlan",
            Form::VlanHost => "vlan_host",
            Form::VlanStack => "vlan_stack",
            Form::VlanProto => "vlan_proto",
            Form::Mpls => "mpls",
            Form::MplsHost => "mpls_host",
            Form::MplsStack => "mpls_stack",
            Form::Syn => "syn",
            Form::Rst => "rst",
            Form::Icmp => "icmp",
            Form::Icmp6 => "icmp6",
            Form::Length => "length",
            Form::Word => "word",
            Form::Http => "http",
            Form::Dscp => "dscp",
            Form::Proto => "proto",
            Form::Conversation => "conversation",
        }
    }
}

/// Filter `i` of the universe's seed.
pub(crate) fn filter(u: &Universe, i: usize) -> Filter {
    let mut r = Rng::new(u.seed, Stream::Filter, i as u64);
    let per = u.mix.filters_per_customer.max(1);
    if i % per == 0 {
        let c = i / per;
        let cust = u.customer(c);
        return Filter {
            name: format!("{i:06}-c{c}-customer"),
            expression: catch_all(&mut r, &cust),
            form: "customer",
            customer: Some(c),
            selective: true,
        };
    }
    let knee = u.mix.unselective_knee.max(1) as f64;
    let p = u.mix.unselective_share * (knee / (i as f64 + 1.0)).min(1.0);
    if r.chance(p) {
        let (k, text) = {
            let k = r.index(UNSELECTIVE.len());
            (k, UNSELECTIVE[k])
        };
        return Filter {
            name: format!("{i:06}-any-{k}"),
            expression: text.to_string(),
            form: "unselective",
            customer: None,
            selective: false,
        };
    }
    let form = r.weighted_pick(SELECTIVE);
    let c = u.customer_for_item(&mut r, i);
    let cust = u.customer(c);
    let expression = render(form, &mut r, u, &cust, i);
    Filter {
        name: format!("{i:06}-c{c}-{}", form.name()),
        expression,
        form: form.name(),
        customer: Some(c),
        selective: true,
    }
}

/// A rule for all of a customer's (untagged) IP traffic.
fn catch_all(r: &mut Rng, c: &Customer) -> String {
    match r.weighted(&[6, 3, 1]) {
        0 => format!("net {} or net {}", c.net16_text(), c.net48_text()),
        1 => format!("net {}", c.net16_text()),
        _ => format!("ip6 net {} or ip net {}", c.net48_text(), c.net16_text()),
    }
}

/// `""`, `"src "` or `"dst "`.
fn dir(r: &mut Rng) -> &'static str {
    r.weighted_pick(&[(2, ""), (1, "src "), (1, "dst ")])
}

/// `"src "` or `"dst "`.
fn src_or_dst(r: &mut Rng) -> &'static str {
    if r.chance(0.5) {
        "src "
    } else {
        "dst "
    }
}

/// One of the customer's IPv4 hosts.
fn host(r: &mut Rng, c: &Customer) -> String {
    c.pick_host(r).to_string()
}

/// Up to `k` distinct IPv4 hosts of the customer (at least one).
fn hosts(r: &mut Rng, c: &Customer, k: usize) -> Vec<String> {
    let mut idx: Vec<usize> = (0..c.hosts.len()).collect();
    for j in 0..idx.len() {
        let s = j + r.index(idx.len() - j);
        idx.swap(j, s);
    }
    idx.truncate(k.max(1));
    idx.into_iter().map(|j| c.hosts[j].to_string()).collect()
}

/// One of the customer's IPv6 hosts.
fn host6(r: &mut Rng, c: &Customer) -> String {
    c.pick_host6(r).to_string()
}

/// A service of the customer, or (a third of the time) a well-known port.
fn service(r: &mut Rng, c: &Customer) -> (Transport, u16) {
    if r.chance(0.3) {
        if r.chance(0.75) {
            (Transport::Tcp, r.weighted_pick(TCP_KNOWN))
        } else {
            (Transport::Udp, r.weighted_pick(UDP_KNOWN))
        }
    } else {
        let all: Vec<(Transport, u16)> = c.services().copied().collect();
        *r.pick(&all)
    }
}

/// `"tcp "`, `"udp "` or nothing.
fn maybe_proto(r: &mut Rng, t: Transport) -> &'static str {
    if r.chance(0.6) {
        match t {
            Transport::Tcp => "tcp ",
            Transport::Udp => "udp ",
        }
    } else {
        ""
    }
}

/// Some /24 or the /16 of the customer.
fn net4(r: &mut Rng, c: &Customer) -> String {
    if r.chance(0.5) {
        c.net16_text()
    } else {
        c.net24_text(r.index(c.subnets.len()))
    }
}

/// Render a selective form with customer `c`'s constants.
fn render(form: Form, r: &mut Rng, u: &Universe, c: &Customer, i: usize) -> String {
    match form {
        Form::Host => format!("{}host {}", dir(r), host(r, c)),
        Form::HostList => {
            let k = r.range(2, 5) as usize;
            let hs = hosts(r, c, k);
            let d = if r.chance(0.7) { "" } else { src_or_dst(r) };
            if hs.len() > 1 && r.chance(0.2) {
                // The qualifier carries over: `host A or B or C`.
                format!("{d}host {}", hs.join(" or "))
            } else {
                let parts: Vec<String> = hs.iter().map(|h| format!("{d}host {h}")).collect();
                parts.join(" or ")
            }
        }
        Form::Net16 => {
            if r.chance(0.1) {
                let [a, b] = c.net16;
                format!("{}net {a}.{b}.0.0 mask 255.255.0.0", dir(r))
            } else {
                format!("{}net {}", dir(r), c.net16_text())
            }
        }
        Form::Net24 => format!("{}net {}", dir(r), c.net24_text(r.index(c.subnets.len()))),
        Form::NetList => {
            let d = if r.chance(0.7) { "" } else { src_or_dst(r) };
            let mut nets: Vec<String> = (0..c.subnets.len()).map(|j| c.net24_text(j)).collect();
            if nets.len() < 2 {
                // A partner's subnet (rules often cover two customers), or
                // the neighbouring /24 when the partner is the customer.
                let p = u.customer(u.customer_for_item(r, i));
                let other = p.net24_text(r.index(p.subnets.len()));
                if other != nets[0] {
                    nets.push(other);
                } else {
                    let [a, b] = c.net16;
                    nets.push(format!("{a}.{b}.{}.0/24", c.subnets[0].wrapping_add(1)));
                }
            }
            let parts: Vec<String> = nets.iter().map(|n| format!("{d}net {n}")).collect();
            parts.join(" or ")
        }
        Form::Host6 => {
            let q = r.pick(&[
                "ip6 host ",
                "host ",
                "src host ",
                "dst host ",
                "ip6 dst host ",
            ]);
            format!("{q}{}", host6(r, c))
        }
        Form::Net6 => {
            if r.chance(0.5) {
                format!("{}net {}", dir(r), c.net48_text())
            } else {
                let q = if r.chance(0.5) { "ip6 " } else { "" };
                format!(
                    "{q}{}net {}",
                    dir(r),
                    c.net64_text(r.index(c.subnets6.len()))
                )
            }
        }
        Form::HostPort => {
            let (t, p) = service(r, c);
            format!(
                "{}host {} and {}{}port {p}",
                dir(r),
                host(r, c),
                maybe_proto(r, t),
                dir(r)
            )
        }
        Form::DirHostPort => {
            let (t, p) = service(r, c);
            let d = src_or_dst(r);
            format!("{d}host {} and {} {d}port {p}", host(r, c), t.keyword())
        }
        Form::HostsPorts => {
            let hs = hosts(r, c, 2);
            let (_, p1) = service(r, c);
            let mut p2 = service(r, c).1;
            if p2 == p1 {
                p2 = if p1 == 443 { 80 } else { 443 };
            }
            let hpart: Vec<String> = hs.iter().map(|h| format!("host {h}")).collect();
            format!("({}) and (port {p1} or port {p2})", hpart.join(" or "))
        }
        Form::NetPort => {
            let (t, p) = if r.chance(0.3) {
                (Transport::Udp, 53)
            } else {
                service(r, c)
            };
            format!(
                "{}net {} and {} {}port {p}",
                dir(r),
                net4(r, c),
                t.keyword(),
                dir(r)
            )
        }
        Form::NetNotPort => {
            let p = *r.pick(&[53u16, 22, 443, 80, 123]);
            format!("{}net {} and not {}port {p}", dir(r), net4(r, c), dir(r))
        }
        Form::HostNotPort => {
            if r.chance(0.5) {
                format!("host {} and not port 22", host(r, c))
            } else {
                let (_, p) = service(r, c);
                let q = if p == 22 { 443 } else { 22 };
                format!("host {} and not (port {q} or port {p})", host(r, c))
            }
        }
        Form::Host6Port => {
            if r.chance(0.5) {
                let [a, b] = V6_PROVIDERS[r.index(V6_PROVIDERS.len())];
                let prov = Ipv6Addr::new(a, b, 0, 0, 0, 0, 0, 0);
                format!(
                    "ip6 and tcp dst port 443 and dst net {} and not src net {prov}/32",
                    c.net48_text()
                )
            } else {
                let (t, p) = service(r, c);
                format!("host {} and {} port {p}", host6(r, c), t.keyword())
            }
        }
        Form::Port => {
            let (t, p) = *r.pick(&c.custom);
            match r.index(3) {
                0 => format!("{} dst port {p}", t.keyword()),
                1 => format!("{} port {p}", t.keyword()),
                _ => format!("port {p}"),
            }
        }
        Form::PortList => {
            // The customer's own ports only: a well-known port here would
            // make the rule match a large share of all traffic.
            let (t, p1) = *r.pick(&c.custom);
            let p2 = match c.custom.iter().find(|s| s.1 != p1) {
                Some(s) => s.1,
                None => c.range.0,
            };
            if r.chance(0.5) {
                format!("port {p1} or port {p2}")
            } else {
                let k = t.keyword();
                format!("{k} port {p1} or {k} port {p2}")
            }
        }
        Form::PortRange => {
            // Ranges cover many ports: alone, they are a small share of
            // the rules (the rest name a host or net too).
            let q = r.pick(&["", "tcp ", "udp ", "tcp src ", "tcp dst ", "udp dst "]);
            format!("{q}portrange {}-{}", c.range.0, c.range.1)
        }
        Form::HostPortRange => {
            let (lo, hi) = c.range;
            if r.chance(0.5) {
                format!("host {} and portrange {lo}-{hi}", host(r, c))
            } else {
                format!(
                    "{}net {} and tcp dst portrange {lo}-{hi}",
                    dir(r),
                    net4(r, c)
                )
            }
        }
        Form::Vlan => format!("vlan {}", c.vlan),
        Form::VlanHost => {
            if r.chance(0.7) {
                format!("vlan {} and {}host {}", c.vlan, dir(r), host(r, c))
            } else {
                format!("vlan {} and {}net {}", c.vlan, dir(r), net4(r, c))
            }
        }
        Form::VlanStack => match r.index(3) {
            0 => format!("vlan and vlan {}", c.vlan),
            1 => format!("vlan {} and vlan {}", c.svlan, c.vlan),
            _ => format!(
                "vlan {} and vlan {} and host {}",
                c.svlan,
                c.vlan,
                host(r, c)
            ),
        },
        Form::VlanProto => {
            if r.chance(0.5) {
                format!("vlan {} and udp and dst host {}", c.vlan, host(r, c))
            } else {
                let (t, p) = service(r, c);
                format!("vlan {} and {} port {p}", c.vlan, t.keyword())
            }
        }
        Form::Mpls => format!("mpls {}", c.label),
        Form::MplsHost => {
            if r.chance(0.7) {
                format!("mpls {} and host {}", c.label, host(r, c))
            } else {
                format!("mpls {} and ip6 and net {}", c.label, c.net48_text())
            }
        }
        Form::MplsStack => match r.index(3) {
            0 => format!("mpls and mpls {} and ip", c.label),
            1 => format!("mpls {} and mpls {}", r.pick(&u.transport_labels), c.label),
            _ => format!(
                "mpls and mpls {} and ip and dst net {}",
                c.label,
                c.net24_text(r.index(c.subnets.len()))
            ),
        },
        Form::Syn => match r.index(3) {
            0 => format!(
                "{}host {} and tcp[tcpflags] & tcp-syn != 0",
                dir(r),
                host(r, c)
            ),
            1 => {
                let (_, p) = *r.pick(&c.custom);
                format!("tcp dst port {p} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn")
            }
            _ => format!(
                "dst net {} and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
                net4(r, c)
            ),
        },
        Form::Rst => {
            if r.chance(0.5) {
                format!("src host {} and tcp[tcpflags] & tcp-rst != 0", host(r, c))
            } else {
                format!(
                    "net {} and tcp[tcpflags] & (tcp-fin|tcp-rst) != 0",
                    net4(r, c)
                )
            }
        }
        Form::Icmp => match r.index(4) {
            0 => format!("icmp and {}host {}", dir(r), host(r, c)),
            1 => format!("host {} and icmp[icmptype] == icmp-echo", host(r, c)),
            2 => format!(
                "dst net {} and icmp[icmptype] != icmp-echoreply",
                net4(r, c)
            ),
            _ => format!("src host {} and icmp[icmptype] = icmp-unreach", host(r, c)),
        },
        Form::Icmp6 => match r.index(3) {
            0 => format!("icmp6 and src host {}", host6(r, c)),
            1 => format!("icmp6 and net {}", c.net48_text()),
            _ => format!(
                "dst net {} and icmp6[icmp6type] == icmp6-echo",
                c.net48_text()
            ),
        },
        Form::Length => match r.index(4) {
            0 => format!("host {} and len > 1000", host(r, c)),
            1 => format!("src net {} and greater 512", net4(r, c)),
            2 => format!("dst host {} and less 100", host(r, c)),
            _ => format!("net {} and len <= 128", net4(r, c)),
        },
        Form::Word => match r.index(4) {
            0 => format!("udp[8:4] = {:#010x}", c.word),
            1 => format!("tcp[20:4] = {:#010x}", c.word),
            2 => format!("tcp[((tcp[12:1] & 0xf0) >> 2):4] = {:#010x}", c.word),
            _ => {
                let p = c
                    .custom
                    .iter()
                    .find(|s| s.0 == Transport::Udp)
                    .map_or(c.range.0, |s| s.1);
                format!("udp[8:2] = {:#06x} and udp port {p}", c.word16)
            }
        },
        Form::Http => match r.index(3) {
            0 => format!("dst host {} and tcp[20:4] = 0x47455420", host(r, c)),
            1 => format!(
                "net {} and tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x504f5354",
                net4(r, c)
            ),
            _ => format!(
                "host {} and tcp dst port 80 and tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
                host(r, c)
            ),
        },
        Form::Dscp => {
            let v = r.pick(&[0xb8u8, 0x88, 0x28, 0x20]);
            if r.chance(0.5) {
                format!("ip[1] & 0xfc == {v:#04x} and src net {}", net4(r, c))
            } else {
                format!("host {} and ip[1] & 0xfc = {v:#04x}", host(r, c))
            }
        }
        Form::Proto => match r.index(8) {
            0 => format!("ip proto 47 and host {}", host(r, c)),
            1 => format!("sctp and dst host {}", host(r, c)),
            2 => format!("arp and host {}", host(r, c)),
            3 => format!("udp and dst host {}", host(r, c)),
            4 => format!("tcp and src net {}", net4(r, c)),
            5 => format!("ip6 and src net {}", c.net48_text()),
            6 => format!("ip proto 50 and net {}", net4(r, c)),
            _ => format!("icmp and dst net {}", net4(r, c)),
        },
        Form::Conversation => {
            let p = u.customer(u.customer_for_item(r, i));
            match r.index(3) {
                0 => format!("host {} and host {}", host(r, c), host(r, &p)),
                1 => format!(
                    "src host {} and dst net {}",
                    host(r, c),
                    p.net24_text(r.index(p.subnets.len()))
                ),
                _ => {
                    let (a, b) = (host(r, c), host(r, &p));
                    format!("(src host {a} and dst host {b}) or (src host {b} and dst host {a})")
                }
            }
        }
    }
}
