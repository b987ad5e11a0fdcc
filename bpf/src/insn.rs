//! Instructions: the raw `struct bpf_insn` layout, opcode constants and a
//! decoded view.

/// Opcode field constants, with the names and values of `<pcap/bpf.h>`.
///
/// Combine them with `|` to build an opcode:
///
/// ```
/// use sluice_bpf::op::*;
/// assert_eq!(BPF_LD | BPF_H | BPF_ABS, 0x28);
/// assert_eq!(BPF_JMP | BPF_JEQ | BPF_K, 0x15);
/// ```
pub mod op {
    /// Class: load into A.
    pub const BPF_LD: u16 = 0x00;
    /// Class: load into X.
    pub const BPF_LDX: u16 = 0x01;
    /// Class: store A into scratch memory.
    pub const BPF_ST: u16 = 0x02;
    /// Class: store X into scratch memory.
    pub const BPF_STX: u16 = 0x03;
    /// Class: arithmetic on A.
    pub const BPF_ALU: u16 = 0x04;
    /// Class: jumps.
    pub const BPF_JMP: u16 = 0x05;
    /// Class: return.
    pub const BPF_RET: u16 = 0x06;
    /// Class: register transfers.
    pub const BPF_MISC: u16 = 0x07;

    /// Size: 32-bit word.
    pub const BPF_W: u16 = 0x00;
    /// Size: 16-bit half word.
    pub const BPF_H: u16 = 0x08;
    /// Size: byte.
    pub const BPF_B: u16 = 0x10;

    /// Mode: immediate `k`.
    pub const BPF_IMM: u16 = 0x00;
    /// Mode: packet at absolute offset `k`.
    pub const BPF_ABS: u16 = 0x20;
    /// Mode: packet at offset `X + k`.
    pub const BPF_IND: u16 = 0x40;
    /// Mode: scratch memory `M[k]`.
    pub const BPF_MEM: u16 = 0x60;
    /// Mode: wire length of the packet.
    pub const BPF_LEN: u16 = 0x80;
    /// Mode: `4 * (pkt[k] & 0xf)` (IP header length), LDX only.
    pub const BPF_MSH: u16 = 0xa0;

    /// ALU: `A += src`.
    pub const BPF_ADD: u16 = 0x00;
    /// ALU: `A -= src`.
    pub const BPF_SUB: u16 = 0x10;
    /// ALU: `A *= src`.
    pub const BPF_MUL: u16 = 0x20;
    /// ALU: `A /= src`.
    pub const BPF_DIV: u16 = 0x30;
    /// ALU: `A |= src`.
    pub const BPF_OR: u16 = 0x40;
    /// ALU: `A &= src`.
    pub const BPF_AND: u16 = 0x50;
    /// ALU: `A <<= src`.
    pub const BPF_LSH: u16 = 0x60;
    /// ALU: `A >>= src`.
    pub const BPF_RSH: u16 = 0x70;
    /// ALU: `A = -A`.
    pub const BPF_NEG: u16 = 0x80;
    /// ALU: `A %= src`.
    pub const BPF_MOD: u16 = 0x90;
    /// ALU: `A ^= src`.
    pub const BPF_XOR: u16 = 0xa0;

    /// Jump: always, by `k`.
    pub const BPF_JA: u16 = 0x00;
    /// Jump: if `A == src`.
    pub const BPF_JEQ: u16 = 0x10;
    /// Jump: if `A > src` (unsigned).
    pub const BPF_JGT: u16 = 0x20;
    /// Jump: if `A >= src` (unsigned).
    pub const BPF_JGE: u16 = 0x30;
    /// Jump: if `A & src != 0`.
    pub const BPF_JSET: u16 = 0x40;

    /// Source: the constant `k`.
    pub const BPF_K: u16 = 0x00;
    /// Source: register X.
    pub const BPF_X: u16 = 0x08;
    /// Return source: register A.
    pub const BPF_A: u16 = 0x10;

    /// Misc: `X = A`.
    pub const BPF_TAX: u16 = 0x00;
    /// Misc: `A = X`.
    pub const BPF_TXA: u16 = 0x80;

