//! What libpcap's optimiser refuses when it runs: arithmetic whose right
//! operand folds to a constant it cannot use. libpcap's code generator only
//! looks at the first instruction of the right operand (see
//! [`super::arith`]); its optimiser, which propagates constants and reduces
//! `x & 0` and `x * 0` to 0, then finds `x % (8 % 4)` ("modulus by zero")
//! and `x >> (1 + 40)` ("shift by more than 31 bits").
//!
//! ```
//! use sluice_pcap::{compile_options, link::LinkType, Options};
//! let opt = Options::new(1);
//! let e = compile_options("ip[0] % (8 % 4) = 1", LinkType::RAW, &opt).unwrap_err();
//! assert!(e.to_string().contains("modulus by zero"));
//! let unopt = Options { optimize: false, ..Options::new(1) };
//! assert!(compile_options("ip[0] % (8 % 4) = 1", LinkType::RAW, &unopt).is_ok());
//! ```

use super::{err, GResult};
use crate::ast::Span;
use sluice_ir::{BinOp, Pred, Val};

/// Refuse `pred` as libpcap's optimiser would refuse its program.
pub(crate) fn refusals(pred: &Pred, span: Span) -> GResult<()> {
    match pred {
        Pred::True | Pred::False => Ok(()),
        Pred::Cmp { lhs, rhs, .. } => {
            value(lhs, span)?;
            value(rhs, span)
        }
        Pred::Not(p) => refusals(p, span),
        Pred::And(ps) | Pred::Or(ps) => ps.iter().try_for_each(|p| refusals(p, span)),
        Pred::In { val, .. } => value(val, span),
        Pred::ProtoChain { start, .. } => value(start, span),
    }
}

fn value(v: &Val, span: Span) -> GResult<()> {
    match v {
        Val::Const(_) | Val::Len => Ok(()),
        Val::Load { base, .. } => value(base, span),
        Val::Neg(x) => value(x, span),
        Val::Bin(op, a, b) => {
            value(a, span)?;
            value(b, span)?;
            match (op, b.known()) {
                (BinOp::Div, Some(0)) => err(span, "division by zero"),
                (BinOp::Mod, Some(0)) => err(span, "modulus by zero"),
                (BinOp::Shl | BinOp::Shr, Some(k)) if k > 31 => {
                    err(span, format!("shift by more than 31 bits ({k})"))
                }
                _ => Ok(()),
            }
        }
    }
}
