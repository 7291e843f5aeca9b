//! The join of GPU samples and jobs: every stretch of a device's time goes to exactly one job
//! or to none.
//!
//! [`Join`] is a [`Tap`]: it sees the samples the report's profile takes, in each device's
//! order, and weights them the profile's way (a sample stands until the device's next one,
//! unless the gap is longer than the maximum: then it is no data). Each stretch goes, first,
//! to the job the sample's labels name (an exporter's job mapping: `hpc_job`, `jobid`), else
//! to the job the [`Schedule`] says held that GPU then, split where jobs start and end; what
//! no job held is *unattributed*. State is one sample per device and one accumulator per job
//! (and per GPU of a job): bounded by devices and jobs, never by samples.

use std::collections::HashMap;

use gpuwise_core::profile::{Identity, Tap, TapPoint};
use gpuwise_core::{EpochMs, Sample};

use crate::record::{JobRecord, short_host};
use crate::schedule::{Lane, Schedule};

/// How samples are weighted: the profile's own settings.
#[derive(Clone, Copy, Debug)]
pub struct JoinSettings {
    /// A gap between two samples longer than this is no data.
    pub max_gap_ms: u64,
    /// Utilization strictly below this is idle.
    pub idle_below_pct: f32,
}

/// Utilization bins of a job's histogram: whole percent, 0–100.
const BINS: usize = 101;

/// What one job's samples add up to, on all its GPUs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JobAcc {
    /// Device time observed while the job held it.
    pub observed_ms: u64,
    /// Of it, time with a utilization reading.
    pub util_ms: u64,
    /// Utilization × ms.
    pub util_sum: f64,
    /// Time below the idle threshold.
    pub idle_ms: u64,
    /// Time at each whole percent of utilization (allocated on the first reading).
    pub hist: Option<Box<[u64; BINS]>>,
    /// Largest memory in use, MiB.
    pub mem_peak_mib: Option<f32>,
    /// Memory installed on its GPUs (the largest), MiB.
    pub mem_total_mib: Option<f32>,
    /// Power × ms, and the time with a power reading.
    pub power_sum: f64,
    /// Time with a power reading.
    pub power_ms: u64,
    /// End of the last stretch at or above the idle threshold.
    pub last_busy_ms: Option<EpochMs>,
    /// End of the last stretch observed.
    pub last_seen_ms: Option<EpochMs>,
    /// Per GPU: (device number, observed ms, utilization ms, utilization × ms).
    pub gpus: Vec<GpuAcc>,
}

/// One GPU's part of a job.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuAcc {
    /// The device's number in the join ([`Joined::devices`]).
    pub device: u32,
    /// Time observed.
    pub observed_ms: u64,
    /// Of it, time with a utilization reading.
    pub util_ms: u64,
    /// Utilization × ms.
    pub util_sum: f64,
}

impl JobAcc {
    /// Mean utilization over the time with a reading.
    #[must_use]
    pub fn mean_util(&self) -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        (self.util_ms > 0).then(|| self.util_sum / self.util_ms as f64)
    }

    /// The utilization that `q` of the time was at or below (whole percent).
    #[must_use]
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let h = self.hist.as_ref()?;
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let need = ((self.util_ms as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bin, ms) in h.iter().enumerate() {
            seen += ms;
            if seen >= need {
                #[allow(clippy::cast_precision_loss)]
                return Some(bin as f64);
            }
        }
        None
    }

    /// Add `[from, to)` of `device` with `last`'s readings; `device` is `None` for the
    /// unattributed time, which keeps no per-GPU split (a job holds a few GPUs, "no job" all).
    fn add(
        &mut self,
        device: Option<u32>,
        last: &Last,
        from: EpochMs,
        to: EpochMs,
        st: &JoinSettings,
    ) {
        let ms = u64::try_from(to - from).unwrap_or(0);
        if ms == 0 {
            return;
        }
        self.observed_ms += ms;
        self.last_seen_ms = Some(self.last_seen_ms.map_or(to, |t| t.max(to)));
        #[allow(clippy::cast_precision_loss)]
        let w = ms as f64;
        if let Some(device) = device {
            let gpu = match self.gpus.iter().position(|g| g.device == device) {
                Some(i) => &mut self.gpus[i],
                None => {
                    self.gpus.push(GpuAcc {
                        device,
                        ..GpuAcc::default()
                    });
                    self.gpus.last_mut().unwrap_or_else(|| unreachable!())
                }
            };
            gpu.observed_ms += ms;
            if let Some(u) = last.util {
                gpu.util_ms += ms;
                gpu.util_sum += f64::from(u) * w;
            }
        }
        if let Some(u) = last.util {
            self.util_ms += ms;
            self.util_sum += f64::from(u) * w;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let bin = (u.round() as usize).min(BINS - 1);
            self.hist.get_or_insert_with(|| Box::new([0; BINS]))[bin] += ms;
            if u < st.idle_below_pct {
                self.idle_ms += ms;
            } else {
                self.last_busy_ms = Some(self.last_busy_ms.map_or(to, |t| t.max(to)));
            }
        }
        if let Some(m) = last.mem {
            self.mem_peak_mib = Some(self.mem_peak_mib.map_or(m, |p| p.max(m)));
        }
        if let Some(t) = last.total {
            self.mem_total_mib = Some(self.mem_total_mib.map_or(t, |p| p.max(t)));
        }
        if let Some(p) = last.power {
            self.power_sum += f64::from(p) * w;
            self.power_ms += ms;
        }
    }
}

