//! # CSV records of bounded size
//!
//! A `Read` adapter, generic over its source (it touches no file itself): the FOCUS bill reader
//! and the generic telemetry CSV reader both put the `csv` crate behind it, so that no record,
//! however the input is made, costs more than [`MAX_LINE`] bytes of memory.

use std::io::{BufRead, Read};

/// The longest line (or CSV record) any reader takes, in bytes. Longer ones are skipped and
/// counted.
pub const MAX_LINE: usize = 1 << 20;

/// `fill_buf`, tried again when a signal interrupts it.
///
/// # Errors
/// What the reader says, but `Interrupted`.
pub fn fill<R: BufRead + ?Sized>(r: &mut R) -> std::io::Result<&[u8]> {
    loop {
        match r.fill_buf() {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    // Buffered now: this returns it without reading.
    r.fill_buf()
}

/// The line (1-based) a record the `csv` crate read from `text` starts on, from the position
/// the crate gives the record or its error (`at`). The crate places a record where its read
/// began: before the empty lines (and, reading with `comment`, the comment lines) it passed
/// over, and after a `\r\n` on the `\n`, so on the line before in a file of `\r\n` lines.
/// The lines passed over are counted here. A reader of a block of a longer text adds the
/// block's first line less one.
#[must_use]
pub fn record_line(text: &[u8], at: &csv::Position, comment: Option<u8>) -> u64 {
    let mut line = at.line();
    let mut i = usize::try_from(at.byte()).unwrap_or(usize::MAX);
    // The crate drops a byte-order mark at the start of the text without a line.
    if i == 0 && text.starts_with(b"\xef\xbb\xbf") {
        i = 3;
    }
    while let Some(&b) = text.get(i) {
        match b {
            b'\n' => line += 1,
            b'\r' => {}
            b if Some(b) == comment => match memchr::memchr(b'\n', &text[i..]) {
                // To the comment's newline, counted next.
                Some(k) => {
                    i += k;
                    continue;
                }
                None => break,
            },
            _ => break,
        }
        i += 1;
    }
    line
}

/// Where a CSV reader is inside a record (RFC 4180, as the `csv` crate reads it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Csv {
    FieldStart,
    Unquoted,
    InQuotes,
    /// A `"` inside quotes: the next byte says whether it was escaped (`""`) or closing.
    AfterQuote,
}

/// A `Read` over a `BufRead` that passes on CSV records of at most `max` bytes and replaces
/// every longer one by its newlines alone (blank lines, which CSV readers skip, so line numbers
/// stay right), remembering the line each dropped record started on. A first record (the
/// header) that long is an error at once.
///
/// A record ends at a newline outside quotes: a quoted cell spanning lines is one record, and an
/// unclosed quote cannot make the reader behind this hold more than `max` bytes (one physical
/// line bound would not do: a quote followed by endless short lines is one endless record).
/// Hand-written because the `csv` crate grows its record buffer without a limit.
pub struct RecordLimit<R> {
    inner: R,
    max: usize,
    delimiter: u8,
    record: Vec<u8>,
    pos: usize,
    /// Newlines of a dropped record still to hand on.
    blank_lines: u64,
    line_no: u64,
    /// 1-based lines where the dropped records started.
    pub dropped: Vec<u64>,
}

impl<R: BufRead> RecordLimit<R> {
    /// Wrap `inner`, a CSV stream separated by `delimiter`.
    pub fn new(inner: R, max: usize, delimiter: u8) -> Self {
        Self {
            inner,
            max,
            delimiter,
            record: Vec::new(),
            pos: 0,
            blank_lines: 0,
            line_no: 1,
            dropped: Vec::new(),
        }
    }

    /// Read the next record into `self.record` (or count its newlines when it is too long);
    /// `false` at the end of the input.
    fn next_record(&mut self) -> std::io::Result<bool> {
        let mut record = std::mem::take(&mut self.record);
        record.clear();
        self.pos = 0;
        let more = self.next_record_into(&mut record);
        self.record = record;
        more
    }

    /// Append the next record to `out` (nothing when it is too long: its newlines are then
    /// owed in `blank_lines`); `false` at the end of the input.
    fn next_record_into(&mut self, out: &mut Vec<u8>) -> std::io::Result<bool> {
        let base = out.len();
        let (start, mut newlines, mut too_long, mut any) = (self.line_no, 0u64, false, false);
        let mut state = Csv::FieldStart;
        loop {
            let avail = fill(&mut self.inner)?;
            if avail.is_empty() {
                break;
            }
            any = true;
            let mut end = None;
            let mut i = 0;
            // Jump to the next quote or newline (memchr: a 1 GiB line of anything else is
            // passed over at memory speed). Delimiters are not stops: whether a quote opens a
            // quoted field depends only on the byte before it, which is at hand.
            while i < avail.len() {
                let next = memchr::memchr2(b'"', b'\n', &avail[i..]);
                if state != Csv::InQuotes {
                    // What the bytes passed over leave: a field just begun after a delimiter,
                    // or the inside of an unquoted field.
                    let passed = &avail[i..next.map_or(avail.len(), |k| i + k)];
                    if let Some(&last) = passed.last() {
                        state = if last == self.delimiter {
                            Csv::FieldStart
                        } else {
                            Csv::Unquoted
                        };
                    }
                }
                let Some(k) = next else {
                    break;
                };
                i += k;
                let b = avail[i];
                if b == b'\n' {
                    newlines += 1;
                }
                state = match (state, b) {
                    (Csv::FieldStart, b'"') => Csv::InQuotes,
                    (Csv::InQuotes, b'"') => Csv::AfterQuote,
                    (Csv::AfterQuote, b'"') | (Csv::InQuotes, _) => Csv::InQuotes,
                    (_, b'\n') => {
                        end = Some(i + 1);
                        break;
                    }
                    // A quote inside an unquoted field is a byte of it.
                    _ => Csv::Unquoted,
                };
                i += 1;
            }
            let take = end.unwrap_or(avail.len());
            if !too_long {
                if out.len() - base + take > self.max {
                    if start == 1 {
                        // A header this long is no header: stop here rather than read on
                        // through what may be an endless stream (`--bill /dev/zero`).
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("the header is longer than {} bytes; not CSV", self.max),
                        ));
                    }
                    too_long = true;
                    out.truncate(base);
                } else {
                    out.extend_from_slice(&avail[..take]);
                }
            }
            self.inner.consume(take);
            if end.is_some() {
                break;
            }
        }
        self.line_no += newlines;
        if too_long {
            self.dropped.push(start);
            self.blank_lines = newlines.max(1);
        }
        Ok(any)
    }
}

