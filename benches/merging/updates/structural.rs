//! Structural inserts: filters of a shape the installed set does not have
//! ([`crate::keys::filter_shape`]: not the same filter up to constants).
//!
//! First the generated filters past the set (`filter(i)` for `i >=
//! 10,000`: the same customers' next rules), the source the issue names;
//! the generator draws from a few hundred shapes, which the set mostly
//! holds already, so the rest are the shared corpus's expressions of new
//! shapes (rules of other kinds: flags, payload bytes, protocols, ...), in
//! file order. Each is compiled (timed apart), inserted from its IR with
//! `Classifier::insert` (which finds its paths) and published (what
//! readers wait for), timed; then removed and published, timed apart.

use super::{us, Installed, INSTALLED};
use crate::build::{compiled, program};
use crate::config::Config;
use crate::keys::filter_shape;
use crate::timing::median;
use sluice::native::AutoClassifier;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Generated filters past the set that are looked at for new shapes.
const GENERATED_SCAN: usize = 20_000;

/// One structural insert.
pub struct Insert {
    /// `generated` or `corpus`.
    pub source: &'static str,
    /// The filter.
    pub expression: String,
    /// Compiling it (program and paths).
    pub compile: Duration,
    /// `insert` + `publish`.
    pub insert: Duration,
    /// `remove` + `publish`.
    pub remove: Duration,
    /// Of `insert`: the code generator's time and unit functions compiled
    /// (when the engine is the tree).
    pub codegen: Option<(Duration, usize)>,
}

/// The tree's code generator's totals so far: (time, unit functions).
pub fn codegen_so_far(c: &AutoClassifier) -> Option<(Duration, usize)> {
    c.published(|e| e.tree().map(|t| t.native_stats()))
        .flatten()
        .map(|s| (s.compile_time, s.compilations))
}

/// Time inserts of new shapes into `c`, which holds `set`.
pub fn run(cfg: &Config, set: &Installed, c: &mut AutoClassifier) -> Vec<Insert> {
    let want = if cfg.quick { 20 } else { 50 };
    let mut shapes: HashSet<_> = set
        .compiled
        .iter()
        .filter_map(|f| filter_shape(f))
        .collect();
    eprintln!("  the installed set has {} shapes", shapes.len());
    let generated =
        (0..GENERATED_SCAN).map(|j| ("generated", set.workload.filter(INSTALLED + j).expression));
    let corpus = sluice_workload::corpus_filters(&cfg.shared, usize::MAX)
        .unwrap_or_default()
        .into_iter()
        .map(|e| ("corpus", e));
    let mut out = Vec::new();
    for (source, text) in generated.chain(corpus) {
        if out.len() == want {
            break;
        }
        let t = Instant::now();
        let p = program(&text);
        let compile = t.elapsed();
        // Each new shape once.
        if !filter_shape(&compiled(&p)).is_some_and(|shape| shapes.insert(shape)) {
            continue;
        }
        let ir = p.ir().expect("a pcap expression has IR");
        let before = codegen_so_far(c);
        let t = Instant::now();
        let id = c.insert(ir, 0);
        c.publish();
        let insert = t.elapsed();
        let codegen = match (before, codegen_so_far(c)) {
            (Some(a), Some(b)) => Some((b.0.saturating_sub(a.0), b.1.saturating_sub(a.1))),
            _ => None,
        };
        let t = Instant::now();
        c.remove(id);
        c.publish();
        out.push(Insert {
            source,
            expression: text,
            compile,
            insert,
            remove: t.elapsed(),
            codegen,
        });
    }
    report(&out);
    out
}

/// Progress: the medians by source and the slowest inserts.
fn report(inserts: &[Insert]) {
    for source in ["generated", "corpus"] {
        let d: Vec<Duration> = inserts
            .iter()
            .filter(|i| i.source == source)
            .map(|i| i.insert)
            .collect();
        if !d.is_empty() {
            eprintln!(
                "  {} new shapes from the {source} filters: insert + publish median {:.1} µs",
                d.len(),
                us(median(d))
            );
        }
    }
    let mut slow: Vec<&Insert> = inserts.iter().collect();
    slow.sort_by_key(|i| std::cmp::Reverse(i.insert));
    for i in slow.iter().take(5) {
        let (code, units) = i.codegen.unwrap_or_default();
        eprintln!(
            "  slow: `{}` ({}): insert + publish {:.1} µs (code generation {:.1} µs, {units} units), remove + publish {:.1} µs",
            i.expression,
            i.source,
            us(i.insert),
            us(code),
            us(i.remove)
        );
    }
}
