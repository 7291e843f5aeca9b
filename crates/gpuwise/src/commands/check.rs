//! `gpuwise check`: the policy's rules over the report and the allocation; exit 1 on a
//! violation; `--notify` posts the outcome (Slack-compatible or generic JSON) with a timeout
//! and bounded retries.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_ledger::check::{self, Outcome, Policy};
use gpuwise_ledger::notify;
use gpuwise_render::{Format, RenderOptions};

use crate::cli::CheckArgs;
use crate::config::{Config, output_format};
use crate::fleet::Asks;
use crate::output::emit;
use crate::{printer, webhook};

fn notify_if_asked(args: &CheckArgs, o: &Outcome) -> anyhow::Result<()> {
    let Some(target) = webhook::Target::of(&args.notify)? else {
        return Ok(());
    };
    if o.violations.is_empty() && !args.notify_always {
        return Ok(());
    }
    target.send(&notify::message(o, target.style))
}

/// `--emit-rules`: the policy as a Prometheus rule file, with the profile's thresholds the
/// rules share with `check`; the rules Prometheus cannot hold said on stderr.
fn emit_rules(args: &CheckArgs, cfg: &Config, policy: &Policy) -> anyhow::Result<ExitCode> {
    let profile =
        crate::fleet::profile_settings(&args.fleet.analysis, cfg, crate::clock::now_ms()?)?;
    let e = gpuwise_ledger::rules::prometheus_rules(
        policy,
        &gpuwise_ledger::rules::RuleSettings {
            idle_threshold_pct: f64::from(profile.idle_threshold_pct),
            held_idle_mib: f64::from(profile.held_idle_min_mib),
        },
    );
    for (rule, why) in &e.left_out {
        printer::warn(&format!("{rule} is not in the rules: {why}"));
    }
    emit(&e.yaml, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn run(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        matches!(format, Format::Table | Format::Json | Format::Markdown),
        "--format: check prints table, json or markdown"
    );
    let path = args.policy.clone().or_else(|| cfg.policy.clone()).ok_or_else(|| {
        anyhow!("no policy: give --policy FILE (or `policy = \"FILE\"` in the config file; docs/policy.md)")
    })?;
    let policy = Policy::from_toml(&fs_err::read_to_string(&path)?, &path.display().to_string())?;
    if args.emit_rules {
        return emit_rules(args, &cfg, &policy);
    }
    // A URL that will not be posted to is said before the fleet is read.
    webhook::Target::of(&args.notify)?;
    let asks = Asks {
        workloads: args.workloads.as_deref(),
        alloc: Some(&args.alloc),
        ..Asks::default()
    };
    let mut fleet = crate::fleet::read(&args.fleet, &cfg, &asks, !args.out.no_progress)?;
    let allocation = fleet.allocation()?;
    check::known_teams(
        &policy,
        &allocation,
        &fleet.analysis.settings().teams.named_teams(),
        &path.display().to_string(),
    )?;
    let o = check::evaluate(
        &policy,
        &fleet.report,
        &fleet.profiles,
        &allocation,
        fleet.now_ms,
    );
    let terminal =
        args.out.output.is_none() && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let color = terminal && printer::color_allowed(true);
    // Piped into a CI log (no terminal, no COLUMNS): one violation a line, not a table whose
    // last column is squeezed to a few characters and breaks ids mid-token.
    let text = if format == Format::Table && !terminal && std::env::var_os("COLUMNS").is_none() {
        gpuwise_ledger::view::check_log(&o)
    } else {
        gpuwise_ledger::view::check(&o, format, &RenderOptions { top: 0, color })?
    };
    emit(&text, args.out.output.as_ref())?;
    notify_if_asked(args, &o)?;
    if !o.not_evaluated.is_empty() {
        printer::warn(&format!(
            "{} rule(s) could not be decided{}",
            o.not_evaluated.len(),
            if args.fleet.read.strict {
                " (--strict: exit 1)"
            } else {
                " (--strict makes that exit 1)"
            }
        ));
    }
    Ok(
        if o.violations.is_empty() && (o.not_evaluated.is_empty() || !args.fleet.read.strict) {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        },
    )
}
