//! Fleet telemetry from a Prometheus-compatible store, by pushing the aggregation down.
//!
//! Instead of pulling every sample, gpuwise asks the store for per-series summaries: per clock
//! hour (range queries with a one-hour step; the window's partial first and last hours as
//! instant queries) and over the window (instant queries at its last point), then builds the
//! same per-device statistics the file readers produce. The points are the store's evaluations
//! at the scrape interval S on the grid of multiples of S, from the window's start to before
//! its end ([`Grid`]): the point at t is the last sample at or before t, standing for the
//! interval t to t + S, as the file reader holds a sample until the next one.
//!
//! 1. Each device's points per hour of `DCGM_FI_PROF_GR_ENGINE_ACTIVE` and of
//!    `DCGM_FI_DEV_GPU_UTIL` decide where its utilization is read from ([`Source`]): one
//!    metric where it can, both point by point (`GR * 100 or UTIL * 1`, ten times the store's
//!    work) only for a device whose GR points differ from its UTIL points.
//! 2. Per source: hourly means, idle-episode and held-idle points; over the window p50, p95,
//!    band counts (filters on the metric, thresholds in its unit: [`crate::plan`]) and the max.
//! 3. Memory, power and profiling activity, natively or over the bare metric's points.
//!
//! Window totals are sums of the hours, which partition the window's points. Up to
//! four queries are in flight. Idle episodes themselves are known only per hour (runs
//! of hours with idle time); their total is exact. `--raw` pulls the samples with
//! `query_range` at the scrape interval and reads them with the DCGM reader instead. The
//! queries, their costs and the engines' differences: docs/prometheus.md.

use std::collections::BTreeMap;

use gpuwise_core::profile::{DeviceProfile, DeviceStats, Episode, HourPoint, UtilStats};
use gpuwise_core::sample::UtilSource;
use gpuwise_core::settings::{ProfileSettings, UTIL_BAND_EDGES_PCT};
use gpuwise_core::{DeviceInfo, DeviceKey, EpochMs};

use crate::api::{Response, Series};
use crate::client::{Client, PromError};
use crate::plan::{GR, Grid, Piece, Signal, Source, UTIL};

/// Queries sent, with what each pulled: `(query, series, points)`.
pub type QueryLog = Vec<(String, usize, usize)>;

/// What to ask for.
#[derive(Clone, Debug)]
pub struct Query {
    /// Label matchers to add to every metric (`namespace=~"ml-.*"`), without braces.
    pub matchers: String,
    /// First sample time.
    pub start_ms: EpochMs,
    /// Last sample time.
    pub end_ms: EpochMs,
    /// Scrape interval; `None`: found from the data.
    pub step_ms: Option<i64>,
    /// Idle threshold, minimum episode and held-memory rule.
    pub profile: ProfileSettings,
    /// Zone of the hour-of-week pattern.
    pub tz: jiff::tz::TimeZone,
    /// Most samples one query may make the store load (Prometheus' `--query.max-samples`
    /// defaults to 50,000,000); above it the devices are queried in 16 shards by the first
    /// hex digit of their UUID.
    pub sample_budget: u64,
}

/// Prometheus' default `--query.max-samples`.
pub const DEFAULT_SAMPLE_BUDGET: u64 = 50_000_000;

/// A `--selector` that is not label matchers in braces.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--selector `{0}` must be label matchers in braces, e.g. {{namespace=~\"ml-.*\"}}")]
pub struct SelectorError(pub String);

impl Query {
    /// `{matchers}` → the matcher list; `{}` or empty → none. Rejects what is not a selector.
    pub fn matchers_of(selector: &str) -> Result<String, SelectorError> {
        let s = selector.trim();
        if s.is_empty() {
            return Ok(String::new());
        }
        let inner = s
            .strip_prefix('{')
            .and_then(|x| x.strip_suffix('}'))
            .ok_or_else(|| SelectorError(s.to_owned()))?;
        Ok(inner.trim().to_owned())
    }

    fn metric(&self, name: &str) -> String {
        format!("{name}{{{}}}", self.matchers)
    }
}

/// The result.
#[derive(Debug)]
pub struct Pushed {
    /// Devices, as the file readers would give them.
    pub profiles: Vec<DeviceProfile>,
    /// Scrape interval used.
    pub step_ms: i64,
    /// Queries sent, with what each pulled: `(query, series, points)`.
    pub queries: QueryLog,
    /// Server warnings (partial data) and missing metrics.
    pub warnings: Vec<String>,
    /// How many of [`RAW_METRICS`] have series in the window.
    pub metrics_present: usize,
    /// Devices whose samples are off the grid, read from their raw samples instead, with why.
    pub raw_devices: Vec<(DeviceKey, String)>,
}

/// Device identity from a series' labels, by the DCGM reader's rules (`Hostname`/`hostname`,
/// `UUID`/`uuid` else `gpu`, `GPU_I_ID` for MIG instances, `exported_*` labels first; the
/// workload labels by the DCGM reader's `workload_labels`).
#[must_use]
pub fn device_of(labels: &BTreeMap<String, String>) -> Option<(DeviceKey, DeviceInfo)> {
    let get = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| labels.get(*k).filter(|v| !v.is_empty()).cloned())
    };
    let gpu = get(&["UUID", "uuid"]).or_else(|| get(&["gpu"]))?;
    // Without a host label, the host is `prometheus`, as for `--raw` (the DCGM reader's
    // stem), so both modes name a device alike.
    let host = get(&["Hostname", "hostname"]).unwrap_or_else(|| "prometheus".to_owned());
    let mig = get(&["GPU_I_ID"]);
    let mut info = DeviceInfo {
        model_name: get(&["modelName", "model_name"]),
        index: get(&["gpu"]).and_then(|g| g.parse().ok()),
        mig_profile: get(&["GPU_I_PROFILE"]),
        ..DeviceInfo::default()
    };
    for (k, v) in gpuwise_sources::dcgm::workload_labels(
        get,
        labels.iter().map(|(k, v)| (k.as_str(), v.as_str())),
    ) {
        info.labels.entry(k).or_default().insert(v, 1);
    }
    Some((DeviceKey { host, gpu, mig }, info))
}

#[derive(Default)]
struct Acc {
    info: Option<DeviceInfo>,
    n: f64,
    mean: Option<f64>,
    max: Option<f64>,
    p50: Option<f64>,
    p95: Option<f64>,
    below: [f64; 4],
    /// Samples below the idle threshold (when it is not the first band edge).
    below_idle: Option<f64>,
    idle: f64,
    held: f64,
    first: Option<f64>,
    last: Option<f64>,
    mem_peak: Option<f64>,
    mem_mean: Option<f64>,
    mem_p95: Option<f64>,
    mem_total: Option<f64>,
    power_mean: Option<f64>,
    power_peak: Option<f64>,
    power_limit: Option<f64>,
    sm: Option<f64>,
    occ: Option<f64>,
    tensor: Option<f64>,
    dram: Option<f64>,
    gr: bool,
    /// Where its utilization is read from.
    source: Option<Source>,
    /// How GR's and UTIL's samples sit on the grid ([`GridCheck`]).
    check: [GridCheck; 2],
    /// Per hour.
    hours: BTreeMap<EpochMs, Hour>,
}

/// How one metric's raw samples sit on the grid of multiples of S, from five counts over the
/// window. The grid's points equal the file reader's intervals exactly when every sample keeps
/// one phase (each interval a multiple of S, none longer than the maximum gap); the counts
/// find a device that does not where that shows as a count:
/// - `doubles`: grid windows `(g − S, g]` that hold two samples or more, at the grid's phase
///   and half a step off it (a scrape that jitters across the grid, an interval shorter than
///   S, a repeated timestamp: two samples closer than S/2 always share a window at one of the
///   two phases);
/// - `stale`: points with a sample in their window and none in the next maximum gap − S: a gap
///   longer than the maximum gap, where the file reader counts nothing and the store's
///   lookback carries the sample on, or a device that stopped before the window's end (where S
///   is over half the maximum gap, every point the store fills: see `grid_check_jobs`);
/// - `unfilled`: points the store leaves empty where a sample within the maximum gap stands
///   (VictoriaMetrics' lookback follows the series' own interval and drops a point after a
///   missed scrape that Prometheus' 5 minutes carry, and the file reader counts);
/// - `samples` against the points with a value: a quarter more points than samples is an
///   interval the grid does not divide (45 s samples on a 30 s grid), not missed scrapes.
#[derive(Clone, Copy, Debug, Default)]
struct GridCheck {
    samples: f64,
    doubles: [f64; 2],
    stale: f64,
    unfilled: f64,
}

