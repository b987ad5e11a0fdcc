//! An Ethernet filter for the kernel's view of a frame whose VLAN tag it
//! took off: the program, rewritten to read what it would read in the
//! frame with the tag put back at offset 12 (as libpcap and sluice show
//! it). Bytes before the tag are where they were, bytes after it are 4
//! earlier, the tag's own four bytes come from the kernel's ancillary
//! loads of the tag protocol and control fields, and the length is 4
//! more.
//!
//! The rule: the rewritten program accepts at least what the program
//! accepts on the re-tagged frame. A load whose address is only known at
//! run time and falls on the tag (or across its edges) accepts the
//! packet, and user space decides it; a constant load across the tag's
//! edges, or no free scratch word where one is needed, gives no
//! rewrite at all.

use sluice_bpf::op::*;
use sluice_bpf::Insn;

/// `SKF_AD_OFF`: where the kernel's ancillary loads start.
const AD: u32 = (-0x1000i32) as u32;
/// `SKF_AD_VLAN_TAG`: the tag control information the kernel took off.
const VLAN_TAG: u32 = AD + 44;
/// `SKF_AD_VLAN_TPID`: the tag protocol identifier it took off.
const VLAN_TPID: u32 = AD + 60;
/// Where the tag sits in the re-tagged frame.
const TAG_AT: u32 = 12;
const TAG_END: u32 = 16;
/// What a load the rewrite cannot place returns: accept, and let user
/// space judge the packet.
const PASS: u32 = 262_144;

/// One original instruction's replacement: instructions whose jumps are
/// relative within the piece, except `Orig` jumps, whose targets are the
/// original program's.
enum Piece {
    /// The original jump, to be retargeted.
    Jump(Insn),
    Code(Vec<Insn>),
}

fn ld_ad(k: u32) -> Insn {
    Insn::stmt(BPF_LD | BPF_W | BPF_ABS, k)
}

fn alu(op: u16, k: u32) -> Insn {
    Insn::stmt(BPF_ALU | op | BPF_K, k)
}

/// A constant-address load of `size` bytes at `k` in the re-tagged frame.
fn abs_load(i: Insn, size: u32, scratch: Option<u32>) -> Option<Vec<Insn>> {
    let k = i.k;
    if k >= AD || k.checked_add(size)? <= TAG_AT {
        return Some(vec![i]);
    }
    if k >= TAG_END {
        return Some(vec![Insn::stmt(i.code, k - 4)]);
    }
    Some(match (size, k) {
        (4, 12) => {
            let t = scratch?;
            vec![
                Insn::stmt(BPF_STX, t),
                ld_ad(VLAN_TAG),
                Insn::stmt(BPF_MISC | BPF_TAX, 0),
                ld_ad(VLAN_TPID),
                alu(BPF_LSH, 16),
                Insn::stmt(BPF_ALU | BPF_OR | BPF_X, 0),
                Insn::stmt(BPF_LDX | BPF_MEM, t),
            ]
        }
        (2, 12) => vec![ld_ad(VLAN_TPID)],
        (2, 14) => vec![ld_ad(VLAN_TAG)],
        (1, 12) => vec![ld_ad(VLAN_TPID), alu(BPF_RSH, 8)],
        (1, 13) => vec![ld_ad(VLAN_TPID), alu(BPF_AND, 0xff)],
        (1, 14) => vec![ld_ad(VLAN_TAG), alu(BPF_RSH, 8)],
        (1, 15) => vec![ld_ad(VLAN_TAG), alu(BPF_AND, 0xff)],
        _ => return None,
    })
}

/// A load of `size` bytes at `X + k` in the re-tagged frame: decided at
/// run time (A is free: the load overwrites it; X is kept).
fn ind_load(i: Insn, size: u32) -> Vec<Insn> {
    let k = i.k;
    vec![
        Insn::stmt(BPF_MISC | BPF_TXA, 0),
        alu(BPF_ADD, k),
        // At or past the tag's end: 4 bytes earlier.
        Insn::jump(BPF_JMP | BPF_JGE | BPF_K, TAG_END, 4, 0),
        alu(BPF_ADD, size),
        // Reaching into the tag: user space decides.
        Insn::jump(BPF_JMP | BPF_JGT | BPF_K, TAG_AT, 4, 0),
        i,
        Insn::stmt(BPF_JMP | BPF_JA, 3),
        Insn::stmt(i.code, k.wrapping_sub(4)),
        Insn::stmt(BPF_JMP | BPF_JA, 1),
        Insn::stmt(BPF_RET | BPF_K, PASS),
    ]
}

