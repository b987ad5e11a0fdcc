//! The scanner of the pcap filter language, with libpcap's token rules.
//!
//! Like libpcap's flex scanner, the lexer takes the longest match at each
//! position; on a tie the earlier rule wins, in this order: keywords and
//! operators, ARCnet addresses (`$ab`), MAC addresses, numbers, dotted
//! numbers, IPv6 addresses, malformed MAC addresses, named constants
//! (`tcp-syn`), names. So `1a` and `ftp-data` are names, `0x1a` is a
//! number, `10.1` is a dotted number, `1.2.3.4.5` is a name and
//! `abcdef000003` is a MAC address. Keywords are case-sensitive (`TCP` is a
//! name). A backslash turns anything up to a blank, `!`, `(` or `)` into a
//! name (`\tcp`).
//!
//! Crate-internal: only this crate's stages use it (front ends go through
//! `sluice-filter`); the examples are the `examples` unit tests below.

use crate::ast::{Proto, Span};
use crate::error::CompileError;
use std::net::Ipv6Addr;

/// Keywords other than protocol names and `and`/`or`/`not`.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kw {
    Src,
    Dst,
    Host,
    Net,
    Mask,
    Port,
    PortRange,
    Proto,
    ProtoChain,
    Gateway,
    Type,
    Subtype,
    Dir,
    Addr1,
    Addr2,
    Addr3,
    Addr4,
    Ra,
    Ta,
    Less,
    Greater,
    Byte,
    Broadcast,
    Multicast,
    Len,
    Inbound,
    Outbound,
    Ifindex,
    Vlan,
    Mpls,
    Pppoed,
    Pppoes,
    Geneve,
    Vxlan,
    Lane,
    Llc,
    Metac,
    Bcc,
    Oam,
    Oamf4,
    Oamf4ec,
    Oamf4sc,
    Sc,
    Ilmic,
    Vpi,
    Vci,
    Connectmsg,
    Metaconnect,
    /// `on` / `ifname`.
    Ifname,
    /// `rset` / `ruleset`.
    Rset,
    /// `rnr` / `rulenum`.
    Rnr,
    /// `srnr` / `subrulenum`.
    Srnr,
    Reason,
    Action,
    Fisu,
    /// `lssu` / `lsu`.
    Lssu,
    Msu,
    Hfisu,
    Hlssu,
    Hmsu,
    Sio,
    Opc,
    Dpc,
    Sls,
    Hsio,
    Hopc,
    Hdpc,
    Hsls,
}

/// A token.
#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    /// A protocol name (`ether`, `ip`, `tcp`, ...).
    Proto(Proto),
    /// Any other keyword.
    Kw(Kw),
    /// A number or a named constant such as `tcp-syn`.
    Num(u32),
    /// A dotted number of 2 to 4 parts (`10.1`, `1.2.3.4`), as written.
    Dotted(String),
    /// An IPv6 address, as written and parsed.
    Ipv6(String, [u8; 16]),
    /// A MAC address, as written and parsed.
    Mac(String, [u8; 6]),
    /// An ARCnet address `$ab`.
    Arcnet(u8),
    /// A name (host, service, ...); a leading backslash is removed.
    Id(String),
    /// `!` or `not`.
    Not,
    /// `&&` or `and`.
    And,
    /// `||` or `or`.
    Or,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `:`
    Colon,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `*`
    Star,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// `&`
    Amp,
    /// `|`
    Pipe,
    /// `^`
    Caret,
    /// `<<`
    Shl,
    /// `>>`
    Shr,
    /// `=` or `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// End of the expression.
    Eof,
}

impl Tok {
    /// A short description for error messages.
    pub fn describe(&self) -> String {
        match self {
            Tok::Eof => "end of expression".into(),
            Tok::Num(n) => format!("number {n}"),
            Tok::Id(s) => format!("name '{s}'"),
            Tok::Dotted(s) | Tok::Ipv6(s, _) | Tok::Mac(s, _) => format!("address '{s}'"),
            Tok::Arcnet(a) => format!("ARCnet address '${a:x}'"),
            Tok::Proto(p) => format!("'{}'", proto_name(*p)),
            Tok::Kw(k) => format!("'{}'", kw_name(*k)),
            other => format!("'{}'", op_text(other)),
        }
    }
}

