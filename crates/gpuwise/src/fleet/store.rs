//! The history store as a source: a window's whole hours come from the store, the rest (hours
//! it does not hold) from the raw inputs, each piece read over its own span and joined in time
//! order, so the profile is the one the raw samples of the whole window give.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use gpuwise_core::HOUR_MS;
use gpuwise_core::profile::Profile;
use gpuwise_core::report::{IngestSummary, OverlapSummary};
use gpuwise_sources::{Input, ReadOptions};
use gpuwise_store::Store;

use crate::printer;

/// `$GPUWISE_STORE`, else the user's data directory: `$XDG_DATA_HOME/gpuwise/store`, else
/// `~/.local/share/gpuwise/store`.
pub(crate) fn default_dir() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d).join("gpuwise/store"));
    }
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow!("no --store, and neither XDG_DATA_HOME nor HOME is set"))?;
    Ok(PathBuf::from(home).join(".local/share/gpuwise/store"))
}

/// The store directory: the flag (or `GPUWISE_STORE`), else the default.
pub(crate) fn dir(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    flag.map_or_else(default_dir, |p| Ok(p.to_path_buf()))
}

fn floor_hour(ms: i64) -> i64 {
    if ms == i64::MIN {
        ms
    } else {
        ms.div_euclid(HOUR_MS) * HOUR_MS
    }
}

fn ceil_hour(ms: i64) -> i64 {
    if ms == i64::MAX {
        ms
    } else {
        ms.div_euclid(HOUR_MS) * HOUR_MS
            + if ms.rem_euclid(HOUR_MS) > 0 {
                HOUR_MS
            } else {
                0
            }
    }
}

