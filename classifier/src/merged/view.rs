//! The code generator's view of [`Merged`]: the contract between this
//! classifier and a back end that compiles its groups (`sluice-native`).
//!
//! A generator reads each group through a [`GroupView`] (its guards, its
//! key fields and how each is read, its keys and their [`Slot`]s, its
//! table), decodes slots with [`Merged::each_slot_filter`], and leaves to
//! the Rust path what it does not compile ([`Merged::match_groups`], the
//! filters that run whole: [`Merged::whole_matches`],
//! [`Merged::first_with_whole`]; [`better`] ranks matches). The rule: all
//! of it is read only, and code built from it gives exactly
//! [`Merged::classify`]'s and [`Merged::classify_first`]'s answers.

use super::group::{Group, Guard, MAX_DIRECT_KEY, MULTI};
use super::{Merged, Scratch};
use crate::field::{Direct, FieldId};
use crate::merged::Whole;
use crate::path::Test;
use crate::table::{hash, KeyTable};
use sluice_ir::Pred;

/// How a group's field is read, for code generators: a [`Direct`] read
/// (a fixed offset, or an offset past an IPv4 header), or any other IR
/// value (a constant, `len`, a computed address).
///
/// ```
/// use sluice_classifier::merged::{FieldRead, Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(12, Size::Half), 0x800), 1)), 0);
/// let g = m.group_view(0).unwrap();
/// assert!(matches!(g.key_fields()[0].1, FieldRead::Direct(_)));
/// ```
#[derive(Clone, Copy, Debug)]
pub enum FieldRead<'a> {
    /// One bounds-checked load.
    Direct(Direct),
    /// Any other value (evaluated as the IR's reference interpreter does).
    Value(&'a sluice_ir::Val),
}

/// One guard of a group, as [`GroupView::guards`] describes it.
///
/// ```
/// use sluice_classifier::merged::{GuardView, Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// let p = Pred::not(Pred::eq(Val::load_abs(0, Size::Byte), 7));
/// m.insert(0, &Compiled::new(Filter::new(p, 1)), 0);
/// let g = m.group_view(0).unwrap();
/// assert!(matches!(g.guards()[0], GuardView::Field { truth: false, .. }));
/// ```
#[derive(Clone, Debug)]
pub enum GuardView<'a> {
    /// `test(field) == truth`, the field read without aborting.
    Field {
        /// The interned field (equal ids: the same value).
        field: FieldId,
        /// How it is read.
        read: FieldRead<'a>,
        /// The test.
        test: &'a Test,
        /// The outcome the group needs.
        truth: bool,
    },
    /// A predicate (computed comparison, protochain) that must give
    /// `truth` without aborting.
    Pred {
        /// The predicate.
        pred: &'a Pred,
        /// The outcome the group needs.
        truth: bool,
    },
}

/// A table value and its datum: where a key's filters are found
/// ([`Merged::each_slot_filter`]).
///
/// ```
/// let s = sluice_classifier::merged::Slot { value: 1, datum: 0 };
/// assert_eq!(s.value, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The table's value word (never 0 or `u32::MAX`).
    pub value: u32,
    /// The datum word next to it.
    pub datum: u32,
}

impl Slot {
    /// Table values below this name one filter (`value - 1`, with its
    /// priority in the datum word); from here up, a list of filters. Code
    /// generators that decode slots themselves test against it.
    ///
    /// ```
    /// use sluice_classifier::merged::Slot;
    /// assert!(Slot { value: 1, datum: 0 }.value < Slot::LIST_BASE);
    /// ```
    pub const LIST_BASE: u32 = MULTI;

    /// The key's only filter, if it has exactly one (else its filters are
    /// a list: [`Merged::each_slot_filter`]).
    ///
    /// ```
    /// use sluice_classifier::merged::Slot;
    /// assert_eq!(Slot { value: 8, datum: 0 }.single_filter(), Some(7));
    /// assert_eq!(Slot { value: Slot::LIST_BASE, datum: 0 }.single_filter(), None);
    /// ```
    pub fn single_filter(self) -> Option<u32> {
        (self.value < MULTI).then(|| self.value - 1)
    }
}

