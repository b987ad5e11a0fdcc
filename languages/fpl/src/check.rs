//! Resolution and compile-time resource checks: syntax tree to [`crate::ir`].
//!
//! - registers are named by constants below [`MAX_REGS`];
//! - every MEM index gets a range (interval analysis); a constant index, or
//!   one whose whole range lies outside the MBuf, does not compile; an index
//!   proven inside needs no run-time check; any other is checked at run time;
//! - EXTERN input and output ranges (the function's declared sizes at
//!   constant offsets) must lie inside the MBuf;
//! - every FOR must count a register towards a limit by a constant step;
//!   its trip bound comes from the ranges of the start and the limit, or is
//!   the MBuf size in words when the limit is unknown (a register or MBuf
//!   word: such loops walk arrays kept in the MBuf, as Figure 7 does);
//!   inside a loop with a known bound the register's range is known too
//!   (the body cannot assign it), so `MEM[R[i]]` there can be proven;
//! - the work of one run, counted in expression nodes with loops multiplied
//!   by their trip bounds, must not exceed [`crate::Limits::max_work`].

use crate::externs::{ExternDef, Externs};
use crate::ir::{BinOp, Expr, Stmt, UnOp};
use crate::parse::{AExpr, AKind, ALval, AProgram, AStmt, Pos};
use crate::{Error, Limits};

/// Registers `R[0]` to `R[MAX_REGS - 1]`.
pub const MAX_REGS: u32 = 32;
/// The MBuf size given to a program without a declared size that indexes
/// MEM with a value only checked at run time (1 KiB).
pub const DEFAULT_MEM_WORDS: usize = 256;
/// The largest MBuf, in words (64 MiB).
pub const MAX_MEM_WORDS: usize = 1 << 24;
/// A proven index range larger than this does not grow an inferred MBuf
/// (the index is checked at run time instead).
const MAX_INFERRED_WORDS: u64 = 1 << 20;
/// The most packet bytes one HASH reads.
pub const MAX_HASH_LEN: u32 = 1024;

/// The checked program, ready to wrap in [`crate::Program`].
pub(crate) struct Checked {
    pub body: Vec<Stmt>,
    pub mem_size: usize,
    pub regs: usize,
    pub externs: Vec<ExternDef>,
    pub work: u64,
}

/// An inclusive range of values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Range {
    pub lo: u64,
    pub hi: u64,
}

const FULL: Range = Range {
    lo: 0,
    hi: u32::MAX as u64,
};

fn r(lo: u64, hi: u64) -> Range {
    if hi > u32::MAX as u64 {
        FULL
    } else {
        Range { lo, hi }
    }
}

/// Ranges known for registers: loop variables inside their loops' bodies.
type Env = [(u16, Range)];

