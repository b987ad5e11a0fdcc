//! The flow cache against the tree's own walk: precise invalidation,
//! aborted reads in keys, the wide form, and stepping aside.

use super::*;
use crate::merged::Compiled;
use sluice_ir::{Filter, Pred, Size, Val};

fn byte_eq(o: u32, k: u32) -> Compiled {
    Compiled::new(Filter::new(Pred::eq(Val::load_abs(o, Size::Byte), k), 1))
}

fn answer(c: &mut FlowCache, t: &DecisionTree, pkt: &[u8], s: &mut Scratch) -> Vec<u32> {
    let slots = match c.lookup(t, pkt, pkt.len() as u32, s) {
        Lookup::Hit => c.slots().to_vec(),
        Lookup::Miss => c.learn(t, pkt, pkt.len() as u32, s).to_vec(),
        Lookup::Bypass => panic!("always on"),
    };
    let mut ids: Vec<u32> = slots.iter().map(|&s| t.id_of(s).unwrap()).collect();
    ids.sort_unstable();
    ids
}

/// An insert drops only the flows the new filter may match; a removal
/// only the flows that report the filter removed.
#[test]
fn invalidation_is_precise() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    t.insert(2, &byte_eq(0, 2), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1]);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2]);
    assert_eq!(answer(&mut c, &t, &[3, 0], &mut s), Vec::<u32>::new());
    assert_eq!(c.stats().entries, 3);
    // A filter on byte 0 = 2: only the second flow may change.
    t.insert(3, &byte_eq(0, 2), 0);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1]);
    assert_eq!(c.stats().invalidated, 1);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3]);
    // A filter on byte 1, which no flow read: every flow may change.
    t.insert(4, &byte_eq(1, 0), 0);
    assert_eq!(answer(&mut c, &t, &[3, 0], &mut s), vec![4]);
    assert_eq!(c.stats().invalidated, 4);
    // Removing filter 1 drops only the flows that report it.
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![1, 4]);
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3, 4]);
    let (before, hits) = (c.stats().invalidated, c.stats().hits);
    t.remove(1);
    // The next lookup replays the removal: the flow of [1, 0] goes,
    // the flow of [2, 0] stays and answers.
    assert_eq!(answer(&mut c, &t, &[2, 0], &mut s), vec![2, 3, 4]);
    assert_eq!(c.stats().invalidated, before + 1);
    assert_eq!(c.stats().hits, hits + 1);
    assert_eq!(answer(&mut c, &t, &[1, 0], &mut s), vec![4]);
    assert_eq!(c.stats().hits, hits + 1, "learnt again");
    assert_eq!(c.stats().invalidated, before + 1);
}

/// A cache made for another tree, or too far behind the log, is
/// emptied rather than trusted.
#[test]
fn another_tree_or_a_long_history_empties_the_cache() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[1], &mut s), vec![1]);
    let mut other = DecisionTree::default();
    other.insert(1, &byte_eq(0, 2), 0);
    assert_eq!(answer(&mut c, &other, &[1], &mut s), Vec::<u32>::new());
    assert_eq!(c.stats().flushes, 1);
    for k in 0..LOG_LEN as u32 + 1 {
        other.insert(10 + k, &byte_eq(5, k), 0);
    }
    assert_eq!(answer(&mut c, &other, &[2], &mut s), vec![1]);
    assert_eq!(c.stats().flushes, 2);
}

/// Aborted reads are part of a flow's key: a shorter packet is
/// another flow.
#[test]
fn aborts_are_part_of_the_key() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(3, 0), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    c.set_always(true);
    assert_eq!(answer(&mut c, &t, &[0, 0, 0, 0], &mut s), vec![1]);
    assert_eq!(answer(&mut c, &t, &[0, 0, 0], &mut s), Vec::<u32>::new());
    assert_eq!(answer(&mut c, &t, &[9, 9, 9, 0], &mut s), vec![1]);
    assert_eq!(c.stats().hits, 1);
}

