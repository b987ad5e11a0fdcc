//! CSPF (Mogul, Rashid, Accetta 1987): the stack-machine filter language of
//! the CMU/Stanford packet filter, with the later CMU (Mach) extensions; its
//! assembler, verifier, interpreter and lowering into sluice's IR.
//!
//! # The machine
//!
//! A filter is a sequence of 16-bit instruction words. Each word holds a
//! *stack action* in its low 10 bits and a *binary operation* in its high 6
//! bits. The action produces an argument (a literal from the next word, a
//! constant, a word of the packet, a word of the stack), and the operation
//! combines it with the top of the stack:
//!
//! - `nop` pushes the argument; `nopush | nop` does nothing;
//! - `eq`, `neq`, `lt`, `le`, `gt`, `ge` replace the top `T` by `T op arg`
//!   (1 or 0), `and`, `or`, `xor`, `lsh`, `rsh`, `add`, `sub` by the
//!   arithmetic result (16 bits, wrapping; shifts by 16 or more give 0);
//! - the short-circuit operations pop the top and compare it with the
//!   argument: `cor` returns *accept* if they are equal, `cand` returns
//!   *reject* if they differ, `cnor` returns *reject* if they are equal,
//!   `cnand` returns *accept* if they differ; otherwise the program goes on
//!   without pushing anything.
//!
//! The stack starts with one word, 1 (true), so a program that only makes
//! short-circuit tests accepts when it runs to its end (MPF's Appendix C
//! relies on this). At the end the packet is accepted if the top of the
//! stack is non-zero. Words are read from the packet in network byte order
//! at word offsets from the start of the frame (word `n` is bytes `2n`,
//! `2n+1`); reading a word past the captured bytes rejects the packet.
//!
//! ```
//! use sluice_cspf::assemble;
//! // Ethernet type IPv4, TCP.
//! let p = assemble("pushword P[6]  pushlit | cand #0x0800\n\
//!                   pushword P[11] push00ff | and  pushlit | cand #6").unwrap();
//! let mut pkt = [0u8; 34];
//! pkt[12] = 0x08;
//! pkt[23] = 6;
//! assert!(p.run(&pkt));
//! assert!(!p.run(&pkt[..20])); // word 11 is past the end: reject
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod asm;
mod lower;
mod ports;
#[cfg(test)]
mod tests;

pub use asm::{assemble, assemble_inline, disassemble, AsmError};
pub use lower::lower;
pub use ports::{PortId, PortSet};

use thiserror::Error;

/// Bits of an instruction word that hold the stack action.
pub const ACTION_BITS: u32 = 10;
/// The base of the `pushword` actions: `PUSHWORD + n` pushes packet word `n`.
pub const PUSHWORD: u16 = 16;
/// The base of the (Mach) `pushhdr` actions, which sluice does not support.
pub const PUSHHDR: u16 = 960;
/// The base of the `pushstk` actions: `PUSHSTK + n` pushes stack word `n`
/// (0 is the top).
pub const PUSHSTK: u16 = 992;
/// The highest packet word `pushword` can address.
pub const MAX_PUSHWORD: u16 = PUSHHDR - PUSHWORD - 1;
/// The highest stack word `pushstk` can address.
pub const MAX_PUSHSTK: u16 = 1023 - PUSHSTK;

/// A stack action: what the instruction hands to its operation.
///
/// ```
/// use sluice_cspf::Action;
/// assert_eq!(Action::PushWord(6).code(), 22);
/// assert_eq!(Action::from_code(22), Some(Action::PushWord(6)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Pop the top of the stack and use it as the argument.
    NoPush,
    /// The literal in the next instruction word.
    PushLit(u16),
    /// 0.
    PushZero,
    /// 1.
    PushOne,
    /// 0xffff.
    PushFfff,
    /// 0xff00.
    PushFf00,
    /// 0x00ff.
    Push00ff,
    /// Pop a word index and use packet word at that index (CMU extension).
    PushInd,
    /// Packet word `n` (`n` ≤ [`MAX_PUSHWORD`]).
    PushWord(u16),
    /// Stack word `n`, 0 being the top (CMU extension; `pushstk 0` duplicates the top).
    PushStk(u16),
}

