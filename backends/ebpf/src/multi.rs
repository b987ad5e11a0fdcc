//! Many filters as one eBPF program with maps: the merged classifier's
//! groups as one hash map, per-filter counts in a per-CPU array, counted
//! by the kernel.
//!
//! Rule: the program's shape comes from the merged classifier
//! ([`Merged`], the same groups `sluice split`'s default engine has), and
//! its answers are exactly that classifier's: a group becomes its guards
//! as code, its key fields read into a stack buffer after the group's
//! number and one `bpf_map_lookup_elem` in the `BPF_MAP_TYPE_HASH` map of
//! every group's keys, whose value lists the filters of the key; a filter
//! that runs whole becomes its own code. Every matching filter's counter in a
//! `BPF_MAP_TYPE_PERCPU_ARRAY` map goes up by one, once per packet however
//! many of its paths match. A key-only insert or removal is a map update,
//! never a reload. Maps and programs are owned descriptors, closed on
//! drop, never pinned.
//!
//! ## The counter map
//!
//! Entry `id < capacity` is filter `id`'s `{count: u64, seen: u64}`;
//! entry `capacity` is `{matched: u64, seq: u64}`: each run adds one to
//! `seq` (per CPU), a filter is counted only when its `seen` is not the
//! run's `seq` (then set to it), and `matched` is set to `seq` when any
//! filter counts; the program accepts when it was. Keeping these words in
//! the map, not in registers, leaves the verifier's states at each unit's
//! end identical, so it prunes instead of following every combination of
//! matches.
//!
//! ## Size
//!
//! Units (groups, filters run whole) go into one program until it has
//! [`Options::budget`] instructions, then into the next, chained by
//! `bpf_tail_call` through a `BPF_MAP_TYPE_PROG_ARRAY` (at most
//! [`MAX_PROGRAMS`], the kernel's tail-call limit plus one): each program
//! is verified alone. The verifier's work grows faster than a program (a
//! 20,000-instruction one of a 100-filter generated set ran past its
//! million processed instructions), hence the default of 8,000. Every
//! jump stays within a unit or the trie node it skips, so that the
//! kernel's own expansion of instructions keeps them within 16 bits. A
//! set that needs more programs is refused with a message.
//!
//! ## The key map
//!
//! One map for all groups (a program may refer to at most 64 maps, and
//! sets have thousands of groups): its key is the group's number and the
//! key words, zero-padded to the widest group's; its value the number of
//! filters and their ids, room for the most any key has (at least
//! [`MIN_LIST`]). Each group's code reads as many ids as its keys had at
//! build time; a key-only insert past that needs a rebuild, and says so.
//! A group of few keys is code instead ([`Options::inline`]): each key's
//! tests join its guards.
//!
//! ## Guards as a trie
//!
//! Guards are interned, each group's sorted commonest first, and groups
//! sorted by them: a run of groups that share a guard tests it once and
//! skips the whole run when it fails.
//!
//! ```no_run
//! use sluice_classifier::merged::Compiled;
//! use sluice_ir::{Filter, Pred, Size, Val};
//! use sluice_ebpf::{Mode, MultiFilter};
//! let port = |p| Compiled::new(Filter::new(Pred::eq(Val::load_abs(2, Size::Half), p), 1));
//! let (a, b) = (port(80), port(443));
//! // Both keys in the key map (not code), so that keys can be added.
//! let opts = sluice_ebpf::multi::Options { capacity: 8, inline: 0, ..Default::default() };
//! let mut m = MultiFilter::build(&[(0, &a), (1, &b)], Mode::TestRun, opts)?;
//! assert_ne!(m.run(&[0, 0, 0, 80], 4)?, 0);
//! assert_eq!(m.run(&[0, 0, 0, 81], 4)?, 0);
//! m.insert_keyed(2, 0, &[81])?; // a map update, no reload
//! assert_ne!(m.run(&[0, 0, 0, 81], 4)?, 0);
//! assert_eq!(&m.counts()?[..3], &[1, 0, 1]);
//! # Ok::<(), sluice_ebpf::Error>(())
//! ```

use crate::chain::{count_of, Chain};
use crate::emit::{
    alu32, alu64, alu64x, shared_ids, slot_off, Emitter, Label, SKB_CB0, SKB_CB1, SKB_LEN,
    SKB_PKT_TYPE, SKB_VLAN_PRESENT, SLOTS, XDP_DATA, XDP_DROP, XDP_PASS,
};
use crate::insn::{op, Insn};
use crate::{sys, Error, Mode};
use sluice_classifier::merged::{Compiled, FieldRead, GuardView, Merged, Slot, Whole};
use sluice_classifier::path::Test;
use sluice_classifier::table::hash;
use sluice_ir::{CmpOp, Filter, Pred, Size, Val};
use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

pub(crate) const MAP_HASH: u32 = 1;
pub(crate) const MAP_PROG_ARRAY: u32 = 3;
pub(crate) const MAP_PERCPU_ARRAY: u32 = 6;
pub(crate) use crate::emit::HELPER_MAP_LOOKUP;
const HELPER_TAIL_CALL: i32 = 12;

