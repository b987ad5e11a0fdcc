//! A filter set compiled for one link type, as bytes: the shipped format
//! that lets a process that has the same set (a Dask worker) merge it
//! without compiling it again. What it holds is every filter's
//! [`Compiled`] form (intermediate form, accepting paths, program to run
//! it whole), the part of building a merged classifier that costs most;
//! merging and machine code are made where it is loaded.
//!
//! Layout (little-endian): the magic `SLUICESET`, the format version
//! ([`VERSION`]), the producing sluice-split's version (text), the link
//! type, the capture byte order, the snapshot length, a fingerprint of
//! the set (names and filter texts), the filter count, the body's length,
//! then the body, Zstandard-compressed: each filter as
//! `sluice_classifier::merged::encode_compiled` writes it (paths repeat
//! their loads, which compress well: 1.7 KB a filter becomes about a
//! tenth of that).
//!
//! The rule: bytes are loaded only into the set they were made from, by
//! the sluice that made them (format version, sluice version, snapshot
//! length, fingerprint and count must all agree), and anything that is
//! not exactly such bytes is refused with where and why, never a panic.
//!
//! ```
//! use sluice_split::{filter_pairs, Options, Splitter};
//! let a = Splitter::new(filter_pairs([("dns", "udp port 53")]).unwrap(), Options::default());
//! let bytes = a.export(1, false)?;
//! assert!(bytes.starts_with(sluice_split::shipped::MAGIC));
//! let other = Splitter::new(filter_pairs([("dns", "udp port 54")]).unwrap(), Options::default());
//! assert!(other.load(&bytes).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::Splitter;
use sluice_classifier::merged::{decode_compiled, encode_compiled, Compiled};
use sluice_ir::codec::{put_len, put_u32, Reader};

/// The first bytes of a shipped set.
///
/// ```
/// assert_eq!(sluice_split::shipped::MAGIC, b"SLUICESET");
/// ```
pub const MAGIC: &[u8] = b"SLUICESET";

/// The format's version; a reader refuses any other.
///
/// ```
/// assert_eq!(sluice_split::shipped::VERSION, 1);
/// ```
pub const VERSION: u32 = 1;

/// Why bytes cannot be loaded into a set.
///
/// ```
/// let e = sluice_split::shipped::ShipError("not a shipped sluice filter set".into());
/// assert_eq!(e.to_string(), "not a shipped sluice filter set");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShipError(pub String);

