//! A live handle fed by the sluice daemon instead of a ring of its own:
//! with `SLUICE_DAEMON=PATH` set, `pcap_activate` opens a flow on the
//! device in the daemon listening at PATH, and the handle reads packets
//! from the daemon's shared buffers. Ten tcpdumps on one interface then
//! cost one capture and one copy of each packet.
//!
//! The rule: the handle's filter is the flow's filter in the daemon (sent
//! as classic BPF text, `pcap_setfilter` after `pcap_setfilter`), and is
//! applied again here, so what the program gets is exactly what its
//! filter accepts even while the daemon changes over. `pcap_stats` gives
//! the flow's own counts: received what its filter accepted, dropped what
//! it lost.

use crate::read::{accepts, header};
use crate::types::{pcap_pkthdr, pcap_stat};
use sluice_daemon::{Client, DaemonError, DaemonFlow};
use std::ffi::c_int;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// A live capture through the daemon.
pub(crate) struct Attached {
    /// The connection (its flows close with it).
    _client: Client,
    flow: DaemonFlow,
    device: String,
    /// The packet last handed over (a copy: the slot moves on).
    pkt: Vec<u8>,
    /// The last read said the reader sleeps: the wake descriptor may hold
    /// a wake-up to take (done once, not on every packet).
    slept: bool,
}

fn text(e: DaemonError) -> String {
    format!("sluice daemon: {e}")
}

/// The spec of a flow on `device` with `bpf` as its filter (none: every
/// packet), as classic BPF text the daemon compiles itself.
fn spec(device: &str, bpf: Option<&[sluice_bpf::Insn]>) -> String {
    match bpf {
        None => format!("(iface,{device})"),
        Some(p) => {
            let text = sluice_bpf::disasm_ddd(p);
            format!("(iface,{device}) -> (BPF,\"bpf:{}\")", text.trim())
        }
    }
}

impl Attached {
    /// Open a flow taking every packet of `device` in the daemon at
    /// `socket` (the filter comes with `pcap_setfilter`).
    pub(crate) fn open(socket: &str, device: &str) -> Result<Attached, String> {
        let name = std::fs::read_to_string("/proc/self/comm")
            .map(|c| format!("libpcap: {}", c.trim()))
            .unwrap_or_else(|_| "libpcap".into());
        let mut client = Client::connect(socket.as_ref(), &name).map_err(text)?;
        let flow = client.open(&spec(device, None), 0).map_err(text)?;
        Ok(Attached {
            _client: client,
            flow,
            device: device.to_string(),
            pkt: Vec::new(),
            slept: false,
        })
    }

    /// The link type of the daemon's packets.
    pub(crate) fn linktype(&self) -> u16 {
        self.flow.linktype()
    }

    /// Bytes of each packet kept.
    pub(crate) fn snaplen(&self) -> u32 {
        self.flow.snaplen()
    }

    /// The device's name.
    pub(crate) fn device(&self) -> &str {
        &self.device
    }

    /// The descriptor that becomes readable when packets come after a
    /// read found none.
    pub(crate) fn fd(&self) -> c_int {
        self.flow.wake_fd().as_raw_fd()
    }

    /// Put the handle's program in the daemon as the flow's filter (a
    /// program too long for one request stays here alone: the daemon then
    /// sends every packet).
    pub(crate) fn set_filter(&mut self, bpf: &[sluice_bpf::Insn]) -> Result<(), String> {
        let s = spec(&self.device, Some(bpf));
        if s.len() > sluice_daemon::proto::MAX_SPEC {
            return self
                .flow
                .set_filter(&spec(&self.device, None))
                .map_err(text);
        }
        self.flow.set_filter(&s).map_err(text)
    }

    /// The flow's counts.
    pub(crate) fn stats(&self) -> pcap_stat {
        let s = self.flow.stats();
        pcap_stat {
            ps_recv: s.accepted as u32,
            ps_drop: s.lost as u32,
            ps_ifdrop: 0,
        }
    }

    /// The next packet waiting that `filter` accepts, copied out (`None`:
    /// nothing now; the descriptor then wakes the caller).
    pub(crate) fn take_one(
        &mut self,
        filter: Option<&sluice_filter::Program>,
        nano: bool,
    ) -> Result<Option<(pcap_pkthdr, *const u8)>, String> {
        if std::mem::take(&mut self.slept) {
            self.flow.consume_wake();
        }
        loop {
            match self.flow.next(Some(Duration::ZERO)) {
                Ok(Some(p)) => {
                    let pkt = p.to_capture();
                    if !accepts(filter, &pkt) {
                        continue;
                    }
                    let hdr = header(&pkt, nano);
                    self.pkt.clear();
                    self.pkt.extend_from_slice(pkt.data);
                    return Ok(Some((hdr, self.pkt.as_ptr())));
                }
                Ok(None) => {}
                Err(e) => return Err(text(e)),
            }
            // Nothing handed over: entries found overwritten were skipped
            // (fast-reader preference), or nothing waits and the
            // descriptor is to wake the caller.
            if self.flow.available() == 0 && self.flow.prepare_sleep() {
                self.slept = true;
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_travels_as_bpf_text_in_the_spec() {
        let p = sluice_filter::Program::builder(sluice_filter::LinkType::EN10MB)
            .build("tcp port 80")
            .unwrap();
        let s = spec("eth0", Some(p.bpf()));
        let g = sluice_flow::spec::parse(&s).unwrap();
        let arg = &g.stages[1][0].args[0];
        let back = sluice_filter::Program::builder(sluice_filter::LinkType::EN10MB)
            .build(arg)
            .unwrap();
        assert_eq!(back.bpf(), p.bpf());
        assert_eq!(spec("eth0", None), "(iface,eth0)");
    }
}
