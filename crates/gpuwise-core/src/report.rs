//! # The report model: fleet summary, devices, groups, KPIs, warnings
//!
//! [`build`] joins profiles, diagnoses and prices into one [`Report`], the only thing the
//! renderers read. Its JSON form is the public contract `gpuwise.report/v1`
//! (`docs/report-schema.md`): field names carry their unit, missing values are `null`.
//!
//! Money rule: every dollar figure is `GPU-hours × $/GPU-hour` of one device, summed. A
//! device's GPU-hours are its observed hours × its share of a physical GPU (1, or MIG slices /
//! parent slices). Idle cost is idle-episode hours × share × price. Devices without a price
//! add no dollars and are listed in `warnings`.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnose::{self, Bottleneck, Class, Diagnosis, IdleWindow};
use crate::price::{self, PriceBook};
use crate::profile::DeviceProfile;
use crate::sample::EpochMs;
use crate::settings::{DiagnoseSettings, ProfileSettings};
pub use crate::teams::TeamMap;
use gpuwise_catalog::GpuSpec;

/// JSON schema id of [`Report`].
pub const SCHEMA: &str = "gpuwise.report/v1";

/// How devices are grouped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// By host.
    Host,
    /// By canonical GPU model.
    Model,
    /// By Kubernetes namespace.
    Namespace,
    /// By team (from the team map).
    Team,
    /// By a label's value.
    Label(String),
}

impl GroupBy {
    /// Parse `host`, `model`, `namespace`, `team` or `label:NAME` (also through
    /// [`std::str::FromStr`]).
    pub fn parse(s: &str) -> Result<Self, ReportInputError> {
        match s {
            "host" => Ok(Self::Host),
            "model" => Ok(Self::Model),
            "namespace" => Ok(Self::Namespace),
            "team" => Ok(Self::Team),
            other => match other.strip_prefix("label:") {
                Some(name) if !name.is_empty() => Ok(Self::Label(name.to_owned())),
                _ => Err(ReportInputError::GroupBy(other.to_owned())),
            },
        }
    }

    /// The name as given on the command line.
    #[must_use]
    pub fn name(&self) -> String {
        match self {
            Self::Host => "host".into(),
            Self::Model => "model".into(),
            Self::Namespace => "namespace".into(),
            Self::Team => "team".into(),
            Self::Label(l) => format!("label:{l}"),
        }
    }
}

/// A grouping or a team file the report cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportInputError {
    /// Not a grouping.
    #[error("`{0}` is not one of host, model, namespace, team, label:NAME")]
    GroupBy(String),
}

impl std::str::FromStr for GroupBy {
    type Err = ReportInputError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// What the readers say about the input.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IngestSummary {
    /// Inputs read (paths, `-` for stdin).
    pub inputs: Vec<String>,
    /// Detected format of each input, same order.
    pub formats: Vec<String>,
    /// Lines read.
    pub lines: u64,
    /// Samples taken.
    pub samples: u64,
    /// Lines or values skipped.
    pub skipped: u64,
    /// Reader warnings (skips by reason, with the first examples).
    pub warnings: Vec<Warning>,
    /// What was pulled from a Prometheus-compatible store (absent for files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pulled: Option<Pulled>,
    /// Data of one device that reached the profile from more than one input for the same time,
    /// counted once (filled by [`build`] from the devices).
    pub overlap: OverlapSummary,
}

/// A price fallback: what the catalog used instead of what was asked.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PriceFallback {
    /// What differs (`not offered in mars-1; cheapest gcp region used`).
    pub note: String,
    /// Devices priced this way.
    pub devices: usize,
}

/// Overlapping inputs, resolved: see `docs/input-formats.md`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OverlapSummary {
    /// Devices covered by more than one input at the same time.
    pub devices: u64,
    /// Samples dropped because another input already covered their time.
    pub samples_dropped: u64,
    /// Hours covered more than once (each counted once).
    pub hours_covered_twice: f64,
    /// Devices (GPU UUIDs) reported under more than one host, counted once.
    pub devices_under_several_hosts: u64,
    /// Devices whose overlap could not be resolved (standard input cannot be read twice):
    /// only their data before the overlap is counted.
    pub unresolved_devices: u64,
}

/// The cost of reading from a store: what crossed the network.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Pulled {
    /// `pushdown` or `raw`: the path that ran.
    pub mode: String,
    /// Why that path: asked for, or the cheaper by the cost model.
    pub why: String,
    /// Devices the pushdown read from their raw samples instead (samples off the scrape
    /// grid); each is named in a `raw_device` warning.
    pub raw_devices: u64,
    /// Requests sent (range queries cut into pieces count each piece; retries count).
    pub requests: u64,
    /// Series received.
    pub series: u64,
    /// Points received.
    pub samples: u64,
    /// Response bytes received.
    pub bytes: u64,
    /// Raw samples of the utilization metric in the window (what a raw pull would move per
    /// metric), for comparison.
    pub raw_samples_in_window: Option<u64>,
}

/// A warning: something the user should know about the data or the figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Warning {
    /// Stable machine-readable kind (`skipped_line`, `unknown_model`, `unpriced`, …).
    pub kind: String,
    /// Human-readable message.
    pub message: String,
    /// How many times it happened.
    pub count: u64,
}

/// Options of [`build`].
#[derive(Clone, Debug)]
pub struct ReportOptions {
    /// Profile settings used (echoed in the report).
    pub profile: ProfileSettings,
    /// Diagnosis thresholds.
    pub diagnose: DiagnoseSettings,
    /// Grouping.
    pub group_by: GroupBy,
    /// IANA name of the report's time zone.
    pub tz_name: String,
    /// "Now", for staleness and future-timestamp checks (`None`: skip those checks).
    pub now_ms: Option<EpochMs>,
    /// Prices older than this many days are flagged.
    pub stale_price_days: u32,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// Observed window.
    pub window: Window,
    /// Settings the figures depend on.
    pub settings: Settings,
    /// Fleet summary.
    pub fleet: Fleet,
    /// Devices, most wasteful first.
    pub devices: Vec<DeviceRow>,
    /// Groups, most expensive first.
    pub groups: Vec<GroupRow>,
    /// Fleet utilization per hour (for charts).
    pub timeline: Vec<FleetHour>,
    /// Fleet hour-of-week pattern, Monday 00:00 first (168 entries).
    pub hour_of_week: Vec<FleetHowBin>,
    /// What was read.
    pub ingest: IngestSummary,
    /// Warnings about data and figures.
    pub warnings: Vec<Warning>,
}

