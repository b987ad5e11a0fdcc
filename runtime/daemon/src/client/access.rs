//! A daemon flow seen through `sluice_flow::FlowAccess`, the interface an
//! in-process [`sluice_flow::Flow`] has too: code that reads packets,
//! memories and reports works on either.
//!
//! The rule: stages are numbered as an in-process flow numbers them —
//! stage 0 the source, then the filters' stage (when the first stage
//! after the source holds BPF, CSPF or DPF filters only), then one stage
//! per element after them. Only elements after the filters have memory
//! here; the source and the filters report `null` (their counts are the
//! report's `packets` and `drops`, and the daemon's status). `packets`
//! and `delivered` both count what passed every element into the flow's
//! index buffer: a flow ending in a counter that passes nothing reports
//! 0 there, its count being in that element's report.

use super::DaemonFlow;
use crate::DaemonError;
use sluice_flow::buffer::{MBuf, Reader};
use sluice_flow::value::Value;
use sluice_flow::{Error, FilterReport, FlowAccess, FlowReport, FlowState};
use std::sync::Arc;

/// The stages of a flow specification: how many elements each holds,
/// the text of each, and where the elements after the filters start.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shape {
    /// `(class, element text)` of each element, stage by stage.
    stages: Vec<Vec<(String, String)>>,
    /// The first stage after the filters.
    chain: usize,
}

impl Shape {
    /// The shape of `spec` (empty when it does not parse: the daemon then
    /// refuses the flow anyway).
    pub(crate) fn of(spec: &str) -> Shape {
        let Ok(graph) = sluice_flow::spec::parse(spec) else {
            return Shape::default();
        };
        let stages: Vec<Vec<(String, String)>> = graph
            .stages
            .iter()
            .map(|st| {
                st.iter()
                    .map(|e| (e.class.to_ascii_lowercase(), e.to_string()))
                    .collect()
            })
            .collect();
        let filters = graph.stages.get(1).is_some_and(|st| {
            st.iter()
                .all(|e| crate::server::flows::filter_class(&e.class).is_some())
        });
        Shape {
            stages,
            chain: if filters { 2 } else { 1 },
        }
    }
}

/// A report value from the daemon's JSON.
fn value(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::U64(u64::from(*b)),
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(u) => Value::U64(u),
            None => Value::Str(n.to_string()),
        },
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(a) => Value::List(a.iter().map(value).collect()),
        serde_json::Value::Object(m) => {
            Value::Map(m.iter().map(|(k, v)| (k.clone(), value(v))).collect())
        }
    }
}

fn flow_error(what: &str, e: DaemonError) -> Error {
    Error::Config(format!("{what}: {e}"))
}

impl FlowAccess for DaemonFlow {
    fn reader(&self, batch: u64) -> Result<Reader, Error> {
        Reader::new(self.pbuf.clone(), self.ibuf.clone(), batch)
            .ok_or_else(|| Error::Config("the flow's index buffer has no free reader slot".into()))
    }

    fn mbuf(&self, stage: usize, index: usize) -> Result<Arc<MBuf>, Error> {
        let here = self.shape.stages.get(stage).and_then(|s| s.get(index));
        match here {
            None => Err(Error::Config(format!(
                "no element at stage {stage}, position {index}"
            ))),
            Some(_) if stage < self.shape.chain => Ok(Arc::new(MBuf::new(0))),
            Some(_) => self
                .memories
                .get(stage - self.shape.chain)
                .map(|(_, m)| m.clone())
                .ok_or_else(|| {
                    Error::Config(format!("the daemon sent no memory for stage {stage}"))
                }),
        }
    }

    fn report(&self) -> Result<FlowReport, Error> {
        let elements = DaemonFlow::report(self).map_err(|e| flow_error("report", e))?;
        let after: &[serde_json::Value] = elements.as_array().map_or(&[], Vec::as_slice);
        let mut filters = Vec::new();
        let mut n = 0;
        for (i, stage) in self.shape.stages.iter().enumerate() {
            for (class, text) in stage {
                let result = match i >= self.shape.chain {
                    true => after
                        .get(i - self.shape.chain)
                        .and_then(|e| e.get("report"))
                        .map_or(Value::Null, value),
                    false => Value::Null,
                };
                filters.push(FilterReport {
                    class: class.clone(),
                    instance: format!("{class}#{n}"),
                    element: text.clone(),
                    result,
                });
                n += 1;
            }
        }
        let s = self.stats();
        Ok(FlowReport {
            spec: self.spec.clone(),
            state: FlowState::Active,
            packets: s.accepted,
            delivered: s.accepted,
            drops: s.lost,
            filters,
        })
    }
}
