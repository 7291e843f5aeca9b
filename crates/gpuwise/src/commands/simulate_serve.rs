//! `gpuwise simulate serve`: a request trace → the planner's step costs for the model on each
//! GPU → the serving simulation of each configuration (or the sweep) → rendered.

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use gpuwise_catalog::{Catalog, GpuSpec, Pricing};
use gpuwise_plan::perf::{self, Constants};
use gpuwise_plan::{Hardware, Model, Setup, Workload};
use gpuwise_render::Format;
use gpuwise_sim::serving::{
    self, Batching, Config, Scaling, ServeReport, Slo, StepModel, TraceInfo,
};
use gpuwise_sim::traffic::{self, Request, Traffic};

use crate::cli::ServeSimArgs;
use crate::output::emit;
use crate::{duration, printer};

/// Share of requests that must meet the SLO for a sweep to choose a configuration.
const ATTAINMENT: f64 = 0.99;

fn read_text(path: &std::path::Path) -> anyhow::Result<String> {
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut gpuwise_sources::input::open(&gpuwise_sources::Input {
            path: Some(path.to_path_buf()),
            name: path.display().to_string(),
            found_in_dir: false,
        })?,
        &mut text,
    )?;
    Ok(text)
}

/// The trace, or arrivals drawn from rate windows; skips and reordering said on stderr.
fn traffic_of(a: &ServeSimArgs) -> anyhow::Result<(Traffic, String)> {
    let (t, name) = match (&a.trace, &a.rates) {
        (Some(p), _) => (
            traffic::parse(&read_text(p)?, &p.display().to_string())?,
            p.display().to_string(),
        ),
        (None, Some(r)) => {
            let l = a
                .lengths_from
                .as_ref()
                .ok_or_else(|| anyhow!("--rates needs --lengths-from TRACE"))?;
            let lengths = traffic::parse(&read_text(l)?, &l.display().to_string())?;
            (
                traffic::from_rates(
                    &read_text(r)?,
                    &r.display().to_string(),
                    &lengths.requests,
                    a.seed,
                    a.rate_scale,
                )?,
                r.display().to_string(),
            )
        }
        (None, None) => bail!("give --trace FILE, or --rates FILE with --lengths-from TRACE"),
    };
    for (why, n) in &t.skipped {
        printer::warn(&format!("{name}: {n} row(s) skipped: {why}"));
    }
    if t.out_of_order > 0 {
        printer::warn(&format!(
            "{name}: {} row(s) arrived before the row above them: sorted by arrival",
            t.out_of_order
        ));
    }
    Ok((t, name))
}

fn list<T: std::str::FromStr>(
    flag: &str,
    v: Option<&str>,
    default: &str,
) -> anyhow::Result<Vec<T>> {
    v.unwrap_or(default)
        .split(',')
        .map(|x| {
            x.trim()
                .parse::<T>()
                .map_err(|_| anyhow!("--{flag}: `{x}` is not a number"))
        })
        .collect()
}

fn seconds(flag: &str, v: &str) -> anyhow::Result<f64> {
    #[allow(clippy::cast_precision_loss)]
    Ok(duration::parse_ms(v).map_err(|e| anyhow!("--{flag}: {e}"))? as f64 / 1000.0)
}

/// How an `--autoscale` value scales.
#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Reactive,
    Predictive,
    Schedule,
}

