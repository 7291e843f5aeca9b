//! Per job and per group: what each job held, what it cost, whether it used it — with the
//! evidence — and the unit costs of runs (`gpuwise.jobs/v1`, documented in `docs/jobs.md`).

use std::collections::BTreeMap;

use gpuwise_core::{EpochMs, HOUR_MS};
use serde::Serialize;

use crate::flags::Seen;
pub use crate::flags::{Flag, JobSettings};
use crate::join::{JobAcc, Joined};
use crate::record::{JobRecord, JobState, Source};
use crate::schedule::Binding;

/// The JSON schema's name and version.
pub const SCHEMA: &str = "gpuwise.jobs/v1";

/// The window the figures are for, and the prices.
#[derive(Clone, Debug)]
pub struct Context {
    /// Start of the window (GPU time before it is not counted).
    pub from_ms: EpochMs,
    /// End of the window; a running job holds until here.
    pub to_ms: EpochMs,
    /// $ per GPU-hour of each joined device ([`Joined::devices`]); `None` unpriced.
    pub device_price: Vec<Option<f64>>,
    /// The team owning each joined device (the report's, from `--teams`), where one does.
    pub device_team: Vec<Option<String>>,
    /// $ per GPU-hour by GPU type as an allocation names it (`a100`), for jobs not observed.
    pub type_price: BTreeMap<String, f64>,
    /// The fleet's GPU-hours as the report counts them, to check the join against.
    pub fleet_gpu_hours: Option<f64>,
}

/// One job's figures.
#[derive(Clone, Debug, Serialize)]
pub struct JobRow {
    pub id: String,
    /// The scheduler's own number where it differs (an array task's).
    pub raw_id: Option<String>,
    pub source: Source,
    pub name: Option<String>,
    pub user: Option<String>,
    pub account: Option<String>,
    /// The team owning its GPUs (`--teams`; the one holding most of its observed time).
    pub team: Option<String>,
    pub partition: Option<String>,
    pub qos: Option<String>,
    pub experiment: Option<String>,
    pub state: JobState,
    pub exit_code: Option<String>,
    /// GPUs held.
    pub gpus: u32,
    pub gpu_type: Option<String>,
    pub nodes: Vec<String>,
    /// How its GPUs were tied to devices.
    pub binding: Binding,
    pub submit: Option<String>,
    pub start: Option<String>,
    pub end: Option<String>,
    /// Submit to start.
    pub queue_wait_s: Option<f64>,
    /// Start to end (to the window's end while running).
    pub run_s: Option<f64>,
    pub time_limit_s: Option<f64>,
    /// GPUs × run time inside the window: what was held (and billed).
    pub gpu_hours: f64,
    /// Device time the telemetry saw while the job held it.
    pub observed_gpu_hours: f64,
    /// The price the cost uses: its devices' (weighted by time), else its GPU type's.
    pub price_usd_per_gpu_hour: Option<f64>,
    /// `gpu_hours` × the price; `None` unpriced.
    pub cost_usd: Option<f64>,
    /// The cost of its idle share.
    pub idle_cost_usd: Option<f64>,
    pub mean_utilization_pct: Option<f64>,
    /// To the whole percent.
    pub p95_utilization_pct: Option<f64>,
    /// Observed time below the idle threshold.
    pub idle_share_pct: Option<f64>,
    pub peak_memory_used_mib: Option<f64>,
    pub memory_total_mib: Option<f64>,
    pub mean_power_w: Option<f64>,
    /// GPUs observed.
    pub gpus_observed: usize,
    /// Of them, GPUs whose mean utilization reached the idle threshold.
    pub gpus_used: usize,
    pub restarts: u32,
    pub requests: Option<f64>,
    pub cost_per_1k_requests_usd: Option<f64>,
    /// A quality metric of the run and the cost per unit of it.
    pub quality: Option<Quality>,
    pub flags: Vec<Flag>,
}

