//! # gpuwise-analysis: what a fleet's telemetry means, one library for every caller
//!
//! Pure (no files, network, clock or command line). The edges (the binary's commands and the
//! server) resolve the settings once, read the telemetry into device profiles, and ask an
//! [`Analysis`] what those profiles mean: the report, the advice, the allocation of the money
//! and the budgets' burn. Each caller gets the same answer from the same function: the CLI's
//! `report --format json` and the server's `/api/report` are one computation, and no command
//! calls another for it.

use std::collections::BTreeSet;

pub mod review;
pub mod view;

pub use gpuwise_advise::{Advice, AdviseSettings, Hints, Kind};
pub use gpuwise_core::profile::{DeviceProfile, Profile};
pub use gpuwise_core::report::{IngestSummary, Report, ReportOptions, TeamMap};
pub use gpuwise_ledger::allocate::{Allocation, Allocator, Policy as AllocationPolicy, UnitCounts};
pub use gpuwise_ledger::check::{Budget, Burn};
pub use gpuwise_ledger::export::FocusRows;

use gpuwise_core::EpochMs;
use gpuwise_core::price::PriceBook;

/// What an analysis cannot do with the settings it was given.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    /// `shared_teams` names a team neither the team file nor the allocation knows.
    #[error("--shared-team names {0}")]
    UnknownSharedTeam(String),
}

/// Everything an analysis needs, resolved once by the edge (flag > environment > config file >
/// default) and read by everything after.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How samples became profiles and how the report is built (`now_ms` is set per call).
    pub report: ReportOptions,
    /// The catalog, the price context and the user's price rules.
    pub prices: PriceBook,
    /// Devices → teams.
    pub teams: TeamMap,
    /// What each device runs (`--workloads`).
    pub hints: Hints,
    /// The time zone of hours of the week and of day-of-week advice.
    pub tz: jiff::tz::TimeZone,
    /// The advice's thresholds and the clouds it may suggest.
    pub advise: AdviseSettings,
    /// How the money is allocated (showback or chargeback, idle, shared teams).
    pub allocation: AllocationPolicy,
    /// Work per team and month, for unit costs.
    pub units: UnitCounts,
    /// Monthly budgets per team, where a policy sets them.
    pub budget: Option<Budget>,
}

/// The handle every caller holds: resolved settings, and the questions a fleet answers.
#[derive(Clone, Debug)]
pub struct Analysis {
    settings: Settings,
}

impl Analysis {
    /// An analysis under `settings`.
    #[must_use]
    pub fn new(settings: Settings) -> Self {
        Self { settings }
    }

    /// The settings it was made with.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The devices of a joined profile, each with what it runs where the workload hints say.
    #[must_use]
    pub fn profiles(&self, profile: Profile) -> Vec<DeviceProfile> {
        let s = &self.settings;
        let mut profiles = profile.finish(&s.report.profile, &s.tz);
        self.with_workloads(&mut profiles);
        profiles
    }

    /// What each device runs, where the workload hints say.
    pub fn with_workloads(&self, profiles: &mut [DeviceProfile]) {
        for p in profiles.iter_mut() {
            self.with_workload(p);
        }
    }

    fn with_workload(&self, p: &mut DeviceProfile) {
        p.info.workload = self.settings.hints.find(p).and_then(|h| h.kind);
    }

    /// The report of `profiles` read as `summary` says, at `now_ms`.
    #[must_use]
    pub fn report(
        &self,
        profiles: &[DeviceProfile],
        summary: IngestSummary,
        now_ms: EpochMs,
    ) -> Report {
        self.report_from(profiles, summary, now_ms, &mut |_, _| {})
    }

    /// The report straight from `profile`, for a caller with no other use for the devices'
    /// summaries: each device is summarized, reported and dropped in turn, so they are never
    /// all held (the same report as [`Analysis::report`] of [`Analysis::profiles`]).
    #[must_use]
    pub fn report_of(&self, profile: Profile, summary: IngestSummary, now_ms: EpochMs) -> Report {
        self.report_visiting(profile, summary, now_ms, &mut |_, _| {})
    }

    /// [`Analysis::report_of`], handing each device's summary and report row to `visit` as
    /// it is made (an [`Allocator`], [`FocusRows`]), then letting it go.
    pub fn report_visiting(
        &self,
        profile: Profile,
        summary: IngestSummary,
        now_ms: EpochMs,
        visit: &mut dyn FnMut(&DeviceProfile, &gpuwise_core::report::DeviceRow),
    ) -> Report {
        let s = &self.settings;
        let devices = profile.finish_each(&s.report.profile, &s.tz).map(|mut p| {
            self.with_workload(&mut p);
            p
        });
        self.report_from(devices, summary, now_ms, visit)
    }

