//! What every placement policy shares: the policies' names, the FGD paper's protocol, the
//! outcome (`gpuwise.pack/v1`) and its errors, and the arrival order (the list shuffled, pruned
//! or extended by copies to a load). [`crate::place`] and [`crate::mig`] both build on it;
//! [`crate::run`] picks between them.

use std::collections::BTreeMap;
use std::str::FromStr;

/// Where a MIG workload went: its profile and its first memory slice.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct MigSlot {
    /// The profile.
    pub profile: String,
    /// First memory slice (0–7).
    pub start: u8,
}

/// The JSON schema name of a packing.
pub const SCHEMA: &str = "gpuwise.pack/v1";

/// How workloads are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// The first node with room.
    FirstFit,
    /// The tightest node (CPU and GPU left over the largest node's).
    BestFit,
    /// The smallest dot product of free and asked-for resources.
    DotProduct,
    /// Shared GPUs, then free GPUs of used nodes, then free nodes.
    GpuPacking,
    /// Nodes running the same kind of GPU workload.
    GpuClustering,
    /// Any node with room.
    Random,
    /// Fragmentation gradient descent (Weng et al., ATC'23).
    Fgd,
    /// MIG instances at legal positions (see [`crate::mig`]).
    Mig,
}

impl Policy {
    /// Every policy, in the order the FGD paper lists its baselines (FGD last).
    pub const ALL: [Self; 8] = [
        Self::FirstFit,
        Self::Random,
        Self::DotProduct,
        Self::GpuClustering,
        Self::GpuPacking,
        Self::BestFit,
        Self::Fgd,
        Self::Mig,
    ];

    /// Its name on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::FirstFit => "first-fit",
            Self::BestFit => "best-fit",
            Self::DotProduct => "dot-product",
            Self::GpuPacking => "gpu-packing",
            Self::GpuClustering => "gpu-clustering",
            Self::Random => "random",
            Self::Fgd => "fgd",
            Self::Mig => "mig",
        }
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|p| p.name()).collect();
                format!("unknown policy `{s}` (one of {})", names.join(", "))
            })
    }
}

/// How the list is presented to the policy.
#[derive(Clone, Debug, PartialEq)]
pub struct Protocol {
    /// Prune or extend the list until the GPUs asked for are this share of the cluster's
    /// (`1.3`: 130 %); `None`: the list as it is.
    pub load: Option<f64>,
    /// Seeds the shuffle, the copies and the tie-breaks.
    pub seed: u64,
    /// Shuffle the list first (the paper's protocol) instead of keeping its order.
    pub shuffle: bool,
    /// The typical workloads for `fgd` are the most frequent shapes making up this share of
    /// the list, in percent (the paper: 95).
    pub popularity_pct: f64,
}

impl Default for Protocol {
    fn default() -> Self {
        Self {
            load: None,
            seed: 42,
            shuffle: false,
            popularity_pct: 95.0,
        }
    }
}

/// Where one workload went.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Placement {
    /// The workload (a copy made to reach the load is named `NAME-copy-N`).
    pub pod: String,
    /// The node, `None` when no node had room.
    pub node: Option<String>,
    /// GPU indices on the node: the one a share uses, the ones a whole-GPU workload takes,
    /// none for a CPU-only one.
    pub gpus: Vec<u32>,
    /// The MIG instance it got (the MIG policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mig: Option<MigSlot>,
}

/// The outcome of a packing.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Packing {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// The policy.
    pub policy: Policy,
    /// The load asked for (`None`: the list as it was).
    pub load: Option<f64>,
    /// The seed.
    pub seed: u64,
    /// Nodes.
    pub nodes: usize,
    /// GPUs in the cluster.
    pub cluster_gpus: u64,
    /// Workloads that arrived (after pruning or copying).
    pub pods: usize,
    /// Workloads placed.
    pub placed_pods: usize,
    /// Workloads no node had room for.
    pub failed_pods: usize,
    /// Those, by kind (`cpu-only`, `gpu-share`, `1-gpu`, `8-gpu`, …).
    pub failed_by_kind: BTreeMap<String, u64>,
    /// GPU thousandths asked for by the arrivals.
    pub arrived_gpu_milli: i64,
    /// GPU thousandths placed.
    pub allocated_gpu_milli: i64,
    /// Arrived over the cluster's GPU capacity, in percent.
    pub arrived_pct: f64,
    /// Placed over the cluster's GPU capacity, in percent (the paper's allocation ratio).
    pub allocation_ratio_pct: f64,
    /// GPU capacity not placed, in GPUs.
    pub unallocated_gpus: f64,
    /// Idle GPU capacity the typical workload cannot use, over the cluster's GPU capacity, in
    /// percent (the paper's fragmentation measure, its Fig. 7a).
    pub fragmentation_pct: f64,
    /// That fragmented capacity, in GPUs.
    pub fragmented_gpus: f64,
    /// That fragmented capacity over all idle GPU capacity, in percent (the paper's
    /// fragmentation ratio, Fig. 7b); 0 when nothing is idle.
    pub fragmentation_of_idle_pct: f64,
    /// Workload shapes counted as typical for the fragmentation measure.
    pub typical_shapes: usize,
    /// Resources the node list did not give and that were therefore not checked.
    pub unchecked: Vec<&'static str>,
    /// Allocation and fragmentation as the arrivals grow (the paper's Fig. 7a and 9a curves):
    /// per whole percent of the cluster's GPUs asked for so far, the mean over the arrivals
    /// that brought it to that percent (a percent no arrival lands on takes its neighbours'),
    /// as the authors' analysis script does. Empty under the MIG policy.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<CurvePoint>,
    /// Every workload, in arrival order.
    pub placements: Vec<Placement>,
}

