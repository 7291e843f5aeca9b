//! # Profiles: streaming, mergeable per-device accumulators
//!
//! A [`DeviceAcc`] folds one device's samples, in time order, into time-weighted statistics.
//!
//! **Time weighting.** Sample *i* stands for the interval until sample *i + 1* of the same
//! device, with sample *i*'s values. When that gap is longer than
//! [`ProfileSettings::max_gap_ms`] it is *no data*: not idle, not busy, not billed. The last
//! sample of a device stands for nothing (its interval has no end). Peaks (memory, power
//! limit) take every sample, weighted statistics take intervals.
//!
//! **Order.** Samples of one device must arrive in non-decreasing time. A sample older than the
//! previous one is dropped and counted in `reordered`; one with the same timestamp is dropped
//! and counted in `duplicates`.
//!
//! **Merging.** [`DeviceAcc::merge`] appends a later accumulator: the gap between the two is
//! processed exactly as the sequential fold would have, so `merge(acc(a), acc(b)) == acc(a ++ b)`
//! holds bit for bit (all sums are integers; a property test checks it). This is what lets a file
//! be cut into chunks, and many files be read, in parallel. Accumulators that overlap in time
//! (two logs of the same device covering the same hours) cannot be joined exactly: they are
//! merged with a break between them and counted in `overlaps`.
//!
//! **Idle episodes.** A run of consecutive intervals with utilization below the idle threshold
//! is an idle episode when it lasts at least [`ProfileSettings::min_idle_episode_ms`]. A run is
//! broken by a busy interval, a gap, or an interval without a utilization reading. Runs that
//! touch the start of an accumulator stay undecided until merged with what came before (or
//! finalized), so chunking never changes which episodes exist.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::hist::{LogHist, UtilHist};
use crate::sample::{DeviceInfo, DeviceKey, EpochMs, Sample};
use crate::settings::ProfileSettings;

const HOUR_MS: i64 = 3_600_000;

/// Time-weighted sum of a non-negative quantity, in hundredths of its unit × milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Weighted {
    /// Milliseconds with a reading.
    pub ms: u64,
    /// Σ value × 100 × ms.
    pub sum: u128,
}

impl Weighted {
    /// `v` is non-negative (sanitized), so `+ 0.5` then truncation rounds to nearest without
    /// a libm call in this per-sample path.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn add(&mut self, v: f32, ms: u64) {
        self.ms += ms;
        self.sum += u128::from((f64::from(v) * 100.0 + 0.5) as u64) * u128::from(ms);
    }

    fn merge(&mut self, o: &Weighted) {
        self.ms += o.ms;
        self.sum += o.sum;
    }

    /// Time-weighted mean, `None` without readings.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn mean(&self) -> Option<f64> {
        (self.ms > 0).then(|| self.sum as f64 / 100.0 / self.ms as f64)
    }
}

/// One hour (UTC, aligned) of a device's timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct HourCell {
    covered_ms: u32,
    util_ms: u32,
    util_sum: u64,
}

/// Hourly cells from `base_hour` on, grown on demand.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Timeline {
    base_hour: i64,
    cells: Vec<HourCell>,
}

impl Timeline {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn cell(&mut self, hour: i64) -> &mut HourCell {
        if self.cells.is_empty() {
            self.base_hour = hour;
        } else if hour < self.base_hour {
            let extra = (self.base_hour - hour) as usize;
            self.cells
                .splice(0..0, std::iter::repeat_n(HourCell::default(), extra));
            self.base_hour = hour;
        }
        let i = (hour - self.base_hour) as usize;
        if i >= self.cells.len() {
            self.cells.resize(i + 1, HourCell::default());
        }
        &mut self.cells[i]
    }

    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_possible_wrap
    )]
    fn add(&mut self, start: EpochMs, dt: u64, util: Option<f32>) {
        let mut t = start;
        let end = start + dt as i64;
        while t < end {
            let hour = t.div_euclid(HOUR_MS);
            let hour_end = (hour + 1) * HOUR_MS;
            let piece = (end.min(hour_end) - t) as u64;
            let cell = self.cell(hour);
            cell.covered_ms += piece as u32;
            if let Some(u) = util {
                cell.util_ms += piece as u32;
                cell.util_sum += ((f64::from(u) * 100.0 + 0.5) as u64) * piece;
            }
            t += piece as i64;
        }
    }

    #[allow(clippy::cast_possible_wrap)]
    fn merge(&mut self, o: &Timeline) {
        for (i, c) in o.cells.iter().enumerate() {
            if *c == HourCell::default() {
                continue;
            }
            let cell = self.cell(o.base_hour + i as i64);
            cell.covered_ms += c.covered_ms;
            cell.util_ms += c.util_ms;
            cell.util_sum += c.util_sum;
        }
    }
}

