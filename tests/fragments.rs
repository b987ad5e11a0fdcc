//! Fragment dispatch (MPF §3), end to end: generated captures of fragmented
//! IPv4 and IPv6 datagrams (2–7 fragments; first fragment early, late, too
//! late or lost; sessions interleaved; identifications shared across
//! sources), checked fragment by fragment against a model whose per-packet
//! verdicts come from libpcap itself (through the `pcap` crate).
//!
//! * libpcap sees the generated fragments as intended (`ip[6:2] & 0x1fff !=
//!   0` picks exactly the later IPv4 fragments, and so on), and a port filter
//!   (`tcp dst port 80`) accepts first fragments only.
//! * The library's [`Dispatcher`], fed with sluice's merged classifier,
//!   delivers every packet to exactly the filters the model says, in the
//!   model's order, in both modes.
//! * `sluice split` without `--fragments` writes libpcap's per-packet
//!   choice (so the port filter misses every later fragment); with
//!   `--fragments` each output file holds exactly the model's packets in the
//!   model's order, on Ethernet, 802.1Q, Linux cooked v1/v2, NULL and raw IP;
//!   `--json` reports the drop counters.

mod common;
use common::{fresh_dir as tmp, s, sluice};

use pcap::{BpfProgram, Capture, Linktype};
use sluice::capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
use sluice_classifier::Classifier;
use sluice_fragments::fragmenter::{Datagram, Link};
use sluice_fragments::{Config, Dispatcher, Limits, Mode, Output, Source};
use sluice_testsupport::Rng;
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

const HOLD_MS: i64 = 1000;
const DATAGRAM_MS: i64 = 30_000;

/// The filters: name and expression (the same bytes relative to the
/// network header on every link; see [`expression`] for VLAN tags).
const FILTERS: &[(&str, &str)] = &[
    ("web", "tcp dst port 80"),
    ("dns", "udp dst port 53"),
    ("h1udp", "ip src host 10.0.0.1 and udp"),
    (
        "web6",
        "ip6[6] = 44 and ip6[40] = 6 and ip6[42:2] & 0xfff8 = 0 and ip6[50:2] = 80",
    ),
    (
        "h2first6",
        "ip6 src host 2001:db8::2 and ip6[6] = 44 and ip6[42:2] & 0xfff8 = 0",
    ),
    ("later4", "ip[6:2] & 0x1fff != 0"),
];

/// A filter's expression on a link: behind VLAN tags libpcap needs one
/// `vlan` per tag before the network-layer tests.
fn expression(link: Link, f: usize) -> String {
    let e = FILTERS[f].1;
    match link {
        Link::Vlan(_) => format!("vlan and ({e})"),
        Link::QinQ(..) => format!("vlan and vlan and ({e})"),
        _ => e.to_string(),
    }
}
/// What a generated packet is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Whole,
    First(usize),
    Later(usize),
}

/// One packet of a scenario: time, kind, IP bytes.
#[derive(Clone, Debug)]
struct Gen {
    ms: i64,
    kind: Kind,
    v6: bool,
    ip: Vec<u8>,
}

/// How a datagram's fragments are ordered.
#[derive(Clone, Copy, Debug)]
enum Order {
    Sorted,
    FirstLast,
    Shuffled,
    FirstLost,
    FirstTooLate,
}