/// The readings a sample holds until the device's next one.
#[derive(Clone, Copy, Debug)]
struct Last {
    ts: EpochMs,
    util: Option<f32>,
    mem: Option<f32>,
    total: Option<f32>,
    power: Option<f32>,
    /// The job its labels named.
    job: Option<u32>,
}

/// A device as the join knows it.
#[derive(Clone, Debug)]
pub struct Device {
    /// Its host as reported.
    pub host: String,
    /// Its GPU (UUID or index name).
    pub gpu: String,
    /// Its index on the host, where the telemetry says.
    pub index: Option<u32>,
    short: String,
    /// Its holds in the schedule (looked up when its host or index becomes known).
    lane: Option<Lane>,
    /// The sample standing now, in the run of samples being read.
    last: Option<Last>,
    /// When that run began.
    run_first: EpochMs,
    /// Earlier runs of samples (an input read before, a rotated log read after the newer one):
    /// `[first, last sample]`, and the last sample's readings.
    runs: Vec<(EpochMs, Last)>,
}

impl Device {
    /// Whether `t` falls in an earlier run's time (`[first, last sample)`).
    fn covered(&self, t: EpochMs) -> bool {
        self.runs
            .iter()
            .any(|(first, last)| (*first..last.ts).contains(&t))
    }

    /// `[from, to)` without the earlier runs' times, as pieces in time order.
    fn uncovered(&self, from: EpochMs, to: EpochMs) -> Vec<(EpochMs, EpochMs)> {
        let mut pieces = vec![(from, to)];
        for (first, last) in &self.runs {
            let (a, b) = (*first, last.ts);
            pieces = pieces
                .into_iter()
                .flat_map(|(x, y)| {
                    if b <= x || a >= y {
                        vec![(x, y)]
                    } else {
                        [(x, a.max(x)), (b.min(y), y)]
                            .into_iter()
                            .filter(|(p, q)| p < q)
                            .collect()
                    }
                })
                .collect();
        }
        pieces
    }
}

/// Collects the join while the telemetry is read (see the module docs).
pub struct Join {
    settings: JoinSettings,
    schedule: Schedule,
    /// Record indices by id (an id reused after a controller restart names several).
    ids: HashMap<String, Vec<u32>>,
    /// The records' intervals, to pick among reused ids.
    spans: Vec<(Option<EpochMs>, Option<EpochMs>)>,
    /// Jobs only the telemetry names, in order of first sight (numbered after the records).
    labelled_only: Vec<String>,
    devices: Vec<Device>,
    by_identity: HashMap<Identity, u32>,
    /// The builder whose device numbers `cache` holds.
    scope: u64,
    /// (number in the builder of `scope`) → device, so the hot path hashes no key.
    cache: Vec<u32>,
    jobs: Vec<JobAcc>,
    unattributed: JobAcc,
    /// Samples not after their device's previous one (a copy of an input already read).
    repeated: u64,
}

/// What the join found.
#[derive(Clone, Debug)]
pub struct Joined {
    /// Per record (and then per job only the telemetry named), in order.
    pub jobs: Vec<JobAcc>,
    /// Jobs only the telemetry names (their accumulators follow the records').
    pub labelled_only: Vec<String>,
    /// Device time no job held.
    pub unattributed: JobAcc,
    /// The devices seen.
    pub devices: Vec<Device>,
    /// Samples not after their device's previous one, left out of the join.
    pub repeated: u64,
}

const NONE: u32 = u32::MAX;

