//! A flow's life cycle (FFPF §2.1): create, populate, instantiate (with
//! authorisation), activate, pause, close, and what it reports.

use super::*;

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
/// let group = Group::new(Default::default()).unwrap();
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
    /// A source's file, as written.
    file: Option<String>,
    /// The files the element names with `@FILE`, as written.
    reads: Vec<String>,
}

/// An argument error of element `e` as a specification error with the
/// column of the argument.
fn arg_error(e: &spec::Element, ae: crate::class::ArgError) -> Error {
    let column = match ae.arg {
        Some(i) => e.arg_columns.get(i).copied().unwrap_or(e.column) + ae.offset,
        None => e.column,
    };
    Error::Spec(spec::SpecError {
        column,
        message: format!("{}: {}", e.class, ae.message),
    })
}

/// `path` made canonical, or the error at element `e`'s argument `arg`.
fn canonical_at(e: &spec::Element, arg: usize, path: &str) -> Result<PathBuf, Error> {
    crate::policy::canonical(Path::new(path))
        .map_err(|err| arg_error(e, crate::class::ArgError::at(arg, format!("{path}: {err}"))))
}

impl Flow {
    /// A new, empty flow handle in `group` (FFPF's `flow_create`).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
    /// let f = sluice_flow::Flow::create(&g);
    /// assert_eq!(f.state().to_string(), "created");
    /// ```
    pub fn state(&self) -> FlowState {
        self.state
    }

    /// The specification it was populated with.
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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

