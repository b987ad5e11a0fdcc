//! A stress test of the shared-memory protocol between the daemon's data
//! path and its readers: the daemon's own [`Deliver`] (the only writer)
//! stores numbered packets into two flow groups' packet buffers in shared
//! regions and their flows' index buffers, and readers in other processes
//! (this test binary run again, handed the regions over a Unix socket
//! with `SCM_RIGHTS`, as the daemon hands them to clients) and in threads
//! read them, under slow- and fast-reader preference.
//!
//! The rule it checks: each reader sees the numbers its flow accepted in
//! strictly increasing order (no packet twice, none out of order), each
//! intact (its bytes, lengths and time stamp are the ones written, never
//! a torn copy), and every number it does not see is a counted loss:
//! `missing = lost by the reader + dropped by the daemon`, and
//! `delivered + lost + dropped = accepted`, where `accepted` is exactly
//! what the flow's filter accepted. Paced runs (the writer waits after
//! each burst until every reader has caught up, so readers keep up) must
//! lose nothing at all; flooded runs (a deliberately slow reader, small
//! buffers) must lose packets, all counted.
//!
//! By default each run is a few hundred thousand packets (a few seconds in
//! all); `SLUICE_SOAK=1` sends twenty times as many.

use super::deliver::{Clock, Deliver, Group, Member, PathCounts, Route, Routes};
use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use sluice_capture::Packet;
use sluice_flow::buffer::{IBuf, PBuf, Preference, Reader};
use sluice_shm::{Channel, Listener, Region, Wake};
use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The environment variable that makes a run of this binary a reader
/// process: the socket to fetch its flow from.
const CHILD_SOCKET: &str = "SLUICE_STRESS_SOCKET";
/// Bytes each packet buffer slot keeps (packets up to 300 bytes are
/// written, so some are cut).
const SLOT_BYTES: usize = 256;
/// How long any reader or the writer waits for the other side at most.
const PATIENCE: Duration = Duration::from_secs(120);

/// Whether flow `k` accepts packet `n` (flows differ, some accept all).
fn accepts(k: usize, n: u64) -> bool {
    match k % 4 {
        0 => true,
        1 => n % 3 != 0,
        2 => n % 2 == 0,
        _ => mix(n ^ (k as u64) << 40) % 5 < 2,
    }
}

/// A fixed scrambling of a number (splitmix64's finaliser).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Packet `n`'s length on the wire: 8 to 300 bytes.
fn wire_len(n: u64) -> usize {
    8 + (mix(n) % 293) as usize
}

/// Packet `n`'s bytes: its number, then a pattern made from it.
fn bytes(n: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&n.to_le_bytes());
    let len = wire_len(n);
    out.extend((8..len).map(|i| (n as u8).wrapping_mul(31).wrapping_add(i as u8)));
}

/// One reader's part, sent to a reader process.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Role {
    /// The flow (its filter: [`accepts`]).
    flow: usize,
    /// The index buffer's reader slot registered for this reader.
    slot: usize,
    /// Packets the writer sends (numbers `0..packets`).
    packets: u64,
    /// Sleep now and then (to make the writer lose packets).
    slow: bool,
    /// Poll rather than sleep on the flow's wake-up (a second reader of
    /// one flow: the wake-up is the first reader's).
    poll: bool,
}

/// What a reader found.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Report {
    flow: usize,
    delivered: u64,
    /// Counted lost by the reader (overwritten before it read them, FRP).
    lost: u64,
    /// Numbers the flow accepted that the reader did not see.
    missing: u64,
    /// The first few things that were wrong.
    errors: Vec<String>,
}

/// How many of `from..to` flow `k` accepts.
fn accepted_between(k: usize, from: u64, to: u64) -> u64 {
    (from..to).filter(|&n| accepts(k, n)).count() as u64
}

