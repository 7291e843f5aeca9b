//! # One job on one trace, tick by tick
//!
//! The model of Wu et al., "Can't Be Late" (NSDI'24), extended with checkpoints:
//!
//! - Time runs in the trace's ticks. At the start of each tick the policy sees whether spot
//!   capacity is there (at least `nodes` instances) and asks for spot, on-demand or nothing for
//!   the tick. A job on spot whose capacity is gone at a tick start was preempted.
//! - Every launch (a request differing from what runs, other than nothing) costs the
//!   changeover `d` before progress resumes; the instance is billed meanwhile.
//! - With `checkpoint_interval = 0` (the paper's model) progress is never lost, only the
//!   changeover. With an interval `I > 0`, a checkpoint is written after every `I` of progress
//!   and takes `checkpoint_cost`; a preemption loses the progress since the last checkpoint.
//! - Billing stops when the work is done (mid-tick); an instance is billed per node.

/// What runs during a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cluster {
    /// Nothing.
    None,
    /// Spot instances.
    Spot,
    /// On-demand instances.
    OnDemand,
}

/// The job.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Job {
    /// Seconds of progress needed.
    pub work_s: f64,
    /// Seconds from the start to the deadline (`None`: none).
    pub deadline_s: Option<f64>,
    /// Seconds lost at each launch.
    pub changeover_s: f64,
    /// Seconds of progress between checkpoints (0: the paper's model, nothing lost).
    pub checkpoint_interval_s: f64,
    /// Seconds each checkpoint takes.
    pub checkpoint_cost_s: f64,
    /// Instances the job runs on (spot needs that many available).
    pub nodes: u32,
}

/// What a policy knows at a tick start.
#[derive(Clone, Copy, Debug)]
pub struct View {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// Progress so far (seconds).
    pub progress_s: f64,
    /// What ran in the previous tick, after a preemption (`None` if it was preempted).
    pub current: Cluster,
    /// Spot capacity for the job in this tick.
    pub has_spot: bool,
    /// Tick length.
    pub gap_s: f64,
    /// Changeover still to run on the current instance (seconds).
    pub overhead_s: f64,
    /// Progress since the last checkpoint (lost if preempted; always 0 without checkpoints).
    pub unsaved_s: f64,
}

/// A policy: asks for what runs during the coming tick.
pub trait Policy {
    /// The request; `Spot` only when `view.has_spot`.
    fn decide(&mut self, job: &Job, view: &View) -> Cluster;
}

/// The result of one run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Run {
    /// Whether the work was done (by the end of the trace).
    pub done: bool,
    /// Completion time (seconds from the start), when done.
    pub completion_s: Option<f64>,
    /// Progress kept, made on spot / on demand (seconds; their sum is the work when done).
    pub spot_work_s: f64,
    /// See `spot_work_s`.
    pub on_demand_work_s: f64,
    /// Instance-seconds billed on spot / on demand (per node).
    pub spot_billed_s: f64,
    /// See `spot_billed_s`.
    pub on_demand_billed_s: f64,
    /// Preemptions.
    pub preemptions: u32,
    /// Progress lost to preemptions (seconds).
    pub lost_work_s: f64,
    /// No schedule from this start meets the deadline (the offline optimum's verdict): the
    /// run did not happen, and its zeros must not be averaged in.
    pub infeasible: bool,
}