/// A run of idle time: start, length, and how much of it was held (memory allocated).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Episode {
    /// Start of the run.
    pub start_ms: EpochMs,
    /// Length of the run.
    pub dur_ms: u64,
    /// Part of the run with memory allocated.
    pub held_ms: u64,
}

impl Episode {
    fn join(&mut self, later: &Episode) {
        self.dur_ms += later.dur_ms;
        self.held_ms += later.held_ms;
    }
}

/// Idle-run state machine (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct IdleState {
    /// Whether any interval or break was processed.
    started: bool,
    /// The first run, if it touched the start and has since closed: undecided.
    head: Option<Episode>,
    /// The run in progress.
    open: Option<Episode>,
    /// Whether `open` touches the start.
    open_touches_start: bool,
    /// Qualified episodes, in time order.
    episodes: Vec<Episode>,
}

impl IdleState {
    fn idle(&mut self, start: EpochMs, dt: u64, held: bool) {
        let held_ms = if held { dt } else { 0 };
        match &mut self.open {
            Some(run) => {
                run.dur_ms += dt;
                run.held_ms += held_ms;
            }
            None => {
                self.open = Some(Episode {
                    start_ms: start,
                    dur_ms: dt,
                    held_ms,
                });
                self.open_touches_start = !self.started;
            }
        }
        self.started = true;
    }

    /// A busy interval, an unknown-utilization interval, or a gap.
    fn interrupt(&mut self, min_ms: u64) {
        self.close(min_ms);
        self.started = true;
    }

    fn close(&mut self, min_ms: u64) {
        if let Some(run) = self.open.take() {
            if self.open_touches_start {
                self.head = Some(run);
            } else {
                self.qualify(run, min_ms);
            }
            self.open_touches_start = false;
        }
    }

    fn qualify(&mut self, run: Episode, min_ms: u64) {
        if run.dur_ms >= min_ms {
            self.episodes.push(run);
        }
    }

    /// Append `later` (whose first interval follows `self`'s boundary interval).
    fn merge(&mut self, later: &IdleState, min_ms: u64) {
        if !later.started {
            return;
        }
        if let Some(head) = later.head {
            // `later` began with an idle run that has since closed.
            match self.open.take() {
                Some(mut run) => {
                    run.join(&head);
                    if self.open_touches_start {
                        self.head = Some(run);
                    } else {
                        self.qualify(run, min_ms);
                    }
                    self.open_touches_start = false;
                }
                None => self.qualify(head, min_ms),
            }
        } else if later.open_touches_start {
            // `later` is one idle run from its start to its end.
            if let Some(o) = later.open {
                match &mut self.open {
                    Some(run) => run.join(&o),
                    None => {
                        self.open = Some(o);
                        self.open_touches_start = false;
                    }
                }
            }
            self.started = true;
            return;
        } else {
            // `later` began with a busy interval or a gap.
            self.close(min_ms);
        }
        self.episodes.extend_from_slice(&later.episodes);
        self.open = later.open;
        self.open_touches_start = false;
        self.started = true;
    }

    /// Decide the undecided runs: nothing comes before or after.
    fn finish(&self, min_ms: u64) -> Vec<Episode> {
        let mut out = Vec::with_capacity(self.episodes.len() + 2);
        if let Some(h) = self.head
            && h.dur_ms >= min_ms
        {
            out.push(h);
        }
        out.extend_from_slice(&self.episodes);
        if let Some(o) = self.open
            && o.dur_ms >= min_ms
        {
            out.push(o);
        }
        out
    }
}

/// The streaming accumulator of one device. See the module docs for its contract.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceAcc {
    first_ts: EpochMs,
    last: Sample,
    samples: u64,
    reordered: u64,
    duplicates: u64,
    overlaps: u64,
    covered_ms: u64,
    gaps: u64,
    gap_ms: u64,
    util: Weighted,
    util_hist: Option<UtilHist>,
    below_ms: u64,
    below_held_ms: u64,
    sm: Weighted,
    occupancy: Weighted,
    tensor: Weighted,
    dram: Weighted,
    mem_bw: Weighted,
    mem: Weighted,
    mem_hist: LogHist,
    mem_peak: Option<f32>,
    mem_total: Option<f32>,
    power: Weighted,
    power_peak: Option<f32>,
    power_limit: Option<f32>,
    idle: IdleState,
    timeline: Timeline,
    /// Count of gaps between samples by ⌊log2(ms)⌋, for the sampling-interval estimate.
    interval_log2: [u64; 48],
}

