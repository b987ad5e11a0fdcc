//! sluice's intermediate form: one representation for every filter language.
//!
//! A filter is a [`Pred`] over packet fields plus the value it returns on
//! acceptance. Values ([`Val`]) are unsigned 32-bit: constants, loads of 1, 2
//! or 4 big-endian bytes at a computed address, the wire length, and
//! arithmetic. Predicates compare values and combine with n-ary `and`/`or`
//! (left to right, short-circuit) and `not`.
//!
//! **Out-of-bounds loads abort the filter**: a load past the captured bytes,
//! or a division by zero, makes the whole filter reject the packet, even under
//! `not` or inside an `or` whose other side is true. Evaluation order is
//! therefore part of the meaning, and every pass keeps it: see [`eval`].
//!
//! ```
//! use sluice_ir::{Filter, Pred, Val, Size, CmpOp};
//! // ether[12:2] == 0x800
//! let f = Filter::new(Pred::cmp(CmpOp::Eq, Val::load_abs(12, Size::Half), Val::Const(0x800)), 65535);
//! let mut pkt = [0u8; 14];
//! pkt[12] = 0x08;
//! assert_eq!(f.run(&pkt, 14), 65535);
//! assert_eq!(f.run(&pkt[..13], 14), 0); // the load is out of bounds: abort
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "arbitrary")]
pub mod arbitrary;
pub mod branch;
pub mod codec;
pub mod eval;
pub mod flat;
mod shared;
pub mod simplify;
mod text;

pub use eval::{eval_pred, eval_val, Abort};
pub use shared::Shared;
pub use text::TextError;

/// Width of a packet load.
///
/// ```
/// assert_eq!(sluice_ir::Size::Half.bytes(), 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Size {
    /// One byte.
    Byte,
    /// Two bytes, big-endian.
    Half,
    /// Four bytes, big-endian.
    Word,
}

impl Size {
    /// Number of bytes loaded.
    ///
    /// ```
    /// assert_eq!(sluice_ir::Size::Word.bytes(), 4);
    /// ```
    pub fn bytes(self) -> u32 {
        match self {
            Size::Byte => 1,
            Size::Half => 2,
            Size::Word => 4,
        }
    }

    /// The size of `n` bytes, if 1, 2 or 4.
    ///
    /// ```
    /// assert_eq!(sluice_ir::Size::from_bytes(2), Some(sluice_ir::Size::Half));
    /// assert_eq!(sluice_ir::Size::from_bytes(3), None);
    /// ```
    pub fn from_bytes(n: u32) -> Option<Size> {
        match n {
            1 => Some(Size::Byte),
            2 => Some(Size::Half),
            4 => Some(Size::Word),
            _ => None,
        }
    }
}

/// Binary arithmetic on unsigned 32-bit values (wrapping).
///
/// Division and modulo by zero abort the filter. Shifts by 32 or more give 0.
///
/// ```
/// assert_eq!(sluice_ir::BinOp::Shl.apply(1, 40), Some(0));
/// assert_eq!(sluice_ir::BinOp::Div.apply(1, 0), None);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

impl BinOp {
    /// Every operator, in declaration order.
    ///
    /// ```
    /// assert_eq!(sluice_ir::BinOp::ALL.len(), 10);
    /// assert_eq!(sluice_ir::BinOp::ALL[0], sluice_ir::BinOp::Add);
    /// ```
    pub const ALL: [BinOp; 10] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Mod,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
    ];

    /// Apply the operator; `None` means the filter aborts (division by zero).
    ///
    /// ```
    /// assert_eq!(sluice_ir::BinOp::Sub.apply(1, 2), Some(u32::MAX));
    /// ```
    pub fn apply(self, a: u32, b: u32) -> Option<u32> {
        Some(match self {
            BinOp::Add => a.wrapping_add(b),
            BinOp::Sub => a.wrapping_sub(b),
            BinOp::Mul => a.wrapping_mul(b),
            BinOp::Div => a.checked_div(b)?,
            BinOp::Mod => a.checked_rem(b)?,
            BinOp::And => a & b,
            BinOp::Or => a | b,
            BinOp::Xor => a ^ b,
            BinOp::Shl => a.checked_shl(b).unwrap_or(0),
            BinOp::Shr => a.checked_shr(b).unwrap_or(0),
        })
    }
}

