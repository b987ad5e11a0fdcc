//! Random filter expressions: a tree ([`Ex`]), so that a failing one can
//! be shrunk, and the generators of its leaves.

use super::*;

#[derive(Clone, Debug)]
pub(crate) enum Ex {
    Leaf(String),
    Not(Box<Ex>),
    Bin(&'static str, Box<Ex>, Box<Ex>, bool),
}

impl Ex {
    pub(crate) fn text(&self) -> String {
        match self {
            Ex::Leaf(s) => s.clone(),
            Ex::Not(x) => match &**x {
                Ex::Leaf(l) if !l.contains(" and ") && !l.contains(" or ") => {
                    format!("not {l}")
                }
                _ => format!("not ({})", x.text()),
            },
            Ex::Bin(op, a, b, parens) => {
                let t = format!("{} {op} {}", a.text(), b.text());
                if *parens {
                    format!("({t})")
                } else {
                    t
                }
            }
        }
    }

    /// Smaller expressions to try when shrinking a failure.
    pub(crate) fn shrinks(&self) -> Vec<Ex> {
        match self {
            Ex::Leaf(_) => Vec::new(),
            Ex::Not(x) => {
                let mut v = vec![(**x).clone()];
                v.extend(x.shrinks().into_iter().map(|y| Ex::Not(Box::new(y))));
                v
            }
            Ex::Bin(op, a, b, p) => {
                let mut v = vec![(**a).clone(), (**b).clone()];
                v.extend(
                    a.shrinks()
                        .into_iter()
                        .map(|y| Ex::Bin(op, Box::new(y), b.clone(), *p)),
                );
                v.extend(
                    b.shrinks()
                        .into_iter()
                        .map(|y| Ex::Bin(op, a.clone(), Box::new(y), *p)),
                );
                v
            }
        }
    }
}

pub(crate) fn gen_expr(rng: &mut Rng, lt: LinkType, depth: usize) -> Ex {
    if depth == 0 || rng.chance(35) {
        return Ex::Leaf(gen_leaf(rng, lt));
    }
    match rng.below(10) {
        0 | 1 => Ex::Not(Box::new(gen_expr(rng, lt, depth - 1))),
        n => {
            let op = match (n % 2, rng.below(6)) {
                (0, 0) => "&&",
                (0, _) => "and",
                (_, 0) => "||",
                _ => "or",
            };
            let a = gen_expr(rng, lt, depth - 1);
            let b = gen_expr(rng, lt, depth - 1);
            Ex::Bin(op, Box::new(a), Box::new(b), rng.chance(80))
        }
    }
}

pub(crate) fn dir(rng: &mut Rng) -> &'static str {
    rng.pick(&["", "", "src ", "dst ", "src or dst ", "src and dst "])
}

pub(crate) fn ip4_net(rng: &mut Rng) -> String {
    let a = rng.pick(IP4);
    match rng.below(9) {
        0 => format!("{}", a[0]),
        1 => format!("{}.{}", a[0], a[1]),
        2 => format!("{}.{}.{}", a[0], a[1], a[2]),
        3 => format!("{}/{}", ip4_text(a), rng.pick(&[8, 16, 24, 30, 32])),
        4 => format!("{}.0.0.0/8", a[0]),
        5 => format!("{}.{}.{}.0/24", a[0], a[1], a[2]),
        6 => format!("{}.0.0.0 mask 255.0.0.0", a[0]),
        7 => format!(
            "{}.{}.{}.0 mask {}",
            a[0],
            a[1],
            a[2],
            rng.pick(&["255.255.255.0", "255.255.255.128", "255.255.0.0"])
        ),
        _ => format!("{}.{}.0.0/{}", a[0], a[1], rng.pick(&[12, 16, 17])),
    }
}

pub(crate) fn ip6_net(rng: &mut Rng) -> String {
    rng.pick(&[
        "2001:db8::1/128",
        "2001:db8::/127",
        "::1/128",
        "2001:db8::/100",
        "fe80::/97",
        "fe80::/10",
        "2001:db8::/32",
        "::/0",
        "ff02::/16",
    ])
    .to_string()
}

pub(crate) fn port_text(rng: &mut Rng) -> String {
    rng.pick(PORTS).to_string()
}

pub(crate) fn portrange_text(rng: &mut Rng) -> String {
    let a = rng.pick(PORTS);
    let b = rng.pick(PORTS);
    format!("{a}-{b}")
}

