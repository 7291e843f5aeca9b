//! # Serving: replay inference traffic on replicas, batching and autoscaling
//!
//! A discrete-event simulation. Requests wait in one queue (first come, first served); each
//! replica takes work from it when it starts an iteration, so `c` replicas at batch 1 are the
//! M/G/c queue. An iteration's time is the [`StepModel`]'s (the planner's roofline, or a
//! measured profile).
//!
//! - **Continuous batching** (vLLM-style): each iteration admits waiting requests while the
//!   batch has room and the KV cache holds their prompt and output, then computes up to the
//!   token budget of prompt tokens (a long prompt is prefilled in chunks) and one token of
//!   every sequence past its prompt. The iteration that finishes a prompt gives its first token.
//! - **Static batching**: a replica waits until the batch is full or its oldest request has
//!   waited the timeout, prefills the batch at once and decodes it until its longest request
//!   is done (finished sequences keep their place: no request joins mid-batch).
//! - **Scaling**: a fixed number of replicas, or reactive autoscaling: every `interval` the
//!   load (sequences running and waiting, per batch slot) sets the replicas wanted for the
//!   target; new ones are ready after `startup` (billed from the start), surplus ones stop
//!   taking work and are released when empty, at most once per `cooldown`; `min` 0 scales to
//!   zero (a request then waits for a cold start).
//!
//! A request whose prompt and output cannot fit a replica's KV cache is dropped and counted.

use serde::Serialize;

use gpuwise_plan::perf::{StepCosts, StepWork};

use crate::traffic::Request;

/// How long an iteration takes on one replica.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Service {
    /// The planner's kernel-by-kernel step model (`gpuwise-plan`'s `perf::StepCosts`).
    Kernels(Box<StepCosts>),
    /// Every iteration takes the same time, whatever it holds (deterministic service: the
    /// queueing checks against M/D/1 and M/D/c).
    Fixed {
        /// Seconds per iteration.
        step_s: f64,
    },
}

/// What one iteration costs on one replica, and what a replica holds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepModel {
    /// The iteration's time.
    pub service: Service,
    /// Tokens of KV cache a replica holds.
    pub kv_capacity_tokens: f64,
    /// GPUs per replica.
    pub gpus: u32,
    /// Measured decode step seconds by batch (`--profile`), overriding the model's decode
    /// time (linear between the measured batches, flat beyond them).
    pub measured_decode_s: Vec<(u32, f64)>,
}

/// The work of one iteration.
type Work = StepWork;

impl StepModel {
    /// The planner's step costs, with measured decode times if any.
    #[must_use]
    pub fn from_costs(costs: StepCosts, measured_decode_s: Vec<(u32, f64)>) -> Self {
        Self {
            kv_capacity_tokens: costs.kv_capacity_tokens,
            gpus: costs.gpus,
            service: Service::Kernels(Box::new(costs)),
            measured_decode_s,
        }
    }

    /// Seconds of one iteration.
    fn step_s(&self, w: &Work) -> f64 {
        let s = self.modelled_s(w);
        if w.decode_seqs > 0 && !self.measured_decode_s.is_empty() {
            // The measured step replaces the decode part; the prompt tokens keep their cost.
            let only_decode = Work {
                prefill_tokens: 0.0,
                prefill_context: 0.0,
                sampled: w.decode_seqs,
                ..*w
            };
            return s - self.modelled_s(&only_decode) + self.measured(w.decode_seqs);
        }
        s
    }

    /// Seconds of one iteration by the model alone.
    fn modelled_s(&self, w: &Work) -> f64 {
        match &self.service {
            Service::Kernels(c) => c.step_s(w),
            Service::Fixed { step_s } => *step_s,
        }
    }

    fn measured(&self, batch: usize) -> f64 {
        let b = batch as f64;
        let t = &self.measured_decode_s;
        let (first, last) = (t[0], t[t.len() - 1]);
        if b <= f64::from(first.0) {
            return first.1;
        }
        if b >= f64::from(last.0) {
            return last.1;
        }
        for w in t.windows(2) {
            let (a, z) = (f64::from(w[0].0), f64::from(w[1].0));
            if b <= z {
                return w[0].1 + (w[1].1 - w[0].1) * (b - a) / (z - a);
            }
        }
        last.1
    }
}

/// How a replica batches.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Batching {
    /// Continuous batching with a per-iteration budget of prompt tokens.
    Continuous {
        /// Sequences in a batch at most (1: no batching).
        max_batch: u32,
        /// Prompt tokens one iteration computes at most.
        token_budget: u32,
    },
    /// vLLM's scheduler without chunked prefill: an iteration prefills waiting prompts
    /// (whole ones, up to the token budget) or, when no prompt waits, decodes every running
    /// sequence.
    PromptsFirst {
        /// Sequences in a batch at most.
        max_batch: u32,
        /// Prompt tokens one iteration computes at most.
        token_budget: u32,
    },
    /// Static batches.
    Static {
        /// Sequences per batch.
        max_batch: u32,
        /// Longest a request waits for its batch to fill, seconds.
        timeout_s: f64,
    },
}

impl Batching {
    fn max_batch(&self) -> usize {
        match *self {
            Self::Continuous { max_batch, .. }
            | Self::PromptsFirst { max_batch, .. }
            | Self::Static { max_batch, .. } => max_batch.max(1) as usize,
        }
    }
}

/// How many replicas run.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Scaling {
    /// Always this many.
    Fixed {
        /// Replicas.
        replicas: u32,
    },
    /// Reactive on load.
    Autoscale {
        /// Batch-slot occupancy to aim at (0–1).
        target: f64,
        /// Fewest replicas (0: scale to zero).
        min: u32,
        /// Most replicas.
        max: u32,
        /// Least time between two scaling actions, seconds.
        cooldown_s: f64,
        /// Time from starting a replica to its first request, seconds.
        startup_s: f64,
        /// Time between two looks at the load, seconds.
        interval_s: f64,
        /// Replicas kept ready beyond what the load asks for (a warm pool, billed).
        warm: u32,
        /// Predictive: also hold what the load was one period earlier (a day or a week), at
        /// the time a replica started now would be ready.
        predict_period_s: Option<f64>,
        /// Scale on the queue (requests waiting) instead of batch-slot occupancy: one more
        /// replica for each `target` × batch slots of waiting requests; when nothing waits,
        /// as many as the running sequences need.
        on_queue: bool,
    },
    /// Replicas by hour of a period (a day or a week, counted from the trace's start), set
    /// `startup` ahead of each hour; between, a request that finds no replica starts one.
    Schedule {
        /// The period, seconds.
        period_s: f64,
        /// Replicas for each hour of the period.
        replicas_by_hour: Vec<u32>,
        /// Time from starting a replica to its first request, seconds.
        startup_s: f64,
    },
}

