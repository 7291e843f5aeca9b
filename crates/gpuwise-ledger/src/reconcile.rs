//! # Does the bill match what ran?
//!
//! Joins a folded [`Bill`] to the hosts telemetry [`Observed`]. A resource meets a host when its
//! join value equals the host name (ignoring case), or, failing that, when their first DNS
//! labels are equal and that label names one host only (`ip-10-0-1-7` meets
//! `ip-10-0-1-7.ec2.internal`). Then, over the bill's GPU charges:
//!
//! - **unmonitored**: billed resources no host matches;
//! - **unbilled**: hosts that reported inside the bill's window without a bill row;
//! - **billed, not reporting**: matched resources whose billed GPU-hours exceed the GPU-hours
//!   their host reported *within the billed periods* by more than the larger of
//!   [`Thresholds::gap_hours`] and [`Thresholds::gap_share_pct`] of the billed hours; the gap
//!   is priced at the resource's own billed $ per GPU-hour;
//! - effective and list $ per GPU-hour, per instance type, beside the catalog's on-demand price;
//! - cost by team from the bill's tag, with the idle cost of each team's monitored resources
//!   (billed cost × the idle share of their reported GPU-hours).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bill::{Bill, Resource};
use crate::observed::Observed;

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.reconcile/v1";

/// The name of the bucket for resources without the team tag.
pub const UNTAGGED: &str = "(untagged)";

/// When a billed-minus-observed gap is worth reporting.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// Absolute, in GPU-hours (default 3).
    pub gap_hours: f64,
    /// Relative to the billed GPU-hours, in % (default 10).
    pub gap_share_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            gap_hours: 3.0,
            gap_share_pct: 10.0,
        }
    }
}

/// `gpuwise.reconcile/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct Reconciliation {
    /// Schema.
    pub schema: &'static str,
    /// Bill window of the GPU charges (RFC 3339), `null` without any.
    pub window: Option<[String; 2]>,
    /// How bill rows met hosts (`name`, `id`, `tag:KEY`).
    pub join: String,
    /// The tag teams are read from.
    pub team_tag: String,
    /// Thresholds used.
    pub settings: Thresholds,
    /// Σ billed cost of GPU compute rows.
    pub billed_cost_usd: f64,
    /// Σ billed GPU-hours.
    pub billed_gpu_hours: f64,
    /// GPU-hours telemetry saw inside the bill's window (all hosts).
    pub observed_gpu_hours: f64,
    /// Σ effective cost / billed GPU-hours (`null`: the bill has no effective cost).
    pub effective_usd_per_gpu_hour: Option<f64>,
    /// Σ list cost / billed GPU-hours (`null`: the bill has no list cost).
    pub list_usd_per_gpu_hour: Option<f64>,
    /// Billed GPU-hours priced as spot (`PricingCategory = Dynamic`), in %.
    pub spot_share_pct: Option<f64>,
    /// Per instance type.
    pub instance_types: Vec<TypeRow>,
    /// Billed resources matched to a host.
    pub matched: Vec<Matched>,
    /// Billed resources without telemetry.
    pub unmonitored: Vec<Unmonitored>,
    /// Hosts without bill rows.
    pub unbilled: Vec<Unbilled>,
    /// Hosts billed for hours they did not report.
    pub billed_not_reporting: Vec<Gap>,
    /// Cost by team.
    pub teams: Vec<TeamRow>,
    /// What happened to the bill's rows.
    pub rows: RowCounts,
    /// Things to know.
    pub warnings: Vec<String>,
}

/// One instance type.
#[derive(Clone, Debug, Serialize)]
pub struct TypeRow {
    /// Instance type.
    pub instance_type: String,
    /// GPUs per instance and where that came from.
    pub gpus_per_instance: f64,
    /// `bill` or `catalog`.
    pub gpus_from: &'static str,
    /// Resources.
    pub resources: usize,
    /// GPU-hours.
    pub billed_gpu_hours: f64,
    /// Billed.
    pub billed_cost_usd: f64,
    /// Effective $ per GPU-hour.
    pub effective_usd_per_gpu_hour: Option<f64>,
    /// List $ per GPU-hour (from the bill).
    pub list_usd_per_gpu_hour: Option<f64>,
    /// The catalog's on-demand $ per GPU-hour in the resources' region (GPU-hour weighted
    /// over resources the catalog prices).
    pub catalog_usd_per_gpu_hour: Option<f64>,
}