/// A primitive (sometimes with qualifier inheritance: `host a or b`).
pub(crate) fn gen_leaf(rng: &mut Rng, lt: LinkType) -> String {
    let ether = lt == LinkType::EN10MB;
    let wlan = prologue_link(lt) && lt != LinkType::PFLOG;
    if (wlan && rng.chance(25)) || rng.chance(2) {
        return gen_wlan(rng);
    }
    if rng.chance(10) {
        return gen_qualified(rng);
    }
    if rng.chance(3) {
        return rng
            .pick(&[
                "ip multicast",
                "ip broadcast",
                "inbound",
                "outbound",
                "ifindex 2",
                "ether proto \\lldp",
                "ether proto \\slow",
                "ether proto lldp",
                "radio[0] = 0",
                "radio[3:1] > 0",
                "pppoed",
                "lane",
                "llc",
                "iso",
                "stp",
            ])
            .to_string();
    }
    {
        let k = rng.below(30);
        match k {
            0..=2 => {
                let q = rng.pick(&["", "", "ip ", "arp ", "rarp ", "ip6 "]);
                let mut s = format!("{q}{}host {}", dir(rng), ip4_text(rng.pick(IP4)));
                inherit(rng, &mut s, |r| ip4_text(r.pick(IP4)));
                s
            }
            3 => {
                let mut s = format!("{}host {}", dir(rng), rng.pick(IP6));
                inherit(rng, &mut s, |r| r.pick(IP6).to_string());
                s
            }
            4 => {
                let q = rng.pick(&["", "", "ip ", "arp "]);
                let mut s = format!("{q}{}net {}", dir(rng), ip4_net(rng));
                inherit(rng, &mut s, ip4_net);
                s
            }
            5 => format!("{}net {}", dir(rng), ip6_net(rng)),
            6 | 7 => {
                let q = rng.pick(&["", "tcp ", "udp ", "sctp ", "tcp ", "udp "]);
                let mut s = format!("{q}{}port {}", dir(rng), port_text(rng));
                inherit(rng, &mut s, port_text);
                s
            }
            8 if rng.chance(20) => {
                // Service names only where sluice's built-in table and the
                // host's /etc/services (which libpcap reads) agree.
                let (q, n) = rng.pick(&[("tcp", "http"), ("udp", "domain"), ("tcp", "ssh")]);
                format!("{q} {}port {n}", dir(rng))
            }
            8 => {
                let q = rng.pick(&["", "tcp ", "udp ", "sctp "]);
                let mut s = format!("{q}{}portrange {}", dir(rng), portrange_text(rng));
                inherit(rng, &mut s, portrange_text);
                s
            }
            9 => {
                let p = rng.pick(&[
                    "1", "2", "6", "17", "41", "47", "50", "51", "58", "89", "103", "112", "132",
                    "0", "255", "\\tcp", "\\udp", "\\icmp", "igmp", "sctp",
                ]);
                let q = rng.pick(&["ip proto ", "ip6 proto ", "proto "]);
                format!("{q}{p}")
            }
            10 => {
                let p = rng.pick(&["6", "17", "58", "132", "44", "59", "1", "\\tcp", "\\udp"]);
                let q = rng.pick(&["protochain ", "ip6 protochain ", "ip protochain "]);
                format!("{q}{p}")
            }
            11 => rng
                .pick(&[
                    "ip",
                    "ip6",
                    "arp",
                    "rarp",
                    "tcp",
                    "udp",
                    "icmp",
                    "icmp6",
                    "sctp",
                    "igmp",
                    "ah",
                    "esp",
                    "pim",
                    "vrrp",
                    "carp",
                    "igrp",
                    "ip and tcp",
                    "ip6 and udp",
                ])
                .to_string(),
            12 => rng
                .pick(&[
                    "stp", "ipx", "netbeui", "atalk", "aarp", "decnet", "iso", "esis", "isis",
                    "clnp", "lat", "sca", "moprc", "mopdl", "l1", "l2", "iih", "lsp", "snp",
                    "csnp", "psnp", "pppoed", "llc",
                ])
                .to_string(),
            13 if ether || rng.chance(10) => {
                let w = rng.pick(&["host", "src", "dst", "src host", "dst host"]);
                let m = rng_mac(rng);
                let mut s = format!("ether {w} {}", mac_text(rng, m));
                if rng.chance(20) {
                    let m = rng_mac(rng);
                    let _ = write!(s, " or {}", mac_text(rng, m));
                }
                s
            }
            14 => {
                let p = match rng.below(3) {
                    0 => rng
                        .pick(&["\\ip", "\\ip6", "\\arp", "\\rarp", "ip", "ip6", "arp"])
                        .to_string(),
                    1 => format!("0x{:04x}", rng.pick(ETHERTYPES)),
                    _ => rng
                        .pick(&[0, 0x42, 0xaa, 0xe0, 0xfe, 0xff, 1501])
                        .to_string(),
                };
                format!("ether proto {p}")
            }
            15 if ether || rng.chance(10) => rng
                .pick(&[
                    "ether broadcast",
                    "ether multicast",
                    "broadcast",
                    "multicast",
                    "ip6 multicast",
                    "ip6 broadcast",
                ])
                .to_string(),
            16 if ether || rng.chance(40) => {
                // On links whose offsets libpcap computes at run time, what
                // follows a `pppoes` that failed reads registers libpcap
                // never filled: there it is only generated whole.
                let k = if prologue_link(lt) {
                    rng.pick(&["vlan", "mpls"])
                } else {
                    rng.pick(&["vlan", "mpls", "pppoes", "vlan", "mpls", "pppoes"])
                };
                if rng.chance(50) {
                    k.to_string()
                } else {
                    format!("{k} {}", rng.pick(TAGS))
                }
            }
            17 if ether || rng.chance(20) => rng
                .pick(&[
                    "llc",
                    "llc i",
                    "llc s",
                    "llc u",
                    "llc ui",
                    "llc rr",
                    "llc sabme",
                ])
                .to_string(),
            18 => format!(
                "{} {}",
                rng.pick(&["less", "greater"]),
                rng.pick(&[0, 14, 20, 34, 40, 54, 60, 64, 74, 100, 1500]) + rng.below(3)
            ),
            19..=23 => gen_rel(rng),
            24 | 25 => rng
                .pick(&[
                    "tcp[tcpflags] & tcp-syn != 0",
                    "tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn",
                    "tcp[tcpflags] & (tcp-fin|tcp-rst) != 0",
                    "tcp[tcpflags] == tcp-ack",
                    "tcp[13] & tcp-push = tcp-push",
                    "tcp[tcpflags] & tcp-urg != 0 or tcp[tcpflags] & tcp-ece != 0",
                    "tcp[tcpflags] & tcp-cwr = 0",
                    "icmp[icmptype] == icmp-echo",
                    "icmp[icmptype] != icmp-echoreply",
                    "icmp[icmptype] = icmp-unreach and icmp[icmpcode] = 3",
                    "icmp[icmpcode] = 0",
                    "icmp6[icmp6type] == icmp6-echo",
                    "icmp6[icmp6type] = icmp6-neighborsolicit",
                    "icmp6[icmp6code] != 0",
                    "icmp[0] = 8",
                    "ip[6:2] & 0x1fff = 0",
                    "ip[0] & 0xf != 5",
                    "ip6[6] = 44",
                    "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420",
                    "udp[8:2] = 0x1234",
                    "ether[12:2] = 0x800",
                ])
                .to_string(),
            26 => format!("{}{}", rng.pick(&["ip and ", "ip6 and ", ""]), gen_rel(rng)),
            27 => {
                let k = if prologue_link(lt) {
                    rng.pick(&["vlan", "mpls"])
                } else {
                    rng.pick(&["vlan", "mpls", "pppoes"])
                };
                let inner = gen_leaf_simple(rng);
                if rng.chance(50) {
                    format!("{k} and {inner}")
                } else {
                    format!("{k} {} and {inner}", rng.pick(TAGS))
                }
            }
            _ => {
                let ops = ["=", "!=", ">", "<", ">=", "<=", "&", "|"];
                format!(
                    "byte {} {} {}",
                    rng.below(40),
                    rng.pick(&ops),
                    rng.below(256)
                )
            }
        }
    }
}

