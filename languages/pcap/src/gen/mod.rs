//! The code generator: pcap syntax tree → sluice IR, with libpcap's meaning.
//!
//! The generator walks the expression left to right, as libpcap does, because
//! some keywords (`vlan`, `mpls`, `pppoes`, `geneve`, `vxlan`) move the
//! headers that every later primitive looks at, whichever branch of an `or`
//! they are in. That moving state is `Offsets`; everything else is a pure
//! function of the node and the offsets at that point.
//!
//! ```
//! use sluice_pcap::{compile, link::LinkType};
//! let f = compile("tcp port 80", LinkType::EN10MB, 262144).unwrap();
//! assert_eq!(f.accept, 262144);
//! ```

mod arith;
mod atm;
mod family;
mod links;
mod mtp;
mod net;
mod pflog;
mod proto;
mod regs;
mod tunnel;
mod wlan;

use crate::ast::{Expr, Span};
use crate::error::CompileError;
use crate::link::{Layout, LinkType, ProtoField};
use sluice_ir::{Filter, Pred, Val};

/// Where the headers are at a point in the expression.
#[derive(Clone, Debug)]
pub(crate) struct Offsets {
    /// How the current link header names its payload.
    pub field: ProtoField,
    /// Start of the current link header (moves for tunnels).
    pub link: Val,
    /// The protocol field, relative to the packet start.
    pub proto_at: Option<Val>,
    /// The network header (the link payload), relative to the packet start.
    pub net: Val,
    /// MAC address offsets relative to the packet start.
    pub macs: Option<(Val, Val)>,
    /// How many MPLS labels have been stepped over.
    pub mpls_depth: u32,
    /// How many VLAN tags have been stepped over.
    pub vlan_depth: u32,
    /// How many `geneve`/`vxlan` tunnels have been entered: offsets past
    /// the first are computed from the last tunnel's, which are then held
    /// once ([`sluice_ir::Val::shared`]) instead of copied into each.
    pub tunnels: u32,
    /// The link type of the capture.
    pub dlt: LinkType,
    /// The link type of the current link header (libpcap's `linktype`):
    /// the capture's, PPP after `pppoes`, Ethernet after `geneve`/`vxlan`.
    pub link_dlt: LinkType,
}

impl Offsets {
    fn new(dlt: LinkType) -> Offsets {
        let l = Layout::of(dlt);
        if l.field == ProtoField::Ieee80211 {
            return wlan::offsets(dlt, wlan::Variant::default());
        }
        Offsets {
            field: l.field,
            link: Val::Const(0),
            proto_at: l.proto_at.map(Val::Const),
            net: Val::Const(l.payload),
            macs: l.mac_src_dst.map(|(s, d)| (Val::Const(s), Val::Const(d))),
            mpls_depth: 0,
            vlan_depth: 0,
            tunnels: 0,
            dlt,
            link_dlt: dlt,
        }
    }
}

/// The state of one compilation.
pub(crate) struct Gen {
    pub off: Offsets,
    /// Which 802.11 offsets the filter used.
    wlan_uses: wlan::Uses,
    /// The 802.11 layout being generated for.
    wlan_variant: wlan::Variant,
    /// Set when a primitive needs something libpcap refuses in its context
    /// (a protocol test on a link that has none, such as MTP2 or USB; a
    /// non-IP protocol after `mpls`): the expression is then refused with
    /// this message, at that primitive.
    refusal: std::cell::RefCell<Option<String>>,
    /// The capture file was written big-endian: NULL and ENC links keep the
    /// address family in the capturing host's byte order.
    pub(crate) capture_big_endian: bool,
    /// The packets come from a capture file: libpcap's rule for address
    /// families on the loopback links ([`crate::Options::offline`]).
    pub(crate) offline: bool,
    /// Set where libpcap turns its optimiser off ([`crate::Compiled`]).
    pub(crate) no_optimize: std::cell::Cell<bool>,
    /// The 802.11 header is read at offset 0 (until a `pppoes`, `geneve`
    /// or `vxlan`: see [`Gen::wlan_unset`]).
    pub(crate) wlan_header_unset: bool,
    /// The 802.11 payload is read at offset 0 (until a tunnel).
    pub(crate) wlan_payload_unset: bool,
    /// Turns host names into addresses (none: names are refused).
    pub(crate) resolver: Option<std::sync::Arc<dyn crate::resolve::Resolver>>,
    /// The network's netmask for `ip broadcast` (`None`: not known, and
    /// `ip broadcast` is refused, as libpcap refuses it).
    pub(crate) netmask: Option<u32>,
    /// libpcap's scratch registers, counted ([`regs`]).
    pub(crate) regs: regs::Regs,
}

