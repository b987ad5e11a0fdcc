//! Many filters at once: the merged classifier against the CSPF/BPF model
//! (every libpcap program run on every packet), after MPF's experiments.
//!
//! `cargo bench --bench classifier` prints Markdown tables. The filters are
//! TCP session filters, `tcp and src host A and dst host B and src port P and
//! dst port Q`, N = 1, 10, ..., 1,000,000 (`SLUICE_BENCH_SIZES="1 1000"`
//! picks others). The first session is inserted with `Classifier::insert` of
//! the compiled expression, the rest with `insert_keys` (only a key is added;
//! compiling a million expressions would time the compiler). A separate table
//! times compiling and inserting real expressions up to 10,000, and a
//! structural insert (a new shape) into a classifier holding 10,000 filters.
//!
//! Packets: 2^20 synthetic Ethernet frames held in one buffer, drawn with a
//! fixed-seed generator: 90% IPv4/TCP packets of an installed session chosen
//! uniformly, 5% IPv4/TCP packets of no session, 3% IPv4/UDP, 2% IPv6/TCP.
//!
//! Worst-case collisions (MPF Table 5, all sessions in one hash bucket): the
//! table probes linearly from `hash(key) & mask` with a fixed hash, and the
//! mask after N inserts is known (the table doubles while more than half its
//! slots would be in use: `slots = max(8, next_power_of_two(2N))`). The
//! sessions are drawn from a counter-indexed key space, keeping only keys
//! whose `hash & mask` equals the first session's: every session then lives
//! in one cluster of N slots and a lookup walks half of it on average.
//! Finding them costs about `N * slots` hashes, so this is measured up to
//! N = 10,000.
//!
//! Each timing is the median of 5 passes. `SLUICE_BENCH_DIR=DIR` also writes,
//! per N, `sessions-N.txt` (`name<TAB>expression`) and `packets-N.pcap`, plus
//! `small-N.pcap` (the packets the libpcap column used) and `results.tsv`,
//! for `scripts/bench-classifier.sh`, which runs ../shared/tools/handdemux.c
//! and multibpf.c on the same files.

use sluice_classifier::table::hash;
use sluice_classifier::{merged::Compiled, Classifier, Reader};
use sluice_native::floor::MemoryFloor;
use sluice_native::tree::NativeTree;
use sluice_native::AutoClassifier;
use sluice_testsupport::{rss, Rng};
use std::fmt::Write as _;
use std::hint::black_box;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

// The same allocator as the `sluice` command.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Packets per set (`SLUICE_BENCH_PACKETS` overrides, for profiling).
fn packet_count() -> usize {
    std::env::var("SLUICE_BENCH_PACKETS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1 << 20)
}

/// `SLUICE_BENCH_QUICK=1`: only the merged classifier's lookups (for profiling).
fn quick() -> bool {
    std::env::var_os("SLUICE_BENCH_QUICK").is_some()
}
const LIBPCAP_MAX: usize = 10_000;
const COLLIDE_MAX: usize = 10_000;

/// One TCP session: source, destination, source port, destination port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Session {
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
}

impl Session {
    /// Session `c` of a key space where every index gives a different key.
    fn nth(c: u64) -> Session {
        let mix = (c.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32;
        Session {
            src: 0x0a00_0000 | (c as u32 & 0x00ff_ffff),
            dst: 0xc0a8_0000 | (mix & 0xffff),
            sport: 1024 + ((c >> 24) as u16 & 0x3fff) * 4 + (mix >> 16) as u16 % 4,
            dport: [80, 443, 22, 8080][(mix >> 20) as usize % 4],
        }
    }

    fn expression(&self) -> String {
        let ip = |a: u32| {
            format!(
                "{}.{}.{}.{}",
                a >> 24,
                (a >> 16) & 255,
                (a >> 8) & 255,
                a & 255
            )
        };
        format!(
            "tcp and src host {} and dst host {} and src port {} and dst port {}",
            ip(self.src),
            ip(self.dst),
            self.sport,
            self.dport
        )
    }
}

/// Where the session's constants sit in the group's key (found by compiling
/// a session with recognisable constants and reading its path).
struct Layout {
    template: Vec<u32>,
    at: [usize; 4],
}

impl Layout {
    fn find() -> Layout {
        let probe = Session {
            src: 0x0a01_0203,
            dst: 0xc0a8_0405,
            sport: 4321,
            dport: 8765,
        };
        let c = Compiled::new(compile(&probe.expression()));
        let paths = c.paths().expect("a session filter merges");
        assert_eq!(paths.len(), 1, "a session filter is one path");
        if std::env::var_os("SLUICE_BENCH_SHOW").is_some() {
            eprintln!("{:#?}", paths[0]);
        }
        let template: Vec<u32> = paths[0].key();
        let pos = |k: u32| {
            template
                .iter()
                .position(|&x| x == k)
                .expect("constant in key")
        };
        let at = [pos(probe.src), pos(probe.dst), pos(4321), pos(8765)];
        Layout { template, at }
    }

