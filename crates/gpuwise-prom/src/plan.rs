//! The pushdown's PromQL, as text: which points a window and its hours hold, and the
//! expressions that count and summarise them. Pure (no I/O); [`crate::pushdown`] sends it.
//!
//! What makes a query cheap on Prometheus 2.42 was measured on 24 GPUs × 7 days at 30 s
//! (BENCHMARKS.md): a subquery over a bare series costs about what the native function does
//! (0.05 s against 0.04 s), a filter (`X < 0.05`) keeps the series' labels and costs little
//! more (0.07 s), while anything that makes new label sets at every step — arithmetic
//! (`X * 100`), `bool` comparisons, `or` between two metrics — costs 0.3–0.75 s, and
//! `timestamp()` of a series inside a subquery 84 s. So the utilization is read from one metric
//! at a time wherever a device's metrics allow it, thresholds are moved into the metric's own
//! unit ([`threshold_in`]), and counts are counts of filtered points.

use gpuwise_core::{EpochMs, HOUR_MS};

/// dcgm-exporter's graphics-engine activity, a ratio (×100 for percent).
pub const GR: &str = "DCGM_FI_PROF_GR_ENGINE_ACTIVE";
/// dcgm-exporter's (NVML's) utilization, percent.
pub const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";

/// The window's points on the subquery grid (multiples of the scrape interval S): the grid
/// steps after `lo` up to `hi`. `lo` lies half a step off the grid, so that a range's start
/// never falls on a point and no engine's rule for a range's edge (Prometheus 2 closes it,
/// Prometheus 3 and VictoriaMetrics leave it open) changes what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grid {
    /// S, ms.
    pub s: i64,
    /// Half a step before the first point.
    pub lo: EpochMs,
    /// The last point.
    pub hi: EpochMs,
}

/// One clock hour's points in the window: those after `at − range` up to `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The hour's start.
    pub hour: EpochMs,
    /// The hour's last point in the window (when its figures are asked).
    pub at: EpochMs,
    /// How far back from `at` its points reach (a subquery range).
    pub range: i64,
}

impl Grid {
    /// The points from `start` to before `end`. A point is the last sample at or before it (the
    /// store's lookback), and the file reader holds a sample's value until the next sample, so
    /// the point at t stands for the interval from t to t + S: these are the intervals from
    /// `start` to `end`, the file reader's.
    #[must_use]
    pub fn new(start: EpochMs, end: EpochMs, s: i64) -> Self {
        let s = s.max(2);
        let first = (start + s - 1).div_euclid(s) * s;
        let hi = (end + s - 1).div_euclid(s) * s - s;
        Self {
            s,
            lo: first - s / 2,
            hi: hi.max(first),
        }
    }

    /// The whole window as a subquery range at S, asked at `hi`.
    #[must_use]
    pub fn window(&self) -> String {
        format!("[{}ms:{}ms]", self.hi - self.lo, self.s)
    }

    /// The hours that hold points, each with its points: every point in exactly one hour.
    #[must_use]
    pub fn hours(&self) -> Vec<Piece> {
        let s = self.s;
        // Half a step below the first grid step at or after `t`.
        let below = |t: EpochMs| (t + s - 1).div_euclid(s) * s - s / 2;
        let mut out = Vec::new();
        let mut hour = (self.lo + s / 2).div_euclid(HOUR_MS) * HOUR_MS;
        while hour <= self.hi {
            let bottom = below(hour).max(self.lo);
            let top = (below(hour + HOUR_MS) + s / 2 - s).min(self.hi);
            if top > bottom {
                out.push(Piece {
                    hour,
                    at: top,
                    range: top - bottom,
                });
            }
            hour += HOUR_MS;
        }
        out
    }

    /// Whether a piece is a whole hour of the regular shape (last point `hour + 1h − S`, range
    /// `1h − S/2`), which one range query with a one-hour step asks for every such hour.
    #[must_use]
    pub fn is_whole(&self, p: &Piece) -> bool {
        p.at == p.hour + HOUR_MS - self.s && p.range == HOUR_MS - self.s / 2
    }
}

/// How far back from a point the idle-episode test reaches, `l`: a run of points stands for
/// its count × S (each point its interval), so an episode of at least L takes n = ⌈L / S⌉
/// points and reaches (n − 1) × S. ⌊L / S⌋ points, as this once was, is a run shorter than L
/// whenever S does not divide L: at 57 s a run of 10 points (570 s) counted as a 10-minute
/// episode, which the file reader never does.
#[must_use]
pub fn episode_reach(min_idle_episode_ms: u64, s: i64) -> i64 {
    let s = s.max(1);
    let l = i64::try_from(min_idle_episode_ms).unwrap_or(i64::MAX / 2);
    let n = (l + s - 1).div_euclid(s).max(1);
    (n - 1).saturating_mul(s)
}

