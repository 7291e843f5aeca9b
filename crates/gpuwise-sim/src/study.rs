//! # A spot study: traces × policies × starts, and the checkpoint interval
//!
//! [`study`] runs every policy from the same seeded starts on every trace and reports each
//! policy per trace and pooled (`gpuwise.spot/v1`). The checkpoint interval is judged two ways:
//! Young/Daly's first-order optimum `√(2 δ M)` from the checkpoint cost `δ` and the mean time
//! between preemptions `M` measured on the traces, against the interval that is best on the
//! traces themselves, found by sweeping a log-spaced grid with the spot-only policy (the one
//! checkpoints matter most to). `--checkpoint-interval auto` runs the policies at the swept best.

use serde::Serialize;

use crate::montecarlo::{
    PolicyKind, PolicySummary, Prices, SimError, run_all, run_zones, starts, summarize,
};
use crate::spot::{Job, Run};
use crate::trace::Trace;

/// How the checkpoint interval is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Checkpoint {
    /// The paper's model: a preemption loses only the changeover.
    None,
    /// Every this many seconds of progress.
    Every(f64),
    /// The best interval on the traces (swept).
    Auto,
}

/// What to study.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The job (its checkpoint interval is set from `checkpoint`).
    pub job: Job,
    /// How the checkpoint interval is chosen.
    pub checkpoint: Checkpoint,
    /// Policies, in report order.
    pub policies: Vec<PolicyKind>,
    /// Starts per trace.
    pub starts: usize,
    /// Seed of the starts (trace `i` uses `seed + i`).
    pub seed: u64,
    /// Prices per node-hour, when known.
    pub prices: Option<Prices>,
    /// Zone groups for `multi_zone`: indices into the traces.
    pub zones: Vec<Vec<usize>>,
}

/// The job as reported.
#[derive(Clone, Debug, Serialize)]
pub struct JobOut {
    /// Hours of progress.
    pub work_hours: f64,
    /// Nodes.
    pub nodes: u32,
    /// Deadline (`null`: none).
    pub deadline_hours: Option<f64>,
    /// Changeover.
    pub changeover_hours: f64,
    /// Checkpoint interval used (`null`: the paper's model, nothing lost but the changeover).
    pub checkpoint_interval_minutes: Option<f64>,
    /// Checkpoint cost.
    pub checkpoint_cost_minutes: f64,
}

/// One trace.
#[derive(Clone, Debug, Serialize)]
pub struct TraceOut {
    /// File.
    pub file: String,
    /// Seconds per tick.
    pub gap_seconds: f64,
    /// Ticks.
    pub ticks: usize,
    /// Share of ticks with capacity for the job's nodes.
    pub availability_mean: f64,
    /// Preemptions per hour of capacity.
    pub preemptions_per_hour: f64,
    /// Each policy on this trace alone.
    pub policies: Vec<PolicySummary>,
    /// The changeover and work (seconds) the offline optimum solved for on this trace, when
    /// they are not the job's: rounded down to whole ticks where exact units would take too
    /// many states (`crate::omniscient::relaxed`); still a bound below every policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub omniscient_relaxed: Option<(f64, f64)>,
}

/// One point of the checkpoint sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// Interval.
    pub minutes: f64,
    /// Mean cost (`null` without prices).
    pub cost_usd_mean: Option<f64>,
    /// Mean completion (finished runs).
    pub completion_hours_mean: Option<f64>,
    /// Mean progress lost.
    pub lost_work_hours_mean: f64,
}

/// The checkpoint interval, two ways.
#[derive(Clone, Debug, Serialize)]
pub struct CheckpointOut {
    /// `√(2 δ M)`, minutes (`null` without preemptions or a checkpoint cost).
    pub young_daly_minutes: Option<f64>,
    /// The swept interval with the lowest mean cost (or completion time without prices).
    pub best_minutes_on_trace: Option<f64>,
    /// Mean time between preemptions on the traces (pooled), hours.
    pub mean_hours_between_preemptions: Option<f64>,
    /// The sweep (spot-only policy).
    pub sweep: Vec<SweepPoint>,
}

