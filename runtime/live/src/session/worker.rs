//! One capture thread of a session: its ring, its classifier, and the
//! batches of accepted packets it hands to the session's thread.
//!
//! The rule: a worker never writes anything anywhere; it copies what its
//! classifier accepts into a batch, says how far its packets have got
//! (the horizon the merge waits for), and picks up a swapped filter
//! between two reads of its ring.

use super::merge::{Batch, Item};
use super::{Classify, Drain, Swap};
use crate::{Capture, KernelStats, LiveError};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What a worker sends.
pub(crate) enum Msg {
    Batch(Batch),
    Done {
        worker: usize,
        stats: Result<KernelStats, LiveError>,
        error: Option<LiveError>,
    },
}

/// One capture thread.
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) cap: Capture,
    /// Its kernel counts so far (received, dropped), for SIGUSR1.
    pub(crate) counts: Arc<[AtomicU64; 2]>,
    /// The filter last swapped in, and its number.
    pub(crate) swap: Arc<std::sync::Mutex<Option<Swap>>>,
    pub(crate) swapped: Arc<AtomicU64>,
    pub(crate) tx: SyncSender<Msg>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) classify: Classify,
    pub(crate) with_bytes: bool,
    pub(crate) block_timeout: Duration,
    pub(crate) poll: Duration,
    pub(crate) dropped: Arc<AtomicU64>,
}

/// Nanoseconds since 1970 now.
fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

impl Worker {
    pub(crate) fn run(mut self) {
        let mut ids = Vec::new();
        let mut counted = Instant::now();
        let mut drain = Drain::new(self.poll);
        let mut in_force = 0;
        // The last batch's sizes: the next one starts with room for as
        // much, so a busy link's batches are not grown copy by copy.
        let mut sizes = (0, 0, 0);
        let error = loop {
            if self.swapped.load(Ordering::Acquire) != in_force {
                let new = self.swap.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if let Some((n, make, kernel)) = new {
                    in_force = n;
                    if let Err(e) = self.cap.set_filter(kernel) {
                        break Some(e);
                    }
                    self.classify = make();
                }
            }
            let stopping = self.stop.load(Ordering::Relaxed);
            let wait = drain.wait(stopping, self.block_timeout);
            let mut batch = Batch {
                worker: self.index,
                horizon: 0,
                seen: 0,
                bytes: Vec::with_capacity(sizes.0),
                items: Vec::with_capacity(sizes.1),
                ids: Vec::with_capacity(sizes.2),
            };
            let (classify, with_bytes) = (&mut self.classify, self.with_bytes);
            let before = now_ns();
            let r = self.cap.dispatch(wait, |pkt| {
                batch.seen += 1;
                ids.clear();
                classify(pkt.data, pkt.wirelen, &mut ids);
                if !ids.is_empty() {
                    let data = if with_bytes {
                        let at = batch.bytes.len() as u32;
                        batch.bytes.extend_from_slice(pkt.data);
                        (at, pkt.data.len() as u32)
                    } else {
                        (0, 0)
                    };
                    let at = batch.ids.len() as u32;
                    batch.ids.extend_from_slice(&ids);
                    batch.items.push(Item {
                        ts_sec: pkt.ts_sec,
                        ts_nsec: pkt.ts_nsec,
                        wirelen: pkt.wirelen,
                        data,
                        ids: (at, ids.len() as u32),
                    });
                }
                true
            });
            // Packets still to come are in blocks that were still open
            // when the ring was last looked at, opened at most a block
            // timeout before.
            let slack = (self.block_timeout + Duration::from_millis(20)).as_nanos() as i128;
            let floor = before - slack;
            batch.horizon = batch.items.last().map_or(floor, |i| i.ts().max(floor));
            if counted.elapsed() >= Duration::from_millis(250) {
                counted = Instant::now();
                if let Ok(s) = self.cap.stats() {
                    self.counts[0].store(s.received, Ordering::Relaxed);
                    self.counts[1].store(s.dropped, Ordering::Relaxed);
                }
            }
            sizes = (batch.bytes.len(), batch.items.len(), batch.ids.len());
            let got = matches!(&r, Ok(d) if d.blocks > 0);
            let items = batch.items.len() as u64;
            match self.tx.try_send(Msg::Batch(batch)) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    self.dropped.fetch_add(items, Ordering::Relaxed);
                }
                Err(TrySendError::Disconnected(_)) => break None,
            }
            match r {
                Err(e) => break Some(e),
                Ok(_) if drain.finished(stopping, got) => break None,
                Ok(_) => {}
            }
        };
        let stats = self.cap.stats();
        let _ = self.tx.send(Msg::Done {
            worker: self.index,
            stats,
            error,
        });
    }
}
