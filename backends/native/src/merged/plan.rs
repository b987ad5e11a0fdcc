//! What the code generator makes of a group: paths of conditions on
//! field reads, each with an action (report a key of a small group, or
//! probe a large group's table), and the cluster whose function the group
//! joins.
//!
//! The rule: plain data, no code. A group whose guards or key fields the
//! generator cannot express is left to the Rust path ([`Plan::Fallback`]),
//! so a plan never changes an answer.

use super::raw::Layout;
use sluice_classifier::merged::{FieldRead, GroupView, GuardView, Slot};
use sluice_classifier::path::Test;
use sluice_ir::Val;

/// `in` sets in guards with more keys than this are left to the Rust path.
const MAX_IN_KEYS: usize = 64;

/// A field read the code generator handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum R {
    /// `size` bytes at a fixed offset.
    Abs { off: u32, size: u8 },
    /// `size` bytes at `4 * (pkt[hdr] & 0xf) + off`.
    Rel { hdr: u32, off: u32, size: u8 },
    /// The wire length.
    Len,
    /// A constant.
    Const(u32),
}

impl R {
    pub(super) fn of(read: FieldRead<'_>) -> Option<R> {
        match read {
            FieldRead::Direct(d) => Some(R::at(d.header(), d.offset(), d.size())),
            FieldRead::Value(Val::Len) => Some(R::Len),
            FieldRead::Value(Val::Const(k)) => Some(R::Const(*k)),
            FieldRead::Value(_) => None,
        }
    }

    /// `size` bytes at `off`, behind the IPv4 header whose first byte is
    /// at `hdr` when there is one.
    pub(super) fn at(hdr: Option<u32>, off: u32, size: u32) -> R {
        let size = size as u8;
        match hdr {
            None => R::Abs { off, size },
            Some(hdr) => R::Rel { hdr, off, size },
        }
    }

    /// Bytes loaded (0 for `len` and constants).
    pub(super) fn size(self) -> u32 {
        match self {
            R::Abs { size, .. } | R::Rel { size, .. } => size as u32,
            R::Len | R::Const(_) => 0,
        }
    }

    /// `k` as the raw (host-order) value a load of this field gives when
    /// the field equals `k` ([`crate::raw_const`]; `len` and constants are
    /// not loads); `None` if the field can never equal `k`.
    pub(super) fn raw(self, k: u32) -> Option<u32> {
        match self.size() {
            s @ (1 | 2 | 4) => crate::raw_const(k, s),
            _ => Some(k),
        }
    }

    /// A mask for a raw value ([`crate::raw_mask`]).
    pub(super) fn raw_mask(self, m: u32) -> u32 {
        match self.size() {
            s @ (1 | 2 | 4) => crate::raw_mask(m, s),
            _ => m,
        }
    }
}

/// One condition of a path: the field reads without aborting and, with a
/// test, the test gives `truth`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Cond {
    pub(super) r: R,
    pub(super) test: Option<Test>,
    pub(super) truth: bool,
}

/// What a path does when all its conditions hold.
#[derive(Clone, Debug)]
pub(super) enum Action {
    /// Report a key of a small group.
    Hit { group: u32, slot: Slot },
    /// Hash the key fields (read by the path's conditions) and probe the
    /// group's table, or with a layout its
    /// [`RawTable`](super::raw::RawTable) (the path's conditions read the
    /// layout's loads instead of the fields).
    Probe {
        group: u32,
        key: Vec<R>,
        raw: Option<Layout>,
    },
}

/// A path of a cluster: a key of a small group, or a whole large group.
#[derive(Clone, Debug)]
pub(super) struct Item {
    pub(super) conds: Vec<Cond>,
    pub(super) action: Action,
}

impl R {
    /// This read when the IPv4 header whose first byte is at `hdr` is
    /// `words` 32-bit words long: behind it, a fixed offset (`None` if
    /// that offset does not fit 32 bits).
    fn with_ipv4_words(self, hdr: u32, words: u32) -> Option<R> {
        match self {
            R::Rel { hdr: h, off, size } if h == hdr => Some(R::Abs {
                off: off.checked_add(4 * words)?,
                size,
            }),
            r => Some(r),
        }
    }

    /// The first byte of the IPv4 header this reads behind, if it does.
    fn ipv4_header(self) -> Option<u32> {
        match self {
            R::Rel { hdr, .. } => Some(hdr),
            _ => None,
        }
    }
}

impl Item {
    /// Every field read of the path: its conditions', then its action's.
    fn reads(&self) -> impl Iterator<Item = R> + '_ {
        let (key, layout): (&[R], _) = match &self.action {
            Action::Probe { key, raw, .. } => (key, raw.as_ref()),
            Action::Hit { .. } => (&[], None),
        };
        let packed = layout.into_iter().flat_map(|l| {
            let loads = l.loads.iter().map(|ld| ld.r);
            loads.chain(l.fixed.iter().map(|f| f.0))
        });
        let conds = self.conds.iter().map(|c| c.r);
        conds.chain(key.iter().copied()).chain(packed)
    }

    /// The path when the IPv4 header at `hdr` is `words` words long
    /// ([`R::with_ipv4_words`]); the caller checked that every offset fits.
    pub(super) fn with_ipv4_words(&self, hdr: u32, words: u32) -> Item {
        let fix = |r: R| r.with_ipv4_words(hdr, words).unwrap_or(r);
        let conds = self
            .conds
            .iter()
            .map(|c| Cond {
                r: fix(c.r),
                ..c.clone()
            })
            .collect();
        let action = match &self.action {
            Action::Probe { group, key, raw } => Action::Probe {
                group: *group,
                key: key.iter().map(|&r| fix(r)).collect(),
                raw: raw.as_ref().map(|l| l.with_reads(fix)),
            },
            a => a.clone(),
        };
        Item { conds, action }
    }
}

