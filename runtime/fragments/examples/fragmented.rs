//! Write a capture of fragmented datagrams, to try `sluice split
//! --fragments` or to look at with tcpdump:
//!
//! ```sh
//! cargo run -p sluice-fragments --example fragmented -- frags.pcap
//! tcpdump -nr frags.pcap 'ip[6:2] & 0x1fff != 0'     # the later IPv4 fragments
//! ```
//!
//! Ethernet, nanosecond pcap. Four TCP datagrams to port 80 and two UDP
//! datagrams to port 53 over IPv4 (5 fragments each: in order, last
//! fragment first, first fragment last), and two UDP datagrams over IPv6
//! (4 fragments, first fragment last), 10 ms apart.

use sluice_capture::{CaptureFormat, CaptureWriter, Packet};
use sluice_fragments::fragmenter::{Datagram, Link};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: fragmented OUT.pcap")?;
    let mut datagrams = Vec::new();
    for i in 0..4u8 {
        let d = Datagram::tcp_v4(
            [10, 0, 0, 1 + i],
            [10, 0, 1, 1],
            40000,
            80,
            100,
            &[0x5a; 2000],
        );
        datagrams.push((d.fragments(5), usize::from(i % 3)));
    }
    for i in 0..2u8 {
        let d = Datagram::udp_v4(
            [10, 0, 0, 1 + i],
            [10, 0, 1, 1],
            40000,
            53,
            100,
            &[0x5a; 2000],
        );
        datagrams.push((d.fragments(5), 2));
    }
    for i in 0..2u8 {
        let mut src = [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        src[15] = 1 + i;
        let d = Datagram::udp_v6(src, [0x20; 16], 40000, 53, 7, &[0x5a; 1500]);
        datagrams.push((d.fragments(4), 2));
    }
    let mut w = CaptureWriter::create(
        &path,
        &CaptureFormat::Pcap {
            nanos: true,
            big_endian: false,
            linktype: Link::Ethernet.linktype(),
            snaplen: 262_144,
            fcs_len: None,
        },
    )?;
    let mut ms = 0u32;
    for (frags, order) in datagrams {
        let mut seq: Vec<usize> = (0..frags.len()).collect();
        match order {
            0 => {}
            1 => seq.reverse(),
            _ => seq.rotate_left(1),
        }
        for i in seq {
            let p = Link::Ethernet.wrap(&frags[i]);
            w.write_packet(&Packet::new(1_700_000_000, ms * 1_000_000, 1, &p))?;
            ms += 10;
        }
    }
    w.finish()?;
    Ok(())
}
