//! The shared conformance corpus and pcap output.

use sluice_capture::{CaptureError, CaptureFormat, CaptureReader, CaptureWriter, Packet};
use std::io;
use std::path::{Path, PathBuf};

/// The Ethernet link type.
const LINKTYPE_ETHERNET: u16 = 1;

/// The snapshot length written files declare.
const SNAPLEN: u32 = 262_144;

/// The first `n` expressions of `conformance/expressions.txt` under the
/// shared directory (`../shared` from the repository's root), in file
/// order; fewer if the file has fewer. Every one compiles for Ethernet in
/// libpcap.
///
/// ```no_run
/// let filters = sluice_workload::corpus_filters("../shared".as_ref(), 600)?;
/// assert_eq!(filters.len(), 600);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn corpus_filters(shared_dir: &Path, n: usize) -> io::Result<Vec<String>> {
    let text = std::fs::read_to_string(shared_dir.join("conformance/expressions.txt"))?;
    Ok(text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .map(str::to_string)
        .collect())
}

/// Every Ethernet packet (captured bytes, wire length) of every capture in
/// `conformance/pcaps` under the shared directory, pcap and pcapng, files
/// in sorted name order and packets in file order: the shared corpus
/// capture. A file that ends in the middle of a record or is otherwise
/// malformed contributes the packets before the damage (some captures of
/// the corpus are deliberately broken). Errors only if the directory
/// cannot be read.
///
/// ```no_run
/// let packets = sluice_workload::corpus_packets("../shared".as_ref())?;
/// assert!(packets.len() > 6000);
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn corpus_packets(shared_dir: &Path) -> io::Result<Vec<(Vec<u8>, u32)>> {
    let dir = shared_dir.join("conformance/pcaps");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<io::Result<_>>()?;
    files.retain(|f| {
        matches!(
            f.extension().and_then(|e| e.to_str()),
            Some("pcap" | "pcapng")
        )
    });
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(mut r) = CaptureReader::open(&f) else {
            continue;
        };
        while let Ok(Some(p)) = r.next_packet() {
            if p.linktype == LINKTYPE_ETHERNET {
                out.push((p.data.to_vec(), p.wirelen));
            }
        }
    }
    Ok(out)
}

/// Write Ethernet frames (captured bytes, wire length) as a pcap file
/// (microsecond, little-endian, snapshot length 262144), one microsecond
/// apart.
///
/// ```
/// let name = format!("sluice-workload-doc-{}.pcap", std::process::id());
/// let path = std::env::temp_dir().join(name);
/// sluice_workload::write_pcap(&path, &sluice_workload::traffic(10, 1, 5))?;
/// let mut r = sluice_capture::CaptureReader::open(&path)?;
/// assert_eq!(r.linktype(), Some(1));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), sluice_capture::CaptureError>(())
/// ```
pub fn write_pcap(path: &Path, packets: &[(Vec<u8>, u32)]) -> Result<(), CaptureError> {
    let w = CaptureWriter::create(path, &CaptureFormat::pcap(LINKTYPE_ETHERNET, SNAPLEN))?;
    write_all(w, packets)?;
    Ok(())
}

/// The pcap file [`write_pcap`] writes, in memory.
///
/// ```
/// let bytes = sluice_workload::pcap_bytes(&[(vec![0u8; 60], 60)]);
/// assert_eq!(bytes.len(), 24 + 16 + 60);
/// ```
pub fn pcap_bytes(packets: &[(Vec<u8>, u32)]) -> Vec<u8> {
    let w = CaptureWriter::new(
        Vec::new(),
        "memory",
        &CaptureFormat::pcap(LINKTYPE_ETHERNET, SNAPLEN),
    )
    .expect("writing to memory cannot fail");
    write_all(w, packets).expect("writing to memory cannot fail")
}

fn write_all<W: io::Write>(
    mut w: CaptureWriter<W>,
    packets: &[(Vec<u8>, u32)],
) -> Result<W, CaptureError> {
    const START: i64 = 1_700_000_000;
    for (i, (data, wire)) in packets.iter().enumerate() {
        let us = i as i64;
        let p = Packet {
            wirelen: (*wire).max(data.len() as u32),
            snaplen: SNAPLEN,
            ..Packet::new(
                START + us / 1_000_000,
                (us % 1_000_000) as u32 * 1000,
                LINKTYPE_ETHERNET,
                data,
            )
        };
        w.write_packet(&p)?;
    }
    w.finish()
}
