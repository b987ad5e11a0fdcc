//! How batch functions find their packets.
//!
//! A batch function is a loop in generated code over an array of packet
//! descriptors: each names a packet's bytes, its captured length and its
//! wire length. The callers of the batch paths already hold such an array:
//! the `&[(&[u8], u32)]` they pass. When this build lays a `(&[u8], u32)`
//! out as a pointer word, a length word and the wire length (checked once
//! per process, [`DescLayout::get`]), the generated code reads the caller's
//! pairs where they are and nothing is copied. Otherwise each chunk of
//! packets is copied into an array of [`Desc`] first, whose layout is ours.
//!
//! The loop steps a descriptor pointer and a result pointer, so a packet
//! costs one add for each and one compare, and no multiply.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlags, Type, Value};
use cranelift_frontend::FunctionBuilder;
use std::mem::{offset_of, size_of, MaybeUninit};

/// Packets handed to a batch function per call: the merged classifier's
/// result words and copied descriptors live in arrays of this many on the
/// caller's stack.
pub(crate) const BATCH_CHUNK: usize = 64;

/// One packet of a batch in our own layout, for builds where the caller's
/// pairs cannot be read in place.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Desc {
    pub(crate) ptr: *const u8,
    pub(crate) caplen: u64,
    pub(crate) wirelen: u32,
}

/// A packet as the batch paths take it: its bytes and its wire length.
type Pair<'a> = (&'a [u8], u32);

/// Where a batch function finds a packet's fields: the byte offsets of the
/// pointer, the captured length (a pointer-sized word) and the wire length
/// (32 bits) in one descriptor, and the distance between descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DescLayout {
    pub(crate) stride: usize,
    pub(crate) ptr: usize,
    pub(crate) caplen: usize,
    pub(crate) wirelen: usize,
    /// The descriptors are the caller's `(&[u8], u32)` pairs themselves.
    pub(crate) in_place: bool,
}

impl DescLayout {
    /// The layout of [`Desc`].
    const OURS: DescLayout = DescLayout {
        stride: size_of::<Desc>(),
        ptr: offset_of!(Desc, ptr),
        caplen: offset_of!(Desc, caplen),
        wirelen: offset_of!(Desc, wirelen),
        in_place: false,
    };

    /// The layout every batch function of this process is generated for
    /// and called with: the caller's pairs, when a slice reference of this
    /// build is a pointer word and a length word (which Rust does not
    /// promise, so it is checked on a slice whose pointer and length
    /// differ); [`Desc`] otherwise.
    pub(crate) fn get() -> DescLayout {
        static LAYOUT: std::sync::OnceLock<DescLayout> = std::sync::OnceLock::new();
        *LAYOUT.get_or_init(|| Self::in_place().unwrap_or(Self::OURS))
    }

