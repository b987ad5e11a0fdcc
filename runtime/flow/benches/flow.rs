//! Flow costs, after FFPF's Table 1 and Figure 12, in nanoseconds:
//!
//! * `table1/*`: calling a filter, one more stage in a flow, saving an
//!   index in an IBuf, storing a 1500-byte packet in a PBuf, and the
//!   footnote-5 filter `ip src 192.168.1.3 and udp and dst port 54321` as
//!   FPL-2 and as BPF (native code and interpreters);
//! * `flow/three_elements`: packets per second through
//!   `(mem) -> (sampler,1) -> (BPF,"tcp") -> (packetcount,pass)` with a
//!   callback draining the flow every 64 packets;
//! * `figure12/consumers/N`: N flows watching the same traffic in one group
//!   (one shared BPF instance, one copy of each packet, N readers).
//!
//! Packets: the Ethernet packets of the conformance captures (or
//! `examples/sample.pcap` without the corpus), held in memory by a source
//! class registered for the benchmark. The memory per flow is printed at
//! the start (IBuf/MBuf bytes per flow and the process's RSS growth for
//! 1,000 flows with different BPF expressions).
//!
//! `cargo bench -p sluice-flow --bench flow`

// criterion's macros make public functions without documentation.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluice_flow::buffer::{IBuf, MBuf, Meta, PBuf, Preference};
use sluice_flow::class::{
    ArgError, BuildEnv, Classes, FilterClass, Pkt, Source, SourceClass, SourcePacket,
};
use sluice_flow::value::Value;
use sluice_flow::{Flow, Group, GroupConfig};
use sluice_testsupport::corpus;
use std::sync::Arc;
use std::time::Duration;

/// The benchmark's packets: the Ethernet packets of the corpus captures
/// (the sample capture's where the corpus is absent).
fn packets() -> Arc<Vec<SourcePacket>> {
    let mut v = Vec::new();
    for p in corpus::pcaps_or_sample().iter().flat_map(corpus::packets) {
        if p.linktype == 1 {
            v.push(SourcePacket {
                packet: sluice_capture::OwnedPacket {
                    ts_sec: v.len() as i64,
                    ts_nsec: 0,
                    caplen: p.data.len() as u32,
                    wirelen: p.wirelen,
                    linktype: 1,
                    snaplen: p.snaplen,
                    interface: 0,
                    data: p.data,
                },
                big_endian: false,
                due: None,
            });
        }
    }
    Arc::new(v)
}

/// `(mem,N)`: the packets, N times over.
struct MemClass(Arc<Vec<SourcePacket>>);
struct Mem {
    pkts: Arc<Vec<SourcePacket>>,
    left: u64,
    i: usize,
}

impl SourceClass for MemClass {
    fn name(&self) -> &str {
        "mem"
    }
    fn check(&self, _: &[String]) -> Result<(), ArgError> {
        Ok(())
    }
    fn open(&self, args: &[String]) -> Result<Box<dyn Source>, ArgError> {
        let n = args.first().and_then(|a| a.parse().ok()).unwrap_or(1);
        Ok(Box::new(Mem {
            pkts: self.0.clone(),
            left: n * self.0.len() as u64,
            i: 0,
        }))
    }
}

impl Source for Mem {
    fn next(&mut self, out: &mut SourcePacket) -> Result<bool, String> {
        if self.left == 0 {
            return Ok(false);
        }
        self.left -= 1;
        let p = &self.pkts[self.i];
        self.i = (self.i + 1) % self.pkts.len();
        out.packet.set(&p.packet.as_packet());
        Ok(true)
    }
    fn linktypes(&self) -> Vec<(u16, bool)> {
        vec![(1, false)]
    }
    fn report(&self) -> Value {
        Value::Null
    }
}

fn classes(pkts: &Arc<Vec<SourcePacket>>) -> Classes {
    let mut c = Classes::builtin();
    c.register_source(Arc::new(MemClass(pkts.clone())));
    c
}

