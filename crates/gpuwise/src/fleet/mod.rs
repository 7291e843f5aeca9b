//! The fleet every command starts from: settings (flag > environment > config file > default)
//! → sources (files, or a Prometheus-compatible store) → the report, with the profiles the
//! advice reads. `report`, `advise` and `demo` all go through here.

mod prom;

pub(crate) use prom::build as prom_build;

use anyhow::{anyhow, bail};
use gpuwise_advise::Hints;
use gpuwise_catalog::Pricing;
use gpuwise_core::price::{PriceBook, PriceContext};
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::report::{
    self, GroupBy, IngestSummary, OverlapSummary, Report, ReportOptions, TeamMap,
};
use gpuwise_core::settings::{DiagnoseSettings, ProfileSettings};
use gpuwise_sources::generic::ColumnMap;
use gpuwise_sources::{Input, ReadOptions};

use crate::cli::{AnalysisArgs, PromArgs, ReadArgs};
use crate::config::Config;
use crate::{duration, printer};

/// Everything reading and reporting need, resolved.
pub(crate) struct Settings {
    pub read: ReadOptions,
    pub report: ReportOptions,
    pub prices: PriceBook,
    pub teams: TeamMap,
    /// Workload hints (`--workloads`): what each device runs, for the diagnosis and advice.
    pub hints: Hints,
}

fn tz(name: &str) -> anyhow::Result<jiff::tz::TimeZone> {
    jiff::tz::TimeZone::get(name).map_err(|e| {
        anyhow!(
            "`{name}` is not a known time zone ({e}); use an IANA name such as UTC or Europe/Berlin"
        )
    })
}

pub(crate) fn resolve(read: &ReadArgs, a: &AnalysisArgs, cfg: &Config) -> anyhow::Result<Settings> {
    let tz_name = read
        .tz
        .clone()
        .or_else(|| cfg.tz.clone())
        .unwrap_or_else(|| "UTC".to_owned());
    let zone = tz(&tz_name)?;
    let now = crate::clock::now_ms()?;
    let profile = profile_settings(a, cfg, now)?;
    let diagnose = diagnose_settings(a, cfg)?;
    let group_by = match cfg.pick(
        "--group-by",
        a.group_by.as_deref(),
        "group_by",
        cfg.group_by.as_deref(),
    ) {
        Some(p) => GroupBy::parse(p.value).map_err(|e| anyhow!("{}: {e}", p.origin))?,
        None => GroupBy::parse("host").map_err(|e| anyhow!("--group-by: {e}"))?,
    };
    let prices = price_book(a, cfg)?;
    let teams = team_map(a, cfg, &group_by)?;
    Ok(Settings {
        read: read_options(read, zone, &profile, now)?,
        report: ReportOptions {
            profile,
            diagnose,
            group_by,
            tz_name,
            now_ms: Some(now),
            stale_price_days: a
                .catalog
                .stale_price_days
                .or(cfg.stale_price_days)
                .unwrap_or(180),
        },
        prices,
        teams,
        hints: Hints::default(),
    })
}

/// The latest plausible sample time at `now`: a sample dated more than a day after it is a
/// broken clock. (`serve` asks again at every refresh.)
pub(crate) fn latest_plausible(now: i64) -> i64 {
    now.saturating_add(gpuwise_core::DAY_MS)
}