fn max_opt(a: Option<f32>, b: Option<f32>) -> Option<f32> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

/// Why a sample was not taken by [`DeviceAcc::push`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Older than the previous sample of the device.
    OutOfOrder,
    /// Same timestamp as the previous sample of the device.
    Duplicate,
}

impl DeviceAcc {
    /// Start an accumulator with its first sample.
    #[must_use]
    pub fn new(first: &Sample) -> Self {
        Self {
            first_ts: first.ts_ms,
            last: *first,
            samples: 1,
            reordered: 0,
            duplicates: 0,
            overlaps: 0,
            covered_ms: 0,
            gaps: 0,
            gap_ms: 0,
            util: Weighted::default(),
            util_hist: None,
            below_ms: 0,
            below_held_ms: 0,
            sm: Weighted::default(),
            occupancy: Weighted::default(),
            tensor: Weighted::default(),
            dram: Weighted::default(),
            mem_bw: Weighted::default(),
            mem: Weighted::default(),
            mem_hist: LogHist::default(),
            mem_peak: first.mem_used_mib,
            mem_total: first.mem_total_mib,
            power: Weighted::default(),
            power_peak: first.power_w,
            power_limit: first.power_limit_w,
            idle: IdleState::default(),
            timeline: Timeline::default(),
            interval_log2: [0; 48],
        }
    }

    /// Timestamp of the first sample.
    #[must_use]
    pub fn first_ts(&self) -> EpochMs {
        self.first_ts
    }

    /// Timestamp of the last sample.
    #[must_use]
    pub fn last_ts(&self) -> EpochMs {
        self.last.ts_ms
    }

    /// Fold the next sample in.
    pub fn push(&mut self, s: &Sample, st: &ProfileSettings) -> Result<(), Rejected> {
        let gap = s.ts_ms - self.last.ts_ms;
        if gap < 0 {
            self.reordered += 1;
            return Err(Rejected::OutOfOrder);
        }
        if gap == 0 {
            self.duplicates += 1;
            return Err(Rejected::Duplicate);
        }
        #[allow(clippy::cast_sign_loss)]
        self.step(gap as u64, st);
        self.take_peaks(s);
        self.last = *s;
        self.samples += 1;
        Ok(())
    }

    fn take_peaks(&mut self, s: &Sample) {
        self.mem_peak = max_opt(self.mem_peak, s.mem_used_mib);
        self.mem_total = max_opt(self.mem_total, s.mem_total_mib);
        self.power_peak = max_opt(self.power_peak, s.power_w);
        self.power_limit = max_opt(self.power_limit, s.power_limit_w);
    }

    /// The interval after `self.last`, `gap` ms long.
    fn step(&mut self, gap: u64, st: &ProfileSettings) {
        self.interval_log2[(63 - gap.leading_zeros() as usize).min(47)] += 1;
        if gap > st.max_gap_ms {
            self.gaps += 1;
            self.gap_ms += gap;
            self.idle.interrupt(st.min_idle_episode_ms);
            return;
        }
        let s = self.last;
        let dt = gap;
        self.covered_ms += dt;
        if let Some(u) = s.util_pct {
            self.util.add(u, dt);
            self.util_hist
                .get_or_insert_with(UtilHist::default)
                .add(u, dt);
            if u < st.idle_threshold_pct {
                let held = s.mem_used_mib.is_some_and(|m| m >= st.held_idle_min_mib);
                self.below_ms += dt;
                if held {
                    self.below_held_ms += dt;
                }
                self.idle.idle(s.ts_ms, dt, held);
            } else {
                self.idle.interrupt(st.min_idle_episode_ms);
            }
        } else {
            self.idle.interrupt(st.min_idle_episode_ms);
        }
        for (w, v) in [
            (&mut self.sm, s.sm_active_pct),
            (&mut self.occupancy, s.sm_occupancy_pct),
            (&mut self.tensor, s.tensor_active_pct),
            (&mut self.dram, s.dram_active_pct),
            (&mut self.mem_bw, s.mem_bw_util_pct),
            (&mut self.mem, s.mem_used_mib),
            (&mut self.power, s.power_w),
        ] {
            if let Some(v) = v {
                w.add(v, dt);
            }
        }
        if let Some(m) = s.mem_used_mib {
            self.mem_hist.add(f64::from(m), dt);
        }
        self.timeline.add(s.ts_ms, dt, s.util_pct);
    }

