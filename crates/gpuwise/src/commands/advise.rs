//! `gpuwise advise` (and `report --advise`): the report's figures → ranked actions.

use std::process::ExitCode;

use gpuwise_render::{Format, RenderOptions};

use crate::cli::AdviseArgs;
use crate::config::{Config, output_format};
use crate::fleet::Asks;
use crate::output::emit;
use crate::printer;

pub(crate) fn run(args: &AdviseArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let asks = Asks {
        workloads: args.advise.workloads.as_deref(),
        advise: Some(&args.advise),
        ..Asks::default()
    };
    let fleet = crate::fleet::read(&args.fleet, &cfg, &asks, !args.out.no_progress)?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        matches!(format, Format::Table | Format::Json | Format::Markdown),
        "--format: advise prints table, json or markdown (the HTML report has it: `{} report --advise --format html`)",
        printer::me()
    );
    let a = fleet.analysis.advice(&fleet.report, &fleet.profiles);
    if args.log {
        log(args, &fleet.report, &a, fleet.now_ms)?;
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let opts = RenderOptions {
        top: args.top.or(cfg.top).unwrap_or(10),
        color,
    };
    emit(
        &gpuwise_analysis::view::advice::render(&a, format, &opts),
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

/// `--log`: each action appended to the store's journal as recommended (once: an action
/// already there, same kind, targets and window, is not added again).
fn log(
    args: &AdviseArgs,
    report: &gpuwise_core::report::Report,
    a: &gpuwise_analysis::Advice,
    now_ms: i64,
) -> anyhow::Result<()> {
    let dir = crate::fleet::store::dir(args.fleet.store.as_deref())?;
    let ms = |v: &Option<String>| {
        v.as_deref()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .map(jiff::Timestamp::as_millisecond)
    };
    let (Some(from), Some(to)) = (ms(&report.window.start), ms(&report.window.end)) else {
        anyhow::bail!("--log: the report has no window to base the actions on");
    };
    let known: std::collections::BTreeSet<String> = crate::fleet::store::actions(&dir)?
        .into_iter()
        .map(|x| x.id)
        .collect();
    let mut added = 0;
    for x in &a.actions {
        let id = gpuwise_analysis::review::action_id(x.kind.as_str(), &x.targets, (from, to));
        if known.contains(&id) {
            continue;
        }
        gpuwise_store::journal::append(
            &dir,
            &serde_json::json!({
                "type": "recommended",
                "id": id,
                "recommended_ms": now_ms,
                "kind": x.kind.as_str(),
                "targets": x.targets,
                "target_names": x.target_names,
                "predicted_monthly_usd": x.monthly_savings_usd,
                "current_monthly_usd": x.current_monthly_usd,
                "based_on": [from, to],
                "evidence": x.evidence,
            }),
        )?;
        added += 1;
    }
    printer::info(&format!(
        "{added} action(s) recorded in {} ({} already there)",
        gpuwise_store::journal::path(&dir).display(),
        a.actions.len() - added
    ));
    Ok(())
}
