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
//! and counted in `duplicates`; one far ahead of both its neighbours is an outlier, dropped and
//! counted in `outliers` (see [`DeviceAcc::push`]). [`ProfileBuilder`] drops samples outside the
//! plausible time window before they reach an accumulator.
//!
//! **Merging.** [`DeviceAcc::merge`] appends a later accumulator: the gap between the two is
//! processed exactly as the sequential fold would have, so `merge(acc(a), acc(b)) == acc(a ++ b)`
//! holds bit for bit (all sums are integers; a property test checks it). This is what lets a file
//! be cut into chunks, and many files be read, in parallel. Accumulators that overlap in time
//! (two logs of the same device covering the same hours) cannot be joined exactly: [`Profile`]
//! never merges them, but drops the covered piece or has the inputs read again by its overlap
//! rule, so each device-hour counts once.
//!
//! **Idle episodes.** A run of consecutive intervals with utilization below the idle threshold
//! is an idle episode when it lasts at least [`ProfileSettings::min_idle_episode_ms`]. A run is
//! broken by a busy interval, a gap, or an interval without a utilization reading. Runs that
//! touch the start of an accumulator stay undecided until merged with what came before (or
//! finalized), so chunking never changes which episodes exist.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::hist::{LogHist, UtilHist};
use crate::sample::{DeviceInfo, DeviceKey, EpochMs, Sample};
use crate::settings::ProfileSettings;

use crate::HOUR_MS;

/// Time-weighted sum of a non-negative quantity, in hundredths of its unit × milliseconds.
///
/// The sum is `u64` where readings are bounded small — percentages, and power up to
/// [`MAX_POWER_W`](crate::sample::MAX_POWER_W): centuries of readings fit — and `u128` for
/// memory, where a TiB for six years would pass `u64`. (All `u128` took 32 bytes each with its
/// alignment, 128 bytes a device more.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Weighted<S = u64> {
    /// Milliseconds with a reading.
    pub ms: u64,
    /// Σ value × 100 × ms.
    pub sum: S,
}

/// The sum of a [`Weighted`]: `u64` or `u128`.
pub trait WeightSum: Copy + Default + Eq + Into<u128> {
    /// `centi` (a reading in hundredths) × `ms`.
    fn product(centi: u64, ms: u64) -> Self;
    /// `self + other`, at most the largest value (readers bound every reading, and a stored
    /// accumulator whose readings are out of bounds is refused, so this never binds).
    fn plus(self, other: Self) -> Self;
    /// The sum as a float.
    fn as_f64(self) -> f64;
}

impl WeightSum for u64 {
    fn product(centi: u64, ms: u64) -> Self {
        centi.saturating_mul(ms)
    }

    fn plus(self, other: Self) -> Self {
        self.saturating_add(other)
    }

    #[allow(clippy::cast_precision_loss)]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl WeightSum for u128 {
    fn product(centi: u64, ms: u64) -> Self {
        u128::from(centi) * u128::from(ms)
    }

    fn plus(self, other: Self) -> Self {
        self.saturating_add(other)
    }

    #[allow(clippy::cast_precision_loss)]
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl<S: WeightSum> Weighted<S> {
    /// `v` is non-negative (sanitized), so `+ 0.5` then truncation rounds to nearest without
    /// a libm call in this per-sample path.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn add(&mut self, v: f32, ms: u64) {
        self.ms += ms;
        self.sum = self
            .sum
            .plus(S::product((f64::from(v) * 100.0 + 0.5) as u64, ms));
    }

    fn merge(&mut self, o: &Self) {
        self.ms += o.ms;
        self.sum = self.sum.plus(o.sum);
    }

    /// Time-weighted mean, `None` without readings.
    #[must_use]
    #[allow(clippy::cast_precision_loss)]
    pub fn mean(&self) -> Option<f64> {
        (self.ms > 0).then(|| self.sum.as_f64() / 100.0 / self.ms as f64)
    }

    /// Whether a decoded sum could come from readings of at most `max` over its time.
    fn within(&self, covered_ms: u64, max: u64) -> bool {
        self.ms <= covered_ms && self.sum.into() <= u128::from(self.ms) * 100 * u128::from(max)
    }
}

/// One hour (UTC, aligned) of a device's timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct HourCell {
    covered_ms: u32,
    util_ms: u32,
    util_sum: u64,
}

/// Hourly cells from `base_hour` on, grown on demand.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
            // Grown by an eighth, not doubled: a day's timeline is 24 cells, not 32, in
            // every one of 100,000 devices (amortized growth all the same).
            let need = i + 1 - self.cells.len();
            if need > self.cells.capacity() - self.cells.len() {
                self.cells.reserve_exact(need.max(self.cells.len() / 8));
            }
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
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
///
/// It serializes (serde) with every field, so that a stored accumulator joins again exactly as
/// the one it was (a history store keeps them per device and hour).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceAcc {
    first_ts: EpochMs,
    last: Sample,
    /// A sample more than the maximum gap after `last`, waiting for the next sample to confirm
    /// it (see [`DeviceAcc::push`]). Boxed: rare, and a sample is 88 bytes.
    pending: Option<Box<Sample>>,
    samples: u64,
    reordered: u64,
    duplicates: u64,
    outliers: u64,
    overlaps: u64,
    overlap_samples: u64,
    overlap_ms: u64,
    covered_ms: u64,
    gaps: u64,
    gap_ms: u64,
    util: Weighted,
    util_hist: Option<UtilHist>,
    /// The smallest and largest utilization of an interval, exactly (the histogram holds them
    /// to its 0.1 % bins: a reading of 6.22 % had a maximum of 6.2 % under a mean of 6.22 %).
    util_range: Option<(f32, f32)>,
    /// Time with utilization below each edge of `UTIL_BAND_EDGES_PCT`, exactly.
    band_below_ms: [u64; 4],
    below_ms: u64,
    below_held_ms: u64,
    sm: Weighted,
    occupancy: Weighted,
    tensor: Weighted,
    dram: Weighted,
    mem_bw: Weighted,
    mem: Weighted<u128>,
    mem_hist: LogHist,
    mem_peak: Option<f32>,
    mem_total: Option<f32>,
    power: Weighted,
    power_peak: Option<f32>,
    power_limit: Option<f32>,
    idle: IdleState,
    timeline: Timeline,
    /// The gaps between samples by ⌊log2(ms)⌋, for the sampling interval.
    intervals: Intervals,
}

/// Count of gaps between samples by ⌊log2(ms)⌋, and their sum in ms, for the sampling
/// interval: the mean gap of the bucket that holds the median, exact for a steady interval (a
/// bucket's geometric middle was off by up to √2: 0.72 s for a 1 s log). Only the buckets that
/// have gaps, ascending: a steady log fills one or two of the 32, and two dense arrays took
/// 384 bytes a device. (Counts are `u32`: 4 billion gaps of one size is 136 years at 1 s; the
/// sums need `u64`.) Serialized as the two dense arrays it replaced, so stored accumulators
/// read the same.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Intervals(Vec<(u8, u32, u64)>);

impl Intervals {
    #[allow(clippy::cast_possible_truncation)]
    fn add(&mut self, bucket: usize, count: u32, sum_ms: u64) {
        let b = bucket.min(INTERVAL_BUCKETS - 1) as u8;
        match self.0.iter().position(|e| e.0 >= b) {
            Some(i) if self.0[i].0 == b => {
                let e = &mut self.0[i];
                e.1 = e.1.saturating_add(count);
                e.2 = e.2.saturating_add(sum_ms);
            }
            Some(i) => self.0.insert(i, (b, count, sum_ms)),
            None => self.0.push((b, count, sum_ms)),
        }
    }

    fn merge(&mut self, other: &Intervals) {
        for &(b, n, sum) in &other.0 {
            self.add(usize::from(b), n, sum);
        }
    }

    fn count(&self) -> u64 {
        self.0.iter().map(|e| u64::from(e.1)).sum()
    }

    /// The mean gap of the bucket that holds the median, in seconds.
    #[allow(clippy::cast_precision_loss)]
    fn median_s(&self) -> Option<f64> {
        let total = self.count();
        let mut acc = 0u64;
        for &(_, n, sum) in &self.0 {
            acc += u64::from(n);
            if n > 0 && acc * 2 >= total {
                return Some(sum as f64 / f64::from(n) / 1000.0);
            }
        }
        None
    }

    fn dense(&self) -> ([u32; INTERVAL_BUCKETS], [u64; INTERVAL_BUCKETS]) {
        let (mut counts, mut sums) = ([0; INTERVAL_BUCKETS], [0; INTERVAL_BUCKETS]);
        for &(b, n, sum) in &self.0 {
            counts[usize::from(b)] = n;
            sums[usize::from(b)] = sum;
        }
        (counts, sums)
    }
}

impl Serialize for Intervals {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.dense().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Intervals {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (counts, sums) = <([u32; INTERVAL_BUCKETS], [u64; INTERVAL_BUCKETS])>::deserialize(d)?;
        let mut out = Intervals::default();
        for (b, (n, sum)) in counts.into_iter().zip(sums).enumerate() {
            if n > 0 || sum > 0 {
                out.add(b, n, sum);
            }
        }
        Ok(out)
    }
}

/// Buckets of the interval estimate: gaps up to 2^32 ms (49 days) each have their own; longer
/// ones share the last (they are gaps, never the typical interval).
const INTERVAL_BUCKETS: usize = 32;

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
    /// Dated outside the plausible window ([`ProfileSettings::earliest_ms`] ..
    /// [`ProfileSettings::latest_ms`]).
    OutsideWindow,
    /// Not after the time from which this input holds the device (an overlap being resolved,
    /// see [`Profile`]).
    Overlapped,
    /// Outside the time range asked for ([`ProfileBuilder::with_range`]): not an error, the
    /// sample belongs to another window.
    OutsideRange,
}

/// What [`DeviceAcc::push`] did with a sample it took.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Folded in (or held until the next sample confirms it).
    Sample,
    /// Folded in, and the device's previous sample, at the given time, was found to be an
    /// outlier (ahead of both its neighbours) and dropped.
    DroppedOutlier(EpochMs),
}

impl DeviceAcc {
    /// Start an accumulator with its first sample.
    #[must_use]
    pub fn new(first: &Sample) -> Self {
        Self {
            first_ts: first.ts_ms,
            last: *first,
            pending: None,
            samples: 1,
            reordered: 0,
            duplicates: 0,
            outliers: 0,
            overlaps: 0,
            overlap_samples: 0,
            overlap_ms: 0,
            covered_ms: 0,
            gaps: 0,
            gap_ms: 0,
            util: Weighted::default(),
            util_hist: None,
            util_range: None,
            band_below_ms: [0; 4],
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
            intervals: Intervals::default(),
        }
    }