/// An unsigned 32-bit value computed from a packet.
///
/// ```
/// use sluice_ir::{Val, Size};
/// // 4 * (ether[14] & 0xf): the IPv4 header length
/// let v = Val::ip_hdr_len(14);
/// assert_eq!(sluice_ir::eval_val(&v, &[0u8; 14].iter().copied().chain([0x45]).collect::<Vec<_>>(), 15), Ok(20));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Val {
    /// A constant.
    Const(u32),
    /// The packet's length on the wire (`len`).
    Len,
    /// `size` big-endian bytes at `base + offset`. The address is computed
    /// without wrap-around: if `base + offset + size` exceeds the captured
    /// length the filter aborts. `base` is [`Val::Const(0)`](Val::Const) for
    /// a fixed offset.
    Load {
        /// The variable part of the address.
        base: Box<Val>,
        /// The constant part of the address.
        offset: u32,
        /// How many bytes.
        size: Size,
    },
    /// `lhs op rhs`; both sides are evaluated, left first.
    Bin(BinOp, Box<Val>, Box<Val>),
    /// Two's complement negation.
    Neg(Box<Val>),
    /// A value used in several places, held once: it means its inner
    /// value; an engine may compute it once and reuse it ([`Shared`]).
    Shared(Shared),
}

impl Val {
    /// A load at a fixed offset.
    ///
    /// ```
    /// let v = sluice_ir::Val::load_abs(12, sluice_ir::Size::Half);
    /// assert!(v.is_load());
    /// ```
    pub fn load_abs(offset: u32, size: Size) -> Val {
        Val::Load {
            base: Box::new(Val::Const(0)),
            offset,
            size,
        }
    }

    /// A load at `base + offset`, folding a constant base into the offset
    /// when that does not overflow.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// assert_eq!(Val::load(Val::Const(2), 12, Size::Byte), Val::load_abs(14, Size::Byte));
    /// ```
    pub fn load(base: Val, offset: u32, size: Size) -> Val {
        match base {
            Val::Const(c) if c.checked_add(offset).is_some() && c != 0 => {
                Val::load_abs(c + offset, size)
            }
            base => Val::Load {
                base: Box::new(base),
                offset,
                size,
            },
        }
    }

    /// `4 * (pkt[offset] & 0xf)`: the length of an IPv4 header at `offset`.
    ///
    /// ```
    /// let v = sluice_ir::Val::ip_hdr_len(14);
    /// assert!(!v.is_const());
    /// ```
    pub fn ip_hdr_len(offset: u32) -> Val {
        Val::bin(
            BinOp::Shl,
            Val::bin(
                BinOp::And,
                Val::load_abs(offset, Size::Byte),
                Val::Const(0xf),
            ),
            Val::Const(2),
        )
    }

    /// `tcp[((tcp[12:1] & 0xf0) >> 2):4]` behind an IPv4 header at
    /// `offset` (`hl`, that header's length, given as the caller shares
    /// it): the first word of the TCP payload.
    ///
    /// ```
    /// use sluice_ir::{eval_val, Val};
    /// let mut pkt = [0u8; 58];
    /// pkt[14] = 0x45;
    /// pkt[46] = 0x50;
    /// pkt[54..58].copy_from_slice(b"GET ");
    /// let v = Val::tcp_payload_word(14, Val::ip_hdr_len(14));
    /// assert_eq!(eval_val(&v, &pkt, 58), Ok(0x4745_5420));
    /// ```
    pub fn tcp_payload_word(offset: u32, hl: Val) -> Val {
        let thl = Val::bin(
            BinOp::Shr,
            Val::bin(
                BinOp::And,
                Val::load(hl.clone(), offset + 12, Size::Byte),
                Val::Const(0xf0),
            ),
            Val::Const(2),
        );
        Val::load(Val::bin(BinOp::Add, thl, hl), offset, Size::Word)
    }

    /// `lhs op rhs`, folded when both are constants and the result is defined.
    ///
    /// ```
    /// use sluice_ir::{Val, BinOp};
    /// assert_eq!(Val::bin(BinOp::Add, Val::Const(1), Val::Const(2)), Val::Const(3));
    /// ```
    pub fn bin(op: BinOp, lhs: Val, rhs: Val) -> Val {
        if let (Val::Const(a), Val::Const(b)) = (&lhs, &rhs) {
            if let Some(v) = op.apply(*a, *b) {
                return Val::Const(v);
            }
        }
        Val::Bin(op, Box::new(lhs), Box::new(rhs))
    }

