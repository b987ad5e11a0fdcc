//! `sluice bench --filters`: many filters at once, merged, against the
//! same filters run one after another.
//!
//! The merged engines are the default ([`sluice::classifier::Auto`]: the
//! decision tree of [`sluice::classifier::tree`], or tuple space search
//! while the filters have at most four shapes), as machine code and
//! walked in Rust, and tuple space search ([`sluice::classifier::merged`],
//! the earlier engine) on its own, as machine code and in Rust, to
//! compare with. One after another: sluice's native code, sluice's BPF
//! interpreter and libpcap's `bpf_filter`. A last row is the floor of any
//! merged engine: copying each packet's matches (found beforehand) into
//! the output, which every engine must do.

use super::{libpcap_program, version_label, wants, BenchArgs, BenchEngine, Packets, Row};
use super::{BATCH, DEFAULT_SNAPLEN};
use crate::cli::{read_text, Fail};
use sluice::classifier::bitvec::{BitScratch, BitVectors};
use sluice::classifier::cuts::{CutScratch, Cuts};
use sluice::classifier::dag::{Dag, DagScratch};
use sluice::classifier::merged::{Compiled, Merged, Scratch};
use sluice::classifier::tree::DecisionTree;
use sluice::classifier::Engine;
use sluice::native::merged::NativeMerged;
use sluice::native::NativeAuto;
use sluice::timing::{ns_per_packet, work_per_packet};
use sluice::{LinkType, Program, Runner};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rows of the merged engines and one after another, libpcap's row, and
/// the number of filters.
pub(super) type ManyResult = (Vec<Row>, usize, Option<Row>);

/// How each filter is compiled once, for every engine.
struct Filters {
    programs: Vec<Program>,
    compiled: Vec<Compiled>,
    priorities: Vec<i32>,
}

impl Filters {
    /// Each filter as `(id, filter, priority)`, ids in file order.
    fn triples(&self) -> impl Iterator<Item = (u32, &Compiled, i32)> {
        self.compiled
            .iter()
            .zip(&self.priorities)
            .enumerate()
            .map(|(i, (c, p))| (i as u32, c, *p))
    }
}

/// Time `classify` one packet a call over every packet: ns per packet
/// and the matches of one pass.
fn per_call(
    budget: Duration,
    packets: &Packets,
    mut classify: impl FnMut(&[u8], u32, &mut Vec<u32>),
) -> (f64, u64) {
    let mut ids = Vec::new();
    ns_per_packet(budget, packets.len(), || {
        let mut acc = 0u64;
        for (d, w) in packets.iter() {
            classify(d, w, &mut ids);
            acc += ids.len() as u64;
        }
        acc
    })
}

fn compile(file: &str, lt: LinkType, big_endian: bool) -> Result<(Filters, Vec<String>), Fail> {
    let (lines, errors) = sluice::split::parse_filters(&read_text(file)?, file);
    if let Some((_, e)) = errors.into_iter().next() {
        return Err(Fail(e));
    }
    if lines.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }
    let dir = std::path::Path::new(file).parent();
    let nf = lines.len();
    let mut f = Filters {
        programs: Vec::with_capacity(nf),
        compiled: Vec::with_capacity(nf),
        priorities: Vec::with_capacity(nf),
    };
    for (i, l) in lines.iter().enumerate() {
        // Any language, as `sluice split` reads it.
        let p = Program::builder(lt)
            .snaplen(DEFAULT_SNAPLEN)
            .offline(true)
            .capture_big_endian(big_endian)
            .dir(dir)
            .build(&l.expression)
            .map_err(|e| Fail(format!("{file}:{}: {}: {e}", l.line, l.name)))?;
        f.compiled.push(p.for_merging());
        f.priorities.push(i32::try_from(nf - i).unwrap_or(i32::MAX));
        f.programs.push(p);
    }
    Ok((f, lines.into_iter().map(|l| l.expression).collect()))
}