fn op_text(t: &Tok) -> &'static str {
    match t {
        Tok::Not => "not",
        Tok::And => "and",
        Tok::Or => "or",
        Tok::LParen => "(",
        Tok::RParen => ")",
        Tok::LBracket => "[",
        Tok::RBracket => "]",
        Tok::Colon => ":",
        Tok::Plus => "+",
        Tok::Minus => "-",
        Tok::Star => "*",
        Tok::Slash => "/",
        Tok::Percent => "%",
        Tok::Amp => "&",
        Tok::Pipe => "|",
        Tok::Caret => "^",
        Tok::Shl => "<<",
        Tok::Shr => ">>",
        Tok::Eq => "=",
        Tok::Ne => "!=",
        Tok::Lt => "<",
        Tok::Le => "<=",
        Tok::Gt => ">",
        Tok::Ge => ">=",
        _ => "?",
    }
}

/// A token with its byte span.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Where it is.
    pub span: Span,
}

/// The words of the language: keywords, protocol names and the boolean
/// operators.
const WORDS: &[(&str, Tok)] = &[
    ("dst", Tok::Kw(Kw::Dst)),
    ("src", Tok::Kw(Kw::Src)),
    ("link", Tok::Proto(Proto::Link)),
    ("ether", Tok::Proto(Proto::Link)),
    ("ppp", Tok::Proto(Proto::Link)),
    ("slip", Tok::Proto(Proto::Link)),
    ("fddi", Tok::Proto(Proto::Link)),
    ("tr", Tok::Proto(Proto::Link)),
    ("wlan", Tok::Proto(Proto::Link)),
    ("arp", Tok::Proto(Proto::Arp)),
    ("rarp", Tok::Proto(Proto::Rarp)),
    ("ip", Tok::Proto(Proto::Ip)),
    ("sctp", Tok::Proto(Proto::Sctp)),
    ("tcp", Tok::Proto(Proto::Tcp)),
    ("udp", Tok::Proto(Proto::Udp)),
    ("icmp", Tok::Proto(Proto::Icmp)),
    ("igmp", Tok::Proto(Proto::Igmp)),
    ("igrp", Tok::Proto(Proto::Igrp)),
    ("pim", Tok::Proto(Proto::Pim)),
    ("vrrp", Tok::Proto(Proto::Vrrp)),
    ("carp", Tok::Proto(Proto::Carp)),
    ("radio", Tok::Proto(Proto::Radio)),
    ("ip6", Tok::Proto(Proto::Ip6)),
    ("icmp6", Tok::Proto(Proto::Icmp6)),
    ("ah", Tok::Proto(Proto::Ah)),
    ("esp", Tok::Proto(Proto::Esp)),
    ("atalk", Tok::Proto(Proto::Atalk)),
    ("aarp", Tok::Proto(Proto::Aarp)),
    ("decnet", Tok::Proto(Proto::Decnet)),
    ("lat", Tok::Proto(Proto::Lat)),
    ("sca", Tok::Proto(Proto::Sca)),
    ("moprc", Tok::Proto(Proto::Moprc)),
    ("mopdl", Tok::Proto(Proto::Mopdl)),
    ("iso", Tok::Proto(Proto::Iso)),
    ("esis", Tok::Proto(Proto::Esis)),
    ("es-is", Tok::Proto(Proto::Esis)),
    ("isis", Tok::Proto(Proto::Isis)),
    ("is-is", Tok::Proto(Proto::Isis)),
    ("l1", Tok::Proto(Proto::L1)),
    ("l2", Tok::Proto(Proto::L2)),
    ("iih", Tok::Proto(Proto::Iih)),
    ("lsp", Tok::Proto(Proto::Lsp)),
    ("snp", Tok::Proto(Proto::Snp)),
    ("csnp", Tok::Proto(Proto::Csnp)),
    ("psnp", Tok::Proto(Proto::Psnp)),
    ("clnp", Tok::Proto(Proto::Clnp)),
    ("stp", Tok::Proto(Proto::Stp)),
    ("ipx", Tok::Proto(Proto::Ipx)),
    ("netbeui", Tok::Proto(Proto::Netbeui)),
    ("host", Tok::Kw(Kw::Host)),
    ("net", Tok::Kw(Kw::Net)),
    ("mask", Tok::Kw(Kw::Mask)),
    ("port", Tok::Kw(Kw::Port)),
    ("portrange", Tok::Kw(Kw::PortRange)),
    ("proto", Tok::Kw(Kw::Proto)),
    ("protochain", Tok::Kw(Kw::ProtoChain)),
    ("gateway", Tok::Kw(Kw::Gateway)),
    ("type", Tok::Kw(Kw::Type)),
    ("subtype", Tok::Kw(Kw::Subtype)),
    ("dir", Tok::Kw(Kw::Dir)),
    ("direction", Tok::Kw(Kw::Dir)),
    ("addr1", Tok::Kw(Kw::Addr1)),
    ("address1", Tok::Kw(Kw::Addr1)),
    ("addr2", Tok::Kw(Kw::Addr2)),
    ("address2", Tok::Kw(Kw::Addr2)),
    ("addr3", Tok::Kw(Kw::Addr3)),
    ("address3", Tok::Kw(Kw::Addr3)),
    ("addr4", Tok::Kw(Kw::Addr4)),
    ("address4", Tok::Kw(Kw::Addr4)),
    ("ra", Tok::Kw(Kw::Ra)),
    ("ta", Tok::Kw(Kw::Ta)),
    ("less", Tok::Kw(Kw::Less)),
    ("greater", Tok::Kw(Kw::Greater)),
    ("byte", Tok::Kw(Kw::Byte)),
    ("broadcast", Tok::Kw(Kw::Broadcast)),
    ("multicast", Tok::Kw(Kw::Multicast)),
    ("and", Tok::And),
    ("or", Tok::Or),
    ("not", Tok::Not),
    ("len", Tok::Kw(Kw::Len)),
    ("length", Tok::Kw(Kw::Len)),
    ("inbound", Tok::Kw(Kw::Inbound)),
    ("outbound", Tok::Kw(Kw::Outbound)),
    ("ifindex", Tok::Kw(Kw::Ifindex)),
    ("vlan", Tok::Kw(Kw::Vlan)),
    ("mpls", Tok::Kw(Kw::Mpls)),
    ("pppoed", Tok::Kw(Kw::Pppoed)),
    ("pppoes", Tok::Kw(Kw::Pppoes)),
    ("geneve", Tok::Kw(Kw::Geneve)),
    ("vxlan", Tok::Kw(Kw::Vxlan)),
    ("lane", Tok::Kw(Kw::Lane)),
    ("llc", Tok::Kw(Kw::Llc)),
    ("metac", Tok::Kw(Kw::Metac)),
    ("bcc", Tok::Kw(Kw::Bcc)),
    ("oam", Tok::Kw(Kw::Oam)),
    ("oamf4", Tok::Kw(Kw::Oamf4)),
    ("oamf4ec", Tok::Kw(Kw::Oamf4ec)),
    ("oamf4sc", Tok::Kw(Kw::Oamf4sc)),
    ("sc", Tok::Kw(Kw::Sc)),
    ("ilmic", Tok::Kw(Kw::Ilmic)),
    ("vpi", Tok::Kw(Kw::Vpi)),
    ("vci", Tok::Kw(Kw::Vci)),
    ("connectmsg", Tok::Kw(Kw::Connectmsg)),
    ("metaconnect", Tok::Kw(Kw::Metaconnect)),
    ("on", Tok::Kw(Kw::Ifname)),
    ("ifname", Tok::Kw(Kw::Ifname)),
    ("rset", Tok::Kw(Kw::Rset)),
    ("ruleset", Tok::Kw(Kw::Rset)),
    ("rnr", Tok::Kw(Kw::Rnr)),
    ("rulenum", Tok::Kw(Kw::Rnr)),
    ("srnr", Tok::Kw(Kw::Srnr)),
    ("subrulenum", Tok::Kw(Kw::Srnr)),
    ("reason", Tok::Kw(Kw::Reason)),
    ("action", Tok::Kw(Kw::Action)),
    ("fisu", Tok::Kw(Kw::Fisu)),
    ("lssu", Tok::Kw(Kw::Lssu)),
    ("lsu", Tok::Kw(Kw::Lssu)),
    ("msu", Tok::Kw(Kw::Msu)),
    ("hfisu", Tok::Kw(Kw::Hfisu)),
    ("hlssu", Tok::Kw(Kw::Hlssu)),
    ("hmsu", Tok::Kw(Kw::Hmsu)),
    ("sio", Tok::Kw(Kw::Sio)),
    ("opc", Tok::Kw(Kw::Opc)),
    ("dpc", Tok::Kw(Kw::Dpc)),
    ("sls", Tok::Kw(Kw::Sls)),
    ("hsio", Tok::Kw(Kw::Hsio)),
    ("hopc", Tok::Kw(Kw::Hopc)),
    ("hdpc", Tok::Kw(Kw::Hdpc)),
    ("hsls", Tok::Kw(Kw::Hsls)),
];

