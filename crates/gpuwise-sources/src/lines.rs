//! Bounded line reading: no reader holds more than [`MAX_LINE`] bytes of one line, whatever
//! the input (a 512 MiB line in a 150 KB `.zst` must not take gigabytes).
//!
//! The block reader of line formats enforces the bound as it cuts blocks; the DCGM reader reads
//! line by line with [`read_line`]; readers that take a `Read` (generic CSV through the `csv`
//! crate) read through [`LineLimit`], which drops over-long lines whole (a cut line could parse
//! as a different, wrong record).

use std::io::{BufRead, Read};

/// The longest line any reader takes, in bytes. Longer lines are skipped and counted.
pub const MAX_LINE: usize = 1 << 20;

/// What [`read_line`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// The end of the input.
    End,
    /// A line (in the buffer, with its newline if it had one).
    Whole,
    /// A line longer than the limit: consumed to its end, the buffer holds only its start.
    TooLong,
}

/// Read the next line into `buf` (cleared first), keeping at most `max` bytes of it.
pub fn read_line(r: &mut dyn BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            break;
        }
        any = true;
        let (take, done) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i + 1, true),
            None => (avail.len(), false),
        };
        if !too_long {
            let room = max.saturating_sub(buf.len());
            if take > room {
                too_long = true;
                buf.extend_from_slice(&avail[..room]);
            } else {
                buf.extend_from_slice(&avail[..take]);
            }
        }
        r.consume(take);
        if done {
            break;
        }
    }
    Ok(match (any, too_long) {
        (false, _) => Line::End,
        (true, false) => Line::Whole,
        (true, true) => Line::TooLong,
    })
}

/// A `Read` over a `BufRead` that replaces every line longer than `max` by an empty line (so
/// line numbers stay right) and remembers which lines it dropped.
pub struct LineLimit<R> {
    inner: R,
    max: usize,
    line: Vec<u8>,
    pos: usize,
    line_no: u64,
    /// 1-based numbers of the dropped lines.
    pub dropped: Vec<u64>,
}

impl<R: BufRead> LineLimit<R> {
    /// Wrap `inner`.
    pub fn new(inner: R, max: usize) -> Self {
        Self {
            inner,
            max,
            line: Vec::new(),
            pos: 0,
            line_no: 0,
            dropped: Vec::new(),
        }
    }
}

impl<R: BufRead> Read for LineLimit<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.line.len() {
            self.pos = 0;
            match read_line(&mut self.inner, &mut self.line, self.max)? {
                Line::End => {
                    self.line.clear();
                    return Ok(0);
                }
                Line::Whole => self.line_no += 1,
                Line::TooLong => {
                    self.line_no += 1;
                    self.dropped.push(self.line_no);
                    self.line.clear();
                    self.line.push(b'\n');
                }
            }
        }
        let n = out.len().min(self.line.len() - self.pos);
        out[..n].copy_from_slice(&self.line[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_line_keeps_at_most_max_and_consumes_the_rest() {
        let mut text = b"short\n".to_vec();
        text.extend(std::iter::repeat_n(b'x', 5000));
        text.extend_from_slice(b"\nlast");
        let mut r = std::io::BufReader::with_capacity(64, &text[..]);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut r, &mut buf, 100).ok(), Some(Line::Whole));
        assert_eq!(buf, b"short\n");
        assert_eq!(read_line(&mut r, &mut buf, 100).ok(), Some(Line::TooLong));
        assert_eq!(buf.len(), 100);
        assert_eq!(read_line(&mut r, &mut buf, 100).ok(), Some(Line::Whole));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut r, &mut buf, 100).ok(), Some(Line::End));
    }

    #[test]
    fn line_limit_drops_long_lines_whole() {
        let mut text = b"a,b\n1,2\n".to_vec();
        text.extend(std::iter::repeat_n(b'9', 3000));
        text.extend_from_slice(b",3\n4,5\n");
        let mut l = LineLimit::new(std::io::BufReader::with_capacity(16, &text[..]), 1000);
        let mut out = String::new();
        l.read_to_string(&mut out).ok();
        assert_eq!(out, "a,b\n1,2\n\n4,5\n");
        assert_eq!(l.dropped, vec![3]);
    }
}
