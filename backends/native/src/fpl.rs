//! FPL programs compiled to machine code with Cranelift.
//!
//! [`NativeFpl::compile`] turns a checked [`sluice_fpl::Program`] into one
//! function `extern "C" fn(pkt, caplen, mem, ctx) -> u32`; [`NativeFpl::run`]
//! calls it with the same meaning as the reference interpreter
//! ([`sluice_fpl::Program::run`]), MBuf effects included:
//!
//! - registers live in SSA variables: loaded from the MBuf at entry and
//!   stored back at the one exit block, which every `RETURN`, abort and the
//!   end of the program reach (external functions never see registers, so
//!   nobody can tell);
//! - `FOR` loops are real loops (a header testing the condition, the body,
//!   the step, a back edge) with an iteration counter compared with the
//!   loop's compile-time bound; `BREAK` jumps past the loop;
//! - every packet read is checked against the captured length in 64-bit
//!   arithmetic, every MEM index the compiler could not prove in range is
//!   compared with the MBuf size (a constant in the code), divisions and
//!   remainders test for zero: a failed check jumps to the exit with 0;
//! - `HASH` is unrolled (its length is a constant); `EXTERN` calls a Rust
//!   helper that runs the registered function on slices of the MBuf,
//!   catching a panic to re-raise it after the machine code has returned.
//!
//! ```
//! use sluice_fpl::{Externs, Program};
//! use sluice_native::fpl::NativeFpl;
//! let p = Program::compile("IF PKT.B[0] == 1 THEN MEM[0]++; FI RETURN MEM[0];", &Externs::new()).unwrap();
//! let n = NativeFpl::compile(&p).unwrap();
//! let mut mem = vec![0; p.mem_words()];
//! assert_eq!(n.run(&[1], &mut mem), 1);
//! assert_eq!(n.run(&[1], &mut mem), 2);
//! assert_eq!(n.run(&[], &mut mem), 0); // PKT.B[0] past the end: abort
//! ```

use std::any::Any;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{
    types, AbiParam, Block, InstBuilder, MemFlags, SigRef, Signature, Type, Value,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use cranelift_jit::JITModule;
use cranelift_module::Module;
use sluice_fpl::ir::{BinOp, Expr, Stmt, UnOp};
use sluice_fpl::Program;

use crate::{CodePages, NativeError};

/// What the machine function reads besides its arguments: everything the
/// `EXTERN` helper needs.
#[repr(C)]
struct Ctx {
    prog: *const Program,
    pkt: *const u8,
    caplen: usize,
    /// The MEM words (the first `prog.mem_size()` words of the MBuf).
    mem: *mut u32,
    /// A panic caught in an external function, re-raised by `run`.
    panic: Option<Box<dyn Any + Send>>,
}

/// The machine function's type.
type FplFn = unsafe extern "C" fn(pkt: *const u8, caplen: u64, mem: *mut u32, ctx: *mut Ctx) -> u32;

/// Bit set in the helper's result when the external function panicked.
const EXTERN_PANICKED: i64 = 1 << 32;

/// Called from generated code for `EXTERN(func, input, output)`: the
/// function's value, or [`EXTERN_PANICKED`].
extern "C" fn extern_helper(ctx: *mut Ctx, func: u32, input: u32, output: u32) -> u64 {
    // SAFETY: generated code passes the `ctx` that `NativeFpl::run` built on
    // its stack for this call and that outlives it; no other reference to it
    // exists while the helper runs (the machine code only passes it along).
    let ctx = unsafe { &mut *ctx };
    // SAFETY: `ctx.prog` points to the program owned by the `NativeFpl`
    // being run, borrowed for the whole call.
    let prog = unsafe { &*ctx.prog };
    // SAFETY: `pkt`/`caplen` come from one live slice borrowed by `run`.
    let pkt = unsafe { std::slice::from_raw_parts(ctx.pkt, ctx.caplen) };
    // SAFETY: `mem` comes from the `&mut [u32]` MBuf that `run` borrows
    // mutably for the call, at least `mem_words() >= mem_size()` long; while
    // the helper runs the machine code does not touch memory, so this is the
    // only live reference to these words (the registers after them are not
    // included).
    let mem = unsafe { std::slice::from_raw_parts_mut(ctx.mem, prog.mem_size()) };
    match catch_unwind(AssertUnwindSafe(|| {
        prog.call_extern(func as usize, input, output, pkt, mem)
    })) {
        Ok(v) => v as u64,
        Err(p) => {
            ctx.panic = Some(p);
            EXTERN_PANICKED as u64
        }
    }
}

/// An FPL program compiled to machine code for the host CPU.
///
/// ```
/// use sluice_fpl::{Externs, Program};
/// let p = Program::compile("RETURN PKT.W[0] + 1;", &Externs::new()).unwrap();
/// let n = sluice_native::fpl::NativeFpl::compile(&p).unwrap();
/// assert_eq!(n.run(&[1, 2], &mut []), 0x103);
/// ```
pub struct NativeFpl {
    func: FplFn,
    /// Owns the code pages (freed when this is dropped).
    _pages: CodePages,
    prog: Program,
    code_bytes: usize,
}

// SAFETY: after `finalize_definitions` the module is only touched again to
// free it in `Drop` (exclusive access). The code is immutable and keeps no
// state of its own between calls: its state is the MBuf each call is given
// (`&mut`, so never shared) and a context on the caller's stack. The
// program's external functions are `Send + Sync`.
unsafe impl Send for NativeFpl {}
// SAFETY: see `Send`; `run` only reads `func` and the program.
unsafe impl Sync for NativeFpl {}

impl fmt::Debug for NativeFpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeFpl")
            .field("code_bytes", &self.code_bytes)
            .field("prog", &self.prog)
            .finish_non_exhaustive()
    }
}

