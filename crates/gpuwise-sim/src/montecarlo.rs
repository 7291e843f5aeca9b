//! # Many starts, many traces: per-policy distributions
//!
//! A job starts at random ticks of each trace (uniform over the ticks from which its window —
//! the deadline, or without one the work plus the trace's own slack — fits in the trace), seeded
//! so runs repeat. Each policy runs from the same starts. Summaries pool all traces' runs.

use serde::Serialize;

use crate::spot::{Greedy, Job, OnDemand, Policy, Run, SpotOnly, UniformProgress};
use crate::trace::Trace;

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.spot/v1";

/// The policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// On demand throughout.
    OnDemand,
    /// Spot only, waiting out preemptions.
    SpotOnly,
    /// Spot, on demand for good once the deadline requires.
    Greedy,
    /// Wu et al.'s Uniform Progress.
    UniformProgress,
    /// The offline optimum on the known trace: the lower bound (needs a deadline).
    Omniscient,
    /// Uniform Progress over a group of zones (`--zones`): spot in any zone with capacity.
    MultiZone,
}

impl PolicyKind {
    /// All, in report order.
    pub const ALL: [PolicyKind; 6] = [
        PolicyKind::OnDemand,
        PolicyKind::SpotOnly,
        PolicyKind::Greedy,
        PolicyKind::UniformProgress,
        PolicyKind::Omniscient,
        PolicyKind::MultiZone,
    ];

    /// The name on the command line and in JSON.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::OnDemand => "on_demand",
            PolicyKind::SpotOnly => "spot_only",
            PolicyKind::Greedy => "greedy",
            PolicyKind::UniformProgress => "uniform_progress",
            PolicyKind::Omniscient => "omniscient",
            PolicyKind::MultiZone => "multi_zone",
        }
    }

    /// The online policy (`None` for the offline optimum, which is not one).
    fn policy(self) -> Option<Box<dyn Policy>> {
        Some(match self {
            PolicyKind::OnDemand => Box::new(OnDemand),
            PolicyKind::SpotOnly => Box::new(SpotOnly),
            PolicyKind::Greedy => Box::new(Greedy::default()),
            PolicyKind::UniformProgress | PolicyKind::MultiZone => {
                Box::new(UniformProgress::default())
            }
            PolicyKind::Omniscient => return None,
        })
    }
}

/// A policy name that is not one.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a policy: use on_demand, spot_only, greedy, uniform_progress or omniscient")]
pub struct UnknownPolicy(String);

impl std::str::FromStr for PolicyKind {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PolicyKind::ALL
            .into_iter()
            .find(|p| p.name() == s.replace('-', "_"))
            .ok_or_else(|| UnknownPolicy(s.to_owned()))
    }
}

/// A run set that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace is shorter than the job's window.
    #[error(
        "{trace}: {trace_hours:.1} h of trace is shorter than the job's window of {window_hours:.1} h (the deadline, or the work without one)"
    )]
    TraceTooShort {
        /// Trace.
        trace: String,
        /// Its length.
        trace_hours: f64,
        /// The window.
        window_hours: f64,
    },
    /// A job setting out of range.
    #[error("{0}")]
    BadJob(String),
}

/// Prices per instance-hour.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prices {
    /// Spot $/h per node.
    pub spot_usd_per_hour: f64,
    /// On-demand $/h per node.
    pub on_demand_usd_per_hour: f64,
}

impl Job {
    /// Check the settings.
    ///
    /// # Errors
    /// [`SimError::BadJob`] naming the setting.
    pub fn check(&self) -> Result<(), SimError> {
        let bad = |m: &str| Err(SimError::BadJob(m.to_owned()));
        if !(self.work_s.is_finite() && self.work_s > 0.0) {
            return bad("--work-hours must be positive");
        }
        if let Some(d) = self.deadline_s
            && !(d.is_finite() && d >= self.work_s)
        {
            return bad("--deadline-hours must be at least --work-hours");
        }
        for (name, v) in [
            ("--changeover", self.changeover_s),
            ("--checkpoint-interval", self.checkpoint_interval_s),
            ("--checkpoint-cost", self.checkpoint_cost_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(SimError::BadJob(format!("{name} must not be negative")));
            }
        }
        if self.nodes == 0 {
            return bad("--nodes must be at least 1");
        }
        Ok(())
    }

    /// Ticks of `gap_s` the job's window spans: the deadline, or the work (plus changeover)
    /// when there is none.
    #[must_use]
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    pub fn window_ticks(&self, gap_s: f64) -> usize {
        let s = self.deadline_s.unwrap_or(self.work_s + self.changeover_s);
        (s / gap_s).ceil() as usize
    }
}

