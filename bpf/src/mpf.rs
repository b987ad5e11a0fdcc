//! MPF's extensions to BPF (Yuhara, Bershad, Maeda and Moss, 1994).
//!
//! Five instructions, encoded with opcodes above 0xff that no classic BPF
//! tool produces (so [`crate::verify`], the kernel's rules and [`crate::run`]
//! keep rejecting them), plus key words that carry immediates:
//!
//! | text | encoding | meaning |
//! | --- | --- | --- |
//! | `ret_match_imm #N, #R` + N × `key #v` | [`MPF_RET_MATCH_IMM`], `jt` = N, `k` = R | return R if `M[0..N]` equals the keys, else 0 |
//! | `jmp_match_imm #N jt L1 jf L2` + N × `key #v` | [`MPF_JMP_MATCH_IMM`], `k` = N | jump to L1 if `M[0..N]` equals the keys (and remember the match), else to L2 |
//! | `register_data #N, #T` | [`MPF_REGISTER_DATA`], `jt` = N, `k` = T | store `M[0..N]` in the filter's memory for T ms; only after a successful `jmp_match_imm` |
//! | `ret_match_data #N, #R` | [`MPF_RET_MATCH_DATA`], `jt` = N, `k` = R | return R if `M[0..N]` equals data this filter registered, else go on |
//! | `postpone #T` | [`MPF_POSTPONE`], `k` = T | stop; the packet waits (at most T ms) and runs again later |
//! | `key #v` | [`MPF_KEY`], `k` = v | an immediate of the match before it; never executed |
//!
//! Jump offsets count instruction slots, key words included, so the `-d`
//! listing numbers every slot and `jt`/`jf` of `jmp_match_imm` are relative
//! to the slot after its keys. [`MpfProgram::new`] checks a program
//! ([`verify_mpf`]) and runs it ([`MpfProgram::run`]) against an
//! [`MpfEnv`], the filter's registered data; [`disasm`] prints it and
//! [`crate::parse_program`] reads it. Collapsing many programs into
//! one is the job of the `sluice-mpf` crate.
//!
//! ```
//! use sluice_bpf::mpf::{MpfProgram, MpfVerdict, NoData};
//! let prog = MpfProgram::parse("ld #7\nst M[0]\nret_match_imm #1, #100\nkey #7\n").unwrap();
//! assert_eq!(prog.run(&[], 0, &mut NoData), MpfVerdict::Return(100));
//! assert!(sluice_bpf::Verifier::kernel().verify(prog.insns()).is_err());
//! ```

use crate::insn::{is_valid_code, op::*, Insn};
use crate::interp::{run_ext, ExtHook, ExtStep, Machine};
use crate::text::{parse_program, ParseError};
use crate::verify::VerifyError;

/// One MPF extension instruction, decoded from its canonical encoding.
///
/// ```
/// use sluice_bpf::mpf::Ext;
/// let e = Ext::RetMatchImm { n: 3, ret: 262144 };
/// assert_eq!(Ext::decode(&e.encode()), Some(e));
/// assert_eq!(e.key_words(), 3);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ext {
    /// A key word (immediate of the match before it).
    Key(u32),
    /// `ret_match_imm #n, #ret`.
    RetMatchImm {
        /// Number of scratch words compared (keys that follow).
        n: u8,
        /// Value returned on a match.
        ret: u32,
    },
    /// `jmp_match_imm #n jt .. jf ..`.
    JmpMatchImm {
        /// Number of scratch words compared (keys that follow).
        n: u32,
        /// Offset after the keys when they match.
        jt: u8,
        /// Offset after the keys when they do not.
        jf: u8,
    },
    /// `register_data #n, #timeout_ms`.
    RegisterData {
        /// Number of scratch words stored.
        n: u8,
        /// Lifetime in milliseconds of packet time.
        timeout_ms: u32,
    },
    /// `ret_match_data #n, #ret`.
    RetMatchData {
        /// Number of scratch words compared.
        n: u8,
        /// Value returned on a match.
        ret: u32,
    },
    /// `postpone #timeout_ms`.
    Postpone {
        /// Longest wait in milliseconds of packet time after the first
        /// postponement.
        timeout_ms: u32,
    },
}

