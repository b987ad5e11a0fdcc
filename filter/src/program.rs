//! A compiled filter and the engines that run it.

use crate::{Error, LinkType, ProgramBuilder};
use std::sync::{Arc, OnceLock};

/// Which engine runs a [`Program`].
///
/// ```
/// use sluice_filter::{LinkType, Program, Runner};
/// let p = Program::builder(LinkType::RAW).snaplen(100).expression("ip").unwrap();
/// for r in [Runner::Interp, Runner::Native, Runner::Reference] {
///     assert_eq!(p.run_with(r, &[0x45, 0, 0, 20], 20), 100);
/// }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Runner {
    /// The classic BPF interpreter (runs every program).
    Interp,
    /// Machine code generated from the intermediate form; falls back to the
    /// interpreter where it cannot be built.
    Native,
    /// The IR's reference interpreter (the meaning, not an engine for speed).
    Reference,
}

impl Runner {
    /// The default runner: native code on x86-64 and AArch64, the
    /// interpreter elsewhere.
    ///
    /// ```
    /// use sluice_filter::Runner;
    /// assert!(matches!(Runner::host_default(), Runner::Native | Runner::Interp));
    /// ```
    pub fn host_default() -> Runner {
        if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) {
            Runner::Native
        } else {
            Runner::Interp
        }
    }
}

/// Why a program runs without native code (the BPF interpreter runs it).
///
/// ```
/// let e = sluice_filter::NotNative::NoIr;
/// assert!(e.to_string().contains("does not lift"));
/// ```
#[derive(Debug, thiserror::Error)]
pub enum NotNative {
    /// A BPF program whose control flow does not lift into the
    /// intermediate form that native code is made from.
    #[error("the BPF program's control flow does not lift into the intermediate form")]
    NoIr,
    /// The code generator failed.
    #[error(transparent)]
    Codegen(sluice_native::NativeError),
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
/// use sluice_filter::{LinkType, Program};
/// let p = Program::builder(LinkType::RAW).snaplen(100).expression("ip").unwrap();
/// assert_eq!(p.run(&[0x45, 0, 0, 20], 20), 100);
/// assert_eq!(p.run_native(&[0x45, 0, 0, 20], 20), 100);
/// ```
#[derive(Clone, Debug)]
pub struct Program {
    ir: Option<sluice_ir::Filter>,
    bpf: Vec<sluice_bpf::Insn>,
    native: Arc<OnceLock<Result<sluice_native::NativeFilter, Arc<NotNative>>>>,
}

impl Program {
    /// How to compile a filter for a link type: see [`ProgramBuilder`].
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let p = Program::builder(LinkType::EN10MB).optimize(false).build("tcp").unwrap();
    /// assert_eq!(p.run(&[0u8; 14], 14), 0);
    /// ```
    pub fn builder(linktype: LinkType) -> ProgramBuilder {
        ProgramBuilder::new(linktype)
    }

    /// Load a classic BPF program in any of tcpdump's `-d`, `-dd` or `-ddd`
    /// formats; it must pass the (userland) verifier.
    ///
    /// ```
    /// let p = sluice_filter::Program::from_bpf_text("1\n6 0 0 65535\n").unwrap();
    /// assert_eq!(p.run(&[], 0), 65535);
    /// ```
    pub fn from_bpf_text(text: &str) -> Result<Program, Error> {
        Program::from_bpf(sluice_bpf::parse_program(text).map_err(Error::BpfText)?)
    }

    /// A classic BPF program given as instructions (a `struct bpf_program`
    /// from C, say); it must pass the (userland) verifier. Native code is
    /// made from the program lifted to the intermediate form.
    ///
    /// ```
    /// use sluice_bpf::Insn;
    /// let p = sluice_filter::Program::from_bpf(vec![Insn::stmt(0x06, 96)]).unwrap();
    /// assert_eq!(p.run(&[], 0), 96);
    /// assert!(sluice_filter::Program::from_bpf(vec![]).is_err());
    /// ```
    pub fn from_bpf(bpf: Vec<sluice_bpf::Insn>) -> Result<Program, Error> {
        sluice_bpf::Verifier::userland()
            .verify(&bpf)
            .map_err(Error::BpfVerify)?;
        Ok(Program {
            ir: sluice_bpf::lift(&bpf).ok(),
            bpf,
            native: Arc::default(),
        })
    }

    /// A program from an IR filter: the fast-disjunction rewrite when
    /// optimising, then classic BPF for the interpreter and `-d`.
    ///
    /// `pcap`: the filter is a pcap expression, refused when optimising as
    /// libpcap's optimiser refuses it (arithmetic it cannot do, a program
    /// it reduces to `ret #0`), judged on the predicate as written, or on
    /// `judged` where libpcap's optimiser sees another
    /// ([`sluice_pcap::Compiled::judged`]).
    pub(crate) fn from_ir(
        mut ir: sluice_ir::Filter,
        optimize: bool,
        pcap: bool,
        judged: Option<sluice_ir::Pred>,
    ) -> Result<Program, Error> {
        if optimize && pcap {
            let judged = judged.map(|p| sluice_ir::Filter::new(p, ir.accept));
            match sluice_cbpf::libpcap_refusal(judged.as_ref().unwrap_or(&ir)) {
                Ok(()) => {}
                Err(sluice_cbpf::LowerError::RejectsAll) => return Err(Error::RejectsAll),
                Err(e) => return Err(Error::Lower(e)),
            }
        }
        if optimize {
            ir.pred = sluice_ir::simplify::fast_disjunctions(ir.pred);
        }
        let bpf = match sluice_cbpf::lower_with(&ir, sluice_cbpf::Options { optimize }) {
            Ok(b) => b,
            Err(sluice_cbpf::LowerError::RejectsAll) => return Err(Error::RejectsAll),
            Err(e) => return Err(Error::Lower(e)),
        };
        Ok(Program {
            ir: Some(ir),
            bpf,
            native: Arc::default(),
        })
    }

