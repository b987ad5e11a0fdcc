//! Native code for single sluice filters, generated at run time with Cranelift.
//!
//! [`NativeFilter::compile`] turns a [`sluice_ir::Filter`] into one machine
//! function `extern "C" fn(pkt: *const u8, caplen: u64, wirelen: u32) -> u32`
//! and [`NativeFilter::run`] calls it safely on a packet. The code means
//! exactly what the IR's reference interpreter ([`sluice_ir::eval`]) means:
//!
//! - the predicate becomes a decision graph built by continuation passing
//!   (as in the classic BPF back end): every comparison is a compare and
//!   branch, `and`/`or`/`not` are only edges, leaves return the accept value
//!   or 0;
//! - every load is bounds-checked against `caplen` in 64-bit arithmetic (no
//!   wrap-around); a failed check, or a division or modulo by zero, jumps to
//!   the one shared reject block (the filter aborts, even under `not`);
//! - shifts by 32 or more give 0 (a `select`), arithmetic wraps at 32 bits;
//! - filter constants are immediates; `in` sets are a balanced search tree of
//!   compares, or a jump table when the keys are dense;
//! - `protochain` calls back into a safe Rust helper (the reference walk,
//!   bounded by [`sluice_ir::eval::PROTOCHAIN_MAX_STEPS`]) through a function
//!   pointer; it is rare and already a loop, so this costs little.
//!
//! [`NativeFilter::run_batch`] runs a batch of packets through a second
//! function, built on first use, whose loop over the packets is machine code:
//! one call per 64 packets instead of one per packet.
//!
//! DPF's optimisations, each counted in [`NativeFilter::stats`] and checked
//! by a test:
//!
//! - **filter constants as immediates** (every compare and `in` key);
//! - **fast disjunctions**: `in` sets as a jump table when dense, a balanced
//!   search tree ending in short compare chains otherwise;
//! - **bounds-check aggregation**: in an `and` whose failure means reject, a
//!   false conjunct and an abort have the same outcome, so every
//!   fixed-offset load certain to be reached is covered by one length check
//!   at the head of the `and`, and every computed base (a header after the
//!   variable-length IPv4 header) read at least twice is computed once and
//!   checked once for its furthest load; loads within need no check of
//!   their own. A packet too short rejects there, as the interpreter would
//!   reject it later;
//! - **atom coalescing**: in such an `and`, compares of adjacent bytes from
//!   one base against constants (masked or not) become one 16- or 32-bit
//!   compare, e.g. TCP source and destination port;
//! - **constant shifts folded into offsets**: a constant added to a base is
//!   part of the load's offset in the IR ([`sluice_ir::Val::load`]);
//! - **alignment**: x86-64 and AArch64 load unaligned words at full speed,
//!   so no alignment is tracked and no alignment check is ever emitted.
//!
//! Code memory: Cranelift's JIT module allocates code in its own pages
//! (page-aligned allocations, never shared with other data); they are
//! read+write while the code is written and become read+execute in
//! `finalize_definitions`, before any pointer to the code is taken. They are
//! never writable and executable at once (the test `code_pages_are_not_writable`
//! checks `/proc/self/maps` on Linux). The pages are freed when the
//! [`NativeFilter`] is dropped. The decision tree's functions, a few hundred
//! per set, are packed into shared pages instead (`arena`), each on cache
//! lines of its own, written through a short-lived second mapping and run
//! from one that is never writable.
//!
//! ```
//! use sluice_ir::{Filter, Pred, Val, Size};
//! use sluice_native::NativeFilter;
//! // ether[12:2] == 0x800
//! let f = Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 65535);
//! let n = NativeFilter::compile(&f).unwrap();
//! let mut pkt = [0u8; 14];
//! pkt[12] = 0x08;
//! assert_eq!(n.run(&pkt, 14), 65535);
//! assert_eq!(n.run(&pkt[..13], 14), 0); // the load is out of bounds: abort
//! ```

