//! # gpuwise-sim: what-if on real traces
//!
//! Pure (no files, clock or command line).
//!
//! - [`trace`]: spot capacity per tick from SkyPilot spot-traces JSON, add/remove event CSVs
//!   and generic `time_s,available` CSVs.
//! - [`spot`]: one training job on one trace, tick by tick (changeover, checkpoints,
//!   preemptions, billing), and the policies.
//! - [`montecarlo`]: many start offsets per trace → per-policy distributions
//!   (`gpuwise.spot/v1`).
//! - [`commit`]: how many GPUs to commit to from an hourly busy-GPU series
//!   (`gpuwise.commit/v1`); the advice's `commit_baseline` sizes with it.
//! - [`study`]: traces × policies × starts, per trace and pooled, and the checkpoint interval
//!   (Young/Daly against a sweep on the traces).
//! - [`traffic`]: inference request traces (Azure 2023, Mooncake, generic, ServeGen rates).
//! - [`serving`]: requests replayed on replicas with batching and autoscaling
//!   (`gpuwise.serve/v1`), and the sweep for the cheapest configuration meeting an SLO.

pub mod commit;
pub mod montecarlo;
pub mod omniscient;
pub mod serving;
pub mod spot;
pub mod study;
pub mod trace;
pub mod traffic;
pub mod view;
