//! The MPF paper's example programs (examples/mpf-*.bpf) on captures that
//! exercise them:
//!
//! * Appendix A (classic BPF) gives the verdicts of the equivalent pcap
//!   expression on every packet of the shared corpus, and Figure 3 (MPF)
//!   the verdicts of Appendix A;
//! * Figure 3 programs for every IPv4 TCP session of the corpus, collapsed
//!   in one `MpfSet`, deliver each packet to exactly the sessions whose
//!   program accepts it alone;
//! * Appendix B, on a capture of fragmented TCP datagrams written with
//!   sluice-capture (first fragment early, late or lost, sessions
//!   interleaved), delivers every fragment of its session's datagrams —
//!   late ones when their first fragment comes — and nothing else, and
//!   counts the fragments whose first fragment never came.

use sluice_bpf::mpf::{MpfProgram, MpfVerdict, NoData};
use sluice_capture::{CaptureFormat, CaptureReader, CaptureWriter, Packet};
use sluice_mpf::{Config, Delivery, FilterId, MpfSet, Separate};
use sluice_testsupport::corpus;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn example(name: &str) -> String {
    std::fs::read_to_string(repo().join("examples").join(name)).unwrap()
}

/// A packet: bytes, wire length, timestamp in nanoseconds.
type Pkt = (Vec<u8>, u32, u64);

/// (file name, packets) of every Ethernet capture.
fn corpus_packets() -> Vec<(String, Vec<Pkt>)> {
    corpus::pcaps()
        .iter()
        .filter_map(corpus::Capture::read)
        .map(|c| {
            let pkts = c
                .packets
                .iter()
                .filter(|p| p.linktype == 1)
                .map(|p| (p.data.clone(), p.wirelen, p.ts_nanos()))
                .collect();
            (c.name, pkts)
        })
        .collect()
}

/// The same program with other keys (site by site, in program order).
fn with_keys(prog: &MpfProgram, keys: &[u32]) -> MpfProgram {
    let mut insns = prog.insns().to_vec();
    let mut it = keys.iter();
    for s in prog.key_sites() {
        for i in &mut insns[s.pc + 1..=s.pc + s.n] {
            i.k = *it.next().unwrap();
        }
    }
    MpfProgram::new(&insns).unwrap()
}

#[test]
fn example_files_parse_and_verify() {
    let a = sluice_bpf::parse_program(&example("mpf-appendix-a.bpf")).unwrap();
    // Appendix A is classic BPF: the kernel's rules accept it.
    sluice_bpf::Verifier::kernel().verify(&a).unwrap();
    for name in ["mpf-figure3.bpf", "mpf-appendix-b.bpf"] {
        let text = example(name);
        let p = MpfProgram::parse(&text).unwrap();
        assert!(!p.is_classic());
        // MPF instructions are not classic BPF: the kernel's rules refuse.
        assert!(sluice_bpf::Verifier::kernel().verify(p.insns()).is_err());
        // The listing, without comments, is what the disassembler prints.
        let listing: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with(';'))
            .map(|l| {
                let l = l.split(';').next().unwrap().trim_end();
                format!("{l}\n")
            })
            .collect();
        let norm = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        assert_eq!(norm(&sluice_bpf::mpf::disasm(p.insns())), norm(&listing));
    }
    let fig3 = MpfProgram::parse(&example("mpf-figure3.bpf")).unwrap();
    assert_eq!(fig3.keys(), vec![0x0a02_0102, 35961, 22]);
    let b = MpfProgram::parse(&example("mpf-appendix-b.bpf")).unwrap();
    assert_eq!(
        b.keys(),
        vec![0x0a02_0102, 35961, 22, 0x0a02_0102, 35961, 22]
    );
}

