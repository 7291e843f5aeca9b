//! Durations on the command line: `90s`, `10m`, `10min`, `1.5h`, `2d`, `500ms`.

/// Milliseconds of a duration string.
pub(crate) fn parse_ms(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("`{s}` is not a duration (try 30s, 10m, 1h, 7d)"))?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "" | "s" | "sec" => 1000.0,
        "m" | "min" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        other => return Err(format!("`{other}` is not a duration unit (ms, s, m, h, d)")),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("`{s}` is not a duration"));
    }
    let ms = v * factor;
    if ms > MAX_MS {
        return Err(format!("`{s}` is longer than a century"));
    }
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(ms.round() as u64)
}

/// A century in milliseconds: no duration this tool takes is longer.
const MAX_MS: f64 = 100.0 * 365.25 * 86_400_000.0;

/// Milliseconds of a duration that must be longer than zero (a timeout, an interval, a
/// window): `0s` is refused with the flag's name rather than dividing by zero later.
pub(crate) fn parse_positive_ms(flag: &str, s: &str) -> Result<u64, String> {
    match parse_ms(s) {
        Ok(0) => Err(format!("--{flag}: `{s}` must be longer than zero")),
        Ok(ms) => Ok(ms),
        Err(e) => Err(format!("--{flag}: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations() {
        assert_eq!(super::parse_ms("30s"), Ok(30_000));
        assert_eq!(super::parse_ms("10m"), Ok(600_000));
        assert_eq!(super::parse_ms("10min"), Ok(600_000));
        assert_eq!(super::parse_ms("1.5h"), Ok(5_400_000));
        assert_eq!(super::parse_ms("7d"), Ok(604_800_000));
        assert_eq!(super::parse_ms("500ms"), Ok(500));
        assert_eq!(super::parse_ms("45"), Ok(45_000));
        assert!(super::parse_ms("ten").is_err());
        assert!(super::parse_ms("5y").is_err());
        assert!(super::parse_ms("1e30d").is_err());
        assert!(super::parse_ms("200000d").is_err());
        assert_eq!(
            super::parse_positive_ms("timeout", "0s"),
            Err("--timeout: `0s` must be longer than zero".to_owned())
        );
        assert_eq!(super::parse_positive_ms("timeout", "2s"), Ok(2000));
    }
}