/// The first level's wide form never claims a packet that disagrees
/// with the entry's key on a field: fixed and IPv4-header-relative
/// loads, masks, different header lengths, short packets, the wire
/// length, and the fields it leaves to be read one by one (a computed
/// offset, a load beyond its bytes).
#[test]
fn the_wide_form_implies_the_key() {
    use sluice_ir::BinOp;
    let mut t = DecisionTree::default();
    let vals = [
        Val::load_abs(12, Size::Half),
        Val::load_abs(23, Size::Byte),
        Val::bin(
            BinOp::And,
            Val::load_abs(20, Size::Half),
            Val::Const(0x1fff),
        ),
        Val::load_abs(26, Size::Word),
        Val::load(Val::ip_hdr_len(14), 16, Size::Half),
        Val::bin(
            BinOp::And,
            Val::load(Val::ip_hdr_len(14), 27, Size::Byte),
            Val::Const(0x12),
        ),
        Val::Len,
        // Computed: covered by the bytes and the length they read, and
        // one beyond the form's bytes, left to be read one by one.
        Val::load(Val::load_abs(3, Size::Byte), 20, Size::Byte),
        Val::bin(BinOp::Add, Val::Len, Val::load_abs(5, Size::Byte)),
        Val::load(Val::load_abs(3, Size::Byte), 125, Size::Word),
        Val::load_abs(130, Size::Byte),
    ];
    for (i, v) in vals.iter().enumerate() {
        t.insert(
            i as u32,
            &Compiled::new(Filter::new(Pred::eq(v.clone(), 7), 1)),
            0,
        );
    }
    let ids: Vec<FieldId> = vals
        .iter()
        .map(|v| {
            t.fields
                .get(&super::super::field::Source::Val(v.clone()))
                .unwrap()
        })
        .collect();
    let ops: Vec<Op> = ids.iter().map(|&f| Op::of(&t.fields, f)).collect();
    assert!(
        ops[..7]
            .iter()
            .all(|o| matches!(o, Op::Load { .. } | Op::Len)),
        "{ops:?}"
    );
    assert!(
        ops[7..10].iter().all(|o| matches!(o, Op::Slow(_))),
        "{ops:?}"
    );
    let mut s = Scratch::default();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut formed, mut claimed) = (0, 0);
    for _ in 0..3000 {
        let len = 30 + (next() % 120) as usize;
        // Few byte values, so that packets often agree.
        let mut a: Vec<u8> = (0..len).map(|_| (next() % 3) as u8).collect();
        a[14] = 0x44 + (next() % 3) as u8;
        let wa = 100 + (next() % 2) as u32;
        s.next_packet();
        let key: Vec<u64> = ops.iter().map(|o| o.read(&t, &a, wa, &mut s)).collect();
        let w = Wide::of(&t.fields, &ops, &key, &a, wa);
        s.next_packet();
        if !w.exists() {
            continue;
        }
        let own = w.agrees(&ops, &key, &t, &a, wa, &mut s);
        formed += 1;
        assert!(own, "a packet agrees with its own form");
        for _ in 0..20 {
            let mut b = a.clone();
            // Shorter or longer.
            let len = 20 + (next() % 130) as usize;
            while b.len() < len {
                b.push((next() % 3) as u8);
            }
            b.truncate(len);
            for _ in 0..(next() % 3) {
                if !b.is_empty() {
                    let at = (next() as usize) % b.len();
                    b[at] = (next() % 3) as u8 + if at == 14 { 0x44 } else { 0 };
                }
            }
            let wb = 100 + (next() % 2) as u32;
            s.next_packet();
            if w.agrees(&ops, &key, &t, &b, wb, &mut s) {
                claimed += 1;
                let got: Vec<u64> = ops.iter().map(|o| o.read(&t, &b, wb, &mut s)).collect();
                assert_eq!(got, key, "{a:?} claims {b:?}");
            }
        }
    }
    assert!(
        formed > 100 && claimed > 1000,
        "{formed} forms, {claimed} claims"
    );
}

/// Field `f` of `t` as a key of its own on `pkt`: its read, its value,
/// and its wide form, which must cover it whole.
fn covered(
    t: &DecisionTree,
    f: FieldId,
    pkt: &[u8],
    wirelen: u32,
    s: &mut Scratch,
) -> ([Op; 1], [u64; 1], Wide) {
    let ops = [Op::of(&t.fields, f)];
    assert!(matches!(ops[0], Op::Slow(_)), "{ops:?}");
    s.next_packet();
    let key = [ops[0].read(t, pkt, wirelen, s)];
    let w = Wide::of(&t.fields, &ops, &key, pkt, wirelen);
    assert!(w.exists() && w.left() == 0, "{w:?}");
    (ops, key, w)
}

