//! CSPF (Mogul, Rashid, Accetta 1987): the stack-machine filter language, its assembler, verifier, interpreter and lowering into sluice's IR.
//!
//! (Being built; see the crate's issue.)
