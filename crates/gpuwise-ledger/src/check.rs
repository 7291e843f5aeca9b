//! # Guardrails: rules over the report and the allocation
//!
//! A policy file (docs/policy.md) names rules; [`evaluate`] lists each violation with the
//! numbers it rests on. A rule the data cannot decide (spot share with no device's pricing
//! known) is reported as *not evaluated* with the reason, never as passed or failed.
//!
//! - `[budget]`: monthly budget per team, against the month to date and the month-end
//!   forecast (`forecast = "linear"` or `"hour_of_week"`, the default);
//! - `[idle]`: the largest idle share of a team's GPU-hours over the window;
//! - `[notebooks]`: a notebook (workload `notebook`, or a pod matching `pods`) held idle (memory
//!   allocated, no work) longer than `max_held_idle_hours` in one episode;
//! - `[long_jobs]`: a device busy without a break for longer than `max_hours` at
//!   `min_usd_per_hour` or more — a run of consecutive hours each mostly not idle;
//! - `[spot]`: the smallest share of priced GPU-hours bought as spot;
//! - `[stale]`: a device whose last sample is older than `max_age` before now.

use gpuwise_core::price::usd;
use std::collections::BTreeMap;

use gpuwise_core::HOUR_MS;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use gpuwise_core::sample::{EpochMs, WorkloadKind};
use serde::{Deserialize, Serialize};

use crate::allocate::Allocation;

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.check/v1";

/// A bad policy file.
#[derive(Debug, thiserror::Error)]
#[error("`{origin}` {message}")]
pub struct PolicyError {
    origin: String,
    message: String,
}

/// Which forecast a budget is held to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForecastKind {
    /// To date + the run rate × the hours left.
    Linear,
    /// The hour-of-week pattern.
    #[default]
    HourOfWeek,
}

/// `[budget]`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// Team → monthly budget, USD.
    pub monthly_usd: BTreeMap<String, f64>,
    /// Forecast to hold the budget against.
    #[serde(default)]
    pub forecast: ForecastKind,
}

/// `[idle]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct IdleRule {
    /// Largest idle share of a team's GPU-hours, %.
    pub max_share_pct: f64,
}

/// `[notebooks]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NotebookRule {
    /// Longest held-idle episode allowed.
    pub max_held_idle_hours: f64,
    /// Pod globs that are notebooks (besides devices hinted `notebook`).
    #[serde(default)]
    pub pods: Vec<String>,
}

/// `[long_jobs]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LongJobRule {
    /// Longest busy run allowed.
    pub max_hours: f64,
    /// Only devices at this $ per hour or more (the device's GPU share × $/GPU-hour).
    #[serde(default)]
    pub min_usd_per_hour: f64,
}

/// `[spot]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SpotRule {
    /// Smallest spot share of priced GPU-hours with a known pricing model, %.
    pub min_share_pct: f64,
}

/// `[stale]`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct StaleRule {
    /// Hours since a device's last sample.
    pub max_age_hours: f64,
}

/// A policy file.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Budgets.
    pub budget: Option<Budget>,
    /// Idle share.
    pub idle: Option<IdleRule>,
    /// Notebooks.
    pub notebooks: Option<NotebookRule>,
    /// Long jobs.
    pub long_jobs: Option<LongJobRule>,
    /// Spot share.
    pub spot: Option<SpotRule>,
    /// Stale telemetry.
    pub stale: Option<StaleRule>,
}

