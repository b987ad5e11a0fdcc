//! Lifting classic BPF into sluice's intermediate form, so that BPF filters
//! merge and compile like filters written in any other language.
//!
//! The program is executed symbolically: A, X and M[] hold IR values, each
//! conditional jump becomes a test, each `ret` a leaf. BPF aborts at the
//! *load instruction*, the IR when a value is *used*; so every load executed
//! since the last branch whose value the branch does not itself read is
//! "touched" (tested in a way that is always true) right before the branch.
//! The lifted filter therefore aborts on exactly the packets the program
//! does.
//!
//! Programs with backward jumps, `ret A`/`ret X`, several different non-zero
//! return constants, or too many paths are not lifted.
//!
//! ```
//! use sluice_bpf::{lift, parse_program};
//! let prog = parse_program("(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 3\n(002) ret #96\n(003) ret #0\n").unwrap();
//! let f = lift(&prog).unwrap();
//! let mut pkt = [0u8; 14];
//! pkt[12] = 8;
//! assert_eq!(f.run(&pkt, 14), 96);
//! assert_eq!(f.run(&pkt[..13], 14), 0);
//! ```

use crate::insn::{AluOp, Insn, JmpOp, MiscOp, Mode, Op, RetSrc, Size, Src};
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Size as IrSize, Val};

/// Why a program cannot be lifted.
///
/// ```
/// assert!(sluice_bpf::LiftError::ReturnsRegister.to_string().contains("register"));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiftError {
    /// A jump goes backwards or outside the program, or an opcode is invalid.
    NotForward(usize),
    /// The program returns A or X: its accept value depends on the packet.
    ReturnsRegister,
    /// It returns different non-zero constants on different paths.
    SeveralAcceptValues,
    /// The lifted form would be too large.
    TooLarge,
}

impl std::fmt::Display for LiftError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LiftError::NotForward(pc) => {
                write!(f, "instruction {pc}: not a forward-only program")
            }
            LiftError::ReturnsRegister => f.write_str("the program returns a register"),
            LiftError::SeveralAcceptValues => {
                f.write_str("the program returns several different accept values")
            }
            LiftError::TooLarge => f.write_str("the program has too many paths to lift"),
        }
    }
}

impl std::error::Error for LiftError {}

/// Limit on lifted predicate size (tests along all paths).
const MAX_TESTS: usize = 1 << 15;

#[derive(Clone)]
struct State {
    a: Val,
    x: Val,
    mem: [Val; 16],
    /// Loads executed since the last branch.
    pending: Vec<Val>,
}

struct Lifter<'a> {
    prog: &'a [Insn],
    tests: usize,
    accept: Option<u32>,
}

fn ir_size(s: Size) -> IrSize {
    match s {
        Size::W => IrSize::Word,
        Size::H => IrSize::Half,
        Size::B => IrSize::Byte,
    }
}

/// Lift a classic BPF program into an IR filter with the same return value
/// on every packet.
///
/// ```
/// use sluice_bpf::{lift, Insn, op};
/// let f = lift(&[Insn::stmt(op::BPF_RET | op::BPF_K, 0)]).unwrap();
/// assert_eq!(f.run(&[1, 2], 2), 0);
/// ```
pub fn lift(prog: &[Insn]) -> Result<Filter, LiftError> {
    let mut l = Lifter {
        prog,
        tests: 0,
        accept: None,
    };
    let st = State {
        a: Val::Const(0),
        x: Val::Const(0),
        mem: std::array::from_fn(|_| Val::Const(0)),
        pending: Vec::new(),
    };
    let pred = l.run(0, st, 0)?;
    Ok(Filter::new(pred, l.accept.unwrap_or(0)))
}

/// Does `v` read the load `l` (so evaluating `v` evaluates `l`)?
fn reads(v: &Val, l: &Val) -> bool {
    if v == l {
        return true;
    }
    match v {
        Val::Load { base, .. } => reads(base, l),
        Val::Bin(_, a, b) => reads(a, l) || reads(b, l),
        Val::Neg(a) => reads(a, l),
        // (Lifting makes no shared values.)
        Val::Shared(s) => reads(s.val(), l),
        Val::Const(_) | Val::Len => false,
    }
}

/// Always true, but evaluates `v` (so it aborts where `v` aborts).
fn touch(v: Val) -> Pred {
    Pred::Cmp {
        op: CmpOp::Ge,
        lhs: v,
        rhs: Val::Const(0),
    }
}

