//! A flat Parquet column chunk read page by page into keys: a dictionary-encoded value is its
//! index into the chunk's dictionary, which is decoded once; a plain value is decoded as it
//! comes. The `parquet` crate's column reader hands out every value (a string value is a
//! shared, reference-counted slice of its page, cloned and dropped per row), and the crate keeps
//! dictionary indices only on its Arrow path (the Arrow crates: see docs/crates.md). A bill's
//! columns repeat a few values over millions of rows, so the ledger converts each distinct
//! value once and hands rows on as keys ([`crate::focus`]).
//!
//! Read here: data pages v1 and v2 of flat columns (no repetition, at most one definition
//! level) whose values are `PLAIN`, `PLAIN_DICTIONARY` or `RLE_DICTIONARY` and whose definition
//! levels are `RLE`, of physical type `INT32`, `INT64`, `FLOAT`, `DOUBLE` or `BYTE_ARRAY`.
//! [`supported`] says whether a chunk's metadata promises only that; any other chunk is read
//! through the crate's column reader. A page that breaks the promise is an error.

use bytes::Bytes;
use parquet::basic::{Encoding, Type};
use parquet::column::page::{Page, PageReader};
use parquet::data_type::ByteArray;
use parquet::file::metadata::ColumnChunkMetaData;

/// A null: no value.
pub(crate) const NULL: u32 = u32::MAX;
/// Set on a key that indexes the batch's plain values, not the dictionary.
pub(crate) const PLAIN: u32 = 1 << 31;

/// One value as the page holds it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Raw {
    /// `INT32`.
    I32(i32),
    /// `INT64`.
    I64(i64),
    /// `FLOAT`.
    F32(f32),
    /// `DOUBLE`.
    F64(f64),
    /// `BYTE_ARRAY`: a slice of the page (no copy).
    Bytes(ByteArray),
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub(crate) struct PageError(String);

fn broken(what: impl Into<String>) -> PageError {
    PageError(what.into())
}

/// Whether [`Chunk`] reads this column chunk (see the module's list); else the crate's column
/// reader does.
#[must_use]
pub(crate) fn supported(meta: &ColumnChunkMetaData) -> bool {
    let d = meta.column_descr();
    d.max_rep_level() == 0
        && d.max_def_level() <= 1
        && matches!(
            d.physical_type(),
            Type::INT32 | Type::INT64 | Type::FLOAT | Type::DOUBLE | Type::BYTE_ARRAY
        )
        && meta.encodings().all(|e| {
            matches!(
                e,
                Encoding::PLAIN
                    | Encoding::PLAIN_DICTIONARY
                    | Encoding::RLE_DICTIONARY
                    | Encoding::RLE
            )
        })
}

/// The RLE / bit-packed hybrid (Parquet's `RLE` encoding) of values `width` bits wide.
struct Hybrid {
    buf: Bytes,
    pos: usize,
    width: u32,
    /// The current run: a repeated value, or bit-packed values from a bit offset.
    run: Run,
}

#[derive(Clone, Copy)]
enum Run {
    Repeat { value: u32, left: u32 },
    Packed { bit: usize, left: u32 },
}

impl Hybrid {
    fn new(buf: Bytes, width: u32) -> Result<Self, PageError> {
        if width > 32 {
            return Err(broken(format!("a bit width of {width}")));
        }
        Ok(Self {
            buf,
            pos: 0,
            width,
            run: Run::Repeat { value: 0, left: 0 },
        })
    }

