//! Code generation for one function of a cluster: [`Gen`] turns the
//! cluster's paths into Cranelift IR.
//!
//! This part reads and tests the fields: one length check for the reads
//! every path needs, each field read once and dispatched on by its value
//! (compares, or a search tree for many values), adjacent equality tests
//! coalesced into one wider load, and a version of the code for IPv4
//! headers of 5 words. What a path does once its conditions hold is in
//! `probe.rs`, keys dispatched by a perfect hash in `hash.rs`.
//!
//! The rule: a read past the captured length makes exactly the paths that
//! need it fail, as the Rust path does, and every load is dominated by the
//! length check that covers it.

use super::plan::{common_ipv4_header, Cond, Item, R};
use super::probe::Out;
use super::units::UnitStats;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, MemFlags, Value};
use cranelift_frontend::FunctionBuilder;
use sluice_classifier::path::Test;
use std::collections::BTreeMap;

/// A coalesced compare: the `width` bytes (1, 2, 4, 8 or 16) at `base`,
/// and-ed with `mask`, equal `value` (both in packet order; bytes past
/// `width` are zero).
#[derive(Clone, Copy)]
struct MaskTest {
    base: u32,
    width: u32,
    mask: [u8; 16],
    value: [u8; 16],
}

impl MaskTest {
    /// Nothing tested yet.
    fn new(base: u32, width: u32) -> MaskTest {
        let (mask, value) = ([0; 16], [0; 16]);
        MaskTest {
            base,
            width,
            mask,
            value,
        }
    }

    /// Also test the bytes at `off` (inside the window): `mask` and
    /// `value`, packet order.
    fn put(&mut self, off: u32, mask: &[u8], value: &[u8]) {
        let at = (off - self.base) as usize;
        self.mask[at..at + mask.len()].copy_from_slice(mask);
        self.value[at..at + value.len()].copy_from_slice(value);
    }
}

/// What is known at a point of the generated code (it dominates there).
#[derive(Clone, Default)]
pub(super) struct Ctx {
    /// Raw (host-order) values of fields read.
    raw: Vec<(R, Value)>,
    /// Their values in network order (as the tables hold them).
    be: Vec<(R, Value)>,
    /// `4 * (pkt[hdr] & 0xf)` as a 64-bit value, per `hdr`.
    hl: Vec<(u32, Value)>,
    /// The captured length is at least this.
    known: u64,
    /// Per `hdr`: the captured length is at least `hl + this`.
    rel: Vec<(u32, u64)>,
}

fn find<K: PartialEq + Copy, V: Copy>(v: &[(K, V)], k: K) -> Option<V> {
    v.iter().find(|(x, _)| *x == k).map(|(_, y)| *y)
}

/// A test and the outcome wanted (`None`: the field need only be read).
type TestSig = (Option<Test>, bool);

/// The code generator of one function.
pub(super) struct Gen<'a, 's> {
    pub(super) b: FunctionBuilder<'a>,
    pub(super) pkt: Value,
    pub(super) caplen: Value,
    pub(super) wirelen: Value,
    pub(super) tables: Value,
    pub(super) out: Out,
    pub(super) stats: &'s mut UnitStats,
    /// Tables the code reads by address; they live as long as the code.
    pub(super) data: &'s mut Vec<Box<[u64]>>,
    /// Blocks that get a copy of the batch loop's step (the fast version's
    /// way on after a hit, [`Gen::emit_top`]).
    pub(super) steps: Vec<Block>,
}

/// The constant a load of `width` (2, 4 or 8) bytes gives where memory
/// holds `bytes` (host byte order), zero-extended.
pub(super) fn ne_word(bytes: &[u8; 8], width: u32) -> u64 {
    match width {
        1 => bytes[0] as u64,
        2 => u16::from_ne_bytes([bytes[0], bytes[1]]) as u64,
        4 => u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as u64,
        _ => u64::from_ne_bytes(*bytes),
    }
}

