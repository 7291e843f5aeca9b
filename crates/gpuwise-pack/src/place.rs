//! Placing workloads on nodes, one after another, by a policy (`gpuwise pack`).
//!
//! Each workload goes, in order, to one of the nodes with room for it (CPU, memory, GPU
//! model, and GPUs: a share of one GPU needs a GPU with that much left, a whole-GPU workload
//! needs that many untouched GPUs). Among the nodes with room the policy scores each one, as
//! the Kubernetes scheduler plugins of Weng et al.'s simulator do (integer scores, 0–100), and
//! the highest wins; equal scores are broken at random, as the Kubernetes framework does.
//! Nothing leaves: this is the arrivals-only protocol of the FGD paper (ATC'23).
//!
//! - `first-fit`: the first node in list order, the first GPU that fits.
//! - `best-fit`: the least CPU and GPU left after placing, each over the largest node's.
//! - `dot-product`: the smallest dot product of what is left and what is asked (Tetris).
//! - `gpu-packing`: GPUs already shared first, then free GPUs on used nodes, then free nodes.
//! - `gpu-clustering`: nodes already running workloads of the same kind (share, 1-GPU, …).
//! - `random`: any node with room, any GPU with room.
//! - `fgd`: fragmentation gradient descent: the node (and, for a share, the GPU) whose
//!   *fragmentation* grows least, where a node's fragmentation is the GPU capacity left on it
//!   that the typical workload could not use, weighted by how often each kind of workload
//!   arrives (the most frequent shapes making up 95 % of the list).
//!
//! All but `random`, `fgd` and `first-fit` put a share on the GPU with the least room that fits.
//!
//! The protocol of the paper: the list is shuffled (seeded), then pruned or extended by random
//! copies of its workloads until the GPUs asked for reach `load` × the cluster's GPUs; the
//! allocation ratio is the GPU capacity placed over the cluster's.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;

use crate::cluster::{Node, Pod};

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
}

impl Policy {
    /// Every policy, in the order the FGD paper lists its baselines (FGD last).
    pub const ALL: [Self; 7] = [
        Self::FirstFit,
        Self::Random,
        Self::DotProduct,
        Self::GpuClustering,
        Self::GpuPacking,
        Self::BestFit,
        Self::Fgd,
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
    /// Idle GPU capacity the typical workload cannot use, over all idle GPU capacity, in
    /// percent (the paper's fragmentation ratio); 0 when nothing is idle.
    pub fragmentation_pct: f64,
    /// That fragmented capacity, in GPUs (the paper's fragmentation amount).
    pub fragmented_gpus: f64,
    /// Workload shapes counted as typical for the fragmentation measure.
    pub typical_shapes: usize,
    /// Resources the node list did not give and that were therefore not checked.
    pub unchecked: Vec<&'static str>,
    /// Every workload, in arrival order.
    pub placements: Vec<Placement>,
}

/// A workload that cannot be placed by any node list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PackError {
    /// Too many GPU models for the model bitmask.
    #[error("more than 64 GPU models among the nodes and workloads")]
    TooManyModels,
    /// The cluster holds no GPU while a load is asked for.
    #[error("--load needs a cluster with GPUs")]
    NoGpus,
    /// Nothing to place.
    #[error("no workloads to place")]
    NoPods,
}

/// A workload as the engine sees it.
#[derive(Clone, Debug)]
struct Req {
    cpu: i64,
    mem: i64,
    num: u32,
    milli: i32,
    /// Allowed models as a bitmask (`None`: any).
    mask: Option<u64>,
    /// The shape, for the typical-workload count and the FGD memo.
    shape: u32,
}

impl Req {
    fn share(&self) -> bool {
        self.num == 1 && self.milli < 1000
    }
    fn total(&self) -> i64 {
        i64::from(self.num) * i64::from(self.milli)
    }
}

fn accessible(mask: Option<u64>, model: Option<u8>) -> bool {
    match (mask, model) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(m), Some(i)) => m & (1 << i) != 0,
    }
}

/// A typical workload shape and how often it arrives.
#[derive(Clone, Debug)]
struct Typical {
    cpu: i64,
    milli: i32,
    num: u32,
    mask: Option<u64>,
    p: f64,
}