/// Replicas on spot capacity, preempted as a trace says.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Spot {
    /// How many of the fixed replicas run on spot.
    pub replicas: u32,
    /// Price of one spot GPU-hour, USD.
    pub usd_per_gpu_hour: f64,
    /// The trace's name.
    pub trace: String,
    /// Seconds per tick of the trace.
    pub tick_s: f64,
    /// Spot instances available in each tick (the trace repeats when the traffic is longer).
    #[serde(skip)]
    pub available: Vec<u32>,
    /// Time from a spot replica's start to its first request, seconds.
    pub startup_s: f64,
}

/// A configuration to simulate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    /// The GPU (a catalog name; for the output).
    pub gpu: String,
    /// Price of one GPU-hour, USD.
    pub usd_per_gpu_hour: f64,
    /// Batching.
    pub batching: Batching,
    /// Scaling.
    pub scaling: Scaling,
    /// Spot replicas, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spot: Option<Spot>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Starting(f64),
    Active,
    Draining,
    Off,
}

#[derive(Clone, Debug)]
struct Seq {
    req: usize,
    /// Tokens to prefill: the prompt, plus the tokens generated before a preemption.
    target: u32,
    prefilled: u32,
    generated: u32,
    /// KV-cache tokens it holds.
    kv: f64,
}

#[derive(Clone, Debug)]
struct Replica {
    state: State,
    /// On spot capacity (preemptible).
    spot: bool,
    running: Vec<Seq>,
    kv_used: f64,
    /// End of the iteration in progress.
    busy_until: Option<f64>,
    /// The iteration in progress.
    work: Vec<(usize, u32, bool)>,
    /// A static batch in progress (no admission until it ends).
    in_static_batch: bool,
}

/// Latency percentiles, ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

fn latency(mut v: Vec<f64>) -> Option<Latency> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        let i = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
        v[i] * 1e3
    };
    Some(Latency {
        mean: v.iter().sum::<f64>() / v.len() as f64 * 1e3,
        p50: q(0.50),
        p95: q(0.95),
        p99: q(0.99),
    })
}

/// One point of the replica timeline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Point {
    /// Seconds from the start.
    pub t_s: f64,
    /// Replicas billed (starting, serving or draining).
    pub replicas: u32,
    /// Of which on spot.
    pub spot: u32,
}

/// The lower and upper references.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bounds {
    /// GPU-hours of the iterations alone: a perfect autoscaler bills only busy replica time.
    pub perfect_autoscaler_gpu_hours: f64,
    /// The most replicas the run used, held for its whole length.
    pub static_peak_gpu_hours: f64,
}

/// What one configuration did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// Requests in the trace.
    pub requests: usize,
    /// Requests served.
    pub served: usize,
    /// Requests dropped (they cannot fit a replica's KV cache).
    pub dropped: usize,
    /// Prompt tokens of the trace.
    pub input_tokens: u64,
    /// Output tokens of the trace.
    pub output_tokens: u64,
    /// From the first arrival to the last request done, seconds.
    pub duration_s: f64,
    /// GPUs per replica.
    pub gpus_per_replica: u32,
    /// Time to first token.
    pub ttft_ms: Option<Latency>,
    /// Time per output token after the first.
    pub tpot_ms: Option<Latency>,
    /// Arrival to last token.
    pub e2e_ms: Option<Latency>,
    /// Share of all requests that met the SLOs given (dropped ones did not); `None` without
    /// an SLO.
    pub slo_attainment: Option<f64>,
    /// ∫ replicas dt × GPUs per replica, hours.
    pub gpu_hours: f64,
    /// Of which on spot.
    pub spot_gpu_hours: f64,
    /// Spot replicas preempted.
    pub preemptions: u64,
    /// Requests sent back to the queue by a preemption (their progress lost).
    pub requeued: u64,
    /// Sequences preempted because the KV cache was full (continuous batching, as vLLM
    /// does): their cache freed, their prompt and tokens so far prefilled again later.
    pub recomputed: u64,
    /// On-demand GPU-hours × the price, plus spot GPU-hours × the spot price.
    pub cost_usd: f64,
    /// Replicas over time (a point at every change).
    pub timeline: Vec<Point>,
    /// References.
    pub bounds: Bounds,
    /// What was simulated.
    pub config: Config,
}

/// Latency objectives, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Slo {
    /// Time to first token.
    pub ttft_ms: Option<f64>,
    /// Time per output token.
    pub tpot_ms: Option<f64>,
}

struct Sim<'a> {
    reqs: &'a [Request],
    model: &'a StepModel,
    cfg: &'a Config,
    replicas: Vec<Replica>,
    queue: std::collections::VecDeque<usize>,
    first_token: Vec<f64>,
    done: Vec<f64>,
    dropped: usize,
    busy_s: f64,
    timeline: Vec<Point>,
    last_scale: f64,
    /// The load at each look (for the predictive policy).
    history: Vec<(f64, usize)>,
    preemptions: u64,
    requeued: u64,
    /// Tokens each request had generated when the KV cache last preempted it (0 otherwise).
    resume: Vec<u32>,
    /// Sequences preempted because the KV cache was full.
    recomputed: u64,
}

