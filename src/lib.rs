//! sluice: packet filters with libpcap's exact meaning, many at once, fast.
//!
//! This crate is the library face of the pipeline:
//! languages ([`sluice_pcap`], [`sluice_bpf`]) → intermediate form
//! ([`sluice_ir`]) → back ends ([`sluice_cbpf`] lowers to classic BPF, which
//! [`sluice_bpf`] interprets; [`sluice_native`] compiles to machine code) →
//! runtime ([`sluice_capture`]).
//!
//! ```
//! use sluice::{Program, LinkType};
//! let p = Program::from_expression("udp port 53", LinkType::EN10MB, 262144, true).unwrap();
//! assert_eq!(p.run(&[0u8; 60], 60), 0);
//! ```

#![warn(missing_docs)]

pub use sluice_bpf as bpf;
pub use sluice_capture as capture;
pub use sluice_cbpf as cbpf;
pub use sluice_cspf as cspf;
pub use sluice_dpf as dpf;
pub use sluice_ir as ir;
pub use sluice_native as native;
pub use sluice_pcap as pcap;
pub use sluice_pcap::link::LinkType;

pub mod language;
pub mod summary;

pub use language::{Language, Spec};

use std::fmt;
use std::sync::{Arc, OnceLock};

/// Why a filter could not be built.
///
/// ```
/// use sluice::{Program, LinkType};
/// let e = Program::from_expression("port", LinkType::EN10MB, 65535, true).unwrap_err();
/// assert!(e.to_string().contains("column"));
/// ```
#[derive(Debug)]
pub enum Error {
    /// The expression is not valid.
    Expression(sluice_pcap::CompileError),
    /// The expression is valid but accepts no packet at all (libpcap refuses these too).
    RejectsAll,
    /// The program could not be lowered to classic BPF.
    Lower(String),
    /// A BPF program text could not be parsed.
    BpfText(sluice_bpf::ParseError),
    /// A BPF program failed verification.
    BpfVerify(sluice_bpf::VerifyError),
    /// A CSPF program could not be assembled or verified.
    Cspf(sluice_cspf::Error),
    /// A DPF filter could not be parsed.
    Dpf(sluice_dpf::ParseError),
    /// A `LANG:@file` filter: the file could not be read, or the error in it.
    Spec(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Expression(e) => write!(f, "{e}"),
            Error::RejectsAll => write!(f, "expression rejects all packets"),
            Error::Lower(e) => write!(f, "{e}"),
            Error::BpfText(e) => write!(f, "{e}"),
            Error::BpfVerify(e) => write!(f, "{e}"),
            Error::Cspf(e) => write!(f, "cspf: {e}"),
            Error::Dpf(e) => write!(f, "dpf: {e}"),
            Error::Spec(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

/// Which engine runs a [`Program`].
///
/// ```
/// use sluice::{Engine, Program, LinkType};
/// let p = Program::from_expression("ip", LinkType::RAW, 100, true).unwrap();
/// for e in [Engine::Interp, Engine::Native, Engine::Reference] {
///     assert_eq!(p.run_with(e, &[0x45, 0, 0, 20], 20), 100);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// The classic BPF interpreter (runs every program).
    Interp,
    /// Machine code generated from the intermediate form; falls back to the
    /// interpreter where it cannot be built.
    Native,
    /// The IR's reference interpreter (the meaning, not an engine for speed).
    Reference,
}

impl Engine {
    /// The default engine: native code on x86-64 and AArch64, the
    /// interpreter elsewhere.
    ///
    /// ```
    /// let e = sluice::Engine::host_default();
    /// assert!(matches!(e, sluice::Engine::Native | sluice::Engine::Interp));
    /// ```
    pub fn host_default() -> Engine {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            Engine::Native
        } else {
            Engine::Interp
        }
    }
}

/// A compiled filter, ready to run on packets.
///
/// It keeps the intermediate form (the reference meaning, when the filter
/// came from an expression) and the classic BPF program that the interpreter
/// runs and `-d` prints. Native code is generated from the intermediate form
/// the first time it is asked for ([`Program::run_native`]) and shared by
/// clones.
///
/// ```
/// use sluice::{Program, LinkType};
/// let p = Program::from_expression("ip", LinkType::RAW, 100, true).unwrap();
/// assert_eq!(p.run(&[0x45, 0, 0, 20], 20), 100);
/// assert_eq!(p.run_native(&[0x45, 0, 0, 20], 20), 100);
/// ```
#[derive(Clone, Debug)]
pub struct Program {
    ir: Option<sluice_ir::Filter>,
    bpf: Vec<sluice_bpf::Insn>,
    native: Arc<OnceLock<Option<sluice_native::NativeFilter>>>,
}

impl Program {
    /// Compile a pcap filter expression for a link type; accepted packets get
    /// `snaplen` as the return value. `optimize` is tcpdump's default (`-O`
    /// turns it off).
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// assert!(Program::from_expression("tcp", LinkType::EN10MB, 65535, false).is_ok());
    /// ```
    pub fn from_expression(
        text: &str,
        linktype: LinkType,
        snaplen: u32,
        optimize: bool,
    ) -> Result<Program, Error> {
        Program::from_expression_for(
            text,
            linktype,
            snaplen,
            optimize,
            cfg!(target_endian = "big"),
        )
    }

