//! The verifier: the Linux kernel's classic BPF checks, plus a userland mode.

use crate::insn::{is_valid_code, op::*, Insn};
use crate::interp::Validated;

/// Why a program was rejected. Instruction indexes start at 0.
///
/// ```
/// use sluice_bpf::{verify, Insn, Limits, VerifyError};
/// let e = verify(&[Insn::stmt(0x34, 0), Insn::stmt(0x06, 0)], &Limits::KERNEL).unwrap_err();
/// assert_eq!(e, VerifyError::DivisionByZero { pc: 0 });
/// assert_eq!(e.to_string(), "instruction 0: division or modulo by constant 0");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The program has no instructions.
    #[error("empty program")]
    Empty,
    /// More instructions than the limit.
    #[error("program has {len} instructions, more than the limit of {max}")]
    TooLong {
        /// Program length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// An opcode that classic BPF does not define.
    #[error("instruction {pc}: unknown opcode {code:#04x}")]
    UnknownOpcode {
        /// Instruction index.
        pc: usize,
        /// The opcode.
        code: u16,
    },
    /// A jump whose target is not an instruction of the program.
    #[error("instruction {pc}: jump target {target} is outside the program ({len} instructions)")]
    JumpOutOfRange {
        /// Instruction index.
        pc: usize,
        /// Absolute target (`pc + 1 + offset`, without wrap-around).
        target: u64,
        /// Program length.
        len: usize,
    },
    /// A `ja` whose offset wraps around to a backward target (only allowed in
    /// userland mode).
    #[error("instruction {pc}: backward jump to {target}")]
    BackwardJump {
        /// Instruction index.
        pc: usize,
        /// Absolute target.
        target: usize,
    },
    /// The last instruction is not `ret`.
    #[error("instruction {pc}: the last instruction is not a return")]
    NoFinalReturn {
        /// Index of the last instruction.
        pc: usize,
    },
    /// `div #0` or `mod #0`.
    #[error("instruction {pc}: division or modulo by constant 0")]
    DivisionByZero {
        /// Instruction index.
        pc: usize,
    },
    /// A constant shift of 32 bits or more (kernel mode only).
    #[error("instruction {pc}: shift by constant {k} (at least 32)")]
    ShiftTooLarge {
        /// Instruction index.
        pc: usize,
        /// The shift amount.
        k: u32,
    },
    /// A scratch memory index of 16 or more.
    #[error("instruction {pc}: scratch memory index M[{k}] out of range 0..16")]
    MemoryIndex {
        /// Instruction index.
        pc: usize,
        /// The index.
        k: u32,
    },
    /// A scratch memory load that some path reaches before any store.
    #[error("instruction {pc}: M[{k}] may be read before it is written")]
    UninitializedMemory {
        /// Instruction index.
        pc: usize,
        /// The index.
        k: u32,
    },
    /// MPF: a match or registration of 0 or more than 16 scratch words.
    #[error("instruction {pc}: MPF instruction covers {n} scratch words (must be 1 to 16)")]
    MpfWordCount {
        /// Instruction index.
        pc: usize,
        /// The word count.
        n: u64,
    },
    /// MPF: a match instruction without its N key words right after it.
    #[error("instruction {pc}: match instruction needs {n} key words after it, found {found}")]
    MpfMissingKeys {
        /// Instruction index.
        pc: usize,
        /// Keys needed.
        n: usize,
        /// Keys present.
        found: usize,
    },
    /// MPF: a key word that does not belong to a match instruction.
    #[error("instruction {pc}: key word outside a match instruction")]
    MpfStrayKey {
        /// Instruction index.
        pc: usize,
    },
    /// MPF: a jump that lands on a key word.
    #[error("instruction {pc}: jump target {target} is a key word")]
    MpfJumpIntoKeys {
        /// Instruction index.
        pc: usize,
        /// The key word's index.
        target: usize,
    },
    /// MPF: a `register_data` that some path reaches without a successful
    /// `jmp_match_imm`.
    #[error("instruction {pc}: register_data is reachable without a successful jmp_match_imm")]
    MpfRegisterWithoutMatch {
        /// Instruction index.
        pc: usize,
    },
}

