//! Bounded line reading: no reader holds more than [`MAX_LINE`] bytes of one line, whatever
//! the input (a 512 MiB line in a 150 KB `.zst` must not take gigabytes).
//!
//! The block reader of line formats enforces the bound as it cuts blocks; the DCGM reader reads
//! line by line with [`read_line`]; CSV read through the `csv` crate (generic telemetry CSV,
//! FOCUS bills) passes through [`RecordLimit`], which drops over-long records whole (a cut
//! record could parse as a different, wrong one).

use std::io::BufRead;

pub use gpuwise_core::records::{MAX_LINE, RecordLimit};

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
        let avail = gpuwise_core::records::fill(r)?;
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
}
