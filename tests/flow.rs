//! `sluice flow` and the flow library against independent answers: BPF
//! flows count what libpcap's verdicts say on the shared captures, the
//! command agrees with `sluice filter`, its JSON has the documented shape,
//! bad specifications and policy refusals say where.

mod common;
use common::{fresh_dir as tmp, manifest, sample, sluice, text};

use flate2::read::GzDecoder;
use sluice_flow::value::Value;
use sluice_flow::{Flow, Group, GroupConfig};
use sluice_testsupport::corpus;
use std::collections::{HashMap, HashSet};
use std::io::BufRead;
use std::process::{Command, Output};

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o.stdout)))
}

fn count_of(expr: &str, file: &str) -> u64 {
    let o = sluice(&["filter", "-r", file, "--count", expr]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    text(&o.stdout).trim().parse().unwrap()
}

/// Verdict strings of the chosen (capture, expression line) pairs.
fn oracle(file: &str, want: &HashSet<(String, usize)>) -> HashMap<(String, usize), String> {
    let path = corpus::path("oracle").expect("the corpus").join(file);
    let r = std::io::BufReader::new(GzDecoder::new(std::fs::File::open(path).unwrap()));
    let mut out = HashMap::new();
    for line in r.lines() {
        let line = line.unwrap();
        let mut f = line.splitn(4, '\t');
        let (Some(cap), Some(n), Some(ok), Some(v)) = (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let key = (cap.to_string(), n.parse().unwrap_or(0));
        if ok == "OK" && want.contains(&key) {
            out.insert(key, v.to_string());
        }
    }
    out
}

#[test]
fn bpf_flow_counters_equal_libpcap_verdicts_on_the_corpus() {
    let (Some(root), Some(exprs)) = (corpus::root(), corpus::text("expressions.txt")) else {
        corpus::skipped("flow counters");
        return;
    };
    let exprs: Vec<(usize, String)> = exprs
        .lines()
        .enumerate()
        .map(|(i, e)| (i + 1, e.to_string()))
        .filter(|(i, _)| i % 37 == 1)
        .collect();
    let caps: Vec<String> = corpus::pcaps()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .step_by(13)
        .collect();
    let want: HashSet<(String, usize)> = caps
        .iter()
        .flat_map(|c| exprs.iter().map(move |(n, _)| (c.clone(), *n)))
        .collect();
    let opt = oracle("verdicts-master.tsv.gz", &want);
    let unopt = oracle("verdicts-master-unopt.tsv.gz", &want);
    let mut checked = 0;
    for cap in &caps {
        let file = root.join("pcaps").join(cap).to_string_lossy().into_owned();
        let key = |n: usize| (cap.clone(), n);
        // Every expression libpcap accepted, as flows of one group: the BPF
        // elements all hang off the file and run as one merged classifier.
        let chosen: Vec<&(usize, String)> = exprs
            .iter()
            .filter(|(n, _)| opt.contains_key(&key(*n)))
            .collect();
        let g = Group::new(GroupConfig::default()).unwrap();
        let mut flows = Vec::new();
        for (n, e) in &chosen {
            let spec = format!(
                "(file,{file}) -> (BPF,\"{}\") -> (packetcount)",
                e.replace('\\', "\\\\").replace('"', "\\\"")
            );
            let mut f = Flow::create(&g);
            f.populate(&spec)
                .unwrap_or_else(|err| panic!("{spec}: {err}"));
            match f.instantiate_unchecked() {
                Ok(()) => {
                    f.activate().unwrap();
                    flows.push((*n, f));
                }
                Err(err) => panic!("{cap} line {n} {e}: {err}"),
            }
        }
        if let Err(e) = g.run() {
            // A truncated capture: its packets before the damage were
            // counted; libpcap's verdicts cover the same packets.
            assert!(e.to_string().contains(cap.as_str()), "{e}");
        }
        for (n, f) in &flows {
            let ones = |v: &String| v.bytes().filter(|&b| b == b'1').count() as u64;
            let got = f
                .report()
                .unwrap()
                .filters
                .iter()
                .find(|x| x.class == "packetcount")
                .and_then(|x| x.result.as_u64())
                .unwrap();
            let a = ones(&opt[&key(*n)]);
            let b = unopt.get(&key(*n)).map(ones).unwrap_or(a);
            assert!(
                got == a || got == b,
                "{cap} line {n}: flow {got}, libpcap {a}/{b}"
            );
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} comparisons");
}

#[test]
fn json_shape_and_counts_agree_with_sluice_filter() {
    let s = sample();
    let o = sluice(&[
        "flow",
        "--json",
        &format!("(file,{s}) -> (BPF,\"tcp\") -> (packetcount)"),
        &format!("(file,{s}) -> (BPF,\"udp\") -> (bytecount,,8)"),
        &format!("(file,{s}) -> (BPF,\"ip\")"),
    ]);
    let v = json(&o);
    let flows = v["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 3);
    for f in flows {
        assert!(f["spec"].is_string());
        assert!(f["packets"].is_u64());
        assert!(f["drops"].is_u64());
        for x in f["filters"].as_array().unwrap() {
            assert!(x["class"].is_string() && x["instance"].is_string());
            assert!(x.get("result").is_some());
        }
    }
    assert_eq!(flows[0]["filters"][2]["class"], "packetcount");
    assert_eq!(
        flows[0]["filters"][2]["result"].as_u64().unwrap(),
        count_of("tcp", &s)
    );
    // The three flows share the one file instance.
    let inst: HashSet<&str> = flows
        .iter()
        .map(|f| f["filters"][0]["instance"].as_str().unwrap())
        .collect();
    assert_eq!(inst.len(), 1);
    // A flow's packets are what it took, what its counter counts; counters
    // pass nothing on, so nothing is delivered; a flow ending in a filter
    // delivers its packets.
    assert_eq!(flows[0]["packets"].as_u64().unwrap(), count_of("tcp", &s));
    assert_eq!(flows[0]["delivered"], 0);
    assert_eq!(flows[1]["packets"].as_u64().unwrap(), count_of("udp", &s));
    assert_eq!(flows[2]["packets"].as_u64().unwrap(), count_of("ip", &s));
    assert_eq!(flows[2]["delivered"], flows[2]["packets"]);
    // bytecount: the wire bytes of the udp packets.
    let mut r = sluice::capture::CaptureReader::open(&s).unwrap();
    let p = sluice::Program::builder(sluice::LinkType::EN10MB)
        .snaplen(65535)
        .expression("udp")
        .unwrap();
    let mut bytes = 0u64;
    while let Some(pkt) = r.next_packet().unwrap() {
        if p.run(pkt.data, pkt.wirelen) != 0 {
            bytes += pkt.wirelen as u64;
        }
    }
    assert_eq!(flows[1]["filters"][2]["result"].as_u64().unwrap(), bytes);
}

#[test]
fn write_dir_holds_what_sluice_filter_writes() {
    let dir = tmp("write");
    let s = sample();
    let out = dir.join("out");
    for pref in ["srp", "frp"] {
        let o = sluice(&[
            "flow",
            "--preference",
            pref,
            "--every",
            "3",
            "-w",
            out.to_str().unwrap(),
            &format!("(file,{s}) -> (BPF,\"tcp\")"),
            &format!("(file,{s}) -> (sampler,1) -> (BPF,\"tcp\") | (BPF,\"arp\")"),
            &format!("(file,{s}) -> (BPF,\"tcp\") -> (packetcount)"),
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let want = dir.join("tcp.pcap");
        let f = sluice(&["filter", "-r", &s, "-w", want.to_str().unwrap(), "tcp"]);
        assert!(f.status.success());
        assert_eq!(
            std::fs::read(out.join("flow1.pcap")).unwrap(),
            std::fs::read(&want).unwrap()
        );
        let both = dir.join("both.pcap");
        sluice(&[
            "filter",
            "-r",
            &s,
            "-w",
            both.to_str().unwrap(),
            "tcp or arp",
        ]);
        assert_eq!(
            std::fs::read(out.join("flow2.pcap")).unwrap(),
            std::fs::read(&both).unwrap()
        );
        // A flow that delivers nothing still gets a (header-only) file.
        assert_eq!(std::fs::read(out.join("flow3.pcap")).unwrap().len(), 24);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_specs_exit_1_and_say_where() {
    let s = sample();
    for (spec, col) in [
        (format!("(file,{s}) -> sampler"), "column"),
        (format!("(file,{s}) -> (BPF,\"tcp prot 80\")"), "column"),
        (format!("(file,{s}) -> (nosuch)"), "unknown filter class"),
        ("(iface,nosuch0)".to_string(), "nosuch0: no such interface"),
        ("(file,/nonexistent/x.pcap)".to_string(), "nonexistent"),
        (
            format!("(file,{s}) -> (FPL-2,\"RETURN MEM[9999999];\",16)"),
            "FPL line 1",
        ),
    ] {
        let o = sluice(&["flow", &spec]);
        assert_eq!(o.status.code(), Some(1), "{spec}");
        let err = text(&o.stderr);
        assert!(
            err.contains("flow 1:") && err.contains(col),
            "{spec}: {err}"
        );
    }
    // The caret sits under the column.
    let o = sluice(&["flow", "(file,a) -> sampler"]);
    let err = text(&o.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines[0].contains("column 13"), "{err}");
    assert_eq!(lines[2].find('^'), lines[1].find("sampler"), "{err}");
}

#[test]
fn policy_refusals_name_the_rule() {
    let dir = tmp("policy");
    let pol = dir.join("site.policy");
    std::fs::write(
        &pol,
        "# test\nallow source=file class=sampler,strsearch,bpf,packetcount\nrequire sampler before strsearch\n",
    )
    .unwrap();
    let s = sample();
    let o = sluice(&[
        "flow",
        "--policy",
        pol.to_str().unwrap(),
        &format!("(file,{s}) -> (strsearch,GET) -> (packetcount)"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("refused by {}:3", pol.display())),
        "{err}"
    );
    let o = sluice(&[
        "flow",
        "--policy",
        pol.to_str().unwrap(),
        &format!("(file,{s}) -> (sampler,2) -> (strsearch,GET) -> (packetcount)"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = sluice(&[
        "flow",
        "--policy",
        pol.to_str().unwrap(),
        &format!("(file,{s}) -> (bytecount)"),
    ]);
    assert!(text(&o.stderr).contains("no rule allows class bytecount"));
    std::fs::write(&pol, "allow class=*\nfrobnicate\n").unwrap();
    let o = sluice(&[
        "flow",
        "--policy",
        pol.to_str().unwrap(),
        &format!("(file,{s})"),
    ]);
    assert!(
        text(&o.stderr).contains("site.policy:2:"),
        "{}",
        text(&o.stderr)
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dot_shows_one_sampler_for_two_flows() {
    let dir = tmp("dot");
    let dot = dir.join("g.dot");
    let s = sample();
    let o = sluice(&[
        "flow",
        "--dot",
        dot.to_str().unwrap(),
        &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"tcp\") -> (bytecount,,8)"),
        &format!("(file,{s}) -> (sampler,2,4) -> (BPF,\"udp\") -> (packetcount,,8)"),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let d = std::fs::read_to_string(&dot).unwrap();
    assert!(d.starts_with("digraph"));
    assert_eq!(d.matches("label=\"sampler#").count(), 1);
    assert_eq!(d.matches("label=\"BPF#").count(), 2);
    assert_eq!(d.matches("shape=ellipse").count(), 2);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn example_specs_run() {
    // Every line of examples/flows.txt is a spec that runs from the
    // repository root.
    let text_ = std::fs::read_to_string(manifest("examples/flows.txt")).unwrap();
    for line in text_
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let o = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .current_dir(manifest(""))
            .args(["flow", "--json", "--policy", "examples/flow.policy", line])
            .output()
            .unwrap();
        let v = json(&o);
        assert_eq!(v["flows"].as_array().unwrap().len(), 1, "{line}");
        let _ = Value::Null;
    }
}
