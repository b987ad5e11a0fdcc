//! The input form the text-plus-packet fuzz targets share (included with
//! `#[path]`: each target is its own binary).

/// Split a fuzz input at its first NUL: the text before it (which must be
/// UTF-8, else `None`: the input is skipped) and the packet bytes after it
/// (empty when there is no NUL).
pub fn text_and_packet(data: &[u8]) -> Option<(&str, &[u8])> {
    let (text, pkt) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    Some((std::str::from_utf8(text).ok()?, pkt))
}
