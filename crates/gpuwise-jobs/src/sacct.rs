//! Slurm accounting: `sacct --parsable2` output (a header line, `|`-separated fields, one line
//! per job allocation or step) into [`JobRecord`]s.
//!
//! Columns are found by their header name, in any order; only `JobID` is required. What this
//! reads of each: `JobID` (with `JobIDRaw`, the number an array task's prolog and exporters
//! see; array jobs `123_4` and heterogeneous components `123+0` are jobs of
//! their own; steps `123.batch`, `123.extern`, `123.0` are counted and skipped, an allocation's
//! line carries the job), `JobName`, `User`, `Account`, `Partition`, `QOS`, `Submit`, `Start`,
//! `End` (local times of the cluster, read in the zone given; `Unknown` and `None` are not
//! known), `Timelimit`, `State`, `ExitCode`, `AllocTRES` (`gres/gpu=4`, `gres/gpu:a100=4`;
//! `ReqTRES` when there is no allocation), `NodeList` (ranges expanded). A line that cannot be
//! read is skipped and named (line and field); the other lines are kept.

use std::collections::HashMap;

use gpuwise_core::EpochMs;
use jiff::tz::TimeZone;

use crate::record::{JobRecord, JobState, Source, expand_nodes, slurm_duration_ms};

/// A line that was not read, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Skip {
    /// Line number, from 1.
    pub line: u64,
    /// The field at fault, where one is.
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

/// What a file of job records gave.
#[derive(Clone, Debug, Default)]
pub struct Records {
    /// The jobs, in file order.
    pub jobs: Vec<JobRecord>,
    /// Lines skipped.
    pub skipped: Vec<Skip>,
    /// Step lines (`123.batch`) passed over: the allocation's line carries the job.
    pub steps: u64,
    /// Lines that repeated a job already read (same id and submit time).
    pub repeated: u64,
    /// Ids that named two different jobs (reused after a controller restart).
    pub reused_ids: Vec<String>,
    /// Ids run again after a requeue (`sacct --duplicates`): each later run is a record of its
    /// own whose `restarts` counts the runs before it.
    pub requeued: Vec<String>,
}

/// Why a file of job records could not be read at all.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SacctError {
    /// No header line, or one without `JobID`.
    #[error(
        "line 1: not `sacct --parsable2` output: the header has no `JobID` column (run sacct with --parsable2 and without --noheader)"
    )]
    NoHeader,
}

/// The columns this reader knows, by their header names.
#[derive(Default)]
struct Columns {
    id: usize,
    raw: Option<usize>,
    name: Option<usize>,
    user: Option<usize>,
    account: Option<usize>,
    partition: Option<usize>,
    qos: Option<usize>,
    submit: Option<usize>,
    start: Option<usize>,
    end: Option<usize>,
    limit: Option<usize>,
    state: Option<usize>,
    exit: Option<usize>,
    alloc: Option<usize>,
    req: Option<usize>,
    nodes: Option<usize>,
}

impl Columns {
    fn of(header: &str) -> Option<Self> {
        let names: Vec<String> = header
            .split('|')
            .map(|h| h.trim().to_ascii_lowercase())
            .collect();
        let at = |n: &str| names.iter().position(|h| h == n);
        Some(Self {
            id: at("jobid").or_else(|| at("jobidraw"))?,
            raw: at("jobidraw"),
            name: at("jobname"),
            user: at("user"),
            account: at("account"),
            partition: at("partition"),
            qos: at("qos"),
            submit: at("submit"),
            start: at("start"),
            end: at("end"),
            limit: at("timelimit"),
            state: at("state"),
            exit: at("exitcode"),
            alloc: at("alloctres"),
            req: at("reqtres"),
            nodes: at("nodelist"),
        })
    }
}

