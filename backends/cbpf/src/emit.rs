//! Code generation for the DAG's nodes and layout with long-jump trampolines.

use sluice_bpf::op::*;
use sluice_bpf::Insn;
use sluice_ir::{BinOp, CmpOp, Size, Val};

use std::collections::HashMap;

use crate::dag::{Dag, Node, NodeId, Rhs, Test, ValId};
use crate::{LowerError, SCRATCH_WORDS};

/// How many header steps `protochain` takes before it aborts.
const PROTOCHAIN_STEPS: u32 = sluice_ir::eval::PROTOCHAIN_MAX_STEPS;

fn size_bits(s: Size) -> u16 {
    match s {
        Size::Byte => BPF_B,
        Size::Half => BPF_H,
        Size::Word => BPF_W,
    }
}

fn alu_bits(op: BinOp) -> u16 {
    match op {
        BinOp::Add => BPF_ADD,
        BinOp::Sub => BPF_SUB,
        BinOp::Mul => BPF_MUL,
        BinOp::Div => BPF_DIV,
        BinOp::Mod => BPF_MOD,
        BinOp::And => BPF_AND,
        BinOp::Or => BPF_OR,
        BinOp::Xor => BPF_XOR,
        BinOp::Shl => BPF_LSH,
        BinOp::Shr => BPF_RSH,
    }
}

fn jmp_bits(op: CmpOp) -> u16 {
    match op {
        CmpOp::Eq => BPF_JEQ,
        CmpOp::Gt => BPF_JGT,
        CmpOp::Ge => BPF_JGE,
        CmpOp::Set => BPF_JSET,
    }
}

/// The constant address of a byte load at a constant address, if any.
fn const_byte_addr(v: &Val) -> Option<u32> {
    match v {
        Val::Load {
            base,
            offset,
            size: Size::Byte,
        } => match **base {
            Val::Const(c) => c.checked_add(*offset),
            _ => None,
        },
        _ => None,
    }
}

/// `4 * (pkt[k] & 0xf)`, which `ldxb 4*([k]&0xf)` loads into X.
fn msh_addr(v: &Val) -> Option<u32> {
    let (Val::Bin(BinOp::Shl, inner, c) | Val::Bin(BinOp::Mul, inner, c)) = v else {
        return None;
    };
    let want = if matches!(v, Val::Bin(BinOp::Shl, ..)) {
        2
    } else {
        4
    };
    if **c != Val::Const(want) {
        return None;
    }
    match &**inner {
        Val::Bin(BinOp::And, a, b) => match (&**a, &**b) {
            (l, Val::Const(0xf)) | (Val::Const(0xf), l) => const_byte_addr(l),
            _ => None,
        },
        _ => None,
    }
}

/// Shared values ([`Val::Shared`]) get scratch words from the top down;
/// temporaries use the words below them.
struct Gen<'a> {
    vals: &'a [Val],
    out: Vec<Insn>,
    /// Shared values by id: their index (bit in `avail`, word
    /// `SCRATCH_WORDS - 1 - index`).
    shared: HashMap<usize, u32, crate::opt::FxBuild>,
    /// Shared values whose word holds them here (computed on every path
    /// to this point).
    avail: u64,
}

/// At most this many shared values get a scratch word each.
const MAX_SHARED: usize = 12;