/// `--autoscale target=0.7,min=0,max=16,cooldown=5m,startup=90s,interval=15s,warm=0,
/// policy=reactive|predictive|schedule,period=1d`: the reactive settings, the policy and its
/// period.
fn autoscale(v: &str) -> anyhow::Result<(Scaling, Policy, f64)> {
    let (mut target, mut min, mut max, mut warm) = (0.7, 1u32, 8u32, 0u32);
    let (mut cooldown, mut startup, mut interval) = (300.0, 90.0, 15.0);
    let (mut policy, mut period, mut on_queue) = (Policy::Reactive, 86_400.0, false);
    for kv in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, val) = kv
            .split_once('=')
            .ok_or_else(|| anyhow!("--autoscale: `{kv}` is not key=value"))?;
        let num = || {
            val.parse::<f64>()
                .map_err(|_| anyhow!("--autoscale: {k}=`{val}` is not a number"))
        };
        let count = || {
            val.parse::<u32>()
                .map_err(|_| anyhow!("--autoscale: {k}=`{val}` is not a count"))
        };
        match k {
            "target" => target = num()?,
            "min" => min = count()?,
            "max" => max = count()?,
            "cooldown" => cooldown = seconds("autoscale cooldown", val)?,
            "startup" => startup = seconds("autoscale startup", val)?,
            "interval" => interval = seconds("autoscale interval", val)?,
            "warm" => warm = count()?,
            "metric" => {
                on_queue = match val {
                    "utilization" => false,
                    "queue" => true,
                    other => bail!("--autoscale: metric=`{other}` is not utilization or queue"),
                }
            }
            "period" => period = seconds("autoscale period", val)?,
            "policy" => {
                policy = match val {
                    "reactive" => Policy::Reactive,
                    "predictive" => Policy::Predictive,
                    "schedule" => Policy::Schedule,
                    other => bail!(
                        "--autoscale: policy=`{other}` is not reactive, predictive or schedule"
                    ),
                }
            }
            other => bail!(
                "--autoscale: unknown key `{other}` (target, min, max, cooldown, startup, interval, warm, metric, policy, period)"
            ),
        }
    }
    anyhow::ensure!(
        target > 0.0 && target <= 1.0,
        "--autoscale: target must be within (0, 1], got {target}"
    );
    anyhow::ensure!(
        max >= 1 && min <= max,
        "--autoscale: need min ≤ max and max ≥ 1"
    );
    anyhow::ensure!(
        max <= MAX_REPLICAS && warm <= MAX_REPLICAS,
        "--autoscale: max and warm may be at most {MAX_REPLICAS}"
    );
    anyhow::ensure!(
        interval >= 1.0,
        "--autoscale: interval must be at least 1s (the autoscaler looks at the load every interval)"
    );
    anyhow::ensure!(period >= 3600.0, "--autoscale: period must be at least 1h");
    let scaling = Scaling::Autoscale {
        target,
        min,
        max,
        cooldown_s: cooldown,
        startup_s: startup,
        interval_s: interval,
        warm,
        predict_period_s: (policy == Policy::Predictive).then_some(period),
        on_queue,
    };
    Ok((scaling, policy, period))
}

/// `--profile`: CSV `batch,step_ms`, sorted by batch.
fn profile(path: &std::path::Path) -> anyhow::Result<Vec<(u32, f64)>> {
    let text = read_text(path)?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate().skip(1) {
        if line.trim().is_empty() {
            continue;
        }
        let mut f = line.split(',').map(str::trim);
        let (b, ms) = (f.next(), f.next());
        match (
            b.and_then(|b| b.parse::<u32>().ok()),
            ms.and_then(|m| m.parse::<f64>().ok()),
        ) {
            (Some(b), Some(ms)) if b > 0 && ms > 0.0 => out.push((b, ms / 1e3)),
            _ => bail!(
                "{}:{}: expected `batch,step_ms` with a batch ≥ 1 and a time above zero",
                path.display(),
                i + 1
            ),
        }
    }
    anyhow::ensure!(
        !out.is_empty(),
        "{}: no `batch,step_ms` rows",
        path.display()
    );
    out.sort_by_key(|r| r.0);
    Ok(out)
}

fn model_of(a: &ServeSimArgs) -> anyhow::Result<Model> {
    Ok(match (&a.model, &a.hf_config) {
        (Some(m), _) => Model::preset(m)?,
        (None, Some(p)) => {
            Model::from_hf_config(&fs_err::read_to_string(p)?, &p.display().to_string())?
        }
        (None, None) => bail!(
            "name a model: --model NAME (see `{} plan models`) or --hf-config config.json",
            printer::me()
        ),
    })
}

/// The serving setup the planner costs: the trace's mean prompt and output, a batch limit.
fn setup(a: &ServeSimArgs, m: &Model, reqs: &[Request], max_batch: u32) -> anyhow::Result<Setup> {
    let n = reqs.len().max(1) as f64;
    let mean = |f: fn(&Request) -> u32| reqs.iter().map(|r| f64::from(f(r))).sum::<f64>() / n;
    let mut w = Workload::default();
    let prompt = mean(|r| r.input).round().max(1.0);
    let output = mean(|r| r.output).round().max(1.0);
    for (k, v) in [
        ("mode", "infer".to_owned()),
        ("batch", max_batch.to_string()),
        ("prompt", format!("{prompt}")),
        ("output", format!("{output}")),
        ("tp", a.tp.to_string()),
    ]
    .into_iter()
    .chain(a.precision.clone().map(|p| ("precision", p)))
    .chain(a.kv_precision.clone().map(|p| ("kv_precision", p)))
    {
        w.set(k, &v).map_err(|e| anyhow!("{k}={v}: {e}"))?;
    }
    Ok(Setup::new(m, &w))
}