/// The values `e` can take (a superset), with registers in `env` limited.
fn range_in(e: &Expr, env: &Env) -> Range {
    match e {
        Expr::Const(c) => r(*c as u64, *c as u64),
        Expr::Reg(n) => env
            .iter()
            .rev()
            .find(|(v, _)| v == n)
            .map_or(FULL, |(_, rg)| *rg),
        Expr::Mem { .. } | Expr::Extern { .. } => FULL,
        Expr::Pkt { width, .. } => r(0, (1u64 << (width.bytes() * 8)) - 1),
        Expr::Field { bits, .. } => r(0, (1u64 << bits) - 1),
        Expr::Hash { size, .. } => r(0, *size as u64 - 1),
        Expr::Un(UnOp::Not, _) => r(0, 1),
        Expr::Un(..) => FULL,
        Expr::Bin(op, a, b) => {
            let (a, b) = (range_in(a, env), range_in(b, env));
            match op {
                BinOp::Eq
                | BinOp::Ne
                | BinOp::Lt
                | BinOp::Le
                | BinOp::Gt
                | BinOp::Ge
                | BinOp::And
                | BinOp::Or => r(0, 1),
                BinOp::Add => r(a.lo + b.lo, a.hi + b.hi),
                BinOp::Sub if a.lo >= b.hi => r(a.lo - b.hi, a.hi - b.lo),
                BinOp::Sub => FULL,
                BinOp::Mul => match a.hi.checked_mul(b.hi) {
                    Some(hi) => r(a.lo * b.lo, hi),
                    None => FULL,
                },
                // Division by zero aborts, so only non-zero divisors count.
                BinOp::Div => r(a.lo / b.hi.max(1), a.hi / b.lo.max(1)),
                BinOp::Mod => r(0, a.hi.min(b.hi.saturating_sub(1))),
                BinOp::Shr if b.hi < 32 => r(a.lo >> b.hi, a.hi >> b.lo),
                BinOp::Shr => r(0, a.hi),
                BinOp::Shl if b.hi < 32 => match a.hi.checked_shl(b.hi as u32) {
                    Some(hi) if hi <= u32::MAX as u64 => r(0, hi),
                    _ => FULL,
                },
                BinOp::Shl => FULL,
                BinOp::BitAnd => r(0, a.hi.min(b.hi)),
                BinOp::BitOr | BinOp::BitXor => {
                    let m = a.hi.max(b.hi);
                    r(
                        0,
                        m.checked_next_power_of_two().map_or(u64::MAX, |p| {
                            if p == m {
                                2 * p - 1
                            } else {
                                p - 1
                            }
                        }),
                    )
                }
            }
        }
    }
}

/// The value of a constant expression, if it is one.
fn const_of(e: &Expr) -> Option<u32> {
    match e {
        Expr::Const(c) => Some(*c),
        Expr::Un(op, a) => Some(op.apply(const_of(a)?)),
        Expr::Bin(op, a, b) => op.apply(const_of(a)?, const_of(b)?),
        _ => None,
    }
}

struct Cx<'a> {
    externs: &'a Externs,
    used: Vec<ExternDef>,
    /// MEM index ranges, with where they are.
    mem_uses: Vec<(Pos, Range)>,
    /// Word ranges EXTERN calls touch: (position, start, end, what).
    extern_uses: Vec<(Pos, u64, u64, String)>,
    regs: u32,
    loops: usize,
    /// Per FOR in pre-order: its position.
    for_pos: Vec<Pos>,
    /// Per FOR in pre-order: its register and the register's range inside
    /// the body, when the loop's bound is known.
    loop_vars: Vec<(u16, Option<Range>)>,
    /// Loop variables in scope with their ranges.
    env: Vec<(u16, Range)>,
}

