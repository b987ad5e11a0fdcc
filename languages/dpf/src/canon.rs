//! Canonicalisation: the seed's tree rewriting, so that equal filters
//! written differently become the same IR (and so merge in the classifier).
//!
//! 1. SHIFTs disappear: the message pointer is tracked as a variable part
//!    plus a constant, constant shifts are added to the offsets of later
//!    reads (the seed's "eliminates constant SHIFT operations"), and a read
//!    after an indirect shift becomes an IR load whose base is the shift's
//!    value. Address arithmetic wraps at 32 bits as in the interpreter; a
//!    constant is moved into the load's offset only where the value's range
//!    shows no wrap-around is possible.
//! 2. Values are rebuilt bottom-up: constants folded, chains of `+ * & | ^`
//!    flattened with their operands sorted and their constants combined,
//!    `x - k` written `x + (-k)`, masks cut to the bits the value can have
//!    (and dropped when they keep them all).
//! 3. Comparisons put the constant on the right; `x + k == c`, `x ^ k == c`,
//!    `x << k == c`, `x >> k == c` are solved for `x`; orderings against a
//!    constant become `x >= c` or its negation; atoms that cannot hold make
//!    the filter reject everything.
//! 4. Equality atoms on reads (masked or not) are split into bytes, merged
//!    (conflicting bytes: the filter rejects everything), and rebuilt as the
//!    widest reads over runs of adjacent bytes: the seed's atom coalescing,
//!    so `0:16 == a && 2:16 == b` and `0:32 == a << 16 | b` are one atom.
//! 5. Atoms are sorted (reads from the frame start first, by offset) and
//!    duplicates dropped.
//! 6. Reads whose bytes no remaining atom reads (from atoms that folded
//!    away, or from SHIFTs nothing uses) still bound the packet: the
//!    farthest byte of each base is kept as a guard `byte >= 0`, and so is
//!    a division no remaining atom performs (`x / y >= 0` aborts when `y`
//!    is 0), so the canonical filter rejects exactly the packets the
//!    interpreter rejects.

use crate::{Atom, Expr, Filter, Rel};
use sluice_ir::{BinOp, CmpOp, Pred, Size, Val};
use std::collections::BTreeMap;

const MAX: u32 = u32::MAX;

/// All ones up to the highest bit of `m`.
fn ones(m: u64) -> u32 {
    if m == 0 {
        0
    } else if m >= MAX as u64 {
        MAX
    } else {
        ((1u64 << (64 - m.leading_zeros())) - 1) as u32
    }
}

/// The bits `v` can have set (a superset).
fn bits_of(v: &Val) -> u32 {
    match v {
        Val::Const(k) => *k,
        Val::Bin(BinOp::And, a, b) => bits_of(a) & bits_of(b),
        v => ones(v.upper_bound()),
    }
}

fn identity(op: BinOp) -> u32 {
    match op {
        BinOp::Add | BinOp::Or | BinOp::Xor => 0,
        BinOp::Mul => 1,
        _ => MAX,
    }
}

fn flatten(v: Val, op: BinOp, out: &mut Vec<Val>) {
    match v {
        Val::Bin(o, a, b) if o == op => {
            flatten(*a, op, out);
            flatten(*b, op, out);
        }
        v => out.push(v),
    }
}