impl<R: BufRead> RecordLimit<R> {
    /// Append whole records to `block` (a dropped one as its newlines) until it holds at least
    /// `target` bytes or the input ends; `false` when the input had nothing more. Blocks cut
    /// this way end on a record's end, so each can be parsed on its own.
    ///
    /// # Errors
    /// The reader's, and a first record (the header) longer than the limit.
    pub fn fill_block(&mut self, block: &mut Vec<u8>, target: usize) -> std::io::Result<bool> {
        self.fill_block_with(block, target, true)
    }

    /// [`RecordLimit::fill_block`], with its fast path or (`fast` false, to test it) record
    /// by record only.
    fn fill_block_with(
        &mut self,
        block: &mut Vec<u8>,
        target: usize,
        fast: bool,
    ) -> std::io::Result<bool> {
        // What a `Read` call left of the current record first, then records read straight
        // into the block (one copy, from the reader's buffer).
        let mut any = self.blank_lines > 0 || self.pos < self.record.len();
        block.extend_from_slice(&self.record[self.pos..]);
        self.pos = self.record.len();
        loop {
            if self.blank_lines > 0 {
                any = true;
                let n = usize::try_from(self.blank_lines).unwrap_or(0);
                block.resize(block.len() + n, b'\n');
                self.blank_lines = 0;
            }
            if block.len() >= target {
                return Ok(any);
            }
            // The records wholly in the reader's buffer, found 64 bytes at a time; the
            // record the buffer cuts, or one the fast path declines, record by record.
            let avail = fill(&mut self.inner)?;
            let (cut, newlines) = if fast {
                whole_records(avail, self.delimiter, self.max, target - block.len())
            } else {
                (0, 0)
            };
            if cut > 0 {
                block.extend_from_slice(&avail[..cut]);
                self.inner.consume(cut);
                self.line_no += newlines;
            } else if !self.next_record_into(block)? {
                return Ok(any);
            }
            any = true;
        }
    }

    /// Append records to `block` up to the first that is not an empty line (a header, after
    /// the empty lines a file may begin with); `false` when the input had nothing more.
    ///
    /// # Errors
    /// As [`RecordLimit::fill_block`]'s.
    pub fn fill_header(&mut self, block: &mut Vec<u8>) -> std::io::Result<bool> {
        loop {
            let more = self.fill_block(block, block.len() + 1)?;
            if !more || block.iter().any(|&b| !matches!(b, b'\n' | b'\r')) {
                return Ok(more);
            }
        }
    }

    /// The line the next record starts on (1-based).
    #[must_use]
    pub fn line(&self) -> u64 {
        self.line_no
    }
}

/// The bits of `chunk` that are `byte` (bit `i` for `chunk[i]`): the bytes compared into
/// ones and zeros (a loop the compiler turns into vector compares on any target, with no SIMD
/// code here), then each eight gathered into a byte by one multiply (the ones sit at bits 0, 8,
/// …, 56 of a word; times `0x0102…80` they add up, without carries, in its top byte).
#[inline]
fn bits(chunk: &[u8; 64], byte: u8) -> u64 {
    let mut ones = [0u8; 64];
    for (one, &b) in ones.iter_mut().zip(chunk) {
        *one = u8::from(b == byte);
    }
    let mut mask = 0u64;
    for (k, word) in ones.chunks_exact(8).enumerate() {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        let packed = u64::from_le_bytes(eight).wrapping_mul(0x0102_0408_1020_4080) >> 56;
        mask |= packed << (8 * k);
    }
    mask
}