#[test]
fn appendix_a_and_figure3_equal_the_pcap_expression_on_the_corpus() {
    if corpus::root().is_none() {
        corpus::skipped("mpf");
        return;
    }
    let a = sluice::Program::from_bpf_text(&example("mpf-appendix-a.bpf")).unwrap();
    let fig3 = MpfProgram::parse(&example("mpf-figure3.bpf")).unwrap();
    let expr = "tcp and dst host 10.1.1.2 and src host 10.2.1.2 and src port 35961 \
                and dst port 22 and ip[6:2] & 0xbfff = 0";
    let pcap = sluice::Program::builder(sluice::LinkType::EN10MB)
        .expression(expr)
        .unwrap();
    let (mut packets, mut accepted) = (0, 0);
    for (name, pkts) in corpus_packets() {
        for (i, (data, wirelen, _)) in pkts.iter().enumerate() {
            let want = pcap.run(data, *wirelen);
            let got = a.run(data, *wirelen);
            assert_eq!(got != 0, want != 0, "{name} packet {}: appendix A", i + 1);
            let m = fig3.run(data, *wirelen, &mut NoData);
            assert_eq!(
                m,
                MpfVerdict::Return(got),
                "{name} packet {}: figure 3",
                i + 1
            );
            packets += 1;
            accepted += (got != 0) as usize;
        }
    }
    assert!(packets > 5000, "{packets}");
    // The session's packets in mptcp-v0.pcap (tcpdump counts 110).
    assert_eq!(accepted, 110);
}

#[test]
fn collapsed_figure3_sessions_on_the_corpus_equal_each_program_alone() {
    if corpus::root().is_none() {
        corpus::skipped("mpf");
        return;
    }
    let fig3 = MpfProgram::parse(&example("mpf-figure3.bpf")).unwrap();
    let captures = corpus_packets();
    // Every (dst, src, sport, dport) of an unfragmented IPv4/TCP packet.
    let mut sessions = BTreeSet::new();
    for (_, pkts) in &captures {
        for (d, _, _) in pkts {
            if d.len() >= 54 && d[12..14] == [8, 0] && d[23] == 6 && d[20] & 0xbf == 0 && d[21] == 0
            {
                let ihl = 4 * (d[14] & 0xf) as usize;
                let be = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
                if let Some(ports) = d.get(14 + ihl..18 + ihl) {
                    let sport = u16::from_be_bytes([ports[0], ports[1]]) as u32;
                    let dport = u16::from_be_bytes([ports[2], ports[3]]) as u32;
                    sessions.insert((be(30), be(26), sport, dport));
                }
            }
        }
    }
    assert!(sessions.len() > 50, "{}", sessions.len());
    let mut set = MpfSet::default();
    let mut alone = Vec::new();
    let dsts: BTreeSet<u32> = sessions.iter().map(|s| s.0).collect();
    for &(dst, src, sport, dport) in &sessions {
        // dst is an immediate of the common part, not a key: a group per
        // destination.
        let mut insns = with_keys(&fig3, &[src, sport, dport]).insns().to_vec();
        insns[3].k = dst;
        let p = MpfProgram::new(&insns).unwrap();
        assert_eq!(set.insert(&p), FilterId(alone.len() as u32));
        alone.push(p);
    }
    let s = set.stats();
    eprintln!("{} sessions, {} groups", sessions.len(), s.groups);
    assert_eq!((s.filters, s.groups), (sessions.len(), dsts.len()));
    assert!(s.collapsed_filters > sessions.len() / 2, "{s:?}");
    let mut out = Vec::new();
    let mut delivered = 0;
    for (name, pkts) in &captures {
        for (i, (data, wirelen, ts)) in pkts.iter().enumerate() {
            set.process(data, *wirelen, *ts, &mut out);
            let got: Vec<(u32, u32)> = out.iter().map(|d| (d.filter.0, d.snaplen)).collect();
            let want: Vec<(u32, u32)> = alone
                .iter()
                .enumerate()
                .filter_map(|(f, p)| match p.run(data, *wirelen, &mut NoData) {
                    MpfVerdict::Return(0) => None,
                    MpfVerdict::Return(v) => Some((f as u32, v)),
                    v => panic!("{v:?}"),
                })
                .collect();
            let mut got = got;
            got.sort_unstable();
            assert_eq!(got, want, "{name} packet {}", i + 1);
            delivered += got.len();
        }
    }
    assert!(delivered > 800, "{delivered}");
}

/// What the generator knows about each packet it writes.
#[derive(Clone, Copy, Debug)]
struct Truth {
    /// Session index, or `None` for unrelated traffic.
    session: Option<usize>,
    /// Datagram number (unique per source), `None` for unfragmented.
    datagram: Option<u32>,
    /// Fragment offset in 8-byte units (0 = first or unfragmented).
    offset: u16,
}

