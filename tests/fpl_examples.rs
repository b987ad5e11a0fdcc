//! FPL examples on real captures (`../shared/conformance/pcaps` and
//! `examples/sample.pcap`): Figure 6, Figure 7 and the per-port counter,
//! run by the interpreter and by native code, checked against results
//! computed here by plain loops over the packets.

use sluice_fpl::{Externs, Program};
use sluice_native::fpl::NativeFpl;
use sluice_testsupport::corpus;
use std::path::Path;

fn example(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name);
    std::fs::read_to_string(p).unwrap()
}

/// Every Ethernet packet of the corpus captures (if present) and of the
/// sample capture, in file order.
fn packets() -> Vec<Vec<u8>> {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sample.pcap");
    if corpus::root().is_none() {
        println!("../shared/conformance not found: sample.pcap only");
    }
    let files = std::iter::once(sample).chain(corpus::pcaps());
    let out: Vec<Vec<u8>> = files
        .flat_map(corpus::packets)
        .filter(|p| p.linktype == 1)
        .map(|p| p.data)
        .collect();
    assert!(out.len() > 100, "too few packets: {}", out.len());
    out
}

/// FNV-1a, written out again here.
fn fnv(bytes: &[u8]) -> u32 {
    bytes
        .iter()
        .fold(2166136261u32, |h, &b| (h ^ b as u32).wrapping_mul(16777619))
}

/// The TCP destination port as FPL's macro reads it (after an IPv4 header
/// of the length in byte 14), if the packet holds it.
fn dport(p: &[u8]) -> Option<u16> {
    let l4 = 14 + 4 * (*p.get(14)? as usize & 15);
    Some(u16::from_be_bytes([*p.get(l4 + 2)?, *p.get(l4 + 3)?]))
}

/// Run `src` over `pkts` with both engines from a zeroed MBuf: the results
/// (equal for both) and the final MBuf (equal for both).
fn run_both(src: &str, ext: &Externs, pkts: &[Vec<u8>]) -> (Program, Vec<u32>, Vec<u32>) {
    let p = Program::compile(src, ext).unwrap();
    let n = NativeFpl::compile(&p).unwrap();
    let mut a = vec![0; p.mem_words()];
    let mut b = a.clone();
    let mut results = Vec::new();
    for (i, pkt) in pkts.iter().enumerate() {
        let r = p.run(pkt, &mut a);
        assert_eq!(r, n.run(pkt, &mut b), "packet {i}");
        results.push(r);
    }
    assert_eq!(a, b);
    (p, results, a)
}

#[test]
fn figure6_counts_tcp_flows_on_captures() {
    let pkts = packets();
    let (p, results, mem) = run_both(&example("fpl-figure6.fpl"), &Externs::new(), &pkts);
    let mut want = vec![0u32; 256];
    let mut last = 0;
    for pkt in &pkts {
        // IF (PKT.IP_PROTO == PROTO_TCP): byte 23, then a hash of 26..38.
        if pkt.len() > 23 && pkt[23] == 6 && pkt.len() >= 38 {
            last = fnv(&pkt[26..38]) % 256;
            want[last as usize] += 1;
        }
    }
    assert!(results.iter().all(|r| *r == 0)); // Figure 6 returns nothing
    assert_eq!(mem[..256], want[..]);
    assert_eq!(mem[p.reg_base()], last);
    assert!(
        want.iter().sum::<u32>() > 500,
        "{}",
        want.iter().sum::<u32>()
    );
}

#[test]
fn tcp_port_counts_on_captures() {
    let pkts = packets();
    let (p, results, mem) = run_both(&example("fpl-tcp-ports.fpl"), &Externs::new(), &pkts);
    assert_eq!(p.mem_size(), 65536);
    let mut want = vec![0u32; 65536];
    let mut accepted = 0;
    for (pkt, r) in pkts.iter().zip(&results) {
        let is_ip_tcp = pkt.len() >= 24 && pkt[12..14] == [8, 0] && pkt[23] == 6;
        let expect = match (is_ip_tcp, dport(pkt)) {
            (true, Some(port)) => {
                want[port as usize] += 1;
                accepted += 1;
                1
            }
            _ => 0,
        };
        assert_eq!(*r, expect);
    }
    assert_eq!(mem, want);
    assert!(accepted > 500, "{accepted}");
}

/// A TCP packet to port 554 announcing `port` in an RTSP SETUP.
fn setup(port: u16) -> Vec<u8> {
    let mut f = vec![0u8; 54];
    f[12] = 0x08;
    f[14] = 0x45;
    f[23] = 6;
    f[36..38].copy_from_slice(&554u16.to_be_bytes());
    f[46] = 0x50;
    let text = format!(
        "SETUP rtsp://media/track1 RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP/TCP;unicast;client_port={port}-{}\r\n\r\n",
        port + 1
    );
    f.extend_from_slice(text.as_bytes());
    f
}

#[test]
fn figure7_follows_announced_ports_on_captures() {
    let real = packets();
    // Announce the destination ports of a few real TCP packets part-way
    // through the traffic, so that later packets to them are accepted.
    let ports: Vec<u16> = real
        .iter()
        .filter(|p| p.len() > 23 && p[23] == 6)
        .filter_map(|p| dport(p))
        .filter(|&d| d != 554 && d < 65535)
        .step_by(97)
        .take(12)
        .collect();
    assert!(ports.len() >= 5, "{ports:?}");
    let mut pkts = Vec::new();
    let mut announced = ports.iter();
    for (i, p) in real.iter().enumerate() {
        if i % (real.len() / 13) == 0 {
            if let Some(&port) = announced.next() {
                pkts.push(setup(port));
            }
        }
        pkts.push(p.clone());
    }
    let (p, results, mem) = run_both(&example("fpl-figure7.fpl"), &Externs::builtin(), &pkts);
    // The same, as a plain loop: a list of announced ports.
    let mut known: Vec<u32> = Vec::new();
    let mut accepted = 0;
    for (i, (pkt, r)) in pkts.iter().zip(&results).enumerate() {
        let expect = if pkt.len() > 23 && pkt[23] == 6 {
            match dport(pkt) {
                Some(554) => {
                    // The announced port: what `setup` wrote (0 for real
                    // RTSP-port packets without a Transport header).
                    let text = String::from_utf8_lossy(pkt);
                    let port = text
                        .split("client_port=")
                        .nth(1)
                        .and_then(|s| s.split('-').next())
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    known.push(port);
                    0
                }
                Some(d) if known.contains(&(d as u32)) => 1,
                _ => 0,
            }
        } else {
            0
        };
        assert_eq!(*r, expect, "packet {i}");
        accepted += expect;
    }
    assert_eq!(mem[p.reg_base()] as usize, known.len());
    assert_eq!(mem[..known.len()], known[..]);
    assert!(accepted > 50, "{accepted}");
}