/// How samples become a profile: idle threshold and episodes, held-idle memory, gaps, and the
/// plausible window (a sample dated more than a day after this run is a broken clock).
pub(crate) fn profile_settings(
    a: &AnalysisArgs,
    cfg: &Config,
    now: i64,
) -> anyhow::Result<ProfileSettings> {
    let mut profile = ProfileSettings {
        latest_ms: latest_plausible(now),
        ..ProfileSettings::default()
    };
    if let Some(p) = cfg.pick(
        "--idle-threshold",
        a.idle_threshold,
        "idle_threshold_pct",
        cfg.idle_threshold_pct,
    ) {
        anyhow::ensure!(
            (0.0..=100.0).contains(&p.value),
            "{} must be within 0–100, got {}",
            p.origin,
            p.value
        );
        profile.idle_threshold_pct = p.value;
    }
    if let Some(p) = cfg.pick(
        "--min-idle",
        a.min_idle.as_deref(),
        "min_idle",
        cfg.min_idle.as_deref(),
    ) {
        profile.min_idle_episode_ms =
            duration::parse_ms(p.value).map_err(|e| anyhow!("{}: {e}", p.origin))?;
    }
    if let Some(v) = a.held_idle_mib.or(cfg.held_idle_mib) {
        profile.held_idle_min_mib = v;
    }
    if let Some(p) = cfg.pick(
        "--max-gap",
        a.max_gap.as_deref(),
        "max_gap",
        cfg.max_gap.as_deref(),
    ) {
        profile.max_gap_ms = match duration::parse_ms(p.value) {
            Ok(0) => bail!("{}: `{}` must be longer than zero", p.origin, p.value),
            Ok(ms) => ms,
            Err(e) => bail!("{}: {e}", p.origin),
        };
    }
    Ok(profile)
}

/// The class thresholds, each within 0–100 and in order.
fn diagnose_settings(a: &AnalysisArgs, cfg: &Config) -> anyhow::Result<DiagnoseSettings> {
    let mut diagnose = DiagnoseSettings::default();
    for (picked, slot) in [
        (
            cfg.pick(
                "--idle-share",
                a.idle_share,
                "idle_share_pct",
                cfg.idle_share_pct,
            ),
            &mut diagnose.idle_share_pct,
        ),
        (
            cfg.pick(
                "--underutilized-below",
                a.underutilized_below,
                "underutilized_below_pct",
                cfg.underutilized_below_pct,
            ),
            &mut diagnose.underutilized_below_pct,
        ),
        (
            cfg.pick(
                "--saturated-above",
                a.saturated_above,
                "saturated_above_pct",
                cfg.saturated_above_pct,
            ),
            &mut diagnose.saturated_above_pct,
        ),
    ] {
        if let Some(p) = picked {
            anyhow::ensure!(
                (0.0..=100.0).contains(&p.value),
                "{} must be within 0–100, got {}",
                p.origin,
                p.value
            );
            *slot = p.value;
        }
    }
    anyhow::ensure!(
        diagnose.underutilized_below_pct <= diagnose.saturated_above_pct,
        "--underutilized-below ({}) must not be above --saturated-above ({})",
        diagnose.underutilized_below_pct,
        diagnose.saturated_above_pct
    );
    Ok(diagnose)
}

/// The catalog (built in, or `--instances`/`--overlay`), the place and pricing model quotes
/// come from, and the user's `--prices` rules on top.
fn price_book(a: &AnalysisArgs, cfg: &Config) -> anyhow::Result<PriceBook> {
    let mut source = a.catalog.clone();
    source.instances = source.instances.or_else(|| cfg.instances.clone());
    source.overlay = source.overlay.or_else(|| cfg.overlay.clone());
    let catalog = crate::commands::catalog::load(&source)?;
    let pricing = match cfg.pick(
        "--pricing",
        a.pricing.as_deref(),
        "pricing",
        cfg.pricing.as_deref(),
    ) {
        Some(p) => Some(Pricing::parse(p.value).map_err(|e| anyhow!("{}: {e}", p.origin))?),
        None => None,
    };
    let context = PriceContext {
        cloud: a.cloud.clone().or_else(|| cfg.cloud.clone()),
        region: a.region.clone().or_else(|| cfg.region.clone()),
        pricing,
    };
    catalog
        .check_place(context.cloud.as_deref(), context.region.as_deref())
        .map_err(|e| anyhow!(e))?;
    let mut prices = PriceBook::new(catalog, context);
    if let Some(path) = a.prices.clone().or_else(|| cfg.prices.clone()) {
        let text = fs_err::read_to_string(&path)?;
        prices = prices.with_rules(&text, &path.display().to_string())?;
    }
    Ok(prices)
}