    /// Samples taken.
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.samples + u64::from(self.pending.is_some())
    }

    /// Hours with data.
    #[must_use]
    pub fn covered_ms(&self) -> u64 {
        self.covered_ms
    }

    /// Count samples and time dropped because another input held this device then.
    pub fn add_overlap(&mut self, samples: u64, ms: u64) {
        self.overlaps += 1;
        self.overlap_samples += samples;
        self.overlap_ms += ms;
    }

    /// Take over the overlap counts of `old` (the accumulator a rebuild replaces).
    fn carry_overlaps(&mut self, old: &DeviceAcc) {
        self.overlaps += old.overlaps;
        self.overlap_samples += old.overlap_samples;
        self.overlap_ms += old.overlap_ms;
    }

    /// Bytes this accumulator holds, on the stack and the heap (for the memory budget).
    #[must_use]
    pub fn footprint_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.util_hist.as_ref().map_or(0, UtilHist::heap_bytes)
            + self.mem_hist.heap_bytes()
            + self.timeline.cells.capacity() * std::mem::size_of::<HourCell>()
            + self.idle.episodes.capacity() * std::mem::size_of::<Episode>()
    }

    /// Timestamp of the first sample.
    #[must_use]
    pub fn first_ts(&self) -> EpochMs {
        self.first_ts
    }

    /// Timestamp of the last sample (including one held for confirmation).
    #[must_use]
    pub fn last_ts(&self) -> EpochMs {
        self.pending.as_ref().map_or(self.last.ts_ms, |p| p.ts_ms)
    }

    /// Fold the next sample in.
    ///
    /// **Outliers.** A sample more than the maximum gap after the previous one is held until
    /// the next sample that continues the series arrives: if that one is at or after it, it is
    /// folded in; if that one falls between the previous sample and the held one, the held
    /// sample was ahead of both its neighbours (a clock glitch, a line from another year) and
    /// is dropped as an outlier, so it never becomes the anchor that turns every later sample
    /// into `out_of_order`. (A next sample behind the previous one is out of order as usual.) The first sample of an accumulator is treated
    /// the same way: when the second sample is earlier, the first is the outlier.
    pub fn push(&mut self, s: &Sample, st: &ProfileSettings) -> Result<Taken, Rejected> {
        // The common case first: nothing held, the next sample within the maximum gap.
        if self.pending.is_none() && self.samples > 1 {
            let gap = s.ts_ms.saturating_sub(self.last.ts_ms);
            #[allow(clippy::cast_sign_loss)]
            if gap > 0 && gap as u64 <= st.max_gap_ms {
                self.step(gap as u64, st);
                self.take_peaks(s);
                self.last = *s;
                self.samples += 1;
                return Ok(Taken::Sample);
            }
        }
        let mut taken = Taken::Sample;
        if let Some(p) = self.pending.as_deref().copied() {
            if s.ts_ms <= self.last.ts_ms {
                // Behind the confirmed samples too: it says nothing about the held one.
                if s.ts_ms == self.last.ts_ms {
                    self.duplicates += 1;
                    return Err(Rejected::Duplicate);
                }
                self.reordered += 1;
                return Err(Rejected::OutOfOrder);
            }
            self.pending = None;
            if s.ts_ms < p.ts_ms {
                self.outliers += 1;
                taken = Taken::DroppedOutlier(p.ts_ms);
            } else {
                self.confirm(&p, st);
            }
        } else if self.samples == 1
            && self.covered_ms == 0
            && self.last.ts_ms.saturating_sub(s.ts_ms)
                > i64::try_from(st.max_gap_ms).unwrap_or(i64::MAX)
        {
            // The anchor is ahead of the sample after it: drop the anchor.
            let dropped = self.last.ts_ms;
            let kept = (self.reordered, self.duplicates, self.outliers + 1);
            *self = Self::new(s);
            (self.reordered, self.duplicates, self.outliers) = kept;
            return Ok(Taken::DroppedOutlier(dropped));
        }
        let gap = s.ts_ms.saturating_sub(self.last.ts_ms);
        if gap < 0 {
            self.reordered += 1;
            return Err(Rejected::OutOfOrder);
        }
        if gap == 0 {
            self.duplicates += 1;
            return Err(Rejected::Duplicate);
        }
        #[allow(clippy::cast_sign_loss)]
        if gap as u64 > st.max_gap_ms {
            self.pending = Some(Box::new(*s));
            return Ok(taken);
        }
        self.confirm(s, st);
        Ok(taken)
    }

    /// Take `s`, which follows `self.last`.
    fn confirm(&mut self, s: &Sample, st: &ProfileSettings) {
        #[allow(clippy::cast_sign_loss)]
        self.step((s.ts_ms - self.last.ts_ms) as u64, st);
        self.take_peaks(s);
        self.last = *s;
        self.samples += 1;
    }

    /// Decide a held sample: nothing earlier came after it, so it stands.
    fn settle(&mut self, st: &ProfileSettings) {
        if let Some(p) = self.pending.take() {
            self.confirm(&p, st);
        }
    }

    fn take_peaks(&mut self, s: &Sample) {
        self.mem_peak = max_opt(self.mem_peak, s.mem_used_mib);
        self.mem_total = max_opt(self.mem_total, s.mem_total_mib);
        self.power_peak = max_opt(self.power_peak, s.power_w);
        self.power_limit = max_opt(self.power_limit, s.power_limit_w);
    }

    /// The interval after `self.last`, `gap` ms long.
    fn step(&mut self, gap: u64, st: &ProfileSettings) {
        // ⌊log2(gap)⌋; a gap of 0 (never made by a read: equal timestamps are duplicates)
        // counts in the first bucket rather than underflowing.
        let bucket = (gap.checked_ilog2().unwrap_or(0) as usize).min(INTERVAL_BUCKETS - 1);
        self.intervals.add(bucket, 1, gap);
        if gap > st.max_gap_ms {
            self.gaps += 1;
            self.gap_ms += gap;
            self.idle.interrupt(st.min_idle_episode_ms);
            return;
        }
        // Split borrows: the last sample is read in place, not copied.
        let Self {
            last: s,
            covered_ms,
            util,
            util_hist,
            util_range,
            band_below_ms,
            below_ms,
            below_held_ms,
            idle,
            sm,
            occupancy,
            tensor,
            dram,
            mem_bw,
            mem,
            mem_hist,
            power,
            timeline,
            ..
        } = self;
        let dt = gap;
        *covered_ms += dt;
        if let Some(u) = s.util_pct {
            util.add(u, dt);
            util_hist.get_or_insert_with(UtilHist::default).add(u, dt);
            *util_range = Some(util_range.map_or((u, u), |(lo, hi)| (lo.min(u), hi.max(u))));
            for (below, edge) in band_below_ms
                .iter_mut()
                .zip(crate::settings::UTIL_BAND_EDGES_PCT)
            {
                if u < edge {
                    *below += dt;
                }
            }
            if u < st.idle_threshold_pct {
                let held = s.mem_used_mib.is_some_and(|m| m >= st.held_idle_min_mib);
                *below_ms += dt;
                if held {
                    *below_held_ms += dt;
                }
                idle.idle(s.ts_ms, dt, held);
            } else {
                idle.interrupt(st.min_idle_episode_ms);
            }
        } else {
            idle.interrupt(st.min_idle_episode_ms);
        }
        let add = |w: &mut Weighted, v: Option<f32>| {
            if let Some(v) = v {
                w.add(v, dt);
            }
        };
        add(sm, s.sm_active_pct);
        add(occupancy, s.sm_occupancy_pct);
        add(tensor, s.tensor_active_pct);
        add(dram, s.dram_active_pct);
        add(mem_bw, s.mem_bw_util_pct);
        add(power, s.power_w);
        if let Some(m) = s.mem_used_mib {
            mem.add(m, dt);
            mem_hist.add(f64::from(m), dt);
        }
        timeline.add(s.ts_ms, dt, s.util_pct);
    }

    /// Append `later`, an accumulator of the same device that starts after this one ends.
    /// If they overlap in time, they are joined with a break and `overlaps` is counted.
    pub fn merge(&mut self, later: &DeviceAcc, st: &ProfileSettings) -> Taken {
        let mut taken = Taken::Sample;
        if let Some(p) = self.pending.take() {
            if later.first_ts > self.last.ts_ms && later.first_ts < p.ts_ms {
                self.outliers += 1;
                taken = Taken::DroppedOutlier(p.ts_ms);
            } else {
                self.confirm(&p, st);
            }
        }
        let gap = later.first_ts.saturating_sub(self.last.ts_ms);
        #[allow(clippy::cast_sign_loss)]
        if gap > 0
            && gap as u64 > st.max_gap_ms
            && later.samples == 1
            && later.pending.is_none()
            && (later.reordered, later.duplicates) == (0, 0)
        {
            // A lone sample far after this one, with nothing after it yet: held, as the
            // sequential fold would hold it (an outlier before it was dropped either way).
            self.pending = Some(Box::new(later.last));
            self.outliers += later.outliers;
            self.overlaps += later.overlaps;
            self.overlap_samples += later.overlap_samples;
            self.overlap_ms += later.overlap_ms;
            return taken;
        }
        if gap == 0 && later.samples == 1 && later.pending.is_none() {
            // A lone sample repeating the last timestamp: a duplicate, as in the fold.
            self.duplicates += 1 + later.duplicates;
            self.reordered += later.reordered;
            self.outliers += later.outliers;
            return taken;
        }
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
        self.outliers += later.outliers;
        self.overlaps += later.overlaps;
        self.overlap_samples += later.overlap_samples;
        self.overlap_ms += later.overlap_ms;
        self.covered_ms += later.covered_ms;
        self.gaps += later.gaps;
        self.gap_ms += later.gap_ms;
        self.util.merge(&later.util);
        match (&mut self.util_hist, &later.util_hist) {
            (Some(a), Some(b)) => a.merge(b),
            (a @ None, Some(b)) => *a = Some(b.clone()),
            _ => {}
        }
        for (a, b) in self.band_below_ms.iter_mut().zip(later.band_below_ms) {
            *a += b;
        }
        self.util_range = match (self.util_range, later.util_range) {
            (Some((a, b)), Some((c, d))) => Some((a.min(c), b.max(d))),
            (x, y) => x.or(y),
        };
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
        self.intervals.merge(&later.intervals);
        if later.last.ts_ms >= self.last.ts_ms {
            self.last = later.last;
        }
        self.pending.clone_from(&later.pending);
        taken
    }

    /// Whether a decoded accumulator holds together for samples spanning at most `span_ms`:
    /// times in order and inside the span, counts and times small enough that joining a year
    /// of them cannot overflow, histograms sorted and weighed within the covered time, readings
    /// finite. A damaged store cell that fails this is refused, never joined (it could make a
    /// timeline the size of the damage, or a sum wrap).
    #[must_use]
    pub fn is_consistent(&self, span_ms: u64) -> bool {
        // 2^40 ms is 35 years; 2^40 counts are a trillion samples: a year of pieces joined
        // stays far inside u64.
        const CAP: u64 = 1 << 40;
        let span = i64::try_from(span_ms.min(CAP)).unwrap_or(i64::MAX);
        let (first, last) = (self.first_ts, self.last_ts());
        let plausible = |t: EpochMs| (-(1i64 << 45)..(1i64 << 45)).contains(&t);
        // A held sample is one more than the maximum gap after the last: strictly later.
        let order = first <= self.last.ts_ms
            && self
                .pending
                .as_ref()
                .is_none_or(|p| p.ts_ms > self.last.ts_ms)
            && self.samples >= 1;
        let times =
            plausible(first) && plausible(last) && first <= last && last - first <= span && order;
        let counts = [
            self.samples,
            self.reordered,
            self.duplicates,
            self.outliers,
            self.overlaps,
            self.overlap_samples,
            self.overlap_ms,
            self.covered_ms,
            self.gaps,
            self.gap_ms,
            self.below_ms,
            self.below_held_ms,
        ]
        .iter()
        .chain(self.band_below_ms.iter())
        .chain(self.intervals.0.iter().map(|e| &e.2))
        .all(|c| *c <= CAP);
        let covered = self.covered_ms;
        let weighted = [
            self.util,
            self.sm,
            self.occupancy,
            self.tensor,
            self.dram,
            self.mem_bw,
        ]
        .iter()
        .all(|w| w.within(covered, 100))
            && self
                .power
                .within(covered, u64::from(crate::sample::MAX_POWER_W))
            && self
                .mem
                .within(covered, u64::from(crate::sample::MAX_MEMORY_MIB));
        let hists = self
            .util_hist
            .as_ref()
            .is_none_or(|h| h.is_consistent(covered))
            && self.mem_hist.is_consistent(covered);
        let intervals = self.intervals.count() <= self.samples;
        let tl = &self.timeline;
        let hours = i64::try_from(tl.cells.len()).unwrap_or(i64::MAX);
        let timeline = tl.cells.is_empty()
            || (tl.base_hour >= first.div_euclid(HOUR_MS) - 1
                && tl.base_hour + hours <= last.div_euclid(HOUR_MS) + 2
                && tl.cells.iter().all(|c| {
                    i64::from(c.covered_ms) <= HOUR_MS
                        && c.util_ms <= c.covered_ms
                        && c.util_sum <= u64::from(c.util_ms) * 10_000
                }));
        let episodes = self.idle.episodes.len() as u64 <= self.samples + 2
            && self
                .idle
                .episodes
                .iter()
                .chain(self.idle.head.iter())
                .chain(self.idle.open.iter())
                .all(|e| e.dur_ms <= CAP && e.held_ms <= e.dur_ms && plausible(e.start_ms));
        times
            && counts
            && weighted
            && hists
            && intervals
            && timeline
            && episodes
            && self.readings_are_finite()
    }

    /// Whether every reading it holds (peaks, the range, the boundary samples) is within what
    /// a reader lets through ([`Sample::sanitize`]: percentages 0–100, memory and power up to
    /// their bounds), and the boundary samples' times plausible.
    fn readings_are_finite(&self) -> bool {
        #[allow(clippy::cast_precision_loss)]
        let (mem, power) = (
            crate::sample::MAX_MEMORY_MIB as f32,
            crate::sample::MAX_POWER_W as f32,
        );
        let within = |top: f32| move |v: Option<f32>| v.is_none_or(|x| (0.0..=top).contains(&x));
        let sample_ok = |s: &Sample| {
            (-(1i64 << 45)..(1i64 << 45)).contains(&s.ts_ms)
                && [
                    s.util_pct,
                    s.sm_active_pct,
                    s.sm_occupancy_pct,
                    s.tensor_active_pct,
                    s.dram_active_pct,
                    s.mem_bw_util_pct,
                ]
                .into_iter()
                .all(within(100.0))
                && [s.mem_used_mib, s.mem_total_mib]
                    .into_iter()
                    .all(within(mem))
                && [s.power_w, s.power_limit_w].into_iter().all(within(power))
        };
        [self.mem_peak, self.mem_total].into_iter().all(within(mem))
            && [self.power_peak, self.power_limit]
                .into_iter()
                .all(within(power))
            && self
                .util_range
                .is_none_or(|(a, b)| (0.0..=100.0).contains(&a) && (a..=100.0).contains(&b))
            && sample_ok(&self.last)
            && self.pending.as_deref().is_none_or(sample_ok)
    }

    /// The plain totals of this accumulator, for a store's queryable columns (the state itself
    /// is what joins; these are what another engine reads without it).
    #[must_use]
    pub fn totals(&self) -> AccTotals {
        AccTotals {
            samples: self.samples(),
            covered_ms: self.covered_ms,
            util_ms: self.util.ms,
            util_sum: u128::from(self.util.sum),
            util_mean_pct: self.util.mean(),
            idle_ms: self.below_ms,
            held_idle_ms: self.below_held_ms,
            mem_peak_mib: self.mem_peak,
            mem_total_mib: self.mem_total,
            power_mean_w: self.power.mean(),
        }
    }

    /// Summarize, in `tz` for hour-of-week patterns.
    #[must_use]
    pub fn finish(&self, st: &ProfileSettings, tz: &jiff::tz::TimeZone) -> DeviceStats {
        if self.pending.is_some() {
            let mut settled = self.clone();
            settled.settle(st);
            return settled.finish(st, tz);
        }
        let episodes = self.idle.finish(st.min_idle_episode_ms);
        let idle_ms: u64 = episodes.iter().map(|e| e.dur_ms).sum();
        let held_ms: u64 = episodes.iter().map(|e| e.held_ms).sum();
        let util = self.util_hist.as_ref().and_then(|h| {
            Some(UtilStats {
                mean_pct: self.util.mean()?,
                // The bins' quantiles (to 0.1 %) within the exact extremes.
                p50_pct: within(h.quantile(0.5)?, self.util_range?),
                p95_pct: within(h.quantile(0.95)?, self.util_range?),
                max_pct: f64::from(self.util_range?.1),
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
        let mut hourly = Vec::with_capacity(self.timeline.cells.len());
        for (i, c) in self.timeline.cells.iter().enumerate() {
            #[allow(clippy::cast_possible_wrap)]
            let hour = self.timeline.base_hour + i as i64;
            if c.covered_ms == 0 {
                continue;
            }
            let idle = idle_by_hour.get(&hour).copied().unwrap_or(0);
            hourly.push(HourPoint {
                start_ms: hour * HOUR_MS,
                covered_hours: ms_to_h(u64::from(c.covered_ms)),
                util_hours: ms_to_h(u64::from(c.util_ms)),
                util_weighted: c.util_sum,
                idle_hours: ms_to_h(idle),
            });
        }
        DeviceStats {
            first_ts_ms: self.first_ts,
            last_ts_ms: self.last.ts_ms,
            samples: self.samples,
            reordered: self.reordered,
            duplicates: self.duplicates,
            outliers: self.outliers,
            overlaps: self.overlaps,
            overlap_samples: self.overlap_samples,
            overlap_hours: ms_to_h(self.overlap_ms),
            observed_hours: ms_to_h(self.covered_ms),
            #[allow(clippy::cast_sign_loss)]
            span_hours: ms_to_h((self.last.ts_ms - self.first_ts) as u64),
            gaps: self.gaps,
            gap_hours: ms_to_h(self.gap_ms),
            sampling_interval_s: self.median_interval_s(),
            util,
            util_band_hours: band_hours(&self.band_below_ms, self.util.ms),
            sm_active_pct: self.sm.mean(),
            sm_occupancy_pct: self.occupancy.mean(),
            tensor_active_pct: self.tensor.mean(),
            dram_active_pct: self.dram.mean(),
            mem_bw_util_pct: self.mem_bw.mean(),
            mem_used_mean_mib: self.mem.mean(),
            // The histogram answers with its bucket's upper edge (up to 1 % above the value,
            // and 1 MiB for the bucket of values up to 1 MiB), which can pass the largest
            // sample: a percentile is never above the maximum (it was on 41 of 52 demo devices).
            mem_used_p95_mib: self
                .mem_hist
                .quantile(0.95)
                .map(|p| self.mem_peak.map_or(p, |peak| p.min(f64::from(peak)))),
            mem_used_peak_mib: self.mem_peak.map(f64::from),
            mem_total_mib: self.mem_total.map(f64::from),
            power_mean_w: self.power.mean(),
            power_peak_w: self.power_peak.map(f64::from),
            power_limit_w: self.power_limit.map(f64::from),
            below_threshold_hours: ms_to_h(self.below_ms),
            idle_hours: ms_to_h(idle_ms),
            held_idle_hours: ms_to_h(held_ms),
            idle_episodes: episodes,
            hourly,
            tz: tz.clone(),
        }
    }

    /// The typical gap between samples: the mean gap of the log2 bucket that holds the median
    /// (within a factor of 2 of the median; exact when the interval is steady).
    #[allow(clippy::cast_precision_loss)]
    fn median_interval_s(&self) -> Option<f64> {
        self.intervals.median_s()
    }
}

/// `v` clamped into `[lo, hi]`.
fn within(v: f64, (lo, hi): (f32, f32)) -> f64 {
    v.clamp(f64::from(lo), f64::from(hi))
}

/// Hours in each band of [`crate::settings::UTIL_BAND_EDGES_PCT`], from the exact time below
/// each edge and the time with a reading. (From the 0.1 % histogram, a 4.99 % reading was idle,
/// below 5 %, and yet in the 5–25 % band, binned to 5.0.)
fn band_hours(below_ms: &[u64; 4], with_reading_ms: u64) -> [f64; 5] {
    let mut out = [0.0; 5];
    let mut below_prev = 0;
    for (i, &below) in below_ms.iter().enumerate() {
        out[i] = ms_to_h(below.saturating_sub(below_prev));
        below_prev = below;
    }
    out[4] = ms_to_h(with_reading_ms.saturating_sub(below_prev));
    out
}

#[allow(clippy::cast_precision_loss)]
fn ms_to_h(ms: u64) -> f64 {
    crate::hours_of_ms(ms as f64)
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
    /// Samples dropped for being ahead of both neighbours (see [`DeviceAcc::push`]).
    pub outliers: u64,
    /// Inputs whose data of this device overlapped in time with another input's.
    pub overlaps: u64,
    /// Samples dropped because another input already covered their time.
    pub overlap_samples: u64,
    /// Hours covered twice (or more), counted once.
    pub overlap_hours: f64,
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
    /// Hours in each utilization band ([`crate::settings::UTIL_BAND_EDGES_PCT`]).
    pub util_band_hours: [f64; 5],
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
    /// The hourly timeline (hours with data only).
    pub hourly: Vec<HourPoint>,
    /// The zone hour-of-week bins are read in (the report's).
    #[serde(skip)]
    pub tz: jiff::tz::TimeZone,
}

impl DeviceStats {
    /// 168 hour-of-week bins, Monday 00:00 first, in [`DeviceStats::tz`]: the hourly timeline
    /// folded by hour of the week. Computed when asked rather than kept (5 KB a device that
    /// 100k devices need not hold).
    #[must_use]
    pub fn hour_of_week(&self) -> Vec<HowBin> {
        let mut bins = vec![HowBin::default(); 168];
        for h in &self.hourly {
            if let Some(i) = hour_of_week_index(h.start_ms, &self.tz) {
                let b = &mut bins[i];
                b.covered_hours += h.covered_hours;
                b.util_hours += h.util_hours;
                #[allow(clippy::cast_precision_loss)]
                {
                    b.util_pct_hours += h.util_weighted as f64 / 100.0 / 3_600_000.0;
                }
                b.idle_hours += h.idle_hours;
            }
        }
        bins
    }
}

/// The input a piece of data came from: its place in the list of inputs. Where two inputs
/// cover the same device at the same time, the order of inputs breaks ties (see [`Profile`]).
pub type SourceId = u32;

/// How a device is told apart when counting. A GPU UUID names one GPU whatever host reported
/// it (a copied log named after another host, an HA collector with another host label), so a
/// device with a UUID is the UUID (and MIG instance); one without (an index or bus id) is also
/// its host's.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    host: Option<String>,
    gpu: String,
    mig: Option<String>,
}

impl Identity {
    /// The identity of `key`.
    #[must_use]
    pub fn of(key: &DeviceKey) -> Self {
        Self {
            host: (!is_gpu_uuid(&key.gpu)).then(|| key.host.clone()),
            gpu: key.gpu.clone(),
            mig: key.mig.clone(),
        }
    }

    /// The identity of `key`, and its host (the strings moved, not copied).
    fn split(key: DeviceKey) -> (Self, String) {
        let DeviceKey { host, gpu, mig } = key;
        let id = Self {
            host: (!is_gpu_uuid(&gpu)).then(|| host.clone()),
            gpu,
            mig,
        };
        (id, host)
    }

    /// The key of this identity reported under `host`.
    fn key(&self, host: &str) -> DeviceKey {
        DeviceKey {
            host: host.to_owned(),
            gpu: self.gpu.clone(),
            mig: self.mig.clone(),
        }
    }

    fn into_key(self, host: String) -> DeviceKey {
        DeviceKey {
            host,
            gpu: self.gpu,
            mig: self.mig,
        }
    }
}

/// Whether `gpu` is an NVIDIA GPU or MIG UUID (`GPU-5fd7…`, `MIG-…`), globally unique.
#[must_use]
pub fn is_gpu_uuid(gpu: &str) -> bool {
    (gpu.starts_with("GPU-") || gpu.starts_with("MIG-")) && gpu.len() >= 12
}

/// What a re-read keeps of one device from one input (see [`Rebuild`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Every sample.
    All,
    /// Only samples after this time: an earlier input covers the device until then.
    After(EpochMs),
}

/// Builds per-device accumulators from a stream of samples; readers feed it.
///
/// Devices are numbered in order of first appearance; readers look a device up once and then
/// push samples by number, so the hot path never hashes a key.
#[derive(Clone, Debug)]
pub struct ProfileBuilder {
    settings: ProfileSettings,
    source: SourceId,
    devices: Vec<Slot>,
    index: std::collections::HashMap<DeviceKey, usize>,
    /// A re-read that resolves overlaps: only these devices, and from these times.
    filter: Option<std::sync::Arc<BTreeMap<Identity, Keep>>>,
    /// Only samples at or after the first and before the second time (a report's window).
    range: Option<(EpochMs, EpochMs)>,
    /// Cut each device's samples into tiles of this length (see [`Profile::window`]).
    tile_ms: Option<u64>,
    /// Shown every sample the builder takes (see [`Tap`]).
    tap: Option<SharedTap>,
}

/// What sees every sample a [`ProfileBuilder`] takes, in the order each device's samples are
/// taken, with the device it belongs to and the workload tag the reader found on it (a job id
/// from an exporter's job mapping). Joins that need samples rather than a device's totals —
/// the time each job held each GPU — are taps, so that they read the telemetry through the
/// same readers, checks and time window as the report.
pub trait Tap: Send {
    /// Sample `s` of `device` (numbered `id` inside input `source`) was taken.
    fn sample(&mut self, at: TapPoint<'_>, s: &Sample);
}

/// Where a tapped sample comes from.
#[derive(Clone, Copy, Debug)]
pub struct TapPoint<'a> {
    /// The builder that took it (its input's number, or a block's replay number): device
    /// numbers are stable within one scope.
    pub scope: u64,
    /// The device's number inside that builder.
    pub id: usize,
    /// The device.
    pub key: &'a DeviceKey,
    /// What is known about it so far (its index on the host, where the reader gives one).
    pub info: &'a DeviceInfo,
    /// The job the sample's labels name, where the exporter maps jobs to GPUs.
    pub tag: Option<&'a str>,
}

/// A [`Tap`] that keeps what it is shown, to show it to another tap later: the readers parse
/// the blocks of one input in parallel, each into a log of its own, and replay the logs into
/// the real tap in file order (memory: one block's samples per worker).
#[derive(Debug, Default)]
pub struct TapLog {
    /// By the builder's device number: the device, and what a tap reads of its info.
    devices: Vec<Option<(DeviceKey, DeviceInfo)>>,
    /// Tags seen, each once in a row.
    tags: Vec<Box<str>>,
    /// (device, tag + 1 or 0, sample), in the order taken.
    entries: Vec<(u32, u32, Sample)>,
}

impl Tap for TapLog {
    fn sample(&mut self, at: TapPoint<'_>, s: &Sample) {
        if self.devices.len() <= at.id {
            self.devices.resize(at.id + 1, None);
        }
        let slot = &mut self.devices[at.id];
        match slot {
            Some((_, info)) => {
                if info.index.is_none() {
                    info.index = at.info.index;
                }
            }
            None => {
                let info = DeviceInfo {
                    index: at.info.index,
                    ..DeviceInfo::default()
                };
                *slot = Some((at.key.clone(), info));
            }
        }
        let tag = match at.tag {
            None => 0,
            Some(t) => {
                if self.tags.last().is_none_or(|last| **last != *t) {
                    self.tags.push(t.into());
                }
                u32::try_from(self.tags.len()).unwrap_or(u32::MAX)
            }
        };
        let id = u32::try_from(at.id).unwrap_or(u32::MAX);
        self.entries.push((id, tag, *s));
    }
}

impl TapLog {
    /// Show everything logged to `into`, in order, as taken by a builder numbered `scope`.
    pub fn replay(&self, scope: u64, into: &mut dyn Tap) {
        for (id, tag, s) in &self.entries {
            let Some(Some((key, info))) = self.devices.get(*id as usize) else {
                continue;
            };
            let tag = tag
                .checked_sub(1)
                .and_then(|t| self.tags.get(t as usize))
                .map(|t| &**t);
            let at = TapPoint {
                scope,
                id: *id as usize,
                key,
                info,
                tag,
            };
            into.sample(at, s);
        }
    }
}

/// A [`Tap`] shared by the builders of every input.
#[derive(Clone)]
pub struct SharedTap(pub std::sync::Arc<std::sync::Mutex<dyn Tap>>);

impl std::fmt::Debug for SharedTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedTap")
    }
}

