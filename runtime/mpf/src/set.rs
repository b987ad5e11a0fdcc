//! The collapsed set: one program and one hash table per group of programs
//! that differ only in their key immediates.

use crate::{ms, Config, Delivery, FilterId, PendingPacket, Stats};
use rustc_hash::FxHashMap;
use sluice_bpf::mpf::{Ext, MpfProgram};
use sluice_bpf::{run_ext, ExtHook, ExtStep, Insn, Machine};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

/// Which filters of a group a run speaks for. Lists are sorted.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Cands {
    /// Every member.
    All,
    /// These members.
    Only(Vec<FilterId>),
    /// Every member but these.
    AllBut(Vec<FilterId>),
}

/// [`Cands`] limited to filters installed before the packet arrived
/// (ids below `limit`): a filter never sees packets older than itself.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CandSet {
    limit: u32,
    cands: Cands,
}

/// Scratch words used as a hash key: up to four inline (no pointer to
/// follow on a probe), more on the heap. Hashes and compares as the slice.
#[derive(Clone, Debug)]
enum Key {
    Small(u8, [u32; 4]),
    Large(Box<[u32]>),
}

impl Key {
    fn new(words: &[u32]) -> Key {
        if words.len() <= 4 {
            let mut w = [0; 4];
            w[..words.len()].copy_from_slice(words);
            Key::Small(words.len() as u8, w)
        } else {
            Key::Large(words.into())
        }
    }

    fn words(&self) -> &[u32] {
        match self {
            Key::Small(n, w) => &w[..*n as usize],
            Key::Large(b) => b,
        }
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.words() == other.words()
    }
}

impl Eq for Key {}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> std::cmp::Ordering {
        self.words().cmp(other.words())
    }
}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.words().hash(state)
    }
}

/// The filters of one key: one inline, more in a vector.
#[derive(Clone, Debug)]
enum Ids {
    One(FilterId),
    Many(Vec<FilterId>),
}

impl Ids {
    fn as_slice(&self) -> &[FilterId] {
        match self {
            Ids::One(id) => std::slice::from_ref(id),
            Ids::Many(v) => v,
        }
    }

    fn push(&mut self, id: FilterId) {
        match self {
            Ids::One(first) => *self = Ids::Many(vec![*first, id]),
            Ids::Many(v) => v.push(id),
        }
    }

    /// Removes `id`; `false` when none are left.
    fn remove(&mut self, id: FilterId) -> bool {
        let single = match self {
            Ids::One(first) => return *first != id,
            Ids::Many(v) => {
                v.retain(|&f| f != id);
                match v[..] {
                    [] => return false,
                    [one] => one,
                    _ => return true,
                }
            }
        };
        *self = Ids::One(single);
        true
    }
}

/// A key site of a group: `M[0..n]` is looked up in `table`.
#[derive(Debug)]
struct Site {
    pc: usize,
    n: usize,
    table: FxHashMap<Key, Ids>,
}

/// The part of a group that runs read-only.
#[derive(Debug)]
struct Code {
    insns: Vec<Insn>,
    sites: Vec<Site>,
    /// Sorted (ids only grow).
    members: Vec<FilterId>,
}

impl Code {
    fn is_member(&self, id: FilterId) -> bool {
        self.members.binary_search(&id).is_ok()
    }

    fn site(&self, pc: usize) -> Option<&Site> {
        self.sites.iter().find(|s| s.pc == pc)
    }

    /// Whether `id`, taken from one of the group's tables (so a member:
    /// removal takes filters out of the tables), is a candidate.
    fn contains(&self, c: &CandSet, id: FilterId) -> bool {
        id.0 < c.limit
            && match &c.cands {
                Cands::All => true,
                Cands::Only(v) => v.binary_search(&id).is_ok(),
                Cands::AllBut(v) => v.binary_search(&id).is_err(),
            }
    }

