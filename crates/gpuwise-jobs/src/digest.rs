//! Per-user digests of wasteful jobs, in jobstats' spirit (it e-mails each user about their
//! jobs): each user whose flagged jobs' idle GPU time cost at least a threshold gets one
//! message listing those jobs, costliest idle first, each with its flags' evidence. The body is
//! Slack-compatible (`text` + `blocks`) or generic (`gpuwise.jobs-digest/v1`); posting is the
//! binary's (`gpuwise jobs --notify`).

use gpuwise_ledger::notify::Style;
use serde::Serialize;
use serde_json::{Value, json};

use crate::report::{Flag, JobsReport};

/// The generic body's schema.
pub const SCHEMA: &str = "gpuwise.jobs-digest/v1";

/// Slack allows 50 blocks: one goes to the header, one to the tail line.
const MAX_JOB_BLOCKS: usize = 48;

/// One user's wasteful jobs.
#[derive(Clone, Debug, Serialize)]
pub struct Digest {
    pub schema: &'static str,
    pub user: String,
    /// The window, as the report has it.
    pub from: Option<String>,
    pub to: Option<String>,
    /// Their flagged jobs' idle cost, summed.
    pub idle_cost_usd: f64,
    pub jobs: Vec<DigestJob>,
}

/// A flagged job in a digest.
#[derive(Clone, Debug, Serialize)]
pub struct DigestJob {
    pub id: String,
    pub name: Option<String>,
    pub state: &'static str,
    pub gpus: u32,
    pub gpu_hours: f64,
    pub idle_cost_usd: Option<f64>,
    pub flags: Vec<Flag>,
}

/// The digests of `r`: users with flagged jobs whose idle cost is at least `min_idle_cost_usd`,
/// the costliest first (jobs without a user are left out: nobody to tell).
#[must_use]
pub fn digests(r: &JobsReport, min_idle_cost_usd: f64) -> Vec<Digest> {
    let mut by: std::collections::BTreeMap<&str, Vec<DigestJob>> =
        std::collections::BTreeMap::new();
    for j in r.jobs.iter().filter(|j| !j.flags.is_empty()) {
        let Some(user) = j.user.as_deref() else {
            continue;
        };
        by.entry(user).or_default().push(DigestJob {
            id: j.id.clone(),
            name: j.name.clone(),
            state: j.state.name(),
            gpus: j.gpus,
            gpu_hours: j.gpu_hours,
            idle_cost_usd: j.idle_cost_usd,
            flags: j.flags.clone(),
        });
    }
    let mut out: Vec<Digest> = by
        .into_iter()
        .map(|(user, mut jobs)| {
            jobs.sort_by(|a, b| {
                b.idle_cost_usd
                    .unwrap_or(0.0)
                    .total_cmp(&a.idle_cost_usd.unwrap_or(0.0))
            });
            Digest {
                schema: SCHEMA,
                user: user.to_owned(),
                from: r.window.from.clone(),
                to: r.window.to.clone(),
                idle_cost_usd: jobs.iter().filter_map(|j| j.idle_cost_usd).sum(),
                jobs,
            }
        })
        .filter(|d| d.idle_cost_usd >= min_idle_cost_usd)
        .collect();
    out.sort_by(|a, b| b.idle_cost_usd.total_cmp(&a.idle_cost_usd));
    out
}

/// The summary line of a digest.
#[must_use]
pub fn headline(d: &Digest) -> String {
    format!(
        "gpuwise jobs: {} job(s) of {} wasted GPUs, {} of idle GPU time",
        d.jobs.len(),
        d.user,
        gpuwise_render::usd(d.idle_cost_usd)
    )
}

/// The body to post for one digest.
#[must_use]
pub fn message(d: &Digest, style: Style) -> Value {
    match style {
        Style::Generic => serde_json::to_value(d).unwrap_or(Value::Null),
        Style::Slack => {
            let mut blocks = vec![json!({
                "type": "header",
                "text": {"type": "plain_text", "text": headline(d)},
            })];
            for j in d.jobs.iter().take(MAX_JOB_BLOCKS) {
                let evidence: Vec<String> =
                    j.flags.iter().map(|f| format!("• {}", f.message)).collect();
                blocks.push(json!({
                    "type": "section",
                    "text": {"type": "mrkdwn", "text": format!(
                        "*{}*{} ({}, {} GPU(s), {:.1} GPU-h, idle {})\n{}",
                        j.id,
                        j.name.as_deref().map_or(String::new(), |n| format!(" {n}")),
                        j.state,
                        j.gpus,
                        j.gpu_hours,
                        j.idle_cost_usd.map_or_else(|| "unpriced".to_owned(), gpuwise_render::usd),
                        evidence.join("\n"),
                    )},
                }));
            }
            if d.jobs.len() > MAX_JOB_BLOCKS {
                blocks.push(json!({
                    "type": "context",
                    "elements": [{"type": "mrkdwn", "text": format!("and {} more job(s)", d.jobs.len() - MAX_JOB_BLOCKS)}],
                }));
            }
            json!({"text": headline(d), "blocks": blocks})
        }
    }
}