/// `--teams` (devices → teams, docs/teams.md), with a warning when grouping by team without it.
fn team_map(a: &AnalysisArgs, cfg: &Config, group_by: &GroupBy) -> anyhow::Result<TeamMap> {
    let teams = match a.teams.clone().or_else(|| cfg.teams.clone()) {
        Some(path) => {
            let text = fs_err::read_to_string(&path)?;
            TeamMap::from_toml(&text, &path.display().to_string()).map_err(|e| anyhow!(e))?
        }
        None => TeamMap::default(),
    };
    if matches!(group_by, GroupBy::Team) && teams.is_empty() {
        printer::warn("--group-by team without --teams: every device is in group (none)");
    }
    Ok(teams)
}

/// How the readers read: forced format, host, time zone, columns or column map, strictness,
/// and the start and interval of untimed dmon logs.
fn read_options(
    read: &ReadArgs,
    zone: jiff::tz::TimeZone,
    profile: &ProfileSettings,
    now: i64,
) -> anyhow::Result<ReadOptions> {
    let format = match read.input_format.as_deref() {
        Some(f) => {
            Some(gpuwise_sources::Format::parse(f).map_err(|e| anyhow!("--input-format: {e}"))?)
        }
        None => None,
    };
    let map = if read.map.is_empty() {
        None
    } else {
        Some(ColumnMap::parse(&read.map).map_err(|e| anyhow!(e))?)
    };
    let columns = read.columns.as_ref().map(|c| {
        c.split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
    });
    let start_ms = match read.start.as_deref() {
        Some(s) => Some(start_instant(s, &zone).map_err(|e| anyhow!("--start: {e}"))?),
        None => None,
    };
    let interval_ms = match read.interval.as_deref() {
        Some(i) => duration::parse_positive_ms("interval", i).map_err(|e| anyhow!(e))?,
        None => 1000,
    };
    let range = sample_range(read, &zone, now)?;
    Ok(ReadOptions {
        range,
        format,
        host: read.host.clone(),
        tz: zone,
        columns,
        map,
        strict: read.strict,
        profile: profile.clone(),
        start_ms,
        interval_ms,
        ..ReadOptions::default()
    })
}

/// `--since`/`--until`: the samples a report covers, `[since, until)`.
fn sample_range(
    read: &ReadArgs,
    zone: &jiff::tz::TimeZone,
    now: i64,
) -> anyhow::Result<Option<(i64, i64)>> {
    let at = |flag: &str, v: &str| -> anyhow::Result<i64> {
        // A bare number is an epoch, not seconds back.
        if v.contains(|c: char| c.is_ascii_alphabetic())
            && let Ok(back) = duration::parse_ms(v)
        {
            return Ok(now.saturating_sub(i64::try_from(back).unwrap_or(i64::MAX)));
        }
        start_instant(v, zone).map_err(|e| anyhow!("--{flag}: {e}"))
    };
    let since = read.since.as_deref().map(|v| at("since", v)).transpose()?;
    let until = read.until.as_deref().map(|v| at("until", v)).transpose()?;
    if let (Some(a), Some(b)) = (since, until) {
        anyhow::ensure!(a < b, "--since must be before --until");
    }
    Ok((since.is_some() || until.is_some())
        .then(|| (since.unwrap_or(i64::MIN), until.unwrap_or(i64::MAX))))
}

/// When `--since`/`--until` left nothing: the window asked for, and the span the data has
/// (read again without the window; only on this error's path).
fn window_note(inputs: &[Input], s: &Settings) -> String {
    let Some((from, to)) = s.read.range else {
        return String::new();
    };
    let time = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms).map_or_else(|_| "…".to_owned(), |t| t.to_string())
    };
    let asked = match (from, to) {
        (i64::MIN, to) => format!("before {}", time(to)),
        (from, i64::MAX) => format!("from {}", time(from)),
        (from, to) => format!("from {} to {}", time(from), time(to)),
    };
    let mut all = s.read.clone();
    all.range = None;
    let span = gpuwise_sources::read_all(inputs, &all, &|_| {})
        .ok()
        .map(|i| i.profile.finish(&all.profile, &all.tz))
        .and_then(|p| {
            let first = p.iter().map(|d| d.stats.first_ts_ms).min()?;
            let last = p.iter().map(|d| d.stats.last_ts_ms).max()?;
            Some(format!(
                "; the data runs from {} to {}",
                time(first),
                time(last)
            ))
        })
        .unwrap_or_default();
    format!(" {asked}{span}")
}