/// The observed window.
#[derive(Clone, Debug, Serialize)]
pub struct Window {
    /// First sample, RFC 3339 UTC.
    pub start: Option<String>,
    /// Last sample, RFC 3339 UTC.
    pub end: Option<String>,
    /// Time zone of hour-of-week patterns and idle windows.
    pub timezone: String,
}

/// The settings echoed in the report.
#[derive(Clone, Debug, Serialize)]
pub struct Settings {
    /// Idle threshold.
    pub idle_threshold_pct: f32,
    /// Minimum idle episode, minutes.
    pub min_idle_episode_min: f64,
    /// Held-idle memory threshold.
    pub held_idle_min_mib: f32,
    /// Longest gap that still counts as data, seconds.
    pub max_gap_s: f64,
    /// Class thresholds.
    pub diagnose: DiagnoseSettings,
    /// Grouping.
    pub group_by: String,
}

/// The fleet summary.
#[derive(Clone, Debug, Serialize)]
pub struct Fleet {
    /// Devices (whole GPUs and MIG instances).
    pub devices: usize,
    /// GPU-hours observed (MIG instances count their share).
    pub gpu_hours: f64,
    /// Utilization, GPU-hour weighted, over devices with a reading.
    pub mean_utilization_pct: Option<f64>,
    /// GPU-hours in idle episodes.
    pub idle_gpu_hours: f64,
    /// GPU-hours idle while holding memory.
    pub held_idle_gpu_hours: f64,
    /// Cost of priced devices (`null` when every device is unpriced: unknown, never $0).
    pub cost_usd: Option<f64>,
    /// Cost of idle GPU-hours on priced devices (`null` when every idle hour is on an
    /// unpriced device).
    pub idle_cost_usd: Option<f64>,
    /// Cost of held-idle GPU-hours on priced devices (`null` when every held-idle hour is on
    /// an unpriced device).
    pub held_idle_cost_usd: Option<f64>,
    /// GPU-hours per class.
    pub gpu_hours_by_class: BTreeMap<String, f64>,
    /// Devices per class.
    pub devices_by_class: BTreeMap<String, usize>,
    /// Devices without a price.
    pub unpriced_devices: usize,
    /// Where the catalog answered another question than the one asked (a region, cloud or
    /// pricing model it does not have), with how many devices each answer priced. Renderers
    /// state these at the top.
    pub price_fallbacks: Vec<PriceFallback>,
    /// Key performance indicators.
    pub kpis: Kpis,
}

/// The KPIs practitioners track.
#[derive(Clone, Debug, Serialize)]
pub struct Kpis {
    /// Fleet mean utilization.
    pub utilization_rate_pct: Option<f64>,
    /// Idle GPU-hours over GPU-hours.
    pub idle_share_pct: Option<f64>,
    /// Idle cost over cost.
    pub waste_share_pct: Option<f64>,
    /// Cost over utilization-weighted GPU-hours (what an hour of actual work costs).
    pub cost_per_busy_gpu_hour_usd: Option<f64>,
    /// Cost per observed GPU-hour.
    pub cost_per_gpu_hour_usd: Option<f64>,
    /// Share of GPU-hours on right-sized hardware: needs the advice engine, `null` until then.
    pub rightsized_share_pct: Option<f64>,
    /// Share of priced GPU-hours bought as spot, over the devices whose pricing model is
    /// known (`null`: no priced device has a known pricing model).
    pub spot_share_pct: Option<f64>,
}

/// One device.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceRow {
    /// `host/uuid[/migN]`.
    pub id: String,
    /// The one name every output shows: `host/gpuN` from the index (MIG: `host/gpuN/migM`),
    /// else `host/` and the first 8 hex digits of the UUID (see [`display_name`]).
    pub name: String,
    /// Host.
    pub host: String,
    /// GPU UUID or index.
    pub gpu: String,
    /// GPU index on its host, when the data has it.
    pub index: Option<u32>,
    /// MIG instance id.
    pub mig_instance: Option<String>,
    /// MIG profile.
    pub mig_profile: Option<String>,
    /// Canonical model (`null` when the printed name is unknown).
    pub model: Option<String>,
    /// Product name as printed.
    pub model_name: Option<String>,
    /// Namespace (majority of samples).
    pub namespace: Option<String>,
    /// Pod (majority of samples).
    pub pod: Option<String>,
    /// Team from the team map.
    pub team: Option<String>,
    /// The group this device is in.
    pub group: String,
    /// First sample, RFC 3339.
    pub first_seen: Option<String>,
    /// Last sample, RFC 3339.
    pub last_seen: Option<String>,
    /// Samples.
    pub samples: u64,
    /// Median sampling interval.
    pub sampling_interval_s: Option<f64>,
    /// Observed hours over first-to-last span.
    pub coverage_pct: Option<f64>,
    /// Share of a physical GPU (1, or MIG slices / parent slices); `None` for a MIG instance
    /// of a GPU whose slices the catalog does not know.
    pub gpu_share: Option<f64>,
    /// GPU-hours (observed hours × share; the instance's observed hours when the share is
    /// unknown, and then left out of every sum).
    pub gpu_hours: f64,
    /// Utilization signal.
    pub utilization_source: Option<String>,
    /// Mean utilization.
    pub mean_utilization_pct: Option<f64>,
    /// Median utilization.
    pub p50_utilization_pct: Option<f64>,
    /// 95th-percentile utilization.
    pub p95_utilization_pct: Option<f64>,
    /// Maximum utilization.
    pub max_utilization_pct: Option<f64>,
    /// Hours in utilization bands 0–5, 5–25, 25–50, 50–85, 85–100 %.
    pub utilization_bands_hours: [f64; 5],
    /// Mean SM activity.
    pub sm_active_pct: Option<f64>,
    /// Mean SM occupancy.
    pub sm_occupancy_pct: Option<f64>,
    /// Mean tensor-pipe activity.
    pub tensor_active_pct: Option<f64>,
    /// Mean DRAM activity.
    pub dram_active_pct: Option<f64>,
    /// Mean memory-interface busy time.
    pub memory_bandwidth_utilization_pct: Option<f64>,
    /// Peak memory used.
    pub peak_memory_used_mib: Option<f64>,
    /// p95 memory used.
    pub p95_memory_used_mib: Option<f64>,
    /// Memory installed.
    pub memory_total_mib: Option<f64>,
    /// Peak memory over installed.
    pub peak_memory_used_pct: Option<f64>,
    /// Mean power.
    pub power_mean_w: Option<f64>,
    /// Power limit.
    pub power_limit_w: Option<f64>,
    /// Mean power over the limit.
    pub power_mean_pct_of_limit: Option<f64>,
    /// Idle-episode hours.
    pub idle_hours: f64,
    /// Held-idle hours.
    pub held_idle_hours: f64,
    /// Idle episodes.
    pub idle_episodes: usize,
    /// Longest idle episode.
    pub longest_idle_hours: f64,
    /// Gaps (no data).
    pub gaps: u64,
    /// Class.
    pub class: Class,
    /// Why.
    pub class_reason: String,
    /// Bottleneck hint.
    pub bottleneck: Bottleneck,
    /// Recurring idle windows.
    pub idle_windows: Vec<IdleWindow>,
    /// In words.
    pub idle_pattern: Option<String>,
    /// $/GPU-hour used.
    pub usd_per_gpu_hour: Option<f64>,
    /// Cost (`null`: unpriced, never $0).
    pub cost_usd: Option<f64>,
    /// Idle cost (`null`: unpriced).
    pub idle_cost_usd: Option<f64>,
    /// Held-idle cost (`null`: unpriced).
    pub held_idle_cost_usd: Option<f64>,
    /// Where the price came from (`null`: unpriced).
    pub price_source: Option<String>,
    /// Pricing model of the price (`on-demand`, `spot`, `1y`, `3y`; `null`: unknown).
    pub pricing: Option<&'static str>,
    /// Cloud of the price (the catalog row's, or the price rule's `cloud`; `null`: not known).
    pub cloud: Option<String>,
    /// Region of the price, likewise.
    pub region: Option<String>,
}

