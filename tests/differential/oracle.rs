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
pub(crate) fn master() -> Option<&'static Libpcap> {
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
    // Host names resolve as libpcap resolves them (the system's resolver).
    let b = Program::builder(lt)
        .snaplen(65535)
        .resolver(std::sync::Arc::new(sluice::filter::SystemResolver));
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

/// Where libpcap's optimiser and sluice's model of it disagree on refusing
/// an expression both compile unoptimised: which way, and (for "rejects
/// all packets") the program that was built, which must then reject every
/// packet. libpcap's optimiser finds what it finds by the shape of its
/// code (edge dominators, pulling tests up chains of `and`s), which
/// sluice models only in part: `ip and ip6`, `tcp and udp`, `ether[0] & 0
/// = 1` and `ip and 1 = 0` are refused by both, `rarp and llc` and `ip and
/// len & 0 = 1` by neither; some contradictions through `or`s of
/// equalities differ (see sluice-cbpf's `refuse`).
pub(crate) enum RefusalDifference<'a> {
    /// libpcap refuses it as rejecting every packet; sluice's program.
    LibpcapRejectsAll(&'a Program),
    /// sluice refuses it as rejecting every packet; libpcap's program.
    SluiceRejectsAll(&'a LpProgram),
    /// One of them refuses its arithmetic (a divisor that folds to 0 in
    /// a block one of them finds unreachable).
    Arithmetic,
}

impl RefusalDifference<'_> {
    /// What differs, for the counts.
    pub(crate) fn why(&self) -> &'static str {
        match self {
            RefusalDifference::LibpcapRejectsAll(_) => {
                "libpcap's optimiser refuses as rejecting all packets, sluice's model does not"
            }
            RefusalDifference::SluiceRejectsAll(_) => {
                "sluice's model refuses as rejecting all packets, libpcap's optimiser does not"
            }
            RefusalDifference::Arithmetic => {
                "refusing arithmetic in a block only one optimiser reaches"
            }
        }
    }

    /// A packet the program that was built accepts (there should be none).
    pub(crate) fn accepted<'p>(&self, pkts: &'p [Vec<u8>]) -> Option<&'p Vec<u8>> {
        match self {
            RefusalDifference::LibpcapRejectsAll(p) => {
                pkts.iter().find(|k| p.run(k, k.len() as u32) != 0)
            }
            RefusalDifference::SluiceRejectsAll(p) => pkts.iter().find(|k| lp_run(p, k)),
            RefusalDifference::Arithmetic => None,
        }
    }
}

pub(crate) fn refusal_difference(c: &Compiled) -> Option<RefusalDifference<'_>> {
    if c.lp_unopt.is_err() || c.ours_unopt.is_err() {
        return None;
    }
    match (&c.lp_opt, &c.ours_opt) {
        (Err(e), Ok(ours)) if e.contains("rejects all packets") => {
            Some(RefusalDifference::LibpcapRejectsAll(ours))
        }
        (Ok(lp), Err(sluice::Error::RejectsAll)) => Some(RefusalDifference::SluiceRejectsAll(lp)),
        (Err(_), Ok(_)) | (Ok(_), Err(_)) => Some(RefusalDifference::Arithmetic),
        _ => None,
    }
}

/// Compares one expression on one packet (or only compilation when `pkt`
/// is `None`); differences in refusing when optimising are
/// [`refusal_difference`]'s.
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
        // Refused when optimising: the engines are the other two.
        Err(_) => unopt,
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

/// Whether libpcap's program stores into a register its prologue filled
/// (the offsets of variable-length link headers, computed once before the
/// rest): libpcap's register allocator can hand a register freed by an
/// earlier relation's temporaries to an offset, whose prologue value the
/// relation then overwrites (`radio[0] = 237 or dir tods` on radiotap reads
/// the frame control byte at 237 + 1). sluice does not reproduce this.
///
/// The prologue is everything before the first `ldx M[k]` that feeds an
/// indirect load.
pub(crate) fn reuses_offset_register(p: &LpProgram) -> bool {
    const ST: u16 = 0x02;
    const STX: u16 = 0x03;
    const LDX_MEM: u16 = 0x61;
    let insns = p.insns();
    let boundary = insns
        .windows(2)
        .position(|w| w[0].code == LDX_MEM && matches!(w[1].code, 0x40 | 0x48 | 0x50))
        .unwrap_or(insns.len());
    let filled: Vec<u32> = insns[..boundary]
        .iter()
        .filter(|i| i.code == ST || i.code == STX)
        .map(|i| i.k)
        .collect();
    !filled.is_empty()
        && insns[boundary..]
            .iter()
            .any(|i| (i.code == ST || i.code == STX) && filled.contains(&i.k))
}

/// Whether libpcap's register allocator may give a link-offset register a
/// relation's temporaries just freed: on links whose offsets libpcap
/// computes in a prologue (802.11, with or without a radio header, and
/// pflog), a relation followed by another primitive (the offsets are
/// allocated when first used, after the relation freed its registers:
/// `67 <= 0 or byte 26 & 222` on PPI reads byte 26 of the header at 0).
pub(crate) fn may_reuse_offset_register(text: &str, lt: LinkType) -> bool {
    use sluice::pcap::ast::Expr;
    fn leaves<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
        match e {
            Expr::And(v) | Expr::Or(v) => v.iter().for_each(|x| leaves(x, out)),
            Expr::Not(x, _) => leaves(x, out),
            e => out.push(e),
        }
    }
    let prologue = prologue_link(lt);
    let Ok(e) = sluice::pcap::parser::parse(text) else {
        return false;
    };
    let mut v = Vec::new();
    leaves(&e, &mut v);
    prologue
        && v.iter()
            .position(|x| matches!(x, Expr::Rel(..)))
            .is_some_and(|i| i + 1 < v.len())
}
