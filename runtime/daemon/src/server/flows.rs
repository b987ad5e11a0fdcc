//! Flows in the daemon: what a client may open (checked against the
//! daemon's rules and the policy), their filters in the merged
//! classifier, their buffers, and the kernel pre-filter they add up to.
//!
//! A flow is a live source and a set of filters: `(iface,NAME)` alone
//! (every packet), or followed by one stage of parallel filters,
//! `(BPF,"a") | (CSPF,"b") | …`, to which more can be added later
//! ([`Request::AddFilters`](crate::proto::Request::AddFilters)), then
//! any elements with memory ([`super::chain`]). Each packet a flow's
//! filters (and elements) accept reaches the flow once, its index entry
//! saying which filter took it (1 for the first, in order).
//!
//! The rule: a filter enters the classifier only after the policy has
//! allowed it for the user the kernel named, and a flow's buffers are
//! passed to its client only after its kernel pre-filter is in force.

use super::chain::{self, Chain};
use super::control::{err, Answer, Control};
use super::deliver::{Group, Member, Route};
use super::kernel;
use crate::proto::Reply;
use sluice_classifier::merged::Compiled;
use sluice_classifier::FilterId;
use sluice_filter::{Language, Program};
use sluice_flow::buffer::{IBuf, PBuf};
use sluice_flow::policy::{Credentials, ElemShape, FlowShape};
use sluice_shm::Wake;
use std::os::fd::AsFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most flows one client may have open.
const MAX_FLOWS_PER_CLIENT: usize = 1024;
/// Most filters one flow may hold.
pub(crate) const MAX_FILTERS_PER_FLOW: usize = 1 << 20;

/// What a client asked for, checked and allowed.
pub(crate) struct Asked {
    iface: usize,
    /// The filters, with their language prefixes.
    filters: Vec<String>,
    /// The elements after them.
    chain: Vec<chain::Asked>,
}

/// An open flow.
pub(crate) struct Open {
    pub(crate) iface: usize,
    /// Its filters in order (entry results count from 1): classifier id
    /// and the filter as compiled (with its language prefix).
    pub(crate) filters: Vec<(FilterId, String)>,
    /// The elements after its filters, as asked.
    after: Vec<chain::Asked>,
    pub(crate) member: Arc<Member>,
    pub(crate) group: Arc<Group>,
    pub(crate) spec: String,
    pub(crate) priority: i32,
}

/// An error reply at a column of the specification.
fn at(column: usize, message: String) -> Answer {
    (
        Reply::Error {
            message,
            rule: None,
            column: Some(column),
        },
        Vec::new(),
    )
}

/// The class of a filter element, and the language prefix it gives its
/// argument.
pub(crate) fn filter_class(class: &str) -> Option<(&'static str, &'static str)> {
    match class.to_ascii_lowercase().as_str() {
        "bpf" => Some(("bpf", "")),
        "cspf" => Some(("cspf", "cspf:")),
        "dpf" => Some(("dpf", "dpf:")),
        _ => None,
    }
}

