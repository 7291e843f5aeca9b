//! What one tick of the sampler reads: per GPU (or MIG instance) and per process. `None` is a
//! reading the driver did not give (not supported, or failed this tick), never zero.

/// A MIG instance: the unit that runs work when a GPU is partitioned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mig {
    /// The instance's own UUID (`MIG-…`), stable across reboots.
    pub uuid: String,
    /// Its profile (`3g.40gb`), from the name NVML gives the instance.
    pub profile: Option<String>,
}

/// One GPU, or one MIG instance of it, at one tick.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuReading {
    /// Index of the physical GPU on its host (can change at boot).
    pub index: Option<u32>,
    /// Product name (`NVIDIA H100 80GB HBM3`).
    pub name: Option<String>,
    /// PCI bus id, as nvidia-smi prints it (`00000000:1A:00.0`).
    pub bus_id: Option<String>,
    /// UUID of the physical GPU (`GPU-…`); for a MIG instance, its parent's.
    pub uuid: String,
    /// The MIG instance, for a reading of one.
    pub mig: Option<Mig>,
    pub util_gpu_pct: Option<u32>,
    pub util_mem_pct: Option<u32>,
    pub mem_used_mib: Option<u64>,
    pub mem_total_mib: Option<u64>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub temperature_c: Option<u32>,
    /// PCIe throughput over the driver's last 20 ms window, KB/s.
    pub pcie_tx_kbps: Option<u32>,
    pub pcie_rx_kbps: Option<u32>,
}

/// Who a process belongs to, from its cgroup.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    /// Container id (64 hex digits) under Docker, containerd, CRI-O or Podman.
    pub container_id: Option<String>,
    /// Kubernetes pod UID (dashes restored), for a process in a pod.
    pub pod_uid: Option<String>,
    /// The cgroup path the two were read from (`/` for none).
    pub cgroup: Option<String>,
}

/// A process holding memory on a GPU (or MIG instance) at one tick.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessReading {
    pub gpu_uuid: String,
    pub mig_uuid: Option<String>,
    pub pid: u32,
    /// Command name (`/proc/PID/comm`).
    pub name: Option<String>,
    pub used_mib: Option<u64>,
    pub owner: Owner,
}

/// Everything one tick read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    /// When the tick started, ms since the Unix epoch (UTC).
    pub at_ms: i64,
    pub gpus: Vec<GpuReading>,
    pub processes: Vec<ProcessReading>,
}