/// A run's quality metric and what a unit of it cost.
#[derive(Clone, Debug, Serialize)]
pub struct Quality {
    pub metric: String,
    pub value: f64,
    pub cost_per_unit_usd: Option<f64>,
}

/// Unit costs of one user, account, partition or experiment.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Group {
    pub key: String,
    pub jobs: usize,
    /// Runs that ended as meant.
    pub succeeded: usize,
    /// Runs that ended otherwise (failed, cancelled, timed out, out of memory, node failure,
    /// preempted).
    pub unsuccessful: usize,
    pub preempted: usize,
    pub restarts: u32,
    /// Runs that followed a preemption, a requeue or a restart and then succeeded.
    pub recovered: usize,
    pub gpu_hours: f64,
    pub cost_usd: f64,
    /// Jobs with no price (their cost is not in `cost_usd`).
    pub unpriced: usize,
    pub idle_cost_usd: f64,
    /// Cost of all ended runs over their number.
    pub cost_per_run_usd: Option<f64>,
    /// Cost of all ended runs, the unsuccessful ones included, over the successful ones.
    pub cost_per_successful_run_usd: Option<f64>,
    pub mean_queue_wait_s: Option<f64>,
    pub mean_run_s: Option<f64>,
    /// Queue wait over queue wait plus run time, summed over its jobs.
    pub queue_share_pct: Option<f64>,
    pub requests: Option<f64>,
    pub cost_per_1k_requests_usd: Option<f64>,
}

/// The fleet's time, split: held by jobs (busy or idle), seen with no job, held unseen.
#[derive(Clone, Debug, Serialize)]
pub struct Fleet {
    /// Device time the telemetry saw in all.
    pub observed_gpu_hours: f64,
    /// Of it, held by a job.
    pub attributed_gpu_hours: f64,
    /// Of it, held by no job: unallocated.
    pub unattributed_gpu_hours: f64,
    /// Of the unallocated, below the idle threshold.
    pub unattributed_idle_gpu_hours: f64,
    /// Held by a job and below the idle threshold: allocated but unused.
    pub allocated_idle_gpu_hours: f64,
    /// Held by jobs (GPUs × run time in the window).
    pub held_gpu_hours: f64,
    /// Held by jobs but not seen by the telemetry (no exporter there, or GPUs not bound).
    pub held_unobserved_gpu_hours: f64,
    /// The report's GPU-hours for the same telemetry (the join must equal it).
    pub report_gpu_hours: Option<f64>,
    pub cost_usd: f64,
    pub idle_cost_usd: f64,
    pub unpriced_jobs: usize,
    /// Samples not after their device's previous one (a copy already read), left out.
    pub repeated_samples: u64,
}

/// The whole answer.
#[derive(Clone, Debug, Serialize)]
pub struct JobsReport {
    pub schema: &'static str,
    pub window: Window,
    pub settings: JobSettings,
    pub fleet: Fleet,
    pub jobs: Vec<JobRow>,
    /// Per user, account, team, partition and experiment.
    pub groups: BTreeMap<&'static str, Vec<Group>>,
    /// Hours the telemetry saw with no job: the same as `fleet.unattributed_gpu_hours`.
    pub unattributed_gpu_hours: f64,
    pub warnings: Vec<String>,
}

/// The window, as times.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    pub from: Option<String>,
    pub to: Option<String>,
}

fn iso(ms: EpochMs) -> Option<String> {
    jiff::Timestamp::from_millisecond(ms)
        .ok()
        .map(|t| t.to_string())
}

#[allow(clippy::cast_precision_loss)]
fn h(ms: u64) -> f64 {
    ms as f64 / HOUR_MS as f64
}

