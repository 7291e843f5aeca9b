//! MIG-aware placement: workloads that ask for a MIG profile (`3g.40gb`) placed as GPU
//! instances on A100, H100 and H200 GPUs, at the positions the hardware allows.
//!
//! A MIG GPU has 7 compute slices and 8 memory slices. A GPU instance of a profile takes a run
//! of memory slices starting at one of a few legal positions, its compute slices, and counts
//! against the profile's maximum number of instances; instances may not overlap in memory and
//! their compute slices may not pass 7. Which GPU and which position: a GPU already cut first
//! (fill before opening a new one), then the position after which the most placements of the
//! model's profiles are still possible (keep the large holes whole), then the node first in
//! the seeded random order, the lowest GPU, the lowest position.
//!
//! A workload without a profile but with a share of a GPU gets the model's smallest profile
//! with at least that share of the compute slices; a whole-GPU workload takes untouched GPUs
//! whole; a CPU-only one takes only CPU and memory.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::{Node, Pod};
pub use crate::packing::MigSlot;
use crate::packing::{self, PackError, Packing, Policy, Protocol};

/// A MIG profile of one GPU model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigProfile {
    /// Its name (`3g.40gb`, `1g.10gb+me`).
    pub name: String,
    /// Compute slices of 7.
    pub compute: u8,
    /// Memory slices of 8.
    pub memory: u8,
    /// Instances of it one GPU holds at most.
    pub max_instances: u8,
}

/// Each GPU model's MIG profiles (models without MIG absent).
pub type MigCatalog = BTreeMap<String, Vec<MigProfile>>;

/// Legal first memory slices of a GPU instance by its compute and memory slices, as NVIDIA's
/// MIG User Guide lists the GPU-instance placements of the A100, H100 and H200
/// (`nvidia-smi mig -lgipp`; the same table is in NVIDIA's go-nvml mock devices): all 8 memory
/// slices from 0 for 7g; 4 from 0 for 4g; 4 from 0 or 4 for 3g; 2 from 0, 2 or 4 for 2g; 2 from
/// 0, 2, 4 or 6 for a 1g with two memory slices; 1 from 0 to 6 for 1g. Empty: unknown shape.
#[must_use]
pub fn starts(compute: u8, memory: u8) -> &'static [u8] {
    match (compute, memory) {
        (7, 8) | (4, 4) => &[0],
        (3, 4) => &[0, 4],
        (2, 2) => &[0, 2, 4],
        (1, 2) => &[0, 2, 4, 6],
        (1, 1) => &[0, 1, 2, 3, 4, 5, 6],
        _ => &[],
    }
}

/// One GPU's instances.
#[derive(Clone, Debug, Default)]
struct Gpu {
    /// Memory slices taken, one bit each.
    memory: u8,
    /// Compute slices taken.
    compute: u8,
    /// Instances per profile (index into the model's list).
    count: Vec<u8>,
}

fn span(start: u8, memory: u8) -> u8 {
    let bits = if memory >= 8 {
        0xFF
    } else {
        (1u16 << memory) as u8 - 1
    };
    bits << start
}

impl Gpu {
    fn fits(&self, p: &MigProfile, i: usize, start: u8) -> bool {
        self.memory & span(start, p.memory) == 0
            && self.compute + p.compute <= 7
            && self.count.get(i).copied().unwrap_or(0) < p.max_instances
    }
    /// Placements of any profile still possible.
    fn room(&self, profiles: &[MigProfile]) -> usize {
        profiles
            .iter()
            .enumerate()
            .map(|(i, p)| {
                starts(p.compute, p.memory)
                    .iter()
                    .filter(|&&s| self.fits(p, i, s))
                    .count()
            })
            .sum()
    }
    fn add(&mut self, i: usize, p: &MigProfile, start: u8) {
        self.memory |= span(start, p.memory);
        self.compute += p.compute;
        if self.count.len() <= i {
            self.count.resize(i + 1, 0);
        }
        self.count[i] += 1;
    }
}

struct MigNode {
    cpu: i64,
    mem: i64,
    gpus: Vec<Gpu>,
    profiles: Vec<MigProfile>,
}

/// What a workload needs on a node of a given model.
enum Want {
    Cpu,
    Whole(u32),
    Instance(usize),
}

