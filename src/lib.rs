//! sluice
