//! `--prometheus URL`: the report's devices from a Prometheus-compatible store, by pushdown or
//! (`--raw`) by pulling samples.

use std::time::Duration;

use anyhow::{Context as _, anyhow};
use gpuwise_analysis::Analysis;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::{IngestSummary, OverlapSummary, Pulled, Report, Warning};
use gpuwise_prom::client::{self as promclient, Client, ClientOptions};
use gpuwise_prom::pushdown::{self, Query};
use gpuwise_sources::ReadOptions;

use crate::cli::PromArgs;
use crate::clock::now_ms;
use crate::{duration, printer};

fn instant(flag: &str, s: &str) -> anyhow::Result<i64> {
    if let Ok(t) = s.parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    let d: jiff::civil::Date = s
        .parse()
        .map_err(|_| anyhow!("--{flag} `{s}` is not an RFC 3339 time or a YYYY-MM-DD date"))?;
    Ok(jiff::tz::TimeZone::UTC
        .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))?
        .as_millisecond())
}

fn client(p: &PromArgs, url: &str) -> anyhow::Result<Client> {
    let bearer = match (&p.bearer_token_env, &p.bearer_token_file) {
        (Some(var), _) => Some(
            std::env::var(var)
                .map_err(|_| anyhow!("--bearer-token-env: ${var} is not set"))?
                .trim()
                .to_owned(),
        ),
        (None, Some(path)) => Some(fs_err::read_to_string(path)?.trim().to_owned()),
        (None, None) => None,
    };
    let basic = match &p.basic_auth_user {
        Some(u) => Some((
            u.clone(),
            std::env::var("GPUWISE_PROMETHEUS_PASSWORD").map_err(|_| {
                anyhow!("--basic-auth-user: set the password in $GPUWISE_PROMETHEUS_PASSWORD")
            })?,
        )),
        None => None,
    };
    let mut headers = Vec::new();
    for h in &p.headers {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| anyhow!("--header `{h}` is not NAME: VALUE"))?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let ca_pem = p.ca_file.as_ref().map(fs_err::read).transpose()?;
    let timeout = match &p.timeout {
        Some(t) => Duration::from_millis(
            duration::parse_positive_ms("timeout", t).map_err(|e| anyhow!(e))?,
        ),
        None => Duration::from_secs(60),
    };
    Ok(Client::new(ClientOptions {
        url: url.to_owned(),
        bearer_token: bearer,
        basic_auth: basic,
        headers,
        ca_pem,
        timeout,
        retries: p.retries.unwrap_or(2),
        backoff: Duration::from_millis(500),
        max_response_bytes: promclient::MAX_RESPONSE_BYTES,
    })?)
}

/// The window (`--start`/`--end`, or `--last` before the end, default 7 days before now),
/// the selector, the scrape interval if given, and the profile settings, as a query.
fn query(p: &PromArgs, start: Option<&str>, read: &ReadOptions) -> anyhow::Result<Query> {
    let end_ms = match &p.end {
        Some(e) => instant("end", e)?,
        None => now_ms()?,
    };
    let start_ms = match (start, &p.last) {
        (Some(st), _) => instant("start", st)?,
        (None, Some(l)) => {
            end_ms - i64::try_from(duration::parse_positive_ms("last", l).map_err(|e| anyhow!(e))?)?
        }
        (None, None) => end_ms - 7 * gpuwise_core::DAY_MS,
    };
    anyhow::ensure!(
        start_ms < end_ms,
        "the window is empty: its start is not before its end"
    );
    let matchers =
        Query::matchers_of(p.selector.as_deref().unwrap_or("")).map_err(|e| anyhow!(e))?;
    let step_ms = p
        .scrape_interval
        .as_deref()
        .map(|i| duration::parse_positive_ms("scrape-interval", i).map_err(|e| anyhow!(e)))
        .transpose()?
        .map(|ms| i64::try_from(ms).unwrap_or(i64::MAX));
    let q = Query {
        matchers,
        start_ms,
        end_ms,
        step_ms,
        profile: read.profile.clone(),
        tz: read.tz.clone(),
        sample_budget: p.sample_budget.unwrap_or(pushdown::DEFAULT_SAMPLE_BUDGET),
    };
    Ok(q)
}

