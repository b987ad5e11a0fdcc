//! What the cache learns of the tree's changes: the log of them with its
//! stamps ([`ChangeLog`]), and whether a change may touch a cached flow
//! (an inserted path or key block that may match it).
//!
//! Rule: a flow is dropped whenever a change may match it; a test on a
//! field the flow did not read counts as "may".

use super::key::ABORT;
use super::LOG_LEN;
use crate::tree::field::FieldId;
use crate::tree::node::Item;
use crate::tree::Template;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// One change of the tree, as the cache needs to know it.
#[derive(Clone, Debug)]
pub(crate) enum Logged {
    /// A filter inserted by its paths (items in field order).
    Paths(Arc<Vec<Vec<Item>>>),
    /// A block of key-only copies: the template's items and which of them
    /// take key words, and the keys (`width` words each).
    Keys(Arc<Template>, Arc<[u32]>),
    /// The filter in this slot removed.
    Removed(u32),
    /// A filter that runs whole inserted (never cached: nothing to drop).
    Whole,
}

/// The tree's recent changes, each with the stamp after it (see the
/// module doc).
#[derive(Clone, Debug, Default)]
pub struct ChangeLog {
    stamp: u64,
    entries: VecDeque<(u64, Logged)>,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl ChangeLog {
    /// The stamp of the tree as it is: equal stamps mean equal histories
    /// (the changes, their filters and keys, in the same order).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::tree::flow::ChangeLog::default().stamp(), 0);
    /// ```
    pub fn stamp(&self) -> u64 {
        self.stamp
    }

    /// Record a change; `what` sums up its content.
    pub(crate) fn record(&mut self, what: impl Hash, change: Logged) {
        let mut h = rustc_hash::FxHasher::default();
        what.hash(&mut h);
        self.stamp = mix(self.stamp ^ mix(h.finish()).wrapping_add(0x9e37_79b9_7f4a_7c15));
        if self.entries.len() == LOG_LEN {
            self.entries.pop_front();
        }
        self.entries.push_back((self.stamp, change));
    }

    /// The changes after `stamp`, or `None` if it is not in the log.
    pub(super) fn since(&self, stamp: u64) -> Option<impl Iterator<Item = &Logged>> {
        let at = match self.entries.iter().position(|(s, _)| *s == stamp) {
            Some(i) => i + 1,
            None => return None,
        };
        Some(self.entries.iter().skip(at).map(|(_, c)| c))
    }
}

/// Does `v` (a value or [`ABORT`]) meet the item? `None` when the entry
/// did not read the field (the flow may go either way).
pub(super) fn item_holds(fields: &[FieldId], key: &[u64], item: &Item) -> Option<bool> {
    let at = fields.binary_search(&item.field).ok()?;
    let v = key[at];
    Some(v != ABORT && item.label.holds(v as u32))
}

/// May a path (all its items must hold) match a packet of the flow?
pub(super) fn path_may_match(fields: &[FieldId], key: &[u64], items: &[Item]) -> bool {
    items
        .iter()
        .all(|i| item_holds(fields, key, i) != Some(false))
}

/// A block of key-only copies, ready to test flows against.
pub(super) struct KeyBlock<'a> {
    items: &'a [Item],
    at: &'a [usize],
    keys: rustc_hash::FxHashSet<&'a [u32]>,
}

impl<'a> KeyBlock<'a> {
    /// `None` when the template has no fast form (then it was inserted by
    /// its paths, and logged as such).
    pub(super) fn new(t: &'a Template, keys: &'a [u32]) -> Option<KeyBlock<'a>> {
        let (items, at) = t.fast.as_ref()?;
        Some(KeyBlock {
            items,
            at,
            keys: keys.chunks_exact(t.width.max(1)).collect(),
        })
    }

    /// May a copy with one of the keys match a packet of the flow?
    pub(super) fn may_match(&self, fields: &[FieldId], key: &[u64], word: &mut Vec<u32>) -> bool {
        // The items without keys first: most flows fail one of them.
        for (i, item) in self.items.iter().enumerate() {
            if !self.at.contains(&i) && item_holds(fields, key, item) == Some(false) {
                return false;
            }
        }
        word.clear();
        for &i in self.at {
            match fields.binary_search(&self.items[i].field) {
                Ok(p) if key[p] == ABORT => return false,
                Ok(p) => word.push(key[p] as u32),
                // A key field the flow did not read: any key may match.
                Err(_) => return true,
            }
        }
        self.keys.contains(&word[..])
    }
}
