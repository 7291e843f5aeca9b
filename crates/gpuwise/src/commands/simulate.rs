//! `gpuwise simulate spot`: spot traces × policies × start offsets for a training job.

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use gpuwise_catalog::{Catalog, Pricing};
use gpuwise_render::Format;
use gpuwise_sim::montecarlo::{PolicyKind, Prices};
use gpuwise_sim::spot::Job;
use gpuwise_sim::study::{self, Checkpoint, Plan};
use gpuwise_sim::trace::Trace;

use crate::cli::{CommitArgs, SpotArgs};
use crate::inputs::{exact_quote, one_gpu, read_trace};
use crate::output::emit;
use crate::{duration, printer};

fn seconds(flag: &str, v: &str) -> anyhow::Result<f64> {
    #[allow(clippy::cast_precision_loss)]
    Ok(duration::parse_ms(v).map_err(|e| anyhow!("--{flag}: {e}"))? as f64 / 1000.0)
}

/// Prices per node-hour: given, or the catalog's on-demand and spot prices of --instance.
fn prices(args: &SpotArgs) -> anyhow::Result<Option<Prices>> {
    if let Some(g) = &args.gpu {
        anyhow::ensure!(
            args.instance.is_none() && args.spot_price.is_none() && args.on_demand_price.is_none(),
            "give one of --gpu, --instance, or --spot-price with --on-demand-price"
        );
        return gpu_prices(g, args).map(Some);
    }
    match (args.spot_price, args.on_demand_price, &args.instance) {
        (Some(s), Some(o), None) => {
            anyhow::ensure!(
                s.is_finite() && o.is_finite() && s >= 0.0 && o >= 0.0,
                "--spot-price and --on-demand-price must be non-negative numbers"
            );
            Ok(Some(Prices {
                spot_usd_per_hour: s,
                on_demand_usd_per_hour: o,
            }))
        }
        (None, None, Some(t)) => catalog_prices(t, args).map(Some),
        (None, None, None) => Ok(None),
        _ => bail!("give --spot-price with --on-demand-price, or --instance (not both)"),
    }
}

/// The catalog's spot and on-demand GPU-hour prices of `gpu` (one node = one GPU).
fn gpu_prices(gpu: &str, args: &SpotArgs) -> anyhow::Result<Prices> {
    let catalog = Catalog::builtin();
    let spec = one_gpu(&catalog, gpu)?;
    let quote = |pricing: Pricing| {
        exact_quote(
            &catalog,
            &spec.name,
            args.cloud.as_deref(),
            args.region.as_deref(),
            pricing,
        )
    };
    let (Some(spot), Some(od)) = (quote(Pricing::Spot), quote(Pricing::OnDemand)) else {
        bail!(
            "the catalog has no spot and on-demand GPU-hour price for {}: give --spot-price and --on-demand-price",
            spec.name
        );
    };
    printer::info(&format!(
        "prices: spot {}; on demand {}",
        spot.describe(),
        od.describe()
    ));
    Ok(Prices {
        spot_usd_per_hour: spot.usd_per_gpu_hour,
        on_demand_usd_per_hour: od.usd_per_gpu_hour,
    })
}

fn catalog_prices(instance: &str, args: &SpotArgs) -> anyhow::Result<Prices> {
    let catalog = Catalog::builtin();
    let best = catalog
        .instances
        .iter()
        .filter(|i| i.instance_type.eq_ignore_ascii_case(instance))
        .filter(|i| args.cloud.as_deref().is_none_or(|c| i.cloud == c))
        .filter(|i| args.region.as_deref().is_none_or(|r| i.region == r))
        .filter_map(|i| Some((i, i.price(Pricing::Spot)?, i.price(Pricing::OnDemand)?)))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let Some((i, spot, od)) = best else {
        bail!(
            "the catalog has no spot and on-demand price for `{instance}`{}{}: give --spot-price and --on-demand-price",
            args.cloud
                .as_deref()
                .map(|c| format!(" in {c}"))
                .unwrap_or_default(),
            args.region
                .as_deref()
                .map(|r| format!(" {r}"))
                .unwrap_or_default()
        );
    };
    printer::info(&format!(
        "prices: {} {} {}: spot ${spot:.4}/h, on-demand ${od:.4}/h per node ({}, {})",
        i.cloud, i.instance_type, i.region, i.source, i.as_of
    ));
    Ok(Prices {
        spot_usd_per_hour: spot,
        on_demand_usd_per_hour: od,
    })
}