/// What the verifier accepts.
///
/// ```
/// use sluice_bpf::Limits;
/// assert_eq!(Limits::KERNEL.max_len, 4096);
/// assert!(Limits::USERLAND.max_len > 4096);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Maximum number of instructions.
    pub max_len: usize,
    /// Accept `ja` offsets that wrap around to an earlier instruction, as
    /// libpcap's compiler emits for `protochain` and libpcap's
    /// `bpf_validate` and `bpf_filter` accept. The kernel rejects them.
    pub allow_backward_ja: bool,
    /// Reject `lsh`/`rsh` by a constant >= 32, as Linux does.
    pub reject_large_shifts: bool,
    /// Reject loads of scratch memory that some path reaches before a
    /// store, as Linux does. libpcap's compiler does emit such loads (for
    /// example `geneve` on radiotap), so userland mode does not check
    /// (our engines start with zeroed scratch memory).
    pub check_uninitialized_memory: bool,
}

impl Limits {
    /// The Linux kernel's classic BPF checker (`bpf_check_classic`).
    ///
    /// ```
    /// assert!(!sluice_bpf::Limits::KERNEL.allow_backward_ja);
    /// ```
    pub const KERNEL: Limits = Limits {
        max_len: BPF_MAXINSNS,
        allow_backward_ja: false,
        reject_large_shifts: true,
        check_uninitialized_memory: true,
    };

    /// For programs run in userland by our own engines: any length up to
    /// `u32::MAX` instructions, libpcap's backward `ja`, constant shifts of
    /// any amount (they use the amount modulo 32), and loads of scratch
    /// memory that was not stored (it reads as 0). Everything else is
    /// checked as in the kernel.
    ///
    /// ```
    /// assert!(sluice_bpf::Limits::USERLAND.allow_backward_ja);
    /// ```
    pub const USERLAND: Limits = Limits {
        max_len: u32::MAX as usize,
        allow_backward_ja: true,
        reject_large_shifts: false,
        check_uninitialized_memory: false,
    };
}

/// A verifier with a set of [`Limits`].
///
/// ```
/// use sluice_bpf::{Verifier, Insn};
/// let prog = vec![Insn::stmt(0x06, 0); 5000];
/// assert!(Verifier::kernel().verify(&prog).is_err());
/// assert!(Verifier::userland().verify(&prog).is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verifier {
    /// The limits applied.
    pub limits: Limits,
}

impl Verifier {
    /// The Linux kernel's rules ([`Limits::KERNEL`]).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Verifier::kernel().limits.max_len, 4096);
    /// ```
    pub const fn kernel() -> Verifier {
        Verifier {
            limits: Limits::KERNEL,
        }
    }

    /// Userland rules ([`Limits::USERLAND`]).
    ///
    /// ```
    /// assert!(sluice_bpf::Verifier::userland().limits.allow_backward_ja);
    /// ```
    pub const fn userland() -> Verifier {
        Verifier {
            limits: Limits::USERLAND,
        }
    }

    /// The same rules with another maximum length.
    ///
    /// ```
    /// use sluice_bpf::{Verifier, Insn};
    /// let v = Verifier::kernel().max_len(1);
    /// assert!(v.verify(&[Insn::stmt(0x06, 0); 2]).is_err());
    /// ```
    pub const fn max_len(mut self, max_len: usize) -> Verifier {
        self.limits.max_len = max_len;
        self
    }

    /// Checks a program.
    ///
    /// ```
    /// use sluice_bpf::{Verifier, VerifyError, Insn};
    /// assert_eq!(Verifier::kernel().verify(&[]), Err(VerifyError::Empty));
    /// ```
    pub fn verify(&self, prog: &[Insn]) -> Result<(), VerifyError> {
        verify(prog, &self.limits)
    }

    /// Checks a program and pre-decodes it for fast execution.
    ///
    /// ```
    /// use sluice_bpf::{Verifier, Insn};
    /// let v = Verifier::kernel().validate(&[Insn::stmt(0x06, 9)]).unwrap();
    /// assert_eq!(v.run(&[], 0), 9);
    /// ```
    pub fn validate(&self, prog: &[Insn]) -> Result<Validated, VerifyError> {
        self.verify(prog)?;
        Ok(Validated::from_verified(prog))
    }
}

pub(crate) fn is_cond_jump(code: u16) -> bool {
    matches!(code, 0x15 | 0x1d | 0x25 | 0x2d | 0x35 | 0x3d | 0x45 | 0x4d)
}