impl Action {
    /// The action's 10-bit code (for `PushLit`, without its literal word).
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Action::PushLit(5).code(), 1);
    /// ```
    pub fn code(self) -> u16 {
        match self {
            Action::NoPush => 0,
            Action::PushLit(_) => 1,
            Action::PushZero => 2,
            Action::PushOne => 3,
            Action::PushFfff => 4,
            Action::PushFf00 => 5,
            Action::Push00ff => 6,
            Action::PushInd => 14,
            Action::PushWord(n) => PUSHWORD + n,
            Action::PushStk(n) => PUSHSTK + n,
        }
    }

    /// The action of a 10-bit code (`PushLit` with literal 0), if it is one
    /// sluice knows.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Action::from_code(7), None);
    /// ```
    pub fn from_code(code: u16) -> Option<Action> {
        Some(match code {
            0 => Action::NoPush,
            1 => Action::PushLit(0),
            2 => Action::PushZero,
            3 => Action::PushOne,
            4 => Action::PushFfff,
            5 => Action::PushFf00,
            6 => Action::Push00ff,
            14 => Action::PushInd,
            c if (PUSHWORD..PUSHHDR).contains(&c) => Action::PushWord(c - PUSHWORD),
            c if (PUSHSTK..=1023).contains(&c) => Action::PushStk(c - PUSHSTK),
            _ => return None,
        })
    }

    /// The constant this action pushes, if it pushes one.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Action::PushFf00.constant(), Some(0xff00));
    /// ```
    pub fn constant(self) -> Option<u16> {
        match self {
            Action::PushLit(k) => Some(k),
            Action::PushZero => Some(0),
            Action::PushOne => Some(1),
            Action::PushFfff => Some(0xffff),
            Action::PushFf00 => Some(0xff00),
            Action::Push00ff => Some(0x00ff),
            _ => None,
        }
    }
}

/// A binary operation.
///
/// ```
/// use sluice_cspf::Op;
/// assert_eq!(Op::Cand.code(), 10);
/// assert_eq!(Op::from_code(10), Some(Op::Cand));
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Nop,
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    Xor,
    Cor,
    Cand,
    Cnor,
    Cnand,
    Neq,
    Lsh,
    Rsh,
    Add,
    Sub,
}

const OPS: [Op; 18] = [
    Op::Nop,
    Op::Eq,
    Op::Lt,
    Op::Le,
    Op::Gt,
    Op::Ge,
    Op::And,
    Op::Or,
    Op::Xor,
    Op::Cor,
    Op::Cand,
    Op::Cnor,
    Op::Cnand,
    Op::Neq,
    Op::Lsh,
    Op::Rsh,
    Op::Add,
    Op::Sub,
];

impl Op {
    /// The operation's 6-bit code.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Op::Sub.code(), 17);
    /// ```
    pub fn code(self) -> u16 {
        OPS.iter().position(|&o| o == self).unwrap_or(0) as u16
    }

    /// The operation of a 6-bit code.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Op::from_code(18), None);
    /// ```
    pub fn from_code(code: u16) -> Option<Op> {
        OPS.get(code as usize).copied()
    }

