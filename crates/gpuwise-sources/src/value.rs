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
    let (num, suffix) = match memchr::memchr(b' ', field) {
        Some(i) => (&field[..i], trim(&field[i + 1..])),
        None => split_glued_unit(field),
    };
    let text = std::str::from_utf8(num).map_err(|_| BadValue::NotNumber)?;
    let v: f64 = fast_float(text).ok_or(BadValue::NotNumber)?;
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
    text.parse::<f64>().ok()
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
}