    /// `v` held once, for use in several places ([`Shared`]); a constant,
    /// the length, a load at a fixed offset or a value already shared is
    /// returned as it is (it costs no more to copy).
    ///
    /// ```
    /// use sluice_ir::{BinOp, Size, Val};
    /// assert_eq!(Val::shared(Val::Len), Val::Len);
    /// let hl = Val::shared(Val::ip_hdr_len(14));
    /// assert!(matches!(hl, Val::Shared(_)));
    /// assert_eq!(Val::shared(hl.clone()), hl);
    /// ```
    pub fn shared(v: Val) -> Val {
        match v {
            Val::Const(_) | Val::Len | Val::Shared(_) => v,
            Val::Load { ref base, .. } if base.is_const() => v,
            v => Val::Shared(Shared::new(v)),
        }
    }

    /// Whether a [`Val::Shared`] occurs in the value (not looking inside
    /// shared values, so in time linear in the value's own size).
    ///
    /// ```
    /// use sluice_ir::Val;
    /// assert!(!Val::Len.has_shared());
    /// assert!(Val::plus(Val::shared(Val::ip_hdr_len(14)), 4).has_shared());
    /// ```
    pub fn has_shared(&self) -> bool {
        match self {
            Val::Const(_) | Val::Len => false,
            Val::Load { base, .. } => base.has_shared(),
            Val::Bin(_, a, b) => a.has_shared() || b.has_shared(),
            Val::Neg(a) => a.has_shared(),
            Val::Shared(_) => true,
        }
    }

    /// `base + k`, folded where possible (adding 0 is the identity).
    ///
    /// ```
    /// use sluice_ir::Val;
    /// assert_eq!(Val::plus(Val::Len, 0), Val::Len);
    /// ```
    pub fn plus(base: Val, k: u32) -> Val {
        if k == 0 {
            return base;
        }
        match base {
            Val::Const(c) => Val::Const(c.wrapping_add(k)),
            Val::Bin(BinOp::Add, a, b) if matches!(*b, Val::Const(_)) => {
                let Val::Const(c) = *b else { unreachable!() };
                Val::bin(BinOp::Add, *a, Val::Const(c.wrapping_add(k)))
            }
            base => Val::bin(BinOp::Add, base, Val::Const(k)),
        }
    }

    /// The largest value this can take on any packet: a bound, not always
    /// reached, and `u32::MAX` when unknown or when 32-bit arithmetic may
    /// wrap. Front ends and back ends use it to fold constants into offsets
    /// exactly.
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// assert_eq!(Val::ip_hdr_len(14).upper_bound(), 60);
    /// assert_eq!(Val::load_abs(0, Size::Half).upper_bound(), 0xffff);
    /// ```
    pub fn upper_bound(&self) -> u64 {
        const TOP: u64 = u32::MAX as u64;
        let r = match self {
            Val::Const(k) => *k as u64,
            Val::Len => TOP,
            Val::Load { size, .. } => match size {
                Size::Byte => 0xff,
                Size::Half => 0xffff,
                Size::Word => TOP,
            },
            Val::Bin(op, a, b) => {
                let (x, y) = (a.upper_bound(), b.upper_bound());
                match op {
                    BinOp::And => x.min(y),
                    BinOp::Or | BinOp::Xor => {
                        let m = x.max(y);
                        if m == 0 {
                            0
                        } else {
                            (1u64 << (64 - m.leading_zeros())) - 1
                        }
                    }
                    BinOp::Add => x + y,
                    BinOp::Mul => x.saturating_mul(y),
                    BinOp::Sub => match **b {
                        Val::Const(0) => x,
                        _ => TOP,
                    },
                    BinOp::Div => x,
                    BinOp::Mod => x.min(y.saturating_sub(1)),
                    BinOp::Shl => match **b {
                        Val::Const(k) if k < 32 => x << k,
                        _ => TOP,
                    },
                    BinOp::Shr => match **b {
                        Val::Const(k) if k < 32 => x >> k,
                        Val::Const(_) => 0,
                        _ => x,
                    },
                }
            }
            Val::Neg(_) => TOP,
            Val::Shared(s) => s.upper_bound(),
        };
        r.min(TOP)
    }