    /// The mnemonic.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Op::Cnand.name(), "cnand");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Op::Nop => "nop",
            Op::Eq => "eq",
            Op::Lt => "lt",
            Op::Le => "le",
            Op::Gt => "gt",
            Op::Ge => "ge",
            Op::And => "and",
            Op::Or => "or",
            Op::Xor => "xor",
            Op::Cor => "cor",
            Op::Cand => "cand",
            Op::Cnor => "cnor",
            Op::Cnand => "cnand",
            Op::Neq => "neq",
            Op::Lsh => "lsh",
            Op::Rsh => "rsh",
            Op::Add => "add",
            Op::Sub => "sub",
        }
    }

    /// The operation of a mnemonic (lower case).
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Op::from_name("cor"), Some(sluice_cspf::Op::Cor));
    /// ```
    pub fn from_name(name: &str) -> Option<Op> {
        OPS.iter().copied().find(|o| o.name() == name)
    }

    /// True for the short-circuit operations (`cor`, `cand`, `cnor`, `cnand`).
    ///
    /// ```
    /// assert!(sluice_cspf::Op::Cnor.is_short_circuit());
    /// ```
    pub fn is_short_circuit(self) -> bool {
        matches!(self, Op::Cor | Op::Cand | Op::Cnor | Op::Cnand)
    }

    /// For a short-circuit operation: whether it returns when the two words
    /// are equal (or when they differ), and the verdict it then returns.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::Op::Cand.exit(), Some((false, false)));
    /// ```
    pub fn exit(self) -> Option<(bool, bool)> {
        match self {
            Op::Cor => Some((true, true)),
            Op::Cand => Some((false, false)),
            Op::Cnor => Some((true, false)),
            Op::Cnand => Some((false, true)),
            _ => None,
        }
    }

    /// Apply a value operation (not `nop`, not a short-circuit) to the top
    /// of the stack and the argument, in 16 bits.
    ///
    /// ```
    /// use sluice_cspf::Op;
    /// assert_eq!(Op::Lt.apply(1, 2), 1);
    /// assert_eq!(Op::Lsh.apply(0x8001, 1), 2);
    /// assert_eq!(Op::Rsh.apply(0xffff, 16), 0);
    /// ```
    pub fn apply(self, top: u16, arg: u16) -> u16 {
        match self {
            Op::Eq => (top == arg) as u16,
            Op::Neq => (top != arg) as u16,
            Op::Lt => (top < arg) as u16,
            Op::Le => (top <= arg) as u16,
            Op::Gt => (top > arg) as u16,
            Op::Ge => (top >= arg) as u16,
            Op::And => top & arg,
            Op::Or => top | arg,
            Op::Xor => top ^ arg,
            Op::Lsh => top.checked_shl(arg as u32).unwrap_or(0),
            Op::Rsh => top.checked_shr(arg as u32).unwrap_or(0),
            Op::Add => top.wrapping_add(arg),
            Op::Sub => top.wrapping_sub(arg),
            Op::Nop | Op::Cor | Op::Cand | Op::Cnor | Op::Cnand => arg,
        }
    }
}

/// One instruction: a stack action and a binary operation.
///
/// ```
/// use sluice_cspf::{Insn, Action, Op};
/// let i = Insn::new(Action::PushLit(0x800), Op::Cand);
/// assert_eq!(i.words(), vec![(10 << 10) | 1, 0x800]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Insn {
    /// The stack action.
    pub action: Action,
    /// The binary operation.
    pub op: Op,
}

impl Insn {
    /// An instruction.
    ///
    /// ```
    /// let i = sluice_cspf::Insn::new(sluice_cspf::Action::PushOne, sluice_cspf::Op::Nop);
    /// assert_eq!(i.words().len(), 1);
    /// ```
    pub fn new(action: Action, op: Op) -> Insn {
        Insn { action, op }
    }

    /// The instruction's words: one, or two for `pushlit`.
    ///
    /// ```
    /// let i = sluice_cspf::Insn::new(sluice_cspf::Action::PushWord(6), sluice_cspf::Op::Nop);
    /// assert_eq!(i.words(), vec![22]);
    /// ```
    pub fn words(&self) -> Vec<u16> {
        let w = (self.op.code() << ACTION_BITS) | self.action.code();
        match self.action {
            Action::PushLit(k) => vec![w, k],
            _ => vec![w],
        }
    }
}

