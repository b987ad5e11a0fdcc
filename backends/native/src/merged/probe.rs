//! What a path of generated code does when its conditions hold: record
//! a hit (in the hit function's array, or the batch function's result
//! word) or probe a group's table, its own
//! [`KeyTable`](sluice_classifier::table::KeyTable) or its packed
//! [`RawTable`](super::raw::RawTable); in the pipelined batch function's
//! first pass, prefetch the slot a probe will read instead.
//!
//! The rule: a probe hashes and walks a table exactly as the Rust side
//! lays it out, so the table stays data and a key added to it changes no
//! code.

use super::emit::{Ctx, Gen};
use super::plan::Action;
use super::raw::{Layout, RAW_MIX, RAW_MUL};
use super::units::{answer, Hit, TableDesc, MANY, NO_MATCH};
use crate::batch::prefetch;
use crate::probe::{key_home, key_match, key_slot_bytes, Emitter, Walk};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Block, InstBuilder, MemFlags, Signature, Value};
use cranelift_frontend::{FunctionBuilder, Variable};
use sluice_classifier::merged::Slot;

/// Where a function's matches go.
#[derive(Clone, Copy)]
pub(super) enum Out {
    /// The hit function: hits written to `out[count]`, their number in
    /// `count` (returned).
    Hits { out: Value, count: Variable },
    /// The batch function: the packet's result word at `slot`
    /// ([`NO_MATCH`], a filter or [`MANY`]). `done`: the function has one
    /// group, so at most one match per packet, and a hit writes the word
    /// and goes on with the next packet there.
    First { slot: Value, done: Option<Block> },
    /// The batch function's first pass over a batch with a large table:
    /// a probe only prefetches its first slot; nothing is recorded.
    Prefetch,
}

/// Called from generated code: ask the CPU to bring the cache line at `p`
/// (a slot of a probed table) closer, ahead of the probe that reads it.
extern "C" fn prefetch_helper(p: *const u8) {
    prefetch(p)
}

impl<'a> Emitter<'a> for Gen<'a, '_> {
    fn fb(&mut self) -> &mut FunctionBuilder<'a> {
        &mut self.b
    }
}

impl Gen<'_, '_> {
    /// Record a match of `group` with slot words `value` and `datum`
    /// (`known`: the slot when it is a constant). The hit function writes
    /// `out[count] = (group, value, datum)` and counts it; the batch
    /// function turns the packet's result word from [`NO_MATCH`] into the
    /// slot's only filter, or into [`MANY`] for a second match or a slot
    /// with several filters (`result`: that word for this slot when the
    /// caller has it at hand).
    pub(super) fn hit(
        &mut self,
        group: u32,
        value: Value,
        datum: Value,
        known: Option<Slot>,
        result: Option<Value>,
    ) {
        let fl = MemFlags::trusted();
        match self.out {
            Out::Prefetch => {}
            Out::Hits { out, count } => {
                let n = self.b.use_var(count);
                let off = self.b.ins().imul_imm(n, std::mem::size_of::<Hit>() as i64);
                let a = self.b.ins().iadd(out, off);
                let g = self.b.ins().iconst(types::I32, group as i64);
                self.b
                    .ins()
                    .store(fl, g, a, std::mem::offset_of!(Hit, group) as i32);
                self.b
                    .ins()
                    .store(fl, value, a, std::mem::offset_of!(Hit, value) as i32);
                self.b
                    .ins()
                    .store(fl, datum, a, std::mem::offset_of!(Hit, datum) as i32);
                let n1 = self.b.ins().iadd_imm(n, 1);
                self.b.def_var(count, n1);
            }
            Out::First { slot, done } => {
                let many = self.b.ins().iconst(types::I32, MANY as i64);
                let cand = match (known, result) {
                    (_, Some(r)) => r,
                    (Some(s), None) => {
                        let r = answer(s);
                        self.b.ins().iconst(types::I32, r as i64)
                    }
                    (None, None) => {
                        let one = self.b.ins().icmp_imm(
                            IntCC::UnsignedLessThan,
                            value,
                            Slot::LIST_BASE as i64,
                        );
                        let f = self.b.ins().iadd_imm(value, -1);
                        self.b.ins().select(one, f, many)
                    }
                };
                match done {
                    // The only group: its hit is the packet's answer.
                    Some(done) => {
                        self.b.ins().store(fl, cand, slot, 0);
                        self.b.ins().jump(done, &[]);
                        // What the caller emits after the hit is unreachable.
                        let dead = self.b.create_block();
                        self.b.switch_to_block(dead);
                    }
                    None => {
                        let old = self.b.ins().load(types::I32, fl, slot, 0);
                        let first = self.b.ins().icmp_imm(IntCC::Equal, old, NO_MATCH as i64);
                        let r = self.b.ins().select(first, cand, many);
                        self.b.ins().store(fl, r, slot, 0);
                    }
                }
            }
        }
    }

