//! 802.11 frames by type (`Beacon`, `Acknowledgment RA:…`, `Data`), behind
//! radiotap, PPI, Prism and AVS headers; data frames with an LLC/SNAP
//! header show the packet they carry.

use super::{mac, Net};
use sluice_wire::bytes::be16;
use sluice_wire::link::LinkType;

fn le16(p: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes([*p.get(at)?, *p.get(at + 1)?]) as usize)
}

fn be32(p: &[u8], at: usize) -> Option<usize> {
    let b = p.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize)
}

/// How many bytes of radio header come before the 802.11 header, for the
/// 802.11 link types (`None`: not 802.11, or a PPI packet of another link).
fn radio_header(lt: LinkType, p: &[u8]) -> Option<usize> {
    match lt {
        LinkType::IEEE802_11 => Some(0),
        LinkType::IEEE802_11_RADIO => le16(p, 2),
        LinkType::PRISM_HEADER => Some(144),
        LinkType::IEEE802_11_RADIO_AVS => be32(p, 4),
        LinkType::PPI => {
            // The PPI header names the link type that follows it.
            let dlt = u32::from_le_bytes(p.get(4..8)?.try_into().ok()?);
            (dlt == 105).then(|| le16(p, 2)).flatten()
        }
        _ => None,
    }
}

/// A frame of an 802.11 link type: the summary and the link header's length.
pub(crate) fn describe(lt: LinkType, p: &[u8], wirelen: u32) -> Option<(Net, usize)> {
    let radio = radio_header(lt, p)?;
    let f = p.get(radio..).unwrap_or(&[]);
    let Some(&fc) = f.first() else {
        return Some((Net::new("", false, "[|802.11]".into()), p.len()));
    };
    let flags = f.get(1).copied().unwrap_or(0);
    let (kind, sub) = ((fc >> 2) & 3, fc >> 4);
    let addr = |at: usize| f.get(at..at + 6).map(mac).unwrap_or_else(|| "?".into());
    let body = match kind {
        0 => {
            let name = match sub {
                0 => "Assoc Request",
                1 => "Assoc Response",
                2 => "ReAssoc Request",
                3 => "ReAssoc Response",
                4 => "Probe Request",
                5 => "Probe Response",
                8 => "Beacon",
                9 => "ATIM",
                10 => "Disassociation",
                11 => "Authentication",
                12 => "DeAuthentication",
                13 => "Action",
                _ => "Unhandled Management subtype",
            };
            name.to_string()
        }
        1 => match sub {
            8 => format!("BAR RA:{} TA:{}", addr(4), addr(10)),
            9 => format!("BA RA:{}", addr(4)),
            10 => format!("Power Save-Poll BSSID:{}", addr(4)),
            11 => format!("Request-To-Send RA:{} TA:{}", addr(4), addr(10)),
            12 => format!("Clear-To-Send RA:{}", addr(4)),
            13 => format!("Acknowledgment RA:{}", addr(4)),
            14 => format!("CF-End RA:{}", addr(4)),
            15 => format!("CF-End+CF-Ack RA:{}", addr(4)),
            _ => "Unhandled Control subtype".to_string(),
        },
        2 => {
            // 24 bytes, a fourth address between access points, QoS control.
            let mut hl = 24;
            if flags & 3 == 3 {
                hl += 6;
            }
            if sub & 8 != 0 {
                hl += 2;
            }
            let snap = f.get(hl..hl + 6) == Some(&[0xaa, 0xaa, 3, 0, 0, 0][..]);
            let protected = flags & 0x40 != 0;
            if sub & 4 == 0 && snap && !protected {
                if let Some(ty) = be16(f, hl + 6) {
                    let at = radio + hl + 8;
                    let rest = p.get(at..).unwrap_or(&[]);
                    let len = (wirelen as usize).saturating_sub(at);
                    return Some((super::ether_payload(ty, rest, len), at.min(p.len())));
                }
            }
            "Data".to_string()
        }
        _ => "Extension frame".to_string(),
    };
    Some((Net::new("", false, body), p.len().min(radio + 24)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_by_type() {
        let mut ack = vec![0xd4u8, 0, 0, 0];
        ack.extend([0, 0x0d, 0x93, 0x82, 0x36, 0x3a]);
        let (n, _) = describe(LinkType::IEEE802_11, &ack, 10).unwrap();
        assert_eq!(n.line(), "Acknowledgment RA:00:0d:93:82:36:3a");
        let mut radiotap = vec![0u8, 0, 8, 0, 0, 0, 0, 0];
        radiotap.extend([0x80u8, 0]);
        let (n, _) = describe(LinkType::IEEE802_11_RADIO, &radiotap, 10).unwrap();
        assert_eq!(n.line(), "Beacon");
        assert!(describe(LinkType::EN10MB, &ack, 10).is_none());
    }

    #[test]
    fn data_frames_show_what_they_carry() {
        let mut f = vec![0x08u8, 0];
        f.extend([0u8; 22]);
        f.extend([0xaa, 0xaa, 3, 0, 0, 0, 0x08, 0x00]);
        f.extend([
            0x45, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ]);
        let (n, at) = describe(LinkType::IEEE802_11, &f, f.len() as u32).unwrap();
        assert_eq!(n.line(), "IP 10.0.0.1 > 10.0.0.2: ICMP, length 0");
        assert_eq!(at, 32);
    }
}
