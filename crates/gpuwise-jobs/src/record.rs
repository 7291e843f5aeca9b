//! What a scheduler or run tracker says about one job: who, where, when, how many GPUs, how
//! it ended. Every source (Slurm accounting, MLflow, kube-state-metrics) fills this one shape.

use std::fmt;

use gpuwise_core::EpochMs;
use serde::Serialize;

/// Where a job's record came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Slurm accounting (`sacct`).
    Slurm,
    /// Kubernetes objects from kube-state-metrics.
    Kubernetes,
    /// An MLflow run.
    Mlflow,
    /// Only the telemetry names it (an exporter's job label no record knows).
    Telemetry,
}

impl Source {
    /// The name in JSON and tables.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Source::Slurm => "slurm",
            Source::Kubernetes => "kubernetes",
            Source::Mlflow => "mlflow",
            Source::Telemetry => "telemetry",
        }
    }
}

/// How a job ended (or where it is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Finished with exit code 0.
    Completed,
    /// Finished with a non-zero exit code.
    Failed,
    /// Cancelled by a user or an administrator.
    Cancelled,
    /// Killed at its time limit.
    Timeout,
    /// Killed for using more memory than it asked for.
    OutOfMemory,
    /// Its node failed.
    NodeFail,
    /// Preempted by a higher-priority job.
    Preempted,
    /// Still running.
    Running,
    /// Waiting to start.
    Pending,
    /// Anything else a scheduler prints (`BOOT_FAIL`, `DEADLINE`, `REQUEUED`, `SUSPENDED`, …).
    Other,
}

impl JobState {
    /// Slurm's state text (`CANCELLED by 1234` is cancelled; a trailing `+` is dropped).
    #[must_use]
    pub fn from_slurm(text: &str) -> Self {
        let word = text
            .split_whitespace()
            .next()
            .unwrap_or("")
            .trim_end_matches('+');
        match word {
            "COMPLETED" | "CD" => JobState::Completed,
            "FAILED" | "F" => JobState::Failed,
            "CANCELLED" | "CA" => JobState::Cancelled,
            "TIMEOUT" | "TO" => JobState::Timeout,
            "OUT_OF_MEMORY" | "OOM" => JobState::OutOfMemory,
            "NODE_FAIL" | "NF" => JobState::NodeFail,
            "PREEMPTED" | "PR" => JobState::Preempted,
            "RUNNING" | "R" | "COMPLETING" | "CG" => JobState::Running,
            "PENDING" | "PD" => JobState::Pending,
            _ => JobState::Other,
        }
    }

