//! # Who spent what: allocation, chargeback, unit costs and the month-end forecast
//!
//! Every device-hour of telemetry goes to one owner: the team the team file names for that
//! device *at that hour* ([`TeamMap::owner`]), or the visible `(untagged)` bucket. Its cost is
//! the hour's GPU-hours (coverage × the device's share of a GPU) × the device's $ per GPU-hour
//! from the report; a device without a price adds GPU-hours but no dollars (counted as
//! unpriced, never $0).
//!
//! **Modes.** *Showback* shows each team what its devices cost, idle included, as it fell.
//! *Chargeback* moves idle cost (idle-episode hours × price) and the cost of *shared* teams
//! (a platform's own devices) by a [`Distribute`] policy, so that the charges sum to the fleet's
//! priced cost: to the owner (nothing moves), in proportion to each team's busy GPU-hours,
//! evenly among teams, or to a named platform bucket. `(untagged)` neither pays nor receives:
//! it stays visible until someone owns it.
//!
//! **Months** are UTC calendar months (bills are). Each month is charged on its own.
//!
//! **Forecast.** For the month holding `as_of`: month to date, and the month-end figure two
//! ways, each charged by the same policy: *linear* (to date + the run rate over the month's
//! hours with telemetry × the hours left) and
//! *hour of week* (to date + for every hour left, the team's mean cost in that UTC hour of the
//! week over the history, counting hours without use as zero; an hour of the week the history
//! has not reached yet costs the team's mean hour).

use std::collections::BTreeMap;

use gpuwise_core::HOUR_MS;
use gpuwise_core::profile::DeviceProfile;
use gpuwise_core::records::record_line;
use gpuwise_core::report::{DeviceRow, Report};
use gpuwise_core::sample::EpochMs;
use gpuwise_core::teams::TeamMap;
use serde::Serialize;

use crate::reconcile::UNTAGGED;

/// Schema of the JSON.
pub const SCHEMA: &str = "gpuwise.allocation/v1";

/// Showback or chargeback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Costs as they fell.
    #[default]
    Showback,
    /// Idle and shared costs distributed by the policy.
    Chargeback,
}

/// Where idle and shared cost go in chargeback.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "to", content = "bucket")]
pub enum Distribute {
    /// Stays with the team that held it.
    Owner,
    /// To teams in proportion to their busy GPU-hours.
    #[default]
    Proportional,
    /// Evenly among teams.
    Even,
    /// To one named bucket.
    Platform(String),
}

/// A name that is not a mode or policy.
#[derive(Debug, thiserror::Error)]
#[error("`{given}` is not {what}: use {expected}")]
pub struct ParseError {
    given: String,
    what: &'static str,
    expected: &'static str,
}

impl std::str::FromStr for Mode {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "showback" => Ok(Self::Showback),
            "chargeback" => Ok(Self::Chargeback),
            _ => Err(ParseError {
                given: s.to_owned(),
                what: "a mode",
                expected: "showback or chargeback",
            }),
        }
    }
}

impl std::str::FromStr for Distribute {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "owner" => Ok(Self::Owner),
            "proportional" => Ok(Self::Proportional),
            "even" => Ok(Self::Even),
            _ => match s.strip_prefix("platform:") {
                Some(b) if !b.is_empty() => Ok(Self::Platform(b.to_owned())),
                _ => Err(ParseError {
                    given: s.to_owned(),
                    what: "a distribution policy",
                    expected: "owner, proportional, even or platform:NAME",
                }),
            },
        }
    }
}

/// How to allocate (by default showback, idle in proportion, no shared teams: the flags'
/// defaults).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Policy {
    /// Mode.
    pub mode: Mode,
    /// Where idle cost goes (chargeback).
    pub idle: Distribute,
    /// Teams whose whole cost is shared (a platform's own devices), distributed like idle.
    pub shared_teams: Vec<String>,
}

