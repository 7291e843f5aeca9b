//! The settings layer, and the fleet every command starts from: the flags, the environment and
//! the config file (read once, by the command) resolved once into typed settings (flag >
//! environment > config file > default) → sources (files, or a Prometheus-compatible store) →
//! device profiles → the [`Analysis`] every command and the server ask what they mean (the
//! report first). Nothing here calls a command.

mod prom;
pub(crate) mod store;

pub(crate) use prom::{
    kube_points, pull as prom_pull, raw_window as prom_raw, window as prom_window,
};

use anyhow::{anyhow, bail};
use gpuwise_advise::{AdviseSettings, Hints};
use gpuwise_analysis::{Analysis, Budget};
use gpuwise_catalog::Pricing;
use gpuwise_core::price::{PriceBook, PriceContext};
use gpuwise_core::profile::{DeviceProfile, Profile};
use gpuwise_core::report::{
    GroupBy, IngestSummary, OverlapSummary, Report, ReportOptions, TeamMap,
};
use gpuwise_core::settings::{DiagnoseSettings, ProfileSettings};
use gpuwise_ledger::allocate::{Distribute, Mode, Policy as AllocationPolicy, UnitCounts};
use gpuwise_sources::generic::ColumnMap;
use gpuwise_sources::{Input, ReadOptions};

use crate::cli::{AdviseOpts, AllocateOpts, AnalysisArgs, ReadArgs};
use crate::config::Config;
use crate::{duration, printer};

/// Everything reading and analysing need, resolved once.
pub(crate) struct Settings {
    /// How the readers read.
    pub read: ReadOptions,
    /// What the analysis needs.
    pub analysis: gpuwise_analysis::Settings,
    /// The run's time (the clock is read once).
    pub now_ms: i64,
}

/// What a command asks of the analysis beyond the report, resolved with the rest of the
/// settings.
#[derive(Default)]
pub(crate) struct Asks<'a> {
    /// `--workloads`: what each device runs.
    pub workloads: Option<&'a std::path::Path>,
    /// The advice's flags, for commands that advise.
    pub advise: Option<&'a AdviseOpts>,
    /// The allocation's flags, for commands that allocate.
    pub alloc: Option<&'a AllocateOpts>,
    /// Monthly budgets (a policy's `[budget]`).
    pub budget: Option<Budget>,
    /// What is kept of the devices once the report is made.
    pub keep: Keep,
}

/// What is kept of the fleet's devices beside the report. Anything but their summaries lets
/// each go as soon as the report has taken it, so a large fleet never holds them all (the
/// [`Fleet`]'s `profiles` are then empty).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Keep {
    /// Their summaries (the advice reads them).
    #[default]
    Profiles,
    /// Nothing: the command needs only the report.
    Nothing,
    /// The allocation, folded from each device as the report takes it.
    Allocation,
    /// The allocation as FOCUS rows, likewise.
    Focus,
}

/// What was folded from the devices in place of keeping them.
pub(crate) enum Folded {
    /// [`Keep::Allocation`].
    Allocation(Box<gpuwise_analysis::Allocation>),
    /// [`Keep::Focus`].
    Focus(gpuwise_analysis::FocusRows),
}

fn tz(name: &str) -> anyhow::Result<jiff::tz::TimeZone> {
    jiff::tz::TimeZone::get(name).map_err(|e| {
        anyhow!(
            "`{name}` is not a known time zone ({e}); use an IANA name such as UTC or Europe/Berlin"
        )
    })
}

pub(crate) fn resolve(
    read: &ReadArgs,
    a: &AnalysisArgs,
    cfg: &Config,
    asks: &Asks,
) -> anyhow::Result<Settings> {
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
    let hints = match asks.workloads {
        Some(p) => Hints::from_toml(&fs_err::read_to_string(p)?, &p.display().to_string())?,
        None => Hints::default(),
    };
    let advise = match asks.advise {
        Some(o) => advise_settings(o, &prices)?,
        None => AdviseSettings::default(),
    };
    let (allocation, units) = match asks.alloc {
        Some(o) => (allocation_policy(o, cfg)?, unit_counts(o)?),
        None => (AllocationPolicy::default(), UnitCounts::default()),
    };
    let read = read_options(read, zone.clone(), &profile, now)?;
    Ok(Settings {
        read,
        analysis: gpuwise_analysis::Settings {
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
            hints,
            tz: zone,
            advise,
            allocation,
            units,
            budget: asks.budget.clone(),
        },
        now_ms: now,
    })
}

fn hours(flag: &str, v: Option<&String>, default: f64) -> anyhow::Result<f64> {
    match v {
        Some(s) => {
            let ms = duration::parse_ms(s).map_err(|e| anyhow!("--{flag}: {e}"))?;
            anyhow::ensure!(ms > 0, "--{flag}: must be longer than zero");
            Ok(gpuwise_core::hours_of_ms(ms as f64))
        }
        None => Ok(default),
    }
}

