//! Random differential tests against the installed libpcap (Debian's 1.10.3),
//! in the manner of pflua's property tests: random filter expressions, random
//! and structured packets, and libpcap's own compiler and `bpf_filter` (via
//! the `pcap` crate) as the oracle.
//!
//! For every generated (expression, link type):
//! - libpcap compiles it unoptimised exactly when sluice does;
//! - on every packet, sluice's verdict equals libpcap's optimised or
//!   unoptimised verdict (libpcap's optimiser drops loads that cannot change
//!   the result, so on truncated packets the two may differ; either is right);
//! - sluice's three engines (optimised BPF, unoptimised BPF, the IR reference
//!   interpreter) return the same value.
//!
//! Packets are structured (Ethernet, VLAN, MPLS, PPPoE, LLC/SNAP, IPv4 with
//! options and fragments, IPv6 with extension headers, TCP, UDP, SCTP, ICMP,
//! IGMP, ARP, wrapped for every link type), cut at random lengths (mostly
//! near header boundaries), mutated, purely random, and real packets from
//! `../shared/conformance/pcaps` (skipped with a message if absent).
//!
//! The default run is about 30 s in the test profile. More cases on demand:
//!
//! ```sh
//! SLUICE_DIFF_CASES=100000 cargo test --test differential -- --nocapture
//! SLUICE_DIFF_SEED=12345 ...   # another seed (the default seed is fixed)
//! ```
//!
//! A mismatch is reported with the expression, link type, packet bytes in
//! hex and both verdicts, after shrinking the packet and the expression.
//!
//! Constructs where libpcap 1.10.3 differs from master (the reference, see
//! `../shared/conformance/expressions-version-diff.tsv`) are not generated:
//! `ip multicast`, `byte N &`/`byte N |`, `vxlan`, zero-mask nets,
//! `inbound`/`outbound`/`ifindex`, `ether proto lldp/slow`.

use pcap::{BpfProgram, Capture, Dead, Linktype};
use proptest::prelude::*;
use sluice::{LinkType, Program};
use sluice_testsupport::{corpus, Rng};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------
// Link types: sluice's and libpcap's DLT numbers for pcap_open_dead.

const LINKS: &[(LinkType, i32)] = &[
    (LinkType::EN10MB, 1),
    (LinkType::RAW, 12),
    (LinkType::LINUX_SLL, 113),
    (LinkType::LINUX_SLL2, 276),
    (LinkType::NULL, 0),
    (LinkType::LOOP, 108),
    (LinkType::IPV4, 228),
    (LinkType::IPV6, 229),
    (LinkType::PPP, 9),
    (LinkType::PPP_ETHER, 51),
    (LinkType::C_HDLC, 104),
];

fn pick_link(rng: &mut Rng) -> usize {
    if rng.chance(50) {
        0
    } else {
        rng.range(1, LINKS.len() - 1)
    }
}

// ---------------------------------------------------------------------------
// Values shared by expressions and packets, so that filters often match.