impl Policy {
    /// Parse and check a policy file.
    ///
    /// # Errors
    /// [`PolicyError`] naming what is wrong.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, PolicyError> {
        let bad = |message: String| PolicyError {
            origin: origin.to_owned(),
            message,
        };
        let p: Policy = toml::from_str(text).map_err(|e| {
            bad(format!(
                "is not a valid policy file: {}",
                gpuwise_catalog::toml_message(&e, text)
            ))
        })?;
        let check = |what: &str, v: f64, pct: bool| {
            if !v.is_finite() || v < 0.0 || (pct && v > 100.0) {
                Err(bad(format!(
                    "{what} must be {}, got {v}",
                    if pct {
                        "within 0–100"
                    } else {
                        "a non-negative number"
                    }
                )))
            } else {
                Ok(())
            }
        };
        if let Some(b) = &p.budget {
            for (team, v) in &b.monthly_usd {
                check(&format!("[budget] monthly_usd.{team}"), *v, false)?;
            }
        }
        if let Some(r) = &p.idle {
            check("[idle] max_share_pct", r.max_share_pct, true)?;
        }
        if let Some(r) = &p.notebooks {
            check(
                "[notebooks] max_held_idle_hours",
                r.max_held_idle_hours,
                false,
            )?;
            for g in &r.pods {
                glob::Pattern::new(g).map_err(|e| bad(format!("[notebooks] pods `{g}`: {e}")))?;
            }
        }
        if let Some(r) = &p.long_jobs {
            check("[long_jobs] max_hours", r.max_hours, false)?;
            check("[long_jobs] min_usd_per_hour", r.min_usd_per_hour, false)?;
        }
        if let Some(r) = &p.spot {
            check("[spot] min_share_pct", r.min_share_pct, true)?;
        }
        if let Some(r) = &p.stale {
            check("[stale] max_age_hours", r.max_age_hours, false)?;
        }
        if p.budget.is_none()
            && p.idle.is_none()
            && p.notebooks.is_none()
            && p.long_jobs.is_none()
            && p.spot.is_none()
            && p.stale.is_none()
        {
            return Err(bad("names no rule: add [budget], [idle], [notebooks], [long_jobs], [spot] or [stale] (docs/policy.md)".into()));
        }
        Ok(p)
    }
}

/// One violated rule, with its evidence.
#[derive(Clone, Debug, Serialize)]
pub struct Violation {
    /// `budget`, `budget_forecast`, `idle_share`, `notebook_held_idle`, `long_job`,
    /// `spot_share`, `stale_telemetry`.
    pub rule: &'static str,
    /// The team, device or `fleet` it is about (a device by its id, `host/uuid`).
    pub subject: String,
    /// The subject as every output shows it: a device's display name (`host/gpuN`, as in the
    /// report), else the subject itself.
    pub name: String,
    /// In words.
    pub message: String,
    /// The measured value.
    pub value: f64,
    /// The limit it broke.
    pub limit: f64,
    /// Further numbers (named).
    pub evidence: BTreeMap<String, serde_json::Value>,
}

/// A rule the data could not decide.
#[derive(Clone, Debug, Serialize)]
pub struct NotEvaluated {
    /// Rule.
    pub rule: &'static str,
    /// Why.
    pub reason: String,
}

/// `gpuwise.check/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    /// Schema.
    pub schema: &'static str,
    /// The policy checked.
    pub policy: Policy,
    /// Rules evaluated.
    pub rules_evaluated: Vec<&'static str>,
    /// Violations.
    pub violations: Vec<Violation>,
    /// Rules not evaluated, and why.
    pub not_evaluated: Vec<NotEvaluated>,
}

fn ev(pairs: &[(&str, serde_json::Value)]) -> BTreeMap<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// One team's budget against the current month.
#[derive(Clone, Debug, PartialEq)]
pub struct Burn {
    /// The team.
    pub team: String,
    /// The month (`2026-11`).
    pub month: String,
    /// Spent in the month to date, USD.
    pub month_to_date_usd: f64,
    /// The budget, USD.
    pub limit_usd: f64,
    /// The month-end forecast the budget is held to, USD.
    pub forecast_usd: Option<f64>,
    /// Hours of the month elapsed, and in all.
    pub elapsed_hours: f64,
    /// Hours in the month.
    pub month_hours: f64,
}

/// Each budgeted team's month to date and forecast, or `None` when the allocation has no
/// data in the current month.
#[must_use]
pub fn burn(b: &Budget, a: &Allocation) -> Option<Vec<Burn>> {
    let f = a.forecast.as_ref()?;
    Some(
        b.monthly_usd
            .iter()
            .map(|(team, &limit)| {
                let row = f.teams.iter().find(|t| &t.team == team);
                Burn {
                    team: team.clone(),
                    month: f.month.clone(),
                    month_to_date_usd: row.map_or(0.0, |r| r.month_to_date_usd),
                    limit_usd: limit,
                    forecast_usd: row.and_then(|r| match b.forecast {
                        ForecastKind::Linear => r.forecast_linear_usd,
                        ForecastKind::HourOfWeek => r.forecast_hour_of_week_usd,
                    }),
                    elapsed_hours: f.elapsed_hours,
                    month_hours: f.month_hours,
                }
            })
            .collect(),
    )
}

