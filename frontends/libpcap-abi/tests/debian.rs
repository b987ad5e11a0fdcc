//! Debian's own programs, unmodified, on the candidate library and on the
//! system libpcap (the same binary, with and without `LD_LIBRARY_PATH`):
//!
//! - `tcpdump -r` printing every corpus capture (`-n -vvv -e`, `-c 3`,
//!   `-tttt`, `-x` from standard input) and copying it (`-w -`): the same
//!   standard output, standard error and exit status;
//! - `tcpdump -r CAPTURE -w - EXPR` for every corpus expression on seven
//!   varied Ethernet captures: byte-identical output; refused expressions
//!   (`expressions-reject.tsv`) refused alike, with the same message;
//! - `tcpdump -y LINKTYPE -d/-dd/-ddd EXPR`: the compiler may emit another
//!   program, so the candidate's `-ddd` program is run by the system
//!   libpcap's `bpf_filter` over packets of that link type and must give
//!   libpcap's own program's verdicts (zero or not); its `-d` and `-dd`
//!   must be that same program as libpcap's `bpf_dump` prints it;
//! - `ngrep -I` (`-q`, `-x`, `-t`, `-O`): the same output and dump file;
//! - `tests/py/pcapy_read.py` under Debian's python3-pcapy and under
//!   pcapy-ng (built from source so that it links the system libpcap): the
//!   same transcript and dump files.
//!
//! Where libpcap 1.10.3 (Debian's) and libpcap master give different
//! verdicts (3 corpus expressions, from the oracle files), the candidate
//! may give either.
#![forbid(unsafe_code)]

mod common;

use common::{
    abi_dir, both, build_c, have, jobs, parallel, report, resolved_libpcap, run, same_file,
    same_run, scratch, skip, Lib, Ran,
};
use sluice_testsupport::corpus;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

/// The longest any one program may run.
const LIMIT: Duration = Duration::from_secs(30);

/// Whether `program` (from Debian package `package`) is here; says why
/// not (see [`skip`]).
fn tool(test: &str, program: &str, package: &str) -> bool {
    if have(program) {
        return true;
    }
    skip(
        test,
        &format!("{program} missing (apt-get install {package})"),
    );
    false
}

/// The binary really loads the candidate under `LD_LIBRARY_PATH`.
fn loads_candidate(binary: &str) {
    let on = resolved_libpcap(Lib::Candidate, binary);
    assert!(
        on.contains(abi_dir().to_str().unwrap()),
        "{binary} does not load the candidate: {on}"
    );
}