    /// Append `later`, an accumulator of the same device that starts after this one ends.
    /// If they overlap in time, they are joined with a break and `overlaps` is counted.
    pub fn merge(&mut self, later: &DeviceAcc, st: &ProfileSettings) {
        let gap = later.first_ts - self.last.ts_ms;
        if gap > 0 {
            #[allow(clippy::cast_sign_loss)]
            self.step(gap as u64, st);
        } else {
            self.overlaps += 1;
            self.idle.interrupt(st.min_idle_episode_ms);
        }
        self.idle.merge(&later.idle, st.min_idle_episode_ms);
        self.samples += later.samples;
        self.reordered += later.reordered;
        self.duplicates += later.duplicates;
        self.overlaps += later.overlaps;
        self.covered_ms += later.covered_ms;
        self.gaps += later.gaps;
        self.gap_ms += later.gap_ms;
        self.util.merge(&later.util);
        match (&mut self.util_hist, &later.util_hist) {
            (Some(a), Some(b)) => a.merge(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
        self.below_ms += later.below_ms;
        self.below_held_ms += later.below_held_ms;
        self.sm.merge(&later.sm);
        self.occupancy.merge(&later.occupancy);
        self.tensor.merge(&later.tensor);
        self.dram.merge(&later.dram);
        self.mem_bw.merge(&later.mem_bw);
        self.mem.merge(&later.mem);
        self.mem_hist.merge(&later.mem_hist);
        self.mem_peak = max_opt(self.mem_peak, later.mem_peak);
        self.mem_total = max_opt(self.mem_total, later.mem_total);
        self.power.merge(&later.power);
        self.power_peak = max_opt(self.power_peak, later.power_peak);
        self.power_limit = max_opt(self.power_limit, later.power_limit);
        self.timeline.merge(&later.timeline);
        for (a, b) in self
            .interval_log2
            .iter_mut()
            .zip(later.interval_log2.iter())
        {
            *a += b;
        }
        if later.last.ts_ms >= self.last.ts_ms {
            self.last = later.last;
        }
    }

    /// Summarize, in `tz` for hour-of-week patterns.
    #[must_use]
    pub fn finish(&self, st: &ProfileSettings, tz: &jiff::tz::TimeZone) -> DeviceStats {
        let episodes = self.idle.finish(st.min_idle_episode_ms);
        let idle_ms: u64 = episodes.iter().map(|e| e.dur_ms).sum();
        let held_ms: u64 = episodes.iter().map(|e| e.held_ms).sum();
        let util = self.util_hist.as_ref().and_then(|h| {
            Some(UtilStats {
                mean_pct: self.util.mean()?,
                p50_pct: h.quantile(0.5)?,
                p95_pct: h.quantile(0.95)?,
                max_pct: h.max()?,
                observed_hours: ms_to_h(self.util.ms),
            })
        });
        // Idle time per timeline hour, from the episodes.
        let mut idle_by_hour: BTreeMap<i64, u64> = BTreeMap::new();
        for e in &episodes {
            let mut t = e.start_ms;
            #[allow(clippy::cast_possible_wrap)]
            let end = e.start_ms + e.dur_ms as i64;
            while t < end {
                let hour = t.div_euclid(HOUR_MS);
                let piece = end.min((hour + 1) * HOUR_MS) - t;
                #[allow(clippy::cast_sign_loss)]
                {
                    *idle_by_hour.entry(hour).or_default() += piece as u64;
                }
                t += piece;
            }
        }
        let mut hour_of_week = vec![HowBin::default(); 168];
        let mut hourly = Vec::with_capacity(self.timeline.cells.len());
        for (i, c) in self.timeline.cells.iter().enumerate() {
            #[allow(clippy::cast_possible_wrap)]
            let hour = self.timeline.base_hour + i as i64;
            if c.covered_ms == 0 {
                continue;
            }
            let idle = idle_by_hour.get(&hour).copied().unwrap_or(0);
            let start_ms = hour * HOUR_MS;
            hourly.push(HourPoint {
                start_ms,
                covered_hours: ms_to_h(u64::from(c.covered_ms)),
                util_hours: ms_to_h(u64::from(c.util_ms)),
                util_weighted: c.util_sum,
                idle_hours: ms_to_h(idle),
            });
            if let Some(how) = hour_of_week_index(start_ms, tz) {
                let bin = &mut hour_of_week[how];
                bin.covered_hours += ms_to_h(u64::from(c.covered_ms));
                bin.util_hours += ms_to_h(u64::from(c.util_ms));
                #[allow(clippy::cast_precision_loss)]
                {
                    bin.util_pct_hours += c.util_sum as f64 / 100.0 / 3_600_000.0;
                }
                bin.idle_hours += ms_to_h(idle);
            }
        }
        DeviceStats {
            first_ts_ms: self.first_ts,
            last_ts_ms: self.last.ts_ms,
            samples: self.samples,
            reordered: self.reordered,
            duplicates: self.duplicates,
            overlaps: self.overlaps,
            observed_hours: ms_to_h(self.covered_ms),
            #[allow(clippy::cast_sign_loss)]
            span_hours: ms_to_h((self.last.ts_ms - self.first_ts) as u64),
            gaps: self.gaps,
            gap_hours: ms_to_h(self.gap_ms),
            sampling_interval_s: self.median_interval_s(),
            util,
            util_by_percent_hours: self
                .util_hist
                .as_ref()
                .map(|h| h.by_percent().into_iter().map(ms_to_h).collect())
                .unwrap_or_default(),
            sm_active_pct: self.sm.mean(),
            sm_occupancy_pct: self.occupancy.mean(),
            tensor_active_pct: self.tensor.mean(),
            dram_active_pct: self.dram.mean(),
            mem_bw_util_pct: self.mem_bw.mean(),
            mem_used_mean_mib: self.mem.mean(),
            mem_used_p95_mib: self.mem_hist.quantile(0.95),
            mem_used_peak_mib: self.mem_peak.map(f64::from),
            mem_total_mib: self.mem_total.map(f64::from),
            power_mean_w: self.power.mean(),
            power_peak_w: self.power_peak.map(f64::from),
            power_limit_w: self.power_limit.map(f64::from),
            below_threshold_hours: ms_to_h(self.below_ms),
            idle_hours: ms_to_h(idle_ms),
            held_idle_hours: ms_to_h(held_ms),
            idle_episodes: episodes,
            hour_of_week,
            hourly,
        }
    }

    /// Median gap between samples, from the log2 buckets (geometric middle of the bucket).
    #[allow(clippy::cast_precision_loss)]
    fn median_interval_s(&self) -> Option<f64> {
        let total: u64 = self.interval_log2.iter().sum();
        if total == 0 {
            return None;
        }
        let mut acc = 0;
        for (i, n) in self.interval_log2.iter().enumerate() {
            acc += n;
            if acc * 2 >= total {
                return Some((2f64).powf(i as f64 + 0.5) / 1000.0);
            }
        }
        None
    }
}

#[allow(clippy::cast_precision_loss)]
fn ms_to_h(ms: u64) -> f64 {
    ms as f64 / 3_600_000.0
}

/// Monday-first hour-of-week index (`0..168`) of an instant in `tz`.
#[must_use]
pub fn hour_of_week_index(ms: EpochMs, tz: &jiff::tz::TimeZone) -> Option<usize> {
    let ts = jiff::Timestamp::from_millisecond(ms).ok()?;
    let dt = tz.to_datetime(ts);
    let day = usize::try_from(dt.weekday().to_monday_zero_offset()).ok()?;
    let hour = usize::try_from(dt.hour()).ok()?;
    Some(day * 24 + hour)
}

/// Utilization summary of one device.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UtilStats {
    /// Time-weighted mean.
    pub mean_pct: f64,
    /// Median (0.1 % bins).
    pub p50_pct: f64,
    /// 95th percentile (0.1 % bins).
    pub p95_pct: f64,
    /// Maximum.
    pub max_pct: f64,
    /// Hours with a utilization reading.
    pub observed_hours: f64,
}

/// One hour-of-week bin, summed over all weeks observed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct HowBin {
    /// Hours with data in this bin.
    pub covered_hours: f64,
    /// Hours with a utilization reading in this bin.
    pub util_hours: f64,
    /// Σ utilization % × hours (divide by `util_hours` for the mean).
    pub util_pct_hours: f64,
    /// Idle-episode hours in this bin.
    pub idle_hours: f64,
}

