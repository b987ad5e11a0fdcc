//! The program of many filters against the merged classifier it mirrors,
//! in the kernel: verdicts and per-filter counts on every packet, with
//! the set in one program and split into a chain, through key-only
//! inserts and removals. Where the kernel refuses BPF for lack of
//! privilege the tests say SKIPPED, unless `SLUICE_LIVE_REQUIRED` is set.

use super::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use sluice_classifier::merged::Scratch;
use sluice_ir::arbitrary;

fn build(filters: &[(u32, Compiled)], opts: Options) -> Option<MultiFilter> {
    build_as(filters, opts, Mode::TestRun)
}

fn build_as(filters: &[(u32, Compiled)], opts: Options, mode: Mode) -> Option<MultiFilter> {
    let refs: Vec<(u32, &Compiled)> = filters.iter().map(|(i, c)| (*i, c)).collect();
    match MultiFilter::build(&refs, mode, opts) {
        Ok(m) => Some(m),
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED: the kernel refuses BPF here ({e})");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The sample packets and their cuts (every test of a set runs them).
pub(crate) fn packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for p in arbitrary::sample_packets() {
        for cut in [0, 13, 14, 20, 23, 34, 38, 40, 54] {
            if cut < p.len() {
                out.push(p[..cut].to_vec());
            }
        }
        out.push(p);
    }
    out
}

/// Run every packet through `m` and the classifier: the verdicts and
/// the counts agree. An XDP chain takes frames of 14 bytes or more,
/// whole, and passes what some filter wants.
fn agree(m: &MultiFilter, pkts: &[Vec<u8>], what: &str) {
    let before = m.counts().unwrap();
    let mut want = before.clone();
    let (mut s, mut out) = (Scratch::default(), Vec::new());
    let xdp = m.chain.mode() == Mode::Xdp;
    for p in pkts.iter().filter(|p| !xdp || p.len() >= 14) {
        let wirelen = p.len() as u32 + if xdp { 0 } else { 4 };
        m.merged().classify(p, wirelen, &mut s, &mut out);
        let got = m.run(p, wirelen).unwrap();
        let matched = if xdp {
            assert!(
                got == XDP_PASS || got == XDP_DROP,
                "{what}: XDP verdict {got}"
            );
            got == XDP_PASS
        } else {
            got != 0
        };
        assert_eq!(matched, !out.is_empty(), "{what}: packet {p:02x?}: {out:?}");
        for id in &out {
            want[*id as usize] += 1;
        }
    }
    assert_eq!(m.counts().unwrap(), want, "{what}");
}

#[test]
fn random_sets_count_as_the_classifier_does() {
    let mut runner = TestRunner::deterministic();
    let pkts = packets();
    for round in 0..12 {
        let n = 1 + round * 3;
        let preds: Vec<Pred> = (0..n)
            .map(|_| arbitrary::pred().new_tree(&mut runner).unwrap().current())
            .collect();
        let mut filters: Vec<(u32, Compiled)> = preds
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u32 * 2, Compiled::new(Filter::new(p.clone(), 1))))
            .collect();
        // Some hand-built ones, which group (hosts, ether types).
        for (k, p) in arbitrary::hand_built_filters().into_iter().enumerate() {
            filters.push((1000 + k as u32, Compiled::new(Filter::new(p, 1))));
        }
        for budget in [50_000, 400] {
            let Some(m) = build(
                &filters,
                Options {
                    budget,
                    ..Default::default()
                },
            ) else {
                return;
            };
            if budget == 400 && round > 4 {
                assert!(m.programs() > 1, "a small budget makes a chain");
            }
            agree(&m, &pkts, &format!("round {round}, budget {budget}"));
            // The same set as an XDP chain, reading frames directly.
            let opts = Options {
                budget,
                ..Default::default()
            };
            let xdp = build_as(&filters, opts, Mode::Xdp).expect("built as a test run");
            agree(&xdp, &pkts, &format!("XDP round {round}, budget {budget}"));
        }
    }
}