#[derive(Clone, Debug)]
struct Slot {
    key: DeviceKey,
    info: DeviceInfo,
    acc: Option<DeviceAcc>,
    /// `None`: the device is not wanted (a re-read for other devices).
    keep: Option<Keep>,
    /// The tile `acc` holds (when tiling).
    tile: i64,
    /// Earlier tiles, finished.
    done: Vec<(i64, DeviceAcc)>,
}

fn tile_of(ts: EpochMs, len: u64) -> i64 {
    ts.div_euclid(i64::try_from(len).unwrap_or(i64::MAX))
}

impl Slot {
    /// Move to the tile of `s` before it is pushed, so that the tiles joined again are the
    /// sequential rule of one piece ([`DeviceAcc::push`]); `Some` when `s` was taken here.
    ///
    /// A sample of a later tile closes the current one. A sample of an earlier tile is out of
    /// order, with one exception the sequential rule also makes: when the current tile was
    /// opened by one sample more than the maximum gap after the previous tile's last, and this
    /// sample falls between the two, the lone sample was ahead of both neighbours (an outlier,
    /// dropped) and the previous tile goes on.
    fn retile(
        &mut self,
        s: &Sample,
        len: u64,
        st: &ProfileSettings,
    ) -> Option<Result<Taken, Rejected>> {
        let tile = tile_of(s.ts_ms, len);
        let Some(mut acc) = self.acc.take() else {
            self.tile = tile;
            return None;
        };
        if tile >= self.tile {
            if tile > self.tile {
                self.done.push((self.tile, acc));
                self.tile = tile;
            } else {
                self.acc = Some(acc);
            }
            return None;
        }
        let max_gap = i64::try_from(st.max_gap_ms).unwrap_or(i64::MAX);
        let lone = acc.samples() == 1;
        match self.done.last_mut() {
            Some((prev_tile, prev)) if lone && acc.first_ts() - prev.last_ts() > max_gap => {
                if s.ts_ms > prev.last_ts() {
                    let held = acc.first_ts();
                    prev.outliers += 1;
                    self.tile = tile;
                    if tile == *prev_tile {
                        let (_, mut prev) = self.done.pop()?;
                        let r = prev.push(s, st);
                        self.acc = Some(prev);
                        Some(r.map(|_| Taken::DroppedOutlier(held)))
                    } else {
                        // A tile of its own, joined to the previous one exactly as if pushed.
                        self.acc = Some(DeviceAcc::new(s));
                        Some(Ok(Taken::DroppedOutlier(held)))
                    }
                } else {
                    let r = prev.push(s, st);
                    self.acc = Some(acc);
                    Some(r)
                }
            }
            None if lone => {
                // The device's first sample: the accumulator's own rule drops it when this one
                // is more than the maximum gap earlier; the tile follows what it keeps.
                let r = acc.push(s, st);
                if acc.samples() == 1 {
                    self.tile = tile_of(acc.first_ts(), len);
                }
                self.acc = Some(acc);
                Some(r)
            }
            _ => {
                self.acc = Some(acc);
                None
            }
        }
    }
}

