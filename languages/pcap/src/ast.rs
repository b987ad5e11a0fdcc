//! The syntax tree of a pcap filter expression, after qualifier inheritance.
//!
//! The parser resolves libpcap's implicit qualifiers: in `host a or b` the
//! bare `b` becomes a full [`Expr::Prim`] with the qualifiers of the term
//! before it, so the code generator never has to look back. Every node keeps
//! the byte span it came from so errors can point at a column.
//!
//! ```
//! use sluice_pcap::ast::{Expr, Span};
//! let e = Expr::True(Span::new(0, 0));
//! assert_eq!(e.span(), Span::new(0, 0));
//! ```

/// A half-open byte range `start..end` in the expression text.
///
/// ```
/// let s = sluice_pcap::ast::Span::new(3, 7);
/// assert_eq!(s.column(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    ///
    /// ```
    /// assert_eq!(sluice_pcap::ast::Span::new(1, 2).end, 2);
    /// ```
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }

    /// The 1-based column of the first byte.
    ///
    /// ```
    /// assert_eq!(sluice_pcap::ast::Span::new(0, 1).column(), 1);
    /// ```
    pub fn column(&self) -> usize {
        self.start + 1
    }

    /// The smallest span covering both.
    ///
    /// ```
    /// use sluice_pcap::ast::Span;
    /// assert_eq!(Span::new(1, 2).to(Span::new(5, 9)), Span::new(1, 9));
    /// ```
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
}

/// A boolean filter expression.
///
/// `and` and `or` are n-ary so that a disjunction of 100,000 terms is a flat
/// vector, not a tree 100,000 levels deep.
///
/// ```
/// use sluice_pcap::ast::{Expr, Span};
/// let e = Expr::Not(Box::new(Expr::True(Span::default())), Span::default());
/// assert!(matches!(e, Expr::Not(..)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// The empty expression: accepts everything.
    True(Span),
    /// All of the operands, evaluated left to right.
    And(Vec<Expr>),
    /// Any of the operands, evaluated left to right.
    Or(Vec<Expr>),
    /// Negation (`not`, `!`).
    Not(Box<Expr>, Span),
    /// A qualified primitive: `[proto] [dir] [kind] value`, e.g. `tcp src port 80`.
    Prim(Prim),
    /// A bare protocol name, e.g. `tcp`, `ip6`, `arp`, `isis`.
    Proto(Proto, Span),
    /// A comparison of two arithmetic expressions, e.g. `ip[0] & 0xf > 5`.
    Rel(RelOp, Arith, Arith, Span),
    /// A keyword primitive that takes no value or a special one.
    Other(Other, Span),
}

impl Expr {
    /// The span of the whole node.
    ///
    /// ```
    /// use sluice_pcap::ast::{Expr, Span};
    /// assert_eq!(Expr::True(Span::new(0, 0)).span(), Span::new(0, 0));
    /// ```
    pub fn span(&self) -> Span {
        match self {
            Expr::True(s) | Expr::Not(_, s) | Expr::Proto(_, s) | Expr::Rel(.., s) => *s,
            Expr::Other(_, s) => *s,
            Expr::Prim(p) => p.span,
            Expr::And(v) | Expr::Or(v) => match (v.first(), v.last()) {
                (Some(a), Some(b)) => a.span().to(b.span()),
                _ => Span::default(),
            },
        }
    }