/// One group.
#[derive(Clone, Debug, Serialize)]
pub struct GroupRow {
    /// Group value.
    pub key: String,
    /// Devices.
    pub devices: usize,
    /// GPU-hours.
    pub gpu_hours: f64,
    /// Mean utilization (GPU-hour weighted).
    pub mean_utilization_pct: Option<f64>,
    /// Idle GPU-hours.
    pub idle_gpu_hours: f64,
    /// Cost of the group's priced devices (`null` when none is priced).
    pub cost_usd: Option<f64>,
    /// Idle cost of the group's priced devices (`null` when its idle hours are all unpriced).
    pub idle_cost_usd: Option<f64>,
    /// Held-idle cost of the group's priced devices (`null` likewise).
    pub held_idle_cost_usd: Option<f64>,
    /// Devices of the group without a price (their cost is not in the figures above).
    pub unpriced_devices: usize,
}

/// The fleet in one UTC hour.
#[derive(Clone, Debug, Serialize)]
pub struct FleetHour {
    /// Start of the hour, epoch ms.
    pub start_ms: EpochMs,
    /// Device-hours with data.
    pub device_hours: f64,
    /// Mean utilization of devices with a reading.
    pub mean_utilization_pct: Option<f64>,
    /// Idle device-hours.
    pub idle_hours: f64,
}

/// The fleet in one hour of the week.
#[derive(Clone, Debug, Serialize)]
pub struct FleetHowBin {
    /// 0 = Monday … 6 = Sunday.
    pub day: u8,
    /// 0–23.
    pub hour: u8,
    /// Device-hours with data.
    pub device_hours: f64,
    /// Mean utilization.
    pub mean_utilization_pct: Option<f64>,
    /// Idle share of the device-hours.
    pub idle_share_pct: Option<f64>,
}

/// Sums over a set of devices (the fleet, a group). GPU-hours and utilization are weighted by
/// each device's share of a GPU; a device whose share is unknown adds to the count only.
#[derive(Default)]
struct Sums {
    devices: usize,
    gpu_hours: f64,
    util_num: f64,
    util_den: f64,
    idle: f64,
    cost: f64,
    idle_cost: f64,
    held_cost: f64,
    /// GPU-hours and busy GPU-hours (utilization × hours) of priced devices: the
    /// denominators of cost per GPU-hour, which unpriced hours must not dilute.
    priced_gpu_hours: f64,
    priced_busy_hours: f64,
    unpriced: usize,
    /// Hours of each kind on priced and on unpriced devices: a sum of dollars over no
    /// priced hour of its kind is unknown, not $0.
    priced_idle: f64,
    priced_held: f64,
    unpriced_hours: f64,
    unpriced_idle: f64,
    unpriced_held: f64,
}

impl Sums {
    fn mean(&self) -> Option<f64> {
        (self.util_den > 0.0).then(|| self.util_num / self.util_den)
    }

    fn add(&mut self, s: &crate::profile::DeviceStats, row: &DeviceRow) {
        self.devices += 1;
        let Some(share) = row.gpu_share else {
            self.unpriced += 1;
            return;
        };
        self.gpu_hours += row.gpu_hours;
        if let Some(u) = &s.util {
            self.util_num += u.mean_pct * u.observed_hours * share;
            self.util_den += u.observed_hours * share;
        }
        self.idle += s.idle_hours * share;
        match (row.cost_usd, row.idle_cost_usd, row.held_idle_cost_usd) {
            (Some(c), Some(i), Some(h)) => {
                self.cost += c;
                self.idle_cost += i;
                self.held_cost += h;
                self.priced_gpu_hours += row.gpu_hours;
                self.priced_idle += s.idle_hours * share;
                self.priced_held += s.held_idle_hours * share;
                if let Some(u) = &s.util {
                    self.priced_busy_hours += u.mean_pct / 100.0 * u.observed_hours * share;
                }
            }
            _ => {
                self.unpriced += 1;
                self.unpriced_hours += row.gpu_hours;
                self.unpriced_idle += s.idle_hours * share;
                self.unpriced_held += s.held_idle_hours * share;
            }
        }
    }

    /// Dollars over `priced` hours of a kind, unknown when every such hour is unpriced.
    fn dollars(usd: f64, priced: f64, unpriced: f64) -> Option<f64> {
        (priced > 0.0 || unpriced <= 0.0).then_some(usd)
    }

    /// Cost, idle cost and held-idle cost, each unknown where its hours are all unpriced.
    fn costs(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        (
            Self::dollars(self.cost, self.priced_gpu_hours, self.unpriced_hours),
            Self::dollars(self.idle_cost, self.priced_idle, self.unpriced_idle),
            Self::dollars(self.held_cost, self.priced_held, self.unpriced_held),
        )
    }

