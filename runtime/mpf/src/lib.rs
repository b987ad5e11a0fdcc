//! MPF (Yuhara et al. 1994): programs differing only in key immediates collapsed into one program and a hash table, per-filter state and the postpone queue.
//!
//! (Being built; see the crate's issue.)
