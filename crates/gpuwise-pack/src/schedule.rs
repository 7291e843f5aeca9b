//! # Scheduling a job queue over pools
//!
//! Events in time order: jobs arrive, jobs finish; after each instant's events the policy
//! starts waiting jobs on pools with room. A job runs on one pool with its GPUs at once for its
//! duration (jobs keep their duration and GPU count: no policy here is elastic).
//!
//! - `fifo`: in submission order; the first job that fits nowhere blocks the ones behind it.
//! - `edf`: earliest deadline first (jobs without one last), each job that fits starts.
//! - `priority`: larger priority first, each job that fits starts; one that fits nowhere stops
//!   running interruptible jobs of lower priority on a pool where that makes room (they resume
//!   later where they stopped: they checkpoint).
//! - `backfill`: FIFO with EASY backfilling: the first job that cannot start gets a
//!   reservation at the earliest time its pool will have room; jobs behind it start now if they
//!   fit and do not delay that reservation.
//! - `cost-aware`: earliest deadline first; each job waits for the cheapest pool it may use
//!   while its deadline allows (judged from when running jobs end), and takes a costlier pool
//!   with room only when waiting would miss the deadline; jobs without a deadline wait for the
//!   cheapest pool.
//!
//! Pools are tried in the order given, except by `cost-aware` (cheapest first). A job that no
//! pool it may use can ever hold is rejected and counted.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::jobs::{Job, Pool};

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.schedule/v1";

/// The scheduling policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// First in, first out, head-of-line blocking.
    Fifo,
    /// Earliest deadline first.
    Edf,
    /// By priority, preempting interruptible jobs.
    Priority,
    /// FIFO with EASY backfilling.
    Backfill,
    /// Cheapest pool while the deadline allows.
    CostAware,
}

/// A policy name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not one of fifo, edf, priority, backfill, cost-aware")]
pub struct UnknownPolicy(pub String);

impl std::str::FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "fifo" => Ok(Self::Fifo),
            "edf" => Ok(Self::Edf),
            "priority" => Ok(Self::Priority),
            "backfill" => Ok(Self::Backfill),
            "cost-aware" | "cost" => Ok(Self::CostAware),
            other => Err(UnknownPolicy(other.to_owned())),
        }
    }
}

impl Policy {
    /// The name `--policy` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Edf => "edf",
            Self::Priority => "priority",
            Self::Backfill => "backfill",
            Self::CostAware => "cost-aware",
        }
    }
}

/// One stretch of a job on a pool.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assignment {
    /// The job.
    pub job_id: String,
    /// The pool.
    pub pool: String,
    /// Start, seconds.
    pub start_s: f64,
    /// End (finished, or stopped for a job of higher priority), seconds.
    pub end_s: f64,
    /// GPUs.
    pub gpus: u32,
}

/// `gpuwise.schedule/v1`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The policy.
    pub policy: Policy,
    /// Jobs in the list.
    pub jobs: usize,
    /// Jobs no pool they may use can hold.
    pub rejected: usize,
    /// Jobs with a deadline.
    pub deadlines: usize,
    /// Jobs with a deadline that finished by it, of those feasible.
    pub deadline_met: usize,
    /// Jobs with a deadline they could meet starting at once (submission + duration ≤
    /// deadline) on a pool that can hold them.
    pub deadline_feasible: usize,
    /// Mean job completion time (finish − submission), hours.
    pub mean_jct_h: Option<f64>,
    /// 95th percentile of it, hours.
    pub p95_jct_h: Option<f64>,
    /// Σ over assignments of hours × GPUs × the pool's price, USD.
    pub cost_usd: f64,
    /// A lower bound on the cost of any schedule that runs every job.
    pub lower_bound_cost_usd: f64,
    /// Which bound.
    pub lower_bound: &'static str,
    /// GPU-hours per pool.
    pub gpu_hours_by_pool: BTreeMap<String, f64>,
    /// GPU-hours ÷ (capacity × the schedule's length) per pool of finite capacity.
    pub utilization_by_pool: BTreeMap<String, f64>,
    /// Times a running job was stopped for another.
    pub preemptions: usize,
    /// Every stretch of every job.
    pub assignments: Vec<Assignment>,
}