impl Gen<'_> {
    fn stmt(&mut self, code: u16, k: u32) {
        self.out.push(Insn::stmt(code, k));
    }

    /// The scratch word for a temporary at `depth`.
    fn slot(&self, depth: u32) -> Result<u32, LowerError> {
        if depth + (self.shared.len() as u32) < SCRATCH_WORDS {
            Ok(depth)
        } else {
            Err(LowerError::TooComplex)
        }
    }

    /// A shared value's index, and whether its word holds it here.
    fn shared_at(&self, s: &sluice_ir::Shared) -> (u32, bool) {
        let i = self.shared[&s.id()];
        (i, self.avail & (1 << i) != 0)
    }

    fn shared_word(i: u32) -> u32 {
        SCRATCH_WORDS - 1 - i
    }

    /// Whether `v` is a shared value its word holds here.
    fn held(&self, v: &Val) -> bool {
        matches!(v, Val::Shared(s) if self.shared_at(s).1)
    }

    /// Load `v` into X without touching A, if it is that simple.
    fn val_x(&mut self, v: &Val) -> bool {
        match v {
            Val::Const(k) => self.stmt(BPF_LDX | BPF_W | BPF_IMM, *k),
            Val::Len => self.stmt(BPF_LDX | BPF_W | BPF_LEN, 0),
            Val::Shared(s) if self.shared_at(s).1 => {
                let i = self.shared_at(s).0;
                self.stmt(BPF_LDX | BPF_MEM, Self::shared_word(i))
            }
            v => match msh_addr(v) {
                Some(k) => self.stmt(BPF_LDX | BPF_B | BPF_MSH, k),
                None => return false,
            },
        }
        true
    }

    fn x_simple(&self, v: &Val) -> bool {
        matches!(v, Val::Const(_) | Val::Len) || self.held(v) || msh_addr(v).is_some()
    }

    /// True if computing `v` into A leaves X alone.
    fn keeps_x(&self, v: &Val) -> bool {
        match v {
            Val::Const(_) | Val::Len => true,
            Val::Load { base, offset, .. } => {
                matches!(**base, Val::Const(c) if c.checked_add(*offset).is_some())
            }
            v => self.held(v),
        }
    }

    /// How many scratch words computing `v` needs (what [`Gen::val`] uses).
    fn need(&self, v: &Val) -> u32 {
        match v {
            Val::Const(_) | Val::Len => 0,
            Val::Shared(s) if self.shared_at(s).1 => 0,
            Val::Shared(s) => self.need(s.val()),
            Val::Load { base, .. } => match **base {
                Val::Const(_) => 0,
                ref b if self.x_simple(b) => 0,
                ref b => self.need(b),
            },
            Val::Neg(a) => self.need(a),
            Val::Bin(op, a, b) => match (op, &**b) {
                (_, Val::Const(_)) => self.need(a),
                (BinOp::Shl | BinOp::Shr, b) => self.need(b).max(self.need(a) + 2),
                (_, b) if self.x_simple(b) => self.need(a),
                (_, b) => self.pair_need(a, b).0,
            },
        }
    }

    /// Scratch words needed to get `a` into A and `b` into X through
    /// memory, and whether `b` goes first.
    fn pair_need(&self, a: &Val, b: &Val) -> (u32, bool) {
        let (na, nb) = (self.need(a), self.need(b));
        if self.keeps_x(a) {
            return (nb, true);
        }
        let b_first = nb.max(na + 1);
        let a_first = na.max(nb + 1);
        if b_first <= a_first {
            (b_first, true)
        } else {
            (a_first, false)
        }
    }

    /// A = `a`, X = `b`, through `M[depth]`, computing first the side that
    /// needs more scratch. Both sides are pure apart from aborts, and any
    /// abort aborts the whole filter, so the order does not matter.
    fn pair(&mut self, a: &Val, b: &Val, depth: u32) -> Result<(), LowerError> {
        if self.keeps_x(a) {
            self.val(b, depth)?;
            self.stmt(BPF_MISC | BPF_TAX, 0);
            return self.val(a, depth);
        }
        let s = self.slot(depth)?;
        if self.pair_need(a, b).1 {
            self.val(b, depth)?;
            self.stmt(BPF_ST, s);
            self.val(a, depth + 1)?;
            self.stmt(BPF_LDX | BPF_MEM, s);
        } else {
            self.val(a, depth)?;
            self.stmt(BPF_ST, s);
            self.val(b, depth + 1)?;
            self.stmt(BPF_MISC | BPF_TAX, 0);
            self.stmt(BPF_LD | BPF_MEM, s);
        }
        Ok(())
    }

    /// Compute `v` into A. Clobbers X and `M[depth..]`.
    fn val(&mut self, v: &Val, depth: u32) -> Result<(), LowerError> {
        match v {
            Val::Const(k) => self.stmt(BPF_LD | BPF_W | BPF_IMM, *k),
            Val::Len => self.stmt(BPF_LD | BPF_W | BPF_LEN, 0),
            Val::Load { base, offset, size } => {
                let sz = size_bits(*size);
                match **base {
                    Val::Const(c) => match c.checked_add(*offset) {
                        Some(k) => self.stmt(BPF_LD | sz | BPF_ABS, k),
                        None => {
                            // Beyond 4 GiB: `ld [x + k]` checks without
                            // wrap-around, so this always aborts.
                            self.stmt(BPF_LDX | BPF_W | BPF_IMM, c);
                            self.stmt(BPF_LD | sz | BPF_IND, *offset);
                        }
                    },
                    ref b => {
                        if !self.val_x(b) {
                            self.val(b, depth)?;
                            self.stmt(BPF_MISC | BPF_TAX, 0);
                        }
                        self.stmt(BPF_LD | sz | BPF_IND, *offset);
                    }
                }
            }
            Val::Neg(a) => {
                self.val(a, depth)?;
                self.stmt(BPF_ALU | BPF_NEG, 0);
            }
            Val::Bin(op, a, b) => self.bin(*op, a, b, depth)?,
            Val::Shared(s) => {
                // Its word once computed on every path here, else
                // computed now (where the value itself would be) and kept.
                let (i, held) = self.shared_at(s);
                let word = Self::shared_word(i);
                if held {
                    self.stmt(BPF_LD | BPF_MEM, word);
                } else {
                    self.val(s.val(), depth)?;
                    self.stmt(BPF_ST, word);
                    self.avail |= 1 << i;
                }
            }
        }
        Ok(())
    }

    fn bin(&mut self, op: BinOp, a: &Val, b: &Val, depth: u32) -> Result<(), LowerError> {
        let code = BPF_ALU | alu_bits(op);
        match (op, b) {
            (BinOp::Div | BinOp::Mod, Val::Const(0)) => {
                // Abort, after evaluating `a` (which may abort first: same result).
                self.val(a, depth)?;
                self.stmt(BPF_LDX | BPF_W | BPF_IMM, 0);
                self.stmt(BPF_ALU | BPF_DIV | BPF_X, 0);
            }
            (BinOp::Shl | BinOp::Shr, Val::Const(k)) if *k >= 32 => {
                self.val(a, depth)?;
                self.stmt(BPF_LD | BPF_W | BPF_IMM, 0);
            }
            (_, Val::Const(k)) => {
                self.val(a, depth)?;
                self.stmt(code | BPF_K, *k);
            }
            (BinOp::Shl | BinOp::Shr, b) => {
                // The IR says a shift by >= 32 gives 0; engines differ (libpcap
                // 1.10.3 on x86 shifts by the amount mod 32). Compute
                // (a << (s & 31)) & mask with mask = all ones iff s < 32.
                let s = self.slot(depth)?;
                let m = self.slot(depth + 1)?;
                self.val(b, depth)?;
                self.stmt(BPF_ST, s);
                self.stmt(BPF_ALU | BPF_RSH | BPF_K, 5);
                self.stmt(BPF_MISC | BPF_TAX, 0);
                self.stmt(BPF_ALU | BPF_NEG, 0);
                self.stmt(BPF_ALU | BPF_OR | BPF_X, 0);
                self.stmt(BPF_ALU | BPF_RSH | BPF_K, 31);
                self.stmt(BPF_ALU | BPF_SUB | BPF_K, 1);
                self.stmt(BPF_ST, m);
                self.stmt(BPF_LD | BPF_MEM, s);
                self.stmt(BPF_ALU | BPF_AND | BPF_K, 31);
                self.stmt(BPF_ST, s);
                self.val(a, depth + 2)?;
                self.stmt(BPF_LDX | BPF_MEM, s);
                self.stmt(code | BPF_X, 0);
                self.stmt(BPF_LDX | BPF_MEM, m);
                self.stmt(BPF_ALU | BPF_AND | BPF_X, 0);
            }
            (_, b) if self.x_simple(b) => {
                self.val(a, depth)?;
                self.val_x(b);
                self.stmt(code | BPF_X, 0);
            }
            (_, b) => {
                self.pair(a, b, depth)?;
                self.stmt(code | BPF_X, 0);
            }
        }
        Ok(())
    }

    /// Code of a comparison node; returns the conditional jump (code, k).
    fn cmp(
        &mut self,
        lhs: ValId,
        op: CmpOp,
        rhs: Rhs,
        a_known: bool,
    ) -> Result<(u16, u32), LowerError> {
        let jmp = BPF_JMP | jmp_bits(op);
        let vals = self.vals;
        let l = &vals[lhs as usize];
        match rhs {
            Rhs::K(k) => {
                if !a_known {
                    self.val(l, 0)?;
                }
                Ok((jmp | BPF_K, k))
            }
            Rhs::V(r) => {
                let r = &vals[r as usize];
                if self.x_simple(r) {
                    if !a_known {
                        self.val(l, 0)?;
                    }
                    self.val_x(r);
                } else {
                    self.pair(l, r, 0)?;
                }
                Ok((jmp | BPF_X, 0))
            }
        }
    }

    /// Load the byte at `start + k` (start constant, or variable in M[0]).
    fn start_byte(&mut self, start: &Val, k: u32) -> Result<(), LowerError> {
        match start {
            Val::Const(_) => self.val(
                &Val::Load {
                    base: Box::new(start.clone()),
                    offset: k,
                    size: Size::Byte,
                },
                0,
            ),
            _ => {
                self.stmt(BPF_LDX | BPF_MEM, 0);
                self.stmt(BPF_LD | BPF_B | BPF_IND, k);
                Ok(())
            }
        }
    }

    /// The `protochain` loop; returns the final conditional jump.
    ///
    /// Scratch: M[0] start (if variable), M[1] next header, M[2] offset of
    /// the current header from start, M[3] steps left, M[4] next header
    /// being read.
    fn protochain(&mut self, v6: bool, start: &Val, proto: u8) -> Result<(u16, u32), LowerError> {
        const AH: u32 = 51;
        const NONE: u32 = 59;
        let want = proto as u32;
        let base = self.out.len();
        // Its words 0 to 4 must be below the shared values'.
        self.slot(4)?;
        if !start.is_const() {
            self.val(start, 0)?;
            self.stmt(BPF_ST, 0);
        }
        if v6 {
            self.start_byte(start, 6)?;
            self.stmt(BPF_ST, 1);
            self.stmt(BPF_LD | BPF_W | BPF_IMM, 40);
            self.stmt(BPF_ST, 2);
        } else {
            self.start_byte(start, 0)?;
            self.stmt(BPF_ALU | BPF_AND | BPF_K, 0xf);
            self.stmt(BPF_ALU | BPF_LSH | BPF_K, 2);
            self.stmt(BPF_ST, 2);
            self.start_byte(start, 9)?;
            self.stmt(BPF_ST, 1);
        }
        self.stmt(BPF_LD | BPF_W | BPF_IMM, PROTOCHAIN_STEPS);
        self.stmt(BPF_ST, 3);
        self.stmt(BPF_LD | BPF_MEM, 1);

        // Jumps inside the block, patched at the end: (insn index, which
        // offset, label).
        #[derive(Clone, Copy, PartialEq)]
        enum L {
            Final,
            Ext,
            Ah,
            Step,
            Abort,
            Next,
        }
        let mut fix: Vec<(usize, bool, L)> = Vec::new();
        let jeq = |g: &mut Self, fix: &mut Vec<(usize, bool, L)>, k: u32, t: L, f: L| {
            fix.push((g.out.len(), true, t));
            fix.push((g.out.len(), false, f));
            g.out.push(Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0));
        };
        let top = self.out.len();
        jeq(self, &mut fix, want, L::Final, L::Next);
        jeq(self, &mut fix, NONE, L::Final, L::Next);
        if v6 {
            for h in [0, 60, 43, 44] {
                jeq(self, &mut fix, h, L::Ext, L::Next);
            }
        }
        jeq(self, &mut fix, AH, L::Ah, L::Final);
        let mut labels: Vec<(L, usize)> = Vec::new();
        for (label, ext) in [(L::Ext, true), (L::Ah, false)] {
            if label == L::Ext && !v6 {
                continue;
            }
            labels.push((label, self.out.len()));
            // A = byte at start + off (+1), with start + off not overflowing.
            match start {
                Val::Const(s) => {
                    self.stmt(BPF_LDX | BPF_MEM, 2);
                    self.stmt(BPF_LD | BPF_B | BPF_IND, *s);
                    self.stmt(BPF_ST, 4);
                    // If s + 1 overflows, the load above always aborted.
                    self.stmt(BPF_LD | BPF_B | BPF_IND, s.saturating_add(1));
                }
                _ => {
                    self.stmt(BPF_LD | BPF_MEM, 0);
                    self.stmt(BPF_LDX | BPF_MEM, 2);
                    self.stmt(BPF_ALU | BPF_ADD | BPF_X, 0);
                    fix.push((self.out.len(), true, L::Next));
                    fix.push((self.out.len(), false, L::Abort));
                    self.out
                        .push(Insn::jump(BPF_JMP | BPF_JGE | BPF_X, 0, 0, 0));
                    self.stmt(BPF_MISC | BPF_TAX, 0);
                    self.stmt(BPF_LD | BPF_B | BPF_IND, 0);
                    self.stmt(BPF_ST, 4);
                    self.stmt(BPF_LD | BPF_B | BPF_IND, 1);
                }
            }
            if ext {
                // off += (len + 1) * 8
                self.stmt(BPF_ALU | BPF_ADD | BPF_K, 1);
                self.stmt(BPF_ALU | BPF_LSH | BPF_K, 3);
                self.stmt(BPF_LDX | BPF_MEM, 2);
                self.stmt(BPF_ALU | BPF_ADD | BPF_X, 0);
                self.stmt(BPF_ST, 2);
                fix.push((self.out.len(), true, L::Step));
                self.stmt(BPF_JMP | BPF_JA, 0);
            } else {
                // off = (len + 2) * 4
                self.stmt(BPF_ALU | BPF_ADD | BPF_K, 2);
                self.stmt(BPF_ALU | BPF_LSH | BPF_K, 2);
                self.stmt(BPF_ST, 2);
            }
        }
        labels.push((L::Step, self.out.len()));
        self.stmt(BPF_LD | BPF_MEM, 3);
        self.stmt(BPF_ALU | BPF_SUB | BPF_K, 1);
        self.stmt(BPF_ST, 3);
        fix.push((self.out.len(), true, L::Abort));
        fix.push((self.out.len(), false, L::Next));
        self.out
            .push(Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 0));
        self.stmt(BPF_LD | BPF_MEM, 4);
        let here = self.out.len();
        self.stmt(BPF_JMP | BPF_JA, (top as u32).wrapping_sub(here as u32 + 1));
        labels.push((L::Abort, self.out.len()));
        self.stmt(BPF_RET | BPF_K, 0);
        // The final test is the instruction right after the block's code.
        labels.push((L::Final, self.out.len()));

        for (at, is_t, label) in fix {
            let target = if label == L::Next {
                at + 1
            } else {
                labels
                    .iter()
                    .find(|(l, _)| *l == label)
                    .expect("label placed")
                    .1
            };
            let off = target - (at + 1);
            let ins = &mut self.out[at];
            if ins.code == BPF_JMP | BPF_JA {
                ins.k = off as u32;
            } else {
                let off = u8::try_from(off).expect("protochain block is short");
                if is_t {
                    ins.jt = off;
                } else {
                    ins.jf = off;
                }
            }
        }
        debug_assert!(self.out.len() - base < 200);
        Ok((BPF_JMP | BPF_JEQ | BPF_K, want))
    }
}