/// A resource with telemetry.
#[derive(Clone, Debug, Serialize)]
pub struct Matched {
    /// `ResourceId`.
    pub resource_id: Option<String>,
    /// `ResourceName`.
    pub resource_name: Option<String>,
    /// Host.
    pub host: String,
    /// Instance type.
    pub instance_type: String,
    /// Team.
    pub team: String,
    /// Billed GPU-hours.
    pub billed_gpu_hours: f64,
    /// Reported within the billed periods.
    pub observed_gpu_hours: f64,
    /// Billed.
    pub billed_cost_usd: f64,
    /// Idle share of the reported GPU-hours (`null`: unknown).
    pub idle_share_pct: Option<f64>,
}

/// A billed resource without telemetry.
#[derive(Clone, Debug, Serialize)]
pub struct Unmonitored {
    /// `ResourceId`.
    pub resource_id: Option<String>,
    /// `ResourceName`.
    pub resource_name: Option<String>,
    /// Instance type.
    pub instance_type: String,
    /// Team.
    pub team: String,
    /// Billed GPU-hours.
    pub billed_gpu_hours: f64,
    /// Billed.
    pub billed_cost_usd: f64,
}

/// A host without bill rows.
#[derive(Clone, Debug, Serialize)]
pub struct Unbilled {
    /// Host.
    pub host: String,
    /// GPU-hours reported inside the bill's window.
    pub observed_gpu_hours: f64,
}

/// Billed hours the host did not report.
#[derive(Clone, Debug, Serialize)]
pub struct Gap {
    /// `ResourceName`.
    pub resource_name: Option<String>,
    /// `ResourceId`.
    pub resource_id: Option<String>,
    /// Host.
    pub host: String,
    /// Billed GPU-hours.
    pub billed_gpu_hours: f64,
    /// Reported within the billed periods.
    pub observed_gpu_hours: f64,
    /// Billed − observed.
    pub gap_hours: f64,
    /// Gap × the resource's billed $ per GPU-hour.
    pub gap_cost_usd: f64,
}

/// One team.
#[derive(Clone, Debug, Serialize)]
pub struct TeamRow {
    /// Tag value, or `(untagged)`.
    pub team: String,
    /// Billed.
    pub billed_cost_usd: f64,
    /// Billed GPU-hours.
    pub billed_gpu_hours: f64,
    /// Idle cost of the team's monitored resources (`null`: none monitored).
    pub idle_cost_usd: Option<f64>,
    /// Billed cost of the team's unmonitored resources (their idle cost is unknown).
    pub unmonitored_cost_usd: f64,
}

/// Row accounting.
#[derive(Clone, Debug, Serialize)]
pub struct RowCounts {
    /// Read.
    pub read: u64,
    /// GPU compute.
    pub gpu_compute: u64,
    /// Usage rows that are not GPU compute.
    pub not_gpu_compute: u64,
    /// Instance types those rows name (not GPU machines in the catalog), with row counts.
    pub not_gpu_instance_types: BTreeMap<String, u64>,
    /// Tax, credits, purchases, adjustments.
    pub not_usage: u64,
    /// Identical rows dropped.
    pub duplicates_dropped: u64,
    /// GPU charges overlapping another of the same resource (kept).
    pub overlapping_charges: u64,
    /// Skipped, by reason: count and first example.
    pub skipped: BTreeMap<String, Skipped>,
}

/// One skip reason.
#[derive(Clone, Debug, Serialize)]
pub struct Skipped {
    /// Rows.
    pub count: u64,
    /// The first one.
    pub example: String,
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// Hosts by name, and by first DNS label where that names one host.
struct HostIndex<'a> {
    exact: BTreeMap<String, &'a str>,
    label: BTreeMap<String, Option<&'a str>>,
}

impl<'a> HostIndex<'a> {
    fn new(observed: &'a Observed) -> Self {
        let mut exact = BTreeMap::new();
        let mut label: BTreeMap<String, Option<&str>> = BTreeMap::new();
        for h in observed.hosts.keys() {
            let lower = h.to_ascii_lowercase();
            let first = lower.split('.').next().unwrap_or(&lower).to_owned();
            label
                .entry(first)
                .and_modify(|e| *e = None)
                .or_insert(Some(h.as_str()));
            exact.insert(lower, h.as_str());
        }
        Self { exact, label }
    }

    fn find(&self, key: &str) -> Option<&'a str> {
        let lower = key.to_ascii_lowercase();
        if let Some(h) = self.exact.get(&lower) {
            return Some(h);
        }
        let first = lower.split('.').next().unwrap_or(&lower);
        self.label.get(first).copied().flatten()
    }
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den > 0.0).then(|| num / den)
}