/// Names the scanner turns into numbers.
const CONSTANTS: &[(&str, u32)] = &[
    ("icmptype", 0),
    ("icmpcode", 1),
    ("icmp-echoreply", 0),
    ("icmp-unreach", 3),
    ("icmp-sourcequench", 4),
    ("icmp-redirect", 5),
    ("icmp-echo", 8),
    ("icmp-routeradvert", 9),
    ("icmp-routersolicit", 10),
    ("icmp-timxceed", 11),
    ("icmp-paramprob", 12),
    ("icmp-tstamp", 13),
    ("icmp-tstampreply", 14),
    ("icmp-ireq", 15),
    ("icmp-ireqreply", 16),
    ("icmp-maskreq", 17),
    ("icmp-maskreply", 18),
    ("icmp6type", 0),
    ("icmp6code", 1),
    ("icmp6-destinationunreach", 1),
    ("icmp6-packettoobig", 2),
    ("icmp6-timeexceeded", 3),
    ("icmp6-parameterproblem", 4),
    ("icmp6-echo", 128),
    ("icmp6-echoreply", 129),
    ("icmp6-multicastlistenerquery", 130),
    ("icmp6-multicastlistenerreportv1", 131),
    ("icmp6-multicastlistenerdone", 132),
    ("icmp6-routersolicit", 133),
    ("icmp6-routeradvert", 134),
    ("icmp6-neighborsolicit", 135),
    ("icmp6-neighboradvert", 136),
    ("icmp6-redirect", 137),
    ("icmp6-routerrenum", 138),
    ("icmp6-nodeinformationquery", 139),
    ("icmp6-nodeinformationresponse", 140),
    ("icmp6-ineighbordiscoverysolicit", 141),
    ("icmp6-ineighbordiscoveryadvert", 142),
    ("icmp6-multicastlistenerreportv2", 143),
    ("icmp6-homeagentdiscoveryrequest", 144),
    ("icmp6-homeagentdiscoveryreply", 145),
    ("icmp6-mobileprefixsolicit", 146),
    ("icmp6-mobileprefixadvert", 147),
    ("icmp6-certpathsolicit", 148),
    ("icmp6-certpathadvert", 149),
    ("icmp6-multicastrouteradvert", 151),
    ("icmp6-multicastroutersolicit", 152),
    ("icmp6-multicastrouterterm", 153),
    ("tcpflags", 13),
    ("tcp-fin", 0x01),
    ("tcp-syn", 0x02),
    ("tcp-rst", 0x04),
    ("tcp-push", 0x08),
    ("tcp-ack", 0x10),
    ("tcp-urg", 0x20),
    ("tcp-ece", 0x40),
    ("tcp-cwr", 0x80),
];