/// Earliest start by (pool, GPUs) within one dispatch.
type Memo = BTreeMap<(usize, u32), f64>;

#[derive(Clone, Copy, Debug)]
struct Run {
    job: usize,
    pool: usize,
    start: f64,
    end: f64,
}

struct State<'a> {
    jobs: &'a [Job],
    pools: &'a [Pool],
    policy: Policy,
    free: Vec<Option<u32>>,
    running: Vec<Run>,
    /// In arrival order, which is submission order until a preempted job comes back.
    waiting: std::collections::VecDeque<usize>,
    remaining: Vec<f64>,
    finished: Vec<Option<f64>>,
    assignments: Vec<Assignment>,
    preemptions: usize,
}

impl State<'_> {
    /// Whether pool `p` may run job `j` at all.
    fn allowed(&self, j: usize, p: usize) -> bool {
        let job = &self.jobs[j];
        (job.pools.is_empty() || job.pools.contains(&self.pools[p].name))
            && self.pools[p].capacity.is_none_or(|c| c >= job.gpus)
    }

    fn room(&self, j: usize, p: usize) -> bool {
        self.allowed(j, p) && self.free[p].is_none_or(|f| f >= self.jobs[j].gpus)
    }

    fn start(&mut self, j: usize, p: usize, now: f64) {
        if let Some(f) = &mut self.free[p] {
            *f -= self.jobs[j].gpus;
        }
        self.running.push(Run {
            job: j,
            pool: p,
            start: now,
            end: now + self.remaining[j],
        });
        if self.waiting.front() == Some(&j) {
            self.waiting.pop_front();
        } else {
            self.waiting.retain(|w| *w != j);
        }
    }

    /// Close run `i` at `now` (finished, or stopped).
    fn stop(&mut self, i: usize, now: f64) -> Run {
        let r = self.running.swap_remove(i);
        if let Some(f) = &mut self.free[r.pool] {
            *f += self.jobs[r.job].gpus;
        }
        self.assignments.push(Assignment {
            job_id: self.jobs[r.job].id.clone(),
            pool: self.pools[r.pool].name.clone(),
            start_s: r.start,
            end_s: now,
            gpus: self.jobs[r.job].gpus,
        });
        r
    }

    /// The earliest time pool `p` has room for job `j`, from when the running jobs end (jobs
    /// waiting are not counted), and the GPUs then left over.
    fn shadow(&self, j: usize, p: usize, now: f64) -> (f64, u32) {
        let Some(mut free) = self.free[p] else {
            return (now, u32::MAX);
        };
        let need = self.jobs[j].gpus;
        let mut ends: Vec<&Run> = self.running.iter().filter(|r| r.pool == p).collect();
        ends.sort_by(|a, b| a.end.total_cmp(&b.end));
        let mut t = now;
        for r in ends {
            if free >= need {
                break;
            }
            free += self.jobs[r.job].gpus;
            t = r.end;
        }
        (t, free.saturating_sub(need))
    }

    fn pool_order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.pools.len()).collect();
        if self.policy == Policy::CostAware {
            order.sort_by(|a, b| {
                self.pools[*a]
                    .usd_per_gpu_hour
                    .total_cmp(&self.pools[*b].usd_per_gpu_hour)
            });
        }
        order
    }

    fn waiting_order(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.waiting.iter().copied().collect();
        let jobs = self.jobs;
        let deadline = |j: usize| jobs[j].deadline_s.unwrap_or(f64::INFINITY);
        match self.policy {
            Policy::Fifo | Policy::Backfill => {
                w.sort_by(|a, b| {
                    jobs[*a]
                        .submit_s
                        .total_cmp(&jobs[*b].submit_s)
                        .then(a.cmp(b))
                });
            }
            Policy::Edf | Policy::CostAware => w.sort_by(|a, b| {
                deadline(*a)
                    .total_cmp(&deadline(*b))
                    .then(jobs[*a].submit_s.total_cmp(&jobs[*b].submit_s))
                    .then(a.cmp(b))
            }),
            Policy::Priority => w.sort_by(|a, b| {
                jobs[*b]
                    .priority
                    .cmp(&jobs[*a].priority)
                    .then(jobs[*a].submit_s.total_cmp(&jobs[*b].submit_s))
                    .then(a.cmp(b))
            }),
        }
        w
    }

    /// Start what the policy starts at `now`.
    fn dispatch(&mut self, now: f64) {
        if self.policy == Policy::Fifo {
            self.dispatch_fifo(now);
            return;
        }
        let pools = self.pool_order();
        let order = self.waiting_order();
        let mut reservation: Option<(usize, f64, u32)> = None;
        // When a pool has room for a job of so many GPUs, from the running jobs' ends: the same
        // for every waiting job of that size until something starts.
        let mut memo: Memo = BTreeMap::new();
        for j in order {
            let fits = pools.iter().copied().find(|p| self.room(j, *p));
            match self.policy {
                // Handled by `dispatch_fifo` before this loop.
                Policy::Fifo => return,
                Policy::Edf => {
                    if let Some(p) = fits {
                        self.start(j, p, now);
                    }
                }
                Policy::Priority => match fits {
                    Some(p) => self.start(j, p, now),
                    None => self.preempt_for(j, now),
                },
                Policy::Backfill => self.backfill(j, fits, now, &mut reservation),
                Policy::CostAware => {
                    if self.cheapest_in_time(j, &pools, now, &mut memo) {
                        memo.clear();
                    }
                }
            }
        }
    }

    /// FIFO: start jobs from the head of the queue until one fits nowhere. The queue is in
    /// submission order already (arrivals come in that order and FIFO preempts nothing), so
    /// this looks at the started jobs and one more, not the whole queue: an overloaded pool
    /// with 100,000 jobs waiting took 15 s sorting and copying the queue at every event.
    fn dispatch_fifo(&mut self, now: f64) {
        let pools = self.pool_order();
        while let Some(&j) = self.waiting.front() {
            let Some(p) = pools.iter().copied().find(|p| self.room(j, *p)) else {
                return;
            };
            self.start(j, p, now);
        }
    }

    fn backfill(
        &mut self,
        j: usize,
        fits: Option<usize>,
        now: f64,
        reservation: &mut Option<(usize, f64, u32)>,
    ) {
        let Some((rp, at, extra)) = *reservation else {
            match fits {
                Some(p) => self.start(j, p, now),
                None => {
                    // The head job: reserve the pool where it can start soonest.
                    *reservation = (0..self.pools.len())
                        .filter(|p| self.allowed(j, *p))
                        .map(|p| {
                            let (t, extra) = self.shadow(j, p, now);
                            (p, t, extra)
                        })
                        .min_by(|a, b| a.1.total_cmp(&b.1));
                }
            }
            return;
        };
        let Some(p) = fits else { return };
        let ends = now + self.remaining[j];
        if p != rp || ends <= at {
            self.start(j, p, now);
        } else if self.jobs[j].gpus <= extra {
            *reservation = Some((rp, at, extra - self.jobs[j].gpus));
            self.start(j, p, now);
        }
    }

    /// Stop running interruptible jobs of lower priority on one pool so that `j` fits there.
    fn preempt_for(&mut self, j: usize, now: f64) {
        let need = self.jobs[j].gpus;
        for p in 0..self.pools.len() {
            if !self.allowed(j, p) {
                continue;
            }
            let Some(free) = self.free[p] else { continue };
            let mut victims: Vec<usize> = (0..self.running.len())
                .filter(|i| {
                    let r = &self.running[*i];
                    r.pool == p
                        && self.jobs[r.job].interruptible
                        && self.jobs[r.job].priority < self.jobs[j].priority
                })
                .collect();
            victims.sort_by(|a, b| {
                let (ra, rb) = (&self.running[*a], &self.running[*b]);
                self.jobs[ra.job]
                    .priority
                    .cmp(&self.jobs[rb.job].priority)
                    .then(rb.start.total_cmp(&ra.start))
            });
            let mut gain = free;
            let mut take = Vec::new();
            for v in victims {
                if gain >= need {
                    break;
                }
                gain += self.jobs[self.running[v].job].gpus;
                take.push(v);
            }
            if gain < need {
                continue;
            }
            // Stop from the highest index down so the others keep their places.
            take.sort_unstable_by(|a, b| b.cmp(a));
            for i in take {
                let r = self.stop(i, now);
                self.remaining[r.job] -= now - r.start;
                self.waiting.push_back(r.job);
                self.preemptions += 1;
            }
            self.start(j, p, now);
            return;
        }
    }

    /// Cost-aware: the cheapest pool now if it has room; else wait for it while the deadline
    /// allows; else the cheapest pool with room now. Whether it started the job.
    fn cheapest_in_time(&mut self, j: usize, pools: &[usize], now: f64, memo: &mut Memo) -> bool {
        let Some(&cheapest) = pools.iter().find(|p| self.allowed(j, **p)) else {
            return false;
        };
        if self.room(j, cheapest) {
            self.start(j, cheapest, now);
            return true;
        }
        let Some(deadline) = self.jobs[j].deadline_s else {
            return false;
        };
        let key = (cheapest, self.jobs[j].gpus);
        let cached = memo.get(&key).copied();
        let t = match cached {
            Some(t) => t,
            None => {
                let (t, _) = self.shadow(j, cheapest, now);
                memo.insert(key, t);
                t
            }
        };
        if t + self.remaining[j] <= deadline {
            return false;
        }
        if let Some(&p) = pools.iter().find(|p| self.room(j, **p)) {
            self.start(j, p, now);
            return true;
        }
        false
    }
}

