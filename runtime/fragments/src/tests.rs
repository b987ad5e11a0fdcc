use super::fragmenter::{Datagram, Link};
use super::parse::{Key, Locator, Piece};
use super::*;
use proptest::prelude::*;
use sluice_wire::link::LinkType;

fn lt(l: Link) -> LinkType {
    LinkType::from_number(u32::from(l.linktype())).unwrap()
}

fn datagrams() -> Vec<Datagram> {
    let a = [10, 0, 0, 1];
    let b = [10, 0, 0, 2];
    let a6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    let b6 = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
    vec![
        Datagram::udp_v4(a, b, 1000, 53, 0x1234, &[1; 3000]),
        Datagram::tcp_v4(a, b, 1000, 80, 0xfffe, &[2; 1500]),
        Datagram::udp_v6(a6, b6, 1000, 53, 0xdead_beef, &[3; 3000]),
        Datagram::tcp_v6(a6, b6, 1000, 80, 7, &[4; 2000]).with_hop_by_hop(),
    ]
}

#[test]
fn parses_fragments_behind_every_link() {
    for link in Link::ALL {
        let loc = Locator::new(lt(link), false);
        for d in datagrams() {
            assert!(
                loc.fragment(&link.wrap(&d.whole())).is_none(),
                "{link:?} whole"
            );
            for n in 2..=7 {
                let frags = d.fragments(n);
                assert_eq!(frags.len(), n);
                let mut expect_offset = 0;
                for (i, f) in frags.iter().enumerate() {
                    let p = link.wrap(f);
                    let got = loc
                        .fragment(&p)
                        .unwrap_or_else(|| panic!("{link:?} {i}/{n}"));
                    let key = if d.v6 {
                        Key::v6(d.src, d.dst, d.proto, d.id)
                    } else {
                        Key::v4(
                            d.src[..4].try_into().unwrap(),
                            d.dst[..4].try_into().unwrap(),
                            d.proto,
                            d.id as u16,
                        )
                    };
                    assert_eq!(got.key, key.on_vlans(link.vlan_ids()), "{link:?}");
                    assert_eq!(got.piece == Piece::First, i == 0);
                    assert_eq!(got.more, i + 1 < n);
                    assert_eq!(got.offset, expect_offset);
                    let header = if d.v6 {
                        40 + 8 + if d.hop_by_hop { 8 } else { 0 }
                    } else {
                        20
                    };
                    expect_offset += (f.len() - header) as u32;
                    // Cut short anywhere inside the headers: not a fragment, no panic.
                    for cut in 0..p.len().min(120) {
                        let _ = loc.fragment(&p[..cut]);
                    }
                }
                assert_eq!(expect_offset as usize, d.payload.len());
            }
        }
    }
}

#[test]
fn ipv4_checksums_are_right() {
    use super::fragmenter::checksum;
    for f in datagrams()[0].fragments(5) {
        assert_eq!(checksum(&[&f[..20]]), 0);
    }
    // The transport checksum over the pseudo-header and the whole payload.
    for d in datagrams() {
        let len = d.payload.len() as u32;
        let sum = if d.v6 {
            let mut ph = vec![];
            ph.extend_from_slice(&d.src);
            ph.extend_from_slice(&d.dst);
            ph.extend_from_slice(&len.to_be_bytes());
            ph.extend_from_slice(&[0, 0, 0, d.proto]);
            checksum(&[&ph, &d.payload])
        } else {
            let mut ph = vec![];
            ph.extend_from_slice(&d.src[..4]);
            ph.extend_from_slice(&d.dst[..4]);
            ph.extend_from_slice(&[0, d.proto]);
            ph.extend_from_slice(&(len as u16).to_be_bytes());
            checksum(&[&ph, &d.payload])
        };
        assert_eq!(sum, 0, "{d:?}");
    }
}

