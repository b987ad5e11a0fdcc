//! # sluice-cbpf: lowering sluice's intermediate form to classic BPF
//!
//! [`lower`] turns a [`Filter`] into a classic BPF program ([`Insn`]s) that
//! returns `filter.accept` exactly when the IR's reference interpreter
//! ([`sluice_ir::eval`]) accepts, and 0 otherwise — including the IR's aborts
//! (out-of-bounds loads, division by zero), which classic BPF also turns into
//! "return 0".
//!
//! The lowering builds a control-flow DAG from the predicate by continuation
//! passing (linear in the size of the IR), optionally optimises it (jump
//! threading with known facts, merging of identical nodes, reuse of the
//! accumulator; see [`Options`]), and lays it out with `ja` trampolines where
//! a conditional jump would exceed 255 instructions.
//!
//! ```
//! use sluice_ir::{Filter, Pred, Val, Size};
//! // ether[12:2] == 0x800
//! let f = Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 262144);
//! let prog = sluice_cbpf::lower(&f).unwrap();
//! assert_eq!(prog.len(), 4); // ldh [12]; jeq #0x800; ret #262144; ret #0
//! let mut pkt = [0u8; 60];
//! pkt[12] = 0x08;
//! assert_eq!(sluice_bpf::run(&prog, &pkt, 60), 262144);
//! assert_eq!(sluice_bpf::run(&prog, &pkt[..13], 60), 0);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod dag;
mod emit;
mod keeps;
mod opt;
mod refuse;

pub use refuse::Refusal;

use std::fmt;

pub use sluice_bpf::Insn;
use sluice_ir::Filter;

/// Number of scratch memory words of classic BPF (`M[0]` .. `M[15]`).
///
/// ```
/// assert_eq!(sluice_cbpf::SCRATCH_WORDS, 16);
/// ```
pub const SCRATCH_WORDS: u32 = 16;

/// The most instructions a lowered program may have: 16 Mi (128 MiB of
/// instructions; a 1,000,000-term `host a or host b or …` takes about
/// 5.4 Mi). Past it lowering stops with [`LowerError::TooLarge`].
///
/// ```
/// assert_eq!(sluice_cbpf::MAX_INSNS, 1 << 24);
/// ```
pub const MAX_INSNS: usize = 1 << 24;

/// Why a filter could not be lowered.
///
/// ```
/// use sluice_cbpf::LowerError;
/// assert_eq!(LowerError::RejectsAll.to_string(), "expression rejects all packets");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LowerError {
    /// A value needs more than [`SCRATCH_WORDS`] scratch words.
    TooComplex,
    /// The program would have more than [`MAX_INSNS`] instructions (the
    /// bound on every lowering's size and memory).
    TooLarge,
    /// The filter rejects every packet as libpcap's optimiser finds it
    /// (libpcap's "expression rejects all packets"; sluice's optimiser
    /// finds more, and then lowers them to `ret #0` without refusing:
    /// see the `refuse` module). Lowering with `Options { optimize:
    /// false }` still gives a (rejecting) program.
    RejectsAll,
    /// libpcap's optimiser refuses arithmetic in the filter (a division by
    /// a value that folds to 0, say): from [`libpcap_refusal`] only.
    Refused(Refusal),
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::TooComplex => f.write_str("expression too complex"),
            LowerError::TooLarge => write!(
                f,
                "expression too large: its program would have more than {MAX_INSNS} instructions"
            ),
            LowerError::RejectsAll => f.write_str("expression rejects all packets"),
            LowerError::Refused(r) => write!(f, "{r}"),
        }
    }
}

impl std::error::Error for LowerError {}

/// How to lower.
///
/// ```
/// let o = sluice_cbpf::Options::default();
/// assert!(o.optimize);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// Run the optimiser (like tcpdump without `-O`). Without it, every test
    /// of the IR is emitted as written.
    pub optimize: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options { optimize: true }
    }
}

/// Lower a filter to an optimised classic BPF program.
///
/// Same as [`lower_with`] with [`Options::default()`].
///
/// ```
/// use sluice_ir::{Filter, Pred};
/// let prog = sluice_cbpf::lower(&Filter::new(Pred::True, 7)).unwrap();
/// assert_eq!(sluice_bpf::run(&prog, &[], 0), 7);
/// ```
pub fn lower(filter: &Filter) -> Result<Vec<Insn>, LowerError> {
    lower_with(filter, Options::default())
}

/// What libpcap's optimiser does with `filter`'s program: `Ok` if it
/// keeps it, [`LowerError::Refused`] for arithmetic it cannot do,
/// [`LowerError::RejectsAll`] if it reduces it to `ret #0`. [`lower_with`]
/// refuses the latter when optimising (for every language); a pcap front
/// end asks for both, on the predicate as its expression wrote it.
///
/// ```
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let ip = Pred::eq(Val::load_abs(12, Size::Half), 0x800);
/// let ip6 = Pred::eq(Val::load_abs(12, Size::Half), 0x86dd);
/// let never = Filter::new(Pred::and(vec![ip, ip6]), 1);
/// assert_eq!(sluice_cbpf::libpcap_refusal(&never), Err(sluice_cbpf::LowerError::RejectsAll));
/// ```
pub fn libpcap_refusal(filter: &Filter) -> Result<(), LowerError> {
    refuse::check(filter, true)
}

/// Lower a filter to a classic BPF program with the given options.
///
/// The program returns `filter.accept` when the filter accepts and 0 when it
/// rejects or aborts. It contains backward jumps only for `protochain`
/// (which the Linux kernel refuses, like libpcap's).
///
/// ```
/// use sluice_ir::{Filter, Pred, Val, Size};
/// use sluice_cbpf::{lower_with, Options, LowerError};
/// let ip = Pred::eq(Val::load_abs(12, Size::Half), 0x800);
/// let ip6 = Pred::eq(Val::load_abs(12, Size::Half), 0x86dd);
/// let never = Filter::new(Pred::and(vec![ip, ip6]), 1);
/// assert_eq!(lower_with(&never, Options::default()), Err(LowerError::RejectsAll));
/// let prog = lower_with(&never, Options { optimize: false }).unwrap();
/// assert_eq!(sluice_bpf::run(&prog, &[0u8; 60], 60), 0);
/// ```
pub fn lower_with(filter: &Filter, opts: Options) -> Result<Vec<Insn>, LowerError> {
    if opts.optimize {
        refuse::check(filter, false)?;
    }
    let mut dag = dag::Dag::build(filter);
    if opts.optimize {
        opt::optimize(&mut dag);
    }
    emit::emit(&dag, opts.optimize)
}

#[cfg(test)]
mod tests;
