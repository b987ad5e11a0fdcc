//! Walking a TPACKET_V3 block: the packets the kernel put in it, their
//! ring headers and link-layer addresses, and the frame libpcap would show
//! for each (VLAN tag put back, cooked header built).
//!
//! The rule: everything here reads bytes of a block the kernel has handed
//! to user space, with bounds checks; nothing here is `unsafe`.

use crate::interfaces::LINUX_SLL2;

/// `sll_pkttype` of a packet the host sent.
pub const PACKET_OUTGOING: u8 = 4;
/// Where the packet's `sockaddr_ll` starts: after the `tpacket3_hdr`,
/// aligned to 16 bytes.
const SLL_AT: usize = 48;
/// The ring header and the `sockaddr_ll` after it.
const HEAD: usize = SLL_AT + 20;
/// `TP_STATUS_VLAN_VALID`.
const VLAN_VALID: u32 = 1 << 4;
/// `TP_STATUS_VLAN_TPID_VALID`.
const VLAN_TPID_VALID: u32 = 1 << 6;

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// One packet's ring header and link-layer address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Seconds of the kernel's timestamp.
    pub sec: u32,
    /// Nanoseconds of the kernel's timestamp.
    pub nsec: u32,
    /// Bytes captured (`tp_snaplen`).
    pub caplen: u32,
    /// Bytes on the wire (`tp_len`).
    pub len: u32,
    /// Where the captured bytes start in the block.
    pub data: usize,
    /// The VLAN tag the kernel took off: (TPID, TCI).
    pub vlan: Option<(u16, u16)>,
    /// `sll_protocol`, as the bytes are (network order).
    pub protocol: [u8; 2],
    /// `sll_ifindex`.
    pub ifindex: i32,
    /// `sll_hatype`.
    pub hatype: u16,
    /// `sll_pkttype`.
    pub pkttype: u8,
    /// `sll_halen`.
    pub halen: u8,
    /// `sll_addr`.
    pub addr: [u8; 8],
}

/// The packets of one block, in the order the kernel wrote them.
pub struct BlockWalk<'a> {
    block: &'a [u8],
    left: u32,
    at: usize,
}

impl<'a> BlockWalk<'a> {
    /// Walk a block handed over by the kernel.
    pub fn new(block: &'a [u8]) -> BlockWalk<'a> {
        let left = u32_at(block, 12).unwrap_or(0);
        let at = u32_at(block, 16).unwrap_or(0) as usize;
        BlockWalk { block, left, at }
    }

    /// Go on walking a block from a [`position`](Self::position).
    pub fn resume(block: &'a [u8], left: u32, at: usize) -> BlockWalk<'a> {
        BlockWalk { block, left, at }
    }

    /// How many frames are left and where the next one is; `None` once
    /// the walk is over.
    pub fn position(&self) -> Option<(u32, usize)> {
        (self.left > 0).then_some((self.left, self.at))
    }
}

impl Iterator for BlockWalk<'_> {
    type Item = Frame;

    fn next(&mut self) -> Option<Frame> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let b = self.block;
        let h = self.at;
        // The ring header and the sockaddr_ll after it, checked once.
        let head: &[u8; HEAD] = b.get(h..h + HEAD)?.try_into().ok()?;
        let status = u32_at(head, 20)?;
        let next = u32_at(head, 0)? as usize;
        let frame = Frame {
            sec: u32_at(head, 4)?,
            nsec: u32_at(head, 8)?,
            caplen: u32_at(head, 12)?,
            len: u32_at(head, 16)?,
            data: h + u16_at(head, 24)? as usize,
            vlan: (status & VLAN_VALID != 0).then(|| {
                let tpid = u16_at(head, 36).unwrap_or(0);
                let tpid = if tpid != 0 || status & VLAN_TPID_VALID != 0 {
                    tpid
                } else {
                    0x8100
                };
                (tpid, u32_at(head, 32).unwrap_or(0) as u16)
            }),
            protocol: [head[SLL_AT + 2], head[SLL_AT + 3]],
            ifindex: u32_at(head, SLL_AT + 4)? as i32,
            hatype: u16_at(head, SLL_AT + 8)?,
            pkttype: head[SLL_AT + 10],
            halen: head[SLL_AT + 11],
            addr: head[SLL_AT + 12..SLL_AT + 20].try_into().ok()?,
        };
        // A frame whose bytes run past the block ends the walk.
        b.get(frame.data..frame.data + frame.caplen as usize)?;
        self.at = if next == 0 { b.len() } else { h + next };
        if next == 0 {
            self.left = 0;
        }
        Some(frame)
    }
}