/// Why instruction words are not a program sluice can run.
///
/// ```
/// let e = sluice_cspf::decode(&[7]).unwrap_err();
/// assert!(e.to_string().contains("word 0"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// An action code with no meaning.
    #[error("word {word}: unknown stack action {code}")]
    Action {
        /// Index of the instruction word.
        word: usize,
        /// The action code.
        code: u16,
    },
    /// Mach's header pushes: sluice hands filters the whole frame, header
    /// included, so packet words start at the link header.
    #[error("word {word}: header pushes (pushhdr, pushhdrind) are not supported: the packet's words start at the link header, use pushword/pushind")]
    Header {
        /// Index of the instruction word.
        word: usize,
    },
    /// An operation code with no meaning.
    #[error("word {word}: unknown operation {code}")]
    Op {
        /// Index of the instruction word.
        word: usize,
        /// The operation code.
        code: u16,
    },
    /// `pushlit` as the last word.
    #[error("word {word}: pushlit without its literal word")]
    MissingLiteral {
        /// Index of the instruction word.
        word: usize,
    },
}

/// Decode instruction words.
///
/// ```
/// use sluice_cspf::{decode, Insn, Action, Op};
/// assert_eq!(decode(&[22, (10 << 10) | 1, 0x800]).unwrap(),
///            vec![Insn::new(Action::PushWord(6), Op::Nop), Insn::new(Action::PushLit(0x800), Op::Cand)]);
/// ```
pub fn decode(words: &[u16]) -> Result<Vec<Insn>, DecodeError> {
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        let code = w & 0x3ff;
        let opc = w >> ACTION_BITS;
        let op = Op::from_code(opc).ok_or(DecodeError::Op { word: i, code: opc })?;
        let action = match Action::from_code(code) {
            Some(Action::PushLit(_)) => {
                let k = *words
                    .get(i + 1)
                    .ok_or(DecodeError::MissingLiteral { word: i })?;
                i += 1;
                Action::PushLit(k)
            }
            Some(a) => a,
            None if code == 15 || (PUSHHDR..PUSHSTK).contains(&code) => {
                return Err(DecodeError::Header { word: i })
            }
            None => return Err(DecodeError::Action { word: i, code }),
        };
        out.push(Insn { action, op });
        i += 1;
    }
    Ok(out)
}

/// Limits the verifier enforces.
///
/// ```
/// let l = sluice_cspf::Limits::default();
/// assert_eq!((l.max_words, l.max_stack), (255, 32));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Most instruction words (literals included).
    pub max_words: usize,
    /// Deepest stack, the initial word included (at most 256).
    pub max_stack: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_words: 255,
            max_stack: 32,
        }
    }
}

/// Why a program fails verification. Instruction numbers count
/// instructions (a `pushlit` and its literal are one), from 0.
///
/// ```
/// use sluice_cspf::{verify, Insn, Action, Op, Limits, VerifyError};
/// let e = verify(&[Insn::new(Action::NoPush, Op::And)], Limits::default()).unwrap_err();
/// assert!(matches!(e, VerifyError::Underflow { insn: 0 }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum VerifyError {
    /// More words than the limit.
    #[error("program has {words} words, more than the limit of {max}")]
    TooLong {
        /// The program's words.
        words: usize,
        /// The limit.
        max: usize,
    },
    /// An instruction needs more words than the stack holds.
    #[error("instruction {insn}: stack underflow")]
    Underflow {
        /// The instruction.
        insn: usize,
    },
    /// An instruction pushes beyond the stack's limit.
    #[error("instruction {insn}: stack overflow (more than {max} words)")]
    Overflow {
        /// The instruction.
        insn: usize,
        /// The limit.
        max: usize,
    },
    /// Nothing is left on the stack to decide with at the end.
    #[error("the stack is empty at the end of the program")]
    EmptyAtEnd,
}

