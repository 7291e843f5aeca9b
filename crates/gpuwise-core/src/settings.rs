//! # Settings the engine needs, with every default stated
//!
//! Defaults come from `docs/vision.md` ("decision-rule defaults from practice"); each is a
//! setting the user can change and each is printed in the report, so a reader can see what
//! rule produced a class.

use serde::Serialize;

use crate::sample::EpochMs;

/// How samples become time: weighting, gaps and idle episodes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProfileSettings {
    /// A sample stands until the next sample of its device, unless the gap is longer than
    /// this: then the gap is *no data* (neither idle nor busy).
    pub max_gap_ms: u64,
    /// Utilization strictly below this is idle.
    pub idle_threshold_pct: f32,
    /// A run of idle time counts as an idle episode only when it lasts at least this long.
    pub min_idle_episode_ms: u64,
    /// Idle time is *held idle* while at least this much memory is in use.
    pub held_idle_min_mib: f32,
    /// Samples dated before this are implausible (a clock that was never set) and skipped.
    pub earliest_ms: EpochMs,
    /// Samples dated after this are implausible (a clock far in the future) and skipped. The
    /// binary sets it to one day after the time of the run; the default is 2100-01-01.
    pub latest_ms: EpochMs,
}

/// 2000-01-01T00:00:00Z: no GPU telemetry this tool reads is older.
pub const EARLIEST_PLAUSIBLE_MS: EpochMs = 946_684_800_000;
/// 2100-01-01T00:00:00Z: the latest time a pure default can allow.
pub const LATEST_PLAUSIBLE_MS: EpochMs = 4_102_444_800_000;

/// Upper edges of the report's utilization bands, in percent: `[0, 5)`, `[5, 25)`, `[25, 50)`,
/// `[50, 85)`, `[85, 100]`. The one definition every path uses: the file readers count the
/// hours below each edge in the exact histogram (to its 0.1 % resolution), the Prometheus
/// pushdown asks the store for `count_over_time((U < EDGE)[w:S])`.
pub const UTIL_BAND_EDGES_PCT: [f32; 4] = [5.0, 25.0, 50.0, 85.0];

impl Default for ProfileSettings {
    fn default() -> Self {
        Self {
            max_gap_ms: 5 * 60_000,
            idle_threshold_pct: 5.0,
            min_idle_episode_ms: 10 * 60_000,
            held_idle_min_mib: 1024.0,
            earliest_ms: EARLIEST_PLAUSIBLE_MS,
            latest_ms: LATEST_PLAUSIBLE_MS,
        }
    }
}

/// Thresholds that turn a profile into a class and a bottleneck hint.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiagnoseSettings {
    /// A device idle for at least this share of its observed time is `idle` (or `held_idle`).
    pub idle_share_pct: f64,
    /// An idle device whose idle time is held (memory allocated) for at least this share is
    /// `held_idle`.
    pub held_share_pct: f64,
    /// Mean utilization below this is `underutilized` (over-provisioned).
    pub underutilized_below_pct: f64,
    /// Mean utilization above this is `saturated` (the top of the healthy band).
    pub saturated_above_pct: f64,
    /// An hour-of-week bin is a recurring idle hour when idle for at least this share of its
    /// observed time.
    pub recurring_idle_share_pct: f64,
    /// The rules of the bottleneck hint.
    pub bottleneck: BottleneckRules,
}

impl Default for DiagnoseSettings {
    fn default() -> Self {
        Self {
            idle_share_pct: 80.0,
            held_share_pct: 50.0,
            underutilized_below_pct: 50.0,
            saturated_above_pct: 85.0,
            recurring_idle_share_pct: 90.0,
            bottleneck: BottleneckRules::default(),
        }
    }
}

/// The rules of the bottleneck hint, tried in this order; the first that holds is the hint.
///
/// These are judgement thresholds, not measured constants: they follow the reading of DCGM's
/// profiling metrics in NVIDIA's DCGM user guide ("Profiling Metrics": SM active near 100 %
/// with low occupancy or tensor activity means the SMs are busy with too little work; DRAM
/// active high with low tensor activity means bandwidth-bound), set where the demo's and the
/// shared fixtures' planted workloads separate. Each verdict prints the numbers it rests on, so
/// a reader can apply other thresholds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BottleneckRules {
    /// Waiting for work: short stalls (below the idle threshold, shorter than an idle episode)
    /// take at least this share of the observed time …
    pub stall_share_min_pct: f64,
    /// … between bursts whose p95 utilization is at least this.
    pub burst_p95_min_pct: f64,
    /// Launch-bound: the engine is busy at least this much on average …
    pub launch_engine_min_pct: f64,
    /// … while SM activity is below this share of it …
    pub launch_sm_to_engine_max: f64,
    /// … and below this.
    pub launch_sm_max_pct: f64,
    /// Memory-bound: DRAM active at least this …
    pub memory_dram_min_pct: f64,
    /// … tensor pipes below this (unknown tensor activity cannot rule them out) …
    pub memory_tensor_max_pct: f64,
    /// … and DRAM activity at least this share of SM activity.
    pub memory_dram_to_sm_min: f64,
    /// Compute-bound: SM active at least this …
    pub compute_sm_min_pct: f64,
    /// … or tensor pipes active at least this.
    pub compute_tensor_min_pct: f64,
}

impl Default for BottleneckRules {
    fn default() -> Self {
        Self {
            stall_share_min_pct: 15.0,
            burst_p95_min_pct: 70.0,
            launch_engine_min_pct: 50.0,
            launch_sm_to_engine_max: 0.5,
            launch_sm_max_pct: 40.0,
            memory_dram_min_pct: 50.0,
            memory_tensor_max_pct: 30.0,
            memory_dram_to_sm_min: 0.6,
            compute_sm_min_pct: 70.0,
            compute_tensor_min_pct: 40.0,
        }
    }
}
