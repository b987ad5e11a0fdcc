//! Packets held in one buffer, as every engine reads them.

/// Frames one after another in one buffer.
pub struct Packets {
    bytes: Vec<u8>,
    /// (start, end, wire length) of each packet in `bytes`.
    spans: Vec<(usize, usize, u32)>,
}

impl Packets {
    /// The frames (captured bytes, wire length), copied into one buffer.
    pub fn new(frames: &[(Vec<u8>, u32)]) -> Packets {
        let mut bytes = Vec::with_capacity(frames.iter().map(|(d, _)| d.len()).sum());
        let mut spans = Vec::with_capacity(frames.len());
        for (d, w) in frames {
            let a = bytes.len();
            bytes.extend_from_slice(d);
            spans.push((a, bytes.len(), *w));
        }
        Packets { bytes, spans }
    }

    /// Number of packets.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes captured, in all.
    pub fn bytes(&self) -> usize {
        self.bytes.len()
    }

    /// The first `limit` packets as (captured bytes, wire length).
    pub fn refs(&self, limit: usize) -> Vec<(&[u8], u32)> {
        self.spans[..limit.min(self.spans.len())]
            .iter()
            .map(|&(a, b, w)| (&self.bytes[a..b], w))
            .collect()
    }
}
