//! Many different filters at once (issue 22): the default merged engine
//! against the same filters run one by one, in one run.
//!
//! `cargo bench --bench merging -- [SECTION[=N,N,...]]...` with the
//! sections
//!
//! * `corpus`: every Ethernet packet of the shared corpus as one capture,
//!   with the first N expressions of `conformance/expressions.txt`
//!   (default N = 10, 30, 100, 300, 600);
//! * `generated`: `sluice_workload::filter_set(N, seed)` over
//!   `sluice_workload::traffic(N, seed, P)` (default N = 10, 100, 1,000,
//!   10,000, 100,000);
//! * `updates`: a structural insert (a filter of a shape not yet
//!   installed) and key-only inserts into a `sluice_native::AutoClassifier`
//!   holding 10,000 generated filters.
//!
//! No section named: all three. Each N of `corpus` and `generated` times,
//! on the same packets: the default engine as machine code
//! ([`sluice_native::NativeAuto`], per packet and in batches of 32, and
//! which structure it chose), tuple space search as machine code
//! ([`sluice_native::merged::NativeMerged`]), sluice's native code one
//! filter after another, libpcap's `bpf_filter` one filter after another,
//! and the floor (copying each packet's matches, found beforehand). The
//! one-by-one baselines cost O(N) per packet: they run on a prefix of the
//! packets (all of them while that is cheap) and only up to N = 10,000.
//! Every row must report the same matches as the default engine on the
//! packets it ran (the run fails otherwise).
//!
//! Results are TSV rows (see [`report`]), one file per section, appended
//! to `SLUICE_MERGING_OUT=DIR` (`corpus.tsv`, `generated.tsv`,
//! `updates.tsv`) or printed; progress goes to stderr.
//! `scripts/bench-merging.sh` runs each generated N in a process of its
//! own (so that RSS growth is the build's alone) and turns the TSV into
//! Markdown tables, `docs/merging-bench.md` and a plot.
//!
//! Environment: `SLUICE_MERGING_QUICK=1` (short timings, fewer packets:
//! for development), `SLUICE_MERGING_SEED` (default 1), `SLUICE_SHARED`
//! (default `../shared`). libpcap must be installed (it is loaded at run
//! time, as `sluice bench` does).

mod build;
mod config;
mod corpus;
mod generated;
mod keys;
mod oracle;
mod packets;
mod report;
mod rows;
mod set;
mod timing;
mod updates;

use config::{Config, Section};

// The same allocator as the `sluice` command.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let cfg = Config::from_env_and_args();
    let lib = match sluice::libpcap::Libpcap::load() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("merging bench: libpcap is needed for the baseline: {e}");
            std::process::exit(2);
        }
    };
    build::warm_up();
    for section in &cfg.sections {
        match section {
            Section::Corpus(sizes) => corpus::run(&cfg, sizes, &lib),
            Section::Generated(sizes) => generated::run(&cfg, sizes, &lib),
            Section::Updates => updates::run(&cfg),
        }
    }
}
