//! Values as GPU tools print them: numbers with or without units, and the many spellings of
//! "no value" (`[N/A]`, `N/A`, `[Not Supported]`, `[Requested functionality has been
//! deprecated]`, `-`, empty). A missing value is `None`, never 0.

/// The unit family a column holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Percent: `%` or nothing.
    Percent,
    /// Memory: MiB, or `GiB`/`KiB`/`MB`/`GB` converted to MiB.
    Mib,
    /// Power: `W`, or `mW` converted.
    Watts,
}

/// Why a value could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadValue {
    /// Not a number.
    NotNumber,
    /// A unit that does not belong to the column.
    Unit(String),
}

/// Whether a field says "no value".
#[must_use]
pub fn is_missing(field: &[u8]) -> bool {
    field.is_empty() || field[0] == b'[' || field == b"N/A" || field == b"-"
}

/// Parse a trimmed field holding a number with an optional unit.
pub fn parse(field: &[u8], unit: Unit) -> Result<Option<f32>, BadValue> {
    if is_missing(field) {
        return Ok(None);
    }
    // The common shape first: a plain decimal, then nothing or a space and a unit.
    if let Some((v, n)) = decimal_prefix(field) {
        if n == field.len() {
            return scale(v, unit, b"");
        }
        if field[n] == b' ' {
            return scale(v, unit, trim(&field[n + 1..]));
        }
    }
    parse_general(field, unit)
}

/// [`parse`] of any shape: the number ends at the first space, or where a glued unit starts.
fn parse_general(field: &[u8], unit: Unit) -> Result<Option<f32>, BadValue> {
    let (num, suffix) = match field.iter().position(|c| *c == b' ') {
        Some(i) => (&field[..i], trim(&field[i + 1..])),
        None => split_glued_unit(field),
    };
    let v: f64 = parse_f64(num).ok_or(BadValue::NotNumber)?;
    scale(v, unit, suffix)
}

/// `v` in the column's unit, given the unit printed after it.
fn scale(v: f64, unit: Unit, suffix: &[u8]) -> Result<Option<f32>, BadValue> {
    let factor = match (unit, suffix) {
        (_, b"") | (Unit::Percent, b"%") | (Unit::Mib, b"MiB") | (Unit::Watts, b"W") => 1.0,
        (Unit::Mib, b"GiB") => 1024.0,
        (Unit::Mib, b"KiB") => 1.0 / 1024.0,
        // nvidia-smi and DCGM print MiB; a "MB" or "GB" label is taken as the binary unit they mean.
        (Unit::Mib, b"MB") => 1.0,
        (Unit::Mib, b"GB") => 1024.0,
        (Unit::Watts, b"mW") => 0.001,
        (_, other) => return Err(BadValue::Unit(String::from_utf8_lossy(other).into_owned())),
    };
    #[allow(clippy::cast_possible_truncation)]
    Ok(Some((v * factor) as f32))
}

fn split_glued_unit(field: &[u8]) -> (&[u8], &[u8]) {
    let i = field
        .iter()
        .rposition(|c| c.is_ascii_digit() || *c == b'.')
        .map_or(0, |i| i + 1);
    // Only split a trailing alphabetic or % unit ("100%", "80GiB"); keep "1e5", "NaN", "inf".
    if i > 0
        && i < field.len()
        && field[i..]
            .iter()
            .all(|c| c.is_ascii_alphabetic() || *c == b'%')
        && !field[..i].contains(&b'e')
    {
        (&field[..i], &field[i..])
    } else {
        (field, b"")
    }
}

/// Parse a decimal number; `NaN` and `inf` parse (and are dropped later by the sanitizer, with a
/// count), anything else that is not a number is `None`.
#[must_use]
pub fn fast_float(text: &str) -> Option<f64> {
    parse_f64(text.as_bytes())
}

