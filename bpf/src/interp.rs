//! The interpreter: libpcap's `bpf_filter()` semantics.

use crate::insn::Insn;
use crate::verify::{Verifier, VerifyError};

/// Budget of the interpreter for programs that jump backwards.
///
/// libpcap loops forever on a program whose backward jumps form an infinite
/// loop. We stop instead: every backward jump is charged the number of
/// instruction slots of the forward stretch that led to it (an upper bound of
/// the instructions executed since the previous backward jump); once the
/// charges exceed `STEP_BUDGET` the run returns 0. Programs without backward
/// jumps (all that the Linux kernel accepts) never touch the budget.
///
/// ```
/// assert_eq!(sluice_bpf::STEP_BUDGET, 1 << 24);
/// ```
pub const STEP_BUDGET: u64 = 1 << 24;

#[inline(always)]
fn load_w(pkt: &[u8], off: usize) -> Option<u32> {
    let b = pkt.get(off..off.checked_add(4)?)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

#[inline(always)]
fn load_h(pkt: &[u8], off: usize) -> Option<u32> {
    let b = pkt.get(off..off.checked_add(2)?)?;
    Some(u16::from_be_bytes([b[0], b[1]]) as u32)
}

#[inline(always)]
fn load_b(pkt: &[u8], off: usize) -> Option<u32> {
    pkt.get(off).map(|&b| b as u32)
}

#[inline(always)]
fn ind(x: u32, k: u32) -> usize {
    // 64-bit sum: no wrap-around, exactly like libpcap's checks.
    (x as u64 + k as u64) as usize
}

/// Runs a program on a packet like libpcap's `bpf_filter(prog, pkt, wirelen,
/// pkt.len())` and returns its result (0 = reject, otherwise the snapshot
/// length).
///
/// Any input is accepted and nothing panics. Where libpcap has no defined
/// result this returns 0: unknown opcodes (libpcap aborts), division or
/// modulo by zero (X or constant; libpcap traps on a constant zero), scratch
/// index >= 16 (libpcap reads out of bounds), running off the end of the
/// program or jumping outside it, and exhausting [`STEP_BUDGET`]. Scratch
/// memory starts zeroed (libpcap leaves it uninitialised; verified programs
/// never read it before writing). Packet loads outside `pkt` return 0; `len`
/// loads `wirelen`. Shifts by a constant use the amount modulo 32 (what
/// libpcap 1.10.3 does on x86-64), shifts by X >= 32 give 0. `ja` adds `k`
/// with 32-bit wrap-around, so libpcap's backward jumps (`protochain`) work.
///
/// ```
/// use sluice_bpf::{run, Insn, op::*};
/// let prog = [
///     Insn::stmt(BPF_LD | BPF_H | BPF_ABS, 12),
///     Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, 0x0800, 0, 1),
///     Insn::stmt(BPF_RET | BPF_K, 262144),
///     Insn::stmt(BPF_RET | BPF_K, 0),
/// ];
/// let mut pkt = [0u8; 14];
/// pkt[12] = 0x08;
/// assert_eq!(run(&prog, &pkt, 60), 262144);
/// assert_eq!(run(&prog, &pkt[..13], 60), 0); // out of bounds
/// ```
pub fn run(prog: &[Insn], pkt: &[u8], wirelen: u32) -> u32 {
    run_ext(&mut Machine::default(), prog, pkt, wirelen, &mut NoExt)
}

/// The registers of the BPF machine: accumulator, index register, scratch
/// memory and the index of the next instruction to execute.
///
/// [`run_ext`] starts from a machine and hands it to an [`ExtHook`] when it
/// meets an opcode classic BPF does not define (MPF's extensions, for
/// example), so the hook can read scratch memory, change registers or jump.
///
/// ```
/// let m = sluice_bpf::Machine::default();
/// assert_eq!((m.a, m.x, m.pc, m.mem), (0, 0, 0, [0; 16]));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// Accumulator A.
    pub a: u32,
    /// Index register X.
    pub x: u32,
    /// Scratch memory M[0..16].
    pub mem: [u32; 16],
    /// Index of the next instruction.
    pub pc: usize,
}