/// The value of a named constant such as `tcp-syn` or `icmp-echo`.
pub fn named_constant(name: &str) -> Option<u32> {
    CONSTANTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// The keyword or protocol token a word stands for, if any.
pub fn keyword(word: &str) -> Option<Tok> {
    WORDS
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, t)| t.clone())
}

/// The canonical spelling of a protocol name.
pub fn proto_name(p: Proto) -> &'static str {
    WORDS
        .iter()
        .find(|(_, t)| *t == Tok::Proto(p))
        .map(|(w, _)| *w)
        .unwrap_or("?")
}

/// The canonical spelling of a keyword.
pub fn kw_name(k: Kw) -> &'static str {
    WORDS
        .iter()
        .find(|(_, t)| *t == Tok::Kw(k))
        .map(|(w, _)| *w)
        .unwrap_or("?")
}

fn is_hex(b: u8) -> bool {
    b.is_ascii_hexdigit()
}

fn hex_run(s: &[u8], i: usize, max: usize) -> usize {
    let mut n = 0;
    while n < max && i + n < s.len() && is_hex(s[i + n]) {
        n += 1;
    }
    n
}

/// Length of `[A-Za-z0-9]([-_.A-Za-z0-9]*[.A-Za-z0-9])?` at `i`.
fn match_id(s: &[u8], i: usize) -> usize {
    if i >= s.len() || !s[i].is_ascii_alphanumeric() {
        return 0;
    }
    let mut j = i + 1;
    while j < s.len() && (s[j].is_ascii_alphanumeric() || matches!(s[j], b'-' | b'_' | b'.')) {
        j += 1;
    }
    while j > i + 1 && matches!(s[j - 1], b'-' | b'_') {
        j -= 1;
    }
    j - i
}

/// Length of `[0-9]+|0[xX][0-9A-Fa-f]+` at `i`.
fn match_n(s: &[u8], i: usize) -> usize {
    if i >= s.len() || !s[i].is_ascii_digit() {
        return 0;
    }
    if s[i] == b'0' && i + 1 < s.len() && matches!(s[i + 1], b'x' | b'X') {
        let h = hex_run(s, i + 2, usize::MAX);
        if h > 0 {
            return 2 + h;
        }
    }
    let mut j = i;
    while j < s.len() && s[j].is_ascii_digit() {
        j += 1;
    }
    j - i
}

/// Length of `N.N`, `N.N.N` or `N.N.N.N` at `i` (longest).
fn match_hid(s: &[u8], i: usize, max_parts: usize) -> (usize, usize) {
    let mut best = (0, 0);
    let mut j = i;
    let mut parts = 0;
    loop {
        let n = match_n(s, j);
        if n == 0 {
            break;
        }
        j += n;
        parts += 1;
        if parts >= 2 {
            best = (j - i, parts);
        }
        if parts == max_parts || j >= s.len() || s[j] != b'.' {
            break;
        }
        j += 1;
    }
    best
}