/// Random starts on `trace` for `job`, seeded.
///
/// # Errors
/// [`SimError::TraceTooShort`] when the window does not fit.
pub fn starts(trace: &Trace, job: &Job, n: usize, seed: u64) -> Result<Vec<usize>, SimError> {
    let window = job.window_ticks(trace.gap_s);
    if window > trace.ticks() {
        #[allow(clippy::cast_precision_loss)]
        return Err(SimError::TraceTooShort {
            trace: trace.name.clone(),
            trace_hours: trace.hours(),
            window_hours: window as f64 * trace.gap_s / 3600.0,
        });
    }
    let last = trace.ticks() - window;
    let mut rng = fastrand::Rng::with_seed(seed);
    Ok((0..n).map(|_| rng.usize(0..=last)).collect())
}

/// One policy's runs, pooled.
#[derive(Clone, Debug, Serialize)]
pub struct PolicySummary {
    /// Policy.
    pub policy: PolicyKind,
    /// Runs.
    pub runs: usize,
    /// Starts from which no schedule meets the deadline (the offline optimum only): counted in
    /// `runs` and as deadlines missed, left out of every mean and quantile below.
    pub infeasible_runs: usize,
    /// Runs that finished by the deadline (or at all, without one).
    pub deadline_met_share: f64,
    /// Means over the runs that were possible, hours.
    pub spot_work_hours_mean: f64,
    /// See above.
    pub on_demand_work_hours_mean: f64,
    /// Billed instance-hours (all nodes).
    pub spot_billed_hours_mean: f64,
    /// See above.
    pub on_demand_billed_hours_mean: f64,
    /// Cost, $ (`null` without prices).
    pub cost_usd_mean: Option<f64>,
    /// See above.
    pub cost_usd_p95: Option<f64>,
    /// Completion hours over finished runs (`null` when none finished).
    pub completion_hours_p50: Option<f64>,
    /// See above.
    pub completion_hours_p95: Option<f64>,
    /// Preemptions per run.
    pub preemptions_mean: f64,
    /// Progress lost per run, hours.
    pub lost_work_hours_mean: f64,
}

/// The `p`-quantile (nearest rank) of `v`, sorted here.
fn quantile(v: &mut [f64], p: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    Some(v[i])
}

impl PolicySummary {
    /// The policy's name.
    #[must_use]
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }
}

/// Summarise runs of one policy.
#[must_use]
#[allow(clippy::cast_precision_loss)]
pub fn summarize(
    policy: PolicyKind,
    job: &Job,
    runs: &[Run],
    prices: Option<Prices>,
) -> PolicySummary {
    let all = runs.len().max(1) as f64;
    let infeasible_runs = runs.iter().filter(|r| r.infeasible).count();
    let deadline_met_share = runs.iter().filter(|r| r.met(job)).count() as f64 / all;
    let runs: Vec<&Run> = runs.iter().filter(|r| !r.infeasible).collect();
    let n = runs.len().max(1) as f64;
    let mean = |f: fn(&Run) -> f64| runs.iter().map(|r| f(r)).sum::<f64>() / n / 3600.0;
    let mut costs: Vec<f64> = prices
        .map(|p| {
            runs.iter()
                .map(|r| {
                    (r.spot_billed_s * p.spot_usd_per_hour
                        + r.on_demand_billed_s * p.on_demand_usd_per_hour)
                        / 3600.0
                })
                .collect()
        })
        .unwrap_or_default();
    let mut done: Vec<f64> = runs
        .iter()
        .filter_map(|r| r.completion_s.map(|c| c / 3600.0))
        .collect();
    PolicySummary {
        policy,
        runs: runs.len() + infeasible_runs,
        infeasible_runs,
        deadline_met_share,
        spot_work_hours_mean: mean(|r| r.spot_work_s),
        on_demand_work_hours_mean: mean(|r| r.on_demand_work_s),
        spot_billed_hours_mean: mean(|r| r.spot_billed_s),
        on_demand_billed_hours_mean: mean(|r| r.on_demand_billed_s),
        cost_usd_mean: prices
            .filter(|_| !runs.is_empty())
            .map(|_| costs.iter().sum::<f64>() / n),
        cost_usd_p95: prices.and_then(|_| quantile(&mut costs, 0.95)),
        completion_hours_p50: quantile(&mut done, 0.5),
        completion_hours_p95: quantile(&mut done, 0.95),
        preemptions_mean: runs.iter().map(|r| f64::from(r.preemptions)).sum::<f64>() / n,
        lost_work_hours_mean: mean(|r| r.lost_work_s),
    }
}