    /// The name in JSON and tables.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::Timeout => "timeout",
            JobState::OutOfMemory => "out_of_memory",
            JobState::NodeFail => "node_fail",
            JobState::Preempted => "preempted",
            JobState::Running => "running",
            JobState::Pending => "pending",
            JobState::Other => "other",
        }
    }

    /// Whether the job ended as its owner meant: the run counts as a success.
    #[must_use]
    pub fn succeeded(self) -> bool {
        self == JobState::Completed
    }

    /// Whether the job has ended.
    #[must_use]
    pub fn ended(self) -> bool {
        !matches!(self, JobState::Running | JobState::Pending)
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One job as its scheduler (or run tracker) recorded it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JobRecord {
    /// The id, unique in the set (a Slurm id reused after a controller restart gets
    /// `@<submit time>` appended to the later record's).
    pub id: String,
    /// The scheduler's own number where it differs from `id` (an array task `123_4` is job
    /// `127` to Slurm's prolog, and so to an exporter's job mapping).
    pub raw_id: Option<String>,
    /// Where the record came from.
    pub source: Source,
    /// Job name (Slurm `JobName`, MLflow run name, the pod's owner).
    pub name: Option<String>,
    /// Who ran it.
    pub user: Option<String>,
    /// Slurm account (Kubernetes: namespace).
    pub account: Option<String>,
    /// Slurm partition.
    pub partition: Option<String>,
    /// Slurm quality of service.
    pub qos: Option<String>,
    /// MLflow experiment (where a run names the job).
    pub experiment: Option<String>,
    /// When it was submitted.
    pub submit_ms: Option<EpochMs>,
    /// When it started; `None` while pending.
    pub start_ms: Option<EpochMs>,
    /// When it ended; `None` while running.
    pub end_ms: Option<EpochMs>,
    /// Its time limit; `None` when unlimited or not said.
    pub time_limit_ms: Option<u64>,
    /// How it ended.
    pub state: JobState,
    /// Exit code (`code:signal` in Slurm), as printed.
    pub exit_code: Option<String>,
    /// GPUs it held in all (over all its nodes).
    pub gpus: u32,
    /// The GPU type its allocation named (`a100` from `gres/gpu:a100=4`).
    pub gpu_type: Option<String>,
    /// Its nodes (a node list's ranges expanded).
    pub nodes: Vec<String>,
    /// The GPU indices it held on each node, where the record says (else chosen by the
    /// lowest-free rule, see [`crate::schedule`]).
    pub gpu_indices: Option<Vec<(String, Vec<u32>)>>,
    /// Restarts (Kubernetes container restarts; Slurm requeues).
    pub restarts: u32,
    /// Requests served (from a request counter), for the cost per 1,000 requests.
    pub requests: Option<f64>,
    /// A quality metric of the run (MLflow), for the cost per unit of quality.
    pub quality: Option<(String, f64)>,
}

impl JobRecord {
    /// An empty record of `id` from `source`.
    #[must_use]
    pub fn new(id: impl Into<String>, source: Source) -> Self {
        Self {
            id: id.into(),
            raw_id: None,
            source,
            name: None,
            user: None,
            account: None,
            partition: None,
            qos: None,
            experiment: None,
            submit_ms: None,
            start_ms: None,
            end_ms: None,
            time_limit_ms: None,
            state: JobState::Other,
            exit_code: None,
            gpus: 0,
            gpu_type: None,
            nodes: Vec::new(),
            gpu_indices: None,
            restarts: 0,
            requests: None,
            quality: None,
        }
    }

    /// Time from submission to start, where both are known.
    #[must_use]
    pub fn queue_wait_ms(&self) -> Option<u64> {
        let (s, t) = (self.submit_ms?, self.start_ms?);
        u64::try_from(t - s).ok()
    }
}

/// A host name as jobs and telemetry compare it: lower case, without its domain
/// (`GPU01.cluster.local` and Slurm's `gpu01` are one node).
#[must_use]
pub fn short_host(host: &str) -> String {
    host.split('.').next().unwrap_or(host).to_ascii_lowercase()
}

/// Why a node list could not be expanded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("node list `{list}`: {why}")]
pub struct NodeListError {
    /// The list as written.
    pub list: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// The most nodes one range may expand to: a range of a million nodes is a typo, not a job.
const MAX_RANGE: u64 = 100_000;

/// Expand a Slurm host list (`gpu[01-04,07],cpu1` → gpu01 gpu02 gpu03 gpu04 gpu07 cpu1), keeping
/// each number's zero padding. `None assigned` and the empty list are no nodes.
///
/// # Errors
/// An unclosed bracket, a range that runs backwards or is not numbers, or one longer than
/// 100,000 nodes.
pub fn expand_nodes(list: &str) -> Result<Vec<String>, NodeListError> {
    let err = |why| NodeListError {
        list: list.to_owned(),
        why,
    };
    let list = list.trim();
    if list.is_empty() || list.eq_ignore_ascii_case("none assigned") || list == "None" {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    // Split on commas outside brackets.
    let mut depth = 0usize;
    let mut start = 0;
    let mut parts = Vec::new();
    for (i, c) in list.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| err("a `]` without `[`"))?
            }
            ',' if depth == 0 => {
                parts.push(&list[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(err("a `[` is not closed"));
    }
    parts.push(&list[start..]);
    for part in parts.into_iter().filter(|p| !p.is_empty()) {
        expand_one(part, &mut out).map_err(err)?;
    }
    Ok(out)
}

/// One host or one `prefix[ranges]suffix` (one bracket; Slurm's nested forms are rare and
/// refused rather than guessed).
fn expand_one(part: &str, out: &mut Vec<String>) -> Result<(), &'static str> {
    let Some(open) = part.find('[') else {
        out.push(part.to_owned());
        return Ok(());
    };
    let close = part.find(']').ok_or("a `[` is not closed")?;
    let (prefix, inner, suffix) = (&part[..open], &part[open + 1..close], &part[close + 1..]);
    if suffix.contains('[') {
        return Err("more than one bracket in one host name");
    }
    for range in inner.split(',') {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (lo, hi): (u64, u64) = (
            a.parse().map_err(|_| "a range bound is not a number")?,
            b.parse().map_err(|_| "a range bound is not a number")?,
        );
        if hi < lo {
            return Err("a range runs backwards");
        }
        if hi - lo >= MAX_RANGE {
            return Err("a range longer than 100,000 nodes");
        }
        let width = a.len();
        for n in lo..=hi {
            out.push(format!("{prefix}{n:0width$}{suffix}"));
        }
    }
    Ok(())
}

/// Parse a Slurm duration (`[days-]hours:minutes:seconds`, `minutes:seconds`, `minutes`,
/// fractional seconds dropped) into milliseconds; `None` for `UNLIMITED`, `Partition_Limit`,
/// `INVALID` and anything else that is not a duration.
#[must_use]
pub fn slurm_duration_ms(text: &str) -> Option<u64> {
    let text = text.trim();
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, text),
    };
    let fields: Vec<&str> = rest.split(':').collect();
    let num = |s: &str| -> Option<u64> {
        let whole = s.split('.').next()?;
        if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        whole.parse().ok()
    };
    // Checked: a duration too long for milliseconds in 64 bits is not one (it wrapped to a
    // wrong number in release builds; the fuzzer found it).
    let hms = |h: u64, m: u64, s: u64| {
        h.checked_mul(3600)?
            .checked_add(m.checked_mul(60)?)?
            .checked_add(s)
    };
    let seconds = match (fields.as_slice(), days > 0) {
        ([h, m, s], _) => hms(num(h)?, num(m)?, num(s)?)?,
        // With days, `1-02` is days and hours and `1-02:03` adds minutes.
        ([h], true) => hms(num(h)?, 0, 0)?,
        ([h, m], true) => hms(num(h)?, num(m)?, 0)?,
        ([m, s], false) => hms(0, num(m)?, num(s)?)?,
        ([m], false) => hms(0, num(m)?, 0)?,
        _ => return None,
    };
    days.checked_mul(86_400)?
        .checked_add(seconds)?
        .checked_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_too_long_for_milliseconds_is_none_not_a_wrapped_number() {
        assert_eq!(slurm_duration_ms("1-02:03:04"), Some(93_784_000));
        assert_eq!(slurm_duration_ms("99999999999999999:00:00"), None);
        assert_eq!(slurm_duration_ms("9999999999999-00:00:00"), None);
        assert_eq!(slurm_duration_ms("0:18446744073709552"), None);
    }

    #[test]
    fn node_lists_expand_with_their_padding() {
        assert_eq!(
            expand_nodes("gpu[01-04,07],cpu1").expect("test input"),
            ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "cpu1"]
        );
        assert_eq!(
            expand_nodes("n[8-11]x").expect("test input"),
            ["n8x", "n9x", "n10x", "n11x"]
        );
        assert_eq!(
            expand_nodes("None assigned").expect("test input"),
            Vec::<String>::new()
        );
        assert!(expand_nodes("gpu[01-04").is_err());
        assert!(expand_nodes("gpu[04-01]").is_err());
        assert!(expand_nodes("gpu[a-b]").is_err());
        assert!(expand_nodes("gpu[0-99999999]").is_err());
        assert!(expand_nodes("a]b").is_err());
    }

    #[test]
    fn slurm_durations() {
        assert_eq!(slurm_duration_ms("01:00:00"), Some(3_600_000));
        assert_eq!(slurm_duration_ms("1-00:00:00"), Some(86_400_000));
        assert_eq!(
            slurm_duration_ms("2-03"),
            Some((2 * 86_400 + 3 * 3600) * 1000)
        );
        assert_eq!(slurm_duration_ms("05:30"), Some(330_000));
        assert_eq!(slurm_duration_ms("30"), Some(1_800_000));
        assert_eq!(slurm_duration_ms("00:00:01.500"), Some(1000));
        assert_eq!(slurm_duration_ms("UNLIMITED"), None);
        assert_eq!(slurm_duration_ms("Partition_Limit"), None);
        assert_eq!(slurm_duration_ms("-1"), None);
    }

    #[test]
    fn slurm_states() {
        assert_eq!(
            JobState::from_slurm("CANCELLED by 1234"),
            JobState::Cancelled
        );
        assert_eq!(JobState::from_slurm("NODE_FAIL"), JobState::NodeFail);
        assert_eq!(JobState::from_slurm("COMPLETED"), JobState::Completed);
        assert_eq!(JobState::from_slurm("CANCELLED+"), JobState::Cancelled);
        assert_eq!(JobState::from_slurm("BOOT_FAIL"), JobState::Other);
        assert_eq!(short_host("GPU01.cluster.local"), "gpu01");
    }
}
