//! The three text forms of `tcpdump -d`, `-dd` and `-ddd`: printing and
//! parsing.

use crate::insn::Insn;
use std::fmt::Write as _;

/// libpcap's names for the Linux "ancillary data" offsets
/// (`SKF_AD_OFF + 4 * i`), printed instead of the number in absolute loads.
const ANCILLARY: [&str; 16] = [
    "proto",
    "type",
    "ifidx",
    "nla",
    "nlan",
    "mark",
    "queue",
    "hatype",
    "rxhash",
    "cpu",
    "xor_x",
    "vlan_tci",
    "vlanp",
    "poff",
    "random",
    "vlan_tpid",
];

/// `SKF_AD_OFF`: the start of Linux's ancillary data offsets.
const SKF_AD_OFF: u32 = 0xffff_f000;

fn abs_operand(k: u32) -> String {
    let rel = k.wrapping_sub(SKF_AD_OFF);
    if rel < 64 && rel % 4 == 0 {
        format!("[{}]", ANCILLARY[(rel / 4) as usize])
    } else {
        format!("[{}]", k as i32)
    }
}

/// Mnemonic and operand of one instruction, as libpcap's `bpf_image` prints
/// them. `n` is the instruction's index (used by `ja`).
fn mnemonic(insn: &Insn, n: usize) -> (&'static str, String) {
    let k = insn.k;
    let s = k as i32;
    let hex = || format!("#0x{k:x}");
    let dec = || format!("#{s}");
    let x = || "x".to_string();
    let none = String::new;
    match insn.code {
        0x06 => ("ret", dec()),
        0x16 => ("ret", none()),
        0x20 => ("ld", abs_operand(k)),
        0x28 => ("ldh", abs_operand(k)),
        0x30 => ("ldb", abs_operand(k)),
        0x80 => ("ld", "#pktlen".into()),
        0x81 => ("ldx", "#pktlen".into()),
        0x40 => ("ld", format!("[x + {s}]")),
        0x48 => ("ldh", format!("[x + {s}]")),
        0x50 => ("ldb", format!("[x + {s}]")),
        0x00 => ("ld", hex()),
        0x01 => ("ldx", hex()),
        0xb1 => ("ldxb", format!("4*([{s}]&0xf)")),
        0x60 => ("ld", format!("M[{s}]")),
        0x61 => ("ldx", format!("M[{s}]")),
        0x02 => ("st", format!("M[{s}]")),
        0x03 => ("stx", format!("M[{s}]")),
        0x05 => {
            let target = (n as u32).wrapping_add(1).wrapping_add(k) as i32;
            ("ja", target.to_string())
        }
        0x15 => ("jeq", hex()),
        0x25 => ("jgt", hex()),
        0x35 => ("jge", hex()),
        0x45 => ("jset", hex()),
        0x1d => ("jeq", x()),
        0x2d => ("jgt", x()),
        0x3d => ("jge", x()),
        0x4d => ("jset", x()),
        0x04 => ("add", dec()),
        0x14 => ("sub", dec()),
        0x24 => ("mul", dec()),
        0x34 => ("div", dec()),
        0x94 => ("mod", dec()),
        0x54 => ("and", hex()),
        0x44 => ("or", hex()),
        0xa4 => ("xor", hex()),
        0x64 => ("lsh", dec()),
        0x74 => ("rsh", dec()),
        0x0c => ("add", x()),
        0x1c => ("sub", x()),
        0x2c => ("mul", x()),
        0x3c => ("div", x()),
        0x9c => ("mod", x()),
        0x5c => ("and", x()),
        0x4c => ("or", x()),
        0xac => ("xor", x()),
        0x6c => ("lsh", x()),
        0x7c => ("rsh", x()),
        0x84 => ("neg", none()),
        0x07 => ("tax", none()),
        0x87 => ("txa", none()),
        c => ("unimp", format!("0x{c:x}")),
    }
}

/// Mnemonic and operands of an MPF extension instruction.
fn mpf_mnemonic(e: crate::mpf::Ext) -> (&'static str, String) {
    use crate::mpf::Ext;
    match e {
        Ext::Key(v) => ("key", format!("#0x{v:x}")),
        Ext::RetMatchImm { n, ret } => ("ret_match_imm", format!("#{n}, #{}", ret as i32)),
        Ext::JmpMatchImm { n, .. } => ("jmp_match_imm", format!("#{n}")),
        Ext::RegisterData { n, timeout_ms } => ("register_data", format!("#{n}, #{timeout_ms}")),
        Ext::RetMatchData { n, ret } => ("ret_match_data", format!("#{n}, #{}", ret as i32)),
        Ext::Postpone { timeout_ms } => ("postpone", format!("#{timeout_ms}")),
    }
}