/// Why a device's samples are off the grid, if they are: `points` are the grid's points with a
/// value.
fn off_grid(c: &GridCheck, points: f64) -> Option<String> {
    if c.doubles.iter().any(|d| *d > 0.0) {
        return Some(format!(
            "{} scrape window(s) hold two samples or more (samples closer than the grid's \
             interval, jitter across the grid, or repeated timestamps)",
            c.doubles[0].max(c.doubles[1])
        ));
    }
    if c.stale > 0.0 {
        return Some(
            "a gap longer than --max-gap, or samples that stop before the window's end \
             (the store's lookback would carry the last sample on)"
                .to_owned(),
        );
    }
    if c.unfilled > 0.0 {
        return Some(format!(
            "the store leaves {} point(s) empty where a sample within --max-gap stands (its \
             lookback is shorter)",
            c.unfilled
        ));
    }
    if points > c.samples * 1.25 + 1.0 {
        return Some(format!(
            "{points} grid points for {} samples: its scrape interval is not the grid's",
            c.samples
        ));
    }
    None
}

/// One hour of a device: points of each metric, then of its utilization, their mean, the
/// points in idle episodes and of them those with memory held.
#[derive(Clone, Copy, Debug, Default)]
struct Hour {
    gr: f64,
    util: f64,
    n: f64,
    mean: f64,
    idle: f64,
    held: f64,
}

impl Hour {
    fn set(&mut self, slot: Slot, v: f64) {
        *match slot {
            Slot::GrPoints => &mut self.gr,
            Slot::UtilPoints => &mut self.util,
            Slot::Points => &mut self.n,
            Slot::Mean => &mut self.mean,
            Slot::Idle => &mut self.idle,
            Slot::Held => &mut self.held,
        } = v;
    }
}

impl Acc {
    /// The window's figures from its hours (which partition its points): points, mean, idle
    /// and held-idle points; the first and last sample from the first and last hour's counts,
    /// taken as unbroken at the inner end (exact for a device that comes and stays, else
    /// within that hour; the last sample ends the last point's interval). Within one hour the
    /// points are taken from its first.
    fn total(&mut self, grid: &Grid) {
        self.n = self.hours.values().map(|h| h.n).sum();
        let weighted: f64 = self.hours.values().map(|h| h.n * h.mean).sum();
        self.mean = (self.n > 0.0).then(|| weighted / self.n);
        self.idle = self.hours.values().map(|h| h.idle).sum();
        self.held = self.hours.values().map(|h| h.held).sum();
        let with_points = || self.hours.iter().filter(|(_, h)| h.n > 0.0);
        let step = grid.s as f64;
        // The first and last point of an hour's piece of the window.
        let opens = |h: EpochMs| h.max(grid.lo + grid.s / 2) as f64;
        let closes = |h: EpochMs| (h + gpuwise_core::HOUR_MS - grid.s).min(grid.hi) as f64;
        if let (Some((&h0, f)), Some((&h1, l))) = (with_points().next(), with_points().next_back())
        {
            let (first, last) = if h0 == h1 {
                (opens(h0), opens(h0) + (f.n - 1.0) * step)
            } else {
                (
                    (closes(h0) - (f.n - 1.0) * step).max(opens(h0)),
                    (opens(h1) + (l.n - 1.0) * step).min(closes(h1)),
                )
            };
            self.first = Some(first / 1000.0);
            self.last = Some((last + step) / 1000.0);
        }
    }
}

fn last_value(s: &Series) -> Option<f64> {
    s.samples.last().map(|(_, v)| *v).filter(|v| v.is_finite())
}

/// A series' labels (its name left out) as `k="v"` pairs joined by commas, values escaped as
/// the exposition format and PromQL both want (backslash, quote, newline).
fn label_matchers(labels: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .filter(|(k, _)| k.as_str() != "__name__")
        .map(|(k, v)| {
            format!(
                "{k}=\"{}\"",
                v.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
            )
        })
        .collect();
    pairs.join(",")
}

/// The median interval between the raw samples of one series over the last six hours of the
/// window (at most), in whole seconds; `None` when it has fewer than three samples there.
/// The median, not the mean: a missed scrape or a hole in the data leaves it alone, where it
/// stretches span ÷ (samples − 1) — by 7 % when one scrape in fifteen is missing, which put
/// every subquery off the samples' grid and counted GPU-hours and idle time wrong.
fn median_interval(
    client: &Client,
    q: &Query,
    labels: &BTreeMap<String, String>,
) -> Result<Option<i64>, PromError> {
    let range_ms = (q.end_ms - q.start_ms).clamp(1000, 6 * gpuwise_core::HOUR_MS);
    let promql = format!(
        "DCGM_FI_DEV_GPU_UTIL{{{}}}[{range_ms}ms]",
        label_matchers(labels)
    );
    let r = client.query(&promql, q.end_ms)?;
    let Some(series) = r.series.first() else {
        return Ok(None);
    };
    let mut gaps: Vec<i64> = series
        .samples
        .windows(2)
        .map(|w| w[1].0 - w[0].0)
        .filter(|d| *d > 0)
        .collect();
    if gaps.len() < 2 {
        return Ok(None);
    }
    gaps.sort_unstable();
    let median = gaps[gaps.len() / 2];
    Ok(Some(
        (((median as f64) / 1000.0).round().max(1.0) * 1000.0) as i64,
    ))
}

/// Samples per utilization series in the window (one query), and the scrape interval: as
/// given, else the median interval of the densest series' raw samples ([`median_interval`]),
/// else span ÷ (samples − 1) of that series, in whole seconds.
fn census(client: &Client, q: &Query) -> Result<(crate::api::Response, i64), PromError> {
    let w_ms = (q.end_ms - q.start_ms).max(1000);
    let promql = format!(
        "count_over_time({}[{w_ms}ms])",
        q.metric("DCGM_FI_DEV_GPU_UTIL")
    );
    let r = client.query(&promql, q.end_ms)?;
    let n = r.series.iter().filter_map(last_value).fold(0.0, f64::max);
    if n < 2.0 {
        return Err(PromError::Config(format!(
            "no DCGM_FI_DEV_GPU_UTIL samples{} between the start and the end: nothing to report",
            if q.matchers.is_empty() {
                String::new()
            } else {
                format!(" matching {{{}}}", q.matchers)
            }
        )));
    }
    let step = match q.step_ms {
        Some(step) => step,
        None => {
            let densest = r
                .series
                .iter()
                .filter(|x| last_value(x) == Some(n))
                .map(|x| &x.labels)
                .next();
            let median = match densest {
                Some(labels) => median_interval(client, q, labels)?,
                None => None,
            };
            median.unwrap_or_else(|| {
                (((w_ms as f64 / (n - 1.0)) / 1000.0).round().max(1.0) * 1000.0) as i64
            })
        }
    };
    Ok((r, step))
}

/// The scrape interval of the data: as given, else span ÷ (samples − 1) of the densest
/// utilization series, in whole seconds.
pub fn scrape_interval(client: &Client, q: &Query) -> Result<i64, PromError> {
    census(client, q).map(|(_, step)| step)
}

/// Which way to read the window, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct PathChoice {
    /// Pull the samples (`true`) or push the aggregation down.
    pub raw: bool,
    /// The scrape interval.
    pub step_ms: i64,
    /// Points a raw pull would move: utilization samples × the DCGM metrics present.
    pub raw_points: f64,
    /// Requests the pushdown would send.
    pub pushdown_requests: usize,
    /// The choice in words.
    pub why: String,
}

/// The cost model of [`choose_path`], in microseconds, measured on Prometheus 2.42 and
/// VictoriaMetrics 1.79 over loopback on the 2-core reference machine (`bench/prometheus.sh`,
/// BENCHMARKS.md, 2026-11-27): a raw point costs about 1.5 µs to select, send, decode and read
/// (3.87 M points in 5.9 s); a request about 0.5 ms before it moves anything (36 pushdown
/// requests over 4 GPUs × 1 day in 0.06 s); and the pushdown's figures make the store evaluate
/// each utilization point about 30 times at about 80 ns (1.2 s for 24 GPUs × 7 days at 30 s).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Costs {
    /// One raw point, µs.
    pub raw_point_us: f64,
    /// One request, µs.
    pub request_us: f64,
    /// The pushdown's work per utilization point in the window, µs.
    pub pushdown_point_us: f64,
}

/// The measured costs ([`Costs`]).
pub const COSTS: Costs = Costs {
    raw_point_us: 1.5,
    request_us: 500.0,
    pushdown_point_us: 2.4,
};

impl Costs {
    /// (raw, pushdown) in µs: a raw pull of `raw_points` in `raw_requests`; a pushdown of
    /// `samples` utilization points in `pushdown_requests`.
    #[must_use]
    pub fn estimate(
        &self,
        raw_points: f64,
        raw_requests: f64,
        samples: f64,
        pushdown_requests: f64,
    ) -> (f64, f64) {
        (
            raw_points * self.raw_point_us + raw_requests * self.request_us,
            samples * self.pushdown_point_us + pushdown_requests * self.request_us,
        )
    }
}

