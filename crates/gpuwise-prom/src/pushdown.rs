//! Fleet telemetry from a Prometheus-compatible store, by pushing the aggregation down.
//!
//! Instead of pulling every sample, gpuwise asks the store for per-series summaries over the
//! window (instant queries at the window's end) and for hourly summaries (range queries with a
//! one-hour step), then builds the same per-device statistics the file readers produce. The
//! utilization signal is `DCGM_FI_PROF_GR_ENGINE_ACTIVE × 100` where a device has it, else
//! `DCGM_FI_DEV_GPU_UTIL`, as in the file reader. Subqueries run at the scrape interval `S`,
//! so counts are exact sample counts, not samples of samples:
//!
//! | figure | PromQL (U the utilization, W = `[w:S]`) |
//! |---|---|
//! | samples, GPU-hours | `count_over_time(U W)` × S |
//! | mean, p50, p95 | `avg_over_time`, `quantile_over_time(0.5 / 0.95, U W)` |
//! | max | `max_over_time(GR[w]) * 100 or max_over_time(GPU_UTIL[w])`, natively over the raw samples |
//! | hours in utilization bands | `sum_over_time((U < bool 5) W)`, 25, 50, 85 (packing two counts in one query was tried: 2.1 s against 0.75 s each) |
//! | idle-episode samples (summed from the hourly counts) | a sample is in an episode when some run of L/S consecutive points below the threshold contains it: with I = `(U < bool 5)`, E = `max_over_time((min_over_time(I[L−S:S]) * (count_over_time(I[L−S:S]) >= bool L/S))[L−S:S])` summed per hour, evaluated L−S later |
//! | held idle | packed with the idle count in the same hourly query: `E × (1 + H × 2²⁰)` with H = `(FB_USED offset L−S >= bool 1024)` (0 where the memory metric is missing), so E is evaluated once for both |
//! | memory, power, PROF activity | `max/avg/quantile_over_time` of the metric |
//! | hourly timeline, hour of week | the same counts as range queries with a 1 h step |
//!
//! Idle episodes themselves are known only per hour (runs of hours with idle time); their
//! total is exact. `--raw` pulls the samples with `query_range` at the scrape interval and
//! reads them with the DCGM reader instead.

use std::collections::BTreeMap;

use gpuwise_core::profile::{DeviceProfile, DeviceStats, Episode, HourPoint, UtilStats};
use gpuwise_core::sample::UtilSource;
use gpuwise_core::settings::{ProfileSettings, UTIL_BAND_EDGES_PCT};
use gpuwise_core::{DeviceInfo, DeviceKey, EpochMs};