    /// Calls `f` for every filter of `c`, in id order.
    fn for_each(&self, c: &CandSet, mut f: impl FnMut(FilterId)) {
        match &c.cands {
            Cands::Only(v) => v
                .iter()
                .filter(|&&id| id.0 < c.limit && self.is_member(id))
                .for_each(|&id| f(id)),
            Cands::All => self
                .members
                .iter()
                .take_while(|id| id.0 < c.limit)
                .for_each(|&id| f(id)),
            Cands::AllBut(v) => self
                .members
                .iter()
                .take_while(|id| id.0 < c.limit)
                .filter(|id| v.binary_search(id).is_err())
                .for_each(|&id| f(id)),
        }
    }

    fn count(&self, c: &CandSet) -> u64 {
        let mut n = 0;
        self.for_each(c, |_| n += 1);
        n
    }
}

/// When a registration ends: (expiry, filter, scratch words).
type Expiry = (u64, FilterId, Key);

/// Registered data of a group: scratch words → (filter, expiry) pairs.
#[derive(Debug, Default)]
struct Data {
    map: FxHashMap<Key, Vec<(FilterId, u64)>>,
    /// Expiry times, earliest first; stale when the entry was registered
    /// again since.
    heap: BinaryHeap<Reverse<Expiry>>,
}

impl Data {
    fn register(&mut self, key: &[u32], id: FilterId, expiry: u64) {
        let key = Key::new(key);
        let list = self.map.entry(key.clone()).or_default();
        match list.iter_mut().find(|(f, _)| *f == id) {
            Some(e) => e.1 = expiry,
            None => list.push((id, expiry)),
        }
        self.heap.push(Reverse((expiry, id, key)));
    }

    /// Removes registrations whose expiry is before `clock`; returns how
    /// many.
    fn expire(&mut self, clock: u64) -> u64 {
        let mut n = 0;
        while let Some(Reverse((expiry, _, _))) = self.heap.peek() {
            if *expiry >= clock {
                break;
            }
            let Some(Reverse((expiry, id, key))) = self.heap.pop() else {
                break;
            };
            if let Some(list) = self.map.get_mut(&key) {
                if let Some(p) = list.iter().position(|&(f, e)| f == id && e == expiry) {
                    list.swap_remove(p);
                    n += 1;
                }
                if list.is_empty() {
                    self.map.remove(&key);
                }
            }
        }
        n
    }

    fn live(&self) -> usize {
        self.map.values().map(Vec::len).sum()
    }
}

#[derive(Debug)]
struct Group {
    /// Never reused, so pending packets find their group or none.
    gid: u64,
    code: Code,
    data: Data,
}

#[derive(Debug)]
struct FilterInfo {
    gid: u64,
    /// Keys per site.
    keys: Vec<Key>,
}

/// One group's wait for a pending packet.
#[derive(Debug)]
struct Part {
    gid: u64,
    cands: CandSet,
    /// Packet time after which the wait ends (set at the first postpone).
    expiry: u64,
}

#[derive(Debug)]
struct Pending {
    packet: Arc<PendingPacket>,
    parts: Vec<Part>,
}

/// What one run of a group's program produced.
#[derive(Debug, Default)]
struct RunOut {
    accepted: Vec<(FilterId, u32)>,
    postponed: Vec<(CandSet, u32)>,
    registered: u64,
}

/// The MPF hook for a group: the candidate filters travel with the run and
/// split at each match.
struct Hook<'a> {
    code: &'a Code,
    data: &'a mut Data,
    cands: CandSet,
    clock: u64,
    pkt: &'a [u8],
    wirelen: u32,
    out: &'a mut RunOut,
}

fn sorted(mut v: Vec<FilterId>) -> Vec<FilterId> {
    v.sort_unstable();
    v.dedup();
    v
}

/// Splits `c` by the filters `s` (members whose keys matched) into
/// (matched, not matched).
fn split(c: &CandSet, s: &[FilterId]) -> (CandSet, CandSet) {
    let limit = c.limit;
    let s: Vec<FilterId> = s.iter().copied().filter(|id| id.0 < limit).collect();
    let mk = |cands| CandSet { limit, cands };
    match &c.cands {
        Cands::All => {
            let s = sorted(s);
            if s.is_empty() {
                (mk(Cands::Only(Vec::new())), mk(Cands::All))
            } else {
                (mk(Cands::Only(s.clone())), mk(Cands::AllBut(s)))
            }
        }
        Cands::Only(v) => {
            let (yes, no): (Vec<FilterId>, Vec<FilterId>) = v.iter().partition(|id| s.contains(id));
            (mk(Cands::Only(yes)), mk(Cands::Only(no)))
        }
        Cands::AllBut(e) => {
            let yes: Vec<FilterId> = s
                .iter()
                .copied()
                .filter(|id| e.binary_search(id).is_err())
                .collect();
            let mut no = e.clone();
            no.extend_from_slice(&s);
            (mk(Cands::Only(sorted(yes))), mk(Cands::AllBut(sorted(no))))
        }
    }
}