/// A device's number inside one [`ProfileBuilder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DeviceId(usize);

impl ProfileBuilder {
    /// An empty builder for input 0.
    #[must_use]
    pub fn new(settings: ProfileSettings) -> Self {
        Self {
            settings,
            source: 0,
            devices: Vec::new(),
            index: std::collections::HashMap::new(),
            filter: None,
            range: None,
            tile_ms: None,
            tap: None,
        }
    }

    /// Show every taken sample to `tap` as well.
    #[must_use]
    pub fn with_tap(mut self, tap: Option<SharedTap>) -> Self {
        self.tap = tap;
        self
    }

    /// The builder of input `source`.
    #[must_use]
    pub fn for_source(settings: ProfileSettings, source: SourceId) -> Self {
        Self {
            source,
            ..Self::new(settings)
        }
    }

    /// Keep only the devices of `filter`, from the times it names (a [`Rebuild`] re-read).
    #[must_use]
    pub fn with_filter(mut self, filter: std::sync::Arc<BTreeMap<Identity, Keep>>) -> Self {
        self.filter = Some(filter);
        self
    }

    /// Keep only samples dated at or after `start` and before `end` (the others are
    /// [`Rejected::OutsideRange`], not counted as skips).
    #[must_use]
    pub fn with_range(mut self, start: EpochMs, end: EpochMs) -> Self {
        self.range = Some((start, end));
        self
    }

