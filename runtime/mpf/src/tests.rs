use super::*;
use proptest::prelude::*;
use sluice_bpf::mpf::MpfProgram;

const DST: u32 = 0x0a00_0002;

/// Figure 3 of the seed: dst address in the common part, the session's
/// (src, sport, dport) as keys.
fn figure3(dst: u32, src: u32, sport: u16, dport: u16) -> MpfProgram {
    MpfProgram::parse(&format!(
        "\
(000) ldh      [12]
(001) jeq      #0x800           jt 2\tjf 20
(002) ld       [30]
(003) jeq      #{dst:#x}        jt 4\tjf 20
(004) ldb      [23]
(005) jeq      #0x6             jt 6\tjf 20
(006) ldh      [20]
(007) and      #0xbfff
(008) jeq      #0x0             jt 9\tjf 20
(009) ld       [26]
(010) st       M[0]
(011) ldxb     4*([14]&0xf)
(012) ldh      [x + 14]
(013) st       M[1]
(014) ldh      [x + 16]
(015) st       M[2]
(016) ret_match_imm #3, #262144
(017) key      #{src:#x}
(018) key      #{sport:#x}
(019) key      #{dport:#x}
(020) ret      #0
"
    ))
    .unwrap()
}

/// Appendix B made real: whole packets by ret_match_imm, first fragments
/// by jmp_match_imm + register_data (src, IP id), later fragments by
/// ret_match_data, postponed when nothing is registered yet.
fn appendix_b(dst: u32, src: u32, sport: u16, dport: u16, reg_ms: u32, wait_ms: u32) -> MpfProgram {
    MpfProgram::parse(&format!(
        "\
(000) ldh      [12]
(001) jeq      #0x800           jt 2\tjf 35
(002) ld       [30]
(003) jeq      #{dst:#x}        jt 4\tjf 35
(004) ldb      [23]
(005) jeq      #0x6             jt 6\tjf 35
(006) ldh      [20]
(007) jset     #0x1fff          jt 29\tjf 8
(008) ld       [26]
(009) st       M[0]
(010) ldxb     4*([14]&0xf)
(011) ldh      [x + 14]
(012) st       M[1]
(013) ldh      [x + 16]
(014) st       M[2]
(015) ldh      [20]
(016) jset     #0x2000          jt 21\tjf 17
(017) ret_match_imm #3, #262144
(018) key      #{src:#x}
(019) key      #{sport:#x}
(020) key      #{dport:#x}
(021) jmp_match_imm #3          jt 25\tjf 35
(022) key      #{src:#x}
(023) key      #{sport:#x}
(024) key      #{dport:#x}
(025) ldh      [18]
(026) st       M[1]
(027) register_data #2, #{reg_ms}
(028) ret      #262144
(029) ld       [26]
(030) st       M[0]
(031) ldh      [18]
(032) st       M[1]
(033) ret_match_data #2, #262144
(034) postpone #{wait_ms}
(035) ret      #0
"
    ))
    .unwrap()
}

/// An Ethernet/IPv4/TCP packet (20-byte IP header) or fragment.
fn packet(src: u32, dst: u32, id: u16, mf: bool, offset: u16, sport: u16, dport: u16) -> Vec<u8> {
    let mut p = vec![0u8; 66];
    p[12] = 0x08;
    p[14] = 0x45;
    p[18..20].copy_from_slice(&id.to_be_bytes());
    let flags = (offset & 0x1fff) | if mf { 0x2000 } else { 0 };
    p[20..22].copy_from_slice(&flags.to_be_bytes());
    p[22] = 64;
    p[23] = 6;
    p[26..30].copy_from_slice(&src.to_be_bytes());
    p[30..34].copy_from_slice(&dst.to_be_bytes());
    if offset == 0 {
        p[34..36].copy_from_slice(&sport.to_be_bytes());
        p[36..38].copy_from_slice(&dport.to_be_bytes());
    } else {
        // Payload bytes where ports would be: must not matter.
        p[34..38].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    }
    p
}

