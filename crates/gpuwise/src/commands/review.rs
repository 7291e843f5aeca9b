//! `gpuwise review`: each period (the month or quarter asked for and the ones before it) read
//! from the store (and the inputs for hours it lacks) into a report; the actions journal
//! measured before and after; the month-end forecast against budgets when the period is the
//! current one → the review.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_analysis::review::{self, LoggedAction, PeriodInput, Targets, Windows};
use gpuwise_analysis::{Analysis, Report};
use gpuwise_core::HOUR_MS;
use gpuwise_ledger::check::Policy;
use gpuwise_render::{Format, RenderOptions};
use gpuwise_sources::ReadOptions;
use jiff::civil::Date;

use crate::cli::ReviewArgs;
use crate::config::{Config, output_format};
use crate::fleet::{Asks, store};
use crate::output::emit;
use crate::printer;

/// One period: its label and `[start, end)`.
struct Span {
    label: String,
    start_ms: i64,
    end_ms: i64,
}

fn utc_ms(d: Date) -> anyhow::Result<i64> {
    Ok(jiff::tz::TimeZone::UTC
        .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))?
        .as_millisecond())
}

/// The periods, oldest first: `history` before the one asked for, then it.
fn periods(args: &ReviewArgs) -> anyhow::Result<Vec<Span>> {
    let (first, months, label): (Date, i8, Box<dyn Fn(Date) -> String>) =
        match (&args.month, &args.quarter) {
            (Some(m), _) => {
                let d: Date = format!("{m}-01")
                    .parse()
                    .map_err(|_| anyhow!("--month: `{m}` is not YYYY-MM"))?;
                (d, 1, Box::new(|d: Date| d.strftime("%Y-%m").to_string()))
            }
            (None, Some(q)) => {
                let (y, n) = q
                    .split_once("-Q")
                    .and_then(|(y, n)| Some((y.parse::<i16>().ok()?, n.parse::<i8>().ok()?)))
                    .filter(|(_, n)| (1..=4).contains(n))
                    .ok_or_else(|| anyhow!("--quarter: `{q}` is not YYYY-Qn (n 1–4)"))?;
                let d = Date::new(y, (n - 1) * 3 + 1, 1)?;
                (
                    d,
                    3,
                    Box::new(|d: Date| format!("{}-Q{}", d.year(), (d.month() - 1) / 3 + 1)),
                )
            }
            (None, None) => anyhow::bail!("give --month YYYY-MM or --quarter YYYY-Qn"),
        };
    let step = jiff::Span::new().months(months);
    let mut out = Vec::new();
    for back in (0..=args.history).rev() {
        let start = first.checked_sub(step.checked_mul(i64::from(back))?)?;
        let end = start.checked_add(step)?;
        out.push(Span {
            label: label(start),
            start_ms: utc_ms(start)?,
            end_ms: utc_ms(end)?,
        });
    }
    Ok(out)
}

/// What every window of the review is read with.
struct Reader<'a> {
    dir: &'a Path,
    rest: &'a store::Rest<'a>,
    read: &'a ReadOptions,
    analysis: &'a Analysis,
}

impl Reader<'_> {
    /// The report over `[from, to)` (`None`: no data there), with its profiles' workload and
    /// interruptible hints.
    fn report(&self, from: i64, to: i64) -> anyhow::Result<Option<(Report, Hinted)>> {
        let (profile, summary) =
            store::window(self.dir, self.rest, self.read, Some((from, to)), &|_| {})?;
        if profile.is_empty() {
            return Ok(None);
        }
        let profiles = self.analysis.profiles(profile);
        let hints = &self.analysis.settings().hints;
        let mut h = Hinted::default();
        for p in &profiles {
            let id = p.key.to_string();
            if let Some(k) = p.info.workload {
                h.workloads
                    .insert(id.clone(), format!("{k:?}").to_lowercase());
            }
            if hints.find(p).and_then(|x| x.interruptible) == Some(true) {
                h.interruptible.insert(id);
            }
        }
        let end = profiles
            .iter()
            .map(|p| p.stats.last_ts_ms)
            .max()
            .unwrap_or(to);
        let report = self.analysis.report(&profiles, summary, end);
        h.profiles = profiles;
        Ok(Some((report, h)))
    }
}