/// Where fields lie, as `(header, offset, size)`, `place(k)` for the k-th
/// of `n` fields sorted by place: the longest run of adjacent fields from
/// `i` (same header, each starting where the last ends) whose sizes add up
/// to 2, 4 or 8 bytes, as its end and that total (the run of field `i`
/// alone when no longer one adds up). Atom coalescing reads such a run
/// with one load.
pub(super) fn adjacent_run(
    n: usize,
    i: usize,
    place: impl Fn(usize) -> (Option<u32>, u32, u32),
) -> (usize, u32) {
    let (hdr, off, size) = place(i);
    let (mut j, mut total) = (i + 1, size);
    let mut best = (i + 1, size);
    while j < n {
        let (h2, o2, s2) = place(j);
        if h2 != hdr || o2 as u64 != off as u64 + total as u64 || total + s2 > 8 {
            break;
        }
        total += s2;
        j += 1;
        if matches!(total, 2 | 4 | 8) {
            best = (j, total);
        }
    }
    best
}

/// Flags of packet loads: they cannot trap (a length check dominates
/// them) but are not marked read-only, so Cranelift treats them as
/// effectful and never moves one above its length check.
fn flags() -> MemFlags {
    MemFlags::new().with_notrap()
}

impl Gen<'_, '_> {
    /// Fill `blk` with the code of a packet's `items`, then continue at
    /// `cont`. When every item reads behind the IPv4 header at one place,
    /// the code comes twice: for the usual header of 5 words, with every
    /// field behind it at a fixed offset (no header-length arithmetic, the
    /// length checks and compares merged with the ones before the header),
    /// and for any header, the general code. The fast version is entered
    /// only when the packet's header byte says 5 words and every read the
    /// paths share is in the captured bytes; any test that fails before it
    /// is entered sends the packet to the general code, which decides
    /// alone. Past the entry, the fast version is the general code with a
    /// known header length, so both give the same answer.
    pub(super) fn emit_top(&mut self, blk: Block, items: Vec<Item>, cont: Block) {
        let Some(hdr) = common_ipv4_header(&items) else {
            self.emit(blk, items, Ctx::default(), cont);
            return;
        };
        let mut fast: Vec<Item> = items.iter().map(|it| it.with_ipv4_words(hdr, 5)).collect();
        let general = self.b.create_block();
        self.b.switch_to_block(blk);
        // The fast version's statistics are not counted: it is the general
        // code again, specialised.
        let saved = std::mem::take(self.stats);
        // A single group's hit goes on with the next packet: the fast
        // version's hits in a step of their own, laid out after them.
        let out = self.out;
        if let Out::First {
            slot,
            done: Some(_),
        } = out
        {
            let step = self.b.create_block();
            self.steps.push(step);
            self.out = Out::First {
                slot,
                done: Some(step),
            };
        }
        let mut ctx = Ctx::default();
        self.aggregate(&fast, &mut ctx, general, hdr as u64 + 1);
        let entry = (hdr, 0x0f, 5, general);
        self.shared_masks(&mut fast, &ctx, cont, Some(entry));
        let rest = self.b.create_block();
        self.b.ins().jump(rest, &[]);
        self.emit(rest, fast, ctx, cont);
        self.out = out;
        *self.stats = saved;
        self.stats.ipv4_fast += 1;
        self.emit(general, items, Ctx::default(), cont);
    }