/// The slot that `jt`/`jf` of the instruction at `n` count from: the next
/// one, or for `jmp_match_imm` the one after its key words.
fn jump_base(insn: &Insn, n: usize) -> i64 {
    let keys = if insn.code == crate::insn::op::MPF_JMP_MATCH_IMM {
        insn.k as i64
    } else {
        0
    };
    n as i64 + 1 + keys
}

/// Whether libpcap prints `jt`/`jf` for this opcode: class JMP with a
/// non-`ja` operation (valid or not).
fn prints_targets(code: u16) -> bool {
    code & 0x07 == 0x05 && code & 0xf0 != 0
}

/// One line of `tcpdump -d` for instruction `n` (libpcap's `bpf_image`),
/// without a newline.
///
/// ```
/// use sluice_bpf::{image, Insn};
/// assert_eq!(image(&Insn::stmt(0x28, 12), 0), "(000) ldh      [12]");
/// assert_eq!(image(&Insn::jump(0x15, 0x86dd, 0, 6), 1),
///            "(001) jeq      #0x86dd          jt 2\tjf 8");
/// assert_eq!(image(&Insn::stmt(0x07, 0), 16), "(016) tax      ");
/// ```
pub fn image(insn: &Insn, n: usize) -> String {
    image_impl(insn, n, false)
}

/// [`image`], or with `mpf` the MPF mnemonics for canonical extension
/// instructions (and `jmp_match_imm`'s targets counted after its keys).
pub(crate) fn image_impl(insn: &Insn, n: usize, mpf: bool) -> String {
    let ext = if mpf {
        crate::mpf::Ext::decode(insn)
    } else {
        None
    };
    let (op, operand) = match ext {
        Some(e) => mpf_mnemonic(e),
        None => mnemonic(insn, n),
    };
    let base = if mpf {
        jump_base(insn, n)
    } else {
        n as i64 + 1
    };
    if prints_targets(insn.code) {
        let t = base + insn.jt as i64;
        let f = base + insn.jf as i64;
        format!("({n:03}) {op:<8} {operand:<16} jt {t}\tjf {f}")
    } else {
        format!("({n:03}) {op:<8} {operand}")
    }
}

/// The `tcpdump -d` listing: one [`image`] line per instruction, each ending
/// in a newline.
///
/// ```
/// use sluice_bpf::{disasm_d, Insn};
/// let p = [Insn::stmt(0x28, 12), Insn::stmt(0x06, 262144)];
/// assert_eq!(disasm_d(&p), "(000) ldh      [12]\n(001) ret      #262144\n");
/// ```
pub fn disasm_d(prog: &[Insn]) -> String {
    let mut out = String::with_capacity(prog.len() * 32);
    for (n, i) in prog.iter().enumerate() {
        out.push_str(&image(i, n));
        out.push('\n');
    }
    out
}

/// The `-d` listing of an MPF program: like [`disasm_d`], but extension
/// instructions print with their MPF mnemonics (see [`crate::mpf`]).
pub(crate) fn disasm_d_mpf(prog: &[Insn]) -> String {
    let mut out = String::with_capacity(prog.len() * 32);
    for (n, i) in prog.iter().enumerate() {
        out.push_str(&image_impl(i, n, true));
        out.push('\n');
    }
    out
}

/// The `-d` listing with each line padded to 50 columns and followed by
/// `; 0x` and the 4-digit opcode, the form of libpcap's test expectations.
///
/// ```
/// use sluice_bpf::{disasm_d_annotated, Insn};
/// assert_eq!(disasm_d_annotated(&[Insn::stmt(0x06, 15)]),
///            format!("{:<50}; 0x0006\n", "(000) ret      #15"));
/// ```
pub fn disasm_d_annotated(prog: &[Insn]) -> String {
    let mut out = String::with_capacity(prog.len() * 60);
    for (n, i) in prog.iter().enumerate() {
        let _ = writeln!(out, "{:<50}; 0x{:04x}", image(i, n), i.code);
    }
    out
}

/// The `tcpdump -dd` form: one C initializer per line.
///
/// ```
/// use sluice_bpf::{disasm_dd, Insn};
/// assert_eq!(disasm_dd(&[Insn::jump(0x15, 0x86dd, 0, 33)]),
///            "{ 0x15, 0, 33, 0x000086dd },\n");
/// ```
pub fn disasm_dd(prog: &[Insn]) -> String {
    let mut out = String::with_capacity(prog.len() * 32);
    for i in prog {
        let _ = writeln!(
            out,
            "{{ 0x{:x}, {}, {}, 0x{:08x} }},",
            i.code, i.jt, i.jf, i.k
        );
    }
    out
}