fn is_empty_only(c: &CandSet) -> bool {
    matches!(&c.cands, Cands::Only(v) if v.is_empty())
}

impl Hook<'_> {
    /// Runs the program from machine state `m` for `cands` (a fork).
    fn fork(&mut self, mut m: Machine, cands: CandSet) {
        let mut child = Hook {
            code: self.code,
            data: &mut *self.data,
            cands,
            clock: self.clock,
            pkt: self.pkt,
            wirelen: self.wirelen,
            out: &mut *self.out,
        };
        let v = run_ext(
            &mut m,
            &child.code.insns,
            child.pkt,
            child.wirelen,
            &mut child,
        );
        child.accept_all(v);
    }

    /// A plain `ret v`: every candidate gets `v`.
    fn accept_all(&mut self, v: u32) {
        if v != 0 {
            let out = &mut *self.out;
            self.code
                .for_each(&self.cands, |id| out.accepted.push((id, v)));
        }
    }
}

impl ExtHook for Hook<'_> {
    fn ext(&mut self, m: &mut Machine, insn: Insn, at: usize) -> ExtStep {
        let words = |n: usize| m.mem.get(..n);
        match Ext::decode(&insn) {
            Some(Ext::RetMatchImm { ret, .. }) => {
                let Some(site) = self.code.site(at) else {
                    return ExtStep::Return(0);
                };
                let Some(key) = words(site.n) else {
                    return ExtStep::Return(0);
                };
                if ret != 0 {
                    if let Some(ids) = site.table.get(&Key::new(key)) {
                        for &id in ids.as_slice() {
                            if self.code.contains(&self.cands, id) {
                                self.out.accepted.push((id, ret));
                            }
                        }
                    }
                }
                ExtStep::Return(0)
            }
            Some(Ext::JmpMatchImm { n, jt, jf }) => {
                let Some(site) = self.code.site(at) else {
                    return ExtStep::Return(0);
                };
                let Some(key) = words(site.n) else {
                    return ExtStep::Return(0);
                };
                let base = at + 1 + n as usize;
                let matched = site
                    .table
                    .get(&Key::new(key))
                    .map_or(&[][..], Ids::as_slice);
                if matched.is_empty() && !matches!(self.cands.cands, Cands::Only(_)) {
                    // Nobody matched: everyone takes the false branch.
                    m.pc = base + jf as usize;
                    return ExtStep::Continue;
                }
                let (yes, no) = split(&self.cands, matched);
                if is_empty_only(&no) {
                    self.cands = yes;
                    m.pc = base + jt as usize;
                    return ExtStep::Continue;
                }
                if !is_empty_only(&yes) {
                    let mut forked = *m;
                    forked.pc = base + jt as usize;
                    self.fork(forked, yes);
                }
                self.cands = no;
                m.pc = base + jf as usize;
                ExtStep::Continue
            }
            Some(Ext::RegisterData { n, timeout_ms }) => {
                let Some(key) = words(n as usize) else {
                    return ExtStep::Return(0);
                };
                // Only after a match (the verifier's rule): the candidates
                // are then an explicit list.
                let Cands::Only(v) = &self.cands.cands else {
                    return ExtStep::Return(0);
                };
                let expiry = self.clock.saturating_add(crate::ms(timeout_ms));
                for &id in v {
                    if id.0 < self.cands.limit && self.code.is_member(id) {
                        self.data.register(key, id, expiry);
                        self.out.registered += 1;
                    }
                }
                ExtStep::Continue
            }
            Some(Ext::RetMatchData { n, ret }) => {
                let Some(key) = words(n as usize) else {
                    return ExtStep::Return(0);
                };
                let Some(list) = self.data.map.get(&Key::new(key)) else {
                    return ExtStep::Continue;
                };
                let hits: Vec<FilterId> = list
                    .iter()
                    .filter(|&&(id, expiry)| {
                        expiry >= self.clock && self.code.contains(&self.cands, id)
                    })
                    .map(|&(id, _)| id)
                    .collect();
                if hits.is_empty() {
                    return ExtStep::Continue;
                }
                if ret != 0 {
                    self.out.accepted.extend(hits.iter().map(|&id| (id, ret)));
                }
                let (_, rest) = split(&self.cands, &hits);
                self.cands = rest;
                if is_empty_only(&self.cands) {
                    return ExtStep::Return(0);
                }
                ExtStep::Continue
            }
            Some(Ext::Postpone { timeout_ms }) => {
                if self.code.count(&self.cands) > 0 {
                    let cands = self.cands.clone();
                    self.out.postponed.push((cands, timeout_ms));
                }
                ExtStep::Return(0)
            }
            Some(Ext::Key(_)) | None => ExtStep::Return(0),
        }
    }
}

