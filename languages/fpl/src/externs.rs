//! External functions (FFPF §3.3.1): native code a filter calls with
//! `EXTERN(name, input, output)`, registered with the sizes of their input
//! and output in MBuf words so that the compiler can check the ranges.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// An external function: `(input words, output words, packet) -> value`.
///
/// The input is `MEM[input .. input + in_words]` (copied first when it
/// overlaps the output), the output `MEM[output .. output + out_words]`;
/// the returned value is the value of the `EXTERN(...)` expression.
///
/// ```
/// use std::sync::Arc;
/// let f: sluice_fpl::ExternFn = Arc::new(|inp: &[u32], out: &mut [u32], _pkt: &[u8]| {
///     out[0] = inp[0] + 1;
///     0
/// });
/// let mut out = [0];
/// f(&[41], &mut out, &[]);
/// assert_eq!(out, [42]);
/// ```
pub type ExternFn = Arc<dyn Fn(&[u32], &mut [u32], &[u8]) -> u32 + Send + Sync>;

/// The largest input or output of an external function, in words.
pub const MAX_EXTERN_WORDS: u32 = 1 << 16;

/// One registered external function.
///
/// ```
/// let e = sluice_fpl::Externs::builtin();
/// let d = e.get("GetDynTCPDPortFromRTSP").unwrap();
/// assert_eq!((d.input, d.output), (0, 0));
/// ```
#[derive(Clone)]
pub struct ExternDef {
    /// The name `EXTERN` calls it by.
    pub name: String,
    /// Words of input it reads.
    pub input: u32,
    /// Words of output it writes.
    pub output: u32,
    /// The function.
    pub func: ExternFn,
}

impl fmt::Debug for ExternDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternDef")
            .field("name", &self.name)
            .field("input", &self.input)
            .field("output", &self.output)
            .finish_non_exhaustive()
    }
}

/// Why a function could not be registered.
///
/// ```
/// let mut e = sluice_fpl::Externs::builtin();
/// let f: sluice_fpl::ExternFn = std::sync::Arc::new(|_: &[u32], _: &mut [u32], _: &[u8]| 0);
/// let err = e.register("GetDynTCPDPortFromRTSP", 0, 0, f).unwrap_err();
/// assert!(err.to_string().contains("already"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExternError {
    /// The name is taken.
    #[error("an external function `{0}` is already registered")]
    Duplicate(String),
    /// The name is empty or holds characters other than letters, digits, `_`, `.`, `-`.
    #[error("`{0}` is not a valid external function name")]
    BadName(String),
    /// The input or output is larger than [`MAX_EXTERN_WORDS`].
    #[error("`{0}`: input and output are limited to {MAX_EXTERN_WORDS} words")]
    TooLarge(String),
}

/// A registry of external functions, by name.
///
/// ```
/// use std::sync::Arc;
/// use sluice_fpl::{Externs, Program};
/// let mut ext = Externs::new();
/// ext.register("double", 1, 1, Arc::new(|i: &[u32], o: &mut [u32], _: &[u8]| { o[0] = 2 * i[0]; 1 })).unwrap();
/// let p = Program::compile("MEM[0] = 21; EXTERN(double, 0, 1); RETURN MEM[1];", &ext).unwrap();
/// let mut mem = vec![0; p.mem_words()];
/// assert_eq!(p.run(&[], &mut mem), 42);
/// ```
#[derive(Clone, Default, Debug)]
pub struct Externs {
    map: BTreeMap<String, ExternDef>,
}

impl Externs {
    /// An empty registry.
    ///
    /// ```
    /// assert!(sluice_fpl::Externs::new().get("x").is_none());
    /// ```
    pub fn new() -> Externs {
        Externs::default()
    }

    /// The functions sluice provides: `GetDynTCPDPortFromRTSP` (input 0,
    /// output 0 words; see [`rtsp_dyn_port`]), the function of Figure 7.
    ///
    /// ```
    /// assert!(sluice_fpl::Externs::builtin().get("GetDynTCPDPortFromRTSP").is_some());
    /// ```
    pub fn builtin() -> Externs {
        let mut e = Externs::new();
        e.register(
            "GetDynTCPDPortFromRTSP",
            0,
            0,
            Arc::new(|_: &[u32], _: &mut [u32], pkt: &[u8]| rtsp_dyn_port(pkt).unwrap_or(0) as u32),
        )
        .expect("a fresh registry");
        e
    }