    /// Cut each device's samples into tiles of `tile_ms` (from the epoch, UTC): the built
    /// profile holds one piece per device and tile, which [`Profile::window`] joins for any
    /// run of tiles exactly as if only their samples had been read.
    #[must_use]
    pub fn with_tiles(mut self, tile_ms: u64) -> Self {
        self.tile_ms = Some(tile_ms.max(1));
        self
    }

    /// The number of `key`, registering it on first sight.
    pub fn device(&mut self, key: DeviceKey) -> DeviceId {
        if let Some(i) = self.index.get(&key) {
            return DeviceId(*i);
        }
        let i = self.devices.len();
        let keep = match &self.filter {
            None => Some(Keep::All),
            Some(f) => f.get(&Identity::of(&key)).copied(),
        };
        self.index.insert(key.clone(), i);
        self.devices.push(Slot {
            key,
            info: DeviceInfo::default(),
            acc: None,
            keep,
            tile: 0,
            done: Vec::new(),
        });
        DeviceId(i)
    }

    /// What is known about device `id`, to update.
    pub fn info_mut(&mut self, id: DeviceId) -> &mut DeviceInfo {
        &mut self.devices[id.0].info
    }

    /// Fold a sample of device `id`.
    pub fn push(&mut self, id: DeviceId, s: &Sample) -> Result<Taken, Rejected> {
        self.push_tagged(id, s, None)
    }

    /// Fold a sample of device `id` whose labels name a job (`tag`, shown to the tap).
    pub fn push_tagged(
        &mut self,
        id: DeviceId,
        s: &Sample,
        tag: Option<&str>,
    ) -> Result<Taken, Rejected> {
        let taken = self.fold(id, s);
        if taken.is_ok()
            && let Some(tap) = &self.tap
        {
            let slot = &self.devices[id.0];
            let at = TapPoint {
                scope: u64::from(self.source),
                id: id.0,
                key: &slot.key,
                info: &slot.info,
                tag,
            };
            // A poisoned tap (a panic in another reader) still takes samples: its state is
            // sums and maxima, never left half-updated by one call.
            tap.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .sample(at, s);
        }
        taken
    }

    fn fold(&mut self, id: DeviceId, s: &Sample) -> Result<Taken, Rejected> {
        let st = &self.settings;
        if s.ts_ms < st.earliest_ms || s.ts_ms > st.latest_ms {
            return Err(Rejected::OutsideWindow);
        }
        if let Some((start, end)) = self.range
            && (s.ts_ms < start || s.ts_ms >= end)
        {
            return Err(Rejected::OutsideRange);
        }
        let slot = &mut self.devices[id.0];
        if self.filter.is_some() {
            match slot.keep {
                None => return Err(Rejected::Overlapped),
                Some(Keep::After(t)) if s.ts_ms <= t => return Err(Rejected::Overlapped),
                Some(_) => {}
            }
        }
        if let Some(len) = self.tile_ms
            && let Some(r) = slot.retile(s, len, st)
        {
            return r;
        }
        match &mut slot.acc {
            Some(acc) => acc.push(s, st),
            None => {
                slot.acc = Some(DeviceAcc::new(s));
                Ok(Taken::Sample)
            }
        }
    }

    /// Finish building: the devices that got at least one sample.
    #[must_use]
    pub fn build(self) -> Profile {
        let mut p = Profile::default();
        for slot in self.devices {
            if self.tile_ms.is_some() {
                let pieces = slot
                    .done
                    .into_iter()
                    .chain(slot.acc.map(|a| (slot.tile, a)));
                for (tile, acc) in pieces {
                    p.tiles.entry(tile).or_default().add(
                        self.source,
                        slot.key.clone(),
                        slot.info.clone(),
                        acc,
                        &self.settings,
                    );
                }
            } else if let Some(acc) = slot.acc {
                p.add(self.source, slot.key, slot.info, acc, &self.settings);
            }
        }
        p
    }
}

/// The time one input covers one device: its first sample in the input's order, its last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Extent {
    source: SourceId,
    first: EpochMs,
    last: EpochMs,
}

/// One device of a [`Profile`].
#[derive(Clone, Debug)]
struct Device {
    /// The host it was first seen under: its key is this host and its identity's GPU and MIG
    /// instance (the key whole held the GPU's name a second time beside the map's).
    host: String,
    /// Every host it was reported under, with its samples (a UUID seen under two hosts).
    hosts: Hosts,
    info: DeviceInfo,
    /// The pieces joined so far, in time order.
    acc: DeviceAcc,
    /// The time each input covers; while not `tangled`, sorted and disjoint.
    extents: Vec<Extent>,
    /// A piece overlapped the joined ones without being covered by them: the device is read
    /// again by [`Rebuild`]; until then `acc` holds only the pieces before the tangle.
    tangled: bool,
    /// Samples of this device the profile held before a rebuild (to count what it dropped).
    samples_before_rebuild: u64,
    /// The first two inputs found to overlap on this device (for `--strict`).
    overlap_sources: Option<(SourceId, SourceId)>,
}

/// The hosts a device was reported under, with its samples under each, sorted by host: nearly
/// always one, so a vector (a one-entry `BTreeMap` allocates a whole node of eleven slots,
/// about 370 bytes a device).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Hosts(Vec<(String, u64)>);

impl Hosts {
    fn one(host: String, samples: u64) -> Self {
        Self(vec![(host, samples)])
    }

    fn from_map(map: BTreeMap<String, u64>) -> Self {
        Self(map.into_iter().collect())
    }

    fn to_map(&self) -> BTreeMap<String, u64> {
        self.0.iter().cloned().collect()
    }

    fn add(&mut self, host: String, samples: u64) {
        match self.0.binary_search_by(|(h, _)| h.as_str().cmp(&host)) {
            Ok(i) => self.0[i].1 += samples,
            Err(i) => self.0.insert(i, (host, samples)),
        }
    }

    fn add_all(&mut self, other: Hosts) {
        for (h, n) in other.0 {
            self.add(h, n);
        }
    }
}

/// The profile of a fleet: one accumulator per device, fed with pieces (one per block or
/// input) as they are read.
///
/// **Every device-hour once.** A device is covered once in time whatever inputs its samples
/// come from. Pieces that follow each other are joined exactly. A piece that lies wholly inside
/// the time earlier inputs already cover (the same file given twice, a copy, a collector's
/// duplicate scrape) is dropped and counted. A piece that overlaps partly makes the device
/// *tangled*: [`Profile::tangled`] then says which inputs to read again, and how, by one rule —
/// in order of first sample (ties: input order), each input holds the device from its first
/// sample to its last, and a later-starting input contributes only its samples after the time
/// the inputs before it cover (samples inside that time are dropped and counted as overlap).
/// Inside one input, samples follow the sequential rule of [`DeviceAcc::push`], whatever block
/// they were read in.
///
/// **Tiles.** A profile read with [`ProfileBuilder::with_tiles`] holds its pieces per tile
/// (each tile a profile of its own, joined tile by tile as blocks and inputs are absorbed);
/// [`Profile::window`] joins a run of tiles into one untiled profile.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Boxed: a B-tree node holds eleven entries and is often half full, so the devices' ~1 KB
    /// each would be paid nearly twice over inline.
    devices: BTreeMap<Identity, Box<Device>>,
    tiles: BTreeMap<i64, Profile>,
}

/// The inputs to read again to untangle overlapping devices, and what to keep of each.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuild {
    /// Per input, in the order to read them (roughly time order, so pieces join as they come),
    /// the devices to keep and from when.
    pub reads: Vec<(SourceId, BTreeMap<Identity, Keep>)>,
    /// Per device, hours that more than one input covered.
    overlap_ms: BTreeMap<Identity, u64>,
    /// Per device, the inputs it keeps, in time order (the order its pieces are joined in).
    order: BTreeMap<Identity, Vec<SourceId>>,
}

impl Rebuild {
    /// Leave out input `source`, which cannot be read again (standard input): the devices it
    /// tangled keep what was joined before the tangle, and say so.
    pub fn drop_source(&mut self, source: SourceId) {
        let Some(i) = self.reads.iter().position(|(s, _)| *s == source) else {
            return;
        };
        let (_, devices) = self.reads.remove(i);
        for id in devices.keys() {
            self.overlap_ms.remove(id);
            self.order.remove(id);
            for (_, keep) in &mut self.reads {
                keep.remove(id);
            }
        }
        self.reads.retain(|(_, keep)| !keep.is_empty());
    }
}

/// The re-read pieces of tangled devices, joined as they come: each device's pieces are
/// disjoint after the re-reads' filters, and are joined in its inputs' time order; a piece that
/// arrives before the ones ahead of it waits for them. Re-reads arrive roughly in time order,
/// so memory stays near one accumulator per device, not one per re-read input.
#[derive(Debug, Default)]
pub struct Rebuilding {
    devices: BTreeMap<Identity, Joining>,
}