/// Sums of one team over some hours.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Sums {
    /// GPU-hours (share-weighted).
    pub gpu_hours: f64,
    /// Utilization-weighted GPU-hours (hours with a reading).
    pub busy_gpu_hours: f64,
    /// Idle-episode GPU-hours.
    pub idle_gpu_hours: f64,
    /// Cost of priced devices.
    pub cost_usd: f64,
    /// Idle cost of priced devices.
    pub idle_cost_usd: f64,
    /// GPU-hours of devices without a price (not in the dollars).
    pub unpriced_gpu_hours: f64,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.gpu_hours += o.gpu_hours;
        self.busy_gpu_hours += o.busy_gpu_hours;
        self.idle_gpu_hours += o.idle_gpu_hours;
        self.cost_usd += o.cost_usd;
        self.idle_cost_usd += o.idle_cost_usd;
        self.unpriced_gpu_hours += o.unpriced_gpu_hours;
    }

    fn scaled(&self, k: f64) -> Sums {
        Sums {
            gpu_hours: self.gpu_hours * k,
            busy_gpu_hours: self.busy_gpu_hours * k,
            idle_gpu_hours: self.idle_gpu_hours * k,
            cost_usd: self.cost_usd * k,
            idle_cost_usd: self.idle_cost_usd * k,
            unpriced_gpu_hours: self.unpriced_gpu_hours * k,
        }
    }
}

/// Work a team reports, for unit costs (`team,period,tokens|jobs` CSV).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnitCounts {
    /// (team, `YYYY-MM`) → (tokens, jobs).
    pub by: BTreeMap<(String, String), (Option<f64>, Option<f64>)>,
}

/// A bad unit-count file.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: line {line}: {message}")]
pub struct CountsError {
    origin: String,
    line: u64,
    message: String,
}

impl UnitCounts {
    /// Parse `team,period,tokens` / `team,period,jobs` / `team,period,tokens,jobs` CSV; a
    /// period is a UTC month, `YYYY-MM`.
    ///
    /// # Errors
    /// [`CountsError`] naming the line and field.
    pub fn parse(text: &str, origin: &str) -> Result<Self, CountsError> {
        let err = |line: u64, message: String| CountsError {
            origin: origin.to_owned(),
            line,
            message,
        };
        let mut r = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .from_reader(text.as_bytes());
        let line_of = |p: &csv::Position| record_line(text.as_bytes(), p, None);
        let head: Vec<String> = r
            .headers()
            .map_err(|e| err(1, e.to_string()))?
            .iter()
            .map(str::to_ascii_lowercase)
            .collect();
        let col = |n: &str| head.iter().position(|h| h == n);
        let (Some(team), Some(period)) = (col("team"), col("period")) else {
            return Err(err(1, "the header needs team and period columns".into()));
        };
        let (tokens, jobs) = (col("tokens"), col("jobs"));
        if tokens.is_none() && jobs.is_none() {
            return Err(err(1, "the header needs a tokens or jobs column".into()));
        }
        let mut by = BTreeMap::new();
        for rec in r.records() {
            let rec = rec.map_err(|e| err(e.position().map_or(0, line_of), e.to_string()))?;
            let line = rec.position().map_or(0, line_of);
            let cell = |i: usize| rec.get(i).unwrap_or("");
            let p = cell(period);
            if month_start(p).is_none() {
                return Err(err(line, format!("period `{p}` is not a month (2026-11)")));
            }
            let num = |i: Option<usize>, name: &str| -> Result<Option<f64>, CountsError> {
                let Some(i) = i else { return Ok(None) };
                let v = cell(i);
                if v.is_empty() {
                    return Ok(None);
                }
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| err(line, format!("{name} `{v}` is not a count")))
            };
            let key = (cell(team).to_owned(), p.to_owned());
            if by.contains_key(&key) {
                return Err(err(line, format!("team {} period {p} given twice", key.0)));
            }
            by.insert(key, (num(tokens, "tokens")?, num(jobs, "jobs")?));
        }
        Ok(Self { by })
    }
}