/// The `tcpdump -ddd` form: the instruction count, then `code jt jf k` in
/// decimal, one instruction per line.
///
/// ```
/// use sluice_bpf::{disasm_ddd, Insn};
/// assert_eq!(disasm_ddd(&[Insn::stmt(0x28, 12), Insn::stmt(0x06, 0)]),
///            "2\n40 0 0 12\n6 0 0 0\n");
/// ```
pub fn disasm_ddd(prog: &[Insn]) -> String {
    let mut out = String::with_capacity(prog.len() * 16 + 8);
    let _ = writeln!(out, "{}", prog.len());
    for i in prog {
        let _ = writeln!(out, "{} {} {} {}", i.code, i.jt, i.jf, i.k);
    }
    out
}

/// A text syntax error, with 1-based line and column: the positioned
/// error every language with program text shares
/// ([`sluice_ir::TextError`]).
///
/// ```
/// let e = sluice_bpf::parse_program("(000) frob     #1\n").unwrap_err();
/// assert_eq!((e.line, e.column), (1, 7));
/// assert_eq!(e.to_string(), "line 1, column 7: unknown mnemonic `frob`");
/// ```
pub type ParseError = sluice_ir::TextError;

/// The three text forms.
///
/// ```
/// use sluice_bpf::TextFormat;
/// assert_eq!(TextFormat::detect("{ 0x6, 0, 0, 0x00000000 },"), Some(TextFormat::Dd));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextFormat {
    /// `tcpdump -d`: `(000) ldh      [12]`.
    D,
    /// `tcpdump -dd`: `{ 0x28, 0, 0, 0x0000000c },`.
    Dd,
    /// `tcpdump -ddd`: count, then `40 0 0 12` lines.
    Ddd,
}

impl TextFormat {
    /// Guesses the form from the first non-blank character: `(` or a letter
    /// for `-d`, `{` for `-dd`, a digit for `-ddd`.
    ///
    /// ```
    /// use sluice_bpf::TextFormat;
    /// assert_eq!(TextFormat::detect("\n 4\n6 0 0 0\n"), Some(TextFormat::Ddd));
    /// assert_eq!(TextFormat::detect("ret #0"), Some(TextFormat::D));
    /// assert_eq!(TextFormat::detect("; a comment\n(000) ret #0"), Some(TextFormat::D));
    /// assert_eq!(TextFormat::detect(""), None);
    /// ```
    pub fn detect(text: &str) -> Option<TextFormat> {
        // Lines that are only a `;` comment (allowed in the `-d` form) do
        // not decide.
        let c = text
            .lines()
            .map(str::trim_start)
            .find(|l| !l.is_empty() && !l.starts_with(';'))?
            .chars()
            .next()?;
        match c {
            '(' => Some(TextFormat::D),
            '{' => Some(TextFormat::Dd),
            c if c.is_ascii_digit() => Some(TextFormat::Ddd),
            c if c.is_ascii_alphabetic() => Some(TextFormat::D),
            _ => None,
        }
    }
}

/// Parses a program in any of the three forms, detected with
/// [`TextFormat::detect`].
///
/// ```
/// use sluice_bpf::{parse_program, Insn};
/// let want = vec![Insn::stmt(0x28, 12), Insn::stmt(0x06, 0)];
/// assert_eq!(parse_program("(000) ldh      [12]\n(001) ret      #0\n").unwrap(), want);
/// assert_eq!(parse_program("{ 0x28, 0, 0, 0x0000000c },\n{ 0x6, 0, 0, 0x00000000 },\n").unwrap(), want);
/// assert_eq!(parse_program("2\n40 0 0 12\n6 0 0 0\n").unwrap(), want);
/// ```
pub fn parse_program(text: &str) -> Result<Vec<Insn>, ParseError> {
    match TextFormat::detect(text) {
        Some(TextFormat::D) => parse_d(text),
        Some(TextFormat::Dd) => parse_dd(text),
        Some(TextFormat::Ddd) => parse_ddd(text),
        None => {
            let message = if text.trim().is_empty() {
                "empty program text"
            } else {
                "unrecognized program format (expected tcpdump -d, -dd or -ddd output)"
            };
            Err(first_non_blank(text, message))
        }
    }
}

/// An error at the text's first non-blank character (at the start of
/// its last line if it has none).
fn first_non_blank(text: &str, message: &str) -> ParseError {
    for (ln, line) in text.lines().enumerate() {
        if let Some(at) = line.find(|c: char| !c.is_whitespace()) {
            return ParseError::in_line(ln + 1, line, at, message);
        }
    }
    ParseError::in_line(text.lines().count().max(1), "", 0, message)
}

/// An error on line `line`, at byte `byte` of its text `text`.
fn err<T>(
    line: usize,
    text: &str,
    byte: usize,
    message: impl Into<String>,
) -> Result<T, ParseError> {
    Err(ParseError::in_line(line, text, byte, message))
}

/// Byte offset of `sub` (a subslice of `line`) within `line`.
fn offset_in(line: &str, sub: &str) -> usize {
    (sub.as_ptr() as usize).saturating_sub(line.as_ptr() as usize)
}

