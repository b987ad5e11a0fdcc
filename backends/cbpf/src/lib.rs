//! sluice-cbpf