/// One zone group (`multi_zone`).
#[derive(Clone, Debug, Serialize)]
pub struct ZoneGroupOut {
    /// The traces of the group.
    pub files: Vec<String>,
    /// Share of ticks with capacity in at least one zone.
    pub availability_mean: f64,
    /// `multi_zone` on this group.
    pub policy: PolicySummary,
}

/// `gpuwise.spot/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct Study {
    /// Schema.
    pub schema: &'static str,
    /// The job.
    pub job: JobOut,
    /// Prices per node-hour.
    pub prices: Option<Prices>,
    /// Starts per trace.
    pub starts_per_trace: usize,
    /// Seed.
    pub seed: u64,
    /// Per trace.
    pub traces: Vec<TraceOut>,
    /// Pooled over all traces (`multi_zone`: over all zone groups).
    pub policies: Vec<PolicySummary>,
    /// Zone groups (`--zones`), with `multi_zone` on each.
    pub zones: Vec<ZoneGroupOut>,
    /// The checkpoint interval.
    pub checkpoint: CheckpointOut,
}

/// A trace's figures, its policies to come.
fn trace_out(t: &Trace, plan: &Plan, job: &Job) -> TraceOut {
    TraceOut {
        file: t.name.clone(),
        gap_seconds: t.gap_s,
        ticks: t.ticks(),
        availability_mean: t.availability(job.nodes),
        preemptions_per_hour: t.preemptions_per_hour(job.nodes),
        policies: Vec::new(),
        omniscient_relaxed: plan
            .policies
            .contains(&PolicyKind::Omniscient)
            .then(|| crate::omniscient::relaxed(job, t.gap_s))
            .flatten(),
    }
}

/// Log-spaced intervals from 5 minutes to 8 hours.
fn grid() -> Vec<f64> {
    let (lo, hi, n) = (5.0_f64, 480.0_f64, 24);
    (0..n)
        .map(|i| {
            #[allow(clippy::cast_precision_loss)]
            let f = i as f64 / (n - 1) as f64;
            (lo.ln() + f * (hi.ln() - lo.ln())).exp()
        })
        .collect()
}

