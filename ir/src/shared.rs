//! Values used in several places, held once: [`Shared`].
//!
//! The rule: a shared value means exactly its inner value, computed where
//! it is used (loads that may abort included), so every engine may treat
//! it as a copy of that value; it only says that the copies are one value
//! that an engine may compute once and reuse (the classic BPF back end
//! keeps it in a scratch register after its first use on a path). Without
//! it, a front end whose offsets are computed from earlier offsets (pcap's
//! `geneve` and `vxlan`, each reading headers behind the last one) builds
//! values whose size grows exponentially with the nesting.
//!
//! Comparing and hashing look at the inner value only through a hash kept
//! at construction, so values built on shared ones hash in time linear in
//! their own size; two shared values are equal if they are the same one
//! or their inner values are equal.
//!
//! ```
//! use sluice_ir::{BinOp, Size, Val};
//! let off = Val::shared(Val::bin(BinOp::Add, Val::load_abs(0, Size::Byte), Val::Const(4)));
//! assert!(matches!(off, Val::Shared(_)));
//! // Shared or not, it means its inner value.
//! assert_eq!(sluice_ir::eval_val(&off, &[3], 1), Ok(7));
//! ```

use crate::Val;
use std::cmp::Ordering;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// A value held once and used in several places ([`Val::Shared`]).
///
/// ```
/// use sluice_ir::{Shared, Val, Size};
/// let s = Shared::new(Val::Bin(sluice_ir::BinOp::Add, Box::new(Val::Len), Box::new(Val::Const(1))));
/// assert_eq!(s.clone(), s);
/// assert_eq!(s.val(), &Val::Bin(sluice_ir::BinOp::Add, Box::new(Val::Len), Box::new(Val::Const(1))));
/// ```
#[derive(Clone)]
pub struct Shared(Arc<Inner>);

struct Inner {
    val: Val,
    /// A hash of `val`, computed once.
    hash: u64,
    /// [`Val::known`] of `val`.
    known: Option<u32>,
    /// [`Val::can_abort`] of `val`.
    can_abort: bool,
    /// [`Val::upper_bound`] of `val`.
    upper: u64,
}

impl Shared {
    /// Holds `val` once.
    ///
    /// ```
    /// let s = sluice_ir::Shared::new(sluice_ir::Val::Len);
    /// assert_eq!(s.val(), &sluice_ir::Val::Len);
    /// ```
    pub fn new(val: Val) -> Shared {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        val.hash(&mut h);
        Shared(Arc::new(Inner {
            hash: h.finish(),
            known: val.known(),
            can_abort: val.can_abort(),
            upper: val.upper_bound(),
            val,
        }))
    }

    /// The value held.
    ///
    /// ```
    /// assert_eq!(sluice_ir::Shared::new(sluice_ir::Val::Const(3)).val(), &sluice_ir::Val::Const(3));
    /// ```
    pub fn val(&self) -> &Val {
        &self.0.val
    }

    /// An identity of this shared value, the same for all its clones
    /// (engines key what they computed by it).
    ///
    /// ```
    /// let s = sluice_ir::Shared::new(sluice_ir::Val::Len);
    /// assert_eq!(s.clone().id(), s.id());
    /// assert_ne!(sluice_ir::Shared::new(sluice_ir::Val::Len).id(), s.id());
    /// ```
    pub fn id(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    pub(crate) fn known(&self) -> Option<u32> {
        self.0.known
    }

    pub(crate) fn can_abort(&self) -> bool {
        self.0.can_abort
    }

    pub(crate) fn upper_bound(&self) -> u64 {
        self.0.upper
    }
}

impl PartialEq for Shared {
    fn eq(&self, other: &Shared) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || (self.0.hash == other.0.hash && self.0.val == other.0.val)
    }
}

impl Eq for Shared {}

impl Hash for Shared {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialOrd for Shared {
    fn partial_cmp(&self, other: &Shared) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Shared {
    fn cmp(&self, other: &Shared) -> Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return Ordering::Equal;
        }
        self.0
            .hash
            .cmp(&other.0.hash)
            .then_with(|| self.0.val.cmp(&other.0.val))
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Shared#{:08x}({:?})", self.0.hash as u32, self.0.val)
    }
}
