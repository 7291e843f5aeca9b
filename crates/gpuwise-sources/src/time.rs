//! Timestamp parsing for the readers: fast fixed-layout paths for the formats GPU tools print,
//! and local-time → UTC conversion with a per-hour cache.
//!
//! Written by hand because the hot loop parses one timestamp per line (tens of millions per
//! run): a fixed-layout digit parser is several times faster than a general `strptime`, and the
//! time-zone offset only changes at hour boundaries, so it is looked up once per local hour.

use gpuwise_core::EpochMs;
use jiff::tz::{AmbiguousOffset, TimeZone};

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
#[must_use]
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The value of a short run of ASCII digits; `None` if empty, not all digits, or too large.
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() {
        return None;
    }
    let mut v = 0u32;
    for c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u32::from(c - b'0'))?;
    }
    Some(v)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Local (naive) milliseconds since 1970-01-01 00:00 of `Y?M?D H:M:S[.fff]`, where `?` is `/`
/// or `-` and the separator between date and time is a space or `T`. `None` if malformed.
#[must_use]
pub fn parse_naive(s: &[u8]) -> Option<i64> {
    if s.len() < 19 {
        return None;
    }
    Some(parse_date(&s[..10])? * gpuwise_core::DAY_MS + parse_time(&s[10..])?)
}

/// Days since 1970-01-01 of `YYYY/MM/DD` or `YYYY-MM-DD`.
fn parse_date(s: &[u8]) -> Option<i64> {
    let (y, mo, d) = (digits(&s[0..4])?, digits(&s[5..7])?, digits(&s[8..10])?);
    if !matches!(s[4], b'/' | b'-')
        || s[7] != s[4]
        || !(1..=12).contains(&mo)
        || d == 0
        || d > days_in_month(i64::from(y), mo)
    {
        return None;
    }
    Some(days_from_civil(i64::from(y), mo, d))
}

/// Milliseconds into the day of ` HH:MM:SS[.fff]` (or `T…`).
fn parse_time(s: &[u8]) -> Option<i64> {
    if s.len() < 9 || !matches!(s[0], b' ' | b'T') || s[3] != b':' || s[6] != b':' {
        return None;
    }
    let (h, mi, sec) = (digits(&s[1..3])?, digits(&s[4..6])?, digits(&s[7..9])?);
    if h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut ms = 0u32;
    if s.len() > 9 {
        if s[9] != b'.' || s.len() == 10 {
            return None;
        }
        let frac = &s[10..];
        let take = frac.len().min(3);
        ms = digits(&frac[..take])? * [100, 10, 1][take - 1];
        // Digits past milliseconds are checked, not used.
        if !frac[take..].iter().all(u8::is_ascii_digit) {
            return None;
        }
    }
    Some(i64::from(h * 3600 + mi * 60 + sec.min(59)) * 1000 + i64::from(ms))
}

/// [`parse_naive`] that remembers the previous line's date: consecutive lines of a log share
/// it, so the calendar arithmetic runs once a day instead of once a line.
#[derive(Clone, Debug, Default)]
pub struct NaiveParser {
    date: [u8; 10],
    days: Option<i64>,
}

impl NaiveParser {
    /// Like [`parse_naive`].
    pub fn parse(&mut self, s: &[u8]) -> Option<i64> {
        if s.len() < 19 {
            return None;
        }
        let days = match self.days {
            Some(d) if s[..10] == self.date => d,
            _ => {
                let d = parse_date(&s[..10])?;
                self.date.copy_from_slice(&s[..10]);
                self.days = Some(d);
                d
            }
        };
        Some(days * gpuwise_core::DAY_MS + parse_time(&s[10..])?)
    }
}

/// Local milliseconds of a civil date and time, validating ranges.
#[must_use]
pub fn naive_ms(y: i64, mo: u32, d: u32, h: u32, mi: u32, sec: u32, ms: u32) -> Option<i64> {
    if !(1..=12).contains(&mo)
        || d == 0
        || d > days_in_month(y, mo)
        || h > 23
        || mi > 59
        || sec > 60
    {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400 + i64::from(h * 3600 + mi * 60 + sec.min(59));
    Some(secs * 1000 + i64::from(ms))
}

/// What happened converting a local time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalKind {
    /// One instant.
    Unique,
    /// Inside a DST fold (the hour repeats): the first occurrence was assumed.
    Ambiguous,
    /// Inside a DST gap (the hour does not exist): read with the offset before the gap.
    Skipped,
}

/// Converts naive local milliseconds to UTC in one time zone, caching the offset per hour.
#[derive(Clone, Debug)]
pub struct LocalClock {
    tz: TimeZone,
    fixed: Option<i64>,
    cache_hour: i64,
    cache: (i64, LocalKind),
}

impl LocalClock {
    /// A clock for `tz`.
    #[must_use]
    pub fn new(tz: TimeZone) -> Self {
        let fixed = tz
            .to_fixed_offset()
            .ok()
            .map(|o| i64::from(o.seconds()) * 1000);
        Self {
            tz,
            fixed,
            cache_hour: i64::MIN,
            cache: (0, LocalKind::Unique),
        }
    }

    /// UTC milliseconds of naive local `local_ms`.
    pub fn to_utc(&mut self, local_ms: i64) -> (EpochMs, LocalKind) {
        if let Some(off) = self.fixed {
            return (local_ms - off, LocalKind::Unique);
        }
        let hour = local_ms.div_euclid(gpuwise_core::HOUR_MS);
        if hour != self.cache_hour {
            self.cache_hour = hour;
            self.cache = self.lookup(hour * gpuwise_core::HOUR_MS);
        }
        (local_ms - self.cache.0, self.cache.1)
    }

