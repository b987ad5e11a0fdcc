//! A filter prepared for insertion into [`Merged`](super::Merged): its
//! accepting paths, or, for a filter with too many to merge, the classic
//! BPF program it runs whole as.
//!
//! The rule: what can be done for a filter alone (simplifying, splitting
//! into paths, lowering to BPF) is done here, outside any lock, so that an
//! insert only places the result.

use crate::path::{paths, Path};
use sluice_bpf::Insn;
use sluice_ir::{Filter, Pred};
use std::sync::Arc;

/// A filter prepared for insertion (compiled outside any lock).
///
/// ```
/// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// assert!(c.paths().is_some());
/// ```
#[derive(Clone, Debug)]
pub struct Compiled {
    filter: Filter,
    pub(super) paths: Option<Vec<Path>>,
    /// For a filter of several paths: the same with the tests the other
    /// paths make needless dropped ([`crate::absorb`]), as the decision
    /// tree takes them.
    absorbed: Option<Vec<Path>>,
    pub(super) program: Arc<[Insn]>,
}

/// The paths with needless tests dropped, when there are several.
fn absorbed(paths: &Option<Vec<Path>>) -> Option<Vec<Path>> {
    match paths {
        Some(p) if p.len() > 1 => Some(crate::absorb::absorb(p.clone())),
        _ => None,
    }
}

impl Compiled {
    /// Prepare an IR filter: its paths, or, when it has too many to merge, a
    /// BPF program for running it whole.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred};
    /// let c = sluice_classifier::merged::Compiled::new(Filter::new(Pred::False, 1));
    /// assert_eq!(c.paths().unwrap().len(), 0);
    /// ```
    pub fn new(filter: Filter) -> Compiled {
        let pred = sluice_ir::simplify::fast_disjunctions(filter.pred.clone());
        let paths = paths(&pred, filter.accept).ok();
        // Only a filter that runs whole needs its BPF program.
        let program: Arc<[Insn]> = if paths.is_some() {
            Arc::from([])
        } else {
            let lowered = sluice_cbpf::lower_with(
                &Filter::new(pred, filter.accept),
                sluice_cbpf::Options { optimize: true },
            );
            match lowered {
                Ok(p) => p.into(),
                // Rejects everything: a program that says so.
                Err(_) => vec![Insn::stmt(
                    sluice_bpf::op::BPF_RET | sluice_bpf::op::BPF_K,
                    0,
                )]
                .into(),
            }
        };
        Compiled {
            filter,
            absorbed: absorbed(&paths),
            paths,
            program,
        }
    }

    /// A filter given as a classic BPF program: lifted into the IR and
    /// merged like any other when its control flow allows
    /// ([`sluice_bpf::lift`]), otherwise run whole.
    ///
    /// ```
    /// use sluice_bpf::{Insn, op};
    /// let c = sluice_classifier::merged::Compiled::from_bpf(&[Insn::stmt(op::BPF_RET | op::BPF_K, 1)]);
    /// assert!(c.paths().is_some());
    /// let ret_a = [Insn::stmt(op::BPF_RET | op::BPF_A, 0)];
    /// assert!(sluice_classifier::merged::Compiled::from_bpf(&ret_a).paths().is_none());
    /// ```
    pub fn from_bpf(prog: &[Insn]) -> Compiled {
        match sluice_bpf::lift(prog) {
            Ok(filter) => {
                let pred = sluice_ir::simplify::fast_disjunctions(filter.pred.clone());
                let paths = paths(&pred, filter.accept).ok();
                Compiled {
                    absorbed: absorbed(&paths),
                    paths,
                    filter,
                    program: prog.into(),
                }
            }
            Err(_) => Compiled {
                filter: Filter::new(Pred::False, 0),
                paths: None,
                absorbed: None,
                program: prog.into(),
            },
        }
    }

    /// The accepting paths, when the filter can be merged.
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// assert_eq!(c.paths().unwrap().len(), 1);
    /// ```
    pub fn paths(&self) -> Option<&[Path]> {
        self.paths.as_deref()
    }

    /// The accepting paths with the tests that the filter's other paths
    /// make needless dropped (the same paths when there is one): what the
    /// decision tree inserts. Computed here, once, outside any lock.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let b = Val::load_abs(0, Size::Byte);
    /// // `b == 1 or b != 1`: the second path needs no test once the first fails.
    /// let f = Filter::new(Pred::or(vec![Pred::eq(b.clone(), 1), Pred::not(Pred::eq(b, 1))]), 1);
    /// let c = sluice_classifier::merged::Compiled::new(f);
    /// assert!(c.absorbed_paths().is_some());
    /// ```
    pub fn absorbed_paths(&self) -> Option<&[Path]> {
        self.absorbed.as_deref().or(self.paths.as_deref())
    }

    /// The classic BPF program a filter that cannot be merged runs as
    /// (empty for one that merges).
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 3));
    /// assert!(c.program().is_empty());
    /// ```
    pub fn program(&self) -> Arc<[Insn]> {
        self.program.clone()
    }

    /// The filter this was made from (for expressions).
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 3));
    /// assert_eq!(c.filter().accept, 3);
    /// ```
    pub fn filter(&self) -> &Filter {
        &self.filter
    }
}
