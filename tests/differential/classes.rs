//! The classes of issue 21, each on captures made here and compared with
//! libpcap master: loopback savefiles with every address family in either
//! byte order (pcap and pcapng, through `sluice filter -r`), folding where
//! libpcap does not optimise, tunnels and PPPoE on every link, protochain
//! on the other IP, reductions to a constant, `radio` on PPI, and files
//! without packets.

use super::*;
use sluice_libpcap::Handle;
use sluice_testsupport::savefile;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Comparisons made, for the report.
#[derive(Default)]
struct Tally {
    expressions: u64,
    packets: u64,
}

impl Tally {
    fn report(&self, what: &str) {
        println!(
            "{what}: {} (expression, handle) cases, {} packet verdicts compared with libpcap master",
            self.expressions, self.packets
        );
    }
}

/// sluice and libpcap master agree on `expr`: compiled or refused alike,
/// optimised and not, and on every packet sluice's verdict is master's
/// (optimised or unoptimised) while sluice's engines agree.
fn agree(
    h: &Handle<'static>,
    b: &sluice::ProgramBuilder,
    expr: &str,
    pkts: &[Vec<u8>],
    t: &mut Tally,
) {
    let lp_u = h.compile(expr, false);
    let lp_o = h.compile(expr, true);
    let ours_u = b.clone().optimize(false).expression(expr);
    let ours_o = b.clone().expression(expr);
    let ctx = || format!("'{expr}' on DLT {}", h.datalink());
    assert_eq!(
        lp_u.is_ok(),
        ours_u.is_ok(),
        "{}: libpcap {:?}, sluice {:?}",
        ctx(),
        lp_u.as_ref().err(),
        ours_u.as_ref().err()
    );
    assert_eq!(
        lp_o.is_ok(),
        ours_o.is_ok(),
        "{} optimised: libpcap {:?}, sluice {:?}",
        ctx(),
        lp_o.as_ref().err(),
        ours_o.as_ref().err()
    );
    t.expressions += 1;
    let (Ok(lpu), Ok(ou)) = (&lp_u, &ours_u) else {
        return;
    };
    for p in pkts {
        let wl = p.len() as u32;
        let ours = ou.run(p, wl);
        assert_eq!(ou.run_reference(p, wl), ours, "{}: {}", ctx(), hex(p));
        if let Ok(o) = &ours_o {
            assert_eq!(o.run(p, wl), ours, "{}: {}", ctx(), hex(p));
        }
        let want_u = lp_run(lpu, p);
        let want_o = lp_o.as_ref().ok().map(|o| lp_run(o, p));
        assert!(
            (ours != 0) == want_u || Some(ours != 0) == want_o,
            "{}: sluice {ours}, libpcap {want_u} / {want_o:?}: {}",
            ctx(),
            hex(p)
        );
        t.packets += 1;
    }
}

