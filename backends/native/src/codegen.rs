//! The code generator of one filter: an IR filter becomes one Cranelift
//! function ([`build`]), a packet at a time or a loop over a batch
//! ([`Shape`]). [`Gen`] lowers predicates and values, checking captured
//! lengths once for the tests that need them, turning runs of equality
//! tests into jump tables and set chains; the helpers below it read the
//! IR for what every path must load (`must`) and which tests can share
//! one load (`coalesce`).

use crate::batch::DescLayout;
use crate::{raw_const, raw_mask, settle, CodePages, NativeError, Stats};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, BlockCall, InstBuilder, JumpTableData, MemFlags, Signature, Type, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Size, Val};

/// Which machine function [`build`] generates.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `fn(pkt, caplen, wirelen) -> u32`: one packet, the verdict returned.
    Single,
    /// `fn(descs, n: u64, out: *mut u32)`: a loop over `n` packet
    /// descriptors (`batch::DescLayout`), the verdict of packet `i` written
    /// to `out[i]`.
    Batch,
}

/// Generate, compile and finalize one function for `filter`: the module that
/// owns the code and the address of its entry. `stats` counts what the
/// lowering emitted.
pub(crate) fn build(
    filter: &Filter,
    shape: Shape,
    stats: &mut Stats,
) -> Result<(JITModule, *const u8), NativeError> {
    let mut module = CodePages::module()?;
    let ptr = module.target_config().pointer_type();

    let mut ctx = module.make_context();
    let sig = &mut ctx.func.signature;
    match shape {
        Shape::Single => {
            sig.params.push(AbiParam::new(ptr));
            sig.params.push(AbiParam::new(types::I64));
            sig.params.push(AbiParam::new(types::I32));
            sig.returns.push(AbiParam::new(types::I32));
        }
        Shape::Batch => {
            sig.params.push(AbiParam::new(ptr));
            sig.params.push(AbiParam::new(types::I64));
            sig.params.push(AbiParam::new(ptr));
        }
    }

    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        // The first block in the layout is the function's entry: fill
        // it first, with a jump to the (empty, threaded away) start.
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let start = b.create_block();
        let reject = b.create_block();
        let accept = b.create_block();
        let (pkt, caplen, wirelen);
        // For a batch: the loop's head (parameter `i`), and the block that
        // steps to the next packet.
        let mut lp = None;
        match shape {
            Shape::Single => {
                b.ins().jump(start, &[]);
                (pkt, caplen, wirelen) = (params[0], params[1], params[2]);
            }
            Shape::Batch => {
                let (descs, n, out) = (params[0], params[1], params[2]);
                let layout = DescLayout::get();
                let head = b.create_block();
                let d = b.append_block_param(head, ptr);
                let slot = b.append_block_param(head, ptr);
                let next = b.create_block();
                let exit = b.create_block();
                // entry: if n == 0 return, else head(descs, out), with the
                // end of the descriptors in `end`.
                let end = layout.end(&mut b, ptr, descs, n);
                b.ins().brif(n, head, &[descs, out], exit, &[]);
                // head(d, slot): read the descriptor at d, then the filter.
                b.switch_to_block(head);
                (pkt, caplen, wirelen) = layout.read(&mut b, ptr, d);
                b.ins().jump(start, &[]);
                // next: d + stride < end ? head(d + stride, slot + 4) : return.
                b.switch_to_block(next);
                let (d1, slot1, more) = layout.step(&mut b, d, slot, end);
                b.ins().brif(more, head, &[d1, slot1], exit, &[]);
                b.switch_to_block(exit);
                b.ins().return_(&[]);
                lp = Some((slot, next));
            }
        }
        let mut g = Gen {
            b,
            ptr,
            pkt,
            caplen,
            wirelen,
            reject,
            known: 0,
            known_ind: Vec::new(),
            vars: 0,
            stats,
        };
        // The two exits: return the verdict, or store it in `out[i]` and
        // go on with the next packet.
        for (blk, k) in [(reject, 0), (accept, filter.accept)] {
            g.b.switch_to_block(blk);
            let k = g.b.ins().iconst(types::I32, k as i64);
            match lp {
                None => {
                    g.b.ins().return_(&[k]);
                }
                Some((slot, next)) => {
                    g.b.ins().store(MemFlags::trusted(), k, slot, 0);
                    g.b.ins().jump(next, &[]);
                }
            }
        }
        // Tests the path has already decided become jumps.
        let (pred, settled) = settle::settle(&filter.pred);
        g.stats.settled += settled;
        let first = g.lower(&pred, accept, reject);
        g.b.switch_to_block(start);
        g.b.ins().jump(first, &[]);
        g.b.seal_all_blocks();
        g.b.finalize();
    }

    let (code, bytes) = CodePages::finish(&mut module, &mut ctx, "filter")?;
    stats.code_bytes = bytes;
    Ok((module, code))
}

