//! Conformance against libpcap, from the shared corpus in `../shared/conformance`.
//!
//! Every case is checked; a case that fails must be listed, with its reason
//! class, in `tests/known-failures.txt`, so a regression fails the test and a
//! fix shows up as "now passing" in the output. Cases:
//! - `oracle:<capture>:<line>`: the verdict of expression `<line>` on every
//!   packet equals libpcap master's optimised or unoptimised verdict;
//! - `apply:<id>`: libpcap's apply tests, exact return values;
//! - `accept:<id>`: libpcap's accept tests compile, and our program and the
//!   expected bytecode agree on every packet of the corpus captures;
//! - `reject:<id>` / `reject-tsv:<n>`: refused expressions are refused.

use serde_json::Value;
use sluice::capture::CaptureReader;
use sluice::{LinkType, Program, Runner};
use sluice_testsupport::corpus;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

struct Pkt {
    data: Vec<u8>,
    wirelen: u32,
}

struct Capture {
    linktype: u16,
    snaplen: u32,
    /// The file's byte order: libpcap compiles for a capture file
    /// (`offline`), where NULL's address family may be in either order.
    big_endian: bool,
    packets: Vec<Pkt>,
}

/// A capture's packets, with the link type and snapshot length of its
/// last packet (or its first interface's).
fn load_capture(path: &Path) -> Capture {
    let c = corpus::Capture::read(path)
        .unwrap_or_else(|| panic!("{}: cannot be opened", path.display()));
    let mut snaplen = match c.format {
        sluice::capture::CaptureFormat::Pcap { snaplen, .. } => snaplen,
        _ => 262144,
    };
    let big_endian = match c.format {
        sluice::capture::CaptureFormat::Pcap { big_endian, .. }
        | sluice::capture::CaptureFormat::PcapNg { big_endian, .. } => big_endian,
    };
    if let Some(s) = c.packets.iter().rev().map(|p| p.snaplen).find(|&s| s != 0) {
        snaplen = s;
    }
    Capture {
        linktype: c.linktype(),
        snaplen,
        big_endian,
        packets: c
            .packets
            .into_iter()
            .map(|p| Pkt {
                data: p.data,
                wirelen: p.wirelen,
            })
            .collect(),
    }
}

/// Outcome bookkeeping with the known-failures list.
struct Ledger {
    known: BTreeSet<String>,
    failed: BTreeMap<String, String>,
    passed_known: Vec<String>,
    total: usize,
}

impl Ledger {
    fn new() -> Ledger {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/known-failures.txt"),
        )
        .unwrap_or_default();
        let known = text
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .map(|l| l.split_whitespace().next().unwrap_or("").to_string())
            .collect();
        Ledger {
            known,
            failed: BTreeMap::new(),
            passed_known: Vec::new(),
            total: 0,
        }
    }

    fn record(&mut self, id: String, result: Result<(), String>) {
        self.total += 1;
        match result {
            Ok(()) => {
                if self.known.contains(&id) {
                    self.passed_known.push(id);
                }
            }
            Err(why) => {
                self.failed.insert(id, why);
            }
        }
    }

    /// Print a summary and panic on failures that are not known.
    fn finish(self, what: &str) {
        let new: Vec<_> = self
            .failed
            .iter()
            .filter(|(id, _)| !self.known.contains(*id))
            .collect();
        println!(
            "{what}: {} cases, {} passed, {} known failures, {} new failures, {} known failures now pass",
            self.total,
            self.total - self.failed.len(),
            self.failed.len() - new.len(),
            new.len(),
            self.passed_known.len()
        );
        for id in &self.passed_known {
            println!("  now passing: {id}");
        }
        if std::env::var_os("SLUICE_PRINT_FAILURES").is_some() {
            for (id, why) in &self.failed {
                println!("FAIL {id} {why}");
            }
        }
        if !new.is_empty() {
            for (id, why) in new.iter().take(40) {
                println!("NEW FAILURE {id}: {why}");
            }
            panic!("{what}: {} new failures", new.len());
        }
    }
}

fn verdicts(p: &Program, c: &Capture, engine: Runner) -> String {
    c.packets
        .iter()
        .map(|k| {
            let r = p.run_with(engine, &k.data, k.wirelen);
            if r != 0 {
                '1'
            } else {
                '0'
            }
        })
        .collect()
}

