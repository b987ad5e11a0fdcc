//! The IR lowered to eBPF instructions.
//!
//! Rule: every IR abort (a load past the captured bytes, a division by
//! zero) jumps to the one reject exit (`return 0`, or `XDP_DROP`); every
//! packet load is preceded by an explicit check of `address + size`
//! against the captured length held in r7, and is then made from the
//! socket filter's copy of the frame's first bytes on its stack (one
//! `bpf_skb_load_bytes` per program) or with `BPF_LD_IND`/`BPF_LD_ABS`
//! past them, which the kernel bounds-checks once more itself, or by
//! direct packet access (test runs and XDP), bounded and compared with
//! `data_end` as the verifier requires (see the crate doc for why).
//!
//! Registers: r6 the context (`struct __sk_buff *` or `struct xdp_md *`),
//! r7 the captured length, r8 the wire length, r9 the start of a
//! `protochain` walk; r0 holds each value computed, r1 the left operand.
//! Loads clobber r0-r5, so a left operand waits in a stack slot while the
//! right one is computed.

use crate::insn::{op, Insn};
use crate::{Error, Mode};
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Size, Val};
use std::collections::HashMap;
use std::os::fd::RawFd;

/// 8-byte stack slots available (the 512-byte stack, less 8 bytes the
/// kernel takes for `may_goto`'s counter).
pub(crate) const SLOTS: usize = 63;
/// `struct __sk_buff` offsets: `len`, `cb[0]`, `cb[1]`.
pub(crate) const SKB_LEN: i16 = 0;
pub(crate) const SKB_CB0: i16 = 48;
pub(crate) const SKB_CB1: i16 = 52;
/// `struct __sk_buff` offset of `vlan_present`.
pub(crate) const SKB_VLAN_PRESENT: i16 = 20;
/// `struct __sk_buff` offsets of `data` and `data_end`.
const SKB_DATA: (i16, i16) = (76, 80);
/// `struct xdp_md` offsets of `data` and `data_end`.
pub(crate) const XDP_DATA: (i16, i16) = (0, 4);
/// Direct packet access takes offsets the verifier can bound below this
/// (an offset plus the bytes read stays within its `MAX_PACKET_OFF`,
/// 0xffff); no packet these programs see is that long.
const DIRECT_MAX: u32 = 0xfff0;
/// The farthest a jump goes with its 16-bit offset (see
/// [`Emitter::layout`]): an eighth of the offset's reach.
const FAR: i64 = 4096;
/// Bytes of a frame copied to the stack once per program for its loads
/// (54: Ethernet, IPv4 and TCP headers without options, the IPv6
/// addresses), in the last [`HEADER_SLOTS`] slots (from `HEADER_OFF`
/// up), 2 bytes in (`HEADER_SHIFT`) so that the IP header's words are
/// aligned as the verifier wants every stack access. A load at a
/// constant offset that the copy holds at an aligned place reads it; any
/// other reads the packet (`LD_ABS`/`LD_IND`, or directly): a load at a
/// computed offset would need a branch each way, and the verifier
/// follows every branch of a path (a chain's programs then ran past its
/// 8,192 pending jumps). Test runs and XDP copy a frame of 54 bytes or
/// more with direct reads, a shorter one with the kernel's helper, as
/// socket filters copy every frame.
const HEADER_SLOTS: usize = 7;
const HEADER_SHIFT: i16 = 2;
/// The helpers that copy bytes of a socket buffer, of an XDP frame.
const HELPER_SKB_LOAD_BYTES: i32 = 26;
/// `bpf_map_lookup_elem`.
pub(crate) const HELPER_MAP_LOOKUP: i32 = 1;
const HELPER_XDP_LOAD_BYTES: i32 = 189;
/// XDP's verdicts.
pub(crate) const XDP_DROP: u32 = 1;
pub(crate) const XDP_PASS: u32 = 2;
/// `struct __sk_buff` offsets of `pkt_type`, `protocol` and `ifindex`.
pub(crate) const SKB_PKT_TYPE: i16 = 4;
const SKB_PROTOCOL: i16 = 16;
const SKB_IFINDEX: i16 = 40;

/// A cooked (Linux SLL) header as a socket filter sees its frame: the
/// kernel hands the program the frame from the network header on, so
/// packet offsets are `header` bytes less, and the header's fields that
/// `struct __sk_buff` holds are read from there: (offset, size, the
/// field's `__sk_buff` offset, whether it is a big-endian 16-bit value).
#[derive(Clone, Copy)]
struct Cooked {
    header: u32,
    fields: &'static [(u32, Size, i16, bool)],
}

/// The cooked header of link type `linktype` (113: SLL, 276: SLL2).
fn cooked(linktype: u16) -> Option<Cooked> {
    match linktype {
        276 => Some(Cooked {
            header: 20,
            fields: &[
                (0, Size::Half, SKB_PROTOCOL, true),
                (4, Size::Word, SKB_IFINDEX, false),
                (10, Size::Byte, SKB_PKT_TYPE, false),
            ],
        }),
        113 => Some(Cooked {
            header: 16,
            fields: &[
                (0, Size::Half, SKB_PKT_TYPE, false),
                (14, Size::Half, SKB_PROTOCOL, true),
            ],
        }),
        _ => None,
    }
}

pub(crate) type Label = usize;