/// Of the teams `asked` for, those that neither the team file (`named`) nor the allocation's
/// data knows, in words: "`a`, `b` that no team file or data knows; the known teams are …"
/// (`None` when every one is known). A rule for a misspelt team would match nothing, silently.
#[must_use]
pub fn unknown_teams<'a>(
    asked: impl IntoIterator<Item = &'a str>,
    a: &Allocation,
    named: &std::collections::BTreeSet<String>,
) -> Option<String> {
    let mut known = named.clone();
    known.extend(
        a.months
            .iter()
            .flat_map(|m| m.teams.iter().map(|t| t.team.clone())),
    );
    let unknown: Vec<&str> = asked.into_iter().filter(|t| !known.contains(*t)).collect();
    if unknown.is_empty() {
        return None;
    }
    let list = |v: Vec<&str>| {
        v.iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "{} that no team file or data knows; the known teams are {}",
        list(unknown),
        if known.is_empty() {
            "none (give --teams or --group-by)".to_owned()
        } else {
            list(known.iter().map(String::as_str).collect())
        }
    ))
}

/// The budget's teams that neither the team file (`named`) nor the data knows: a budget for a
/// misspelt team would pass every month, matching nothing.
///
/// # Errors
/// [`PolicyError`] naming the unknown teams and the known ones.
pub fn known_teams(
    policy: &Policy,
    a: &Allocation,
    named: &std::collections::BTreeSet<String>,
    origin: &str,
) -> Result<(), PolicyError> {
    let Some(b) = &policy.budget else {
        return Ok(());
    };
    match unknown_teams(b.monthly_usd.keys().map(String::as_str), a, named) {
        None => Ok(()),
        Some(what) => Err(PolicyError {
            origin: origin.to_owned(),
            message: format!("[budget] monthly_usd names {what}"),
        }),
    }
}

/// A team's unpriced GPU-hours in the allocation's current month, if any.
fn unpriced_this_month(a: &Allocation, team: &str) -> Option<f64> {
    let month = &a.forecast.as_ref()?.month;
    let m = a.months.iter().find(|m| &m.month == month)?;
    let t = m.teams.iter().find(|t| t.team == team)?;
    (t.sums.unpriced_gpu_hours > 0.0).then_some(t.sums.unpriced_gpu_hours)
}

fn budgets(b: &Budget, a: &Allocation, out: &mut Outcome) {
    let Some(rows) = burn(b, a) else {
        out.not_evaluated.push(NotEvaluated {
            rule: "budget",
            reason: "no data in the current month".into(),
        });
        return;
    };
    for r in rows {
        let (team, limit, mtd, forecast) = (
            r.team.clone(),
            r.limit_usd,
            r.month_to_date_usd,
            r.forecast_usd,
        );
        let evidence = ev(&[
            ("month", r.month.clone().into()),
            ("month_to_date_usd", mtd.into()),
            ("forecast_usd", forecast.into()),
            ("elapsed_hours", r.elapsed_hours.into()),
            ("month_hours", r.month_hours.into()),
        ]);
        let unpriced = unpriced_this_month(a, &team);
        if let Some(h) = unpriced.filter(|_| mtd <= limit) {
            // The priced part is under the budget; what the unpriced hours cost is unknown,
            // so the rule cannot say the team is within it.
            out.not_evaluated.push(NotEvaluated {
                rule: "budget",
                reason: format!(
                    "{team}: {h:.1} GPU-hour(s) in {} have no price, so its spend is not known \
                     ({} priced of a {} budget); price them with --prices",
                    r.month,
                    usd(mtd),
                    usd(limit)
                ),
            });
            continue;
        }
        if mtd > limit {
            out.violations.push(Violation {
                rule: "budget",
                subject: team.clone(),
                name: team.clone(),
                message: format!(
                    "{team} has spent {} of its {} budget for {}",
                    usd(mtd),
                    usd(limit),
                    r.month
                ),
                value: mtd,
                limit,
                evidence,
            });
        } else if let Some(fc) = forecast.filter(|fc| *fc > limit) {
            out.violations.push(Violation {
                rule: "budget_forecast",
                subject: team.clone(),
                name: team.clone(),
                message: format!(
                    "{team} is forecast to spend {} in {} against a {} budget ({} so far)",
                    usd(fc),
                    r.month,
                    usd(limit),
                    usd(mtd)
                ),
                value: fc,
                limit,
                evidence,
            });
        }
    }
}