    fn key(&self, s: &Session) -> Vec<u32> {
        let mut k = self.template.clone();
        k[self.at[0]] = s.src;
        k[self.at[1]] = s.dst;
        k[self.at[2]] = s.sport as u32;
        k[self.at[3]] = s.dport as u32;
        k
    }
}

fn compile(e: &str) -> sluice_ir::Filter {
    sluice::pcap::compile(e, sluice::LinkType::EN10MB, 262144).expect("compiles")
}

/// `n` sessions with uniformly spread keys.
fn uniform(n: usize) -> Vec<Session> {
    (0..n as u64).map(Session::nth).collect()
}

/// `n` sessions whose keys all hash to one home slot of a table holding `n`.
fn colliding(n: usize, layout: &Layout) -> Vec<Session> {
    let slots = (2 * n).next_power_of_two().max(8) as u64;
    let mask = slots - 1;
    let home = |s: &Session| hash(&layout.key(s)) & mask;
    let first = Session::nth(0);
    let target = home(&first);
    let mut out = vec![first];
    let mut c = 1u64;
    while out.len() < n {
        let s = Session::nth(c);
        if home(&s) == target {
            out.push(s);
        }
        c += 1;
    }
    out
}
fn ether(buf: &mut Vec<u8>, ethertype: u16) {
    buf.extend_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
    buf.extend_from_slice(&[0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
    buf.extend_from_slice(&ethertype.to_be_bytes());
}

fn ipv4(buf: &mut Vec<u8>, proto: u8, payload: u16, src: u32, dst: u32) {
    buf.extend_from_slice(&[0x45, 0]);
    buf.extend_from_slice(&(20 + payload).to_be_bytes());
    buf.extend_from_slice(&[0x12, 0x34, 0x40, 0x00, 64, proto, 0, 0]);
    buf.extend_from_slice(&src.to_be_bytes());
    buf.extend_from_slice(&dst.to_be_bytes());
}

fn tcp(buf: &mut Vec<u8>, sport: u16, dport: u16) {
    buf.extend_from_slice(&sport.to_be_bytes());
    buf.extend_from_slice(&dport.to_be_bytes());
    buf.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0]);
}

/// Packets in one buffer, with their (start, end) offsets.
struct Packets {
    data: Vec<u8>,
    spans: Vec<(usize, usize)>,
    /// How many hit a session.
    hits: usize,
}

impl Packets {
    fn build(sessions: &[Session], count: usize, seed: u64) -> Packets {
        let mut rng = Rng::new(seed);
        let mut data = Vec::with_capacity(count * 74);
        let mut spans = Vec::with_capacity(count);
        let mut hits = 0;
        for _ in 0..count {
            let start = data.len();
            let kind = rng.next_u32() % 100;
            let r = rng.next_u32();
            if kind < 90 {
                let s = sessions[((rng.next_u32() as u64 * sessions.len() as u64) >> 32) as usize];
                ether(&mut data, 0x0800);
                ipv4(&mut data, 6, 20, s.src, s.dst);
                tcp(&mut data, s.sport, s.dport);
                hits += 1;
            } else if kind < 95 {
                ether(&mut data, 0x0800);
                ipv4(&mut data, 6, 20, 0x0b00_0000 | (r & 0xffffff), 0xc0a8_0001);
                tcp(&mut data, 1024 + (r >> 24) as u16, 80);
            } else if kind < 98 {
                ether(&mut data, 0x0800);
                ipv4(&mut data, 17, 8, 0x0a00_0000 | (r & 0xffffff), 0xc0a8_0001);
                data.extend_from_slice(&[0x30, 0x39, 0, 53, 0, 8, 0, 0]);
            } else {
                ether(&mut data, 0x86dd);
                data.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
                data.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                data.extend_from_slice(&[0; 8]);
                data.extend_from_slice(&r.to_be_bytes());
                data.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
                data.extend_from_slice(&[0; 11]);
                data.push(1);
                tcp(&mut data, 1024, 80);
            }
            spans.push((start, data.len()));
        }
        Packets { data, spans, hits }
    }