/// Every prefix of every packet.
fn cuts(pkts: &[Vec<u8>]) -> Vec<Vec<u8>> {
    pkts.iter()
        .flat_map(|p| (0..=p.len()).map(|n| p[..n].to_vec()))
        .collect()
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-classes-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice_cmd(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

// --------------------------------------------------------------- packets

fn ipv4_tcp(dport: u16) -> Vec<u8> {
    let mut p = vec![
        0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
    ];
    p.extend(1234u16.to_be_bytes());
    p.extend(dport.to_be_bytes());
    p.extend([0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    p
}

fn ipv6_l4(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut p = vec![0x60, 0, 0, 0];
    p.extend((l4.len() as u16).to_be_bytes());
    p.extend([next, 64]);
    let lo = [0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    p.extend(lo);
    p.extend(lo);
    p.extend_from_slice(l4);
    p
}

fn tcp_to(dport: u16) -> Vec<u8> {
    ipv4_tcp(dport)[20..].to_vec()
}

fn udp_to(dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = 5555u16.to_be_bytes().to_vec();
    u.extend(dport.to_be_bytes());
    u.extend(((8 + payload.len()) as u16).to_be_bytes());
    u.extend([0, 0]);
    u.extend_from_slice(payload);
    u
}

fn ipv4_udp(dport: u16, payload: &[u8]) -> Vec<u8> {
    let u = udp_to(dport, payload);
    let mut p = vec![
        0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    p[2..4].copy_from_slice(&((20 + u.len()) as u16).to_be_bytes());
    p.extend(u);
    p
}

/// The network packets the loopback captures carry: IPv4 TCP to 80,
/// IPv6 TCP to 80, IPv6 UDP behind a hop-by-hop header.
fn loopback_payloads() -> Vec<(bool, Vec<u8>)> {
    let mut hbh = vec![17, 0, 0, 0, 0, 0, 0, 0];
    hbh.extend(udp_to(53, &[1, 2, 3, 4]));
    vec![
        (false, ipv4_tcp(80)),
        (true, ipv6_l4(6, &tcp_to(80))),
        (true, ipv6_l4(0, &hbh)),
    ]
}

/// Address families written in a loopback header: Linux's and the BSDs'
/// AF_INET6, AF_INET, Solaris's AF_INET6, nothing.
const FAMILIES: [u32; 7] = [2, 10, 24, 28, 30, 26, 0];

const LOOPBACK_EXPRESSIONS: &[&str] = &[
    "ip",
    "ip6",
    "not ip6",
    "tcp",
    "udp",
    "port 80",
    "tcp port 80",
    "host ::1",
    "host 127.0.0.1",
    "proto 6",
    "ip6 proto 6",
    "protochain 17",
    "ip6 protochain 17",
    "link proto \\ip6",
    "ip or ip6",
    "net ::/0 and tcp",
];

// ----------------------------------------------------------------- tests

/// Item 1: NULL and LOOP savefiles, every address family in either byte
/// order, pcap and pcapng in either byte order, through `sluice filter
/// -r` (and -O), against libpcap master reading the same file; and a
/// handle without a file (`-y NULL -d`) as `pcap_open_dead` compiles.
#[test]
fn loopback_savefiles_follow_master() {
    let Some(lib) = master() else { return };
    let d = dir("loopback");
    let mut t = Tally::default();
    for (lt, dlt) in [(LinkType::NULL, 0u16), (LinkType::LOOP, 108)] {
        let mut pkts = Vec::new();
        for af in FAMILIES {
            for word in [af.to_le_bytes(), af.to_be_bytes()] {
                for (_, payload) in loopback_payloads() {
                    let mut p = word.to_vec();
                    p.extend(&payload);
                    pkts.push(p);
                }
            }
        }
        let refs: Vec<&[u8]> = pkts.iter().map(Vec::as_slice).collect();
        for big in [false, true] {
            for ng in [false, true] {
                let bytes = if ng {
                    savefile::pcapng(dlt, big, &refs)
                } else {
                    savefile::pcap(dlt.into(), big, &refs)
                };
                let path = d.join(format!(
                    "{dlt}-{big}-{ng}.{}",
                    if ng { "pcapng" } else { "pcap" }
                ));
                std::fs::write(&path, bytes).unwrap();
                let h = lib.open_offline(&path).expect("master reads it");
                for expr in LOOPBACK_EXPRESSIONS {
                    let b = Program::builder(lt)
                        .snaplen(65535)
                        .offline(true)
                        .capture_big_endian(big);
                    agree(&h, &b, expr, &pkts, &mut t);
                    // The command, optimised and not.
                    let want: String = {
                        let p = h.compile(expr, true).unwrap();
                        pkts.iter()
                            .map(|k| if lp_run(&p, k) { "1\n" } else { "0\n" })
                            .collect()
                    };
                    for o in [&[][..], &["-O"][..]] {
                        let mut args = vec!["filter", "-r", path.to_str().unwrap(), "--verdicts"];
                        args.extend_from_slice(o);
                        args.push(expr);
                        let out = sluice_cmd(&args);
                        assert!(
                            out.status.success(),
                            "{expr}: {}",
                            String::from_utf8_lossy(&out.stderr)
                        );
                        assert_eq!(
                            String::from_utf8_lossy(&out.stdout),
                            want,
                            "{expr} on {}",
                            path.display()
                        );
                        t.packets += pkts.len() as u64;
                    }
                }
            }
        }
        // Without a file: this host's AF_INET6 in this host's byte order.
        let h = lib.open_dead(dlt.into(), 65535).unwrap();
        for expr in LOOPBACK_EXPRESSIONS {
            agree(
                &h,
                &Program::builder(lt).snaplen(65535),
                expr,
                &pkts,
                &mut t,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&d);
    t.report("loopback savefiles");
}

/// Item 2: libpcap does not optimise (and so does not fold `1 = 1`) on
/// 802.11 links when a primitive needs the network layer, nor anything on
/// Prism, nor with -O; sluice keeps the loads there. 802.11 frames cut at
/// every length.
#[test]
fn folding_only_where_master_optimises() {
    let Some(lib) = master() else { return };
    let mut t = Tally::default();
    let mut rng = Rng::new(21);
    let exprs = [
        "tcp or 1 = 1",
        "1 = 1 or tcp",
        "ip and 1 = 1",
        "not (udp or 1 = 0)",
        "ip and 1 = 0",
        "wlan type data and 2 = 2",
        "tcp or len & 0 = 0",
    ];
    for (lt, dlt) in [
        (LinkType::IEEE802_11, 105u32),
        (LinkType::IEEE802_11_RADIO, 127),
        (LinkType::PPI, 192),
        (LinkType::PRISM_HEADER, 119),
        (LinkType::IEEE802_11_RADIO_AVS, 163),
        (LinkType::EN10MB, 1),
    ] {
        let mut pkts = Vec::new();
        for _ in 0..12 {
            pkts.push(build(&mut rng, lt).buf);
        }
        let pkts = cuts(&pkts);
        let h = lib.open_dead(dlt, 65535).unwrap();
        for e in exprs {
            agree(&h, &Program::builder(lt).snaplen(65535), e, &pkts, &mut t);
        }
    }
    // The issue's case exactly: a short 802.11 frame is rejected.
    let p = Program::builder(LinkType::IEEE802_11)
        .build("tcp or 1 = 1")
        .unwrap();
    assert_eq!(p.run(&[0x08, 0x00], 2), 0);
    t.report("folding");
}

/// Items 3 and 4: geneve, vxlan and pppoes (with and without an id,
/// followed by other primitives) compile on every link where master
/// compiles them and agree on frames carrying them, cut at every length.
#[test]
fn tunnels_and_pppoes_on_every_link() {
    let Some(lib) = master() else { return };
    let mut t = Tally::default();
    let vxlan = {
        let mut inner = vec![0u8; 12];
        inner.extend(0x0800u16.to_be_bytes());
        inner.extend(ipv4_tcp(80));
        let mut h = vec![0x08, 0, 0, 0, 0, 0, 100, 0];
        h.extend(inner);
        ipv4_udp(4789, &h)
    };
    let geneve = {
        let mut h = vec![0x01, 0, 0x08, 0x00, 0, 0, 5, 0, 1, 2, 3, 4];
        h.extend(ipv4_tcp(22));
        ipv4_udp(6081, &h)
    };
    let pppoe = |ppp: u16, body: &[u8]| {
        let mut p = vec![0x11, 0, 0, 100];
        p.extend(((2 + body.len()) as u16).to_be_bytes());
        p.extend(ppp.to_be_bytes());
        p.extend_from_slice(body);
        p
    };
    let mpls = {
        let mut m = (100u32 << 12 | 1 << 8 | 64).to_be_bytes().to_vec();
        m.extend(ipv4_tcp(80));
        m
    };
    let exprs = [
        "vxlan",
        "vxlan 100",
        "vxlan 7",
        "vxlan and tcp port 80",
        "geneve",
        "geneve 5",
        "geneve and ip",
        "geneve 5 and tcp port 22",
        "pppoes",
        "pppoes 100",
        "pppoes and ip",
        "pppoes 100 and tcp port 80",
        "pppoes and mpls",
        "pppoes 100 and mpls 100 and ip",
    ];
    // (link, DLT, link header before an Ethernet-typed payload, how the
    // header names the payload).
    type Wrap = fn(u16) -> Vec<u8>;
    let links: &[(LinkType, u32, Wrap)] = &[
        (LinkType::LINUX_SLL, 113, |et| {
            let mut h = vec![0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0];
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::LINUX_SLL2, 276, |et| {
            let mut h = et.to_be_bytes().to_vec();
            h.extend([0, 0, 0, 0, 0, 2, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0]);
            h
        }),
        (LinkType::PPP, 9, |et| {
            let ppp: u16 = match et {
                0x0800 => 0x21,
                o => o,
            };
            let mut h = vec![0xff, 0x03];
            h.extend(ppp.to_be_bytes());
            h
        }),
        (LinkType::C_HDLC, 104, |et| {
            let mut h = vec![0x0f, 0];
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::FDDI, 10, |et| {
            let mut h = vec![
                0x50, 1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1, 0xaa, 0xaa, 3, 0, 0, 0,
            ];
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::IEEE802_11, 105, |et| {
            let mut h = vec![0x08, 0x01, 0, 0];
            h.extend([1u8; 18]);
            h.extend([0, 0, 0xaa, 0xaa, 3, 0, 0, 0]);
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::IEEE802_11_RADIO, 127, |et| {
            let mut h = vec![0, 0, 8, 0, 0, 0, 0, 0, 0x88, 0x01, 0, 0];
            h.extend([1u8; 18]);
            h.extend([0, 0, 0, 0, 0xaa, 0xaa, 3, 0, 0, 0]);
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::PPI, 192, |et| {
            let mut h = vec![0, 0, 8, 0, 105, 0, 0, 0, 0x08, 0x02, 0, 0];
            h.extend([1u8; 18]);
            h.extend([0, 0, 0xaa, 0xaa, 3, 0, 0, 0]);
            h.extend(et.to_be_bytes());
            h
        }),
        (LinkType::NULL, 0, |et| {
            let af: u32 = if et == 0x0800 { 2 } else { 99 };
            af.to_le_bytes().to_vec()
        }),
        (LinkType::RAW, 12, |_| Vec::new()),
        (LinkType::IPV4, 228, |_| Vec::new()),
        (LinkType::IPV6, 229, |_| Vec::new()),
        (LinkType::FRELAY, 107, |_| vec![0x18, 0x41, 3, 0xcc]),
    ];
    for &(lt, dlt, wrap) in links {
        let mut frames = Vec::new();
        for (et, body) in [
            (0x0800u16, vxlan.clone()),
            (0x0800, geneve.clone()),
            (0x8864, pppoe(0x0021, &ipv4_tcp(80))),
            (0x8864, pppoe(0x0281, &mpls)),
            (0x0800, ipv4_tcp(80)),
        ] {
            let mut f = wrap(et);
            f.extend(body);
            frames.push(f);
        }
        let pkts = cuts(&frames);
        let h = lib.open_dead(dlt, 65535).unwrap();
        for e in exprs {
            agree(&h, &Program::builder(lt).snaplen(65535), e, &pkts, &mut t);
        }
    }
    t.report("tunnels and pppoes");
}

/// Item 5: protochain for the IP a link cannot carry is a program that
/// rejects everything, not an error (libpcap never optimises protochain).
#[test]
fn protochain_on_the_other_ip() {
    let Some(lib) = master() else { return };
    let mut t = Tally::default();
    let pkts = cuts(&[ipv4_tcp(80), ipv6_l4(6, &tcp_to(80))]);
    for (lt, dlt, expr) in [
        (LinkType::IPV4, 228u32, "ip6 protochain 6"),
        (LinkType::IPV6, 229, "ip protochain 6"),
        (LinkType::IPV4, 228, "ip protochain 6"),
        (LinkType::IPV6, 229, "ip6 protochain 6"),
        (LinkType::IPV4, 228, "not ip6 protochain 17"),
    ] {
        let h = lib.open_dead(dlt, 65535).unwrap();
        agree(
            &h,
            &Program::builder(lt).snaplen(65535),
            expr,
            &pkts,
            &mut t,
        );
    }
    assert!(Program::builder(LinkType::IPV4)
        .build("ip6 protochain 6")
        .is_ok());
    t.report("protochain");
}

/// Item 6: comparisons that reduce to a constant through `& 0` or `* 0`
/// are refused as rejecting every packet when optimising, as libpcap
/// master refuses them, and compile (and reject) with -O.
#[test]
fn reductions_refused_as_master() {
    let Some(lib) = master() else { return };
    let mut t = Tally::default();
    let mut rng = Rng::new(6);
    let pkts: Vec<Vec<u8>> = (0..20)
        .map(|_| build(&mut rng, LinkType::EN10MB).buf)
        .collect();
    let h = lib.open_dead(1, 65535).unwrap();
    for e in [
        "ether[0] & 0 = 1",
        "ether[0] & 0 != 0",
        "len & 0 = 1",
        "ether[0] * 0 = 1",
        "0 * ether[1] > 3",
        "ether[0] & 0 = 0",
        "ip and len & 0 = 1",
        "ip and ip6",
        "tcp and udp",
        "ip and 1 = 0",
        "rarp and llc",
        "ip[0] % (8 % 4) = 1",
        "ip[0] >> (1 + 40) = 1",
        "ip[0] >= (443 >> (1 + 40))",
        "((0x80000000 * 6) / (len * 0)) = 1",
        "(6 / (len * 0)) = 1",
    ] {
        agree(
            &h,
            &Program::builder(LinkType::EN10MB).snaplen(65535),
            e,
            &pkts,
            &mut t,
        );
    }
    let e = Program::builder(LinkType::EN10MB)
        .build("ether[0] & 0 = 1")
        .unwrap_err();
    assert!(matches!(e, sluice::Error::RejectsAll), "{e}");
    t.report("reductions");
}

/// Item 7: `radio[...]` on PPI (and after a tunnel) is refused as master
/// refuses it; on radiotap, AVS and Prism it reads the radio header.
#[test]
fn radio_where_master_has_radio_information() {
    let Some(lib) = master() else { return };
    let mut t = Tally::default();
    let mut rng = Rng::new(7);
    for (lt, dlt) in [
        (LinkType::PPI, 192u32),
        (LinkType::IEEE802_11_RADIO, 127),
        (LinkType::IEEE802_11_RADIO_AVS, 163),
        (LinkType::PRISM_HEADER, 119),
        (LinkType::IEEE802_11, 105),
    ] {
        let pkts: Vec<Vec<u8>> = (0..10).map(|_| build(&mut rng, lt).buf).collect();
        let h = lib.open_dead(dlt, 65535).unwrap();
        for e in ["radio[0] = 0", "radio[2:2] > 8", "vxlan and radio[0] = 0"] {
            agree(
                &h,
                &Program::builder(lt).snaplen(65535),
                e,
                &cuts(&pkts),
                &mut t,
            );
        }
    }
    let e = Program::builder(LinkType::PPI)
        .build("radio[0] = 0")
        .unwrap_err();
    assert!(
        e.to_string().contains("radio information not present"),
        "{e}"
    );
    t.report("radio");
}

/// Item 8: a capture without packets, or with an interface no packet
/// uses, still refuses an expression that does not compile for its link
/// types (exit 1, as tcpdump); a pcapng file without any interface is
/// refused as libpcap refuses it.
#[test]
fn files_without_packets() {
    let Some(lib) = master() else { return };
    let d = dir("empty");
    let write = |name: &str, bytes: Vec<u8>| -> PathBuf {
        let p = d.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let eth = vec![0u8; 60];
    let mut unused = savefile::pcapng_section(false);
    unused.extend(savefile::pcapng_interface(false, 1));
    unused.extend(savefile::pcapng_packet(false, 0, &eth));
    unused.extend(savefile::pcapng_interface(false, 0));
    let mut late = savefile::pcapng_section(true);
    late.extend(savefile::pcapng_interface(true, 1));
    late.extend(savefile::pcapng_packet(true, 0, &eth));
    late.extend(savefile::pcapng_section(false));
    late.extend(savefile::pcapng_interface(false, 0));
    let files = [
        write("empty.pcap", savefile::pcap(1, false, &[])),
        write("empty-be.pcap", savefile::pcap(0, true, &[])),
        write("idb-only.pcapng", savefile::pcapng(1, false, &[])),
        write("unused-idb.pcapng", unused),
        write("later-section.pcapng", late),
    ];
    let run =
        |f: &Path, expr: &str| sluice_cmd(&["filter", "-r", f.to_str().unwrap(), "--count", expr]);
    for f in &files {
        // Every link type the file declares refuses this.
        let bad = run(f, "foo bar");
        assert_eq!(bad.status.code(), Some(1), "{}", f.display());
        // `ether host` compiles on Ethernet, not on NULL: refused exactly
        // where master (compiling for each declared link type) refuses.
        let declared: Vec<u16> = {
            let mut r = sluice::capture::CaptureReader::open(f).unwrap();
            while r.next_packet().unwrap().is_some() {}
            r.declared_interfaces().iter().map(|i| i.linktype).collect()
        };
        let master_ok = declared.iter().all(|&l| {
            lib.open_dead(l.into(), 65535)
                .unwrap()
                .compile("ether host 1:2:3:4:5:6", true)
                .is_ok()
        });
        let ours = run(f, "ether host 1:2:3:4:5:6");
        assert_eq!(
            ours.status.success(),
            master_ok,
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&ours.stderr)
        );
        // libpcap reads it (a file with several link types: up to the
        // second one).
        assert!(lib.open_offline(f).is_ok(), "{}", f.display());
    }
    let none = write("no-idb.pcapng", savefile::pcapng_section(false));
    let o = run(&none, "ip");
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no Interface Description Blocks"));
    let lp = lib
        .open_offline(&none)
        .err()
        .expect("libpcap refuses it too")
        .to_string();
    assert!(lp.contains("no Interface Description Blocks"), "{lp}");
    let _ = std::fs::remove_dir_all(&d);
}
