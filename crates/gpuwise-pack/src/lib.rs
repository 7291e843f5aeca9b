//! # gpuwise-pack: fit work onto GPUs and run job queues at the lowest cost
//!
//! Pure (no files, clock or command line).
//!
//! - [`cluster`]: node lists and workload lists (the Alibaba 2023 GPU-sharing traces, or a
//!   generic CSV).
//! - [`place`]: workloads placed on nodes one after another by a policy (first-fit, best-fit,
//!   dot-product, GPU packing, GPU clustering, random, FGD), under the FGD paper's protocol;
//!   allocation ratio, fragmentation, every placement (`gpuwise.pack/v1`).
//! - [`consolidate`]: a fleet's GPUs, each one's peak memory and p95 utilization a workload,
//!   packed onto fewer GPUs of their model, against a lower bound (`gpuwise.consolidate/v1`).
//! - [`packing`]: what every placement policy shares (names, protocol, outcome, arrivals);
//!   [`run`] picks [`place`] or [`mig`] by the policy.
//! - [`mig`]: MIG instances placed at the legal positions of A100, H100 and H200 GPUs.
//! - [`jobs`]: job lists (the Microsoft ITP traces, a generic CSV with priorities,
//!   interruptibility and allowed pools) and pools (`NAME=CAPACITY@PRICE`).
//! - [`schedule`]: a job queue run over pools by a policy (FIFO, EDF, priority with preemption
//!   of interruptible jobs, EASY backfilling, cost-aware), event by event; deadlines, job
//!   completion times, GPU-hours and dollars per pool, and a lower bound on the cost
//!   (`gpuwise.schedule/v1`).

pub mod cluster;
pub mod consolidate;
pub mod jobs;
pub mod mig;
pub mod packing;
pub mod place;
pub mod schedule;
pub mod view;

use cluster::{Node, Pod};
use packing::{PackError, Packing, Policy, Protocol};

/// Place `pods` on `nodes` by `policy` under `protocol`: [`mig::run`] for the MIG policy (with
/// the MIG profiles of each GPU model in `mig`), [`place::run`] for every other.
///
/// # Errors
/// [`PackError`] naming what the lists or the protocol lack.
pub fn run(
    nodes: &[Node],
    pods: &[Pod],
    policy: Policy,
    protocol: &Protocol,
    mig: &mig::MigCatalog,
) -> Result<Packing, PackError> {
    if policy == Policy::Mig {
        if pods.is_empty() {
            return Err(PackError::NoPods);
        }
        return mig::run(nodes, pods, mig, protocol);
    }
    place::run(nodes, pods, policy, protocol)
}