/// What an [`ExtHook`] tells the interpreter after an extension instruction.
///
/// ```
/// use sluice_bpf::ExtStep;
/// assert_ne!(ExtStep::Continue, ExtStep::Return(0));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExtStep {
    /// Go on at the machine's `pc` (already past the instruction; the hook
    /// may have changed it).
    Continue,
    /// Stop the program with this result.
    Return(u32),
}

/// Executes the instructions that classic BPF does not define, for
/// [`run_ext`].
///
/// ```
/// use sluice_bpf::{run_ext, ExtHook, ExtStep, Insn, Machine, op::*};
/// /// Opcode 0x100 loads A with twice k.
/// struct Double;
/// impl ExtHook for Double {
///     fn ext(&mut self, m: &mut Machine, insn: Insn, _at: usize) -> ExtStep {
///         if insn.code != 0x100 { return ExtStep::Return(0); }
///         m.a = insn.k * 2;
///         ExtStep::Continue
///     }
/// }
/// let prog = [Insn::stmt(0x100, 21), Insn::stmt(BPF_RET | BPF_A, 0)];
/// assert_eq!(run_ext(&mut Machine::default(), &prog, &[], 0, &mut Double), 42);
/// ```
pub trait ExtHook {
    /// Executes `insn`, found at index `at`; `m.pc` is `at + 1` on entry.
    fn ext(&mut self, m: &mut Machine, insn: Insn, at: usize) -> ExtStep;
}

/// The hook of plain classic BPF: every unknown opcode returns 0.
///
/// ```
/// use sluice_bpf::{run_ext, Insn, Machine, NoExt};
/// assert_eq!(run_ext(&mut Machine::default(), &[Insn::stmt(0x100, 1)], &[], 0, &mut NoExt), 0);
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExt;

impl ExtHook for NoExt {
    #[inline(always)]
    fn ext(&mut self, _m: &mut Machine, _insn: Insn, _at: usize) -> ExtStep {
        ExtStep::Return(0)
    }
}