impl Ext {
    /// The extension an instruction encodes, or `None` for classic BPF
    /// opcodes and non-canonical encodings (unused fields not zero).
    ///
    /// ```
    /// use sluice_bpf::{Insn, mpf::Ext};
    /// assert_eq!(Ext::decode(&Insn::stmt(0x126, 500)), Some(Ext::Postpone { timeout_ms: 500 }));
    /// assert_eq!(Ext::decode(&Insn::jump(0x126, 500, 1, 0)), None);
    /// assert_eq!(Ext::decode(&Insn::stmt(0x06, 0)), None);
    /// ```
    pub fn decode(insn: &Insn) -> Option<Ext> {
        let Insn { code, jt, jf, k } = *insn;
        Some(match code {
            MPF_KEY if jt == 0 && jf == 0 => Ext::Key(k),
            MPF_RET_MATCH_IMM if jf == 0 => Ext::RetMatchImm { n: jt, ret: k },
            MPF_JMP_MATCH_IMM => Ext::JmpMatchImm { n: k, jt, jf },
            MPF_REGISTER_DATA if jf == 0 => Ext::RegisterData {
                n: jt,
                timeout_ms: k,
            },
            MPF_RET_MATCH_DATA if jf == 0 => Ext::RetMatchData { n: jt, ret: k },
            MPF_POSTPONE if jt == 0 && jf == 0 => Ext::Postpone { timeout_ms: k },
            _ => return None,
        })
    }

    /// The raw instruction.
    ///
    /// ```
    /// use sluice_bpf::{Insn, mpf::Ext};
    /// assert_eq!(Ext::Key(9).encode(), Insn::stmt(0x100, 9));
    /// ```
    pub fn encode(&self) -> Insn {
        match *self {
            Ext::Key(k) => Insn::stmt(MPF_KEY, k),
            Ext::RetMatchImm { n, ret } => Insn::jump(MPF_RET_MATCH_IMM, ret, n, 0),
            Ext::JmpMatchImm { n, jt, jf } => Insn::jump(MPF_JMP_MATCH_IMM, n, jt, jf),
            Ext::RegisterData { n, timeout_ms } => Insn::jump(MPF_REGISTER_DATA, timeout_ms, n, 0),
            Ext::RetMatchData { n, ret } => Insn::jump(MPF_RET_MATCH_DATA, ret, n, 0),
            Ext::Postpone { timeout_ms } => Insn::stmt(MPF_POSTPONE, timeout_ms),
        }
    }

    /// How many key words follow the instruction (N for the two match
    /// instructions, 0 otherwise).
    ///
    /// ```
    /// use sluice_bpf::mpf::Ext;
    /// assert_eq!(Ext::JmpMatchImm { n: 2, jt: 0, jf: 1 }.key_words(), 2);
    /// assert_eq!(Ext::RetMatchData { n: 2, ret: 1 }.key_words(), 0);
    /// ```
    pub fn key_words(&self) -> usize {
        match *self {
            Ext::RetMatchImm { n, .. } => n as usize,
            Ext::JmpMatchImm { n, .. } => n as usize,
            _ => 0,
        }
    }

    /// The number of scratch words the instruction reads (`None` for key
    /// words and `postpone`).
    ///
    /// ```
    /// use sluice_bpf::mpf::Ext;
    /// assert_eq!(Ext::RegisterData { n: 2, timeout_ms: 1 }.words(), Some(2));
    /// assert_eq!(Ext::Postpone { timeout_ms: 1 }.words(), None);
    /// ```
    pub fn words(&self) -> Option<u64> {
        match *self {
            Ext::RetMatchImm { n, .. }
            | Ext::RegisterData { n, .. }
            | Ext::RetMatchData { n, .. } => Some(n as u64),
            Ext::JmpMatchImm { n, .. } => Some(n as u64),
            Ext::Key(_) | Ext::Postpone { .. } => None,
        }
    }
}

