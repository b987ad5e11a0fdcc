//! What the merging tests share: filter sets compiled three ways (sluice's
//! own single-filter program, the IR filter the classifiers merge, and
//! libpcap's optimised and unoptimised programs), the packets, the expected
//! answers, and the engines under test.

use pcap::{BpfProgram, Capture, Linktype};
use sluice::{LinkType, Program};
use sluice_classifier::bitvec::{BitScratch, BitVectors};
use sluice_classifier::cuts::{CutScratch, Cuts};
use sluice_classifier::dag::{Dag, DagScratch};
use sluice_classifier::merged::{Compiled, Merged};
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{Engine, FilterId};
use sluice_native::tree::NativeTree;
use sluice_native::{AutoClassifier, NativeAuto};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// The shared directory (`../shared` from the repository root), if there.
pub fn shared() -> Option<PathBuf> {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared"));
    p.join("conformance").is_dir().then_some(p)
}

/// A number from the environment.
pub fn env_num(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

/// True when `SLUICE_SOAK` is set (to anything but `0`): the larger runs.
pub fn soak() -> bool {
    std::env::var("SLUICE_SOAK").is_ok_and(|v| v != "0" && !v.is_empty())
}

/// sluice's own single-filter program, as `sluice filter` compiles it.
pub fn program(e: &str) -> Program {
    Program::builder(LinkType::EN10MB)
        .snaplen(262_144)
        .expression(e)
        .unwrap_or_else(|err| panic!("{e}: {err}"))
}

/// The filter the classifiers merge, as `sluice split` makes it from the
/// program (the optimised IR); every third filter as the pcap compiler
/// gives it, without the fast-disjunction rewrite.
pub fn compiled(i: usize, e: &str, p: &Program) -> Arc<Compiled> {
    let ir = if i % 3 == 2 {
        sluice::pcap::compile(e, LinkType::EN10MB, 262_144).expect("compiles")
    } else {
        p.ir().expect("an expression has its IR").clone()
    };
    Arc::new(Compiled::new(ir))
}

/// A priority for filter `i`, in -2..=2: many ties, so the lowest id
/// decides often.
pub fn priority(i: usize) -> i32 {
    ((i.wrapping_mul(7919) >> 3) % 5) as i32 - 2
}

/// One filter of a set, compiled every way.
pub struct Member {
    pub expr: String,
    pub program: Program,
    pub compiled: Arc<Compiled>,
    pub priority: i32,
    /// libpcap's optimised and unoptimised programs (`None` where libpcap
    /// is not compared).
    pub libpcap: Option<(BpfProgram, BpfProgram)>,
}

/// Compile a set of expressions; with libpcap's programs when `with_libpcap`.
pub fn members(exprs: &[String], with_libpcap: bool) -> Vec<Member> {
    let cap = Capture::dead(Linktype::ETHERNET).expect("libpcap dead handle");
    exprs
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let program = program(e);
            let libpcap = with_libpcap.then(|| {
                let lp = |opt| {
                    cap.compile(e, opt)
                        .unwrap_or_else(|err| panic!("libpcap refuses {e}: {err}"))
                };
                (lp(true), lp(false))
            });
            Member {
                expr: e.clone(),
                compiled: compiled(i, e, &program),
                program,
                priority: priority(i),
                libpcap,
            }
        })
        .collect()
}

/// A packet: captured bytes and length on the wire, and where it came from.
#[derive(Clone)]
pub struct Pkt {
    pub data: Vec<u8>,
    pub wirelen: u32,
    pub origin: String,
}

impl Pkt {
    pub fn new(data: Vec<u8>, wirelen: u32, origin: String) -> Pkt {
        Pkt {
            data,
            wirelen,
            origin,
        }
    }
}

/// `pkts` plus every truncation (lengths 0 to `max_cut`, and the
/// whole) of every `every`th of them, with the wire length kept:
/// loads past the captured bytes abort the whole filter.
pub fn with_truncations(pkts: Vec<Pkt>, every: usize, max_cut: usize) -> Vec<Pkt> {
    let mut out = Vec::with_capacity(pkts.len() * 2);
    for (k, p) in pkts.iter().enumerate() {
        if k % every != 0 {
            continue;
        }
        for cut in 0..p.data.len().min(max_cut + 1) {
            out.push(Pkt::new(
                p.data[..cut].to_vec(),
                p.wirelen,
                format!("{} cut to {cut}", p.origin),
            ));
        }
    }
    let mut all = pkts;
    all.extend(out);
    all
}