type Part = (Hosts, DeviceInfo, DeviceAcc);

#[derive(Debug, Default)]
struct Joining {
    /// Position (in the device's input order) of the next piece to join.
    next: usize,
    joined: Option<Part>,
    waiting: BTreeMap<usize, Part>,
}

impl Rebuilding {
    /// Take the tangled devices' pieces of one re-read input.
    pub fn add(&mut self, plan: &Rebuild, piece: Profile, st: &ProfileSettings) {
        for (id, d) in piece.devices {
            let Some(order) = plan.order.get(&id) else {
                continue;
            };
            let source = d.extents.first().map_or(0, |e| e.source);
            let Some(pos) = order.iter().position(|s| *s == source) else {
                continue;
            };
            let j = self.devices.entry(id).or_default();
            j.waiting.insert(pos, (d.hosts, d.info, d.acc));
            while let Some((hosts, info, acc)) = j.waiting.remove(&j.next) {
                j.next += 1;
                match &mut j.joined {
                    None => j.joined = Some((hosts, info, acc)),
                    Some((h, i, a)) => {
                        a.merge(&acc, st);
                        i.merge(&info);
                        h.add_all(hosts);
                    }
                }
            }
        }
    }
}

impl Profile {
    /// Add one piece: a device's accumulator from input `source`. Returns whether joining it
    /// dropped an outlier sample at the seam.
    pub fn add(
        &mut self,
        source: SourceId,
        key: DeviceKey,
        info: DeviceInfo,
        acc: DeviceAcc,
        st: &ProfileSettings,
    ) -> Taken {
        let hosts = Hosts::one(key.host.clone(), acc.samples());
        self.add_piece(source, key, hosts, info, acc, st)
    }

    fn add_piece(
        &mut self,
        source: SourceId,
        key: DeviceKey,
        hosts: Hosts,
        info: DeviceInfo,
        acc: DeviceAcc,
        st: &ProfileSettings,
    ) -> Taken {
        self.add_piece_at(source, Identity::split(key), hosts, info, acc, st)
    }

    /// [`Profile::add_piece`] of a device known by its identity and first host.
    fn add_piece_at(
        &mut self,
        source: SourceId,
        (id, host): (Identity, String),
        hosts: Hosts,
        info: DeviceInfo,
        acc: DeviceAcc,
        st: &ProfileSettings,
    ) -> Taken {
        let extent = Extent {
            source,
            first: acc.first_ts(),
            last: acc.last_ts(),
        };
        match self.devices.entry(id) {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(Box::new(Device {
                    hosts,
                    host,
                    info,
                    acc,
                    extents: vec![extent],
                    tangled: false,
                    samples_before_rebuild: 0,
                    overlap_sources: None,
                }));
                Taken::Sample
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                o.get_mut().add(extent, hosts, &info, acc, st)
            }
        }
    }

    /// Add every piece of `other` (the profile of one input, or of one block of it), which
    /// comes after everything added so far in input order. Returns the outliers dropped at seams.
    pub fn absorb(&mut self, other: Profile, st: &ProfileSettings) -> u64 {
        let mut outliers = 0;
        for (tile, p) in other.tiles {
            outliers += self.tiles.entry(tile).or_default().absorb(p, st);
        }
        for (id, d) in other.devices {
            if d.tangled {
                // Tangled inside its own input: it is read again whole, so only its extents,
                // metadata and sample count matter here.
                match self.devices.entry(id) {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert(d);
                    }
                    std::collections::btree_map::Entry::Occupied(o) => {
                        let mine = o.into_mut();
                        if !mine.tangled {
                            mine.tangled = true;
                            mine.samples_before_rebuild = mine.acc.samples();
                        }
                        mine.samples_before_rebuild += d.samples_before_rebuild;
                        for e in d.extents {
                            mine.note_extent(e);
                        }
                        mine.merge_meta(d.hosts, &d.info);
                    }
                }
                continue;
            }
            let source = d.extents.first().map_or(0, |e| e.source);
            if matches!(
                self.add_piece_at(source, (id, d.host), d.hosts, d.info, d.acc, st),
                Taken::DroppedOutlier(_)
            ) {
                outliers += 1;
            }
        }
        outliers
    }

    /// Which inputs to read again so that tangled devices are covered once, or `None` when
    /// nothing is tangled.
    #[must_use]
    pub fn tangled(&self) -> Option<Rebuild> {
        let mut per_source: BTreeMap<SourceId, (EpochMs, BTreeMap<Identity, Keep>)> =
            BTreeMap::new();
        let mut overlap_ms = BTreeMap::new();
        let mut order = BTreeMap::new();
        for (id, d) in &self.devices {
            if !d.tangled {
                continue;
            }
            let mut extents = d.extents.clone();
            extents.sort_by_key(|e| (e.first, e.source));
            let mut covered: Option<EpochMs> = None;
            let mut twice = 0u64;
            let mut kept = Vec::new();
            for e in extents {
                let keep = match covered {
                    Some(f) if e.last <= f => None,
                    Some(f) if e.first <= f => Some(Keep::After(f)),
                    _ => Some(Keep::All),
                };
                #[allow(clippy::cast_sign_loss)]
                match (keep, covered) {
                    (None, _) => twice += (e.last - e.first) as u64,
                    (Some(Keep::After(f)), _) => twice += (f - e.first) as u64,
                    _ => {}
                }
                covered = Some(covered.map_or(e.last, |f| f.max(e.last)));
                if let Some(k) = keep {
                    kept.push(e.source);
                    let entry = per_source
                        .entry(e.source)
                        .or_insert_with(|| (e.first, BTreeMap::new()));
                    entry.0 = entry.0.min(e.first);
                    entry.1.insert(id.clone(), k);
                }
            }
            overlap_ms.insert(id.clone(), twice);
            order.insert(id.clone(), kept);
        }
        if overlap_ms.is_empty() {
            return None;
        }
        let mut reads: Vec<(EpochMs, SourceId, BTreeMap<Identity, Keep>)> = per_source
            .into_iter()
            .map(|(src, (first, keep))| (first, src, keep))
            .collect();
        reads.sort_by_key(|r| (r.0, r.1));
        Some(Rebuild {
            reads: reads.into_iter().map(|(_, s, k)| (s, k)).collect(),
            overlap_ms,
            order,
        })
    }

    /// Put the rebuilt devices of `r` in place of the tangled ones.
    pub fn finish_rebuild(&mut self, plan: &Rebuild, r: Rebuilding, st: &ProfileSettings) {
        let mut fresh = r.devices;
        for (id, twice) in &plan.overlap_ms {
            let Some(dev) = self.devices.get_mut(id) else {
                continue;
            };
            let Some(joining) = fresh.remove(id) else {
                continue;
            };
            // Pieces whose inputs no longer had the device (changed since the first read) leave
            // gaps in the order: join what arrived, in order.
            let mut parts: Vec<Part> = joining.joined.into_iter().collect();
            parts.extend(joining.waiting.into_values());
            let before = dev.samples_before_rebuild.max(dev.acc.samples());
            let mut it = parts.into_iter();
            let Some((mut hosts, mut info, mut acc)) = it.next() else {
                continue;
            };
            for (h, i, a) in it {
                hosts.add_all(h);
                info.merge(&i);
                acc.merge(&a, st);
            }
            let after = acc.samples();
            acc.carry_overlaps(&dev.acc);
            // An overlap only between inputs: a device tangled within one input (a grown file
            // repeating its last timestamp at the seam) is re-read as one sequence, whose
            // repeated and reordered samples are counted as such.
            if plan.order.get(id).is_some_and(|inputs| inputs.len() > 1) {
                acc.add_overlap(before.saturating_sub(after), *twice);
            }
            dev.acc = acc;
            dev.info = info;
            dev.hosts = hosts;
            dev.tangled = false;
        }
    }

    /// Number of devices (of a tiled profile: the most any tile has).
    #[must_use]
    pub fn len(&self) -> usize {
        self.tiles
            .values()
            .map(Profile::len)
            .max()
            .unwrap_or(0)
            .max(self.devices.len())
    }

    /// Samples taken, over all devices (and tiles).
    #[must_use]
    pub fn samples(&self) -> u64 {
        self.devices.values().map(|d| d.acc.samples()).sum::<u64>()
            + self.tiles.values().map(Profile::samples).sum::<u64>()
    }

    /// Time covered by samples, over all devices (and tiles): what a window's GPU-hours come
    /// from.
    #[must_use]
    pub fn covered_ms(&self) -> u64 {
        self.devices
            .values()
            .map(|d| d.acc.covered_ms())
            .sum::<u64>()
            + self.tiles.values().map(Profile::covered_ms).sum::<u64>()
    }

    /// The time of the newest sample, over all devices (and tiles); `None` when empty.
    #[must_use]
    pub fn last_ts(&self) -> Option<EpochMs> {
        let own = self.devices.values().map(|d| d.acc.last_ts());
        let tiled = self.tiles.values().filter_map(Profile::last_ts);
        own.chain(tiled).max()
    }

    /// The tiles this profile holds data in (empty when not tiled).
    pub fn tile_indices(&self) -> impl Iterator<Item = i64> + '_ {
        self.tiles.keys().copied()
    }

    /// The tiles `from..to` joined into one untiled profile: for each device, its pieces in
    /// time order, exactly the profile of the samples in those tiles (the accumulators' merge
    /// is exact). The untiled part of `self`, if any, is left out.
    #[must_use]
    pub fn window(&self, from: i64, to: i64, st: &ProfileSettings) -> Profile {
        let mut out = Profile::default();
        for (_, tile) in self.tiles.range(from..to) {
            out.absorb(tile.clone(), st);
        }
        out
    }

    /// Every device's piece of every tile, in tile then device order (a tiled profile's
    /// content, for a store).
    pub fn tile_pieces(&self) -> impl Iterator<Item = (i64, TilePiece)> + '_ {
        self.tiles.iter().flat_map(|(tile, p)| {
            p.devices.iter().map(move |(id, d)| {
                let mut info = d.info.clone();
                info.unresolved_overlap = d.tangled;
                (
                    *tile,
                    TilePiece {
                        key: id.key(&d.host),
                        hosts: d.hosts.to_map(),
                        info,
                        acc: d.acc.clone(),
                    },
                )
            })
        })
    }

    /// Join a stored piece onto this (untiled) profile, after everything joined so far (a
    /// store read in time order joins as it reads, holding one accumulator per device).
    pub fn add_stored(&mut self, piece: TilePiece, st: &ProfileSettings) {
        let TilePiece {
            key,
            hosts,
            info,
            acc,
        } = piece;
        self.add_piece(0, key, Hosts::from_map(hosts), info, acc, st);
    }

    /// This (untiled) profile's devices as tile `tile` of a tiled profile.
    #[must_use]
    pub fn into_tile(self, tile: i64) -> Profile {
        let mut p = Profile::default();
        p.tiles.insert(
            tile,
            Profile {
                devices: self.devices,
                tiles: BTreeMap::new(),
            },
        );
        p
    }

    /// Put a stored piece into tile `tile` (one piece per device and tile: a second piece of
    /// the same device and tile is joined as a later input's would be).
    pub fn add_tile_piece(&mut self, tile: i64, piece: TilePiece, st: &ProfileSettings) {
        self.tiles.entry(tile).or_default().add_stored(piece, st);
    }

    /// Drop the tiles before `tile` (retention).
    pub fn drop_tiles_before(&mut self, tile: i64) {
        self.tiles = self.tiles.split_off(&tile);
    }

    /// The first device (in key order) whose inputs overlapped, with the two inputs.
    #[must_use]
    pub fn first_overlap(&self) -> Option<(DeviceKey, SourceId, SourceId)> {
        self.devices
            .iter()
            .find_map(|(id, d)| d.overlap_sources.map(|(a, b)| (id.key(&d.host), a, b)))
    }

    /// Whether there is no device.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.devices.is_empty() && self.tiles.values().all(Profile::is_empty)
    }

    /// Bytes the profile holds per device, on average (accumulators and extents; for the memory
    /// budget in BENCHMARKS.md).
    #[must_use]
    pub fn footprint_bytes(&self) -> usize {
        self.devices
            .values()
            .map(|d| {
                std::mem::size_of::<Device>()
                    + d.acc.footprint_bytes()
                    + d.extents.capacity() * std::mem::size_of::<Extent>()
            })
            .sum::<usize>()
            + self
                .tiles
                .values()
                .map(Profile::footprint_bytes)
                .sum::<usize>()
    }

    /// Summarize each device.
    #[must_use]
    pub fn finish(self, st: &ProfileSettings, tz: &jiff::tz::TimeZone) -> Vec<DeviceProfile> {
        self.finish_each(st, tz).collect()
    }

    /// Summarize each device, in display-key order, as the iterator is driven: each
    /// accumulator is freed as its summary is made, so a consumer that keeps only what it
    /// derives (the report) never holds every summary, nor summaries beside accumulators.
    pub fn finish_each<'a>(
        self,
        st: &'a ProfileSettings,
        tz: &'a jiff::tz::TimeZone,
    ) -> impl ExactSizeIterator<Item = DeviceProfile> + 'a {
        let mut devices: Vec<(DeviceKey, Box<Device>)> = self
            .devices
            .into_iter()
            .map(|(id, d)| (id.into_key(d.display_host().to_owned()), d))
            .collect();
        devices.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        devices.into_iter().map(move |(key, d)| {
            let (key, info, acc) = d.displayed(key);
            DeviceProfile {
                stats: acc.finish(st, tz),
                key,
                info,
            }
        })
    }

    /// The joined accumulator of each device (for tests and tools), under its display key: the
    /// host it was reported under most (a UUID seen under several hosts is one device).
    #[must_use]
    pub fn joined(self) -> BTreeMap<DeviceKey, (DeviceInfo, DeviceAcc)> {
        self.devices
            .into_iter()
            .map(|(id, d)| {
                let key = id.into_key(d.display_host().to_owned());
                let (key, info, acc) = d.displayed(key);
                (key, (info, acc))
            })
            .collect()
    }
}

