//! A value as a flat program: its operations in postfix order, run over a
//! small stack in one loop instead of the interpreter's recursion.
//!
//! The rule: a flat program means exactly what [`crate::eval_val`] says of
//! its value, aborts included (a load past the packet, a division by
//! zero). Operands run left to right, as the interpreter takes them, and a
//! [`Val::Shared`] runs its inner value where it stands (it depends on the
//! packet only, so running it again gives the same answer). It is for
//! values computed once a packet on a hot path: the decision tree's fields
//! that are not a load at a fixed place, such as a word of the TCP payload
//! (`tcp[((tcp[12:1] & 0xf0) >> 2):4]`).
//!
//! ```
//! use sluice_ir::{flat::Flat, BinOp, Size, Val};
//! // The TCP header's length, behind an IPv4 header.
//! let v = Val::bin(
//!     BinOp::Shr,
//!     Val::bin(BinOp::And, Val::load(Val::ip_hdr_len(14), 26, Size::Byte), Val::Const(0xf0)),
//!     Val::Const(2),
//! );
//! let f = Flat::new(&v).unwrap();
//! let mut pkt = [0u8; 60];
//! pkt[14] = 0x45;
//! pkt[46] = 0x50;
//! assert_eq!(f.eval(&pkt, 60), Some(20));
//! assert_eq!(f.eval(&pkt[..40], 60), None); // past the packet: abort
//! assert_eq!(f.eval(&pkt, 60), sluice_ir::eval_val(&v, &pkt, 60).ok());
//! ```

use crate::eval::load_traced;
use crate::{BinOp, Val};

/// The deepest stack a flat program may need; deeper values stay with the
/// interpreter ([`Flat::new`] says `None`).
pub const MAX_DEPTH: usize = 16;

/// The most steps a flat program has (a shared value counts each time it is
/// used).
pub const MAX_STEPS: usize = 256;

/// One operation of a flat program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Push a constant.
    Const(u32),
    /// Push the wire length.
    Len,
    /// Replace the top (a base) by `width` bytes at base + `offset`.
    Load { offset: u32, width: u32 },
    /// Replace the two top values (left below right) by `left op right`.
    Bin(BinOp),
    /// Replace the top by its negation (modulo 2^32).
    Neg,
    /// Replace the top by `top op k` (a constant and an operator fused).
    BinK(BinOp, u32),
    /// Push `width` bytes at `base + offset` (a constant base and a load
    /// fused).
    LoadAt { base: u32, offset: u32, width: u32 },
    /// Push `4 * (byte at base + offset & 0xf)`: an IPv4 header's length
    /// (a byte's load, a mask and a shift fused).
    HdrLen { base: u32, offset: u32 },
}

/// A value compiled to a flat program (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flat {
    steps: Box<[Step]>,
}

impl Flat {
    /// The flat program of `v`, or `None` when it would need a stack deeper
    /// than [`MAX_DEPTH`] or more than [`MAX_STEPS`] steps.
    ///
    /// ```
    /// use sluice_ir::{flat::Flat, Val};
    /// assert_eq!(Flat::new(&Val::Len).unwrap().eval(&[], 60), Some(60));
    /// ```
    pub fn new(v: &Val) -> Option<Flat> {
        let mut steps = Vec::new();
        compile(v, &mut steps, &mut 0)?;
        Some(Flat {
            steps: fuse(&steps).into(),
        })
    }

    /// The value on a packet (`wirelen` bytes on the wire), or `None` where
    /// the interpreter aborts.
    ///
    /// ```
    /// use sluice_ir::{flat::Flat, BinOp, Val};
    /// let div = Val::Bin(BinOp::Div, Box::new(Val::Len), Box::new(Val::Const(0)));
    /// assert_eq!(Flat::new(&div).unwrap().eval(&[], 60), None);
    /// ```
    pub fn eval(&self, pkt: &[u8], wirelen: u32) -> Option<u32> {
        self.run(pkt, wirelen, &mut |_| {})
    }

    /// [`Flat::eval`], telling `touch` each thing of the packet the value
    /// reads, in order: the value is a function of those alone. A packet
    /// that has the same bytes where this one's loads read (as long as
    /// they are within it), the same wire length if it was read, and that
    /// ends before the end of the load that aborted (the last touched, if
    /// one did) has the same value.
    ///
    /// ```
    /// use sluice_ir::{flat::{Flat, Touch}, Size, Val};
    /// // The byte at 2 + the byte at 0.
    /// let f = Flat::new(&Val::load(Val::load_abs(0, Size::Byte), 2, Size::Byte)).unwrap();
    /// let mut seen = Vec::new();
    /// assert_eq!(f.eval_traced(&[1, 0, 0, 9], 4, |t| seen.push(t)), Some(9));
    /// assert_eq!(seen, [Touch::Bytes { at: 0, width: 1 }, Touch::Bytes { at: 3, width: 1 }]);
    /// ```
    pub fn eval_traced(
        &self,
        pkt: &[u8],
        wirelen: u32,
        mut touch: impl FnMut(Touch),
    ) -> Option<u32> {
        self.run(pkt, wirelen, &mut touch)
    }

