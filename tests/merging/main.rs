//! The merged engines for heterogeneous filter sets (issue 22) against
//! each filter run alone and against libpcap: the decision tree
//! (`DecisionTree`, and as machine code, `NativeTree`), the default
//! engine (`Auto`: tuple space search, then the tree; `NativeAuto`,
//! `AutoClassifier`) and tuple space search (`Merged`) as another
//! reference.
//!
//! - `generated`: `sluice_workload::filter_set(n, seed)` for n = 10, 30,
//!   100, 300 and 1,000 and one to three seeds, over its traffic, every truncation
//!   of a sample of it and a sample of the shared corpus; every filter's
//!   verdict from each engine equals sluice's single-filter program's,
//!   which equals libpcap's (Debian's 1.10.3, optimised or not). 10,000
//!   filters with `SLUICE_SOAK=1`.
//! - `broad`: broad mixes (`sluice_workload::broad_mix`: corpus
//!   expressions and random ones of every shape with the packets'
//!   constants; a packet matches a large share of them), 200 and 956
//!   filters, over a sample of the corpus's packets and truncations.
//! - `acl`: five-tuple firewall rules (`sluice_workload::acl_rules`), 100
//!   and 1,000, over traffic drawn from them and truncations of a sample.
//! - `flows`: the native tree's flow cache on generated sets of 300 and
//!   1,000 filters over traffic whose flows repeat, against the tree
//!   without it and each filter alone, with filters removed and put back
//!   between packets and a cache small enough to be emptied (eviction).
//! - `corpus`: the 600 corpus expressions over every corpus packet and
//!   truncations of a sample, against each filter alone, and each filter
//!   alone against libpcap master's verdicts (the corpus oracle).
//! - `changes`: random sequences of inserts, key-only inserts
//!   (`insert_keyed`, `insert_keys`), removals and publishes; after each
//!   publish the classifier equals a fresh build of its live filters and
//!   each live filter alone (the default `Classifier`, through tuple space
//!   search and the move to the tree, and `NativeTreeClassifier`).
//! - `concurrent`: two reader threads classify while the writer changes
//!   the filters and publishes; every answer is a published state's, and
//!   no reader goes back to an older state.
//! - `bugs`: minimal reproductions of the bugs these tests found.
//!
//! Every engine check includes the native tree's flow cache, on for every
//! packet, over the packets twice (learning, then answering from the
//! cache); `changes` and `concurrent` keep readers with their caches on
//! across the changes, so an entry a change should drop shows.
//!
//! Every check compares `classify` (all matches, as sorted ids) and
//! `classify_first` (priorities from -2 to 2, ties to the lowest id), one
//! packet at a time and in batches.

mod acl;
mod broad;
mod bugs;
mod changes;
mod concurrent;
mod corpus;
mod flows;
mod generated;
mod support;