/// Choose the path by what each would cost ([`COSTS`]): a raw pull moves every sample of
/// every metric present, in chunks; the pushdown sends a fixed set of queries (one per figure
/// and hour piece: hours of a regular shape share one range query) and has the store evaluate
/// each utilization point about 30 times. Tiny windows pull raw; the rest push down, most of
/// all where a fleet has many metrics.
pub fn choose_path(client: &Client, q: &Query) -> Result<PathChoice, PromError> {
    let (r, step) = census(client, q)?;
    let samples: f64 = r.series.iter().filter_map(last_value).sum();
    let present = client.query(
        &format!(
            "count by (__name__) ({{__name__=~\"{}\"{}{}}})",
            RAW_METRICS.join("|"),
            if q.matchers.is_empty() { "" } else { "," },
            q.matchers
        ),
        q.end_ms,
    )?;
    let families = present.series.len().max(1) as f64;
    let raw_points = samples * families;
    let chunks = ((q.end_ms - q.start_ms) / step.saturating_mul(RAW_CHUNK_POINTS)).max(0) + 1;
    let raw_requests = chunks as f64 * families;
    let grid = Grid::new(q.start_ms, q.end_ms, step);
    let pieces = grid.hours().iter().filter(|p| !grid.is_whole(p)).count() + 1;
    // Hourly figures: two counts and mean, idle, held idle; window figures: ten grid
    // checks, seven of the utilization, eleven of memory, power and activity, one census.
    let pushdown_requests = 5 * pieces + 29;
    let (raw_us, push_us) =
        COSTS.estimate(raw_points, raw_requests, samples, pushdown_requests as f64);
    let raw = raw_us < push_us;
    let why = format!(
        "{}: a raw pull of {raw_points:.0} points in {raw_requests:.0} requests ≈ {:.2} s, \
         the pushdown's {pushdown_requests} requests over {samples:.0} samples ≈ {:.2} s \
         (the cost model of docs/prometheus.md)",
        if raw {
            "raw samples, the cheaper path"
        } else {
            "pushdown, the cheaper path"
        },
        raw_us / 1e6,
        push_us / 1e6,
    );
    Ok(PathChoice {
        raw,
        step_ms: step,
        raw_points,
        pushdown_requests,
        why,
    })
}

/// Push the aggregation down to the store behind `client`, in shards when the window holds
/// more samples than the budget.
pub fn pushdown(client: &Client, q: &Query) -> Result<Pushed, PromError> {
    let (r, step) = census(client, q)?;
    let q = &Query {
        step_ms: Some(step),
        ..q.clone()
    };
    let total: f64 = r.series.iter().filter_map(last_value).sum();
    let label = if r.series.iter().any(|x| x.labels.contains_key("UUID")) {
        "UUID"
    } else {
        "uuid"
    };
    if total <= q.sample_budget as f64 {
        return pushdown_one(client, q, step, label);
    }
    let mut all = Pushed {
        profiles: Vec::new(),
        step_ms: 0,
        queries: Vec::new(),
        warnings: Vec::new(),
        metrics_present: 0,
        raw_devices: Vec::new(),
    };
    let shards = "0123456789abcdefABCDEF"
        .chars()
        .map(|digit| format!("{label}=~\"GPU-{digit}.*\""))
        // Whatever the prefixes miss (no UUID label, another spelling).
        .chain(std::iter::once(format!("{label}!~\"GPU-[0-9a-fA-F].*\"")));
    for shard in shards {
        let sq = Query {
            matchers: if q.matchers.is_empty() {
                shard
            } else {
                format!("{},{shard}", q.matchers)
            },
            ..q.clone()
        };
        match pushdown_one(client, &sq, step, label) {
            Ok(p) => {
                all.raw_devices.extend(p.raw_devices);
                all.profiles.extend(p.profiles);
                all.step_ms = p.step_ms;
                all.queries.extend(p.queries);
                all.warnings.extend(p.warnings);
                all.metrics_present = all.metrics_present.max(p.metrics_present);
            }
            // A shard without devices.
            Err(PromError::Config(_)) => {}
            Err(e) => return Err(e),
        }
    }
    if all.profiles.is_empty() {
        return pushdown_one(client, q, step, label);
    }
    Ok(all)
}

fn pushdown_one(client: &Client, q: &Query, s: i64, label: &str) -> Result<Pushed, PromError> {
    let grid = Grid::new(q.start_ms, q.end_ms, s);
    let hours = grid.hours();
    let mut c = Collect {
        client,
        queries: Vec::new(),
        warnings: Vec::new(),
        devs: BTreeMap::new(),
        off_grid: BTreeMap::new(),
        present: 0,
    };
    // Each metric's points per hour, for every device: which metric a device is read from
    // depends on them; and how each metric's samples sit on the grid.
    let mut counts = Vec::new();
    for (metric, slot) in [(GR, Slot::GrPoints), (UTIL, Slot::UtilPoints)] {
        counts.extend(hourly(
            &grid,
            &hours,
            "count_over_time",
            &q.metric(metric),
            0,
            None,
            slot,
        ));
    }
    counts.extend(grid_check_jobs(q, &grid));
    c.run(counts)?;
    c.set_aside_off_grid();
    c.set_aside_all_when_sparse(q, s);
    let sources = choose_sources(&mut c.devs);
    if sources.is_empty() && c.off_grid.is_empty() {
        return Err(PromError::Config(format!(
            "no GPU utilization series{}: neither {GR} nor {UTIL}",
            if q.matchers.is_empty() {
                String::new()
            } else {
                format!(" matching {{{}}}", q.matchers)
            }
        )));
    }
    let mut jobs = Vec::new();
    for &source in &sources {
        jobs.extend(signal_jobs(
            q,
            &grid,
            &hours,
            &Signal::new(source, &q.matchers),
        ));
    }
    if !sources.is_empty() {
        jobs.extend(device_jobs(q, &grid));
    }
    jobs.push(Job {
        promql: format!(
            "count by (__name__) ({{__name__=~\"{}\"{}{}}})",
            RAW_METRICS.join("|"),
            if q.matchers.is_empty() { "" } else { "," },
            q.matchers
        ),
        ask: Ask::At(q.end_ms),
        source: None,
        put: Put::Present,
        scale: 1.0,
    });
    c.run(jobs)?;
    if !sources.is_empty() {
        c.warn_missing_metrics();
    }
    let Collect {
        queries,
        mut warnings,
        mut devs,
        present,
        off_grid: c_off_grid,
        ..
    } = c;
    for acc in devs.values_mut() {
        acc.total(&grid);
    }
    let mut profiles = plausible_profiles(devs, q, s, &mut warnings);
    let mut queries = queries;
    let raw_devices: Vec<(DeviceKey, String)> = c_off_grid.into_iter().collect();
    read_off_grid(
        client,
        q,
        s,
        label,
        &raw_devices,
        &mut profiles,
        &mut queries,
        &mut warnings,
    )?;
    Ok(Pushed {
        profiles,
        step_ms: s,
        queries,
        warnings,
        metrics_present: present,
        raw_devices,
    })
}

/// The devices off the grid, read from their raw samples into `profiles` (by the fleet's
/// UUID label, then by the query's own matchers for any that label did not find).
#[allow(clippy::too_many_arguments)] // the pushdown's running state, passed through once
fn read_off_grid(
    client: &Client,
    q: &Query,
    s: i64,
    label: &str,
    raw_devices: &[(DeviceKey, String)],
    profiles: &mut Vec<DeviceProfile>,
    queries: &mut QueryLog,
    warnings: &mut Vec<String>,
) -> Result<(), PromError> {
    if raw_devices.is_empty() {
        return Ok(());
    }
    let keys: std::collections::BTreeSet<DeviceKey> =
        raw_devices.iter().map(|(k, _)| k.clone()).collect();
    let mut got = pull_raw(client, q, s, &keys, label, queries, warnings)?;
    let missing: std::collections::BTreeSet<DeviceKey> = keys
        .iter()
        .filter(|k| !got.iter().any(|p| &p.key == *k))
        .cloned()
        .collect();
    if !missing.is_empty() {
        got.extend(pull_raw(client, q, s, &missing, "", queries, warnings)?);
    }
    profiles.extend(got);
    profiles.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(())
}

/// `keys`' samples pulled raw and read by the DCGM reader, as profiles; the reader's skips
/// become warnings.
fn pull_raw(
    client: &Client,
    q: &Query,
    s: i64,
    keys: &std::collections::BTreeSet<DeviceKey>,
    label: &str,
    queries: &mut QueryLog,
    warnings: &mut Vec<String>,
) -> Result<Vec<DeviceProfile>, PromError> {
    let r = raw(client, q, s, Some((keys, label)), None, None)?;
    queries.extend(r.queries);
    warnings.extend(r.tally.warnings().into_iter().map(|w| w.message));
    Ok(r.profile.finish(&q.profile, &q.tz))
}