/// Length of a MAC address in one of libpcap's spellings at `i`.
fn match_mac(s: &[u8], i: usize) -> usize {
    let mut best = 0;
    // B sep B sep B sep B sep B sep B, with sep one of ':', '-', '.'.
    for sep in [b':', b'-', b'.'] {
        let mut j = i;
        let mut ok = true;
        for k in 0..6 {
            let h = hex_run(s, j, 2);
            if h == 0 {
                ok = false;
                break;
            }
            j += h;
            if k < 5 {
                if j < s.len() && s[j] == sep {
                    j += 1;
                } else {
                    ok = false;
                    break;
                }
            }
        }
        if ok {
            best = best.max(j - i);
        }
    }
    // B2.B2.B2
    if hex_run(s, i, 4) == 4
        && s.get(i + 4) == Some(&b'.')
        && hex_run(s, i + 5, 4) == 4
        && s.get(i + 9) == Some(&b'.')
        && hex_run(s, i + 10, 4) == 4
    {
        best = best.max(14);
    }
    // B2B2B2
    if hex_run(s, i, 12) == 12 {
        best = best.max(12);
    }
    best
}

/// Length of `{B}:+({B}:+)+` at `i`: a malformed MAC address.
fn match_bogus_mac(s: &[u8], i: usize) -> usize {
    let mut j = i;
    let mut units = 0;
    let mut best = 0;
    loop {
        let h = hex_run(s, j, 2);
        if h == 0 {
            break;
        }
        let mut k = j + h;
        let colons_start = k;
        while k < s.len() && s[k] == b':' {
            k += 1;
        }
        if k == colons_start {
            break;
        }
        units += 1;
        j = k;
        if units >= 2 {
            best = j - i;
        }
    }
    best
}

/// Length of an IPv6 address at `i`, following libpcap's patterns: eight
/// groups, or fewer with one `::`, the last two possibly written as a
/// dotted quad.
fn match_v6(s: &[u8], i: usize) -> usize {
    let mut best = 0;
    let mut pos = i;
    let mut groups = 0usize;
    let mut dc = false;
    if s[i..].starts_with(b"::") {
        dc = true;
        pos += 2;
        best = 2;
    }
    loop {
        let v4_ok = (dc && groups <= 5) || (!dc && groups == 6);
        if v4_ok {
            let (len, parts) = match_hid(s, pos, 4);
            if parts == 4 {
                best = best.max(pos + len - i);
            }
        }
        let w = hex_run(s, pos, 4);
        if w == 0 {
            break;
        }
        pos += w;
        groups += 1;
        if (!dc && groups > 8) || (dc && groups > 7) {
            break;
        }
        if dc || groups == 8 {
            best = best.max(pos - i);
        }
        if s[pos..].starts_with(b"::") {
            if dc {
                break;
            }
            dc = true;
            pos += 2;
            if groups <= 7 {
                best = best.max(pos - i);
            }
        } else if pos < s.len() && s[pos] == b':' {
            pos += 1;
        } else {
            break;
        }
    }
    best
}

/// Parses a number token (`N`): decimal, `0x` hex, or octal with a
/// leading zero; refuses values above 32 bits and bad octal digits.
fn parse_number(text: &str, span: Span) -> Result<u32, CompileError> {
    let (digits, radix, kind) =
        if let Some(h) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
            (h, 16, "hexadecimal")
        } else if text.len() > 1 && text.starts_with('0') {
            if text.bytes().any(|b| b == b'8' || b == b'9') {
                return Err(CompileError::new(
                    format!("number {text} contains non-octal digit"),
                    span,
                ));
            }
            (&text[1..], 8, "octal")
        } else {
            (text, 10, "decimal")
        };
    let mut v: u32 = 0;
    for c in digits.chars() {
        let d = c.to_digit(radix).unwrap_or(0);
        v = v
            .checked_mul(radix)
            .and_then(|v| v.checked_add(d))
            .ok_or_else(|| {
                CompileError::new(format!("{kind} number {text} overflows 32 bits"), span)
            })?;
    }
    Ok(v)
}

/// The value of one part of a dotted number, as libpcap reads it (decimal,
/// or hex with `0x`); saturates instead of overflowing.
pub fn dotted_part(text: &str) -> u32 {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(h) => (h, 16),
        None => (text, 10),
    };
    digits.chars().fold(0u32, |v, c| {
        v.saturating_mul(radix)
            .saturating_add(c.to_digit(radix).unwrap_or(0))
    })
}

