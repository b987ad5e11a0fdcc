//! Perfect hashes for the key sets of small groups (DPF's hashed
//! disjunctions): [`hash_shape`] finds a set of keys a hash can dispatch,
//! [`find_multiplier`] a multiplier under which they land in distinct
//! slots, and [`Gen::perfect_hash`] emits one multiply-shift, one slot
//! loaded and the whole key compared with one branch.
//!
//! The rule: the same keys always give the same multiplier and the same
//! code (the search follows a fixed sequence), and a set that does not
//! have the form, or for which no multiplier is found, keeps its compares.

use super::emit::{adjacent_run, ne_word, Ctx, Gen};
use super::plan::{Action, Item, R};
use super::units::{answer, slot_word};
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlags};
use sluice_classifier::merged::Slot;
use sluice_classifier::path::Test;

/// Key sets of at least this many keys are dispatched by a perfect hash
/// (DPF switches from compares to hashing above three).
const HASH_MIN_KEYS: usize = 4;

/// Multipliers of the second and later fields when a key's fields are
/// combined into one word ([`combine`]): odd 32-bit numbers sign-extended
/// to 64 bits, so that x86-64 multiplies by a 32-bit immediate into a
/// fresh register (the multiplier search mixes the sum further).
const COMBINE: [u64; 7] = [
    0x9e37_79b1_u32 as i32 as i64 as u64,
    0x85eb_ca77_u32 as i32 as i64 as u64,
    0xc2b2_ae3d_u32 as i32 as i64 as u64,
    0xa7d4_eb2f_u32 as i32 as i64 as u64,
    0x9e37_79f9_u32 as i32 as i64 as u64,
    0xed55_8ccd_u32 as i32 as i64 as u64,
    0x1a85_ec53_u32 as i32 as i64 as u64,
];

/// A key's raw word values as one word: the first plus each later one
/// times its [`COMBINE`] constant (what the generated code computes).
fn combine(key: &[u64]) -> u64 {
    key.iter().enumerate().fold(0u64, |x, (i, &v)| {
        let m = if i == 0 { 1 } else { COMBINE[i - 1] };
        x.wrapping_add(v.wrapping_mul(m))
    })
}

/// One word of a hashed key: `fields` adjacent fields read as one load of
/// `width` bytes at `r`'s place (or the one field `r` itself).
#[derive(Clone, Copy, Debug)]
struct HashWord {
    r: R,
    width: u32,
    fields: usize,
}

/// A set of keys a perfect hash can dispatch ([`hash_shape`]).
struct HashShape {
    group: u32,
    /// Fields with the same value in every key, and that value.
    fixed: Vec<(R, u32)>,
    /// The other fields, as words.
    words: Vec<HashWord>,
    /// Each key's raw word values (zero-extended) and its slot.
    keys: Vec<(Vec<u64>, Slot)>,
}