/// `a op b`, canonical.
fn mk(op: BinOp, a: Val, b: Val) -> Val {
    if let (Val::Const(x), Val::Const(y)) = (&a, &b) {
        if let Some(v) = op.apply(*x, *y) {
            return Val::Const(v);
        }
    }
    match op {
        BinOp::Sub => match b {
            Val::Const(k) => mk(BinOp::Add, a, Val::Const(k.wrapping_neg())),
            b => Val::Bin(op, Box::new(a), Box::new(b)),
        },
        BinOp::Add | BinOp::Mul | BinOp::And | BinOp::Or | BinOp::Xor => {
            let mut parts = Vec::new();
            flatten(a, op, &mut parts);
            flatten(b, op, &mut parts);
            let mut k = identity(op);
            let mut rest = Vec::new();
            for p in parts {
                match p {
                    Val::Const(c) => k = op.apply(k, c).unwrap_or(k),
                    p => rest.push(p),
                }
            }
            rest.sort();
            let absorbing = match op {
                BinOp::And | BinOp::Mul => k == 0,
                BinOp::Or => k == MAX,
                _ => false,
            };
            if absorbing && !rest.iter().any(Val::can_abort) {
                return Val::Const(k);
            }
            if op == BinOp::And && !rest.is_empty() {
                let possible = rest.iter().map(bits_of).fold(MAX, |a, b| a & b);
                k &= possible;
                if k == possible {
                    k = MAX;
                }
            }
            let mut it = rest.into_iter();
            let Some(first) = it.next() else {
                return Val::Const(k);
            };
            let acc = it.fold(first, |acc, x| Val::Bin(op, Box::new(acc), Box::new(x)));
            if k == identity(op) {
                acc
            } else {
                Val::Bin(op, Box::new(acc), Box::new(Val::Const(k)))
            }
        }
        BinOp::Shl | BinOp::Shr if b == Val::Const(0) => a,
        _ => Val::Bin(op, Box::new(a), Box::new(b)),
    }
}

fn neg(a: Val) -> Val {
    match a {
        Val::Const(k) => Val::Const(k.wrapping_neg()),
        Val::Neg(x) => *x,
        a => Val::Neg(Box::new(a)),
    }
}

/// The message pointer: `var + k`, wrapping.
#[derive(Clone)]
struct Ptr {
    var: Option<Val>,
    k: u32,
}

fn split(v: Val) -> (Option<Val>, u32) {
    match v {
        Val::Const(k) => (None, k),
        Val::Bin(BinOp::Add, x, c) if matches!(*c, Val::Const(_)) => {
            let Val::Const(k) = *c else { unreachable!() };
            (Some(*x), k)
        }
        v => (Some(v), 0),
    }
}

fn join(a: Option<Val>, b: Option<Val>) -> Option<Val> {
    match (a, b) {
        (Some(x), Some(y)) => Some(mk(BinOp::Add, x, y)),
        (x, None) | (None, x) => x,
    }
}

impl Ptr {
    /// The pointer moved by `v`.
    fn plus(&self, v: Val) -> Ptr {
        let (var, k) = split(v);
        Ptr {
            var: join(self.var.clone(), var),
            k: self.k.wrapping_add(k),
        }
    }

    /// A read of `size` at the pointer plus `addr`.
    fn load(&self, addr: Val, size: Size) -> Val {
        let at = self.plus(addr);
        match at.var {
            None => Val::load_abs(at.k, size),
            Some(v) if v.upper_bound() + at.k as u64 <= MAX as u64 => Val::Load {
                base: Box::new(v),
                offset: at.k,
                size,
            },
            Some(v) => Val::Load {
                base: Box::new(mk(BinOp::Add, v, Val::Const(at.k))),
                offset: 0,
                size,
            },
        }
    }
}

fn lower_expr(e: &Expr, ptr: &Ptr) -> Val {
    match e {
        Expr::Num(k) => Val::Const(*k),
        Expr::Load { addr, bits } => {
            let size = match bits {
                8 => Size::Byte,
                16 => Size::Half,
                _ => Size::Word,
            };
            ptr.load(lower_expr(addr, ptr), size)
        }
        Expr::Bin(op, a, b) => mk(*op, lower_expr(a, ptr), lower_expr(b, ptr)),
        Expr::Not(a) => mk(BinOp::Xor, lower_expr(a, ptr), Val::Const(MAX)),
        Expr::Neg(a) => neg(lower_expr(a, ptr)),
    }
}