impl Join {
    /// A join of `records`; a running job holds its GPUs until `open_end`.
    #[must_use]
    pub fn new(records: &[JobRecord], open_end: EpochMs, settings: JoinSettings) -> Self {
        let mut ids: HashMap<String, Vec<u32>> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            let n = u32::try_from(i).unwrap_or(NONE);
            let bare = r.id.split('@').next().unwrap_or(&r.id).to_owned();
            ids.entry(bare).or_default().push(n);
            // An array task is its own number to the prolog, and so to the exporter's label.
            if let Some(raw) = &r.raw_id {
                ids.entry(raw.clone()).or_default().push(n);
            }
        }
        Self {
            settings,
            schedule: Schedule::of(records, open_end),
            ids,
            spans: records.iter().map(|r| (r.start_ms, r.end_ms)).collect(),
            labelled_only: Vec::new(),
            devices: Vec::new(),
            by_identity: HashMap::new(),
            scope: u64::MAX,
            cache: Vec::new(),
            jobs: vec![JobAcc::default(); records.len()],
            unattributed: JobAcc::default(),
            repeated: 0,
        }
    }

    /// The schedule's binding of each record.
    #[must_use]
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    fn device(&mut self, at: &TapPoint<'_>) -> u32 {
        if at.scope != self.scope {
            self.scope = at.scope;
            self.cache.clear();
        }
        if let Some(d) = self.cache.get(at.id).copied()
            && d != NONE
        {
            return d;
        }
        let identity = Identity::of(at.key);
        let d = match self.by_identity.get(&identity) {
            Some(d) => {
                // One GPU under two hosts (an HA collector's copy, a log named after another
                // host): the schedule is asked under the host it knows.
                let dev = &mut self.devices[*d as usize];
                let short = short_host(&at.key.host);
                if short != dev.short
                    && !self.schedule.knows(&dev.short)
                    && self.schedule.knows(&short)
                {
                    dev.short = short;
                    dev.host.clone_from(&at.key.host);
                }
                *d
            }
            None => {
                let d = u32::try_from(self.devices.len()).unwrap_or(NONE);
                let short = short_host(&at.key.host);
                self.devices.push(Device {
                    host: at.key.host.clone(),
                    gpu: at.key.gpu.clone(),
                    index: at.info.index,
                    lane: self.schedule.lane(&short, at.info.index),
                    short,
                    last: None,
                    run_first: 0,
                    runs: Vec::new(),
                });
                self.by_identity.insert(identity, d);
                d
            }
        };
        if self.cache.len() <= at.id {
            self.cache.resize(at.id + 1, NONE);
        }
        self.cache[at.id] = d;
        d
    }

    /// The job a label names at `ts`: a record of that id (the one running then, for a reused
    /// id), else a job only the telemetry knows.
    fn labelled(&mut self, tag: &str, ts: EpochMs) -> u32 {
        if let Some(ix) = self.ids.get(tag) {
            let running = ix.iter().copied().find(|&i| {
                let (s, e) = self.spans[i as usize];
                s.is_some_and(|s| s <= ts) && e.is_none_or(|e| ts < e)
            });
            return running.unwrap_or(ix[ix.len() - 1]);
        }
        let n = self.jobs.len();
        self.labelled_only.push(tag.to_owned());
        self.jobs.push(JobAcc::default());
        self.spans.push((None, None));
        let i = u32::try_from(n).unwrap_or(NONE);
        self.ids.insert(tag.to_owned(), vec![i]);
        i
    }

    /// Give `[last.ts, to)` of device `d`, with `last`'s readings, to its jobs — but for the
    /// time earlier runs of its samples already gave (a copy of an input read before).
    fn attribute(&mut self, d: u32, last: &Last, to: EpochMs) {
        let dev = &self.devices[d as usize];
        if dev.runs.is_empty() {
            self.attribute_piece(d, last, last.ts, to);
            return;
        }
        for (from, to) in dev.uncovered(last.ts, to) {
            self.attribute_piece(d, last, from, to);
        }
    }

    /// Give `[from, to)` of device `d`, with `last`'s readings, to its jobs.
    fn attribute_piece(&mut self, d: u32, last: &Last, from: EpochMs, to: EpochMs) {
        let st = self.settings;
        if let Some(job) = last.job {
            self.jobs[job as usize].add(Some(d), last, from, to, &st);
            return;
        }
        let lane = self.devices[d as usize].lane;
        let (jobs, none) = (&mut self.jobs, &mut self.unattributed);
        self.schedule
            .split_lane(lane, from, to, |job, a, b| match job {
                Some(j) => jobs[j as usize].add(Some(d), last, a, b, &st),
                None => none.add(None, last, a, b, &st),
            });
    }

    /// What the join found. Where a device's samples came in runs out of time order (a
    /// rotated log read after the newer one), the time between one run's last sample and the
    /// next run's first is given as if the runs had been read in order (when it is no longer
    /// than the maximum gap), as the report's profile joins them.
    #[must_use]
    pub fn finish(mut self) -> Joined {
        for d in 0..self.devices.len() {
            let dev = &mut self.devices[d];
            if dev.runs.is_empty() {
                continue;
            }
            let mut runs = std::mem::take(&mut dev.runs);
            if let Some(last) = dev.last {
                runs.push((dev.run_first, last));
            }
            runs.sort_by_key(|(first, last)| (*first, last.ts));
            let d = u32::try_from(d).unwrap_or(NONE);
            // The sample standing at the end of everything before each run.
            let mut reach: Option<Last> = None;
            for (first, last) in runs {
                if let Some(r) = reach
                    && first > r.ts
                    && u64::try_from(first - r.ts).unwrap_or(u64::MAX) <= self.settings.max_gap_ms
                {
                    self.attribute_piece(d, &r, r.ts, first);
                }
                if reach.is_none_or(|r| last.ts > r.ts) {
                    reach = Some(last);
                }
            }
        }
        Joined {
            jobs: self.jobs,
            labelled_only: self.labelled_only,
            unattributed: self.unattributed,
            devices: self.devices,
            repeated: self.repeated,
        }
    }
}

