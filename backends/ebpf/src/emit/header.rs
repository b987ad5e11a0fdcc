//! The frame's first bytes, copied once per program: to the stack
//! (test runs, XDP, socket filters of one filter) or, for a socket
//! filter tree, to a map value ([`FrameCopy`]), and the loads past such a
//! copy.
//!
//! Rule: a copy is made once at a program's start, after r6 and r7 are
//! set; loads check the captured length in r7 before they read it.

use super::*;

impl Emitter {
    /// A socket filter copies the frame's first `copy.bytes` bytes into
    /// a map value (entry 0 of per-CPU array `copy.map`) instead of its
    /// stack, once per program: loads at constant offsets within them read
    /// the copy, every other load is one `bpf_skb_load_bytes` call
    /// ([`Emitter::load_past_copy`]; `LD_IND` inside `protochain`'s
    /// loop). The stack keeps no header.
    pub(crate) fn set_frame_copy(&mut self, copy: FrameCopy) {
        if self.header.is_some() && self.direct.is_none() {
            self.copy = Some(copy);
        }
    }

    /// Stack slots of the header copy: none where the frame is copied to
    /// a map value instead.
    pub(super) fn header_slots(&self) -> usize {
        match self.copy {
            Some(_) => 0,
            None => HEADER_SLOTS,
        }
    }

    pub(super) fn header_bytes(&self) -> u32 {
        (8 * self.header_slots() as u32).saturating_sub(HEADER_SHIFT as u32)
    }

    pub(super) fn header_off(&self) -> i16 {
        -8 * self.frame as i16
    }

    /// A socket filter's header copy: the frame's first bytes, up to
    /// the copy's length and the captured length in r7, copied to the
    /// stack by one helper call (r1-r5 are clobbered). Once at the start
    /// of each program, after r6 and r7 are set; nothing for other modes.
    pub(crate) fn fill_header(&mut self) {
        let Some(helper) = self.header else {
            return;
        };
        if let Some(c) = self.copy {
            self.fill_copy(c, helper);
            return;
        }
        let done = self.label();
        // The copy's deepest word written first: the verifier then has the
        // stack down to it on both ways below (its helper path wants the
        // stack it writes allocated already).
        self.put(Insn::new(
            op::ST | op::MEM | op::DW,
            10,
            0,
            self.header_off(),
            0,
        ));
        if let Some((data, end)) = self.direct {
            // The frame's bytes are in reach: read them, 2, 4, then 8 at a
            // time, to aligned places of the copy; a frame shorter than
            // the copy goes to the helper.
            let helper = self.label();
            self.put(Insn::new(op::LDX | op::MEM | op::W, 2, 6, data, 0));
            self.put(Insn::new(op::LDX | op::MEM | op::W, 3, 6, end, 0));
            self.put(alu64x(op::MOV, 1, 2));
            self.put(alu64(op::ADD, 1, self.header_bytes() as i32));
            self.jump(Insn::new(op::JMP | op::JGT | op::X, 1, 3, 0, 0), helper);
            let base = self.header_off() + HEADER_SHIFT;
            let mut at = 0i16;
            // (Words, not double words: a double word stored from a
            // register is a spilled register to the verifier, and its
            // states of the two ways would not match.)
            for size in [op::H]
                .into_iter()
                .chain(std::iter::repeat(op::W).take(2 * self.header_slots() - 1))
            {
                self.put(Insn::new(op::LDX | op::MEM | size, 1, 2, at, 0));
                self.put(Insn::new(op::STX | op::MEM | size, 10, 1, base + at, 0));
                at += match size {
                    op::H => 2,
                    op::W => 4,
                    _ => 8,
                };
            }
            debug_assert_eq!(at as u32, self.header_bytes());
            self.goto(done);
            self.mark(helper);
        }
        let bytes = self.header_bytes();
        let to = alu64(op::ADD, 3, (self.header_off() + HEADER_SHIFT) as i32);
        self.copy_by_helper(helper, bytes, &[alu64x(op::MOV, 3, 10), to]);
        self.mark(done);
    }

    /// The frame's first bytes, up to `bytes` and the captured length in
    /// r7 (none where that is 0), copied by `helper` to the address `to`
    /// puts in r3 (it may read r0). r1-r5 are clobbered.
    fn copy_by_helper(&mut self, helper: i32, bytes: u32, to: &[Insn]) {
        let (none, short) = (self.label(), self.label());
        self.put(alu64x(op::MOV, 4, 7));
        self.jump(Insn::new(op::JMP | op::JEQ | op::K, 4, 0, 0, 0), none);
        self.jump(
            Insn::new(op::JMP | op::JLE | op::K, 4, 0, 0, bytes as i32),
            short,
        );
        self.put(alu64(op::MOV, 4, bytes as i32));
        self.mark(short);
        for i in to {
            self.put(*i);
        }
        self.put(alu64x(op::MOV, 1, 6));
        self.put(alu64(op::MOV, 2, 0));
        self.put(Insn::new(op::JMP | op::CALL, 0, 0, 0, helper));
        self.mark(none);
    }

    /// [`Emitter::fill_header`] into the map value of `c`: its address
    /// into `c.slot`, then the frame's first bytes (up to the captured
    /// length in r7) by one helper call. r0-r5 are clobbered.
    fn fill_copy(&mut self, c: FrameCopy, helper: i32) {
        // (The lookup never fails: the frame would pass whole.)
        self.array_entry(c.map, 0, c.slot, u32::MAX);
        self.put(Insn::new(
            op::STX | op::MEM | op::DW,
            10,
            0,
            slot_off(c.slot),
            0,
        ));
        self.copy_by_helper(helper, c.bytes, &[alu64x(op::MOV, 3, 0)]);
    }

    /// `size` bytes at the offset in r2, past the frame's copy (checked
    /// against the captured length already), by `bpf_skb_load_bytes` into
    /// the copy's own slot, into r0 in host order; a failure is an abort.
    /// r1-r5 are clobbered, as by `LD_IND`.
    pub(super) fn load_past_copy(&mut self, c: FrameCopy, size: Size) {
        self.put(alu64x(op::MOV, 1, 6));
        self.put(alu64x(op::MOV, 3, 10));
        self.put(alu64(op::ADD, 3, slot_off(c.tmp) as i32));
        self.put(alu64(op::MOV, 4, size.bytes() as i32));
        self.put(Insn::new(
            op::JMP | op::CALL,
            0,
            0,
            0,
            HELPER_SKB_LOAD_BYTES,
        ));
        self.jump(
            Insn::new(op::JMP | op::JNE | op::K, 0, 0, 0, 0),
            self.reject,
        );
        self.put(Insn::new(
            op::LDX | op::MEM | size_code(size),
            0,
            10,
            slot_off(c.tmp),
            0,
        ));
        self.swap_to_host(size);
    }
}