/// Runs group `g` on a packet for `cands`.
fn run_group(
    g: &mut Group,
    cands: CandSet,
    pkt: &[u8],
    wirelen: u32,
    clock: u64,
    out: &mut RunOut,
) {
    let mut hook = Hook {
        code: &g.code,
        data: &mut g.data,
        cands,
        clock,
        pkt,
        wirelen,
        out,
    };
    let v = run_ext(
        &mut Machine::default(),
        &hook.code.insns,
        pkt,
        wirelen,
        &mut hook,
    );
    hook.accept_all(v);
}

/// Many MPF (or plain BPF) programs, collapsed by shape (see the crate
/// documentation).
///
/// ```
/// use sluice_bpf::mpf::MpfProgram;
/// use sluice_mpf::{MpfSet, Config};
/// let mut set = MpfSet::new(Config { max_pending: 8 });
/// let id = set.insert(&MpfProgram::parse("ret #60\n").unwrap());
/// let mut out = Vec::new();
/// set.process(&[0; 60], 60, 1_000, &mut out);
/// assert_eq!(out[0].filter, id);
/// assert!(set.remove(id));
/// assert!(!set.remove(id));
/// ```
#[derive(Debug)]
pub struct MpfSet {
    config: Config,
    groups: Vec<Group>,
    shapes: FxHashMap<Vec<Insn>, u64>,
    filters: FxHashMap<FilterId, FilterInfo>,
    next_id: u32,
    next_gid: u64,
    pending: VecDeque<Pending>,
    clock: u64,
    stats: Stats,
    run: RunOut,
}

impl Default for MpfSet {
    fn default() -> MpfSet {
        MpfSet::new(Config::default())
    }
}

impl MpfSet {
    /// An empty set with these limits.
    ///
    /// ```
    /// let set = sluice_mpf::MpfSet::new(sluice_mpf::Config { max_pending: 0 });
    /// assert_eq!(set.stats().filters, 0);
    /// ```
    pub fn new(config: Config) -> MpfSet {
        MpfSet {
            config,
            groups: Vec::new(),
            shapes: FxHashMap::default(),
            filters: FxHashMap::default(),
            next_id: 0,
            next_gid: 0,
            pending: VecDeque::new(),
            clock: 0,
            stats: Stats::default(),
            run: RunOut::default(),
        }
    }

