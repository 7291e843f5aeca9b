//! MLflow runs (and run exports from MLflow's or W&B's CSV download): the experiment a job
//! belongs to, whether the run succeeded, and a metric of its quality.
//!
//! From the REST API (`/api/2.0/mlflow/experiments/search`, `/runs/search`, the binary posts
//! and pages) this reads each run's `info` (run id and name, experiment, user, status
//! `FINISHED`/`FAILED`/`KILLED`/`RUNNING`/`SCHEDULED`, start and end in ms) and `data`
//! (params, tags, the latest value of each metric). A run **names its job** with a tag or
//! param `slurm_job_id` (also `SLURM_JOB_ID`, `slurm.job_id`, `job_id`, `gpuwise.job`) or a pod
//! (`pod`, `k8s.pod`): then it annotates that job (its experiment, its run name when the job
//! has none, its quality). A run that names no job is a job of its own when it says where it
//! ran (`host` or `nodes`, and `gpus`); otherwise it is counted as unlinked.

use std::collections::BTreeMap;

use gpuwise_core::EpochMs;
use gpuwise_core::records::record_line;
use serde::Deserialize;

use crate::record::{JobRecord, JobState, Source, expand_nodes};

/// One page of an MLflow search: its items and the next page's token.
pub type Page<T> = (Vec<T>, Option<String>);

/// One run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Run {
    pub id: String,
    pub name: Option<String>,
    pub experiment: Option<String>,
    pub user: Option<String>,
    pub status: Option<String>,
    pub start_ms: Option<EpochMs>,
    pub end_ms: Option<EpochMs>,
    /// Tags and params together (a tag wins).
    pub tags: BTreeMap<String, String>,
    /// The latest value of each metric.
    pub metrics: BTreeMap<String, f64>,
}

/// Why an MLflow answer or export could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MlflowError {
    /// The answer is not the JSON the API documents.
    #[error("MLflow answered with JSON this reader does not know: {0}")]
    Json(#[from] serde_json::Error),
    /// A CSV export without a run id column.
    #[error("line 1: no run id column (`Run ID`, `run_id` or `ID`) in the run export")]
    NoRunId,
    /// A CSV export that is not CSV.
    #[error("line {line}: {message}")]
    Csv {
        /// The record's line.
        line: u64,
        /// What is wrong.
        message: String,
    },
}

#[derive(Deserialize)]
struct KeyValue {
    key: String,
    #[serde(default)]
    value: serde_json::Value,
}

#[derive(Deserialize, Default)]
struct RunData {
    #[serde(default)]
    metrics: Vec<KeyValue>,
    #[serde(default)]
    params: Vec<KeyValue>,
    #[serde(default)]
    tags: Vec<KeyValue>,
}