/// One UTC hour of a device's timeline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct HourPoint {
    /// Start of the hour.
    pub start_ms: EpochMs,
    /// Hours with data (≤ 1).
    pub covered_hours: f64,
    /// Hours with a utilization reading.
    pub util_hours: f64,
    /// Σ utilization × 100 × ms (exact; mean = `util_weighted / 100 / util ms`).
    pub util_weighted: u64,
    /// Idle-episode hours.
    pub idle_hours: f64,
}

/// Everything the profile knows about one device, summarized.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceStats {
    /// First sample.
    pub first_ts_ms: EpochMs,
    /// Last sample.
    pub last_ts_ms: EpochMs,
    /// Samples taken.
    pub samples: u64,
    /// Samples dropped for being older than the previous one.
    pub reordered: u64,
    /// Samples dropped for repeating the previous timestamp.
    pub duplicates: u64,
    /// Pieces of data that overlapped in time and were joined with a break.
    pub overlaps: u64,
    /// Hours with data (the GPU-hours of this device).
    pub observed_hours: f64,
    /// Hours from first to last sample.
    pub span_hours: f64,
    /// Gaps longer than the maximum gap.
    pub gaps: u64,
    /// Hours inside such gaps (no data).
    pub gap_hours: f64,
    /// Median time between samples.
    pub sampling_interval_s: Option<f64>,
    /// Utilization statistics, `None` without a utilization signal.
    pub util: Option<UtilStats>,
    /// Hours at each whole percent of utilization (101 entries), for charts.
    pub util_by_percent_hours: Vec<f64>,
    /// Mean SM activity.
    pub sm_active_pct: Option<f64>,
    /// Mean SM occupancy.
    pub sm_occupancy_pct: Option<f64>,
    /// Mean tensor-pipe activity.
    pub tensor_active_pct: Option<f64>,
    /// Mean DRAM activity.
    pub dram_active_pct: Option<f64>,
    /// Mean memory-interface busy time.
    pub mem_bw_util_pct: Option<f64>,
    /// Mean memory used.
    pub mem_used_mean_mib: Option<f64>,
    /// 95th percentile of memory used (within 1 %).
    pub mem_used_p95_mib: Option<f64>,
    /// Peak memory used.
    pub mem_used_peak_mib: Option<f64>,
    /// Memory installed.
    pub mem_total_mib: Option<f64>,
    /// Mean power draw.
    pub power_mean_w: Option<f64>,
    /// Peak power draw.
    pub power_peak_w: Option<f64>,
    /// Power limit.
    pub power_limit_w: Option<f64>,
    /// Hours below the idle threshold, episodes or not.
    pub below_threshold_hours: f64,
    /// Hours in idle episodes.
    pub idle_hours: f64,
    /// Idle-episode hours with memory held.
    pub held_idle_hours: f64,
    /// The idle episodes.
    pub idle_episodes: Vec<Episode>,
    /// 168 hour-of-week bins, Monday 00:00 first, in the report's time zone.
    pub hour_of_week: Vec<HowBin>,
    /// The hourly timeline (hours with data only).
    pub hourly: Vec<HourPoint>,
}