/// A node's free resources.
#[derive(Clone, Debug)]
struct NodeSt {
    cpu: i64,
    mem: i64,
    gpus: Vec<i32>,
    model: Option<u8>,
    /// Kinds of GPU workload on it (0: share, n: n whole GPUs) and how many.
    kinds: Vec<(u32, u32)>,
    /// Its interned (model, CPU, GPUs left) state, for the FGD memo.
    state: u32,
}

impl NodeSt {
    fn total_left(&self) -> i64 {
        self.gpus.iter().map(|&g| i64::from(g)).sum()
    }
    fn free_gpus(&self) -> usize {
        self.gpus.iter().filter(|&&g| g == 1000).count()
    }
    fn fits(&self, r: &Req) -> bool {
        if self.cpu < r.cpu || self.mem < r.mem {
            return false;
        }
        if r.milli == 0 {
            return true;
        }
        accessible(r.mask, self.model)
            && self.gpus.iter().filter(|&&g| g >= r.milli).count() >= r.num as usize
    }
}

/// The fragmentation of a node state against the typical workloads, in GPU thousandths
/// (Weng et al.: the capacity left that a typical workload could not use, weighted by its
/// frequency; a workload without GPUs counts all of it, as in the authors' simulator).
fn frag(model: Option<u8>, cpu: i64, gpus: &[i32], typical: &[Typical]) -> f64 {
    let total: i64 = gpus.iter().map(|&g| i64::from(g)).sum();
    if total == 0 {
        return 0.0;
    }
    let mut f = 0.0;
    for t in typical {
        let amount = if t.milli == 0 || !accessible(t.mask, model) {
            total
        } else if cpu >= t.cpu && gpus.iter().filter(|&&g| g >= t.milli).count() >= t.num as usize {
            gpus.iter()
                .filter(|&&g| g < t.milli)
                .map(|&g| i64::from(g))
                .sum()
        } else {
            total
        };
        f += t.p * amount as f64;
    }
    f
}

fn sigmoid_score(before: f64, after: f64) -> i64 {
    (100.0 / (1.0 + (-(before - after) / 1000.0).exp())) as i64
}

/// GPUs left after a whole-GPU (or CPU-only) workload, taking the tightest GPUs that fit in
/// ascending order, as the simulator's `NodeResource.Sub` does.
fn sub_whole(gpus: &[i32], r: &Req) -> Vec<i32> {
    let mut out = gpus.to_vec();
    if r.num == 0 {
        return out;
    }
    let mut order: Vec<usize> = (0..out.len()).collect();
    order.sort_by_key(|&i| out[i]);
    let mut need = r.num;
    for i in order {
        if need > 0 && out[i] >= r.milli {
            out[i] -= r.milli;
            need -= 1;
        }
    }
    out
}

/// The FGD score of a node state for a workload, and for a share the GPU (index into `gpus`)
/// that gets it: the first of the best.
fn fgd(
    model: Option<u8>,
    cpu: i64,
    gpus: &[i32],
    r: &Req,
    typical: &[Typical],
    before: f64,
) -> (i64, Option<usize>) {
    if r.share() {
        let mut best: Option<(i64, usize)> = None;
        let mut after = gpus.to_vec();
        for i in 0..gpus.len() {
            if gpus[i] < r.milli {
                continue;
            }
            after[i] -= r.milli;
            let s = sigmoid_score(before, frag(model, cpu - r.cpu, &after, typical));
            after[i] += r.milli;
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, i));
            }
        }
        best.map_or((0, None), |(s, i)| (s, Some(i)))
    } else {
        let after = sub_whole(gpus, r);
        let s = sigmoid_score(before, frag(model, cpu - r.cpu, &after, typical));
        (s, None)
    }
}

/// Interned node states and the FGD memo.
#[derive(Default)]
struct Memo {
    ids: HashMap<(Option<u8>, i64, Vec<i32>), u32>,
    /// Per state: its fragmentation, and its sorted GPUs for computing scores.
    states: Vec<(f64, Option<u8>, i64, Vec<i32>)>,
    scores: HashMap<(u32, u32), i64>,
}

