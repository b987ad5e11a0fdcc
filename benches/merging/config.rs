//! What to run: sections and sizes from the arguments, the rest from the
//! environment (see the crate doc).

use std::path::PathBuf;
use std::time::Duration;

/// The corpus sizes the issue names.
pub const CORPUS_SIZES: [usize; 5] = [10, 30, 100, 300, 600];
/// The generated sizes the issue names.
pub const GENERATED_SIZES: [usize; 5] = [10, 100, 1_000, 10_000, 100_000];
/// The one-by-one baselines (O(N) per packet) run up to this many filters.
pub const ONE_BY_ONE_MAX: usize = 10_000;

/// One section of the run.
#[derive(Clone, Debug)]
pub enum Section {
    /// The shared corpus with the first N expressions, for each N.
    Corpus(Vec<usize>),
    /// Generated sets of N filters, for each N.
    Generated(Vec<usize>),
    /// Structural and key-only inserts at 10,000 installed filters.
    Updates,
}

/// The run's settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Sections, in the order given.
    pub sections: Vec<Section>,
    /// Short timings and fewer packets.
    pub quick: bool,
    /// The workload's seed.
    pub seed: u64,
    /// The shared directory (the corpus lives there).
    pub shared: PathBuf,
    /// Where TSV rows are appended (`None`: printed).
    pub out: Option<PathBuf>,
}

impl Config {
    /// Time spent timing one engine on one set (five samples).
    pub fn budget(&self) -> Duration {
        Duration::from_millis(if self.quick { 250 } else { 3000 })
    }

    /// Packets of generated traffic the merged engines classify.
    pub fn traffic_packets(&self) -> usize {
        if self.quick {
            16_384
        } else {
            131_072
        }
    }

    /// Packets the one-by-one baselines run on at `n` filters: about
    /// `work` filter runs per pass, at least `floor` packets, at most all.
    pub fn one_by_one_packets(&self, n: usize, all: usize) -> usize {
        let (work, floor) = if self.quick {
            (1_000_000, 200)
        } else {
            (10_000_000, 1_000)
        };
        (work / n.max(1)).clamp(floor, all.max(floor)).min(all)
    }

    /// The settings of this process.
    pub fn from_env_and_args() -> Config {
        let quick = std::env::var("SLUICE_MERGING_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
        let seed = std::env::var("SLUICE_MERGING_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1);
        let shared = std::env::var_os("SLUICE_SHARED")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("../shared"));
        let out = std::env::var_os("SLUICE_MERGING_OUT").map(PathBuf::from);
        // `cargo bench` adds `--bench`: flags are not ours.
        let args: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with("--"))
            .collect();
        let sections = if args.is_empty() {
            vec![
                Section::Corpus(CORPUS_SIZES.to_vec()),
                Section::Generated(GENERATED_SIZES.to_vec()),
                Section::Updates,
            ]
        } else {
            args.iter().map(|a| parse_section(a)).collect()
        };
        Config {
            sections,
            quick,
            seed,
            shared,
            out,
        }
    }
}

/// `corpus`, `corpus=10,600`, `generated`, `generated=1000`, `updates`.
fn parse_section(arg: &str) -> Section {
    let (name, sizes) = match arg.split_once('=') {
        Some((n, s)) => (n, Some(s)),
        None => (arg, None),
    };
    let sizes = |default: &[usize]| match sizes {
        None => default.to_vec(),
        Some(s) => s
            .split(',')
            .map(|x| {
                x.replace('_', "")
                    .parse()
                    .unwrap_or_else(|_| usage(&format!("{arg}: not a size: {x}")))
            })
            .collect(),
    };
    match name {
        "corpus" => Section::Corpus(sizes(&CORPUS_SIZES)),
        "generated" => Section::Generated(sizes(&GENERATED_SIZES)),
        "updates" => Section::Updates,
        _ => usage(&format!("unknown section {arg}")),
    }
}

fn usage(why: &str) -> ! {
    eprintln!(
        "merging bench: {why}\nusage: merging [corpus[=N,...]] [generated[=N,...]] [updates]"
    );
    std::process::exit(2)
}