/// The form a perfect hash needs: every item a key of the same small
/// group, testing the same fixed-width fields for equality and nothing
/// else, at least [`HASH_MIN_KEYS`] distinct keys (keys whose value cannot
/// fit a field never match and are left out).
fn hash_shape(items: &[Item]) -> Option<HashShape> {
    if items.len() < HASH_MIN_KEYS {
        return None;
    }
    let Action::Hit { group, .. } = items[0].action else {
        return None;
    };
    let mut fields: Vec<R> = items[0].conds.iter().map(|c| c.r).collect();
    fields.sort_unstable();
    if fields.is_empty()
        || fields.windows(2).any(|w| w[0] == w[1])
        || !fields
            .iter()
            .all(|r| matches!(r, R::Abs { .. } | R::Rel { .. }) && matches!(r.size(), 1 | 2 | 4))
    {
        return None;
    }
    // Each key's values (as the IR means them) per field.
    let mut keys: Vec<(Vec<u32>, Slot)> = Vec::with_capacity(items.len());
    for it in items {
        let Action::Hit { group: g, slot } = it.action else {
            return None;
        };
        if g != group || it.conds.len() != fields.len() {
            return None;
        }
        let mut key = vec![0u32; fields.len()];
        let mut possible = true;
        for c in &it.conds {
            let (Some(Test::Eq(k)), true) = (&c.test, c.truth) else {
                return None;
            };
            let i = fields.binary_search(&c.r).ok()?;
            key[i] = *k;
            possible &= c.r.raw(*k).is_some();
        }
        if possible {
            keys.push((key, slot));
        }
    }
    if keys.len() < HASH_MIN_KEYS {
        return None;
    }
    let same: Vec<bool> = (0..fields.len())
        .map(|i| keys.iter().all(|(k, _)| k[i] == keys[0].0[i]))
        .collect();
    // The fields in (header, offset) order, adjacent ones as one word when
    // together they are 2, 4 or 8 bytes. A word whose fields are equal in
    // every key is tested field by field instead of hashed; a field equal
    // in every key that shares a word with others is hashed with them (it
    // costs nothing more there).
    let place = |r: R| match r {
        R::Abs { off, size } => (None, off, size as u32),
        R::Rel { hdr, off, size } => (Some(hdr), off, size as u32),
        R::Len | R::Const(_) => unreachable!("checked above"),
    };
    let mut order: Vec<usize> = (0..fields.len()).collect();
    order.sort_by_key(|&i| place(fields[i]));
    let mut fixed: Vec<(R, u32)> = Vec::new();
    let mut words: Vec<(HashWord, Vec<usize>)> = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let (hdr, off, _) = place(fields[order[i]]);
        let (end, width) = adjacent_run(order.len(), i, |k| place(fields[order[k]]));
        let fields_in = order[i..end].to_vec();
        i = end;
        if fields_in.iter().all(|&f| same[f]) {
            fixed.extend(fields_in.iter().map(|&f| (fields[f], keys[0].0[f])));
            continue;
        }
        let r = if fields_in.len() == 1 {
            fields[fields_in[0]]
        } else {
            R::at(hdr, off, 1)
        };
        words.push((
            HashWord {
                r,
                width,
                fields: fields_in.len(),
            },
            fields_in,
        ));
    }
    if words.is_empty() || words.len() > COMBINE.len() + 1 {
        return None;
    }
    // Each key's raw word values, as the loads give them.
    let mut raw_keys: Vec<(Vec<u64>, Slot)> = keys
        .iter()
        .map(|(key, slot)| {
            let vals = words
                .iter()
                .map(|(w, fs)| {
                    if w.fields == 1 {
                        return fields[fs[0]].raw(key[fs[0]]).unwrap_or(0) as u64;
                    }
                    let mut bytes = [0u8; 8];
                    let mut at = 0;
                    for &f in fs {
                        let n = fields[f].size() as usize;
                        bytes[at..at + n].copy_from_slice(&key[f].to_be_bytes()[4 - n..]);
                        at += n;
                    }
                    ne_word(&bytes, w.width)
                })
                .collect();
            (vals, *slot)
        })
        .collect();
    raw_keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if raw_keys.windows(2).any(|w| w[0].0 == w[1].0) {
        return None;
    }
    Some(HashShape {
        group,
        fixed,
        words: words.into_iter().map(|(w, _)| w).collect(),
        keys: raw_keys,
    })
}

/// A multiplier under which the keys' combined words ([`combine`]) land in
/// distinct slots of a table of `2^bits` slots (from the first power of
/// two at least twice the keys' count to four times that), tried from a fixed sequence so that the
/// same keys always give the same code.
fn find_multiplier(keys: &[(Vec<u64>, Slot)]) -> Option<(u64, u32)> {
    let words: Vec<u64> = keys.iter().map(|(k, _)| combine(k)).collect();
    let min_bits = usize::BITS - (keys.len() - 1).leading_zeros() + 1;
    let mut seen = Vec::new();
    for bits in min_bits..min_bits + 3 {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..256 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = x | 1;
            seen.clear();
            seen.resize(1 << bits, false);
            let injective = words.iter().all(|w| {
                let h = (w.wrapping_mul(m) >> (64 - bits)) as usize;
                !std::mem::replace(&mut seen[h], true)
            });
            if injective {
                return Some((m, bits));
            }
        }
    }
    None
}