fn want(pod: &Pod, profiles: &[MigProfile]) -> Option<Want> {
    if let Some(name) = &pod.mig_profile {
        return profiles
            .iter()
            .position(|p| &p.name == name)
            .map(Want::Instance);
    }
    match pod.num_gpu {
        0 => Some(Want::Cpu),
        _ if pod.is_share() => profiles
            .iter()
            .enumerate()
            .filter(|(_, p)| u32::from(p.compute) * 1000 >= pod.gpu_milli * 7)
            .min_by_key(|(_, p)| (p.compute, p.memory))
            .map(|(i, _)| Want::Instance(i)),
        n => Some(Want::Whole(n)),
    }
}

/// Sevenths of a GPU a workload asks for (its size under the load protocol).
fn sevenths(pod: &Pod, catalog: &MigCatalog) -> i64 {
    if let Some(name) = &pod.mig_profile {
        let c = catalog
            .values()
            .flatten()
            .find(|p| &p.name == name)
            .map_or(0, |p| p.compute);
        return i64::from(c);
    }
    (pod.total_milli() * 7 + 999) / 1000
}

/// The best spot on one node: (score, GPU, start).
fn spot(n: &MigNode, w: &Want) -> Option<(i64, usize, u8)> {
    let Want::Instance(i) = *w else {
        return None;
    };
    let p = &n.profiles[i];
    let mut best: Option<(i64, usize, u8)> = None;
    for (g, gpu) in n.gpus.iter().enumerate() {
        for &s in starts(p.compute, p.memory) {
            if !gpu.fits(p, i, s) {
                continue;
            }
            let mut after = gpu.clone();
            after.add(i, p, s);
            let score = i64::from(gpu.memory != 0) * 10_000 + after.room(&n.profiles) as i64;
            if best.is_none_or(|(b, _, _)| score > b) {
                best = Some((score, g, s));
            }
        }
    }
    best
}

/// Place `pods` on the MIG GPUs of `nodes` (the MIG policy); `catalog` gives each model's
/// profiles.
pub fn run(
    nodes: &[Node],
    pods: &[Pod],
    catalog: &MigCatalog,
    protocol: &Protocol,
) -> Result<Packing, PackError> {
    if pods.is_empty() {
        return Err(PackError::NoPods);
    }
    let mut st: Vec<MigNode> = nodes
        .iter()
        .map(|n| {
            let profiles = catalog.get(&n.model).cloned().unwrap_or_default();
            MigNode {
                cpu: n.cpu_milli.unwrap_or(i64::MAX),
                mem: n.memory_mib.unwrap_or(i64::MAX),
                gpus: vec![Gpu::default(); n.gpus as usize],
                profiles,
            }
        })
        .collect();
    let capacity: i64 = st.iter().map(|n| 7 * n.gpus.len() as i64).sum();
    if capacity == 0 {
        return Err(PackError::NoGpus);
    }
    let mut rng = fastrand::Rng::with_seed(protocol.seed);
    let mut rank: Vec<u32> = (0..nodes.len() as u32).collect();
    rng.shuffle(&mut rank);
    let mut by_name: Vec<usize> = (0..pods.len()).collect();
    by_name.sort_by(|&a, &b| pods[a].name.cmp(&pods[b].name));
    let sizes: Vec<(i64, i64)> = pods
        .iter()
        .map(|p| {
            let s = sevenths(p, catalog);
            (s, s.min(7))
        })
        .collect();
    let order = packing::arrivals(&sizes, protocol, capacity, &mut rng, &by_name)?;
    let mut out = packing::empty(Policy::Mig, protocol, nodes.len(), capacity * 1000 / 7);
    out.pods = order.len();
    let (mut arrived, mut placed) = (0i64, 0i64);
    for (i, copy) in order {
        let pod = &pods[i];
        arrived += sizes[i].0;
        let name = packing::copy_name(&pod.name, copy);
        match place_one(&mut st, &rank, pod) {
            Some((node, gpus, slot, used)) => {
                placed += used;
                out.placed(name, &nodes[node].name, gpus, slot);
            }
            None => out.failed(name, pod.kind()),
        }
    }
    finish(&mut out, &st, pods, arrived, placed, capacity);
    Ok(out)
}