impl Memo {
    fn intern(&mut self, n: &NodeSt, typical: &[Typical]) -> u32 {
        let mut g = n.gpus.clone();
        g.sort_unstable();
        let key = (n.model, n.cpu, g);
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = u32::try_from(self.states.len()).unwrap_or(u32::MAX);
        let f = frag(key.0, key.1, &key.2, typical);
        self.states.push((f, key.0, key.1, key.2.clone()));
        self.ids.insert(key, id);
        id
    }

    fn score(&mut self, state: u32, r: &Req, typical: &[Typical]) -> i64 {
        if let Some(&s) = self.scores.get(&(state, r.shape)) {
            return s;
        }
        let (before, model, cpu, gpus) = &self.states[state as usize];
        let s = fgd(*model, *cpu, gpus, r, typical, *before).0;
        self.scores.insert((state, r.shape), s);
        s
    }
}

/// The cluster's largest CPU and GPU capacity, the scale of the best-fit, dot-product and
/// clustering scores (the simulator's `MaxSpecCpu`, `MaxSpecGpu`).
#[derive(Clone, Copy)]
struct Scale {
    cpu: f64,
    gpu: i64,
}

fn best_fit(n: &NodeSt, r: &Req, sc: Scale) -> i64 {
    let mut s = 0.0;
    s += (n.cpu - r.cpu) as f64 / sc.cpu * 0.5;
    s += (n.total_left() - r.total()) as f64 / sc.gpu as f64 * 0.5;
    ((1.0 - s) * 100.0) as i64
}

fn dot_product(n: &NodeSt, r: &Req, sc: Scale) -> i64 {
    let g = sc.gpu as f64;
    let inner = (n.cpu as f64 / sc.cpu) * (r.cpu as f64 / sc.cpu)
        + (n.total_left() as f64 / g) * (r.total() as f64 / g);
    (100.0 * (1.0 - inner / 2.0)) as i64
}

fn gpu_packing(n: &NodeSt, r: &Req) -> i64 {
    if r.milli == 0 {
        return 0;
    }
    let free = n.free_gpus() as i64;
    if free == n.gpus.len() as i64 {
        return (33 - free).max(free);
    }
    let mut order: Vec<usize> = (0..n.gpus.len()).collect();
    order.sort_by_key(|&i| n.gpus[i]);
    let used: Vec<usize> = order
        .into_iter()
        .filter(|&i| n.gpus[i] >= r.milli)
        .take(r.num as usize)
        .collect();
    let whole = used.iter().filter(|&&i| n.gpus[i] == 1000).count() as i64;
    if whole > 0 {
        return (50 - whole).max(33);
    }
    let ratio: i64 = used
        .iter()
        .map(|&i| i64::from(n.gpus[i]) * 100 / 1000)
        .sum();
    (100 - ratio / 10).max(50)
}

fn kind_of(r: &Req) -> Option<u32> {
    match (r.milli, r.share()) {
        (0, _) => None,
        (_, true) => Some(0),
        _ => Some(r.num),
    }
}

fn gpu_clustering(n: &NodeSt, r: &Req, sc: Scale) -> i64 {
    let Some(kind) = kind_of(r) else {
        return 0;
    };
    let base = 25 * (sc.gpu - n.total_left()) / sc.gpu;
    let has = n.kinds.iter().any(|&(k, c)| k == kind && c > 0);
    base + match (has, n.kinds.len()) {
        (true, 1) => 75,
        (true, _) => 50,
        (false, 0) => 25,
        (false, _) => 0,
    }
}

/// The engine's view of the inputs.
struct World {
    nodes: Vec<NodeSt>,
    names: Vec<String>,
    typical: Vec<Typical>,
    scale: Scale,
    unchecked: Vec<&'static str>,
    /// Each node's place in a seeded random order: equal scores go to the node first in it,
    /// as in the authors' simulator (its scheduler breaks ties by node name, and prefixes
    /// every name with a seeded random rank).
    rank: Vec<u32>,
}