/// How captured bytes become the frame libpcap shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// The bytes as they are; a VLAN tag the kernel took off goes back at
    /// `vlan_offset` if there is one.
    Raw {
        /// Where the tag goes (Ethernet: 12), or `None` for link types
        /// libpcap does not put tags back on.
        vlan_offset: Option<usize>,
    },
    /// A Linux cooked header built in front (`LINUX_SLL` or `LINUX_SLL2`).
    Cooked {
        /// `LINUX_SLL` or `LINUX_SLL2`.
        linktype: u16,
    },
}

impl Framing {
    /// The framing of link type `linktype`, cooked or not.
    pub fn new(linktype: u16, cooked: bool) -> Framing {
        if cooked {
            Framing::Cooked { linktype }
        } else {
            Framing::Raw {
                vlan_offset: (linktype == crate::interfaces::ETHERNET).then_some(12),
            }
        }
    }

    /// The frame libpcap would hand over for `f`: `None` when the captured
    /// bytes can be used as they are, else the bytes built in `out`
    /// (cleared first). Returns the frame's length on the wire.
    pub fn build(&self, block: &[u8], f: &Frame, out: &mut Vec<u8>) -> (bool, u32) {
        let data = &block[f.data..f.data + f.caplen as usize];
        out.clear();
        // Where the kernel's VLAN tag goes back in (the type field's place).
        let vlan_at = match *self {
            Framing::Raw { vlan_offset } => match (f.vlan, vlan_offset) {
                (Some(_), Some(at)) if data.len() >= at => at,
                _ => return (false, f.len),
            },
            // libpcap puts no VLAN tag back into SLL2 frames.
            Framing::Cooked { linktype } if linktype == LINUX_SLL2 => {
                out.extend_from_slice(&f.protocol);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&(f.ifindex as u32).to_be_bytes());
                out.extend_from_slice(&f.hatype.to_be_bytes());
                out.push(f.pkttype);
                out.push(f.halen);
                out.extend_from_slice(&f.addr);
                usize::MAX
            }
            Framing::Cooked { .. } => {
                out.extend_from_slice(&u16::from(f.pkttype).to_be_bytes());
                out.extend_from_slice(&f.hatype.to_be_bytes());
                out.extend_from_slice(&u16::from(f.halen).to_be_bytes());
                out.extend_from_slice(&f.addr);
                out.extend_from_slice(&f.protocol);
                14
            }
        };
        let mut len = f.len + out.len() as u32;
        out.extend_from_slice(data);
        if let (Some((tpid, tci)), true) = (f.vlan, vlan_at <= out.len()) {
            let [a, b] = tpid.to_be_bytes();
            let [c, d] = tci.to_be_bytes();
            out.splice(vlan_at..vlan_at, [a, b, c, d]);
            len += 4;
        }
        (true, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interfaces::LINUX_SLL;

    /// A test frame: bytes, length on the wire, VLAN tag taken off.
    type Test<'a> = (&'a [u8], u32, Option<(u16, u16)>);