impl NativeFpl {
    /// Compile a checked program for the host CPU.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("FOR (R[0] = 0; R[0] < 4; R[0]++) MEM[R[0]] = R[0] * R[0]; ROF", &Externs::new()).unwrap();
    /// let n = sluice_native::fpl::NativeFpl::compile(&p).unwrap();
    /// let mut mem = vec![0; p.mem_words()];
    /// n.run(&[], &mut mem);
    /// assert_eq!(mem, [0, 1, 4, 9, 4]); // MEM[0..4], then R[0]
    /// ```
    pub fn compile(prog: &Program) -> Result<NativeFpl, NativeError> {
        let size = size(prog.body());
        if size > MAX_SIZE {
            return Err(NativeError::Limit(format!(
                "an FPL program of {size} nodes (HASH bytes counted), more than the {MAX_SIZE} compiled; run it in the interpreter"
            )));
        }
        let (module, code, code_bytes) = build(prog)?;
        // SAFETY: `code` is the entry of the function just finalized, whose
        // signature (pointer, i64, pointer, pointer) -> i32 in the host's
        // default calling convention is exactly `FplFn`'s `extern "C"` ABI.
        let func = unsafe { std::mem::transmute::<*const u8, FplFn>(code) };
        Ok(NativeFpl {
            func,
            _pages: CodePages::new(module),
            prog: prog.clone(),
            code_bytes,
        })
    }