impl Run {
    /// Whether it finished by the deadline.
    #[must_use]
    pub fn met(&self, job: &Job) -> bool {
        match (self.completion_s, job.deadline_s) {
            (Some(c), Some(d)) => c <= d + 1e-6,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// Where a run is.
#[derive(Default)]
struct State {
    progress: f64,
    overhead: f64,
    since_checkpoint: f64,
    checkpointing: f64,
    /// Progress kept per kind (spot, on-demand), to take losses from.
    spot_kept: f64,
    od_kept: f64,
    /// Unsaved progress per kind.
    spot_unsaved: f64,
    od_unsaved: f64,
}

/// Run `policy` for `job` on `available` (instances per tick, from `start`), ticks of `gap_s`.
pub fn simulate(
    job: &Job,
    available: &[u32],
    start: usize,
    gap_s: f64,
    policy: &mut dyn Policy,
) -> Run {
    simulate_zones(job, &[available], start, gap_s, policy)
}

/// [`simulate`] over several zones of one region, ticks aligned: the policy sees spot capacity
/// when any zone has it; a spot launch goes to the first zone (in the given order) with
/// capacity; a job whose zone loses its capacity is preempted, and moving to another zone is a
/// launch like any other (a changeover).
pub fn simulate_zones(
    job: &Job,
    zones: &[&[u32]],
    start: usize,
    gap_s: f64,
    policy: &mut dyn Policy,
) -> Run {
    let mut run = Run::default();
    let mut st = State::default();
    let mut current = Cluster::None;
    let mut zone = 0usize;
    let nodes = f64::from(job.nodes.max(1));
    let ticks = zones.iter().map(|z| z.len()).min().unwrap_or(0);
    for k in start..ticks {
        #[allow(clippy::cast_precision_loss)]
        let elapsed = (k - start) as f64 * gap_s;
        let up = |z: usize| zones[z][k] >= job.nodes;
        let has_spot = (0..zones.len()).any(up);
        if current == Cluster::Spot && !up(zone) {
            current = Cluster::None;
            run.preemptions += 1;
            // Unsaved progress is lost (always 0 in the paper's model).
            run.lost_work_s += st.spot_unsaved + st.od_unsaved;
            st.progress -= st.spot_unsaved + st.od_unsaved;
            st.spot_kept -= st.spot_unsaved;
            st.od_kept -= st.od_unsaved;
            st.spot_unsaved = 0.0;
            st.od_unsaved = 0.0;
            st.since_checkpoint = 0.0;
            st.checkpointing = 0.0;
        }
        let view = View {
            elapsed_s: elapsed,
            progress_s: st.progress,
            current,
            has_spot,
            gap_s,
            overhead_s: if current == Cluster::None {
                0.0
            } else {
                st.overhead
            },
            unsaved_s: st.spot_unsaved + st.od_unsaved,
        };
        let mut request = policy.decide(job, &view);
        if request == Cluster::Spot && !has_spot {
            request = Cluster::None;
        }
        if request != current && request != Cluster::None {
            st.overhead = job.changeover_s;
            if request == Cluster::Spot {
                zone = (0..zones.len()).find(|&z| up(z)).unwrap_or(0);
            }
        }
        if request != current && current != Cluster::None {
            // Stopped on purpose: the policy checkpoints first (that checkpoint's time is not
            // modelled), so nothing is lost; the new instance resumes from it.
            st.spot_unsaved = 0.0;
            st.od_unsaved = 0.0;
            st.since_checkpoint = 0.0;
            st.checkpointing = 0.0;
        }
        current = request;
        if current == Cluster::None {
            continue;
        }
        let used = step(job, &mut st, current, gap_s);
        match current {
            Cluster::Spot => run.spot_billed_s += used * nodes,
            Cluster::OnDemand => run.on_demand_billed_s += used * nodes,
            Cluster::None => {}
        }
        if st.progress >= job.work_s - 1e-9 {
            run.done = true;
            run.completion_s = Some(elapsed + used);
            break;
        }
    }
    run.spot_work_s = st.spot_kept;
    run.on_demand_work_s = st.od_kept;
    run
}

/// One tick of running: changeover first, then progress with checkpoints. Returns the seconds
/// the instances ran (less than the tick when the work finishes in it).
fn step(job: &Job, st: &mut State, on: Cluster, gap_s: f64) -> f64 {
    let mut left = gap_s;
    let over = st.overhead.min(left);
    st.overhead -= over;
    left -= over;
    while left > 1e-9 && st.progress < job.work_s - 1e-9 {
        if st.checkpointing > 0.0 {
            let c = st.checkpointing.min(left);
            st.checkpointing -= c;
            left -= c;
            if st.checkpointing <= 1e-9 {
                st.checkpointing = 0.0;
                st.spot_unsaved = 0.0;
                st.od_unsaved = 0.0;
            }
            continue;
        }
        let mut w = (job.work_s - st.progress).min(left);
        if job.checkpoint_interval_s > 0.0 {
            w = w.min(job.checkpoint_interval_s - st.since_checkpoint);
        }
        st.progress += w;
        left -= w;
        match on {
            Cluster::Spot => {
                st.spot_kept += w;
                st.spot_unsaved += w;
            }
            _ => {
                st.od_kept += w;
                st.od_unsaved += w;
            }
        }
        if job.checkpoint_interval_s > 0.0 {
            st.since_checkpoint += w;
            if st.since_checkpoint >= job.checkpoint_interval_s - 1e-9 {
                st.since_checkpoint = 0.0;
                st.checkpointing = job.checkpoint_cost_s;
                if st.checkpointing <= 0.0 {
                    st.spot_unsaved = 0.0;
                    st.od_unsaved = 0.0;
                }
            }
        }
    }
    if job.checkpoint_interval_s <= 0.0 {
        // The paper's model: progress is never lost.
        st.spot_unsaved = 0.0;
        st.od_unsaved = 0.0;
    }
    gap_s - left
}

/// Always on demand.
#[derive(Clone, Copy, Debug, Default)]
pub struct OnDemand;

impl Policy for OnDemand {
    fn decide(&mut self, _: &Job, _: &View) -> Cluster {
        Cluster::OnDemand
    }
}

/// Spot whenever there is capacity, else wait; never on demand.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpotOnly;

impl Policy for SpotOnly {
    fn decide(&mut self, _: &Job, v: &View) -> Cluster {
        if v.has_spot {
            Cluster::Spot
        } else {
            Cluster::None
        }
    }
}

/// Spot while there is capacity, else wait; on demand for good at the last tick from which
/// the deadline can still be met. Decisions are per tick, so "last" looks one tick ahead: an
/// idle job goes on demand when waiting one more tick would make the remaining work and one
/// changeover (in whole ticks) overrun the deadline; a job on spot stays on it only while a
/// preemption at the next tick would still leave time to finish on demand.
#[derive(Clone, Copy, Debug, Default)]
pub struct Greedy {
    committed: bool,
}

/// Time, in whole ticks, to do `work_s` on demand after a launch: the changeover, the work,
/// and a checkpoint after every interval of it.
fn ticks_needed(job: &Job, work_s: f64, gap_s: f64) -> f64 {
    let work = work_s.max(0.0);
    let checkpoints = if job.checkpoint_interval_s > 0.0 {
        (work / job.checkpoint_interval_s).ceil() * job.checkpoint_cost_s
    } else {
        0.0
    };
    ((work + job.changeover_s + checkpoints) / gap_s - 1e-9)
        .ceil()
        .max(0.0)
        * gap_s
}

/// Whether the deadline can still be met after this tick, whatever happens to spot: true when
/// waiting (or a spot launch) now, or a preemption at the next tick of a running spot job,
/// still leaves time to finish on demand (the remaining work and one changeover in whole
/// ticks).
fn deadline_safe(job: &Job, v: &View, deadline: f64) -> bool {
    let left = deadline - v.elapsed_s;
    let remaining = job.work_s - v.progress_s;
    // Progress kept after this tick in the worst case. Without checkpoints nothing is lost;
    // with them, a preemption at the next tick may take this tick's progress and whatever was
    // unsaved before it (taken as lost entirely: the guard errs towards on demand).
    let kept = |progress: f64, unsaved: f64| {
        if job.checkpoint_interval_s > 0.0 {
            -unsaved
        } else {
            progress
        }
    };
    let this_tick = match (v.current, v.has_spot) {
        // Another tick on a running spot instance.
        (Cluster::Spot, true) => kept(v.gap_s - v.overhead_s.min(v.gap_s), v.unsaved_s),
        // A spot launch now.
        (_, true) => kept((v.gap_s - job.changeover_s).max(0.0), 0.0),
        // Waiting.
        (_, false) => 0.0,
    };
    ticks_needed(job, remaining - this_tick, v.gap_s) <= left - v.gap_s
}

impl Policy for Greedy {
    fn decide(&mut self, job: &Job, v: &View) -> Cluster {
        let Some(deadline) = job.deadline_s else {
            return SpotOnly.decide(job, v);
        };
        if self.committed {
            return Cluster::OnDemand;
        }
        let safe = deadline_safe(job, v, deadline);
        if safe {
            return if v.has_spot {
                Cluster::Spot
            } else {
                Cluster::None
            };
        }
        self.committed = true;
        Cluster::OnDemand
    }
}

/// Uniform Progress (Wu et al., NSDI'24, §5.2): keep progress on the line from 0 to the work
/// at the deadline, with the switching rules of the authors' simulator:
///
/// - on spot: stay until preempted (exploitation);
/// - on demand: stay while spot is away, or while progress is behind where the line will be
///   two changeovers from now (hysteresis); otherwise move to spot;
/// - idle: spot when there is capacity (taking risks), on demand when behind the line
///   (uniform progress), else wait;
/// - idle or on demand with no more whole ticks left than the remaining work and two
///   changeovers need: on demand until the end (safety net).
///
/// On top of them, greedy's deadline guard ([`Greedy`]): decisions being per tick, the paper's
/// safety net alone misses deadlines on some traces (a property test finds them); the guard
/// does not move the means of the paper's Table 3.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformProgress {
    committed: bool,
}

/// `seconds` rounded up to whole ticks.
fn whole_ticks_up(seconds: f64, gap_s: f64) -> f64 {
    (seconds / gap_s - 1e-9).ceil().max(0.0) * gap_s
}

impl Policy for UniformProgress {
    fn decide(&mut self, job: &Job, v: &View) -> Cluster {
        let Some(deadline) = job.deadline_s else {
            return SpotOnly.decide(job, v);
        };
        if self.committed {
            return Cluster::OnDemand;
        }
        // The deadline guard of the tick model (as greedy's): without it, a preemption, a tick
        // of waiting or leaving on demand near the end can overrun a deadline on demand alone
        // would meet. (On demand, "unsafe" means: it is too late to leave it.)
        if !deadline_safe(job, v, deadline) {
            self.committed = true;
            return Cluster::OnDemand;
        }
        let line = |t: f64| job.work_s * (t / deadline).min(1.0);
        let remaining_work = job.work_s - v.progress_s;
        let ticks_left = ((deadline - v.elapsed_s) / v.gap_s + 1e-9).floor() * v.gap_s;
        let safety_net =
            whole_ticks_up(remaining_work + 2.0 * job.changeover_s, v.gap_s) >= ticks_left;
        if v.current != Cluster::Spot && safety_net {
            self.committed = true;
            return Cluster::OnDemand;
        }
        match v.current {
            Cluster::Spot => Cluster::Spot,
            Cluster::OnDemand => {
                if !v.has_spot || v.progress_s < line(v.elapsed_s + 2.0 * job.changeover_s) {
                    Cluster::OnDemand
                } else {
                    Cluster::Spot
                }
            }
            Cluster::None => {
                if v.has_spot {
                    Cluster::Spot
                } else if v.progress_s < line(v.elapsed_s) {
                    Cluster::OnDemand
                } else {
                    Cluster::None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: f64 = 3600.0;

    fn job(work_h: f64, deadline_h: Option<f64>, d_h: f64) -> Job {
        Job {
            work_s: work_h * H,
            deadline_s: deadline_h.map(|d| d * H),
            changeover_s: d_h * H,
            checkpoint_interval_s: 0.0,
            checkpoint_cost_s: 0.0,
            nodes: 1,
        }
    }

    #[test]
    fn on_demand_pays_one_changeover() {
        let r = simulate(&job(2.0, Some(4.0), 0.5), &[1; 8], 0, H, &mut OnDemand);
        assert_eq!(r.completion_s, Some(2.5 * H));
        assert_eq!(
            (r.on_demand_work_s, r.on_demand_billed_s),
            (2.0 * H, 2.5 * H)
        );
        assert_eq!(r.spot_billed_s, 0.0);
    }

    #[test]
    fn a_preemption_costs_a_changeover_and_nothing_else_in_the_paper_model() {
        // Spot for 2 ticks, gone 1, back: 0.5 h changeover at each of the two launches.
        let r = simulate(
            &job(3.0, None, 0.5),
            &[1, 1, 0, 1, 1, 1],
            0,
            H,
            &mut SpotOnly,
        );
        assert_eq!(r.preemptions, 1);
        assert_eq!(r.lost_work_s, 0.0);
        // 1.5 h done in ticks 0–1, 1.5 h more after 0.5 h in ticks 3–4: done at 5 h.
        assert_eq!(r.completion_s, Some(5.0 * H));
        assert_eq!(r.spot_work_s, 3.0 * H);
        assert_eq!(r.spot_billed_s, 4.0 * H);
    }

    #[test]
    fn checkpoints_bound_the_loss() {
        // Checkpoint every 0.5 h of progress, free; preempted after 1.25 h of progress
        // (changeover 0.25 h in tick 0, then 0.75 h, then 0.5 h in tick 1 → unsaved 0.0 … ).
        let mut j = job(3.0, None, 0.25);
        j.checkpoint_interval_s = 0.4 * H;
        let r = simulate(&j, &[1, 1, 0, 1, 1, 1, 1, 1], 0, H, &mut SpotOnly);
        // 1.75 h of progress in two ticks; checkpoints at 0.4, 0.8, 1.2, 1.6: 0.15 h lost.
        assert!((r.lost_work_s - 0.15 * H).abs() < 1e-6, "{r:?}");
        assert!((r.spot_work_s - 3.0 * H).abs() < 1e-6);
        assert_eq!(r.preemptions, 1);
    }

    #[test]
    fn greedy_goes_on_demand_when_the_deadline_requires_it() {
        // No spot at all: greedy waits while slack lasts, then runs on demand and just makes it.
        let r = simulate(
            &job(4.0, Some(8.0), 0.5),
            &[0; 10],
            0,
            H,
            &mut Greedy::default(),
        );
        assert!(r.met(&job(4.0, Some(8.0), 0.5)), "{r:?}");
        assert_eq!(r.on_demand_work_s, 4.0 * H);
        assert!(r.completion_s.expect("done") > 7.0 * H);
    }

    #[test]
    fn uniform_progress_catches_up_on_demand_and_returns_to_spot() {
        let j = job(4.0, Some(8.0), 0.0);
        // Spot gone for the first two hours: behind the line, on demand; then spot.
        let r = simulate(
            &j,
            &[0, 0, 1, 1, 1, 1, 1, 1, 1, 1],
            0,
            H,
            &mut UniformProgress::default(),
        );
        assert!(r.met(&j));
        assert!(r.on_demand_work_s > 0.0 && r.spot_work_s > 0.0, "{r:?}");
        assert!((r.on_demand_work_s + r.spot_work_s - 4.0 * H).abs() < 1e-6);
    }

    #[test]
    fn a_second_zone_takes_over_at_the_cost_of_a_changeover() {
        let j = job(8.0, Some(12.0), 0.5);
        let a = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0];
        let b = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1];
        let one = simulate(&j, &a, 0, H, &mut UniformProgress::default());
        let two = simulate_zones(&j, &[&a, &b], 0, H, &mut UniformProgress::default());
        // Both zones: spot throughout, one preemption, a changeover at each of the two launches.
        assert_eq!(two.preemptions, 1);
        assert_eq!(two.on_demand_billed_s, 0.0);
        assert_eq!(two.completion_s, Some(9.0 * H));
        assert_eq!(two.spot_billed_s, 9.0 * H);
        // Zone A alone needs on demand after its capacity goes.
        assert!(one.on_demand_work_s > 0.0);
    }
}