/// Bit `i` set when an odd number of the bits `0..=i` of `x` are.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    for shift in [1, 2, 4, 8, 16, 32] {
        x ^= x << shift;
    }
    x
}

/// Where the whole records at the start of `bytes` (which starts a record) end: the end of
/// the first record end at or past `want` bytes, or of the last one before the bytes run out,
/// a record runs past `max`, or a quote does not read as quote parity says; and the newlines
/// before that end. `(0, 0)` when no record qualifies (the caller then reads one record by
/// the state machine of [`RecordLimit::next_record_into`], which this agrees with wherever it
/// takes a record).
///
/// Hand-written because no CSV crate finds record ends without parsing every field: this
/// classifies 64 bytes at a time (quotes and newlines as bit masks, the byte before each
/// opening quote looked at) and reads a newline as a record end when an even number of quotes
/// precede it in the record. Parity is
/// what a CSV reader does only when every quote that opens (an odd one) follows a separator,
/// a newline, another quote (`""`) or the record's start; a quote anywhere else is a byte of an
/// unquoted field to the `csv` crate, and the records from the first such quote on are left to
/// the state machine.
fn whole_records(bytes: &[u8], delimiter: u8, max: usize, want: usize) -> (usize, u64) {
    let (mut cut, mut newlines_at_cut, mut newlines) = (0usize, 0u64, 0u64);
    let mut record_start = 0usize;
    // Inside quotes at the end of the last chunk (all ones) or not.
    let mut carry = 0u64;
    // Whether the byte before the chunk lets a quote open a field.
    let mut opens = 1u64;
    let mut tail = [0u8; 64];
    for (k, piece) in bytes.chunks(64).enumerate() {
        let chunk: &[u8; 64] = if let Ok(whole) = piece.try_into() {
            whole
        } else {
            // The tail, padded with bytes that are neither a quote, a newline nor the separator.
            let pad = if delimiter == 0 { 1 } else { 0 };
            tail.fill(pad);
            tail[..piece.len()].copy_from_slice(piece);
            &tail
        };
        let base = k * 64;
        let (quotes, lines) = (bits(chunk, b'"'), bits(chunk, b'\n'));
        let (inside, bad) = if quotes == 0 {
            (carry, 64)
        } else {
            let inside = prefix_xor(quotes) ^ carry;
            carry = if inside >> 63 == 1 { u64::MAX } else { 0 };
            // The quotes that open after neither a newline nor a quote (nor, for the first,
            // a separator ending the last chunk): a few a record, each allowed only after a
            // separator.
            let mut after = quotes & inside & !(((lines | quotes) << 1) | opens);
            let mut bad = 64;
            while after != 0 {
                let i = after.trailing_zeros();
                after &= after - 1;
                if i == 0 || chunk[i as usize - 1] != delimiter {
                    bad = i;
                    break;
                }
            }
            (inside, bad)
        };
        opens = u64::from(matches!(chunk[63], b'"' | b'\n') || chunk[63] == delimiter);
        let mut ends = lines & !inside;
        if bad < 64 {
            ends &= (1u64 << bad) - 1;
        }
        while ends != 0 {
            let bit = ends.trailing_zeros();
            ends &= ends - 1;
            let end = base + bit as usize + 1;
            if end - record_start > max {
                return (cut, newlines_at_cut);
            }
            record_start = end;
            cut = end;
            newlines_at_cut = newlines + u64::from((lines & (u64::MAX >> (63 - bit))).count_ones());
            if cut >= want {
                return (cut, newlines_at_cut);
            }
        }
        if bad < 64 || base + 64 - record_start > max {
            break;
        }
        newlines += u64::from(lines.count_ones());
    }
    (cut, newlines_at_cut)
}

/// Where a cell of a [`Record`] lies: in the record's text, or (a quoted cell with doubled
/// quotes, unescaped) in the splitter's scratch text; and where it is written in the record's
/// text (`raw`: its first byte, an opening quote included).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: usize,
    end: usize,
    raw: usize,
    unescaped: bool,
}

/// The cells of one record from [`Splitter::split`].
#[derive(Debug)]
pub struct Record<'r> {
    text: &'r str,
    scratch: &'r str,
    spans: &'r [Span],
}

impl<'r> Record<'r> {
    /// Cells.
    #[must_use]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// No cells (never, for a record the splitter gives).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Cells `first..=last` as the record writes them: from the first's first byte (an
    /// opening quote included) to the separator after the last, or the record's end. Two
    /// records that write them alike have them alike (one text reads as one set of cells);
    /// cells alike may be written differently (quoted or not).
    #[must_use]
    pub fn written(&self, first: usize, last: usize) -> Option<&'r [u8]> {
        let from = self.spans.get(first)?.raw;
        let to = match self.spans.get(last.checked_add(1)?) {
            Some(next) => next.raw,
            None if last < self.spans.len() => self.text.len(),
            None => return None,
        };
        self.text.as_bytes().get(from..to)
    }

    /// Cell `i`.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<&'r str> {
        let s = self.spans.get(i)?;
        let from = if s.unescaped { self.scratch } else { self.text };
        from.get(s.start..s.end)
    }
}

