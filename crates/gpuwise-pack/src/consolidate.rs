//! Consolidation: the GPUs of a fleet, each one's observed peak memory and p95 utilization
//! taken as one workload, packed onto as few GPUs of the same model as hold them, against a
//! lower bound.
//!
//! A workload is a vector (memory share, compute share) of one GPU; a GPU holds workloads
//! while each sum stays within the capacity (1 − headroom). Packing is first-fit decreasing
//! by the larger share, a heuristic; the lower bound is Martello and Toth's L2 bound in each
//! dimension, which contains the continuous bound (the LP relaxation of bin packing: the
//! summed shares, rounded up) and the large-item bound (workloads above half a GPU cannot
//! share one) and adds what the mid-sized workloads need beside the large ones. The gap
//! between packing and bound is how far from optimal the packing can be at most. Solving the
//! packing exactly (a mixed-integer program) is not attempted: a pure-Rust MIP solver does not
//! finish twenty items in minutes, and fleets have hundreds.

use std::collections::BTreeMap;

/// The JSON schema name of a consolidation.
pub const SCHEMA: &str = "gpuwise.consolidate/v1";

/// One GPU as a workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    /// The device.
    pub id: String,
    /// Its GPU model; workloads move only to GPUs of their model.
    pub model: String,
    /// Peak memory used over total, 0–1.
    pub memory: f64,
    /// p95 utilization, 0–1.
    pub compute: f64,
    /// What its hour costs, if priced.
    pub usd_per_gpu_hour: Option<f64>,
}

/// One model's outcome.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct ModelPacking {
    /// The model.
    pub model: String,
    /// GPUs held today.
    pub devices: usize,
    /// GPUs the packing needs.
    pub gpus_needed: usize,
    /// No packing needs fewer.
    pub lower_bound: usize,
    /// `gpus_needed − lower_bound`.
    pub gap: usize,
    /// `devices − gpus_needed`.
    pub freed: usize,
    /// The lowest price among its priced devices (so the saving is not overstated).
    pub usd_per_gpu_hour: Option<f64>,
    /// `freed × usd_per_gpu_hour × 730` (hours in a month).
    pub freed_usd_per_month: Option<f64>,
}

/// Where one device's workload goes.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Move {
    /// The device.
    pub device: String,
    /// Its model.
    pub model: String,
    /// The GPU (0, 1, … within the model) it shares.
    pub gpu: usize,
    /// Its memory share.
    pub memory: f64,
    /// Its compute share.
    pub compute: f64,
}

/// A consolidation.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Consolidation {
    /// [`SCHEMA`].
    pub schema: &'static str,
    /// Capacity kept free on every GPU (0.1: pack to 90 %).
    pub headroom: f64,
    /// Per model.
    pub models: Vec<ModelPacking>,
    /// GPUs held, all models.
    pub devices: usize,
    /// GPUs needed, all models.
    pub gpus_needed: usize,
    /// The bound, all models.
    pub lower_bound: usize,
    /// Freed, all models.
    pub freed: usize,
    /// Freed dollars a month, over the priced models (`None` when none is priced).
    pub freed_usd_per_month: Option<f64>,
    /// Every device's new GPU.
    pub moves: Vec<Move>,
}

/// A tolerance so that 0.1 + 0.2 + 0.7 is one GPU, not two.
const EPS: f64 = 1e-9;

/// Martello and Toth's L2 bound for one dimension (it includes the continuous bound, the
/// summed sizes rounded up, and the count of items above half a bin): for each threshold α up
/// to half a bin, the items above `cap − α` need a bin each, so do those above half a bin, and
/// the items from α to half a bin fill what the latter leave before asking for more bins.
fn martello_toth(sizes: &[f64], cap: f64) -> usize {
    let ceil = |x: f64| (x / cap - EPS).ceil().max(0.0) as usize;
    let mut best = ceil(sizes.iter().sum());
    let mut alphas: Vec<f64> = sizes.iter().copied().filter(|&s| s <= cap / 2.0).collect();
    alphas.push(0.0);
    for alpha in alphas {
        let j1 = sizes.iter().filter(|&&s| s > cap - alpha + EPS).count();
        let j2: Vec<f64> = sizes
            .iter()
            .copied()
            .filter(|&s| s > cap / 2.0 + EPS && s <= cap - alpha + EPS)
            .collect();
        let j3: f64 = sizes
            .iter()
            .copied()
            .filter(|&s| s >= alpha - EPS && s <= cap / 2.0 + EPS)
            .sum();
        let room = j2.len() as f64 * cap - j2.iter().sum::<f64>();
        best = best.max(j1 + j2.len() + ceil((j3 - room).max(0.0)));
    }
    best
}