fn model_index(models: &mut Vec<String>, m: &str) -> Result<u8, PackError> {
    if let Some(i) = models.iter().position(|x| x == m) {
        return u8::try_from(i).map_err(|_| PackError::TooManyModels);
    }
    if models.len() >= 64 {
        return Err(PackError::TooManyModels);
    }
    models.push(m.to_owned());
    u8::try_from(models.len() - 1).map_err(|_| PackError::TooManyModels)
}

/// Requests for the pods, shapes interned in `shapes`.
fn requests(
    pods: &[Pod],
    models: &mut Vec<String>,
    shapes: &mut HashMap<(i64, i32, u32, String), u32>,
    unchecked: &[&'static str],
) -> Result<Vec<Req>, PackError> {
    pods.iter()
        .map(|p| {
            let mask = if p.gpu_spec.is_empty() {
                None
            } else {
                let mut m = 0u64;
                for s in &p.gpu_spec {
                    m |= 1 << model_index(models, s)?;
                }
                Some(m)
            };
            let cpu = if unchecked.contains(&"cpu") {
                0
            } else {
                p.cpu_milli
            };
            let key = (cpu, p.gpu_milli as i32, p.num_gpu, p.gpu_spec.join("|"));
            let next = u32::try_from(shapes.len()).unwrap_or(u32::MAX);
            let shape = *shapes.entry(key).or_insert(next);
            Ok(Req {
                cpu,
                mem: if unchecked.contains(&"memory") {
                    0
                } else {
                    p.memory_mib
                },
                num: p.num_gpu,
                milli: p.gpu_milli as i32,
                mask,
                shape,
            })
        })
        .collect()
}

/// The typical workloads: shapes by frequency (ties: the larger first), the most frequent
/// making up `pct` % of the list, frequencies renormalised over them.
fn typical(reqs: &[Req], shapes: &HashMap<(i64, i32, u32, String), u32>, pct: f64) -> Vec<Typical> {
    let mut count: HashMap<u32, f64> = HashMap::new();
    for r in reqs {
        *count.entry(r.shape).or_default() += 1.0;
    }
    let by_id: HashMap<u32, &(i64, i32, u32, String)> =
        shapes.iter().map(|(k, v)| (*v, k)).collect();
    let example: HashMap<u32, &Req> = reqs.iter().map(|r| (r.shape, r)).collect();
    let mut list: Vec<(u32, f64)> = count.into_iter().collect();
    list.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then_with(|| by_id[&b.0].cmp(by_id[&a.0]))
    });
    let total = reqs.len() as f64;
    let mut cum = 0.0;
    let mut take = 0;
    while cum < pct / 100.0 * total && take < list.len() {
        cum += list[take].1;
        take += 1;
    }
    list[..take]
        .iter()
        .map(|&(shape, c)| {
            let r = example[&shape];
            Typical {
                cpu: r.cpu,
                milli: r.milli,
                num: r.num,
                mask: r.mask,
                p: c / cum,
            }
        })
        .collect()
}

fn world(nodes: &[Node], models: &mut Vec<String>) -> Result<World, PackError> {
    let mut unchecked = Vec::new();
    if nodes.iter().any(|n| n.cpu_milli.is_none()) {
        unchecked.push("cpu");
    }
    if nodes.iter().any(|n| n.memory_mib.is_none()) {
        unchecked.push("memory");
    }
    let mut st = Vec::with_capacity(nodes.len());
    for n in nodes {
        st.push(NodeSt {
            cpu: if unchecked.contains(&"cpu") {
                0
            } else {
                n.cpu_milli.unwrap_or(0)
            },
            mem: if unchecked.contains(&"memory") {
                0
            } else {
                n.memory_mib.unwrap_or(0)
            },
            gpus: vec![1000; n.gpus as usize],
            model: if n.gpus == 0 {
                None
            } else {
                Some(model_index(models, &n.model)?)
            },
            kinds: Vec::new(),
            state: 0,
        });
    }
    let scale = Scale {
        cpu: st.iter().map(|n| n.cpu).max().unwrap_or(0).max(1) as f64,
        gpu: st
            .iter()
            .map(|n| n.gpus.len() as i64 * 1000)
            .max()
            .unwrap_or(0)
            .max(1000),
    };
    Ok(World {
        nodes: st,
        names: nodes.iter().map(|n| n.name.clone()).collect(),
        typical: Vec::new(),
        scale,
        unchecked,
        rank: (0..nodes.len() as u32).collect(),
    })
}

