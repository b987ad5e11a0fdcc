//! The `FPL-2` class: FFPF's own filter language (`sluice-fpl`), run as
//! machine code (`sluice_native::fpl::NativeFpl`) where it can be built and
//! in `sluice-fpl`'s interpreter otherwise.
//!
//! `(FPL-2,"PROGRAM"[,MBUF_BYTES])`, also spelled `FPL` or `FPL2`;
//! `@FILE` takes the program from a file, which the group reads once the
//! policy's `read=` rules allowed it ([`crate::class::Files`]); errors in
//! it give the file, line and column and quote nothing of it.
//! Compile-time checks (bounded loops, MBuf ranges, EXTERN ranges) happen
//! when the flow is populated (for a `@FILE`, when it is instantiated),
//! with the error's position turned into a column of the specification
//! (for a one-line program). `MBUF_BYTES` sets the program's MBuf size (the
//! compiler refuses programs that could reach past it); without it, the
//! program's `DECLARE MEM[n]` or the size the compiler infers. The MBuf
//! holds `MEM[...]` and then the registers, which persist across packets.
//!
//! The program runs on a private copy of its MBuf; the copy is published to
//! the instance's MBuf, and the application's writes applied to it, every
//! turn of the group's loop (every [`crate::GroupConfig::batch`] packets)
//! and at the end, so an application sees the memory at most one turn old.
//! External functions: `sluice_fpl::Externs::builtin()` unless the class is
//! made with [`FplClass::with_externs`]; the functions a program calls are
//! reported to authorisation (`extern=` in a policy).

use crate::buffer::MBuf;
use crate::class::{ArgError, BuildEnv, ClassInfo, Element, Files, FilterClass, Pkt};
use crate::value::Value;
use sluice_fpl::{Externs, Limits, Program};
use sluice_native::fpl::NativeFpl;

/// The `FPL-2` filter class.
///
/// ```
/// use sluice_flow::class::FilterClass;
/// let c = sluice_flow::fpl::FplClass::new();
/// let info = c.check(&["IF (PKT.IP_PROTO == PROTO_TCP) THEN RETURN 1; FI".into()]).unwrap();
/// assert_eq!(info.externs, Vec::<String>::new());
/// // MEM[70] is outside a 16-byte (4-word) MBuf: refused at compile time.
/// let e = c.check(&["RETURN MEM[70];".into(), "16".into()]).unwrap_err();
/// assert_eq!(e.arg, Some(0));
/// ```
pub struct FplClass {
    externs: Externs,
}

impl Default for FplClass {
    fn default() -> Self {
        FplClass::new()
    }
}

impl FplClass {
    /// The class with the built-in external functions.
    ///
    /// ```
    /// use sluice_flow::class::FilterClass;
    /// assert_eq!(sluice_flow::fpl::FplClass::new().name(), "FPL-2");
    /// ```
    pub fn new() -> FplClass {
        FplClass::with_externs(Externs::builtin())
    }

    /// The class with these external functions.
    ///
    /// ```
    /// use sluice_flow::class::FilterClass;
    /// let mut ext = sluice_fpl::Externs::new();
    /// let double: sluice_fpl::ExternFn = std::sync::Arc::new(|i: &[u32], o: &mut [u32], _: &[u8]| {
    ///     o[0] = 2 * i[0];
    ///     1
    /// });
    /// ext.register("double", 1, 1, double).unwrap();
    /// let c = sluice_flow::fpl::FplClass::with_externs(ext);
    /// let info = c.check(&["EXTERN(double, 0, 1); RETURN MEM[1];".into()]).unwrap();
    /// assert_eq!(info.externs, vec!["double".to_string()]);
    /// // The built-in functions are not among these.
    /// assert!(c.check(&["EXTERN(GetDynTCPDPortFromRTSP, 0, 0); RETURN 1;".into()]).is_err());
    /// ```
    pub fn with_externs(externs: Externs) -> FplClass {
        FplClass { externs }
    }