#![warn(missing_docs)]
// Machine code is called through function pointers: each call is an
// `unsafe` block with its SAFETY note.
#![allow(unsafe_code)]

mod arena;
mod batch;
mod codegen;
pub mod floor;
pub mod fpl;
pub mod merged;
mod probe;
mod settle;
pub mod tree;

/// The default native engine: tuple space search as machine code while
/// the filters have few shapes, the decision tree as machine code after
/// ([`sluice_classifier::Auto`]).
///
/// ```
/// use sluice_classifier::Engine;
/// let a = sluice_native::NativeAuto::empty();
/// assert!(!a.is_tree());
/// ```
pub type NativeAuto = sluice_classifier::Auto<merged::NativeMerged, tree::NativeTree>;

/// The concurrent classifier over [`NativeAuto`]: one writer, readers
/// that never wait, the code built at each publish.
///
/// ```
/// use sluice_ir::{Filter, Pred};
/// let mut c = sluice_native::AutoClassifier::default();
/// let id = c.insert(&Filter::new(Pred::True, 1), 0);
/// c.publish();
/// assert_eq!(c.reader().classify(&[], 0), vec![id]);
/// ```
pub type AutoClassifier = sluice_classifier::Classifier<NativeAuto>;

use std::fmt;

use batch::{desc_buf, descs, BATCH_CHUNK};
use codegen::{build, Shape};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::FunctionBuilder;
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{default_libcall_names, Linkage, Module, ModuleError};
use sluice_ir::{Filter, Pred};