/// The smallest value `x` of a metric with `x × scale ≥ threshold` as the file reader sees it
/// (`(x × scale) as f32`, compared with the `f32` setting): a filter `x < threshold_in(…)`
/// holds exactly the points the file reader counts below the threshold, `x ≥ …` those at or
/// above it. A filter on the metric itself (`GR < 0.05`) keeps its labels and is cheap, where
/// `GR * 100 < 5` makes new ones at every step.
#[must_use]
pub fn threshold_in(threshold: f32, scale: f64) -> f64 {
    let at_or_above = |x: f64| ((x * scale) as f32) >= threshold;
    // f64s in order as unsigned integers (negative ones reversed); NaNs lie outside ±∞.
    let key = |x: f64| {
        let b = x.to_bits();
        if b >> 63 == 0 { b | 1 << 63 } else { !b }
    };
    let value = |k: u64| f64::from_bits(if k >> 63 == 1 { k & !(1 << 63) } else { !k });
    if at_or_above(f64::NEG_INFINITY) {
        return f64::NEG_INFINITY;
    }
    if !at_or_above(f64::INFINITY) {
        return f64::INFINITY;
    }
    // The predicate is monotone in x: bisect the bit patterns (at most 64 steps).
    let (mut lo, mut hi) = (key(f64::NEG_INFINITY), key(f64::INFINITY));
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if at_or_above(value(mid)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    value(hi)
}

/// Where a device's utilization is read from in the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// `DCGM_FI_PROF_GR_ENGINE_ACTIVE` alone (×100).
    Gr,
    /// `DCGM_FI_DEV_GPU_UTIL` alone.
    Util,
    /// Point by point, GR where it has a point, else UTIL (`GR * 100 or UTIL`), as the file
    /// reader takes them: for a device whose two metrics do not hold the same points.
    Either,
}

/// The utilization of one source's devices, as PromQL.
#[derive(Clone, Debug)]
pub struct Signal {
    /// Whose.
    pub source: Source,
    /// The series, or for [`Source::Either`] the expression.
    pub expr: String,
    /// What its values are multiplied by to give percent.
    pub scale: f64,
}

impl Signal {
    /// The signal of `source`, with `matchers` (without braces) on each metric.
    #[must_use]
    pub fn new(source: Source, matchers: &str) -> Self {
        let gr = format!("{GR}{{{matchers}}}");
        let util = format!("{UTIL}{{{matchers}}}");
        match source {
            Source::Gr => Self {
                source,
                expr: gr,
                scale: 100.0,
            },
            Source::Util => Self {
                source,
                expr: util,
                scale: 1.0,
            },
            // Both sides lose the metric name, so the two make one series per device (a
            // named UTIL beside a nameless GR × 100 is two, and any function over them fails
            // with "vector cannot contain metrics with the same labelset").
            Source::Either => Self {
                source,
                expr: format!("({gr} * 100 or {util} * 1)"),
                scale: 1.0,
            },
        }
    }

    /// The points below `pct` percent, as a filter (the points' own values and labels).
    #[must_use]
    pub fn below(&self, pct: f32) -> String {
        format!("({} < {})", self.expr, threshold_in(pct, self.scale))
    }

    /// E, the points in idle episodes, asked `l` (= L − S) after each point: non-empty at a
    /// point p when some run of `l/S + 1` consecutive points below `pct` ends between p and
    /// p + l — that is, when p belongs to a run of at least that many. B(u), a count of the
    /// points below `pct` among the `n` up to u kept where it is `n`, marks the runs' ends;
    /// E counts B over the next `l`. Both levels are filters and counts, so the labels stay.
    #[must_use]
    pub fn episodes(&self, pct: f32, l: i64, s: i64) -> String {
        let n = l / s + 1;
        let r = l + s / 2;
        format!(
            "count_over_time((count_over_time({}[{r}ms:{s}ms]) >= {n})[{r}ms:{s}ms])",
            self.below(pct)
        )
    }

