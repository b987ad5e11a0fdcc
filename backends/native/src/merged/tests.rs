//! The native merged classifier against the Rust one and against every
//! filter run alone, on random filter sets and random, truncated packets.

use super::fixtures::{session, tcp_packet};
use super::*;
use proptest::prelude::*;
use sluice_ir::arbitrary::{self, ld};
use sluice_ir::{CmpOp, Filter, Pred, Size, Val};

/// Every answer of `n` equals `m`'s and the filters' own, on every packet
/// cut to every length (or a sample of lengths for long packets).
fn check(n: &NativeMerged, m: &Merged, filters: &[(u32, Filter)], pkts: &[Vec<u8>]) {
    let mut s = Scratch::default();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let mut all: Vec<(&[u8], u32)> = Vec::new();
    for p in pkts {
        for len in 0..=p.len() {
            let cut = &p[..len];
            let wire = p.len() as u32;
            all.push((cut, wire));
            n.classify(cut, wire, &mut s, &mut a);
            m.classify(cut, wire, &mut s, &mut b);
            assert_eq!(a, b, "classify, packet {:02x?}", cut);
            let want: Vec<u32> = filters
                .iter()
                .filter(|(_, f)| f.run(cut, wire) != 0)
                .map(|(id, _)| *id)
                .collect();
            assert_eq!(a, want, "filters alone, packet {:02x?}", cut);
            assert_eq!(
                n.classify_first(cut, wire, &mut s),
                m.classify_first(cut, wire, &mut s),
                "classify_first, packet {:02x?}",
                cut
            );
        }
    }
    let mut x = vec![Vec::new(); all.len()];
    let mut y = vec![Vec::new(); all.len()];
    n.classify_batch(&all, &mut s, &mut x);
    m.classify_batch(&all, &mut s, &mut y);
    assert_eq!(x, y, "classify_batch");
    let mut firsts = vec![Some(u32::MAX); all.len()];
    n.classify_first_batch(&all, &mut s, &mut firsts);
    let want: Vec<Option<u32>> = all
        .iter()
        .map(|(p, w)| m.classify_first(p, *w, &mut s))
        .collect();
    assert_eq!(firsts, want, "classify_first_batch");
}

/// Four or more keys of a small group are dispatched by a perfect hash
/// chosen for them (DPF's hashed disjunctions; three keys keep their
/// compares), and the answers equal `Merged`'s and each filter's own on
/// packets of every session, near misses (one port off, a fragment), an
/// IPv4 header with options, and every truncation of them.
#[test]
fn key_sets_are_hashed_from_four_keys() {
    let addr = |i| 0xc0a8_0000 + i;
    for n in [3u32, 4, 10, 16] {
        let filters: Vec<(u32, Filter, i32)> = (0..n)
            .map(|i| {
                let f = session(addr(i), addr(100 + 3 * i), 1000 + i, 80 + i % 2);
                (i, Filter::new(f, 1), 0)
            })
            .collect();
        let (nm, m) = build(&filters, SMALL_KEYS);
        assert_eq!(
            nm.native_stats().hashed_sets,
            usize::from(n >= 4),
            "{n} keys"
        );
        let mut pkts = Vec::new();
        for i in 0..n {
            let (a, b, q) = (addr(i), addr(100 + 3 * i), 80 + (i % 2) as u16);
            pkts.push(tcp_packet(a, b, 1000 + i as u16, q, 5, 0x4000, 6));
            pkts.push(tcp_packet(a, b, 1000 + i as u16, q, 6, 0, 6));
            pkts.push(tcp_packet(a, b, 1001 + i as u16, q, 5, 0, 6));
            pkts.push(tcp_packet(a, b, 1000 + i as u16, q, 5, 0x21, 6));
        }
        let live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
        check(&nm, &m, &live, &pkts);
    }
}

