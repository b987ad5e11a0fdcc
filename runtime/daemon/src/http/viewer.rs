//! Who is asking for the status page: the user owning the other end of a
//! TCP connection made on this host, as the kernel's socket table says
//! (`/proc/net/tcp` and `/proc/net/tcp6` of the daemon's network
//! namespace), never as the request says.
//!
//! The rule: only a connection whose other end is in the table as an
//! established socket counts as identified. A peer on another host (or in
//! another network namespace), and one that has already closed its end
//! (the kernel then lists it with no owner, as uid 0), is not identified,
//! and gets the least the page shows.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The TCP state `ESTABLISHED` in the socket table.
const ESTABLISHED: u8 = 1;

/// The uid owning the local socket whose address is `peer` and which is
/// connected to `local` (the server's end), if the kernel lists it as
/// established.
///
/// ```
/// use std::net::{TcpListener, TcpStream};
/// let l = TcpListener::bind("127.0.0.1:0")?;
/// let c = TcpStream::connect(l.local_addr()?)?;
/// let (s, peer) = l.accept()?;
/// let uid = sluice_daemon::http::peer_uid(peer, s.local_addr()?);
/// assert_eq!(uid, Some(rustix::process::getuid().as_raw()));
/// # drop(c);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn peer_uid(peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|f| {
        let table = std::fs::read_to_string(f).ok()?;
        find(&table, peer, local)
    })
}

/// The uid of the entry `peer` -> `local` in one socket table's text.
fn find(table: &str, peer: SocketAddr, local: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            return None;
        }
        let (from, to) = (parse_addr(f[1])?, parse_addr(f[2])?);
        let state = u8::from_str_radix(f[3], 16).ok()?;
        (same(from, peer) && same(to, local) && state == ESTABLISHED)
            .then(|| f[7].parse().ok())
            .flatten()
    })
}

/// Two addresses the same, an IPv4 address and its IPv6-mapped form
/// alike.
fn same(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() == b.port() && a.ip().to_canonical() == b.ip().to_canonical()
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the
/// address is the kernel's words printed in the host's byte order.
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (ip, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = u32::from_str_radix(ip.get(i * 8..i * 8 + 8)?, 16).ok()?;
        Some(w.to_ne_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex4(ip: Ipv4Addr) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip.octets()))
    }

    #[test]
    fn table_lines_are_read_as_the_kernel_writes_them() {
        let lo = Ipv4Addr::new(127, 0, 0, 1);
        let line = |from: u16, to: u16, st: &str, uid: u32| {
            format!(
                "   1: {}:{from:04X} {}:{to:04X} {st} 00000000:00000000 00:00000000 00000000 {uid:>5} 0 4242 1\n",
                hex4(lo),
                hex4(lo)
            )
        };
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n{}{}{}",
            line(8080, 40000, "01", 0),
            line(40001, 8080, "06", 0),
            line(40000, 8080, "01", 1000),
        );
        let server = SocketAddr::new(lo.into(), 8080);
        let peer = |p: u16| SocketAddr::new(lo.into(), p);
        assert_eq!(find(&table, peer(40000), server), Some(1000));
        // Closed (TIME_WAIT): listed with uid 0, not identified.
        assert_eq!(find(&table, peer(40001), server), None);
        assert_eq!(find(&table, peer(40002), server), None);
        let mapped = SocketAddr::new(lo.to_ipv6_mapped().into(), 40000);
        assert!(same(mapped, peer(40000)));
        assert_eq!(
            parse_addr("00000000000000000000000001000000:0050"),
            Some(SocketAddr::new(Ipv6Addr::LOCALHOST.into(), 80))
        );
        assert_eq!(parse_addr("zz:1"), None);
    }

    #[test]
    fn a_real_connection_is_found() {
        for addr in ["127.0.0.1:0", "[::1]:0"] {
            let Ok(l) = std::net::TcpListener::bind(addr) else {
                continue; // no IPv6 here
            };
            let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (s, peer) = l.accept().unwrap();
            assert_eq!(
                peer_uid(peer, s.local_addr().unwrap()),
                Some(rustix::process::getuid().as_raw()),
                "{addr}"
            );
        }
    }
}
