//! A [`Compiled`] filter as bytes: its intermediate form, its accepting
//! paths (and their absorbed form) and how it runs whole, so a process
//! that receives it merges it without compiling or enumerating paths
//! again (what a compiled filter set shipped to Dask workers carries).
//!
//! The rule: decoding refuses anything that is not an encoding (through
//! [`sluice_ir::codec::Reader`]); paths are taken as they come, so the
//! bytes must come from a [`Compiled`] of the same sluice (the carrying
//! format checks its version). A decoded filter classifies as the one
//! encoded: every load stays bounds-checked whatever the bytes say.
//!
//! ```
//! use sluice_classifier::merged::{decode_compiled, encode_compiled, Compiled};
//! use sluice_ir::{Filter, Pred, Size, Val};
//! let c = Compiled::new(Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 1));
//! let mut bytes = Vec::new();
//! encode_compiled(&c, &mut bytes);
//! let mut r = sluice_ir::codec::Reader::new(&bytes);
//! let back = decode_compiled(&mut r).unwrap();
//! assert_eq!(back.paths(), c.paths());
//! assert_eq!(back.filter(), c.filter());
//! ```

use super::{Compiled, Whole};
use crate::path::{Atom, KeySet, Path, Test, MAX_ATOMS, MAX_PATHS};
use sluice_bpf::Insn;
use sluice_ir::codec::{put_keys, put_len, put_u32, CodecError, Encoder, Reader};
use std::sync::Arc;

fn encode_test(t: &Test, out: &mut Vec<u8>) {
    let (tag, k) = match t {
        Test::Eq(k) => (0, *k),
        Test::Gt(k) => (1, *k),
        Test::Ge(k) => (2, *k),
        Test::Set(k) => (3, *k),
        Test::In(set) => {
            out.push(4);
            put_keys(out, set.sorted());
            return;
        }
    };
    out.push(tag);
    put_u32(out, k);
}

fn encode_paths(paths: Option<&[Path]>, e: &mut Encoder<'_>) {
    let Some(paths) = paths else {
        e.out().push(0);
        return;
    };
    e.out().push(1);
    put_len(e.out(), paths.len());
    for p in paths {
        put_len(e.out(), p.atoms.len());
        for a in &p.atoms {
            match a {
                Atom::Field { val, test, truth } => {
                    e.out().push(0);
                    e.val(val);
                    encode_test(test, e.out());
                    e.out().push(u8::from(*truth));
                }
                Atom::Pred { pred, truth } => {
                    e.out().push(1);
                    e.pred(pred);
                    e.out().push(u8::from(*truth));
                }
            }
        }
        put_u32(e.out(), p.accept);
    }
}

/// Append a compiled filter (the values it shares written once, for the
/// filter and its paths alike).
///
/// ```
/// use sluice_classifier::merged::{encode_compiled, Compiled};
/// let mut b = Vec::new();
/// encode_compiled(&Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), &mut b);
/// assert!(!b.is_empty());
/// ```
pub fn encode_compiled(c: &Compiled, out: &mut Vec<u8>) {
    let mut e = Encoder::new(out);
    e.filter(c.filter());
    encode_paths(c.paths(), &mut e);
    encode_paths(c.absorbed_raw(), &mut e);
    let out = e.out();
    match c.whole() {
        Whole::Bpf(prog) => {
            out.push(0);
            put_len(out, prog.len());
            for i in prog.iter() {
                out.extend_from_slice(&i.code.to_le_bytes());
                out.push(i.jt);
                out.push(i.jf);
                put_u32(out, i.k);
            }
        }
        // The filter itself, run by the reference interpreter.
        Whole::Ir(_) => out.push(1),
    }
}

fn decode_test(r: &mut Reader<'_>) -> Result<Test, CodecError> {
    Ok(match r.u8()? {
        0 => Test::Eq(r.u32()?),
        1 => Test::Gt(r.u32()?),
        2 => Test::Ge(r.u32()?),
        3 => Test::Set(r.u32()?),
        4 => Test::In(KeySet::new(r.keys()?)),
        t => return Err(r.error(format!("unknown test tag {t}"))),
    })
}

