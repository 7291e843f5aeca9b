//! Placing workloads on nodes, one after another, by a policy (`gpuwise pack`).
//!
//! Each workload goes, in order, to one of the nodes with room for it (CPU, memory, GPU
//! model, and GPUs: a share of one GPU needs a GPU with that much left, a whole-GPU workload
//! needs that many untouched GPUs). Among the nodes with room the policy scores each one, as
//! the Kubernetes scheduler plugins of Weng et al.'s simulator do (integer scores, 0–100), and
//! the highest wins; equal scores go to the node first in a seeded random order of the nodes,
//! as in their simulator (its scheduler breaks ties by node name, and every node's name starts
//! with a seeded random rank). Nothing leaves: this is the arrivals-only protocol of the FGD
//! paper (ATC'23).
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
//! The protocol of the paper ([`Protocol`]): the list is shuffled (seeded), then pruned or
//! extended by random copies of its workloads until the GPUs asked for reach `load` × the
//! cluster's GPUs; the allocation ratio is the GPU capacity placed over the cluster's.

use std::collections::{BTreeMap, HashMap};

use crate::cluster::{Node, Pod};
pub use crate::packing::{
    CurvePoint, MAX_ARRIVALS, PackError, Packing, Placement, Policy, Protocol, SCHEMA,
};
use crate::packing::{arrivals, copy_name, empty};

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
            Policy::Mig => return None,
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

/// Sums per whole arrived percent, for [`CurvePoint`]s.
#[derive(Default)]
struct Curve {
    bins: BTreeMap<i64, (f64, f64, u32)>,
}

impl Curve {
    fn add(&mut self, arrived: i64, allocated: i64, frag: f64, capacity: i64) {
        if capacity <= 0 {
            return;
        }
        let cap = capacity as f64;
        let bin = (100.0 * arrived as f64 / cap).round() as i64;
        let e = self.bins.entry(bin).or_default();
        e.0 += 100.0 * allocated as f64 / cap;
        e.1 += 100.0 * frag / cap;
        e.2 += 1;
    }

    fn points(&self) -> Vec<CurvePoint> {
        let Some(&last) = self.bins.keys().next_back() else {
            return Vec::new();
        };
        (0..=last.max(0))
            .filter_map(|x| {
                let near: Vec<&(f64, f64, u32)> = match self.bins.get(&x) {
                    Some(b) => vec![b],
                    None => (x - 1..=x + 1).filter_map(|y| self.bins.get(&y)).collect(),
                };
                let n: u32 = near.iter().map(|b| b.2).sum();
                (n > 0).then(|| CurvePoint {
                    arrived_pct: u32::try_from(x).unwrap_or(0),
                    allocation_ratio_pct: near.iter().map(|b| b.0).sum::<f64>() / f64::from(n),
                    fragmentation_pct: near.iter().map(|b| b.1).sum::<f64>() / f64::from(n),
                })
            })
            .collect()
    }
}

