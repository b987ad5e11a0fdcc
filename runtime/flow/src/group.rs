//! Flow groups and flows: the life cycle, the shared instance graph, the
//! packet loop, reports and the Graphviz picture.

use crate::buffer::{IBuf, MBuf, Meta, PBuf, PacketRef, Preference, Reader};
use crate::class::{BuildEnv, Classes, Element, OwnedPacket, Pkt, Source};
use crate::policy::{Credentials, ElemShape, FlowShape, Policy};
use crate::spec::{self, Graph};
use crate::value::Value;
use crate::Error;
use sluice_classifier::merged::{Compiled, Merged, Scratch};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// How a flow group's buffers are sized and managed.
///
/// ```
/// let c = sluice_flow::GroupConfig::default();
/// assert_eq!(c.slots, 1024);
/// ```
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// PBuf slots.
    pub slots: usize,
    /// Bytes of packet each PBuf slot holds (longer packets are stored
    /// truncated; filters always see the whole packet).
    pub slot_bytes: usize,
    /// Entries of each IBuf.
    pub ibuf_entries: usize,
    /// Buffer management: slow- or fast-reader preference.
    pub preference: Preference,
    /// Packets processed per turn of the loop (the graph lock is taken once
    /// per turn; callbacks run between turns).
    pub batch: usize,
    /// Run BPF elements attached at the same point through one merged
    /// classifier.
    pub merge: bool,
}

impl Default for GroupConfig {
    fn default() -> GroupConfig {
        GroupConfig {
            slots: 1024,
            slot_bytes: 2048,
            ibuf_entries: 1024,
            preference: Preference::Slow,
            batch: 64,
            merge: true,
        }
    }
}

/// Where a flow is in its life cycle.
///
/// ```
/// assert_eq!(sluice_flow::FlowState::Created.to_string(), "created");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    /// Made with [`Flow::create`]; nothing to run yet.
    Created,
    /// Holds a flow definition ([`Flow::populate`]).
    Populated,
    /// Authorised, its filters instantiated and connected
    /// ([`Flow::instantiate`]); not capturing yet.
    Instantiated,
    /// Capturing ([`Flow::activate`]).
    Active,
    /// Not capturing for now ([`Flow::pause`]).
    Paused,
    /// Closed; its state is gone.
    Closed,
}

impl std::fmt::Display for FlowState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FlowState::Created => "created",
            FlowState::Populated => "populated",
            FlowState::Instantiated => "instantiated",
            FlowState::Active => "active",
            FlowState::Paused => "paused",
            FlowState::Closed => "closed",
        })
    }
}

/// Packets handed to a callback: at most the `every` packets it was
/// registered for (fewer at the end of the sources).
pub struct Batch<'a> {
    reader: &'a mut Reader,
    left: u64,
}

impl Batch<'_> {
    /// The next packet of the batch.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<PacketRef<'_>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        self.reader.next()
    }

    /// Packets left in the batch (some may turn out lost under FRP).
    pub fn len(&self) -> u64 {
        self.left
    }

    /// Whether the batch is used up.
    pub fn is_empty(&self) -> bool {
        self.left == 0
    }
}