/// A scenario: `n` datagrams (and some unfragmented packets), interleaved.
fn scenario(seed: u64, n: usize) -> Vec<Gen> {
    let mut r = Rng::new(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut events: Vec<Gen> = Vec::new();
    let mut keys = std::collections::HashSet::new();
    for d in 0..n {
        let v6 = r.below(3) == 0;
        let host = 1 + r.below(4) as u8;
        let (tcp, port) = match r.below(3) {
            0 => (true, 80),
            1 => (false, 53),
            _ => (false, 9999),
        };
        // Identifications from a tiny range, so sources share them; the
        // whole key stays unique within the scenario.
        let mut id = 1 + r.below(3) as u32;
        while !keys.insert((v6, host, tcp, id)) {
            id += 3;
        }
        let data = vec![0x5a; 100 + r.below(2900)];
        let dg = if v6 {
            let mut src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
            src[15] = host;
            let mut dst = src;
            dst[14] = 1;
            dst[15] = 0;
            if tcp {
                Datagram::tcp_v6(src, dst, 40000, port, id, &data)
            } else {
                Datagram::udp_v6(src, dst, 40000, port, id, &data)
            }
        } else {
            let src = [10, 0, 0, host];
            let dst = [192, 168, 0, 1];
            if tcp {
                Datagram::tcp_v4(src, dst, 40000, port, id as u16, &data)
            } else {
                Datagram::udp_v4(src, dst, 40000, port, id as u16, &data)
            }
        };
        let start = r.below(20_000) as i64;
        if r.below(6) == 0 {
            events.push(Gen {
                ms: start,
                kind: Kind::Whole,
                v6,
                ip: dg.whole(),
            });
            continue;
        }
        let frags = dg.fragments(2 + r.below(6));
        let order = match r.below(5) {
            0 => Order::Sorted,
            1 => Order::FirstLast,
            2 => Order::Shuffled,
            3 => Order::FirstLost,
            _ => Order::FirstTooLate,
        };
        let mut seq: Vec<usize> = (0..frags.len()).collect();
        match order {
            Order::Sorted => {}
            Order::FirstLast | Order::FirstTooLate => seq.rotate_left(1),
            Order::Shuffled => {
                for i in (1..seq.len()).rev() {
                    seq.swap(i, r.below(i + 1));
                }
            }
            Order::FirstLost => seq.retain(|&i| i != 0),
        }
        for (k, &i) in seq.iter().enumerate() {
            let mut ms = start + 10 * k as i64;
            if i == 0 && matches!(order, Order::FirstTooLate) {
                ms += HOLD_MS + 500;
            }
            events.push(Gen {
                ms,
                kind: if i == 0 {
                    Kind::First(d)
                } else {
                    Kind::Later(d)
                },
                v6,
                ip: frags[i].clone(),
            });
        }
    }
    events.sort_by_key(|e| e.ms);
    events
}

/// libpcap's per-packet verdicts for every filter, compiled for a link.
struct Oracle {
    progs: Vec<BpfProgram>,
}

impl Oracle {
    fn new(link: Link) -> Oracle {
        // libpcap's DLT for LINKTYPE_RAW (101) is DLT_RAW (12 on Linux).
        let dlt = match link.linktype() {
            101 => 12,
            n => i32::from(n),
        };
        let cap = Capture::dead(Linktype(dlt)).expect("libpcap dead handle");
        let progs = (0..FILTERS.len())
            .map(|f| {
                cap.compile(&expression(link, f), true)
                    .expect("libpcap compiles")
            })
            .collect();
        Oracle { progs }
    }

    fn verdicts(&self, pkt: &[u8]) -> Vec<u32> {
        (0..FILTERS.len() as u32)
            .filter(|&i| self.progs[i as usize].filter(pkt))
            .collect()
    }
}

/// libpcap master's verdicts for the filters as `tcpdump -r` compiles them
/// on the capture file (the savefile rule: on NULL links any BSD's
/// AF_INET6, as the fragmenter writes).
fn file_verdicts(
    master: &sluice_libpcap::Libpcap,
    cap: &Path,
    link: Link,
    pkts: &[Vec<u8>],
) -> Vec<Vec<u32>> {
    let h = master
        .open_offline(cap)
        .expect("libpcap master opens the capture");
    let progs: Vec<_> = (0..FILTERS.len())
        .map(|f| {
            h.compile(&expression(link, f), true)
                .expect("libpcap compiles")
        })
        .collect();
    pkts.iter()
        .map(|p| {
            (0..FILTERS.len() as u32)
                .filter(|&i| progs[i as usize].run(p, p.len() as u32) != 0)
                .collect()
        })
        .collect()
}

/// The model: per filter, the input indices delivered to it, in delivery
/// order. `own[i]`: libpcap's verdicts for packet `i`.
fn model(events: &[Gen], own: &[Vec<u32>], mode: Mode) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); FILTERS.len()];
    // Datagram -> (time of first fragment, its filters).
    let mut known: HashMap<usize, (i64, Vec<u32>)> = HashMap::new();
    // Held: (index, arrival time, datagram), in arrival order.
    let mut held: Vec<(usize, i64, usize)> = Vec::new();
    let winner = |v: &[u32]| v.first().copied();
    let send = |out: &mut Vec<Vec<u64>>, i: usize, to: &[u32]| {
        for &f in to {
            out[f as usize].push(i as u64);
        }
    };
    for (i, e) in events.iter().enumerate() {
        let now = e.ms;
        // Held fragments past their timeout are given up.
        held.retain(|&(p, t, _)| {
            if now > t + HOLD_MS {
                if mode == Mode::First {
                    send(&mut out, p, &own[p][..own[p].len().min(1)]);
                }
                false
            } else {
                true
            }
        });
        known.retain(|_, (t, _)| now <= *t + DATAGRAM_MS);
        match e.kind {
            Kind::Whole => match mode {
                Mode::All => send(&mut out, i, &own[i]),
                Mode::First => send(&mut out, i, &own[i][..own[i].len().min(1)]),
            },
            Kind::First(d) => {
                let ids: Vec<u32> = match mode {
                    Mode::All => own[i].clone(),
                    Mode::First => winner(&own[i]).into_iter().collect(),
                };
                send(&mut out, i, &ids);
                known.insert(d, (now, ids.clone()));
                let mut keep = Vec::new();
                for (p, t, dd) in held.drain(..) {
                    if dd != d {
                        keep.push((p, t, dd));
                        continue;
                    }
                    let to: Vec<u32> = match mode {
                        Mode::All => ids
                            .iter()
                            .copied()
                            .filter(|f| !own[p].contains(f))
                            .collect(),
                        Mode::First => winner(&ids).or(winner(&own[p])).into_iter().collect(),
                    };
                    send(&mut out, p, &to);
                }
                held = keep;
            }
            Kind::Later(d) => {
                if let Some((_, ids)) = known.get(&d) {
                    let to: Vec<u32> = match mode {
                        Mode::All => {
                            let mut u = own[i].clone();
                            u.extend(ids.iter().filter(|f| !own[i].contains(f)));
                            u
                        }
                        Mode::First => winner(ids).or(winner(&own[i])).into_iter().collect(),
                    };
                    send(&mut out, i, &to);
                } else {
                    if mode == Mode::All {
                        send(&mut out, i, &own[i]);
                    }
                    held.push((i, now, d));
                }
            }
        }
    }
    if mode == Mode::First {
        for (p, _, _) in held {
            send(&mut out, p, &own[p][..own[p].len().min(1)]);
        }
    }
    out
}

