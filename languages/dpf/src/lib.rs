//! DPF (Engler, Kaashoek 1996): the declarative atom language, canonicalised and lowered into sluice's IR.
//!
//! (Being built; see the crate's issue.)
