//! The buffers under both preferences: writer and reader threads, wrap-
//! around, losses counted, MBuf snapshots.

use super::*;
use std::sync::Arc;

fn meta(len: usize) -> Meta {
    Meta {
        caplen: len as u32,
        wirelen: len as u32,
        ..Meta::default()
    }
}

/// The writer thread plays the group: it stores each packet in the
/// PBuf (with `R*` from the IBuf) and indexes it; packet `i` carries
/// `i` in its bytes so readers can check what they got.
fn writer(pbuf: &PBuf, ibuf: &IBuf, n: u64) -> (u64, u64) {
    let (mut written, mut dropped) = (0, 0);
    for i in 0..n {
        let bytes = i.to_le_bytes();
        let data: Vec<u8> = bytes
            .iter()
            .cycle()
            .take(40 + (i % 50) as usize)
            .copied()
            .collect();
        let oldest = ibuf.oldest_needed().unwrap_or(pbuf.written());
        if !ibuf.has_room() {
            ibuf.count_drop();
            dropped += 1;
            continue;
        }
        match pbuf.store(&meta(data.len()), &data, oldest) {
            Some(pos) => {
                assert!(ibuf.push(pos, (i as u32) | 1));
                written += 1;
            }
            None => {
                ibuf.count_drop();
                dropped += 1;
            }
        }
        if i % 1000 == 0 {
            std::thread::yield_now();
        }
    }
    ibuf.finish();
    (written, dropped)
}

fn reader(mut r: Reader, slow: bool) -> (u64, u64) {
    let mut last: Option<u64> = None;
    loop {
        let mut got = 0;
        while let Some(p) = r.next() {
            let i = u64::from_le_bytes(p.data[..8].try_into().unwrap());
            assert_eq!(p.data.len(), 40 + (i % 50) as usize);
            assert!(p.data.chunks(8).all(|c| c == &i.to_le_bytes()[..c.len()]));
            assert_eq!(p.result, (i as u32) | 1);
            assert!(last.map_or(true, |l| i > l), "order");
            last = Some(i);
            got += 1;
            if slow && got % 16 == 0 {
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
        }
        if r.at_end() {
            break;
        }
        r.wait_for(1, std::time::Duration::from_millis(10));
    }
    (r.delivered(), r.lost())
}

fn run(pref: Preference, slow_readers: &[bool], n: u64) {
    let pbuf = Arc::new(PBuf::new(64, 96, pref).unwrap());
    let ibuf = Arc::new(IBuf::new(64, pref).unwrap());
    let readers: Vec<Reader> = slow_readers
        .iter()
        .map(|_| Reader::new(pbuf.clone(), ibuf.clone(), 8).unwrap())
        .collect();
    let handles: Vec<_> = readers
        .into_iter()
        .zip(slow_readers)
        .map(|(r, &slow)| std::thread::spawn(move || reader(r, slow)))
        .collect();
    let (written, dropped) = writer(&pbuf, &ibuf, n);
    assert_eq!(written + dropped, n);
    assert_eq!(ibuf.drops(), dropped);
    for h in handles {
        let (delivered, lost) = h.join().unwrap();
        match pref {
            // SRP: every written packet reaches every reader.
            Preference::Slow => assert_eq!((delivered, lost), (written, 0)),
            // FRP: nothing dropped at the writer; each reader accounts
            // for every entry.
            Preference::Fast => {
                assert_eq!(dropped, 0);
                assert_eq!(
                    delivered + lost,
                    written,
                    "delivered {delivered} lost {lost}"
                );
            }
        }
    }
}

#[test]
fn srp_threads_balance() {
    run(Preference::Slow, &[false, true], 20_000);
}

#[test]
fn frp_threads_balance() {
    run(Preference::Fast, &[false, true], 20_000);
}

#[test]
fn srp_slow_reader_makes_writer_drop() {
    let pbuf = Arc::new(PBuf::new(4, 16, Preference::Slow).unwrap());
    let ibuf = Arc::new(IBuf::new(8, Preference::Slow).unwrap());
    let mut r = Reader::new(pbuf.clone(), ibuf.clone(), 1).unwrap();
    let (w, d) = {
        let mut w = 0;
        let mut d = 0;
        for i in 0..10u8 {
            let oldest = ibuf.oldest_needed().unwrap_or(pbuf.written());
            match pbuf.store(&meta(1), &[i], oldest) {
                Some(pos) => {
                    ibuf.push(pos, 1);
                    w += 1
                }
                None => {
                    ibuf.count_drop();
                    d += 1
                }
            }
        }
        (w, d)
    };
    assert_eq!((w, d), (4, 6));
    let got: Vec<u8> = std::iter::from_fn(|| r.next().map(|p| p.data[0])).collect();
    assert_eq!(got, [0, 1, 2, 3]);
    assert_eq!(ibuf.drops(), 6);
    assert_eq!(pbuf.drops(), 6);
}

#[test]
fn frp_wrap_counter_and_loss_like_the_seed() {
    // Reader at 50, writer wraps past it: everything it was about to
    // read is counted lost, never delivered stale.
    let pbuf = Arc::new(PBuf::new(100, 8, Preference::Fast).unwrap());
    let ibuf = Arc::new(IBuf::new(100, Preference::Fast).unwrap());
    let mut r = Reader::new(pbuf.clone(), ibuf.clone(), 10).unwrap();
    let put = |n: u64| {
        for _ in 0..n {
            let i = pbuf.written();
            let pos = pbuf.store(&meta(8), &i.to_le_bytes(), 0).unwrap();
            ibuf.push(pos, 1);
        }
    };
    put(50);
    for _ in 0..50 {
        r.next().unwrap();
    }
    put(350);
    assert_eq!(pbuf.wraps(), 4);
    let mut first = None;
    while let Some(p) = r.next() {
        first.get_or_insert(u64::from_le_bytes(p.data.try_into().unwrap()));
    }
    assert_eq!(first, Some(300));
    assert_eq!(r.lost(), 250);
    assert_eq!(r.delivered(), 150);
}

#[test]
fn mbuf_snapshot_is_consistent_under_updates() {
    let m = Arc::new(MBuf::new(4));
    let w = {
        let m = m.clone();
        std::thread::spawn(move || {
            for i in 0..200_000u32 {
                m.begin();
                for k in 0..4 {
                    m.set(k, i);
                }
                m.end();
            }
        })
    };
    for _ in 0..2000 {
        let s = m.snapshot();
        assert!(s.iter().all(|&x| x == s[0]), "{s:?}");
    }
    w.join().unwrap();
}