/// Packs a dotted number: each part in 8 bits, big-endian (parts above 255
/// keep only their low 8 bits; the text keeps the full values).
pub fn pack_dotted(text: &str) -> (u32, u32) {
    let mut addr: u32 = 0;
    let mut bits = 0;
    for part in text.split('.') {
        addr = (addr << 8) | (dotted_part(part) & 0xff);
        bits += 8;
    }
    (addr, bits)
}

fn parse_mac(text: &str) -> [u8; 6] {
    let mut out = [0u8; 6];
    let hex: Vec<&str> = text.split([':', '-', '.']).collect();
    let bytes: Vec<u8> = if hex.len() == 6 {
        hex.iter()
            .map(|h| u8::from_str_radix(h, 16).unwrap_or(0))
            .collect()
    } else {
        // B2.B2.B2 or 12 hex digits: pairs of hex digits.
        let digits: String = hex.concat();
        (0..6)
            .map(|k| {
                u8::from_str_radix(digits.get(2 * k..2 * k + 2).unwrap_or("0"), 16).unwrap_or(0)
            })
            .collect()
    };
    out.copy_from_slice(&bytes);
    out
}

/// Splits a filter expression into tokens, ending with [`Tok::Eof`].
pub fn tokenize(text: &str) -> Result<Vec<Token>, CompileError> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if matches!(c, b' ' | b'\r' | b'\n' | b'\t') {
            i += 1;
            continue;
        }
        let two = if i + 1 < s.len() {
            &s[i..i + 2]
        } else {
            &s[i..i + 1]
        };
        let op2 = match two {
            b">=" => Some(Tok::Ge),
            b"<=" => Some(Tok::Le),
            b"!=" => Some(Tok::Ne),
            b"==" => Some(Tok::Eq),
            b"<<" => Some(Tok::Shl),
            b">>" => Some(Tok::Shr),
            b"&&" => Some(Tok::And),
            b"||" => Some(Tok::Or),
            _ => None,
        };
        if let Some(t) = op2 {
            out.push(Token {
                tok: t,
                span: Span::new(i, i + 2),
            });
            i += 2;
            continue;
        }
        let v6 = if c == b':' || is_hex(c) {
            match_v6(s, i)
        } else {
            0
        };
        let op1 = match c {
            b'+' => Some(Tok::Plus),
            b'-' => Some(Tok::Minus),
            b'*' => Some(Tok::Star),
            b'/' => Some(Tok::Slash),
            b'%' => Some(Tok::Percent),
            b':' => Some(Tok::Colon),
            b'[' => Some(Tok::LBracket),
            b']' => Some(Tok::RBracket),
            b'!' => Some(Tok::Not),
            b'<' => Some(Tok::Lt),
            b'>' => Some(Tok::Gt),
            b'(' => Some(Tok::LParen),
            b')' => Some(Tok::RParen),
            b'&' => Some(Tok::Amp),
            b'|' => Some(Tok::Pipe),
            b'^' => Some(Tok::Caret),
            b'=' => Some(Tok::Eq),
            _ => None,
        };
        if let Some(t) = op1 {
            if v6 <= 1 {
                out.push(Token {
                    tok: t,
                    span: Span::new(i, i + 1),
                });
                i += 1;
                continue;
            }
        }
        if c == b'$' {
            let h = hex_run(s, i + 1, 2);
            if h == 0 {
                return Err(CompileError::new(
                    "'$' must be followed by one or two hex digits (an ARCnet address)",
                    Span::new(i, i + 1),
                ));
            }
            let v = u8::from_str_radix(&text[i + 1..i + 1 + h], 16).unwrap_or(0);
            out.push(Token {
                tok: Tok::Arcnet(v),
                span: Span::new(i, i + 1 + h),
            });
            i += 1 + h;
            continue;
        }
        if c == b'\\' {
            let mut j = i + 1;
            while j < s.len() && !matches!(s[j], b' ' | b'!' | b'(' | b')' | b'\n' | b'\t') {
                j += 1;
            }
            if j == i + 1 {
                return Err(CompileError::new(
                    "'\\' must be followed by a name",
                    Span::new(i, i + 1),
                ));
            }
            out.push(Token {
                tok: Tok::Id(text[i + 1..j].to_string()),
                span: Span::new(i, j),
            });
            i = j;
            continue;
        }
        if !(c.is_ascii_alphanumeric() || c == b':') {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(CompileError::new(
                format!("unexpected character '{}'", ch.escape_default()),
                Span::new(i, i + ch.len_utf8()),
            ));
        }
        // Candidates in rule order; the longest wins, the first on a tie.
        let (hid_len, _) = match_hid(s, i, 4);
        let cands = [
            (match_mac(s, i), 1u8),
            (match_n(s, i), 2),
            (hid_len, 3),
            (v6, 4),
            (match_bogus_mac(s, i), 5),
            (match_id(s, i), 6),
        ];
        let mut best = (0usize, 0u8);
        for (len, kind) in cands {
            if len > best.0 {
                best = (len, kind);
            }
        }
        let (len, kind) = best;
        let span = Span::new(i, i + len);
        let word = &text[i..i + len];
        let tok = match kind {
            1 => Tok::Mac(word.to_string(), parse_mac(word)),
            2 => Tok::Num(parse_number(word, span)?),
            3 => Tok::Dotted(word.to_string()),
            4 => match word.parse::<Ipv6Addr>() {
                Ok(a) => Tok::Ipv6(word.to_string(), a.octets()),
                Err(_) => {
                    return Err(CompileError::new(
                        format!("invalid IPv6 address '{word}'"),
                        span,
                    ))
                }
            },
            5 => {
                return Err(CompileError::new(
                    format!("invalid Ethernet address '{word}'"),
                    span,
                ))
            }
            _ => {
                if let Some(t) = keyword(word) {
                    t
                } else if let Some(v) = named_constant(word) {
                    Tok::Num(v)
                } else {
                    Tok::Id(word.to_string())
                }
            }
        };
        out.push(Token { tok, span });
        i += len;
    }
    out.push(Token {
        tok: Tok::Eof,
        span: Span::new(s.len(), s.len()),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s)
            .unwrap()
            .into_iter()
            .map(|t| t.tok)
            .filter(|t| *t != Tok::Eof)
            .collect()
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(toks("1a"), vec![Tok::Id("1a".into())]);
        assert_eq!(toks("0x1a"), vec![Tok::Num(26)]);
        assert_eq!(toks("010"), vec![Tok::Num(8)]);
        assert_eq!(toks("ftp-data"), vec![Tok::Id("ftp-data".into())]);
        assert_eq!(toks("hosts"), vec![Tok::Id("hosts".into())]);
        assert_eq!(toks("TCP"), vec![Tok::Id("TCP".into())]);
        assert_eq!(toks("\\tcp"), vec![Tok::Id("tcp".into())]);
        assert_eq!(toks("tcp-syn"), vec![Tok::Num(2)]);
        assert_eq!(toks("icmp-echoreply"), vec![Tok::Num(0)]);
        assert_eq!(toks("a-"), vec![Tok::Id("a".into()), Tok::Minus]);
        assert_eq!(toks("1-2"), vec![Tok::Id("1-2".into())]);
        assert_eq!(toks("23-"), vec![Tok::Num(23), Tok::Minus]);
        assert_eq!(toks("host.invalid."), vec![Tok::Id("host.invalid.".into())]);
        assert_eq!(toks("es-is"), vec![Tok::Proto(Proto::Esis)]);
        assert_eq!(toks("0x"), vec![Tok::Id("0x".into())]);
        assert!(tokenize("08").is_err());
        assert!(tokenize("4294967296").is_err());
        assert!(tokenize("0x100000000").is_err());
        assert!(tokenize("0040000000000").is_err());
        // Twelve hex digits are a MAC address, even when all are decimal.
        assert!(matches!(toks("040000000000")[0], Tok::Mac(..)));
        assert_eq!(toks("4294967295"), vec![Tok::Num(u32::MAX)]);
        assert_eq!(toks("0037777777777"), vec![Tok::Num(u32::MAX)]);
    }

    #[test]
    fn dotted() {
        assert_eq!(toks("10.1"), vec![Tok::Dotted("10.1".into())]);
        assert_eq!(toks("63.1023"), vec![Tok::Dotted("63.1023".into())]);
        assert_eq!(toks("1.2.3.4.5"), vec![Tok::Id("1.2.3.4.5".into())]);
        assert_eq!(pack_dotted("63.1023").1, 16);
    }

    #[test]
    fn macs() {
        let m = [0xab, 0xcd, 0xef, 0, 0, 3];
        for s in [
            "ab:cd:ef:0:0:3",
            "ab.CD.ef.0.0.3",
            "ab-cd-ef-00-00-03",
            "abcd.ef00.0003",
            "abcdef000003",
        ] {
            assert_eq!(toks(s), vec![Tok::Mac(s.into(), m)], "{s}");
        }
        assert!(tokenize("ab:cd:ef:0g:00:00").is_err());
        assert!(tokenize("1:2:3").is_err());
        assert_eq!(toks("$ab"), vec![Tok::Arcnet(0xab)]);
        assert_eq!(toks("$123"), vec![Tok::Arcnet(0x12), Tok::Num(3)]);
        assert!(tokenize("$x").is_err());
    }

    #[test]
    fn ipv6() {
        for s in [
            "::",
            "::1",
            "fe80::1",
            "1:2:3:4:5:6:7:8",
            "::ffff:1.2.3.4",
            "1:2:3:4:5:6:1.2.3.4",
            "2001:db8::",
        ] {
            let t = toks(s);
            assert!(matches!(&t[..], [Tok::Ipv6(x, _)] if x == s), "{s}: {t:?}");
        }
        assert!(tokenize("fe80::256.20.30.40").is_err());
        let t = toks("fe80:0:0:0:0:0:0:0:0");
        assert!(matches!(t[0], Tok::Ipv6(..)) && t[1] == Tok::Colon);
        assert_eq!(toks("ip[0:2]")[3], Tok::Colon);
    }

    #[test]
    fn operators() {
        assert_eq!(
            toks("! && || == != <= >= << >> = < > & | ^"),
            vec![
                Tok::Not,
                Tok::And,
                Tok::Or,
                Tok::Eq,
                Tok::Ne,
                Tok::Le,
                Tok::Ge,
                Tok::Shl,
                Tok::Shr,
                Tok::Eq,
                Tok::Lt,
                Tok::Gt,
                Tok::Amp,
                Tok::Pipe,
                Tok::Caret
            ]
        );
        assert!(tokenize("host é").is_err());
        assert!(tokenize("a . b").is_err());
    }
}