/// `--start`: RFC 3339, `YYYY-MM-DD[ HH:MM:SS]` in `zone`, or an epoch.
fn start_instant(s: &str, zone: &jiff::tz::TimeZone) -> anyhow::Result<i64> {
    let mut clock = gpuwise_sources::time::LocalClock::new(zone.clone());
    let with_time = if s.len() == 10 {
        format!("{s} 00:00:00")
    } else {
        s.to_owned()
    };
    gpuwise_sources::time::parse_instant(&with_time, &mut clock)
        .map(|(ms, _)| ms)
        .ok_or_else(|| anyhow!("`{s}` is not a time (RFC 3339, YYYY-MM-DD HH:MM:SS or epoch)"))
}

/// Read inputs and build the report; the profiles come back too (the advice reads them).
pub(crate) fn from_files(
    specs: &[String],
    s: &Settings,
    progress: bool,
) -> anyhow::Result<(Report, Vec<DeviceProfile>)> {
    let inputs: Vec<Input> = gpuwise_sources::expand(specs)?;
    let bar = printer::progress(progress);
    let counter = |n: u64| {
        if let Some(b) = &bar {
            b.inc(n);
        }
    };
    let ingested = gpuwise_sources::read_all(&inputs, &s.read, &counter)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if ingested.profile.is_empty() {
        let why: Vec<String> = ingested
            .tally
            .warnings()
            .iter()
            .map(|w| format!("{}: {}", w.kind, w.message))
            .collect();
        anyhow::bail!(
            "no samples in {} input(s){}: nothing to report{}",
            inputs.len(),
            window_note(&inputs, s),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        );
    }
    let summary = IngestSummary {
        inputs: inputs.iter().map(|i| i.name.clone()).collect(),
        formats: ingested
            .formats
            .iter()
            .map(|(_, f)| f.name().to_owned())
            .collect(),
        lines: ingested.tally.lines,
        samples: ingested.tally.samples,
        skipped: ingested.tally.skipped(),
        warnings: ingested.tally.warnings(),
        pulled: None,
        overlap: OverlapSummary::default(),
    };
    let mut profiles = ingested.profile.finish(&s.read.profile, &s.read.tz);
    with_workloads(&mut profiles, &s.hints);
    let report = report::build(&profiles, &s.prices, &s.teams, &s.report, summary);
    Ok((report, profiles))
}

/// Everything a command that reads the fleet starts from: the config file, the settings, and
/// the fleet read into a report with its profiles.
pub(crate) fn read(
    a: &crate::cli::FleetArgs,
    out: &crate::cli::OutputArgs,
    workloads: Option<&std::path::Path>,
) -> anyhow::Result<(Config, Settings, Report, Vec<DeviceProfile>)> {
    let cfg = Config::load(out.config.as_deref())?;
    let mut settings = resolve(&a.read, &a.analysis, &cfg)?;
    if let Some(p) = workloads {
        settings.hints = Hints::from_toml(&fs_err::read_to_string(p)?, &p.display().to_string())?;
    }
    let (report, profiles) = read_fleet(&a.inputs, &a.prom, &a.read, &settings, !out.no_progress)?;
    Ok((cfg, settings, report, profiles))
}

/// What each device runs, where the workload hints say.
pub(crate) fn with_workloads(profiles: &mut [DeviceProfile], hints: &Hints) {
    for p in profiles.iter_mut() {
        p.info.workload = hints.find(p).and_then(|h| h.kind);
    }
}

/// The fleet from `--prometheus` when given, else from the input files.
pub(crate) fn read_fleet(
    inputs: &[String],
    prom: &PromArgs,
    read: &ReadArgs,
    s: &Settings,
    progress: bool,
) -> anyhow::Result<(Report, Vec<DeviceProfile>)> {
    if prom.prometheus.is_some() {
        prom::build(prom, read.start.as_deref(), s)
    } else {
        from_files(inputs, s, progress)
    }
}