/// Check and lower a parsed program.
pub(crate) fn check(p: AProgram, externs: &Externs, limits: &Limits) -> Result<Checked, Error> {
    let mut cx = Cx {
        externs,
        used: Vec::new(),
        mem_uses: Vec::new(),
        extern_uses: Vec::new(),
        regs: 0,
        loops: 0,
        for_pos: Vec::new(),
        loop_vars: Vec::new(),
        env: Vec::new(),
    };
    let mut body = cx.stmts(&p.body)?;
    // The MBuf size: the caller's, the program's declaration, or inferred.
    let declared = match (limits.mem_words, p.mem) {
        (Some(n), _) => Some((n, Pos { line: 1, col: 1 })),
        (None, Some((n, pos))) => Some((n as usize, pos)),
        (None, None) => None,
    };
    let mem_size = match declared {
        Some((n, pos)) => {
            if n > MAX_MEM_WORDS {
                return Err(pos.err(format!(
                    "an MBuf of {n} words is larger than the limit of {MAX_MEM_WORDS}"
                )));
            }
            n
        }
        None => {
            let mut need = 0u64;
            let mut runtime = false;
            for (_, rg) in &cx.mem_uses {
                if rg.hi < MAX_INFERRED_WORDS {
                    need = need.max(rg.hi + 1);
                } else {
                    runtime = true;
                    if rg.lo < MAX_INFERRED_WORDS {
                        need = need.max(rg.lo + 1);
                    }
                }
            }
            for (_, _, end, _) in &cx.extern_uses {
                need = need.max(*end);
            }
            if runtime {
                need = need.max(DEFAULT_MEM_WORDS as u64);
            }
            if need > MAX_MEM_WORDS as u64 {
                let (pos, ..) = cx.extern_uses.iter().max_by_key(|u| u.2).expect("extern");
                return Err(pos.err(format!(
                    "needs an MBuf of {need} words, more than the limit of {MAX_MEM_WORDS}"
                )));
            }
            need as usize
        }
    };
    for (pos, rg) in &cx.mem_uses {
        if rg.lo >= mem_size as u64 {
            return Err(pos.err(if rg.lo == rg.hi {
                format!("MEM[{}] is outside the MBuf of {mem_size} words", rg.lo)
            } else {
                format!(
                    "this MEM index is at least {}, outside the MBuf of {mem_size} words",
                    rg.lo
                )
            }));
        }
    }
    for (pos, start, end, what) in &cx.extern_uses {
        if *end > mem_size as u64 {
            return Err(pos.err(format!(
                "{what} words {start}..{end} are outside the MBuf of {mem_size} words"
            )));
        }
    }
    let mut k = 0;
    finish(
        &mut body,
        mem_size as u64,
        &mut k,
        &cx.loop_vars,
        &mut Vec::new(),
    );
    let mut k = 0;
    let work = work_of(&body, &cx.for_pos, &mut k, limits.max_work)?;
    if work > limits.max_work {
        return Err(Pos { line: 1, col: 1 }.err(format!(
            "a run may take {work} steps, more than the limit of {}",
            limits.max_work
        )));
    }
    Ok(Checked {
        body,
        mem_size,
        regs: cx.regs as usize,
        externs: cx.used,
        work,
    })
}

/// Trip bound placeholder for a loop whose limit is unknown; replaced by
/// the MBuf size in [`finish`].
const UNKNOWN_TRIPS: u32 = u32::MAX;

/// Set each MEM access's `checked` flag and each unknown loop bound, now
/// that the MBuf size is known.
fn finish(
    body: &mut [Stmt],
    mem: u64,
    k: &mut usize,
    loop_vars: &[(u16, Option<Range>)],
    env: &mut Vec<(u16, Range)>,
) {
    fn expr(e: &mut Expr, mem: u64, env: &Env) {
        match e {
            Expr::Const(_) | Expr::Reg(_) | Expr::Extern { .. } => {}
            Expr::Mem { index, checked } => {
                expr(index, mem, env);
                *checked = range_in(index, env).hi >= mem;
            }
            Expr::Pkt { offset, .. } => expr(offset, mem, env),
            Expr::Field { value, index, .. } => {
                expr(value, mem, env);
                expr(index, mem, env);
            }
            Expr::Un(_, a) => expr(a, mem, env),
            Expr::Bin(_, a, b) => {
                expr(a, mem, env);
                expr(b, mem, env);
            }
            Expr::Hash { start, .. } => expr(start, mem, env),
        }
    }
    for s in body {
        match s {
            Stmt::SetReg { value, .. } | Stmt::Eval(value) | Stmt::Return(value) => {
                expr(value, mem, env)
            }
            Stmt::SetMem {
                index,
                checked,
                value,
                ..
            } => {
                expr(index, mem, env);
                expr(value, mem, env);
                *checked = range_in(index, env).hi >= mem;
            }
            Stmt::If { cond, then, els } => {
                expr(cond, mem, env);
                finish(then, mem, k, loop_vars, env);
                finish(els, mem, k, loop_vars, env);
            }
            Stmt::Loop {
                init,
                cond,
                update,
                body,
                max_trips,
            } => {
                let (var, vr) = loop_vars[*k];
                *k += 1;
                if *max_trips == UNKNOWN_TRIPS {
                    *max_trips = mem.min(UNKNOWN_TRIPS as u64 - 1) as u32;
                }
                finish(std::slice::from_mut(init), mem, k, loop_vars, env);
                expr(cond, mem, env);
                finish(std::slice::from_mut(update), mem, k, loop_vars, env);
                if let Some(vr) = vr {
                    env.push((var, vr));
                }
                finish(body, mem, k, loop_vars, env);
                if vr.is_some() {
                    env.pop();
                }
            }
            Stmt::Break => {}
        }
    }
}