/// Why a filter could not be compiled to native code. The causes from
/// Cranelift are kept ([`std::error::Error::source`]).
///
/// ```
/// let e = sluice_native::NativeError::Limit("no more than 10 tests".into());
/// assert_eq!(e.to_string(), "native code: no more than 10 tests");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum NativeError {
    /// Cranelift has no code generator for this host, or refused the
    /// settings sluice asks for.
    #[error("native code: {0}")]
    Host(#[from] HostError),
    /// Cranelift could not declare or finalize a function.
    #[error("native code: {0}")]
    Module(#[source] Box<cranelift_module::ModuleError>),
    /// Cranelift could not compile a function (shown with the verifier's
    /// findings, if any).
    #[error("native code: {0:?}")]
    Compile(#[source] Box<cranelift_module::ModuleError>),
    /// The input is past what this code generator takes.
    #[error("native code: {0}")]
    Limit(String),
}

/// Why Cranelift has no code generator for this host. It is found once per
/// process and shared, so the causes are behind [`Arc`](std::sync::Arc)s.
///
/// ```
/// let e = sluice_native::HostError::Unsupported("unsupported architecture");
/// assert_eq!(e.to_string(), "unsupported architecture");
/// ```
#[derive(Clone, Debug, thiserror::Error)]
pub enum HostError {
    /// A setting was refused.
    #[error(transparent)]
    Setting(std::sync::Arc<settings::SetError>),
    /// Cranelift does not generate code for this CPU.
    #[error("{0}")]
    Unsupported(&'static str),
    /// The target description could not be built.
    #[error(transparent)]
    Isa(std::sync::Arc<cranelift_codegen::CodegenError>),
}

/// What the code generator emitted, for tests and curiosity.
///
/// ```
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let f = Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 1);
/// let s = sluice_native::NativeFilter::compile(&f).unwrap().stats();
/// assert_eq!((s.loads, s.bounds_checks), (1, 1));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packet loads emitted.
    pub loads: usize,
    /// Length checks emitted (per-load checks and aggregated ones).
    pub bounds_checks: usize,
    /// Length checks that cover several loads (bounds-check aggregation).
    pub aggregated_checks: usize,
    /// `in` sets compiled to a jump table.
    pub jump_tables: usize,
    /// Equality tests decided by the path to them (a repeated test, or the
    /// same field tested for another constant), compiled as jumps.
    pub settled: usize,
    /// Equality and mask tests of 2- and 4-byte fields compiled against the
    /// constant in packet byte order (no byte swap per packet).
    pub raw_compares: usize,
    /// Compares merged away by atom coalescing: adjacent fields of one
    /// header compared with constants become one wider compare.
    pub coalesced: usize,
    /// Loads whose base had a constant added, folded into the offset.
    pub folded_offsets: usize,
    /// Length checks that cover several loads from one computed base (an
    /// indirect header such as TCP after a variable-length IPv4 header).
    pub aggregated_indirect: usize,
    /// Bytes of machine code.
    pub code_bytes: usize,
}

/// The largest filter compiled, in comparisons (an `in` set counts one per
/// 16 keys). Cranelift's compile time grows faster than the filter (about
/// 1 s for 3,000 `tcp port` terms); larger filters are left to the
/// interpreter until the merged classifier's code generator handles them.
///
/// ```
/// use sluice_ir::{Filter, Pred, Val};
/// let big = Pred::Or((0..=sluice_native::MAX_TESTS as u32).map(|k| Pred::eq(Val::Len, k)).collect());
/// assert!(sluice_native::NativeFilter::compile(&Filter::new(big, 1)).is_err());
/// ```
pub const MAX_TESTS: usize = 1000;

/// The number of comparisons in `p`, as counted for [`MAX_TESTS`].
fn size(p: &Pred) -> usize {
    match p {
        Pred::True | Pred::False => 0,
        Pred::Cmp { .. } | Pred::ProtoChain { .. } => 1,
        Pred::Not(q) => size(q),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().map(size).sum(),
        Pred::In { keys, .. } => 1 + keys.len() / 16,
    }
}

/// The machine function's type.
type FilterFn = unsafe extern "C" fn(pkt: *const u8, caplen: u64, wirelen: u32) -> u32;

/// A filter compiled to machine code for the host CPU.
///
/// ```
/// use sluice_ir::{Filter, Pred};
/// let n = sluice_native::NativeFilter::compile(&Filter::new(Pred::True, 7)).unwrap();
/// assert_eq!(n.run(&[], 0), 7);
/// ```
pub struct NativeFilter {
    func: FilterFn,
    /// Owns the code pages (freed when this is dropped).
    _pages: CodePages,
    stats: Stats,
    /// The filter, kept to build the batch function on first use.
    filter: Filter,
    /// The batch function, built by the first [`NativeFilter::run_batch`]
    /// (`None` if it could not be built: then batches run packet by packet).
    batch: std::sync::OnceLock<Option<BatchCode>>,
}

// SAFETY: after `finalize_definitions` the module is never used again except
// to free its memory in `Drop`, which takes `&mut self` (exclusive access).
// The code itself is immutable (read+execute pages) and reentrant: it keeps
// no state between calls, so calling it from several threads at once is fine.
unsafe impl Send for NativeFilter {}
// SAFETY: see `Send`; `run` only reads `func`, an immutable code pointer.
unsafe impl Sync for NativeFilter {}

impl sluice_classifier::tree::WholeCode for NativeFilter {
    fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        NativeFilter::run(self, pkt, wirelen)
    }
}

impl fmt::Debug for NativeFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NativeFilter")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The machine code of one function (a filter, a batch loop, an FPL
/// program, a merged-classifier unit or a decision tree's unit): the pages
/// of a finalized JIT module of its own, freed when this is dropped, or its
/// place among other functions' code in the arena, which keeps the chunk
/// mapped until its last function's `CodePages` drops. Every owner of a pointer into the code keeps the
/// `CodePages` in the same struct and calls the code only through a borrow
/// of that struct, so no call can be running, or start, once it drops.
pub(crate) struct CodePages(Pages);

/// Where a function's code is.
enum Pages {
    /// In a JIT module of its own.
    Module(Option<Box<JITModule>>),
    /// Packed with other functions' code ([`arena`]); held, never read,
    /// so that its chunk stays mapped.
    Packed(#[allow(dead_code)] arena::Placed),
}

impl CodePages {
    /// A new JIT module for the host CPU to define functions in.
    pub(crate) fn module() -> Result<JITModule, NativeError> {
        Ok(JITModule::new(JITBuilder::with_isa(
            host_isa()?,
            default_libcall_names(),
        )))
    }