/// Start of the UTC month `YYYY-MM`.
fn month_start(m: &str) -> Option<EpochMs> {
    let (y, mo) = m.split_once('-')?;
    let d = jiff::civil::Date::new(y.parse().ok()?, mo.parse().ok()?, 1).ok()?;
    utc_ms(d)
}

fn utc_ms(d: jiff::civil::Date) -> Option<EpochMs> {
    jiff::tz::TimeZone::UTC
        .to_timestamp(d.to_datetime(jiff::civil::Time::midnight()))
        .ok()
        .map(jiff::Timestamp::as_millisecond)
}

/// `YYYY-MM` of an instant, with the month's start and end.
fn month_of(ms: EpochMs) -> Option<(String, EpochMs, EpochMs)> {
    let dt = jiff::tz::TimeZone::UTC.to_datetime(jiff::Timestamp::from_millisecond(ms).ok()?);
    let first = jiff::civil::Date::new(dt.year(), dt.month(), 1).ok()?;
    let next = first.checked_add(jiff::Span::new().months(1)).ok()?;
    Some((
        format!("{:04}-{:02}", dt.year(), dt.month()),
        utc_ms(first)?,
        utc_ms(next)?,
    ))
}

/// `0` = Monday 00:00 UTC … 167.
fn how(ms: EpochMs) -> usize {
    // 1970-01-01 was a Thursday: hour 0 of the epoch is hour 72 of its week.
    usize::try_from((ms.div_euclid(HOUR_MS) + 72).rem_euclid(168)).unwrap_or(0)
}

/// One device-hour folded per owner.
#[derive(Default)]
struct Ledger {
    /// month → team → sums.
    months: BTreeMap<String, (EpochMs, EpochMs, BTreeMap<String, Sums>)>,
    /// team → hour-of-week → sums (for the forecast), over hours before `as_of`.
    how: BTreeMap<String, Vec<Sums>>,
    first_hour: Option<EpochMs>,
    unpriced_devices: usize,
}

impl Ledger {
    /// Fold one device's hours before `before` into its owners' sums. `share` is its share of
    /// a GPU (a device whose share is unknown is in no sum, as in the report), `price` its
    /// price per GPU-hour.
    fn add(
        &mut self,
        p: &DeviceProfile,
        share: Option<f64>,
        price: Option<f64>,
        teams: &TeamMap,
        before: EpochMs,
    ) {
        let Some(share) = share else { return };
        if price.is_none() {
            self.unpriced_devices += 1;
        }
        // Without date-ranged rules for this device its owner is one for all hours: asked
        // once, not per hour (globs over 10k devices × 720 hours add up).
        let fixed = teams.changes(&p.key).is_empty().then(|| {
            let first = p.stats.hourly.first().map(|h| h.start_ms);
            teams.owner(&p.key, &p.info, first).unwrap_or(UNTAGGED)
        });
        for h in p.stats.hourly.iter().filter(|h| h.start_ms < before) {
            let team = fixed.unwrap_or_else(|| {
                teams
                    .owner(&p.key, &p.info, Some(h.start_ms))
                    .unwrap_or(UNTAGGED)
            });
            #[allow(clippy::cast_precision_loss)]
            let busy = h.util_weighted as f64 / 10_000.0 / HOUR_MS as f64;
            let gpu_hours = h.covered_hours * share;
            let idle = h.idle_hours * share;
            let s = Sums {
                gpu_hours,
                busy_gpu_hours: busy * share,
                idle_gpu_hours: idle,
                cost_usd: price.map_or(0.0, |p| gpu_hours * p),
                idle_cost_usd: price.map_or(0.0, |p| idle * p),
                unpriced_gpu_hours: if price.is_some() { 0.0 } else { gpu_hours },
            };
            let Some((m, ms, me)) = month_of(h.start_ms) else {
                continue;
            };
            self.months
                .entry(m)
                .or_insert_with(|| (ms, me, BTreeMap::new()))
                .2
                .entry(team.to_owned())
                .or_default()
                .add(&s);
            self.how
                .entry(team.to_owned())
                .or_insert_with(|| vec![Sums::default(); 168])[how(h.start_ms)]
            .add(&s);
            self.first_hour = Some(self.first_hour.map_or(h.start_ms, |f| f.min(h.start_ms)));
        }
    }
}