/// The corpus captures, or `None` after saying the corpus is absent.
fn captures(test: &str) -> Option<Vec<PathBuf>> {
    let caps = corpus::pcaps();
    if caps.is_empty() {
        corpus::skipped(test);
        return None;
    }
    Some(caps)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// One program run to compare: its arguments and standard input.
struct Job {
    program: &'static str,
    args: Vec<String>,
    stdin: Option<PathBuf>,
}

impl Job {
    fn new(program: &'static str, args: &[&str]) -> Job {
        Job {
            program,
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
        }
    }
    fn what(&self) -> String {
        let stdin = match &self.stdin {
            Some(p) => format!(" < {}", p.display()),
            None => String::new(),
        };
        format!("{} {:?}{stdin}", self.program, self.args)
    }
    fn run_both(&self) -> (Ran, Ran) {
        both(
            |lib| lib.command(self.program, &self.args),
            self.stdin.as_deref(),
            LIMIT,
        )
    }
}

/// Run every job on both libraries, a few at a time; fail listing the
/// differences. Returns the system libpcap's runs, for sanity checks.
fn compare_all(what: &str, jobs_: &[Job]) -> Vec<Ran> {
    let results = parallel(jobs_, jobs(), |j| {
        let (c, sys) = j.run_both();
        (same_run(&j.what(), &c, &sys).err(), sys)
    });
    let failures: Vec<String> = results.iter().filter_map(|r| r.0.clone()).collect();
    report(what, jobs_.len(), &failures);
    results.into_iter().map(|r| r.1).collect()
}

#[test]
fn tcpdump_prints_every_capture_alike() {
    if !tool("tcpdump -r", "tcpdump", "tcpdump") {
        return;
    }
    let Some(caps) = captures("tcpdump -r") else {
        return;
    };
    loads_candidate("/usr/bin/tcpdump");
    let mut jobs_ = Vec::new();
    for (i, c) in caps.iter().enumerate() {
        let f = s(c);
        jobs_.push(Job::new("tcpdump", &["-n", "-vvv", "-e", "-r", f]));
        jobs_.push(Job::new("tcpdump", &["-n", "-r", f, "-c", "3"]));
        if i % 8 == 0 {
            jobs_.push(Job::new("tcpdump", &["-tttt", "-n", "-r", f]));
            let mut j = Job::new("tcpdump", &["-n", "-x", "-r", "-"]);
            j.stdin = Some(c.clone());
            jobs_.push(j);
        }
    }
    // Files that are not captures: the same refusal, in the same words.
    let dir = scratch("tcpdump-bad");
    std::fs::write(dir.join("empty"), b"").unwrap();
    std::fs::write(dir.join("text"), b"not a capture at all\n").unwrap();
    std::fs::write(dir.join("short"), [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0]).unwrap();
    for bad in ["empty", "text", "short", "missing"] {
        jobs_.push(Job::new("tcpdump", &["-n", "-r", s(&dir.join(bad))]));
    }
    jobs_.push(Job::new("tcpdump", &["-n", "-r", s(&dir)]));
    // Name resolution (no -n) is left out: it asks DNS, slowly.
    let sys = compare_all("tcpdump -r", &jobs_);
    let printed = sys
        .iter()
        .filter(|r| r.ok() && !r.stdout.is_empty())
        .count();
    assert!(
        printed * 10 > sys.len() * 9,
        "the baseline printed little: {printed}"
    );
}

#[test]
fn tcpdump_copies_every_capture_alike() {
    if !tool("tcpdump -w", "tcpdump", "tcpdump") {
        return;
    }
    let Some(caps) = captures("tcpdump -w") else {
        return;
    };
    // pcapng captures come out as pcap: the writer's header and records.
    let jobs_: Vec<Job> = caps
        .iter()
        .map(|c| Job::new("tcpdump", &["-r", s(c), "-w", "-"]))
        .collect();
    let sys = compare_all("tcpdump -r CAPTURE -w -", &jobs_);
    assert!(sys.iter().all(|r| r.ok() && r.stdout.len() >= 24));
}

/// Varied Ethernet captures for the expression tests: VLAN (single and
/// double), GRE, PIM, MPTCP, DHCPv4 and v6, and a pcapng file.
const EXPRESSION_CAPTURES: &[&str] = &[
    "pim-packet-assortment.pcap",
    "mptcp-v0.pcap",
    "of13_ericsson.pcapng",
    "various_gre.pcap",
    "rpvstp-trunk-native-vid5.pcap",
    "dhcpv4v6-rfc5970-rfc8572.pcap",
    "802.1ad_QinQ.pcap",
];

/// The corpus expressions, numbered from 1 as in the oracle files.
fn expressions() -> Vec<(usize, String)> {
    corpus::lines("expressions.txt")
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .filter(|(_, e)| !e.trim().is_empty())
        .map(|(i, e)| (i + 1, e))
        .collect()
}

/// The verdicts of a libpcap version (`master` or `1.10.3`) for every
/// capture and expression line: `(capture, line) -> "0110..."` (`ERR`
/// where it refuses).
fn oracle(version: &str) -> HashMap<(String, usize), String> {
    let path = corpus::path(&format!("oracle/verdicts-{version}.tsv.gz")).unwrap();
    let o = Command::new("zcat").arg(&path).output().expect("run zcat");
    assert!(o.status.success(), "zcat {}", path.display());
    String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let verdicts = if f.get(2) == Some(&"OK") {
                f.get(3).copied().unwrap_or("")
            } else {
                "ERR"
            };
            Some(((f[0].to_string(), f[1].parse().ok()?), verdicts.to_string()))
        })
        .collect()
}

/// Master's verdicts where they differ from Debian's libpcap 1.10.3.
fn master_differs() -> &'static HashMap<(String, usize), String> {
    static M: OnceLock<HashMap<(String, usize), String>> = OnceLock::new();
    M.get_or_init(|| {
        let old = oracle("1.10.3");
        oracle("master")
            .into_iter()
            .filter(|(k, v)| old.get(k) != Some(v))
            .collect()
    })
}