impl Gen<'_, '_> {
    /// Keys of one small group that all test the same fields for
    /// equality, at least [`HASH_MIN_KEYS`] of them: dispatched by a
    /// perfect hash chosen for these keys (DPF's hashed disjunctions).
    /// Fields equal in every key are tested once; the others are read as
    /// few words as possible (adjacent fields as one 2-, 4- or 8-byte
    /// load), combined, and multiplied by a constant found so that no two
    /// keys share a slot of a table of at most eight times as many slots,
    /// so there is no collision chain: one slot is loaded and the whole key
    /// compared with one branch. Unused slots hold a copy of a key that
    /// hashes elsewhere, so they never match. `Err(items)` when the items
    /// do not have that form or no multiplier was found (the search tree
    /// is used instead).
    pub(super) fn perfect_hash(
        &mut self,
        items: Vec<Item>,
        ctx: &mut Ctx,
        cont: Block,
    ) -> Result<(), Vec<Item>> {
        let Some(shape) = hash_shape(&items) else {
            return Err(items);
        };
        let HashShape {
            group,
            fixed,
            words,
            keys,
        } = shape;
        let Some((mult, bits)) = find_multiplier(&keys) else {
            return Err(items);
        };
        self.stats.hashed_sets += 1;
        self.stats.keys_in_code += keys.len();
        self.stats.coalesced += words.iter().map(|w| w.fields - 1).sum::<usize>();
        // Column by column, one word per slot in each: the key's words,
        // then value | datum << 32, then the batch function's result word
        // (so that a slot's word is at the column's start + 8 × the slot,
        // which x86-64 addresses without a shift of its own).
        let k = words.len();
        let slots = 1usize << bits;
        let mut table = vec![0u64; slots * (k + 2)];
        for (j, w) in keys[0].0.iter().enumerate() {
            // Copies of the first key: it hashes to its own slot, never here.
            table[j * slots..(j + 1) * slots].fill(*w);
        }
        for (key, slot) in &keys {
            let at = (combine(key).wrapping_mul(mult) >> (64 - bits)) as usize;
            for (j, w) in key.iter().enumerate() {
                table[j * slots + at] = *w;
            }
            table[k * slots + at] = slot_word(*slot);
            table[(k + 1) * slots + at] = answer(*slot) as u64;
        }
        let table: Box<[u64]> = table.into();
        let base = table.as_ptr() as i64;
        self.data.push(table);
        // The fields every key tests alike.
        for (r, k) in fixed {
            let next = self.b.create_block();
            self.test(ctx, r, &Test::Eq(k), true, next, cont);
            self.b.switch_to_block(next);
        }
        // Read every word (a failed read fails every key), combine, hash.
        let mut vals = Vec::with_capacity(k);
        for w in &words {
            vals.push(if w.fields == 1 {
                self.read_raw64(ctx, w.r, cont)
            } else {
                self.stats.loads += 1;
                let a = self.addr(ctx, w.r, w.width, cont);
                self.load_word(a, w.width, types::I64)
            });
        }
        let mut x = vals[0];
        for (i, &v) in vals.iter().enumerate().skip(1) {
            let m = self.b.ins().imul_imm(v, COMBINE[i - 1] as i64);
            x = self.b.ins().iadd(x, m);
        }
        let h = self.b.ins().imul_imm(x, mult as i64);
        let h = self.b.ins().ushr_imm(h, (64 - bits) as i64);
        let off = self.b.ins().ishl_imm(h, 3);
        let column = |j: usize| (8 * slots * j) as i32;
        // The table's address, read from a cell rather than used as an
        // immediate: a read-only load is hoisted out of the batch loop into
        // a register, where an immediate would be rematerialised at every
        // use.
        let cell: Box<[u64]> = vec![base as u64].into();
        let cell_at = self.b.ins().iconst(types::I64, cell.as_ptr() as i64);
        self.data.push(cell);
        let fl = MemFlags::trusted().with_readonly();
        let base = self.b.ins().load(types::I64, fl, cell_at, 0);
        let at = self.b.ins().iadd(off, base);
        let mut diff = None;
        for (i, &have) in vals.iter().enumerate() {
            let want = self.b.ins().load(types::I64, fl, at, column(i));
            let d = self.b.ins().bxor(want, have);
            diff = Some(match diff {
                None => d,
                Some(acc) => self.b.ins().bor(acc, d),
            });
        }
        let diff = diff.expect("at least one word");
        let found = self.b.create_block();
        self.b.ins().brif(diff, cont, &[], found, &[]);
        self.b.switch_to_block(found);
        let vd = self.b.ins().load(types::I64, fl, at, column(k));
        let value = self.b.ins().ireduce(types::I32, vd);
        let datum = self.b.ins().ushr_imm(vd, 32);
        let datum = self.b.ins().ireduce(types::I32, datum);
        let result = self.b.ins().load(types::I32, fl, at, column(k + 1));
        self.hit(group, value, datum, None, Some(result));
        self.b.ins().jump(cont, &[]);
        Ok(())
    }
}