/// The allocation folded one device at a time, as the report is made
/// ([`gpuwise_core::report::build_visiting`]): a fleet's profiles are never all held.
pub struct Allocator<'a> {
    teams: &'a TeamMap,
    now_ms: EpochMs,
    ledger: Ledger,
    /// The end of the last hour any device reported.
    data_end: Option<EpochMs>,
}

impl<'a> Allocator<'a> {
    /// An empty allocation of the hours before `now_ms`, owners from `teams`.
    #[must_use]
    pub fn new(teams: &'a TeamMap, now_ms: EpochMs) -> Self {
        Self {
            teams,
            now_ms,
            ledger: Ledger::default(),
            data_end: None,
        }
    }

    /// Fold one device, with its report row (its share of a GPU and its price).
    pub fn add(&mut self, p: &DeviceProfile, row: &DeviceRow) {
        self.add_priced(p, row.gpu_share, row.usd_per_gpu_hour);
    }

    fn add_priced(&mut self, p: &DeviceProfile, share: Option<f64>, price: Option<f64>) {
        if let Some(h) = p.stats.hourly.last() {
            let end = h.start_ms + HOUR_MS;
            self.data_end = Some(self.data_end.map_or(end, |e| e.max(end)));
        }
        // The allocation is as of the data's end or now, whichever is first; every hour is
        // before the data's end, so the hours before now are the hours before that.
        self.ledger.add(p, share, price, self.teams, self.now_ms);
    }

    /// The allocation by `policy`, with unit costs from `counts`.
    #[must_use]
    pub fn finish(self, policy: &Policy, counts: &UnitCounts) -> Allocation {
        let as_of = self.data_end.unwrap_or(self.now_ms).min(self.now_ms);
        finish(&self.ledger, self.teams, policy, counts, as_of)
    }
}

/// One team's allocation over some hours.
#[derive(Clone, Debug, Serialize)]
pub struct TeamCharge {
    /// Team, `(untagged)`, or the platform bucket.
    pub team: String,
    /// What the team's devices did and cost.
    #[serde(flatten)]
    pub sums: Sums,
    /// Idle and shared cost moved away from the team (chargeback).
    pub moved_out_usd: f64,
    /// Idle and shared cost received from others (chargeback).
    pub moved_in_usd: f64,
    /// What the team is charged: cost − moved out + moved in (showback: its cost).
    pub charged_usd: f64,
    /// Charged / busy GPU-hours.
    pub usd_per_busy_gpu_hour: Option<f64>,
    /// Tokens reported for the period.
    pub tokens: Option<f64>,
    /// Charged per million tokens.
    pub usd_per_million_tokens: Option<f64>,
    /// Jobs reported for the period.
    pub jobs: Option<f64>,
    /// Charged per job.
    pub usd_per_job: Option<f64>,
}