    /// The program; `None` when it is a `@FILE` and `files` is `None` (at
    /// populate: the file is read only once the policy allowed it).
    fn compile(&self, args: &[String], files: Option<&Files>) -> Result<Option<Program>, ArgError> {
        crate::class::at_most(args, 2, "(FPL-2,PROGRAM[,MBUF_BYTES])")?;
        let raw = args
            .first()
            .ok_or_else(|| ArgError::element("FPL-2 needs a program: (FPL-2,\"RETURN 1;\")"))?;
        let path = file_ref(raw);
        let src = match (&path, files) {
            (Some(p), Some(f)) => f
                .read(std::path::Path::new(p))
                .map_err(|e| ArgError::at(0, format!("{p}: {e}")))?,
            (Some(_), None) => String::new(),
            (None, _) => raw.clone(),
        };
        let mut limits = Limits::default();
        if let Some(b) = args.get(1).filter(|s| !s.is_empty()) {
            let bytes: usize = b.parse().map_err(|_| {
                ArgError::at(
                    1,
                    format!("MBuf size: expected a number of bytes, found {b:?}"),
                )
            })?;
            if bytes > 64 << 20 {
                return Err(ArgError::at(1, "MBuf larger than 64 MiB"));
            }
            limits.mem_words = Some(bytes / 4);
        }
        if path.is_some() && files.is_none() {
            return Ok(None);
        }
        Program::compile_with(&src, &self.externs, &limits)
            .map(Some)
            .map_err(|e| {
                if let Some(p) = &path {
                    // Where in the file, and nothing of it.
                    return ArgError::at(
                        0,
                        format!(
                            "{p}: line {}, column {}: FPL: {}",
                            e.line,
                            e.col,
                            sluice_filter::redact(&e.message, &src)
                        ),
                    );
                }
                let offset = {
                    let line_start: usize = src
                        .split_inclusive('\n')
                        .take(e.line.saturating_sub(1) as usize)
                        .map(|l| l.chars().count())
                        .sum();
                    line_start + e.col.saturating_sub(1) as usize
                };
                ArgError {
                    arg: Some(0),
                    offset,
                    message: format!("FPL line {}, column {}: {}", e.line, e.col, e.message),
                }
            })
    }
}

/// The file an `FPL-2` program argument names (`@FILE`), as written.
fn file_ref(raw: &str) -> Option<String> {
    raw.trim().strip_prefix('@').map(|p| p.trim().to_string())
}

/// What authorisation and the MBuf need to know of a program.
fn info(p: Program) -> ClassInfo {
    ClassInfo {
        mbuf_words: p.mem_words(),
        externs: p.externs().iter().map(|e| e.name.clone()).collect(),
    }
}

struct Fpl {
    prog: Program,
    native: Option<NativeFpl>,
    mem: Vec<u32>,
    passed: u64,
    runs: u64,
}

impl FilterClass for FplClass {
    fn name(&self) -> &str {
        "FPL-2"
    }
    fn aliases(&self) -> &[&str] {
        &["fpl", "fpl2"]
    }
    fn check(&self, args: &[String]) -> Result<ClassInfo, ArgError> {
        Ok(self.compile(args, None)?.map(info).unwrap_or_default())
    }
    fn files(&self, args: &[String]) -> Vec<String> {
        args.first().and_then(|a| file_ref(a)).into_iter().collect()
    }
    fn check_loaded(&self, args: &[String], files: &Files) -> Result<ClassInfo, ArgError> {
        Ok(self
            .compile(args, Some(files))?
            .map(info)
            .unwrap_or_default())
    }
    fn build(&self, args: &[String], env: &BuildEnv) -> Result<Box<dyn Element>, ArgError> {
        let prog = self
            .compile(args, Some(&env.files))?
            .ok_or_else(|| ArgError::at(0, "the program's file was not read"))?;
        let native = NativeFpl::compile(&prog).ok();
        Ok(Box::new(Fpl {
            mem: vec![0; prog.mem_words()],
            prog,
            native,
            passed: 0,
            runs: 0,
        }))
    }
}

