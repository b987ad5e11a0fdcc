//! Every program run alone, one after another, each with its own state:
//! the model of CSPF and BPF, and the meaning that [`crate::MpfSet`] keeps.

use crate::{ms, Config, Delivery, FilterId, PendingPacket, Stats};
use rustc_hash::FxHashMap;
use sluice_bpf::mpf::{MpfEnv, MpfProgram, MpfVerdict};
use std::collections::VecDeque;
use std::sync::Arc;

/// One filter's registered data, for [`MpfEnv`].
#[derive(Debug, Default)]
struct Store {
    map: FxHashMap<Box<[u32]>, u64>,
    clock: u64,
    registered: u64,
    /// Size after the last sweep of expired entries.
    swept: usize,
}

impl MpfEnv for Store {
    fn register(&mut self, data: &[u32], timeout_ms: u32) {
        self.map
            .insert(data.into(), self.clock.saturating_add(ms(timeout_ms)));
        self.registered += 1;
    }

    fn lookup(&mut self, data: &[u32]) -> bool {
        self.map.get(data).is_some_and(|&e| e >= self.clock)
    }
}

impl Store {
    /// Forgets expired entries when the table has doubled since the last
    /// sweep; returns how many.
    fn sweep(&mut self) -> u64 {
        if self.map.len() < 64 || self.map.len() < 2 * self.swept {
            return 0;
        }
        let before = self.map.len();
        let clock = self.clock;
        self.map.retain(|_, &mut e| e >= clock);
        self.swept = self.map.len();
        (before - self.map.len()) as u64
    }
}

#[derive(Debug)]
struct Solo {
    id: FilterId,
    prog: MpfProgram,
    store: Store,
    /// Postponed packets and the packet time their wait ends.
    pending: VecDeque<(Arc<PendingPacket>, u64)>,
}

/// The programs of a set run one by one, each with its own registered data
/// and its own pending queue of [`Config::max_pending`] packets. Same API
/// as [`crate::MpfSet`]; what each filter receives is the same too (as long
/// as no queue fills: the set has one queue, this has one per filter).
///
/// ```
/// use sluice_bpf::mpf::MpfProgram;
/// use sluice_mpf::Separate;
/// let mut s = Separate::default();
/// let id = s.insert(&MpfProgram::parse("ld #pktlen\nret a\n").unwrap());
/// let mut out = Vec::new();
/// s.process(&[0; 10], 10, 0, &mut out);
/// assert_eq!((out[0].filter, out[0].snaplen), (id, 10));
/// ```
#[derive(Debug, Default)]
pub struct Separate {
    config: Config,
    filters: Vec<Solo>,
    next_id: u32,
    clock: u64,
    stats: Stats,
}

impl Separate {
    /// An empty set with these limits.
    ///
    /// ```
    /// let s = sluice_mpf::Separate::new(sluice_mpf::Config { max_pending: 4 });
    /// assert_eq!(s.stats().filters, 0);
    /// ```
    pub fn new(config: Config) -> Separate {
        Separate {
            config,
            ..Separate::default()
        }
    }

    /// Installs a program.
    ///
    /// ```
    /// use sluice_bpf::mpf::MpfProgram;
    /// let mut s = sluice_mpf::Separate::default();
    /// let a = s.insert(&MpfProgram::parse("ret #1\n").unwrap());
    /// let b = s.insert(&MpfProgram::parse("ret #1\n").unwrap());
    /// assert_ne!(a, b);
    /// ```
    pub fn insert(&mut self, prog: &MpfProgram) -> FilterId {
        let id = FilterId(self.next_id);
        self.next_id = self.next_id.checked_add(1).expect("more than 2^32 filters");
        self.filters.push(Solo {
            id,
            prog: prog.clone(),
            store: Store::default(),
            pending: VecDeque::new(),
        });
        id
    }

    /// Removes a filter; `false` if it is not installed.
    ///
    /// ```
    /// assert!(!sluice_mpf::Separate::default().remove(sluice_mpf::FilterId(0)));
    /// ```
    pub fn remove(&mut self, id: FilterId) -> bool {
        match self.filters.binary_search_by_key(&id, |s| s.id) {
            Ok(p) => {
                let solo = self.filters.remove(p);
                self.stats.registered += solo.store.registered;
                true
            }
            Err(_) => false,
        }
    }

    /// Same as [`crate::MpfSet::process`], by running every program.
    ///
    /// ```
    /// use sluice_bpf::mpf::MpfProgram;
    /// let mut s = sluice_mpf::Separate::default();
    /// s.insert(&MpfProgram::parse("postpone #1\n").unwrap());
    /// let mut out = Vec::new();
    /// s.process(&[], 0, 0, &mut out);
    /// assert_eq!(s.stats().pending, 1);
    /// ```
    pub fn process(&mut self, pkt: &[u8], wirelen: u32, ts_ns: u64, out: &mut Vec<Delivery>) {
        out.clear();
        let seq = self.stats.packets;
        self.stats.packets += 1;
        self.clock = self.clock.max(ts_ns);
        let clock = self.clock;
        let mut shared: Option<Arc<PendingPacket>> = None;
        let mut postponed = false;
        for solo in &mut self.filters {
            solo.store.clock = clock;
            self.stats.data_expired += solo.store.sweep();
            let before = solo.pending.len();
            solo.pending.retain(|&(_, expiry)| expiry >= clock);
            self.stats.pending_expired += (before - solo.pending.len()) as u64;
            let mut wait = None;
            match solo.prog.run(pkt, wirelen, &mut solo.store) {
                MpfVerdict::Return(0) => {}
                MpfVerdict::Return(snaplen) => out.push(Delivery {
                    filter: solo.id,
                    snaplen,
                    seq,
                    late: None,
                }),
                MpfVerdict::Postpone { timeout_ms } => wait = Some(timeout_ms),
            }
            let store = &mut solo.store;
            let prog = &solo.prog;
            solo.pending
                .retain(|(p, _)| match prog.run(&p.data, p.wirelen, store) {
                    MpfVerdict::Postpone { .. } => true,
                    MpfVerdict::Return(0) => false,
                    MpfVerdict::Return(snaplen) => {
                        out.push(Delivery {
                            filter: solo.id,
                            snaplen,
                            seq: p.seq,
                            late: Some(p.clone()),
                        });
                        false
                    }
                });
            if let Some(t) = wait {
                if solo.pending.len() >= self.config.max_pending {
                    self.stats.pending_dropped_full += 1;
                } else {
                    let p = shared.get_or_insert_with(|| {
                        Arc::new(PendingPacket {
                            seq,
                            ts_ns,
                            wirelen,
                            data: pkt.into(),
                        })
                    });
                    solo.pending
                        .push_back((p.clone(), clock.saturating_add(ms(t))));
                    postponed = true;
                }
            }
        }
        self.stats.postponed += postponed as u64;
    }

    /// The counters (`groups` is the number of filters; `pending` counts
    /// each filter's queue entries).
    ///
    /// ```
    /// assert_eq!(sluice_mpf::Separate::default().stats().groups, 0);
    /// ```
    pub fn stats(&self) -> Stats {
        Stats {
            filters: self.filters.len(),
            groups: self.filters.len(),
            collapsed_filters: 0,
            pending: self.filters.iter().map(|s| s.pending.len()).sum(),
            registered: self.stats.registered
                + self.filters.iter().map(|s| s.store.registered).sum::<u64>(),
            ..self.stats
        }
    }
}
