//! `gpuwise allocate`: the fleet's cost by team (showback or chargeback), unit costs, the
//! month to date and month-end forecast; or the allocation as FOCUS 1.2 rows.

use std::process::ExitCode;

use anyhow::{anyhow, bail};
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::Report;
use gpuwise_ledger::allocate::{self, Allocation, Distribute, Mode, Policy, UnitCounts};
use gpuwise_render::{Format, RenderOptions};

use crate::cli::{AllocateArgs, AllocateOpts};
use crate::config::{Config, output_format};
use crate::fleet::Settings;
use crate::output::emit;
use crate::printer;

/// The allocation policy from the flags (else the config file), with a warning for flags the
/// mode has no use for.
pub(crate) fn policy(o: &AllocateOpts, cfg: &Config) -> anyhow::Result<Policy> {
    let mode: Mode = o
        .mode
        .as_deref()
        .or(cfg.allocation_mode.as_deref())
        .unwrap_or("showback")
        .parse()
        .map_err(|e| anyhow!("--mode: {e}"))?;
    let idle: Distribute = o
        .idle
        .as_deref()
        .or(cfg.idle_policy.as_deref())
        .unwrap_or("proportional")
        .parse()
        .map_err(|e| anyhow!("--idle: {e}"))?;
    let shared_teams = if o.shared_teams.is_empty() {
        cfg.shared_teams.clone().unwrap_or_default()
    } else {
        o.shared_teams.clone()
    };
    if mode == Mode::Showback && (o.idle.is_some() || !o.shared_teams.is_empty()) {
        printer::warn(
            "--idle and --shared-team apply to --mode chargeback; showback shows costs as they fell",
        );
    }
    Ok(Policy {
        mode,
        idle,
        shared_teams,
    })
}

/// `--units`: work per team and month, for unit costs.
pub(crate) fn unit_counts(o: &AllocateOpts) -> anyhow::Result<UnitCounts> {
    Ok(match &o.units {
        Some(p) => UnitCounts::parse(&fs_err::read_to_string(p)?, &p.display().to_string())?,
        None => UnitCounts::default(),
    })
}

/// The allocation of a built report.
pub(crate) fn allocation(
    report: &Report,
    profiles: &[DeviceProfile],
    s: &Settings,
    o: &AllocateOpts,
    cfg: &Config,
) -> anyhow::Result<Allocation> {
    let policy = policy(o, cfg)?;
    let counts = unit_counts(o)?;
    let now = s
        .report
        .now_ms
        .ok_or_else(|| anyhow!("no clock for the allocation"))?;
    let a = allocate::allocate(profiles, report, &s.teams, &policy, &counts, now);
    if let Some(what) = gpuwise_ledger::check::unknown_teams(
        policy.shared_teams.iter().map(String::as_str),
        &a,
        &s.teams.named_teams(),
    ) {
        bail!("--shared-team names {what}");
    }
    for w in &a.warnings {
        printer::warn(w);
    }
    if a.unpriced_devices > 0 {
        printer::warn(&format!(
            "{} device(s) have no price: their GPU-hours are allocated, their dollars unknown (add --prices or --cloud)",
            a.unpriced_devices
        ));
    }
    Ok(a)
}

pub(crate) fn run(args: &AllocateArgs) -> anyhow::Result<ExitCode> {
    let focus = args.format.as_deref() == Some("focus");
    let format = if focus {
        Format::Csv
    } else {
        output_format(
            args.format.as_deref(),
            &crate::config::Config::load(args.out.config.as_deref())?,
        )?
    };
    anyhow::ensure!(
        format != Format::Html,
        "--format: allocate prints table, json, csv, markdown or focus"
    );
    let (cfg, settings, report, profiles) = crate::fleet::read(&args.fleet, &args.out, None)?;
    if focus {
        policy(&args.alloc, &cfg)?;
        // The public list price: the catalog's on-demand price of the device's GPU in the
        // run's price context (cloud, region).
        let catalog = settings.prices.catalog();
        let ctx = settings.prices.context();
        let list_price = |row: &gpuwise_core::report::DeviceRow| {
            let gpu = row.model.as_deref()?;
            catalog
                .gpu_hour_price(&gpuwise_catalog::PriceQuery {
                    gpu,
                    cloud: ctx.cloud.as_deref(),
                    region: ctx.region.as_deref(),
                    pricing: gpuwise_catalog::Pricing::OnDemand,
                })
                .filter(|q| q.pricing == gpuwise_catalog::Pricing::OnDemand)
                .map(|q| q.usd_per_gpu_hour)
        };
        let rows =
            gpuwise_ledger::export::focus_rows(&profiles, &report, &settings.teams, &list_price);
        let unpriced = rows.unpriced_devices;
        let csv = gpuwise_render::ledger::focus_csv(&rows);
        if unpriced > 0 {
            printer::warn(&format!(
                "{unpriced} device(s) have no price and no FOCUS rows (a FOCUS cost cannot be unknown)"
            ));
        }
        emit(&csv, args.out.output.as_ref())?;
        return Ok(ExitCode::SUCCESS);
    }
    let a = allocation(&report, &profiles, &settings, &args.alloc, &cfg)?;
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let text = gpuwise_render::ledger::allocation(&a, format, &RenderOptions { top: 0, color })?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