#[test]
fn not_fragments() {
    let eth = Locator::new(LinkType::EN10MB, false);
    // ARP.
    let mut arp = vec![0u8; 42];
    arp[12] = 8;
    arp[13] = 6;
    assert!(eth.fragment(&arp).is_none());
    // An IPv6 atomic fragment (offset 0, M clear) is a whole datagram.
    let d = &datagrams()[2];
    let mut f = d.fragments(2)[0].clone();
    f[43] &= !1;
    assert!(eth.fragment(&Link::Ethernet.wrap(&f)).is_none());
    // DF set, not fragmented.
    let mut w = datagrams()[0].whole();
    w[6] = 0x40;
    assert!(eth.fragment(&Link::Ethernet.wrap(&w)).is_none());
    // Ethernet type says IPv4 but the version nibble is 6.
    let mut bad = Link::Ethernet.wrap(&datagrams()[0].fragments(2)[1]);
    bad[14] = 0x65;
    assert!(eth.fragment(&bad).is_none());
    // NULL in a big-endian capture: the family is big-endian.
    let be = Locator::new(LinkType::NULL, true);
    let loop_pkt = Link::Loop.wrap(&datagrams()[0].fragments(2)[1]);
    assert!(be.fragment(&loop_pkt).is_some());
    assert!(Locator::new(LinkType::NULL, false)
        .fragment(&loop_pkt)
        .is_none());
}

#[test]
fn other_links_from_the_table() {
    let f = &datagrams()[0].fragments(3)[1];
    let f6 = &datagrams()[2].fragments(3)[1];
    let with = |head: &[u8], ip: &[u8]| [head, ip].concat();
    // PPP (address, control, protocol), Cisco HDLC, FDDI with LLC/SNAP,
    // Solaris ipnet (family byte at 1, 24-byte header), OpenBSD enc.
    let cases: Vec<(LinkType, Vec<u8>, Vec<u8>)> = vec![
        (
            LinkType::PPP,
            vec![0xff, 3, 0, 0x21],
            vec![0xff, 3, 0, 0x57],
        ),
        (
            LinkType::C_HDLC,
            vec![0x0f, 0, 8, 0],
            vec![0x0f, 0, 0x86, 0xdd],
        ),
        (
            LinkType::FDDI,
            [&[0x50][..], &[0; 12], &[0xaa, 0xaa, 3, 0, 0, 0, 8, 0]].concat(),
            [&[0x50][..], &[0; 12], &[0xaa, 0xaa, 3, 0, 0, 0, 0x86, 0xdd]].concat(),
        ),
        (
            LinkType::IPNET,
            [&[1, 2][..], &[0; 22]].concat(),
            [&[1, 26][..], &[0; 22]].concat(),
        ),
        (
            LinkType::ENC,
            [&2u32.to_le_bytes()[..], &[0; 8]].concat(),
            [&24u32.to_le_bytes()[..], &[0; 8]].concat(),
        ),
    ];
    for (lt, h4, h6) in cases {
        let loc = Locator::new(lt, false);
        let a = loc
            .fragment(&with(&h4, f))
            .unwrap_or_else(|| panic!("{lt}"));
        assert!(!a.key.v6 && a.piece == Piece::Later, "{lt}");
        let b = loc
            .fragment(&with(&h6, f6))
            .unwrap_or_else(|| panic!("{lt} v6"));
        assert!(b.key.v6, "{lt}");
        // Another protocol behind the same header: not IP.
        let mut other = with(&h4, f);
        other[h4.len() - 1] ^= 0x40;
        if lt != LinkType::IPNET && lt != LinkType::ENC {
            assert!(loc.fragment(&other).is_none(), "{lt}");
        }
    }
}

/// A dispatcher and everything it delivered: (input index, filters).
struct Run {
    d: Dispatcher,
    out: Output,
    n: u64,
    log: Vec<(u64, Vec<u32>)>,
}

impl Run {
    fn new(mode: Mode, limits: Limits) -> Run {
        Run {
            d: Dispatcher::new(Config {
                mode,
                limits,
                big_endian: false,
            }),
            out: Output::default(),
            n: 0,
            log: Vec::new(),
        }
    }

    fn record(&mut self, current: u64) {
        for del in self.out.iter() {
            assert!(!del.filters.is_empty());
            assert!(del.filters.windows(2).all(|w| w[0] < w[1]));
            let i = match del.source {
                Source::Current => current,
                Source::Held(h) => h.index,
            };
            self.log.push((i, del.filters.to_vec()));
        }
    }

    fn feed(&mut self, ms: i64, link: Link, ip: &[u8], ids: &[u32]) -> u64 {
        let data = link.wrap(ip);
        let p = Packet::new(
            ms / 1000,
            (ms % 1000) as u32 * 1_000_000,
            link.linktype(),
            &data,
        );
        self.d.dispatch(&p, ids, &mut self.out);
        let i = self.n;
        self.n += 1;
        self.record(i);
        assert!(self.d.counters().balanced(self.d.holding()));
        i
    }

