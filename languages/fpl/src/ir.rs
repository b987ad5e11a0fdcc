//! The checked program both back ends run: names resolved, macros expanded,
//! every MBuf index either proven in range or marked for a run-time check,
//! every loop given its trip bound.
//!
//! Meaning (the interpreter in [`crate::Program::run`] is the reference):
//! values are `u32`, arithmetic wraps, comparisons are unsigned and give 0
//! or 1. Operands are evaluated left to right; `&&` and `||` stop early.
//! An **abort** ends the run with result 0, keeping MBuf writes made before
//! it: a packet read past the captured bytes, a run-time-checked MEM index
//! outside the MBuf, a division or remainder by zero, a field index out of
//! range, a loop starting more than its `max_trips` iterations, or a panic
//! in an external function (re-raised after the run).
//!
//! ```
//! use sluice_fpl::{ir::{Expr, Stmt}, Externs, Program};
//! let p = Program::compile("RETURN 7;", &Externs::new()).unwrap();
//! assert!(matches!(p.body(), [Stmt::Return(Expr::Const(7))]));
//! ```

/// Width of a packet read; bytes are read in network (big-endian) order.
///
/// ```
/// assert_eq!(sluice_fpl::ir::Width::W.bytes(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Width {
    /// `PKT.B[off]`: one byte.
    B,
    /// `PKT.W[off]`: a 16-bit word.
    W,
    /// `PKT.DW[off]`: a 32-bit double word.
    DW,
}

impl Width {
    /// Bytes read.
    ///
    /// ```
    /// assert_eq!(sluice_fpl::ir::Width::DW.bytes(), 4);
    /// ```
    pub fn bytes(self) -> u32 {
        match self {
            Width::B => 1,
            Width::W => 2,
            Width::DW => 4,
        }
    }
}

/// Unary operators.
///
/// ```
/// assert_eq!(sluice_fpl::ir::UnOp::Not.apply(5), 0);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-x`, wrapping.
    Neg,
    /// `!x`: 1 if `x == 0`, else 0.
    Not,
    /// `~x`: every bit flipped.
    BitNot,
}

impl UnOp {
    /// The operator's value.
    ///
    /// ```
    /// use sluice_fpl::ir::UnOp;
    /// assert_eq!((UnOp::Neg.apply(1), UnOp::BitNot.apply(0)), (u32::MAX, u32::MAX));
    /// ```
    pub fn apply(self, x: u32) -> u32 {
        match self {
            UnOp::Neg => x.wrapping_neg(),
            UnOp::Not => (x == 0) as u32,
            UnOp::BitNot => !x,
        }
    }
}

/// Binary operators (`&&` and `||` evaluate their right side only when needed).
///
/// ```
/// use sluice_fpl::ir::BinOp;
/// assert_eq!(BinOp::Shl.apply(1, 40), Some(0));
/// assert_eq!(BinOp::Div.apply(1, 0), None); // aborts the run
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`, wrapping.
    Add,
    /// `-`, wrapping.
    Sub,
    /// `*`, wrapping.
    Mul,
    /// `/`, unsigned; by zero aborts.
    Div,
    /// `%`, unsigned; by zero aborts.
    Mod,
    /// `<<`; a shift by 32 or more gives 0.
    Shl,
    /// `>>` (logical); a shift by 32 or more gives 0.
    Shr,
    /// `&`.
    BitAnd,
    /// `|`.
    BitOr,
    /// `^`.
    BitXor,
    /// `==`.
    Eq,
    /// `!=`.
    Ne,
    /// `<`, unsigned.
    Lt,
    /// `<=`, unsigned.
    Le,
    /// `>`, unsigned.
    Gt,
    /// `>=`, unsigned.
    Ge,
    /// `&&`: 1 if both sides are non-zero.
    And,
    /// `||`: 1 if either side is non-zero.
    Or,
}

impl BinOp {
    /// The operator's value, or `None` for a division or remainder by zero.
    ///
    /// ```
    /// use sluice_fpl::ir::BinOp;
    /// assert_eq!(BinOp::Sub.apply(0, 1), Some(u32::MAX));
    /// assert_eq!(BinOp::Lt.apply(1, 2), Some(1));
    /// ```
    pub fn apply(self, a: u32, b: u32) -> Option<u32> {
        Some(match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b)?,
            BinOp::Mod => a.checked_rem(b)?,
            BinOp::Shl => a.checked_shl(b).unwrap_or(0),
            BinOp::Shr => a.checked_shr(b).unwrap_or(0),
            BinOp::BitAnd => a & b,
            BinOp::BitOr => a | b,
            BinOp::BitXor => a ^ b,
            BinOp::Eq => (a == b) as u32,
            BinOp::Ne => (a != b) as u32,
            BinOp::Lt => (a < b) as u32,
            BinOp::Le => (a <= b) as u32,
            BinOp::Gt => (a > b) as u32,
            BinOp::Ge => (a >= b) as u32,
            BinOp::And => (a != 0 && b != 0) as u32,
            BinOp::Or => (a != 0 || b != 0) as u32,
        })
    }
}