fn plan(args: &SpotArgs) -> anyhow::Result<Plan> {
    let checkpoint = match args.checkpoint_interval.as_str() {
        "auto" => Checkpoint::Auto,
        v => match seconds("checkpoint-interval", v)? {
            0.0 => Checkpoint::None,
            s => Checkpoint::Every(s),
        },
    };
    let policies = if args.policies.is_empty() {
        // The offline optimum needs a deadline (without one, waiting for spot costs nothing).
        PolicyKind::ALL
            .into_iter()
            .filter(|p| args.deadline_hours.is_some() || *p != PolicyKind::Omniscient)
            .filter(|p| !args.zones.is_empty() || *p != PolicyKind::MultiZone)
            .collect()
    } else {
        args.policies
            .iter()
            .map(|p| p.parse().map_err(|e| anyhow!("--policy: {e}")))
            .collect::<anyhow::Result<_>>()?
    };
    anyhow::ensure!(
        (1..=MAX_STARTS).contains(&args.starts),
        "--starts must be from 1 to {MAX_STARTS}"
    );
    anyhow::ensure!(
        args.work_hours.is_finite() && args.work_hours > 0.0 && args.work_hours <= MAX_HOURS,
        "--work-hours must be positive and at most {MAX_HOURS} (ten years)"
    );
    if let Some(d) = args.deadline_hours {
        anyhow::ensure!(
            d.is_finite() && d > 0.0 && d <= MAX_HOURS,
            "--deadline-hours must be positive and at most {MAX_HOURS} (ten years)"
        );
    }
    anyhow::ensure!(
        (1..=MAX_NODES).contains(&args.nodes),
        "--nodes must be from 1 to {MAX_NODES}"
    );
    Ok(Plan {
        job: Job {
            work_s: args.work_hours * 3600.0,
            deadline_s: args.deadline_hours.map(|d| d * 3600.0),
            changeover_s: seconds("changeover", &args.changeover)?,
            checkpoint_interval_s: 0.0,
            checkpoint_cost_s: seconds("checkpoint-cost", &args.checkpoint_cost)?,
            nodes: args.nodes,
        },
        checkpoint,
        policies,
        starts: args.starts,
        seed: args.seed,
        prices: prices(args)?,
        zones: Vec::new(),
    })
}

/// The most `--starts`: each start runs every policy over the trace (about 20 ms a start on a
/// week-long trace with the offline optimum, release build), and 300 already pin the mean.
const MAX_STARTS: usize = 10_000;
/// The longest `--work-hours` and `--deadline-hours`.
const MAX_HOURS: f64 = 87_600.0;
/// The most `--nodes`.
const MAX_NODES: u32 = 100_000;

/// The traces of `--trace` and of `--zones` (each file read once), and the zone groups as
/// indices into them.
fn traces(args: &SpotArgs, tick_s: f64) -> anyhow::Result<(Vec<Trace>, Vec<Vec<usize>>)> {
    if let Some(hours) = args.trace_hours {
        anyhow::ensure!(
            hours > 0.0,
            "--trace-hours must be longer than zero (got {hours})"
        );
    }
    let mut paths: Vec<std::path::PathBuf> = gpuwise_sources::expand(&args.traces)?
        .into_iter()
        .filter_map(|i| i.path)
        .collect();
    let mut groups = Vec::new();
    for g in &args.zones {
        let mut group = Vec::new();
        for f in g.split(',').map(str::trim).filter(|f| !f.is_empty()) {
            let path = std::path::PathBuf::from(f);
            let i = paths.iter().position(|p| *p == path).unwrap_or_else(|| {
                paths.push(path);
                paths.len() - 1
            });
            group.push(i);
        }
        anyhow::ensure!(
            group.len() >= 2,
            "--zones `{g}`: a zone group needs two traces or more"
        );
        groups.push(group);
    }
    let mut traces = paths
        .iter()
        .map(|p| read_trace(p, &args.trace_format, tick_s))
        .collect::<anyhow::Result<Vec<Trace>>>()?;
    if let Some(hours) = args.trace_hours {
        for t in &mut traces {
            t.keep_first_hours(hours);
        }
    }
    Ok((traces, groups))
}