    /// An unsigned LEB128 run header.
    fn header(&mut self) -> Result<u64, PageError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self
                .buf
                .get(self.pos)
                .ok_or_else(|| broken("a run header past the page's end"))?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(broken("a run header longer than ten bytes"))
    }

    fn next_run(&mut self) -> Result<(), PageError> {
        let h = self.header()?;
        let count = u32::try_from(h >> 1).map_err(|_| broken("a run longer than 2³² values"))?;
        if h & 1 == 0 {
            let bytes = self.width.div_ceil(8) as usize;
            let raw = self
                .buf
                .get(self.pos..self.pos + bytes)
                .ok_or_else(|| broken("a repeated value past the page's end"))?;
            let value = raw.iter().rev().fold(0u32, |v, &b| (v << 8) | u32::from(b));
            self.pos += bytes;
            self.run = Run::Repeat { value, left: count };
        } else {
            let groups = count as usize;
            let bytes = groups * self.width as usize;
            if self.pos + bytes > self.buf.len() {
                // Writers may end the last bit-packed run early: read what is there.
                let have = (self.buf.len() - self.pos) / self.width.max(1) as usize;
                self.run = Run::Packed {
                    bit: self.pos * 8,
                    left: u32::try_from(have * 8).unwrap_or(u32::MAX),
                };
                self.pos = self.buf.len();
            } else {
                self.run = Run::Packed {
                    bit: self.pos * 8,
                    left: u32::try_from(groups * 8)
                        .map_err(|_| broken("a run longer than 2³² values"))?,
                };
                self.pos += bytes;
            }
        }
        Ok(())
    }

    /// The `width` bits at bit offset `bit`.
    fn bits(&self, bit: usize) -> u32 {
        let at = bit / 8;
        let word = match self.buf.get(at..at + 8) {
            Some(eight) => <[u8; 8]>::try_from(eight).unwrap_or_default(),
            // The page's last bytes.
            None => {
                let mut word = [0u8; 8];
                let rest = self.buf.get(at..).unwrap_or_default();
                let have = rest.len().min(8);
                word[..have].copy_from_slice(&rest[..have]);
                word
            }
        };
        let w = u64::from_le_bytes(word) >> (bit % 8);
        let mask = if self.width == 32 {
            u64::from(u32::MAX)
        } else {
            (1u64 << self.width) - 1
        };
        // Masked to `width` ≤ 32 bits.
        #[allow(clippy::cast_possible_truncation)]
        let v = (w & mask) as u32;
        v
    }

    /// Hand the next `n` values to `each`, a repeated value as one call with its count.
    fn take(&mut self, mut n: u32, each: &mut impl FnMut(u32, u32)) -> Result<(), PageError> {
        while n > 0 {
            match self.run {
                Run::Repeat { left: 0, .. } | Run::Packed { left: 0, .. } => self.next_run()?,
                Run::Repeat { value, left } => {
                    let k = left.min(n);
                    each(value, k);
                    self.run = Run::Repeat {
                        value,
                        left: left - k,
                    };
                    n -= k;
                }
                Run::Packed { bit, left } => {
                    let k = left.min(n);
                    let w = self.width as usize;
                    for i in 0..k as usize {
                        each(self.bits(bit + i * w), 1);
                    }
                    self.run = Run::Packed {
                        bit: bit + k as usize * w,
                        left: left - k,
                    };
                    n -= k;
                }
            }
        }
        Ok(())
    }
}

/// The next `present` dictionary indices of `h` into `slots`, each checked against a
/// dictionary of `dict` entries.
fn keys_into<'k>(
    h: &mut Hybrid,
    present: u32,
    dict: u32,
    mut slots: impl Iterator<Item = &'k mut u32>,
) -> Result<(), PageError> {
    let mut bad = None;
    h.take(present, &mut |v, k| {
        if v >= dict {
            bad = Some(v);
        }
        for s in slots.by_ref().take(k as usize) {
            *s = v;
        }
    })?;
    match bad {
        Some(v) => Err(broken(format!(
            "dictionary index {v} of a dictionary of {dict} values"
        ))),
        None => Ok(()),
    }
}

/// A data page being read: its definition levels (`None`: a required column) and its values.
struct Current {
    rows_left: u32,
    defs: Option<Hybrid>,
    values: Values,
}

enum Values {
    /// Dictionary indices.
    Keys(Hybrid),
    /// Plain values from a byte offset.
    Plain { buf: Bytes, pos: usize },
}

/// A flat column chunk read into keys, [`Chunk::read`] rows at a time.
pub(crate) struct Chunk {
    pages: Box<dyn PageReader>,
    physical: Type,
    nullable: bool,
    /// The dictionary's entries (empty before its page).
    pub(crate) dictionary: Vec<Raw>,
    /// A dictionary page or a data page has been read: a dictionary page may only come first.
    started: bool,
    /// Rows of the row group not read yet: a page cannot claim more (a corrupt page header of
    /// billions of values over a few bytes of repeated runs reads no further).
    rows_left: u64,
    page: Option<Current>,
}

impl Chunk {
    /// A chunk of a column described by `meta` ([`supported`] must hold), read from `pages`,
    /// in a row group of `rows` rows.
    #[must_use]
    pub(crate) fn new(pages: Box<dyn PageReader>, meta: &ColumnChunkMetaData, rows: i64) -> Self {
        let d = meta.column_descr();
        Self {
            pages,
            physical: d.physical_type(),
            nullable: d.max_def_level() == 1,
            dictionary: Vec::new(),
            started: false,
            rows_left: u64::try_from(rows).unwrap_or(0),
            page: None,
        }
    }

