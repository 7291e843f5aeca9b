//! # Samples: typed readings of one device at one instant
//!
//! Every reader produces [`Sample`]s keyed by a [`DeviceKey`]. Percentages are `0..=100`
//! whatever the source's scale (DCGM `PROF_*` ratios are multiplied by 100 by the reader).
//! [`Sample::sanitize`] drops impossible values (and says which), so that a bad reading
//! becomes a counted, reported skip instead of a wrong number.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;

/// Milliseconds since the Unix epoch, UTC.
pub type EpochMs = i64;

/// One device's readings at one instant. Fields carry their unit in their name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct Sample {
    /// When the reading was taken.
    pub ts_ms: EpochMs,
    /// Utilization in percent from the best signal available (see [`UtilSource`]).
    pub util_pct: Option<f32>,
    /// DCGM `PROF_SM_ACTIVE` × 100.
    pub sm_active_pct: Option<f32>,
    /// DCGM `PROF_SM_OCCUPANCY` × 100.
    pub sm_occupancy_pct: Option<f32>,
    /// DCGM `PROF_PIPE_TENSOR_ACTIVE` × 100.
    pub tensor_active_pct: Option<f32>,
    /// DCGM `PROF_DRAM_ACTIVE` × 100.
    pub dram_active_pct: Option<f32>,
    /// Memory-interface busy time: nvidia-smi `utilization.memory`, DCGM `DEV_MEM_COPY_UTIL`, dmon `mem`.
    pub mem_bw_util_pct: Option<f32>,
    /// Device memory in use, MiB.
    pub mem_used_mib: Option<f32>,
    /// Device memory installed, MiB.
    pub mem_total_mib: Option<f32>,
    /// Board power draw, watts.
    pub power_w: Option<f32>,
    /// Enforced power limit, watts.
    pub power_limit_w: Option<f32>,
}

/// Which value of a sample was dropped by [`Sample::sanitize`], and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Invalid {
    /// A value that is NaN or infinite.
    NotFinite(&'static str),
    /// A percentage below 0 or above 100.
    PercentOutOfRange(&'static str),
    /// A negative amount of memory or power.
    Negative(&'static str),
    /// Memory used above memory total.
    MemoryUsedAboveTotal,
    /// An amount above what any GPU has (see [`MAX_MEMORY_MIB`], [`MAX_POWER_W`]).
    Implausible(&'static str, u32),
}

/// The most memory any one GPU is taken to have: 1 TiB (the largest in 2026 carry 288 GB).
/// A larger reading is a broken counter, not a GPU.
pub const MAX_MEMORY_MIB: u32 = 1_048_576;

/// One hour in milliseconds.
pub const HOUR_MS: i64 = 3_600_000;
/// One day in milliseconds (epoch time has no leap seconds).
pub const DAY_MS: i64 = 86_400_000;
/// Bytes in a MiB.
pub const MIB_BYTES: f64 = 1_048_576.0;

/// Hours in `ms` milliseconds.
#[must_use]
pub fn hours_of_ms(ms: f64) -> f64 {
    ms / 3_600_000.0
}

/// The most power any one GPU is taken to draw: 5 kW (the largest in 2026 are rated 1.2 kW).
pub const MAX_POWER_W: u32 = 5_000;

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Invalid::NotFinite(field) => write!(f, "`{field}` is not a finite number"),
            Invalid::PercentOutOfRange(field) => write!(f, "`{field}` is outside 0–100 %"),
            Invalid::Negative(field) => write!(f, "`{field}` is negative"),
            Invalid::MemoryUsedAboveTotal => f.write_str("memory used is above memory total"),
            Invalid::Implausible(field, limit) => {
                write!(f, "`{field}` is above {limit}, more than any GPU has")
            }
        }
    }
}

impl Sample {
    /// An empty sample at `ts_ms`.
    #[must_use]
    pub fn at(ts_ms: EpochMs) -> Self {
        Self {
            ts_ms,
            ..Self::default()
        }
    }

