//! `gpuwise rollup`: telemetry files → per-device tiles (an hour by default) → the history
//! store's day partitions, then retention and compaction.

use std::process::ExitCode;

use anyhow::anyhow;
use gpuwise_store::Store;

use crate::cli::RollupArgs;
use crate::config::Config;
use crate::output::emit;
use crate::{duration, printer};

pub(crate) fn run(args: &RollupArgs) -> anyhow::Result<ExitCode> {
    let cfg = Config::load(args.out.config.as_deref())?;
    anyhow::ensure!(
        !args.fleet.inputs.is_empty() || args.fleet.prom.prometheus.is_some(),
        "rollup needs telemetry to roll up: files (INPUT…) or --prometheus URL"
    );
    let tile_ms = duration::parse_positive_ms("tile", &args.tile).map_err(|e| anyhow!(e))?;
    anyhow::ensure!(
        tile_ms.is_multiple_of(60_000)
            && gpuwise_core::DAY_MS.unsigned_abs().is_multiple_of(tile_ms),
        "--tile: {} is not a whole number of minutes that divides a day (1h, 30m, 1d …)",
        args.tile
    );
    let s = crate::fleet::resolve(
        &args.fleet.read,
        &args.fleet.analysis,
        &cfg,
        &crate::fleet::Asks::default(),
    )?;
    let dir = crate::fleet::store::dir(args.fleet.store.as_deref())?;
    let mut read = s.read.clone();
    read.tile_ms = Some(tile_ms);
    let (profile, tally, inputs) = if args.fleet.prom.prometheus.is_some() {
        // The store's raw samples over its window (--last, --start, --end): only samples
        // join exactly, so never the pushdown.
        let (from, to) =
            crate::fleet::prom_window(&args.fleet.prom, args.fleet.read.start.as_deref(), &read)?;
        let (profile, summary) = crate::fleet::prom_raw(&args.fleet.prom, from, to, &read)?;
        for w in &summary.warnings {
            printer::warn(&format!("{}: {}", w.kind, w.message));
        }
        let mut tally = gpuwise_sources::Tally::default();
        tally.samples = summary.samples;
        (profile, tally, 1)
    } else {
        let inputs = gpuwise_sources::expand(&args.fleet.inputs)?;
        let ingested = printer::reading(!args.out.no_progress, |counter| {
            gpuwise_sources::read_all(&inputs, &read, counter)
        })?;
        (ingested.profile, ingested.tally, inputs.len())
    };
    for w in tally.warnings() {
        printer::warn(&format!("{}: {}", w.kind, w.message));
    }
    anyhow::ensure!(
        !profile.is_empty(),
        "no samples in {inputs} input(s): nothing to roll up"
    );
    let store = Store::at(&dir);
    let written = store.write(&profile, tile_ms, s.now_ms, &read.profile)?;
    let ago = |flag: &str, v: &Option<String>| -> anyhow::Result<Option<i64>> {
        v.as_ref()
            .map(|v| {
                let ms = duration::parse_positive_ms(flag, v).map_err(|e| anyhow!(e))?;
                Ok(s.now_ms
                    .saturating_sub(i64::try_from(ms).unwrap_or(i64::MAX)))
            })
            .transpose()
    };
    let removed = match ago("retain", &args.retain)? {
        Some(before) => store.retain(before)?,
        None => 0,
    };
    let compacted = match ago("compact-after", &args.compact_after)? {
        Some(before) => store.compact(before, &read.profile)?,
        None => 0,
    };
    let text = summary(
        args,
        &dir,
        &Done {
            inputs,
            tally: &tally,
            written: &written,
            removed,
            compacted,
            tile_ms,
        },
        &store.days()?,
    )?;
    emit(&text, args.out.output.as_ref())?;
    Ok(ExitCode::SUCCESS)
}

fn day(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

/// What a rollup did.
struct Done<'a> {
    inputs: usize,
    tally: &'a gpuwise_sources::Tally,
    written: &'a gpuwise_store::Written,
    removed: usize,
    compacted: usize,
    tile_ms: u64,
}

fn summary(
    args: &RollupArgs,
    dir: &std::path::Path,
    d: &Done<'_>,
    days: &[gpuwise_store::Day],
) -> anyhow::Result<String> {
    let bytes = days.iter().map(|d| d.bytes).sum::<u64>();
    let (first, last) = (
        days.first().map(|d| day(d.start_ms)),
        days.last().map(|d| day(d.start_ms)),
    );
    Ok(match args.format.as_deref().unwrap_or("table") {
        "json" => format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::json!({
                "schema": "gpuwise.rollup/v1",
                "store": dir.display().to_string(),
                "tile_s": d.tile_ms / 1000,
                "inputs": d.inputs,
                "lines": d.tally.lines,
                "samples": d.tally.samples,
                "skipped": d.tally.skipped(),
                "written": d.written,
                "removed_days": d.removed,
                "compacted_days": d.compacted,
                "store_days": days.len(),
                "store_bytes": bytes,
                "first_day": first,
                "last_day": last,
            }))?
        ),
        "table" => format!(
            "rolled up {} samples from {} input(s) into {}: {} day(s) written ({} rows changed, {} kept, {} still open), {} removed, {} compacted; the store holds {} day(s), {} to {}, {:.1} MB\n",
            d.tally.samples,
            d.inputs,
            dir.display(),
            d.written.days,
            d.written.changed,
            d.written.kept,
            d.written.open,
            d.removed,
            d.compacted,
            days.len(),
            first.unwrap_or_default(),
            last.unwrap_or_default(),
            bytes as f64 / 1e6
        ),
        other => anyhow::bail!("--format: rollup prints table or json, not {other}"),
    })
}