    /// The value this has whenever evaluating it does not abort, when that
    /// is a constant: constants folded, and the reductions libpcap's
    /// optimiser makes, `x & 0`, `x * 0`, and `0` combined with anything
    /// by `*`, `/`, `%`, `&`, `<<` or `>>`, are 0 (the operand is still
    /// evaluated and may abort).
    ///
    /// ```
    /// use sluice_ir::{BinOp, Size, Val};
    /// let byte = Val::load_abs(0, Size::Byte);
    /// assert_eq!(Val::Bin(BinOp::And, Box::new(byte.clone()), Box::new(Val::Const(0))).known(), Some(0));
    /// assert_eq!(Val::Bin(BinOp::Add, Box::new(byte), Box::new(Val::Const(0))).known(), None);
    /// ```
    pub fn known(&self) -> Option<u32> {
        match self {
            Val::Const(k) => Some(*k),
            Val::Len | Val::Load { .. } => None,
            Val::Neg(x) => x.known().map(u32::wrapping_neg),
            Val::Shared(s) => s.known(),
            Val::Bin(op, a, b) => {
                let (ka, kb) = (a.known(), b.known());
                if let (Some(x), Some(y)) = (ka, kb) {
                    return op.apply(x, y);
                }
                match op {
                    BinOp::Mul | BinOp::And if ka == Some(0) || kb == Some(0) => Some(0),
                    BinOp::Div | BinOp::Mod | BinOp::Shl | BinOp::Shr if ka == Some(0) => Some(0),
                    _ => None,
                }
            }
        }
    }

    /// True for [`Val::Const`].
    ///
    /// ```
    /// assert!(sluice_ir::Val::Const(1).is_const());
    /// ```
    pub fn is_const(&self) -> bool {
        matches!(self, Val::Const(_))
    }

    /// True for [`Val::Load`].
    ///
    /// ```
    /// assert!(!sluice_ir::Val::Len.is_load());
    /// ```
    pub fn is_load(&self) -> bool {
        matches!(self, Val::Load { .. })
    }

    /// True if evaluating the value can abort (it loads from the packet or divides).
    ///
    /// ```
    /// use sluice_ir::{Val, Size};
    /// assert!(Val::load_abs(0, Size::Byte).can_abort());
    /// assert!(!sluice_ir::Val::Len.can_abort());
    /// ```
    pub fn can_abort(&self) -> bool {
        match self {
            Val::Const(_) | Val::Len => false,
            Val::Load { .. } => true,
            Val::Bin(op, a, b) => {
                matches!(op, BinOp::Div | BinOp::Mod) && !matches!(**b, Val::Const(c) if c != 0)
                    || a.can_abort()
                    || b.can_abort()
            }
            Val::Neg(a) => a.can_abort(),
            Val::Shared(s) => s.can_abort(),
        }
    }
}

/// Comparison operators; all comparisons are unsigned.
///
/// `Set` is BPF's `jset`: true when `lhs & rhs != 0`.
///
/// ```
/// assert!(sluice_ir::CmpOp::Set.apply(6, 2));
/// assert!(!sluice_ir::CmpOp::Gt.apply(2, 2));
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CmpOp {
    Eq,
    Gt,
    Ge,
    Set,
}

impl CmpOp {
    /// Apply the comparison.
    ///
    /// ```
    /// assert!(sluice_ir::CmpOp::Ge.apply(2, 2));
    /// ```
    pub fn apply(self, a: u32, b: u32) -> bool {
        match self {
            CmpOp::Eq => a == b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Set => a & b != 0,
        }
    }
}

/// A predicate over a packet.
///
/// ```
/// use sluice_ir::{Pred, Val, CmpOp};
/// let p = Pred::and(vec![Pred::True, Pred::cmp(CmpOp::Eq, Val::Len, Val::Const(60))]);
/// assert!(matches!(p, Pred::Cmp { .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Pred {
    /// Always true.
    True,
    /// Always false.
    False,
    /// `lhs op rhs`; `lhs` is evaluated first.
    Cmp {
        /// The comparison.
        op: CmpOp,
        /// Left side.
        lhs: Val,
        /// Right side.
        rhs: Val,
    },
    /// Negation.
    Not(Box<Pred>),
    /// All of them, left to right, stopping at the first false.
    And(Vec<Pred>),
    /// Any of them, left to right, stopping at the first true.
    Or(Vec<Pred>),
    /// `val` is one of `keys` (sorted, without duplicates): DPF's "fast
    /// disjunction", what an `or` of many equality tests on one field
    /// becomes. Evaluates `val` once.
    In {
        /// The value looked up.
        val: Val,
        /// The constants, sorted ascending, no duplicates.
        keys: std::sync::Arc<[u32]>,
    },
    /// libpcap's `protochain`: follow the chain of IPv4 or IPv6 headers
    /// (IPv6 extension headers and AH) that starts at `start` with the
    /// next-protocol number at `proto_at`, and test whether it reaches
    /// protocol `proto`. See [`eval`] for the exact walk.
    ProtoChain {
        /// IPv6 (true) or IPv4 (false).
        v6: bool,
        /// Where the network header starts.
        start: Val,
        /// The protocol looked for.
        proto: u8,
    },
}