impl Sim<'_> {
    fn billed(&self) -> u32 {
        self.replicas
            .iter()
            .filter(|r| r.state != State::Off)
            .count() as u32
    }

    fn note(&mut self, t: f64) {
        let n = self.billed();
        let spot = self
            .replicas
            .iter()
            .filter(|r| r.spot && r.state != State::Off)
            .count() as u32;
        match self.timeline.last_mut() {
            Some(p) if p.replicas == n && p.spot == spot => {}
            Some(p) if (p.t_s - t).abs() < 1e-12 => {
                p.replicas = n;
                p.spot = spot;
            }
            _ => self.timeline.push(Point {
                t_s: t,
                replicas: n,
                spot,
            }),
        }
    }

    fn start_replica(&mut self, now: f64, startup_s: f64) {
        self.start(now, startup_s, false);
    }

    fn start(&mut self, now: f64, startup_s: f64, spot: bool) {
        let state = if startup_s > 0.0 {
            State::Starting(now + startup_s)
        } else {
            State::Active
        };
        let fresh = Replica {
            state,
            spot,
            running: Vec::new(),
            kv_used: 0.0,
            busy_until: None,
            work: Vec::new(),
            in_static_batch: false,
        };
        match self.replicas.iter().position(|r| r.state == State::Off) {
            Some(i) => self.replicas[i] = fresh,
            None => self.replicas.push(fresh),
        }
        self.note(now);
    }

    /// Admit waiting requests to replica `i`. Static batches hold a sequence's whole prompt
    /// and output in the KV cache from the start; continuous batching takes the prompt's and
    /// grows a token per decode, as vLLM allocates blocks, leaving room for the next token of
    /// every sequence already decoding. Prompts first admits at most a budget of prompt tokens
    /// (at least one prompt) per iteration.
    fn admit(&mut self, i: usize) {
        let cap = self.model.kv_capacity_tokens;
        let max = self.cfg.batching.max_batch();
        let (on_demand, prompt_budget) = match self.cfg.batching {
            Batching::Static { .. } => (false, f64::INFINITY),
            Batching::Continuous { .. } => (true, f64::INFINITY),
            Batching::PromptsFirst { token_budget, .. } => (true, f64::from(token_budget.max(1))),
        };
        let growth = if on_demand {
            self.decoding(i) as f64
        } else {
            0.0
        };
        let mut prompts = 0.0;
        while self.replicas[i].running.len() < max {
            let Some(&q) = self.queue.front() else { break };
            let r = self.reqs[q];
            let target = r.input + self.resume[q];
            let need = if on_demand {
                f64::from(target)
            } else {
                f64::from(r.input) + f64::from(r.output)
            };
            if self.replicas[i].kv_used + need + growth > cap {
                break;
            }
            if prompts > 0.0 && prompts + f64::from(target) > prompt_budget {
                break;
            }
            prompts += f64::from(target);
            self.queue.pop_front();
            let rep = &mut self.replicas[i];
            rep.kv_used += need;
            rep.running.push(Seq {
                req: q,
                target,
                prefilled: 0,
                generated: self.resume[q],
                kv: need,
            });
        }
    }

    /// Sequences of replica `i` past their prompt with tokens still to generate.
    fn decoding(&self, i: usize) -> usize {
        self.replicas[i]
            .running
            .iter()
            .filter(|s| s.prefilled >= s.target && s.generated < self.reqs[s.req].output)
            .count()
    }

    /// When the KV cache cannot take the next token of every decoding sequence, preempt the
    /// latest admitted until it can (vLLM's recompute: its cache freed, its prompt and the
    /// tokens it generated prefilled again when it is admitted again, from the queue's front).
    fn make_room(&mut self, i: usize) {
        let cap = self.model.kv_capacity_tokens;
        while self.replicas[i].running.len() > 1
            && self.replicas[i].kv_used + self.decoding(i) as f64 > cap
        {
            let Some(s) = self.replicas[i].running.pop() else {
                break;
            };
            self.replicas[i].kv_used -= s.kv;
            self.resume[s.req] = s.generated;
            self.queue.push_front(s.req);
            self.recomputed += 1;
        }
    }

    /// Start an iteration on idle replica `i` at `now`, if it has work.
    fn start_step(&mut self, i: usize, now: f64) {
        if self.replicas[i].state == State::Active {
            match self.cfg.batching {
                Batching::Continuous { .. } | Batching::PromptsFirst { .. } => self.admit(i),
                Batching::Static {
                    max_batch,
                    timeout_s,
                } => {
                    if !self.replicas[i].in_static_batch {
                        let oldest = self.queue.front().map(|q| self.reqs[*q].arrival_s);
                        let full = self.queue.len() >= max_batch.max(1) as usize;
                        if full || oldest.is_some_and(|a| now - a >= timeout_s - 1e-9) {
                            self.admit(i);
                            self.replicas[i].in_static_batch = !self.replicas[i].running.is_empty();
                        }
                    }
                }
            }
        }
        let budget = match self.cfg.batching {
            Batching::Continuous { token_budget, .. }
            | Batching::PromptsFirst { token_budget, .. } => f64::from(token_budget.max(1)),
            Batching::Static { .. } => f64::INFINITY,
        };
        // Prompts first: an iteration with a prompt to prefill decodes nothing.
        let prompts_only = matches!(self.cfg.batching, Batching::PromptsFirst { .. })
            && self.replicas[i]
                .running
                .iter()
                .any(|s| s.prefilled < s.target);
        if !prompts_only && !matches!(self.cfg.batching, Batching::Static { .. }) {
            self.make_room(i);
        }
        let r = &mut self.replicas[i];
        let mut w = Work::default();
        r.work.clear();
        let mut left = budget;
        for (k, s) in r.running.iter().enumerate() {
            let req = self.reqs[s.req];
            if s.prefilled < s.target {
                if left < 1.0 {
                    continue;
                }
                let chunk = (f64::from(s.target - s.prefilled)).min(left);
                let start = f64::from(s.prefilled);
                w.prefill_tokens += chunk;
                w.prefill_context += chunk * (start + chunk / 2.0);
                if start + chunk >= f64::from(s.target) {
                    // The chunk that ends a prompt samples its first token.
                    w.sampled += 1;
                }
                left -= chunk;
                r.work.push((k, chunk as u32, false));
            } else if prompts_only {
                continue;
            } else if s.generated < req.output {
                w.decode_seqs += 1;
                w.sampled += 1;
                w.decode_context += f64::from(req.input + s.generated);
                r.work.push((k, 0, true));
            } else if r.in_static_batch {
                // A finished sequence keeps its place in a static batch.
                w.decode_seqs += 1;
                w.sampled += 1;
                w.decode_context += f64::from(req.input + req.output);
            }
        }
        if r.work.is_empty() {
            r.busy_until = None;
            return;
        }
        let dt = self.model.step_s(&w);
        self.busy_s += dt;
        r.busy_until = Some(now + dt);
    }

    /// The iteration of replica `i` ends at `now`.
    fn end_step(&mut self, i: usize, now: f64) {
        let on_demand = !matches!(self.cfg.batching, Batching::Static { .. });
        let r = &mut self.replicas[i];
        r.busy_until = None;
        let work = std::mem::take(&mut r.work);
        let mut grown = 0.0;
        for (k, chunk, decode) in work {
            let s = &mut r.running[k];
            let req = self.reqs[s.req];
            if decode {
                s.generated += 1;
                if on_demand {
                    // The token decoded now is written to the cache.
                    s.kv += 1.0;
                    grown += 1.0;
                }
            } else {
                s.prefilled += chunk;
                if s.prefilled >= s.target {
                    if s.generated == 0 {
                        // The iteration that finishes the prompt gives the first token.
                        s.generated = 1;
                        self.first_token[s.req] = now;
                    } else {
                        // A recomputed sequence's prefill gives its next token.
                        s.generated += 1;
                    }
                }
            }
            if s.prefilled >= s.target && s.generated >= req.output.max(1) {
                self.done[s.req] = self.done[s.req].min(now);
            }
        }
        r.kv_used += grown;
        debug_assert!(
            r.kv_used <= self.model.kv_capacity_tokens + 1e-6,
            "the KV cache holds more than it can: {} of {}",
            r.kv_used,
            self.model.kv_capacity_tokens
        );
        let static_batch = r.in_static_batch;
        let mut freed = 0.0;
        let done = &self.done;
        if !static_batch || r.running.iter().all(|s| done[s.req].is_finite()) {
            r.running.retain(|s| {
                let finished = done[s.req].is_finite();
                if finished {
                    freed += s.kv;
                }
                !finished
            });
            r.in_static_batch = false;
        }
        r.kv_used -= freed;
        if r.state == State::Draining && r.running.is_empty() {
            r.state = State::Off;
            self.note(now);
        }
    }
}