/// Parse a number from bytes. Plain decimals of up to 15 significant digits (all that GPU
/// tools print: `81559`, `631.95`, `0.734000`) take Clinger's fast path (`decimal_prefix`).
/// Anything else (exponents, long mantissas, `NaN`, `inf`) goes to the standard library's
/// parser. Written by hand because this runs once per value of every line, and the standard
/// parser's generality (UTF-8 check, exponent and special-value handling) was a fifth of the
/// ingest time.
#[must_use]
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    match decimal_prefix(b) {
        Some((v, n)) if n == b.len() => Some(v),
        _ => std::str::from_utf8(b).ok()?.parse().ok(),
    }
}

/// A plain decimal (`81559`, `-12.5`, `5.`, `.5`) at the start of `b`: its value and length.
/// `None` when the number there is not plain (an exponent, more than 18 digits, a mantissa of
/// 2^53 or more, more than 15 decimals) and needs the general parser. The value is exact by
/// Clinger's fast path: an exact integer mantissa divided by an exact power of ten is
/// correctly rounded.
fn decimal_prefix(b: &[u8]) -> Option<(f64, usize)> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let (neg, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let mut mantissa: u64 = 0;
    let mut digits = 0;
    let mut frac_digits = 0;
    let mut in_frac = false;
    while let Some(&c) = b.get(i) {
        if c.is_ascii_digit() {
            mantissa = mantissa.wrapping_mul(10).wrapping_add(u64::from(c - b'0'));
            digits += 1;
            frac_digits += usize::from(in_frac);
        } else if c == b'.' && !in_frac {
            in_frac = true;
        } else {
            break;
        }
        i += 1;
    }
    let next_continues = b
        .get(i)
        .is_some_and(|c| matches!(c, b'.' | b'e' | b'E' | b'_'));
    if digits == 0 || digits > 18 || mantissa >= 1 << 53 || frac_digits > 15 || next_continues {
        return None;
    }
    #[allow(clippy::cast_precision_loss)]
    let v = mantissa as f64 / POW10[frac_digits];
    Some((if neg { -v } else { v }, i))
}

/// Positions of the commas of `line`. Each 64-byte block becomes a bit mask of its commas,
/// eight bytes at a time without branches (SWAR: a comma is a zero byte of `word ^ 0x2c2c…`,
/// found exactly with the carry-free test of Mycroft/Hacker's Delight, and the eight flags are
/// gathered into eight bits by one multiplication); the set bits are then walked. Written by
/// hand: the vectorized `memchr` is tuned for sparse hits, while a telemetry line has a comma
/// every dozen bytes, and `unsafe` SIMD intrinsics are not used in this project.
pub fn comma_spans(line: &[u8], spans: &mut Vec<(usize, usize)>) {
    spans.clear();
    comma_spans_from(line, 0, spans);
}

/// Like [`comma_spans`] for the fields of `line[from..]` (positions in `line`), appended to
/// `spans`.
pub fn comma_spans_from(line: &[u8], from: usize, spans: &mut Vec<(usize, usize)>) {
    let mut start = from;
    let mut walk = |mut hits: u64, base: usize| {
        while hits != 0 {
            let pos = base + hits.trailing_zeros() as usize;
            spans.push((start, pos));
            start = pos + 1;
            hits &= hits - 1;
        }
    };
    let mut base = from;
    let mut blocks = line[from..].chunks_exact(64);
    for block in &mut blocks {
        let mut mask = 0u64;
        for (k, word) in block.chunks_exact(8).enumerate() {
            mask |= comma_bits(word) << (8 * k);
        }
        walk(mask, base);
        base += 64;
    }
    let rest = blocks.remainder();
    if !rest.is_empty() {
        let mut pad = [0u8; 64];
        pad[..rest.len()].copy_from_slice(rest);
        let mut mask = 0u64;
        for (k, word) in pad.chunks_exact(8).take(rest.len().div_ceil(8)).enumerate() {
            mask |= comma_bits(word) << (8 * k);
        }
        walk(mask, base);
    }
    spans.push((start, line.len()));
}

