//! The least type information (BTF) a program with subprograms needs:
//! the kernel wants every subprogram named by a `BTF_KIND_FUNC` when a
//! program hands one to a helper (`bpf_loop`'s callback), so each gets
//! one, of a prototype with no arguments, static.
//!
//! Rule: only the BTF format's facts (linux/btf.h: the header, the type
//! records, the string section) are used; nothing here says more of a
//! subprogram than where it starts, which is all the verifier takes from
//! a static one.

use crate::insn::{op, Insn};

/// `BTF_KIND_FUNC` and `BTF_KIND_FUNC_PROTO`.
const KIND_FUNC: u32 = 12;
const KIND_FUNC_PROTO: u32 = 13;
/// `src` of a call within the program, and of a subprogram's address.
const PSEUDO_CALL: u8 = 1;
const PSEUDO_FUNC: u8 = 4;

/// The instructions where subprograms start (a call's or an address
/// load's target), sorted; empty for a program of one function.
fn starts(insns: &[Insn]) -> Vec<u32> {
    let mut out = Vec::new();
    for (pc, i) in insns.iter().enumerate() {
        let target = match (i.code, i.src) {
            (c, PSEUDO_CALL) if c == op::JMP | op::CALL => true,
            (c, PSEUDO_FUNC) if c == op::LD | op::DW => true,
            _ => false,
        };
        if target {
            out.push((pc as i64 + 1 + i.imm as i64) as u32);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// For a program with subprograms: a BTF blob with a function for the
/// program and one for each subprogram, and the `bpf_func_info` records
/// (start, type id) that name them.
pub(crate) fn subprograms(insns: &[Insn]) -> Option<(Vec<u8>, Vec<[u32; 2]>)> {
    let subs = starts(insns);
    if subs.is_empty() {
        return None;
    }
    // Strings: "" then "f" (every function may share one name).
    let strings = b"\0f\0";
    let mut types: Vec<u32> = Vec::new();
    // Type 1: a prototype of no arguments returning nothing.
    types.extend([0, KIND_FUNC_PROTO << 24, 0]);
    let mut info = Vec::new();
    for (k, start) in std::iter::once(0).chain(subs).enumerate() {
        // Type 2 + k: a static function of that prototype.
        types.extend([1, KIND_FUNC << 24, 1]);
        info.push([start, 2 + k as u32]);
    }
    let type_len = 4 * types.len() as u32;
    let mut blob = Vec::new();
    blob.extend(0xeb9f_u16.to_ne_bytes());
    blob.extend([1u8, 0]); // version 1, no flags
    blob.extend(24u32.to_ne_bytes()); // header length
    blob.extend(0u32.to_ne_bytes()); // types at 0
    blob.extend(type_len.to_ne_bytes());
    blob.extend(type_len.to_ne_bytes()); // strings after them
    blob.extend((strings.len() as u32).to_ne_bytes());
    for w in types {
        blob.extend(w.to_ne_bytes());
    }
    blob.extend(strings);
    Some((blob, info))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_subprogram_is_named_once() {
        let exit = Insn::new(op::JMP | op::EXIT, 0, 0, 0, 0);
        assert!(subprograms(&[exit]).is_none());
        // pc 0: the address of pc 4 (two instructions); pc 2: a call of
        // pc 4 too; pc 3: exit; pc 4: the subprogram.
        let prog = [
            Insn::new(op::LD | op::DW, 2, PSEUDO_FUNC, 0, 3),
            Insn::new(0, 0, 0, 0, 0),
            Insn::new(op::JMP | op::CALL, 0, PSEUDO_CALL, 0, 1),
            exit,
            exit,
        ];
        let (blob, info) = subprograms(&prog).unwrap();
        assert_eq!(info, vec![[0, 2], [4, 3]]);
        // Header, three types of three words, three bytes of strings.
        assert_eq!(blob.len(), 24 + 3 * 12 + 3);
    }
}