fn packets(events: &[Gen], link: Link) -> Vec<Vec<u8>> {
    events.iter().map(|e| link.wrap(&e.ip)).collect()
}

fn packet<'a>(e: &Gen, link: Link, data: &'a [u8]) -> Packet<'a> {
    Packet::new(
        1_700_000_000 + e.ms / 1000,
        (e.ms % 1000) as u32 * 1_000_000,
        link.linktype(),
        data,
    )
}

fn limits() -> Limits {
    Limits {
        hold_packets: 100_000,
        hold_bytes: 1 << 30,
        hold_timeout: Duration::from_millis(HOLD_MS as u64),
        datagram_timeout: Duration::from_millis(DATAGRAM_MS as u64),
        max_datagrams: 100_000,
    }
}

/// libpcap reads the generated fragments as intended.
#[test]
fn libpcap_sees_the_fragments_as_generated() {
    let events = scenario(1, 60);
    let cap = Capture::dead(Linktype(1)).unwrap();
    let compile = |e: &str| cap.compile(e, true).unwrap();
    let later4 = compile("ip[6:2] & 0x1fff != 0");
    let first4 = compile("ip[6:2] & 0x3fff = 0x2000");
    let later6 = compile("ip6[6] = 44 and ip6[42:2] & 0xfff8 != 0");
    let first6 = compile("ip6[6] = 44 and ip6[42:2] & 0xfff9 = 1");
    let web = compile("tcp dst port 80");
    let mut seen = [0; 4];
    for e in &events {
        let p = Link::Ethernet.wrap(&e.ip);
        let (first, later) = (
            matches!(e.kind, Kind::First(_)),
            matches!(e.kind, Kind::Later(_)),
        );
        assert_eq!(later4.filter(&p), later && !e.v6, "{e:?}");
        assert_eq!(first4.filter(&p), first && !e.v6, "{e:?}");
        assert_eq!(later6.filter(&p), later && e.v6, "{e:?}");
        assert_eq!(first6.filter(&p), first && e.v6, "{e:?}");
        // A port filter never accepts a later fragment: libpcap checks the
        // fragment offset before it reads a port.
        if later {
            assert!(!web.filter(&p));
        }
        let tcp80 = !e.v6 && e.ip[9] == 6 && e.ip[22..24] == [0, 80];
        if tcp80 {
            assert!(web.filter(&p), "{e:?}");
        }
        seen[usize::from(e.v6) * 2 + usize::from(later)] += 1;
    }
    assert!(seen.iter().all(|&n| n > 5), "{seen:?}");
}