    /// The leaves under `and`, `or` and `not` (primitives, protocols,
    /// relations, keywords, `true`), in the order of the text.
    ///
    /// ```
    /// use sluice_pcap::{ast::Expr, parser::parse};
    /// let e = parse("tcp and not (vlan or udp)").unwrap();
    /// assert_eq!(e.leaves().len(), 3);
    /// assert!(matches!(e.leaves()[1], Expr::Other(..)));
    /// ```
    pub fn leaves(&self) -> Vec<&Expr> {
        fn walk<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
            match e {
                Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| walk(x, out)),
                Expr::Not(x, _) => walk(x, out),
                leaf => out.push(leaf),
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// Whether the expression has a `vlan` keyword: its program reads a
    /// VLAN tag in the frame, where libpcap's kernel filter would read the
    /// tag the kernel took off from the packet's metadata.
    ///
    /// ```
    /// use sluice_pcap::parser::parse;
    /// assert!(parse("tcp or (vlan 10 and udp)").unwrap().uses_vlan());
    /// assert!(!parse("ether proto 0x8100").unwrap().uses_vlan());
    /// ```
    pub fn uses_vlan(&self) -> bool {
        self.leaves()
            .iter()
            .any(|l| matches!(l, Expr::Other(Other::Vlan(_), _)))
    }
}

/// A primitive with its (inherited) qualifiers and value.
///
/// ```
/// use sluice_pcap::ast::*;
/// let p = Prim {
///     qual: Qual { proto: Some(Proto::Tcp), dir: Some(Dir::Src), kind: Some(Kind::Port) },
///     value: Value::Num(80),
///     span: Span::new(0, 12),
///     value_span: Span::new(10, 12),
/// };
/// assert_eq!(p.qual.kind, Some(Kind::Port));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Prim {
    /// The qualifiers; `None` where the expression left one out.
    pub qual: Qual,
    /// What follows the qualifiers.
    pub value: Value,
    /// The whole primitive (for inherited qualifiers, just the value).
    pub span: Span,
    /// The value alone.
    pub value_span: Span,
}

/// The three qualifiers of a primitive; `None` means "default".
///
/// ```
/// let q = sluice_pcap::ast::Qual::default();
/// assert!(q.proto.is_none() && q.dir.is_none() && q.kind.is_none());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Qual {
    /// Protocol qualifier (`ether`, `ip`, `tcp`, ...).
    pub proto: Option<Proto>,
    /// Direction qualifier (`src`, `dst`, `src or dst`, ...).
    pub dir: Option<Dir>,
    /// Type qualifier (`host`, `net`, `port`, ...).
    pub kind: Option<Kind>,
}

/// Protocol names, as qualifiers or on their own.
///
/// `ether`, `fddi`, `tr`, `wlan`, `ppp` and `slip` are all [`Proto::Link`].
///
/// ```
/// assert_ne!(sluice_pcap::ast::Proto::Ip, sluice_pcap::ast::Proto::Ip6);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Proto {
    Link,
    Ip,
    Arp,
    Rarp,
    Sctp,
    Tcp,
    Udp,
    Icmp,
    Igmp,
    Igrp,
    Pim,
    Vrrp,
    Carp,
    Atalk,
    Aarp,
    Decnet,
    Lat,
    Sca,
    Moprc,
    Mopdl,
    Ip6,
    Icmp6,
    Ah,
    Esp,
    Iso,
    Esis,
    Isis,
    L1,
    L2,
    Iih,
    Lsp,
    Snp,
    Psnp,
    Csnp,
    Clnp,
    Stp,
    Ipx,
    Netbeui,
    Radio,
}

/// Direction qualifiers.
///
/// ```
/// assert_ne!(sluice_pcap::ast::Dir::Src, sluice_pcap::ast::Dir::Dst);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    Src,
    Dst,
    /// `src or dst` / `dst or src`.
    SrcOrDst,
    /// `src and dst` / `dst and src`.
    SrcAndDst,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
}

/// Type qualifiers.
///
/// ```
/// assert_ne!(sluice_pcap::ast::Kind::Host, sluice_pcap::ast::Kind::Net);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Host,
    Net,
    Port,
    PortRange,
    Gateway,
    /// `proto` as in `ip proto 6`.
    Proto,
    /// `protochain`.
    ProtoChain,
}

