//! Feeds arbitrary bytes to the capture reader until it reports the end or
//! an error. Any panic is a bug. Also copies what it reads through the
//! writer in the input's format, which must not fail for packets the reader
//! produced (except for timestamps the output format cannot hold).
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice_capture::{CaptureReader, CaptureWriter, ErrorKind};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = CaptureReader::from_reader(data, "fuzz") else {
        return;
    };
    let Ok(mut writer) = CaptureWriter::new(Vec::new(), "out", &reader.format()) else {
        return;
    };
    let mut last_offset = reader.offset();
    while let Ok(Some(packet)) = reader.next_packet() {
        assert_eq!(packet.caplen as usize, packet.data.len());
        assert!(packet.ts_nsec < 1_000_000_000);
        if let Err(e) = writer.write_packet(&packet) {
            assert!(
                matches!(
                    e.kind(),
                    ErrorKind::Unwritable(_) | ErrorKind::LinkTypeMismatch { .. }
                ),
                "{e}"
            );
        }
        // Every packet record or block is at least 16 bytes long.
        assert!(reader.offset() >= last_offset + 16);
        last_offset = reader.offset();
    }
    let _ = writer.finish();
});