    fn flush(&mut self) {
        self.d.flush(&mut self.out);
        self.record(u64::MAX);
        assert!(self.d.counters().balanced(self.d.holding()));
        assert_eq!(self.d.holding(), 0);
    }

    fn got(&self, index: u64) -> Vec<Vec<u32>> {
        self.log
            .iter()
            .filter(|(i, _)| *i == index)
            .map(|(_, f)| f.clone())
            .collect()
    }
}

#[test]
fn in_order_early_late_and_lost() {
    for mode in [Mode::All, Mode::First] {
        for d in datagrams() {
            for n in 2..=7 {
                let frags = d.fragments(n);
                // In order.
                let mut r = Run::new(mode, Limits::default());
                let idx: Vec<u64> = frags
                    .iter()
                    .enumerate()
                    .map(|(i, f)| r.feed(0, Link::Ethernet, f, if i == 0 { &[4] } else { &[] }))
                    .collect();
                for i in &idx {
                    assert_eq!(r.got(*i), vec![vec![4]]);
                }
                assert_eq!(r.d.counters().held, 0);
                // First fragment last.
                let mut r = Run::new(mode, Limits::default());
                let mut idx = vec![];
                for f in frags.iter().skip(1).rev() {
                    idx.push(r.feed(0, Link::Vlan(3), f, &[]));
                    assert!(r.log.is_empty());
                }
                let first = r.feed(1, Link::Vlan(3), &frags[0], &[4]);
                // The first fragment, then the held ones in arrival order.
                let order: Vec<u64> = r.log.iter().map(|l| l.0).collect();
                let mut want = vec![first];
                want.extend(&idx);
                assert_eq!(order, want);
                assert_eq!(r.d.counters().released, (n - 1) as u64);
                // First fragment lost: held, then dropped at the timeout.
                let mut r = Run::new(mode, Limits::default());
                for f in frags.iter().skip(1) {
                    r.feed(0, Link::Sll, f, &[]);
                }
                assert_eq!(r.d.holding(), n - 1);
                r.feed(5_000, Link::Sll, &datagrams()[0].whole(), &[]);
                assert_eq!(r.d.holding(), n - 1, "held up to the timeout itself");
                r.feed(5_001, Link::Sll, &datagrams()[0].whole(), &[]);
                assert_eq!(r.d.holding(), 0);
                assert_eq!(r.d.counters().dropped_timeout, (n - 1) as u64);
                assert!(r.log.is_empty());
            }
        }
    }
}

#[test]
fn first_fragment_in_the_middle_and_nobody_wants_it() {
    let d = &datagrams()[1];
    let f = d.fragments(5);
    let mut r = Run::new(Mode::All, Limits::default());
    let a = r.feed(0, Link::Raw, &f[3], &[]);
    let b = r.feed(0, Link::Raw, &f[1], &[]);
    r.feed(0, Link::Raw, &f[0], &[]);
    let c = r.feed(0, Link::Raw, &f[2], &[]);
    let e = r.feed(0, Link::Raw, &f[4], &[]);
    assert!(r.log.is_empty());
    for i in [a, b, c, e] {
        assert!(r.got(i).is_empty());
    }
    let k = r.d.counters();
    assert_eq!(
        (k.released_unclaimed, k.later_on_arrival, k.held),
        (2, 2, 2)
    );
}

#[test]
fn all_mode_unions_own_and_datagram_filters() {
    let d = &datagrams()[0];
    let f = d.fragments(3);
    let mut r = Run::new(Mode::All, Limits::default());
    // A later fragment accepted by filter 1 itself (say `host 10.0.0.1`)
    // before the first; the first goes to 1 and 2.
    let a = r.feed(0, Link::Ethernet, &f[2], &[1]);
    assert_eq!(r.got(a), vec![vec![1]]);
    r.feed(0, Link::Ethernet, &f[0], &[1, 2]);
    assert_eq!(r.got(a), vec![vec![1], vec![2]]);
    let b = r.feed(0, Link::Ethernet, &f[1], &[1, 5]);
    assert_eq!(r.got(b), vec![vec![1, 2, 5]]);
}