/// `protochain` result codes of [`protochain_helper`].
const PC_FALSE: i64 = 0;
const PC_TRUE: i64 = 1;

/// Called from generated code: the reference `protochain` walk. Returns 0
/// (false), 1 (true) or 2 (abort).
extern "C" fn protochain_helper(pkt: *const u8, caplen: u64, start: u32, v6_proto: u32) -> u32 {
    // SAFETY: generated code passes the `pkt` pointer and `caplen` of the
    // packet it is filtering, which `NativeFilter::run` (or `run_batch`, in
    // a descriptor) took from one live slice.
    let pkt = unsafe { std::slice::from_raw_parts(pkt, caplen as usize) };
    let p = Pred::ProtoChain {
        v6: v6_proto >> 8 != 0,
        start: Val::Const(start),
        proto: v6_proto as u8,
    };
    match sluice_ir::eval_pred(&p, pkt, 0) {
        Ok(false) => PC_FALSE as u32,
        Ok(true) => PC_TRUE as u32,
        Err(_) => 2,
    }
}

/// The code generator of one function.
struct Gen<'a, 's> {
    b: FunctionBuilder<'a>,
    ptr: Type,
    pkt: Value,
    caplen: Value,
    wirelen: Value,
    reject: Block,
    /// Every block being emitted is dominated by a check that the captured
    /// length is at least this.
    known: u64,
    /// Computed bases checked once for several loads: the base, a variable
    /// holding its value, and how many bytes past it are known captured.
    known_ind: Vec<(Val, Variable, u64)>,
    /// Variables declared so far.
    vars: u32,
    stats: &'s mut Stats,
}

/// Keys dense enough for a jump table: at least this many ...
const TABLE_MIN_KEYS: usize = 8;
/// ... spanning at most this many values per key.
const TABLE_MAX_SPAN_PER_KEY: u64 = 3;
/// Short key ranges end in a chain of equality tests.
const SET_CHAIN: usize = 4;

impl Gen<'_, '_> {
    /// The condition `lhs op rhs` in the current block. Equality and mask
    /// tests of 2- and 4-byte fields compare the bytes as loaded with the
    /// constant in the packet's byte order: no byte swap per packet.
    fn compare(&mut self, op: CmpOp, lhs: &Val, rhs: &Val) -> Value {
        match (op, lhs, rhs) {
            (
                CmpOp::Eq | CmpOp::Set,
                Val::Load {
                    base,
                    offset,
                    size: size @ (Size::Half | Size::Word),
                },
                Val::Const(k),
            ) => {
                let raw = self.load_raw(base, *offset, *size);
                self.stats.raw_compares += 1;
                let bytes = size.bytes();
                match (op, raw_const(*k, bytes)) {
                    (CmpOp::Eq, None) => self.b.ins().iconst(types::I8, 0),
                    (CmpOp::Eq, Some(rk)) => self.cmp_imm(op, raw, rk),
                    _ => self.cmp_imm(op, raw, raw_mask(*k, bytes)),
                }
            }
            (_, _, Val::Const(k)) => {
                let a = self.val(lhs);
                self.cmp_imm(op, a, *k)
            }
            _ => {
                let a = self.val(lhs);
                let c = self.val(rhs);
                self.cmp(op, a, c)
            }
        }
    }

