//! The daemon's recent past, for the status page: one sample about every
//! second for the last [`WINDOW`] samples, of each interface's counts and
//! of each client's and each flow's packets accepted, read and dropped.
//!
//! The rule: memory is bounded whatever clients do. At most
//! [`MAX_CLIENT_SERIES`] clients and [`MAX_FLOW_SERIES`] flows have a
//! series of their own at once (the first to come); the rest are summed
//! into an "other clients" and an "other flows" series, so every packet
//! is in some series. A series is a running total that never goes down
//! (a flow that closes stops adding to its client's total; it takes
//! nothing away), so the difference of two points is what happened
//! between them, and a series ends when its client or flow goes away and
//! is forgotten once its last point has left the window.

use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};

/// Samples kept: ten minutes at one a second.
pub const WINDOW: usize = 600;
/// Clients with a series of their own at once.
pub const MAX_CLIENT_SERIES: usize = 64;
/// Flows with a series of their own at once.
pub const MAX_FLOW_SERIES: usize = 128;

/// Packets a flow accepted, its reader read, and the daemon dropped for
/// it (its buffer full, or the flow cut loose for stalling).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Accepted by the flow's filter.
    pub accepted: u64,
    /// Read by the flow's reader (its published position).
    pub read: u64,
    /// Dropped by the daemon.
    pub dropped: u64,
}

impl Counts {
    fn words(self) -> [u64; 3] {
        [self.accepted, self.read, self.dropped]
    }
}

/// One interface's counts at a sample.
#[derive(Clone, Debug)]
pub struct IfacePoint<'a> {
    /// Its name.
    pub name: &'a str,
    /// Packets the kernel's filter passed.
    pub received: u64,
    /// Packets the kernel dropped.
    pub dropped_by_kernel: u64,
    /// Packets delivered to at least one flow.
    pub delivered: u64,
}

/// One client at a sample.
#[derive(Clone, Debug)]
pub struct ClientPoint<'a> {
    /// The daemon's number for it.
    pub id: u64,
    /// Its process.
    pub pid: u32,
    /// Its user.
    pub uid: u32,
    /// Its command (`/proc/PID/comm`).
    pub command: &'a str,
    /// The name it gave at `hello`.
    pub name: &'a str,
}

/// One flow at a sample.
#[derive(Clone, Debug)]
pub struct FlowPoint<'a> {
    /// The daemon's number for it.
    pub id: u64,
    /// Its client's number.
    pub client: u64,
    /// Its specification.
    pub spec: &'a str,
    /// Its interface.
    pub interface: &'a str,
    /// Its counts now.
    pub counts: Counts,
}

/// What the control thread sees at one moment.
///
/// ```
/// use sluice_daemon::http::{ClientPoint, Counts, FlowPoint, History, Sample};
/// let mut h = History::default();
/// let client = ClientPoint { id: 1, pid: 10, uid: 0, command: "tcpdump", name: "" };
/// let flow = |accepted| FlowPoint { id: 7, client: 1, spec: "(iface,eth0)", interface: "eth0",
///     counts: Counts { accepted, read: accepted, dropped: 0 } };
/// h.add(0.0, &Sample { interfaces: vec![], clients: vec![client.clone()], flows: vec![flow(5)] });
/// h.add(1.0, &Sample { interfaces: vec![], clients: vec![client], flows: vec![flow(9)] });
/// let v = h.to_json(&|_| true, true);
/// assert_eq!(v["clients"][0]["accepted"], serde_json::json!([5, 9]));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Sample<'a> {
    /// The interfaces.
    pub interfaces: Vec<IfacePoint<'a>>,
    /// The clients connected.
    pub clients: Vec<ClientPoint<'a>>,
    /// Their open flows.
    pub flows: Vec<FlowPoint<'a>>,
}

/// What a series is of.
#[derive(Clone, Debug)]
enum Info {
    Client {
        pid: u32,
        uid: u32,
        command: String,
        name: String,
    },
    Flow {
        client: u64,
        uid: u32,
        spec: String,
        interface: String,
    },
    Other,
}

/// Running totals of one client, flow, or the others.
#[derive(Clone, Debug)]
struct Series {
    key: u64,
    info: Info,
    /// The sample number of the first point kept.
    start: u64,
    points: VecDeque<[u64; 3]>,
    /// Still being added to.
    live: bool,
    total: [u64; 3],
}

impl Series {
    fn new(key: u64, info: Info, at: u64) -> Series {
        Series {
            key,
            info,
            start: at,
            points: VecDeque::new(),
            live: true,
            total: [0; 3],
        }
    }

    fn add(&mut self, d: [u64; 3]) {
        for (t, x) in self.total.iter_mut().zip(d) {
            *t = t.saturating_add(x);
        }
    }

