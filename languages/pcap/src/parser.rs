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
//! Nesting (parentheses, `not`, alternating `and`/`or`, arithmetic) is
//! limited to [`MAX_DEPTH`] levels so that neither the parser nor code
//! walking the tree can overflow the stack.
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

/// The deepest nesting the parser accepts.
///
/// ```
/// let deep = format!("{}tcp{}", "(".repeat(2000), ")".repeat(2000));
/// assert!(sluice_pcap::parser::parse(&deep).is_err());
/// assert!(sluice_pcap::parser::MAX_DEPTH >= 100);
/// ```
pub const MAX_DEPTH: usize = 250;

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
                if node_depth > MAX_DEPTH {
                    return Err(too_deep(span));
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

fn lookup_ci(table: &[(&str, u32)], name: &str) -> Option<u32> {
    table
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| *v)
}

const WLAN_TYPES: &[(&str, u32)] = &[
    ("data", 0x08),
    ("mgt", 0x00),
    ("management", 0x00),
    ("ctl", 0x04),
    ("control", 0x04),
];

const WLAN_MGT: &[(&str, u32)] = &[
    ("assocreq", 0x00),
    ("assoc-req", 0x00),
    ("assocresp", 0x10),
    ("assoc-resp", 0x10),
    ("reassocreq", 0x20),
    ("reassoc-req", 0x20),
    ("reassocresp", 0x30),
    ("reassoc-resp", 0x30),
    ("probereq", 0x40),
    ("probe-req", 0x40),
    ("proberesp", 0x50),
    ("probe-resp", 0x50),
    ("beacon", 0x80),
    ("atim", 0x90),
    ("disassoc", 0xa0),
    ("disassociation", 0xa0),
    ("auth", 0xb0),
    ("authentication", 0xb0),
    ("deauth", 0xc0),
    ("deauthentication", 0xc0),
];

const WLAN_CTL: &[(&str, u32)] = &[
    ("bar", 0x80),
    ("ba", 0x90),
    ("ps-poll", 0xa0),
    ("rts", 0xb0),
    ("cts", 0xc0),
    ("ack", 0xd0),
    ("cf-end", 0xe0),
    ("cf-end-ack", 0xf0),
];

const WLAN_DATA: &[(&str, u32)] = &[
    ("data", 0x00),
    ("data-cf-ack", 0x10),
    ("data-cf-poll", 0x20),
    ("data-cf-ack-poll", 0x30),
    ("null", 0x40),
    ("cf-ack", 0x50),
    ("cf-poll", 0x60),
    ("cf-ack-poll", 0x70),
    ("qos-data", 0x80),
    ("qos-data-cf-ack", 0x90),
    ("qos-data-cf-poll", 0xa0),
    ("qos-data-cf-ack-poll", 0xb0),
    ("qos", 0xc0),
    ("qos-cf-poll", 0xe0),
    ("qos-cf-ack-poll", 0xf0),
];

/// The 802.11 subtype table for a type value, in libpcap's search order.
const WLAN_SUBTYPES: &[(u32, &[(&str, u32)])] =
    &[(0x00, WLAN_MGT), (0x04, WLAN_CTL), (0x08, WLAN_DATA)];

const WLAN_DIRS: &[(&str, u32)] = &[("nods", 0), ("tods", 1), ("fromds", 2), ("dstods", 3)];

const LLC_S: &[(&str, u32)] = &[("rr", 0x01), ("rnr", 0x05), ("rej", 0x09)];

const LLC_U: &[(&str, u32)] = &[
    ("ui", 0x03),
    ("ua", 0x63),
    ("disc", 0x43),
    ("dm", 0x0f),
    ("sabme", 0x6f),
    ("test", 0xe3),
    ("xid", 0xaf),
    ("frmr", 0x87),
];

const PF_REASONS: &[(&str, u32)] = &[
    ("match", 0),
    ("bad-offset", 1),
    ("fragment", 2),
    ("short", 3),
    ("normalize", 4),
    ("memory", 5),
    ("bad-timestamp", 6),
    ("congestion", 7),
    ("ip-option", 8),
    ("proto-cksum", 9),
    ("state-mismatch", 10),
    ("state-insert", 11),
    ("state-limit", 12),
    ("src-limit", 13),
    ("synproxy", 14),
];

