//! How compile cost grows with the size of an expression: `host a or host b
//! or ...` with N terms (libpcap issue 1255), split into parsing, code
//! generation, the refusal model (what libpcap's optimiser would refuse),
//! the IR's disjunction rewrite (sets), and lowering to classic BPF with
//! its optimiser; and the whole compile as `sluice filter` makes it
//! (`Program::builder(..).expression(..)`, all of the stages).
//!
//! `cargo bench --bench compile` prints a Markdown table; each figure is the
//! best of 3 runs. `SLUICE_BENCH_SIZES="100000 1000000"` picks the sizes.

use std::time::{Duration, Instant};

// The same allocator as the `sluice` command.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn expression(n: u32) -> String {
    let terms: Vec<String> = (1..=n)
        .map(|i| format!("host 10.{}.{}.{}", (i >> 16) & 255, (i >> 8) & 255, i & 255))
        .collect();
    terms.join(" or ")
}

fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = None;
    let mut out = None;
    for _ in 0..3 {
        let t = Instant::now();
        let r = f();
        let d = t.elapsed();
        if best.map_or(true, |b| d < b) {
            best = Some(d);
        }
        out = Some(r);
    }
    (best.unwrap(), out.unwrap())
}

fn main() {
    println!(
        "| terms | parse | generate IR | refusal model | sets | lower + optimise | whole compile | BPF instructions |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    // SLUICE_BENCH_SIZES="1000 50000" picks other sizes.
    let sizes: Vec<u32> = std::env::var("SLUICE_BENCH_SIZES")
        .ok()
        .map(|s| {
            s.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![10, 100, 1_000, 10_000, 100_000]);
    for n in sizes {
        let text = expression(n);
        let (tp, ast) = best(|| sluice::pcap::parser::parse(&text).unwrap());
        let (tg, ir) =
            best(|| sluice::pcap::gen::generate(&ast, sluice::LinkType::EN10MB, 262144).unwrap());
        let (tr, refused) = best(|| sluice::cbpf::libpcap_refusal(&ir));
        assert_eq!(refused, Ok(()));
        // The rewrite consumes its input: time it on fresh copies.
        let mut copies: Vec<_> = (0..3).map(|_| ir.clone()).collect();
        let (ts, ir) = best(|| {
            let mut f = copies.pop().expect("a copy per run");
            f.pred = sluice::ir::simplify::fast_disjunctions(f.pred);
            f
        });
        let (tl, prog) = best(|| sluice::cbpf::lower(&ir).unwrap());
        drop(ir);
        let (tw, whole) = best(|| {
            sluice::Program::builder(sluice::LinkType::EN10MB)
                .expression(&text)
                .unwrap()
        });
        assert_eq!(whole.bpf().len(), prog.len());
        let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} |",
            ms(tp),
            ms(tg),
            ms(tr),
            ms(ts),
            ms(tl),
            ms(tw),
            prog.len()
        );
    }
}