/// Parses a number: decimal or `0x` hexadecimal, optionally negative
/// (wrapped to 32 bits, as `%d` prints).
fn parse_num(s: &str) -> Option<u32> {
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let v: u64 = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        if h.is_empty() || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(h, 16).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()?
    };
    if neg {
        if v > 1 << 31 {
            return None;
        }
        Some((v as u32).wrapping_neg())
    } else {
        u32::try_from(v).ok()
    }
}

/// Parses a decimal integer, possibly negative, as i64.
fn parse_int(s: &str) -> Option<i64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operand {
    Empty,
    Imm(u32),
    PktLen,
    Abs(u32),
    Ind(u32),
    Mem(u32),
    Msh(u32),
    X,
    A,
    Num(u32),
}

fn parse_operand(s: &str) -> Option<Operand> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let lower = t.to_ascii_lowercase();
    if t.is_empty() {
        return Some(Operand::Empty);
    }
    if lower == "x" {
        return Some(Operand::X);
    }
    if lower == "a" {
        return Some(Operand::A);
    }
    if lower == "#pktlen" || lower == "#len" || lower == "len" {
        return Some(Operand::PktLen);
    }
    if let Some(n) = t.strip_prefix('#') {
        return parse_num(n).map(Operand::Imm);
    }
    if let Some(inner) = lower
        .strip_prefix("4*([")
        .and_then(|r| r.strip_suffix("]&0xf)"))
    {
        return parse_num(inner).map(Operand::Msh);
    }
    if let Some(inner) = lower.strip_prefix("m[").and_then(|r| r.strip_suffix(']')) {
        return parse_num(inner).map(Operand::Mem);
    }
    if let Some(inner) = lower.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        if let Some(off) = inner.strip_prefix("x+") {
            return parse_num(off).map(Operand::Ind);
        }
        if let Some(i) = ANCILLARY.iter().position(|&n| n == inner) {
            return Some(Operand::Abs(SKF_AD_OFF + 4 * i as u32));
        }
        return parse_num(inner).map(Operand::Abs);
    }
    parse_num(&lower).map(Operand::Num)
}