impl Pred {
    /// A comparison.
    ///
    /// ```
    /// use sluice_ir::{Pred, Val, CmpOp};
    /// assert_eq!(Pred::cmp(CmpOp::Eq, Val::Const(1), Val::Const(1)), Pred::True);
    /// ```
    pub fn cmp(op: CmpOp, lhs: Val, rhs: Val) -> Pred {
        if let (Val::Const(a), Val::Const(b)) = (&lhs, &rhs) {
            return if op.apply(*a, *b) {
                Pred::True
            } else {
                Pred::False
            };
        }
        Pred::Cmp { op, lhs, rhs }
    }

    /// `lhs == k`.
    ///
    /// ```
    /// use sluice_ir::{Pred, Val};
    /// assert!(matches!(Pred::eq(Val::Len, 1), Pred::Cmp { .. }));
    /// ```
    pub fn eq(lhs: Val, k: u32) -> Pred {
        Pred::cmp(CmpOp::Eq, lhs, Val::Const(k))
    }

    /// `(lhs & mask) == k`, without the mask when it is all ones.
    ///
    /// ```
    /// use sluice_ir::{Pred, Val};
    /// assert_eq!(Pred::masked_eq(Val::Len, u32::MAX, 1), Pred::eq(Val::Len, 1));
    /// ```
    pub fn masked_eq(lhs: Val, mask: u32, k: u32) -> Pred {
        if mask == u32::MAX {
            Pred::eq(lhs, k)
        } else {
            Pred::eq(Val::bin(BinOp::And, lhs, Val::Const(mask)), k)
        }
    }

    /// Negation, removing double negations and folding constants.
    ///
    /// ```
    /// use sluice_ir::Pred;
    /// assert_eq!(Pred::not(Pred::True), Pred::False);
    /// ```
    #[allow(clippy::should_implement_trait)]
    pub fn not(p: Pred) -> Pred {
        match p {
            Pred::True => Pred::False,
            Pred::False => Pred::True,
            Pred::Not(inner) => *inner,
            p => Pred::Not(Box::new(p)),
        }
    }

    /// Conjunction: flattens nested `and`s, drops `true`s, and drops what
    /// follows a `false` (it is never evaluated). Operands before a `false`
    /// stay: their loads may abort.
    ///
    /// ```
    /// use sluice_ir::Pred;
    /// assert_eq!(Pred::and(vec![Pred::True, Pred::False, Pred::True]), Pred::False);
    /// ```
    pub fn and(ps: Vec<Pred>) -> Pred {
        Pred::junction(ps, true)
    }

    /// Disjunction: flattens nested `or`s, drops `false`s, and drops what
    /// follows a `true`.
    ///
    /// ```
    /// use sluice_ir::Pred;
    /// assert_eq!(Pred::or(vec![Pred::False, Pred::False]), Pred::False);
    /// ```
    pub fn or(ps: Vec<Pred>) -> Pred {
        Pred::junction(ps, false)
    }

