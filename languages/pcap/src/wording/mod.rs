//! The words a refused filter expression gets from libpcap 1.10.3's
//! `pcap_compile`, the release Debian's programs were built against, so
//! that tcpdump, tshark and the Python bindings print on sluice's libpcap
//! what they print on libpcap. (`sluice filter` keeps sluice's own
//! messages, which name the column and often say more.)
//!
//! The rule of the module: it decides wording only. sluice's compiler has
//! already refused the expression; this finds the part it refused and
//! says why as libpcap would, checking in libpcap's order (a primitive's
//! value shape, then its kind, protocol and direction; see `prim`).
//! Where libpcap's reason cannot be told, sluice's message stands. Link
//! types are named and described as 1.10.3's table has them
//! ([`LinkType::libpcap_1_10`]).

mod other;
mod prim;

use crate::ast::{Expr, Other, Span};
use crate::resolve::Resolver;
use crate::CompileError;
use sluice_wire::link::{Layout, LinkType, ProtoField};
use std::net::IpAddr;
use std::sync::Arc;

/// libpcap's message for a syntax error.
pub(crate) const SYNTAX: &str = "can't parse filter expression: syntax error";

/// What the rules know of one refusal.
pub(crate) struct Ctx<'a> {
    text: &'a str,
    linktype: LinkType,
    sluice: &'a str,
    /// A `pppoes` came before the refused part: libpcap then describes
    /// the link as PPP.
    after_pppoes: bool,
    resolver: Option<&'a dyn Resolver>,
}

impl Ctx<'_> {
    /// The expression's text at `span`.
    fn text(&self, span: Span) -> &str {
        self.text.get(span.start..span.end).unwrap_or("")
    }

    /// libpcap 1.10.3's name of the link type (`EN10MB`), or "".
    fn dlt_name(&self) -> &'static str {
        self.linktype.libpcap_1_10().map_or("", |(name, _)| name)
    }

    /// libpcap 1.10.3's description of the link type, or `DLT n` (PPP's
    /// after `pppoes`, whose session payload libpcap treats as a PPP
    /// link).
    fn link_description(&self) -> String {
        let lt = if self.after_pppoes {
            LinkType::PPP
        } else {
            self.linktype
        };
        match lt.libpcap_1_10() {
            Some((_, description)) => description.to_string(),
            None => format!("DLT {}", lt.dlt()),
        }
    }

    /// Whether sluice's message mentions `what`.
    fn sluice_says(&self, what: &str) -> bool {
        self.sluice.contains(what)
    }

    /// A host name's addresses, as the compiler resolved them.
    fn resolve(&self, name: &str) -> Option<Vec<IpAddr>> {
        self.resolver?.host(name).ok()
    }

    /// Whether libpcap refuses every link-layer protocol test on this link
    /// (it has no protocol field sluice or libpcap could read).
    fn no_link_type(&self) -> bool {
        // Links libpcap master reads, 1.10.3 not.
        if matches!(self.dlt_name(), "DSA_TAG_BRCM" | "DSA_TAG_DSA") {
            return true;
        }
        Layout::of(self.linktype).field == ProtoField::NoLinkType
    }

    /// Whether the link has a field naming the protocol it carries
    /// (libpcap tries IPv4 and IPv6 host addresses alike only where it has
    /// none).
    fn has_link_type_field(&self) -> bool {
        !matches!(
            Layout::of(self.linktype).field,
            ProtoField::IpVersion
                | ProtoField::OnlyIpv4
                | ProtoField::OnlyIpv6
                | ProtoField::SlipIp
                | ProtoField::NoLinkType
        )
    }
}

/// libpcap 1.10.3's words for sluice's refusal `e` of expression `text`
/// on `linktype`; host names resolve through `resolver`, as they did when
/// the expression was compiled (`None`: names are unknown).
///
/// ```
/// use sluice_pcap::{compile, libpcap_message, link::LinkType};
/// let text = "tcp port 99999";
/// let e = compile(text, LinkType::EN10MB, 262144).unwrap_err();
/// assert_eq!(libpcap_message(text, LinkType::EN10MB, &e, None), "illegal port number 99999 > 65535");
/// let e = compile("tcp and", LinkType::EN10MB, 262144).unwrap_err();
/// assert_eq!(libpcap_message("tcp and", LinkType::EN10MB, &e, None), "can't parse filter expression: syntax error");
/// ```
pub fn libpcap_message(
    text: &str,
    linktype: LinkType,
    e: &CompileError,
    resolver: Option<Arc<dyn Resolver>>,
) -> String {
    let expr = match crate::parser::parse(text) {
        Ok(x) => x,
        Err(pe) => {
            // The scanner's complaint about the token where parsing
            // stopped, else a refusal of what came before it.
            let rest = text.get(pe.span.start..).unwrap_or("");
            return other::lexical(rest, &e.message)
                .or_else(|| prefix_refusal(text, linktype, &pe, resolver))
                .unwrap_or_else(|| SYNTAX.into());
        }
    };
    if expr
        .leaves()
        .iter()
        .any(|l| matches!(l, Expr::Other(Other::Vxlan(_), _)))
    {
        // A keyword libpcap 1.10.3 does not have (sluice follows master).
        return SYNTAX.into();
    }
    let cx = Ctx {
        text,
        linktype,
        sluice: &e.message,
        after_pppoes: pppoes_before(&expr, e.span),
        resolver: resolver.as_deref(),
    };
    let found = innermost(&expr, e.span).and_then(|node| match node {
        Expr::Prim(p) => prim::refusal(p, &cx),
        other => other::refusal(other, &cx),
    });
    found
        .or_else(|| other::translate(&cx))
        .unwrap_or_else(|| e.message.clone())
}

/// libpcap generates code for each primitive as soon as its parser has
/// read it, so an expression that fails to parse can still be refused
/// for a primitive before the bad part: the refusal of the text up to
/// the parse error, if that part compiles to an error.
fn prefix_refusal(
    text: &str,
    linktype: LinkType,
    pe: &CompileError,
    resolver: Option<Arc<dyn Resolver>>,
) -> Option<String> {
    let prefix = text.get(..pe.span.start)?.trim_end();
    if prefix.is_empty() || prefix.len() >= text.len() {
        return None;
    }
    crate::parser::parse(prefix).ok()?;
    match crate::compile_with(prefix, linktype, 262_144, false, resolver.clone()) {
        Err(e) => Some(libpcap_message(prefix, linktype, &e, resolver)),
        Ok(_) => None,
    }
}

/// The leaf of `e` (a primitive, protocol, relation or other keyword)
/// whose span holds `at`.
fn innermost(e: &Expr, at: Span) -> Option<&Expr> {
    e.leaves().into_iter().find(|leaf| {
        let s = leaf.span();
        !matches!(leaf, Expr::True(_)) && s.start <= at.start && at.end <= s.end.max(at.start + 1)
    })
}

/// Whether a `pppoes` keyword comes before `at` in `e`.
fn pppoes_before(e: &Expr, at: Span) -> bool {
    e.leaves()
        .iter()
        .any(|l| matches!(l, Expr::Other(Other::Pppoes(_), s) if s.end <= at.start))
}