/// Whether a pcap file (as bytes) holds exactly the packets of `capture`
/// that `verdicts` accept.
fn holds_accepted(pcap: &[u8], capture: &Path, verdicts: &str, tmp: &Path) -> bool {
    std::fs::write(tmp, pcap).unwrap();
    let got: Vec<(Vec<u8>, u32)> = corpus::packets(tmp)
        .into_iter()
        .map(|p| (p.data, p.wirelen))
        .collect();
    let want: Vec<(Vec<u8>, u32)> = corpus::packets(capture)
        .into_iter()
        .zip(verdicts.chars())
        .filter(|(_, v)| *v == '1')
        .map(|(p, _)| (p.data, p.wirelen))
        .collect();
    got == want
}

#[test]
fn tcpdump_writes_what_libpcap_keeps() {
    if !tool("tcpdump EXPR", "tcpdump", "tcpdump") {
        return;
    }
    let Some(_) = captures("tcpdump EXPR") else {
        return;
    };
    let pcaps = corpus::path("pcaps").unwrap();
    let exprs = expressions();
    assert!(exprs.len() >= 500, "{} expressions", exprs.len());
    let dir = scratch("tcpdump-expr");
    let mut work = Vec::new();
    for cap in EXPRESSION_CAPTURES {
        for (line, e) in &exprs {
            work.push((*cap, *line, e.as_str()));
        }
    }
    let differs = master_differs();
    let results = parallel(&work, jobs(), |(cap, line, e)| {
        let path = pcaps.join(cap);
        let args = ["-r", s(&path), "-w", "-", e];
        let (c, sys) = both(|lib| lib.command("tcpdump", &args), None, LIMIT);
        let what = format!("tcpdump -r {cap} -w - '{e}' (expressions.txt:{line})");
        let verdict = match same_run(&what, &c, &sys) {
            Ok(()) => Ok(()),
            Err(err) => match differs.get(&(cap.to_string(), *line)) {
                // libpcap master's verdicts are right too.
                Some(master) if c.ok() && c.stderr == sys.stderr => {
                    let tmp = dir.join(format!("{cap}-{line}.pcap"));
                    if holds_accepted(&c.stdout, &path, master, &tmp) {
                        Ok(())
                    } else {
                        Err(err)
                    }
                }
                _ => Err(err),
            },
        };
        (verdict, sys.ok())
    });
    let failures: Vec<String> = results.iter().filter_map(|r| r.0.clone().err()).collect();
    let accepted = results.iter().filter(|r| r.1).count();
    // Every corpus expression compiles for Ethernet on libpcap 1.10.3.
    assert!(
        accepted * 100 >= results.len() * 99,
        "the baseline accepted only {accepted} of {}",
        results.len()
    );
    report("tcpdump -r CAPTURE -w - EXPR", work.len(), &failures);
}

#[test]
fn tcpdump_refuses_what_libpcap_refuses() {
    if !tool("tcpdump refusals", "tcpdump", "tcpdump") {
        return;
    }
    let Some(lines) = corpus::lines("expressions-reject.tsv") else {
        corpus::skipped("tcpdump refusals");
        return;
    };
    let cap = corpus::path("pcaps/mptcp-v0.pcap").unwrap();
    let jobs_: Vec<Job> = lines
        .iter()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .filter(|e| !e.is_empty())
        .map(|e| Job::new("tcpdump", &["-r", s(&cap), "-w", "-", e]))
        .collect();
    assert!(jobs_.len() >= 300);
    let sys = compare_all("tcpdump refusing an expression", &jobs_);
    let refused = sys.iter().filter(|r| !r.ok()).count();
    assert!(
        refused * 10 >= sys.len() * 9,
        "the baseline refused only {refused}"
    );
}

/// Packets as bytes and length on the wire.
type Frames = Vec<(Vec<u8>, u32)>;

/// Packets of one link type to run compiled programs on, by capture.
struct Target {
    /// tcpdump's `-y` name.
    name: &'static str,
    /// Its DLT value.
    dlt: u32,
    /// Captures (name, packets as bytes and wire length).
    captures: Vec<(String, Frames)>,
    /// Every how many corpus expressions one is tried.
    every: usize,
}

