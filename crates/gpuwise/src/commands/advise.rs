//! `gpuwise advise` (and `report --advise`): the report's figures → ranked actions.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_advise::{self as advise, Advice, AdviseSettings, Kind};
use gpuwise_catalog::Pricing;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use gpuwise_render::{Format, RenderOptions};

use crate::cli::{AdviseArgs, AdviseOpts};
use crate::config::output_format;
use crate::fleet::Settings;
use crate::output::emit;
use crate::{duration, printer};

fn hours(flag: &str, v: Option<&String>, default: f64) -> anyhow::Result<f64> {
    match v {
        Some(s) => {
            let ms = duration::parse_ms(s).map_err(|e| anyhow!("--{flag}: {e}"))?;
            anyhow::ensure!(ms > 0, "--{flag}: must be longer than zero");
            Ok(gpuwise_core::hours_of_ms(ms as f64))
        }
        None => Ok(default),
    }
}

/// The advice for a built report.
pub(crate) fn advice(
    report: &Report,
    profiles: &[DeviceProfile],
    s: &Settings,
    o: &AdviseOpts,
) -> anyhow::Result<Advice> {
    let d = AdviseSettings::default();
    let ctx = s.prices.context();
    if let Some(h) = o.headroom {
        anyhow::ensure!(
            (1.0..=4.0).contains(&h),
            "--headroom: {h} is not a factor between 1 and 4"
        );
    }
    let known: std::collections::BTreeSet<&str> = s
        .prices
        .catalog()
        .instances
        .iter()
        .map(|i| i.cloud.as_str())
        .collect();
    for c in &o.allow_clouds {
        anyhow::ensure!(
            known.contains(c.as_str()),
            "--allow-clouds: `{c}` has no instances in the catalog (clouds: {})",
            known.iter().copied().collect::<Vec<_>>().join(", ")
        );
    }
    let settings = AdviseSettings {
        headroom: o.headroom.unwrap_or(d.headroom),
        cloud: ctx.cloud.clone(),
        region: ctx.region.clone(),
        pricing: ctx.pricing.unwrap_or(Pricing::OnDemand),
        allow_clouds: o.allow_clouds.clone(),
        idle_timeout_h: hours("idle-timeout", o.idle_timeout.as_ref(), d.idle_timeout_h)?,
        checkpoint_cost_h: hours(
            "checkpoint-cost",
            o.checkpoint_cost.as_ref(),
            d.checkpoint_cost_h,
        )?,
        spot_mtbi_h: hours("spot-mtbi", o.spot_mtbi.as_ref(), d.spot_mtbi_h)?,
        ..d
    };
    Ok(advise::advise(
        report,
        profiles,
        s.prices.catalog(),
        &s.hints,
        &settings,
        &s.read.tz,
    ))
}

/// Share of evaluated GPU-hours on devices the advice would not resize or pack: the KPI the
/// report leaves empty without `--advise`.
pub(crate) fn rightsized_share(report: &Report, a: &Advice) -> Option<f64> {
    let moved: std::collections::BTreeSet<&str> = a
        .actions
        .iter()
        .filter(|x| x.in_plan && matches!(x.kind, Kind::Rightsize | Kind::Consolidate))
        .flat_map(|x| x.targets.iter().map(String::as_str))
        .collect();
    let priced: Vec<_> = report
        .devices
        .iter()
        .filter(|d| d.usd_per_gpu_hour.is_some())
        .collect();
    let total: f64 = priced.iter().map(|d| d.gpu_hours).sum();
    (total > 0.0).then(|| {
        let ok: f64 = priced
            .iter()
            .filter(|d| !moved.contains(d.id.as_str()))
            .map(|d| d.gpu_hours)
            .sum();
        100.0 * ok / total
    })
}

pub(crate) fn run(args: &AdviseArgs) -> anyhow::Result<ExitCode> {
    let (cfg, settings, report, profiles) =
        crate::fleet::read(&args.fleet, &args.out, args.advise.workloads.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        matches!(format, Format::Table | Format::Json | Format::Markdown),
        "--format: advise prints table, json or markdown (the HTML report has it: `{} report --advise --format html`)",
        printer::me()
    );
    let a = advice(&report, &profiles, &settings, &args.advise)?;
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let opts = RenderOptions {
        top: args.top.or(cfg.top).unwrap_or(10),
        color,
    };
    emit(
        &gpuwise_render::advice::render(&a, format, &opts),
        args.out.output.as_ref(),
    )?;
    if !a.unpriced.is_empty() {
        printer::warn(&format!(
            "{} device(s) have no price and get no advice (add --prices or --cloud)",
            a.unpriced.len()
        ));
    }
    Ok(ExitCode::SUCCESS)
}