#[test]
fn oracle_verdicts() {
    let Some(root) = corpus::root() else {
        corpus::skipped("conformance");
        return;
    };
    let exprs: Vec<String> = std::fs::read_to_string(root.join("expressions.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let opt = corpus::gz_lines("oracle/verdicts-master.tsv.gz").expect("the oracle");
    let unopt = corpus::unopt_verdicts();
    let mut captures: HashMap<String, Capture> = HashMap::new();
    // Programs per (expression line, link type): optimised and unoptimised.
    let mut progs: HashMap<(usize, u16), Result<(Program, Program), String>> = HashMap::new();
    let mut ledger = Ledger::new();
    for line in opt {
        let f: Vec<&str> = line.split('\t').collect();
        let (file, n) = (f[0], f[1].parse::<usize>().unwrap());
        let id = format!("oracle:{file}:{n}");
        if f[2] != "OK" {
            continue;
        }
        let want = f[3];
        let want_unopt = unopt.get(&(f[0].to_string(), f[1].to_string()));
        let cap = captures
            .entry(file.to_string())
            .or_insert_with(|| load_capture(&root.join("pcaps").join(file)));
        let expr = &exprs[n - 1];
        let entry = progs.entry((n, cap.linktype)).or_insert_with(|| {
            let lt = LinkType::from_number(cap.linktype as u32).ok_or("link type")?;
            let builder = Program::builder(lt)
                .offline(true)
                .capture_big_endian(cap.big_endian);
            let a = builder.expression(expr).map_err(|e| e.to_string())?;
            let b = builder
                .optimize(false)
                .expression(expr)
                .map_err(|e| e.to_string())?;
            Ok((a, b))
        });
        let result = match entry {
            Err(e) => Err(format!("compile error: {e}")),
            Ok((a, b)) => {
                let got = verdicts(a, cap, Runner::Interp);
                let got_unopt = verdicts(b, cap, Runner::Interp);
                let got_ref = verdicts(a, cap, Runner::Reference);
                let got_native = verdicts(a, cap, Runner::Native);
                let ok = |g: &str| g == want || want_unopt.is_some_and(|u| u == g);
                if !ok(&got) {
                    Err(format!("verdicts {got} want {want} ({expr})"))
                } else if got_unopt != got_ref {
                    Err(format!(
                        "engines disagree: bpf -O {got_unopt} ir {got_ref} ({expr})"
                    ))
                } else if got_native != got_ref {
                    Err(format!(
                        "engines disagree: native {got_native} ir {got_ref} ({expr})"
                    ))
                } else if !ok(&got_ref) {
                    Err(format!("reference verdicts {got_ref} want {want} ({expr})"))
                } else {
                    Ok(())
                }
            }
        };
        ledger.record(id, result);
    }
    ledger.finish("oracle");
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn skip_reason(v: &Value) -> Option<String> {
    if v["skip"].as_str().is_some_and(|s| !s.is_empty()) {
        return Some(format!("skip: {}", v["skip"]));
    }
    if v["linuxext"].as_bool() == Some(true) {
        return Some("needs Linux BPF extensions".into());
    }
    if v["netmask"].as_str().is_some() {
        return Some("needs a netmask".into());
    }
    None
}

#[test]
fn libpcap_apply_tests() {
    let Some(root) = corpus::root() else {
        corpus::skipped("conformance");
        return;
    };
    let mut ledger = Ledger::new();
    let mut skipped = 0;
    for t in jsonl(&root.join("libpcap-tests/apply.jsonl")) {
        let id = format!("apply:{}", t["id"].as_str().unwrap());
        if let Some(why) = skip_reason(&t) {
            println!("skipped {id}: {why}");
            skipped += 1;
            continue;
        }
        let cap = load_capture(
            &root
                .join("libpcap-tests")
                .join(t["savefile"].as_str().unwrap()),
        );
        let expr = t["expr"].as_str().unwrap();
        let optimize = t["optimize"].as_bool().unwrap_or(true);
        let want: Vec<u64> = t["expected_returns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        let result = (|| {
            let lt = LinkType::from_number(cap.linktype as u32)
                .ok_or(format!("link type {} not supported", cap.linktype))?;
            let p = Program::builder(lt)
                .snaplen(cap.snaplen)
                .optimize(optimize)
                .offline(true)
                .capture_big_endian(cap.big_endian)
                .expression(expr)
                .map_err(|e| format!("compile error: {e}"))?;
            let got: Vec<u64> = cap
                .packets
                .iter()
                .map(|k| p.run(&k.data, k.wirelen) as u64)
                .collect();
            if got == want {
                Ok(())
            } else {
                Err(format!("{expr}: returns {got:?} want {want:?}"))
            }
        })();
        ledger.record(id, result);
    }
    println!("apply: {skipped} skipped");
    ledger.finish("apply");
}

#[test]
fn libpcap_reject_tests() {
    let Some(root) = corpus::root() else {
        corpus::skipped("conformance");
        return;
    };
    let mut ledger = Ledger::new();
    for t in jsonl(&root.join("libpcap-tests/reject.jsonl")) {
        let id = format!("reject:{}", t["id"].as_str().unwrap());
        if let Some(why) = skip_reason(&t) {
            println!("skipped {id}: {why}");
            continue;
        }
        let lt = match (t["dlt"].as_str(), t["savefile"].as_str()) {
            (Some(d), _) => LinkType::from_name(d),
            (None, Some(f)) => match CaptureReader::open(root.join("libpcap-tests").join(f)) {
                // libpcap refuses the file itself: so do we.
                Err(_) => {
                    ledger.record(id, Ok(()));
                    continue;
                }
                Ok(r) => LinkType::from_number(r.linktype().unwrap_or(1) as u32),
            },
            _ => None,
        };
        let expr = t["expr"].as_str().unwrap();
        let result = match lt {
            None => Err(format!("link type {} not supported", t["dlt"])),
            Some(lt) => match Program::builder(lt).expression(expr) {
                Ok(_) => Err(format!("accepted '{expr}' (libpcap: {})", t["errstr"])),
                Err(_) => Ok(()),
            },
        };
        ledger.record(id, result);
    }
    let tsv = std::fs::read_to_string(root.join("expressions-reject.tsv")).unwrap();
    for (i, line) in tsv.lines().enumerate().skip(1) {
        let expr = line.split('\t').next().unwrap_or("");
        let result = match Program::builder(LinkType::EN10MB).expression(expr) {
            Ok(_) => Err(format!("accepted '{expr}'")),
            Err(_) => Ok(()),
        };
        ledger.record(format!("reject-tsv:{}", i + 1), result);
    }
    ledger.finish("reject");
}

#[test]
fn libpcap_accept_tests() {
    let Some(root) = corpus::root() else {
        corpus::skipped("conformance");
        return;
    };
    // Packets to run both programs on: every corpus capture's first packets.
    let mut pkts: Vec<Pkt> = Vec::new();
    let mut dirs = vec![root.join("pcaps"), root.join("libpcap-tests/filter")];
    for d in dirs.drain(..) {
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        names.sort();
        for p in names {
            let c = load_capture(&p);
            pkts.extend(c.packets.into_iter().take(8));
        }
    }
    // Plus truncations of a few, so short packets are covered.
    let extra: Vec<Pkt> = pkts
        .iter()
        .step_by(97)
        .flat_map(|p| {
            (0..p.data.len().min(80)).step_by(3).map(|n| Pkt {
                data: p.data[..n].to_vec(),
                wirelen: p.wirelen,
            })
        })
        .collect();
    pkts.extend(extra);
    let mut ledger = Ledger::new();
    let tests = jsonl(&root.join("libpcap-tests/accept.jsonl"));
    // libpcap's optimised and unoptimised programs may differ on truncated
    // packets; either answer is right, so gather both per (link, expression).
    let mut expected_by: HashMap<(String, String), Vec<Vec<sluice::bpf::Insn>>> = HashMap::new();
    for t in &tests {
        if let Ok(p) = sluice::bpf::parse_program(t["expected_bpf"].as_str().unwrap_or("")) {
            let key = (
                t["dlt"].as_str().unwrap_or("").to_string(),
                t["expr"].as_str().unwrap_or("").to_string(),
            );
            expected_by.entry(key).or_default().push(p);
        }
    }
    for t in tests {
        let id = format!("accept:{}", t["id"].as_str().unwrap());
        if let Some(why) = skip_reason(&t) {
            println!("skipped {id}: {why}");
            continue;
        }
        let expr = t["expr"].as_str().unwrap();
        if expr == "_enumerate_bpf_image" {
            continue; // a disassembler test, covered in sluice-bpf
        }
        let dlt = t["dlt"].as_str().unwrap();
        let snaplen = t["snaplen"].as_u64().unwrap_or(262144) as u32;
        let optimize = t["optimize"].as_bool().unwrap_or(true);
        let result = (|| {
            let lt = LinkType::from_name(dlt).ok_or(format!("link type {dlt} not supported"))?;
            let expected = sluice::bpf::parse_program(t["expected_bpf"].as_str().unwrap())
                .map_err(|e| format!("expected program does not parse: {e}"))?;
            // A savefile handle (in this host's byte order or the other)
            // where the test says so, else one without a file.
            let host_big = cfg!(target_endian = "big");
            let (offline, big_endian) = match t["offline"].as_str() {
                Some("swapped") => (true, !host_big),
                Some(_) => (true, host_big),
                None => (false, host_big),
            };
            let p = Program::builder(lt)
                .snaplen(snaplen)
                .optimize(optimize)
                .offline(offline)
                .capture_big_endian(big_endian)
                .expression(expr)
                .map_err(|e| format!("compile error: {e}"))?;
            let alts = &expected_by[&(dlt.to_string(), expr.to_string())];
            for (i, k) in pkts.iter().enumerate() {
                let want = sluice::bpf::run(&expected, &k.data, k.wirelen);
                let got = p.run(&k.data, k.wirelen);
                if want != got
                    && !alts
                        .iter()
                        .any(|a| sluice::bpf::run(a, &k.data, k.wirelen) == got)
                {
                    return Err(format!("{expr}: packet {i}: {got} want {want}"));
                }
            }
            Ok(())
        })();
        ledger.record(id, result);
    }
    ledger.finish("accept");
}