impl Gen {
    /// A generator starting at `off`, for the default 802.11 layout.
    fn new(off: Offsets) -> Gen {
        Gen {
            off,
            wlan_uses: wlan::Uses::default(),
            wlan_variant: wlan::Variant::default(),
            refusal: std::cell::RefCell::new(None),
            capture_big_endian: cfg!(target_endian = "big"),
            offline: false,
            no_optimize: std::cell::Cell::new(false),
            wlan_header_unset: false,
            wlan_payload_unset: false,
            resolver: None,
            netmask: None,
            regs: regs::Regs::default(),
        }
    }
}

pub(crate) type GResult<T> = Result<T, CompileError>;

/// Compile a parsed expression for a link type into a filter that returns
/// `snaplen` on accept.
///
/// ```
/// use sluice_pcap::{parser::parse, gen::generate, link::LinkType};
/// let e = parse("ip").unwrap();
/// let f = generate(&e, LinkType::RAW, 65535).unwrap();
/// assert_eq!(f.run(&[0x45, 0, 0, 20], 20), 65535);
/// ```
pub fn generate(e: &Expr, dlt: LinkType, snaplen: u32) -> Result<Filter, CompileError> {
    generate_for(e, dlt, snaplen, cfg!(target_endian = "big"))
}

/// Like [`generate`], for packets from a capture written in the given byte
/// order: on NULL and ENC links the address family is in the capturing
/// host's order, so what `ip` compares depends on it (libpcap does the same
/// for the file it reads).
///
/// ```
/// use sluice_pcap::{parser::parse, gen::generate_for, link::LinkType};
/// let e = parse("ip").unwrap();
/// let le = generate_for(&e, LinkType::NULL, 1, false).unwrap();
/// let be = generate_for(&e, LinkType::NULL, 1, true).unwrap();
/// assert_eq!(le.run(&[2, 0, 0, 0], 4), 1);
/// assert_eq!(be.run(&[0, 0, 0, 2], 4), 1);
/// ```
pub fn generate_for(
    e: &Expr,
    dlt: LinkType,
    snaplen: u32,
    capture_big_endian: bool,
) -> Result<Filter, CompileError> {
    generate_with(e, dlt, snaplen, capture_big_endian, None)
}

/// Like [`generate_for`], with host names resolved by `resolver` (`None`:
/// refused, as libpcap would if it could not look them up).
///
/// ```
/// use sluice_pcap::{parser::parse, gen::generate_with, link::LinkType};
/// let e = parse("host gw").unwrap();
/// assert!(generate_with(&e, LinkType::RAW, 1, false, None).is_err());
/// ```
pub fn generate_with(
    e: &Expr,
    dlt: LinkType,
    snaplen: u32,
    capture_big_endian: bool,
    resolver: Option<std::sync::Arc<dyn crate::resolve::Resolver>>,
) -> Result<Filter, CompileError> {
    generate_with_netmask(e, dlt, snaplen, capture_big_endian, resolver, None)
}

/// [`generate_with`] knowing the network's netmask, for `ip broadcast`
/// (libpcap's `pcap_compile` argument; `None` for `PCAP_NETMASK_UNKNOWN`).
pub fn generate_with_netmask(
    e: &Expr,
    dlt: LinkType,
    snaplen: u32,
    capture_big_endian: bool,
    resolver: Option<std::sync::Arc<dyn crate::resolve::Resolver>>,
    netmask: Option<u32>,
) -> Result<Filter, CompileError> {
    let options = crate::Options {
        snaplen,
        capture_big_endian,
        offline: false,
        resolver,
        netmask,
        optimize: false,
    };
    Ok(generate_options(e, dlt, &options)?.filter)
}

/// Compile a parsed expression with the given options: the filter, and
/// whether libpcap would optimise it (see [`crate::Compiled`]).
///
/// ```
/// use sluice_pcap::{parser::parse, gen::generate_options, link::LinkType, Options};
/// let c = generate_options(&parse("ip").unwrap(), LinkType::RAW, &Options::new(9)).unwrap();
/// assert_eq!(c.filter.run(&[0x45], 1), 9);
/// ```
pub fn generate_options(
    e: &Expr,
    dlt: LinkType,
    options: &crate::Options,
) -> Result<crate::Compiled, CompileError> {
    let mut g = Gen::new(Offsets::new(dlt));
    g.capture_big_endian = options.capture_big_endian;
    g.offline = options.offline;
    g.resolver = options.resolver.clone();
    g.netmask = options.netmask;
    g.wlan_unset(e);
    g.link_setup();
    let pred = constants(g.expr(e)?);
    g.check_refusal(e.span())?;
    g.reg_finish();
    if g.reg_out() {
        return err(e.span(), regs::TOO_MANY);
    }
    let (pred, judged) = g.wlan_finish(pred, e)?;
    let (pred, judged) = match g.pflog_prologue(&pred) {
        Some(load) => {
            let judged = judged.unwrap_or_else(|| pred.clone());
            (Pred::and(vec![load, pred]), Some(judged))
        }
        None => (pred, judged),
    };
    let optimize = options.optimize && !g.no_optimize.get();
    Ok(crate::Compiled {
        filter: Filter::new(pred, options.snaplen),
        optimize,
        judged,
    })
}