/// Every sub-value whose evaluation can abort by itself: loads, and
/// divisions by something other than a non-zero constant.
fn loads(v: &Val, out: &mut Vec<Val>) {
    match v {
        Val::Load { base, .. } => {
            out.push(v.clone());
            loads(base, out);
        }
        Val::Bin(op, a, b) => {
            if matches!(op, BinOp::Div | BinOp::Mod) && !matches!(**b, Val::Const(k) if k != 0) {
                out.push(v.clone());
            }
            loads(a, out);
            loads(b, out);
        }
        Val::Neg(a) => loads(a, out),
        // (DPF makes no shared values.)
        Val::Shared(s) => loads(s.val(), out),
        Val::Const(_) | Val::Len => {}
    }
}

/// True if evaluating `v` always aborts (a division by the constant 0).
fn always_aborts(v: &Val) -> bool {
    match v {
        Val::Bin(op, a, b) => {
            matches!(op, BinOp::Div | BinOp::Mod) && **b == Val::Const(0)
                || always_aborts(a)
                || always_aborts(b)
        }
        Val::Load { base, .. } => always_aborts(base),
        Val::Neg(a) => always_aborts(a),
        _ => false,
    }
}

/// A comparison, canonical: `None` when it can never hold.
fn atom(rel: Rel, l: Val, r: Val) -> Option<Pred> {
    let (rel, mut l, r) = match (&l, &r) {
        (Val::Const(_), r) if !r.is_const() => {
            let mirrored = match rel {
                Rel::Lt => Rel::Gt,
                Rel::Gt => Rel::Lt,
                Rel::Le => Rel::Ge,
                Rel::Ge => Rel::Le,
                r => r,
            };
            (mirrored, r.clone(), l)
        }
        _ => (rel, l, r),
    };
    let t = |b: bool| if b { Some(Pred::True) } else { None };
    let Val::Const(mut c) = r else {
        return Some(match rel {
            Rel::Eq | Rel::Ne => {
                let (a, b) = if l <= r { (l, r) } else { (r, l) };
                let p = Pred::Cmp {
                    op: CmpOp::Eq,
                    lhs: a,
                    rhs: b,
                };
                if rel == Rel::Eq {
                    p
                } else {
                    Pred::not(p)
                }
            }
            Rel::Gt => Pred::cmp(CmpOp::Gt, l, r),
            Rel::Ge => Pred::cmp(CmpOp::Ge, l, r),
            Rel::Lt => Pred::cmp(CmpOp::Gt, r, l),
            Rel::Le => Pred::cmp(CmpOp::Ge, r, l),
        });
    };
    if let Val::Const(a) = l {
        return t(rel.apply(a, c));
    }
    match rel {
        Rel::Eq | Rel::Ne => {
            let ne = rel == Rel::Ne;
            // Solve for the inner value.
            loop {
                match l {
                    Val::Bin(BinOp::Add, x, k) if matches!(*k, Val::Const(_)) => {
                        let Val::Const(k) = *k else { unreachable!() };
                        c = c.wrapping_sub(k);
                        l = *x;
                    }
                    Val::Bin(BinOp::Xor, x, k) if matches!(*k, Val::Const(_)) => {
                        let Val::Const(k) = *k else { unreachable!() };
                        c ^= k;
                        l = *x;
                    }
                    Val::Neg(x) => {
                        c = c.wrapping_neg();
                        l = *x;
                    }
                    Val::Bin(BinOp::Shl, x, k) if matches!(*k, Val::Const(0..=31)) => {
                        let Val::Const(k) = *k else { unreachable!() };
                        if c & ((1u32 << k) - 1) != 0 {
                            return t(ne);
                        }
                        c >>= k;
                        l = mk(BinOp::And, *x, Val::Const(MAX >> k));
                    }
                    Val::Bin(BinOp::Shr, x, k) if matches!(*k, Val::Const(0..=31)) => {
                        let Val::Const(k) = *k else { unreachable!() };
                        if (c << k) >> k != c {
                            return t(ne);
                        }
                        c <<= k;
                        l = mk(BinOp::And, *x, Val::Const(MAX << k));
                    }
                    other => {
                        l = other;
                        break;
                    }
                }
            }
            if let Val::Const(a) = l {
                return t((a == c) != ne);
            }
            let impossible = c as u64 > l.upper_bound() || c & !bits_of(&l) != 0;
            if impossible {
                return t(ne);
            }
            let p = Pred::eq(l, c);
            Some(if ne { Pred::not(p) } else { p })
        }
        // Orderings become `l >= c` or its negation.
        Rel::Ge | Rel::Gt | Rel::Lt | Rel::Le => {
            let (bound, negated) = match rel {
                Rel::Ge => (Some(c), false),
                Rel::Gt => (c.checked_add(1), false),
                Rel::Lt => (Some(c), true),
                _ => (c.checked_add(1), true),
            };
            let max = l.upper_bound();
            match bound {
                // l > MAX never holds; l <= MAX always does.
                None => t(negated),
                Some(0) => t(!negated),
                Some(b) if b as u64 > max => t(negated),
                Some(b) => {
                    let p = Pred::Cmp {
                        op: CmpOp::Ge,
                        lhs: l,
                        rhs: Val::Const(b),
                    };
                    Some(if negated { Pred::not(p) } else { p })
                }
            }
        }
    }
}

