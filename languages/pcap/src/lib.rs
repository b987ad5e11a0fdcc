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