    /// Do an action in the current block (which may end up being another).
    pub(super) fn action(&mut self, a: &Action, ctx: &mut Ctx) {
        match a {
            Action::Hit { group, slot } => {
                self.stats.keys_in_code += 1;
                let v = self.b.ins().iconst(types::I32, slot.value as i64);
                let d = self.b.ins().iconst(types::I32, slot.datum as i64);
                self.hit(*group, v, d, Some(*slot), None);
            }
            Action::Probe {
                group,
                raw: Some(layout),
                ..
            } => {
                self.stats.probes += 1;
                let after = self.b.create_block();
                // Every load was read by a condition of this path.
                let mut words: Vec<Option<Value>> = vec![None; layout.words];
                for l in &layout.loads {
                    let v = self.read_raw64(ctx, l.r, after);
                    let v = if l.at > 0 {
                        self.b.ins().ishl_imm(v, 8 * l.at as i64)
                    } else {
                        v
                    };
                    words[l.word] = Some(match words[l.word] {
                        None => v,
                        Some(w) => self.b.ins().bor(w, v),
                    });
                }
                let words: Vec<Value> = words.into_iter().map(|w| w.expect("a load")).collect();
                self.probe_raw(*group, &words, layout, after);
                self.b.switch_to_block(after);
            }
            Action::Probe { group, key, .. } => {
                self.stats.probes += 1;
                let after = self.b.create_block();
                // Every key field was read by a condition of this path.
                let vals: Vec<Value> = key.iter().map(|r| self.read_be(ctx, *r, after)).collect();
                self.probe(*group, &vals, after);
                self.b.switch_to_block(after);
            }
        }
    }

    /// Hash packed key `words` as [`raw_hash`](super::raw::raw_hash) does
    /// and probe group `group`'s [`RawTable`](super::raw::RawTable) (slots
    /// as `layout` says); a hit is written; continue at `after`.
    fn probe_raw(&mut self, group: u32, words: &[Value], layout: &Layout, after: Block) {
        let mut h: Option<Value> = None;
        for (j, w) in words.iter().enumerate() {
            let x = self.b.ins().imul_imm(*w, RAW_MUL[j % RAW_MUL.len()] as i64);
            h = Some(match h {
                None => x,
                Some(h) => self.b.ins().iadd(h, x),
            });
        }
        let h = h.expect("a word");
        let hi = self.b.ins().ushr_imm(h, 32);
        let h = self.b.ins().bxor(h, hi);
        let h = self.b.ins().imul_imm(h, RAW_MIX as i64);
        let desc = self.b.ins().iadd_imm(
            self.tables,
            (group as usize * std::mem::size_of::<TableDesc>()) as i64,
        );
        let fl = MemFlags::trusted().with_readonly();
        let field = |g: &mut Self, at: usize| g.b.ins().load(types::I64, fl, desc, at as i32);
        let base = field(self, std::mem::offset_of!(TableDesc, words));
        let shift = field(self, std::mem::offset_of!(TableDesc, shift));
        let i0 = self.b.ins().ushr(h, shift);
        let stride = layout.slot_bytes() as i64;
        let answer_at = layout.answer_at as i32;
        let mask = field(self, std::mem::offset_of!(TableDesc, mask));
        let Some(walk) = self.probe_start(base, i0, mask, stride, after) else {
            return;
        };
        let slot = walk.slot;
        // The slot's answer: "no match" marks an empty slot.
        let a = self.b.ins().load(types::I32, fl, slot, answer_at);
        let differs = self.b.create_block();
        let last = words.len() - 1;
        for (j, w) in words.iter().enumerate() {
            // A word shared with the answer: its key is the low half.
            let s = if j == last && layout.answer_in_key() {
                self.b.ins().uload32(fl, slot, (8 * j) as i32)
            } else {
                self.b.ins().load(types::I64, fl, slot, (8 * j) as i32)
            };
            let ne = self.b.ins().icmp(IntCC::NotEqual, s, *w);
            self.branch_out(ne, differs);
        }
        // The key matches. A batch function with one group stores the
        // answer whatever it is (an empty slot's zeros can equal a
        // packet's key, and its answer is "no match"). Otherwise an empty
        // slot holds no key.
        if !matches!(self.out, Out::First { done: Some(_), .. }) {
            let empty = self.b.ins().icmp_imm(IntCC::Equal, a, NO_MATCH as i64);
            let found = self.b.create_block();
            self.b.ins().brif(empty, after, &[], found, &[]);
            self.b.switch_to_block(found);
        }
        match self.out {
            Out::First { .. } => self.hit(group, a, a, None, Some(a)),
            _ => {
                // The hit functions report the value and datum, from the
                // table's array of them.
                let values = field(self, std::mem::offset_of!(TableDesc, values));
                let off = self.b.ins().ishl_imm(walk.i, 3);
                let at = self.b.ins().iadd(values, off);
                let v = self.b.ins().load(types::I32, fl, at, 0);
                let datum = self.b.ins().load(types::I32, fl, at, 4);
                self.hit(group, v, datum, None, None);
            }
        }
        self.b.ins().jump(after, &[]);
        // Another key: go on unless the slot is empty.
        self.b.switch_to_block(differs);
        let empty = self.b.ins().icmp_imm(IntCC::Equal, a, NO_MATCH as i64);
        let step = self.b.create_block();
        self.b.ins().brif(empty, after, &[], step, &[]);
        self.b.switch_to_block(step);
        walk.step(&mut self.b, after);
    }