/// Checks a program against `limits`, in the kernel's order: length, then
/// each instruction (opcode, constant divisors, shifts, scratch indexes,
/// jump ranges), then the final `ret`, then (if
/// [`Limits::check_uninitialized_memory`]) scratch loads before stores.
///
/// The scratch-memory check is the kernel's single forward pass when the
/// program has only forward jumps; with backward jumps (possible only with
/// custom limits) it is a fixed-point data-flow analysis over all paths.
///
/// ```
/// use sluice_bpf::{verify, Insn, Limits, VerifyError, op::*};
/// let prog = [Insn::stmt(BPF_LD | BPF_MEM, 3), Insn::stmt(BPF_RET | BPF_A, 0)];
/// assert_eq!(verify(&prog, &Limits::KERNEL),
///            Err(VerifyError::UninitializedMemory { pc: 0, k: 3 }));
/// ```
pub fn verify(prog: &[Insn], limits: &Limits) -> Result<(), VerifyError> {
    let len = prog.len();
    if len == 0 {
        return Err(VerifyError::Empty);
    }
    if len > limits.max_len {
        return Err(VerifyError::TooLong {
            len,
            max: limits.max_len,
        });
    }
    if len > u32::MAX as usize {
        return Err(VerifyError::TooLong {
            len,
            max: u32::MAX as usize,
        });
    }
    let mut backward = false;
    for (pc, i) in prog.iter().enumerate() {
        let code = i.code;
        if !is_valid_code(code) {
            return Err(VerifyError::UnknownOpcode { pc, code });
        }
        match code {
            0x34 | 0x94 if i.k == 0 => return Err(VerifyError::DivisionByZero { pc }),
            0x64 | 0x74 if limits.reject_large_shifts && i.k >= 32 => {
                return Err(VerifyError::ShiftTooLarge { pc, k: i.k })
            }
            0x60 | 0x61 | 0x02 | 0x03 if i.k as usize >= BPF_MEMWORDS => {
                return Err(VerifyError::MemoryIndex { pc, k: i.k })
            }
            0x05 => {
                let straight = pc as u64 + 1 + i.k as u64;
                if straight >= len as u64 {
                    let wrapped = (straight as u32) as usize;
                    if !limits.allow_backward_ja {
                        return Err(if wrapped < len && straight > u32::MAX as u64 {
                            VerifyError::BackwardJump {
                                pc,
                                target: wrapped,
                            }
                        } else {
                            VerifyError::JumpOutOfRange {
                                pc,
                                target: straight,
                                len,
                            }
                        });
                    }
                    if straight <= u32::MAX as u64 || wrapped >= len {
                        return Err(VerifyError::JumpOutOfRange {
                            pc,
                            target: straight,
                            len,
                        });
                    }
                    backward = true;
                }
            }
            c if is_cond_jump(c) => {
                for off in [i.jt, i.jf] {
                    let target = pc as u64 + 1 + off as u64;
                    if target >= len as u64 {
                        return Err(VerifyError::JumpOutOfRange { pc, target, len });
                    }
                }
            }
            _ => {}
        }
    }
    let last = prog[len - 1].code;
    if last != (BPF_RET | BPF_K) && last != (BPF_RET | BPF_A) {
        return Err(VerifyError::NoFinalReturn { pc: len - 1 });
    }
    if !limits.check_uninitialized_memory {
        Ok(())
    } else if backward {
        check_memory_fixpoint(prog)
    } else {
        check_memory_kernel(prog)
    }
}

/// Successors of instruction `pc` of a jump-checked program.
fn successors(prog: &[Insn], pc: usize) -> [Option<usize>; 2] {
    let i = prog[pc];
    match i.code {
        0x06 | 0x16 => [None, None],
        0x05 => [
            Some(((pc as u32).wrapping_add(1).wrapping_add(i.k)) as usize),
            None,
        ],
        c if is_cond_jump(c) => [Some(pc + 1 + i.jt as usize), Some(pc + 1 + i.jf as usize)],
        _ => [Some(pc + 1), None],
    }
}

