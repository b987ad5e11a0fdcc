//! The pcap filter language (tcpdump's expressions) with libpcap's meaning.
//!
//! The pipeline is text → [`lexer`] → [`parser`] (a syntax tree, [`ast`],
//! with libpcap's qualifier inheritance resolved) → [`gen`] (sluice's
//! intermediate form, `sluice_ir`). Link types and where their headers are
//! live in [`link`] (`sluice-wire`'s table); the protocol and service
//! names in [`names`], inside sluice: no `/etc` files, no DNS. Host
//! names are resolved only through a [`resolve::Resolver`] the caller
//! gives ([`compile_with`]).
//!
//! ```
//! use sluice_pcap::{compile, link::LinkType};
//! let f = compile("ip and udp port 53", LinkType::EN10MB, 262144).unwrap();
//! assert_eq!(f.run(&[0u8; 60], 60), 0);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod ast;
pub mod error;
pub mod gen;
pub mod lexer;
pub mod names;
pub mod parser;
pub mod resolve;

pub use error::CompileError;
/// Link types and where their headers are: the table lives in
/// [`sluice_wire::link`], the one place sluice keeps link-layer knowledge.
pub use sluice_wire::link;

/// Parse and compile an expression for a link type; the filter returns
/// `snaplen` on accept, as libpcap's do.
///
/// ```
/// use sluice_pcap::{compile, link::LinkType};
/// let err = compile("tcp port", LinkType::EN10MB, 65535).unwrap_err();
/// assert!(err.to_string().starts_with("column"));
/// ```
pub fn compile(
    text: &str,
    linktype: link::LinkType,
    snaplen: u32,
) -> Result<sluice_ir::Filter, CompileError> {
    let e = parser::parse(text)?;
    gen::generate(&e, linktype, snaplen)
}

/// Like [`compile`], for packets of a capture written in the given byte
/// order (it matters on NULL and ENC links; see [`gen::generate_for`]).
///
/// ```
/// use sluice_pcap::{compile_for, link::LinkType};
/// let f = compile_for("ip", LinkType::NULL, 1, true).unwrap();
/// assert_eq!(f.run(&[0, 0, 0, 2], 4), 1);
/// ```
pub fn compile_for(
    text: &str,
    linktype: link::LinkType,
    snaplen: u32,
    capture_big_endian: bool,
) -> Result<sluice_ir::Filter, CompileError> {
    let e = parser::parse(text)?;
    gen::generate_for(&e, linktype, snaplen, capture_big_endian)
}

/// Like [`compile_for`], with host names in `host NAME` (and a bare
/// `NAME`) turned into addresses by `resolver`; `None` refuses them.
///
/// ```
/// use sluice_pcap::{compile_with, link::LinkType};
/// let e = compile_with("host example", LinkType::EN10MB, 1, false, None).unwrap_err();
/// assert!(e.to_string().contains("host name"));
/// ```
pub fn compile_with(
    text: &str,
    linktype: link::LinkType,
    snaplen: u32,
    capture_big_endian: bool,
    resolver: Option<std::sync::Arc<dyn resolve::Resolver>>,
) -> Result<sluice_ir::Filter, CompileError> {
    compile_with_netmask(text, linktype, snaplen, capture_big_endian, resolver, None)
}

/// [`compile_with`] knowing the network's netmask (`pcap_compile`'s last
/// argument), so that `ip broadcast` compiles: a destination whose host
/// part is all zeros or all ones.
///
/// ```
/// use sluice_pcap::{compile_with_netmask, link::LinkType};
/// assert!(compile_with_netmask("ip broadcast", LinkType::RAW, 65535, false, None, None).is_err());
/// let f = compile_with_netmask("ip broadcast", LinkType::RAW, 65535, false, None, Some(0)).unwrap();
/// let mut pkt = [0u8; 20];
/// pkt[0] = 0x45;
/// pkt[16..20].copy_from_slice(&[255; 4]);
/// assert_ne!(f.run(&pkt, 20), 0);
/// ```
pub fn compile_with_netmask(
    text: &str,
    linktype: link::LinkType,
    snaplen: u32,
    capture_big_endian: bool,
    resolver: Option<std::sync::Arc<dyn resolve::Resolver>>,
    netmask: Option<u32>,
) -> Result<sluice_ir::Filter, CompileError> {
    let e = parser::parse(text)?;
    gen::generate_with_netmask(&e, linktype, snaplen, capture_big_endian, resolver, netmask)
}