/// A filters file: merged against one after another.
pub(super) fn many(
    args: &BenchArgs,
    file: &str,
    packets: &Packets,
    (lt, big_endian): (LinkType, bool),
    budget: Duration,
    libpcap: Option<&sluice::libpcap::Libpcap>,
) -> Result<ManyResult, Fail> {
    let (f, texts) = compile(file, lt, big_endian)?;
    let nf = f.programs.len();
    let per_filter = |d: Duration| d.as_secs_f64() * 1e9 / nf as f64;
    let t = Instant::now();
    let mut tree = DecisionTree::default();
    for (id, c, priority) in f.triples() {
        tree.insert(id, c, priority);
    }
    let built = t.elapsed();
    let s = tree.stats();
    eprintln!(
        "sluice bench: decision tree: {} nodes, {} tables, {} conditions, {} fields, {} filters run whole, {} bytes ({:.0} per filter), built in {:.1} ms ({:.0} ns per filter)",
        s.nodes,
        s.tables,
        s.conds,
        s.fields,
        s.whole,
        s.bytes,
        s.bytes as f64 / nf as f64,
        built.as_secs_f64() * 1e3,
        per_filter(built)
    );
    let n = packets.len();
    let slices: Vec<(&[u8], u32)> = packets.iter().collect();
    let mut rows = Vec::new();
    let mut add = |engine: BenchEngine, label: &str, (ns, accepted): (f64, u64)| {
        rows.push(Row {
            engine: engine.name(),
            label: label.to_string(),
            ns,
            accepted,
        })
    };
    // "accepted" counts (packet, filter) deliveries, the same for every engine.
    let native_wanted = wants(args, BenchEngine::ClassifierNative)
        || wants(args, BenchEngine::ClassifierNativeBatch)
        || wants(args, BenchEngine::ClassifierNativeNoCache);
    if native_wanted {
        let t = Instant::now();
        let mut nt = NativeAuto::empty();
        for (id, c, priority) in f.triples() {
            nt.insert(id, Arc::new(c.clone()), priority);
        }
        nt.update();
        let took = t.elapsed();
        let kind = match nt.tree() {
            Some(t) => {
                let s = t.native_stats();
                eprintln!(
                    "sluice bench: decision tree as machine code: {} units sharing {} functions, {} nodes in place, {} tables probed, {} bytes of code, {} compilations in {:.1} ms; built with the tree in {:.1} ms",
                    s.units,
                    s.shapes,
                    s.nodes,
                    s.tables,
                    s.code_bytes,
                    s.compilations,
                    s.compile_time.as_secs_f64() * 1e3,
                    took.as_secs_f64() * 1e3
                );
                "tree"
            }
            None => "tuple space",
        };
        let mut s: <NativeAuto as Engine>::Scratch = Default::default();
        // The default engine, also next to itself without its cache.
        if wants(args, BenchEngine::ClassifierNative)
            || wants(args, BenchEngine::ClassifierNativeNoCache)
        {
            add(
                BenchEngine::ClassifierNative,
                &format!("classifier-native ({kind})"),
                per_call(budget, packets, |d, w, ids| nt.classify(d, w, &mut s, ids)),
            );
        }
        if let Some(f) = s.tree_mut().flow_stats() {
            eprintln!(
                "sluice bench: flow cache: {} hits, {} misses, {} passed by, {} flows in {} subtables, {} flushes, {} kB",
                f.hits, f.misses, f.bypassed, f.entries, f.subtables, f.flushes, f.bytes / 1024
            );
        }
        if wants(args, BenchEngine::ClassifierNativeNoCache) && kind == "tree" {
            for always in [false, true] {
                let mut s: <NativeAuto as Engine>::Scratch = Default::default();
                match always {
                    false => s.tree_mut().set_flow_cache(false),
                    true => s.tree_mut().set_flow_cache_always(),
                }
                let label = match always {
                    false => "classifier-native, no flow cache",
                    true => "classifier-native, cache always",
                };
                add(
                    BenchEngine::ClassifierNativeNoCache,
                    label,
                    per_call(budget, packets, |d, w, ids| nt.classify(d, w, &mut s, ids)),
                );
                if !always {
                    // The work of a packet the predictor and the caches
                    // have just seen: the row above less what the
                    // traffic's variety costs.
                    let mut ids = Vec::new();
                    let (_, work, count) = work_per_packet(budget, n, |times| {
                        let mut acc = 0u64;
                        for (d, w) in packets.iter() {
                            for _ in 0..times {
                                nt.classify(d, w, &mut s, &mut ids);
                            }
                            acc += ids.len() as u64;
                        }
                        acc
                    });
                    add(
                        BenchEngine::ClassifierNativeNoCache,
                        "classifier-native, work (a packet again)",
                        (work, count),
                    );
                }
                let mut out = vec![Vec::new(); BATCH];
                add(
                    BenchEngine::ClassifierNativeNoCache,
                    &format!("{label}, batch {BATCH}"),
                    ns_per_packet(budget, n, || in_batches(&nt, &slices, &mut s, &mut out)),
                );
                if let Some(f) = s.tree_mut().flow_stats().filter(|_| always) {
                    eprintln!(
                        "sluice bench: flow cache, always: {} hits, {} misses, {} flows ({} as words) in {} subtables, {} flushes, {} kB",
                        f.hits, f.misses, f.entries, f.wide, f.subtables, f.flushes, f.bytes / 1024
                    );
                }
            }
        }
        if wants(args, BenchEngine::ClassifierNativeBatch) {
            let mut out = vec![Vec::new(); BATCH];
            add(
                BenchEngine::ClassifierNativeBatch,
                &format!("classifier-native-batch ({kind})"),
                ns_per_packet(budget, n, || in_batches(&nt, &slices, &mut s, &mut out)),
            );
        }
    }
    if wants(args, BenchEngine::Classifier) {
        let mut s = Default::default();
        add(
            BenchEngine::Classifier,
            "classifier (tree, Rust)",
            per_call(budget, packets, |d, w, ids| {
                tree.classify(d, w, &mut s, ids)
            }),
        );
    }
    if wants(args, BenchEngine::ClassifierBatch) {
        let mut s = Default::default();
        let mut out = vec![Vec::new(); BATCH];
        add(
            BenchEngine::ClassifierBatch,
            "classifier-batch (tree, Rust)",
            ns_per_packet(budget, n, || {
                let mut acc = 0u64;
                for chunk in slices.chunks(BATCH) {
                    let o = &mut out[..chunk.len()];
                    tree.classify_batch(chunk, &mut s, o);
                    acc += o.iter().map(|v| v.len() as u64).sum::<u64>();
                }
                acc
            }),
        );
    }
    // Only when asked for: its vectors grow as filters × intervals.
    if args.engine == Some(BenchEngine::Bitvector) {
        let t = Instant::now();
        let bv = BitVectors::build(f.triples());
        let took = t.elapsed();
        let b = bv.stats();
        eprintln!(
            "sluice bench: bit vectors: {} paths, {} fields, {} intervals, {} conditions checked whole, {} bytes of vectors, built in {:.1} ms",
            b.paths,
            b.fields,
            b.intervals,
            b.extra,
            b.bytes,
            took.as_secs_f64() * 1e3
        );
        let mut s = BitScratch::default();
        add(
            BenchEngine::Bitvector,
            "bitvector (bit vectors per field, Rust)",
            per_call(budget, packets, |d, w, ids| bv.classify(d, w, &mut s, ids)),
        );
        let w = s.work;
        eprintln!(
            "sluice bench: bit vectors: per packet {:.1} fields read, {:.1} words ANDed",
            w.reads as f64 / w.packets.max(1) as f64,
            w.words as f64 / w.packets.max(1) as f64
        );
    }
    // Only when asked for: a set that leaves fields open is copied into
    // every piece.
    if args.engine == Some(BenchEngine::Cuts) {
        let t = Instant::now();
        let cuts = Cuts::build(f.triples());
        let took = t.elapsed();
        let c = cuts.stats();
        eprintln!(
            "sluice bench: cuts: {} paths, {} cut nodes, {} leaves holding {} paths, {} bytes, built in {:.1} ms",
            c.paths,
            c.cuts,
            c.leaves,
            c.entries,
            c.bytes,
            took.as_secs_f64() * 1e3
        );
        let mut s = CutScratch::default();
        add(
            BenchEngine::Cuts,
            "cuts (HiCuts, Rust)",
            per_call(budget, packets, |d, w, ids| {
                cuts.classify(d, w, &mut s, ids)
            }),
        );
        let w = s.work;
        eprintln!(
            "sluice bench: cuts: per packet {:.1} cuts passed, {:.1} paths checked",
            w.cuts as f64 / w.packets.max(1) as f64,
            w.checked as f64 / w.packets.max(1) as f64
        );
    }
    // Only when asked for: independent filters multiply its states.
    if args.engine == Some(BenchEngine::Dag) {
        let t = Instant::now();
        let dag = Dag::build(f.triples());
        let took = t.elapsed();
        let d = dag.stats();
        eprintln!(
            "sluice bench: dag: {} paths, {} field nodes ({} edges), {} condition nodes, {} match lists of {} filters, {} leaves left to check {} paths, {} bytes, {} paths placed, built in {:.1} ms",
            d.paths,
            d.fields,
            d.edges,
            d.checks,
            d.lists,
            d.listed,
            d.rest,
            d.rest_paths,
            d.bytes,
            d.work,
            took.as_secs_f64() * 1e3
        );
        let mut s = DagScratch::default();
        add(
            BenchEngine::Dag,
            "dag (decision diagram, Rust)",
            per_call(budget, packets, |d, w, ids| dag.classify(d, w, &mut s, ids)),
        );
        let w = s.work;
        eprintln!(
            "sluice bench: dag: per packet {:.1} tests, {:.1} paths checked",
            w.tests as f64 / w.packets.max(1) as f64,
            w.checked as f64 / w.packets.max(1) as f64
        );
    }
    if wants(args, BenchEngine::Groups) || wants(args, BenchEngine::GroupsNative) {
        let mut merged = Merged::default();
        for (id, c, priority) in f.triples() {
            merged.insert(id, c, priority);
        }
        eprintln!(
            "sluice bench: tuple space: {} groups, {} filters run whole, {} bytes of tables",
            merged.groups(),
            merged.whole(),
            merged.table_bytes()
        );
        let mut s = Scratch::default();
        if wants(args, BenchEngine::GroupsNative) {
            let m = NativeMerged::from_merged(merged.clone());
            let mut out = vec![Vec::new(); BATCH];
            add(
                BenchEngine::GroupsNative,
                "groups-native-batch (tuple space)",
                ns_per_packet(budget, n, || {
                    let mut acc = 0u64;
                    for chunk in slices.chunks(BATCH) {
                        let o = &mut out[..chunk.len()];
                        m.classify_batch(chunk, &mut s, o);
                        acc += o.iter().map(|v| v.len() as u64).sum::<u64>();
                    }
                    acc
                }),
            );
        }
        if wants(args, BenchEngine::Groups) {
            add(
                BenchEngine::Groups,
                "groups (tuple space, Rust)",
                per_call(budget, packets, |d, w, ids| {
                    merged.classify(d, w, &mut s, ids)
                }),
            );
        }
    }
    let one_by_one = |engine: Runner| {
        let programs = &f.programs;
        move || {
            let mut acc = 0u64;
            for (d, w) in packets.iter() {
                for p in programs {
                    acc += (p.run_with(engine, d, w) != 0) as u64;
                }
            }
            acc
        }
    };
    if wants(args, BenchEngine::Native) {
        let label = format!("native, {nf} one by one");
        add(
            BenchEngine::Native,
            &label,
            ns_per_packet(budget, n, one_by_one(Runner::Native)),
        );
    }
    if wants(args, BenchEngine::Interp) {
        let label = format!("interp, {nf} one by one");
        add(
            BenchEngine::Interp,
            &label,
            ns_per_packet(budget, n, one_by_one(Runner::Interp)),
        );
    }
    if args.engine.is_none() {
        // The floor: each packet's matches, found beforehand, copied into
        // the output as every engine must.
        let mut s = Default::default();
        let found: Vec<Vec<u32>> = packets
            .iter()
            .map(|(d, w)| {
                let mut ids = Vec::new();
                tree.classify(d, w, &mut s, &mut ids);
                ids
            })
            .collect();
        let mut ids: Vec<u32> = Vec::new();
        rows.push({
            let (ns, accepted) = ns_per_packet(budget, n, || {
                let mut acc = 0u64;
                for m in &found {
                    ids.clear();
                    ids.extend_from_slice(std::hint::black_box(m));
                    acc += ids.len() as u64;
                }
                acc
            });
            Row {
                engine: "floor",
                label: "floor: copy each packet's matches".into(),
                ns,
                accepted,
            }
        });
    }
    let lib = match libpcap {
        Some(l) => libpcap_row(
            l,
            &texts,
            file,
            &f.programs,
            (lt, &args.read),
            budget,
            packets,
        ),
        None => None,
    };
    Ok((rows, nf, lib))
}