impl Gen {
    /// Record that the current primitive must be refused (the first reason wins).
    pub(crate) fn refuse(&self, msg: impl Into<String>) {
        let mut r = self.refusal.borrow_mut();
        if r.is_none() {
            *r = Some(msg.into());
        }
    }

    /// Turn a recorded refusal into an error at `span`.
    fn check_refusal(&self, span: Span) -> GResult<()> {
        match self.refusal.borrow_mut().take() {
            Some(msg) => err(span, msg),
            None => Ok(()),
        }
    }
}

/// libpcap's rule for the constant tests of its code generator (a link
/// that never carries a protocol, `arp` on RAW, gives a constant false):
/// `false and x` and `x and false` are false, `true or x` and `x or true`
/// are true, whatever `x` would load. Sluice's generator makes constants
/// only where libpcap's does (a comparison of two numbers is a test there,
/// not a constant), so applying the rule to the whole predicate gives
/// libpcap's program: `not (tcp[0] = 1 and arp[0] = 2)` on RAW is true
/// without loading anything.
pub(crate) fn constants(p: Pred) -> Pred {
    match p {
        Pred::Not(q) => Pred::not(constants(*q)),
        Pred::And(ps) => {
            let ps: Vec<Pred> = ps.into_iter().map(constants).collect();
            if ps.contains(&Pred::False) {
                Pred::False
            } else {
                Pred::and(ps)
            }
        }
        Pred::Or(ps) => {
            let ps: Vec<Pred> = ps.into_iter().map(constants).collect();
            if ps.contains(&Pred::True) {
                Pred::True
            } else {
                Pred::or(ps)
            }
        }
        p => p,
    }
}

pub(crate) fn err<T>(span: Span, msg: impl Into<String>) -> GResult<T> {
    Err(CompileError::new(msg.into(), span))
}

impl Gen {
    fn expr(&mut self, e: &Expr) -> GResult<Pred> {
        Ok(match e {
            Expr::True(_) => Pred::True,
            // libpcap master reduces constant operands while it generates
            // code: on a link where `ip` is always true, `igmp or ip` is
            // true without loading anything. So a constant that decides a
            // junction decides it whatever the other operands would load.
            Expr::And(v) => {
                let mut out = Vec::with_capacity(v.len());
                for x in v {
                    out.push(self.expr(x)?);
                }
                if out.contains(&Pred::False) {
                    Pred::False
                } else {
                    Pred::and(out)
                }
            }
            Expr::Or(v) => {
                let mut out = Vec::with_capacity(v.len());
                for x in v {
                    out.push(self.expr(x)?);
                }
                if out.contains(&Pred::True) {
                    Pred::True
                } else {
                    Pred::or(out)
                }
            }
            Expr::Not(x, _) => Pred::not(self.expr(x)?),
            Expr::Prim(p) => {
                let before = self.link_reads();
                let pred = self.prim(p)?;
                self.leaf_regs(before, &pred, false);
                self.check_refusal(p.span)?;
                pred
            }
            Expr::Proto(p, span) => {
                let before = self.link_reads();
                let pred = self.proto_abbrev(*p, *span)?;
                self.leaf_regs(before, &pred, false);
                self.check_refusal(*span)?;
                pred
            }
            Expr::Rel(op, a, b, span) => {
                let pred = self.relation(*op, a, b, *span)?;
                if self.reg_out() {
                    self.refuse(regs::TOO_MANY);
                }
                self.check_refusal(*span)?;
                pred
            }
            Expr::Other(o, span) => {
                let before = self.link_reads();
                let pred = self.other(o, *span)?;
                let tunnel = matches!(
                    o,
                    crate::ast::Other::Geneve(_) | crate::ast::Other::Vxlan(_)
                );
                self.leaf_regs(before, &pred, tunnel);
                self.check_refusal(*span)?;
                pred
            }
        })
    }

    /// Which of the link's variable offsets the filter has read so far
    /// (header, payload), and how many tunnels it has entered.
    fn link_reads(&self) -> (bool, bool, u32) {
        let (h, p) = self.wlan_used();
        (h, p, self.off.tunnels)
    }

    /// libpcap's registers for a primitive just generated (`pred`): the
    /// link offsets it read first, then a tunnel's own
    /// ([`regs`]); a refusal when they run out.
    fn leaf_regs(&self, before: (bool, bool, u32), pred: &Pred, tunnel: bool) {
        let (h, p, tunnels) = before;
        // (Read at the offsets in force before the primitive: the link's
        // own unless a tunnel came earlier.)
        if tunnels == 0 {
            let (h2, p2) = self.wlan_used();
            let pflog = self.off.dlt == crate::link::LinkType::PFLOG
                && pflog::uses(pred, &self.pflog_payload());
            self.reg_link_own(h2 && !h, (p2 && !p) || pflog);
        }
        if tunnel {
            self.reg_tunnel();
        }
        if self.reg_out() {
            self.refuse(regs::TOO_MANY);
        }
    }
}