    /// The fleet's KPIs. Costs per hour are over priced devices only: unpriced hours are not
    /// free hours.
    fn kpis(&self) -> Kpis {
        Kpis {
            utilization_rate_pct: self.mean(),
            idle_share_pct: (self.gpu_hours > 0.0).then(|| 100.0 * self.idle / self.gpu_hours),
            waste_share_pct: (self.cost > 0.0).then(|| 100.0 * self.idle_cost / self.cost),
            cost_per_busy_gpu_hour_usd: (self.priced_busy_hours > 0.0 && self.cost > 0.0)
                .then(|| self.cost / self.priced_busy_hours),
            cost_per_gpu_hour_usd: (self.priced_gpu_hours > 0.0 && self.cost > 0.0)
                .then(|| self.cost / self.priced_gpu_hours),
            rightsized_share_pct: None,
            spot_share_pct: None,
        }
    }
}

/// Spot GPU-hours and GPU-hours of priced devices whose pricing model is known, or `None`
/// when there are none.
#[must_use]
pub fn spot_share(devices: &[DeviceRow]) -> Option<(f64, f64)> {
    let (mut spot, mut known) = (0.0, 0.0);
    for d in devices {
        if let (Some(p), Some(_)) = (d.pricing, d.usd_per_gpu_hour) {
            known += d.gpu_hours;
            if p == "spot" {
                spot += d.gpu_hours;
            }
        }
    }
    (known > 0.0).then_some((spot, known))
}

/// A device's display name: `host/gpuN` from its index (MIG: `host/gpuN/migM`), else `host/`
/// and the first 8 hex digits of its UUID (`host/5fd7a1c2…`), else `host/<gpu>`.
#[must_use]
pub fn display_name(key: &crate::sample::DeviceKey, index: Option<u32>) -> String {
    let gpu = match (index, key.gpu.strip_prefix("GPU-")) {
        (Some(i), _) => format!("gpu{i}"),
        (None, Some(rest)) => format!("{}…", rest.get(..8).unwrap_or(rest)),
        (None, None) => key.gpu.clone(),
    };
    let mut s = format!("{}/{gpu}", key.host);
    if let Some(m) = &key.mig {
        s.push_str("/mig");
        s.push_str(m);
    }
    s
}

fn rfc3339(ms: EpochMs) -> Option<String> {
    jiff::Timestamp::from_millisecond(ms)
        .ok()
        .map(|t| t.to_string())
}

/// Join profiles, diagnoses and prices into a report: each device is priced, noted and turned
/// into its row, then added to the fleet's totals; the totals become the fleet, group,
/// timeline and hour-of-week figures, and the notes become warnings.
///
/// `profiles` are taken one at a time, in key order, and not kept: a caller that has no other
/// use for them hands them over as they are made ([`Profile::finish_each`]), and no fleet's
/// summaries are ever all held at once.
///
/// [`Profile::finish_each`]: crate::profile::Profile::finish_each
#[must_use]
pub fn build<P: std::borrow::Borrow<DeviceProfile>>(
    profiles: impl IntoIterator<Item = P>,
    prices: &PriceBook,
    teams: &TeamMap,
    opts: &ReportOptions,
    ingest: IngestSummary,
) -> Report {
    build_visiting(profiles, prices, teams, opts, ingest, &mut |_, _| {})
}

/// [`build`], handing each device's profile and row to `visit` as it is made: what else a
/// caller folds from the devices (an allocation) is folded without keeping the profiles.
#[must_use]
pub fn build_visiting<P: std::borrow::Borrow<DeviceProfile>>(
    profiles: impl IntoIterator<Item = P>,
    prices: &PriceBook,
    teams: &TeamMap,
    opts: &ReportOptions,
    ingest: IngestSummary,
    visit: &mut dyn FnMut(&DeviceProfile, &DeviceRow),
) -> Report {
    let mut notes = Notes::default();
    let mut totals = Totals::default();
    let profiles = profiles.into_iter();
    let mut devices = Vec::with_capacity(profiles.size_hint().0);
    for p in profiles {
        let p = p.borrow();
        let priced = Priced::of(p, prices);
        notes.observe(p, &priced, opts);
        let row = device_row(p, &priced, teams, opts);
        totals.add(p, &row);
        visit(p, &row);
        devices.push(row);
    }
    sort_by_waste(&mut devices);
    let held_idle_gpu_hours: f64 = devices
        .iter()
        .filter_map(|d| d.gpu_share.map(|share| d.held_idle_hours * share))
        .sum();
    let unpriced_devices = notes.unpriced.len();
    let fallbacks = std::mem::take(&mut notes.fallbacks);
    let overlap = notes.overlap.clone();
    let mut warnings = ingest.warnings.clone();
    warnings.extend(notes.warnings(opts));
    let Totals {
        fleet,
        groups,
        by_class,
        count_by_class,
        timeline,
        how,
        start,
        end,
    } = totals;
    Report {
        schema: SCHEMA,
        window: Window {
            start: start.and_then(rfc3339),
            end: end.and_then(rfc3339),
            timezone: opts.tz_name.clone(),
        },
        settings: Settings::of(opts),
        fleet: Fleet {
            devices: fleet.devices,
            gpu_hours: fleet.gpu_hours,
            mean_utilization_pct: fleet.mean(),
            idle_gpu_hours: fleet.idle,
            held_idle_gpu_hours,
            cost_usd: fleet.costs().0,
            idle_cost_usd: fleet.costs().1,
            held_idle_cost_usd: fleet.costs().2,
            gpu_hours_by_class: by_class,
            devices_by_class: count_by_class,
            unpriced_devices,
            price_fallbacks: fallbacks
                .into_iter()
                .map(|(note, devices)| PriceFallback { note, devices })
                .collect(),
            kpis: Kpis {
                spot_share_pct: spot_share(&devices).map(|(spot, known)| 100.0 * spot / known),
                ..fleet.kpis()
            },
        },
        devices,
        groups: group_rows(groups),
        timeline: timeline
            .into_iter()
            .map(|(start_ms, h)| FleetHour {
                start_ms,
                device_hours: h.covered_hours,
                mean_utilization_pct: h.mean_utilization_pct(),
                idle_hours: h.idle_hours,
            })
            .collect(),
        hour_of_week: how
            .into_iter()
            .enumerate()
            .map(|(i, h)| FleetHowBin {
                #[allow(clippy::cast_possible_truncation)]
                day: (i / 24) as u8,
                #[allow(clippy::cast_possible_truncation)]
                hour: (i % 24) as u8,
                device_hours: h.covered_hours,
                mean_utilization_pct: h.mean_utilization_pct(),
                idle_share_pct: (h.covered_hours > 0.0)
                    .then(|| 100.0 * h.idle_hours / h.covered_hours),
            })
            .collect(),
        ingest: IngestSummary {
            warnings: Vec::new(),
            overlap,
            ..ingest
        },
        warnings,
    }
}