    /// Own a module whose definitions are finalized.
    pub(crate) fn new(module: JITModule) -> CodePages {
        CodePages(Pages::Module(Some(Box::new(module))))
    }

    /// A context for a function of the host's calling convention that
    /// refers to nothing outside itself, to build and then place with
    /// [`CodePages::place`].
    pub(crate) fn context() -> Result<cranelift_codegen::Context, NativeError> {
        let mut ctx = cranelift_codegen::Context::new();
        ctx.func.signature.call_conv = host_isa()?.default_call_conv();
        Ok(ctx)
    }

    /// Compile the function built in `ctx` (from [`CodePages::context`])
    /// and place its code: packed with other functions' code where this
    /// process can ([`arena`]), in a JIT module of its own otherwise. The
    /// entry's address, the code's size in bytes and its pages.
    pub(crate) fn place(
        ctx: &mut cranelift_codegen::Context,
        name: &str,
    ) -> Result<(*const u8, usize, CodePages), NativeError> {
        CodePages::place_in(ctx, name, Some(&arena::CODE))
    }

    /// [`CodePages::place`] into `arena`, or a JIT module where `None` (or
    /// where the arena refuses the code).
    fn place_in(
        ctx: &mut cranelift_codegen::Context,
        name: &str,
        arena: Option<&arena::Arena>,
    ) -> Result<(*const u8, usize, CodePages), NativeError> {
        let isa = host_isa()?;
        ctx.compile(&*isa, &mut Default::default())
            .map_err(|e| NativeError::Compile(Box::new(ModuleError::Compilation(e.inner))))?;
        let compiled = ctx.compiled_code().expect("compiled just above");
        let code = compiled.code_buffer();
        let bytes = code.len();
        let relocs = compiled.buffer.relocs();
        let align = compiled.buffer.alignment;
        if let Some(arena) = arena.filter(|_| relocs.is_empty()) {
            if let Some(placed) = arena.install(code, align as usize) {
                let entry = placed.ptr();
                dump_code(name, code, entry);
                return Ok((entry, bytes, CodePages(Pages::Packed(placed))));
            }
        }
        // The same bytes, in a module of their own.
        let module_error = |e| NativeError::Module(Box::new(e));
        let mut module = CodePages::module()?;
        let id = module
            .declare_function(name, Linkage::Local, &ctx.func.signature)
            .map_err(module_error)?;
        module
            .define_function_bytes(id, &ctx.func, u64::from(align), code, relocs)
            .map_err(module_error)?;
        module.finalize_definitions().map_err(module_error)?;
        let entry = module.get_finalized_function(id);
        dump_code(name, code, entry);
        Ok((entry, bytes, CodePages::new(module)))
    }

