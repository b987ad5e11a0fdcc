//! The kernel pre-filter an interface's flows add up to: the union of
//! their pcap filters as classic BPF where it fits the kernel (at most
//! [`sluice_split::compile::UNION_MAX`] filters and the kernel's 4,096 instructions); else the
//! whole merged set in eBPF as a socket filter (sluice-ebpf's
//! [`KernelSet`]: the merged decision tree, or the groups' chain where the
//! tree cannot be loaded), up to [`EBPF_MAX`] filters; else every packet.
//!
//! Rule: the pre-filter may pass more than the flows want, never less
//! (the merged classifier judges every packet again in user space); an
//! eBPF chain is held here until a later pre-filter is in force, because
//! its program array empties when the last holder closes it. An eBPF
//! pre-filter is built on a thread of its own (the kernel verifying a
//! tree of 1,000 filters of every shape takes seconds): the control
//! thread waits for it [`SYNC_BUILD`] at most, and past that every packet
//! passes until the build is done and the control loop puts it in force
//! ([`Held::finished`]).

use super::Iface;
use sluice_classifier::merged::Compiled;
use sluice_ebpf::multi::Options;
use sluice_ebpf::{KernelSet, Mode};
use sluice_filter::{Language, Program};
use sluice_live::session::KernelProgram;
use sluice_live::KernelFilter;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// Most filters in an eBPF pre-filter (more: every packet reaches user
/// space). A build of 1,000 session filters takes about 10 ms as the
/// tree, of 1,000 generated filters of every shape about 1.7 s (the
/// kernel verifying a program of 180,000 instructions).
pub(crate) const EBPF_MAX: usize = 4096;

/// How long the control thread waits for an eBPF pre-filter's build
/// before it lets every packet pass until the build is done (session
/// filters by the thousand are built in less).
pub(crate) const SYNC_BUILD: Duration = Duration::from_millis(100);

/// An eBPF pre-filter as built: the kernel program and the set, or `None`
/// where the set cannot be one.
type Built = Option<(KernelFilter, Arc<KernelSet>)>;

/// What a new pre-filter is.
pub(crate) enum Choice {
    /// The one in force already.
    Same,
    /// A new program, and the eBPF chain it runs (if it is one).
    New(KernelProgram, Option<Arc<KernelSet>>),
}

/// The eBPF chains of an interface: the filter ids of the newest, and each
/// with the generation of the pre-filter it is.
#[derive(Default)]
pub(crate) struct Held {
    ids: Vec<u32>,
    chains: Vec<(u64, Arc<KernelSet>)>,
    /// The build under way: its filter ids and where its result comes.
    building: Option<(Vec<u32>, mpsc::Receiver<Built>)>,
    /// A build done, not yet looked at by [`choose`].
    ready: Option<(Vec<u32>, Built)>,
    /// The ids of the last set that could not be built (not tried again).
    failed: Vec<u32>,
}

impl Held {
    /// Keep `chain`, the pre-filter of `generation`.
    pub(crate) fn keep(&mut self, generation: u64, chain: Arc<KernelSet>) {
        self.chains.push((generation, chain));
    }

    /// True when a build has finished since the last look: the control
    /// loop then chooses the pre-filter again, which takes the build if
    /// it is still the one wanted.
    pub(crate) fn finished(&mut self) -> bool {
        let Some((_, rx)) = &self.building else {
            return false;
        };
        let built = match rx.try_recv() {
            Ok(b) => b,
            Err(mpsc::TryRecvError::Empty) => return false,
            Err(mpsc::TryRecvError::Disconnected) => None,
        };
        let (ids, _) = self.building.take().expect("looked at above");
        self.ready = Some((ids, built));
        true
    }

    /// The newest eBPF pre-filter's form: `"tree"` or `"groups"`.
    pub(crate) fn form(&self) -> Option<&'static str> {
        self.chains.last().map(|(_, c)| c.kind())
    }

    /// Let go of the chains older than the pre-filter in force (those in
    /// force or waiting to be stay).
    pub(crate) fn release(&mut self, applied: u64) {
        self.chains.retain(|(g, _)| *g >= applied);
    }
}

/// A chain's first program, for a socket.
struct Entry(Arc<KernelSet>);

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
        match ebpf(i, ids) {
            Some(Some((k, m))) => return Choice::New(KernelProgram::Ebpf(k), Some(m)),
            // Building, or it cannot be eBPF: everything passes.
            _ => accept_all(i.snaplen),
        }
    } else {
        accept_all(i.snaplen)
    };
    match now {
        KernelProgram::Classic(p) if *p == program => Choice::Same,
        _ => Choice::New(KernelProgram::Classic(program), None),
    }
}

/// The eBPF pre-filter for the sorted `ids`: `Some(built)` once built
/// (the result of a build that finished, or of one done within
/// [`SYNC_BUILD`]), `None` while a build is under way.
fn ebpf(i: &mut Iface, ids: Vec<u32>) -> Option<Built> {
    let held = &mut i.held;
    if let Some((done, built)) = held.ready.take() {
        if done == ids {
            return Some(take(held, ids, built));
        }
    }
    if held.failed == ids {
        return Some(None);
    }
    if held.building.is_some() {
        // One build at a time: when it is done, the control loop chooses
        // again, and a stale build makes way for the set wanted then.
        return None;
    }
    let set: Vec<(u32, Arc<Compiled>)> = ids
        .iter()
        .filter_map(|id| Some((*id, i.compiled.get(id)?.clone())))
        .collect();
    let (tx, rx) = mpsc::channel();
    let snaplen = i.snaplen;
    let spawned = std::thread::Builder::new()
        .name("sluice-ebpf-build".into())
        .spawn(move || {
            let refs: Vec<(u32, &Compiled)> = set.iter().map(|(id, c)| (*id, &**c)).collect();
            let _ = tx.send(chain(&refs, snaplen));
        });
    if spawned.is_err() {
        return Some(None);
    }
    match rx.recv_timeout(SYNC_BUILD) {
        Ok(built) => Some(take(held, ids, built)),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            held.building = Some((ids, rx));
            None
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Some(take(held, ids, None)),
    }
}

/// A build's result for `ids`, remembered.
fn take(held: &mut Held, ids: Vec<u32>, built: Built) -> Built {
    match &built {
        Some(_) => held.ids = ids,
        None => held.failed = ids,
    }
    built
}

/// The set as one eBPF socket-filter chain, or `None` where it cannot be
/// one (too many programs for the kernel, a filter it does not take, no
/// privilege): then every packet goes to user space.
fn chain(set: &[(u32, &Compiled)], snaplen: u32) -> Option<(KernelFilter, Arc<KernelSet>)> {
    let opts = Options {
        accept: snaplen,
        ..Options::default()
    };
    let m = Arc::new(KernelSet::build(set, Mode::Socket, opts).ok()?);
    let insns = m.instructions();
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