/// What `--sweep` tries where `--replicas` or `--max-batch` is not given.
const SWEEP_REPLICAS: &str = "1,2,4,8,16";
/// See [`SWEEP_REPLICAS`].
const SWEEP_BATCHES: &str = "16,64,256";

/// The most replicas one configuration simulates (each is a server stepped through the trace).
const MAX_REPLICAS: u32 = 1024;
/// The largest batch limit.
const MAX_BATCH: u32 = 65_536;

/// A configuration whose weights, or workspace at its batch limit, leave no room for a KV cache.
#[derive(Debug)]
struct DoesNotFit(String);

impl std::fmt::Display for DoesNotFit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DoesNotFit {}

/// One GPU's step model and price.
fn gpu_model(
    a: &ServeSimArgs,
    catalog: &Catalog,
    name: &str,
    m: &Model,
    s: &Setup,
    measured: &[(u32, f64)],
) -> anyhow::Result<(StepModel, String, f64)> {
    let spec = crate::inputs::one_gpu(catalog, name)?;
    let hw = Hardware::from_spec(spec);
    let c = perf::step_costs(m, s, &hw, &Constants::default())
        .map_err(|e| anyhow!("{} on {}: {e}", m.name, spec.name))?;
    if c.kv_capacity_tokens < 1.0 {
        return Err(DoesNotFit(format!(
            "{} does not fit {} × {} ({:.0} GB) at {}",
            m.name,
            s.tp,
            spec.name,
            hw.memory_bytes / 1e9,
            s.precision.name(),
        ))
        .into());
    }
    let price = match a.price {
        Some(p) => p,
        None => {
            let pricing = match &a.pricing {
                Some(p) => Pricing::parse(p).map_err(|e| anyhow!("--pricing: {e}"))?,
                None => Pricing::OnDemand,
            };
            let q = crate::inputs::exact_quote(
                catalog,
                &spec.name,
                a.cloud.as_deref(),
                a.region.as_deref(),
                pricing,
            )
            .ok_or_else(|| {
                anyhow!(
                    "the catalog has no {} price for {}{}: give --price USD",
                    pricing.as_str(),
                    spec.name,
                    a.cloud
                        .as_deref()
                        .map(|c| format!(" on {c}"))
                        .unwrap_or_default()
                )
            })?;
            printer::info(&format!("price: {}", q.describe()));
            q.usd_per_gpu_hour
        }
    };
    let model = StepModel::from_costs(c, measured.to_vec());
    Ok((model, spec.name.clone(), price))
}

/// `--spot N --spot-trace FILE`: N of the fixed replicas on spot, at the spot price.
fn spot_plan(
    a: &ServeSimArgs,
    catalog: &Catalog,
    gpu: &str,
    scaling: &Scaling,
) -> anyhow::Result<Option<serving::Spot>> {
    let (Some(n), Some(path)) = (a.spot, &a.spot_trace) else {
        return Ok(None);
    };
    let Scaling::Fixed { replicas } = scaling else {
        bail!(
            "--spot applies to --replicas (a fixed fleet with some replicas on spot), not --autoscale"
        );
    };
    anyhow::ensure!(
        n >= 1 && n <= *replicas,
        "--spot {n}: between 1 and the --replicas ({replicas})"
    );
    let trace = crate::inputs::read_trace(path, "auto", seconds("spot-tick", &a.spot_tick)?)?;
    let price = match a.spot_price {
        Some(p) => p,
        None => {
            catalog
                .gpu_hour_price(&gpuwise_catalog::PriceQuery {
                    gpu,
                    cloud: a.cloud.as_deref(),
                    region: a.region.as_deref(),
                    pricing: Pricing::Spot,
                })
                .filter(|q| q.pricing == Pricing::Spot)
                .ok_or_else(|| {
                    anyhow!("the catalog has no spot price for {gpu}: give --spot-price USD")
                })?
                .usd_per_gpu_hour
        }
    };
    Ok(Some(serving::Spot {
        replicas: n,
        usd_per_gpu_hour: price,
        trace: trace.name.clone(),
        tick_s: trace.gap_s,
        available: trace.available,
        startup_s: 90.0,
    }))
}

