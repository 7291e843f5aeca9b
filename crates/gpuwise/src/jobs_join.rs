//! The jobs' join, below the commands that show it (`gpuwise jobs`, `serve`'s /api/jobs):
//! the records (Slurm accounting files or `sacct`, kube-state-metrics, MLflow and run exports),
//! the telemetry read with the join as a tap (files, or the store's raw samples), and the
//! report with the window's prices.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use gpuwise_core::profile::SharedTap;
use gpuwise_core::report::Report;
use gpuwise_jobs::report::Context;
use gpuwise_jobs::{JobRecord, JobSettings, JobsReport, Join, JoinSettings, sacct};

use crate::cli::{FleetArgs, JobSources};
use crate::fleet;

/// The `sacct` fields `--slurm` asks for (and `docs/jobs.md` tells users to ask for).
const SACCT_FORMAT: &str = "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,State,ExitCode,AllocTRES,NodeList";

/// What to join.
pub(crate) struct Request<'a> {
    /// Where the jobs come from.
    pub sources: &'a JobSources,
    /// Where the telemetry comes from.
    pub fleet: &'a FleetArgs,
    /// The flags' thresholds.
    pub settings: JobSettings,
    /// Show a progress bar while files are read.
    pub progress: bool,
}

impl JobSources {
    /// Whether any source of jobs is given.
    pub(crate) fn any(&self) -> bool {
        !self.sacct.is_empty()
            || self.slurm
            || self.kube
            || self.mlflow.is_some()
            || !self.runs_csv.is_empty()
    }
}

/// The jobs report of the window `s.read.range` (or the store's window), with `s` resolved.
pub(crate) fn run(req: &Request<'_>, mut s: fleet::Settings) -> anyhow::Result<JobsReport> {
    fleet::require_source(req.fleet)?;
    anyhow::ensure!(
        req.fleet.store.is_none(),
        "jobs ties samples to jobs: the history store (--store) keeps hourly accumulators, not samples; give the telemetry files or --prometheus"
    );
    let prom = &req.fleet.prom;
    let start = req.fleet.read.start.as_deref();
    // The join's window: the store's (--start/--end/--last), else --since/--until.
    let window = match prom.prometheus {
        Some(_) => Some(fleet::prom_window(prom, start, &s.read)?),
        None => s.read.range,
    };
    let mut warnings = Vec::new();
    let mut records = all_records(req, &s.read, s.now_ms, &mut warnings)?;
    let open_end = window.map_or(s.now_ms, |(_, to)| to.min(s.now_ms));
    let join = Join::new(
        &records,
        open_end,
        JoinSettings {
            max_gap_ms: s.read.profile.max_gap_ms,
            idle_below_pct: s.read.profile.idle_threshold_pct,
        },
    );
    let bindings = join.schedule().bindings.clone();
    let tap = Arc::new(Mutex::new(join));
    s.read.tap = Some(SharedTap(tap.clone()));
    let analysis = gpuwise_analysis::Analysis::new(s.analysis);
    let report = if prom.prometheus.is_some() {
        let (mut profiles, summary) = fleet::prom_pull(prom, start, &s.read)?;
        analysis.with_workloads(&mut profiles);
        analysis.report(&profiles, summary, s.now_ms)
    } else {
        let progress = req.progress;
        fleet::from_files(
            &req.fleet.inputs,
            &s.read,
            &analysis,
            s.now_ms,
            progress,
            fleet::Keep::Nothing,
        )?
        .0
    };
    s.read.tap = None;
    let join = Arc::try_unwrap(tap)
        .map_err(|_| anyhow!("the telemetry readers still hold the join"))?
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let joined = join.finish();
    for tag in &joined.labelled_only {
        records.push(JobRecord::new(
            tag.as_str(),
            gpuwise_jobs::Source::Telemetry,
        ));
    }
    let types: std::collections::BTreeSet<String> =
        records.iter().filter_map(|r| r.gpu_type.clone()).collect();
    let ctx = context(&report, &joined, &analysis, &types, window, open_end);
    Ok(gpuwise_jobs::report::build(
        &records,
        &bindings,
        &joined,
        &ctx,
        &req.settings,
        warnings,
    ))
}

