//! Flow groups and flows: the life cycle, the shared instance graph, the
//! packet loop, reports and the Graphviz picture.
//!
//! This module holds the group ([`Group`]) and the state its flows share
//! (the instance graph, [`GraphState`]); [`graph`] runs packets through
//! that graph, [`lifecycle`] is a flow's life cycle, [`report`] what runs and
//! flows report.

mod access;
mod graph;
mod lifecycle;
mod report;

pub use access::FlowAccess;
pub use lifecycle::Flow;
pub use report::{FilterReport, FlowReport, RunStats};

use crate::buffer::{IBuf, MBuf, Meta, PBuf, PacketRef, Preference, Reader, MAX_SLOTS};
use crate::class::{BuildEnv, Classes, Element, Files, Pkt, Source, SourcePacket};
use crate::policy::{Credentials, ElemShape, FlowShape, Policy};
use crate::spec::{self, Graph};
use crate::value::Value;
use crate::Error;
use sluice_classifier::merged::Compiled;
use sluice_classifier::Engine;
use sluice_native::NativeAuto;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// Most memory the filter instances of one group may hold in their MBufs
/// and IBufs together: 1 GiB. A flow that would take more is refused when
/// it is instantiated.
pub(crate) const MAX_INSTANCE_BYTES: usize = 1 << 30;

/// How a flow group's buffers are sized and managed. Sizes are bounded
/// (see [`crate::buffer`]): [`Group::new`] refuses a configuration past a
/// limit, naming it.
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
        head: SourcePacket,
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
    /// Packets the instance took as the end of a flow: passed on, or
    /// kept by a statistic that passes nothing on (see [`took`]).
    taken: u64,
}

/// Whether terminal `t` took the packet just processed: it passed it on,
/// or it is a statistic that takes everything and the packet reached it
/// (for a join: one of its inputs took it).
fn took(instances: &[Option<Instance>], results: &[u32], t: usize) -> bool {
    if results[t] != 0 {
        return true;
    }
    let Some(inst) = instances[t].as_ref() else {
        return false;
    };
    match &inst.kind {
        Kind::Filter { elem, .. } if elem.takes_all() => {
            inst.inputs.iter().any(|&j| results[j] != 0)
        }
        Kind::Join => inst.inputs.iter().any(|&j| {
            instances[j].as_ref().is_some_and(|i| match &i.kind {
                Kind::Filter { elem, .. } => {
                    elem.takes_all() && i.inputs.iter().any(|&k| results[k] != 0)
                }
                _ => false,
            })
        }),
        _ => false,
    }
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

/// A merged classifier (the default engine, as machine code) and the
/// value each member returns on accept.
type MergedCode = (NativeAuto, Vec<u32>);

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
    scratch: <NativeAuto as Engine>::Scratch,
    ids: Vec<u32>,
    packets: u64,
    stored: u64,
}

impl GraphState {
    /// Bytes the live instances hold in MBufs and IBufs.
    fn buffer_bytes(&self) -> usize {
        self.instances
            .iter()
            .flatten()
            .map(|i| i.mbuf.len() * 4 + i.ibuf.as_ref().map_or(0, |b| b.memory_bytes()))
            .sum()
    }
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
/// let group = Group::new(GroupConfig::default()).unwrap();
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

impl Group {
    /// An empty group with the built-in classes; a configuration past the
    /// buffers' limits is refused with the limit in the error.
    ///
    /// ```
    /// use sluice_flow::{Group, GroupConfig};
    /// let g = Group::new(Default::default()).unwrap();
    /// assert_eq!(g.flow_count(), 0);
    /// let huge = GroupConfig { slots: 1 << 40, ..Default::default() };
    /// assert!(Group::new(huge).err().unwrap().to_string().contains("limit"));
    /// ```
    pub fn new(cfg: GroupConfig) -> Result<Group, Error> {
        Group::with_classes(cfg, Classes::builtin())
    }

    /// An empty group with these classes.
    ///
    /// ```
    /// let g = sluice_flow::Group::with_classes(Default::default(), sluice_flow::class::Classes::builtin()).unwrap();
    /// assert_eq!(g.instance_count(), 0);
    /// ```
    pub fn with_classes(cfg: GroupConfig, classes: Classes) -> Result<Group, Error> {
        if cfg.ibuf_entries > MAX_SLOTS {
            return Err(Error::Config(format!(
                "an index buffer of {} entries is more than the limit of {MAX_SLOTS}",
                cfg.ibuf_entries
            )));
        }
        let pbuf = Arc::new(PBuf::new(cfg.slots, cfg.slot_bytes, cfg.preference)?);
        Ok(Group {
            inner: Arc::new(Inner {
                cfg,
                classes,
                pbuf,
                g: Mutex::new(GraphState::default()),
            }),
        })
    }

    /// The group's configuration.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).unwrap().config().batch, 64);
    /// ```
    pub fn config(&self) -> &GroupConfig {
        &self.inner.cfg
    }

    /// The group's packet buffer.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).unwrap().pbuf().slots(), 1024);
    /// ```
    pub fn pbuf(&self) -> &Arc<PBuf> {
        &self.inner.pbuf
    }

    /// Flows instantiated and not closed.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).unwrap().flow_count(), 0);
    /// ```
    pub fn flow_count(&self) -> usize {
        self.inner.lock().flows.iter().flatten().count()
    }

    /// Filter and source instances alive.
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).unwrap().instance_count(), 0);
    /// ```
    pub fn instance_count(&self) -> usize {
        self.inner.lock().instances.iter().flatten().count()
    }

    /// Bytes held by the instances' buffers (MBufs and IBufs; not the
    /// shared PBuf nor the elements' own state).
    ///
    /// ```
    /// assert_eq!(sluice_flow::Group::new(Default::default()).unwrap().instance_buffer_bytes(), 0);
    /// ```
    pub fn instance_buffer_bytes(&self) -> usize {
        self.inner.lock().buffer_bytes()
    }

    /// Read every source of the active flows to its end, running the
    /// filters, storing wanted packets once and calling callbacks every
    /// `N` packets (and once more at the end with what is left).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
    /// assert!(g.run().unwrap().finished);
    /// ```
    pub fn run(&self) -> Result<RunStats, Error> {
        self.run_for(u64::MAX)
    }

    /// Like [`Group::run`], stopping after about `packets` packets (whole
    /// turns of the loop); `finished` says whether the sources are done.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