/// Σ over a resource's charges of what its host reported within them.
fn observed_in(r: &Resource, host: &str, observed: &Observed) -> crate::observed::HostHour {
    let mut out = crate::observed::HostHour::default();
    // Overlapping charges would count a reported hour twice: walk the union of periods.
    let mut reach = i64::MIN;
    for c in &r.charges {
        let start = c.start_ms.max(reach);
        if c.end_ms > start {
            let w = observed.within(host, start, c.end_ms);
            out.gpu_hours += w.gpu_hours;
            out.idle_gpu_hours += w.idle_gpu_hours;
            out.weighed_gpu_hours += w.weighed_gpu_hours;
        }
        reach = reach.max(c.end_ms);
    }
    out
}

/// Everything per resource, in one pass.
#[derive(Default)]
struct Fold {
    matched: Vec<Matched>,
    unmonitored: Vec<Unmonitored>,
    gaps: Vec<Gap>,
    teams: BTreeMap<String, TeamRow>,
    used_hosts: BTreeMap<String, ()>,
}

fn fold(bill: &Bill, observed: &Observed, th: Thresholds) -> Fold {
    let index = HostIndex::new(observed);
    let mut f = Fold::default();
    for (key, r) in &bill.resources {
        let team = r.team.clone().unwrap_or_else(|| UNTAGGED.to_owned());
        let billed_h = r.gpu_hours();
        let billed = r.billed();
        let t = f.teams.entry(team.clone()).or_insert_with(|| TeamRow {
            team: team.clone(),
            billed_cost_usd: 0.0,
            billed_gpu_hours: 0.0,
            idle_cost_usd: None,
            unmonitored_cost_usd: 0.0,
        });
        t.billed_cost_usd += billed;
        t.billed_gpu_hours += billed_h;
        let Some(host) = index.find(key) else {
            t.unmonitored_cost_usd += billed;
            f.unmonitored.push(Unmonitored {
                resource_id: r.resource_id.clone(),
                resource_name: r.resource_name.clone(),
                instance_type: r.instance_type.clone(),
                team,
                billed_gpu_hours: billed_h,
                billed_cost_usd: billed,
            });
            continue;
        };
        f.used_hosts.insert(host.to_owned(), ());
        let seen = observed_in(r, host, observed);
        let idle_share = ratio(seen.idle_gpu_hours, seen.weighed_gpu_hours);
        if let Some(s) = idle_share {
            *t.idle_cost_usd.get_or_insert(0.0) += billed * s;
        }
        let gap = billed_h - seen.gpu_hours;
        if gap > th.gap_hours.max(billed_h * th.gap_share_pct / 100.0) {
            f.gaps.push(Gap {
                resource_name: r.resource_name.clone(),
                resource_id: r.resource_id.clone(),
                host: host.to_owned(),
                billed_gpu_hours: billed_h,
                observed_gpu_hours: seen.gpu_hours,
                gap_hours: gap,
                gap_cost_usd: ratio(billed, billed_h).map_or(0.0, |p| gap * p),
            });
        }
        f.matched.push(Matched {
            resource_id: r.resource_id.clone(),
            resource_name: r.resource_name.clone(),
            host: host.to_owned(),
            instance_type: r.instance_type.clone(),
            team,
            billed_gpu_hours: billed_h,
            observed_gpu_hours: seen.gpu_hours,
            billed_cost_usd: billed,
            idle_share_pct: idle_share.map(|s| s * 100.0),
        });
    }
    f
}

fn type_rows(bill: &Bill, catalog_prices: &BTreeMap<String, f64>) -> Vec<TypeRow> {
    #[derive(Default)]
    struct Acc {
        gpus: f64,
        from: &'static str,
        resources: usize,
        hours: f64,
        billed: f64,
        effective: Option<f64>,
        list: Option<f64>,
        catalog_num: f64,
        catalog_den: f64,
    }
    let mut by: BTreeMap<&str, Acc> = BTreeMap::new();
    for (key, r) in &bill.resources {
        let a = by.entry(r.instance_type.as_str()).or_default();
        a.resources += 1;
        a.from = r.gpus_from;
        for c in &r.charges {
            a.gpus = c.gpus;
            a.hours += c.gpu_hours();
            a.billed += c.billed();
            if let Some(e) = c.effective() {
                *a.effective.get_or_insert(0.0) += e;
            }
            if let Some(l) = c.list() {
                *a.list.get_or_insert(0.0) += l;
            }
        }
        if let Some(p) = catalog_prices.get(key) {
            a.catalog_num += p * r.gpu_hours();
            a.catalog_den += r.gpu_hours();
        }
    }
    by.into_iter()
        .map(|(t, a)| TypeRow {
            instance_type: t.to_owned(),
            gpus_per_instance: a.gpus,
            gpus_from: a.from,
            resources: a.resources,
            billed_gpu_hours: a.hours,
            billed_cost_usd: a.billed,
            effective_usd_per_gpu_hour: a.effective.and_then(|e| ratio(e, a.hours)),
            list_usd_per_gpu_hour: a.list.and_then(|l| ratio(l, a.hours)),
            catalog_usd_per_gpu_hour: ratio(a.catalog_num, a.catalog_den),
        })
        .collect()
}

