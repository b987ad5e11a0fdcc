//! The assembler and disassembler, in the notation of MPF's Appendix C.
//!
//! An instruction is a stack action, optionally followed by `|` and a
//! binary operation (the `|` may be left out), and by the literal `#value`
//! when the action is `pushlit`; an operation alone means `nopush | op`.
//! Line breaks do not matter, so the literal may sit on the next line as in
//! the appendix:
//!
//! ```text
//! pushword P[6]          ; the Ethernet type
//! pushlit | cand
//! #ETHERTYPE_IP          ; not IPv4: reject
//! pushstk + 0            ; duplicate the top (also: dup)
//! ```
//!
//! Actions: `nopush`, `pushlit`, `pushzero`, `pushone`, `pushffff`,
//! `pushff00`, `push00ff`, `pushind`, `pushword P[n]` (also `pushword n`,
//! `pushword + n`), `pushstk + n` (also `pushstk n`, `dup`). Operations:
//! `nop eq neq lt le gt ge and or xor cor cand cnor cnand lsh rsh add sub`.
//! Mnemonics are case-insensitive.
//!
//! Values are constant expressions over numbers (decimal, `0x`, `0b`,
//! `0o`), names, `+ - * & ^ << >>`, `~`/`!` (16-bit complement), unary `-`
//! and parentheses (`|` only inside parentheses, since it separates the
//! action from the operation). Directives: `.define NAME value`,
//! `.priority value` (0–255) and `.copy`. Comments: `;` to the end of the
//! line (in [`assemble`]; [`assemble_inline`] takes `;` as a separator
//! between instructions instead), `//` to the end of the line, and `/* */`.

use crate::{Action, Error, Insn, Op, Program, MAX_PUSHSTK, MAX_PUSHWORD};
use std::collections::HashMap;

/// A syntax error, with its line and column (both from 1; columns count
/// characters): the positioned error every language with program text
/// shares ([`sluice_ir::TextError`]).
///
/// ```
/// let e = sluice_cspf::assemble("pushword P[6]\n  pushlt | cand #1").unwrap_err();
/// assert!(e.to_string().starts_with("line 2, column 3"));
/// ```
pub type AsmError = sluice_ir::TextError;

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Ident(String),
    Directive(String),
    Num(u64),
    Sym(&'static str),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    at: usize,
}

struct Lexer<'a> {
    text: &'a str,
    inline: bool,
}

const SYMS: [&str; 14] = [
    "<<", ">>", "|", "#", "[", "]", "(", ")", "+", "-", "*", "&", "^", "~",
];

impl<'a> Lexer<'a> {
    fn tokens(&self) -> Result<Vec<Token>, (usize, String)> {
        let b = self.text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c.is_ascii_whitespace() || (c == b';' && self.inline) {
                i += 1;
            } else if c == b';' || (c == b'/' && b.get(i + 1) == Some(&b'/')) {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
                let start = i;
                i += 2;
                loop {
                    if i + 1 >= b.len() {
                        return Err((start, "unterminated /* comment".into()));
                    }
                    if b[i] == b'*' && b[i + 1] == b'/' {
                        i += 2;
                        break;
                    }
                    i += 1;
                }
            } else if c.is_ascii_alphabetic() || c == b'_' || c == b'.' {
                let start = i;
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &self.text[start..i];
                let tok = match word.strip_prefix('.') {
                    Some("") => return Err((start, "'.' without a directive name".into())),
                    Some(d) => Tok::Directive(d.to_ascii_lowercase()),
                    None => Tok::Ident(word.to_string()),
                };
                out.push(Token { tok, at: start });
            } else if c.is_ascii_digit() {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let lit = self.text[start..i].replace('_', "");
                let lower = lit.to_ascii_lowercase();
                let parsed = if let Some(h) = lower.strip_prefix("0x") {
                    u64::from_str_radix(h, 16)
                } else if let Some(bin) = lower.strip_prefix("0b") {
                    u64::from_str_radix(bin, 2)
                } else if let Some(o) = lower.strip_prefix("0o") {
                    u64::from_str_radix(o, 8)
                } else {
                    lower.parse::<u64>()
                };
                let n = parsed.map_err(|_| (start, format!("bad number '{lit}'")))?;
                out.push(Token {
                    tok: Tok::Num(n),
                    at: start,
                });
            } else if c == b'!' {
                out.push(Token {
                    tok: Tok::Sym("~"),
                    at: i,
                });
                i += 1;
            } else if let Some(s) = SYMS.iter().find(|s| b[i..].starts_with(s.as_bytes())) {
                out.push(Token {
                    tok: Tok::Sym(s),
                    at: i,
                });
                i += s.len();
            } else {
                let ch = self.text[i..].chars().next().unwrap_or('?');
                return Err((i, format!("unexpected character '{ch}'")));
            }
        }
        Ok(out)
    }
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    pos: usize,
    names: HashMap<String, u64>,
}