/// Which path reads the window (`--path`, `--raw`, else the cheaper by the cost model), the
/// scrape interval if the choice found it, and why.
fn path(
    p: &PromArgs,
    c: &Client,
    q: &Query,
    step_ms: Option<i64>,
    url: &str,
) -> anyhow::Result<(bool, Option<i64>, String)> {
    let asked = if p.raw {
        "raw"
    } else {
        p.path.as_deref().unwrap_or("auto")
    };
    Ok(match asked {
        "raw" => (
            true,
            step_ms,
            "raw samples, as asked (--path raw)".to_owned(),
        ),
        "pushdown" => (
            false,
            step_ms,
            "pushdown, as asked (--path pushdown)".to_owned(),
        ),
        _ => {
            let c = pushdown::choose_path(c, q)
                .with_context(|| format!("sizing the window at {url}"))?;
            (c.raw, Some(c.step_ms), c.why)
        }
    })
}

/// The pushdown's notes as report warnings; each device it read raw is named with why.
fn pushed_warnings(pushed: &pushdown::Pushed) -> Vec<Warning> {
    let mut warnings: Vec<Warning> = pushed
        .warnings
        .iter()
        .map(|m| Warning {
            kind: if m.starts_with("partial result") {
                "partial_result".into()
            } else if m.starts_with("implausible") {
                "implausible_value".into()
            } else {
                "missing_metric".into()
            },
            message: m.clone(),
            count: 1,
        })
        .collect();
    warnings.extend(pushed.raw_devices.iter().map(|(key, why)| Warning {
        kind: "raw_device".into(),
        message: format!("`{key}` was read from its raw samples, not pushed down: {why}"),
        count: 1,
    }));
    warnings
}

/// The window `--start`/`--end`/`--last` name (the report's, and the jobs' join's).
pub(crate) fn window(
    p: &PromArgs,
    start: Option<&str>,
    read: &ReadOptions,
) -> anyhow::Result<(i64, i64)> {
    let q = query(p, start, read)?;
    Ok((q.start_ms, q.end_ms))
}

/// The raw samples of `[from, to)` from the store as accumulators (in tiles when
/// `read.tile_ms` is set): what the history store joins to its own hours, and what `rollup
/// --prometheus` folds. Raw, never the pushdown: only samples join exactly.
pub(crate) fn raw_window(
    p: &PromArgs,
    from: i64,
    to: i64,
    read: &ReadOptions,
) -> anyhow::Result<(gpuwise_core::profile::Profile, IngestSummary)> {
    let given = p
        .prometheus
        .as_deref()
        .ok_or_else(|| anyhow!("--prometheus URL is needed"))?;
    let c = client(p, given)?;
    let url = c.url().to_owned();
    let mut q = query(p, None, read)?;
    q.start_ms = from;
    q.end_ms = to;
    let step = match q.step_ms {
        Some(s) => s,
        None => pushdown::scrape_interval(&c, &q)
            .with_context(|| format!("finding the scrape interval at {url}"))?,
    };
    let raw = pushdown::raw(&c, &q, step, None, None, read.tile_ms)
        .with_context(|| format!("reading raw samples from {url}"))?;
    let summary = IngestSummary {
        inputs: vec![url],
        formats: vec!["prometheus (raw)".to_owned()],
        lines: 0,
        samples: raw.profile.samples(),
        skipped: raw.tally.skipped(),
        warnings: raw.tally.warnings(),
        pulled: None,
        overlap: OverlapSummary::default(),
    };
    Ok((raw.profile, summary))
}

/// kube-state-metrics' series in the store (`gpuwise jobs --kube`): each metric's last value
/// in the window, per series (the `--selector` is for GPU metrics and is not applied).
pub(crate) fn kube_points(
    p: &PromArgs,
    start: Option<&str>,
    read: &ReadOptions,
    requests_metric: &str,
) -> anyhow::Result<Vec<gpuwise_jobs::kube::Point>> {
    let given = p
        .prometheus
        .as_deref()
        .ok_or_else(|| anyhow!("--kube reads kube-state-metrics from --prometheus URL"))?;
    let c = client(p, given)?;
    let q = query(p, start, read)?;
    let seconds = ((q.end_ms - q.start_ms) / 1000).max(1);
    let mut out = Vec::new();
    anyhow::ensure!(
        !requests_metric.is_empty()
            && requests_metric
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':'),
        "--requests-metric `{requests_metric}` is not a metric name"
    );
    let requests = format!("sum by (namespace, pod) (increase({requests_metric}[{seconds}s]))");
    let queries = gpuwise_jobs::kube::METRICS
        .iter()
        .map(|m| ((*m).to_owned(), format!("last_over_time({m}[{seconds}s])")))
        .chain(std::iter::once((
            gpuwise_jobs::kube::REQUESTS.to_owned(),
            requests,
        )));
    for (metric, promql) in queries {
        let r = c
            .query(&promql, q.end_ms)
            .with_context(|| format!("reading {metric} from {}", c.url()))?;
        for series in r.series {
            if let Some((_, value)) = series.samples.last() {
                out.push(gpuwise_jobs::kube::Point {
                    metric: metric.clone(),
                    labels: series.labels,
                    value: *value,
                });
            }
        }
    }
    Ok(out)
}