/// Bit `k` set where byte `k` of an eight-byte word is a comma.
#[inline]
fn comma_bits(word: &[u8]) -> u64 {
    const COMMAS: u64 = 0x2c2c_2c2c_2c2c_2c2c;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let mut w = [0u8; 8];
    w.copy_from_slice(word);
    let t = u64::from_le_bytes(w) ^ COMMAS;
    // 0x80 in each byte that was a comma, 0 elsewhere.
    let flags = !(((t & LOW7) + LOW7) | t | LOW7);
    // Move the eight flag bits (7, 15, …, 63) to bits 56..64, then down to 0..8.
    (flags >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Whether two short byte strings are equal, compared as overlapping machine words: the fields
/// compared on every line (a timestamp, a device id, a value against its last reading) are
/// 2–40 bytes long, where a call into `memcmp` costs more than the comparison itself.
#[inline]
#[must_use]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    fn word(s: &[u8], at: usize) -> u64 {
        let mut w = [0u8; 8];
        w.copy_from_slice(&s[at..at + 8]);
        u64::from_le_bytes(w)
    }
    fn half(s: &[u8], at: usize) -> u32 {
        let mut w = [0u8; 4];
        w.copy_from_slice(&s[at..at + 4]);
        u32::from_le_bytes(w)
    }
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        // Whole words from the front, then the last word (overlapping the one before it).
        let mut at = 0;
        while at + 8 < n {
            if word(a, at) != word(b, at) {
                return false;
            }
            at += 8;
        }
        word(a, n - 8) == word(b, n - 8)
    } else if n >= 4 {
        half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4)
    } else {
        a.iter().zip(b).all(|(x, y)| x == y)
    }
}

/// The lines of `data` (split at `\n`, found with memchr), including a last unterminated one.
pub fn lines(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut start = 0;
    let mut ends = memchr::memchr_iter(b'\n', data);
    std::iter::from_fn(move || {
        if start > data.len() {
            return None;
        }
        let end = ends.next().unwrap_or(data.len());
        let line = &data[start..end];
        start = end + 1;
        if end == data.len() && line.is_empty() {
            return None;
        }
        Some(line)
    })
}