#[derive(Deserialize)]
struct RunInfo {
    run_id: String,
    #[serde(default)]
    run_name: Option<String>,
    #[serde(default)]
    experiment_id: Option<String>,
    #[serde(default)]
    user_id: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    start_time: Option<serde_json::Value>,
    #[serde(default)]
    end_time: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RestRun {
    info: RunInfo,
    #[serde(default)]
    data: RunData,
}

#[derive(Deserialize)]
struct RunsPage {
    #[serde(default)]
    runs: Vec<RestRun>,
    #[serde(default)]
    next_page_token: Option<String>,
}

#[derive(Deserialize)]
struct Experiment {
    experiment_id: String,
    name: String,
}

#[derive(Deserialize)]
struct ExperimentsPage {
    #[serde(default)]
    experiments: Vec<Experiment>,
    #[serde(default)]
    next_page_token: Option<String>,
}

/// Text of a JSON value MLflow sends as a string or a number.
fn text(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Milliseconds MLflow sends as a number or a numeric string (int64 in JSON).
fn millis(v: Option<&serde_json::Value>) -> Option<EpochMs> {
    text(v?)?.parse().ok()
}

/// One page of `experiments/search`: (id, name) pairs and the next page's token.
///
/// # Errors
/// JSON that is not the documented answer.
pub fn experiments_page(json: &str) -> Result<Page<(String, String)>, MlflowError> {
    let p: ExperimentsPage = serde_json::from_str(json)?;
    Ok((
        p.experiments
            .into_iter()
            .map(|e| (e.experiment_id, e.name))
            .collect(),
        p.next_page_token.filter(|t| !t.is_empty()),
    ))
}

/// One page of `runs/search`: its runs (experiments named by `names`) and the next token.
///
/// # Errors
/// JSON that is not the documented answer.
pub fn runs_page(json: &str, names: &BTreeMap<String, String>) -> Result<Page<Run>, MlflowError> {
    let p: RunsPage = serde_json::from_str(json)?;
    let runs = p
        .runs
        .into_iter()
        .map(|r| {
            let mut tags = BTreeMap::new();
            for kv in r.data.params.iter().chain(&r.data.tags) {
                if let Some(v) = text(&kv.value) {
                    tags.insert(kv.key.clone(), v);
                }
            }
            let metrics = r
                .data
                .metrics
                .iter()
                .filter_map(|m| Some((m.key.clone(), m.value.as_f64()?)))
                .collect();
            let experiment = r
                .info
                .experiment_id
                .map(|id| names.get(&id).cloned().unwrap_or(id));
            Run {
                name: r
                    .info
                    .run_name
                    .or_else(|| tags.get("mlflow.runName").cloned()),
                user: r.info.user_id.or_else(|| tags.get("mlflow.user").cloned()),
                status: r.info.status,
                start_ms: millis(r.info.start_time.as_ref()),
                end_ms: millis(r.info.end_time.as_ref()),
                id: r.info.run_id,
                experiment,
                tags,
                metrics,
            }
        })
        .collect();
    Ok((runs, p.next_page_token.filter(|t| !t.is_empty())))
}

/// The state of a run's status (`FINISHED`, `FAILED`, `KILLED`, `RUNNING`, `SCHEDULED`; W&B's
/// `finished`, `crashed`, `failed`, `killed`, `running`).
#[must_use]
pub fn state(status: Option<&str>) -> JobState {
    match status.map(str::to_ascii_uppercase).as_deref() {
        Some("FINISHED") => JobState::Completed,
        Some("FAILED" | "CRASHED") => JobState::Failed,
        Some("KILLED") => JobState::Cancelled,
        Some("RUNNING") => JobState::Running,
        Some("SCHEDULED") => JobState::Pending,
        _ => JobState::Other,
    }
}

/// Tags and params that name a scheduler job.
const JOB_KEYS: &[&str] = &[
    "slurm_job_id",
    "SLURM_JOB_ID",
    "slurm.job_id",
    "job_id",
    "gpuwise.job",
];
/// Tags and params that name a pod.
const POD_KEYS: &[&str] = &["pod", "k8s.pod", "kubernetes.pod"];

/// What linking runs to jobs did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Linked {
    /// Runs that named a known job.
    pub linked: usize,
    /// Runs that became jobs of their own (they said where they ran).
    pub own: usize,
    /// Runs that named no job and no place: not counted anywhere.
    pub unlinked: usize,
    /// Runs that named a job no record has.
    pub unknown_job: Vec<String>,
}

/// Annotate `records` with `runs` (see the module docs); `quality` names the metric whose
/// cost per unit is wanted, `requests` the metric that counts requests served.
pub fn link(
    records: &mut Vec<JobRecord>,
    runs: Vec<Run>,
    quality: Option<&str>,
    requests: Option<&str>,
) -> Linked {
    let mut out = Linked::default();
    for run in runs {
        let find = |keys: &[&str]| keys.iter().find_map(|k| run.tags.get(*k).cloned());
        let named = find(JOB_KEYS).or_else(|| find(POD_KEYS));
        let q = quality.and_then(|m| Some((m.to_owned(), *run.metrics.get(m)?)));
        let served = requests.and_then(|m| run.metrics.get(m).copied());
        if let Some(job) = &named
            && let Some(r) = records.iter_mut().find(|r| {
                r.id == *job
                    || r.id.split('@').next() == Some(job)
                    || r.name.as_deref() == Some(job)
            })
        {
            r.experiment = r.experiment.take().or_else(|| run.experiment.clone());
            r.name = r.name.take().or_else(|| run.name.clone());
            r.quality = q.or_else(|| r.quality.take());
            r.requests = served.or(r.requests);
            out.linked += 1;
            continue;
        }
        if let Some(job) = named {
            out.unknown_job.push(job);
        }
        let place = find(&["nodes", "host", "hostname"]);
        let gpus: Option<u32> = find(&["gpus", "num_gpus", "n_gpus"]).and_then(|g| g.parse().ok());
        match (place, gpus) {
            (Some(place), Some(gpus)) if gpus > 0 => {
                let mut r = JobRecord::new(format!("mlflow:{}", run.id), Source::Mlflow);
                r.nodes = expand_nodes(&place).unwrap_or_default();
                r.gpus = gpus;
                r.gpu_type = find(&["gpu_type"]);
                r.name = run.name;
                r.user = run.user;
                r.experiment = run.experiment;
                r.state = state(run.status.as_deref());
                r.start_ms = run.start_ms;
                r.end_ms = run.end_ms;
                r.quality = q;
                r.requests = served;
                records.push(r);
                out.own += 1;
            }
            _ => out.unlinked += 1,
        }
    }
    out
}

/// Runs from an MLflow UI or W&B CSV download. Columns by name (any case): run id (`Run ID`,
/// `run_id`, `ID`), name (`Name`, `run_name`), experiment (`Experiment`, `experiment_id`,
/// `Sweep`, `Group`), user, status (`Status`, `State`), start (`Start Time`, `start_time`,
/// `Created`: RFC 3339, `YYYY-MM-DD HH:MM:SS` in UTC, or epoch ms), end (`End Time`,
/// `end_time`) or a duration (`Duration`, `Runtime`: seconds); every other column is a tag
/// (`tags.`/`params.` prefixes dropped) and, when numeric, a metric (`metrics.` dropped).
///
/// # Errors
/// No run id column, or text that is not CSV.
pub fn runs_csv(text: &str) -> Result<Vec<Run>, MlflowError> {
    let mut rd = csv::ReaderBuilder::new()
        .flexible(true)
        .from_reader(text.as_bytes());
    let headers: Vec<String> = rd
        .headers()
        .map_err(|e| MlflowError::Csv {
            line: 1,
            message: e.to_string(),
        })?
        .iter()
        .map(str::to_owned)
        .collect();
    let lower: Vec<String> = headers
        .iter()
        .map(|h| h.trim().to_ascii_lowercase())
        .collect();
    let at = |names: &[&str]| names.iter().find_map(|n| lower.iter().position(|h| h == n));
    let id = at(&["run id", "run_id", "id"]).ok_or(MlflowError::NoRunId)?;
    let cols = [
        at(&["name", "run_name", "run name"]),
        at(&["experiment", "experiment_id", "sweep", "group"]),
        at(&["user", "user_id"]),
        at(&["status", "state"]),
        at(&["start time", "start_time", "created"]),
        at(&["end time", "end_time"]),
        at(&["duration", "runtime"]),
    ];
    let known: Vec<usize> = std::iter::once(Some(id)).chain(cols).flatten().collect();
    let mut runs = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| MlflowError::Csv {
            line: e
                .position()
                .map_or(0, |p| record_line(text.as_bytes(), p, None)),
            message: e.to_string(),
        })?;
        let get = |c: Option<usize>| {
            c.and_then(|i| rec.get(i))
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let Some(run_id) = get(Some(id)) else {
            continue;
        };
        let start = get(cols[4]).as_deref().and_then(csv_time);
        let end = get(cols[5]).as_deref().and_then(csv_time).or_else(|| {
            let secs: f64 = get(cols[6])?.parse().ok()?;
            #[allow(clippy::cast_possible_truncation)]
            Some(start? + (secs * 1000.0) as i64)
        });
        let mut run = Run {
            id: run_id,
            name: get(cols[0]),
            experiment: get(cols[1]),
            user: get(cols[2]),
            status: get(cols[3]),
            start_ms: start,
            end_ms: end,
            ..Run::default()
        };
        for (i, h) in headers.iter().enumerate() {
            if known.contains(&i) {
                continue;
            }
            let Some(v) = get(Some(i)) else { continue };
            let key = ["tags.", "params.", "metrics."]
                .iter()
                .find_map(|p| h.strip_prefix(p))
                .unwrap_or(h)
                .to_owned();
            if let Ok(x) = v.parse::<f64>()
                && x.is_finite()
            {
                run.metrics.insert(key.clone(), x);
            }
            run.tags.insert(key, v);
        }
        runs.push(run);
    }
    Ok(runs)
}