#[test]
fn first_mode_prefers_the_datagram_winner_and_falls_back() {
    let d = &datagrams()[0];
    let f = d.fragments(3);
    let mut r = Run::new(Mode::First, Limits::default());
    // Own winner 9 (a catch-all); the datagram's winner is 2.
    let a = r.feed(0, Link::Ethernet, &f[1], &[9]);
    assert!(r.got(a).is_empty());
    r.feed(0, Link::Ethernet, &f[0], &[2]);
    assert_eq!(r.got(a), vec![vec![2]]);
    let b = r.feed(0, Link::Ethernet, &f[2], &[9]);
    assert_eq!(r.got(b), vec![vec![2]]);
    // Another datagram whose first fragment never comes: its own winner at the end.
    let g = datagrams()[1].fragments(2);
    let c = r.feed(1, Link::Ethernet, &g[1], &[9]);
    r.flush();
    assert_eq!(r.got(c), vec![vec![9]]);
    let k = r.d.counters();
    assert_eq!((k.dropped_end, k.fallback), (1, 1));
}

#[test]
fn queue_limits_drop_the_oldest() {
    let limits = Limits {
        hold_packets: 3,
        ..Limits::default()
    };
    let d = &datagrams()[0];
    let f = d.fragments(7);
    let mut r = Run::new(Mode::All, limits);
    let idx: Vec<u64> = f[1..]
        .iter()
        .map(|x| r.feed(0, Link::Ethernet, x, &[]))
        .collect();
    assert_eq!(r.d.holding(), 3);
    assert_eq!(r.d.counters().dropped_full, 3);
    r.feed(0, Link::Ethernet, &f[0], &[8]);
    for (k, i) in idx.iter().enumerate() {
        let want: Vec<Vec<u32>> = if k >= 3 { vec![vec![8]] } else { vec![] };
        assert_eq!(r.got(*i), want);
    }
    // A byte limit smaller than one fragment: dropped on arrival.
    let mut r = Run::new(
        Mode::All,
        Limits {
            hold_bytes: 100,
            ..Limits::default()
        },
    );
    r.feed(0, Link::Ethernet, &f[1], &[]);
    assert_eq!((r.d.holding(), r.d.counters().dropped_full), (0, 1));
    // Bytes: two fragments fit, the third pushes out the first.
    let len = Link::Ethernet.wrap(&f[1]).len();
    let mut r = Run::new(
        Mode::All,
        Limits {
            hold_bytes: 2 * len + 10,
            ..Limits::default()
        },
    );
    for x in &f[1..4] {
        r.feed(0, Link::Ethernet, x, &[]);
    }
    assert_eq!((r.d.holding(), r.d.counters().dropped_full), (2, 1));
    assert!(r.d.held_bytes() <= 2 * len + 10);
}

