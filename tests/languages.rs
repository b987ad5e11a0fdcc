//! The seeds' own filter languages (CSPF, DPF) next to pcap expressions: the
//! example programs on real captures, against their equivalent pcap
//! expressions, and every engine (the language's interpreter, the IR, BPF,
//! native code) against the others on random programs and truncated
//! packets; the language prefix on the command line and in filters files.

use proptest::prelude::*;
use sluice::{LinkType, Program, Runner};
use sluice_testsupport::corpus;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> String {
    let p = root().join("examples").join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A packet's bytes and wire length.
type Pkt = (Vec<u8>, u32);

/// A language's own interpreter.
type Interp = Box<dyn Fn(&[u8]) -> bool>;

/// Every Ethernet packet of a capture.
fn packets(path: &Path) -> Vec<Pkt> {
    corpus::packets(path)
        .into_iter()
        .filter(|p| p.linktype == 1)
        .map(|p| (p.data, p.wirelen))
        .collect()
}

/// Every Ethernet packet of the corpus, by capture.
fn corpus_packets() -> Vec<(String, Vec<Pkt>)> {
    corpus::pcaps()
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            (name, packets(f))
        })
        .collect()
}

fn pcap(expr: &str) -> Program {
    Program::builder(LinkType::EN10MB)
        .expression(expr)
        .unwrap_or_else(|e| panic!("{expr}: {e}"))
}