    /// The series' uid (`None`: several users').
    fn uid(&self) -> Option<u32> {
        match self.info {
            Info::Client { uid, .. } | Info::Flow { uid, .. } => Some(uid),
            Info::Other => None,
        }
    }
}

/// The kept samples (see the module documentation).
#[derive(Clone, Debug, Default)]
pub struct History {
    /// Samples taken so far.
    seq: u64,
    /// The kept samples' times, seconds since the daemon started.
    times: VecDeque<f64>,
    /// Per interface: received, dropped by the kernel, delivered.
    ifaces: Vec<(String, VecDeque<[u64; 3]>)>,
    clients: Vec<Series>,
    flows: Vec<Series>,
    other_clients: Option<Series>,
    other_flows: Option<Series>,
    /// Each open flow's counts at the last sample.
    last: HashMap<u64, [u64; 3]>,
}

/// What a flow's counters grew by since `before` (counters a reader
/// publishes may move back a little when it restarts; that is no growth).
fn growth(now: [u64; 3], before: Option<&[u64; 3]>) -> [u64; 3] {
    let b = before.copied().unwrap_or([0; 3]);
    [
        now[0].saturating_sub(b[0]),
        now[1].saturating_sub(b[1]),
        now[2].saturating_sub(b[2]),
    ]
}

impl History {
    /// Samples taken so far.
    pub fn samples(&self) -> u64 {
        self.seq
    }

    /// Add a sample taken `at` seconds after the daemon started.
    pub fn add(&mut self, at: f64, s: &Sample<'_>) {
        let seq = self.seq;
        self.seq += 1;
        self.times.push_back(at);
        for i in &s.interfaces {
            let p = [i.received, i.dropped_by_kernel, i.delivered];
            match self.ifaces.iter_mut().find(|(n, _)| n == i.name) {
                Some((_, pts)) => pts.push_back(p),
                None => {
                    let mut pts = VecDeque::with_capacity(WINDOW);
                    // An interface first seen late has no earlier points.
                    pts.extend(std::iter::repeat(p).take(self.times.len() - 1));
                    pts.push_back(p);
                    self.ifaces.push((i.name.to_string(), pts));
                }
            }
        }
        // Each flow's growth since the last sample, summed per client.
        let uid_of: HashMap<u64, u32> = s.clients.iter().map(|c| (c.id, c.uid)).collect();
        let mut per_client: HashMap<u64, [u64; 3]> = HashMap::new();
        let mut next_last = HashMap::with_capacity(s.flows.len());
        let mut flow_growth = Vec::with_capacity(s.flows.len());
        for f in &s.flows {
            let now = f.counts.words();
            let g = growth(now, self.last.get(&f.id));
            next_last.insert(f.id, now);
            let c = per_client.entry(f.client).or_default();
            for (t, x) in c.iter_mut().zip(g) {
                *t = t.saturating_add(x);
            }
            flow_growth.push((f, g));
        }
        self.last = next_last;
        let clients: Vec<(u64, [u64; 3])> = s
            .clients
            .iter()
            .map(|c| (c.id, per_client.get(&c.id).copied().unwrap_or([0; 3])))
            .collect();
        update(
            &mut self.clients,
            &mut self.other_clients,
            &clients,
            MAX_CLIENT_SERIES,
            seq,
            &|i| {
                let c = &s.clients[i];
                Info::Client {
                    pid: c.pid,
                    uid: c.uid,
                    command: c.command.to_string(),
                    name: c.name.to_string(),
                }
            },
        );
        let flows: Vec<(u64, [u64; 3])> = flow_growth.iter().map(|(f, g)| (f.id, *g)).collect();
        update(
            &mut self.flows,
            &mut self.other_flows,
            &flows,
            MAX_FLOW_SERIES,
            seq,
            &|i| {
                let f = flow_growth[i].0;
                Info::Flow {
                    client: f.client,
                    uid: uid_of.get(&f.client).copied().unwrap_or(u32::MAX),
                    spec: f.spec.to_string(),
                    interface: f.interface.to_string(),
                }
            },
        );
        self.forget();
    }

    /// Drop what has left the window.
    fn forget(&mut self) {
        while self.times.len() > WINDOW {
            self.times.pop_front();
        }
        let first = self.seq - self.times.len() as u64;
        for (_, pts) in &mut self.ifaces {
            while pts.len() > self.times.len() {
                pts.pop_front();
            }
        }
        let trim = |s: &mut Series| {
            while s.start < first && !s.points.is_empty() {
                s.points.pop_front();
                s.start += 1;
            }
            !s.points.is_empty() || s.live
        };
        self.clients.retain_mut(trim);
        self.flows.retain_mut(trim);
        for o in [&mut self.other_clients, &mut self.other_flows] {
            if let Some(s) = o {
                if !trim(s) {
                    *o = None;
                }
            }
        }
    }

