//! libpcap's scratch registers, counted: what it refuses as "too many
//! registers needed to evaluate expression".
//!
//! libpcap's code generator hands out classic BPF's 16 scratch words as it
//! generates, and refuses the expression when it needs a 17th. sluice's
//! classic BPF uses its words differently, so this counts libpcap's, in
//! libpcap's order:
//!
//! - a relation's arithmetic: every number, `len` and load result holds a
//!   word while the rest of its operator is generated (a load takes its
//!   result's word before freeing its index's; an operator frees both
//!   operands' and takes one); all are free when the relation is made;
//! - the offsets of a link whose headers have variable length (the 802.11
//!   header after a radio header; the 802.11 or pflog payload), each when
//!   a primitive first reads at it, never freed; at the end libpcap also
//!   takes the 802.11 header's when it took the payload's;
//! - `geneve` and `vxlan`: three each (the inner link header, its type
//!   field and its payload), never freed;
//! - `protochain`: one while its loop is generated.
//!
//! So five tunnels leave one word, and `geneve and geneve and geneve and
//! geneve and geneve and geneve and tcp` is refused, as in libpcap.
//!
//! ```
//! use sluice_pcap::{compile, link::LinkType};
//! let six = ["geneve"; 6].join(" and ") + " and tcp";
//! let e = compile(&six, LinkType::EN10MB, 1).unwrap_err();
//! assert!(e.to_string().contains("too many registers needed to evaluate expression"));
//! assert!(compile(&(["geneve"; 5].join(" and ") + " and tcp"), LinkType::EN10MB, 1).is_ok());
//! ```

use std::cell::Cell;

use super::{err, GResult, Gen};
use crate::ast::{Proto, Span};
use crate::link::LinkType;

/// Classic BPF's scratch words.
const WORDS: u32 = 16;

/// libpcap's message when it runs out of them.
pub(crate) const TOO_MANY: &str = "too many registers needed to evaluate expression";

/// The words libpcap holds at a point of the generation.
#[derive(Debug, Default)]
pub(crate) struct Regs {
    /// Words in use.
    live: Cell<u32>,
    /// The link header's offset has its word.
    header: Cell<bool>,
    /// The link payload's offset has its word.
    payload: Cell<bool>,
    /// A word was asked for when none was free.
    out: Cell<bool>,
}

/// Whether libpcap keeps the link header's offset in a word (it follows a
/// radio header whose length the packet gives).
fn header_varies(dlt: LinkType) -> bool {
    matches!(
        dlt,
        LinkType::PRISM_HEADER
            | LinkType::IEEE802_11_RADIO_AVS
            | LinkType::IEEE802_11_RADIO
            | LinkType::PPI
    )
}

/// Whether libpcap keeps the link payload's offset in a word.
fn payload_varies(dlt: LinkType) -> bool {
    header_varies(dlt) || matches!(dlt, LinkType::IEEE802_11 | LinkType::PFLOG)
}

impl Gen {
    /// libpcap takes a word.
    pub(crate) fn reg_take(&self) {
        let r = &self.regs;
        if r.live.get() >= WORDS {
            r.out.set(true);
        } else {
            r.live.set(r.live.get() + 1);
        }
    }

    /// libpcap takes a word in a relation's arithmetic, refusing at once
    /// when there is none (before it looks further at the operand).
    pub(crate) fn reg_take_at(&self, span: Span) -> GResult<()> {
        self.reg_take();
        if self.reg_out() {
            return err(span, TOO_MANY);
        }
        Ok(())
    }

    /// libpcap frees `n` words.
    pub(crate) fn reg_free(&self, n: u32) {
        let r = &self.regs;
        r.live.set(r.live.get().saturating_sub(n));
    }

    /// The link's own offsets (none after a tunnel, whose offsets have
    /// their words) as a primitive read them: each takes its word the
    /// first time.
    pub(crate) fn reg_link(&self, header: bool, payload: bool) {
        // (A refusal here is reported by the caller, as `reg_out`.)
        if self.off.tunnels == 0 {
            self.reg_link_own(header, payload);
        }
    }

    /// [`Gen::reg_link`] where the link's own offsets are known to be in
    /// force.
    pub(crate) fn reg_link_own(&self, header: bool, payload: bool) {
        let dlt = self.off.dlt;
        let r = &self.regs;
        if header && header_varies(dlt) && !r.header.get() {
            r.header.set(true);
            self.reg_take();
        }
        if payload && payload_varies(dlt) && !r.payload.get() {
            r.payload.set(true);
            self.reg_take();
        }
    }

    /// Which of the link's offsets a load of `proto` reads (its address
    /// and its protocol checks): the header for link-layer loads, the
    /// payload (and on 802.11 the header, for the data-frame check) for
    /// the others; `radio` reads from the packet's start.
    pub(crate) fn reg_load_reads(&self, proto: Proto) -> (bool, bool) {
        match proto {
            Proto::Link => (true, false),
            Proto::Radio => (false, false),
            _ => (super::wlan::is_wlan(self.off.dlt), true),
        }
    }

    /// The words of a tunnel's inner offsets.
    pub(crate) fn reg_tunnel(&self) {
        for _ in 0..3 {
            self.reg_take();
        }
    }

    /// What libpcap takes at the end: the 802.11 header's word when the
    /// payload's was taken (its offset is computed from the header's).
    pub(crate) fn reg_finish(&self) {
        if self.regs.payload.get() {
            self.reg_link(true, false);
        }
    }

    /// Whether a word was asked for when none was free (and forget it).
    pub(crate) fn reg_out(&self) -> bool {
        self.regs.out.replace(false)
    }
}