/// What [`Splitter::split`] found.
#[derive(Debug)]
pub enum Split<'r> {
    /// A record and the line it starts on (1-based, from the text's first line).
    Record(u64, Record<'r>),
    /// The end of the text.
    End,
    /// A record the splitter does not read the way the `csv` crate would for certain (a quote
    /// inside an unquoted cell, bytes after a closing quote, a lone carriage return, an
    /// unclosed quote, text that is not UTF-8, a byte-order mark at the start): the caller
    /// reads the text with the `csv` crate, passing over the records already given.
    Unsure {
        /// Records given before it.
        records: u64,
    },
}

/// The records of a block of CSV text, split where the `csv` crate (default settings but
/// the separator, flexible cell counts, no header) would split them, for the common shape
/// only: cells either unquoted with no quote, or wholly quoted with doubled quotes inside,
/// lines ended by `\n` or `\r\n`. Anything else stops it ([`Split::Unsure`]).
///
/// Hand-written for speed: the `csv` crate's parser costs about sixteen instructions a byte
/// on a FOCUS bill; this looks each byte up once in a table of the four that matter and
/// copies only the cells whose quotes it has to undouble. A property test holds it to the
/// `csv` crate.
pub struct Splitter<'a> {
    bytes: &'a [u8],
    delimiter: u8,
    pos: usize,
    line: u64,
    records: u64,
    spans: Vec<Span>,
    scratch: Vec<u8>,
    /// [`SPECIAL`] for the separator, a newline, a carriage return and a quote, and
    /// [`QUOTE_OR_LF`] too for a quote and a newline; 0 for every other byte.
    class: [u8; 256],
}

/// A byte that ends an unquoted cell or makes it unusual.
const SPECIAL: u8 = 1;
/// A byte a quoted cell stops at.
const QUOTE_OR_LF: u8 = 2;

impl<'a> Splitter<'a> {
    /// Split `bytes`, separated by `delimiter`.
    #[must_use]
    pub fn new(bytes: &'a [u8], delimiter: u8) -> Self {
        Self {
            bytes,
            delimiter,
            pos: 0,
            line: 1,
            records: 0,
            spans: Vec::new(),
            scratch: Vec::new(),
            class: {
                let mut class = [0; 256];
                for b in [delimiter, b'\r'] {
                    class[usize::from(b)] = SPECIAL;
                }
                for b in [b'\n', b'"'] {
                    class[usize::from(b)] = SPECIAL | QUOTE_OR_LF;
                }
                class
            },
        }
    }