fn sorted(out: &[Delivery]) -> Vec<(u32, u64, u32, bool)> {
    let mut v: Vec<_> = out
        .iter()
        .map(|d| (d.filter.0, d.seq, d.snaplen, d.is_current()))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn figure3_sessions_collapse_into_one_group() {
    let mut set = MpfSet::default();
    let mut ids = Vec::new();
    for i in 0..100u32 {
        ids.push(set.insert(&figure3(DST, 0x0a01_0000 + i, 1000 + i as u16, 80)));
    }
    // One of another destination: a second group.
    let other = set.insert(&figure3(DST + 1, 0x0a01_0000, 1000, 80));
    let s = set.stats();
    assert_eq!((s.filters, s.groups, s.collapsed_filters), (101, 2, 100));
    let mut out = Vec::new();
    set.process(
        &packet(0x0a01_0007, DST, 1, false, 0, 1007, 80),
        66,
        0,
        &mut out,
    );
    assert_eq!(sorted(&out), vec![(ids[7].0, 0, 262144, true)]);
    set.process(
        &packet(0x0a01_0000, DST + 1, 1, false, 0, 1000, 80),
        66,
        0,
        &mut out,
    );
    assert_eq!(sorted(&out), vec![(other.0, 1, 262144, true)]);
    // Fragments and wrong ports: nobody.
    for p in [
        packet(0x0a01_0007, DST, 1, true, 0, 1007, 80),
        packet(0x0a01_0007, DST, 1, false, 0, 1007, 81),
        packet(0x0a01_0007, DST, 1, false, 0, 1008, 80),
    ] {
        set.process(&p, 66, 0, &mut out);
        assert!(out.is_empty());
    }
    // Removing members keeps the group until the last one goes.
    assert!(set.remove(ids[7]));
    set.process(
        &packet(0x0a01_0007, DST, 1, false, 0, 1007, 80),
        66,
        0,
        &mut out,
    );
    assert!(out.is_empty());
    assert!(set.remove(other));
    assert_eq!(set.stats().groups, 1);
}

#[test]
fn identical_keys_deliver_to_both() {
    let mut set = MpfSet::default();
    let a = set.insert(&figure3(DST, 1, 2, 3));
    let b = set.insert(&figure3(DST, 1, 2, 3));
    let mut out = Vec::new();
    set.process(&packet(1, DST, 0, false, 0, 2, 3), 66, 0, &mut out);
    assert_eq!(
        sorted(&out),
        vec![(a.0, 0, 262144, true), (b.0, 0, 262144, true)]
    );
    let c = set.insert(&figure3(DST, 1, 2, 3));
    assert!(set.remove(a));
    set.process(&packet(1, DST, 0, false, 0, 2, 3), 66, 0, &mut out);
    assert_eq!(
        sorted(&out),
        vec![(b.0, 1, 262144, true), (c.0, 1, 262144, true)]
    );
    assert!(set.remove(c));
    set.process(&packet(1, DST, 0, false, 0, 2, 3), 66, 0, &mut out);
    assert_eq!(sorted(&out), vec![(b.0, 2, 262144, true)]);
    assert!(set.remove(b));
    assert_eq!(set.stats().groups, 0);
}

#[test]
fn fragments_postponed_then_delivered_late() {
    let mut set = MpfSet::default();
    let f = set.insert(&appendix_b(DST, 7, 1234, 80, 1000, 500));
    let g = set.insert(&appendix_b(DST, 7, 1235, 80, 1000, 500));
    assert_eq!(set.stats().groups, 1);
    let mut out = Vec::new();
    let later = packet(7, DST, 42, false, 185, 0, 0);
    // Last fragment first: postponed for both filters.
    set.process(&later, 66, 1_000_000, &mut out);
    assert!(out.is_empty());
    assert_eq!(set.stats().pending, 1);
    // The first fragment: delivered to f now, and the waiting fragment
    // with it.
    set.process(
        &packet(7, DST, 42, true, 0, 1234, 80),
        66,
        2_000_000,
        &mut out,
    );
    let mut got = sorted(&out);
    got.sort();
    assert_eq!(got, vec![(f.0, 0, 262144, false), (f.0, 1, 262144, true)]);
    let late = out.iter().find(|d| !d.is_current()).unwrap();
    assert_eq!(&late.late.as_ref().unwrap().data[..], &later[..]);
    assert_eq!(late.late.as_ref().unwrap().ts_ns, 1_000_000);
    // Still waiting for g, until its timeout (500 ms after arrival).
    assert_eq!(set.stats().pending, 1);
    set.process(
        &packet(9, DST, 1, false, 0, 1, 1),
        66,
        501_000_000,
        &mut out,
    );
    assert!(out.is_empty());
    assert_eq!(set.stats().pending, 1);
    set.process(
        &packet(9, DST, 1, false, 0, 1, 1),
        66,
        501_000_001,
        &mut out,
    );
    assert_eq!(set.stats().pending, 0);
    assert_eq!(set.stats().pending_expired, 1);
    // More fragments of the datagram go to f only, while the
    // registration lives (1000 ms from the first fragment at 2 ms).
    set.process(
        &packet(7, DST, 42, true, 100, 0, 0),
        66,
        1_002_000_000,
        &mut out,
    );
    assert_eq!(sorted(&out), vec![(f.0, 4, 262144, true)]);
    assert_eq!(set.registrations(), 1);
    // ...and waits for g, which has registered nothing.
    assert_eq!(set.stats().pending, 1);
    set.process(
        &packet(7, DST, 42, true, 100, 0, 0),
        66,
        1_002_000_001,
        &mut out,
    );
    // Expired: this one waits for both.
    assert!(out.is_empty());
    assert_eq!(set.stats().data_expired, 1);
    assert_eq!(set.registrations(), 0);
    assert_eq!(set.stats().pending, 2);
    // g's first fragment lets both waiting fragments through to g.
    set.process(
        &packet(7, DST, 42, true, 0, 1235, 80),
        66,
        1_003_000_000,
        &mut out,
    );
    assert_eq!(
        sorted(&out),
        vec![
            (g.0, 4, 262144, false),
            (g.0, 5, 262144, false),
            (g.0, 6, 262144, true)
        ]
    );
    assert_eq!(set.stats().pending, 1);
}

#[test]
fn queue_limit_drops_and_counts() {
    let mut set = MpfSet::new(Config { max_pending: 2 });
    set.insert(&appendix_b(DST, 7, 1234, 80, 1000, 500));
    set.insert(&appendix_b(DST, 7, 1235, 80, 1000, 500));
    let mut out = Vec::new();
    for id in 0..5 {
        set.process(&packet(7, DST, id, false, 8, 0, 0), 66, 0, &mut out);
    }
    let s = set.stats();
    assert_eq!(s.pending, 2);
    assert_eq!(s.postponed, 2);
    // Three packets, two filters each.
    assert_eq!(s.pending_dropped_full, 6);
    // The per-filter reference counts per filter queue.
    let mut sep = Separate::new(Config { max_pending: 2 });
    sep.insert(&appendix_b(DST, 7, 1234, 80, 1000, 500));
    sep.insert(&appendix_b(DST, 7, 1235, 80, 1000, 500));
    for id in 0..5 {
        sep.process(&packet(7, DST, id, false, 8, 0, 0), 66, 0, &mut out);
    }
    assert_eq!(sep.stats().pending_dropped_full, 6);
    assert_eq!(sep.stats().pending, 4);
}

#[test]
fn postponed_packets_wait_only_for_filters_older_than_them() {
    let mut set = MpfSet::default();
    set.insert(&appendix_b(DST, 7, 1, 80, 1000, 500));
    let mut out = Vec::new();
    set.process(&packet(7, DST, 3, false, 8, 0, 0), 66, 0, &mut out);
    // A filter installed after the fragment arrived registers the
    // datagram: the old fragment is not its.
    let late = set.insert(&appendix_b(DST, 7, 2, 80, 1000, 500));
    set.process(&packet(7, DST, 3, true, 0, 2, 80), 66, 0, &mut out);
    assert_eq!(sorted(&out), vec![(late.0, 1, 262144, true)]);
    assert_eq!(set.stats().pending, 1);
}

/// A program whose jmp_match_imm's false branch accepts too: the filters
/// that did not match go on and accept with another value.
fn forked(key: u32) -> MpfProgram {
    MpfProgram::parse(&format!(
        "\
(000) ldb      [0]
(001) st       M[0]
(002) jmp_match_imm #1          jt 4\tjf 6
(003) key      #{key}
(004) register_data #1, #10
(005) ret      #2
(006) ldb      [1]
(007) st       M[0]
(008) ret_match_data #1, #3
(009) jeq      #0x9             jt 10\tjf 11
(010) postpone #5
(011) ret      #1
"
    ))
    .unwrap()
}

#[derive(Clone, Debug)]
enum Event {
    /// A packet from session `s` (or none), of a kind, after `gap` ms.
    Packet {
        session: usize,
        kind: u8,
        id: u16,
        gap: u32,
    },
    /// Raw two-byte packet for the forked programs.
    Raw {
        a: u8,
        b: u8,
        gap: u32,
    },
    Remove(usize),
    Insert(usize),
}

fn event(sessions: usize) -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => (0..sessions + 1, 0u8..5, 0u16..4, 0u32..40).prop_map(|(session, kind, id, gap)| {
            Event::Packet { session, kind, id, gap }
        }),
        2 => (0u8..4, 0u8..12, 0u32..8).prop_map(|(a, b, gap)| Event::Raw { a, b, gap }),
        1 => (0..64usize).prop_map(Event::Remove),
        1 => (0..sessions).prop_map(Event::Insert),
    ]
}