    /// The classic BPF program.
    ///
    /// ```
    /// let p = sluice_filter::Program::from_bpf_text("1\n6 0 0 1\n").unwrap();
    /// assert_eq!(p.bpf().len(), 1);
    /// ```
    pub fn bpf(&self) -> &[sluice_bpf::Insn] {
        &self.bpf
    }

    /// The intermediate form: from an expression, or lifted from a BPF
    /// program whose control flow allows it.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// assert!(Program::builder(LinkType::RAW).expression("ip").unwrap().ir().is_some());
    /// ```
    pub fn ir(&self) -> Option<&sluice_ir::Filter> {
        self.ir.as_ref()
    }

    /// The filter prepared for a merged classifier: its intermediate form
    /// to merge, with its BPF program to run it whole if it cannot be
    /// merged (a program without an intermediate form runs whole).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let c = Program::builder(LinkType::EN10MB).build("tcp port 80").unwrap().for_merging();
    /// assert!(c.paths().is_some());
    /// ```
    pub fn for_merging(&self) -> sluice_classifier::merged::Compiled {
        use sluice_classifier::merged::Compiled;
        match &self.ir {
            Some(ir) => Compiled::with_program(ir.clone(), &self.bpf),
            None => Compiled::from_bpf(&self.bpf),
        }
    }

    /// Run the filter on one packet (captured bytes and wire length): the
    /// return value, 0 for reject.
    ///
    /// ```
    /// let p = sluice_filter::Program::from_bpf_text("1\n6 0 0 0\n").unwrap();
    /// assert_eq!(p.run(&[1, 2, 3], 3), 0);
    /// ```
    pub fn run(&self, pkt: &[u8], wirelen: u32) -> u32 {
        sluice_bpf::run(&self.bpf, pkt, wirelen)
    }

    /// Run the reference interpreter of the intermediate form (for expression
    /// programs); falls back to [`Program::run`] otherwise.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let p = Program::builder(LinkType::RAW).snaplen(9).expression("ip6").unwrap();
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
    /// use sluice_filter::{LinkType, Program};
    /// let p = Program::builder(LinkType::EN10MB).expression("tcp").unwrap();
    /// assert!(p.native().is_some());
    /// ```
    pub fn native(&self) -> Option<&sluice_native::NativeFilter> {
        self.native_or_why().ok()
    }

    /// The native code of the filter, or why there is none (and the BPF
    /// interpreter runs it instead): never swallowed, so a front end can
    /// say so.
    ///
    /// ```
    /// use sluice_filter::{NotNative, Program};
    /// // `ret A` after a load does not lift into the intermediate form.
    /// let p = Program::from_bpf_text("2\n48 0 0 0\n22 0 0 0\n").unwrap();
    /// assert!(matches!(p.native_or_why(), Err(NotNative::NoIr)));
    /// ```
    pub fn native_or_why(&self) -> Result<&sluice_native::NativeFilter, &NotNative> {
        self.native
            .get_or_init(|| {
                let ir = self.ir.as_ref().ok_or(Arc::new(NotNative::NoIr))?;
                sluice_native::NativeFilter::compile(ir)
                    .map_err(|e| Arc::new(NotNative::Codegen(e)))
            })
            .as_ref()
            .map_err(|e| &**e)
    }

    /// Run the native code on one packet; the interpreter where there is none.
    ///
    /// ```
    /// let p = sluice_filter::Program::from_bpf_text("1\n6 0 0 5\n").unwrap();
    /// assert_eq!(p.run_native(&[], 0), 5);
    /// ```
    #[inline]
    pub fn run_native(&self, pkt: &[u8], wirelen: u32) -> u32 {
        match self.native() {
            Some(n) => n.run(pkt, wirelen),
            None => self.run(pkt, wirelen),
        }
    }

    /// Run the filter with the given runner.
    ///
    /// ```
    /// use sluice_filter::{Program, Runner};
    /// let p = Program::from_bpf_text("1\n6 0 0 3\n").unwrap();
    /// assert_eq!(p.run_with(Runner::Native, &[], 0), 3);
    /// ```
    pub fn run_with(&self, runner: Runner, pkt: &[u8], wirelen: u32) -> u32 {
        match runner {
            Runner::Interp => self.run(pkt, wirelen),
            Runner::Native => self.run_native(pkt, wirelen),
            Runner::Reference => self.run_reference(pkt, wirelen),
        }
    }
}