/// The lower bound on GPUs for items of (memory, compute) shares at `cap` per GPU: the larger
/// of Martello and Toth's L2 bound over each dimension (a GPU must hold both).
#[must_use]
pub fn lower_bound(items: &[(f64, f64)], cap: f64) -> usize {
    if items.is_empty() {
        return 0;
    }
    let mem: Vec<f64> = items.iter().map(|i| i.0).collect();
    let cpu: Vec<f64> = items.iter().map(|i| i.1).collect();
    martello_toth(&mem, cap)
        .max(martello_toth(&cpu, cap))
        .max(1)
}

/// First-fit decreasing: each item's GPU index.
#[must_use]
pub fn first_fit_decreasing(items: &[(f64, f64)], cap: f64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&a, &b| {
        let size = |i: usize| items[i].0.max(items[i].1);
        size(b).total_cmp(&size(a)).then(a.cmp(&b))
    });
    let mut bins: Vec<(f64, f64)> = Vec::new();
    let mut at = vec![0; items.len()];
    let fits = |used: f64, add: f64| used + add <= cap + 1e-9;
    for i in order {
        let (m, c) = items[i];
        let bin = bins
            .iter()
            .position(|&(bm, bc)| fits(bm, m) && fits(bc, c))
            .unwrap_or_else(|| {
                bins.push((0.0, 0.0));
                bins.len() - 1
            });
        bins[bin].0 += m;
        bins[bin].1 += c;
        at[i] = bin;
    }
    at
}