    /// The next record.
    pub fn split(&mut self) -> Split<'_> {
        let bytes = self.bytes;
        let from = self.pos;
        // Empty lines are no records (and the `\n` of a `\r\n` that ended the last record
        // comes here, as it does to the `csv` crate).
        loop {
            match bytes.get(self.pos..) {
                Some([b'\n', ..]) => self.pos += 1,
                Some([b'\r', b'\n', ..]) => self.pos += 2,
                Some([]) | None => return Split::End,
                Some(_) => break,
            }
            self.line += 1;
        }
        let (start, line) = (self.pos, self.line);
        let unsure = Split::Unsure {
            records: self.records,
        };
        // A separator that is a quote or ends lines is for the `csv` crate to make sense of,
        // and so is a byte-order mark at the start of the text (which it drops).
        let odd = matches!(self.delimiter, b'"' | b'\n' | b'\r')
            || (from == 0 && bytes.starts_with(b"\xef\xbb\xbf"));
        let Some(end) = self.cells(start).filter(|_| !odd) else {
            return unsure;
        };
        let (Ok(text), Ok(scratch)) = (
            std::str::from_utf8(&bytes[start..end]),
            std::str::from_utf8(&self.scratch),
        ) else {
            return unsure;
        };
        self.pos = end;
        self.records += 1;
        Split::Record(
            line,
            Record {
                text,
                scratch,
                spans: &self.spans,
            },
        )
    }

    /// Find the cells of the record at `start` (spans relative to it), counting its
    /// newlines; its end (past its newline), or `None` when it is not of the common shape.
    fn cells(&mut self, start: usize) -> Option<usize> {
        let (bytes, delimiter) = (self.bytes, self.delimiter);
        self.spans.clear();
        self.scratch.clear();
        let mut at = start;
        let mut newlines = 0u64;
        loop {
            if bytes.get(at) == Some(&b'"') {
                let first = self.scratch.len();
                let (mut from, mut i, mut unescaped) = (at + 1, at + 1, false);
                let close = loop {
                    // To the next quote, counting newlines.
                    while let Some(&b) = bytes.get(i) {
                        if self.class[usize::from(b)] & QUOTE_OR_LF != 0 {
                            break;
                        }
                        i += 1;
                    }
                    match bytes.get(i) {
                        None => return None,
                        Some(b'\n') => {
                            newlines += 1;
                            i += 1;
                        }
                        Some(_) if bytes.get(i + 1) == Some(&b'"') => {
                            // `""`: one quote of the cell.
                            self.scratch.extend_from_slice(&bytes[from..=i]);
                            (from, i, unescaped) = (i + 2, i + 2, true);
                        }
                        Some(_) => break i,
                    }
                };
                let span = if unescaped {
                    self.scratch.extend_from_slice(&bytes[from..close]);
                    Span {
                        start: first,
                        end: self.scratch.len(),
                        raw: at - start,
                        unescaped: true,
                    }
                } else {
                    Span {
                        start: at + 1 - start,
                        end: close - start,
                        raw: at - start,
                        unescaped: false,
                    }
                };
                self.spans.push(span);
                match bytes.get(close + 1..) {
                    Some([d, ..]) if *d == delimiter => at = close + 2,
                    Some([b'\n', ..]) => return Some(self.ended(close + 2, newlines)),
                    Some([b'\r', b'\n', ..]) => return Some(self.ended(close + 2, newlines)),
                    Some([]) => return Some(self.ended(close + 1, newlines)),
                    _ => return None,
                }
            } else {
                let mut i = at;
                while let Some(&b) = bytes.get(i) {
                    if self.class[usize::from(b)] != 0 {
                        break;
                    }
                    i += 1;
                }
                let span = |end: usize| Span {
                    start: at - start,
                    end: end - start,
                    raw: at - start,
                    unescaped: false,
                };
                // The separator first: most cells end there.
                match bytes.get(i..) {
                    Some([d, ..]) if *d == delimiter => {
                        self.spans.push(span(i));
                        at = i + 1;
                    }
                    Some([]) | None => {
                        self.spans.push(span(i));
                        return Some(self.ended(i, newlines));
                    }
                    Some([b'\n', ..]) => {
                        self.spans.push(span(i));
                        return Some(self.ended(i + 1, newlines));
                    }
                    // `\r\n` ends it at the `\r`; the `\n` is an empty line to the next read.
                    Some([b'\r', b'\n', ..]) => {
                        self.spans.push(span(i));
                        return Some(self.ended(i + 1, newlines));
                    }
                    // A quote in an unquoted cell, or a lone `\r`.
                    Some(_) => return None,
                }
            }
        }
    }

    /// A record ends at `end`, after `newlines` inside its quotes and its own, when it ended
    /// at a `\n`.
    fn ended(&mut self, end: usize, newlines: u64) -> usize {
        self.line += newlines + u64::from(self.bytes.get(end - 1) == Some(&b'\n'));
        end
    }
}