fn decode_paths(r: &mut Reader<'_>) -> Result<Option<Vec<Path>>, CodecError> {
    if !r.bool()? {
        return Ok(None);
    }
    let n = r.count(8)?;
    if n > MAX_PATHS {
        return Err(r.error(format!("{n} paths, more than {MAX_PATHS}")));
    }
    let mut paths = Vec::with_capacity(n);
    for _ in 0..n {
        let m = r.count(3)?;
        if m > MAX_ATOMS {
            return Err(r.error(format!("{m} atoms, more than {MAX_ATOMS}")));
        }
        let mut atoms = Vec::with_capacity(m);
        for _ in 0..m {
            atoms.push(match r.u8()? {
                0 => {
                    let val = r.val()?;
                    let test = decode_test(r)?;
                    Atom::Field {
                        val,
                        test,
                        truth: r.bool()?,
                    }
                }
                1 => {
                    let pred = r.pred()?;
                    Atom::Pred {
                        pred,
                        truth: r.bool()?,
                    }
                }
                t => return Err(r.error(format!("unknown atom tag {t}"))),
            });
        }
        let accept = r.u32()?;
        if accept == 0 {
            return Err(r.error("a path that accepts with 0"));
        }
        paths.push(Path { atoms, accept });
    }
    Ok(Some(paths))
}

/// Read a compiled filter written by [`encode_compiled`].
///
/// ```
/// let mut r = sluice_ir::codec::Reader::new(&[9]);
/// assert!(sluice_classifier::merged::decode_compiled(&mut r).is_err());
/// ```
pub fn decode_compiled(r: &mut Reader<'_>) -> Result<Compiled, CodecError> {
    let filter = r.filter()?;
    let paths = decode_paths(r)?;
    let absorbed = decode_paths(r)?;
    let whole = match r.u8()? {
        0 => {
            let n = r.count(8)?;
            let mut prog = Vec::with_capacity(n);
            for _ in 0..n {
                prog.push(Insn {
                    code: r.u16()?,
                    jt: r.u8()?,
                    jf: r.u8()?,
                    k: r.u32()?,
                });
            }
            if sluice_bpf::Verifier::userland().verify(&prog).is_err() {
                return Err(r.error("not a valid BPF program"));
            }
            Whole::Bpf(prog.into())
        }
        1 => Whole::Ir(Arc::new(filter.clone())),
        t => return Err(r.error(format!("unknown whole-filter tag {t}"))),
    };
    Ok(Compiled::from_parts(filter, paths, absorbed, whole))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::{CmpOp, Filter, Pred, Size, Val};

    fn round(c: &Compiled) {
        let mut b = Vec::new();
        encode_compiled(c, &mut b);
        let mut r = Reader::new(&b);
        let back = decode_compiled(&mut r).unwrap();
        assert!(r.is_empty());
        assert_eq!(back.filter(), c.filter());
        assert_eq!(back.paths(), c.paths());
        assert_eq!(back.absorbed_raw(), c.absorbed_raw());
        assert_eq!(back.whole().program(), c.whole().program());
        for cut in 0..b.len() {
            assert!(decode_compiled(&mut Reader::new(&b[..cut])).is_err());
        }
    }

    #[test]
    fn compiled_filters_round_trip() {
        let b = Val::load_abs(0, Size::Byte);
        let ports = Pred::In {
            val: Val::load_abs(2, Size::Half),
            keys: vec![53, 80, 443].into(),
        };
        let f = Filter::new(
            Pred::or(vec![
                Pred::and(vec![Pred::eq(b.clone(), 1), ports]),
                Pred::not(Pred::eq(b.clone(), 1)),
                Pred::cmp(CmpOp::Gt, b.clone(), Val::Len),
            ]),
            96,
        );
        round(&Compiled::new(f.clone()));
        let ret = [sluice_bpf::Insn::stmt(
            sluice_bpf::op::BPF_RET | sluice_bpf::op::BPF_K,
            96,
        )];
        round(&Compiled::with_program(f, &ret));
        round(&Compiled::from_bpf(&[sluice_bpf::Insn::stmt(
            sluice_bpf::op::BPF_RET | sluice_bpf::op::BPF_A,
            0,
        )]));
    }
}
