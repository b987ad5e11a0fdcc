//! Key-only inserts: `Classifier::insert_keys` of [`KEYS`] keys like a
//! filter of the installed set of one path (see [`crate::keys`]; a
//! host-and-port filter by preference), then the two publishes that bring
//! both copies up to date, timed as one; the keys are removed again
//! (untimed) and the round repeated. The figure is the median round.

use super::structural::codegen_so_far;
use super::Installed;
use crate::config::Config;
use crate::keys::{keys_like, shape_of, single_path};
use crate::timing::median;
use sluice::classifier::Engine;
use sluice::native::AutoClassifier;
use sluice_workload::Filter;
use std::time::{Duration, Instant};

/// Key-only inserts per round.
pub const KEYS: usize = 10_000;
/// Forms a template is taken from, best first (then any form).
const TEMPLATE_FORMS: [&str; 3] = ["dir_host_port", "host_port", "host"];

/// The rounds' timings.
pub struct KeyOnly {
    /// The template filter's expression.
    pub template: String,
    /// Words per key.
    pub width: usize,
    /// Filters of the set of the template's shape (the keys are made from
    /// theirs).
    pub samples: usize,
    /// `insert_keys`, per round.
    pub insert: Vec<Duration>,
    /// The first publish, per round.
    pub publish: Vec<Duration>,
    /// The second publish, per round.
    pub publish2: Vec<Duration>,
    /// Of the round: the code generator's time, per round (tree only).
    pub codegen: Vec<Duration>,
}

impl KeyOnly {
    /// Inserts per second, both copies published: the median round.
    pub fn per_second(&self) -> f64 {
        let rounds: Vec<Duration> = (0..self.insert.len())
            .map(|i| self.insert[i] + self.publish[i] + self.publish2[i])
            .collect();
        KEYS as f64 / median(rounds).as_secs_f64()
    }
}

/// The template: the first filter of the best form that has one path and
/// can be copied by key.
fn template(set: &Installed, c: &AutoClassifier) -> usize {
    let rank = |f: &Filter| {
        TEMPLATE_FORMS
            .iter()
            .position(|&x| x == f.form)
            .unwrap_or(TEMPLATE_FORMS.len())
    };
    let mut order: Vec<usize> = (0..set.filters.len()).collect();
    order.sort_by_key(|&i| rank(&set.filters[i]));
    order
        .into_iter()
        .find(|&i| {
            let Some(p) = single_path(&set.compiled[i]) else {
                return false;
            };
            let width = c.published(|e| e.key_width_of(set.ids[i].0)).flatten();
            width.is_some_and(|w| w > 0 && w == p.key().len())
        })
        .expect("a filter of the set can be copied by key")
}

/// Time the rounds.
pub fn run(cfg: &Config, set: &Installed, c: &mut AutoClassifier) -> KeyOnly {
    let at = template(set, c);
    let shape = shape_of(single_path(&set.compiled[at]).expect("one path"));
    let samples: Vec<Vec<u32>> = set
        .compiled
        .iter()
        .filter_map(|f| {
            single_path(f)
                .filter(|p| shape_of(p) == shape)
                .map(|p| p.key())
        })
        .collect();
    let keys = keys_like(&samples, KEYS);
    let mut out = KeyOnly {
        template: set.filters[at].expression.clone(),
        width: samples[0].len(),
        samples: samples.len(),
        insert: Vec::new(),
        publish: Vec::new(),
        publish2: Vec::new(),
        codegen: Vec::new(),
    };
    let installed = c.len();
    for _ in 0..(if cfg.quick { 3 } else { 7 }) {
        let batch = keys.clone();
        let before = codegen_so_far(c);
        let t = Instant::now();
        let new = c
            .insert_keys(set.ids[at], batch, 0)
            .expect("keys of the template's width");
        out.insert.push(t.elapsed());
        let t = Instant::now();
        c.publish();
        out.publish.push(t.elapsed());
        let t = Instant::now();
        c.publish();
        out.publish2.push(t.elapsed());
        if let (Some(a), Some(b)) = (before, codegen_so_far(c)) {
            out.codegen.push(b.0.saturating_sub(a.0));
        }
        assert_eq!(c.len(), installed + KEYS);
        for id in new {
            c.remove(id);
        }
        c.publish();
        c.publish();
    }
    eprintln!(
        "  key-only inserts like `{}` ({} words, {} filters of its shape): {:.2} M/s (median of {} rounds of {KEYS}: insert_keys {:.2} ms, publish {:.2} ms, second publish {:.2} ms; code generation {:.2} ms)",
        out.template,
        out.width,
        out.samples,
        out.per_second() / 1e6,
        out.insert.len(),
        median(out.insert.clone()).as_secs_f64() * 1e3,
        median(out.publish.clone()).as_secs_f64() * 1e3,
        median(out.publish2.clone()).as_secs_f64() * 1e3,
        median(out.codegen.clone()).as_secs_f64() * 1e3,
    );
    out
}
