//! Every `expected_bpf` listing of libpcap's test suite parses and prints
//! back byte-identically.

use sluice_bpf::{disasm_d, disasm_d_annotated, parse_program, Verifier};
use sluice_testsupport::corpus;

const ACCEPT: &str = "libpcap-tests/accept.jsonl";

fn cases() -> Option<Vec<(String, String)>> {
    let Some(text) = corpus::text(ACCEPT) else {
        corpus::skipped(ACCEPT);
        return None;
    };
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).expect("valid JSON line");
        let id = v["id"].as_str().unwrap_or("?").to_string();
        if let Some(bpf) = v["expected_bpf"].as_str() {
            out.push((id, bpf.to_string()));
        }
    }
    Some(out)
}

#[test]
fn every_expected_listing_round_trips() {
    let Some(cases) = cases() else { return };
    assert!(cases.len() > 4000, "only {} cases", cases.len());
    let mut annotated = 0;
    let mut insns_total = 0;
    for (id, expected) in &cases {
        let prog = parse_program(expected).unwrap_or_else(|e| panic!("{id}: {e}"));
        insns_total += prog.len();
        let printed = if expected.contains("; 0x") {
            annotated += 1;
            disasm_d_annotated(&prog)
        } else {
            disasm_d(&prog)
        };
        // The suite stores lines without the trailing blank that libpcap
        // prints after operand-less mnemonics (`tax `): compare lines with
        // trailing whitespace removed, everything else byte for byte.
        let ours: Vec<&str> = printed.lines().map(str::trim_end).collect();
        let theirs: Vec<&str> = expected.lines().map(str::trim_end).collect();
        assert_eq!(ours, theirs, "{id}");
    }
    assert!(annotated >= 1, "the _enumerate_bpf_image case is missing");
    eprintln!("{} listings, {insns_total} instructions", cases.len());
}

#[test]
fn every_expected_program_passes_the_userland_verifier() {
    let Some(cases) = cases() else { return };
    let mut kernel_rejects = std::collections::BTreeMap::<String, usize>::new();
    for (id, expected) in &cases {
        if expected.contains("; 0x") {
            continue; // the opcode enumeration is not a meaningful program
        }
        let prog = parse_program(expected).unwrap();
        if let Err(e) = Verifier::userland().verify(&prog) {
            panic!("{id}: {e}\n{expected}");
        }
        if let Err(e) = Verifier::kernel().verify(&prog) {
            let reason = format!("{e:?}");
            let kind = reason.split([' ', '{']).next().unwrap_or("").to_string();
            *kernel_rejects.entry(kind).or_default() += 1;
        }
    }
    eprintln!("the kernel verifier rejects: {kernel_rejects:?}");
}