/// Uniform Progress over a zone group from each start (the traces' ticks aligned).
#[must_use]
pub fn run_zones(job: &Job, zones: &[&Trace], starts: &[usize]) -> Vec<Run> {
    let data: Vec<&[u32]> = zones.iter().map(|t| t.available.as_slice()).collect();
    let gap = zones.first().map_or(1.0, |t| t.gap_s);
    starts
        .iter()
        .map(|&s| crate::spot::simulate_zones(job, &data, s, gap, &mut UniformProgress::default()))
        .collect()
}

/// Run `policy` from one start.
fn run_one(
    policy: PolicyKind,
    job: &Job,
    trace: &Trace,
    start: usize,
    prices: Option<Prices>,
) -> Run {
    match policy.policy() {
        Some(mut p) => crate::spot::simulate(job, &trace.available, start, trace.gap_s, p.as_mut()),
        None => crate::omniscient::optimum(
            job,
            &trace.available,
            start,
            trace.gap_s,
            prices.map(|p| (p.spot_usd_per_hour, p.on_demand_usd_per_hour)),
        )
        .unwrap_or(Run {
            infeasible: true,
            ..Run::default()
        }),
    }
}

/// Run `policy` from every start of every `(trace, starts)` pair, in that order. `prices` steer
/// the offline optimum (which minimises cost); the online policies do not look at them. Runs
/// are independent: they are split across the machine's cores (the offline optimum takes
/// milliseconds a run; the online policies microseconds).
#[must_use]
pub fn run_all(
    policy: PolicyKind,
    job: &Job,
    sets: &[(&Trace, Vec<usize>)],
    prices: Option<Prices>,
) -> Vec<Run> {
    let work: Vec<(&Trace, usize)> = sets
        .iter()
        .flat_map(|(t, starts)| starts.iter().map(move |&s| (*t, s)))
        .collect();
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    if policy != PolicyKind::Omniscient || threads < 2 || work.len() < 64 {
        return work
            .iter()
            .map(|&(t, s)| run_one(policy, job, t, s, prices))
            .collect();
    }
    let chunk = work.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = work
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|&(t, s)| run_one(policy, job, t, s, prices))
                        .collect::<Vec<Run>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_fit_the_window_and_repeat() {
        let t = Trace {
            name: "t".into(),
            gap_s: 3600.0,
            available: vec![1; 10],
        };
        let job = Job {
            work_s: 4.0 * 3600.0,
            deadline_s: Some(6.0 * 3600.0),
            changeover_s: 0.0,
            checkpoint_interval_s: 0.0,
            checkpoint_cost_s: 0.0,
            nodes: 1,
        };
        let a = starts(&t, &job, 50, 7).expect("fits");
        assert!(a.iter().all(|&s| s <= 4));
        assert_eq!(a, starts(&t, &job, 50, 7).expect("fits"));
        let short = Trace {
            available: vec![1; 5],
            ..t
        };
        assert!(starts(&short, &job, 1, 7).is_err());
        let mut v = vec![3.0, 1.0, 2.0, 4.0];
        assert_eq!(quantile(&mut v, 0.5), Some(2.0));
        assert_eq!(quantile(&mut v, 0.95), Some(4.0));
    }

    /// Starts from which no schedule meets the deadline are counted apart, not averaged in as
    /// $0 runs (which made the offline optimum, a lower bound, read too low).
    #[test]
    fn infeasible_starts_are_counted_apart() {
        let t = Trace {
            name: "t".into(),
            gap_s: 600.0,
            available: vec![1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1],
        };
        let prices = Some(Prices {
            spot_usd_per_hour: 1.0,
            on_demand_usd_per_hour: 3.0,
        });
        let job = |deadline_h: f64| Job {
            work_s: 3600.0,
            deadline_s: Some(deadline_h * 3600.0),
            changeover_s: 600.0,
            checkpoint_interval_s: 0.0,
            checkpoint_cost_s: 0.0,
            nodes: 1,
        };
        // A deadline of the work alone: the changeover makes every start infeasible.
        let tight = job(1.0);
        let runs = run_all(PolicyKind::Omniscient, &tight, &[(&t, vec![0, 1])], prices);
        let s = summarize(PolicyKind::Omniscient, &tight, &runs, prices);
        assert_eq!((s.runs, s.infeasible_runs), (2, 2));
        assert_eq!(s.deadline_met_share, 0.0);
        assert_eq!(s.cost_usd_mean, None, "unknown, not $0");
        // With room, every start has a schedule, and none is left out.
        let easy = job(1.5);
        let runs = run_all(PolicyKind::Omniscient, &easy, &[(&t, vec![0, 1])], prices);
        let s = summarize(PolicyKind::Omniscient, &easy, &runs, prices);
        assert_eq!(s.infeasible_runs, 0);
        assert!(s.cost_usd_mean.is_some_and(|c| c > 0.0));
    }
}
