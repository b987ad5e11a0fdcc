//! What a group's run and its flows report.

use super::FlowState;
use crate::value::Value;

/// What a group's run did.
///
/// ```
/// let s = sluice_flow::RunStats::default();
/// assert_eq!(s.packets, 0);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Packets read from sources.
    pub packets: u64,
    /// Packets stored in the PBuf (wanted by at least one flow).
    pub stored: u64,
    /// Packets the PBuf dropped (slow-reader preference, buffer full).
    pub pbuf_drops: u64,
    /// Whether every source is exhausted.
    pub finished: bool,
}

/// One filter instance in a flow's report.
///
/// ```
/// let f = sluice_flow::FilterReport { class: "bpf".into(), instance: "BPF#1".into(), element: "(BPF,tcp)".into(), result: sluice_flow::value::Value::U64(3) };
/// assert_eq!(f.result.as_u64(), Some(3));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterReport {
    /// Class name.
    pub class: String,
    /// Instance name (`class#id`; shared instances have the same name in
    /// every flow that uses them).
    pub instance: String,
    /// The element as written.
    pub element: String,
    /// What it produced.
    pub result: Value,
}

/// What a flow produced.
///
/// ```
/// let r = sluice_flow::FlowReport { spec: "x".into(), state: sluice_flow::FlowState::Active, packets: 1, delivered: 1, drops: 0, filters: vec![] };
/// assert!(r.to_json().starts_with("{\"spec\": \"x\""));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowReport {
    /// The specification.
    pub spec: String,
    /// Its state.
    pub state: FlowState,
    /// Packets the flow took: those that passed every element to its end,
    /// or, for a flow ending in a statistic that passes nothing on
    /// (`packetcount`, `bytecount`, `hashcount`), those that reached it
    /// (what its counter counts).
    pub packets: u64,
    /// Packets delivered to the flow's callback reader (or, without a
    /// callback, entries written to its index buffer); 0 for a flow ending
    /// in a statistic.
    pub delivered: u64,
    /// Packets the flow wanted but lost: dropped at its index buffer or the
    /// group's PBuf (SRP), or overwritten before they were read (FRP).
    pub drops: u64,
    /// Every element in flow order (sources first).
    pub filters: Vec<FilterReport>,
}

impl FlowReport {
    /// As JSON: `{"spec": …, "packets": N, "delivered": N, "drops": N, "filters": [{"class": …, "instance": …, "result": …}]}`.
    ///
    /// ```
    /// let r = sluice_flow::FlowReport { spec: "s".into(), state: sluice_flow::FlowState::Active, packets: 3, delivered: 0, drops: 0, filters: vec![] };
    /// assert_eq!(r.to_json(), r#"{"spec": "s", "packets": 3, "delivered": 0, "drops": 0, "filters": []}"#);
    /// ```
    pub fn to_json(&self) -> String {
        Value::map([
            ("spec", Value::Str(self.spec.clone())),
            ("packets", Value::U64(self.packets)),
            ("delivered", Value::U64(self.delivered)),
            ("drops", Value::U64(self.drops)),
            (
                "filters",
                Value::List(
                    self.filters
                        .iter()
                        .map(|f| {
                            Value::map([
                                ("class", Value::Str(f.class.clone())),
                                ("instance", Value::Str(f.instance.clone())),
                                ("element", Value::Str(f.element.clone())),
                                ("result", f.result.clone()),
                            ])
                        })
                        .collect(),
                ),
            ),
        ])
        .to_json()
    }
}