/// Assemble a program written in the seed's notation; `;` starts a comment.
///
/// ```
/// let p = sluice_cspf::assemble(".define ETHERTYPE_IP 0x0800\n\
///     pushword P[6]   ; ethertype\n\
///     pushlit | cand\n\
///     #ETHERTYPE_IP\n").unwrap();
/// assert_eq!(p.words(), vec![22, (10 << 10) | 1, 0x0800]);
/// ```
pub fn assemble(text: &str) -> Result<Program, Error> {
    assemble_with(text, false)
}

/// Assemble a program written on one line, with `;` between instructions
/// (the form a command line or a filters file takes).
///
/// ```
/// let p = sluice_cspf::assemble_inline("pushword P[6]; pushlit | cand #0x800").unwrap();
/// assert_eq!(p.insns().len(), 2);
/// ```
pub fn assemble_inline(text: &str) -> Result<Program, Error> {
    assemble_with(text, true)
}

fn assemble_with(text: &str, inline: bool) -> Result<Program, Error> {
    let (insns, priority, copy) = parse(text, inline)?;
    let mut prog = Program::from_insns(insns)?;
    prog.priority = priority;
    prog.copy = copy;
    Ok(prog)
}

/// The instructions, priority and copy flag of a text, unverified.
pub(crate) fn parse(text: &str, inline: bool) -> Result<(Vec<Insn>, u8, bool), AsmError> {
    let toks = Lexer { text, inline }
        .tokens()
        .map_err(|(at, m)| AsmError::at(text, at, m))?;
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        names: HashMap::new(),
    };
    p.program()
}

fn action_of(name: &str) -> Option<Action> {
    Some(match name {
        "nopush" => Action::NoPush,
        "pushlit" => Action::PushLit(0),
        "pushzero" => Action::PushZero,
        "pushone" => Action::PushOne,
        "pushffff" => Action::PushFfff,
        "pushff00" => Action::PushFf00,
        "push00ff" => Action::Push00ff,
        "pushind" => Action::PushInd,
        "pushword" => Action::PushWord(0),
        "pushstk" => Action::PushStk(0),
        "dup" => Action::PushStk(0),
        _ => return None,
    })
}

fn is_reserved(name: &str) -> bool {
    let l = name.to_ascii_lowercase();
    action_of(&l).is_some()
        || Op::from_name(&l).is_some()
        || matches!(l.as_str(), "pushhdr" | "pushhdrind" | "p")
}

