//! The merged classifier against each filter run alone, on the shared
//! captures: every filter's verdict from the merged structure must equal its
//! own (which the conformance tests tie to libpcap's).

use sluice::LinkType;
use sluice_classifier::merged::{Compiled, Merged, Scratch};
use sluice_classifier::Classifier;
use sluice_testsupport::corpus;
use std::sync::Arc;

/// The Ethernet packets of every `every`th corpus capture.
fn packets(every: usize) -> Vec<(Vec<u8>, u32)> {
    corpus::pcaps()
        .iter()
        .step_by(every)
        .flat_map(corpus::packets)
        .filter(|p| p.linktype == 1)
        .map(|p| (p.data, p.wirelen))
        .collect()
}

#[test]
fn merged_verdicts_equal_each_filter_alone() {
    let Some(exprs) = corpus::lines("expressions.txt") else {
        corpus::skipped("classifier");
        return;
    };
    let pkts = packets(3);
    let filters: Vec<sluice_ir::Filter> = exprs
        .iter()
        .filter_map(|e| sluice_pcap::compile(e, LinkType::EN10MB, 262144).ok())
        .collect();
    let compiled: Vec<Compiled> = filters.iter().map(|f| Compiled::new(f.clone())).collect();
    let merged_count = compiled.iter().filter(|c| c.paths().is_some()).count();
    let mut m = Merged::default();
    for (i, c) in compiled.iter().enumerate() {
        m.insert(i as u32, c, 0);
    }
    println!(
        "{} filters: {} merged into {} groups, {} run whole; {} packets",
        filters.len(),
        merged_count,
        m.groups(),
        m.whole(),
        pkts.len()
    );
    let mut s = Scratch::default();
    let mut got = Vec::new();
    let mut batch_out = vec![Vec::new(); 16];
    for chunk in pkts.chunks(16) {
        let refs: Vec<(&[u8], u32)> = chunk.iter().map(|(d, w)| (&d[..], *w)).collect();
        m.classify_batch(&refs, &mut s, &mut batch_out[..chunk.len()]);
        for (k, (pkt, wirelen)) in chunk.iter().enumerate() {
            m.classify(pkt, *wirelen, &mut s, &mut got);
            let want: Vec<u32> = filters
                .iter()
                .enumerate()
                .filter(|(_, f)| f.run(pkt, *wirelen) != 0)
                .map(|(i, _)| i as u32)
                .collect();
            assert_eq!(got, want, "packet {pkt:02x?}");
            assert_eq!(batch_out[k], want, "batch, packet {pkt:02x?}");
            let first = m.classify_first(pkt, *wirelen, &mut s);
            assert_eq!(first, want.first().copied());
        }
    }
    assert!(merged_count * 10 > filters.len() * 9, "most filters merge");
}

#[test]
fn insert_and_remove_in_any_order_equals_building_from_scratch() {
    let Some(exprs) = corpus::lines("expressions.txt") else {
        corpus::skipped("classifier");
        return;
    };
    let pkts = packets(11);
    let compiled: Vec<Arc<Compiled>> = exprs
        .iter()
        .step_by(3)
        .filter_map(|e| sluice_pcap::compile(e, LinkType::EN10MB, 262144).ok())
        .map(|f| Arc::new(Compiled::new(f)))
        .collect();
    let mut c = Classifier::new();
    let r = c.reader();
    let mut live: Vec<(sluice_classifier::FilterId, usize)> = Vec::new();
    let mut x: u64 = 7;
    for round in 0..6 {
        for _ in 0..40 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            let i = (x >> 33) as usize % compiled.len();
            if x % 3 == 0 && !live.is_empty() {
                let (id, _) = live.remove((x >> 7) as usize % live.len());
                c.remove(id);
            } else {
                live.push((c.insert_compiled(compiled[i].clone(), 0), i));
            }
        }
        c.publish();
        // A fresh build of the same live set.
        let mut fresh = Merged::default();
        for (id, i) in &live {
            fresh.insert(id.0, &compiled[*i], 0);
        }
        let mut s = Scratch::default();
        let mut want = Vec::new();
        for (pkt, w) in &pkts {
            fresh.classify(pkt, *w, &mut s, &mut want);
            let got: Vec<u32> = r.classify(pkt, *w).into_iter().map(|f| f.0).collect();
            assert_eq!(got, want, "round {round}");
        }
    }
}

