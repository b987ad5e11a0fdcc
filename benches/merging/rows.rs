//! Each engine timed on one set of packets, and the check that they all
//! report the same matches.

use crate::build::priority;
use crate::timing::ns_per_packet;
use sluice::classifier::merged::{Compiled, Merged};
use sluice::classifier::Engine;
use sluice::native::merged::NativeMerged;
use sluice::native::NativeAuto;
use sluice::{Program, Runner};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Packets per call of the batch rows (as `sluice bench`).
const BATCH: usize = 32;

/// One engine's figure.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// Median ns per packet.
    pub ns: f64,
    /// Packets it ran on (a prefix of the set's).
    pub packets: usize,
    /// (packet, filter) matches it reported on them.
    pub matches: u64,
}

/// The default engine's matches, packet by packet: what every row must
/// agree with, and what the floor copies.
pub struct Reference {
    found: Vec<Vec<u32>>,
    /// `prefix[i]`: matches of the first `i` packets.
    prefix: Vec<u64>,
}

impl Reference {
    /// Every packet's matches by `engine`.
    pub fn new(engine: &NativeAuto, pkts: &[(&[u8], u32)]) -> Reference {
        let mut s = Default::default();
        let found: Vec<Vec<u32>> = pkts
            .iter()
            .map(|&(d, w)| {
                let mut ids = Vec::new();
                engine.classify(d, w, &mut s, &mut ids);
                ids
            })
            .collect();
        let mut prefix = vec![0u64];
        for f in &found {
            prefix.push(prefix.last().unwrap() + f.len() as u64);
        }
        Reference { found, prefix }
    }

    /// Matches on the first `packets` packets.
    pub fn matches(&self, packets: usize) -> u64 {
        self.prefix[packets.min(self.found.len())]
    }

    /// Mean matches per packet over every packet.
    pub fn per_packet(&self) -> f64 {
        self.matches(usize::MAX) as f64 / self.found.len().max(1) as f64
    }

    /// Stop the run, loudly, unless `row` found the default engine's matches.
    pub fn check(&self, what: &str, row: &Row) {
        let want = self.matches(row.packets);
        if row.matches != want {
            eprintln!(
                "merging bench: ENGINES DISAGREE: {what} found {} matches on the first {} packets, the default engine {want}",
                row.matches, row.packets
            );
            std::process::exit(1);
        }
    }

    /// Each filter's matches on the first `packets` packets.
    fn per_filter(&self, packets: usize, filters: usize) -> Vec<u64> {
        let mut per = vec![0u64; filters];
        for ids in &self.found[..packets] {
            for &id in ids {
                per[id as usize] += 1;
            }
        }
        per
    }

    /// [`Reference::check`] for a row that ran `run(filter, packet)` for
    /// every filter of `texts`, where the filters of `known` may differ
    /// (a baseline's known deviations): on a disagreement, each filter is
    /// compared; the run stops, naming the filters, if any outside `known`
    /// differs. Returns the filters of `known` that differed.
    pub fn check_one_by_one(
        &self,
        what: &str,
        row: &Row,
        texts: &[String],
        pkts: &[(&[u8], u32)],
        known: &Known,
        run: impl Fn(usize, &[u8], u32) -> bool,
    ) -> Vec<usize> {
        if row.matches == self.matches(row.packets) {
            return Vec::new();
        }
        let want = self.per_filter(row.packets, texts.len());
        let differ: Vec<(usize, u64)> = (0..texts.len())
            .filter_map(|i| {
                let got = pkts.iter().filter(|&&(d, w)| run(i, d, w)).count() as u64;
                (got != want[i]).then_some((i, got))
            })
            .collect();
        let unknown = differ.iter().filter(|(i, _)| !known.contains(i)).count();
        for &(i, got) in differ.iter().take(20) {
            eprintln!(
                "  filter {i} `{}`: {got} matches by {what}, {} by the default engine{}",
                texts[i],
                want[i],
                if known.contains(&i) {
                    " (a known deviation)"
                } else {
                    ""
                }
            );
        }
        if unknown > 0 {
            self.check(what, row);
        }
        differ.into_iter().map(|(i, _)| i).collect()
    }
}

/// Filters (by index) whose verdicts a baseline is known to get wrong.
pub type Known = std::collections::HashSet<usize>;

/// Time `pass` over `pkts` (unchecked).
fn timed(budget: Duration, pkts: &[(&[u8], u32)], pass: impl FnMut() -> u64) -> Row {
    let (ns, matches) = ns_per_packet(budget, pkts.len(), pass);
    Row {
        ns,
        packets: pkts.len(),
        matches,
    }
}

/// Time `pass` over `pkts` and check it against `reference`.
fn row(
    what: &str,
    reference: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
    pass: impl FnMut() -> u64,
) -> Row {
    let r = timed(budget, pkts, pass);
    reference.check(what, &r);
    r
}

/// The default engine, one packet per call.
pub fn default_native(
    e: &NativeAuto,
    re: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
) -> Row {
    let mut s = Default::default();
    let mut ids = Vec::new();
    row("default native", re, budget, pkts, || {
        let mut acc = 0u64;
        for &(d, w) in pkts {
            e.classify(d, w, &mut s, &mut ids);
            acc += ids.len() as u64;
        }
        acc
    })
}

/// The default engine's own work on a packet, without the traffic's
/// variety: with the flow cache off, each packet classified once
/// (`first`) and [`sluice::timing::AGAIN`] times in a row, the first time taken off the
/// mean of the others. The branches, code and tables the packet takes
/// are then in the predictor and the caches, so what is left is the
/// work itself; `first` minus it is what the variety costs.
pub struct Warm {
    /// Each packet once, without the flow cache.
    pub first: Row,
    /// A packet classified again right after itself (ns: the cost of one
    /// more time).
    pub again: Row,
}