/// Time to run `specs` over `passes` copies of the packets, per packet.
fn run_flows(pkts: &Arc<Vec<SourcePacket>>, specs: &[String], every: u64) -> Duration {
    let g = Group::with_classes(GroupConfig::default(), classes(pkts)).unwrap();
    let mut flows = Vec::new();
    for s in specs {
        let mut f = Flow::create(&g);
        f.populate(s).unwrap();
        f.on_packets(every, |b| while b.next().is_some() {})
            .unwrap();
        f.instantiate_unchecked().unwrap();
        f.activate().unwrap();
        flows.push(f);
    }
    let t = std::time::Instant::now();
    let st = g.run().unwrap();
    t.elapsed() / st.packets.max(1) as u32
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn memory_per_flow(pkts: &Arc<Vec<SourcePacket>>) {
    let g = Group::with_classes(
        GroupConfig {
            slots: 1024,
            slot_bytes: 1514,
            ibuf_entries: 1024,
            ..GroupConfig::default()
        },
        classes(pkts),
    )
    .unwrap();
    let before = rss_kib();
    let n = 1000;
    let flows: Vec<Flow> = (0..n)
        .map(|i| {
            let mut f = Flow::create(&g);
            f.populate(&format!(
                "(mem,1) -> (BPF,\"tcp port {i}\") -> (packetcount,pass,8)"
            ))
            .unwrap();
            f.instantiate_unchecked().unwrap();
            f.activate().unwrap();
            f
        })
        .collect();
    let after = rss_kib();
    eprintln!(
        "memory per flow ({n} flows, BPF + packetcount, 1024-entry IBufs): {} B of IBuf/MBuf, {} B of process RSS growth (native code, elements, buffers); PBuf {} B for the whole group",
        g.instance_buffer_bytes() / n,
        (after.saturating_sub(before) * 1024) / n as u64,
        g.pbuf().memory_bytes()
    );
    drop(flows);
}

fn bench(c: &mut Criterion) {
    let pkts = packets();
    memory_per_flow(&pkts);
    let mut g = c.benchmark_group("table1");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_millis(300));

    // Calling a filter: one element's run through the trait object.
    let count = sluice_flow::class::CountClass { bytes: false };
    let mut elem = count.build(&["pass".into()], &BuildEnv::default()).unwrap();
    let mem = MBuf::new(2);
    let p = &pkts[0];
    let pkt = Pkt {
        data: &p.packet.data,
        wirelen: p.packet.wirelen,
        linktype: 1,
        ts_sec: 0,
        ts_nsec: 0,
        big_endian: false,
    };
    g.bench_function("calling_a_filter", |b| {
        b.iter(|| {
            mem.begin();
            let r = elem.run(black_box(&pkt), &mem);
            mem.end();
            r
        })
    });

    // IBuf: saving one index.
    let ib = IBuf::new(1024, Preference::Fast).unwrap();
    let mut i = 0u64;
    g.bench_function("saving_index_in_ibuf", |b| {
        b.iter(|| {
            i += 1;
            ib.push(black_box(i), 1)
        })
    });

    // PBuf: storing a 1500-byte packet.
    let data = vec![0xabu8; 1500];
    let meta = Meta {
        caplen: 1500,
        wirelen: 1500,
        linktype: 1,
        ..Meta::default()
    };
    for pref in [Preference::Slow, Preference::Fast] {
        let pb = PBuf::new(1024, 1514, pref).unwrap();
        g.bench_function(format!("storing_1500B_in_pbuf_{pref}"), |b| {
            b.iter(|| {
                let w = pb.written();
                pb.store(&meta, black_box(&data), w)
            })
        });
    }

    // One more stage: a flow of k pass-everything samplers, per packet.
    let fewer: Vec<SourcePacket> = pkts.iter().take(2000).cloned().collect();
    let fewer = Arc::new(fewer);
    for k in [1usize, 4] {
        let spec = format!(
            "(mem,20){}",
            (0..k)
                .map(|j| format!(" -> (sampler,1,{})", 4 + 4 * j))
                .collect::<String>()
        );
        g.bench_function(format!("flow_of_{k}_stages_per_packet"), |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| run_flows(&fewer, std::slice::from_ref(&spec), 64))
                    .sum()
            })
        });
    }

    // Footnote 5's filter in FPL-2 and in BPF.
    let expr = "ip src 192.168.1.3 and udp and dst port 54321";
    let fpl_src = "IF (PKT.ETH_TYPE == 0x0800 && PKT.IP_SRC == 0xC0A80103 && PKT.IP_PROTO == PROTO_UDP && (PKT.W[20] & 0x1FFF) == 0 && PKT.UDP_DPORT == 54321) THEN RETURN 1; FI RETURN 0;";
    let fpl = sluice_fpl::Program::compile(fpl_src, &sluice_fpl::Externs::new());
    let fpl = match fpl {
        Ok(p) => Some(p),
        Err(e) => {
            eprintln!("FPL version of footnote 5 did not compile: {e}");
            None
        }
    };
    let program = sluice_filter::Program::builder(sluice_filter::LinkType::EN10MB)
        .build(expr)
        .unwrap();
    let native_bpf = program.native().unwrap();
    let sample: Vec<&SourcePacket> = pkts.iter().take(4096).collect();
    g.bench_function("footnote5_bpf_native_per_packet", |b| {
        b.iter(|| {
            sample
                .iter()
                .map(|p| native_bpf.run(&p.packet.data, p.packet.wirelen))
                .sum::<u32>()
        })
    });
    g.bench_function("footnote5_bpf_interpreter_per_packet", |b| {
        b.iter(|| {
            sample
                .iter()
                .map(|p| program.run(&p.packet.data, p.packet.wirelen))
                .sum::<u32>()
        })
    });
    if let Some(fpl) = &fpl {
        let native = sluice_native::fpl::NativeFpl::compile(fpl).unwrap();
        let mut mem = vec![0u32; fpl.mem_words()];
        // Same verdicts, or the comparison means nothing.
        let differ = sample
            .iter()
            .filter(|p| {
                (native.run(&p.packet.data, &mut mem) != 0)
                    != (native_bpf.run(&p.packet.data, p.packet.wirelen) != 0)
            })
            .count();
        eprintln!(
            "footnote 5: FPL and BPF verdicts differ on {differ} of {} packets",
            sample.len()
        );
        g.bench_function("footnote5_fpl_native_per_packet", |b| {
            b.iter(|| {
                sample
                    .iter()
                    .map(|p| native.run(&p.packet.data, &mut mem))
                    .sum::<u32>()
            })
        });
        g.bench_function("footnote5_fpl_interpreter_per_packet", |b| {
            b.iter(|| {
                sample
                    .iter()
                    .map(|p| fpl.run(&p.packet.data, &mut mem))
                    .sum::<u32>()
            })
        });
    }
    g.finish();
    eprintln!(
        "(footnote5_* figures are for {} packets; divide by it)",
        sample.len()
    );

    let mut g = c.benchmark_group("flow");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(300));
    let spec = "(mem,4) -> (sampler,1) -> (BPF,\"tcp\") -> (packetcount,pass)".to_string();
    g.bench_function("three_elements_per_packet", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run_flows(&pkts, std::slice::from_ref(&spec), 64))
                .sum()
        })
    });
    g.finish();

    let mut g = c.benchmark_group("figure12");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_millis(300));
    for n in [1usize, 2, 4, 8] {
        let specs: Vec<String> = (0..n)
            .map(|_| "(mem,4) -> (BPF,\"ip\")".to_string())
            .collect();
        g.bench_function(format!("consumers_{n}_per_packet"), |b| {
            b.iter_custom(|iters| (0..iters).map(|_| run_flows(&pkts, &specs, 64)).sum())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
