//! The FPL-2 parser: tokens to a syntax tree with positions, macros expanded.
//!
//! Grammar (keywords and macro names in any case):
//!
//! ```text
//! program := ("DECLARE" "MEM" "[" NUM "]" ";")* stmt*
//! stmt    := "IF" expr "THEN" stmt* ("ELSE" stmt*)? "FI" ";"?
//!          | "FOR" "(" simple ";" expr ";" simple ")" stmt* "ROF" ";"?
//!          | "BREAK" ";" | "RETURN" expr ";" | simple ";"
//! simple  := lvalue ("=" | "+=" | "-=" | "*=" | "/=" | "%=" | "<<=" | ">>=" | "&=" | "^=" | "|=") expr
//!          | lvalue ("++" | "--") | ("++" | "--") lvalue | expr
//! lvalue  := "R" "[" expr "]" | "MEM" "[" expr "]"
//! expr    := C's binary operators and precedence: || && | ^ & (== !=) (< <= > >=) (<< >>) (+ -) (* / %)
//! unary   := ("-" | "!" | "~") unary | primary
//! primary := NUM | NAME (a constant) | "(" expr ")" | lvalue
//!          | "PKT" "." ("B" | "W" | "DW") "[" expr "]" ("." "U"bits "[" expr "]")?
//!          | "PKT" "." MACRO | "HASH" "(" expr "," expr "," expr ")"
//!          | "EXTERN" "(" (NAME | STRING) "," expr "," expr ")"
//! ```

use crate::ir::{BinOp, UnOp, Width};
use crate::lex::{Tok, Token};
use crate::Error;

/// How deep statements and expressions may nest (the parser, checker and
/// both back ends recurse on it), in units: a block, parenthesis or unary
/// operator costs 4, each operator of a chain such as `a + b + c` costs 1.
/// So 64 levels of blocks, or chains of about 250 operators, fit.
pub const MAX_DEPTH: usize = 256;

/// What one nesting level costs in [`MAX_DEPTH`] units.
const LEVEL: usize = 4;

/// A source position (1-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Pos {
    pub line: u32,
    pub col: u32,
}

impl Pos {
    pub(crate) fn err(self, msg: impl Into<String>) -> Error {
        Error::new(self.line, self.col, msg)
    }
}

/// An expression with the position of its first token.
#[derive(Clone, Debug)]
pub(crate) struct AExpr {
    pub pos: Pos,
    pub kind: AKind,
}

#[derive(Clone, Debug)]
pub(crate) enum AKind {
    Num(u32),
    Reg(Box<AExpr>),
    Mem(Box<AExpr>),
    Pkt(Width, Box<AExpr>),
    Field {
        value: Box<AExpr>,
        total: u32,
        bits: u32,
        index: Box<AExpr>,
    },
    Un(UnOp, Box<AExpr>),
    Bin(BinOp, Box<AExpr>, Box<AExpr>),
    Hash(Box<AExpr>, Box<AExpr>, Box<AExpr>),
    Extern(String, Box<AExpr>, Box<AExpr>),
}

#[derive(Clone, Debug)]
pub(crate) enum ALval {
    Reg(AExpr),
    Mem(AExpr),
}

#[derive(Clone, Debug)]
pub(crate) enum AStmt {
    Assign {
        pos: Pos,
        lv: ALval,
        op: Option<BinOp>,
        value: AExpr,
    },
    Eval(AExpr),
    If {
        cond: AExpr,
        then: Vec<AStmt>,
        els: Vec<AStmt>,
    },
    For {
        pos: Pos,
        init: Box<AStmt>,
        cond: AExpr,
        update: Box<AStmt>,
        body: Vec<AStmt>,
    },
    Break(Pos),
    Return(AExpr),
}

/// The parsed program.
pub(crate) struct AProgram {
    /// `DECLARE MEM[n]`, with its position.
    pub mem: Option<(u32, Pos)>,
    pub body: Vec<AStmt>,
}

/// Named constants (`PROTO_TCP`, `TRUE` …), written without `PKT.`.
pub const CONSTANTS: &[(&str, u32)] = &[
    ("TRUE", 1),
    ("FALSE", 0),
    ("PROTO_ICMP", 1),
    ("PROTO_IGMP", 2),
    ("PROTO_TCP", 6),
    ("PROTO_UDP", 17),
    ("PROTO_GRE", 47),
    ("PROTO_ICMPV6", 58),
    ("PROTO_SCTP", 132),
    ("ETHERTYPE_IP", 0x0800),
    ("ETHERTYPE_ARP", 0x0806),
    ("ETHERTYPE_VLAN", 0x8100),
    ("ETHERTYPE_IPV6", 0x86dd),
];

