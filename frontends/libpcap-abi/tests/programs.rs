//! Debian's programs and bindings beyond tcpdump, each run on the
//! candidate library and on Debian's libpcap with the same inputs, in a
//! directory of its own: exit status, standard output, standard error
//! and every file written must be equal. Only what depends on time, pids
//! and addresses in memory is normalised (per program, below), and the
//! baseline must have produced something, so no case passes on two empty
//! runs.
//!
//! The programs: ettercap (`-T -r`), tcptrace (which probes stdin with
//! `fread` and `rewind` before `pcap_open_offline("-")`), tcpslice (merge
//! and time slices: it `fseek`s `pcap_file()`'s stream), tcprewrite and
//! tcpprep, tcpflow, p0f, tcpick, ssldump, httpry, tcpstat, softflowd,
//! urlsnarf (dsniff), sngrep, libtrace's tracestats, tracesplit and
//! tracepktdump, Net::Pcap (perl) and pcaprub (ruby). The live ones
//! (iftop, tcpreplay, nmap, nping, hping3, arping) are in
//! `tests/live/abi.rs`.
#![forbid(unsafe_code)]

mod common;

use common::{have, jobs, parallel, report, run, scratch, skip, Lib, Ran};
use sluice_testsupport::corpus;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// One program run to compare.
struct Case {
    name: &'static str,
    /// The Debian package that has the program.
    package: &'static str,
    program: &'static str,
    args: Vec<String>,
    stdin: Option<PathBuf>,
    /// Files and directories the program writes (relative to its
    /// directory), compared after `normalise`.
    outputs: &'static [&'static str],
    normalise: fn(&str) -> String,
}

fn keep(s: &str) -> String {
    s.to_string()
}

