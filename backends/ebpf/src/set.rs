//! A filter set in the kernel, as the decision tree where it can be and
//! as the groups' chain otherwise: the one choice every front end makes.
//!
//! Rule: [`KernelSet::build`] tries [`TreeFilter`] first (one walk a
//! packet, tables in code and in sluice's own hash table) and falls back
//! to [`MultiFilter`] where the tree cannot be built or loaded (a kernel
//! without `bpf_loop`, a tree too deep for the stack). A refusal for lack
//! of privilege is not a reason to try again: it is returned.
//!
//! ```no_run
//! use sluice_classifier::merged::Compiled;
//! use sluice_ebpf::{multi::Options, KernelSet, Mode};
//! let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
//! let set = KernelSet::build(&[(0, &f)], Mode::TestRun, Options::default())?;
//! assert_ne!(set.run(&[0; 60], 60)?, 0);
//! assert_eq!(set.counts()?, vec![1]);
//! # Ok::<(), sluice_ebpf::Error>(())
//! ```

use crate::multi::Options;
use crate::{Error, Mode, MultiFilter, TreeFilter, XdpLink};
use sluice_classifier::merged::Compiled;
use std::os::fd::OwnedFd;

/// A filter set loaded into the kernel: the decision tree, or the
/// groups' chain.
#[derive(Debug)]
pub enum KernelSet {
    /// The merged decision tree ([`TreeFilter`]).
    Tree(TreeFilter),
    /// The merged classifier's groups as a chain ([`MultiFilter`]).
    Groups(Box<MultiFilter>),
}

impl KernelSet {
    /// The tree for `set`, or the groups' chain where the tree cannot be
    /// built or loaded. `opts` are the chain's; the tree takes its
    /// `accept` and `outgoing_only`.
    pub fn build(set: &[(u32, &Compiled)], mode: Mode, opts: Options) -> Result<KernelSet, Error> {
        let tree = crate::tree::Options {
            accept: opts.accept,
            outgoing_only: opts.outgoing_only,
            ..Default::default()
        };
        match TreeFilter::build(set, mode, tree) {
            Ok(t) => Ok(KernelSet::Tree(t)),
            Err(e @ Error::NotPermitted(_)) => Err(e),
            Err(_) => MultiFilter::build(set, mode, opts).map(|m| KernelSet::Groups(Box::new(m))),
        }
    }

    /// Run a packet through the set with `BPF_PROG_TEST_RUN`: nonzero
    /// when some filter matched, and every match counted.
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> Result<u32, Error> {
        match self {
            KernelSet::Tree(t) => t.run(pkt, wirelen),
            KernelSet::Groups(m) => m.run(pkt, wirelen),
        }
    }

    /// Each filter id's count so far (ids without a filter count 0).
    pub fn counts(&self) -> Result<Vec<u64>, Error> {
        match self {
            KernelSet::Tree(t) => t.counts(),
            KernelSet::Groups(m) => m.counts(),
        }
    }

    /// The first program: what a socket attaches, or a test run runs.
    pub fn fd(&self) -> &OwnedFd {
        match self {
            KernelSet::Tree(t) => t.fd(),
            KernelSet::Groups(m) => m.fd(),
        }
    }

    /// Programs in the chain.
    pub fn programs(&self) -> usize {
        match self {
            KernelSet::Tree(t) => t.programs(),
            KernelSet::Groups(m) => m.programs(),
        }
    }

    /// Instructions of all the programs.
    pub fn instructions(&self) -> usize {
        match self {
            KernelSet::Tree(t) => t.instructions().iter().sum(),
            KernelSet::Groups(m) => m.instructions().iter().sum(),
        }
    }

    /// Attach the set (built in [`Mode::Xdp`]) to interface `iface`.
    pub fn attach_xdp(&self, iface: &str) -> Result<XdpLink, Error> {
        match self {
            KernelSet::Tree(t) => t.attach_xdp(iface),
            KernelSet::Groups(m) => m.attach_xdp(iface),
        }
    }

    /// Which of the two it is, for messages: `"tree"` or `"groups"`.
    pub fn kind(&self) -> &'static str {
        match self {
            KernelSet::Tree(_) => "tree",
            KernelSet::Groups(_) => "groups",
        }
    }
}