/// [`run`] from a given machine state, with a hook for opcodes classic BPF
/// does not define. With [`NoExt`] and a fresh [`Machine`] it is exactly
/// [`run`]. The state is written back to `m` only before the hook is called
/// (registers after a return are not kept).
///
/// ```
/// use sluice_bpf::{run_ext, Insn, Machine, NoExt, op::*};
/// let prog = [Insn::stmt(BPF_LD | BPF_MEM, 2), Insn::stmt(BPF_RET | BPF_A, 0)];
/// let mut m = Machine::default();
/// m.mem[2] = 77;
/// assert_eq!(run_ext(&mut m, &prog, &[], 0, &mut NoExt), 77);
/// ```
#[inline(always)]
pub fn run_ext<H: ExtHook>(
    m: &mut Machine,
    prog: &[Insn],
    pkt: &[u8],
    wirelen: u32,
    hook: &mut H,
) -> u32 {
    let mut a: u32 = m.a;
    let mut x: u32 = m.x;
    let mut mem = m.mem;
    let mut pc: usize = m.pc;
    let mut seg_start: usize = pc;
    let mut budget: u64 = STEP_BUDGET;
    macro_rules! ld {
        ($e:expr) => {
            match $e {
                Some(v) => v,
                None => return 0,
            }
        };
    }
    macro_rules! cond {
        ($ins:expr, $c:expr) => {
            pc += if $c { $ins.jt } else { $ins.jf } as usize
        };
    }
    loop {
        let Some(&ins) = prog.get(pc) else {
            return 0;
        };
        pc += 1;
        let k = ins.k;
        match ins.code {
            0x06 => return k,
            0x16 => return a,
            0x20 => a = ld!(load_w(pkt, k as usize)),
            0x28 => a = ld!(load_h(pkt, k as usize)),
            0x30 => a = ld!(load_b(pkt, k as usize)),
            0x40 => a = ld!(load_w(pkt, ind(x, k))),
            0x48 => a = ld!(load_h(pkt, ind(x, k))),
            0x50 => a = ld!(load_b(pkt, ind(x, k))),
            0x80 => a = wirelen,
            0x81 => x = wirelen,
            0xb1 => x = (ld!(load_b(pkt, k as usize)) & 0xf) << 2,
            0x00 => a = k,
            0x01 => x = k,
            0x60 => a = ld!(mem.get(k as usize).copied()),
            0x61 => x = ld!(mem.get(k as usize).copied()),
            0x02 => *ld!(mem.get_mut(k as usize)) = a,
            0x03 => *ld!(mem.get_mut(k as usize)) = x,
            0x05 => {
                let from = pc - 1;
                let target = (pc as u32).wrapping_add(k) as usize;
                if target <= from {
                    let cost = (from - seg_start + 1) as u64;
                    if cost > budget {
                        return 0;
                    }
                    budget -= cost;
                    seg_start = target;
                }
                pc = target;
            }
            0x15 => cond!(ins, a == k),
            0x1d => cond!(ins, a == x),
            0x25 => cond!(ins, a > k),
            0x2d => cond!(ins, a > x),
            0x35 => cond!(ins, a >= k),
            0x3d => cond!(ins, a >= x),
            0x45 => cond!(ins, a & k != 0),
            0x4d => cond!(ins, a & x != 0),
            0x04 => a = a.wrapping_add(k),
            0x0c => a = a.wrapping_add(x),
            0x14 => a = a.wrapping_sub(k),
            0x1c => a = a.wrapping_sub(x),
            0x24 => a = a.wrapping_mul(k),
            0x2c => a = a.wrapping_mul(x),
            0x34 => a = ld!(a.checked_div(k)),
            0x3c => a = ld!(a.checked_div(x)),
            0x94 => a = ld!(a.checked_rem(k)),
            0x9c => a = ld!(a.checked_rem(x)),
            0x44 => a |= k,
            0x4c => a |= x,
            0x54 => a &= k,
            0x5c => a &= x,
            0xa4 => a ^= k,
            0xac => a ^= x,
            0x64 => a = a.wrapping_shl(k),
            0x6c => a = a.checked_shl(x).unwrap_or(0),
            0x74 => a = a.wrapping_shr(k),
            0x7c => a = a.checked_shr(x).unwrap_or(0),
            0x84 => a = a.wrapping_neg(),
            0x07 => x = a,
            0x87 => a = x,
            _ => {
                *m = Machine { a, x, mem, pc };
                match hook.ext(m, ins, pc - 1) {
                    ExtStep::Continue => {
                        a = m.a;
                        x = m.x;
                        mem = m.mem;
                        // A hook that jumps backwards starts a new stretch.
                        if m.pc < pc {
                            let cost = (pc - seg_start) as u64;
                            if cost > budget {
                                return 0;
                            }
                            budget -= cost;
                            seg_start = m.pc;
                        }
                        pc = m.pc;
                    }
                    ExtStep::Return(v) => return v,
                }
            }
        }
    }
}

/// A verified program.
///
/// Built by [`Verifier::validate`] (or [`Validated::new`] with the userland
/// verifier). Running it gives exactly [`run`]'s result on the same
/// instructions.
///
/// ```
/// use sluice_bpf::{Validated, parse_program};
/// let insns = parse_program("(000) ld       #pktlen\n(001) ret      a\n").unwrap();
/// let v = Validated::new(&insns).unwrap();
/// assert_eq!(v.run(&[], 1500), 1500);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validated {
    insns: Vec<Insn>,
}

impl Validated {
    /// Verifies with [`Verifier::userland`] and pre-decodes.
    ///
    /// ```
    /// use sluice_bpf::{Validated, Insn};
    /// assert!(Validated::new(&[Insn::stmt(0x06, 1)]).is_ok());
    /// assert!(Validated::new(&[]).is_err());
    /// ```
    pub fn new(prog: &[Insn]) -> Result<Validated, VerifyError> {
        Verifier::userland().validate(prog)
    }

    /// Wraps a program that `verifier` accepted. Only for the verifier.
    pub(crate) fn from_verified(prog: &[Insn]) -> Validated {
        Validated {
            insns: prog.to_vec(),
        }
    }