    /// Run on one packet with its MBuf: exactly [`Program::run`].
    ///
    /// # Panics
    ///
    /// If `mem.len()` is less than the program's `mem_words()`, or if an
    /// external function panics (after the MBuf writes made before it).
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("R[0] += 2; RETURN 100 / PKT.B[0];", &Externs::new()).unwrap();
    /// let n = sluice_native::fpl::NativeFpl::compile(&p).unwrap();
    /// let mut mem = vec![0; p.mem_words()];
    /// assert_eq!(n.run(&[0], &mut mem), 0); // division by zero: abort
    /// assert_eq!(n.run(&[4], &mut mem), 25);
    /// assert_eq!(mem, [4]);
    /// ```
    pub fn run(&self, pkt: &[u8], mem: &mut [u32]) -> u32 {
        assert!(
            mem.len() >= self.prog.mem_words(),
            "the MBuf has {} words, the program needs {}",
            mem.len(),
            self.prog.mem_words()
        );
        let mut ctx = Ctx {
            prog: &self.prog,
            pkt: pkt.as_ptr(),
            caplen: pkt.len(),
            mem: mem.as_mut_ptr(),
            panic: None,
        };
        // SAFETY: the generated code reads only packet bytes `pkt[i]` with
        // `i + width <= caplen` (each read is checked against `caplen`, the
        // slice's length) and MBuf words `mem[i]` with `i < mem_words()`: MEM
        // indices are compared with `mem_size()` at run time unless the
        // compiler proved them smaller, registers sit at the constant
        // indices `mem_size() .. mem_words()`, and `mem.len() >= mem_words()`
        // was just checked. It writes only those MBuf words (borrowed `&mut`)
        // and passes `ctx` to the helper. It terminates: every loop counts
        // its iterations and aborts at its bound. The code pages live as
        // long as `self`.
        let v = unsafe { (self.func)(pkt.as_ptr(), pkt.len() as u64, mem.as_mut_ptr(), &mut ctx) };
        if let Some(p) = ctx.panic {
            std::panic::resume_unwind(p);
        }
        v
    }

    /// The program this code was compiled from.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("MEM[1] = 1;", &Externs::new()).unwrap();
    /// assert_eq!(sluice_native::fpl::NativeFpl::compile(&p).unwrap().program().mem_words(), 2);
    /// ```
    pub fn program(&self) -> &Program {
        &self.prog
    }

    /// Bytes of machine code.
    ///
    /// ```
    /// use sluice_fpl::{Externs, Program};
    /// let p = Program::compile("RETURN 1;", &Externs::new()).unwrap();
    /// assert!(sluice_native::fpl::NativeFpl::compile(&p).unwrap().code_bytes() > 0);
    /// ```
    pub fn code_bytes(&self) -> usize {
        self.code_bytes
    }
}

/// The largest program compiled, in IR nodes with each HASH counting its
/// length (HASH is unrolled): Cranelift's time and memory grow with it, and
/// the work limit alone allows programs of a million nodes.
///
/// ```
/// use sluice_fpl::{Externs, Program};
/// let src = "R[0] = HASH(0, 1000, 7);".repeat(1 + sluice_native::fpl::MAX_SIZE / 1000);
/// let p = Program::compile(&src, &Externs::new()).unwrap();
/// assert!(sluice_native::fpl::NativeFpl::compile(&p).is_err());
/// ```
pub const MAX_SIZE: usize = 100_000;

/// The size of `body` as counted for [`MAX_SIZE`].
fn size(body: &[Stmt]) -> usize {
    fn expr(e: &Expr) -> usize {
        1 + match e {
            Expr::Const(_) | Expr::Reg(_) | Expr::Extern { .. } => 0,
            Expr::Mem { index, .. } => expr(index),
            Expr::Pkt { offset, .. } => expr(offset),
            Expr::Field { value, index, .. } => expr(value) + expr(index),
            Expr::Un(_, a) => expr(a),
            Expr::Bin(_, a, b) => expr(a) + expr(b),
            Expr::Hash { start, len, .. } => expr(start) + *len as usize,
        }
    }
    body.iter()
        .map(|s| match s {
            Stmt::SetReg { value, .. } | Stmt::Eval(value) | Stmt::Return(value) => 1 + expr(value),
            Stmt::SetMem { index, value, .. } => 1 + expr(index) + expr(value),
            Stmt::If { cond, then, els } => 1 + expr(cond) + size(then) + size(els),
            Stmt::Loop {
                init,
                cond,
                update,
                body,
                ..
            } => {
                1 + size(std::slice::from_ref(init))
                    + expr(cond)
                    + size(std::slice::from_ref(update))
                    + size(body)
            }
            Stmt::Break => 1,
        })
        .sum()
}