/// The advice's settings from its flags, in the price context of the run.
fn advise_settings(o: &AdviseOpts, prices: &PriceBook) -> anyhow::Result<AdviseSettings> {
    let d = AdviseSettings::default();
    let ctx = prices.context();
    if let Some(h) = o.headroom {
        anyhow::ensure!(
            (1.0..=4.0).contains(&h),
            "--headroom: {h} is not a factor between 1 and 4"
        );
    }
    let known: std::collections::BTreeSet<&str> = prices
        .catalog()
        .instances
        .iter()
        .map(|i| i.cloud.as_str())
        .collect();
    for c in &o.allow_clouds {
        anyhow::ensure!(
            known.contains(c.as_str()),
            "--allow-clouds: `{c}` has no instances in the catalog (clouds: {})",
            known.iter().copied().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(AdviseSettings {
        headroom: o.headroom.unwrap_or(d.headroom),
        cloud: ctx.cloud.clone(),
        region: ctx.region.clone(),
        pricing: ctx.pricing.unwrap_or(Pricing::OnDemand),
        allow_clouds: o.allow_clouds.clone(),
        idle_timeout_h: hours("idle-timeout", o.idle_timeout.as_ref(), d.idle_timeout_h)?,
        checkpoint_cost_h: hours(
            "checkpoint-cost",
            o.checkpoint_cost.as_ref(),
            d.checkpoint_cost_h,
        )?,
        spot_mtbi_h: hours("spot-mtbi", o.spot_mtbi.as_ref(), d.spot_mtbi_h)?,
        ..d
    })
}

/// The allocation policy from the flags (else the config file), with a warning for flags the
/// mode has no use for.
fn allocation_policy(o: &AllocateOpts, cfg: &Config) -> anyhow::Result<AllocationPolicy> {
    let mode: Mode = o
        .mode
        .as_deref()
        .or(cfg.allocation_mode.as_deref())
        .unwrap_or("showback")
        .parse()
        .map_err(|e| anyhow!("--mode: {e}"))?;
    let idle: Distribute = o
        .idle
        .as_deref()
        .or(cfg.idle_policy.as_deref())
        .unwrap_or("proportional")
        .parse()
        .map_err(|e| anyhow!("--idle: {e}"))?;
    let shared_teams = if o.shared_teams.is_empty() {
        cfg.shared_teams.clone().unwrap_or_default()
    } else {
        o.shared_teams.clone()
    };
    if mode == Mode::Showback && (o.idle.is_some() || !o.shared_teams.is_empty()) {
        printer::warn(
            "--idle and --shared-team apply to --mode chargeback; showback shows costs as they fell",
        );
    }
    Ok(AllocationPolicy {
        mode,
        idle,
        shared_teams,
    })
}

/// `--units`: work per team and month, for unit costs.
fn unit_counts(o: &AllocateOpts) -> anyhow::Result<UnitCounts> {
    Ok(match &o.units {
        Some(p) => UnitCounts::parse(&fs_err::read_to_string(p)?, &p.display().to_string())?,
        None => UnitCounts::default(),
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
    let catalog = crate::inputs::catalog(&source)?;
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
fn window_note(inputs: &[Input], read: &ReadOptions) -> String {
    let Some((from, to)) = read.range else {
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
    let mut all = read.clone();
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

/// A time given on the command line in UTC: RFC 3339, `YYYY-MM-DD[ HH:MM:SS]`, or an epoch.
pub(crate) fn instant(s: &str) -> anyhow::Result<i64> {
    start_instant(s, &jiff::tz::TimeZone::UTC)
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

/// The fleet read and analysed to its report: what every command that reads telemetry starts
/// from.
pub(crate) struct Fleet {
    /// The analysis the command asks what the fleet means.
    pub analysis: Analysis,
    /// The run's time.
    pub now_ms: i64,
    /// The report.
    pub report: Report,
    /// The devices' profiles (the advice and the allocation read them), unless the command
    /// asked to keep something else ([`Keep`]).
    pub profiles: Vec<DeviceProfile>,
    /// What was folded from the devices instead ([`Keep::Allocation`], [`Keep::Focus`]).
    pub folded: Option<Folded>,
}

impl Fleet {
    /// The allocation of the fleet (the CLI's: an unknown shared team is an error), its
    /// warnings said on stderr.
    pub(crate) fn allocation(&mut self) -> anyhow::Result<gpuwise_analysis::Allocation> {
        let a = match self.folded.take() {
            Some(Folded::Allocation(a)) => *a,
            _ => self
                .analysis
                .allocation(&self.report, &self.profiles, self.now_ms)?,
        };
        for w in &a.warnings {
            printer::warn(w);
        }
        if a.unpriced_devices > 0 {
            printer::warn(&format!(
                "{} device(s) have no price: their GPU-hours are allocated, their dollars unknown (add --prices or --cloud)",
                a.unpriced_devices
            ));
        }
        Ok(a)
    }
}

impl Fleet {
    /// The allocation as FOCUS 1.2 rows (those folded while reading, or made from the
    /// profiles).
    pub(crate) fn focus_rows(&mut self) -> gpuwise_analysis::FocusRows {
        if let Some(Folded::Focus(rows)) = self.folded.take() {
            return rows;
        }
        let analysis = &self.analysis;
        gpuwise_ledger::export::focus_rows(
            &self.profiles,
            &self.report,
            &analysis.settings().teams,
            &|row| analysis.list_price(row),
        )
    }
}

/// What reading `inputs` (by these names) counted, as the report's ingest summary.
pub(crate) fn summary_of(
    inputs: Vec<String>,
    ingested: &gpuwise_sources::Ingested,
) -> IngestSummary {
    IngestSummary {
        inputs,
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
    }
}

/// Read inputs and build the report; the profiles come back too (the advice reads them).
pub(crate) fn from_files(
    specs: &[String],
    read: &ReadOptions,
    analysis: &Analysis,
    now_ms: i64,
    progress: bool,
    keep: Keep,
) -> anyhow::Result<Kept> {
    let inputs: Vec<Input> = gpuwise_sources::expand(specs)?;
    let ingested = printer::reading(progress, |counter| {
        gpuwise_sources::read_all(&inputs, read, counter)
    })?;
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
            window_note(&inputs, read),
            if why.is_empty() {
                String::new()
            } else {
                format!(" ({})", why.join("; "))
            }
        );
    }
    let summary = summary_of(inputs.iter().map(|i| i.name.clone()).collect(), &ingested);
    report_and_profiles(analysis, ingested.profile, summary, now_ms, keep)
}

/// The report, the devices' summaries (unless the command keeps something else) and what was
/// folded from them.
pub(crate) type Kept = (Report, Vec<DeviceProfile>, Option<Folded>);

/// The report of `profile`, and what `keep` asks to keep of its devices.
fn report_and_profiles(
    analysis: &Analysis,
    profile: Profile,
    summary: IngestSummary,
    now_ms: i64,
    keep: Keep,
) -> anyhow::Result<Kept> {
    // Made on a pool thread when the devices are let go: the accumulators it frees were
    // allocated there, and glibc keeps an arena per thread, so the report's rows reuse that
    // memory (100k GPUs: 334 → 285 MB).
    Ok(match keep {
        Keep::Profiles => {
            let profiles = analysis.profiles(profile);
            let report = analysis.report(&profiles, summary, now_ms);
            (report, profiles, None)
        }
        Keep::Nothing => {
            let report = rayon::scope(|_| analysis.report_of(profile, summary, now_ms));
            (report, Vec::new(), None)
        }
        Keep::Allocation => {
            let mut a = analysis.allocator(now_ms);
            let report = rayon::scope(|_| {
                analysis.report_visiting(profile, summary, now_ms, &mut |p, row| a.add(p, row))
            });
            let a = analysis.allocation_of(a)?;
            (report, Vec::new(), Some(Folded::Allocation(Box::new(a))))
        }
        Keep::Focus => {
            let mut rows = gpuwise_analysis::FocusRows::new();
            let teams = &analysis.settings().teams;
            let report = rayon::scope(|_| {
                analysis.report_visiting(profile, summary, now_ms, &mut |p, row| {
                    rows.add(p, row, teams, analysis.list_price(row));
                })
            });
            (report, Vec::new(), Some(Folded::Focus(rows)))
        }
    })
}

/// The window from the store, and from the inputs for the hours it does not hold; the report
/// and the profiles.
pub(crate) fn from_store(
    dir: &std::path::Path,
    rest: &store::Rest<'_>,
    read: &ReadOptions,
    analysis: &Analysis,
    now_ms: i64,
    progress: bool,
    keep: Keep,
) -> anyhow::Result<Kept> {
    let (profile, summary) = printer::reading(progress && rest.any(), |counter| {
        store::window(dir, rest, read, read.range, counter)
    })?;
    if profile.is_empty() {
        return Err(store::empty(dir, rest.any()));
    }
    report_and_profiles(analysis, profile, summary, now_ms, keep)
}
/// That the flags name somewhere to read the fleet from: files, `--prometheus` or `--store`.
pub(crate) fn require_source(a: &crate::cli::FleetArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !a.inputs.is_empty() || a.prom.prometheus.is_some() || a.store.is_some(),
        "nothing to read: give telemetry files (INPUT…), --prometheus URL or --store DIR"
    );
    Ok(())
}

/// Everything a command that reads the fleet starts from: the settings, resolved once from the
/// flags and `cfg` (the config file, read once by the command), and the fleet read into a
/// report with its profiles.
pub(crate) fn read(
    a: &crate::cli::FleetArgs,
    cfg: &Config,
    asks: &Asks,
    progress: bool,
) -> anyhow::Result<Fleet> {
    require_source(a)?;
    let s = resolve(&a.read, &a.analysis, cfg, asks)?;
    let analysis = Analysis::new(s.analysis);
    let (report, profiles, folded) = if let Some(dir) = &a.store {
        let rest = store::Rest::of(a)?;
        let mut read = s.read.clone();
        if a.prom.prometheus.is_some() {
            // With a Prometheus store the window is its --start/--end/--last.
            read.range = Some(prom_window(&a.prom, a.read.start.as_deref(), &s.read)?);
        }
        from_store(dir, &rest, &read, &analysis, s.now_ms, progress, asks.keep)?
    } else if a.prom.prometheus.is_some() {
        // Pulled or pushed down, the devices come back whole: what the command keeps is made
        // from them afterwards.
        let (report, profiles) = prom::build(
            &a.prom,
            a.read.start.as_deref(),
            &s.read,
            &analysis,
            s.now_ms,
        )?;
        (report, profiles, None)
    } else {
        from_files(&a.inputs, &s.read, &analysis, s.now_ms, progress, asks.keep)?
    };
    Ok(Fleet {
        analysis,
        now_ms: s.now_ms,
        report,
        profiles,
        folded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocation and the FOCUS rows folded one device at a time while the report is made
    /// are the ones made afterwards from every device's profile: a generated fleet, teams that
    /// change owner mid-day, chargeback with idle cost shared proportionally.
    #[test]
    fn folded_allocations_are_the_ones_made_from_the_profiles() {
        let dir = tempfile::tempdir().expect("temp dir");
        let fleet = gpuwise_synth::fleet::Fleet::new(gpuwise_synth::fleet::FleetOptions {
            gpus: 24,
            days: 3,
            interval_ms: 90_000,
            seed: 11,
            start_ms: crate::synthetic::DEFAULT_START_MS,
            format: None,
        });
        let data = dir.path().join("fleet");
        crate::synthetic::write_fleet(&fleet, &data, "none").expect("writes");
        let teams = dir.path().join("teams.toml");
        std::fs::write(
            &teams,
            "[hosts]\n\"train-*\" = \"research\"\n\"serve-*\" = \"serving\"\n\n\
             [[assign]]\nhost = \"train-*\"\nteam = \"vision\"\nfrom = \"2026-01-06T13:30:00Z\"\n",
        )
        .expect("writes");
        let args = AnalysisArgs {
            teams: Some(teams),
            ..AnalysisArgs::default()
        };
        let alloc = AllocateOpts {
            mode: Some("chargeback".into()),
            ..AllocateOpts::default()
        };
        let asks = Asks {
            alloc: Some(&alloc),
            ..Asks::default()
        };
        let s = resolve(&ReadArgs::default(), &args, &Config::default(), &asks).expect("settings");
        let analysis = Analysis::new(s.analysis);
        let inputs = [data.display().to_string()];
        let read =
            |keep| from_files(&inputs, &s.read, &analysis, s.now_ms, false, keep).expect("reads");
        let (report, profiles, none) = read(Keep::Profiles);
        assert!(none.is_none() && profiles.len() == 24);
        let json = |a: &gpuwise_analysis::Allocation| serde_json::to_string(a).expect("json");
        let whole = analysis
            .allocation(&report, &profiles, s.now_ms)
            .expect("allocates");
        assert!(
            whole
                .months
                .iter()
                .any(|m| m.teams.iter().any(|t| t.team == "vision"))
        );
        let Some(Folded::Allocation(folded)) = read(Keep::Allocation).2 else {
            panic!("an allocation folded");
        };
        assert_eq!(json(&folded), json(&whole));
        let rows = gpuwise_ledger::export::focus_rows(
            &profiles,
            &report,
            &analysis.settings().teams,
            &|row| analysis.list_price(row),
        );
        assert!(rows.rows > 24 * 3, "a row per device, team and day");
        let Some(Folded::Focus(folded)) = read(Keep::Focus).2 else {
            panic!("FOCUS rows folded");
        };
        assert_eq!(folded.csv, rows.csv);
        assert_eq!(
            (folded.rows, folded.unpriced_devices),
            (rows.rows, rows.unpriced_devices)
        );
    }
}