/// Parses `tcpdump -d` text (libpcap's `bpf_image` lines).
///
/// Whitespace is free, the `(NNN)` prefix is optional (when present it must
/// equal the line's position), and anything from `;` to the end of the line
/// is a comment, so libpcap's `; 0x0028` annotations are accepted. Jump
/// targets are absolute, as printed.
///
/// ```
/// use sluice_bpf::{parse_d, Insn};
/// let p = parse_d("(000) ldxb     4*([14]&0xf)    ; 0x00b1\n(001) jeq  x  jt 2 jf 2\n(002) ret\n").unwrap();
/// assert_eq!(p, vec![Insn::stmt(0xb1, 14), Insn::jump(0x1d, 0, 0, 0), Insn::stmt(0x16, 0)]);
/// ```
pub fn parse_d(text: &str) -> Result<Vec<Insn>, ParseError> {
    let mut prog = Vec::new();
    for (ln, raw) in text.lines().enumerate() {
        let ln = ln + 1;
        let line = match raw.find(';') {
            Some(p) => &raw[..p],
            None => raw,
        };
        let mut rest = line.trim_start();
        if rest.trim().is_empty() {
            continue;
        }
        let n = prog.len();
        if let Some(after) = rest.strip_prefix('(') {
            let close = match after.find(')') {
                Some(c) => c,
                None => {
                    return err(
                        ln,
                        raw,
                        offset_in(raw, rest),
                        "missing `)` after instruction number",
                    )
                }
            };
            let num = after[..close].trim();
            match parse_int(num) {
                Some(v) if v == n as i64 => {}
                Some(v) => {
                    return err(
                        ln,
                        raw,
                        offset_in(raw, num),
                        format!("instruction number {v} does not match its position {n}"),
                    )
                }
                None => return err(ln, raw, offset_in(raw, after), "bad instruction number"),
            }
            rest = after[close + 1..].trim_start();
        }
        let mlen = rest
            .find(|c: char| !c.is_ascii_alphabetic() && c != '_')
            .unwrap_or(rest.len());
        let mnem_str = &rest[..mlen];
        let mnem_at = offset_in(raw, rest);
        if mnem_str.is_empty() {
            return err(ln, raw, mnem_at, "expected a mnemonic");
        }
        let mnem = mnem_str.to_ascii_lowercase();
        let mut body = &rest[mlen..];
        // Optional `jt N jf N` at the end.
        let mut targets: Option<(i64, i64, usize)> = None;
        if let Some(p) = find_word(body, "jt") {
            let tail = &body[p..];
            let toks: Vec<&str> = tail.split_whitespace().collect();
            let at = offset_in(raw, tail);
            if toks.len() != 4 || !toks[2].eq_ignore_ascii_case("jf") {
                return err(ln, raw, at, "expected `jt <target> jf <target>`");
            }
            let t = parse_int(toks[1]);
            let f = parse_int(toks[3]);
            match (t, f) {
                (Some(t), Some(f)) => targets = Some((t, f, at)),
                _ => return err(ln, raw, at, "bad jump target"),
            }
            body = &body[..p];
        }
        let operand_str = body.trim();
        let op_at = if operand_str.is_empty() {
            offset_in(raw, body)
        } else {
            offset_in(raw, operand_str)
        };
        if let Some(insn) = parse_mpf(&mnem, operand_str, targets, n, ln, raw, op_at)? {
            prog.push(insn);
            continue;
        }
        let operand = match parse_operand(operand_str) {
            Some(o) => o,
            None => {
                return err(
                    ln,
                    raw,
                    op_at,
                    format!("bad operand `{operand_str}` for `{mnem}`"),
                )
            }
        };
        use Operand::*;
        let alu = |kc: u16| -> Option<(u16, u32)> {
            match operand {
                Imm(k) => Some((kc, k)),
                X => Some((kc | 0x08, 0)),
                _ => None,
            }
        };
        let cond = |kc: u16| -> Option<(u16, u32)> {
            match operand {
                Imm(k) => Some((kc, k)),
                X => Some((kc | 0x08, 0)),
                _ => None,
            }
        };
        let found: Option<(u16, u32)> = match mnem.as_str() {
            "ld" => match operand {
                Imm(k) => Some((0x00, k)),
                PktLen => Some((0x80, 0)),
                Abs(k) => Some((0x20, k)),
                Ind(k) => Some((0x40, k)),
                Mem(k) => Some((0x60, k)),
                _ => None,
            },
            "ldh" => match operand {
                Abs(k) => Some((0x28, k)),
                Ind(k) => Some((0x48, k)),
                _ => None,
            },
            "ldb" => match operand {
                Abs(k) => Some((0x30, k)),
                Ind(k) => Some((0x50, k)),
                _ => None,
            },
            "ldx" => match operand {
                Imm(k) => Some((0x01, k)),
                PktLen => Some((0x81, 0)),
                Mem(k) => Some((0x61, k)),
                Msh(k) => Some((0xb1, k)),
                _ => None,
            },
            "ldxb" => match operand {
                Msh(k) => Some((0xb1, k)),
                _ => None,
            },
            "st" => match operand {
                Mem(k) => Some((0x02, k)),
                _ => None,
            },
            "stx" => match operand {
                Mem(k) => Some((0x03, k)),
                _ => None,
            },
            "add" => alu(0x04),
            "sub" => alu(0x14),
            "mul" => alu(0x24),
            "div" => alu(0x34),
            "mod" => alu(0x94),
            "and" => alu(0x54),
            "or" => alu(0x44),
            "xor" => alu(0xa4),
            "lsh" => alu(0x64),
            "rsh" => alu(0x74),
            "neg" => (operand == Empty).then_some((0x84, 0)),
            "tax" => (operand == Empty).then_some((0x07, 0)),
            "txa" => (operand == Empty).then_some((0x87, 0)),
            "ret" => match operand {
                Imm(k) => Some((0x06, k)),
                Empty | A => Some((0x16, 0)),
                _ => None,
            },
            "ja" | "jmp" => match operand {
                Num(t) => Some((0x05, t.wrapping_sub(n as u32).wrapping_sub(1))),
                _ => None,
            },
            "jeq" => cond(0x15),
            "jgt" => cond(0x25),
            "jge" => cond(0x35),
            "jset" => cond(0x45),
            "unimp" => match operand {
                Num(c) if c <= 0xffff => Some((c as u16, 0)),
                _ => None,
            },
            _ => return err(ln, raw, mnem_at, format!("unknown mnemonic `{mnem_str}`")),
        };
        let Some((code, k)) = found else {
            return err(
                ln,
                raw,
                op_at,
                format!("bad operand `{operand_str}` for `{mnem}`"),
            );
        };
        let mut insn = Insn::stmt(code, k);
        if crate::mpf::Ext::decode(&insn).is_some() && code != crate::insn::op::MPF_JMP_MATCH_IMM {
            // `unimp` names an MPF opcode only when its encoding is not
            // canonical (that is how it printed): keep it so.
            insn.jf = 1;
        }
        match targets {
            Some((t, f, at)) => {
                if !prints_targets(code) {
                    return err(ln, raw, at, format!("`{mnem}` takes no jt/jf"));
                }
                let base = n as i64 + 1;
                for (v, slot) in [(t, &mut insn.jt), (f, &mut insn.jf)] {
                    let off = v - base;
                    if !(0..=255).contains(&off) {
                        return err(
                            ln,
                            raw,
                            at,
                            format!("jump target {v} is not 0..=255 instructions after {n}"),
                        );
                    }
                    *slot = off as u8;
                }
            }
            None => {
                if prints_targets(code) {
                    return err(
                        ln,
                        raw,
                        raw.trim_end().len(),
                        format!("`{mnem}` needs `jt <target> jf <target>`"),
                    );
                }
            }
        }
        prog.push(insn);
    }
    Ok(prog)
}

