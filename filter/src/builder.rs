//! How to compile a filter: link type, snapshot length, optimisation, the
//! capture's byte order and where `LANG:@path` files are read from.

use crate::{Error, LinkType, Program, Spec};
use std::path::{Path, PathBuf};

/// How to compile a filter for a link type, made with
/// [`Program::builder`]; then [`ProgramBuilder::build`] compiles filter
/// text in any language (named by its prefix) and
/// [`ProgramBuilder::expression`] a pcap expression alone.
///
/// The defaults are tcpdump's: snapshot length 262144 (what an accepted
/// packet returns), optimised, the capture written in this host's byte
/// order (it matters on NULL and ENC links, where the address family is in
/// the capturing host's order), `@path` relative to the current directory.
///
/// ```
/// use sluice_filter::{LinkType, Program};
/// let p = Program::builder(LinkType::NULL)
///     .snaplen(9)
///     .optimize(false)
///     .capture_big_endian(true)
///     .build("ip")
///     .unwrap();
/// assert_eq!(p.run(&[0, 0, 0, 2], 4), 9);
/// ```
#[derive(Clone, Debug)]
pub struct ProgramBuilder {
    pub(crate) linktype: LinkType,
    pub(crate) snaplen: u32,
    pub(crate) optimize: bool,
    pub(crate) capture_big_endian: bool,
    pub(crate) dir: Option<PathBuf>,
}

impl ProgramBuilder {
    /// The defaults for a link type (the same as [`Program::builder`]).
    ///
    /// ```
    /// use sluice_filter::{LinkType, ProgramBuilder};
    /// let p = ProgramBuilder::new(LinkType::RAW).expression("ip").unwrap();
    /// assert_eq!(p.run(&[0x45], 1), 262144);
    /// ```
    pub fn new(linktype: LinkType) -> ProgramBuilder {
        ProgramBuilder {
            linktype,
            snaplen: 262_144,
            optimize: true,
            capture_big_endian: cfg!(target_endian = "big"),
            dir: None,
        }
    }

    /// What an accepted packet returns (the capture's snapshot length).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let p = Program::builder(LinkType::RAW).snaplen(96).expression("ip").unwrap();
    /// assert_eq!(p.run(&[0x45], 1), 96);
    /// ```
    pub fn snaplen(mut self, snaplen: u32) -> ProgramBuilder {
        self.snaplen = snaplen;
        self
    }

    /// Optimise (tcpdump's default; `-O` turns it off).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::EN10MB);
    /// let opt = b.clone().build("ip or ip").unwrap();
    /// let unopt = b.optimize(false).build("ip or ip").unwrap();
    /// assert!(opt.bpf().len() < unopt.bpf().len());
    /// ```
    pub fn optimize(mut self, optimize: bool) -> ProgramBuilder {
        self.optimize = optimize;
        self
    }

    /// The byte order the capture was written in (the capturing host's).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let p = Program::builder(LinkType::NULL).capture_big_endian(false).build("ip").unwrap();
    /// assert_ne!(p.run(&[2, 0, 0, 0], 4), 0);
    /// ```
    pub fn capture_big_endian(mut self, big_endian: bool) -> ProgramBuilder {
        self.capture_big_endian = big_endian;
        self
    }

    /// Where relative `LANG:@path` files are read from (`None`: the current
    /// directory).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    /// let b = Program::builder(LinkType::EN10MB).dir(Some(&examples));
    /// assert!(b.build("dpf:@dpf-figure1.dpf").is_ok());
    /// ```
    pub fn dir(mut self, dir: Option<&Path>) -> ProgramBuilder {
        self.dir = dir.map(Path::to_path_buf);
        self
    }

    /// Compile a filter in any language, named by its prefix (see
    /// [`Language`](crate::Language)); no prefix is a pcap expression.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::EN10MB).snaplen(1);
    /// assert_eq!(b.build("bpf: 1; 6 0 0 7").unwrap().run(&[], 0), 7);
    /// let e = b.build("cspf: pushword P[6] | frob").unwrap_err();
    /// assert!(e.to_string().contains("column 23"), "{e}");
    /// ```
    pub fn build(&self, text: &str) -> Result<Program, Error> {
        Spec::parse(text, self.dir.as_deref())?.compile(self)
    }

    /// Compile a pcap expression (no prefix, no `@path`: the text is the
    /// expression).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::EN10MB);
    /// assert!(b.expression("tcp port 80").is_ok());
    /// assert!(b.expression("pcap: tcp").is_err());
    /// ```
    pub fn expression(&self, text: &str) -> Result<Program, Error> {
        let ir =
            sluice_pcap::compile_for(text, self.linktype, self.snaplen, self.capture_big_endian)
                .map_err(Error::Expression)?;
        Program::from_ir(ir, self.optimize)
    }
}