impl Control<'_> {
    /// The credentials of client `id`, as the kernel gave them.
    fn credentials(&self, id: u64) -> Option<Credentials> {
        let c = self.clients.iter().find(|c| c.id == id)?;
        let mut gids = vec![c.peer.gid];
        gids.extend(c.peer.groups.iter().copied().filter(|g| *g != c.peer.gid));
        Some(Credentials {
            uid: c.peer.uid,
            gids,
        })
    }

    /// The flow a specification asks for: its interface, its filters
    /// (with their language prefixes; none: every packet) and the
    /// elements after them, checked for the daemon's rules and the
    /// policy, or the error reply.
    pub(crate) fn check(&self, id: u64, spec: &str) -> Result<Asked, Answer> {
        let graph = sluice_flow::spec::parse(spec).map_err(|e| at(e.column, e.message.clone()))?;
        let first = &graph.stages[0];
        let src = &first[0];
        let class = src.class.to_ascii_lowercase();
        if first.len() != 1 || !(class == "iface" || class == "device") {
            return Err(at(
                src.column,
                "a daemon flow starts with one live source, (iface,NAME): files are read in the client".into(),
            ));
        }
        if src.args.len() != 1 {
            return Err(at(
                src.column,
                "(iface,NAME) takes the interface's name only (the daemon decides when capture ends)".into(),
            ));
        }
        let name = &src.args[0];
        let Some(iface) = self.d.ifaces.iter().position(|i| &i.name == name) else {
            let names: Vec<&str> = self.d.ifaces.iter().map(|i| i.name.as_str()).collect();
            return Err(at(
                src.arg_columns.first().copied().unwrap_or(src.column),
                format!(
                    "the daemon does not capture on {name} (it captures on {})",
                    names.join(", ")
                ),
            ));
        };
        // The first stage after the source is the flow's filters when it
        // holds filters only (BPF, CSPF, DPF, side by side); every stage
        // after them is one element of any filter class.
        let mut rest = &graph.stages[1..];
        let mut filters = Vec::new();
        let mut elements = Vec::new();
        if let Some(stage) = rest.first() {
            if stage.iter().all(|e| filter_class(&e.class).is_some()) {
                for e in stage {
                    let (class, prefix) = filter_class(&e.class).expect("checked");
                    if e.args.len() != 1 {
                        return Err(at(e.column, "a filter takes one argument".into()));
                    }
                    let text = format!("{prefix}{}", e.args[0]);
                    let col = e.arg_columns.first().copied().unwrap_or(e.column);
                    check_text(&text).map_err(|m| at(col, m))?;
                    elements.push(ElemShape::new(class, false, &[e.args[0].as_str()]));
                    filters.push(text);
                }
                rest = &rest[1..];
            }
        }
        if rest.len() > chain::MAX_ELEMENTS {
            return Err(at(
                rest[chain::MAX_ELEMENTS][0].column,
                format!(
                    "a daemon flow has at most {} elements after its filters",
                    chain::MAX_ELEMENTS
                ),
            ));
        }
        let mut after = Vec::new();
        for stage in rest {
            if stage.len() != 1 {
                return Err(at(
                    stage[1].column,
                    "after its filters, a daemon flow's stages hold one element each".into(),
                ));
            }
            let a = chain::check(&stage[0]).map_err(|(c, m)| at(c, m))?;
            after.push(a);
        }
        self.authorise_flow(id, name, elements, &after)?;
        Ok(Asked {
            iface,
            filters,
            chain: after,
        })
    }

    /// The policy's word on a flow of `filters`, then the elements
    /// `after` them, on interface `name`.
    fn authorise_flow(
        &self,
        id: u64,
        name: &str,
        filters: Vec<ElemShape>,
        after: &[chain::Asked],
    ) -> Result<(), Answer> {
        let mut shape = FlowShape {
            stages: vec![vec![ElemShape::new("iface", true, &[name])]],
            callback_every: None,
        };
        if !filters.is_empty() {
            shape.stages.push(filters);
        }
        shape
            .stages
            .extend(after.iter().map(|a| vec![a.shape.clone()]));
        let cred = self.credentials(id).ok_or_else(|| err("gone"))?;
        self.authorise(&shape, &cred)
    }

    /// The policy's word: with no policy file, the daemon's own user and
    /// root only.
    fn authorise(&self, shape: &FlowShape, cred: &Credentials) -> Result<(), Answer> {
        if self.d.policy.is_allow_all() {
            let me = rustix::process::getuid().as_raw();
            if cred.uid == 0 || cred.uid == me {
                return Ok(());
            }
            return Err(err(format!(
                "uid {} may not open flows: the daemon runs without a policy file (--policy), so only root and uid {me} may",
                cred.uid
            )));
        }
        self.d.policy.check(shape, cred).map_err(|r| {
            (
                Reply::Error {
                    message: r.message.clone(),
                    rule: r.rule.clone(),
                    column: None,
                },
                Vec::new(),
            )
        })
    }

    /// Compile filters for an interface, for the merged classifier (none:
    /// one that takes every packet).
    fn compile_all(&self, iface: usize, filters: &[String]) -> Result<Vec<Compiled>, Answer> {
        let i = &self.d.ifaces[iface];
        let lt = sluice_filter::LinkType::from_number(u32::from(i.linktype))
            .ok_or_else(|| err(format!("link type {} is not supported", i.linktype)))?;
        let builder = Program::builder(lt).snaplen(i.snaplen);
        let all: Vec<&str> = match filters.is_empty() {
            true => vec![""],
            false => filters.iter().map(String::as_str).collect(),
        };
        sluice_split::compile::compile_all(&builder, &all)
            .into_iter()
            .enumerate()
            .map(|(n, c)| {
                c.map_err(|e| {
                    let which = match all.len() {
                        1 => String::new(),
                        _ => format!("filter {}: ", n + 1),
                    };
                    (
                        Reply::Error {
                            message: format!("{which}{e}"),
                            rule: None,
                            column: e.column(),
                        },
                        Vec::new(),
                    )
                })
            })
            .collect()
    }

    /// Open a flow for client `id`.
    pub(crate) fn open(&mut self, id: u64, spec: &str, priority: i32) -> Answer {
        if self
            .clients
            .iter()
            .find(|c| c.id == id)
            .is_some_and(|c| c.flows.len() >= MAX_FLOWS_PER_CLIENT)
        {
            return err(format!("at most {MAX_FLOWS_PER_CLIENT} flows per client"));
        }
        let asked = match self.check(id, spec) {
            Ok(x) => x,
            Err(a) => {
                self.refused += 1;
                return a;
            }
        };
        let compiled = match self.compile_all(asked.iface, &asked.filters) {
            Ok(c) => c,
            Err(a) => return a,
        };
        let chain = match asked.chain.is_empty() {
            true => None,
            false => match Chain::build(&asked.chain, self.d.ifaces[asked.iface].linktype) {
                Ok(c) => Some(c),
                Err(m) => return err(m),
            },
        };
        match self.install(id, asked, compiled, chain, spec, priority) {
            Ok(a) => a,
            Err(e) => err(format!("cannot open the flow: {e}")),
        }
    }

    /// Put a compiled flow in place: its group (made for the user's first
    /// flow on the interface), its index buffer with the client's reader
    /// registered at its start, its filters and routes; then the answer
    /// with the three descriptors, once its kernel pre-filter is in force.
    fn install(
        &mut self,
        id: u64,
        asked: Asked,
        compiled: Vec<Compiled>,
        chain: Option<Chain>,
        spec: &str,
        priority: i32,
    ) -> std::io::Result<Answer> {
        let Asked {
            iface,
            filters: texts,
            chain: after,
        } = asked;
        let (memories, memory_fds) = match &chain {
            Some(c) => c.memories()?,
            None => (Vec::new(), Vec::new()),
        };
        let uid = self.credentials(id).map_or(0, |c| c.uid);
        let cfg = &self.d.config;
        let (slots, slot_bytes, entries, pref) = (
            cfg.slots(),
            cfg.slot_bytes,
            cfg.ibuf_entries(),
            cfg.preference,
        );
        let i = &mut self.d.ifaces[iface];
        let group = match i.groups.get(&uid) {
            Some(g) => g.clone(),
            None => {
                let g = Arc::new(Group::new(PBuf::in_region(slots, slot_bytes, pref)?));
                i.groups.insert(uid, g.clone());
                g
            }
        };
        let ibuf = Arc::new(IBuf::in_region(entries, pref)?);
        let reader = ibuf
            .register()
            .ok_or_else(|| std::io::Error::other("no reader slot"))?;
        let wake = Arc::new(Wake::new()?);
        let flow_id = self.next_flow;
        self.next_flow += 1;
        let member = Arc::new(Member::new(flow_id, ibuf.clone(), wake.clone(), chain));
        group.members.rcu(|m| {
            let mut v = (**m).clone();
            v.push(member.clone());
            v
        });
        let mut fds = vec![
            group
                .pbuf
                .region()
                .ok_or_else(|| std::io::Error::other("no region"))?
                .read_only_fd()?,
            ibuf.region()
                .ok_or_else(|| std::io::Error::other("no region"))?
                .fd()
                .try_clone_to_owned()?,
            wake.as_fd().try_clone_to_owned()?,
        ];
        fds.extend(memory_fds);
        let mut open = Open {
            iface,
            filters: Vec::new(),
            after,
            member,
            group,
            spec: spec.to_string(),
            priority,
        };
        let texts = match texts.is_empty() {
            true => vec![String::new()],
            false => texts,
        };
        self.place(&mut open, compiled, texts);
        let i = &self.d.ifaces[iface];
        let (linktype, snaplen) = (i.linktype, i.snaplen.min(slot_bytes as u32));
        let client = self
            .clients
            .iter_mut()
            .find(|c| c.id == id)
            .ok_or_else(|| std::io::Error::other("gone"))?;
        let number = client.flows.keys().max().map_or(1, |n| n + 1);
        client.flows.insert(number, open);
        self.set_union(iface, true);
        Ok((
            Reply::Opened {
                flow: number,
                reader,
                linktype,
                snaplen,
                memories,
            },
            fds,
        ))
    }

    /// Insert a flow's new filters into the classifier and route them to
    /// it, numbered after those it has; publish.
    fn place(&mut self, open: &mut Open, compiled: Vec<Compiled>, texts: Vec<String>) {
        let i = &mut self.d.ifaces[open.iface];
        let mut routes = (**i.routes.load()).clone();
        for (c, text) in compiled.into_iter().zip(texts) {
            let c = Arc::new(c);
            let id = i.classifier.insert_compiled(c.clone(), open.priority);
            i.compiled.insert(id.0, c);
            open.filters.push((id, text));
            let route = Route {
                group: open.group.clone(),
                member: open.member.clone(),
                result: open.filters.len() as u32,
            };
            routes = routes.with(id.0, Some(Arc::new(route)));
        }
        i.routes.store(Arc::new(routes));
        i.classifier.publish();
    }

    /// Replace a flow's filters, keeping its buffers (pcap_setfilter).
    pub(crate) fn refilter(&mut self, id: u64, flow: u64, spec: &str) -> Answer {
        let Some(old_iface) = self.open_flow(id, flow).map(|o| o.iface) else {
            return err(format!("no flow {flow}"));
        };
        let Asked {
            iface,
            filters: texts,
            chain: after,
        } = match self.check(id, spec) {
            Ok(x) => x,
            Err(a) => {
                self.refused += 1;
                return a;
            }
        };
        if iface != old_iface {
            return err("a new filter must keep the flow's interface");
        }
        let same = |a: &[chain::Asked], b: &[chain::Asked]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| x.class == y.class && x.args == y.args)
        };
        if !self
            .open_flow(id, flow)
            .is_some_and(|o| same(&o.after, &after))
        {
            return err("a new filter must keep the flow's elements after its filters");
        }
        let compiled = match self.compile_all(iface, &texts) {
            Ok(c) => c,
            Err(a) => return a,
        };
        let texts = match texts.is_empty() {
            true => vec![String::new()],
            false => texts,
        };
        let Some(mut open) = self.take_flow(id, flow) else {
            return err(format!("no flow {flow}"));
        };
        let old = std::mem::take(&mut open.filters);
        self.place(&mut open, compiled, texts);
        self.unplace(open.iface, &old);
        open.spec = spec.to_string();
        self.put_flow(id, flow, open);
        self.set_union(iface, true);
        (Reply::Done, Vec::new())
    }

    /// Add filters to a flow (each checked by the policy as the flow's
    /// next elements): the entry result of the first of them.
    pub(crate) fn add_filters(&mut self, id: u64, flow: u64, filters: &[String]) -> Answer {
        let Some((iface, have, after)) = self
            .open_flow(id, flow)
            .map(|o| (o.iface, o.filters.len(), o.after.clone()))
        else {
            return err(format!("no flow {flow}"));
        };
        if have + filters.len() > MAX_FILTERS_PER_FLOW {
            return err(format!("at most {MAX_FILTERS_PER_FLOW} filters per flow"));
        }
        let mut elements = Vec::new();
        for (n, text) in filters.iter().enumerate() {
            let (lang, program, _) = Language::split(text);
            let class = match lang {
                Language::Cspf => "cspf",
                Language::Dpf => "dpf",
                _ => "bpf",
            };
            if let Err(m) = check_text(text) {
                return err(format!("filter {}: {m}", n + 1));
            }
            elements.push(ElemShape::new(class, false, &[program]));
        }
        let name = self.d.ifaces[iface].name.clone();
        if let Err(a) = self.authorise_flow(id, &name, elements, &after) {
            self.refused += 1;
            return a;
        }
        let compiled = match self.compile_all(iface, filters) {
            Ok(c) => c,
            Err(a) => return a,
        };
        let Some(mut open) = self.take_flow(id, flow) else {
            return err(format!("no flow {flow}"));
        };
        let first = open.filters.len() as u32 + 1;
        self.place(&mut open, compiled, filters.to_vec());
        self.put_flow(id, flow, open);
        self.set_union(iface, true);
        (Reply::Added { first }, Vec::new())
    }

    /// What the elements after a flow's filters report, and why the flow
    /// ended if one failed.
    pub(crate) fn report(&self, id: u64, flow: u64) -> Answer {
        let Some(open) = self.open_flow(id, flow) else {
            return err(format!("no flow {flow}"));
        };
        let (elements, failed) = match &open.member.chain {
            Some(c) => {
                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                (c.reports(), c.failed.clone())
            }
            None => (serde_json::json!([]), None),
        };
        (Reply::Report { elements, failed }, Vec::new())
    }

    fn open_flow(&self, id: u64, flow: u64) -> Option<&Open> {
        self.clients
            .iter()
            .find(|c| c.id == id)
            .and_then(|c| c.flows.get(&flow))
    }

    fn take_flow(&mut self, id: u64, flow: u64) -> Option<Open> {
        self.clients
            .iter_mut()
            .find(|c| c.id == id)
            .and_then(|c| c.flows.remove(&flow))
    }

    fn put_flow(&mut self, id: u64, flow: u64, open: Open) {
        if let Some(c) = self.clients.iter_mut().find(|c| c.id == id) {
            c.flows.insert(flow, open);
        }
    }

    /// Take filters out of an interface's classifier and routes.
    fn unplace(&mut self, iface: usize, filters: &[(FilterId, String)]) {
        let i = &mut self.d.ifaces[iface];
        for (f, _) in filters {
            i.classifier.remove(*f);
            i.compiled.remove(&f.0);
        }
        i.classifier.publish();
        let mut routes = (**i.routes.load()).clone();
        for (f, _) in filters {
            routes = routes.with(f.0, None);
        }
        i.routes.store(Arc::new(routes));
    }

    /// Close one flow of a client; false when it has none of that number.
    pub(crate) fn close(&mut self, id: u64, flow: u64) -> bool {
        let Some(open) = self.take_flow(id, flow) else {
            return false;
        };
        self.release(open);
        true
    }

    /// A flow's filters out, its buffers released, its reader told.
    pub(crate) fn release(&mut self, open: Open) {
        self.unplace(open.iface, &open.filters);
        let i = &mut self.d.ifaces[open.iface];
        let member = open.member.clone();
        open.group.members.rcu(|m| {
            m.iter()
                .filter(|x| !Arc::ptr_eq(x, &member))
                .cloned()
                .collect::<Vec<_>>()
        });
        open.member.ibuf.unregister_all();
        open.member.ibuf.finish();
        let _ = open.member.wake.signal();
        if open.group.members.load().is_empty() {
            i.groups.retain(|_, g| !Arc::ptr_eq(g, &open.group));
        }
        self.set_union(open.iface, false);
    }

    /// Recompute an interface's kernel pre-filter: nothing while no flow
    /// is open, the union of the flows' pcap filters where it fits, else
    /// everything; the capture thread swaps it in. With `wait`, until the
    /// capture thread has the new filter in force (a flow just opened
    /// must get its packets from the moment its client is told it is).
    pub(super) fn set_union(&mut self, iface: usize, wait: bool) {
        let filters: Vec<(FilterId, &str)> = self
            .clients
            .iter()
            .flat_map(|c| c.flows.values())
            .filter(|o| o.iface == iface)
            .flat_map(|o| o.filters.iter().map(|(id, t)| (*id, t.as_str())))
            .collect();
        // The pre-filter asks only whether any filter takes a packet: each
        // text once (a thousand flows of `tcp` are one filter there).
        let mut seen = std::collections::HashSet::new();
        let filters: Vec<(FilterId, &str)> =
            filters.into_iter().filter(|f| seen.insert(f.1)).collect();
        let exprs: Vec<&str> = filters.iter().map(|f| f.1).collect();
        let ids: Vec<u32> = filters.iter().map(|f| f.0 .0).collect();
        let i = &mut self.d.ifaces[iface];
        i.held.release(i.applied.load(Ordering::Acquire));
        let now = i.union.lock().unwrap_or_else(|e| e.into_inner()).1.clone();
        let (program, chain) = match kernel::choose(i, &ids, &exprs, &now) {
            kernel::Choice::Same => return,
            kernel::Choice::New(p, chain) => (p, chain),
        };
        let generation = {
            let mut u = i.union.lock().unwrap_or_else(|e| e.into_inner());
            u.0 += 1;
            u.1 = program;
            u.0
        };
        if let Some(c) = chain {
            i.held.keep(generation, c);
        }
        i.controls.reload.store(true, Ordering::Relaxed);
        if !wait {
            return;
        }
        let start = Instant::now();
        while i.applied.load(Ordering::Acquire) < generation
            && start.elapsed() < Duration::from_secs(1)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A filter's text, as the daemon takes it: no `@FILE` (the daemon never
/// opens files), else why not.
fn check_text(text: &str) -> Result<(), String> {
    let (_, program, _) = Language::split(text);
    match program.trim_start().starts_with('@') {
        true => Err(
            "the daemon never opens files: read the program in the client and send its text".into(),
        ),
        false => Ok(()),
    }
}