impl Element for Fpl {
    #[inline]
    fn run(&mut self, pkt: &Pkt<'_>, _: &MBuf) -> Result<u32, String> {
        let r = match &self.native {
            Some(n) => n.run(pkt.data, &mut self.mem),
            None => self.prog.run(pkt.data, &mut self.mem),
        };
        self.runs += 1;
        self.passed += (r != 0) as u64;
        Ok(r)
    }

    fn sync(&mut self, mem: &MBuf) {
        for (i, v) in mem.take_app_writes() {
            if let Some(w) = self.mem.get_mut(i as usize) {
                *w = v;
            }
        }
        mem.publish(&self.mem);
    }

    fn report(&self, mem: &MBuf) -> Value {
        let words = mem.snapshot();
        let nonzero = words[..self.prog.mem_size().min(words.len())]
            .iter()
            .filter(|&&w| w != 0)
            .count();
        let regs = words
            .get(self.prog.reg_base()..)
            .unwrap_or(&[])
            .iter()
            .map(|&w| Value::U64(w as u64))
            .collect();
        Value::map([
            ("runs", Value::U64(self.runs)),
            ("passed", Value::U64(self.passed)),
            (
                "native",
                Value::Str(if self.native.is_some() { "yes" } else { "no" }.into()),
            ),
            ("mem_words", Value::U64(self.prog.mem_size() as u64)),
            ("mem_nonzero", Value::U64(nonzero as u64)),
            ("registers", Value::List(regs)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure6_counts_tcp_flows_in_the_mbuf() {
        let src = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/fpl-figure6.fpl"
        ))
        .unwrap();
        let c = FplClass::new();
        let args = vec![src];
        let info = c.check(&args).unwrap();
        let m = MBuf::new(info.mbuf_words);
        let mut e = c.build(&args, &BuildEnv::default()).unwrap();
        let mut tcp = crate::stats::tests::ipv4(6, [1, 2, 3, 4], 10, [5, 6, 7, 8], 80, b"");
        for _ in 0..3 {
            e.run(
                &Pkt {
                    data: &tcp,
                    wirelen: tcp.len() as u32,
                    linktype: 1,
                    ts_sec: 0,
                    ts_nsec: 0,
                    big_endian: false,
                },
                &m,
            )
            .unwrap();
        }
        tcp[23] = 17; // now UDP: not counted
        e.run(
            &Pkt {
                data: &tcp,
                wirelen: 0,
                linktype: 1,
                ts_sec: 0,
                ts_nsec: 0,
                big_endian: false,
            },
            &m,
        )
        .unwrap();
        // Nothing published before the sync.
        assert!(m.snapshot().iter().all(|&w| w == 0));
        e.sync(&m);
        let words = m.snapshot();
        assert_eq!(words[..256].iter().filter(|&&w| w == 3).count(), 1);
        assert_eq!(words[..256].iter().sum::<u32>(), 3);
    }

    #[test]
    fn application_writes_reach_the_program() {
        let c = FplClass::new();
        let args = vec!["MEM[0]++; RETURN MEM[0];".to_string(), "16".to_string()];
        let m = MBuf::new(c.check(&args).unwrap().mbuf_words);
        let mut e = c.build(&args, &BuildEnv::default()).unwrap();
        let p = Pkt {
            data: &[0],
            wirelen: 1,
            linktype: 1,
            ts_sec: 0,
            ts_nsec: 0,
            big_endian: false,
        };
        assert_eq!(e.run(&p, &m).unwrap(), 1);
        m.store(0, 100).unwrap();
        e.sync(&m);
        assert_eq!(e.run(&p, &m).unwrap(), 101);
    }

    #[test]
    fn compile_errors_point_into_the_spec() {
        let c = FplClass::new();
        let e = c
            .check(&["RETURN MEM[70];".into(), "16".into()])
            .unwrap_err();
        assert_eq!(e.arg, Some(0));
        assert!(e.message.contains("FPL line 1"), "{e:?}");
        assert!(e.offset > 0);
    }
}