/// Read `sacct --parsable2` text; local times are in `tz`.
///
/// # Errors
/// [`SacctError::NoHeader`] when the first line is not a header with `JobID`.
pub fn read(text: &str, tz: &TimeZone) -> Result<Records, SacctError> {
    let mut lines = text.lines();
    let header = lines.next().ok_or(SacctError::NoHeader)?;
    let cols = Columns::of(header).ok_or(SacctError::NoHeader)?;
    let width = header.split('|').count();
    let mut out = Records::default();
    // (submit, start) of each job read, by id.
    type Runs = Vec<(Option<EpochMs>, Option<EpochMs>)>;
    let mut seen: HashMap<String, Runs> = HashMap::new();
    for (i, line) in lines.enumerate() {
        let no = i as u64 + 2;
        if line.trim().is_empty() {
            continue;
        }
        let fields: Vec<&str> = line.split('|').collect();
        // `--parsable` (not 2) ends every line with a `|`.
        let fields = match fields.len() {
            n if n == width => fields,
            n if n == width + 1 && fields.last() == Some(&"") => fields[..width].to_vec(),
            n => {
                out.skipped.push(Skip {
                    line: no,
                    field: None,
                    message: format!("{n} fields where the header has {width}"),
                });
                continue;
            }
        };
        let id = fields[cols.id].trim();
        if id.contains('.') {
            out.steps += 1;
            continue;
        }
        match job(&fields, &cols, tz) {
            Ok(mut job) => {
                let earlier = seen.entry(job.id.clone()).or_default();
                let this = (job.submit_ms, job.start_ms);
                if earlier.contains(&this) {
                    out.repeated += 1;
                    continue;
                }
                if earlier.iter().any(|(submit, _)| *submit == job.submit_ms) {
                    // One submission run again (`sacct --duplicates`: requeued after a
                    // preemption or a node failure): this run follows the ones before.
                    job.restarts = u32::try_from(earlier.len()).unwrap_or(u32::MAX);
                    out.requeued.push(job.id.clone());
                } else if !earlier.is_empty() {
                    out.reused_ids.push(job.id.clone());
                }
                if !earlier.is_empty() {
                    // The later record of an id is told apart by when it was submitted (a
                    // reused id) or started (a requeued run).
                    let at = if job.restarts > 0 {
                        job.start_ms
                    } else {
                        job.submit_ms
                    };
                    let at = at
                        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                        .map_or_else(|| format!("{}", earlier.len() + 1), |t| t.to_string());
                    job.id = format!("{}@{at}", job.id);
                }
                earlier.push(this);
                out.jobs.push(job);
            }
            Err((field, message)) => out.skipped.push(Skip {
                line: no,
                field: Some(field.to_owned()),
                message,
            }),
        }
    }
    Ok(out)
}

