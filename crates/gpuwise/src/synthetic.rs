//! A synthetic fleet written as telemetry files and its planted truth (`generate` and `demo`
//! both write one).

use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context as _, anyhow};
use gpuwise_synth::Fleet;

/// Default first sample: Monday 2026-01-05 00:00 UTC.
pub(crate) const DEFAULT_START_MS: i64 = 1_767_571_200_000;

pub(crate) fn parse_start(s: Option<&str>) -> anyhow::Result<i64> {
    let Some(s) = s else {
        return Ok(DEFAULT_START_MS);
    };
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    let date: jiff::civil::Date = s
        .parse()
        .map_err(|_| anyhow!("--start `{s}` is not RFC 3339 or YYYY-MM-DD"))?;
    Ok(jiff::tz::TimeZone::UTC
        .to_timestamp(date.to_datetime(jiff::civil::Time::midnight()))?
        .as_millisecond())
}

/// Write every host of `fleet` into `dir`, compressed as asked; returns the files written.
pub(crate) fn write_fleet(
    fleet: &Fleet,
    dir: &Path,
    compress: &str,
) -> anyhow::Result<Vec<std::path::PathBuf>> {
    fs_err::create_dir_all(dir)?;
    let hosts = fleet.hosts();
    let results: Vec<anyhow::Result<std::path::PathBuf>> = std::thread::scope(|scope| {
        let handles: Vec<_> = hosts
            .iter()
            .map(|(host, format, devices)| {
                scope.spawn(move || -> anyhow::Result<std::path::PathBuf> {
                    let ext = gpuwise_synth::write::extension(format);
                    let suffix = match compress {
                        "gzip" => ".gz",
                        "zstd" => ".zst",
                        _ => "",
                    };
                    let path = dir.join(format!("{host}.{ext}{suffix}"));
                    let (file, pending) = crate::output::create(&path)?;
                    let mut w: Box<dyn Write> = match compress {
                        "gzip" => Box::new(flate2::write::GzEncoder::new(
                            BufWriter::new(file),
                            flate2::Compression::fast(),
                        )),
                        "zstd" => Box::new(
                            zstd::stream::write::Encoder::new(BufWriter::new(file), 3)?
                                .auto_finish(),
                        ),
                        _ => Box::new(BufWriter::with_capacity(1 << 20, file)),
                    };
                    gpuwise_synth::write::host(&mut w, fleet, format, devices)
                        .with_context(|| format!("writing `{}`", path.display()))?;
                    w.flush()?;
                    drop(w);
                    pending.commit()?;
                    Ok(path)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a writer thread panicked")))
            })
            .collect()
    });
    results.into_iter().collect()
}

pub(crate) fn write_truth(fleet: &Fleet, path: &Path) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(&fleet.truth())?;
    text.push('\n');
    crate::output::write(path, text.as_bytes())?;
    Ok(())
}