/// Parses one MPF extension line (`None` if `mnem` is not one of them):
/// `#`-prefixed numbers separated by commas, and `jt`/`jf` for
/// `jmp_match_imm` (absolute, counted from the slot after its keys).
fn parse_mpf(
    mnem: &str,
    operand_str: &str,
    targets: Option<(i64, i64, usize)>,
    n: usize,
    ln: usize,
    raw: &str,
    op_at: usize,
) -> Result<Option<Insn>, ParseError> {
    use crate::mpf::Ext;
    let arity = match mnem {
        "key" | "jmp_match_imm" | "postpone" => 1,
        "ret_match_imm" | "register_data" | "ret_match_data" => 2,
        _ => return Ok(None),
    };
    let usage = || match arity {
        1 => format!("`{mnem}` takes one operand `#N`"),
        _ => format!("`{mnem}` takes two operands `#N, #M`"),
    };
    let mut args = Vec::with_capacity(2);
    for part in operand_str.split(',') {
        let p = part.trim();
        match p.strip_prefix('#').and_then(|d| parse_num(d.trim())) {
            Some(v) => args.push(v),
            None => return err(ln, raw, op_at, usage()),
        }
    }
    if args.len() != arity {
        return err(ln, raw, op_at, usage());
    }
    let small = |v: u32| -> Result<u8, ParseError> {
        match u8::try_from(v) {
            Ok(b) => Ok(b),
            Err(_) => err(
                ln,
                raw,
                op_at,
                format!("`{mnem}` covers at most 255 words, not {v}"),
            ),
        }
    };
    let ext = match mnem {
        "key" => Ext::Key(args[0]),
        "postpone" => Ext::Postpone {
            timeout_ms: args[0],
        },
        "ret_match_imm" => Ext::RetMatchImm {
            n: small(args[0])?,
            ret: args[1],
        },
        "register_data" => Ext::RegisterData {
            n: small(args[0])?,
            timeout_ms: args[1],
        },
        "ret_match_data" => Ext::RetMatchData {
            n: small(args[0])?,
            ret: args[1],
        },
        _ => Ext::JmpMatchImm {
            n: args[0],
            jt: 0,
            jf: 0,
        },
    };
    let mut insn = ext.encode();
    match (targets, mnem == "jmp_match_imm") {
        (Some((t, f, at)), true) => {
            let base = jump_base(&insn, n);
            for (v, slot) in [(t, &mut insn.jt), (f, &mut insn.jf)] {
                let off = v - base;
                if !(0..=255).contains(&off) {
                    return err(
                        ln,
                        raw,
                        at,
                        format!("jump target {v} is not 0..=255 instructions after {base}"),
                    );
                }
                *slot = off as u8;
            }
        }
        (None, true) => {
            return err(
                ln,
                raw,
                raw.trim_end().len(),
                format!("`{mnem}` needs `jt <target> jf <target>`"),
            )
        }
        (Some((_, _, at)), false) => return err(ln, raw, at, format!("`{mnem}` takes no jt/jf")),
        (None, false) => {}
    }
    Ok(Some(insn))
}

/// Position of `word` in `s` as a whole word (preceded by whitespace).
fn find_word(s: &str, word: &str) -> Option<usize> {
    let lower = s.to_ascii_lowercase();
    let mut from = 0;
    while let Some(p) = lower[from..].find(word) {
        let p = from + p;
        let before_ok = p == 0 || lower.as_bytes()[p - 1].is_ascii_whitespace();
        let after_ok = lower
            .as_bytes()
            .get(p + word.len())
            .map_or(true, |b| b.is_ascii_whitespace());
        if before_ok && after_ok {
            return Some(p);
        }
        from = p + word.len();
    }
    None
}

fn field<T: TryFrom<u32>>(
    ln: usize,
    raw: &str,
    tok: &str,
    what: &str,
    hex_ok: bool,
) -> Result<T, ParseError> {
    let v = if hex_ok {
        parse_num(tok).filter(|_| !tok.starts_with('-'))
    } else {
        parse_int(tok).and_then(|v| u32::try_from(v).ok())
    };
    match v.and_then(|v| T::try_from(v).ok()) {
        Some(v) => Ok(v),
        None => err(ln, raw, offset_in(raw, tok), format!("bad {what} `{tok}`")),
    }
}

