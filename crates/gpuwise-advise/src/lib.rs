//! # Advice: ranked actions with dollar savings, evidence and confidence
//!
//! Reads the report (per-device figures and prices), the profiles (hour-of-week bins, hourly
//! timeline, idle episodes), the catalog, the planner and optional workload hints, and
//! proposes eight kinds of action. Each action stands alone (its own current, projected and
//! saved monthly dollars); the **combined plan** then picks, per device, at most one idle
//! action (shutdown, or schedule plus culling) and at most one placement action (rightsize,
//! consolidate, spot, another cloud or region, commitment) and prices them together:
//!
//! ```text
//! projected(device) = current × (1 − idle share removed) × (new $/h ÷ current $/h)
//! ```
//!
//! so no GPU-hour is saved twice and the plan's savings never exceed the current cost.
//! Monthly figures scale the observed window to 730 hours: `monthly = cost in window × 730 ÷
//! window hours` (the observed pattern is assumed to repeat).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use gpuwise_catalog::{Catalog, GpuSpec, PriceQuery, Pricing, Step};
use gpuwise_core::diagnose::{self, Class, IdleWindow};
use gpuwise_core::profile::{DeviceProfile, DeviceStats, HowBin, hour_of_week_index};
use gpuwise_core::report::{DeviceRow, Report};
use gpuwise_plan::{self as plan, Hardware, Model, Setup, Workload, perf};

/// JSON schema id of [`Advice`].
pub const SCHEMA: &str = "gpuwise.advice/v1";

/// Hours in a mean month (8,760 ÷ 12).
pub const MONTH_HOURS: f64 = 730.0;

/// Kinds of action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Release a device idle most of the time.
    ShutdownIdle,
    /// Turn a device off in its recurring idle hours.
    ScheduleOffHours,
    /// Cull idle sessions that hold memory.
    ReleaseHeldIdle,
    /// Move to a cheaper GPU that still fits.
    Rightsize,
    /// Pack low-utilization workloads onto fewer GPUs.
    Consolidate,
    /// Run interruptible work on spot capacity.
    UseSpot,
    /// Commit to the always-busy baseline.
    CommitBaseline,
    /// The same GPU for less elsewhere.
    MoveCheaper,
}

impl Kind {
    /// Snake-case name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ShutdownIdle => "shutdown_idle",
            Self::ScheduleOffHours => "schedule_off_hours",
            Self::ReleaseHeldIdle => "release_held_idle",
            Self::Rightsize => "rightsize",
            Self::Consolidate => "consolidate",
            Self::UseSpot => "use_spot",
            Self::CommitBaseline => "commit_baseline",
            Self::MoveCheaper => "move_cheaper",
        }
    }
}

/// How sure an action is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Rests on measured facts over a long enough window.
    High,
    /// Rests on measurements plus a stated assumption.
    Medium,
    /// Rests on a short window or a guess about the workload.
    Low,
}

/// Confidence and its reason.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Confidence {
    /// Level.
    pub level: Level,
    /// Why.
    pub reason: String,
}

/// One action.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Action {
    /// Kind.
    pub kind: Kind,
    /// Device ids.
    pub targets: Vec<String>,
    /// The targets' display names (the report's `name`), in the same order.
    pub target_names: Vec<String>,
    /// What the targets cost per month now (the part the action touches).
    pub current_monthly_usd: f64,
    /// What they would cost with this action alone.
    pub projected_monthly_usd: f64,
    /// `current − projected`, never negative.
    pub monthly_savings_usd: f64,
    /// How sure.
    pub confidence: Confidence,
    /// Measured numbers it rests on.
    pub evidence: Vec<String>,
    /// What it assumes.
    pub assumptions: Vec<String>,
    /// Concrete steps.
    pub how: Vec<String>,
    /// Target GPU (rightsize) or where to move (move_cheaper, use_spot).
    pub target: Option<String>,
    /// Off-hours schedule (schedule_off_hours).
    pub schedule: Vec<IdleWindow>,
    /// Part of the combined plan.
    pub in_plan: bool,
    /// What it saves inside the combined plan (after the actions it shares hours with).
    pub plan_savings_usd: f64,
}

/// One device in the combined plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DevicePlan {
    /// Device id.
    pub id: String,
    /// Display name (the report's `name`).
    pub name: String,
    /// Monthly cost now.
    pub current_monthly_usd: f64,
    /// Monthly cost under the plan.
    pub projected_monthly_usd: f64,
    /// Indices (into `actions`) of the plan's actions on this device.
    pub actions: Vec<usize>,
}

/// The advice.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Advice {
    /// Always [`SCHEMA`].
    pub schema: &'static str,
    /// Hours of the observed window.
    pub window_hours: f64,
    /// Hours a month is taken to have.
    pub month_hours: f64,
    /// Monthly cost of the priced devices now.
    pub current_monthly_usd: f64,
    /// Monthly cost under the combined plan.
    pub projected_monthly_usd: f64,
    /// `current − projected` of the combined plan.
    pub total_monthly_savings_usd: f64,
    /// Actions, largest saving first.
    pub actions: Vec<Action>,
    /// Per device.
    pub devices: Vec<DevicePlan>,
    /// Devices without a price (no dollars, no action).
    pub unpriced: Vec<String>,
    /// Why there is less advice than there could be (a window too short, …).
    pub notes: Vec<String>,
    /// Settings used.
    pub settings: AdviseSettings,
}

/// The shortest window advice is given for: a month extrapolated from less says nothing.
pub const MIN_WINDOW_HOURS: f64 = 24.0;

/// Knobs, each documented in docs/advise.md.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdviseSettings {
    /// Memory headroom over the observed peak a target GPU must have.
    pub headroom: f64,
    /// Projected utilization must stay under this (the top of the healthy band).
    pub ceiling_pct: f64,
    /// Cloud the fleet runs in (prices, same-cloud preference).
    pub cloud: Option<String>,
    /// Region.
    pub region: Option<String>,
    /// Pricing model now.
    pub pricing: Pricing,
    /// Other clouds actions may move work to.
    pub allow_clouds: Vec<String>,
    /// Idle time after which a session holding memory is culled, hours.
    pub idle_timeout_h: f64,
    /// Time to write one checkpoint, hours.
    pub checkpoint_cost_h: f64,
    /// Mean time between spot interruptions, hours.
    pub spot_mtbi_h: f64,
    /// Shortest off-hours schedule worth proposing, hours per week.
    pub min_schedule_hours_per_week: f64,
    /// Devices whose p95 utilization is below this may share a GPU.
    pub consolidate_below_pct: f64,
    /// A move to another GPU, cloud, region or pricing must cut the GPU-hour price by at least
    /// this share: smaller differences are within the noise of list prices and of the
    /// utilization estimate behind the move (a judgement, not a measurement).
    pub min_price_cut: f64,
    /// When a device without hints is taken as interruptible (spot advice).
    pub spot_steady: SpotSteadiness,
}

/// The load a device must show, without workload hints, to be proposed for spot capacity:
/// steady and training-like (a judgement of what survives interruptions with checkpoints;
/// `--workloads` with `interruptible = true|false` overrides it per device).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SpotSteadiness {
    /// Median utilization at least this (the device works most of the time) …
    pub min_p50_pct: f64,
    /// … p95 at most this far above the median (no bursty, latency-bound pattern) …
    pub max_p95_above_p50_pct: f64,
    /// … idle less than this share of the time …
    pub max_idle_share: f64,
    /// … and observed at least this share of the window.
    pub min_coverage_pct: f64,
}

impl Default for SpotSteadiness {
    fn default() -> Self {
        Self {
            min_p50_pct: 60.0,
            max_p95_above_p50_pct: 15.0,
            max_idle_share: 0.05,
            min_coverage_pct: 90.0,
        }
    }
}

impl Default for AdviseSettings {
    fn default() -> Self {
        Self {
            headroom: 1.2,
            ceiling_pct: 85.0,
            cloud: None,
            region: None,
            pricing: Pricing::OnDemand,
            allow_clouds: Vec::new(),
            idle_timeout_h: 0.5,
            checkpoint_cost_h: 5.0 / 60.0,
            spot_mtbi_h: 12.0,
            min_schedule_hours_per_week: 4.0,
            consolidate_below_pct: 50.0,
            min_price_cut: 0.05,
            spot_steady: SpotSteadiness::default(),
        }
    }
}

/// What a workload is (the report's diagnosis words its hints by it too).
pub use gpuwise_core::WorkloadKind as WorkKind;

