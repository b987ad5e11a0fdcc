//! eBPF instructions: their encoding (the kernel's `struct bpf_insn`) and a
//! readable listing in the style of `bpftool prog dump xlated`.
//!
//! Rule: this module only encodes and prints; it knows nothing of the IR.

use std::fmt::Write as _;

/// Instruction classes, sizes, modes and operations (linux/bpf.h).
#[allow(missing_docs)]
pub mod op {
    pub const LD: u8 = 0x00;
    pub const LDX: u8 = 0x01;
    pub const ST: u8 = 0x02;
    pub const STX: u8 = 0x03;
    pub const ALU: u8 = 0x04;
    pub const JMP: u8 = 0x05;
    pub const JMP32: u8 = 0x06;
    pub const ALU64: u8 = 0x07;
    pub const W: u8 = 0x00;
    pub const H: u8 = 0x08;
    pub const B: u8 = 0x10;
    pub const DW: u8 = 0x18;
    pub const ABS: u8 = 0x20;
    pub const IND: u8 = 0x40;
    pub const MEM: u8 = 0x60;
    pub const K: u8 = 0x00;
    pub const X: u8 = 0x08;
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    /// Byte order conversion (`BPF_END`); with [`X`] (`BPF_TO_BE`), to
    /// big-endian of `imm` bits.
    pub const END: u8 = 0xd0;
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JSET: u8 = 0x40;
    pub const JNE: u8 = 0x50;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const EXIT: u8 = 0x90;
    /// A helper call (`imm` is the helper's number).
    pub const CALL: u8 = 0x80;
    /// `may_goto` (BPF_JCOND with src_reg 0): jumps once the kernel's
    /// loop budget is spent.
    pub const JCOND: u8 = 0xe0;
}

/// One eBPF instruction (`struct bpf_insn`).
///
/// ```
/// use sluice_ebpf::Insn;
/// let exit = Insn::new(0x95, 0, 0, 0, 0);
/// assert_eq!(exit.encode(), 0x95);
/// assert_eq!(exit.to_string(), "exit");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Opcode: class | size/mode or operation | source.
    pub code: u8,
    /// Destination register (0..=10).
    pub dst: u8,
    /// Source register (0..=10).
    pub src: u8,
    /// Signed offset: of a memory access, or of a jump in instructions.
    pub off: i16,
    /// Immediate.
    pub imm: i32,
}

impl Insn {
    /// An instruction from its fields.
    ///
    /// ```
    /// let i = sluice_ebpf::Insn::new(0xb4, 0, 0, 0, 7); // w0 = 7
    /// assert_eq!(i.to_string(), "w0 = 7");
    /// ```
    pub fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            dst,
            src,
            off,
            imm,
        }
    }

    /// The 64-bit little-endian-field encoding the kernel reads.
    ///
    /// ```
    /// let i = sluice_ebpf::Insn::new(0xb4, 1, 0, 0, -1);
    /// assert_eq!(i.encode(), 0xffff_ffff_0000_01b4);
    /// ```
    pub fn encode(&self) -> u64 {
        (self.code as u64)
            | ((self.dst as u64 & 0xf) << 8)
            | ((self.src as u64 & 0xf) << 12)
            | ((self.off as u16 as u64) << 16)
            | ((self.imm as u32 as u64) << 32)
    }
}

fn alu_sym(o: u8) -> Option<&'static str> {
    Some(match o {
        op::ADD => "+=",
        op::SUB => "-=",
        op::MUL => "*=",
        op::DIV => "/=",
        op::OR => "|=",
        op::AND => "&=",
        op::LSH => "<<=",
        op::RSH => ">>=",
        op::MOD => "%=",
        op::XOR => "^=",
        op::MOV => "=",
        _ => return None,
    })
}

/// The names of the helpers sluice's programs call, as bpftool shows them.
fn helper_name(id: i32) -> Option<&'static str> {
    Some(match id {
        1 => "bpf_map_lookup_elem",
        12 => "bpf_tail_call",
        26 => "bpf_skb_load_bytes",
        189 => "bpf_xdp_load_bytes",
        _ => return None,
    })
}

fn jmp_sym(o: u8) -> Option<&'static str> {
    Some(match o {
        op::JEQ => "==",
        op::JGT => ">",
        op::JGE => ">=",
        op::JSET => "&",
        op::JLT => "<",
        op::JLE => "<=",
        0x50 => "!=",
        _ => return None,
    })
}