/// Generate, compile and finalize the function for `prog`: the module that
/// owns the code, the entry's address, and the code size.
fn build(prog: &Program) -> Result<(JITModule, *const u8, usize), NativeError> {
    let mut module = CodePages::module()?;
    let ptr = module.target_config().pointer_type();
    let mut ctx = module.make_context();
    let sig = &mut ctx.func.signature;
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(types::I64));
    sig.params.push(AbiParam::new(ptr));
    sig.params.push(AbiParam::new(ptr));
    sig.returns.push(AbiParam::new(types::I32));

    let mut fctx = FunctionBuilderContext::new();
    {
        let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (pkt, caplen, mem, cx) = (params[0], params[1], params[2], params[3]);
        let exit = b.create_block();
        b.append_block_param(exit, types::I32);

        let mut hsig = Signature::new(b.func.signature.call_conv);
        hsig.params.push(AbiParam::new(ptr));
        hsig.params.push(AbiParam::new(types::I32));
        hsig.params.push(AbiParam::new(types::I32));
        hsig.params.push(AbiParam::new(types::I32));
        hsig.returns.push(AbiParam::new(types::I64));
        let helper_sig = b.import_signature(hsig);

        let regs = prog.regs();
        let mut g = G {
            b,
            ptr,
            pkt,
            caplen,
            mem,
            cx,
            exit,
            helper_sig,
            mem_size: prog.mem_size() as u64,
            breaks: Vec::new(),
            next_var: regs as u32,
        };
        // Registers: SSA variables, loaded from the MBuf.
        for r in 0..regs {
            let var = Variable::from_u32(r as u32);
            g.b.declare_var(var, types::I32);
            let v = g.mem_load_const(prog.reg_base() + r);
            g.b.def_var(var, v);
        }
        if g.stmts(prog.body()) {
            let zero = g.b.ins().iconst(types::I32, 0);
            g.b.ins().jump(exit, &[zero]);
        }
        // The exit: store the registers back, return the result.
        g.b.switch_to_block(exit);
        let result = g.b.block_params(exit)[0];
        for r in 0..regs {
            let v = g.b.use_var(Variable::from_u32(r as u32));
            let addr = g.word_addr_const(prog.reg_base() + r);
            g.b.ins().store(MemFlags::trusted(), v, addr, 0);
        }
        g.b.ins().return_(&[result]);
        g.b.seal_all_blocks();
        g.b.finalize();
    }

    let (code, code_bytes) = CodePages::finish(&mut module, &mut ctx, "fpl")?;
    Ok((module, code, code_bytes))
}

/// Flags of packet loads. Not `readonly`: Cranelift treats a `readonly`
/// `notrap` load as pure and may hoist it out of a loop, above the length
/// check that guards it (a loop-invariant `PKT.B[6]` in a `FOR` would then
/// be read before the check, past the end of a short packet).
fn pkt_flags() -> MemFlags {
    MemFlags::new().with_notrap()
}

/// The code generator of one program.
struct G<'a> {
    b: FunctionBuilder<'a>,
    ptr: Type,
    pkt: Value,
    caplen: Value,
    mem: Value,
    cx: Value,
    /// The exit block (parameter: the result).
    exit: Block,
    helper_sig: SigRef,
    mem_size: u64,
    /// Where `BREAK` goes, innermost loop last.
    breaks: Vec<Block>,
    /// The next free variable number (registers take the first ones).
    next_var: u32,
}