pub fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// The expected answers for every packet: the sorted indexes of the
/// filters that accept it when run alone, by sluice's single-filter
/// program; and, where the members have libpcap's programs, a check that
/// libpcap agrees on each filter. libpcap's `bpf_filter` takes the
/// captured length as the wire length, so it is compared with sluice's
/// program run the same way; its optimiser drops loads that cannot change
/// the result, so on truncated packets either its optimised or its
/// unoptimised answer is right.
pub fn expected(set: &[Member], pkts: &[Pkt]) -> Vec<Vec<u32>> {
    let mut disagreements = Vec::new();
    let mut out = Vec::with_capacity(pkts.len());
    for p in pkts {
        let mut acc = Vec::new();
        for (i, m) in set.iter().enumerate() {
            let ours = m.program.run(&p.data, p.wirelen) != 0;
            if ours {
                acc.push(i as u32);
            }
            let Some((opt, unopt)) = &m.libpcap else {
                continue;
            };
            let ours_caplen = if p.data.len() == p.wirelen as usize {
                ours
            } else {
                m.program.run(&p.data, p.data.len() as u32) != 0
            };
            let (a, b) = (opt.filter(&p.data), unopt.filter(&p.data));
            if ours_caplen != a && ours_caplen != b && disagreements.len() < 20 {
                disagreements.push(format!(
                    "{}: sluice {ours_caplen}, libpcap -O {a} / unoptimised {b} on {} ({} bytes): {}",
                    m.expr,
                    p.origin,
                    p.data.len(),
                    hex(&p.data)
                ));
            }
        }
        out.push(acc);
    }
    assert!(
        disagreements.is_empty(),
        "sluice's single-filter programs disagree with libpcap:\n{}",
        disagreements.join("\n")
    );
    out
}

/// The winner among `matches` (indexes): highest priority, then lowest.
pub fn first_of(set: &[Member], matches: &[u32]) -> Option<u32> {
    matches
        .iter()
        .copied()
        .max_by_key(|&i| (set[i as usize].priority, std::cmp::Reverse(i)))
}

/// Raw engines get ids that are not their indexes, to catch a slot taken
/// for an id.
pub fn raw_id(i: usize) -> u32 {
    2 * i as u32 + 1
}

fn index_of_raw(id: u32) -> u32 {
    assert!(id % 2 == 1, "id {id} was never inserted");
    (id - 1) / 2
}

/// The engines under test, each holding the same filters.
pub struct Engines {
    pub tree: DecisionTree,
    pub native_tree: NativeTree,
    pub native_auto: NativeAuto,
    pub classifier: AutoClassifier,
    pub merged: Merged,
    pub bitvec: BitVectors,
    pub cuts: Cuts,
    pub dag: Dag,
}

/// The diagram's build budget in the tests: small enough that the larger
/// sets leave states to be checked path by path, so both kinds of leaf
/// are covered.
const DAG_WORK: u64 = 1_000_000;

impl Engines {
    pub fn build(set: &[Member]) -> Engines {
        let triples = || {
            set.iter()
                .enumerate()
                .map(|(i, m)| (raw_id(i), &*m.compiled, m.priority))
        };
        let mut e = Engines {
            tree: DecisionTree::default(),
            native_tree: NativeTree::new(),
            native_auto: NativeAuto::empty(),
            classifier: AutoClassifier::default(),
            merged: Merged::default(),
            bitvec: BitVectors::build(triples()),
            cuts: Cuts::build(triples()),
            dag: Dag::build_within(triples(), DAG_WORK),
        };
        for (i, m) in set.iter().enumerate() {
            let (id, c, p) = (raw_id(i), &m.compiled, m.priority);
            e.tree.insert(id, c, p);
            e.native_tree.insert(id, c, p);
            e.native_auto.insert(id, c.clone(), p);
            e.merged.insert(id, c, p);
            assert_eq!(
                e.classifier.insert_compiled(c.clone(), p),
                FilterId(i as u32)
            );
        }
        e.native_tree.update();
        e.native_auto.update();
        e.classifier.publish();
        e
    }