const PF_ACTIONS: &[(&str, u32)] = &[
    ("pass", 0),
    ("accept", 0),
    ("drop", 1),
    ("block", 1),
    ("scrub", 2),
    ("noscrub", 3),
    ("nat", 4),
    ("nonat", 5),
    ("binat", 6),
    ("nobinat", 7),
    ("rdr", 8),
    ("nordr", 9),
    ("synproxy-drop", 10),
];

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
        if d + nots.len() > MAX_DEPTH {
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
        if d + nots.len() > MAX_DEPTH {
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
                        let code = lookup_ci(PF_REASONS, &s).ok_or_else(|| {
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
                let code = lookup_ci(PF_ACTIONS, &s)
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
                                if let Some(v) = lookup_ci(LLC_S, &s) {
                                    Llc::SSub(v)
                                } else if let Some(v) = lookup_ci(LLC_U, &s) {
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
                        lookup_ci(WLAN_TYPES, &s).ok_or_else(|| {
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
                            let table = WLAN_SUBTYPES
                                .iter()
                                .find(|(ty, _)| *ty == t)
                                .ok_or_else(|| CompileError::new("unknown 802.11 type", sp))?
                                .1;
                            lookup_ci(table, &s).ok_or_else(|| {
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
                let v = WLAN_SUBTYPES
                    .iter()
                    .find_map(|(ty, table)| lookup_ci(table, &s).map(|v| v | ty))
                    .ok_or_else(|| {
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
                        lookup_ci(WLAN_DIRS, &s)
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
            if d > MAX_DEPTH {
                return Err(too_deep(op_span));
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
mod tests {
    use super::*;

    fn p(s: &str) -> Expr {
        parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
    }

    fn prim(e: &Expr) -> &Prim {
        match e {
            Expr::Prim(p) => p,
            other => panic!("not a prim: {other:?}"),
        }
    }

    fn q(proto: Option<Proto>, dir: Option<Dir>, kind: Option<Kind>) -> Qual {
        Qual { proto, dir, kind }
    }

    #[test]
    fn empty_is_true() {
        assert!(matches!(p(""), Expr::True(_)));
        assert!(matches!(p("  \t"), Expr::True(_)));
    }

    #[test]
    fn inheritance_host_or() {
        let Expr::Or(v) = p("host a or b") else {
            panic!()
        };
        assert_eq!(prim(&v[1]).qual, q(None, None, Some(Kind::Host)));
        assert_eq!(prim(&v[1]).span, Span::new(10, 11));
        assert_eq!(prim(&v[0]).span, Span::new(0, 6));
    }

    #[test]
    fn inheritance_port_names() {
        let Expr::Or(v) = p("port ftp or ftp-data") else {
            panic!()
        };
        assert_eq!(prim(&v[1]).value, Value::Name("ftp-data".into()));
        assert_eq!(prim(&v[1]).qual.kind, Some(Kind::Port));
    }

    #[test]
    fn inheritance_paren_list() {
        let Expr::And(v) = p("host x and (y or z)") else {
            panic!()
        };
        let Expr::Or(w) = &v[1] else { panic!() };
        assert_eq!(prim(&w[0]).qual.kind, Some(Kind::Host));
        assert_eq!(prim(&w[1]).value, Value::Name("z".into()));
    }

    #[test]
    fn inheritance_not() {
        let Expr::And(v) = p("ip host a and not b") else {
            panic!()
        };
        let Expr::Not(b, _) = &v[1] else { panic!() };
        assert_eq!(prim(b).qual, q(Some(Proto::Ip), None, Some(Kind::Host)));
    }

    #[test]
    fn inheritance_full_head() {
        let Expr::Or(v) = p("tcp src port 1 or 2") else {
            panic!()
        };
        assert_eq!(
            prim(&v[1]).qual,
            q(Some(Proto::Tcp), Some(Dir::Src), Some(Kind::Port))
        );
        assert_eq!(prim(&v[1]).value, Value::Num(2));
    }

    #[test]
    fn inheritance_through_parenthesized_term() {
        // libpcap passes on the qualifiers in force before the parentheses.
        let Expr::Or(v) = p("host 1.1.1.1 and (tcp) or 2.2.2.2") else {
            panic!()
        };
        assert_eq!(prim(&v[1]).qual.kind, Some(Kind::Host));
        assert!(parse("(host 1.1.1.1) or 2.2.2.2").is_err());
    }

    #[test]
    fn bare_value_errors() {
        for s in [
            "tcp or 5",
            "tcp or 1.2.3.4",
            "broadcast or x",
            "ip[0] = 1 or x",
            "5",
            "x",
            "vpi 1 or 2",
        ] {
            assert!(parse(s).is_err(), "{s}");
        }
    }

    #[test]
    fn precedence_left_assoc() {
        let Expr::And(v) = p("tcp or udp and icmp") else {
            panic!()
        };
        assert!(matches!(v[0], Expr::Or(_)));
        let Expr::Or(v) = p("tcp and udp or icmp") else {
            panic!()
        };
        assert!(matches!(v[0], Expr::And(_)));
        let Expr::Or(v) = p("host a or b or c") else {
            panic!()
        };
        assert_eq!(v.len(), 3);
        let Expr::And(v) = p("not tcp and udp") else {
            panic!()
        };
        assert!(matches!(v[0], Expr::Not(..)));
    }

    #[test]
    fn heads() {
        let e = p("src or dst host a");
        assert_eq!(prim(&e).qual.dir, Some(Dir::SrcOrDst));
        let e = p("dst and src net 10");
        assert_eq!(prim(&e).qual.dir, Some(Dir::SrcAndDst));
        let e = p("ip proto \\tcp");
        assert_eq!(prim(&e).qual, q(Some(Proto::Ip), None, Some(Kind::Proto)));
        assert_eq!(prim(&e).value, Value::Name("tcp".into()));
        let e = p("ip6 protochain 6");
        assert_eq!(prim(&e).qual.kind, Some(Kind::ProtoChain));
        let e = p("ether gateway x");
        assert_eq!(prim(&e).qual.kind, Some(Kind::Gateway));
        for bad in [
            "src proto 1",
            "dst protochain 1",
            "src gateway x",
            "src or host a",
            "proto",
            "net 10 mask 255.0.0.0",
            "net 10/8",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn values() {
        let e = p("net 10.0.0.0/8");
        assert!(
            matches!(&prim(&e).value, Value::Cidr(b, 8) if matches!(**b, Value::Dotted { addr: 0x0a000000, bits: 32, .. }))
        );
        let e = p("net 10.1 mask 255.255.0.0");
        assert!(matches!(prim(&e).value, Value::Masked(..)));
        let e = p("ip6 net fe80::/10");
        assert!(matches!(prim(&e).value, Value::Ipv6(_, Some(10))));
        let e = p("ether host ab-cd-ef-00-00-02");
        assert_eq!(prim(&e).value, Value::Mac([0xab, 0xcd, 0xef, 0, 0, 2]));
        let e = p("link host $c0");
        assert_eq!(prim(&e).value, Value::Arcnet(0xc0));
        let e = p("decnet host 63.1023");
        assert!(matches!(&prim(&e).value, Value::Dotted { text, .. } if text == "63.1023"));
        let e = p("port (80)");
        assert_eq!(prim(&e).value, Value::Num(80));
        let e = p("host ((1))");
        assert_eq!(prim(&e).value, Value::Num(1));
        assert!(parse("host ((a))").is_err());
        assert!(parse("host a or ((b or c) or d)").is_err());
        assert!(parse("host (a or (b))").is_ok());
    }

    #[test]
    fn arithmetic_precedence() {
        let Expr::Rel(RelOp::Eq, l, _, _) = p("1 + 2 * 3 = 7") else {
            panic!()
        };
        assert!(
            matches!(l, Arith::Bin(ArithOp::Add, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Mul, ..)))
        );
        let Expr::Rel(_, l, _, _) = p("1 | 2 & 3 = 0") else {
            panic!()
        };
        assert!(matches!(l, Arith::Bin(ArithOp::Or, ..)));
        let Expr::Rel(_, l, _, _) = p("1 << 2 + 3 = 0") else {
            panic!()
        };
        assert!(matches!(l, Arith::Bin(ArithOp::Shl, ..)));
        let Expr::Rel(_, l, _, _) = p("1 - 2 - 3 = 0") else {
            panic!()
        };
        assert!(
            matches!(l, Arith::Bin(ArithOp::Sub, ref a, _, _) if matches!(**a, Arith::Bin(ArithOp::Sub, ..)))
        );
        // '%' and '^': a % (b + c), a ^ (b * c), a * (b % c).
        let Expr::Rel(_, l, _, _) = p("ip[0] % ip[1] + ip[2] = 0") else {
            panic!()
        };
        assert!(
            matches!(l, Arith::Bin(ArithOp::Mod, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Add, ..)))
        );
        let Expr::Rel(_, l, _, _) = p("ip[0] * ip[1] ^ ip[2] = 0") else {
            panic!()
        };
        assert!(
            matches!(l, Arith::Bin(ArithOp::Mul, _, ref r, _) if matches!(**r, Arith::Bin(ArithOp::Xor, ..)))
        );
        let Expr::Rel(_, l, _, _) = p("-1 * 2 = 0") else {
            panic!()
        };
        assert!(
            matches!(l, Arith::Bin(ArithOp::Mul, ref a, _, _) if matches!(**a, Arith::Neg(..)))
        );
        let Expr::Rel(_, l, _, _) = p("tcp[tcpflags] & (tcp-syn|tcp-ack) != 0") else {
            panic!()
        };
        assert!(matches!(l, Arith::Bin(ArithOp::And, ..)));
    }

    #[test]
    fn loads() {
        let Expr::Rel(_, l, _, _) = p("ip[2:2] > 576") else {
            panic!()
        };
        assert!(matches!(
            l,
            Arith::Load {
                proto: Proto::Ip,
                size: 2,
                ..
            }
        ));
        assert!(parse("ip[0:3] = 1").is_err());
        assert!(parse("link[0:-1] != 0").is_err());
        assert!(p("(1) > 0") != Expr::True(Span::default()));
        p("((1)) + 1 > 0");
        p("host 1.1.1.1 or ((1) + 2 > 0)");
        p("host 1.1.1.1 or (not 1 > 0)");
        p("(ip[0] & 0xf) != 5 and (len > 100)");
        p("len - 1 > 2");
    }

    #[test]
    fn keyword_primitives() {
        assert_eq!(
            p("less 100"),
            Expr::Other(Other::Less(100), Span::new(0, 8))
        );
        assert!(matches!(
            p("byte 8 & 5"),
            Expr::Other(Other::Byte(8, ByteOp::And, 5), _)
        ));
        for bad in [
            "byte 1 != 2",
            "byte 1 ^ 2",
            "pppoed 1234",
            "vlan any",
            "vxlan invalid",
            "lldp",
            "\\lldp",
            "wlan subtype 0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        assert!(matches!(
            p("vlan (100)"),
            Expr::Other(Other::Vlan(Some(100)), _)
        ));
        assert!(matches!(p("vlan"), Expr::Other(Other::Vlan(None), _)));
        assert!(matches!(
            p("vxlan 5"),
            Expr::Other(Other::Vxlan(Some(5)), _)
        ));
        assert!(matches!(
            p("ip multicast"),
            Expr::Other(Other::Multicast(Some(Proto::Ip)), _)
        ));
        assert!(matches!(
            p("reason bad-offset"),
            Expr::Other(Other::PfReason(1), _)
        ));
        assert!(matches!(
            p("action block"),
            Expr::Other(Other::PfAction(1), _)
        ));
        assert!(parse("action defer").is_err());
        assert!(matches!(p("on eth0"), Expr::Other(Other::PfIfname(_), _)));
        assert!(matches!(
            p("llc ua"),
            Expr::Other(Other::Llc(Some(Llc::USub(0x63))), _)
        ));
        assert!(matches!(
            p("llc rnr"),
            Expr::Other(Other::Llc(Some(Llc::SSub(5))), _)
        ));
        assert!(matches!(p("llc"), Expr::Other(Other::Llc(None), _)));
        assert!(
            matches!(p("vpi (1 or 2)"), Expr::Other(Other::AtmField(AtmField::Vpi, ref v), _) if v.len() == 2)
        );
        assert!(
            matches!(p("sio > 5"), Expr::Other(Other::Mtp3Field(Mtp3Field::Sio, ref v), _) if v[0] == (RelOp::Gt, 5))
        );
        assert!(matches!(
            p("lsu"),
            Expr::Other(Other::Mtp2(Mtp2Type::Lssu), _)
        ));
        assert!(matches!(
            p("metaconnect"),
            Expr::Other(Other::Atm(Atm::Metaconnect), _)
        ));
    }

    #[test]
    fn wlan_names() {
        assert!(matches!(
            p("wlan type mgt subtype beacon"),
            Expr::Other(Other::Wlan(Some(Proto::Link), Wlan::TypeSubtype(0x80)), _)
        ));
        assert!(matches!(
            p("type data subtype qos-data"),
            Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0x88)), _)
        ));
        assert!(matches!(
            p("subtype cts"),
            Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0xc4)), _)
        ));
        assert!(matches!(
            p("subtype data"),
            Expr::Other(Other::Wlan(None, Wlan::TypeSubtype(0x08)), _)
        ));
        assert!(matches!(
            p("type ctl"),
            Expr::Other(Other::Wlan(None, Wlan::Type(4)), _)
        ));
        assert!(matches!(
            p("dir fromds"),
            Expr::Other(Other::Wlan(None, Wlan::Dir(2)), _)
        ));
        assert!(matches!(
            p("wlan dir 3"),
            Expr::Other(Other::Wlan(_, Wlan::Dir(3)), _)
        ));
        assert!(parse("type 3").is_err());
        assert!(parse("type mgt subtype cts").is_err());
    }

    #[test]
    fn error_messages() {
        let e = parse("tcp port").unwrap_err();
        assert_eq!(
            e.to_string(),
            "column 9: expected a value after 'port', found end of expression"
        );
        let e = parse("host a and").unwrap_err();
        assert_eq!(e.span.column(), 11);
        let e = parse("(tcp").unwrap_err();
        assert!(e.message.contains("')'"), "{e}");
        let e = parse("tcp udp").unwrap_err();
        assert_eq!(e.span.column(), 5);
        let e = parse("tcp or 5").unwrap_err();
        assert_eq!(e.span.column(), 8);
    }

    #[test]
    fn deep_nesting_is_bounded() {
        let ok = format!("{}tcp{}", "(".repeat(200), ")".repeat(200));
        p(&ok);
        let bad = format!("{}tcp{}", "(".repeat(100_000), ")".repeat(100_000));
        assert!(parse(&bad).is_err());
        let nots = format!("{}tcp", "not ".repeat(100_000));
        assert!(parse(&nots).is_err());
        let alt: Vec<String> = (0..10_000).map(|i| format!("port {i}")).collect();
        let mut s = alt[0].clone();
        for (i, t) in alt.iter().enumerate().skip(1) {
            s.push_str(if i % 2 == 0 { " and " } else { " or " });
            s.push_str(t);
        }
        assert!(parse(&s).is_err());
        let arith = format!("1{} > 0", " + 1".repeat(100_000));
        assert!(parse(&arith).is_err());
        let modc = format!("1{} > 0", " % 1".repeat(100_000));
        assert!(parse(&modc).is_err());
        let neg = format!("{}1 > 0", "- ".repeat(100_000));
        assert!(parse(&neg).is_err());
    }

    #[test]
    fn huge_flat_or() {
        let mut s = String::from("host a");
        for i in 0..100_000 {
            s.push_str(if i % 2 == 0 { " or host b" } else { " or c" });
        }
        let t = std::time::Instant::now();
        let Expr::Or(v) = p(&s) else { panic!() };
        assert_eq!(v.len(), 100_001);
        assert!(t.elapsed().as_secs_f64() < 5.0);
    }

    fn corpus(name: &str) -> Option<String> {
        let text = sluice_testsupport::corpus::text(name);
        if text.is_none() {
            sluice_testsupport::corpus::skipped(name);
        }
        text
    }

    /// The value of a string field in one line of JSON.
    fn json_field(line: &str, key: &str) -> Option<String> {
        let pat = format!("\"{key}\": \"");
        let start = line.find(&pat)? + pat.len();
        let mut out = String::new();
        let mut chars = line[start..].chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Some(out),
                '\\' => match chars.next()? {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'u' => {
                        let h: String = chars.by_ref().take(4).collect();
                        out.push(char::from_u32(u32::from_str_radix(&h, 16).ok()?)?);
                    }
                    other => out.push(other),
                },
                c => out.push(c),
            }
        }
        None
    }

    #[test]
    fn corpus_expressions_parse() {
        for file in ["expressions.txt", "expressions-extended.txt"] {
            let Some(text) = corpus(file) else { continue };
            let mut n = 0;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                if let Err(e) = parse(line) {
                    panic!("{file}: {line:?}: {e}");
                }
                n += 1;
            }
            assert!(n > 500, "{file}: only {n} lines");
        }
    }

    #[test]
    fn libpcap_accept_tests_parse() {
        let Some(text) = corpus("libpcap-tests/accept.jsonl") else {
            return;
        };
        let mut failures = Vec::new();
        for line in text.lines() {
            let Some(expr) = json_field(line, "expr") else {
                continue;
            };
            if expr.starts_with('_') {
                continue; // harness directives, not expressions
            }
            if json_field(line, "skip").is_some_and(|s| !s.is_empty()) {
                continue; // other platforms' names (pflog reasons and actions)
            }
            if let Err(e) = parse(&expr) {
                failures.push(format!("{expr:?}: {e}"));
            }
        }
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
    }

    #[test]
    fn syntax_errors_are_rejected() {
        let mut n = 0;
        if let Some(text) = corpus("expressions-reject.tsv") {
            for line in text.lines().skip(1) {
                let cols: Vec<&str> = line.split('\t').collect();
                if cols.len() > 1 && cols[1].contains("syntax error") {
                    assert!(parse(cols[0]).is_err(), "should not parse: {:?}", cols[0]);
                    n += 1;
                }
            }
        }
        if let Some(text) = corpus("libpcap-tests/reject.jsonl") {
            for line in text.lines() {
                let (Some(expr), Some(err)) =
                    (json_field(line, "expr"), json_field(line, "errstr"))
                else {
                    continue;
                };
                if err.contains("syntax error") {
                    assert!(parse(&expr).is_err(), "should not parse: {expr:?}");
                    n += 1;
                }
            }
        }
        eprintln!("{n} syntax errors checked");
    }

    #[test]
    fn libpcap_rejects_do_not_panic() {
        let Some(text) = corpus("libpcap-tests/reject.jsonl") else {
            return;
        };
        for line in text.lines() {
            if let Some(expr) = json_field(line, "expr") {
                let _ = parse(&expr);
            }
        }
    }

    mod prop {
        use super::super::parse;
        use proptest::prelude::*;

        const WORDS: &[&str] = &[
            "host",
            "net",
            "port",
            "portrange",
            "src",
            "dst",
            "and",
            "or",
            "not",
            "!",
            "(",
            ")",
            "[",
            "]",
            ":",
            "tcp",
            "ip",
            "ether",
            "ip6",
            "proto",
            "protochain",
            "gateway",
            "1",
            "0x10",
            "10.1",
            "1.2.3.4",
            "fe80::1",
            "a:b:c:d:e:f",
            "$1",
            "x",
            "ftp-data",
            "+",
            "-",
            "*",
            "/",
            "%",
            "&",
            "|",
            "^",
            "<<",
            ">>",
            "=",
            "!=",
            "<",
            "<=",
            ">",
            ">=",
            "len",
            "vlan",
            "mpls",
            "byte",
            "less",
            "type",
            "subtype",
            "dir",
            "mgt",
            "beacon",
            "llc",
            "vpi",
            "sio",
            "mask",
            "255.0.0.0",
            "broadcast",
            "&&",
            "||",
            "\\tcp",
        ];

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2000))]
            #[test]
            fn arbitrary_strings_never_panic(s in "\\PC{0,64}") {
                let _ = parse(&s);
            }

            #[test]
            fn ascii_soup_never_panics(s in "[ -~]{0,80}") {
                let _ = parse(&s);
            }

            #[test]
            fn token_soup_never_panics(v in proptest::collection::vec(0..WORDS.len(), 0..30)) {
                let s: Vec<&str> = v.iter().map(|&i| WORDS[i]).collect();
                let _ = parse(&s.join(" "));
            }
        }
    }
}
