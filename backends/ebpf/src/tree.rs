//! Many filters as the merged decision tree compiled to eBPF: the
//! structure `sluice split`'s default engine runs natively, walked by the
//! kernel, each packet reaching only the nodes whose tests it passed.
//!
//! Rule: the program is the tree's walk ([`DecisionTree`]'s reference
//! walk in `classifier/src/tree/run.rs`) unrolled into code, and its
//! answers are exactly the tree's. A node counts its leaf's filters,
//! reads its field once (an abort skips to its skip edge), follows each
//! of its tables and each condition edge its value meets, then goes on
//! along its skip edge. The tree has no shared nodes, so its code is one
//! block per node with its children inside: the program is as long as the
//! tree, and a packet runs only its own path through it. A table of at
//! most [`SMALL_KEYS`] keys is a binary search of compares, word by word;
//! any other is one entry per key in one hash table of sluice's own for
//! all tables (`keys.rs`: the table's number and the key words, looked up
//! by the program's own code in an array map of buckets), whose value
//! either names the one filter a child accepts (counted from the value,
//! no code of its own) or numbers a child that has code, found by a
//! binary search of the numbers. A match goes into a per-CPU hit list,
//! counted at the program's end by `bpf_loop` into [`crate::multi`]'s
//! per-CPU counters,
//! each filter once per packet.
//!
//! ## The verifier
//!
//! The verifier follows every path, and prunes where a state it already
//! explored recurs. Each block's start reloads the lengths (so what a
//! child's bounds checks taught the verifier is forgotten), a node's
//! value waits in its depth's stack slot, and counts live in the map: the
//! states at the end of every child are then the same, and the verifier
//! explores each block about once. A set whose tree is longer than
//! [`Options::budget`] instructions is split into halves, each its own
//! tree and program, chained by tail calls (at most
//! [`crate::multi::MAX_PROGRAMS`]).
//!
//! ```no_run
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_ebpf::{Mode, TreeFilter};
//! let port = |p| Compiled::new(Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1));
//! let (a, b) = (port(80), port(443));
//! let m = TreeFilter::build(&[(0, &a), (1, &b)], Mode::TestRun, Default::default())?;
//! assert_ne!(m.run(&[0, 0, 0, 80], 4)?, 0);
//! assert_eq!(m.run(&[0, 0, 0, 81], 4)?, 0);
//! assert_eq!(m.counts()?, vec![1, 0]);
//! # Ok::<(), sluice_ebpf::Error>(())
//! ```

use crate::chain::{count_of, Chain};
use crate::emit::{alu32, alu64, alu64x, shared_ids_val, slot_off, Emitter, FrameCopy, Label};
use crate::insn::{op, Insn};
use crate::keys::KeyTable;
use crate::multi::{
    array_entry, call, epilogue, exit, header, ld_map, ldx, lengths, map_err, possible_cpus,
    prologue, stx, whole, COUNTER, HELPER_MAP_LOOKUP, KEY_BUF, MAP_PERCPU_ARRAY, MAX_PROGRAMS,
    RESERVED, SEQ, SEQ_PTR, VAL_PTR,
};
use crate::{sys, Error, Mode};
use sluice_classifier::merged::{Compiled, Whole};
use sluice_classifier::tree::field::{FieldId, Fields, Source};
use sluice_classifier::tree::label::Cond;
use sluice_classifier::tree::node::{NodeId, Tuple, MAX_TUPLE, NONE};
use sluice_classifier::tree::DecisionTree;
use sluice_ir::{Filter, Val};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// Tables with at most this many keys are a binary search of compares in
/// the code, word by word, their children in place; larger ones are
/// entries of the key table. Past a few hundred keys the search costs
/// what the table's lookup does (about 6 ns of four words at 1,000 keys,
/// both ways), and its code only makes the program longer to verify.
pub const SMALL_KEYS: usize = 256;

/// Key table values with this bit name a child with code (its number
/// below); without it, the counter of the one filter the child accepts,
/// plus one.
const CHILD: u32 = 1 << 31;

/// The most places that count in one program: the run's hit list has
/// room for each (each runs at most once a packet: the code has no
/// loops), in one per-CPU array entry of at most 32 KiB.
const MAX_HITS: usize = 8_000;

/// Bytes of the hit list's entry: its length, a spare word, then a
/// counter number per place that counts.
const HITS_BYTES: usize = 4 * (2 + MAX_HITS);

/// Stack slots of a tree program's frame: the frames of a call share 512
/// bytes, each rounded up to 32, and the counting subprogram takes one.
const FRAME: usize = 60;