    /// Installs a program. If an installed program has the same shape the
    /// new one joins its group (only its keys are added to the group's
    /// tables); otherwise it starts a group.
    ///
    /// ```
    /// use sluice_bpf::mpf::MpfProgram;
    /// let mut set = sluice_mpf::MpfSet::default();
    /// set.insert(&MpfProgram::parse("ret #1\n").unwrap());
    /// set.insert(&MpfProgram::parse("ret #2\n").unwrap());
    /// assert_eq!(set.stats().groups, 2);
    /// ```
    pub fn insert(&mut self, prog: &MpfProgram) -> FilterId {
        let id = FilterId(self.next_id);
        self.next_id = self.next_id.checked_add(1).expect("more than 2^32 filters");
        let shape = prog.shape();
        let gid = match self.shapes.get(&shape) {
            Some(&gid) => gid,
            None => {
                let gid = self.next_gid;
                self.next_gid += 1;
                let sites = prog
                    .key_sites()
                    .iter()
                    .map(|s| Site {
                        pc: s.pc,
                        n: s.n,
                        table: FxHashMap::default(),
                    })
                    .collect();
                self.groups.push(Group {
                    gid,
                    code: Code {
                        insns: shape.clone(),
                        sites,
                        members: Vec::new(),
                    },
                    data: Data::default(),
                });
                self.shapes.insert(shape, gid);
                gid
            }
        };
        let insns = prog.insns();
        let keys: Vec<Key> = prog
            .key_sites()
            .iter()
            .map(|s| {
                let words: Vec<u32> = insns[s.pc + 1..=s.pc + s.n].iter().map(|i| i.k).collect();
                Key::new(&words)
            })
            .collect();
        let g = self.group_mut(gid).expect("group just found");
        for (site, key) in g.code.sites.iter_mut().zip(&keys) {
            match site.table.get_mut(key) {
                Some(ids) => ids.push(id),
                None => {
                    site.table.insert(key.clone(), Ids::One(id));
                }
            }
        }
        g.code.members.push(id);
        self.filters.insert(id, FilterInfo { gid, keys });
        id
    }

    /// Removes a filter; `false` if it is not installed. Its registered
    /// data and its share of pending packets go with it.
    ///
    /// ```
    /// let mut set = sluice_mpf::MpfSet::default();
    /// assert!(!set.remove(sluice_mpf::FilterId(3)));
    /// ```
    pub fn remove(&mut self, id: FilterId) -> bool {
        let Some(info) = self.filters.remove(&id) else {
            return false;
        };
        let Some(pos) = self.groups.iter().position(|g| g.gid == info.gid) else {
            return true;
        };
        let g = &mut self.groups[pos];
        for (site, key) in g.code.sites.iter_mut().zip(&info.keys) {
            if let Some(ids) = site.table.get_mut(key) {
                if !ids.remove(id) {
                    site.table.remove(key);
                }
            }
        }
        if let Ok(p) = g.code.members.binary_search(&id) {
            g.code.members.remove(p);
        }
        for list in g.data.map.values_mut() {
            list.retain(|&(f, _)| f != id);
        }
        g.data.map.retain(|_, l| !l.is_empty());
        if g.code.members.is_empty() {
            let g = self.groups.remove(pos);
            self.shapes.remove(&g.code.insns);
            for p in &mut self.pending {
                p.parts.retain(|part| part.gid != g.gid);
            }
            self.pending.retain(|p| !p.parts.is_empty());
        }
        true
    }

    fn group_mut(&mut self, gid: u64) -> Option<&mut Group> {
        self.groups.iter_mut().find(|g| g.gid == gid)
    }

