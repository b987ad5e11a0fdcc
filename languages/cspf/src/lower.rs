//! Lowering into sluice's IR by symbolic execution of the stack.
//!
//! There are no jumps, so the stack's shape is known at every instruction
//! and each word on it becomes an IR value (or, for the results of
//! comparisons, a predicate). Short-circuit operations become control flow:
//! `cand` and `cnor` a conjunction with the rest of the program, `cor` and
//! `cnand` a disjunction.
//!
//! Aborts: the interpreter rejects as soon as it reads a word past the
//! packet, whatever happens later. In the IR a load aborts only where it is
//! evaluated, so every exit (a short-circuit that returns, or the end) first
//! evaluates each load executed since the previous exit that its own test
//! does not evaluate unconditionally: a *guard* `load >= 0`, always true
//! when the load is in bounds. Between exits the IR may evaluate loads in
//! another order than the interpreter, which does not change any verdict.
//!
//! Words are 16 bits and the IR's values 32: results of `add`, `sub` and
//! `lsh` are masked with `0xffff` unless the value's range shows the mask
//! is not needed. A comparison's result used as a number becomes 0/1 by
//! arithmetic (`((a ^ b) - 1) >> 31` is `a == b` for 16-bit `a`, `b`).

use crate::{Action, Insn, Op};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};

/// A word on the symbolic stack.
#[derive(Clone, Debug)]
enum Sym {
    V(Val),
    B(Pred),
}

/// One short-circuit exit: its guards, the condition under which it
/// returns, and the verdict it returns.
struct Exit {
    guards: Vec<Pred>,
    when: Pred,
    verdict: bool,
}

/// The IR predicate of a program: true exactly when the interpreter
/// accepts, on every packet (an out-of-packet read aborts the IR, which
/// rejects, where the interpreter rejects).
///
/// ```
/// use sluice_cspf::{assemble, lower};
/// let p = assemble("pushword P[6] pushlit | cand #0x0800 pushword P[11] push00ff | and pushlit | eq #17").unwrap();
/// let ir = lower(p.insns());
/// let mut pkt = [0u8; 24];
/// pkt[12] = 8;
/// pkt[23] = 17;
/// assert_eq!(sluice_ir::eval_pred(&ir, &pkt, 24), Ok(true));
/// assert!(sluice_ir::eval_pred(&ir, &pkt[..22], 22).is_err()); // word 11 missing: abort, i.e. reject
/// ```
pub fn lower(insns: &[Insn]) -> Pred {
    let mut stack: Vec<Sym> = vec![Sym::V(Val::Const(1))];
    let mut pending: Vec<Val> = Vec::new();
    let mut exits: Vec<Exit> = Vec::new();
    let mut last = None;
    for i in insns {
        match step(i, &mut stack, &mut pending, &mut exits) {
            Some(()) => {}
            None => {
                // The interpreter rejects here (stack underflow or overflow
                // in an unverified program).
                last = Some(Pred::and(
                    guards(&pending, &[])
                        .into_iter()
                        .chain([Pred::False])
                        .collect(),
                ));
                break;
            }
        }
    }
    let mut rest = last.unwrap_or_else(|| match stack.last() {
        Some(top) => {
            let p = to_pred(top.clone());
            let mut v = guards(&pending, &uncond_loads(&p));
            v.push(p);
            Pred::and(v)
        }
        None => Pred::False,
    });
    for e in exits.into_iter().rev() {
        let mut v = e.guards;
        if e.verdict {
            v.push(e.when);
            rest = Pred::or(vec![Pred::and(v), rest]);
        } else {
            v.push(Pred::not(e.when));
            v.push(rest);
            rest = Pred::and(v);
        }
    }
    rest
}

/// One instruction; `None` where the interpreter would reject whatever the
/// packet.
fn step(
    i: &Insn,
    stack: &mut Vec<Sym>,
    pending: &mut Vec<Val>,
    exits: &mut Vec<Exit>,
) -> Option<()> {
    let arg = match i.action {
        Action::NoPush => stack.pop()?,
        Action::PushWord(n) => {
            let l = Val::load_abs(2 * n as u32, Size::Half);
            pending.push(l.clone());
            Sym::V(l)
        }
        Action::PushInd => {
            let idx = to_val(stack.pop()?);
            let l = word_at(idx);
            pending.push(l.clone());
            Sym::V(l)
        }
        Action::PushStk(n) => stack.get(stack.len().checked_sub(1 + n as usize)?)?.clone(),
        a => Sym::V(Val::Const(a.constant().unwrap_or(0) as u32)),
    };
    match i.op {
        Op::Nop => {
            if stack.len() >= 256 {
                return None;
            }
            stack.push(arg);
        }
        op => {
            let top = stack.pop()?;
            if let Some((on_equal, verdict)) = op.exit() {
                let eq = sym_eq(top, arg);
                let when = if on_equal { eq } else { Pred::not(eq) };
                let g = guards(pending, &uncond_loads(&when));
                pending.clear();
                exits.push(Exit {
                    guards: g,
                    when,
                    verdict,
                });
            } else {
                stack.push(combine(op, top, arg));
            }
        }
    }
    Some(())
}