/// Bytes of a socket filter's copy of the frame, in a per-CPU map value:
/// IPv6 with an extension header or a VLAN tag and the transport header
/// behind them (the rest is read by `bpf_skb_load_bytes`; 256 bytes cost
/// the same to load and no less a frame live).
const SOCKET_COPY: u32 = 128;

/// The stack slot that holds the frame copy's address (socket filters;
/// the next is for loads past the copy, their depth slots start after).
const COPY_PTR: usize = RESERVED;

/// `bpf_loop`.
const HELPER_LOOP: i32 = 181;

/// The stack slot that holds the hit list's address.
const HITS_PTR: usize = VAL_PTR;

/// The word of the key buffer (from `slot_off(KEY_BUF)`) that holds the
/// key table's bucket number: past the longest key and its padding.
const KEY_INDEX: i16 = MAX_TUPLE as i16 + 4;

/// The most temporaries an expression takes besides the depth slots.
const TEMPS: usize = 8;

/// How a tree program set is built.
///
/// ```
/// assert!(sluice_ebpf::tree::Options::default().budget > 1000);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Instructions one program may have before its filters are split
    /// into two trees.
    pub budget: usize,
    /// Room for filter ids: [`TreeFilter::counts`] reports ids below this
    /// (at least one past the largest id given).
    pub capacity: u32,
    /// The program's return value when a filter matches (a socket
    /// filter's: bytes to keep).
    pub accept: u32,
    /// [`Mode::Socket`] only: judge only the frames the host sends (as
    /// [`crate::multi::Options::outgoing_only`]).
    pub outgoing_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            budget: 200_000,
            capacity: 0,
            accept: u32::MAX,
            outgoing_only: false,
        }
    }
}

/// A filter set loaded into the kernel as decision trees: programs,
/// maps, and which filter each counter is. Everything is closed on drop.
///
/// ```no_run
/// use sluice_classifier::merged::Compiled;
/// let all = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// let m = sluice_ebpf::TreeFilter::build(&[(0, &all)], sluice_ebpf::Mode::TestRun, Default::default())?;
/// m.run(&[0; 60], 60)?;
/// assert_eq!(m.counts()?[0], 1);
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
#[derive(Debug)]
pub struct TreeFilter {
    chain: Chain,
    /// Socket filters: the frame copy's map (the programs hold it too).
    _copy: Option<OwnedFd>,
    keys: KeyTable,
    counters: OwnedFd,
    hits: OwnedFd,
    /// The programs as loaded (for [`TreeFilter::count_instructions`]).
    code: Vec<Vec<Insn>>,
    /// Filter id of each counter entry (`u32::MAX`: none).
    ids: Vec<u32>,
    capacity: u32,
    cpus: usize,
}

/// One program's tree and where its counters start.
struct Part {
    tree: DecisionTree,
    /// Counter of slot 0.
    base: u32,
    /// Filter id of each slot (`u32::MAX`: none).
    ids: Vec<u32>,
    /// The filters that run whole: their slots and programs.
    whole: Vec<(u32, Arc<Filter>)>,
}

impl Part {
    /// A tree's part, its counters from 0 until placed.
    fn new(tree: DecisionTree, by_id: &HashMap<u32, &Compiled>) -> Part {
        let ids: Vec<u32> = (0..tree.slots() as u32)
            .map(|s| tree.id_of(s).unwrap_or(u32::MAX))
            .collect();
        let slot_of: HashMap<u32, u32> = ids
            .iter()
            .enumerate()
            .map(|(s, id)| (*id, s as u32))
            .collect();
        let whole = tree
            .whole_filters()
            .map(|(id, _, w)| {
                let f = match w {
                    Whole::Ir(f) => f.clone(),
                    Whole::Bpf(_) => Arc::new(by_id[&id].filter().clone()),
                };
                (slot_of[&id], f)
            })
            .collect();
        Part {
            tree,
            base: 0,
            ids,
            whole,
        }
    }

    /// One filter whose tree is too long for a program, run whole.
    fn alone(id: u32, c: &Compiled) -> Part {
        Part {
            tree: DecisionTree::default(),
            base: 0,
            ids: vec![id],
            whole: vec![(0, Arc::new(c.filter().clone()))],
        }
    }
}

/// What emitting one program needs besides the tree.
struct Emit<'a> {
    mode: Mode,
    counters: &'a OwnedFd,
    /// The large tables' keys.
    keys: KeyTable,
    /// The key table's entries the code refers to: key words (the table's
    /// number first) and value.
    entries: Vec<(Vec<u32>, u32)>,
    /// The next table's number.
    tables: u32,
    /// Slot of depth 0's value.
    depth0: usize,
    /// Hit list's map.
    hits: &'a OwnedFd,
    /// Socket filters: the frame copy's map.
    copy: Option<&'a OwnedFd>,
    /// Places that count in the program so far.
    sites: usize,
}