    /// Compile the function built in `ctx` into `module` under `name` and
    /// finalize it: the entry's address and the size of its machine code.
    /// The pages become read+execute (and no longer writable) here, before
    /// any pointer to the code exists.
    pub(crate) fn finish(
        module: &mut JITModule,
        ctx: &mut cranelift_codegen::Context,
        name: &str,
    ) -> Result<(*const u8, usize), NativeError> {
        let id = module
            .declare_function(name, Linkage::Local, &ctx.func.signature)
            .map_err(|e| NativeError::Module(Box::new(e)))?;
        module
            .define_function(id, ctx)
            .map_err(|e| NativeError::Compile(Box::new(e)))?;
        let code = ctx.compiled_code().map(|c| c.code_buffer());
        let bytes = code.map_or(0, <[u8]>::len);
        // Kept for the dump only: it names the address, known after
        // finalizing.
        let dump = code.filter(|_| dumping()).map(<[u8]>::to_vec);
        module.clear_context(ctx);
        module
            .finalize_definitions()
            .map_err(|e| NativeError::Module(Box::new(e)))?;
        let entry = module.get_finalized_function(id);
        if let Some(code) = dump {
            dump_code(name, &code, entry);
        }
        Ok((entry, bytes))
    }
}

/// The environment variable that asks for [`dump_code`].
const DUMP: &str = "SLUICE_DUMP_CODE";

/// True when [`DUMP`] is set.
fn dumping() -> bool {
    std::env::var_os(DUMP).is_some()
}

/// With `SLUICE_DUMP_CODE=DIR` set, write the machine code of every
/// function compiled to `DIR/NAME-N-at-ADDRESS.bin` (N counts functions
/// in this process; ADDRESS is where the code runs, in hexadecimal, so
/// that a profiler's or valgrind's addresses can be put to a function),
/// to read with `objdump -D -b binary -mi386:x86-64 FILE`; how the
/// instruction counts in the README were checked. Errors are ignored:
/// this is a debugging aid, never on the packet path.
fn dump_code(name: &str, code: &[u8], entry: *const u8) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static COUNT: AtomicUsize = AtomicUsize::new(0);
    if let Some(dir) = std::env::var_os(DUMP) {
        let i = COUNT.fetch_add(1, Ordering::Relaxed);
        let _ = std::fs::write(
            std::path::Path::new(&dir).join(format!("{name}-{i}-at-{:x}.bin", entry as usize)),
            code,
        );
    }
}

impl Drop for CodePages {
    fn drop(&mut self) {
        if let Pages::Module(m) = &mut self.0 {
            let Some(module) = m.take() else { return };
            // SAFETY: the code is reachable only through the struct that
            // owns these pages (see the type's documentation), which is
            // being dropped: no call into it can be running or start after.
            unsafe { (*module).free_memory() };
        }
    }
}

/// The 64-bit words of a table key (two 32-bit key words each, the first
/// in the low half) and the key's hash, as
/// [`sluice_classifier::table::hash`] computes it, for code that probes
/// the classifiers' tables.
pub(crate) fn key_hash(b: &mut FunctionBuilder, key: &[Value]) -> (Vec<Value>, Value) {
    use sluice_classifier::table::{HASH_LEN, HASH_MIX, HASH_WORDS};
    let len = (key.len() as u64).wrapping_mul(HASH_LEN);
    let mut acc = b.ins().iconst(types::I64, len as i64);
    let mut words = Vec::with_capacity(key.len().div_ceil(2));
    for (i, ch) in key.chunks(2).enumerate() {
        let lo = b.ins().uextend(types::I64, ch[0]);
        let w = match ch.get(1) {
            Some(&h) => {
                let hi = b.ins().uextend(types::I64, h);
                let hi = b.ins().ishl_imm(hi, 32);
                b.ins().bor(lo, hi)
            }
            None => lo,
        };
        words.push(w);
        let x = b.ins().imul_imm(w, HASH_WORDS[i % HASH_WORDS.len()] as i64);
        acc = b.ins().iadd(acc, x);
    }
    let s = b.ins().ushr_imm(acc, 32);
    let x = b.ins().bxor(acc, s);
    let x = b.ins().imul_imm(x, HASH_MIX as i64);
    let s = b.ins().ushr_imm(x, 29);
    (words, b.ins().bxor(x, s))
}

/// `x op y` on 32 bits for the IR's arithmetic operators, as every
/// language of sluice means them (wrapping, unsigned division, shifts of
/// 32 or more giving 0). A divisor must have been checked against zero
/// first ([`divides`]): the caller aborts the filter there.
pub(crate) fn arith(b: &mut FunctionBuilder, op: sluice_ir::BinOp, x: Value, y: Value) -> Value {
    use sluice_ir::BinOp;
    match op {
        BinOp::Add => b.ins().iadd(x, y),
        BinOp::Sub => b.ins().isub(x, y),
        BinOp::Mul => b.ins().imul(x, y),
        BinOp::Div => b.ins().udiv(x, y),
        BinOp::Mod => b.ins().urem(x, y),
        BinOp::And => b.ins().band(x, y),
        BinOp::Or => b.ins().bor(x, y),
        BinOp::Xor => b.ins().bxor(x, y),
        BinOp::Shl | BinOp::Shr => shift32(b, op == BinOp::Shl, x, y),
    }
}

