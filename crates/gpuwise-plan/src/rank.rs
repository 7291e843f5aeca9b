//! `gpuwise plan`: every GPU × count × cloud × pricing option, priced and ranked.
//!
//! For each catalog GPU with the figures the mode needs, GPU counts 1, 2, 4, … up to the limit
//! are tried; unless the workload fixes its parallelism, inference splits the model by tensor
//! parallelism over the GPUs and training shards it with ZeRO-3 / FSDP over data parallel
//! ranks. The first three counts that fit are priced at every cloud and pricing model the
//! catalog lists (the cheapest instance per GPU-hour of each). Options are ranked by $ per 1M
//! tokens among those meeting the constraints; the Pareto front of total cost against time is
//! marked; the picks are the cheapest, the fastest and the balanced one (the front's option
//! with the least cost × time).

use serde::Serialize;

use super::memory::{self, Memory};
use super::perf::{self, Constants};
use super::workload::Mode;
use super::{GIB, Hardware, Model, Setup, Workload};
use gpuwise_catalog::{Catalog, Pricing};

/// Limits an option must meet.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Constraints {
    /// Most time per output token, ms (inference).
    pub max_latency_ms: Option<f64>,
    /// Fewest tokens per second, all GPUs.
    pub min_tokens_per_s: Option<f64>,
    /// Most hours to finish the tokens.
    pub deadline_hours: Option<f64>,
    /// Most dollars for the tokens.
    pub budget_usd: Option<f64>,
}

/// What to plan.
#[derive(Clone, Debug)]
pub struct Request {
    /// The model.
    pub model: Model,
    /// The workload.
    pub workload: Workload,
    /// Only these GPUs (canonical names); all when `None`.
    pub gpus: Option<Vec<String>>,
    /// Only these clouds.
    pub clouds: Option<Vec<String>>,
    /// Only this pricing model.
    pub pricing: Option<Pricing>,
    /// Tokens to train on or to generate (the unit of the cost).
    pub tokens: f64,
    /// Most GPUs per option.
    pub max_gpus: u32,
    /// Network bandwidth per machine for options that span machines, Gbit/s (stated by the
    /// user; else the catalog's figure for the instance type).
    pub network_gbps: Option<f64>,
    /// Limits.
    pub constraints: Constraints,
    /// Constants.
    pub constants: Constants,
}

/// One priced option.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlanOption {
    /// GPU.
    pub gpu: String,
    /// GPUs.
    pub count: u32,
    /// Cloud.
    pub cloud: String,
    /// Instance type the price comes from.
    pub instance_type: String,
    /// Region of that price.
    pub region: String,
    /// Pricing model.
    pub pricing: Pricing,
    /// $ per GPU-hour.
    pub usd_per_gpu_hour: f64,
    /// Instances rented (a cloud rents machines, not GPUs).
    pub machines: u32,
    /// GPUs paid for: the machines' GPUs, at least `count` (one GPU on an 8-GPU-only type
    /// pays for eight).
    pub gpus_billed: u32,
    /// Date of the price.
    pub price_as_of: String,
    /// Memory per GPU, GiB (runtime terms included).
    pub memory_per_gpu_gib: f64,
    /// GPU memory, GiB.
    pub gpu_memory_gib: f64,
    /// Tokens per second, all GPUs.
    pub tokens_per_s: f64,
    /// The machines' network, Gbit/s each, when a training option spans machines.
    pub network_gbps: Option<f64>,
    /// Share of each training step spent waiting on data-parallel traffic (0 when it hides
    /// behind the compute).
    pub dp_comm_share: Option<f64>,
    /// Time per output token, ms (inference).
    pub tpot_ms: Option<f64>,
    /// Whether a decode step is `memory`- or `compute`-bound (inference).
    pub decode_bound: Option<&'static str>,
    /// Batch at which decode turns compute-bound (the roofline crossover; inference).
    pub crossover_batch: Option<f64>,
    /// Model FLOPs utilization (training).
    pub mfu: Option<f64>,
    /// Hours for the tokens.
    pub hours: f64,
    /// GPU-hours for the tokens: hours × GPUs.
    pub gpu_hours: f64,
    /// Dollars for the tokens: hours × count × $/GPU-hour.
    pub total_usd: f64,
    /// $ per million tokens.
    pub usd_per_million_tokens: f64,
    /// Constraints it breaks.
    pub violates: Vec<String>,
    /// On the cost-time Pareto front.
    pub pareto: bool,
    /// How the speed was reached where it is not the plain roofline: an assumed utilization,
    /// FP8's split, a power cap, an eager step's parts (training only; omitted when empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A caveat on one GPU's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuNote {
    /// GPU.
    pub gpu: String,
    /// The catalog's note.
    pub note: String,
}

