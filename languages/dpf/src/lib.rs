//! DPF (Engler, Kaashoek 1996): the declarative atom language, its
//! reference interpreter, and its canonicalisation into sluice's IR.
//!
//! # The language
//!
//! A filter is a sequence of *atoms* joined by `&&` (or `&`, as in the
//! paper's Figure 1). An atom is a comparison of two expressions, or a
//! `SHIFT(expr)` that moves the message pointer (the base of every later
//! read) by the expression's value. Expressions are 32-bit unsigned
//! arithmetic over constants and packet reads `offset:bits` (bits 8, 16 or
//! 32, read in network byte order at `pointer + offset`; the offset may
//! itself be computed from the packet, an indirect read). Operators, from
//! loosest to tightest: comparisons `== != < <= > >=` (one per atom, so
//! `12:16 & 0xff00 == 0x800` masks before comparing), `|`, `^`, `&`,
//! `<< >>`, `+ -`, `* / %`, unary `~ -`, and `:` tightest of all. `#`
//! starts a comment.
//!
//! The filter accepts when every atom holds. A read past the captured bytes
//! or a division by zero rejects the packet; address arithmetic wraps at 32
//! bits. Since atoms have no side effects and any failure rejects, their
//! order does not change the verdict, which is what lets the canonical form
//! sort and merge them.
//!
//! ```
//! let f = sluice_dpf::parse("(12:16 == 0x800) && SHIFT(14) && (9:8 == 6)").unwrap();
//! let mut pkt = [0u8; 34];
//! pkt[12] = 8;
//! pkt[23] = 6;
//! assert!(f.run(&pkt));
//! assert!(!f.run(&pkt[..23])); // byte 23 missing: reject
//! assert_eq!(f.to_ir(1).run(&pkt, 34), 1);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod canon;
mod parse;
#[cfg(test)]
mod tests;

pub use canon::canonical;
pub use parse::{parse, ParseError};

use sluice_ir::BinOp;
use std::fmt;

/// An expression: a 32-bit unsigned value computed from the packet.
///
/// ```
/// use sluice_dpf::Expr;
/// let e = Expr::Load { addr: Box::new(Expr::Num(12)), bits: 16 };
/// assert_eq!(e.to_string(), "12:16");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// A constant.
    Num(u32),
    /// `addr:bits`: `bits / 8` bytes at the message pointer plus `addr`.
    Load {
        /// The offset from the message pointer.
        addr: Box<Expr>,
        /// 8, 16 or 32.
        bits: u8,
    },
    /// Binary arithmetic (IR semantics: wrapping; division by zero rejects;
    /// shifts by 32 or more give 0).
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// Bitwise complement `~e`.
    Not(Box<Expr>),
    /// Negation `-e`.
    Neg(Box<Expr>),
}

/// A comparison.
///
/// ```
/// assert_eq!(sluice_dpf::Rel::Le.symbol(), "<=");
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rel {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Rel {
    /// The operator's text.
    ///
    /// ```
    /// assert_eq!(sluice_dpf::Rel::Ne.symbol(), "!=");
    /// ```
    pub fn symbol(self) -> &'static str {
        match self {
            Rel::Eq => "==",
            Rel::Ne => "!=",
            Rel::Lt => "<",
            Rel::Le => "<=",
            Rel::Gt => ">",
            Rel::Ge => ">=",
        }
    }

    /// Apply the comparison.
    ///
    /// ```
    /// assert!(sluice_dpf::Rel::Lt.apply(1, 2));
    /// ```
    pub fn apply(self, a: u32, b: u32) -> bool {
        match self {
            Rel::Eq => a == b,
            Rel::Ne => a != b,
            Rel::Lt => a < b,
            Rel::Le => a <= b,
            Rel::Gt => a > b,
            Rel::Ge => a >= b,
        }
    }
}

/// An atom: a comparison, or a move of the message pointer.
///
/// ```
/// let f = sluice_dpf::parse("SHIFT(14) && (0:8 == 0x45)").unwrap();
/// assert!(matches!(f.atoms[0], sluice_dpf::Atom::Shift(_)));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Atom {
    /// `lhs rel rhs`.
    Cmp(Rel, Expr, Expr),
    /// `SHIFT(amount)`.
    Shift(Expr),
}