    fn lookup(&self, local_hour_ms: i64) -> (i64, LocalKind) {
        let Ok(ts) = jiff::Timestamp::from_millisecond(local_hour_ms) else {
            return (0, LocalKind::Unique);
        };
        // The naive local time, read as if it were UTC, gives the civil date and time.
        let dt = TimeZone::UTC.to_datetime(ts);
        let ms = |o: jiff::tz::Offset| i64::from(o.seconds()) * 1000;
        match self.tz.to_ambiguous_timestamp(dt).offset() {
            AmbiguousOffset::Unambiguous { offset } => (ms(offset), LocalKind::Unique),
            AmbiguousOffset::Fold { before, .. } => (ms(before), LocalKind::Ambiguous),
            AmbiguousOffset::Gap { before, .. } => (ms(before), LocalKind::Skipped),
        }
    }
}

/// Parse an instant: RFC 3339 (`2026-01-05T10:00:00Z`, with offset), epoch seconds or
/// milliseconds (by magnitude: below 10^11 is seconds), or a naive date-time in `clock`'s zone.
pub fn parse_instant(s: &str, clock: &mut LocalClock) -> Option<(EpochMs, LocalKind)> {
    let s = s.trim();
    if s.is_empty() {
        return None;
    }
    if s.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
        let v: f64 = s.parse().ok()?;
        #[allow(clippy::cast_possible_truncation)]
        let ms = if v < 1e11 {
            (v * 1000.0).round() as i64
        } else {
            v.round() as i64
        };
        return Some((ms, LocalKind::Unique));
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Some((ts.as_millisecond(), LocalKind::Unique));
    }
    parse_naive(s.as_bytes()).map(|local| clock.to_utc(local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_match_jiff() {
        for (y, m, d) in [
            (1970, 1, 1),
            (2000, 2, 29),
            (2026, 7, 14),
            (1969, 12, 31),
            (2100, 3, 1),
        ] {
            let date = jiff::civil::date(y, m, d);
            let expect = TimeZone::UTC
                .to_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
                .expect("ts")
                .as_second()
                / 86_400;
            assert_eq!(
                days_from_civil(
                    i64::from(y),
                    u32::try_from(m).unwrap_or(1),
                    u32::try_from(d).unwrap_or(1)
                ),
                expect
            );
        }
    }

    #[test]
    fn nvidia_smi_timestamp() {
        let ms = parse_naive(b"2026/07/14 08:12:53.353").expect("valid");
        assert_eq!(
            ms,
            jiff::Timestamp::from_second(1_784_016_773)
                .expect("ts")
                .as_millisecond()
                + 353
        );
        assert_eq!(parse_naive(b"2026/07/14 08:12:53"), Some(ms - 353));
        assert_eq!(parse_naive(b"2026-07-14T08:12:53.3"), Some(ms - 53));
        // Fuzz regression: a fraction longer than a u32 holds once overflowed.
        assert_eq!(
            parse_naive(b"2026/07/14 08:12:53.35300000000000000000000000000"),
            Some(ms)
        );
        assert_eq!(
            parse_naive(b"2026/07/14 08:12:53.353000000000000000000000000x"),
            None
        );
        assert_eq!(digits(b"99999999999"), None);
        let mut p = NaiveParser::default();
        for line in [
            &b"2026/07/14 08:12:53.353"[..],
            b"2026/07/14 23:59:59",
            b"2026/07/15 00:00:00.5",
            b"2026/13/14 08:12:53",
            b"2026/07/15 00:00:00.x",
        ] {
            assert_eq!(
                p.parse(line),
                parse_naive(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        for bad in [
            &b"2026/13/14 08:12:53.353"[..],
            b"2026/02/30 08:12:53",
            b"2026/07/14 25:12:53",
            b"garbage",
            b"2026/07/14 08:12:53.",
            b"2026/07/14 08:12:53.x",
        ] {
            assert_eq!(parse_naive(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn dst_fold_and_gap_are_flagged() {
        let ny = TimeZone::get("America/New_York").expect("tz");
        let mut clock = LocalClock::new(ny);
        // 2026-11-01 01:30 happens twice in New York; the first (EDT, UTC-4) is assumed.
        let local = parse_naive(b"2026-11-01 01:30:00").expect("valid");
        let (utc, kind) = clock.to_utc(local);
        assert_eq!(kind, LocalKind::Ambiguous);
        assert_eq!(utc, local + 4 * gpuwise_core::HOUR_MS);
        // 2026-03-08 02:30 does not exist.
        let (_, kind) = clock.to_utc(parse_naive(b"2026-03-08 02:30:00").expect("valid"));
        assert_eq!(kind, LocalKind::Skipped);
        let (utc, kind) = clock.to_utc(parse_naive(b"2026-07-01 12:00:00").expect("valid"));
        assert_eq!(kind, LocalKind::Unique);
        assert_eq!(utc, parse_naive(b"2026-07-01 16:00:00").expect("valid"));
    }

    #[test]
    fn instants() {
        let mut c = LocalClock::new(TimeZone::UTC);
        assert_eq!(
            parse_instant("1767225600", &mut c).map(|x| x.0),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_instant("1767225600123", &mut c).map(|x| x.0),
            Some(1_767_225_600_123)
        );
        assert_eq!(
            parse_instant("2026-01-01T00:00:00Z", &mut c).map(|x| x.0),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_instant("2026-01-01T01:00:00+01:00", &mut c).map(|x| x.0),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_instant("2026-01-01 00:00:00", &mut c).map(|x| x.0),
            Some(1_767_225_600_000)
        );
        assert_eq!(parse_instant("yesterday", &mut c), None);
    }
}