/// Paths that all read behind the IPv4 header get a version of their
/// code for a header of 5 words; it is taken only when the header byte
/// says so and the packet holds every shared field, and both versions
/// agree with `Merged` and each filter alone: on headers of every length
/// from 0 to 15 words (TCP, UDP, a fragment), on a header of 5 words whose version nibble is not
/// 4, on an IPv6 frame whose first IP byte reads like one, and on every
/// truncation of them. Probed tables (many keys) and keys in code (a few)
/// both take the fast version; paths that read nothing behind the header
/// do not have one.
#[test]
fn ipv4_headers_of_five_words_have_their_own_version() {
    let addr = |i| 0xc0a8_0000 + i;
    // The last set also tests the header's first byte itself, where the
    // entry test reads, and a field after it that a coalesced compare
    // from the ethertype reaches past it.
    for (n, small, byte) in [
        (6u32, SMALL_KEYS, false),
        (40, 4, false),
        (6, SMALL_KEYS, true),
    ] {
        let filters: Vec<(u32, Filter, i32)> = (0..n)
            .map(|i| {
                let mut f = session(addr(i), addr(50 + i), 1000 + i, 80);
                if byte {
                    let short = Pred::cmp(CmpOp::Set, ld(16, Size::Half), Val::Const(0x8000));
                    let v8 = Pred::cmp(CmpOp::Set, ld(14, Size::Byte), Val::Const(0x80));
                    f = Pred::and(vec![Pred::not(v8), Pred::not(short), f]);
                }
                (i, Filter::new(f, 1), 0)
            })
            .collect();
        let (nm, m) = build(&filters, small);
        assert_eq!(nm.native_stats().ipv4_fast, 1, "{n} sessions");
        let mut pkts = Vec::new();
        for i in [0, 1, n - 1] {
            let (a, b, p) = (addr(i), addr(50 + i), 1000 + i as u16);
            for ihl in 0..16 {
                pkts.push(tcp_packet(a, b, p, 80, ihl, 0, 6));
                pkts.push(tcp_packet(a, b, p, 80, ihl, 0x2001, 6));
                pkts.push(tcp_packet(a, b, p, 80, ihl, 0, 17));
            }
            let mut odd = tcp_packet(a, b, p, 80, 5, 0, 6);
            odd[14] = 0x65;
            pkts.push(odd.clone());
            odd[12..14].copy_from_slice(&[0x86, 0xdd]);
            odd[14] = 0x45;
            pkts.push(odd);
        }
        let live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
        check(&nm, &m, &live, &pkts);
    }
    let src = Pred::eq(ld(26, Size::Word), addr(1));
    let (nm, _) = build(&[(0, Filter::new(src, 1), 0)], SMALL_KEYS);
    assert_eq!(nm.native_stats().ipv4_fast, 0);
}

/// A table large enough for the batch functions' prefetch pipeline (here
/// 2^16 slots, 20,000 sessions, with the threshold lowered to 1 MiB)
/// gives the same answers as `Merged` in batches and one by one, for
/// packets of installed sessions and of none.
#[test]
fn large_tables_prefetched_in_batches_agree() {
    let addr = |i| 0x0a00_0000 + i;
    let mut m = Merged::default();
    m.insert(
        0,
        &Compiled::new(Filter::new(session(addr(0), addr(1), 1000, 80), 1)),
        0,
    );
    for i in 1..20_000u32 {
        let key = [0x800, 6, addr(i), addr(i + 1), 1000 + i % 50_000, 80];
        assert!(m.insert_keyed(i, 0, &key, 0));
    }
    assert!(!NativeMerged::from_merged(m.clone()).pipelines());
    let n = NativeMerged::from_merged(m.clone()).with_prefetch_bytes(1 << 20);
    assert!(n.coded());
    assert!(n.pipelines());
    assert!(n.packed_bytes() >= 1 << 20);
    let pkts: Vec<Vec<u8>> = (0..300u32)
        .map(|k| {
            let i = k * 67 % 20_000;
            let q = if k % 5 == 0 { 81 } else { 80 };
            tcp_packet(
                addr(i),
                addr(i + 1),
                (1000 + i % 50_000) as u16,
                q,
                5,
                0x4000,
                6,
            )
        })
        .collect();
    let all: Vec<(&[u8], u32)> = pkts.iter().map(|p| (&p[..], p.len() as u32)).collect();
    let mut s = Scratch::default();
    let mut firsts = vec![None; all.len()];
    n.classify_first_batch(&all, &mut s, &mut firsts);
    let want: Vec<Option<u32>> = all
        .iter()
        .map(|(p, w)| m.classify_first(p, *w, &mut s))
        .collect();
    assert_eq!(firsts, want);
    assert_eq!(want.iter().filter(|w| w.is_some()).count(), 240);
    // Batches that end inside, at and just past a chunk of the pipeline.
    for len in [1, 15, 16, 17, 31, 32, 33, 47, 63, 64, 65] {
        let mut firsts = vec![None; len];
        n.classify_first_batch(&all[5..5 + len], &mut s, &mut firsts);
        assert_eq!(firsts, want[5..5 + len], "{len} packets");
    }
    let mut x = vec![Vec::new(); all.len()];
    n.classify_batch(&all, &mut s, &mut x);
    let y: Vec<Vec<u32>> = want.iter().map(|w| w.iter().copied().collect()).collect();
    assert_eq!(x, y);
}