fn ip_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame carrying an IPv4 packet (20-byte header).
fn frame(src: u32, dst: u32, id: u16, mf: bool, offset: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let mut ip = vec![0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(20 + payload.len() as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6..8].copy_from_slice(&((offset & 0x1fff) | if mf { 0x2000 } else { 0 }).to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(payload);
    f
}

/// A TCP segment (20-byte header, no checksum) with `len` bytes of data.
fn segment(sport: u16, dport: u16, len: usize, seed: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 0x50;
    t[13] = 0x18;
    t.extend((0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed));
    t
}

const ME: u32 = 0x0a01_0102;

/// Writes the fragment capture with sluice-capture and returns its bytes
/// and the truth for each packet.
fn fragment_capture(sessions: &[(u32, u16, u16)]) -> (Vec<u8>, Vec<Truth>) {
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut rand = |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    // (session, frames with their truth), in sending order.
    let mut flows: Vec<Vec<(Vec<u8>, Truth)>> = Vec::new();
    let mut next_id: BTreeMap<u32, u16> = BTreeMap::new();
    for round in 0..12u32 {
        for (s, &(src, sport, dport)) in sessions.iter().enumerate() {
            let id = next_id.entry(src).or_insert(100 + s as u16 * 1000);
            *id += 1;
            let mut flow = Vec::new();
            if round % 3 == 0 {
                // Unfragmented segment.
                let seg = segment(sport, dport, 40, round as u8);
                let t = Truth {
                    session: Some(s),
                    datagram: None,
                    offset: 0,
                };
                flow.push((frame(src, ME, *id, false, 0, &seg), t));
            } else {
                // A datagram in 2..=7 fragments of 8-byte multiples.
                let pieces = 2 + rand(6) as usize;
                let seg = segment(sport, dport, 64 * pieces - 20, round as u8);
                let mut frags: Vec<(Vec<u8>, Truth)> = seg
                    .chunks(64)
                    .enumerate()
                    .map(|(k, chunk)| {
                        let offset = (k * 8) as u16;
                        let mf = k + 1 < pieces;
                        let t = Truth {
                            session: Some(s),
                            datagram: Some(*id as u32),
                            offset,
                        };
                        (frame(src, ME, *id, mf, offset, chunk), t)
                    })
                    .collect();
                match rand(4) {
                    0 => {}               // in order
                    1 => frags.reverse(), // first fragment last
                    2 => {
                        let first = frags.remove(0); // first in the middle
                        let at = frags.len() / 2;
                        frags.insert(at, first);
                    }
                    _ => {
                        if round % 2 == 0 {
                            frags.remove(0); // first fragment lost
                        }
                    }
                }
                flow.extend(frags);
            }
            flows.push(flow);
        }
        // Unrelated traffic: another host's session, and a fragment of a
        // datagram whose first fragment is from a stranger.
        let seg = segment(4000, 22, 30, 1);
        let t = Truth {
            session: None,
            datagram: None,
            offset: 0,
        };
        flows.push(vec![
            (frame(0x0a09_0909, ME, 7, false, 0, &seg), t),
            (frame(0x0a09_0909, ME, 8, false, 40, &seg[..16]), t),
        ]);
    }
    // Interleave the flows: each step takes the next frame of a random
    // unfinished flow among the 3 oldest.
    let mut order = Vec::new();
    let mut queue: Vec<std::collections::VecDeque<(Vec<u8>, Truth)>> =
        flows.into_iter().map(Into::into).collect();
    while !queue.is_empty() {
        let k = rand(queue.len().min(3) as u64) as usize;
        order.push(queue[k].pop_front().unwrap());
        if queue[k].is_empty() {
            queue.remove(k);
        }
    }
    let format = CaptureFormat::pcap(1, 65535);
    let mut w = CaptureWriter::new(Vec::new(), "fragments", &format).unwrap();
    let mut truths = Vec::new();
    let mut ts_ms: u64 = 1_700_000_000_000;
    for (i, (data, t)) in order.iter().enumerate() {
        // 1 ms apart, and a 3 s pause every 40 packets (beyond the 2 s a
        // postponed fragment waits).
        ts_ms += if i % 40 == 39 { 3000 } else { 1 };
        let p = Packet::new(
            (ts_ms / 1000) as i64,
            (ts_ms % 1000) as u32 * 1_000_000,
            1,
            data,
        );
        w.write_packet(&p).unwrap();
        truths.push(*t);
    }
    (w.finish().unwrap(), truths)
}

#[test]
fn appendix_b_dispatches_fragments_of_its_session() {
    let sessions = [
        (0x0a02_0102u32, 35961u16, 22u16), // the example file's session
        (0x0a02_0102, 35962, 22),          // same host, another port
        (0x0a02_0103, 35961, 22),          // another host, same ports
        (0x0a02_0104, 5001, 80),
    ];
    let b = MpfProgram::parse(&example("mpf-appendix-b.bpf")).unwrap();
    let (bytes, truth) = fragment_capture(&sessions);
    // Read the capture back as any user would.
    let mut r = CaptureReader::from_reader(&bytes[..], "fragments").unwrap();
    let mut pkts = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        let ts = p.ts_sec as u64 * 1_000_000_000 + p.ts_nsec as u64;
        pkts.push((p.data.to_vec(), p.wirelen, ts));
    }
    assert_eq!(pkts.len(), truth.len());

    let config = Config { max_pending: 64 };
    let mut set = MpfSet::new(config);
    let mut sep = Separate::new(config);
    for &(src, sport, dport) in &sessions {
        let p = with_keys(
            &b,
            &[
                src,
                sport as u32,
                dport as u32,
                src,
                sport as u32,
                dport as u32,
            ],
        );
        assert_eq!(set.insert(&p), sep.insert(&p));
    }
    assert_eq!(set.stats().groups, 1);

    // Expected: for each session, every packet of its unfragmented
    // segments, and every fragment of its datagrams whose first fragment
    // is in the capture and no more than 2 s after (late fragments wait up
    // to 2 s for it).
    let mut first_at: BTreeMap<(usize, u32), u64> = BTreeMap::new();
    for (t, (_, _, ts)) in truth.iter().zip(&pkts) {
        if let (Some(s), Some(d), 0) = (t.session, t.datagram, t.offset) {
            first_at.insert((s, d), *ts);
        }
    }
    let mut want: BTreeSet<(u32, u64)> = BTreeSet::new();
    let mut orphans = 0;
    for (seq, (t, (_, _, ts))) in truth.iter().zip(&pkts).enumerate() {
        let Some(s) = t.session else { continue };
        match t.datagram {
            None => {
                want.insert((s as u32, seq as u64));
            }
            Some(d) => match first_at.get(&(s, d)) {
                Some(&f) if f <= *ts + 2_000_000_000 && *ts <= f + 30_000_000_000 => {
                    want.insert((s as u32, seq as u64));
                }
                _ => orphans += 1,
            },
        }
    }

    let collect = |out: &[Delivery], got: &mut BTreeSet<(u32, u64)>, late: &mut usize| {
        for d in out {
            assert!(got.insert((d.filter.0, d.seq)), "delivered twice: {d:?}");
            assert_eq!(d.snaplen, 262144);
            if let Some(p) = &d.late {
                assert_eq!(&p.data[..], &pkts[d.seq as usize].0[..]);
                *late += 1;
            }
        }
    };
    let (mut got, mut got_sep) = (BTreeSet::new(), BTreeSet::new());
    let (mut late, mut late_sep) = (0, 0);
    let mut out = Vec::new();
    for (data, wirelen, ts) in &pkts {
        set.process(data, *wirelen, *ts, &mut out);
        collect(&out, &mut got, &mut late);
        sep.process(data, *wirelen, *ts, &mut out);
        collect(&out, &mut got_sep, &mut late_sep);
    }
    // Flush: one more packet, long after everything.
    let end = pkts.last().unwrap().2 + 10_000_000_000;
    set.process(&[], 0, end, &mut out);
    collect(&out, &mut got, &mut late);
    sep.process(&[], 0, end, &mut out);
    collect(&out, &mut got_sep, &mut late_sep);

    assert_eq!(got, want);
    assert_eq!(got_sep, want);
    assert!(late > 10, "{late} late deliveries");
    assert!(orphans > 5, "{orphans} orphan fragments");
    let s = set.stats();
    assert_eq!(s.pending, 0);
    assert_eq!(s.pending_dropped_full, 0);
    // Every orphan fragment waited for all 4 filters and was counted when
    // it ran out of time; so was every fragment of another session for
    // the filters it was not for, and the stranger's fragments.
    assert!(s.pending_expired >= orphans as u64 * 4, "{s:?}");
    assert_eq!(s.pending_expired, sep.stats().pending_expired);
    assert_eq!(s.registered, sep.stats().registered);

    // A plain per-packet filter (libpcap's model) misses every non-first
    // fragment of the session.
    let pcap = sluice::Program::builder(sluice::LinkType::EN10MB)
        .expression("tcp and src host 10.2.1.2 and src port 35961 and dst port 22")
        .unwrap();
    let missed = want
        .iter()
        .filter(|&&(f, seq)| f == 0 && pcap.run(&pkts[seq as usize].0, pkts[seq as usize].1) == 0)
        .count();
    let later_fragments = truth
        .iter()
        .zip(0u64..)
        .filter(|(t, seq)| t.offset > 0 && want.contains(&(0, *seq)))
        .count();
    assert!(later_fragments > 5);
    assert_eq!(missed, later_fragments);
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sluice-mpf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sluice(args: &[&str]) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn split_mpf_runs_the_examples() {
    let dir = scratch("split");
    let ex = repo().join("examples");
    // Appendix B for the example's session and for a session that does
    // not exist, written with the MPF disassembler.
    let b = MpfProgram::parse(&example("mpf-appendix-b.bpf")).unwrap();
    let none = with_keys(&b, &[1, 2, 3, 1, 2, 3]);
    std::fs::write(dir.join("none.bpf"), sluice_bpf::mpf::disasm(none.insns())).unwrap();
    let filters = dir.join("filters.txt");
    std::fs::write(
        &filters,
        format!(
            "fig3\tbpf:@{0}/mpf-figure3.bpf\nappb\tbpf:@{0}/mpf-appendix-b.bpf\nnone\tbpf:@none.bpf\n\
             inline\tbpf:4; 40 0 0 12; 21 0 1 2048; 6 0 0 1; 6 0 0 0\n",
            ex.display()
        ),
    )
    .unwrap();
    let filters = filters.to_str().unwrap();
    if let Some(cap) = corpus::path("pcaps/mptcp-v0.pcap") {
        let (code, out, err) = sluice(&[
            "split",
            "-r",
            cap.to_str().unwrap(),
            "--filters",
            filters,
            "--mpf",
            "--count",
        ]);
        assert_eq!(code, 0, "{err}");
        let ip = out.lines().find(|l| l.starts_with("inline\t")).unwrap();
        assert!(ip != "inline\t0", "{out}");
        assert!(out.starts_with("fig3\t110\nappb\t110\nnone\t0\n"), "{out}");
    }
    // The generated fragment capture: Appendix B takes its session's
    // fragments, late ones included, written into its output file.
    let sessions = [(0x0a02_0102u32, 35961u16, 22u16), (0x0a02_0103, 35961, 22)];
    let (bytes, truth) = fragment_capture(&sessions);
    let cap = dir.join("frag.pcap");
    std::fs::write(&cap, &bytes).unwrap();
    let outdir = dir.join("out");
    let (code, out, err) = sluice(&[
        "split",
        "-r",
        cap.to_str().unwrap(),
        "--filters",
        filters,
        "--mpf",
        "--count",
        "--out-dir",
        outdir.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("timed out"), "{err}");
    // Expected as in the library test: every packet of session 0 but the
    // fragments whose first fragment never came (or came too late).
    let mut first_at = BTreeMap::new();
    let mut ts = Vec::new();
    let mut r = CaptureReader::from_reader(&bytes[..], "frag").unwrap();
    while let Some(p) = r.next_packet().unwrap() {
        ts.push(p.ts_sec as u64 * 1_000_000_000 + p.ts_nsec as u64);
    }
    for (t, &at) in truth.iter().zip(&ts) {
        if let (Some(0), Some(d), 0) = (t.session, t.datagram, t.offset) {
            first_at.insert(d, at);
        }
    }
    let want = truth
        .iter()
        .zip(&ts)
        .filter(|(t, &at)| {
            t.session == Some(0)
                && t.datagram.map_or(true, |d| {
                    first_at
                        .get(&d)
                        .is_some_and(|&f| f <= at + 2_000_000_000 && at <= f + 30_000_000_000)
                })
        })
        .count();
    assert!(
        out.contains(&format!("appb\t{want}\n")),
        "{out} want {want}"
    );
    let mut r = CaptureReader::open(outdir.join("appb.pcap")).unwrap();
    let mut written = 0;
    while r.next_packet().unwrap().is_some() {
        written += 1;
    }
    assert_eq!(written, want);
    // A pcap expression is not an MPF program.
    std::fs::write(dir.join("bad.txt"), "a\ttcp\n").unwrap();
    let (code, _, err) = sluice(&[
        "split",
        "-r",
        cap.to_str().unwrap(),
        "--filters",
        dir.join("bad.txt").to_str().unwrap(),
        "--mpf",
        "--count",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("bad.txt:1: a: --mpf takes bpf: programs, not pcap"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
