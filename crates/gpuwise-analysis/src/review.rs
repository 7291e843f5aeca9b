//! # The monthly review: this period against the ones before, and what the actions realized
//!
//! Built from one report per period (each read from the history store over the period's whole
//! hours) and the actions journal. Every figure is a sum over the reports' device rows, so it
//! traces to a device, a price and its hours; an unpriced device's dollars stay unknown (the
//! group's dollars then cover only its priced devices, and say how many were not).
//!
//! **Realized savings.** An action's targets are measured before (the window its advice was
//! based on) and after (from the day it was marked done, or recommended where nobody marked
//! it, to the end of the period) with one rule: the targets' cost per hour of the window,
//! scaled to a month. The saving realized is the drop in that rate. The rest of the fleet,
//! measured the same way, says what else changed.

use std::collections::{BTreeMap, BTreeSet};

use gpuwise_core::report::{DeviceRow, Report};
use serde::Serialize;

/// The review's JSON schema.
pub const SCHEMA: &str = "gpuwise.review/v1";

/// Hours in the month that monthly rates are scaled to (365 × 24 / 12), as the advice uses.
pub const MONTH_HOURS: f64 = 730.0;

/// Targets a period's figures are held against (FinOps practice for production pools).
#[derive(Clone, Debug, Serialize)]
pub struct Targets {
    /// Mean utilization above this.
    pub utilization_pct: f64,
    /// Idle share of GPU-hours below this.
    pub idle_share_pct: f64,
}

impl Default for Targets {
    fn default() -> Self {
        Self {
            utilization_pct: 60.0,
            idle_share_pct: 5.0,
        }
    }
}

/// One period's report and what the review needs beside it.
pub struct PeriodInput<'a> {
    /// `2026-10`, `2026-Q3`.
    pub label: String,
    /// Its start and end (epoch ms).
    pub start_ms: i64,
    /// Its end.
    pub end_ms: i64,
    /// The report over it (`None`: the store holds nothing then).
    pub report: Option<&'a Report>,
    /// Workload kind per device id (from the hints), for the workload dimension.
    pub workloads: &'a BTreeMap<String, String>,
    /// Device ids whose work may run on spot (interruptible), for the spot share.
    pub interruptible: &'a BTreeSet<String>,
}

/// One period's figures for the fleet or a group.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    /// Devices.
    pub devices: usize,
    /// Spend of the priced devices (`null`: none priced).
    pub spend_usd: Option<f64>,
    /// GPU-hours with telemetry.
    pub gpu_hours: f64,
    /// GPU-hour-weighted mean utilization (`null`: no readings).
    pub utilization_pct: Option<f64>,
    /// GPU-hours in idle episodes.
    pub idle_gpu_hours: f64,
    /// Their share of GPU-hours (`null`: no hours).
    pub idle_share_pct: Option<f64>,
    /// Their cost.
    pub idle_cost_usd: Option<f64>,
    /// Cost of idle hours with memory held.
    pub held_idle_cost_usd: Option<f64>,
    /// Spend per busy GPU-hour (GPU-hours × utilization).
    pub cost_per_busy_gpu_hour_usd: Option<f64>,
    /// Share of interruptible GPU-hours priced as spot (`null`: no interruptible work).
    pub spot_share_of_eligible_pct: Option<f64>,
    /// Devices without a price (not in the dollars).
    pub unpriced_devices: usize,
}

#[derive(Default)]
struct Acc {
    devices: usize,
    spend: Option<f64>,
    hours: f64,
    util_h: f64,
    util_w: f64,
    idle_h: f64,
    idle_cost: Option<f64>,
    held_cost: Option<f64>,
    eligible_h: f64,
    spot_h: f64,
    unpriced: usize,
}

fn add_opt(a: &mut Option<f64>, v: Option<f64>) {
    if let Some(v) = v {
        *a = Some(a.unwrap_or(0.0) + v);
    }
}