    /// An empty allocation of the hours before `now_ms`, to fold devices into one at a time
    /// ([`Analysis::report_visiting`]) and finish with [`Analysis::allocation_of`].
    #[must_use]
    pub fn allocator(&self, now_ms: EpochMs) -> Allocator<'_> {
        Allocator::new(&self.settings.teams, now_ms)
    }

    /// The allocation an [`Allocator`] folded, by the settings' policy and unit counts.
    ///
    /// # Errors
    /// As [`Analysis::allocation`].
    pub fn allocation_of(&self, folded: Allocator<'_>) -> Result<Allocation, AnalysisError> {
        let s = &self.settings;
        self.checked(folded.finish(&s.allocation, &s.units))
    }

    /// The public list price per GPU-hour of a device's GPU: the catalog's on-demand price in
    /// the run's price context (cloud, region), for FOCUS rows.
    #[must_use]
    pub fn list_price(&self, row: &gpuwise_core::report::DeviceRow) -> Option<f64> {
        gpuwise_ledger::export::list_price(&self.settings.prices, row)
    }

    fn report_from<P: std::borrow::Borrow<DeviceProfile>>(
        &self,
        profiles: impl IntoIterator<Item = P>,
        summary: IngestSummary,
        now_ms: EpochMs,
        visit: &mut dyn FnMut(&DeviceProfile, &gpuwise_core::report::DeviceRow),
    ) -> Report {
        let s = &self.settings;
        let mut opts = s.report.clone();
        opts.now_ms = Some(now_ms);
        gpuwise_core::report::build_visiting(profiles, &s.prices, &s.teams, &opts, summary, visit)
    }

    /// The ranked actions for a built report.
    #[must_use]
    pub fn advice(&self, report: &Report, profiles: &[DeviceProfile]) -> Advice {
        let s = &self.settings;
        gpuwise_advise::advise(
            report,
            profiles,
            s.prices.catalog(),
            &s.hints,
            &s.advise,
            &s.tz,
        )
    }

    /// The report with the advice's KPI filled in: the share of evaluated GPU-hours on devices
    /// the advice would not resize or pack.
    pub fn with_advice_kpis(report: &mut Report, advice: &Advice) {
        report.fleet.kpis.rightsized_share_pct = rightsized_share(report, advice);
    }

    /// Who spent what, by team and month, at `now_ms`, whatever the shared teams name (the
    /// server's: a flag naming an unknown team must not take the dashboard down; the CLI
    /// refuses it through [`Analysis::allocation`]).
    #[must_use]
    pub fn allocate(
        &self,
        report: &Report,
        profiles: &[DeviceProfile],
        now_ms: EpochMs,
    ) -> Allocation {
        let s = &self.settings;
        gpuwise_ledger::allocate::allocate(
            profiles,
            report,
            &s.teams,
            &s.allocation,
            &s.units,
            now_ms,
        )
    }

    /// Who spent what, by team and month, at `now_ms`.
    ///
    /// # Errors
    /// [`AnalysisError::UnknownSharedTeam`] when the policy shares the cost of a team nobody
    /// knows.
    pub fn allocation(
        &self,
        report: &Report,
        profiles: &[DeviceProfile],
        now_ms: EpochMs,
    ) -> Result<Allocation, AnalysisError> {
        self.checked(self.allocate(report, profiles, now_ms))
    }

    /// `a`, unless its policy shares the cost of a team nobody knows.
    fn checked(&self, a: Allocation) -> Result<Allocation, AnalysisError> {
        let s = &self.settings;
        if let Some(what) = gpuwise_ledger::check::unknown_teams(
            s.allocation.shared_teams.iter().map(String::as_str),
            &a,
            &s.teams.named_teams(),
        ) {
            return Err(AnalysisError::UnknownSharedTeam(what));
        }
        Ok(a)
    }

    /// Each budgeted team's month to date against its budget (none without budgets, or when
    /// the allocation has no data in the current month).
    #[must_use]
    pub fn budgets(&self, allocation: &Allocation) -> Vec<Burn> {
        self.settings
            .budget
            .as_ref()
            .and_then(|b| gpuwise_ledger::check::burn(b, allocation))
            .unwrap_or_default()
    }
}

/// Share of evaluated GPU-hours on devices the advice would not resize or pack: the KPI the
/// report leaves empty without advice.
#[must_use]
pub fn rightsized_share(report: &Report, a: &Advice) -> Option<f64> {
    let moved: BTreeSet<&str> = a
        .actions
        .iter()
        .filter(|x| x.in_plan && matches!(x.kind, Kind::Rightsize | Kind::Consolidate))
        .flat_map(|x| x.targets.iter().map(String::as_str))
        .collect();
    let priced: Vec<_> = report
        .devices
        .iter()
        .filter(|d| d.usd_per_gpu_hour.is_some())
        .collect();
    let total: f64 = priced.iter().map(|d| d.gpu_hours).sum();
    (total > 0.0).then(|| {
        let ok: f64 = priced
            .iter()
            .filter(|d| !moved.contains(d.id.as_str()))
            .map(|d| d.gpu_hours)
            .sum();
        100.0 * ok / total
    })
}