/// The four counts of [`GridCheck`] for GR and for UTIL, each over the window's points.
fn grid_check_jobs(q: &Query, grid: &Grid) -> Vec<Job> {
    fn samples<const I: usize>(a: &mut Acc, v: f64) {
        a.check[I].samples = v;
    }
    fn doubles<const I: usize, const P: usize>(a: &mut Acc, v: f64) {
        a.check[I].doubles[P] = v;
    }
    fn stale<const I: usize>(a: &mut Acc, v: f64) {
        a.check[I].stale = v;
    }
    fn unfilled<const I: usize>(a: &mut Acc, v: f64) {
        a.check[I].unfilled = v;
    }
    let s = grid.s;
    let w = grid.window();
    let at = |promql: String, t: EpochMs, put: fn(&mut Acc, f64)| Job {
        promql,
        ask: Ask::At(t),
        source: None,
        put: Put::Window(put),
        scale: 1.0,
    };
    // A fresh point looks ahead the maximum gap less one interval for the next sample; the
    // points whose look-ahead runs past the window are not asked (the window's end is not a
    // gap).
    // The look-ahead is the maximum gap less one interval (a fresh point lies up to S after
    // its sample, so every longer gap shows). Where S is over half the maximum gap, any
    // missed scrape is a gap longer than it: then every point the store fills by lookback
    // (a value, no sample in its own interval) is one the file reader does not count.
    let g = i64::try_from(q.profile.max_gap_ms).unwrap_or(i64::MAX / 4);
    let ahead = if g - s >= s { g - s } else { 0 };
    let stale_at = grid.hi - ahead.max(0);
    let gap = i64::try_from(q.profile.max_gap_ms).unwrap_or(i64::MAX / 4);
    type Setter = fn(&mut Acc, f64);
    let setters: [[Setter; 5]; 2] = [
        [
            samples::<0>,
            doubles::<0, 0>,
            doubles::<0, 1>,
            stale::<0>,
            unfilled::<0>,
        ],
        [
            samples::<1>,
            doubles::<1, 0>,
            doubles::<1, 1>,
            stale::<1>,
            unfilled::<1>,
        ],
    ];
    let mut jobs = Vec::new();
    for (metric, set) in [GR, UTIL].into_iter().zip(setters) {
        let m = q.metric(metric);
        let window = |t: EpochMs| format!("[{}ms:{s}ms]", t - grid.lo);
        jobs.push(at(
            format!("count_over_time({m}[{}ms])", grid.hi - grid.lo),
            grid.hi,
            set[0],
        ));
        jobs.push(at(
            format!(
                "count_over_time((count_over_time({m}[{}ms]) > 1){w})",
                s - 1
            ),
            grid.hi,
            set[1],
        ));
        jobs.push(at(
            format!(
                "count_over_time((count_over_time({m}[{}ms] offset {}ms) > 1){w})",
                s - 1,
                s / 2
            ),
            grid.hi,
            set[2],
        ));
        jobs.push(at(
            format!("count_over_time((last_over_time({m}[{gap}ms]) unless {m}){w})"),
            grid.hi,
            set[4],
        ));
        if ahead == 0 {
            jobs.push(at(
                format!(
                    "count_over_time(({m} unless count_over_time({m}[{}ms])){w})",
                    s - 1
                ),
                grid.hi,
                set[3],
            ));
        } else if stale_at > grid.lo + s {
            jobs.push(at(
                format!(
                    "count_over_time((count_over_time({m}[{}ms]) unless \
                     count_over_time({m}[{ahead}ms] offset -{ahead}ms)){})",
                    s - 1,
                    window(stale_at)
                ),
                stale_at,
                set[3],
            ));
        }
    }
    jobs
}

/// One question to the store and where its answer goes.
struct Job {
    promql: String,
    ask: Ask,
    /// Which devices take the answer: those read from this source, or (`None`) every device.
    source: Option<Source>,
    put: Put,
    /// What the answer is multiplied by (a ratio metric's 100).
    scale: f64,
}

/// When a job is asked.
enum Ask {
    /// An instant query at this time.
    At(EpochMs),
    /// A range query with a one-hour step over the whole hours `first..=last`, asked at each
    /// hour + `shift` (the answer at `t` is the hour `t − shift`'s).
    Hours {
        first: EpochMs,
        last: EpochMs,
        shift: EpochMs,
    },
}

/// Where an answer goes.
enum Put {
    /// A window figure.
    Window(fn(&mut Acc, f64)),
    /// An hour's figure: the hour of an instant query, or `None` for a range query's hours.
    Hour(Slot, Option<EpochMs>),
    /// One series per metric present (counted).
    Present,
}

/// Which of an hour's figures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    GrPoints,
    UtilPoints,
    Points,
    Mean,
    Idle,
    Held,
}

/// One figure for every hour of the window: the whole hours in one range query, asked at
/// whole hours with the subquery offset back to when each is due (some stores,
/// VictoriaMetrics among them, move a range query's start to a multiple of its step), and the
/// window's partial first and last hours as instant queries with their own ranges. `delay`:
/// how long after an hour's last point its figure is due (an idle episode is known `L − S`
/// after its points).
fn hourly(
    grid: &Grid,
    hours: &[Piece],
    func: &str,
    inner: &str,
    delay: i64,
    source: Option<Source>,
    slot: Slot,
) -> Vec<Job> {
    let s = grid.s;
    let whole: Vec<&Piece> = hours.iter().filter(|p| grid.is_whole(p)).collect();
    // One range query when the whole hours are one run (always, when S divides the hour).
    let contiguous = whole
        .windows(2)
        .all(|w| w[1].hour - w[0].hour == gpuwise_core::HOUR_MS);
    let mut jobs = Vec::new();
    let scale = 1.0;
    if let (true, Some(first), Some(last)) = (contiguous, whole.first(), whole.last()) {
        let due = gpuwise_core::HOUR_MS - s + delay;
        let shift = (due + gpuwise_core::HOUR_MS - 1).div_euclid(gpuwise_core::HOUR_MS)
            * gpuwise_core::HOUR_MS;
        let back = shift - due;
        let range = format!("[{}ms:{s}ms]", gpuwise_core::HOUR_MS - s / 2);
        jobs.push(Job {
            promql: if back > 0 {
                format!("{func}({inner}{range} offset {back}ms)")
            } else {
                format!("{func}({inner}{range})")
            },
            ask: Ask::Hours {
                first: first.hour,
                last: last.hour,
                shift,
            },
            source,
            put: Put::Hour(slot, None),
            scale,
        });
    }
    for p in hours.iter().filter(|p| !(contiguous && grid.is_whole(p))) {
        jobs.push(Job {
            promql: format!("{func}({inner}[{}ms:{s}ms])", p.range),
            ask: Ask::At(p.at + delay),
            source,
            put: Put::Hour(slot, Some(p.hour)),
            scale,
        });
    }
    jobs
}

/// The utilization figures of one source's devices: per hour the points' count (for
/// [`Source::Either`]; the others have their metric's), mean, idle-episode and held-idle
/// points; over the window p50, p95, the band counts and the maximum.
fn signal_jobs(q: &Query, grid: &Grid, hours: &[Piece], sig: &Signal) -> Vec<Job> {
    let (s, src) = (grid.s, Some(sig.source));
    let l = crate::plan::episode_reach(q.profile.min_idle_episode_ms, s);
    let thr = q.profile.idle_threshold_pct;
    let mut jobs = Vec::new();
    if sig.source == Source::Either {
        jobs.extend(hourly(
            grid,
            hours,
            "count_over_time",
            &sig.expr,
            0,
            src,
            Slot::Points,
        ));
    }
    let mut mean = hourly(grid, hours, "avg_over_time", &sig.expr, 0, src, Slot::Mean);
    for j in &mut mean {
        j.scale = sig.scale;
    }
    jobs.extend(mean);
    jobs.extend(hourly(
        grid,
        hours,
        "count_over_time",
        &sig.episodes(thr, l, s),
        l,
        src,
        Slot::Idle,
    ));
    jobs.extend(hourly(
        grid,
        hours,
        "count_over_time",
        &sig.held_episodes(thr, l, s, &q.matchers, q.profile.held_idle_min_mib),
        l,
        src,
        Slot::Held,
    ));
    let w = grid.window();
    let window = |promql: String, put: fn(&mut Acc, f64), scale: f64| Job {
        promql,
        ask: Ask::At(grid.hi),
        source: src,
        put: Put::Window(put),
        scale,
    };
    let expr = &sig.expr;
    jobs.push(window(
        format!("quantile_over_time(0.5, {expr}{w})"),
        |a, v| a.p50 = Some(v),
        sig.scale,
    ));
    jobs.push(window(
        format!("quantile_over_time(0.95, {expr}{w})"),
        |a, v| a.p95 = Some(v),
        sig.scale,
    ));
    let bands: [fn(&mut Acc, f64); 4] = [
        |a, v| a.below[0] = v,
        |a, v| a.below[1] = v,
        |a, v| a.below[2] = v,
        |a, v| a.below[3] = v,
    ];
    for (edge, put) in UTIL_BAND_EDGES_PCT.into_iter().zip(bands) {
        jobs.push(window(
            format!("count_over_time({}{w})", sig.below(edge)),
            put,
            1.0,
        ));
    }
    // The idle threshold is its own question when it is not the first band's edge.
    #[allow(clippy::float_cmp)] // both are settings, compared as given
    if UTIL_BAND_EDGES_PCT[0] != thr {
        jobs.push(window(
            format!("count_over_time({}{w})", sig.below(thr)),
            |a, v| a.below_idle = Some(v),
            1.0,
        ));
    }
    // The largest sample is the largest point however the points are weighted: a single
    // metric's is asked of its raw samples (a native range, no subquery).
    let max = if sig.source == Source::Either {
        format!("max_over_time({expr}{w})")
    } else {
        format!("max_over_time({expr}[{}ms])", grid.hi - grid.lo)
    };
    jobs.push(window(max, |a, v| a.max = Some(v), sig.scale));
    jobs
}

