//! Every qualifier × identifier form of a primitive: a protocol qualifier
//! (or none), a direction (or none), a kind (or none) and an identifier
//! of any shape — a number, a name (host, service, protocol), an IPv4
//! address of one to four parts, with a prefix length or a mask, an IPv6
//! address with or without a prefix, a MAC address, an ARCnet address, a
//! port range of numbers or names — sometimes followed by identifiers
//! that inherit the qualifiers (`host a or b`). Most combinations are
//! refused: the test compares which, with libpcap master, on every link.

use super::*;

const PROTOS: &[&str] = &[
    "", "", "", "ether ", "link ", "ip ", "ip6 ", "arp ", "rarp ", "tcp ", "udp ", "sctp ",
    "icmp ", "icmp6 ", "igmp ", "decnet ", "wlan ", "fddi ", "tr ", "ppp ", "slip ", "atalk ",
    "aarp ", "iso ", "vrrp ", "lat ", "moprc ", "mopdl ", "sca ", "ah ", "esp ", "pim ", "carp ",
    "igrp ", "radio ", "stp ", "netbeui ", "ipx ",
];

const DIRS: &[&str] = &[
    "",
    "",
    "",
    "src ",
    "dst ",
    "src or dst ",
    "src and dst ",
    "addr1 ",
    "addr2 ",
    "addr3 ",
    "addr4 ",
    "ra ",
    "ta ",
];

const KINDS: &[&str] = &[
    "",
    "",
    "host ",
    "host ",
    "net ",
    "net ",
    "port ",
    "portrange ",
    "gateway ",
    "proto ",
    "protochain ",
];

/// Identifiers of every shape, with values that hit edges (0, the
/// largest, one past it; network bits set; names every host knows).
const IDS: &[&str] = &[
    // numbers
    "0",
    "1",
    "6",
    "17",
    "80",
    "255",
    "256",
    "1500",
    "65535",
    "65536",
    "4294967295",
    "0x800",
    "033",
    "0xffffffff",
    // IPv4, one to four parts, prefixes and masks
    "10.0.0.1",
    "192.168.1.1",
    "255.255.255.255",
    "10.0.0",
    "192.168.1",
    "10.0",
    "127",
    "192.168.1.0/24",
    "192.168.1/24",
    "10.0.0.0/8",
    "10.0.0.1/8",
    "1.2.3.4/32",
    "0.0.0.0/0",
    "10.0.0.0/33",
    "192.168.1.0 mask 255.255.255.0",
    "10.0.0.0 mask 255.0.0.0",
    "10.0.0.1 mask 255.0.0.0",
    // IPv6
    "::1",
    "fe80::1",
    "2001:db8::2",
    "fe80::/10",
    "2001:db8::/32",
    "::1/128",
    "::/0",
    "2001:db8::1/64",
    "ff02::/16",
    // MAC and ARCnet
    "00:11:22:33:44:55",
    "ff:ff:ff:ff:ff:ff",
    "0011.2233.4455",
    "00-11-22-33-44-55",
    "$12",
    "$ff",
    // names: hosts, services, protocols
    "localhost",
    "http",
    "domain",
    "ssh",
    "tcp",
    "udp",
    "icmp",
    "ip",
    "ip6",
    // port ranges
    "1-1024",
    "80-79",
    "0-65535",
    "http-https",
    "20-ssh",
];

/// A bare identifier that can follow `or`/`and` and inherit qualifiers.
const MORE: &[&str] = &[
    "10.0.0.2",
    "10.0.0",
    "192.168.1.0/24",
    "::2",
    "fe80::/10",
    "00:11:22:33:44:66",
    "53",
    "8080",
    "1-2",
    "localhost",
    "domain",
    "10.0.0.0 mask 255.0.0.0",
];

/// `id`, or `localhost` where a name would be looked up as a host name:
/// both libraries ask the system's resolver, and a name it does not have
/// in `/etc/hosts` waits for DNS (seconds where there is none).
fn no_dns<'a>(kind: &str, id: &'a str) -> &'a str {
    const NAMES: &[&str] = &[
        "http",
        "domain",
        "ssh",
        "tcp",
        "udp",
        "icmp",
        "ip",
        "ip6",
        "1-1024",
        "80-79",
        "0-65535",
        "http-https",
        "20-ssh",
        "1-2",
    ];
    if NAMES.contains(&id) && matches!(kind, "" | "host " | "gateway ") {
        "localhost"
    } else {
        id
    }
}

/// One qualified primitive, sometimes with inheriting identifiers.
pub(crate) fn gen_qualified(rng: &mut Rng) -> String {
    let (proto, dir, kind) = (rng.pick(PROTOS), rng.pick(DIRS), rng.pick(KINDS));
    let id = no_dns(kind, rng.pick(IDS));
    let mut s = format!("{proto}{dir}{kind}{id}");
    while rng.chance(15) {
        let op = rng.pick(&[" or ", " and ", " or not ", " and not "]);
        s.push_str(op);
        s.push_str(no_dns(kind, rng.pick(MORE)));
    }
    s
}

/// The forms issue 30 names, on the links it names, compiled (optimised
/// and not) or refused exactly as libpcap master does: a `host` with a
/// mask or prefix, constant conditions after radiotap and AVS headers,
/// and 802.11 frame types master's optimiser does or does not relate.
#[test]
fn issue_30_forms_as_master() {
    let Some(o) = Oracle::new() else { return };
    let link = |lt: LinkType| LINKS.iter().position(|(l, _)| *l == lt).unwrap();
    let wlans = [
        LinkType::IEEE802_11,
        LinkType::IEEE802_11_RADIO,
        LinkType::IEEE802_11_RADIO_AVS,
        LinkType::PPI,
        LinkType::PRISM_HEADER,
    ];
    let mut cases: Vec<(LinkType, &str)> = [
        "host 192.168.1.0/24",
        "src host 192.168.1/24",
        "ip host 10.0.0.0/8",
        "host 192.168.1.0 mask 255.255.255.0",
        "host 10.0.0.1 or 10.0.0.0/8",
        "net 10.0.0.0/8",
        "host 00:11:22:33:44:55",
        "ether host 00:11:22:33:44:55",
    ]
    .iter()
    .map(|&e| (LinkType::EN10MB, e))
    .collect();
    for lt in wlans {
        for e in [
            "ether[0] & 0 = 1",
            "wlan[0] & 0 = 1",
            "link[0] & 0 = 1",
            "wlan type mgt and wlan type data",
            "type mgt and type data",
            "wlan type ctl and wlan type data",
            "subtype beacon and subtype probe-req",
            "type mgt subtype beacon and type data",
        ] {
            cases.push((lt, e));
        }
    }
    let mut refused = 0;
    for (lt, e) in cases {
        let c = compile(&o, link(lt), Origin::Dead, e);
        for (what, lp, ours) in [
            ("unoptimised", c.lp_unopt.is_ok(), c.ours_unopt.is_ok()),
            ("optimised", c.lp_opt.is_ok(), c.ours_opt.is_ok()),
        ] {
            assert_eq!(
                ours,
                lp,
                "{e:?} on {lt} {what}: libpcap {:?}, sluice {:?}",
                c.lp_opt.as_ref().err(),
                c.ours_opt.as_ref().err().map(|e| e.to_string())
            );
        }
        refused += c.lp_opt.is_err() as usize;
    }
    assert!(refused > 10, "{refused}");
}