    /// A fresh block that evaluates `p` and continues at `t` when it holds
    /// and at `f` when not (aborts go to `self.reject`). Blocks made here are
    /// reachable only through the returned block.
    fn lower(&mut self, p: &Pred, t: Block, f: Block) -> Block {
        match p {
            Pred::True => t,
            Pred::False => f,
            Pred::Cmp { op, lhs, rhs } => {
                let blk = self.b.create_block();
                self.b.switch_to_block(blk);
                let saved = self.known;
                let cond = self.compare(*op, lhs, rhs);
                self.b.ins().brif(cond, t, &[], f, &[]);
                self.known = saved;
                blk
            }
            Pred::Not(q) => self.lower(q, f, t),
            Pred::And(ps) if f == self.reject => self.lower_rejecting_and(ps, t),
            Pred::And(ps) => {
                let mut cur = t;
                for q in ps.iter().rev() {
                    cur = self.lower(q, cur, f);
                }
                cur
            }
            Pred::Or(ps) => {
                let mut cur = f;
                for q in ps.iter().rev() {
                    cur = self.lower(q, t, cur);
                }
                cur
            }
            Pred::In { val, keys } => {
                let blk = self.b.create_block();
                self.b.switch_to_block(blk);
                let saved = self.known;
                let v = self.val(val);
                self.known = saved;
                let tree = self.b.create_block();
                self.b.ins().jump(tree, &[]);
                self.set(tree, v, keys, t, f);
                blk
            }
            Pred::ProtoChain { v6, start, proto } => {
                let blk = self.b.create_block();
                self.b.switch_to_block(blk);
                let saved = self.known;
                let s = self.val(start);
                self.known = saved;
                let mut sig = Signature::new(self.b.func.signature.call_conv);
                sig.params.push(AbiParam::new(self.ptr));
                sig.params.push(AbiParam::new(types::I64));
                sig.params.push(AbiParam::new(types::I32));
                sig.params.push(AbiParam::new(types::I32));
                sig.returns.push(AbiParam::new(types::I32));
                let sigref = self.b.import_signature(sig);
                let helper = protochain_helper as extern "C" fn(_, _, _, _) -> u32;
                let callee = self.b.ins().iconst(self.ptr, helper as usize as i64);
                let arg = self
                    .b
                    .ins()
                    .iconst(types::I32, ((*v6 as i64) << 8) | *proto as i64);
                let call =
                    self.b
                        .ins()
                        .call_indirect(sigref, callee, &[self.pkt, self.caplen, s, arg]);
                let r = self.b.inst_results(call)[0];
                let done = self.b.create_block();
                let is_false = self.b.ins().icmp_imm(IntCC::Equal, r, PC_FALSE);
                self.b.ins().brif(is_false, f, &[], done, &[]);
                self.b.switch_to_block(done);
                let is_true = self.b.ins().icmp_imm(IntCC::Equal, r, PC_TRUE);
                self.b.ins().brif(is_true, t, &[], self.reject, &[]);
                blk
            }
        }
    }