#[test]
fn key_only_changes_are_map_updates() {
    // One path each (IPv4 source a): copies by key are for such filters.
    let host = |a: u32| {
        let p = Pred::and(vec![
            arbitrary::ether_type(0x800),
            Pred::eq(Val::load_abs(26, Size::Word), a),
        ]);
        Compiled::new(Filter::new(p, 1))
    };
    let pkts = packets();
    // The addresses the sample packets carry, and others.
    let mut addrs: Vec<u32> = pkts
        .iter()
        .filter(|p| p.len() >= 34)
        .flat_map(|p| [26].map(|o| u32::from_be_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]])))
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    // Keys of their own (a key shared needs room the small group lacks).
    addrs.retain(|a| ![0x0a00_0001, 0x0a00_0002].contains(a));
    let filters = vec![(0, host(0x0a00_0001)), (1, host(0x0a00_0002))];
    let opts = Options {
        capacity: 64,
        inline: 0,
        ..Default::default()
    };
    let Some(mut m) = build(&filters, opts) else {
        return;
    };
    let like = 0;
    let key_of = |m: &MultiFilter, id: u32| {
        let mut ks = Vec::new();
        m.merged().keys_of(id, |_, k| ks.push(k.to_vec()));
        ks
    };
    let width = key_of(&m, like)[0].len();
    let insns = m.instructions().to_vec();
    for (i, a) in addrs.iter().enumerate() {
        let mut key = key_of(&m, like)[0].clone();
        // The address is the key word that is 10.0.0.1.
        let at = key
            .iter()
            .position(|w| *w == 0x0a00_0001)
            .expect("the address in the key");
        key[at] = *a;
        assert_eq!(key.len(), width);
        m.insert_keyed(2 + i as u32, like, &key).unwrap();
    }
    agree(&m, &pkts, "after the inserts");
    // Sharing filter 1's key: refused, nothing changed.
    let mut shared = key_of(&m, like)[0].clone();
    let at = shared.iter().position(|w| *w == 0x0a00_0001).unwrap();
    shared[at] = 0x0a00_0002;
    assert!(matches!(
        m.insert_keyed(63, like, &shared),
        Err(Error::Unsupported(_))
    ));
    agree(&m, &pkts, "after a refused insert");
    for i in (0..addrs.len()).step_by(2) {
        m.remove(2 + i as u32).unwrap();
    }
    m.remove(1).unwrap();
    agree(&m, &pkts, "after the removals");
    assert_eq!(m.instructions(), &insns[..], "no reload");
    assert!(matches!(
        m.insert_keyed(64, like, &key_of(&m, like)[0]),
        Err(Error::Unsupported(_))
    ));
}

#[test]
fn a_chain_longer_than_the_kernel_allows_is_refused() {
    let filters: Vec<(u32, Compiled)> = (0..40)
        .map(|i| {
            let p = Pred::cmp(CmpOp::Gt, Val::load_abs(i, Size::Byte), Val::Const(i));
            (i, Compiled::new(Filter::new(p, 1)))
        })
        .collect();
    let refs: Vec<(u32, &Compiled)> = filters.iter().map(|(i, c)| (*i, c)).collect();
    match MultiFilter::build(
        &refs,
        Mode::TestRun,
        Options {
            budget: 1,
            ..Default::default()
        },
    ) {
        Err(Error::Unsupported(m)) => assert!(m.contains("the kernel allows 34"), "{m}"),
        Err(Error::NotPermitted(_)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn socket_programs_verify() {
    let filters: Vec<(u32, Compiled)> = arbitrary::hand_built_filters()
        .into_iter()
        .enumerate()
        .map(|(i, p)| (i as u32, Compiled::new(Filter::new(p, 1))))
        .collect();
    let refs: Vec<(u32, &Compiled)> = filters.iter().map(|(i, c)| (*i, c)).collect();
    for outgoing_only in [false, true] {
        match MultiFilter::build(
            &refs,
            Mode::Socket,
            Options {
                budget: 1000,
                outgoing_only,
                ..Default::default()
            },
        ) {
            Ok(m) => assert!(m.programs() > 1),
            Err(Error::NotPermitted(_)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
                return
            }
            Err(e) => panic!("{e}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]
    #[test]
    fn random_sets_on_random_packets(ps in proptest::collection::vec(arbitrary::pred(), 1..12), pkt in arbitrary::packet()) {
        let filters: Vec<(u32, Compiled)> = ps
            .into_iter()
            .enumerate()
            .map(|(i, p)| (i as u32, Compiled::new(Filter::new(p, 1))))
            .collect();
        if let Some(m) = build(&filters, Options::default()) {
            let mut pkts = vec![pkt.clone()];
            pkts.extend((0..pkt.len().min(60)).step_by(7).map(|c| pkt[..c].to_vec()));
            agree(&m, &pkts, "random");
            let xdp = build_as(&filters, Options::default(), Mode::Xdp).expect("built as a test run");
            agree(&xdp, &pkts, "random, XDP");
        }
    }
}

#[test]
fn the_module_example_holds() {
    let port = |p| Compiled::new(Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1));
    let opts = Options {
        capacity: 8,
        inline: 0,
        ..Default::default()
    };
    let Some(mut m) = build(&[(0, port(80)), (1, port(443))], opts) else {
        return;
    };
    assert_ne!(m.run(&[0, 0, 0, 80], 4).unwrap(), 0);
    assert_eq!(m.run(&[0, 0, 0, 81], 4).unwrap(), 0);
    m.insert_keyed(2, 0, &[81]).unwrap();
    assert_ne!(m.run(&[0, 0, 0, 81], 4).unwrap(), 0);
    assert_eq!(&m.counts().unwrap()[..3], &[1, 0, 1]);
    // A group of few keys is code: a change to it is refused, nothing
    // changed.
    let opts = Options {
        capacity: 8,
        ..Default::default()
    };
    let Some(mut one) = build(&[(0, port(80))], opts) else {
        return;
    };
    assert!(matches!(
        one.insert_keyed(1, 0, &[81]),
        Err(Error::Unsupported(_))
    ));
    assert!(matches!(one.remove(0), Err(Error::Unsupported(_))));
    assert_ne!(one.run(&[0, 0, 0, 80], 4).unwrap(), 0);
    assert_eq!(one.run(&[0, 0, 0, 81], 4).unwrap(), 0);
}
