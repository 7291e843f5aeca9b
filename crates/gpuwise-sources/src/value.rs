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
    let (num, suffix) = match field.iter().position(|c| *c == b' ') {
        Some(i) => (&field[..i], trim(&field[i + 1..])),
        None => split_glued_unit(field),
    };
    let v: f64 = parse_f64(num).ok_or(BadValue::NotNumber)?;
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
/// tools print: `81559`, `631.95`, `0.734000`) take Clinger's fast path: an exact integer
/// mantissa divided by an exact power of ten is correctly rounded. Anything else (exponents,
/// long mantissas, `NaN`, `inf`) goes to the standard library's parser. Written by hand because
/// this runs once per value of every line, and the standard parser's generality (UTF-8 check,
/// exponent and special-value handling) was a fifth of the ingest time.
#[must_use]
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    const POW10: [f64; 16] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];
    let slow = || std::str::from_utf8(b).ok()?.parse().ok();
    let (neg, digits) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let mut i = 0;
    let mut mantissa: u64 = 0;
    while i < digits.len() && digits[i].is_ascii_digit() && i < 19 {
        mantissa = mantissa * 10 + u64::from(digits[i] - b'0');
        i += 1;
    }
    let int_digits = i;
    let mut frac_digits = 0;
    if i < digits.len() && digits[i] == b'.' {
        i += 1;
        let start = i;
        while i < digits.len() && digits[i].is_ascii_digit() && i < 20 {
            mantissa = mantissa * 10 + u64::from(digits[i] - b'0');
            i += 1;
        }
        frac_digits = i - start;
    }
    // Clinger's fast path needs an exact mantissa (< 2^53) and an exact power of ten.
    if i != digits.len() || int_digits + frac_digits == 0 || mantissa >= 1 << 53 || frac_digits > 15
    {
        return slow();
    }
    #[allow(clippy::cast_precision_loss)]
    let v = if frac_digits == 0 {
        mantissa as f64
    } else {
        mantissa as f64 / POW10[frac_digits]
    };
    Some(if neg { -v } else { v })
}

/// Positions of the commas of `line`, eight bytes at a time (SWAR: a comma is a zero byte of
/// `word ^ 0x2c2c…`, found exactly with the carry-free test of Mycroft/Hacker's Delight).
/// Written by hand: the vectorized `memchr` is tuned for sparse hits, while a telemetry line
/// has a comma every few bytes.
pub fn comma_spans(line: &[u8], spans: &mut Vec<(usize, usize)>) {
    const COMMAS: u64 = 0x2c2c_2c2c_2c2c_2c2c;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    spans.clear();
    let mut start = 0;
    let mut base = 0;
    let mut chunks = line.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let t = u64::from_le_bytes(word) ^ COMMAS;
        let mut hits = !(((t & LOW7) + LOW7) | t | LOW7);
        while hits != 0 {
            let pos = base + (hits.trailing_zeros() / 8) as usize;
            spans.push((start, pos));
            start = pos + 1;
            hits &= hits - 1;
        }
        base += 8;
    }
    for (k, c) in chunks.remainder().iter().enumerate() {
        if *c == b',' {
            spans.push((start, base + k));
            start = base + k + 1;
        }
    }
    spans.push((start, line.len()));
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
    while let [first, rest @ ..] = b {
        if first.is_ascii_whitespace() {
            b = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = b {
        if last.is_ascii_whitespace() {
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
