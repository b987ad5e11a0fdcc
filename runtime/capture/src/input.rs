//! A small refillable buffer over any `Read`, so that packets can be handed
//! out as slices of it (no allocation or copy per packet).

use crate::Mapped;
use std::io::{self, Read};
use std::sync::Arc;

/// Initial (and usual) buffer size.
const INITIAL: usize = 256 * 1024;

pub(crate) struct Input<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// File offset of `buf[start]`.
    pos: u64,
    eof: bool,
    /// Read only the bytes asked for, never ahead (see [`Input::exact`]).
    exact: bool,
    /// The whole file, mapped: the bytes are its, and nothing is read.
    map: Option<Arc<Mapped>>,
}

impl<R> Input<R> {
    /// The reader underneath (what was buffered from it is dropped).
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// The reader underneath.
    pub(crate) fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }

    /// File offset of the first unconsumed byte.
    pub(crate) fn pos(&self) -> u64 {
        self.pos
    }

    /// The mapped file the bytes are, if they are one.
    pub(crate) fn mapping(&self) -> Option<&Arc<Mapped>> {
        self.map.as_ref()
    }

    /// Whether the mapped file was cut short while it was read.
    pub(crate) fn shrank(&self) -> bool {
        self.map.as_ref().is_some_and(|m| m.shrank())
    }

    /// The buffer, or the mapped file.
    fn data(&self) -> &[u8] {
        match &self.map {
            Some(m) => m.bytes(),
            None => &self.buf,
        }
    }
}

impl<R: Read> Input<R> {
    pub(crate) fn new(inner: R) -> Self {
        Input::at(inner, 0)
    }

    /// Input whose first byte is at file offset `pos` (a reader that was
    /// moved there before).
    pub(crate) fn at(inner: R, pos: u64) -> Self {
        Input {
            inner,
            buf: Vec::new(),
            start: 0,
            end: 0,
            pos,
            eof: false,
            exact: false,
            map: None,
        }
    }

    /// Input that is the mapped file `map` whole (`inner` is never read).
    pub(crate) fn mapped(inner: R, map: Arc<Mapped>) -> Self {
        Input {
            inner,
            buf: Vec::new(),
            start: 0,
            end: map.bytes().len(),
            pos: 0,
            eof: true,
            exact: false,
            map: Some(map),
        }
    }

    /// From now on, read from the inner reader only the bytes a `fill`
    /// needs, never ahead, and try again after an end of input: the inner
    /// reader's position is then always just after the bytes handed out,
    /// a record is available as soon as its bytes are, and a reader that
    /// grew (or was moved back) is read on.
    pub(crate) fn exact(&mut self) {
        self.exact = true;
    }

    /// Drops the bytes buffered and not consumed (after an error, so that
    /// an exact reader starts again at the inner reader's position).
    pub(crate) fn discard(&mut self) {
        let n = self.end - self.start;
        self.consume(n);
    }

    /// The unconsumed bytes currently buffered.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.data()[self.start..self.end]
    }

    /// Makes at least `n` bytes available unless the input ends first.
    /// Returns how many are available, at most `n`.
    ///
    /// The buffer grows by doubling only while it is full of real data, so a
    /// bogus huge length in a short file cannot allocate much more than the
    /// file's size.
    pub(crate) fn fill(&mut self, n: usize) -> io::Result<usize> {
        if self.map.is_some() {
            return Ok((self.end - self.start).min(n));
        }
        if self.exact {
            self.eof = false;
        }
        loop {
            let avail = self.end - self.start;
            if avail >= n || self.eof {
                return Ok(avail.min(n));
            }
            if self.buf.is_empty() {
                self.buf.resize(INITIAL, 0);
            }
            if self.start + n > self.buf.len() {
                if self.start > 0 {
                    self.buf.copy_within(self.start..self.end, 0);
                    self.end -= self.start;
                    self.start = 0;
                }
                if self.end == self.buf.len() {
                    let grown = self.buf.len().saturating_mul(2).min(n);
                    self.buf.resize(grown, 0);
                }
            }
            let upto = if self.exact {
                (self.start + n).min(self.buf.len())
            } else {
                self.buf.len()
            };
            match self.inner.read(&mut self.buf[self.end..upto]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks `n` buffered bytes as used. `n` must not exceed what `fill`
    /// reported; the bytes stay readable (via `slice`) until the next `fill`.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.end - self.start);
        self.start += n;
        self.pos += n as u64;
    }

    /// Buffer slice relative to the current start (before a `consume`).
    pub(crate) fn abs_range(&self, rel_start: usize, len: usize) -> (usize, usize) {
        (self.start + rel_start, self.start + rel_start + len)
    }

    /// The buffer bytes in an absolute range from `abs_range`.
    pub(crate) fn slice(&self, range: (usize, usize)) -> &[u8] {
        self.data().get(range.0..range.1).unwrap_or(&[])
    }

    /// Skips `n` bytes without buffering them all. Returns how many were
    /// skipped (fewer than `n` only at end of input).
    pub(crate) fn skip(&mut self, n: u64) -> io::Result<u64> {
        let mut done = 0u64;
        while done < n {
            let want = (n - done).min(INITIAL as u64) as usize;
            let got = self.fill(want)?;
            if got == 0 {
                break;
            }
            self.consume(got);
            done += got as u64;
        }
        Ok(done)
    }
}