/// The report of `records` (the labelled-only jobs appended by the caller, in `joined`'s
/// order) joined with the telemetry.
#[must_use]
pub fn build(
    records: &[JobRecord],
    bindings: &[Binding],
    joined: &Joined,
    ctx: &Context,
    settings: &JobSettings,
    warnings: Vec<String>,
) -> JobsReport {
    let jobs: Vec<JobRow> = records
        .iter()
        .zip(&joined.jobs)
        .enumerate()
        .map(|(i, (r, acc))| {
            let binding = bindings.get(i).copied().unwrap_or(Binding::Unbound);
            row(r, acc, binding, ctx, settings)
        })
        .collect();
    let fleet = fleet(&jobs, joined, ctx);
    let mut groups = BTreeMap::new();
    groups.insert("user", group_by(&jobs, |j| j.user.clone()));
    groups.insert("account", group_by(&jobs, |j| j.account.clone()));
    groups.insert("team", group_by(&jobs, |j| j.team.clone()));
    groups.insert("partition", group_by(&jobs, |j| j.partition.clone()));
    groups.insert("experiment", group_by(&jobs, |j| j.experiment.clone()));
    let mut warnings = warnings;
    if let Some(report) = fleet.report_gpu_hours
        && (report - fleet.observed_gpu_hours).abs() > 1e-6 * report.max(1.0)
    {
        warnings.push(format!(
            "the join saw {:.3} GPU-hours where the report counts {report:.3}: inputs of one device that overlap only in part (the report re-reads them by its overlap rule; the join keeps the first input's time)",
            fleet.observed_gpu_hours
        ));
    }
    JobsReport {
        schema: SCHEMA,
        window: Window {
            from: iso(ctx.from_ms),
            to: iso(ctx.to_ms),
        },
        settings: settings.clone(),
        unattributed_gpu_hours: fleet.unattributed_gpu_hours,
        fleet,
        jobs,
        groups,
        warnings,
    }
}

/// GPUs × the job's run time inside the window.
fn held_ms(r: &JobRecord, ctx: &Context) -> u64 {
    let Some(start) = r.start_ms else { return 0 };
    let end = r.end_ms.unwrap_or(ctx.to_ms);
    let (a, b) = (start.max(ctx.from_ms), end.min(ctx.to_ms));
    u64::try_from(b - a).unwrap_or(0) * u64::from(r.gpus)
}

/// The team of the job's GPUs that holds most of its observed time.
fn team(acc: &JobAcc, ctx: &Context) -> Option<String> {
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for g in &acc.gpus {
        if let Some(Some(t)) = ctx.device_team.get(g.device as usize) {
            *by.entry(t.as_str()).or_default() += g.observed_ms;
        }
    }
    by.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(t, _)| t.to_owned())
}

fn price(acc: &JobAcc, r: &JobRecord, ctx: &Context) -> Option<f64> {
    let (mut w, mut sum) = (0u64, 0.0);
    for g in &acc.gpus {
        if let Some(Some(p)) = ctx.device_price.get(g.device as usize) {
            w += g.observed_ms;
            #[allow(clippy::cast_precision_loss)]
            {
                sum += p * g.observed_ms as f64;
            }
        }
    }
    #[allow(clippy::cast_precision_loss)]
    if w > 0 {
        return Some(sum / w as f64);
    }
    let kind = r.gpu_type.as_deref()?.to_ascii_lowercase();
    ctx.type_price.get(&kind).copied()
}