fn expr_work(e: &Expr) -> u64 {
    1 + match e {
        Expr::Const(_) | Expr::Reg(_) => 0,
        Expr::Mem { index, .. } => expr_work(index),
        Expr::Pkt { offset, .. } => expr_work(offset),
        Expr::Field { value, index, .. } => expr_work(value) + expr_work(index),
        Expr::Un(_, a) => expr_work(a),
        Expr::Bin(_, a, b) => expr_work(a) + expr_work(b),
        Expr::Hash { start, len, .. } => expr_work(start) + *len as u64,
        // The function's own work is not known; count the words it moves.
        Expr::Extern { .. } => 16,
    }
}

/// The work of `body` (saturating); the first FOR whose own work is over
/// `max` is reported where it is.
fn work_of(body: &[Stmt], for_pos: &[Pos], k: &mut usize, max: u64) -> Result<u64, Error> {
    let mut w = 0u64;
    for s in body {
        let sw = match s {
            Stmt::SetReg { value, .. } | Stmt::Eval(value) | Stmt::Return(value) => {
                1 + expr_work(value)
            }
            Stmt::SetMem { index, value, .. } => 1 + expr_work(index) + expr_work(value),
            Stmt::If { cond, then, els } => {
                let c = expr_work(cond);
                let t = work_of(then, for_pos, k, max)?;
                let e = work_of(els, for_pos, k, max)?;
                c + t.max(e)
            }
            Stmt::Loop {
                init,
                cond,
                update,
                body,
                max_trips,
            } => {
                let pos = for_pos[*k];
                *k += 1;
                let n = *max_trips as u64;
                let per = work_of(std::slice::from_ref(update), for_pos, k, max)?
                    .saturating_add(work_of(body, for_pos, k, max)?)
                    .saturating_add(expr_work(cond));
                let lw = work_of(std::slice::from_ref(init), for_pos, k, max)?
                    .saturating_add(expr_work(cond))
                    .saturating_add(n.saturating_mul(per));
                if lw > max {
                    return Err(pos.err(format!(
                        "this loop may take {lw} steps ({n} iterations), more than the limit of {max}"
                    )));
                }
                lw
            }
            Stmt::Break => 1,
        };
        w = w.saturating_add(sw);
    }
    Ok(w)
}

