//! The window a request asks for: `?last=7d`, `?start=…&end=…`, or everything kept.

use gpuwise_core::EpochMs;

/// What a request asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Span {
    /// Everything kept (the default).
    All,
    /// This long up to the newest data.
    Last(u64),
    /// From `start` (or the first data) to `end` (exclusive; or the newest data).
    Range(Option<EpochMs>, Option<EpochMs>),
}

/// A window that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadWindow(pub String);

/// `7d`, `36h`, `90m`, `2w`, `1.5d`: a length of time in milliseconds, in the grammar every
/// duration of gpuwise has ([`gpuwise_core::duration`]), longer than zero.
pub fn parse_length(s: &str) -> Result<u64, BadWindow> {
    match gpuwise_core::duration::parse_ms(s) {
        Ok(0) => Err(BadWindow(format!(
            "`{}` is not a usable length of time",
            s.trim()
        ))),
        Ok(ms) => Ok(ms),
        Err(e) => Err(BadWindow(e.0)),
    }
}

/// An RFC 3339 instant, an epoch in seconds, or a date (UTC): its start, or with `end_of_day`
/// the start of the next day (so `end=2026-01-09` takes in all of the 9th).
pub fn parse_time(s: &str, end_of_day: bool) -> Result<EpochMs, BadWindow> {
    let s = s.trim();
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    if let Ok(d) = s.parse::<jiff::civil::Date>() {
        let day = if end_of_day {
            d.tomorrow().map_err(|e| BadWindow(format!("`{s}`: {e}")))?
        } else {
            d
        };
        return day
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .map(|z| z.timestamp().as_millisecond())
            .map_err(|e| BadWindow(format!("`{s}`: {e}")));
    }
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<i64>()
            .ok()
            .and_then(|v| v.checked_mul(1000))
            .ok_or_else(|| BadWindow(format!("`{s}` is not an epoch")));
    }
    Err(BadWindow(format!(
        "`{s}` is not a time (RFC 3339, YYYY-MM-DD or epoch seconds)"
    )))
}

/// The span of a request's `start`, `end` and `last` (empty values are absent, as an HTML
/// form sends them).
pub fn span(start: Option<&str>, end: Option<&str>, last: Option<&str>) -> Result<Span, BadWindow> {
    fn present(v: Option<&str>) -> Option<&str> {
        v.map(str::trim).filter(|v| !v.is_empty())
    }
    let (start, end, last) = (present(start), present(end), present(last));
    if let Some(l) = last {
        if start.is_some() || end.is_some() {
            return Err(BadWindow("give `last` or `start`/`end`, not both".into()));
        }
        return parse_length(l).map(Span::Last);
    }
    if start.is_none() && end.is_none() {
        return Ok(Span::All);
    }
    let a = start.map(|s| parse_time(s, false)).transpose()?;
    let b = end.map(|s| parse_time(s, true)).transpose()?;
    if let (Some(a), Some(b)) = (a, b)
        && a >= b
    {
        return Err(BadWindow("`start` must be before `end`".into()));
    }
    Ok(Span::Range(a, b))
}

/// The tiles of `span` over data in tiles `first..end` whose newest sample is at `last_ms`,
/// widened to whole tiles and clipped to the data; `None` when the span misses the data.
/// `last` is the length ending at the newest sample, `(last − N, last]`: the tiles from the
/// one that holds its first millisecond to the one that holds the newest sample. (Counted in
/// tiles back from the newest tile, `last=7d` was six days when the newest sample opened a
/// tile of its own at midnight, and `last=1d` that tile alone: no hours, $0.)
#[must_use]
pub fn tiles(
    span: &Span,
    first: i64,
    end: i64,
    last_ms: EpochMs,
    tile_ms: u64,
) -> Option<(i64, i64)> {
    let t = i64::try_from(tile_ms.max(1)).unwrap_or(i64::MAX);
    let (a, b) = match span {
        Span::All => (first, end),
        Span::Last(ms) => {
            let from = last_ms.saturating_sub(i64::try_from(*ms).unwrap_or(i64::MAX));
            (
                from.saturating_add(1).div_euclid(t),
                last_ms.div_euclid(t).saturating_add(1),
            )
        }
        Span::Range(s, e) => (
            s.map_or(first, |s| s.div_euclid(t)),
            e.map_or(end, |e| e.saturating_add(t - 1).div_euclid(t)),
        ),
    };
    let (a, b) = (a.max(first), b.min(end));
    (a < b).then_some((a, b))
}