    /// Fill `blk` with the code of `items`: every item whose conditions
    /// hold does its action; then continue at `cont`.
    fn emit(&mut self, blk: Block, items: Vec<Item>, mut ctx: Ctx, cont: Block) {
        self.b.switch_to_block(blk);
        if items.is_empty() {
            self.b.ins().jump(cont, &[]);
            return;
        }
        self.aggregate(&items, &mut ctx, cont, 0);
        let mut items = items;
        self.shared_masks(&mut items, &ctx, cont, None);
        let mut rest = Vec::new();
        for it in items {
            if it.conds.is_empty() {
                self.action(&it.action, &mut ctx);
            } else {
                rest.push(it);
            }
        }
        if rest.is_empty() {
            self.b.ins().jump(cont, &[]);
            return;
        }
        if rest.len() == 1 {
            let it = rest.pop().unwrap();
            self.leaf(it, ctx, cont);
            return;
        }
        let rest = match self.perfect_hash(rest, &mut ctx, cont) {
            Ok(()) => return,
            Err(rest) => rest,
        };
        // The field most paths test (known ones first, then by offset).
        let mut counts: BTreeMap<R, usize> = BTreeMap::new();
        for it in &rest {
            let mut seen: Vec<R> = it.conds.iter().map(|c| c.r).collect();
            seen.sort_unstable();
            seen.dedup();
            for r in seen {
                *counts.entry(r).or_default() += 1;
            }
        }
        let f = counts
            .iter()
            .max_by_key(|(r, n)| (**n, find(&ctx.raw, **r).is_some(), std::cmp::Reverse(**r)))
            .map(|(r, _)| *r)
            .expect("items have conditions");
        let (with, without): (Vec<Item>, Vec<Item>) = rest
            .into_iter()
            .partition(|it| it.conds.iter().any(|c| c.r == f));
        let rest_blk = if without.is_empty() {
            cont
        } else {
            self.b.create_block()
        };
        let outer = ctx.clone();
        let v = self.read_raw(&mut ctx, f, rest_blk);
        let mut eq: BTreeMap<u32, Vec<Item>> = BTreeMap::new();
        let mut others: Vec<(TestSig, Vec<Item>)> = Vec::new();
        for mut it in with {
            let i = it.conds.iter().position(|c| c.r == f).unwrap();
            let c = it.conds.remove(i);
            match c.test {
                Some(Test::Eq(k)) if c.truth => {
                    if let Some(rk) = f.raw(k) {
                        eq.entry(rk).or_default().push(it);
                    }
                }
                test => {
                    let sig = (test, c.truth);
                    match others.iter_mut().find(|(s, _)| *s == sig) {
                        Some((_, v)) => v.push(it),
                        None => others.push((sig, vec![it])),
                    }
                }
            }
        }
        let other_blk = if others.is_empty() {
            rest_blk
        } else {
            self.b.create_block()
        };
        if eq.is_empty() {
            self.b.ins().jump(other_blk, &[]);
        } else {
            let arms: Vec<(u32, Block)> = eq.keys().map(|&k| (k, self.b.create_block())).collect();
            self.dispatch(v, f, &arms, other_blk);
            for ((_, blk), (_, items)) in arms.into_iter().zip(eq) {
                self.emit(blk, items, ctx.clone(), other_blk);
            }
        }
        let n = others.len();
        let mut cur = other_blk;
        for (i, ((test, truth), items)) in others.into_iter().enumerate() {
            let next = if i + 1 == n {
                rest_blk
            } else {
                self.b.create_block()
            };
            self.b.switch_to_block(cur);
            let sub = self.b.create_block();
            match test {
                None => {
                    self.b.ins().jump(sub, &[]);
                }
                Some(t) => {
                    let mut c2 = ctx.clone();
                    self.test(&mut c2, f, &t, truth, sub, next);
                }
            }
            self.emit(sub, items, ctx.clone(), next);
            cur = next;
        }
        if !without.is_empty() {
            self.emit(rest_blk, without, outer, cont);
        }
    }

