//! The reference interpreter: a walk over the checked program.

use crate::ir::{BinOp, Expr, Stmt};
use crate::Program;

/// Why evaluation stopped early.
pub(crate) enum Stop {
    /// The run aborts: result 0.
    Abort,
    /// `RETURN v`.
    Return(u32),
    /// `BREAK`.
    Break,
}

pub(crate) struct Cx<'a> {
    pub pkt: &'a [u8],
    /// The MEM words.
    pub mem: &'a mut [u32],
    /// The registers.
    pub regs: &'a mut [u32],
}

/// FNV-1a (32 bits) of `bytes`: the hash `HASH(start, len, size)` takes
/// modulo `size`.
///
/// ```
/// assert_eq!(sluice_fpl::hash(b""), 0x811c9dc5);
/// assert_eq!(sluice_fpl::hash(b"a"), 0xe40c292c);
/// ```
pub fn hash(bytes: &[u8]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in bytes {
        h ^= b as u32;
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

/// Big-endian read of `width` bytes at `off`, if inside the packet.
fn read(pkt: &[u8], off: u32, width: u32) -> Option<u32> {
    let start = off as usize;
    let bytes = pkt.get(start..start.checked_add(width as usize)?)?;
    Some(bytes.iter().fold(0u32, |v, &b| (v << 8) | b as u32))
}

impl Program {
    pub(crate) fn exec(&self, body: &[Stmt], cx: &mut Cx<'_>) -> Result<(), Stop> {
        for s in body {
            self.stmt(s, cx)?;
        }
        Ok(())
    }

    fn stmt(&self, s: &Stmt, cx: &mut Cx<'_>) -> Result<(), Stop> {
        match s {
            Stmt::SetReg { reg, op, value } => {
                let v = self.eval(value, cx)?;
                let r = &mut cx.regs[*reg as usize];
                *r = match op {
                    None => v,
                    Some(op) => op.apply(*r, v).ok_or(Stop::Abort)?,
                };
            }
            Stmt::SetMem {
                index,
                checked,
                op,
                value,
            } => {
                let i = self.eval(index, cx)? as usize;
                if *checked && i >= cx.mem.len() {
                    return Err(Stop::Abort);
                }
                let v = self.eval(value, cx)?;
                // Unchecked indices are proven in range: indexing (which
                // would panic) keeps the proof honest in tests.
                let w = &mut cx.mem[i];
                *w = match op {
                    None => v,
                    Some(op) => op.apply(*w, v).ok_or(Stop::Abort)?,
                };
            }
            Stmt::Eval(e) => {
                self.eval(e, cx)?;
            }
            Stmt::If { cond, then, els } => {
                if self.eval(cond, cx)? != 0 {
                    self.exec(then, cx)?;
                } else {
                    self.exec(els, cx)?;
                }
            }
            Stmt::Loop {
                init,
                cond,
                update,
                body,
                max_trips,
            } => {
                self.stmt(init, cx)?;
                let mut trips = 0u32;
                while self.eval(cond, cx)? != 0 {
                    if trips == *max_trips {
                        return Err(Stop::Abort);
                    }
                    trips += 1;
                    match self.exec(body, cx) {
                        Ok(()) => {}
                        Err(Stop::Break) => break,
                        Err(e) => return Err(e),
                    }
                    self.stmt(update, cx)?;
                }
            }
            Stmt::Break => return Err(Stop::Break),
            Stmt::Return(e) => return Err(Stop::Return(self.eval(e, cx)?)),
        }
        Ok(())
    }

    fn eval(&self, e: &Expr, cx: &mut Cx<'_>) -> Result<u32, Stop> {
        Ok(match e {
            Expr::Const(c) => *c,
            Expr::Reg(r) => cx.regs[*r as usize],
            Expr::Mem { index, checked } => {
                let i = self.eval(index, cx)? as usize;
                if *checked {
                    *cx.mem.get(i).ok_or(Stop::Abort)?
                } else {
                    cx.mem[i]
                }
            }
            Expr::Pkt { offset, width } => {
                let off = self.eval(offset, cx)?;
                read(cx.pkt, off, width.bytes()).ok_or(Stop::Abort)?
            }
            Expr::Field {
                value,
                total,
                bits,
                index,
            } => {
                let v = self.eval(value, cx)?;
                let m = self.eval(index, cx)?;
                if m >= total / bits {
                    return Err(Stop::Abort);
                }
                let shift = total - bits * (m + 1);
                (v >> shift) & (u32::MAX >> (32 - bits))
            }
            Expr::Un(op, a) => op.apply(self.eval(a, cx)?),
            Expr::Bin(BinOp::And, a, b) => {
                (self.eval(a, cx)? != 0 && self.eval(b, cx)? != 0) as u32
            }
            Expr::Bin(BinOp::Or, a, b) => (self.eval(a, cx)? != 0 || self.eval(b, cx)? != 0) as u32,
            Expr::Bin(op, a, b) => {
                let x = self.eval(a, cx)?;
                let y = self.eval(b, cx)?;
                op.apply(x, y).ok_or(Stop::Abort)?
            }
            Expr::Hash { start, len, size } => {
                let s = self.eval(start, cx)? as usize;
                let bytes = cx.pkt.get(s..s + *len as usize).ok_or(Stop::Abort)?;
                hash(bytes) % size
            }
            Expr::Extern {
                func,
                input,
                output,
            } => self.call_extern(*func, *input, *output, cx.pkt, cx.mem),
        })
    }
}