/// Replay `reqs` (sorted by arrival) on `cfg`.
#[must_use]
pub fn simulate(reqs: &[Request], model: &StepModel, cfg: &Config, slo: Slo) -> Outcome {
    let mut sim = Sim {
        reqs,
        model,
        cfg,
        replicas: Vec::new(),
        queue: std::collections::VecDeque::new(),
        first_token: vec![f64::INFINITY; reqs.len()],
        done: vec![f64::INFINITY; reqs.len()],
        dropped: 0,
        busy_s: 0.0,
        timeline: Vec::new(),
        last_scale: f64::NEG_INFINITY,
        history: Vec::new(),
        preemptions: 0,
        requeued: 0,
        resume: vec![0; reqs.len()],
        recomputed: 0,
    };
    let spot = cfg.spot.as_ref().map_or(0, |s| s.replicas);
    let initial = match &cfg.scaling {
        Scaling::Fixed { replicas } => (*replicas).max(1).saturating_sub(spot),
        Scaling::Autoscale { min, warm, max, .. } => (*min + *warm).min(*max),
        Scaling::Schedule {
            replicas_by_hour, ..
        } => replicas_by_hour.first().copied().unwrap_or(0),
    };
    for _ in 0..initial {
        sim.start_replica(0.0, 0.0);
    }
    spot_follow(&mut sim, 0.0, true);
    sim.note(0.0);
    let end = run(&mut sim);
    summarize(&sim, end, slo)
}

/// The event loop: arrivals, iteration ends, replicas becoming ready, static-batch timeouts and
/// autoscaler looks, in time order. Returns the time the last request was done.
fn run(sim: &mut Sim<'_>) -> f64 {
    let reqs = sim.reqs;
    let mut next_arrival = 0usize;
    let mut now = 0.0f64;
    let (interval, startup) = match &sim.cfg.scaling {
        Scaling::Autoscale {
            interval_s,
            startup_s,
            ..
        } => (interval_s.max(1e-3), *startup_s),
        Scaling::Schedule { startup_s, .. } => (SCHEDULE_LOOK_S, *startup_s),
        Scaling::Fixed { .. } => (f64::INFINITY, 0.0),
    };
    let mut next_look = interval;
    // A trace that never has capacity never brings a spot replica back: no ticks to wait for.
    let spot_tick_s = sim
        .cfg
        .spot
        .as_ref()
        .filter(|s| s.available.iter().any(|a| *a > 0))
        .map_or(f64::INFINITY, |s| s.tick_s);
    let mut next_spot = spot_tick_s;
    loop {
        let arrival = reqs.get(next_arrival).map(|r| r.arrival_s);
        let step_end = sim
            .replicas
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.busy_until.map(|t| (t, i)))
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let ready = sim
            .replicas
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r.state {
                State::Starting(t) => Some((t, i)),
                _ => None,
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        let timeout = static_timeout(sim);
        // (A state, not recomputed from `now`: an event at the same instant must not skip it.)
        let busy = arrival.is_some() || step_end.is_some() || !sim.queue.is_empty();
        let spot_tick = if busy { next_spot } else { f64::INFINITY };
        let pending =
            arrival.is_some() || step_end.is_some() || !sim.queue.is_empty() || ready.is_some();
        if !pending {
            return now;
        }
        let look = if sim.queue.is_empty() && arrival.is_none() && step_end.is_none() {
            f64::INFINITY
        } else {
            next_look
        };
        let t = [
            arrival.unwrap_or(f64::INFINITY),
            step_end.map_or(f64::INFINITY, |s| s.0),
            ready.map_or(f64::INFINITY, |s| s.0),
            timeout,
            look,
            spot_tick,
        ]
        .into_iter()
        .fold(f64::INFINITY, f64::min);
        if !t.is_finite() {
            // Requests wait and nothing will serve them (no replica and no autoscaler).
            sim.dropped += sim.queue.len();
            sim.queue.clear();
            return now;
        }
        now = t;
        if let Some((te, i)) = step_end
            && te <= now
        {
            sim.end_step(i, now);
        } else if let Some((tr, i)) = ready
            && tr <= now
        {
            sim.replicas[i].state = State::Active;
        } else if arrival.is_some_and(|a| a <= now) {
            // Every request arriving at this instant, before any replica starts an iteration.
            while let Some(r) = reqs.get(next_arrival).filter(|r| r.arrival_s <= now) {
                if f64::from(r.input) + f64::from(r.output) > sim.model.kv_capacity_tokens {
                    sim.dropped += 1;
                } else {
                    sim.queue.push_back(next_arrival);
                    cold_start(sim, now, startup);
                }
                next_arrival += 1;
            }
        } else if look <= now {
            autoscale(sim, now);
            next_look = now + interval;
        } else if spot_tick <= now {
            spot_follow(sim, now, false);
            next_spot = ((now / spot_tick_s).floor() + 1.0) * spot_tick_s;
        }
        for i in 0..sim.replicas.len() {
            if sim.replicas[i].busy_until.is_none() && sim.replicas[i].state != State::Off {
                sim.start_step(i, now);
            }
        }
    }
}