/// How an expression is compiled: `pcap_compile`'s handle and arguments.
///
/// `offline` says the packets come from a capture file (`tcpdump -r`,
/// `pcap_open_offline`) rather than from a handle without one
/// (`pcap_open_dead`, `tcpdump -y`): on the loopback links (NULL, LOOP,
/// ENC, PFLOG) libpcap then accepts every BSD's IPv6 address family (24,
/// 28 and 30), on NULL and ENC in either byte order, where without a file
/// it compares with this host's (Linux's AF_INET6, 10, in this host's byte
/// order).
///
/// ```
/// use sluice_pcap::{compile_options, link::LinkType, Options};
/// let live = compile_options("ip6", LinkType::NULL, &Options::new(1)).unwrap();
/// let file = compile_options("ip6", LinkType::NULL, &Options { offline: true, ..Options::new(1) }).unwrap();
/// let macos = [0x1e, 0, 0, 0]; // AF_INET6 on macOS, little-endian
/// assert_eq!(live.filter.run(&macos, 4), 0);
/// assert_eq!(file.filter.run(&macos, 4), 1);
/// ```
#[derive(Clone, Debug)]
pub struct Options {
    /// What an accepted packet returns.
    pub snaplen: u32,
    /// The capture file was written big-endian (NULL and ENC links keep
    /// the address family in the capturing host's byte order).
    pub capture_big_endian: bool,
    /// The packets come from a capture file (see above).
    pub offline: bool,
    /// Turns host names into addresses (`None`: names are refused).
    pub resolver: Option<std::sync::Arc<dyn resolve::Resolver>>,
    /// The network's netmask for `ip broadcast` (`None`: unknown).
    pub netmask: Option<u32>,
    /// The program will be optimised (tcpdump's default; `-O` turns it
    /// off). What libpcap's optimiser refuses (a division by an operand
    /// that folds to zero, a program it reduces to `ret #0`) is decided
    /// when the filter is lowered (sluice-cbpf's `libpcap_refusal`).
    pub optimize: bool,
}

impl Options {
    /// A handle without a file on this host, returning `snaplen`.
    ///
    /// ```
    /// let o = sluice_pcap::Options::new(65535);
    /// assert!(!o.offline && o.resolver.is_none());
    /// ```
    pub fn new(snaplen: u32) -> Options {
        Options {
            snaplen,
            capture_big_endian: cfg!(target_endian = "big"),
            offline: false,
            resolver: None,
            netmask: None,
            optimize: true,
        }
    }
}

/// A compiled expression: the filter, and whether to optimise it.
///
/// libpcap turns its optimiser off for programs whose code it cannot
/// optimise (any expression on a Prism link; 802.11 links when a primitive
/// needs the network layer; `protochain`; `geneve`). There it neither folds
/// constants nor reports "expression rejects all packets", and sluice does
/// the same: `optimize` is [`Options::optimize`] unless libpcap would turn
/// its optimiser off.
///
/// ```
/// use sluice_pcap::{compile_options, link::LinkType, Options};
/// let c = compile_options("tcp", LinkType::EN10MB, &Options::new(1)).unwrap();
/// assert!(c.optimize);
/// let c = compile_options("ip protochain 6", LinkType::EN10MB, &Options::new(1)).unwrap();
/// assert!(!c.optimize);
/// ```
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The filter.
    pub filter: sluice_ir::Filter,
    /// Lower it with the optimiser.
    pub optimize: bool,
    /// What libpcap's optimiser judges when it decides to refuse ("rejects
    /// all packets", sluice-cbpf's `libpcap_refusal`), where that differs
    /// from `filter`: the program without the loads libpcap makes in its
    /// prologue, which are statements of its first block rather than
    /// tests (802.11 after a radio header, pflog).
    ///
    /// ```
    /// use sluice_pcap::{compile_options, link::LinkType, Options};
    /// let radiotap = compile_options("ether[0] & 0 = 1", LinkType::IEEE802_11_RADIO, &Options::new(1)).unwrap();
    /// assert!(radiotap.judged.is_some());
    /// let ethernet = compile_options("ether[0] & 0 = 1", LinkType::EN10MB, &Options::new(1)).unwrap();
    /// assert!(ethernet.judged.is_none());
    /// ```
    pub judged: Option<sluice_ir::Pred>,
}

/// Compile an expression for a link type with the given options.
///
/// ```
/// use sluice_pcap::{compile_options, link::LinkType, Options};
/// let c = compile_options("udp port 53", LinkType::RAW, &Options::new(96)).unwrap();
/// assert_eq!(c.filter.accept, 96);
/// ```
pub fn compile_options(
    text: &str,
    linktype: link::LinkType,
    options: &Options,
) -> Result<Compiled, CompileError> {
    let e = parser::parse(text)?;
    gen::generate_options(&e, linktype, options)
}