/// Packet-field macros for Ethernet frames carrying IPv4 (`PKT.NAME`).
/// `L4` fields sit after the IPv4 header, whose length is read from the
/// packet (`14 + 4 * (PKT.B[14] & 15)`). The macros read fields; they do not
/// test the EtherType or the protocol (write `PKT.ETH_TYPE == ETHERTYPE_IP`).
pub const MACROS: &[(&str, &str)] = &[
    ("ETH_TYPE", "PKT.W[12]"),
    ("IP_VERSION", "PKT.B[14].U4[0]"),
    ("IP_HL", "PKT.B[14].U4[1]"),
    ("IP_TOS", "PKT.B[15]"),
    ("IP_LEN", "PKT.W[16]"),
    ("IP_ID", "PKT.W[18]"),
    ("IP_FRAG", "PKT.W[20]"),
    ("IP_TTL", "PKT.B[22]"),
    ("IP_PROTO", "PKT.B[23]"),
    ("IP_CSUM", "PKT.W[24]"),
    ("IP_SRC", "PKT.DW[26]"),
    ("IP_DEST", "PKT.DW[30]"),
    ("IP_DST", "PKT.DW[30]"),
    ("L4_OFF", "(14 + (PKT.B[14] & 15) * 4)"),
    ("TCP_SPORT", "PKT.W[PKT.L4_OFF]"),
    ("TCP_DPORT", "PKT.W[PKT.L4_OFF + 2]"),
    ("TCP_SEQ", "PKT.DW[PKT.L4_OFF + 4]"),
    ("TCP_ACK", "PKT.DW[PKT.L4_OFF + 8]"),
    ("TCP_HL", "PKT.B[PKT.L4_OFF + 12].U4[0]"),
    ("TCP_FLAGS", "PKT.B[PKT.L4_OFF + 13]"),
    ("TCP_WIN", "PKT.W[PKT.L4_OFF + 14]"),
    (
        "TCP_DATA_OFF",
        "(PKT.L4_OFF + (PKT.B[PKT.L4_OFF + 12] >> 4) * 4)",
    ),
    ("UDP_SPORT", "PKT.W[PKT.L4_OFF]"),
    ("UDP_DPORT", "PKT.W[PKT.L4_OFF + 2]"),
    ("UDP_LEN", "PKT.W[PKT.L4_OFF + 4]"),
    ("UDP_CSUM", "PKT.W[PKT.L4_OFF + 6]"),
    ("UDP_DATA_OFF", "(PKT.L4_OFF + 8)"),
    ("ICMP_TYPE", "PKT.B[PKT.L4_OFF]"),
    ("ICMP_CODE", "PKT.B[PKT.L4_OFF + 1]"),
];

/// Parse a whole program.
pub(crate) fn parse(src: &str) -> Result<AProgram, Error> {
    let toks = crate::lex::lex(src)?;
    let mut p = Parser {
        toks,
        i: 0,
        depth: 0,
        macro_pos: None,
    };
    let mut mem = None;
    while p.is_kw("DECLARE") {
        let pos = p.pos();
        p.i += 1;
        p.expect_kw("MEM")?;
        p.expect("[")?;
        let n = match p.peek().kind {
            Tok::Num(n) => n,
            _ => return Err(p.here("expected the MBuf size in words after `DECLARE MEM[`")),
        };
        p.i += 1;
        p.expect("]")?;
        p.expect(";")?;
        if mem.is_some() {
            return Err(pos.err("the MBuf size is declared twice"));
        }
        mem = Some((n, pos));
    }
    let body = p.stmts(&[])?;
    if p.peek().kind != Tok::Eof {
        return Err(p.here(format!("unexpected {}", describe(&p.peek().kind))));
    }
    Ok(AProgram { mem, body })
}

/// Parse one expression on its own (macro bodies).
fn parse_expr_text(src: &str, pos: Pos, depth: usize) -> Result<AExpr, Error> {
    let toks = crate::lex::lex(src).map_err(|e| pos.err(e.message))?;
    let mut p = Parser {
        toks,
        i: 0,
        depth,
        macro_pos: Some(pos),
    };
    p.expr()
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Num(n) => format!("number {n}"),
        Tok::Name(s) => format!("`{s}`"),
        Tok::Str(s) => format!("string \"{s}\""),
        Tok::Op(o) => format!("`{o}`"),
        Tok::Eof => "end of program".into(),
    }
}

