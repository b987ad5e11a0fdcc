//! # sluice-bpf: classic BPF, exactly as Linux and libpcap define it
//!
//! * [`Insn`] / [`Op`] / [`Program`]: instructions, raw and decoded, with the
//!   opcode constants of `<pcap/bpf.h>` in [`op`].
//! * [`run`]: an interpreter whose result equals libpcap's `bpf_filter()`;
//!   [`Validated`]: a program that passed the verifier.
//! * [`Verifier`] / [`verify`]: the Linux kernel's classic BPF checks
//!   ([`Limits::KERNEL`]) or a userland variant ([`Limits::USERLAND`]).
//! * Text: [`disasm_d`], [`disasm_dd`], [`disasm_ddd`] print what
//!   `tcpdump -d`, `-dd`, `-ddd` print; [`parse_program`] reads any of them.
//! * [`mpf`]: MPF's extensions (`ret_match_imm`, `jmp_match_imm`,
//!   `register_data`, `ret_match_data`, `postpone`), their verifier and
//!   interpreter; [`run_ext`] runs classic BPF with a hook for them.
//!
//! ```
//! use sluice_bpf::{parse_program, Verifier, disasm_d};
//! let text = "(000) ldh      [12]\n(001) jeq      #0x800           jt 2\tjf 3\n\
//!             (002) ret      #262144\n(003) ret      #0\n";
//! let insns = parse_program(text).unwrap();
//! assert_eq!(disasm_d(&insns), text);
//! let prog = Verifier::kernel().validate(&insns).unwrap();
//! let mut pkt = [0u8; 60];
//! pkt[12] = 0x08;
//! assert_eq!(prog.run(&pkt, 60), 262144);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod insn;
mod interp;
mod lift;
pub mod mpf;
mod text;
mod verify;

pub use insn::{
    is_valid_code, op, AluOp, Class, Insn, JmpOp, MiscOp, Mode, Op, Program, RetSrc, Size, Src,
    VALID_CODES,
};
pub use interp::{run, run_ext, ExtHook, ExtStep, Machine, NoExt, Validated, STEP_BUDGET};
pub use lift::{lift, LiftError};
pub use text::{
    disasm_d, disasm_d_annotated, disasm_dd, disasm_ddd, image, parse_d, parse_dd, parse_ddd,
    parse_program, ParseError, TextFormat,
};
pub use verify::{verify, Limits, Verifier, VerifyError};
