//! Interpreter speed: ns per packet for a few typical programs.

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_bpf::{parse_program, run};

/// `tcp port 80` (tcpdump -ddd, EN10MB).
const TCP_PORT_80: &str = "20\n40 0 0 12\n21 0 6 34525\n48 0 0 20\n21 0 15 6\n40 0 0 54\n\
21 12 0 80\n40 0 0 56\n21 10 11 80\n21 0 10 2048\n48 0 0 23\n21 0 8 6\n40 0 0 20\n\
69 6 0 8191\n177 0 0 14\n72 0 0 14\n21 2 0 80\n72 0 0 16\n21 0 1 80\n6 0 0 262144\n6 0 0 0\n";

/// `ip` only.
const IP: &str = "4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n";

/// `ip6 protochain 6` (backward jumps).
const PROTOCHAIN6: &str = "36\n40 0 0 12\n21 0 33 34525\n48 0 0 20\n1 0 0 40\n21 27 0 6\n\
21 26 0 59\n21 3 0 0\n21 2 0 60\n21 1 0 43\n21 0 9 44\n80 0 0 14\n2 0 0 0\n80 0 0 15\n\
4 0 0 1\n36 0 0 8\n12 0 0 0\n7 0 0 0\n96 0 0 0\n5 0 0 4294967281\n21 0 12 51\n135 0 0 0\n\
80 0 0 14\n2 0 0 0\n135 0 0 0\n4 0 0 1\n7 0 0 0\n80 0 0 14\n4 0 0 2\n36 0 0 4\n7 0 0 0\n\
96 0 0 0\n5 0 0 4294967268\n4 0 0 0\n21 0 1 6\n6 0 0 262144\n6 0 0 0\n";

/// An IPv4/TCP packet to port 80 with no options.
fn tcp_packet() -> Vec<u8> {
    let mut p = vec![0u8; 74];
    p[12] = 0x08;
    p[14] = 0x45;
    p[23] = 6;
    p[36] = 0;
    p[37] = 80;
    p
}

/// An IPv6 packet with a hop-by-hop and a routing header, then TCP.
fn ip6_chain_packet() -> Vec<u8> {
    let mut p = vec![0u8; 110];
    p[12] = 0x86;
    p[13] = 0xdd;
    p[20] = 0; // hop-by-hop
    p[54] = 43; // routing
    p[55] = 0;
    p[62] = 6; // tcp
    p[63] = 0;
    p
}

fn bench(c: &mut Criterion) {
    let cases = [
        ("ip", IP, tcp_packet()),
        ("tcp_port_80", TCP_PORT_80, tcp_packet()),
        ("protochain6", PROTOCHAIN6, ip6_chain_packet()),
    ];
    for (name, text, pkt) in cases {
        let prog = parse_program(text).unwrap();
        assert_ne!(run(&prog, &pkt, pkt.len() as u32), 0, "{name}");
        c.bench_function(&format!("run/{name}"), |b| {
            b.iter(|| run(black_box(&prog), black_box(&pkt), black_box(74)))
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