/// A key site: a `ret_match_imm` or `jmp_match_imm` and its key words.
///
/// ```
/// use sluice_bpf::mpf::MpfProgram;
/// let p = MpfProgram::parse("ld #1\nst M[0]\nret_match_imm #1, #1\nkey #1\n").unwrap();
/// assert_eq!(p.key_sites()[0].pc, 2);
/// assert_eq!(p.key_sites()[0].n, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeySite {
    /// Index of the match instruction; its keys are at `pc + 1 ..= pc + n`.
    pub pc: usize,
    /// Number of keys.
    pub n: usize,
    /// Whether it is `jmp_match_imm` (else `ret_match_imm`).
    pub jump: bool,
}

/// Successor slots of the executable instruction at `pc` (unchecked).
fn successors(prog: &[Insn], pc: usize) -> Succ {
    let i = prog[pc];
    let next = pc as u64 + 1;
    if let Some(e) = Ext::decode(&i) {
        return match e {
            Ext::RetMatchImm { .. } | Ext::Postpone { .. } | Ext::Key(_) => Succ::None,
            Ext::JmpMatchImm { n, jt, jf } => {
                let base = next + n as u64;
                Succ::Match(base + jt as u64, base + jf as u64)
            }
            Ext::RegisterData { .. } | Ext::RetMatchData { .. } => Succ::One(next),
        };
    }
    match i.code {
        0x06 | 0x16 => Succ::None,
        0x05 => Succ::One(next + i.k as u64),
        c if crate::verify::is_cond_jump(c) => Succ::Two(next + i.jt as u64, next + i.jf as u64),
        _ => Succ::One(next),
    }
}

#[derive(Clone, Copy)]
enum Succ {
    None,
    One(u64),
    Two(u64, u64),
    /// `jmp_match_imm`: (taken on a match, taken otherwise).
    Match(u64, u64),
}