#[test]
fn readers_never_see_a_torn_classifier() {
    // Readers on other threads classify while the writer inserts and removes;
    // every answer must be one the filters could give (a subset of the ids
    // ever installed, each of which matches the packet).
    use sluice_ir::{Filter, Pred, Size, Val};
    let mut c = Classifier::new();
    let port = |p: u32| Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1);
    let base = c.insert(&port(1), 0);
    c.publish();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let progress: Vec<Arc<std::sync::atomic::AtomicU64>> = (0..2)
        .map(|_| Arc::new(std::sync::atomic::AtomicU64::new(0)))
        .collect();
    let mut threads = Vec::new();
    for t in 0..2u32 {
        let r = c.reader();
        let stop = stop.clone();
        let done = progress[t as usize].clone();
        threads.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p = (n as u32 + t) % 64;
                let pkt = [0, 0, (p >> 8) as u8, p as u8];
                for id in r.classify(&pkt, 4) {
                    // Filter i (i >= 1) was keyed on port i + 1; filter 0 on port 1.
                    let want_port = if id.0 == 0 { 1 } else { id.0 + 1 };
                    assert_eq!(want_port, p, "filter {id:?} on port {p}");
                }
                n += 1;
            }
            n
        }));
    }
    let mut ids = Vec::new();
    // Wait until every reader is running, so the changes race with them.
    while progress
        .iter()
        .any(|p| p.load(std::sync::atomic::Ordering::Relaxed) < 100)
    {
        std::thread::yield_now();
    }
    for k in 2..64u32 {
        ids.push(c.insert_keyed(base, &[k], 0).unwrap());
        if k % 8 == 0 {
            c.publish();
        }
        if k % 5 == 0 {
            c.remove(ids.remove(0));
        }
    }
    c.publish();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in threads {
        assert!(t.join().unwrap() > 0);
    }
}

#[test]
fn merged_verdicts_equal_alone_for_generated_combinations() {
    // New filters made by combining corpus expressions with and/or/not,
    // merged together with priorities, checked packet by packet.
    let Some(exprs) = corpus::lines("expressions.txt") else {
        corpus::skipped("classifier");
        return;
    };
    let pkts = packets(5);
    let exprs: Vec<String> = exprs
        .into_iter()
        .filter(|e| sluice_pcap::compile(e, LinkType::EN10MB, 262144).is_ok())
        .collect();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut pick = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut filters = Vec::new();
    while filters.len() < 300 {
        let a = &exprs[pick() as usize % exprs.len()];
        let b = &exprs[pick() as usize % exprs.len()];
        let text = match pick() % 4 {
            0 => format!("({a}) and ({b})"),
            1 => format!("({a}) or ({b})"),
            2 => format!("not ({a}) and ({b})"),
            _ => format!("({a}) or not ({b})"),
        };
        // Keep what compiles and is not too slow to run alone on every packet.
        if let Ok(f) = sluice_pcap::compile(&text, LinkType::EN10MB, 262144) {
            filters.push((text, f, (pick() % 3) as i32));
        }
    }
    let mut m = Merged::default();
    for (i, (_, f, prio)) in filters.iter().enumerate() {
        m.insert(i as u32, &Compiled::new(f.clone()), *prio);
    }
    println!(
        "{} generated filters: {} groups, {} run whole; {} packets",
        filters.len(),
        m.groups(),
        m.whole(),
        pkts.len()
    );
    // The same set as machine code, one packet at a time and in batches.
    let native = sluice_native::merged::NativeMerged::from_merged(m.clone());
    let mut s = Scratch::default();
    let mut got = Vec::new();
    let mut firsts = Vec::new();
    let mut alls = Vec::new();
    for (pkt, wirelen) in &pkts {
        m.classify(pkt, *wirelen, &mut s, &mut got);
        let want: Vec<u32> = filters
            .iter()
            .enumerate()
            .filter(|(_, (_, f, _))| f.run(pkt, *wirelen) != 0)
            .map(|(i, _)| i as u32)
            .collect();
        assert_eq!(got, want, "packet {pkt:02x?}");
        native.classify(pkt, *wirelen, &mut s, &mut got);
        assert_eq!(got, want, "native, packet {pkt:02x?}");
        // The winner: highest priority, then lowest id.
        let first = want
            .iter()
            .copied()
            .max_by_key(|&i| (filters[i as usize].2, std::cmp::Reverse(i)));
        assert_eq!(m.classify_first(pkt, *wirelen, &mut s), first);
        assert_eq!(native.classify_first(pkt, *wirelen, &mut s), first);
        firsts.push(first);
        alls.push(want);
    }
    let refs: Vec<(&[u8], u32)> = pkts.iter().map(|(p, w)| (&p[..], *w)).collect();
    let mut batch_firsts = vec![None; refs.len()];
    native.classify_first_batch(&refs, &mut s, &mut batch_firsts);
    assert_eq!(batch_firsts, firsts, "native classify_first_batch");
    let mut batch_alls = vec![Vec::new(); refs.len()];
    native.classify_batch(&refs, &mut s, &mut batch_alls);
    assert_eq!(batch_alls, alls, "native classify_batch");
}