/// The arrival order: shuffled or not, then pruned or extended by random copies until the
/// GPU thousandths asked for reach `load` × capacity. As in the authors' simulator, copying
/// stops at the first pick whose per-GPU share would pass the target.
fn arrivals(
    reqs: &[Req],
    p: &Protocol,
    capacity_milli: i64,
    rng: &mut fastrand::Rng,
    by_name: &[usize],
) -> Vec<(usize, Option<u32>)> {
    let mut order: Vec<(usize, Option<u32>)> = by_name.iter().map(|&i| (i, None)).collect();
    if p.shuffle {
        rng.shuffle(&mut order);
    } else {
        order.sort_by_key(|&(i, _)| i);
    }
    let Some(load) = p.load else {
        return order;
    };
    let target = load * capacity_milli as f64;
    let mut total: i64 = reqs.iter().map(Req::total).sum();
    while total as f64 > target && !order.is_empty() {
        let (i, _) = order.remove(rng.usize(..order.len()));
        total -= reqs[i].total();
    }
    let mut copy = 0;
    while (total as f64) < target {
        let i = by_name[rng.usize(..by_name.len())];
        if (total + i64::from(reqs[i].milli)) as f64 > target {
            break;
        }
        total += reqs[i].total();
        order.push((i, Some(copy)));
        copy += 1;
    }
    order
}

/// The node a policy picks for a workload, among those with room (`None`: none has room).
fn choose(
    w: &World,
    memo: &mut Memo,
    policy: Policy,
    r: &Req,
    rng: &mut fastrand::Rng,
) -> Option<usize> {
    let mut best: Option<(i64, usize)> = None;
    let mut ties = 0usize;
    for (i, n) in w.nodes.iter().enumerate() {
        if !n.fits(r) {
            continue;
        }
        let s = match policy {
            Policy::FirstFit => return Some(i),
            Policy::Random => 0,
            Policy::BestFit => best_fit(n, r, w.scale),
            Policy::DotProduct => dot_product(n, r, w.scale),
            Policy::GpuPacking => gpu_packing(n, r),
            Policy::GpuClustering => gpu_clustering(n, r, w.scale),
            Policy::Fgd => memo.score(n.state, r, &w.typical),
        };
        let better = match best {
            None => true,
            Some((b, j)) => s > b || (s == b && w.rank[i] < w.rank[j]),
        };
        if policy == Policy::Random {
            ties += 1;
            if rng.usize(..ties) == 0 {
                best = Some((s, i));
            }
        } else if better {
            best = Some((s, i));
        }
    }
    best.map(|(_, i)| i)
}

/// The GPUs a workload takes on its node.
fn take_gpus(
    w: &World,
    memo: &Memo,
    policy: Policy,
    node: usize,
    r: &Req,
    rng: &mut fastrand::Rng,
) -> Vec<u32> {
    let n = &w.nodes[node];
    if r.milli == 0 {
        return Vec::new();
    }
    if !r.share() {
        return (0..n.gpus.len())
            .filter(|&i| n.gpus[i] == 1000)
            .take(r.num as usize)
            .map(|i| i as u32)
            .collect();
    }
    let fit = (0..n.gpus.len()).filter(|&i| n.gpus[i] >= r.milli);
    let pick = match policy {
        Policy::FirstFit => fit.into_iter().next(),
        Policy::Random => {
            let all: Vec<usize> = fit.collect();
            (!all.is_empty()).then(|| all[rng.usize(..all.len())])
        }
        Policy::Fgd => {
            let before = memo.states[n.state as usize].0;
            fgd(n.model, n.cpu, &n.gpus, r, &w.typical, before).1
        }
        _ => fit.min_by_key(|&i| n.gpus[i]),
    };
    pick.map(|i| vec![i as u32]).unwrap_or_default()
}