pub(crate) fn spot(args: &SpotArgs) -> anyhow::Result<ExitCode> {
    let format = Format::parse(&args.format).map_err(|e| anyhow!("--format: {e}"))?;
    anyhow::ensure!(
        format != Format::Csv,
        "--format: simulate spot prints table, json, markdown or html"
    );
    let tick_s = seconds("tick", &args.tick)?;
    anyhow::ensure!(tick_s > 0.0, "--tick must be longer than zero");
    let mut plan = plan(args)?;
    let (traces, zones) = traces(args, tick_s)?;
    anyhow::ensure!(!traces.is_empty(), "--trace: no trace files");
    plan.zones = zones;
    let s = study::study(&traces, &plan)?;
    emit(&gpuwise_sim::view::spot(&s, format), args.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

/// Busy GPUs per observed hour of the devices of `model` (all devices when `None`), by the one
/// definition in `gpuwise_core::demand`: MIG instances folded into their GPU, hours without
/// telemetry left out, interruptible demand apart.
fn busy_series(
    profiles: &[gpuwise_core::profile::DeviceProfile],
    report: &gpuwise_core::report::Report,
    model: Option<&str>,
    interruptible: Option<(&str, &str)>,
) -> gpuwise_core::demand::BusyHours {
    let rows: std::collections::BTreeMap<&str, &gpuwise_core::report::DeviceRow> =
        report.devices.iter().map(|d| (d.id.as_str(), d)).collect();
    let ids: Vec<String> = profiles.iter().map(|p| p.key.to_string()).collect();
    let units = profiles.iter().zip(&ids).filter_map(|(p, id)| {
        let row = rows.get(id.as_str())?;
        if model.is_some_and(|m| row.model.as_deref() != Some(m)) {
            return None;
        }
        Some(gpuwise_core::demand::Unit {
            parent: (p.key.host.as_str(), p.key.gpu.as_str()),
            share: row.gpu_share,
            hourly: &p.stats.hourly,
            interruptible: interruptible.is_some_and(|(k, v)| p.info.label(k) == Some(v)),
        })
    });
    gpuwise_core::demand::busy_hours(units)
}

/// The GPU models of a report's devices, with how many devices each.
fn models(report: &gpuwise_core::report::Report) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for d in &report.devices {
        *out.entry(d.model.clone().unwrap_or_else(|| "(unknown model)".into()))
            .or_default() += 1;
    }
    out
}

/// Commitment prices: given, or the catalog's for --gpu in the fleet's --cloud/--region.
fn commit_prices(
    args: &CommitArgs,
    settings: &gpuwise_analysis::Settings,
) -> anyhow::Result<gpuwise_sim::commit::CommitPrices> {
    if let Some(od) = args.on_demand_price {
        anyhow::ensure!(args.gpu.is_none(), "give --gpu or the prices, not both");
        return Ok(gpuwise_sim::commit::CommitPrices {
            on_demand: od,
            commit_1y: args.commit_1y_price,
            commit_3y: args.commit_3y_price,
            spot: args.spot_price,
        });
    }
    let Some(name) = &args.gpu else {
        bail!(
            "give --gpu NAME (catalog prices) or --on-demand-price with --commit-1y-price / --commit-3y-price"
        );
    };
    let catalog = settings.prices.catalog();
    let spec = one_gpu(catalog, name)?;
    let ctx = settings.prices.context();
    let quote = |pricing: Pricing| {
        catalog
            .gpu_hour_price(&gpuwise_catalog::PriceQuery {
                gpu: &spec.name,
                cloud: ctx.cloud.as_deref(),
                region: ctx.region.as_deref(),
                pricing,
            })
            .filter(|q| q.pricing == pricing)
    };
    let od = quote(Pricing::OnDemand)
        .ok_or_else(|| anyhow!("the catalog has no on-demand price for {}", spec.name))?;
    let c1 = quote(Pricing::Commit1y);
    let c3 = quote(Pricing::Commit3y);
    anyhow::ensure!(
        c1.is_some() || c3.is_some(),
        "the catalog has no commitment price for {} here: give --commit-1y-price or --commit-3y-price with --on-demand-price",
        spec.name
    );
    for q in [Some(&od), c1.as_ref(), c3.as_ref()].into_iter().flatten() {
        printer::info(&format!("price: {}", q.describe()));
    }
    Ok(gpuwise_sim::commit::CommitPrices {
        on_demand: od.usd_per_gpu_hour,
        commit_1y: c1.map(|q| q.usd_per_gpu_hour),
        commit_3y: c3.map(|q| q.usd_per_gpu_hour),
        spot: args
            .spot_price
            .or_else(|| quote(Pricing::Spot).map(|q| q.usd_per_gpu_hour)),
    })
}

pub(crate) fn commit(args: &CommitArgs) -> anyhow::Result<ExitCode> {
    let cfg = crate::config::Config::load(args.out.config.as_deref())?;
    let format = crate::config::output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        format != Format::Csv,
        "--format: simulate commit prints table, json, markdown or html"
    );
    anyhow::ensure!(
        (0.0..=100.0).contains(&args.spot_share),
        "--spot-share must be within 0–100"
    );
    let label = args
        .interruptible_label
        .as_deref()
        .map(|l| {
            l.split_once('=')
                .ok_or_else(|| anyhow!("--interruptible-label must be KEY=VALUE, got `{l}`"))
        })
        .transpose()?;
    let fleet = crate::fleet::read(
        &args.fleet,
        &cfg,
        &crate::fleet::Asks::default(),
        !args.out.no_progress,
    )?;
    let (settings, report, profiles) = (fleet.analysis.settings(), &fleet.report, &fleet.profiles);
    // --gpu sizes that model's devices; given prices instead, the whole fleet is one pool,
    // which is said when it holds several models.
    let model = match &args.gpu {
        Some(name) => Some(one_gpu(settings.prices.catalog(), name)?.name.clone()),
        None => None,
    };
    let present = models(report);
    if let Some(m) = &model {
        anyhow::ensure!(
            present.contains_key(m),
            "--gpu {m}: the fleet has no such device (it has {})",
            present
                .iter()
                .map(|(m, n)| format!("{n} × {m}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else if present.len() > 1 {
        printer::warn(&format!(
            "the fleet holds {} GPU models ({}): sized as one pool at the prices given; \
             give --gpu NAME to size one model's devices at its catalog prices",
            present.len(),
            present
                .iter()
                .map(|(m, n)| format!("{n} × {m}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let prices = commit_prices(args, settings)?;
    let series = busy_series(profiles, report, model.as_deref(), label);
    if series.unknown_share > 0 {
        printer::warn(&format!(
            "{} MIG instance(s) of unknown size left out of the demand",
            series.unknown_share
        ));
    }
    let demand = gpuwise_sim::commit::Demand {
        span_hours: series.span_hours,
        busy: series.busy,
        interruptible: series.interruptible,
        spot_share: args.spot_share / 100.0,
    };
    let s = gpuwise_sim::commit::study(&demand, prices)?;
    emit(
        &gpuwise_sim::view::commit(&s, format),
        args.out.output.as_ref(),
    )?;
    Ok(ExitCode::SUCCESS)
}
