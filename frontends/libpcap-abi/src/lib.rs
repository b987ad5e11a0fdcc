//! sluice as libpcap (work in progress).
