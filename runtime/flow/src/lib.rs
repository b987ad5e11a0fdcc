//! FFPF (Bos et al. 2004): flows, filter graphs, flow groups sharing one circular packet buffer, persistent filter memory, authorisation.
//!
//! (Being built; see the crate's issue.)