type Spot = (usize, Vec<u32>, Option<MigSlot>, i64);

/// Place one workload: (node, GPUs, MIG slot, sevenths taken).
fn place_one(st: &mut [MigNode], rank: &[u32], pod: &Pod) -> Option<Spot> {
    let mut best: Option<(i64, u32, usize, usize, u8)> = None;
    for (k, n) in st.iter().enumerate() {
        if n.cpu < pod.cpu_milli || n.mem < pod.memory_mib {
            continue;
        }
        let Some(w) = want(pod, &n.profiles) else {
            continue;
        };
        let found = match w {
            Want::Cpu => Some((0, 0, 0)),
            Want::Whole(g) => {
                (n.gpus.iter().filter(|g| g.memory == 0).count() >= g as usize).then_some((0, 0, 0))
            }
            Want::Instance(_) => spot(n, &w),
        };
        let Some((score, g, s)) = found else {
            continue;
        };
        if best.is_none_or(|(b, r, ..)| score > b || (score == b && rank[k] < r)) {
            best = Some((score, rank[k], k, g, s));
        }
    }
    let (_, _, k, g, s) = best?;
    let n = &mut st[k];
    n.cpu -= pod.cpu_milli;
    n.mem -= pod.memory_mib;
    match want(pod, &n.profiles)? {
        Want::Cpu => Some((k, Vec::new(), None, 0)),
        Want::Whole(count) => {
            let take: Vec<usize> = (0..n.gpus.len())
                .filter(|&i| n.gpus[i].memory == 0)
                .take(count as usize)
                .collect();
            for &i in &take {
                n.gpus[i].memory = 0xFF;
                n.gpus[i].compute = 7;
            }
            let gpus = take.iter().map(|&i| i as u32).collect();
            Some((k, gpus, None, 7 * i64::from(count)))
        }
        Want::Instance(i) => {
            let p = n.profiles[i].clone();
            n.gpus[g].add(i, &p, s);
            let slot = MigSlot {
                profile: p.name.clone(),
                start: s,
            };
            Some((k, vec![g as u32], Some(slot), i64::from(p.compute)))
        }
    }
}