pub(crate) enum Item {
    Insn(Insn),
    /// A jump to a label (its `off` is filled in at layout).
    Jump(Insn, Label),
    /// The address of the subprogram at a label into a register (a
    /// two-instruction `BPF_PSEUDO_FUNC` load), for `bpf_loop`.
    Func(u8, Label),
    Label(Label),
}

mod header;

pub(crate) struct Emitter {
    items: Vec<Item>,
    labels: usize,
    /// Where an abort goes (the one `return 0` of a single filter; the
    /// next unit of a program of many filters).
    pub(crate) reject: Label,
    /// Shared value id -> its slot: 0 while not computed, else
    /// `1 << 32 | value`.
    pub(crate) shared: HashMap<usize, usize>,
    /// Slots in use (shared ones first, then temporaries as a stack).
    pub(crate) used: usize,
    /// Direct packet access: the context offsets of `data` and `data_end`
    /// (none: `LD_ABS`/`LD_IND`).
    direct: Option<(i16, i16)>,
    /// A socket filter for a cooked link: its header.
    cooked: Option<Cooked>,
    /// The frame's first bytes ([`Emitter::header_slots`]) are copied to the stack once
    /// per program ([`Emitter::fill_header`]) by this helper: constant
    /// loads within them read the copy, the rest read the packet.
    header: Option<i32>,
    /// Where a load the program cannot make goes: the accept exit (a
    /// pre-filter may pass more than the filter, never less).
    unknown: Label,
    /// Stack slots of the program's frame (the header copy at its end).
    frame: usize,
    /// A socket filter's copy of the frame in a map value instead of the
    /// stack ([`Emitter::set_frame_copy`]).
    copy: Option<FrameCopy>,
}

/// A socket filter's copy of the frame's first bytes in a per-CPU array
/// map's value: its map, the stack slot that holds the value's address,
/// a slot of its own for loads past it, and its length.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FrameCopy {
    pub(crate) map: i32,
    pub(crate) slot: usize,
    /// A slot for a load past the copy (by `bpf_skb_load_bytes`).
    pub(crate) tmp: usize,
    pub(crate) bytes: u32,
}

pub(crate) fn alu32(o: u8, dst: u8, imm: u32) -> Insn {
    Insn::new(op::ALU | o | op::K, dst, 0, 0, imm as i32)
}
fn alu32x(o: u8, dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU | o | op::X, dst, src, 0, 0)
}
pub(crate) fn alu64(o: u8, dst: u8, imm: i32) -> Insn {
    Insn::new(op::ALU64 | o | op::K, dst, 0, 0, imm)
}
pub(crate) fn alu64x(o: u8, dst: u8, src: u8) -> Insn {
    Insn::new(op::ALU64 | o | op::X, dst, src, 0, 0)
}
pub(crate) fn slot_off(slot: usize) -> i16 {
    -8 * (slot as i16 + 1)
}
fn bin_code(b: BinOp) -> u8 {
    match b {
        BinOp::Add => op::ADD,
        BinOp::Sub => op::SUB,
        BinOp::Mul => op::MUL,
        BinOp::Div => op::DIV,
        BinOp::Mod => op::MOD,
        BinOp::And => op::AND,
        BinOp::Or => op::OR,
        BinOp::Xor => op::XOR,
        BinOp::Shl => op::LSH,
        BinOp::Shr => op::RSH,
    }
}
fn cmp_code(c: CmpOp) -> u8 {
    match c {
        CmpOp::Eq => op::JEQ,
        CmpOp::Gt => op::JGT,
        CmpOp::Ge => op::JGE,
        CmpOp::Set => op::JSET,
    }
}
fn size_code(s: Size) -> u8 {
    match s {
        Size::Byte => op::B,
        Size::Half => op::H,
        Size::Word => op::W,
    }
}

/// Collect the ids of shared values, each once, inner ones too.
pub(crate) fn shared_ids_val(v: &Val, out: &mut Vec<usize>) {
    match v {
        Val::Const(_) | Val::Len => {}
        Val::Load { base, .. } => shared_ids_val(base, out),
        Val::Bin(_, a, b) => {
            shared_ids_val(a, out);
            shared_ids_val(b, out);
        }
        Val::Neg(a) => shared_ids_val(a, out),
        Val::Shared(s) => {
            if !out.contains(&s.id()) {
                out.push(s.id());
                shared_ids_val(s.val(), out);
            }
        }
    }
}
pub(crate) fn shared_ids(p: &Pred, out: &mut Vec<usize>) {
    match p {
        Pred::True | Pred::False => {}
        Pred::Cmp { lhs, rhs, .. } => {
            shared_ids_val(lhs, out);
            shared_ids_val(rhs, out);
        }
        Pred::Not(q) => shared_ids(q, out),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().for_each(|q| shared_ids(q, out)),
        Pred::In { val, .. } => shared_ids_val(val, out),
        Pred::ProtoChain { start, .. } => shared_ids_val(start, out),
    }
}

/// Lower a filter to eBPF instructions for `mode`.
///
/// ```
/// use sluice_ir::{Filter, Pred, Size, Val};
/// // Past the header the socket filter copies to its stack: LD_ABS.
/// let f = Filter::new(Pred::eq(Val::load_abs(90, Size::Half), 0x800), 262144);
/// let insns = sluice_ebpf::lower(&f, sluice_ebpf::Mode::Socket)?;
/// assert!(sluice_ebpf::dump(&insns).contains("skb[90]"));
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
pub fn lower(f: &Filter, mode: Mode) -> Result<Vec<Insn>, Error> {
    lower_for_link(f, mode, 1)
}