impl Device {
    /// The host it is shown under: the one it was reported under most.
    fn display_host(&self) -> &str {
        self.hosts
            .0
            .iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
            .map_or(self.host.as_str(), |(h, _)| h.as_str())
    }

    /// The device under its display key `key` (its identity under [`Device::display_host`]),
    /// its metadata (the other hosts; whether an overlap stayed unresolved) and its
    /// accumulator.
    fn displayed(self: Box<Self>, key: DeviceKey) -> (DeviceKey, DeviceInfo, DeviceAcc) {
        let d = *self;
        let mut info = d.info;
        if d.hosts.0.len() > 1 {
            info.other_hosts = d
                .hosts
                .0
                .iter()
                .map(|(h, _)| h)
                .filter(|h| **h != key.host)
                .cloned()
                .collect();
        }
        info.unresolved_overlap = d.tangled;
        (key, info, d.acc)
    }

    fn note_extent(&mut self, e: Extent) {
        match self.extents.iter_mut().rev().find(|x| x.source == e.source) {
            Some(x) => x.last = x.last.max(e.last),
            None => self.extents.push(e),
        }
    }

    fn add(
        &mut self,
        e: Extent,
        hosts: Hosts,
        info: &DeviceInfo,
        acc: DeviceAcc,
        st: &ProfileSettings,
    ) -> Taken {
        let same_source = self.extents.last().is_some_and(|x| x.source == e.source);
        let mut taken = Taken::Sample;
        if !self.tangled {
            if e.first > self.acc.last_ts() {
                taken = self.acc.merge(&acc, st);
            } else if e.last < self.acc.first_ts() && !same_source {
                let mut earlier = acc.clone();
                taken = earlier.merge(&self.acc, st);
                self.acc = earlier;
                self.extents.insert(0, e);
                self.merge_meta(hosts, info);
                return taken;
            } else if !same_source && let Some(by) = self.covered_by(e) {
                // Wholly inside what an earlier input covers: counted, not added (its host is
                // still one this GPU was reported under).
                self.acc.add_overlap(acc.samples(), acc.covered_ms());
                for (h, _) in hosts.0 {
                    self.hosts.add(h, 0);
                }
                self.overlap_sources.get_or_insert((by, e.source));
                return taken;
            } else {
                self.tangled = true;
                self.samples_before_rebuild = self.acc.samples();
                if !same_source {
                    let by = self.extents.last().map_or(e.source, |x| x.source);
                    self.overlap_sources.get_or_insert((by, e.source));
                }
            }
        }
        if self.tangled {
            self.samples_before_rebuild += acc.samples();
        }
        self.note_extent(e);
        self.merge_meta(hosts, info);
        taken
    }

    fn merge_meta(&mut self, hosts: Hosts, info: &DeviceInfo) {
        self.info.merge(info);
        self.hosts.add_all(hosts);
    }

    /// Whether the inputs before `e` (in first-sample order) cover all of it. Extents are sorted
    /// and disjoint while the device is not tangled, so the one that starts last at or before
    /// `e` holds the latest cover.
    fn covered_by(&self, e: Extent) -> Option<SourceId> {
        let i = self.extents.partition_point(|x| x.first <= e.first);
        (i > 0 && self.extents[i - 1].last >= e.last).then(|| self.extents[i - 1].source)
    }
}

/// The plain totals of one accumulator ([`DeviceAcc::totals`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AccTotals {
    /// Samples taken.
    pub samples: u64,
    /// Time covered by samples (the GPU-hours a price multiplies).
    pub covered_ms: u64,
    /// Covered time with a utilization reading.
    pub util_ms: u64,
    /// Σ utilization × 100 × ms over `util_ms` (exact; the mean is this over `util_ms`).
    pub util_sum: u128,
    /// Time-weighted mean utilization over `util_ms`.
    pub util_mean_pct: Option<f64>,
    /// Time below the idle threshold.
    pub idle_ms: u64,
    /// Idle time with memory held.
    pub held_idle_ms: u64,
    /// Peak memory used.
    pub mem_peak_mib: Option<f32>,
    /// Memory installed.
    pub mem_total_mib: Option<f32>,
    /// Time-weighted mean power draw.
    pub power_mean_w: Option<f64>,
}

/// One device's piece of one tile: what a history store keeps per device and tile, and joins
/// again into any run of tiles ([`Profile::tile_pieces`], [`Profile::add_tile_piece`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TilePiece {
    /// The key the device was first seen under in the tile.
    pub key: DeviceKey,
    /// Every host it was reported under in the tile, with its samples.
    pub hosts: BTreeMap<String, u64>,
    /// Its metadata (with `unresolved_overlap` set when inputs overlapped on it and could not
    /// be read again).
    pub info: DeviceInfo,
    /// Its accumulator over the tile's samples.
    pub acc: DeviceAcc,
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

impl DeviceProfile {
    /// The longest run of consecutive hours in which the device was mostly not idle (idle
    /// less than half of the hour's covered time): (start, hours covered). `check`'s long-job
    /// rule and `serve`'s `/metrics` read this one definition.
    #[must_use]
    pub fn longest_busy_run(&self) -> Option<(EpochMs, f64)> {
        let mut best: Option<(EpochMs, f64)> = None;
        let mut run: Option<(EpochMs, EpochMs, f64)> = None; // start, next expected hour, hours
        for h in &self.stats.hourly {
            let busy = h.covered_hours > 0.0 && h.idle_hours < h.covered_hours / 2.0;
            run = match run {
                Some((s, next, n)) if busy && h.start_ms == next => {
                    Some((s, h.start_ms + HOUR_MS, n + h.covered_hours))
                }
                _ if busy => Some((h.start_ms, h.start_ms + HOUR_MS, h.covered_hours)),
                _ => None,
            };
            if let Some((s, _, n)) = run
                && best.is_none_or(|b| n > b.1)
            {
                best = Some((s, n));
            }
        }
        best
    }
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
    fn band_hours_follow_the_one_band_definition() {
        // 1 minute at each value; the bands are [0,5) [5,25) [25,50) [50,85) [85,100].
        // 4.99 and 84.99 sit within a 0.1 % bin of an edge: their bands are the exact
        // comparison's, the idle threshold's rule (they were binned across the edge).
        let vals = [0.0, 4.99, 5.0, 24.9, 25.0, 49.9, 50.0, 84.99, 85.0, 100.0];
        let mut v: Vec<Sample> = vals.iter().zip(0..).map(|(&u, i)| s(i, u, 0.0)).collect();
        v.push(s(10, 0.0, 0.0));
        let stats = fold(&v).finish(&st(), &jiff::tz::TimeZone::UTC);
        let m = 1.0 / 60.0;
        for (got, want) in
            stats
                .util_band_hours
                .iter()
                .zip([2.0 * m, 2.0 * m, 2.0 * m, 2.0 * m, 2.0 * m])
        {
            assert!((got - want).abs() < 1e-12, "{:?}", stats.util_band_hours);
        }
    }

