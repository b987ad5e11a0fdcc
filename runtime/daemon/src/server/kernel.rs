//! The kernel pre-filter an interface's flows add up to: the union of
//! their pcap filters as classic BPF where it fits the kernel (at most
//! [`sluice_split::compile::UNION_MAX`] filters and the kernel's 4,096 instructions); else the
//! whole merged set as one eBPF program chain with maps (sluice-ebpf's
//! [`MultiFilter`], as a socket filter), up to [`EBPF_MAX`] filters; else
//! every packet.
//!
//! Rule: the pre-filter may pass more than the flows want, never less
//! (the merged classifier judges every packet again in user space); an
//! eBPF chain is held here until a later pre-filter is in force, because
//! its program array empties when the last holder closes it.

use super::Iface;
use sluice_classifier::merged::Compiled;
use sluice_ebpf::multi::Options;
use sluice_ebpf::{Mode, MultiFilter};
use sluice_filter::{Language, Program};
use sluice_live::session::KernelProgram;
use sluice_live::KernelFilter;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::Arc;

/// Most filters in an eBPF pre-filter (more: every packet reaches user
/// space; a build of this many session filters takes some 50 ms on the
/// control thread).
pub(crate) const EBPF_MAX: usize = 4096;

/// What a new pre-filter is.
pub(crate) enum Choice {
    /// The one in force already.
    Same,
    /// A new program, and the eBPF chain it runs (if it is one).
    New(KernelProgram, Option<Arc<MultiFilter>>),
}

/// The eBPF chains of an interface: the filter ids of the newest, and each
/// with the generation of the pre-filter it is.
#[derive(Default)]
pub(crate) struct Held {
    ids: Vec<u32>,
    chains: Vec<(u64, Arc<MultiFilter>)>,
}

impl Held {
    /// Keep `chain`, the pre-filter of `generation`.
    pub(crate) fn keep(&mut self, generation: u64, chain: Arc<MultiFilter>) {
        self.chains.push((generation, chain));
    }

    /// Let go of the chains older than the pre-filter in force (those in
    /// force or waiting to be stay).
    pub(crate) fn release(&mut self, applied: u64) {
        self.chains.retain(|(g, _)| *g >= applied);
    }
}

/// A chain's first program, for a socket.
struct Entry(Arc<MultiFilter>);

impl AsFd for Entry {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.fd().as_fd()
    }
}

/// The pre-filter of interface `i` for the flows' filters: `ids` (in the
/// classifier) and `exprs` (their texts, with their language prefixes),
/// each text once; against the one in force, `now`.
pub(crate) fn choose(i: &mut Iface, ids: &[u32], exprs: &[&str], now: &KernelProgram) -> Choice {
    let program = if exprs.is_empty() {
        super::reject_all()
    } else if exprs.iter().any(|e| e.trim().is_empty()) {
        // A flow that takes every packet.
        accept_all(i.snaplen)
    } else if let Some(p) = union(exprs, i.linktype, i.snaplen) {
        p
    } else if ids.len() <= EBPF_MAX {
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        if matches!(now, KernelProgram::Ebpf(_)) && ids == i.held.ids {
            return Choice::Same;
        }
        let compiled: Vec<(u32, &Compiled)> = ids
            .iter()
            .filter_map(|id| Some((*id, &**i.compiled.get(id)?)))
            .collect();
        match chain(&compiled, i.snaplen) {
            Some((k, m)) => {
                i.held.ids = ids;
                return Choice::New(KernelProgram::Ebpf(k), Some(m));
            }
            None => accept_all(i.snaplen),
        }
    } else {
        accept_all(i.snaplen)
    };
    match now {
        KernelProgram::Classic(p) if *p == program => Choice::Same,
        _ => Choice::New(KernelProgram::Classic(program), None),
    }
}

/// The set as one eBPF socket-filter chain, or `None` where it cannot be
/// one (too many programs for the kernel, a filter it does not take, no
/// privilege): then every packet goes to user space.
fn chain(set: &[(u32, &Compiled)], snaplen: u32) -> Option<(KernelFilter, Arc<MultiFilter>)> {
    let opts = Options {
        accept: snaplen,
        ..Options::default()
    };
    let m = Arc::new(MultiFilter::build(set, Mode::Socket, opts).ok()?);
    let insns = m.instructions().iter().sum();
    Some((KernelFilter::ebpf(Arc::new(Entry(m.clone())), insns), m))
}

/// A program that accepts every packet whole.
fn accept_all(snaplen: u32) -> Vec<sluice_bpf::Insn> {
    use sluice_bpf::op::{BPF_K, BPF_RET};
    vec![sluice_bpf::Insn::stmt(BPF_RET | BPF_K, snaplen)]
}

/// One program accepting what any of the pcap filters accepts, when they
/// are few and all pcap, and the result fits the kernel.
fn union(exprs: &[&str], linktype: u16, snaplen: u32) -> Option<Vec<sluice_bpf::Insn>> {
    if exprs.iter().any(|e| Language::split(e).0 != Language::Pcap) {
        return None;
    }
    let lt = sluice_filter::LinkType::from_number(u32::from(linktype))?;
    let builder = Program::builder(lt).snaplen(snaplen);
    sluice_split::compile::union_program(exprs, &builder, sluice_live::MAX_INSNS)
}