impl Acc {
    fn add(&mut self, d: &DeviceRow, interruptible: bool) {
        self.devices += 1;
        self.hours += d.gpu_hours;
        if let Some(u) = d.mean_utilization_pct {
            self.util_h += d.gpu_hours;
            self.util_w += u * d.gpu_hours;
        }
        self.idle_h += d.idle_hours;
        if d.cost_usd.is_none() {
            self.unpriced += 1;
        }
        add_opt(&mut self.spend, d.cost_usd);
        add_opt(&mut self.idle_cost, d.idle_cost_usd);
        add_opt(&mut self.held_cost, d.held_idle_cost_usd);
        if interruptible {
            self.eligible_h += d.gpu_hours;
            if d.pricing == Some("spot") {
                self.spot_h += d.gpu_hours;
            }
        }
    }

    fn figures(&self) -> Figures {
        let util = (self.util_h > 0.0).then(|| self.util_w / self.util_h);
        let busy = util.map(|u| self.hours * u / 100.0);
        Figures {
            devices: self.devices,
            spend_usd: self.spend,
            gpu_hours: self.hours,
            utilization_pct: util,
            idle_gpu_hours: self.idle_h,
            idle_share_pct: (self.hours > 0.0).then(|| 100.0 * self.idle_h / self.hours),
            idle_cost_usd: self.idle_cost,
            held_idle_cost_usd: self.held_cost,
            cost_per_busy_gpu_hour_usd: match (self.spend, busy) {
                (Some(s), Some(b)) if b > 0.0 => Some(s / b),
                _ => None,
            },
            spot_share_of_eligible_pct: (self.eligible_h > 0.0)
                .then(|| 100.0 * self.spot_h / self.eligible_h),
            unpriced_devices: self.unpriced,
        }
    }
}

/// A period as the review shows it.
#[derive(Clone, Debug, Serialize)]
pub struct Period {
    /// Its label.
    pub label: String,
    /// Start, RFC 3339.
    pub start: String,
    /// End, RFC 3339.
    pub end: String,
    /// Whether the store held data for it.
    pub has_data: bool,
    /// Days from its first sample to its last (a period the data covers only partly reads
    /// low: compare per day).
    pub days_with_data: f64,
}

/// A group's figures in each period, oldest first, and how the reviewed one moved.
#[derive(Clone, Debug, Serialize)]
pub struct Trend {
    /// `team`, `group`, `workload`, `gpu`, `pricing`, `cloud` or `region`.
    pub dimension: &'static str,
    /// The group's key.
    pub key: String,
    /// Per period (`null`: the group had no devices then).
    pub periods: Vec<Option<Figures>>,
    /// Spend of the reviewed period minus the one before (`null`: either unknown).
    pub change_usd: Option<f64>,
    /// The same in percent of the one before.
    pub change_pct: Option<f64>,
    /// Below the utilization target in the reviewed period.
    pub below_utilization_target: bool,
    /// Above the idle-share target in the reviewed period.
    pub above_idle_target: bool,
}

/// One group's jobs in one period: `gpuwise jobs`'s group figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobFigures {
    /// Jobs (runs).
    pub runs: usize,
    /// Of them, ended as meant.
    pub succeeded: usize,
    /// Their cost (priced jobs).
    pub cost_usd: f64,
    /// Cost of the ended runs over their number.
    pub cost_per_run_usd: Option<f64>,
    /// Cost of the ended runs, the unsuccessful ones included, over the successful ones.
    pub cost_per_successful_run_usd: Option<f64>,
    /// Per 1,000 requests served.
    pub cost_per_1k_requests_usd: Option<f64>,
    /// Mean wait in the queue.
    pub mean_queue_wait_s: Option<f64>,
    /// Mean run time.
    pub mean_run_s: Option<f64>,
    /// Queue wait over queue wait plus run time.
    pub queue_share_pct: Option<f64>,
}

/// A group's jobs in each period, oldest first.
#[derive(Clone, Debug, Serialize)]
pub struct JobTrend {
    /// `team`, `account`, `partition` or `experiment`.
    pub dimension: String,
    /// The group.
    pub key: String,
    /// Per period (`null`: no jobs then).
    pub periods: Vec<Option<JobFigures>>,
}

/// A device whose idle cost is new this period.
#[derive(Clone, Debug, Serialize)]
pub struct NewWaste {
    /// Device id.
    pub device: String,
    /// Its name.
    pub name: String,
    /// Its team.
    pub team: Option<String>,
    /// Idle cost this period.
    pub idle_cost_usd: f64,
    /// Idle share this period.
    pub idle_share_pct: f64,
    /// Idle share the period before (`null`: it was not there).
    pub previous_idle_share_pct: Option<f64>,
}

