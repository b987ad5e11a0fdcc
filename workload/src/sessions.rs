//! TCP/IPv4 sessions, one exact filter each (`ip src host A and ip dst
//! host B and tcp src port P and tcp dst port Q`): the set that the eBPF
//! back end's key maps and the session benchmarks are built around, and
//! minimal frames of them.
//!
//! Rule: session `i` is a pure function of `i`, so a test, an example and
//! a script agree on which frame belongs to which filter.
//!
//! ```
//! let (a, b, p, q) = sluice_workload::session(3);
//! let f = sluice_workload::tcp_frame(a, b, p, q);
//! assert_eq!(f.len(), 60);
//! assert!(sluice_workload::session_expression(3).starts_with("ip src host 10.1.0.3 "));
//! ```

/// Session `i`: 10.1.x.y:(1024 + i % 50000) to 10.200.0.1:80, as
/// (source address, destination address, source port, destination port).
///
/// ```
/// assert_eq!(sluice_workload::session(0), (0x0a01_0000, 0x0ac8_0001, 1024, 80));
/// ```
pub fn session(i: u32) -> (u32, u32, u16, u16) {
    (0x0a01_0000 + i, 0x0ac8_0001, 1024 + (i % 50_000) as u16, 80)
}

/// The pcap expression that matches exactly session `i`'s one direction.
///
/// ```
/// let e = sluice_workload::session_expression(1);
/// assert_eq!(e, "ip src host 10.1.0.1 and ip dst host 10.200.0.1 and tcp src port 1025 and tcp dst port 80");
/// ```
pub fn session_expression(i: u32) -> String {
    let (a, b, p, q) = session(i);
    let ip = |x: u32| std::net::Ipv4Addr::from(x).to_string();
    format!(
        "ip src host {} and ip dst host {} and tcp src port {p} and tcp dst port {q}",
        ip(a),
        ip(b)
    )
}

/// A 60-byte Ethernet frame of a TCP/IPv4 segment from `a:p` to `b:q`
/// (no options, no payload, ACK-less, header length 20).
///
/// ```
/// let f = sluice_workload::tcp_frame(1, 2, 3, 4);
/// assert_eq!((f[23], &f[34..38]), (6, &[0, 3, 0, 4][..]));
/// ```
pub fn tcp_frame(a: u32, b: u32, p: u16, q: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[8, 0]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    f[26..30].copy_from_slice(&a.to_be_bytes());
    f[30..34].copy_from_slice(&b.to_be_bytes());
    f[34..36].copy_from_slice(&p.to_be_bytes());
    f[36..38].copy_from_slice(&q.to_be_bytes());
    f[46] = 0x50;
    f
}