/// Read the store and build the report.
pub(crate) fn build(
    p: &PromArgs,
    start: Option<&str>,
    read: &ReadOptions,
    analysis: &Analysis,
    now_ms: i64,
) -> anyhow::Result<(Report, Vec<DeviceProfile>)> {
    let (mut profiles, summary) = pull(p, start, read)?;
    analysis.with_workloads(&mut profiles);
    let rep = analysis.report(&profiles, summary, now_ms);
    Ok((rep, profiles))
}

/// The window's device profiles from the store, and what was read.
pub(crate) fn pull(
    p: &PromArgs,
    start: Option<&str>,
    read: &ReadOptions,
) -> anyhow::Result<(Vec<DeviceProfile>, IngestSummary)> {
    let given = p
        .prometheus
        .as_deref()
        .ok_or_else(|| anyhow!("--prometheus URL is needed"))?;
    // The client takes a user and password out of the URL; from here on the URL is named
    // without them (messages, the report's inputs), so a password never reaches output.
    let c = client(p, given)?;
    let url_owned = c.url().to_owned();
    let url = url_owned.as_str();
    let q = query(p, start, read)?;
    let step_ms = q.step_ms;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    // A tap (the jobs' join) needs the samples themselves: the raw path, whatever is cheaper.
    let (raw_path, step_ms, why) = if read.tap.is_some() {
        (
            true,
            step_ms,
            "raw samples: the jobs' join needs every sample".to_owned(),
        )
    } else {
        path(p, &c, &q, step_ms, url)?
    };
    let q = Query { step_ms, ..q };
    let (profiles, mode, mut warnings, raw_in_window, raw_devices) = if raw_path {
        // The scrape interval sizes the raw chunks: found like the pushdown's.
        let step = match step_ms {
            Some(s) => s,
            None => pushdown::scrape_interval(&c, &q)
                .with_context(|| format!("finding the scrape interval at {url}"))?,
        };
        let raw = pushdown::raw(&c, &q, step, None, read.tap.clone(), None)
            .with_context(|| format!("reading raw samples from {url}"))?;
        let warnings = raw.tally.warnings();
        (
            raw.profile.finish(&read.profile, &read.tz),
            "raw",
            warnings,
            None,
            0,
        )
    } else {
        let pushed = pushdown::pushdown(&c, &q).map_err(|e| {
            if e.unknown_function() {
                anyhow!(
                    "{e}\nthis store lacks a PromQL function the pushdown needs; read it with --path raw"
                )
            } else {
                anyhow!(e)
            }
        })?;
        // What a raw pull would move: every utilization sample once per metric family present.
        let families = pushed.metrics_present.max(1) as f64;
        let raw: f64 = pushed
            .profiles
            .iter()
            .map(|d| d.stats.samples as f64)
            .sum::<f64>()
            * families;
        let warnings = pushed_warnings(&pushed);
        let n = pushed.raw_devices.len() as u64;
        (pushed.profiles, "pushdown", warnings, Some(raw as u64), n)
    };
    anyhow::ensure!(
        !profiles.is_empty(),
        "no GPU series at {url} between the start and the end{}",
        p.selector
            .as_deref()
            .map_or(String::new(), |s| format!(" matching {s}"))
    );
    let pulled = Pulled {
        mode: mode.to_owned(),
        why: why.clone(),
        raw_devices,
        requests: load(&c.pulled.requests),
        series: load(&c.pulled.series),
        samples: load(&c.pulled.samples),
        bytes: load(&c.pulled.bytes),
        raw_samples_in_window: raw_in_window,
    };
    printer::info(&format!(
        "{url} ({mode}): {} requests, {} series, {} points, {} bytes pulled; {why}{}",
        pulled.requests,
        pulled.series,
        pulled.samples,
        pulled.bytes,
        if raw_devices > 0 {
            format!("; {raw_devices} device(s) off the scrape grid read raw")
        } else {
            String::new()
        }
    ));
    let samples: u64 = profiles.iter().map(|d| d.stats.samples).sum();
    let summary = IngestSummary {
        inputs: vec![url.to_owned()],
        formats: vec![format!("prometheus ({mode})")],
        lines: 0,
        samples,
        skipped: 0,
        warnings: std::mem::take(&mut warnings),
        pulled: Some(pulled),
        overlap: OverlapSummary::default(),
    };
    Ok((profiles, summary))
}
