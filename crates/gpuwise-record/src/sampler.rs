//! Where readings come from: the [`Sampler`] trait, and [`NvmlSampler`], which reads NVML
//! through `nvml-wrapper` (the library is loaded at run time, so this builds and runs on
//! machines without a GPU, and fails at [`NvmlSampler::new`] there).

use std::path::PathBuf;

use nvml_wrapper::enum_wrappers::device::{Clock, PcieUtilCounter, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use crate::cgroup;
use crate::reading::{GpuReading, Mig, Owner, ProcessReading};

/// A source of readings, one call per tick.
pub trait Sampler {
    /// Read every GPU (or MIG instance) and the processes on them.
    ///
    /// # Errors
    /// When nothing could be read this tick (the driver went away); a reading that one device
    /// does not support is `None` in its row instead.
    fn sample(&mut self) -> Result<(Vec<GpuReading>, Vec<ProcessReading>), SampleError>;

    /// One line naming what is sampled (driver version, GPU count), for the start message.
    fn describe(&self) -> String;
}

/// Why a sampler could not start or read.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// The NVIDIA driver library is not on this machine.
    #[error(
        "the NVIDIA driver library libnvidia-ml.so.1 could not be loaded ({0}); `gpuwise record` needs an NVIDIA GPU with its driver installed"
    )]
    NoDriver(String),
    /// NVML is there but failed.
    #[error("NVML: {0}")]
    Nvml(String),
}

fn nvml_error(e: &NvmlError) -> SampleError {
    match e {
        NvmlError::LibloadingError(inner) => SampleError::NoDriver(inner.to_string()),
        NvmlError::LibraryNotFound | NvmlError::DriverNotLoaded => {
            SampleError::NoDriver(e.to_string())
        }
        other => SampleError::Nvml(other.to_string()),
    }
}

/// NVML, read through `nvml-wrapper`.
pub struct NvmlSampler {
    nvml: Nvml,
    /// Where `/proc` is (a test or a container may mount the host's elsewhere).
    proc_root: PathBuf,
    processes: bool,
}

impl NvmlSampler {
    /// Load and initialise NVML.
    ///
    /// # Errors
    /// [`SampleError::NoDriver`] where the library is missing or no driver is loaded.
    pub fn new(processes: bool) -> Result<Self, SampleError> {
        let nvml = Nvml::init().map_err(|e| nvml_error(&e))?;
        Ok(Self {
            nvml,
            proc_root: PathBuf::from("/proc"),
            processes,
        })
    }

    fn owner(&self, pid: u32) -> (Option<String>, Owner) {
        let dir = self.proc_root.join(pid.to_string());
        let name = std::fs::read_to_string(dir.join("comm"))
            .ok()
            .map(|s| s.trim_end().to_owned());
        let owner = std::fs::read_to_string(dir.join("cgroup"))
            .map(|t| cgroup::owner(&t))
            .unwrap_or_default();
        (name, owner)
    }

    fn processes_of(
        &self,
        d: &Device<'_>,
        gpu: &str,
        mig: Option<&str>,
        out: &mut Vec<ProcessReading>,
    ) {
        let Ok(list) = d.running_compute_processes() else {
            return;
        };
        for p in list {
            let (name, owner) = self.owner(p.pid);
            out.push(ProcessReading {
                gpu_uuid: gpu.to_owned(),
                mig_uuid: mig.map(str::to_owned),
                pid: p.pid,
                name,
                used_mib: match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b / MIB),
                    UsedGpuMemory::Unavailable => None,
                },
                owner,
            });
        }
    }
}

const MIB: u64 = 1024 * 1024;