/// Run `jobs` over `pools` by `policy`.
#[must_use]
pub fn run(jobs: &[Job], pools: &[Pool], policy: Policy) -> Schedule {
    let mut st = State {
        jobs,
        pools,
        policy,
        free: pools.iter().map(|p| p.capacity).collect(),
        running: Vec::new(),
        waiting: std::collections::VecDeque::new(),
        remaining: jobs.iter().map(|j| j.duration_s).collect(),
        finished: vec![None; jobs.len()],
        assignments: Vec::new(),
        preemptions: 0,
    };
    let mut arrivals: Vec<usize> = (0..jobs.len()).collect();
    arrivals.sort_by(|a, b| {
        jobs[*a]
            .submit_s
            .total_cmp(&jobs[*b].submit_s)
            .then(a.cmp(b))
    });
    let mut rejected = 0;
    let mut next = 0;
    loop {
        let arrival = arrivals.get(next).map(|j| jobs[*j].submit_s);
        let end = st.running.iter().map(|r| r.end).min_by(f64::total_cmp);
        let now = match (arrival, end) {
            (None, None) => break,
            (a, e) => a.unwrap_or(f64::INFINITY).min(e.unwrap_or(f64::INFINITY)),
        };
        while let Some(i) = st.running.iter().position(|r| r.end <= now) {
            let r = st.stop(i, now);
            st.remaining[r.job] = 0.0;
            st.finished[r.job] = Some(now);
        }
        while let Some(&j) = arrivals.get(next).filter(|j| jobs[**j].submit_s <= now) {
            next += 1;
            if (0..pools.len()).any(|p| st.allowed(j, p)) {
                st.waiting.push_back(j);
            } else {
                rejected += 1;
            }
        }
        st.dispatch(now);
    }
    summarize(&st, rejected)
}