/// Programs in one chain: the first and the kernel's 33 tail calls.
pub const MAX_PROGRAMS: usize = 34;
/// Filter ids a key's map value holds at least (room for key-only
/// inserts that share a key).
pub const MIN_LIST: usize = 4;
/// The most key words of a group (a longer key is refused).
pub const MAX_KEY_WORDS: usize = 16;

/// Stack slots the program keeps for itself (the emitter's temporaries
/// and shared values come after them).
pub(crate) const SEQ: usize = 0;
pub(crate) const SEQ_PTR: usize = 1;
pub(crate) const VAL_PTR: usize = 2;
pub(crate) const CNT_KEY: usize = 3;
/// Slots 4..=12: the key buffer, the group and 16 words from
/// `slot_off(KEY_BUF)` up.
pub(crate) const KEY_BUF: usize = 12;
pub(crate) const RESERVED: usize = 13;

/// Bytes of one counter entry: `{count, seen}`.
pub(crate) const COUNTER: usize = 16;

/// How a program set is built.
///
/// ```
/// assert!(sluice_ebpf::multi::Options::default().budget > 1000);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Instructions per program before the next program of the chain
    /// starts.
    pub budget: usize,
    /// Room for filter ids: counters for ids below this (at least one past
    /// the largest id given); a key-only insert of a larger id needs a
    /// rebuild.
    pub capacity: u32,
    /// The program's return value when a filter matches (a socket
    /// filter's: bytes to keep).
    pub accept: u32,
    /// Groups of at most this many keys are code, not entries of the key
    /// map: their key tests join their guards, shared with other groups'
    /// and searched, with no lookup; but a key-only change to such a
    /// group needs a rebuild. 0: every group in the key map.
    pub inline: usize,
    /// [`Mode::Socket`] only: frames the host receives pass uncounted
    /// (the program returns 0) and only the frames it sends are judged,
    /// for a socket beside an XDP chain that judges what arrives.
    pub outgoing_only: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            budget: 8_000,
            capacity: 0,
            accept: u32::MAX,
            inline: 2,
            outgoing_only: false,
        }
    }
}

/// A group in the key map: key width in words, ids its code reads.
#[derive(Debug)]
struct GroupMap {
    width: usize,
    list: usize,
    /// A group of one key, compiled into the code (its key tests are
    /// guards): its filters. Its keys change only by a rebuild.
    inline: Option<Vec<Vec<u32>>>,
}

/// The filter set loaded into the kernel: programs, maps and the merged
/// classifier they mirror. Everything is closed on drop.
///
/// ```no_run
/// use sluice_classifier::merged::Compiled;
/// let all = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
/// let m = sluice_ebpf::MultiFilter::build(&[(0, &all)], sluice_ebpf::Mode::TestRun, Default::default())?;
/// m.run(&[0; 60], 60)?;
/// assert_eq!(m.counts()?[0], 1);
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
#[derive(Debug)]
pub struct MultiFilter {
    merged: Merged,
    chain: Chain,
    groups: HashMap<u32, GroupMap>,
    keys: OwnedFd,
    /// Key words in the key map (after the group's number), ids a value
    /// holds.
    key_words: usize,
    list: usize,
    counters: OwnedFd,
    capacity: u32,
    cpus: usize,
}

/// The number of possible CPUs (a per-CPU map has one value for each).
pub(crate) fn possible_cpus() -> Result<usize, Error> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .map_err(|e| Error::Map("reading /sys/devices/system/cpu/possible", e))?;
    let mut n = 0;
    for part in text.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.parse().unwrap_or(0), b.parse().unwrap_or(0));
        n = n.max(b + 1).max(a + 1);
    }
    Ok(n.max(1))
}

/// The IR value a field of a group is read as.
fn field_val(read: FieldRead<'_>) -> Val {
    match read {
        FieldRead::Value(v) => v.clone(),
        FieldRead::Direct(d) => {
            let size = match d.size() {
                1 => Size::Byte,
                2 => Size::Half,
                _ => Size::Word,
            };
            match d.header() {
                None => Val::load_abs(d.offset(), size),
                Some(h) => Val::load(Val::ip_hdr_len(h), d.offset(), size),
            }
        }
    }
}

/// A guard as a predicate that holds exactly when the guard does.
fn guard_pred(g: &GuardView<'_>) -> Pred {
    let (p, truth) = match g {
        GuardView::Field {
            read, test, truth, ..
        } => {
            let v = field_val(*read);
            let p = match test {
                Test::Eq(k) => Pred::eq(v, *k),
                Test::Gt(k) => Pred::cmp(CmpOp::Gt, v, Val::Const(*k)),
                Test::Ge(k) => Pred::cmp(CmpOp::Ge, v, Val::Const(*k)),
                Test::Set(k) => Pred::cmp(CmpOp::Set, v, Val::Const(*k)),
                Test::In(s) => Pred::In {
                    val: v,
                    keys: s.sorted().clone(),
                },
            };
            (p, *truth)
        }
        GuardView::Pred { pred, truth } => ((*pred).clone(), *truth),
    };
    if truth {
        p
    } else {
        Pred::not(p)
    }
}