impl G<'_> {
    fn iconst(&mut self, k: u32) -> Value {
        self.b.ins().iconst(types::I32, k as i64)
    }

    /// Continue in a fresh block when `cond` is zero; leave with 0 when not.
    fn abort_if(&mut self, cond: Value) {
        let next = self.b.create_block();
        let zero = self.iconst(0);
        self.b.ins().brif(cond, self.exit, &[zero], next, &[]);
        self.b.switch_to_block(next);
    }

    /// A 32-bit value zero-extended to the pointer width.
    fn widen_to_ptr(&mut self, v: Value) -> Value {
        if self.ptr == types::I32 {
            v
        } else {
            self.b.ins().uextend(self.ptr, v)
        }
    }

    fn word_addr_const(&mut self, i: usize) -> Value {
        self.b.ins().iadd_imm(self.mem, 4 * i as i64)
    }

    fn mem_load_const(&mut self, i: usize) -> Value {
        let addr = self.word_addr_const(i);
        self.b.ins().load(types::I32, MemFlags::trusted(), addr, 0)
    }

    /// The address of MEM word `idx`, checked against the MBuf size when
    /// `checked` (the compiler proved it in range otherwise).
    fn mem_addr(&mut self, idx: Value, checked: bool) -> Value {
        if checked {
            let out =
                self.b
                    .ins()
                    .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, idx, self.mem_size as i64);
            self.abort_if(out);
        }
        let i = self.widen_to_ptr(idx);
        let off = self.b.ins().imul_imm(i, 4);
        self.b.ins().iadd(self.mem, off)
    }

    /// Emit `body`; false if it cannot fall through (it ends in a jump).
    fn stmts(&mut self, body: &[Stmt]) -> bool {
        for s in body {
            if !self.stmt(s) {
                return false;
            }
        }
        true
    }

    fn stmt(&mut self, s: &Stmt) -> bool {
        match s {
            Stmt::SetReg { reg, op, value } => {
                let v = self.expr(value);
                let var = Variable::from_u32(*reg as u32);
                let v = match op {
                    None => v,
                    Some(op) => {
                        let old = self.b.use_var(var);
                        self.bin(*op, old, v)
                    }
                };
                self.b.def_var(var, v);
            }
            Stmt::SetMem {
                index,
                checked,
                op,
                value,
            } => {
                let i = self.expr(index);
                let addr = self.mem_addr(i, *checked);
                let v = self.expr(value);
                let v = match op {
                    None => v,
                    Some(op) => {
                        let old = self.b.ins().load(types::I32, MemFlags::trusted(), addr, 0);
                        self.bin(*op, old, v)
                    }
                };
                self.b.ins().store(MemFlags::trusted(), v, addr, 0);
            }
            Stmt::Eval(e) => {
                self.expr(e);
            }
            Stmt::If { cond, then, els } => {
                let c = self.expr(cond);
                let (tb, eb, join) = (
                    self.b.create_block(),
                    self.b.create_block(),
                    self.b.create_block(),
                );
                self.b.ins().brif(c, tb, &[], eb, &[]);
                let mut reached = false;
                for (blk, body) in [(tb, then), (eb, els)] {
                    self.b.switch_to_block(blk);
                    if self.stmts(body) {
                        self.b.ins().jump(join, &[]);
                        reached = true;
                    }
                }
                self.b.switch_to_block(join);
                if !reached {
                    // Nothing reaches `join`: end it and emit no more here.
                    let zero = self.iconst(0);
                    self.b.ins().jump(self.exit, &[zero]);
                    return false;
                }
            }
            Stmt::Loop {
                init,
                cond,
                update,
                body,
                max_trips,
            } => {
                self.stmt(init);
                let trips = Variable::from_u32(self.next_var);
                self.next_var += 1;
                self.b.declare_var(trips, types::I32);
                let zero = self.iconst(0);
                self.b.def_var(trips, zero);
                let (head, go, done) = (
                    self.b.create_block(),
                    self.b.create_block(),
                    self.b.create_block(),
                );
                self.b.ins().jump(head, &[]);
                self.b.switch_to_block(head);
                let c = self.expr(cond);
                self.b.ins().brif(c, go, &[], done, &[]);
                self.b.switch_to_block(go);
                let t = self.b.use_var(trips);
                let over = self.b.ins().icmp_imm(IntCC::Equal, t, *max_trips as i64);
                self.abort_if(over);
                let t1 = self.b.ins().iadd_imm(t, 1);
                self.b.def_var(trips, t1);
                self.breaks.push(done);
                let falls = self.stmts(body);
                self.breaks.pop();
                if falls && self.stmt(update) {
                    self.b.ins().jump(head, &[]);
                }
                self.b.switch_to_block(done);
            }
            Stmt::Break => {
                let to = *self.breaks.last().expect("BREAK inside a loop (checked)");
                self.b.ins().jump(to, &[]);
                return false;
            }
            Stmt::Return(e) => {
                let v = self.expr(e);
                self.b.ins().jump(self.exit, &[v]);
                return false;
            }
        }
        true
    }

    /// `x op y` for the strict operators (`&&`/`||` are handled in `expr`).
    fn bin(&mut self, op: BinOp, x: Value, y: Value) -> Value {
        let cmp = |g: &mut Self, cc: IntCC| {
            let c = g.b.ins().icmp(cc, x, y);
            g.b.ins().uextend(types::I32, c)
        };
        // The arithmetic operators mean what the IR's do.
        let arith = match op {
            BinOp::Add => Some(sluice_ir::BinOp::Add),
            BinOp::Sub => Some(sluice_ir::BinOp::Sub),
            BinOp::Mul => Some(sluice_ir::BinOp::Mul),
            BinOp::Div => Some(sluice_ir::BinOp::Div),
            BinOp::Mod => Some(sluice_ir::BinOp::Mod),
            BinOp::Shl => Some(sluice_ir::BinOp::Shl),
            BinOp::Shr => Some(sluice_ir::BinOp::Shr),
            BinOp::BitAnd => Some(sluice_ir::BinOp::And),
            BinOp::BitOr => Some(sluice_ir::BinOp::Or),
            BinOp::BitXor => Some(sluice_ir::BinOp::Xor),
            _ => None,
        };
        if let Some(a) = arith {
            if crate::divides(a) {
                let z = self.b.ins().icmp_imm(IntCC::Equal, y, 0);
                self.abort_if(z);
            }
            return crate::arith(&mut self.b, a, x, y);
        }
        match op {
            BinOp::Eq => cmp(self, IntCC::Equal),
            BinOp::Ne => cmp(self, IntCC::NotEqual),
            BinOp::Lt => cmp(self, IntCC::UnsignedLessThan),
            BinOp::Le => cmp(self, IntCC::UnsignedLessThanOrEqual),
            BinOp::Gt => cmp(self, IntCC::UnsignedGreaterThan),
            BinOp::Ge => cmp(self, IntCC::UnsignedGreaterThanOrEqual),
            BinOp::And | BinOp::Or => {
                // Both sides already evaluated (compound assignment cannot
                // use these; kept total for safety).
                let a = self.b.ins().icmp_imm(IntCC::NotEqual, x, 0);
                let b = self.b.ins().icmp_imm(IntCC::NotEqual, y, 0);
                let r = if op == BinOp::And {
                    self.b.ins().band(a, b)
                } else {
                    self.b.ins().bor(a, b)
                };
                self.b.ins().uextend(types::I32, r)
            }
            _ => unreachable!("arithmetic is done above"),
        }
    }

    /// A packet read of `width` bytes at `off`, big-endian, checked.
    fn load(&mut self, off: Value, width: u32) -> Value {
        let start = self.b.ins().uextend(types::I64, off);
        let end = self.b.ins().iadd_imm(start, width as i64);
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
        let addr = self.b.ins().iadd(self.pkt, start);
        let flags = pkt_flags();
        match width {
            1 => self.b.ins().uload8(types::I32, flags, addr, 0),
            2 => {
                let x = self.b.ins().load(types::I16, flags, addr, 0);
                let x = self.b.ins().bswap(x);
                self.b.ins().uextend(types::I32, x)
            }
            _ => {
                let x = self.b.ins().load(types::I32, flags, addr, 0);
                self.b.ins().bswap(x)
            }
        }
    }

    fn expr(&mut self, e: &Expr) -> Value {
        match e {
            Expr::Const(k) => self.iconst(*k),
            Expr::Reg(r) => self.b.use_var(Variable::from_u32(*r as u32)),
            Expr::Mem { index, checked } => {
                let i = self.expr(index);
                let addr = self.mem_addr(i, *checked);
                self.b.ins().load(types::I32, MemFlags::trusted(), addr, 0)
            }
            Expr::Pkt { offset, width } => {
                let off = self.expr(offset);
                self.load(off, width.bytes())
            }
            Expr::Field {
                value,
                total,
                bits,
                index,
            } => {
                let v = self.expr(value);
                let m = self.expr(index);
                let count = total / bits;
                let out = self
                    .b
                    .ins()
                    .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, m, count as i64);
                self.abort_if(out);
                // shift = (total - bits) - bits * m
                let bm = self.b.ins().imul_imm(m, *bits as i64);
                let top = self.iconst(total - bits);
                let shift = self.b.ins().isub(top, bm);
                let x = self.b.ins().ushr(v, shift);
                self.b.ins().band_imm(x, (u32::MAX >> (32 - bits)) as i64)
            }
            Expr::Un(op, a) => {
                let x = self.expr(a);
                match op {
                    UnOp::Neg => self.b.ins().ineg(x),
                    UnOp::BitNot => self.b.ins().bnot(x),
                    UnOp::Not => {
                        let c = self.b.ins().icmp_imm(IntCC::Equal, x, 0);
                        self.b.ins().uextend(types::I32, c)
                    }
                }
            }
            Expr::Bin(op @ (BinOp::And | BinOp::Or), a, b) => {
                // Short-circuit: the right side only when it decides.
                let x = self.expr(a);
                let rhs = self.b.create_block();
                let join = self.b.create_block();
                self.b.append_block_param(join, types::I32);
                let early = self.iconst((*op == BinOp::Or) as u32);
                if *op == BinOp::And {
                    self.b.ins().brif(x, rhs, &[], join, &[early]);
                } else {
                    self.b.ins().brif(x, join, &[early], rhs, &[]);
                }
                self.b.switch_to_block(rhs);
                let y = self.expr(b);
                let c = self.b.ins().icmp_imm(IntCC::NotEqual, y, 0);
                let c = self.b.ins().uextend(types::I32, c);
                self.b.ins().jump(join, &[c]);
                self.b.switch_to_block(join);
                self.b.block_params(join)[0]
            }
            Expr::Bin(op, a, b) => {
                let x = self.expr(a);
                let y = self.expr(b);
                self.bin(*op, x, y)
            }
            Expr::Hash { start, len, size } => {
                let s = self.expr(start);
                let s64 = self.b.ins().uextend(types::I64, s);
                let end = self.b.ins().iadd_imm(s64, *len as i64);
                let over = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedGreaterThan, end, self.caplen);
                self.abort_if(over);
                let s = if self.ptr == types::I64 {
                    s64
                } else {
                    self.b.ins().ireduce(self.ptr, s64)
                };
                let base = self.b.ins().iadd(self.pkt, s);
                let flags = pkt_flags();
                let mut h = self.iconst(0x811c_9dc5);
                for k in 0..*len {
                    let byte = self.b.ins().uload8(types::I32, flags, base, k as i32);
                    let x = self.b.ins().bxor(h, byte);
                    h = self.b.ins().imul_imm(x, 0x0100_0193);
                }
                self.b.ins().urem_imm(h, *size as i64)
            }
            Expr::Extern {
                func,
                input,
                output,
            } => {
                let helper = extern_helper as extern "C" fn(_, _, _, _) -> u64;
                let callee = self.b.ins().iconst(self.ptr, helper as usize as i64);
                let f = self.iconst(*func as u32);
                let i = self.iconst(*input);
                let o = self.iconst(*output);
                let call = self
                    .b
                    .ins()
                    .call_indirect(self.helper_sig, callee, &[self.cx, f, i, o]);
                let r = self.b.inst_results(call)[0];
                let hi = self.b.ins().ushr_imm(r, 32);
                self.abort_if(hi);
                self.b.ins().ireduce(types::I32, r)
            }
        }
    }
}

#[cfg(test)]
mod tests;