/// Trim ASCII spaces and tabs (and a trailing `\r`).
#[must_use]
pub fn trim(mut b: &[u8]) -> &[u8] {
    // The common case in a few compares: the one space after a separator, then a field that
    // starts and ends with a visible character (ASCII whitespace is at most 0x20).
    if let [b' ', rest @ ..] = b {
        b = rest;
    }
    match b {
        [c] if *c > b' ' => return b,
        [first, .., last] if *first > b' ' && *last > b' ' => return b,
        _ => {}
    }
    while let [first, rest @ ..] = b {
        if *first <= b' ' && first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if *last <= b' ' && last.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_and_without_units() {
        assert_eq!(parse(b"81559 MiB", Unit::Mib), Ok(Some(81559.0)));
        assert_eq!(parse(b"80 GiB", Unit::Mib), Ok(Some(81920.0)));
        assert_eq!(parse(b"631.95 W", Unit::Watts), Ok(Some(631.95)));
        assert_eq!(parse(b"100 %", Unit::Percent), Ok(Some(100.0)));
        assert_eq!(parse(b"100%", Unit::Percent), Ok(Some(100.0)));
        assert_eq!(parse(b"41", Unit::Percent), Ok(Some(41.0)));
        for missing in [
            &b"[N/A]"[..],
            b"N/A",
            b"[Not Supported]",
            b"[Requested functionality has been deprecated]",
            b"-",
            b"",
        ] {
            assert_eq!(parse(missing, Unit::Percent), Ok(None));
        }
        assert_eq!(parse(b"abc", Unit::Percent), Err(BadValue::NotNumber));
        assert_eq!(
            parse(b"12 MHz", Unit::Percent),
            Err(BadValue::Unit("MHz".into()))
        );
        assert!(
            parse(b"NaN", Unit::Percent)
                .expect("parses")
                .is_some_and(f32::is_nan)
        );
    }

    #[test]
    fn comma_spans_match_split() {
        let mut spans = Vec::new();
        for line in [
            &b""[..],
            b",",
            b"a,b",
            b"2026/07/14 08:12:53.353, NVIDIA H100 80GB HBM3, 00000000:00:09.0, GPU-0",
            b",,,,,,,,,",
            b"12345678,",
            b"x,yyyyyyyyyyyyyyyy,z",
        ] {
            comma_spans(line, &mut spans);
            let ours: Vec<&[u8]> = spans.iter().map(|(a, z)| &line[*a..*z]).collect();
            let std: Vec<&[u8]> = line.split(|c| *c == b',').collect();
            assert_eq!(ours, std, "{}", String::from_utf8_lossy(line));
        }
    }

    /// Calls `check` with every string of up to `max_len` symbols from `alphabet`.
    fn every_string(alphabet: &[u8], max_len: u32, mut check: impl FnMut(&[u8])) {
        let mut field = Vec::new();
        for len in 0..=max_len {
            for mut code in 0..alphabet.len().pow(len) {
                field.clear();
                for _ in 0..len {
                    field.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                check(&field);
            }
        }
    }

    #[test]
    fn fast_shape_parses_like_the_general_path() {
        // Every field of up to five symbols drawn from the characters values are made of.
        every_string(b"07.-e W%Mi", 5, |field| {
            let f = trim(field);
            if is_missing(f) {
                return;
            }
            for unit in [Unit::Percent, Unit::Mib, Unit::Watts] {
                let (fast, general) = (parse(f, unit), parse_general(f, unit));
                let same = fast == general
                    || matches!((&fast, &general), (Ok(Some(a)), Ok(Some(b))) if a.is_nan() && b.is_nan());
                assert!(
                    same,
                    "{}: {fast:?} vs {general:?}",
                    String::from_utf8_lossy(f)
                );
            }
        });
    }

    #[test]
    fn trim_is_trim_ascii() {
        every_string(b" \t\r\n\x0ca,", 6, |field| {
            assert_eq!(trim(field), field.trim_ascii(), "{field:?}");
        });
    }

    #[test]
    fn same_is_slice_equality() {
        let text = b"GPU-d44db82e-fbfe-8933-725c-db0a83bf1e22, 46068 MiB";
        for i in 0..text.len() {
            for j in i..=text.len() {
                for k in 0..text.len() {
                    for l in k..=text.len() {
                        let (a, b) = (&text[i..j], &text[k..l]);
                        assert_eq!(same(a, b), a == b, "{i}..{j} vs {k}..{l}");
                    }
                }
            }
        }
        assert!(!same(b"350.00 W", b"350.01 W"));
        assert!(!same(b"1", b"2"));
    }

    #[test]
    fn lines_split_like_split() {
        for text in [&b"a\nb\n"[..], b"a\nb", b"", b"\n\nx", b"x\n\n"] {
            let ours: Vec<&[u8]> = lines(text).collect();
            let mut std: Vec<&[u8]> = text.split(|c| *c == b'\n').collect();
            if std.last().is_some_and(|l| l.is_empty()) {
                std.pop();
            }
            assert_eq!(ours, std, "{}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn fast_path_matches_the_standard_parser() {
        for t in [
            "0",
            "81559",
            "631.95",
            "0.734000",
            "-12.5",
            "+3",
            "1e5",
            "12345678901234567890",
            "0.1",
            "140737488355328.000000",
            "NaN",
            "inf",
            ".5",
            "5.",
            "007",
            "0.000001",
        ] {
            let std: Option<f64> = t.parse().ok();
            let fast = parse_f64(t.as_bytes());
            assert!(
                std == fast || std.is_some_and(f64::is_nan) && fast.is_some_and(f64::is_nan),
                "{t}: {std:?} vs {fast:?}"
            );
        }
        for bad in ["", "-", ".", "1.2.3", "12a", "abc"] {
            assert_eq!(parse_f64(bad.as_bytes()), None, "{bad}");
        }
    }
}
