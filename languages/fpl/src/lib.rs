//! FPL (FFPF, Bos et al. 2004): the stateful filter language with bounded loops, registers and per-filter memory.
//!
//! (Being built; see the crate's issue.)