    /// Like [`Program::from_expression`], for packets of a capture written
    /// in the given byte order (it matters on NULL and ENC links, where the
    /// address family is in the capturing host's order).
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// let p = Program::from_expression_for("ip", LinkType::NULL, 9, true, true).unwrap();
    /// assert_eq!(p.run(&[0, 0, 0, 2], 4), 9);
    /// ```
    pub fn from_expression_for(
        text: &str,
        linktype: LinkType,
        snaplen: u32,
        optimize: bool,
        capture_big_endian: bool,
    ) -> Result<Program, Error> {
        let ir = sluice_pcap::compile_for(text, linktype, snaplen, capture_big_endian)
            .map_err(Error::Expression)?;
        Program::from_ir(ir, optimize)
    }

    /// Load a classic BPF program in any of tcpdump's `-d`, `-dd` or `-ddd`
    /// formats; it must pass the (userland) verifier.
    ///
    /// ```
    /// let p = sluice::Program::from_bpf_text("1\n6 0 0 65535\n").unwrap();
    /// assert_eq!(p.run(&[], 0), 65535);
    /// ```
    pub fn from_bpf_text(text: &str) -> Result<Program, Error> {
        let bpf = sluice_bpf::parse_program(text).map_err(Error::BpfText)?;
        sluice_bpf::Verifier::userland()
            .verify(&bpf)
            .map_err(Error::BpfVerify)?;
        Ok(Program {
            ir: sluice_bpf::lift(&bpf).ok(),
            bpf,
            native: Arc::default(),
        })
    }

    /// The classic BPF program.
    ///
    /// ```
    /// let p = sluice::Program::from_bpf_text("1\n6 0 0 1\n").unwrap();
    /// assert_eq!(p.bpf().len(), 1);
    /// ```
    pub fn bpf(&self) -> &[sluice_bpf::Insn] {
        &self.bpf
    }

    /// The intermediate form: from an expression, or lifted from a BPF
    /// program whose control flow allows it.
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// assert!(Program::from_expression("ip", LinkType::RAW, 1, true).unwrap().ir().is_some());
    /// ```
    pub fn ir(&self) -> Option<&sluice_ir::Filter> {
        self.ir.as_ref()
    }

    /// Run the filter on one packet (captured bytes and wire length): the
    /// return value, 0 for reject.
    ///
    /// ```
    /// let p = sluice::Program::from_bpf_text("1\n6 0 0 0\n").unwrap();
    /// assert_eq!(p.run(&[1, 2, 3], 3), 0);
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        sluice_bpf::run(&self.bpf, pkt, wirelen)
    }

    /// Run the reference interpreter of the intermediate form (for expression
    /// programs); falls back to [`Program::run`] otherwise.
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// let p = Program::from_expression("ip6", LinkType::RAW, 9, true).unwrap();
    /// assert_eq!(p.run_reference(&[0x60], 1), 9);
    /// ```
    pub fn run_reference(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match &self.ir {
            Some(f) => f.run(pkt, wirelen),
            None => self.run(pkt, wirelen),
        }
    }

    /// The native code of the filter: compiled from the intermediate form on
    /// the first call, `None` when there is no intermediate form (a BPF
    /// program that does not lift) or code generation failed.
    ///
    /// ```
    /// use sluice::{Program, LinkType};
    /// let p = Program::from_expression("tcp", LinkType::EN10MB, 1, true).unwrap();
    /// assert!(p.native().is_some());
    /// ```
    pub fn native(&self) -> Option<&sluice_native::NativeFilter> {
        self.native
            .get_or_init(|| {
                let ir = self.ir.as_ref()?;
                sluice_native::NativeFilter::compile(ir).ok()
            })
            .as_ref()
    }

    /// Run the native code on one packet; the interpreter where there is none.
    ///
    /// ```
    /// let p = sluice::Program::from_bpf_text("1\n6 0 0 5\n").unwrap();
    /// assert_eq!(p.run_native(&[], 0), 5);
    /// ```
    #[inline]
    pub fn run_native(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match self.native() {
            Some(n) => n.run(pkt, wirelen),
            None => self.run(pkt, wirelen),
        }
    }

    /// Run the filter with the given engine.
    ///
    /// ```
    /// use sluice::{Engine, Program};
    /// let p = Program::from_bpf_text("1\n6 0 0 3\n").unwrap();
    /// assert_eq!(p.run_with(Engine::Native, &[], 0), 3);
    /// ```
    pub fn run_with(&self, engine: Engine, pkt: &[u8], wirelen: u32) -> u32 {
        match engine {
            Engine::Interp => self.run(pkt, wirelen),
            Engine::Native => self.run_native(pkt, wirelen),
            Engine::Reference => self.run_reference(pkt, wirelen),
        }
    }
}
