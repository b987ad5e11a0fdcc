//! `sluice bench` as a user runs it: the table, the JSON last line, the
//! engines' agreement, and errors.

mod common;
use common::{sample, sluice, tmp_file as tmp};

use std::path::Path;
use std::process::Output;

/// `sluice bench` on the sample capture for a short time, with `args`
/// after the common ones; it must succeed.
fn bench(args: &[&str]) -> Output {
    let sample = sample();
    let mut all = vec!["bench", "-r", &sample, "--seconds", "0.02"];
    all.extend_from_slice(args);
    let o = sluice(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    o
}

/// [`bench`] with the filters file `f`.
fn bench_filters(f: &Path) -> Output {
    bench(&["--filters", f.to_str().unwrap()])
}

/// The JSON object on the last line of standard output.
fn last_json(o: &Output) -> serde_json::Value {
    let out = String::from_utf8_lossy(&o.stdout);
    let last = out.lines().last().expect("some output");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {last}"))
}

/// How many packets `sluice filter --count` accepts.
fn count(expr: &str) -> u64 {
    let o = sluice(&["filter", "-r", &sample(), "--count", expr]);
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

/// The accepted column of the libpcap row.
fn libpcap_accepted(o: &Output) -> u64 {
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("libpcap ")).expect(&out);
    row.split_whitespace()
        .rev()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn one_expression_every_engine_agrees_and_json_is_last() {
    let o = bench(&["tcp"]);
    let out = String::from_utf8_lossy(&o.stdout);
    for engine in ["native", "native-batch", "interp", "reference"] {
        let row = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(engine))
            .unwrap_or_else(|| panic!("no row for {engine}:\n{out}"));
        // The accepted column is the same as `sluice filter --count`.
        let accepted: u64 = row.split_whitespace().nth(3).unwrap().parse().unwrap();
        assert_eq!(accepted, count("tcp"), "{row}");
    }
    let j = last_json(&o);
    assert_eq!(j["engine"], "native");
    assert_eq!(j["packets"], 14);
    assert_eq!(j["filters"], 1);
    assert!(j["ns_per_packet"].as_f64().unwrap() > 0.0);
}

#[test]
fn engine_choice_names_the_json_line() {
    let o = bench(&["--engine", "interp", "--no-libpcap", "udp"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("native"), "{out}");
    assert!(!out.lines().any(|l| l.starts_with("libpcap")), "{out}");
    let j = last_json(&o);
    assert_eq!(j["engine"], "interp");
    assert!(j.get("libpcap_ns_per_packet").is_none());
}

#[test]
fn libpcap_column_when_installed() {
    if !Path::new("/usr/include/pcap/pcap.h").exists() {
        return; // scripts/test.sh installs it; a bare machine skips
    }
    let o = bench(&["tcp port 80"]);
    let accepted = libpcap_accepted(&o);
    assert_eq!(accepted, count("tcp port 80"));
    assert!(last_json(&o)["libpcap_ns_per_packet"].as_f64().unwrap() > 0.0);
}

/// `--libpcap` (or `SLUICE_LIBPCAP`) puts another libpcap in the column:
/// libpcap master, compiling on the capture file itself, accepts what
/// sluice accepts, on a loopback capture from macOS too.
#[test]
fn libpcap_master_column() {
    let Some(so) = sluice_testsupport::master::library("bench --libpcap") else {
        return;
    };
    let so = so.to_str().unwrap();
    let o = bench(&["--libpcap", so, "tcp port 80"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = out.lines().find(|l| l.starts_with("libpcap ")).expect(&out);
    assert!(row.contains("PRE-GIT") || row.contains("1.11"), "{row}");
    // A DLT_NULL capture written on a little-endian macOS host: AF_INET6
    // is 30 there.
    let mut pkt = 30u32.to_le_bytes().to_vec();
    pkt.extend([0x60, 0, 0, 0, 0, 8, 17, 64]);
    pkt.extend([0; 32]);
    pkt.extend([0x12, 0x34, 0, 53, 0, 8, 0, 0]);
    let f = tmp("macos-loopback.pcap");
    let refs: Vec<&[u8]> = (0..5).map(|_| pkt.as_slice()).collect();
    std::fs::write(&f, sluice_testsupport::savefile::pcap(0, false, &refs)).unwrap();
    let f = f.to_str().unwrap();
    for (env, args) in [
        (
            true,
            vec!["bench", "-r", f, "--seconds", "0.02", "udp port 53"],
        ),
        (
            false,
            vec![
                "bench",
                "-r",
                f,
                "--seconds",
                "0.02",
                "--libpcap",
                so,
                "ip6",
            ],
        ),
    ] {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
        c.args(&args);
        if env {
            c.env(sluice::libpcap::ENV, so);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        for row in out
            .lines()
            .filter(|l| l.starts_with("native ") || l.starts_with("libpcap "))
        {
            let accepted = row.split_whitespace().rev().nth(1).unwrap();
            assert_eq!(accepted, "5", "{row}\n{out}");
        }
    }
}

#[test]
fn filters_file_merged_against_one_by_one() {
    let f = tmp("filters");
    std::fs::write(&f, "web\ttcp port 80\ndns\tudp port 53\nall\t\n").unwrap();
    let o = bench_filters(&f);
    let out = String::from_utf8_lossy(&o.stdout);
    for engine in ["classifier-batch", "classifier", "native,", "interp,"] {
        assert!(
            out.lines().any(|l| l.starts_with(engine)),
            "{engine}:\n{out}"
        );
    }
    let j = last_json(&o);
    // The JSON line names the fastest merged engine there is.
    let native = cfg!(any(target_arch = "x86_64", target_arch = "aarch64"));
    let best = if native {
        "classifier-native"
    } else {
        "classifier-batch"
    };
    assert_eq!(j["engine"], best);
    assert_eq!(j["filters"], 3);
}

/// A filter libpcap refuses as rejecting every packet (its optimiser
/// proves what sluice's does not) keeps the libpcap column: libpcap's
/// interpreter runs sluice's program for it, the same meaning.
#[test]
fn libpcap_column_survives_a_filter_libpcap_proves_empty() {
    if !Path::new("/usr/include/pcap/pcap.h").exists() {
        return; // scripts/test.sh installs it; a bare machine skips
    }
    let odd = "((vlan or host 10.1.211.39) and (ip proto 89 or ether[10:2] != 0x2d79)) \
               and ((src or dst portrange 7922-8331 or ip[7] != 122) and ip6 proto 47)";
    assert_eq!(count(odd), 0);
    let f = tmp("provably-empty");
    std::fs::write(&f, format!("web\ttcp port 80\nodd\t{odd}\n")).unwrap();
    let o = bench_filters(&f);
    let accepted = libpcap_accepted(&o);
    assert_eq!(accepted, count("tcp port 80"));
    assert!(String::from_utf8_lossy(&o.stderr).contains("libpcap refuses"));
}

#[test]
fn bad_input_exits_1_with_a_message() {
    let o = sluice(&["bench", "-r", &sample(), "tcp port"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sluice:"));
    let o = sluice(&["bench", "-r", "/nonexistent.pcap", "tcp"]);
    assert_eq!(o.status.code(), Some(1));
    let o = sluice(&["bench", "-r", &sample(), "--seconds", "0", "tcp"]);
    assert_eq!(o.status.code(), Some(1));
    let o = sluice(&["bench", "-r", &sample(), "--engine", "classifier", "tcp"]);
    assert_eq!(o.status.code(), Some(1), "classifier needs --filters");
}

#[test]
fn any_language_and_libpcap_runs_sluices_bpf_for_the_others() {
    let f = tmp("mixed");
    std::fs::write(
        &f,
        "pcap\ttcp\ndpf\tdpf:(12:16 == 0x800) && (23:8 == 6)\nbpf\tbpf:@tcp.bpf\n",
    )
    .unwrap();
    // `tcp` on IPv4 only, as BPF text (tcpdump -d of `ip proto 6`).
    std::fs::write(
        f.with_file_name("tcp.bpf"),
        "(000) ldh [12]\n(001) jeq #0x800 jt 2 jf 5\n(002) ldb [23]\n(003) jeq #0x6 jt 4 jf 5\n(004) ret #262144\n(005) ret #0\n",
    )
    .unwrap();
    let o = bench_filters(&f);
    assert_eq!(last_json(&o)["filters"], 3);
    // One filter in another language on the command line.
    let o = bench(&["dpf:(12:16 == 0x800)"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let row = |name: &str| -> u64 {
        let l = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name}: {out}"));
        l.split_whitespace().rev().nth(1).unwrap().parse().unwrap()
    };
    assert_eq!(row("native "), count("ip"));
    if out.lines().any(|l| l.starts_with("libpcap ")) {
        assert_eq!(row("libpcap "), count("ip"));
    }
}
