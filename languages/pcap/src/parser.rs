//! A recursive-descent parser for libpcap's filter grammar.
//!
//! It accepts what libpcap's yacc grammar accepts and builds [`Expr`] trees
//! in which qualifier inheritance is already resolved:
//!
//! * `and` and `or` have the same precedence and group to the left
//!   (`a or b and c` is `(a or b) and c`); runs of the same operator become
//!   one flat [`Expr::And`] / [`Expr::Or`] vector.
//! * `not` binds tightest.
//! * A bare value after `and`/`or`, after `not` or inside parentheses takes
//!   the qualifiers of the most recent qualified term (`host a or b`,
//!   `tcp src port 1 or 2`, `host x and (y or z)`, `ip host a and not b`).
//!   After a term with no qualifiers to give (`tcp`, a relation,
//!   `broadcast`, ...) a bare value is an error. A parenthesized expression
//!   passes on the qualifiers in force before it, as in libpcap.
//! * In arithmetic, `|` binds loosest, then `&`, then `<<`/`>>`, then
//!   `+`/`-`, then `*`/`/`, then unary minus. `%` and `^` have no declared
//!   precedence in libpcap's grammar, so yacc always shifts them: they take
//!   only the operand just before them and everything after them
//!   (`a + b % c + d` is `a + (b % (c + d))`).
//!
//! Nesting (parentheses, brackets, `not`, unary minus) is limited to
//! [`MAX_DEPTH`] levels. A flat chain is not nesting, but the tree it
//! makes is as deep as it is long where `and` and `or` alternate (`a and
//! b or c and d` is `((a and b) or c) and d`) and in a run of arithmetic
//! operators (`ip[0] + 1 + 1`): the tree's depth is limited to
//! [`MAX_TREE_DEPTH`] levels, so that neither the parser nor the code
//! walking the tree (which recurses on it) can overflow a thread's stack.
//!
//! ```
//! use sluice_pcap::{ast::*, parser::parse};
//! let e = parse("host a or b").unwrap();
//! let Expr::Or(v) = e else { panic!() };
//! let Expr::Prim(p) = &v[1] else { panic!() };
//! assert_eq!(p.qual.kind, Some(Kind::Host));
//! assert_eq!(p.value, Value::Name("b".into()));
//! ```

use crate::ast::*;
use crate::error::CompileError;
use crate::lexer::{pack_dotted, tokenize, Kw, Tok, Token};
use crate::names;

/// The deepest nesting the parser accepts (parentheses, brackets, `not`).
///
/// ```
/// let deep = format!("{}tcp{}", "(".repeat(2000), ")".repeat(2000));
/// assert!(sluice_pcap::parser::parse(&deep).is_err());
/// assert!(sluice_pcap::parser::MAX_DEPTH >= 100);
/// ```
pub const MAX_DEPTH: usize = 250;

/// The deepest tree the parser builds, flat chains included: 500
/// alternations of `a and b or …`, 1,000 operators of `ip[0] + 1 + …`.
///
/// ```
/// use sluice_pcap::parser::{parse, MAX_TREE_DEPTH};
/// let chain = |n: usize| (0..n).map(|i| format!("vlan {i} and tcp")).collect::<Vec<_>>().join(" or ");
/// assert!(parse(&chain(200)).is_ok());
/// assert!(parse(&format!("ip[0] + {} = 2", vec!["1"; 300].join(" + "))).is_ok());
/// let e = parse(&chain(MAX_TREE_DEPTH)).unwrap_err();
/// assert!(e.to_string().contains("too long"));
/// ```
pub const MAX_TREE_DEPTH: usize = 1000;

/// Parses a filter expression. The empty expression is [`Expr::True`].
///
/// ```
/// use sluice_pcap::{ast::Expr, parser::parse};
/// assert!(matches!(parse("").unwrap(), Expr::True(_)));
/// assert!(matches!(parse("tcp and port 80").unwrap(), Expr::And(_)));
/// let err = parse("tcp port").unwrap_err();
/// assert_eq!(err.to_string(), "column 9: expected a value after 'port', found end of expression");
/// ```
pub fn parse(text: &str) -> Result<Expr, CompileError> {
    let toks = tokenize(text)?;
    let mut p = Parser::new(text, toks);
    if p.peek() == &Tok::Eof {
        return Ok(Expr::True(Span::new(0, 0)));
    }
    let (e, _, _) = p.expr(None)?;
    if p.peek() != &Tok::Eof {
        return Err(p.unexpected("'and', 'or' or the end of the expression"));
    }
    Ok(e)
}

const NONE: usize = usize::MAX;

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Token>,
    /// For each `(`, the index of its `)`, or NONE.
    close: Vec<usize>,
    pos: usize,
    depth: usize,
}

type Q = Option<Qual>;
type R<T> = Result<T, CompileError>;