/// Reconcile `bill` with `observed`. `catalog_prices` holds the catalog's on-demand $ per
/// GPU-hour for resources it prices ([`crate::bill::catalog_prices`]).
#[must_use]
pub fn reconcile(
    bill: &Bill,
    observed: &Observed,
    catalog_prices: &BTreeMap<String, f64>,
    join: &crate::bill::JoinKey,
    team_tag: &str,
    th: Thresholds,
) -> Reconciliation {
    let f = fold(bill, observed, th);
    let (start, end) = bill.window.unwrap_or((0, 0));
    let mut unbilled = Vec::new();
    let mut observed_total = 0.0;
    for host in observed.hosts.keys() {
        let seen = observed.within(host, start, end).gpu_hours;
        observed_total += seen;
        if seen > 0.0 && !f.used_hosts.contains_key(host) {
            unbilled.push(Unbilled {
                host: host.clone(),
                observed_gpu_hours: seen,
            });
        }
    }
    let charges = || bill.resources.values().flat_map(|r| r.charges.iter());
    // Folds from +0.0 (an empty `sum` of floats is −0.0, printed "-0.0").
    let billed_h = charges().fold(0.0, |a, c| a + c.gpu_hours());
    let sum_opt = |get: fn(&crate::bill::Charge) -> Option<f64>| {
        charges()
            .filter_map(get)
            .fold(None, |acc: Option<f64>, v| Some(acc.unwrap_or(0.0) + v))
    };
    let spot_h = charges()
        .filter(|c| c.spot)
        .fold(0.0, |a, c| a + c.gpu_hours());
    let mut warnings = Vec::new();
    if bill.window.is_some() && observed_total == 0.0 {
        warnings.push(
            "telemetry and bill do not overlap in time: every billed resource shows as not reporting"
                .to_owned(),
        );
    }
    let unjoined = bill.skips.by_reason.get("no_join_key").map_or(0, |e| e.0);
    let hint = bill
        .joinable_by
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(flag, n)| format!("; {n} of them carry a value for `--join {flag}`: try that"))
        .unwrap_or_default();
    if bill.window.is_none() && unjoined > 0 {
        warnings.push(format!(
            "the bill's {unjoined} GPU compute row(s) have no value to join on ({join}) and were \
             skipped{hint}"
        ));
    } else if bill.window.is_none() {
        warnings.push("the bill has no GPU compute rows".to_owned());
    } else if unjoined > 0 {
        warnings.push(format!(
            "{unjoined} GPU compute row(s) have no value to join on ({join}) and were skipped{hint}"
        ));
    }
    Reconciliation {
        schema: SCHEMA,
        window: bill.window.map(|(s, e)| [rfc3339(s), rfc3339(e)]),
        join: join.to_string(),
        team_tag: team_tag.to_owned(),
        settings: th,
        billed_cost_usd: charges().fold(0.0, |a, c| a + c.billed()),
        billed_gpu_hours: billed_h,
        observed_gpu_hours: observed_total,
        effective_usd_per_gpu_hour: sum_opt(crate::bill::Charge::effective)
            .and_then(|e| ratio(e, billed_h)),
        list_usd_per_gpu_hour: sum_opt(crate::bill::Charge::list).and_then(|l| ratio(l, billed_h)),
        spot_share_pct: ratio(spot_h * 100.0, billed_h),
        instance_types: type_rows(bill, catalog_prices),
        matched: f.matched,
        unmonitored: f.unmonitored,
        unbilled,
        billed_not_reporting: f.gaps,
        teams: f.teams.into_values().collect(),
        rows: RowCounts {
            read: bill.rows,
            gpu_compute: bill.gpu_rows,
            not_gpu_compute: bill.not_gpu_rows,
            not_gpu_instance_types: bill.not_gpu_types.clone(),
            not_usage: bill.not_usage_rows,
            duplicates_dropped: bill.duplicates,
            overlapping_charges: bill.overlapping,
            skipped: bill
                .skips
                .by_reason
                .iter()
                .map(|(k, (n, ex))| {
                    (
                        (*k).to_owned(),
                        Skipped {
                            count: *n,
                            example: ex.clone(),
                        },
                    )
                })
                .collect(),
        },
        warnings,
    }
}