struct Parser {
    toks: Vec<Token>,
    i: usize,
    depth: usize,
    /// While expanding a macro: the macro's position, given to every node.
    macro_pos: Option<Pos>,
}

/// Keywords that end a statement list.
const ENDERS: &[&str] = &["ELSE", "FI", "ROF"];

impl Parser {
    fn peek(&self) -> &Token {
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn pos(&self) -> Pos {
        if let Some(p) = self.macro_pos {
            return p;
        }
        let t = self.peek();
        Pos {
            line: t.line,
            col: t.col,
        }
    }

    fn here(&self, msg: impl Into<String>) -> Error {
        self.pos().err(msg)
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(self.peek().kind, Tok::Op(o) if o == op)
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().kind, Tok::Name(n) if n.eq_ignore_ascii_case(kw))
    }

    fn eat(&mut self, op: &str) -> bool {
        if self.is_op(op) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, op: &str) -> Result<(), Error> {
        if self.eat(op) {
            Ok(())
        } else {
            Err(self.here(format!(
                "expected `{op}`, found {}",
                describe(&self.peek().kind)
            )))
        }
    }

    fn expect_kw(&mut self, kw: &str) -> Result<(), Error> {
        if self.is_kw(kw) {
            self.i += 1;
            Ok(())
        } else {
            Err(self.here(format!(
                "expected `{kw}`, found {}",
                describe(&self.peek().kind)
            )))
        }
    }

    fn enter(&mut self) -> Result<(), Error> {
        self.depth += LEVEL;
        if self.depth > MAX_DEPTH {
            let e = self.here("nested too deeply (64 levels at most)");
            self.depth -= LEVEL;
            return Err(e);
        }
        Ok(())
    }

    /// Statements up to one of `ends` (or the end of the program).
    fn stmts(&mut self, ends: &[&str]) -> Result<Vec<AStmt>, Error> {
        let mut out = Vec::new();
        loop {
            if self.peek().kind == Tok::Eof || ends.iter().any(|k| self.is_kw(k)) {
                return Ok(out);
            }
            if let Some(k) = ENDERS.iter().find(|k| self.is_kw(k)) {
                return Err(self.here(format!("`{k}` without a matching IF or FOR")));
            }
            out.push(self.stmt()?);
        }
    }

    fn stmt(&mut self) -> Result<AStmt, Error> {
        self.enter()?;
        let s = self.stmt_inner();
        self.depth -= LEVEL;
        s
    }

    fn stmt_inner(&mut self) -> Result<AStmt, Error> {
        let pos = self.pos();
        if self.is_kw("IF") {
            self.i += 1;
            let cond = self.expr()?;
            self.expect_kw("THEN")?;
            let then = self.stmts(&["ELSE", "FI"])?;
            let els = if self.is_kw("ELSE") {
                self.i += 1;
                self.stmts(&["FI"])?
            } else {
                Vec::new()
            };
            if !self.is_kw("FI") {
                return Err(self.here(format!(
                    "expected `FI` to close the IF at line {}, column {}",
                    pos.line, pos.col
                )));
            }
            self.i += 1;
            self.eat(";");
            return Ok(AStmt::If { cond, then, els });
        }
        if self.is_kw("FOR") {
            self.i += 1;
            self.expect("(")?;
            let init = self.simple()?;
            self.expect(";")?;
            let cond = self.expr()?;
            self.expect(";")?;
            let update = self.simple()?;
            self.expect(")")?;
            let body = self.stmts(&["ROF"])?;
            if !self.is_kw("ROF") {
                return Err(self.here(format!(
                    "expected `ROF` to close the FOR at line {}, column {}",
                    pos.line, pos.col
                )));
            }
            self.i += 1;
            self.eat(";");
            return Ok(AStmt::For {
                pos,
                init: Box::new(init),
                cond,
                update: Box::new(update),
                body,
            });
        }
        if self.is_kw("BREAK") {
            self.i += 1;
            self.expect(";")?;
            return Ok(AStmt::Break(pos));
        }
        if self.is_kw("RETURN") {
            self.i += 1;
            let e = self.expr()?;
            self.expect(";")?;
            return Ok(AStmt::Return(e));
        }
        let s = self.simple()?;
        self.expect(";")?;
        Ok(s)
    }

