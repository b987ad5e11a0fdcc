//! The oracle (libpcap master, loaded at run time), the comparison with
//! sluice, and shrinking a mismatch.

use super::*;
use sluice_libpcap::{Handle, Libpcap};
use sluice_testsupport::savefile;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Where libpcap's handle comes from, which matters on the loopback links
/// (NULL, LOOP, ENC, PFLOG): libpcap compiles for the host's address family
/// without a file (`pcap_open_dead`, `tcpdump -y`) and for every BSD's, in
/// either byte order, on a capture file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Origin {
    Dead,
    Pcap { big_endian: bool },
    Pcapng { big_endian: bool },
}

impl Origin {
    pub(crate) const FILES: [Origin; 4] = [
        Origin::Pcap { big_endian: false },
        Origin::Pcap { big_endian: true },
        Origin::Pcapng { big_endian: false },
        Origin::Pcapng { big_endian: true },
    ];

    /// The byte order of the file, if there is one.
    pub(crate) fn file_big_endian(self) -> Option<bool> {
        match self {
            Origin::Dead => None,
            Origin::Pcap { big_endian } | Origin::Pcapng { big_endian } => Some(big_endian),
        }
    }
}

/// Link types on which the origin matters.
pub(crate) fn origin_matters(lt: LinkType) -> bool {
    matches!(
        lt,
        LinkType::NULL | LinkType::LOOP | LinkType::ENC | LinkType::PFLOG
    )
}

/// libpcap master, loaded once for the whole test binary.
fn master() -> Option<&'static Libpcap> {
    static MASTER: OnceLock<Option<Libpcap>> = OnceLock::new();
    MASTER
        .get_or_init(|| sluice_testsupport::master::load("differential tests"))
        .as_ref()
}

/// libpcap master with a handle per (link type, origin).
pub(crate) struct Oracle {
    handles: HashMap<(usize, Origin), Handle<'static>>,
    pub(crate) version: String,
}

