//! Reads arbitrary bytes as a capture twice: from memory through the
//! reader's buffer, and from a file mapped whole (`CaptureReader::
//! from_mapped`). Both must give the same packets, the same end or the
//! same error at the same offset, and each mapped packet must be the
//! file's bytes at the place the mapping gives.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_capture::{CaptureReader, Mapped, OwnedPacket};
use std::sync::Arc;

/// Everything a reader gives: its packets, then its end or its error.
fn all<R: std::io::Read>(
    r: Result<CaptureReader<R>, sluice_capture::CaptureError>,
) -> (Vec<OwnedPacket>, Option<String>) {
    let mut r = match r {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(e.to_string())),
    };
    let mut packets = Vec::new();
    loop {
        match r.next_packet() {
            Ok(Some(p)) => packets.push(p.to_owned_packet()),
            Ok(None) => return (packets, None),
            Err(e) => return (packets, Some(e.to_string())),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("sluice-fuzz-mapped-{}", std::process::id()));
    std::fs::write(&path, data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    let Some(map) = Mapped::new(&file) else {
        assert!(data.is_empty(), "a regular file of {} bytes did not map", data.len());
        return;
    };
    let map = Arc::new(map);
    let read = all(CaptureReader::from_reader(data, "fuzz"));
    let mapped = all(CaptureReader::from_mapped(map.clone(), "fuzz"));
    assert_eq!(read, mapped);
    let mut r = CaptureReader::from_mapped(map.clone(), "fuzz").ok();
    while let Some(Ok(Some(p))) = r.as_mut().map(|r| r.next_packet()) {
        let at = map.offset_of(p.data).expect("a mapped packet is in the mapping");
        assert_eq!(&data[at..at + p.data.len()], p.data);
    }
});