/// A GPU that does not fit at any count tried.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unfit {
    /// GPU.
    pub gpu: String,
    /// Largest count tried.
    pub count: u32,
    /// Memory needed per GPU at that count, GiB.
    pub needed_gib: f64,
    /// Memory it has, GiB.
    pub has_gib: f64,
    /// The largest term (what overflows).
    pub overflow: String,
}

/// A GPU skipped for want of catalog figures or prices.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    /// GPU.
    pub gpu: String,
    /// Why.
    pub reason: String,
}

/// The plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// `gpuwise.plan/v1`.
    pub schema: &'static str,
    /// The model.
    pub model: Model,
    /// The workload with its defaults.
    pub setup: Setup,
    /// Tokens the costs are for.
    pub tokens: f64,
    /// Limits.
    pub constraints: Constraints,
    /// Memory on one GPU at one GPU (the breakdown), runtime terms included.
    pub memory_one_gpu: Memory,
    /// Options, best first (meeting the constraints, by $ per 1M tokens).
    pub options: Vec<PlanOption>,
    /// Index into `options` of the cheapest one meeting the constraints.
    pub cheapest: Option<usize>,
    /// Index of the balanced one.
    pub balanced: Option<usize>,
    /// Index of the fastest one.
    pub fastest: Option<usize>,
    /// GPUs that never fit.
    pub unfit: Vec<Unfit>,
    /// GPUs without the figures or prices to plan.
    pub skipped: Vec<Skipped>,
    /// What the catalog says about the compute figures of GPUs among the options when they
    /// are not the GPU's own datasheet's (A10G: the A10's, an upper bound).
    pub gpu_notes: Vec<GpuNote>,
    /// Constants used.
    pub constants: Constants,
}

/// Schema id of the JSON.
pub const SCHEMA: &str = "gpuwise.plan/v1";

/// Plan `req` over `catalog`: every GPU (of `req.gpus`, or all) at the GPU counts to try,
/// each fitting setup priced in every matching instance, then ranked with the picks.
#[must_use]
pub fn plan(req: &Request, catalog: &Catalog) -> Plan {
    let base = Setup::new(&req.model, &req.workload);
    let fixed = req.workload.gpus.is_some()
        || req.workload.tp > 1
        || req.workload.pp > 1
        || req.workload.cp > 1
        || req.workload.dp.is_some();
    let counts: Vec<u32> = if fixed {
        vec![base.gpus]
    } else {
        std::iter::successors(Some(1u32), |c| c.checked_mul(2))
            .take_while(|c| *c <= req.max_gpus.max(1))
            .collect()
    };
    let mut options = Vec::new();
    let mut unfit = Vec::new();
    let mut skipped = Vec::new();
    let mut gpu_notes = Vec::new();
    for spec in &catalog.gpus {
        if req
            .gpus
            .as_ref()
            .is_some_and(|only| !only.contains(&spec.name))
        {
            continue;
        }
        let found = gpu_options(req, catalog, spec, &counts, fixed);
        if let (Some(note), false) = (&spec.compute_note, found.options.is_empty()) {
            gpu_notes.push(GpuNote {
                gpu: spec.name.clone(),
                note: note.clone(),
            });
        }
        options.extend(found.options);
        unfit.extend(found.unfit);
        skipped.extend(found.skipped.map(|reason| Skipped {
            gpu: spec.name.clone(),
            reason,
        }));
    }
    rank(&mut options);
    let (cheapest, balanced, fastest) = picks(&options);
    let memory_one_gpu = memory::estimate(&req.model, &base, true);
    Plan {
        schema: SCHEMA,
        model: req.model.clone(),
        setup: base,
        tokens: req.tokens,
        constraints: req.constraints.clone(),
        memory_one_gpu,
        options,
        cheapest,
        balanced,
        fastest,
        unfit,
        skipped,
        gpu_notes,
        constants: req.constants.clone(),
    }
}