/// An expression.
///
/// ```
/// use sluice_fpl::ir::{Expr, Width};
/// let e = Expr::Pkt { offset: Box::new(Expr::Const(23)), width: Width::B };
/// assert!(matches!(e, Expr::Pkt { width: Width::B, .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// A constant.
    Const(u32),
    /// Register `R[n]`, kept in the MBuf after the MEM words.
    Reg(u16),
    /// `MEM[index]`; `checked` means the index must be compared with the
    /// MBuf size at run time (otherwise it is proven in range).
    Mem {
        /// The word index.
        index: Box<Expr>,
        /// Whether a run-time check is needed.
        checked: bool,
    },
    /// A big-endian packet read of `width` bytes at `offset`.
    Pkt {
        /// Byte offset from the start of the frame.
        offset: Box<Expr>,
        /// How many bytes.
        width: Width,
    },
    /// Part `index` of `bits` bits inside `value`, a `total`-bit value,
    /// counted from the most significant end (`PKT.B[n].U1[0]` is the top
    /// bit of byte `n`, `PKT.W[n].U8[1]` is its second byte). An index of
    /// `total / bits` or more aborts.
    Field {
        /// The value the field is cut from.
        value: Box<Expr>,
        /// Its width in bits (8, 16 or 32).
        total: u32,
        /// The field's width in bits (1, 4, 8 or 16).
        bits: u32,
        /// Which field.
        index: Box<Expr>,
    },
    /// A unary operator.
    Un(UnOp, Box<Expr>),
    /// A binary operator.
    Bin(BinOp, Box<Expr>, Box<Expr>),
    /// `HASH(start, len, size)`: [`crate::hash`] of packet bytes
    /// `start .. start + len`, modulo `size`. Reading past the packet aborts.
    Hash {
        /// First byte.
        start: Box<Expr>,
        /// Bytes hashed (a constant).
        len: u32,
        /// Table size (a constant, at least 1).
        size: u32,
    },
    /// `EXTERN(name, input, output)`: external function number `func` of
    /// [`crate::Program::externs`], reading MEM words from `input` and
    /// writing MEM words from `output` (ranges proven inside the MBuf).
    Extern {
        /// Index into the program's external functions.
        func: usize,
        /// First MEM word of the input.
        input: u32,
        /// First MEM word of the output.
        output: u32,
    },
}

/// A statement.
///
/// ```
/// use sluice_fpl::{ir::Stmt, Externs, Program};
/// let p = Program::compile("R[0]++;", &Externs::new()).unwrap();
/// assert!(matches!(p.body(), [Stmt::SetReg { reg: 0, .. }]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stmt {
    /// `R[reg] = value` (with `op`: `R[reg] = R[reg] op value`, the
    /// register read after `value` is evaluated).
    SetReg {
        /// Register number.
        reg: u16,
        /// Compound operator (`+=` …, `++`), if any.
        op: Option<BinOp>,
        /// Right-hand side.
        value: Expr,
    },
    /// `MEM[index] = value` (or `op=`): the index is evaluated (and checked)
    /// first, then `value`, then the word is read (for `op`) and written.
    SetMem {
        /// The word index.
        index: Expr,
        /// Whether a run-time check is needed.
        checked: bool,
        /// Compound operator, if any.
        op: Option<BinOp>,
        /// Right-hand side.
        value: Expr,
    },
    /// An expression evaluated for its effects (an `EXTERN` call).
    Eval(Expr),
    /// `IF cond THEN then ELSE els FI`.
    If {
        /// Condition (non-zero is true).
        cond: Expr,
        /// Taken when `cond` is non-zero.
        then: Vec<Stmt>,
        /// Taken otherwise.
        els: Vec<Stmt>,
    },
    /// `FOR (init; cond; update) body ROF`: `init`, then while `cond` is
    /// non-zero: abort if `max_trips` iterations have already run, else
    /// `body` then `update`. `BREAK` leaves the innermost loop.
    Loop {
        /// The loop variable's initial assignment.
        init: Box<Stmt>,
        /// The test made before each iteration.
        cond: Expr,
        /// The step made after each iteration.
        update: Box<Stmt>,
        /// The statements repeated.
        body: Vec<Stmt>,
        /// The compile-time bound on iterations.
        max_trips: u32,
    },
    /// `BREAK`.
    Break,
    /// `RETURN value`.
    Return(Expr),
}