/// ettercap prints its status lines from its main thread while the
/// capture thread prints packets: where they fall is a race on either
/// library.
fn ettercap(s: &str) -> String {
    let mut t = s.to_string();
    for status in [
        "Starting Unified sniffing...",
        "Capture file read completely, please exit at your convenience.",
        "Unified sniffing is not running...",
        "Unified sniffing was stopped.",
    ] {
        t = t.replace(status, "");
    }
    t.lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// tcptrace's run time.
fn tcptrace(s: &str) -> String {
    s.lines()
        .filter(|l| !l.starts_with("elapsed wallclock time"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// tcpflow's report of its own resource use and of when it started
/// (whole seconds, so two runs straddling a second differ).
fn tcpflow(s: &str) -> String {
    const USAGE: &[&str] = &[
        "start_time",
        "utime",
        "stime",
        "maxrss",
        "minflt",
        "majflt",
        "nswap",
        "inblock",
        "oublock",
        "clocktime",
        "nvcsw",
        "nivcsw",
        "ixrss",
        "idrss",
        "isrss",
        "msgsnd",
        "msgrcv",
        "nsignals",
    ];
    s.lines()
        .filter(|l| {
            let t = l.trim_start();
            !USAGE.iter().any(|u| t.starts_with(&format!("<{u}>")))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Addresses in memory (softflowd's `-D` prints its flows' pointers).
fn pointers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let tail = &rest[i + 2..];
        let n = tail.chars().take_while(char::is_ascii_hexdigit).count();
        out.push_str(if n >= 8 {
            "0xADDR"
        } else {
            &rest[i..i + 2 + n]
        });
        rest = &tail[n..];
    }
    out.push_str(rest);
    out
}

/// A capture of a SIP call over UDP (INVITE, 100, 180, 200, ACK, BYE,
/// 200), for sngrep; the corpus has none.
fn sip_capture(path: &Path) {
    let msgs = [
        "INVITE sip:bob@10.0.0.2 SIP/2.0",
        "SIP/2.0 100 Trying",
        "SIP/2.0 180 Ringing",
        "SIP/2.0 200 OK",
        "ACK sip:bob@10.0.0.2 SIP/2.0",
        "BYE sip:bob@10.0.0.2 SIP/2.0",
        "SIP/2.0 200 OK",
    ];
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&65535u32.to_le_bytes());
    out.extend_from_slice(&1u32.to_le_bytes());
    for (i, first) in msgs.iter().enumerate() {
        let (from, to) = if first.starts_with("SIP/2.0") == (i < 5) {
            ([10, 0, 0, 2], [10, 0, 0, 1])
        } else {
            ([10, 0, 0, 1], [10, 0, 0, 2])
        };
        let cseq = if i < 5 { "1 INVITE" } else { "2 BYE" };
        let cseq = if first.starts_with("ACK") {
            "1 ACK"
        } else {
            cseq
        };
        let body = format!(
            "{first}\r\nVia: SIP/2.0/UDP 10.0.0.1:5060;branch=z9hG4bK{i}\r\n\
             From: <sip:alice@10.0.0.1>;tag=a1\r\nTo: <sip:bob@10.0.0.2>;tag=b1\r\n\
             Call-ID: call-1@10.0.0.1\r\nCSeq: {cseq}\r\nContent-Length: 0\r\n\r\n"
        );
        let udp_len = 8 + body.len();
        let ip_len = 20 + udp_len;
        let mut ip = vec![
            0x45,
            0,
            (ip_len >> 8) as u8,
            ip_len as u8,
            0,
            i as u8,
            0,
            0,
            64,
            17,
            0,
            0,
        ];
        ip.extend_from_slice(&from);
        ip.extend_from_slice(&to);
        let sum = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum::<u32>();
        let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
        let mut frame = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 8, 0];
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&5060u16.to_be_bytes());
        frame.extend_from_slice(&5060u16.to_be_bytes());
        frame.extend_from_slice(&(udp_len as u16).to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(body.as_bytes());
        out.extend_from_slice(&(1_700_000_000 + i as u32).to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        out.extend_from_slice(&frame);
    }
    std::fs::write(path, out).unwrap();
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn script(name: &str) -> String {
    format!("{}/tests/scripts/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Every case, on the inputs there are here.
fn cases(inputs: &Path) -> Vec<Case> {
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let (sample, rtsp) = (s(&ex.join("sample.pcap")), s(&ex.join("rtsp.pcap")));
    let sip = inputs.join("sip.pcap");
    sip_capture(&sip);
    let sip = s(&sip);
    let corpus_file = |name: &str| {
        corpus::path("pcaps")
            .map(|p| p.join(name))
            .filter(|p| p.is_file())
    };
    let http = corpus_file("print-flags.pcap").map_or_else(|| rtsp.clone(), |p| s(&p));
    let pim = corpus_file("pim-packet-assortment.pcap").map_or_else(|| sample.clone(), |p| s(&p));
    let a = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let case = |name, package, program, args: Vec<String>, outputs, normalise| Case {
        name,
        package,
        program,
        args,
        stdin: None,
        outputs,
        normalise,
    };
    let mut v = vec![
        case(
            "ettercap -T -q",
            "ettercap-text-only",
            "ettercap",
            a(&["-T", "-q", "-r", &sample]),
            &[],
            ettercap,
        ),
        case(
            "ettercap -T",
            "ettercap-text-only",
            "ettercap",
            a(&["-T", "-r", &rtsp]),
            &[],
            ettercap,
        ),
        case(
            "tcptrace",
            "tcptrace",
            "tcptrace",
            a(&["-n", &sample]),
            &[],
            tcptrace,
        ),
        case(
            "tcptrace -l",
            "tcptrace",
            "tcptrace",
            a(&["-n", "-l", &rtsp]),
            &[],
            tcptrace,
        ),
        case(
            "tcpslice merge",
            "tcpslice",
            "tcpslice",
            a(&["-w", "m.pcap", &sample, &rtsp]),
            &["m.pcap"],
            keep,
        ),
        case(
            "tcpslice pim",
            "tcpslice",
            "tcpslice",
            a(&["-w", "m.pcap", &pim]),
            &["m.pcap"],
            keep,
        ),
        case(
            "tcpslice time slice",
            "tcpslice",
            "tcpslice",
            a(&["-w", "m.pcap", "+2", "+5", &sample]),
            &["m.pcap"],
            keep,
        ),
        case(
            "tcpslice -r",
            "tcpslice",
            "tcpslice",
            a(&["-r", &sample, &rtsp]),
            &[],
            keep,
        ),
        case(
            "tcprewrite -v",
            "tcpreplay",
            "tcprewrite",
            a(&[
                "-v",
                "-i",
                &sample,
                "-o",
                "o.pcap",
                "--enet-dmac=00:11:22:33:44:55",
            ]),
            &["o.pcap"],
            keep,
        ),
        case(
            "tcpprep",
            "tcpreplay",
            "tcpprep",
            a(&["--auto=bridge", "--pcap", &sample, "--cachefile=c.cache"]),
            &["c.cache"],
            keep,
        ),
        case(
            "tcpflow",
            "tcpflow",
            "tcpflow",
            a(&["-r", &http, "-o", "flows"]),
            &["flows"],
            tcpflow,
        ),
        case("p0f", "p0f", "p0f", a(&["-r", &sample]), &[], keep),
        case(
            "tcpick",
            "tcpick",
            "tcpick",
            a(&["-r", &rtsp, "-C", "-yP"]),
            &[],
            keep,
        ),
        case(
            "ssldump",
            "ssldump",
            "ssldump",
            a(&["-n", "-r", &sample]),
            &[],
            keep,
        ),
        case("httpry", "httpry", "httpry", a(&["-r", &http]), &[], keep),
        case(
            "tcpstat",
            "tcpstat",
            "tcpstat",
            a(&["-r", &sample, "1"]),
            &[],
            keep,
        ),
        case(
            "softflowd",
            "softflowd",
            "softflowd",
            a(&["-r", &sample, "-D", "-v", "9"]),
            &[],
            pointers,
        ),
        case(
            "urlsnarf",
            "dsniff",
            "urlsnarf",
            a(&["-n", "-p", &http]),
            &[],
            keep,
        ),
        case(
            "sngrep",
            "sngrep",
            "sngrep",
            a(&["-N", "-q", "-I", &sip, "-O", "s.pcap"]),
            &["s.pcap"],
            keep,
        ),
        case(
            "tracestats",
            "libtrace-tools",
            "tracestats",
            a(&["-f", "tcp", "-f", "udp", &format!("pcapfile:{sample}")]),
            &[],
            keep,
        ),
        case(
            "tracesplit",
            "libtrace-tools",
            "tracesplit",
            a(&[
                "-c",
                "5",
                "-Z",
                "none",
                "-f",
                "tcp",
                &format!("pcapfile:{rtsp}"),
                "pcapfile:out.pcap",
            ]),
            &["."],
            keep,
        ),
        case(
            "tracepktdump",
            "libtrace-tools",
            "tracepktdump",
            a(&[&format!("pcapfile:{rtsp}")]),
            &[],
            keep,
        ),
        case(
            "Net::Pcap",
            "libnet-pcap-perl",
            "perl",
            a(&[&script("netpcap_read.pl"), &sample]),
            &[],
            keep,
        ),
        case(
            "pcaprub",
            "ruby-pcaprub",
            "ruby",
            a(&[&script("pcaprub_read.rb"), &rtsp]),
            &[],
            keep,
        ),
    ];
    // tcptrace reads "-" after probing stdin (fread, rewind).
    let mut c = case(
        "tcptrace stdin",
        "tcptrace",
        "tcptrace",
        a(&["-n", "stdin"]),
        &[],
        tcptrace,
    );
    c.stdin = Some(ex.join("sample.pcap"));
    v.push(c);
    v
}

/// Every file under `p` (itself, if a file), relative to `root`.
fn files(root: &Path, p: &Path, out: &mut Vec<PathBuf>) {
    if p.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for e in entries {
            files(root, &e, out);
        }
    } else if p.exists() {
        out.push(p.strip_prefix(root).unwrap().to_path_buf());
    }
}

/// The case on one library, in a fresh directory; the run and the files
/// it wrote (relative name, normalised bytes).
fn run_on(c: &Case, lib: Lib) -> (Ran, Vec<(PathBuf, Vec<u8>)>) {
    let dir = scratch(&format!(
        "prog-{}-{}",
        c.name.replace([' ', ':'], "_"),
        lib.tag()
    ));
    let mut cmd = lib.command(c.program, &c.args);
    cmd.current_dir(&dir);
    let mut r = run(cmd, c.stdin.as_deref(), LIMIT);
    let norm = |b: &[u8]| (c.normalise)(&String::from_utf8_lossy(b)).into_bytes();
    r.stdout = norm(&r.stdout);
    r.stderr = norm(&r.stderr);
    let mut written = Vec::new();
    for o in c.outputs {
        let mut names = Vec::new();
        files(&dir, &dir.join(o), &mut names);
        for n in names {
            let bytes = std::fs::read(dir.join(&n)).unwrap();
            let bytes = if bytes.starts_with(b"\xd4\xc3\xb2\xa1") || n.ends_with("c.cache") {
                bytes
            } else {
                norm(&bytes)
            };
            written.push((n, bytes));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    (r, written)
}

#[test]
fn debian_programs_give_what_they_give_on_libpcap() {
    let inputs = scratch("prog-inputs");
    let all = cases(&inputs);
    let here: Vec<&Case> = all
        .iter()
        .filter(|c| {
            let ok = have(c.program);
            if !ok {
                skip(
                    c.name,
                    &format!("{} missing (apt-get install {})", c.program, c.package),
                );
            }
            ok
        })
        .collect();
    let results = parallel(&here, jobs(), |c| {
        let (sys, sys_files) = run_on(c, Lib::System);
        let (cand, cand_files) = run_on(c, Lib::Candidate);
        let what = format!("{} {:?}", c.program, c.args);
        let produced = sys.stdout.len()
            + sys.stderr.len()
            + sys_files.iter().map(|f| f.1.len()).sum::<usize>();
        if !sys.ok() || produced == 0 || sys_files.len() < c.outputs.len() {
            return Some(format!(
                "{}: the baseline failed or produced nothing ({}, {} files): {}",
                c.name,
                sys.status,
                sys_files.len(),
                sys.err()
            ));
        }
        if let Err(e) = common::same_run(&what, &cand, &sys) {
            return Some(format!("{}: {e}", c.name));
        }
        let names = |f: &[(PathBuf, Vec<u8>)]| f.iter().map(|x| x.0.clone()).collect::<Vec<_>>();
        if names(&cand_files) != names(&sys_files) {
            return Some(format!(
                "{}: files written {:?} on the candidate, {:?} on libpcap",
                c.name,
                names(&cand_files),
                names(&sys_files)
            ));
        }
        for ((n, a), (_, b)) in cand_files.iter().zip(&sys_files) {
            if a != b {
                let at = a
                    .iter()
                    .zip(b)
                    .position(|(x, y)| x != y)
                    .unwrap_or(a.len().min(b.len()));
                return Some(format!(
                    "{}: {} differs from byte {at} ({} and {} bytes)",
                    c.name,
                    n.display(),
                    a.len(),
                    b.len()
                ));
            }
        }
        None
    });
    let failures: Vec<String> = results.into_iter().flatten().collect();
    report("Debian programs", here.len(), &failures);
    let _ = std::fs::remove_dir_all(&inputs);
}

#[test]
fn normalisers_touch_only_what_they_say() {
    assert_eq!(
        pointers("flow (0x558a06272d20) x 0x1f"),
        "flow (0xADDR) x 0x1f"
    );
    assert_eq!(tcptrace("a\nelapsed wallclock time: 1\nb"), "a\nb");
    assert_eq!(ettercap("x\nStarting Unified sniffing...\n\ny"), "x\ny");
    assert_eq!(tcpflow("<a>1</a>\n  <utime>0.1</utime>"), "<a>1</a>");
    assert_eq!(
        tcpflow("<start_time>2026-11-29T16:49:13Z</start_time>\n<tdelta>0</tdelta>"),
        "<tdelta>0</tdelta>"
    );
}