    fn refs(&self, limit: usize) -> Vec<(&[u8], u32)> {
        self.spans[..limit.min(self.spans.len())]
            .iter()
            .map(|&(a, b)| (&self.data[a..b], (b - a) as u32))
            .collect()
    }

    fn write_pcap(&self, path: &PathBuf, limit: usize) {
        let mut out = Vec::with_capacity(24 + self.data.len() + 16 * self.spans.len());
        out.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        out.extend_from_slice(&2u16.to_le_bytes());
        out.extend_from_slice(&4u16.to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&262144u32.to_le_bytes());
        out.extend_from_slice(&1u32.to_le_bytes());
        for (i, &(a, b)) in self.spans.iter().take(limit).enumerate() {
            let len = (b - a) as u32;
            out.extend_from_slice(&(i as u32 / 1_000_000).to_le_bytes());
            out.extend_from_slice(&(i as u32 % 1_000_000).to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&self.data[a..b]);
        }
        std::fs::write(path, out).expect("write pcap");
    }
}

/// Median of 5 passes of `f`, which handles `n` packets per pass: ns per packet.
fn ns_per_packet(n: usize, mut f: impl FnMut() -> usize) -> f64 {
    let mut runs = Vec::new();
    let mut check = None;
    for _ in 0..5 {
        let t = Instant::now();
        let matched = black_box(f());
        runs.push(t.elapsed().as_nanos() as f64 / n as f64);
        assert!(check.map_or(true, |c| c == matched), "passes disagree");
        check = Some(matched);
    }
    runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    runs[runs.len() / 2]
}

fn per_packet(r: &Reader, pkts: &[(&[u8], u32)]) -> usize {
    let mut out = Vec::new();
    let mut matched = 0;
    for &(p, w) in pkts {
        r.classify_into(black_box(p), w, &mut out);
        matched += out.len();
    }
    matched
}

fn batched(r: &Reader, pkts: &[(&[u8], u32)], size: usize) -> usize {
    let mut out = vec![Vec::new(); size];
    let mut matched = 0;
    for chunk in pkts.chunks(size) {
        r.classify_batch(black_box(chunk), &mut out[..chunk.len()]);
        matched += out[..chunk.len()].iter().map(Vec::len).sum::<usize>();
    }
    matched
}

/// A classifier holding `sessions`: the first compiled, the rest key-only.
/// Returns it with the time of the key-only inserts (both copies published).
fn install(sessions: &[Session], layout: &Layout) -> (Classifier, Duration) {
    let mut c = Classifier::new();
    let first = c.insert(&compile(&sessions[0].expression()), 0);
    // Two publishes: left-right copies the first version to its second copy.
    c.publish();
    c.publish();
    let keys: Vec<Vec<u32>> = sessions[1..].iter().map(|s| layout.key(s)).collect();
    let t = Instant::now();
    c.insert_keys(first, keys, 0).expect("key-only insert");
    c.publish();
    c.publish();
    (c, t.elapsed())
}

/// The same sessions in the classifier compiled to machine code.
fn install_native(sessions: &[Session], layout: &Layout) -> AutoClassifier {
    install_engine(sessions, layout)
}

/// The same sessions in any engine.
fn install_engine<E: sluice_classifier::Engine>(
    sessions: &[Session],
    layout: &Layout,
) -> Classifier<E> {
    let mut c = Classifier::<E>::default();
    let first = c.insert(&compile(&sessions[0].expression()), 0);
    c.publish();
    let keys: Vec<Vec<u32>> = sessions[1..].iter().map(|s| layout.key(s)).collect();
    c.insert_keys(first, keys, 0).expect("key-only insert");
    c.publish();
    c.publish();
    c
}

struct Row {
    n: usize,
    classify: f64,
    /// The decision tree as machine code (the default native engine):
    /// classify and first-match batch.
    tree_native: f64,
    tree_native_batch: f64,
    /// The same lookups through the default native engine
    /// (`sluice_native::AutoClassifier`: one shape, so tuple space search).
    native: f64,
    /// Its first-match batch call, 64 packets per call.
    native_batch: f64,
    /// [`MemoryFloor`] on the same packets, its table as large as the
    /// packed tables.
    floor: f64,
    /// Bytes per filter of its tables: the group's own and the packed
    /// copy its code probes.
    native_bytes: f64,
    batch16: f64,
    batch32: f64,
    libpcap: Option<f64>,
    libpcap_packets: usize,
    collide: Option<(f64, f64)>,
    inserts_per_s: f64,
    table_bytes: f64,
    rss_bytes: f64,
}

fn fmt_ns(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} ms", x / 1e6)
    } else if x >= 1e4 {
        format!("{:.1} µs", x / 1e3)
    } else {
        format!("{x:.1} ns")
    }
}

