//! `gpuwise reconcile`: FOCUS bills against the telemetry of the same fleet.

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, anyhow, bail};
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
    let cannot = || format!("cannot read `{name}`");
    let input = gpuwise_sources::Input {
        path: Some(path.to_path_buf()),
        name: name.clone(),
        found_in_dir: false,
    };
    let (mut reader, trailing) = gpuwise_sources::input::open_noting(&input)?;
    let head = reader.fill_buf().with_context(cannot)?;
    if head.starts_with(PARQUET_MAGIC) {
        // Parquet's footer is at the end. A plain file is read where it lies (pages as they
        // are needed); a compressed one (rare) is decompressed into memory first.
        let mut file = std::fs::File::open(path).with_context(cannot)?;
        let mut magic = [0u8; 4];
        let plain = file.read_exact(&mut magic).is_ok() && magic == PARQUET_MAGIC;
        let bytes = if plain {
            None
        } else {
            let mut bytes = Vec::new();
            reader.read_to_end(&mut bytes).with_context(cannot)?;
            Some(bytes::Bytes::from(bytes))
        };
        // The reader turns a panic of the Parquet decoder on corrupt data into an error;
        // silence the default hook meanwhile so the user sees that error, not a panic trace.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let read = match bytes {
            Some(b) => focus::read_parquet(b, &name, sink),
            None => focus::read_parquet(file, &name, sink),
        };
        std::panic::set_hook(hook);
        return Ok(read?);
    }
    let tally = focus::read_csv(reader, &name, sink)?;
    if trailing.load(std::sync::atomic::Ordering::Relaxed) {
        printer::warn(&format!(
            "{name}: bytes after the last gzip member are not gzip; ignored"
        ));
    }
    Ok(tally)
}

/// How a tally's separator reads in a message (`""` for a comma or Parquet).
fn separated(tally: &ReadTally) -> &'static str {
    match tally.delimiter {
        Some(b';') => "semicolon-separated, ",
        Some(b'\t') => "tab-separated, ",
        Some(b'|') => "pipe-separated, ",
        _ => "",
    }
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
    let fleet = crate::fleet::read(
        &args.fleet,
        &cfg,
        &crate::fleet::Asks::default(),
        !args.out.no_progress,
    )?;
    let (report, profiles) = (&fleet.report, &fleet.profiles);
    let catalog = fleet.analysis.settings().prices.catalog();
    let mut builder = BillBuilder::new(catalog, &join, &args.team_tag);
    for path in &args.bill {
        let tally = read_bill(path, &mut |r| builder.add(r))?;
        builder.add_read_skips(&tally.skips);
        printer::info(&format!(
            "{}: FOCUS {} ({}{} rows{})",
            path.display(),
            tally.version,
            separated(&tally),
            tally.rows,
            if tally.skips.total() > 0 {
                format!(", {} skipped", tally.skips.total())
            } else {
                String::new()
            }
        ));
    }
    let bill = builder.finish()?;
    if bill.rows == bill.skips.total() {
        let files = args
            .bill
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if bill.rows == 0 {
            bail!("{files}: the bill has no rows");
        }
        let why = bill
            .skips
            .by_reason
            .iter()
            .map(|(k, (n, e))| format!("{n} {k}, e.g. {e}"))
            .collect::<Vec<_>>()
            .join("; ");
        bail!(
            "{files}: no bill row could be read; all {} were skipped ({why})",
            bill.rows
        );
    }
    let prices = gpuwise_ledger::bill::catalog_prices(catalog, &bill);
    let observed = Observed::new(profiles, report);
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
    let text = gpuwise_ledger::view::reconciliation(&r, format, &RenderOptions { top: 0, color })?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}