    /// The next up to `max` rows: their keys into `keys` (cleared first) and the plain values
    /// they index into `plain` (cleared first). A key is an index into [`Chunk::dictionary`],
    /// [`PLAIN`] | an index into `plain`, or [`NULL`]. Returns the rows read, 0 at the chunk's
    /// end. A dictionary page met on the way replaces [`Chunk::dictionary`]; it comes first in a
    /// chunk, before any key indexes it.
    ///
    /// # Errors
    /// A page that cannot be read or decoded, or that breaks [`supported`]'s promise.
    pub(crate) fn read(
        &mut self,
        max: usize,
        keys: &mut Vec<u32>,
        plain: &mut Vec<Raw>,
    ) -> Result<usize, PageError> {
        keys.clear();
        plain.clear();
        while keys.len() < max {
            let Some(page) = self.page.as_mut().filter(|p| p.rows_left > 0) else {
                if !self.next_page()? {
                    break;
                }
                continue;
            };
            let n = u32::try_from((max - keys.len()) as u64)
                .unwrap_or(u32::MAX)
                .min(page.rows_left)
                .min(u32::try_from(self.rows_left).unwrap_or(u32::MAX));
            if n == 0 {
                break;
            }
            page.rows_left -= n;
            self.rows_left -= u64::from(n);
            let dict = u32::try_from(self.dictionary.len()).unwrap_or(u32::MAX);
            let physical = self.physical;
            // Non-null values in these rows, with where each null falls.
            let start = keys.len();
            let mut present = n;
            if let Some(defs) = page.defs.as_mut() {
                present = 0;
                defs.take(n, &mut |d, k| {
                    let key = if d == 1 { 0 } else { NULL };
                    if d == 1 {
                        present += k;
                    }
                    keys.extend(std::iter::repeat_n(key, k as usize));
                })?;
            } else {
                keys.extend(std::iter::repeat_n(0, n as usize));
            }
            // The values, in order, into the slots not null (with no null, the next `present`).
            let dense = present == n;
            let mut slots = keys[start..].iter_mut().filter(|k| **k != NULL);
            match &mut page.values {
                Values::Keys(h) if dense => {
                    let to = keys.get_mut(start..).unwrap_or_default().iter_mut();
                    keys_into(h, present, dict, to)?;
                }
                Values::Keys(h) => keys_into(h, present, dict, slots.by_ref())?,
                Values::Plain { buf, pos } => {
                    for s in slots.by_ref().take(present as usize) {
                        let i = u32::try_from(plain.len()).unwrap_or(u32::MAX);
                        if i >= PLAIN {
                            return Err(broken("a batch of more than 2³¹ plain values"));
                        }
                        plain.push(plain_value(physical, buf, pos)?);
                        *s = PLAIN | i;
                    }
                }
            }
        }
        Ok(keys.len())
    }

    /// Move to the next data page (reading a dictionary page on the way); `false` at the end.
    fn next_page(&mut self) -> Result<bool, PageError> {
        loop {
            let page = self
                .pages
                .get_next_page()
                .map_err(|e| broken(e.to_string()))?;
            let Some(page) = page else {
                return Ok(false);
            };
            match page {
                Page::DictionaryPage {
                    buf,
                    num_values,
                    encoding,
                    ..
                } => {
                    if std::mem::replace(&mut self.started, true) {
                        return Err(broken("a dictionary page after the chunk's first page"));
                    }
                    if !matches!(encoding, Encoding::PLAIN | Encoding::PLAIN_DICTIONARY) {
                        return Err(broken(format!("a dictionary page in {encoding}")));
                    }
                    let mut pos = 0;
                    self.dictionary = (0..num_values)
                        .map(|_| plain_value(self.physical, &buf, &mut pos))
                        .collect::<Result<_, _>>()?;
                }
                Page::DataPage {
                    buf,
                    num_values,
                    encoding,
                    def_level_encoding,
                    ..
                } => {
                    let (defs, rest) = if self.nullable {
                        if def_level_encoding != Encoding::RLE {
                            return Err(broken(format!(
                                "definition levels in {def_level_encoding}"
                            )));
                        }
                        let len = u32::from_le_bytes(bytes(&buf, &mut 0)?) as usize;
                        let levels = buf
                            .get(4..4 + len)
                            .ok_or_else(|| broken("definition levels past the page's end"))?;
                        (
                            Some(Hybrid::new(buf.slice_ref(levels), 1)?),
                            buf.slice(4 + len..),
                        )
                    } else {
                        (None, buf)
                    };
                    self.started = true;
                    self.start(num_values, defs, rest, encoding)?;
                    return Ok(true);
                }
                Page::DataPageV2 {
                    buf,
                    num_values,
                    encoding,
                    def_levels_byte_len,
                    rep_levels_byte_len,
                    ..
                } => {
                    if rep_levels_byte_len != 0 {
                        return Err(broken("repetition levels in a flat column"));
                    }
                    let len = def_levels_byte_len as usize;
                    let levels = buf
                        .get(..len)
                        .ok_or_else(|| broken("definition levels past the page's end"))?;
                    let defs = if self.nullable {
                        Some(Hybrid::new(buf.slice_ref(levels), 1)?)
                    } else {
                        None
                    };
                    let rest = buf.slice(len..);
                    self.started = true;
                    self.start(num_values, defs, rest, encoding)?;
                    return Ok(true);
                }
            }
        }
    }