/// Whether `op` divides (its right side must not be zero).
pub(crate) fn divides(op: sluice_ir::BinOp) -> bool {
    matches!(op, sluice_ir::BinOp::Div | sluice_ir::BinOp::Mod)
}

/// `x << y` (or `x >> y`, logical) on 32 bits as sluice's languages mean
/// it: a shift by 32 or more gives 0, where Cranelift shifts by `y mod 32`.
pub(crate) fn shift32(b: &mut FunctionBuilder, left: bool, x: Value, y: Value) -> Value {
    let s = if left {
        b.ins().ishl(x, y)
    } else {
        b.ins().ushr(x, y)
    };
    let big = b.ins().icmp_imm(IntCC::UnsignedGreaterThanOrEqual, y, 32);
    let zero = b.ins().iconst(types::I32, 0);
    b.ins().select(big, zero, s)
}

/// `k` as a load of a `bytes`-byte field (1, 2 or 4) gives it in the
/// host's byte order when the field holds `k` (network order); `None` when
/// the field is too narrow ever to hold `k`. Compares against it need no
/// byte swap per packet.
pub(crate) fn raw_const(k: u32, bytes: u32) -> Option<u32> {
    match bytes {
        1 => (k <= 0xff).then_some(k),
        2 => (k <= 0xffff).then(|| (k as u16).to_be() as u32),
        _ => Some(k.to_be()),
    }
}

/// The mask `m` for such a load: `raw & raw_mask(m, bytes) != 0` exactly
/// when `value & m != 0`.
pub(crate) fn raw_mask(m: u32, bytes: u32) -> u32 {
    match bytes {
        1 => m & 0xff,
        2 => ((m & 0xffff) as u16).to_be() as u32,
        _ => m.to_be(),
    }
}

/// The host's target description, built once: detecting the CPU and
/// building the ISA costs more than compiling a small filter.
fn host_isa() -> Result<cranelift_codegen::isa::OwnedTargetIsa, NativeError> {
    static ISA: std::sync::OnceLock<Result<cranelift_codegen::isa::OwnedTargetIsa, HostError>> =
        std::sync::OnceLock::new();
    ISA.get_or_init(|| {
        let mut flags = settings::builder();
        let set = |f: &mut settings::Builder, k: &str, v: &str| {
            f.set(k, v)
                .map_err(|e| HostError::Setting(std::sync::Arc::new(e)))
        };
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        // Cranelift's IR verifier checks the generator, not the filter: it
        // runs in debug builds (every test), and release builds skip its
        // share of the compile time.
        let verify = if cfg!(debug_assertions) {
            "true"
        } else {
            "false"
        };
        set(&mut flags, "enable_verifier", verify)?;
        cranelift_native::builder()
            .map_err(HostError::Unsupported)?
            .finish(settings::Flags::new(flags))
            .map_err(|e| HostError::Isa(std::sync::Arc::new(e)))
    })
    .clone()
    .map_err(NativeError::Host)
}

/// The batch function's type.
type BatchFn = unsafe extern "C" fn(descs: *const u8, n: u64, out: *mut u32);

/// The batch function and the module owning its code pages.
struct BatchCode {
    func: BatchFn,
    /// Owns the code pages (freed when this is dropped).
    _pages: CodePages,
}

// SAFETY: as for `NativeFilter`: the module is only touched again to free it
// in `Drop` (exclusive access); the code is immutable, reentrant and keeps no
// state between calls (it writes only the `out` array it is given).
unsafe impl Send for BatchCode {}
// SAFETY: see `Send`.
unsafe impl Sync for BatchCode {}

/// At most this many operations once shared values are copied into
/// their uses ([`sluice_ir::Val::Shared`]).
const MAX_EXPANDED: u64 = 1 << 16;