    /// The instructions.
    ///
    /// ```
    /// use sluice_bpf::{Validated, Insn};
    /// let v = Validated::new(&[Insn::stmt(0x06, 1)]).unwrap();
    /// assert_eq!(v.insns(), &[Insn::stmt(0x06, 1)]);
    /// ```
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// Runs the program on a packet; same result as [`run`].
    ///
    /// ```
    /// use sluice_bpf::{Validated, Insn, op::*};
    /// let v = Validated::new(&[
    ///     Insn::stmt(BPF_LD | BPF_B | BPF_ABS, 0),
    ///     Insn::stmt(BPF_RET | BPF_A, 0),
    /// ]).unwrap();
    /// assert_eq!(v.run(&[7], 1), 7);
    /// assert_eq!(v.run(&[], 1), 0);
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        // One interpreter for every program: a match on the raw opcode is
        // already a jump table, so a verified program needs no decoder of
        // its own.
        run(&self.insns, pkt, wirelen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::op::*;

    fn ret_a(mut prog: Vec<Insn>) -> Vec<Insn> {
        prog.push(Insn::stmt(BPF_RET | BPF_A, 0));
        prog
    }

    /// Runs with both engines (the fast one when the program verifies) and
    /// checks that they agree.
    fn both(prog: &[Insn], pkt: &[u8], wirelen: u32) -> u32 {
        let r = run(prog, pkt, wirelen);
        if let Ok(v) = Validated::new(prog) {
            assert_eq!(v.run(pkt, wirelen), r, "{prog:?}");
        }
        r
    }

    fn alu(a: u32, x: u32, code: u16, k: u32) -> u32 {
        let prog = ret_a(vec![
            Insn::stmt(BPF_LDX | BPF_IMM, x),
            Insn::stmt(BPF_LD | BPF_IMM, a),
            Insn::stmt(code, k),
        ]);
        both(&prog, &[], 0)
    }

    #[test]
    fn alu_semantics() {
        let a = 0xf000_0007u32;
        let cases: [(u16, u32, u32); 11] = [
            (BPF_ADD, 0x1000_0001, a.wrapping_add(0x1000_0001)),
            (BPF_SUB, 9, a.wrapping_sub(9)),
            (BPF_MUL, 3, a.wrapping_mul(3)),
            (BPF_DIV, 7, a / 7),
            (BPF_MOD, 7, a % 7),
            (BPF_OR, 0x0f00, a | 0x0f00),
            (BPF_AND, 0xff, a & 0xff),
            (BPF_XOR, 0xffff, a ^ 0xffff),
            (BPF_LSH, 4, a << 4),
            (BPF_RSH, 4, a >> 4),
            (BPF_LSH, 31, a << 31),
        ];
        for (op, v, want) in cases {
            assert_eq!(alu(a, 0, BPF_ALU | op | BPF_K, v), want, "{op:#x} k");
            assert_eq!(alu(a, v, BPF_ALU | op | BPF_X, 0), want, "{op:#x} x");
        }
        assert_eq!(alu(5, 0, BPF_ALU | BPF_NEG, 0), 5u32.wrapping_neg());
    }

    #[test]
    fn shifts_by_32_or_more() {
        // Constant: amount modulo 32, as libpcap 1.10.3 on x86-64.
        assert_eq!(alu(3, 0, BPF_ALU | BPF_LSH | BPF_K, 33), 6);
        assert_eq!(alu(12, 0, BPF_ALU | BPF_RSH | BPF_K, 33), 6);
        assert_eq!(alu(3, 0, BPF_ALU | BPF_LSH | BPF_K, 32), 3);
        // X: 0 for 32 and more.
        for x in [32, 33, 64, u32::MAX] {
            assert_eq!(alu(3, x, BPF_ALU | BPF_LSH | BPF_X, 0), 0);
            assert_eq!(alu(u32::MAX, x, BPF_ALU | BPF_RSH | BPF_X, 0), 0);
        }
        assert_eq!(alu(1, 31, BPF_ALU | BPF_LSH | BPF_X, 0), 1 << 31);
    }

    #[test]
    fn division_by_zero_returns_zero() {
        for code in [BPF_DIV, BPF_MOD] {
            assert_eq!(alu(10, 0, BPF_ALU | code | BPF_X, 0), 0);
            // Constant zero: rejected by the verifier, 0 from `run`.
            let prog = ret_a(vec![
                Insn::stmt(BPF_LD | BPF_IMM, 10),
                Insn::stmt(BPF_ALU | code | BPF_K, 0),
            ]);
            assert_eq!(run(&prog, &[], 0), 0);
            assert!(Validated::new(&prog).is_err());
        }
        // The run stops: no later instruction executes.
        let prog = [
            Insn::stmt(BPF_ALU | BPF_DIV | BPF_X, 0),
            Insn::stmt(BPF_RET | BPF_K, 7),
        ];
        assert_eq!(both(&prog, &[], 0), 0);
    }

    #[test]
    fn loads_and_bounds_at_every_length() {
        let data: Vec<u8> = (1..=20).collect();
        for len in 0..=data.len() {
            let pkt = &data[..len];
            for (size, code, width) in [(4, 0x20u16, 4usize), (2, 0x28, 2), (1, 0x30, 1)] {
                let _ = size;
                for k in 0..=len as u32 + 2 {
                    let want = if k as usize + width <= len {
                        pkt[k as usize..k as usize + width]
                            .iter()
                            .fold(0u32, |acc, &b| acc << 8 | b as u32)
                    } else {
                        0
                    };
                    let abs = ret_a(vec![Insn::stmt(code, k)]);
                    assert_eq!(both(&abs, pkt, 99), want, "abs {code:#x} k={k} len={len}");
                    // Indirect: split the offset between X and k.
                    for x in [0, k / 2, k] {
                        let ind = ret_a(vec![
                            Insn::stmt(BPF_LDX | BPF_IMM, x),
                            Insn::stmt(code + 0x20, k - x),
                        ]);
                        assert_eq!(
                            both(&ind, pkt, 99),
                            want,
                            "ind {code:#x} x={x} k={} len={len}",
                            k - x
                        );
                    }
                }
            }
            // MSH.
            for k in 0..=len as u32 {
                let prog = vec![
                    Insn::stmt(0xb1, k),
                    Insn::stmt(BPF_MISC | BPF_TXA, 0),
                    Insn::stmt(0x16, 0),
                ];
                let want = pkt.get(k as usize).map_or(0, |&b| (b as u32 & 0xf) * 4);
                assert_eq!(both(&prog, pkt, 0), want);
            }
        }
    }

    #[test]
    fn indirect_offsets_do_not_wrap() {
        let pkt = [0xaau8; 16];
        for (x, k) in [
            (u32::MAX, 1),
            (1, u32::MAX),
            (0x8000_0000, 0x8000_0000),
            (u32::MAX, u32::MAX),
        ] {
            for code in [0x40u16, 0x48, 0x50] {
                let prog = [
                    Insn::stmt(BPF_LDX | BPF_IMM, x),
                    Insn::stmt(code, k),
                    Insn::stmt(BPF_RET | BPF_K, 1),
                ];
                assert_eq!(both(&prog, &pkt, 16), 0);
            }
        }
        for k in [u32::MAX, u32::MAX - 1, u32::MAX - 3] {
            for code in [0x20u16, 0x28, 0x30, 0xb1] {
                let prog = [Insn::stmt(code, k), Insn::stmt(BPF_RET | BPF_K, 1)];
                assert_eq!(both(&prog, &pkt, 16), 0);
            }
        }
    }

    #[test]
    fn len_imm_mem_misc() {
        assert_eq!(both(&ret_a(vec![Insn::stmt(0x80, 0)]), &[1, 2], 1514), 1514);
        assert_eq!(
            both(
                &ret_a(vec![Insn::stmt(0x81, 0), Insn::stmt(0x87, 0)]),
                &[],
                77
            ),
            77
        );
        assert_eq!(both(&ret_a(vec![Insn::stmt(0x00, 0xdead)]), &[], 0), 0xdead);
        let prog = ret_a(vec![
            Insn::stmt(0x00, 5),
            Insn::stmt(0x02, 15), // M[15] = 5
            Insn::stmt(0x01, 6),
            Insn::stmt(0x03, 0),  // M[0] = 6
            Insn::stmt(0x61, 15), // X = 5
            Insn::stmt(0x60, 0),  // A = 6
            Insn::stmt(0x0c, 0),  // A = 11
            Insn::stmt(0x07, 0),  // X = 11
            Insn::stmt(0x00, 0),
            Insn::stmt(0x87, 0), // A = 11
        ]);
        assert_eq!(both(&prog, &[], 0), 11);
        // Scratch memory starts zeroed (an unverifiable program).
        assert_eq!(run(&ret_a(vec![Insn::stmt(0x60, 3)]), &[], 0), 0);
        // Index out of range: 0.
        assert_eq!(run(&[Insn::stmt(0x02, 16), Insn::stmt(0x06, 1)], &[], 0), 0);
        assert_eq!(run(&[Insn::stmt(0x61, 99), Insn::stmt(0x06, 1)], &[], 0), 0);
    }

    #[test]
    fn ret_and_jumps() {
        assert_eq!(both(&[Insn::stmt(0x06, 42)], &[], 0), 42);
        assert_eq!(both(&[Insn::stmt(0x00, 9), Insn::stmt(0x16, 0)], &[], 0), 9);
        // ret x is not executable.
        assert_eq!(run(&[Insn::stmt(0x0e, 0)], &[], 0), 0);
        type Cond = fn(u32, u32) -> bool;
        let conds: [(u16, Cond); 4] = [
            (BPF_JEQ, |a, b| a == b),
            (BPF_JGT, |a, b| a > b),
            (BPF_JGE, |a, b| a >= b),
            (BPF_JSET, |a, b| a & b != 0),
        ];
        for (op, f) in conds {
            for (a, b) in [
                (1u32, 1u32),
                (2, 1),
                (1, 2),
                (0x80, 0x81),
                (0, 0),
                (u32::MAX, 0),
            ] {
                for src in [BPF_K, BPF_X] {
                    let prog = [
                        Insn::stmt(BPF_LDX | BPF_IMM, b),
                        Insn::stmt(BPF_LD | BPF_IMM, a),
                        Insn::jump(BPF_JMP | op | src, b, 1, 2),
                        Insn::stmt(BPF_RET | BPF_K, 100),
                        Insn::stmt(BPF_RET | BPF_K, 1),
                        Insn::stmt(BPF_RET | BPF_K, 2),
                    ];
                    let want = if f(a, b) { 1 } else { 2 };
                    assert_eq!(both(&prog, &[], 0), want, "{op:#x} {src:#x} {a} {b}");
                }
            }
        }
        let ja = [
            Insn::stmt(0x05, 1),
            Insn::stmt(0x06, 1),
            Insn::stmt(0x06, 2),
        ];
        assert_eq!(both(&ja, &[], 0), 2);
    }

    #[test]
    fn backward_ja_runs_and_bad_jumps_return_zero() {
        // 0: ja +1 -> 2; 2: ja -2 -> 1; 1: ret 7
        let prog = [
            Insn::stmt(0x05, 1),
            Insn::stmt(0x06, 7),
            Insn::stmt(0x05, (-2i32) as u32),
            Insn::stmt(0x06, 9),
        ];
        assert_eq!(both(&prog, &[], 0), 7);
        // Out of range, forwards and backwards, and off the end.
        assert_eq!(run(&[Insn::stmt(0x05, 5), Insn::stmt(0x06, 1)], &[], 0), 0);
        assert_eq!(
            run(
                &[Insn::stmt(0x05, (-5i32) as u32), Insn::stmt(0x06, 1)],
                &[],
                0
            ),
            0
        );
        assert_eq!(
            run(
                &[Insn::jump(0x15, 0, 200, 200), Insn::stmt(0x06, 1)],
                &[],
                0
            ),
            0
        );
        assert_eq!(run(&[Insn::stmt(0x00, 1)], &[], 0), 0);
        assert_eq!(run(&[], &[], 0), 0);
        // Unknown opcode.
        assert_eq!(run(&[Insn::stmt(0xff, 1), Insn::stmt(0x06, 1)], &[], 0), 0);
    }

    #[test]
    fn infinite_loop_stops_at_the_budget() {
        // ja -1: jumps to itself forever.
        let prog = [Insn::stmt(0x05, u32::MAX), Insn::stmt(0x06, 1)];
        assert_eq!(run(&prog, &[], 0), 0);
        assert_eq!(Validated::new(&prog).unwrap().run(&[], 0), 0);
        // A longer loop that stores a counter terminates with the budget too.
        let prog = [
            Insn::stmt(0x04, 1),
            Insn::stmt(0x05, (-2i32) as u32),
            Insn::stmt(0x16, 0),
        ];
        assert_eq!(both(&prog, &[], 0), 0);
    }
}