#[test]
fn datagrams_expire_and_are_evicted() {
    let d = &datagrams()[2];
    let f = d.fragments(3);
    let mut r = Run::new(Mode::All, Limits::default());
    r.feed(0, Link::Ethernet, &f[0], &[1]);
    let a = r.feed(30_000, Link::Ethernet, &f[1], &[]);
    assert_eq!(r.got(a), vec![vec![1]]);
    // After the datagram timeout the late fragment is held, then dropped.
    let b = r.feed(30_001, Link::Ethernet, &f[2], &[]);
    assert!(r.got(b).is_empty());
    assert_eq!(r.d.counters().datagrams_expired, 1);
    r.flush();
    assert_eq!(r.d.counters().dropped_end, 1);

    // At most two datagrams: the third first fragment evicts the oldest.
    let mut r = Run::new(
        Mode::All,
        Limits {
            max_datagrams: 2,
            ..Limits::default()
        },
    );
    let ids = [0x10u16, 0x11, 0x12];
    let dgs: Vec<Datagram> = ids
        .iter()
        .map(|&i| Datagram::udp_v4([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, i, &[0; 100]))
        .collect();
    for (k, g) in dgs.iter().enumerate() {
        r.feed(0, Link::Raw, &g.fragments(2)[0], &[k as u32]);
    }
    assert_eq!(r.d.datagrams(), 2);
    assert_eq!(r.d.counters().datagrams_evicted, 1);
    let x = r.feed(0, Link::Raw, &dgs[0].fragments(2)[1], &[]);
    let y = r.feed(0, Link::Raw, &dgs[2].fragments(2)[1], &[]);
    assert!(r.got(x).is_empty());
    assert_eq!(r.got(y), vec![vec![2]]);
}

#[test]
fn same_identification_different_sources_do_not_mix() {
    let a = Datagram::udp_v4([1, 0, 0, 1], [9, 9, 9, 9], 1, 53, 77, &[0; 500]);
    let b = Datagram::udp_v4([1, 0, 0, 2], [9, 9, 9, 9], 1, 54, 77, &[0; 500]);
    let c = Datagram::tcp_v4([1, 0, 0, 1], [9, 9, 9, 9], 1, 80, 77, &[0; 500]);
    let (fa, fb, fc) = (a.fragments(3), b.fragments(3), c.fragments(3));
    let mut r = Run::new(Mode::All, Limits::default());
    let la = r.feed(0, Link::Ethernet, &fa[2], &[]);
    let lb = r.feed(0, Link::Ethernet, &fb[2], &[]);
    let lc = r.feed(0, Link::Ethernet, &fc[2], &[]);
    r.feed(0, Link::Ethernet, &fb[0], &[2]);
    r.feed(0, Link::Ethernet, &fa[0], &[1]);
    r.feed(0, Link::Ethernet, &fc[0], &[3]);
    assert_eq!(r.got(la), vec![vec![1]]);
    assert_eq!(r.got(lb), vec![vec![2]]);
    assert_eq!(r.got(lc), vec![vec![3]]);
    for (i, frags) in [(1, &fa), (2, &fb), (3, &fc)] {
        let m = r.feed(0, Link::Ethernet, &frags[1], &[]);
        assert_eq!(r.got(m), vec![vec![i]]);
    }
}

#[test]
fn duplicates_and_clock_going_backwards() {
    let d = &datagrams()[0];
    let f = d.fragments(3);
    let mut r = Run::new(Mode::All, Limits::default());
    r.feed(10_000, Link::Ethernet, &f[0], &[1]);
    let a = r.feed(9_000, Link::Ethernet, &f[2], &[]);
    let b = r.feed(9_000, Link::Ethernet, &f[2], &[]);
    // A duplicate first fragment taken by another filter replaces the entry.
    r.feed(10_000, Link::Ethernet, &f[0], &[2]);
    let c = r.feed(10_000, Link::Ethernet, &f[1], &[]);
    assert_eq!(r.got(a), vec![vec![1]]);
    assert_eq!(r.got(b), vec![vec![1]]);
    assert_eq!(r.got(c), vec![vec![2]]);
    // An old timestamp does not move the clock back: the state still expires.
    let e = r.feed(40_001, Link::Ethernet, &f[1], &[]);
    assert!(r.got(e).is_empty());
}

#[test]
fn no_allocation_of_held_buffers_once_warm() {
    // Held packet buffers are recycled: after a warm-up, holding and
    // releasing the same shapes reuses the same buffers.
    let mut r = Run::new(Mode::All, Limits::default());
    for round in 0..3 {
        let mut d = datagrams()[0].clone();
        d.id += round as u32;
        let f = d.fragments(4);
        for x in f[1..].iter() {
            r.feed(round, Link::Ethernet, x, &[]);
        }
        r.feed(round, Link::Ethernet, &f[0], &[1]);
    }
    assert!(r.d.spare_packets.len() + r.out.held.len() >= 3);
    assert_eq!(r.d.counters().released, 9);
}

fn any_link() -> impl Strategy<Value = Link> {
    proptest::sample::select(Link::ALL.to_vec())
}

/// 200 random cases per property; `SLUICE_SOAK=1` runs 20,000.
fn cases() -> u32 {
    if std::env::var_os("SLUICE_SOAK").is_some() {
        20_000
    } else {
        200
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Random bytes behind any supported link type never panic.
    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..200), n in 0u32..300) {
        if let Some(lt) = LinkType::from_number(n) {
            for be in [false, true] {
                let _ = Locator::new(lt, be).fragment(&data);
            }
        }
    }

    /// Random sequences of fragments (shuffled, duplicated, lost, some
    /// random junk), random filters and times, random limits: no panic,
    /// counters balance after every packet, every delivery is well formed,
    /// no packet goes twice to one filter, and after a flush nothing is held.
    #[test]
    fn random_sequences_balance(
        seed_frags in proptest::collection::vec((0usize..6, 0usize..7, any::<u8>(), 0u32..4, 0i64..3000, any::<bool>()), 1..80),
        junk in proptest::collection::vec(any::<u8>(), 0..64),
        link in any_link(),
        first_mode in any::<bool>(),
        hold_packets in 0usize..8,
        hold_ms in 0u64..2000,
        dgram_ms in 0u64..4000,
        max_datagrams in 0usize..4,
    ) {
        let pool: Vec<Datagram> = (0..6u16)
            .map(|i| {
                let base = &datagrams()[usize::from(i) % 4];
                let mut d = base.clone();
                d.id = base.id.wrapping_add(u32::from(i / 4));
                d
            })
            .collect();
        let limits = Limits {
            hold_packets,
            hold_bytes: 20_000,
            hold_timeout: Duration::from_millis(hold_ms),
            datagram_timeout: Duration::from_millis(dgram_ms),
            max_datagrams,
        };
        let mode = if first_mode { Mode::First } else { Mode::All };
        let mut r = Run::new(mode, limits);
        let mut t = 0i64;
        for (dg, piece, cut, filt, dt, is_junk) in seed_frags {
            t += dt;
            let frags = pool[dg].fragments(2 + piece % 6);
            let f = &frags[piece % frags.len()];
            let ids: Vec<u32> = (0..4).filter(|b| filt >> b & 1 == 1).collect();
            let ids = if cut % 7 == 0 { vec![] } else { ids };
            if is_junk && cut % 3 == 0 {
                r.feed(t, link, &junk, &ids);
            } else if cut % 11 == 0 {
                let w = link.wrap(f);
                let at = usize::from(cut) % w.len();
                let p = Packet::new(t / 1000, 0, link.linktype(), &w[..at]);
                r.d.dispatch(&p, &ids, &mut r.out);
                let i = r.n;
                r.n += 1;
                r.record(i);
            } else {
                r.feed(t, link, f, &ids);
            }
            prop_assert!(r.d.counters().balanced(r.d.holding()));
            prop_assert!(r.d.holding() <= hold_packets);
            prop_assert!(r.d.held_bytes() <= 20_000);
            prop_assert!(r.d.datagrams() <= max_datagrams);
        }
        r.flush();
        let mut seen = std::collections::HashSet::new();
        for (i, fs) in &r.log {
            for f in fs {
                prop_assert!(seen.insert((*i, *f)), "packet {} twice to {}", i, f);
            }
        }
        if first_mode {
            let mut per = std::collections::HashMap::new();
            for (i, fs) in &r.log {
                *per.entry(*i).or_insert(0) += fs.len();
            }
            prop_assert!(per.values().all(|&n| n == 1));
        }
    }
}