impl Cx<'_> {
    fn stmts(&mut self, body: &[AStmt]) -> Result<Vec<Stmt>, Error> {
        body.iter().map(|s| self.stmt(s)).collect()
    }

    fn reg(&mut self, idx: &AExpr) -> Result<u16, Error> {
        let e = self.expr(idx)?;
        let Some(n) = const_of(&e) else {
            return Err(idx
                .pos
                .err("a register number must be a constant: R[0] to R[31]"));
        };
        if n >= MAX_REGS {
            return Err(idx.pos.err(format!(
                "R[{n}] does not exist: registers are R[0] to R[{}]",
                MAX_REGS - 1
            )));
        }
        self.regs = self.regs.max(n + 1);
        Ok(n as u16)
    }

    fn mem_index(&mut self, idx: &AExpr) -> Result<Expr, Error> {
        let e = self.expr(idx)?;
        self.mem_uses.push((idx.pos, range_in(&e, &self.env)));
        Ok(e)
    }

    fn stmt(&mut self, s: &AStmt) -> Result<Stmt, Error> {
        Ok(match s {
            AStmt::Assign { lv, op, value, .. } => match lv {
                ALval::Reg(i) => {
                    let reg = self.reg(i)?;
                    Stmt::SetReg {
                        reg,
                        op: *op,
                        value: self.expr(value)?,
                    }
                }
                ALval::Mem(i) => {
                    let index = self.mem_index(i)?;
                    Stmt::SetMem {
                        index,
                        checked: true,
                        op: *op,
                        value: self.expr(value)?,
                    }
                }
            },
            AStmt::Eval(e) => Stmt::Eval(self.expr(e)?),
            AStmt::Return(e) => Stmt::Return(self.expr(e)?),
            AStmt::Break(pos) => {
                if self.loops == 0 {
                    return Err(pos.err("BREAK outside a FOR loop"));
                }
                Stmt::Break
            }
            AStmt::If { cond, then, els } => Stmt::If {
                cond: self.expr(cond)?,
                then: self.stmts(then)?,
                els: self.stmts(els)?,
            },
            AStmt::For {
                pos,
                init,
                cond,
                update,
                body,
            } => {
                self.for_pos.push(*pos);
                let slot = self.loop_vars.len();
                self.loop_vars.push((0, None));
                let bad_form = |p: Pos| {
                    p.err("a FOR loop counts a register to a limit: FOR (R[i] = start; R[i] < limit; R[i]++) (also <=, >, >=, !=, +=, -=, --, with a constant step)")
                };
                // init: R[i] = start
                let AStmt::Assign {
                    lv: ALval::Reg(_),
                    op: None,
                    ..
                } = &**init
                else {
                    return Err(bad_form(*pos));
                };
                let init = self.stmt(init)?;
                let Stmt::SetReg {
                    reg: var,
                    value: start_e,
                    ..
                } = &init
                else {
                    unreachable!("a register assignment lowers to SetReg")
                };
                let (var, start_e) = (*var, start_e.clone());
                // update: R[i] += c / -= c
                let AStmt::Assign {
                    pos: upos,
                    lv: ALval::Reg(_),
                    op: Some(uop @ (BinOp::Add | BinOp::Sub)),
                    value: step,
                } = &**update
                else {
                    return Err(bad_form(*pos));
                };
                let update = self.stmt(update)?;
                let Stmt::SetReg {
                    reg: uvar,
                    value: step_e,
                    ..
                } = &update
                else {
                    unreachable!("a register assignment lowers to SetReg")
                };
                if *uvar != var {
                    return Err(
                        upos.err(format!("the step must change the loop's register R[{var}]"))
                    );
                }
                let Some(step_c) = const_of(step_e).filter(|c| *c > 0) else {
                    return Err(step.pos.err("the loop's step must be a constant above 0"));
                };
                // cond: R[i] op limit, or limit op R[i]
                let cond_e = self.expr(cond)?;
                let (cop, limit) = match &cond_e {
                    Expr::Bin(op, a, b) if **a == Expr::Reg(var) => (*op, (**b).clone()),
                    Expr::Bin(op, a, b) if **b == Expr::Reg(var) => {
                        let flipped = match op {
                            BinOp::Lt => BinOp::Gt,
                            BinOp::Le => BinOp::Ge,
                            BinOp::Gt => BinOp::Lt,
                            BinOp::Ge => BinOp::Le,
                            o => *o,
                        };
                        (flipped, (**a).clone())
                    }
                    _ => return Err(bad_form(cond.pos)),
                };
                if !matches!(
                    cop,
                    BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Ne
                ) {
                    return Err(bad_form(cond.pos));
                }
                if let Some(p) = assigns(body, var) {
                    return Err(p.err(format!(
                        "R[{var}] counts the loop at line {}, column {}: it cannot be assigned inside it",
                        pos.line, pos.col
                    )));
                }
                let (max_trips, var_range) = bounds(
                    range_in(&start_e, &self.env),
                    range_in(&limit, &self.env),
                    cop,
                    *uop == BinOp::Add,
                    step_c as u64,
                );
                self.loop_vars[slot] = (var, var_range);
                self.loops += 1;
                if let Some(vr) = var_range {
                    self.env.push((var, vr));
                }
                let body = self.stmts(body);
                if var_range.is_some() {
                    self.env.pop();
                }
                self.loops -= 1;
                let body = body?;
                Stmt::Loop {
                    init: Box::new(init),
                    cond: cond_e,
                    update: Box::new(update),
                    body,
                    max_trips,
                }
            }
        })
    }

    fn expr(&mut self, e: &AExpr) -> Result<Expr, Error> {
        Ok(match &e.kind {
            AKind::Num(n) => Expr::Const(*n),
            AKind::Reg(i) => Expr::Reg(self.reg(i)?),
            AKind::Mem(i) => Expr::Mem {
                index: Box::new(self.mem_index(i)?),
                checked: true,
            },
            AKind::Pkt(w, off) => Expr::Pkt {
                offset: Box::new(self.expr(off)?),
                width: *w,
            },
            AKind::Field {
                value,
                total,
                bits,
                index,
            } => {
                let idx = self.expr(index)?;
                let count = total / bits;
                if let Some(m) = const_of(&idx) {
                    if m >= count {
                        return Err(index.pos.err(format!(
                            "part {m} of a {total}-bit value does not exist: U{bits}[0] to U{bits}[{}]",
                            count - 1
                        )));
                    }
                }
                Expr::Field {
                    value: Box::new(self.expr(value)?),
                    total: *total,
                    bits: *bits,
                    index: Box::new(idx),
                }
            }
            AKind::Un(op, a) => Expr::Un(*op, Box::new(self.expr(a)?)),
            AKind::Bin(op, a, b) => {
                Expr::Bin(*op, Box::new(self.expr(a)?), Box::new(self.expr(b)?))
            }
            AKind::Hash(start, len, size) => {
                let start_e = self.expr(start)?;
                let len_e = self.expr(len)?;
                let size_e = self.expr(size)?;
                let Some(len_c) = const_of(&len_e) else {
                    return Err(len.pos.err("HASH's length must be a constant"));
                };
                if len_c > MAX_HASH_LEN {
                    return Err(len.pos.err(format!(
                        "HASH reads at most {MAX_HASH_LEN} bytes, not {len_c}"
                    )));
                }
                let Some(size_c) = const_of(&size_e).filter(|s| *s > 0) else {
                    return Err(size.pos.err("HASH's table size must be a constant above 0"));
                };
                Expr::Hash {
                    start: Box::new(start_e),
                    len: len_c,
                    size: size_c,
                }
            }
            AKind::Extern(name, input, output) => {
                let Some(def) = self.externs.get(name) else {
                    return Err(e
                        .pos
                        .err(format!("no external function `{name}` is registered")));
                };
                let mut offs = [0u32; 2];
                for (k, a) in [input, output].into_iter().enumerate() {
                    let v = self.expr(a)?;
                    let Some(c) = const_of(&v) else {
                        return Err(a.pos.err("EXTERN's MBuf offsets must be constants"));
                    };
                    offs[k] = c;
                }
                let func = match self.used.iter().position(|d| d.name == def.name) {
                    Some(i) => i,
                    None => {
                        self.used.push(def.clone());
                        self.used.len() - 1
                    }
                };
                for (p, start, len, what) in [
                    (input.pos, offs[0], def.input, "input"),
                    (output.pos, offs[1], def.output, "output"),
                ] {
                    if len > 0 {
                        self.extern_uses.push((
                            p,
                            start as u64,
                            start as u64 + len as u64,
                            format!("`{name}`'s {what} ({len} words)"),
                        ));
                    }
                }
                Expr::Extern {
                    func,
                    input: offs[0],
                    output: offs[1],
                }
            }
        })
    }
}