impl<'a> Parser<'a> {
    fn err<T>(&self, at: usize, message: impl Into<String>) -> Result<T, AsmError> {
        Err(AsmError::at(self.text, at, message))
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.text.len(), |t| t.at)
    }

    fn eat(&mut self, s: &str) -> bool {
        if matches!(self.peek(), Some(Tok::Sym(x)) if *x == s) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, s: &str) -> Result<(), AsmError> {
        if self.eat(s) {
            Ok(())
        } else {
            self.err(self.at(), format!("expected '{s}'"))
        }
    }

    fn program(&mut self) -> Result<(Vec<Insn>, u8, bool), AsmError> {
        let mut insns = Vec::new();
        let (mut priority, mut copy) = (0u8, false);
        while let Some(tok) = self.peek().cloned() {
            let at = self.at();
            match tok {
                Tok::Directive(d) => {
                    self.pos += 1;
                    match d.as_str() {
                        "define" => {
                            let name_at = self.at();
                            let Some(Tok::Ident(name)) = self.peek().cloned() else {
                                return self.err(name_at, "expected a name after .define");
                            };
                            self.pos += 1;
                            if is_reserved(&name) {
                                return self.err(name_at, format!("'{name}' is a mnemonic"));
                            }
                            if self.names.contains_key(&name) {
                                return self.err(name_at, format!("'{name}' is already defined"));
                            }
                            let v = self.expr()?;
                            self.names.insert(name, v);
                        }
                        "priority" => {
                            let v = self.expr()?;
                            priority = u8::try_from(v)
                                .or_else(|_| self.err(at, format!("priority {v} is above 255")))?;
                        }
                        "copy" => copy = true,
                        _ => return self.err(at, format!("unknown directive '.{d}'")),
                    }
                }
                Tok::Ident(name) => {
                    self.pos += 1;
                    insns.push(self.insn(&name, at)?);
                }
                Tok::Sym("#") => {
                    return self.err(at, "a literal '#...' follows only pushlit");
                }
                _ => return self.err(at, "expected an instruction"),
            }
        }
        Ok((insns, priority, copy))
    }

    fn insn(&mut self, name: &str, at: usize) -> Result<Insn, AsmError> {
        let lower = name.to_ascii_lowercase();
        if lower == "pushhdr" || lower == "pushhdrind" {
            return self.err(
                at,
                "header pushes are not supported: packet words start at the link header",
            );
        }
        let mut action = match action_of(&lower) {
            Some(a) => a,
            None => match Op::from_name(&lower) {
                Some(op) => return Ok(Insn::new(Action::NoPush, op)),
                None => return self.err(at, format!("unknown instruction '{name}'")),
            },
        };
        match action {
            Action::PushWord(_) => {
                let arg_at = self.at();
                let n = self.word_operand()?;
                if n > MAX_PUSHWORD as u64 {
                    return self.err(
                        arg_at,
                        format!("packet word {n} is beyond pushword's range (0-{MAX_PUSHWORD})"),
                    );
                }
                action = Action::PushWord(n as u16);
            }
            Action::PushStk(_) if lower == "pushstk" => {
                let arg_at = self.at();
                self.eat("+");
                let n = self.expr()?;
                if n > MAX_PUSHSTK as u64 {
                    return self.err(
                        arg_at,
                        format!("stack word {n} is beyond pushstk's range (0-{MAX_PUSHSTK})"),
                    );
                }
                action = Action::PushStk(n as u16);
            }
            _ => {}
        }
        let mut lit = None;
        if matches!(action, Action::PushLit(_)) && matches!(self.peek(), Some(Tok::Sym("#"))) {
            lit = Some(self.literal()?);
        }
        let mut op = Op::Nop;
        let bar = self.eat("|");
        let op_at = self.at();
        match self.peek().cloned() {
            Some(Tok::Ident(o)) => match Op::from_name(&o.to_ascii_lowercase()) {
                Some(found) => {
                    op = found;
                    self.pos += 1;
                }
                None if bar => return self.err(op_at, format!("unknown operation '{o}'")),
                None => {}
            },
            _ if bar => return self.err(op_at, "expected an operation after '|'"),
            _ => {}
        }
        if matches!(action, Action::PushLit(_)) {
            if lit.is_none() {
                if !matches!(self.peek(), Some(Tok::Sym("#"))) {
                    return self.err(self.at(), "pushlit needs its literal '#value'");
                }
                lit = Some(self.literal()?);
            }
            action = Action::PushLit(lit.unwrap_or(0));
        }
        Ok(Insn::new(action, op))
    }

    /// `P[n]`, `[n]`, `+ n` or `n`.
    fn word_operand(&mut self) -> Result<u64, AsmError> {
        if matches!(self.peek(), Some(Tok::Ident(p)) if p.eq_ignore_ascii_case("p")) {
            self.pos += 1;
            self.expect("[")?;
            let v = self.expr_full()?;
            self.expect("]")?;
            return Ok(v);
        }
        if self.eat("[") {
            let v = self.expr_full()?;
            self.expect("]")?;
            return Ok(v);
        }
        self.eat("+");
        self.expr()
    }

    fn literal(&mut self) -> Result<u16, AsmError> {
        self.expect("#")?;
        let at = self.at();
        let v = self.expr()?;
        u16::try_from(v)
            .or_else(|_| self.err(at, format!("literal {v:#x} does not fit in 16 bits")))
    }

    /// An expression without a top-level `|`.
    fn expr(&mut self) -> Result<u64, AsmError> {
        self.binary(0, false)
    }

    /// An expression where `|` is an operator (inside brackets).
    fn expr_full(&mut self) -> Result<u64, AsmError> {
        self.binary(0, true)
    }

    fn binary(&mut self, min: u8, bar: bool) -> Result<u64, AsmError> {
        let mut lhs = self.unary()?;
        loop {
            let (op, prec) = match self.peek() {
                Some(Tok::Sym("|")) if bar => ("|", 1),
                Some(Tok::Sym("^")) => ("^", 2),
                Some(Tok::Sym("&")) => ("&", 3),
                Some(Tok::Sym("<<")) => ("<<", 4),
                Some(Tok::Sym(">>")) => (">>", 4),
                Some(Tok::Sym("+")) => ("+", 5),
                Some(Tok::Sym("-")) => ("-", 5),
                Some(Tok::Sym("*")) => ("*", 6),
                _ => return Ok(lhs),
            };
            if prec < min {
                return Ok(lhs);
            }
            let at = self.at();
            self.pos += 1;
            let rhs = self.binary(prec + 1, bar)?;
            lhs = match op {
                "|" => lhs | rhs,
                "^" => lhs ^ rhs,
                "&" => lhs & rhs,
                "<<" => lhs
                    .checked_shl(rhs as u32)
                    .filter(|_| rhs < 64)
                    .unwrap_or(0),
                ">>" => lhs
                    .checked_shr(rhs as u32)
                    .filter(|_| rhs < 64)
                    .unwrap_or(0),
                "+" => lhs
                    .checked_add(rhs)
                    .map_or_else(|| self.err(at, "overflow"), Ok)?,
                "-" => lhs.wrapping_sub(rhs) & 0xffff_ffff,
                _ => lhs
                    .checked_mul(rhs)
                    .map_or_else(|| self.err(at, "overflow"), Ok)?,
            };
            if lhs > u32::MAX as u64 {
                return self.err(at, "value does not fit in 32 bits");
            }
        }
    }

    fn unary(&mut self) -> Result<u64, AsmError> {
        let at = self.at();
        match self.peek().cloned() {
            Some(Tok::Sym("~")) => {
                self.pos += 1;
                Ok(!self.unary()? & 0xffff)
            }
            Some(Tok::Sym("-")) => {
                self.pos += 1;
                Ok(self.unary()?.wrapping_neg() & 0xffff)
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let v = self.expr_full()?;
                self.expect(")")?;
                Ok(v)
            }
            Some(Tok::Num(n)) => {
                self.pos += 1;
                if n > u32::MAX as u64 {
                    return self.err(at, "value does not fit in 32 bits");
                }
                Ok(n)
            }
            Some(Tok::Ident(name)) => match self.names.get(&name) {
                Some(&v) => {
                    self.pos += 1;
                    Ok(v)
                }
                None if is_reserved(&name) => {
                    self.err(at, format!("expected a value, found '{name}'"))
                }
                None => self.err(at, format!("undefined name '{name}'")),
            },
            _ => self.err(at, "expected a value"),
        }
    }
}

