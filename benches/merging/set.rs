//! One filter set on one set of packets: every engine, side by side, as
//! one TSV row (the columns both the corpus and the generated sections
//! share).

use crate::build::{program, Built};
use crate::config::Config;
use crate::packets::Packets;
use crate::report::Record;
use crate::rows::{self, Known, Reference, Row};
use crate::timing::ms;
use std::time::Duration;

/// Which of the costly rows to time.
pub struct Plan {
    /// The one-by-one baselines (sluice native and libpcap), on this many
    /// packets (a prefix); `None`: not timed.
    pub one_by_one: Option<usize>,
    /// Tuple space search as machine code (one probe per shape, so also
    /// O(N) per packet on heterogeneous sets), on the same packets as the
    /// one-by-one baselines, or on all of them when those are not timed.
    pub tuple_space: bool,
    /// Filters libpcap is known to get wrong (see [`crate::oracle`]).
    pub libpcap_known: Known,
}

/// Tuple space search's figures: its row, groups and build time.
type TupleSpace = (Row, usize, Duration);

/// The one-by-one figures: sluice native, libpcap, and the number of
/// libpcap's known deviations met.
type OneByOne = (Row, Row, usize);

/// Build the default engine for `texts` (first thing, so that the RSS
/// growth is the build's alone in a fresh process: memory freed before
/// would be reused), then take the packets and the plan from `input`,
/// time every engine the plan asks for, and add the figures to `r`.
pub fn measure(
    cfg: &Config,
    texts: &[String],
    input: impl FnOnce() -> (Packets, Plan),
    lib: &sluice::libpcap::Libpcap,
    r: &mut Record,
) {
    let n = texts.len();
    let budget = cfg.budget();
    let built = Built::new(texts);
    let (packets, plan) = input();
    eprintln!(
        "  N={n}: built in {:.1} ms (compile {:.1}, structure {:.1}, code {:.1}), RSS +{:.1} MB; {}",
        ms(built.compile + built.structure + built.code),
        ms(built.compile),
        ms(built.structure),
        ms(built.code),
        built.rss_growth as f64 / 1e6,
        built.describe()
    );
    let pkts = packets.refs(usize::MAX);
    let re = Reference::new(&built.engine, &pkts);
    let default = rows::default_native(&built.engine, &re, budget, &pkts);
    let batch = rows::default_native_batch(&built.engine, &re, budget, &pkts);
    let warm = rows::warm(&built.engine, &re, budget, &pkts);
    let floor = rows::floor(&re, budget, None);
    let read = rows::floor(&re, budget, Some(&pkts));
    eprintln!(
        "  N={n}: default native {:.1} ns/packet (batch {:.1}; no flow cache {:.1}, a packet again {:.1}), floor {:.1} (packets read {:.1}), {:.2} matches per packet",
        default.ns,
        batch.ns,
        warm.first.ns,
        warm.again.ns,
        floor.ns,
        read.ns,
        re.per_packet()
    );
    let few = &pkts[..plan.one_by_one.unwrap_or(pkts.len()).min(pkts.len())];
    let tuple = plan.tuple_space.then(|| {
        let t = rows::tuple_space(&built.compiled, &re, budget, few);
        eprintln!(
            "  N={n}: tuple space native {:.1} ns/packet on {} packets, {} groups, built in {:.1} ms",
            t.0.ns,
            t.0.packets,
            t.1,
            ms(t.2)
        );
        t
    });
    let one_by_one = plan
        .one_by_one
        .map(|_| one_by_one(lib, texts, &plan.libpcap_known, &re, budget, few));
    r.put("n", n)
        .put("packets", pkts.len())
        .num("matches_per_packet", re.per_packet(), 3)
        .num("default_ns", default.ns, 2)
        .num("default_batch_ns", batch.ns, 2)
        .num("no_cache_ns", warm.first.ns, 2)
        .num("again_ns", warm.again.ns, 2)
        .num("floor_ns", floor.ns, 2)
        .num("read_floor_ns", read.ns, 2)
        .num("budget_s", budget.as_secs_f64(), 2);
    baselines(r, tuple.as_ref(), one_by_one.as_ref());
    building(r, &built, tuple.as_ref());
    r.put("libpcap", lib.version());
}

/// Time both one-by-one baselines on `few` packets.
fn one_by_one(
    lib: &sluice::libpcap::Libpcap,
    texts: &[String],
    known: &Known,
    re: &Reference,
    budget: Duration,
    few: &[(&[u8], u32)],
) -> OneByOne {
    let (lp, deviations) = rows::libpcap_one_by_one(lib, texts, known, re, budget, few);
    let programs: Vec<_> = texts.iter().map(|t| program(t)).collect();
    let native = rows::native_one_by_one(texts, &programs, re, budget, few);
    let n = texts.len();
    eprintln!(
        "  N={n}: one by one on {} packets: sluice native {:.1} ns/packet, libpcap {:.1}",
        few.len(),
        native.ns,
        lp.ns
    );
    if !deviations.is_empty() {
        eprintln!(
            "  N={n}: libpcap differs from sluice on {} filters, each a known deviation of libpcap's",
            deviations.len()
        );
    }
    (native, lp, deviations.len())
}

/// The columns of the baselines (`-` where not timed).
fn baselines(r: &mut Record, tuple: Option<&TupleSpace>, one: Option<&OneByOne>) {
    let count = |x: Option<usize>| x.map_or("-".to_string(), |v| v.to_string());
    r.opt("tuple_ns", tuple.map(|t| t.0.ns), 2)
        .put("tuple_packets", count(tuple.map(|t| t.0.packets)))
        .put("groups", count(tuple.map(|t| t.1)))
        .opt("native1_ns", one.map(|o| o.0.ns), 2)
        .opt("libpcap_ns", one.map(|o| o.1.ns), 2)
        .put("one_by_one_packets", count(one.map(|o| o.0.packets)))
        .put("libpcap_deviations", count(one.map(|o| o.2)));
}

/// The columns of the default engine's structure, build and memory.
fn building(r: &mut Record, built: &Built, tuple: Option<&TupleSpace>) {
    let (nodes, tables) = built.tree_size();
    r.put("structure", built.structure_name())
        .put("tree_nodes", nodes)
        .put("tree_tables", tables)
        .num("compile_ms", ms(built.compile), 2)
        .num("structure_ms", ms(built.structure), 2)
        .num("code_ms", ms(built.code), 2)
        .num(
            "build_ms",
            ms(built.compile + built.structure + built.code),
            2,
        )
        .opt("tuple_build_ms", tuple.map(|t| ms(t.2)), 2)
        .put("structure_bytes", built.structure_bytes())
        .put("code_bytes", built.code_bytes())
        .put("rss_bytes", built.rss_growth);
}
