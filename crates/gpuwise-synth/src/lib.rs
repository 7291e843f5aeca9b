//! # gpuwise-synth
//!
//! Deterministic synthetic GPU fleets with *planted truth*, for `gpuwise demo`,
//! `gpuwise generate`, the tests and the benchmarks.
//!
//! A fleet is a list of hosts; each GPU on a host follows a [`Scenario`] (healthy training,
//! idle nights and weekends, a notebook holding memory, …). [`Fleet::samples`] yields each
//! device's samples from a seeded generator; [`Fleet::truth`] computes what a correct report
//! must find (GPU-hours, idle hours, held-idle hours, mean utilization, class) from the
//! planted *states*, by its own simple run-length count, independently of the profile code.
//! [`mod@write`] renders samples as nvidia-smi CSV, DCGM exporter text or dmon logs.
//!
//! Same seed, same bytes: the generator uses only its own seeded RNG and integer time.

pub mod bill;
pub mod fleet;
pub mod write;

pub use fleet::{DeviceSpec, Fleet, FleetOptions, Scenario, Truth};
