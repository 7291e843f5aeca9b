//! A job's flags in the spirit of Princeton's jobstats: each says what was wasted and shows
//! the numbers, and each threshold is a setting ([`JobSettings`]).

use gpuwise_core::HOUR_MS;

use gpuwise_core::EpochMs;
use serde::Serialize;

use crate::join::JobAcc;
use crate::record::{JobRecord, JobState};

/// Thresholds of the flags; each is in the JSON's `settings`.
#[derive(Clone, Debug, Serialize)]
pub struct JobSettings {
    /// Utilization strictly below this is idle (the report's threshold).
    pub idle_below_pct: f32,
    /// A job idle for at least this long at its end is flagged.
    pub idle_tail_h: f64,
    /// A job whose memory peak is below this share of its GPU's memory is flagged.
    pub memory_share_pct: f64,
    /// A job whose mean utilization is below this is flagged.
    pub low_utilization_pct: f64,
    /// Jobs observed for less than this are not flagged (too short to judge).
    pub min_observed_h: f64,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            idle_below_pct: 5.0,
            idle_tail_h: 1.0,
            memory_share_pct: 25.0,
            low_utilization_pct: 20.0,
            min_observed_h: 0.25,
        }
    }
}

/// Something a job did that wastes GPUs, with the numbers that show it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flag {
    /// `unused_gpus`, `idle_tail`, `never_used`, `memory_oversized`, `low_utilization`,
    /// `time_limit`, `no_telemetry`.
    pub kind: &'static str,
    /// The evidence, in words.
    pub message: String,
}

/// What the report worked out of a job, that its flags read.
pub struct Seen {
    /// GPUs held.
    pub gpus: u32,
    /// GPUs observed, and of them used.
    pub gpus_observed: usize,
    pub gpus_used: usize,
    /// GPU-hours held in the window.
    pub gpu_hours: f64,
    /// Run time, seconds.
    pub run_s: Option<f64>,
    pub mean_utilization_pct: Option<f64>,
    pub idle_share_pct: Option<f64>,
    pub peak_memory_used_mib: Option<f64>,
    pub memory_total_mib: Option<f64>,
    /// The window's end (a running job's end).
    pub to_ms: EpochMs,
}

#[allow(clippy::cast_precision_loss)]
fn hours(ms: i64) -> f64 {
    ms as f64 / HOUR_MS as f64
}

fn gb(mib: f64) -> String {
    format!("{:.1} GiB", mib / 1024.0)
}

/// The flags of one job.
#[must_use]
pub fn of(row: &Seen, r: &JobRecord, acc: &JobAcc, st: &JobSettings) -> Vec<Flag> {
    let mut out = Vec::new();
    let flag = |kind, message| Flag { kind, message };
    if r.state == JobState::Timeout
        || r.time_limit_ms.zip(row.run_s).is_some_and(|(limit, run)| {
            #[allow(clippy::cast_precision_loss)]
            let limit_s = limit as f64 / 1000.0;
            run >= limit_s * 0.99
        })
    {
        out.push(flag(
            "time_limit",
            format!(
                "hit its time limit of {}",
                r.time_limit_ms.map_or_else(
                    || "its partition".to_owned(),
                    |l| {
                        #[allow(clippy::cast_possible_wrap)]
                        let h = hours(l as i64);
                        format!("{h:.2} h")
                    }
                )
            ),
        ));
    }
    if row.gpu_hours > 0.0 && acc.observed_ms == 0 {
        out.push(flag(
            "no_telemetry",
            format!(
                "held {:.2} GPU-hours with no GPU samples (no exporter on {}, or its GPUs not bound)",
                row.gpu_hours,
                if r.nodes.is_empty() { "its nodes".to_owned() } else { r.nodes.join(",") }
            ),
        ));
        return out;
    }
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_wrap)]
    let observed_h = hours(acc.observed_ms as i64);
    if observed_h < st.min_observed_h {
        return out;
    }
    let threshold = st.idle_below_pct;
    match acc.last_busy_ms {
        None if acc.util_ms > 0 => out.push(flag(
            "never_used",
            format!("below {threshold} % utilization for all {observed_h:.2} GPU-hours observed"),
        )),
        Some(busy) => {
            // A job only the telemetry knows ended when it was last seen.
            let end = match r.source {
                crate::record::Source::Telemetry => acc.last_seen_ms.unwrap_or(busy),
                _ => r.end_ms.unwrap_or(row.to_ms).min(row.to_ms),
            };
            let tail = hours(end - busy);
            if tail >= st.idle_tail_h {
                out.push(flag(
                    "idle_tail",
                    format!("below {threshold} % utilization for its last {tail:.1} h"),
                ));
            }
        }
        None => {}
    }
    if row.gpus_observed > 1 && row.gpus_used < row.gpus_observed {
        out.push(flag(
            "unused_gpus",
            format!(
                "held {} GPUs and used {} (mean utilization at or above {threshold} % on {} of the {} observed)",
                row.gpus, row.gpus_used, row.gpus_used, row.gpus_observed
            ),
        ));
    }
    if let (Some(mean), Some(true)) = (
        row.mean_utilization_pct,
        row.idle_share_pct.map(|s| s < 100.0),
    ) && mean < st.low_utilization_pct
    {
        out.push(flag(
            "low_utilization",
            format!("mean utilization {mean:.1} % over {observed_h:.2} GPU-hours"),
        ));
    }
    if let (Some(peak), Some(total)) = (row.peak_memory_used_mib, row.memory_total_mib)
        && total > 0.0
        && peak / total * 100.0 < st.memory_share_pct
    {
        out.push(flag(
            "memory_oversized",
            format!(
                "memory peak {} of {} ({:.0} %): a smaller GPU or a MIG slice would hold it",
                gb(peak),
                gb(total),
                peak / total * 100.0
            ),
        ));
    }
    out
}