/// Apply the policy to one set of team sums.
fn charge(sums: &BTreeMap<String, Sums>, policy: &Policy) -> BTreeMap<String, TeamCharge> {
    let mut out: BTreeMap<String, TeamCharge> = sums
        .iter()
        .map(|(t, s)| {
            (
                t.clone(),
                TeamCharge {
                    team: t.clone(),
                    sums: *s,
                    moved_out_usd: 0.0,
                    moved_in_usd: 0.0,
                    charged_usd: s.cost_usd,
                    usd_per_busy_gpu_hour: None,
                    tokens: None,
                    usd_per_million_tokens: None,
                    jobs: None,
                    usd_per_job: None,
                },
            )
        })
        .collect();
    if policy.mode == Mode::Chargeback && policy.idle != Distribute::Owner {
        let shared = |t: &str| policy.shared_teams.iter().any(|s| s == t);
        let mut pool = 0.0;
        for (t, c) in &mut out {
            if t == UNTAGGED {
                continue;
            }
            let out_usd = if shared(t) {
                c.sums.cost_usd
            } else {
                c.sums.idle_cost_usd
            };
            c.moved_out_usd = out_usd;
            pool += out_usd;
        }
        let receivers: Vec<String> = out
            .keys()
            .filter(|t| *t != UNTAGGED && !shared(t))
            .cloned()
            .collect();
        let weights: Vec<f64> = match &policy.idle {
            Distribute::Proportional => receivers
                .iter()
                .map(|t| out[t].sums.busy_gpu_hours)
                .collect(),
            _ => vec![1.0; receivers.len()],
        };
        let total: f64 = weights.iter().sum();
        match &policy.idle {
            Distribute::Platform(bucket) => {
                out.entry(bucket.clone())
                    .or_insert_with(|| empty_charge(bucket))
                    .moved_in_usd += pool;
            }
            _ if total > 0.0 => {
                for (t, w) in receivers.iter().zip(&weights) {
                    if let Some(c) = out.get_mut(t) {
                        c.moved_in_usd += pool * w / total;
                    }
                }
            }
            // Nobody to receive (or no busy hours to weigh by): the cost stays where it was.
            _ => out.values_mut().for_each(|c| c.moved_out_usd = 0.0),
        }
        for c in out.values_mut() {
            c.charged_usd = c.sums.cost_usd - c.moved_out_usd + c.moved_in_usd;
        }
    }
    for c in out.values_mut() {
        c.usd_per_busy_gpu_hour =
            (c.sums.busy_gpu_hours > 0.0).then(|| c.charged_usd / c.sums.busy_gpu_hours);
    }
    out
}

fn empty_charge(team: &str) -> TeamCharge {
    TeamCharge {
        team: team.to_owned(),
        sums: Sums::default(),
        moved_out_usd: 0.0,
        moved_in_usd: 0.0,
        charged_usd: 0.0,
        usd_per_busy_gpu_hour: None,
        tokens: None,
        usd_per_million_tokens: None,
        jobs: None,
        usd_per_job: None,
    }
}

/// One month.
#[derive(Clone, Debug, Serialize)]
pub struct Month {
    /// `YYYY-MM` (UTC).
    pub month: String,
    /// Whether `as_of` is past the month's end.
    pub complete: bool,
    /// Fleet sums.
    pub fleet: Sums,
    /// Teams, by charge, highest first.
    pub teams: Vec<TeamCharge>,
}

/// The month holding `as_of`, to date and forecast.
#[derive(Clone, Debug, Serialize)]
pub struct Forecast {
    /// `YYYY-MM`.
    pub month: String,
    /// Hours from the month's start to `as_of`.
    pub elapsed_hours: f64,
    /// Hours of the month with telemetry behind them (from the month's start or the first
    /// data, whichever is later, to `as_of`): the linear forecast's base.
    pub observed_hours: f64,
    /// Hours in the month.
    pub month_hours: f64,
    /// Per team.
    pub teams: Vec<TeamForecast>,
    /// The fleet: to date, linear, hour of week.
    pub fleet: TeamForecast,
}

/// One team's month.
#[derive(Clone, Debug, Serialize)]
pub struct TeamForecast {
    /// Team.
    pub team: String,
    /// Charged so far this month.
    pub month_to_date_usd: f64,
    /// Month-end, linear.
    pub forecast_linear_usd: Option<f64>,
    /// Month-end, by the hour-of-week pattern.
    pub forecast_hour_of_week_usd: Option<f64>,
}