/// The batch functions answer alone for a packet with one match of a key
/// with one filter, and hand over (MANY) a key with two filters and a
/// packet two groups match; every answer equals `Merged`'s.
#[test]
fn batch_results_hand_over_only_shared_keys() {
    let addr = |i| 0xc0a8_0000 + i;
    let mut filters: Vec<(u32, Filter, i32)> = (0..10)
        .map(|i| {
            (
                i,
                Filter::new(session(addr(i), addr(50), 1000 + i, 80), 1),
                0,
            )
        })
        .collect();
    // Filter 10 shares session 3's key; filter 11 is another group (any TCP
    // to port 80 of 192.168.0.50).
    filters.push((10, Filter::new(session(addr(3), addr(50), 1003, 80), 1), 5));
    let to50 = Pred::and(vec![
        Pred::eq(Val::load_abs(12, Size::Half), 0x800),
        Pred::eq(Val::load_abs(30, Size::Word), addr(50)),
    ]);
    filters.push((11, Filter::new(to50, 1), 0));
    for small in [0, SMALL_KEYS] {
        let (n, m) = build(&filters, small);
        assert!(n.coded());
        let pkt = |i: u32| tcp_packet(addr(i), addr(50), 1000 + i as u16, 80, 5, 0x4000, 6);
        let (p1, p3, p_other) = (
            pkt(1),
            pkt(3),
            tcp_packet(addr(1), addr(51), 1001, 80, 5, 0, 6),
        );
        let pkts: Vec<(&[u8], u32)> = vec![(&p1, 54), (&p3, 54), (&p_other, 54), (&p1[..20], 54)];
        let mut r = vec![0; pkts.len()];
        n.results(&pkts, &mut r);
        // p1: session 1 and the to-50 group: two matches.
        assert_eq!(r, [MANY, MANY, NO_MATCH, NO_MATCH], "small = {small}");
        let mut s = Scratch::default();
        for (p, w) in &pkts {
            assert_eq!(
                n.classify_first(p, *w, &mut s),
                m.classify_first(p, *w, &mut s)
            );
        }
        // Without the to-50 group, session 1 is answered in code.
        let (n, _) = build(&filters[..11], small);
        n.results(&pkts, &mut r);
        assert_eq!(r, [1, MANY, NO_MATCH, NO_MATCH], "small = {small}");
    }
}

fn build(filters: &[(u32, Filter, i32)], small: usize) -> (NativeMerged, Merged) {
    let mut m = Merged::default();
    for (id, f, p) in filters {
        m.insert(*id, &Compiled::new(f.clone()), *p);
    }
    let n = NativeMerged::with_small_keys(m.clone(), small);
    (n, m)
}