impl Oracle {
    pub(crate) fn new() -> Option<Oracle> {
        let lib = master()?;
        let dir = std::env::temp_dir().join(format!("sluice-differential-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut handles = HashMap::new();
        for (i, &(lt, dlt)) in LINKS.iter().enumerate() {
            let h = lib.open_dead(dlt as u32, 65535).expect("a dead handle");
            handles.insert((i, Origin::Dead), h);
            if !origin_matters(lt) {
                continue;
            }
            for origin in Origin::FILES {
                let (bytes, name) = match origin {
                    Origin::Pcap { big_endian } => (
                        savefile::pcap(lt.number(), big_endian, &[]),
                        format!("{dlt}-{big_endian}.pcap"),
                    ),
                    Origin::Pcapng { big_endian } => (
                        savefile::pcapng(lt.number() as u16, big_endian, &[]),
                        format!("{dlt}-{big_endian}.pcapng"),
                    ),
                    Origin::Dead => unreachable!(),
                };
                let path = dir.join(name);
                std::fs::write(&path, bytes).expect("a savefile");
                let h = lib.open_offline(&path).expect("libpcap opens the savefile");
                assert_eq!(h.datalink(), dlt, "{}", path.display());
                handles.insert((i, origin), h);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        Some(Oracle {
            handles,
            version: lib.version(),
        })
    }
}

pub(crate) struct Compiled {
    pub(crate) lp_opt: Result<LpProgram, String>,
    pub(crate) lp_unopt: Result<LpProgram, String>,
    pub(crate) ours_opt: Result<Program, sluice::Error>,
    pub(crate) ours_unopt: Result<Program, sluice::Error>,
}

/// One of libpcap's programs.
pub(crate) type LpProgram = sluice_libpcap::Program<'static>;

/// libpcap's verdict: accepted or not (the snapshot length is not compared).
pub(crate) fn lp_run(p: &LpProgram, pkt: &[u8]) -> bool {
    p.run(pkt, pkt.len() as u32) != 0
}

/// sluice's builder for a link type as libpcap's handle of that origin
/// compiles.
pub(crate) fn builder(lt: LinkType, origin: Origin) -> sluice::ProgramBuilder {
    let b = Program::builder(lt).snaplen(65535);
    match origin.file_big_endian() {
        Some(be) => b.offline(true).capture_big_endian(be),
        None => b,
    }
}

pub(crate) fn compile(o: &Oracle, link: usize, origin: Origin, text: &str) -> Compiled {
    let h = &o.handles[&(link, origin)];
    let lt = LINKS[link].0;
    let lp = |opt: bool| h.compile(text, opt).map_err(|e| e.to_string());
    Compiled {
        lp_opt: lp(true),
        lp_unopt: lp(false),
        ours_opt: builder(lt, origin).expression(text),
        ours_unopt: builder(lt, origin).optimize(false).expression(text),
    }
}

/// What went wrong for one expression, if anything.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Problem {
    /// libpcap and sluice disagree on whether the expression compiles.
    Compile(String),
    /// Verdicts differ on a packet.
    Verdict {
        pkt: Vec<u8>,
        ours: u32,
        lp_opt: Option<bool>,
        lp_unopt: bool,
    },
    /// sluice's engines disagree on a packet.
    Engines {
        pkt: Vec<u8>,
        opt: u32,
        unopt: u32,
        reference: u32,
    },
}

impl Problem {
    pub(crate) fn same_kind(&self, other: &Problem) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
    }
}

/// Compile differences that are known and not sluice bugs against libpcap
/// master (the reference), or known sluice gaps: the reason, to count them.
pub(crate) fn known_compile_difference(c: &Compiled) -> Option<&'static str> {
    match (&c.lp_unopt, &c.ours_unopt) {
        (Ok(_), Err(e)) => {
            let e = e.to_string();
            if e.contains("yet") {
                Some("sluice: not built yet")
            } else if e.contains("'pppoes' not supported") {
                // Master refuses `pppoes` where the link is not Ethernet
                // (also after another `pppoes`); 1.10.3 compiles it.
                Some("pppoes off Ethernet (1.10.3 compiles, master refuses)")
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Compares one expression on one packet (or only compilation when `pkt`
/// is `None`).
pub(crate) fn check(c: &Compiled, pkt: Option<&[u8]>) -> Option<Problem> {
    let lp_ok = c.lp_unopt.is_ok();
    let ours_ok = c.ours_unopt.is_ok();
    if lp_ok != ours_ok && known_compile_difference(c).is_none() {
        let why = match (&c.lp_unopt, &c.ours_unopt) {
            (Err(e), _) => format!("libpcap refuses ({e}), sluice compiles"),
            (_, Err(e)) => format!("libpcap compiles, sluice refuses ({e})"),
            _ => unreachable!(),
        };
        return Some(Problem::Compile(why));
    }
    let (Ok(lpu), Ok(ou)) = (&c.lp_unopt, &c.ours_unopt) else {
        return None;
    };
    let pkt = pkt?;
    let wl = pkt.len() as u32;
    let unopt = ou.run(pkt, wl);
    let reference = ou.run_reference(pkt, wl);
    let opt = match &c.ours_opt {
        Ok(p) => p.run(pkt, wl),
        Err(sluice::Error::RejectsAll) => 0,
        Err(_) => unopt ^ 1,
    };
    if opt != unopt || unopt != reference {
        return Some(Problem::Engines {
            pkt: pkt.to_vec(),
            opt,
            unopt,
            reference,
        });
    }
    let lp_u = lp_run(lpu, pkt);
    let lp_o = c.lp_opt.as_ref().ok().map(|p| lp_run(p, pkt));
    let ours = unopt != 0;
    if ours != lp_u && Some(ours) != lp_o {
        return Some(Problem::Verdict {
            pkt: pkt.to_vec(),
            ours: unopt,
            lp_opt: lp_o,
            lp_unopt: lp_u,
        });
    }
    None
}

/// Shrinks a failing case: shorter packets, zeroed bytes, smaller expressions.
pub(crate) fn shrink(
    o: &Oracle,
    link: usize,
    origin: Origin,
    mut ex: Ex,
    mut prob: Problem,
) -> (Ex, Problem) {
    let pkt_of = |p: &Problem| match p {
        Problem::Verdict { pkt, .. } | Problem::Engines { pkt, .. } => Some(pkt.clone()),
        Problem::Compile(_) => None,
    };
    let start = Instant::now();
    let mut progress = true;
    while progress && start.elapsed() < Duration::from_secs(10) {
        progress = false;
        // smaller expression, same packet
        for cand in ex.shrinks() {
            let c = compile(o, link, origin, &cand.text());
            let pkt = pkt_of(&prob);
            if let Some(p) = check(&c, pkt.as_deref()) {
                if p.same_kind(&prob) {
                    ex = cand;
                    prob = p;
                    progress = true;
                    break;
                }
            }
        }
        let Some(pkt) = pkt_of(&prob) else {
            continue;
        };
        let c = compile(o, link, origin, &ex.text());
        // shorter packet
        for n in 0..pkt.len() {
            if let Some(p) = check(&c, Some(&pkt[..n])) {
                if p.same_kind(&prob) {
                    prob = p;
                    progress = true;
                    break;
                }
            }
        }
        // zeroed bytes
        let pkt = pkt_of(&prob).unwrap();
        for i in 0..pkt.len() {
            if pkt[i] != 0 {
                let mut q = pkt.clone();
                q[i] = 0;
                if let Some(p) = check(&c, Some(&q)) {
                    if p.same_kind(&prob) {
                        prob = p;
                        progress = true;
                    }
                }
            }
        }
    }
    (ex, prob)
}

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn describe(ex: &Ex, link: usize, origin: Origin, prob: &Problem) -> String {
    let lt = LINKS[link].0;
    let mut s = format!("expression {:?} on {lt} ({origin:?}): ", ex.text());
    match prob {
        Problem::Compile(why) => s.push_str(why),
        Problem::Verdict {
            pkt,
            ours,
            lp_opt,
            lp_unopt,
        } => {
            let _ = write!(
                s,
                "sluice returns {ours}, libpcap accepts: optimised {lp_opt:?}, unoptimised {lp_unopt}; packet ({} bytes) {}",
                pkt.len(),
                hex(pkt)
            );
        }
        Problem::Engines {
            pkt,
            opt,
            unopt,
            reference,
        } => {
            let _ = write!(
                s,
                "sluice engines disagree: optimised {opt}, unoptimised {unopt}, reference {reference}; packet ({} bytes) {}",
                pkt.len(),
                hex(pkt)
            );
        }
    }
    s
}

/// Whether some primitive of the expression is constant on this link (`ip`
/// on IPV4, `arp` on RAW or NULL): there libpcap 1.10.3 and master differ.
pub(crate) fn has_constant_primitive(ex: &Ex, lt: LinkType) -> bool {
    match ex {
        Ex::Not(x) => has_constant_primitive(x, lt),
        Ex::Bin(_, a, b, _) => has_constant_primitive(a, lt) || has_constant_primitive(b, lt),
        Ex::Leaf(l) => l
            .replace("src or dst ", "src ")
            .replace("src and dst ", "src ")
            .split([' ', '(', ')'])
            .collect::<Vec<_>>()
            .join(" ")
            .split(" and ")
            .flat_map(|x| x.split(" or "))
            .map(|x| x.trim().trim_start_matches("not ").trim())
            .any(|x| {
                matches!(
                    sluice::pcap::compile(x, lt, 65535).map(|f| f.pred),
                    Ok(sluice::ir::Pred::True | sluice::ir::Pred::False)
                )
            }),
    }
}