/// Place `pods` on `nodes` by `policy` (any but [`Policy::Mig`], which is [`crate::mig::run`];
/// [`crate::run`] picks) under `protocol`.
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
    let sizes: Vec<(i64, i64)> = reqs
        .iter()
        .map(|r| (r.total(), i64::from(r.milli)))
        .collect();
    let order = arrivals(&sizes, protocol, capacity, &mut rng, &by_name)?;
    let mut out = empty(policy, protocol, nodes.len(), capacity);
    out.pods = order.len();
    out.typical_shapes = w.typical.len();
    out.unchecked.clone_from(&w.unchecked);
    let mut curve = Curve::default();
    let mut frag: f64 = w
        .nodes
        .iter()
        .map(|n| memo.states[n.state as usize].0)
        .sum();
    for (i, copy) in order {
        let r = &reqs[i];
        out.arrived_gpu_milli += r.total();
        let name = copy_name(&pods[i].name, copy);
        let Some(node) = choose(&w, &mut memo, policy, r, &mut rng) else {
            curve.add(
                out.arrived_gpu_milli,
                out.allocated_gpu_milli,
                frag,
                capacity,
            );
            out.failed(name, pods[i].kind());
            continue;
        };
        let gpus = take_gpus(&w, &memo, policy, node, r, &mut rng);
        frag -= memo.states[w.nodes[node].state as usize].0;
        place(&mut w, &mut memo, node, r, &gpus);
        frag += memo.states[w.nodes[node].state as usize].0;
        out.allocated_gpu_milli += r.total();
        curve.add(
            out.arrived_gpu_milli,
            out.allocated_gpu_milli,
            frag,
            capacity,
        );
        out.placed(name, &w.names[node], gpus, None);
    }
    finish(&mut out, &w, &memo, capacity);
    out.curve = curve.points();
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
    let pct_f = |m: f64| {
        if capacity > 0 {
            100.0 * m / capacity as f64
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
    out.fragmentation_pct = pct_f(frag);
    out.fragmentation_of_idle_pct = if idle > 0 {
        100.0 * frag / idle as f64
    } else {
        0.0
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, cpu: i64, gpus: u32, model: &str) -> Node {
        Node {
            name: name.into(),
            cpu_milli: Some(cpu),
            memory_mib: Some(1 << 20),
            gpus,
            model: model.into(),
        }
    }

    fn pod(name: &str, cpu: i64, num_gpu: u32, gpu_milli: u32) -> Pod {
        Pod {
            name: name.into(),
            cpu_milli: cpu,
            memory_mib: 1024,
            num_gpu,
            gpu_milli,
            gpu_spec: Vec::new(),
            mig_profile: None,
        }
    }

    fn pack(nodes: &[Node], pods: &[Pod], policy: Policy, seed: u64) -> Packing {
        let p = Protocol {
            seed,
            ..Protocol::default()
        };
        run(nodes, pods, policy, &p).expect("packed")
    }

    fn at(p: &Packing) -> Vec<(Option<&str>, Vec<u32>)> {
        p.placements
            .iter()
            .map(|x| (x.node.as_deref(), x.gpus.clone()))
            .collect()
    }

    #[test]
    fn best_fit_scores_by_hand() {
        // Scale: 32 cores, 8 GPUs. A 4-core 1-GPU pod leaves 28 cores and 3 GPUs on `small`
        // (score ⌊100 × (1 − (0.5 × 28/32 + 0.5 × 3/8))⌋ = 37) and 7 GPUs on `big` (12).
        let nodes = [node("big", 32_000, 8, "T4"), node("small", 32_000, 4, "T4")];
        let sc = Scale {
            cpu: 32_000.0,
            gpu: 8000,
        };
        let r = Req {
            cpu: 4000,
            mem: 0,
            num: 1,
            milli: 1000,
            mask: None,
            shape: 0,
        };
        let st = |g: usize| NodeSt {
            cpu: 32_000,
            mem: 0,
            gpus: vec![1000; g],
            model: Some(0),
            kinds: Vec::new(),
            state: 0,
        };
        assert_eq!(best_fit(&st(4), &r, sc), 37);
        assert_eq!(best_fit(&st(8), &r, sc), 12);
        let p = pack(&nodes, &[pod("a", 4000, 1, 1000)], Policy::BestFit, 1);
        assert_eq!(at(&p)[0].0, Some("small"));
    }

    #[test]
    fn shares_go_to_the_tightest_gpu_that_fits() {
        let pods = [
            pod("p1", 100, 1, 600),
            pod("p2", 100, 1, 300),
            pod("p3", 100, 1, 500),
        ];
        let p = pack(&[node("n", 8000, 2, "T4")], &pods, Policy::BestFit, 1);
        assert_eq!(
            at(&p),
            [
                (Some("n"), vec![0]),
                (Some("n"), vec![0]),
                (Some("n"), vec![1])
            ]
        );
        assert_eq!(p.allocated_gpu_milli, 1400);
        assert!((p.allocation_ratio_pct - 70.0).abs() < 1e-9);
    }

    #[test]
    fn fgd_scores_by_hand() {
        // The list: three 2-GPU pods and one 1-GPU pod, so the typical workload is a 2-GPU pod
        // (p = 3/4) or a 1-GPU one (1/4). Putting the 1-GPU pod on the 1-GPU node removes its
        // fragment (750 thousandths: the 2-GPU pods can never use it): ⌊100 σ(0.75)⌋ = 67; on
        // the 2-GPU node it creates one: ⌊100 σ(−0.75)⌋ = 32.
        let pods = [
            pod("a", 0, 1, 1000),
            pod("b", 0, 2, 1000),
            pod("c", 0, 2, 1000),
            pod("d", 0, 2, 1000),
        ];
        let nodes = [node("two", 8000, 2, "T4"), node("one", 8000, 1, "T4")];
        let mut models = Vec::new();
        let mut shapes = HashMap::new();
        let reqs = requests(&pods, &mut models, &mut shapes, &[]).expect("requests");
        let typical = typical(&reqs, &shapes, 95.0);
        assert_eq!(typical.len(), 2);
        assert!((typical[0].p - 0.75).abs() < 1e-12 && typical[0].num == 2);
        assert!((frag(Some(0), 8000, &[1000], &typical) - 750.0).abs() < 1e-9);
        assert_eq!(frag(Some(0), 8000, &[1000, 1000], &typical), 0.0);
        assert_eq!(fgd(Some(0), 8000, &[1000], &reqs[0], &typical, 750.0).0, 67);
        assert_eq!(
            fgd(Some(0), 8000, &[1000, 1000], &reqs[0], &typical, 0.0).0,
            32
        );
        let p = pack(&nodes, &pods, Policy::Fgd, 3);
        assert_eq!(at(&p)[0], (Some("one"), vec![0]));
        assert_eq!(at(&p)[1], (Some("two"), vec![0, 1]));
        assert_eq!(p.failed_pods, 2);
        assert_eq!(p.failed_by_kind["2-gpu"], 2);
        assert!((p.allocation_ratio_pct - 100.0).abs() < 1e-9);
        assert_eq!(p.fragmentation_pct, 0.0);
        assert_eq!(p.fragmentation_of_idle_pct, 0.0, "nothing idle");
    }

    #[test]
    fn packing_and_clustering_by_hand() {
        let nodes = [node("x", 64_000, 2, "T4"), node("y", 64_000, 2, "T4")];
        // GPU packing: the second share joins the first one's GPU (score 100 − 70/10 = 93
        // against 31 for the untouched node).
        let p = pack(
            &nodes,
            &[pod("s1", 100, 1, 300), pod("s2", 100, 1, 300)],
            Policy::GpuPacking,
            5,
        );
        assert_eq!(at(&p)[0], at(&p)[1]);
        // GPU clustering: a whole-GPU pod avoids the node running a share (0 + 25 × 7/8 …)
        // for the untouched one (25 + …).
        let p = pack(
            &nodes,
            &[pod("s1", 100, 1, 300), pod("w", 100, 1, 1000)],
            Policy::GpuClustering,
            5,
        );
        assert_ne!(at(&p)[0].0, at(&p)[1].0);
    }

    #[test]
    fn first_fit_keeps_list_order_and_ties_follow_a_seeded_node_order() {
        let nodes: Vec<Node> = (0..6)
            .map(|i| node(&format!("n{i}"), 8000, 1, "T4"))
            .collect();
        let p = pack(&nodes, &[pod("a", 100, 1, 1000)], Policy::FirstFit, 9);
        assert_eq!(at(&p)[0].0, Some("n0"));
        // Six equal nodes: best-fit's choice follows the seeded order, so seeds differ.
        let chosen: std::collections::BTreeSet<String> = (0..20)
            .map(|s| {
                pack(&nodes, &[pod("a", 100, 1, 1000)], Policy::BestFit, s).placements[0]
                    .node
                    .clone()
                    .unwrap_or_default()
            })
            .collect();
        assert!(chosen.len() > 2, "{chosen:?}");
    }

    #[test]
    fn the_load_protocol_extends_and_prunes_to_the_target() {
        let nodes: Vec<Node> = (0..4)
            .map(|i| node(&format!("n{i}"), 64_000, 4, "T4"))
            .collect();
        let pods: Vec<Pod> = (0..10)
            .map(|i| pod(&format!("p{i}"), 1000, 1, 100 * (i % 9 + 1)))
            .collect();
        for (load, seed) in [(1.3, 1), (0.1, 2), (2.0, 3)] {
            let p = run(
                &nodes,
                &pods,
                Policy::Fgd,
                &Protocol {
                    load: Some(load),
                    seed,
                    shuffle: true,
                    ..Protocol::default()
                },
            )
            .expect("packed");
            let target = load * 16_000.0;
            let arrived = p.arrived_gpu_milli as f64;
            assert!(arrived <= target, "{load}: {arrived} > {target}");
            assert!(target - arrived < 1000.0, "{load}: {arrived} ≪ {target}");
            assert_eq!(p.pods, p.placements.len());
            assert!(p.placements.iter().any(|x| x.pod.contains("-copy-")) == (load > 0.5));
        }
    }

    /// Random clusters and lists, every policy: replaying the placements, no node passes its
    /// CPU or memory, no GPU passes 1000 thousandths, models are respected, every workload has
    /// the GPUs it asked for, and a workload failed only when no node had room at that moment.
    #[test]
    fn placements_replay_within_capacity_for_every_policy() {
        let mut rng = fastrand::Rng::with_seed(11);
        let models = ["T4", "V100", "A10"];
        for round in 0..12 {
            let nodes: Vec<Node> = (0..rng.usize(1..12))
                .map(|i| {
                    let g = [0, 1, 2, 4, 8][rng.usize(..5)];
                    node(
                        &format!("n{i}"),
                        rng.i64(4..64) * 1000,
                        g,
                        if g == 0 { "" } else { models[rng.usize(..3)] },
                    )
                })
                .collect();
            let pods: Vec<Pod> = (0..rng.usize(1..80))
                .map(|i| {
                    let mut p = match rng.usize(..4) {
                        0 => pod("", rng.i64(1..8) * 1000, 0, 0),
                        1 => pod("", rng.i64(1..8) * 1000, 1, rng.u32(1..1000)),
                        2 => pod("", rng.i64(1..8) * 1000, 1, 1000),
                        _ => pod("", rng.i64(1..8) * 1000, [2, 4, 8][rng.usize(..3)], 1000),
                    };
                    p.name = format!("p{i:03}");
                    p.memory_mib = rng.i64(1..400_000);
                    if p.num_gpu > 0 && rng.bool() {
                        p.gpu_spec = vec![models[rng.usize(..3)].to_owned()];
                    }
                    p
                })
                .collect();
            for policy in Policy::ALL.into_iter().filter(|p| *p != Policy::Mig) {
                let out = pack(&nodes, &pods, policy, round);
                replay(&nodes, &pods, &out, policy);
            }
        }
    }

    fn replay(nodes: &[Node], pods: &[Pod], out: &Packing, policy: Policy) {
        let mut cpu: Vec<i64> = nodes.iter().map(|n| n.cpu_milli.unwrap_or(0)).collect();
        let mut mem: Vec<i64> = nodes.iter().map(|n| n.memory_mib.unwrap_or(0)).collect();
        let mut gpus: Vec<Vec<i64>> = nodes.iter().map(|n| vec![1000; n.gpus as usize]).collect();
        assert_eq!(out.placements.len(), pods.len());
        let mut allocated = 0;
        for (x, p) in out.placements.iter().zip(pods) {
            assert_eq!(x.pod, p.name, "{policy:?}: list order kept");
            let fits = |k: usize, gpus: &[Vec<i64>]| {
                let n = &nodes[k];
                cpu[k] >= p.cpu_milli
                    && mem[k] >= p.memory_mib
                    && (p.num_gpu == 0
                        || ((p.gpu_spec.is_empty() || p.gpu_spec.contains(&n.model))
                            && gpus[k]
                                .iter()
                                .filter(|&&g| g >= i64::from(p.gpu_milli))
                                .count()
                                >= p.num_gpu as usize))
            };
            let Some(name) = &x.node else {
                assert!(
                    (0..nodes.len()).all(|k| !fits(k, &gpus)),
                    "{policy:?}: {} had room",
                    p.name
                );
                continue;
            };
            let k = nodes
                .iter()
                .position(|n| &n.name == name)
                .expect("a known node");
            assert!(fits(k, &gpus), "{policy:?}: {} placed without room", p.name);
            let want = if p.num_gpu == 0 {
                0
            } else {
                p.num_gpu as usize
            };
            assert_eq!(x.gpus.len(), want, "{policy:?}: {}", p.name);
            let distinct: std::collections::BTreeSet<u32> = x.gpus.iter().copied().collect();
            assert_eq!(distinct.len(), x.gpus.len());
            cpu[k] -= p.cpu_milli;
            mem[k] -= p.memory_mib;
            for &g in &x.gpus {
                gpus[k][g as usize] -= i64::from(p.gpu_milli);
                assert!(gpus[k][g as usize] >= 0, "{policy:?}: GPU over 1000");
            }
            allocated += p.total_milli();
        }
        assert_eq!(out.allocated_gpu_milli, allocated);
        assert_eq!(out.placed_pods + out.failed_pods, pods.len());
    }
}