/// What one GPU model offers.
struct Found {
    options: Vec<PlanOption>,
    /// No GPU count fitted its memory.
    unfit: Option<Unfit>,
    /// Why it was left out (no price), or why the counts after its last option were (the
    /// estimate failed).
    skipped: Option<String>,
}

/// The options of one GPU model: the first three GPU counts whose setup fits its memory, each
/// priced in every matching instance (one machine for tensor and pipeline parallel).
fn gpu_options(
    req: &Request,
    catalog: &Catalog,
    spec: &gpuwise_catalog::GpuSpec,
    counts: &[u32],
    fixed: bool,
) -> Found {
    let hw = Hardware::from_spec(spec).with_overrides(&req.workload);
    // Whole instances: a cloud rents machines, so N GPUs cost the machines that hold them.
    // `networked`: the setup talks between data-parallel ranks, so a rental over several
    // machines needs their network bandwidth (stated, or the catalog's).
    let rentals = |gpus: u32, one_machine: bool, networked: bool| {
        catalog
            .rentals_where(&spec.name, req.pricing, gpus, one_machine, |i, machines| {
                !networked
                    || machines <= 1
                    || req.network_gbps.is_some()
                    || gpuwise_catalog::network(&i.cloud, &i.instance_type).is_some()
            })
            .into_iter()
            .filter(|r| {
                req.clouds
                    .as_ref()
                    .is_none_or(|c| c.iter().any(|x| x == &r.instance.cloud))
            })
            .collect::<Vec<gpuwise_catalog::Rental<'_>>>()
    };
    let mut found = Found {
        options: Vec::new(),
        unfit: None,
        skipped: None,
    };
    if rentals(1, false, false).is_empty() {
        found.skipped = Some("no price in the catalog for the clouds and pricing asked".to_owned());
        return found;
    }
    let mut fitted = 0;
    let mut last: Option<(u32, Memory)> = None;
    // Instance types left out of multi-machine options for want of a network figure.
    let mut no_network: Vec<String> = Vec::new();
    for &count in counts {
        if fitted >= 3 {
            break;
        }
        let mut w = req.workload.clone();
        if !fixed && count > 1 {
            if w.mode == Mode::Infer {
                w.tp = count;
            } else {
                w.dp = Some(count);
                w.zero = 3;
            }
        }
        let s = Setup::new(&req.model, &w);
        let mem = memory::estimate(&req.model, &s, true);
        if mem.total_bytes > hw.memory_bytes {
            last = Some((count, mem));
            continue;
        }
        let speed = match speed(req, &s, &hw, w.mode) {
            Ok(x) => x,
            Err(e) => {
                found.skipped = Some(e.to_string());
                break;
            }
        };
        fitted += 1;
        // Tensor and pipeline parallel GPUs talk every layer: one machine holds them all.
        let one_machine = s.tp * s.pp > 1;
        let traffic = perf::dp_traffic_bytes(&req.model, &s);
        let networked = traffic > 0.0;
        let priced = rentals(s.gpus, one_machine, networked);
        if priced.is_empty() && networked {
            no_network.extend(
                rentals(s.gpus, one_machine, false)
                    .iter()
                    .map(|r| r.instance.instance_type.clone()),
            );
        }
        let fit = Fitted {
            s: &s,
            mem: &mem,
            speed: &speed,
            traffic,
        };
        found.options.extend(
            priced
                .iter()
                .filter_map(|r| priced_option(req, spec, &hw, &fit, r)),
        );
    }
    if found.options.is_empty() && found.skipped.is_none() && !no_network.is_empty() {
        no_network.sort();
        no_network.dedup();
        found.skipped = Some(format!(
            "only multi-machine options fit, and the catalog has no network bandwidth for {} \
             (pass --network-gbps)",
            no_network.join(", ")
        ));
    }
    found.unfit = last
        .filter(|_| fitted == 0 && found.skipped.is_none())
        .map(|(count, mem)| Unfit {
            gpu: spec.name.clone(),
            count,
            needed_gib: mem.total_bytes / GIB,
            has_gib: hw.memory_bytes / GIB,
            overflow: mem.largest().map(|t| t.name.to_owned()).unwrap_or_default(),
        });
    found
}

