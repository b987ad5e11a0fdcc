//! `sluice split --engine ebpf --count` on a capture: the filter set as one
//! chain of eBPF programs with maps in the kernel
//! ([`sluice::ebpf::MultiFilter`], one per link type), each packet run
//! through it with `BPF_PROG_TEST_RUN`, and each filter's count read from
//! the program's per-CPU counter map at the end.
//!
//! Rule: the same filters, link types, refusals and output (`--count`,
//! `--json`) as the default engine; the counts printed are the kernel's,
//! nothing is counted in user space. A packet the kernel's test run cannot
//! take (longer than a page) stops the run with an error naming it, and,
//! as for the default engine, a failed run prints no counts.

use super::{builder, linktype_of, many, rejected, report, Bits, SplitArgs};
use crate::cli::{cached, for_each_packet_declaring, open_capture, signals, Fail};
use sluice::ebpf::multi::Options;
use sluice::ebpf::{Mode, MultiFilter};
use sluice::split::FilterLine;
use std::collections::HashMap;

/// The filter set loaded for one link type (ids: the lines' positions).
fn load(
    filters: &[FilterLine],
    lt: u16,
    name: &str,
    big_endian: bool,
    file: &str,
) -> Result<MultiFilter, Fail> {
    let lt = linktype_of(lt, name)?;
    let compiled = sluice::split::compile_set(filters, &builder(lt, Some(big_endian), file))
        .map_err(|r| many(rejected(filters, lt, file, r), true))?;
    let set: Vec<(u32, &sluice::classifier::merged::Compiled)> = compiled
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32, c))
        .collect();
    MultiFilter::build(&set, Mode::TestRun, Options::default())
        .map_err(|e| Fail(format!("--engine ebpf: {e}")))
}

/// Run `sluice split --engine ebpf` on a capture.
pub(super) fn run(
    args: &SplitArgs,
    filters: &[FilterLine],
    errors: Vec<(usize, String)>,
    file: &str,
) -> Result<(), Fail> {
    if args.out_dir.is_some() || args.verdicts || args.first_match || args.fragments {
        return Err(Fail(
            "--engine ebpf: split counts in the kernel: it takes --count (and --json), not --out-dir, --verdicts, --first-match or --fragments"
                .into(),
        ));
    }
    if !errors.is_empty() {
        return Err(many(errors, true));
    }
    if filters.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }
    signals::install(false)?;
    let (mut reader, size) = open_capture(args.read.as_deref())?;
    let name = reader.name().to_string();
    let big_endian = super::super::big_endian(&reader.format());
    let mut sets: HashMap<u16, MultiFilter> = HashMap::new();
    for info in reader.declared_interfaces() {
        cached(&mut sets, info.linktype, || {
            load(filters, info.linktype, &name, big_endian, file)
        })?;
    }
    let mut seen = 0u64;
    let sets = std::cell::RefCell::new(sets);
    let status = for_each_packet_declaring(
        &mut reader,
        size,
        |info| {
            cached(&mut sets.borrow_mut(), info.linktype, || {
                load(filters, info.linktype, &name, big_endian, file)
            })
            .map(|_| ())
        },
        |pkt| {
            let mut sets = sets.borrow_mut();
            let m = cached(&mut sets, pkt.linktype, || {
                load(filters, pkt.linktype, &name, big_endian, file)
            })?;
            seen += 1;
            m.run(pkt.data, pkt.wirelen)
                .map_err(|e| Fail(format!("--engine ebpf: packet {seen}: {e}")))?;
            Ok(true)
        },
    );
    status?;
    let mut counts = vec![0u64; filters.len()];
    for m in sets.borrow().values() {
        let c = m
            .counts()
            .map_err(|e| Fail(format!("--engine ebpf: {e}")))?;
        for (total, n) in counts.iter_mut().zip(c) {
            *total += n;
        }
    }
    let bits: Vec<Bits> = (0..filters.len()).map(|_| Bits::default()).collect();
    report(args, filters, &counts, &bits, seen, None)
}
