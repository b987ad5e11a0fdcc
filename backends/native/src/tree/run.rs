//! The interface between a tree's machine function and Rust: the context
//! the function gets, and the helpers it calls back.
//!
//! The function takes one pointer, to a [`Ctx`]: the packet, the probed
//! tables of this copy of the tree, and the output buffer, where it
//! appends the slot of each filter it finds. The helpers do what the code
//! does not: read a computed field (through the tree's memo, so it is
//! computed once per packet), run the tree's walk from a node, check a
//! condition with set parts, and grow the output buffer.

use super::plan::set_cond;
use sluice_classifier::tree::node::NodeId;
use sluice_classifier::tree::{DecisionTree, Scratch};

/// A probed table as the code reads it: its slots and its slot mask.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct TableDesc {
    pub words: *const u32,
    pub mask: u64,
}

/// What the code reads and writes (offsets are part of the code).
#[repr(C)]
pub(crate) struct Ctx {
    pub pkt: *const u8,
    pub caplen: u64,
    pub wirelen: u64,
    pub tables: *const TableDesc,
    /// The output buffer: `len` slots written of `cap`.
    pub out: *mut u32,
    pub len: u64,
    pub cap: u64,
    pub env: *mut Env<'static>,
    /// Per filter slot, the packet it was last reported for: a slot is
    /// written once per packet (a filter may be found on several paths).
    pub seen: *mut u32,
    /// This packet's number in `seen`.
    pub epoch: u64,
    /// The function table by node: chunk pointers, each to `units::CHUNK`
    /// entries of (function, data block) by node id (function 0 for a
    /// node without a unit).
    pub fns: *const *const usize,
}

/// Per-reader memory of the code: what [`Ctx::seen`] points into.
#[derive(Clone, Debug, Default)]
pub(crate) struct Seen {
    slots: Vec<u32>,
    epoch: u32,
}

impl Seen {
    /// Start a packet over `n` filter slots: the array and this packet's number.
    fn next(&mut self, n: usize) -> (*mut u32, u64) {
        if self.slots.len() < n {
            self.slots.resize(n, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.slots.fill(0);
            self.epoch = 1;
        }
        (self.slots.as_mut_ptr(), self.epoch as u64)
    }
}

/// The Rust side of a call, for the helpers.
pub(crate) struct Env<'a> {
    pub tree: &'a DecisionTree,
    /// Where each set condition number is.
    pub sets: &'a [Option<(NodeId, usize)>],
    pub scratch: &'a mut Scratch,
    /// The buffer behind `Ctx::out` (its length is only kept up to date
    /// by the helpers that change it).
    pub out: &'a mut Vec<u32>,
}

/// A unit's machine function: the context, and the unit's data block
/// (for a shape's function; unused otherwise).
pub(crate) type TreeFn = unsafe extern "C" fn(ctx: *mut Ctx, data: *const u32);

/// What a call runs: the code's root function and function table, and
/// the tree and tables it is run on.
pub(crate) struct Target<'a> {
    pub func: TreeFn,
    pub fns: *const *const usize,
    pub tree: &'a DecisionTree,
    pub sets: &'a [Option<(NodeId, usize)>],
    pub tables: &'a [TableDesc],
}

/// Run the target's function on one packet, appending the slots it finds
/// to `out`.
///
/// # Safety
///
/// `t.func` and `t.fns` must be the code built for a tree of the same
/// shape as `t.tree`, whose set conditions are at `t.sets`, and `t.tables`
/// must describe `t.tree`'s tables by the numbers that code uses.
pub(crate) unsafe fn call(
    t: &Target<'_>,
    pkt: &[u8],
    wirelen: u32,
    scratch: &mut Scratch,
    seen: &mut Seen,
    out: &mut Vec<u32>,
) {
    let Target {
        func: f,
        fns,
        tree,
        sets,
        tables,
    } = *t;
    scratch.memo().next_packet(0);
    let (seen, epoch) = seen.next(tree.slots());
    if out.capacity() < 16 {
        out.reserve(16);
    }
    let mut env = Env {
        tree,
        sets,
        scratch,
        out,
    };
    let mut ctx = Ctx {
        pkt: pkt.as_ptr(),
        caplen: pkt.len() as u64,
        wirelen: wirelen as u64,
        tables: tables.as_ptr(),
        out: env.out.as_mut_ptr(),
        len: env.out.len() as u64,
        cap: env.out.capacity() as u64,
        // The helpers see `env` only during this call, through `ctx`.
        env: (&mut env as *mut Env<'_>).cast(),
        seen,
        epoch,
        fns,
    };
    // SAFETY: the caller guarantees the code fits the tree and tables; the
    // code reads the packet only within `caplen`, the tables only within
    // their masks, and writes the buffer only below `cap` (each function
    // reserves, through `grow_helper`, room for every slot it can report
    // before it reports any, and again after each call that may report).
    unsafe { f(&mut ctx, std::ptr::null()) };
    debug_assert!(ctx.len <= ctx.cap, "the code reported past its room");
    // SAFETY: the code wrote `ctx.len` initialised slots into the buffer
    // (whose current allocation `ctx.out`/`ctx.cap` describe, kept in step
    // with `env.out` by every helper that reallocates it).
    unsafe { env.out.set_len(ctx.len as usize) };
}

/// The context's environment.
///
/// # Safety
///
/// `ctx` must be the context of a call in progress ([`call`]).
unsafe fn env<'c>(ctx: *mut Ctx) -> (&'c mut Ctx, &'c mut Env<'c>) {
    // SAFETY: per the contract, `ctx` and its `env` are live and not
    // otherwise borrowed while the generated code waits for the helper.
    unsafe {
        let c = &mut *ctx;
        let e = &mut *c.env.cast::<Env<'c>>();
        (c, e)
    }
}