    /// An `and` whose failure rejects the packet. Then a false conjunct and
    /// an aborting load have the same outcome, so the conjuncts (and those of
    /// nested `and`s) may be evaluated in any order and their loads checked
    /// ahead of time: DPF's atom coalescing and bounds-check aggregation.
    fn lower_rejecting_and(&mut self, ps: &[Pred], t: Block) -> Block {
        let mut flat = Vec::new();
        flatten_and(ps, &mut flat);
        let (conjuncts, merged) = coalesce(&flat);
        self.stats.coalesced += merged;
        let saved = self.known;
        let saved_ind = self.known_ind.len();
        let need = conjuncts.iter().map(must).max().unwrap_or(0);
        let fixed = need > self.known;
        if fixed {
            self.known = need;
        }
        // Computed bases read at least twice: checked once, at the head.
        let mut reached = Vec::new();
        for q in &conjuncts {
            must_ind(q, &mut reached);
        }
        let mut bases: Vec<(Val, u64, usize)> = Vec::new();
        for (base, end) in reached {
            match bases.iter_mut().find(|(b, _, _)| *b == base) {
                Some(e) => {
                    e.1 = e.1.max(end);
                    e.2 += 1;
                }
                None => bases.push((base, end, 1)),
            }
        }
        let mut checks = Vec::new();
        for (base, end, uses) in bases {
            if uses < 2
                || self
                    .known_ind
                    .iter()
                    .any(|(b, _, e)| *b == base && *e >= end)
            {
                continue;
            }
            let var = Variable::from_u32(self.vars);
            self.vars += 1;
            self.b.declare_var(var, types::I32);
            self.known_ind.push((base.clone(), var, end));
            checks.push((base, var, end));
        }
        let mut cur = t;
        for q in conjuncts.iter().rev() {
            cur = self.lower(q, cur, self.reject);
        }
        self.known_ind.truncate(saved_ind);
        if !fixed && checks.is_empty() {
            self.known = saved;
            return cur;
        }
        let head = self.b.create_block();
        self.b.switch_to_block(head);
        if fixed {
            self.stats.bounds_checks += 1;
            self.stats.aggregated_checks += 1;
            let short = self
                .b
                .ins()
                .icmp_imm(IntCC::UnsignedLessThan, self.caplen, need as i64);
            self.abort_if(short);
        }
        // (The bases' own loads are covered by the fixed check or checked.)
        for (base, var, end) in checks {
            let v = self.val(&base);
            self.b.def_var(var, v);
            self.stats.bounds_checks += 1;
            self.stats.aggregated_indirect += 1;
            let v64 = self.b.ins().uextend(types::I64, v);
            let last = self.b.ins().iadd_imm(v64, end as i64);
            let over = self
                .b
                .ins()
                .icmp(IntCC::UnsignedGreaterThan, last, self.caplen);
            self.abort_if(over);
        }
        self.b.ins().jump(cur, &[]);
        self.known = saved;
        head
    }