/// Checks an MPF program (classic BPF plus [`Ext`] instructions) and returns
/// its key sites.
///
/// Classic instructions are checked as [`crate::Limits::USERLAND`] does
/// (opcodes, constant divisors, scratch indexes), with two more rules:
/// jumps go forward only, and no jump lands on a key word. Extension
/// instructions must cover 1 to 16 scratch words and have their N key words
/// right after them; a key word anywhere else is an error. The last
/// executable instruction must be `ret`, `ret_match_imm` or `postpone`.
/// Every path to a `register_data` must pass through the taken branch of a
/// `jmp_match_imm` (the seed's rule, so data is always registered for the
/// filter that matched).
///
/// ```
/// use sluice_bpf::{parse_program, VerifyError, mpf::verify_mpf};
/// let p = parse_program("ld #1\nst M[0]\nregister_data #1, #100\nret #1\n").unwrap();
/// assert_eq!(verify_mpf(&p), Err(VerifyError::MpfRegisterWithoutMatch { pc: 2 }));
/// ```
pub fn verify_mpf(prog: &[Insn]) -> Result<Vec<KeySite>, VerifyError> {
    let len = prog.len();
    if len == 0 {
        return Err(VerifyError::Empty);
    }
    if len > u32::MAX as usize {
        return Err(VerifyError::TooLong {
            len,
            max: u32::MAX as usize,
        });
    }
    let mut is_key = vec![false; len];
    let mut exec = Vec::with_capacity(len);
    let mut sites = Vec::new();
    let mut pc = 0;
    while pc < len {
        let i = prog[pc];
        exec.push(pc);
        if let Some(e) = Ext::decode(&i) {
            if let Ext::Key(_) = e {
                return Err(VerifyError::MpfStrayKey { pc });
            }
            if let Some(n) = e.words() {
                if n == 0 || n > MPF_MAX_WORDS as u64 {
                    return Err(VerifyError::MpfWordCount { pc, n });
                }
            }
            let keys = e.key_words();
            for j in 1..=keys {
                match prog.get(pc + j).and_then(Ext::decode) {
                    Some(Ext::Key(_)) => is_key[pc + j] = true,
                    _ => {
                        return Err(VerifyError::MpfMissingKeys {
                            pc,
                            n: keys,
                            found: j - 1,
                        })
                    }
                }
            }
            if keys > 0 {
                sites.push(KeySite {
                    pc,
                    n: keys,
                    jump: matches!(e, Ext::JmpMatchImm { .. }),
                });
            }
            pc += 1 + keys;
            continue;
        }
        let code = i.code;
        if !is_valid_code(code) {
            return Err(VerifyError::UnknownOpcode { pc, code });
        }
        match code {
            0x34 | 0x94 if i.k == 0 => return Err(VerifyError::DivisionByZero { pc }),
            0x60 | 0x61 | 0x02 | 0x03 if i.k as usize >= BPF_MEMWORDS => {
                return Err(VerifyError::MemoryIndex { pc, k: i.k })
            }
            _ => {}
        }
        pc += 1;
    }
    // Jumps: in range, forward, never onto a key word.
    let check = |pc: usize, target: u64| -> Result<usize, VerifyError> {
        if target >= len as u64 {
            let wrapped = (target as u32) as usize;
            if target > u32::MAX as u64 && wrapped <= pc {
                return Err(VerifyError::BackwardJump {
                    pc,
                    target: wrapped,
                });
            }
            return Err(VerifyError::JumpOutOfRange { pc, target, len });
        }
        let t = target as usize;
        if is_key[t] {
            return Err(VerifyError::MpfJumpIntoKeys { pc, target: t });
        }
        Ok(t)
    };
    let last = *exec.last().unwrap_or(&0);
    let final_ok = matches!(prog[last].code, 0x06 | 0x16)
        || matches!(
            Ext::decode(&prog[last]),
            Some(Ext::RetMatchImm { .. } | Ext::Postpone { .. })
        );
    for &pc in &exec {
        match successors(prog, pc) {
            Succ::None => {}
            Succ::One(t) => {
                // Falling off the end is the final-return rule's error.
                if pc != last || prog[pc].code == 0x05 {
                    check(pc, t)?;
                }
            }
            Succ::Two(t, f) | Succ::Match(t, f) => {
                check(pc, t)?;
                check(pc, f)?;
            }
        }
    }
    if !final_ok {
        return Err(VerifyError::NoFinalReturn { pc: last });
    }
    // register_data only after a match, on every path. Jumps go forward,
    // so one pass in program order sees every predecessor first.
    let mut matched: Vec<Option<bool>> = vec![None; len];
    matched[0] = Some(false);
    let flow = |t: u64, v: bool, matched: &mut Vec<Option<bool>>| {
        let t = t as usize;
        matched[t] = Some(matched[t].map_or(v, |o| o && v));
    };
    for &pc in &exec {
        let Some(state) = matched[pc] else { continue };
        if let Some(Ext::RegisterData { .. }) = Ext::decode(&prog[pc]) {
            if !state {
                return Err(VerifyError::MpfRegisterWithoutMatch { pc });
            }
        }
        match successors(prog, pc) {
            Succ::None => {}
            Succ::One(t) => flow(t, state, &mut matched),
            Succ::Two(t, f) => {
                flow(t, state, &mut matched);
                flow(f, state, &mut matched);
            }
            Succ::Match(t, f) => {
                flow(t, true, &mut matched);
                flow(f, state, &mut matched);
            }
        }
    }
    Ok(sites)
}

