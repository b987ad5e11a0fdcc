//! A plan as one machine function (Cranelift).
//!
//! The tree becomes straight-line code in its own order: a node's leaf
//! appends its filters' slots, its field is read once (bounds-checked;
//! an abort goes straight to the skip edge), each small table is a chain
//! of compares against immediates, each large table is hashed and probed
//! as [`KeyTable`](sluice_classifier::table::KeyTable) lays it out, each
//! condition is a few compares, and every edge's code runs in place and
//! falls through to the next edge. Calls back into Rust
//! ([`super::run`]) read computed fields, run the parts of the tree
//! not compiled, check conditions with set parts and grow the output.
//!
//! A filter found on several paths is reported once per packet through
//! its mark. A condition whose child only reports filters of one path
//! reports them without a branch. A part of the tree that can report
//! only one filter of several paths is a *region*: its code checks the
//! filter's mark on entering, skips the region when the filter is found
//! already, and leaves it as soon as it reports the filter.
//!
//! The blocks that grow the output and walk a unit not compiled yet are
//! cold: Cranelift places them after the function's other code, so the
//! lines a packet runs hold only the code it needs.

use super::plan::{Big, Child, FieldRead, PCond, PNode, Segment, Small};
use super::run::{grow_helper, read_helper, set_helper, visit_helper, Ctx, TableDesc, TreeFn};
use super::units::CHUNK;
use crate::probe::{key_home, key_match, key_slot_bytes, Emitter, Walk};
use crate::{CodePages, NativeError};
use cranelift_codegen::ir::condcodes::{CondCode, IntCC};
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlags, SigRef, Signature, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use rustc_hash::FxHashMap as HashMap;
use sluice_ir::{BinOp, CmpOp, Val};
use std::mem::offset_of;

/// Conditions whose child only reports at most this many slots report
/// them without a branch ([`Gen::report_if`]).
const BRANCHLESS_SLOTS: usize = 4;

/// How the code gets a plan's constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Consts {
    /// The constants are in the plan: immediates.
    Immediate,
    /// The plan is a shape ([`PNode::shape`]): its constants are places in
    /// the data block the function gets as its second argument.
    Data,
}

/// The machine function of a unit's first node (a whole plan's, or a
/// shape's), the pages that hold it and its size in bytes.
pub(crate) fn compile(
    root: &PNode,
    consts: Consts,
) -> Result<(TreeFn, CodePages, usize), NativeError> {
    let mut ctx = CodePages::context()?;
    let ptr = types::I64;
    ctx.func.signature.params.push(AbiParam::new(ptr));
    ctx.func.signature.params.push(AbiParam::new(ptr));
    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let cx = b.block_params(entry)[0];
        let data = b.block_params(entry)[1];
        let sig = |b: &mut FunctionBuilder, params: &[types::Type], ret: Option<types::Type>| {
            let mut s = Signature::new(b.func.signature.call_conv);
            s.params.extend(params.iter().map(|t| AbiParam::new(*t)));
            s.returns.extend(ret.map(AbiParam::new));
            b.import_signature(s)
        };
        let sigs = Sigs {
            unit: sig(&mut b, &[ptr, ptr], None),
            read: sig(&mut b, &[ptr, types::I32], Some(types::I64)),
            visit: sig(&mut b, &[ptr, types::I32], None),
            grow: sig(&mut b, &[ptr, ptr], None),
            set: sig(&mut b, &[ptr, types::I32, types::I32], Some(types::I32)),
        };
        let fl = MemFlags::trusted();
        let pkt = b.ins().load(ptr, fl, cx, offset_of!(Ctx, pkt) as i32);
        let caplen = b.ins().load(ptr, fl, cx, offset_of!(Ctx, caplen) as i32);
        let wl = b.ins().load(ptr, fl, cx, offset_of!(Ctx, wirelen) as i32);
        let wirelen = b.ins().ireduce(types::I32, wl);
        let tables = b.ins().load(ptr, fl, cx, offset_of!(Ctx, tables) as i32);
        let (out, len, cap) = (
            Variable::from_u32(0),
            Variable::from_u32(1),
            Variable::from_u32(2),
        );
        for v in [out, len, cap] {
            b.declare_var(v, ptr);
        }
        let mut g = Gen {
            b,
            cx,
            pkt,
            caplen,
            wirelen,
            tables,
            out,
            len,
            cap,
            sigs,
            data: (consts == Consts::Data).then_some(data),
            need: root.pushes(),
            reach: {
                let mut m = HashMap::default();
                reach(root, &mut m);
                m
            },
            region: None,
        };
        g.reload();
        g.reserve(g.need);
        let exit = g.b.create_block();
        g.node(root, exit);
        g.b.switch_to_block(exit);
        g.save_len();
        g.b.ins().return_(&[]);
        g.b.seal_all_blocks();
        g.b.finalize();
    }
    let (code, bytes, pages) = CodePages::place(&mut ctx, "tree")?;
    // SAFETY: `code` is the entry of the function just placed, whose
    // signature (pointer, pointer) -> () in the host's default calling
    // convention is `TreeFn`'s `extern "C"` ABI.
    let f = unsafe { std::mem::transmute::<*const u8, TreeFn>(code) };
    Ok((f, pages, bytes))
}