    #[inline(always)]
    fn run(&self, pkt: &[u8], wirelen: u32, touch: &mut impl FnMut(Touch)) -> Option<u32> {
        let mut stack = [0u32; MAX_DEPTH];
        let mut top = 0usize;
        for step in self.steps.iter() {
            match *step {
                Step::Const(k) => {
                    stack[top] = k;
                    top += 1;
                }
                Step::Len => {
                    touch(Touch::Len);
                    stack[top] = wirelen;
                    top += 1;
                }
                Step::Load { offset, width } => {
                    stack[top - 1] = load_traced(pkt, touch, stack[top - 1], offset, width).ok()?;
                }
                Step::Bin(op) => {
                    top -= 1;
                    stack[top - 1] = op.apply(stack[top - 1], stack[top])?;
                }
                Step::Neg => stack[top - 1] = stack[top - 1].wrapping_neg(),
                Step::BinK(op, k) => stack[top - 1] = op.apply(stack[top - 1], k)?,
                Step::LoadAt {
                    base,
                    offset,
                    width,
                } => {
                    stack[top] = load_traced(pkt, touch, base, offset, width).ok()?;
                    top += 1;
                }
                Step::HdrLen { base, offset } => {
                    stack[top] = (load_traced(pkt, touch, base, offset, 1).ok()? & 0xf) << 2;
                    top += 1;
                }
            }
        }
        Some(stack[0])
    }
}

/// What a flat program read of a packet (see [`Flat::eval_traced`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Touch {
    /// `width` bytes at `at` (past the packet's end when the load
    /// aborted).
    Bytes {
        /// The first byte's offset.
        at: u64,
        /// Bytes read.
        width: u32,
    },
    /// The wire length.
    Len,
}

/// Append `v`'s steps; `depth` is the stack's height before them (one more
/// after).
fn compile(v: &Val, steps: &mut Vec<Step>, depth: &mut usize) -> Option<()> {
    if steps.len() >= MAX_STEPS {
        return None;
    }
    match v {
        Val::Const(k) => push(Step::Const(*k), steps, depth)?,
        Val::Len => push(Step::Len, steps, depth)?,
        Val::Load { base, offset, size } => {
            compile(base, steps, depth)?;
            steps.push(Step::Load {
                offset: *offset,
                width: size.bytes(),
            });
        }
        Val::Bin(op, a, b) => {
            compile(a, steps, depth)?;
            compile(b, steps, depth)?;
            steps.push(Step::Bin(*op));
            *depth -= 1;
        }
        Val::Neg(a) => {
            compile(a, steps, depth)?;
            steps.push(Step::Neg);
        }
        Val::Shared(s) => compile(s.val(), steps, depth)?,
    }
    (steps.len() <= MAX_STEPS).then_some(())
}

/// The same program with common runs as one step each: a constant and
/// the operator or load that takes it, and an IPv4 header's length. Each
/// fused step computes what its run did, and aborts where it did.
fn fuse(steps: &[Step]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for &step in steps {
        let fused = match (out.last().copied(), step) {
            (Some(Step::Const(k)), Step::Bin(op)) => Some(Step::BinK(op, k)),
            (Some(Step::Const(base)), Step::Load { offset, width }) => Some(Step::LoadAt {
                base,
                offset,
                width,
            }),
            _ => None,
        };
        match fused {
            Some(f) => *out.last_mut().expect("a step to fuse with") = f,
            None => out.push(step),
        }
        // `byte & 0xf << 2`, now three steps at the end.
        if let [.., Step::LoadAt {
            base,
            offset,
            width: 1,
        }, Step::BinK(BinOp::And, 0xf), Step::BinK(BinOp::Shl, 2)] = out[..]
        {
            out.truncate(out.len() - 3);
            out.push(Step::HdrLen { base, offset });
        }
    }
    out
}

/// Append a step that pushes a value.
fn push(step: Step, steps: &mut Vec<Step>, depth: &mut usize) -> Option<()> {
    if *depth >= MAX_DEPTH {
        return None;
    }
    steps.push(step);
    *depth += 1;
    Some(())
}