fn idle_share(r: &IdleRule, a: &Allocation, out: &mut Outcome) {
    let mut by: BTreeMap<&str, (f64, f64, f64)> = BTreeMap::new();
    for m in &a.months {
        for t in &m.teams {
            let e = by.entry(t.team.as_str()).or_default();
            e.0 += t.sums.idle_gpu_hours;
            e.1 += t.sums.gpu_hours;
            e.2 += t.sums.idle_cost_usd;
        }
    }
    for (team, (idle, hours, cost)) in by {
        if hours <= 0.0 {
            continue;
        }
        let share = idle / hours * 100.0;
        if share > r.max_share_pct {
            out.violations.push(Violation {
                rule: "idle_share",
                subject: team.to_owned(),
                name: team.to_owned(),
                message: format!(
                    "{team}: {share:.1} % of its GPU-hours idle ({idle:.1} of {hours:.1} h, {})",
                    usd(cost)
                ),
                value: share,
                limit: r.max_share_pct,
                evidence: ev(&[
                    ("idle_gpu_hours", idle.into()),
                    ("gpu_hours", hours.into()),
                    ("idle_cost_usd", cost.into()),
                ]),
            });
        }
    }
}

/// What the report knows of each device: id → (name, $/h of the device, pricing, GPU-hours).
struct Rows<'a> {
    by_id: BTreeMap<String, &'a gpuwise_core::report::DeviceRow>,
}

impl<'a> Rows<'a> {
    fn new(report: &'a Report) -> Self {
        Self {
            by_id: report.devices.iter().map(|d| (d.id.clone(), d)).collect(),
        }
    }

    /// A device's display name, else its id.
    fn name(&self, id: &str) -> String {
        self.by_id
            .get(id)
            .map_or_else(|| id.to_owned(), |d| d.name.clone())
    }

    fn usd_per_hour(&self, id: &str) -> Option<f64> {
        let d = self.by_id.get(id)?;
        Some(d.usd_per_gpu_hour? * d.gpu_share?)
    }
}

fn notebooks(r: &NotebookRule, profiles: &[DeviceProfile], rows: &Rows<'_>, out: &mut Outcome) {
    let pods: Vec<glob::Pattern> = r
        .pods
        .iter()
        .filter_map(|g| glob::Pattern::new(g).ok())
        .collect();
    #[allow(clippy::cast_precision_loss)]
    let hours = |ms: u64| ms as f64 / HOUR_MS as f64;
    for p in profiles {
        let pod = p.info.label("pod");
        let is_nb = p.info.workload == Some(WorkloadKind::Notebook)
            || pod.is_some_and(|v| pods.iter().any(|g| g.matches(v)));
        if !is_nb {
            continue;
        }
        let id = p.key.to_string();
        let Some(e) = p.stats.idle_episodes.iter().max_by_key(|e| e.held_ms) else {
            continue;
        };
        let held = hours(e.held_ms);
        if held > r.max_held_idle_hours {
            let cost = rows.usd_per_hour(&id).map(|u| u * held);
            out.violations.push(Violation {
                rule: "notebook_held_idle",
                subject: id.clone(),
                name: rows.name(&id),
                message: format!(
                    "notebook {}{} held its GPU idle for {held:.1} h from {}",
                    rows.name(&id),
                    pod.map(|p| format!(" (pod {p})")).unwrap_or_default(),
                    rfc3339(e.start_ms)
                ),
                value: held,
                limit: r.max_held_idle_hours,
                evidence: ev(&[
                    ("start", rfc3339(e.start_ms).into()),
                    ("episode_hours", hours(e.dur_ms).into()),
                    ("held_idle_cost_usd", cost.into()),
                ]),
            });
        }
    }
}

fn long_jobs(r: &LongJobRule, profiles: &[DeviceProfile], rows: &Rows<'_>, out: &mut Outcome) {
    let mut unpriced = Vec::new();
    for p in profiles {
        let id = p.key.to_string();
        let Some(rate) = rows.usd_per_hour(&id) else {
            // Without a price the rule's min_usd_per_hour cannot be checked: a long run on
            // such a device is named, never passed over.
            if p.longest_busy_run().is_some_and(|(_, h)| h > r.max_hours) {
                unpriced.push(id);
            }
            continue;
        };
        if rate < r.min_usd_per_hour {
            continue;
        }
        if let Some((start, hours)) = p.longest_busy_run().filter(|(_, h)| *h > r.max_hours) {
            out.violations.push(Violation {
                rule: "long_job",
                subject: id.clone(),
                name: rows.name(&id),
                message: format!(
                    "{} has run for {hours:.1} h without a break from {} at ${rate:.2}/h ({})",
                    rows.name(&id),
                    rfc3339(start),
                    usd(rate * hours)
                ),
                value: hours,
                limit: r.max_hours,
                evidence: ev(&[
                    ("start", rfc3339(start).into()),
                    ("usd_per_hour", rate.into()),
                    ("cost_usd", (rate * hours).into()),
                ]),
            });
        }
    }
    if !unpriced.is_empty() {
        let shown: Vec<&str> = unpriced.iter().take(5).map(String::as_str).collect();
        out.not_evaluated.push(NotEvaluated {
            rule: "long_job",
            reason: format!(
                "{} device(s) without a price ran longer than {} h ({}{}); whether they cost \
                 at least ${:.2}/h is not known: price them with --prices",
                unpriced.len(),
                r.max_hours,
                shown.join(", "),
                if unpriced.len() > shown.len() {
                    ", …"
                } else {
                    ""
                },
                r.min_usd_per_hour
            ),
        });
    }
}

