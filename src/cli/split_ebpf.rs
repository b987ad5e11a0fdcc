//! `sluice split --engine ebpf --count` on a capture: the filter set in
//! the kernel as the merged decision tree compiled to eBPF
//! ([`sluice::ebpf::TreeFilter`], one per link type; where the tree
//! cannot be built, the merged classifier's groups as a chain,
//! [`sluice::ebpf::MultiFilter`]), each packet run through it with
//! `BPF_PROG_TEST_RUN`, and each filter's count read from the program's
//! per-CPU counter map at the end.
//!
//! With `-i`, the chain is the rings' socket filter (`SO_ATTACH_BPF`): it
//! counts every frame and passes none to user space, so counting costs
//! no user-space work; only a frame whose VLAN tag the kernel took off
//! passes uncounted (the filters mean the frame with its tag, as libpcap
//! shows it) and is counted in user space by the merged classifier.
//!
//! With `--out-dir` or `--first-match` instead, the chain is only the
//! rings' pre-filter ([`prefilter`]): it passes the frames some filter
//! wants, and user space judges and writes them as the default engine
//! does.
//!
//! With `--xdp` too, the set also runs as an XDP chain on the interface:
//! it counts each frame the interface receives before the kernel's stack
//! and drops there the frames no filter wants; the socket's chain then
//! counts only the frames the host sends (the kernel hands those to
//! packet sockets, never to XDP). The counts printed are the sums.
//!
//! Rule: the same filters, link types, refusals and output (`--count`,
//! `--json`) as the default engine; the counts printed are the kernel's
//! (plus, live, the tagged frames'). A packet the kernel's test run cannot
//! take (longer than a page) stops the run with an error naming it, and,
//! as for the default engine, a failed run prints no counts.

use super::{build, builder, linktype_of, many, rejected, report, Bits, SplitArgs};
use crate::cli::live::Live;
use crate::cli::{cached, for_each_packet_declaring, open_capture, signals, Fail};
use sluice::ebpf::multi::Options;
use sluice::ebpf::{KernelSet, Mode};
use sluice::live::session::{Classify, Event};
use sluice::split::FilterLine;
use sluice::split::MergingScratch;
use std::collections::HashMap;
use std::sync::Arc;

/// The filter set loaded for one link type (ids: the lines' positions).
fn load(
    filters: &[FilterLine],
    lt: u16,
    name: &str,
    big_endian: bool,
    file: &str,
) -> Result<KernelSet, Fail> {
    let lt = linktype_of(lt, name)?;
    chain(
        filters,
        lt,
        Some(big_endian),
        file,
        Mode::TestRun,
        Options::default(),
    )
}

/// The filter set compiled for `lt` and built as a chain for `mode`.
fn chain(
    filters: &[FilterLine],
    lt: sluice::LinkType,
    big_endian: Option<bool>,
    file: &str,
    mode: Mode,
    opts: Options,
) -> Result<KernelSet, Fail> {
    let compiled = sluice::split::compile_set(filters, &builder(lt, big_endian, file))
        .map_err(|r| many(rejected(filters, lt, file, r), true))?;
    let set: Vec<(u32, &sluice::classifier::merged::Compiled)> = compiled
        .iter()
        .enumerate()
        .map(|(i, c)| (i as u32, c))
        .collect();
    KernelSet::build(&set, mode, opts).map_err(|e| Fail(format!("--engine ebpf: {e}")))
}

/// The refusal of the options that need every packet in user space.
fn refuse_per_packet(args: &SplitArgs) -> Result<(), Fail> {
    if args.out_dir.is_some() || args.verdicts || args.first_match || args.fragments {
        return Err(Fail(
            "--engine ebpf: split counts in the kernel: it takes --count (and --json), not --out-dir, --verdicts, --first-match or --fragments"
                .into(),
        ));
    }
    Ok(())
}

/// Refuse a live capture whose link the eBPF chains do not read.
fn ebpf_link(live: &Live) -> Result<(), Fail> {
    if ![1, 12, 101].contains(&live.linktype()) {
        return Err(Fail(format!(
            "--engine ebpf: {}: live capture runs eBPF on Ethernet and raw IP links only",
            live.name()
        )));
    }
    Ok(())
}

