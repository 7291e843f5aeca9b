//! `gpuwise reconcile`: FOCUS bills against the telemetry of the same fleet.

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use gpuwise_ledger::bill::{BillBuilder, JoinKey};
use gpuwise_ledger::focus::{self, BillRow, ReadTally};
use gpuwise_ledger::observed::Observed;
use gpuwise_ledger::reconcile::{self, Thresholds};
use gpuwise_render::{Format, RenderOptions};

use crate::cli::ReconcileArgs;
use crate::config::{Config, output_format};
use crate::output::emit;
use crate::printer;

/// Parquet files start with these bytes.
const PARQUET_MAGIC: &[u8] = b"PAR1";

/// Read one bill file (CSV, gzip or zstd CSV, or Parquet) into `sink`.
pub(crate) fn read_bill(path: &Path, sink: &mut dyn FnMut(BillRow)) -> anyhow::Result<ReadTally> {
    let name = path.display().to_string();
    let input = gpuwise_sources::Input {
        path: Some(path.to_path_buf()),
        name: name.clone(),
        found_in_dir: false,
    };
    let mut reader = gpuwise_sources::input::open(&input)?;
    let head = reader
        .fill_buf()
        .with_context(|| format!("cannot read `{name}`"))?;
    if head.starts_with(PARQUET_MAGIC) {
        // Parquet's footer is at the end: the file is read whole.
        let mut bytes = Vec::new();
        reader
            .read_to_end(&mut bytes)
            .with_context(|| format!("cannot read `{name}`"))?;
        // The reader turns a panic of the Parquet decoder on corrupt data into an error;
        // silence the default hook meanwhile so the user sees that error, not a panic trace.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let read = focus::read_parquet(bytes.into(), &name, sink);
        std::panic::set_hook(hook);
        return Ok(read?);
    }
    Ok(focus::read_csv(reader, &name, sink)?)
}

pub(crate) fn run(args: &ReconcileArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    let format = output_format(args.format.as_deref(), &cfg)?;
    anyhow::ensure!(
        format != Format::Html,
        "--format: reconcile prints table, json, csv or markdown"
    );
    let join: JoinKey = args.join.parse().map_err(|e| anyhow!("--join: {e}"))?;
    for (flag, v) in [
        ("--gap-hours", args.gap_hours),
        ("--gap-share", args.gap_share),
    ] {
        anyhow::ensure!(
            v.is_finite() && v >= 0.0,
            "{flag} must be a non-negative number, got {v}"
        );
    }
    let (_cfg, settings, report, profiles) = crate::fleet::read(&args.fleet, &args.out, None)?;
    let catalog = settings.prices.catalog();
    let mut builder = BillBuilder::new(catalog, &join, &args.team_tag);
    for path in &args.bill {
        let tally = read_bill(path, &mut |r| builder.add(r))?;
        builder.add_read_skips(&tally.skips);
        printer::info(&format!(
            "{}: FOCUS {} ({} rows{})",
            path.display(),
            tally.version,
            tally.rows,
            if tally.skips.total() > 0 {
                format!(", {} skipped", tally.skips.total())
            } else {
                String::new()
            }
        ));
    }
    let bill = builder.finish()?;
    let prices = gpuwise_ledger::bill::catalog_prices(catalog, &bill);
    let observed = Observed::new(&profiles, &report);
    let r = reconcile::reconcile(
        &bill,
        &observed,
        &prices,
        &join,
        &args.team_tag,
        Thresholds {
            gap_hours: args.gap_hours,
            gap_share_pct: args.gap_share,
        },
    );
    for w in &r.warnings {
        printer::warn(w);
    }
    for (k, s) in &r.rows.skipped {
        printer::warn(&format!(
            "{} bill row(s) skipped ({k}), e.g. {}",
            s.count, s.example
        ));
    }
    let color = args.out.output.is_none()
        && printer::color_allowed(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let text =
        gpuwise_render::ledger::reconciliation(&r, format, &RenderOptions { top: 0, color })?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