/// `gpuwise.allocation/v1`.
#[derive(Clone, Debug, Serialize)]
pub struct Allocation {
    /// Schema.
    pub schema: &'static str,
    /// The policy.
    pub policy: Policy,
    /// The instant figures are "as of" (RFC 3339): the end of the data, or now if earlier.
    pub as_of: String,
    /// Months with data.
    pub months: Vec<Month>,
    /// The current month, to date and forecast (`null` when `as_of` has no data month).
    pub forecast: Option<Forecast>,
    /// Devices without a price (their GPU-hours are counted, their dollars unknown).
    pub unpriced_devices: usize,
    /// Things to know.
    pub warnings: Vec<String>,
}

fn rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map_or_else(|_| ms.to_string(), |t| t.to_string())
}

fn sorted(mut v: Vec<TeamCharge>) -> Vec<TeamCharge> {
    v.sort_by(|a, b| {
        b.charged_usd
            .total_cmp(&a.charged_usd)
            .then_with(|| a.team.cmp(&b.team))
    });
    v
}

fn with_units(mut c: TeamCharge, month: &str, counts: &UnitCounts) -> TeamCharge {
    if let Some((tokens, jobs)) = counts.by.get(&(c.team.clone(), month.to_owned())) {
        c.tokens = *tokens;
        c.jobs = *jobs;
        c.usd_per_million_tokens = tokens.filter(|t| *t > 0.0).map(|t| c.charged_usd / t * 1e6);
        c.usd_per_job = jobs.filter(|j| *j > 0.0).map(|j| c.charged_usd / j);
    }
    c
}

/// Allocate the fleet's cost. `as_of` is the run's "now"; figures stop there or at the end of
/// the data, whichever is earlier.
#[must_use]
pub fn allocate(
    profiles: &[DeviceProfile],
    report: &Report,
    teams: &TeamMap,
    policy: &Policy,
    counts: &UnitCounts,
    now_ms: EpochMs,
) -> Allocation {
    let rows: BTreeMap<&str, &DeviceRow> =
        report.devices.iter().map(|d| (d.id.as_str(), d)).collect();
    let mut a = Allocator::new(teams, now_ms);
    for p in profiles {
        match rows.get(p.key.to_string().as_str()) {
            Some(row) => a.add(p, row),
            None => a.add_priced(p, None, None),
        }
    }
    a.finish(policy, counts)
}

fn finish(
    ledger: &Ledger,
    teams: &TeamMap,
    policy: &Policy,
    counts: &UnitCounts,
    as_of: EpochMs,
) -> Allocation {
    let mut warnings = Vec::new();
    if teams.is_empty() {
        warnings.push("no team file (--teams): every device-hour is (untagged)".to_owned());
    }
    let months = ledger
        .months
        .iter()
        .map(|(m, (_, end, sums))| {
            let mut fleet = Sums::default();
            sums.values().for_each(|s| fleet.add(s));
            Month {
                month: m.clone(),
                complete: as_of >= *end,
                fleet,
                teams: sorted(
                    charge(sums, policy)
                        .into_values()
                        .map(|c| with_units(c, m, counts))
                        .collect(),
                ),
            }
        })
        .collect();
    for (t, p) in counts.by.keys() {
        if !ledger.months.get(p).is_some_and(|m| m.2.contains_key(t)) {
            warnings.push(format!(
                "unit counts for team {t} in {p}: the team has no GPU-hours that month"
            ));
        }
    }
    Allocation {
        schema: SCHEMA,
        policy: policy.clone(),
        as_of: rfc3339(as_of),
        months,
        forecast: forecast(ledger, policy, as_of),
        unpriced_devices: ledger.unpriced_devices,
        warnings,
    }
}

/// How many times each hour of the week occurs in `[from, to)` (hour starts).
fn occurrences(from: EpochMs, to: EpochMs) -> Vec<f64> {
    let mut n = vec![0.0; 168];
    let mut h = from.div_euclid(HOUR_MS) * HOUR_MS;
    while h < to {
        n[how(h)] += 1.0;
        h += HOUR_MS;
    }
    n
}