/// One hint rule.
#[derive(Clone, Debug)]
pub struct Hint {
    /// Glob on device id or host.
    pub pattern: Option<glob::Pattern>,
    /// `label=value` that must hold.
    pub label: Option<(String, String)>,
    /// Kind of work.
    pub kind: Option<WorkKind>,
    /// Can be interrupted (spot).
    pub interruptible: Option<bool>,
    /// Latency target, ms.
    pub latency_ms: Option<f64>,
    /// Model, for the planner.
    pub model: Option<Model>,
    /// Planner workload keys.
    pub workload: Workload,
}

/// A workload hints file gpuwise cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HintsError {
    /// Not TOML, or not `[[workload]]` tables.
    #[error("{origin}: {message}")]
    File {
        /// The file.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// One `[[workload]]` rule (the message names the file and the rule's number).
    #[error("{0}")]
    Rule(String),
}

/// Workload hints (`--workloads FILE`): the first rule that matches a device applies.
#[derive(Clone, Debug, Default)]
pub struct Hints {
    /// Rules in file order.
    pub rules: Vec<Hint>,
}

impl Hints {
    /// Parse a hints file: `[[workload]]` tables with `match`, `label`, `kind`,
    /// `interruptible`, `latency_ms`, `model` and planner workload keys.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, HintsError> {
        let file = |message: String| HintsError::File {
            origin: origin.to_owned(),
            message,
        };
        let doc: toml::Table =
            toml::from_str(text).map_err(|e| file(gpuwise_catalog::toml_message(&e, text)))?;
        let mut rules = Vec::new();
        for (k, v) in &doc {
            if k != "workload" {
                return Err(file(format!("unknown table `{k}` (expected [[workload]])")));
            }
            let arr = v.as_array().ok_or_else(|| {
                file("`workload` must be an array of tables ([[workload]])".to_owned())
            })?;
            for (i, entry) in arr.iter().enumerate() {
                let at = format!("{origin}: workload #{}", i + 1);
                let t = entry
                    .as_table()
                    .ok_or_else(|| HintsError::Rule(format!("{at}: not a table")))?;
                rules.push(Self::rule(t, &at).map_err(HintsError::Rule)?);
            }
        }
        Ok(Self { rules })
    }

    fn rule(t: &toml::Table, at: &str) -> Result<Hint, String> {
        let mut h = Hint {
            pattern: None,
            label: None,
            kind: None,
            interruptible: None,
            latency_ms: None,
            model: None,
            workload: Workload::default(),
        };
        for (key, value) in t {
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(x) => x.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                _ => return Err(format!("{at}: `{key}` must be a string, number or boolean")),
            };
            match key.as_str() {
                "match" => {
                    h.pattern = Some(
                        glob::Pattern::new(&text)
                            .map_err(|e| format!("{at}: match `{text}`: {e}"))?,
                    );
                }
                "label" => {
                    let (k, v) = text
                        .split_once('=')
                        .ok_or_else(|| format!("{at}: label `{text}` is not NAME=VALUE"))?;
                    h.label = Some((k.trim().to_owned(), v.trim().to_owned()));
                }
                "kind" => {
                    h.kind = Some(match text.as_str() {
                        "training" => WorkKind::Training,
                        "inference" => WorkKind::Inference,
                        "notebook" => WorkKind::Notebook,
                        "batch" => WorkKind::Batch,
                        o => {
                            return Err(format!(
                                "{at}: kind `{o}` is not one of training, inference, notebook, batch"
                            ));
                        }
                    });
                }
                "interruptible" => {
                    h.interruptible = Some(
                        value
                            .as_bool()
                            .ok_or_else(|| format!("{at}: interruptible must be true or false"))?,
                    );
                }
                "latency_ms" => {
                    h.latency_ms = Some(text.parse::<f64>().ok().filter(|x| *x > 0.0).ok_or_else(
                        || format!("{at}: latency_ms `{text}` is not a positive number"),
                    )?);
                }
                "model" => {
                    h.model = Some(Model::preset(&text).map_err(|e| format!("{at}: {e}"))?);
                }
                other => {
                    let used = h
                        .workload
                        .set(other, &text)
                        .map_err(|e| format!("{at}: {e}"))?;
                    if !used {
                        return Err(format!("{at}: unknown key `{other}`"));
                    }
                }
            }
        }
        if h.pattern.is_none() && h.label.is_none() {
            return Err(format!(
                "{at}: needs `match` (device or host glob) or `label`"
            ));
        }
        if h.workload.mode == plan::Mode::Infer && h.kind == Some(WorkKind::Training) {
            h.workload.mode = plan::Mode::Train;
        }
        Ok(h)
    }

    /// The first rule that matches a device (by id or host glob, or label), if any.
    #[must_use]
    pub fn find(&self, p: &DeviceProfile) -> Option<&Hint> {
        let id = p.key.to_string();
        self.rules.iter().find(|h| {
            h.pattern
                .as_ref()
                .is_none_or(|g| g.matches(&id) || g.matches(&p.key.host))
                && h.label
                    .as_ref()
                    .is_none_or(|(k, v)| p.info.label(k) == Some(v.as_str()))
        })
    }
}

struct Dev<'a> {
    row: &'a DeviceRow,
    stats: &'a DeviceStats,
    spec: Option<&'a GpuSpec>,
    /// $/GPU-hour of the device's GPU (not multiplied by its share).
    usd_per_gpu_hour: f64,
    /// Share of a physical GPU (MIG instance: slices / parent slices).
    share: f64,
    /// Monthly cost now.
    monthly: f64,
    hint: Option<&'a Hint>,
}

impl Dev<'_> {
    fn observed(&self) -> f64 {
        self.stats.observed_hours.max(1e-9)
    }
    fn idle_share(&self) -> f64 {
        (self.stats.idle_hours / self.observed()).clamp(0.0, 1.0)
    }
}

fn gib(mib: f64) -> String {
    format!("{:.1} GiB", mib / 1024.0)
}

fn spec_mib(g: &GpuSpec) -> f64 {
    g.memory_gb * 1e9 / gpuwise_core::MIB_BYTES
}

fn half_tflops(g: &GpuSpec) -> Option<f64> {
    g.dense_tflops.bf16.or(g.dense_tflops.fp16)
}

/// Whether `g`'s figures can show that a load fits it: 16-bit TFLOPS and memory bandwidth, both
/// its own datasheet's. A bound (the A10G runs on the A10's tensor figures, an upper bound)
/// would project too low a utilization, so such a GPU is never a right-sizing target.
fn can_size_a_move_to(g: &GpuSpec) -> bool {
    half_tflops(g).is_some() && g.memory_bandwidth_gb_s.is_some() && g.compute_note.is_none()
}

fn window_confidence(hours: f64, what: &str) -> Confidence {
    if hours >= 14.0 * 24.0 {
        Confidence {
            level: Level::High,
            reason: format!("{what} over {:.0} days of data", hours / 24.0),
        }
    } else if hours >= 7.0 * 24.0 {
        Confidence {
            level: Level::Medium,
            reason: format!("{what} over one week of data; two or more weeks make it firm"),
        }
    } else {
        Confidence {
            level: Level::Low,
            reason: format!("only {:.1} days of data", hours / 24.0),
        }
    }
}

/// Build the advice: the priced devices, each one's actions (idle, then placement), the
/// actions over groups of devices (consolidation, commitments), the combined plan, and the
/// actions ranked by savings.
#[must_use]
pub fn advise(
    report: &Report,
    profiles: &[DeviceProfile],
    catalog: &Catalog,
    hints: &Hints,
    st: &AdviseSettings,
    tz: &jiff::tz::TimeZone,
) -> Advice {
    let window_hours = window_hours(profiles);
    let scale = MONTH_HOURS / window_hours;
    let (mut devs, unpriced) = priced_devices(report, profiles, catalog, hints, scale);
    let mut notes = Vec::new();
    if window_hours < MIN_WINDOW_HOURS {
        notes.push(format!(
            "the data covers {:.1} hours; advice needs at least {MIN_WINDOW_HOURS:.0} (a day) to say anything about a month",
            window_hours
        ));
        devs.clear();
    }
    let ctx = Context {
        report,
        catalog,
        st,
        tz,
        window_hours,
        scale,
    };
    let mut p = Proposals::default();
    for (di, d) in devs.iter().enumerate() {
        p.for_device(di, d, &ctx);
    }
    p.consolidations(&devs, st);
    p.commitments(&devs, &ctx);
    if !p.no_spot_price.is_empty() {
        notes.push(format!(
            "no spot action for {}: their load suits spot, but the catalog has no spot price for them{}",
            p.no_spot_price.iter().cloned().collect::<Vec<_>>().join(", "),
            st.cloud
                .as_deref()
                .map(|c| format!(" on {c}"))
                .unwrap_or_default()
        ));
    }
    let (plans, per_action) = p.combined_plan(&devs);
    let mut actions = p.actions;
    for (i, a) in actions.iter_mut().enumerate() {
        a.plan_savings_usd = per_action[i];
        a.in_plan = per_action[i] > 0.0;
    }
    let (actions, plans) = ranked(report, actions, plans);
    let current: f64 = plans.iter().map(|p| p.current_monthly_usd).sum();
    let projected: f64 = plans.iter().map(|p| p.projected_monthly_usd).sum();
    Advice {
        schema: SCHEMA,
        window_hours,
        month_hours: MONTH_HOURS,
        current_monthly_usd: current,
        projected_monthly_usd: projected,
        total_monthly_savings_usd: current - projected,
        actions,
        devices: plans,
        unpriced,
        notes,
        settings: st.clone(),
    }
}