/// Builds per-device accumulators from a stream of samples; readers feed it.
///
/// Devices are numbered in order of first appearance; readers look a device up once and then
/// push samples by number, so the hot path never hashes a key.
#[derive(Clone, Debug)]
pub struct ProfileBuilder {
    settings: ProfileSettings,
    devices: Vec<Slot>,
    index: std::collections::HashMap<DeviceKey, usize>,
}

#[derive(Clone, Debug)]
struct Slot {
    key: DeviceKey,
    info: DeviceInfo,
    acc: Option<DeviceAcc>,
}

/// A device's number inside one [`ProfileBuilder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceId(usize);

impl ProfileBuilder {
    /// An empty builder.
    #[must_use]
    pub fn new(settings: ProfileSettings) -> Self {
        Self {
            settings,
            devices: Vec::new(),
            index: std::collections::HashMap::new(),
        }
    }

    /// The number of `key`, registering it on first sight.
    pub fn device(&mut self, key: DeviceKey) -> DeviceId {
        if let Some(i) = self.index.get(&key) {
            return DeviceId(*i);
        }
        let i = self.devices.len();
        self.index.insert(key.clone(), i);
        self.devices.push(Slot {
            key,
            info: DeviceInfo::default(),
            acc: None,
        });
        DeviceId(i)
    }

    /// What is known about device `id`, to update.
    pub fn info_mut(&mut self, id: DeviceId) -> &mut DeviceInfo {
        &mut self.devices[id.0].info
    }