    /// Fill `blk` to test `v ∈ keys` (sorted, distinct): a jump table when
    /// dense, else a balanced search tree with chains of equality tests.
    fn set(&mut self, blk: Block, v: Value, keys: &[u32], t: Block, f: Block) {
        if keys.is_empty() {
            self.b.switch_to_block(blk);
            self.b.ins().jump(f, &[]);
            return;
        }
        let (lo, hi) = (keys[0], keys[keys.len() - 1]);
        let span = (hi - lo) as u64 + 1;
        if keys.len() >= TABLE_MIN_KEYS && span <= TABLE_MAX_SPAN_PER_KEY * keys.len() as u64 {
            self.stats.jump_tables += 1;
            self.b.switch_to_block(blk);
            let idx = if lo == 0 {
                v
            } else {
                self.b.ins().iadd_imm(v, -(lo as i64))
            };
            let mut table = Vec::with_capacity(span as usize);
            let mut it = keys.iter().peekable();
            for x in 0..span {
                let hit = it.next_if(|&&k| (k - lo) as u64 == x).is_some();
                let target = if hit { t } else { f };
                table.push(BlockCall::new(
                    target,
                    &[],
                    &mut self.b.func.dfg.value_lists,
                ));
            }
            let def = BlockCall::new(f, &[], &mut self.b.func.dfg.value_lists);
            let jt = self.b.create_jump_table(JumpTableData::new(def, &table));
            self.b.ins().br_table(idx, jt);
            return;
        }
        if keys.len() <= SET_CHAIN {
            let mut cur = f;
            for &k in keys.iter().rev() {
                let node = self.b.create_block();
                self.b.switch_to_block(node);
                let c = self.b.ins().icmp_imm(IntCC::Equal, v, k as i64);
                self.b.ins().brif(c, t, &[], cur, &[]);
                cur = node;
            }
            self.b.switch_to_block(blk);
            self.b.ins().jump(cur, &[]);
            return;
        }
        let mid = keys.len() / 2;
        let (high, low) = (self.b.create_block(), self.b.create_block());
        self.set(high, v, &keys[mid..], t, f);
        self.set(low, v, &keys[..mid], t, f);
        self.b.switch_to_block(blk);
        let c = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, v, keys[mid] as i64);
        self.b.ins().brif(c, high, &[], low, &[]);
    }

    fn cmp(&mut self, op: CmpOp, a: Value, c: Value) -> Value {
        match op {
            CmpOp::Eq => self.b.ins().icmp(IntCC::Equal, a, c),
            CmpOp::Gt => self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, c),
            CmpOp::Ge => self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, c),
            CmpOp::Set => {
                let m = self.b.ins().band(a, c);
                self.b.ins().icmp_imm(IntCC::NotEqual, m, 0)
            }
        }
    }

    fn cmp_imm(&mut self, op: CmpOp, a: Value, k: u32) -> Value {
        let k = k as i64;
        match op {
            CmpOp::Eq => self.b.ins().icmp_imm(IntCC::Equal, a, k),
            CmpOp::Gt => self.b.ins().icmp_imm(IntCC::UnsignedGreaterThan, a, k),
            CmpOp::Ge => self
                .b
                .ins()
                .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, a, k),
            CmpOp::Set => {
                let m = self.b.ins().band_imm(a, k);
                self.b.ins().icmp_imm(IntCC::NotEqual, m, 0)
            }
        }
    }

    /// Continue in a fresh block when `cond` is false; jump to reject when true.
    fn abort_if(&mut self, cond: Value) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, self.reject, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// Compute a value (32 bits) in the current block; may split it.
    fn val(&mut self, v: &Val) -> Value {
        match v {
            Val::Const(k) => self.b.ins().iconst(types::I32, *k as i64),
            Val::Len => self.wirelen,
            Val::Load { base, offset, size } => self.load(base, *offset, *size),
            Val::Bin(op, a, c) => {
                let x = self.val(a);
                match (**c).clone() {
                    Val::Const(k) => self.bin_imm(*op, x, k),
                    c => {
                        let y = self.val(&c);
                        self.bin(*op, x, y)
                    }
                }
            }
            Val::Neg(a) => {
                let x = self.val(a);
                self.b.ins().ineg(x)
            }
            // Its value, computed here (`NativeFilter::compile` leaves
            // filters with shared values to classic BPF, which reuses them).
            Val::Shared(s) => self.val(s.val()),
        }
    }

    fn bin(&mut self, op: BinOp, x: Value, y: Value) -> Value {
        if crate::divides(op) {
            let zero = self.b.ins().icmp_imm(IntCC::Equal, y, 0);
            self.abort_if(zero);
        }
        crate::arith(&mut self.b, op, x, y)
    }

    fn bin_imm(&mut self, op: BinOp, x: Value, k: u32) -> Value {
        let ki = k as i64;
        match op {
            BinOp::Add => self.b.ins().iadd_imm(x, ki),
            BinOp::Sub => self.b.ins().iadd_imm(x, (k.wrapping_neg()) as i64),
            BinOp::Mul => self.b.ins().imul_imm(x, ki),
            BinOp::Div | BinOp::Mod if k == 0 => {
                // Always aborts; the rest of this block is unreachable.
                self.b.ins().jump(self.reject, &[]);
                let dead = self.b.create_block();
                self.b.switch_to_block(dead);
                self.b.ins().iconst(types::I32, 0)
            }
            BinOp::Div => {
                let y = self.b.ins().iconst(types::I32, ki);
                self.b.ins().udiv(x, y)
            }
            BinOp::Mod => {
                let y = self.b.ins().iconst(types::I32, ki);
                self.b.ins().urem(x, y)
            }
            BinOp::And => self.b.ins().band_imm(x, ki),
            BinOp::Or => self.b.ins().bor_imm(x, ki),
            BinOp::Xor => self.b.ins().bxor_imm(x, ki),
            BinOp::Shl | BinOp::Shr if k >= 32 => self.b.ins().iconst(types::I32, 0),
            BinOp::Shl => self.b.ins().ishl_imm(x, ki),
            BinOp::Shr => self.b.ins().ushr_imm(x, ki),
        }
    }

    /// A big-endian load of `size` bytes at `base + offset`, bounds-checked
    /// unless a dominating check already covers it.
    fn load(&mut self, base: &Val, offset: u32, size: Size) -> Value {
        let x = self.load_raw(base, offset, size);
        match size {
            Size::Byte => x,
            Size::Half => {
                let x = self.b.ins().ireduce(types::I16, x);
                let x = self.b.ins().bswap(x);
                self.b.ins().uextend(types::I32, x)
            }
            Size::Word => self.b.ins().bswap(x),
        }
    }

    /// The `size` bytes at `base + offset` as the CPU loads them (host byte
    /// order, zero-extended to 32 bits), bounds-checked unless a dominating
    /// check already covers them.
    fn load_raw(&mut self, base: &Val, offset: u32, size: Size) -> Value {
        self.stats.loads += 1;
        let folded = fold_base(base, offset);
        if let Some((inner, offset)) = &folded {
            self.stats.folded_offsets += 1;
            self.stats.loads -= 1; // counted again by the call below
            return self.load_raw(inner, *offset, size);
        }
        let width = size.bytes() as u64;
        // `readonly` lets Cranelift treat the load as pure: it may share it
        // with an identical dominating load and hoist it out of a loop when
        // its address is loop-invariant. Filters have no loops, and in the
        // batch function's loop over packets every address depends on that
        // iteration's packet pointer, so no load can move above its length
        // check. (The FPL and merged generators, whose loops do have
        // invariant addresses, do not mark packet loads `readonly`.)
        let flags = MemFlags::new().with_notrap().with_readonly();
        let addr = match base {
            Val::Const(c) => {
                let start = *c as u64 + offset as u64;
                let end = start + width;
                if end > self.known {
                    self.stats.bounds_checks += 1;
                    let short =
                        self.b
                            .ins()
                            .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
                    self.abort_if(short);
                    // Later loads of this node are dominated by this check.
                    self.known = end;
                }
                self.b.ins().iadd_imm(self.pkt, start as i64)
            }
            base if self
                .known_ind
                .iter()
                .any(|(b, _, end)| b == base && offset as u64 + width <= *end) =>
            {
                // Checked at the head of the enclosing `and`.
                let var = self
                    .known_ind
                    .iter()
                    .find(|(b, _, end)| b == base && offset as u64 + width <= *end)
                    .map(|e| e.1)
                    .expect("just found");
                let b32 = self.b.use_var(var);
                let b64 = self.b.ins().uextend(types::I64, b32);
                let start = self.b.ins().iadd_imm(b64, offset as i64);
                let start = if self.ptr == types::I64 {
                    start
                } else {
                    self.b.ins().ireduce(self.ptr, start)
                };
                self.b.ins().iadd(self.pkt, start)
            }
            base => {
                let b32 = self.val(base);
                let b64 = self.b.ins().uextend(types::I64, b32);
                let start = self.b.ins().iadd_imm(b64, offset as i64);
                let end = self.b.ins().iadd_imm(start, width as i64);
                self.stats.bounds_checks += 1;
                let over = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
                self.abort_if(over);
                let start = if self.ptr == types::I64 {
                    start
                } else {
                    self.b.ins().ireduce(self.ptr, start)
                };
                self.b.ins().iadd(self.pkt, start)
            }
        };
        match size {
            Size::Byte => self.b.ins().uload8(types::I32, flags, addr, 0),
            Size::Half => self.b.ins().uload16(types::I32, flags, addr, 0),
            Size::Word => self.b.ins().load(types::I32, flags, addr, 0),
        }
    }
}