    /// Filters one packet of timestamp `ts_ns` (nanoseconds; the set's
    /// clock is the latest timestamp seen) and then every packet waiting in
    /// the pending queue. `out` is cleared, then receives one [`Delivery`]
    /// per accepting filter: for this packet (`late` is `None`) and for
    /// earlier postponed packets this one let through.
    ///
    /// Before filtering, registrations and pending packets whose timeout
    /// has passed are dropped (and counted).
    ///
    /// ```
    /// use sluice_bpf::mpf::MpfProgram;
    /// let mut set = sluice_mpf::MpfSet::default();
    /// set.insert(&MpfProgram::parse("postpone #5\n").unwrap());
    /// let mut out = Vec::new();
    /// set.process(&[1], 1, 0, &mut out);
    /// assert_eq!(set.stats().pending, 1);
    /// set.process(&[2], 1, 6_000_000, &mut out); // 6 ms later
    /// assert_eq!(set.stats().pending_expired, 1);
    /// ```
    pub fn process(&mut self, pkt: &[u8], wirelen: u32, ts_ns: u64, out: &mut Vec<Delivery>) {
        out.clear();
        let seq = self.stats.packets;
        self.stats.packets += 1;
        self.clock = self.clock.max(ts_ns);
        let clock = self.clock;
        self.expire();
        let limit = self.next_id;
        let mut run = std::mem::take(&mut self.run);
        let mut parts = Vec::new();
        for g in &mut self.groups {
            run.accepted.clear();
            run.postponed.clear();
            let all = CandSet {
                limit,
                cands: Cands::All,
            };
            run_group(g, all, pkt, wirelen, clock, &mut run);
            self.stats.registered += std::mem::take(&mut run.registered);
            out.extend(run.accepted.iter().map(|&(filter, snaplen)| Delivery {
                filter,
                snaplen,
                seq,
                late: None,
            }));
            for (cands, t) in run.postponed.drain(..) {
                parts.push(Part {
                    gid: g.gid,
                    cands,
                    expiry: clock.saturating_add(ms(t)),
                });
            }
        }
        // Earlier pending packets, oldest first.
        let old = self.pending.len();
        for i in 0..old {
            let mut p = std::mem::take(&mut self.pending[i].parts);
            let packet = self.pending[i].packet.clone();
            let mut next = Vec::new();
            for part in p.drain(..) {
                let Some(g) = self.groups.iter_mut().find(|g| g.gid == part.gid) else {
                    continue;
                };
                run.accepted.clear();
                run.postponed.clear();
                run_group(g, part.cands, &packet.data, packet.wirelen, clock, &mut run);
                self.stats.registered += std::mem::take(&mut run.registered);
                out.extend(run.accepted.iter().map(|&(filter, snaplen)| Delivery {
                    filter,
                    snaplen,
                    seq: packet.seq,
                    late: Some(packet.clone()),
                }));
                for (cands, _) in run.postponed.drain(..) {
                    next.push(Part {
                        gid: part.gid,
                        cands,
                        expiry: part.expiry,
                    });
                }
            }
            self.pending[i].parts = next;
        }
        self.pending.retain(|p| !p.parts.is_empty());
        if !parts.is_empty() {
            if self.pending.len() >= self.config.max_pending {
                for part in &parts {
                    if let Some(g) = self.groups.iter().find(|g| g.gid == part.gid) {
                        self.stats.pending_dropped_full += g.code.count(&part.cands);
                    }
                }
            } else {
                self.stats.postponed += 1;
                self.pending.push_back(Pending {
                    packet: Arc::new(PendingPacket {
                        seq,
                        ts_ns,
                        wirelen,
                        data: pkt.into(),
                    }),
                    parts,
                });
            }
        }
        self.run = run;
    }

    /// Drops expired registrations and pending waits.
    fn expire(&mut self) {
        let clock = self.clock;
        for g in &mut self.groups {
            self.stats.data_expired += g.data.expire(clock);
        }
        if self.pending.is_empty() {
            return;
        }
        let groups = &self.groups;
        let stats = &mut self.stats;
        for p in &mut self.pending {
            p.parts.retain(|part| {
                if part.expiry >= clock {
                    return true;
                }
                if let Some(g) = groups.iter().find(|g| g.gid == part.gid) {
                    stats.pending_expired += g.code.count(&part.cands);
                }
                false
            });
        }
        self.pending.retain(|p| !p.parts.is_empty());
    }

    /// The counters, with the current number of filters, groups and
    /// pending packets.
    ///
    /// ```
    /// assert_eq!(sluice_mpf::MpfSet::default().stats().packets, 0);
    /// ```
    pub fn stats(&self) -> Stats {
        Stats {
            filters: self.filters.len(),
            groups: self.groups.len(),
            collapsed_filters: self
                .groups
                .iter()
                .map(|g| g.code.members.len())
                .filter(|&n| n > 1)
                .sum(),
            pending: self.pending.len(),
            ..self.stats
        }
    }

    /// Registrations alive now (not yet removed by expiry), over all
    /// groups.
    ///
    /// ```
    /// assert_eq!(sluice_mpf::MpfSet::default().registrations(), 0);
    /// ```
    pub fn registrations(&self) -> usize {
        self.groups.iter().map(|g| g.data.live()).sum()
    }

    /// The packet clock: the latest timestamp processed (nanoseconds).
    ///
    /// ```
    /// assert_eq!(sluice_mpf::MpfSet::default().clock(), 0);
    /// ```
    pub fn clock(&self) -> u64 {
        self.clock
    }
}