/// The value of a primitive, as written.
///
/// ```
/// use sluice_pcap::ast::Value;
/// let v = Value::Dotted { text: "10.1".into(), addr: 0x0a01, bits: 16 };
/// assert!(matches!(v, Value::Dotted { bits: 16, .. }));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number: decimal, `0x` hex or `0` octal, or a named constant.
    Num(u32),
    /// A name: host, service, protocol, or `a-b` port range of names/numbers
    /// (a leading backslash, as in `\tcp`, is already removed).
    Name(String),
    /// A dotted number of one to four parts, e.g. `10.1` or `1.2.3.4`: an
    /// IPv4 address or net, or a DECnet address. `addr` holds the parts
    /// packed big-endian into the low `bits` bits (`10.1` → `0x0a01`, 16).
    Dotted {
        /// The text as written.
        text: String,
        /// The packed parts.
        addr: u32,
        /// 8 × the number of parts.
        bits: u32,
    },
    /// `addr/len` for IPv4 (addr is [`Value::Dotted`] or [`Value::Num`]).
    Cidr(Box<Value>, u32),
    /// `addr mask mask` for IPv4.
    Masked(Box<Value>, Box<Value>),
    /// An IPv6 address, with an optional `/len`.
    Ipv6([u8; 16], Option<u32>),
    /// A MAC address (any of libpcap's spellings).
    Mac([u8; 6]),
    /// An ARCnet address `$xx`.
    Arcnet(u8),
}

/// Comparison operators of relations.
///
/// ```
/// assert_ne!(sluice_pcap::ast::RelOp::Eq, sluice_pcap::ast::RelOp::Ne);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Binary arithmetic operators.
///
/// ```
/// assert_ne!(sluice_pcap::ast::ArithOp::Add, sluice_pcap::ast::ArithOp::Sub);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// An arithmetic expression (unsigned 32-bit).
///
/// ```
/// use sluice_pcap::ast::*;
/// let a = Arith::Load { proto: Proto::Ip, index: Box::new(Arith::Num(0, Span::default())), size: 1, span: Span::default() };
/// assert!(matches!(a, Arith::Load { size: 1, .. }));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Arith {
    /// A constant (named constants such as `tcp-syn` are already numbers).
    Num(u32, Span),
    /// `len` / `length`: the packet's length on the wire.
    Len(Span),
    /// `proto[index]` or `proto[index:size]`; size is 1, 2 or 4.
    Load {
        /// The protocol whose header the index is relative to.
        proto: Proto,
        /// The byte offset into that header.
        index: Box<Arith>,
        /// Bytes to load: 1, 2 or 4.
        size: u32,
        /// The whole `proto[...]`.
        span: Span,
    },
    /// `lhs op rhs`.
    Bin(ArithOp, Box<Arith>, Box<Arith>, Span),
    /// `-x`.
    Neg(Box<Arith>, Span),
}

impl Arith {
    /// The span of the whole node.
    ///
    /// ```
    /// use sluice_pcap::ast::*;
    /// assert_eq!(Arith::Len(Span::new(0, 3)).span(), Span::new(0, 3));
    /// ```
    pub fn span(&self) -> Span {
        match self {
            Arith::Num(_, s) | Arith::Len(s) | Arith::Neg(_, s) => *s,
            Arith::Load { span, .. } => *span,
            Arith::Bin(.., s) => *s,
        }
    }
}

/// The operator of `byte N op M`.
///
/// ```
/// assert_ne!(sluice_pcap::ast::ByteOp::And, sluice_pcap::ast::ByteOp::Or);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOp {
    Eq,
    Lt,
    Gt,
    And,
    Or,
}

/// 802.11 frame type/subtype/direction primitives.
///
/// Numbers are already resolved from names (`type mgt subtype beacon`).
///
/// ```
/// let w = sluice_pcap::ast::Wlan::Type(0);
/// assert!(matches!(w, sluice_pcap::ast::Wlan::Type(0)));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wlan {
    /// `type T`: the type field value (already shifted into place, as in the
    /// frame-control byte: mgt 0x00, ctl 0x04, data 0x08).
    Type(u32),
    /// `type T subtype S` or `subtype S` naming a type/subtype pair: both
    /// fields as they sit in the frame-control byte.
    TypeSubtype(u32),
    /// `subtype S` where only the subtype bits are tested (already shifted).
    Subtype(u32),
    /// `dir D`: the direction bits (nods 0, tods 1, fromds 2, dstods 3).
    Dir(u32),
}

