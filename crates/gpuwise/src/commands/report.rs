//! `gpuwise report`: the fleet (files or a store) → the report, with the advice when asked →
//! rendered to stdout or `--output`; exit 1 when `--max-idle-share` is exceeded.

use std::process::ExitCode;

use gpuwise_render::{Format, RenderOptions};

use gpuwise_analysis::Analysis;

use crate::cli::ReportArgs;
use crate::config::Config;
use crate::fleet::{Asks, Fleet};
use crate::output::emit_with;
use crate::printer;

pub(crate) fn run(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let asks = Asks {
        workloads: args.advise_opts.workloads.as_deref(),
        advise: args.advise.then_some(&args.advise_opts),
        keep: if args.advise {
            crate::fleet::Keep::Profiles
        } else {
            crate::fleet::Keep::Nothing
        },
        ..Asks::default()
    };
    let Fleet {
        analysis,
        mut report,
        profiles,
        ..
    } = crate::fleet::read(&args.fleet, &cfg, &asks, !args.out.no_progress)?;
    let format = crate::config::output_format(args.format.as_deref(), &cfg)?;
    let advice = if args.advise {
        let advice = analysis.advice(&report, &profiles);
        Analysis::with_advice_kpis(&mut report, &advice);
        Some(advice)
    } else {
        None
    };
    // The profiles are in the report now: free them before the output is written.
    drop(profiles);
    // Prices past the staleness limit stay so until the catalog is refreshed: a table printed
    // for a person says it the first time each day; a file (`--output`), JSON, CSV, Markdown
    // and HTML, which others read later, always carry it.
    if format == Format::Table && args.out.output.is_none() {
        report.warnings.retain(|w| {
            w.kind != "stale_price"
                || crate::notice::first_today(&format!("stale_price {}", w.message))
        });
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let opts = RenderOptions {
        top: args.top.or(cfg.top).unwrap_or(20),
        color,
    };
    emit_with(args.out.output.as_ref(), |w| {
        let doc = gpuwise_analysis::view::Document {
            report: &report,
            advice: advice.as_ref(),
        };
        gpuwise_analysis::view::write(&doc, format, &opts, w)
    })?;
    if format != Format::Table || args.out.output.is_some() {
        for w in &report.warnings {
            printer::warn(&format!("{}: {}", w.kind, w.message));
        }
    }
    if let (Some(max), Some(share)) = (args.max_idle_share, report.fleet.kpis.idle_share_pct)
        && share > max
    {
        printer::warn(&format!(
            "idle share {share:.1}% of GPU-hours is above --max-idle-share {max}%"
        ));
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