fn run_size(n: usize, layout: &Layout, dump: Option<&PathBuf>) -> Row {
    let sessions = uniform(n);
    let rss0 = rss();
    let (c, took) = install(&sessions, layout);
    let rss1 = rss();
    // Up to 10,000 sessions the key-only inserts take well under a
    // millisecond, so one preemption would decide the figure: the median
    // of 5 fresh installs.
    let took = if n <= 10_000 {
        let mut runs: Vec<Duration> = (0..4).map(|_| install(&sessions, layout).1).collect();
        runs.push(took);
        runs.sort();
        runs[2]
    } else {
        took
    };
    let (filters, _, whole, table) = c.stats();
    assert_eq!((filters, whole), (n, 0), "every session merges");
    let r = c.reader();
    let packets = Packets::build(&sessions, packet_count(), 0x5eed + n as u64);
    let pkts = packets.refs(usize::MAX);
    let classify = ns_per_packet(pkts.len(), || per_packet(&r, &pkts));
    let batch16 = ns_per_packet(pkts.len(), || batched(&r, &pkts, 16));
    let batch32 = ns_per_packet(pkts.len(), || batched(&r, &pkts, 32));
    assert_eq!(
        per_packet(&r, &pkts),
        packets.hits,
        "every session packet matches once"
    );
    assert_eq!(batched(&r, &pkts, 16), packets.hits);
    let (native, native_batch, native_bytes, floor) = {
        let nc = install_native(&sessions, layout);
        let bytes = nc
            .published(|e| {
                let g = e.groups().expect("one shape: tuple space");
                g.merged().table_bytes() + g.packed_bytes()
            })
            .expect("published");
        // Memory alone: each packet's header line and one random line of
        // a table the size of the packed tables the batch code probes.
        let packed = nc
            .published(|e| e.groups().map_or(0, |g| g.packed_bytes()))
            .expect("published");
        let floor = MemoryFloor::new(packed);
        let floor = ns_per_packet(pkts.len(), || floor.run(black_box(&pkts)) as usize);
        let nr = nc.reader();
        let firsts = || {
            let mut out = [None; 64];
            let mut matched = 0;
            for chunk in pkts.chunks(64) {
                let out = &mut out[..chunk.len()];
                nr.classify_first_batch(black_box(chunk), out);
                matched += out.iter().filter(|o| o.is_some()).count();
            }
            matched
        };
        assert_eq!(
            firsts(),
            packets.hits,
            "native batch: every session packet matches once"
        );
        let pass = || {
            let mut out = Vec::new();
            let mut matched = 0;
            for &(p, w) in &pkts {
                nr.classify_into(black_box(p), w, &mut out);
                matched += out.len();
            }
            matched
        };
        assert_eq!(
            pass(),
            packets.hits,
            "native: every session packet matches once"
        );
        (
            ns_per_packet(pkts.len(), pass),
            ns_per_packet(pkts.len(), firsts),
            bytes as f64 / n as f64,
            floor,
        )
    };

    let (tree_native, tree_native_batch) = {
        let tc: Classifier<NativeTree> = install_engine(&sessions, layout);
        let tr = tc.reader();
        let firsts = || {
            let mut out = [None; 64];
            let mut matched = 0;
            for chunk in pkts.chunks(64) {
                let out = &mut out[..chunk.len()];
                tr.classify_first_batch(black_box(chunk), out);
                matched += out.iter().filter(|o| o.is_some()).count();
            }
            matched
        };
        assert_eq!(
            firsts(),
            packets.hits,
            "tree: every session packet matches once"
        );
        let pass = || {
            let mut out = Vec::new();
            let mut matched = 0;
            for &(p, w) in &pkts {
                tr.classify_into(black_box(p), w, &mut out);
                matched += out.len();
            }
            matched
        };
        (
            ns_per_packet(pkts.len(), pass),
            ns_per_packet(pkts.len(), firsts),
        )
    };

    // The CSPF/BPF model: every libpcap program on every packet.
    let small = (20_000_000 / n).clamp(200, packet_count());
    let libpcap = (n <= LIBPCAP_MAX && !quick()).then(|| {
        let dead = pcap::Capture::dead(pcap::Linktype(1)).expect("libpcap");
        let progs: Vec<_> = sessions
            .iter()
            .map(|s| {
                dead.compile(&s.expression(), true)
                    .expect("libpcap compiles")
            })
            .collect();
        let few = &pkts[..small];
        let t = ns_per_packet(few.len(), || {
            let mut m = 0;
            for &(p, _) in few {
                let p = black_box(p);
                m += progs.iter().filter(|b| b.filter(p)).count();
            }
            m
        });
        assert_eq!(
            progs
                .iter()
                .map(|b| few.iter().filter(|(p, _)| b.filter(p)).count())
                .sum::<usize>(),
            per_packet(&r, few),
            "libpcap and sluice agree"
        );
        t
    });
    if let Some(dir) = dump {
        let mut text = String::new();
        for (i, s) in sessions.iter().enumerate() {
            let _ = writeln!(text, "s{i}\t{}", s.expression());
        }
        std::fs::write(dir.join(format!("sessions-{n}.txt")), text).expect("write filters");
        packets.write_pcap(&dir.join(format!("packets-{n}.pcap")), usize::MAX);
        packets.write_pcap(&dir.join(format!("small-{n}.pcap")), small);
    }
    drop(pkts);
    drop(r);
    drop(c);

    let collide = (n <= COLLIDE_MAX && !quick()).then(|| {
        let sessions = colliding(n, layout);
        let (c, _) = install(&sessions, layout);
        let r = c.reader();
        let count = (200_000_000 / n).clamp(1000, packet_count());
        let packets = Packets::build(&sessions, count, 0xc011 + n as u64);
        let pkts = packets.refs(usize::MAX);
        assert_eq!(per_packet(&r, &pkts), packets.hits);
        (
            ns_per_packet(pkts.len(), || per_packet(&r, &pkts)),
            ns_per_packet(pkts.len(), || batched(&r, &pkts, 16)),
        )
    });
    Row {
        n,
        tree_native,
        tree_native_batch,
        classify,
        native,
        native_batch,
        floor,
        native_bytes,
        batch16,
        batch32,
        libpcap,
        libpcap_packets: small,
        collide,
        inserts_per_s: if n > 1 {
            (n - 1) as f64 / took.as_secs_f64()
        } else {
            f64::NAN
        },
        table_bytes: table as f64 / n as f64,
        rss_bytes: rss1.saturating_sub(rss0) as f64 / n as f64,
    }
}