pub(crate) fn ld_map(e: &mut Emitter, reg: u8, fd: &OwnedFd) {
    e.ld_map(reg, fd.as_raw_fd());
}
pub(crate) fn ldx(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    Insn::new(op::LDX | op::MEM | size, dst, src, off, 0)
}
pub(crate) fn stx(size: u8, dst: u8, off: i16, src: u8) -> Insn {
    Insn::new(op::STX | op::MEM | size, dst, src, off, 0)
}
pub(crate) fn call(helper: i32) -> Insn {
    Insn::new(op::JMP | op::CALL, 0, 0, 0, helper)
}
pub(crate) fn exit() -> Insn {
    Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0)
}

/// What one program of the chain is made of: a group (its number, which
/// of its keys for a group in the code, and its guards as interned ids,
/// the commonest first), or a filter run whole.
enum Unit {
    Group(u32, u32, Vec<usize>),
    Whole(u32, Arc<Filter>),
}

/// The maps a program refers to.
struct Maps<'a> {
    counters: &'a OwnedFd,
    chain: &'a OwnedFd,
    groups: &'a HashMap<u32, GroupMap>,
    keys: &'a OwnedFd,
    key_words: usize,
    capacity: u32,
    accept: u32,
    mode: Mode,
    outgoing_only: bool,
}

impl Maps<'_> {
    /// One group once its guards hold: its key, the lookup, its filters
    /// counted.
    fn group(
        &self,
        e: &mut Emitter,
        m: &Merged,
        g: u32,
        key: u32,
        skip: Label,
    ) -> Result<(), Error> {
        let view = m.group_view(g).expect("a group of the classifier");
        let gm = &self.groups[&g];
        e.reject = skip;
        if let Some(keys) = &gm.inline {
            for id in &keys[key as usize] {
                e.put(alu32(op::MOV, 0, *id));
                count(e, self.counters, 0);
            }
            return Ok(());
        }
        let buf = slot_off(KEY_BUF);
        let fields = view.key_fields();
        let width = fields.len();
        for (i, (_, read)) in fields.into_iter().enumerate() {
            e.val(&field_val(read))?;
            e.put(stx(op::W, 10, buf + 4 * (i as i16 + 1), 0));
        }
        e.put(Insn::new(op::ST | op::MEM | op::W, 10, 0, buf, g as i32));
        for i in width..self.key_words {
            e.put(Insn::new(
                op::ST | op::MEM | op::W,
                10,
                0,
                buf + 4 * (i as i16 + 1),
                0,
            ));
        }
        ld_map(e, 1, self.keys);
        e.put(alu64x(op::MOV, 2, 10));
        e.put(alu64(op::ADD, 2, buf as i32));
        e.put(call(HELPER_MAP_LOOKUP));
        e.jump(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, 0), skip);
        e.put(stx(op::DW, 10, slot_off(VAL_PTR), 0));
        for i in 0..gm.list {
            e.put(ldx(op::DW, 1, 10, slot_off(VAL_PTR)));
            e.put(ldx(op::W, 2, 1, 0));
            e.jump(
                Insn::new(op::JMP32 | op::JLT | op::K, 2, 0, 0, i as i32 + 1),
                skip,
            );
            e.put(ldx(op::W, 3, 1, 4 + 4 * i as i16));
            count(e, self.counters, 3);
        }
        Ok(())
    }

    /// Program `k` of the chain: the prologue, `units` (groups as a trie
    /// of their guards: a guard that several groups in a row share is
    /// tested once for them all), a tail call to program `k + 1` unless
    /// `last`, and the verdict.
    fn program(
        &self,
        m: &Merged,
        guards: &[Pred],
        units: &[Unit],
        k: usize,
        last: bool,
    ) -> Result<Vec<Insn>, Error> {
        let mode = self.mode;
        let (mut e, yes, no) = prologue(
            mode,
            self.outgoing_only,
            self.counters,
            self.capacity,
            self.accept,
            k,
            SLOTS,
        );
        header(&mut e, mode);
        let groups: Vec<(u32, u32, &[usize])> = units
            .iter()
            .filter_map(|u| match u {
                Unit::Group(g, k, gs) => Some((*g, *k, &gs[..])),
                Unit::Whole(..) => None,
            })
            .collect();
        self.trie(&mut e, m, guards, &groups, 0)?;
        for u in units {
            if let Unit::Whole(id, f) = u {
                let skip = e.label();
                lengths(&mut e, self.mode);
                whole(&mut e, self.counters, *id, f, skip)?;
                e.mark(skip);
            }
        }
        epilogue(&mut e, self.chain, k, last, yes, no);
        e.layout()
    }

    /// Instructions a guard takes, and a group's body.
    /// An emitter as a program's units see it, to measure them.
    fn sizer(&self) -> Emitter {
        let mut e = Emitter::for_link(self.mode, 1);
        e.used = RESERVED;
        e
    }
    fn guard_size(&self, guard: &Pred) -> Result<usize, Error> {
        let mut e = self.sizer();
        let (t, f) = (e.label(), e.label());
        e.cond(guard, t, f)?;
        Ok(e.emitted() + 4)
    }
    fn body_size(&self, m: &Merged, g: u32, key: u32) -> Result<usize, Error> {
        let mut e = self.sizer();
        let skip = e.label();
        self.group(&mut e, m, g, key, skip)?;
        Ok(e.emitted() + 4)
    }
    fn whole_size(&self, id: u32, f: &Filter) -> Result<usize, Error> {
        let mut e = self.sizer();
        let skip = e.label();
        whole(&mut e, self.counters, id, f, skip)?;
        Ok(e.emitted() + 4)
    }
}