fn summarize(st: &State<'_>, rejected: usize) -> Schedule {
    let jobs = st.jobs;
    let mut jct: Vec<f64> = (0..jobs.len())
        .filter_map(|j| st.finished[j].map(|f| (f - jobs[j].submit_s) / 3600.0))
        .collect();
    jct.sort_by(f64::total_cmp);
    let can_run = |j: usize| (0..st.pools.len()).any(|p| st.allowed(j, p));
    let feasible: Vec<usize> = (0..jobs.len())
        .filter(|&j| {
            can_run(j)
                && jobs[j]
                    .deadline_s
                    .is_some_and(|d| jobs[j].submit_s + jobs[j].duration_s <= d)
        })
        .collect();
    let met = feasible
        .iter()
        .filter(|&&j| {
            st.finished[j].is_some_and(|f| f <= jobs[j].deadline_s.unwrap_or(f64::INFINITY) + 1e-9)
        })
        .count();
    let mut gpu_hours: BTreeMap<String, f64> =
        st.pools.iter().map(|p| (p.name.clone(), 0.0)).collect();
    let price: BTreeMap<&str, f64> = st
        .pools
        .iter()
        .map(|p| (p.name.as_str(), p.usd_per_gpu_hour))
        .collect();
    let mut cost = 0.0;
    for a in &st.assignments {
        let h = (a.end_s - a.start_s) / 3600.0 * f64::from(a.gpus);
        *gpu_hours.entry(a.pool.clone()).or_default() += h;
        cost += h * price.get(a.pool.as_str()).copied().unwrap_or(0.0);
    }
    let first = jobs
        .iter()
        .map(|j| j.submit_s)
        .fold(f64::INFINITY, f64::min);
    let last = st.assignments.iter().map(|a| a.end_s).fold(0.0, f64::max);
    let span_h = ((last - first) / 3600.0).max(0.0);
    let utilization = st
        .pools
        .iter()
        .filter_map(|p| {
            p.capacity.filter(|c| *c > 0 && span_h > 0.0).map(|c| {
                (
                    p.name.clone(),
                    gpu_hours.get(&p.name).copied().unwrap_or(0.0) / (f64::from(c) * span_h),
                )
            })
        })
        .collect();
    let lower = (0..jobs.len())
        .filter(|&j| can_run(j))
        .map(|j| {
            let cheapest = (0..st.pools.len())
                .filter(|p| st.allowed(j, *p))
                .map(|p| st.pools[p].usd_per_gpu_hour)
                .fold(f64::INFINITY, f64::min);
            jobs[j].duration_s / 3600.0 * f64::from(jobs[j].gpus) * cheapest
        })
        .sum();
    let mut assignments = st.assignments.clone();
    assignments.sort_by(|a, b| {
        a.start_s
            .total_cmp(&b.start_s)
            .then(a.job_id.cmp(&b.job_id))
    });
    Schedule {
        schema: SCHEMA,
        policy: st.policy,
        jobs: jobs.len(),
        rejected,
        deadlines: jobs.iter().filter(|j| j.deadline_s.is_some()).count(),
        deadline_met: met,
        deadline_feasible: feasible.len(),
        mean_jct_h: (!jct.is_empty()).then(|| jct.iter().sum::<f64>() / jct.len() as f64),
        p95_jct_h: (!jct.is_empty()).then(|| {
            let i = ((0.95 * jct.len() as f64).ceil() as usize).clamp(1, jct.len()) - 1;
            jct[i]
        }),
        cost_usd: cost,
        lower_bound_cost_usd: lower,
        lower_bound: "every job's GPU-hours at the cheapest price of a pool it may use (capacity and deadlines ignored)",
        gpu_hours_by_pool: gpu_hours,
        utilization_by_pool: utilization,
        preemptions: st.preemptions,
        assignments,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, submit: f64, gpus: u32, dur: f64) -> Job {
        Job {
            id: id.into(),
            submit_s: submit,
            duration_s: dur,
            gpus,
            deadline_s: None,
            priority: 0,
            interruptible: false,
            pools: Vec::new(),
        }
    }

    fn pool(name: &str, capacity: Option<u32>, price: f64) -> Pool {
        Pool {
            name: name.into(),
            capacity,
            usd_per_gpu_hour: price,
        }
    }

    fn stretches(s: &Schedule, id: &str) -> Vec<(f64, f64, String)> {
        s.assignments
            .iter()
            .filter(|a| a.job_id == id)
            .map(|a| (a.start_s, a.end_s, a.pool.clone()))
            .collect()
    }

    #[test]
    fn fifo_blocks_and_backfill_fills_the_hole() {
        let jobs = [
            job("a", 0.0, 4, 10.0),
            job("b", 1.0, 4, 10.0),
            job("c", 2.0, 1, 1.0),
        ];
        let pools = [pool("p", Some(5), 1.0)];
        let f = run(&jobs, &pools, Policy::Fifo);
        assert_eq!(stretches(&f, "c"), vec![(10.0, 11.0, "p".into())]);
        let b = run(&jobs, &pools, Policy::Backfill);
        assert_eq!(stretches(&b, "c"), vec![(2.0, 3.0, "p".into())]);
        assert_eq!(stretches(&b, "b"), vec![(10.0, 20.0, "p".into())]);
    }

    #[test]
    fn cost_aware_waits_for_the_cheap_pool_unless_a_deadline_says_no() {
        let pools = [pool("cheap", Some(2), 1.0), pool("dear", None, 3.0)];
        let mut z = job("z", 0.0, 2, 3600.0);
        z.deadline_s = Some(3600.0);
        let mut y = job("y", 0.0, 2, 3600.0);
        y.deadline_s = Some(3650.0);
        let x = job("x", 0.0, 2, 3600.0);
        let s = run(&[x, y, z], &pools, Policy::CostAware);
        assert_eq!(stretches(&s, "z"), vec![(0.0, 3600.0, "cheap".into())]);
        assert_eq!(stretches(&s, "y"), vec![(0.0, 3600.0, "dear".into())]);
        assert_eq!(stretches(&s, "x"), vec![(3600.0, 7200.0, "cheap".into())]);
        assert_eq!((s.deadline_met, s.deadline_feasible), (2, 2));
        // 2 GPU-hours dear at $3 and 4 cheap at $1; the bound prices all 6 at $1.
        assert!((s.cost_usd - 10.0).abs() < 1e-9);
        assert!((s.lower_bound_cost_usd - 6.0).abs() < 1e-9);
        // FIFO takes the dear pool at once for everything that does not fit the cheap one.
        let f = run(
            &[job("x", 0.0, 2, 3600.0), job("w", 0.0, 2, 3600.0)],
            &pools,
            Policy::Fifo,
        );
        assert!((f.cost_usd - 8.0).abs() < 1e-9);
    }

    #[test]
    fn priority_stops_interruptible_work_and_resumes_it() {
        let mut low = job("low", 0.0, 2, 100.0);
        low.interruptible = true;
        let mut high = job("high", 10.0, 2, 10.0);
        high.priority = 5;
        let s = run(&[low, high], &[pool("p", Some(2), 1.0)], Policy::Priority);
        assert_eq!(
            stretches(&s, "low"),
            vec![(0.0, 10.0, "p".into()), (20.0, 110.0, "p".into())]
        );
        assert_eq!(stretches(&s, "high"), vec![(10.0, 20.0, "p".into())]);
        assert_eq!(s.preemptions, 1);
        // Not interruptible: the high-priority job waits.
        let s = run(
            &[job("low", 0.0, 2, 100.0), {
                let mut h = job("high", 10.0, 2, 10.0);
                h.priority = 5;
                h
            }],
            &[pool("p", Some(2), 1.0)],
            Policy::Priority,
        );
        assert_eq!(stretches(&s, "high"), vec![(100.0, 110.0, "p".into())]);
    }

    #[test]
    fn jobs_no_pool_can_hold_are_rejected() {
        let mut pinned = job("pinned", 0.0, 1, 10.0);
        pinned.pools = vec!["elsewhere".into()];
        let s = run(
            &[job("big", 0.0, 8, 10.0), pinned, job("ok", 0.0, 2, 10.0)],
            &[pool("p", Some(4), 1.0)],
            Policy::Edf,
        );
        assert_eq!((s.jobs, s.rejected, s.assignments.len()), (3, 2, 1));
    }

    /// No pool above its capacity at any time, no job before its arrival, every job's
    /// stretches add up to its duration, and the cost is the sum over stretches.
    fn check(s: &Schedule, jobs: &[Job], pools: &[Pool]) {
        let mut edges: Vec<(f64, i64, &str)> = Vec::new();
        for a in &s.assignments {
            let j = jobs.iter().find(|j| j.id == a.job_id).expect("job");
            assert!(a.start_s >= j.submit_s - 1e-9, "{a:?} before its arrival");
            edges.push((a.start_s, i64::from(a.gpus), &a.pool));
            edges.push((a.end_s, -i64::from(a.gpus), &a.pool));
        }
        edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut used: BTreeMap<&str, i64> = BTreeMap::new();
        for (_, d, p) in edges {
            let u = used.entry(p).or_default();
            *u += d;
            let cap = pools.iter().find(|q| q.name == p).and_then(|q| q.capacity);
            assert!(cap.is_none_or(|c| *u <= i64::from(c)), "{p} over capacity");
        }
        for j in jobs {
            let ran: f64 = s
                .assignments
                .iter()
                .filter(|a| a.job_id == j.id)
                .map(|a| a.end_s - a.start_s)
                .sum();
            if ran > 0.0 {
                assert!(
                    (ran - j.duration_s).abs() < 1e-6,
                    "{}: {ran} of {}",
                    j.id,
                    j.duration_s
                );
            }
        }
        let cost: f64 = s
            .assignments
            .iter()
            .map(|a| {
                let p = pools.iter().find(|q| q.name == a.pool).expect("pool");
                (a.end_s - a.start_s) / 3600.0 * f64::from(a.gpus) * p.usd_per_gpu_hour
            })
            .sum();
        assert!((cost - s.cost_usd).abs() < 1e-6 * cost.max(1.0));
        assert!(s.lower_bound_cost_usd <= s.cost_usd + 1e-6);
    }

    #[test]
    fn every_policy_keeps_capacity_arrivals_and_durations() {
        let mut rng = 12345u64;
        let mut next = || {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (rng >> 33) as f64 / f64::from(1u32 << 31)
        };
        let jobs: Vec<Job> = (0..400)
            .map(|i| {
                let mut j = job(
                    &format!("j{i}"),
                    next() * 50_000.0,
                    [1, 2, 4, 8][(next() * 4.0) as usize],
                    600.0 + next() * 20_000.0,
                );
                j.deadline_s = Some(j.submit_s + j.duration_s * (0.5 + next()));
                j.priority = (next() * 3.0) as i64;
                j.interruptible = next() < 0.5;
                j
            })
            .collect();
        let pools = [
            pool("reserved", Some(16), 1.5),
            pool("cloud", Some(32), 4.0),
        ];
        for policy in [
            Policy::Fifo,
            Policy::Edf,
            Policy::Priority,
            Policy::Backfill,
            Policy::CostAware,
        ] {
            let s = run(&jobs, &pools, policy);
            check(&s, &jobs, &pools);
            assert_eq!(s.rejected, 0);
            let done: std::collections::BTreeSet<&str> =
                s.assignments.iter().map(|a| a.job_id.as_str()).collect();
            assert_eq!(done.len(), jobs.len(), "{policy:?}: every job runs");
        }
    }
}