/// The per-filter memory that `register_data` writes and `ret_match_data`
/// reads, kept by whoever runs the program (with expiry by packet time).
///
/// ```
/// use sluice_bpf::mpf::MpfEnv;
/// /// Remembers everything forever.
/// #[derive(Default)]
/// struct Forever(Vec<Vec<u32>>);
/// impl MpfEnv for Forever {
///     fn register(&mut self, data: &[u32], _timeout_ms: u32) { self.0.push(data.to_vec()); }
///     fn lookup(&mut self, data: &[u32]) -> bool { self.0.iter().any(|d| d == data) }
/// }
/// let mut env = Forever::default();
/// env.register(&[1, 2], 10);
/// assert!(env.lookup(&[1, 2]));
/// ```
pub trait MpfEnv {
    /// Stores `data` (`M[0..N]`) for this filter, to be forgotten
    /// `timeout_ms` milliseconds of packet time from now.
    fn register(&mut self, data: &[u32], timeout_ms: u32);
    /// Whether this filter registered `data` and it has not expired.
    fn lookup(&mut self, data: &[u32]) -> bool;
}

/// An environment with no registered data that ignores registrations.
///
/// ```
/// use sluice_bpf::mpf::{MpfEnv, NoData};
/// NoData.register(&[1], 5);
/// assert!(!NoData.lookup(&[1]));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct NoData;

impl MpfEnv for NoData {
    fn register(&mut self, _data: &[u32], _timeout_ms: u32) {}
    fn lookup(&mut self, _data: &[u32]) -> bool {
        false
    }
}

/// The result of running an MPF program on one packet.
///
/// ```
/// use sluice_bpf::mpf::MpfVerdict;
/// assert!(MpfVerdict::Return(0).is_reject());
/// assert!(!MpfVerdict::Postpone { timeout_ms: 1 }.is_reject());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MpfVerdict {
    /// The program returned this value: 0 rejects, otherwise the number
    /// of bytes to deliver.
    Return(u32),
    /// The program executed `postpone`.
    Postpone {
        /// The instruction's timeout in milliseconds.
        timeout_ms: u32,
    },
}

impl MpfVerdict {
    /// Whether the packet is rejected (returned 0).
    ///
    /// ```
    /// assert!(!sluice_bpf::mpf::MpfVerdict::Return(1).is_reject());
    /// ```
    pub fn is_reject(&self) -> bool {
        *self == MpfVerdict::Return(0)
    }
}

/// Whether the `n` key words after `at` equal `mem[0..n]`; `None` when
/// they are not all there or `n` is more than 16.
///
/// ```
/// use sluice_bpf::{Insn, mpf::keys_match};
/// let prog = [Insn::stmt(0x106, 1), Insn::stmt(0x100, 5)];
/// let mut mem = [0; 16];
/// mem[0] = 5;
/// assert_eq!(keys_match(&prog, 0, 1, &mem), Some(true));
/// assert_eq!(keys_match(&prog, 0, 2, &mem), None);
/// ```
#[inline]
pub fn keys_match(prog: &[Insn], at: usize, n: usize, mem: &[u32; 16]) -> Option<bool> {
    let keys = prog.get(at + 1..at.checked_add(1 + n)?)?;
    let words = mem.get(..n)?;
    let mut eq = true;
    for (key, &w) in keys.iter().zip(words) {
        if key.code != MPF_KEY {
            return None;
        }
        eq &= key.k == w;
    }
    Some(eq)
}

/// The hook that gives one program MPF's semantics.
struct Single<'a, E> {
    prog: &'a [Insn],
    env: &'a mut E,
    matched: bool,
    postponed: Option<u32>,
}

impl<E: MpfEnv> ExtHook for Single<'_, E> {
    fn ext(&mut self, m: &mut Machine, insn: Insn, at: usize) -> ExtStep {
        match Ext::decode(&insn) {
            Some(Ext::RetMatchImm { n, ret }) => {
                match keys_match(self.prog, at, n as usize, &m.mem) {
                    Some(true) => ExtStep::Return(ret),
                    _ => ExtStep::Return(0),
                }
            }
            Some(Ext::JmpMatchImm { n, jt, jf }) => {
                let Some(eq) = keys_match(self.prog, at, n as usize, &m.mem) else {
                    return ExtStep::Return(0);
                };
                let base = at + 1 + n as usize;
                self.matched |= eq;
                m.pc = base + if eq { jt } else { jf } as usize;
                ExtStep::Continue
            }
            Some(Ext::RegisterData { n, timeout_ms }) => {
                let n = n as usize;
                if !self.matched || n == 0 || n > MPF_MAX_WORDS {
                    return ExtStep::Return(0);
                }
                self.env.register(&m.mem[..n], timeout_ms);
                ExtStep::Continue
            }
            Some(Ext::RetMatchData { n, ret }) => {
                let n = n as usize;
                if n == 0 || n > MPF_MAX_WORDS {
                    return ExtStep::Return(0);
                }
                if self.env.lookup(&m.mem[..n]) {
                    ExtStep::Return(ret)
                } else {
                    ExtStep::Continue
                }
            }
            Some(Ext::Postpone { timeout_ms }) => {
                self.postponed = Some(timeout_ms);
                ExtStep::Return(0)
            }
            Some(Ext::Key(_)) | None => ExtStep::Return(0),
        }
    }
}