/// Count the filter whose counter is entry `reg` of `counters` (r1-r5 and r0 are lost).
pub(crate) fn count(e: &mut Emitter, counters: &OwnedFd, reg: u8) {
    let done = e.label();
    e.put(stx(op::W, 10, slot_off(CNT_KEY), reg));
    ld_map(e, 1, counters);
    e.put(alu64x(op::MOV, 2, 10));
    e.put(alu64(op::ADD, 2, slot_off(CNT_KEY) as i32));
    e.put(call(HELPER_MAP_LOOKUP));
    e.jump(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, 0), done);
    e.put(ldx(op::DW, 1, 10, slot_off(SEQ)));
    e.put(ldx(op::DW, 2, 0, 8));
    e.jump(Insn::new(op::JMP | op::JEQ | op::X, 2, 1, 0, 0), done);
    e.put(stx(op::DW, 0, 8, 1));
    e.put(ldx(op::DW, 2, 0, 0));
    e.put(alu64(op::ADD, 2, 1));
    e.put(stx(op::DW, 0, 0, 2));
    e.put(ldx(op::DW, 3, 10, slot_off(SEQ_PTR)));
    e.put(stx(op::DW, 3, 0, 1));
    e.mark(done);
}

/// A filter run whole: its code, and counter `id` when it accepts.
pub(crate) fn whole(
    e: &mut Emitter,
    counters: &OwnedFd,
    id: u32,
    f: &Filter,
    skip: Label,
) -> Result<(), Error> {
    if f.accept == 0 {
        return Ok(());
    }
    e.reject = skip;
    let base = e.used;
    let mut ids = Vec::new();
    shared_ids(&f.pred, &mut ids);
    for sid in ids {
        if e.used + 8 >= e.slots() {
            break;
        }
        e.shared.insert(sid, e.used);
        e.put(Insn::new(
            op::ST | op::MEM | op::DW,
            10,
            0,
            slot_off(e.used),
            0,
        ));
        e.used += 1;
    }
    let hit = e.label();
    e.cond(&f.pred, hit, skip)?;
    e.mark(hit);
    e.put(alu32(op::MOV, 0, id));
    count(e, counters, 0);
    e.shared.clear();
    e.used = base;
    Ok(())
}

/// The start of program `k` of a chain (`k == 0` starts a run: a new
/// sequence number): the frame's checks for the mode, the run's sequence
/// number into [`SEQ`] and its entry's address into [`SEQ_PTR`]; units
/// may use slots from [`RESERVED`], the frame has `frame` slots. A
/// program that reads the frame goes on with [`header`].
/// Returns the emitter and what the program returns when some filter
/// matched and when none did.
pub(crate) fn prologue(
    mode: Mode,
    outgoing_only: bool,
    counters: &OwnedFd,
    capacity: u32,
    accept: u32,
    k: usize,
    frame: usize,
) -> (Emitter, u32, u32) {
    let mut e = Emitter::for_link(mode, 1);
    e.set_frame(frame);
    // What the program returns when some filter matched, and when
    // none did (XDP: pass the frame on, or drop it).
    let (yes, no) = match mode {
        Mode::Xdp => (XDP_PASS, XDP_DROP),
        _ => (accept, 0),
    };
    // Every jump stays within its part of the program: the kernel
    // expands instructions (LD_ABS, map lookups) as it verifies, and a
    // jump across the whole program would outgrow 16 bits.
    e.put(alu64x(op::MOV, 6, 1));
    if mode == Mode::Socket && outgoing_only {
        // Received frames are the XDP chain's: not counted here.
        const PACKET_OUTGOING: i32 = 4;
        let sent = e.label();
        e.put(ldx(op::W, 0, 6, SKB_PKT_TYPE));
        e.jump(
            Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, PACKET_OUTGOING),
            sent,
        );
        e.put(alu32(op::MOV, 0, 0));
        e.put(exit());
        e.mark(sent);
    }
    if mode == Mode::Socket {
        // As for one filter: a frame whose VLAN tag the kernel took
        // off passes uncounted; user space judges it.
        let (tagged, untagged) = (e.label(), e.label());
        e.put(ldx(op::W, 0, 6, SKB_VLAN_PRESENT));
        e.jump(Insn::new(op::JMP | op::JSET | op::K, 0, 0, 0, 1), tagged);
        e.goto(untagged);
        e.mark(tagged);
        e.put(alu32(op::MOV, 0, u32::MAX));
        e.put(exit());
        e.mark(untagged);
    }
    // The run's sequence number (a new one in the first program).
    array_entry(&mut e, counters, capacity, mode);
    e.put(stx(op::DW, 10, slot_off(SEQ_PTR), 0));
    e.put(ldx(op::DW, 1, 0, 8));
    if k == 0 {
        e.put(alu64(op::ADD, 1, 1));
        e.put(stx(op::DW, 0, 8, 1));
    }
    e.put(stx(op::DW, 10, slot_off(SEQ), 1));
    e.used = RESERVED;
    (e, yes, no)
}