    /// A block with the given frames, laid out as the kernel does.
    fn block(frames: &[Test<'_>]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[12..16].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[16..20].copy_from_slice(&48u32.to_ne_bytes());
        let mut at = 48;
        for (i, (data, len, vlan)) in frames.iter().enumerate() {
            let mac = 48 + 20 + 12; // header, sockaddr_ll, padding
            let size = (mac + data.len() + 15) & !15;
            let next = if i + 1 == frames.len() { 0 } else { size };
            b[at..at + 4].copy_from_slice(&(next as u32).to_ne_bytes());
            b[at + 4..at + 8].copy_from_slice(&(100 + i as u32).to_ne_bytes());
            b[at + 8..at + 12].copy_from_slice(&7u32.to_ne_bytes());
            b[at + 12..at + 16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            b[at + 16..at + 20].copy_from_slice(&len.to_ne_bytes());
            if let Some((tpid, tci)) = vlan {
                b[at + 20..at + 24].copy_from_slice(&(VLAN_VALID | VLAN_TPID_VALID).to_ne_bytes());
                b[at + 32..at + 36].copy_from_slice(&u32::from(*tci).to_ne_bytes());
                b[at + 36..at + 38].copy_from_slice(&tpid.to_ne_bytes());
            }
            b[at + 24..at + 26].copy_from_slice(&(mac as u16).to_ne_bytes());
            let sll = at + SLL_AT;
            b[sll + 2..sll + 4].copy_from_slice(&[0x08, 0x00]);
            b[sll + 4..sll + 8].copy_from_slice(&3i32.to_ne_bytes());
            b[sll + 8..sll + 10].copy_from_slice(&1u16.to_ne_bytes());
            b[sll + 10] = 0;
            b[sll + 11] = 6;
            b[sll + 12..sll + 18].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
            b[at + mac..at + mac + data.len()].copy_from_slice(data);
            at += size;
        }
        b
    }

    #[test]
    fn walks_frames_and_puts_vlan_tags_back() {
        let eth: Vec<u8> = (0u8..20).collect();
        let b = block(&[(&eth, 60, None), (&eth, 64, Some((0x88a8, 0x2064)))]);
        let frames: Vec<Frame> = BlockWalk::new(&b).collect();
        assert_eq!(frames.len(), 2);
        assert_eq!((frames[0].sec, frames[0].nsec, frames[0].len), (100, 7, 60));
        assert_eq!(frames[1].vlan, Some((0x88a8, 0x2064)));
        let framing = Framing::new(1, false);
        let mut out = Vec::new();
        assert_eq!(framing.build(&b, &frames[0], &mut out), (false, 60));
        assert_eq!(framing.build(&b, &frames[1], &mut out), (true, 68));
        let mut want = eth[..12].to_vec();
        want.extend_from_slice(&[0x88, 0xa8, 0x20, 0x64]);
        want.extend_from_slice(&eth[12..]);
        assert_eq!(out, want);
    }

    #[test]
    fn builds_cooked_headers() {
        let ip = [0x45u8, 0, 0, 20];
        let b = block(&[(&ip, 20, None)]);
        let f = BlockWalk::new(&b).next().unwrap();
        let mut out = Vec::new();
        let (_, len) = Framing::new(LINUX_SLL2, true).build(&b, &f, &mut out);
        assert_eq!(len, 40);
        assert_eq!(
            &out[..20],
            &[8, 0, 0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0]
        );
        assert_eq!(&out[20..], &ip);
        let (_, len) = Framing::new(LINUX_SLL, true).build(&b, &f, &mut out);
        assert_eq!(len, 36);
        assert_eq!(
            &out[..16],
            &[0, 0, 0, 1, 0, 6, 1, 2, 3, 4, 5, 6, 0, 0, 8, 0]
        );
    }

    #[test]
    fn a_truncated_block_ends_the_walk() {
        let b = block(&[(&[1, 2, 3], 3, None)]);
        assert_eq!(BlockWalk::new(&b[..60]).count(), 0);
        assert_eq!(BlockWalk::new(&[]).count(), 0);
    }
}