/// True for a table that is code, not key table entries.
fn small(t: &Tuple) -> bool {
    t.table.len() <= SMALL_KEYS
}

/// The deepest nesting of tables and conditions below `n` (its skip
/// chain included), and the widest map table's key.
fn shape(tree: &DecisionTree, n: NodeId) -> (usize, usize) {
    let nodes = tree.nodes();
    let (mut depth, mut width) = (0, 0);
    let mut m = n;
    loop {
        let nd = nodes.get(m);
        for t in &nd.tuples {
            if !small(t) {
                width = width.max(t.fields.len());
            }
            for (_, child, datum) in t.table.entries() {
                if datum == 0 {
                    let (d, w) = shape(tree, child - 1);
                    depth = depth.max(d + 1);
                    width = width.max(w);
                }
            }
        }
        for (_, child) in &nd.conds {
            let (d, w) = shape(tree, *child);
            depth = depth.max(d + 1);
            width = width.max(w);
        }
        if nd.skip == NONE {
            return (depth, width);
        }
        m = nd.skip;
    }
}

impl Emit<'_> {
    /// Read field `f` into w0; an abort goes to `abort`.
    fn field(
        &self,
        e: &mut Emitter,
        fields: &Fields,
        f: FieldId,
        abort: Label,
    ) -> Result<(), Error> {
        e.reject = abort;
        match fields.source(f) {
            Source::Val(v) => self.value(e, v),
            Source::Pred(p) => {
                let (t, no, done) = (e.label(), e.label(), e.label());
                e.cond(p, t, no)?;
                e.mark(t);
                e.put(alu32(op::MOV, 0, 1));
                e.goto(done);
                e.mark(no);
                e.put(alu32(op::MOV, 0, 0));
                e.mark(done);
                Ok(())
            }
        }
    }

    /// `v` into w0, its shared parts in slots of their own for the time.
    fn value(&self, e: &mut Emitter, v: &Val) -> Result<(), Error> {
        let base = e.used;
        let mut ids = Vec::new();
        shared_ids_val(v, &mut ids);
        for sid in ids {
            let s = e.push()?;
            e.shared.insert(sid, s);
            e.put(Insn::new(op::ST | op::MEM | op::DW, 10, 0, slot_off(s), 0));
        }
        let r = e.val(v);
        e.shared.clear();
        e.used = base;
        r
    }

    /// Count the filter of counter `k`.
    fn count_const(&mut self, e: &mut Emitter, k: u32) {
        e.put(alu32(op::MOV, 1, k));
        self.count_w1(e);
    }

    /// Count the filter whose counter is in w1 (r1-r4 are lost): its
    /// number goes into the run's hit list (at [`HITS_PTR`]), counted at the
    /// program's end ([`Emit::flush`]). No map lookup here: the kernel
    /// patches each lookup in as it verifies, and each patch moves the
    /// whole program (a tree of thousands of leaves took seconds).
    fn count_w1(&mut self, e: &mut Emitter) {
        self.sites += 1;
        let full = e.label();
        e.put(ldx(op::DW, 2, 10, slot_off(HITS_PTR)));
        e.put(ldx(op::W, 3, 2, 0));
        // (Never: the list has room for every place that counts.)
        e.jump(
            Insn::new(op::JMP | op::JGE | op::K, 3, 0, 0, MAX_HITS as i32),
            full,
        );
        e.put(alu64x(op::MOV, 4, 3));
        e.put(alu64(op::LSH, 4, 2));
        e.put(alu64x(op::ADD, 4, 2));
        e.put(stx(op::W, 4, 8, 1));
        e.put(alu32(op::ADD, 3, 1));
        e.put(stx(op::W, 2, 0, 3));
        e.mark(full);
    }

    /// Count every filter of the hit list (each once, as
    /// [`crate::multi`] counts; the next program starts the list again):
    /// `bpf_loop` calls the
    /// counting subprogram ([`Emit::count_hit`]) once for each, so the
    /// verifier follows its one lookup a few times, not once per hit.
    fn flush(&self, e: &mut Emitter, counter: Label) {
        let none = e.label();
        e.put(ldx(op::DW, 1, 10, slot_off(HITS_PTR)));
        e.put(ldx(op::W, 1, 1, 0));
        // Most packets of a large set match nothing: no call for them.
        e.jump(Insn::new(op::JMP | op::JEQ | op::K, 1, 0, 0, 0), none);
        e.func_addr(2, counter);
        e.put(alu64x(op::MOV, 3, 10));
        e.put(alu64(op::ADD, 3, slot_off(HITS_PTR) as i32));
        e.put(alu64(op::MOV, 4, 0));
        e.put(call(HELPER_LOOP));
        e.mark(none);
    }

    /// `bpf_loop`'s subprogram, after the program's last exit: r1 the
    /// hit's index, r2 the caller's slots from [`HITS_PTR`] up (the hit
    /// list, then the run's entry and sequence number, [`SEQ_PTR`] and
    /// [`SEQ`]). Returns 0 (go on).
    fn count_hit(&self, e: &mut Emitter, counter: Label) {
        let out = e.label();
        e.mark(counter);
        e.put(alu64x(op::MOV, 6, 2));
        e.put(ldx(op::DW, 3, 6, 0));
        e.jump(
            Insn::new(op::JMP | op::JGE | op::K, 1, 0, 0, MAX_HITS as i32),
            out,
        );
        e.put(alu64(op::LSH, 1, 2));
        e.put(alu64x(op::ADD, 1, 3));
        e.put(ldx(op::W, 1, 1, 8));
        e.put(stx(op::W, 10, -8, 1));
        ld_map(e, 1, self.counters);
        e.put(alu64x(op::MOV, 2, 10));
        e.put(alu64(op::ADD, 2, -8));
        e.put(call(HELPER_MAP_LOOKUP));
        e.jump(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, 0), out);
        let seq = 8 * (HITS_PTR - SEQ) as i16;
        let seq_ptr = 8 * (HITS_PTR - SEQ_PTR) as i16;
        e.put(ldx(op::DW, 7, 6, seq));
        e.put(ldx(op::DW, 1, 0, 8));
        e.jump(Insn::new(op::JMP | op::JEQ | op::X, 1, 7, 0, 0), out);
        e.put(stx(op::DW, 0, 8, 7));
        e.put(ldx(op::DW, 1, 0, 0));
        e.put(alu64(op::ADD, 1, 1));
        e.put(stx(op::DW, 0, 0, 1));
        e.put(ldx(op::DW, 1, 6, seq_ptr));
        e.put(stx(op::DW, 1, 0, 7));
        e.mark(out);
        e.put(alu64(op::MOV, 0, 0));
        e.put(exit());
    }

    /// Node `n` and its skip chain, at `depth`.
    fn node(&mut self, e: &mut Emitter, p: &Part, n: NodeId, depth: usize) -> Result<(), Error> {
        let nodes = p.tree.nodes();
        let mut n = n;
        loop {
            let nd = nodes.get(n);
            for entry in &nd.leaf {
                self.count_const(e, p.base + entry.slot);
            }
            if let Some(f) = nd.field {
                let after = e.label();
                let at = slot_off(self.depth0 + depth);
                lengths(e, self.mode);
                self.field(e, p.tree.fields(), f, after)?;
                e.put(stx(op::W, 10, at, 0));
                for t in &nd.tuples {
                    self.tuple(e, p, t, depth)?;
                }
                for (c, child) in &nd.conds {
                    let next = e.label();
                    lengths(e, self.mode);
                    e.put(ldx(op::W, 0, 10, at));
                    cond(e, c, next);
                    self.node(e, p, *child, depth + 1)?;
                    e.mark(next);
                }
                e.mark(after);
            }
            if nd.skip == NONE {
                return Ok(());
            }
            n = nd.skip;
        }
    }

    /// A child of a table: its filter counted, or its code.
    fn child(
        &mut self,
        e: &mut Emitter,
        p: &Part,
        child: u32,
        datum: u32,
        depth: usize,
    ) -> Result<(), Error> {
        match datum {
            0 => self.node(e, p, child - 1, depth + 1),
            d => {
                self.count_const(e, p.base + d - 1);
                Ok(())
            }
        }
    }

    /// One table of a node whose value is in its depth's slot.
    fn tuple(&mut self, e: &mut Emitter, p: &Part, t: &Tuple, depth: usize) -> Result<(), Error> {
        let next = e.label();
        let at = slot_off(self.depth0 + depth);
        lengths(e, self.mode);
        let mut entries: Vec<(&[u32], u32, u32)> = t.table.entries().collect();
        entries.sort_unstable();
        let buf = slot_off(KEY_BUF);
        // The key's words: the table's other fields into the key buffer
        // (an abort skips the table), then the node's value into w0, and
        // into the buffer for a lookup.
        for (i, f) in t.fields.iter().enumerate().skip(1) {
            self.field(e, p.tree.fields(), *f, next)?;
            e.put(stx(op::W, 10, buf + 4 * (i as i16 + 1), 0));
        }
        e.put(ldx(op::W, 0, 10, at));
        if small(t) {
            let bodies: Vec<Label> = entries.iter().map(|_| e.label()).collect();
            let keys: Vec<&[u32]> = entries.iter().map(|(k, _, _)| *k).collect();
            search_words(e, &keys, 0, &bodies, next);
            for ((_, child, datum), body) in entries.iter().zip(&bodies) {
                e.mark(*body);
                lengths(e, self.mode);
                self.child(e, p, *child, *datum, depth)?;
                e.goto(next);
            }
            e.mark(next);
            return Ok(());
        }
        let number = self.tables;
        self.tables += 1;
        e.put(stx(op::W, 10, buf + 4, 0));
        e.put(Insn::new(
            op::ST | op::MEM | op::W,
            10,
            0,
            buf,
            number as i32,
        ));
        for i in 1 + t.fields.len()..self.keys.words() {
            e.put(Insn::new(
                op::ST | op::MEM | op::W,
                10,
                0,
                buf + 4 * i as i16,
                0,
            ));
        }
        self.keys.lookup(e, buf, buf + 4 * KEY_INDEX, next);
        // Children with code, numbered in key order.
        let mut coded = Vec::new();
        for (key, child, datum) in &entries {
            let mut words = Vec::with_capacity(self.keys.words());
            words.push(number);
            words.extend_from_slice(key);
            let value = match datum {
                0 => {
                    coded.push(*child);
                    CHILD | (coded.len() as u32 - 1)
                }
                d => p.base + d,
            };
            self.entries.push((words, value));
        }
        if entries.iter().any(|(_, _, d)| *d != 0) {
            let code = e.label();
            e.jump(
                Insn::new(op::JMP32 | op::JSET | op::K, 1, 0, 0, CHILD as i32),
                code,
            );
            e.put(alu32(op::SUB, 1, 1));
            self.count_w1(e);
            e.goto(next);
            e.mark(code);
        }
        if !coded.is_empty() {
            e.put(alu32(op::AND, 1, !CHILD));
            self.dispatch(e, p, &coded, 0, depth, next)?;
        }
        e.mark(next);
        Ok(())
    }

    /// Children `coded` numbered from `from`, the number in w1: a binary
    /// search to each child's code, which goes on to `next`.
    fn dispatch(
        &mut self,
        e: &mut Emitter,
        p: &Part,
        coded: &[u32],
        from: u32,
        depth: usize,
        next: Label,
    ) -> Result<(), Error> {
        if let [child] = coded {
            lengths(e, self.mode);
            self.child(e, p, *child, 0, depth)?;
            e.goto(next);
            return Ok(());
        }
        let mid = coded.len() / 2;
        let right = e.label();
        e.jump(
            Insn::new(
                op::JMP32 | op::JGE | op::K,
                1,
                0,
                0,
                (from + mid as u32) as i32,
            ),
            right,
        );
        self.dispatch(e, p, &coded[..mid], from, depth, next)?;
        e.mark(right);
        self.dispatch(e, p, &coded[mid..], from + mid as u32, depth, next)
    }

    /// A chain's first program that reads nothing: the run started, a
    /// tail call to program 1, and the verdict.
    fn trampoline(&self, opts: &Options, chain: &OwnedFd, capacity: u32) -> Vec<Insn> {
        let (mut e, yes, no) = prologue(
            self.mode,
            opts.outgoing_only,
            self.counters,
            capacity,
            opts.accept,
            0,
            FRAME,
        );
        epilogue(&mut e, chain, 0, false, yes, no);
        e.layout().expect("a program of a few instructions")
    }

    /// Program `k` of the chain for part `p`.
    fn program(
        &mut self,
        p: &Part,
        opts: &Options,
        chain: &OwnedFd,
        capacity: u32,
        k: usize,
        last: bool,
    ) -> Result<Vec<Insn>, Error> {
        let (mut e, yes, no) = prologue(
            self.mode,
            opts.outgoing_only,
            self.counters,
            capacity,
            opts.accept,
            k,
            FRAME,
        );
        if let (Mode::Socket, Some(map)) = (self.mode, self.copy) {
            e.set_frame_copy(FrameCopy {
                map: map.as_raw_fd(),
                slot: COPY_PTR,
                tmp: COPY_PTR + 1,
                bytes: SOCKET_COPY,
            });
        }
        header(&mut e, self.mode);
        // The hit list, empty (each program starts it again).
        self.sites = 0;
        array_entry(&mut e, self.hits, 0, self.mode);
        e.put(Insn::new(op::ST | op::MEM | op::W, 0, 0, 0, 0));
        e.put(stx(op::DW, 10, slot_off(HITS_PTR), 0));
        e.used = self.depth0;
        let (depth, _) = shape(&p.tree, p.tree.nodes().root());
        if self.depth0 + depth + 1 + TEMPS > e.slots() {
            return Err(Error::TooDeep);
        }
        e.used = self.depth0 + depth + 1;
        self.node(&mut e, p, p.tree.nodes().root(), 0)?;
        for (slot, f) in &p.whole {
            let skip = e.label();
            lengths(&mut e, self.mode);
            whole(&mut e, self.counters, p.base + slot, f, skip)?;
            e.mark(skip);
        }
        if self.sites > MAX_HITS {
            // Too long for the hit list: as too long for the budget.
            return Err(Error::TooLarge(opts.budget + 1));
        }
        let counter = e.label();
        self.flush(&mut e, counter);
        epilogue(&mut e, chain, k, last, yes, no);
        self.count_hit(&mut e, counter);
        e.layout()
    }
}