/// The same IPv4 and IPv6 datagrams (addresses, protocol, identification)
/// on two VLANs, and under two stacks of tags that differ only in the inner
/// one, are different datagrams: later fragments go to the filters of the
/// first fragment of their own VLAN, never to the other's.
#[test]
fn the_same_datagram_on_two_vlans_does_not_mix() {
    for d in datagrams() {
        let f = d.fragments(3);
        for (a, b) in [
            (Link::Vlan(3), Link::Vlan(4)),
            (Link::QinQ(10, 3), Link::QinQ(10, 4)),
            (Link::Ethernet, Link::Vlan(3)),
        ] {
            let mut r = Run::new(Mode::All, Limits::default());
            r.feed(0, a, &f[0], &[1]);
            // b's later fragments: no first fragment of theirs yet, so held.
            let held: Vec<u64> = f[1..].iter().map(|x| r.feed(1, b, x, &[])).collect();
            assert_eq!(r.d.holding(), 2, "{a:?} / {b:?}");
            // a's later fragments go to a's filter at once.
            let later = r.feed(2, a, &f[1], &[]);
            assert_eq!(r.got(later), vec![vec![1]]);
            // b's first fragment releases b's held fragments to b's filter.
            r.feed(3, b, &f[0], &[2]);
            for i in held {
                assert_eq!(r.got(i), vec![vec![2]], "{a:?} / {b:?}");
            }
            assert_eq!(r.d.holding(), 0);
        }
    }
}