    #[test]
    fn sampling_interval_is_the_interval_not_its_bucket() {
        let at = |ms: i64| Sample {
            util_pct: Some(50.0),
            ..Sample::at(ms)
        };
        let utc = jiff::tz::TimeZone::UTC;
        // A steady 1 s log (the log2 bucket [512, 1024) ms has its middle at 724 ms).
        let steady: Vec<Sample> = (0..100).map(|i| at(i * 1000)).collect();
        let got = fold(&steady).finish(&st(), &utc).sampling_interval_s;
        assert_eq!(got, Some(1.0));
        // 30 s, with one 15-minute gap and a few 20 s steps: the typical 30 s, within the bucket.
        let mut t = 0;
        let mut mixed = vec![at(0)];
        for i in 0..60 {
            t += match i {
                10 => 900_000,
                20..=23 => 20_000,
                _ => 30_000,
            };
            mixed.push(at(t));
        }
        let got = fold(&mixed).finish(&st(), &utc).sampling_interval_s;
        let v = got.expect("interval");
        assert!((v - (55.0 * 30.0 + 4.0 * 20.0) / 59.0).abs() < 1e-9, "{v}");
        // Merged pieces give the same answer as one piece.
        let (a, b) = steady.split_at(40);
        let mut left = fold(a);
        left.merge(&fold(b), &st());
        assert_eq!(left.finish(&st(), &utc).sampling_interval_s, Some(1.0));
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
    fn an_outlier_ahead_of_both_neighbours_is_dropped_not_an_anchor() {
        let mut acc = DeviceAcc::new(&s(0, 50.0, 0.0));
        for m in [1, 2, 100_000, 3, 4] {
            let r = acc.push(&s(m, 50.0, 0.0), &st());
            if m == 3 {
                assert_eq!(r, Ok(Taken::DroppedOutlier(100_000 * 60_000)));
            } else {
                assert_eq!(r, Ok(Taken::Sample));
            }
        }
        let stats = acc.finish(&st(), &jiff::tz::TimeZone::UTC);
        assert_eq!((stats.samples, stats.outliers, stats.reordered), (5, 1, 0));
        assert!((stats.observed_hours - 4.0 / 60.0).abs() < 1e-12);
        assert_eq!(stats.last_ts_ms, 4 * 60_000);
        // The first sample as the outlier: the anchor moves to the second.
        let mut acc = DeviceAcc::new(&s(100_000, 50.0, 0.0));
        assert_eq!(
            acc.push(&s(1, 50.0, 0.0), &st()),
            Ok(Taken::DroppedOutlier(100_000 * 60_000))
        );
        acc.push(&s(2, 50.0, 0.0), &st()).expect("in order");
        let stats = acc.finish(&st(), &jiff::tz::TimeZone::UTC);
        assert_eq!(
            (stats.first_ts_ms, stats.samples, stats.outliers),
            (60_000, 2, 1)
        );
        // A long gap that the next sample confirms is a gap, not an outlier.
        let mut acc = DeviceAcc::new(&s(0, 50.0, 0.0));
        acc.push(&s(600, 50.0, 0.0), &st()).expect("held");
        acc.push(&s(601, 50.0, 0.0), &st()).expect("confirms");
        let stats = acc.finish(&st(), &jiff::tz::TimeZone::UTC);
        assert_eq!((stats.samples, stats.outliers, stats.gaps), (3, 0, 1));
    }

    fn piece(key: &DeviceKey, from_min: i64, to_min: i64) -> (DeviceInfo, DeviceAcc) {
        let mut acc = DeviceAcc::new(&s(from_min, 50.0, 0.0));
        for m in from_min + 1..=to_min {
            acc.push(&s(m, 50.0, 0.0), &st()).expect("in order");
        }
        let _ = key;
        (DeviceInfo::default(), acc)
    }

    #[test]
    fn covered_pieces_are_dropped_and_partial_overlaps_planned_by_the_sweep() {
        let key = DeviceKey::new("h", "GPU-0000000000aa");
        let mut p = Profile::default();
        for (src, (a, b)) in [(0, (0, 60)), (1, (10, 50)), (2, (61, 120))] {
            let (info, acc) = piece(&key, a, b);
            p.add(src, key.clone(), info, acc, &st());
        }
        // Input 1 lies inside input 0: dropped and counted, nothing to re-read.
        assert_eq!(p.tangled(), None);
        let joined = p.clone().joined();
        let acc = &joined[&key].1;
        assert_eq!(acc.samples(), 61 + 60);
        assert_eq!((acc.overlaps, acc.overlap_samples), (1, 41));
        // Input 3 overlaps inputs 0 and 2 in part: re-read from where they end; a host that
        // differs is the same GPU (by UUID).
        let (info, acc) = piece(&key, 100, 150);
        let other = DeviceKey::new("h-copy", "GPU-0000000000aa");
        p.add(3, other, info, acc, &st());
        let plan = p.tangled().expect("tangled");
        let id = Identity::of(&key);
        let keep: Vec<(SourceId, Keep)> =
            plan.reads.iter().map(|(src, k)| (*src, k[&id])).collect();
        assert_eq!(
            keep,
            vec![
                (0, Keep::All),
                (2, Keep::All),
                (3, Keep::After(120 * 60_000))
            ]
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
                prop::bool::weighted(0.03),
            ),
            2..300,
        )
        .prop_map(|v| {
            let mut t = 1_767_225_600_000i64;
            let mut after_outlier = true;
            v.into_iter()
                .map(|(gap, util, mem, power, sm, outlier)| {
                    // Now and then a sample ten days ahead that the next one contradicts (never
                    // two in a row: two samples that agree are data, and the sequential rule
                    // then keeps them while a piece that starts with them cannot know it).
                    let outlier = outlier && !after_outlier;
                    after_outlier = outlier;
                    let ts = if outlier {
                        t + 10 * crate::DAY_MS
                    } else {
                        t += gap;
                        t
                    };
                    Sample {
                        util_pct: util,
                        mem_used_mib: mem,
                        power_w: power,
                        sm_active_pct: sm,
                        ..Sample::at(ts)
                    }
                })
                .collect()
        })
    }

    fn build_tiled(samples: &[Sample], tile_ms: Option<u64>, range: Option<(i64, i64)>) -> Profile {
        let mut b = ProfileBuilder::new(st());
        if let Some(t) = tile_ms {
            b = b.with_tiles(t);
        }
        if let Some((a, z)) = range {
            b = b.with_range(a, z);
        }
        let id = b.device(DeviceKey::new("h", "0"));
        for s in samples {
            let _ = b.push(id, s);
        }
        b.build()
    }

    fn stats_of(p: Profile) -> Vec<DeviceStats> {
        p.finish(&st(), &jiff::tz::TimeZone::UTC)
            .into_iter()
            .map(|d| d.stats)
            .collect()
    }

    proptest! {
        /// Every tile piece a real read makes holds together by the rule a store applies to a
        /// decoded one (so the check refuses damage, never data).
        #[test]
        fn every_tile_piece_read_holds_together(samples in arb_samples()) {
            let p = build_tiled(&samples, Some(3_600_000), None);
            for (_, piece) in p.tile_pieces() {
                prop_assert!(piece.acc.is_consistent(2 * 3_600_000), "{piece:?}");
            }
            let whole = build_tiled(&samples, None, None);
            for (_, (_, acc)) in whole.joined() {
                let span = u64::try_from(acc.last_ts() - acc.first_ts()).unwrap_or(0);
                prop_assert!(acc.is_consistent(span), "{acc:?}");
            }
        }

        /// Every percentile lies between the smallest and the largest reading it summarises.
        #[test]
        fn percentiles_lie_between_the_minimum_and_the_maximum(samples in arb_samples()) {
            for d in stats_of(build_tiled(&samples, None, None)) {
                if let Some(u) = &d.util {
                    let least = samples
                        .iter()
                        .filter_map(|s| s.util_pct)
                        .fold(f64::INFINITY, |a, v| a.min(f64::from(v)));
                    prop_assert!(u.p50_pct <= u.p95_pct && u.p95_pct <= u.max_pct, "{u:?}");
                    prop_assert!(u.p50_pct >= least, "{u:?} below {least}");
                    // The mean is kept in hundredths of a percent (`Weighted`).
                    prop_assert!(u.mean_pct <= u.max_pct + 0.005, "{u:?}");
                }
                if let (Some(p95), Some(peak)) = (d.mem_used_p95_mib, d.mem_used_peak_mib) {
                    let least = samples
                        .iter()
                        .filter_map(|s| s.mem_used_mib)
                        .fold(f64::INFINITY, |a, v| a.min(f64::from(v)));
                    prop_assert!(p95 <= peak, "p95 {p95} above the peak {peak}");
                    prop_assert!(p95 >= least, "p95 {p95} below the least reading {least}");
                }
            }
        }


        #[test]
        fn tiles_joined_equal_one_piece(samples in arb_samples(), tile_min in 5u64..3000) {
            let tile = tile_min * 60_000;
            let whole = build_tiled(&samples, None, None).joined();
            let tiled = build_tiled(&samples, Some(tile), None);
            // Every piece lies in its tile (an outlier that opened a tile does not drag the
            // samples after it there).
            for (t, p) in &tiled.tiles {
                for d in p.devices.values() {
                    prop_assert_eq!(tile_of(d.acc.first_ts(), tile), *t);
                    prop_assert_eq!(tile_of(d.acc.last_ts(), tile), *t);
                }
            }
            let joined = tiled.window(i64::MIN, i64::MAX, &st()).joined();
            prop_assert_eq!(joined, whole);
        }

        #[test]
        fn a_run_of_tiles_equals_the_samples_in_its_range(
            samples in arb_samples(),
            tile_min in 5u64..3000,
            a in any::<prop::sample::Index>(),
            b in any::<prop::sample::Index>(),
        ) {
            // Without the far-ahead outliers: a range that leaves one out never sees it, while
            // the tiles count it where it was dropped.
            let mut clean: Vec<Sample> = Vec::new();
            for s in samples {
                if clean.last().is_none_or(|l| s.ts_ms > l.ts_ms && s.ts_ms - l.ts_ms < crate::DAY_MS) {
                    clean.push(s);
                }
            }
            let tile = tile_min * 60_000;
            let tiled = build_tiled(&clean, Some(tile), None);
            let tiles: Vec<i64> = tiled.tile_indices().collect();
            let (mut i, mut j) = (a.index(tiles.len()), b.index(tiles.len()));
            if i > j {
                std::mem::swap(&mut i, &mut j);
            }
            let (from, to) = (tiles[i], tiles[j] + 1);
            let t = i64::try_from(tile).expect("tile");
            let ranged = build_tiled(&clean, None, Some((from * t, to * t)));
            prop_assert_eq!(stats_of(tiled.window(from, to, &st())), stats_of(ranged));
        }

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