/// A read-only description of one group: its guards, its key fields and
/// its keys. A packet matches a key of the group when every guard holds,
/// every key field reads without aborting, and the fields' values equal the
/// key word for word; the key's filters then accept it.
///
/// ```
/// use sluice_classifier::merged::{Merged, Compiled};
/// use sluice_ir::{Filter, Pred, Val, Size};
/// let mut m = Merged::default();
/// m.insert(0, &Compiled::new(Filter::new(Pred::eq(Val::load_abs(2, Size::Half), 80), 1)), 3);
/// let g = m.group_view(0).unwrap();
/// assert_eq!(g.len(), 1);
/// let (key, slot) = g.keys().next().unwrap();
/// assert_eq!(key, &[80]);
/// let mut f = vec![];
/// m.each_slot_filter(0, slot, |id, prio| f.push((id, prio)));
/// assert_eq!(f, vec![(0, 3)]);
/// ```
#[derive(Clone, Copy, Debug)]
pub struct GroupView<'a> {
    m: &'a Merged,
    g: &'a Group,
    id: u32,
}

impl<'a> GroupView<'a> {
    /// The group's index (stable: groups are never renumbered).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().id(), 0);
    /// ```
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The guards, in the group's canonical order.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(m.group_view(0).unwrap().guards().is_empty());
    /// ```
    pub fn guards(&self) -> Vec<GuardView<'a>> {
        let m = self.m;
        self.g
            .guards
            .iter()
            .map(|g| match g {
                Guard::Field(f, test, truth) => GuardView::Field {
                    field: *f,
                    read: m.field_read(*f),
                    test,
                    truth: *truth,
                },
                Guard::Pred(pred, truth) => GuardView::Pred {
                    pred,
                    truth: *truth,
                },
            })
            .collect()
    }

    /// The key fields, in key order, each with how it is read.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert!(m.group_view(0).unwrap().key_fields().is_empty());
    /// ```
    pub fn key_fields(&self) -> Vec<(FieldId, FieldRead<'a>)> {
        self.g
            .key
            .iter()
            .map(|f| (*f, self.m.field_read(*f)))
            .collect()
    }

    /// Number of distinct keys in the table.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.g.table.len()
    }

    /// True when the group has no keys (it matches nothing).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// m.remove(0);
    /// assert!(m.group_view(0).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.g.table.is_empty()
    }

    /// Every key with its slot, in table order.
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().keys().count(), 1);
    /// ```
    pub fn keys(&self) -> impl Iterator<Item = (&'a [u32], Slot)> + 'a {
        self.g
            .table
            .words()
            .chunks_exact(self.g.table.width() + 2)
            .filter(|s| s[0] != 0 && s[0] != u32::MAX)
            .map(|s| {
                (
                    &s[2..],
                    Slot {
                        value: s[0],
                        datum: s[1],
                    },
                )
            })
    }

    /// The group's hash table (data a code generator may probe itself:
    /// [`KeyTable::words`]).
    ///
    /// ```
    /// let mut m = sluice_classifier::merged::Merged::default();
    /// m.insert(0, &sluice_classifier::merged::Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// assert_eq!(m.group_view(0).unwrap().table().width(), 0);
    /// ```
    pub fn table(&self) -> &'a KeyTable {
        &self.g.table
    }
}