/// The readings every device (GPU or MIG instance) may give; each is `None` where unsupported.
fn read_device(d: &Device<'_>, r: &mut GpuReading) {
    if let Ok(u) = d.utilization_rates() {
        r.util_gpu_pct = Some(u.gpu);
        r.util_mem_pct = Some(u.memory);
    }
    if let Ok(m) = d.memory_info() {
        r.mem_used_mib = Some(m.used / MIB);
        r.mem_total_mib = Some(m.total / MIB);
    }
    r.power_w = d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0);
    r.power_limit_w = d
        .enforced_power_limit()
        .ok()
        .map(|mw| f64::from(mw) / 1000.0);
    r.sm_clock_mhz = d.clock_info(Clock::SM).ok();
    r.temperature_c = d.temperature(TemperatureSensor::Gpu).ok();
    r.pcie_tx_kbps = d.pcie_throughput(PcieUtilCounter::Send).ok();
    r.pcie_rx_kbps = d.pcie_throughput(PcieUtilCounter::Receive).ok();
}

/// The profile in a MIG instance's name (`NVIDIA H100 80GB HBM3 MIG 3g.40gb` → `3g.40gb`).
fn mig_profile(name: &str) -> Option<String> {
    let (_, p) = name.rsplit_once(" MIG ")?;
    (!p.is_empty()).then(|| p.trim().to_owned())
}

impl Sampler for NvmlSampler {
    fn sample(&mut self) -> Result<(Vec<GpuReading>, Vec<ProcessReading>), SampleError> {
        let count = self.nvml.device_count().map_err(|e| nvml_error(&e))?;
        let mut gpus = Vec::with_capacity(count as usize);
        let mut procs = Vec::new();
        for i in 0..count {
            // A GPU that fell off the bus is left out of this tick; the others are still read.
            let Ok(d) = self.nvml.device_by_index(i) else {
                continue;
            };
            let Ok(uuid) = d.uuid() else {
                continue;
            };
            let base = GpuReading {
                index: Some(i),
                name: d.name().ok(),
                bus_id: d.pci_info().ok().map(|p| p.bus_id),
                uuid: uuid.clone(),
                ..GpuReading::default()
            };
            let mig_on = d.mig_mode().is_ok_and(|m| m.current == 1);
            if !mig_on {
                let mut r = base;
                read_device(&d, &mut r);
                gpus.push(r);
                if self.processes {
                    self.processes_of(&d, &uuid, None, &mut procs);
                }
                continue;
            }
            // `mig_device_count` is the most instances the GPU can hold; empty slots fail.
            // MIG on: each instance is a device of its own (as DCGM reports them); the parent
            // row is left out so its hours are not counted beside its instances'.
            let slots = d.mig_device_count().unwrap_or(0);
            for k in 0..slots {
                let Ok(m) = d.mig_device_by_index(k) else {
                    continue;
                };
                let Ok(mig_uuid) = m.uuid() else {
                    continue;
                };
                let name = m.name().ok();
                let mut r = GpuReading {
                    mig: Some(Mig {
                        uuid: mig_uuid.clone(),
                        profile: name.as_deref().and_then(mig_profile),
                    }),
                    ..base.clone()
                };
                read_device(&m, &mut r);
                // Power, clocks, temperature and PCIe belong to the whole board.
                r.power_w = None;
                r.power_limit_w = None;
                r.pcie_tx_kbps = None;
                r.pcie_rx_kbps = None;
                gpus.push(r);
                if self.processes {
                    self.processes_of(&m, &uuid, Some(&mig_uuid), &mut procs);
                }
            }
        }
        Ok((gpus, procs))
    }

    fn describe(&self) -> String {
        let driver = self
            .nvml
            .sys_driver_version()
            .unwrap_or_else(|_| "unknown".into());
        let n = self.nvml.device_count().unwrap_or(0);
        format!("NVML, driver {driver}, {n} GPU(s)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mig_profiles_from_names() {
        assert_eq!(
            mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb").as_deref(),
            Some("3g.40gb")
        );
        assert_eq!(
            mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb+me").as_deref(),
            Some("1g.5gb+me")
        );
        assert_eq!(mig_profile("NVIDIA H100 80GB HBM3"), None);
    }
}
