//! The oracle (libpcap through the `pcap` crate), the comparison with
//! sluice, and shrinking a mismatch.

use super::*;

pub(crate) struct Oracle {
    pub(crate) caps: Vec<Capture<Dead>>,
}

impl Oracle {
    pub(crate) fn new() -> Option<Oracle> {
        let mut caps = Vec::new();
        for &(_, dlt) in LINKS {
            match Capture::dead(Linktype(dlt)) {
                Ok(c) => caps.push(c),
                Err(e) => {
                    println!("skipping: libpcap cannot open a dead handle: {e}");
                    return None;
                }
            }
        }
        Some(Oracle { caps })
    }
}

pub(crate) struct Compiled {
    pub(crate) lp_opt: Option<BpfProgram>,
    pub(crate) lp_unopt: Result<BpfProgram, String>,
    pub(crate) ours_opt: Result<Program, sluice::Error>,
    pub(crate) ours_unopt: Result<Program, sluice::Error>,
}

pub(crate) fn compile(o: &Oracle, link: usize, text: &str) -> Compiled {
    let cap = &o.caps[link];
    let lt = LINKS[link].0;
    Compiled {
        lp_opt: cap.compile(text, true).ok(),
        lp_unopt: cap.compile(text, false).map_err(|e| e.to_string()),
        ours_opt: Program::builder(lt).snaplen(65535).expression(text),
        ours_unopt: Program::builder(lt)
            .snaplen(65535)
            .optimize(false)
            .expression(text),
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
    let lp_u = lpu.filter(pkt);
    let lp_o = c.lp_opt.as_ref().map(|p| p.filter(pkt));
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
pub(crate) fn shrink(o: &Oracle, link: usize, mut ex: Ex, mut prob: Problem) -> (Ex, Problem) {
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
            let c = compile(o, link, &cand.text());
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
        let c = compile(o, link, &ex.text());
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

pub(crate) fn describe(ex: &Ex, link: usize, prob: &Problem) -> String {
    let lt = LINKS[link].0;
    let mut s = format!("expression {:?} on {lt}: ", ex.text());
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