/// Read a flow to its end, checking every packet (see the module docs).
fn read_flow(pbuf: Arc<PBuf>, ibuf: Arc<IBuf>, wake: Option<&Wake>, role: &Role) -> Report {
    let mut report = Report {
        flow: role.flow,
        ..Report::default()
    };
    let err = |report: &mut Report, e: String| {
        if report.errors.len() < 5 {
            report.errors.push(e);
        }
    };
    let Some(mut reader) = Reader::adopt(pbuf, ibuf.clone(), role.slot, 16) else {
        err(&mut report, "the reader slot is not registered".into());
        return report;
    };
    let mut next_unseen = 0u64;
    let mut want = Vec::new();
    let start = Instant::now();
    loop {
        if let Some(p) = reader.next() {
            report.delivered += 1;
            let Some(n) = p
                .data
                .get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
            else {
                err(&mut report, format!("a packet of {} bytes", p.data.len()));
                continue;
            };
            if n < next_unseen {
                err(&mut report, format!("packet {n} after {}", next_unseen - 1));
                continue;
            }
            if n >= role.packets || !accepts(role.flow, n) {
                err(
                    &mut report,
                    format!("packet {n} is not one flow {} accepts", role.flow),
                );
                continue;
            }
            bytes(n, &mut want);
            let keep = want.len().min(SLOT_BYTES);
            if p.data != &want[..keep]
                || p.meta.wirelen as usize != want.len()
                || p.meta.ts_sec != n as i64
                || p.meta.ts_nsec != (n % 1_000_000_000) as u32
            {
                err(&mut report, format!("packet {n} is not the one written"));
            }
            report.missing += accepted_between(role.flow, next_unseen, n);
            next_unseen = n + 1;
            if role.slow && report.delivered % 64 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
            continue;
        }
        if ibuf.finished() {
            if reader.available() > 0 {
                continue; // pushed just before the end
            }
            break;
        }
        if start.elapsed() > PATIENCE {
            err(&mut report, "the writer never finished".into());
            break;
        }
        match (wake, role.poll) {
            (Some(w), false) => {
                // The client's way: say it sleeps, look once more, sleep.
                reader.commit();
                ibuf.set_sleeping();
                if reader.available() == 0 && !ibuf.finished() {
                    let _ = w.wait(Some(Duration::from_millis(100)));
                }
            }
            _ => {
                reader.wait_for(1, Duration::from_millis(5));
            }
        }
    }
    report.missing += accepted_between(role.flow, next_unseen, role.packets);
    report.lost = reader.lost();
    report
}

/// Where a reader runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Process,
    Thread,
}

/// A reader of the run: its flow, place, and whether it is slow or polls.
#[derive(Clone, Copy, Debug)]
struct Spec {
    flow: usize,
    place: Place,
    slow: bool,
    poll: bool,
}