/// The kernel's forward pass: a load is valid if every jump into the
/// instruction and the instruction before it carry the stored bit.
fn check_memory_kernel(prog: &[Insn]) -> Result<(), VerifyError> {
    let mut masks = vec![u16::MAX; prog.len()];
    let mut valid: u16 = 0;
    for (pc, i) in prog.iter().enumerate() {
        valid &= masks[pc];
        match i.code {
            0x02 | 0x03 => valid |= 1 << i.k,
            0x60 | 0x61 if valid & (1 << i.k) == 0 => {
                return Err(VerifyError::UninitializedMemory { pc, k: i.k });
            }
            c if c == 0x05 || is_cond_jump(c) => {
                for t in successors(prog, pc).into_iter().flatten() {
                    masks[t] &= valid;
                }
                valid = u16::MAX;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Data-flow version for programs with backward jumps: the set of stored
/// words at an instruction is the intersection over its predecessors.
fn check_memory_fixpoint(prog: &[Insn]) -> Result<(), VerifyError> {
    let len = prog.len();
    let mut state_in = vec![u16::MAX; len];
    state_in[0] = 0;
    let mut reached = vec![false; len];
    reached[0] = true;
    let mut work = vec![0usize];
    let mut queued = vec![false; len];
    queued[0] = true;
    while let Some(pc) = work.pop() {
        queued[pc] = false;
        let i = prog[pc];
        let mut out = state_in[pc];
        if matches!(i.code, 0x02 | 0x03) {
            out |= 1 << i.k;
        }
        for t in successors(prog, pc).into_iter().flatten() {
            let new = state_in[t] & out;
            if !reached[t] || new != state_in[t] {
                reached[t] = true;
                state_in[t] = new;
                if !queued[t] {
                    queued[t] = true;
                    work.push(t);
                }
            }
        }
    }
    for (pc, i) in prog.iter().enumerate() {
        if reached[pc] && matches!(i.code, 0x60 | 0x61) && state_in[pc] & (1 << i.k) == 0 {
            return Err(VerifyError::UninitializedMemory { pc, k: i.k });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(prog: &[Insn]) -> Result<(), VerifyError> {
        Verifier::kernel().verify(prog)
    }
    fn u(prog: &[Insn]) -> Result<(), VerifyError> {
        Verifier::userland().verify(prog)
    }
    const RET: Insn = Insn::stmt(BPF_RET | BPF_K, 0);

    #[test]
    fn accepts_good_programs() {
        let prog = [
            Insn::stmt(0x28, 12),
            Insn::jump(0x15, 0x800, 0, 3),
            Insn::stmt(0x02, 0),
            Insn::stmt(0x60, 0),
            Insn::stmt(0x16, 0),
            RET,
        ];
        assert_eq!(k(&prog), Ok(()));
        assert_eq!(u(&prog), Ok(()));
        // Every valid opcode with harmless operands.
        let mut all = vec![Insn::stmt(0x02, 0), Insn::stmt(0x03, 1)];
        for c in crate::VALID_CODES {
            all.push(Insn::jump(
                c,
                if matches!(c, 0x34 | 0x94) { 3 } else { 1 },
                0,
                0,
            ));
        }
        all.retain(|i| !matches!(i.code, 0x06 | 0x16));
        all.push(RET);
        assert_eq!(k(&all), Ok(()));
    }

    #[test]
    fn rejects_with_reasons() {
        assert_eq!(k(&[]), Err(VerifyError::Empty));
        let long = vec![RET; 4097];
        assert_eq!(
            k(&long),
            Err(VerifyError::TooLong {
                len: 4097,
                max: 4096
            })
        );
        assert_eq!(k(&long[..4096]), Ok(()));
        assert_eq!(u(&long), Ok(()));
        assert_eq!(
            k(&[Insn::stmt(0x0e, 0), RET]),
            Err(VerifyError::UnknownOpcode { pc: 0, code: 0x0e })
        );
        assert_eq!(
            k(&[RET, Insn::stmt(0x108, 0), RET]),
            Err(VerifyError::UnknownOpcode { pc: 1, code: 0x108 })
        );
        assert_eq!(
            k(&[Insn::jump(0x15, 0, 0, 1), RET]),
            Err(VerifyError::JumpOutOfRange {
                pc: 0,
                target: 2,
                len: 2
            })
        );
        assert_eq!(
            k(&[Insn::stmt(0x05, 1), RET]),
            Err(VerifyError::JumpOutOfRange {
                pc: 0,
                target: 2,
                len: 2
            })
        );
        assert_eq!(
            u(&[Insn::stmt(0x05, u32::MAX - 5), RET]),
            Err(VerifyError::JumpOutOfRange {
                pc: 0,
                target: u32::MAX as u64 - 4,
                len: 2
            })
        );
        assert_eq!(
            k(&[Insn::stmt(0x00, 0)]),
            Err(VerifyError::NoFinalReturn { pc: 0 })
        );
        assert_eq!(
            k(&[RET, Insn::stmt(0x0e, 0)]),
            Err(VerifyError::UnknownOpcode { pc: 1, code: 0x0e })
        );
        for code in [0x34, 0x94] {
            assert_eq!(
                k(&[Insn::stmt(code, 0), RET]),
                Err(VerifyError::DivisionByZero { pc: 0 })
            );
            assert_eq!(
                u(&[Insn::stmt(code, 0), RET]),
                Err(VerifyError::DivisionByZero { pc: 0 })
            );
        }
        for code in [0x60, 0x61, 0x02, 0x03] {
            assert_eq!(
                u(&[Insn::stmt(code, 16), RET]),
                Err(VerifyError::MemoryIndex { pc: 0, k: 16 })
            );
        }
        assert_eq!(
            k(&[Insn::stmt(0x64, 32), RET]),
            Err(VerifyError::ShiftTooLarge { pc: 0, k: 32 })
        );
        assert_eq!(u(&[Insn::stmt(0x64, 32), RET]), Ok(()));
        assert_eq!(
            k(&[Insn::stmt(0x61, 2), RET]),
            Err(VerifyError::UninitializedMemory { pc: 0, k: 2 })
        );
        assert_eq!(u(&[Insn::stmt(0x61, 2), RET]), Ok(()));
    }

    #[test]
    fn backward_ja() {
        let prog = [
            Insn::stmt(0x05, 1),
            RET,
            Insn::stmt(0x05, (-2i32) as u32),
            RET,
        ];
        assert_eq!(
            k(&prog),
            Err(VerifyError::BackwardJump { pc: 2, target: 1 })
        );
        assert_eq!(u(&prog), Ok(()));
    }

    #[test]
    fn memory_paths() {
        // Stored on one branch only.
        let prog = [
            Insn::jump(0x15, 0, 0, 1),
            Insn::stmt(0x02, 4),
            Insn::stmt(0x60, 4),
            RET,
        ];
        assert_eq!(
            k(&prog),
            Err(VerifyError::UninitializedMemory { pc: 2, k: 4 })
        );
        // Stored on both branches.
        let prog = [
            Insn::jump(0x15, 0, 0, 2),
            Insn::stmt(0x02, 4),
            Insn::stmt(0x05, 1),
            Insn::stmt(0x03, 4),
            Insn::stmt(0x60, 4),
            RET,
        ];
        assert_eq!(k(&prog), Ok(()));
        // The kernel carries the state across a `ret` into the next
        // instruction, which is stricter than path analysis.
        let prog = [
            Insn::jump(0x15, 0, 0, 2),
            Insn::stmt(0x02, 0),
            Insn::jump(0x15, 0, 1, 1),
            RET,
            Insn::stmt(0x60, 0),
            RET,
        ];
        assert_eq!(
            k(&prog),
            Err(VerifyError::UninitializedMemory { pc: 4, k: 0 })
        );
        // Fixed point with a loop: the load in the loop is after the store.
        let custom = Verifier {
            limits: Limits {
                check_uninitialized_memory: true,
                ..Limits::USERLAND
            },
        };
        let prog = [
            Insn::stmt(0x02, 1),
            Insn::stmt(0x60, 1),
            Insn::jump(0x15, 0, 0, 1),
            Insn::stmt(0x05, (-3i32) as u32),
            RET,
        ];
        assert_eq!(custom.verify(&prog), Ok(()));
        let prog = [
            Insn::stmt(0x05, 1),
            Insn::stmt(0x60, 1),
            Insn::stmt(0x05, (-2i32) as u32),
            RET,
        ];
        assert_eq!(
            custom.verify(&prog),
            Err(VerifyError::UninitializedMemory { pc: 1, k: 1 })
        );
    }
}