    fn junction(ps: Vec<Pred>, is_and: bool) -> Pred {
        // Already flat and free of constants: keep the vector as it is.
        let plain = |p: &Pred| match p {
            Pred::True | Pred::False => false,
            Pred::And(_) => !is_and,
            Pred::Or(_) => is_and,
            _ => true,
        };
        if ps.len() >= 2 && ps.iter().all(plain) {
            return if is_and { Pred::And(ps) } else { Pred::Or(ps) };
        }
        // `unit` is the neutral element, `zero` the absorbing one.
        let (unit, zero) = if is_and {
            (Pred::True, Pred::False)
        } else {
            (Pred::False, Pred::True)
        };
        let mut out = Vec::with_capacity(ps.len());
        let mut absorbed = false;
        let mut stack: Vec<std::vec::IntoIter<Pred>> = vec![ps.into_iter()];
        'outer: while let Some(it) = stack.last_mut() {
            for p in it.by_ref() {
                match p {
                    Pred::And(inner) if is_and => {
                        stack.push(inner.into_iter());
                        continue 'outer;
                    }
                    Pred::Or(inner) if !is_and => {
                        stack.push(inner.into_iter());
                        continue 'outer;
                    }
                    p if p == unit => {}
                    p if p == zero => {
                        out.push(p);
                        absorbed = true;
                        break 'outer;
                    }
                    p => out.push(p),
                }
            }
            stack.pop();
        }
        if absorbed && out.len() == 1 {
            return zero;
        }
        match out.len() {
            0 => unit,
            1 => out.pop().expect("one element"),
            _ if is_and => Pred::And(out),
            _ => Pred::Or(out),
        }
    }

    /// Whether a [`Val::Shared`] occurs in the predicate (not looking
    /// inside shared values): engines that cannot reuse a computed value
    /// hand such filters to one that can.
    ///
    /// ```
    /// use sluice_ir::{Pred, Val};
    /// assert!(!Pred::True.has_shared());
    /// assert!(Pred::eq(Val::shared(Val::ip_hdr_len(14)), 20).has_shared());
    /// ```
    pub fn has_shared(&self) -> bool {
        match self {
            Pred::True | Pred::False => false,
            Pred::Cmp { lhs, rhs, .. } => lhs.has_shared() || rhs.has_shared(),
            Pred::Not(p) => p.has_shared(),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().any(Pred::has_shared),
            Pred::In { val, .. } => val.has_shared(),
            Pred::ProtoChain { start, .. } => start.has_shared(),
        }
    }

    /// True if evaluating the predicate can abort the filter.
    ///
    /// ```
    /// assert!(!sluice_ir::Pred::True.can_abort());
    /// ```
    pub fn can_abort(&self) -> bool {
        match self {
            Pred::True | Pred::False => false,
            Pred::Cmp { lhs, rhs, .. } => lhs.can_abort() || rhs.can_abort(),
            Pred::Not(p) => p.can_abort(),
            Pred::And(ps) | Pred::Or(ps) => ps.iter().any(Pred::can_abort),
            Pred::ProtoChain { .. } => true,
            Pred::In { val, .. } => val.can_abort(),
        }
    }

    /// `val ∈ keys`; the keys are sorted and deduplicated here. One key is a
    /// plain comparison, none is false (the value is still evaluated).
    ///
    /// ```
    /// use sluice_ir::{Pred, Val};
    /// let p = Pred::is_in(Val::Len, vec![60, 40, 60]);
    /// assert!(matches!(&p, Pred::In { keys, .. } if keys.len() == 2));
    /// assert_eq!(sluice_ir::eval_pred(&p, &[], 40), Ok(true));
    /// ```
    pub fn is_in(val: Val, mut keys: Vec<u32>) -> Pred {
        keys.sort_unstable();
        keys.dedup();
        match keys.len() {
            1 => Pred::eq(val, keys[0]),
            _ => Pred::In {
                val,
                keys: keys.into(),
            },
        }
    }
}

/// A whole filter: a predicate and the value returned when it holds.
///
/// libpcap's compiled expressions return the snapshot length on accept and 0
/// on reject.
///
/// ```
/// let f = sluice_ir::Filter::new(sluice_ir::Pred::True, 262144);
/// assert_eq!(f.run(&[], 0), 262144);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// When the filter accepts.
    pub pred: Pred,
    /// The value returned on accept (non-zero means accept).
    pub accept: u32,
}

impl Filter {
    /// A filter from its predicate and accept value.
    ///
    /// ```
    /// let f = sluice_ir::Filter::new(sluice_ir::Pred::False, 1);
    /// assert_eq!(f.run(&[1, 2, 3], 3), 0);
    /// ```
    pub fn new(pred: Pred, accept: u32) -> Filter {
        Filter { pred, accept }
    }

    /// Run the reference interpreter on one packet: the accept value, or 0.
    ///
    /// `pkt` is the captured bytes, `wirelen` the length on the wire.
    ///
    /// ```
    /// let f = sluice_ir::Filter::new(sluice_ir::Pred::True, 7);
    /// assert_eq!(f.run(&[], 0), 7);
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match eval_pred(&self.pred, pkt, wirelen) {
            Ok(true) => self.accept,
            _ => 0,
        }
    }
}