impl Lifter<'_> {
    fn run(&mut self, mut pc: usize, mut st: State, depth: usize) -> Result<Pred, LiftError> {
        if depth > 512 {
            return Err(LiftError::TooLarge);
        }
        loop {
            let Some(op) = self.prog.get(pc).and_then(Insn::decode) else {
                return Err(LiftError::NotForward(pc));
            };
            pc += 1;
            match op {
                Op::Ld { size, mode, k } => st.a = self.load(&mut st, size, mode, k, false),
                Op::Ldx { size, mode, k } => st.x = self.load(&mut st, size, mode, k, true),
                Op::St(k) => st.mem[k as usize % 16] = st.a.clone(),
                Op::Stx(k) => st.mem[k as usize % 16] = st.x.clone(),
                Op::Misc(MiscOp::Tax) => st.x = st.a.clone(),
                Op::Misc(MiscOp::Txa) => st.a = st.x.clone(),
                Op::Alu { op, src, k } => {
                    let rhs = match src {
                        Src::K => Val::Const(k),
                        Src::X => st.x.clone(),
                    };
                    let a = std::mem::replace(&mut st.a, Val::Const(0));
                    st.a = match op {
                        AluOp::Neg => Val::Neg(Box::new(a)),
                        // A constant shift uses the amount modulo 32, as the interpreter does.
                        AluOp::Lsh | AluOp::Rsh if src == Src::K => {
                            let bop = if op == AluOp::Lsh {
                                BinOp::Shl
                            } else {
                                BinOp::Shr
                            };
                            Val::Bin(bop, Box::new(a), Box::new(Val::Const(k & 31)))
                        }
                        op => {
                            let bop = match op {
                                AluOp::Add => BinOp::Add,
                                AluOp::Sub => BinOp::Sub,
                                AluOp::Mul => BinOp::Mul,
                                AluOp::Div => BinOp::Div,
                                AluOp::Mod => BinOp::Mod,
                                AluOp::Or => BinOp::Or,
                                AluOp::And => BinOp::And,
                                AluOp::Xor => BinOp::Xor,
                                AluOp::Lsh => BinOp::Shl,
                                _ => BinOp::Shr,
                            };
                            let v = Val::Bin(bop, Box::new(a), Box::new(rhs));
                            // A division that can fail fails here, like a load.
                            if matches!(bop, BinOp::Div | BinOp::Mod) {
                                st.pending.push(v.clone());
                            }
                            v
                        }
                    };
                }
                Op::Ret { src: RetSrc::K, k } => {
                    if k == 0 {
                        // Rejected whether or not a pending load aborts.
                        return Ok(Pred::False);
                    }
                    let touches: Vec<Pred> = st.pending.drain(..).map(touch).collect();
                    match self.accept {
                        Some(a) if a != k => return Err(LiftError::SeveralAcceptValues),
                        _ => self.accept = Some(k),
                    }
                    return Ok(Pred::and(touches));
                }
                Op::Ret { .. } => return Err(LiftError::ReturnsRegister),
                Op::Jmp {
                    op: JmpOp::Ja, k, ..
                } => {
                    pc = pc
                        .checked_add(k as usize)
                        .ok_or(LiftError::NotForward(pc))?;
                }
                Op::Jmp { op, src, k, jt, jf } => {
                    self.tests += 1;
                    if self.tests > MAX_TESTS {
                        return Err(LiftError::TooLarge);
                    }
                    let rhs = match src {
                        Src::K => Val::Const(k),
                        Src::X => st.x.clone(),
                    };
                    let cmp = match op {
                        JmpOp::Jeq => CmpOp::Eq,
                        JmpOp::Jgt => CmpOp::Gt,
                        JmpOp::Jge => CmpOp::Ge,
                        _ => CmpOp::Set,
                    };
                    let lhs = st.a.clone();
                    let touches: Vec<Pred> = std::mem::take(&mut st.pending)
                        .into_iter()
                        .filter(|l| !reads(&lhs, l) && !reads(&rhs, l))
                        .map(touch)
                        .collect();
                    let test = Pred::Cmp { op: cmp, lhs, rhs };
                    let then = self.run(pc + jt as usize, st.clone(), depth + 1)?;
                    let other = self.run(pc + jf as usize, st, depth + 1)?;
                    // test ? then : other, evaluating the test once per path.
                    let branch = match (&then, &other) {
                        (_, Pred::False) => Pred::and(vec![test, then]),
                        (Pred::False, _) => Pred::and(vec![Pred::not(test), other]),
                        (Pred::True, _) => Pred::or(vec![test, other]),
                        (_, Pred::True) => Pred::or(vec![Pred::not(test), then]),
                        _ => Pred::or(vec![
                            Pred::and(vec![test.clone(), then]),
                            Pred::and(vec![Pred::not(test), other]),
                        ]),
                    };
                    return Ok(Pred::and(touches.into_iter().chain([branch]).collect()));
                }
            }
        }
    }

    fn load(&mut self, st: &mut State, size: Size, mode: Mode, k: u32, to_x: bool) -> Val {
        let v = match mode {
            Mode::Imm => return Val::Const(k),
            Mode::Len => return Val::Len,
            Mode::Mem => return st.mem[k as usize % 16].clone(),
            Mode::Abs => Val::load_abs(k, ir_size(size)),
            Mode::Ind => Val::Load {
                base: Box::new(st.x.clone()),
                offset: k,
                size: ir_size(size),
            },
            Mode::Msh => {
                let b = Val::load_abs(k, IrSize::Byte);
                st.pending.push(b.clone());
                debug_assert!(to_x);
                return Val::Bin(
                    BinOp::Shl,
                    Box::new(Val::Bin(BinOp::And, Box::new(b), Box::new(Val::Const(0xf)))),
                    Box::new(Val::Const(2)),
                );
            }
        };
        st.pending.push(v.clone());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_program, run};

    fn packets() -> Vec<Vec<u8>> {
        let mut base = vec![0u8; 64];
        base[12] = 0x08;
        base[14] = 0x45;
        base[23] = 6;
        base[36] = 0;
        base[37] = 80;
        let mut out = Vec::new();
        for variant in 0..4u8 {
            let mut p = base.clone();
            p[23] = [6, 17, 1, 6][variant as usize];
            p[20] = if variant == 3 { 0x20 } else { 0 };
            for len in 0..=p.len() {
                out.push(p[..len].to_vec());
            }
        }
        out
    }

    #[test]
    fn lifted_programs_agree_with_the_interpreter() {
        let progs = [
            // tcp port 80 as libpcap prints it (IPv4 part)
            "(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 12\n(002) ldb [23]\n(003) jeq #0x6 jt 4 jf 12\n\
             (004) ldh [20]\n(005) jset #0x1fff jt 12 jf 6\n(006) ldxb 4*([14]&0xf)\n(007) ldh [x + 14]\n\
             (008) jeq #0x50 jt 11 jf 9\n(009) ldh [x + 16]\n(010) jeq #0x50 jt 11 jf 12\n(011) ret #262144\n(012) ret #0\n",
            // a load whose value is never used still aborts
            "(000) ld [60]\n(001) ld #1\n(002) jeq #1 jt 3 jf 4\n(003) ret #1\n(004) ret #0\n",
            // scratch memory, arithmetic, division by X
            "(000) ldb [23]\n(001) st M[3]\n(002) ldx M[3]\n(003) ld #60\n(004) div x\n(005) jgt #5 jt 6 jf 7\n(006) ret #9\n(007) ret #0\n",
            // ja and a test on X
            "(000) ldxb 4*([14]&0xf)\n(001) ja 3\n(002) ret #0\n(003) txa\n(004) jeq #20 jt 5 jf 6\n(005) ret #3\n(006) ret #0\n",
        ];
        for text in progs {
            let prog = parse_program(text).unwrap();
            let f = lift(&prog).unwrap();
            for p in packets() {
                assert_eq!(
                    f.run(&p, p.len() as u32),
                    run(&prog, &p, p.len() as u32),
                    "{text} on {} bytes",
                    p.len()
                );
            }
        }
    }

    #[test]
    fn what_cannot_be_lifted() {
        let ret_a = parse_program("(000) ld #1\n(001) ret a\n").unwrap();
        assert_eq!(lift(&ret_a).unwrap_err(), LiftError::ReturnsRegister);
        let two =
            parse_program("(000) ld #1\n(001) jeq #1 jt 2 jf 3\n(002) ret #1\n(003) ret #2\n")
                .unwrap();
        assert_eq!(lift(&two).unwrap_err(), LiftError::SeveralAcceptValues);
    }
}