/// The packet of a call.
///
/// # Safety
///
/// As [`env`].
unsafe fn packet<'c>(c: &Ctx) -> &'c [u8] {
    // SAFETY: `pkt`/`caplen` come from the slice given to `call`.
    unsafe { std::slice::from_raw_parts(c.pkt, c.caplen as usize) }
}

/// Called from generated code: field `field` of the packet, or bit 32 set
/// when the read aborts.
pub(crate) extern "C" fn read_helper(ctx: *mut Ctx, field: u32) -> u64 {
    // SAFETY: generated code calls this only with its own context.
    let (c, e) = unsafe { env(ctx) };
    // SAFETY: as above.
    let pkt = unsafe { packet(c) };
    match e
        .tree
        .fields()
        .read(field, pkt, c.wirelen as u32, e.scratch.memo())
    {
        Some(v) => v as u64,
        None => 1 << 32,
    }
}

/// Called from generated code: 1 when `v` meets condition `set` of the
/// plan (one with set parts), else 0.
pub(crate) extern "C" fn set_helper(ctx: *mut Ctx, set: u32, v: u32) -> u32 {
    // SAFETY: generated code calls this only with its own context.
    let (_, e) = unsafe { env(ctx) };
    match e.sets.get(set as usize) {
        Some(Some(at)) => set_cond(e.tree, *at).holds(v) as u32,
        // The code never names a number it was not given.
        _ => 0,
    }
}

/// Bring the buffer's length up to date from the context.
fn sync_in(c: &Ctx, e: &mut Env<'_>) {
    // SAFETY: the code wrote `c.len` initialised slots into the buffer's
    // current allocation.
    unsafe { e.out.set_len(c.len as usize) };
}

/// Point the context at the buffer again (it may have moved).
fn sync_out(c: &mut Ctx, e: &mut Env<'_>) {
    c.out = e.out.as_mut_ptr();
    c.len = e.out.len() as u64;
    c.cap = e.out.capacity() as u64;
}

/// Called from generated code: run the tree's walk from node `node`.
pub(crate) extern "C" fn visit_helper(ctx: *mut Ctx, node: u32) {
    // SAFETY: generated code calls this only with its own context.
    let (c, e) = unsafe { env(ctx) };
    sync_in(c, e);
    // SAFETY: as above.
    let pkt = unsafe { packet(c) };
    let start = e.out.len();
    e.tree
        .visit_from(node, pkt, c.wirelen as u32, e.scratch, e.out);
    // Keep only the slots not yet reported for this packet.
    let mut kept = start;
    for i in start..e.out.len() {
        let slot = e.out[i];
        // SAFETY: `seen` holds one word per slot of the tree
        // (`Seen::next`), and every slot the walk finds is below that.
        let mark = unsafe { &mut *c.seen.add(slot as usize) };
        if *mark != c.epoch as u32 {
            *mark = c.epoch as u32;
            e.out[kept] = slot;
            kept += 1;
        }
    }
    e.out.truncate(kept);
    sync_out(c, e);
}

/// Called from generated code: make room for `need` more slots.
pub(crate) extern "C" fn grow_helper(ctx: *mut Ctx, need: u64) {
    // SAFETY: generated code calls this only with its own context.
    let (c, e) = unsafe { env(ctx) };
    sync_in(c, e);
    let more = (need as usize).max(e.out.len()).max(16);
    e.out.reserve(more);
    sync_out(c, e);
}