/// An 802.11 primitive (refused off 802.11 links, as libpcap refuses it).
pub(crate) fn gen_wlan(rng: &mut Rng) -> String {
    let mac = |rng: &mut Rng| {
        let m = rng_mac(rng);
        mac_text(rng, m)
    };
    match rng.below(8) {
        0 => rng
            .pick(&[
                "wlan type data",
                "wlan type mgt",
                "wlan type ctl",
                "type mgt subtype beacon",
                "subtype probe-req",
                "wlan subtype qos-data",
                "type data subtype data",
                "subtype ack",
            ])
            .to_string(),
        1 => rng
            .pick(&[
                "dir nods",
                "dir tods",
                "dir fromds",
                "dir dstods",
                "wlan dir 3",
            ])
            .to_string(),
        2 => format!(
            "wlan {}{}",
            rng.pick(&["", "src ", "dst ", "addr1 ", "addr2 ", "addr3 ", "addr4 ", "ra ", "ta "]),
            {
                let m = mac(rng);
                format!("host {m}")
            }
        ),
        3 => format!("ether host {}", mac(rng)),
        4 => format!("link[{}] = {}", rng.below(30), rng.below(256)),
        5 => format!(
            "wlan[{}:{}] & {} != 0",
            rng.below(30),
            rng.pick(&[1, 2]),
            rng.below(256)
        ),
        6 => rng
            .pick(&["broadcast", "multicast", "llc", "llc u", "ip", "ip6", "arp"])
            .to_string(),
        _ => format!("radio[{}] = {}", rng.below(24), rng.below(256)),
    }
}

