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