/// One point of the curve.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct CurvePoint {
    /// GPUs asked for so far, in whole percent of the cluster's.
    pub arrived_pct: u32,
    /// Allocation ratio then, in percent.
    pub allocation_ratio_pct: f64,
    /// Fragmented GPU capacity then, in percent of the cluster's.
    pub fragmentation_pct: f64,
}

/// Why a packing cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// Too many GPU models for the model bitmask.
    #[error("more than 64 GPU models among the nodes and workloads")]
    TooManyModels,
    /// The cluster holds no GPU while a load (or MIG) needs some.
    #[error("the node list has no GPUs (a load, and the MIG policy, count in GPUs)")]
    NoGpus,
    /// Nothing to place.
    #[error("no workloads to place")]
    NoPods,
    /// A load asked of a list whose workloads ask for no GPU: no number of copies reaches it.
    #[error(
        "--load: no workload in the list asks for a GPU, so no number of copies reaches a GPU load"
    )]
    NoGpuWork,
    /// Reaching the load would take more copies than the engine takes.
    #[error(
        "--load: reaching it would take more than {0} workloads (the list's are too small for the cluster)"
    )]
    TooManyArrivals(usize),
}

/// The most workloads a load may bring (copies included): ten million, about a gigabyte of
/// placements.
pub const MAX_ARRIVALS: usize = 10_000_000;

/// The arrival order: shuffled or not, then pruned or extended by random copies until the
/// GPU thousandths asked for reach `load` × capacity. As in the authors' simulator, copying
/// stops at the first pick whose per-GPU share would pass the target.
pub(crate) fn arrivals(
    sizes: &[(i64, i64)],
    p: &Protocol,
    capacity_milli: i64,
    rng: &mut fastrand::Rng,
    by_name: &[usize],
) -> Result<Vec<(usize, Option<u32>)>, PackError> {
    let mut order: Vec<(usize, Option<u32>)> = by_name.iter().map(|&i| (i, None)).collect();
    if p.shuffle {
        rng.shuffle(&mut order);
    } else {
        order.sort_by_key(|&(i, _)| i);
    }
    let Some(load) = p.load else {
        return Ok(order);
    };
    if sizes.iter().all(|s| s.0 <= 0) {
        return Err(PackError::NoGpuWork);
    }
    let target = load * capacity_milli as f64;
    let mut total: i64 = sizes.iter().map(|s| s.0).sum();
    let extend = (total as f64) < target;
    while total as f64 > target && !order.is_empty() {
        let (i, _) = order.remove(rng.usize(..order.len()));
        total -= sizes[i].0;
    }
    let mut copy = 0;
    while extend && (total as f64) < target {
        let i = by_name[rng.usize(..by_name.len())];
        if (total + sizes[i].1) as f64 > target {
            break;
        }
        total += sizes[i].0;
        order.push((i, Some(copy)));
        copy += 1;
        if order.len() > MAX_ARRIVALS {
            return Err(PackError::TooManyArrivals(MAX_ARRIVALS));
        }
    }
    Ok(order)
}

/// A packing with nothing placed yet.
pub(crate) fn empty(policy: Policy, protocol: &Protocol, nodes: usize, capacity: i64) -> Packing {
    Packing {
        schema: SCHEMA,
        policy,
        load: protocol.load,
        seed: protocol.seed,
        nodes,
        cluster_gpus: (capacity / 1000) as u64,
        pods: 0,
        placed_pods: 0,
        failed_pods: 0,
        failed_by_kind: BTreeMap::new(),
        arrived_gpu_milli: 0,
        allocated_gpu_milli: 0,
        arrived_pct: 0.0,
        allocation_ratio_pct: 0.0,
        unallocated_gpus: 0.0,
        fragmentation_pct: 0.0,
        fragmented_gpus: 0.0,
        fragmentation_of_idle_pct: 0.0,
        typical_shapes: 0,
        unchecked: Vec::new(),
        curve: Vec::new(),
        placements: Vec::new(),
    }
}

impl Packing {
    /// Record a workload placed on `node`.
    pub(crate) fn placed(&mut self, pod: String, node: &str, gpus: Vec<u32>, mig: Option<MigSlot>) {
        self.placed_pods += 1;
        self.placements.push(Placement {
            pod,
            node: Some(node.to_owned()),
            gpus,
            mig,
        });
    }

    /// Record a workload no node had room for, counted by its kind.
    pub(crate) fn failed(&mut self, pod: String, kind: String) {
        self.failed_pods += 1;
        *self.failed_by_kind.entry(kind).or_default() += 1;
        self.placements.push(Placement {
            pod,
            node: None,
            gpus: Vec::new(),
            mig: None,
        });
    }
}

/// The name of a workload or of its `copy`-th copy.
pub(crate) fn copy_name(name: &str, copy: Option<u32>) -> String {
    match copy {
        None => name.to_owned(),
        Some(c) => format!("{name}-copy-{c}"),
    }
}
