//! The parser: text to atoms, with positioned errors.

use crate::{Atom, Expr, Filter, Rel};
use sluice_ir::BinOp;

/// A syntax or type error, with its line and column (from 1; columns count
/// characters): the positioned error every language with program text
/// shares ([`sluice_ir::TextError`]).
///
/// ```
/// let e = sluice_dpf::parse("(12:16 == 0x800) &&\n (9:7 == 6)").unwrap_err();
/// assert_eq!((e.line, e.column), (2, 5));
/// assert!(e.to_string().contains("8, 16 or 32"));
/// ```
pub type ParseError = sluice_ir::TextError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Num(u32),
    Shift,
    Sym(&'static str),
}

const SYMS: [&str; 22] = [
    "&&", "==", "!=", "<=", ">=", "<<", ">>", "<", ">", "(", ")", ":", "+", "-", "*", "/", "%",
    "&", "|", "^", "~", "!",
];

/// What a sub-expression turned out to be.
enum Node {
    Value(Expr),
    Atoms(Vec<Atom>),
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<(Tok, usize)>,
    pos: usize,
    depth: usize,
}

/// Parse a filter.
///
/// ```
/// let f = sluice_dpf::parse("# Figure 1's first atom\n(12:16 == 0x800)").unwrap();
/// assert_eq!(f.atoms.len(), 1);
/// assert!(sluice_dpf::parse("(12:16 == 0x800) && 7").is_err());
/// ```
pub fn parse(text: &str) -> Result<Filter, ParseError> {
    let toks = lex(text)?;
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        depth: 0,
    };
    if p.toks.is_empty() {
        return p.err(0, "empty filter: expected atoms joined by &&");
    }
    let start = p.at();
    let node = p.expr(0)?;
    if p.pos < p.toks.len() {
        return p.err(p.at(), "expected '&&' or the end of the filter");
    }
    match node {
        Node::Atoms(atoms) => Ok(Filter { atoms }),
        Node::Value(_) => p.err(
            start,
            "a filter is atoms (comparisons or SHIFTs) joined by &&, not a value",
        ),
    }
}

fn error<T>(text: &str, at: usize, message: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError::at(text, at, message))
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let lit = text[start..i].replace('_', "").to_ascii_lowercase();
            let v = if let Some(h) = lit.strip_prefix("0x") {
                u32::from_str_radix(h, 16)
            } else if let Some(bn) = lit.strip_prefix("0b") {
                u32::from_str_radix(bn, 2)
            } else if let Some(o) = lit.strip_prefix("0o") {
                u32::from_str_radix(o, 8)
            } else {
                lit.parse::<u32>()
            };
            match v {
                Ok(v) => out.push((Tok::Num(v), start)),
                Err(_) => {
                    return error(
                        text,
                        start,
                        format!("bad number '{}' (numbers are 32-bit)", &text[start..i]),
                    )
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            let word = &text[start..i];
            if word.eq_ignore_ascii_case("shift") {
                out.push((Tok::Shift, start));
            } else {
                return error(
                    text,
                    start,
                    format!("unknown word '{word}' (the only keyword is SHIFT)"),
                );
            }
        } else if let Some(s) = SYMS.iter().find(|s| b[i..].starts_with(s.as_bytes())) {
            out.push((Tok::Sym(s), i));
            i += s.len();
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return error(text, i, format!("unexpected character '{ch}'"));
        }
    }
    Ok(out)
}

/// Binary operators: (symbol, precedence). Comparisons are 2, `&&` is 1.
fn binary(sym: &str) -> Option<u8> {
    Some(match sym {
        "&&" => 1,
        "==" | "!=" | "<" | "<=" | ">" | ">=" => 2,
        "|" => 3,
        "^" => 4,
        "&" => 5,
        "<<" | ">>" => 6,
        "+" | "-" => 7,
        "*" | "/" | "%" => 8,
        _ => return None,
    })
}

/// Deepest nesting accepted (keeps recursion bounded on hostile input).
const MAX_DEPTH: usize = 200;

impl<'a> Parser<'a> {
    fn err<T>(&self, at: usize, message: impl Into<String>) -> Result<T, ParseError> {
        error(self.text, at, message)
    }

    fn at(&self) -> usize {
        self.toks.get(self.pos).map_or(self.text.len(), |t| t.1)
    }

    fn peek(&self) -> Option<Tok> {
        self.toks.get(self.pos).map(|t| t.0)
    }

    fn expect(&mut self, s: &str) -> Result<(), ParseError> {
        if matches!(self.peek(), Some(Tok::Sym(x)) if x == s) {
            self.pos += 1;
            Ok(())
        } else {
            self.err(self.at(), format!("expected '{s}'"))
        }
    }