/// See [`Warm`] ([`sluice::timing::work_per_packet`]).
pub fn warm(e: &NativeAuto, re: &Reference, budget: Duration, pkts: &[(&[u8], u32)]) -> Warm {
    let mut s: <NativeAuto as Engine>::Scratch = Default::default();
    s.tree_mut().set_flow_cache(false);
    let mut ids = Vec::new();
    let (once, work, matches) = sluice::timing::work_per_packet(budget, pkts.len(), |times| {
        let mut acc = 0u64;
        for &(d, w) in pkts {
            for _ in 0..times {
                e.classify(d, w, &mut s, &mut ids);
            }
            acc += ids.len() as u64;
        }
        acc
    });
    let first = Row {
        ns: once,
        packets: pkts.len(),
        matches,
    };
    re.check("default native, no flow cache", &first);
    let again = Row { ns: work, ..first };
    Warm { first, again }
}

/// The default engine, [`BATCH`] packets per call.
pub fn default_native_batch(
    e: &NativeAuto,
    re: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
) -> Row {
    let mut s = Default::default();
    let mut out = vec![Vec::new(); BATCH];
    row("default native batch", re, budget, pkts, || {
        let mut acc = 0u64;
        for chunk in pkts.chunks(BATCH) {
            let o = &mut out[..chunk.len()];
            e.classify_batch(chunk, &mut s, o);
            acc += o.iter().map(|v| v.len() as u64).sum::<u64>();
        }
        acc
    })
}

/// Tuple space search as machine code (the earlier engine), in batches
/// of [`BATCH`] as `sluice bench` times it; with its number of groups and
/// how long building it took.
pub fn tuple_space(
    compiled: &[Arc<Compiled>],
    re: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
) -> (Row, usize, Duration) {
    let t = Instant::now();
    let mut merged = Merged::default();
    for (i, c) in compiled.iter().enumerate() {
        merged.insert(i as u32, c, priority(i, compiled.len()));
    }
    let groups = merged.groups();
    let mut m = NativeMerged::from_merged(merged);
    m.update();
    let took = t.elapsed();
    let mut s = Default::default();
    let mut out = vec![Vec::new(); BATCH];
    let r = row("tuple space native", re, budget, pkts, || {
        let mut acc = 0u64;
        for chunk in pkts.chunks(BATCH) {
            let o = &mut out[..chunk.len()];
            m.classify_batch(chunk, &mut s, o);
            acc += o.iter().map(|v| v.len() as u64).sum::<u64>();
        }
        acc
    });
    (r, groups, took)
}

/// sluice's native code, every filter on every packet (each filter's code
/// compiled before timing).
pub fn native_one_by_one(
    texts: &[String],
    programs: &[Program],
    re: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
) -> Row {
    for p in programs {
        let _ = p.native();
    }
    let run = |i: usize, d: &[u8], w: u32| programs[i].run_with(Runner::Native, d, w) != 0;
    let r = timed(budget, pkts, || {
        let mut acc = 0u64;
        for &(d, w) in pkts {
            for i in 0..programs.len() {
                acc += run(i, d, w) as u64;
            }
        }
        acc
    });
    re.check_one_by_one(
        "sluice native one by one",
        &r,
        texts,
        pkts,
        &Known::new(),
        run,
    );
    r
}

/// libpcap's `bpf_filter`, every filter on every packet, each compiled by
/// libpcap as tcpdump would; with the filters of `known` (libpcap's own
/// known deviations) that gave other verdicts than sluice's.
pub fn libpcap_one_by_one(
    lib: &sluice::libpcap::Libpcap,
    texts: &[String],
    known: &Known,
    re: &Reference,
    budget: Duration,
    pkts: &[(&[u8], u32)],
) -> (Row, Vec<usize>) {
    let progs: Vec<_> = texts
        .iter()
        .map(|t| {
            lib.compile(t, 1, crate::build::SNAPLEN, true)
                .unwrap_or_else(|e| panic!("libpcap: {t}: {e}"))
        })
        .collect();
    let run = |i: usize, d: &[u8], w: u32| progs[i].run(d, w) != 0;
    let r = timed(budget, pkts, || {
        let mut acc = 0u64;
        for &(d, w) in pkts {
            for i in 0..progs.len() {
                acc += run(i, d, w) as u64;
            }
        }
        acc
    });
    let deviations = re.check_one_by_one("libpcap one by one", &r, texts, pkts, known, run);
    (r, deviations)
}

/// The floor of any merged engine: copying each packet's matches (found
/// beforehand) into the output; with `read`, also reading each packet's
/// first 64 bytes (its headers, which any engine reads), from the same
/// buffer and in the same order as the engines.
pub fn floor(re: &Reference, budget: Duration, read: Option<&[(&[u8], u32)]>) -> Row {
    let mut ids: Vec<u32> = Vec::new();
    let found = &re.found;
    let (ns, matches) = ns_per_packet(budget, found.len(), || {
        let mut acc = 0u64;
        for (i, m) in found.iter().enumerate() {
            if let Some(pkts) = read {
                acc += first_line(pkts[i].0) & 1;
            }
            ids.clear();
            ids.extend_from_slice(std::hint::black_box(m));
            acc += ids.len() as u64;
        }
        acc
    });
    Row {
        ns,
        packets: found.len(),
        matches,
    }
}

/// The sum of a packet's first 64 bytes as words (so that each is read).
fn first_line(d: &[u8]) -> u64 {
    let mut w = [0u8; 64];
    let n = d.len().min(64);
    w[..n].copy_from_slice(&d[..n]);
    std::hint::black_box(w)
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .fold(0, u64::wrapping_add)
}
