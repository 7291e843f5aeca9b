//! # Lengths of time, one grammar everywhere
//!
//! Every duration gpuwise reads — command-line flags, the config file, the server's `?last=` —
//! is a number and a unit: `500ms`, `90s`, `10m` (or `min`), `1.5h`, `2d`, `2w`. A number
//! without a unit is refused with the units named (`--deadline 48` meant 48 seconds, silently),
//! except `0`, which is zero in any unit. Flags whose name carries the unit (`--work-hours`)
//! take a plain number instead.
//!
//! Written here rather than taken from `jiff` (already in the tree), whose friendly format
//! reads a wider grammar (`1h 30m`, `2 hours`, ISO 8601 `PT1H`) with days as calendar days:
//! one short grammar, refusing a bare number with a message naming the units, is what every
//! flag, config key and query parameter documents.

/// A duration that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DurationError(pub String);

/// A century in milliseconds: no duration this tool takes is longer.
const MAX_MS: f64 = 100.0 * 365.25 * 86_400_000.0;

/// Milliseconds of a duration (see the module's grammar).
///
/// # Errors
/// [`DurationError`] saying what is wrong and how to write it.
pub fn parse_ms(s: &str) -> Result<u64, DurationError> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num.parse().map_err(|_| {
        DurationError(format!(
            "`{s}` is not a duration (try 30s, 10m, 1h, 7d, 2w)"
        ))
    })?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "s" | "sec" => 1000.0,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        "w" => 7.0 * 86_400_000.0,
        "" if v == 0.0 => 0.0,
        "" => {
            return Err(DurationError(format!(
                "`{s}` has no unit: write {num}s, {num}m, {num}h, {num}d or {num}w"
            )));
        }
        other => {
            return Err(DurationError(format!(
                "`{other}` is not a unit of time (ms, s, m, h, d, w)"
            )));
        }
    };
    if !v.is_finite() {
        return Err(DurationError(format!("`{s}` is not a duration")));
    }
    let ms = v * factor;
    if ms > MAX_MS {
        return Err(DurationError(format!("`{s}` is longer than a century")));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(ms.round() as u64)
}

/// A duration as people write it: the largest unit that keeps it whole or short (`90 s`,
/// `12 min`, `1.5 h`, `2 d`), never a long float.
#[must_use]
pub fn human(ms: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let v = ms as f64;
    let (n, unit) = if ms < 1000 {
        return format!("{ms} ms");
    } else if ms < 60_000 {
        (v / 1000.0, "s")
    } else if ms < 3_600_000 {
        (v / 60_000.0, "min")
    } else if ms < 2 * 86_400_000 {
        (v / 3_600_000.0, "h")
    } else {
        (v / 86_400_000.0, "d")
    };
    let rounded = (n * 10.0).round() / 10.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0} {unit}")
    } else {
        format!("{rounded:.1} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar() {
        for (s, ms) in [
            ("500ms", 500),
            ("30s", 30_000),
            ("30sec", 30_000),
            ("10m", 600_000),
            ("10min", 600_000),
            ("1.5h", 5_400_000),
            ("7d", 604_800_000),
            ("2w", 1_209_600_000),
            ("0", 0),
            (" 45s ", 45_000),
        ] {
            assert_eq!(parse_ms(s), Ok(ms), "{s}");
        }
        assert_eq!(
            parse_ms("48").map_err(|e| e.0),
            Err("`48` has no unit: write 48s, 48m, 48h, 48d or 48w".to_owned())
        );
        for bad in ["ten", "5y", "1e30d", "200000d", "-5m", "", "h"] {
            assert!(parse_ms(bad).is_err(), "{bad}");
        }
        assert_eq!(human(500), "500 ms");
        assert_eq!(human(10_000), "10 s");
        assert_eq!(human(600_000), "10 min");
        assert_eq!(human(5_400_000), "1.5 h");
        assert_eq!(human(3 * 86_400_000), "3 d");
    }

    proptest::proptest! {
        /// Every value written as number + unit reads back as that many milliseconds, up to a
        /// century; beyond, an error.
        #[test]
        fn written_durations_read_back(n in 0u32..100_000, unit in 0usize..6) {
            let (suffix, factor) = [("ms", 1u64), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000), ("w", 604_800_000)][unit];
            let ms = u64::from(n) * factor;
            let read = parse_ms(&format!("{n}{suffix}"));
            #[allow(clippy::cast_precision_loss)]
            if ms as f64 > MAX_MS {
                proptest::prop_assert!(read.is_err());
            } else {
                proptest::prop_assert_eq!(read, Ok(ms));
            }
        }
    }
}