#[derive(Default)]
struct Hinted {
    workloads: BTreeMap<String, String>,
    interruptible: BTreeSet<String>,
    /// The profiles (the allocation's forecast reads them).
    profiles: Vec<gpuwise_core::profile::DeviceProfile>,
}

pub(crate) fn run(args: &ReviewArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        format != Format::Csv,
        "--format: review prints table, json, markdown or html"
    );
    let policy = match args.policy.clone().or_else(|| cfg.policy.clone()) {
        Some(p) => Some(Policy::from_toml(
            &fs_err::read_to_string(&p)?,
            &p.display().to_string(),
        )?),
        None => None,
    };
    let asks = Asks {
        workloads: args.workloads.as_deref(),
        budget: policy.and_then(|p| p.budget),
        ..Asks::default()
    };
    let s = crate::fleet::resolve(&args.fleet.read, &args.fleet.analysis, &cfg, &asks)?;
    let analysis = Analysis::new(s.analysis);
    let dir = store::dir(args.fleet.store.as_deref())?;
    let rest = store::Rest::of(&args.fleet)?;
    let reader = Reader {
        dir: &dir,
        rest: &rest,
        read: &s.read,
        analysis: &analysis,
    };
    let spans = periods(args)?;
    let mut reports = Vec::new();
    for p in &spans {
        reports.push(reader.report(p.start_ms, p.end_ms.min(ceil_hour(s.now_ms)))?);
    }
    anyhow::ensure!(
        reports.iter().any(Option::is_some),
        "{}",
        store::empty(&dir, rest.any())
    );
    let last = spans.last().ok_or_else(|| anyhow!("no period"))?;
    let actions = outcomes(
        &reader,
        &crate::fleet::store::actions(&dir)?,
        last,
        s.now_ms,
    )?;
    let empty = Hinted::default();
    let inputs: Vec<PeriodInput<'_>> = spans
        .iter()
        .zip(&reports)
        .map(|(p, r)| {
            let h = r.as_ref().map_or(&empty, |x| &x.1);
            PeriodInput {
                label: p.label.clone(),
                start_ms: p.start_ms,
                end_ms: p.end_ms,
                report: r.as_ref().map(|x| &x.0),
                workloads: &h.workloads,
                interruptible: &h.interruptible,
            }
        })
        .collect();
    let mut r = review::build(&inputs, Targets::default(), actions);
    if args.jobs.any() {
        r.jobs = jobs(args, &s.read, &analysis, &spans, s.now_ms)?;
    }
    if (last.start_ms..last.end_ms).contains(&s.now_ms)
        && let Some(Some((rep, h))) = reports.last()
    {
        r.forecast = forecast(&analysis, rep, &h.profiles, s.now_ms);
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let text =
        gpuwise_analysis::view::review::render(&r, format, &RenderOptions { top: 10, color });
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

fn ceil_hour(ms: i64) -> i64 {
    ms.div_euclid(HOUR_MS) * HOUR_MS + HOUR_MS
}

/// Each action based on a window before the period's end, measured: before over the window its
/// advice was based on, after from the day it was done (or recommended, if unmarked) to the
/// period's end (or now).
fn outcomes(
    reader: &Reader<'_>,
    actions: &[LoggedAction],
    period: &Span,
    now_ms: i64,
) -> anyhow::Result<Vec<review::ActionOutcome>> {
    let mut out = Vec::new();
    let mut cache: BTreeMap<(i64, i64), Option<Report>> = BTreeMap::new();
    let end = period.end_ms.min(ceil_hour(now_ms));
    for a in actions.iter().filter(|a| a.based_on.1 < period.end_ms) {
        let before_span = (
            a.based_on.0.div_euclid(HOUR_MS) * HOUR_MS,
            ceil_hour(a.based_on.1 - 1),
        );
        // Unmarked: from its recommendation (or, logged after the period, from the end of
        // the window it was based on: a backfill), so the telemetry can show what happened.
        let from = a.done_ms.unwrap_or(if a.recommended_ms < end {
            a.recommended_ms
        } else {
            a.based_on.1
        });
        let after_span = (ceil_hour(from - 1), end);
        for span in [before_span, after_span] {
            if span.0 < span.1 && !cache.contains_key(&span) {
                let r = reader.report(span.0, span.1)?.map(|x| x.0);
                cache.insert(span, r);
            }
        }
        let Some(Some(before)) = cache.get(&before_span) else {
            printer::warn(&format!(
                "action {}: the store no longer holds the window its advice was based on; left out",
                a.id
            ));
            continue;
        };
        let after = cache.get(&after_span).and_then(Option::as_ref);
        let w = Windows {
            before,
            before_hours: review::data_hours(before),
            after,
            after_hours: after.map_or(0.0, review::data_hours),
        };
        out.push(review::measure(a.clone(), &w));
    }
    Ok(out)
}

/// `gpuwise jobs` over each period (its telemetry files, the job records given), as the
/// review's trends per team, account, partition and experiment.
fn jobs(
    args: &ReviewArgs,
    read: &ReadOptions,
    analysis: &Analysis,
    spans: &[Span],
    now_ms: i64,
) -> anyhow::Result<Vec<review::JobTrend>> {
    anyhow::ensure!(
        !args.fleet.inputs.is_empty(),
        "the review's job figures tie samples to jobs: give the periods' telemetry files too (the store keeps accumulators, not samples)"
    );
    let mut fleet = args.fleet.clone();
    fleet.store = None;
    let mut trends: BTreeMap<(String, String), Vec<Option<review::JobFigures>>> = BTreeMap::new();
    for (i, span) in spans.iter().enumerate() {
        let mut read = read.clone();
        read.range = Some((span.start_ms, span.end_ms.min(ceil_hour(now_ms))));
        let settings = crate::fleet::Settings {
            read,
            analysis: analysis.settings().clone(),
            now_ms,
        };
        let req = crate::jobs_join::Request {
            sources: &args.jobs,
            fleet: &fleet,
            settings: gpuwise_jobs::JobSettings {
                idle_below_pct: settings.read.profile.idle_threshold_pct,
                ..gpuwise_jobs::JobSettings::default()
            },
            progress: false,
        };
        let r = match crate::jobs_join::run(&req, settings) {
            Ok(r) => r,
            // A period without telemetry has no jobs to show.
            Err(e) if e.to_string().contains("no samples") => continue,
            Err(e) => return Err(e),
        };
        for by in ["team", "account", "partition", "experiment"] {
            for g in r.groups.get(by).into_iter().flatten() {
                let slots = trends
                    .entry((by.to_owned(), g.key.clone()))
                    .or_insert_with(|| vec![None; spans.len()]);
                slots[i] = Some(review::JobFigures {
                    runs: g.jobs,
                    succeeded: g.succeeded,
                    cost_usd: g.cost_usd,
                    cost_per_run_usd: g.cost_per_run_usd,
                    cost_per_successful_run_usd: g.cost_per_successful_run_usd,
                    cost_per_1k_requests_usd: g.cost_per_1k_requests_usd,
                    mean_queue_wait_s: g.mean_queue_wait_s,
                    mean_run_s: g.mean_run_s,
                    queue_share_pct: g.queue_share_pct,
                });
            }
        }
    }
    Ok(trends
        .into_iter()
        .map(|((dimension, key), periods)| review::JobTrend {
            dimension,
            key,
            periods,
        })
        .collect())
}

/// The month-end forecast of the period's report against the budgets, as the review shows it.
fn forecast(
    analysis: &Analysis,
    report: &Report,
    profiles: &[gpuwise_core::profile::DeviceProfile],
    now_ms: i64,
) -> Option<serde_json::Value> {
    let alloc = analysis.allocate(report, profiles, now_ms);
    let burns = analysis.budgets(&alloc);
    let fleet = alloc.forecast.as_ref()?;
    Some(serde_json::json!({
        "month": fleet.month,
        "note": format!("{:.0} of {:.0} hours elapsed; linear forecast of the month to date", fleet.elapsed_hours, fleet.month_hours),
        "fleet_to_date_usd": fleet.fleet.month_to_date_usd,
        "fleet_forecast_usd": fleet.fleet.forecast_linear_usd,
        "budgets": burns.iter().map(|b| serde_json::json!({
            "team": b.team,
            "budget_usd": b.limit_usd,
            "to_date_usd": b.month_to_date_usd,
            "forecast_usd": b.forecast_usd,
            "forecast_pct_of_budget": b.forecast_usd.map(|f| 100.0 * f / b.limit_usd),
        })).collect::<Vec<_>>(),
    }))
}