/// One run: `packets` packets through two groups (flows 0-3 and 4-5)
/// with small buffers, paced or flooded.
fn run(pref: Preference, packets: u64, paced: bool) {
    const FLOWS: usize = 6;
    let group_of = |k: usize| usize::from(k >= 4);
    let (slots, entries) = (64, 96);
    let groups: Vec<Arc<Group>> = (0..2)
        .map(|_| {
            Arc::new(Group::new(
                PBuf::in_region(slots, SLOT_BYTES, pref).unwrap(),
            ))
        })
        .collect();
    let members: Vec<Arc<Member>> = (0..FLOWS)
        .map(|k| {
            let ibuf = Arc::new(IBuf::in_region(entries, pref).unwrap());
            Arc::new(Member::new(k as u64, ibuf, Arc::new(Wake::new().unwrap())))
        })
        .collect();
    let mut routes = Routes::default();
    for (k, m) in members.iter().enumerate() {
        let g = &groups[group_of(k)];
        g.members.rcu(|v| {
            let mut v = (**v).clone();
            v.push(m.clone());
            v
        });
        let route = Route {
            group: g.clone(),
            member: m.clone(),
            result: 1,
        };
        routes = routes.with(k as u32, Some(Arc::new(route)));
    }
    // Each flow's first reader (as the daemon registers its client's),
    // and second readers of flows 0 (a thread) and 4 (a process).
    let mut readers: Vec<Spec> = (0..FLOWS)
        .map(|flow| Spec {
            flow,
            place: if flow == 3 || flow == 5 {
                Place::Thread
            } else {
                Place::Process
            },
            slow: !paced && flow == 2,
            poll: false,
        })
        .collect();
    for (flow, place) in [(0, Place::Thread), (4, Place::Process)] {
        readers.push(Spec {
            flow,
            place,
            slow: false,
            poll: true,
        });
    }
    let slots_of: Vec<usize> = readers
        .iter()
        .map(|r| members[r.flow].ibuf.register().expect("a reader slot"))
        .collect();
    let role = |i: usize| Role {
        flow: readers[i].flow,
        slot: slots_of[i],
        packets,
        slow: readers[i].slow,
        poll: readers[i].poll,
    };

    // Reader processes: this binary again, each fetching its flow's
    // regions from the socket.
    let sock = std::env::temp_dir().join(format!(
        "sluice-stress-{}-{:?}-{paced}.sock",
        std::process::id(),
        pref
    ));
    let listener = Listener::bind(&sock, Some(0o600), None).unwrap();
    let exe = std::env::current_exe().unwrap();
    let procs: Vec<usize> = (0..readers.len())
        .filter(|&i| readers[i].place == Place::Process)
        .collect();
    let mut children = Vec::new();
    let mut chans = Vec::new();
    for &i in &procs {
        let child = Command::new(&exe)
            .args([
                "--exact",
                "server::stress::reader_process",
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_SOCKET, &sock)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        children.push(child);
        let chan = listener.accept().unwrap();
        let m = &members[readers[i].flow];
        let pbuf = &groups[group_of(readers[i].flow)].pbuf;
        let fds = [
            pbuf.region().unwrap().read_only_fd().unwrap(),
            m.ibuf.region().unwrap().fd().try_clone_to_owned().unwrap(),
            m.wake.as_fd().try_clone_to_owned().unwrap(),
        ];
        let b: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
        chan.send(&serde_json::to_vec(&role(i)).unwrap(), &b)
            .unwrap();
        chans.push(chan);
    }
    // Each says it has mapped its regions.
    for c in &chans {
        assert!(
            c.readable(Some(PATIENCE)).unwrap(),
            "a reader process never started"
        );
        assert_eq!(c.recv().unwrap().unwrap().bytes, b"ready");
    }
    let threads: Vec<_> = (0..readers.len())
        .filter(|&i| readers[i].place == Place::Thread)
        .map(|i| {
            let m = members[readers[i].flow].clone();
            let pbuf = groups[group_of(readers[i].flow)].pbuf.clone();
            let r = role(i);
            std::thread::spawn(move || {
                let wake = (!r.poll).then_some(&*m.wake);
                read_flow(pbuf, m.ibuf.clone(), wake, &r)
            })
        })
        .collect();

    // The writer: the daemon's data path.
    let mut deliver = Deliver::new(
        Arc::new(ArcSwap::from_pointee(routes)),
        None,
        Arc::new(Clock::new()),
        Arc::new(PathCounts::default()),
    );
    let burst = 48u64;
    let mut data = Vec::new();
    let mut ids = Vec::new();
    for n in 0..packets {
        bytes(n, &mut data);
        let pkt = Packet {
            ts_sec: n as i64,
            ts_nsec: (n % 1_000_000_000) as u32,
            caplen: data.len() as u32,
            wirelen: data.len() as u32,
            linktype: 1,
            snaplen: 65535,
            interface: 0,
            data: &data,
        };
        ids.clear();
        ids.extend((0..FLOWS).filter(|&k| accepts(k, n)).map(|k| k as u32));
        deliver.packet(&pkt, &ids);
        // As the capture thread does after each read of the rings.
        if (n + 1) % 16 == 0 {
            deliver.handed();
        }
        if paced && (n + 1) % burst == 0 {
            // Readers keep up: wait until each has read everything.
            let start = Instant::now();
            while members
                .iter()
                .any(|m| m.ibuf.slowest_reader() < m.ibuf.written())
            {
                assert!(start.elapsed() < PATIENCE, "readers stopped reading");
                std::thread::yield_now();
            }
        }
    }
    deliver.handed();
    for m in &members {
        m.ibuf.finish();
        m.wake.signal().unwrap();
    }

    // What the readers found.
    let mut reports: Vec<Report> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    for (c, mut child) in chans.iter().zip(children) {
        let got = c.readable(Some(PATIENCE)).unwrap() && {
            match c.recv().unwrap() {
                Some(m) => {
                    reports.push(serde_json::from_slice(&m.bytes).unwrap());
                    true
                }
                None => false,
            }
        };
        let out = {
            let status = child.wait().unwrap();
            let mut err = String::new();
            use std::io::Read;
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            (status, err)
        };
        assert!(got && out.0.success(), "a reader process failed: {}", out.1);
    }
    drop(listener);
    assert_eq!(reports.len(), readers.len());
    let what = format!("{pref:?}, {}", if paced { "paced" } else { "flooded" });
    let mut lost_somewhere = 0;
    for r in &reports {
        let ib = &members[r.flow].ibuf;
        let accepted = accepted_between(r.flow, 0, packets);
        assert!(
            r.errors.is_empty(),
            "{what}: flow {}: {:?}",
            r.flow,
            r.errors
        );
        assert_eq!(ib.accepted(), accepted, "{what}: flow {}", r.flow);
        assert_eq!(
            r.delivered + r.lost + ib.drops(),
            accepted,
            "{what}: flow {}: delivered + lost + dropped = accepted ({r:?}, {} dropped)",
            r.flow,
            ib.drops()
        );
        assert_eq!(
            r.missing,
            r.lost + ib.drops(),
            "{what}: flow {}: every packet not seen is counted",
            r.flow
        );
        if pref == Preference::Slow {
            assert_eq!(r.lost, 0, "{what}: SRP readers lose nothing themselves");
        }
        if paced {
            assert_eq!(r.missing, 0, "{what}: readers that keep up lose nothing");
        }
        lost_somewhere += r.missing;
    }
    if paced {
        for g in &groups {
            assert_eq!(g.pbuf.drops(), 0, "{what}");
        }
    } else {
        assert!(
            lost_somewhere > 0,
            "{what}: the slow reader made no loss to count"
        );
    }
}

fn soak() -> u64 {
    match std::env::var_os("SLUICE_SOAK") {
        Some(_) => 20,
        None => 1,
    }
}

#[test]
fn srp_readers_that_keep_up_lose_nothing_across_processes() {
    run(Preference::Slow, 60_000 * soak(), true);
}

#[test]
fn srp_losses_are_all_counted_across_processes() {
    run(Preference::Slow, 150_000 * soak(), false);
}

#[test]
fn frp_readers_that_keep_up_lose_nothing_across_processes() {
    run(Preference::Fast, 60_000 * soak(), true);
}

#[test]
fn frp_losses_are_all_counted_and_no_copy_is_torn() {
    run(Preference::Fast, 150_000 * soak(), false);
}

/// A reader process of the runs above (this binary started again by
/// them, with [`CHILD_SOCKET`] set): map the flow's regions as a client
/// does, read, and send the report back.
#[test]
#[ignore = "the reader process of the stress tests, which start it"]
fn reader_process() {
    let Some(path) = std::env::var_os(CHILD_SOCKET) else {
        return;
    };
    let chan = Channel::connect(path.as_ref()).unwrap();
    assert!(chan.readable(Some(PATIENCE)).unwrap());
    let mut got = chan.recv().unwrap().unwrap();
    let role: Role = serde_json::from_slice(&got.bytes).unwrap();
    assert_eq!(got.fds.len(), 3);
    let wake = Wake::from_fd(got.fds.pop().unwrap());
    let ibuf = Arc::new(
        IBuf::attach(Arc::new(Region::map(got.fds.pop().unwrap(), true).unwrap())).unwrap(),
    );
    let pbuf_region = Region::map(got.fds.pop().unwrap(), false).unwrap();
    assert!(!pbuf_region.writable());
    let pbuf = Arc::new(PBuf::attach(Arc::new(pbuf_region)).unwrap());
    chan.send(b"ready", &[]).unwrap();
    let report = read_flow(pbuf, ibuf, Some(&wake), &role);
    chan.send(&serde_json::to_vec(&report).unwrap(), &[])
        .unwrap();
}