/// Check a program statically. There are no jumps, so the stack depth at
/// every instruction is known: underflow and overflow are found here, and
/// only packet reads can fail at run time (they reject). Returns the
/// deepest stack.
///
/// ```
/// use sluice_cspf::{verify, Insn, Action, Op, Limits};
/// let p = [Insn::new(Action::PushWord(6), Op::Nop), Insn::new(Action::PushLit(0x800), Op::Eq)];
/// assert_eq!(verify(&p, Limits::default()), Ok(2));
/// ```
pub fn verify(insns: &[Insn], limits: Limits) -> Result<usize, VerifyError> {
    let words: usize = insns.iter().map(|i| i.words().len()).sum();
    if words > limits.max_words {
        return Err(VerifyError::TooLong {
            words,
            max: limits.max_words,
        });
    }
    let max = limits.max_stack.min(256);
    let mut depth = 1usize;
    let mut deepest = 1;
    for (n, i) in insns.iter().enumerate() {
        let under = || VerifyError::Underflow { insn: n };
        match i.action {
            Action::NoPush | Action::PushInd => depth = depth.checked_sub(1).ok_or_else(under)?,
            Action::PushStk(k) if k as usize >= depth => return Err(under()),
            _ => {}
        }
        match i.op {
            Op::Nop => {
                depth += 1;
                if depth > max {
                    return Err(VerifyError::Overflow { insn: n, max });
                }
            }
            op if op.is_short_circuit() => depth = depth.checked_sub(1).ok_or_else(under)?,
            _ if depth == 0 => return Err(under()),
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    if depth == 0 {
        return Err(VerifyError::EmptyAtEnd);
    }
    Ok(deepest)
}

/// Any reason a program cannot be built.
///
/// ```
/// let e = sluice_cspf::Program::from_words(&[]).map(|_| ());
/// assert!(e.is_ok()); // the empty program accepts everything
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum Error {
    /// The text does not assemble.
    #[error(transparent)]
    Asm(#[from] AsmError),
    /// The words do not decode.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The program fails verification.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// A verified CSPF filter, with the priority and copy flag it was
/// assembled with (`.priority`, `.copy`; they matter in a [`PortSet`]).
///
/// ```
/// let p = sluice_cspf::Program::from_words(&[22, (10 << 10) | 1, 0x0800]).unwrap();
/// let mut pkt = [0u8; 14];
/// pkt[12] = 8;
/// assert!(p.run(&pkt));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    insns: Vec<Insn>,
    /// The filter's priority (higher is tried first).
    pub priority: u8,
    /// Whether packets this filter accepts go on to lower priorities too.
    pub copy: bool,
}

impl Program {
    /// Decode and verify instruction words (default limits).
    ///
    /// ```
    /// assert!(sluice_cspf::Program::from_words(&[(1 << 10)]).is_err()); // eq on one word: underflow
    /// ```
    pub fn from_words(words: &[u16]) -> Result<Program, Error> {
        Program::from_insns(decode(words)?)
    }

    /// Verify instructions (default limits).
    ///
    /// ```
    /// use sluice_cspf::{Program, Insn, Action, Op};
    /// assert!(Program::from_insns(vec![Insn::new(Action::PushZero, Op::Nop)]).is_ok());
    /// ```
    pub fn from_insns(insns: Vec<Insn>) -> Result<Program, Error> {
        Program::with_limits(insns, Limits::default())
    }

    /// Verify instructions against given limits.
    ///
    /// ```
    /// use sluice_cspf::{Program, Insn, Action, Op, Limits};
    /// let l = Limits { max_words: 1, max_stack: 32 };
    /// assert!(Program::with_limits(vec![Insn::new(Action::PushLit(1), Op::Nop)], l).is_err());
    /// ```
    pub fn with_limits(insns: Vec<Insn>, limits: Limits) -> Result<Program, Error> {
        verify(&insns, limits)?;
        Ok(Program {
            insns,
            priority: 0,
            copy: false,
        })
    }

    /// The instructions.
    ///
    /// ```
    /// assert!(sluice_cspf::Program::from_words(&[]).unwrap().insns().is_empty());
    /// ```
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The instruction words.
    ///
    /// ```
    /// let p = sluice_cspf::assemble("pushword P[0] pushlit | cand #5").unwrap();
    /// assert_eq!(p.words(), vec![16, (10 << 10) | 1, 5]);
    /// ```
    pub fn words(&self) -> Vec<u16> {
        self.insns.iter().flat_map(|i| i.words()).collect()
    }

    /// Run the reference interpreter: true if the packet is accepted.
    ///
    /// ```
    /// let p = sluice_cspf::assemble("pushword P[0] pushlit | eq #0x0102").unwrap();
    /// assert!(p.run(&[1, 2]));
    /// assert!(!p.run(&[1])); // word 0 is not all there
    /// ```
    pub fn run(&self, pkt: &[u8]) -> bool {
        run(&self.insns, pkt)
    }

    /// The filter in sluice's IR, returning `accept` when it accepts; it
    /// gives the interpreter's verdict on every packet, truncated ones
    /// included.
    ///
    /// ```
    /// let p = sluice_cspf::assemble("pushword P[6] pushlit | cand #0x0800").unwrap();
    /// let f = p.to_ir(1);
    /// let mut pkt = [0u8; 14];
    /// pkt[12] = 8;
    /// assert_eq!(f.run(&pkt, 14), 1);
    /// ```
    pub fn to_ir(&self, accept: u32) -> sluice_ir::Filter {
        sluice_ir::Filter::new(lower(&self.insns), accept)
    }
}

/// Packet word `i` (network order), if all of it was captured.
#[inline]
fn word(pkt: &[u8], i: u16) -> Option<u16> {
    let at = 2 * i as usize;
    Some(u16::from_be_bytes([*pkt.get(at)?, *pkt.get(at + 1)?]))
}

/// The interpreter: true if the program accepts the packet. Reads past the
/// captured bytes reject. Unverified programs never panic: a stack
/// underflow or overflow rejects too.
///
/// ```
/// use sluice_cspf::{run, Insn, Action, Op};
/// let prog = [Insn::new(Action::PushWord(0), Op::Nop), Insn::new(Action::PushZero, Op::Neq)];
/// assert!(run(&prog, &[0, 1]));
/// assert!(!run(&prog, &[0, 0]));
/// ```
pub fn run(insns: &[Insn], pkt: &[u8]) -> bool {
    let mut stack = [0u16; 256];
    stack[0] = 1;
    let mut sp = 1usize; // number of words on the stack
    for i in insns {
        let arg = match i.action {
            Action::NoPush => {
                if sp == 0 {
                    return false;
                }
                sp -= 1;
                stack[sp]
            }
            Action::PushInd => {
                if sp == 0 {
                    return false;
                }
                sp -= 1;
                match word(pkt, stack[sp]) {
                    Some(w) => w,
                    None => return false,
                }
            }
            Action::PushWord(n) => match word(pkt, n) {
                Some(w) => w,
                None => return false,
            },
            Action::PushStk(n) => match sp.checked_sub(1 + n as usize) {
                Some(at) => stack[at],
                None => return false,
            },
            a => a.constant().unwrap_or(0),
        };
        match i.op {
            Op::Nop => {
                if sp >= stack.len() {
                    return false;
                }
                stack[sp] = arg;
                sp += 1;
            }
            op => {
                if sp == 0 {
                    return false;
                }
                if let Some((on_equal, verdict)) = op.exit() {
                    sp -= 1;
                    if (stack[sp] == arg) == on_equal {
                        return verdict;
                    }
                } else {
                    stack[sp - 1] = op.apply(stack[sp - 1], arg);
                }
            }
        }
    }
    sp > 0 && stack[sp - 1] != 0
}