/// Every job record: the scheduler's (files, `sacct`), the pods (`--kube`), then MLflow's and
/// the exports' runs linked to them (or jobs of their own).
fn all_records(
    req: &Request<'_>,
    read: &gpuwise_sources::ReadOptions,
    now_ms: i64,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<JobRecord>> {
    let args = req.sources;
    let mut records = read_records(args, read, now_ms, warnings)?;
    if args.kube {
        let points = fleet::kube_points(
            &req.fleet.prom,
            req.fleet.read.start.as_deref(),
            read,
            &args.requests_metric,
        )?;
        records.extend(gpuwise_jobs::kube::pods(&points));
    }
    let runs = read_runs(args)?;
    if !runs.is_empty() {
        let linked = gpuwise_jobs::mlflow::link(
            &mut records,
            runs,
            args.quality_metric.as_deref(),
            Some(&args.requests_metric),
        );
        if linked.unlinked > 0 {
            warnings.push(format!(
                "{} run(s) name no job (tag slurm_job_id or pod) and no place (host, gpus): not counted",
                linked.unlinked
            ));
        }
        if !linked.unknown_job.is_empty() {
            warnings.push(format!(
                "{} run(s) name a job no record has: {}",
                linked.unknown_job.len(),
                linked.unknown_job.join(", ")
            ));
        }
    }
    Ok(records)
}

/// The scheduler's records: each `--sacct` file (or stdin), or `sacct` run for the window.
fn read_records(
    args: &JobSources,
    read: &gpuwise_sources::ReadOptions,
    now_ms: i64,
    warnings: &mut Vec<String>,
) -> anyhow::Result<Vec<JobRecord>> {
    anyhow::ensure!(
        args.any(),
        "no jobs: give --sacct FILE, --slurm, --kube, --mlflow URL or --runs-csv FILE"
    );
    let mut texts = Vec::new();
    for path in &args.sacct {
        let name = path.display().to_string();
        let mut text = String::new();
        if name == "-" {
            std::io::stdin()
                .read_to_string(&mut text)
                .context("cannot read sacct output from stdin")?;
        } else {
            text = fs_err::read_to_string(path)?;
        }
        texts.push((name, text));
    }
    if args.slurm {
        texts.push(("sacct".to_owned(), run_sacct(read, now_ms)?));
    }
    let mut records: Vec<JobRecord> = Vec::new();
    for (name, text) in texts {
        let r = sacct::read(&text, &read.tz).map_err(|e| anyhow!("{name}: {e}"))?;
        for skip in &r.skipped {
            warnings.push(format!(
                "{name}: line {}{}: {} (skipped)",
                skip.line,
                skip.field
                    .as_deref()
                    .map_or(String::new(), |f| format!(", field {f}")),
                skip.message
            ));
        }
        if !r.requeued.is_empty() {
            warnings.push(format!(
                "{name}: job(s) {} ran more than once (requeued): each run is shown as ID@START, counting the runs before it",
                r.requeued.join(", ")
            ));
        }
        if !r.reused_ids.is_empty() {
            warnings.push(format!(
                "{name}: job id(s) {} name two jobs (reused after a controller restart): the later is shown as ID@SUBMIT",
                r.reused_ids.join(", ")
            ));
        }
        if read.strict
            && let Some(first) = r.skipped.first()
        {
            anyhow::bail!("{name}: line {}: {} (--strict)", first.line, first.message);
        }
        records.extend(r.jobs);
    }
    Ok(records)
}

/// `sacct --parsable2 --allocations --allusers` for the window (the last day when none).
fn run_sacct(read: &gpuwise_sources::ReadOptions, now_ms: i64) -> anyhow::Result<String> {
    let (from, to) = read
        .range
        .map_or((now_ms - gpuwise_core::DAY_MS, now_ms), |(a, b)| {
            (
                if a == i64::MIN {
                    now_ms - gpuwise_core::DAY_MS
                } else {
                    a
                },
                b.min(now_ms),
            )
        });
    let local = |ms: i64| -> anyhow::Result<String> {
        let t = jiff::Timestamp::from_millisecond(ms)?;
        Ok(read
            .tz
            .to_datetime(t)
            .strftime("%Y-%m-%dT%H:%M:%S")
            .to_string())
    };
    let out = std::process::Command::new("sacct")
        .args([
            "--parsable2",
            "--allocations",
            "--allusers",
            "--starttime",
            &local(from)?,
            "--endtime",
            &local(to)?,
            &format!("--format={SACCT_FORMAT}"),
        ])
        .output()
        .context("--slurm: cannot run `sacct` (is Slurm's client on PATH?)")?;
    anyhow::ensure!(
        out.status.success(),
        "--slurm: sacct failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8(out.stdout).context("--slurm: sacct printed text that is not UTF-8")
}

/// MLflow's runs (every experiment, paged) and runs from CSV exports.
fn read_runs(args: &JobSources) -> anyhow::Result<Vec<gpuwise_jobs::mlflow::Run>> {
    let mut runs = Vec::new();
    for path in &args.runs_csv {
        let text = fs_err::read_to_string(path)?;
        runs.extend(
            gpuwise_jobs::mlflow::runs_csv(&text)
                .map_err(|e| anyhow!("{}: {e}", path.display()))?,
        );
    }
    if let Some(url) = &args.mlflow {
        runs.extend(mlflow_runs(url).map_err(|e| anyhow!("--mlflow {}: {e}", redact(url)))?);
    }
    Ok(runs)
}

/// A URL without its credentials (what messages show).
fn redact(url: &str) -> String {
    gpuwise_prom::client::split_credentials(url).0
}

fn mlflow_runs(url: &str) -> anyhow::Result<Vec<gpuwise_jobs::mlflow::Run>> {
    let (base, creds) = gpuwise_prom::client::split_credentials(url);
    let base = base.trim_end_matches('/').to_owned();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(30)))
        .http_status_as_error(false)
        .build()
        .into();
    let post = |path: &str, body: serde_json::Value| -> anyhow::Result<String> {
        let mut req = agent
            .post(format!("{base}/api/2.0/mlflow/{path}"))
            .header("Content-Type", "application/json");
        if let Some((user, pass)) = &creds {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            req = req.header("Authorization", format!("Basic {token}"));
        }
        let mut resp = req.send(body.to_string().as_bytes()).map_err(|e| {
            anyhow!(
                "cannot reach MLflow: {}",
                e.to_string().replace(url, &redact(url))
            )
        })?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 << 20)
            .read_to_string()
            .context("reading MLflow's answer")?;
        anyhow::ensure!(
            status.is_success(),
            "{path}: HTTP {}: {}",
            status.as_u16(),
            text.chars().take(200).collect::<String>()
        );
        Ok(text)
    };
    let mut names = BTreeMap::new();
    let mut token: Option<String> = None;
    loop {
        let mut body = serde_json::json!({"max_results": 1000});
        if let Some(t) = &token {
            body["page_token"] = t.clone().into();
        }
        let (page, next) =
            gpuwise_jobs::mlflow::experiments_page(&post("experiments/search", body)?)?;
        names.extend(page);
        token = next;
        if token.is_none() {
            break;
        }
    }
    let ids: Vec<String> = names.keys().cloned().collect();
    let mut runs = Vec::new();
    for chunk in ids.chunks(100) {
        let mut token: Option<String> = None;
        loop {
            let mut body = serde_json::json!({"experiment_ids": chunk, "max_results": 1000});
            if let Some(t) = &token {
                body["page_token"] = t.clone().into();
            }
            let (page, next) =
                gpuwise_jobs::mlflow::runs_page(&post("runs/search", body)?, &names)?;
            runs.extend(page);
            token = next;
            if token.is_none() {
                break;
            }
        }
    }
    Ok(runs)
}

