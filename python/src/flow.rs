//! `sluice.Flow` and `sluice.FlowGroup`: FFPF flows in the `ffpf-flow`
//! notation, run to the end of their sources, with what every element
//! produced as dicts.

use crate::errors::filter_error_at;
use pyo3::exceptions::{PyRuntimeError, PyRuntimeWarning, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use sluice_flow::buffer::Preference;
use sluice_flow::policy::{Credentials, Policy};
use sluice_flow::value::Value;
use sluice_flow::{FlowReport, Group, GroupConfig};
use std::sync::Mutex;

/// A flow result value as Python data: counts as int, text as str,
/// lists as list, maps as dict (in order).
fn value_to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::U64(n) => n.into_pyobject(py)?.into_any().unbind(),
        Value::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
        Value::List(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(value_to_py(py, i)?)?;
            }
            l.into_any().unbind()
        }
        Value::Map(pairs) => {
            let d = PyDict::new(py);
            for (k, v) in pairs {
                d.set_item(k, value_to_py(py, v)?)?;
            }
            d.into_any().unbind()
        }
    })
}

/// A flow's report as a dict: ``spec``, ``state``, ``packets`` (what the
/// flow took: passed to its end, or counted by a statistic at its end),
/// ``delivered`` (to the application), ``drops`` and ``filters``, a list
/// of dicts with ``class``, ``instance``, ``element`` and ``result``.
fn report_to_py<'py>(py: Python<'py>, r: &FlowReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("spec", &r.spec)?;
    d.set_item("state", r.state.to_string())?;
    d.set_item("packets", r.packets)?;
    d.set_item("delivered", r.delivered)?;
    d.set_item("drops", r.drops)?;
    let filters = PyList::empty(py);
    for f in &r.filters {
        let e = PyDict::new(py);
        e.set_item("class", &f.class)?;
        e.set_item("instance", &f.instance)?;
        e.set_item("element", &f.element)?;
        e.set_item("result", value_to_py(py, &f.result)?)?;
        filters.append(e)?;
    }
    d.set_item("filters", filters)?;
    Ok(d)
}

fn flow_error(py: Python<'_>, e: sluice_flow::Error, spec: &str) -> PyErr {
    match &e {
        sluice_flow::Error::Spec(s) => filter_error_at(
            py,
            s.message.clone(),
            spec,
            Some(1),
            Some(s.column),
            None,
            None,
        ),
        sluice_flow::Error::Config(_)
        | sluice_flow::Error::Refused(_)
        | sluice_flow::Error::Policy(_) => PyValueError::new_err(e.to_string()),
        _ => PyRuntimeError::new_err(e.to_string()),
    }
}

/// Flows that share one packet buffer and the instances of their common
/// prefixes (FFPF's flow group).
///
/// ``FlowGroup(slots=1024, slot_bytes=65535, preference="srp",
/// policy=None)``: ``preference`` is ``"srp"`` (slow-reader preference)
/// or ``"frp"``; ``policy`` a policy file checked when a flow is added.
///
/// >>> g = sluice.FlowGroup()
/// >>> tcp = g.flow('(file,examples/sample.pcap) -> (BPF,"tcp") -> (packetcount,,8)')
/// >>> udp = g.flow('(file,examples/sample.pcap) -> (BPF,"udp") -> (packetcount,,8)')
/// >>> stats = g.run()
/// >>> tcp.report()["filters"][-1]["class"]
/// 'packetcount'
#[pyclass(module = "sluice", frozen)]
pub struct FlowGroup {
    group: Group,
    policy: Policy,
    every: u64,
}