/// The query string that asks for `span` again (kept in the dashboard's links).
#[must_use]
pub fn query(start: Option<&str>, end: Option<&str>, last: Option<&str>) -> String {
    let mut q = Vec::new();
    for (k, v) in [("last", last), ("start", start), ("end", end)] {
        if let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) {
            q.push(format!("{k}={}", crate::dashboard::url_escape(v)));
        }
    }
    q.join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000;

    #[test]
    fn lengths_and_times() {
        assert_eq!(parse_length("7d"), Ok(7 * 86_400_000));
        assert_eq!(parse_length("90m"), Ok(90 * 60_000));
        assert!(parse_length("7").is_err());
        // The CLI's grammar: fractions and weeks alike (`?last=1.5d` was refused here, `2w` by
        // the CLI's --last).
        assert_eq!(parse_length("1.5d"), Ok(36 * 3_600_000));
        assert_eq!(parse_length("2w"), Ok(14 * 86_400_000));
        assert!(parse_length("0d").is_err());
        assert!(parse_length("99999999999999999w").is_err());
        assert_eq!(parse_time("1970-01-02", false), Ok(DAY));
        assert_eq!(parse_time("1970-01-02", true), Ok(2 * DAY));
        assert_eq!(parse_time("1970-01-01T01:00:00Z", false), Ok(3_600_000));
        assert_eq!(parse_time("86400", false), Ok(DAY));
        assert!(parse_time("yesterday", false).is_err());
    }

    #[test]
    fn spans_and_their_tiles() {
        assert_eq!(span(None, Some(""), Some("")), Ok(Span::All));
        assert!(span(Some("1970-01-02"), None, Some("1d")).is_err());
        assert!(span(Some("1970-01-03"), Some("1970-01-02"), None).is_err());
        let day = 86_400_000;
        // Data in days 10..20, the newest sample at noon on day 19.
        let noon = 19 * DAY + DAY / 2;
        assert_eq!(tiles(&Span::All, 10, 20, noon, day), Some((10, 20)));
        // The three days before noon on the 19th: from noon on the 16th, so days 16 to 19.
        assert_eq!(
            tiles(&Span::Last(3 * day), 10, 20, noon, day),
            Some((16, 20))
        );
        assert_eq!(
            tiles(&Span::Last(30 * day), 10, 20, noon, day),
            Some((10, 20))
        );
        // The newest sample exactly at midnight opens day 20 alone: last=7d is days 13 to 19
        // (seven whole days) and day 20's sample, which closes the 19th's last interval;
        // last=1d is the 19th and that sample, not the empty tile.
        let midnight = 20 * DAY;
        assert_eq!(
            tiles(&Span::Last(7 * day), 10, 21, midnight, day),
            Some((13, 21))
        );
        assert_eq!(
            tiles(&Span::Last(day), 10, 21, midnight, day),
            Some((19, 21))
        );
        // A range inside a day widens to the whole day; one outside the data is none.
        let r = Span::Range(Some(12 * DAY + 5), Some(12 * DAY + 10));
        assert_eq!(tiles(&r, 10, 20, noon, day), Some((12, 13)));
        assert_eq!(
            tiles(&Span::Range(Some(30 * DAY), None), 10, 20, noon, day),
            None
        );
        assert_eq!(
            tiles(&Span::Range(None, Some(11 * DAY)), 10, 20, noon, day),
            Some((10, 11))
        );
    }
}
