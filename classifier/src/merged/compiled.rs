//! A filter prepared for insertion into [`Merged`](super::Merged): its
//! accepting paths, or, for a filter with too many to merge, how it runs
//! whole ([`Whole`]): the classic BPF program its front end made, or its
//! intermediate form under the reference interpreter.
//!
//! The rule: what can be done for a filter alone (simplifying, splitting
//! into paths) is done here, outside any lock, so that an insert only
//! places the result; the classifier never compiles a filter to another
//! form itself (back ends do: a [`Program`]'s BPF comes in with it).
//!
//! [`Program`]: https://docs.rs/sluice-filter

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
    pub(super) whole: Whole,
}

/// How a filter that cannot be merged runs whole.
///
/// ```
/// use sluice_classifier::merged::Whole;
/// let f = Whole::Ir(std::sync::Arc::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 7)));
/// assert_eq!(f.run(&[], 0), 7);
/// assert!(f.program().is_empty());
/// ```
#[derive(Clone, Debug)]
pub enum Whole {
    /// Its classic BPF program, run by the BPF interpreter.
    Bpf(Arc<[Insn]>),
    /// Its intermediate form, run by the reference interpreter (a filter
    /// that came without a program).
    Ir(Arc<Filter>),
}

impl Whole {
    /// Run it on one packet: the accept value, or 0.
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match self {
            Whole::Bpf(p) => sluice_bpf::run(p, pkt, wirelen),
            Whole::Ir(f) => f.run(pkt, wirelen),
        }
    }

    /// Its BPF program (empty for one that runs its intermediate form).
    pub fn program(&self) -> &[Insn] {
        match self {
            Whole::Bpf(p) => p,
            Whole::Ir(_) => &[],
        }
    }
}

/// The paths with needless tests dropped, when there are several.
fn absorbed(paths: &Option<Vec<Path>>) -> Option<Vec<Path>> {
    match paths {
        Some(p) if p.len() > 1 => Some(crate::absorb::absorb(p.clone())),
        _ => None,
    }
}

impl Compiled {
    /// Prepare an IR filter: its paths, or, when it has too many to merge,
    /// the filter itself to run whole by the reference interpreter (a
    /// front end that has the filter's BPF program gives it with
    /// [`Compiled::with_program`], for speed).
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred};
    /// let c = sluice_classifier::merged::Compiled::new(Filter::new(Pred::False, 1));
    /// assert_eq!(c.paths().unwrap().len(), 0);
    /// ```
    pub fn new(filter: Filter) -> Compiled {
        let whole = Whole::Ir(Arc::new(filter.clone()));
        Compiled::prepare(filter, whole)
    }

    /// Prepare an IR filter with the classic BPF program its front end
    /// compiled from it: what the filter runs as when it cannot be merged.
    ///
    /// ```
    /// use sluice_bpf::{Insn, op};
    /// use sluice_ir::{Filter, Pred};
    /// let ret = [Insn::stmt(op::BPF_RET | op::BPF_K, 1)];
    /// let c = sluice_classifier::merged::Compiled::with_program(Filter::new(Pred::True, 1), &ret);
    /// assert_eq!(c.paths().unwrap().len(), 1);
    /// ```
    pub fn with_program(filter: Filter, program: &[Insn]) -> Compiled {
        Compiled::prepare(filter, Whole::Bpf(program.into()))
    }

    fn prepare(filter: Filter, whole: Whole) -> Compiled {
        let pred = sluice_ir::simplify::fast_disjunctions(filter.pred.clone());
        let paths = paths(&pred, filter.accept).ok();
        Compiled {
            filter,
            absorbed: absorbed(&paths),
            paths,
            whole,
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
                    whole: Whole::Bpf(prog.into()),
                }
            }
            Err(_) => Compiled {
                filter: Filter::new(Pred::False, 0),
                paths: None,
                absorbed: None,
                whole: Whole::Bpf(prog.into()),
            },
        }
    }

    /// A filter from the parts [`Compiled::with_program`] (or
    /// [`Compiled::from_bpf`]) made, as `codec.rs` reads them back.
    pub(super) fn from_parts(
        filter: Filter,
        paths: Option<Vec<Path>>,
        absorbed: Option<Vec<Path>>,
        whole: Whole,
    ) -> Compiled {
        Compiled {
            filter,
            paths,
            absorbed,
            whole,
        }
    }

    /// The absorbed paths as they were computed (`None` where they are
    /// the paths themselves), for `codec.rs`.
    pub(super) fn absorbed_raw(&self) -> Option<&[Path]> {
        self.absorbed.as_deref()
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

    /// How the filter runs when it cannot be merged.
    ///
    /// ```
    /// let c = sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 3));
    /// assert_eq!(c.whole().run(&[], 0), 3);
    /// ```
    pub fn whole(&self) -> &Whole {
        &self.whole
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