/// The library, fed with sluice's merged classifier, against the model.
#[test]
fn dispatcher_delivers_every_fragment_where_the_model_says() {
    for seed in 1..=12u64 {
        let link = Link::ALL[seed as usize % Link::ALL.len()];
        let events = scenario(seed, 50);
        let pkts = packets(&events, link);
        let oracle = Oracle::new(link);
        let own: Vec<Vec<u32>> = pkts.iter().map(|p| oracle.verdicts(p)).collect();
        let lt = sluice::LinkType::from_number(u32::from(link.linktype())).unwrap();
        let mut c = Classifier::new();
        for i in 0..FILTERS.len() {
            let f = sluice::pcap::compile_for(&expression(link, i), lt, 262_144, false).unwrap();
            c.insert(&f, (FILTERS.len() - i) as i32);
        }
        c.publish();
        let reader = c.reader();
        for mode in [Mode::All, Mode::First] {
            let want = model(&events, &own, mode);
            let mut d = Dispatcher::new(Config {
                mode,
                limits: limits(),
                big_endian: false,
            });
            let mut out = Output::default();
            let mut got = vec![Vec::new(); FILTERS.len()];
            let record = |out: &Output, i: usize, got: &mut Vec<Vec<u64>>| {
                for del in out.iter() {
                    let index = match del.source {
                        Source::Current => i as u64,
                        Source::Held(h) => {
                            assert_eq!(h.packet.data, pkts[h.index as usize]);
                            h.index
                        }
                    };
                    for &f in del.filters {
                        got[f as usize].push(index);
                    }
                }
            };
            for (i, (e, p)) in events.iter().zip(&pkts).enumerate() {
                let pkt = packet(e, link, p);
                // sluice's classifier agrees with libpcap packet by packet.
                let mut ids = Vec::new();
                reader.classify_into(p, pkt.wirelen, &mut ids);
                assert_eq!(ids, own[i], "seed {seed} packet {i}");
                d.dispatch_with(&reader, &pkt, &mut out);
                record(&out, i, &mut got);
                assert!(d.counters().balanced(d.holding()));
            }
            d.flush(&mut out);
            record(&out, usize::MAX, &mut got);
            for (f, (name, _)) in FILTERS.iter().enumerate() {
                assert_eq!(
                    got[f], want[f],
                    "seed {seed} {link:?} {mode:?} filter {name}"
                );
            }
            let k = d.counters();
            assert!(k.balanced(0));
            assert!(k.released > 0 && k.dropped() > 0, "{k:?}");
        }
    }
}