/// The program as text that [`assemble`] reads back to the same words: one
/// instruction per line, `.priority`/`.copy` first when set.
///
/// ```
/// let p = sluice_cspf::assemble("pushword P[6] pushlit | cand #0x800 pushword P[7] pushzero | cnand").unwrap();
/// let text = sluice_cspf::disassemble(&p);
/// assert_eq!(text, "pushword P[6]\npushlit | cand #0x0800\npushword P[7]\npushzero | cnand\n");
/// assert_eq!(sluice_cspf::assemble(&text).unwrap(), p);
/// ```
pub fn disassemble(p: &Program) -> String {
    let mut out = String::new();
    if p.priority != 0 {
        out.push_str(&format!(".priority {}\n", p.priority));
    }
    if p.copy {
        out.push_str(".copy\n");
    }
    for i in p.insns() {
        let action = match i.action {
            Action::NoPush => "nopush".to_string(),
            Action::PushLit(_) => "pushlit".into(),
            Action::PushZero => "pushzero".into(),
            Action::PushOne => "pushone".into(),
            Action::PushFfff => "pushffff".into(),
            Action::PushFf00 => "pushff00".into(),
            Action::Push00ff => "push00ff".into(),
            Action::PushInd => "pushind".into(),
            Action::PushWord(n) => format!("pushword P[{n}]"),
            Action::PushStk(n) => format!("pushstk + {n}"),
        };
        let line = match (i.action, i.op) {
            (Action::NoPush, Op::Nop) => action,
            (Action::NoPush, op) => format!("nopush | {}", op.name()),
            (a, Op::Nop) => a
                .constant()
                .filter(|_| matches!(a, Action::PushLit(_)))
                .map_or(action.clone(), |k| format!("{action} #{k:#06x}")),
            (a, op) => match a {
                Action::PushLit(k) => format!("{action} | {} #{k:#06x}", op.name()),
                _ => format!("{action} | {}", op.name()),
            },
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}