/// The address of entry `key` of array map `map` into r0 (r1-r5 are
/// lost): an array's entries all exist, so the program ends where the
/// lookup fails only for the verifier (XDP passing the frame on).
pub(crate) fn array_entry(e: &mut Emitter, map: &OwnedFd, key: u32, mode: Mode) {
    let fail = if mode == Mode::Xdp { XDP_PASS } else { 0 };
    e.array_entry(map.as_raw_fd(), key, CNT_KEY, fail);
}

/// After the prologue of a program that reads the frame: the lengths and
/// the copy of the frame's first bytes, once per program.
pub(crate) fn header(e: &mut Emitter, mode: Mode) {
    lengths(e, mode);
    e.fill_header();
}

/// The end of program `k` of a chain: the tail call to the next unless
/// `last`, and the verdict: `yes` when the run's sequence number was set
/// as its `matched` word (some filter counted), else `no`.
pub(crate) fn epilogue(e: &mut Emitter, chain: &OwnedFd, k: usize, last: bool, yes: u32, no: u32) {
    let (zero, all) = (e.label(), e.label());
    if !last {
        e.put(alu64x(op::MOV, 1, 6));
        ld_map(e, 2, chain);
        e.put(alu32(op::MOV, 3, k as u32 + 1));
        e.put(call(HELPER_TAIL_CALL));
    }
    e.put(ldx(op::DW, 1, 10, slot_off(SEQ_PTR)));
    e.put(ldx(op::DW, 2, 1, 0));
    e.put(ldx(op::DW, 3, 10, slot_off(SEQ)));
    e.jump(Insn::new(op::JMP | op::JEQ | op::X, 2, 3, 0, 0), all);
    e.mark(zero);
    e.put(alu32(op::MOV, 0, no));
    e.put(exit());
    e.mark(all);
    e.put(alu32(op::MOV, 0, yes));
    e.put(exit());
}

/// The captured length into r7, the wire length into r8, r9 cleared: at
/// the start of every unit, so that what the verifier learnt of them in
/// the units before (the bounds of each check) is forgotten and its
/// states at each unit's start are the same: it prunes there instead of
/// following every combination of earlier branches.
pub(crate) fn lengths(e: &mut Emitter, mode: Mode) {
    match mode {
        Mode::TestRun => {
            e.put(ldx(op::W, 7, 6, SKB_CB0));
            e.put(ldx(op::W, 8, 6, SKB_CB1));
        }
        Mode::Socket => {
            e.put(ldx(op::W, 7, 6, SKB_LEN));
            e.put(alu64x(op::MOV, 8, 7));
        }
        Mode::Xdp => {
            // The whole frame is there: both lengths are data_end - data.
            e.put(ldx(op::W, 7, 6, XDP_DATA.1));
            e.put(ldx(op::W, 1, 6, XDP_DATA.0));
            e.put(alu64x(op::SUB, 7, 1));
            e.put(alu64x(op::MOV, 8, 7));
        }
    }
    e.put(alu64(op::MOV, 9, 0));
}

pub(crate) fn map_err(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| match e.raw_os_error() {
        Some(libc::EPERM) => Error::NotPermitted(e),
        _ => Error::Map(what, e),
    }
}