fn spec(text: &str) -> Program {
    Program::builder(LinkType::EN10MB)
        .capture_big_endian(false)
        .build(text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// Every engine of `p` gives `want` (as a verdict) on the packet.
fn engines(p: &Program, pkt: &[u8], wire: u32) -> [bool; 3] {
    [Runner::Interp, Runner::Native, Runner::Reference].map(|e| p.run_with(e, pkt, wire) != 0)
}

/// What `spec` compiles to gives, in all three engines, the verdict of
/// the language's own interpreter `want` on every packet (or, when the
/// compiler says it rejects everything, `want` rejects every packet).
fn engines_agree_with(
    spec: &str,
    want: impl Fn(&[u8]) -> bool,
    pkts: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    match Program::builder(LinkType::EN10MB)
        .snaplen(1)
        .capture_big_endian(false)
        .build(spec)
    {
        Ok(p) => {
            for pkt in pkts {
                prop_assert_eq!(
                    engines(&p, pkt, pkt.len() as u32),
                    [want(pkt); 3],
                    "{}\n{:?}",
                    spec,
                    pkt
                );
            }
        }
        Err(sluice::Error::RejectsAll) => {
            for pkt in pkts {
                prop_assert!(!want(pkt));
            }
        }
        Err(e) => prop_assert!(false, "{}: {}", spec, e),
    }
    Ok(())
}

/// The session of the examples in mptcp-v0.pcap.
const SESSION_PACKETS: usize = 110;

struct Example {
    name: &'static str,
    program: Program,
    /// The language's own interpreter.
    interp: Interp,
    pcap: &'static str,
}

fn examples() -> Vec<Example> {
    let cspf_text = example("mpf-appendix-c.cspf");
    let cspf = sluice::cspf::assemble(&cspf_text).unwrap();
    let fig1 = sluice::dpf::parse(&example("dpf-figure1.dpf")).unwrap();
    let sess = sluice::dpf::parse(&example("dpf-tcp-session.dpf")).unwrap();
    vec![
        Example {
            name: "mpf-appendix-c.cspf",
            program: spec(&format!("cspf:{cspf_text}")),
            interp: Box::new(move |p| cspf.run(p)),
            pcap: "ip and ip dst host 10.1.1.2 and ip proto 6 and ip[6:2] & 0xbfff = 0 \
                   and ip src host 10.2.1.2 and tcp src port 35961 and tcp dst port 22",
        },
        Example {
            name: "dpf-figure1.dpf",
            program: spec("dpf:@examples/dpf-figure1.dpf"),
            interp: Box::new(move |p| fig1.run(p)),
            pcap: "ether[12:2] = 0x800 and ether[23] = 6 and ether[26:4] = 0x0a020102 \
                   and ether[34:2] = 35961 and ether[36:2] = 22",
        },
        Example {
            name: "dpf-tcp-session.dpf",
            program: spec("dpf:@examples/dpf-tcp-session.dpf"),
            interp: Box::new(move |p| sess.run(p)),
            pcap: "ip proto 6 and ip src host 10.2.1.2 and ip dst host 10.1.1.2 \
                   and tcp src port 35961 and tcp dst port 22",
        },
    ]
}

#[test]
fn examples_accept_their_session_and_match_pcap_on_the_corpus() {
    let captures = corpus_packets();
    if captures.is_empty() {
        corpus::skipped("language examples");
        return;
    }
    for ex in examples() {
        let expr = pcap(ex.pcap);
        let mut accepted_by_file = Vec::new();
        let mut total = 0usize;
        for (file, pkts) in &captures {
            let mut n = 0;
            for (pkt, wire) in pkts {
                total += 1;
                let want = expr.run(pkt, *wire) != 0;
                let own = (ex.interp)(pkt);
                assert_eq!(own, want, "{} on {file}: interpreter vs pcap", ex.name);
                assert_eq!(
                    engines(&ex.program, pkt, *wire),
                    [want; 3],
                    "{} on {file}",
                    ex.name
                );
                n += want as usize;
            }
            if n > 0 {
                accepted_by_file.push((file.clone(), n));
            }
        }
        assert!(total > 5000, "{total} packets");
        assert_eq!(
            accepted_by_file,
            vec![("mptcp-v0.pcap".to_string(), SESSION_PACKETS)],
            "{}",
            ex.name
        );
    }
}

#[test]
fn examples_match_pcap_on_every_truncation_of_the_session() {
    let Some(root) = corpus::root() else {
        corpus::skipped("languages");
        return;
    };
    let pkts = packets(&root.join("pcaps/mptcp-v0.pcap"));
    for ex in examples() {
        let expr = pcap(ex.pcap);
        for (pkt, wire) in pkts.iter().step_by(3) {
            for n in 0..=pkt.len().min(80) {
                let cut = &pkt[..n];
                let want = expr.run(cut, *wire) != 0;
                assert_eq!((ex.interp)(cut), want, "{} at length {n}", ex.name);
                assert_eq!(
                    engines(&ex.program, cut, *wire),
                    [want; 3],
                    "{} at {n}",
                    ex.name
                );
            }
        }
    }
}

#[test]
fn the_first_fragment_rule_of_appendix_c() {
    // Appendix C rejects every fragment, first ones included (the
    // Don't-Fragment bit aside); its DF packets are accepted.
    let Some(root) = corpus::root() else {
        corpus::skipped("languages");
        return;
    };
    let pkts = packets(&root.join("pcaps/mptcp-v0.pcap"));
    let p = spec(&format!("cspf:{}", example("mpf-appendix-c.cspf")));
    let (pkt, wire) = pkts
        .iter()
        .find(|(p, _)| p.len() > 37 && p[34..36] == 35961u16.to_be_bytes() && p[36..38] == [0, 22])
        .unwrap();
    assert_ne!(p.run(pkt, *wire), 0);
    assert_eq!(pkt[20] & 0x40, 0x40, "the capture's packets carry DF");
    let mut mf = pkt.clone();
    mf[20] |= 0x20;
    assert_eq!(p.run(&mf, *wire), 0);
    let mut later = pkt.clone();
    later[21] = 1;
    assert_eq!(p.run(&later, *wire), 0);
}

#[test]
fn dpf_spellings_of_one_session_merge_with_each_other() {
    use sluice::ir::Filter;
    let a = sluice::dpf::parse(&example("dpf-figure1.dpf"))
        .unwrap()
        .to_ir(1);
    let b: Filter = sluice::dpf::compile(
        "(34:32 == 35961 << 16 | 22) && (12:16 == 0x800) && (6 == 23:8) && (26:16 == 0x0a02) && (28:16 == 0x0102)",
        1,
    )
    .unwrap();
    assert_eq!(a, b);
}

// Random programs: interpreter, IR, BPF and native code agree.

fn arb_cspf() -> impl Strategy<Value = String> {
    let action = prop_oneof![
        4 => (0u16..30).prop_map(|n| format!("pushword P[{n}]")),
        3 => prop_oneof![Just(0u16), Just(1), Just(6), Just(7), Just(0x800), Just(0x0f00), Just(0xffff), any::<u16>()]
            .prop_map(|k| format!("pushlit #{k}")),
        1 => Just("pushzero".to_string()),
        1 => Just("pushone".to_string()),
        1 => Just("push00ff".to_string()),
        1 => Just("pushff00".to_string()),
        1 => Just("pushffff".to_string()),
        2 => Just("nopush".to_string()),
        2 => Just("pushind".to_string()),
        1 => (0u16..3).prop_map(|n| format!("pushstk + {n}")),
    ];
    let op = prop_oneof![
        5 => Just("nop"), 1 => Just("eq"), 1 => Just("neq"), 1 => Just("lt"), 1 => Just("le"),
        1 => Just("gt"), 1 => Just("ge"), 1 => Just("and"), 1 => Just("or"), 1 => Just("xor"),
        2 => Just("cor"), 3 => Just("cand"), 1 => Just("cnor"), 1 => Just("cnand"),
        1 => Just("lsh"), 1 => Just("rsh"), 1 => Just("add"), 1 => Just("sub"),
    ];
    prop::collection::vec((action, op), 1..12).prop_map(|v| {
        v.into_iter()
            .map(|(a, o)| {
                // The literal follows the operation in the seed's notation.
                match a.strip_prefix("pushlit ") {
                    Some(lit) => format!("pushlit | {o} {lit}"),
                    None => format!("{a} | {o}"),
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    })
}

fn arb_dpf() -> impl Strategy<Value = String> {
    let read = prop_oneof![
        (0u32..40, prop_oneof![Just(8), Just(16), Just(32)]).prop_map(|(o, b)| format!("{o}:{b}")),
        (0u32..20).prop_map(|o| format!("((0:8 & 0xf) << 2):{}", if o % 2 == 0 { 8 } else { 16 })),
    ];
    let value = prop_oneof![
        3 => read.clone(),
        1 => (read.clone(), prop_oneof![Just("&"), Just("+"), Just("-"), Just("^"), Just("<<"), Just(">>"), Just("/"), Just("%"), Just("*")], 0u32..20)
            .prop_map(|(r, op, k)| format!("({r} {op} {k})")),
        1 => (read.clone(), read).prop_map(|(a, b)| format!("({a} + {b})")),
    ];
    let atom = prop_oneof![
        5 => (value.clone(), prop_oneof![Just("=="), Just("!="), Just("<"), Just("<="), Just(">"), Just(">=")],
              prop_oneof![0u32..10, Just(0x800), Just(0x45), any::<u32>()])
            .prop_map(|(v, r, k)| format!("({v} {r} {k})")),
        1 => (value.clone(), value.clone()).prop_map(|(a, b)| format!("({a} == {b})")),
        1 => (0u32..20).prop_map(|k| format!("SHIFT({k})")),
        1 => value.prop_map(|v| format!("SHIFT({v} & 0x1f)")),
    ];
    prop::collection::vec(atom, 1..6).prop_map(|v| v.join(" && "))
}

fn arb_packet() -> impl Strategy<Value = Vec<u8>> {
    let tcp = {
        let mut p = vec![0u8; 60];
        p[12] = 8;
        p[14] = 0x45;
        p[23] = 6;
        p
    };
    prop_oneof![
        prop::collection::vec(prop_oneof![3 => 0u8..8, 1 => any::<u8>()], 0..64),
        (0usize..61, any::<u8>(), 0usize..60).prop_map(move |(n, b, at)| {
            let mut p = tcp.clone();
            p[at] = b;
            p.truncate(n);
            p
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn cspf_engines_agree(text in arb_cspf(), pkts in prop::collection::vec(arb_packet(), 6)) {
        let Ok(cspf) = sluice::cspf::assemble(&text) else { return Ok(()) };
        engines_agree_with(&format!("cspf:{text}"), |p| cspf.run(p), &pkts)?;
    }

    #[test]
    fn dpf_engines_agree(text in arb_dpf(), pkts in prop::collection::vec(arb_packet(), 6)) {
        let f = sluice::dpf::parse(&text).unwrap();
        engines_agree_with(&format!("dpf:{text}"), |p| f.run(p), &pkts)?;
    }

    #[test]
    fn specs_never_panic(text in "(pcap:|bpf:|cspf:|dpf:)?[ -~]{0,60}") {
        let _ = Program::builder(LinkType::EN10MB).snaplen(1).capture_big_endian(false).build(&text);
    }
}

// The language prefix on the command line and in filters files.

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .current_dir(root())
        .output()
        .unwrap()
}

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).to_string()
}

#[test]
fn filter_takes_every_language() {
    let Some(root) = corpus::root() else {
        corpus::skipped("languages");
        return;
    };
    let cap = root.join("pcaps/mptcp-v0.pcap");
    let cap = cap.to_str().unwrap();
    for f in [
        "cspf:@examples/mpf-appendix-c.cspf",
        "dpf:@examples/dpf-figure1.dpf",
        "dpf:@examples/dpf-tcp-session.dpf",
        "pcap:ip src 10.2.1.2 and tcp src port 35961 and dst port 22",
        "dpf:(12:16 == 0x800) && (26:32 == 0x0a020102) && (23:8 == 6) && (34:32 == 35961 << 16 | 22)",
        "cspf:pushword P[6]; pushlit | cand #0x800; pushword P[13]; pushlit | cand #0x0a02; \
         pushword P[14]; pushlit | cand #0x0102; pushword P[17]; pushlit | cand #35961; pushword P[18]; pushlit | cand #22",
    ] {
        for engine in ["native", "interp"] {
            let o = sluice(&["filter", "-r", cap, "--count", "--engine", engine, f]);
            assert!(o.status.success(), "{f}: {}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(stdout(&o).trim(), SESSION_PACKETS.to_string(), "{f}");
        }
    }
    // -d prints BPF for every language; it loads back and agrees.
    let d = sluice(&["filter", "-d", "dpf:@examples/dpf-figure1.dpf"]);
    assert!(d.status.success());
    assert!(stdout(&d).contains("ldh      [12]"), "{}", stdout(&d));
    let prog = std::env::temp_dir().join(format!("sluice-lang-{}.bpf", std::process::id()));
    std::fs::write(&prog, stdout(&d)).unwrap();
    let o = sluice(&[
        "filter",
        "-r",
        cap,
        "--count",
        "--bpf-file",
        prog.to_str().unwrap(),
    ]);
    assert_eq!(stdout(&o).trim(), SESSION_PACKETS.to_string());
    let o = sluice(&[
        "filter",
        "-r",
        cap,
        "--count",
        &format!("bpf:@{}", prog.display()),
    ]);
    assert_eq!(stdout(&o).trim(), SESSION_PACKETS.to_string());
    let _ = std::fs::remove_file(prog);
    // -F with a prefixed multi-line program.
    let o = sluice(&[
        "filter",
        "-r",
        cap,
        "--count",
        "-F",
        "examples/mpf-appendix-c.cspf",
    ]);
    assert!(
        !o.status.success(),
        "a CSPF file without its prefix is not a pcap expression"
    );
    let ff = std::env::temp_dir().join(format!("sluice-lang-{}.f", std::process::id()));
    std::fs::write(&ff, format!("cspf:\n{}", example("mpf-appendix-c.cspf"))).unwrap();
    let o = sluice(&["filter", "-r", cap, "--count", "-F", ff.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o).trim(), SESSION_PACKETS.to_string());
    let _ = std::fs::remove_file(ff);
}

#[test]
fn filter_errors_say_where() {
    let o = sluice(&["filter", "-d", "cspf:pushword P[6]; pushlit | cnad #1"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 1, column 31"), "{err}");
    let o = sluice(&["filter", "-d", "dpf:(12:16 == 0x800) && (9:7 == 6)"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 1, column 28"), "{err}");
}

#[test]
fn split_mixes_languages_in_one_filter_set() {
    let Some(root) = corpus::root() else {
        corpus::skipped("languages");
        return;
    };
    let cap = root.join("pcaps/mptcp-v0.pcap");
    let dir = std::env::temp_dir().join(format!("sluice-lang-split-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(root_example("mpf-appendix-c.cspf"), dir.join("c.cspf")).unwrap();
    let bpf = sluice(&["filter", "-ddd", "tcp dst port 22"]);
    let bpf_line = stdout(&bpf).trim().replace('\n', ";");
    let filters = format!(
        "# one session in four languages, and the rest\n\
         pcap\tip src 10.2.1.2 and tcp src port 35961 and tcp dst port 22\n\
         cspf\tcspf:@c.cspf\n\
         dpf\tdpf:(12:16 == 0x800) && SHIFT(14) && (12:32 == 0x0a020102) && (9:8 == 6) && SHIFT(20) && (0:16 == 35961) && (2:16 == 22)\n\
         cspf_inline\tcspf:pushword P[17]; pushlit | cand #35961; pushword P[6]; pushlit | eq #0x0800\n\
         bpf\tbpf:{bpf_line}\n\
         ssh\ttcp dst port 22\n"
    );
    let list = dir.join("filters.txt");
    std::fs::write(&list, filters).unwrap();
    let o = sluice(&[
        "split",
        "-r",
        cap.to_str().unwrap(),
        "--filters",
        list.to_str().unwrap(),
        "--count",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = stdout(&o);
    let count = |name: &str| -> usize {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}\t")))
            .unwrap_or_else(|| panic!("{name} in {out}"))
            .parse()
            .unwrap()
    };
    for name in ["pcap", "cspf", "dpf", "cspf_inline"] {
        assert_eq!(count(name), SESSION_PACKETS, "{name}");
    }
    assert_eq!(count("bpf"), count("ssh"));
    // A bad line is named with its line number and column.
    std::fs::write(&list, "ok\ttcp\nbad\tdpf:(12:16 == 0x800) && (9:8 = 6)\n").unwrap();
    let o = sluice(&[
        "split",
        "-r",
        cap.to_str().unwrap(),
        "--filters",
        list.to_str().unwrap(),
        "--count",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(":2:") && err.contains("column 30"), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

fn root_example(name: &str) -> PathBuf {
    root().join("examples").join(name)
}