/// The time the oldest waiting request's static batch times out, if a replica is waiting.
fn static_timeout(sim: &Sim<'_>) -> f64 {
    match sim.cfg.batching {
        Batching::Static { timeout_s, .. } => {
            let idle = sim
                .replicas
                .iter()
                .any(|r| r.state == State::Active && r.busy_until.is_none());
            match sim.queue.front() {
                Some(q) if idle => sim.reqs[*q].arrival_s + timeout_s,
                _ => f64::INFINITY,
            }
        }
        Batching::Continuous { .. } | Batching::PromptsFirst { .. } => f64::INFINITY,
    }
}

/// Spot replicas follow the trace's availability at `now`: preempted above it (their requests
/// back to the front of the queue, progress lost), started (after the startup) below it.
fn spot_follow(sim: &mut Sim<'_>, now: f64, first: bool) {
    let Some(spot) = sim.cfg.spot.as_ref() else {
        return;
    };
    if spot.available.is_empty() || spot.replicas == 0 {
        return;
    }
    let tick = (now / spot.tick_s).floor() as usize % spot.available.len();
    let allowed = spot.available[tick].min(spot.replicas) as usize;
    let startup = if first { 0.0 } else { spot.startup_s };
    let live: Vec<usize> = (0..sim.replicas.len())
        .filter(|i| sim.replicas[*i].spot && sim.replicas[*i].state != State::Off)
        .collect();
    if live.len() > allowed {
        for &i in live.iter().skip(allowed) {
            let r = &mut sim.replicas[i];
            let back: Vec<usize> = r.running.drain(..).map(|s| s.req).collect();
            sim.requeued += back.len() as u64;
            for q in back.into_iter().rev() {
                // Progress lost with the replica: the request starts over.
                sim.resume[q] = 0;
                sim.queue.push_front(q);
            }
            if r.busy_until.is_some() {
                // The iteration in progress is lost with the replica.
                r.busy_until = None;
            }
            r.kv_used = 0.0;
            r.work.clear();
            r.in_static_batch = false;
            r.state = State::Off;
            sim.preemptions += 1;
        }
        sim.note(now);
    } else {
        for _ in live.len()..allowed {
            sim.start(now, startup, true);
        }
    }
}

/// How often a schedule is looked at, seconds.
const SCHEDULE_LOOK_S: f64 = 60.0;

/// A request arrives to no replica (scaled to zero): start one now.
fn cold_start(sim: &mut Sim<'_>, now: f64, startup: f64) {
    let can = match &sim.cfg.scaling {
        Scaling::Autoscale { max, .. } => *max > 0,
        Scaling::Schedule { .. } => true,
        Scaling::Fixed { .. } => false,
    };
    if can
        && sim
            .replicas
            .iter()
            .all(|r| matches!(r.state, State::Off | State::Draining))
    {
        sim.start_replica(now, startup);
        sim.last_scale = now;
    }
}

/// The replicas the policy wants at `now`, and the least time between two actions.
fn wanted(sim: &mut Sim<'_>, now: f64) -> Option<(u32, f64, f64)> {
    let slots = sim.cfg.batching.max_batch() as f64;
    let load: usize = sim.queue.len() + sim.replicas.iter().map(|r| r.running.len()).sum::<usize>();
    sim.history.push((now, load));
    let per =
        |load: usize, target: f64| (load as f64 / (slots * target.clamp(0.01, 1.0))).ceil() as u32;
    match &sim.cfg.scaling {
        Scaling::Fixed { .. } => None,
        Scaling::Autoscale {
            target,
            min,
            max,
            cooldown_s,
            startup_s,
            warm,
            predict_period_s,
            on_queue,
            ..
        } => {
            let mut want = per(load, *target);
            if *on_queue {
                let waiting = sim.queue.len();
                let have = sim
                    .replicas
                    .iter()
                    .filter(|r| matches!(r.state, State::Active | State::Starting(_)))
                    .count() as u32;
                want = if waiting > 0 {
                    have + per(waiting, *target)
                } else {
                    per(load, *target)
                };
            }
            if let Some(p) = predict_period_s {
                // What the load was one period before the time a replica started now is ready.
                let then = now + startup_s - p;
                let i = sim.history.partition_point(|(t, _)| *t <= then);
                if i > 0 {
                    want = want.max(per(sim.history[i - 1].1, *target));
                }
            }
            Some(((want + warm).clamp(*min, *max), *cooldown_s, *startup_s))
        }
        Scaling::Schedule {
            period_s,
            replicas_by_hour,
            startup_s,
        } => {
            let at = |t: f64| {
                let h = (t.rem_euclid(*period_s) / 3600.0) as usize;
                replicas_by_hour.get(h).copied().unwrap_or(0)
            };
            // Ready for the coming hour, and not below the present one.
            Some((at(now).max(at(now + startup_s)), 0.0, *startup_s))
        }
    }
}

/// Look at the load (or the schedule) and start or stop replicas.
fn autoscale(sim: &mut Sim<'_>, now: f64) {
    let Some((want, cooldown_s, startup_s)) = wanted(sim, now) else {
        return;
    };
    let have = sim
        .replicas
        .iter()
        .filter(|r| matches!(r.state, State::Active | State::Starting(_)))
        .count() as u32;
    if want == have || now - sim.last_scale < cooldown_s {
        return;
    }
    sim.last_scale = now;
    if want > have {
        for _ in have..want {
            sim.start_replica(now, startup_s);
        }
        return;
    }
    // Stop the emptiest first; one with nothing running is off at once.
    let mut order: Vec<usize> = (0..sim.replicas.len())
        .filter(|i| matches!(sim.replicas[*i].state, State::Active | State::Starting(_)))
        .collect();
    order.sort_by_key(|i| sim.replicas[*i].running.len());
    for i in order.into_iter().take((have - want) as usize) {
        let r = &mut sim.replicas[i];
        r.state = if r.running.is_empty() && r.busy_until.is_none() {
            State::Off
        } else {
            State::Draining
        };
    }
    sim.note(now);
}