/// LLC sub-primitives.
///
/// ```
/// assert_ne!(sluice_pcap::ast::Llc::I, sluice_pcap::ast::Llc::S);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Llc {
    /// `llc i`: information frames.
    I,
    /// `llc s`: supervisory frames.
    S,
    /// `llc u`: unnumbered frames.
    U,
    /// A supervisory subtype (`rr`, `rnr`, `rej`): the control byte value.
    SSub(u32),
    /// An unnumbered subtype (`ui`, `ua`, `disc`, `dm`, `sabme`, `test`, `xid`, `frmr`): the control byte value.
    USub(u32),
}

/// ATM primitives (SunATM link type).
///
/// ```
/// assert_ne!(sluice_pcap::ast::Atm::Lane, sluice_pcap::ast::Atm::Metac);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atm {
    Lane,
    Metac,
    Bcc,
    Oamf4ec,
    Oamf4sc,
    Sc,
    Ilmic,
    Oam,
    Oamf4,
    Connectmsg,
    Metaconnect,
}

/// ATM header fields (`vpi`, `vci`).
///
/// ```
/// assert_ne!(sluice_pcap::ast::AtmField::Vpi, sluice_pcap::ast::AtmField::Vci);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtmField {
    Vpi,
    Vci,
}

/// MTP2 message types; `h` variants are for high-speed links (extended headers).
///
/// ```
/// assert_ne!(sluice_pcap::ast::Mtp2Type::Fisu, sluice_pcap::ast::Mtp2Type::Msu);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mtp2Type {
    Fisu,
    Lssu,
    Msu,
    Hfisu,
    Hlssu,
    Hmsu,
}

/// MTP3 fields; `H` variants are for high-speed links.
///
/// ```
/// assert_ne!(sluice_pcap::ast::Mtp3Field::Sio, sluice_pcap::ast::Mtp3Field::Opc);
/// ```
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mtp3Field {
    Sio,
    Opc,
    Dpc,
    Sls,
    Hsio,
    Hopc,
    Hdpc,
    Hsls,
}

/// Keyword primitives that do not fit `[proto] [dir] [kind] value`.
///
/// ```
/// let o = sluice_pcap::ast::Other::Less(100);
/// assert!(matches!(o, sluice_pcap::ast::Other::Less(100)));
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum Other {
    /// `[proto] broadcast`.
    Broadcast(Option<Proto>),
    /// `[proto] multicast`.
    Multicast(Option<Proto>),
    /// `less N`: length <= N.
    Less(u32),
    /// `greater N`: length >= N.
    Greater(u32),
    /// `byte N op M`.
    Byte(u32, ByteOp, u32),
    /// `inbound`.
    Inbound,
    /// `outbound`.
    Outbound,
    /// `ifindex N`.
    Ifindex(u32),
    /// `vlan [N]`.
    Vlan(Option<u32>),
    /// `mpls [N]`.
    Mpls(Option<u32>),
    /// `pppoed`.
    Pppoed,
    /// `pppoes [N]`.
    Pppoes(Option<u32>),
    /// `geneve [N]`.
    Geneve(Option<u32>),
    /// `vxlan [N]`.
    Vxlan(Option<u32>),
    /// `ifname NAME` / `on NAME` (pflog).
    PfIfname(String),
    /// `rset NAME` / `ruleset NAME` (pflog).
    PfRuleset(String),
    /// `rnr N` / `rulenum N` (pflog).
    PfRulenum(u32),
    /// `srnr N` / `subrulenum N` (pflog).
    PfSubrulenum(u32),
    /// `reason R` (pflog): the reason code.
    PfReason(u32),
    /// `action A` (pflog): the action code.
    PfAction(u32),
    /// `[proto] type ...`, `subtype ...`, `dir ...` (802.11).
    Wlan(Option<Proto>, Wlan),
    /// `llc [sub]`.
    Llc(Option<Llc>),
    /// An ATM keyword primitive.
    Atm(Atm),
    /// `vpi`/`vci` compared with numbers: `vpi 1`, `vci > 5`, `vpi (1 or 2)`:
    /// an or-list of (operator, value) tests.
    AtmField(AtmField, Vec<(RelOp, u32)>),
    /// An MTP2 message type.
    Mtp2(Mtp2Type),
    /// An MTP3 field compared with numbers, like [`Other::AtmField`].
    Mtp3Field(Mtp3Field, Vec<(RelOp, u32)>),
}