/// FNV-1a over the set's names and texts (lengths included): which set
/// the bytes are for.
fn fingerprint(set: &Splitter) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for &x in (b.len() as u64).to_le_bytes().iter().chain(b) {
            h ^= u64::from(x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for f in set.filters() {
        eat(f.name.as_bytes());
        eat(f.expression.as_bytes());
    }
    h
}

/// The set's compiled filters as shipped bytes.
pub(crate) fn encode(set: &Splitter, linktype: u16, big_endian: bool, c: &[Compiled]) -> Vec<u8> {
    let mut body = Vec::new();
    for f in c {
        encode_compiled(f, &mut body);
    }
    assemble(set, linktype, big_endian, c.len(), &body)
}

/// The header, then the body compressed.
fn assemble(set: &Splitter, linktype: u16, big_endian: bool, count: usize, body: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    put_u32(&mut out, VERSION);
    let version = env!("CARGO_PKG_VERSION").as_bytes();
    put_len(&mut out, version.len());
    out.extend_from_slice(version);
    out.extend_from_slice(&linktype.to_le_bytes());
    out.push(u8::from(big_endian));
    put_u32(&mut out, set.options().snaplen);
    out.extend_from_slice(&fingerprint(set).to_le_bytes());
    put_len(&mut out, count);
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(&zstd::bulk::compress(body, 3).expect("compressing into memory"));
    out
}

/// The most bytes a shipped set's body may say it holds.
const MAX_BODY: u64 = 1 << 36;

/// The link type, byte order and compiled filters of shipped bytes made
/// from `set`.
pub(crate) fn decode(
    set: &Splitter,
    bytes: &[u8],
) -> Result<(u16, bool, Vec<Compiled>), ShipError> {
    let bad = |e: sluice_ir::codec::CodecError| ShipError(format!("shipped filter set: {e}"));
    if !bytes.starts_with(MAGIC) {
        return Err(ShipError("not a shipped sluice filter set".into()));
    }
    let mut r = Reader::new(bytes);
    r.take(MAGIC.len()).map_err(bad)?;
    let version = r.u32().map_err(bad)?;
    if version != VERSION {
        return Err(ShipError(format!(
            "shipped filter set of format version {version}; this sluice reads version {VERSION}"
        )));
    }
    let n = r.count(1).map_err(bad)?;
    let made_by = String::from_utf8_lossy(r.take(n).map_err(bad)?).into_owned();
    if made_by != env!("CARGO_PKG_VERSION") {
        return Err(ShipError(format!(
            "shipped filter set made by sluice {made_by}; this is {}",
            env!("CARGO_PKG_VERSION")
        )));
    }
    let linktype = r.u16().map_err(bad)?;
    let big_endian = r.bool().map_err(bad)?;
    let snaplen = r.u32().map_err(bad)?;
    let print = u64::from_le_bytes(r.take(8).map_err(bad)?.try_into().expect("8 bytes"));
    if snaplen != set.options().snaplen || print != fingerprint(set) {
        return Err(ShipError(
            "shipped filter set made from other filters or another snapshot length".into(),
        ));
    }
    let count = r.u32().map_err(bad)? as usize;
    if count != set.filters().len() {
        return Err(ShipError(format!(
            "shipped filter set of {count} filters, for a set of {}",
            set.filters().len()
        )));
    }
    let size = u64::from_le_bytes(r.take(8).map_err(bad)?.try_into().expect("8 bytes"));
    if size > MAX_BODY {
        return Err(ShipError(format!(
            "shipped filter set body of {size} bytes"
        )));
    }
    let body = zstd::bulk::decompress(&bytes[r.position()..], size as usize).map_err(|e| {
        ShipError(format!(
            "shipped filter set: the body does not decompress: {e}"
        ))
    })?;
    if body.len() as u64 != size {
        return Err(ShipError(format!(
            "shipped filter set: the body holds {} bytes, not {size}",
            body.len()
        )));
    }
    let mut r = Reader::new(&body);
    let mut compiled = Vec::with_capacity(count);
    for _ in 0..count {
        compiled.push(decode_compiled(&mut r).map_err(bad)?);
    }
    if !r.is_empty() {
        return Err(ShipError(format!(
            "shipped filter set: {} bytes after the last filter",
            body.len() - r.position()
        )));
    }
    Ok((linktype, big_endian, compiled))
}

#[cfg(test)]
mod tests {
    use super::assemble;
    use crate::{filter_pairs, Options, Splitter};

    fn set() -> Splitter {
        let f = filter_pairs([
            ("web", "tcp port 80 or tcp port 443"),
            ("dns", "udp port 53"),
            ("v6", "ip6 and not icmp6"),
            ("vlan", "vlan 5 and host 10.0.0.1"),
            ("prog", "bpf:ret #1"),
            ("chain", "ip protochain 6"),
        ])
        .unwrap();
        Splitter::new(f, Options::default())
    }

    #[test]
    fn a_loaded_set_classifies_as_the_compiled_one() {
        let here = set();
        let bytes = here.export(1, false).unwrap();
        let there = set();
        assert_eq!(there.load(&bytes).unwrap(), (1, false));
        let sample = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/sample.pcap"
        ))
        .unwrap();
        let mut r = sluice_capture::CaptureReader::from_reader(&sample[..], "s").unwrap();
        let (mut a, mut b) = (here.classifier(false), there.classifier(false));
        let mut n = 0;
        while let Some(p) = r.next_packet().unwrap() {
            assert_eq!(a.classify(&p).unwrap(), b.classify(&p).unwrap());
            n += 1;
        }
        assert!(n > 10);
    }

    #[test]
    fn wrong_or_damaged_bytes_are_refused() {
        let bytes = set().export(1, false).unwrap();
        let there = set();
        for cut in [0, 5, 20, 40, bytes.len() / 2, bytes.len() - 1] {
            assert!(there.load(&bytes[..cut]).is_err(), "cut {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(there.load(&longer).is_err());
        // Every byte of the body changed in turn: refused or loaded, never
        // a panic (the Rust engine, to keep machine code out of a debug
        // test's time).
        let walked = Splitter::new(
            set().filters().to_vec(),
            Options {
                native: false,
                ..Options::default()
            },
        );
        let compiled = walked.compile_set(1, false).unwrap();
        let mut body = Vec::new();
        for f in &compiled {
            sluice_classifier::merged::encode_compiled(f, &mut body);
        }
        assert!(walked
            .load(&assemble(&walked, 1, false, compiled.len(), &body))
            .is_ok());
        for i in 0..body.len() {
            let mut flipped = body.clone();
            flipped[i] ^= 0x5a;
            let _ = walked.load(&assemble(&walked, 1, false, compiled.len(), &flipped));
        }
        let other = Splitter::new(filter_pairs([("web", "tcp")]).unwrap(), Options::default());
        assert!(other.load(&bytes).unwrap_err().0.contains("other filters"));
    }
}