/// The review.
#[derive(Clone, Debug, Serialize)]
pub struct Review {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The period reviewed.
    pub period: String,
    /// Every period, oldest first (the reviewed one last).
    pub periods: Vec<Period>,
    /// The targets held against.
    pub targets: Targets,
    /// The fleet per period.
    pub fleet: Vec<Option<Figures>>,
    /// Per dimension and group.
    pub trends: Vec<Trend>,
    /// The largest moves in spend, by team and group (up to ten).
    pub movers: Vec<Trend>,
    /// Devices whose idle cost is new (idle share at least 50 % now, below 50 % or absent
    /// before), the costliest first.
    pub new_waste: Vec<NewWaste>,
    /// The actions and what they realized.
    pub actions: Vec<ActionOutcome>,
    /// Realized saving per month of the actions marked done, and of open ones the telemetry
    /// shows were carried out, summed.
    pub realized_monthly_usd: f64,
    /// Predicted saving per month of the same actions.
    pub predicted_monthly_usd: f64,
    /// Jobs and runs per group and period, where job records were given (`gpuwise jobs`'s
    /// figures over each period).
    pub jobs: Vec<JobTrend>,
    /// The month-end forecast against budgets, where the reviewed month is the current one.
    pub forecast: Option<serde_json::Value>,
    /// What the figures rest on.
    pub notes: Vec<String>,
}

fn keys(d: &DeviceRow, p: &PeriodInput<'_>) -> [(&'static str, String); 7] {
    [
        (
            "team",
            d.team.clone().unwrap_or_else(|| "(no team)".to_owned()),
        ),
        ("group", d.group.clone()),
        (
            "workload",
            p.workloads
                .get(&d.id)
                .cloned()
                .unwrap_or_else(|| "(unknown)".to_owned()),
        ),
        (
            "gpu",
            d.model.clone().unwrap_or_else(|| "(unknown)".to_owned()),
        ),
        (
            "pricing",
            d.pricing
                .map_or_else(|| "(unpriced)".to_owned(), str::to_owned),
        ),
        (
            "cloud",
            d.cloud.clone().unwrap_or_else(|| "(unknown)".to_owned()),
        ),
        (
            "region",
            match (&d.cloud, &d.region) {
                (Some(c), Some(r)) => format!("{c} {r}"),
                _ => "(unknown)".to_owned(),
            },
        ),
    ]
}