/// Fields every session key shares (here the destination port) are
/// tested in code and left out of the packed table; a key-only insert with
/// another value makes the table take a new layout and the code follow,
/// and answers stay `Merged`'s throughout, in both copies of a
/// concurrent classifier too.
#[test]
fn a_shared_key_field_that_stops_being_shared() {
    let addr = |i| 0x0a00_0000 + i;
    let filters: Vec<(u32, Filter, i32)> = (0..40)
        .map(|i| {
            (
                i,
                Filter::new(session(addr(i), addr(i + 100), 2000 + i, 80), 1),
                0,
            )
        })
        .collect();
    let (mut n, mut m) = build(&filters, 16);
    let mut live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
    let pkt = |i: u32, q: u16| tcp_packet(addr(i), addr(i + 100), 2000 + i as u16, q, 5, 0, 6);
    // The last two: all-zero addresses and ports, and all-zero but for the
    // shared port, whose packed key is all zeros like an empty slot's.
    let pkts: Vec<Vec<u8>> = vec![
        pkt(3, 80),
        pkt(3, 443),
        pkt(50, 443),
        pkt(7, 80),
        tcp_packet(0, 0, 0, 0, 5, 0, 6),
        tcp_packet(0, 0, 0, 80, 5, 0, 6),
    ];
    check(&n, &m, &live, &pkts);
    let before = n.native_stats().compilations;
    // Session 50 on port 443: the port is no longer shared.
    let key = [0x800, 6, addr(50), addr(150), 2050, 443];
    assert!(n.insert_keyed(40, 0, &key, 0));
    assert!(m.insert_keyed(40, 0, &key, 0));
    live.push((40, Filter::new(session(addr(50), addr(150), 2050, 443), 1)));
    n.update();
    assert!(
        n.native_stats().compilations > before,
        "the code follows the layout"
    );
    check(&n, &m, &live, &pkts);
    n.remove(3);
    m.remove(3);
    live.retain(|f| f.0 != 3);
    n.update();
    check(&n, &m, &live, &pkts);

    // The same changes through a concurrent classifier.
    let mut c = NativeClassifier::default();
    let first = c.insert(&filters[0].1, 0);
    let keys: Vec<Vec<u32>> = (1..40)
        .map(|i| vec![0x800, 6, addr(i), addr(i + 100), 2000 + i, 80])
        .collect();
    c.insert_keys(first, keys, 0).expect("key-only inserts");
    c.publish();
    c.publish();
    let r = c.reader();
    assert_eq!(r.classify(&pkt(7, 80), 60).len(), 1);
    let other = c
        .insert_keys(first, vec![key.to_vec()], 0)
        .expect("key-only insert");
    c.publish();
    for _ in 0..2 {
        assert_eq!(r.classify(&pkt(50, 443), 60), vec![other[0]]);
        assert_eq!(r.classify(&pkt(7, 80), 60).len(), 1);
        assert!(r.classify(&pkt(7, 443), 60).is_empty());
        c.publish();
    }
}

#[test]
fn ethertype_dispatch_and_keys_in_code() {
    let filters: Vec<(u32, Filter, i32)> = [0x800, 0x86dd, 0x806]
        .iter()
        .enumerate()
        .map(|(i, &k)| (i as u32, Filter::new(arbitrary::ether_type(k), 1), 0))
        .collect();
    let (n, m) = build(&filters, SMALL_KEYS);
    let st = n.native_stats();
    assert_eq!(
        (st.keys_in_code, st.probe_groups, st.fallback_groups),
        (3, 0, 0)
    );
    let fs: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
    check(&n, &m, &fs, &arbitrary::sample_packets());
}

#[test]
fn sessions_in_code_and_in_a_table_agree() {
    let mut filters = Vec::new();
    let mut pkts = Vec::new();
    for i in 0..40u32 {
        let (a, b, p, q) = (0x0a00_0001 + i % 3, 0x0a00_0100 + i % 5, 1000 + i % 7, 80);
        filters.push((i, Filter::new(session(a, b, p, q), 65535), (i % 3) as i32));
        pkts.push(tcp_packet(
            a,
            b,
            p as u16,
            q as u16,
            5 + (i % 3) as u8,
            0,
            6,
        ));
        pkts.push(tcp_packet(a, b, p as u16, q as u16, 5, 0x2001, 6));
    }
    pkts.push(tcp_packet(1, 2, 3, 4, 2, 0, 6)); // IHL too small
    let fs: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
    for count in [1, 5, 10, 16, 17, 40] {
        for small in [0, SMALL_KEYS] {
            let (n, m) = build(&filters[..count], small);
            let st = n.native_stats();
            assert_eq!(st.fallback_groups, 0);
            if small == 0 || count > SMALL_KEYS {
                assert_eq!((st.probe_groups, st.keys_in_code), (1, 0));
            } else {
                assert_eq!(st.probe_groups, 0);
                assert!(st.keys_in_code > 0);
                assert!(st.coalesced > 0, "adjacent ports compared at once");
            }
            check(&n, &m, &fs[..count], &pkts);
        }
    }
}