/// Runs a program with MPF's semantics on one packet: classic instructions
/// as [`crate::run`], extensions as the module documentation says, with
/// `env` as this filter's registered data.
///
/// Any input is accepted and nothing panics: where the program is not
/// valid (a key word executed, too few keys, `register_data` before a
/// match) the result is `Return(0)`, like [`crate::run`]'s undefined cases.
///
/// ```
/// use sluice_bpf::{parse_program, mpf::{run_mpf, MpfVerdict, NoData}};
/// let p = parse_program("ld #5\nst M[0]\nret_match_data #1, #9\npostpone #20\n").unwrap();
/// assert_eq!(run_mpf(&p, &[], 0, &mut NoData), MpfVerdict::Postpone { timeout_ms: 20 });
/// ```
pub fn run_mpf<E: MpfEnv>(prog: &[Insn], pkt: &[u8], wirelen: u32, env: &mut E) -> MpfVerdict {
    let mut hook = Single {
        prog,
        env,
        matched: false,
        postponed: None,
    };
    let r = run_ext(&mut Machine::default(), prog, pkt, wirelen, &mut hook);
    match hook.postponed {
        Some(timeout_ms) => MpfVerdict::Postpone { timeout_ms },
        None => MpfVerdict::Return(r),
    }
}

/// The `-d` listing of a program with MPF's mnemonics for the extension
/// instructions (`ret_match_imm #3, #262144`, `key #0xa000001`, ...);
/// classic instructions print as [`crate::disasm_d`] prints them, which
/// stays libpcap's `bpf_image` exactly (`unimp 0x106`). [`crate::parse_d`]
/// reads both.
///
/// ```
/// use sluice_bpf::{parse_program, mpf::disasm};
/// let text = "(000) ret_match_imm #1, #262144\n(001) key      #0x50\n";
/// let prog = parse_program(text).unwrap();
/// assert_eq!(disasm(&prog), text);
/// assert_eq!(sluice_bpf::disasm_d(&prog), "(000) unimp    0x106\n(001) unimp    0x100\n");
/// ```
pub fn disasm(prog: &[Insn]) -> String {
    crate::text::disasm_d_mpf(prog)
}

/// Why an MPF program text could not be loaded.
///
/// ```
/// let e = sluice_bpf::mpf::MpfProgram::parse("key #1\nret #0\n").unwrap_err();
/// assert_eq!(e.to_string(), "instruction 0: key word outside a match instruction");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MpfLoadError {
    /// The text is not a program.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The program breaks a rule of [`verify_mpf`].
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// A verified MPF program (plain classic BPF programs are MPF programs too).
///
/// ```
/// use sluice_bpf::mpf::{MpfProgram, MpfVerdict, NoData};
/// let p = MpfProgram::parse("ldb [0]\nst M[0]\nret_match_imm #1, #64\nkey #0x2a\n").unwrap();
/// assert_eq!(p.run(&[42], 1, &mut NoData), MpfVerdict::Return(64));
/// assert_eq!(p.run(&[41], 1, &mut NoData), MpfVerdict::Return(0));
/// assert_eq!(p.keys(), vec![42]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpfProgram {
    insns: Vec<Insn>,
    sites: Vec<KeySite>,
}