/// Parses `tcpdump -dd` text: `{ code, jt, jf, k },` groups, numbers in
/// decimal or `0x` hex, any whitespace, trailing comma optional.
///
/// ```
/// use sluice_bpf::{parse_dd, Insn};
/// assert_eq!(parse_dd("{ 0x28, 0, 0, 0x0000000c },\n{0x6,0,0,0}").unwrap(),
///            vec![Insn::stmt(0x28, 12), Insn::stmt(6, 0)]);
/// ```
pub fn parse_dd(text: &str) -> Result<Vec<Insn>, ParseError> {
    let mut prog = Vec::new();
    for (ln, raw) in text.lines().enumerate() {
        let ln = ln + 1;
        let mut rest = raw;
        loop {
            let t = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            if t.is_empty() {
                break;
            }
            let Some(inner) = t.strip_prefix('{') else {
                return err(ln, raw, offset_in(raw, t), "expected `{`");
            };
            let Some(close) = inner.find('}') else {
                return err(ln, raw, raw.len(), "missing `}`");
            };
            let body = &inner[..close];
            let toks: Vec<&str> = body.split(',').map(str::trim).collect();
            if toks.len() != 4 || toks.iter().any(|t| t.is_empty()) {
                return err(
                    ln,
                    raw,
                    offset_in(raw, body),
                    "expected `{ code, jt, jf, k }`",
                );
            }
            let code: u16 = field(ln, raw, toks[0], "code", true)?;
            let jt: u8 = field(ln, raw, toks[1], "jt", true)?;
            let jf: u8 = field(ln, raw, toks[2], "jf", true)?;
            let k: u32 = field(ln, raw, toks[3], "k", true)?;
            prog.push(Insn { code, jt, jf, k });
            rest = &inner[close + 1..];
        }
    }
    Ok(prog)
}

