//! `gpuwise jobs`: the scheduler's jobs (Slurm accounting) and the run tracker's runs (MLflow)
//! joined with the GPU samples: per job GPU-hours, cost, utilization, memory and flags; per
//! user, account and experiment the unit costs. Exit 1 with `--fail-on-idle-cost` above it.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_jobs::JobSettings;
use gpuwise_render::RenderOptions;

use crate::cli::JobsArgs;
use crate::config::{Config, output_format};
use crate::fleet::{self, Asks};
use crate::output::emit_with;
use crate::{duration, jobs_join, printer, webhook};

pub(crate) fn run(args: &JobsArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    let s = fleet::resolve(
        &args.fleet.read,
        &args.fleet.analysis,
        &cfg,
        &Asks::default(),
    )?;
    let settings = job_settings(args, s.read.profile.idle_threshold_pct)?;
    // A URL that will not be posted to is said before the fleet is read.
    let target = webhook::Target::of(&args.notify)?;
    let r = jobs_join::run(
        &jobs_join::Request {
            sources: &args.sources,
            fleet: &args.fleet,
            settings,
            progress: !args.out.no_progress,
        },
        s,
    )?;
    for w in &r.warnings {
        printer::warn(w);
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let opts = RenderOptions {
        top: args.top,
        color,
    };
    emit_with(args.out.output.as_ref(), |w| {
        gpuwise_jobs::view::write(&r, format, &opts, w)
    })?;
    if let Some(target) = target {
        let digests = gpuwise_jobs::digest::digests(&r, args.digest_min_idle_cost);
        for d in &digests {
            target.send(&gpuwise_jobs::digest::message(d, target.style))?;
        }
        printer::info(&format!("{} user digest(s)", digests.len()));
    }
    if let Some(limit) = args.fail_on_idle_cost
        && r.fleet.idle_cost_usd > limit
    {
        printer::warn(&format!(
            "jobs' idle GPU time cost {} (limit {})",
            gpuwise_render::usd(r.fleet.idle_cost_usd),
            gpuwise_render::usd(limit)
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

fn job_settings(args: &JobsArgs, idle: f32) -> anyhow::Result<JobSettings> {
    let d = JobSettings::default();
    let hours = |flag: &str, v: Option<&String>, default: f64| -> anyhow::Result<f64> {
        Ok(match v {
            Some(t) => {
                let ms = duration::parse_ms(t).map_err(|e| anyhow!("--{flag}: {e}"))?;
                #[allow(clippy::cast_precision_loss)]
                gpuwise_core::hours_of_ms(ms as f64)
            }
            None => default,
        })
    };
    for (flag, v) in [
        ("memory-share", args.memory_share),
        ("low-utilization", args.low_utilization),
    ] {
        if let Some(v) = v {
            anyhow::ensure!(
                (0.0..=100.0).contains(&v),
                "--{flag}: {v} is not a percentage"
            );
        }
    }
    Ok(JobSettings {
        idle_below_pct: idle,
        idle_tail_h: hours("idle-tail", args.idle_tail.as_ref(), d.idle_tail_h)?,
        memory_share_pct: args.memory_share.unwrap_or(d.memory_share_pct),
        low_utilization_pct: args.low_utilization.unwrap_or(d.low_utilization_pct),
        min_observed_h: hours("min-observed", args.min_observed.as_ref(), d.min_observed_h)?,
    })
}