fn spot(r: &SpotRule, report: &Report, out: &mut Outcome) {
    let Some((spot, known)) = gpuwise_core::report::spot_share(&report.devices) else {
        out.not_evaluated.push(NotEvaluated {
            rule: "spot_share",
            reason: "no priced device has a known pricing model (set `pricing` in the price rules)"
                .into(),
        });
        return;
    };
    let share = spot / known * 100.0;
    if share < r.min_share_pct {
        out.violations.push(Violation {
            rule: "spot_share",
            subject: "fleet".into(),
            name: "fleet".into(),
            message: format!(
                "{share:.1} % of priced GPU-hours are spot ({spot:.1} of {known:.1} h)"
            ),
            value: share,
            limit: r.min_share_pct,
            evidence: ev(&[
                ("spot_gpu_hours", spot.into()),
                ("gpu_hours_with_known_pricing", known.into()),
            ]),
        });
    }
}

fn stale(
    r: &StaleRule,
    profiles: &[DeviceProfile],
    rows: &Rows<'_>,
    now: EpochMs,
    out: &mut Outcome,
) {
    #[allow(clippy::cast_precision_loss)]
    for p in profiles {
        let age = (now - p.stats.last_ts_ms) as f64 / HOUR_MS as f64;
        if age > r.max_age_hours {
            let id = p.key.to_string();
            out.violations.push(Violation {
                rule: "stale_telemetry",
                name: rows.name(&id),
                message: format!(
                    "{} last reported {} ({age:.1} h ago)",
                    rows.name(&id),
                    rfc3339(p.stats.last_ts_ms)
                ),
                subject: id,
                value: age,
                limit: r.max_age_hours,
                evidence: ev(&[("last_seen", rfc3339(p.stats.last_ts_ms).into())]),
            });
        }
    }
}

/// Check `policy` against the report, its profiles and the allocation, at `now`.
#[must_use]
pub fn evaluate(
    policy: &Policy,
    report: &Report,
    profiles: &[DeviceProfile],
    allocation: &Allocation,
    now: EpochMs,
) -> Outcome {
    let mut out = Outcome {
        schema: SCHEMA,
        policy: policy.clone(),
        rules_evaluated: Vec::new(),
        violations: Vec::new(),
        not_evaluated: Vec::new(),
    };
    let rows = Rows::new(report);
    if let Some(b) = &policy.budget {
        out.rules_evaluated.push("budget");
        budgets(b, allocation, &mut out);
    }
    if let Some(r) = &policy.idle {
        out.rules_evaluated.push("idle_share");
        idle_share(r, allocation, &mut out);
    }
    if let Some(r) = &policy.notebooks {
        out.rules_evaluated.push("notebook_held_idle");
        notebooks(r, profiles, &rows, &mut out);
    }
    if let Some(r) = &policy.long_jobs {
        out.rules_evaluated.push("long_job");
        long_jobs(r, profiles, &rows, &mut out);
    }
    if let Some(r) = &policy.spot {
        out.rules_evaluated.push("spot_share");
        spot(r, report, &mut out);
    }
    if let Some(r) = &policy.stale {
        out.rules_evaluated.push("stale_telemetry");
        stale(r, profiles, &rows, now, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_bad_ones_say_what() {
        let p = Policy::from_toml(
            "[budget]\nmonthly_usd = { vision = 1000 }\nforecast = \"linear\"\n[idle]\nmax_share_pct = 30\n",
            "p.toml",
        )
        .expect("valid");
        assert_eq!(p.budget.expect("budget").forecast, ForecastKind::Linear);
        let e = |s: &str| Policy::from_toml(s, "p.toml").expect_err("bad").to_string();
        assert!(e("").contains("names no rule"));
        assert!(e("[idle]\nmax_share_pct = 130\n").contains("within 0–100, got 130"));
        assert!(e("[budget]\nmonthly_usd = { a = -1 }\n").contains("monthly_usd.a"));
        assert!(e("[idel]\nmax_share_pct = 1\n").contains("unknown field `idel`"));
    }
}