#[pymethods]
impl FlowGroup {
    #[new]
    #[pyo3(signature = (slots=1024, slot_bytes=65535, preference="srp", policy=None, every=64))]
    fn new(
        py: Python<'_>,
        slots: usize,
        slot_bytes: usize,
        preference: &str,
        policy: Option<&str>,
        every: u64,
    ) -> PyResult<FlowGroup> {
        let preference: Preference = preference.parse().map_err(PyValueError::new_err)?;
        if slots == 0 || slot_bytes == 0 || every == 0 || every > slots as u64 {
            return Err(PyValueError::new_err(
                "slots, slot_bytes and every must be positive, every at most slots",
            ));
        }
        let policy = match policy {
            Some(p) => Policy::load(p).map_err(|e| PyValueError::new_err(e.to_string()))?,
            None => Policy::allow_all(),
        };
        for w in policy.warnings() {
            let cat = py.get_type::<PyRuntimeWarning>();
            PyErr::warn(py, &cat, &std::ffi::CString::new(w.as_str())?, 1)?;
        }
        // Sizes past the buffers' limits are refused (ValueError naming
        // the limit), never allocated.
        let group = Group::new(GroupConfig {
            slots,
            slot_bytes,
            ibuf_entries: slots,
            preference,
            ..GroupConfig::default()
        })
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(FlowGroup {
            group,
            policy,
            every,
        })
    }

    /// Add a flow (created, populated, authorised and activated); a bad
    /// specification raises ``sluice.FilterError`` with its column.
    fn flow(slf: &Bound<'_, Self>, spec: &str) -> PyResult<Flow> {
        let py = slf.py();
        let g = slf.get();
        let mut flow = sluice_flow::Flow::create(&g.group);
        let setup = (|| {
            flow.populate(spec)?;
            flow.on_packets(g.every, |batch| while batch.next().is_some() {})?;
            flow.instantiate(&g.policy, &Credentials::current())?;
            flow.activate()
        })();
        setup.map_err(|e| flow_error(py, e, spec))?;
        Ok(Flow {
            flow: Mutex::new(flow),
            group: slf.clone().unbind(),
        })
    }

    /// Run every flow to the end of its sources (the GIL released);
    /// returns ``packets`` read, ``stored`` in the buffer, ``pbuf_drops``.
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let group = &self.group;
        let stats = py
            .detach(|| group.run())
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let d = PyDict::new(py);
        d.set_item("packets", stats.packets)?;
        d.set_item("stored", stats.stored)?;
        d.set_item("pbuf_drops", stats.pbuf_drops)?;
        Ok(d)
    }

    /// The instantiated graph as Graphviz DOT.
    fn dot(&self) -> String {
        self.group.dot()
    }
}

/// One FFPF flow, e.g. ``(file,in.pcap) -> (sampler,2,4) -> (BPF,"tcp")
/// -> (packetcount,,8)``. Made alone it has a group of its own; made by
/// ``FlowGroup.flow`` it shares its group's buffer and instances.
///
/// >>> f = sluice.Flow('(file,examples/sample.pcap) -> (BPF,"udp") -> (bytecount,,8)')
/// >>> r = f.run()
/// >>> r["filters"][1]["class"], r["packets"] >= 0
/// ('BPF', True)
#[pyclass(module = "sluice", frozen)]
pub struct Flow {
    flow: Mutex<sluice_flow::Flow>,
    group: Py<FlowGroup>,
}

#[pymethods]
impl Flow {
    #[new]
    #[pyo3(signature = (spec, slots=1024, slot_bytes=65535, preference="srp", policy=None))]
    fn new(
        py: Python<'_>,
        spec: &str,
        slots: usize,
        slot_bytes: usize,
        preference: &str,
        policy: Option<&str>,
    ) -> PyResult<Flow> {
        let group = Bound::new(
            py,
            FlowGroup::new(py, slots, slot_bytes, preference, policy, 64)?,
        )?;
        FlowGroup::flow(&group, spec)
    }

    /// Run the flow's group to the end of its sources; the flow's report.
    fn run<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.group.bind(py).get().run(py)?;
        self.report(py)
    }

    /// What the flow and each of its elements produced (a dict).
    fn report<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let r = self
            .flow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .report()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        report_to_py(py, &r)
    }

    /// The specification.
    #[getter]
    fn spec(&self) -> String {
        self.flow
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spec()
            .to_string()
    }

    fn __repr__(&self) -> String {
        format!("sluice.Flow({:?})", self.spec())
    }
}