#[test]
fn a_key_added_to_a_probed_group_compiles_nothing() {
    let mut m = NativeMerged::new();
    let port = |p| Filter::new(Pred::eq(ld(2, Size::Half), p), 1);
    for i in 0..=SMALL_KEYS as u32 {
        m.insert(i, &Compiled::new(port(1000 + i)), 0);
    }
    m.update();
    let st = m.native_stats();
    assert_eq!((st.probe_groups, st.units), (1, 1));
    let before = st.compilations;
    for i in 0..1000u32 {
        assert!(m.insert_keyed(100 + i, 0, &[5000 + i], 0));
    }
    m.update();
    assert_eq!(m.native_stats().compilations, before);
    let mut out = Vec::new();
    m.classify(
        &[0, 0, 0x13, 0x88 + 7],
        4,
        &mut Scratch::default(),
        &mut out,
    );
    assert_eq!(out, vec![107]);
    // A key of a small group is in the code: a change there recompiles
    // that group's function only.
    m.insert(
        5000,
        &Compiled::new(Filter::new(Pred::eq(ld(0, Size::Byte), 9), 1)),
        0,
    );
    m.update();
    assert_eq!(m.native_stats().compilations, before + 1);
    assert_eq!(m.native_stats().keys_in_code, 1);
    m.insert(
        5001,
        &Compiled::new(Filter::new(Pred::eq(ld(0, Size::Byte), 8), 1)),
        0,
    );
    m.update();
    assert_eq!(m.native_stats().compilations, before + 2);
    assert_eq!(m.native_stats().keys_in_code, 2);
}

/// Fields near the end of the 32-bit offset space: the windows that
/// coalesce their tests must not wrap (found by `random_filter_sets`).
#[test]
fn fields_at_offsets_near_two_to_the_32_coalesce_without_wrapping() {
    let far = |k: u32| {
        Pred::and(vec![
            Pred::eq(ld(0xffff_fff0, Size::Word), k),
            Pred::eq(ld(0xffff_fff8, Size::Half), 2),
            Pred::eq(ld(0xffff_fffa, Size::Byte), 3),
            Pred::eq(ld(0xffff_fffc, Size::Half), 4),
            Pred::eq(ld(0xffff_fffe, Size::Byte), 5),
        ])
    };
    let filters: Vec<(u32, Filter, i32)> = (0..3)
        .map(|i| (i, Filter::new(far(i), 1), i as i32))
        .collect();
    for small in [0, 2, SMALL_KEYS] {
        let (n, m) = build(&filters, small);
        let live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
        check(&n, &m, &live, &arbitrary::sample_packets());
    }
}

#[test]
fn stale_code_is_never_run() {
    let mut m = NativeMerged::new();
    m.insert(
        0,
        &Compiled::new(Filter::new(Pred::eq(ld(0, Size::Byte), 1), 1)),
        0,
    );
    m.update();
    m.remove(0);
    let mut out = Vec::new();
    m.classify(&[1], 1, &mut Scratch::default(), &mut out);
    assert!(out.is_empty());
}

#[test]
fn concurrent_readers_see_whole_publishes() {
    let mut c = NativeClassifier::default();
    let port = |p| Filter::new(Pred::eq(ld(2, Size::Half), p), 1);
    let first = c.insert(&port(7), 0);
    c.publish();
    let r = c.reader();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (st, go) = (stop.clone(), started.clone());
    let t = std::thread::spawn(move || {
        let mut n = 0u64;
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            // Filter `first` is never removed; others come and go.
            let got = r.classify(&[0, 0, 0, 7], 4);
            assert_eq!(got.first(), Some(&first));
            n += 1;
            go.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        n
    });
    // The reader classifies while the changes are made, however the two
    // threads are scheduled.
    while !started.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::yield_now();
    }
    let mut ids = Vec::new();
    for round in 0..60u32 {
        for k in 0..20 {
            ids.push(c.insert(&port(7 + (k % 3) * 100 + round), 0));
        }
        if round % 2 == 1 {
            ids.drain(..15).for_each(|id| c.remove(id));
        }
        c.publish();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(t.join().unwrap() > 0);
    let mut m = Merged::default();
    // The final state against the Rust path built from scratch.
    m.insert(first.0, &Compiled::new(port(7)), 0);
    let r = c.reader();
    let got = r.classify(&[0, 0, 0, 7], 4);
    assert_eq!(got[0], first);
    assert!(c.published(|e| e.native_stats()).unwrap_or_default().units >= 1);
}