/// A setup that fits, with its memory and speed before any data-parallel traffic.
struct Fitted<'a> {
    s: &'a Setup,
    mem: &'a Memory,
    speed: &'a Speed,
    /// Data-parallel traffic per GPU and step ([`perf::dp_traffic_bytes`]).
    traffic: f64,
}

/// One priced option: `fit` on rental `r`, at the speed its links allow.
fn priced_option(
    req: &Request,
    spec: &gpuwise_catalog::GpuSpec,
    hw: &Hardware,
    fit: &Fitted,
    r: &gpuwise_catalog::Rental<'_>,
) -> Option<PlanOption> {
    let (s, speed, inst) = (fit.s, fit.speed, r.instance);
    let links = over_links(req, fit, hw, r)?;
    let hours = req.tokens / links.tokens_per_s / 3600.0;
    let total = hours * r.usd_per_hour;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let gpus_billed = (f64::from(r.machines) * inst.gpu_count).round() as u32;
    let mut o = PlanOption {
        gpu: spec.name.clone(),
        count: s.gpus,
        cloud: inst.cloud.clone(),
        instance_type: inst.instance_type.clone(),
        region: inst.region.clone(),
        pricing: r.pricing,
        usd_per_gpu_hour: r.usd_per_hour / f64::from(gpus_billed.max(1)),
        machines: r.machines,
        gpus_billed,
        price_as_of: inst.as_of.clone(),
        memory_per_gpu_gib: fit.mem.total_bytes / GIB,
        gpu_memory_gib: hw.memory_bytes / GIB,
        tokens_per_s: links.tokens_per_s,
        network_gbps: links.network_gbps,
        dp_comm_share: links.comm_share,
        tpot_ms: speed.tpot_ms,
        decode_bound: speed.decode_bound,
        crossover_batch: speed.crossover_batch,
        // Waiting on the network lowers the utilization with the speed.
        mfu: speed
            .mfu
            .map(|m| m * links.tokens_per_s / speed.tokens_per_s),
        hours,
        gpu_hours: hours * f64::from(gpus_billed),
        total_usd: total,
        usd_per_million_tokens: total / req.tokens * 1e6,
        violates: Vec::new(),
        pareto: false,
        notes: speed.notes.clone(),
    };
    o.violates = violations(&o, &req.constraints);
    Some(o)
}

/// A setup's speed on one rental's links.
struct Links {
    tokens_per_s: f64,
    network_gbps: Option<f64>,
    comm_share: Option<f64>,
}

/// Data-parallel training on a rental: each step takes the longer of its compute and its
/// data-parallel traffic ([`perf::dp_traffic_bytes`]) over the slowest link of the ring — the
/// GPUs' interconnect inside one machine; between machines also each GPU's share of the
/// machine's network (`--network-gbps`, else the catalog's figure for the instance type;
/// `None` when there is neither: no option is priced on a guessed network).
fn over_links(
    req: &Request,
    fit: &Fitted,
    hw: &Hardware,
    r: &gpuwise_catalog::Rental<'_>,
) -> Option<Links> {
    let (s, traffic, compute_tokens_per_s) = (fit.s, fit.traffic, fit.speed.tokens_per_s);
    let compute_only = Links {
        tokens_per_s: compute_tokens_per_s,
        network_gbps: None,
        comm_share: None,
    };
    if traffic <= 0.0 {
        return Some(compute_only);
    }
    let (link, network_gbps) = if r.machines <= 1 {
        (hw.link_bytes_s, None)
    } else {
        let gbps = req.network_gbps.or_else(|| {
            gpuwise_catalog::network(&r.instance.cloud, &r.instance.instance_type).map(|n| n.gbps)
        })?;
        let share = gbps * 1e9 / 8.0 / r.instance.gpu_count.max(1.0);
        (
            Some(hw.link_bytes_s.map_or(share, |l| l.min(share))),
            Some(gbps),
        )
    };
    // One machine without an interconnect figure: the traffic is taken as hidden.
    let Some(link) = link else {
        return Some(compute_only);
    };
    let step_tokens = f64::from(s.batch) * f64::from(s.seq) * f64::from(s.microbatches.max(1));
    let all_tokens = step_tokens * f64::from(s.dp);
    let compute_s = all_tokens / compute_tokens_per_s;
    let comm_s = traffic / link;
    let step_s = compute_s.max(comm_s);
    Some(Links {
        tokens_per_s: all_tokens / step_s,
        network_gbps,
        comm_share: Some((step_s - compute_s) / step_s),
    })
}