/// Compile and insert `n` real session expressions one by one.
fn structural(n: usize) -> (Duration, Duration) {
    let sessions = uniform(n);
    let mut c = Classifier::new();
    let t = Instant::now();
    let filters: Vec<_> = sessions.iter().map(|s| compile(&s.expression())).collect();
    let compile_time = t.elapsed();
    let t = Instant::now();
    for f in &filters {
        c.insert(f, 0);
    }
    c.publish();
    c.publish();
    let insert_time = t.elapsed();
    assert_eq!(c.stats().1, 1, "compiled sessions merge into one group");
    (compile_time, insert_time)
}

/// Time new shapes into a classifier holding 10,000 sessions: (expression,
/// compile, insert + publish of both copies).
fn new_shapes(layout: &Layout) -> Vec<(&'static str, Duration, Duration)> {
    let (mut c, _) = install(&uniform(10_000), layout);
    let mut out = Vec::new();
    for e in [
        "udp and dst port 5353",
        "icmp",
        "tcp dst port 22 and src net 172.16.0.0/12",
        "ip6 and udp port 53",
        "vlan and tcp",
    ] {
        let t = Instant::now();
        let f = compile(e);
        let tc = t.elapsed();
        let t = Instant::now();
        c.insert(&f, 0);
        c.publish();
        c.publish();
        out.push((e, tc, t.elapsed()));
    }
    out
}