/// Keys (sorted, each a table's key words) searched word by word from
/// word `word` of the key buffer (word 0 in w0): a binary search of the distinct values
/// of the word, then of the next word among the keys that share it, to
/// the label of the key the buffer holds, else to `none`.
fn search_words(e: &mut Emitter, keys: &[&[u32]], word: usize, to: &[Label], none: Label) {
    if word > 0 {
        e.put(ldx(op::W, 0, 10, slot_off(KEY_BUF) + 4 * (word as i16 + 1)));
    }
    let mut values = Vec::new();
    let mut runs = Vec::new();
    let mut i = 0;
    while i < keys.len() {
        let v = keys[i][word];
        let end = i + keys[i..].iter().take_while(|k| k[word] == v).count();
        values.push(v);
        runs.push(i..end);
        i = end;
    }
    if word + 1 == keys[0].len() {
        e.search_to(&values, to, none);
        return;
    }
    let inner: Vec<Label> = runs.iter().map(|_| e.label()).collect();
    e.search_to(&values, &inner, none);
    for (run, label) in runs.into_iter().zip(inner) {
        e.mark(label);
        search_words(e, &keys[run.clone()], word + 1, &to[run], none);
    }
}

/// Fall through when w0 meets `c`, else go to `no`.
fn cond(e: &mut Emitter, c: &Cond, no: Label) {
    let j = |o: u8, k: u32| Insn::new(op::JMP32 | o | op::K, 0, 0, 0, k as i32);
    if c.lo > 0 {
        e.jump(j(op::JLT, c.lo), no);
    }
    if c.hi < u32::MAX {
        e.jump(j(op::JGT, c.hi), no);
    }
    if c.none != 0 {
        e.jump(j(op::JSET, c.none), no);
    }
    for m in &c.any {
        let ok = e.label();
        e.jump(j(op::JSET, *m), ok);
        e.goto(no);
        e.mark(ok);
    }
    for k in &c.ne {
        e.jump(j(op::JEQ, *k), no);
    }
    for s in &c.not_in {
        let ok = e.label();
        e.search(s.sorted(), no, ok);
        e.mark(ok);
    }
    if let Some(s) = &c.is_in {
        let ok = e.label();
        e.search(s.sorted(), ok, no);
        e.mark(ok);
    }
}