impl Settings {
    fn of(opts: &ReportOptions) -> Self {
        Settings {
            idle_threshold_pct: opts.profile.idle_threshold_pct,
            #[allow(clippy::cast_precision_loss)]
            min_idle_episode_min: opts.profile.min_idle_episode_ms as f64 / 60_000.0,
            held_idle_min_mib: opts.profile.held_idle_min_mib,
            #[allow(clippy::cast_precision_loss)]
            max_gap_s: opts.profile.max_gap_ms as f64 / 1000.0,
            diagnose: opts.diagnose.clone(),
            group_by: opts.group_by.name(),
        }
    }
}

/// A device's GPU model, share of a physical GPU and price.
struct Priced<'a> {
    model: Option<&'a GpuSpec>,
    /// `None`: a MIG instance whose share of its parent cannot be known.
    share: Option<f64>,
    quote: Option<price::Quote>,
}

impl<'a> Priced<'a> {
    fn of(p: &DeviceProfile, prices: &'a PriceBook) -> Self {
        let model = p
            .info
            .model_name
            .as_deref()
            .and_then(|n| prices.catalog().resolve(n));
        let share = price::gpu_share(&p.info, model);
        // Without its share a MIG instance's GPU-hours, and so its cost, are unknown.
        let quote = share.and_then(|_| prices.quote(&p.key, &p.info, model));
        Self {
            model,
            share,
            quote,
        }
    }
}

/// What the devices said that the reader should know: unpriced and unknown models, stale
/// prices, fallbacks, gaps, dropped samples, overlaps.
#[derive(Default)]
struct Notes {
    unknown_models: BTreeMap<String, u64>,
    no_model: u64,
    unknown_share: Vec<String>,
    unpriced: Vec<String>,
    fallbacks: BTreeMap<String, usize>,
    stale: BTreeMap<String, u64>,
    gap_devices: u64,
    gaps: u64,
    reordered: u64,
    duplicates: u64,
    overlap: OverlapSummary,
    several_hosts: Vec<String>,
    unresolved: Vec<String>,
    future: u64,
    /// Devices reporting more memory than their model has: two GPUs under one key.
    memory_over_model: Vec<String>,
}