/// For tests of traces: `other`, made to agree with `a` where `touched`
/// (a trace on `a`) says, and no shorter than those bytes and shorter
/// than the end of the load that aborted.
#[cfg(test)]
pub(crate) fn agreeing(a: &[u8], touched: &[Touch], other: Vec<u8>) -> Vec<u8> {
    let (mut need, mut below) = (0u64, u64::MAX);
    for t in touched {
        if let Touch::Bytes { at, width } = *t {
            let end = at + u64::from(width);
            if end <= a.len() as u64 {
                need = need.max(end);
            } else {
                below = below.min(end);
            }
        }
    }
    let mut b = other;
    b.resize((b.len() as u64).clamp(need, below - 1) as usize, 0);
    for t in touched {
        if let Touch::Bytes { at, width } = *t {
            let r = at as usize..(at + u64::from(width)) as usize;
            if r.end <= a.len() {
                b[r.clone()].copy_from_slice(&a[r]);
            }
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Size;
    use proptest::prelude::*;

    fn packet() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![4 => any::<u8>(), 1 => Just(0x45), 1 => Just(0)],
            0..80,
        )
    }

    fn val() -> impl Strategy<Value = Val> {
        let leaf = prop_oneof![
            prop_oneof![
                0u32..4,
                Just(0xf),
                Just(0xf0),
                Just(31),
                Just(32),
                any::<u32>()
            ]
            .prop_map(Val::Const),
            Just(Val::Len),
            (0u32..70, 0usize..3)
                .prop_map(|(o, s)| Val::load_abs(o, [Size::Byte, Size::Half, Size::Word][s])),
        ];
        leaf.prop_recursive(5, 40, 2, |inner| {
            prop_oneof![
                (inner.clone(), 0u32..40, 0usize..3).prop_map(|(b, o, s)| Val::Load {
                    base: Box::new(b),
                    offset: o,
                    size: [Size::Byte, Size::Half, Size::Word][s],
                }),
                (inner.clone(), inner.clone(), 0usize..BinOp::ALL.len())
                    .prop_map(|(a, b, i)| Val::Bin(BinOp::ALL[i], Box::new(a), Box::new(b))),
                inner.clone().prop_map(|a| Val::Neg(Box::new(a))),
                inner.prop_map(Val::shared),
            ]
        })
    }

    proptest! {
        #[test]
        fn a_flat_program_answers_as_the_interpreter(v in val(), pkt in packet(), wirelen in 0u32..200) {
            if let Some(f) = Flat::new(&v) {
                prop_assert_eq!(f.eval(&pkt, wirelen), crate::eval_val(&v, &pkt, wirelen).ok(), "{:?}", v);
            }
        }

        /// A packet that agrees with another where its value's trace
        /// says has the same value.
        #[test]
        fn the_trace_says_what_the_value_depends_on(
            v in val(), a in packet(), wa in 0u32..200, other in packet(), wb in 0u32..200,
        ) {
            let Some(f) = Flat::new(&v) else { return Ok(()) };
            let mut touched = Vec::new();
            let value = f.eval_traced(&a, wa, |t| touched.push(t));
            prop_assert_eq!(value, f.eval(&a, wa));
            let b = agreeing(&a, &touched, other);
            let wb = if touched.contains(&Touch::Len) { wa } else { wb };
            prop_assert_eq!(f.eval(&b, wb), value, "{:?} on {:?} and {:?}", v, a, b);
        }
    }

    #[test]
    fn the_tcp_payload_word_answers_as_the_interpreter() {
        let word = Val::tcp_payload_word(14, Val::shared(Val::ip_hdr_len(14)));
        let f = Flat::new(&word).unwrap();
        // An IPv4 header of 24 bytes whose high bits are set too (they
        // are not the length), a TCP header of 20.
        let mut pkt = vec![0u8; 70];
        pkt[14] = 0xf6;
        pkt[50] = 0x5f;
        pkt[58..62].copy_from_slice(b"GET ");
        assert_eq!(f.eval(&pkt, 70), Some(0x4745_5420));
        // Two header lengths, the TCP one's load, mask and shift, the sum
        // and the word's load.
        assert_eq!(f.steps.len(), 7, "{:?}", f.steps);
        for n in 0..=pkt.len() {
            assert_eq!(
                f.eval(&pkt[..n], 70),
                crate::eval_val(&word, &pkt[..n], 70).ok(),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn values_too_deep_stay_with_the_interpreter() {
        // Each right operand waits on the stack: depth grows by one a level.
        let mut v = Val::Len;
        for _ in 0..MAX_DEPTH - 1 {
            v = Val::Bin(BinOp::Add, Box::new(Val::Const(1)), Box::new(v));
        }
        assert!(Flat::new(&v).is_some());
        let deeper = Val::Bin(BinOp::Add, Box::new(Val::Const(1)), Box::new(v));
        assert!(Flat::new(&deeper).is_none());
    }
}