/// Hours from the first sample of any device to the last of any.
fn window_hours(profiles: &[DeviceProfile]) -> f64 {
    let first = profiles
        .iter()
        .map(|p| p.stats.first_ts_ms)
        .min()
        .unwrap_or(0);
    let last = profiles
        .iter()
        .map(|p| p.stats.last_ts_ms)
        .max()
        .unwrap_or(0);
    (gpuwise_core::hours_of_ms((last - first) as f64)).max(1e-9)
}

/// The devices advice can price (with their monthly cost), and the ids of those it cannot.
fn priced_devices<'a>(
    report: &'a Report,
    profiles: &'a [DeviceProfile],
    catalog: &'a Catalog,
    hints: &'a Hints,
    scale: f64,
) -> (Vec<Dev<'a>>, Vec<String>) {
    let by_id: BTreeMap<String, &DeviceProfile> =
        profiles.iter().map(|p| (p.key.to_string(), p)).collect();
    let mut unpriced = Vec::new();
    let mut devs = Vec::new();
    for row in &report.devices {
        let Some(p) = by_id.get(&row.id) else {
            continue;
        };
        // A priced device has a known share (an unknown share leaves it unpriced).
        let (Some(price), Some(cost), Some(share)) =
            (row.usd_per_gpu_hour, row.cost_usd, row.gpu_share)
        else {
            unpriced.push(row.id.clone());
            continue;
        };
        devs.push(Dev {
            row,
            stats: &p.stats,
            spec: row.model.as_deref().and_then(|m| catalog.resolve(m)),
            usd_per_gpu_hour: price,
            share,
            monthly: cost * scale,
            hint: hints.find(p),
        });
    }
    (devs, unpriced)
}

/// What every action needs besides its device.
struct Context<'a> {
    report: &'a Report,
    catalog: &'a Catalog,
    st: &'a AdviseSettings,
    tz: &'a jiff::tz::TimeZone,
    window_hours: f64,
    /// Months per observed window: monthly = window × scale.
    scale: f64,
}

/// The actions proposed so far and, per device (by index), what each would do to it.
#[derive(Default)]
struct Proposals {
    actions: Vec<Action>,
    /// Per device: (action index, share of its cost the idle action removes).
    idle_of: BTreeMap<usize, Vec<(usize, f64)>>,
    /// Per device: (action index, price multiplier of the placement).
    place_of: BTreeMap<usize, Vec<(usize, f64)>>,
    /// Per device: the hour-of-week bins of its off-hours schedule.
    scheduled: BTreeMap<usize, BTreeSet<usize>>,
    /// Commitments: (action index, the devices of the model it covers).
    commits: Vec<(usize, Vec<usize>)>,
    /// GPU models with devices fit for spot that the catalog has no spot price for (here):
    /// said in the notes, not left as silence.
    no_spot_price: BTreeSet<String>,
}

impl Proposals {
    fn idle(&mut self, di: usize, share: f64, a: Action) {
        self.idle_of
            .entry(di)
            .or_default()
            .push((self.actions.len(), share));
        self.actions.push(a);
    }

    fn placement(&mut self, di: usize, a: Action) {
        let m = a.projected_monthly_usd / a.current_monthly_usd.max(1e-9);
        self.place_of
            .entry(di)
            .or_default()
            .push((self.actions.len(), m));
        self.actions.push(a);
    }

    /// A device's own actions: idle ones first (shutdown, or a schedule and culling), then,
    /// for a device that works, placements (rightsize, spot, a cheaper place). A saturated
    /// device needs capacity: nothing that could cost it throughput (a smaller or shared GPU,
    /// spot interruptions) or lock its shape in (a commitment) is proposed.
    fn for_device(&mut self, di: usize, d: &Dev<'_>, c: &Context<'_>) {
        let r = d.row;
        if r.class == Class::Saturated {
            return;
        }
        if r.class == Class::Idle {
            if let Some(a) = shutdown_idle(d, c) {
                self.idle(di, d.idle_share(), a);
            }
            return;
        }
        if let Some((a, share, bins)) = schedule_off_hours(d, c) {
            self.scheduled.insert(di, bins);
            self.idle(di, share, a);
        }
        if let Some((a, share)) = release_held_idle(d, self.scheduled.get(&di), c) {
            self.idle(di, share, a);
        }
        if matches!(r.class, Class::HeldIdle | Class::Unknown) {
            return;
        }
        if matches!(r.class, Class::Underutilized | Class::Healthy)
            && let Some(a) = rightsize(d, c.catalog, c.st)
        {
            self.placement(di, a);
        }
        if let Some(a) = use_spot(d, c.catalog, c.st, &mut self.no_spot_price) {
            self.placement(di, a);
        }
        if let Some(a) = move_cheaper(d, c.catalog, c.st) {
            self.placement(di, a);
        }
    }