/// How fast a setup runs: tokens per second of the whole setup, and the inference or training
/// figures that go with it.
struct Speed {
    tokens_per_s: f64,
    tpot_ms: Option<f64>,
    decode_bound: Option<&'static str>,
    crossover_batch: Option<f64>,
    mfu: Option<f64>,
    notes: Vec<String>,
}

fn speed(req: &Request, s: &Setup, hw: &Hardware, mode: Mode) -> Result<Speed, perf::PerfError> {
    if mode == Mode::Infer {
        let r = perf::infer(&req.model, s, hw, &req.constants)?;
        Ok(Speed {
            tokens_per_s: r.output_tokens_per_s * f64::from(s.dp),
            tpot_ms: Some(r.tpot_ms),
            decode_bound: Some(r.decode_bound),
            crossover_batch: Some(r.crossover_batch),
            mfu: None,
            notes: Vec::new(),
        })
    } else {
        let t = perf::train(&req.model, s, hw, &req.constants)?;
        Ok(Speed {
            tokens_per_s: t.tokens_per_s_per_gpu * f64::from(s.gpus),
            tpot_ms: None,
            decode_bound: None,
            crossover_batch: None,
            mfu: Some(t.mfu),
            notes: t.notes,
        })
    }
}

/// Options that meet the constraints first, then by $ per million tokens, hours, GPU, cloud;
/// the Pareto front (cost × time) marked.
fn rank(options: &mut [PlanOption]) {
    options.sort_by(|a, b| {
        a.violates
            .is_empty()
            .cmp(&b.violates.is_empty())
            .reverse()
            .then(
                a.usd_per_million_tokens
                    .total_cmp(&b.usd_per_million_tokens),
            )
            .then(a.hours.total_cmp(&b.hours))
            .then_with(|| a.gpu.cmp(&b.gpu))
            .then_with(|| a.cloud.cmp(&b.cloud))
    });
    mark_pareto(options);
}

/// The cheapest and the fastest option that meet the constraints, and the balanced one (the
/// Pareto option with the least cost × time).
fn picks(options: &[PlanOption]) -> (Option<usize>, Option<usize>, Option<usize>) {
    let idx = |f: &dyn Fn(&PlanOption, &PlanOption) -> std::cmp::Ordering| {
        options
            .iter()
            .enumerate()
            .filter(|(_, o)| o.violates.is_empty())
            .min_by(|a, b| f(a.1, b.1))
            .map(|(i, _)| i)
    };
    // A tie to the cent goes to the faster option (2 GPUs for 14 h and 8 for 3.5 h at the same
    // $33.08: the second is the cheapest worth picking).
    let cents = |o: &PlanOption| (o.total_usd * 100.0).round();
    let cheapest = idx(&|a, b| {
        cents(a)
            .total_cmp(&cents(b))
            .then(a.hours.total_cmp(&b.hours))
    });
    let fastest = idx(&|a, b| {
        a.hours
            .total_cmp(&b.hours)
            .then(a.total_usd.total_cmp(&b.total_usd))
    });
    let balanced = options
        .iter()
        .enumerate()
        .filter(|(_, o)| o.pareto)
        .min_by(|a, b| (a.1.total_usd * a.1.hours).total_cmp(&(b.1.total_usd * b.1.hours)))
        .map(|(i, _)| i);
    (cheapest, balanced, fastest)
}

fn violations(o: &PlanOption, c: &Constraints) -> Vec<String> {
    let mut v = Vec::new();
    if let (Some(max), Some(t)) = (c.max_latency_ms, o.tpot_ms)
        && t > max
    {
        v.push(format!("latency {t:.1} ms > {max} ms"));
    }
    if let Some(min) = c.min_tokens_per_s
        && o.tokens_per_s < min
    {
        v.push(format!("{:.0} tokens/s < {min}", o.tokens_per_s));
    }
    if let Some(d) = c.deadline_hours
        && o.hours > d
    {
        v.push(format!("{:.1} h > deadline {d} h", o.hours));
    }
    if let Some(b) = c.budget_usd
        && o.total_usd > b
    {
        v.push(format!("${:.0} > budget ${b}", o.total_usd));
    }
    v
}