/// Parses `tcpdump -ddd` text: the instruction count, then `code jt jf k`
/// in decimal per line. The one-line form with commas between the count
/// and the instructions (`4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0`) is accepted
/// too. The count must match.
///
/// ```
/// use sluice_bpf::{parse_ddd, Insn};
/// assert_eq!(parse_ddd("1\n6 0 0 65535\n").unwrap(), vec![Insn::stmt(6, 65535)]);
/// assert_eq!(parse_ddd("1,6 0 0 1").unwrap(), vec![Insn::stmt(6, 1)]);
/// assert!(parse_ddd("2\n6 0 0 1\n").is_err());
/// ```
pub fn parse_ddd(text: &str) -> Result<Vec<Insn>, ParseError> {
    let mut count: Option<(u64, usize, usize)> = None;
    let mut prog = Vec::new();
    let mut last_line = 1;
    for (ln, raw) in text.lines().enumerate() {
        let ln = ln + 1;
        for rec in raw.split(',') {
            let toks: Vec<&str> = rec.split_whitespace().collect();
            if toks.is_empty() {
                continue;
            }
            last_line = ln;
            match count {
                None => {
                    if toks.len() != 1 {
                        return err(
                            ln,
                            raw,
                            offset_in(raw, toks[0]),
                            "expected the instruction count",
                        );
                    }
                    match parse_int(toks[0]).and_then(|v| u64::try_from(v).ok()) {
                        Some(c) => count = Some((c, ln, offset_in(raw, toks[0]))),
                        None => {
                            return err(
                                ln,
                                raw,
                                offset_in(raw, toks[0]),
                                format!("bad instruction count `{}`", toks[0]),
                            )
                        }
                    }
                }
                Some(_) => {
                    if toks.len() != 4 {
                        return err(ln, raw, offset_in(raw, toks[0]), "expected `code jt jf k`");
                    }
                    let code: u16 = field(ln, raw, toks[0], "code", false)?;
                    let jt: u8 = field(ln, raw, toks[1], "jt", false)?;
                    let jf: u8 = field(ln, raw, toks[2], "jf", false)?;
                    let k: u32 = field(ln, raw, toks[3], "k", false)?;
                    prog.push(Insn { code, jt, jf, k });
                }
            }
        }
    }
    match count {
        None => Err(ParseError {
            line: 1,
            column: 1,
            message: "empty program text".into(),
        }),
        Some((c, ln, at)) if c != prog.len() as u64 => {
            let raw = text.lines().nth(ln - 1).unwrap_or("");
            let _ = last_line;
            err(
                ln,
                raw,
                at,
                format!(
                    "instruction count {c} does not match the {} instructions that follow",
                    prog.len()
                ),
            )
        }
        Some(_) => Ok(prog),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Insn> {
        let mut p: Vec<Insn> = crate::VALID_CODES
            .iter()
            .enumerate()
            .map(|(n, &c)| {
                Insn::jump(
                    c,
                    (n as u32).wrapping_mul(0x9e37_79b9),
                    (n % 3) as u8,
                    (n % 5) as u8,
                )
            })
            .collect();
        p.push(Insn::jump(0x55, 1, 2, 3));
        p.push(Insn::stmt(0x105, 1));
        p.push(Insn::stmt(0x20, 0xffff_f000 + 48));
        p.push(Insn::stmt(0x28, 0xffff_f004));
        p
    }

    #[test]
    fn d_round_trip() {
        let prog = sample();
        let text = disasm_d(&prog);
        let back = parse_program(&text).unwrap();
        assert_eq!(disasm_d(&back), text);
        let ann = disasm_d_annotated(&prog);
        let back2 = parse_program(&ann).unwrap();
        assert_eq!(disasm_d_annotated(&back2), ann);
        assert_eq!(back, back2);
    }

    #[test]
    fn dd_ddd_round_trip_exactly() {
        let prog = sample();
        assert_eq!(parse_program(&disasm_dd(&prog)).unwrap(), prog);
        assert_eq!(parse_program(&disasm_ddd(&prog)).unwrap(), prog);
        assert_eq!(parse_dd(&disasm_dd(&prog)).unwrap(), prog);
        assert_eq!(parse_ddd(&disasm_ddd(&prog)).unwrap(), prog);
        assert_eq!(disasm_ddd(&[]), "0\n");
        assert_eq!(parse_ddd("0\n").unwrap(), vec![]);
    }

    #[test]
    fn images() {
        let cases = [
            (Insn::stmt(0xb1, 14), 13, "(013) ldxb     4*([14]&0xf)"),
            (Insn::stmt(0x48, 14), 14, "(014) ldh      [x + 14]"),
            (Insn::stmt(0x06, 262144), 18, "(018) ret      #262144"),
            (Insn::stmt(0x06, u32::MAX), 2, "(002) ret      #-1"),
            (
                Insn::stmt(0x04, 3_000_000_000),
                1,
                "(001) add      #-1294967296",
            ),
            (Insn::stmt(0x05, 4294967281), 18, "(018) ja       4"),
            (Insn::stmt(0x16, 0), 0, "(000) ret      "),
            (Insn::stmt(0x30, 0xffff_f030), 0, "(000) ldb      [vlanp]"),
            (Insn::stmt(0x30, 0xffff_f031), 0, "(000) ldb      [-4047]"),
            (
                Insn::jump(0x4d, 0, 0, 255),
                1000,
                "(1000) jset     x                jt 1001\tjf 1256",
            ),
        ];
        for (i, n, want) in cases {
            assert_eq!(image(&i, n), want);
        }
    }

    #[test]
    fn tolerant_d_parsing() {
        let text = "  (000)   ldh [ 12 ]\n\n(001) JEQ #2048 jt 2 jf 3 ; comment\n\
                    ret #1\n(003) ret\t#0x0\n";
        let p = parse_program(text).unwrap();
        assert_eq!(
            p,
            vec![
                Insn::stmt(0x28, 12),
                Insn::jump(0x15, 2048, 0, 1),
                Insn::stmt(0x06, 1),
                Insn::stmt(0x06, 0)
            ]
        );
        assert_eq!(
            parse_program("ldx 4*([14]&0xf)\nret a").unwrap()[0].code,
            0xb1
        );
        assert_eq!(parse_program("ld #-1\nret a").unwrap()[0].k, u32::MAX);
        assert_eq!(parse_program("unimp 0x81\nret a").unwrap()[0].code, 0x81);
    }

    #[test]
    fn errors_have_positions() {
        let e = |t: &str| parse_program(t).unwrap_err();
        let x = e("(000) ret      #0\n(002) ret      #0\n");
        assert_eq!((x.line, x.column), (2, 2), "{x}");
        let x = e("(000) ldh      [12\n");
        assert_eq!((x.line, x.column), (1, 16), "{x}");
        let x = e("(000) jeq      #1\n");
        assert!(x.message.contains("jt"), "{x}");
        let x = e("(000) jeq      #1  jt 0 jf 1\n");
        assert_eq!((x.line, x.column), (1, 20), "{x}");
        let x = e("(000) ret      #0  jt 1 jf 1\n");
        assert!(x.message.contains("no jt"), "{x}");
        let x = e("(000) ldh      M[1]\n");
        assert!(x.message.contains("bad operand"), "{x}");
        let x = e("{ 0x28, 0, 0, 0xc },\n{ 0x10000, 0, 0, 0 },\n");
        assert_eq!((x.line, x.column), (2, 3), "{x}");
        let x = e("{ 0x28, 0, 0 },\n");
        assert_eq!(x.line, 1, "{x}");
        let x = e("2\n6 0 0 0\n");
        assert!(x.message.contains("count 2"), "{x}");
        let x = e("1\n6 0 256 0\n");
        assert_eq!((x.line, x.column), (2, 5), "{x}");
        let x = e("1\n6 0 0\n");
        assert_eq!(x.line, 2, "{x}");
        let x = e("   \n");
        assert_eq!(x.message, "empty program text");
        let x = e("%%%");
        assert!(x.message.contains("unrecognized"), "{x}");
    }
}