fn mean_of(runs: &[Run], f: impl Fn(&Run) -> Option<f64>) -> Option<f64> {
    let v: Vec<f64> = runs.iter().filter_map(f).collect();
    #[allow(clippy::cast_precision_loss)]
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn sweep(plan: &Plan, sets: &[(&Trace, Vec<usize>)]) -> Vec<SweepPoint> {
    if plan.job.checkpoint_cost_s <= 0.0 && plan.checkpoint != Checkpoint::Auto {
        return Vec::new();
    }
    grid()
        .into_iter()
        .map(|minutes| {
            let job = Job {
                checkpoint_interval_s: minutes * 60.0,
                ..plan.job
            };
            let runs = run_all(PolicyKind::SpotOnly, &job, sets, plan.prices);
            #[allow(clippy::cast_precision_loss)]
            let lost = runs.iter().map(|r| r.lost_work_s).sum::<f64>() / runs.len().max(1) as f64;
            SweepPoint {
                minutes,
                cost_usd_mean: plan.prices.and_then(|p| {
                    mean_of(&runs, |r| {
                        Some(
                            (r.spot_billed_s * p.spot_usd_per_hour
                                + r.on_demand_billed_s * p.on_demand_usd_per_hour)
                                / 3600.0,
                        )
                    })
                }),
                completion_hours_mean: mean_of(&runs, |r| r.completion_s.map(|c| c / 3600.0)),
                lost_work_hours_mean: lost / 3600.0,
            }
        })
        .collect()
}

fn checkpoint(plan: &Plan, traces: &[Trace], sets: &[(&Trace, Vec<usize>)]) -> CheckpointOut {
    let (falls, up_hours) = traces.iter().fold((0.0, 0.0), |(f, u), t| {
        let up = t.availability(plan.job.nodes) * t.hours();
        (f + t.preemptions_per_hour(plan.job.nodes) * up, u + up)
    });
    let mtbp = (falls > 0.0).then(|| up_hours / falls);
    let young = mtbp
        .filter(|_| plan.job.checkpoint_cost_s > 0.0)
        .map(|m| (2.0 * plan.job.checkpoint_cost_s / 3600.0 * m).sqrt() * 60.0);
    let points = sweep(plan, sets);
    let key = |p: &SweepPoint| p.cost_usd_mean.or(p.completion_hours_mean);
    let best = points
        .iter()
        .filter(|p| key(p).is_some())
        .min_by(|a, b| {
            key(a)
                .unwrap_or(f64::MAX)
                .total_cmp(&key(b).unwrap_or(f64::MAX))
        })
        .map(|p| p.minutes);
    CheckpointOut {
        young_daly_minutes: young,
        best_minutes_on_trace: best,
        mean_hours_between_preemptions: mtbp,
        sweep: points,
    }
}

/// `multi_zone` on each zone group (starts seeded apart from the traces'), and pooled.
fn zone_groups(
    traces: &[Trace],
    plan: &Plan,
    job: &Job,
) -> Result<(Vec<ZoneGroupOut>, Option<PolicySummary>), SimError> {
    if !plan.policies.contains(&PolicyKind::MultiZone) {
        return Ok((Vec::new(), None));
    }
    let mut out = Vec::new();
    let mut all = Vec::new();
    for (i, g) in plan.zones.iter().enumerate() {
        let group: Vec<&Trace> = g.iter().map(|&k| &traces[k]).collect();
        let ticks = group.iter().map(|t| t.ticks()).min().unwrap_or(0);
        let shortest = group
            .iter()
            .min_by_key(|t| t.ticks())
            .map_or_else(Trace::default, |t| Trace {
                available: t.available[..ticks].to_vec(),
                ..(*t).clone()
            });
        let seed = plan.seed.wrapping_add(1_000_003).wrapping_add(i as u64);
        let s = starts(&shortest, job, plan.starts, seed)?;
        let runs = run_zones(job, &group, &s);
        #[allow(clippy::cast_precision_loss)]
        let any = (0..ticks)
            .filter(|&k| group.iter().any(|t| t.available[k] >= job.nodes))
            .count() as f64
            / ticks.max(1) as f64;
        out.push(ZoneGroupOut {
            files: group.iter().map(|t| t.name.clone()).collect(),
            availability_mean: any,
            policy: summarize(PolicyKind::MultiZone, job, &runs, plan.prices),
        });
        all.extend(runs);
    }
    let pooled = summarize(PolicyKind::MultiZone, job, &all, plan.prices);
    Ok((out, Some(pooled)))
}

/// Run the study.
///
/// # Errors
/// [`SimError`] for a bad job or a trace shorter than the job's window.
pub fn study(traces: &[Trace], plan: &Plan) -> Result<Study, SimError> {
    plan.job.check()?;
    if plan.policies.contains(&PolicyKind::MultiZone) && plan.zones.is_empty() {
        return Err(SimError::BadJob(
            "the multi_zone policy needs zone groups (--zones A.json,B.json)".into(),
        ));
    }
    for g in &plan.zones {
        let gaps: Vec<f64> = g
            .iter()
            .filter_map(|&i| traces.get(i))
            .map(|t| t.gap_s)
            .collect();
        if gaps.len() != g.len() || gaps.windows(2).any(|w| (w[0] - w[1]).abs() > 1e-9) {
            return Err(SimError::BadJob(
                "the traces of a zone group must exist and share one tick length".into(),
            ));
        }
    }
    if plan.job.deadline_s.is_none() && plan.policies.contains(&PolicyKind::Omniscient) {
        return Err(SimError::BadJob(
            "the omniscient policy needs --deadline-hours (without one, waiting for spot is free)"
                .into(),
        ));
    }
    let sets: Vec<(&Trace, Vec<usize>)> = traces
        .iter()
        .zip(0u64..)
        .map(|(t, i)| {
            Ok((
                t,
                starts(t, &plan.job, plan.starts, plan.seed.wrapping_add(i))?,
            ))
        })
        .collect::<Result<_, SimError>>()?;
    let ck = checkpoint(plan, traces, &sets);
    let interval = match plan.checkpoint {
        Checkpoint::None => 0.0,
        Checkpoint::Every(s) => s,
        Checkpoint::Auto => ck.best_minutes_on_trace.map_or(0.0, |m| m * 60.0),
    };
    let job = Job {
        checkpoint_interval_s: interval,
        ..plan.job
    };
    let mut per_trace: Vec<TraceOut> = traces.iter().map(|t| trace_out(t, plan, &job)).collect();
    let mut pooled = Vec::new();
    let (zones, zone_summary) = zone_groups(traces, plan, &job)?;
    for &p in &plan.policies {
        if p == PolicyKind::MultiZone {
            if let Some(z) = zone_summary.clone() {
                pooled.push(z);
            }
            continue;
        }
        // The on-demand baseline is never preempted: the interval tuned for spot
        // (`--checkpoint-interval auto`) would bill it for checkpoints it has no use for
        // ($159 instead of $147.49 for 48 h at $3.06), inflating every saving shown.
        let job = if p == PolicyKind::OnDemand && plan.checkpoint == Checkpoint::Auto {
            Job {
                checkpoint_interval_s: 0.0,
                ..job
            }
        } else {
            job
        };
        let mut all = Vec::new();
        for (i, set) in sets.iter().enumerate() {
            let runs = run_all(p, &job, std::slice::from_ref(set), plan.prices);
            per_trace[i]
                .policies
                .push(summarize(p, &job, &runs, plan.prices));
            all.extend(runs);
        }
        pooled.push(summarize(p, &job, &all, plan.prices));
    }
    Ok(Study {
        schema: crate::montecarlo::SCHEMA,
        job: JobOut {
            work_hours: job.work_s / 3600.0,
            nodes: job.nodes,
            deadline_hours: job.deadline_s.map(|d| d / 3600.0),
            changeover_hours: job.changeover_s / 3600.0,
            checkpoint_interval_minutes: (interval > 0.0).then_some(interval / 60.0),
            checkpoint_cost_minutes: job.checkpoint_cost_s / 60.0,
        },
        prices: plan.prices,
        starts_per_trace: plan.starts,
        seed: plan.seed,
        traces: per_trace,
        policies: pooled,
        zones,
        checkpoint: ck,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> Trace {
        // Up 9 ticks, down 1, repeated: a preemption every 9 h of capacity.
        let available = (0..400).map(|i| u32::from(i % 10 != 9)).collect();
        Trace {
            name: "t".into(),
            gap_s: 3600.0,
            available,
        }
    }

    #[test]
    fn study_pools_traces_and_the_checkpoint_is_judged_both_ways() {
        let plan = Plan {
            job: Job {
                work_s: 20.0 * 3600.0,
                deadline_s: Some(40.0 * 3600.0),
                changeover_s: 0.1 * 3600.0,
                checkpoint_interval_s: 0.0,
                checkpoint_cost_s: 0.05 * 3600.0,
                nodes: 1,
            },
            checkpoint: Checkpoint::Auto,
            policies: vec![PolicyKind::OnDemand, PolicyKind::UniformProgress],
            starts: 20,
            seed: 3,
            prices: Some(Prices {
                spot_usd_per_hour: 1.0,
                on_demand_usd_per_hour: 3.0,
            }),
            zones: Vec::new(),
        };
        let s = study(&[trace(), trace()], &plan).expect("runs");
        assert_eq!(s.policies.len(), 2);
        assert_eq!(s.policies[0].runs, 40);
        assert_eq!(s.traces[0].policies[1].runs, 20);
        // M = 9 h, δ = 3 min: √(2 × 0.05 × 9) h = 0.949 h = 56.9 min.
        let yd = s.checkpoint.young_daly_minutes.expect("young/daly");
        assert!(
            (yd - (2.0_f64 * 0.05 * 9.0).sqrt() * 60.0).abs() < 1e-9,
            "{yd}"
        );
        assert!(s.checkpoint.best_minutes_on_trace.is_some());
        assert_eq!(s.checkpoint.sweep.len(), 24);
        // On demand costs 3 × (20 h + the changeover): never preempted, it writes none of the
        // checkpoints the interval was tuned for on spot (it was billed for them).
        assert!(
            s.job.checkpoint_interval_minutes.is_some(),
            "auto picked one"
        );
        let od = s.policies[0].cost_usd_mean.expect("priced");
        assert!((od - 3.0 * 20.1).abs() < 1e-6, "{od}");
    }
}