    /// Number of scratch memory words `M[0..16]`.
    pub const BPF_MEMWORDS: usize = 16;
    /// The Linux kernel's maximum program length.
    pub const BPF_MAXINSNS: usize = 4096;

    /// MPF extension (not classic BPF, see [`crate::mpf`]): a key word, the
    /// immediate `k` compared by the `ret_match_imm` or `jmp_match_imm`
    /// before it. Never executed.
    pub const MPF_KEY: u16 = 0x100;
    /// MPF: `ret_match_imm #N, #R`; `jt` = N (key words follow), `k` = R.
    pub const MPF_RET_MATCH_IMM: u16 = 0x106;
    /// MPF: `jmp_match_imm #N jt .. jf ..`; `k` = N (key words follow),
    /// `jt`/`jf` relative to the instruction after the key words.
    pub const MPF_JMP_MATCH_IMM: u16 = 0x115;
    /// MPF: `register_data #N, #T`; `jt` = N, `k` = T milliseconds.
    pub const MPF_REGISTER_DATA: u16 = 0x102;
    /// MPF: `ret_match_data #N, #R`; `jt` = N, `k` = R.
    pub const MPF_RET_MATCH_DATA: u16 = 0x116;
    /// MPF: `postpone #T`; `k` = T milliseconds.
    pub const MPF_POSTPONE: u16 = 0x126;
    /// MPF: most scratch words a match or registration may cover.
    pub const MPF_MAX_WORDS: usize = 16;
}

use op::*;

/// One classic BPF instruction, laid out like C's `struct bpf_insn`.
///
/// ```
/// use sluice_bpf::{Insn, op::*};
/// let i = Insn::stmt(BPF_LD | BPF_H | BPF_ABS, 12);
/// assert_eq!(i, Insn { code: 0x28, jt: 0, jf: 0, k: 12 });
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// Opcode (class | size | mode, or class | op | source).
    pub code: u16,
    /// Relative jump offset when the condition holds.
    pub jt: u8,
    /// Relative jump offset when the condition does not hold.
    pub jf: u8,
    /// Generic operand.
    pub k: u32,
}

impl Insn {
    /// A non-jump instruction (libpcap's `BPF_STMT`).
    ///
    /// ```
    /// use sluice_bpf::{Insn, op::*};
    /// assert_eq!(Insn::stmt(BPF_RET | BPF_K, 0xffff).k, 0xffff);
    /// ```
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A jump instruction (libpcap's `BPF_JUMP`); offsets are relative to the
    /// next instruction.
    ///
    /// ```
    /// use sluice_bpf::{Insn, op::*};
    /// let j = Insn::jump(BPF_JMP | BPF_JEQ | BPF_K, 0x800, 0, 3);
    /// assert_eq!((j.jt, j.jf), (0, 3));
    /// ```
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }

    /// The decoded instruction, or `None` when the opcode is not one of the
    /// 49 that libpcap's `bpf_filter` and the Linux kernel execute.
    ///
    /// ```
    /// use sluice_bpf::{Insn, Op, Size, Mode};
    /// assert_eq!(Insn::stmt(0x28, 12).decode(),
    ///            Some(Op::Ld { size: Size::H, mode: Mode::Abs, k: 12 }));
    /// assert_eq!(Insn::stmt(0xff, 0).decode(), None);
    /// ```
    pub fn decode(&self) -> Option<Op> {
        if !is_valid_code(self.code) {
            return None;
        }
        let c = self.code;
        let k = self.k;
        Some(match Class::of(c) {
            Class::Ld => Op::Ld {
                size: Size::of(c)?,
                mode: Mode::of(c)?,
                k,
            },
            Class::Ldx => Op::Ldx {
                size: Size::of(c)?,
                mode: Mode::of(c)?,
                k,
            },
            Class::St => Op::St(k),
            Class::Stx => Op::Stx(k),
            Class::Alu => Op::Alu {
                op: AluOp::of(c)?,
                src: Src::of(c),
                k,
            },
            Class::Jmp => Op::Jmp {
                op: JmpOp::of(c)?,
                src: Src::of(c),
                k,
                jt: self.jt,
                jf: self.jf,
            },
            Class::Ret => Op::Ret {
                src: RetSrc::of(c)?,
                k,
            },
            Class::Misc => Op::Misc(MiscOp::of(c)?),
        })
    }
}