/// `sluice split -i IFACE --engine ebpf --count`: the chain as the rings'
/// socket filter, counting in the kernel.
pub(super) fn run_live(args: &SplitArgs, filters: &[FilterLine], file: &str) -> Result<(), Fail> {
    refuse_per_packet(args)?;
    if !args.count {
        return Err(Fail(
            "--engine ebpf: split -i counts in the kernel: give --count".into(),
        ));
    }
    if filters.is_empty() {
        return Err(Fail(format!("{file}: no filters")));
    }
    let mut live = Live::open(&args.live, crate::cli::DEFAULT_SNAPLEN)?;
    ebpf_link(&live)?;
    let lt = linktype_of(live.linktype(), live.name())?;
    // Before the socket's chain, so that no received frame the ring
    // takes goes uncounted.
    let xdp = match args.xdp {
        true => Some(xdp(filters, lt, &live, file)?),
        false => None,
    };
    // Nothing counted goes on to user space.
    let opts = Options {
        accept: 0,
        outgoing_only: xdp.is_some(),
        ..Options::default()
    };
    let chain = chain(filters, lt, None, file, Mode::Socket, opts)?;
    let insns = chain.instructions();
    if !live.prefilter_ebpf(std::os::fd::AsFd::as_fd(chain.fd()), insns)? {
        return Err(Fail(
            "--engine ebpf: split -i counts in the kernel: it needs the kernel filter".into(),
        ));
    }
    // Tagged frames, which reach user space uncounted.
    let merged = Arc::new(build(filters, lt, None, file, true).map_err(|e| many(e, true))?);
    eprintln!("sluice: {}", live.banner());
    let make = || -> Classify {
        let m = merged.clone();
        let mut scratch = MergingScratch::default();
        Box::new(move |data: &[u8], wirelen: u32, ids: &mut Vec<u32>| {
            m.classify_sorted(data, wirelen, &mut scratch, ids);
        })
    };
    let mut counts = vec![0u64; filters.len()];
    let (report_, status) = live.run(false, make, |event| {
        if let Event::Packet(_, ids) = event {
            for id in ids {
                counts[*id as usize] += 1;
            }
        }
        Ok(true)
    });
    eprint!("{}", report_.text(args.json));
    status?;
    for set in std::iter::once(&chain).chain(xdp.as_ref().map(|x| &x.0)) {
        let kernel = set
            .counts()
            .map_err(|e| Fail(format!("--engine ebpf: {e}")))?;
        for (total, n) in counts.iter_mut().zip(kernel) {
            *total += n;
        }
    }
    report(args, filters, &counts, &[], report_.seen, None)
}

/// `split -i --engine ebpf` with `--out-dir` or `--first-match`: the set
/// as an eBPF chain that passes to user space only the frames some filter
/// wants (and, whole, those whose VLAN tag the kernel took off), every
/// ring's pre-filter in place of the classic union, however many filters.
/// The chain must be held for the run.
pub(super) fn prefilter(
    live: &mut Live,
    filters: &[FilterLine],
    lt: sluice::LinkType,
    file: &str,
) -> Result<KernelSet, Fail> {
    ebpf_link(live)?;
    let set = chain(filters, lt, None, file, Mode::Socket, Options::default())?;
    let insns = set.instructions();
    live.prefilter_ebpf(std::os::fd::AsFd::as_fd(set.fd()), insns)?;
    Ok(set)
}

/// `--xdp`: the set as an XDP chain attached to the capture's interface
/// (one Ethernet interface), said on standard error. The link detaches
/// it when dropped, or when the process ends however it ends.
fn xdp(
    filters: &[FilterLine],
    lt: sluice::LinkType,
    live: &Live,
    file: &str,
) -> Result<(KernelSet, sluice::ebpf::XdpLink), Fail> {
    let iface = live.name();
    if live.linktype() != 1 || iface == "any" {
        return Err(Fail(format!(
            "--xdp: {iface}: XDP runs on one Ethernet interface (not 'any', not other links)"
        )));
    }
    let set = chain(filters, lt, None, file, Mode::Xdp, Options::default())?;
    let link = set
        .attach_xdp(iface)
        .map_err(|e| Fail(format!("--xdp: {e}")))?;
    eprintln!(
        "sluice: XDP filter set on {iface} ({}, {} programs, {} instructions): frames no filter wants are dropped before the kernel's stack",
        if link.native() { "native" } else { "generic" },
        set.programs(),
        set.instructions()
    );
    Ok((set, link))
}

/// Run `sluice split --engine ebpf` on a capture.
pub(super) fn run(
    args: &SplitArgs,
    filters: &[FilterLine],
    errors: Vec<(usize, String)>,
    file: &str,
) -> Result<(), Fail> {
    refuse_per_packet(args)?;
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
    let mut sets: HashMap<u16, KernelSet> = HashMap::new();
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
