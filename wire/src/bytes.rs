//! Reading numbers out of packet and file bytes, bounds-checked: `None`
//! where the bytes run out (or the offset overflows), never a panic.
//!
//! ```
//! use sluice_wire::bytes::{be16, u32_at};
//! assert_eq!(be16(&[0x08, 0x00, 0x45], 0), Some(0x0800));
//! assert_eq!(be16(&[0x08], 0), None);
//! assert_eq!(u32_at(&[2, 0, 0, 0], 0, false), Some(2));
//! ```

/// The big-endian (network order) 16-bit number at `at`.
///
/// ```
/// assert_eq!(sluice_wire::bytes::be16(&[0, 0x86, 0xdd], 1), Some(0x86dd));
/// assert_eq!(sluice_wire::bytes::be16(&[0; 4], usize::MAX), None);
/// ```
#[inline]
pub fn be16(p: &[u8], at: usize) -> Option<u16> {
    u16_at(p, at, true)
}

/// The 16-bit number at `at`, in the given byte order.
///
/// ```
/// assert_eq!(sluice_wire::bytes::u16_at(&[1, 2], 0, false), Some(0x0201));
/// ```
#[inline]
pub fn u16_at(p: &[u8], at: usize, big_endian: bool) -> Option<u16> {
    let b = bytes_at(p, at)?;
    Some(if big_endian {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    })
}

/// The `N` bytes at `at`.
#[inline]
fn bytes_at<const N: usize>(p: &[u8], at: usize) -> Option<[u8; N]> {
    p.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The 32-bit number at `at`, in the given byte order.
///
/// ```
/// assert_eq!(sluice_wire::bytes::u32_at(&[0, 0, 0, 2], 0, true), Some(2));
/// assert_eq!(sluice_wire::bytes::u32_at(&[0, 0, 2], 0, true), None);
/// ```
#[inline]
pub fn u32_at(p: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let b = bytes_at(p, at)?;
    Some(if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

/// The 64-bit number at `at`, in the given byte order.
///
/// ```
/// assert_eq!(sluice_wire::bytes::u64_at(&[1, 0, 0, 0, 0, 0, 0, 0], 0, false), Some(1));
/// ```
#[inline]
pub fn u64_at(p: &[u8], at: usize, big_endian: bool) -> Option<u64> {
    let b = bytes_at(p, at)?;
    Some(if big_endian {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    })
}