    fn start(
        &mut self,
        rows: u32,
        defs: Option<Hybrid>,
        rest: Bytes,
        encoding: Encoding,
    ) -> Result<(), PageError> {
        let values = match encoding {
            Encoding::PLAIN => Values::Plain { buf: rest, pos: 0 },
            Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY => {
                let width = *rest
                    .first()
                    .ok_or_else(|| broken("a dictionary-encoded page without its bit width"))?;
                Values::Keys(Hybrid::new(rest.slice(1..), u32::from(width))?)
            }
            other => return Err(broken(format!("values in {other}"))),
        };
        self.page = Some(Current {
            rows_left: rows,
            defs,
            values,
        });
        Ok(())
    }
}

/// One plain-encoded value of type `t` at `pos` (moved past it).
fn plain_value(t: Type, buf: &Bytes, pos: &mut usize) -> Result<Raw, PageError> {
    Ok(match t {
        Type::INT32 => Raw::I32(i32::from_le_bytes(bytes(buf, pos)?)),
        Type::FLOAT => Raw::F32(f32::from_le_bytes(bytes(buf, pos)?)),
        Type::INT64 => Raw::I64(i64::from_le_bytes(bytes(buf, pos)?)),
        Type::DOUBLE => Raw::F64(f64::from_le_bytes(bytes(buf, pos)?)),
        Type::BYTE_ARRAY => {
            let len = u32::from_le_bytes(bytes(buf, pos)?) as usize;
            let b = buf
                .get(*pos..*pos + len)
                .ok_or_else(|| broken("a value past the page's end"))?;
            *pos += len;
            Raw::Bytes(ByteArray::from(buf.slice_ref(b)))
        }
        other => return Err(broken(format!("values of type {other}"))),
    })
}

/// The `N` bytes at `pos` (moved past them).
fn bytes<const N: usize>(buf: &Bytes, pos: &mut usize) -> Result<[u8; N], PageError> {
    let b: [u8; N] = buf
        .get(*pos..*pos + N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| broken("a value past the page's end"))?;
    *pos += N;
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::{Bytes, Hybrid};

    fn decode(bytes: &'static [u8], width: u32, n: u32) -> Result<Vec<u32>, String> {
        let mut h = Hybrid::new(Bytes::from_static(bytes), width).map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        h.take(n, &mut |v, k| {
            out.extend(std::iter::repeat_n(v, k as usize))
        })
        .map_err(|e| e.to_string())?;
        Ok(out)
    }

    /// The format's own examples (parquet-format, Encodings.md): a repeated run, the values
    /// 0–7 bit-packed three bits wide, both in one buffer; a short buffer is an error.
    #[test]
    fn the_hybrid_reads_the_formats_examples_and_refuses_short_buffers() {
        assert_eq!(decode(&[0x06, 0x05], 3, 3), Ok(vec![5, 5, 5]));
        // One group of eight: 10001000 11000110 11111010.
        assert_eq!(
            decode(&[0x03, 0b1000_1000, 0b1100_0110, 0b1111_1010], 3, 8),
            Ok((0..8).collect())
        );
        assert_eq!(
            decode(&[0x04, 0x07, 0x03, 0x88, 0xC6, 0xFA], 3, 10),
            Ok(vec![7, 7, 0, 1, 2, 3, 4, 5, 6, 7])
        );
        // Width 0 (a dictionary of one value): every value is 0, no value bytes.
        assert_eq!(decode(&[0x08], 0, 4), Ok(vec![0; 4]));
        assert!(
            decode(&[0x06], 3, 3).is_err(),
            "the repeated value is missing"
        );
        assert!(
            decode(&[0x06, 0x05], 3, 4).is_err(),
            "no run after the first"
        );
        assert!(decode(&[0x80, 0x80], 3, 1).is_err(), "a header cut short");
        assert!(Hybrid::new(Bytes::new(), 33).is_err());
    }
}