/// The schedule a reactive run on the same traffic held, by hour of `period`.
fn schedule(reqs: &[Request], model: &StepModel, reactive: &Config, period: f64) -> Scaling {
    let history = serving::simulate(reqs, model, reactive, Slo::default());
    let startup_s = match reactive.scaling {
        Scaling::Autoscale { startup_s, .. } => startup_s,
        _ => 0.0,
    };
    Scaling::Schedule {
        period_s: period,
        replicas_by_hour: serving::schedule_from(&history, period),
        startup_s,
    }
}

/// [`gpu_model`] at batch limit `b`, or `None` with the reason in `unfit` when the model does
/// not fit: the weights alone, or the workspace of this batch limit beside them.
#[allow(clippy::too_many_arguments)]
fn fitted(
    a: &ServeSimArgs,
    catalog: &Catalog,
    gpu: &str,
    m: &Model,
    reqs: &[Request],
    b: u32,
    measured: &[(u32, f64)],
    unfit: &mut Vec<String>,
) -> anyhow::Result<Option<(StepModel, String, f64)>> {
    let s = setup(a, m, reqs, b)?;
    match gpu_model(a, catalog, gpu, m, &s, measured) {
        Ok(x) => Ok(Some(x)),
        Err(e) => match e.downcast::<DoesNotFit>() {
            Ok(DoesNotFit(what)) => {
                let one = setup(a, m, reqs, 1)?;
                let why = if b > 1 && gpu_model(a, catalog, gpu, m, &one, measured).is_ok() {
                    format!(
                        "with a batch limit of {b} the activation workspace leaves no room for a KV cache (try a smaller --max-batch)"
                    )
                } else {
                    "the weights take more than its memory (try --tp, a smaller --precision or a larger GPU)".to_owned()
                };
                unfit.push(format!("{what}: {why}"));
                Ok(None)
            }
            Err(e) => Err(e),
        },
    }
}

/// A replica's step model and a configuration to run on it.
type Candidate = (StepModel, Config);

/// Every configuration the flags name: GPUs × scaling × batch limits.
fn configs(
    a: &ServeSimArgs,
    reqs: &[Request],
    m: &Model,
) -> anyhow::Result<(Vec<Candidate>, Vec<String>)> {
    // A sweep without lists sweeps a grid, not the one default configuration.
    let (replicas, batch) = if a.sweep {
        (SWEEP_REPLICAS, SWEEP_BATCHES)
    } else {
        ("1", "64")
    };
    let batches: Vec<u32> = list("max-batch", a.max_batch.as_deref(), batch)?;
    anyhow::ensure!(
        batches.iter().all(|b| (1..=MAX_BATCH).contains(b)),
        "--max-batch: from 1 to {MAX_BATCH}"
    );
    let largest = batches.iter().copied().max().unwrap_or(1);
    let scalings: Vec<(Scaling, Policy, f64)> = if a.autoscale.is_empty() {
        list::<u32>("replicas", a.replicas.as_deref(), replicas)?
            .into_iter()
            .map(|r| {
                anyhow::ensure!(r >= 1, "--replicas: at least 1 (or --autoscale with min=0)");
                anyhow::ensure!(r <= MAX_REPLICAS, "--replicas: at most {MAX_REPLICAS}");
                Ok((Scaling::Fixed { replicas: r }, Policy::Reactive, 0.0))
            })
            .collect::<anyhow::Result<_>>()?
    } else {
        a.autoscale
            .iter()
            .map(|v| autoscale(v))
            .collect::<anyhow::Result<_>>()?
    };
    let measured = match &a.profile {
        Some(p) => profile(p)?,
        None => Vec::new(),
    };
    anyhow::ensure!(a.tp >= 1, "--tp: at least 1");
    let catalog = Catalog::builtin();
    let timeout_s = seconds("batch-timeout", &a.batch_timeout)?;
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let mut unfit = Vec::new();
    let gpus: Vec<&str> = a
        .gpu
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .collect();
    for gpu in gpus {
        // Each batch limit sizes its own workspace: one that does not fit is left out and
        // listed, the others still run.
        for &b in &batches {
            let Some((model, name, price)) =
                fitted(a, &catalog, gpu, m, reqs, b, &measured, &mut unfit)?
            else {
                continue;
            };
            if b == largest || !out.iter().any(|(_, c): &Candidate| c.gpu == name) {
                notes.push(format!(
                    "{name}: a replica is {} GPU(s) at ${price:.4}/GPU-hour; at a batch limit of {b} its KV cache holds {:.0} tokens beside the weights",
                    model.gpus, model.kv_capacity_tokens
                ));
            }
            // Figures that are a bound, not the GPU's own (the A10G's), are said, as in `plan`.
            notes.extend(catalog.resolve(&name).and_then(GpuSpec::compute_caveat));
            for (scaling, policy, period) in &scalings {
                let batching = match a.batching.as_str() {
                    "continuous" => Batching::Continuous {
                        max_batch: b,
                        token_budget: a.token_budget.max(1),
                    },
                    "prompts-first" => Batching::PromptsFirst {
                        max_batch: b,
                        token_budget: a.token_budget.max(1),
                    },
                    "static" => Batching::Static {
                        max_batch: b,
                        timeout_s,
                    },
                    other => {
                        bail!("--batching `{other}` is not continuous, prompts-first or static")
                    }
                };
                let mut config = Config {
                    gpu: name.clone(),
                    usd_per_gpu_hour: price,
                    batching,
                    scaling: scaling.clone(),
                    spot: spot_plan(a, &catalog, &name, scaling)?,
                };
                if *policy == Policy::Schedule {
                    config.scaling = schedule(reqs, &model, &config, *period);
                }
                out.push((model.clone(), config));
            }
        }
    }
    if out.is_empty() && !unfit.is_empty() {
        bail!("{}", unfit.join("; "));
    }
    anyhow::ensure!(!out.is_empty(), "--gpu: name at least one GPU");
    notes.sort();
    notes.dedup();
    for why in unfit {
        notes.push(format!("left out: {why}"));
    }
    Ok((out, notes))
}