/// Computed fields are covered by the wide form, nothing left to read one
/// by one: a word of the TCP payload by the two header lengths and the
/// word's bytes, a sum with the wire length by that length, a protocol
/// chain by the bytes its walk reads.
#[test]
fn the_wide_form_covers_computed_fields() {
    use sluice_ir::BinOp;
    let word = Val::tcp_payload_word(14, Val::ip_hdr_len(14));
    let mut t = DecisionTree::default();
    t.insert(
        1,
        &Compiled::new(Filter::new(Pred::eq(word, 0x4745_5420), 1)),
        0,
    );
    let f = (0..t.fields.len() as FieldId)
        .find(|&f| {
            matches!(
                t.fields.how(f),
                super::super::field::Read::Generic(v) if matches!(v, Val::Load { size: Size::Word, .. })
            )
        })
        .expect("the word's field");
    let mut pkt = vec![0u8; 62];
    pkt[14] = 0x45;
    pkt[46] = 0x50;
    pkt[54..58].copy_from_slice(b"GET ");
    let mut s = Scratch::default();
    let (ops, key, w) = covered(&t, f, &pkt, 62, &mut s);
    assert_eq!(key[0], 0x4745_5420);
    let mut agrees = |p: &[u8], wirelen| {
        s.next_packet();
        w.agrees(&ops, &key, &t, p, wirelen, &mut s)
    };
    assert!(agrees(&pkt, 62));
    let mut other = pkt.clone();
    other[60] = 9; // past the word
    other[20] = 9; // not read
    assert!(agrees(&other, 62));
    for at in [14, 46, 54, 57] {
        let mut other = pkt.clone();
        other[at] ^= 0x40;
        assert!(!agrees(&other, 62), "byte {at} changed");
    }
    assert!(!agrees(&pkt[..57], 62), "the word's load aborts");

    // A field that reads the wire length: the form has it.
    let mut t = DecisionTree::default();
    let v = Val::bin(BinOp::Add, Val::Len, Val::load_abs(5, Size::Byte));
    t.insert(1, &Compiled::new(Filter::new(Pred::eq(v, 9), 1)), 0);
    let (ops, key, w) = covered(&t, 0, &pkt, 62, &mut s);
    let mut agrees = |p: &[u8], wirelen| {
        s.next_packet();
        w.agrees(&ops, &key, &t, p, wirelen, &mut s)
    };
    assert!(agrees(&pkt, 62));
    assert!(!agrees(&pkt, 63), "another wire length");

    // A protocol chain (`ip protochain 17`): the bytes its walk reads.
    let mut t = DecisionTree::default();
    let chain = Pred::ProtoChain {
        v6: false,
        start: Val::Const(14),
        proto: 17,
    };
    t.insert(1, &Compiled::new(Filter::new(chain, 1)), 0);
    let (ops, key, w) = covered(&t, 0, &pkt, 62, &mut s);
    let mut agrees = |p: &[u8]| {
        s.next_packet();
        w.agrees(&ops, &key, &t, p, 62, &mut s)
    };
    assert!(agrees(&pkt));
    let mut other = pkt.clone();
    other[14 + 9] = 17;
    assert!(!agrees(&other), "another protocol");
}

/// Without `always`, a cache that never hits steps aside.
#[test]
fn a_cache_that_does_not_pay_steps_aside() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    t.insert(
        2,
        &Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Word), 7), 1)),
        0,
    );
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    let mut aside = 0;
    for k in 0..3 * WINDOW {
        let pkt = k.to_be_bytes();
        match c.lookup(&t, &pkt, 4, &mut s) {
            Lookup::Miss => {
                c.learn(&t, &pkt, 4, &mut s);
            }
            Lookup::Bypass => aside += 1,
            Lookup::Hit => {}
        }
    }
    assert!(aside >= WINDOW, "{:?}", c.stats());
    // A trial ends after about MAX_MISSES misses, not a whole window.
    assert!(
        c.stats().misses < u64::from(WINDOW + 2 * MAX_MISSES),
        "{:?}",
        c.stats()
    );
}