/// IPv4 and IPv6 packets of the Ethernet corpus, without their link
/// header: `(ethertype, payload, wire length less 14)`.
fn ip_payloads() -> Vec<(u16, Vec<u8>, u32)> {
    let mut v = Vec::new();
    for c in corpus::pcaps() {
        for p in corpus::packets(&c) {
            if p.data.len() > 14 {
                let et = u16::from_be_bytes([p.data[12], p.data[13]]);
                if et == 0x0800 || et == 0x86dd {
                    v.push((et, p.data[14..].to_vec(), p.wirelen.saturating_sub(14)));
                }
            }
        }
    }
    v
}

/// The link types tried: Ethernet (the corpus), Raw IP and Linux cooked
/// (the corpus's IP packets behind another header), and those of
/// libpcap's own filter test captures.
fn targets() -> Vec<Target> {
    let mut t = vec![Target {
        name: "EN10MB",
        dlt: 1,
        captures: corpus::pcaps()
            .iter()
            .map(|c| {
                let name = c.file_name().unwrap().to_string_lossy().into_owned();
                let pkts = corpus::packets(c)
                    .into_iter()
                    .map(|p| (p.data, p.wirelen))
                    .collect();
                (name, pkts)
            })
            .collect(),
        every: 1,
    }];
    let ip = ip_payloads();
    t.push(Target {
        name: "RAW",
        dlt: 12,
        captures: vec![(
            "raw".into(),
            ip.iter().map(|(_, d, w)| (d.clone(), *w)).collect(),
        )],
        every: 4,
    });
    // Linux cooked v1: packet type, ARPHRD_ETHER, address length 6, an
    // address padded to 8 bytes, the protocol.
    t.push(Target {
        name: "LINUX_SLL",
        dlt: 113,
        captures: vec![(
            "sll".into(),
            ip.iter()
                .enumerate()
                .map(|(i, (et, d, w))| {
                    let mut f = vec![0, (i % 5) as u8, 0, 1, 0, 6, 2, 0, 0, 1, 2, 3, 0, 0];
                    f.extend_from_slice(&et.to_be_bytes());
                    f.extend_from_slice(d);
                    (f, w + 16)
                })
                .collect(),
        )],
        every: 4,
    });
    let mut by_type: HashMap<u16, Vec<(String, Frames)>> = HashMap::new();
    if let Some(dir) = corpus::path("libpcap-tests/filter") {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            let pk = corpus::packets(&f);
            if let Some(first) = pk.first() {
                let name = f.file_name().unwrap().to_string_lossy().into_owned();
                by_type
                    .entry(first.linktype)
                    .or_default()
                    .push((name, pk.into_iter().map(|p| (p.data, p.wirelen)).collect()));
            }
        }
    }
    for (name, linktype, dlt) in [
        ("IEEE802_11_RADIO", 127, 127),
        ("SLIP", 8, 8),
        ("ARCNET_LINUX", 129, 129),
    ] {
        if let Some(caps) = by_type.remove(&linktype) {
            t.push(Target {
                name,
                dlt,
                captures: caps,
                every: 6,
            });
        }
    }
    t
}

/// A `tcpdump -ddd` program: the count, then `code jt jf k` lines.
fn parse_ddd(text: &str) -> Result<Vec<sluice_bpf::Insn>, String> {
    let mut lines = text.lines();
    let n: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| format!("no instruction count in {text:?}"))?;
    let insns: Vec<sluice_bpf::Insn> = lines
        .map(|l| {
            let f: Vec<u32> = l
                .split_whitespace()
                .map(|x| x.parse().map_err(|_| format!("bad line {l:?}")))
                .collect::<Result<_, _>>()?;
            match f[..] {
                [code, jt, jf, k] if code <= 0xffff && jt <= 255 && jf <= 255 => {
                    Ok(sluice_bpf::Insn {
                        code: code as u16,
                        jt: jt as u8,
                        jf: jf as u8,
                        k,
                    })
                }
                _ => Err(format!("bad line {l:?}")),
            }
        })
        .collect::<Result<_, _>>()?;
    if insns.len() != n {
        return Err(format!("{n} announced, {} given", insns.len()));
    }
    Ok(insns)
}

/// The program `tcpdump` prints for `expr` on `lib` with `flags` (`-d`,
/// `-dd`, `-ddd`, maybe `-O`).
fn tcpdump_program(lib: Lib, dlt: &str, flags: &[&str], expr: &str) -> Ran {
    let mut args = vec!["-y", dlt];
    args.extend_from_slice(flags);
    args.push(expr);
    run(lib.command("tcpdump", &args), None, LIMIT)
}