/// A schedule from a run: for each hour of the period, the most replicas the run held in that
/// hour (the schedule a team would set from this history).
#[must_use]
pub fn schedule_from(o: &Outcome, period_s: f64) -> Vec<u32> {
    let hours = (period_s / 3600.0).ceil().max(1.0) as usize;
    let mut out = vec![0u32; hours];
    for w in o.timeline.windows(2) {
        let (a, b) = (w[0].t_s, w[1].t_s);
        let mut t = a;
        while t < b {
            let h = (t.rem_euclid(period_s) / 3600.0) as usize % hours;
            out[h] = out[h].max(w[0].replicas);
            t = ((t / 3600.0).floor() + 1.0) * 3600.0;
        }
    }
    out
}

fn summarize(sim: &Sim<'_>, end: f64, slo: Slo) -> Outcome {
    let reqs = sim.reqs;
    let served: Vec<usize> = (0..reqs.len())
        .filter(|i| sim.done[*i].is_finite())
        .collect();
    let ttft: Vec<f64> = served
        .iter()
        .map(|&i| sim.first_token[i] - reqs[i].arrival_s)
        .collect();
    let tpot: Vec<f64> = served
        .iter()
        .filter(|&&i| reqs[i].output > 1)
        .map(|&i| (sim.done[i] - sim.first_token[i]) / f64::from(reqs[i].output - 1))
        .collect();
    let e2e: Vec<f64> = served
        .iter()
        .map(|&i| sim.done[i] - reqs[i].arrival_s)
        .collect();
    let slo_attainment = (slo.ttft_ms.is_some() || slo.tpot_ms.is_some()).then(|| {
        let ok = served
            .iter()
            .filter(|&&i| {
                let t = (sim.first_token[i] - reqs[i].arrival_s) * 1e3;
                let p = if reqs[i].output > 1 {
                    (sim.done[i] - sim.first_token[i]) / f64::from(reqs[i].output - 1) * 1e3
                } else {
                    0.0
                };
                slo.ttft_ms.is_none_or(|s| t <= s) && slo.tpot_ms.is_none_or(|s| p <= s)
            })
            .count();
        ok as f64 / reqs.len().max(1) as f64
    });
    let mut timeline = sim.timeline.clone();
    let last = timeline.last().map_or(0, |p| p.replicas);
    if timeline.last().is_none_or(|p| p.t_s < end) {
        let spot = timeline.last().map_or(0, |p| p.spot);
        timeline.push(Point {
            t_s: end,
            replicas: last,
            spot,
        });
    }
    let replica_s: f64 = timeline
        .windows(2)
        .map(|w| f64::from(w[0].replicas) * (w[1].t_s - w[0].t_s))
        .sum();
    let gpus = f64::from(sim.model.gpus.max(1));
    let gpu_hours = replica_s * gpus / 3600.0;
    let spot_s: f64 = timeline
        .windows(2)
        .map(|w| f64::from(w[0].spot) * (w[1].t_s - w[0].t_s))
        .sum();
    let spot_gpu_hours = spot_s * gpus / 3600.0;
    let spot_price = sim.cfg.spot.as_ref().map_or(0.0, |s| s.usd_per_gpu_hour);
    let peak = timeline.iter().map(|p| p.replicas).max().unwrap_or(0);
    Outcome {
        requests: reqs.len(),
        served: served.len(),
        dropped: sim.dropped,
        input_tokens: reqs.iter().map(|r| u64::from(r.input)).sum(),
        output_tokens: reqs.iter().map(|r| u64::from(r.output)).sum(),
        duration_s: end,
        gpus_per_replica: sim.model.gpus.max(1),
        ttft_ms: latency(ttft),
        tpot_ms: latency(tpot),
        e2e_ms: latency(e2e),
        slo_attainment,
        gpu_hours,
        spot_gpu_hours,
        preemptions: sim.preemptions,
        requeued: sim.requeued,
        recomputed: sim.recomputed,
        cost_usd: (gpu_hours - spot_gpu_hours) * sim.cfg.usd_per_gpu_hour
            + spot_gpu_hours * spot_price,
        timeline,
        bounds: Bounds {
            perfect_autoscaler_gpu_hours: sim.busy_s * gpus / 3600.0,
            static_peak_gpu_hours: f64::from(peak) * end * gpus / 3600.0,
        },
        config: sim.cfg.clone(),
    }
}

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.serve/v1";

/// The trace as read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceInfo {
    /// File name.
    pub name: String,
    /// Format read.
    pub format: &'static str,
    /// Rows skipped, by reason.
    pub skipped: std::collections::BTreeMap<String, u64>,
    /// Rows that arrived before the row above them (sorted into place).
    pub out_of_order: u64,
}

/// `gpuwise.serve/v1`: one configuration's figures (with a sweep: the chosen one's), and with
/// a sweep the cost–latency front and every candidate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServeReport {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The model served.
    pub model: String,
    /// The traffic.
    pub trace: TraceInfo,
    /// The figures.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The SLO held to.
    pub slo: Slo,
    /// With a sweep: whether a configuration met the SLO for the required share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo_met: Option<bool>,
    /// With a sweep: the cost–latency Pareto front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub front: Option<Vec<Candidate>>,
    /// With a sweep: every configuration, cheapest first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidates: Option<Vec<Candidate>>,
    /// What the figures assume.
    pub notes: Vec<String>,
}

/// One configuration of a sweep, in a line.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Candidate {
    /// What was simulated.
    pub config: Config,
    /// Cost, USD.
    pub cost_usd: f64,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// SLO attainment.
    pub slo_attainment: Option<f64>,
    /// 99th percentile of time to first token, ms.
    pub ttft_p99_ms: Option<f64>,
    /// 99th percentile of end-to-end latency, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Requests dropped.
    pub dropped: usize,
}

impl Candidate {
    fn of(o: &Outcome) -> Self {
        Self {
            config: o.config.clone(),
            cost_usd: o.cost_usd,
            gpu_hours: o.gpu_hours,
            slo_attainment: o.slo_attainment,
            ttft_p99_ms: o.ttft_ms.as_ref().map(|l| l.p99),
            e2e_p99_ms: o.e2e_ms.as_ref().map(|l| l.p99),
            dropped: o.dropped,
        }
    }
}

/// A sweep's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// The cheapest configuration that meets the SLO for at least `attainment` of requests.
    pub chosen: Option<Outcome>,
    /// Every configuration, cheapest first.
    pub candidates: Vec<Candidate>,
    /// The cost–latency Pareto front (cost against p99 end-to-end latency), cheapest first.
    pub front: Vec<Candidate>,
}