/// Totals; fragmentation: free compute slices on GPUs where no profile the list asks for fits
/// any more, over all compute slices (and over the free ones).
fn finish(
    out: &mut Packing,
    st: &[MigNode],
    pods: &[Pod],
    arrived: i64,
    placed: i64,
    capacity: i64,
) {
    let asked: BTreeSet<&str> = pods
        .iter()
        .filter_map(|p| p.mig_profile.as_deref())
        .collect();
    let (mut idle, mut stranded) = (0i64, 0i64);
    for n in st {
        let usable: Vec<(usize, &MigProfile)> = n
            .profiles
            .iter()
            .enumerate()
            .filter(|(_, p)| asked.is_empty() || asked.contains(p.name.as_str()))
            .collect();
        for g in &n.gpus {
            let free = i64::from(7 - g.compute);
            idle += free;
            let any = usable.iter().any(|(i, p)| {
                starts(p.compute, p.memory)
                    .iter()
                    .any(|&s| g.fits(p, *i, s))
            });
            if !any {
                stranded += free;
            }
        }
    }
    out.typical_shapes = asked.len();
    out.arrived_gpu_milli = arrived * 1000 / 7;
    out.allocated_gpu_milli = placed * 1000 / 7;
    out.arrived_pct = 100.0 * arrived as f64 / capacity as f64;
    out.allocation_ratio_pct = 100.0 * placed as f64 / capacity as f64;
    out.unallocated_gpus = (capacity - placed) as f64 / 7.0;
    out.fragmented_gpus = stranded as f64 / 7.0;
    out.fragmentation_pct = 100.0 * stranded as f64 / capacity as f64;
    out.fragmentation_of_idle_pct = if idle > 0 {
        100.0 * stranded as f64 / idle as f64
    } else {
        0.0
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a100_80() -> MigCatalog {
        let p = |name: &str, compute, memory, max_instances| MigProfile {
            name: name.into(),
            compute,
            memory,
            max_instances,
        };
        BTreeMap::from([(
            "A100-SXM4-80GB".to_owned(),
            vec![
                p("1g.10gb", 1, 1, 7),
                p("1g.20gb", 1, 2, 4),
                p("2g.20gb", 2, 2, 3),
                p("3g.40gb", 3, 4, 2),
                p("4g.40gb", 4, 4, 1),
                p("7g.80gb", 7, 8, 1),
            ],
        )])
    }

    fn node(gpus: u32) -> Node {
        Node {
            name: "n".into(),
            cpu_milli: None,
            memory_mib: None,
            gpus,
            model: "A100-SXM4-80GB".into(),
        }
    }

    fn pods(profiles: &[&str]) -> Vec<Pod> {
        profiles
            .iter()
            .enumerate()
            .map(|(i, p)| Pod {
                name: format!("p{i:02}"),
                cpu_milli: 0,
                memory_mib: 0,
                num_gpu: 1,
                gpu_milli: 1000,
                gpu_spec: Vec::new(),
                mig_profile: Some((*p).to_owned()),
            })
            .collect()
    }

    fn slots(p: &Packing) -> Vec<Option<(u32, String, u8)>> {
        p.placements
            .iter()
            .map(|x| {
                x.mig
                    .as_ref()
                    .map(|m| (x.gpus[0], m.profile.clone(), m.start))
            })
            .collect()
    }

    #[test]
    fn legal_positions_by_hand() {
        assert_eq!(starts(3, 4), [0, 4]);
        assert_eq!(starts(1, 1).len(), 7);
        assert!(starts(5, 5).is_empty());
        assert_eq!(span(4, 4), 0b1111_0000);
        assert_eq!(span(0, 8), 0xFF);
    }

    #[test]
    fn instances_fill_one_gpu_before_the_next_and_keep_holes_whole() {
        let run = |list: &[&str]| {
            super::run(&[node(2)], &pods(list), &a100_80(), &Protocol::default()).expect("placed")
        };
        // Two 3g fill a GPU at 0 and 4; the third opens the second GPU.
        let p = run(&["3g.40gb", "3g.40gb", "3g.40gb"]);
        let s = slots(&p);
        assert_eq!(s[0].as_ref().map(|x| x.0), Some(0));
        assert_eq!(s[1].as_ref().map(|x| x.0), Some(0));
        assert_ne!(s[0].as_ref().map(|x| x.2), s[1].as_ref().map(|x| x.2));
        assert_eq!(s[2].as_ref().map(|x| x.0), Some(1));
        // A 1g goes where it blocks least; a 4g (only at 0) and a 3g then still fit beside it.
        let p = run(&["1g.10gb", "4g.40gb", "3g.40gb"]);
        let s = slots(&p);
        assert_eq!(s[1], Some((0, "4g.40gb".into(), 0)));
        assert_eq!(p.failed_pods, 0);
        // Seven 1g on one GPU, the eighth on the next: at most 7 compute slices.
        let p = run(&["1g.10gb"; 8]);
        let s = slots(&p);
        assert!(s[..7].iter().all(|x| x.as_ref().map(|x| x.0) == Some(0)));
        assert_eq!(s[7].as_ref().map(|x| x.0), Some(1));
        // 4g.40gb at most once per GPU: the third fails on two GPUs.
        let p = run(&["4g.40gb"; 3]);
        assert_eq!(p.failed_pods, 1);
        assert!((p.allocation_ratio_pct - 100.0 * 8.0 / 14.0).abs() < 1e-9);
    }

    #[test]
    fn shares_map_to_the_smallest_profile_and_whole_gpus_need_untouched_ones() {
        let mut list = pods(&["3g.40gb"]);
        list.push(Pod {
            name: "share".into(),
            mig_profile: None,
            gpu_milli: 250,
            ..list[0].clone()
        });
        list.push(Pod {
            name: "whole".into(),
            mig_profile: None,
            num_gpu: 2,
            ..list[0].clone()
        });
        let p = run(&[node(2)], &list, &a100_80(), &Protocol::default()).expect("placed");
        // 250 thousandths of the compute: 2 of 7 slices (1 of 7 is 143).
        assert_eq!(
            p.placements[1].mig.as_ref().map(|m| m.profile.as_str()),
            Some("2g.20gb")
        );
        assert_eq!(p.placements[2].node, None, "no two untouched GPUs are left");
    }
}
