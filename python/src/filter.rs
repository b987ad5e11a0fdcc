//! `sluice.Filter`: one filter in any of sluice's languages, compiled for
//! a link type, run on one frame or on a batch without the GIL.

use crate::errors::filter_error;
use crate::frames::Frames;
use numpy::PyArray1;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use sluice_filter::{Language, LinkType, Program, Spec, SystemResolver};

/// Frames run through the batch engine at once (its input stays in the
/// caches).
const CHUNK: usize = 4096;

/// A link type from its name (`"EN10MB"`, `"LINUX_SLL"`, ...) or number.
pub fn linktype(value: &Bound<'_, PyAny>) -> PyResult<LinkType> {
    if let Ok(n) = value.extract::<u32>() {
        return LinkType::from_number(n)
            .ok_or_else(|| PyValueError::new_err(format!("link type {n} is not supported")));
    }
    let name: String = value.extract()?;
    let bare = name
        .strip_prefix("DLT_")
        .or(name.strip_prefix("LINKTYPE_"))
        .unwrap_or(&name);
    LinkType::from_name(&bare.to_ascii_uppercase())
        .ok_or_else(|| PyValueError::new_err(format!("unknown link type '{name}'")))
}

/// Compile `text` (a tcpdump expression, or a program in the language its
/// prefix or `language` names) for a link type, as `sluice filter` does;
/// host names resolve as libpcap resolves them. A bad filter is a
/// `FilterError` with its column.
pub fn compile(
    py: Python<'_>,
    text: &str,
    lt: LinkType,
    snaplen: u32,
    optimize: bool,
    language: Option<&str>,
) -> PyResult<(Language, Program)> {
    let builder = Program::builder(lt)
        .snaplen(snaplen)
        .optimize(optimize)
        .resolver(std::sync::Arc::new(SystemResolver));
    let spec = match language {
        None => Spec::parse(text, None),
        Some(name) => {
            let language = Language::ALL
                .into_iter()
                .find(|l| l.name().eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "unknown language '{name}' (pcap, bpf, cspf or dpf)"
                    ))
                })?;
            Ok(Spec {
                language,
                text: text.to_string(),
                file: None,
                column_offset: 0,
            })
        }
    };
    let compiled = spec.and_then(|s| s.compile(&builder).map(|p| (s.language, p)));
    compiled.map_err(|e| filter_error(py, &e, text, None))
}

/// A filter compiled for a link type.
///
/// ``Filter(text, linktype="EN10MB", snaplen=262144, optimize=True,
/// language=None)``: ``text`` is a tcpdump expression, or a program in
/// another language named by its prefix (``bpf:``, ``cspf:``, ``dpf:``,
/// ``pcap:``) or by ``language=``. A bad filter raises
/// ``sluice.FilterError`` with the column.
///
/// >>> import sluice
/// >>> f = sluice.Filter("tcp port 80")
/// >>> f.matches(bytes(60))
/// False
/// >>> print(sluice.Filter("ip", linktype="RAW").program())
/// (000) ldb      [0]
/// (001) and      #0xf0
/// (002) jeq      #0x40            jt 3	jf 4
/// (003) ret      #262144
/// (004) ret      #0
#[pyclass(module = "sluice", frozen)]
pub struct Filter {
    program: Program,
    text: String,
    language: Language,
    linktype: LinkType,
    snaplen: u32,
    optimize: bool,
}

impl Filter {
    /// The compiled program.
    pub fn program_ref(&self) -> &Program {
        &self.program
    }

    /// The text as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The link type it was compiled for.
    pub fn linktype_ref(&self) -> LinkType {
        self.linktype
    }
}

#[pymethods]
impl Filter {
    #[new]
    #[pyo3(signature = (text, linktype=None, snaplen=262144, optimize=true, language=None))]
    fn new(
        py: Python<'_>,
        text: &str,
        linktype: Option<&Bound<'_, PyAny>>,
        snaplen: u32,
        optimize: bool,
        language: Option<&str>,
    ) -> PyResult<Filter> {
        let lt = match linktype {
            Some(v) if !v.is_none() => self::linktype(v)?,
            _ => LinkType::EN10MB,
        };
        let (language, program) = compile(py, text, lt, snaplen, optimize, language)?;
        Ok(Filter {
            program,
            text: text.to_string(),
            language,
            linktype: lt,
            snaplen,
            optimize,
        })
    }

    /// Whether the filter accepts one frame (``wirelen``: its length on
    /// the wire, the frame's length by default).
    ///
    /// >>> sluice.Filter("greater 100").matches(bytes(60), wirelen=1500)
    /// True
    #[pyo3(signature = (frame, wirelen=None))]
    fn matches(&self, frame: &[u8], wirelen: Option<u32>) -> bool {
        self.run(frame, wirelen) != 0
    }