impl TreeFilter {
    /// Merge `filters` (id, prepared filter) into decision trees as
    /// `sluice split`'s default engine does, and load them as one chain
    /// of programs with their maps.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::False, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(3, &f)], sluice_ebpf::Mode::Socket, Default::default())?;
    /// assert_eq!(m.programs(), 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn build(
        filters: &[(u32, &Compiled)],
        mode: Mode,
        opts: Options,
    ) -> Result<TreeFilter, Error> {
        let capacity = filters
            .iter()
            .map(|(id, _)| id + 1)
            .max()
            .unwrap_or(0)
            .max(opts.capacity);
        let by_id: HashMap<u32, &Compiled> = filters.iter().copied().collect();
        // Counters: one per filter, and the run's entry after them.
        let slots = filters.len() as u32;
        let cpus = possible_cpus()?;
        let counters = sys::map_create(
            MAP_PERCPU_ARRAY,
            4,
            COUNTER as u32,
            slots + 1,
            "sluice_counts",
        )
        .map_err(map_err("creating the counter map"))?;
        let mut chain = Chain::new(mode)?;
        let part = |set: &[(u32, &Compiled)]| {
            let mut tree = DecisionTree::default();
            for (id, c) in set {
                tree.insert(*id, c, 0);
            }
            tree
        };
        // The key table's size and key, from the whole set's tree.
        let all = part(filters);
        let (_, width) = shape(&all, all.nodes().root());
        let mut room = 0usize;
        for nd in all.nodes().all() {
            room += nd
                .tuples
                .iter()
                .filter(|t| !small(t))
                .map(|t| t.table.len())
                .sum::<usize>();
        }
        let key_words = width.clamp(1, MAX_TUPLE);
        let keys = KeyTable::new(room, key_words)?;
        let hits = sys::map_create(MAP_PERCPU_ARRAY, 4, HITS_BYTES as u32, 1, "sluice_hits")
            .map_err(map_err("creating the hit list"))?;
        // Socket filters copy the frame's first bytes into a map value.
        let copy = match mode {
            Mode::Socket => Some(
                sys::map_create(MAP_PERCPU_ARRAY, 4, SOCKET_COPY, 1, "sluice_frame")
                    .map_err(map_err("creating the frame copy"))?,
            ),
            _ => None,
        };
        let mut em = Emit {
            mode,
            counters: &counters,
            keys,
            entries: Vec::new(),
            tables: 0,
            depth0: if copy.is_some() {
                COPY_PTR + 2
            } else {
                RESERVED
            },
            hits: &hits,
            copy: copy.as_ref(),
            sites: 0,
        };
        // Parts: the whole set, halved while a part's program is too long.
        let mut todo = vec![filters.to_vec()];
        let mut parts: Vec<Part> = Vec::new();
        let mut first = Some(all);
        while let Some(set) = todo.pop() {
            let tree = match first.take() {
                Some(t) => t,
                None => part(&set),
            };
            let mut p = Part::new(tree, &by_id);
            // Too long for the budget, or for the jumps across it.
            let size = match em.program(&p, &opts, chain.array(), slots, parts.len(), false) {
                Ok(insns) => insns.len(),
                Err(Error::TooLarge(n)) => n,
                Err(e) => return Err(e),
            };
            em.tables = 0;
            em.entries.clear();
            if size > opts.budget && set.len() > 1 {
                let (a, b) = set.split_at(set.len() / 2);
                todo.push(b.to_vec());
                todo.push(a.to_vec());
                continue;
            }
            if size > opts.budget {
                // One filter of very many paths: its own code is shorter.
                p = Part::alone(set[0].0, set[0].1);
            }
            parts.push(p);
            if parts.len() + usize::from(mode == Mode::Socket) > MAX_PROGRAMS {
                return Err(Error::Unsupported(format!(
                    "the filter set needs more than {MAX_PROGRAMS} chained eBPF programs of {} instructions",
                    opts.budget
                )));
            }
        }
        let mut ids = Vec::new();
        let mut progs = Vec::new();
        if mode == Mode::Socket && parts[0].tree.nodes().len() > 1 {
            // The kernel charges the program a socket attaches to its
            // option memory (`net.core.optmem_max`, 128 KiB here): a tree
            // of 1,000 filters is 1.2 MB. The socket's program then only
            // starts the run and tail-calls the tree.
            progs.push(em.trampoline(&opts, chain.array(), slots));
        }
        let k0 = progs.len();
        // The programs, again with a larger key table while some key
        // finds no room in its buckets.
        let mut code = Vec::new();
        let buckets = loop {
            code.clear();
            ids.clear();
            em.tables = 0;
            let n = parts.len();
            for (k, p) in parts.iter_mut().enumerate() {
                p.base = ids.len() as u32;
                ids.extend_from_slice(&p.ids);
                code.push(em.program(p, &opts, chain.array(), slots, k0 + k, k + 1 == n)?);
            }
            let entries = std::mem::take(&mut em.entries);
            if let Some(b) = em.keys.place(&entries) {
                break b;
            }
            em.keys = KeyTable::new(2 * em.keys.room(), key_words)?;
        };
        em.keys.fill(&buckets)?;
        progs.extend(code);
        let keys = em.keys;
        chain.load(&progs)?;
        let me = TreeFilter {
            chain,
            _copy: copy,
            keys,
            counters,
            hits,
            code: progs,
            ids,
            capacity,
            cpus,
        };
        Ok(me)
    }

    /// Run a packet through the chain in the kernel (`BPF_PROG_TEST_RUN`,
    /// as [`crate::MultiFilter::run`]): nonzero when some filter matched,
    /// and every matching filter counted.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_ne!(m.run(&[], 0)?, 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> Result<u32, Error> {
        Ok(self.bench(pkt, wirelen, 1)?.0)
    }

    /// Run a packet through the chain in sluice's own interpreter of the
    /// programs (`vm.rs`, [`Mode::TestRun`] only), against the maps
    /// the kernel holds: the verdict (as [`TreeFilter::run`], without
    /// counting) and the eBPF instructions executed, callbacks and tail
    /// calls included. The kernel keeps no such count.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// let (verdict, insns) = m.count_instructions(&[0; 60], 60)?;
    /// assert!(verdict != 0 && insns > 10);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn count_instructions(&self, pkt: &[u8], wirelen: u32) -> Result<(u32, u64), Error> {
        if self.chain.mode() != Mode::TestRun {
            return Err(Error::Unsupported(
                "instructions are counted for test-run chains".into(),
            ));
        }
        let maps = vec![
            (
                &self.counters,
                crate::vm::Map::Array {
                    value: COUNTER,
                    entries: self.ids.len() as u32 + 1,
                    fd: None,
                },
            ),
            (
                &self.hits,
                crate::vm::Map::Array {
                    value: HITS_BYTES,
                    entries: 1,
                    fd: None,
                },
            ),
            (self.keys.fd(), self.keys.vm_map()),
            (
                self.chain.array(),
                crate::vm::Map::Programs(self.code.len()),
            ),
        ];
        let mut vm = crate::vm::Vm::new(&self.code, maps);
        let data = crate::test_frame(pkt);
        let (ret, insns) = vm.run(&data, pkt.len() as u32, wirelen)?;
        Ok((ret as u32, insns))
    }

    /// Run a packet `repeat` times: (the result, the kernel's mean ns per
    /// run). Each run counts.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// m.bench(&[0; 60], 60, 10)?;
    /// assert_eq!(m.counts()?[0], 10);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn bench(&self, pkt: &[u8], wirelen: u32, repeat: u32) -> Result<(u32, u32), Error> {
        self.chain.bench(pkt, wirelen, repeat)
    }

    /// Attach the chain ([`Mode::Xdp`]) to interface `iface` as its XDP
    /// program (as [`crate::MultiFilter::attach_xdp`]).
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::Xdp, Default::default())?;
    /// let link = m.attach_xdp("eth0")?;
    /// # let _ = link;
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn attach_xdp(&self, iface: &str) -> Result<crate::XdpLink, Error> {
        self.chain.attach_xdp(iface)
    }

    /// Each filter id's count (summed over CPUs), for ids below the
    /// capacity.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::False, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(1, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_eq!(m.counts()?, vec![0, 0]);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn counts(&self) -> Result<Vec<u64>, Error> {
        let mut out = vec![0u64; self.capacity as usize];
        for (k, id) in self.ids.iter().enumerate() {
            if let Some(slot) = out.get_mut(*id as usize) {
                *slot += count_of(&self.counters, k as u32, self.cpus)?;
            }
        }
        Ok(out)
    }

    /// The first program's descriptor (for `SO_ATTACH_BPF`).
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::Socket, Default::default())?;
    /// assert!(m.fd().as_raw_fd() >= 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn fd(&self) -> &OwnedFd {
        self.chain.fd()
    }

    /// Programs in the chain (one per tree).
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_eq!(m.programs(), 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn programs(&self) -> usize {
        self.chain.instructions().len()
    }

    /// Instructions of each program of the chain.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert!(m.instructions()[0] > 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn instructions(&self) -> &[usize] {
        self.chain.instructions()
    }

    /// The kernel's ids of the chain's programs and of its maps.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// let (progs, maps) = m.kernel_ids()?;
    /// assert_eq!((progs.len(), maps.len()), (1, 3));
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn kernel_ids(&self) -> Result<(Vec<u32>, Vec<u32>), Error> {
        let id = |fd: &OwnedFd| sys::object_id(fd).map_err(map_err("reading an object's id"));
        let (progs, array) = self.chain.kernel_ids()?;
        Ok((progs, vec![id(&self.counters)?, array, id(self.keys.fd())?]))
    }

    /// The kernel's run-time statistics of the chain's first program:
    /// (total ns, runs), zero unless statistics are on.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::TreeFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// let _on = sluice_ebpf::enable_stats()?;
    /// m.bench(&[0; 60], 60, 100)?;
    /// assert_eq!(m.run_stats()?.1, 100);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run_stats(&self) -> Result<(u64, u64), Error> {
        self.chain.run_stats()
    }
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