#[test]
fn tcpdump_programs_filter_as_libpcap_does() {
    if !tool("tcpdump -d", "tcpdump", "tcpdump") {
        return;
    }
    let Some(_) = captures("tcpdump -d") else {
        return;
    };
    let Some(dump) = build_c(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/c/dump.c"
    ))) else {
        return;
    };
    let pcap = match sluice_libpcap::Libpcap::load() {
        Ok(p) => p,
        Err(e) => {
            skip("tcpdump -d", &format!("system libpcap: {e}"));
            return;
        }
    };
    let Some(libpcap_master) = sluice_testsupport::master::load("tcpdump -d") else {
        return;
    };
    let dir = scratch("tcpdump-d");
    let exprs = expressions();
    let differs = master_differs();
    // Lines where libpcap versions differ are only judged on Ethernet,
    // where the oracle has master's verdicts.
    let version_lines: HashSet<usize> = differs.keys().map(|k| k.1).collect();
    let targets = targets();
    let mut work = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        for (n, (line, e)) in exprs.iter().enumerate() {
            if n % t.every != 0 || (ti > 0 && version_lines.contains(line)) {
                continue;
            }
            work.push((ti, *line, e.as_str(), false));
            if ti == 0 && n % 5 == 0 {
                work.push((ti, *line, e.as_str(), true));
            }
        }
    }
    let results = parallel(
        &work,
        jobs(),
        |&(ti, line, e, unopt)| -> Result<bool, String> {
            let t = &targets[ti];
            let flags: &[&str] = if unopt { &["-O", "-ddd"] } else { &["-ddd"] };
            let what = format!(
                "tcpdump -y {} {} '{e}' (expressions.txt:{line})",
                t.name,
                flags.join(" ")
            );
            let c = tcpdump_program(Lib::Candidate, t.name, flags, e);
            let sys = tcpdump_program(Lib::System, t.name, flags, e);
            if !sys.ok() {
                // Refused: refused alike, with the same words.
                return same_run(&what, &c, &sys).map(|()| false);
            }
            if !c.ok() || c.stderr != sys.stderr {
                return same_run(&what, &c, &sys).map(|()| false);
            }
            let mine = parse_ddd(&c.out()).map_err(|err| format!("{what}: candidate: {err}"))?;
            let theirs = parse_ddd(&sys.out()).map_err(|err| format!("{what}: system: {err}"))?;
            let (mine, theirs) = (pcap.program(&mine), pcap.program(&theirs));
            for (cap, pkts) in &t.captures {
                let v = |p: &sluice_libpcap::Program<'_>| -> String {
                    pkts.iter()
                        .map(|(d, w)| if p.run(d, *w) != 0 { '1' } else { '0' })
                        .collect()
                };
                let (got, want) = (v(&mine), v(&theirs));
                if got != want {
                    let master = differs.get(&(cap.clone(), line));
                    if ti == 0 && master == Some(&got) {
                        continue;
                    }
                    // libpcap master's program, optimised or not (either
                    // verdict is right, as for the corpus' oracle).
                    let by_master = |optimize: bool| {
                        libpcap_master
                            .compile(e, t.dlt, 262_144, optimize)
                            .is_ok_and(|p| v(&p) == got)
                    };
                    if by_master(true) || by_master(false) {
                        continue;
                    }
                    let at = got.chars().zip(want.chars()).position(|(a, b)| a != b);
                    return Err(format!(
                    "{what}: on {cap}, packet {at:?}: the candidate's program gives {got}, libpcap's {want}"
                ));
                }
            }
            if unopt {
                return Ok(true);
            }
            // -d and -dd print that same program, as libpcap's bpf_dump does.
            let input = dir.join(format!("{}-{line}.ddd", t.name));
            std::fs::write(&input, &c.stdout).unwrap();
            let printed = run(
                Lib::System.command(s(&dump), &[] as &[&str]),
                Some(&input),
                LIMIT,
            );
            let _ = std::fs::remove_file(&input);
            if !printed.ok() {
                return Err(format!("{what}: dump: {}", printed.err()));
            }
            let text = printed.out();
            let levels: Vec<&str> = text.split("--\n").collect();
            for (level, flag) in ["-d", "-dd", "-ddd"].iter().enumerate() {
                let got = tcpdump_program(Lib::Candidate, t.name, &[flag], e);
                if got.out() != levels[level] || !got.ok() {
                    return Err(format!(
                    "{what}: the candidate's `{flag}` is not its -ddd program as bpf_dump prints it:{}",
                    common::first_difference(&got.stdout, levels[level].as_bytes())
                        .unwrap_or_else(|| got.err())
                ));
                }
            }
            Ok(true)
        },
    );
    let failures: Vec<String> = results.iter().filter_map(|r| r.clone().err()).collect();
    report("tcpdump -d/-dd/-ddd programs", work.len(), &failures);
    let compiled = results.iter().filter(|r| matches!(r, Ok(true))).count();
    assert!(compiled >= exprs.len(), "only {compiled} programs compared");
}