/// Gives every shared value in `v` (and in shared values) an index, inner
/// ones first.
fn find_shared(v: &Val, out: &mut HashMap<usize, u32, crate::opt::FxBuild>) {
    match v {
        Val::Const(_) | Val::Len => {}
        Val::Load { base, .. } => find_shared(base, out),
        Val::Bin(_, a, b) => {
            find_shared(a, out);
            find_shared(b, out);
        }
        Val::Neg(a) => find_shared(a, out),
        Val::Shared(s) => {
            if !out.contains_key(&s.id()) {
                find_shared(s.val(), out);
                let i = out.len() as u32;
                out.insert(s.id(), i);
            }
        }
    }
}

/// One laid-out node.
struct Block {
    /// Code in `Gen::out`.
    code: std::ops::Range<usize>,
    /// Final instruction: a conditional jump (with `jt`/`jf` successors) or
    /// `ret` (leaf).
    last: Insn,
    succ: Option<(NodeId, NodeId)>,
}

pub(crate) fn emit(dag: &Dag, optimize: bool) -> Result<Vec<Insn>, LowerError> {
    emit_at_most(dag, optimize, crate::MAX_INSNS)
}

/// [`emit`], refusing programs of more than `max` instructions.
pub(crate) fn emit_at_most(dag: &Dag, optimize: bool, max: usize) -> Result<Vec<Insn>, LowerError> {
    let n = dag.nodes.len();
    // Reachable nodes, in decreasing id order (a topological order).
    let mut reach = vec![false; n];
    reach[dag.entry as usize] = true;
    for id in (0..n).rev() {
        if reach[id] {
            if let Node::Test { jt, jf, .. } = dag.nodes[id] {
                reach[jt as usize] = true;
                reach[jf as usize] = true;
            }
        }
    }
    let order: Vec<NodeId> = (0..n as NodeId)
        .rev()
        .filter(|&i| reach[i as usize])
        .collect();

    // What A holds on entry to each node, when all predecessors agree.
    const UNSEEN: u32 = u32::MAX;
    const MIXED: u32 = u32::MAX - 1;
    let mut a_in = vec![UNSEEN; n];
    a_in[dag.entry as usize] = MIXED;
    if optimize {
        for &id in &order {
            if let Node::Test { test, jt, jf } = dag.nodes[id as usize] {
                let out = match test {
                    Test::Cmp { lhs, .. } => lhs,
                    Test::ProtoChain { .. } => MIXED,
                };
                for s in [jt, jf] {
                    let slot = &mut a_in[s as usize];
                    *slot = if *slot == UNSEEN || *slot == out {
                        out
                    } else {
                        MIXED
                    };
                }
            }
        }
    }

    let mut gen = Gen {
        vals: &dag.vals,
        out: Vec::with_capacity(order.len() * 2),
        shared: HashMap::default(),
        avail: 0,
    };
    for &id in &order {
        if let Node::Test { test, .. } = dag.nodes[id as usize] {
            let (l, r) = match test {
                Test::Cmp { lhs, rhs, .. } => (lhs, if let Rhs::V(r) = rhs { r } else { lhs }),
                Test::ProtoChain { start, .. } => (start, start),
            };
            find_shared(&dag.vals[l as usize], &mut gen.shared);
            find_shared(&dag.vals[r as usize], &mut gen.shared);
        }
    }
    if gen.shared.len() > MAX_SHARED {
        return Err(LowerError::TooComplex);
    }
    // Which shared values each node's code finds in their words: those
    // computed on every path to it (the intersection over the edges into
    // it; the first node has none).
    let mut avail_in = vec![u64::MAX; n];
    avail_in[dag.entry as usize] = 0;
    let mut index = vec![u32::MAX; n];
    let mut blocks: Vec<Block> = Vec::with_capacity(order.len());
    for &id in &order {
        if gen.out.len() > max {
            return Err(LowerError::TooLarge);
        }
        index[id as usize] = blocks.len() as u32;
        gen.avail = avail_in[id as usize];
        let start = gen.out.len();
        let (last, succ) = match dag.nodes[id as usize] {
            Node::Leaf(k) => (Insn::stmt(BPF_RET | BPF_K, k), None),
            Node::Test { test, jt, jf } => {
                let (code, k) = match test {
                    Test::Cmp { lhs, op, rhs } => {
                        gen.cmp(lhs, op, rhs, a_in[id as usize] == lhs)?
                    }
                    Test::ProtoChain { v6, start, proto } => {
                        let start = dag.vals[start as usize].clone();
                        gen.protochain(v6, &start, proto)?
                    }
                };
                for next in [jt, jf] {
                    avail_in[next as usize] &= gen.avail;
                }
                (Insn::jump(code, k, 0, 0), Some((jt, jf)))
            }
        };
        blocks.push(Block {
            code: start..gen.out.len(),
            last,
            succ,
        });
    }
    let out = layout(&blocks, &index, &gen.out, |id| {
        match dag.nodes[id as usize] {
            Node::Leaf(k) => Some(k),
            _ => None,
        }
    });
    // (Trampolines add at most one instruction per jump.)
    if out.len() > max {
        return Err(LowerError::TooLarge);
    }
    Ok(out)
}