type CallbackFn = Box<dyn FnMut(&mut Batch<'_>) + Send>;

struct Callback {
    every: u64,
    f: CallbackFn,
    reader: Option<Reader>,
    calls: u64,
}

impl Callback {
    /// Call back while `every` packets are waiting (or, at the end, for
    /// what is left).
    fn fire(&mut self, at_end: bool) {
        let Some(r) = self.reader.as_mut() else {
            return;
        };
        loop {
            let a = r.available();
            if a == 0 || (a < self.every && !at_end) {
                break;
            }
            let n = a.min(self.every);
            let mut b = Batch { reader: r, left: n };
            (self.f)(&mut b);
            // Whatever the callback did not read is consumed anyway.
            while b.next().is_some() {}
            self.calls += 1;
        }
        r.commit();
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    class: String,
    args: Vec<String>,
    inputs: Vec<usize>,
}

enum Kind {
    Source {
        src: Box<dyn Source>,
        head: OwnedPacket,
        has_head: bool,
        ended: bool,
    },
    Filter {
        elem: Box<dyn Element>,
        mergeable: bool,
    },
    Join,
}

struct Instance {
    key: Key,
    class: String,
    text: String,
    kind: Kind,
    inputs: Vec<usize>,
    mbuf: Arc<MBuf>,
    ibuf: Option<Arc<IBuf>>,
    users: usize,
    active: usize,
}

impl Instance {
    fn name(&self, id: usize) -> String {
        format!("{}#{id}", self.class)
    }
}

struct FlowRec {
    spec: String,
    state: FlowState,
    /// Instance ids per stage, in the order the elements are written.
    stages: Vec<Vec<usize>>,
    terminal: usize,
    /// Every instance the flow uses, once.
    uses: Vec<usize>,
    callback: Option<Arc<Mutex<Callback>>>,
}

/// A merged classifier and the value each member returns on accept.
type MergedCode = (Merged, Vec<u32>);

struct Bank {
    members: Vec<usize>,
    inputs: Vec<usize>,
    /// Per link type: the merged classifier and each member's accept
    /// value, or `None` when some member is not a plain filter there.
    code: HashMap<(u16, bool), Option<MergedCode>>,
}

enum Step {
    Filter(usize),
    Join(usize),
    Bank(usize),
}

#[derive(Default)]
struct GraphState {
    instances: Vec<Option<Instance>>,
    flows: Vec<Option<FlowRec>>,
    plan: Vec<Step>,
    banks: Vec<Bank>,
    terminals: Vec<usize>,
    sources: Vec<usize>,
    all_ibufs: Vec<Arc<IBuf>>,
    dirty: bool,
    results: Vec<u32>,
    scratch: Scratch,
    ids: Vec<u32>,
    packets: u64,
    stored: u64,
}

struct Inner {
    cfg: GroupConfig,
    classes: Classes,
    pbuf: Arc<PBuf>,
    g: Mutex<GraphState>,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, GraphState> {
        self.g.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A flow group: flows that share one packet buffer (each packet any of
/// them wants is stored once) and one graph of filter instances (flows with
/// a common prefix share its instances).
///
/// ```
/// use sluice_flow::{Group, GroupConfig, Flow};
/// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
/// let group = Group::new(GroupConfig::default());
/// let mut flow = Flow::create(&group);
/// flow.populate(&format!("(file,{sample}) -> (BPF,\"tcp\") -> (packetcount)")).unwrap();
/// flow.instantiate_unchecked().unwrap();
/// flow.activate().unwrap();
/// group.run().unwrap();
/// let report = flow.report().unwrap();
/// assert_eq!(report.filters[2].class, "packetcount");
/// assert!(report.filters[2].result.as_u64().unwrap() > 0);
/// ```
#[derive(Clone)]
pub struct Group {
    inner: Arc<Inner>,
}

/// What a group's run did.
///
/// ```
/// let s = sluice_flow::RunStats::default();
/// assert_eq!(s.packets, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Packets read from sources.
    pub packets: u64,
    /// Packets stored in the PBuf (wanted by at least one flow).
    pub stored: u64,
    /// Packets the PBuf dropped (slow-reader preference, buffer full).
    pub pbuf_drops: u64,
    /// Whether every source is exhausted.
    pub finished: bool,
}

/// One filter instance in a flow's report.
///
/// ```
/// let f = sluice_flow::FilterReport { class: "bpf".into(), instance: "BPF#1".into(), element: "(BPF,tcp)".into(), result: sluice_flow::value::Value::U64(3) };
/// assert_eq!(f.result.as_u64(), Some(3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterReport {
    /// Class name.
    pub class: String,
    /// Instance name (`class#id`; shared instances have the same name in
    /// every flow that uses them).
    pub instance: String,
    /// The element as written.
    pub element: String,
    /// What it produced.
    pub result: Value,
}

/// What a flow produced.
///
/// ```
/// let r = sluice_flow::FlowReport { spec: "x".into(), state: sluice_flow::FlowState::Active, packets: 1, drops: 0, filters: vec![] };
/// assert!(r.to_json().starts_with("{\"spec\": \"x\""));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowReport {
    /// The specification.
    pub spec: String,
    /// Its state.
    pub state: FlowState,
    /// Packets delivered to the flow's callback reader (or, without a
    /// callback, entries written to its index buffer).
    pub packets: u64,
    /// Packets the flow wanted but lost: dropped at its index buffer or the
    /// group's PBuf (SRP), or overwritten before they were read (FRP).
    pub drops: u64,
    /// Every element in flow order (sources first).
    pub filters: Vec<FilterReport>,
}

impl FlowReport {
    /// As JSON: `{"spec": …, "packets": N, "drops": N, "filters": [{"class": …, "instance": …, "result": …}]}`.
    ///
    /// ```
    /// let r = sluice_flow::FlowReport { spec: "s".into(), state: sluice_flow::FlowState::Active, packets: 0, drops: 0, filters: vec![] };
    /// assert_eq!(r.to_json(), r#"{"spec": "s", "packets": 0, "drops": 0, "filters": []}"#);
    /// ```
    pub fn to_json(&self) -> String {
        Value::map([
            ("spec", Value::Str(self.spec.clone())),
            ("packets", Value::U64(self.packets)),
            ("drops", Value::U64(self.drops)),
            (
                "filters",
                Value::List(
                    self.filters
                        .iter()
                        .map(|f| {
                            Value::map([
                                ("class", Value::Str(f.class.clone())),
                                ("instance", Value::Str(f.instance.clone())),
                                ("element", Value::Str(f.element.clone())),
                                ("result", f.result.clone()),
                            ])
                        })
                        .collect(),
                ),
            ),
        ])
        .to_json()
    }
}

impl Group {
    /// An empty group with the built-in classes.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert_eq!(g.flow_count(), 0);
    /// ```
    pub fn new(cfg: GroupConfig) -> Group {
        Group::with_classes(cfg, Classes::builtin())
    }

    /// An empty group with these classes.
    ///
    /// ```
    /// let g = sluice_flow::Group::with_classes(Default::default(), sluice_flow::class::Classes::builtin());
    /// assert_eq!(g.instance_count(), 0);
    /// ```
    pub fn with_classes(cfg: GroupConfig, classes: Classes) -> Group {
        let pbuf = Arc::new(PBuf::new(cfg.slots, cfg.slot_bytes, cfg.preference));
        Group {
            inner: Arc::new(Inner {
                cfg,
                classes,
                pbuf,
                g: Mutex::new(GraphState::default()),
            }),
        }
    }

    /// The group's configuration.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).config().batch, 64);
    /// ```
    pub fn config(&self) -> &GroupConfig {
        &self.inner.cfg
    }

    /// The group's packet buffer.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).pbuf().slots(), 1024);
    /// ```
    pub fn pbuf(&self) -> &Arc<PBuf> {
        &self.inner.pbuf
    }

    /// Flows instantiated and not closed.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).flow_count(), 0);
    /// ```
    pub fn flow_count(&self) -> usize {
        self.inner.lock().flows.iter().flatten().count()
    }

    /// Filter and source instances alive.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).instance_count(), 0);
    /// ```
    pub fn instance_count(&self) -> usize {
        self.inner.lock().instances.iter().flatten().count()
    }

    /// Bytes held by the instances' buffers (MBufs and IBufs; not the
    /// shared PBuf nor the elements' own state).
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).instance_buffer_bytes(), 0);
    /// ```
    pub fn instance_buffer_bytes(&self) -> usize {
        self.inner
            .lock()
            .instances
            .iter()
            .flatten()
            .map(|i| i.mbuf.len() * 4 + i.ibuf.as_ref().map_or(0, |b| b.memory_bytes()))
            .sum()
    }

    /// Read every source of the active flows to its end, running the
    /// filters, storing wanted packets once and calling callbacks every
    /// `N` packets (and once more at the end with what is left).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert!(g.run().unwrap().finished);
    /// ```
    pub fn run(&self) -> Result<RunStats, Error> {
        self.run_for(u64::MAX)
    }

    /// Like [`Group::run`], stopping after about `packets` packets (whole
    /// turns of the loop); `finished` says whether the sources are done.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert_eq!(g.run_for(10).unwrap().packets, 0);
    /// ```
    pub fn run_for(&self, packets: u64) -> Result<RunStats, Error> {
        let inner = &*self.inner;
        let mut done = 0u64;
        let mut restarted = false;
        loop {
            let mut g = inner.lock();
            if g.dirty {
                g.replan(&inner.cfg);
            }
            if !restarted {
                for t in g.terminals.clone() {
                    if let Some(b) = g.instances[t].as_ref().and_then(|i| i.ibuf.as_ref()) {
                        b.restart();
                    }
                }
                restarted = true;
            }
            // Elements with a private memory copy take the application's
            // writes and publish their memory once per turn.
            g.sync_all();
            let mut sleep = None;
            let mut finished = false;
            let turn = (inner.cfg.batch as u64).min(packets - done).max(1);
            for _ in 0..turn {
                match g.next_source()? {
                    None => {
                        finished = true;
                        break;
                    }
                    Some(s) => {
                        if let Some(due) = g.due(s) {
                            if due > Instant::now() {
                                sleep = Some(due);
                                break;
                            }
                        }
                        g.process(s, &inner.pbuf, inner.cfg.preference)?;
                        done += 1;
                    }
                }
            }
            if finished {
                g.sync_all();
            }
            let callbacks = g.callbacks();
            let stats = RunStats {
                packets: g.packets,
                stored: g.stored,
                pbuf_drops: inner.pbuf.drops(),
                finished,
            };
            let ibufs: Vec<Arc<IBuf>> = if finished {
                g.terminals
                    .iter()
                    .filter_map(|&t| g.instances[t].as_ref().and_then(|i| i.ibuf.clone()))
                    .collect()
            } else {
                Vec::new()
            };
            drop(g);
            for cb in &callbacks {
                cb.lock().unwrap_or_else(|e| e.into_inner()).fire(finished);
            }
            if finished {
                for b in ibufs {
                    b.finish();
                }
                return Ok(stats);
            }
            if done >= packets {
                return Ok(stats);
            }
            if let Some(due) = sleep {
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
        }
    }

    /// The instantiated graph as Graphviz DOT: flows (ellipses) with their
    /// specification, filter instances (circles, named `class#id`; one per
    /// shared prefix), filter classes (boxes); solid edges carry packets,
    /// dotted edges tie a flow to its last instance, dashed edges an
    /// instance to its class.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert!(g.dot().starts_with("digraph flows {"));
    /// ```
    pub fn dot(&self) -> String {
        let g = self.inner.lock();
        let q = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = String::from("digraph flows {\n  rankdir=TB;\n");
        out.push_str("  subgraph cluster_flows { label=\"flows\"; style=invis;\n");
        for (f, rec) in g.flows.iter().enumerate() {
            if let Some(r) = rec {
                out.push_str(&format!(
                    "    flow{f} [shape=ellipse, label=\"flow {} ({})\\n{}\"];\n",
                    f + 1,
                    r.state,
                    q(&r.spec)
                ));
            }
        }
        out.push_str("  }\n");
        let mut classes: Vec<&str> = Vec::new();
        for (id, inst) in g.instances.iter().enumerate() {
            let Some(i) = inst else { continue };
            out.push_str(&format!(
                "  i{id} [shape=circle, label=\"{}\", tooltip=\"{}\"];\n",
                q(&i.name(id)),
                q(&i.text)
            ));
            if !classes.contains(&i.class.as_str()) {
                classes.push(&i.class);
            }
        }
        for c in &classes {
            out.push_str(&format!(
                "  \"class {}\" [shape=box, label=\"{}\"];\n",
                q(c),
                q(c)
            ));
        }
        for (id, inst) in g.instances.iter().enumerate() {
            let Some(i) = inst else { continue };
            for j in &i.inputs {
                out.push_str(&format!("  i{j} -> i{id};\n"));
            }
            out.push_str(&format!(
                "  i{id} -> \"class {}\" [style=dashed, arrowhead=empty];\n",
                q(&i.class)
            ));
        }
        for (f, rec) in g.flows.iter().enumerate() {
            if let Some(r) = rec {
                out.push_str(&format!("  flow{f} -> i{} [style=dotted];\n", r.terminal));
            }
        }
        out.push_str("}\n");
        out
    }
}

impl GraphState {
    fn inst(&self, id: usize) -> &Instance {
        self.instances[id].as_ref().expect("live instance")
    }

    fn inst_mut(&mut self, id: usize) -> &mut Instance {
        self.instances[id].as_mut().expect("live instance")
    }

    fn find(&self, key: &Key) -> Option<usize> {
        self.instances
            .iter()
            .position(|i| i.as_ref().is_some_and(|i| i.key == *key))
    }

    fn add(&mut self, inst: Instance) -> usize {
        self.instances.push(Some(inst));
        self.results.push(0);
        self.instances.len() - 1
    }

    /// Drop a flow's use of instances; free those nobody uses.
    fn release(&mut self, ids: &[usize]) {
        for &id in ids {
            if let Some(i) = self.instances[id].as_mut() {
                i.users -= 1;
                if i.users == 0 {
                    if let Some(b) = &i.ibuf {
                        b.finish();
                    }
                    self.instances[id] = None;
                }
            }
        }
        self.dirty = true;
    }

    /// Recompute the processing order: active instances in creation order
    /// (inputs are always older), mergeable BPF instances with the same
    /// inputs grouped into one classifier step.
    fn replan(&mut self, cfg: &GroupConfig) {
        self.plan.clear();
        self.banks.clear();
        self.terminals.clear();
        self.sources.clear();
        let mut bank_of: HashMap<Vec<usize>, usize> = HashMap::new();
        let mut groups: HashMap<Vec<usize>, Vec<usize>> = HashMap::new();
        if cfg.merge {
            for (id, inst) in self.instances.iter().enumerate() {
                if let Some(Instance {
                    kind:
                        Kind::Filter {
                            mergeable: true, ..
                        },
                    active,
                    inputs,
                    ..
                }) = inst
                {
                    if *active > 0 {
                        groups.entry(inputs.clone()).or_default().push(id);
                    }
                }
            }
        }
        for (id, inst) in self.instances.iter().enumerate() {
            let Some(i) = inst else { continue };
            if i.active == 0 {
                continue;
            }
            match &i.kind {
                Kind::Source { .. } => self.sources.push(id),
                Kind::Join => self.plan.push(Step::Join(id)),
                Kind::Filter { mergeable, .. } => {
                    let members = groups.get(&i.inputs).filter(|m| *mergeable && m.len() > 1);
                    match members {
                        Some(m) => {
                            if !bank_of.contains_key(&i.inputs) {
                                bank_of.insert(i.inputs.clone(), self.banks.len());
                                self.plan.push(Step::Bank(self.banks.len()));
                                self.banks.push(Bank {
                                    members: m.clone(),
                                    inputs: i.inputs.clone(),
                                    code: HashMap::new(),
                                });
                            }
                        }
                        None => self.plan.push(Step::Filter(id)),
                    }
                }
            }
        }
        for rec in self.flows.iter().flatten() {
            if rec.state == FlowState::Active && !self.terminals.contains(&rec.terminal) {
                self.terminals.push(rec.terminal);
            }
        }
        self.all_ibufs = self
            .instances
            .iter()
            .flatten()
            .filter_map(|i| i.ibuf.clone())
            .collect();
        self.dirty = false;
    }

    /// The active source whose next packet comes first (by timestamp);
    /// `None` when all are exhausted.
    fn next_source(&mut self) -> Result<Option<usize>, Error> {
        let mut best: Option<(usize, (i64, u32))> = None;
        for k in 0..self.sources.len() {
            let s = self.sources[k];
            let name = self.inst(s).name(s);
            let text = self.inst(s).text.clone();
            let inst = self.inst_mut(s);
            if let Kind::Source {
                src,
                head,
                has_head,
                ended,
            } = &mut inst.kind
            {
                if !*has_head && !*ended {
                    match src.next(head) {
                        Ok(true) => *has_head = true,
                        Ok(false) => *ended = true,
                        Err(e) => {
                            *ended = true;
                            return Err(Error::Run {
                                element: format!("{text} ({name})"),
                                message: e,
                            });
                        }
                    }
                }
                if *has_head {
                    let t = (head.meta.ts_sec, head.meta.ts_nsec);
                    if best.is_none_or_later(t) {
                        best = Some((s, t));
                    }
                }
            }
        }
        Ok(best.map(|b| b.0))
    }

    fn due(&self, s: usize) -> Option<Instant> {
        match &self.inst(s).kind {
            Kind::Source { head, .. } => head.due,
            _ => None,
        }
    }

    fn process(&mut self, s: usize, pbuf: &PBuf, pref: Preference) -> Result<(), Error> {
        let GraphState {
            instances,
            plan,
            banks,
            terminals,
            all_ibufs,
            results,
            scratch,
            ids,
            packets,
            stored,
            ..
        } = self;
        // Take the packet out of its source (put back below).
        let head = match &mut instances[s].as_mut().expect("source").kind {
            Kind::Source { head, has_head, .. } => {
                *has_head = false;
                std::mem::take(head)
            }
            _ => unreachable!("sources are sources"),
        };
        *packets += 1;
        results.iter_mut().for_each(|r| *r = 0);
        results[s] = 1;
        let pkt = Pkt {
            data: &head.data,
            wirelen: head.meta.wirelen,
            linktype: head.meta.linktype,
            ts_sec: head.meta.ts_sec,
            ts_nsec: head.meta.ts_nsec,
            big_endian: head.big_endian,
        };
        let mut failure = None;
        for step in plan.iter() {
            match *step {
                Step::Filter(id) => {
                    let inst = instances[id].as_mut().expect("planned instance");
                    if !inst.inputs.iter().any(|&j| results[j] != 0) {
                        continue;
                    }
                    if let Kind::Filter { elem, .. } = &mut inst.kind {
                        inst.mbuf.begin();
                        let r = elem.run(&pkt, &inst.mbuf);
                        inst.mbuf.end();
                        match r {
                            Ok(r) => results[id] = r,
                            Err(e) => {
                                failure = Some(Error::Run {
                                    element: format!("{} ({})", inst.text, inst.name(id)),
                                    message: e,
                                });
                                break;
                            }
                        }
                    }
                }
                Step::Join(id) => {
                    let inst = instances[id].as_ref().expect("planned instance");
                    results[id] = inst
                        .inputs
                        .iter()
                        .map(|&j| results[j])
                        .find(|&r| r != 0)
                        .unwrap_or(0);
                }
                Step::Bank(b) => {
                    let bank = &mut banks[b];
                    if !bank.inputs.iter().any(|&j| results[j] != 0) {
                        continue;
                    }
                    let key = (pkt.linktype, pkt.big_endian);
                    if !bank.code.contains_key(&key) {
                        let mut merged = Merged::default();
                        let mut accepts = Vec::new();
                        let mut ok = true;
                        for (k, &m) in bank.members.iter().enumerate() {
                            let inst = instances[m].as_mut().expect("bank member");
                            let ir = match &mut inst.kind {
                                Kind::Filter { elem, .. } => elem.ir(key.0, key.1),
                                _ => None,
                            };
                            match ir {
                                Some(f) => {
                                    accepts.push(f.accept);
                                    merged.insert(k as u32, &Compiled::new(f), 0);
                                }
                                None => ok = false,
                            }
                        }
                        bank.code.insert(key, ok.then_some((merged, accepts)));
                    }
                    match &bank.code[&key] {
                        Some((merged, accepts)) => {
                            merged.classify(pkt.data, pkt.wirelen, scratch, ids);
                            for &m in &bank.members {
                                results[m] = 0;
                            }
                            for &k in ids.iter() {
                                results[bank.members[k as usize]] = accepts[k as usize];
                            }
                            for &m in &bank.members {
                                if let Some(Instance {
                                    kind: Kind::Filter { elem, .. },
                                    ..
                                }) = instances[m].as_mut()
                                {
                                    elem.merged_result(results[m]);
                                }
                            }
                        }
                        None => {
                            // Some member has no plain-filter form for this
                            // link type: run each on its own.
                            for &m in &bank.members {
                                let inst = instances[m].as_mut().expect("bank member");
                                if let Kind::Filter { elem, .. } = &mut inst.kind {
                                    match elem.run(&pkt, &inst.mbuf) {
                                        Ok(r) => results[m] = r,
                                        Err(e) => {
                                            failure = Some(Error::Run {
                                                element: format!(
                                                    "{} ({})",
                                                    inst.text,
                                                    inst.name(m)
                                                ),
                                                message: e,
                                            });
                                            break;
                                        }
                                    }
                                }
                            }
                            if failure.is_some() {
                                break;
                            }
                        }
                    }
                }
            }
        }
        if failure.is_none() {
            let mut wanted = terminals.iter().filter(|&&t| results[t] != 0).peekable();
            if wanted.peek().is_some() {
                let mut room: Vec<usize> = Vec::new();
                for &t in wanted {
                    let ib = instances[t]
                        .as_ref()
                        .and_then(|i| i.ibuf.as_ref())
                        .expect("terminal IBuf");
                    if ib.has_room() {
                        room.push(t);
                    } else {
                        ib.count_drop();
                    }
                }
                if !room.is_empty() {
                    let oldest = match pref {
                        Preference::Fast => 0,
                        Preference::Slow => all_ibufs
                            .iter()
                            .filter_map(|b| b.oldest_needed())
                            .min()
                            .unwrap_or_else(|| pbuf.written()),
                    };
                    let meta = Meta {
                        caplen: head.data.len() as u32,
                        ..head.meta
                    };
                    match pbuf.store(&meta, &head.data, oldest) {
                        Some(pos) => {
                            *stored += 1;
                            for t in room {
                                let i = instances[t].as_ref().expect("terminal");
                                if let Some(ib) = &i.ibuf {
                                    ib.push_after_check(pos, results[t]);
                                }
                            }
                        }
                        None => {
                            for t in room {
                                if let Some(ib) =
                                    instances[t].as_ref().and_then(|i| i.ibuf.as_ref())
                                {
                                    ib.count_drop();
                                }
                            }
                        }
                    }
                }
            }
        }
        // Give the buffer back to the source for its next packet.
        if let Some(Instance {
            kind: Kind::Source { head: h, .. },
            ..
        }) = instances[s].as_mut()
        {
            *h = head;
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn sync_all(&mut self) {
        for inst in self.instances.iter_mut().flatten() {
            if let Kind::Filter { elem, .. } = &mut inst.kind {
                elem.sync(&inst.mbuf);
            }
        }
    }

    fn callbacks(&self) -> Vec<Arc<Mutex<Callback>>> {
        self.flows
            .iter()
            .flatten()
            .filter(|f| matches!(f.state, FlowState::Active | FlowState::Paused))
            .filter_map(|f| f.callback.clone())
            .collect()
    }
}

trait Earliest {
    fn is_none_or_later(&self, t: (i64, u32)) -> bool;
}

impl Earliest for Option<(usize, (i64, u32))> {
    fn is_none_or_later(&self, t: (i64, u32)) -> bool {
        match self {
            None => true,
            Some((_, b)) => t < *b,
        }
    }
}

/// A flow: a generalised socket delivering the packets (and statistics) a
/// filter graph selects. Its life cycle follows FFPF §2.1: [`Flow::create`],
/// [`Flow::populate`] (the graph, callbacks), [`Flow::instantiate`]
/// (authorisation, filters instantiated and connected), [`Flow::activate`],
/// [`Flow::pause`], [`Flow::close`]. Operations out of order fail with
/// [`Error::State`]. Closing or dropping the flow frees its state (its
/// instances too, unless another flow shares them).
///
/// ```
/// use sluice_flow::{Flow, Group, FlowState};
/// let group = Group::new(Default::default());
/// let mut f = Flow::create(&group);
/// assert!(f.activate().is_err());
/// f.populate("(file,x.pcap) -> (sampler,2)").unwrap();
/// assert_eq!(f.state(), FlowState::Populated);
/// ```
pub struct Flow {
    inner: Arc<Inner>,
    state: FlowState,
    spec: String,
    graph: Option<Graph>,
    callback: Option<(u64, CallbackFn)>,
    id: Option<usize>,
}

/// Canonical name and kind of each element, for authorisation and keys.
struct Resolved {
    class: String,
    source: bool,
    mbuf_words: usize,
    externs: Vec<String>,
}

impl Flow {
    /// A new, empty flow handle in `group` (FFPF's `flow_create`).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert_eq!(sluice_flow::Flow::create(&g).state(), sluice_flow::FlowState::Created);
    /// ```
    pub fn create(group: &Group) -> Flow {
        Flow {
            inner: group.inner.clone(),
            state: FlowState::Created,
            spec: String::new(),
            graph: None,
            callback: None,
            id: None,
        }
    }

    /// The flow's state.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let f = sluice_flow::Flow::create(&g);
    /// assert_eq!(f.state().to_string(), "created");
    /// ```
    pub fn state(&self) -> FlowState {
        self.state
    }

    /// The specification it was populated with.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.populate("(file,a)").unwrap();
    /// assert_eq!(f.spec(), "(file,a)");
    /// ```
    pub fn spec(&self) -> &str {
        &self.spec
    }

    fn state_err(&self, op: &'static str) -> Error {
        Error::State {
            op,
            state: self.state,
        }
    }

    fn resolve(&self, e: &spec::Element, first: bool) -> Result<Resolved, Error> {
        let classes = &self.inner.classes;
        let arg_err = |ae: crate::class::ArgError| {
            let column = match ae.arg {
                Some(i) => e.arg_columns.get(i).copied().unwrap_or(e.column) + ae.offset,
                None => e.column,
            };
            Error::Spec(spec::SpecError {
                column,
                message: format!("{}: {}", e.class, ae.message),
            })
        };
        if first {
            let Some(c) = classes.source(&e.class) else {
                let hint = if classes.filter(&e.class).is_some() {
                    format!(
                        "{} is a filter; the first stage holds packet sources (file, replay)",
                        e.class
                    )
                } else {
                    format!("unknown source class {:?} (sources: file, replay)", e.class)
                };
                return Err(Error::Spec(spec::SpecError {
                    column: e.column,
                    message: hint,
                }));
            };
            c.check(&e.args).map_err(arg_err)?;
            Ok(Resolved {
                class: c.name().to_ascii_lowercase(),
                source: true,
                mbuf_words: 0,
                externs: vec![],
            })
        } else {
            let Some(c) = classes.filter(&e.class) else {
                let hint = if classes.source(&e.class).is_some() {
                    format!(
                        "{} is a packet source; sources belong in the first stage",
                        e.class
                    )
                } else {
                    format!(
                        "unknown filter class {:?} (known: {})",
                        e.class,
                        classes.names().join(", ")
                    )
                };
                return Err(Error::Spec(spec::SpecError {
                    column: e.column,
                    message: hint,
                }));
            };
            let info = c.check(&e.args).map_err(arg_err)?;
            Ok(Resolved {
                class: c.name().to_string(),
                source: false,
                mbuf_words: info.mbuf_words,
                externs: info.externs,
            })
        }
    }

    /// Give the flow its filter graph, in the `ffpf-flow` notation (FFPF's
    /// `flow_populate`). Classes and arguments are checked now; errors
    /// carry the column. Allowed until the flow is instantiated (a second
    /// call replaces the graph).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// let e = f.populate("(file,a) -> (sampler,x)").unwrap_err();
    /// assert_eq!(e.to_string(), "column 22: sampler: one packet in N: expected a number, found \"x\"");
    /// ```
    pub fn populate(&mut self, text: &str) -> Result<(), Error> {
        if !matches!(self.state, FlowState::Created | FlowState::Populated) {
            return Err(self.state_err("populate"));
        }
        let graph = spec::parse(text)?;
        for (si, stage) in graph.stages.iter().enumerate() {
            for e in stage {
                self.resolve(e, si == 0)?;
            }
        }
        self.spec = text.to_string();
        self.graph = Some(graph);
        self.state = FlowState::Populated;
        Ok(())
    }

    /// Ask for `f` to be called with every `every` packets the flow
    /// delivers (FFPF's `filter_callback`); at the end of the sources it is
    /// called once more with what is left. Calls happen in the thread
    /// running [`Group::run`], between turns of its loop. Set before
    /// instantiation (authorisation sees the interval).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.on_packets(100, |batch| while let Some(_p) = batch.next() {}).unwrap();
    /// assert!(f.on_packets(0, |_| {}).is_err());
    /// ```
    pub fn on_packets(
        &mut self,
        every: u64,
        f: impl FnMut(&mut Batch<'_>) + Send + 'static,
    ) -> Result<(), Error> {
        if !matches!(self.state, FlowState::Created | FlowState::Populated) {
            return Err(self.state_err("set a callback on"));
        }
        if every == 0 || every > self.inner.cfg.ibuf_entries as u64 {
            return Err(Error::Config(format!(
                "callback interval must be between 1 and the index buffer size ({}), not {every}",
                self.inner.cfg.ibuf_entries
            )));
        }
        self.callback = Some((every, Box::new(f)));
        Ok(())
    }

    /// The whole definition as authorisation sees it.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.populate("(file,a) -> (BPF,tcp)").unwrap();
    /// assert_eq!(f.shape().unwrap().stages[1][0].class, "bpf");
    /// ```
    pub fn shape(&self) -> Result<FlowShape, Error> {
        let graph = self
            .graph
            .as_ref()
            .ok_or_else(|| self.state_err("describe"))?;
        let mut stages = Vec::new();
        for (si, stage) in graph.stages.iter().enumerate() {
            let mut s = Vec::new();
            for e in stage {
                let r = self.resolve(e, si == 0)?;
                s.push(ElemShape {
                    class: r.class.to_ascii_lowercase(),
                    source: r.source,
                    args: e.args.clone(),
                    externs: r.externs,
                });
            }
            stages.push(s);
        }
        Ok(FlowShape {
            stages,
            callback_every: self.callback.as_ref().map(|c| c.0),
        })
    }

    /// Instantiate without authorisation (everything allowed for the
    /// calling user, as with no policy file).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// assert!(f.instantiate_unchecked().is_err()); // not populated
    /// ```
    pub fn instantiate_unchecked(&mut self) -> Result<(), Error> {
        self.instantiate(&Policy::allow_all(), &Credentials::current())
    }

    /// Check the whole definition against `policy` for `cred`, then
    /// instantiate and connect its filters (FFPF's `flow_instantiate`),
    /// sharing instances with the group's other flows wherever the prefix
    /// up to an element is the same.
    ///
    /// ```
    /// use sluice_flow::{Flow, Group, policy::{Policy, Credentials}};
    /// let g = Group::new(Default::default());
    /// let mut f = Flow::create(&g);
    /// f.populate("(file,a.pcap) -> (strsearch,GET)").unwrap();
    /// let p = Policy::parse("allow source=* class=*\nrequire sampler before strsearch\n", "site.policy").unwrap();
    /// let e = f.instantiate(&p, &Credentials::current()).unwrap_err();
    /// assert!(e.to_string().starts_with("refused by site.policy:2:"));
    /// ```
    pub fn instantiate(&mut self, policy: &Policy, cred: &Credentials) -> Result<(), Error> {
        if self.state != FlowState::Populated {
            return Err(self.state_err("instantiate"));
        }
        let shape = self.shape()?;
        policy.check(&shape, cred).map_err(Error::Refused)?;
        let graph = self.graph.clone().expect("populated");
        let inner = self.inner.clone();
        let mut g = inner.lock();
        let mut uses: Vec<usize> = Vec::new();
        let mut stages: Vec<Vec<usize>> = Vec::new();
        let result = (|| -> Result<usize, Error> {
            let mut prev: Vec<usize> = Vec::new();
            let mut env = BuildEnv::default();
            for (si, stage) in graph.stages.iter().enumerate() {
                let mut cur = Vec::new();
                for e in stage {
                    let r = self.resolve(e, si == 0)?;
                    let key = Key {
                        class: r.class.to_ascii_lowercase(),
                        args: e.args.clone(),
                        inputs: prev.clone(),
                    };
                    let id = match g.find(&key) {
                        Some(id) => id,
                        None => {
                            let at = |ae: crate::class::ArgError| {
                                let column = match ae.arg {
                                    Some(i) => {
                                        e.arg_columns.get(i).copied().unwrap_or(e.column)
                                            + ae.offset
                                    }
                                    None => e.column,
                                };
                                Error::Spec(spec::SpecError {
                                    column,
                                    message: format!("{}: {}", e.class, ae.message),
                                })
                            };
                            let kind = if r.source {
                                let src = inner
                                    .classes
                                    .source(&e.class)
                                    .expect("resolved")
                                    .open(&e.args)
                                    .map_err(at)?;
                                Kind::Source {
                                    src,
                                    head: OwnedPacket::default(),
                                    has_head: false,
                                    ended: false,
                                }
                            } else {
                                let mut elem = inner
                                    .classes
                                    .filter(&e.class)
                                    .expect("resolved")
                                    .build(&e.args, &env)
                                    .map_err(at)?;
                                let mergeable = env
                                    .linktypes
                                    .first()
                                    .is_some_and(|&(lt, be)| elem.ir(lt, be).is_some());
                                Kind::Filter { elem, mergeable }
                            };
                            let mut text = e.clone();
                            text.class = r.class.clone();
                            g.add(Instance {
                                key,
                                class: r.class.clone(),
                                text: text.to_string(),
                                kind,
                                inputs: prev.clone(),
                                mbuf: Arc::new(MBuf::new(r.mbuf_words)),
                                ibuf: None,
                                users: 0,
                                active: 0,
                            })
                        }
                    };
                    if !uses.contains(&id) {
                        g.inst_mut(id).users += 1;
                        uses.push(id);
                    }
                    if r.source {
                        if let Kind::Source { src, .. } = &g.inst(id).kind {
                            for lt in src.linktypes() {
                                if !env.linktypes.contains(&lt) {
                                    env.linktypes.push(lt);
                                }
                            }
                        }
                    }
                    cur.push(id);
                }
                stages.push(cur.clone());
                cur.sort_unstable();
                cur.dedup();
                prev = cur;
            }
            let terminal = if prev.len() == 1 {
                prev[0]
            } else {
                let key = Key {
                    class: "join".into(),
                    args: vec![],
                    inputs: prev.clone(),
                };
                let id = match g.find(&key) {
                    Some(id) => id,
                    None => g.add(Instance {
                        key,
                        class: "join".into(),
                        text: "(join)".into(),
                        kind: Kind::Join,
                        inputs: prev.clone(),
                        mbuf: Arc::new(MBuf::new(0)),
                        ibuf: None,
                        users: 0,
                        active: 0,
                    }),
                };
                if !uses.contains(&id) {
                    g.inst_mut(id).users += 1;
                    uses.push(id);
                }
                id
            };
            Ok(terminal)
        })();
        let terminal = match result {
            Ok(t) => t,
            Err(e) => {
                g.release(&uses);
                return Err(e);
            }
        };
        let cfg = &inner.cfg;
        let ibuf = g
            .inst_mut(terminal)
            .ibuf
            .get_or_insert_with(|| Arc::new(IBuf::new(cfg.ibuf_entries, cfg.preference)))
            .clone();
        let callback = match self.callback.take() {
            Some((every, f)) => {
                let Some(reader) = Reader::new(inner.pbuf.clone(), ibuf, cfg.batch as u64) else {
                    g.release(&uses);
                    return Err(Error::Config(
                        "the flow's index buffer has no free reader slot".into(),
                    ));
                };
                Some(Arc::new(Mutex::new(Callback {
                    every,
                    f,
                    reader: Some(reader),
                    calls: 0,
                })))
            }
            None => None,
        };
        let id = g.flows.len();
        g.flows.push(Some(FlowRec {
            spec: self.spec.clone(),
            state: FlowState::Instantiated,
            stages,
            terminal,
            uses,
            callback,
        }));
        g.dirty = true;
        self.id = Some(id);
        self.state = FlowState::Instantiated;
        Ok(())
    }

    fn set_active(&mut self, on: bool) {
        let Some(id) = self.id else { return };
        let mut g = self.inner.lock();
        let uses = g.flows[id]
            .as_ref()
            .map(|f| f.uses.clone())
            .unwrap_or_default();
        for u in uses {
            if let Some(i) = g.instances[u].as_mut() {
                if on {
                    i.active += 1;
                } else {
                    i.active -= 1;
                    if i.active == 0 {
                        if let Kind::Filter { elem, .. } = &mut i.kind {
                            elem.sync(&i.mbuf);
                        }
                    }
                }
            }
        }
        if let Some(f) = g.flows[id].as_mut() {
            f.state = if on {
                FlowState::Active
            } else {
                FlowState::Paused
            };
        }
        g.dirty = true;
    }

    /// Start capturing (FFPF's `flow_activate`); also resumes a paused flow.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.populate("(file,/nonexistent.pcap)").unwrap();
    /// assert!(f.instantiate_unchecked().is_err()); // the file cannot be opened
    /// assert!(f.activate().is_err());
    /// ```
    pub fn activate(&mut self) -> Result<(), Error> {
        if !matches!(self.state, FlowState::Instantiated | FlowState::Paused) {
            return Err(self.state_err("activate"));
        }
        self.set_active(true);
        self.state = FlowState::Active;
        Ok(())
    }

    /// Stop capturing for now (FFPF's `flow_pause`); instances the flow
    /// shares with active flows go on running for them.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let mut f = sluice_flow::Flow::create(&g);
    /// assert_eq!(f.pause().unwrap_err().to_string(), "cannot pause a flow that is created");
    /// ```
    pub fn pause(&mut self) -> Result<(), Error> {
        if self.state != FlowState::Active {
            return Err(self.state_err("pause"));
        }
        self.set_active(false);
        self.state = FlowState::Paused;
        Ok(())
    }

    /// Close the flow (FFPF's `flow_close`): its readers, callback and every
    /// instance no other flow uses are freed. Dropping the flow does the
    /// same.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let f = sluice_flow::Flow::create(&g);
    /// f.close();
    /// ```
    pub fn close(mut self) {
        self.close_inner();
    }

    fn close_inner(&mut self) {
        if self.state == FlowState::Active {
            self.set_active(false);
        }
        if let Some(id) = self.id.take() {
            let mut g = self.inner.lock();
            if let Some(rec) = g.flows[id].take() {
                g.release(&rec.uses);
                drop(rec.callback);
            }
        }
        self.state = FlowState::Closed;
    }

    fn rec<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&GraphState, &FlowRec) -> T,
    ) -> Result<T, Error> {
        let id = self.id.ok_or_else(|| self.state_err(op))?;
        let g = self.inner.lock();
        let rec = g.flows[id].as_ref().ok_or_else(|| self.state_err(op))?;
        Ok(f(&g, rec))
    }

    /// A new reader of the flow's packets (FFPF's `filter_getnext_pkt` and
    /// `wait_for_n_pkts` are [`Reader::next`] and [`Reader::wait_for`]),
    /// advancing its position every `batch` packets. Under slow-reader
    /// preference a reader that does not read holds the writer back.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let f = sluice_flow::Flow::create(&g);
    /// assert!(f.reader(64).is_err());
    /// ```
    pub fn reader(&self, batch: u64) -> Result<Reader, Error> {
        let pbuf = self.inner.pbuf.clone();
        let ibuf = self.rec("read", |g, r| g.inst(r.terminal).ibuf.clone())?;
        let ibuf = ibuf.ok_or_else(|| Error::Config("flow has no index buffer".into()))?;
        Reader::new(pbuf, ibuf, batch)
            .ok_or_else(|| Error::Config("the flow's index buffer has no free reader slot".into()))
    }

    /// The MBuf of the flow's element at `stage`, `index` (both from 0), to
    /// read results or write parameters.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// let f = sluice_flow::Flow::create(&g);
    /// assert!(f.mbuf(1, 0).is_err());
    /// ```
    pub fn mbuf(&self, stage: usize, index: usize) -> Result<Arc<MBuf>, Error> {
        self.rec("read the memory of", |g, r| {
            r.stages
                .get(stage)
                .and_then(|s| s.get(index))
                .map(|&id| g.inst(id).mbuf.clone())
        })?
        .ok_or_else(|| Error::Config(format!("no element at stage {stage}, position {index}")))
    }

    /// Names of the instances the flow uses, in flow order (shared
    /// instances have the same name in every flow).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert!(sluice_flow::Flow::create(&g).instances().is_err());
    /// ```
    pub fn instances(&self) -> Result<Vec<String>, Error> {
        self.rec("list the instances of", |g, r| {
            r.uses.iter().map(|&id| g.inst(id).name(id)).collect()
        })
    }

    /// What the flow and each of its elements produced so far.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default());
    /// assert!(sluice_flow::Flow::create(&g).report().is_err());
    /// ```
    pub fn report(&self) -> Result<FlowReport, Error> {
        let state = self.state;
        self.rec("report on", |g, r| {
            let mut filters = Vec::new();
            for &id in &r.uses {
                let i = g.inst(id);
                let result = match &i.kind {
                    Kind::Source { src, .. } => src.report(),
                    Kind::Filter { elem, .. } => elem.report(&i.mbuf),
                    Kind::Join => Value::Null,
                };
                filters.push(FilterReport {
                    class: i.class.clone(),
                    instance: i.name(id),
                    element: i.text.clone(),
                    result,
                });
            }
            let ibuf = g.inst(r.terminal).ibuf.as_ref();
            let ib_drops = ibuf.map_or(0, |b| b.drops());
            let (packets, lost) = match &r.callback {
                Some(cb) => {
                    let cb = cb.lock().unwrap_or_else(|e| e.into_inner());
                    cb.reader
                        .as_ref()
                        .map_or((0, 0), |rd| (rd.delivered(), rd.lost()))
                }
                None => (ibuf.map_or(0, |b| b.written()), 0),
            };
            FlowReport {
                spec: r.spec.clone(),
                state,
                packets,
                drops: ib_drops + lost,
                filters,
            }
        })
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        self.close_inner();
    }
}