#[allow(clippy::cast_precision_loss)]
fn row(r: &JobRecord, acc: &JobAcc, binding: Binding, ctx: &Context, st: &JobSettings) -> JobRow {
    let observed = h(acc.observed_ms);
    // A job only the telemetry knows held what it was seen on.
    let gpu_hours = if r.source == Source::Telemetry {
        observed
    } else {
        h(held_ms(r, ctx))
    };
    let unit = price(acc, r, ctx);
    // Nothing held costs nothing, priced or not (a pending job); else unknown stays unknown.
    let cost = if gpu_hours == 0.0 {
        Some(0.0)
    } else {
        unit.map(|p| p * gpu_hours)
    };
    let idle_share = (acc.util_ms > 0).then(|| acc.idle_ms as f64 / acc.util_ms as f64 * 100.0);
    let gpus_used = acc
        .gpus
        .iter()
        .filter(|g| g.util_ms > 0 && g.util_sum / g.util_ms as f64 >= f64::from(st.idle_below_pct))
        .count();
    let run_ms = r
        .start_ms
        .map(|s| r.end_ms.unwrap_or(ctx.to_ms) - s)
        .filter(|d| *d >= 0);
    let cost_per_1k = match (cost, r.requests) {
        (Some(c), Some(n)) if n > 0.0 => Some(c / n * 1000.0),
        _ => None,
    };
    let mut row = JobRow {
        id: r.id.clone(),
        raw_id: r.raw_id.clone(),
        source: r.source,
        name: r.name.clone(),
        user: r.user.clone(),
        account: r.account.clone(),
        team: team(acc, ctx),
        partition: r.partition.clone(),
        qos: r.qos.clone(),
        experiment: r.experiment.clone(),
        state: r.state,
        exit_code: r.exit_code.clone(),
        gpus: if r.source == Source::Telemetry {
            u32::try_from(acc.gpus.len()).unwrap_or(u32::MAX)
        } else {
            r.gpus
        },
        gpu_type: r.gpu_type.clone(),
        nodes: r.nodes.clone(),
        binding: if r.source == Source::Telemetry {
            Binding::Recorded
        } else {
            binding
        },
        submit: r.submit_ms.and_then(iso),
        start: r.start_ms.and_then(iso),
        end: r.end_ms.and_then(iso),
        queue_wait_s: r.queue_wait_ms().map(|ms| ms as f64 / 1000.0),
        run_s: run_ms.map(|ms| ms as f64 / 1000.0),
        time_limit_s: r.time_limit_ms.map(|ms| ms as f64 / 1000.0),
        gpu_hours,
        observed_gpu_hours: observed,
        price_usd_per_gpu_hour: unit,
        cost_usd: cost,
        idle_cost_usd: cost.zip(idle_share).map(|(c, s)| c * s / 100.0),
        mean_utilization_pct: acc.mean_util(),
        p95_utilization_pct: acc.quantile(0.95),
        idle_share_pct: idle_share,
        peak_memory_used_mib: acc.mem_peak_mib.map(f64::from),
        memory_total_mib: acc.mem_total_mib.map(f64::from),
        mean_power_w: (acc.power_ms > 0).then(|| acc.power_sum / acc.power_ms as f64),
        gpus_observed: acc.gpus.len(),
        gpus_used,
        restarts: r.restarts,
        requests: r.requests,
        cost_per_1k_requests_usd: cost_per_1k,
        quality: r.quality.as_ref().map(|(m, v)| Quality {
            metric: m.clone(),
            value: *v,
            cost_per_unit_usd: cost.filter(|_| *v > 0.0).map(|c| c / v),
        }),
        flags: Vec::new(),
    };
    let seen = Seen {
        gpus: row.gpus,
        gpus_observed: row.gpus_observed,
        gpus_used: row.gpus_used,
        gpu_hours: row.gpu_hours,
        run_s: row.run_s,
        mean_utilization_pct: row.mean_utilization_pct,
        idle_share_pct: row.idle_share_pct,
        peak_memory_used_mib: row.peak_memory_used_mib,
        memory_total_mib: row.memory_total_mib,
        to_ms: ctx.to_ms,
    };
    row.flags = crate::flags::of(&seen, r, acc, st);
    row
}