proptest! {
    // SLUICE_SOAK=1: many more cases.
    #![proptest_config(ProptestConfig {
        cases: if std::env::var_os("SLUICE_SOAK").is_some() { 3000 } else { 48 },
        ..ProptestConfig::default()
    })]

    /// Random filters (every IR construct), random priorities, random
    /// removals, both key placements.
    #[test]
    fn random_filter_sets(
        preds in prop::collection::vec((arbitrary::pred(), 0i32..3), 1..6),
        removed in prop::collection::vec(any::<prop::sample::Index>(), 0..3),
        pkts in prop::collection::vec(arbitrary::packet(), 1..3),
        small in prop_oneof![Just(0usize), Just(2), Just(SMALL_KEYS)],
    ) {
        let filters: Vec<(u32, Filter, i32)> = preds
            .into_iter()
            .enumerate()
            .map(|(i, (p, prio))| (i as u32, Filter::new(p, 1), prio))
            .collect();
        let (mut n, mut m) = build(&filters, small);
        let mut live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
        for r in removed {
            if live.is_empty() { break; }
            let (id, _) = live.remove(r.index(live.len()));
            n.remove(id);
            m.remove(id);
        }
        n.update();
        let mut pkts = pkts;
        pkts.extend(arbitrary::sample_packets().into_iter().step_by(3));
        check(&n, &m, &live, &pkts);
    }

    /// Session filters from a small pool (shared keys, shared fields),
    /// key-only inserts, removals, packets that match and nearly match.
    #[test]
    fn session_sets(
        sessions in prop::collection::vec((0u32..3, 0u32..3, 0u32..4, 0u32..2, 0i32..2), 1..30),
        extra in prop::collection::vec((0u32..3, 0u32..3, 0u32..4, 0u32..2), 0..10),
        removed in prop::collection::vec(any::<prop::sample::Index>(), 0..5),
        probes in prop::collection::vec((any::<prop::sample::Index>(), 0u8..4, 4u8..8, 0u8..4), 1..8),
        small in prop_oneof![Just(0usize), Just(4), Just(SMALL_KEYS)],
    ) {
        let addr = |i| 0xc0a8_0000 + i;
        let filters: Vec<(u32, Filter, i32)> = sessions
            .iter()
            .enumerate()
            .map(|(i, &(a, b, p, q, prio))| {
                (i as u32, Filter::new(session(addr(a), addr(b + 7), 1000 + p, 80 + q), 1), prio)
            })
            .collect();
        let (mut n, mut m) = build(&filters, small);
        let mut live: Vec<(u32, Filter)> = filters.iter().map(|f| (f.0, f.1.clone())).collect();
        let mut next = filters.len() as u32;
        for &(a, b, p, q) in &extra {
            let key = [0x800, 6, addr(a), addr(b + 7), 1000 + p, 80 + q];
            let (ok1, ok2) = (n.insert_keyed(next, 0, &key, 1), m.insert_keyed(next, 0, &key, 1));
            prop_assert_eq!(ok1, ok2);
            if ok1 {
                live.push((next, Filter::new(session(addr(a), addr(b + 7), 1000 + p, 80 + q), 1)));
                next += 1;
            }
        }
        for r in removed {
            if live.is_empty() { break; }
            let (id, _) = live.remove(r.index(live.len()));
            n.remove(id);
            m.remove(id);
        }
        live.sort_by_key(|f| f.0);
        n.update();
        // Mostly packets of installed sessions, some one field off, some
        // fragments, some with odd IPv4 header lengths.
        let pkts: Vec<Vec<u8>> = probes
            .iter()
            .map(|&(i, change, ihl, frag)| {
                let (a, b, p, q, _) = sessions[i.index(sessions.len())];
                let (b, p) = match change {
                    1 => (b, p + 1),
                    2 => ((b + 1) % 3, p),
                    _ => (b, p),
                };
                let frag = if frag == 0 { 0x21 } else { 0x4000 };
                tcp_packet(addr(a), addr(b + 7), 1000 + p as u16, 80 + q as u16, ihl, frag, 6)
            })
            .collect();
        check(&n, &m, &live, &pkts);
    }
}

/// Cache sizes as Linux's sysfs writes them.
#[test]
fn cache_sizes_parse() {
    assert_eq!(cache_size("32768K\n"), Some(32 << 20));
    assert_eq!(cache_size("1M"), Some(1 << 20));
    assert_eq!(cache_size("512"), Some(512));
    assert_eq!(cache_size("12Q"), None);
    assert_eq!(cache_size(""), None);
    assert!(last_level_cache() >= 1 << 10);
    // Half of a 32 MiB cache in 32-byte slots.
    assert_eq!(prefetch_slots(16 << 20, 32), 1 << 19);
}