struct Sigs {
    unit: SigRef,
    read: SigRef,
    visit: SigRef,
    grow: SigRef,
    set: SigRef,
}

struct Gen<'a> {
    b: FunctionBuilder<'a>,
    cx: Value,
    pkt: Value,
    caplen: Value,
    wirelen: Value,
    tables: Value,
    out: Variable,
    len: Variable,
    cap: Variable,
    sigs: Sigs,
    /// The data block of a shape's function ([`Consts::Data`]).
    data: Option<Value>,
    /// The most slots the function's own code reports ([`PNode::pushes`]):
    /// reserved at its start and again after every call that may report.
    need: usize,
    /// What each node's code can report ([`reach`]): slots, or in a
    /// shape the places of slots (one place per slot).
    reach: HashMap<*const PNode, Reach>,
    /// The region being emitted: the one filter slot (or its place) its
    /// code can report and where its code goes on once it has.
    region: Option<(u32, Block)>,
}

/// The filters a node's code (with its skip chain, in place) can report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reach {
    Nothing,
    /// One filter's slot, and whether it may be found on several paths.
    One(u32, bool),
    /// Several, or unknown (a call to another unit, a probed table).
    Many,
}

impl Reach {
    fn and(self, other: Reach) -> Reach {
        match (self, other) {
            (Reach::Nothing, x) | (x, Reach::Nothing) => x,
            (Reach::One(a, r), Reach::One(b, _)) if a == b => Reach::One(a, r),
            _ => Reach::Many,
        }
    }
}

/// [`Reach`] of `p` and of every node in place below it, into `memo`.
fn reach(p: &PNode, memo: &mut HashMap<*const PNode, Reach>) -> Reach {
    let mut r = Reach::Nothing;
    for &(slot, repeats) in &p.leaf {
        r = r.and(Reach::One(slot, repeats));
    }
    if !p.big.is_empty() {
        r = Reach::Many;
    }
    let mut child = |c: &Child, r: Reach| match c {
        Child::Node(q) => r.and(reach(q, memo)),
        Child::Unit(_) => Reach::Many,
    };
    for s in &p.small {
        for (_, c) in &s.keys {
            r = child(c, r);
        }
    }
    for c in &p.conds {
        r = child(&c.child, r);
    }
    for g in &p.segments {
        for c in &g.covers {
            r = child(c, r);
        }
    }
    if let Some(c) = &p.skip {
        r = child(c, r);
    }
    memo.insert(p as *const PNode, r);
    r
}

/// A slot to report: known when the code is built, or read from a table.
#[derive(Clone, Copy)]
enum Slot {
    Const(u32),
    Value(Value),
}

/// A small table of at least this many distinct first words is searched
/// with vectors ([`Gen::vector_search`]); fewer are compared one by one.
/// Measured against the binary search it replaces (five alternating runs,
/// medians): ACL 1,000 rules 114 against 129 ns a packet, generated 1,000
/// 160 against 163, the broad mix within noise; from two words on, ACL
/// and generated 1,000 were slower (124 and 169 ns).
const VECTOR_SEARCH: usize = 5;

/// The most first words one vector search compares (four vectors of four
/// lanes; a small table has at most 16 keys).
const MAX_LANES: usize = 16;

fn flags() -> MemFlags {
    MemFlags::new().with_notrap()
}

impl<'a> Emitter<'a> for Gen<'a> {
    fn fb(&mut self) -> &mut FunctionBuilder<'a> {
        &mut self.b
    }
}