fn fleet(jobs: &[JobRow], joined: &Joined, ctx: &Context) -> Fleet {
    let attributed: u64 = joined.jobs.iter().map(|a| a.observed_ms).sum();
    let allocated_idle: u64 = joined.jobs.iter().map(|a| a.idle_ms).sum();
    let held: f64 = jobs.iter().map(|j| j.gpu_hours).sum();
    let unobserved: f64 = jobs
        .iter()
        .map(|j| (j.gpu_hours - j.observed_gpu_hours).max(0.0))
        .sum();
    Fleet {
        observed_gpu_hours: h(attributed + joined.unattributed.observed_ms),
        attributed_gpu_hours: h(attributed),
        unattributed_gpu_hours: h(joined.unattributed.observed_ms),
        unattributed_idle_gpu_hours: h(joined.unattributed.idle_ms),
        allocated_idle_gpu_hours: h(allocated_idle),
        held_gpu_hours: held,
        held_unobserved_gpu_hours: unobserved,
        report_gpu_hours: ctx.fleet_gpu_hours,
        cost_usd: jobs.iter().filter_map(|j| j.cost_usd).sum(),
        idle_cost_usd: jobs.iter().filter_map(|j| j.idle_cost_usd).sum(),
        unpriced_jobs: jobs
            .iter()
            .filter(|j| j.cost_usd.is_none() && j.gpu_hours > 0.0)
            .count(),
        repeated_samples: joined.repeated,
    }
}

#[allow(clippy::cast_precision_loss)]
fn group_by(jobs: &[JobRow], key: impl Fn(&JobRow) -> Option<String>) -> Vec<Group> {
    let mut by: BTreeMap<String, Vec<&JobRow>> = BTreeMap::new();
    for j in jobs {
        if let Some(k) = key(j) {
            by.entry(k).or_default().push(j);
        }
    }
    by.into_iter()
        .map(|(key, js)| {
            let ended: Vec<&&JobRow> = js.iter().filter(|j| j.state.ended()).collect();
            let ended_cost: f64 = ended.iter().filter_map(|j| j.cost_usd).sum();
            let succeeded = ended.iter().filter(|j| j.state.succeeded()).count();
            let waits: Vec<f64> = js.iter().filter_map(|j| j.queue_wait_s).collect();
            let runs: Vec<f64> = js.iter().filter_map(|j| j.run_s).collect();
            let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
            let (wait_sum, run_sum): (f64, f64) = js
                .iter()
                .filter_map(|j| Some((j.queue_wait_s?, j.run_s?)))
                .fold((0.0, 0.0), |(a, b), (w, r)| (a + w, b + r));
            let cost: f64 = js.iter().filter_map(|j| j.cost_usd).sum();
            let requests: Option<f64> = js.iter().filter_map(|j| j.requests).reduce(|a, b| a + b);
            Group {
                key,
                jobs: js.len(),
                succeeded,
                unsuccessful: ended.len() - succeeded,
                preempted: js.iter().filter(|j| j.state == JobState::Preempted).count(),
                restarts: js.iter().map(|j| j.restarts).sum(),
                recovered: js
                    .iter()
                    .filter(|j| j.restarts > 0 && j.state.succeeded())
                    .count(),
                gpu_hours: js.iter().map(|j| j.gpu_hours).sum(),
                cost_usd: cost,
                unpriced: js
                    .iter()
                    .filter(|j| j.cost_usd.is_none() && j.gpu_hours > 0.0)
                    .count(),
                idle_cost_usd: js.iter().filter_map(|j| j.idle_cost_usd).sum(),
                cost_per_run_usd: (!ended.is_empty()).then(|| ended_cost / ended.len() as f64),
                cost_per_successful_run_usd: (succeeded > 0).then(|| ended_cost / succeeded as f64),
                mean_queue_wait_s: mean(&waits),
                mean_run_s: mean(&runs),
                queue_share_pct: (wait_sum + run_sum > 0.0)
                    .then(|| wait_sum / (wait_sum + run_sum) * 100.0),
                requests,
                cost_per_1k_requests_usd: requests.filter(|n| *n > 0.0).map(|n| cost / n * 1000.0),
            }
        })
        .collect()
}