    /// Whether the sample carries no reading at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::at(self.ts_ms)
    }

    /// Drop impossible values, calling `report` once for each.
    ///
    /// Rules (documented in `docs/input-formats.md`): NaN and ±Inf are dropped; a percentage
    /// outside `0..=100` is dropped (not clamped: 130 % says the source is broken, and a clamped
    /// 100 % would be a silently wrong number); negative memory or power is dropped, and so is
    /// memory above [`MAX_MEMORY_MIB`] or power above [`MAX_POWER_W`]; memory used more than 1 %
    /// above memory total drops memory used. The Prometheus pushdown applies the same limits to
    /// the aggregates it pulls.
    pub fn sanitize(&mut self, mut report: impl FnMut(Invalid)) {
        // One range test per value on the common path (NaN fails it too); the reason is
        // worked out only for a value that fails.
        fn pct(v: &mut Option<f32>, name: &'static str, report: &mut impl FnMut(Invalid)) {
            if let Some(x) = *v
                && !(0.0..=100.0).contains(&x)
            {
                *v = None;
                report(if x.is_finite() {
                    Invalid::PercentOutOfRange(name)
                } else {
                    Invalid::NotFinite(name)
                });
            }
        }
        fn amount(
            v: &mut Option<f32>,
            name: &'static str,
            max: u32,
            report: &mut impl FnMut(Invalid),
        ) {
            #[allow(clippy::cast_precision_loss)]
            let top = max as f32;
            if let Some(x) = *v
                && !(0.0..=top).contains(&x)
            {
                *v = None;
                report(if !x.is_finite() {
                    Invalid::NotFinite(name)
                } else if x < 0.0 {
                    Invalid::Negative(name)
                } else {
                    Invalid::Implausible(name, max)
                });
            }
        }
        pct(&mut self.util_pct, "utilization", &mut report);
        pct(&mut self.sm_active_pct, "sm_active", &mut report);
        pct(&mut self.sm_occupancy_pct, "sm_occupancy", &mut report);
        pct(&mut self.tensor_active_pct, "tensor_active", &mut report);
        pct(&mut self.dram_active_pct, "dram_active", &mut report);
        pct(
            &mut self.mem_bw_util_pct,
            "memory_bandwidth_utilization",
            &mut report,
        );
        amount(
            &mut self.mem_used_mib,
            "memory_used",
            MAX_MEMORY_MIB,
            &mut report,
        );
        amount(
            &mut self.mem_total_mib,
            "memory_total",
            MAX_MEMORY_MIB,
            &mut report,
        );
        amount(&mut self.power_w, "power", MAX_POWER_W, &mut report);
        amount(
            &mut self.power_limit_w,
            "power_limit",
            MAX_POWER_W,
            &mut report,
        );
        if let (Some(used), Some(total)) = (self.mem_used_mib, self.mem_total_mib)
            && total > 0.0
            && used > total * 1.01
        {
            self.mem_used_mib = None;
            report(Invalid::MemoryUsedAboveTotal);
        }
    }
}

/// The identity of one device: a whole GPU, or one MIG instance of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
pub struct DeviceKey {
    /// Host name (from the data, `--host`, or the file name stem).
    pub host: String,
    /// GPU UUID when the source has one, else `gpu<index>` or the PCI bus id.
    pub gpu: String,
    /// The MIG instance, for one: its GPU-instance id (DCGM's `GPU_I_ID`), or its `MIG-…` UUID
    /// where the source names instances by UUID (`gpuwise record`).
    pub mig: Option<String>,
}

impl DeviceKey {
    /// A whole-GPU key.
    #[must_use]
    pub fn new(host: impl Into<String>, gpu: impl Into<String>) -> Self {
        Self {
            host: host.into(),
            gpu: gpu.into(),
            mig: None,
        }
    }
}

impl fmt::Display for DeviceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.host, self.gpu)?;
        if let Some(gi) = &self.mig {
            write!(f, "/mig{gi}")?;
        }
        Ok(())
    }
}

/// Which utilization signal a device's `util_pct` came from (precedence, best first).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum UtilSource {
    /// DCGM `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (ratio of time the graphics engine is active).
    DcgmGrEngineActive,
    /// DCGM `DCGM_FI_DEV_GPU_UTIL`.
    DcgmGpuUtil,
    /// nvidia-smi `utilization.gpu` (or dmon `sm`).
    NvidiaSmi,
    /// A generic CSV column mapped with `--map util=…`.
    Mapped,
}

