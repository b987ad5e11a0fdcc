//! What the daemon is doing, as JSON: its interfaces and their counts,
//! its clients (process, user, command) and their flows (filter, packets
//! accepted, read, dropped), its groups.
//!
//! The rule: a client sees its own clients' and flows' entries only,
//! unless it is root or the daemon's own user; the counts of other
//! users' flows, and their filters, are never shown to it.

use super::control::{Client, Control};
use serde_json::{json, Value};
use sluice_live::session::KernelProgram;
use std::sync::atomic::Ordering;

impl Control<'_> {
    /// The status as client `id` may see it.
    pub(crate) fn status_for(&self, id: u64) -> Value {
        let me = rustix::process::getuid().as_raw();
        let asker = self.clients.iter().find(|c| c.id == id).map(|c| c.peer.uid);
        let all = asker.map_or(true, |u| u == 0 || u == me);
        self.status(|c| all || Some(c.peer.uid) == asker)
    }

    /// The whole status (the daemon's own view).
    pub(crate) fn status(&self, shown: impl Fn(&Client) -> bool) -> Value {
        let ifaces: Vec<Value> = self
            .d
            .ifaces
            .iter()
            .map(|i| {
                let (filters, _, whole, bytes) = i.classifier.stats();
                let kernel = match i.union.lock().map(|u| u.1.clone()) {
                    Ok(KernelProgram::Classic(p)) => ("classic", p.len(), None),
                    Ok(KernelProgram::Ebpf(k)) => ("ebpf", k.len(), i.held.form()),
                    Err(_) => ("classic", 0, None),
                };
                json!({
                    "name": i.name,
                    "linktype": i.linktype,
                    "snaplen": i.snaplen,
                    "received": i.kernel[0].load(Ordering::Relaxed),
                    "dropped_by_kernel": i.kernel[1].load(Ordering::Relaxed),
                    "packets_delivered": i.counts.packets.load(Ordering::Relaxed),
                    "deliveries": i.counts.deliveries.load(Ordering::Relaxed),
                    "wakeups": i.counts.wakeups.load(Ordering::Relaxed),
                    "filters": filters,
                    "filters_run_whole": whole,
                    "classifier_bytes": bytes,
                    "kernel_filter_instructions": kernel.1,
                    "kernel_filter": kernel.0,
                    "kernel_filter_form": kernel.2,
                    "groups": i.groups.len(),
                })
            })
            .collect();
        let clients: Vec<Value> = self
            .clients
            .iter()
            .filter(|c| shown(c))
            .map(|c| {
                let mut flows: Vec<(&u64, &super::flows::Open)> = c.flows.iter().collect();
                flows.sort_by_key(|(n, _)| **n);
                let flows: Vec<Value> = flows
                    .into_iter()
                    .map(|(n, o)| {
                        let ib = &o.member.ibuf;
                        let (elements, failed) = match &o.member.chain {
                            Some(c) => {
                                let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
                                (c.reports(), c.failed.clone())
                            }
                            None => (json!([]), None),
                        };
                        json!({
                            "flow": n,
                            "id": o.member.flow,
                            "interface": self.d.ifaces[o.iface].name,
                            "spec": o.spec,
                            "filters": o.filters.len(),
                            "priority": o.priority,
                            "accepted": ib.accepted(),
                            "read": ib.slowest_reader(),
                            "dropped": ib.drops(),
                            "waiting": ib.written().saturating_sub(ib.slowest_reader()),
                            "stalled": o.member.stalled.load(Ordering::Relaxed),
                            "elements": elements,
                            "failed": failed,
                        })
                    })
                    .collect();
                json!({
                    "client": c.id,
                    "pid": c.peer.pid,
                    "uid": c.peer.uid,
                    "gid": c.peer.gid,
                    "command": c.command,
                    "name": c.name,
                    "connected_s": c.since.elapsed().as_secs_f64(),
                    "flows": flows,
                })
            })
            .collect();
        json!({
            "daemon": {
                "pid": std::process::id(),
                "uptime_s": self.started.elapsed().as_secs_f64(),
                "socket": self.d.listener.path().display().to_string(),
                "mode": if self.d.config.first_match { "endpoint" } else { "monitor" },
                "preference": self.d.config.preference.to_string(),
                "policy": self.d.config.policy.as_ref().map(|p| p.display().to_string()),
                "clients": self.clients.len(),
                "refused": self.refused,
                "bad_requests": self.bad_requests,
            },
            "interfaces": ifaces,
            "clients": clients,
        })
    }
}