/// Whether `code` is one of the opcodes that libpcap's `bpf_filter` executes
/// (the same set the Linux kernel's classic BPF checker accepts).
///
/// ```
/// assert!(sluice_bpf::is_valid_code(0x28));
/// assert!(!sluice_bpf::is_valid_code(0x0e)); // ret x is not classic BPF
/// ```
pub const fn is_valid_code(code: u16) -> bool {
    matches!(
        code,
        0x00 | 0x01
            | 0x02
            | 0x03
            | 0x04
            | 0x05
            | 0x06
            | 0x07
            | 0x0c
            | 0x14
            | 0x15
            | 0x16
            | 0x1c
            | 0x1d
            | 0x20
            | 0x24
            | 0x25
            | 0x28
            | 0x2c
            | 0x2d
            | 0x30
            | 0x34
            | 0x35
            | 0x3c
            | 0x3d
            | 0x40
            | 0x44
            | 0x45
            | 0x48
            | 0x4c
            | 0x4d
            | 0x50
            | 0x54
            | 0x5c
            | 0x60
            | 0x61
            | 0x64
            | 0x6c
            | 0x74
            | 0x7c
            | 0x80
            | 0x81
            | 0x84
            | 0x87
            | 0x94
            | 0x9c
            | 0xa4
            | 0xac
            | 0xb1
    )
}

/// All 49 valid opcodes, in increasing order.
///
/// ```
/// assert_eq!(sluice_bpf::VALID_CODES.len(), 49);
/// ```
pub const VALID_CODES: [u16; 49] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x0c, 0x14, 0x15, 0x16, 0x1c, 0x1d, 0x20, 0x24,
    0x25, 0x28, 0x2c, 0x2d, 0x30, 0x34, 0x35, 0x3c, 0x3d, 0x40, 0x44, 0x45, 0x48, 0x4c, 0x4d, 0x50,
    0x54, 0x5c, 0x60, 0x61, 0x64, 0x6c, 0x74, 0x7c, 0x80, 0x81, 0x84, 0x87, 0x94, 0x9c, 0xa4, 0xac,
    0xb1,
];

/// Instruction class (`code & 0x07`).
///
/// ```
/// use sluice_bpf::Class;
/// assert_eq!(Class::of(0x15), Class::Jmp);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// `BPF_LD`
    Ld,
    /// `BPF_LDX`
    Ldx,
    /// `BPF_ST`
    St,
    /// `BPF_STX`
    Stx,
    /// `BPF_ALU`
    Alu,
    /// `BPF_JMP`
    Jmp,
    /// `BPF_RET`
    Ret,
    /// `BPF_MISC`
    Misc,
}

impl Class {
    /// The class bits of an opcode.
    ///
    /// ```
    /// use sluice_bpf::Class;
    /// assert_eq!(Class::of(0x06), Class::Ret);
    /// ```
    pub const fn of(code: u16) -> Class {
        match code & 0x07 {
            0 => Class::Ld,
            1 => Class::Ldx,
            2 => Class::St,
            3 => Class::Stx,
            4 => Class::Alu,
            5 => Class::Jmp,
            6 => Class::Ret,
            _ => Class::Misc,
        }
    }

    /// The class bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Class::Alu.bits(), 0x04);
    /// ```
    pub const fn bits(self) -> u16 {
        self as u16
    }
}

/// Load size (`code & 0x18`).
///
/// ```
/// use sluice_bpf::Size;
/// assert_eq!(Size::of(0x28), Some(Size::H));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// 32 bits.
    W,
    /// 16 bits.
    H,
    /// 8 bits.
    B,
}

impl Size {
    /// The size field of an opcode (`None` for the reserved value 0x18).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Size::of(0x18), None);
    /// ```
    pub const fn of(code: u16) -> Option<Size> {
        match code & 0x18 {
            0x00 => Some(Size::W),
            0x08 => Some(Size::H),
            0x10 => Some(Size::B),
            _ => None,
        }
    }