fn size_name(code: u8) -> &'static str {
    match code & 0x18 {
        op::W => "u32",
        op::H => "u16",
        op::B => "u8",
        _ => "u64",
    }
}

impl std::fmt::Display for Insn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let class = self.code & 7;
        let (d, s) = (self.dst, self.src);
        let x = self.code & op::X != 0;
        match class {
            op::ALU | op::ALU64 => {
                let r = if class == op::ALU { 'w' } else { 'r' };
                let o = self.code & 0xf0;
                if o == op::NEG {
                    return write!(f, "{r}{d} = -{r}{d}");
                }
                if o == op::END {
                    let to = if x { "be" } else { "le" };
                    return write!(f, "r{d} = {to}{} r{d}", self.imm);
                }
                let sym = alu_sym(o).unwrap_or("?=");
                if x {
                    write!(f, "{r}{d} {sym} {r}{s}")
                } else if class == op::ALU {
                    write!(f, "{r}{d} {sym} {}", self.imm as u32)
                } else {
                    write!(f, "{r}{d} {sym} {}", self.imm)
                }
            }
            op::JMP | op::JMP32 => {
                let o = self.code & 0xf0;
                let r = if class == op::JMP32 { 'w' } else { 'r' };
                match (class, o) {
                    (op::JMP, op::EXIT) => write!(f, "exit"),
                    (op::JMP, op::CALL) => match helper_name(self.imm) {
                        Some(name) => write!(f, "call {name}#{}", self.imm),
                        None => write!(f, "call {}", self.imm),
                    },
                    (op::JMP, op::JA) => write!(f, "goto pc{:+}", self.off),
                    (op::JMP32, op::JA) => write!(f, "gotol pc{:+}", self.imm),
                    (op::JMP, op::JCOND) => write!(f, "may_goto pc{:+}", self.off),
                    _ => {
                        let sym = jmp_sym(o).unwrap_or("?");
                        if x {
                            write!(f, "if {r}{d} {sym} {r}{s} goto pc{:+}", self.off)
                        } else if class == op::JMP32 {
                            write!(
                                f,
                                "if {r}{d} {sym} {:#x} goto pc{:+}",
                                self.imm as u32, self.off
                            )
                        } else {
                            write!(f, "if {r}{d} {sym} {:#x} goto pc{:+}", self.imm, self.off)
                        }
                    }
                }
            }
            op::LDX => write!(
                f,
                "r{d} = *({} *)(r{s} {:+})",
                size_name(self.code),
                self.off
            ),
            op::STX => write!(
                f,
                "*({} *)(r{d} {:+}) = r{s}",
                size_name(self.code),
                self.off
            ),
            op::ST => write!(
                f,
                "*({} *)(r{d} {:+}) = {}",
                size_name(self.code),
                self.off,
                self.imm
            ),
            op::LD => match self.code & 0xe0 {
                op::ABS => write!(
                    f,
                    "r0 = ntoh(*({} *)skb[{}])",
                    size_name(self.code),
                    self.imm
                ),
                op::IND => write!(
                    f,
                    "r0 = ntoh(*({} *)skb[r{s} {:+}])",
                    size_name(self.code),
                    self.imm
                ),
                // The first half of a 16-byte load; a map's descriptor
                // when src is 1 (BPF_PSEUDO_MAP_FD).
                _ if self.code == op::LD | op::DW && s == 1 => {
                    write!(f, "r{d} = map[fd:{}]", self.imm)
                }
                _ if self.code == op::LD | op::DW => write!(f, "r{d} = {} ll", self.imm),
                _ => write!(f, "(ld {:#04x}) r{d} = {}", self.code, self.imm),
            },
            _ => write!(f, "(code {:#04x})", self.code),
        }
    }
}

/// A program listed one instruction a line, numbered, as
/// `bpftool prog dump xlated` prints it.
///
/// ```
/// let p = [sluice_ebpf::Insn::new(0xb4, 0, 0, 0, 0), sluice_ebpf::Insn::new(0x95, 0, 0, 0, 0)];
/// assert_eq!(sluice_ebpf::dump(&p), "   0: (b4) w0 = 0\n   1: (95) exit\n");
/// ```
pub fn dump(prog: &[Insn]) -> String {
    let mut out = String::new();
    for (i, insn) in prog.iter().enumerate() {
        let _ = writeln!(out, "{i:4}: ({:02x}) {insn}", insn.code);
    }
    out
}