    /// An assignment, increment, or expression statement.
    fn simple(&mut self) -> Result<AStmt, Error> {
        let pos = self.pos();
        for (op, bin) in [("++", BinOp::Add), ("--", BinOp::Sub)] {
            if self.eat(op) {
                let lv = self.lvalue()?;
                return Ok(inc(pos, lv, bin));
            }
        }
        let e = self.expr()?;
        let lv = match e.kind {
            AKind::Reg(i) => ALval::Reg(*i),
            AKind::Mem(i) => ALval::Mem(*i),
            _ => {
                if let Tok::Op(op) = self.peek().kind {
                    if assign_op(op).is_some() || op == "++" || op == "--" {
                        return Err(self.here(format!(
                            "`{op}` needs a register R[n] or MEM[i] on its left"
                        )));
                    }
                }
                return Ok(AStmt::Eval(e));
            }
        };
        for (op, bin) in [("++", BinOp::Add), ("--", BinOp::Sub)] {
            if self.eat(op) {
                return Ok(inc(pos, lv, bin));
            }
        }
        let op = match self.peek().kind {
            Tok::Op(op) => assign_op(op),
            _ => None,
        };
        let Some(op) = op else {
            return Err(self.here(format!(
                "expected an assignment after the register or memory word, found {}",
                describe(&self.peek().kind)
            )));
        };
        self.i += 1;
        let value = self.expr()?;
        Ok(AStmt::Assign { pos, lv, op, value })
    }

    fn lvalue(&mut self) -> Result<ALval, Error> {
        let e = self.primary()?;
        match e.kind {
            AKind::Reg(i) => Ok(ALval::Reg(*i)),
            AKind::Mem(i) => Ok(ALval::Mem(*i)),
            _ => Err(e.pos.err("expected a register R[n] or MEM[i]")),
        }
    }

    fn expr(&mut self) -> Result<AExpr, Error> {
        self.enter()?;
        let e = self.binary(0);
        self.depth -= LEVEL;
        e
    }