fn main() {
    let sizes: Vec<usize> = std::env::var("SLUICE_BENCH_SIZES")
        .ok()
        .map(|s| {
            s.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_else(|| vec![1, 10, 100, 1_000, 10_000, 100_000, 1_000_000]);
    let dump = std::env::var_os("SLUICE_BENCH_DIR").map(PathBuf::from);
    let layout = Layout::find();
    println!(
        "{} packets in memory: 90% TCP of an installed session (uniform), 5% TCP of no session, 3% UDP, 2% IPv6/TCP\n",
        packet_count()
    );
    println!("| N | sluice classify | sluice batch 16 | sluice batch 32 | sluice native classify | sluice native first-match batch 64 | memory floor | libpcap × N (CSPF/BPF) | libpcap / batch 16 | collisions: classify | collisions: batch 16 | key-only inserts/s | table bytes / filter | native table bytes / filter | RSS growth / filter |");
    println!(
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
    );
    let mut tsv = String::from("n\tclassify\tbatch16\tbatch32\tlibpcap\tlibpcap_packets\tcollide_classify\tcollide_batch16\tinserts_per_s\ttable_bytes\trss_bytes\tnative\tnative_batch\tnative_bytes\tfloor\n");
    let mut base = None;
    for &n in &sizes {
        let row = run_size(n, &layout, dump.as_ref());
        eprintln!(
            "N={}: tree native classify {:.1} ns, tree native first-match batch {:.1} ns; groups native {:.1} / {:.1} ns",
            row.n, row.tree_native, row.tree_native_batch, row.native, row.native_batch
        );
        let base = *base.get_or_insert((row.classify, row.batch16));
        let opt = |x: Option<f64>| x.map_or("-".to_string(), fmt_ns);
        println!(
            "| {} | {} ({:.2}×) | {} ({:.2}×) | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.0} B | {:.0} B | {:.0} B |",
            row.n,
            fmt_ns(row.classify),
            row.classify / base.0,
            fmt_ns(row.batch16),
            row.batch16 / base.1,
            fmt_ns(row.batch32),
            fmt_ns(row.native),
            fmt_ns(row.native_batch),
            fmt_ns(row.floor),
            opt(row.libpcap),
            row.libpcap
                .map_or("-".into(), |l| format!("{:.1}×", l / row.batch16)),
            opt(row.collide.map(|c| c.0)),
            opt(row.collide.map(|c| c.1)),
            if row.inserts_per_s.is_nan() {
                "-".to_string()
            } else {
                format!("{:.2} M", row.inserts_per_s / 1e6)
            },
            row.table_bytes,
            row.native_bytes,
            row.rss_bytes,
        );
        std::io::stdout().flush().ok();
        let num = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
        let _ = writeln!(
            tsv,
            "{}\t{:.2}\t{:.2}\t{:.2}\t{}\t{}\t{}\t{}\t{:.0}\t{:.1}\t{:.1}\t{:.2}\t{:.2}\t{:.1}\t{:.2}",
            row.n,
            row.classify,
            row.batch16,
            row.batch32,
            num(row.libpcap),
            row.libpcap_packets,
            num(row.collide.map(|c| c.0)),
            num(row.collide.map(|c| c.1)),
            row.inserts_per_s,
            row.table_bytes,
            row.rss_bytes,
            row.native,
            row.native_batch,
            row.native_bytes,
            row.floor
        );
    }
    if let Some(dir) = &dump {
        std::fs::write(dir.join("results.tsv"), &tsv).expect("write results");
    }

    if quick() {
        return;
    }
    println!("\nCompiling and inserting real expressions (the structural path):\n");
    println!("| N | compile (sluice::pcap::compile) | Classifier::insert + publish | per filter |");
    println!("| --- | --- | --- | --- |");
    for n in [1, 10, 100, 1_000, 10_000] {
        let (tc, ti) = structural(n);
        println!(
            "| {n} | {:.1} ms | {:.1} ms | {:.1} µs |",
            tc.as_secs_f64() * 1e3,
            ti.as_secs_f64() * 1e3,
            (tc + ti).as_secs_f64() * 1e6 / n as f64
        );
    }
    println!("\nA new shape into a classifier holding 10,000 session filters:\n");
    println!("| expression | compile | insert + publish |");
    println!("| --- | --- | --- |");
    for (e, tc, ti) in new_shapes(&layout) {
        println!(
            "| `{e}` | {:.1} µs | {:.1} µs |",
            tc.as_secs_f64() * 1e6,
            ti.as_secs_f64() * 1e6
        );
    }
}
