//! One classic BPF program accepting what any of several filters accepts,
//! for a kernel pre-filter ([`Program::union_bpf`]).
//!
//! Rule: the union may accept more than its filters, never less. Joining
//! the filters' predicates with `or` is not enough: an intermediate form
//! aborts (rejects the packet) at a load past the frame or a division by
//! zero anywhere on its path, so one filter's abort would hide another's
//! accept. Each filter is first made never to abort: every test whose
//! values may abort is guarded by the conditions under which they do
//! not, and when a guard fails the test takes the value that leans to
//! accepting (true under an even number of negations, false under an
//! odd one). Where nothing aborts, every test means what it meant, so a
//! packet a filter accepts the union accepts. The guards compare with
//! the frame's length (`len`), which in the kernel is the captured
//! length too.

use crate::Program;
use sluice_ir::{BinOp, CmpOp, Filter, Pred, Val};

impl Program {
    /// One classic BPF program accepting what any of `programs` accepts
    /// (returning the largest of their accept values), for a kernel
    /// pre-filter: their intermediate forms, each made never to abort,
    /// joined by `or` and lowered once. Each keeps its own meaning (a
    /// pcap expression's `vlan` or `mpls` moves the offsets of every test
    /// after it, even across `or`: the text of several expressions joined
    /// is not their union). `None` when one has no intermediate form, or
    /// the program would be longer than `max_insns`.
    ///
    /// ```
    /// use sluice_filter::{LinkType, Program};
    /// let b = Program::builder(LinkType::EN10MB);
    /// let tagged = b.build("not vlan and tcp port 80").unwrap();
    /// let short = b.build("not ether proto 0x6003").unwrap();
    /// let u = Program::union_bpf(&[&tagged, &short], 4096).unwrap();
    /// // 14 bytes: the first filter's tests past them do not hide the
    /// // second filter's accept.
    /// let mut f = [0u8; 14];
    /// f[12] = 0x80;
    /// assert_ne!(sluice_bpf::run(short.bpf(), &f, 14), 0);
    /// assert_ne!(sluice_bpf::run(&u, &f, 14), 0);
    /// ```
    pub fn union_bpf(programs: &[&Program], max_insns: usize) -> Option<Vec<sluice_bpf::Insn>> {
        let irs: Vec<&Filter> = programs.iter().map(|p| p.ir()).collect::<Option<_>>()?;
        let accept = irs.iter().map(|f| f.accept).max()?;
        let any = Filter::new(
            Pred::or(irs.iter().map(|f| never_aborting(&f.pred, true)).collect()),
            accept,
        );
        let bpf = sluice_cbpf::lower(&any).ok()?;
        (bpf.len() <= max_insns).then_some(bpf)
    }
}

/// `p` made never to abort, leaning to accepting where it would have
/// (`positive`: under an even number of negations).
fn never_aborting(p: &Pred, positive: bool) -> Pred {
    let lean = || if positive { Pred::True } else { Pred::False };
    match p {
        Pred::True | Pred::False => p.clone(),
        Pred::Not(q) => Pred::not(never_aborting(q, !positive)),
        Pred::And(ps) => Pred::and(ps.iter().map(|q| never_aborting(q, positive)).collect()),
        Pred::Or(ps) => Pred::or(ps.iter().map(|q| never_aborting(q, positive)).collect()),
        Pred::Cmp { lhs, rhs, .. } => guarded(p, &[lhs, rhs], positive),
        Pred::In { val, .. } => guarded(p, &[val], positive),
        // A walk of headers: whether it aborts is its own business.
        Pred::ProtoChain { .. } => lean(),
    }
}

/// The test `p` on `vals`, evaluated only where they do not abort, else
/// leaning as `positive` says.
fn guarded(p: &Pred, vals: &[&Val], positive: bool) -> Pred {
    let mut guards = Vec::new();
    for v in vals {
        no_abort(v, &mut guards);
    }
    if guards.is_empty() {
        return p.clone();
    }
    let safe = Pred::and(guards);
    match positive {
        true => Pred::or(vec![Pred::not(safe), p.clone()]),
        false => Pred::and(vec![safe, p.clone()]),
    }
}

