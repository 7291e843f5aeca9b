//! `--prometheus URL`: the report's devices from a Prometheus-compatible store, by pushdown or
//! (`--raw`) by pulling samples.

use std::time::Duration;

use anyhow::{Context as _, anyhow};
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::{self, IngestSummary, OverlapSummary, Pulled, Report, Warning};
use gpuwise_prom::client::{self as promclient, Client, ClientOptions};
use gpuwise_prom::pushdown::{self, Query};

use super::Settings;
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
fn query(p: &PromArgs, start: Option<&str>, s: &Settings) -> anyhow::Result<Query> {
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
        profile: s.read.profile.clone(),
        tz: s.read.tz.clone(),
        sample_budget: p.sample_budget.unwrap_or(pushdown::DEFAULT_SAMPLE_BUDGET),
    };
    Ok(q)
}

/// Read the store and build the report.
pub(crate) fn build(
    p: &PromArgs,
    start: Option<&str>,
    s: &Settings,
) -> anyhow::Result<(Report, Vec<DeviceProfile>)> {
    let given = p
        .prometheus
        .as_deref()
        .ok_or_else(|| anyhow!("--prometheus URL is needed"))?;
    // The client takes a user and password out of the URL; from here on the URL is named
    // without them (messages, the report's inputs), so a password never reaches output.
    let c = client(p, given)?;
    let url_owned = c.url().to_owned();
    let url = url_owned.as_str();
    let q = query(p, start, s)?;
    let step_ms = q.step_ms;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let (profiles, mode, mut warnings, raw_in_window) = if p.raw {
        // The scrape interval decides the raw step: found like the pushdown's.
        let step = match step_ms {
            Some(s) => s,
            None => pushdown::scrape_interval(&c, &q)
                .with_context(|| format!("finding the scrape interval at {url}"))?,
        };
        let raw = pushdown::raw(&c, &q, step)
            .with_context(|| format!("reading raw samples from {url}"))?;
        let warnings = raw.tally.warnings();
        (
            raw.profile.finish(&s.read.profile, &s.read.tz),
            "raw",
            warnings,
            None,
        )
    } else {
        let pushed = pushdown::pushdown(&c, &q).map_err(|e| {
            if e.unknown_function() {
                anyhow!(
                    "{e}\nthis store lacks a PromQL function the pushdown needs; read it with --raw"
                )
            } else {
                anyhow!(e)
            }
        })?;
        // What --raw would pull: every utilization sample once per metric family present.
        let families = pushed.metrics_present.max(1) as f64;
        let raw: f64 = pushed
            .profiles
            .iter()
            .map(|d| d.stats.samples as f64)
            .sum::<f64>()
            * families;
        let warnings = pushed
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
        (pushed.profiles, "pushdown", warnings, Some(raw as u64))
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
        requests: load(&c.pulled.requests),
        series: load(&c.pulled.series),
        samples: load(&c.pulled.samples),
        bytes: load(&c.pulled.bytes),
        raw_samples_in_window: raw_in_window,
    };
    printer::info(&format!(
        "{url} ({mode}): {} requests, {} series, {} points, {} bytes pulled",
        pulled.requests, pulled.series, pulled.samples, pulled.bytes
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
    let mut profiles = profiles;
    super::with_workloads(&mut profiles, &s.hints);
    let rep = report::build(&profiles, &s.prices, &s.teams, &s.report, summary);
    Ok((rep, profiles))
}