/// Mark the options (meeting the constraints) that no other beats on both cost and time.
fn mark_pareto(options: &mut [PlanOption]) {
    let pts: Vec<(f64, f64, bool)> = options
        .iter()
        .map(|o| (o.total_usd, o.hours, o.violates.is_empty()))
        .collect();
    for (i, o) in options.iter_mut().enumerate() {
        let (c, t, ok) = pts[i];
        o.pareto = ok
            && !pts.iter().enumerate().any(|(j, &(c2, t2, ok2))| {
                j != i && ok2 && c2 <= c && t2 <= t && (c2 < c || t2 < t)
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kv: &[(&str, &str)], tokens: f64) -> Request {
        let mut w = Workload::default();
        for (k, v) in kv {
            assert_eq!(w.set(k, v), Ok(true), "{k}");
        }
        Request {
            model: Model::preset("llama-3-70b").expect("preset"),
            workload: w,
            gpus: None,
            clouds: None,
            pricing: Some(Pricing::OnDemand),
            tokens,
            max_gpus: 8,
            network_gbps: None,
            constraints: Constraints::default(),
            constants: Constants::default(),
        }
    }

    #[test]
    fn every_option_fits_and_its_dollars_trace_to_a_price() {
        let p = plan(
            &request(
                &[("precision", "int4"), ("batch", "8"), ("context", "8192")],
                1e6,
            ),
            &Catalog::builtin(),
        );
        assert!(!p.options.is_empty());
        for o in &p.options {
            assert!(o.memory_per_gpu_gib <= o.gpu_memory_gib, "{o:?}");
            // Whole machines: the GPUs paid for, at the machine's price per GPU.
            assert!(o.gpus_billed >= o.count && o.machines >= 1, "{o:?}");
            let want = o.hours * f64::from(o.gpus_billed) * o.usd_per_gpu_hour;
            assert!((o.total_usd - want).abs() < 1e-9);
            assert!(
                (o.usd_per_million_tokens - o.total_usd).abs() < 1e-9,
                "1M tokens asked"
            );
        }
        // 70B at int4 (~37 GB of weights) never fits a 24 GB card alone.
        assert!(!p.options.iter().any(|o| o.gpu == "L4" && o.count == 1));
        // Ranked by $ per 1M tokens.
        assert!(
            p.options
                .windows(2)
                .all(|w| w[0].usd_per_million_tokens <= w[1].usd_per_million_tokens)
        );
        let c = p.cheapest.expect("cheapest");
        let f = p.fastest.expect("fastest");
        assert!(
            p.options
                .iter()
                .all(|o| o.total_usd >= p.options[c].total_usd)
        );
        assert!(p.options.iter().all(|o| o.hours >= p.options[f].hours));
        assert!(p.options[p.balanced.expect("balanced")].pareto);
    }

    #[test]
    fn training_over_machines_pays_for_its_network() {
        let mut r = request(
            &[
                ("mode", "train"),
                ("batch", "2"),
                ("seq", "4096"),
                ("checkpointing", "full"),
            ],
            1e9,
        );
        r.max_gpus = 64;
        r.gpus = Some(vec!["A100-SXM4-80GB".to_owned()]);
        let p = plan(&r, &Catalog::builtin());
        assert!(!p.options.is_empty());
        let cat = Catalog::builtin();
        let hw = Hardware::from_spec(cat.resolve("A100-SXM4-80GB").expect("spec"));
        for o in &p.options {
            assert!(
                o.machines > 1,
                "70B full training does not fit one 8-GPU machine"
            );
            // Every multi-machine option has a published network figure, and its speed is
            // the step's compute or its data-parallel traffic over the slower link,
            // whichever is longer.
            let net = cat_network(&o.cloud, &o.instance_type);
            assert_eq!(o.network_gbps, Some(net), "{o:?}");
            let mut w = r.workload.clone();
            w.dp = Some(o.count);
            w.zero = 3;
            let s = Setup::new(&r.model, &w);
            let compute = perf::train(&r.model, &s, &hw, &r.constants).expect("speed");
            let per_gpu_net = net * 1e9 / 8.0 / 8.0;
            let link = hw.link_bytes_s.expect("NVLink").min(per_gpu_net);
            let tokens = 2.0 * 4096.0 * f64::from(o.count);
            let step = (tokens / (compute.tokens_per_s_per_gpu * f64::from(o.count)))
                .max(perf::dp_traffic_bytes(&r.model, &s) / link);
            assert!(
                (o.tokens_per_s / (tokens / step) - 1.0).abs() < 1e-9,
                "{o:?}"
            );
        }
        // 100 Gbit/s between 8-GPU machines leaves the GPUs waiting; 1.6 Tbit/s does not.
        let wait = |gbps: f64| {
            p.options
                .iter()
                .find(|o| o.network_gbps == Some(gbps))
                .and_then(|o| o.dp_comm_share)
                .expect("an option on that network")
        };
        assert!(wait(100.0) > 0.5 && wait(1600.0) < 0.01);
        // A stated bandwidth prices the machines the catalog has no figure for (Lambda).
        r.network_gbps = Some(800.0);
        let stated = plan(&r, &Catalog::builtin());
        assert!(
            stated
                .options
                .iter()
                .any(|o| o.cloud == "lambda" && o.network_gbps == Some(800.0))
        );
    }

    fn cat_network(cloud: &str, instance: &str) -> f64 {
        gpuwise_catalog::network(cloud, instance).map_or(f64::NAN, |n| n.gbps)
    }

    #[test]
    fn data_parallel_traffic_follows_the_zero_stage() {
        let m = Model::preset("llama-3-70b").expect("preset");
        let setup = |kv: &[(&str, &str)]| {
            let mut w = Workload::default();
            for (k, v) in kv {
                assert_eq!(w.set(k, v), Ok(true), "{k}");
            }
            Setup::new(&m, &w)
        };
        let n = m.params;
        let ring = 15.0 / 16.0;
        // FSDP: per micro-batch, 16-bit weights gathered twice and gradients reduce-scattered.
        let fsdp = setup(&[("mode", "train"), ("dp", "16"), ("zero", "3"), ("ga", "4")]);
        let want = (2.0 * n * 2.0 + n * 2.0) * 4.0 * ring;
        assert!((perf::dp_traffic_bytes(&m, &fsdp) / want - 1.0).abs() < 1e-12);
        // DDP under autocast: one all-reduce of fp32 gradients per step.
        let ddp = setup(&[("mode", "train"), ("dp", "16"), ("ga", "4")]);
        assert!((perf::dp_traffic_bytes(&m, &ddp) / (2.0 * n * 4.0 * ring) - 1.0).abs() < 1e-12);
        // LoRA under FSDP: the frozen base gathered in its format, fp32 adapter gradients.
        let lora = setup(&[("mode", "lora"), ("dp", "16"), ("zero", "3")]);
        let adapters = memory::lora_params(&m, 8);
        let want = (2.0 * n * 2.0 + adapters * 4.0) * ring;
        assert!((perf::dp_traffic_bytes(&m, &lora) / want - 1.0).abs() < 1e-12);
        // Nothing to send: one GPU, or inference replicas.
        assert_eq!(
            perf::dp_traffic_bytes(&m, &setup(&[("mode", "train")])),
            0.0
        );
        assert_eq!(perf::dp_traffic_bytes(&m, &setup(&[("dp", "4")])), 0.0);
    }

    #[test]
    fn constraints_push_violators_down() {
        let mut r = request(&[("precision", "fp8"), ("batch", "1")], 1e6);
        r.constraints.max_latency_ms = Some(20.0);
        let p = plan(&r, &Catalog::builtin());
        let first_bad = p.options.iter().position(|o| !o.violates.is_empty());
        if let Some(i) = first_bad {
            assert!(p.options[i..].iter().all(|o| !o.violates.is_empty()));
        }
        assert!(
            p.options
                .iter()
                .filter(|o| o.violates.is_empty())
                .all(|o| o.tpot_ms.expect("infer") <= 20.0)
        );
    }

    #[test]
    fn unfit_names_the_overflowing_term() {
        let mut r = request(&[("mode", "train"), ("batch", "1"), ("seq", "4096")], 1e9);
        r.max_gpus = 1;
        r.gpus = Some(vec!["L4".to_owned()]);
        let p = plan(&r, &Catalog::builtin());
        assert!(p.options.is_empty());
        assert_eq!(p.unfit.len(), 1);
        assert_eq!(p.unfit[0].overflow, "optimizer");
    }
}