    /// Conditions every item has, on fixed-offset fields inside the length
    /// already checked, that are an equality or "no bit of a mask set":
    /// those within one 2-, 4- or 8-byte window are tested together as one
    /// load, one `and` and one compare (atom coalescing with masks: the
    /// IPv4 fragment offset and the protocol byte are one 32-bit test),
    /// and removed from the items. When one fails, every item fails, so
    /// it goes to `fail`. `entry`: a byte `(offset, mask, value, to)` that
    /// must be tested first whatever else coalesces with it (the fast
    /// version's header length, [`Gen::emit_top`]); that compare goes to
    /// `to` when it fails.
    fn shared_masks(
        &mut self,
        items: &mut [Item],
        ctx: &Ctx,
        fail: Block,
        entry: Option<(u32, u32, u32, Block)>,
    ) {
        // (offset, size, mask, value) of each candidate, in field order;
        // the entry test has no condition of its own.
        let mut cands: Vec<(u32, u32, u32, u32, Option<Cond>)> = Vec::new();
        let Some(first) = items.first() else { return };
        for c in &first.conds {
            let R::Abs { off, size } = c.r else { continue };
            let size = size as u32;
            // Past the bytes known to be there no window can be used (and
            // offsets near 2^32 would overflow the window arithmetic).
            if !matches!(size, 1 | 2 | 4)
                || find(&ctx.raw, c.r).is_some()
                || off as u64 + size as u64 > ctx.known
            {
                continue;
            }
            let full = if size == 4 {
                u32::MAX
            } else {
                (1 << (8 * size)) - 1
            };
            let (mask, value) = match (&c.test, c.truth) {
                (Some(Test::Eq(k)), true) if *k <= full => (full, *k),
                (Some(Test::Set(m)), false) => (m & full, 0),
                _ => continue,
            };
            if items[1..].iter().all(|it| it.conds.contains(c)) {
                cands.push((off, size, mask, value, Some(c.clone())));
            }
        }
        if let Some((off, mask, value, _)) = entry {
            cands.push((off, 1, mask, value, None));
        }
        cands.sort_by_key(|c| (c.0, c.1));
        let entry_at = cands.iter().position(|c| c.4.is_none());
        // A window's compare from the candidates `group` (the first at `base`).
        let window = |base: u32, width: u32, group: &[usize]| {
            let mut t = MaskTest::new(base, width);
            for &g in group {
                let (off, size, m, v, _) = cands[g];
                let n = size as usize;
                t.put(off, &m.to_be_bytes()[4 - n..], &v.to_be_bytes()[4 - n..]);
            }
            let conds: Vec<Cond> = group.iter().filter_map(|&g| cands[g].4.clone()).collect();
            (t, group.iter().any(|&g| Some(g) == entry_at), conds)
        };
        // Windows of candidates that fit in 8 bytes from the first without
        // overlapping: (compare, has the entry, conditions).
        let mut windows = Vec::new();
        let mut i = 0;
        // In u64: an offset near 2^32 with a window past it must not wrap.
        let end_of = |c: usize| cands[c].0 as u64 + cands[c].1 as u64;
        while i < cands.len() {
            let base = cands[i].0;
            let mut group = vec![i];
            let mut end = end_of(i);
            let mut j = i + 1;
            while j < cands.len() && end_of(j) <= base as u64 + 8 {
                if cands[j].0 as u64 >= end {
                    group.push(j);
                    end = end_of(j);
                }
                j += 1;
            }
            let width = [2u32, 4, 8]
                .into_iter()
                .find(|w| base as u64 + *w as u64 >= end);
            match width.filter(|w| base as u64 + *w as u64 <= ctx.known) {
                Some(w) if group.len() > 1 => {
                    i = *group.last().unwrap_or(&i) + 1;
                    windows.push(window(base, w, &group));
                }
                // Alone, or no wider load fits: the condition stays for
                // the paths.
                _ => i += 1,
            }
        }
        // The entry is tested whatever happened to it above (alone, or
        // passed over by a window that overlaps it), and first.
        if let Some(e) = entry_at {
            if !windows.iter().any(|w| w.1) {
                windows.push(window(cands[e].0, 1, &[e]));
            }
        }
        windows.sort_by_key(|w| !w.1);
        let mut rest = &windows[..];
        if let (Some((first, true, _)), Some((.., to))) = (windows.first(), entry) {
            // The entry's window and the windows after it within 16 bytes
            // of its start are one vector compare; when that fails, the
            // entry's own compare tells which way to go.
            let base = first.base;
            let within = |w: &&(MaskTest, bool, Vec<Cond>)| {
                w.0.base >= base && w.0.base as u64 + w.0.width as u64 <= base as u64 + 16
            };
            let n = match base as u64 + 16 <= ctx.known {
                true => windows[1..].iter().take_while(within).count(),
                false => 0,
            };
            if n > 0 {
                let mut all = MaskTest::new(base, 16);
                for (t, ..) in &windows[..=n] {
                    let w = t.width as usize;
                    all.put(t.base, &t.mask[..w], &t.value[..w]);
                }
                let (next, recheck) = (self.b.create_block(), self.b.create_block());
                self.stats.loads += 1;
                self.mask_test(&all, next, recheck);
                self.b.switch_to_block(recheck);
                self.mask_test(first, fail, to);
                self.b.switch_to_block(next);
                rest = &windows[n + 1..];
            }
        }
        for (t, has_entry, _) in rest {
            let to = match entry {
                Some((.., to)) if *has_entry => to,
                _ => fail,
            };
            self.stats.loads += 1;
            let next = self.b.create_block();
            self.mask_test(t, next, to);
            self.b.switch_to_block(next);
        }
        for (_, _, conds) in &windows {
            self.stats.coalesced += conds.len().saturating_sub(1);
            for c in conds {
                for it in items.iter_mut() {
                    if let Some(at) = it.conds.iter().position(|x| x == c) {
                        it.conds.remove(at);
                    }
                }
            }
        }
    }