/// The window, the prices of the joined devices (the report's), and by GPU type.
fn context(
    report: &Report,
    joined: &gpuwise_jobs::Joined,
    analysis: &gpuwise_analysis::Analysis,
    types: &std::collections::BTreeSet<String>,
    range: Option<(i64, i64)>,
    open_end: i64,
) -> Context {
    let parse = |s: &Option<String>| {
        s.as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(jiff::Timestamp::as_millisecond)
    };
    let from = range
        .map(|(a, _)| a)
        .filter(|a| *a != i64::MIN)
        .or_else(|| parse(&report.window.start))
        .unwrap_or(open_end);
    let to = range
        .map(|(_, b)| b)
        .filter(|b| *b != i64::MAX)
        .or_else(|| parse(&report.window.end))
        .unwrap_or(open_end);
    // The report's rows by device: a UUID names a GPU under any host.
    let mut price: BTreeMap<(String, String), (Option<f64>, Option<String>)> = BTreeMap::new();
    let mut observed = 0.0;
    for d in &report.devices {
        let host = if gpuwise_core::profile::is_gpu_uuid(&d.gpu) {
            String::new()
        } else {
            d.host.clone()
        };
        if d.mig_instance.is_none() {
            price.insert((host, d.gpu.clone()), (d.usd_per_gpu_hour, d.team.clone()));
        }
        observed += match d.gpu_share {
            Some(s) if s > 0.0 => d.gpu_hours / s,
            _ => d.gpu_hours,
        };
    }
    let of = |d: &gpuwise_jobs::join::Device| {
        let host = if gpuwise_core::profile::is_gpu_uuid(&d.gpu) {
            String::new()
        } else {
            d.host.clone()
        };
        price.get(&(host, d.gpu.clone())).cloned()
    };
    let device_price = joined
        .devices
        .iter()
        .map(|d| of(d).and_then(|p| p.0))
        .collect();
    let device_team = joined
        .devices
        .iter()
        .map(|d| of(d).and_then(|p| p.1))
        .collect();
    let book = &analysis.settings().prices;
    let mut type_price = BTreeMap::new();
    for kind in types {
        if let Some((spec, _)) = book.catalog().resolve_loose(kind)
            && let Some(q) = book.quote(
                &gpuwise_core::DeviceKey::new("", ""),
                &gpuwise_core::DeviceInfo::default(),
                Some(spec),
            )
        {
            type_price.insert(kind.to_ascii_lowercase(), q.usd_per_gpu_hour);
        }
    }
    Context {
        from_ms: from,
        to_ms: to,
        device_price,
        device_team,
        type_price,
        fleet_gpu_hours: Some(observed),
    }
}