/// The largest end (offset + width) of a fixed-offset load that evaluating
/// `v` certainly reaches, unless it aborts first.
fn must_val(v: &Val) -> u64 {
    match v {
        Val::Const(_) | Val::Len => 0,
        Val::Load { base, offset, size } => match **base {
            Val::Const(c) => c as u64 + *offset as u64 + size.bytes() as u64,
            ref b => must_val(b),
        },
        Val::Bin(_, a, b) => must_val(a).max(must_val(b)),
        Val::Neg(a) => must_val(a),
        Val::Shared(s) => must_val(s.val()),
    }
}

/// The largest end of a fixed-offset load that evaluating `p` certainly
/// reaches, unless it aborts first.
fn must(p: &Pred) -> u64 {
    match p {
        Pred::True | Pred::False => 0,
        Pred::Cmp { lhs, rhs, .. } => must_val(lhs).max(must_val(rhs)),
        Pred::Not(q) => must(q),
        Pred::And(ps) | Pred::Or(ps) => ps.first().map_or(0, must),
        Pred::In { val, .. } => must_val(val),
        Pred::ProtoChain { start, .. } => must_val(start),
    }
}

/// DPF's constant shifts folded into offsets: a load at `(x + c) + offset`
/// is a load at `x + (c + offset)` when `x + c` cannot wrap at 32 bits, so
/// loads after one computed header share its base (one computation, one
/// aggregated check). `None` when there is nothing to fold.
fn fold_base(base: &Val, offset: u32) -> Option<(Val, u32)> {
    let Val::Bin(BinOp::Add, x, c) = base else {
        return None;
    };
    let (x, c) = match (&**x, &**c) {
        (x, Val::Const(c)) if !x.is_const() => (x, *c),
        (Val::Const(c), x) if !x.is_const() => (x, *c),
        _ => return None,
    };
    if x.upper_bound() + c as u64 > u32::MAX as u64 {
        return None;
    }
    let offset = offset.checked_add(c)?;
    // (Nested sums fold one constant per step.)
    Some(match fold_base(x, offset) {
        Some(deeper) => deeper,
        None => (x.clone(), offset),
    })
}