// ---- the command ----

/// Write the scenario as a pcap file of `link`.
fn write_capture(path: &Path, events: &[Gen], link: Link) {
    let mut w = CaptureWriter::create(
        path,
        &CaptureFormat::Pcap {
            nanos: true,
            big_endian: false,
            linktype: link.linktype(),
            snaplen: 262_144,
            fcs_len: None,
        },
    )
    .unwrap();
    for (e, p) in events.iter().zip(packets(events, link)) {
        w.write_packet(&packet(e, link, &p)).unwrap();
    }
    w.finish().unwrap();
}

fn write_filters(path: &Path, link: Link) {
    let text: String = FILTERS
        .iter()
        .enumerate()
        .map(|(f, (n, _))| format!("{n}\t{}\n", expression(link, f)))
        .collect();
    std::fs::write(path, text).unwrap();
}

fn read_capture(path: &Path) -> Vec<Vec<u8>> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        out.push(p.data.to_vec());
    }
    out
}

fn counts(stdout: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap().parse().unwrap())
        .collect()
}

/// `sluice split` with and without `--fragments`, on several links.
#[test]
fn split_with_fragments_writes_the_model() {
    let Some(master) = sluice_testsupport::master::load("split with fragments") else {
        return;
    };
    let dir = tmp("split");
    for (seed, link) in [
        (21, Link::Ethernet),
        (22, Link::Vlan(42)),
        (23, Link::Sll),
        (24, Link::Sll2),
        (25, Link::NullLe),
        (26, Link::Raw),
    ] {
        let filters = dir.join(format!("filters-{seed}.txt"));
        write_filters(&filters, link);
        let events = scenario(seed, 40);
        let pkts = packets(&events, link);
        let cap = dir.join(format!("in-{seed}.pcap"));
        write_capture(&cap, &events, link);
        let own = file_verdicts(&master, &cap, link, &pkts);

        // Without --fragments: libpcap's per-packet meaning.
        let o = sluice(&["split", "-r", s(&cap), "--filters", s(&filters), "--count"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let plain = counts(&o.stdout);
        for (f, n) in plain.iter().enumerate() {
            let lp = own.iter().filter(|v| v.contains(&(f as u32))).count() as u64;
            assert_eq!(*n, lp, "{link:?} {}", FILTERS[f].0);
        }

        for (mode, extra) in [(Mode::All, None), (Mode::First, Some("--first-match"))] {
            let want = model(&events, &own, mode);
            let out_dir = dir.join(format!("out-{seed}-{mode:?}"));
            let mut args = vec![
                "split",
                "-r",
                s(&cap),
                "--filters",
                s(&filters),
                "--fragments",
                "--hold-timeout",
                "1",
                "--count",
                "--out-dir",
                s(&out_dir),
            ];
            args.extend(extra);
            let o = sluice(&args);
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
            let with = counts(&o.stdout);
            for (f, (name, _)) in FILTERS.iter().enumerate() {
                assert_eq!(with[f], want[f].len() as u64, "{link:?} {mode:?} {name}");
                let written = read_capture(&out_dir.join(format!("{name}.pcap")));
                let expect: Vec<Vec<u8>> =
                    want[f].iter().map(|&i| pkts[i as usize].clone()).collect();
                assert!(
                    written == expect,
                    "{link:?} {mode:?} {name}: file differs from the model"
                );
            }
            // Something was dropped (first fragments lost or too late), and said so.
            assert!(String::from_utf8_lossy(&o.stderr).contains("held fragments dropped"));
            if mode == Mode::All {
                // The port filter: libpcap sees first fragments (and whole
                // datagrams) only; with --fragments the later ones follow.
                let web = 0;
                assert!(
                    with[web] > plain[web],
                    "{link:?}: {} vs {}",
                    with[web],
                    plain[web]
                );
                let later_to_web = want[web]
                    .iter()
                    .filter(|&&i| matches!(events[i as usize].kind, Kind::Later(_)))
                    .count();
                assert!(later_to_web > 0);
                assert_eq!(with[web], plain[web] + later_to_web as u64);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--json` reports the counters; queue limits and timeouts drop and count.
#[test]
fn split_json_reports_drops() {
    let dir = tmp("json");
    let filters = dir.join("filters.txt");
    std::fs::write(&filters, "dns\tudp dst port 53\n").unwrap();
    let mut events = Vec::new();
    // Datagram A: 5 fragments, later ones first, first fragment 0.5 s later.
    // Datagram B: first fragment lost (3 later fragments, given up at the end).
    // Datagram C: first fragment 3 s late (its 2 later fragments time out).
    let a = Datagram::udp_v4([10, 0, 0, 1], [10, 0, 0, 9], 1, 53, 1, &[1; 1800]).fragments(5);
    let b = Datagram::udp_v4([10, 0, 0, 2], [10, 0, 0, 9], 1, 53, 1, &[2; 1000]).fragments(4);
    let c = Datagram::udp_v4([10, 0, 0, 3], [10, 0, 0, 9], 1, 53, 1, &[3; 600]).fragments(3);
    let mut t = 0;
    let mut push = |ip: &[u8], kind: Kind, ms: i64| {
        events.push(Gen {
            ms,
            kind,
            v6: false,
            ip: ip.to_vec(),
        })
    };
    for f in &c[1..] {
        push(f, Kind::Later(2), t);
    }
    for f in &b[1..] {
        t += 1;
        push(f, Kind::Later(1), t);
    }
    for f in &a[1..] {
        t += 1;
        push(f, Kind::Later(0), t);
    }
    push(&a[0], Kind::First(0), 500);
    push(&c[0], Kind::First(2), 3000);
    let cap = dir.join("in.pcap");
    write_capture(&cap, &events, Link::Ethernet);
    let run = |extra: &[&str]| {
        let mut args = vec![
            "split",
            "-r",
            s(&cap),
            "--filters",
            s(&filters),
            "--fragments",
            "--count",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = sluice(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()
    };
    // Defaults: hold 5 s. A's 4 are released; C's first fragment comes in
    // time too; B's 3 are given up at the end.
    let j = run(&[]);
    let fr = &j["fragments"];
    assert_eq!(fr["later_fragments"], 9);
    assert_eq!(fr["held"], 9);
    assert_eq!(fr["released"], 6);
    assert_eq!(fr["dropped_end"], 3);
    assert_eq!(fr["dropped"], 3);
    assert_eq!(j["filters"][0]["accepted"], 2 + 6);
    // Hold 1 s: C's 2 time out when its first fragment comes at 3 s; then
    // B's 3 too; A was released at 0.5 s.
    let j = run(&["--hold-timeout", "1"]);
    let fr = &j["fragments"];
    assert_eq!(fr["released"], 4);
    assert_eq!(fr["dropped_timeout"], 5);
    assert_eq!(fr["dropped_end"], 0);
    assert_eq!(j["filters"][0]["accepted"], 2 + 4);
    // At most 2 held: every arrival beyond 2 pushes out the oldest, so of
    // the 9 later fragments only A's last 2 are still held when A's first
    // fragment comes.
    let j = run(&["--hold-packets", "2"]);
    let fr = &j["fragments"];
    assert_eq!(fr["dropped_full"], 7);
    assert_eq!(fr["released"], 2);
    assert_eq!(j["filters"][0]["accepted"], 2 + 2);
    // The options need --fragments; bad values are usage errors.
    let o = sluice(&[
        "split",
        "-r",
        s(&cap),
        "--filters",
        s(&filters),
        "--count",
        "--hold-packets",
        "3",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let o = sluice(&[
        "split",
        "-r",
        s(&cap),
        "--filters",
        s(&filters),
        "--count",
        "--fragments",
        "--hold-timeout",
        "-1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