    /// E where memory is held at the point (`FB_USED ≥ held_mib` `l` earlier); a device
    /// without the memory metric has none.
    #[must_use]
    pub fn held_episodes(&self, pct: f32, l: i64, s: i64, matchers: &str, held_mib: f32) -> String {
        format!(
            "({} and (DCGM_FI_DEV_FB_USED{{{matchers}}} offset {l}ms >= {}))",
            self.episodes(pct, l, s),
            threshold_in(held_mib, 1.0)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds_hold_the_points_the_file_reader_counts() {
        for (t, scale) in [
            (5.0_f32, 100.0),
            (25.0, 100.0),
            (85.0, 100.0),
            (7.3, 100.0),
            (0.0, 100.0),
            (5.0, 1.0),
            (1024.0, 1.0),
        ] {
            let b = threshold_in(t, scale);
            // The file reader's rule, `(x × scale) as f32 < t`, on values all around the
            // boundary, in f64 steps and in f32 steps.
            let near = |x: f64| (x * scale) as f32 >= t;
            assert!(near(b) && !near(b.next_down()), "{t} {scale}: {b}");
            let mut x = f64::from(t) / scale;
            for _ in 0..40 {
                x = x.next_down();
            }
            for _ in 0..80 {
                assert_eq!(x < b, ((x * scale) as f32) < t, "{x} against {t}×{scale}");
                x = x.next_up();
            }
            for k in -50..50 {
                let y = f64::from(t) / scale * (1.0 + f64::from(k) * 1e-8);
                assert_eq!(y < b, ((y * scale) as f32) < t, "{y} against {t}×{scale}");
            }
        }
        // 4.9999999 % of GPU_UTIL is 5.0 as an f32: not below 5.
        assert!(4.999_999_9 >= threshold_in(5.0, 1.0));
        assert!(4.999_99 < threshold_in(5.0, 1.0));
    }

    #[test]
    fn hours_partition_the_window_points() {
        let h = HOUR_MS;
        // Aligned, unaligned, and a step that does not divide the hour.
        for (start, end, s) in [
            (10 * h, 14 * h, 30_000),
            (10 * h + 1_017_345, 14 * h + 77_777, 30_000),
            (10 * h + 5_000, 12 * h + 9_000, 7_000),
            (10 * h, 10 * h + 40_000, 60_000),
        ] {
            let g = Grid::new(start, end, s);
            let points: Vec<i64> = (0..)
                .map(|k| ((start + s - 1).div_euclid(s) + k) * s)
                .take_while(|t| *t < end)
                .collect();
            let mut seen = Vec::new();
            for p in g.hours() {
                let inside: Vec<i64> = points
                    .iter()
                    .copied()
                    .filter(|t| *t > p.at - p.range && *t <= p.at)
                    .collect();
                assert!(
                    inside.iter().all(|t| t.div_euclid(h) * h == p.hour),
                    "{p:?}"
                );
                // No range edge on a point.
                assert_ne!((p.at - p.range).rem_euclid(s), 0);
                seen.extend(inside);
            }
            assert_eq!(seen, points, "{start} {end} {s}");
            let all: Vec<i64> = points
                .iter()
                .copied()
                .filter(|t| *t > g.lo && *t <= g.hi)
                .collect();
            assert_eq!(all, points);
        }
        let g = Grid::new(10 * h, 13 * h, 30_000);
        let hours = g.hours();
        assert!(hours.iter().all(|p| g.is_whole(p)));
        assert_eq!(hours.len(), 3);
        assert_eq!((hours[0].hour, hours[2].at), (10 * h, 13 * h - 30_000));
        // Unaligned: partial first and last hours.
        let g = Grid::new(10 * h + 60_000, 13 * h + 60_000, 30_000);
        let hours = g.hours();
        assert_eq!(hours.len(), 4);
        assert!(!g.is_whole(&hours[0]) && g.is_whole(&hours[1]) && !g.is_whole(&hours[3]));
        // The last hour holds two points, 13:00 and 13:00:30.
        assert_eq!((hours[3].hour, hours[3].at), (13 * h, 13 * h + 30_000));
    }

    #[test]
    fn an_episode_takes_enough_points_to_last_the_minimum() {
        // n points × S ≥ L, with n as small as that allows, for every S from 1 s to 10 min.
        for l in [600_000_u64, 300_000, 61_000] {
            for s in (1_000..=600_000).step_by(1_000) {
                let n = episode_reach(l, s) / s + 1;
                assert!(n * s >= l as i64, "{l} {s}: {n} points");
                assert!(
                    n == 1 || (n - 1) * s < l as i64,
                    "{l} {s}: {n} points is one too many"
                );
            }
        }
        // 57 s: 11 points (627 s), not 10 (570 s).
        assert_eq!(episode_reach(600_000, 57_000), 10 * 57_000);
        assert_eq!(episode_reach(600_000, 60_000), 9 * 60_000);
    }

    #[test]
    fn signals_are_single_metrics_where_they_can_be() {
        let gr = Signal::new(Source::Gr, "job=\"x\"");
        let t = threshold_in(5.0, 100.0);
        assert!((t - 0.05).abs() < 1e-8);
        assert_eq!(
            gr.below(5.0),
            format!("(DCGM_FI_PROF_GR_ENGINE_ACTIVE{{job=\"x\"}} < {t})")
        );
        assert_eq!(
            gr.episodes(5.0, 540_000, 60_000),
            format!(
                "count_over_time((count_over_time((DCGM_FI_PROF_GR_ENGINE_ACTIVE{{job=\"x\"}} \
                 < {t})[570000ms:60000ms]) >= 10)[570000ms:60000ms])"
            )
        );
        let either = Signal::new(Source::Either, "");
        assert!(either.expr.contains(" or "));
    }
}