    /// Consolidation, per GPU model, of lightly used whole GPUs: each member is placed on the
    /// shared GPUs (multiplier 1) or freed (multiplier 0).
    fn consolidations(&mut self, devs: &[Dev<'_>], st: &AdviseSettings) {
        let mut groups: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (di, d) in devs.iter().enumerate() {
            if let Some(spec) = d.spec
                && d.row.mig_instance.is_none()
                && matches!(d.row.class, Class::Underutilized | Class::Healthy)
                && d.row
                    .p95_utilization_pct
                    .is_some_and(|p| p < st.consolidate_below_pct)
                && d.row.peak_memory_used_mib.is_some()
            {
                groups.entry(spec.name.as_str()).or_default().push(di);
            }
        }
        for (_, members) in groups {
            if members.len() < 2 {
                continue;
            }
            if let Some((a, freed)) = consolidate(devs, &members, st) {
                let idx = self.actions.len();
                for &di in &members {
                    let m = if freed.contains(&di) { 0.0 } else { 1.0 };
                    self.place_of.entry(di).or_default().push((idx, m));
                }
                self.actions.push(a);
            }
        }
    }

    /// A commitment per GPU model over its devices that are not saturated.
    fn commitments(&mut self, devs: &[Dev<'_>], c: &Context<'_>) {
        let mut by_model: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (di, d) in devs.iter().enumerate() {
            if let Some(spec) = d.spec
                && d.row.class != Class::Saturated
            {
                by_model.entry(spec.name.as_str()).or_default().push(di);
            }
        }
        for (name, members) in by_model {
            if let Some(a) = commit_baseline(devs, name, &members, c.catalog, c.st, c.window_hours)
            {
                self.commits.push((self.actions.len(), members));
                self.actions.push(a);
            }
        }
    }

    /// Consolidations whose members' best individual placements save more: vetoed, since a
    /// consolidation is chosen for a whole group or not at all.
    fn consolidation_vetoes(&self, devs: &[Dev<'_>]) -> BTreeSet<usize> {
        let mut rejected = BTreeSet::new();
        for (i, a) in self.actions.iter().enumerate() {
            if a.kind != Kind::Consolidate {
                continue;
            }
            let mut alone = 0.0;
            for (di, d) in devs.iter().enumerate() {
                if a.targets.contains(&d.row.id) {
                    let best = self
                        .place_of
                        .get(&di)
                        .into_iter()
                        .flatten()
                        .filter(|(j, _)| *j != i)
                        .map(|(_, m)| d.monthly * (1.0 - m))
                        .fold(0.0, f64::max);
                    alone += best;
                }
            }
            if alone >= a.monthly_savings_usd {
                rejected.insert(i);
            }
        }
        rejected
    }

    /// The combined plan: per device at most one idle action (shutdown alone, or the schedule
    /// and culling together) and one placement (the group's consolidation unless vetoed, else
    /// the cheapest), priced together as current × (1 − idle share) × multiplier; then each
    /// commitment covers what its model's unplaced devices still cost. Returns the per-device
    /// plans and what each action saves in the plan.
    fn combined_plan(&self, devs: &[Dev<'_>]) -> (Vec<DevicePlan>, Vec<f64>) {
        let actions = &self.actions;
        let rejected = self.consolidation_vetoes(devs);
        let mut plans = Vec::new();
        let mut per_action = vec![0.0f64; actions.len()];
        let mut placed: BTreeSet<usize> = BTreeSet::new();
        for (di, d) in devs.iter().enumerate() {
            let idle_pick: Vec<(usize, f64)> = match self.idle_of.get(&di) {
                Some(list) => {
                    if let Some(s) = list
                        .iter()
                        .find(|(i, _)| actions[*i].kind == Kind::ShutdownIdle)
                    {
                        vec![*s]
                    } else {
                        list.clone()
                    }
                }
                None => Vec::new(),
            };
            let f: f64 = idle_pick.iter().map(|(_, s)| s).sum::<f64>().min(1.0);
            let placements = || self.place_of.get(&di).into_iter().flatten();
            let consolidated = placements()
                .find(|(i, _)| actions[*i].kind == Kind::Consolidate && !rejected.contains(i))
                .copied();
            let best = consolidated.or_else(|| {
                placements()
                    .filter(|(i, _)| actions[*i].kind != Kind::Consolidate)
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .copied()
            });
            let m = best.map_or(1.0, |(_, m)| m.clamp(0.0, 1.0));
            let projected = d.monthly * (1.0 - f) * m;
            let mut used = Vec::new();
            for (i, s) in &idle_pick {
                per_action[*i] += d.monthly * s.min(f);
                used.push(*i);
            }
            if let Some((i, _)) = best {
                per_action[i] += d.monthly * (1.0 - f) * (1.0 - m);
                if !used.contains(&i) {
                    used.push(i);
                }
                placed.insert(di);
            }
            plans.push(DevicePlan {
                name: String::new(),
                id: d.row.id.clone(),
                current_monthly_usd: d.monthly,
                projected_monthly_usd: projected,
                actions: used,
            });
        }
        // A commitment covers what is left of a model's devices that got no placement action.
        for (i, members) in &self.commits {
            let free: Vec<usize> = members
                .iter()
                .copied()
                .filter(|di| !placed.contains(di))
                .collect();
            let left: f64 = free.iter().map(|&di| plans[di].projected_monthly_usd).sum();
            if free.is_empty() || left <= 0.0 {
                continue;
            }
            let s = actions[*i].monthly_savings_usd.min(left);
            for &di in &free {
                let cut = s * plans[di].projected_monthly_usd / left;
                plans[di].projected_monthly_usd -= cut;
                plans[di].actions.push(*i);
            }
            per_action[*i] += s;
        }
        (plans, per_action)
    }
}

/// Actions ranked by savings (then kind, then targets), with device names; the plans' action
/// references renumbered to match.
fn ranked(
    report: &Report,
    actions: Vec<Action>,
    mut plans: Vec<DevicePlan>,
) -> (Vec<Action>, Vec<DevicePlan>) {
    let mut order: Vec<usize> = (0..actions.len()).collect();
    order.sort_by(|&a, &b| {
        actions[b]
            .monthly_savings_usd
            .total_cmp(&actions[a].monthly_savings_usd)
            .then_with(|| actions[a].kind.cmp(&actions[b].kind))
            .then_with(|| actions[a].targets.cmp(&actions[b].targets))
    });
    let mut new_index = vec![0; actions.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old] = new;
    }
    let names: BTreeMap<&str, &str> = report
        .devices
        .iter()
        .map(|d| (d.id.as_str(), d.name.as_str()))
        .collect();
    let name_of = |id: &String| {
        names
            .get(id.as_str())
            .map_or_else(|| id.clone(), |n| (*n).to_owned())
    };
    let ranked: Vec<Action> = order
        .iter()
        .map(|&i| {
            let mut a = actions[i].clone();
            a.target_names = a.targets.iter().map(name_of).collect();
            a
        })
        .collect();
    for p in &mut plans {
        p.name = name_of(&p.id);
        for i in &mut p.actions {
            *i = new_index[*i];
        }
        p.actions.sort_unstable();
    }
    (ranked, plans)
}

/// Release an idle device: it saves its idle share of the month.
fn shutdown_idle(d: &Dev<'_>, c: &Context<'_>) -> Option<Action> {
    let r = d.row;
    let idle = d.idle_share();
    let saved = d.monthly * idle;
    (saved > 0.0).then(|| Action {
        kind: Kind::ShutdownIdle,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly - saved,
        monthly_savings_usd: saved,
        confidence: window_confidence(c.window_hours, "idle measured"),
        evidence: vec![format!(
            "idle {:.1} % of {:.0} observed hours ({:.0} h in episodes of ≥ {} min below {} %); {}",
            idle * 100.0,
            d.stats.observed_hours,
            d.stats.idle_hours,
            c.report.settings.min_idle_episode_min,
            c.report.settings.idle_threshold_pct,
            r.class_reason
        )],
        assumptions: vec!["the remaining busy hours are bought on demand when needed".to_owned()],
        how: vec![format!(
            "release {} (stop the instance or scale its node pool to zero); start capacity on demand for the {:.0} busy hours a month",
            r.name,
            (1.0 - d.idle_share()) * d.stats.observed_hours * c.scale
        )],
        target: None,
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    })
}

/// Stop a device in the hours of the week in which it did no work at all: the action, the
/// share of its cost it removes, and the hour-of-week bins of the schedule.
fn schedule_off_hours(d: &Dev<'_>, c: &Context<'_>) -> Option<(Action, f64, BTreeSet<usize>)> {
    let r = d.row;
    let strict: Vec<HowBin> = d
        .stats
        .hour_of_week()
        .iter()
        .map(|b| HowBin {
            idle_hours: if b.covered_hours > 0.0 && b.idle_hours + 1e-6 >= b.covered_hours {
                b.covered_hours
            } else {
                0.0
            },
            ..*b
        })
        .collect();
    let (windows, _) = diagnose::idle_windows(&strict, 100.0);
    let bins = window_bins(&windows);
    let per_week = bins.len() as f64;
    if per_week < c.st.min_schedule_hours_per_week {
        return None;
    }
    let coverage = (d.stats.observed_hours / c.window_hours).min(1.0);
    let saved_h = per_week * MONTH_HOURS / 168.0 * coverage;
    let saved = d.usd_per_gpu_hour * d.share * saved_h;
    let share = (saved / d.monthly.max(1e-9)).min(d.idle_share());
    let tz_name = &c.report.window.timezone;
    let a = Action {
        kind: Kind::ScheduleOffHours,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly * (1.0 - share),
        monthly_savings_usd: d.monthly * share,
        confidence: window_confidence(c.window_hours, "the weekly pattern held"),
        evidence: vec![format!(
            "{} ({per_week:.0} h a week in which the device did no work at all in the data); mean utilization {}",
            diagnose::describe(&windows).unwrap_or_default(),
            r.mean_utilization_pct
                .map_or_else(|| "–".to_owned(), |u| format!("{u:.1} %"))
        )],
        assumptions: vec![
            format!("the week repeats; hours in {tz_name} time"),
            "the instance is not billed while stopped".to_owned(),
        ],
        how: schedule_steps(&windows, &r.name, tz_name),
        target: None,
        schedule: windows,
        in_plan: false,
        plan_savings_usd: 0.0,
    };
    Some((a, share, bins))
}

/// Cull sessions that hold memory while idle, after the idle timeout: the action (priced on
/// its own) and the share of the device's cost it removes beside the off-hours schedule
/// `sched` (hours inside the schedule are not counted twice).
fn release_held_idle(
    d: &Dev<'_>,
    sched: Option<&BTreeSet<usize>>,
    c: &Context<'_>,
) -> Option<(Action, f64)> {
    let (r, st) = (d.row, c.st);
    if d.stats.held_idle_hours <= 0.0 {
        return None;
    }
    let (mut alone_h, mut saved_h) = (0.0, 0.0);
    let mut episodes = 0;
    for e in &d.stats.idle_episodes {
        if e.held_ms == 0 {
            continue;
        }
        let held_frac = e.held_ms as f64 / e.dur_ms.max(1) as f64;
        let all = outside_hours(e.start_ms, e.dur_ms, None, c.tz);
        let h_alone = (all * held_frac - st.idle_timeout_h).max(0.0);
        if h_alone > 0.0 {
            alone_h += h_alone;
            episodes += 1;
        }
        let outside = outside_hours(e.start_ms, e.dur_ms, sched, c.tz);
        saved_h += (outside * held_frac - st.idle_timeout_h).max(0.0);
    }
    let idle = d.idle_share();
    let share = (saved_h / d.observed()).min(idle);
    let alone_share = (alone_h / d.observed()).min(idle);
    let saved = d.monthly * alone_share;
    if saved <= 0.0 {
        return None;
    }
    let a = Action {
        kind: Kind::ReleaseHeldIdle,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly - saved,
        monthly_savings_usd: saved,
        confidence: window_confidence(c.window_hours, "held-idle time measured"),
        evidence: vec![format!(
            "{:.0} h idle while holding {} (peak {}) over {:.0} observed hours; {episodes} held-idle episodes longer than the {:.0}-minute timeout{}",
            d.stats.held_idle_hours,
            d.stats
                .mem_used_mean_mib
                .map_or_else(|| "memory".to_owned(), |m| format!("{} on average", gib(m))),
            d.stats
                .mem_used_peak_mib
                .map_or_else(|| "–".to_owned(), gib),
            d.stats.observed_hours,
            st.idle_timeout_h * 60.0,
            if sched.is_some() {
                " (in the combined plan, hours inside the off-hours schedule are not counted again)"
            } else {
                ""
            }
        )],
        assumptions: vec![
            "a culled session's GPU is released (autoscaled pool) until the next session"
                .to_owned(),
        ],
        how: vec![
            format!(
                "cull idle kernels after {:.0} minutes: JupyterHub `c.MappingKernelManager.cull_idle_timeout = {:.0}` with `cull_connected = True`, or Kubeflow notebooks `CULL_IDLE_TIME={:.0}`",
                st.idle_timeout_h * 60.0,
                st.idle_timeout_h * 3600.0,
                st.idle_timeout_h * 60.0
            ),
            format!(
                "let {}'s node pool scale to zero when no session holds the GPU",
                r.name
            ),
        ],
        target: None,
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    };
    Some((a, share))
}

/// Hour-of-week bins (0 = Monday 00:00) covered by windows.
fn window_bins(windows: &[IdleWindow]) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    for w in windows {
        let days: Vec<usize> = match w.days.as_str() {
            "weekdays" => (0..5).collect(),
            "weekend" => (5..7).collect(),
            _ => (0..7).collect(),
        };
        let len = if w.start_hour == w.end_hour {
            24
        } else {
            (usize::from(w.end_hour) + 24 - usize::from(w.start_hour)) % 24
        };
        // Windows are per-day hour sets (`19:00–08:00 on weekdays` is 00–08 and 19–24 of
        // each weekday), as `diagnose::idle_windows` builds them.
        for d in days {
            for k in 0..len {
                let h = (usize::from(w.start_hour) + k) % 24;
                out.insert(d * 24 + h);
            }
        }
    }
    out
}

/// Hours of `[start, start + dur)` outside the `sched` hour-of-week bins.
fn outside_hours(
    start: i64,
    dur: u64,
    sched: Option<&BTreeSet<usize>>,
    tz: &jiff::tz::TimeZone,
) -> f64 {
    let total = gpuwise_core::hours_of_ms(dur as f64);
    let Some(sched) = sched else { return total };
    let end = start + i64::try_from(dur).unwrap_or(i64::MAX);
    let mut t = start;
    let mut inside = 0i64;
    while t < end {
        let next = ((t.div_euclid(gpuwise_core::HOUR_MS)) + 1) * gpuwise_core::HOUR_MS;
        let seg = next.min(end) - t;
        if hour_of_week_index(t, tz).is_some_and(|b| sched.contains(&b)) {
            inside += seg;
        }
        t = next;
    }
    total - gpuwise_core::hours_of_ms(inside as f64)
}

fn schedule_steps(windows: &[IdleWindow], id: &str, tz: &str) -> Vec<String> {
    let mut out = Vec::new();
    for w in windows {
        let days = match w.days.as_str() {
            "weekdays" => "1-5",
            "weekend" => "6,0",
            _ => "*",
        };
        if w.start_hour == w.end_hour {
            out.push(format!(
                "keep {id} stopped all day on {} ({tz})",
                if w.days == "weekend" {
                    "Saturday and Sunday"
                } else {
                    &w.days
                }
            ));
        } else {
            out.push(format!(
                "stop {id} at {:02}:00 and start it at {:02}:00 on {} ({tz}); cron `0 {} * * {days}` stop, `0 {} * * {days}` start",
                w.start_hour, w.end_hour, w.days, w.start_hour, w.end_hour
            ));
        }
    }
    out
}

/// The observed demand of a device: peak memory, p95 compute, mean DRAM activity.
fn rightsize(d: &Dev<'_>, catalog: &Catalog, st: &AdviseSettings) -> Option<Action> {
    let r = d.row;
    let spec = d.spec?;
    let peak = r.peak_memory_used_mib?;
    // Both GPUs need the figures the scaling uses, even when the planner sizes the model.
    r.p95_utilization_pct?;
    half_tflops(spec)?;
    spec.memory_bandwidth_gb_s?;
    let dram = r.dram_active_pct.or(r.memory_bandwidth_utilization_pct);
    let need_mib = peak * st.headroom;
    let planner = d.hint.and_then(|h| h.model.as_ref().map(|m| (h, m)));
    // The hinted model on the current GPU, once.
    let current = planner.and_then(|(h, m)| planned(m, &h.workload, spec));
    let mut best: Option<(f64, &GpuSpec, gpuwise_catalog::Quote, Vec<String>, bool)> = None;
    for g in &catalog.gpus {
        // Same vendor only: a move across software stacks (CUDA → ROCm) is a port, not a
        // resize.
        if g.name == spec.name
            || g.vendor != spec.vendor
            || spec_mib(g) < need_mib
            || spec_mib(g) < peak
        {
            continue;
        }
        if !can_size_a_move_to(g) {
            continue;
        }
        let Some((projected, mut ev)) = projected_use(d, g, planner, current.as_ref(), dram) else {
            continue;
        };
        if projected > st.ceiling_pct {
            continue;
        }
        let Some(q) = quote(catalog, &g.name, st, st.pricing) else {
            continue;
        };
        if q.usd_per_gpu_hour >= d.usd_per_gpu_hour * (1.0 - st.min_price_cut) {
            continue;
        }
        ev.insert(
            0,
            format!(
                "memory: peak {} × {} headroom = {} ≤ {} {}",
                gib(peak),
                st.headroom,
                gib(need_mib),
                g.name,
                gib(spec_mib(g))
            ),
        );
        ev.push(format!(
            "projected utilization {projected:.0} % ≤ {} % ceiling",
            st.ceiling_pct
        ));
        // Same cloud first: a candidate there beats any elsewhere.
        let home = st.cloud.as_ref().is_none_or(|c| &q.cloud == c);
        let better = best
            .as_ref()
            .is_none_or(|b| (home && !b.4) || (home == b.4 && q.usd_per_gpu_hour < b.0));
        if better {
            best = Some((q.usd_per_gpu_hour, g, q, ev, home));
        }
    }
    let (price, g, q, mut evidence, _) = best?;
    evidence.insert(
        0,
        format!("{} class {}: {}", r.name, r.class.as_str(), r.class_reason),
    );
    Some(rightsize_action(
        d,
        g,
        &q,
        price,
        evidence,
        planner.is_some(),
        st,
    ))
}

/// The rightsize action to `g` at `price` (quote `q`), with its evidence.
fn rightsize_action(
    d: &Dev<'_>,
    g: &GpuSpec,
    q: &gpuwise_catalog::Quote,
    price: f64,
    evidence: Vec<String>,
    by_planner: bool,
    st: &AdviseSettings,
) -> Action {
    let r = d.row;
    let m = price / d.usd_per_gpu_hour;
    let saved = d.monthly * (1.0 - m);
    Action {
        kind: Kind::Rightsize,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly * m,
        monthly_savings_usd: saved,
        confidence: if by_planner {
            Confidence {
                level: Level::High,
                reason: "the planner sized the model on both GPUs".to_owned(),
            }
        } else {
            Confidence {
                level: Level::Medium,
                reason: "scaled by peak figures; a different kernel mix on the new GPU can shift utilization".to_owned(),
            }
        },
        evidence,
        assumptions: vec![
            format!(
                "utilization scales with the ratio of peak figures (ceiling {} %)",
                st.ceiling_pct
            ),
            format!("price {}", q.describe()),
        ],
        how: vec![format!(
            "move {} from {} to {} ({} {} {}, ${:.4}/GPU-h); validate throughput and latency on one replica first",
            r.id,
            d.spec.map_or("?", |s| s.name.as_str()),
            g.name,
            q.cloud,
            q.instance_type,
            q.region,
            price
        )],
        target: Some(g.name.clone()),
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    }
}

/// The device's p95 utilization projected onto candidate `g`, with its evidence: by the
/// planner when a model is hinted (`None` when the model does not fit or misses its latency
/// target), else by the ratio of dense 16-bit TFLOPS and, with DRAM activity measured, of
/// memory bandwidth.
fn projected_use(
    d: &Dev<'_>,
    g: &GpuSpec,
    planner: Option<(&Hint, &Model)>,
    current: Option<&Planned>,
    dram: Option<f64>,
) -> Option<(f64, Vec<String>)> {
    let (r, spec) = (d.row, d.spec?);
    let peak = r.peak_memory_used_mib?;
    let p95 = r.p95_utilization_pct?;
    let mut ev = Vec::new();
    if let Some((h, m)) = planner {
        let (Some(cur), Some(new)) = (current, planned(m, &h.workload, g)) else {
            return None;
        };
        let need = cur.memory_bytes.max(peak * gpuwise_core::MIB_BYTES);
        if need > g.memory_gb * 1e9 {
            return None;
        }
        if let (Some(limit), Some(t)) = (h.latency_ms, new.tpot_ms)
            && t > limit
        {
            return None;
        }
        let u = p95 * cur.tokens_per_s / new.tokens_per_s;
        ev.push(format!(
            "planner ({}): needs {:.1} GiB; {:.0} → {:.0} tokens/s, so p95 {p95:.0} % × {:.2} = {u:.0} %{}",
            m.name,
            need / plan::GIB,
            cur.tokens_per_s,
            new.tokens_per_s,
            cur.tokens_per_s / new.tokens_per_s,
            match (h.latency_ms, new.tpot_ms) {
                (Some(l), Some(t)) => format!("; {t:.1} ms per output token ≤ {l} ms target"),
                _ => String::new(),
            }
        ));
        return Some((u, ev));
    }
    let (cur_tf, cur_bw) = (half_tflops(spec)?, spec.memory_bandwidth_gb_s?);
    let (tf, bw) = (half_tflops(g)?, g.memory_bandwidth_gb_s?);
    let compute = p95 * cur_tf / tf;
    let memory = dram.map(|x| x * cur_bw / bw);
    ev.push(format!(
        "compute: p95 utilization {p95:.0} % × ({} {cur_tf} ÷ {} {tf} dense TFLOPS) = {compute:.0} %",
        spec.name, g.name
    ));
    if let (Some(dr), Some(mm)) = (dram, memory) {
        ev.push(format!(
            "bandwidth: DRAM activity {dr:.0} % × ({cur_bw} ÷ {bw} GB/s) = {mm:.0} %"
        ));
    }
    Some((compute.max(memory.unwrap_or(0.0)), ev))
}

/// (tokens/s, memory bytes) of the hinted model on the current and the candidate GPU.
/// The hinted model on one GPU, by the planner.
struct Planned {
    tokens_per_s: f64,
    memory_bytes: f64,
    tpot_ms: Option<f64>,
}

/// The hinted model on one GPU, by the planner.
fn planned(m: &Model, w: &Workload, g: &GpuSpec) -> Option<Planned> {
    let s = Setup::new(m, w);
    let c = perf::Constants::default();
    let hw = Hardware::from_spec(g);
    let memory_bytes = plan::memory::estimate(m, &s, true).total_bytes;
    if w.mode.trains() {
        Some(Planned {
            tokens_per_s: perf::train(m, &s, &hw, &c).ok()?.tokens_per_s_per_gpu,
            memory_bytes,
            tpot_ms: None,
        })
    } else {
        let r = perf::infer(m, &s, &hw, &c).ok()?;
        Some(Planned {
            tokens_per_s: r.decode_tokens_per_s,
            memory_bytes,
            tpot_ms: Some(r.tpot_ms),
        })
    }
}

fn quote(
    catalog: &Catalog,
    gpu: &str,
    st: &AdviseSettings,
    pricing: Pricing,
) -> Option<gpuwise_catalog::Quote> {
    let q = catalog.gpu_hour_price(&PriceQuery {
        gpu,
        cloud: st.cloud.as_deref(),
        region: st.region.as_deref(),
        pricing,
    })?;
    if q.pricing != pricing {
        return None;
    }
    // Same cloud first; another cloud only when allowed (or when none is set).
    match &st.cloud {
        Some(c) if &q.cloud != c && !st.allow_clouds.contains(&q.cloud) => None,
        _ => Some(q),
    }
}

fn use_spot(
    d: &Dev<'_>,
    catalog: &Catalog,
    st: &AdviseSettings,
    no_price: &mut BTreeSet<String>,
) -> Option<Action> {
    let r = d.row;
    let spec = d.spec?;
    if st.pricing == Pricing::Spot {
        return None;
    }
    let (interruptible, why) = match d.hint.and_then(|h| h.interruptible) {
        Some(i) => (i, "marked interruptible in the workload hints".to_owned()),
        None => {
            let kind = d.hint.and_then(|h| h.kind);
            let p50 = r.p50_utilization_pct?;
            let p95 = r.p95_utilization_pct?;
            let rule = &st.spot_steady;
            let steady = matches!(r.class, Class::Healthy | Class::Saturated)
                && p50 >= rule.min_p50_pct
                && p95 - p50 <= rule.max_p95_above_p50_pct
                && d.idle_share() < rule.max_idle_share
                && r.coverage_pct.is_some_and(|c| c >= rule.min_coverage_pct);
            (
                steady && matches!(kind, None | Some(WorkKind::Training | WorkKind::Batch)),
                format!(
                    "steady training-like load: p50 {p50:.0} %, p95 {p95:.0} %, idle {:.1} %, coverage {:.0} %",
                    d.idle_share() * 100.0,
                    r.coverage_pct.unwrap_or(0.0)
                ),
            )
        }
    };
    if !interruptible {
        return None;
    }
    let Some(q) = quote(catalog, &spec.name, st, Pricing::Spot) else {
        no_price.insert(spec.name.clone());
        return None;
    };
    // Young/Daly: checkpoint every τ = √(2·C·M); expected overhead C/τ + τ/(2M).
    let c = st.checkpoint_cost_h;
    let mtbi = st.spot_mtbi_h;
    let tau = (2.0 * c * mtbi).sqrt();
    let overhead = c / tau + tau / (2.0 * mtbi);
    let effective = q.usd_per_gpu_hour * (1.0 + overhead);
    if effective >= d.usd_per_gpu_hour {
        return None;
    }
    let m = effective / d.usd_per_gpu_hour;
    Some(Action {
        kind: Kind::UseSpot,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly * m,
        monthly_savings_usd: d.monthly * (1.0 - m),
        confidence: if d.hint.and_then(|h| h.interruptible).is_some() {
            Confidence {
                level: Level::Medium,
                reason: "interruptible by hint; the interruption rate is an assumption".to_owned(),
            }
        } else {
            Confidence {
                level: Level::Low,
                reason: "detected as training-like from utilization alone; confirm it checkpoints".to_owned(),
            }
        },
        evidence: vec![
            why,
            format!(
                "spot {} vs now ${:.4}/GPU-h",
                q.describe(),
                d.usd_per_gpu_hour
            ),
        ],
        assumptions: vec![
            format!(
                "checkpoint takes {:.0} min, interruptions every {:.0} h on average",
                c * 60.0,
                mtbi
            ),
            format!(
                "expected rework and checkpoint overhead {:.1} % (Young/Daly first order: C/τ + τ/2M)",
                overhead * 100.0
            ),
        ],
        how: vec![
            format!(
                "run {} on spot ({} {} {}); checkpoint every {:.0} minutes (τ = √(2 × {:.0} min × {:.0} h))",
                r.name,
                q.cloud,
                q.instance_type,
                q.region,
                tau * 60.0,
                c * 60.0,
                mtbi
            ),
            "resume from the last checkpoint on interruption (e.g. torchrun --max-restarts with a spot-aware node pool)".to_owned(),
        ],
        target: Some(format!("{} spot", q.cloud)),
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    })
}

fn move_cheaper(d: &Dev<'_>, catalog: &Catalog, st: &AdviseSettings) -> Option<Action> {
    let r = d.row;
    let spec = d.spec?;
    let current = st.cloud.as_deref()?;
    let mut best: Option<gpuwise_catalog::Quote> = None;
    for cloud in std::iter::once(current).chain(st.allow_clouds.iter().map(String::as_str)) {
        let q = catalog.gpu_hour_price(&PriceQuery {
            gpu: &spec.name,
            cloud: Some(cloud),
            region: None,
            pricing: st.pricing,
        })?;
        if q.step == Step::ReferenceCloud || q.pricing != st.pricing {
            continue;
        }
        if best
            .as_ref()
            .is_none_or(|b| q.usd_per_gpu_hour < b.usd_per_gpu_hour)
        {
            best = Some(q);
        }
    }
    let q = best?;
    if q.usd_per_gpu_hour >= d.usd_per_gpu_hour * (1.0 - st.min_price_cut) {
        return None;
    }
    let m = q.usd_per_gpu_hour / d.usd_per_gpu_hour;
    Some(Action {
        kind: Kind::MoveCheaper,
        targets: vec![r.id.clone()],
        target_names: Vec::new(),
        current_monthly_usd: d.monthly,
        projected_monthly_usd: d.monthly * m,
        monthly_savings_usd: d.monthly * (1.0 - m),
        confidence: Confidence {
            level: Level::Medium,
            reason: "list prices; capacity, egress and data location are not priced".to_owned(),
        },
        evidence: vec![format!(
            "{} now ${:.4}/GPU-h; {}",
            spec.name,
            d.usd_per_gpu_hour,
            q.describe()
        )],
        assumptions: vec!["the same GPU performs the same anywhere".to_owned()],
        how: vec![format!(
            "move {} to {} {} in {}",
            r.id, q.cloud, q.instance_type, q.region
        )],
        target: Some(format!("{} {}", q.cloud, q.region)),
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    })
}

/// How to consolidate: enable MIG or sharing on the kept GPUs, each GPU's layout, and what to
/// release.
fn consolidation_steps(
    devs: &[Dev<'_>],
    spec: &GpuSpec,
    mig: bool,
    items: &[(usize, f64, f64, String)],
    bins: &[(f64, f64, Vec<usize>)],
    freed: &BTreeSet<usize>,
) -> Vec<String> {
    let layout: Vec<String> = bins
        .iter()
        .enumerate()
        .map(|(i, b)| {
            format!(
                "GPU {} ({}): {}",
                i + 1,
                devs[items[b.2[0]].0].row.name,
                b.2.iter()
                    .map(|&k| format!("{} ← {}", items[k].3, devs[items[k].0].row.name))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    let mut how = vec![if mig {
        format!(
            "enable MIG on the kept {} GPUs and create the instances below (nvidia-smi mig -cgi <profiles> -C, or the GPU operator's mig-manager config)",
            spec.name
        )
    } else {
        format!(
            "share the kept {} GPUs by time-slicing (GPU operator `sharing.timeSlicing.replicas`) or MPS; cap each workload's memory",
            spec.name
        )
    }];
    how.extend(layout);
    how.push(format!(
        "release {}",
        freed
            .iter()
            .map(|&d| devs[d].row.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    how
}

/// What each member needs of a shared GPU: (device, compute units, memory MiB, label). With
/// MIG, the smallest profile with memory ≥ peak × headroom and enough slices for p95 under
/// the ceiling; else p95 utilization and peak × headroom. `None` when a member fits no profile.
fn pack_items(
    devs: &[Dev<'_>],
    members: &[usize],
    spec: &GpuSpec,
    capacity: f64,
    mig: bool,
    st: &AdviseSettings,
) -> Option<Vec<(usize, f64, f64, String)>> {
    let mut items = Vec::new();
    for &di in members {
        let r = devs[di].row;
        let peak = r.peak_memory_used_mib?;
        let p95 = r.p95_utilization_pct?;
        if mig {
            let need_slices = p95 * capacity / st.ceiling_pct;
            let profile = spec
                .mig_profiles
                .iter()
                .filter(|p| !p.name.contains('+'))
                .filter(|p| {
                    p.memory_gb * 1e9 / gpuwise_core::MIB_BYTES >= peak * st.headroom
                        && f64::from(p.compute_slices) >= need_slices
                })
                .min_by(|a, b| {
                    a.compute_slices
                        .cmp(&b.compute_slices)
                        .then(a.memory_gb.total_cmp(&b.memory_gb))
                })?;
            items.push((
                di,
                f64::from(profile.compute_slices),
                profile.memory_gb * 1e9 / gpuwise_core::MIB_BYTES,
                profile.name.clone(),
            ));
        } else {
            items.push((
                di,
                p95,
                peak * st.headroom,
                format!("{p95:.0} % of the GPU"),
            ));
        }
    }
    Some(items)
}

/// First fit of the items, in their order, into GPUs of `capacity` compute and `total_mib`
/// memory: (compute used, memory used, item indices) per GPU.
fn first_fit(
    items: &[(usize, f64, f64, String)],
    capacity: f64,
    total_mib: f64,
) -> Vec<(f64, f64, Vec<usize>)> {
    let mut bins: Vec<(f64, f64, Vec<usize>)> = Vec::new();
    for (k, it) in items.iter().enumerate() {
        match bins
            .iter_mut()
            .find(|b| b.0 + it.1 <= capacity + 1e-9 && b.1 + it.2 <= total_mib + 1e-9)
        {
            Some(b) => {
                b.0 += it.1;
                b.1 += it.2;
                b.2.push(k);
            }
            None => bins.push((it.1, it.2, vec![k])),
        }
    }
    bins
}

/// Pack members onto fewer GPUs: MIG slices where the GPU has MIG, else time-slicing.
/// First-fit decreasing; the lower bound is the larger of total compute and total memory
/// over one GPU's.
fn consolidate(
    devs: &[Dev<'_>],
    members: &[usize],
    st: &AdviseSettings,
) -> Option<(Action, BTreeSet<usize>)> {
    let spec = devs[members[0]].spec?;
    let total_mib = spec_mib(spec);
    let (capacity, mig) = match spec.mig_slices() {
        Some(n) => (f64::from(n), true),
        None => (st.ceiling_pct, false),
    };
    let mut items = pack_items(devs, members, spec, capacity, mig, st)?;
    // Decreasing by compute, then memory.
    items.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.2.total_cmp(&a.2)));
    let bins = first_fit(&items, capacity, total_mib);
    let sum_c: f64 = items.iter().map(|i| i.1).sum();
    let sum_m: f64 = items.iter().map(|i| i.2).sum();
    let lower = (sum_c / capacity).max(sum_m / total_mib).ceil().max(1.0);
    let freed_n = members.len().saturating_sub(bins.len());
    if freed_n == 0 {
        return None;
    }
    // Keep the GPUs that host a bin's first item; free the rest, most expensive first.
    let keep: BTreeSet<usize> = bins.iter().map(|b| items[b.2[0]].0).collect();
    let mut rest: Vec<usize> = members
        .iter()
        .copied()
        .filter(|d| !keep.contains(d))
        .collect();
    rest.sort_by(|&a, &b| devs[b].monthly.total_cmp(&devs[a].monthly));
    let freed: BTreeSet<usize> = rest.into_iter().take(freed_n).collect();
    let current: f64 = members.iter().map(|&d| devs[d].monthly).sum();
    let saved: f64 = freed.iter().map(|&d| devs[d].monthly).sum();
    let how = consolidation_steps(devs, spec, mig, &items, &bins, &freed);
    Some((
        Action {
            kind: Kind::Consolidate,
            targets: members.iter().map(|&d| devs[d].row.id.clone()).collect(),
            target_names: Vec::new(),
            current_monthly_usd: current,
            projected_monthly_usd: current - saved,
            monthly_savings_usd: saved,
            confidence: Confidence {
                level: Level::Medium,
                reason: if mig {
                    "MIG isolates memory and compute; first-fit packing ignores MIG placement rules, check the layout is valid".to_owned()
                } else {
                    "time-slicing and MPS share memory and faults: a noisy neighbour or an OOM affects every workload on the GPU".to_owned()
                },
            },
            evidence: members
                .iter()
                .map(|&d| {
                    let r = devs[d].row;
                    format!(
                        "{}: p95 {:.0} %, peak {}",
                        r.name,
                        r.p95_utilization_pct.unwrap_or(0.0),
                        r.peak_memory_used_mib.map_or_else(|| "–".to_owned(), gib)
                    )
                })
                .chain(std::iter::once(format!(
                    "{} workloads on {} GPUs (lower bound {lower:.0}), {freed_n} freed",
                    members.len(),
                    bins.len()
                )))
                .collect(),
            assumptions: vec![
                if mig {
                    format!(
                        "a slice of k of {capacity:.0} compute slices runs a workload at p95 × {capacity:.0}/k ≤ {} %; memory ≥ peak × {}",
                        st.ceiling_pct, st.headroom
                    )
                } else {
                    format!(
                        "utilization adds up under time-slicing (sum of p95 ≤ {} %); memory ≥ peak × {}",
                        st.ceiling_pct, st.headroom
                    )
                },
                "packing: first-fit decreasing by compute then memory".to_owned(),
            ],
            how,
            target: Some(spec.name.clone()),
            schedule: Vec::new(),
            in_plan: false,
            plan_savings_usd: 0.0,
        },
        freed,
    ))
}

/// Commit to the k-th GPU of a model when the share of hours with at least k busy GPUs is at
/// least the commitment price over the on-demand price.
fn commit_baseline(
    devs: &[Dev<'_>],
    name: &str,
    members: &[usize],
    catalog: &Catalog,
    st: &AdviseSettings,
    window_hours: f64,
) -> Option<Action> {
    if st.pricing != Pricing::OnDemand {
        return None;
    }
    let od = quote(catalog, name, st, Pricing::OnDemand)?;
    let (term, commit) = [Pricing::Commit3y, Pricing::Commit1y]
        .into_iter()
        .filter_map(|p| quote(catalog, name, st, p).map(|q| (p, q)))
        .min_by(|a, b| a.1.usd_per_gpu_hour.total_cmp(&b.1.usd_per_gpu_hour))?;
    let ratio = commit.usd_per_gpu_hour / od.usd_per_gpu_hour;
    if ratio >= 1.0 {
        return None;
    }
    // Busy GPUs per observed hour (gpuwise_core::demand: MIG instances folded into their GPU,
    // hours without telemetry left out rather than counted as no demand).
    let demand =
        gpuwise_core::demand::busy_hours(members.iter().map(|&di| gpuwise_core::demand::Unit {
            parent: (devs[di].row.host.as_str(), devs[di].row.gpu.as_str()),
            share: Some(devs[di].share),
            hourly: &devs[di].stats.hourly,
            interruptible: false,
        }));
    let series = &demand.busy;
    #[allow(clippy::cast_precision_loss)]
    let hours = series.len().max(1) as f64;
    let max_k = series.iter().copied().max().unwrap_or(0);
    let (k_star, _) =
        gpuwise_sim::commit::baseline(series, od.usd_per_gpu_hour, commit.usd_per_gpu_hour);
    let share = |k: u32| series.iter().filter(|&&c| c >= k).count() as f64 / hours;
    let coverage = demand.coverage_pct().unwrap_or(0.0);
    let current: f64 = (1..=k_star)
        .map(|k| share(k) * od.usd_per_gpu_hour * MONTH_HOURS)
        .sum();
    let projected = f64::from(k_star) * commit.usd_per_gpu_hour * MONTH_HOURS;
    let last_share = if k_star > 0 { share(k_star) } else { 0.0 };
    let next_share = share(k_star + 1);
    let shares = format!(
        "at least {k_star} of {} GPUs busy in {:.0} % of the {} hours with telemetry ({:.0} % \
         of the span){}",
        members.len(),
        last_share * 100.0,
        series.len(),
        coverage,
        if k_star < max_k {
            format!(", at least {} in {:.0} %", k_star + 1, next_share * 100.0)
        } else {
            String::new()
        }
    );
    if k_star == 0 || projected >= current {
        return None;
    }
    Some(Action {
        kind: Kind::CommitBaseline,
        targets: members.iter().map(|&d| devs[d].row.id.clone()).collect(),
        target_names: Vec::new(),
        current_monthly_usd: current,
        projected_monthly_usd: projected,
        monthly_savings_usd: current - projected,
        confidence: if window_hours >= 30.0 * 24.0 {
            Confidence {
                level: Level::Medium,
                reason: format!(
                    "a {term} commitment rests on {:.0} days of demand",
                    window_hours / 24.0
                ),
            }
        } else {
            Confidence {
                level: Level::Low,
                reason: format!(
                    "a {term} commitment rests on only {:.0} days of demand; confirm the baseline holds for months",
                    window_hours / 24.0
                ),
            }
        },
        evidence: vec![format!(
            "{name}: commitment ${:.4} ÷ on-demand ${:.4} = {:.0} %; {shares}",
            commit.usd_per_gpu_hour,
            od.usd_per_gpu_hour,
            ratio * 100.0
        )],
        assumptions: vec![
            "without a commitment, busy GPU-hours are bought on demand".to_owned(),
            format!("commitment price {}", commit.describe()),
        ],
        how: vec![format!(
            "commit to {k_star} × {name} for {term} ({} {}); run the rest on demand or spot",
            commit.cloud, commit.instance_type
        )],
        target: Some(format!("{k_star} × {name} {term}")),
        schedule: Vec::new(),
        in_plan: false,
        plan_savings_usd: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_on_borrowed_figures_is_never_a_rightsizing_target() {
        let c = Catalog::builtin();
        let gpu = |n: &str| c.resolve(n).expect("in the catalog");
        assert!(can_size_a_move_to(gpu("L40S")));
        assert!(can_size_a_move_to(gpu("A10")));
        // The A10G's tensor figures are the A10's, an upper bound.
        assert!(!can_size_a_move_to(gpu("A10G")));
        // Name and memory only.
        assert!(!can_size_a_move_to(gpu("GeForce-RTX-3090")));
    }

    #[test]
    fn window_bins_cover_the_schedule() {
        let w = vec![
            IdleWindow {
                days: "weekdays".into(),
                start_hour: 19,
                end_hour: 8,
            },
            IdleWindow {
                days: "weekend".into(),
                start_hour: 0,
                end_hour: 0,
            },
        ];
        let b = window_bins(&w);
        // 13 hours on each weekday (00–08 and 19–24) + 48 weekend hours.
        assert!(b.contains(&0) && b.contains(&19) && b.contains(&(24 + 7)) && !b.contains(&8));
        assert!(b.contains(&(5 * 24)) && b.contains(&(7 * 24 - 1)));
        assert_eq!(b.len(), 5 * 13 + 48);
    }

    #[test]
    fn hints_parse_and_reject_bad_entries() {
        let h = Hints::from_toml(
            "[[workload]]\nmatch = \"serve-*\"\nkind = \"inference\"\nmodel = \"llama-3-8b\"\nbatch = 4\n\n[[workload]]\nlabel = \"namespace=research\"\ninterruptible = true\n",
            "w.toml",
        )
        .expect("parses");
        assert_eq!(h.rules.len(), 2);
        assert_eq!(h.rules[0].workload.batch, Some(4));
        let e = Hints::from_toml("[[workload]]\nmatch = \"x\"\nkind = \"gaming\"\n", "w.toml")
            .expect_err("kind")
            .to_string();
        assert_eq!(
            e,
            "w.toml: workload #1: kind `gaming` is not one of training, inference, notebook, batch"
        );
        let e = Hints::from_toml("[[workload]]\nkind = \"batch\"\n", "w.toml")
            .expect_err("match")
            .to_string();
        assert!(e.contains("needs `match`"), "{e}");
        let e = Hints::from_toml("[[workload]]\nmatch = \"x\"\nmodel = \"gpt-9\"\n", "w.toml")
            .expect_err("model")
            .to_string();
        assert!(
            e.starts_with("w.toml: workload #1: no built-in model `gpt-9`"),
            "{e}"
        );
        let e = Hints::from_toml("[[workload]]\nmatch = \"x\"\ncolour = \"red\"\n", "w.toml")
            .expect_err("key")
            .to_string();
        assert_eq!(e, "w.toml: workload #1: unknown key `colour`");
        assert!(matches!(
            Hints::from_toml("workload = 3\n", "w.toml"),
            Err(HintsError::File { .. })
        ));
    }
}