    /// Register `func` under `name`, reading `input` and writing `output` words.
    ///
    /// ```
    /// let mut e = sluice_fpl::Externs::new();
    /// let f: sluice_fpl::ExternFn = std::sync::Arc::new(|_: &[u32], _: &mut [u32], p: &[u8]| p.len() as u32);
    /// e.register("len", 0, 0, f).unwrap();
    /// assert_eq!(e.names().collect::<Vec<_>>(), ["len"]);
    /// ```
    pub fn register(
        &mut self,
        name: &str,
        input: u32,
        output: u32,
        func: ExternFn,
    ) -> Result<(), ExternError> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return Err(ExternError::BadName(name.into()));
        }
        if input > MAX_EXTERN_WORDS || output > MAX_EXTERN_WORDS {
            return Err(ExternError::TooLarge(name.into()));
        }
        if self.map.contains_key(name) {
            return Err(ExternError::Duplicate(name.into()));
        }
        self.map.insert(
            name.into(),
            ExternDef {
                name: name.into(),
                input,
                output,
                func,
            },
        );
        Ok(())
    }

    /// The function registered as `name`.
    ///
    /// ```
    /// assert!(sluice_fpl::Externs::new().get("GetDynTCPDPortFromRTSP").is_none());
    /// ```
    pub fn get(&self, name: &str) -> Option<&ExternDef> {
        self.map.get(name)
    }

    /// The registered names, in order.
    ///
    /// ```
    /// assert_eq!(sluice_fpl::Externs::builtin().names().count(), 1);
    /// ```
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(|k| k.as_str())
    }
}

/// The data port an RTSP request announces: in an Ethernet/IPv4/TCP frame,
/// the TCP payload's `Transport:` header, its `client_port=` value (the
/// port the client receives data on, the first of a `a-b` pair), or
/// failing that its `server_port=`. `None` if the frame is not IPv4/TCP,
/// is cut short, or has no such header.
///
/// ```
/// let mut f = vec![0u8; 54];
/// f[12] = 0x08; f[14] = 0x45; f[23] = 6; f[46] = 0x50;
/// f.extend_from_slice(b"SETUP rtsp://h/a RTSP/1.0\r\nTransport: RTP/AVP;unicast;client_port=4588-4589\r\n\r\n");
/// assert_eq!(sluice_fpl::rtsp_dyn_port(&f), Some(4588));
/// ```
pub fn rtsp_dyn_port(pkt: &[u8]) -> Option<u16> {
    if pkt.get(12..14)? != [0x08, 0x00] || pkt.get(23)? != &6 {
        return None;
    }
    let l4 = 14 + 4 * (*pkt.get(14)? as usize & 15);
    let data = l4 + 4 * (*pkt.get(l4 + 12)? as usize >> 4);
    let payload = pkt.get(data..)?;
    for line in payload.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        if !line[..colon]
            .trim_ascii()
            .eq_ignore_ascii_case(b"transport")
        {
            continue;
        }
        let value = &line[colon + 1..];
        for key in [&b"client_port="[..], b"server_port="] {
            if let Some(at) = find_ci(value, key) {
                let digits = &value[at + key.len()..];
                let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
                if n > 0 && n <= 5 {
                    let port: u32 = std::str::from_utf8(&digits[..n]).ok()?.parse().ok()?;
                    if port <= u16::MAX as u32 {
                        return Some(port as u16);
                    }
                }
            }
        }
    }
    None
}

/// Where `needle` first occurs in `hay`, ignoring ASCII case.
fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 6;
        f[46] = 0x50;
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn rtsp_ports() {
        let p =
            frame(b"SETUP x RTSP/1.0\r\nCSeq: 3\r\ntransport: RTP/AVP;server_port=6970-6971\r\n");
        assert_eq!(rtsp_dyn_port(&p), Some(6970));
        let p = frame(b"Transport: RTP/AVP;Client_Port=5000;server_port=6000\n");
        assert_eq!(rtsp_dyn_port(&p), Some(5000));
        assert_eq!(
            rtsp_dyn_port(&frame(b"Transport: client_port=99999\r\n")),
            None
        );
        assert_eq!(
            rtsp_dyn_port(&frame(b"X-Transport: client_port=1\r\n")),
            None
        );
        assert_eq!(rtsp_dyn_port(&frame(b"OPTIONS * RTSP/1.0\r\n")), None);
        for n in 0..60 {
            assert_eq!(
                rtsp_dyn_port(&frame(b"Transport: client_port=7\r\n")[..n]),
                None
            );
        }
        let mut udp = frame(b"Transport: client_port=7\r\n");
        udp[23] = 17;
        assert_eq!(rtsp_dyn_port(&udp), None);
    }

    #[test]
    fn registry_rules() {
        let f: ExternFn = Arc::new(|_: &[u32], _: &mut [u32], _: &[u8]| 0);
        let mut e = Externs::new();
        assert_eq!(
            e.register("", 0, 0, f.clone()),
            Err(ExternError::BadName("".into()))
        );
        assert_eq!(
            e.register("a b", 0, 0, f.clone()),
            Err(ExternError::BadName("a b".into()))
        );
        assert!(matches!(
            e.register("big", MAX_EXTERN_WORDS + 1, 0, f.clone()),
            Err(ExternError::TooLarge(_))
        ));
        e.register("ok", 1, 2, f.clone()).unwrap();
        assert!(matches!(
            e.register("ok", 0, 0, f),
            Err(ExternError::Duplicate(_))
        ));
    }
}