/// What is known about a device besides its readings. Mergeable: later non-empty values win
/// for scalars, label values are counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct DeviceInfo {
    /// Product name as the source printed it (`NVIDIA H100 80GB HBM3`).
    pub model_name: Option<String>,
    /// GPU index on its host (can change at boot; informative only).
    pub index: Option<u32>,
    /// MIG profile of the instance (`1g.10gb`).
    pub mig_profile: Option<String>,
    /// Utilization signal used.
    pub util_source: Option<UtilSource>,
    /// Label values seen (namespace, pod, container, and any other label), with how many
    /// samples carried each value.
    pub labels: BTreeMap<String, BTreeMap<String, u64>>,
    /// Other hosts the same GPU (by UUID) was reported under; it is counted once, under the
    /// host that reported it most.
    pub other_hosts: Vec<String>,
    /// Inputs of this device overlapped in time and could not be read again (standard input):
    /// only the data before the overlap is counted.
    pub unresolved_overlap: bool,
    /// What the device runs, where workload hints (`--workloads`) say.
    pub workload: Option<WorkloadKind>,
}

/// What a workload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WorkloadKind {
    /// Training or fine-tuning.
    Training,
    /// Serving.
    Inference,
    /// Interactive notebook.
    Notebook,
    /// Batch jobs.
    Batch,
}

impl DeviceInfo {
    /// Merge `other` (later data) into `self`.
    pub fn merge(&mut self, other: &DeviceInfo) {
        if other.model_name.is_some() {
            self.model_name.clone_from(&other.model_name);
        }
        if other.index.is_some() {
            self.index = other.index;
        }
        if other.mig_profile.is_some() {
            self.mig_profile.clone_from(&other.mig_profile);
        }
        self.util_source = match (self.util_source, other.util_source) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        for (k, values) in &other.labels {
            let mine = self.labels.entry(k.clone()).or_default();
            for (v, n) in values {
                *mine.entry(v.clone()).or_default() += n;
            }
        }
    }

    /// Count `n` samples carrying `key=value`.
    pub fn add_label(&mut self, key: &str, value: &str, n: u64) {
        if value.is_empty() {
            return;
        }
        let values = self.labels.entry(key.to_owned()).or_default();
        match values.get_mut(value) {
            Some(count) => *count += n,
            None => {
                values.insert(value.to_owned(), n);
            }
        }
    }

    /// The value of label `key` carried by most samples (ties: the smaller value).
    #[must_use]
    pub fn label(&self, key: &str) -> Option<&str> {
        let values = self.labels.get(key)?;
        values
            .iter()
            .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
            .map(|(v, _)| v.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_drops_and_reports_impossible_values() {
        let mut s = Sample {
            util_pct: Some(130.0),
            sm_active_pct: Some(f32::NAN),
            mem_used_mib: Some(90_000.0),
            mem_total_mib: Some(81_559.0),
            power_w: Some(-3.0),
            power_limit_w: Some(1e30),
            ..Sample::at(0)
        };
        let mut seen = Vec::new();
        s.sanitize(|i| seen.push(i));
        assert_eq!(s.util_pct, None);
        assert_eq!(s.sm_active_pct, None);
        assert_eq!(s.mem_used_mib, None);
        assert_eq!(s.mem_total_mib, Some(81_559.0));
        assert_eq!(s.power_w, None);
        assert_eq!(
            seen,
            vec![
                Invalid::PercentOutOfRange("utilization"),
                Invalid::NotFinite("sm_active"),
                Invalid::Negative("power"),
                Invalid::Implausible("power_limit", MAX_POWER_W),
                Invalid::MemoryUsedAboveTotal
            ]
        );
    }

    #[test]
    fn label_majority_wins() {
        let mut info = DeviceInfo::default();
        info.add_label("namespace", "a", 3);
        info.add_label("namespace", "b", 5);
        info.add_label("namespace", "", 9);
        assert_eq!(info.label("namespace"), Some("b"));
        assert_eq!(info.label("pod"), None);
    }
}