/// Memory, power and profiling activity over the window (each left empty where the store has
/// no such metric): maxima and quantiles natively over each metric's raw samples, means over
/// its points (each sample weighted by how long it holds, as the file reader weighs it; a
/// subquery over one bare metric costs about what the native function does).
fn device_jobs(q: &Query, grid: &Grid) -> Vec<Job> {
    let w_ms = grid.hi - grid.lo;
    let w = grid.window();
    let native = |func: &str, metric: &str| {
        if func == "avg_over_time" {
            format!("{func}({}{w})", q.metric(metric))
        } else {
            format!("{func}({}[{w_ms}ms])", q.metric(metric))
        }
    };
    let window = |promql: String, put: fn(&mut Acc, f64), scale: f64| Job {
        promql,
        ask: Ask::At(grid.hi),
        source: None,
        put: Put::Window(put),
        scale,
    };
    let fb = "DCGM_FI_DEV_FB_USED";
    // Used + free is the device's memory less the driver's reservation: constant, but the sum
    // of two metrics makes new label sets at every step, so it is asked every 10 scrapes.
    let coarse = 10 * grid.s;
    let coarse_w = (w_ms / coarse).max(1) * coarse;
    vec![
        window(
            native("max_over_time", fb),
            |a, v| a.mem_peak = Some(v),
            1.0,
        ),
        window(
            native("avg_over_time", fb),
            |a, v| a.mem_mean = Some(v),
            1.0,
        ),
        window(
            format!("quantile_over_time(0.95, {}[{w_ms}ms])", q.metric(fb)),
            |a, v| a.mem_p95 = Some(v),
            1.0,
        ),
        window(
            format!(
                "max_over_time(({} + {})[{coarse_w}ms:{coarse}ms])",
                q.metric(fb),
                q.metric("DCGM_FI_DEV_FB_FREE")
            ),
            |a, v| a.mem_total = Some(v),
            1.0,
        ),
        window(
            native("avg_over_time", "DCGM_FI_DEV_POWER_USAGE"),
            |a, v| a.power_mean = Some(v),
            1.0,
        ),
        window(
            native("max_over_time", "DCGM_FI_DEV_POWER_USAGE"),
            |a, v| a.power_peak = Some(v),
            1.0,
        ),
        window(
            native("max_over_time", "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
            |a, v| a.power_limit = Some(v),
            1.0,
        ),
        window(
            native("avg_over_time", "DCGM_FI_PROF_SM_ACTIVE"),
            |a, v| a.sm = Some(v),
            100.0,
        ),
        window(
            native("avg_over_time", "DCGM_FI_PROF_SM_OCCUPANCY"),
            |a, v| a.occ = Some(v),
            100.0,
        ),
        window(
            native("avg_over_time", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"),
            |a, v| a.tensor = Some(v),
            100.0,
        ),
        window(
            native("avg_over_time", "DCGM_FI_PROF_DRAM_ACTIVE"),
            |a, v| a.dram = Some(v),
            100.0,
        ),
    ]
}

/// How many queries are in flight at once: Prometheus evaluates each on one core.
const PARALLEL: usize = 4;

/// The queries' answers, per device, and what was asked.
struct Collect<'c> {
    client: &'c Client,
    queries: QueryLog,
    warnings: Vec<String>,
    devs: BTreeMap<DeviceKey, Acc>,
    /// Devices whose samples are off the grid, with why: read raw, their answers ignored.
    off_grid: BTreeMap<DeviceKey, String>,
    /// How many of [`RAW_METRICS`] have series.
    present: usize,
}

impl Collect<'_> {
    /// A warning for memory or power metrics no query found.
    fn warn_missing_metrics(&mut self) {
        for metric in ["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"] {
            if !self
                .queries
                .iter()
                .any(|(qq, n, _)| qq.contains(metric) && *n > 0)
            {
                self.warnings
                    .push(format!("{metric} is missing: its figures are left empty"));
            }
        }
    }

    /// Every device off the grid when the interval is over half the maximum gap: every
    /// missed scrape is then a gap longer than --max-gap, which the file reader counts as no
    /// data and the store's lookback carries on, and the grid cannot tell them apart.
    fn set_aside_all_when_sparse(&mut self, q: &Query, s: i64) {
        if 2 * s <= i64::try_from(q.profile.max_gap_ms).unwrap_or(i64::MAX) {
            return;
        }
        for key in std::mem::take(&mut self.devs).into_keys() {
            self.off_grid.insert(
                key,
                format!(
                    "the scrape interval ({} s) is over half of --max-gap, where a missed \
                     scrape cannot be told from a gap on the grid",
                    s / 1000
                ),
            );
        }
    }

    /// Take the devices whose samples are off the grid ([`off_grid`]) out of the pushdown: UTIL's
    /// counts decide where the device has UTIL (every scrape has it), GR's elsewhere (MIG).
    fn set_aside_off_grid(&mut self) {
        let off: Vec<(DeviceKey, String)> = self
            .devs
            .iter()
            .filter_map(|(key, a)| {
                let util: f64 = a.hours.values().map(|h| h.util).sum();
                let gr: f64 = a.hours.values().map(|h| h.gr).sum();
                let (check, points) = if util > 0.0 {
                    (&a.check[1], util)
                } else {
                    (&a.check[0], gr)
                };
                (points > 0.0)
                    .then(|| off_grid(check, points))
                    .flatten()
                    .map(|why| (key.clone(), why))
            })
            .collect();
        for (key, why) in off {
            self.devs.remove(&key);
            self.off_grid.insert(key, why);
        }
    }

    /// Ask every job ([`PARALLEL`] at a time) and file the answers in the jobs' order.
    fn run(&mut self, jobs: Vec<Job>) -> Result<(), PromError> {
        let client = self.client;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Option<Result<Response, PromError>>>> = (0..jobs.len())
            .map(|_| std::sync::Mutex::new(None))
            .collect();
        std::thread::scope(|scope| {
            for _ in 0..PARALLEL.min(jobs.len()) {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        let r = match job.ask {
                            Ask::At(t) => client.query(&job.promql, t),
                            Ask::Hours { first, last, shift } => client.query_range(
                                &job.promql,
                                first + shift,
                                last + shift,
                                gpuwise_core::HOUR_MS,
                            ),
                        };
                        let failed = r.is_err();
                        if let Ok(mut slot) = slots[i].lock() {
                            *slot = Some(r);
                        }
                        if failed {
                            // The first error stops the others at their next job.
                            next.store(jobs.len(), std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        for (job, slot) in jobs.into_iter().zip(slots) {
            match slot.into_inner().ok().flatten() {
                Some(Ok(r)) => self.file(job, &r),
                Some(Err(e)) => return Err(e),
                // Not asked: an earlier error stopped the run and is returned above.
                None => {}
            }
        }
        Ok(())
    }

    /// One answer into the devices' figures.
    fn file(&mut self, job: Job, r: &Response) {
        for wmsg in &r.warnings {
            self.warnings
                .push(format!("partial result for `{}`: {wmsg}", job.promql));
        }
        let points: usize = r.series.iter().map(|x| x.samples.len()).sum();
        self.queries.push((job.promql, r.series.len(), points));
        if matches!(job.put, Put::Present) {
            self.present = r.series.len();
            return;
        }
        for series in &r.series {
            let Some((key, info)) = device_of(&series.labels) else {
                continue;
            };
            if self.off_grid.contains_key(&key) {
                continue;
            }
            // A source's answers go to its devices; the rest (metric counts, memory, power)
            // to every device.
            let acc = match job.source {
                Some(source) => match self.devs.get_mut(&key) {
                    Some(acc) if acc.source == Some(source) => acc,
                    _ => continue,
                },
                None => self.devs.entry(key).or_default(),
            };
            if acc.info.is_none() {
                acc.info = Some(info);
            }
            match &job.put {
                Put::Window(set) => {
                    if let Some(v) = last_value(series) {
                        set(acc, v * job.scale);
                    }
                }
                Put::Hour(slot, hour) => {
                    let shift = match job.ask {
                        Ask::Hours { shift, .. } => shift,
                        Ask::At(_) => 0,
                    };
                    for (t, v) in &series.samples {
                        if v.is_finite() {
                            let h = hour.unwrap_or(t - shift);
                            acc.hours.entry(h).or_default().set(*slot, v * job.scale);
                        }
                    }
                }
                Put::Present => {}
            }
        }
    }
}

/// Which source each device is read from, by its metrics' points per hour: GR alone where
/// it has the same count as UTIL in every hour (or UTIL has none), UTIL alone where GR has
/// none, else both point by point. Returns the sources in use.
fn choose_sources(devs: &mut BTreeMap<DeviceKey, Acc>) -> Vec<Source> {
    let mut used = Vec::new();
    for acc in devs.values_mut() {
        let gr: f64 = acc.hours.values().map(|h| h.gr).sum();
        let util: f64 = acc.hours.values().map(|h| h.util).sum();
        #[allow(clippy::float_cmp)] // whole counts
        let source = if gr <= 0.0 {
            (util > 0.0).then_some(Source::Util)
        } else if util <= 0.0 || acc.hours.values().all(|h| h.gr == h.util) {
            Some(Source::Gr)
        } else {
            Some(Source::Either)
        };
        acc.gr = gr > 0.0;
        acc.source = source;
        for h in acc.hours.values_mut() {
            h.n = match source {
                Some(Source::Gr) => h.gr,
                Some(Source::Util) => h.util,
                _ => 0.0,
            };
        }
        if let Some(s) = source.filter(|s| !used.contains(s)) {
            used.push(s);
        }
    }
    used.sort();
    used
}

/// The devices with samples whose answers are plausible, as profiles; implausible values are
/// left empty and named, a device with implausible counts is left out and named.
fn plausible_profiles(
    devs: BTreeMap<DeviceKey, Acc>,
    q: &Query,
    s: i64,
    warnings: &mut Vec<String>,
) -> Vec<DeviceProfile> {
    let sh = gpuwise_core::hours_of_ms(s as f64);
    let window_samples = (q.end_ms - q.start_ms) as f64 / s as f64 + 1.0;
    devs.into_iter()
        .filter(|(_, a)| a.n > 0.0)
        .filter_map(|(key, mut a)| match plausible(&mut a, window_samples, s) {
            Ok(dropped) => {
                warnings.extend(dropped.into_iter().map(|what| {
                    format!(
                        "implausible value from the store for `{key}`: {what} (value left empty)"
                    )
                }));
                Some(finish(key, a, s, sh, q))
            }
            Err(why) => {
                warnings.push(format!(
                    "implausible counts from the store for `{key}`: {why}; the device is left out"
                ));
                None
            }
        })
        .collect()
}

/// The plausibility rules of file samples (`Sample::sanitize`), applied to what the store
/// computed: percentages within 0–100, memory and power within what a GPU has, and sample
/// counts no larger than the window (or hour) holds at the scrape interval. A percentage or
/// amount out of range is left empty and named; a count out of range makes every hour of the
/// device doubtful, so the device is left out (`Err`) rather than reported wrong.
fn plausible(a: &mut Acc, window_samples: f64, step_ms: i64) -> Result<Vec<String>, String> {
    let mut dropped = Vec::new();
    let limit = window_samples * 1.001 + 1.0;
    if !(0.0..=limit).contains(&a.n) {
        return Err(format!(
            "{} samples in a window that holds at most {window_samples:.0} at the scrape interval",
            a.n
        ));
    }
    for (what, v) in [
        ("below-threshold count", a.below[0]),
        ("band count", a.below[1]),
        ("band count", a.below[2]),
        ("band count", a.below[3]),
        ("below-idle-threshold count", a.below_idle.unwrap_or(0.0)),
        ("idle count", a.idle),
        ("held-idle count", a.held),
    ] {
        if !(0.0..=a.n * 1.001 + 1.0).contains(&v) {
            return Err(format!("a {what} of {v} against {} samples", a.n));
        }
    }
    let per_hour = 3_600_000.0 / step_ms as f64 + 1.0;
    for (
        start,
        Hour {
            n,
            mean,
            idle,
            held,
            ..
        },
    ) in &a.hours
    {
        if !(0.0..=per_hour * 1.001 + 1.0).contains(n)
            || !(0.0..=n * 1.001 + 1.0).contains(idle)
            || !(0.0..=idle + 0.5).contains(held)
            || !(0.0..=100.0).contains(mean)
        {
            return Err(format!(
                "the hour at {} has {n} samples, mean {mean}, {idle} idle",
                gpuwise_sources::diag::show_time(*start)
            ));
        }
    }
    let mut pct = |name: &str, v: &mut Option<f64>| {
        if v.is_some_and(|x| !(0.0..=100.0).contains(&x)) {
            dropped.push(format!("{name} {}", v.unwrap_or_default()));
            *v = None;
        }
    };
    pct("mean utilization %", &mut a.mean);
    pct("median utilization %", &mut a.p50);
    pct("p95 utilization %", &mut a.p95);
    pct("maximum utilization %", &mut a.max);
    pct("SM activity %", &mut a.sm);
    pct("SM occupancy %", &mut a.occ);
    pct("tensor activity %", &mut a.tensor);
    pct("DRAM activity %", &mut a.dram);
    let mut amount = |name: &str, max: u32, v: &mut Option<f64>| {
        if v.is_some_and(|x| !(0.0..=f64::from(max)).contains(&x)) {
            dropped.push(format!("{name} {}", v.unwrap_or_default()));
            *v = None;
        }
    };
    let mem = gpuwise_core::sample::MAX_MEMORY_MIB;
    let pw = gpuwise_core::sample::MAX_POWER_W;
    amount("peak memory MiB", mem, &mut a.mem_peak);
    amount("mean memory MiB", mem, &mut a.mem_mean);
    amount("p95 memory MiB", mem, &mut a.mem_p95);
    amount("memory total MiB", mem, &mut a.mem_total);
    amount("mean power W", pw, &mut a.power_mean);
    amount("peak power W", pw, &mut a.power_peak);
    amount("power limit W", pw, &mut a.power_limit);
    if a.mean.is_none() {
        // Without a plausible mean the utilization figures say nothing.
        a.p50 = None;
        a.p95 = None;
        a.max = None;
    }
    Ok(dropped)
}

/// Hours in the bands (UTIL_BAND_EDGES_PCT) from the store's counts.
fn bands(a: &Acc, sh: f64) -> [f64; 5] {
    let cum = [a.below[0], a.below[1], a.below[2], a.below[3], a.n];
    let mut prev = 0.0;
    cum.map(|c| {
        let h = (c - prev).max(0.0) * sh;
        prev = c;
        h
    })
}

/// The hourly timeline and the idle episodes at hourly resolution (a run of hours with idle
/// time; the held share of idle time spread over them).
fn hours_and_episodes(a: &Acc, s: i64, sh: f64) -> (Vec<HourPoint>, Vec<Episode>) {
    let mut hourly = Vec::new();
    let mut episodes: Vec<Episode> = Vec::new();
    let held_share = if a.idle > 0.0 { a.held / a.idle } else { 0.0 };
    for (&start, &Hour { n, mean, idle, .. }) in &a.hours {
        let covered = n * sh;
        if covered <= 0.0 {
            continue;
        }
        let idle_h = (idle * sh).min(covered);
        let util_ms = n * s as f64;
        hourly.push(HourPoint {
            start_ms: start,
            covered_hours: covered,
            util_hours: covered,
            util_weighted: (mean * 100.0 * util_ms).round().max(0.0) as u64,
            idle_hours: idle_h,
        });
        // Episodes at hourly resolution: a run of hours with idle time.
        if idle_h > 0.0 {
            let dur = (idle_h * 3_600_000.0) as u64;
            match episodes.last_mut() {
                Some(e)
                    if e.start_ms + i64::try_from(e.dur_ms).unwrap_or(0)
                        >= start - gpuwise_core::HOUR_MS =>
                {
                    e.dur_ms += dur;
                    e.held_ms = (e.dur_ms as f64 * held_share) as u64;
                }
                _ => episodes.push(Episode {
                    start_ms: start + gpuwise_core::HOUR_MS - dur as i64,
                    dur_ms: dur,
                    held_ms: (dur as f64 * held_share) as u64,
                }),
            }
        }
    }
    (hourly, episodes)
}

fn finish(key: DeviceKey, mut a: Acc, s: i64, sh: f64, q: &Query) -> DeviceProfile {
    let mut info = a.info.take().unwrap_or_default();
    info.util_source = Some(if a.gr {
        UtilSource::DcgmGrEngineActive
    } else {
        UtilSource::DcgmGpuUtil
    });
    let observed = a.n * sh;
    let first = a
        .first
        .map_or(q.start_ms, |t| (t * 1000.0).round() as EpochMs);
    let last = a.last.map_or(q.end_ms, |t| (t * 1000.0).round() as EpochMs);
    let band_hours = bands(&a, sh);
    let (hourly, episodes) = hours_and_episodes(&a, s, sh);
    // The quantiles come from the grid's points and the maximum from the raw samples, which
    // hold every point's value: a percentile is never above the maximum.
    let util = a.mean.map(|mean| {
        let max = a.max.unwrap_or(mean).max(mean);
        let p95 = a.p95.unwrap_or(mean).min(max);
        UtilStats {
            mean_pct: mean,
            p50_pct: a.p50.unwrap_or(mean).min(p95),
            p95_pct: p95,
            max_pct: max,
            observed_hours: observed,
        }
    });
    if let (Some(p95), Some(peak)) = (a.mem_p95, a.mem_peak) {
        a.mem_p95 = Some(p95.min(peak));
    }
    let span = gpuwise_core::hours_of_ms((last - first) as f64);
    DeviceProfile {
        key,
        info,
        stats: DeviceStats {
            first_ts_ms: first,
            last_ts_ms: last,
            samples: a.n as u64,
            reordered: 0,
            duplicates: 0,
            outliers: 0,
            overlaps: 0,
            overlap_samples: 0,
            overlap_hours: 0.0,
            observed_hours: observed,
            span_hours: span,
            gaps: 0,
            gap_hours: (span - observed).max(0.0),
            sampling_interval_s: Some(s as f64 / 1000.0),
            util,
            util_band_hours: band_hours,
            sm_active_pct: a.sm,
            sm_occupancy_pct: a.occ,
            tensor_active_pct: a.tensor,
            dram_active_pct: a.dram,
            mem_bw_util_pct: None,
            mem_used_mean_mib: a.mem_mean,
            mem_used_p95_mib: a.mem_p95,
            mem_used_peak_mib: a.mem_peak,
            mem_total_mib: a.mem_total,
            power_mean_w: a.power_mean,
            power_peak_w: a.power_peak,
            power_limit_w: a.power_limit,
            below_threshold_hours: a.below_idle.unwrap_or(a.below[0]) * sh,
            idle_hours: a.idle * sh,
            held_idle_hours: a.held * sh,
            idle_episodes: episodes,
            tz: q.tz.clone(),
            hourly,
        },
    }
}

/// The metrics `--raw` pulls.
pub const RAW_METRICS: &[&str] = &[
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT",
];

/// Most points one raw request may bring per series: a chunk of the window is this many scrape
/// intervals long, so a response stays well under the client's 256 MiB bound for a thousand
/// series.
const RAW_CHUNK_POINTS: i64 = 2_000;

/// Which devices a raw pull keeps: `None` every device, else those named, with the label
/// that holds the fleet's GPU UUIDs (`UUID` or `uuid`).
pub type Only<'a> = Option<(&'a std::collections::BTreeSet<DeviceKey>, &'a str)>;

/// `--raw`: every sample of [`RAW_METRICS`] as the store holds it, with its own timestamp (an
/// instant query of a range selector, `M[chunk]`, one chunk of the window at a time: not
/// `query_range`, whose points are evaluations on a grid that repeat a sample or skip one
/// wherever the scrapes do not keep the grid's phase), kept where `start ≤ t < end` — the file
/// reader's `--since`/`--until` rule — and written as DCGM exposition lines (series by series,
/// milliseconds) for the DCGM reader, so label and unit rules exist once. Prometheus 2 closes
/// a range at its start and Prometheus 3 and VictoriaMetrics leave it open; the chunks are cut
/// by time here, so a sample on a chunk's edge is kept once on every engine.
pub fn raw_exposition(
    client: &Client,
    q: &Query,
    step_ms: i64,
    only: Only<'_>,
) -> Result<(String, QueryLog), PromError> {
    let mut out = String::new();
    let mut queries = Vec::new();
    let chunk = step_ms.max(1).saturating_mul(RAW_CHUNK_POINTS);
    let matchers = only.map_or_else(
        || q.matchers.clone(),
        |(keys, label)| only_matchers(q, keys, label),
    );
    for m in RAW_METRICS {
        let selector = format!("{m}{{{matchers}}}");
        let mut joined: BTreeMap<BTreeMap<String, String>, Vec<(EpochMs, f64)>> = BTreeMap::new();
        // Chunks (a, b] over (start − 1, end − 1]: every t with start ≤ t < end once.
        let mut a = q.start_ms - 1;
        let (mut series, mut points) = (0, 0);
        while a < q.end_ms - 1 {
            let b = a.saturating_add(chunk).min(q.end_ms - 1);
            let promql = format!("{selector}[{}ms]", b - a);
            let r = client.query(&promql, b)?;
            series = series.max(r.series.len());
            for s in r.series {
                if let Some((keys, _)) = only
                    && !device_of(&s.labels).is_some_and(|(k, _)| keys.contains(&k))
                {
                    continue;
                }
                let kept = s.samples.into_iter().filter(|(t, _)| *t > a && *t <= b);
                let into = joined.entry(s.labels).or_default();
                let before = into.len();
                into.extend(kept);
                points += into.len() - before;
            }
            a = b;
        }
        queries.push((format!("{selector}[…] ×chunks"), series, points));
        for (labels, samples) in &joined {
            let head = format!("{m}{{{}}}", label_matchers(labels));
            for (t, v) in samples {
                out.push_str(&head);
                out.push(' ');
                out.push_str(&v.to_string());
                out.push(' ');
                out.push_str(&t.to_string());
                out.push('\n');
            }
        }
    }
    Ok((out, queries))
}

/// The query's matchers narrowed to `keys`' GPUs: a regex over their UUIDs in the fleet's
/// UUID label (`UUID`, else `uuid`, as [`device_of`] reads them). The pull keeps only `keys`'
/// series in any case, so a fleet that spells the label both ways, or names GPUs by index,
/// is pulled with the query's own matchers and filtered here.
fn only_matchers(q: &Query, keys: &std::collections::BTreeSet<DeviceKey>, label: &str) -> String {
    let gpus: std::collections::BTreeSet<String> =
        keys.iter().map(|k| regex_quote(&k.gpu)).collect();
    let named: usize = gpus.iter().map(String::len).sum();
    if label.is_empty()
        || gpus.is_empty()
        || named > 16_000
        || !keys.iter().all(|k| is_uuid_like(&k.gpu))
    {
        return q.matchers.clone();
    }
    let alt = gpus.into_iter().collect::<Vec<_>>().join("|");
    let narrow = format!("{label}=~\"{alt}\"");
    if q.matchers.is_empty() {
        narrow
    } else {
        format!("{},{narrow}", q.matchers)
    }
}

fn is_uuid_like(gpu: &str) -> bool {
    gpu.starts_with("GPU-") || gpu.starts_with("MIG-")
}

/// `s` as a literal inside a PromQL regex in a double-quoted string.
fn regex_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push_str("\\\\");
        } else if c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What `--raw` read.
#[derive(Debug)]
pub struct Raw {
    /// The profile, as from a DCGM file.
    pub profile: gpuwise_core::profile::Profile,
    /// The DCGM reader's count of lines, samples and skips.
    pub tally: gpuwise_sources::diag::Tally,
    /// Queries sent.
    pub queries: QueryLog,
}

/// `--raw` read through the DCGM reader (with `only`, those devices' samples alone), each
/// sample shown to `tap` as well (`gpuwise jobs`).
pub fn raw(
    client: &Client,
    q: &Query,
    step_ms: i64,
    only: Only<'_>,
    tap: Option<gpuwise_core::profile::SharedTap>,
    tile_ms: Option<u64>,
) -> Result<Raw, PromError> {
    let (text, queries) = raw_exposition(client, q, step_ms, only)?;
    let mut b = gpuwise_core::profile::ProfileBuilder::new(q.profile.clone()).with_tap(tap);
    if let Some(t) = tile_ms {
        b = b.with_tiles(t);
    }
    let mut tally = gpuwise_sources::diag::Tally::default();
    let origin = gpuwise_sources::Origin {
        file: "prometheus",
        host: None,
        stem: "prometheus",
    };
    gpuwise_sources::dcgm::read(
        &mut std::io::Cursor::new(text.as_bytes()),
        gpuwise_sources::dcgm::Order::BySeries,
        &origin,
        None,
        &mut b,
        &mut tally,
    )
    .map_err(|e| PromError::Config(format!("reading the raw samples: {e}")))?;
    Ok(Raw {
        profile: b.build(),
        tally,
        queries,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_is_off_the_grid_by_any_of_its_counts() {
        let on = GridCheck {
            samples: 100.0,
            ..GridCheck::default()
        };
        // 100 samples, 103 points: three missed scrapes the lookback carries, on the grid.
        assert_eq!(off_grid(&on, 103.0), None);
        for (c, points, says) in [
            (
                GridCheck {
                    doubles: [0.0, 2.0],
                    ..on
                },
                100.0,
                "two samples or more",
            ),
            (
                GridCheck { stale: 1.0, ..on },
                100.0,
                "longer than --max-gap",
            ),
            (
                GridCheck {
                    unfilled: 3.0,
                    ..on
                },
                100.0,
                "leaves 3 point(s) empty",
            ),
            (on, 150.0, "not the grid's"),
        ] {
            assert!(
                off_grid(&c, points).is_some_and(|w| w.contains(says)),
                "{says}"
            );
        }
    }

    #[test]
    fn uuids_are_regex_literals() {
        assert_eq!(regex_quote("GPU-ab.c"), "GPU-ab\\\\.c");
        assert_eq!(regex_quote("a\"b"), "a\\\"b");
        assert_eq!(regex_quote("MIG-1|2"), "MIG-1\\\\|2");
    }

    #[test]
    fn the_cost_model_picks_what_the_bench_measured() {
        // (raw points, raw requests, samples, pushdown requests) of bench/prometheus.sh runs,
        // with the path that was faster there (BENCHMARKS.md, 2026-11-27).
        // 24 GPUs × 7 days at 30 s: raw 5.9 s, pushdown 1.2 s.
        let (raw, push) = COSTS.estimate(3_870_912.0, 88.0, 483_864.0, 34.0);
        assert!(push < raw && (raw / 1e6 - 5.9).abs() < 0.5 && (push / 1e6 - 1.2).abs() < 0.2);
        // 4 GPUs × 1 day at 30 s: raw 0.13 s, pushdown 0.06 s.
        let (raw, push) = COSTS.estimate(92_192.0, 16.0, 11_524.0, 34.0);
        assert!(push < raw, "{raw} {push}");
        // Two GPUs for an hour: 240 samples of six metrics are cheaper pulled than 34 queries.
        let (raw, push) = COSTS.estimate(1_440.0, 6.0, 240.0, 34.0);
        assert!(raw < push, "{raw} {push}");
    }

    #[test]
    fn selectors_become_matchers() {
        assert_eq!(
            Query::matchers_of("{namespace=~\"ml-.*\"}"),
            Ok("namespace=~\"ml-.*\"".to_owned())
        );
        assert_eq!(Query::matchers_of(""), Ok(String::new()));
        assert!(Query::matchers_of("namespace=\"x\"").is_err());
    }

    #[test]
    fn device_identity_follows_the_dcgm_reader() {
        let l: BTreeMap<String, String> = [
            ("__name__", "DCGM_FI_DEV_GPU_UTIL"),
            ("UUID", "GPU-1"),
            ("gpu", "3"),
            ("Hostname", "node-a"),
            ("modelName", "NVIDIA H100 80GB HBM3"),
            ("exported_namespace", "team-a"),
            ("namespace", "gpu-operator"),
            ("team", "vision"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let (key, info) = device_of(&l).expect("device");
        assert_eq!((key.host.as_str(), key.gpu.as_str()), ("node-a", "GPU-1"));
        assert_eq!(info.index, Some(3));
        assert_eq!(info.label("namespace"), Some("team-a"));
        assert_eq!(info.label("team"), Some("vision"));
    }

    #[test]
    fn each_device_is_read_from_the_metric_its_points_allow() {
        let key = |gpu: &str| DeviceKey {
            host: "h".into(),
            gpu: gpu.into(),
            mig: None,
        };
        let hour = |gr: f64, util: f64| Hour {
            gr,
            util,
            ..Hour::default()
        };
        let mut devs = BTreeMap::new();
        for (gpu, hours) in [
            // Both metrics, the same points: GR alone.
            ("same", [hour(30.0, 30.0), hour(30.0, 30.0)]),
            // GR missing for a while: both, point by point.
            ("gap", [hour(30.0, 30.0), hour(10.0, 30.0)]),
            // No GR: UTIL; no UTIL (a MIG instance): GR.
            ("util", [hour(0.0, 30.0), hour(0.0, 29.0)]),
            ("mig", [hour(30.0, 0.0), hour(30.0, 0.0)]),
        ] {
            let a = Acc {
                hours: hours
                    .into_iter()
                    .enumerate()
                    .map(|(i, h)| (i as i64, h))
                    .collect(),
                ..Acc::default()
            };
            devs.insert(key(gpu), a);
        }
        devs.insert(key("none"), Acc::default());
        let used = choose_sources(&mut devs);
        assert_eq!(used, vec![Source::Gr, Source::Util, Source::Either]);
        let of = |gpu: &str| devs[&key(gpu)].source;
        assert_eq!(of("same"), Some(Source::Gr));
        assert_eq!(of("gap"), Some(Source::Either));
        assert_eq!(of("util"), Some(Source::Util));
        assert_eq!(of("mig"), Some(Source::Gr));
        assert_eq!(of("none"), None);
        // The chosen metric's counts are the device's; Either's come from its own query.
        let n: Vec<f64> = devs[&key("util")].hours.values().map(|h| h.n).collect();
        assert_eq!(n, vec![30.0, 29.0]);
        assert!(devs[&key("gap")].hours.values().all(|h| h.n == 0.0));
        assert!(devs[&key("mig")].gr && !devs[&key("util")].gr);
    }

    #[test]
    fn first_and_last_samples_come_from_the_edge_hours() {
        let h = gpuwise_core::HOUR_MS;
        let s = 30_000;
        let acc = |grid: &Grid, hours: &[(i64, f64)]| {
            let mut a = Acc {
                hours: hours
                    .iter()
                    .map(|&(hour, n)| {
                        (
                            hour,
                            Hour {
                                n,
                                mean: 50.0,
                                ..Hour::default()
                            },
                        )
                    })
                    .collect(),
                ..Acc::default()
            };
            a.total(grid);
            let ms = |v: Option<f64>| (v.expect("set") * 1000.0).round() as i64;
            (ms(a.first), ms(a.last), a.n)
        };
        // A window inside one hour, the device there throughout: 10:00 to 10:10.
        let g = Grid::new(10 * h, 10 * h + 600_000, s);
        assert_eq!(acc(&g, &[(10 * h, 20.0)]), (10 * h, 10 * h + 600_000, 20.0));
        // Over three hours: the device arrives at 10:30 and leaves at 12:15.
        let g = Grid::new(10 * h, 13 * h, s);
        let (first, last, n) = acc(&g, &[(10 * h, 60.0), (11 * h, 120.0), (12 * h, 30.0)]);
        assert_eq!(first, 10 * h + 1_800_000);
        assert_eq!(last, 12 * h + 900_000);
        assert!((n - 210.0).abs() < 1e-9);
        // A window that starts inside an hour: the first hour's piece opens at the window.
        let g = Grid::new(10 * h + 1_200_000, 12 * h, s);
        let (first, _, _) = acc(&g, &[(10 * h, 80.0), (11 * h, 120.0)]);
        assert_eq!(first, 10 * h + 1_200_000);
    }

    #[test]
    fn implausible_aggregates_are_left_empty_or_the_device_out() {
        // A week at 30 s holds 20,161 samples.
        let window = 7.0 * 86_400.0 / 30.0 + 1.0;
        let mut a = Acc {
            n: 20_000.0,
            mean: Some(250.0),
            p95: Some(99.0),
            power_mean: Some(3e15),
            mem_peak: Some(40_000.0),
            ..Acc::default()
        };
        let dropped = plausible(&mut a, window, 30_000).expect("counts are fine");
        assert_eq!(a.mean, None);
        assert_eq!(a.p95, None, "no mean, no percentiles");
        assert_eq!(a.power_mean, None);
        assert_eq!(a.mem_peak, Some(40_000.0));
        assert_eq!(
            dropped,
            vec!["mean utilization % 250", "mean power W 3000000000000000"]
        );
        // A count of 1e300 would be 6e297 GPU-hours: the device is left out.
        let mut a = Acc {
            n: 1e300,
            ..Acc::default()
        };
        assert!(plausible(&mut a, window, 30_000).is_err());
        // An idle count above the sample count: left out too.
        let mut a = Acc {
            n: 100.0,
            idle: 500.0,
            ..Acc::default()
        };
        assert!(plausible(&mut a, window, 30_000).is_err());
        // An hour with more samples than an hour holds.
        let mut a = Acc {
            n: 100.0,
            ..Acc::default()
        };
        a.hours.insert(
            0,
            Hour {
                n: 1_000.0,
                mean: 50.0,
                ..Hour::default()
            },
        );
        assert!(plausible(&mut a, window, 30_000).is_err());
    }
}