fn csv_time(v: &str) -> Option<EpochMs> {
    if let Ok(ms) = v.parse::<i64>() {
        return Some(ms);
    }
    if let Ok(t) = v.parse::<jiff::Timestamp>() {
        return Some(t.as_millisecond());
    }
    let dt: jiff::civil::DateTime = v.replace(' ', "T").parse().ok()?;
    Some(
        jiff::tz::TimeZone::UTC
            .to_timestamp(dt)
            .ok()?
            .as_millisecond(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rest_pages_and_links() {
        let (exps, next) = experiments_page(
            r#"{"experiments":[{"experiment_id":"1","name":"llama-ft","lifecycle_stage":"active"}],"next_page_token":""}"#,
        )
        .expect("test input");
        assert_eq!(next, None);
        let names: BTreeMap<String, String> = exps.into_iter().collect();
        let (runs, next) = runs_page(
            r#"{"runs":[
              {"info":{"run_id":"a1","run_name":"lr-3e-4","experiment_id":"1","user_id":"ana","status":"FINISHED","start_time":"1759309200000","end_time":1759316400000},
               "data":{"metrics":[{"key":"eval_acc","value":0.8,"timestamp":1,"step":3}],"params":[{"key":"lr","value":"3e-4"}],"tags":[{"key":"slurm_job_id","value":"101"}]}},
              {"info":{"run_id":"b2","experiment_id":"1","status":"FAILED","start_time":1},"data":{"tags":[{"key":"host","value":"gpu[01-02]"},{"key":"gpus","value":"2"}]}},
              {"info":{"run_id":"c3","experiment_id":"9","status":"KILLED"}}
            ],"next_page_token":"tok"}"#,
            &names,
        )
        .expect("test input");
        assert_eq!(next.as_deref(), Some("tok"));
        assert_eq!(runs[0].start_ms, Some(1_759_309_200_000));
        assert_eq!(runs[0].experiment.as_deref(), Some("llama-ft"));
        assert_eq!(runs[2].experiment.as_deref(), Some("9"));
        let mut records = vec![JobRecord::new("101", Source::Slurm)];
        let l = link(&mut records, runs, Some("eval_acc"), None);
        assert_eq!((l.linked, l.own, l.unlinked), (1, 1, 1));
        assert_eq!(records[0].experiment.as_deref(), Some("llama-ft"));
        assert_eq!(records[0].quality, Some(("eval_acc".into(), 0.8)));
        assert_eq!(records[1].nodes, ["gpu01", "gpu02"]);
        assert_eq!(records[1].state, JobState::Failed);
        assert!(runs_page("{\"runs\": 3}", &names).is_err());
    }

    #[test]
    fn csv_exports_of_mlflow_and_wandb() {
        let runs = runs_csv(
            "Start Time,Duration,Run ID,Name,Source Type,User,Status,lr,eval_acc,slurm_job_id\n\
             2026-10-01 10:00:00,3600,a1,r1,LOCAL,ana,FINISHED,3e-4,0.81,101\n",
        )
        .expect("test input");
        assert_eq!(
            runs[0].end_ms.expect("test input") - runs[0].start_ms.expect("test input"),
            3_600_000
        );
        assert_eq!(runs[0].metrics["eval_acc"], 0.81);
        assert_eq!(runs[0].tags["slurm_job_id"], "101");
        let wandb = runs_csv("Name,State,User,Created,Runtime,ID,Sweep\nrun-1,crashed,bo,2026-10-01T10:00:00Z,60,x9,s1\n").expect("test input");
        assert_eq!(state(wandb[0].status.as_deref()), JobState::Failed);
        assert_eq!(wandb[0].experiment.as_deref(), Some("s1"));
        assert!(matches!(runs_csv("a,b\n1,2\n"), Err(MlflowError::NoRunId)));
    }
}