/// `2 v` for a 16-bit `v` (no wrap-around): `(x >> a) << 1` is `x >> (a - 1)`
/// when the low `a` bits of `x` are known to be 0, as in the header-length
/// idiom `(word & 0x0f00) >> 7` of MPF's Appendix C.
fn double(v: Val) -> Val {
    if let Val::Bin(BinOp::Shr, x, a) = &v {
        if let Val::Const(a @ 1..=31) = **a {
            let low = (1u32 << a) - 1;
            let clear = match &**x {
                Val::Bin(BinOp::And, _, m) => matches!(**m, Val::Const(m) if m & low == 0),
                _ => false,
            };
            if clear {
                return Val::bin(BinOp::Shr, (**x).clone(), Val::Const(a - 1));
            }
        }
    }
    Val::bin(BinOp::Shl, v, Val::Const(1))
}

/// Packet word number `idx` (a 16-bit value): bytes `2 idx`, `2 idx + 1`.
fn word_at(idx: Val) -> Val {
    match idx {
        Val::Const(k) => Val::load_abs(2 * k, Size::Half),
        Val::Bin(BinOp::Add, x, c) if matches!(*c, Val::Const(_)) => {
            // idx = x + k without a mask: the range analysis showed x + k
            // stays within 16 bits, so 2 idx = 2 x + 2 k without wrapping.
            let Val::Const(k) = *c else { unreachable!() };
            Val::Load {
                base: Box::new(double(*x)),
                offset: 2 * k,
                size: Size::Half,
            }
        }
        idx => Val::Load {
            base: Box::new(double(idx)),
            offset: 0,
            size: Size::Half,
        },
    }
}

/// `v` reduced to 16 bits, without the mask when it cannot matter.
fn mask16(v: Val) -> Val {
    if v.upper_bound() <= 0xffff {
        v
    } else {
        Val::bin(BinOp::And, v, Val::Const(0xffff))
    }
}

/// A 0/1 value for a predicate over 16-bit values.
fn enc(p: Pred) -> Val {
    let sign = |v: Val| Val::bin(BinOp::Shr, v, Val::Const(31));
    match p {
        Pred::True => Val::Const(1),
        Pred::False => Val::Const(0),
        Pred::Cmp { op, lhs, rhs } => match op {
            // a == b: (a ^ b) - 1 wraps exactly when a ^ b is 0.
            CmpOp::Eq => sign(Val::bin(
                BinOp::Sub,
                Val::bin(BinOp::Xor, lhs, rhs),
                Val::Const(1),
            )),
            // a > b: b - a is negative.
            CmpOp::Gt => sign(Val::bin(BinOp::Sub, rhs, lhs)),
            // a >= b: b - a - 1 is negative.
            CmpOp::Ge => sign(Val::bin(
                BinOp::Sub,
                Val::bin(BinOp::Sub, rhs, lhs),
                Val::Const(1),
            )),
            // a & b != 0: its negation is negative.
            CmpOp::Set => sign(Val::Neg(Box::new(Val::bin(BinOp::And, lhs, rhs)))),
        },
        Pred::Not(q) => Val::bin(BinOp::Xor, enc(*q), Val::Const(1)),
        Pred::And(ps) => ps
            .into_iter()
            .map(enc)
            .reduce(|a, b| Val::bin(BinOp::And, a, b))
            .unwrap_or(Val::Const(1)),
        Pred::Or(ps) => ps
            .into_iter()
            .map(enc)
            .reduce(|a, b| Val::bin(BinOp::Or, a, b))
            .unwrap_or(Val::Const(0)),
        Pred::In { val, keys } => keys
            .iter()
            .map(|&k| enc(Pred::eq(val.clone(), k)))
            .reduce(|a, b| Val::bin(BinOp::Or, a, b))
            .unwrap_or(Val::Const(0)),
        // Never produced by the lowering.
        Pred::ProtoChain { .. } => Val::Const(0),
    }
}

fn to_val(s: Sym) -> Val {
    match s {
        Sym::V(v) => v,
        Sym::B(p) => enc(p),
    }
}

fn to_pred(s: Sym) -> Pred {
    match s {
        Sym::B(p) => p,
        Sym::V(v) => Pred::not(Pred::eq(v, 0)),
    }
}