pub(crate) fn run(a: &ServeSimArgs) -> anyhow::Result<ExitCode> {
    let format =
        crate::config::output_format(a.format.as_deref(), &crate::config::Config::default())?;
    anyhow::ensure!(
        format != Format::Csv,
        "--format: simulate serve prints table, json, markdown or html"
    );
    let (t, name) = traffic_of(a)?;
    let m = model_of(a)?;
    let (configs, mut notes) = configs(a, &t.requests, &m)?;
    let slo = Slo {
        ttft_ms: a.slo_ttft_ms,
        tpot_ms: a.slo_tpot_ms,
    };
    notes.push(format!(
        "step times: the planner's roofline for {} (docs/planner.md){}; requests wait in one queue, first come first served",
        m.name,
        if a.profile.is_some() {
            ", decode steps from the measured --profile"
        } else {
            ""
        }
    ));
    let trace = TraceInfo {
        name,
        format: t.format,
        skipped: t.skipped.clone(),
        out_of_order: t.out_of_order,
    };
    let (outcome, front, candidates, slo_met) = if a.sweep {
        anyhow::ensure!(
            slo.ttft_ms.is_some() || slo.tpot_ms.is_some(),
            "--sweep chooses the cheapest configuration that meets an SLO: give --slo-ttft-ms and/or --slo-tpot-ms"
        );
        let threads = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
        let sw = serving::sweep(&t.requests, &configs, slo, ATTAINMENT, threads);
        let met = sw.chosen.is_some();
        let pick = match sw.chosen {
            Some(o) => o,
            None => {
                // None meets it: show the one that comes closest.
                let best = sw
                    .candidates
                    .iter()
                    .max_by(|x, y| {
                        x.slo_attainment
                            .unwrap_or(0.0)
                            .total_cmp(&y.slo_attainment.unwrap_or(0.0))
                    })
                    .ok_or_else(|| anyhow!("nothing to sweep"))?;
                let i = configs
                    .iter()
                    .position(|(_, c)| *c == best.config)
                    .ok_or_else(|| anyhow!("the sweep lost a configuration"))?;
                serving::simulate(&t.requests, &configs[i].0, &configs[i].1, slo)
            }
        };
        (pick, Some(sw.front), Some(sw.candidates), Some(met))
    } else {
        anyhow::ensure!(
            configs.len() == 1,
            "{} configurations named: give --sweep to try them all, or one GPU, one replica count and one --max-batch",
            configs.len()
        );
        let (sm, c) = &configs[0];
        (serving::simulate(&t.requests, sm, c, slo), None, None, None)
    };
    let report = ServeReport {
        schema: serving::SCHEMA,
        model: m.name.clone(),
        trace,
        outcome,
        slo,
        slo_met,
        front,
        candidates,
        notes,
    };
    emit(
        &gpuwise_sim::view::serve(&report, format),
        a.output.as_ref(),
    )?;
    if slo_met == Some(false) {
        printer::warn(&format!(
            "no configuration meets the SLO for {:.0} % of requests: the closest is shown",
            ATTAINMENT * 100.0
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