/// Consolidate `items` per model, keeping `headroom` free on every GPU.
#[must_use]
pub fn run(items: &[Item], headroom: f64) -> Consolidation {
    let cap = (1.0 - headroom).clamp(0.05, 1.0);
    let mut by_model: BTreeMap<&str, Vec<&Item>> = BTreeMap::new();
    for i in items {
        by_model.entry(i.model.as_str()).or_default().push(i);
    }
    let mut out = Consolidation {
        schema: SCHEMA,
        headroom,
        models: Vec::new(),
        devices: items.len(),
        gpus_needed: 0,
        lower_bound: 0,
        freed: 0,
        freed_usd_per_month: None,
        moves: Vec::new(),
    };
    for (model, list) in by_model {
        // A share above the capacity still needs a GPU of its own.
        let shares: Vec<(f64, f64)> = list
            .iter()
            .map(|i| (i.memory.min(cap), i.compute.min(cap)))
            .collect();
        let at = first_fit_decreasing(&shares, cap);
        let needed = at.iter().max().map_or(0, |m| m + 1);
        let bound = lower_bound(&shares, cap);
        let price = list
            .iter()
            .filter_map(|i| i.usd_per_gpu_hour)
            .min_by(f64::total_cmp);
        let freed = list.len() - needed;
        let usd = price.map(|p| freed as f64 * p * 730.0);
        for (i, gpu) in list.iter().zip(&at) {
            out.moves.push(Move {
                device: i.id.clone(),
                model: model.to_owned(),
                gpu: *gpu,
                memory: i.memory,
                compute: i.compute,
            });
        }
        out.gpus_needed += needed;
        out.lower_bound += bound;
        out.freed += freed;
        if let Some(u) = usd {
            *out.freed_usd_per_month.get_or_insert(0.0) += u;
        }
        out.models.push(ModelPacking {
            model: model.to_owned(),
            devices: list.len(),
            gpus_needed: needed,
            lower_bound: bound,
            gap: needed.saturating_sub(bound),
            freed,
            usd_per_gpu_hour: price,
            freed_usd_per_month: usd,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, memory: f64, compute: f64) -> Item {
        Item {
            id: id.into(),
            model: "H100".into(),
            memory,
            compute,
            usd_per_gpu_hour: Some(2.0),
        }
    }

    #[test]
    fn bounds_by_hand() {
        assert_eq!(lower_bound(&[(0.1, 0.2), (0.2, 0.3), (0.7, 0.5)], 1.0), 1);
        assert_eq!(lower_bound(&[(0.6, 0.1), (0.6, 0.1), (0.6, 0.1)], 1.0), 3);
        assert_eq!(lower_bound(&[(0.4, 0.4); 5], 1.0), 2);
        assert_eq!(lower_bound(&[(0.4, 0.4); 5], 0.8), 3);
        assert_eq!(lower_bound(&[], 1.0), 0);
    }

    #[test]
    fn four_quarter_gpus_become_one_and_the_saving_is_traced() {
        let items: Vec<Item> = (0..4)
            .map(|i| item(&format!("g{i}"), 0.2, 0.25))
            .chain([item("big", 0.9, 0.1)])
            .collect();
        let c = run(&items, 0.0);
        assert_eq!(c.gpus_needed, 2);
        assert_eq!(c.lower_bound, 2);
        assert_eq!(c.freed, 3);
        assert_eq!(c.freed_usd_per_month, Some(3.0 * 2.0 * 730.0));
        let big = c.moves.iter().find(|m| m.device == "big").map(|m| m.gpu);
        assert!(
            c.moves
                .iter()
                .all(|m| m.device == "big" || Some(m.gpu) != big)
        );
        // With 20 % headroom the four quarters no longer fit one GPU (4 × 0.25 > 0.8).
        let c = run(&items, 0.2);
        assert_eq!(c.gpus_needed, 3);
    }

    /// The fewest GPUs that hold the items, by trying every assignment (small lists only).
    fn optimum(items: &[(f64, f64)], cap: f64) -> usize {
        fn go(
            i: usize,
            items: &[(f64, f64)],
            bins: &mut Vec<(f64, f64)>,
            cap: f64,
            best: &mut usize,
        ) {
            if bins.len() >= *best {
                return;
            }
            if i == items.len() {
                *best = bins.len();
                return;
            }
            for b in 0..bins.len() {
                let (m, c) = bins[b];
                if m + items[i].0 <= cap + EPS && c + items[i].1 <= cap + EPS {
                    bins[b] = (m + items[i].0, c + items[i].1);
                    go(i + 1, items, bins, cap, best);
                    bins[b] = (m, c);
                }
            }
            bins.push(items[i]);
            go(i + 1, items, bins, cap, best);
            bins.pop();
        }
        let mut best = items.len() + 1;
        go(0, items, &mut Vec::new(), cap, &mut best);
        best
    }

    #[test]
    fn the_bound_never_passes_the_optimum_and_often_meets_it() {
        let mut rng = fastrand::Rng::with_seed(3);
        let (mut met, mut beat_continuous) = (0, 0);
        for _ in 0..300 {
            let n = rng.usize(1..9);
            let items: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    (
                        f64::from(rng.u32(1..20)) / 20.0,
                        f64::from(rng.u32(0..20)) / 20.0,
                    )
                })
                .collect();
            let cap = [1.0, 0.9][rng.usize(..2)];
            let shares: Vec<(f64, f64)> =
                items.iter().map(|i| (i.0.min(cap), i.1.min(cap))).collect();
            let (lb, opt) = (lower_bound(&shares, cap), optimum(&shares, cap));
            let ffd = first_fit_decreasing(&shares, cap)
                .iter()
                .max()
                .map_or(0, |m| m + 1);
            assert!(lb <= opt && opt <= ffd, "{shares:?}: {lb} ≤ {opt} ≤ {ffd}");
            met += usize::from(lb == opt);
            let continuous = shares
                .iter()
                .map(|s| s.0)
                .sum::<f64>()
                .max(shares.iter().map(|s| s.1).sum::<f64>());
            beat_continuous += usize::from(lb > (continuous / cap - EPS).ceil() as usize);
        }
        assert!(met > 200, "the bound met the optimum {met} times of 300");
        assert!(
            beat_continuous > 20,
            "L2 beat the summed shares {beat_continuous} times"
        );
    }

    #[test]
    fn every_gpu_stays_within_capacity() {
        let items: Vec<(f64, f64)> = (0..200)
            .map(|i| (f64::from(i % 7) / 10.0, f64::from((i * 3) % 11) / 12.0))
            .collect();
        let at = first_fit_decreasing(&items, 0.9);
        let mut sums: BTreeMap<usize, (f64, f64)> = BTreeMap::new();
        for (i, b) in at.iter().enumerate() {
            let s = sums.entry(*b).or_default();
            s.0 += items[i].0;
            s.1 += items[i].1;
        }
        assert!(
            sums.values()
                .all(|s| s.0 <= 0.9 + 1e-9 && s.1 <= 0.9 + 1e-9)
        );
        assert!(sums.len() >= lower_bound(&items, 0.9));
    }
}