    /// The history as JSON (served as `/history.json`), with only the
    /// series of the users `shown` accepts; the "other" series (several
    /// users' packets) only when `all`.
    pub fn to_json(&self, shown: &dyn Fn(u32) -> bool, all: bool) -> Value {
        let first = self.seq - self.times.len() as u64;
        let column =
            |pts: &VecDeque<[u64; 3]>, k: usize| -> Vec<u64> { pts.iter().map(|p| p[k]).collect() };
        let series = |s: &Series| -> Value {
            let mut v = json!({
                "start": s.start.saturating_sub(first),
                "live": s.live,
                "accepted": column(&s.points, 0),
                "read": column(&s.points, 1),
                "dropped": column(&s.points, 2),
            });
            let o = v.as_object_mut().expect("an object");
            match &s.info {
                Info::Client {
                    pid,
                    uid,
                    command,
                    name,
                } => {
                    o.insert("client".into(), json!(s.key));
                    o.insert("pid".into(), json!(pid));
                    o.insert("uid".into(), json!(uid));
                    o.insert("command".into(), json!(command));
                    o.insert("name".into(), json!(name));
                }
                Info::Flow {
                    client,
                    uid,
                    spec,
                    interface,
                } => {
                    o.insert("id".into(), json!(s.key));
                    o.insert("client".into(), json!(client));
                    o.insert("uid".into(), json!(uid));
                    o.insert("spec".into(), json!(spec));
                    o.insert("interface".into(), json!(interface));
                }
                Info::Other => {}
            }
            v
        };
        let visible = |s: &&Series| s.uid().is_some_and(shown);
        let other = |o: &Option<Series>| match (o, all) {
            (Some(s), true) => series(s),
            _ => Value::Null,
        };
        json!({
            "interval_s": 1.0,
            "window": WINDOW,
            "samples": self.seq,
            "t": self.times,
            "interfaces": self.ifaces.iter().map(|(name, pts)| json!({
                "name": name,
                "received": column(pts, 0),
                "dropped_by_kernel": column(pts, 1),
                "delivered": column(pts, 2),
            })).collect::<Vec<_>>(),
            "clients": self.clients.iter().filter(visible).map(series).collect::<Vec<_>>(),
            "flows": self.flows.iter().filter(visible).map(series).collect::<Vec<_>>(),
            "other_clients": other(&self.other_clients),
            "other_flows": other(&self.other_flows),
        })
    }
}

/// One sample of clients or flows: `items` are (key, growth). Series of
/// keys no longer present end first; then each item adds to its own
/// series, to a new one while fewer than `max` are live, or to the
/// others.
fn update(
    series: &mut Vec<Series>,
    other: &mut Option<Series>,
    items: &[(u64, [u64; 3])],
    max: usize,
    seq: u64,
    info: &dyn Fn(usize) -> Info,
) {
    let present: std::collections::HashSet<u64> = items.iter().map(|(k, _)| *k).collect();
    for s in series.iter_mut() {
        if s.live && !present.contains(&s.key) {
            s.live = false;
        }
    }
    let mut live: HashMap<u64, usize> = series
        .iter()
        .enumerate()
        .filter(|(_, x)| x.live)
        .map(|(i, x)| (x.key, i))
        .collect();
    let mut others = None::<[u64; 3]>;
    for (n, (key, g)) in items.iter().enumerate() {
        let at = match live.get(key) {
            Some(&i) => Some(i),
            None if live.len() < max => {
                series.push(Series::new(*key, info(n), seq));
                live.insert(*key, series.len() - 1);
                Some(series.len() - 1)
            }
            None => None,
        };
        match at {
            Some(i) => {
                let s = &mut series[i];
                s.add(*g);
                s.points.push_back(s.total);
            }
            None => {
                let o = others.get_or_insert([0; 3]);
                for (t, x) in o.iter_mut().zip(g) {
                    *t = t.saturating_add(*x);
                }
            }
        }
    }
    add_other(other, others, seq);
}