    /// Every engine's answers on every packet equal `want` (indexes,
    /// sorted), one packet at a time and in batches; `classify_first`
    /// equals the highest priority, lowest index among them. Panics with
    /// the first few differences, each filter named by its expression.
    pub fn check(&self, what: &str, set: &[Member], pkts: &[Pkt], want: &[Vec<u32>]) {
        let mut fails: Vec<String> = Vec::new();
        let mut report = |engine: &str, k: usize, got: &[u32], got_first: Option<u32>| {
            let w = &want[k];
            let wf = first_of(set, w);
            if got == &w[..] && got_first == wf {
                return;
            }
            if fails.len() >= 12 {
                return;
            }
            let name = |i: &u32| format!("#{i} `{}`", set[*i as usize].expr);
            let missing: Vec<String> = w.iter().filter(|i| !got.contains(i)).map(name).collect();
            let extra: Vec<String> = got.iter().filter(|i| !w.contains(i)).map(name).collect();
            let p = &pkts[k];
            fails.push(format!(
                "{what}: {engine}: {} (wire {}): missing {missing:?}, extra {extra:?}, first {:?} want {:?}\n  packet {}",
                p.origin,
                p.wirelen,
                got_first.map(|i| name(&i)),
                wf.map(|i| name(&i)),
                hex(&p.data)
            ));
        };
        let from_raw = |v: &mut Vec<u32>| {
            for x in v.iter_mut() {
                *x = index_of_raw(*x);
            }
            v.sort_unstable();
        };
        let reader = self.classifier.reader();
        let (mut ts, mut ns, mut auto_s, mut ms) = Default::default();
        let (mut bs, mut cs) = (BitScratch::default(), CutScratch::default());
        let mut ds = DagScratch::default();
        let mut out = Vec::new();
        for (k, p) in pkts.iter().enumerate() {
            let (d, w) = (&p.data[..], p.wirelen);
            self.tree.classify(d, w, &mut ts, &mut out);
            from_raw(&mut out);
            let f = self.tree.classify_first(d, w, &mut ts).map(index_of_raw);
            report("DecisionTree", k, &out, f);

            self.native_tree.classify(d, w, &mut ns, &mut out);
            from_raw(&mut out);
            let f = self
                .native_tree
                .classify_first(d, w, &mut ns)
                .map(index_of_raw);
            report("NativeTree", k, &out, f);

            Engine::classify(&self.native_auto, d, w, &mut auto_s, &mut out);
            from_raw(&mut out);
            let f = Engine::classify_first(&self.native_auto, d, w, &mut auto_s).map(index_of_raw);
            report("NativeAuto", k, &out, f);

            reader.classify_into(d, w, &mut out);
            let f = reader.classify_first(d, w).map(|f| f.0);
            report("AutoClassifier", k, &out, f);

            self.merged.classify(d, w, &mut ms, &mut out);
            from_raw(&mut out);
            let f = self.merged.classify_first(d, w, &mut ms).map(index_of_raw);
            report("Merged", k, &out, f);

            self.bitvec.classify(d, w, &mut bs, &mut out);
            from_raw(&mut out);
            let f = self.bitvec.classify_first(d, w, &mut bs).map(index_of_raw);
            report("BitVectors", k, &out, f);

            self.cuts.classify(d, w, &mut cs, &mut out);
            from_raw(&mut out);
            let f = self.cuts.classify_first(d, w, &mut cs).map(index_of_raw);
            report("Cuts", k, &out, f);

            self.dag.classify(d, w, &mut ds, &mut out);
            from_raw(&mut out);
            let f = self.dag.classify_first(d, w, &mut ds).map(index_of_raw);
            report("Dag", k, &out, f);
        }
        // The native tree with its flow cache on for every packet, over
        // the packets twice: the first pass learns each flow (the walk
        // that records the fields it reads), the second answers from the
        // cache; each must equal the filters alone.
        let mut cs = sluice_native::tree::NativeScratch::default();
        cs.set_flow_cache_always();
        for pass in ["learning", "cached"] {
            for (k, p) in pkts.iter().enumerate() {
                let (d, w) = (&p.data[..], p.wirelen);
                self.native_tree.classify(d, w, &mut cs, &mut out);
                from_raw(&mut out);
                let f = self
                    .native_tree
                    .classify_first(d, w, &mut cs)
                    .map(index_of_raw);
                report(&format!("NativeTree, flow cache ({pass})"), k, &out, f);
            }
        }
        let flows = cs.flow_stats().expect("the cache is on");
        assert!(
            flows.hits >= pkts.len() as u64,
            "{what}: the flow cache answered: {flows:?}"
        );
        // Batches of 16: the batch paths of the native engines and the reader.
        for (c, chunk) in pkts.chunks(16).enumerate() {
            let refs: Vec<(&[u8], u32)> = chunk.iter().map(|p| (&p.data[..], p.wirelen)).collect();
            let mut alls = vec![Vec::new(); refs.len()];
            let mut firsts = vec![None; refs.len()];
            self.native_tree.classify_batch(&refs, &mut ns, &mut alls);
            self.native_tree
                .classify_first_batch(&refs, &mut ns, &mut firsts);
            for (j, (a, f)) in alls.iter_mut().zip(&firsts).enumerate() {
                from_raw(a);
                report("NativeTree batch", c * 16 + j, a, f.map(index_of_raw));
            }
            Engine::classify_batch(&self.native_auto, &refs, &mut auto_s, &mut alls);
            Engine::classify_first_batch(&self.native_auto, &refs, &mut auto_s, &mut firsts);
            for (j, (a, f)) in alls.iter_mut().zip(&firsts).enumerate() {
                from_raw(a);
                report("NativeAuto batch", c * 16 + j, a, f.map(index_of_raw));
            }
            reader.classify_batch(&refs, &mut alls);
            reader.classify_first_batch(&refs, &mut firsts);
            for (j, (a, f)) in alls.iter_mut().zip(&firsts).enumerate() {
                a.sort_unstable();
                report("AutoClassifier batch", c * 16 + j, a, *f);
            }
        }
        assert!(fails.is_empty(), "{}", fails.join("\n"));
    }
}