/// A scratch word `program` never touches.
fn free_word(program: &[Insn]) -> Option<u32> {
    let used = |m: u32| {
        program.iter().any(|i| {
            let (class, mode) = (i.code & 0x07, i.code & 0xe0);
            let mem = matches!(class, BPF_ST | BPF_STX)
                || (matches!(class, BPF_LD | BPF_LDX) && mode == BPF_MEM);
            mem && i.k == m
        })
    };
    (0..16).find(|&m| !used(m))
}

/// `program` (for Ethernet) rewritten for the kernel's view of a frame
/// whose tag it took off, or `None` where it cannot be (see the module
/// documentation).
///
/// For example `ldh [12]; jeq #0x8100` becomes a test of the tag's
/// presence from the kernel's ancillary data.
pub(crate) fn retagged(program: &[Insn]) -> Option<Vec<Insn>> {
    let scratch = free_word(program);
    let mut pieces = Vec::with_capacity(program.len());
    for &i in program {
        let (class, mode, size) = (i.code & 0x07, i.code & 0xe0, i.code & 0x18);
        let bytes = match size {
            BPF_W => 4,
            BPF_H => 2,
            _ => 1,
        };
        let piece = match (class, mode) {
            (BPF_JMP, _) => Piece::Jump(i),
            (BPF_LD, BPF_ABS) => Piece::Code(abs_load(i, bytes, scratch)?),
            (BPF_LD, BPF_IND) => Piece::Code(ind_load(i, bytes)),
            (BPF_LDX, BPF_MSH) => {
                if i.k < TAG_AT {
                    Piece::Code(vec![i])
                } else if i.k >= TAG_END {
                    Piece::Code(vec![Insn::stmt(i.code, i.k - 4)])
                } else {
                    return None;
                }
            }
            (BPF_LD, BPF_LEN) => Piece::Code(vec![i, alu(BPF_ADD, 4)]),
            (BPF_LDX, BPF_LEN) => {
                let t = scratch?;
                Piece::Code(vec![
                    Insn::stmt(BPF_ST, t),
                    Insn::stmt(BPF_LD | BPF_W | BPF_LEN, 0),
                    alu(BPF_ADD, 4),
                    Insn::stmt(BPF_MISC | BPF_TAX, 0),
                    Insn::stmt(BPF_LD | BPF_MEM, t),
                ])
            }
            _ => Piece::Code(vec![i]),
        };
        pieces.push(piece);
    }
    // Where each original instruction starts in the new program.
    let mut start = Vec::with_capacity(pieces.len() + 1);
    let mut at = 0usize;
    for p in &pieces {
        start.push(at);
        at += match p {
            Piece::Jump(_) => 1,
            Piece::Code(c) => c.len(),
        };
    }
    start.push(at);
    let mut out = Vec::with_capacity(at);
    for (n, p) in pieces.into_iter().enumerate() {
        match p {
            Piece::Code(c) => out.extend(c),
            Piece::Jump(mut j) => {
                let here = start[n] + 1;
                let to = |rel: usize| start.get(n + 1 + rel).map(|&t| t - here);
                if j.code & 0xf0 == BPF_JA {
                    j.k = u32::try_from(to(j.k as usize)?).ok()?;
                } else {
                    j.jt = u8::try_from(to(usize::from(j.jt))?).ok()?;
                    j.jf = u8::try_from(to(usize::from(j.jf))?).ok()?;
                }
                out.push(j);
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic BPF interpreter's view of a re-tagged frame, for the
    /// kernel's ancillary loads: runs `p` on `frame` (untagged) with the
    /// tag `(tpid, tci)` the kernel took off.
    fn run_kernel(p: &[Insn], frame: &[u8], tag: (u16, u16)) -> u32 {
        let (mut a, mut x, mut m) = (0u32, 0u32, [0u32; 16]);
        let mut pc = 0;
        let load = |at: u32, n: u32| -> Option<u32> {
            if at == VLAN_TAG {
                return Some(u32::from(tag.1));
            }
            if at == VLAN_TPID {
                return Some(u32::from(tag.0));
            }
            let b = frame.get(at as usize..at.checked_add(n)? as usize)?;
            Some(b.iter().fold(0, |v, &x| (v << 8) | u32::from(x)))
        };
        loop {
            let i = p[pc];
            pc += 1;
            let size = match i.code & 0x18 {
                BPF_W => 4,
                BPF_H => 2,
                _ => 1,
            };
            match (i.code & 0x07, i.code & 0xe0) {
                (BPF_LD, BPF_ABS) => match load(i.k, size) {
                    Some(v) => a = v,
                    None => return 0,
                },
                (BPF_LD, BPF_IND) => match load(x.wrapping_add(i.k), size) {
                    Some(v) => a = v,
                    None => return 0,
                },
                (BPF_LD, BPF_LEN) => a = frame.len() as u32,
                (BPF_LD, BPF_MEM) => a = m[i.k as usize],
                (BPF_LD, BPF_IMM) => a = i.k,
                (BPF_LDX, BPF_MSH) => match load(i.k, 1) {
                    Some(v) => x = 4 * (v & 0xf),
                    None => return 0,
                },
                (BPF_LDX, BPF_LEN) => x = frame.len() as u32,
                (BPF_LDX, BPF_MEM) => x = m[i.k as usize],
                (BPF_LDX, _) => x = i.k,
                (BPF_ST, _) => m[i.k as usize] = a,
                (BPF_STX, _) => m[i.k as usize] = x,
                (BPF_RET, _) => return if i.code & 0x18 == 0x10 { a } else { i.k },
                (BPF_MISC, _) => {
                    if i.code & 0xf8 == BPF_TAX {
                        x = a
                    } else {
                        a = x
                    }
                }
                (BPF_ALU, _) => {
                    let v = if i.code & 0x08 != 0 { x } else { i.k };
                    a = match i.code & 0xf0 {
                        BPF_ADD => a.wrapping_add(v),
                        BPF_SUB => a.wrapping_sub(v),
                        BPF_AND => a & v,
                        BPF_OR => a | v,
                        BPF_LSH => a.wrapping_shl(v),
                        BPF_RSH => a.wrapping_shr(v),
                        _ => unreachable!("{i:?}"),
                    }
                }
                (BPF_JMP, _) => {
                    if i.code & 0xf0 == BPF_JA {
                        pc += i.k as usize;
                        continue;
                    }
                    let v = if i.code & 0x08 != 0 { x } else { i.k };
                    let t = match i.code & 0xf0 {
                        BPF_JEQ => a == v,
                        BPF_JGT => a > v,
                        BPF_JGE => a >= v,
                        BPF_JSET => a & v != 0,
                        _ => unreachable!(),
                    };
                    pc += usize::from(if t { i.jt } else { i.jf });
                }
                _ => unreachable!("{i:?}"),
            }
        }
    }

    fn sluice_bpf_for(expr: &str) -> Vec<Insn> {
        sluice_filter::Program::builder(sluice_filter::LinkType::EN10MB)
            .expression(expr)
            .unwrap()
            .bpf()
            .to_vec()
    }

    #[test]
    fn the_rewrite_reads_the_retagged_frame() {
        // A tagged IPv4/TCP frame as user space sees it, and as the kernel
        // does (tag off).
        let mut tagged = vec![0u8; 12];
        tagged[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        tagged.extend_from_slice(&[0x81, 0x00, 0x20, 0x64]);
        tagged.extend_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0];
        ip.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        ip.extend_from_slice(&[0x1f, 0x90, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 2, 0, 0]);
        ip.extend_from_slice(&[0, 0, 0, 0]);
        tagged.extend_from_slice(&ip);
        let mut untagged = tagged[..12].to_vec();
        untagged.extend_from_slice(&tagged[16..]);
        let tag = (0x8100, 0x2064);
        for expr in [
            "vlan",
            "vlan 100",
            "vlan 101",
            "vlan and ip",
            "vlan and tcp port 80",
            "vlan and tcp port 81",
            "vlan 100 and ip host 10.0.0.2",
            "vlan and ip[9] = 6",
            "ether[12:4] = 0x81002064",
            "ether[13] = 0",
            "ether[15] = 0x64",
            "len = 58",
            "len > 58",
            "tcp",
            "ether src 2:0:0:0:0:1",
        ] {
            let p = sluice_bpf_for(expr);
            let r = retagged(&p).unwrap_or_else(|| panic!("{expr}: no rewrite"));
            let want = sluice_bpf::run(&p, &tagged, tagged.len() as u32);
            let got = run_kernel(&r, &untagged, tag);
            assert_eq!(got != 0, want != 0, "{expr}: {r:?}");
        }
    }

    #[test]
    fn loads_across_the_tags_edges_are_not_rewritten() {
        let ret = Insn::stmt(BPF_RET | BPF_A, 0);
        for (size, k) in [(BPF_W, 10), (BPF_H, 13), (BPF_W, 14)] {
            let p = [Insn::stmt(BPF_LD | size | BPF_ABS, k), ret];
            assert!(retagged(&p).is_none(), "{size} {k}");
        }
        // With every scratch word in use, a word at 12 cannot be built.
        let mut p: Vec<Insn> = (0..16).map(|m| Insn::stmt(BPF_ST, m)).collect();
        p.push(Insn::stmt(BPF_LD | BPF_W | BPF_ABS, 12));
        p.push(ret);
        assert!(retagged(&p).is_none());
    }
}