const IP4: &[[u8; 4]] = &[
    [10, 0, 0, 1],
    [10, 0, 0, 2],
    [192, 168, 1, 1],
    [192, 168, 1, 254],
    [1, 2, 3, 4],
    [127, 0, 0, 1],
    [224, 0, 0, 251],
    [255, 255, 255, 255],
];
const IP6: &[&str] = &["::1", "fe80::1", "2001:db8::1", "2001:db8::2", "ff02::1"];
const IP6_BYTES: &[[u8; 16]] = &[
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
    [0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
];
const MACS: &[[u8; 6]] = &[
    [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
    [0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
    [0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb],
    [0x33, 0x33, 0x00, 0x00, 0x00, 0x01],
    [0x02, 0x00, 0x00, 0x00, 0x00, 0x01],
];
const PORTS: &[u16] = &[0, 20, 22, 53, 80, 443, 1024, 8080, 65535];
const TAGS: &[u32] = &[0, 1, 5, 100, 1000, 4095];
const ETHERTYPES: &[u16] = &[
    0x0800, 0x86dd, 0x0806, 0x8035, 0x8100, 0x88a8, 0x8847, 0x8848, 0x8863, 0x8864, 0x809b, 0x80f3,
    0x8137, 0x6003, 0x0842, 0x0042,
];

fn ip4_text(a: [u8; 4]) -> String {
    format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
}

fn mac_text(rng: &mut Rng, m: [u8; 6]) -> String {
    match rng.below(4) {
        0 => format!(
            "{:x}{:02x}.{:02x}{:02x}.{:02x}{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        ),
        1 => m
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join("-"),
        2 => m
            .iter()
            .map(|b| format!("{b:x}"))
            .collect::<Vec<_>>()
            .join(":"),
        _ => m
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect::<Vec<_>>()
            .join(":"),
    }
}

// ---------------------------------------------------------------------------
// Expressions: a tree, so that a failing one can be shrunk.

#[derive(Clone, Debug)]
enum Ex {
    Leaf(String),
    Not(Box<Ex>),
    Bin(&'static str, Box<Ex>, Box<Ex>, bool),
}

impl Ex {
    fn text(&self) -> String {
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
    fn shrinks(&self) -> Vec<Ex> {
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

fn gen_expr(rng: &mut Rng, lt: LinkType, depth: usize) -> Ex {
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

fn dir(rng: &mut Rng) -> &'static str {
    rng.pick(&["", "", "src ", "dst ", "src or dst ", "src and dst "])
}

fn ip4_net(rng: &mut Rng) -> String {
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

fn ip6_net(rng: &mut Rng) -> String {
    // Only prefixes over 96: a shorter one has words with a zero mask,
    // which master (and sluice) do not load and 1.10.3 does (its optimiser
    // sometimes drops them), a known version difference.
    rng.pick(&[
        "2001:db8::1/128",
        "2001:db8::/127",
        "::1/128",
        "2001:db8::/100",
        "fe80::/97",
    ])
    .to_string()
}

fn port_text(rng: &mut Rng) -> String {
    rng.pick(PORTS).to_string()
}

fn portrange_text(rng: &mut Rng) -> String {
    let a = rng.pick(PORTS);
    let b = rng.pick(PORTS);
    format!("{a}-{b}")
}

/// A primitive (sometimes with qualifier inheritance: `host a or b`).
fn gen_leaf(rng: &mut Rng, lt: LinkType) -> String {
    let ether = lt == LinkType::EN10MB;
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
            16 if ether || rng.chance(20) => {
                let k = rng.pick(&["vlan", "mpls", "pppoes", "vlan", "mpls"]);
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
                let k = rng.pick(&["vlan", "mpls", "pppoes"]);
                let inner = gen_leaf_simple(rng);
                if rng.chance(50) {
                    format!("{k} and {inner}")
                } else {
                    format!("{k} {} and {inner}", rng.pick(TAGS))
                }
            }
            _ => {
                let ops = ["=", "!=", ">", "<", ">=", "<="];
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

fn gen_leaf_simple(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => "ip".into(),
        1 => "ip6".into(),
        2 => format!("tcp port {}", rng.pick(PORTS)),
        3 => format!("host {}", ip4_text(rng.pick(IP4))),
        4 => "udp".into(),
        _ => rng.pick(&["vlan", "mpls", "pppoes", "arp"]).into(),
    }
}

fn rng_mac(rng: &mut Rng) -> [u8; 6] {
    rng.pick(MACS)
}

/// Appends inherited-qualifier continuations: `host a or b and not c`.
fn inherit(rng: &mut Rng, s: &mut String, mut value: impl FnMut(&mut Rng) -> String) {
    while rng.chance(20) {
        let op = rng.pick(&[" or ", " and ", " or not ", " and not "]);
        let v = value(rng);
        s.push_str(op);
        s.push_str(&v);
    }
}

const LOAD_PROTOS: &[&str] = &[
    "ether", "link", "ip", "ip6", "tcp", "udp", "icmp", "icmp6", "sctp", "igmp", "arp", "rarp",
    "ip", "tcp", "udp", "ppp", "vrrp", "pim",
];

fn gen_load(rng: &mut Rng, p: &str, depth: usize) -> String {
    // A computed index is a load plus a small constant: libpcap adds it to
    // X in the ALU (wrapping), while sluice folds a constant index into the
    // instruction's offset, so `tcp[-28]` differs (reported); constant
    // negative or huge indices are not generated.
    let idx = if depth > 0 && rng.chance(15) {
        // Same protocol as the outer load: 1.10.3 loses or reorders the
        // protocol checks of an index that loads another protocol.
        let q = p;
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

fn gen_num(rng: &mut Rng) -> String {
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

/// An arithmetic expression whose loads all use protocol `p`. libpcap
/// 1.10.3 drops the protocol checks of the right operand of a binary
/// operator (`ip[0] + udp[0]` loses "is UDP"; `1 + ip6[0]` loses "is IPv6"),
/// so a right operand only loads when the left one does too (then the checks
/// are the same).
fn gen_arith(rng: &mut Rng, p: &str, depth: usize, may_load: bool) -> String {
    gen_arith_x(rng, p, depth, may_load).0
}

/// The expression and whether it loads.
fn gen_arith_x(rng: &mut Rng, p: &str, depth: usize, may_load: bool) -> (String, bool) {
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
            // libpcap 1.10.3 checks for division by zero and shifts over 31
            // on the *first instruction* of the right operand (so it refuses
            // `x >> (32 << len)`, `x / ppp[0:4]` (its first instruction is
            // `ld #0`) and accepts `x % (8 % 4)`); master and sluice look at
            // the folded value. So the right operand of these is a literal or
            // `len`.
            let (b, lb) = if op == "/" || op == "%" {
                let d = rng.pick(&["1", "2", "3", "4", "7", "8", "16", "0", "len"]);
                (d.to_string(), false)
            } else if op == "<<" || op == ">>" {
                if rng.chance(20) {
                    ("len".to_string(), false)
                } else {
                    (rng.below(34).to_string(), false)
                }
            } else {
                gen_arith_x(rng, p, depth - 1, la)
            };
            // Precedence makes `a op b` regroup inside a larger expression;
            // parenthesise so the load discipline holds for the parse.
            (format!("({a} {op} {b})"), la || lb)
        }
    }
}

fn gen_rel(rng: &mut Rng) -> String {
    let op = rng.pick(&["=", "==", "!=", ">", "<", ">=", "<="]);
    let pa = rng.pick(LOAD_PROTOS);
    let pb = rng.pick(LOAD_PROTOS);
    // Never a constant relation: libpcap master (and sluice) fold
    // `x or 1 = 1` to true without evaluating `x`, 1.10.3 does not.
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

// ---------------------------------------------------------------------------
// Packets.

/// A packet under construction, with the offsets where headers end.
#[derive(Default)]
struct Pb {
    buf: Vec<u8>,
    marks: Vec<usize>,
}

impl Pb {
    fn put(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    fn u16(&mut self, v: u16) {
        self.put(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_be_bytes());
    }
    fn mark(&mut self) {
        self.marks.push(self.buf.len());
    }
}

fn port(rng: &mut Rng) -> u16 {
    if rng.chance(75) {
        rng.pick(PORTS)
    } else {
        rng.next_u64() as u16
    }
}

fn l4(rng: &mut Rng, p: &mut Pb, proto: u8) {
    match proto {
        6 => {
            p.u16(port(rng));
            p.u16(port(rng));
            p.u32(rng.next_u64() as u32);
            p.u32(rng.next_u64() as u32);
            let opts = if rng.chance(70) { 0 } else { rng.below(4) };
            let off = if rng.chance(90) {
                (5 + opts) as u8
            } else {
                rng.byte() >> 4
            };
            p.put(&[off << 4, rng.byte()]);
            p.put(&rng.bytes(6));
            let o = rng.bytes(opts * 4);
            p.put(&o);
        }
        17 => {
            p.u16(port(rng));
            p.u16(port(rng));
            p.u16(rng.range(8, 100) as u16);
            p.u16(rng.next_u64() as u16);
        }
        132 => {
            p.u16(port(rng));
            p.u16(port(rng));
            p.put(&rng.bytes(8));
        }
        1 => {
            p.put(&[rng.pick(&[0, 3, 8, 11, 5, 13, 255]), rng.pick(&[0, 1, 3])]);
            p.put(&rng.bytes(6));
        }
        58 => {
            p.put(&[
                rng.pick(&[128, 129, 133, 134, 135, 136, 1, 143]),
                rng.pick(&[0, 1]),
            ]);
            p.put(&rng.bytes(6));
        }
        _ => {
            let n = rng.below(12);
            p.put(&rng.bytes(n));
        }
    }
    p.mark();
    let n = rng.below(16);
    p.put(&rng.bytes(n));
}

fn l4_proto(rng: &mut Rng) -> u8 {
    if rng.chance(85) {
        rng.pick(&[6, 6, 17, 17, 132, 1, 58, 2, 47, 50, 51, 103, 112])
    } else {
        rng.byte()
    }
}

fn ipv4(rng: &mut Rng, p: &mut Pb) {
    let start = p.buf.len();
    let ihl = if rng.chance(80) { 5 } else { rng.range(0, 15) };
    p.put(&[
        if rng.chance(95) {
            0x40 | ihl as u8
        } else {
            rng.byte()
        },
        rng.byte(),
    ]);
    p.u16(0);
    p.u16(rng.next_u64() as u16);
    let frag: u16 = match rng.below(10) {
        0 => 0x2000,
        1 => 0x2000 | (rng.next_u64() as u16 & 0x1fff),
        2 => rng.next_u64() as u16 & 0x1fff,
        3 | 4 => 0x4000,
        _ => 0,
    };
    p.u16(frag);
    let proto = l4_proto(rng);
    p.put(&[rng.byte(), proto]);
    p.u16(rng.next_u64() as u16);
    let src = if rng.chance(85) {
        rng.pick(IP4)
    } else {
        [rng.byte(), rng.byte(), rng.byte(), rng.byte()]
    };
    let dst = rng.pick(IP4);
    p.put(&src);
    p.put(&dst);
    p.mark();
    if ihl > 5 {
        let o = rng.bytes((ihl - 5) * 4);
        p.put(&o);
        p.mark();
    }
    l4(rng, p, proto);
    let total = (p.buf.len() - start) as u16;
    let tl = if rng.chance(90) {
        total
    } else {
        rng.next_u64() as u16
    };
    p.buf[start + 2..start + 4].copy_from_slice(&tl.to_be_bytes());
}

fn ipv6(rng: &mut Rng, p: &mut Pb) {
    p.put(&[
        0x60 | (rng.byte() & 0x0f),
        rng.byte(),
        rng.byte(),
        rng.byte(),
    ]);
    p.u16(rng.range(0, 200) as u16);
    let nh_at = p.buf.len();
    p.put(&[0, rng.byte()]);
    p.put(&rng.pick(IP6_BYTES));
    p.put(&rng.pick(IP6_BYTES));
    p.mark();
    let mut nh_at = nh_at;
    for _ in 0..rng.pick(&[0, 0, 0, 1, 1, 2, 3]) {
        let h = rng.pick(&[0, 43, 44, 60, 51]);
        p.buf[nh_at] = h;
        nh_at = p.buf.len();
        match h {
            44 => {
                p.put(&[0, 0]);
                let off: u16 = rng.pick(&[0, 1, 0x100 << 3]);
                p.u16(off | rng.below(2) as u16);
                p.u32(rng.next_u64() as u32);
            }
            51 => {
                let len = rng.below(3);
                p.put(&[0, (len + 1) as u8]);
                p.put(&rng.bytes(6 + len * 4));
            }
            _ => {
                let len = rng.below(3);
                p.put(&[0, len as u8]);
                p.put(&rng.bytes(6 + len * 8));
            }
        }
        p.mark();
    }
    let proto = if rng.chance(10) { 59 } else { l4_proto(rng) };
    p.buf[nh_at] = proto;
    l4(rng, p, proto);
}

fn arp(rng: &mut Rng, p: &mut Pb) {
    p.put(&[0, 1, 8, 0, 6, 4, 0, rng.pick(&[1, 2, 3, 4])]);
    p.mark();
    p.put(&rng_mac(rng));
    p.put(&rng.pick(IP4));
    p.put(&rng_mac(rng));
    p.put(&rng.pick(IP4));
    p.mark();
}

/// A network-layer payload; returns its Ethernet type.
fn network(rng: &mut Rng, p: &mut Pb) -> u16 {
    match rng.below(10) {
        0..=3 => {
            ipv4(rng, p);
            0x0800
        }
        4..=6 => {
            ipv6(rng, p);
            0x86dd
        }
        7 => {
            arp(rng, p);
            rng.pick(&[0x0806, 0x8035])
        }
        _ => {
            let n = rng.below(40);
            p.put(&rng.bytes(n));
            rng.pick(ETHERTYPES)
        }
    }
}

fn ip_payload(rng: &mut Rng, p: &mut Pb) -> u16 {
    if rng.chance(55) {
        ipv4(rng, p);
        0x0800
    } else {
        ipv6(rng, p);
        0x86dd
    }
}

/// After an Ethernet type field: the payload, possibly more encapsulation.
fn ether_payload(rng: &mut Rng, p: &mut Pb, type_at: usize, depth: usize) {
    let ty: u16 = match rng.below(14) {
        0 | 1 if depth < 3 => {
            // VLAN tag
            let vid = if rng.chance(80) {
                rng.pick(TAGS) as u16
            } else {
                rng.next_u64() as u16
            };
            p.u16(vid & if rng.chance(80) { 0x0fff } else { 0xffff });
            p.u16(0);
            p.mark();
            ether_payload(rng, p, p.buf.len() - 2, depth + 1);
            rng.pick(&[0x8100, 0x8100, 0x88a8, 0x9100])
        }
        2 if depth < 3 => {
            // MPLS label stack
            let n = rng.range(1, 3);
            for i in 0..n {
                let label = rng.pick(TAGS);
                let bos = u32::from(i + 1 == n || rng.chance(5));
                p.u32(label << 12 | bos << 8 | rng.byte() as u32);
                p.mark();
            }
            if rng.chance(85) {
                ip_payload(rng, p);
            } else {
                let n = rng.below(30);
                let b = rng.bytes(n);
                p.put(&b);
            }
            rng.pick(&[0x8847, 0x8847, 0x8848])
        }
        3 if depth < 3 => {
            // PPPoE session
            p.put(&[0x11, 0]);
            p.u16(rng.pick(TAGS) as u16);
            p.u16(0);
            p.mark();
            let (pp, ip) = match rng.below(5) {
                0 => (0x0021u16, true),
                1 => (0x0057, true),
                2 => (rng.next_u64() as u16, false),
                _ => (0, true),
            };
            let at = p.buf.len();
            p.u16(pp);
            p.mark();
            if ip {
                let et = ip_payload(rng, p);
                if pp == 0 {
                    let v = if et == 0x0800 { 0x0021u16 } else { 0x0057 };
                    p.buf[at..at + 2].copy_from_slice(&v.to_be_bytes());
                }
            } else {
                let n = rng.below(30);
                let b = rng.bytes(n);
                p.put(&b);
            }
            rng.pick(&[0x8864, 0x8864, 0x8863])
        }
        4 => {
            // 802.3 length + LLC (SNAP sometimes)
            let dsap = rng.pick(&[0x42, 0xaa, 0xe0, 0xfe, 0xf0, 0x06, 0x98, 0xbc]);
            let ssap = if rng.chance(80) { dsap } else { rng.byte() };
            p.put(&[dsap, ssap, rng.pick(&[0x03, 0x03, 0x00, 0x01, 0xf3, 0x6f])]);
            p.mark();
            if dsap == 0xaa {
                p.put(&[0, 0, 0]);
                let at = p.buf.len();
                p.u16(0);
                p.mark();
                let et = network(rng, p);
                p.buf[at..at + 2].copy_from_slice(&et.to_be_bytes());
            } else {
                let n = rng.below(40);
                let b = rng.bytes(n);
                p.put(&b);
            }
            let len = (p.buf.len() - type_at - 2) as u16;
            if rng.chance(85) {
                len.min(1500)
            } else {
                rng.pick(&[0, 1500, 1501, 0x05ff, 0x0600])
            }
        }
        _ => network(rng, p),
    };
    p.buf[type_at..type_at + 2].copy_from_slice(&ty.to_be_bytes());
}

fn ethernet(rng: &mut Rng, p: &mut Pb) {
    let dst = if rng.chance(80) {
        rng_mac(rng)
    } else {
        [rng.byte(); 6]
    };
    p.put(&dst);
    p.put(&rng_mac(rng));
    p.u16(0);
    p.mark();
    ether_payload(rng, p, 12, 0);
}

fn build(rng: &mut Rng, lt: LinkType) -> Pb {
    let mut p = Pb::default();
    match lt {
        LinkType::EN10MB => ethernet(rng, &mut p),
        LinkType::RAW => {
            if rng.chance(5) {
                p.put(&rng.bytes(30));
            } else {
                ip_payload(rng, &mut p);
            }
        }
        LinkType::IPV4 => ipv4(rng, &mut p),
        LinkType::IPV6 => ipv6(rng, &mut p),
        LinkType::NULL | LinkType::LOOP => {
            p.u32(0);
            p.mark();
            let et = network(rng, &mut p);
            let af: u32 = match et {
                0x0800 => 2,
                0x86dd => rng.pick(&[10, 24, 28, 30]),
                _ => rng.pick(&[7, 0, 2, 10]),
            };
            let af = if rng.chance(90) {
                af
            } else {
                rng.next_u64() as u32
            };
            let v = if lt == LinkType::NULL {
                af.to_le_bytes()
            } else {
                af.to_be_bytes()
            };
            p.buf[..4].copy_from_slice(&v);
        }
        LinkType::LINUX_SLL | LinkType::LINUX_SLL2 => {
            let hdr = if lt == LinkType::LINUX_SLL { 16 } else { 20 };
            let proto_at = if lt == LinkType::LINUX_SLL { 14 } else { 0 };
            let h = rng.bytes(hdr);
            p.put(&h);
            p.mark();
            let et = match rng.below(8) {
                0 => {
                    // LLC
                    p.put(&[rng.pick(&[0x42, 0xe0, 0xfe, 0xaa, 0xf0]), 0x42, 3]);
                    let n = rng.below(20);
                    let b = rng.bytes(n);
                    p.put(&b);
                    rng.pick(&[4, 1, 4])
                }
                _ => network(rng, &mut p),
            };
            p.buf[proto_at..proto_at + 2].copy_from_slice(&et.to_be_bytes());
        }
        LinkType::PPP | LinkType::C_HDLC | LinkType::PPP_ETHER => {
            let hdr = if lt == LinkType::PPP_ETHER { 8 } else { 4 };
            let h = rng.bytes(hdr);
            p.put(&h);
            p.mark();
            let et = network(rng, &mut p);
            let v = if lt == LinkType::C_HDLC {
                et
            } else {
                match et {
                    0x0800 => 0x0021,
                    0x86dd => 0x0057,
                    o => rng.pick(&[o, 0x0027, 0x0029, 0x002b, 0x0031, 0x003f, 0x0023]),
                }
            };
            let v = if rng.chance(90) {
                v
            } else {
                rng.next_u64() as u16
            };
            p.buf[hdr - 2..hdr].copy_from_slice(&v.to_be_bytes());
        }
        _ => p.put(&rng.bytes(40)),
    }
    p
}

/// Packets for one (expression, link type) case.
fn packets(rng: &mut Rng, lt: LinkType, corpus: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for _ in 0..20 {
        let p = build(rng, lt);
        let mut b = p.buf;
        if rng.chance(10) {
            for _ in 0..rng.range(1, 3) {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.byte();
                }
            }
        }
        if !rng.chance(35) {
            let cut = if rng.chance(60) && !p.marks.is_empty() {
                let m = rng.pick(&p.marks) as isize + rng.range(0, 6) as isize - 3;
                m.clamp(0, b.len() as isize) as usize
            } else {
                rng.below(b.len() + 1)
            };
            b.truncate(cut);
        }
        out.push(b);
    }
    for _ in 0..3 {
        let n = rng.below(80);
        out.push(rng.bytes(n));
    }
    if !corpus.is_empty() {
        for _ in 0..6 {
            let c = &corpus[rng.below(corpus.len())];
            if let Some(mut b) = rewrap(c, lt, rng) {
                if rng.chance(20) {
                    b.truncate(rng.below(b.len() + 1));
                }
                out.push(b);
            }
        }
    }
    out
}

/// An Ethernet packet from the corpus, with its link header replaced by
/// `lt`'s (only IP packets for the links that carry nothing else).
fn rewrap(eth: &[u8], lt: LinkType, rng: &mut Rng) -> Option<Vec<u8>> {
    if lt == LinkType::EN10MB {
        return Some(eth.to_vec());
    }
    let et = u16::from_be_bytes([*eth.get(12)?, *eth.get(13)?]);
    let body = &eth[14..];
    let ip = matches!(et, 0x0800 | 0x86dd);
    let mut out = match lt {
        LinkType::RAW | LinkType::IPV4 | LinkType::IPV6 if ip => Vec::new(),
        LinkType::NULL if ip => (if et == 0x0800 { 2u32 } else { 10 })
            .to_le_bytes()
            .to_vec(),
        LinkType::LOOP if ip => (if et == 0x0800 { 2u32 } else { 24 })
            .to_be_bytes()
            .to_vec(),
        LinkType::LINUX_SLL => {
            let mut h = rng.bytes(14);
            h.extend_from_slice(&et.to_be_bytes());
            h
        }
        LinkType::LINUX_SLL2 => {
            let mut h = et.to_be_bytes().to_vec();
            h.extend(rng.bytes(18));
            h
        }
        LinkType::C_HDLC => vec![0x0f, 0, (et >> 8) as u8, et as u8],
        LinkType::PPP | LinkType::PPP_ETHER if ip => {
            let mut h = if lt == LinkType::PPP {
                vec![0xff, 0x03]
            } else {
                vec![0x11, 0, 0, 1, 0, 0]
            };
            h.extend_from_slice(if et == 0x0800 { &[0, 0x21] } else { &[0, 0x57] });
            h
        }
        _ => return None,
    };
    out.extend_from_slice(body);
    Some(out)
}

fn load_corpus() -> Vec<Vec<u8>> {
    if corpus::root().is_none() {
        println!("no corpus packets: ../shared/conformance not found; random packets only");
        return Vec::new();
    }
    corpus::pcaps()
        .iter()
        .flat_map(corpus::packets)
        .filter(|p| p.linktype == 1)
        .map(|p| p.data)
        .collect()
}

// ---------------------------------------------------------------------------
// The oracle and the comparison.

struct Oracle {
    caps: Vec<Capture<Dead>>,
}

impl Oracle {
    fn new() -> Option<Oracle> {
        let mut caps = Vec::new();
        for &(_, dlt) in LINKS {
            match Capture::dead(Linktype(dlt)) {
                Ok(c) => caps.push(c),
                Err(e) => {
                    println!("skipping: libpcap cannot open a dead handle: {e}");
                    return None;
                }
            }
        }
        Some(Oracle { caps })
    }
}

struct Compiled {
    lp_opt: Option<BpfProgram>,
    lp_unopt: Result<BpfProgram, String>,
    ours_opt: Result<Program, sluice::Error>,
    ours_unopt: Result<Program, sluice::Error>,
}

fn compile(o: &Oracle, link: usize, text: &str) -> Compiled {
    let cap = &o.caps[link];
    let lt = LINKS[link].0;
    Compiled {
        lp_opt: cap.compile(text, true).ok(),
        lp_unopt: cap.compile(text, false).map_err(|e| e.to_string()),
        ours_opt: Program::builder(lt).snaplen(65535).expression(text),
        ours_unopt: Program::builder(lt)
            .snaplen(65535)
            .optimize(false)
            .expression(text),
    }
}

/// What went wrong for one expression, if anything.
#[derive(Debug, Clone, PartialEq)]
enum Problem {
    /// libpcap and sluice disagree on whether the expression compiles.
    Compile(String),
    /// Verdicts differ on a packet.
    Verdict {
        pkt: Vec<u8>,
        ours: u32,
        lp_opt: Option<bool>,
        lp_unopt: bool,
    },
    /// sluice's engines disagree on a packet.
    Engines {
        pkt: Vec<u8>,
        opt: u32,
        unopt: u32,
        reference: u32,
    },
}

impl Problem {
    fn same_kind(&self, other: &Problem) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// Compile differences that are known and not sluice bugs against libpcap
/// master (the reference), or known sluice gaps: the reason, to count them.
fn known_compile_difference(c: &Compiled) -> Option<&'static str> {
    match (&c.lp_unopt, &c.ours_unopt) {
        (Ok(_), Err(e)) => {
            let e = e.to_string();
            if e.contains("yet") {
                Some("sluice: not built yet")
            } else if e.contains("'pppoes' not supported") {
                // Master refuses `pppoes` where the link is not Ethernet
                // (also after another `pppoes`); 1.10.3 compiles it.
                Some("pppoes off Ethernet (1.10.3 compiles, master refuses)")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Compares one expression on one packet (or only compilation when `pkt`
/// is `None`).
fn check(c: &Compiled, pkt: Option<&[u8]>) -> Option<Problem> {
    let lp_ok = c.lp_unopt.is_ok();
    let ours_ok = c.ours_unopt.is_ok();
    if lp_ok != ours_ok && known_compile_difference(c).is_none() {
        let why = match (&c.lp_unopt, &c.ours_unopt) {
            (Err(e), _) => format!("libpcap refuses ({e}), sluice compiles"),
            (_, Err(e)) => format!("libpcap compiles, sluice refuses ({e})"),
            _ => unreachable!(),
        };
        return Some(Problem::Compile(why));
    }
    let (Ok(lpu), Ok(ou)) = (&c.lp_unopt, &c.ours_unopt) else {
        return None;
    };
    let pkt = pkt?;
    let wl = pkt.len() as u32;
    let unopt = ou.run(pkt, wl);
    let reference = ou.run_reference(pkt, wl);
    let opt = match &c.ours_opt {
        Ok(p) => p.run(pkt, wl),
        Err(sluice::Error::RejectsAll) => 0,
        Err(_) => unopt ^ 1,
    };
    if opt != unopt || unopt != reference {
        return Some(Problem::Engines {
            pkt: pkt.to_vec(),
            opt,
            unopt,
            reference,
        });
    }
    let lp_u = lpu.filter(pkt);
    let lp_o = c.lp_opt.as_ref().map(|p| p.filter(pkt));
    let ours = unopt != 0;
    if ours != lp_u && Some(ours) != lp_o {
        return Some(Problem::Verdict {
            pkt: pkt.to_vec(),
            ours: unopt,
            lp_opt: lp_o,
            lp_unopt: lp_u,
        });
    }
    None
}

/// Shrinks a failing case: shorter packets, zeroed bytes, smaller expressions.
fn shrink(o: &Oracle, link: usize, mut ex: Ex, mut prob: Problem) -> (Ex, Problem) {
    let pkt_of = |p: &Problem| match p {
        Problem::Verdict { pkt, .. } | Problem::Engines { pkt, .. } => Some(pkt.clone()),
        Problem::Compile(_) => None,
    };
    let start = Instant::now();
    let mut progress = true;
    while progress && start.elapsed() < Duration::from_secs(10) {
        progress = false;
        // smaller expression, same packet
        for cand in ex.shrinks() {
            let c = compile(o, link, &cand.text());
            let pkt = pkt_of(&prob);
            if let Some(p) = check(&c, pkt.as_deref()) {
                if p.same_kind(&prob) {
                    ex = cand;
                    prob = p;
                    progress = true;
                    break;
                }
            }
        }
        let Some(pkt) = pkt_of(&prob) else {
            continue;
        };
        let c = compile(o, link, &ex.text());
        // shorter packet
        for n in 0..pkt.len() {
            if let Some(p) = check(&c, Some(&pkt[..n])) {
                if p.same_kind(&prob) {
                    prob = p;
                    progress = true;
                    break;
                }
            }
        }
        // zeroed bytes
        let pkt = pkt_of(&prob).unwrap();
        for i in 0..pkt.len() {
            if pkt[i] != 0 {
                let mut q = pkt.clone();
                q[i] = 0;
                if let Some(p) = check(&c, Some(&q)) {
                    if p.same_kind(&prob) {
                        prob = p;
                        progress = true;
                    }
                }
            }
        }
    }
    (ex, prob)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn describe(ex: &Ex, link: usize, prob: &Problem) -> String {
    let lt = LINKS[link].0;
    let mut s = format!("expression {:?} on {lt}: ", ex.text());
    match prob {
        Problem::Compile(why) => s.push_str(why),
        Problem::Verdict {
            pkt,
            ours,
            lp_opt,
            lp_unopt,
        } => {
            let _ = write!(
                s,
                "sluice returns {ours}, libpcap accepts: optimised {lp_opt:?}, unoptimised {lp_unopt}; packet ({} bytes) {}",
                pkt.len(),
                hex(pkt)
            );
        }
        Problem::Engines {
            pkt,
            opt,
            unopt,
            reference,
        } => {
            let _ = write!(
                s,
                "sluice engines disagree: optimised {opt}, unoptimised {unopt}, reference {reference}; packet ({} bytes) {}",
                pkt.len(),
                hex(pkt)
            );
        }
    }
    s
}

/// Whether some primitive of the expression is constant on this link (`ip`
/// on IPV4, `arp` on RAW or NULL): there libpcap 1.10.3 and master differ.
fn has_constant_primitive(ex: &Ex, lt: LinkType) -> bool {
    match ex {
        Ex::Not(x) => has_constant_primitive(x, lt),
        Ex::Bin(_, a, b, _) => has_constant_primitive(a, lt) || has_constant_primitive(b, lt),
        Ex::Leaf(l) => l
            .replace("src or dst ", "src ")
            .replace("src and dst ", "src ")
            .split([' ', '(', ')'])
            .collect::<Vec<_>>()
            .join(" ")
            .split(" and ")
            .flat_map(|x| x.split(" or "))
            .map(|x| x.trim().trim_start_matches("not ").trim())
            .any(|x| {
                matches!(
                    sluice::pcap::compile(x, lt, 65535).map(|f| f.pred),
                    Ok(sluice::ir::Pred::True | sluice::ir::Pred::False)
                )
            }),
    }
}

fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

#[test]
fn random_expressions_match_libpcap() {
    let Some(oracle) = Oracle::new() else {
        return;
    };
    let corpus = load_corpus();
    let cases = env_num("SLUICE_DIFF_CASES").unwrap_or(100_000);
    let seed = env_num("SLUICE_DIFF_SEED").unwrap_or(0x0051_11ce);
    let mut rng = Rng::new(seed);
    let start = Instant::now();
    let (mut compiled, mut refused, mut runs) = (0u64, 0u64, 0u64);
    let mut failures: Vec<String> = Vec::new();
    let mut known: std::collections::BTreeMap<&str, u64> = Default::default();
    let mut done = 0;
    let mut constant_skips = 0u64;
    for case in 0..cases {
        done += 1;
        let link = pick_link(&mut rng);
        let lt = LINKS[link].0;
        let depth = rng.pick(&[0, 1, 2, 2, 3, 4]);
        let ex = if rng.chance(2) {
            // `geneve` moves the offsets of every later primitive, also where
            // it did not match; 1.10.3 and master compute those offsets
            // differently, so it only appears where nothing runs after a
            // failed `geneve`.
            Ex::Leaf(format!("geneve and {}", gen_leaf_simple(&mut rng)))
        } else {
            gen_expr(&mut rng, lt, depth)
        };
        let text = ex.text();
        if ["netbeui", "0x8137", "ipx"]
            .iter()
            .any(|k| text.contains(k))
            && matches!(lt, LinkType::PPP | LinkType::PPP_ETHER)
        {
            // 1.10.3 compares the PPP protocol with the NetBEUI SAP (0xf0)
            // and with 0x8137 for IPX; sluice maps both to PPP numbers
            // (0x003f, 0x002b). Master does so for NetBEUI; for IPX's
            // Ethernet type unverified (reported).
            continue;
        }
        let t0 = Instant::now();
        let c = compile(&oracle, link, &text);
        if t0.elapsed() > Duration::from_millis(500) {
            println!(
                "case {case}: slow compile ({:?}): {text:?} on {lt}",
                t0.elapsed()
            );
        }
        let pkts = packets(&mut rng, lt, &corpus);
        if std::env::var_os("SLUICE_DIFF_TRACE").is_some() {
            eprintln!("case {case}: {text:?} on {lt}");
        }
        if let Some(why) = known_compile_difference(&c) {
            *known.entry(why).or_default() += 1;
        }
        let mut found = check(&c, None);
        if found.is_none() && has_constant_primitive(&ex, lt) {
            // libpcap master (and sluice) drop what a constant protocol test
            // decides (`arp and x` on RAW loads nothing); 1.10.3 still runs
            // `x`, which can abort on short packets. Compare the engines only.
            constant_skips += 1;
            if let Ok(u) = &c.ours_unopt {
                for p in &pkts {
                    let wl = p.len() as u32;
                    let r = u.run_reference(p, wl);
                    assert_eq!(u.run(p, wl), r, "{text} on {lt}: {}", hex(p));
                    if let Ok(o) = &c.ours_opt {
                        assert_eq!(o.run(p, wl), r, "{text} on {lt}: {}", hex(p));
                    }
                }
            }
            continue;
        }
        if c.lp_unopt.is_ok() && c.ours_unopt.is_ok() {
            compiled += 1;
            for p in &pkts {
                if text.contains("protochain") && p.contains(&51) {
                    // libpcap 1.10.3's protochain loop sets X to the AH
                    // header's length instead of adding it, so an AH
                    // header (protocol 51) can make bpf_filter loop forever.
                    continue;
                }
                runs += 1;
                if let Some(prob) = check(&c, Some(p)) {
                    found = Some(prob);
                    break;
                }
            }
        } else if found.is_none() {
            refused += 1;
        }
        if let Some(prob) = found {
            let (ex, prob) = shrink(&oracle, link, ex, prob);
            let d = describe(&ex, link, &prob);
            println!("case {case}: {d}");
            failures.push(d);
            if failures.len() >= 20 {
                break;
            }
        }
    }
    println!(
        "{done} expressions (seed {seed}): {compiled} compiled by both, {refused} refused by both, \
         {runs} packet runs, {} failures, {:.1} s",
        failures.len(),
        start.elapsed().as_secs_f64()
    );
    println!(
        "  {constant_skips} expressions with a constant protocol test on their link: engines only"
    );
    for (why, n) in &known {
        println!("  known compile difference, {n} expressions: {why}");
    }
    assert!(
        failures.is_empty(),
        "{} mismatches with libpcap:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------
// Arbitrary text never panics the compiler, for any link type.

const WORDS: &[&str] = &[
    "host",
    "net",
    "port",
    "portrange",
    "src",
    "dst",
    "or",
    "and",
    "not",
    "ip",
    "ip6",
    "tcp",
    "udp",
    "sctp",
    "icmp",
    "ether",
    "proto",
    "protochain",
    "vlan",
    "mpls",
    "pppoes",
    "llc",
    "less",
    "greater",
    "len",
    "mask",
    "broadcast",
    "multicast",
    "gateway",
    "geneve",
    "vxlan",
    "byte",
    "(",
    ")",
    "[",
    "]",
    ":",
    "=",
    "!=",
    "<",
    ">",
    "+",
    "-",
    "*",
    "/",
    "%",
    "&",
    "|",
    "^",
    "<<",
    ">>",
    "!",
    "&&",
    "||",
    "1",
    "0",
    "4",
    "80",
    "0xffffffff",
    "4294967296",
    "10.0.0.1",
    "10.0.0.0/8",
    "::1",
    "fe80::/10",
    "00:11:22:33:44:55",
    "tcp[tcpflags]",
    "tcp-syn",
    "icmp-echo",
    "\\tcp",
    "1-2",
    "arp",
    "rarp",
    "link",
    "ppp",
    "iso",
    "isis",
    "decnet",
    "atalk",
    "stp",
    "igmp",
    "ah",
    "esp",
    "wlan",
    "type",
    "subtype",
    "ra",
    "ta",
    "addr1",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,48}") {
        for &(lt, _) in LINKS {
            let _ = Program::builder(lt).snaplen(65535).expression(&s);
            let _ = Program::builder(lt).snaplen(65535).optimize(false).expression(&s);
        }
    }

    #[test]
    fn token_soup_never_panics(v in proptest::collection::vec(0..WORDS.len(), 0..24)) {
        let s = v.iter().map(|&i| WORDS[i]).collect::<Vec<_>>().join(" ");
        for &(lt, _) in LINKS {
            if let Ok(p) = Program::builder(lt).snaplen(65535).expression(&s) {
                let pkt = [0x45u8; 64];
                let _ = p.run(&pkt, 64);
            }
            let _ = Program::builder(lt).snaplen(65535).optimize(false).expression(&s);
        }
    }
}

/// One case by hand, for investigating a reported mismatch:
/// `SLUICE_DIFF_EXPR='tcp' SLUICE_DIFF_LINK=EN10MB SLUICE_DIFF_PKT=0011… \
///  cargo test --test differential one_case -- --nocapture`
#[test]
fn one_case() {
    let (Ok(text), Ok(pkt)) = (
        std::env::var("SLUICE_DIFF_EXPR"),
        std::env::var("SLUICE_DIFF_PKT"),
    ) else {
        return;
    };
    let link = std::env::var("SLUICE_DIFF_LINK").unwrap_or_else(|_| "EN10MB".into());
    let link = LINKS
        .iter()
        .position(|(lt, _)| lt.name() == link)
        .expect("a supported link type");
    let pkt: Vec<u8> = (0..pkt.len() / 2)
        .map(|i| u8::from_str_radix(&pkt[2 * i..2 * i + 2], 16).expect("hex packet"))
        .collect();
    let Some(o) = Oracle::new() else {
        return;
    };
    let c = compile(&o, link, &text);
    let wl = pkt.len() as u32;
    println!(
        "libpcap: optimised {:?}, unoptimised {:?}",
        c.lp_opt.as_ref().map(|p| p.filter(&pkt)),
        c.lp_unopt.as_ref().map(|p| p.filter(&pkt))
    );
    println!(
        "sluice: optimised {:?}, unoptimised {:?}, reference {:?}",
        c.ours_opt.as_ref().map(|p| p.run(&pkt, wl)),
        c.ours_unopt.as_ref().map(|p| p.run(&pkt, wl)),
        c.ours_unopt.as_ref().map(|p| p.run_reference(&pkt, wl)),
    );
    println!("{:?}", check(&c, Some(&pkt)));
}