    /// The start of a linear probe from slot `i0` of a table at `base`
    /// (`mask + 1` slots of `stride` bytes). In the prefetch pass: prefetch
    /// that slot, continue at `after` and return `None`. Otherwise: the
    /// loop over slots ([`Walk::start`]).
    fn probe_start(
        &mut self,
        base: Value,
        i0: Value,
        mask: Value,
        stride: i64,
        after: Block,
    ) -> Option<Walk> {
        if matches!(self.out, Out::Prefetch) {
            let off = self.b.ins().imul_imm(i0, stride);
            let slot = self.b.ins().iadd(base, off);
            self.call_prefetch(slot);
            self.b.ins().jump(after, &[]);
            return None;
        }
        Some(Walk::start(&mut self.b, base, i0, mask, stride))
    }

    /// Call [`prefetch_helper`] on `addr`.
    fn call_prefetch(&mut self, addr: Value) {
        let mut sig = Signature::new(self.b.func.signature.call_conv);
        sig.params.push(AbiParam::new(types::I64));
        let sigref = self.b.import_signature(sig);
        let helper = prefetch_helper as extern "C" fn(_);
        let callee = self.b.ins().iconst(types::I64, helper as usize as i64);
        self.b.ins().call_indirect(sigref, callee, &[addr]);
    }

    /// Hash `key` as [`sluice_classifier::table::hash`] does (with its
    /// constants) and probe group `group`'s table; a hit is written;
    /// continue at `after`.
    fn probe(&mut self, group: u32, key: &[Value], after: Block) {
        let desc = self.b.ins().iadd_imm(
            self.tables,
            (group as usize * std::mem::size_of::<TableDesc>()) as i64,
        );
        let fl = MemFlags::trusted().with_readonly();
        let base = self.b.ins().load(
            types::I64,
            fl,
            desc,
            std::mem::offset_of!(TableDesc, words) as i32,
        );
        let mask = self.b.ins().load(
            types::I64,
            fl,
            desc,
            std::mem::offset_of!(TableDesc, mask) as i32,
        );
        let (words, i0) = key_home(&mut self.b, key, mask);
        let stride = key_slot_bytes(key.len()) as i64;
        let Some(walk) = self.probe_start(base, i0, mask, stride, after) else {
            return;
        };
        key_match(self, &walk, &words, key.len(), after, |g, value, datum| {
            g.hit(group, value, datum, None, None);
            g.b.ins().jump(after, &[]);
        });
    }
}
