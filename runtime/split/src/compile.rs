//! Filters prepared for merging, compiled on every core.
//!
//! Compiling a filter for a merged classifier (the expression into a
//! [`Program`](sluice_filter::Program), the program into the classifier's
//! [`Compiled`] form: its accepting paths, with the tests its other paths
//! make needless dropped) needs nothing but the filter, so a large set is
//! compiled on all cores at once; only the inserts that follow touch the
//! shared structure. `sluice split` and the merging benchmark compile
//! their filters here.
//!
//! ```
//! use sluice_filter::{LinkType, Program};
//! let builder = Program::builder(LinkType::EN10MB);
//! let out = sluice_split::compile::compile_all(&builder, &["tcp port 80", "udp prt 53"]);
//! assert!(out[0].is_ok());
//! assert!(out[1].is_err()); // in input order, each with its own error
//! ```

use sluice_classifier::merged::Compiled;
use sluice_filter::{Error, Program, ProgramBuilder};

/// Below this many filters per thread, compiling on one thread is as fast.
const PER_THREAD: usize = 64;

/// Filters a thread takes at a time. Costs differ by orders of magnitude
/// between filters (`tcp` against a long `or` of byte tests), and sets
/// group alike filters together, so threads take small blocks in turn
/// rather than one share each: a thread that drew cheap filters takes
/// more.
const BLOCK: usize = 8;

/// Each text compiled with `builder` and prepared for merging, in input
/// order; the threads used are at most the machine's cores.
pub fn compile_all<S: AsRef<str> + Sync>(
    builder: &ProgramBuilder,
    texts: &[S],
) -> Vec<Result<Compiled, Error>> {
    let mut all = Vec::with_capacity(texts.len());
    compile_each(builder, texts, |_, c| all.push(c));
    all
}