impl MultiFilter {
    /// Merge `filters` (id, prepared filter) as the merged classifier
    /// does, and load them as one chain of programs with its maps.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::False, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(3, &f)], sluice_ebpf::Mode::Socket, Default::default())?;
    /// assert_eq!(m.programs(), 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn build(
        filters: &[(u32, &Compiled)],
        mode: Mode,
        opts: Options,
    ) -> Result<MultiFilter, Error> {
        let mut merged = Merged::default();
        let mut by_id = HashMap::new();
        for (id, c) in filters {
            merged.insert(*id, c, 0);
            by_id.insert(*id, *c);
        }
        let capacity = filters
            .iter()
            .map(|(id, _)| id + 1)
            .max()
            .unwrap_or(0)
            .max(opts.capacity);
        if capacity >= u32::MAX - 1 {
            return Err(Error::Unsupported(format!(
                "filter id {} is too large for the counter map",
                capacity - 1
            )));
        }
        let cpus = possible_cpus()?;
        let counters = sys::map_create(
            MAP_PERCPU_ARRAY,
            4,
            COUNTER as u32,
            capacity + 1,
            "sluice_counts",
        )
        .map_err(map_err("creating the counter map"))?;
        let chain = Chain::new(mode)?;
        let mut groups = HashMap::new();
        let mut units = Vec::new();
        let mut interned: HashMap<Pred, usize> = HashMap::new();
        let (mut key_words, mut most, mut entries) = (0, MIN_LIST, 0);
        for view in merged.group_views() {
            let width = view.key_fields().len();
            if width > MAX_KEY_WORDS {
                return Err(Error::Unsupported(format!(
                    "a group of filters has a key of {width} words; the eBPF engine takes at most {MAX_KEY_WORDS}"
                )));
            }
            // A table of many keys reads room for keys that come to be
            // shared; a small group only what it has (code per group).
            let mut list = if view.len() >= 16 { MIN_LIST } else { 1 };
            for (_, slot) in view.keys() {
                let mut n = 0;
                merged.each_slot_filter(view.id(), slot, |_, _| n += 1);
                list = list.max(n);
            }
            key_words = key_words.max(width);
            most = most.max(list);
            entries += view.len();
            let preds: Vec<Pred> = view.guards().iter().map(guard_pred).collect();
            let mut intern = |ps: Vec<Pred>| -> Vec<usize> {
                ps.into_iter()
                    .map(|p| {
                        let n = interned.len();
                        *interned.entry(p).or_insert(n)
                    })
                    .collect()
            };
            if !view.is_empty() && view.len() <= opts.inline {
                // A small group: each key's tests are guards, shared in
                // the trie with other groups', and no lookup.
                let mut keys = Vec::new();
                for (j, (key, slot)) in view.keys().enumerate() {
                    let mut ps = preds.clone();
                    for ((_, read), k) in view.key_fields().into_iter().zip(key) {
                        ps.push(Pred::eq(field_val(read), *k));
                    }
                    let mut ids = Vec::new();
                    merged.each_slot_filter(view.id(), slot, |f, _| ids.push(f));
                    keys.push(ids);
                    units.push(Unit::Group(view.id(), j as u32, intern(ps)));
                }
                groups.insert(
                    view.id(),
                    GroupMap {
                        width,
                        list,
                        inline: Some(keys),
                    },
                );
            } else {
                groups.insert(
                    view.id(),
                    GroupMap {
                        width,
                        list,
                        inline: None,
                    },
                );
                units.push(Unit::Group(view.id(), u32::MAX, intern(preds)));
            }
        }
        let guards = order_guards(interned, &mut units);
        let keys = sys::map_create(
            MAP_HASH,
            4 * (1 + key_words) as u32,
            4 * (1 + most) as u32,
            // Room for twice the keys, and for a key-only insert of
            // every id up to the capacity.
            (2 * entries + (capacity as usize).saturating_sub(filters.len()) + 1024)
                .min(u32::MAX as usize / 2) as u32,
            "sluice_keys",
        )
        .map_err(map_err("creating the key map"))?;
        for (id, _, whole) in merged.whole_filters() {
            let f = match whole {
                Whole::Ir(f) => f.clone(),
                Whole::Bpf(_) => Arc::new(by_id[&id].filter().clone()),
            };
            units.push(Unit::Whole(id, f));
        }
        let mut me = MultiFilter {
            merged,
            chain,
            groups,
            keys,
            key_words,
            list: most,
            counters,
            capacity,
            cpus,
        };
        // The groups' keys, before any packet can come.
        let keys: Vec<(u32, Vec<u32>)> = me
            .merged
            .group_views()
            .flat_map(|v| {
                let g = v.id();
                v.keys()
                    .map(move |(k, _)| (g, k.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (g, k) in keys {
            if me.groups[&g].inline.is_none() {
                me.sync(g, &k)?;
            }
        }
        let maps = Maps {
            counters: &me.counters,
            chain: me.chain.array(),
            groups: &me.groups,
            keys: &me.keys,
            key_words: me.key_words,
            capacity,
            accept: opts.accept,
            mode,
            outgoing_only: opts.outgoing_only,
        };
        // Units into programs by their size: a group costs its body and
        // the guards it does not share with the group before it.
        let guard_sizes: Vec<usize> = guards
            .iter()
            .map(|g| maps.guard_size(g))
            .collect::<Result<_, _>>()?;
        let mut chunks: Vec<std::ops::Range<usize>> = Vec::new();
        let (mut start, mut size, mut prev): (usize, usize, &[usize]) = (0, 0, &[]);
        for (i, u) in units.iter().enumerate() {
            // (its cost after the unit before, its cost first in a program)
            let (cost, alone) = match u {
                Unit::Group(g, k, gs) => {
                    let shared = gs.iter().zip(prev).take_while(|(a, b)| a == b).count();
                    prev = gs;
                    let body = maps.body_size(&me.merged, *g, *k)?;
                    let guard =
                        |from: usize| gs[from..].iter().map(|&x| guard_sizes[x]).sum::<usize>();
                    (body + guard(shared), body + guard(0))
                }
                Unit::Whole(id, f) => {
                    let c = maps.whole_size(*id, f)?;
                    (c, c)
                }
            };
            if i > start && size + cost > opts.budget {
                chunks.push(start..i);
                (start, size) = (i, alone);
            } else {
                size += cost;
            }
        }
        chunks.push(start..units.len());
        if chunks.len() > MAX_PROGRAMS {
            let fit = chunks[MAX_PROGRAMS - 1].end;
            return Err(Error::Unsupported(format!(
                "the filter set needs {} chained eBPF programs of {} instructions, the kernel allows {MAX_PROGRAMS} ({fit} of {} groups and filters run whole fit)",
                chunks.len(),
                opts.budget,
                units.len()
            )));
        }
        let mut progs = Vec::new();
        for (k, r) in chunks.iter().enumerate() {
            let last = k + 1 == chunks.len();
            progs.push(maps.program(&me.merged, &guards, &units[r.clone()], k, last)?);
        }
        me.chain.load(&progs)?;
        Ok(me)
    }

    /// Make group `g`'s map say what the classifier says of `key`.
    fn sync(&self, g: u32, key: &[u32]) -> Result<(), Error> {
        if self.groups.get(&g).is_some_and(|gm| gm.inline.is_some()) {
            return Err(Error::Unsupported(
                "the change is to a group of few keys compiled into the eBPF program (Options::inline): it must be built again"
                    .into(),
            ));
        }
        let Some(gm) = self.groups.get(&g) else {
            return Err(Error::Unsupported(
                "the change makes a new group of filters: the eBPF program must be built again"
                    .into(),
            ));
        };
        debug_assert_eq!(gm.width, key.len());
        let view = self.merged.group_view(g).expect("a group");
        let mut kb = Vec::with_capacity(4 * (1 + self.key_words));
        kb.extend(g.to_ne_bytes());
        for i in 0..self.key_words {
            kb.extend(key.get(i).copied().unwrap_or(0).to_ne_bytes());
        }
        match view.table().entry_hashed(key, hash(key)) {
            Some((value, datum)) => {
                let mut ids = Vec::new();
                self.merged
                    .each_slot_filter(g, Slot { value, datum }, |f, _| ids.push(f));
                if ids.len() > gm.list {
                    return Err(Error::Unsupported(format!(
                        "{} filters now share one key, the program reads {}: the eBPF program must be built again",
                        ids.len(),
                        gm.list
                    )));
                }
                let mut v = Vec::with_capacity(4 * (1 + self.list));
                v.extend((ids.len() as u32).to_ne_bytes());
                for i in 0..self.list {
                    v.extend(ids.get(i).copied().unwrap_or(u32::MAX).to_ne_bytes());
                }
                sys::map_update(&self.keys, &kb, &v).map_err(map_err("updating a key"))
            }
            None => match sys::map_delete(&self.keys, &kb) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r.map_err(map_err("removing a key")),
            },
        }
    }

    /// An error unless filter `id`'s keys are all in the key map.
    fn changeable(&self, id: u32) -> Result<(), Error> {
        let mut inline = false;
        self.merged.keys_of(id, |g, _| {
            inline |= self.groups.get(&g).is_some_and(|gm| gm.inline.is_some())
        });
        match inline {
            true => Err(Error::Unsupported(format!(
                "filter {id} is in a group of few keys compiled into the eBPF program (Options::inline): it must be built again"
            ))),
            false => Ok(()),
        }
    }

    /// Insert filter `id` as a copy of filter `like` with another key (the
    /// constants of its equality tests, in order: as
    /// [`Merged::insert_keyed`]): map updates only, no reload. Its counter
    /// starts at zero.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let f = Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1));
    /// let opts = sluice_ebpf::multi::Options { capacity: 10, ..Default::default() };
    /// let mut m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, opts)?;
    /// m.insert_keyed(5, 0, &[8])?;
    /// assert_ne!(m.run(&[8], 1)?, 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn insert_keyed(&mut self, id: u32, like: u32, key: &[u32]) -> Result<(), Error> {
        if id >= self.capacity {
            return Err(Error::Unsupported(format!(
                "filter id {id} is past the counter map's {} entries: the eBPF program must be built again",
                self.capacity
            )));
        }
        self.changeable(like)?;
        // Room for one more filter under the key?
        let mut full = None;
        self.merged.keys_of(like, |g, _| {
            let (Some(gm), Some(view)) = (self.groups.get(&g), self.merged.group_view(g)) else {
                return;
            };
            if let Some((value, datum)) = view.table().entry_hashed(key, hash(key)) {
                let mut n = 0;
                self.merged
                    .each_slot_filter(g, Slot { value, datum }, |_, _| n += 1);
                if n + 1 > gm.list {
                    full = Some(gm.list);
                }
            }
        });
        if let Some(list) = full {
            return Err(Error::Unsupported(format!(
                "{} filters would share one key, the program reads {list}: the eBPF program must be built again",
                list + 1
            )));
        }
        if !self.merged.insert_keyed(id, like, key, 0) {
            return Err(Error::Unsupported(format!(
                "filter {like} cannot be copied by key (or filter {id} exists)"
            )));
        }
        let zero = vec![0u8; COUNTER * self.cpus];
        sys::map_update(&self.counters, &id.to_ne_bytes(), &zero)
            .map_err(map_err("clearing a counter"))?;
        let mut keys = Vec::new();
        self.merged.keys_of(id, |g, k| keys.push((g, k.to_vec())));
        for (g, k) in keys {
            self.sync(g, &k)?;
        }
        Ok(())
    }

    /// Remove a filter that was inserted by key or is in a group's table:
    /// map updates only. A filter that runs whole needs a rebuild.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// use sluice_ir::{Filter, Pred, Size, Val};
    /// let f = Compiled::new(Filter::new(Pred::eq(Val::load_abs(0, Size::Byte), 7), 1));
    /// let mut m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// m.remove(0)?;
    /// assert_eq!(m.run(&[7], 1)?, 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn remove(&mut self, id: u32) -> Result<(), Error> {
        let mut keys = Vec::new();
        self.merged.keys_of(id, |g, k| keys.push((g, k.to_vec())));
        if keys.is_empty() && self.merged.whole_filters().any(|(f, _, _)| f == id) {
            return Err(Error::Unsupported(format!(
                "filter {id} runs whole in the eBPF program: it must be built again"
            )));
        }
        self.changeable(id)?;
        self.merged.remove(id);
        for (g, k) in keys {
            self.sync(g, &k)?;
        }
        Ok(())
    }

    /// Run a packet through the chain in the kernel (`BPF_PROG_TEST_RUN`;
    /// [`Mode::TestRun`], or [`Mode::Xdp`] for frames of 14 bytes or more,
    /// whose wire length is their length): nonzero when some filter
    /// matched (XDP: `XDP_PASS`, else `XDP_DROP`), and every matching
    /// filter counted.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_ne!(m.run(&[], 0)?, 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> Result<u32, Error> {
        Ok(self.bench(pkt, wirelen, 1)?.0)
    }

    /// Run a packet `repeat` times: (the result, the kernel's mean ns per
    /// run). Each run counts.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// m.bench(&[0; 60], 60, 10)?;
    /// assert_eq!(m.counts()?[0], 10);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn bench(&self, pkt: &[u8], wirelen: u32, repeat: u32) -> Result<(u32, u32), Error> {
        self.chain.bench(pkt, wirelen, repeat)
    }

    /// Attach the chain ([`Mode::Xdp`]) to interface `iface` as its XDP
    /// program: native where the driver has XDP, generic otherwise. The
    /// link detaches it when dropped or when the process ends.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::Xdp, Default::default())?;
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
    /// let m = sluice_ebpf::MultiFilter::build(&[(1, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_eq!(m.counts()?, vec![0, 0]);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn counts(&self) -> Result<Vec<u64>, Error> {
        (0..self.capacity)
            .map(|id| count_of(&self.counters, id, self.cpus))
            .collect()
    }

    /// The first program's descriptor (for `SO_ATTACH_BPF`).
    ///
    /// ```no_run
    /// use std::os::fd::AsRawFd;
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::Socket, Default::default())?;
    /// assert!(m.fd().as_raw_fd() >= 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn fd(&self) -> &OwnedFd {
        self.chain.fd()
    }

    /// Programs in the chain.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
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
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert!(m.instructions()[0] > 0);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn instructions(&self) -> &[usize] {
        self.chain.instructions()
    }

    /// The kernel's ids of the chain's programs and of its maps (to check
    /// that they are gone once it is dropped: [`crate::system_ids`]).
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// let (progs, maps) = m.kernel_ids()?;
    /// assert_eq!((progs.len(), maps.len()), (1, 3));
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn kernel_ids(&self) -> Result<(Vec<u32>, Vec<u32>), Error> {
        let id = |fd: &OwnedFd| sys::object_id(fd).map_err(map_err("reading an object's id"));
        let (progs, array) = self.chain.kernel_ids()?;
        Ok((progs, vec![id(&self.counters)?, array, id(&self.keys)?]))
    }

    /// The kernel's run-time statistics of the chain (its first program,
    /// whose runs take in the programs it tail-calls): (total ns, runs).
    /// Zero unless statistics are on ([`crate::enable_stats`]).
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// let _on = sluice_ebpf::enable_stats()?;
    /// m.bench(&[0; 60], 60, 100)?;
    /// assert_eq!(m.run_stats()?.1, 100);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn run_stats(&self) -> Result<(u64, u64), Error> {
        self.chain.run_stats()
    }

    /// The merged classifier the maps mirror.
    ///
    /// ```no_run
    /// use sluice_classifier::merged::Compiled;
    /// let f = Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1));
    /// let m = sluice_ebpf::MultiFilter::build(&[(0, &f)], sluice_ebpf::Mode::TestRun, Default::default())?;
    /// assert_eq!(m.merged().len(), 1);
    /// # Ok::<(), sluice_ebpf::Error>(())
    /// ```
    pub fn merged(&self) -> &Merged {
        &self.merged
    }
}

#[path = "multi_trie.rs"]
mod trie;
use trie::order_guards;

#[cfg(test)]
#[path = "multi_tests.rs"]
pub(crate) mod tests;