    /// Precedence climbing over values and atoms.
    fn expr(&mut self, min: u8) -> Result<Node, ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(self.at(), "expression nested too deeply");
        }
        let mut lhs = self.unary()?;
        let mut compared = false;
        while let Some(Tok::Sym(s)) = self.peek() {
            let Some(prec) = binary(s) else { break };
            if prec < min {
                break;
            }
            let at = self.at();
            if prec == 2 && compared {
                return self.err(at, "comparisons do not chain: join atoms with &&");
            }
            self.pos += 1;
            let rhs = self.expr(prec + 1)?;
            lhs = self.combine(s, lhs, rhs, at)?;
            compared |= prec == 2;
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn combine(&self, s: &str, lhs: Node, rhs: Node, at: usize) -> Result<Node, ParseError> {
        match (lhs, rhs) {
            (Node::Atoms(mut a), Node::Atoms(b)) if s == "&&" || s == "&" => {
                a.extend(b);
                Ok(Node::Atoms(a))
            }
            (Node::Value(_), _) | (_, Node::Value(_)) if s == "&&" => {
                self.err(at, "'&&' joins atoms (comparisons or SHIFTs), not values")
            }
            (Node::Value(l), Node::Value(r)) => Ok(match s {
                "==" => Node::Atoms(vec![Atom::Cmp(Rel::Eq, l, r)]),
                "!=" => Node::Atoms(vec![Atom::Cmp(Rel::Ne, l, r)]),
                "<" => Node::Atoms(vec![Atom::Cmp(Rel::Lt, l, r)]),
                "<=" => Node::Atoms(vec![Atom::Cmp(Rel::Le, l, r)]),
                ">" => Node::Atoms(vec![Atom::Cmp(Rel::Gt, l, r)]),
                ">=" => Node::Atoms(vec![Atom::Cmp(Rel::Ge, l, r)]),
                _ => {
                    let op = match s {
                        "|" => BinOp::Or,
                        "^" => BinOp::Xor,
                        "&" => BinOp::And,
                        "<<" => BinOp::Shl,
                        ">>" => BinOp::Shr,
                        "+" => BinOp::Add,
                        "-" => BinOp::Sub,
                        "*" => BinOp::Mul,
                        "/" => BinOp::Div,
                        _ => BinOp::Mod,
                    };
                    Node::Value(Expr::Bin(op, Box::new(l), Box::new(r)))
                }
            }),
            _ => self.err(
                at,
                format!("'{s}' needs two values, but one side is an atom (parenthesise atoms and join them with &&)"),
            ),
        }
    }

    fn value(&mut self, what: &str) -> Result<Expr, ParseError> {
        let at = self.at();
        match self.unary()? {
            Node::Value(v) => Ok(v),
            Node::Atoms(_) => self.err(at, format!("{what} must be a value, not an atom")),
        }
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        let at = self.at();
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.err(at, "expression nested too deeply");
        }
        let node = self.unary_inner(at)?;
        self.depth -= 1;
        Ok(node)
    }

    fn unary_inner(&mut self, at: usize) -> Result<Node, ParseError> {
        let node = match self.peek() {
            Some(Tok::Sym("~")) | Some(Tok::Sym("!")) => {
                self.pos += 1;
                Node::Value(Expr::Not(Box::new(self.value("'~' operand")?)))
            }
            Some(Tok::Sym("-")) => {
                self.pos += 1;
                Node::Value(Expr::Neg(Box::new(self.value("'-' operand")?)))
            }
            Some(Tok::Sym("(")) => {
                self.pos += 1;
                let inner = self.expr(0)?;
                self.expect(")")?;
                inner
            }
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Node::Value(Expr::Num(n))
            }
            Some(Tok::Shift) => {
                self.pos += 1;
                self.expect("(")?;
                let e_at = self.at();
                let e = match self.expr(0)? {
                    Node::Value(v) => v,
                    Node::Atoms(_) => return self.err(e_at, "SHIFT takes a value"),
                };
                self.expect(")")?;
                return Ok(Node::Atoms(vec![Atom::Shift(e)]));
            }
            Some(_) => return self.err(at, "expected a value, '(' or SHIFT"),
            None => return self.err(at, "unexpected end of the filter"),
        };
        // ':' binds tightest: `addr:bits`, repeatable for indirect reads.
        let mut node = node;
        while self.peek() == Some(Tok::Sym(":")) {
            let colon = self.at();
            self.pos += 1;
            let addr = match node {
                Node::Value(v) => v,
                Node::Atoms(_) => return self.err(colon, "':' reads at a value, not an atom"),
            };
            let bits_at = self.at();
            let bits = match self.peek() {
                Some(Tok::Num(b @ (8 | 16 | 32))) => b as u8,
                Some(Tok::Num(b)) => {
                    return self.err(bits_at, format!("a read is 8, 16 or 32 bits, not {b}"))
                }
                _ => return self.err(bits_at, "expected the read's size in bits (8, 16 or 32)"),
            };
            self.pos += 1;
            node = Node::Value(Expr::Load {
                addr: Box::new(addr),
                bits,
            });
        }
        Ok(node)
    }
}
