//! The data path: each packet the merged classifier accepts is stored once
//! in the packet buffer of each flow group that wants it, and its position
//! pushed to the index buffer of each flow that accepted it.
//!
//! The rule: this is the only writer of every group's packet buffer and
//! every flow's index buffer (one capture thread per interface), and it
//! never waits for a client: under slow-reader preference a full buffer
//! drops the packet for the flows that wanted it (counted), and a client
//! that has not moved for the stall timeout is cut loose (counted) so
//! that it holds back no one else. Every packet a flow accepted is
//! counted, so `delivered + lost = accepted` for each flow.

use arc_swap::ArcSwap;
use sluice_capture::Packet;
use sluice_flow::buffer::{IBuf, Meta, PBuf, Preference};
use sluice_shm::Wake;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Routes per shard of filter ids: a change copies one shard only.
const SHARD: usize = 1024;

/// One flow as the data path sees it.
#[derive(Debug)]
pub(crate) struct Member {
    /// The daemon's number for the flow (for the status).
    pub(crate) flow: u64,
    /// The flow's index buffer.
    pub(crate) ibuf: Arc<IBuf>,
    /// Wakes the flow's reader.
    pub(crate) wake: Arc<Wake>,
    /// Cut loose after the stall timeout: gets nothing more.
    pub(crate) stalled: AtomicBool,
    /// The reader position last seen, and when it was first seen there
    /// (nanoseconds since the daemon started), for the stall timeout.
    watch: Mutex<(u64, u64)>,
}

impl Member {
    pub(crate) fn new(flow: u64, ibuf: Arc<IBuf>, wake: Arc<Wake>) -> Member {
        Member {
            flow,
            ibuf,
            wake,
            stalled: AtomicBool::new(false),
            watch: Mutex::new((u64::MAX, 0)),
        }
    }
}

/// A flow group: the flows of one user on one interface, sharing one
/// packet buffer.
#[derive(Debug)]
pub(crate) struct Group {
    /// The packet buffer (in a shared region).
    pub(crate) pbuf: Arc<PBuf>,
    /// The oldest position a member still needs, as last computed (only
    /// grows; the capture thread alone writes it).
    oldest: AtomicU64,
    /// The members now.
    pub(crate) members: ArcSwap<Vec<Arc<Member>>>,
    /// Members cut loose for stalling.
    pub(crate) stalls: AtomicU64,
    /// The member that held the oldest packet when the buffer was last
    /// found full.
    blocker: Mutex<Option<Arc<Member>>>,
}

impl Group {
    pub(crate) fn new(pbuf: PBuf) -> Group {
        Group {
            pbuf: Arc::new(pbuf),
            oldest: AtomicU64::new(0),
            members: ArcSwap::from_pointee(Vec::new()),
            stalls: AtomicU64::new(0),
            blocker: Mutex::new(None),
        }
    }

    /// The oldest position any member still needs (the write position
    /// when none needs anything), and the member that needs it.
    fn compute_oldest(&self) -> (u64, Option<Arc<Member>>) {
        let mut m = self.pbuf.written();
        let mut who = None;
        for member in self.members.load().iter() {
            if member.stalled.load(Ordering::Relaxed) {
                continue;
            }
            if let Some(o) = member.ibuf.oldest_needed() {
                if o < m {
                    m = o;
                    who = Some(member.clone());
                }
            }
        }
        (m, who)
    }

    /// Store a packet once; its position, or `None` when the buffer is
    /// full of packets a member still needs (slow-reader preference).
    fn store(
        &self,
        meta: &Meta,
        data: &[u8],
        clock: &Clock,
        stall: Option<Duration>,
    ) -> Option<u64> {
        let slots = self.pbuf.slots() as u64;
        let mut oldest = self.oldest.load(Ordering::Relaxed);
        if self.pbuf.preference() == Preference::Slow
            && self.pbuf.written().saturating_sub(oldest) >= slots
        {
            // Full as last seen: while the member that held the oldest
            // packet still holds it, the buffer stays full (one look,
            // not one per member); once it moves, look at every member.
            let mut blocker = self.blocker.lock().unwrap_or_else(|e| e.into_inner());
            let still = blocker.as_ref().is_some_and(|b| {
                !b.stalled.load(Ordering::Relaxed) && b.ibuf.oldest_needed() == Some(oldest)
            });
            if !still {
                let (o, who) = self.compute_oldest();
                oldest = o;
                *blocker = who;
                self.oldest.store(oldest, Ordering::Relaxed);
            }
        }
        let pos = self.pbuf.store(meta, data, oldest);
        if pos.is_none() {
            if let Some(limit) = stall {
                self.cut_stalled(oldest, clock.now(), limit);
            }
        }
        pos
    }