/// The stack word equals the argument.
fn sym_eq(a: Sym, b: Sym) -> Pred {
    match (a, b) {
        (Sym::B(p), Sym::V(Val::Const(k))) | (Sym::V(Val::Const(k)), Sym::B(p)) => match k {
            1 => p,
            0 => Pred::not(p),
            _ => Pred::False,
        },
        (a, b) => Pred::cmp(CmpOp::Eq, to_val(a), to_val(b)),
    }
}

fn combine(op: Op, top: Sym, arg: Sym) -> Sym {
    let cmp = |op, a: Sym, b: Sym| Sym::B(Pred::cmp(op, to_val(a), to_val(b)));
    match op {
        Op::Eq => Sym::B(sym_eq(top, arg)),
        Op::Neq => Sym::B(Pred::not(sym_eq(top, arg))),
        Op::Lt => cmp(CmpOp::Gt, arg, top),
        Op::Le => cmp(CmpOp::Ge, arg, top),
        Op::Gt => cmp(CmpOp::Gt, top, arg),
        Op::Ge => cmp(CmpOp::Ge, top, arg),
        Op::And => match (top, arg) {
            (Sym::B(p), Sym::B(q)) => Sym::B(Pred::and(vec![p, q])),
            (a, b) => Sym::V(Val::bin(BinOp::And, to_val(a), to_val(b))),
        },
        Op::Or => match (top, arg) {
            (Sym::B(p), Sym::B(q)) => Sym::B(Pred::or(vec![p, q])),
            (a, b) => Sym::V(Val::bin(BinOp::Or, to_val(a), to_val(b))),
        },
        Op::Xor => Sym::V(Val::bin(BinOp::Xor, to_val(top), to_val(arg))),
        Op::Rsh => Sym::V(Val::bin(BinOp::Shr, to_val(top), to_val(arg))),
        Op::Lsh => Sym::V(mask16(Val::bin(BinOp::Shl, to_val(top), to_val(arg)))),
        Op::Add => Sym::V(mask16(match to_val(arg) {
            Val::Const(k) => Val::plus(to_val(top), k),
            b => Val::bin(BinOp::Add, to_val(top), b),
        })),
        Op::Sub => Sym::V(mask16(Val::bin(BinOp::Sub, to_val(top), to_val(arg)))),
        // Handled by the caller.
        Op::Nop | Op::Cor | Op::Cand | Op::Cnor | Op::Cnand => arg,
    }
}

/// Every load in a value (the loads its evaluation performs).
pub(crate) fn loads(v: &Val, out: &mut Vec<Val>) {
    match v {
        Val::Load { base, .. } => {
            out.push(v.clone());
            loads(base, out);
        }
        Val::Bin(_, a, b) => {
            loads(a, out);
            loads(b, out);
        }
        Val::Neg(a) => loads(a, out),
        // (CSPF makes no shared values.)
        Val::Shared(s) => loads(s.val(), out),
        Val::Const(_) | Val::Len => {}
    }
}

/// The loads a predicate's evaluation always performs.
fn uncond_loads(p: &Pred) -> Vec<Val> {
    let mut out = Vec::new();
    fn walk(p: &Pred, out: &mut Vec<Val>) {
        match p {
            Pred::Cmp { lhs, rhs, .. } => {
                loads(lhs, out);
                loads(rhs, out);
            }
            Pred::Not(q) => walk(q, out),
            Pred::And(ps) | Pred::Or(ps) => {
                if let Some(q) = ps.first() {
                    walk(q, out);
                }
            }
            Pred::In { val, .. } => loads(val, out),
            Pred::ProtoChain { .. } | Pred::True | Pred::False => {}
        }
    }
    walk(p, &mut out);
    out
}

/// A load's base and the end of the bytes it reads.
fn reach(l: &Val) -> Option<(&Val, u64)> {
    match l {
        Val::Load { base, offset, size } => Some((base, *offset as u64 + size.bytes() as u64)),
        _ => None,
    }
}

/// Guards for the loads in `pending` that the loads in `done` do not
/// already check: for each base, one check of the farthest byte.
fn guards(pending: &[Val], done: &[Val]) -> Vec<Pred> {
    let mut need: Vec<Val> = Vec::new();
    for l in pending {
        let Some((base, end)) = reach(l) else {
            continue;
        };
        let covered = |others: &[Val]| {
            others
                .iter()
                .filter_map(reach)
                .any(|(b, e)| b == base && e >= end)
        };
        if covered(done) || covered(&need) {
            continue;
        }
        need.retain(|n| !matches!(reach(n), Some((b, e)) if b == base && e <= end));
        need.push(l.clone());
    }
    need.sort();
    need.into_iter()
        .map(|l| Pred::Cmp {
            op: CmpOp::Ge,
            lhs: l,
            rhs: Val::Const(0),
        })
        .collect()
}
