//! `gpuwise generate`: a synthetic fleet of any size, with its planted truth.

use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, anyhow, bail};
use gpuwise_synth::{Fleet, FleetOptions};

use crate::cli::GenerateArgs;
use crate::synthetic::{parse_start, write_fleet, write_truth};
use crate::{duration, printer};

/// Above this, `generate` on a terminal asks for `--yes` first.
const BIG_OUTPUT_BYTES: u64 = 2_000_000_000;

/// Bytes per device-sample of each format, measured on generated files (16 GPUs, a day at
/// 60 s, 2026-11-26): DCGM text repeats its label set on every line.
fn bytes_per_sample(format: &str, openmetrics: bool) -> u64 {
    match (format, openmetrics) {
        (_, true) => 2_504,
        ("dcgm", _) => 2_496,
        ("dmon", _) => 91,
        _ => 162,
    }
}

/// The uncompressed size `fleet` will take on disk, from the formats of its hosts.
fn estimated_bytes(fleet: &Fleet, openmetrics: bool) -> u64 {
    let samples = fleet.samples_per_device();
    fleet
        .hosts()
        .iter()
        .map(|(_, format, devices)| {
            devices.len() as u64 * samples * bytes_per_sample(format, openmetrics)
        })
        .sum()
}

fn human_bytes(b: u64) -> String {
    #[allow(clippy::cast_precision_loss)]
    let v = b as f64;
    if v >= 1e9 {
        format!("{:.1} GB", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.0} MB", v / 1e6)
    } else {
        format!("{:.0} kB", v / 1e3)
    }
}

/// The fleet's FOCUS bill with the planted disagreements, and the plan beside it.
fn write_bill(fleet: &Fleet, path: &Path) -> anyhow::Result<()> {
    let plan = gpuwise_synth::bill::BillPlan::planted(fleet);
    let mut text = Vec::new();
    gpuwise_synth::bill::focus_bill(&mut text, fleet, &plan)?;
    crate::output::write(path, &text)?;
    let truth = path.with_file_name(format!(
        "{}.truth.json",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    crate::output::write(&truth, serde_json::to_string_pretty(&plan)?.as_bytes())?;
    printer::info(&format!(
        "wrote a FOCUS bill to {} (planted: {}) and {}",
        path.display(),
        serde_json::to_string(&plan)?,
        truth.display()
    ));
    Ok(())
}

pub(crate) fn run(args: &GenerateArgs) -> anyhow::Result<ExitCode> {
    let interval_ms = duration::parse_ms(&args.interval).map_err(|e| anyhow!("--interval: {e}"))?;
    if interval_ms < 1000 || interval_ms % 1000 != 0 {
        bail!(
            "--interval must be a whole number of seconds (nvidia-smi and dmon print whole seconds)"
        );
    }
    let format = match args.format.as_str() {
        "mixed" => None,
        "nvidia-smi" => Some("nvidia-smi"),
        "dcgm" => Some("dcgm"),
        "dmon" => Some("dmon"),
        // One OpenMetrics file of DCGM metrics for `promtool tsdb create-blocks-from openmetrics`.
        "openmetrics" => Some("dcgm"),
        other => {
            bail!("--format `{other}` is not one of nvidia-smi, dcgm, dmon, mixed, openmetrics")
        }
    };
    if !["none", "gzip", "zstd"].contains(&args.compress.as_str()) {
        bail!(
            "--compress `{}` is not one of none, gzip, zstd",
            args.compress
        );
    }
    anyhow::ensure!(
        args.gpus > 0 && args.days > 0,
        "--gpus and --days must be at least 1"
    );
    let fleet = Fleet::new(FleetOptions {
        gpus: args.gpus,
        days: args.days,
        interval_ms,
        seed: args.seed,
        start_ms: parse_start(args.start.as_deref())?,
        format,
    });
    let estimate = estimated_bytes(&fleet, args.format == "openmetrics");
    let size = if args.compress == "none" {
        format!("about {}", human_bytes(estimate))
    } else {
        format!("about {} before compression", human_bytes(estimate))
    };
    printer::info(&format!(
        "writing {} GPUs × {} samples to {}: {size}",
        fleet.devices.len(),
        fleet.samples_per_device(),
        args.out.display()
    ));
    if estimate > BIG_OUTPUT_BYTES
        && !args.yes
        && std::io::IsTerminal::is_terminal(&std::io::stdin())
    {
        bail!(
            "that is {size}: pass --yes to write it (or fewer --gpus, --days, a longer --interval, --compress zstd)"
        );
    }
    let files = if args.format == "openmetrics" {
        anyhow::ensure!(
            args.compress == "none",
            "--compress: promtool reads OpenMetrics uncompressed"
        );
        fs_err::create_dir_all(&args.out)?;
        let path = args.out.join("fleet.om.txt");
        let (file, pending) = crate::output::create(&path)?;
        let mut w = BufWriter::with_capacity(1 << 20, file);
        gpuwise_synth::write::openmetrics(&mut w, &fleet)
            .with_context(|| format!("writing `{}`", path.display()))?;
        w.flush()?;
        drop(w);
        pending.commit()?;
        vec![path]
    } else {
        write_fleet(&fleet, &args.out, &args.compress)?
    };
    write_truth(&fleet, &args.out.join("truth.json"))?;
    if let Some(path) = &args.bill {
        write_bill(&fleet, path)?;
    }
    printer::info(&format!(
        "wrote {} GPUs × {} samples in {} files and truth.json to {}",
        fleet.devices.len(),
        fleet.samples_per_device(),
        files.len(),
        args.out.display()
    ));
    Ok(ExitCode::SUCCESS)
}