/// Lower a filter of a capture of link type `linktype` for `mode`. A
/// socket filter ([`Mode::Socket`]) on a cooked link (113, 276: the `any`
/// device) sees the frame from the network header on: its loads move by
/// the cooked header's length, the header's protocol, packet type and
/// interface index come from the socket buffer, and a load of what the
/// socket buffer does not hold (the hardware type, the address) passes
/// the packet for user space to judge. Other link types and modes are
/// lowered as [`lower`] does.
///
/// ```
/// use sluice_ir::{Filter, Pred, Size, Val};
/// // ip, on the any device (cooked v2: the protocol at offset 0).
/// let f = Filter::new(Pred::eq(Val::load_abs(0, Size::Half), 0x800), 262144);
/// let insns = sluice_ebpf::lower_for_link(&f, sluice_ebpf::Mode::Socket, 276)?;
/// assert!(sluice_ebpf::dump(&insns).contains("r0 = *(u32 *)(r6 +16)"));
/// # Ok::<(), sluice_ebpf::Error>(())
/// ```
pub fn lower_for_link(f: &Filter, mode: Mode, linktype: u16) -> Result<Vec<Insn>, Error> {
    let mut e = Emitter::for_link(mode, linktype);
    let accept = e.label();
    e.unknown = accept;
    // Prologue: the context, the lengths, the shared values' slots cleared.
    e.put(alu64x(op::MOV, 6, 1));
    match mode {
        Mode::TestRun => {
            e.put(Insn::new(op::LDX | op::MEM | op::W, 7, 6, SKB_CB0, 0));
            e.put(Insn::new(op::LDX | op::MEM | op::W, 8, 6, SKB_CB1, 0));
        }
        Mode::Socket => {
            e.put(Insn::new(op::LDX | op::MEM | op::W, 7, 6, SKB_LEN, 0));
            if let Some(c) = e.cooked {
                // The frame user space sees has the cooked header too.
                e.put(alu64(op::ADD, 7, c.header as i32));
            }
            e.put(alu64x(op::MOV, 8, 7));
            // A frame whose VLAN tag the kernel took off is not the frame
            // the filter means (libpcap puts the tag back): it passes, and
            // user space judges it.
            e.put(Insn::new(
                op::LDX | op::MEM | op::W,
                0,
                6,
                SKB_VLAN_PRESENT,
                0,
            ));
            e.jump(Insn::new(op::JMP | op::JSET | op::K, 0, 0, 0, 1), accept);
        }
        Mode::Xdp => {
            // The frame is all there: both lengths are data_end - data
            // (a difference of packet pointers, which the verifier allows
            // a privileged loader as an unknown number).
            e.put(Insn::new(op::LDX | op::MEM | op::W, 7, 6, XDP_DATA.1, 0));
            e.put(Insn::new(op::LDX | op::MEM | op::W, 1, 6, XDP_DATA.0, 0));
            e.put(alu64x(op::SUB, 7, 1));
            e.put(alu64x(op::MOV, 8, 7));
        }
    }
    e.fill_header();
    let mut ids = Vec::new();
    shared_ids(&f.pred, &mut ids);
    // Shared values get slots while at least 8 remain for temporaries;
    // the rest are computed at each use (same value, more work).
    for id in ids {
        if e.used + 8 >= e.slots() {
            break;
        }
        e.shared.insert(id, e.used);
        e.put(Insn::new(
            op::ST | op::MEM | op::DW,
            10,
            0,
            slot_off(e.used),
            0,
        ));
        e.used += 1;
    }
    e.cond(&f.pred, accept, e.reject)?;
    let (yes, no) = match mode {
        Mode::Xdp => (XDP_PASS, XDP_DROP),
        _ => (f.accept, 0),
    };
    e.mark(accept);
    e.put(alu32(op::MOV, 0, yes));
    e.put(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
    e.mark(e.reject);
    e.put(alu32(op::MOV, 0, no));
    e.put(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
    e.layout()
}

impl Emitter {
    /// An empty program with its reject label made, reading packets with
    /// `LD_ABS`/`LD_IND` (any program type that takes a socket buffer).
    pub(crate) fn new() -> Emitter {
        let mut e = Emitter {
            items: Vec::new(),
            labels: 0,
            reject: 0,
            shared: HashMap::new(),
            used: 0,
            direct: None,
            cooked: None,
            header: None,
            unknown: 0,
            frame: SLOTS,
            copy: None,
        };
        e.reject = e.label();
        e.unknown = e.reject;
        e
    }

    /// An empty program reading packets as `mode` on link type `linktype`
    /// does best: directly for test runs and XDP, with `LD_ABS` for socket
    /// filters, moved past a cooked header for those on cooked links.
    pub(crate) fn for_link(mode: Mode, linktype: u16) -> Emitter {
        let mut e = Emitter::new();
        e.direct = match mode {
            Mode::TestRun => Some(SKB_DATA),
            Mode::Xdp => Some(XDP_DATA),
            Mode::Socket => None,
        };
        e.cooked = cooked(linktype).filter(|_| mode == Mode::Socket);
        e.header = match mode {
            Mode::Socket if e.cooked.is_some() => None,
            Mode::Socket | Mode::TestRun => Some(HELPER_SKB_LOAD_BYTES),
            Mode::Xdp => Some(HELPER_XDP_LOAD_BYTES),
        };
        e
    }

    /// Slots for shared values and temporaries (the header copy takes
    /// the last ones).
    pub(crate) fn slots(&self) -> usize {
        match self.header {
            Some(_) => self.frame - self.header_slots(),
            None => self.frame,
        }
    }

    /// Use `slots` stack slots (at most [`SLOTS`]), before anything is
    /// emitted: a program that calls a subprogram leaves it room, since
    /// the frames of a call share 512 bytes, each rounded up to 32.
    pub(crate) fn set_frame(&mut self, slots: usize) {
        debug_assert!(slots <= SLOTS && self.items.is_empty());
        self.frame = slots;
    }

    /// `ld_imm64` of map `fd` into `reg`.
    pub(crate) fn ld_map(&mut self, reg: u8, fd: RawFd) {
        self.put(Insn::new(op::LD | op::DW, reg, 1, 0, fd));
        self.put(Insn::new(0, 0, 0, 0, 0));
    }

    /// The address of entry `key` of array map `map` into r0, the key
    /// written to stack slot `slot` (r1-r5 are lost): an array's entries
    /// all exist, so the program returns `fail` where the lookup fails
    /// only for the verifier.
    pub(crate) fn array_entry(&mut self, map: RawFd, key: u32, slot: usize, fail: u32) {
        self.put(Insn::new(
            op::ST | op::MEM | op::W,
            10,
            0,
            slot_off(slot),
            key as i32,
        ));
        self.ld_map(1, map);
        self.put(alu64x(op::MOV, 2, 10));
        self.put(alu64(op::ADD, 2, slot_off(slot) as i32));
        self.put(Insn::new(op::JMP | op::CALL, 0, 0, 0, HELPER_MAP_LOOKUP));
        let found = self.label();
        self.jump(Insn::new(op::JMP | op::JNE | op::K, 0, 0, 0, 0), found);
        self.put(alu32(op::MOV, 0, fail));
        self.put(Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0));
        self.mark(found);
    }

    /// Instructions emitted so far, labels counted too (an upper bound).
    pub(crate) fn emitted(&self) -> usize {
        self.items.len()
    }

    pub(crate) fn label(&mut self) -> Label {
        self.labels += 1;
        self.labels - 1
    }
    pub(crate) fn put(&mut self, i: Insn) {
        self.items.push(Item::Insn(i));
    }
    pub(crate) fn jump(&mut self, i: Insn, to: Label) {
        self.items.push(Item::Jump(i, to));
    }
    /// The address of the subprogram that starts at `to` (after the
    /// program's last exit) into `reg`, for a helper that calls it.
    pub(crate) fn func_addr(&mut self, reg: u8, to: Label) {
        self.items.push(Item::Func(reg, to));
    }
    pub(crate) fn goto(&mut self, to: Label) {
        self.jump(Insn::new(op::JMP | op::JA, 0, 0, 0, 0), to);
    }
    pub(crate) fn mark(&mut self, l: Label) {
        self.items.push(Item::Label(l));
    }

    /// A temporary slot, released by [`Emitter::pop`] in stack order.
    pub(crate) fn push(&mut self) -> Result<usize, Error> {
        if self.used >= self.slots() {
            return Err(Error::TooDeep);
        }
        self.used += 1;
        Ok(self.used - 1)
    }
    pub(crate) fn pop(&mut self) {
        self.used -= 1;
    }

    /// Jumps to labels that follow at once are dropped; then the labels
    /// become offsets.
    pub(crate) fn layout(self) -> Result<Vec<Insn>, Error> {
        // The verifier refuses unreachable instructions: keep only what
        // a path from the start reaches.
        let mut where_label = vec![0; self.labels];
        for (i, it) in self.items.iter().enumerate() {
            if let Item::Label(l) = it {
                where_label[*l] = i;
            }
        }
        let mut reached = vec![false; self.items.len()];
        let mut work = vec![0];
        while let Some(mut i) = work.pop() {
            while i < self.items.len() && !reached[i] {
                reached[i] = true;
                match &self.items[i] {
                    Item::Insn(insn) if insn.code == op::JMP | op::EXIT => break,
                    Item::Jump(insn, to) => {
                        work.push(where_label[*to]);
                        if insn.code == op::JMP | op::JA {
                            break;
                        }
                    }
                    Item::Func(_, to) => work.push(where_label[*to]),
                    _ => {}
                }
                i += 1;
            }
        }
        let items: Vec<Item> = self
            .items
            .into_iter()
            .zip(reached)
            .filter(|(it, r)| *r || matches!(it, Item::Label(_)))
            .map(|(it, _)| it)
            .collect();
        let mut keep = vec![true; items.len()];
        for (i, it) in items.iter().enumerate() {
            if let Item::Jump(insn, to) = it {
                if insn.code == op::JMP | op::JA {
                    let falls = items[i + 1..]
                        .iter()
                        .take_while(|x| matches!(x, Item::Label(_)))
                        .any(|x| matches!(x, Item::Label(l) if l == to));
                    keep[i] = !falls;
                }
            }
        }
        // Jumps farther than FAR go by a 32-bit `gotol` (a conditional
        // one by its condition over it): the kernel grows a program as it
        // verifies (LD_ABS and map lookups expand), and a 16-bit offset
        // must still hold the grown distance.
        let mut far = vec![false; items.len()];
        let mut at = vec![usize::MAX; self.labels];
        loop {
            let mut pc = 0;
            let mut ends = vec![0usize; items.len()];
            for (i, it) in items.iter().enumerate() {
                match it {
                    Item::Label(l) => at[*l] = pc,
                    Item::Func(..) => {
                        pc += 2;
                        ends[i] = pc;
                    }
                    Item::Jump(insn, _) if keep[i] && far[i] => {
                        pc += if insn.code == op::JMP | op::JA { 1 } else { 3 };
                        ends[i] = pc;
                    }
                    _ if keep[i] => {
                        pc += 1;
                        ends[i] = pc;
                    }
                    _ => {}
                }
            }
            let mut grew = false;
            for (i, it) in items.iter().enumerate() {
                if let Item::Jump(_, to) = it {
                    let delta = at[*to] as i64 - ends[i] as i64;
                    if keep[i] && !far[i] && delta.abs() > FAR {
                        far[i] = true;
                        grew = true;
                    }
                }
            }
            if !grew {
                break;
            }
        }
        let mut out = Vec::new();
        for (i, it) in items.into_iter().enumerate() {
            match it {
                Item::Insn(insn) if keep[i] => out.push(insn),
                Item::Func(reg, to) => {
                    let delta = at[to] as i64 - out.len() as i64 - 1;
                    let imm = i32::try_from(delta).map_err(|_| Error::TooLarge(out.len()))?;
                    // src 4: BPF_PSEUDO_FUNC, imm the subprogram's offset.
                    out.push(Insn::new(op::LD | op::DW, reg, 4, 0, imm));
                    out.push(Insn::new(0, 0, 0, 0, 0));
                }
                Item::Jump(mut insn, to) if keep[i] => {
                    if far[i] {
                        if insn.code != op::JMP | op::JA {
                            // if cond: over the next one to the gotol.
                            insn.off = 1;
                            out.push(insn);
                            out.push(Insn::new(op::JMP | op::JA, 0, 0, 1, 0));
                        }
                        let delta = at[to] as i64 - out.len() as i64 - 1;
                        let imm = i32::try_from(delta).map_err(|_| Error::TooLarge(out.len()))?;
                        out.push(Insn::new(op::JMP32 | op::JA, 0, 0, 0, imm));
                    } else {
                        let delta = at[to] as i64 - out.len() as i64 - 1;
                        insn.off = i16::try_from(delta).map_err(|_| Error::TooLarge(out.len()))?;
                        out.push(insn);
                    }
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Jump to `t` when `p` holds, to `f` when not, to the reject label
    /// when it aborts.
    pub(crate) fn cond(&mut self, p: &Pred, t: Label, f: Label) -> Result<(), Error> {
        match p {
            Pred::True => self.goto(t),
            Pred::False => self.goto(f),
            Pred::Cmp { op: c, lhs, rhs } => {
                let code = op::JMP32 | cmp_code(*c);
                if let Val::Const(k) = rhs {
                    self.val(lhs)?;
                    self.jump(Insn::new(code | op::K, 0, 0, 0, *k as i32), t);
                } else {
                    self.val(lhs)?;
                    let s = self.push()?;
                    self.put(Insn::new(op::STX | op::MEM | op::DW, 10, 0, slot_off(s), 0));
                    self.val(rhs)?;
                    self.put(Insn::new(op::LDX | op::MEM | op::DW, 1, 10, slot_off(s), 0));
                    self.pop();
                    self.jump(Insn::new(code | op::X, 1, 0, 0, 0), t);
                }
                self.goto(f);
            }
            Pred::Not(q) => self.cond(q, f, t)?,
            Pred::And(ps) | Pred::Or(ps) => {
                let is_and = matches!(p, Pred::And(_));
                for (i, q) in ps.iter().enumerate() {
                    if i + 1 == ps.len() {
                        self.cond(q, t, f)?;
                    } else {
                        let next = self.label();
                        if is_and {
                            self.cond(q, next, f)?;
                        } else {
                            self.cond(q, t, next)?;
                        }
                        self.mark(next);
                    }
                }
                if ps.is_empty() {
                    self.goto(if is_and { t } else { f });
                }
            }
            Pred::In { val, keys } => {
                self.val(val)?;
                self.search(keys, t, f);
            }
            Pred::ProtoChain { v6, start, proto } => {
                // Inside the loop, loads stay `LD_IND`: a helper's unknown
                // result and its check in every round make the verifier's
                // history of jumps too long.
                let copy = self.copy.take();
                let r = self.protochain(*v6, start, *proto, t, f);
                self.copy = copy;
                r?
            }
        }
        Ok(())
    }

    /// Binary search of w0 among sorted `keys`.
    pub(crate) fn search(&mut self, keys: &[u32], t: Label, f: Label) {
        self.search_to(keys, &vec![t; keys.len()], f);
    }

    /// Binary search of w0 among sorted `keys`, to the label of the one it
    /// equals (`to`, one per key), else to `none`.
    pub(crate) fn search_to(&mut self, keys: &[u32], to: &[Label], none: Label) {
        if keys.len() <= 4 {
            for (k, l) in keys.iter().zip(to) {
                self.jump(
                    Insn::new(op::JMP32 | op::JEQ | op::K, 0, 0, 0, *k as i32),
                    *l,
                );
            }
            self.goto(none);
            return;
        }
        let mid = keys.len() / 2;
        let right = self.label();
        let k = keys[mid - 1];
        self.jump(
            Insn::new(op::JMP32 | op::JGT | op::K, 0, 0, 0, k as i32),
            right,
        );
        self.search_to(&keys[..mid], &to[..mid], none);
        self.mark(right);
        self.search_to(&keys[mid..], &to[mid..], none);
    }

    /// Compute `v` into w0 (zero-extended into r0).
    pub(crate) fn val(&mut self, v: &Val) -> Result<(), Error> {
        match v {
            Val::Const(k) => self.put(alu32(op::MOV, 0, *k)),
            Val::Len => self.put(alu64x(op::MOV, 0, 8)),
            Val::Load { base, offset, size } => {
                let n = size.bytes() as u64;
                if let Some(b) = base.known().filter(|_| !base.can_abort()) {
                    let end = b as u64 + *offset as u64 + n;
                    if end > i32::MAX as u64 {
                        // No packet is 2 GiB long: this load always aborts.
                        self.goto(self.reject);
                        return Ok(());
                    }
                    self.jump(
                        Insn::new(op::JMP | op::JLT | op::K, 7, 0, 0, end as i32),
                        self.reject,
                    );
                    let at = (end - n) as i32;
                    if let Some(c) = self.cooked {
                        self.cooked_load(c, at as u32, *size);
                        return Ok(());
                    }
                    if let Some(c) = self.copy.filter(|c| end <= c.bytes as u64) {
                        // Within the frame's copy (checked against the
                        // captured length above).
                        self.put(Insn::new(
                            op::LDX | op::MEM | op::DW,
                            1,
                            10,
                            slot_off(c.slot),
                            0,
                        ));
                        self.put(Insn::new(
                            op::LDX | op::MEM | size_code(*size),
                            0,
                            1,
                            at as i16,
                            0,
                        ));
                        self.swap_to_host(*size);
                        return Ok(());
                    }
                    if self.copy.is_none()
                        && self.header.is_some()
                        && end <= self.header_bytes() as u64
                        && (HEADER_SHIFT as i32 + at) % size.bytes() as i32 == 0
                    {
                        // Within the header copy, aligned (checked
                        // against the captured length above).
                        self.put(Insn::new(
                            op::LDX | op::MEM | size_code(*size),
                            0,
                            10,
                            self.header_off() + HEADER_SHIFT + at as i16,
                            0,
                        ));
                        self.swap_to_host(*size);
                        return Ok(());
                    }
                    if let Some(c) = self.copy {
                        // Past the copy: one helper call (the kernel
                        // expands each `LD_ABS` as it verifies).
                        self.put(alu32(op::MOV, 2, at as u32));
                        self.load_past_copy(c, *size);
                        return Ok(());
                    }
                    match self.direct {
                        None => {
                            self.put(Insn::new(op::LD | op::ABS | size_code(*size), 0, 0, 0, at))
                        }
                        Some((data, data_end)) if end <= i16::MAX as u64 => {
                            // A constant offset: the end compared with
                            // data_end, then one read.
                            self.put(Insn::new(op::LDX | op::MEM | op::W, 2, 6, data, 0));
                            self.put(Insn::new(op::LDX | op::MEM | op::W, 3, 6, data_end, 0));
                            self.put(alu64x(op::MOV, 1, 2));
                            self.put(alu64(op::ADD, 1, end as i32));
                            self.jump(
                                Insn::new(op::JMP | op::JGT | op::X, 1, 3, 0, 0),
                                self.reject,
                            );
                            self.put(Insn::new(
                                op::LDX | op::MEM | size_code(*size),
                                0,
                                2,
                                at as i16,
                                0,
                            ));
                            self.swap_to_host(*size);
                        }
                        Some(_) => {
                            self.put(alu32(op::MOV, 0, at as u32));
                            self.direct_at_r0(*size);
                        }
                    }
                } else {
                    self.val(base)?;
                    self.put(alu32(op::MOV, 1, *offset));
                    self.put(alu64x(op::ADD, 0, 1));
                    self.load_at_r0(*size);
                }
            }
            Val::Bin(o, a, b) => {
                let code = bin_code(*o);
                if let Val::Const(k) = **b {
                    self.val(a)?;
                    match o {
                        BinOp::Div | BinOp::Mod if k == 0 => self.goto(self.reject),
                        BinOp::Shl | BinOp::Shr if k >= 32 => self.put(alu32(op::MOV, 0, 0)),
                        _ => self.put(alu32(code, 0, k)),
                    }
                    return Ok(());
                }
                self.val(a)?;
                let s = self.push()?;
                self.put(Insn::new(op::STX | op::MEM | op::DW, 10, 0, slot_off(s), 0));
                self.val(b)?;
                self.put(Insn::new(op::LDX | op::MEM | op::DW, 1, 10, slot_off(s), 0));
                self.pop();
                match o {
                    BinOp::Div | BinOp::Mod => {
                        self.jump(
                            Insn::new(op::JMP32 | op::JEQ | op::K, 0, 0, 0, 0),
                            self.reject,
                        );
                        self.put(alu32x(code, 1, 0));
                    }
                    BinOp::Shl | BinOp::Shr => {
                        let (big, done) = (self.label(), self.label());
                        self.jump(Insn::new(op::JMP32 | op::JGT | op::K, 0, 0, 0, 31), big);
                        self.put(alu32x(code, 1, 0));
                        self.goto(done);
                        self.mark(big);
                        self.put(alu32(op::MOV, 1, 0));
                        self.mark(done);
                    }
                    _ => self.put(alu32x(code, 1, 0)),
                }
                self.put(alu32x(op::MOV, 0, 1));
            }
            Val::Neg(a) => {
                self.val(a)?;
                self.put(Insn::new(op::ALU | op::NEG, 0, 0, 0, 0));
            }
            Val::Shared(s) => match self.shared.get(&s.id()).copied() {
                None => self.val(s.val())?,
                Some(slot) => {
                    let (compute, done) = (self.label(), self.label());
                    self.put(Insn::new(
                        op::LDX | op::MEM | op::DW,
                        0,
                        10,
                        slot_off(slot),
                        0,
                    ));
                    self.jump(Insn::new(op::JMP | op::JEQ | op::K, 0, 0, 0, 0), compute);
                    self.put(alu32x(op::MOV, 0, 0));
                    self.goto(done);
                    self.mark(compute);
                    self.val(s.val())?;
                    self.put(alu64(op::MOV, 1, 1));
                    self.put(alu64(op::LSH, 1, 32));
                    self.put(alu64x(op::OR, 1, 0));
                    self.put(Insn::new(
                        op::STX | op::MEM | op::DW,
                        10,
                        1,
                        slot_off(slot),
                        0,
                    ));
                    self.mark(done);
                }
            },
        }
        Ok(())
    }

    /// Load `size` bytes at the address in r0 (a sum of two u32s, so
    /// below 2^33): checked against the captured length in r7, then
    /// loaded with `LD_IND`, which the kernel checks again.
    fn load_at_r0(&mut self, size: Size) {
        self.put(alu64x(op::MOV, 1, 0));
        self.put(alu64(op::ADD, 1, size.bytes() as i32));
        self.jump(
            Insn::new(op::JMP | op::JGT | op::X, 1, 7, 0, 0),
            self.reject,
        );
        self.load_ind(size, 0);
    }

    /// Load `size` bytes at r0 + `imm`, already checked against the
    /// captured length, into r0 in host order: `LD_IND`, or a direct
    /// packet read.
    fn load_ind(&mut self, size: Size, imm: i32) {
        if let Some(c) = self.cooked {
            // Inside the cooked header: not in the kernel's frame, so the
            // packet passes; past it, the kernel's offset is less.
            if imm != 0 {
                self.put(alu64(op::ADD, 0, imm));
            }
            self.jump(
                Insn::new(op::JMP | op::JLT | op::K, 0, 0, 0, c.header as i32),
                self.unknown,
            );
            self.put(alu64(op::SUB, 0, c.header as i32));
            self.put(Insn::new(op::LD | op::IND | size_code(size), 0, 0, 0, 0));
            return;
        }
        if let Some(c) = self.copy {
            // One helper call, not `LD_IND` (which the kernel expands as it
            // verifies, moving the whole program each time) nor a read of
            // the copy when the offset is within it (the verifier often
            // knows it is, and removes the other way as dead code: one
            // move of the whole program each).
            if imm != 0 {
                self.put(alu64(op::ADD, 0, imm));
            }
            self.put(alu64x(op::MOV, 2, 0));
            self.load_past_copy(c, size);
            return;
        }
        match self.direct {
            None => self.put(Insn::new(op::LD | op::IND | size_code(size), 0, 0, 0, imm)),
            Some(_) => {
                if imm != 0 {
                    self.put(alu64(op::ADD, 0, imm));
                }
                self.direct_at_r0(size);
            }
        }
    }

    /// Direct packet access: read `size` bytes at offset r0 (checked
    /// against the captured length in r7 already) from `data`, in the
    /// form the verifier proves safe (the offset bounded, the end compared
    /// with `data_end`), then from network order. r1-r3 are clobbered.
    fn direct_at_r0(&mut self, size: Size) {
        let Some((data, end)) = self.direct else {
            return;
        };
        self.jump(
            Insn::new(op::JMP | op::JGT | op::K, 0, 0, 0, DIRECT_MAX as i32),
            self.reject,
        );
        self.put(Insn::new(op::LDX | op::MEM | op::W, 2, 6, data, 0));
        self.put(Insn::new(op::LDX | op::MEM | op::W, 3, 6, end, 0));
        self.put(alu64x(op::ADD, 2, 0));
        self.put(alu64x(op::MOV, 1, 2));
        self.put(alu64(op::ADD, 1, size.bytes() as i32));
        self.jump(
            Insn::new(op::JMP | op::JGT | op::X, 1, 3, 0, 0),
            self.reject,
        );
        self.put(Insn::new(op::LDX | op::MEM | size_code(size), 0, 2, 0, 0));
        self.swap_to_host(size);
    }

    /// A socket filter's load of `size` bytes at `at` of a cooked frame
    /// (checked against the captured length already): past the header, at
    /// `at - header` in the kernel's frame; a header field the socket
    /// buffer holds, from there; anything else of the header passes the
    /// packet.
    fn cooked_load(&mut self, c: Cooked, at: u32, size: Size) {
        if at >= c.header {
            let k = (at - c.header) as i32;
            self.put(Insn::new(op::LD | op::ABS | size_code(size), 0, 0, 0, k));
            return;
        }
        match c.fields.iter().find(|f| f.0 == at && f.1 == size) {
            Some(&(_, _, field, be16)) => {
                self.put(Insn::new(op::LDX | op::MEM | op::W, 0, 6, field, 0));
                if be16 {
                    // skb->protocol holds the network-order bytes.
                    self.put(Insn::new(op::ALU | op::END | op::X, 0, 0, 0, 16));
                }
            }
            None => self.goto(self.unknown),
        }
    }

    /// r0, just read from the packet, from network order.
    fn swap_to_host(&mut self, size: Size) {
        if size != Size::Byte {
            let bits = size.bytes() as i32 * 8;
            self.put(Insn::new(op::ALU | op::END | op::X, 0, 0, 0, bits));
        }
    }

    /// libpcap's `protochain` as a loop the verifier accepts: a
    /// `may_goto` bounds it (the kernel's budget of iterations), the walk's
    /// offset is clamped below 2^31 so that the verifier's view of it
    /// converges (a clamped offset aborts at its next load either way).
    fn protochain(
        &mut self,
        v6: bool,
        start: &Val,
        proto: u8,
        t: Label,
        f: Label,
    ) -> Result<(), Error> {
        let next = self.push()?;
        let off = self.push()?;
        let store = |e: &mut Emitter, slot: usize| {
            e.put(Insn::new(
                op::STX | op::MEM | op::DW,
                10,
                0,
                slot_off(slot),
                0,
            ))
        };
        self.val(start)?;
        self.put(alu64x(op::MOV, 9, 0));
        if v6 {
            self.put(alu64(op::ADD, 0, 6));
            self.load_at_r0(Size::Byte);
            store(self, next);
            self.put(alu32(op::MOV, 0, 40));
            store(self, off);
        } else {
            self.load_at_r0(Size::Byte);
            self.put(alu32(op::AND, 0, 0xf));
            self.put(alu32(op::LSH, 0, 2));
            store(self, off);
            self.put(alu64x(op::MOV, 0, 9));
            self.put(alu64(op::ADD, 0, 9));
            self.load_at_r0(Size::Byte);
            store(self, next);
        }
        let (top, ext, ah) = (self.label(), self.label(), self.label());
        self.mark(top);
        self.jump(Insn::new(op::JMP | op::JCOND, 0, 0, 0, 0), self.reject);
        self.put(Insn::new(
            op::LDX | op::MEM | op::DW,
            0,
            10,
            slot_off(next),
            0,
        ));
        let jeq = |e: &mut Emitter, k: u32, to: Label| {
            e.jump(
                Insn::new(op::JMP32 | op::JEQ | op::K, 0, 0, 0, k as i32),
                to,
            )
        };
        jeq(self, proto as u32, t);
        jeq(self, 59, f);
        if v6 {
            for h in [0, 60, 43, 44] {
                jeq(self, h, ext);
            }
        }
        jeq(self, 51, ah);
        self.goto(f);
        // IPv6 extension header: off += (len + 1) * 8.
        for (l, ah_step) in [(ext, false), (ah, true)] {
            if !v6 && !ah_step {
                continue;
            }
            self.mark(l);
            // r0 = start + off; check start + off + 2 <= caplen.
            self.put(Insn::new(
                op::LDX | op::MEM | op::DW,
                0,
                10,
                slot_off(off),
                0,
            ));
            self.put(alu64x(op::ADD, 0, 9));
            self.put(alu64x(op::MOV, 1, 0));
            self.put(alu64(op::ADD, 1, 2));
            self.jump(
                Insn::new(op::JMP | op::JGT | op::X, 1, 7, 0, 0),
                self.reject,
            );
            // The length byte first (r0 is clobbered by each load).
            self.load_ind(Size::Byte, 1);
            if ah_step {
                self.put(alu32(op::ADD, 0, 2));
                self.put(alu32(op::LSH, 0, 2));
            } else {
                self.put(alu32(op::ADD, 0, 1));
                self.put(alu32(op::LSH, 0, 3));
                self.put(Insn::new(
                    op::LDX | op::MEM | op::DW,
                    1,
                    10,
                    slot_off(off),
                    0,
                ));
                self.put(alu32x(op::ADD, 0, 1));
                // Clamped past any packet these programs see, so a walk
                // that long still aborts at its next load. With direct
                // access the offset becomes a precise scalar (it is added
                // to a packet pointer), so a no-op mask then gives the
                // verifier a range that does not grow with each step, and
                // its view of the loop converges.
                let cap = match self.direct {
                    Some(_) => DIRECT_MAX + 1,
                    None => i32::MAX as u32,
                };
                let fine = self.label();
                self.jump(
                    Insn::new(op::JMP32 | op::JLT | op::K, 0, 0, 0, cap as i32),
                    fine,
                );
                self.put(alu32(op::MOV, 0, cap));
                self.mark(fine);
                if self.direct.is_some() {
                    self.put(alu32(op::AND, 0, 0x1_ffff));
                }
            }
            // The new offset waits in a slot while the next-header byte
            // is loaded from the old one.
            let new_off = self.push()?;
            store(self, new_off);
            self.put(Insn::new(
                op::LDX | op::MEM | op::DW,
                0,
                10,
                slot_off(off),
                0,
            ));
            self.put(alu64x(op::ADD, 0, 9));
            self.load_ind(Size::Byte, 0);
            store(self, next);
            self.put(Insn::new(
                op::LDX | op::MEM | op::DW,
                0,
                10,
                slot_off(new_off),
                0,
            ));
            store(self, off);
            self.pop();
            self.goto(top);
        }
        self.pop();
        self.pop();
        Ok(())
    }
}