/// Place the blocks in order. A conditional jump further than 255
/// instructions goes through a trampoline: one already placed by a later
/// block when in reach, else a new one right after the jump (`ja`, or a copy
/// of the `ret` when the target is a leaf).
///
/// One pass from the end: positions are counted from the end of the program,
/// so everything a block jumps to is already placed when the block is.
fn layout(
    blocks: &[Block],
    index: &[u32],
    code: &[Insn],
    leaf: impl Fn(NodeId) -> Option<u32>,
) -> Vec<Insn> {
    /// Where an edge goes, as a distance from the end of the program.
    struct Placed {
        /// Distance from the end of the block's first instruction.
        start: usize,
        /// Distances of the jt and jf destinations.
        dest: (usize, usize),
        /// New trampolines right after the jump, by target.
        tramps: Vec<NodeId>,
    }
    let mut placed: Vec<Placed> = Vec::with_capacity(blocks.len());
    // Nearest trampoline to each target node, by distance from the end.
    let mut near: std::collections::HashMap<NodeId, usize, crate::opt::FxBuild> =
        Default::default();
    let mut cur = 0usize; // size of everything after the current block
    for b in blocks.iter().rev() {
        let Some((jt, jf)) = b.succ else {
            cur += 1;
            placed.push(Placed {
                start: cur,
                dest: (0, 0),
                tramps: Vec::new(),
            });
            continue;
        };
        // Nearest existing destination for a target.
        let best = |t: NodeId| {
            let direct = placed[blocks.len() - 1 - index[t as usize] as usize].start;
            near.get(&t).map_or(direct, |&d| d.max(direct))
        };
        let (bt, bf) = (best(jt), best(jf));
        // The jump is at distance cur + ntr + 1; a destination at distance d
        // is at offset cur + ntr - d.
        let mut need = (false, false);
        let mut tramps: Vec<NodeId> = Vec::new();
        loop {
            tramps.clear();
            if need.0 {
                tramps.push(jt);
            }
            if need.1 && !(need.0 && jt == jf) {
                tramps.push(jf);
            }
            let ntr = tramps.len();
            let far = |d: usize| cur + ntr - d > 255;
            let next = (need.0 || far(bt), need.1 || far(bf));
            if next == need {
                break;
            }
            need = next;
        }
        let ntr = tramps.len();
        let jump = cur + ntr + 1;
        let dest_of = |t: NodeId, is_far: bool, best: usize| {
            if is_far {
                let k = tramps.iter().position(|&x| x == t).expect("trampoline");
                jump - 1 - k
            } else {
                best
            }
        };
        let dest = (dest_of(jt, need.0, bt), dest_of(jf, need.1, bf));
        for (k, &t) in tramps.iter().enumerate() {
            near.insert(t, jump - 1 - k);
        }
        cur = jump + b.code.len();
        placed.push(Placed {
            start: cur,
            dest,
            tramps,
        });
    }
    placed.reverse();

    let total = cur;
    let addr = |d: usize| total - d;
    let mut out = Vec::with_capacity(total);
    for (b, p) in blocks.iter().zip(&placed) {
        debug_assert_eq!(out.len(), addr(p.start));
        out.extend_from_slice(&code[b.code.clone()]);
        let mut last = b.last;
        if b.succ.is_some() {
            let next = out.len() + 1;
            last.jt = (addr(p.dest.0) - next) as u8;
            last.jf = (addr(p.dest.1) - next) as u8;
        }
        out.push(last);
        for &t in &p.tramps {
            let here = out.len();
            let target = addr(placed[index[t as usize] as usize].start);
            out.push(match leaf(t) {
                Some(k) => Insn::stmt(BPF_RET | BPF_K, k),
                None => Insn::stmt(BPF_JMP | BPF_JA, (target - (here + 1)) as u32),
            });
        }
    }
    out
}
