//! Reads a capture with sluice-capture or pcap-file 2.x and prints the time.
//! See Cargo.toml for usage.

use std::io::BufReader;
use std::time::Instant;

use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = &args[2];
    match args[1].as_str() {
        "gen" | "genng" => {
            let fmt = if args[1] == "gen" {
                CaptureFormat::pcap(1, 65535)
            } else {
                CaptureFormat::pcapng()
            };
            let mut w = CaptureWriter::create(path, &fmt).unwrap();
            let buf: Vec<u8> = (0..1514u32).map(|i| i as u8).collect();
            let mut total = 0u64;
            let mut i = 0u64;
            let mut x = 12345u64;
            while total < 200_000_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let len = 60 + (x % 1455) as usize;
                let len = if i % 3 == 0 { 60 } else { len };
                let p = Packet {
                    snaplen: 65535,
                    ..Packet::new(
                        1_700_000_000 + (i / 1000) as i64,
                        (i % 1000) as u32 * 1000,
                        1,
                        &buf[..len],
                    )
                };
                w.write_packet(&p).unwrap();
                total += len as u64 + 16;
                i += 1;
            }
            w.finish().unwrap();
            println!("{i} packets");
        }
        "ours" => {
            let t = Instant::now();
            let mut r = CaptureReader::open(path).unwrap();
            let (mut n, mut bytes, mut sum) = (0u64, 0u64, 0u64);
            while let Some(p) = r.next_packet().unwrap() {
                n += 1;
                bytes += p.data.len() as u64;
                sum = sum.wrapping_add(p.data[p.data.len() / 2] as u64 + p.ts_nsec as u64);
            }
            report("sluice-capture", t, n, bytes, sum);
        }
        "pcapfile" => {
            let t = Instant::now();
            let f = BufReader::with_capacity(256 * 1024, std::fs::File::open(path).unwrap());
            let mut r = pcap_file::pcap::PcapReader::new(f).unwrap();
            let (mut n, mut bytes, mut sum) = (0u64, 0u64, 0u64);
            while let Some(p) = r.next_packet() {
                let p = p.unwrap();
                n += 1;
                bytes += p.data.len() as u64;
                sum = sum.wrapping_add(
                    p.data[p.data.len() / 2] as u64 + p.timestamp.subsec_nanos() as u64,
                );
            }
            report("pcap-file 2.0 PcapReader", t, n, bytes, sum);
        }
        "pcapfileng" => {
            use pcap_file::pcapng::Block;
            let t = Instant::now();
            let f = BufReader::with_capacity(256 * 1024, std::fs::File::open(path).unwrap());
            let mut r = pcap_file::pcapng::PcapNgReader::new(f).unwrap();
            let (mut n, mut bytes, mut sum) = (0u64, 0u64, 0u64);
            while let Some(b) = r.next_block() {
                if let Block::EnhancedPacket(p) = b.unwrap() {
                    n += 1;
                    bytes += p.data.len() as u64;
                    sum = sum.wrapping_add(
                        p.data[p.data.len() / 2] as u64 + p.timestamp.subsec_nanos() as u64,
                    );
                }
            }
            report("pcap-file 2.0 PcapNgReader", t, n, bytes, sum);
        }
        "dump" => {
            let mut r = CaptureReader::open(path).unwrap();
            let mut i = 0;
            loop {
                match r.next_packet() {
                    Ok(Some(p)) => {
                        println!(
                            "{i} {} {} {}.{:09}",
                            p.caplen, p.wirelen, p.ts_sec, p.ts_nsec
                        );
                        i += 1;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        eprintln!("{e}");
                        break;
                    }
                }
            }
        }
        _ => panic!("mode"),
    }
}

fn report(what: &str, t: Instant, n: u64, bytes: u64, sum: u64) {
    let s = t.elapsed().as_secs_f64();
    let size = std::fs::metadata(std::env::args().nth(2).unwrap())
        .map(|m| m.len() as f64)
        .unwrap_or(bytes as f64);
    println!(
        "{what}: {n} packets, {bytes} bytes, {:.3} s, {:.0} MB/s, {:.1} Mpkt/s (check {sum})",
        s,
        size / s / 1e6,
        n as f64 / s / 1e6
    );
}