impl<R: BufRead> Read for RecordLimit<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.blank_lines == 0 && self.pos == self.record.len() {
            if !self.next_record()? {
                return Ok(0);
            }
        }
        if self.blank_lines > 0 {
            let n = out
                .len()
                .min(usize::try_from(self.blank_lines).unwrap_or(usize::MAX));
            out[..n].fill(b'\n');
            self.blank_lines -= n as u64;
            return Ok(n);
        }
        let n = out.len().min(self.record.len() - self.pos);
        out[..n].copy_from_slice(&self.record[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limited(text: &[u8], max: usize) -> (String, Vec<u64>) {
        let mut l = RecordLimit::new(std::io::BufReader::with_capacity(16, text), max, b',');
        let mut out = String::new();
        l.read_to_string(&mut out).expect("reads");
        (out, l.dropped)
    }

    /// Blocks of any size hold exactly what reading through `Read` gives: whole records, a
    /// dropped one as its newlines, and the lines each started on.
    #[test]
    fn blocks_are_the_read_cut_at_record_ends() {
        let mut text = b"a,b\n1,\"x\ny\"\n".to_vec();
        text.extend(std::iter::repeat_n(b'9', 3000));
        text.extend_from_slice(b",\"3\n\n4\"\n4,5\n\"q\"\"\",6\n7,8");
        let (whole, dropped) = limited(&text, 1000);
        for target in [1, 2, 5, 17, 4096] {
            let mut l =
                RecordLimit::new(std::io::BufReader::with_capacity(16, &text[..]), 1000, b',');
            let (mut all, mut lines) = (Vec::new(), Vec::new());
            loop {
                lines.push(l.line());
                let mut block = Vec::new();
                if !l.fill_block(&mut block, target).expect("reads") {
                    break;
                }
                // Every block but the last ends a record.
                assert!(block.ends_with(b"\n") || all.len() + block.len() == whole.len());
                all.extend_from_slice(&block);
            }
            assert_eq!(
                String::from_utf8(all).expect("utf-8"),
                whole,
                "target {target}"
            );
            assert_eq!(l.dropped, dropped);
            assert_eq!(lines[0], 1);
            assert_eq!(*lines.last().expect("a line"), 9, "eight newlines read");
        }
    }

    #[test]
    fn record_limit_drops_long_records_whole() {
        let mut text = b"a,b\n1,2\n".to_vec();
        text.extend(std::iter::repeat_n(b'9', 3000));
        text.extend_from_slice(b",3\n4,5\n");
        assert_eq!(limited(&text, 1000), ("a,b\n1,2\n\n4,5\n".into(), vec![3]));
    }

    /// A quoted cell spanning lines is one record; an unclosed quote followed by endless short
    /// lines is one record too long, its lines handed on blank; `""` and a quote inside an
    /// unquoted cell do not open quotes.
    #[test]
    fn record_limit_reads_quotes_as_csv_does() {
        let text = b"a,b\n\"x\ny\",\"say \"\"hi\"\"\"\n5 \"in,6\n7,8";
        assert_eq!(
            limited(text, 1000),
            (String::from_utf8_lossy(text).into(), vec![])
        );
        let mut text = b"a,b\n1,\"open\n".to_vec();
        for _ in 0..500 {
            text.extend_from_slice(b"short line\n");
        }
        let (out, dropped) = limited(&text, 1000);
        assert_eq!(dropped, vec![2]);
        assert_eq!(out, format!("a,b\n{}", "\n".repeat(501)));
        let (out, dropped) = limited(b"a,b\n1,2\n3,\"x\ny\"\n", 5);
        assert_eq!((out.as_str(), dropped), ("a,b\n1,2\n\n\n", vec![3]));
        // A header over the bound is an error at once, even on an endless stream.
        let mut l = RecordLimit::new(std::io::BufReader::new(std::io::repeat(b'x')), 1000, b',');
        let mut out = String::new();
        let err = l.read_to_string(&mut out).expect_err("no header");
        assert_eq!(
            err.to_string(),
            "the header is longer than 1000 bytes; not CSV"
        );
    }

    /// Blocks with the line each starts on, and the lines of the dropped records.
    type Cut = (Vec<(u64, Vec<u8>)>, Vec<u64>);

    /// Blocks, the line each starts on, and the dropped records' lines, read with or without
    /// the fast path.
    fn cut(
        text: &[u8],
        buffer: usize,
        max: usize,
        delimiter: u8,
        target: usize,
        fast: bool,
    ) -> std::io::Result<Cut> {
        let reader = std::io::BufReader::with_capacity(buffer, text);
        let mut l = RecordLimit::new(reader, max, delimiter);
        let mut blocks = Vec::new();
        loop {
            let (line, mut block) = (l.line(), Vec::new());
            let more = l.fill_block_with(&mut block, target, fast)?;
            if !more {
                return Ok((blocks, l.dropped));
            }
            blocks.push((line, block));
        }
    }

    /// The word-at-a-time byte match against a byte-by-byte one, for every byte value.
    #[test]
    fn bits_are_the_bytes_that_match() {
        let chunk: [u8; 64] = std::array::from_fn(|i| (i * 37 % 256) as u8);
        for byte in 0..=255u8 {
            let mut mixed = chunk;
            mixed[byte as usize % 64] = byte;
            mixed[63 - byte as usize % 64] = byte ^ 0x80;
            let expected = (0..64).fold(0u64, |m, i| m | (u64::from(mixed[i] == byte) << i));
            assert_eq!(bits(&mixed, byte), expected, "byte {byte}");
        }
        // Every pattern of matches within a word, in every word.
        for pattern in 0..=255u64 {
            let chunk: [u8; 64] = std::array::from_fn(|i| {
                if pattern >> (i % 8) & 1 == 1 {
                    b'"'
                } else {
                    b'a'
                }
            });
            assert_eq!(bits(&chunk, b'"'), pattern * 0x0101_0101_0101_0101);
        }
    }

    /// The fast path on inputs chosen to defeat it: quotes that open mid-field, after a
    /// carriage return, across a 64-byte boundary, records longer than the bound.
    #[test]
    fn whole_records_stop_where_parity_is_not_csv() {
        let text = b"h,i\n1,\"a\nb\",2\nx\"y,\"z\n3\n\"q\"\"\"\n\r\"w\n5\n";
        // The second record holds a quoted newline; `x"y` stops the third.
        assert_eq!(whole_records(text, b',', 100, usize::MAX), (14, 3));
        // A separator at byte 63 lets the quote at byte 64 open.
        let mut long = vec![b'a'; 63];
        long.extend_from_slice(b",\"\n\n\"\n1\n");
        assert_eq!(whole_records(&long, b',', 100, usize::MAX), (71, 4));
        assert_eq!(whole_records(&long, b',', 68, usize::MAX), (0, 0));
        assert_eq!(whole_records(&long, b',', 100, 10), (69, 3));
        // Without it, the quote is a byte of an unquoted field: stop.
        long[63] = b'a';
        assert_eq!(whole_records(&long, b',', 100, usize::MAX), (0, 0));
    }

    /// Records read, each with its line, and the error the reading ended with, if any.
    type Reading = (Vec<(u64, Vec<String>)>, Option<String>);

    /// What the `csv` crate reads from `text` (as the bill reader sets it up): each record's
    /// line and cells, then its error, if any.
    fn csv_reads(text: &[u8], delimiter: u8) -> Reading {
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .delimiter(delimiter)
            .from_reader(text);
        let mut out = Vec::new();
        let mut record = csv::StringRecord::new();
        loop {
            match csv.read_record(&mut record) {
                Ok(false) => return (out, None),
                Ok(true) => out.push((
                    record.position().map_or(0, |p| record_line(text, p, None)),
                    record.iter().map(str::to_owned).collect(),
                )),
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }

    /// The splitter's reading, the `csv` crate taking over where it is unsure (as the bill
    /// reader does), and how many records the splitter read itself.
    fn split_reads(text: &[u8], delimiter: u8) -> (Reading, usize) {
        let mut split = Splitter::new(text, delimiter);
        let mut out = Vec::new();
        loop {
            match split.split() {
                Split::End => return ((out, None), usize::MAX),
                Split::Record(line, r) => {
                    out.push((
                        line,
                        (0..r.len())
                            .filter_map(|i| r.get(i))
                            .map(str::to_owned)
                            .collect(),
                    ));
                }
                Split::Unsure { records } => {
                    let own = out.len();
                    let (all, error) = csv_reads(text, delimiter);
                    out.extend(all.into_iter().skip(usize::try_from(records).unwrap_or(0)));
                    return ((out, error), own);
                }
            }
        }
    }

    #[test]
    fn splitter_reads_the_common_shape_and_hands_on_the_rest() {
        let text = b"a,b\r\n\n1,\"x\ny\",\"{\"\"k\"\":\"\"v\"\"}\"\n,\n\"\"\n3,4";
        let (read, own) = split_reads(text, b',');
        assert_eq!(read, csv_reads(text, b','));
        assert_eq!(own, usize::MAX, "all read by the splitter");
        assert_eq!(
            read.0[1],
            // On its own line, after the empty one.
            (3, vec!["1".into(), "x\ny".into(), "{\"k\":\"v\"}".into()])
        );
        // A quote inside an unquoted cell: the `csv` crate reads it, from that record on.
        let text = b"a,b\n1,x\"y\n3,4\n";
        let (read, own) = split_reads(text, b',');
        assert_eq!(read, csv_reads(text, b','));
        assert_eq!(own, 1);
    }

    /// Text made of `rows` (each: the empty lines before it, whether they and its own end
    /// are `\r\n`, its cells), with the line each row starts on, counted as it is written.
    fn planted(rows: &[(u8, bool, Vec<&str>)], comment: bool) -> (Vec<u8>, Vec<u64>) {
        let (mut text, mut lines, mut line) = (Vec::new(), Vec::new(), 1u64);
        for (i, (empty, crlf, cells)) in rows.iter().enumerate() {
            let end: &[u8] = if *crlf { b"\r\n" } else { b"\n" };
            for e in 0..*empty {
                if comment && e % 2 == 1 {
                    text.extend_from_slice(b"# a comment, \"quoted");
                }
                text.extend_from_slice(end);
                line += 1;
            }
            lines.push(line);
            // A line of nothing is no record: an empty cell there is written quoted.
            let row = match cells.join(",") {
                row if row.is_empty() => "\"\"".to_owned(),
                row => row,
            };
            line += row.bytes().filter(|&b| b == b'\n').count() as u64;
            text.extend_from_slice(row.as_bytes());
            if i + 1 < rows.len() || *crlf {
                text.extend_from_slice(end);
                line += 1;
            }
        }
        (text, lines)
    }

    #[test]
    fn record_line_is_the_line_a_record_starts_on() {
        let text = b"\xef\xbb\xbfh\r\n\r\n\r\na,\"x\r\ny\"\r\nb\n#c\n\n#d\nc";
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .comment(Some(b'#'))
            .from_reader(&text[..]);
        let lines: Vec<u64> = csv
            .records()
            .map(|r| {
                record_line(
                    text,
                    r.expect("CSV").position().expect("a position"),
                    Some(b'#'),
                )
            })
            .collect();
        // The crate's own: 1, 1 (the `\n` before `a`), 5 and 6 (before the lines it passed).
        assert_eq!(lines, [1, 4, 6, 10]);
    }

    #[test]
    fn cells_as_written_run_from_a_cell_to_the_next_separator() {
        let text = b"a,\"b\"\"c\",\"d\",e\r\n";
        let mut split = Splitter::new(text, b',');
        let Split::Record(_, r) = split.split() else {
            panic!("a record")
        };
        let written = |a, b| {
            r.written(a, b)
                .map(|w| String::from_utf8_lossy(w).into_owned())
        };
        assert_eq!(written(0, 0).as_deref(), Some("a,"));
        assert_eq!(written(1, 2).as_deref(), Some("\"b\"\"c\",\"d\","));
        assert_eq!(written(3, 3).as_deref(), Some("e\r"));
        assert_eq!(written(0, 3).as_deref(), Some("a,\"b\"\"c\",\"d\",e\r"));
        assert_eq!(written(2, 4), None);
        assert_eq!(written(4, 4), None);
    }

    proptest::proptest! {
        /// Rows planted with their lines, among empty and comment lines, `\n` or `\r\n`,
        /// cells quoted across lines: the `csv` crate's records placed by [`record_line`],
        /// and the splitter's, are on the lines they were written on.
        #[test]
        fn records_are_on_the_lines_they_were_written_on(
            rows in proptest::collection::vec(
                (
                    0u8..4,
                    proptest::bool::ANY,
                    proptest::collection::vec(
                        proptest::sample::select(vec![
                            "a", "", "x y", "\"p\nq\"", "\"r\"\"s\"", "\"\r\n\n\"",
                        ]),
                        1..4,
                    ),
                ),
                1..12,
            ),
            comment in proptest::bool::ANY,
        ) {
            let (text, lines) = planted(&rows, comment);
            let mut csv = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .comment(comment.then_some(b'#'))
                .from_reader(&text[..]);
            let mut read = Vec::new();
            for r in csv.records() {
                let r = r.map_err(|e| proptest::test_runner::TestCaseError::fail(e.to_string()))?;
                let at = r.position().expect("a position");
                read.push(record_line(&text, at, comment.then_some(b'#')));
            }
            proptest::prop_assert_eq!(&read, &lines);
            if !comment {
                let split: Vec<u64> = split_reads(&text, b',').0 .0.iter().map(|r| r.0).collect();
                proptest::prop_assert_eq!(split, lines);
            }
        }

        /// The splitter, with the `csv` crate taking over where it is unsure, reads what the
        /// `csv` crate reads: the same records, cells, lines and errors.
        #[test]
        fn splitter_reads_what_csv_reads(
            body in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", ",", ";", "\"", "\n", "\r", "\r\n", "é", "\u{fffd}",
                    "\"x,\ny\"\"z\"", "\"\"", "bb,cc\n", "\u{feff}",
                ]),
                0..60,
            ),
            invalid in proptest::option::of(0usize..80),
            semicolon in proptest::bool::ANY,
        ) {
            let mut text = body.concat().into_bytes();
            if let Some(at) = invalid.filter(|&at| at < text.len()) {
                text[at] = 0xff;
            }
            let delimiter = if semicolon { b';' } else { b',' };
            proptest::prop_assert_eq!(split_reads(&text, delimiter).0, csv_reads(&text, delimiter));
        }

        /// The fast path cuts the blocks the state machine cuts, record by record: the same
        /// bytes, lines, dropped records and errors, for any input, buffer, bound and target.
        #[test]
        fn fast_blocks_are_the_record_by_record_blocks(
            body in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", ",", ";", "\"", "\n", "\r", "aaaaaaaaaaaaaaaaaaaaaaaaaa",
                    ",\"a,a;a\naaaaaaaa\"\"aaaaaaaaaaaaaaaaaaaa\"", "\"\"",
                ]),
                0..120,
            ),
            buffer in 1usize..300,
            max in 2usize..120,
            target in 1usize..400,
            semicolon in proptest::bool::ANY,
        ) {
            let text = format!("h\n{}", body.concat()).into_bytes();
            let delimiter = if semicolon { b';' } else { b',' };
            let fast = cut(&text, buffer, max, delimiter, target, true);
            let slow = cut(&text, buffer, max, delimiter, target, false);
            proptest::prop_assert_eq!(
                fast.map_err(|e| e.to_string()),
                slow.map_err(|e| e.to_string())
            );
        }

        /// Against the `csv` crate: with room for every record the stream passes unchanged;
        /// with little room, what passes parses to records of the input, in order, and only
        /// records that were dropped are missing.
        #[test]
        fn record_limit_keeps_what_csv_reads(
            body in proptest::collection::vec(
                proptest::sample::select(vec![b'a', b',', b'"', b'\n']), 0..200),
            max in 2usize..40,
        ) {
            // A header that fits (a longer one is an error, tested below).
            let text = [b"h\n".as_slice(), &body].concat();
            let records = |bytes: &[u8]| -> Vec<Vec<String>> {
                csv::ReaderBuilder::new()
                    .has_headers(false)
                    .flexible(true)
                    .from_reader(bytes)
                    .records()
                    .map_while(Result::ok)
                    .map(|r| r.iter().map(str::to_owned).collect())
                    .collect()
            };
            let (all, dropped) = limited(&text, usize::MAX);
            proptest::prop_assert_eq!(all.as_bytes(), &text[..]);
            proptest::prop_assert!(dropped.is_empty());
            let (some, dropped) = limited(&text, max);
            let (from, kept) = (records(&text), records(some.as_bytes()));
            let mut rest = from.iter();
            for r in &kept {
                proptest::prop_assert!(rest.any(|f| f == r), "{:?} not in {:?}", r, from);
            }
            proptest::prop_assert!(kept.len() + dropped.len() >= from.len());
        }
    }
}