/// [`compile_all`], handing each result to `take` on the calling thread
/// in input order as soon as it and those before it are compiled, so
/// that the caller's work on them (inserting into a classifier) runs
/// while the other threads compile the rest.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let builder = Program::builder(LinkType::EN10MB);
/// let mut seen = Vec::new();
/// sluice_split::compile::compile_each(&builder, &["tcp", "udp prt 53"], |i, c| seen.push((i, c.is_ok())));
/// assert_eq!(seen, vec![(0, true), (1, false)]);
/// ```
pub fn compile_each<S: AsRef<str> + Sync>(
    builder: &ProgramBuilder,
    texts: &[S],
    mut take: impl FnMut(usize, Result<Compiled, Error>),
) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(texts.len() / PER_THREAD).max(1);
    if threads == 1 {
        for (i, t) in texts.iter().enumerate() {
            take(i, compile(builder, t.as_ref()));
        }
        return;
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (done, blocks) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (next, done) = (&next, done.clone());
                s.spawn(move || loop {
                    let at = next.fetch_add(BLOCK, std::sync::atomic::Ordering::Relaxed);
                    let Some(rest) = texts.get(at..).filter(|r| !r.is_empty()) else {
                        return;
                    };
                    let block = &rest[..rest.len().min(BLOCK)];
                    let out: Vec<_> = block.iter().map(|t| compile(builder, t.as_ref())).collect();
                    if done.send((at, out)).is_err() {
                        return;
                    }
                })
            })
            .collect();
        drop(done);
        // Blocks that came before the ones ahead of them, by first index.
        let mut early = std::collections::BTreeMap::new();
        let mut want = 0;
        for (at, out) in blocks {
            early.insert(at, out);
            while let Some(out) = early.remove(&want) {
                for (i, c) in out.into_iter().enumerate() {
                    take(want + i, c);
                }
                want += BLOCK;
            }
        }
        for w in workers {
            if let Err(panic) = w.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// One text, as [`compile_all`] compiles it.
pub fn compile(builder: &ProgramBuilder, text: &str) -> Result<Compiled, Error> {
    let p = builder.build(text)?;
    Ok(p.for_merging())
}

/// Most filters for which [`union_program`] tries one program.
pub const UNION_MAX: usize = 256;

/// One classic BPF program accepting what any of the pcap expressions
/// `exprs` accepts, built with `builder`, for a kernel pre-filter
/// ([`Program::union_bpf`]: each expression keeps its own meaning):
/// `None` when there are more than [`UNION_MAX`], one is empty (every
/// packet), one does not compile, or the program is longer than
/// `max_insns` less the three instructions of the kernel's VLAN check.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let b = Program::builder(LinkType::EN10MB);
/// let u = sluice_split::compile::union_program(&["tcp port 80", "udp"], &b, 4096).unwrap();
/// assert!(u.len() > 3);
/// assert!(sluice_split::compile::union_program(&["tcp", " "], &b, 4096).is_none());
/// ```
pub fn union_program(
    exprs: &[&str],
    builder: &ProgramBuilder,
    max_insns: usize,
) -> Option<Vec<sluice_bpf::Insn>> {
    if exprs.len() > UNION_MAX || exprs.iter().any(|e| e.trim().is_empty()) {
        return None;
    }
    let programs: Vec<Program> = exprs
        .iter()
        .map(|e| builder.build(e).ok())
        .collect::<Option<_>>()?;
    let refs: Vec<&Program> = programs.iter().collect();
    Program::union_bpf(&refs, max_insns.checked_sub(3)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_filter::{LinkType, Program};

    /// The union accepts every packet one of its filters accepts, on every
    /// Ethernet packet of the corpus, for sets of corpus expressions in
    /// file order (where `vlan`, `mpls` and `pppoes` change what the terms
    /// after them read when the texts are joined, and a filter's load past
    /// a short frame would abort the others).
    #[test]
    fn the_union_accepts_what_one_of_its_filters_accepts() {
        use sluice_testsupport::corpus;
        let Some(exprs) = corpus::lines("expressions.txt") else {
            corpus::skipped("union of corpus expressions");
            return;
        };
        let builder = Program::builder(LinkType::EN10MB).offline(true);
        let programs: Vec<(&str, Program)> = exprs
            .iter()
            .filter(|e| !e.trim().is_empty())
            .filter_map(|e| Some((e.as_str(), builder.build(e).ok()?)))
            .filter(|(_, p)| p.ir().is_some())
            .collect();
        let mut packets = Vec::new();
        for pcap in corpus::pcaps() {
            packets.extend(
                corpus::packets(&pcap)
                    .into_iter()
                    .filter(|p| p.linktype == 1),
            );
        }
        assert!(programs.len() > 400 && packets.len() > 5000);
        let (mut tried, mut wider) = (0, 0u64);
        for set in programs.chunks(40) {
            let exprs: Vec<&str> = set.iter().map(|(e, _)| *e).collect();
            let Some(u) = union_program(&exprs, &builder, 4096) else {
                continue;
            };
            tried += 1;
            // As the kernel runs a socket filter: the frame whole.
            for p in &packets {
                let len = p.data.len() as u32;
                let one = set
                    .iter()
                    .any(|(_, f)| sluice_bpf::run(f.bpf(), &p.data, len) != 0);
                let all = sluice_bpf::run(&u, &p.data, len) != 0;
                assert!(all || !one, "{exprs:?}\npacket {:02x?}", p.data);
                (!one && all).then(|| wider += 1);
            }
        }
        assert!(tried >= 10, "only {tried} unions fit");
        // It may accept more than its filters where they would abort (a
        // `protochain` walk counts as such), not everything.
        assert!(
            wider * 4 < packets.len() as u64 * tried,
            "{wider} wider verdicts"
        );
    }

    #[test]
    fn many_filters_keep_their_order_and_their_errors() {
        let texts: Vec<String> = (0..300)
            .map(|i| match i % 3 {
                0 => format!("tcp port {i}"),
                1 => format!("udp prt {i}"),
                _ => format!("host 10.0.{}.{} or vlan {}", i / 256, i % 256, i % 4000),
            })
            .collect();
        let builder = Program::builder(LinkType::EN10MB);
        let all = compile_all(&builder, &texts);
        assert_eq!(all.len(), texts.len());
        for (t, c) in texts.iter().zip(&all) {
            match (compile(&builder, t), c) {
                (Ok(a), Ok(b)) => assert_eq!(a.paths(), b.paths(), "{t}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{t}"),
                _ => panic!("{t}: one by one and all at once differ"),
            }
        }
        assert_eq!(all.iter().filter(|c| c.is_err()).count(), 100);
    }
}