#[cfg(test)]
mod examples {
    //! The examples of the items above, which are crate-internal.

    #[test]
    fn module() {
        use crate::lexer::{tokenize, Kw, Tok};
        let toks = tokenize("tcp port ftp-data").unwrap();
        assert_eq!(toks[1].tok, Tok::Kw(Kw::Port));
        assert_eq!(toks[2].tok, Tok::Id("ftp-data".into()));
        assert_eq!(toks[3].tok, Tok::Eof);
    }

    #[test]
    fn kw() {
        use crate::lexer::{tokenize, Kw, Tok};
        assert_eq!(tokenize("dir").unwrap()[0].tok, Tok::Kw(Kw::Dir));
        assert_eq!(tokenize("direction").unwrap()[0].tok, Tok::Kw(Kw::Dir));
    }

    #[test]
    fn tok() {
        use crate::lexer::{tokenize, Tok};
        assert_eq!(tokenize("0x1a").unwrap()[0].tok, Tok::Num(26));
        assert_eq!(tokenize("1a").unwrap()[0].tok, Tok::Id("1a".into()));
    }

    #[test]
    fn describe() {
        use crate::lexer::Tok;
        assert_eq!(Tok::Eof.describe(), "end of expression");
    }

    #[test]
    fn token() {
        use crate::{ast::Span, lexer::tokenize};
        assert_eq!(tokenize(" ip").unwrap()[0].span, Span::new(1, 3));
    }