/// The review of the last of `periods` against the ones before it.
#[must_use]
pub fn build(periods: &[PeriodInput<'_>], targets: Targets, actions: Vec<ActionOutcome>) -> Review {
    let n = periods.len();
    let mut fleet = Vec::with_capacity(n);
    let mut groups: BTreeMap<(&'static str, String), Vec<Option<Acc>>> = BTreeMap::new();
    for (i, p) in periods.iter().enumerate() {
        let Some(r) = p.report else {
            fleet.push(None);
            continue;
        };
        let mut all = Acc::default();
        for d in &r.devices {
            let spot_ok = p.interruptible.contains(&d.id);
            all.add(d, spot_ok);
            for k in keys(d, p) {
                let slots = groups
                    .entry(k)
                    .or_insert_with(|| (0..n).map(|_| None).collect());
                slots[i].get_or_insert_with(Acc::default).add(d, spot_ok);
            }
        }
        fleet.push(Some(all.figures()));
    }
    let trends: Vec<Trend> = groups
        .into_iter()
        .map(|((dimension, key), accs)| {
            let figs: Vec<Option<Figures>> =
                accs.iter().map(|a| a.as_ref().map(Acc::figures)).collect();
            trend(dimension, key, figs, &targets)
        })
        .collect();
    let mut movers: Vec<Trend> = trends
        .iter()
        .filter(|t| matches!(t.dimension, "team" | "group") && t.change_usd.is_some())
        .cloned()
        .collect();
    movers.sort_by(|a, b| {
        let m = |t: &Trend| t.change_usd.map_or(0.0, f64::abs);
        m(b).total_cmp(&m(a)).then_with(|| a.key.cmp(&b.key))
    });
    movers.truncate(10);
    let new_waste = new_waste(periods);
    // The month's realized total: actions marked done, and open ones the telemetry shows
    // were carried out.
    let done: Vec<&ActionOutcome> = actions
        .iter()
        .filter(|a| {
            a.realized_monthly_usd.is_some()
                && (a.action.state == "done" || (a.action.state == "open" && a.detected.is_some()))
        })
        .collect();
    Review {
        schema: SCHEMA,
        period: periods.last().map(|p| p.label.clone()).unwrap_or_default(),
        periods: periods
            .iter()
            .map(|p| Period {
                label: p.label.clone(),
                start: rfc3339(p.start_ms),
                end: rfc3339(p.end_ms),
                has_data: p.report.is_some(),
                days_with_data: p.report.map_or(0.0, data_days),
            })
            .collect(),
        targets,
        fleet,
        trends,
        movers,
        new_waste,
        realized_monthly_usd: done.iter().filter_map(|a| a.realized_monthly_usd).sum(),
        predicted_monthly_usd: done.iter().map(|a| a.predicted_monthly_usd).sum(),
        actions,
        jobs: Vec::new(),
        forecast: None,
        notes: vec![
            format!("Monthly rates are per {MONTH_HOURS} hours."),
            "A period's figures come from the store's whole hours inside it (UTC).".to_owned(),
            "Spot share counts the GPU-hours of devices hinted interruptible (--workloads); without hints it is unknown.".to_owned(),
        ],
    }
}

fn trend(dimension: &'static str, key: String, figs: Vec<Option<Figures>>, t: &Targets) -> Trend {
    let last = figs.last().cloned().flatten();
    let prev = figs.len().checked_sub(2).and_then(|i| figs[i].clone());
    let change = match (
        last.as_ref().and_then(|f| f.spend_usd),
        prev.as_ref().and_then(|f| f.spend_usd),
    ) {
        (Some(a), Some(b)) => Some(a - b),
        (Some(a), None) if prev.is_none() => Some(a),
        (None, Some(b)) if last.is_none() => Some(-b),
        _ => None,
    };
    let before = prev.as_ref().and_then(|f| f.spend_usd);
    Trend {
        dimension,
        key,
        change_pct: match (change, before) {
            (Some(c), Some(b)) if b > 0.0 => Some(100.0 * c / b),
            _ => None,
        },
        change_usd: change,
        below_utilization_target: last
            .as_ref()
            .and_then(|f| f.utilization_pct)
            .is_some_and(|u| u < t.utilization_pct),
        above_idle_target: last
            .as_ref()
            .and_then(|f| f.idle_share_pct)
            .is_some_and(|s| s > t.idle_share_pct),
        periods: figs,
    }
}

fn idle_share(d: &DeviceRow) -> Option<f64> {
    (d.gpu_hours > 0.0).then(|| 100.0 * d.idle_hours / d.gpu_hours)
}

fn new_waste(periods: &[PeriodInput<'_>]) -> Vec<NewWaste> {
    let Some(now) = periods.last().and_then(|p| p.report) else {
        return Vec::new();
    };
    let before: BTreeMap<&str, &DeviceRow> = periods
        .len()
        .checked_sub(2)
        .and_then(|i| periods[i].report)
        .map(|r| r.devices.iter().map(|d| (d.id.as_str(), d)).collect())
        .unwrap_or_default();
    let mut out: Vec<NewWaste> = now
        .devices
        .iter()
        .filter_map(|d| {
            let share = idle_share(d)?;
            let prev = before.get(d.id.as_str()).and_then(|p| idle_share(p));
            let cost = d.idle_cost_usd?;
            (share >= 50.0 && prev.is_none_or(|p| p < 50.0) && cost > 0.0).then(|| NewWaste {
                device: d.id.clone(),
                name: d.name.clone(),
                team: d.team.clone(),
                idle_cost_usd: cost,
                idle_share_pct: share,
                previous_idle_share_pct: prev,
            })
        })
        .collect();
    out.sort_by(|a, b| b.idle_cost_usd.total_cmp(&a.idle_cost_usd));
    out
}

fn data_days(r: &Report) -> f64 {
    data_hours(r) / 24.0
}

/// Hours from a report's first sample to its last: what a window's costs are normalised by
/// (a window the telemetry covers only partly is not read as a drop in cost).
#[must_use]
pub fn data_hours(r: &Report) -> f64 {
    let ms = |v: &Option<String>| {
        v.as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(jiff::Timestamp::as_millisecond)
    };
    match (ms(&r.window.start), ms(&r.window.end)) {
        #[allow(clippy::cast_precision_loss)]
        (Some(a), Some(b)) if b > a => (b - a) as f64 / 3_600_000.0,
        _ => 0.0,
    }
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// An action from the journal, with its latest mark.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct LoggedAction {
    /// Its id.
    pub id: String,
    /// When it was recommended (epoch ms).
    pub recommended_ms: i64,
    /// Its kind (`shutdown_idle`, …).
    pub kind: String,
    /// Device ids it targets.
    pub targets: Vec<String>,
    /// Their names.
    pub target_names: Vec<String>,
    /// The saving it predicted per month.
    pub predicted_monthly_usd: f64,
    /// The window its advice was based on (epoch ms).
    pub based_on: (i64, i64),
    /// `open`, `done` or `rejected`.
    pub state: String,
    /// When it was marked done (epoch ms).
    pub done_ms: Option<i64>,
    /// Why it was rejected, or the note of its mark.
    pub note: Option<String>,
}

/// An action measured.
#[derive(Clone, Debug, Serialize)]
pub struct ActionOutcome {
    /// The action.
    #[serde(flatten)]
    pub action: LoggedAction,
    /// The targets' cost per month before (`null`: not priced or not seen).
    pub before_monthly_usd: Option<f64>,
    /// The same after.
    pub after_monthly_usd: Option<f64>,
    /// The drop (`null` while it cannot be measured: rejected, too early, unpriced).
    pub realized_monthly_usd: Option<f64>,
    /// The predicted saving of the same action.
    pub predicted_monthly_usd: f64,
    /// `realized`, `partly_realized`, `not_realized`, `targets_vanished`, `too_early`,
    /// `rejected`, `unpriced`.
    pub outcome: &'static str,
    /// `high`, `medium`, `low`.
    pub confidence: &'static str,
    /// What the telemetry shows happened, where it shows it.
    pub detected: Option<String>,
    /// What else changed over the same windows.
    pub other_changes: Vec<String>,
    /// Hours after the action the measure rests on.
    pub after_hours: f64,
}

/// What one window's report says of a set of devices.
#[derive(Clone, Copy, Debug, Default)]
pub struct Measure {
    /// Cost of the priced ones.
    pub cost: Option<f64>,
    /// Their GPU-hours.
    pub gpu_hours: f64,
    /// Their idle hours.
    pub idle_hours: f64,
    /// Devices seen.
    pub seen: usize,
}

impl Measure {
    /// The devices of `r` that `pick` selects.
    #[must_use]
    pub fn of(r: &Report, pick: impl Fn(&DeviceRow) -> bool) -> Self {
        let mut m = Measure::default();
        for d in r.devices.iter().filter(|d| pick(d)) {
            m.seen += 1;
            m.gpu_hours += d.gpu_hours;
            m.idle_hours += d.idle_hours;
            add_opt(&mut m.cost, d.cost_usd);
        }
        m
    }

    fn monthly(&self, hours: f64) -> Option<f64> {
        (hours > 0.0).then_some(())?;
        self.cost.map(|c| c / hours * MONTH_HOURS)
    }
}

/// The targets and the rest of the fleet, before and after, over windows of the given hours.
pub struct Windows<'a> {
    /// The report over the window the advice was based on.
    pub before: &'a Report,
    /// Its hours.
    pub before_hours: f64,
    /// The report from the action's date to the end of the period (`None`: nothing there).
    pub after: Option<&'a Report>,
    /// Its hours.
    pub after_hours: f64,
}

/// Where the targets stopped reporting: devices that appeared after, in a target's group or
/// team, on another GPU model — the work moved there (`None`: no such device).
fn moved(w: &Windows<'_>, targets: &BTreeSet<&str>) -> Option<(String, Measure)> {
    let after = w.after?;
    let was: Vec<&DeviceRow> = w
        .before
        .devices
        .iter()
        .filter(|d| targets.contains(d.id.as_str()))
        .collect();
    let known: BTreeSet<&str> = w.before.devices.iter().map(|d| d.id.as_str()).collect();
    let models: BTreeSet<Option<&str>> = was.iter().map(|d| d.model.as_deref()).collect();
    let near = |d: &DeviceRow| {
        was.iter()
            .any(|t| t.group == d.group || (t.team.is_some() && t.team == d.team))
    };
    let is_new = |d: &DeviceRow| {
        !known.contains(d.id.as_str()) && near(d) && !models.contains(&d.model.as_deref())
    };
    let m = Measure::of(after, is_new);
    let first = after.devices.iter().find(|d| is_new(d))?;
    let model = first.model.as_deref().unwrap_or("another GPU");
    Some((
        format!(
            "its targets stopped reporting and {} {model} device(s) appeared beside them: the work moved there (their cost is the cost after)",
            m.seen
        ),
        m,
    ))
}

/// What the telemetry shows happened to the targets: gone, idle share halved, fewer hours a
/// day.
fn detect(before: &Measure, after: &Measure, w: &Windows<'_>) -> Option<String> {
    if after.seen == 0 && w.after.is_some() && before.seen > 0 {
        return Some(format!(
            "no telemetry from its {} target(s) since then",
            before.seen
        ));
    }
    if before.gpu_hours <= 0.0 || after.gpu_hours <= 0.0 {
        return None;
    }
    let (s0, s1) = (
        100.0 * before.idle_hours / before.gpu_hours,
        100.0 * after.idle_hours / after.gpu_hours,
    );
    if s0 >= 10.0 && s1 <= s0 / 2.0 {
        return Some(format!("idle share fell from {s0:.0} % to {s1:.0} %"));
    }
    let (h0, h1) = (
        before.gpu_hours / w.before_hours,
        after.gpu_hours / w.after_hours,
    );
    (h0 > 0.0 && h1 <= 0.8 * h0).then(|| {
        format!(
            "its GPUs ran {:.0} % fewer hours per day",
            100.0 * (1.0 - h1 / h0)
        )
    })
}

/// The outcome of `a` measured over `w`.
#[must_use]
pub fn measure(a: LoggedAction, w: &Windows<'_>) -> ActionOutcome {
    let targets: BTreeSet<&str> = a.targets.iter().map(String::as_str).collect();
    let is_target = |d: &DeviceRow| targets.contains(d.id.as_str());
    let before = Measure::of(w.before, is_target);
    let rest_before = Measure::of(w.before, |d| !is_target(d));
    let after = w
        .after
        .map(|r| Measure::of(r, is_target))
        .unwrap_or_default();
    let rest_after = w
        .after
        .map(|r| Measure::of(r, |d| !is_target(d)))
        .unwrap_or_default();
    let before_m = before.monthly(w.before_hours);
    let after_m = if after.seen == 0 && w.after_hours > 0.0 && before_m.is_some() {
        Some(0.0)
    } else {
        after.monthly(w.after_hours)
    };
    // Targets gone, and devices of another model beside them: the work moved, and what it
    // costs there is the cost after.
    let moved = (after.seen == 0 && before.seen > 0)
        .then(|| moved(w, &targets))
        .flatten();
    let after_m = match &moved {
        Some((_, m)) => m.monthly(w.after_hours),
        None => after_m,
    };
    let detected = match &moved {
        Some((why, _)) => Some(why.clone()),
        None => detect(&before, &after, w),
    };
    let mut other = Vec::new();
    if let (Some(b), Some(c)) = (
        rest_before.monthly(w.before_hours),
        rest_after.monthly(w.after_hours),
    ) && b > 0.0
    {
        other.push(format!(
            "the rest of the fleet's cost per month changed by {:+.0} % over the same windows",
            100.0 * (c - b) / b
        ));
    }
    let realized = match (before_m, after_m) {
        _ if a.state == "rejected" => None,
        _ if w.after_hours < 24.0 => None,
        (Some(b), Some(c)) => Some(b - c),
        _ => None,
    };
    let outcome = if a.state == "rejected" {
        "rejected"
    } else if w.after_hours < 24.0 {
        "too_early"
    } else if before_m.is_none() {
        "unpriced"
    } else if after.seen == 0 && moved.is_none() {
        "targets_vanished"
    } else {
        let r = realized.unwrap_or(0.0);
        if r >= 0.75 * a.predicted_monthly_usd {
            "realized"
        } else if r >= 0.25 * a.predicted_monthly_usd {
            "partly_realized"
        } else {
            "not_realized"
        }
    };
    let confidence = match outcome {
        "targets_vanished" => "low",
        _ if moved.is_some() => "medium",
        _ if w.after_hours >= 7.0 * 24.0 => "high",
        _ if w.after_hours >= 24.0 => "medium",
        _ => "low",
    };
    if outcome == "targets_vanished" {
        other.push(
            "a target that stopped reporting may have been released or may have lost its collector: confirm on the bill (gpuwise reconcile)".to_owned(),
        );
    }
    ActionOutcome {
        predicted_monthly_usd: a.predicted_monthly_usd,
        action: a,
        before_monthly_usd: before_m,
        after_monthly_usd: after_m,
        realized_monthly_usd: realized,
        outcome,
        confidence,
        detected,
        other_changes: other,
        after_hours: w.after_hours,
    }
}

/// A stable id for an action: the same advice on the same window logged twice is one action.
/// (FNV-1a over kind, targets and window: a content key, not a secret.)
#[must_use]
pub fn action_id(kind: &str, targets: &[String], based_on: (i64, i64)) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |b: &[u8]| {
        for x in b {
            h ^= u64::from(*x);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0100_0000_01b3);
    };
    eat(kind.as_bytes());
    for t in targets {
        eat(t.as_bytes());
    }
    eat(&based_on.0.to_le_bytes());
    eat(&based_on.1.to_le_bytes());
    format!("{:012x}", h >> 16)
}

/// The journal's entries (line, object) folded into actions with their latest marks, in the
/// order they were recommended. A mark for an unknown action, or an entry without what it
/// needs, is an error naming its line.
///
/// # Errors
/// A line that is not a recommendation or a mark this build knows.
pub fn fold_journal(entries: &[(usize, serde_json::Value)]) -> Result<Vec<LoggedAction>, String> {
    let mut out: Vec<LoggedAction> = Vec::new();
    for (line, e) in entries {
        let field = |k: &str| e.get(k).ok_or_else(|| format!("line {line}: no `{k}`"));
        let text = |k: &str| -> Result<String, String> {
            field(k)?
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("line {line}: `{k}` is not text"))
        };
        let int = |k: &str| -> Result<i64, String> {
            field(k)?
                .as_i64()
                .ok_or_else(|| format!("line {line}: `{k}` is not an integer"))
        };
        let id = text("id")?;
        match text("type")?.as_str() {
            "recommended" => {
                if out.iter().any(|a| a.id == id) {
                    continue;
                }
                let list = |k: &str| -> Result<Vec<String>, String> {
                    field(k)?
                        .as_array()
                        .and_then(|v| v.iter().map(|x| x.as_str().map(str::to_owned)).collect())
                        .ok_or_else(|| format!("line {line}: `{k}` is not a list of text"))
                };
                let based = field("based_on")?
                    .as_array()
                    .and_then(|v| Some((v.first()?.as_i64()?, v.get(1)?.as_i64()?)))
                    .ok_or_else(|| format!("line {line}: `based_on` is not [start_ms, end_ms]"))?;
                out.push(LoggedAction {
                    id,
                    recommended_ms: int("recommended_ms")?,
                    kind: text("kind")?,
                    targets: list("targets")?,
                    target_names: list("target_names")?,
                    predicted_monthly_usd: field("predicted_monthly_usd")?.as_f64().ok_or_else(
                        || format!("line {line}: `predicted_monthly_usd` is not a number"),
                    )?,
                    based_on: based,
                    state: "open".to_owned(),
                    done_ms: None,
                    note: None,
                });
            }
            mark @ ("done" | "rejected" | "reopened") => {
                let a = out.iter_mut().find(|a| a.id == id).ok_or_else(|| {
                    format!("line {line}: a mark for action {id}, which no line before recommends")
                })?;
                a.state = if mark == "reopened" { "open" } else { mark }.to_owned();
                a.done_ms = (mark == "done").then(|| int("done_ms")).transpose()?;
                a.note = e
                    .get(if mark == "rejected" { "reason" } else { "note" })
                    .and_then(|v| v.as_str())
                    .map(str::to_owned);
            }
            other => return Err(format!("line {line}: an entry of type `{other}`")),
        }
    }
    Ok(out)
}