/// The first byte of the IPv4 header that every path reads behind, when
/// they all read behind the same one (and every offset behind it still
/// fits 32 bits for a header of 5 words): where
/// [`Gen::emit_top`](super::emit::Gen::emit_top) emits a version of the
/// code for a header of 5 words.
pub(super) fn common_ipv4_header(items: &[Item]) -> Option<u32> {
    let hdr = items.first()?.reads().find_map(R::ipv4_header)?;
    let all = items.iter().all(|it| {
        it.reads().any(|r| r.ipv4_header() == Some(hdr))
            && it.reads().all(|r| r.with_ipv4_words(hdr, 5).is_some())
    });
    all.then_some(hdr)
}

/// What a group's code was built from (equal signatures: the same code).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum GroupSig {
    /// Keys as immediates: every key and its slot, sorted.
    Small(u32, Vec<(Vec<u32>, Slot)>),
    /// A table probe, with the packed layout it uses (if any).
    Large(u32, Option<Layout>),
}

/// How a group is handled.
pub(super) enum Plan {
    /// No keys: matches nothing.
    Empty,
    /// The Rust path.
    Fallback,
    /// Code: the cluster key, the signature and the paths.
    Code(ClusterKey, GroupSig, Vec<Item>),
}

/// Groups testing the same field (and the same value of it) share a function.
pub(super) type ClusterKey = (Option<R>, Option<u32>);

/// The group's guards as conditions, `None` if one cannot be compiled.
fn guard_conds(g: &GroupView<'_>) -> Option<Vec<Cond>> {
    g.guards()
        .into_iter()
        .map(|gv| match gv {
            GuardView::Field {
                read, test, truth, ..
            } => {
                if let Test::In(keys) = test {
                    if keys.sorted().len() > MAX_IN_KEYS {
                        return None;
                    }
                }
                Some(Cond {
                    r: R::of(read)?,
                    test: Some(test.clone()),
                    truth,
                })
            }
            GuardView::Pred { .. } => None,
        })
        .collect()
}

/// How group `g` is handled: keys in code when it has at most `small`,
/// else a probe of its packed table when it has one (`packed`: its
/// layout), else of its own table.
pub(super) fn plan_group(g: &GroupView<'_>, small: usize, packed: Option<&Layout>) -> Plan {
    if g.is_empty() {
        return Plan::Empty;
    }
    let Some(guards) = guard_conds(g) else {
        return Plan::Fallback;
    };
    let Some(key) = g
        .key_fields()
        .into_iter()
        .map(|(_, r)| R::of(r))
        .collect::<Option<Vec<R>>>()
    else {
        return Plan::Fallback;
    };
    let id = g.id();
    if g.len() <= small {
        let mut keys: Vec<(Vec<u32>, Slot)> = g.keys().map(|(k, s)| (k.to_vec(), s)).collect();
        keys.sort_by(|a, b| a.0.cmp(&b.0));
        let items: Vec<Item> = keys
            .iter()
            .map(|(k, slot)| {
                let mut conds = guards.clone();
                conds.extend(key.iter().zip(k).map(|(r, &w)| Cond {
                    r: *r,
                    test: Some(Test::Eq(w)),
                    truth: true,
                }));
                Item {
                    conds,
                    action: Action::Hit {
                        group: id,
                        slot: *slot,
                    },
                }
            })
            .collect();
        // Cluster by the lowest fixed-offset field every key tests, and its
        // value when every key has the same.
        let first = key
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, R::Abs { .. }))
            .min_by_key(|(_, r)| **r);
        let cluster = match first {
            Some((i, r)) => {
                let v = keys[0].0[i];
                let same = keys.iter().all(|(k, _)| k[i] == v);
                (Some(*r), same.then_some(v))
            }
            None => (None, None),
        };
        Plan::Code(cluster, GroupSig::Small(id, keys), items)
    } else {
        let raw = packed.cloned();
        let mut conds = guards;
        let reads: Vec<R> = match &raw {
            Some(l) => {
                // Fields every key has the same value of are tested here.
                conds.extend(l.fixed.iter().map(|&(r, v)| Cond {
                    r,
                    test: Some(Test::Eq(v)),
                    truth: true,
                }));
                l.loads.iter().map(|l| l.r).collect()
            }
            None => key.clone(),
        };
        conds.extend(reads.into_iter().map(|r| Cond {
            r,
            test: None,
            truth: true,
        }));
        let first = conds
            .iter()
            .filter(|c| matches!(c.r, R::Abs { .. }))
            .map(|c| c.r)
            .min();
        Plan::Code(
            (first, None),
            GroupSig::Large(id, raw.clone()),
            vec![Item {
                conds,
                action: Action::Probe {
                    group: id,
                    key,
                    raw,
                },
            }],
        )
    }
}