/// Builds flat n-ary and/or vectors from a left-associative chain.
struct Chain {
    items: Vec<Expr>,
    is_and: Option<bool>,
    depth: usize,
}

impl Chain {
    fn new(e: Expr, d: usize) -> Chain {
        Chain {
            items: vec![e],
            is_and: None,
            depth: d,
        }
    }

    fn node(is_and: bool, items: Vec<Expr>) -> Expr {
        if is_and {
            Expr::And(items)
        } else {
            Expr::Or(items)
        }
    }

    fn push(&mut self, is_and: bool, e: Expr, d: usize, span: Span) -> R<()> {
        match self.is_and {
            Some(op) if op != is_and => {
                let items = std::mem::take(&mut self.items);
                let node_depth = self.depth + 1;
                if node_depth > MAX_TREE_DEPTH {
                    return Err(too_long(span));
                }
                self.items = vec![Chain::node(op, items), e];
                self.depth = node_depth.max(d);
            }
            _ => {
                self.items.push(e);
                self.depth = self.depth.max(d);
            }
        }
        self.is_and = Some(is_and);
        Ok(())
    }

    fn finish(mut self) -> (Expr, usize) {
        match self.is_and {
            None => (self.items.pop().expect("one item"), self.depth),
            Some(op) => (Chain::node(op, self.items), self.depth + 1),
        }
    }
}

fn too_long(span: Span) -> CompileError {
    CompileError::new(
        format!(
            "expression too long: its alternations of 'and' and 'or' and runs of arithmetic \
             operators make a tree more than {MAX_TREE_DEPTH} levels deep"
        ),
        span,
    )
}

fn too_deep(span: Span) -> CompileError {
    CompileError::new(
        format!("expression nests too deeply (more than {MAX_DEPTH} levels)"),
        span,
    )
}

fn is_value(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Id(_) | Tok::Dotted(_) | Tok::Ipv6(..) | Tok::Mac(..) | Tok::Arcnet(_)
    )
}

/// Tokens that can follow an arithmetic operand: binary operators and
/// comparisons.
fn is_arith_follow(t: &Tok) -> bool {
    matches!(
        t,
        Tok::Plus
            | Tok::Minus
            | Tok::Star
            | Tok::Slash
            | Tok::Percent
            | Tok::Amp
            | Tok::Pipe
            | Tok::Caret
            | Tok::Shl
            | Tok::Shr
            | Tok::Eq
            | Tok::Ne
            | Tok::Lt
            | Tok::Le
            | Tok::Gt
            | Tok::Ge
    )
}

fn dir_of(k: Kw) -> Option<Dir> {
    Some(match k {
        Kw::Src => Dir::Src,
        Kw::Dst => Dir::Dst,
        Kw::Addr1 => Dir::Addr1,
        Kw::Addr2 => Dir::Addr2,
        Kw::Addr3 => Dir::Addr3,
        Kw::Addr4 => Dir::Addr4,
        Kw::Ra => Dir::Ra,
        Kw::Ta => Dir::Ta,
        _ => return None,
    })
}

fn aqual_of(k: Kw) -> Option<Kind> {
    Some(match k {
        Kw::Host => Kind::Host,
        Kw::Net => Kind::Net,
        Kw::Port => Kind::Port,
        Kw::PortRange => Kind::PortRange,
        _ => return None,
    })
}

fn ndqual_of(k: Kw) -> Option<Kind> {
    Some(match k {
        Kw::Proto => Kind::Proto,
        Kw::ProtoChain => Kind::ProtoChain,
        Kw::Gateway => Kind::Gateway,
        _ => return None,
    })
}