/// Simulate every configuration (across `threads`), and choose.
#[must_use]
pub fn sweep(
    reqs: &[Request],
    configs: &[(StepModel, Config)],
    slo: Slo,
    attainment: f64,
    threads: usize,
) -> Sweep {
    let threads = threads.clamp(1, configs.len().max(1));
    // Each worker takes the next configuration (an overloaded one runs much longer than a
    // comfortable one, so fixed shares would leave a core idle).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::with_capacity(configs.len()));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some((m, c)) = configs.get(i) else { break };
                    let o = simulate(reqs, m, c, slo);
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, o));
                }
            });
        }
    });
    let mut done = done
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_by_key(|(i, _)| *i);
    let outcomes: Vec<Option<Outcome>> = done.into_iter().map(|(_, o)| Some(o)).collect();
    let mut all: Vec<Outcome> = outcomes.into_iter().flatten().collect();
    all.sort_by(|a, b| a.cost_usd.total_cmp(&b.cost_usd));
    let candidates: Vec<Candidate> = all.iter().map(Candidate::of).collect();
    let chosen = all
        .iter()
        .find(|o| o.slo_attainment.is_some_and(|a| a >= attainment))
        .cloned();
    let mut front = Vec::new();
    let mut best = f64::INFINITY;
    for c in &candidates {
        if let Some(l) = c.e2e_p99_ms
            && c.dropped == 0
            && l < best
        {
            best = l;
            front.push(c.clone());
        }
    }
    Sweep {
        chosen,
        candidates,
        front,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica whose iterations take `d` seconds whatever they hold (deterministic service).
    fn flat(step_s: f64) -> StepModel {
        StepModel {
            service: Service::Fixed { step_s },
            kv_capacity_tokens: 1e12,
            gpus: 1,
            measured_decode_s: Vec::new(),
        }
    }

    fn cfg(replicas: u32, batching: Batching) -> Config {
        Config {
            gpu: "test".into(),
            usd_per_gpu_hour: 2.0,
            batching,
            scaling: Scaling::Fixed { replicas },
            spot: None,
        }
    }

    const ONE: Batching = Batching::Continuous {
        max_batch: 1,
        token_budget: 1 << 20,
    };

    fn poisson(rate: f64, n: usize, seed: u64) -> Vec<Request> {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut t = 0.0;
        (0..n)
            .map(|_| {
                t += -(1.0 - rng.f64()).ln() / rate;
                // One prompt token and one output token: one iteration of service.
                Request {
                    arrival_s: t,
                    input: 1,
                    output: 1,
                }
            })
            .collect()
    }

    #[test]
    fn one_replica_at_batch_one_is_md1() {
        // Pollaczek–Khinchine for M/D/1: Wq = ρ·D / (2(1 − ρ)).
        let d = 1.0;
        for rho in [0.5, 0.8] {
            let reqs = poisson(rho / d, 200_000, 3);
            let o = simulate(&reqs, &flat(d), &cfg(1, ONE), Slo::default());
            let wq = o.ttft_ms.expect("ttft").mean / 1e3 - d;
            let want = rho * d / (2.0 * (1.0 - rho));
            assert!(
                (wq / want - 1.0).abs() < 0.04,
                "ρ {rho}: Wq {wq}, P-K {want}"
            );
            assert_eq!(o.served, reqs.len());
        }
    }

    #[test]
    fn c_replicas_at_batch_one_are_mdc() {
        // M/D/c mean wait by the Cosmetatos correction of the M/M/c (Erlang C) wait, which is
        // within about 1 % of the exact M/D/c at these loads.
        let (d, c) = (1.0, 4u32);
        let rho = 0.8;
        let lambda = rho * f64::from(c) / d;
        let reqs = poisson(lambda, 200_000, 5);
        let o = simulate(&reqs, &flat(d), &cfg(c, ONE), Slo::default());
        let wq = o.ttft_ms.expect("ttft").mean / 1e3 - d;
        let a = lambda * d;
        let cf = f64::from(c);
        let mut sum = 0.0;
        let mut term = 1.0;
        for k in 0..c {
            if k > 0 {
                term *= a / f64::from(k);
            }
            sum += term;
        }
        let last = term * a / cf;
        let erlang_c = last / (1.0 - rho) / (sum + last / (1.0 - rho));
        let wq_mmc = erlang_c * d / (cf * (1.0 - rho));
        let cosmetatos = 0.5
            * wq_mmc
            * (1.0
                + (1.0 - rho) * (cf - 1.0) * ((4.0 + 5.0 * cf).sqrt() - 2.0) / (16.0 * rho * cf));
        assert!(
            (wq / cosmetatos - 1.0).abs() < 0.05,
            "Wq {wq}, M/D/c {cosmetatos}"
        );
    }

    #[test]
    fn gpu_hours_are_the_timeline_and_bounds_hold() {
        let reqs = poisson(0.5, 2_000, 9);
        let auto = Config {
            scaling: Scaling::Autoscale {
                target: 0.7,
                min: 0,
                max: 8,
                cooldown_s: 30.0,
                startup_s: 20.0,
                interval_s: 10.0,
                warm: 0,
                predict_period_s: None,
                on_queue: false,
            },
            ..cfg(1, ONE)
        };
        for c in [cfg(3, ONE), auto] {
            let o = simulate(
                &reqs,
                &flat(1.0),
                &c,
                Slo {
                    ttft_ms: Some(5_000.0),
                    tpot_ms: None,
                },
            );
            let integral: f64 = o
                .timeline
                .windows(2)
                .map(|w| f64::from(w[0].replicas) * (w[1].t_s - w[0].t_s))
                .sum::<f64>()
                / 3600.0;
            assert!((o.gpu_hours - integral).abs() < 1e-9);
            assert!(o.bounds.perfect_autoscaler_gpu_hours <= o.gpu_hours + 1e-9);
            assert!(o.gpu_hours <= o.bounds.static_peak_gpu_hours + 1e-9);
            assert_eq!(o.served + o.dropped, reqs.len());
            assert!((o.cost_usd - 2.0 * o.gpu_hours).abs() < 1e-9);
        }
    }

    #[test]
    fn batching_serves_more_per_replica_and_static_waits() {
        // Ten requests at once, 100 output tokens each; a step costs 10 ms at any batch size.
        let reqs: Vec<Request> = (0..10)
            .map(|_| Request {
                arrival_s: 0.0,
                input: 10,
                output: 100,
            })
            .collect();
        let m = flat(0.01);
        let one = simulate(&reqs, &m, &cfg(1, ONE), Slo::default());
        let cont = Batching::Continuous {
            max_batch: 16,
            token_budget: 4096,
        };
        let many = simulate(&reqs, &m, &cfg(1, cont), Slo::default());
        // Batch 1: 10 × (1 prefill + 99 decode) steps; batched: 1 + 99.
        assert!((one.duration_s - 10.0).abs() < 1e-9, "{}", one.duration_s);
        assert!((many.duration_s - 1.0).abs() < 1e-9, "{}", many.duration_s);
        let stat = Batching::Static {
            max_batch: 16,
            timeout_s: 0.5,
        };
        let s = simulate(&reqs, &m, &cfg(1, stat), Slo::default());
        // The batch never fills: it starts at the timeout.
        assert!((s.duration_s - 1.5).abs() < 1e-9, "{}", s.duration_s);
    }

    #[test]
    fn spot_that_never_comes_back_ends_the_run() {
        // One replica, on spot: a trace with capacity one tick in four preempts it and brings
        // it back as it repeats, so every request is served; one with no capacity at all
        // never serves, and the run ends with the requests dropped.
        let reqs = poisson(1.0, 100, 4);
        let mut c = cfg(1, ONE);
        c.spot = Some(Spot {
            replicas: 1,
            usd_per_gpu_hour: 1.0,
            trace: "t".into(),
            tick_s: 30.0,
            available: vec![1, 0, 0, 0],
            startup_s: 0.0,
        });
        let o = simulate(&reqs, &flat(1.0), &c, Slo::default());
        assert!(o.preemptions >= 2, "{}", o.preemptions);
        assert_eq!(o.served, reqs.len());
        assert!(o.requeued > 0);
        c.spot.as_mut().expect("spot").available = vec![0];
        let o = simulate(&reqs, &flat(1.0), &c, Slo::default());
        assert_eq!((o.served, o.dropped), (0, reqs.len()));
    }

    #[test]
    fn a_measured_profile_replaces_the_decode_steps() {
        // Roofline: 10 ms a step. Measured decode: 50 ms at batch 1, 90 ms at batch 3 (linear
        // between). One request: its prefill stays 10 ms, its 10 decode steps take 50 ms.
        let mut m = flat(0.01);
        m.measured_decode_s = vec![(1, 0.05), (3, 0.09)];
        let one = [Request {
            arrival_s: 0.0,
            input: 1,
            output: 11,
        }];
        let o = simulate(&one, &m, &cfg(1, ONE), Slo::default());
        assert!((o.duration_s - 0.51).abs() < 1e-9, "{}", o.duration_s);
        assert!((m.measured(2) - 0.07).abs() < 1e-12);
        assert!((m.measured(9) - 0.09).abs() < 1e-12);
    }

    #[test]
    fn too_big_for_the_cache_is_dropped() {
        let mut m = flat(0.01);
        m.kv_capacity_tokens = 100.0;
        let reqs = vec![
            Request {
                arrival_s: 0.0,
                input: 50,
                output: 10,
            },
            Request {
                arrival_s: 1.0,
                input: 500,
                output: 10,
            },
        ];
        let o = simulate(
            &reqs,
            &m,
            &cfg(1, ONE),
            Slo {
                ttft_ms: Some(1e6),
                tpot_ms: None,
            },
        );
        assert_eq!((o.served, o.dropped), (1, 1));
        assert_eq!(o.slo_attainment, Some(0.5));
    }

    fn four_long_answers() -> Vec<Request> {
        (0..4)
            .map(|_| Request {
                arrival_s: 0.0,
                input: 100,
                output: 400,
            })
            .collect()
    }

    const EIGHT: Batching = Batching::Continuous {
        max_batch: 8,
        token_budget: 1 << 20,
    };

    #[test]
    fn a_full_kv_cache_preempts_the_latest_and_recomputes_it() {
        // Room for 1,000 tokens; four sequences grow to 500 each. Without pressure: one
        // iteration prefills all four (their first tokens at 10 ms), 399 decode the rest.
        let mut roomy = flat(0.01);
        roomy.kv_capacity_tokens = 1e6;
        let free = simulate(&four_long_answers(), &roomy, &cfg(1, EIGHT), Slo::default());
        assert_eq!(free.recomputed, 0);
        assert!((free.duration_s - 4.0).abs() < 1e-9, "{}", free.duration_s);
        let mut tight = flat(0.01);
        tight.kv_capacity_tokens = 1000.0;
        let o = simulate(&four_long_answers(), &tight, &cfg(1, EIGHT), Slo::default());
        assert_eq!((o.served, o.dropped), (4, 0));
        assert!(o.recomputed >= 1, "{}", o.recomputed);
        // The cache never held more than its room (the engine asserts it at every iteration),
        // so at most two sequences of 500 finish together: the work takes longer ...
        assert!(o.duration_s > free.duration_s + 1.0, "{}", o.duration_s);
        // ... but no more than running them two at a time, plus a recompute each.
        assert!(
            o.duration_s < 2.0 * free.duration_s + 0.1,
            "{}",
            o.duration_s
        );
        // A recomputed sequence keeps the first token it gave.
        let ttft = o.ttft_ms.expect("served");
        assert!((ttft.p99 - 10.0).abs() < 1e-6, "{}", ttft.p99);
    }

    #[test]
    fn prompts_first_never_decodes_while_a_prompt_waits() {
        // One long request decoding; a second arrives at 1 s. Prompts first: the second's
        // prompt runs alone in the next iteration; mixed: the same iteration also decodes the
        // first. With a fixed step both give the second its first token one iteration after
        // it is admitted, and the first request loses exactly one iteration to the prompt.
        let reqs = vec![
            Request {
                arrival_s: 0.0,
                input: 10,
                output: 300,
            },
            Request {
                arrival_s: 1.0,
                input: 10,
                output: 2,
            },
        ];
        let first = Batching::PromptsFirst {
            max_batch: 8,
            token_budget: 1 << 20,
        };
        let a = simulate(&reqs, &flat(0.01), &cfg(1, first), Slo::default());
        let b = simulate(&reqs, &flat(0.01), &cfg(1, EIGHT), Slo::default());
        // The first request: 300 iterations mixed, 301 with one prompt-only iteration.
        assert!((b.duration_s - 3.0).abs() < 1e-9, "{}", b.duration_s);
        assert!((a.duration_s - 3.01).abs() < 1e-9, "{}", a.duration_s);
        assert_eq!(a.recomputed, 0);
    }
}