#[test]
fn ngrep_matches_alike() {
    if !tool("ngrep", "ngrep", "ngrep") {
        return;
    }
    let Some(_) = captures("ngrep") else {
        return;
    };
    loads_candidate("/usr/bin/ngrep");
    let pcaps = corpus::path("pcaps").unwrap();
    let dir = scratch("ngrep");
    let cases: &[(&str, &str, &str)] = &[
        ("mptcp-v0.pcap", "SSH", "tcp"),
        ("mptcp-v0.pcap", "", "port 22"),
        ("ipv4_tcp_http_xml.pcap", "xml|HTTP", ""),
        ("ipv4_tcp_http_xml.pcap", "GET", "tcp and dst port 80"),
        ("of13_ericsson.pcapng", "", "tcp"),
        ("dhcpv4v6-rfc5970-rfc8572.pcap", "", "udp"),
        ("pim-packet-assortment.pcap", "", "ip and not udp"),
        ("802.1ad_QinQ.pcap", "", ""),
        ("various_gre.pcap", "", "proto gre"),
    ];
    let mut jobs_ = Vec::new();
    let mut dumps = Vec::new();
    for (i, (cap, pat, expr)) in cases.iter().enumerate() {
        let f = pcaps.join(cap);
        let f = s(&f);
        for extra in [&[][..], &["-x"], &["-t"]] {
            let mut args = vec!["-q", "-I", f];
            args.extend_from_slice(extra);
            args.push(pat);
            if !expr.is_empty() {
                args.push(expr);
            }
            jobs_.push(Job::new("ngrep", &args));
        }
        let mut args = vec!["-q", "-I", f, "-O"];
        let outs: Vec<PathBuf> = Lib::BOTH
            .iter()
            .map(|l| dir.join(format!("{i}-{}.pcap", l.tag())))
            .collect();
        let mut args_c = args.clone();
        args_c.push(s(&outs[0]));
        args.push(s(&outs[1]));
        for a in [&mut args_c, &mut args] {
            a.push(pat);
            if !expr.is_empty() {
                a.push(expr);
            }
        }
        let (c, sys) = (
            run(Lib::Candidate.command("ngrep", &args_c), None, LIMIT),
            run(Lib::System.command("ngrep", &args), None, LIMIT),
        );
        // The output names its dump file: compare without that line.
        let strip = |r: &Ran| {
            let mut r = r.clone();
            let out = r.out();
            let kept: Vec<&str> = out.lines().filter(|l| !l.starts_with("output:")).collect();
            r.stdout = kept.join("\n").into_bytes();
            r
        };
        dumps.push(same_run(
            &format!("ngrep -O {cap}"),
            &strip(&c),
            &strip(&sys),
        ));
        dumps.push(same_file(&format!("ngrep -O {cap}"), &outs[0], &outs[1]));
    }
    let sys = compare_all("ngrep -I", &jobs_);
    assert!(sys.iter().filter(|r| r.ok()).count() >= jobs_.len() / 2);
    let failures: Vec<String> = dumps.into_iter().filter_map(Result::err).collect();
    report("ngrep -O", 2 * cases.len(), &failures);
}

/// Captures for pcapy: pcap and pcapng, VLAN, an empty one.
const PY_CAPTURES: &[&str] = &[
    "mptcp-v0.pcap",
    "of13_ericsson.pcapng",
    "empty.pcapng",
    "802.1ad_QinQ.pcap",
    "dhcpv4v6-rfc5970-rfc8572.pcap",
    "msnlb2.pcapng",
];