    #[test]
    fn named_constant() {
        assert_eq!(crate::lexer::named_constant("tcp-syn"), Some(2));
        assert_eq!(crate::lexer::named_constant("icmp6-echo"), Some(128));
        assert_eq!(crate::lexer::named_constant("tcp"), None);
    }

    #[test]
    fn keyword() {
        use crate::{
            ast::Proto,
            lexer::{keyword, Tok},
        };
        assert_eq!(keyword("ether"), Some(Tok::Proto(Proto::Link)));
        assert_eq!(keyword("Ether"), None);
    }

    #[test]
    fn proto_name() {
        use crate::{ast::Proto, lexer::proto_name};
        assert_eq!(proto_name(Proto::Link), "link");
        assert_eq!(proto_name(Proto::Ip6), "ip6");
    }

    #[test]
    fn kw_name() {
        use crate::lexer::{kw_name, Kw};
        assert_eq!(kw_name(Kw::PortRange), "portrange");
    }

    #[test]
    fn dotted_part() {
        assert_eq!(crate::lexer::dotted_part("1023"), 1023);
        assert_eq!(crate::lexer::dotted_part("0x10"), 16);
    }

    #[test]
    fn pack_dotted() {
        assert_eq!(crate::lexer::pack_dotted("10.1"), (0x0a01, 16));
        assert_eq!(crate::lexer::pack_dotted("1.2.3.4"), (0x01020304, 32));
    }

    #[test]
    fn tokenize() {
        use crate::lexer::{tokenize, Tok};
        let t = tokenize("ether host ab:cd:ef:0:0:1").unwrap();
        assert_eq!(
            t[2].tok,
            Tok::Mac("ab:cd:ef:0:0:1".into(), [0xab, 0xcd, 0xef, 0, 0, 1])
        );
        assert!(tokenize("port 4294967296").is_err());
    }
}