use crate::api::Series;
use crate::client::{Client, PromError};

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

    /// The utilization expression.
    fn util(&self) -> String {
        format!(
            "({} * 100 or {})",
            self.metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
            self.metric("DCGM_FI_DEV_GPU_UTIL")
        )
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
    /// Per hour: samples, mean utilization, idle-episode samples, of them with memory held.
    hours: BTreeMap<EpochMs, (f64, f64, f64, f64)>,
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

/// Push the aggregation down to the store behind `client`, in shards when the window holds
/// more samples than the budget.
pub fn pushdown(client: &Client, q: &Query) -> Result<Pushed, PromError> {
    let (r, step) = census(client, q)?;
    let q = &Query {
        step_ms: Some(step),
        ..q.clone()
    };
    let total: f64 = r.series.iter().filter_map(last_value).sum();
    if total <= q.sample_budget as f64 {
        return pushdown_one(client, q, step);
    }
    let label = if r.series.iter().any(|x| x.labels.contains_key("UUID")) {
        "UUID"
    } else {
        "uuid"
    };
    let mut all = Pushed {
        profiles: Vec::new(),
        step_ms: 0,
        queries: Vec::new(),
        warnings: Vec::new(),
        metrics_present: 0,
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
        match pushdown_one(client, &sq, step) {
            Ok(p) => {
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
        return pushdown_one(client, q, step);
    }
    Ok(all)
}

fn pushdown_one(client: &Client, q: &Query, s: i64) -> Result<Pushed, PromError> {
    let x = Exprs::new(q, s);
    let mut c = Collect {
        client,
        queries: Vec::new(),
        warnings: Vec::new(),
        devs: BTreeMap::new(),
    };
    let found = c.instant(
        format!("count_over_time({}{})", x.util, x.w),
        q.end_ms,
        |a, v| a.n = v,
    )?;
    if found == 0 {
        return Err(PromError::Config(format!(
            "no GPU utilization series{}: neither DCGM_FI_PROF_GR_ENGINE_ACTIVE nor DCGM_FI_DEV_GPU_UTIL",
            if q.matchers.is_empty() {
                String::new()
            } else {
                format!(" matching {{{}}}", q.matchers)
            }
        )));
    }
    for (promql, at, set) in window_queries(q, &x) {
        c.instant(promql, at, set)?;
    }
    c.hourly(q, &x, s)?;
    // The idle-episode total is the sum of the hourly counts (the hours partition the
    // window's samples): one evaluation of the nested expression instead of two.
    for acc in c.devs.values_mut() {
        acc.idle = acc.hours.values().map(|h| h.2).sum();
        acc.held = acc.hours.values().map(|h| h.3).sum();
    }
    for metric in ["DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_POWER_USAGE"] {
        if !c
            .queries
            .iter()
            .any(|(qq, n, _)| qq.contains(metric) && *n > 0)
        {
            c.warnings
                .push(format!("{metric} is missing: its figures are left empty"));
        }
    }
    let present = client.query(
        &format!(
            "count by (__name__) ({{__name__=~\"{}\"{}{}}})",
            RAW_METRICS.join("|"),
            if q.matchers.is_empty() { "" } else { "," },
            q.matchers
        ),
        q.end_ms,
    )?;
    let Collect {
        queries,
        mut warnings,
        devs,
        ..
    } = c;
    let profiles = plausible_profiles(devs, q, s, &mut warnings);
    Ok(Pushed {
        profiles,
        step_ms: s,
        queries,
        warnings,
        metrics_present: present.series.len(),
    })
}

/// The PromQL pieces of one pushdown at scrape interval `s`.
struct Exprs {
    /// The utilization expression `U`.
    util: String,
    /// The window as a subquery range at the scrape interval, `[w:S]`.
    w: String,
    /// `L − S`: how long after a sample its idle episode is known, ms.
    l: i64,
    /// E (a sample in an idle episode, evaluated `L − S` later) and E with memory held, packed
    /// into one number: `E × (1 + held × HELD_SCALE)`.
    e_held: String,
}

impl Exprs {
    fn new(q: &Query, s: i64) -> Self {
        let util = q.util();
        let w_ms = (q.end_ms - q.start_ms).max(1000);
        // Every subquery range is half a step short of a whole number of steps, so that it
        // holds the same points whether the store closes the range at its start (Prometheus 2)
        // or leaves it open (Prometheus 3, VictoriaMetrics): [w − S/2 : S] at the end holds
        // the points after the start up to the end, as many as the file path has intervals.
        let half = s / 2;
        let w = format!("[{}ms:{s}ms]", w_ms - half);
        let l = i64::try_from(q.profile.min_idle_episode_ms)
            .unwrap_or(600_000)
            .max(s)
            - s;
        let thr = q.profile.idle_threshold_pct;
        let held = q.profile.held_idle_min_mib;
        // I: the point below the threshold. A point is the last sample the store's lookback
        // (5 minutes) finds, as the file path holds a sample's value over a gap of up to
        // `max_gap` (5 minutes). (An earlier `time() - timestamp(U) < S` factor meant to keep
        // only fresh samples was always 1: `timestamp` of an expression is the evaluation
        // time; dropping it changed no figure and saved 30 % of the store's time.)
        // B(u): the L/S points up to u are all I; E(t) = B somewhere in [t, t + L − S],
        // evaluated L − S after t.
        let n = l / s + 1;
        let i = format!("({util} < bool {thr})");
        let b = format!(
            "(min_over_time({i}[{r}ms:{s}ms]) * (count_over_time({i}[{r}ms:{s}ms]) >= bool {n}))",
            r = l + half
        );
        let e = format!("max_over_time({b}[{}ms:{s}ms])", l + half);
        let fb = q.metric("DCGM_FI_DEV_FB_USED");
        // E and E with memory held in one number per point: E × (1 + held × 2²⁰), so the
        // store evaluates the nested E once for both. A device without the memory metric
        // counts as not held: `or` a zero carrying the device's labels wherever E can exist
        // (E at p needs a utilization point in [p − 2(L − S), p]; plus the 5-minute lookback).
        let span = 2 * l + 300_000;
        let zero = format!(
            "(max_over_time({}[{span}ms]) * 0 or max_over_time({}[{span}ms]) * 0)",
            q.metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
            q.metric("DCGM_FI_DEV_GPU_UTIL")
        );
        let e_held =
            format!("({e} * (1 + (({fb} offset {l}ms >= bool {held}) or {zero}) * {HELD_SCALE}))");
        Self { util, w, l, e_held }
    }
}

type Set = fn(&mut Acc, f64);

/// The scale that packs held-idle counts above idle counts in one hourly number: an hour holds
/// fewer than 2²⁰ samples at any interval of 4 ms or more.
const HELD_SCALE: f64 = 1_048_576.0;

/// The window's instant queries (at the window's end, or `L − S` later for idle figures) and
/// where each answer goes.
fn window_queries(q: &Query, x: &Exprs) -> Vec<(String, EpochMs, Set)> {
    let mut instant = utilization_queries(q, x);
    instant.extend(device_queries(q, x));
    let (util, w) = (x.util.as_str(), x.w.as_str());
    let thr = q.profile.idle_threshold_pct;
    let end = q.end_ms;
    // The idle threshold is its own question when it is not the first band's edge.
    #[allow(clippy::float_cmp)] // both are settings, compared as given
    if UTIL_BAND_EDGES_PCT[0] != thr {
        instant.push((
            format!("sum_over_time(({util} < bool {thr}){w})"),
            end,
            |a, v| a.below_idle = Some(v),
        ));
    }
    instant
}

/// Utilization over the window: mean, max, p50, p95, band counts, held-idle samples, first
/// and last sample.
fn utilization_queries(q: &Query, x: &Exprs) -> Vec<(String, EpochMs, Set)> {
    let (util, w) = (x.util.as_str(), x.w.as_str());
    let end = q.end_ms;
    let span = (q.end_ms - q.start_ms).max(1000);
    vec![
        (format!("avg_over_time({util}{w})"), end, |a, v| {
            a.mean = Some(v)
        }),
        // The largest sample is the largest point however the points are weighted: asked of
        // each metric's raw samples (a native range, no subquery), `or` as in U.
        (
            format!(
                "(max_over_time({}[{span}ms]) * 100 or max_over_time({}[{span}ms]))",
                q.metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE"),
                q.metric("DCGM_FI_DEV_GPU_UTIL")
            ),
            end,
            |a, v| a.max = Some(v),
        ),
        (
            format!("quantile_over_time(0.5, {util}{w})"),
            end,
            |a, v| a.p50 = Some(v),
        ),
        (
            format!("quantile_over_time(0.95, {util}{w})"),
            end,
            |a, v| a.p95 = Some(v),
        ),
        (
            format!(
                "sum_over_time(({util} < bool {}){w})",
                UTIL_BAND_EDGES_PCT[0]
            ),
            end,
            |a, v| a.below[0] = v,
        ),
        (
            format!(
                "sum_over_time(({util} < bool {}){w})",
                UTIL_BAND_EDGES_PCT[1]
            ),
            end,
            |a, v| a.below[1] = v,
        ),
        (
            format!(
                "sum_over_time(({util} < bool {}){w})",
                UTIL_BAND_EDGES_PCT[2]
            ),
            end,
            |a, v| a.below[2] = v,
        ),
        (
            format!(
                "sum_over_time(({util} < bool {}){w})",
                UTIL_BAND_EDGES_PCT[3]
            ),
            end,
            |a, v| a.below[3] = v,
        ),
        (
            format!("min_over_time(timestamp({util}){w})"),
            end,
            |a, v| a.first = Some(v),
        ),
        (
            format!("max_over_time(timestamp({util}){w})"),
            end,
            |a, v| a.last = Some(v),
        ),
    ]
}

/// Memory, power and profiling activity over the window (each left empty where the store has
/// no such metric).
fn device_queries(q: &Query, x: &Exprs) -> Vec<(String, EpochMs, Set)> {
    let w = x.w.as_str();
    let w_ms = (q.end_ms - q.start_ms).max(1000);
    let end = q.end_ms;
    let fb = q.metric("DCGM_FI_DEV_FB_USED");
    vec![
        (format!("max_over_time({fb}[{w_ms}ms])"), end, |a, v| {
            a.mem_peak = Some(v)
        }),
        (format!("avg_over_time({fb}[{w_ms}ms])"), end, |a, v| {
            a.mem_mean = Some(v)
        }),
        (
            format!("quantile_over_time(0.95, {fb}[{w_ms}ms])"),
            end,
            |a, v| a.mem_p95 = Some(v),
        ),
        (
            format!(
                "max_over_time(({fb} + {}){w})",
                q.metric("DCGM_FI_DEV_FB_FREE")
            ),
            end,
            |a, v| a.mem_total = Some(v),
        ),
        (
            format!(
                "avg_over_time({}[{w_ms}ms])",
                q.metric("DCGM_FI_DEV_POWER_USAGE")
            ),
            end,
            |a, v| a.power_mean = Some(v),
        ),
        (
            format!(
                "max_over_time({}[{w_ms}ms])",
                q.metric("DCGM_FI_DEV_POWER_USAGE")
            ),
            end,
            |a, v| a.power_peak = Some(v),
        ),
        (
            format!(
                "max_over_time({}[{w_ms}ms])",
                q.metric("DCGM_FI_DEV_POWER_MGMT_LIMIT")
            ),
            end,
            |a, v| a.power_limit = Some(v),
        ),
        (
            format!(
                "avg_over_time({}[{w_ms}ms]) * 100",
                q.metric("DCGM_FI_PROF_SM_ACTIVE")
            ),
            end,
            |a, v| a.sm = Some(v),
        ),
        (
            format!(
                "avg_over_time({}[{w_ms}ms]) * 100",
                q.metric("DCGM_FI_PROF_SM_OCCUPANCY")
            ),
            end,
            |a, v| a.occ = Some(v),
        ),
        (
            format!(
                "avg_over_time({}[{w_ms}ms]) * 100",
                q.metric("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE")
            ),
            end,
            |a, v| a.tensor = Some(v),
        ),
        (
            format!(
                "avg_over_time({}[{w_ms}ms]) * 100",
                q.metric("DCGM_FI_PROF_DRAM_ACTIVE")
            ),
            end,
            |a, v| a.dram = Some(v),
        ),
        (
            format!(
                "count_over_time({}[{w_ms}ms])",
                q.metric("DCGM_FI_PROF_GR_ENGINE_ACTIVE")
            ),
            end,
            |a, _| a.gr = true,
        ),
    ]
}

/// The queries' answers, per device, and what was asked.
struct Collect<'c> {
    client: &'c Client,
    queries: QueryLog,
    warnings: Vec<String>,
    devs: BTreeMap<DeviceKey, Acc>,
}

impl Collect<'_> {
    /// Run an instant query at `at` and hand each device's value to `set`. Returns the series.
    fn instant(
        &mut self,
        promql: String,
        at: EpochMs,
        set: impl Fn(&mut Acc, f64),
    ) -> Result<usize, PromError> {
        let r = self.client.query(&promql, at)?;
        for wmsg in &r.warnings {
            self.warnings
                .push(format!("partial result for `{promql}`: {wmsg}"));
        }
        let n = r.series.len();
        self.queries.push((promql, n, n));
        for series in &r.series {
            let Some((key, info)) = device_of(&series.labels) else {
                continue;
            };
            let Some(v) = last_value(series) else {
                continue;
            };
            let acc = self.devs.entry(key).or_default();
            if acc.info.is_none() {
                acc.info = Some(info);
            }
            set(acc, v);
        }
        Ok(n)
    }

    /// Hourly: counts and means of the hour's points (H to H + 1h − S), idle counts L − S
    /// later. Each is asked at whole hours (some stores, VictoriaMetrics among them, move a
    /// range query's start to a multiple of its step) with the subquery offset back to when it
    /// is due.
    fn hourly(&mut self, q: &Query, x: &Exprs, s: i64) -> Result<(), PromError> {
        let (util, e_held, l) = (&x.util, &x.e_held, x.l);
        let hour = gpuwise_core::HOUR_MS;
        let first_hour = q.start_ms.div_euclid(hour) * hour;
        let last_hour = q.end_ms.div_euclid(hour) * hour;
        let hw = format!("[{}ms:{s}ms]", hour - s / 2);
        let ranges: [(&str, &str, i64, usize); 3] = [
            ("count_over_time", util, hour - s, 0),
            ("avg_over_time", util, hour - s, 1),
            ("sum_over_time", e_held, hour - s + l, 2),
        ];
        for (func, inner, due, slot) in ranges {
            // Asked at H + `at` (a whole number of hours), looking back `at − due`.
            let at = (due + hour - 1).div_euclid(hour) * hour;
            let back = at - due;
            let promql = if back > 0 {
                format!("{func}({inner}{hw} offset {back}ms)")
            } else {
                format!("{func}({inner}{hw})")
            };
            let shift = at;
            let r =
                self.client
                    .query_range(&promql, first_hour + shift, last_hour + shift, hour)?;
            for wmsg in &r.warnings {
                self.warnings
                    .push(format!("partial result for `{promql}`: {wmsg}"));
            }
            let points: usize = r.series.iter().map(|x| x.samples.len()).sum();
            self.queries.push((promql, r.series.len(), points));
            for series in &r.series {
                let Some((key, _)) = device_of(&series.labels) else {
                    continue;
                };
                let Some(acc) = self.devs.get_mut(&key) else {
                    continue;
                };
                for (t, v) in &series.samples {
                    if !v.is_finite() {
                        continue;
                    }
                    let e = acc.hours.entry(t - shift).or_default();
                    match slot {
                        0 => e.0 = *v,
                        1 => e.1 = *v,
                        _ => {
                            // Whole counts: E × (1 + held × HELD_SCALE) summed over the hour.
                            let held = (v / HELD_SCALE).floor();
                            e.2 = v - held * HELD_SCALE;
                            e.3 = held;
                        }
                    }
                }
            }
        }
        Ok(())
    }
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
    for (start, (n, mean, idle, held)) in &a.hours {
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

/// Hours in the bands (UTIL_BAND_EDGES_PCT) from the store's counts, also placed at each
/// band's first percent for the charts' histogram.
fn bands(a: &Acc, sh: f64) -> (Vec<f64>, [f64; 5]) {
    let mut by_pct = vec![0.0; 101];
    let mut band_hours = [0.0; 5];
    let cum = [a.below[0], a.below[1], a.below[2], a.below[3], a.n];
    let mut prev = 0.0;
    let firsts = std::iter::once(0.0).chain(UTIL_BAND_EDGES_PCT);
    for (i, first) in firsts.enumerate() {
        band_hours[i] = (cum[i] - prev).max(0.0) * sh;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        {
            by_pct[first as usize] = band_hours[i];
        }
        prev = cum[i];
    }
    (by_pct, band_hours)
}

/// The hourly timeline and the idle episodes at hourly resolution (a run of hours with idle
/// time; the held share of idle time spread over them).
fn hours_and_episodes(a: &Acc, s: i64, sh: f64) -> (Vec<HourPoint>, Vec<Episode>) {
    let mut hourly = Vec::new();
    let mut episodes: Vec<Episode> = Vec::new();
    let held_share = if a.idle > 0.0 { a.held / a.idle } else { 0.0 };
    for (&start, &(n, mean, idle, _)) in &a.hours {
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
    let (by_pct, band_hours) = bands(&a, sh);
    let (hourly, episodes) = hours_and_episodes(&a, s, sh);
    let util = a.mean.map(|mean| UtilStats {
        mean_pct: mean,
        p50_pct: a.p50.unwrap_or(mean),
        p95_pct: a.p95.unwrap_or(mean),
        max_pct: a.max.unwrap_or(mean),
        observed_hours: observed,
    });
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
            util_by_percent_hours: by_pct,
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

/// `--raw`: every sample of [`RAW_METRICS`] by `query_range` at the scrape interval (cut at
/// 11,000 points), written as DCGM exposition lines (series by series, milliseconds) for the
/// DCGM reader, so label and unit rules exist once.
pub fn raw_exposition(
    client: &Client,
    q: &Query,
    step_ms: i64,
) -> Result<(String, QueryLog), PromError> {
    let mut out = String::new();
    let mut queries = Vec::new();
    for m in RAW_METRICS {
        let promql = q.metric(m);
        let r = client.query_range(&promql, q.start_ms, q.end_ms, step_ms)?;
        let points: usize = r.series.iter().map(|x| x.samples.len()).sum();
        queries.push((promql, r.series.len(), points));
        for series in &r.series {
            let head = format!("{m}{{{}}}", label_matchers(&series.labels));
            for (t, v) in &series.samples {
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

/// `--raw` read through the DCGM reader.
pub fn raw(client: &Client, q: &Query, step_ms: i64) -> Result<Raw, PromError> {
    let (text, queries) = raw_exposition(client, q, step_ms)?;
    let mut b = gpuwise_core::profile::ProfileBuilder::new(q.profile.clone());
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
        a.hours.insert(0, (1_000.0, 50.0, 0.0, 0.0));
        assert!(plausible(&mut a, window, 30_000).is_err());
    }
}