/// A tunnel (`geneve`, `vxlan`, with a VNI or not) or a PPPoE session,
/// followed by another primitive.
pub(crate) fn gen_tunnel(rng: &mut Rng) -> String {
    let t = rng.pick(&["geneve", "vxlan", "pppoes"]);
    let id = if rng.chance(50) {
        format!(" {}", rng.pick(TAGS))
    } else {
        String::new()
    };
    match rng.below(4) {
        0 => format!("{t}{id}"),
        1 => format!(
            "{t}{id} and {}",
            rng.pick(&["mpls", "mpls 100", "ip and udp", "ip6", "tcp"])
        ),
        _ => format!("{t}{id} and {}", gen_leaf_simple(rng)),
    }
}

pub(crate) fn gen_leaf_simple(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => "ip".into(),
        1 => "ip6".into(),
        2 => format!("tcp port {}", rng.pick(PORTS)),
        3 => format!("host {}", ip4_text(rng.pick(IP4))),
        4 => "udp".into(),
        _ => rng.pick(&["vlan", "mpls", "arp"]).into(),
    }
}

/// Links whose header offsets libpcap computes in a prologue at run time
/// (802.11, with or without a radio header, and pflog).
pub(crate) fn prologue_link(lt: LinkType) -> bool {
    matches!(
        lt,
        LinkType::IEEE802_11
            | LinkType::IEEE802_11_RADIO
            | LinkType::IEEE802_11_RADIO_AVS
            | LinkType::PRISM_HEADER
            | LinkType::PPI
            | LinkType::PFLOG
    )
}

pub(crate) fn rng_mac(rng: &mut Rng) -> [u8; 6] {
    rng.pick(MACS)
}

/// Appends inherited-qualifier continuations: `host a or b and not c`.
pub(crate) fn inherit(rng: &mut Rng, s: &mut String, mut value: impl FnMut(&mut Rng) -> String) {
    while rng.chance(20) {
        let op = rng.pick(&[" or ", " and ", " or not ", " and not "]);
        let v = value(rng);
        s.push_str(op);
        s.push_str(&v);
    }
}

pub(crate) const LOAD_PROTOS: &[&str] = &[
    "ether", "link", "ip", "ip6", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "arp", "rarp",
    "ip", "tcp", "udp", "ppp", "vrrp", "pim", "radio", "wlan",
];

pub(crate) fn gen_load(rng: &mut Rng, p: &str, depth: usize) -> String {
    // A computed index is a load plus a small constant: libpcap adds it to
    // X in the ALU (wrapping), while sluice folds a constant index into the
    // instruction's offset, so `tcp[-28]` differs (reported); constant
    // negative or huge indices are not generated.
    let idx = if depth > 0 && rng.chance(15) {
        // Mostly the same protocol as the outer load; libpcap runs an
        // index's checks before the load's own.
        let q = if rng.chance(70) {
            p
        } else {
            rng.pick(LOAD_PROTOS)
        };
        match rng.below(3) {
            0 => format!("{} + {}", gen_load(rng, q, 0), rng.below(20)),
            1 => format!("{} & 0xf", gen_load(rng, q, 0)),
            _ => format!("({} & 0xf) << 2", gen_load(rng, q, 0)),
        }
    } else {
        let hi = if rng.chance(80) { 24 } else { 70 };
        rng.below(hi).to_string()
    };
    match rng.below(4) {
        0 => format!("{p}[{idx}]"),
        1 => format!("{p}[{idx}:1]"),
        2 => format!("{p}[{idx}:2]"),
        _ => format!("{p}[{idx}:{}]", rng.pick(&[4, 4, 3])),
    }
}

