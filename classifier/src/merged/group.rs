//! One group of [`Merged`](super::Merged): paths with the same guards and
//! the same key fields, as one hash table from key to filters.
//!
//! The rule: a key's filters are found from its slot alone. A key with
//! one filter keeps it in the slot (the filter plus one as the value, its
//! priority as the datum); a key with more names a list of them
//! (`MULTI + i`), and a list emptied to one filter folds back into the
//! slot. A group whose guards and key fields are all direct reads has a
//! [`Plan`] that reads them without the memo.

use crate::field::{Direct, FieldId};
use crate::path::Test;
use crate::table::KeyTable;
use sluice_ir::Pred;

/// A guard, compiled against the interned fields.
#[derive(Clone, Debug)]
pub(super) enum Guard {
    Field(FieldId, Test, bool),
    Pred(Pred, bool),
}

/// One filter's place in a group's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) filter: u32,
    pub(super) priority: i32,
}

/// Table values from here up are list indexes (plus `MULTI`); below, a
/// key's only filter (plus one) with its priority in the slot's datum word.
pub(super) const MULTI: u32 = 0x8000_0000;

impl Entry {
    /// The table value and datum of a key whose only filter this is.
    pub(super) fn single(self) -> Option<(u32, u32)> {
        (self.filter < MULTI - 1).then_some((self.filter + 1, self.priority as u32))
    }
}

/// The longest key read into a fixed buffer (longer ones use the memo path).
pub(super) const MAX_DIRECT_KEY: usize = 16;

/// A group whose guards and key fields are all [`Direct`] reads: checked and
/// read straight from the packet, without the memo.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub(super) guards: Vec<(Direct, Test, bool)>,
    pub(super) key: Vec<Direct>,
}

impl Plan {
    /// The key into `out`; false when a guard fails or a read aborts.
    #[inline]
    pub(super) fn key(&self, pkt: &[u8], out: &mut [u32; MAX_DIRECT_KEY]) -> bool {
        for (d, test, truth) in &self.guards {
            match d.read(pkt) {
                Some(v) if test.apply(v) == *truth => {}
                _ => return false,
            }
        }
        for (o, d) in out.iter_mut().zip(&self.key) {
            match d.read(pkt) {
                Some(v) => *o = v,
                None => return false,
            }
        }
        true
    }
}

/// Paths with the same guards and key fields.
#[derive(Clone, Debug)]
pub(super) struct Group {
    pub(super) guards: Vec<Guard>,
    pub(super) key: Vec<FieldId>,
    pub(super) plan: Option<Plan>,
    pub(super) table: KeyTable,
    /// The filters of keys with more than one (a table value `MULTI + i`
    /// names `lists[i]`).
    pub(super) lists: Vec<Vec<Entry>>,
    pub(super) free: Vec<u32>,
}

impl Group {
    /// Call `f` on every filter of a table value and datum.
    #[inline]
    pub(super) fn each(&self, v: u32, datum: u32, mut f: impl FnMut(Entry)) {
        if v < MULTI {
            f(Entry {
                filter: v - 1,
                priority: datum as i32,
            });
        } else {
            self.lists[(v - MULTI) as usize].iter().for_each(|e| f(*e));
        }
    }

    pub(super) fn new_list(&mut self, list: Vec<Entry>) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.lists[i as usize] = list;
                i
            }
            None => {
                self.lists.push(list);
                (self.lists.len() - 1) as u32
            }
        };
        assert!(i < MULTI - 1, "too many shared keys");
        MULTI + i
    }

    pub(super) fn free_list(&mut self, v: u32) {
        let i = v - MULTI;
        self.lists[i as usize] = Vec::new();
        self.free.push(i);
    }
}