/// Where `body` assigns register `var`, if it does.
fn assigns(body: &[AStmt], var: u16) -> Option<Pos> {
    let is_var = |e: &AExpr| match &e.kind {
        AKind::Num(n) => *n == var as u32,
        _ => false,
    };
    for s in body {
        match s {
            AStmt::Assign {
                pos,
                lv: ALval::Reg(i),
                ..
            } if is_var(i) || !matches!(i.kind, AKind::Num(_)) => return Some(*pos),
            AStmt::If { then, els, .. } => {
                if let Some(p) = assigns(then, var).or_else(|| assigns(els, var)) {
                    return Some(p);
                }
            }
            AStmt::For {
                init, update, body, ..
            } => {
                let inner = [(**init).clone(), (**update).clone()];
                if let Some(p) = assigns(&inner, var).or_else(|| assigns(body, var)) {
                    return Some(p);
                }
            }
            _ => {}
        }
    }
    None
}

/// The most iterations of a loop whose register starts in `a`, is compared
/// with a limit in `b` by `op` and steps by `step` up or down, or
/// [`UNKNOWN_TRIPS`] if the ranges do not bound it; and when they do, the
/// register's range inside the loop's body (where the test has just held
/// and, as the ranges rule out wrap-around, the register has only moved
/// from its start towards the limit).
fn bounds(a: Range, b: Range, op: BinOp, up: bool, step: u64) -> (u32, Option<Range>) {
    let n = trips(a, b, op, up, step);
    if n == UNKNOWN_TRIPS || n == 0 {
        return (n, None);
    }
    let vr = match (op, up) {
        (BinOp::Lt, true) => r(a.lo, b.hi - 1),
        (BinOp::Le, true) => r(a.lo, b.hi),
        (BinOp::Gt, false) => r(b.lo + 1, a.hi),
        (BinOp::Ge, false) => r(b.lo, a.hi),
        (BinOp::Ne, true) => r(a.lo, b.lo - step),
        (BinOp::Ne, false) => r(b.lo + step, a.hi),
        _ => return (n, None),
    };
    (n, Some(vr))
}