/// The conditions under which evaluating `v` does not abort, in its
/// order of evaluation (each needs only those before it to hold).
fn no_abort(v: &Val, out: &mut Vec<Pred>) {
    match v {
        Val::Const(_) | Val::Len => {}
        Val::Load { base, offset, size } => {
            no_abort(base, out);
            let need = u64::from(*offset) + u64::from(size.bytes());
            match **base {
                Val::Const(b) => match u32::try_from(u64::from(b) + need) {
                    Ok(end) => out.push(Pred::cmp(CmpOp::Ge, Val::Len, Val::Const(end))),
                    Err(_) => out.push(Pred::False),
                },
                _ => match u32::try_from(need) {
                    // base <= len and need <= len - base: no wrap-around.
                    Ok(need) => {
                        out.push(Pred::cmp(CmpOp::Ge, Val::Len, (**base).clone()));
                        let room = Val::Bin(BinOp::Sub, Box::new(Val::Len), base.clone());
                        out.push(Pred::cmp(CmpOp::Ge, room, Val::Const(need)));
                    }
                    Err(_) => out.push(Pred::False),
                },
            }
        }
        Val::Bin(op, a, b) => {
            no_abort(a, out);
            no_abort(b, out);
            if matches!(op, BinOp::Div | BinOp::Mod) && !matches!(**b, Val::Const(k) if k != 0) {
                out.push(Pred::not(Pred::eq((**b).clone(), 0)));
            }
        }
        Val::Neg(a) => no_abort(a, out),
        Val::Shared(s) => no_abort(s.val(), out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_ir::Size;

    /// Never aborting, on every packet cut at every length: accepts where
    /// the filter accepts, and its tests mean what they meant where
    /// nothing aborts.
    #[test]
    fn a_filter_made_never_to_abort_accepts_what_it_accepted() {
        let ld = |o, s| Val::load_abs(o, s);
        let ihl = Val::shared(Val::ip_hdr_len(14));
        let port = Val::Load {
            base: Box::new(ihl),
            offset: 16,
            size: Size::Half,
        };
        let div = Val::Bin(BinOp::Div, Box::new(Val::Len), Box::new(ld(20, Size::Byte)));
        let preds = [
            Pred::eq(ld(12, Size::Half), 0x800),
            Pred::not(Pred::eq(ld(40, Size::Word), 7)),
            Pred::and(vec![
                Pred::eq(ld(12, Size::Half), 0x800),
                Pred::eq(port.clone(), 80),
            ]),
            Pred::not(Pred::and(vec![
                Pred::eq(port, 80),
                Pred::eq(ld(0, Size::Byte), 0),
            ])),
            Pred::cmp(CmpOp::Gt, div, Val::Const(3)),
            Pred::not(Pred::or(vec![
                Pred::eq(ld(30, Size::Byte), 1),
                Pred::eq(ld(2, Size::Byte), 2),
            ])),
        ];
        let mut frame = [0u8; 64];
        frame[12] = 8;
        frame[14] = 0x45;
        frame[20] = 3;
        frame[36..38].copy_from_slice(&80u16.to_be_bytes());
        for p in &preds {
            let safe = never_aborting(p, true);
            for cut in 0..=frame.len() {
                let f = &frame[..cut];
                let (want, got) = (
                    sluice_ir::eval_pred(p, f, cut as u32),
                    sluice_ir::eval_pred(&safe, f, cut as u32),
                );
                let got = got.expect("never aborts");
                // Where the filter aborts, anything goes.
                if let Ok(w) = want {
                    assert_eq!(got, w, "{p:?} at {cut}");
                }
            }
        }
    }
}