/// A parsed filter: its atoms in the order written.
///
/// ```
/// let f = sluice_dpf::parse("(12:16 == 0x800)").unwrap();
/// assert_eq!(f.atoms.len(), 1);
/// assert_eq!(f.to_string(), "(12:16 == 2048)");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Filter {
    /// The atoms.
    pub atoms: Vec<Atom>,
}

/// The evaluation failed: the packet is rejected.
struct Fail;

fn read(pkt: &[u8], at: u32, bytes: usize) -> Result<u32, Fail> {
    let start = at as usize;
    let slice = pkt
        .get(start..start.checked_add(bytes).ok_or(Fail)?)
        .ok_or(Fail)?;
    Ok(slice.iter().fold(0u32, |a, &b| (a << 8) | b as u32))
}

impl Expr {
    fn eval(&self, pkt: &[u8], ptr: u32) -> Result<u32, Fail> {
        Ok(match self {
            Expr::Num(k) => *k,
            Expr::Load { addr, bits } => {
                let a = ptr.wrapping_add(addr.eval(pkt, ptr)?);
                read(pkt, a, *bits as usize / 8)?
            }
            Expr::Bin(op, a, b) => {
                let x = a.eval(pkt, ptr)?;
                let y = b.eval(pkt, ptr)?;
                op.apply(x, y).ok_or(Fail)?
            }
            Expr::Not(a) => !a.eval(pkt, ptr)?,
            Expr::Neg(a) => a.eval(pkt, ptr)?.wrapping_neg(),
        })
    }
}

impl Filter {
    /// The reference interpreter: atoms in order, the message pointer
    /// starting at 0; true if every atom holds.
    ///
    /// ```
    /// let f = sluice_dpf::parse("SHIFT(0:8) && (0:8 == 9)").unwrap();
    /// assert!(f.run(&[2, 0, 9]));
    /// assert!(!f.run(&[3, 0, 9]));
    /// ```
    pub fn run(&self, pkt: &[u8]) -> bool {
        let mut ptr = 0u32;
        for a in &self.atoms {
            match a {
                Atom::Shift(e) => match e.eval(pkt, ptr) {
                    Ok(v) => ptr = ptr.wrapping_add(v),
                    Err(Fail) => return false,
                },
                Atom::Cmp(rel, l, r) => match (l.eval(pkt, ptr), r.eval(pkt, ptr)) {
                    (Ok(x), Ok(y)) if rel.apply(x, y) => {}
                    _ => return false,
                },
            }
        }
        true
    }

    /// The canonical IR filter, returning `accept` when the filter accepts
    /// (see [`canonical`]).
    ///
    /// ```
    /// let a = sluice_dpf::parse("(12:16 == 0x800) && (14:8 == 0x45)").unwrap();
    /// let b = sluice_dpf::parse("(0x45 == 14:8) & (12:16 & 0xffff == 0x800)").unwrap();
    /// assert_eq!(a.to_ir(1), b.to_ir(1));
    /// ```
    pub fn to_ir(&self, accept: u32) -> sluice_ir::Filter {
        sluice_ir::Filter::new(canonical(self), accept)
    }
}

/// Parse and canonicalise in one step.
///
/// ```
/// let f = sluice_dpf::compile("(12:16 == 0x806)", 1).unwrap();
/// assert_eq!(f.accept, 1);
/// ```
pub fn compile(text: &str, accept: u32) -> Result<sluice_ir::Filter, ParseError> {
    Ok(parse(text)?.to_ir(accept))
}

fn binop_symbol(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
        BinOp::And => "&",
        BinOp::Or => "|",
        BinOp::Xor => "^",
        BinOp::Shl => "<<",
        BinOp::Shr => ">>",
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Num(k) => write!(f, "{k}"),
            Expr::Load { addr, bits } => match **addr {
                Expr::Num(k) => write!(f, "{k}:{bits}"),
                ref a => write!(f, "({a}):{bits}"),
            },
            Expr::Bin(op, a, b) => write!(f, "({a} {} {b})", binop_symbol(*op)),
            Expr::Not(a) => write!(f, "~{a}"),
            Expr::Neg(a) => write!(f, "-{a}"),
        }
    }
}

impl fmt::Display for Atom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Atom::Cmp(rel, l, r) => write!(f, "({l} {} {r})", rel.symbol()),
            Atom::Shift(e) => write!(f, "SHIFT({e})"),
        }
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, a) in self.atoms.iter().enumerate() {
            if i > 0 {
                write!(f, " && ")?;
            }
            write!(f, "{a}")?;
        }
        Ok(())
    }
}
