//! Minimal reproductions of bugs the merging tests found, kept as
//! regression tests.

use sluice::LinkType;
use sluice_classifier::tree::DecisionTree;
use sluice_classifier::{Classifier, FilterId};
use sluice_ir::Filter;
use sluice_native::AutoClassifier;

fn filter(e: &str) -> Filter {
    sluice::pcap::compile(e, LinkType::EN10MB, 262_144).unwrap()
}

/// After `Auto` moves to the tree, each copy of the classifier replays
/// the log into a `NativeTree` of its own, each with its own code
/// generator (`T::empty()`), while `NativeTree::refresh` assumes the two
/// copies share one (as `sync_with` arranges for `NativeTreeClassifier`).
/// The copy that takes the code from the other at the first publish after
/// the move never compiled anything; at its next publish it compiles only
/// the units that changed since, on a code generator that knows none of
/// the others, and its readers miss filters (here filters 5 and 6 at the
/// 7th publish, 6 and 7 at the 8th).
#[test]
fn auto_classifier_keeps_every_filter_after_the_move_to_the_tree() {
    let mut c = AutoClassifier::default();
    let pkt = [1u8; 8];
    for k in 0..8u32 {
        c.insert(&filter(&format!("ether[{k}] = 1")), 0);
        c.publish();
        let want: Vec<FilterId> = (0..=k).map(FilterId).collect();
        assert_eq!(
            c.reader().classify(&pkt, 8),
            want,
            "after {} filters (tree: {:?})",
            k + 1,
            c.published(|e| e.is_tree())
        );
    }
}

/// `insert_keyed` with an empty key, like a one-path filter without an
/// equality test (`len > 100`): the classifier used to hand out an id the
/// tree never added (`DecisionTree::insert_key_block` refuses width 0);
/// under `Auto`, tuple space search added it and the move to the tree
/// dropped it. Now it is refused, as `insert_keys` refuses width 0.
#[test]
fn insert_keyed_with_an_empty_key() {
    let pkt = [0u8; 200];
    let mut t: Classifier<DecisionTree> = Classifier::default();
    let like = t.insert(&filter("len > 100"), 0);
    t.publish();
    assert_eq!(t.insert_keyed(like, &[], 0), None);
    if let Some(copy) = t.insert_keyed(like, &[], 0) {
        t.publish();
        assert_eq!(t.reader().classify(&pkt, 200), vec![like, copy], "tree");
    }
    // Under Auto: present in tuple space search, gone after the move.
    let mut c = Classifier::new();
    let like = c.insert(&filter("len > 100"), 0);
    c.publish();
    let copy = c.insert_keyed(like, &[], 0);
    c.publish();
    let before = c.reader().classify(&pkt, 200);
    for o in 0..6u32 {
        c.insert(&filter(&format!("ether[{o}] = 7")), 0);
    }
    c.publish();
    assert_eq!(c.published(|e| e.is_tree()), Some(true));
    assert_eq!(c.reader().classify(&pkt, 200), before, "copy {copy:?}");
}

/// A unit of the tree's code that reported after calling another unit
/// that had reported wrote past the output buffer: the caller reserved
/// room for its own reports once, at its start. Here the root's unit
/// calls the unit under key 1 of a table on `ether[0]` (40 reports) and
/// then reports up to 80 more from its own conditions; each packet goes
/// to a new reader, whose buffer has only the room the code reserves.
#[test]
fn reports_after_a_called_unit_stay_within_the_buffer() {
    let mut exprs: Vec<String> = (0..40)
        .map(|j| format!("ether[0] = 1 and ether[1] > {j}"))
        .collect();
    exprs.extend((2..40).map(|k| format!("ether[0] = {k}")));
    for o in 2..=5 {
        exprs.extend((0..20).map(|j| format!("ether[{o}] > {j}")));
    }
    let filters: Vec<Filter> = exprs.iter().map(|e| filter(e)).collect();
    let mut c = AutoClassifier::default();
    let ids: Vec<FilterId> = filters.iter().map(|f| c.insert(f, 0)).collect();
    c.settle();
    assert_eq!(c.published(|e| e.is_tree()), Some(true));
    for pkt in [
        [1u8, 255, 255, 255, 255, 255],
        [1, 255, 0, 255, 0, 255],
        [3, 255, 255, 255, 255, 255],
    ] {
        let mut want: Vec<FilterId> = ids
            .iter()
            .zip(&filters)
            .filter(|(_, f)| f.run(&pkt, 6) != 0)
            .map(|(id, _)| *id)
            .collect();
        want.sort_unstable();
        assert_eq!(c.reader().classify(&pkt, 6), want, "{pkt:?}");
    }
}