/// How many value operations `p` has with every shared value copied into
/// each of its uses (saturating).
fn expanded_size(p: &Pred) -> u64 {
    use sluice_ir::Val;
    use std::collections::HashMap;
    fn val(v: &Val, memo: &mut HashMap<usize, u64>) -> u64 {
        match v {
            Val::Const(_) | Val::Len => 1,
            Val::Load { base, .. } => 1 + val(base, memo),
            Val::Bin(_, a, b) => (1 + val(a, memo)).saturating_add(val(b, memo)),
            Val::Neg(a) => 1 + val(a, memo),
            Val::Shared(s) => {
                if let Some(&n) = memo.get(&s.id()) {
                    return n;
                }
                let n = val(s.val(), memo);
                memo.insert(s.id(), n);
                n
            }
        }
    }
    fn pred(p: &Pred, memo: &mut HashMap<usize, u64>) -> u64 {
        match p {
            Pred::True | Pred::False => 1,
            Pred::Cmp { lhs, rhs, .. } => (1 + val(lhs, memo)).saturating_add(val(rhs, memo)),
            Pred::Not(q) => pred(q, memo),
            Pred::And(ps) | Pred::Or(ps) => {
                ps.iter().fold(1u64, |n, q| n.saturating_add(pred(q, memo)))
            }
            Pred::In { val: v, .. } | Pred::ProtoChain { start: v, .. } => 1 + val(v, memo),
        }
    }
    pred(p, &mut HashMap::new())
}

impl NativeFilter {
    /// Compile a filter for the host CPU.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Val, CmpOp};
    /// let f = Filter::new(Pred::cmp(CmpOp::Gt, Val::Len, Val::Const(100)), 1);
    /// let n = sluice_native::NativeFilter::compile(&f).unwrap();
    /// assert_eq!((n.run(&[], 101), n.run(&[], 100)), (1, 0));
    /// ```
    pub fn compile(filter: &Filter) -> Result<NativeFilter, NativeError> {
        // (The host's target description is built once per process.)
        if filter.pred.has_shared() {
            // This code generator computes a shared value at each use (as
            // a copy); classic BPF keeps it in a scratch word. Copies are
            // cheap for one or two nested tunnels, not for five.
            let copied = expanded_size(&filter.pred);
            if copied > MAX_EXPANDED {
                return Err(NativeError::Limit(format!(
                    "values shared between tests (nested tunnels) would be copied into \
                     {copied} operations, more than {MAX_EXPANDED}: they run as classic BPF"
                )));
            }
        }
        let tests = size(&filter.pred);
        if tests > MAX_TESTS {
            return Err(NativeError::Limit(format!(
                "{tests} tests, more than the {MAX_TESTS} compiled for now"
            )));
        }
        let mut stats = Stats::default();
        let (module, code) = build(filter, Shape::Single, &mut stats)?;
        // SAFETY: `code` is the entry of the function just finalized, whose
        // signature (pointer, i64, i32) -> i32 in the host's default calling
        // convention is exactly `FilterFn`'s `extern "C"` ABI.
        let func = unsafe { std::mem::transmute::<*const u8, FilterFn>(code) };
        Ok(NativeFilter {
            func,
            _pages: CodePages::new(module),
            stats,
            filter: filter.clone(),
            batch: std::sync::OnceLock::new(),
        })
    }

