//! `sluice split --count` of a pcap file on every core: the reader hands
//! batches of packets to threads that classify them with the one merged
//! classifier (each thread with its own scratch, flow cache and counts),
//! and the counts are summed at the end. A mapped file's packets go by
//! their places in it; others are copied into the batch.
//!
//! Rule: the same counts as the one-thread loop, which counts do not
//! depend on the order packets are classified in; used only where
//! nothing needs the packets in order (no `--out-dir`, `--first-match`,
//! `--verdicts` or fragment dispatch) and the file has one link type (a
//! pcap file). An interrupt or a bad record stops the reading; what was
//! read is classified and counted, and the status says what stopped it.

use crate::cli::{for_each_packet_declaring, Fail, Reader};
use sluice::split::{Merging, MergingScratch};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

/// Packets in one batch handed to a thread.
const BATCH: usize = 1024;

/// Packets per call to the classifier (which prefetches the ones ahead).
const SUB: usize = 32;

/// Batches waiting for a thread, at most (the reader waits beyond).
const QUEUED: usize = 8;

/// Packets for a thread: each one's start, end and wire length, in the
/// mapped file or, where the input is not mapped, in `data`, which holds
/// the packets copied out of the reader's buffer one after another.
#[derive(Default)]
struct Batch {
    data: Vec<u8>,
    packets: Vec<(usize, usize, u32)>,
}

impl Batch {
    fn clear(&mut self) {
        self.data.clear();
        self.packets.clear();
    }
}

/// Counting threads: one per core (the reader, which only copies
/// packets, shares them).
pub(super) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Read every packet of `reader` and count each filter's matches with
/// `merged` on `threads` threads: (the reading's status, the counts
/// indexed by filter, packets read).
pub(super) fn count(
    reader: &mut Reader,
    size: u64,
    merged: &Merging,
    filters: usize,
    threads: usize,
) -> (Result<(), Fail>, Vec<u64>, u64) {
    let (full_tx, full_rx) = mpsc::sync_channel::<Batch>(QUEUED);
    let (free_tx, free_rx) = mpsc::channel::<Batch>();
    let full_rx = Arc::new(Mutex::new(full_rx));
    let map = reader.mapping().cloned();
    let mut seen = 0u64;
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                let (full_rx, free_tx) = (full_rx.clone(), free_tx.clone());
                let map = map.clone();
                s.spawn(move || {
                    let mut counts = vec![0u64; filters];
                    let mut scratch = MergingScratch::default();
                    let mut out: Vec<Vec<u32>> = vec![Vec::new(); SUB];
                    loop {
                        let next = full_rx.lock().map(|rx| rx.recv());
                        let Ok(Ok(mut batch)) = next else {
                            return counts;
                        };
                        let bytes = match &map {
                            Some(m) => m.bytes(),
                            None => &batch.data[..],
                        };
                        let mut pkts: Vec<(&[u8], u32)> = Vec::with_capacity(SUB);
                        for part in batch.packets.chunks(SUB) {
                            pkts.clear();
                            for &(start, end, wirelen) in part {
                                pkts.push((bytes.get(start..end).unwrap_or_default(), wirelen));
                            }
                            merged.classify_batch(&pkts, &mut scratch, &mut out[..part.len()]);
                            for ids in &out[..part.len()] {
                                for &id in ids {
                                    counts[id as usize] += 1;
                                }
                            }
                        }
                        drop(pkts);
                        batch.clear();
                        let _ = free_tx.send(batch);
                    }
                })
            })
            .collect();
        drop(free_tx);
        let mut batch = Batch::default();
        let status = for_each_packet_declaring(
            reader,
            size,
            |_| Ok(()),
            |pkt| {
                let start = match &map {
                    Some(m) => m
                        .offset_of(pkt.data)
                        .ok_or_else(|| Fail("split: a packet outside the mapped file".into()))?,
                    None => {
                        batch.data.extend_from_slice(pkt.data);
                        batch.data.len() - pkt.data.len()
                    }
                };
                batch
                    .packets
                    .push((start, start + pkt.data.len(), pkt.wirelen));
                seen += 1;
                if batch.packets.len() == BATCH {
                    let next = free_rx.try_recv().unwrap_or_default();
                    let full = std::mem::replace(&mut batch, next);
                    if full_tx.send(full).is_err() {
                        return Err(Fail("split: a counting thread stopped".into()));
                    }
                }
                Ok(true)
            },
        );
        if !batch.packets.is_empty() {
            let _ = full_tx.send(batch);
        }
        drop(full_tx);
        let mut counts = vec![0u64; filters];
        let mut status = status;
        for w in workers {
            match w.join() {
                Ok(c) => counts.iter_mut().zip(c).for_each(|(a, b)| *a += b),
                Err(_) => status = Err(Fail("split: a counting thread failed".into())),
            }
        }
        (status, counts, seen)
    })
}