/// Without `always`, a cache whose flows repeat keeps answering
/// across its windows (a hit right after a window is judged counts
/// in the next one).
#[test]
fn a_cache_that_pays_keeps_answering() {
    let mut t = DecisionTree::default();
    t.insert(1, &byte_eq(0, 1), 0);
    let (mut c, mut s) = (FlowCache::default(), Scratch::default());
    for k in 0..4 * WINDOW {
        let pkt = [(k % 2) as u8, (k >> 8) as u8];
        match c.lookup(&t, &pkt, 2, &mut s) {
            Lookup::Miss => {
                c.learn(&t, &pkt, 2, &mut s);
            }
            Lookup::Bypass | Lookup::Hit => {}
        }
    }
    let f = c.stats();
    assert_eq!(f.misses, 2, "{f:?}");
    assert!(f.hits > u64::from(4 * WINDOW - 4), "{f:?}");
}

#[test]
fn a_few_interrupted_samples_do_not_decide_a_window() {
    let mut c = Cost::default();
    for i in 0..64 {
        c.add(if i % 30 == 7 { 40_000 } else { 100 });
    }
    assert_eq!(c.mean(), Some(100.0));
    // Frequent slow packets (misses) still count.
    let mut m = Cost::default();
    for i in 0..64 {
        m.add(if i % 4 == 0 { 4_000 } else { 100 });
    }
    assert!(m.mean().unwrap() > 900.0);
    assert_eq!(Cost::default().mean(), None);
}

/// Packets of one flow share a signature, whatever their identification,
/// lengths, checksums, sequence numbers and payload; other ports make
/// other signatures. Both ways of hashing: Ethernet (with a VLAN tag or
/// none) and IPv4 without options or IPv6, and the bytewise one (options,
/// three tags).
#[test]
fn a_flows_packets_share_a_signature() {
    use super::key::signature;
    // Offsets of the IP header, the TCP header, and the bytes that change
    // along a flow (relative to them).
    let mut v4 = vec![0u8; 80];
    v4[12..14].copy_from_slice(&[0x08, 0x00]);
    v4[14] = 0x45;
    v4[14 + 9] = 6;
    let mut vlan = vec![0u8; 84];
    vlan[12..18].copy_from_slice(&[0x81, 0x00, 0x00, 0x07, 0x08, 0x00]);
    vlan[18] = 0x45;
    vlan[18 + 9] = 6;
    let mut v6 = vec![0u8; 100];
    v6[12..14].copy_from_slice(&[0x86, 0xdd]);
    v6[14] = 0x60;
    v6[14 + 6] = 6;
    // Bytewise: IPv4 with options, three tags.
    let mut options = vec![0u8; 80];
    options[12..14].copy_from_slice(&[0x08, 0x00]);
    options[14] = 0x46;
    options[14 + 9] = 6;
    let mut tags = vec![0u8; 92];
    for t in 0..3 {
        tags[12 + 4 * t..14 + 4 * t].copy_from_slice(&[0x88, 0xa8]);
    }
    tags[24..26].copy_from_slice(&[0x08, 0x00]);
    tags[26] = 0x45;
    tags[26 + 9] = 6;
    let cases = [
        (v4, 14, 34, &[2usize, 3, 4, 5, 10, 11][..]),
        (vlan, 18, 38, &[2, 3, 4, 5, 10, 11]),
        (v6, 14, 54, &[4, 5]),
        (options, 14, 38, &[2, 3, 4, 5, 10, 11]),
        (tags, 26, 46, &[2, 3, 4, 5, 10, 11]),
    ];
    for (pkt, l3, l4, varying) in cases {
        // Any length: no reads past the packet.
        for n in 0..pkt.len() {
            signature(&pkt[..n]);
        }
        let sig = signature(&pkt);
        let mut other = pkt.clone();
        for &o in varying {
            other[l3 + o] ^= 0x5a;
        }
        // Sequence and acknowledgement numbers, window, checksum, payload.
        for o in (4..12).chain(14..18).chain(20..30) {
            other[l4 + o] ^= 0xa5;
        }
        assert_eq!(signature(&other), sig, "{pkt:?}");
        let ports: std::collections::HashSet<u64> = (0..16u8)
            .map(|p| {
                let mut q = pkt.clone();
                q[l4 + 1] = p;
                signature(&q)
            })
            .collect();
        assert_eq!(ports.len(), 16, "{pkt:?}");
    }
}