    /// Run the filter on one packet: the accept value, or 0 for reject.
    ///
    /// `pkt` is the captured bytes, `wirelen` the length on the wire.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let f = Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 0x45), 9);
    /// let n = sluice_native::NativeFilter::compile(&f).unwrap();
    /// assert_eq!((n.run(&[0x45], 1), n.run(&[], 1)), (9, 0));
    /// ```
    #[inline]
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        // SAFETY: the generated code reads only bytes `pkt[i]` with
        // `i + width <= caplen` (every load is checked against `caplen`,
        // or dominated by a check that covers it), and `caplen` is the
        // slice's length, so it never reads outside `pkt`. It writes no
        // memory, always terminates (no loops; protochain's helper is
        // bounded) and the module that owns the code lives as long as `self`.
        unsafe { (self.func)(pkt.as_ptr(), pkt.len() as u64, wirelen) }
    }

    /// Run the filter on many packets with one machine call per chunk:
    /// `out[i]` becomes `self.run(pkts[i].0, pkts[i].1)` for every `i`.
    ///
    /// The loop over the packets is in the generated code (a second
    /// function, built on the first call and kept; the filter's lowering is
    /// inlined in the loop body, its accept and reject exits store the
    /// verdict and go on with the next packet), so a batch costs one call
    /// per 64 packets instead of one per packet. Each
    /// packet is bounds-checked against its own length, exactly as `run`.
    /// The code reads the packets' `(&[u8], u32)` pairs where they are
    /// (`batch::DescLayout`): nothing is copied, allocated or shared.
    ///
    /// # Panics
    ///
    /// If `out.len() != pkts.len()`.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred, Val, Size};
    /// let f = Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 0x45), 9);
    /// let n = sluice_native::NativeFilter::compile(&f).unwrap();
    /// let mut out = [7; 3];
    /// n.run_batch(&[(&[0x45][..], 1), (&[], 1), (&[0x46], 1)], &mut out);
    /// assert_eq!(out, [9, 0, 0]);
    /// ```
    pub fn run_batch(&self, pkts: &[(&[u8], u32)], out: &mut [u32]) {
        assert_eq!(pkts.len(), out.len(), "one verdict slot per packet");
        let code = self.batch.get_or_init(|| {
            let (module, code) = build(&self.filter, Shape::Batch, &mut Stats::default()).ok()?;
            // SAFETY: `code` is the entry of the function just finalized,
            // whose signature (pointer, i64, pointer) -> () in the host's
            // default calling convention is exactly `BatchFn`'s ABI.
            let func = unsafe { std::mem::transmute::<*const u8, BatchFn>(code) };
            Some(BatchCode {
                func,
                _pages: CodePages::new(module),
            })
        });
        let Some(code) = code else {
            for ((p, w), o) in pkts.iter().zip(out.iter_mut()) {
                *o = self.run(p, *w);
            }
            return;
        };
        let mut buf = desc_buf();
        for (pkts, out) in pkts.chunks(BATCH_CHUNK).zip(out.chunks_mut(BATCH_CHUNK)) {
            let descs = descs(&mut buf, pkts);
            // SAFETY: `descs` holds the descriptors of `pkts` (`pkts.len()
            // <= BATCH_CHUNK`) in the layout the code was generated for:
            // the pairs themselves or copies in `buf`, each from a slice of
            // `pkts` that outlives the call. The code reads only those
            // `n` descriptors and, for each, bytes `ptr[j]` with `j + width
            // <= caplen` (the same bounds-checked lowering as `run`), and
            // writes only `out[..n]`, which is `out.len() == n` `u32`s
            // borrowed mutably. It always terminates (the loop runs `n`
            // times, the body has no loops) and the code pages live as
            // long as `self`.
            unsafe { (code.func)(descs, pkts.len() as u64, out.as_mut_ptr()) }
        }
    }

    /// What was emitted: loads, bounds checks, code size.
    ///
    /// ```
    /// use sluice_ir::{Filter, Pred};
    /// let n = sluice_native::NativeFilter::compile(&Filter::new(Pred::False, 1)).unwrap();
    /// assert_eq!(n.stats().loads, 0);
    /// ```
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The address of the machine code (for inspecting where it lives).
    ///
    /// ```
    /// let n = sluice_native::NativeFilter::compile(&sluice_ir::Filter::new(sluice_ir::Pred::True, 1)).unwrap();
    /// assert!(!n.code_ptr().is_null());
    /// ```
    pub fn code_ptr(&self) -> *const u8 {
        self.func as *const u8
    }
}

#[cfg(test)]
mod tests;
