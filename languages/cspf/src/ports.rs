//! Packet filter ports with priorities, as in the CSPF paper: filters are
//! tried in decreasing priority; a packet goes to the first filter that
//! accepts it, and on to lower priorities only while the accepting filters
//! ask for copies. Among equal priorities the paper leaves the order open;
//! here it is the order of insertion.

use crate::Program;

/// A port's identity; ids grow in insertion order.
///
/// ```
/// assert!(sluice_cspf::PortId(0) < sluice_cspf::PortId(1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub u32);

#[derive(Clone, Debug)]
struct Port {
    id: PortId,
    program: Program,
    priority: u8,
    copy: bool,
}

/// A set of ports, each with its filter, priority and copy flag.
///
/// ```
/// use sluice_cspf::{assemble, PortSet};
/// let mut ports = PortSet::new();
/// let all = ports.insert(assemble("pushone").unwrap(), 1, true);    // a monitor: copies go on
/// let ip = ports.insert(assemble("pushword P[6] pushlit | eq #0x0800").unwrap(), 0, false);
/// let mut pkt = [0u8; 14];
/// pkt[12] = 8;
/// assert_eq!(ports.deliver(&pkt), vec![all, ip]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct PortSet {
    /// In trial order: priority descending, then insertion order.
    ports: Vec<Port>,
    next: u32,
}

impl PortSet {
    /// An empty set.
    ///
    /// ```
    /// assert!(sluice_cspf::PortSet::new().is_empty());
    /// ```
    pub fn new() -> PortSet {
        PortSet::default()
    }

    /// Number of ports.
    ///
    /// ```
    /// assert_eq!(sluice_cspf::PortSet::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.ports.len()
    }

    /// True when there are no ports.
    ///
    /// ```
    /// assert!(sluice_cspf::PortSet::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Add a port; returns its id.
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let id = s.insert(sluice_cspf::assemble("pushzero").unwrap(), 3, false);
    /// assert_eq!(id, sluice_cspf::PortId(0));
    /// ```
    pub fn insert(&mut self, program: Program, priority: u8, copy: bool) -> PortId {
        let id = PortId(self.next);
        self.next += 1;
        // After every port of the same or a higher priority.
        let at = self.ports.partition_point(|p| p.priority >= priority);
        self.ports.insert(
            at,
            Port {
                id,
                program,
                priority,
                copy,
            },
        );
        id
    }

    /// Add a port with the priority and copy flag its program was
    /// assembled with (`.priority`, `.copy`).
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// s.insert_program(sluice_cspf::assemble(".priority 7 .copy pushone").unwrap());
    /// assert_eq!(s.trial_order(), vec![(sluice_cspf::PortId(0), 7, true)]);
    /// ```
    pub fn insert_program(&mut self, program: Program) -> PortId {
        let (priority, copy) = (program.priority, program.copy);
        self.insert(program, priority, copy)
    }

    /// Remove a port (no effect if it is not there).
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let id = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// s.remove(id);
    /// assert!(s.is_empty());
    /// ```
    pub fn remove(&mut self, id: PortId) {
        self.ports.retain(|p| p.id != id);
    }

    /// The ports in the order they are tried: id, priority, copy flag.
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let low = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// let high = s.insert(sluice_cspf::assemble("pushone").unwrap(), 9, false);
    /// assert_eq!(s.trial_order(), vec![(high, 9, false), (low, 0, false)]);
    /// ```
    pub fn trial_order(&self) -> Vec<(PortId, u8, bool)> {
        self.ports
            .iter()
            .map(|p| (p.id, p.priority, p.copy))
            .collect()
    }

    /// The ports that receive the packet, in delivery order, running each
    /// filter with the interpreter until one that accepts does not ask for
    /// copies.
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let a = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// let _b = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// assert_eq!(s.deliver(&[]), vec![a]); // a tie goes to the earlier port
    /// ```
    pub fn deliver(&self, pkt: &[u8]) -> Vec<PortId> {
        self.deliver_by(|p| p.program.run(pkt))
    }

    /// The same rule applied to acceptances computed elsewhere (for example
    /// by a merged classifier over the lowered filters): `accepts` is asked
    /// about ports in trial order, and no further than needed.
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let a = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, true);
    /// let b = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// assert_eq!(s.deliver_with(|id| id == b), vec![b]);
    /// # let _ = a;
    /// ```
    pub fn deliver_with(&self, mut accepts: impl FnMut(PortId) -> bool) -> Vec<PortId> {
        self.deliver_by(|p| accepts(p.id))
    }

    fn deliver_by(&self, mut accepts: impl FnMut(&Port) -> bool) -> Vec<PortId> {
        let mut out = Vec::new();
        for p in &self.ports {
            if accepts(p) {
                out.push(p.id);
                if !p.copy {
                    break;
                }
            }
        }
        out
    }

    /// The program of a port.
    ///
    /// ```
    /// let mut s = sluice_cspf::PortSet::new();
    /// let id = s.insert(sluice_cspf::assemble("pushone").unwrap(), 0, false);
    /// assert!(s.program(id).is_some());
    /// ```
    pub fn program(&self, id: PortId) -> Option<&Program> {
        self.ports.iter().find(|p| p.id == id).map(|p| &p.program)
    }
}
