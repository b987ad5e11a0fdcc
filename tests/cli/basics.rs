//! Flags, outputs and exit codes as they always were.

use super::common::{sample, sluice, text, tmp_file as tmp};
use super::sluice_stdin;
use std::process::Command;

#[test]
fn count_and_verdicts_agree() {
    let s = sample();
    let c = sluice(&["filter", "-r", &s, "--count", "tcp port 80"]);
    assert!(c.status.success());
    assert_eq!(text(&c.stdout).trim(), "5");
    let v = sluice(&["filter", "-r", &s, "--verdicts", "tcp", "port", "80"]);
    let lines: Vec<String> = text(&v.stdout).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 14, "one line per packet");
    assert_eq!(lines.iter().filter(|l| *l == "1").count(), 5);
    assert_eq!(lines.join(""), "00011111000000");
}

#[test]
fn engines_agree() {
    let s = sample();
    for e in ["tcp port 80", "ip or ip6", "not arp and greater 100", "udp"] {
        let v: Vec<String> = ["interp", "native"]
            .iter()
            .map(|engine| {
                let o = sluice(&["filter", "-r", &s, "--verdicts", "--engine", engine, e]);
                assert!(o.status.success());
                text(&o.stdout)
            })
            .collect();
        assert_eq!(v[0], v[1], "{e}");
    }
    let bad = sluice(&["filter", "-r", &s, "--engine", "gpu", "tcp"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn json_count() {
    let o = sluice(&["filter", "-r", &sample(), "--count", "--json", "arp"]);
    assert_eq!(text(&o.stdout).trim(), "{\"packets\": 14, \"accepted\": 1}");
}

#[test]
fn write_keeps_format_and_reads_back() {
    let out = tmp("w.pcap");
    let o = sluice(&[
        "filter",
        "-r",
        &sample(),
        "-w",
        out.to_str().unwrap(),
        "udp",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    // The output has the input's header and only the accepted packets.
    let input = std::fs::read(sample()).unwrap();
    let written = std::fs::read(&out).unwrap();
    assert_eq!(written[..24], input[..24]);
    let n = sluice(&["filter", "-r", out.to_str().unwrap(), "--count", ""]);
    assert_eq!(text(&n.stdout).trim(), "3");
    let again = sluice(&["filter", "-r", out.to_str().unwrap(), "--count", "not udp"]);
    assert_eq!(text(&again.stdout).trim(), "0");
}

#[test]
fn stdin_to_stdout() {
    let input = std::fs::read(sample()).unwrap();
    let o = sluice_stdin(&["filter", "-r", "-", "-w", "-", "icmp"], &input);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let back = sluice_stdin(&["filter", "--count", ""], &o.stdout);
    assert_eq!(text(&back.stdout).trim(), "2");
}

#[test]
fn dump_formats_load_back() {
    for flag in ["-d", "-dd", "-ddd"] {
        let d = sluice(&["filter", flag, "tcp port 80"]);
        assert!(d.status.success());
        let prog = tmp(&format!("prog{flag}.txt"));
        std::fs::write(&prog, &d.stdout).unwrap();
        let o = sluice(&[
            "filter",
            "-r",
            &sample(),
            "--bpf-file",
            prog.to_str().unwrap(),
            "--count",
        ]);
        assert!(o.status.success(), "{flag}: {}", text(&o.stderr));
        assert_eq!(text(&o.stdout).trim(), "5", "{flag}");
    }
}

#[test]
fn dump_for_another_link_type() {
    let o = sluice(&["filter", "-y", "RAW", "-d", "ip"]);
    assert!(o.status.success());
    assert!(text(&o.stdout).contains("ldb      [0]"));
    let bad = sluice(&["filter", "-y", "NOSUCH", "-d", "ip"]);
    assert_eq!(bad.status.code(), Some(1));
}

#[test]
fn expression_file() {
    let f = tmp("expr.txt");
    std::fs::write(&f, "# web traffic\ntcp port 80\n").unwrap();
    let o = sluice(&[
        "filter",
        "-r",
        &sample(),
        "-F",
        f.to_str().unwrap(),
        "--count",
    ]);
    assert_eq!(text(&o.stdout).trim(), "5");
}

#[test]
fn bad_expression_exits_1_with_column() {
    let o = sluice(&["filter", "-r", &sample(), "tcp port"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("column 9"), "{}", text(&o.stderr));
    let dns = sluice(&[
        "filter",
        "-r",
        &sample(),
        "--no-resolve",
        "host example.com",
    ]);
    assert_eq!(dns.status.code(), Some(1));
    assert!(text(&dns.stderr).contains("DNS"), "{}", text(&dns.stderr));
}

#[test]
fn bad_usage_exits_2() {
    assert_eq!(sluice(&["filter", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(sluice(&["frobnicate"]).status.code(), Some(2));
}

#[test]
fn truncated_file_keeps_what_came_before() {
    let input = std::fs::read(sample()).unwrap();
    let cut = tmp("cut.pcap");
    // Cut in the middle of the fourth packet's bytes.
    std::fs::write(&cut, &input[..300]).unwrap();
    let out = tmp("cut-out.pcap");
    let o = sluice(&[
        "filter",
        "-r",
        cut.to_str().unwrap(),
        "-w",
        out.to_str().unwrap(),
        "",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = text(&o.stderr);
    assert!(
        err.contains("cut.pcap") && err.contains("byte offset"),
        "{err}"
    );
    let n = sluice(&["filter", "-r", out.to_str().unwrap(), "--count", ""]);
    assert_eq!(
        text(&n.stdout).trim(),
        "3",
        "the complete packets were written"
    );
    let missing = sluice(&["filter", "-r", "/no/such/file.pcap", ""]);
    assert_eq!(missing.status.code(), Some(1));
}

#[test]
fn default_output_summarises_packets() {
    let o = sluice(&["filter", "-r", &sample(), "arp or icmp6"]);
    let t = text(&o.stdout);
    assert!(
        t.contains("ARP, Request who-has 192.168.1.1 tell 192.168.1.10"),
        "{t}"
    );
    assert!(
        t.contains("IP6 fe80::1 > ff02::1: ICMP6, echo request, id 9, seq 1, length 8"),
        "{t}"
    );
}

/// A one-packet DLT_NULL pcap in either byte order: the 4-byte address
/// family is in the capturing host's order, like the file header.
fn null_capture(big_endian: bool) -> Vec<u8> {
    let w32 = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut pkt = w32(2).to_vec(); // AF_INET
    pkt.extend([
        0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ]);
    let mut f = Vec::new();
    f.extend(w32(0xa1b2_c3d4));
    f.extend(w16(2));
    f.extend(w16(4));
    f.extend(w32(0));
    f.extend(w32(0));
    f.extend(w32(65535));
    f.extend(w32(0)); // DLT_NULL
    f.extend(w32(1));
    f.extend(w32(0));
    f.extend(w32(pkt.len() as u32));
    f.extend(w32(pkt.len() as u32));
    f.extend(pkt);
    f
}

#[test]
fn null_link_address_family_follows_the_files_byte_order() {
    for big in [false, true] {
        let path = tmp(&format!("null-{big}.pcap"));
        std::fs::write(&path, null_capture(big)).unwrap();
        let p = path.to_str().unwrap();
        let ip = sluice(&["filter", "-r", p, "--count", "ip"]);
        assert_eq!(text(&ip.stdout).trim(), "1", "big-endian file: {big}");
        let ip6 = sluice(&["filter", "-r", p, "--count", "ip6"]);
        assert_eq!(text(&ip6.stdout).trim(), "0", "big-endian file: {big}");
        // libpcap (through tcpdump) agrees, where it is installed.
        if let Ok(o) = Command::new("tcpdump")
            .args(["-r", p, "-nn", "ip"])
            .output()
        {
            if o.status.success() {
                assert_eq!(
                    text(&o.stdout).lines().count(),
                    1,
                    "tcpdump, big-endian file: {big}"
                );
            }
        }
    }
}

#[test]
fn host_names_resolve_through_the_system() {
    // localhost is in every /etc/hosts.
    let smp = sample();
    let by_name = sluice(&["filter", "-d", "ip host localhost"]);
    assert!(by_name.status.success(), "{}", text(&by_name.stderr));
    let by_addr = sluice(&["filter", "-d", "ip host 127.0.0.1"]);
    assert_eq!(text(&by_name.stdout), text(&by_addr.stdout));
    let o = sluice(&["filter", "-r", &smp, "--count", "host localhost or arp"]);
    assert_eq!(text(&o.stdout), "1\n", "{}", text(&o.stderr));
    let refused = sluice(&["filter", "-d", "--no-resolve", "ip host localhost"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(text(&refused.stderr).contains("'localhost' is a host name"));
}