    /// The size bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Size::B.bits(), 0x10);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            Size::W => BPF_W,
            Size::H => BPF_H,
            Size::B => BPF_B,
        }
    }

    /// Width in bytes.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Size::H.bytes(), 2);
    /// ```
    pub const fn bytes(self) -> usize {
        match self {
            Size::W => 4,
            Size::H => 2,
            Size::B => 1,
        }
    }
}

/// Addressing mode (`code & 0xe0`).
///
/// ```
/// use sluice_bpf::Mode;
/// assert_eq!(Mode::of(0xb1), Some(Mode::Msh));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Immediate.
    Imm,
    /// Absolute packet offset.
    Abs,
    /// `X`-relative packet offset.
    Ind,
    /// Scratch memory.
    Mem,
    /// Wire length.
    Len,
    /// IP header length helper.
    Msh,
}

impl Mode {
    /// The mode field of an opcode (`None` for reserved values).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Mode::of(0xe0), None);
    /// ```
    pub const fn of(code: u16) -> Option<Mode> {
        match code & 0xe0 {
            0x00 => Some(Mode::Imm),
            0x20 => Some(Mode::Abs),
            0x40 => Some(Mode::Ind),
            0x60 => Some(Mode::Mem),
            0x80 => Some(Mode::Len),
            0xa0 => Some(Mode::Msh),
            _ => None,
        }
    }

    /// The mode bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Mode::Ind.bits(), 0x40);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            Mode::Imm => BPF_IMM,
            Mode::Abs => BPF_ABS,
            Mode::Ind => BPF_IND,
            Mode::Mem => BPF_MEM,
            Mode::Len => BPF_LEN,
            Mode::Msh => BPF_MSH,
        }
    }
}

/// ALU operation (`code & 0xf0`).
///
/// ```
/// use sluice_bpf::AluOp;
/// assert_eq!(AluOp::of(0x94), Some(AluOp::Mod));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AluOp {
    /// Addition (wrapping).
    Add,
    /// Subtraction (wrapping).
    Sub,
    /// Multiplication (wrapping).
    Mul,
    /// Unsigned division.
    Div,
    /// Bitwise or.
    Or,
    /// Bitwise and.
    And,
    /// Left shift.
    Lsh,
    /// Logical right shift.
    Rsh,
    /// Two's complement negation of A.
    Neg,
    /// Unsigned remainder.
    Mod,
    /// Bitwise exclusive or.
    Xor,
}

impl AluOp {
    /// The ALU operation of an opcode (`None` for reserved values).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::AluOp::of(0xb4), None);
    /// ```
    pub const fn of(code: u16) -> Option<AluOp> {
        Some(match code & 0xf0 {
            0x00 => AluOp::Add,
            0x10 => AluOp::Sub,
            0x20 => AluOp::Mul,
            0x30 => AluOp::Div,
            0x40 => AluOp::Or,
            0x50 => AluOp::And,
            0x60 => AluOp::Lsh,
            0x70 => AluOp::Rsh,
            0x80 => AluOp::Neg,
            0x90 => AluOp::Mod,
            0xa0 => AluOp::Xor,
            _ => return None,
        })
    }

    /// The operation bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::AluOp::Xor.bits(), 0xa0);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            AluOp::Add => BPF_ADD,
            AluOp::Sub => BPF_SUB,
            AluOp::Mul => BPF_MUL,
            AluOp::Div => BPF_DIV,
            AluOp::Or => BPF_OR,
            AluOp::And => BPF_AND,
            AluOp::Lsh => BPF_LSH,
            AluOp::Rsh => BPF_RSH,
            AluOp::Neg => BPF_NEG,
            AluOp::Mod => BPF_MOD,
            AluOp::Xor => BPF_XOR,
        }
    }
}

/// Jump condition (`code & 0xf0`).
///
/// ```
/// use sluice_bpf::JmpOp;
/// assert_eq!(JmpOp::of(0x45), Some(JmpOp::Jset));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JmpOp {
    /// Unconditional, offset `k`.
    Ja,
    /// `A == src`.
    Jeq,
    /// `A > src`.
    Jgt,
    /// `A >= src`.
    Jge,
    /// `A & src != 0`.
    Jset,
}

