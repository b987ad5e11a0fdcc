//! How to compile a filter: link type, snapshot length, optimisation, the
//! capture's byte order and where `LANG:@path` files are read from.

use crate::{Error, LinkType, Program, Spec};
use sluice_pcap::resolve::Resolver;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    pub(crate) offline: bool,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) resolver: Option<Arc<dyn Resolver>>,
    pub(crate) netmask: Option<u32>,
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
            offline: false,
            dir: None,
            resolver: None,
            netmask: None,
        }
    }

    /// The network's netmask, for `ip broadcast` (libpcap's
    /// `pcap_compile` argument; `None`, the default, refuses it).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::RAW);
    /// assert!(b.expression("ip broadcast").is_err());
    /// assert!(b.netmask(Some(0xffff_ff00)).expression("ip broadcast").is_ok());
    /// ```
    pub fn netmask(mut self, netmask: Option<u32>) -> ProgramBuilder {
        self.netmask = netmask;
        self
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

    /// The packets come from a capture file (`tcpdump -r`), not from a
    /// handle without one (`tcpdump -y`, the default): on the loopback links
    /// (NULL, LOOP, ENC, PFLOG) libpcap then accepts every BSD's IPv6
    /// address family, on NULL and ENC in either byte order (see
    /// [`sluice_pcap::Options`]).
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::LOOP);
    /// let freebsd = [0, 0, 0, 28];
    /// assert_eq!(b.build("ip6").unwrap().run(&freebsd, 4), 0);
    /// assert_ne!(b.offline(true).build("ip6").unwrap().run(&freebsd, 4), 0);
    /// ```
    pub fn offline(mut self, offline: bool) -> ProgramBuilder {
        self.offline = offline;
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

    /// Resolve host names in pcap expressions (`host NAME`) with this
    /// resolver, as libpcap does when it compiles ([`SystemResolver`]:
    /// `/etc/hosts` and DNS as the system is configured). Without one,
    /// names are refused.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program, SystemResolver};
    /// use std::sync::Arc;
    /// let b = Program::builder(LinkType::EN10MB);
    /// assert!(b.build("host localhost").is_err());
    /// assert!(b.resolver(Arc::new(SystemResolver)).build("ip host localhost").is_ok());
    /// ```
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> ProgramBuilder {
        self.resolver = Some(resolver);
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
        let options = sluice_pcap::Options {
            snaplen: self.snaplen,
            capture_big_endian: self.capture_big_endian,
            offline: self.offline,
            resolver: self.resolver.clone(),
            netmask: self.netmask,
            optimize: self.optimize,
        };
        let c = sluice_pcap::compile_options(text, self.linktype, &options)
            .map_err(Error::Expression)?;
        // Where libpcap turns its optimiser off, so does sluice: no
        // folding, no "expression rejects all packets".
        Program::from_ir(c.filter, c.optimize, true, c.judged)
    }
}

/// The system's resolver (`getaddrinfo`: `/etc/hosts`, DNS, whatever
/// `/etc/nsswitch.conf` says), for [`ProgramBuilder::resolver`].
///
/// ```
/// use sluice_filter::SystemResolver;
/// use sluice_pcap::resolve::Resolver;
/// let a = SystemResolver.host("localhost").unwrap();
/// assert!(a.iter().any(|a| a.is_loopback()));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn host(&self, name: &str) -> Result<Vec<std::net::IpAddr>, String> {
        use std::net::ToSocketAddrs;
        let found = (name, 0u16).to_socket_addrs().map_err(|e| {
            let s = e.to_string();
            // "failed to lookup address information: Name or service not known"
            s.rsplit(": ").next().unwrap_or(&s).to_string()
        })?;
        let mut addrs: Vec<std::net::IpAddr> = Vec::new();
        for a in found {
            if !addrs.contains(&a.ip()) {
                addrs.push(a.ip());
            }
        }
        if addrs.is_empty() {
            return Err("no address".into());
        }
        Ok(addrs)
    }
}