/// The conjuncts of an `and` whose failure rejects, nested `and`s opened
/// (their failure rejects too).
fn flatten_and(ps: &[Pred], out: &mut Vec<Pred>) {
    for p in ps {
        match p {
            Pred::And(qs) => flatten_and(qs, out),
            p => out.push(p.clone()),
        }
    }
}

/// Every `(base, end)` of a load from a computed base that evaluating `p`
/// certainly reaches, unless it aborts first (the indirect twin of [`must`]).
fn must_ind(p: &Pred, out: &mut Vec<(Val, u64)>) {
    match p {
        Pred::True | Pred::False => {}
        Pred::Cmp { lhs, rhs, .. } => {
            must_ind_val(lhs, out);
            must_ind_val(rhs, out);
        }
        Pred::Not(q) => must_ind(q, out),
        Pred::And(ps) | Pred::Or(ps) => {
            if let Some(q) = ps.first() {
                must_ind(q, out);
            }
        }
        Pred::In { val, .. } => must_ind_val(val, out),
        Pred::ProtoChain { start, .. } => must_ind_val(start, out),
    }
}

fn must_ind_val(v: &Val, out: &mut Vec<(Val, u64)>) {
    match v {
        Val::Const(_) | Val::Len => {}
        Val::Load { base, offset, size } => {
            let (b, off) = fold_base(base, *offset).unwrap_or(((**base).clone(), *offset));
            if !b.is_const() {
                out.push((b, off as u64 + size.bytes() as u64));
            }
            must_ind_val(base, out);
        }
        Val::Bin(_, a, b) => {
            must_ind_val(a, out);
            must_ind_val(b, out);
        }
        Val::Neg(a) => must_ind_val(a, out),
        Val::Shared(s) => must_ind_val(s.val(), out),
    }
}

/// `(load & mask) == value` on `bytes` bytes at `base + offset`: what atom
/// coalescing merges.
#[derive(Clone, Debug)]
struct Atom {
    base: Val,
    offset: u32,
    bytes: u32,
    mask: u32,
    value: u32,
}

/// A conjunct as an [`Atom`], when it is one (and can be true at all).
fn atom(p: &Pred) -> Option<Atom> {
    // `v & m == 0` is also written `not (v & m != 0)` (libpcap's `jset`).
    let unset = match p {
        Pred::Not(q) => match &**q {
            Pred::Cmp {
                op: CmpOp::Set,
                lhs,
                rhs: Val::Const(m),
            } => Some((lhs, *m)),
            _ => None,
        },
        _ => None,
    };
    let (lhs, k, unset_mask) = match (p, unset) {
        (_, Some((lhs, m))) => (lhs, &0u32, Some(m)),
        (
            Pred::Cmp {
                op: CmpOp::Eq,
                lhs,
                rhs: Val::Const(k),
            },
            None,
        ) => (lhs, k, None),
        _ => return None,
    };
    let (load, mask) = match (lhs, unset_mask) {
        (v, Some(m)) => (v, m),
        (Val::Bin(BinOp::And, a, m), None) => match **m {
            Val::Const(m) => (&**a, m),
            _ => return None,
        },
        (v, None) => (v, u32::MAX),
    };
    let Val::Load { base, offset, size } = load else {
        return None;
    };
    let (base, offset) = fold_base(base, *offset).unwrap_or(((**base).clone(), *offset));
    let bytes = size.bytes();
    let full = if bytes == 4 {
        u32::MAX
    } else {
        (1u32 << (8 * bytes)) - 1
    };
    let mask = mask & full;
    if *k & !mask != 0 || offset.checked_add(4).is_none() {
        return None; // never true: leave it to the ordinary lowering
    }
    Some(Atom {
        base,
        offset,
        bytes,
        mask,
        value: *k,
    })
}

