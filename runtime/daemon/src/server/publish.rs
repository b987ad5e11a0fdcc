//! The control thread's side of the status page ([`crate::http`]): about
//! once a second it adds a sample of every interface's, client's and
//! flow's counts to the [`Board`](crate::http::Board), and it builds the
//! whole status only when a request has asked for one since it last did.
//!
//! The rule: the control thread, which owns the clients and flows, is
//! the only one that reads them for the page; the HTTP threads read what
//! it published. A daemon without `--http` does none of this.

use super::control::Control;
use crate::http::{ClientPoint, Counts, FlowPoint, IfacePoint, Sample};
use std::sync::atomic::Ordering;

impl Control<'_> {
    /// Publish to the board, if there is one and it is time.
    pub(crate) fn publish(&self) {
        let Some(board) = self.d.config.board.as_ref() else {
            return;
        };
        if board.sample_due() {
            board.add_sample(&self.sample());
        }
        if board.status_wanted() {
            board.set_status(self.status(|_| true));
        }
    }

    /// Every interface's, client's and flow's counts now.
    fn sample(&self) -> Sample<'_> {
        let interfaces = self
            .d
            .ifaces
            .iter()
            .map(|i| IfacePoint {
                name: &i.name,
                received: i.kernel[0].load(Ordering::Relaxed),
                dropped_by_kernel: i.kernel[1].load(Ordering::Relaxed),
                delivered: i.counts.packets.load(Ordering::Relaxed),
            })
            .collect();
        let clients = self
            .clients
            .iter()
            .map(|c| ClientPoint {
                id: c.id,
                pid: c.peer.pid,
                uid: c.peer.uid,
                command: &c.command,
                name: &c.name,
            })
            .collect();
        let flows = self
            .clients
            .iter()
            .flat_map(|c| {
                c.flows.values().map(move |o| {
                    let ib = &o.member.ibuf;
                    FlowPoint {
                        id: o.member.flow,
                        client: c.id,
                        spec: &o.spec,
                        interface: &self.d.ifaces[o.iface].name,
                        counts: Counts {
                            accepted: ib.accepted(),
                            read: ib.slowest_reader(),
                            dropped: ib.drops(),
                        },
                    }
                })
            })
            .collect();
        Sample {
            interfaces,
            clients,
            flows,
        }
    }
}
