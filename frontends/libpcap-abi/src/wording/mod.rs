//! The words a refused filter expression gets from `pcap_compile`:
//! libpcap 1.10.3's, the release Debian's programs were built against, so
//! that tcpdump, tshark and the Python bindings print on sluice what they
//! print on libpcap. (`sluice filter` keeps sluice's own messages, which
//! name the column and often say more.)
//!
//! The rule of the module: it decides wording only. sluice's compiler has
//! already refused the expression; this finds the part it refused and
//! says why as libpcap would, checking in libpcap's order (a primitive's
//! value shape, then its kind, protocol and direction; see [`prim`]).
//! Where libpcap's reason cannot be told, sluice's message stands.

mod other;
mod prim;

use crate::names::{pcap_datalink_val_to_description_or_dlt, pcap_datalink_val_to_name};
use sluice_filter::{LinkType, SystemResolver};
use sluice_pcap::ast::{Expr, Other, Span};
use sluice_pcap::resolve::Resolver;
use sluice_pcap::CompileError;
use sluice_wire::link::{Layout, ProtoField};
use std::ffi::{c_int, CStr};
use std::net::IpAddr;
use std::sync::Arc;

/// libpcap's message for a syntax error.
pub(crate) const SYNTAX: &str = "can't parse filter expression: syntax error";

/// What the rules know of one refusal.
pub(crate) struct Ctx<'a> {
    text: &'a str,
    dlt: c_int,
    sluice: &'a str,
    /// A `pppoes` came before the refused part: libpcap then describes
    /// the link as PPP.
    after_pppoes: bool,
}

impl Ctx<'_> {
    /// The expression's text at `span`.
    fn text(&self, span: Span) -> &str {
        self.text.get(span.start..span.end).unwrap_or("")
    }

    /// libpcap's name of the link type (`EN10MB`), or "".
    fn dlt_name(&self) -> &'static str {
        let p = pcap_datalink_val_to_name(self.dlt);
        if p.is_null() {
            return "";
        }
        // SAFETY: a static NUL-terminated string of the link-type table.
        unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("")
    }

    /// libpcap's description of the link type, or `DLT n` (PPP's after
    /// `pppoes`, whose session payload libpcap treats as a PPP link).
    fn link_description(&self) -> String {
        let dlt = if self.after_pppoes { 9 } else { self.dlt };
        let p = pcap_datalink_val_to_description_or_dlt(dlt);
        // SAFETY: a NUL-terminated string, static or in this thread's
        // scratch buffer, read at once.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Whether sluice's message mentions `what`.
    fn sluice_says(&self, what: &str) -> bool {
        self.sluice.contains(what)
    }

    /// A host name's addresses, as the compiler resolved them.
    fn resolve(&self, name: &str) -> Option<Vec<IpAddr>> {
        SystemResolver.host(name).ok()
    }

    /// Whether libpcap refuses every link-layer protocol test on this link
    /// (it has no protocol field sluice or libpcap could read).
    fn no_link_type(&self) -> bool {
        // Links libpcap master reads, 1.10.3 not.
        if matches!(self.dlt_name(), "DSA_TAG_BRCM" | "DSA_TAG_DSA") {
            return true;
        }
        let lt = u32::try_from(self.dlt).ok().and_then(LinkType::from_number);
        lt.map(Layout::of)
            .map_or(true, |l| l.field == ProtoField::NoLinkType)
    }

    /// Whether the link has a field naming the protocol it carries
    /// (libpcap tries IPv4 and IPv6 host addresses alike only where it has
    /// none).
    fn has_link_type_field(&self) -> bool {
        let lt = u32::try_from(self.dlt).ok().and_then(LinkType::from_number);
        !lt.map(Layout::of).is_some_and(|l| {
            matches!(
                l.field,
                ProtoField::IpVersion
                    | ProtoField::OnlyIpv4
                    | ProtoField::OnlyIpv6
                    | ProtoField::SlipIp
                    | ProtoField::NoLinkType
            )
        })
    }
}

/// libpcap's words for sluice's refusal `e` of `text` on link type `dlt`.
///
/// ```ignore
/// // (crate-internal) `tcp port 99999` on Ethernet:
/// // "illegal port number 99999 > 65535"
/// ```
pub(crate) fn libpcap_message(text: &str, dlt: c_int, e: &CompileError) -> String {
    let expr = match sluice_pcap::parser::parse(text) {
        Ok(x) => x,
        Err(pe) => {
            // The scanner's complaint about the token where parsing
            // stopped, else a refusal of what came before it.
            let rest = text.get(pe.span.start..).unwrap_or("");
            return other::lexical(rest, &e.message)
                .or_else(|| prefix_refusal(text, dlt, &pe))
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
        dlt,
        sluice: &e.message,
        after_pppoes: pppoes_before(&expr, e.span),
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
fn prefix_refusal(text: &str, dlt: c_int, pe: &CompileError) -> Option<String> {
    let prefix = text.get(..pe.span.start)?.trim_end();
    if prefix.is_empty() || prefix.len() >= text.len() {
        return None;
    }
    let lt = u32::try_from(dlt).ok().and_then(LinkType::from_number)?;
    sluice_pcap::parser::parse(prefix).ok()?;
    let resolver: Arc<dyn Resolver> = Arc::new(SystemResolver);
    match sluice_pcap::compile_with(prefix, lt, 262_144, false, Some(resolver)) {
        Err(e) => Some(libpcap_message(prefix, dlt, &e)),
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