    /// The caller's layout, when it is one a batch function can read.
    fn in_place() -> Option<DescLayout> {
        const WORD: usize = size_of::<usize>();
        if size_of::<&[u8]>() != 2 * WORD || size_of::<usize>() != 8 {
            return None;
        }
        let bytes = [0u8; 3];
        let s: &[u8] = &bytes;
        // SAFETY: `&[u8]` is two words here (checked above, and `transmute`
        // checks the sizes again); any bit pattern is a valid pair of
        // integers. Only which word is which is read from them.
        let words: [usize; 2] = unsafe { std::mem::transmute::<&[u8], [usize; 2]>(s) };
        let (ptr, len) = match words {
            [p, 3] if p == s.as_ptr() as usize => (0, WORD),
            [3, p] if p == s.as_ptr() as usize => (WORD, 0),
            _ => return None,
        };
        let at = offset_of!(Pair<'static>, 0);
        Some(DescLayout {
            stride: size_of::<Pair<'static>>(),
            ptr: at + ptr,
            caplen: at + len,
            wirelen: offset_of!(Pair<'static>, 1),
            in_place: true,
        })
    }

    /// In generated code: the packet pointer, captured length (64 bits)
    /// and wire length (32 bits) of the descriptor at `d`. The descriptors
    /// do not change during a call, so the loads are read-only.
    pub(crate) fn read(
        &self,
        b: &mut FunctionBuilder,
        ptr: Type,
        d: Value,
    ) -> (Value, Value, Value) {
        let fl = MemFlags::trusted().with_readonly();
        let pkt = b.ins().load(ptr, fl, d, self.ptr as i32);
        // A `u64` in `Desc`; a `usize` in a pair, which `in_place` only
        // accepts at 64 bits.
        let caplen = b.ins().load(types::I64, fl, d, self.caplen as i32);
        let wirelen = b.ins().load(types::I32, fl, d, self.wirelen as i32);
        (pkt, caplen, wirelen)
    }

    /// In generated code: the end of `n` descriptors from `descs`.
    pub(crate) fn end(&self, b: &mut FunctionBuilder, ptr: Type, descs: Value, n: Value) -> Value {
        let span = b.ins().imul_imm(n, self.stride as i64);
        let span = if ptr == types::I64 {
            span
        } else {
            b.ins().ireduce(ptr, span)
        };
        b.ins().iadd(descs, span)
    }

    /// In generated code: a batch loop's step from the descriptor at `d`
    /// and the result word at `slot` to the next of each, and whether the
    /// next descriptor is before `stop`.
    pub(crate) fn step(
        &self,
        b: &mut FunctionBuilder,
        d: Value,
        slot: Value,
        stop: Value,
    ) -> (Value, Value, Value) {
        let d1 = b.ins().iadd_imm(d, self.stride as i64);
        let slot1 = b.ins().iadd_imm(slot, size_of::<u32>() as i64);
        let more = b.ins().icmp(IntCC::UnsignedLessThan, d1, stop);
        (d1, slot1, more)
    }
}

/// Scratch room for one chunk's copied descriptors.
pub(crate) type DescBuf = [MaybeUninit<Desc>; BATCH_CHUNK];

/// An empty [`DescBuf`].
pub(crate) const fn desc_buf() -> DescBuf {
    [const { MaybeUninit::uninit() }; BATCH_CHUNK]
}

/// The descriptor array of `pkts` (at most [`BATCH_CHUNK`] packets) in
/// [`DescLayout::get`]'s layout, for a batch function: the pairs
/// themselves, or their copies written into `buf`. Valid while `pkts` and
/// `buf` are.
pub(crate) fn descs(buf: &mut DescBuf, pkts: &[Pair<'_>]) -> *const u8 {
    debug_assert!(pkts.len() <= BATCH_CHUNK);
    if DescLayout::get().in_place {
        return pkts.as_ptr().cast();
    }
    for (d, (p, w)) in buf.iter_mut().zip(pkts) {
        d.write(Desc {
            ptr: p.as_ptr(),
            caplen: p.len() as u64,
            wirelen: *w,
        });
    }
    buf.as_ptr().cast()
}

/// Ask the CPU to bring the cache line holding `p` into the caches (a hint:
/// nothing happens on targets without a prefetch instruction here).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch hint never faults and changes nothing but the
    // caches, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the layout, the three fields read back from a descriptor
    /// array are each packet's.
    #[test]
    fn descriptors_name_each_packet() {
        let a = [1u8, 2, 3];
        let b = [4u8; 70];
        let pkts: [Pair<'_>; 3] = [(&a, 60), (&b, 1500), (&[], 0)];
        let mut buf = desc_buf();
        let d = descs(&mut buf, &pkts);
        let l = DescLayout::get();
        for (i, (p, w)) in pkts.iter().enumerate() {
            // SAFETY: `d` holds `pkts.len()` descriptors of `l.stride`
            // bytes; each field is read unaligned at its offset.
            let (ptr, caplen, wirelen) = unsafe {
                let x = d.add(i * l.stride);
                (
                    x.add(l.ptr).cast::<*const u8>().read_unaligned(),
                    x.add(l.caplen).cast::<u64>().read_unaligned(),
                    x.add(l.wirelen).cast::<u32>().read_unaligned(),
                )
            };
            assert_eq!((ptr, caplen, wirelen), (p.as_ptr(), p.len() as u64, *w));
        }
    }

    /// On the 64-bit hosts sluice is built for, the pairs are read in place.
    #[test]
    #[cfg(target_pointer_width = "64")]
    fn pairs_are_read_in_place() {
        assert!(DescLayout::get().in_place);
    }
}