impl JmpOp {
    /// The jump operation of an opcode (`None` for reserved values).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::JmpOp::of(0x55), None);
    /// ```
    pub const fn of(code: u16) -> Option<JmpOp> {
        Some(match code & 0xf0 {
            0x00 => JmpOp::Ja,
            0x10 => JmpOp::Jeq,
            0x20 => JmpOp::Jgt,
            0x30 => JmpOp::Jge,
            0x40 => JmpOp::Jset,
            _ => return None,
        })
    }

    /// The operation bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::JmpOp::Jgt.bits(), 0x20);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            JmpOp::Ja => BPF_JA,
            JmpOp::Jeq => BPF_JEQ,
            JmpOp::Jgt => BPF_JGT,
            JmpOp::Jge => BPF_JGE,
            JmpOp::Jset => BPF_JSET,
        }
    }
}

/// Operand source of ALU and jump instructions (`code & 0x08`).
///
/// ```
/// use sluice_bpf::Src;
/// assert_eq!(Src::of(0x1d), Src::X);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Src {
    /// The constant `k`.
    K,
    /// Register X.
    X,
}

impl Src {
    /// The source bit of an opcode.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Src::of(0x15), sluice_bpf::Src::K);
    /// ```
    pub const fn of(code: u16) -> Src {
        if code & BPF_X != 0 {
            Src::X
        } else {
            Src::K
        }
    }

    /// The source bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::Src::X.bits(), 0x08);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            Src::K => BPF_K,
            Src::X => BPF_X,
        }
    }
}

/// Return value source (`code & 0x18`).
///
/// `X` exists in the encoding but neither libpcap nor Linux executes it.
///
/// ```
/// use sluice_bpf::RetSrc;
/// assert_eq!(RetSrc::of(0x16), Some(RetSrc::A));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RetSrc {
    /// The constant `k`.
    K,
    /// Register X (not executable).
    X,
    /// Register A.
    A,
}

impl RetSrc {
    /// The return source of an opcode.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::RetSrc::of(0x0e), Some(sluice_bpf::RetSrc::X));
    /// ```
    pub const fn of(code: u16) -> Option<RetSrc> {
        match code & 0x18 {
            0x00 => Some(RetSrc::K),
            0x08 => Some(RetSrc::X),
            0x10 => Some(RetSrc::A),
            _ => None,
        }
    }

    /// The source bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::RetSrc::A.bits(), 0x10);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            RetSrc::K => BPF_K,
            RetSrc::X => BPF_X,
            RetSrc::A => BPF_A,
        }
    }
}

/// Register transfer (`code & 0xf8`).
///
/// ```
/// use sluice_bpf::MiscOp;
/// assert_eq!(MiscOp::of(0x87), Some(MiscOp::Txa));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MiscOp {
    /// `X = A`.
    Tax,
    /// `A = X`.
    Txa,
}

impl MiscOp {
    /// The misc operation of an opcode (`None` for reserved values).
    ///
    /// ```
    /// assert_eq!(sluice_bpf::MiscOp::of(0x07), Some(sluice_bpf::MiscOp::Tax));
    /// ```
    pub const fn of(code: u16) -> Option<MiscOp> {
        match code & 0xf8 {
            0x00 => Some(MiscOp::Tax),
            0x80 => Some(MiscOp::Txa),
            _ => None,
        }
    }

    /// The operation bits.
    ///
    /// ```
    /// assert_eq!(sluice_bpf::MiscOp::Txa.bits(), 0x80);
    /// ```
    pub const fn bits(self) -> u16 {
        match self {
            MiscOp::Tax => BPF_TAX,
            MiscOp::Txa => BPF_TXA,
        }
    }
}