/// See [`bounds`].
fn trips(a: Range, b: Range, op: BinOp, up: bool, step: u64) -> u32 {
    const MAX: u64 = u32::MAX as u64;
    let n = match (op, up) {
        // v < b: v never exceeds b.hi - 1, so v + step never wraps.
        (BinOp::Lt, true) if b.hi == 0 || b.hi - 1 + step <= MAX => {
            if b.hi <= a.lo {
                Some(0)
            } else {
                Some((b.hi - a.lo).div_ceil(step))
            }
        }
        (BinOp::Le, true) if b.hi + step <= MAX => {
            if b.hi < a.lo {
                Some(0)
            } else {
                Some((b.hi - a.lo) / step + 1)
            }
        }
        (BinOp::Gt, false) if b.lo + 1 >= step => {
            if a.hi <= b.lo {
                Some(0)
            } else {
                Some((a.hi - b.lo).div_ceil(step))
            }
        }
        (BinOp::Ge, false) if b.lo >= step => {
            if a.hi < b.lo {
                Some(0)
            } else {
                Some((a.hi - b.lo) / step + 1)
            }
        }
        (BinOp::Ne, true) if a.lo == a.hi && b.lo == b.hi && b.lo >= a.lo => {
            let d = b.lo - a.lo;
            (d % step == 0).then_some(d / step)
        }
        (BinOp::Ne, false) if a.lo == a.hi && b.lo == b.hi && a.lo >= b.lo => {
            let d = a.lo - b.lo;
            (d % step == 0).then_some(d / step)
        }
        _ => None,
    };
    match n {
        Some(n) if n < UNKNOWN_TRIPS as u64 => n as u32,
        _ => UNKNOWN_TRIPS,
    }
}
