//! Probing a hash table from generated code: the linear probe's loop
//! every probe runs, and the whole probe of a
//! [`KeyTable`](sluice_classifier::table::KeyTable), which both the
//! merged classifier's code (`merged`) and the decision tree's (`tree`)
//! read.
//!
//! The rule: generated code hashes and walks a table exactly as the Rust
//! side lays it out ([`crate::key_hash`] is
//! [`sluice_classifier::table::hash`]), so the table stays data and a key
//! added to it changes no code. A probe starts at the key's home slot and
//! reads slots in turn, wrapping, at most as many as the table has.

use crate::key_hash;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlags, Value};
use cranelift_frontend::FunctionBuilder;

/// A code generator that probes tables: it lends its function builder.
pub(crate) trait Emitter<'f> {
    /// The builder of the function being generated.
    fn fb(&mut self) -> &mut FunctionBuilder<'f>;
}

/// A linear probe's loop in generated code: its head block with the
/// slot index and the steps left as parameters, the table's mask and the
/// current slot's address.
pub(crate) struct Walk {
    head: Block,
    /// The current slot's index.
    pub(crate) i: Value,
    left: Value,
    mask: Value,
    /// The current slot's address.
    pub(crate) slot: Value,
}

impl Walk {
    /// Start the loop at slot `i0` of a table at `base` (`mask + 1` slots
    /// of `stride` bytes): the current block jumps to the loop's head,
    /// which is switched to.
    pub(crate) fn start(
        b: &mut FunctionBuilder,
        base: Value,
        i0: Value,
        mask: Value,
        stride: i64,
    ) -> Walk {
        let budget = b.ins().iadd_imm(mask, 1);
        let head = b.create_block();
        let i = b.append_block_param(head, types::I64);
        let left = b.append_block_param(head, types::I64);
        b.ins().jump(head, &[i0, budget]);
        b.switch_to_block(head);
        let off = b.ins().imul_imm(i, stride);
        let slot = b.ins().iadd(base, off);
        Walk {
            head,
            i,
            left,
            mask,
            slot,
        }
    }

    /// Go on to the next slot (wrapping), or to `after` once every slot
    /// was seen; this ends the current block.
    pub(crate) fn step(&self, b: &mut FunctionBuilder, after: Block) {
        let i1 = b.ins().iadd_imm(self.i, 1);
        let i1 = b.ins().band(i1, self.mask);
        let l1 = b.ins().iadd_imm(self.left, -1);
        b.ins().brif(l1, self.head, &[i1, l1], after, &[]);
    }
}

/// Bytes per slot of a [`KeyTable`](sluice_classifier::table::KeyTable)
/// with keys of `width` fields: value, datum and the key, 32 bits each.
pub(crate) fn key_slot_bytes(width: usize) -> usize {
    (width + 2) * 4
}

/// The home slot of `key` in a `KeyTable` with slot mask `mask`, and the
/// key's fields packed two to a 64-bit word as the table keeps them.
pub(crate) fn key_home(b: &mut FunctionBuilder, key: &[Value], mask: Value) -> (Vec<Value>, Value) {
    let (words, h) = key_hash(b, key);
    let i0 = b.ins().band(h, mask);
    (words, i0)
}

/// Continue at `fail` when `cond` holds, else in a new block.
fn branch_out(b: &mut FunctionBuilder, cond: Value, fail: Block) {
    let next = b.create_block();
    b.ins().brif(cond, fail, &[], next, &[]);
    b.switch_to_block(next);
}

/// The slot of a `KeyTable` probe that `walk` is at, for the key packed
/// in `words` (from [`key_home`]; `width` fields): an empty slot (value
/// 0) ends the probe at `after`; a removed one (value `u32::MAX`) or one
/// of another key goes on to the next slot; a slot of the key calls
/// `found` with its value and datum words, to emit what a hit does and
/// end its block.
pub(crate) fn key_match<'f, G: Emitter<'f>>(
    g: &mut G,
    walk: &Walk,
    words: &[Value],
    width: usize,
    after: Block,
    found: impl FnOnce(&mut G, Value, Value),
) {
    let fl = MemFlags::trusted();
    let b = g.fb();
    let slot = walk.slot;
    let value = b.ins().load(types::I32, fl, slot, 0);
    let next = b.create_block();
    let live = b.create_block();
    b.ins().brif(value, live, &[], after, &[]);
    b.switch_to_block(live);
    let gone = b.ins().icmp_imm(IntCC::Equal, value, u32::MAX as i64);
    branch_out(b, gone, next);
    for (j, w) in words.iter().enumerate() {
        let at = (8 + 8 * j) as i32;
        let s = if width > 2 * j + 1 {
            b.ins().load(types::I64, fl, slot, at)
        } else {
            let s = b.ins().load(types::I32, fl, slot, at);
            b.ins().uextend(types::I64, s)
        };
        let ne = b.ins().icmp(IntCC::NotEqual, s, *w);
        branch_out(b, ne, next);
    }
    let datum = b.ins().load(types::I32, fl, slot, 4);
    found(g, value, datum);
    let b = g.fb();
    b.switch_to_block(next);
    walk.step(b, after);
}