impl Tap for Join {
    fn sample(&mut self, at: TapPoint<'_>, s: &Sample) {
        let d = self.device(&at);
        let job = at.tag.map(|t| self.labelled(t, s.ts_ms));
        let now = Last {
            ts: s.ts_ms,
            util: s.util_pct,
            mem: s.mem_used_mib,
            total: s.mem_total_mib,
            power: s.power_w,
            job,
        };
        let dev = &mut self.devices[d as usize];
        if dev.index.is_none() && at.info.index.is_some() {
            dev.index = at.info.index;
            dev.lane = self.schedule.lane(&dev.short, dev.index);
        }
        let covered = dev.covered(s.ts_ms);
        if covered {
            // An earlier run of this device's samples holds this time (a copy read before).
            self.repeated += 1;
        }
        match dev.last {
            Some(prev) if s.ts_ms == prev.ts => self.repeated += u64::from(!covered),
            Some(prev) if s.ts_ms < prev.ts => {
                // Back in time: a run of samples from an input read out of time order.
                dev.runs.push((dev.run_first, prev));
                dev.last = Some(now);
                dev.run_first = s.ts_ms;
            }
            Some(prev) => {
                dev.last = Some(now);
                let gap = u64::try_from(s.ts_ms - prev.ts).unwrap_or(u64::MAX);
                if gap <= self.settings.max_gap_ms {
                    self.attribute(d, &prev, s.ts_ms);
                }
            }
            None => {
                dev.last = Some(now);
                dev.run_first = s.ts_ms;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::Source;
    use gpuwise_core::{DeviceInfo, DeviceKey};

    fn feed(
        join: &mut Join,
        key: &DeviceKey,
        index: u32,
        tag: Option<&str>,
        ts: EpochMs,
        util: f32,
    ) {
        let info = DeviceInfo {
            index: Some(index),
            ..DeviceInfo::default()
        };
        let at = TapPoint {
            scope: 0,
            id: usize::try_from(index).expect("small"),
            key,
            info: &info,
            tag,
        };
        join.sample(
            at,
            &Sample {
                util_pct: Some(util),
                ..Sample::at(ts)
            },
        );
    }

    #[test]
    fn a_label_finds_an_array_task_by_its_raw_number_and_the_rest_by_schedule() {
        let mut task = JobRecord::new("5_0", Source::Slurm);
        task.raw_id = Some("6".into());
        let mut other = JobRecord::new("7", Source::Slurm);
        other.start_ms = Some(0);
        other.end_ms = Some(60_000);
        other.gpus = 1;
        other.nodes = vec!["n1".into()];
        let st = JoinSettings {
            max_gap_ms: 300_000,
            idle_below_pct: 5.0,
        };
        let mut join = Join::new(&[task, other], 120_000, st);
        let (a, b) = (DeviceKey::new("n1", "gpu0"), DeviceKey::new("n1", "gpu1"));
        for t in [0, 30_000, 60_000, 90_000] {
            feed(&mut join, &a, 0, None, t, 50.0);
            feed(&mut join, &b, 1, Some("6"), t, 10.0);
        }
        let j = join.finish();
        assert!(j.labelled_only.is_empty(), "{:?}", j.labelled_only);
        assert_eq!(j.jobs[0].observed_ms, 90_000, "the task, by its raw number");
        assert_eq!(
            j.jobs[1].observed_ms, 60_000,
            "job 7 held GPU 0 for a minute"
        );
        assert_eq!(j.unattributed.observed_ms, 30_000, "GPU 0 after job 7");
        assert_eq!(j.jobs[1].mean_util(), Some(50.0));
    }
}