/// libpcap's `bpf_filter` running every filter on every packet.
fn libpcap_row(
    l: &sluice::libpcap::Libpcap,
    texts: &[String],
    file: &str,
    programs: &[Program],
    target: (LinkType, &str),
    budget: Duration,
    packets: &Packets,
) -> Option<Row> {
    let dir = std::path::Path::new(file).parent();
    let mut progs = Vec::with_capacity(texts.len());
    for (t, p) in texts.iter().zip(programs) {
        match libpcap_program(l, t, dir, p, target) {
            Ok(p) => progs.push(p),
            // libpcap refuses a filter it proves accepts nothing; its
            // meaning is known, so libpcap's interpreter runs sluice's
            // program for it (which rejects every packet at once).
            Err(e) if e.contains("rejects all packets") => {
                eprintln!("sluice bench: libpcap refuses {t} ({e}); its column runs the same meaning, sluice's program, in libpcap's bpf_filter");
                progs.push(l.program(p.bpf()));
            }
            Err(e) => {
                eprintln!("sluice bench: libpcap could not compile {t}: {e}");
                return None;
            }
        }
    }
    let (ns, accepted) = ns_per_packet(budget, packets.len(), || {
        let mut acc = 0u64;
        for (d, w) in packets.iter() {
            for p in &progs {
                acc += (p.run(d, w) != 0) as u64;
            }
        }
        acc
    });
    Some(Row {
        engine: "libpcap",
        label: format!("{}, {} one by one", version_label(l), texts.len()),
        ns,
        accepted,
    })
}

/// Classify `slices` with `nt` in batches of [`BATCH`] (`out` holds one
/// batch's answers): the number of matches, so the work is not optimised
/// away.
fn in_batches(
    nt: &NativeAuto,
    slices: &[(&[u8], u32)],
    s: &mut <NativeAuto as Engine>::Scratch,
    out: &mut [Vec<u32>],
) -> u64 {
    let mut acc = 0u64;
    for chunk in slices.chunks(BATCH) {
        let o = &mut out[..chunk.len()];
        nt.classify_batch(chunk, s, o);
        acc += o.iter().map(|v| v.len() as u64).sum::<u64>();
    }
    acc
}