/// A decoded valid instruction (see [`Insn::decode`]).
///
/// ```
/// use sluice_bpf::{Insn, Op, JmpOp, Src};
/// let op = Op::Jmp { op: JmpOp::Jeq, src: Src::K, k: 0x800, jt: 0, jf: 1 };
/// assert_eq!(op.encode(), Insn::jump(0x15, 0x800, 0, 1));
/// assert_eq!(op.encode().decode(), Some(op));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Load into A.
    Ld {
        /// Width of a packet load (always `W` for other modes).
        size: Size,
        /// Where the value comes from.
        mode: Mode,
        /// Offset, immediate or memory index.
        k: u32,
    },
    /// Load into X.
    Ldx {
        /// `W`, or `B` for `Msh`.
        size: Size,
        /// Where the value comes from.
        mode: Mode,
        /// Offset, immediate or memory index.
        k: u32,
    },
    /// `M[k] = A`.
    St(u32),
    /// `M[k] = X`.
    Stx(u32),
    /// `A = A op src`.
    Alu {
        /// Operation.
        op: AluOp,
        /// Operand (`K` for `Neg`).
        src: Src,
        /// Constant operand.
        k: u32,
    },
    /// Jump.
    Jmp {
        /// Condition.
        op: JmpOp,
        /// Compared operand (`K` for `Ja`).
        src: Src,
        /// Constant operand, or offset for `Ja`.
        k: u32,
        /// Offset when true.
        jt: u8,
        /// Offset when false.
        jf: u8,
    },
    /// Return.
    Ret {
        /// Source of the value.
        src: RetSrc,
        /// Constant value.
        k: u32,
    },
    /// Register transfer.
    Misc(MiscOp),
}

impl Op {
    /// Encodes back to a raw instruction.
    ///
    /// ```
    /// use sluice_bpf::{Op, MiscOp};
    /// assert_eq!(Op::Misc(MiscOp::Tax).encode().code, 0x07);
    /// ```
    pub fn encode(&self) -> Insn {
        match *self {
            Op::Ld { size, mode, k } => Insn::stmt(BPF_LD | size.bits() | mode.bits(), k),
            Op::Ldx { size, mode, k } => Insn::stmt(BPF_LDX | size.bits() | mode.bits(), k),
            Op::St(k) => Insn::stmt(BPF_ST, k),
            Op::Stx(k) => Insn::stmt(BPF_STX, k),
            Op::Alu { op, src, k } => Insn::stmt(BPF_ALU | op.bits() | src.bits(), k),
            Op::Jmp { op, src, k, jt, jf } => {
                Insn::jump(BPF_JMP | op.bits() | src.bits(), k, jt, jf)
            }
            Op::Ret { src, k } => Insn::stmt(BPF_RET | src.bits(), k),
            Op::Misc(m) => Insn::stmt(BPF_MISC | m.bits(), 0),
        }
    }
}

/// A program: a vector of instructions.
///
/// `Display` prints the `tcpdump -d` form; `FromStr` accepts any of the
/// three text forms (see [`crate::parse_program`]).
///
/// ```
/// use sluice_bpf::Program;
/// let p: Program = "(000) ret      #0\n".parse().unwrap();
/// assert_eq!(p.0.len(), 1);
/// assert_eq!(p.to_string(), "(000) ret      #0\n");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Program(pub Vec<Insn>);

impl Program {
    /// The instructions.
    ///
    /// ```
    /// use sluice_bpf::{Program, Insn};
    /// assert!(Program(vec![]).insns().is_empty());
    /// ```
    pub fn insns(&self) -> &[Insn] {
        &self.0
    }
}

impl From<Vec<Insn>> for Program {
    fn from(v: Vec<Insn>) -> Program {
        Program(v)
    }
}

impl std::fmt::Display for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&crate::text::disasm_d(&self.0))
    }
}

impl std::str::FromStr for Program {
    type Err = crate::text::ParseError;
    fn from_str(s: &str) -> Result<Program, Self::Err> {
        crate::text::parse_program(s).map(Program)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_encode_roundtrip_all_codes() {
        let mut valid = 0;
        for code in 0..=0xffffu16 {
            let i = Insn::jump(code, 7, 1, 2);
            match i.decode() {
                Some(op) => {
                    valid += 1;
                    let back = op.encode();
                    assert_eq!(back.code, code);
                    assert_eq!(back.k, if code == 0x07 || code == 0x87 { 0 } else { 7 });
                }
                None => assert!(!is_valid_code(code)),
            }
        }
        assert_eq!(valid, 49);
        for c in VALID_CODES {
            assert!(is_valid_code(c));
        }
    }
}