impl MpfProgram {
    /// Verifies a program with [`verify_mpf`].
    ///
    /// ```
    /// use sluice_bpf::{Insn, mpf::MpfProgram};
    /// assert!(MpfProgram::new(&[Insn::stmt(0x06, 1)]).is_ok());
    /// assert!(MpfProgram::new(&[Insn::stmt(0x100, 1)]).is_err());
    /// ```
    pub fn new(insns: &[Insn]) -> Result<MpfProgram, VerifyError> {
        let sites = verify_mpf(insns)?;
        Ok(MpfProgram {
            insns: insns.to_vec(),
            sites,
        })
    }

    /// Parses (any of the `-d`, `-dd`, `-ddd` forms) and verifies.
    ///
    /// ```
    /// assert!(sluice_bpf::mpf::MpfProgram::parse("postpone #10\n").is_ok());
    /// ```
    pub fn parse(text: &str) -> Result<MpfProgram, MpfLoadError> {
        Ok(MpfProgram::new(&parse_program(text)?)?)
    }

    /// The instructions, key words included.
    ///
    /// ```
    /// let p = sluice_bpf::mpf::MpfProgram::parse("ret #1\n").unwrap();
    /// assert_eq!(p.insns().len(), 1);
    /// ```
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The match instructions with keys, in program order.
    ///
    /// ```
    /// let p = sluice_bpf::mpf::MpfProgram::parse("ret #1\n").unwrap();
    /// assert!(p.key_sites().is_empty());
    /// ```
    pub fn key_sites(&self) -> &[KeySite] {
        &self.sites
    }

    /// Every key immediate, site by site in program order.
    ///
    /// ```
    /// let p = sluice_bpf::mpf::MpfProgram::parse(
    ///     "ld #0\nst M[0]\nst M[1]\nret_match_imm #2, #1\nkey #3\nkey #4\n").unwrap();
    /// assert_eq!(p.keys(), vec![3, 4]);
    /// ```
    pub fn keys(&self) -> Vec<u32> {
        let mut out = Vec::new();
        for s in &self.sites {
            out.extend(self.insns[s.pc + 1..=s.pc + s.n].iter().map(|i| i.k));
        }
        out
    }

    /// The program with every key immediate set to 0: programs with the
    /// same shape differ only in their keys and can be collapsed (MPF §2).
    ///
    /// ```
    /// use sluice_bpf::mpf::MpfProgram;
    /// let a = MpfProgram::parse("ld #0\nst M[0]\nret_match_imm #1, #1\nkey #3\n").unwrap();
    /// let b = MpfProgram::parse("ld #0\nst M[0]\nret_match_imm #1, #1\nkey #4\n").unwrap();
    /// assert_eq!(a.shape(), b.shape());
    /// ```
    pub fn shape(&self) -> Vec<Insn> {
        let mut out = self.insns.clone();
        for s in &self.sites {
            for i in &mut out[s.pc + 1..=s.pc + s.n] {
                i.k = 0;
            }
        }
        out
    }

    /// Whether the program uses no MPF instruction (it is classic BPF).
    ///
    /// ```
    /// assert!(sluice_bpf::mpf::MpfProgram::parse("ret #1\n").unwrap().is_classic());
    /// ```
    pub fn is_classic(&self) -> bool {
        self.insns.iter().all(|i| Ext::decode(i).is_none())
    }

    /// Runs the program on a packet ([`run_mpf`]).
    ///
    /// ```
    /// use sluice_bpf::mpf::{MpfProgram, MpfVerdict, NoData};
    /// let p = MpfProgram::parse("ld #pktlen\nret a\n").unwrap();
    /// assert_eq!(p.run(&[], 60, &mut NoData), MpfVerdict::Return(60));
    /// ```
    pub fn run<E: MpfEnv>(&self, pkt: &[u8], wirelen: u32, env: &mut E) -> MpfVerdict {
        run_mpf(&self.insns, pkt, wirelen, env)
    }
}

#[cfg(test)]
mod tests;
