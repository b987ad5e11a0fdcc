//! Running packets through a group's instance graph: the plan (filters,
//! joins and banks of filters merged into one classifier), sources in
//! timestamp order, and delivery to the flows' index buffers.

use super::*;

impl GraphState {
    pub(super) fn inst(&self, id: usize) -> &Instance {
        self.instances[id].as_ref().expect("live instance")
    }

    pub(super) fn inst_mut(&mut self, id: usize) -> &mut Instance {
        self.instances[id].as_mut().expect("live instance")
    }

    pub(super) fn find(&self, key: &Key) -> Option<usize> {
        self.instances
            .iter()
            .position(|i| i.as_ref().is_some_and(|i| i.key == *key))
    }

    pub(super) fn add(&mut self, inst: Instance) -> usize {
        self.instances.push(Some(inst));
        self.results.push(0);
        self.instances.len() - 1
    }

    /// Drop a flow's use of instances; free those nobody uses.
    pub(super) fn release(&mut self, ids: &[usize]) {
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
    pub(super) fn replan(&mut self, cfg: &GroupConfig) {
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
    pub(super) fn next_source(&mut self) -> Result<Option<usize>, Error> {
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
                    let t = (head.packet.ts_sec, head.packet.ts_nsec);
                    if best.is_none_or_later(t) {
                        best = Some((s, t));
                    }
                }
            }
        }
        Ok(best.map(|b| b.0))
    }

    pub(super) fn due(&self, s: usize) -> Option<Instant> {
        match &self.inst(s).kind {
            Kind::Source { head, .. } => head.due,
            _ => None,
        }
    }

    pub(super) fn process(&mut self, s: usize, pbuf: &PBuf, pref: Preference) -> Result<(), Error> {
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
            data: &head.packet.data,
            wirelen: head.packet.wirelen,
            linktype: head.packet.linktype,
            ts_sec: head.packet.ts_sec,
            ts_nsec: head.packet.ts_nsec,
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
                        let mut merged = NativeAuto::empty();
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
                                    merged.insert(k as u32, Arc::new(Compiled::new(f)), 0);
                                }
                                None => ok = false,
                            }
                        }
                        merged.update();
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
            for &t in terminals.iter() {
                if super::took(instances, results, t) {
                    if let Some(i) = instances[t].as_mut() {
                        i.taken += 1;
                    }
                }
            }
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
                    let meta = Meta::from(&head.packet.as_packet());
                    match pbuf.store(&meta, &head.packet.data, oldest) {
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

    pub(super) fn sync_all(&mut self) {
        for inst in self.instances.iter_mut().flatten() {
            if let Kind::Filter { elem, .. } = &mut inst.kind {
                elem.sync(&inst.mbuf);
            }
        }
    }

    pub(super) fn callbacks(&self) -> Vec<Arc<Mutex<Callback>>> {
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
