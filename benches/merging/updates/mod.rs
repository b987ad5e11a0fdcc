//! Updates while readers classify: a [`sluice::native::AutoClassifier`]
//! (one writer, readers that never wait, code built at each publish)
//! holding 10,000 generated filters, `filter_set(10000, seed)`.
//!
//! * [`structural`]: inserts of filters of a shape the set does not have,
//!   one at a time, each removed again;
//! * [`key_only`]: `insert_keys` of 10,000 keys like a filter of the set.

mod key_only;
mod structural;

use crate::build::{compiled, priority, program};
use crate::config::Config;
use crate::report::Record;
use crate::timing::{median, ms};
use sluice::classifier::merged::Compiled;
use sluice::classifier::FilterId;
use sluice::native::AutoClassifier;
use sluice_workload::Workload;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Filters installed before the updates.
pub const INSTALLED: usize = 10_000;

/// The installed set: its filters, their paths and their ids.
pub struct Installed {
    workload: Workload,
    filters: Vec<sluice_workload::Filter>,
    compiled: Vec<Arc<Compiled>>,
    ids: Vec<FilterId>,
}

/// Measure both kinds of update and write the rows (`updates`, and one
/// `inserts` row per structural insert).
pub fn run(cfg: &Config) {
    let workload = Workload::new(INSTALLED, cfg.seed);
    let filters = workload.filters();
    let compiled: Vec<Arc<Compiled>> = filters
        .iter()
        .map(|f| Arc::new(compiled(&program(&f.expression))))
        .collect();
    let t = Instant::now();
    let mut c = AutoClassifier::default();
    let ids: Vec<FilterId> = compiled
        .iter()
        .enumerate()
        .map(|(i, f)| c.insert_compiled(f.clone(), priority(i, INSTALLED)))
        .collect();
    c.publish();
    c.publish();
    let structure = match c.published(|e| e.is_tree()) {
        Some(true) => "tree",
        _ => "tuple space",
    };
    eprintln!(
        "updates: {INSTALLED} generated filters (seed {}) in an AutoClassifier ({structure}), installed and published in {:.1} ms",
        cfg.seed,
        ms(t.elapsed())
    );
    let set = Installed {
        workload,
        filters,
        compiled,
        ids,
    };
    let inserts = structural::run(cfg, &set, &mut c);
    for i in &inserts {
        let mut r = Record::default();
        r.put("source", i.source)
            .num("compile_us", us(i.compile), 1)
            .num("insert_publish_us", us(i.insert), 1)
            .num("remove_publish_us", us(i.remove), 1)
            .opt("codegen_us", i.codegen.map(|c| us(c.0)), 1)
            .put(
                "units_compiled",
                i.codegen.map_or("-".to_string(), |c| c.1.to_string()),
            )
            .put("expression", &i.expression);
        r.write(cfg, "inserts");
    }
    let k = key_only::run(cfg, &set, &mut c);
    let all: Vec<Duration> = inserts.iter().map(|i| i.insert).collect();
    let of = |source: &str| -> Vec<Duration> {
        inserts
            .iter()
            .filter(|i| i.source == source)
            .map(|i| i.insert)
            .collect()
    };
    let med = |d: Vec<Duration>| (!d.is_empty()).then(|| us(median(d)));
    let mut r = Record::default();
    r.put("seed", cfg.seed)
        .put("installed", INSTALLED)
        .put("structure", structure)
        .put("structural_inserts", inserts.len())
        .put("from_generated", of("generated").len())
        .put("from_corpus", of("corpus").len())
        .opt("insert_publish_us_median", med(all.clone()), 1)
        .opt("insert_publish_us_p90", quantile(&all, 0.9).map(us), 1)
        .opt(
            "insert_publish_us_max",
            all.iter().max().copied().map(us),
            1,
        )
        .opt("generated_us_median", med(of("generated")), 1)
        .opt("corpus_us_median", med(of("corpus")), 1)
        .opt(
            "remove_publish_us_median",
            med(inserts.iter().map(|i| i.remove).collect()),
            1,
        )
        .opt(
            "compile_us_median",
            med(inserts.iter().map(|i| i.compile).collect()),
            1,
        )
        .opt(
            "codegen_us_median",
            med(inserts
                .iter()
                .filter_map(|i| i.codegen.map(|c| c.0))
                .collect()),
            1,
        )
        .put("key_template", &k.template)
        .put("key_width", k.width)
        .put("key_samples", k.samples)
        .put("keys_per_round", key_only::KEYS)
        .num("key_inserts_per_s", k.per_second(), 0)
        .num("key_insert_ms", ms(median(k.insert)), 2)
        .num("key_publish_ms", ms(median(k.publish)), 2)
        .num("key_publish2_ms", ms(median(k.publish2)), 2)
        .num("key_codegen_ms", ms(median(k.codegen)), 2);
    r.write(cfg, "updates");
}

/// Microseconds.
fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The `q` quantile of some durations (nearest rank).
fn quantile(d: &[Duration], q: f64) -> Option<Duration> {
    let mut d = d.to_vec();
    d.sort();
    let at = ((d.len() as f64 * q).ceil() as usize).clamp(1, d.len().max(1)) - 1;
    d.get(at).copied()
}