impl Notes {
    fn observe(&mut self, p: &DeviceProfile, priced: &Priced<'_>, opts: &ReportOptions) {
        let s = &p.stats;
        let quote = priced.quote.as_ref();
        match (&p.info.model_name, priced.model) {
            (Some(name), None) => *self.unknown_models.entry(name.clone()).or_default() += 1,
            (None, _) if quote.is_none() => self.no_model += 1,
            _ => {}
        }
        if let (Some(q), Some(now)) = (quote, opts.now_ms)
            && let Some(as_of) = q.as_of.as_deref()
            && let Ok(date) = as_of.parse::<jiff::civil::Date>()
        {
            let as_of_ms = jiff::tz::TimeZone::UTC
                .to_timestamp(date.to_datetime(jiff::civil::Time::midnight()))
                .map_or(now, jiff::Timestamp::as_millisecond);
            let age_days = (now - as_of_ms) / DAY_MS;
            if age_days > i64::from(opts.stale_price_days) {
                *self
                    .stale
                    .entry(format!("{as_of} ({age_days} days old)"))
                    .or_default() += 1;
            }
        }
        if priced.share.is_none() {
            self.unknown_share.push(p.key.to_string());
        }
        if quote.is_none() {
            self.unpriced.push(p.key.to_string());
        }
        if let Some(note) = quote.and_then(|q| q.fallback.clone()) {
            *self.fallbacks.entry(note).or_default() += 1;
        }
        if s.gaps > 0 {
            self.gap_devices += 1;
            self.gaps += s.gaps;
        }
        self.reordered += s.reordered;
        self.duplicates += s.duplicates;
        if s.overlaps > 0 {
            self.overlap.devices += 1;
            self.overlap.samples_dropped += s.overlap_samples;
            self.overlap.hours_covered_twice += s.overlap_hours;
        }
        if !p.info.other_hosts.is_empty() {
            self.overlap.devices_under_several_hosts += 1;
            self.several_hosts.push(format!(
                "`{}` also as {}",
                p.key,
                p.info
                    .other_hosts
                    .iter()
                    .map(|h| format!("`{h}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if p.info.unresolved_overlap {
            self.overlap.unresolved_devices += 1;
            self.unresolved.push(format!("`{}`", p.key));
        }
        if opts.now_ms.is_some_and(|now| s.last_ts_ms > now + DAY_MS) {
            self.future += 1;
        }
        // More memory than the model has (5 % slack for how vendors count a GB): two GPUs
        // whose captures share a masked UUID, merged into one device.
        let seen = s
            .mem_total_mib
            .into_iter()
            .chain(s.mem_used_peak_mib)
            .fold(0.0, f64::max);
        if let Some(spec) = priced.model.filter(|m| m.memory_gb > 0.0)
            && seen > spec.memory_gb * 1024.0 * 1.05
        {
            self.memory_over_model.push(format!(
                "`{}` reports {:.0} GiB, a {} has {:.0} GB",
                p.key,
                seen / 1024.0,
                spec.name,
                spec.memory_gb
            ));
        }
    }

    /// The notes as warnings, in a stable order: prices, then the data, then overlaps.
    fn warnings(&self, opts: &ReportOptions) -> Vec<Warning> {
        let mut out = Vec::new();
        self.price_warnings(opts, &mut out);
        self.data_warnings(opts, &mut out);
        self.overlap_warnings(&mut out);
        out
    }

    /// Unknown models and shares, unpriced devices, stale prices.
    fn price_warnings(&self, opts: &ReportOptions, out: &mut Vec<Warning>) {
        for (name, n) in &self.unknown_models {
            warn(
                out,
                "unknown_model",
                format!(
                    "GPU model `{name}` is not in the catalog: its devices are not priced unless a --prices rule matches them"
                ),
                *n,
            );
        }
        if self.no_model > 0 {
            warn(out, "no_model", "unpriced devices whose data names no GPU model (dmon logs, generic CSV without a model column): price them with a --prices rule".into(), self.no_model);
        }
        if !self.unknown_share.is_empty() {
            warn(
                out,
                "mig_share_unknown",
                format!(
                    "{} MIG instance(s) of a GPU whose MIG slices the catalog does not know ({}): their share of the GPU, and so their GPU-hours and cost, are unknown and not counted",
                    self.unknown_share.len(),
                    first_five(&self.unknown_share, ", ")
                ),
                self.unknown_share.len() as u64,
            );
        }
        if !self.unpriced.is_empty() {
            warn(
                out,
                "unpriced",
                format!(
                    "no price for {} device(s) ({}): their cost is not counted",
                    self.unpriced.len(),
                    first_five(&self.unpriced, ", ")
                ),
                self.unpriced.len() as u64,
            );
        }
        if !self.stale.is_empty() {
            let n: u64 = self.stale.values().sum();
            let dates: Vec<String> = self.stale.keys().cloned().collect();
            warn(
                out,
                "stale_price",
                format!(
                    "{n} device(s) priced with prices older than {} days (as of {}): refresh the catalog (`gpuwise catalog import`, docs/catalog.md), or pass --prices",
                    opts.stale_price_days,
                    dates.join(", ")
                ),
                n,
            );
        }
    }

    /// Gaps, samples out of order or repeated, clocks in the future.
    fn data_warnings(&self, opts: &ReportOptions, out: &mut Vec<Warning>) {
        if self.gap_devices > 0 {
            warn(
                out,
                "gaps",
                format!(
                    "{} gap(s) longer than {:.0} s in {} device(s) count as no data (neither idle nor billed)",
                    self.gaps,
                    opts.profile.max_gap_ms as f64 / 1000.0,
                    self.gap_devices
                ),
                self.gaps,
            );
        }
        for (kind, n, what) in [
            (
                "out_of_order",
                self.reordered,
                "sample(s) older than the previous sample of their device were dropped",
            ),
            (
                "duplicate_timestamp",
                self.duplicates,
                "sample(s) repeating the previous timestamp of their device were dropped",
            ),
            (
                "future_timestamp",
                self.future,
                "device(s) have samples more than a day in the future (check --tz and clocks)",
            ),
        ] {
            if n > 0 {
                warn(out, kind, format!("{n} {what}"), n);
            }
        }
    }

    /// Inputs that covered a device twice, GPUs under several hosts, unresolved overlaps.
    fn overlap_warnings(&self, out: &mut Vec<Warning>) {
        let o = &self.overlap;
        if o.devices > 0 {
            warn(
                out,
                "overlap",
                format!(
                    "{} device(s) were covered by more than one input at the same time (the same file twice, copies, or two collectors): {:.2} h covered twice and {} sample(s) dropped, so each device-hour counts once",
                    o.devices, o.hours_covered_twice, o.samples_dropped
                ),
                o.devices,
            );
        }
        if !self.several_hosts.is_empty() {
            warn(
                out,
                "same_gpu_several_hosts",
                format!(
                    "{} GPU(s) were reported under more than one host and are counted once, under the host that reported them most: {}",
                    self.several_hosts.len(),
                    self.several_hosts
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                self.several_hosts.len() as u64,
            );
        }
        if !self.memory_over_model.is_empty() {
            warn(
                out,
                "memory_exceeds_model",
                format!(
                    "{} device(s) report more memory than their GPU model has, so two GPUs are probably counted as one (captures whose masked UUIDs collide?): {}",
                    self.memory_over_model.len(),
                    self.memory_over_model
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                self.memory_over_model.len() as u64,
            );
        }
        if !self.unresolved.is_empty() {
            warn(
                out,
                "unresolved_overlap",
                format!(
                    "{} device(s) overlap between standard input and other inputs; standard input cannot be read twice, so only their data before the overlap counts (pass the data as a file): {}",
                    self.unresolved.len(),
                    self.unresolved
                        .iter()
                        .take(5)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                self.unresolved.len() as u64,
            );
        }
    }
}

fn warn(out: &mut Vec<Warning>, kind: &str, message: String, count: u64) {
    out.push(Warning {
        kind: kind.into(),
        message,
        count,
    });
}

/// The first five of a list, joined, with `…` when there are more.
fn first_five(items: &[String], sep: &str) -> String {
    let shown: Vec<&str> = items.iter().take(5).map(String::as_str).collect();
    format!(
        "{}{}",
        shown.join(sep),
        if items.len() > 5 { ", …" } else { "" }
    )
}

use crate::DAY_MS;

/// One device's row: identity, group, diagnosis, figures and dollars.
fn device_row(
    p: &DeviceProfile,
    priced: &Priced<'_>,
    teams: &TeamMap,
    opts: &ReportOptions,
) -> DeviceRow {
    let s = &p.stats;
    let d: Diagnosis = diagnose::diagnose(s, &opts.diagnose, p.info.workload);
    let price = priced.quote.as_ref().map(|q| q.usd_per_gpu_hour);
    // Instance-hours when the share is unknown (and then unpriced, and out of the sums).
    let share = priced.share.unwrap_or(1.0);
    let gpu_hours = s.observed_hours * share;
    let namespace = p.info.label("namespace").map(str::to_owned);
    let pod = p.info.label("pod").map(str::to_owned);
    // The owner now: at the device's last sample (`[[assign]]` rules move devices in time).
    let team = teams
        .owner(&p.key, &p.info, Some(s.last_ts_ms))
        .map(str::to_owned);
    let group = match &opts.group_by {
        GroupBy::Host => Some(p.key.host.clone()),
        GroupBy::Model => priced
            .model
            .map(|m| m.name.clone())
            .or_else(|| p.info.model_name.clone()),
        GroupBy::Namespace => namespace.clone(),
        GroupBy::Team => team.clone(),
        GroupBy::Label(l) => p.info.label(l).map(str::to_owned),
    }
    .unwrap_or_else(|| "(none)".to_owned());
    let longest = s.idle_episodes.iter().map(|e| e.dur_ms).max().unwrap_or(0);
    DeviceRow {
        id: p.key.to_string(),
        name: display_name(&p.key, p.info.index),
        host: p.key.host.clone(),
        gpu: p.key.gpu.clone(),
        index: p.info.index,
        mig_instance: p.key.mig.clone(),
        mig_profile: p.info.mig_profile.clone(),
        model: priced.model.map(|m| m.name.clone()),
        model_name: p.info.model_name.clone(),
        namespace,
        pod,
        team,
        group,
        first_seen: rfc3339(s.first_ts_ms),
        last_seen: rfc3339(s.last_ts_ms),
        samples: s.samples,
        sampling_interval_s: s.sampling_interval_s,
        coverage_pct: (s.span_hours > 0.0).then(|| 100.0 * s.observed_hours / s.span_hours),
        gpu_share: priced.share,
        gpu_hours,
        utilization_source: p.info.util_source.and_then(|u| serde_json_like_name(&u)),
        mean_utilization_pct: s.util.as_ref().map(|u| u.mean_pct),
        p50_utilization_pct: s.util.as_ref().map(|u| u.p50_pct),
        p95_utilization_pct: s.util.as_ref().map(|u| u.p95_pct),
        max_utilization_pct: s.util.as_ref().map(|u| u.max_pct),
        utilization_bands_hours: s.util_band_hours,
        sm_active_pct: s.sm_active_pct,
        sm_occupancy_pct: s.sm_occupancy_pct,
        tensor_active_pct: s.tensor_active_pct,
        dram_active_pct: s.dram_active_pct,
        memory_bandwidth_utilization_pct: s.mem_bw_util_pct,
        peak_memory_used_mib: s.mem_used_peak_mib,
        p95_memory_used_mib: s.mem_used_p95_mib,
        memory_total_mib: s.mem_total_mib,
        peak_memory_used_pct: match (s.mem_used_peak_mib, s.mem_total_mib) {
            (Some(u), Some(t)) if t > 0.0 => Some(100.0 * u / t),
            _ => None,
        },
        power_mean_w: s.power_mean_w,
        power_limit_w: s.power_limit_w,
        power_mean_pct_of_limit: match (s.power_mean_w, s.power_limit_w) {
            (Some(p), Some(l)) if l > 0.0 => Some(100.0 * p / l),
            _ => None,
        },
        idle_hours: s.idle_hours,
        held_idle_hours: s.held_idle_hours,
        idle_episodes: s.idle_episodes.len(),
        #[allow(clippy::cast_precision_loss)]
        longest_idle_hours: crate::hours_of_ms(longest as f64),
        gaps: s.gaps,
        class: d.class,
        class_reason: d.class_reason,
        bottleneck: d.bottleneck,
        idle_windows: d.idle_windows,
        idle_pattern: d.idle_pattern,
        usd_per_gpu_hour: price,
        cost_usd: price.map(|pr| gpu_hours * pr),
        idle_cost_usd: price.map(|pr| s.idle_hours * share * pr),
        held_idle_cost_usd: price.map(|pr| s.held_idle_hours * share * pr),
        price_source: priced.quote.as_ref().map(|q| q.source.clone()),
        pricing: priced.quote.as_ref().and_then(|q| q.pricing),
        cloud: priced.quote.as_ref().and_then(|q| q.cloud.clone()),
        region: priced.quote.as_ref().and_then(|q| q.region.clone()),
    }
}

/// Most wasteful first: idle cost, then cost, then idle hours, then id (stable output). An
/// unpriced device sorts as if its dollars were 0 (its figures stay unknown in the row).
fn sort_by_waste(devices: &mut [DeviceRow]) {
    // Unstable: the ids make the order total, and a stable sort's scratch space was 8 MB.
    devices.sort_unstable_by(|a, b| {
        b.idle_cost_usd
            .unwrap_or(0.0)
            .total_cmp(&a.idle_cost_usd.unwrap_or(0.0))
            .then(
                b.cost_usd
                    .unwrap_or(0.0)
                    .total_cmp(&a.cost_usd.unwrap_or(0.0)),
            )
            .then(b.idle_hours.total_cmp(&a.idle_hours))
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// Device-hours, utilization and idle time of the fleet in one hour (of the timeline or of the
/// week).
#[derive(Clone, Copy, Default)]
struct HourSums {
    covered_hours: f64,
    /// Σ utilization % × hours.
    util_pct_hours: f64,
    /// Hours with a utilization reading.
    util_hours: f64,
    idle_hours: f64,
}

impl HourSums {
    fn mean_utilization_pct(&self) -> Option<f64> {
        (self.util_hours > 0.0).then(|| self.util_pct_hours / self.util_hours)
    }
}

/// The fleet's running totals over the devices.
struct Totals {
    fleet: Sums,
    groups: BTreeMap<String, Sums>,
    by_class: BTreeMap<String, f64>,
    count_by_class: BTreeMap<String, usize>,
    timeline: BTreeMap<EpochMs, HourSums>,
    how: Vec<HourSums>,
    start: Option<EpochMs>,
    end: Option<EpochMs>,
}

impl Default for Totals {
    fn default() -> Self {
        Self {
            fleet: Sums::default(),
            groups: BTreeMap::new(),
            by_class: BTreeMap::new(),
            count_by_class: BTreeMap::new(),
            timeline: BTreeMap::new(),
            how: vec![HourSums::default(); 168],
            start: None,
            end: None,
        }
    }
}

impl Totals {
    fn add(&mut self, p: &DeviceProfile, row: &DeviceRow) {
        let s = &p.stats;
        for acc in [
            &mut self.fleet,
            self.groups.entry(row.group.clone()).or_default(),
        ] {
            acc.add(s, row);
        }
        if row.gpu_share.is_some() {
            *self
                .by_class
                .entry(row.class.as_str().to_owned())
                .or_default() += row.gpu_hours;
        }
        *self
            .count_by_class
            .entry(row.class.as_str().to_owned())
            .or_default() += 1;
        for h in &s.hourly {
            let e = self.timeline.entry(h.start_ms).or_default();
            e.covered_hours += h.covered_hours;
            #[allow(clippy::cast_precision_loss)]
            {
                e.util_pct_hours += crate::hours_of_ms(h.util_weighted as f64 / 100.0);
            }
            e.util_hours += h.util_hours;
            e.idle_hours += h.idle_hours;
        }
        for (e, b) in self.how.iter_mut().zip(s.hour_of_week().iter()) {
            e.covered_hours += b.covered_hours;
            e.util_pct_hours += b.util_pct_hours;
            e.util_hours += b.util_hours;
            e.idle_hours += b.idle_hours;
        }
        self.start = Some(self.start.map_or(s.first_ts_ms, |x| x.min(s.first_ts_ms)));
        self.end = Some(self.end.map_or(s.last_ts_ms, |x| x.max(s.last_ts_ms)));
    }
}

/// Groups, most expensive first.
fn group_rows(groups: BTreeMap<String, Sums>) -> Vec<GroupRow> {
    let mut rows: Vec<GroupRow> = groups
        .into_iter()
        .map(|(key, g)| GroupRow {
            key,
            devices: g.devices,
            gpu_hours: g.gpu_hours,
            mean_utilization_pct: g.mean(),
            idle_gpu_hours: g.idle,
            cost_usd: g.costs().0,
            idle_cost_usd: g.costs().1,
            held_idle_cost_usd: g.costs().2,
            unpriced_devices: g.unpriced,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.cost_usd
            .unwrap_or(0.0)
            .total_cmp(&a.cost_usd.unwrap_or(0.0))
            .then_with(|| a.key.cmp(&b.key))
    });
    rows
}

fn serde_json_like_name(u: &crate::sample::UtilSource) -> Option<String> {
    use crate::sample::UtilSource;
    Some(
        match u {
            UtilSource::DcgmGrEngineActive => "dcgm_gr_engine_active",
            UtilSource::DcgmGpuUtil => "dcgm_gpu_util",
            UtilSource::NvidiaSmi => "nvidia_smi",
            UtilSource::Mapped => "mapped",
        }
        .to_owned(),
    )
}

/// The class of every device, for tests and summaries.
#[must_use]
pub fn classes(report: &Report) -> BTreeMap<String, Class> {
    report
        .devices
        .iter()
        .map(|d| (d.id.clone(), d.class))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::ProfileBuilder;
    use crate::sample::{DeviceKey, Sample};

    fn opts() -> ReportOptions {
        ReportOptions {
            profile: ProfileSettings::default(),
            diagnose: DiagnoseSettings::default(),
            group_by: GroupBy::Host,
            tz_name: "UTC".into(),
            now_ms: None,
            stale_price_days: 180,
        }
    }

    #[test]
    fn dollars_are_hours_times_price() {
        let st = ProfileSettings::default();
        let mut b = ProfileBuilder::new(st.clone());
        let busy = b.device(DeviceKey::new("h1", "GPU-a"));
        b.info_mut(busy).model_name = Some("NVIDIA A100-SXM4-80GB".into());
        let idle = b.device(DeviceKey::new("h1", "GPU-b"));
        b.info_mut(idle).model_name = Some("Tesla T4".into());
        // 2 hours at 1-minute samples, from 2026-01-05 00:00 UTC.
        for m in 0..=120 {
            let t = 1_767_571_200_000 + m * 60_000;
            b.push(
                busy,
                &Sample {
                    util_pct: Some(90.0),
                    ..Sample::at(t)
                },
            )
            .expect("in order");
            b.push(
                idle,
                &Sample {
                    util_pct: Some(0.0),
                    mem_used_mib: Some(0.0),
                    ..Sample::at(t)
                },
            )
            .expect("in order");
        }
        let profiles = b.build().finish(&st, &jiff::tz::TimeZone::UTC);
        let r = build(
            &profiles,
            &PriceBook::new(
                gpuwise_catalog::Catalog::builtin(),
                crate::price::PriceContext::default(),
            ),
            &TeamMap::default(),
            &opts(),
            IngestSummary::default(),
        );
        assert_eq!(r.fleet.devices, 2);
        assert!((r.fleet.gpu_hours - 4.0).abs() < 1e-9);
        let expected = 2.0 * 3.43088125 + 2.0 * 0.526;
        assert!((r.fleet.cost_usd.unwrap_or(f64::NAN) - expected).abs() < 1e-9);
        assert!((r.fleet.idle_cost_usd.unwrap_or(f64::NAN) - 2.0 * 0.526).abs() < 1e-9);
        assert!((r.fleet.mean_utilization_pct.expect("util") - 45.0).abs() < 1e-9);
        assert_eq!(r.devices[0].id, "h1/GPU-b", "most wasteful first");
        assert_eq!(r.devices[0].class, Class::Idle);
        assert_eq!(r.devices[1].class, Class::Saturated);
    }

    #[test]
    fn a_mig_instance_of_an_unknown_gpu_has_no_invented_share() {
        let st = ProfileSettings::default();
        let mut b = ProfileBuilder::new(st.clone());
        let whole = b.device(DeviceKey::new("h1", "GPU-a"));
        let mut key = DeviceKey::new("h1", "GPU-b");
        key.mig = Some("3".into());
        let mig = b.device(key);
        let info = b.info_mut(mig);
        info.model_name = Some("NVIDIA Future GPU".into());
        info.mig_profile = Some("3g.40gb".into());
        for m in 0..=60 {
            let s = Sample {
                util_pct: Some(50.0),
                ..Sample::at(1_767_571_200_000 + m * 60_000)
            };
            b.push(whole, &s).expect("in order");
            b.push(mig, &s).expect("in order");
        }
        let profiles = b.build().finish(&st, &jiff::tz::TimeZone::UTC);
        // A rule that prices every device at $2/GPU-hour: the whole GPU is priced; the MIG
        // instance is not (its share of the GPU is unknown, so is its cost), never at 3/7.
        let prices = PriceBook::new(
            gpuwise_catalog::Catalog::builtin(),
            crate::price::PriceContext::default(),
        )
        .with_rules("[[rule]]\nhost = \"*\"\nusd_per_gpu_hour = 2.0\n", "p.toml")
        .expect("rules");
        let r = build(
            &profiles,
            &prices,
            &TeamMap::default(),
            &opts(),
            IngestSummary::default(),
        );
        let row = r
            .devices
            .iter()
            .find(|d| d.mig_instance.is_some())
            .expect("mig row");
        assert_eq!(row.gpu_share, None);
        assert_eq!(row.cost_usd, None);
        assert_eq!(r.fleet.devices, 2);
        assert!(
            (r.fleet.gpu_hours - 1.0).abs() < 1e-9,
            "{}",
            r.fleet.gpu_hours
        );
        assert!((r.fleet.cost_usd.unwrap_or(f64::NAN) - 2.0).abs() < 1e-9);
        assert!((r.fleet.gpu_hours_by_class.values().sum::<f64>() - 1.0).abs() < 1e-9);
        let w = r
            .warnings
            .iter()
            .find(|w| w.kind == "mig_share_unknown")
            .expect("warning");
        assert!(w.message.contains("h1/GPU-b/mig3"), "{}", w.message);
    }

    #[test]
    fn group_by_parses() {
        assert_eq!(
            GroupBy::parse("label:team"),
            Ok(GroupBy::Label("team".into()))
        );
        assert!(GroupBy::parse("label:").is_err());
        assert!(GroupBy::parse("planet").is_err());
    }
}