/// DPF's atom coalescing on the conjuncts of an `and` whose failure
/// rejects: compares of adjacent bytes from the same base against
/// constants become one compare of up to 4 bytes (`src port` and `dst port`
/// one 32-bit compare). The merged compare takes the place of its first
/// part. Returns the conjuncts and how many compares were merged away.
fn coalesce(ps: &[Pred]) -> (Vec<Pred>, usize) {
    let atoms: Vec<(usize, Atom)> = ps
        .iter()
        .enumerate()
        .filter_map(|(i, p)| atom(p).map(|a| (i, a)))
        .collect();
    // index of a conjunct -> its replacement (None: merged into another)
    let mut replace: Vec<Option<Option<Pred>>> = vec![None; ps.len()];
    let mut merged = 0;
    let mut done = vec![false; atoms.len()];
    for i in 0..atoms.len() {
        if done[i] {
            continue;
        }
        // The atoms on the same base, by offset.
        let mut same: Vec<usize> = (i..atoms.len())
            .filter(|&j| !done[j] && atoms[j].1.base == atoms[i].1.base)
            .collect();
        same.sort_by_key(|&j| atoms[j].1.offset);
        let mut at = 0;
        while at < same.len() {
            // The longest run of adjacent atoms from `at` that is 2 or 4 bytes.
            let mut run = vec![same[at]];
            let mut bytes = atoms[same[at]].1.bytes;
            let mut best = (1, bytes);
            for &j in &same[at + 1..] {
                let a = &atoms[j].1;
                let last = &atoms[*run.last().expect("non-empty")].1;
                if a.offset != last.offset + last.bytes || bytes + a.bytes > 4 {
                    break;
                }
                run.push(j);
                bytes += a.bytes;
                if bytes == 2 || bytes == 4 {
                    best = (run.len(), bytes);
                }
            }
            let (len, bytes) = best;
            if len > 1 {
                let parts: Vec<&Atom> = run[..len].iter().map(|&j| &atoms[j].1).collect();
                let (mut mask, mut value) = (0u32, 0u32);
                for a in &parts {
                    let shift = 8 * a.bytes;
                    mask = (((mask as u64) << shift) | a.mask as u64) as u32;
                    value = (((value as u64) << shift) | a.value as u64) as u32;
                }
                let size = Size::from_bytes(bytes).expect("2 or 4 bytes");
                let load = Val::load(parts[0].base.clone(), parts[0].offset, size);
                let lhs = if mask == u32::MAX || (bytes == 2 && mask == 0xffff) {
                    load
                } else {
                    Val::bin(BinOp::And, load, Val::Const(mask))
                };
                let pred = Pred::Cmp {
                    op: CmpOp::Eq,
                    lhs,
                    rhs: Val::Const(value),
                };
                // The merged compare goes where the earliest part was.
                let first = run[..len].iter().map(|&j| atoms[j].0).min().expect("parts");
                for &j in &run[..len] {
                    done[j] = true;
                    replace[atoms[j].0] = Some(None);
                }
                replace[first] = Some(Some(pred));
                merged += len - 1;
            } else {
                done[run[0]] = true;
            }
            at += len;
        }
    }
    let out = ps
        .iter()
        .zip(replace)
        .filter_map(|(p, r)| match r {
            None => Some(p.clone()),
            Some(r) => r,
        })
        .collect();
    (out, merged)
}
