//! Accepted packets handed from the workers to the writing thread, and
//! merged back into timestamp order.
//!
//! The rule: a packet goes out only when no worker can still hand over an
//! older one (each worker says how far its packets have got: its
//! horizon), so one output file is in timestamp order whatever ring each
//! packet came through.

use std::collections::VecDeque;

/// Packets a worker hands over at once: one ring block's accepted ones.
pub(crate) struct Batch {
    pub(crate) worker: usize,
    /// No packet of this worker still to come is older than this
    /// (nanoseconds since 1970).
    pub(crate) horizon: i128,
    /// Packets the worker saw (accepted or not) since its last batch.
    pub(crate) seen: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) items: Vec<Item>,
    pub(crate) ids: Vec<u32>,
}

/// One accepted packet of a [`Batch`].
#[derive(Clone, Copy)]
pub(crate) struct Item {
    pub(crate) ts_sec: i64,
    pub(crate) ts_nsec: u32,
    pub(crate) wirelen: u32,
    pub(crate) data: (u32, u32),
    pub(crate) ids: (u32, u32),
}

impl Item {
    pub(crate) fn ts(&self) -> i128 {
        i128::from(self.ts_sec) * 1_000_000_000 + i128::from(self.ts_nsec)
    }
}

/// Per-worker queues of accepted packets, merged by timestamp.
pub(crate) struct Merge {
    queues: Vec<VecDeque<(Batch, usize)>>,
    horizons: Vec<i128>,
}

impl Merge {
    pub(crate) fn new(n: usize) -> Merge {
        Merge {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            horizons: vec![i128::MIN; n],
        }
    }

    pub(crate) fn push(&mut self, b: Batch) {
        let w = b.worker;
        self.horizons[w] = self.horizons[w].max(b.horizon);
        if !b.items.is_empty() {
            self.queues[w].push_back((b, 0));
        }
    }

    /// A worker has ended: nothing more comes from it.
    pub(crate) fn done(&mut self, w: usize) {
        self.horizons[w] = i128::MAX;
    }

    /// Hand `out` every packet no worker can still precede (all of them
    /// with `all`), oldest first.
    pub(crate) fn drain<E>(
        &mut self,
        all: bool,
        mut out: impl FnMut(&Item, &[u8], &[u32]) -> Result<(), E>,
    ) -> Result<(), E> {
        let limit = if all {
            i128::MAX
        } else {
            self.horizons.iter().copied().min().unwrap_or(i128::MAX)
        };
        loop {
            let mut best: Option<(usize, i128)> = None;
            for (w, q) in self.queues.iter().enumerate() {
                if let Some((b, at)) = q.front() {
                    let ts = b.items[*at].ts();
                    if ts <= limit && best.map_or(true, |(_, t)| ts < t) {
                        best = Some((w, ts));
                    }
                }
            }
            let Some((w, _)) = best else {
                return Ok(());
            };
            let q = &mut self.queues[w];
            let (b, at) = q.front_mut().expect("a queue with a packet");
            let item = b.items[*at];
            let ids = &b.ids[item.ids.0 as usize..(item.ids.0 + item.ids.1) as usize];
            let r = out(&item, &b.bytes, ids);
            *at += 1;
            if *at == b.items.len() {
                q.pop_front();
            }
            r?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(worker: usize, horizon: i128, stamps: &[i64]) -> Batch {
        Batch {
            worker,
            horizon,
            seen: stamps.len() as u64,
            bytes: Vec::new(),
            items: stamps
                .iter()
                .map(|&s| Item {
                    ts_sec: s,
                    ts_nsec: 0,
                    wirelen: 60,
                    data: (0, 0),
                    ids: (0, 0),
                })
                .collect(),
            ids: Vec::new(),
        }
    }

    fn drain(m: &mut Merge, all: bool) -> Vec<i64> {
        let mut got = Vec::new();
        m.drain(all, |i, _, _| {
            got.push(i.ts_sec);
            Ok::<(), ()>(())
        })
        .unwrap();
        got
    }

    #[test]
    fn merges_workers_in_timestamp_order_up_to_the_horizon() {
        let s = 1_000_000_000i128;
        let mut m = Merge::new(2);
        m.push(batch(0, 5 * s, &[1, 4, 5]));
        // Worker 1 has said nothing yet: nothing can go.
        assert!(drain(&mut m, false).is_empty());
        m.push(batch(1, 3 * s, &[2, 3]));
        assert_eq!(drain(&mut m, false), [1, 2, 3]);
        m.push(batch(1, 9 * s, &[6]));
        assert_eq!(drain(&mut m, false), [4, 5]);
        m.done(0);
        assert_eq!(drain(&mut m, false), [6]);
        m.push(batch(1, 10 * s, &[7]));
        assert_eq!(drain(&mut m, true), [7]);
    }
}