    /// The filter's return value for one frame: 0 rejects, otherwise the
    /// number of bytes to keep (the snapshot length, as libpcap's
    /// ``bpf_filter``).
    #[pyo3(signature = (frame, wirelen=None))]
    fn run(&self, frame: &[u8], wirelen: Option<u32>) -> u32 {
        let wl = wirelen.unwrap_or(u32::try_from(frame.len()).unwrap_or(u32::MAX));
        self.program.run_native(frame, wl)
    }

    /// One verdict per frame as a numpy ``bool`` array, the GIL released
    /// while the native code runs.
    ///
    /// ``frames`` is a list of bytes-like objects, or one buffer (bytes,
    /// bytearray, memoryview, numpy uint8 array) with ``offsets`` (n + 1
    /// byte positions: frame i is ``buf[offsets[i]:offsets[i+1]]``), or a
    /// ``sluice.Batch``; ``wirelens`` gives the lengths on the wire.
    ///
    /// >>> f = sluice.Filter("ether[12:2] = 0x800")
    /// >>> f.verdicts([bytes(12) + b"\x08\x00", bytes(14)]).tolist()
    /// [True, False]
    /// >>> f.verdicts(bytes(12) + b"\x08\x00" + bytes(14), offsets=[0, 14, 28]).tolist()
    /// [True, False]
    #[pyo3(signature = (frames, offsets=None, wirelens=None))]
    fn verdicts<'py>(
        &self,
        py: Python<'py>,
        frames: &Bound<'py, PyAny>,
        offsets: Option<&Bound<'py, PyAny>>,
        wirelens: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyArray1<bool>>> {
        let frames = Frames::extract(frames, offsets, wirelens)?;
        let view = frames.view()?;
        let program = &self.program;
        let out = py.detach(|| {
            let n = view.len();
            let mut verdicts = vec![false; n];
            match program.native() {
                Some(native) => {
                    let mut chunk = Vec::with_capacity(CHUNK);
                    let mut ret = vec![0u32; CHUNK];
                    for start in (0..n).step_by(CHUNK) {
                        let end = (start + CHUNK).min(n);
                        view.chunk(start, end, &mut chunk);
                        let ret = &mut ret[..end - start];
                        native.run_batch(&chunk, ret);
                        for (v, r) in verdicts[start..end].iter_mut().zip(ret.iter()) {
                            *v = *r != 0;
                        }
                    }
                }
                None => {
                    for (i, v) in verdicts.iter_mut().enumerate() {
                        let (pkt, wl) = view.get(i);
                        *v = program.run(pkt, wl) != 0;
                    }
                }
            }
            verdicts
        });
        Ok(PyArray1::from_vec(py, out))
    }

    /// The compiled program as text: ``"d"`` (tcpdump -d), ``"dd"`` (C
    /// array), ``"ddd"`` (decimal numbers).
    ///
    /// >>> print(sluice.Filter("ip", linktype="RAW").program("ddd"))
    /// 5
    /// 48 0 0 0
    /// 84 0 0 240
    /// 21 0 1 64
    /// 6 0 0 262144
    /// 6 0 0 0
    #[pyo3(signature = (format="d"))]
    fn program(&self, format: &str) -> PyResult<String> {
        let bpf = self.program.bpf();
        let text = match format {
            "d" => sluice_bpf::disasm_d(bpf),
            "dd" => sluice_bpf::disasm_dd(bpf),
            "ddd" => sluice_bpf::disasm_ddd(bpf),
            other => {
                return Err(PyValueError::new_err(format!(
                    "format '{other}': use 'd', 'dd' or 'ddd'"
                )))
            }
        };
        Ok(text.trim_end_matches('\n').to_string())
    }

    /// The filter text as given.
    #[getter]
    fn expression(&self) -> &str {
        &self.text
    }

    /// Its language: ``"pcap"``, ``"bpf"``, ``"cspf"`` or ``"dpf"``.
    #[getter]
    fn language(&self) -> &'static str {
        self.language.name()
    }

    /// The link type's name (``"EN10MB"``).
    #[getter]
    fn linktype(&self) -> &'static str {
        self.linktype.name()
    }

    /// What an accepted frame returns.
    #[getter]
    fn snaplen(&self) -> u32 {
        self.snaplen
    }

    /// Whether it was optimised.
    #[getter]
    fn optimize(&self) -> bool {
        self.optimize
    }

    /// Whether native code runs it (otherwise the BPF interpreter).
    #[getter]
    fn native(&self) -> bool {
        self.program.native().is_some()
    }

    fn __repr__(&self) -> String {
        format!(
            "sluice.Filter({:?}, linktype={:?})",
            self.text,
            self.linktype.name()
        )
    }
}