impl Merged {
    fn field_read(&self, f: FieldId) -> FieldRead<'_> {
        match self.fields.direct(f) {
            Some(d) => FieldRead::Direct(d),
            None => FieldRead::Value(self.fields.val(f)),
        }
    }

    /// A group's description, `None` past the last group.
    ///
    /// ```
    /// assert!(sluice_classifier::merged::Merged::default().group_view(0).is_none());
    /// ```
    pub fn group_view(&self, group: u32) -> Option<GroupView<'_>> {
        self.groups.get(group as usize).map(|g| GroupView {
            m: self,
            g,
            id: group,
        })
    }

    /// Every group's description, by index.
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().group_views().count(), 0);
    /// ```
    pub fn group_views(&self) -> impl Iterator<Item = GroupView<'_>> {
        self.groups.iter().enumerate().map(|(i, g)| GroupView {
            m: self,
            g,
            id: i as u32,
        })
    }

    /// The filters that run whole, in winning order: (id, priority, how).
    ///
    /// ```
    /// assert_eq!(sluice_classifier::merged::Merged::default().whole_filters().count(), 0);
    /// ```
    pub fn whole_filters(&self) -> impl Iterator<Item = (u32, i32, &Whole)> {
        self.whole.iter().map(|w| (w.filter, w.priority, &w.whole))
    }

    /// Call `f(filter, priority)` for every filter of a group's slot (as
    /// found in [`GroupView::keys`] or by probing the group's table).
    ///
    /// ```
    /// use sluice_classifier::merged::{Compiled, Merged};
    /// let mut m = Merged::default();
    /// m.insert(2, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 9);
    /// let (_, slot) = m.group_view(0).unwrap().keys().next().unwrap();
    /// let mut seen = Vec::new();
    /// m.each_slot_filter(0, slot, |f, p| seen.push((f, p)));
    /// assert_eq!(seen, [(2, 9)]);
    /// ```
    #[inline]
    pub fn each_slot_filter(&self, group: u32, slot: Slot, mut f: impl FnMut(u32, i32)) {
        if let Some(g) = self.groups.get(group as usize) {
            if let Some(filter) = slot.single_filter() {
                f(filter, slot.datum as i32);
            } else if let Some(list) = g.lists.get((slot.value - MULTI) as usize) {
                list.iter().for_each(|e| f(e.filter, e.priority));
            }
        }
    }

    /// The Rust path for some groups only (those a code generator left
    /// out): `f(group, slot)` for each listed group whose key the packet
    /// matches.
    ///
    /// ```
    /// use sluice_classifier::merged::{Merged, Compiled};
    /// let mut m = Merged::default();
    /// m.insert(0, &Compiled::new(sluice_ir::Filter::new(sluice_ir::Pred::True, 1)), 0);
    /// let mut hits = vec![];
    /// m.match_groups(&[0], &[], 0, &mut Default::default(), |g, s| hits.push((g, s)));
    /// assert_eq!(hits.len(), 1);
    /// ```
    #[inline]
    pub fn match_groups(
        &self,
        groups: &[u32],
        pkt: &[u8],
        wirelen: u32,
        s: &mut Scratch,
        mut f: impl FnMut(u32, Slot),
    ) {
        s.memo.next_packet(self.fields.len());
        let mut buf = [0u32; MAX_DIRECT_KEY];
        for &gi in groups {
            let Some(g) = self.groups.get(gi as usize) else {
                continue;
            };
            if g.table.is_empty() {
                continue;
            }
            let Some(key) = self.group_key(g, pkt, wirelen, &mut s.memo, &mut buf, &mut s.key)
            else {
                continue;
            };
            if let Some((value, datum)) = g.table.entry_hashed(key, hash(key)) {
                f(gi, Slot { value, datum });
            }
        }
    }

    /// Append every filter that runs whole and accepts the packet to `out`
    /// (the part of [`Merged::classify`] after the groups).
    ///
    /// ```
    /// let mut out = vec![];
    /// sluice_classifier::merged::Merged::default().whole_matches(&[], 0, &mut out);
    /// assert!(out.is_empty());
    /// ```
    pub fn whole_matches(&self, pkt: &[u8], wirelen: u32, out: &mut Vec<u32>) {
        for w in &self.whole {
            if w.whole.run(pkt, wirelen) != 0 {
                out.push(w.filter);
            }
        }
    }

    /// The winner of [`Merged::classify_first`] given the best (filter,
    /// priority) among the groups' matches: the filters that run whole are
    /// tried in winning order, stopping as soon as none can win.
    ///
    /// ```
    /// let m = sluice_classifier::merged::Merged::default();
    /// assert_eq!(m.first_with_whole(&[], 0, Some((3, 1))), Some((3, 1)));
    /// ```
    pub fn first_with_whole(
        &self,
        pkt: &[u8],
        wirelen: u32,
        best: Option<(u32, i32)>,
    ) -> Option<(u32, i32)> {
        let mut best = best;
        for w in &self.whole {
            let e = (w.priority, std::cmp::Reverse(w.filter));
            if let Some((bf, bp)) = best {
                if e < (bp, std::cmp::Reverse(bf)) {
                    break;
                }
            }
            if w.whole.run(pkt, wirelen) != 0 {
                if better(best, w.filter, w.priority) {
                    best = Some((w.filter, w.priority));
                }
                break;
            }
        }
        best
    }
}

/// Does (filter, priority) beat the best so far in first-match order
/// (higher priority, then lower id)?
///
/// ```
/// use sluice_classifier::merged::better;
/// assert!(better(None, 5, 0));
/// assert!(better(Some((5, 0)), 3, 0));
/// assert!(!better(Some((5, 1)), 3, 0));
/// ```
#[inline]
pub fn better(best: Option<(u32, i32)>, filter: u32, priority: i32) -> bool {
    match best {
        None => true,
        Some((bf, bp)) => (priority, std::cmp::Reverse(filter)) > (bp, std::cmp::Reverse(bf)),
    }
}
