//! The eBPF engine (`--engine ebpf`) against libpcap master, in the kernel.
//!
//! - Every expression of the shared corpus on every capture
//!   (`../shared/conformance`): the verdicts of the filter's eBPF program,
//!   run by the kernel with `BPF_PROG_TEST_RUN`, equal libpcap master's,
//!   optimised or unoptimised (as `tests/conformance.rs` rules). Packets
//!   longer than the kernel's test run takes
//!   ([`sluice::ebpf::MAX_TEST_PACKET`]) are left out, and counted.
//! - `sluice filter --engine ebpf --verdicts` prints the same lines as the
//!   BPF interpreter on corpus captures; `-d --engine ebpf` lists the
//!   program; a packet too long for the test run is a clear error.
//!
//! Where the kernel refuses BPF (no root, no CAP_BPF) the tests say
//! SKIPPED, unless `SLUICE_LIVE_REQUIRED` is set (scripts/test.sh sets it
//! as root), when they fail.

use sluice::ebpf::{Error, Loaded, Mode, MAX_TEST_PACKET};
use sluice::{LinkType, Program};
use sluice_testsupport::corpus;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Whether this process may load BPF programs; false (after saying
/// SKIPPED) where it may not and nothing requires it.
fn bpf_permitted(what: &str) -> bool {
    let f = sluice::ir::Filter::new(sluice::ir::Pred::True, 1);
    match Loaded::compile(&f, Mode::TestRun) {
        Ok(_) => true,
        Err(Error::NotPermitted(e)) if std::env::var_os("SLUICE_LIVE_REQUIRED").is_none() => {
            eprintln!("SKIPPED {what}: the kernel refuses BPF here ({e})");
            false
        }
        Err(e) => panic!("{what}: {e}"),
    }
}

struct Capture {
    linktype: u16,
    big_endian: bool,
    packets: Vec<(Vec<u8>, u32)>,
}

fn load_capture(path: &Path) -> Capture {
    let c = corpus::Capture::read(path)
        .unwrap_or_else(|| panic!("{}: cannot be opened", path.display()));
    let big_endian = match c.format {
        sluice::capture::CaptureFormat::Pcap { big_endian, .. }
        | sluice::capture::CaptureFormat::PcapNg { big_endian, .. } => big_endian,
    };
    Capture {
        linktype: c.linktype(),
        big_endian,
        packets: c.packets.into_iter().map(|p| (p.data, p.wirelen)).collect(),
    }
}

#[test]
fn ebpf_verdicts_equal_libpcap_masters_on_the_corpus() {
    let Some(root) = corpus::root() else {
        corpus::skipped("ebpf conformance");
        return;
    };
    if !bpf_permitted("ebpf conformance") {
        return;
    }
    let exprs: Vec<String> = std::fs::read_to_string(root.join("expressions.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let unopt = corpus::unopt_verdicts();
    let mut captures: HashMap<String, Capture> = HashMap::new();
    let mut progs: HashMap<(usize, u16), Option<Loaded>> = HashMap::new();
    let (mut cases, mut packets, mut too_long, mut no_ir) = (0, 0u64, 0u64, 0);
    let mut failures = Vec::new();
    for line in corpus::gz_lines("oracle/verdicts-master.tsv.gz").expect("the oracle") {
        let f: Vec<&str> = line.split('\t').collect();
        let (file, n) = (f[0], f[1].parse::<usize>().unwrap());
        if f[2] != "OK" {
            continue;
        }
        let cap = captures
            .entry(file.to_string())
            .or_insert_with(|| load_capture(&root.join("pcaps").join(file)));
        let expr = &exprs[n - 1];
        let prog = progs.entry((n, cap.linktype)).or_insert_with(|| {
            let lt = LinkType::from_number(cap.linktype as u32)?;
            let p = Program::builder(lt)
                .offline(true)
                .capture_big_endian(cap.big_endian)
                .expression(expr)
                .ok()?;
            let ir = p.ir()?;
            Some(
                Loaded::compile(ir, Mode::TestRun)
                    .unwrap_or_else(|e| panic!("{expr} on {file}: {e}")),
            )
        });
        let Some(prog) = prog else {
            // The conformance test checks these (compile errors, programs
            // without an intermediate form).
            no_ir += 1;
            continue;
        };
        cases += 1;
        let mut got = String::new();
        let mut skip = Vec::new();
        for (i, (data, wirelen)) in cap.packets.iter().enumerate() {
            if data.len() > MAX_TEST_PACKET {
                skip.push(i);
                got.push('-');
                continue;
            }
            let r = prog.run(data, *wirelen).unwrap();
            got.push(if r != 0 { '1' } else { '0' });
        }
        packets += (cap.packets.len() - skip.len()) as u64;
        too_long += skip.len() as u64;
        let mask = |w: &str| -> String {
            w.chars()
                .enumerate()
                .map(|(i, c)| if skip.contains(&i) { '-' } else { c })
                .collect()
        };
        let want = mask(f[3]);
        let want_unopt = unopt
            .get(&(f[0].to_string(), f[1].to_string()))
            .map(|u| mask(u));
        if got != want && want_unopt.as_deref() != Some(got.as_str()) {
            failures.push(format!("{file}:{n} ({expr}): ebpf {got} libpcap {want}"));
        }
    }
    eprintln!(
        "ebpf conformance: {cases} cases, {packets} packets run in the kernel, \
         {too_long} packets longer than the test run takes left out, \
         {no_ir} cases without an intermediate form"
    );
    assert!(cases > 10_000, "only {cases} cases ran");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
}

fn sluice(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .expect("run sluice")
}

#[test]
fn the_command_gives_the_interpreters_verdicts() {
    if !bpf_permitted("ebpf command") {
        return;
    }
    let caps: Vec<_> = corpus::pcaps_or_sample()
        .into_iter()
        .filter(|p| {
            corpus::Capture::read(p)
                .is_some_and(|c| c.packets.iter().all(|k| k.data.len() <= MAX_TEST_PACKET))
        })
        .take(12)
        .collect();
    assert!(!caps.is_empty());
    for cap in &caps {
        let cap = cap.to_str().unwrap();
        for expr in [
            "tcp port 80",
            "ip6 or arp",
            "ip proto \\tcp and len > 100",
            "udp[8:2] = 0x1234 or ip[6:2] & 0x1fff != 0",
            "ip protochain 6",
            "not vlan",
        ] {
            let ebpf = sluice(&["filter", "--engine", "ebpf", "--verdicts", "-r", cap, expr]);
            let interp = sluice(&[
                "filter",
                "--engine",
                "interp",
                "--verdicts",
                "-r",
                cap,
                expr,
            ]);
            assert_eq!(
                String::from_utf8_lossy(&ebpf.stdout),
                String::from_utf8_lossy(&interp.stdout),
                "{cap}: {expr}: {}",
                String::from_utf8_lossy(&ebpf.stderr)
            );
            assert_eq!(ebpf.status.code(), interp.status.code(), "{cap}: {expr}");
        }
    }
}

#[test]
fn dash_d_lists_the_ebpf_program() {
    let out = sluice(&["filter", "-d", "--engine", "ebpf", "ip"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    // The file engine's program copies the frame's first bytes to its
    // stack with direct reads and reads them there.
    assert!(text.contains("r1 = *(u32 *)(r2 +10)"), "{text}");
    assert!(text.contains("r0 = *(u16 *)(r10 -490)"), "{text}");
    assert!(text.contains("r0 = be16 r0"), "{text}");
    assert!(text.contains("if w0 == 0x800 goto"), "{text}");
    assert!(text.trim_end().ends_with("exit"), "{text}");
}

#[test]
fn a_packet_too_long_for_the_test_run_is_a_clear_error() {
    if !bpf_permitted("ebpf long packet") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("sluice-ebpf-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("long.pcap");
    // A pcap file: one 60-byte packet, then one of 5,000 bytes.
    let mut f = Vec::new();
    f.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    f.extend_from_slice(&2u16.to_le_bytes());
    f.extend_from_slice(&4u16.to_le_bytes());
    for w in [0u32, 0, 65535, 1] {
        f.extend_from_slice(&w.to_le_bytes());
    }
    for len in [60u32, 5000] {
        for w in [0, 0, len, len] {
            f.extend_from_slice(&w.to_le_bytes());
        }
        f.extend(std::iter::repeat(0u8).take(len as usize));
    }
    std::fs::write(&path, &f).unwrap();
    let out = sluice(&[
        "filter",
        "--engine",
        "ebpf",
        "--verdicts",
        "-r",
        path.to_str().unwrap(),
        "len > 0",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1\n");
    assert!(
        err.contains("packet 2") && err.contains("5000 bytes"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