pub(crate) fn gen_num(rng: &mut Rng) -> String {
    match rng.below(8) {
        0 => rng
            .pick(&[
                "0x45",
                "0x800",
                "0x86dd",
                "0xffffffff",
                "0x80000000",
                "4294967296",
                "0",
                "1",
                "32",
                "31",
                "033",
                "0xff",
            ])
            .to_string(),
        1 => rng
            .pick(&[6, 17, 80, 53, 443, 132, 58, 255, 65535])
            .to_string(),
        2 => rng.next_u64().to_string().chars().take(10).collect(),
        _ => rng.below(70).to_string(),
    }
}

/// An arithmetic expression whose loads all use protocol `p` (mostly).
/// libpcap keeps only the left operand's protocol checks in a binary
/// operator; its code generator refuses division, modulus and shifts by a
/// right operand whose first instruction loads 0 (or more than 31), its
/// optimiser those that fold to such a constant: all generated.
pub(crate) fn gen_arith(rng: &mut Rng, p: &str, depth: usize, may_load: bool) -> String {
    gen_arith_x(rng, p, depth, may_load).0
}

/// The expression and whether it loads.
pub(crate) fn gen_arith_x(rng: &mut Rng, p: &str, depth: usize, may_load: bool) -> (String, bool) {
    if depth == 0 || rng.chance(40) {
        return match rng.below(10) {
            0..=3 if may_load => (gen_load(rng, p, depth), true),
            4 => ("len".into(), false),
            _ => (gen_num(rng), false),
        };
    }
    match rng.below(12) {
        0 => {
            let (x, l) = gen_arith_x(rng, p, depth - 1, may_load);
            (format!("-{x}"), l)
        }
        1 => {
            let (x, l) = gen_arith_x(rng, p, depth - 1, may_load);
            (format!("({x})"), l)
        }
        _ => {
            let op = rng.pick(&["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]);
            let (a, la) = gen_arith_x(rng, p, depth - 1, may_load);
            let (b, lb) = if matches!(op, "/" | "%" | "<<" | ">>") && rng.chance(60) {
                let d = if op.len() == 2 {
                    rng.pick(&[
                        "1",
                        "7",
                        "31",
                        "32",
                        "len",
                        "(1 + 40)",
                        "(8 % 4)",
                        "(len & 0)",
                    ])
                } else {
                    rng.pick(&[
                        "1",
                        "2",
                        "3",
                        "4",
                        "8",
                        "0",
                        "len",
                        "(8 % 4)",
                        "(len * 0)",
                        "(2 - 2)",
                    ])
                };
                (d.to_string(), false)
            } else {
                let q = if rng.chance(80) {
                    p
                } else {
                    rng.pick(LOAD_PROTOS)
                };
                gen_arith_x(rng, q, depth - 1, may_load)
            };
            // Precedence makes `a op b` regroup inside a larger expression.
            (format!("({a} {op} {b})"), la || lb)
        }
    }
}

pub(crate) fn gen_rel(rng: &mut Rng) -> String {
    let op = rng.pick(&["=", "==", "!=", ">", "<", ">=", "<="]);
    let pa = rng.pick(LOAD_PROTOS);
    let pb = rng.pick(LOAD_PROTOS);
    if rng.chance(10) {
        // Relations that are constant, or become so by libpcap's
        // optimiser's reductions (`x & 0`, `x * 0`).
        let a = match rng.below(5) {
            0 => gen_num(rng),
            1 => format!("{} & 0", gen_load(rng, pa, 1)),
            2 => format!("{} * 0", gen_load(rng, pa, 1)),
            3 => "len & 0".to_string(),
            _ => format!("0 * {}", gen_load(rng, pa, 1)),
        };
        return format!("{a} {op} {}", rng.pick(&["0", "1", "2"]));
    }
    let a = if rng.chance(60) {
        gen_load(rng, pa, 2)
    } else {
        let (a, loads) = gen_arith_x(rng, pa, 3, true);
        if loads {
            a
        } else {
            format!("{} + {a}", gen_load(rng, pa, 1))
        }
    };
    let b = if rng.chance(60) {
        gen_num(rng)
    } else {
        gen_arith(rng, pb, 2, true)
    };
    format!("{a} {op} {b}")
}