    /// The element's class and what authorisation needs to know; with
    /// `files`, the text of its `@FILE`s is checked too (else they are
    /// named, not read).
    fn resolve(
        &self,
        e: &spec::Element,
        first: bool,
        files: Option<&Files>,
    ) -> Result<Resolved, Error> {
        let classes = &self.inner.classes;
        let arg_err = |ae: crate::class::ArgError| arg_error(e, ae);
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
                file: c.file(&e.args),
                reads: vec![],
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
            let reads = c.files(&e.args);
            let info = match files {
                Some(f) if !reads.is_empty() => c.check_loaded(&e.args, f),
                _ => c.check(&e.args),
            }
            .map_err(arg_err)?;
            Ok(Resolved {
                class: c.name().to_string(),
                source: false,
                mbuf_words: info.mbuf_words,
                externs: info.externs,
                file: None,
                reads,
            })
        }
    }

    /// Give the flow its filter graph, in the `ffpf-flow` notation (FFPF's
    /// `flow_populate`). Classes and arguments are checked now; errors
    /// carry the column. Allowed until the flow is instantiated (a second
    /// call replaces the graph).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
                self.resolve(e, si == 0, None)?;
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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

    /// The whole definition as authorisation sees it: classes, sources
    /// with their files made canonical, the files elements name with
    /// `@FILE` (canonical), external functions, the callback interval.
    /// Nothing is opened or read (paths are resolved by the kernel, so a
    /// path that does not exist is an error here).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.populate("(file,/dev/null) -> (BPF,tcp) | (BPF,@/etc/hostname)").unwrap();
    /// let s = f.shape().unwrap();
    /// assert_eq!(s.stages[1][0].class, "bpf");
    /// assert_eq!(s.stages[0][0].file.as_deref(), Some(std::path::Path::new("/dev/null")));
    /// assert_eq!(s.stages[1][1].reads.len(), 1);
    /// ```
    pub fn shape(&self) -> Result<FlowShape, Error> {
        self.shape_with(None)
    }

    fn shape_with(&self, files: Option<&Files>) -> Result<FlowShape, Error> {
        let graph = self
            .graph
            .as_ref()
            .ok_or_else(|| self.state_err("describe"))?;
        let mut stages = Vec::new();
        for (si, stage) in graph.stages.iter().enumerate() {
            let mut s = Vec::new();
            for e in stage {
                let r = self.resolve(e, si == 0, files)?;
                let file = match &r.file {
                    Some(p) => Some(canonical_at(e, 0, p)?),
                    None => None,
                };
                let reads = r
                    .reads
                    .iter()
                    .map(|p| canonical_at(e, 0, p))
                    .collect::<Result<Vec<_>, _>>()?;
                s.push(ElemShape {
                    class: r.class.to_ascii_lowercase(),
                    source: r.source,
                    args: e.args.clone(),
                    externs: r.externs,
                    file,
                    reads,
                });
            }
            stages.push(s);
        }
        Ok(FlowShape {
            stages,
            callback_every: self.callback.as_ref().map(|c| c.0),
        })
    }

    /// Check the whole definition against `policy` for `cred` without
    /// opening or reading anything: sources, classes and the files named
    /// with `@FILE` (external functions of `@FILE` programs are known, and
    /// checked, once [`Flow::instantiate`] has read them). A front end with
    /// several flows checks them all first.
    ///
    /// ```
    /// use sluice_flow::{Flow, Group, policy::{Policy, Credentials}};
    /// let g = Group::new(Default::default()).unwrap();
    /// let mut f = Flow::create(&g);
    /// f.populate("(file,/dev/null) -> (DPF,@/etc/passwd)").unwrap();
    /// let p = Policy::parse("allow source=* class=*\n", "site.policy").unwrap();
    /// let e = f.authorise(&p, &Credentials::current()).unwrap_err();
    /// assert!(e.to_string().contains("no rule allows reading /etc/passwd"), "{e}");
    /// ```
    pub fn authorise(&self, policy: &Policy, cred: &Credentials) -> Result<(), Error> {
        if policy.is_allow_all() {
            return Ok(());
        }
        let shape = self.shape()?;
        policy.check(&shape, cred).map_err(Error::Refused)
    }

    /// Read the files the flow's elements name with `@FILE` (authorised
    /// already), each from its canonical path, at most 32 MiB each.
    fn read_files(&self, shape: &FlowShape) -> Result<Files, Error> {
        let graph = self.graph.as_ref().expect("populated");
        let mut files = Files::default();
        for (stage, shapes) in graph.stages.iter().zip(&shape.stages) {
            for (e, sh) in stage.iter().zip(shapes) {
                if sh.source {
                    continue;
                }
                let c = self.inner.classes.filter(&e.class).expect("resolved");
                for (written, canonical) in c.files(&e.args).iter().zip(&sh.reads) {
                    if files.get(written).is_some() {
                        continue;
                    }
                    let text = sluice_filter::read_text_file(canonical).map_err(|err| {
                        arg_error(
                            e,
                            crate::class::ArgError::at(0, format!("{written}: {err}")),
                        )
                    })?;
                    files.insert(written, text);
                }
            }
        }
        Ok(files)
    }

    /// Instantiate without authorisation (everything allowed for the
    /// calling user, as with no policy file).
    ///
    /// ```
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
    /// let mut f = sluice_flow::Flow::create(&g);
    /// assert!(f.instantiate_unchecked().is_err()); // not populated
    /// ```
    pub fn instantiate_unchecked(&mut self) -> Result<(), Error> {
        self.instantiate(&Policy::allow_all(), &Credentials::current())
    }

    /// Check the whole definition against `policy` for `cred` before
    /// anything is opened or read ([`Flow::authorise`]), then read the
    /// files named with `@FILE` (each from its canonical path, the path
    /// the policy allowed), check the external functions their programs
    /// call, and instantiate and connect the filters (FFPF's
    /// `flow_instantiate`), sharing instances with the group's other flows
    /// wherever the prefix up to an element is the same. Sources open
    /// their files by canonical path.
    ///
    /// ```
    /// use sluice_flow::{Flow, Group, policy::{Policy, Credentials}};
    /// let g = Group::new(Default::default()).unwrap();
    /// let mut f = Flow::create(&g);
    /// f.populate("(file,/dev/null) -> (strsearch,GET)").unwrap();
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
        let files = self.read_files(&shape)?;
        // The programs read from files may call external functions.
        let shape = self.shape_with(Some(&files))?;
        policy.check(&shape, cred).map_err(Error::Refused)?;
        let graph = self.graph.clone().expect("populated");
        let inner = self.inner.clone();
        let mut g = inner.lock();
        let mut uses: Vec<usize> = Vec::new();
        let mut stages: Vec<Vec<usize>> = Vec::new();
        let result = (|| -> Result<usize, Error> {
            let mut prev: Vec<usize> = Vec::new();
            let mut env = BuildEnv {
                files: files.clone(),
                ..BuildEnv::default()
            };
            let mut new_bytes = 0usize;
            for (si, stage) in graph.stages.iter().enumerate() {
                let mut cur = Vec::new();
                for (ei, e) in stage.iter().enumerate() {
                    let r = self.resolve(e, si == 0, Some(&files))?;
                    let key = Key {
                        class: r.class.to_ascii_lowercase(),
                        args: e.args.clone(),
                        inputs: prev.clone(),
                    };
                    let id = match g.find(&key) {
                        Some(id) => id,
                        None => {
                            let at = |ae: crate::class::ArgError| arg_error(e, ae);
                            new_bytes += r.mbuf_words * 4;
                            let in_use = g.buffer_bytes() + new_bytes;
                            if in_use > MAX_INSTANCE_BYTES {
                                return Err(at(crate::class::ArgError::element(format!(
                                    "the group's filter memory would reach {in_use} bytes, more than the limit of {} MiB",
                                    MAX_INSTANCE_BYTES >> 20
                                ))));
                            }
                            let kind = if r.source {
                                // The file the policy allowed, by its
                                // canonical path.
                                let mut args = e.args.clone();
                                if let Some(p) = &shape.stages[si][ei].file {
                                    args[0] = p.to_string_lossy().into_owned();
                                }
                                let src = inner
                                    .classes
                                    .source(&e.class)
                                    .expect("resolved")
                                    .open(&args)
                                    .map_err(at)?;
                                Kind::Source {
                                    src,
                                    head: SourcePacket::default(),
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
                                taken: 0,
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
                        taken: 0,
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
        let ibuf = match g.inst(terminal).ibuf.clone() {
            Some(b) => b,
            None => {
                let bytes = cfg.ibuf_entries.max(1) * 16;
                let made = if g.buffer_bytes() + bytes > MAX_INSTANCE_BYTES {
                    Err(Error::Config(format!(
                        "the group's filter memory would reach {} bytes with this flow's index buffer, more than the limit of {} MiB",
                        g.buffer_bytes() + bytes,
                        MAX_INSTANCE_BYTES >> 20
                    )))
                } else {
                    IBuf::new(cfg.ibuf_entries, cfg.preference).map(Arc::new)
                };
                match made {
                    Ok(b) => {
                        g.inst_mut(terminal).ibuf = Some(b.clone());
                        b
                    }
                    Err(e) => {
                        g.release(&uses);
                        return Err(e);
                    }
                }
            }
        };
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample.pcap");
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
    /// let mut f = sluice_flow::Flow::create(&g);
    /// f.populate(&format!("(file,{sample}) -> (packetcount)")).unwrap();
    /// f.instantiate_unchecked().unwrap();
    /// assert_eq!((g.flow_count(), g.instance_count()), (1, 2));
    /// f.close();
    /// assert_eq!((g.flow_count(), g.instance_count()), (0, 0));
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
    /// let g = sluice_flow::Group::new(Default::default()).unwrap();
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
            let (delivered, lost) = match &r.callback {
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
                packets: g.inst(r.terminal).taken,
                delivered,
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