impl Gen<'_> {
    /// The output buffer's pointer, length and capacity from the context.
    fn reload(&mut self) {
        let fl = MemFlags::trusted();
        for (var, at) in [
            (self.out, offset_of!(Ctx, out)),
            (self.len, offset_of!(Ctx, len)),
            (self.cap, offset_of!(Ctx, cap)),
        ] {
            let v = self.b.ins().load(types::I64, fl, self.cx, at as i32);
            self.b.def_var(var, v);
        }
    }

    /// Plan constant `c` as a value: an immediate, or the word at place
    /// `c` of the data block.
    fn k(&mut self, c: u32) -> Value {
        match self.data {
            None => self.b.ins().iconst(types::I32, c as i64),
            Some(d) => self.b.ins().load(
                types::I32,
                MemFlags::trusted().with_readonly(),
                d,
                (c * 4) as i32,
            ),
        }
    }

    /// `v cc c` for a plan constant `c`.
    fn cmp_k(&mut self, cc: IntCC, v: Value, c: u32) -> Value {
        match self.data {
            None => self.b.ins().icmp_imm(cc, v, c as i64),
            Some(_) => {
                let k = self.k(c);
                self.b.ins().icmp(cc, v, k)
            }
        }
    }

    /// `v & c` for a plan constant `c`.
    fn and_k(&mut self, v: Value, c: u32) -> Value {
        match self.data {
            None => self.b.ins().band_imm(v, c as i64),
            Some(_) => {
                let k = self.k(c);
                self.b.ins().band(v, k)
            }
        }
    }

    fn save_len(&mut self) {
        let len = self.b.use_var(self.len);
        self.b.ins().store(
            MemFlags::trusted(),
            len,
            self.cx,
            offset_of!(Ctx, len) as i32,
        );
    }

    fn call(&mut self, sig: SigRef, helper: usize, args: &[Value]) -> Option<Value> {
        let callee = self.b.ins().iconst(types::I64, helper as i64);
        let mut all = vec![self.cx];
        all.extend_from_slice(args);
        let call = self.b.ins().call_indirect(sig, callee, &all);
        self.b.inst_results(call).first().copied()
    }

    /// Branch to `fail` when `cond`, else go on in a fresh block.
    fn branch_out(&mut self, cond: Value, fail: Block) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// The mark array's address and this packet's number, read from the
    /// context at each use: values live across the whole function would
    /// cost registers everywhere.
    fn seen_epoch(&mut self) -> (Value, Value) {
        let fl = MemFlags::trusted();
        let seen = self
            .b
            .ins()
            .load(types::I64, fl, self.cx, offset_of!(Ctx, seen) as i32);
        let epoch = self
            .b
            .ins()
            .load(types::I32, fl, self.cx, offset_of!(Ctx, epoch) as i32);
        (seen, epoch)
    }

    /// A plan constant that names a slot: an immediate, or read from the
    /// shape's data.
    fn plan_slot(&mut self, k: u32) -> Slot {
        match self.data {
            None => Slot::Const(k),
            Some(_) => Slot::Value(self.k(k)),
        }
    }

    /// Where a slot's mark is (an address and an offset from it) and this
    /// packet's number. A constant slot's mark is at an immediate offset
    /// from the mark array, with no address computed for it.
    fn mark(&mut self, slot: Slot) -> (Value, i32, Value) {
        let (seen, epoch) = self.seen_epoch();
        match slot {
            Slot::Const(k) => match i32::try_from(u64::from(k) * 4) {
                Ok(off) => (seen, off, epoch),
                Err(_) => (self.b.ins().iadd_imm(seen, i64::from(k) * 4), 0, epoch),
            },
            Slot::Value(v) => {
                let wide = self.b.ins().uextend(types::I64, v);
                let at = self.b.ins().ishl_imm(wide, 2);
                (self.b.ins().iadd(seen, at), 0, epoch)
            }
        }
    }

    /// A slot as a value.
    fn slot_value(&mut self, slot: Slot) -> Value {
        match slot {
            Slot::Const(k) => self.b.ins().iconst(types::I32, i64::from(k)),
            Slot::Value(v) => v,
        }
    }

    /// Append a slot to the output, unless it was already for this packet.
    fn push(&mut self, slot: Slot) {
        let fl = MemFlags::trusted();
        let (mark, off, epoch) = self.mark(slot);
        let was = self.b.ins().load(types::I32, fl, mark, off);
        let again = self.b.ins().icmp(IntCC::Equal, was, epoch);
        let new = self.b.create_block();
        let done = self.b.create_block();
        self.b.ins().brif(again, done, &[], new, &[]);
        self.b.switch_to_block(new);
        self.b.ins().store(fl, epoch, mark, off);
        let slot = self.slot_value(slot);
        self.append(slot);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
    }

    /// Append a slot to the output buffer (growing it first when full).
    /// Make room for `need` more slots (at the function's start: every
    /// report of its code then fits).
    fn reserve(&mut self, need: usize) {
        let len = self.b.use_var(self.len);
        let cap = self.b.use_var(self.cap);
        let room = self.b.ins().isub(cap, len);
        let short = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedLessThan, room, need as i64);
        let grow = self.b.create_block();
        let go = self.b.create_block();
        self.b.ins().brif(short, grow, &[], go, &[]);
        // Rare: out of the hot code's lines.
        self.b.set_cold_block(grow);
        self.b.switch_to_block(grow);
        self.save_len();
        let helper = grow_helper as extern "C" fn(_, _);
        let n = self.b.ins().iconst(types::I64, need as i64);
        self.call(self.sigs.grow, helper as usize, &[n]);
        self.reload();
        self.b.ins().jump(go, &[]);
        self.b.switch_to_block(go);
    }

    /// Append a slot to the output buffer (room was reserved).
    fn append(&mut self, slot: Value) {
        self.append_by(&[slot], None);
    }

    /// Write slots where the next reports go, one address for all of
    /// them, and grow the length by their number when `ok` (0 or 1, 64
    /// bits; always when `None`).
    fn append_by(&mut self, slots: &[Value], ok: Option<Value>) {
        if slots.is_empty() {
            return;
        }
        let out = self.b.use_var(self.out);
        let len = self.b.use_var(self.len);
        let at = self.b.ins().ishl_imm(len, 2);
        let a = self.b.ins().iadd(out, at);
        for (i, &slot) in slots.iter().enumerate() {
            self.b
                .ins()
                .store(MemFlags::trusted(), slot, a, (i * 4) as i32);
        }
        let n = slots.len() as i64;
        let len = match ok {
            Some(ok) if n == 1 => self.b.ins().iadd(len, ok),
            Some(ok) => {
                let by = self.b.ins().imul_imm(ok, n);
                self.b.ins().iadd(len, by)
            }
            None => self.b.ins().iadd_imm(len, n),
        };
        self.b.def_var(self.len, len);
    }

    /// A field's value (network order, as the IR means it); to `fail`
    /// when the read aborts.
    fn read(&mut self, f: &FieldRead, fail: Block) -> Value {
        match f {
            FieldRead::Len => self.wirelen,
            FieldRead::Const(k) => self.b.ins().iconst(types::I32, *k as i64),
            FieldRead::Val(v) => self.val(v, fail),
            FieldRead::Cmp(op, l, r) => {
                let a = self.val(l, fail);
                let b = self.val(r, fail);
                let c = match op {
                    CmpOp::Eq => self.b.ins().icmp(IntCC::Equal, a, b),
                    CmpOp::Gt => self.b.ins().icmp(IntCC::UnsignedGreaterThan, a, b),
                    CmpOp::Ge => self.b.ins().icmp(IntCC::UnsignedGreaterThanOrEqual, a, b),
                    CmpOp::Set => {
                        let x = self.b.ins().band(a, b);
                        self.b.ins().icmp_imm(IntCC::NotEqual, x, 0)
                    }
                };
                self.b.ins().uextend(types::I32, c)
            }
            FieldRead::Call(field) => {
                let id = self.b.ins().iconst(types::I32, *field as i64);
                let helper = read_helper as extern "C" fn(_, _) -> _;
                let r = self
                    .call(self.sigs.read, helper as usize, &[id])
                    .expect("a result");
                let hi = self.b.ins().ushr_imm(r, 32);
                self.branch_out(hi, fail);
                self.b.ins().ireduce(types::I32, r)
            }
            FieldRead::Load {
                hdr,
                off,
                size,
                mask,
            } => {
                let v = self.read_load(*hdr, *off, *size, fail);
                self.masked(v, *mask)
            }
        }
    }

    /// `v & mask`, or `v` for a mask of all ones.
    fn masked(&mut self, v: Value, mask: u32) -> Value {
        if mask == u32::MAX {
            v
        } else {
            self.b.ins().band_imm(v, mask as i64)
        }
    }

    /// `size` bytes at `off` (past the IPv4 header at `hdr` if given), in
    /// network order; to `fail` when they are past the captured bytes.
    fn read_load(&mut self, hdr: Option<u32>, off: u32, size: u8, fail: Block) -> Value {
        let size = size as u32;
        let addr = match hdr {
            None => {
                let end = off as u64 + size as u64;
                let short = self
                    .b
                    .ins()
                    .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
                self.branch_out(short, fail);
                self.b.ins().iadd_imm(self.pkt, off as i64)
            }
            Some(h) => {
                let short =
                    self.b
                        .ins()
                        .icmp_imm(IntCC::UnsignedLessThan, self.caplen, h as i64 + 1);
                self.branch_out(short, fail);
                let byte = self.b.ins().uload8(types::I64, flags(), self.pkt, h as i32);
                let x = self.b.ins().band_imm(byte, 0xf);
                let hl = self.b.ins().ishl_imm(x, 2);
                let end = self.b.ins().iadd_imm(hl, off as i64 + size as i64);
                let over = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
                self.branch_out(over, fail);
                let a = self.b.ins().iadd(self.pkt, hl);
                self.b.ins().iadd_imm(a, off as i64)
            }
        };
        self.load_be(addr, size)
    }

    /// An IR value as the reference interpreter computes it; to `fail`
    /// where that aborts (a load past the captured bytes, a division by
    /// zero).
    fn val(&mut self, v: &Val, fail: Block) -> Value {
        match v {
            Val::Const(k) => self.b.ins().iconst(types::I32, *k as i64),
            Val::Len => self.wirelen,
            Val::Load { base, offset, size } => {
                let b = self.val(base, fail);
                let b = self.b.ins().uextend(types::I64, b);
                let at = self.b.ins().iadd_imm(b, *offset as i64);
                let end = self.b.ins().iadd_imm(at, size.bytes() as i64);
                let over = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
                self.branch_out(over, fail);
                let addr = self.b.ins().iadd(self.pkt, at);
                self.load_be(addr, size.bytes())
            }
            Val::Bin(op, a, b) => {
                let x = self.val(a, fail);
                let y = self.val(b, fail);
                let ins = self.b.ins();
                match op {
                    BinOp::Add => ins.iadd(x, y),
                    BinOp::Sub => ins.isub(x, y),
                    BinOp::Mul => ins.imul(x, y),
                    BinOp::And => ins.band(x, y),
                    BinOp::Or => ins.bor(x, y),
                    BinOp::Xor => ins.bxor(x, y),
                    BinOp::Shl => crate::shift32(&mut self.b, true, x, y),
                    BinOp::Shr => crate::shift32(&mut self.b, false, x, y),
                    BinOp::Div | BinOp::Mod => {
                        let zero = self.b.ins().icmp_imm(IntCC::Equal, y, 0);
                        self.branch_out(zero, fail);
                        match op {
                            BinOp::Div => self.b.ins().udiv(x, y),
                            _ => self.b.ins().urem(x, y),
                        }
                    }
                }
            }
            Val::Neg(a) => {
                let x = self.val(a, fail);
                self.b.ins().ineg(x)
            }
            // (Filters with shared values run whole, as classic BPF.)
            Val::Shared(s) => self.val(s.val(), fail),
        }
    }

    /// `size` bytes at `addr` as a big-endian number.
    fn load_be(&mut self, addr: Value, size: u32) -> Value {
        let raw = match size {
            1 => self.b.ins().uload8(types::I32, flags(), addr, 0),
            2 => self.b.ins().uload16(types::I32, flags(), addr, 0),
            _ => self.b.ins().load(types::I32, flags(), addr, 0),
        };
        match size {
            2 if cfg!(target_endian = "little") => {
                let s = self.b.ins().bswap(raw);
                self.b.ins().ushr_imm(s, 16)
            }
            4 if cfg!(target_endian = "little") => self.b.ins().bswap(raw),
            _ => raw,
        }
    }

    /// The code of node `p`, starting in the current block, ending with a
    /// jump to `cont`.
    fn node(&mut self, p: &PNode, cont: Block) {
        // A part of the tree that can report only one filter, found on
        // several paths, is a region: it is skipped when the filter is
        // already found, and left as soon as it is.
        if self.region.is_none() {
            if let Some(Reach::One(slot, true)) = self.reach.get(&(p as *const PNode)).copied() {
                let s = self.plan_slot(slot);
                let (mark, off, epoch) = self.mark(s);
                let was = self
                    .b
                    .ins()
                    .load(types::I32, MemFlags::trusted(), mark, off);
                let found = self.b.ins().icmp(IntCC::Equal, was, epoch);
                self.branch_out(found, cont);
                self.region = Some((slot, cont));
                self.node(p, cont);
                self.region = None;
                return;
            }
        }
        // Slots found on one path only need no mark: each run of them is
        // written at once.
        let mut run = Vec::new();
        for &(slot, repeats) in &p.leaf {
            if let Some((only, exit)) = self.region {
                debug_assert_eq!(slot, only, "a region reports one filter");
                // Not found yet (or the region was left): report it, and
                // nothing more in the region can be found.
                let s = self.plan_slot(only);
                let (mark, off, epoch) = self.mark(s);
                self.b.ins().store(MemFlags::trusted(), epoch, mark, off);
                let s = self.slot_value(s);
                self.append(s);
                self.b.ins().jump(exit, &[]);
                let dead = self.b.create_block();
                self.b.switch_to_block(dead);
                self.b.ins().jump(cont, &[]);
                return;
            }
            match repeats {
                true => {
                    self.append_by(&std::mem::take(&mut run), None);
                    let s = self.plan_slot(slot);
                    self.push(s);
                }
                false => run.push(self.k(slot)),
            }
        }
        self.append_by(&run, None);
        let skip = self.b.create_block();
        // The nodes after this one on its skip edge that read the same
        // bytes (other masks of one word: a network's prefixes) share its
        // read: the bytes are checked and loaded once, and a packet too
        // short for them skips them all, as each would.
        let chain = self.same_read(p);
        let last = chain.last().copied().unwrap_or(p);
        if let Some(f) = &p.field {
            let v = match (f, chain.is_empty()) {
                (FieldRead::Load { hdr, off, size, .. }, false) => {
                    Some(self.read_load(*hdr, *off, *size, skip))
                }
                _ => None,
            };
            for q in std::iter::once(p).chain(chain.iter().copied()) {
                let x = match (v, &q.field) {
                    (Some(raw), Some(FieldRead::Load { mask, .. })) => self.masked(raw, *mask),
                    (_, Some(f)) => self.read(f, skip),
                    (_, None) => unreachable!("a node of a chain reads a field"),
                };
                self.tests(x, q);
            }
        }
        self.b.ins().jump(skip, &[]);
        self.b.switch_to_block(skip);
        match &last.skip {
            Some(c) => self.child(c, cont),
            None => {
                self.b.ins().jump(cont, &[]);
            }
        }
    }

    /// The tables, conditions and segments of node `p` on its field's
    /// value `v`, each hit's child in place or called; ends where they
    /// all went on.
    fn tests(&mut self, v: Value, p: &PNode) {
        for s in &p.small {
            self.small(v, s);
        }
        for t in &p.big {
            self.big(v, t);
        }
        for c in &p.conds {
            self.cond(v, c);
        }
        if !p.segments.is_empty() {
            let done = self.b.create_block();
            self.segments(v, &p.segments, done);
            self.b.switch_to_block(done);
        }
    }

    /// The nodes after `p` on its skip edge, in place, that read the same
    /// bytes as `p` under any mask, accept no filter of their own and
    /// start no region: they can share `p`'s read.
    fn same_read<'p>(&self, p: &'p PNode) -> Vec<&'p PNode> {
        let mut chain = Vec::new();
        let Some(FieldRead::Load { hdr, off, size, .. }) = &p.field else {
            return chain;
        };
        let mut at = p;
        while let Some(Child::Node(q)) = &at.skip {
            let same = matches!(&q.field, Some(FieldRead::Load { hdr: h, off: o, size: z, .. })
                if (h, o, z) == (hdr, off, size));
            let region = self.region.is_none()
                && matches!(
                    self.reach.get(&(&**q as *const PNode)),
                    Some(Reach::One(_, true))
                );
            if !same || !q.leaf.is_empty() || region {
                break;
            }
            chain.push(&**q);
            at = q;
        }
        chain
    }

    fn child(&mut self, c: &Child, cont: Block) {
        match c {
            Child::Node(p) => self.node(p, cont),
            Child::Unit(n) => {
                let node = self.k(*n);
                self.call_unit(node);
                self.b.ins().jump(cont, &[]);
            }
        }
    }

    /// Call the unit of node `node` (its function from the table by
    /// node), or the tree's walk from it where it has none.
    fn call_unit(&mut self, node: Value) {
        let fl = MemFlags::trusted();
        let fns = self
            .b
            .ins()
            .load(types::I64, fl, self.cx, offset_of!(Ctx, fns) as i32);
        let wide = self.b.ins().uextend(types::I64, node);
        let chunk = self.b.ins().ushr_imm(wide, CHUNK.trailing_zeros() as i64);
        let at = self.b.ins().ishl_imm(chunk, 3);
        let at = self.b.ins().iadd(fns, at);
        let chunk = self.b.ins().load(types::I64, fl, at, 0);
        let i = self.b.ins().band_imm(wide, CHUNK as i64 - 1);
        let at = self.b.ins().ishl_imm(i, 4);
        let at = self.b.ins().iadd(chunk, at);
        let f = self.b.ins().load(types::I64, fl, at, 0);
        let call = self.b.create_block();
        let walk = self.b.create_block();
        let done = self.b.create_block();
        // Both calls may report: the length goes to the context first.
        self.save_len();
        self.b.ins().brif(f, call, &[], walk, &[]);
        // Only until the unit's code is compiled: out of the hot lines.
        self.b.set_cold_block(walk);
        self.b.switch_to_block(call);
        let data = self.b.ins().load(types::I64, fl, at, 8);
        self.b
            .ins()
            .call_indirect(self.sigs.unit, f, &[self.cx, data]);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(walk);
        let helper = visit_helper as extern "C" fn(_, _);
        self.call(self.sigs.visit, helper as usize, &[node]);
        self.b.ins().jump(done, &[]);
        self.b.switch_to_block(done);
        // Either call may have moved the buffer and reported into the room
        // this function reserved.
        self.reload();
        self.reserve(self.need);
    }

    /// The other words of a table's key, each read to `fail` when it aborts.
    fn key(&mut self, v: Value, more: &[FieldRead], fail: Block) -> Vec<Value> {
        let mut key = vec![v];
        for f in more {
            key.push(self.read(f, fail));
        }
        key
    }

    fn small(&mut self, v: Value, s: &Small) {
        let next = self.b.create_block();
        let key = self.key(v, &s.more, next);
        // Keys are sorted: search the first word, then compare the rest.
        let groups: Vec<&[(Vec<u32>, Child)]> = s.keys.chunk_by(|a, b| a.0[0] == b.0[0]).collect();
        self.search(&key, &groups, next);
        self.b.switch_to_block(next);
    }

    /// A search of the first key word among `groups` (each the keys
    /// sharing one first word, ascending), ending at `done`: with vectors
    /// for 5 to 16 groups where the constants are immediates, else a
    /// binary search down to four groups, compared one by one.
    fn search(&mut self, key: &[Value], groups: &[&[(Vec<u32>, Child)]], done: Block) {
        if (VECTOR_SEARCH..=MAX_LANES).contains(&groups.len()) && self.data.is_none() {
            self.vector_search(key, groups, done);
            return;
        }
        if groups.len() > 4 {
            let mid = groups.len() / 2;
            let pivot = groups[mid][0].0[0];
            let low = self.b.create_block();
            let high = self.b.create_block();
            let lt = self.cmp_k(IntCC::UnsignedLessThan, key[0], pivot);
            self.b.ins().brif(lt, low, &[], high, &[]);
            self.b.switch_to_block(low);
            self.search(key, &groups[..mid], done);
            self.b.switch_to_block(high);
            self.search(key, &groups[mid..], done);
            return;
        }
        for g in groups {
            let first = self.b.create_block();
            let other = self.b.create_block();
            let eq = self.cmp_k(IntCC::Equal, key[0], g[0].0[0]);
            self.b.ins().brif(eq, first, &[], other, &[]);
            self.b.switch_to_block(first);
            self.group(key, g, done);
            self.b.switch_to_block(other);
        }
        self.b.ins().jump(done, &[]);
    }

    /// The keys of one group, whose first word is known to be equal: the
    /// other words compared, a hit's child, then `done`.
    fn group(&mut self, key: &[Value], g: &[(Vec<u32>, Child)], done: Block) {
        for (k, child) in g.iter() {
            let hit = self.b.create_block();
            let miss = self.b.create_block();
            let mut all: Option<Value> = None;
            for (x, want) in key[1..].iter().zip(&k[1..]) {
                let eq = self.cmp_k(IntCC::Equal, *x, *want);
                all = Some(match all {
                    None => eq,
                    Some(a) => self.b.ins().band(a, eq),
                });
            }
            match all {
                Some(all) => {
                    self.b.ins().brif(all, hit, &[], miss, &[]);
                }
                None => {
                    self.b.ins().jump(hit, &[]);
                }
            }
            self.b.switch_to_block(hit);
            // A key's value is one, so the first word's other keys
            // cannot match once one has.
            self.child(child, done);
            self.b.switch_to_block(miss);
        }
        self.b.ins().jump(done, &[]);
    }

    /// The first key word compared with every group's at once (four
    /// lanes a vector), the equal lanes packed into one mask, and a jump
    /// by the first equal lane to its group: one branch for the miss and
    /// one jump by table for a hit, where a binary search takes a branch
    /// at every level, each as unpredictable as the traffic.
    fn vector_search(&mut self, key: &[Value], groups: &[&[(Vec<u32>, Child)]], done: Block) {
        let firsts: Vec<u32> = groups.iter().map(|g| g[0].0[0]).collect();
        let lanes = if firsts.len() <= 8 { 8 } else { MAX_LANES };
        let splat = self.b.ins().splat(types::I32X4, key[0]);
        let mut eqs = Vec::new();
        for quad in 0..lanes / 4 {
            // Lanes past the groups repeat the first group's word: they
            // are equal only when lane 0 is, which comes first.
            let bytes: Vec<u8> = (0..4)
                .flat_map(|i| {
                    let w = firsts.get(quad * 4 + i).copied().unwrap_or(firsts[0]);
                    w.to_le_bytes()
                })
                .collect();
            let c = self.b.func.dfg.constants.insert(bytes.into());
            let k = self.b.ins().vconst(types::I32X4, c);
            eqs.push(self.b.ins().icmp(IntCC::Equal, splat, k));
        }
        let packed = match eqs.as_slice() {
            [a, b] => self.b.ins().snarrow(*a, *b),
            [a, b, c, d] => {
                let lo = self.b.ins().snarrow(*a, *b);
                let hi = self.b.ins().snarrow(*c, *d);
                self.b.ins().snarrow(lo, hi)
            }
            _ => unreachable!("8 or 16 lanes"),
        };
        let mask = self.b.ins().vhigh_bits(types::I32, packed);
        let hit = self.b.create_block();
        self.b.ins().brif(mask, hit, &[], done, &[]);
        self.b.switch_to_block(hit);
        let lane = self.b.ins().ctz(mask);
        let blocks: Vec<Block> = groups.iter().map(|_| self.b.create_block()).collect();
        let calls: Vec<_> = blocks
            .iter()
            .map(|&b| self.b.func.dfg.block_call(b, &[]))
            .collect();
        let default = self.b.func.dfg.block_call(done, &[]);
        let jt = self
            .b
            .create_jump_table(cranelift_codegen::ir::JumpTableData::new(default, &calls));
        self.b.ins().br_table(lane, jt);
        for (g, block) in groups.iter().zip(blocks) {
            self.b.switch_to_block(block);
            self.group(key, g, done);
        }
    }

    /// Hash the key as [`sluice_classifier::table::hash`] does and probe
    /// the table; a hit reports its child.
    fn big(&mut self, v: Value, t: &Big) {
        let after = self.b.create_block();
        let key = self.key(v, &t.more, after);
        let fl = MemFlags::trusted().with_readonly();
        let size = std::mem::size_of::<TableDesc>() as i64;
        let desc = match self.data {
            None => self.b.ins().iadd_imm(self.tables, t.table as i64 * size),
            Some(_) => {
                let n = self.k(t.table);
                let n = self.b.ins().uextend(types::I64, n);
                let off = self.b.ins().imul_imm(n, size);
                self.b.ins().iadd(self.tables, off)
            }
        };
        let base = self
            .b
            .ins()
            .load(types::I64, fl, desc, offset_of!(TableDesc, words) as i32);
        let mask = self
            .b
            .ins()
            .load(types::I64, fl, desc, offset_of!(TableDesc, mask) as i32);
        let (words, i0) = key_home(&mut self.b, &key, mask);
        let stride = key_slot_bytes(key.len()) as i64;
        let walk = Walk::start(&mut self.b, base, i0, mask, stride);
        // A slot's datum is 1 + the slot to report, or 0 with its value
        // 1 + the child node to visit.
        key_match(self, &walk, &words, key.len(), after, |g, val, datum| {
            let one = g.b.create_block();
            let visit = g.b.create_block();
            g.b.ins().brif(datum, one, &[], visit, &[]);
            g.b.switch_to_block(one);
            let s = g.b.ins().iadd_imm(datum, -1);
            g.push(Slot::Value(s));
            g.b.ins().jump(after, &[]);
            g.b.switch_to_block(visit);
            let child = g.b.ins().iadd_imm(val, -1);
            g.call_unit(child);
            g.b.ins().jump(after, &[]);
        });
        self.b.switch_to_block(after);
    }

    /// A binary search of `v` among ascending segments (the first starts
    /// at 0, so one always holds): the children covering it run, then
    /// `done`.
    fn segments(&mut self, v: Value, segs: &[Segment], done: Block) {
        if segs.len() > 3 {
            let mid = segs.len() / 2;
            let (low, high) = (self.b.create_block(), self.b.create_block());
            let lt = self.cmp_k(IntCC::UnsignedLessThan, v, segs[mid].start);
            self.b.ins().brif(lt, low, &[], high, &[]);
            self.b.switch_to_block(low);
            self.segments(v, &segs[..mid], done);
            self.b.switch_to_block(high);
            self.segments(v, &segs[mid..], done);
            return;
        }
        // The last segment that starts at or below `v` holds it.
        for (i, g) in segs.iter().enumerate().rev() {
            let next = self.b.create_block();
            if i > 0 {
                let under = self.cmp_k(IntCC::UnsignedLessThan, v, g.start);
                self.branch_out(under, next);
            }
            for c in &g.covers {
                let after = self.b.create_block();
                self.child(c, after);
                self.b.switch_to_block(after);
            }
            self.b.ins().jump(done, &[]);
            self.b.switch_to_block(next);
        }
        self.b.ins().jump(done, &[]);
    }

    /// The leaf slots of a child that only reports (no field, no skip
    /// edge), when there are few and each is found on this path alone.
    fn only_reports(c: &Child) -> Option<&[(u32, bool)]> {
        match c {
            Child::Node(q)
                if q.field.is_none()
                    && q.skip.is_none()
                    && !q.leaf.is_empty()
                    && q.leaf.len() <= BRANCHLESS_SLOTS
                    && q.leaf.iter().all(|&(_, repeats)| !repeats) =>
            {
                Some(&q.leaf)
            }
            _ => None,
        }
    }

    /// `p`'s parts (not its set parts, which take a call) as comparisons
    /// `a cc b` that must all hold.
    fn parts(&mut self, v: Value, p: &PCond) -> Vec<(IntCC, Value, Value)> {
        let mut all = Vec::new();
        match (p.lo, p.hi) {
            (None, None) => {}
            (None, Some(hi)) => all.push((IntCC::UnsignedLessThanOrEqual, v, self.k(hi))),
            (Some(lo), None) => all.push((IntCC::UnsignedGreaterThanOrEqual, v, self.k(lo))),
            (Some(lo), Some(hi)) => {
                let (l, h) = (self.k(lo), self.k(hi));
                let d = self.b.ins().isub(v, l);
                let w = self.b.ins().isub(h, l);
                all.push((IntCC::UnsignedLessThanOrEqual, d, w));
            }
        }
        let zero = self.b.ins().iconst(types::I32, 0);
        if let Some(none) = p.none {
            let x = self.and_k(v, none);
            all.push((IntCC::Equal, x, zero));
        }
        for &m in &p.any {
            let x = self.and_k(v, m);
            all.push((IntCC::NotEqual, x, zero));
        }
        for &k in &p.ne {
            let k = self.k(k);
            all.push((IntCC::NotEqual, v, k));
        }
        all
    }

    /// Whether `v` meets `p`'s parts ([`Gen::parts`]) as a 0/1 value,
    /// without a branch.
    fn holds(&mut self, v: Value, p: &PCond) -> Value {
        let mut acc = self.b.ins().iconst(types::I8, 1);
        for (cc, a, b) in self.parts(v, p) {
            let x = self.b.ins().icmp(cc, a, b);
            acc = self.b.ins().band(acc, x);
        }
        acc
    }

    /// Report `leaf`'s slots when `ok` (0 or 1) without a branch: each slot
    /// found on this path alone is written where the next report goes and
    /// the length grows by `ok` (room for every slot was reserved).
    fn report_if(&mut self, ok: Value, leaf: &[(u32, bool)]) {
        let ok = self.b.ins().uextend(types::I64, ok);
        let slots: Vec<Value> = leaf
            .iter()
            .map(|&(slot, repeats)| {
                debug_assert!(
                    !repeats,
                    "a slot found on several paths has a mark to check"
                );
                self.k(slot)
            })
            .collect();
        self.append_by(&slots, Some(ok));
    }

    fn cond(&mut self, v: Value, p: &PCond) {
        if p.sets.is_none() {
            if let Some(leaf) = Self::only_reports(&p.child) {
                let ok = self.holds(v, p);
                self.report_if(ok, leaf);
                return;
            }
        }
        let miss = self.b.create_block();
        for (cc, a, b) in self.parts(v, p) {
            let fails = self.b.ins().icmp(cc.complement(), a, b);
            self.branch_out(fails, miss);
        }
        if let Some(set) = p.sets {
            let id = self.k(set);
            let helper = set_helper as extern "C" fn(_, _, _) -> _;
            let ok = self
                .call(self.sigs.set, helper as usize, &[id, v])
                .expect("a result");
            let no = self.b.ins().icmp_imm(IntCC::Equal, ok, 0);
            self.branch_out(no, miss);
        }
        self.child(&p.child, miss);
        self.b.switch_to_block(miss);
    }
}