    fn binary(&mut self, level: usize) -> Result<AExpr, Error> {
        const LEVELS: &[&[(&str, BinOp)]] = &[
            &[("||", BinOp::Or)],
            &[("&&", BinOp::And)],
            &[("|", BinOp::BitOr)],
            &[("^", BinOp::BitXor)],
            &[("&", BinOp::BitAnd)],
            &[("==", BinOp::Eq), ("!=", BinOp::Ne)],
            &[
                ("<", BinOp::Lt),
                ("<=", BinOp::Le),
                (">", BinOp::Gt),
                (">=", BinOp::Ge),
            ],
            &[("<<", BinOp::Shl), (">>", BinOp::Shr)],
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
        ];
        if level == LEVELS.len() {
            return self.unary();
        }
        let mut left = self.binary(level + 1)?;
        // Long chains (a + b + c ...) nest to the left: count their depth.
        let mut chain = 0;
        'outer: loop {
            for (op, bin) in LEVELS[level] {
                if self.is_op(op) {
                    let pos = left.pos;
                    self.i += 1;
                    chain += 1;
                    if self.depth + chain > MAX_DEPTH {
                        return Err(self.here("nested too deeply (an operator chain too long)"));
                    }
                    let right = self.binary(level + 1)?;
                    left = AExpr {
                        pos,
                        kind: AKind::Bin(*bin, Box::new(left), Box::new(right)),
                    };
                    continue 'outer;
                }
            }
            return Ok(left);
        }
    }

    fn unary(&mut self) -> Result<AExpr, Error> {
        let pos = self.pos();
        for (op, un) in [("-", UnOp::Neg), ("!", UnOp::Not), ("~", UnOp::BitNot)] {
            if self.eat(op) {
                self.enter()?;
                let e = self.unary();
                self.depth -= LEVEL;
                return Ok(AExpr {
                    pos,
                    kind: AKind::Un(un, Box::new(e?)),
                });
            }
        }
        self.primary()
    }

    fn bracket(&mut self) -> Result<AExpr, Error> {
        self.expect("[")?;
        let e = self.expr()?;
        self.expect("]")?;
        Ok(e)
    }

    fn primary(&mut self) -> Result<AExpr, Error> {
        let pos = self.pos();
        let tok = self.peek().kind.clone();
        let kind = match tok {
            Tok::Num(n) => {
                self.i += 1;
                AKind::Num(n)
            }
            Tok::Op("(") => {
                self.i += 1;
                let e = self.expr()?;
                self.expect(")")?;
                return Ok(e);
            }
            Tok::Name(name) => {
                self.i += 1;
                let up = name.to_ascii_uppercase();
                match up.as_str() {
                    "R" => AKind::Reg(Box::new(self.bracket()?)),
                    "MEM" => AKind::Mem(Box::new(self.bracket()?)),
                    "PKT" => return self.packet(pos),
                    "HASH" => {
                        self.expect("(")?;
                        let a = self.expr()?;
                        self.expect(",")?;
                        let b = self.expr()?;
                        self.expect(",")?;
                        let c = self.expr()?;
                        self.expect(")")?;
                        AKind::Hash(Box::new(a), Box::new(b), Box::new(c))
                    }
                    "EXTERN" => {
                        self.expect("(")?;
                        let f = match self.peek().kind.clone() {
                            Tok::Name(s) | Tok::Str(s) => s,
                            t => {
                                return Err(self.here(format!(
                                    "expected the external function's name, found {}",
                                    describe(&t)
                                )))
                            }
                        };
                        self.i += 1;
                        self.expect(",")?;
                        let a = self.expr()?;
                        self.expect(",")?;
                        let b = self.expr()?;
                        self.expect(")")?;
                        AKind::Extern(f, Box::new(a), Box::new(b))
                    }
                    _ => match CONSTANTS.iter().find(|(n, _)| *n == up) {
                        Some((_, v)) => AKind::Num(*v),
                        None if MACROS.iter().any(|(n, _)| *n == up) => {
                            return Err(
                                pos.err(format!("`{name}` is a packet field: write PKT.{up}"))
                            )
                        }
                        None => return Err(pos.err(format!("unknown name `{name}`"))),
                    },
                }
            }
            t => return Err(pos.err(format!("expected a value, found {}", describe(&t)))),
        };
        Ok(AExpr { pos, kind })
    }

    /// After `PKT`: `.B[..]`, `.W[..]`, `.DW[..]` (with an optional
    /// `.Un[..]`), or `.MACRO`.
    fn packet(&mut self, pos: Pos) -> Result<AExpr, Error> {
        self.expect(".")?;
        let name = match &self.peek().kind {
            Tok::Name(n) => n.to_ascii_uppercase(),
            t => {
                return Err(self.here(format!(
                    "expected B, W, DW or a field name after `PKT.`, found {}",
                    describe(t)
                )))
            }
        };
        let npos = self.pos();
        self.i += 1;
        let width = match name.as_str() {
            "B" => Width::B,
            "W" => Width::W,
            "DW" => Width::DW,
            _ => {
                let Some((_, body)) = MACROS.iter().find(|(n, _)| *n == name) else {
                    return Err(npos.err(format!("unknown packet field `PKT.{name}`")));
                };
                return parse_expr_text(body, self.macro_pos.unwrap_or(pos), self.depth);
            }
        };
        let off = self.bracket()?;
        let value = AExpr {
            pos,
            kind: AKind::Pkt(width, Box::new(off)),
        };
        if !self.is_op(".") {
            return Ok(value);
        }
        self.i += 1;
        let fpos = self.pos();
        let sub = match &self.peek().kind {
            Tok::Name(n) => n.to_ascii_uppercase(),
            t => return Err(fpos.err(format!("expected U1, U4, U8 or U16, found {}", describe(t)))),
        };
        let bits = match sub.as_str() {
            "U1" => 1,
            "U4" => 4,
            "U8" => 8,
            "U16" => 16,
            _ => return Err(fpos.err(format!("unknown part `{sub}`: expected U1, U4, U8 or U16"))),
        };
        let total = width.bytes() * 8;
        if bits > total {
            return Err(fpos.err(format!("a {total}-bit value has no {bits}-bit parts")));
        }
        self.i += 1;
        let index = self.bracket()?;
        Ok(AExpr {
            pos,
            kind: AKind::Field {
                value: Box::new(value),
                total,
                bits,
                index: Box::new(index),
            },
        })
    }
}

fn inc(pos: Pos, lv: ALval, op: BinOp) -> AStmt {
    AStmt::Assign {
        pos,
        lv,
        op: Some(op),
        value: AExpr {
            pos,
            kind: AKind::Num(1),
        },
    }
}

/// The compound operator of an assignment token (`Some(None)` for `=`).
fn assign_op(op: &str) -> Option<Option<BinOp>> {
    Some(match op {
        "=" => None,
        "+=" => Some(BinOp::Add),
        "-=" => Some(BinOp::Sub),
        "*=" => Some(BinOp::Mul),
        "/=" => Some(BinOp::Div),
        "%=" => Some(BinOp::Mod),
        "<<=" => Some(BinOp::Shl),
        ">>=" => Some(BinOp::Shr),
        "&=" => Some(BinOp::BitAnd),
        "^=" => Some(BinOp::BitXor),
        "|=" => Some(BinOp::BitOr),
        _ => return None,
    })
}