/// What a comparison run exercised.
#[derive(Debug, Default)]
struct Coverage {
    deliveries: usize,
    late: usize,
    expired: u64,
    registered: u64,
}

/// Runs the same filters and events through [`MpfSet`] and [`Separate`]
/// and checks, packet by packet, that every filter gets the same.
fn compare(sessions: &[(u32, u16, bool)], events: &[Event]) -> Result<Coverage, TestCaseError> {
    let sessions: Vec<(u32, u16, u16)> = sessions
        .iter()
        .map(|&(src, sport, web)| (0x0a00_0100 + src, sport, if web { 80 } else { 443 }))
        .collect();
    let config = Config {
        max_pending: 100_000,
    };
    let mut set = MpfSet::new(config);
    let mut sep = Separate::new(config);
    let install = |i: usize, set: &mut MpfSet, sep: &mut Separate| {
        let (src, sport, dport) = sessions[i % sessions.len()];
        let prog = match i % 3 {
            0 | 1 => appendix_b(DST, src, sport, dport, 60, 25),
            _ => figure3(DST, src, sport, dport),
        };
        assert_eq!(set.insert(&prog), sep.insert(&prog));
    };
    for i in 0..sessions.len() * 2 {
        install(i, &mut set, &mut sep);
    }
    for k in 0..3u32 {
        let p = forked(k);
        prop_assert_eq!(set.insert(&p), sep.insert(&p));
    }
    let mut cov = Coverage::default();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut ts = 0u64;
    for e in events {
        match *e {
            Event::Packet {
                session,
                kind,
                id,
                gap,
            } => {
                ts += ms(gap);
                let (src, sport, dport) =
                    sessions
                        .get(session)
                        .copied()
                        .unwrap_or((0x0a00_0999, 9, 9));
                let p = match kind {
                    0 => packet(src, DST, id, false, 0, sport, dport),
                    1 => packet(src, DST, id, true, 0, sport, dport),
                    2 => packet(src, DST, id, true, 100, 0, 0),
                    3 => packet(src, DST, id, false, 200, 0, 0),
                    _ => packet(src, DST + 1, id, false, 0, sport, dport),
                };
                set.process(&p, 66, ts, &mut a);
                sep.process(&p, 66, ts, &mut b);
            }
            Event::Raw { a: x, b: y, gap } => {
                ts += ms(gap);
                set.process(&[x, y], 2, ts, &mut a);
                sep.process(&[x, y], 2, ts, &mut b);
            }
            Event::Remove(i) => {
                let id = FilterId(i as u32);
                prop_assert_eq!(set.remove(id), sep.remove(id));
                a.clear();
                b.clear();
            }
            Event::Insert(i) => {
                install(i, &mut set, &mut sep);
                a.clear();
                b.clear();
            }
        }
        prop_assert_eq!(sorted(&a), sorted(&b));
        for d in &a {
            if let Some(p) = &d.late {
                prop_assert_eq!(p.seq, d.seq);
                cov.late += 1;
            }
        }
        cov.deliveries += a.len();
        let (s, t) = (set.stats(), sep.stats());
        prop_assert_eq!(s.pending_expired, t.pending_expired);
        prop_assert_eq!(s.registered, t.registered);
        cov.expired = s.pending_expired;
        cov.registered = s.registered;
    }
    Ok(cov)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// The collapsed set gives every filter what it gets running alone
    /// with its own state, packet by packet, including late deliveries of
    /// postponed packets, expiry, removals and filters added midway.
    #[test]
    fn collapsed_equals_separate(
        sessions in prop::collection::vec((0u32..3, 1u16..4, prop::bool::ANY), 1..6),
        events in prop::collection::vec(event(6), 1..120),
    ) {
        compare(&sessions, &events)?;
    }
}

/// One long deterministic run: the comparison above does reach late
/// deliveries, expiry and registrations.
#[test]
fn long_comparison_exercises_everything() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config as PConfig, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        PConfig::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let events = prop::collection::vec(event(4), 3000)
        .new_tree(&mut runner)
        .unwrap()
        .current();
    let sessions = [(0, 1, true), (1, 2, false), (0, 3, true), (2, 1, true)];
    let cov = compare(&sessions, &events).unwrap();
    assert!(cov.late > 10, "{cov:?}");
    assert!(cov.expired > 10, "{cov:?}");
    assert!(cov.registered > 10, "{cov:?}");
    assert!(cov.deliveries > 500, "{cov:?}");
}