    /// Branch to `yes` when `t` holds, else to `no`. Sixteen bytes are one
    /// vector compare.
    fn mask_test(&mut self, t: &MaskTest, yes: Block, no: Block) {
        let a = self.b.ins().iadd_imm(self.pkt, t.base as i64);
        if t.width == 16 {
            let fl = MemFlags::new().with_notrap().with_readonly();
            let v = self.b.ins().load(types::I8X16, fl, a, 0);
            let mut vconst = |bytes: &[u8; 16]| {
                let c = self.b.func.dfg.constants.insert(bytes.to_vec().into());
                self.b.ins().vconst(types::I8X16, c)
            };
            let (m, k) = (vconst(&t.mask), vconst(&t.value));
            let v = self.b.ins().band(v, m);
            let eq = self.b.ins().icmp(IntCC::Equal, v, k);
            let bits = self.b.ins().vhigh_bits(types::I32, eq);
            let ok = self.b.ins().icmp_imm(IntCC::Equal, bits, 0xffff);
            self.b.ins().brif(ok, yes, &[], no, &[]);
            return;
        }
        let word = |b: &[u8; 16]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[..8]);
            ne_word(&w, t.width) as i64
        };
        let v = self.load_word(a, t.width, types::I32);
        let (m, k) = (word(&t.mask), word(&t.value));
        let full = match t.width {
            1 => 0xff,
            2 => 0xffff,
            4 => u32::MAX as i64,
            _ => -1,
        };
        let v = if m == full {
            v
        } else {
            self.b.ins().band_imm(v, m)
        };
        let ok = self.b.ins().icmp_imm(IntCC::Equal, v, k);
        self.b.ins().brif(ok, yes, &[], no, &[]);
    }

    /// One length check for the fixed-offset reads every item needs (and
    /// one per IPv4 header for the reads behind it), and for at least
    /// `at_least` bytes: when it fails, every item fails, so it goes to
    /// `fail`.
    fn aggregate(&mut self, items: &[Item], ctx: &mut Ctx, fail: Block, at_least: u64) {
        let mut common: Option<Vec<R>> = None;
        for it in items {
            let rs: Vec<R> = it.conds.iter().map(|c| c.r).collect();
            common = Some(match common {
                None => rs,
                Some(c) => c.into_iter().filter(|r| rs.contains(r)).collect(),
            });
        }
        let common = common.unwrap_or_default();
        let mut end = at_least;
        let mut covered = 0;
        let mut rel: Vec<(u32, u64)> = Vec::new();
        for r in &common {
            match *r {
                R::Abs { off, size } => {
                    end = end.max(off as u64 + size as u64);
                    covered += 1;
                }
                R::Rel { hdr, off, size } => {
                    end = end.max(hdr as u64 + 1);
                    let e = off as u64 + size as u64;
                    match rel.iter_mut().find(|(h, _)| *h == hdr) {
                        Some((_, x)) => *x = (*x).max(e),
                        None => rel.push((hdr, e)),
                    }
                }
                _ => {}
            }
        }
        if end > ctx.known && (covered > 1 || !rel.is_empty() || at_least > 0) {
            self.stats.bounds_checks += 1;
            let short = self
                .b
                .ins()
                .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
            self.branch_out(short, fail);
            ctx.known = end;
        }
        for (hdr, e) in rel {
            if find(&ctx.rel, hdr).unwrap_or(0) < e {
                let hl = self.hl(ctx, hdr, fail);
                self.rel_check(ctx, hl, hdr, e, fail);
            }
        }
    }

    /// The `width` (1, 2, 4 or 8) bytes at `a` as loaded, zero-extended to
    /// `ty` (`I32` for 1, 2 and 4 bytes, or `I64`; always `I64` for 8).
    pub(super) fn load_word(
        &mut self,
        a: Value,
        width: u32,
        ty: cranelift_codegen::ir::Type,
    ) -> Value {
        match (width, ty) {
            (1, _) => self.b.ins().uload8(ty, flags(), a, 0),
            (2, _) => self.b.ins().uload16(ty, flags(), a, 0),
            (4, types::I64) => self.b.ins().uload32(flags(), a, 0),
            (4, _) => self.b.ins().load(types::I32, flags(), a, 0),
            _ => self.b.ins().load(types::I64, flags(), a, 0),
        }
    }

    /// Branch to `fail` when `cond`, else go on in a fresh block.
    pub(super) fn branch_out(&mut self, cond: Value, fail: Block) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, fail, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// Check `hl + end <= caplen`, else `fail`.
    fn rel_check(&mut self, ctx: &mut Ctx, hl: Value, hdr: u32, end: u64, fail: Block) {
        self.stats.bounds_checks += 1;
        let e = self.b.ins().iadd_imm(hl, end as i64);
        let over = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThan, e, self.caplen);
        self.branch_out(over, fail);
        match ctx.rel.iter_mut().find(|(h, _)| *h == hdr) {
            Some((_, x)) => *x = end,
            None => ctx.rel.push((hdr, end)),
        }
    }

    /// `4 * (pkt[hdr] & 0xf)`, 64 bits.
    fn hl(&mut self, ctx: &mut Ctx, hdr: u32, fail: Block) -> Value {
        if let Some(v) = find(&ctx.hl, hdr) {
            return v;
        }
        let byte = self.read_raw(ctx, R::Abs { off: hdr, size: 1 }, fail);
        // Widened before the shift, so that x86-64 folds the shift into
        // the scale of the addresses behind the header.
        let x = self.b.ins().band_imm(byte, 0xf);
        let x = self.b.ins().uextend(types::I64, x);
        let x = self.b.ins().ishl_imm(x, 2);
        ctx.hl.push((hdr, x));
        x
    }

    /// The address of `width` bytes at `r`'s place, bounds-checked (to
    /// `fail`) unless a dominating check covers them.
    pub(super) fn addr(&mut self, ctx: &mut Ctx, r: R, width: u32, fail: Block) -> Value {
        match r {
            R::Abs { off, .. } => {
                let end = off as u64 + width as u64;
                if end > ctx.known {
                    self.stats.bounds_checks += 1;
                    let short =
                        self.b
                            .ins()
                            .icmp_imm(IntCC::UnsignedLessThan, self.caplen, end as i64);
                    self.branch_out(short, fail);
                    ctx.known = end;
                }
                self.b.ins().iadd_imm(self.pkt, off as i64)
            }
            R::Rel { hdr, off, .. } => {
                let hl = self.hl(ctx, hdr, fail);
                let end = off as u64 + width as u64;
                if find(&ctx.rel, hdr).unwrap_or(0) < end {
                    self.rel_check(ctx, hl, hdr, end, fail);
                }
                let a = self.b.ins().iadd(self.pkt, hl);
                self.b.ins().iadd_imm(a, off as i64)
            }
            R::Len | R::Const(_) => unreachable!("not a load"),
        }
    }

    /// A field's raw value (host order of its bytes), 32 bits (64 for an
    /// 8-byte load of a packed key).
    fn read_raw(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        if let Some(v) = find(&ctx.raw, r) {
            return v;
        }
        let v = match r {
            R::Len => self.wirelen,
            R::Const(k) => self.b.ins().iconst(types::I32, k as i64),
            R::Abs { size, .. } | R::Rel { size, .. } => {
                self.stats.loads += 1;
                let a = self.addr(ctx, r, size as u32, fail);
                self.load_word(a, size as u32, types::I32)
            }
        };
        ctx.raw.push((r, v));
        v
    }

    /// A field's raw value widened to 64 bits: a field read before is
    /// extended, one read first here is loaded straight into 64 bits.
    pub(super) fn read_raw64(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        match r {
            R::Abs { size, .. } | R::Rel { size, .. } if find(&ctx.raw, r).is_none() => {
                self.stats.loads += 1;
                let a = self.addr(ctx, r, size as u32, fail);
                self.load_word(a, size as u32, types::I64)
            }
            _ => {
                let v = self.read_raw(ctx, r, fail);
                if self.b.func.dfg.value_type(v) == types::I64 {
                    v
                } else {
                    self.b.ins().uextend(types::I64, v)
                }
            }
        }
    }

    /// A field's value (network order, as the IR means it).
    pub(super) fn read_be(&mut self, ctx: &mut Ctx, r: R, fail: Block) -> Value {
        if let Some(v) = find(&ctx.be, r) {
            return v;
        }
        let raw = self.read_raw(ctx, r, fail);
        let v = match r.size() {
            2 if cfg!(target_endian = "little") => {
                let s = self.b.ins().bswap(raw);
                self.b.ins().ushr_imm(s, 16)
            }
            4 if cfg!(target_endian = "little") => self.b.ins().bswap(raw),
            _ => raw,
        };
        ctx.be.push((r, v));
        v
    }

    /// Branch on a test of field `r`: to `t` when it gives `truth`, else `e`.
    pub(super) fn test(
        &mut self,
        ctx: &mut Ctx,
        r: R,
        test: &Test,
        truth: bool,
        t: Block,
        e: Block,
    ) {
        let (yes, no) = if truth { (t, e) } else { (e, t) };
        match test {
            Test::Eq(k) => match r.raw(*k) {
                Some(rk) => {
                    let v = self.read_raw(ctx, r, e);
                    let c = self.b.ins().icmp_imm(IntCC::Equal, v, rk as i64);
                    self.b.ins().brif(c, yes, &[], no, &[]);
                }
                None => {
                    // The field cannot equal k (but must still be read).
                    self.read_raw(ctx, r, e);
                    self.b.ins().jump(no, &[]);
                }
            },
            Test::Set(m) => {
                let v = self.read_raw(ctx, r, e);
                let x = self.b.ins().band_imm(v, r.raw_mask(*m) as i64);
                self.b.ins().brif(x, yes, &[], no, &[]);
            }
            Test::Gt(k) | Test::Ge(k) => {
                let v = self.read_be(ctx, r, e);
                let cc = if matches!(test, Test::Gt(_)) {
                    IntCC::UnsignedGreaterThan
                } else {
                    IntCC::UnsignedGreaterThanOrEqual
                };
                let c = self.b.ins().icmp_imm(cc, v, *k as i64);
                self.b.ins().brif(c, yes, &[], no, &[]);
            }
            Test::In(keys) => {
                let v = self.read_raw(ctx, r, e);
                let mut raws: Vec<u32> = keys.sorted().iter().filter_map(|&k| r.raw(k)).collect();
                raws.sort_unstable();
                raws.dedup();
                let arms: Vec<(u32, Block)> = raws.into_iter().map(|k| (k, yes)).collect();
                self.dispatch(v, r, &arms, no);
            }
        }
    }

    /// In the current block: go to the arm whose raw constant equals `v`,
    /// else to `default` (a chain of compares for a few, a search tree on
    /// the raw values for more: any order works for equality).
    fn dispatch(&mut self, v: Value, r: R, arms: &[(u32, Block)], default: Block) {
        let _ = r;
        if arms.len() <= 4 {
            for (i, (k, blk)) in arms.iter().enumerate() {
                let c = self.b.ins().icmp_imm(IntCC::Equal, v, *k as i64);
                if i + 1 == arms.len() {
                    self.b.ins().brif(c, *blk, &[], default, &[]);
                } else {
                    self.branch_in(c, *blk);
                }
            }
            if arms.is_empty() {
                self.b.ins().jump(default, &[]);
            }
            return;
        }
        let mid = arms.len() / 2;
        let (hi, lo) = (self.b.create_block(), self.b.create_block());
        let c = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThanOrEqual, v, arms[mid].0 as i64);
        self.b.ins().brif(c, hi, &[], lo, &[]);
        self.b.switch_to_block(hi);
        self.dispatch(v, r, &arms[mid..], default);
        self.b.switch_to_block(lo);
        self.dispatch(v, r, &arms[..mid], default);
    }

    /// Branch to `t` when `cond`, else go on in a fresh block.
    fn branch_in(&mut self, cond: Value, t: Block) {
        let next = self.b.create_block();
        self.b.ins().brif(cond, t, &[], next, &[]);
        self.b.switch_to_block(next);
    }

    /// One path alone: its equality tests on adjacent fields as wider
    /// compares, the rest one by one, then its action; continue at `cont`
    /// (also when a condition fails).
    fn leaf(&mut self, it: Item, mut ctx: Ctx, cont: Block) {
        let mut wide: Vec<(Option<u32>, u32, u32, u32)> = Vec::new(); // (hdr, off, size, k)
        let mut rest = Vec::new();
        for c in it.conds {
            let (hdr, off, size) = match c.r {
                R::Abs { off, size } => (None, off, size as u32),
                R::Rel { hdr, off, size } => (Some(hdr), off, size as u32),
                _ => {
                    rest.push(c);
                    continue;
                }
            };
            match c.test {
                Some(Test::Eq(k)) if c.truth && find(&ctx.raw, c.r).is_none() => {
                    if c.r.raw(k).is_none() {
                        // Never equal: the path cannot hold (a read that
                        // would abort makes it fail just the same).
                        self.b.ins().jump(cont, &[]);
                        return;
                    }
                    wide.push((hdr, off, size, k));
                }
                _ => rest.push(c),
            }
        }
        wide.sort_unstable();
        wide.dedup();
        // Known values first (no load), then the coalesced loads, then the rest.
        rest.sort_by_key(|c| find(&ctx.raw, c.r).is_none());
        let mut i = 0;
        while i < wide.len() {
            let (end, width) = adjacent_run(wide.len(), i, |k| (wide[k].0, wide[k].1, wide[k].2));
            if end - i == 1 {
                let (hdr, off, size, k) = wide[i];
                let r = R::at(hdr, off, size);
                let next = self.b.create_block();
                self.test(&mut ctx, r, &Test::Eq(k), true, next, cont);
                self.b.switch_to_block(next);
            } else {
                self.stats.coalesced += end - i - 1;
                self.stats.loads += 1;
                let (mut bytes, mut at) = ([0u8; 8], 0);
                for &(_, _, size, k) in &wide[i..end] {
                    let n = size as usize;
                    bytes[at..at + n].copy_from_slice(&k.to_be_bytes()[4 - n..]);
                    at += n;
                }
                let (hdr, off, _, _) = wide[i];
                let r = R::at(hdr, off, 1);
                let a = self.addr(&mut ctx, r, width, cont);
                let v = self.load_word(a, width, types::I32);
                let k = ne_word(&bytes, width) as i64;
                let c = self.b.ins().icmp_imm(IntCC::Equal, v, k);
                let next = self.b.create_block();
                self.b.ins().brif(c, next, &[], cont, &[]);
                self.b.switch_to_block(next);
            }
            i = end;
        }
        for c in rest {
            let next = self.b.create_block();
            match &c.test {
                Some(t) => self.test(&mut ctx, c.r, t, c.truth, next, cont),
                None => {
                    self.read_raw(&mut ctx, c.r, cont);
                    self.b.ins().jump(next, &[]);
                }
            }
            self.b.switch_to_block(next);
        }
        self.action(&it.action, &mut ctx);
        self.b.ins().jump(cont, &[]);
    }
}