    /// Fold a sample of device `id`.
    pub fn push(&mut self, id: DeviceId, s: &Sample) -> Result<(), Rejected> {
        let slot = &mut self.devices[id.0];
        match &mut slot.acc {
            Some(acc) => acc.push(s, &self.settings),
            None => {
                slot.acc = Some(DeviceAcc::new(s));
                Ok(())
            }
        }
    }

    /// Finish building: the devices that got at least one sample.
    #[must_use]
    pub fn build(self) -> Profile {
        let mut devices = BTreeMap::new();
        for slot in self.devices {
            if let Some(acc) = slot.acc {
                devices.insert(slot.key, vec![(slot.info, acc)]);
            }
        }
        Profile { parts: devices }
    }
}

/// The profile of a fleet: per device, the pieces read so far (one per file or chunk), to be
/// joined in time order by [`Profile::merge`] and [`Profile::finish`].
#[derive(Clone, Debug, Default)]
pub struct Profile {
    parts: BTreeMap<DeviceKey, Vec<(DeviceInfo, DeviceAcc)>>,
}

impl Profile {
    /// Add all pieces of `other`.
    pub fn merge(&mut self, other: Profile) {
        for (k, mut v) in other.parts {
            self.parts.entry(k).or_default().append(&mut v);
        }
    }

    /// Join each device's pieces in time order (keeps memory bounded during long reads).
    pub fn compact(&mut self, st: &ProfileSettings) {
        for pieces in self.parts.values_mut() {
            if pieces.len() > 1 {
                let joined = join(std::mem::take(pieces), st);
                pieces.push(joined);
            }
        }
    }

    /// Number of devices.
    #[must_use]
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    /// Whether there is no device.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Join every device's pieces and summarize each device.
    #[must_use]
    pub fn finish(self, st: &ProfileSettings, tz: &jiff::tz::TimeZone) -> Vec<DeviceProfile> {
        self.parts
            .into_iter()
            .map(|(key, pieces)| {
                let (info, acc) = join(pieces, st);
                DeviceProfile {
                    stats: acc.finish(st, tz),
                    key,
                    info,
                }
            })
            .collect()
    }

    /// The joined accumulator of each device (for tests and tools).
    #[must_use]
    pub fn joined(self, st: &ProfileSettings) -> BTreeMap<DeviceKey, (DeviceInfo, DeviceAcc)> {
        self.parts
            .into_iter()
            .map(|(k, pieces)| (k, join(pieces, st)))
            .collect()
    }
}

fn join(mut pieces: Vec<(DeviceInfo, DeviceAcc)>, st: &ProfileSettings) -> (DeviceInfo, DeviceAcc) {
    pieces.sort_by_key(|(_, acc)| (acc.first_ts, acc.last.ts_ms));
    let mut it = pieces.into_iter();
    let (mut info, mut acc) = it.next().expect("a device has at least one piece");
    for (i, a) in it {
        info.merge(&i);
        acc.merge(&a, st);
    }
    (info, acc)
}

