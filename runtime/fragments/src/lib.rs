//! IP fragment dispatch (MPF section 3): later fragments of a datagram go to the filters that accepted its first fragment.
//!
//! (Being built; see the crate's issue.)