/// An equality on a read: base, offset, width in bytes, mask, value.
fn field(p: &Pred) -> Option<(Val, u32, u32, u32, u32)> {
    let Pred::Cmp {
        op: CmpOp::Eq,
        lhs,
        rhs: Val::Const(c),
    } = p
    else {
        return None;
    };
    let (load, mask) = match lhs {
        Val::Bin(BinOp::And, x, m) => match **m {
            Val::Const(m) => (&**x, m),
            _ => return None,
        },
        l => (l, MAX),
    };
    match load {
        Val::Load { base, offset, size } => {
            let n = size.bytes();
            let width = if n == 4 { MAX } else { (1u32 << (8 * n)) - 1 };
            Some(((**base).clone(), *offset, n, mask & width, *c))
        }
        _ => None,
    }
}

fn read(base: &Val, offset: u32, size: Size) -> Val {
    match base {
        Val::Const(0) => Val::load_abs(offset, size),
        b => Val::Load {
            base: Box::new(b.clone()),
            offset,
            size,
        },
    }
}

/// The canonical IR predicate of a filter.
///
/// ```
/// use sluice_dpf::{parse, canonical};
/// let a = parse("(12:16 == 0x800) && SHIFT(14) && (9:8 == 6) && SHIFT(20) && (0:16 == 1234) && (2:16 == 4321)").unwrap();
/// let b = parse("(36:16 == 4321) && (34:32 == 1234 << 16 | 4321) && (6 == 23:8) && (12:8 == 8) && (13:8 == 0)").unwrap();
/// assert_eq!(canonical(&a), canonical(&b));
/// ```
pub fn canonical(f: &Filter) -> Pred {
    let mut ptr = Ptr { var: None, k: 0 };
    let mut required: Vec<Val> = Vec::new();
    let mut atoms: Vec<Pred> = Vec::new();
    for a in &f.atoms {
        match a {
            Atom::Shift(e) => {
                let v = lower_expr(e, &ptr);
                if always_aborts(&v) {
                    return Pred::False;
                }
                loads(&v, &mut required);
                ptr = ptr.plus(v);
            }
            Atom::Cmp(rel, l, r) => {
                let (l, r) = (lower_expr(l, &ptr), lower_expr(r, &ptr));
                if always_aborts(&l) || always_aborts(&r) {
                    return Pred::False;
                }
                loads(&l, &mut required);
                loads(&r, &mut required);
                match atom(*rel, l, r) {
                    None => return Pred::False,
                    Some(Pred::True) => {}
                    Some(p) => atoms.push(p),
                }
            }
        }
    }
    // Equalities on reads, byte by byte.
    let mut bytes: BTreeMap<(Val, u64), (u8, u8)> = BTreeMap::new();
    let mut generic = Vec::new();
    for p in atoms {
        let Some((base, offset, n, mask, value)) = field(&p) else {
            generic.push(p);
            continue;
        };
        if offset as u64 + n as u64 > MAX as u64 + 1 {
            // Past any address: always aborts.
            return Pred::False;
        }
        for i in 0..n {
            let shift = 8 * (n - 1 - i);
            let (m, v) = ((mask >> shift) as u8, (value >> shift) as u8);
            if m == 0 {
                continue;
            }
            let slot = bytes
                .entry((base.clone(), offset as u64 + i as u64))
                .or_insert((0, 0));
            if (slot.1 ^ v) & slot.0 & m != 0 {
                return Pred::False;
            }
            *slot = (slot.0 | m, slot.1 | (v & m));
        }
    }
    let mut out = Vec::new();
    let entries: Vec<((Val, u64), (u8, u8))> = bytes.into_iter().collect();
    let mut i = 0;
    while i < entries.len() {
        // A run of adjacent bytes on one base.
        let mut j = i + 1;
        while j < entries.len()
            && entries[j].0 .0 == entries[i].0 .0
            && entries[j].0 .1 == entries[j - 1].0 .1 + 1
        {
            j += 1;
        }
        let mut at = i;
        while at < j {
            let n = match j - at {
                4.. => 4,
                2 | 3 => 2,
                _ => 1,
            };
            let (mut mask, mut value) = (0u32, 0u32);
            for e in &entries[at..at + n] {
                mask = (mask << 8) | e.1 .0 as u32;
                value = (value << 8) | e.1 .1 as u32;
            }
            let size = Size::from_bytes(n as u32).unwrap_or(Size::Byte);
            let width = if n == 4 { MAX } else { (1u32 << (8 * n)) - 1 };
            let (base, offset) = &entries[at].0;
            let load = read(base, *offset as u32, size);
            let lhs = if mask == width {
                load
            } else {
                Val::Bin(BinOp::And, Box::new(load), Box::new(Val::Const(mask)))
            };
            out.push(Pred::eq(lhs, value));
            at += n;
        }
        i = j;
    }
    generic.sort();
    generic.dedup();
    out.extend(generic);
    // Bounds that no remaining atom checks.
    let mut done = Vec::new();
    for p in &out {
        let mut walk = |v: &Val| loads(v, &mut done);
        match p {
            Pred::Cmp { lhs, rhs, .. } => {
                walk(lhs);
                walk(rhs);
            }
            Pred::Not(q) => {
                if let Pred::Cmp { lhs, rhs, .. } = &**q {
                    walk(lhs);
                    walk(rhs);
                }
            }
            _ => {}
        }
    }
    let reach = |l: &Val| match l {
        Val::Load { base, offset, size } => {
            Some(((**base).clone(), *offset as u64 + size.bytes() as u64))
        }
        _ => None,
    };
    let mut farthest: BTreeMap<Val, u64> = BTreeMap::new();
    for (base, end) in required.iter().filter_map(reach) {
        let e = farthest.entry(base).or_insert(0);
        *e = (*e).max(end);
    }
    let mut covered: BTreeMap<Val, u64> = BTreeMap::new();
    for (base, end) in done.iter().filter_map(reach) {
        let e = covered.entry(base).or_insert(0);
        *e = (*e).max(end);
    }
    // Divisions that no remaining atom performs.
    let mut divisions: Vec<&Val> = required.iter().filter(|v| !v.is_load()).collect();
    divisions.sort();
    divisions.dedup();
    for d in divisions {
        if !done.contains(d) {
            out.push(Pred::Cmp {
                op: CmpOp::Ge,
                lhs: d.clone(),
                rhs: Val::Const(0),
            });
        }
    }
    for (base, end) in farthest {
        if end > MAX as u64 + 1 {
            // Past any address: always aborts.
            return Pred::False;
        }
        if covered.get(&base).is_some_and(|&c| c >= end) {
            continue;
        }
        out.push(Pred::Cmp {
            op: CmpOp::Ge,
            lhs: read(&base, (end - 1) as u32, Size::Byte),
            rhs: Val::Const(0),
        });
    }
    Pred::and(out)
}