fn time(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

/// The spans of `[from, to)` that `covered` (sorted, disjoint) leaves out.
fn gaps(from: i64, to: i64, covered: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut at = from;
    for &(a, b) in covered {
        if a > at {
            out.push((at, a.min(to)));
        }
        at = at.max(b);
    }
    if at < to {
        out.push((at, to));
    }
    out.retain(|(a, b)| a < b);
    out
}

/// Where the hours the store does not hold come from: telemetry files, a Prometheus-compatible
/// store (raw samples: only samples join exactly), or nowhere.
pub(crate) enum Rest<'a> {
    /// Nothing: the store's hours alone.
    None,
    /// Files.
    Files(Vec<Input>),
    /// A Prometheus-compatible store.
    Prometheus(&'a crate::cli::PromArgs),
}

impl<'a> Rest<'a> {
    /// The fleet flags' inputs or `--prometheus`.
    pub(crate) fn of(a: &'a crate::cli::FleetArgs) -> anyhow::Result<Self> {
        Ok(if a.prom.prometheus.is_some() {
            Rest::Prometheus(&a.prom)
        } else if a.inputs.is_empty() {
            Rest::None
        } else {
            Rest::Files(gpuwise_sources::expand(&a.inputs)?)
        })
    }

    /// Whether anything but the store is read.
    pub(crate) fn any(&self) -> bool {
        !matches!(self, Rest::None)
    }

    /// The profile of `[a, b)` from it (`None`: nothing to read).
    fn read(
        &self,
        a: i64,
        b: i64,
        read: &ReadOptions,
        progress: &(dyn Fn(u64) + Sync),
    ) -> anyhow::Result<Option<(Profile, IngestSummary)>> {
        Ok(match self {
            Rest::None => None,
            Rest::Prometheus(p) => Some(crate::fleet::prom_raw(p, a, b, read)?),
            Rest::Files(inputs) => {
                let mut opts = read.clone();
                opts.range = Some((a, b));
                let ingested = gpuwise_sources::read_all(inputs, &opts, progress)?;
                let names = ingested.formats.iter().map(|(n, _)| n.clone()).collect();
                let summary = crate::fleet::summary_of(names, &ingested);
                Some((ingested.profile, summary))
            }
        })
    }
}

/// The window `[from, to)` (whole hours; a window that cuts an hour is widened to it, and
/// said) from the store at `dir`, and from `rest` for the hours the store does not hold.
pub(crate) fn window(
    dir: &Path,
    rest: &Rest<'_>,
    read: &ReadOptions,
    range: Option<(i64, i64)>,
    progress: &(dyn Fn(u64) + Sync),
) -> anyhow::Result<(Profile, IngestSummary)> {
    let (since, until) = range.unwrap_or((i64::MIN, i64::MAX));
    let (from, to) = (floor_hour(since), ceil_hour(until));
    if (from, to) != (since, until) {
        printer::info(&format!(
            "the store answers whole hours: the window is taken from {} to {}",
            if from == i64::MIN {
                "the start".to_owned()
            } else {
                time(from)
            },
            if to == i64::MAX {
                "the end".to_owned()
            } else {
                time(to)
            },
        ));
    }
    let st = &read.profile;
    let loaded = Store::at(dir).load(from, to, st)?;
    let covered = loaded.covered();
    let mut summary = IngestSummary {
        inputs: vec![format!("store {}", dir.display())],
        formats: vec!["gpuwise-store".to_owned()],
        lines: loaded.rows as u64,
        samples: loaded.samples,
        skipped: 0,
        warnings: Vec::new(),
        pulled: None,
        overlap: OverlapSummary::default(),
    };
    let mut pieces: Vec<(i64, Profile)> =
        loaded.pieces.into_iter().map(|(a, _, p)| (a, p)).collect();
    for (a, b) in gaps(from, to, &covered) {
        // The gap's part of the window asked for (the store's part is whole hours; a bound
        // that is ±∞ stays one).
        let Some((profile, got)) = rest.read(a.max(since), b.min(until), read, progress)? else {
            break;
        };
        summary.lines += got.lines;
        summary.samples += got.samples;
        summary.skipped += got.skipped;
        summary.warnings.extend(got.warnings);
        for name in got.inputs {
            if !summary.inputs.contains(&name) {
                summary.inputs.push(name);
            }
        }
        for f in got.formats {
            if !summary.formats.contains(&f) {
                summary.formats.push(f);
            }
        }
        pieces.push((a, profile));
    }
    // Each piece is later than the one before for every device: they join exactly.
    pieces.sort_by_key(|(a, _)| *a);
    let mut profile = Profile::default();
    for (_, p) in pieces {
        profile.absorb(p, st);
    }
    Ok((profile, summary))
}

/// Why a window from the store at `dir` came out empty: the days it holds.
pub(crate) fn empty(dir: &Path, with_inputs: bool) -> anyhow::Error {
    let span = match Store::at(dir).days() {
        Ok(held) => match (held.first(), held.last()) {
            (Some(a), Some(b)) => format!(
                "it holds {} to {}",
                &time(a.start_ms)[..10],
                &time(b.start_ms + gpuwise_core::DAY_MS)[..10]
            ),
            _ => "it is empty (fill it with `gpuwise rollup`)".to_owned(),
        },
        Err(e) => e.to_string(),
    };
    anyhow!(
        "no samples in the window from the store at {}{}: {span}",
        dir.display(),
        if with_inputs { " or the inputs" } else { "" }
    )
}

/// The journal's actions, folded.
pub(crate) fn actions(
    dir: &std::path::Path,
) -> anyhow::Result<Vec<gpuwise_analysis::review::LoggedAction>> {
    let e = gpuwise_store::journal::read(dir)?;
    if let Some(line) = e.torn {
        crate::printer::warn(&format!(
            "{}: line {line} was cut short (a write that did not finish) and is left out",
            gpuwise_store::journal::path(dir).display()
        ));
    }
    gpuwise_analysis::review::fold_journal(&e.entries)
        .map_err(|why| anyhow!("{}: {why}", gpuwise_store::journal::path(dir).display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_are_what_the_store_leaves_out() {
        assert_eq!(gaps(0, 10, &[]), vec![(0, 10)]);
        assert_eq!(gaps(0, 10, &[(0, 10)]), vec![]);
        assert_eq!(
            gaps(0, 10, &[(2, 4), (6, 8)]),
            vec![(0, 2), (4, 6), (8, 10)]
        );
        assert_eq!(gaps(3, 7, &[(0, 4), (5, 20)]), vec![(4, 5)]);
        assert_eq!(ceil_hour(1), HOUR_MS);
        assert_eq!(ceil_hour(HOUR_MS), HOUR_MS);
        assert_eq!(floor_hour(HOUR_MS - 1), 0);
    }
}