type FieldError = (&'static str, String);

fn job(fields: &[&str], cols: &Columns, tz: &TimeZone) -> Result<JobRecord, FieldError> {
    let get = |c: Option<usize>| c.map(|i| fields[i].trim()).filter(|v| !v.is_empty());
    let text = |c: Option<usize>| get(c).map(str::to_owned);
    let id = fields[cols.id].trim();
    if id.is_empty() {
        return Err(("JobID", "empty".into()));
    }
    let mut j = JobRecord::new(id, Source::Slurm);
    j.raw_id = text(cols.raw).filter(|r| r != id);
    j.name = text(cols.name);
    j.user = text(cols.user);
    j.account = text(cols.account);
    j.partition = text(cols.partition);
    j.qos = text(cols.qos);
    j.submit_ms = time(get(cols.submit), tz).map_err(|e| ("Submit", e))?;
    j.start_ms = time(get(cols.start), tz).map_err(|e| ("Start", e))?;
    j.end_ms = time(get(cols.end), tz).map_err(|e| ("End", e))?;
    j.time_limit_ms = get(cols.limit).and_then(slurm_duration_ms);
    j.state = get(cols.state).map_or(JobState::Other, JobState::from_slurm);
    j.exit_code = text(cols.exit);
    if j.state == JobState::Pending {
        // A pending job has no start, whatever a field says (`Unknown`, or the planned start).
        j.start_ms = None;
        j.end_ms = None;
    }
    if let (Some(s), Some(e)) = (j.start_ms, j.end_ms)
        && e < s
    {
        return Err(("End", "before the job's start".into()));
    }
    let tres = get(cols.alloc).or_else(|| get(cols.req)).unwrap_or("");
    let (gpus, kind) = gpus_of(tres).map_err(|e| ("AllocTRES", e))?;
    j.gpus = gpus;
    j.gpu_type = kind;
    j.nodes =
        expand_nodes(get(cols.nodes).unwrap_or("")).map_err(|e| ("NodeList", e.to_string()))?;
    Ok(j)
}

/// A local time of the cluster; `Unknown`, `None` and empty are not known.
fn time(v: Option<&str>, tz: &TimeZone) -> Result<Option<EpochMs>, String> {
    let Some(v) = v else { return Ok(None) };
    if v.eq_ignore_ascii_case("unknown") || v.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let dt: jiff::civil::DateTime = v
        .parse()
        .map_err(|_| format!("`{v}` is not a time (YYYY-MM-DDTHH:MM:SS)"))?;
    // A time that a clock change skipped or repeated is read as the earlier offset gives it.
    let ts = tz.to_timestamp(dt).map_err(|e| format!("`{v}`: {e}"))?;
    Ok(Some(ts.as_millisecond()))
}

/// The GPUs of a TRES list: the untyped `gres/gpu=N` total where present, else the sum of the
/// typed ones; the type where exactly one is named.
fn gpus_of(tres: &str) -> Result<(u32, Option<String>), String> {
    let mut total = None;
    let mut typed = 0u32;
    let mut kinds = Vec::new();
    for item in tres.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            continue;
        };
        let Some(rest) = key.strip_prefix("gres/gpu") else {
            continue;
        };
        let n: u32 = value
            .parse()
            .map_err(|_| format!("`{item}`: the GPU count is not a whole number"))?;
        match rest.strip_prefix(':') {
            None if rest.is_empty() => total = Some(n),
            Some(kind) if !kind.is_empty() => {
                typed += n;
                kinds.push(kind.to_owned());
            }
            // `gres/gpumem=…` and other `gres/gpu…` resources are not GPUs.
            _ => {}
        }
    }
    kinds.dedup();
    let kind = (kinds.len() == 1).then(|| kinds.remove(0));
    Ok((total.unwrap_or(typed), kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "JobID|JobName|User|Account|Partition|QOS|Submit|Start|End|Elapsed|Timelimit|State|ExitCode|AllocTRES|NodeList";

    fn read_utc(body: &str) -> Records {
        read(&format!("{HEAD}\n{body}"), &TimeZone::UTC).expect("test input")
    }

    #[test]
    fn reads_jobs_and_passes_over_steps() {
        let r = read_utc(
            "101|train|ana|ml|gpu|normal|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T12:00:00|02:00:00|04:00:00|COMPLETED|0:0|billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1|gpu01\n\
             101.batch|batch||ml||normal|2026-10-01T10:00:00|2026-10-01T10:00:00|2026-10-01T12:00:00|02:00:00||COMPLETED|0:0|cpu=8,gres/gpu=4|gpu01\n\
             102_3|sweep|bo|ml|gpu|normal|2026-10-01T09:00:00|2026-10-01T11:00:00|2026-10-01T11:30:00|00:30:00|01:00:00|CANCELLED by 1234|0:15|gres/gpu=2,node=2|gpu[02-03]\n\
             103|wait|bo|ml|gpu|normal|2026-10-01T09:00:00|Unknown|Unknown|00:00:00|01:00:00|PENDING|0:0||None assigned",
        );
        assert_eq!(r.steps, 1);
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        let [a, b, c] = &r.jobs[..] else {
            panic!("{:?}", r.jobs)
        };
        assert_eq!(a.id, "101");
        assert_eq!(a.gpus, 4);
        assert_eq!(a.gpu_type.as_deref(), Some("a100"));
        assert_eq!(a.queue_wait_ms(), Some(3_600_000));
        assert_eq!(a.time_limit_ms, Some(4 * 3_600_000));
        assert_eq!(b.state, JobState::Cancelled);
        assert_eq!(b.nodes, ["gpu02", "gpu03"]);
        assert_eq!(b.gpus, 2);
        assert_eq!(c.state, JobState::Pending);
        assert_eq!(c.start_ms, None);
        assert!(c.nodes.is_empty());
    }

    #[test]
    fn bad_lines_are_named_and_the_rest_kept() {
        let r = read_utc(
            "201|a|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T25:00:00|Unknown|00:00:00|01:00:00|RUNNING|0:0|gres/gpu=1|n1\n\
             202|too|few\n\
             203|b|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T09:00:00|00:00:00|01:00:00|FAILED|1:0|gres/gpu=1|n1\n\
             204|c|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|01:00:00|01:00:00|TIMEOUT|0:0|gres/gpu=x|n1\n\
             205|d|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|01:00:00|01:00:00|NODE_FAIL|0:0|gres/gpu=1|n[1-\n\
             206|e|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|01:00:00|01:00:00|NODE_FAIL|0:0|gres/gpu=1|n1",
        );
        let fields: Vec<(u64, Option<&str>)> = r
            .skipped
            .iter()
            .map(|s| (s.line, s.field.as_deref()))
            .collect();
        assert_eq!(
            fields,
            [
                (2, Some("Start")),
                (3, None),
                (4, Some("End")),
                (5, Some("AllocTRES")),
                (6, Some("NodeList"))
            ]
        );
        assert_eq!(r.jobs.len(), 1);
        assert_eq!(r.jobs[0].state, JobState::NodeFail);
    }

    #[test]
    fn a_reused_id_is_two_jobs_and_a_repeated_line_one() {
        let line = |submit: &str| {
            format!(
                "301|a|u|acc|p|q|{submit}|{submit}|2026-10-02T12:00:00|00:00:00|01:00:00|COMPLETED|0:0|gres/gpu=1|n1"
            )
        };
        let r = read_utc(&format!(
            "{}\n{}\n{}",
            line("2026-10-01T09:00:00"),
            line("2026-10-01T09:00:00"),
            line("2026-10-02T09:00:00")
        ));
        assert_eq!(r.repeated, 1);
        assert_eq!(r.reused_ids, ["301"]);
        assert_eq!(r.jobs.len(), 2);
        assert_eq!(r.jobs[1].id, "301@2026-10-02T09:00:00Z");
    }

    #[test]
    fn a_requeued_job_is_its_runs_each_counting_the_ones_before() {
        let r = read_utc(
            "501|train|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T09:00:00|2026-10-01T10:00:00|01:00:00|04:00:00|PREEMPTED|0:0|gres/gpu=1|n1\n\
             501|train|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:05:00|2026-10-01T12:00:00|01:55:00|04:00:00|COMPLETED|0:0|gres/gpu=1|n2",
        );
        assert_eq!(r.requeued, ["501"]);
        assert!(r.reused_ids.is_empty());
        let [first, again] = &r.jobs[..] else {
            panic!("{:?}", r.jobs)
        };
        assert_eq!((first.id.as_str(), first.restarts), ("501", 0));
        assert_eq!(
            (again.id.as_str(), again.restarts),
            ("501@2026-10-01T10:05:00Z", 1)
        );
        assert_eq!(again.state, JobState::Completed);
    }

    #[test]
    fn times_are_read_in_the_clusters_zone_and_the_header_is_required() {
        let tz = TimeZone::get("Europe/Berlin").expect("test input");
        let r = read(
            &format!("{HEAD}\n401|a|u|acc|p|q|2026-10-01T09:00:00|2026-10-01T10:00:00|2026-10-01T11:00:00|01:00:00|01:00:00|COMPLETED|0:0|gres/gpu=1|n1"),
            &tz,
        )
        .expect("test input");
        // 10:00 in Berlin (CEST, +2) is 08:00 UTC.
        assert_eq!(
            r.jobs[0].start_ms,
            Some(
                "2026-10-01T08:00:00Z"
                    .parse::<jiff::Timestamp>()
                    .expect("test input")
                    .as_millisecond()
            )
        );
        assert_eq!(
            read("101|a\n", &tz).expect_err("not sacct output"),
            SacctError::NoHeader
        );
        assert_eq!(
            read("", &tz).expect_err("not sacct output"),
            SacctError::NoHeader
        );
    }
}