    /// Members holding position `oldest` whose reader has not moved for
    /// `limit` are cut loose.
    fn cut_stalled(&self, oldest: u64, now: u64, limit: Duration) {
        // The member that holds the buffer (others at the same place are
        // found when it is cut and the next look runs over all).
        let blocker = self
            .blocker
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for m in blocker.iter() {
            if m.stalled.load(Ordering::Relaxed) || m.ibuf.oldest_needed() != Some(oldest) {
                continue;
            }
            let r = m.ibuf.slowest_reader();
            let mut w = m.watch.lock().unwrap_or_else(|e| e.into_inner());
            if w.0 != r {
                *w = (r, now);
            } else if now.saturating_sub(w.1) >= limit.as_nanos() as u64 {
                m.stalled.store(true, Ordering::Relaxed);
                m.ibuf.unregister_all();
                m.ibuf.finish();
                let _ = m.wake.signal();
                self.stalls.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Where a filter id's packets go: the flow, and the result its index
/// entry carries (which of the flow's filters, from 1).
#[derive(Debug)]
pub(crate) struct Route {
    pub(crate) group: Arc<Group>,
    pub(crate) member: Arc<Member>,
    pub(crate) result: u32,
}

/// Filter ids to routes, in shards (see [`SHARD`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Routes {
    shards: Vec<Arc<Vec<Option<Arc<Route>>>>>,
}

impl Routes {
    fn get(&self, id: u32) -> Option<&Arc<Route>> {
        let id = id as usize;
        self.shards.get(id / SHARD)?.get(id % SHARD)?.as_ref()
    }

    /// The routes with filter `id` going to `route` (or nowhere).
    pub(crate) fn with(&self, id: u32, route: Option<Arc<Route>>) -> Routes {
        let (s, i) = (id as usize / SHARD, id as usize % SHARD);
        let mut shards = self.shards.clone();
        if shards.len() <= s {
            shards.resize_with(s + 1, || Arc::new(vec![None; SHARD]));
        }
        let mut shard = (*shards[s]).clone();
        shard[i] = route;
        shards[s] = Arc::new(shard);
        Routes { shards }
    }
}

/// Nanoseconds since the daemon started.
#[derive(Debug)]
pub(crate) struct Clock(Instant);

impl Clock {
    pub(crate) fn new() -> Clock {
        Clock(Instant::now())
    }

    fn now(&self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }
}

/// Counts of one interface's data path.
#[derive(Debug, Default)]
pub(crate) struct PathCounts {
    /// Packets the classifier accepted for at least one flow.
    pub(crate) packets: AtomicU64,
    /// (packet, flow) deliveries made.
    pub(crate) deliveries: AtomicU64,
    /// Sleeping readers woken (one eventfd write each).
    pub(crate) wakeups: AtomicU64,
}

/// The capture thread's side of one interface.
pub(crate) struct Deliver {
    pub(crate) routes: Arc<ArcSwap<Routes>>,
    pub(crate) stall: Option<Duration>,
    pub(crate) clock: Arc<Clock>,
    pub(crate) counts: Arc<PathCounts>,
    /// The groups this packet was stored in, and where.
    stored: Vec<(*const Group, Option<u64>)>,
    /// The flows this packet has reached (a flow of several filters gets
    /// it once).
    reached: Vec<*const Member>,
    /// Sleeping readers to wake when this read of the rings is handed
    /// over ([`Deliver::handed`]): one wake-up per read, not per packet.
    to_wake: Vec<Arc<Member>>,
}

impl Deliver {
    pub(crate) fn new(
        routes: Arc<ArcSwap<Routes>>,
        stall: Option<Duration>,
        clock: Arc<Clock>,
        counts: Arc<PathCounts>,
    ) -> Deliver {
        Deliver {
            routes,
            stall,
            clock,
            counts,
            stored: Vec::new(),
            reached: Vec::new(),
            to_wake: Vec::new(),
        }
    }

    /// The packets of one read of the rings are all handed over: wake the
    /// readers that went to sleep meanwhile.
    pub(crate) fn handed(&mut self) {
        if self.to_wake.is_empty() {
            return;
        }
        let n = self.to_wake.len() as u64;
        for m in self.to_wake.drain(..) {
            let _ = m.wake.signal();
        }
        self.counts.wakeups.fetch_add(n, Ordering::Relaxed);
    }

    /// Hand a packet to the flows of `ids` (sleeping readers are woken at
    /// [`Deliver::handed`]).
    pub(crate) fn packet(&mut self, pkt: &Packet<'_>, ids: &[u32]) {
        let routes = self.routes.load();
        let meta = Meta {
            ts_sec: pkt.ts_sec,
            ts_nsec: pkt.ts_nsec,
            caplen: pkt.caplen,
            wirelen: pkt.wirelen,
            linktype: pkt.linktype,
            snaplen: pkt.snaplen,
            interface: pkt.interface,
        };
        self.stored.clear();
        self.reached.clear();
        let mut delivered = 0;
        for &id in ids {
            let Some(route) = routes.get(id) else {
                continue;
            };
            let m = &route.member;
            // Ids come in increasing order, and a flow's filters were
            // inserted in its order: the first to reach it is its first
            // filter that accepts.
            let mp = Arc::as_ptr(m);
            if self.reached.contains(&mp) {
                continue;
            }
            self.reached.push(mp);
            m.ibuf.count_accepted();
            if m.stalled.load(Ordering::Relaxed) {
                m.ibuf.count_drop();
                continue;
            }
            let g = Arc::as_ptr(&route.group);
            let pos = match self.stored.iter().find(|(p, _)| *p == g) {
                Some((_, pos)) => *pos,
                None => {
                    let pos = route.group.store(&meta, pkt.data, &self.clock, self.stall);
                    self.stored.push((g, pos));
                    pos
                }
            };
            match pos {
                None => m.ibuf.count_drop(),
                Some(pos) => {
                    if m.ibuf.push(pos, route.result) {
                        delivered += 1;
                        if m.ibuf.take_sleeper() {
                            self.to_wake.push(m.clone());
                        }
                    }
                }
            }
        }
        if delivered > 0 {
            self.counts.packets.fetch_add(1, Ordering::Relaxed);
            self.counts
                .deliveries
                .fetch_add(delivered, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_flow::buffer::Reader;

    fn member(flow: u64, pref: Preference) -> Arc<Member> {
        let ibuf = Arc::new(IBuf::new(4, pref).unwrap());
        ibuf.register();
        Arc::new(Member::new(flow, ibuf, Arc::new(Wake::new().unwrap())))
    }

    #[test]
    fn one_copy_per_group_and_every_loss_counted() {
        let group = Arc::new(Group::new(PBuf::new(2, 64, Preference::Slow).unwrap()));
        let (a, b) = (member(1, Preference::Slow), member(2, Preference::Slow));
        group.members.store(Arc::new(vec![a.clone(), b.clone()]));
        let mut routes = Routes::default();
        for (id, m) in [(0, &a), (1, &b)] {
            let r = Route {
                group: group.clone(),
                member: m.clone(),
                result: 1,
            };
            routes = routes.with(id, Some(Arc::new(r)));
        }
        let mut d = Deliver::new(
            Arc::new(ArcSwap::from_pointee(routes)),
            None,
            Arc::new(Clock::new()),
            Arc::default(),
        );
        let pkt = Packet::new(1, 0, 1, &[9; 60]);
        for _ in 0..3 {
            d.packet(&pkt, &[0, 1]);
        }
        // Two slots, nobody reading: the third packet is lost to both.
        assert_eq!(group.pbuf.written(), 2);
        for m in [&a, &b] {
            assert_eq!((m.ibuf.accepted(), m.ibuf.drops()), (3, 1));
        }
        // a reads its two packets; b still holds the group back.
        let pbuf = group.pbuf.clone();
        let mut ra = Reader::adopt(pbuf.clone(), a.ibuf.clone(), 0, 1).unwrap();
        assert!(ra.next().is_some() && ra.next().is_some() && ra.next().is_none());
        d.packet(&pkt, &[0, 1]);
        assert_eq!((a.ibuf.drops(), group.pbuf.written()), (2, 2));
        let mut rb = Reader::adopt(pbuf, b.ibuf.clone(), 0, 1).unwrap();
        while rb.next().is_some() {}
        d.packet(&pkt, &[0, 1]);
        assert_eq!(group.pbuf.written(), 3);
        assert_eq!(ra.next().map(|p| p.data.len()), Some(60));
        // delivered + lost = accepted, for each.
        assert_eq!(ra.delivered() + a.ibuf.drops(), a.ibuf.accepted());
    }

    #[test]
    fn a_stalled_member_is_cut_loose() {
        let group = Arc::new(Group::new(PBuf::new(1, 64, Preference::Slow).unwrap()));
        let m = member(1, Preference::Slow);
        group.members.store(Arc::new(vec![m.clone()]));
        let routes = Routes::default().with(
            5,
            Some(Arc::new(Route {
                group: group.clone(),
                member: m.clone(),
                result: 1,
            })),
        );
        let mut d = Deliver::new(
            Arc::new(ArcSwap::from_pointee(routes)),
            Some(Duration::ZERO),
            Arc::new(Clock::new()),
            Arc::default(),
        );
        let pkt = Packet::new(1, 0, 1, &[1; 10]);
        for _ in 0..4 {
            d.packet(&pkt, &[5]);
        }
        assert!(m.stalled.load(Ordering::Relaxed));
        assert!(m.ibuf.finished());
        assert_eq!(group.stalls.load(Ordering::Relaxed), 1);
        assert_eq!(m.ibuf.accepted(), 4);
    }
}