fn place(w: &mut World, memo: &mut Memo, node: usize, r: &Req, gpus: &[u32]) {
    let n = &mut w.nodes[node];
    n.cpu -= r.cpu;
    n.mem -= r.mem;
    for &g in gpus {
        n.gpus[g as usize] -= r.milli;
    }
    if let Some(kind) = kind_of(r) {
        match n.kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, c)) => *c += 1,
            None => n.kinds.push((kind, 1)),
        }
    }
    let state = memo.intern(&w.nodes[node], &w.typical);
    w.nodes[node].state = state;
}

/// Place `pods` on `nodes` by `policy` under `protocol`.
pub fn run(
    nodes: &[Node],
    pods: &[Pod],
    policy: Policy,
    protocol: &Protocol,
) -> Result<Packing, PackError> {
    if pods.is_empty() {
        return Err(PackError::NoPods);
    }
    let mut models = Vec::new();
    let mut w = world(nodes, &mut models)?;
    let mut shapes = HashMap::new();
    let reqs = requests(pods, &mut models, &mut shapes, &w.unchecked)?;
    w.typical = typical(&reqs, &shapes, protocol.popularity_pct);
    let capacity: i64 = w.nodes.iter().map(|n| n.gpus.len() as i64 * 1000).sum();
    if protocol.load.is_some() && capacity == 0 {
        return Err(PackError::NoGpus);
    }
    let mut memo = Memo::default();
    for i in 0..w.nodes.len() {
        w.nodes[i].state = memo.intern(&w.nodes[i], &w.typical);
    }
    let mut rng = fastrand::Rng::with_seed(protocol.seed);
    rng.shuffle(&mut w.rank);
    let mut by_name: Vec<usize> = (0..pods.len()).collect();
    by_name.sort_by(|&a, &b| pods[a].name.cmp(&pods[b].name));
    let order = arrivals(&reqs, protocol, capacity, &mut rng, &by_name);
    let mut out = Packing {
        schema: SCHEMA,
        policy,
        load: protocol.load,
        seed: protocol.seed,
        nodes: nodes.len(),
        cluster_gpus: (capacity / 1000) as u64,
        pods: order.len(),
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
        typical_shapes: w.typical.len(),
        unchecked: w.unchecked.clone(),
        placements: Vec::with_capacity(order.len()),
    };
    for (i, copy) in order {
        let r = &reqs[i];
        out.arrived_gpu_milli += r.total();
        let name = match copy {
            None => pods[i].name.clone(),
            Some(c) => format!("{}-copy-{c}", pods[i].name),
        };
        let Some(node) = choose(&w, &mut memo, policy, r, &mut rng) else {
            out.failed_pods += 1;
            *out.failed_by_kind.entry(pods[i].kind()).or_default() += 1;
            out.placements.push(Placement {
                pod: name,
                node: None,
                gpus: Vec::new(),
            });
            continue;
        };
        let gpus = take_gpus(&w, &memo, policy, node, r, &mut rng);
        place(&mut w, &mut memo, node, r, &gpus);
        out.placed_pods += 1;
        out.allocated_gpu_milli += r.total();
        out.placements.push(Placement {
            pod: name,
            node: Some(w.names[node].clone()),
            gpus,
        });
    }
    finish(&mut out, &w, &memo, capacity);
    Ok(out)
}

fn finish(out: &mut Packing, w: &World, memo: &Memo, capacity: i64) {
    let pct = |m: i64| {
        if capacity > 0 {
            100.0 * m as f64 / capacity as f64
        } else {
            0.0
        }
    };
    out.arrived_pct = pct(out.arrived_gpu_milli);
    out.allocation_ratio_pct = pct(out.allocated_gpu_milli);
    out.unallocated_gpus = (capacity - out.allocated_gpu_milli) as f64 / 1000.0;
    let frag: f64 = w
        .nodes
        .iter()
        .map(|n| memo.states[n.state as usize].0)
        .sum();
    let idle: i64 = w.nodes.iter().map(NodeSt::total_left).sum();
    out.fragmented_gpus = frag / 1000.0;
    out.fragmentation_pct = if idle > 0 {
        100.0 * frag / idle as f64
    } else {
        0.0
    };
}