/// Run `tests/py/pcapy_read.py` with `python` on both libraries and
/// compare the transcripts and the files it writes.
fn pcapy_alike(what: &str, python: &str) {
    // The module must link libpcap.so.0.8 (not a copy of its own).
    let o = Command::new(python)
        .args(["-c", "import pcapy; print(pcapy.__file__)"])
        .output()
        .unwrap();
    let module = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(o.status.success(), "{what}: import pcapy failed");
    loads_candidate(&module);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/pcapy_read.py");
    let pcaps = corpus::path("pcaps").unwrap();
    let caps: Vec<String> = PY_CAPTURES
        .iter()
        .map(|c| s(&pcaps.join(c)).to_string())
        .collect();
    let mut runs = Vec::new();
    for lib in Lib::BOTH {
        let dir = scratch(&format!("{what}-{}", lib.tag()).replace(' ', "-"));
        let mut args = vec![script.to_string(), s(&dir).to_string()];
        args.extend(caps.iter().cloned());
        runs.push((run(lib.command(python, &args), None, LIMIT), dir));
    }
    let (sys, sys_dir) = &runs[1];
    let (c, c_dir) = &runs[0];
    assert!(sys.ok(), "{what} on the system libpcap: {}", sys.err());
    assert!(sys.out().lines().filter(|l| l.starts_with("next ")).count() > 300);
    if let Err(e) = same_run(what, c, sys) {
        panic!("{e}");
    }
    let mut failures = Vec::new();
    for cap in PY_CAPTURES {
        let n = format!("{cap}.dump");
        if let Err(e) = same_file(&n, &c_dir.join(&n), &sys_dir.join(&n)) {
            failures.push(e);
        }
    }
    report(&format!("{what}: dump files"), PY_CAPTURES.len(), &failures);
}

#[test]
fn debian_pcapy_reads_alike() {
    let python = "/usr/bin/python3";
    let ok = Command::new(python)
        .args(["-c", "import pcapy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        skip(
            "pcapy",
            "python3-pcapy missing (apt-get install python3-pcapy)",
        );
        return;
    }
    if captures("pcapy").is_none() {
        return;
    }
    pcapy_alike("python3-pcapy", python);
}

/// A Python with pcapy-ng built against the system libpcap:
/// `SLUICE_PCAPY_NG_PYTHON`, or a virtual environment made (once, then
/// reused) in the temporary directory with `pip install --no-binary
/// pcapy-ng pcapy-ng` (the binary wheel carries a libpcap of its own, which
/// would test nothing). `Err` says why there is none.
fn pcapy_ng_python() -> Result<String, String> {
    if let Ok(p) = std::env::var("SLUICE_PCAPY_NG_PYTHON") {
        return Ok(p);
    }
    let venv = std::env::temp_dir().join("sluice-pcapy-ng-venv");
    let python = venv.join("bin/python");
    let usable = |py: &Path| {
        Command::new(py)
            .args(["-c", "import pcapy"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
            && Command::new(py)
                .args(["-m", "pip", "show", "pcapy-ng"])
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
    };
    if usable(&python) {
        return Ok(s(&python).to_string());
    }
    let mk = Command::new("/usr/bin/python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .map_err(|e| format!("python3 -m venv: {e}"))?;
    if !mk.status.success() {
        return Err(format!(
            "python3 -m venv: {} (apt-get install python3-venv)",
            String::from_utf8_lossy(&mk.stderr).trim()
        ));
    }
    let pip = run(
        {
            let mut c = Command::new(&python);
            c.args([
                "-m",
                "pip",
                "install",
                "-q",
                "--no-binary",
                "pcapy-ng",
                "pcapy-ng",
            ]);
            c
        },
        None,
        Duration::from_secs(600),
    );
    if !pip.ok() || !usable(&python) {
        return Err(format!(
            "pip install --no-binary pcapy-ng pcapy-ng: {} {}",
            pip.status,
            pip.err().trim()
        ));
    }
    Ok(s(&python).to_string())
}

#[test]
fn pcapy_ng_reads_alike() {
    if captures("pcapy-ng").is_none() {
        return;
    }
    match pcapy_ng_python() {
        Ok(python) => pcapy_alike("pcapy-ng", &python),
        Err(why) => skip("pcapy-ng", &why),
    }
}