/// One device: identity, metadata and statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceProfile {
    /// Identity.
    pub key: DeviceKey,
    /// Metadata.
    pub info: DeviceInfo,
    /// Statistics.
    pub stats: DeviceStats,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn st() -> ProfileSettings {
        ProfileSettings::default()
    }

    fn s(ts_min: i64, util: f32, mem: f32) -> Sample {
        Sample {
            util_pct: Some(util),
            mem_used_mib: Some(mem),
            mem_total_mib: Some(81_559.0),
            ..Sample::at(ts_min * 60_000)
        }
    }

    fn fold(samples: &[Sample]) -> DeviceAcc {
        let mut acc = DeviceAcc::new(&samples[0]);
        for x in &samples[1..] {
            let _ = acc.push(x, &st());
        }
        acc
    }

    #[test]
    fn sample_stands_until_next_and_last_stands_for_nothing() {
        let acc = fold(&[s(0, 50.0, 0.0), s(1, 100.0, 0.0), s(3, 0.0, 0.0)]);
        let stats = acc.finish(&st(), &jiff::tz::TimeZone::UTC);
        assert!((stats.observed_hours - 3.0 / 60.0).abs() < 1e-12);
        // 1 minute at 50 %, 2 minutes at 100 %.
        let u = stats.util.expect("util");
        assert!((u.mean_pct - (50.0 + 200.0) / 3.0).abs() < 1e-9);
    }

    #[test]
    fn long_gap_is_no_data_and_breaks_idle() {
        // idle 8 min, gap 20 min, idle 8 min: no episode (each run < 10 min).
        let mut v: Vec<Sample> = (0..=8).map(|m| s(m, 0.0, 2048.0)).collect();
        v.extend((28..=36).map(|m| s(m, 0.0, 2048.0)));
        let stats = fold(&v).finish(&st(), &jiff::tz::TimeZone::UTC);
        assert_eq!(stats.gaps, 1);
        assert!((stats.observed_hours - 16.0 / 60.0).abs() < 1e-12);
        assert_eq!(stats.idle_hours, 0.0);
        assert!((stats.below_threshold_hours - 16.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn idle_episode_and_held_idle() {
        // 30 min idle holding 2 GiB, then busy.
        let mut v: Vec<Sample> = (0..30).map(|m| s(m, 1.0, 2048.0)).collect();
        v.push(s(30, 90.0, 2048.0));
        v.push(s(31, 90.0, 2048.0));
        let stats = fold(&v).finish(&st(), &jiff::tz::TimeZone::UTC);
        assert!((stats.idle_hours - 0.5).abs() < 1e-12);
        assert!((stats.held_idle_hours - 0.5).abs() < 1e-12);
        assert_eq!(stats.idle_episodes.len(), 1);
    }

    #[test]
    fn out_of_order_and_duplicates_are_counted_and_dropped() {
        let mut acc = DeviceAcc::new(&s(10, 1.0, 0.0));
        assert_eq!(acc.push(&s(5, 1.0, 0.0), &st()), Err(Rejected::OutOfOrder));
        assert_eq!(acc.push(&s(10, 1.0, 0.0), &st()), Err(Rejected::Duplicate));
        assert!(acc.push(&s(11, 1.0, 0.0), &st()).is_ok());
        let stats = acc.finish(&st(), &jiff::tz::TimeZone::UTC);
        assert_eq!(
            (stats.samples, stats.reordered, stats.duplicates),
            (2, 1, 1)
        );
    }

    #[test]
    fn hour_of_week_is_monday_first_in_the_zone() {
        // 2026-01-05 is a Monday. 00:30 UTC is Sunday 19:30 in New York.
        let ms = jiff::Timestamp::from_second(1_767_573_000)
            .expect("ts")
            .as_millisecond();
        assert_eq!(hour_of_week_index(ms, &jiff::tz::TimeZone::UTC), Some(0));
        let ny = jiff::tz::TimeZone::get("America/New_York").expect("tz");
        assert_eq!(hour_of_week_index(ms, &ny), Some(6 * 24 + 19));
    }

    fn arb_samples() -> impl Strategy<Value = Vec<Sample>> {
        // Gaps from 1 s to 20 min (so some exceed the 5 min maximum gap), utilization that is
        // often idle, memory around the held threshold, some missing readings.
        prop::collection::vec(
            (
                1_000i64..1_200_000,
                prop_oneof![
                    Just(None),
                    (0f32..8.0).prop_map(Some),
                    (0f32..=100.0).prop_map(Some)
                ],
                prop_oneof![Just(None), (0f32..4096.0).prop_map(Some)],
                prop_oneof![Just(None), (0f32..700.0).prop_map(Some)],
                prop_oneof![Just(None), (0f32..=100.0).prop_map(Some)],
            ),
            2..300,
        )
        .prop_map(|v| {
            let mut t = 1_767_225_600_000i64;
            v.into_iter()
                .map(|(gap, util, mem, power, sm)| {
                    t += gap;
                    Sample {
                        util_pct: util,
                        mem_used_mib: mem,
                        power_w: power,
                        sm_active_pct: sm,
                        ..Sample::at(t)
                    }
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn split_and_merge_equals_sequential(samples in arb_samples(), cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..4)) {
            let whole = fold(&samples);
            let mut points: Vec<usize> = cuts.iter().map(|c| 1 + c.index(samples.len() - 1)).collect();
            points.sort_unstable();
            points.dedup();
            let mut pieces = Vec::new();
            let mut start = 0;
            for p in points.into_iter().chain(std::iter::once(samples.len())) {
                if p > start {
                    pieces.push(fold(&samples[start..p]));
                    start = p;
                }
            }
            let mut merged = pieces[0].clone();
            for p in &pieces[1..] {
                merged.merge(p, &st());
            }
            prop_assert_eq!(&merged, &whole);
            let tz = jiff::tz::TimeZone::UTC;
            prop_assert_eq!(merged.finish(&st(), &tz), whole.finish(&st(), &tz));
        }
    }
}