/// Add this sample's growth of the others (`None`: nobody was among
/// them): the series starts when the first one comes and ends when none
/// is left.
fn add_other(o: &mut Option<Series>, growth: Option<[u64; 3]>, seq: u64) {
    match growth {
        Some(g) => {
            let s = o.get_or_insert_with(|| Series::new(0, Info::Other, seq));
            if !s.live {
                // The others come back: a new series.
                *s = Series {
                    total: s.total,
                    ..Series::new(0, Info::Other, seq)
                };
            }
            s.add(g);
            s.points.push_back(s.total);
        }
        None => {
            if let Some(s) = o {
                s.live = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: u64, uid: u32) -> ClientPoint<'static> {
        ClientPoint {
            id,
            pid: id as u32 + 100,
            uid,
            command: "c",
            name: "n",
        }
    }

    fn flow(id: u64, client: u64, accepted: u64, dropped: u64) -> FlowPoint<'static> {
        FlowPoint {
            id,
            client,
            spec: "(iface,x)",
            interface: "x",
            counts: Counts {
                accepted,
                read: accepted - dropped,
                dropped,
            },
        }
    }

    #[test]
    fn totals_never_go_down_when_flows_close() {
        let mut h = History::default();
        let c = client(1, 0);
        h.add(
            0.0,
            &Sample {
                clients: vec![c.clone()],
                flows: vec![flow(1, 1, 10, 1), flow(2, 1, 5, 0)],
                ..Sample::default()
            },
        );
        // Flow 2 closes; flow 1 goes on.
        h.add(
            1.0,
            &Sample {
                clients: vec![c.clone()],
                flows: vec![flow(1, 1, 12, 1)],
                ..Sample::default()
            },
        );
        // Flow 3 opens with counts already.
        h.add(
            2.0,
            &Sample {
                clients: vec![c],
                flows: vec![flow(1, 1, 12, 1), flow(3, 1, 4, 2)],
                ..Sample::default()
            },
        );
        let v = h.to_json(&|_| true, true);
        assert_eq!(v["clients"][0]["accepted"], json!([15, 17, 21]));
        assert_eq!(v["clients"][0]["dropped"], json!([1, 1, 3]));
        let flows = v["flows"].as_array().unwrap();
        assert_eq!(flows.len(), 3);
        assert_eq!(flows[1]["live"], false);
        assert_eq!(flows[2]["start"], 2);
    }

    #[test]
    fn memory_is_bounded_and_every_packet_is_in_a_series() {
        let mut h = History::default();
        let n = MAX_CLIENT_SERIES as u64 + 10;
        for t in 0..(WINDOW as u64 + 50) {
            // Clients come and go: a new set every 100 samples.
            let base = (t / 100) * 1000;
            let clients: Vec<_> = (0..n).map(|i| client(base + i + 1, 1000)).collect();
            let flows: Vec<_> = (0..n)
                .map(|i| flow(base + i + 1, base + i + 1, t % 100 + 1, 0))
                .collect();
            h.add(
                t as f64,
                &Sample {
                    clients,
                    flows,
                    ..Sample::default()
                },
            );
            assert!(h.times.len() <= WINDOW);
            assert!(h.clients.iter().filter(|s| s.live).count() <= MAX_CLIENT_SERIES);
            assert!(h.flows.iter().filter(|s| s.live).count() <= MAX_FLOW_SERIES);
            let points: usize = h.clients.iter().map(|s| s.points.len()).sum();
            assert!(points <= WINDOW * MAX_CLIENT_SERIES);
            // Every packet of this sample is in a client series or the
            // others: each client accepted one more.
            let v = h.to_json(&|_| true, true);
            let last = |s: &Value| -> u64 {
                let a = s["accepted"].as_array().unwrap();
                let start = s["start"].as_u64().unwrap() as usize;
                let i = h.times.len() - 1;
                if i < start || i - start >= a.len() {
                    return 0;
                }
                let now = a[i - start].as_u64().unwrap();
                let before = if i > start {
                    a[i - start - 1].as_u64().unwrap()
                } else {
                    0
                };
                now - before
            };
            let grew: u64 = v["clients"]
                .as_array()
                .unwrap()
                .iter()
                .map(last)
                .sum::<u64>()
                + last(&v["other_clients"]);
            assert_eq!(grew, n, "sample {t}");
        }
        // Series of clients gone for longer than the window are forgotten.
        assert!(h.clients.len() <= 7 * MAX_CLIENT_SERIES);
    }

    #[test]
    fn other_users_series_are_not_shown() {
        let mut h = History::default();
        h.add(
            0.0,
            &Sample {
                clients: vec![client(1, 1000), client(2, 1001)],
                flows: vec![flow(1, 1, 3, 0), flow(2, 2, 4, 0)],
                ..Sample::default()
            },
        );
        let v = h.to_json(&|u| u == 1001, false);
        let clients = v["clients"].as_array().unwrap();
        assert_eq!(clients.len(), 1);
        assert_eq!(clients[0]["uid"], 1001);
        assert_eq!(v["flows"].as_array().unwrap().len(), 1);
        assert_eq!(v["other_clients"], Value::Null);
    }
}