impl<'a> Parser<'a> {
    fn new(text: &'a str, toks: Vec<Token>) -> Parser<'a> {
        let mut close = vec![NONE; toks.len()];
        let mut stack = Vec::new();
        for (i, t) in toks.iter().enumerate() {
            match t.tok {
                Tok::LParen => stack.push(i),
                Tok::RParen => {
                    if let Some(o) = stack.pop() {
                        close[o] = i;
                    }
                }
                _ => {}
            }
        }
        Parser {
            text,
            toks,
            close,
            pos: 0,
            depth: 0,
        }
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn span(&self) -> Span {
        self.toks[self.pos].span
    }

    fn prev_span(&self) -> Span {
        self.toks[self.pos.saturating_sub(1)].span
    }

    fn bump(&mut self) -> Token {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(too_deep(self.span()));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// "expected X after 'prev', found Y" at the current token.
    fn unexpected(&self, what: &str) -> CompileError {
        let found = self.peek().describe();
        let msg = if self.pos == 0 {
            format!("expected {what}, found {found}")
        } else {
            let p = self.prev_span();
            format!(
                "expected {what} after '{}', found {found}",
                &self.text[p.start..p.end]
            )
        };
        CompileError::new(msg, self.span())
    }

    fn expect_num(&mut self, what: &str) -> R<(u32, Span)> {
        match *self.peek() {
            Tok::Num(n) => Ok((n, self.bump().span)),
            _ => Err(self.unexpected(what)),
        }
    }

    fn expect_rparen(&mut self, open: Span) -> R<Span> {
        if self.peek() == &Tok::RParen {
            Ok(self.bump().span)
        } else {
            Err(self.unexpected(&format!("')' to close the '(' at column {}", open.column())))
        }
    }

    // ---- boolean level -------------------------------------------------

    /// `expr: term | expr (and|or) (term|id)`. Returns the expression, the
    /// qualifiers the last term passes on, and the tree depth.
    fn expr(&mut self, q0: Q) -> R<(Expr, Q, usize)> {
        let (first, mut q, d) = self.term(q0)?;
        let mut chain = Chain::new(first, d);
        loop {
            let is_and = match self.peek() {
                Tok::And => true,
                Tok::Or => false,
                _ => break,
            };
            let op_span = self.bump().span;
            let (rhs, q2, rd) = self.rhs(q)?;
            q = q2;
            chain.push(is_and, rhs, rd, op_span)?;
        }
        let (e, d) = chain.finish();
        Ok((e, q, d))
    }

    /// After `and`/`or`: either a term or a bare value (`id`) inheriting `q`.
    fn rhs(&mut self, q: Q) -> R<(Expr, Q, usize)> {
        if self.is_id_ahead() {
            let (e, d) = self.id(q, None)?;
            Ok((e, q, d))
        } else {
            self.term(q)
        }
    }

    /// Decides between `id` and `term` the way yacc's lookahead does.
    fn is_id_ahead(&self) -> bool {
        let mut i = self.pos;
        while matches!(self.toks[i].tok, Tok::LParen | Tok::Not) {
            i += 1;
        }
        match &self.toks[i].tok {
            t if is_value(t) => true,
            Tok::Num(_) => {
                let mut j = i + 1;
                while self.toks[j].tok == Tok::RParen {
                    j += 1;
                }
                !is_arith_follow(&self.toks[j].tok)
            }
            _ => false,
        }
    }

    /// `term: rterm | not term`.
    fn term(&mut self, q0: Q) -> R<(Expr, Q, usize)> {
        let mut nots = Vec::new();
        while self.peek() == &Tok::Not {
            nots.push(self.bump().span);
        }
        let (mut e, q, mut d) = if self.peek() == &Tok::LParen {
            self.paren_term(q0)?
        } else {
            self.rterm(q0)?
        };
        if nots.len() > MAX_DEPTH || d + nots.len() > MAX_TREE_DEPTH {
            return Err(too_deep(nots[0]));
        }
        for s in nots.into_iter().rev() {
            let sp = s.to(e.span());
            e = Expr::Not(Box::new(e), sp);
            d += 1;
        }
        Ok((e, q, d))
    }

    /// `'(' expr ')'` as a term, or a relation starting with `(`. The
    /// qualifiers in force before the parentheses are passed on.
    fn paren_term(&mut self, q0: Q) -> R<(Expr, Q, usize)> {
        let start = self.span();
        let close = self.close[self.pos];
        if close != NONE && is_arith_follow(&self.toks[close + 1].tok) {
            return self.relation();
        }
        self.enter()?;
        self.bump();
        let (e, _, d) = self.expr(q0)?;
        self.expect_rparen(start)?;
        self.leave();
        Ok((e, q0, d))
    }

    fn rterm(&mut self, q0: Q) -> R<(Expr, Q, usize)> {
        let start = self.span();
        let tok = self.peek().clone();
        let simple = |e: Other, end: Span| Ok((Expr::Other(e, start.to(end)), None, 1));
        match tok {
            Tok::LParen => self.paren_term(q0),
            Tok::Num(_) | Tok::Minus | Tok::Kw(Kw::Len) => self.relation(),
            Tok::Proto(p) => match self.peek_at(1) {
                Tok::LBracket => self.relation(),
                Tok::Kw(k)
                    if dir_of(*k).is_some()
                        || aqual_of(*k).is_some()
                        || ndqual_of(*k).is_some() =>
                {
                    self.bump();
                    self.head(Some(p), start)
                }
                Tok::Kw(Kw::Broadcast) => {
                    self.bump();
                    let end = self.bump().span;
                    simple(Other::Broadcast(Some(p)), end)
                }
                Tok::Kw(Kw::Multicast) => {
                    self.bump();
                    let end = self.bump().span;
                    simple(Other::Multicast(Some(p)), end)
                }
                Tok::Kw(Kw::Type | Kw::Subtype | Kw::Dir) => {
                    self.bump();
                    self.wlan(Some(p), start)
                }
                _ => {
                    self.bump();
                    Ok((Expr::Proto(p, start), None, 1))
                }
            },
            Tok::Kw(k)
                if dir_of(k).is_some() || aqual_of(k).is_some() || ndqual_of(k).is_some() =>
            {
                self.head(None, start)
            }
            Tok::Kw(k) => self.keyword_term(k, start),
            t if is_value(&t) => Err(CompileError::new(
                format!(
                    "{} needs a qualifier such as 'host', 'net' or 'port' before it{}",
                    t.describe(),
                    if self.pos == 0 {
                        String::new()
                    } else {
                        " (the term before it has none to pass on)".to_string()
                    }
                ),
                start,
            )),
            _ => Err(self.unexpected("a filter primitive (such as 'host x', 'tcp' or 'port 80')")),
        }
    }

    /// `head id`: `[proto] [dir] [kind] value`. The proto, if any, has been
    /// consumed; `start` is where the head began.
    fn head(&mut self, proto: Option<Proto>, start: Span) -> R<(Expr, Q, usize)> {
        let mut dir = None;
        let mut kind = None;
        if let Tok::Kw(k) = *self.peek() {
            if let Some(d) = dir_of(k) {
                self.bump();
                dir = Some(d);
                if matches!(d, Dir::Src | Dir::Dst) && matches!(self.peek(), Tok::And | Tok::Or) {
                    let is_and = self.peek() == &Tok::And;
                    self.bump();
                    let other = if d == Dir::Src { Kw::Dst } else { Kw::Src };
                    if self.peek() != &Tok::Kw(other) {
                        return Err(self.unexpected(&format!("'{}'", crate::lexer::kw_name(other))));
                    }
                    self.bump();
                    dir = Some(if is_and {
                        Dir::SrcAndDst
                    } else {
                        Dir::SrcOrDst
                    });
                }
            }
        }
        if let Tok::Kw(k) = *self.peek() {
            if let Some(a) = aqual_of(k) {
                self.bump();
                kind = Some(a);
            } else if let Some(a) = ndqual_of(k) {
                if dir.is_some() {
                    return Err(CompileError::new(
                        format!(
                            "'{}' cannot follow a direction qualifier",
                            crate::lexer::kw_name(k)
                        ),
                        self.span(),
                    ));
                }
                self.bump();
                kind = Some(a);
            }
        }
        let q = Qual { proto, dir, kind };
        let (e, d) = self.id(Some(q), Some(start))?;
        Ok((e, Some(q), d))
    }

    /// `id: nid | pnum | '(' pid ')'`, with `nid` including `not id`.
    fn id(&mut self, q: Q, head: Option<Span>) -> R<(Expr, usize)> {
        let mut nots = Vec::new();
        while self.peek() == &Tok::Not {
            nots.push(self.bump().span);
        }
        let (mut e, mut d) = if self.peek() == &Tok::LParen {
            self.enter()?;
            let r = self.paren_id(q)?;
            self.leave();
            r
        } else {
            (self.value(q, head)?, 1)
        };
        if nots.len() > MAX_DEPTH || d + nots.len() > MAX_TREE_DEPTH {
            return Err(too_deep(nots[0]));
        }
        for s in nots.into_iter().rev() {
            let sp = s.to(e.span());
            e = Expr::Not(Box::new(e), sp);
            d += 1;
        }
        Ok((e, d))
    }

    /// `'(' pid ')'` or a parenthesized number: ids joined by and/or, all
    /// with the same inherited qualifiers.
    fn paren_id(&mut self, q: Q) -> R<(Expr, usize)> {
        let open = self.bump().span;
        // The first element is a `nid` or a `pnum`; a parenthesized list
        // cannot come first (libpcap's grammar has no such rule).
        let (first, d) = if self.peek() == &Tok::LParen {
            let (n, sp) = self.pnum()?;
            (self.make_prim(q, Value::Num(n), sp, None)?, 1)
        } else {
            self.id_first(q)?
        };
        let mut chain = Chain::new(first, d);
        loop {
            let is_and = match self.peek() {
                Tok::And => true,
                Tok::Or => false,
                _ => break,
            };
            let op_span = self.bump().span;
            let (e, d) = self.id(q, None)?;
            chain.push(is_and, e, d, op_span)?;
        }
        self.expect_rparen(open)?;
        Ok(chain.finish())
    }

    fn id_first(&mut self, q: Q) -> R<(Expr, usize)> {
        if self.peek() == &Tok::Not {
            // `not id` is a nid.
            return self.id(q, None);
        }
        Ok((self.value(q, None)?, 1))
    }

    /// `pnum: NUM | '(' pnum ')'`.
    fn pnum(&mut self) -> R<(u32, Span)> {
        if self.peek() == &Tok::LParen {
            self.enter()?;
            let open = self.bump().span;
            let (n, _) = self.pnum()?;
            let close = self.expect_rparen(open)?;
            self.leave();
            Ok((n, open.to(close)))
        } else {
            self.expect_num("a number")
        }
    }

    fn make_prim(&self, q: Q, value: Value, vspan: Span, head: Option<Span>) -> R<Expr> {
        let Some(qual) = q else {
            return Err(CompileError::new(
                "a bare value needs a qualifier such as 'host', 'net' or 'port', and the term before it has none to pass on",
                vspan,
            ));
        };
        Ok(Expr::Prim(Prim {
            qual,
            value,
            span: head.map_or(vspan, |h| h.to(vspan)),
            value_span: vspan,
        }))
    }

    /// A single value: number, name, address, `addr/len`, `addr mask m`.
    fn value(&mut self, q: Q, head: Option<Span>) -> R<Expr> {
        let start = self.span();
        let (value, end) = match self.peek().clone() {
            Tok::Num(n) => (Value::Num(n), self.bump().span),
            Tok::Id(s) => (Value::Name(s), self.bump().span),
            Tok::Arcnet(a) => (Value::Arcnet(a), self.bump().span),
            Tok::Mac(_, m) => (Value::Mac(m), self.bump().span),
            Tok::Dotted(text) => {
                let mut end = self.bump().span;
                let (addr, bits) = pack_dotted(&text);
                let dotted = Value::Dotted { text, addr, bits };
                match self.peek() {
                    Tok::Slash => {
                        self.bump();
                        let (len, sp) = self.expect_num("a prefix length")?;
                        end = sp;
                        (Value::Cidr(Box::new(dotted), len), end)
                    }
                    Tok::Kw(Kw::Mask) => {
                        self.bump();
                        match self.peek().clone() {
                            Tok::Dotted(mtext) => {
                                end = self.bump().span;
                                let (maddr, mbits) = pack_dotted(&mtext);
                                let mask = Value::Dotted {
                                    text: mtext,
                                    addr: maddr,
                                    bits: mbits,
                                };
                                (Value::Masked(Box::new(dotted), Box::new(mask)), end)
                            }
                            _ => {
                                return Err(self.unexpected("a dotted netmask such as 255.255.0.0"))
                            }
                        }
                    }
                    _ => (dotted, end),
                }
            }
            Tok::Ipv6(_, a) => {
                let mut end = self.bump().span;
                let mut len = None;
                if self.peek() == &Tok::Slash {
                    self.bump();
                    let (l, sp) = self.expect_num("a prefix length")?;
                    end = sp;
                    len = Some(l);
                }
                (Value::Ipv6(a, len), end)
            }
            _ => return Err(self.unexpected("a value")),
        };
        self.make_prim(q, value, start.to(end), head)
    }

    // ---- keyword primitives ---------------------------------------------

    fn opt_pnum(&mut self) -> R<(Option<u32>, Option<Span>)> {
        match self.peek() {
            Tok::Num(_) | Tok::LParen => {
                let (n, sp) = self.pnum()?;
                Ok((Some(n), Some(sp)))
            }
            _ => Ok((None, None)),
        }
    }

    fn expect_id(&mut self, what: &str) -> R<(String, Span)> {
        match self.peek().clone() {
            Tok::Id(s) => Ok((s, self.bump().span)),
            _ => Err(self.unexpected(what)),
        }
    }

    fn keyword_term(&mut self, k: Kw, start: Span) -> R<(Expr, Q, usize)> {
        let done = |o: Other, end: Span| -> R<(Expr, Q, usize)> {
            Ok((Expr::Other(o, start.to(end)), None, 1))
        };
        match k {
            Kw::Broadcast => {
                self.bump();
                done(Other::Broadcast(None), start)
            }
            Kw::Multicast => {
                self.bump();
                done(Other::Multicast(None), start)
            }
            Kw::Type | Kw::Subtype | Kw::Dir => self.wlan(None, start),
            Kw::Less | Kw::Greater => {
                self.bump();
                let (n, end) = self.expect_num("a length")?;
                done(
                    if k == Kw::Less {
                        Other::Less(n)
                    } else {
                        Other::Greater(n)
                    },
                    end,
                )
            }
            Kw::Byte => {
                self.bump();
                let (off, _) = self.expect_num("a byte offset")?;
                let op = match self.peek() {
                    Tok::Amp => ByteOp::And,
                    Tok::Pipe => ByteOp::Or,
                    Tok::Lt => ByteOp::Lt,
                    Tok::Gt => ByteOp::Gt,
                    Tok::Eq => ByteOp::Eq,
                    _ => return Err(self.unexpected("one of '&', '|', '<', '>', '='")),
                };
                self.bump();
                let (v, end) = self.expect_num("a number")?;
                done(Other::Byte(off, op, v), end)
            }
            Kw::Inbound => {
                self.bump();
                done(Other::Inbound, start)
            }
            Kw::Outbound => {
                self.bump();
                done(Other::Outbound, start)
            }
            Kw::Ifindex => {
                self.bump();
                let (n, end) = self.expect_num("an interface index")?;
                done(Other::Ifindex(n), end)
            }
            Kw::Vlan | Kw::Mpls | Kw::Pppoes | Kw::Geneve | Kw::Vxlan => {
                self.bump();
                let (n, end) = self.opt_pnum()?;
                let o = match k {
                    Kw::Vlan => Other::Vlan(n),
                    Kw::Mpls => Other::Mpls(n),
                    Kw::Pppoes => Other::Pppoes(n),
                    Kw::Geneve => Other::Geneve(n),
                    _ => Other::Vxlan(n),
                };
                done(o, end.unwrap_or(start))
            }
            Kw::Pppoed => {
                self.bump();
                done(Other::Pppoed, start)
            }
            Kw::Ifname | Kw::Rset => {
                self.bump();
                let (s, end) = self.expect_id(if k == Kw::Ifname {
                    "an interface name"
                } else {
                    "a ruleset name"
                })?;
                done(
                    if k == Kw::Ifname {
                        Other::PfIfname(s)
                    } else {
                        Other::PfRuleset(s)
                    },
                    end,
                )
            }
            Kw::Rnr | Kw::Srnr => {
                self.bump();
                let (n, end) = self.expect_num("a rule number")?;
                done(
                    if k == Kw::Rnr {
                        Other::PfRulenum(n)
                    } else {
                        Other::PfSubrulenum(n)
                    },
                    end,
                )
            }
            Kw::Reason => {
                self.bump();
                match self.peek().clone() {
                    Tok::Num(n) => {
                        let end = self.bump().span;
                        done(Other::PfReason(n), end)
                    }
                    Tok::Id(s) => {
                        let sp = self.bump().span;
                        let code = names::pf_reason(&s).ok_or_else(|| {
                            CompileError::new(format!("unknown PF reason \"{s}\""), sp)
                        })?;
                        done(Other::PfReason(code), sp)
                    }
                    _ => Err(self.unexpected("a PF reason")),
                }
            }
            Kw::Action => {
                self.bump();
                let (s, sp) = self.expect_id("a PF action")?;
                let code = names::pf_action(&s)
                    .ok_or_else(|| CompileError::new(format!("unknown PF action \"{s}\""), sp))?;
                done(Other::PfAction(code), sp)
            }
            Kw::Llc => {
                self.bump();
                match self.peek().clone() {
                    Tok::Id(s) => {
                        let sp = self.bump().span;
                        let l = match s.to_ascii_lowercase().as_str() {
                            "i" => Llc::I,
                            "s" => Llc::S,
                            "u" => Llc::U,
                            _ => {
                                if let Some(v) = names::llc_s_function(&s) {
                                    Llc::SSub(v)
                                } else if let Some(v) = names::llc_u_function(&s) {
                                    Llc::USub(v)
                                } else {
                                    return Err(CompileError::new(
                                        format!("unknown LLC type name \"{s}\""),
                                        sp,
                                    ));
                                }
                            }
                        };
                        done(Other::Llc(Some(l)), sp)
                    }
                    Tok::Kw(Kw::Rnr) => {
                        let sp = self.bump().span;
                        done(Other::Llc(Some(Llc::SSub(0x05))), sp)
                    }
                    _ => done(Other::Llc(None), start),
                }
            }
            Kw::Lane
            | Kw::Metac
            | Kw::Bcc
            | Kw::Oamf4ec
            | Kw::Oamf4sc
            | Kw::Sc
            | Kw::Ilmic
            | Kw::Oam
            | Kw::Oamf4
            | Kw::Connectmsg
            | Kw::Metaconnect => {
                self.bump();
                let a = match k {
                    Kw::Lane => Atm::Lane,
                    Kw::Metac => Atm::Metac,
                    Kw::Bcc => Atm::Bcc,
                    Kw::Oamf4ec => Atm::Oamf4ec,
                    Kw::Oamf4sc => Atm::Oamf4sc,
                    Kw::Sc => Atm::Sc,
                    Kw::Ilmic => Atm::Ilmic,
                    Kw::Oam => Atm::Oam,
                    Kw::Oamf4 => Atm::Oamf4,
                    Kw::Connectmsg => Atm::Connectmsg,
                    _ => Atm::Metaconnect,
                };
                done(Other::Atm(a), start)
            }
            Kw::Vpi | Kw::Vci => {
                self.bump();
                let f = if k == Kw::Vpi {
                    AtmField::Vpi
                } else {
                    AtmField::Vci
                };
                let (list, end) = self.field_values()?;
                done(Other::AtmField(f, list), end)
            }
            Kw::Fisu | Kw::Lssu | Kw::Msu | Kw::Hfisu | Kw::Hlssu | Kw::Hmsu => {
                self.bump();
                let m = match k {
                    Kw::Fisu => Mtp2Type::Fisu,
                    Kw::Lssu => Mtp2Type::Lssu,
                    Kw::Msu => Mtp2Type::Msu,
                    Kw::Hfisu => Mtp2Type::Hfisu,
                    Kw::Hlssu => Mtp2Type::Hlssu,
                    _ => Mtp2Type::Hmsu,
                };
                done(Other::Mtp2(m), start)
            }
            Kw::Sio | Kw::Opc | Kw::Dpc | Kw::Sls | Kw::Hsio | Kw::Hopc | Kw::Hdpc | Kw::Hsls => {
                self.bump();
                let f = match k {
                    Kw::Sio => Mtp3Field::Sio,
                    Kw::Opc => Mtp3Field::Opc,
                    Kw::Dpc => Mtp3Field::Dpc,
                    Kw::Sls => Mtp3Field::Sls,
                    Kw::Hsio => Mtp3Field::Hsio,
                    Kw::Hopc => Mtp3Field::Hopc,
                    Kw::Hdpc => Mtp3Field::Hdpc,
                    _ => Mtp3Field::Hsls,
                };
                let (list, end) = self.field_values()?;
                done(Other::Mtp3Field(f, list), end)
            }
            _ => Err(self.unexpected("a filter primitive (such as 'host x', 'tcp' or 'port 80')")),
        }
    }

    /// `NUM | relop NUM | '(' NUM (or NUM)* ')'` after `vpi`, `sio`, ...
    fn field_values(&mut self) -> R<(Vec<(RelOp, u32)>, Span)> {
        if let Some(op) = self.relop() {
            self.bump();
            let (n, end) = self.expect_num("a number")?;
            return Ok((vec![(op, n)], end));
        }
        match self.peek() {
            Tok::Num(_) => {
                let (n, end) = self.expect_num("a number")?;
                Ok((vec![(RelOp::Eq, n)], end))
            }
            Tok::LParen => {
                let open = self.bump().span;
                let mut list = vec![(RelOp::Eq, self.expect_num("a number")?.0)];
                while self.peek() == &Tok::Or {
                    self.bump();
                    list.push((RelOp::Eq, self.expect_num("a number")?.0));
                }
                let end = self.expect_rparen(open)?;
                Ok((list, end))
            }
            _ => Err(self.unexpected("a number, a comparison or a parenthesized list of numbers")),
        }
    }

    /// 802.11 `type T [subtype S]`, `subtype S`, `dir D`.
    fn wlan(&mut self, proto: Option<Proto>, start: Span) -> R<(Expr, Q, usize)> {
        let k = self.bump();
        let w = match k.tok {
            Tok::Kw(Kw::Type) => {
                let t = match self.peek().clone() {
                    Tok::Num(n) => {
                        let sp = self.bump().span;
                        if n & !0x0c != 0 {
                            return Err(CompileError::new(
                                format!("invalid 802.11 type value 0x{n:02x}"),
                                sp,
                            ));
                        }
                        n
                    }
                    Tok::Id(s) => {
                        let sp = self.bump().span;
                        names::wlan_type(&s).ok_or_else(|| {
                            CompileError::new(format!("unknown 802.11 type name \"{s}\""), sp)
                        })?
                    }
                    _ => return Err(self.unexpected("an 802.11 type (mgt, ctl, data or a number)")),
                };
                if self.peek() == &Tok::Kw(Kw::Subtype) {
                    self.bump();
                    let s = match self.peek().clone() {
                        Tok::Num(n) => {
                            let sp = self.bump().span;
                            if n & !0xf0 != 0 {
                                return Err(CompileError::new(
                                    format!("invalid 802.11 subtype value 0x{n:02x}"),
                                    sp,
                                ));
                            }
                            n
                        }
                        Tok::Id(s) => {
                            let sp = self.bump().span;
                            if !names::wlan_has_subtypes(t) {
                                return Err(CompileError::new("unknown 802.11 type", sp));
                            }
                            names::wlan_subtype_of(t, &s).ok_or_else(|| {
                                CompileError::new(
                                    format!("unknown 802.11 subtype name \"{s}\""),
                                    sp,
                                )
                            })?
                        }
                        _ => return Err(self.unexpected("an 802.11 subtype")),
                    };
                    Wlan::TypeSubtype(t | s)
                } else {
                    Wlan::Type(t)
                }
            }
            Tok::Kw(Kw::Subtype) => {
                let (s, sp) = self.expect_id("an 802.11 subtype name")?;
                let v = names::wlan_subtype(&s).ok_or_else(|| {
                    CompileError::new(format!("unknown 802.11 subtype name \"{s}\""), sp)
                })?;
                Wlan::TypeSubtype(v)
            }
            _ => match self.peek().clone() {
                Tok::Num(n) => {
                    self.bump();
                    Wlan::Dir(n)
                }
                Tok::Id(s) => {
                    let sp = self.bump().span;
                    Wlan::Dir(
                        names::wlan_direction(&s)
                            .ok_or_else(|| CompileError::new("unknown 802.11 direction", sp))?,
                    )
                }
                _ => {
                    return Err(self.unexpected("an 802.11 direction (nods, tods, fromds, dstods)"))
                }
            },
        };
        let end = self.prev_span();
        Ok((Expr::Other(Other::Wlan(proto, w), start.to(end)), None, 1))
    }

    // ---- relations and arithmetic ----------------------------------------

    fn relop(&self) -> Option<RelOp> {
        Some(match self.peek() {
            Tok::Gt => RelOp::Gt,
            Tok::Ge => RelOp::Ge,
            Tok::Eq => RelOp::Eq,
            Tok::Le => RelOp::Le,
            Tok::Lt => RelOp::Lt,
            Tok::Ne => RelOp::Ne,
            _ => return None,
        })
    }

    fn relation(&mut self) -> R<(Expr, Q, usize)> {
        let (l, ld) = self.arith(0)?;
        let Some(op) = self.relop() else {
            return Err(self.unexpected("a comparison ('>', '<', '>=', '<=', '=', '!=')"));
        };
        self.bump();
        let (r, rd) = self.arith(0)?;
        let span = l.span().to(r.span());
        Ok((Expr::Rel(op, l, r, span), None, ld.max(rd) + 1))
    }

    /// Precedence climbing; see the module docs for the levels.
    fn arith(&mut self, min_bp: u8) -> R<(Arith, usize)> {
        let (mut lhs, mut d) = self.arith_prefix()?;
        loop {
            let (op, lbp, rbp) = match self.peek() {
                Tok::Pipe => (ArithOp::Or, 1, 2),
                Tok::Amp => (ArithOp::And, 3, 4),
                Tok::Shl => (ArithOp::Shl, 5, 6),
                Tok::Shr => (ArithOp::Shr, 5, 6),
                Tok::Plus => (ArithOp::Add, 7, 8),
                Tok::Minus => (ArithOp::Sub, 7, 8),
                Tok::Star => (ArithOp::Mul, 9, 10),
                Tok::Slash => (ArithOp::Div, 9, 10),
                // No declared precedence: yacc always shifts.
                Tok::Percent => (ArithOp::Mod, 13, 0),
                Tok::Caret => (ArithOp::Xor, 13, 0),
                _ => break,
            };
            if lbp < min_bp {
                break;
            }
            let op_span = self.bump().span;
            self.enter()?;
            let (rhs, rd) = self.arith(rbp)?;
            self.leave();
            d = d.max(rd) + 1;
            if d > MAX_TREE_DEPTH {
                return Err(too_long(op_span));
            }
            let span = lhs.span().to(rhs.span());
            lhs = Arith::Bin(op, Box::new(lhs), Box::new(rhs), span);
        }
        Ok((lhs, d))
    }

    fn arith_prefix(&mut self) -> R<(Arith, usize)> {
        let start = self.span();
        match self.peek().clone() {
            Tok::Minus => {
                self.bump();
                self.enter()?;
                // Unary minus binds tighter than '*', looser than '%'/'^'.
                let (e, d) = self.arith(11)?;
                self.leave();
                let span = start.to(e.span());
                Ok((Arith::Neg(Box::new(e), span), d + 1))
            }
            Tok::Num(n) => {
                self.bump();
                Ok((Arith::Num(n, start), 1))
            }
            Tok::Kw(Kw::Len) => {
                self.bump();
                Ok((Arith::Len(start), 1))
            }
            Tok::Proto(p) => {
                self.bump();
                if self.peek() != &Tok::LBracket {
                    return Err(self.unexpected("'[' (as in 'ip[0]')"));
                }
                let open = self.bump().span;
                self.enter()?;
                let (index, d) = self.arith(0)?;
                self.leave();
                let mut size = 1;
                if self.peek() == &Tok::Colon {
                    self.bump();
                    let (n, sp) = self.expect_num("a size (1, 2 or 4)")?;
                    if !matches!(n, 1 | 2 | 4) {
                        return Err(CompileError::new("data size must be 1, 2, or 4", sp));
                    }
                    size = n;
                }
                if self.peek() != &Tok::RBracket {
                    return Err(self
                        .unexpected(&format!("']' to close the '[' at column {}", open.column())));
                }
                let end = self.bump().span;
                Ok((
                    Arith::Load {
                        proto: p,
                        index: Box::new(index),
                        size,
                        span: start.to(end),
                    },
                    d + 1,
                ))
            }
            Tok::LParen => {
                self.enter()?;
                self.bump();
                let (e, d) = self.arith(0)?;
                self.expect_rparen(start)?;
                self.leave();
                Ok((e, d))
            }
            _ => Err(self.unexpected("a number, 'len' or a packet field such as 'ip[0]'")),
        }
    }
}

#[cfg(test)]
mod tests;