#[allow(clippy::cast_precision_loss)]
fn forecast(l: &Ledger, policy: &Policy, as_of: EpochMs) -> Option<Forecast> {
    let (month, start, end) = month_of(as_of - 1)?;
    let to_date = &l.months.get(&month)?.2;
    let elapsed = (as_of - start) as f64 / HOUR_MS as f64;
    let month_hours = (end - start) as f64 / HOUR_MS as f64;
    // The run rate is taken over the part of the month with telemetry: a fleet first seen on
    // the 5th has not been spending since the 1st.
    let observed_from = l.first_hour.map_or(start, |f| f.max(start));
    let observed = (as_of - observed_from) as f64 / HOUR_MS as f64;
    let remaining = (end - as_of) as f64 / HOUR_MS as f64;
    let seen = occurrences(l.first_hour.unwrap_or(start), as_of);
    let left = occurrences(as_of, end);
    let mut linear = BTreeMap::new();
    let mut pattern = BTreeMap::new();
    for (team, s) in to_date {
        let mut lin = *s;
        if observed > 0.0 {
            lin.add(&s.scaled(remaining / observed));
        }
        linear.insert(team.clone(), lin);
        let mut f = *s;
        if let Some(bins) = l.how.get(team) {
            // An hour of the week not seen yet (two days of history know 48 of 168) costs the
            // team's mean hour, not $0: a fleet that ran all along would otherwise be
            // forecast at a fraction of its spend.
            let mut all = Sums::default();
            bins.iter().for_each(|b| all.add(b));
            let seen_hours: f64 = seen.iter().sum();
            for (i, b) in bins.iter().enumerate() {
                if left[i] == 0.0 {
                    continue;
                }
                if seen[i] > 0.0 {
                    f.add(&b.scaled(left[i] / seen[i]));
                } else if seen_hours > 0.0 {
                    f.add(&all.scaled(left[i] / seen_hours));
                }
            }
        }
        pattern.insert(team.clone(), f);
    }
    let now = charge(to_date, policy);
    let lin = charge(&linear, policy);
    let pat = charge(&pattern, policy);
    let row = |team: &str| TeamForecast {
        team: team.to_owned(),
        month_to_date_usd: now.get(team).map_or(0.0, |c| c.charged_usd),
        forecast_linear_usd: lin.get(team).map(|c| c.charged_usd),
        forecast_hour_of_week_usd: pat.get(team).map(|c| c.charged_usd),
    };
    let mut teams: Vec<TeamForecast> = now.keys().map(|t| row(t)).collect();
    teams.sort_by(|a, b| b.month_to_date_usd.total_cmp(&a.month_to_date_usd));
    let total = |m: &BTreeMap<String, TeamCharge>| m.values().map(|c| c.charged_usd).sum::<f64>();
    Some(Forecast {
        month,
        elapsed_hours: elapsed,
        observed_hours: observed,
        month_hours,
        teams,
        fleet: TeamForecast {
            team: "(fleet)".to_owned(),
            month_to_date_usd: total(&now),
            forecast_linear_usd: Some(total(&lin)),
            forecast_hour_of_week_usd: Some(total(&pat)),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sums(cost: f64, idle: f64, busy: f64) -> Sums {
        Sums {
            gpu_hours: cost,
            busy_gpu_hours: busy,
            idle_gpu_hours: idle,
            cost_usd: cost,
            idle_cost_usd: idle,
            unpriced_gpu_hours: 0.0,
        }
    }

    fn teams() -> BTreeMap<String, Sums> {
        BTreeMap::from([
            ("a".to_owned(), sums(100.0, 40.0, 30.0)),
            ("b".to_owned(), sums(50.0, 10.0, 10.0)),
            ("infra".to_owned(), sums(20.0, 5.0, 5.0)),
            (UNTAGGED.to_owned(), sums(7.0, 7.0, 0.0)),
        ])
    }

    fn policy(mode: Mode, idle: Distribute) -> Policy {
        Policy {
            mode,
            idle,
            shared_teams: vec!["infra".to_owned()],
        }
    }

    fn charged(c: &BTreeMap<String, TeamCharge>) -> Vec<(String, f64)> {
        c.values()
            .map(|c| (c.team.clone(), (c.charged_usd * 1000.0).round() / 1000.0))
            .collect()
    }

    #[test]
    fn chargeback_policies_move_idle_and_shared_cost_and_keep_the_total() {
        let t = teams();
        let total: f64 = t.values().map(|s| s.cost_usd).sum();
        let show = charge(&t, &policy(Mode::Showback, Distribute::Even));
        assert_eq!(
            charged(&show),
            vec![
                ("(untagged)".into(), 7.0),
                ("a".into(), 100.0),
                ("b".into(), 50.0),
                ("infra".into(), 20.0)
            ]
        );
        // Pool = idle of a (40) + idle of b (10) + all of infra (20) = 70; untagged keeps its 7.
        let even = charge(&t, &policy(Mode::Chargeback, Distribute::Even));
        assert_eq!(
            charged(&even),
            vec![
                ("(untagged)".into(), 7.0),
                ("a".into(), 95.0),
                ("b".into(), 75.0),
                ("infra".into(), 0.0)
            ]
        );
        // Busy 30 : 10 → a gets 52.5, b 17.5.
        let prop = charge(&t, &policy(Mode::Chargeback, Distribute::Proportional));
        assert_eq!(
            charged(&prop),
            vec![
                ("(untagged)".into(), 7.0),
                ("a".into(), 112.5),
                ("b".into(), 57.5),
                ("infra".into(), 0.0)
            ]
        );
        let plat = charge(
            &t,
            &policy(Mode::Chargeback, Distribute::Platform("platform".into())),
        );
        assert_eq!(plat["platform"].charged_usd, 70.0);
        assert_eq!(plat["a"].charged_usd, 60.0);
        for c in [&even, &prop, &plat] {
            let sum: f64 = c.values().map(|c| c.charged_usd).sum();
            assert!((sum - total).abs() < 1e-9, "{sum} vs {total}");
        }
        let owner = charge(&t, &policy(Mode::Chargeback, Distribute::Owner));
        assert_eq!(charged(&owner), charged(&show));
    }

    #[test]
    fn months_and_hours_of_week_are_utc() {
        let nov = month_start("2026-11").expect("month");
        assert_eq!(
            month_of(nov),
            Some(("2026-11".into(), nov, month_start("2026-12").expect("m")))
        );
        // 2026-11-02 was a Monday.
        let mon = month_start("2026-11").expect("m") + 24 * HOUR_MS;
        assert_eq!(how(mon), 0);
        assert_eq!(how(mon + 25 * HOUR_MS), 25);
        assert_eq!(occurrences(mon, mon + 169 * HOUR_MS)[0], 2.0);
        assert!(month_start("2026-13").is_none());
    }

    #[test]
    fn unit_counts_parse_and_refuse_bad_lines() {
        let c = UnitCounts::parse("team,period,tokens,jobs\nllm,2026-11,2000000,\n", "u.csv")
            .expect("valid");
        assert_eq!(
            c.by[&("llm".to_owned(), "2026-11".to_owned())],
            (Some(2e6), None)
        );
        let e = |s: &str| UnitCounts::parse(s, "u.csv").expect_err("bad").to_string();
        assert_eq!(
            e("team,period,tokens\nllm,November,5\n"),
            "u.csv: line 2: period `November` is not a month (2026-11)"
        );
        assert_eq!(
            e("team,period,tokens\nllm,2026-11,-5\n"),
            "u.csv: line 2: tokens `-5` is not a count"
        );
        // After empty lines, in a file of `\r\n` lines: the line the row is on.
        assert_eq!(
            e("team,period,tokens\r\n\r\nllm,2026-11,1\r\n\r\nllm,November,5\r\n"),
            "u.csv: line 5: period `November` is not a month (2026-11)"
        );
        assert!(e("team,tokens\n").contains("team and period"));
        assert!(e("team,period,tokens\na,2026-11,1\na,2026-11,2\n").contains("given twice"));
    }
}
